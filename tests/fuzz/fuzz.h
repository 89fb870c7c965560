/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harnesses of the wire parsers. Each defines LLVMFuzzerTestOneInput; built with libFuzzer
 * (make check-fuzz) or with driver.c (make check: the seed corpus plus deterministic mutations).
 * A harness aborts when a parser accepts input that breaks the invariant it promises.
 */
#ifndef COLL_FUZZ_H
#define COLL_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_REQUIRE(_c)                                                                           \
    do {                                                                                           \
        if (!(_c)) {                                                                               \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #_c);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Quiet logging: rejections are the normal case here. */
void fuzz_quiet(void);

#endif
