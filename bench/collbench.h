/* SPDX-License-Identifier: MIT */
/*
 * collbench.h -- types shared by the collbench driver (collbench.c) and its per-collective
 * tables (collbench_ops.c) and its output (collbench_out.c): the counts of one size, the state
 * of one test, the ops table, the data patterns whose reduction results are exact in every
 * dtype, the options and the output calls. Nothing here is part of libcoll; collbench uses
 * only the public coll.h.
 */
#ifndef COLLBENCH_H
#define COLLBENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "coll.h"

#define CB_GUARD_BYTES 64   /* guard zone before and after every buffer */
#define CB_GUARD_BYTE  0xA5 /* fill of the guard zones */
#define CB_POISON_BYTE 0xFF /* fill of receive buffers before a checked call */
#define CB_PERIOD      1021 /* reduction patterns repeat with this (prime) period in the index */

/* Element counts of one size, as nccl-tests derives them (all in elements). */
typedef struct {
    size_t count;       /* count argument of the call, printed in the "count" column */
    size_t send_count;  /* elements in the send buffer */
    size_t recv_count;  /* elements in the receive buffer */
    size_t send_ip_off; /* in place: sendbuf = buf + rank * send_ip_off */
    size_t recv_ip_off; /* in place: recvbuf = buf + rank * recv_ip_off */
    size_t bw_bytes;    /* bytes algbw is computed from */
} cb_counts_t;

/* Parameters of the reduction patterns for one (dtype, op, nranks); see cb_pattern_init(). */
typedef struct {
    int amp;    /* sum: largest magnitude per rank (0: sparse mode) */
    int stride; /* sum/avg sparse mode and prod: period of the active ranks */
    int amax;   /* avg: largest pair deviation */
    int cmin;   /* avg: smallest mean value */
    int crange; /* avg: number of mean values (0: sparse mode, mean 0) */
} cb_pattern_t;

/* State of one test: one (collective, dtype, op, root, size, placement). */
typedef struct {
    coll_dtype_t dtype;
    size_t       esize;    /* bytes per element */
    coll_redop_t op;       /* ignored by the non-reductions */
    int          root;     /* -1 for the unrooted collectives */
    int          rank;     /* this process' rank */
    int          nranks;   /* communicator size */
    int          in_place; /* 1: the in-place variant */
    cb_counts_t  c;        /* counts of the current size */
    uint64_t     salt;     /* shifts the patterns per dtype */
    cb_pattern_t pat;      /* reduction pattern parameters */
    double      *table;    /* CB_PERIOD expected reduction results, or NULL */
    char        *sbuf;     /* out-of-place send buffer (a guard zone precedes it) */
    char        *rbuf;     /* receive buffer; the single buffer of the in-place variant */
    size_t       cap;      /* bytes usable in sbuf and in rbuf */
    void        *send;     /* send pointer of the current call */
    void        *recv;     /* receive pointer of the current call */
    char        *dsbuf;    /* --memory cuda: device twins of sbuf and rbuf, else NULL */
    char        *drbuf;
    void        *stream; /* --memory cuda: the stream the calls are enqueued on */
} cb_test_t;

/* Result of cb_coll_t.expect for one receive element. */
typedef enum {
    CB_EXPECT_VALUE,    /* the element must equal *v_p */
    CB_EXPECT_UNTOUCHED /* the element must still hold CB_POISON_BYTE bytes */
} cb_expect_t;

/* One collective: the nccl-tests shape (counts, data, bus factor, run, check). */
typedef struct {
    const char *name;        /* value of -C: "allreduce" */
    const char *nccl_name;   /* nccl-tests binary: "all_reduce_perf" */
    const char *api_name;    /* libcoll call, for error messages */
    int         has_op;      /* 1: a reduction (-o applies, redop column) */
    int         rooted;      /* 1: -r applies (root column) */
    int         has_inplace; /* 0: in-place columns print as not applicable */
    /* Counts for a size of count elements of esize bytes (nccl-tests rounding). */
    void (*get_counts)(size_t count, size_t esize, int nranks, cb_counts_t *c_p);
    /* busbw = algbw * bus_factor(nranks). */
    double (*bus_factor)(int nranks);
    /* Value rank holds at index i of its send buffer. */
    double (*input)(const cb_test_t *t, int rank, size_t i);
    /* What receive element i of this rank must hold after the call. */
    cb_expect_t (*expect)(const cb_test_t *t, size_t i, double *v_p);
    /* One call with t->send and t->recv. */
    coll_result_t (*run)(const cb_test_t *t, coll_comm_t *comm);
    /* The same, enqueued on t->stream. */
    coll_result_t (*run_stream)(const cb_test_t *t, coll_comm_t *comm);
} cb_coll_t;

/* ---- collbench_ops.c ---- */

extern const cb_coll_t cb_colls[];
extern const int       cb_ncolls;

/* Collective by -C name or nccl-tests binary name; NULL if unknown. */
const cb_coll_t *cb_coll_find(const char *name);

/* nccl-tests name of a dtype ("float", "bfloat16", ...), and its size in bytes. */
const char *cb_dtype_name(coll_dtype_t dtype);
size_t      cb_dtype_size(coll_dtype_t dtype);
/* dtype from an nccl-tests name or alias (fp16, bf16, char, int, float32 ...); -1 if none. */
int cb_dtype_parse(const char *name);
/* Name of an op as nccl-tests prints it. */
const char *cb_op_name(coll_redop_t op);
/* op from its name; -1 if none. */
int cb_op_parse(const char *name);

/* Store value v (exactly representable) as element i of a dtype buffer, and read it back. */
void   cb_store(void *buf, size_t i, coll_dtype_t dtype, double v);
double cb_load(const void *buf, size_t i, coll_dtype_t dtype);

/* Set up t->pat, t->salt and t->table (CB_PERIOD doubles owned by the caller) for
 * (t->dtype, t->op, t->nranks). */
void cb_pattern_init(cb_test_t *t, double *table);
/* Value of the reduction pattern that rank holds at index i. */
double cb_red_input(const cb_test_t *t, int rank, size_t i);

/* Fill the buffers of the current call (inputs, poison, guard zones). */
void cb_init_data(cb_test_t *t, const cb_coll_t *coll);
/* Count wrong receive elements (*wrong_p) and changed bytes outside the receive region
 * (guard zones, and the send buffer of an out-of-place call) (*oob_p). */
void cb_check(const cb_test_t *t, const cb_coll_t *coll, uint64_t *wrong_p, uint64_t *oob_p);

/* ---- options (parsed by collbench.c) ---- */

typedef struct {
    const cb_coll_t *coll;                          /* collective under test */
    size_t           minbytes, maxbytes, stepbytes; /* -b -e -i */
    int              stepfactor, iters, warmup;     /* -f -n -w */
    int              check, cycles, average;        /* -c -N -a */
    int              blocking, timeout;             /* -z -T */
    int              dtype, op, root;               /* -d -o -r; -1 means all */
    const char      *algo, *csv, *json;             /* -A --csv -J, or NULL */
    int              cuda;                          /* -M cuda: buffers in device memory */
    int              reg; /* -R 1|2: buffers from coll_mem_alloc, registered (coll_comm_register) */
    double           bound_gbs; /* --bound GB/s: print % of the memory-bandwidth bound; 0 off */
    double           min_bw;    /* NCCL_TESTS_MIN_BW in GB/s, or -1 when it is not set */
    /* -A on this communicator (cb_algo_on_comm): why an entry forcing the collective cannot
     * run here ("" when none is known), and 1 when no entry for it can: nothing is forced */
    char algo_note[192];
    int  algo_none;
} cb_opts_t;

/* NCCL_TESTS_MIN_BW, as nccl-tests applies it: the average busbw fails below 90% of it. */
static inline int cb_bw_failed(const cb_opts_t *o, double avg_busbw)
{
    return o->min_bw >= 0 && avg_busbw < 0.9 * o->min_bw;
}

/* ---- collbench_cuda.c: device buffers (--memory cuda); stubs without CUDA ---- */

/* Pick the device (local rank modulo devices), allocate two buffers of len bytes and a stream.
 * Returns 0, or -1 with why in err. */
int cb_cuda_setup(int local_rank, size_t len, char **ds_p, char **dr_p, void **stream_p, char *err,
                  size_t errlen);
/* Copy len bytes host -> device or device -> host (synchronous); 0 or -1. */
int cb_cuda_upload(void *dev, const void *host, size_t len);
int cb_cuda_download(void *host, const void *dev, size_t len);
/* Wait for the stream; 0 or -1. */
int cb_cuda_sync(void *stream);
/* Device name, for the header. */
const char *cb_cuda_device_name(void);

/* ---- collbench_out.c: what rank 0 writes ---- */

/* One half (out-of-place or in-place) of a result line. */
typedef struct {
    int      skipped; /* no in-place variant: printed as 0 and N/A */
    double   time_us; /* per call, combined across ranks */
    double   algbw;   /* GB/s */
    double   busbw;   /* GB/s */
    uint64_t wrong;   /* wrong elements summed over ranks */
} cb_half_t;

/* The CSV and JSON files of a run. */
typedef struct {
    const cb_opts_t *o;
    int              nranks;
    FILE            *csv, *json;
    int              json_first; /* no result written to the JSON array yet */
} cb_out_t;

/* Open the --csv and -J files and write their headers; -1 after printing why not. */
int cb_out_open(cb_out_t *w, const cb_opts_t *o, int nranks, int argc, char **argv);
/* Header lines up to "# Using devices", one line per rank, then the column headers. */
void cb_out_header(const cb_opts_t *o, int library_version);
void cb_out_rank(int rank, int pid, const char *host, const char *memory);
void cb_out_columns(const cb_opts_t *o);
/* A result line: its first columns, each half as it is measured, then the end (which also
 * writes the CSV row and the JSON object). */
void cb_out_line_begin(const cb_out_t *w, size_t bytes, const cb_test_t *t);
void cb_out_half(const cb_out_t *w, const cb_half_t *h);
void cb_out_line_end(cb_out_t *w, size_t bytes, const cb_test_t *t, const cb_half_t h[2]);
/* The footer; closes the files. */
void cb_out_footer(cb_out_t *w, uint64_t errors, double avg_busbw);

#endif /* COLLBENCH_H */
