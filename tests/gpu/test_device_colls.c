/* SPDX-License-Identifier: MIT */
/*
 * Collectives on CUDA device memory, with several ranks sharing one GPU: every collective and
 * send/recv, out of place and in place, through the three ways of calling them (blocking host
 * call on device pointers, non-blocking + coll_wait, and enqueued on a stream between the
 * stream's own copies with no host synchronisation in between), checked element by element
 * with a guard past the output. First ordering: stream calls mixed with host calls on one
 * communicator, many calls in flight on one stream; and sends and receives that must be in
 * flight together (dc_msgs). Exits 77 without a CUDA device.
 * Usage: test_device_colls [-n NRANKS]
 */
#include "coll_test.h"
#include "gpu_probe.h"
#include "mp_data.h"

#include <cuda_runtime.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GUARD 256

enum {
    C_ALLREDUCE,
    C_REDUCE_SCATTER,
    C_ALLGATHER,
    C_BROADCAST,
    C_REDUCE,
    C_ALLTOALL,
    C_SENDRECV,
    C_COUNT
};
static const char *const cname[] = {"allreduce", "reduce_scatter", "allgather", "broadcast",
                                    "reduce",    "alltoall",       "sendrecv"};
enum { M_BLOCKING, M_NONBLOCKING, M_STREAM, M_COUNT };
static const char *const mname[] = {"blocking", "non-blocking", "stream"};

#define CUDA_OK(_x)                                                                                \
    do {                                                                                           \
        cudaError_t _e = (_x);                                                                     \
        ASSERT_(_e == cudaSuccess, "%s: %s", #_x, cudaGetErrorString(_e));                         \
    } while (0)

typedef struct {
    int    c, rank, n, root;
    size_t count;
} dc_case_t;

static double a2a_value(int from, int to, size_t j)
{
    return (double)(((size_t)from * 7 + (size_t)to * 3 + j) % 100 + 1);
}

static void dc_sizes(const dc_case_t *k, size_t *in, size_t *out)
{
    size_t c = k->count, all = c * (size_t)k->n;
    *in = *out = c;
    if (k->c == C_REDUCE_SCATTER) {
        *in = all;
    } else if (k->c == C_ALLGATHER) {
        *out = all;
    } else if (k->c == C_ALLTOALL) {
        *in = *out = all;
    }
}

static double dc_expect(coll_dtype_t dt, coll_redop_t op, int n, size_t idx, void *vk)
{
    const dc_case_t *k = vk;
    uint64_t         tmp[1];
    double           v;
    switch (k->c) {
    case C_REDUCE_SCATTER:
        return mp_expect(dt, op, n, (size_t)k->rank * k->count + idx);
    case C_ALLGATHER:
        v = mp_input(COLL_SUM, (int)(idx / k->count), idx % k->count);
        break;
    case C_BROADCAST:
        v = mp_input(COLL_SUM, k->root, idx);
        break;
    case C_ALLTOALL:
        v = a2a_value((int)(idx / k->count), k->rank, idx % k->count);
        break;
    case C_SENDRECV: /* rank r receives from r - 1 */
        v = mp_input(COLL_SUM, (k->rank + n - 1) % n, idx);
        break;
    default:
        return mp_expect(dt, op, n, idx);
    }
    mp_store(dt, tmp, 0, v);
    return mp_load(dt, tmp, 0);
}

static void dc_fill(const dc_case_t *k, coll_dtype_t dt, coll_redop_t op, char *in)
{
    size_t in_n, out_n;
    dc_sizes(k, &in_n, &out_n);
    if (k->c == C_ALLTOALL) {
        for (int p = 0; p < k->n; p++) {
            for (size_t j = 0; j < k->count; j++) {
                mp_store(dt, in, (size_t)p * k->count + j, a2a_value(k->rank, p, j));
            }
        }
    } else if (k->c == C_ALLGATHER || k->c == C_BROADCAST || k->c == C_SENDRECV) {
        mp_fill(dt, COLL_SUM, in, k->count, k->rank, 0);
    } else {
        mp_fill(dt, op, in, in_n, k->rank, 0);
    }
}

/* The call itself, in one of the three ways. */
static coll_result_t dc_call(coll_comm_t *comm, const dc_case_t *k, int mode, const void *s,
                             void *r, coll_dtype_t dt, coll_redop_t op, cudaStream_t stream)
{
    coll_request_t *req = NULL, *req2 = NULL;
    coll_result_t   st = COLL_OK;
    int             to = (k->rank + 1) % k->n, from = (k->rank + k->n - 1) % k->n;
    size_t          c = k->count;

    if (mode == M_STREAM) {
        switch (k->c) {
        case C_ALLREDUCE:
            return coll_allreduce_stream(s, r, c, dt, op, comm, stream);
        case C_REDUCE_SCATTER:
            return coll_reduce_scatter_stream(s, r, c, dt, op, comm, stream);
        case C_ALLGATHER:
            return coll_allgather_stream(s, r, c, dt, comm, stream);
        case C_BROADCAST:
            return coll_broadcast_stream(s, r, c, dt, k->root, comm, stream);
        case C_REDUCE:
            return coll_reduce_stream(s, r, c, dt, op, k->root, comm, stream);
        case C_ALLTOALL:
            return coll_alltoall_stream(s, r, c, dt, comm, stream);
        default: /* a ring of sends; even ranks send first */
            if (k->n == 1) {
                return COLL_OK;
            }
            if (k->rank % 2 == 0) {
                st = coll_send_stream(s, c, dt, to, comm, stream);
                return st != COLL_OK ? st : coll_recv_stream(r, c, dt, from, comm, stream);
            }
            st = coll_recv_stream(r, c, dt, from, comm, stream);
            return st != COLL_OK ? st : coll_send_stream(s, c, dt, to, comm, stream);
        }
    }
    switch (k->c) {
    case C_ALLREDUCE:
        st = mode == M_BLOCKING ? coll_allreduce(s, r, c, dt, op, comm)
                                : coll_iallreduce(s, r, c, dt, op, comm, &req);
        break;
    case C_REDUCE_SCATTER:
        st = mode == M_BLOCKING ? coll_reduce_scatter(s, r, c, dt, op, comm)
                                : coll_ireduce_scatter(s, r, c, dt, op, comm, &req);
        break;
    case C_ALLGATHER:
        st = mode == M_BLOCKING ? coll_allgather(s, r, c, dt, comm)
                                : coll_iallgather(s, r, c, dt, comm, &req);
        break;
    case C_BROADCAST:
        st = mode == M_BLOCKING ? coll_broadcast(s, r, c, dt, k->root, comm)
                                : coll_ibroadcast(s, r, c, dt, k->root, comm, &req);
        break;
    case C_REDUCE:
        st = mode == M_BLOCKING ? coll_reduce(s, r, c, dt, op, k->root, comm)
                                : coll_ireduce(s, r, c, dt, op, k->root, comm, &req);
        break;
    case C_ALLTOALL:
        st = mode == M_BLOCKING ? coll_alltoall(s, r, c, dt, comm)
                                : coll_ialltoall(s, r, c, dt, comm, &req);
        break;
    default:
        if (k->n == 1) {
            return COLL_OK;
        }
        st = coll_isend(s, c, dt, to, comm, &req);
        if (st == COLL_OK) {
            st = coll_irecv(r, c, dt, from, comm, &req2);
        }
        break;
    }
    if (st == COLL_OK && req2 != NULL) {
        coll_request_t *both[2] = {req, req2};
        return coll_waitall(2, both);
    }
    return st == COLL_OK && req != NULL ? coll_wait(req) : st;
}

/* One case: returns wrong elements. */
static size_t dc_case(coll_comm_t *comm, dc_case_t *k, int mode, coll_dtype_t dt, coll_redop_t op,
                      int in_place, cudaStream_t stream)
{
    size_t esz = coll_dtype_size(dt), in_n, out_n, wrong = 0;
    dc_sizes(k, &in_n, &out_n);
    size_t big = (in_n > out_n ? in_n : out_n) * esz + GUARD;
    char  *hs = malloc(big), *hr = malloc(big), *ds, *dr;
    CUDA_OK(cudaMalloc((void **)&ds, big));
    CUDA_OK(cudaMalloc((void **)&dr, big));
    memset(hs, 0x5a, big);
    memset(hr, 0xa5, big);
    char *send = ds, *recv = dr, *hin = hs, *hout_base = hr;
    if (!in_place) {
        dc_fill(k, dt, op, hs);
    } else if (k->c == C_REDUCE_SCATTER) {
        dc_fill(k, dt, op, hs);
        recv      = ds + (size_t)k->rank * k->count * esz;
        hout_base = hs;
    } else if (k->c == C_ALLGATHER) {
        mp_fill(dt, COLL_SUM, hr + (size_t)k->rank * k->count * esz, k->count, k->rank, 0);
        send = dr + (size_t)k->rank * k->count * esz;
        hin  = hr;
    } else {
        dc_fill(k, dt, op, hr);
        send = recv = dr;
        hin         = hr;
    }
    size_t out_off = (size_t)(recv - (hout_base == hs ? ds : dr));
    char  *dbase   = hout_base == hs ? ds : dr;
    char  *dinbase = hin == hs ? ds : dr;
    if (mode == M_STREAM) { /* everything on the stream, no host synchronisation between */
        CUDA_OK(cudaMemcpyAsync(ds, hs, big, cudaMemcpyHostToDevice, stream));
        CUDA_OK(cudaMemcpyAsync(dr, hr, big, cudaMemcpyHostToDevice, stream));
    } else {
        CUDA_OK(cudaMemcpy(dinbase, hin, big, cudaMemcpyHostToDevice));
        if (dinbase != dr) {
            CUDA_OK(cudaMemcpy(dr, hr, big, cudaMemcpyHostToDevice));
        }
    }
    coll_result_t st = dc_call(comm, k, mode, send, recv, dt, op, stream);
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: %s %s failed: %s: %s\n", k->rank, cname[k->c], mname[mode],
                coll_strerror(st), coll_comm_last_error(comm));
        exit(5);
    }
    if (mode == M_STREAM) {
        CUDA_OK(cudaMemcpyAsync(hout_base, dbase, big, cudaMemcpyDeviceToHost, stream));
        CUDA_OK(cudaStreamSynchronize(stream));
        ASSERT_OK(coll_comm_get_error(comm));
    } else {
        CUDA_OK(cudaMemcpy(hout_base, dbase, big, cudaMemcpyDeviceToHost));
    }
    int significant =
        !(k->c == C_REDUCE && k->rank != k->root) && !(k->c == C_SENDRECV && k->n == 1);
    if (significant) {
        char what[160];
        snprintf(what, sizeof(what), "%s %s n=%d count=%zu %s root=%d %s", cname[k->c], mname[mode],
                 k->n, k->count, in_place ? "in-place" : "out-of-place", k->root,
                 coll_dtype_name(dt));
        wrong += mp_check(dt, hout_base + out_off, out_n, what, k->rank, dc_expect, op, k->n, 0, k);
        const unsigned char *g    = (unsigned char *)hout_base + out_off + out_n * esz;
        unsigned char        gval = hout_base == hs ? 0x5a : 0xa5;
        if (!(in_place && k->c == C_REDUCE_SCATTER)) {
            for (int i = 0; i < GUARD && g + i < (unsigned char *)hout_base + big; i++) {
                if (g[i] != gval) {
                    fprintf(stderr, "rank %d: %s: byte %d past the output was written\n", k->rank,
                            what, i);
                    wrong++;
                    break;
                }
            }
        }
    }
    CUDA_OK(cudaFree(ds));
    CUDA_OK(cudaFree(dr));
    free(hs);
    free(hr);
    return wrong;
}

/* Ordering: 8 all-reduces in flight on one stream, each adding to the previous result, with a
 * host all-reduce between the enqueues, then one synchronisation; then a burst of 64 on one
 * stream, back to back. */
static size_t dc_order(coll_comm_t *comm, int rank, int n, cudaStream_t stream)
{
    enum { N = 100003, ROUNDS = 8 };
    float *d, *h = malloc(N * sizeof(float));
    int    hv = rank + 1, hsum = 0;
    size_t wrong = 0;
    CUDA_OK(cudaMalloc((void **)&d, N * sizeof(float)));
    for (size_t i = 0; i < N; i++) {
        h[i] = (float)(i % 7 + 1);
    }
    CUDA_OK(cudaMemcpyAsync(d, h, N * sizeof(float), cudaMemcpyHostToDevice, stream));
    for (int r = 0; r < ROUNDS; r++) {
        ASSERT_OK(coll_allreduce_stream(d, d, N, COLL_FLOAT32, COLL_SUM, comm, stream));
        ASSERT_OK(coll_allreduce(&hv, &hsum, 1, COLL_INT32, COLL_SUM, comm));
        ASSERT_EQ(hsum, n * (n + 1) / 2);
    }
    CUDA_OK(cudaMemcpyAsync(h, d, N * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    double scale = 1;
    for (int r = 0; r < ROUNDS; r++) {
        scale *= n;
    }
    for (size_t i = 0; i < N && wrong < 5; i++) {
        double want = (double)(i % 7 + 1) * scale;
        if ((double)h[i] != want) {
            fprintf(stderr, "rank %d: ordering: element %zu is %g, expected %g\n", rank, i,
                    (double)h[i], want);
            wrong++;
        }
    }
    /* a burst of stream-ordered calls with nothing between them: the driver blocks queueing
     * once the stream holds enough work waiting for the proxy, and must not do so while the
     * proxy needs what the caller holds */
    enum { BURST = 64, BN = 4099 };
    for (size_t i = 0; i < BN; i++) {
        h[i] = (float)(rank + 1);
    }
    CUDA_OK(cudaMemcpyAsync(d, h, BN * sizeof(float), cudaMemcpyHostToDevice, stream));
    for (int r = 0; r < BURST; r++) {
        ASSERT_OK(coll_allreduce_stream(d, d, BN, COLL_FLOAT32, COLL_MAX, comm, stream));
    }
    CUDA_OK(cudaMemcpyAsync(h, d, BN * sizeof(float), cudaMemcpyDeviceToHost, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < BN && wrong < 10; i++) {
        if (h[i] != (float)n) {
            fprintf(stderr, "rank %d: burst: element %zu is %g, expected %d\n", rank, i,
                    (double)h[i], n);
            wrong++;
        }
    }
    CUDA_OK(cudaFree(d));
    free(h);
    return wrong;
}

/* Wrong elements of a received message (on the device) from rank `from`. */
static size_t dc_msgs_check(float *h, const float *drecv, size_t m, int from, int rank,
                            const char *which)
{
    size_t wrong = 0;
    CUDA_OK(cudaMemcpy(h, drecv, m * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < m && wrong < 5; i++) {
        if (h[i] != (float)(from * 1000 + (int)(i % 997))) {
            fprintf(stderr, "rank %d: msgs %s: element %zu is %g\n", rank, which, i, (double)h[i]);
            wrong++;
        }
    }
    return wrong;
}

/* Sends and receives on device memory that must be in flight together (the proxy serves
 * collectives one at a time): (1) on every rank, irecv from the left, a non-blocking all-reduce,
 * isend to the right, one waitall; (2) ranks 0 and 1: rank 0 posts irecv and isend and waits
 * for the send alone before a host barrier, rank 1 receives, joins the barrier and only then
 * sends, so rank 0's send must end while its earlier receive is still open; (3) rank 0 isends,
 * then waits in a blocking host receive for what rank 1 sends once it received; (4) stream
 * calls on two streams, a receive from the left and a send to the right. 4 MiB messages (a
 * rendezvous over shm and tcp). Returns wrong elements. */
static size_t dc_msgs(coll_comm_t *comm, int rank, int n)
{
    enum { M = 1 << 20 };
    size_t          wrong = 0;
    float          *dsend, *drecv, *dsum, *h = malloc(M * sizeof(float));
    float           one = (float)(rank + 1), sum = 0;
    coll_request_t *reqs[3];
    int             left = (rank + n - 1) % n, right = (rank + 1) % n;

    if (n < 2) {
        free(h);
        return 0;
    }
    CUDA_OK(cudaMalloc((void **)&dsend, M * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&drecv, M * sizeof(float)));
    CUDA_OK(cudaMalloc((void **)&dsum, sizeof(float)));
    for (size_t i = 0; i < M; i++) {
        h[i] = (float)(rank * 1000 + (int)(i % 997));
    }
    CUDA_OK(cudaMemcpy(dsend, h, M * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dsum, &one, sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(drecv, 0, M * sizeof(float)));
    /* (1) */
    ASSERT_OK(coll_irecv(drecv, M, COLL_FLOAT32, left, comm, &reqs[0]));
    ASSERT_OK(coll_iallreduce(dsum, dsum, 1, COLL_FLOAT32, COLL_SUM, comm, &reqs[1]));
    ASSERT_OK(coll_isend(dsend, M, COLL_FLOAT32, right, comm, &reqs[2]));
    ASSERT_OK(coll_waitall(3, reqs));
    CUDA_OK(cudaMemcpy(h, drecv, M * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&sum, dsum, sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < M && wrong < 5; i++) {
        if (h[i] != (float)(left * 1000 + (int)(i % 997))) {
            fprintf(stderr, "rank %d: msgs (1): element %zu is %g\n", rank, i, (double)h[i]);
            wrong++;
        }
    }
    if (sum != (float)(n * (n + 1) / 2)) {
        fprintf(stderr, "rank %d: msgs (1): all-reduce gave %g\n", rank, (double)sum);
        wrong++;
    }
    /* (2) */
    CUDA_OK(cudaMemset(drecv, 0, M * sizeof(float)));
    if (rank == 0) {
        ASSERT_OK(coll_irecv(drecv, M, COLL_FLOAT32, 1, comm, &reqs[0]));
        ASSERT_OK(coll_isend(dsend, M, COLL_FLOAT32, 1, comm, &reqs[1]));
        ASSERT_OK(coll_wait(reqs[1]));
        ASSERT_OK(coll_barrier(comm));
        ASSERT_OK(coll_wait(reqs[0]));
    } else if (rank == 1) {
        ASSERT_OK(coll_recv(drecv, M, COLL_FLOAT32, 0, comm));
        ASSERT_OK(coll_barrier(comm));
        ASSERT_OK(coll_send(dsend, M, COLL_FLOAT32, 0, comm));
    } else {
        ASSERT_OK(coll_barrier(comm));
    }
    if (rank < 2) {
        wrong += dc_msgs_check(h, drecv, M, 1 - rank, rank, "(2)");
    }
    /* (3) rank 0 isends from device memory, then waits in a blocking receive on host memory
     * (holding the communicator while it waits) for what rank 1 sends only after it received */
    CUDA_OK(cudaMemset(drecv, 0, M * sizeof(float)));
    int token = -1;
    if (rank == 0) {
        ASSERT_OK(coll_isend(dsend, M, COLL_FLOAT32, 1, comm, &reqs[0]));
        ASSERT_OK(coll_recv(&token, 1, COLL_INT32, 1, comm));
        ASSERT_OK(coll_wait(reqs[0]));
        ASSERT_EQ(token, 42);
    } else if (rank == 1) {
        ASSERT_OK(coll_recv(drecv, M, COLL_FLOAT32, 0, comm));
        token = 42;
        ASSERT_OK(coll_send(&token, 1, COLL_INT32, 0, comm));
        wrong += dc_msgs_check(h, drecv, M, 0, rank, "(3)");
    }
    /* (4) stream-ordered on two streams: receive from the left on one, send to the right on
     * the other; the send may end first, and neither stream may go on before its call ended */
    cudaStream_t s1, s2;
    CUDA_OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    /* on s1: cudaMemset would be queued on the legacy stream, unordered with s1 */
    CUDA_OK(cudaMemsetAsync(drecv, 0, M * sizeof(float), s1));
    ASSERT_OK(coll_recv_stream(drecv, M, COLL_FLOAT32, left, comm, s1));
    ASSERT_OK(coll_send_stream(dsend, M, COLL_FLOAT32, right, comm, s2));
    CUDA_OK(cudaMemcpyAsync(h, drecv, M * sizeof(float), cudaMemcpyDeviceToHost, s1));
    CUDA_OK(cudaStreamSynchronize(s2));
    CUDA_OK(cudaStreamSynchronize(s1));
    ASSERT_OK(coll_comm_get_error(comm));
    for (size_t i = 0; i < M && wrong < 20; i++) {
        if (h[i] != (float)(left * 1000 + (int)(i % 997))) {
            fprintf(stderr, "rank %d: msgs (4): element %zu is %g\n", rank, i, (double)h[i]);
            wrong++;
        }
    }
    CUDA_OK(cudaStreamDestroy(s1));
    CUDA_OK(cudaStreamDestroy(s2));
    CUDA_OK(cudaFree(dsend));
    CUDA_OK(cudaFree(drecv));
    CUDA_OK(cudaFree(dsum));
    free(h);
    return wrong;
}

static int dc_rank_main(int rank, int n, coll_comm_t *comm, void *arg)
{
    static const coll_dtype_t dts[]   = {COLL_FLOAT32, COLL_BFLOAT16, COLL_INT64, COLL_FLOAT16,
                                         COLL_UINT8};
    size_t                    sizes[] = {1, 7, 4096 + 3, 100000 + 17};
    size_t                    wrong = 0, cases = 0;
    cudaStream_t              stream;
    (void)arg;
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    /* first, so that the communicator's first device call is enqueued on a stream: no kernel
     * may load lazily while that stream waits for the call (kernels.h) */
    struct timespec o0, o1;
    clock_gettime(CLOCK_MONOTONIC, &o0);
    wrong += dc_order(comm, rank, n, stream);
    wrong += dc_msgs(comm, rank, n);
    clock_gettime(CLOCK_MONOTONIC, &o1);
    if (rank == 0) {
        printf("    %d ranks: ordering and sends/receives in flight together in %.2f s\n", n,
               (double)(o1.tv_sec - o0.tv_sec) + 1e-9 * (double)(o1.tv_nsec - o0.tv_nsec));
        fflush(stdout);
    }
    for (int c = 0; c < C_COUNT; c++) {
        int red = c == C_ALLREDUCE || c == C_REDUCE_SCATTER || c == C_REDUCE;
        for (int mode = 0; mode < M_COUNT; mode++) {
            struct timespec t0, t1;
            size_t          cases0 = cases;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            for (size_t di = 0; di < sizeof(dts) / sizeof(dts[0]); di++) {
                for (int op = 0; op < (red ? COLL_REDOP_COUNT : 1); op++) {
                    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
                        /* every op on the small sizes; the large ones once per dtype */
                        if (si == 3 && op != 0) {
                            continue;
                        }
                        for (int ip = 0; ip < (c >= C_ALLTOALL ? 1 : 2); ip++) {
                            dc_case_t k = {c, rank, n, (int)((cases + di) % (size_t)n), sizes[si]};
                            wrong += dc_case(comm, &k, mode, dts[di], (coll_redop_t)op, ip, stream);
                            cases++;
                        }
                    }
                }
            }
            /* where the time goes, and where a hang is, in the log of a run on a GPU */
            clock_gettime(CLOCK_MONOTONIC, &t1);
            if (rank == 0) {
                printf("    %d ranks: %s %s: %zu cases in %.2f s\n", n, cname[c], mname[mode],
                       cases - cases0,
                       (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
                fflush(stdout);
            }
        }
    }
    CUDA_OK(cudaStreamDestroy(stream));
    if (wrong != 0) {
        fprintf(stderr, "rank %d: %zu wrong elements over %zu cases\n", rank, wrong, cases);
        return 1;
    }
    if (rank == 0) {
        printf("  %d ranks: %zu cases ok, ordering ok\n", n, cases);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int only_n = 0, opt, failed = 0, total = 0;
    while ((opt = getopt(argc, argv, "n:")) != -1) {
        if (opt == 'n') {
            only_n = atoi(optarg);
        } else {
            fprintf(stderr, "usage: %s [-n nranks]\n", argv[0]);
            return COLL_TEST_HARD;
        }
    }
    if (!gpu_probe_forked()) {
        return COLL_TEST_SKIP;
    }
    static const int counts[] = {1, 2, 3, 4};
    const char      *tps[8];
    int              ntp = coll_test_transports(tps, 8);
    /* The paths of device calls: p2p (device windows mapped by CUDA IPC, COLL_CUDA_P2P=1),
     * staged through pinned host memory, and the direct all-reduce (COLL_CUDA_DIRECT=1, where
     * shm gives windows); each over every transport it works on, unless the caller chose one;
     * COLL_CUDA_P2P_MIN=0 unless the caller set it. */
    static const char *const paths[][2] = {{"1", "0"}, {"0", "0"}, {"0", "1"}};
    int         user     = getenv("COLL_CUDA_P2P") != NULL || getenv("COLL_CUDA_DIRECT") != NULL;
    const char *user_min = getenv("COLL_CUDA_P2P_MIN");
    for (int t = 0; t < ntp; t++) {
        int npaths = user ? 1 : strcmp(tps[t], "shm") == 0 ? 3 : 2;
        for (int p = 0; p < npaths; p++) {
            if (!user) {
                setenv("COLL_CUDA_P2P", paths[p][0], 1);
                setenv("COLL_CUDA_DIRECT", paths[p][1], 1);
            }
            /* the p2p path for every size, not only from COLL_CUDA_P2P_MIN's 4 MiB */
            setenv("COLL_CUDA_P2P_MIN", "0", user_min == NULL);
            char how[128];
            snprintf(how, sizeof(how), "COLL_CUDA_P2P=%s COLL_CUDA_DIRECT=%s%s%s",
                     getenv("COLL_CUDA_P2P") ? getenv("COLL_CUDA_P2P") : "(default)",
                     getenv("COLL_CUDA_DIRECT") ? getenv("COLL_CUDA_DIRECT") : "(default)",
                     user_min != NULL ? " COLL_CUDA_P2P_MIN=" : "", user_min ? user_min : "");
            for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
                if (only_n > 0 && counts[i] != only_n) {
                    continue;
                }
                coll_test_opts_t o = {
                    .nranks = counts[i], .want_comm = 1, .timeout_s = 300, .transport = tps[t]};
                printf("%s over %s, %s:\n", argv[0], tps[t], how);
                fflush(stdout);
                int rc = coll_test_run_ranks(&o, dc_rank_main, NULL);
                total++;
                failed += rc != 0;
                printf("%s: %s, %s, %d ranks: %s\n", rc ? "FAIL" : "PASS", tps[t], how, counts[i],
                       rc ? "failed" : "ok");
                fflush(stdout);
            }
        }
    }
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed ? 1 : 0;
}
