/* SPDX-License-Identifier: MIT */
/*
 * Rank discovery for coll_init(): reads what the launcher exported. In order: collrun
 * (COLL_RANK...), torchrun / torch.distributed (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
 * Slurm (SLURM_PROCID...), Open MPI (OMPI_COMM_WORLD_*), MPICH/PMI (PMI_RANK, PMI_SIZE).
 * It does not launch anything and never guesses a multi-host root address silently.
 */
#include "bootstrap.h"
#include "error.h"
#include "log.h"
#include "param.h"
#include "util.h"
#include "wire.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Root ports derived from job identifiers lie in 20000-32767, below Linux's default ephemeral
 * range (32768-60999): the kernel gives ports of that range to any outgoing connection or bind
 * to port 0 on the root's host, and the TIME_WAIT such a connection leaves would keep rank 0
 * from listening on its port for a minute.
 */
#define ENV_PORT_BASE 20000u
#define ENV_PORT_SPAN 12768u

static int env_int(const char *name, int *out)
{
    const char *v = coll_env_get(name);
    char       *end;
    if (v == NULL || v[0] == '\0') {
        return 0;
    }
    errno  = 0;
    long x = strtol(v, &end, 10);
    if (*end != '\0' || errno == ERANGE || x < INT_MIN || x > INT_MAX) {
        return -1; /* not a number, or one that does not fit: never wrapped into another */
    }
    *out = (int)x;
    return 1;
}

static coll_result_t env_secret_from_hex(const char *hex, uint8_t secret[16])
{
    if (strlen(hex) != 32) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "COLL_JOB_SECRET must be 32 hex digits, got %zu characters",
                                   strlen(hex));
    }
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (!isxdigit((unsigned char)hex[2 * i]) || !isxdigit((unsigned char)hex[2 * i + 1]) ||
            sscanf(hex + 2 * i, "%2x", &v) != 1) {
            return coll_set_last_error(COLL_ERR_INVALID_ARG, "COLL_JOB_SECRET is not hex");
        }
        secret[i] = (uint8_t)v;
    }
    return COLL_OK;
}

/* No secret channel: derive one from job identifiers every rank sees (documented as weak). */
static void env_secret_derive(const char *ids, uint8_t secret[16])
{
    uint64_t a = coll_hash_bytes(ids, strlen(ids), 0x736563726574ull);
    uint64_t b = coll_hash_bytes(ids, strlen(ids), a);
    memcpy(secret, &a, 8);
    memcpy(secret + 8, &b, 8);
}

/* "host" + port, or COLL_ROOT_ADDR which wins over everything. */
static coll_result_t env_root(coll_env_job_t *job, const char *host, int port, const char *what)
{
    char        text[300];
    const char *explicit_addr = coll_param_str(COLL_P_ROOT_ADDR);
    if (explicit_addr != NULL && explicit_addr[0] != '\0') {
        coll_strlcpy(text, explicit_addr, sizeof(text));
    } else if (host != NULL && port > 0) {
        snprintf(text, sizeof(text), "%s:%d", host, port);
    } else {
        return coll_set_last_error(COLL_ERR_INVALID_USAGE,
                                   "launched by %s but the bootstrap root address is unknown: set "
                                   "COLL_ROOT_ADDR=host:port (or MASTER_ADDR and MASTER_PORT)",
                                   what);
    }
    coll_result_t st = coll_sock_parse(text, &job->root_addr);
    if (st != COLL_OK) {
        return coll_set_last_error(st, "bootstrap root address '%s' is not usable", text);
    }
    return COLL_OK;
}

/* The root's port from MASTER_PORT (mp, as read): plus COLL_BOOTSTRAP_PORT_OFFSET, both
 * checked to be ports, unless COLL_ROOT_ADDR (which env_root takes instead) is set. */
static coll_result_t env_offset_port(int mp, int *port_out)
{
    int64_t     off = coll_param_int(COLL_P_BOOTSTRAP_PORT_OFFSET);
    const char *ra  = coll_param_str(COLL_P_ROOT_ADDR);
    if (ra != NULL && ra[0] != '\0') { /* COLL_ROOT_ADDR overrides: the port is not used */
        *port_out = mp;
        return COLL_OK;
    }
    if (mp < 1 || mp > 65535) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "MASTER_PORT '%s' is not a port number (1-65535)",
                                   coll_env_get("MASTER_PORT"));
    }
    if ((int64_t)mp + off < 1 || (int64_t)mp + off > 65535) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "MASTER_PORT %d + COLL_BOOTSTRAP_PORT_OFFSET %lld = %lld is "
                                   "not a port number (1-65535)",
                                   mp, (long long)off, (long long)mp + (long long)off);
    }
    *port_out = mp + (int)off;
    return COLL_OK;
}

/* First host of a Slurm node list: "node[01-04,07],gpu3" -> "node01". */
static void env_first_slurm_host(const char *list, char *out, size_t len)
{
    size_t i = 0, o = 0;
    while (list[i] != '\0' && list[i] != ',' && list[i] != '[' && o + 1 < len) {
        out[o++] = list[i++];
    }
    if (list[i] == '[') {
        i++;
        while (isdigit((unsigned char)list[i]) && o + 1 < len) {
            out[o++] = list[i++];
        }
    }
    out[o] = '\0';
}

static coll_result_t env_from_torch(coll_env_job_t *job)
{
    int port = 0;
    if (env_int("WORLD_SIZE", &job->nranks) != 1 || env_int("RANK", &job->rank) != 1) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "RANK ('%s') and WORLD_SIZE ('%s') must be integers below 2^31",
                                   coll_env_get("RANK"), coll_env_get("WORLD_SIZE"));
    }
    env_int("LOCAL_RANK", &job->local_rank);
    env_int("LOCAL_WORLD_SIZE", &job->local_nranks);
    int pst = env_int("MASTER_PORT", &port);
    if (pst < 0) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "MASTER_PORT '%s' is not a port number (1-65535)",
                                   coll_env_get("MASTER_PORT"));
    }
    if (pst == 1) {
        COLL_CHECK(env_offset_port(port, &port));
    }
    const char *addr = coll_env_get("MASTER_ADDR");
    /* Jobs that share MASTER_ADDR and MASTER_PORT are told apart by torchrun's --rdzv-id (its
     * default "none" names nothing), which every node of a run is given. Not Slurm's ids: the
     * nodes of one run may be started by separate srun steps, or some outside srun. Not
     * WORLD_SIZE: ranks given different sizes must still meet, so that the root can say that
     * the sizes differ rather than that the secrets do. */
    const char *run = coll_env_get("TORCHELASTIC_RUN_ID");
    char        ids[600];
    snprintf(ids, sizeof(ids), "torch:%s:%d:%s", addr ? addr : "", port,
             run != NULL && strcmp(run, "none") != 0 ? run : "");
    env_secret_derive(ids, job->secret);
    job->launcher = "torchrun";
    return env_root(job, addr, port, "torchrun (RANK/WORLD_SIZE)");
}

static coll_result_t env_from_slurm(coll_env_job_t *job)
{
    int  jobid = 0, stepid = 0;
    char host[256] = "";
    env_int("SLURM_PROCID", &job->rank);
    env_int("SLURM_NTASKS", &job->nranks);
    env_int("SLURM_LOCALID", &job->local_rank);
    env_int("SLURM_JOB_ID", &jobid);
    env_int("SLURM_STEP_ID", &stepid);
    const char *nodes = coll_env_get("SLURM_STEP_NODELIST");
    if (nodes == NULL) {
        nodes = coll_env_get("SLURM_NODELIST");
    }
    if (nodes != NULL) {
        env_first_slurm_host(nodes, host, sizeof(host));
    }
    char ids[300];
    snprintf(ids, sizeof(ids), "slurm:%d:%d:%s", jobid, stepid, nodes ? nodes : "");
    env_secret_derive(ids, job->secret);
    job->launcher = "slurm";
    int port = (int)(ENV_PORT_BASE + ((unsigned)jobid * 131u + (unsigned)stepid) % ENV_PORT_SPAN);
    const char *ma = coll_env_get("MASTER_ADDR");
    int         mp = 0;
    if (ma != NULL && env_int("MASTER_PORT", &mp) == 1) {
        COLL_CHECK(env_offset_port(mp, &mp));
        return env_root(job, ma, mp, "slurm");
    }
    return env_root(job, host[0] != '\0' ? host : NULL, port, "slurm (SLURM_PROCID)");
}

static coll_result_t env_from_mpi(coll_env_job_t *job, const char *rank_var, const char *size_var,
                                  const char *local_var, const char *id_var, const char *name)
{
    env_int(rank_var, &job->rank);
    env_int(size_var, &job->nranks);
    if (local_var != NULL) {
        env_int(local_var, &job->local_rank);
    }
    const char *jid = id_var != NULL ? coll_env_get(id_var) : NULL;
    const char *ma  = coll_env_get("MASTER_ADDR");
    const char *ra  = coll_param_str(COLL_P_ROOT_ADDR);
    int         mp  = 0,
        given = (ma != NULL && env_int("MASTER_PORT", &mp) == 1) || (ra != NULL && ra[0] != '\0');
    char ids[600];
    /* Without a job id, the launcher's per-host daemon (our parent) identifies the job on one
     * host. A root address given by the user names the job on every host instead: the parent
     * differs between hosts (MPICH's Hydra exports no job id). */
    if (jid != NULL || !given) {
        snprintf(ids, sizeof(ids), "%s:%s:%d:%d", name, jid ? jid : "", job->nranks,
                 jid ? 0 : (int)getppid());
    } else {
        snprintf(ids, sizeof(ids), "%s::%d:%s:%d:%s", name, job->nranks, ma ? ma : "", mp,
                 ra ? ra : "");
    }
    env_secret_derive(ids, job->secret);
    job->launcher = name;
    if (ma != NULL && env_int("MASTER_PORT", &mp) == 1) {
        COLL_CHECK(env_offset_port(mp, &mp));
        return env_root(job, ma, mp, name);
    }
    /* one host: the root is local, on a port derived from the job id */
    int port = (int)(ENV_PORT_BASE + coll_hash_bytes(ids, strlen(ids), 7) % ENV_PORT_SPAN);
    return env_root(job, "127.0.0.1", port, name);
}

static int env_has(const char *name)
{
    const char *v = coll_env_get(name);
    return v != NULL && v[0] != '\0';
}

/* A launcher's variables half there (one of a pair, or a value that is no count) are a broken
 * launch, not a plain one-rank run: say which. RANK or WORLD_SIZE alone beside another
 * launcher's variables is a leftover, and that launcher runs the job. */
static coll_result_t env_check_partial(void)
{
    int other = env_has("OMPI_COMM_WORLD_RANK") || env_has("PMI_RANK") || env_has("SLURM_PROCID");
    static const struct {
        const char *a, *b, *who;
    } pairs[] = {{"COLL_RANK", "COLL_NRANKS", "collrun sets"},
                 {"RANK", "WORLD_SIZE", "torchrun and torch.distributed's env:// set"}};
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        int ha = env_has(pairs[i].a), hb = env_has(pairs[i].b);
        if (ha != hb && (i == 0 || !other)) {
            return coll_set_last_error(COLL_ERR_INVALID_ARG, "%s is set but %s is not (%s both)",
                                       ha ? pairs[i].a : pairs[i].b, ha ? pairs[i].b : pairs[i].a,
                                       pairs[i].who);
        }
    }
    const char *r = coll_env_get("COLL_RANK"), *n = coll_env_get("COLL_NRANKS");
    long        rv = coll_param_int(COLL_P_RANK), nv = coll_param_int(COLL_P_NRANKS);
    if (env_has("COLL_RANK") && env_has("COLL_NRANKS") &&
        (rv < 0 || nv < 1 || rv >= nv || nv > INT_MAX)) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "COLL_RANK '%s' and COLL_NRANKS '%s': expected integers with "
                                   "0 <= COLL_RANK < COLL_NRANKS",
                                   r, n);
    }
    return COLL_OK;
}

coll_result_t coll_env_discover(coll_env_job_t *job)
{
    coll_result_t st;
    memset(job, 0, sizeof(*job));
    job->rank = job->nranks = job->local_rank = job->local_nranks = -1;
    COLL_CHECK(env_check_partial());
    if (coll_param_int(COLL_P_RANK) >= 0 && coll_param_int(COLL_P_NRANKS) > 0) {
        job->rank         = (int)coll_param_int(COLL_P_RANK);
        job->nranks       = (int)coll_param_int(COLL_P_NRANKS);
        job->local_rank   = (int)coll_param_int(COLL_P_LOCAL_RANK);
        job->local_nranks = (int)coll_param_int(COLL_P_LOCAL_NRANKS);
        job->launcher     = "collrun";
        const char *hex   = coll_param_str(COLL_P_JOB_SECRET);
        if (hex != NULL && hex[0] != '\0') {
            COLL_CHECK(env_secret_from_hex(hex, job->secret));
        } else {
            env_secret_derive("collrun", job->secret);
        }
        st = env_root(job, NULL, 0, "collrun (COLL_RANK)");
    } else if (coll_env_get("RANK") != NULL && coll_env_get("WORLD_SIZE") != NULL) {
        st = env_from_torch(job);
    } else if (coll_env_get("OMPI_COMM_WORLD_RANK") != NULL) {
        st = env_from_mpi(job, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                          "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_MCA_ess_base_jobid", "openmpi");
    } else if (coll_env_get("PMI_RANK") != NULL) {
        st = env_from_mpi(job, "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMI_KVSNAME", "mpich");
    } else if (coll_env_get("SLURM_PROCID") != NULL) {
        st = env_from_slurm(job);
    } else {
        /* a plain run: one rank */
        job->rank     = 0;
        job->nranks   = 1;
        job->launcher = "none";
        coll_random_bytes(job->secret, 16);
        st = coll_sock_parse("127.0.0.1:1", &job->root_addr);
        coll_sock_set_port(&job->root_addr, 0);
    }
    if (st != COLL_OK) {
        return st;
    }
    const char *hex = coll_param_str(COLL_P_JOB_SECRET);
    if (strcmp(job->launcher, "collrun") != 0 && strcmp(job->launcher, "none") != 0 &&
        hex != NULL && hex[0] != '\0') {
        COLL_CHECK(env_secret_from_hex(hex, job->secret)); /* a real secret, given by the user */
    }
    if (job->nranks < 1 || job->rank < 0 || job->rank >= job->nranks) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "%s gave rank %d of %d ranks: expected 0 <= rank < nranks",
                                   job->launcher, job->rank, job->nranks);
    }
    if (job->nranks > COLL_BOOT_MAX_RANKS) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG,
                                   "%s gave %d ranks: libcoll supports at most %d", job->launcher,
                                   job->nranks, COLL_BOOT_MAX_RANKS);
    }
    coll_info(INIT, "launched by %s: rank %d of %d", job->launcher, job->rank, job->nranks);
    return COLL_OK;
}
