/* SPDX-License-Identifier: MIT */
/*
 * A sender that runs ahead of its receiver: rank 0 sends 16000 messages of 16 KiB at once, rank 1
 * receives them slowly. With COLL_UNEXPECTED_MAX=1m the receiver's peak memory grows by far less
 * than the 250 MiB in flight (the rest waits in the ring or the socket), every message arrives
 * intact and in order; over shm and tcp. Over tcp the receiver also takes what one socket of the
 * peer holds while its receive waits on another (seen: up to 43 MiB with 32 MiB kernel buffers),
 * hence the 96 MiB allowance. Run with COLL_UNEXPECTED_MAX=0 (no limit) it fails: the receiver
 * buffers nearly everything.
 */
#include "coll_test.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UNEXP_MSGS  16000
#define UNEXP_COUNT 4096 /* int32 elements: 16 KiB */

static long peak_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char  line[256];
    long  v = -1;
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            v = atol(line + 6);
        }
    }
    fclose(f);
    return v;
}

static int unexp_rank(int rank, int n, coll_comm_t *comm, void *arg)
{
    int32_t *buf = malloc(UNEXP_COUNT * sizeof(int32_t));
    (void)n, (void)arg;
    ASSERT_TRUE(buf != NULL);
    ASSERT_OK(coll_barrier(comm));
    if (rank == 0) {
        for (int m = 0; m < UNEXP_MSGS; m++) {
            for (int i = 0; i < UNEXP_COUNT; i++) {
                buf[i] = m * 7 + i;
            }
            ASSERT_OK(coll_send(buf, UNEXP_COUNT, COLL_INT32, 1, comm));
        }
    } else {
        long before = peak_rss_kib();
        for (int m = 0; m < UNEXP_MSGS; m++) {
            if (m % 100 == 0) {
                usleep(2000); /* behind the sender throughout */
            }
            ASSERT_OK(coll_recv(buf, UNEXP_COUNT, COLL_INT32, 0, comm));
            for (int i = 0; i < UNEXP_COUNT; i += 511) {
                ASSERT_EQ(buf[i], m * 7 + i);
            }
        }
        long grew = peak_rss_kib() - before;
        fprintf(stderr, "rank 1: peak memory grew by %ld KiB receiving %d KiB\n", grew,
                UNEXP_MSGS * UNEXP_COUNT * 4 / 1024);
        ASSERT_TRUE(before > 0 && grew < 96 * 1024);
    }
    ASSERT_OK(coll_barrier(comm));
    free(buf);
    return 0;
}

int main(void)
{
    const char *tps[8];
    int         failed = 0, total = 0;
    setenv("COLL_UNEXPECTED_MAX", "1m", 0); /* before the library reads its parameters */
    int ntp = coll_test_transports(tps, 8);
    for (int t = 0; t < ntp; t++) {
        if (strcmp(tps[t], "shm") != 0 && strcmp(tps[t], "tcp") != 0) {
            continue;
        }
        coll_test_opts_t o  = {.nranks = 2, .want_comm = 1, .timeout_s = 120, .transport = tps[t]};
        int              rc = coll_test_run_ranks(&o, unexp_rank, NULL);
        printf("%s: sender ahead of its receiver over %s\n", rc ? "FAIL" : "PASS", tps[t]);
        total++;
        failed += rc != 0;
    }
    printf("%d passed, %d failed\n", total - failed, failed);
    return failed != 0 || total == 0;
}
