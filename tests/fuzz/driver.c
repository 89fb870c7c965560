/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for libFuzzer's main() where clang's libFuzzer is not used: runs every file of
 * the seed corpus (FUZZ_CORPUS, or the directories and files given), then -runs=N inputs made
 * from them by deterministic mutations (bit flips, byte and integer overwrites with boundary
 * values, truncation, extension, splicing two inputs). A crash or an abort fails the test.
 */
#include "fuzz.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_INPUTS 4096
#define MAX_LEN    65536

typedef struct {
    uint8_t *data;
    size_t   len;
} input_t;

static input_t inputs[MAX_INPUTS];
static int     ninputs;

static void load_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL || ninputs == MAX_INPUTS) {
        if (f != NULL) {
            fclose(f);
        }
        return;
    }
    uint8_t *buf = malloc(MAX_LEN);
    size_t   n   = buf != NULL ? fread(buf, 1, MAX_LEN, f) : 0;
    fclose(f);
    inputs[ninputs].data  = buf;
    inputs[ninputs++].len = n;
}

static void load(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "fuzz driver: cannot read %s\n", path);
        exit(2);
    }
    if (!S_ISDIR(st.st_mode)) {
        load_file(path);
        return;
    }
    DIR           *d = opendir(path);
    struct dirent *e;
    while (d != NULL && (e = readdir(d)) != NULL) {
        char p[4096];
        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
        load_file(p);
    }
    if (d != NULL) {
        closedir(d);
    }
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static size_t mutate(uint8_t *buf, size_t len, size_t cap)
{
    static const uint64_t special[] = {
        0,          1,    0x7f, 0x80, 0xff, 0x7fffffff, 0x80000000u, 0xffffffffu, (uint64_t)1 << 46,
        UINT64_MAX, 4096, 65536};
    int rounds = 1 + (int)(next() % 4);
    for (int k = 0; k < rounds; k++) {
        size_t pos = len > 0 ? next() % len : 0;
        switch (next() % 7) {
        case 0: /* flip a bit */
            if (len > 0) {
                buf[pos] ^= (uint8_t)(1u << (next() % 8));
            }
            break;
        case 1: /* a random byte */
            if (len > 0) {
                buf[pos] = (uint8_t)next();
            }
            break;
        case 2: /* an interesting integer, 1, 2, 4 or 8 bytes wide */
        {
            uint64_t v = special[next() % (sizeof(special) / sizeof(special[0]))];
            size_t   w = (size_t)1 << (next() % 4);
            for (size_t i = 0; i < w && pos + i < len; i++) {
                buf[pos + i] = (uint8_t)(v >> (8 * i));
            }
            break;
        }
        case 3: /* truncate */
            len = pos;
            break;
        case 4: /* extend with random bytes */
        {
            size_t add = next() % 64;
            for (size_t i = 0; i < add && len < cap; i++) {
                buf[len++] = (uint8_t)next();
            }
            break;
        }
        case 5: /* splice the tail of another input */
        {
            const input_t *o    = &inputs[next() % (uint64_t)ninputs];
            size_t         from = o->len > 0 ? next() % o->len : 0;
            for (size_t i = from; i < o->len && pos < cap; i++) {
                buf[pos++] = o->data[i];
            }
            len = pos > len ? pos : len;
            break;
        }
        default: /* add or subtract a little at a 4-byte field */
            if (pos + 4 <= len) {
                uint32_t v;
                memcpy(&v, buf + pos, 4);
                v += (uint32_t)(next() % 33) - 16;
                memcpy(buf + pos, &v, 4);
            }
            break;
        }
    }
    return len;
}

int main(int argc, char **argv)
{
    long runs   = 20000;
    int  nfiles = 0;

    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-runs=", 6) == 0) {
            runs = atol(argv[i] + 6);
        } else if (strncmp(argv[i], "-seed=", 6) == 0) {
            rng = strtoull(argv[i] + 6, NULL, 0) | 1;
        } else {
            load(argv[i]);
            nfiles++;
        }
    }
#ifdef FUZZ_CORPUS
    if (nfiles == 0) {
        load(FUZZ_CORPUS);
    }
#endif
    if (ninputs == 0) {
        fprintf(stderr, "fuzz driver: no seed inputs\n");
        return 2;
    }
    for (int i = 0; i < ninputs; i++) {
        LLVMFuzzerTestOneInput(inputs[i].data, inputs[i].len);
    }
    uint8_t *buf = malloc(MAX_LEN);
    for (long r = 0; r < runs && buf != NULL; r++) {
        const input_t *in  = &inputs[next() % (uint64_t)ninputs];
        size_t         len = in->len;
        memcpy(buf, in->data, len);
        len = mutate(buf, len, MAX_LEN);
        /* an exact-size copy, so that reading past the end is caught under ASan */
        uint8_t *exact = malloc(len > 0 ? len : 1);
        memcpy(exact, buf, len);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    printf("%s: %d seed inputs and %ld mutated inputs, no crash\n", argv[0], ninputs, runs);
    free(buf);
    for (int i = 0; i < ninputs; i++) {
        free(inputs[i].data);
    }
    return 0;
}
