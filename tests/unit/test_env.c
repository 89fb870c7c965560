/* SPDX-License-Identifier: MIT */
/*
 * Rank discovery from launcher environments (bootstrap/env.c): collrun, torchrun (root on
 * MASTER_PORT + offset), Slurm (first host of a compressed node list), Open MPI, precedence of
 * COLL_ROOT_ADDR, and clear errors for impossible values (half a launcher's variables, values that
 * do not fit an int, a MASTER_PORT that is no port); jobs told apart by torchrun's run id and
 * MPI jobs across hosts by their root address; no network is used for those. Then
 * coll_init's one-rank world: coll_comm_destroy refuses it, coll_finalize ends it. A standby
 * root reached over loopback advertises the interface the transports would use (a loopback
 * address sent ranks of other hosts to their own, where a refusal read as death).
 */
#include "coll_test.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/standby.h"
#include "bootstrap/wire.h"
#include "param.h"
#include "util.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void env_clear(void)
{
    static const char *vars[] = {"RANK",
                                 "WORLD_SIZE",
                                 "LOCAL_RANK",
                                 "LOCAL_WORLD_SIZE",
                                 "MASTER_ADDR",
                                 "MASTER_PORT",
                                 "TORCHELASTIC_RUN_ID",
                                 "PMI_KVSNAME",
                                 "SLURM_PROCID",
                                 "SLURM_NTASKS",
                                 "SLURM_LOCALID",
                                 "SLURM_JOB_ID",
                                 "SLURM_STEP_ID",
                                 "SLURM_NODELIST",
                                 "SLURM_STEP_NODELIST",
                                 "OMPI_COMM_WORLD_RANK",
                                 "OMPI_COMM_WORLD_SIZE",
                                 "OMPI_COMM_WORLD_LOCAL_RANK",
                                 "OMPI_MCA_ess_base_jobid",
                                 "PMI_RANK",
                                 "PMI_SIZE",
                                 "COLL_RANK",
                                 "COLL_NRANKS",
                                 "COLL_ROOT_ADDR",
                                 "COLL_JOB_SECRET",
                                 "COLL_LOCAL_RANK",
                                 "COLL_LOCAL_NRANKS"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        unsetenv(vars[i]);
    }
    coll_params_reset_for_testing();
}

static coll_result_t discover(coll_env_job_t *job)
{
    coll_params_reset_for_testing();
    return coll_env_discover(job);
}

int main(void)
{
    coll_env_job_t job, job2;
    char           buf[80];

    env_clear();
    ASSERT_OK(discover(&job));
    ASSERT_EQ(job.nranks, 1);
    ASSERT_TRUE(strcmp(job.launcher, "none") == 0);

    /* collrun */
    setenv("COLL_RANK", "2", 1);
    setenv("COLL_NRANKS", "4", 1);
    setenv("COLL_ROOT_ADDR", "127.0.0.1:5555", 1);
    setenv("COLL_JOB_SECRET", "00112233445566778899aabbccddeeff", 1);
    ASSERT_OK(discover(&job));
    ASSERT_EQ(job.rank, 2);
    ASSERT_EQ(job.nranks, 4);
    ASSERT_EQ(coll_sock_port(&job.root_addr), 5555);
    ASSERT_EQ(job.secret[15], 0xff);
    setenv("COLL_JOB_SECRET", "xyz", 1);
    ASSERT_EQ(discover(&job), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "COLL_JOB_SECRET");
    /* collrun's variables win over an enclosing Slurm allocation */
    setenv("COLL_JOB_SECRET", "00112233445566778899aabbccddeeff", 1);
    setenv("SLURM_PROCID", "7", 1);
    setenv("SLURM_NTASKS", "8", 1);
    ASSERT_OK(discover(&job));
    ASSERT_TRUE(strcmp(job.launcher, "collrun") == 0);
    env_clear();

    /* torchrun: root on MASTER_PORT + 1, same derived secret on every rank */
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    ASSERT_OK(discover(&job));
    ASSERT_TRUE(strcmp(job.launcher, "torchrun") == 0);
    ASSERT_EQ(job.rank, 1);
    ASSERT_EQ(coll_sock_port(&job.root_addr), 29501);
    setenv("RANK", "0", 1);
    ASSERT_OK(discover(&job2));
    ASSERT_TRUE(memcmp(job.secret, job2.secret, 16) == 0);
    /* not WORLD_SIZE either: ranks given different sizes meet, and the root names the sizes */
    setenv("WORLD_SIZE", "3", 1);
    ASSERT_OK(discover(&job2));
    ASSERT_TRUE(memcmp(job.secret, job2.secret, 16) == 0);
    setenv("WORLD_SIZE", "2000000", 1); /* more than the bootstrap takes */
    ASSERT_EQ(discover(&job2), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "at most 1048576");
    setenv("WORLD_SIZE", "2147483647", 1);
    ASSERT_EQ(discover(&job2), COLL_ERR_INVALID_ARG);
    setenv("WORLD_SIZE", "2", 1);
    /* a user-given COLL_JOB_SECRET replaces the derived one */
    setenv("COLL_JOB_SECRET", "ffeeddccbbaa99887766554433221100", 1);
    ASSERT_OK(discover(&job2));
    ASSERT_EQ(job2.secret[0], 0xff);
    ASSERT_EQ(job2.secret[15], 0x00);
    ASSERT_TRUE(memcmp(job.secret, job2.secret, 16) != 0);
    setenv("COLL_JOB_SECRET", "ffee", 1);
    ASSERT_EQ(discover(&job2), COLL_ERR_INVALID_ARG);
    unsetenv("COLL_JOB_SECRET");
    setenv("COLL_ROOT_ADDR", "127.0.0.1:4444", 1); /* explicit address wins */
    ASSERT_OK(discover(&job));
    ASSERT_EQ(coll_sock_port(&job.root_addr), 4444);
    unsetenv("COLL_ROOT_ADDR");
    setenv("RANK", "5", 1);
    ASSERT_EQ(discover(&job), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "rank 5 of 2");
    unsetenv("MASTER_ADDR");
    setenv("RANK", "0", 1);
    ASSERT_EQ(discover(&job), COLL_ERR_INVALID_USAGE);
    ASSERT_STR_CONTAINS(coll_last_error(), "MASTER_ADDR");
    env_clear();

    /* half a launcher's variables is a broken launch, not a one-rank run */
    static const char *const partial[][2] = {
        {"COLL_RANK", "1"}, {"COLL_NRANKS", "2"}, {"RANK", "1"}, {"WORLD_SIZE", "4"}};
    for (size_t i = 0; i < sizeof(partial) / sizeof(partial[0]); i++) {
        setenv(partial[i][0], partial[i][1], 1);
        setenv("COLL_ROOT_ADDR", "127.0.0.1:5555", 1);
        ASSERT_EQ(discover(&job), COLL_ERR_INVALID_ARG);
        ASSERT_STR_CONTAINS(coll_last_error(), partial[i][0]);
        ASSERT_STR_CONTAINS(coll_last_error(), "is set but");
        env_clear();
    }
    setenv("COLL_RANK", "-2", 1);
    setenv("COLL_NRANKS", "2", 1);
    setenv("COLL_ROOT_ADDR", "127.0.0.1:5555", 1);
    ASSERT_EQ(discover(&job), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "0 <= COLL_RANK < COLL_NRANKS");
    setenv("COLL_RANK", "0", 1);
    setenv("COLL_NRANKS", "4294967297", 1); /* was taken as 1 */
    ASSERT_EQ(discover(&job), COLL_ERR_INVALID_ARG);
    env_clear();
    setenv("RANK", "4294967296", 1); /* was taken as 0 */
    setenv("WORLD_SIZE", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    ASSERT_EQ(discover(&job), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "4294967296");
    setenv("RANK", "0", 1);
    setenv("MASTER_PORT", "abc", 1);
    ASSERT_EQ(discover(&job), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "MASTER_PORT 'abc'");
    /* the root's port is MASTER_PORT + COLL_BOOTSTRAP_PORT_OFFSET: past 65535 it named port 0
     * (torchrun) or wrapped (Slurm, MPI) */
    setenv("MASTER_PORT", "65535", 1);
    ASSERT_EQ(discover(&job), COLL_ERR_INVALID_ARG);
    ASSERT_STR_CONTAINS(coll_last_error(), "MASTER_PORT 65535 + COLL_BOOTSTRAP_PORT_OFFSET 1");
    setenv("COLL_ROOT_ADDR", "127.0.0.1:5555", 1); /* overrides: the sum is not used */
    ASSERT_OK(discover(&job));
    unsetenv("COLL_ROOT_ADDR");
    setenv("COLL_BOOTSTRAP_PORT_OFFSET", "-1", 1);
    ASSERT_OK(discover(&job));
    unsetenv("COLL_BOOTSTRAP_PORT_OFFSET");
    /* two torchrun jobs on one address and port: their run ids keep them apart ("none", the
     * default, names nothing) */
    setenv("MASTER_PORT", "29500", 1);
    setenv("TORCHELASTIC_RUN_ID", "none", 1);
    ASSERT_OK(discover(&job));
    unsetenv("TORCHELASTIC_RUN_ID");
    ASSERT_OK(discover(&job2));
    ASSERT_TRUE(memcmp(job.secret, job2.secret, 16) == 0);
    setenv("TORCHELASTIC_RUN_ID", "job-a", 1);
    ASSERT_OK(discover(&job));
    setenv("TORCHELASTIC_RUN_ID", "job-b", 1);
    ASSERT_OK(discover(&job2));
    ASSERT_TRUE(memcmp(job.secret, job2.secret, 16) != 0);
    env_clear();

    /* MPICH's Hydra exports no job id: with a root address given, the secret comes from it, not
     * from the parent process (a different proxy on every host) */
    setenv("PMI_RANK", "1", 1);
    setenv("PMI_SIZE", "2", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500", 1);
    ASSERT_OK(discover(&job));
    ASSERT_TRUE(strcmp(job.launcher, "mpich") == 0);
    {
        pid_t pid = fork(); /* another parent: the child's getppid() is this process */
        if (pid == 0) {
            coll_env_job_t cj;
            _exit(discover(&cj) == COLL_OK && memcmp(cj.secret, job.secret, 16) == 0 ? 0 : 1);
        }
        int status = 0;
        ASSERT_TRUE(pid > 0 && waitpid(pid, &status, 0) == pid);
        ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    env_clear();

    /* Slurm: first host of the node list, port from job and step */
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_JOB_ID", "1234", 1);
    setenv("SLURM_STEP_ID", "0", 1);
    setenv("SLURM_NODELIST", "localhost,node[02-04]", 1);
    ASSERT_OK(discover(&job));
    ASSERT_TRUE(strcmp(job.launcher, "slurm") == 0);
    ASSERT_EQ(job.rank, 3);
    coll_sock_str(&job.root_addr, buf, sizeof(buf));
    ASSERT_STR_CONTAINS(buf, "127.0.0.1");
    ASSERT_EQ(coll_sock_port(&job.root_addr), 20000 + (1234 * 131) % 12768);
    env_clear();

    /* Open MPI on one host */
    setenv("RANK", "3", 1); /* a leftover beside another launcher's variables: ignored */
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    setenv("OMPI_MCA_ess_base_jobid", "4242", 1);
    ASSERT_OK(discover(&job));
    ASSERT_TRUE(strcmp(job.launcher, "openmpi") == 0);
    ASSERT_EQ(job.nranks, 3);
    ASSERT_TRUE(coll_sock_port(&job.root_addr) >= 20000);
    ASSERT_TRUE(coll_sock_port(&job.root_addr) < 32768); /* below the ephemeral ports */
    env_clear();

    /* interface filters, NCCL syntax */
    ASSERT_TRUE(coll_sock_ifname_match("eth", "eth0"));
    ASSERT_TRUE(!coll_sock_ifname_match("^eth,lo", "eth1"));
    ASSERT_TRUE(coll_sock_ifname_match("^eth,lo", "ib0"));
    ASSERT_TRUE(!coll_sock_ifname_match("=eth", "eth0"));
    ASSERT_TRUE(coll_sock_ifname_match("=eth0", "eth0"));
    ASSERT_TRUE(!coll_sock_ifname_match(NULL, "lo"));
    ASSERT_TRUE(!coll_sock_ifname_match("", "docker0"));

    /* the standby address of a rank whose bootstrap connection runs over loopback */
    {
        coll_sockaddr_t  lo, pick, adv;
        coll_standby_t   sb;
        coll_boot_addr_t mine;
        uint8_t          secret[16] = {1};
        int              lfd = -1, cfd = -1;
        char             a[80], b[80];
        ASSERT_OK(coll_sock_parse("127.0.0.1:1", &lo));
        coll_sock_set_port(&lo, 0);
        ASSERT_OK(coll_sock_listen(&lo, 4, &lfd));
        ASSERT_OK(coll_sock_connect(&lo, coll_time_s() + 5.0, &cfd));
        ASSERT_OK(coll_standby_open(&sb, cfd, 1, 4, secret, 7, 9, &mine));
        ASSERT_OK(coll_boot_addr_unpack(&mine, &adv));
        ASSERT_OK(coll_sock_pick_addr(0, &pick, NULL, NULL));
        coll_sock_str(&adv, a, sizeof(a));
        coll_sock_str(&pick, b, sizeof(b));
        printf("standby over loopback advertises %s (interface address %s)\n", a, b);
        ASSERT_TRUE(strncmp(a, b, strcspn(b, ":")) == 0 && a[strcspn(b, ":")] == ':');
        coll_standby_close(&sb);
        close(cfd);
        close(lfd);
    }

    /* coll_init's world without a launcher (one rank): coll_comm_destroy refuses it,
     * coll_finalize destroys it, once */
    {
        coll_comm_t *world = NULL;
        env_clear(); /* no launcher: one rank */
        ASSERT_OK(coll_init(NULL, NULL, &world));
        ASSERT_EQ(coll_comm_destroy(world), COLL_ERR_INVALID_USAGE);
        ASSERT_STR_CONTAINS(coll_last_error(), "coll_finalize destroys it");
        int one = 1, sum = 0; /* still usable */
        ASSERT_OK(coll_allreduce(&one, &sum, 1, COLL_INT32, COLL_SUM, world));
        ASSERT_EQ(sum, 1);
        ASSERT_OK(coll_finalize());
        ASSERT_EQ(coll_finalize(), COLL_ERR_INVALID_USAGE);
        env_clear();
    }
    printf("test_env: ok\n1 passed, 0 failed\n");
    return 0;
}
