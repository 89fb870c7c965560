# SPDX-License-Identifier: MIT
# The examples build against the installed library (examples/Makefile uses pkg-config);
# tests/tools/test_examples.sh installs into a temporary prefix, builds and runs them.
EXTRA_DIST += examples/Makefile examples/ex_allreduce.c examples/ex_ring.c examples/ex_unique_id.c
dist_check_SCRIPTS += tests/tools/test_examples.sh
TESTS += tests/tools/test_examples.sh
