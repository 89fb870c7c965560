/* SPDX-License-Identifier: MIT */
/*
 * One rank of a fault-injection trial, started by collrun (tests/faults/check-faults.sh).
 * Every rank runs --iters collectives of --count floats (results checked); at iteration --at
 * the victim injects --fault while the collective is in flight:
 *   kill     SIGKILL itself                 stop     SIGSTOP itself
 *   close    shut down its TCP transport connections
 *   corrupt  write junk into its TCP transport connections (between its own writes, so the
 *            junk lands at a frame header or inside a payload)
 *   garbage  (every rank) connect to every listening port of the job and send junk; the job
 *            must be unaffected
 *   none     no fault (also used under a full /dev/shm, where coll_init must fail cleanly)
 * Then every rank joins one closing all-reduce. Each rank writes one line to DIR/rank-R: "ok", or
 * "error CODE T L MESSAGE" (T = wall-clock seconds when the error was returned, L = when it last
 * moved: its last call before it that returned, or the last step of the call that timed out, 0 if
 * neither), or "init-error ...";
 * the victim writes DIR/fault with the time of injection (and, for kill and stop, its pid: the
 * suite ends a stopped victim once every survivor has written its line). Exit: 0 ok, 3 error
 * reported.
 */
#include <coll.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *fault, *coll, *dir;
    int         victim, at, iters, rank, nranks;
    size_t      count;
    unsigned    seed;
} opts_t;

static volatile int fired; /* the fault has been injected */

static opts_t o = {.fault  = "none",
                   .coll   = "allreduce",
                   .dir    = ".",
                   .victim = 1,
                   .at     = 3,
                   .iters  = 10,
                   .count  = 1 << 16,
                   .seed   = 1};

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void put_line(const char *name, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put_line(const char *name, const char *fmt, ...)
{
    char    path[4096], tmp[4200];
    va_list ap;
    snprintf(path, sizeof(path), "%s/%s", o.dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        return;
    }
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
    rename(tmp, path);
}

/* ---- finding sockets of this process ---- */

/* TCP sockets of this process: listening ones (listen=1) or connected ones that are not the
 * bootstrap connection (listen=0). Returns how many fds were stored. */
static int own_sockets(int listening, int *fds, int max)
{
    DIR           *d = opendir("/proc/self/fd");
    struct dirent *e;
    int            n = 0, root_port = 0;
    const char    *ra = getenv("COLL_ROOT_ADDR");
    if (ra != NULL && strrchr(ra, ':') != NULL) {
        root_port = atoi(strrchr(ra, ':') + 1);
    }
    while (d != NULL && (e = readdir(d)) != NULL && n < max) {
        int                     fd = atoi(e->d_name), type = 0, acc = 0;
        socklen_t               len = sizeof(type);
        struct stat             st;
        struct sockaddr_storage peer;
        socklen_t               plen = sizeof(peer);
        if (e->d_name[0] == '.' || fd == dirfd(d) || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) ||
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) {
            continue;
        }
        len = sizeof(acc);
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len);
        if (listening) {
            if (acc) {
                fds[n++] = fd;
            }
            continue;
        }
        if (acc || getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
            peer.ss_family != AF_INET) {
            continue;
        }
        if (ntohs(((struct sockaddr_in *)&peer)->sin_port) == root_port) {
            continue; /* the bootstrap control connection */
        }
        fds[n++] = fd;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

static void *garbage_thread(void *arg)
{
    int      fds[64], n = own_sockets(1, fds, 64), ports[65], np = 0;
    unsigned seed = o.seed * 7919u + (unsigned)o.rank;
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a;
        socklen_t          l = sizeof(a);
        if (getsockname(fds[i], (struct sockaddr *)&a, &l) == 0 && a.sin_family == AF_INET) {
            ports[np++] = ntohs(a.sin_port);
        }
    }
    const char *ra = getenv("COLL_ROOT_ADDR");
    if (ra != NULL && strrchr(ra, ':') != NULL) {
        ports[np++] = atoi(strrchr(ra, ':') + 1);
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < np; i++) {
            struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)ports[i])};
            char               junk[512];
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            int fd            = socket(AF_INET, SOCK_STREAM, 0);
            if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
                if (fd >= 0) {
                    close(fd);
                }
                continue;
            }
            size_t len = (size_t)(rand_r(&seed) % (int)sizeof(junk));
            for (size_t k = 0; k < len; k++) {
                junk[k] = (char)rand_r(&seed);
            }
            ssize_t w = write(fd, junk, len);
            (void)w;
            if (rand_r(&seed) % 2) {
                close(fd); /* else left open: a silent client */
            }
        }
        usleep(2000);
    }
    return NULL;
}

static void *fault_thread(void *arg)
{
    unsigned seed = o.seed;
    usleep((useconds_t)(rand_r(&seed) % 1000)); /* somewhere inside the next collectives */
    if (strcmp(o.fault, "kill") == 0 || strcmp(o.fault, "stop") == 0) {
        put_line("fault", "%.6f pid %d", wall(), (int)getpid());
        __atomic_store_n(&fired, 1, __ATOMIC_SEQ_CST);
        raise(strcmp(o.fault, "kill") == 0 ? SIGKILL : SIGSTOP);
        return NULL;
    }
    int fds[64], n = own_sockets(0, fds, 64);
    if (n == 0) {
        put_line("fault", "%.6f none", wall());
        __atomic_store_n(&fired, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    put_line("fault", "%.6f", wall());
    for (int i = 0; i < n; i++) { /* every transport connection of the victim */
        if (strcmp(o.fault, "close") == 0) {
            shutdown(fds[i], SHUT_RDWR);
        } else {
            char junk[96];
            for (size_t k = 0; k < sizeof(junk); k++) {
                junk[k] = (char)rand_r(&seed);
            }
            ssize_t w = send(fds[i], junk, sizeof(junk), MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
        }
    }
    __atomic_store_n(&fired, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* ---- the collectives ---- */

static double call_wall; /* when the last collective was called */

static coll_result_t run_one(coll_comm_t *c, float *a, float *b, int it)
{
    size_t n = o.count, per = n / (size_t)o.nranks;
    for (size_t i = 0; i < n; i++) {
        a[i] = (float)((o.rank + 1) * ((int)i % 7 + it));
    }
    float         sum_ranks = (float)(o.nranks * (o.nranks + 1) / 2);
    coll_result_t st;
    call_wall = wall();
    if (strcmp(o.coll, "allreduce") == 0) {
        st = coll_allreduce(a, b, n, COLL_FLOAT32, COLL_SUM, c);
        for (size_t i = 0; st == COLL_OK && i < n; i++) {
            if (b[i] != sum_ranks * (float)((int)i % 7 + it)) {
                return COLL_ERR_INTERNAL;
            }
        }
    } else if (strcmp(o.coll, "reduce_scatter") == 0) {
        st = coll_reduce_scatter(a, b, per, COLL_FLOAT32, COLL_SUM, c);
        for (size_t i = 0; st == COLL_OK && i < per; i++) {
            size_t g = (size_t)o.rank * per + i;
            if (b[i] != sum_ranks * (float)((int)g % 7 + it)) {
                return COLL_ERR_INTERNAL;
            }
        }
    } else if (strcmp(o.coll, "allgather") == 0) {
        st = coll_allgather(a, b, per, COLL_FLOAT32, c);
        for (size_t i = 0; st == COLL_OK && i < per * (size_t)o.nranks; i++) {
            size_t r = i / per, k = i % per;
            if (b[i] != (float)((int)(r + 1) * ((int)k % 7 + it))) {
                return COLL_ERR_INTERNAL;
            }
        }
    } else if (strcmp(o.coll, "broadcast") == 0) {
        st = coll_broadcast(a, a, n, COLL_FLOAT32, 0, c);
        for (size_t i = 0; st == COLL_OK && i < n; i++) {
            if (a[i] != (float)((int)i % 7 + it)) {
                return COLL_ERR_INTERNAL;
            }
        }
    } else if (strcmp(o.coll, "reduce") == 0) {
        st = coll_reduce(a, b, n, COLL_FLOAT32, COLL_SUM, 0, c);
        for (size_t i = 0; st == COLL_OK && o.rank == 0 && i < n; i++) {
            if (b[i] != sum_ranks * (float)((int)i % 7 + it)) {
                return COLL_ERR_INTERNAL;
            }
        }
    } else if (strcmp(o.coll, "alltoall") == 0) {
        st = coll_alltoall(a, b, per, COLL_FLOAT32, c);
    } else {
        st = coll_barrier(c);
    }
    return st;
}

int main(int argc, char **argv)
{
    coll_comm_t *comm;
    char         name[32];
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--fault") == 0) {
            o.fault = argv[i + 1];
        } else if (strcmp(argv[i], "--coll") == 0) {
            o.coll = argv[i + 1];
        } else if (strcmp(argv[i], "--dir") == 0) {
            o.dir = argv[i + 1];
        } else if (strcmp(argv[i], "--victim") == 0) {
            o.victim = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--at") == 0) {
            o.at = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--iters") == 0) {
            o.iters = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--count") == 0) {
            o.count = (size_t)atol(argv[i + 1]);
        } else if (strcmp(argv[i], "--seed") == 0) {
            o.seed = (unsigned)atol(argv[i + 1]);
        } else {
            fprintf(stderr, "fault_rank: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    o.rank = atoi(getenv("COLL_RANK") != NULL ? getenv("COLL_RANK") : "0");
    snprintf(name, sizeof(name), "rank-%d", o.rank);
    coll_result_t st = coll_init(&argc, &argv, &comm);
    if (st != COLL_OK) {
        put_line(name, "init-error %d %.6f %s", (int)st, wall(), coll_last_error());
        return 3;
    }
    coll_comm_size(comm, &o.nranks);
    o.count -= o.count % (size_t)o.nranks;
    float    *a = calloc(o.count * (size_t)o.nranks, sizeof(float));
    float    *b = calloc(o.count * (size_t)o.nranks, sizeof(float));
    pthread_t t;
    int       have_thread = 0, injecting = 0;
    double    last_ok = 0.0; /* a survivor may go on for a while after the fault */
    if (strcmp(o.fault, "garbage") == 0) {
        have_thread = pthread_create(&t, NULL, garbage_thread, NULL) == 0;
    }
    for (int it = 0; it < o.iters && st == COLL_OK; it++) {
        if (it == o.at && o.rank == o.victim && strcmp(o.fault, "none") != 0 &&
            strcmp(o.fault, "garbage") != 0) {
            have_thread = injecting = pthread_create(&t, NULL, fault_thread, NULL) == 0;
        }
        /* the fault lands while collectives remain: the victim goes no further until then */
        while (it == o.at + 2 && injecting && !__atomic_load_n(&fired, __ATOMIC_SEQ_CST)) {
            usleep(100);
        }
        st = run_one(comm, a, b, it);
        if (st == COLL_OK) {
            last_ok = wall();
        }
    }
    if (have_thread) {
        pthread_join(t, NULL);
    }
    /* a closing all-reduce that needs every rank: a rank whose calls never depended on the
     * victim (a reduce's sender) must learn of the fault here at the latest */
    if (st == COLL_OK) {
        int one = 1, all = 0;
        call_wall = wall();
        st        = coll_allreduce(&one, &all, 1, COLL_INT32, COLL_SUM, comm);
        if (st == COLL_OK && all != o.nranks) {
            st = COLL_ERR_INTERNAL;
        }
    }
    if (st != COLL_OK) {
        const char *msg   = st == COLL_ERR_INTERNAL ? "wrong result" : coll_comm_last_error(comm);
        const char *moved = strstr(msg, " after moving for ");
        double      secs  = 0.0;
        /* a timed-out call that moved for a while (a reduce's sender filling a stopped root's
         * socket buffers) last moved that long after it was called, no earlier */
        if (moved != NULL && sscanf(moved, " after moving for %lf", &secs) == 1 &&
            call_wall + secs > last_ok) {
            last_ok = call_wall + secs;
        }
        put_line(name, "error %d %.6f %.6f %s", (int)st, wall(), last_ok, msg);
        coll_comm_abort(comm); /* tell the others, then leave as an application would */
        _exit(3);
    }
    put_line(name, "ok");
    free(a);
    free(b);
    return coll_finalize() == COLL_OK ? 0 : 3;
}
