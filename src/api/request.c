/* SPDX-License-Identifier: MIT */
/* Completion of non-blocking operations: coll_wait, coll_waitall, coll_test. */
#include "cuda/cuda.h"
#include "engine/engine.h"
#include "error.h"

/* Like the communicator's handle check: a request released by coll_wait or coll_test (its
 * memory freed, or kept as a failed one's) reads as not live. */
static coll_result_t request_check(const coll_request_t *req, const char *fn)
{
    if (req == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "%s: req is NULL", fn);
    }
    if (req->magic != COLL_REQUEST_MAGIC) {
        return coll_set_last_error(COLL_ERR_INVALID_USAGE,
                                   "%s: req is not a live request (already completed by "
                                   "coll_wait or coll_test, which release it)",
                                   fn);
    }
    return COLL_OK;
}

COLL_API coll_result_t coll_wait(coll_request_t *req)
{
    COLL_CHECK(request_check(req, "coll_wait"));
    return req->devop != NULL ? coll_cuda_wait(req) : coll_engine_wait(req);
}

COLL_API coll_result_t coll_waitall(int n, coll_request_t **reqs)
{
    coll_result_t first = COLL_OK;
    if (n < 0 || (n > 0 && reqs == NULL)) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_waitall: %d requests at %p", n,
                                   (void *)reqs);
    }
    for (int i = 0; i < n; i++) {
        if (reqs[i] != NULL) {
            coll_result_t st = coll_wait(reqs[i]);
            reqs[i]          = NULL;
            if (st != COLL_OK && first == COLL_OK) {
                first = st;
            }
        }
    }
    return first;
}

COLL_API coll_result_t coll_test(coll_request_t *req, int *done_p)
{
    coll_result_t st = COLL_OK;
    if (done_p == NULL) {
        return coll_set_last_error(COLL_ERR_INVALID_ARG, "coll_test: done_p is NULL");
    }
    *done_p = 0;
    COLL_CHECK(request_check(req, "coll_test"));
    *done_p = req->devop != NULL ? coll_cuda_test(req, &st) : coll_engine_test(req, &st);
    return st;
}
