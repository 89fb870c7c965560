/* SPDX-License-Identifier: MIT */
/* GPU tests that fork ranks: is there a CUDA device? Asked in a child process, since CUDA must
 * not be initialised in a process that forks ranks afterwards. */
#ifndef COLL_TEST_GPU_PROBE_H
#define COLL_TEST_GPU_PROBE_H

/* 1 when a CUDA device is there; else 0, after printing "SKIP: no CUDA device: why". */
int gpu_probe_forked(void);

#endif
