/* SPDX-License-Identifier: MIT */
#include "fuzz.h"
#include "log.h"
#include "param.h"

void fuzz_quiet(void)
{
    setenv("COLL_DEBUG", "none", 1);
    coll_params_reset_for_testing();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_quiet();
    return 0;
}
