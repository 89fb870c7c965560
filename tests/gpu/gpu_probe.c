/* SPDX-License-Identifier: MIT */
#include "gpu_probe.h"

#include <cuda_runtime.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

int gpu_probe_forked(void)
{
    int   ndev = 0, wst = 0;
    pid_t pid;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        cudaError_t e = cudaGetDeviceCount(&ndev);
        if (e != cudaSuccess || ndev == 0) {
            printf("SKIP: no CUDA device: %s\n",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
            fflush(stdout);
            _exit(1);
        }
        _exit(0);
    }
    return pid > 0 && waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0;
}
