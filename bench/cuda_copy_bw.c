/* SPDX-License-Identifier: MIT */
/*
 * cuda_copy_bw -- the ceiling for device collectives on one GPU: device-to-device copy
 * bandwidth (cudaMemcpyAsync by copy engine) per size, as bytes copied per second (each byte is
 * read once and written once). Usage: cuda_copy_bw [-b MIN] [-e MAX] [-n ITERS]; sizes double.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_CUDA
#include <cuda_runtime.h>

static size_t parse_size(const char *s)
{
    char  *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'K':
    case 'k':
        v *= 1024;
        break;
    case 'M':
    case 'm':
        v *= 1024 * 1024;
        break;
    case 'G':
    case 'g':
        v *= 1024.0 * 1024 * 1024;
        break;
    default:
        break;
    }
    return (size_t)v;
}

int main(int argc, char **argv)
{
    size_t       minb = 8, maxb = 256u << 20;
    int          iters = 50, c;
    char        *a, *b;
    cudaStream_t st;
    cudaEvent_t  e0, e1;

    while ((c = getopt(argc, argv, "b:e:n:")) != -1) {
        if (c == 'b') {
            minb = parse_size(optarg);
        } else if (c == 'e') {
            maxb = parse_size(optarg);
        } else if (c == 'n') {
            iters = atoi(optarg);
        } else {
            fprintf(stderr, "usage: %s [-b MIN] [-e MAX] [-n ITERS]\n", argv[0]);
            return 2;
        }
    }
    if (cudaMalloc((void **)&a, maxb) != cudaSuccess ||
        cudaMalloc((void **)&b, maxb) != cudaSuccess || cudaStreamCreate(&st) != cudaSuccess) {
        fprintf(stderr, "cuda_copy_bw: no CUDA device or not enough memory\n");
        return 77;
    }
    cudaMemset(a, 1, maxb);
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    printf("# %12s %12s %12s\n", "size(B)", "time(us)", "copy(GB/s)");
    for (size_t n = minb; n <= maxb; n *= 2) {
        float ms = 0;
        cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, st);
        cudaEventRecord(e0, st);
        for (int i = 0; i < iters; i++) {
            cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, st);
        }
        cudaEventRecord(e1, st);
        cudaEventSynchronize(e1);
        cudaEventElapsedTime(&ms, e0, e1);
        double us = ms * 1000.0 / iters;
        printf("  %12zu %12.2f %12.2f\n", n, us, (double)n / us / 1e3);
    }
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "cuda_copy_bw: built without CUDA\n");
    return 77;
}
#endif
