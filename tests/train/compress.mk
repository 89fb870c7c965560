# SPDX-License-Identifier: MIT
# Gradient compression tests: error-feedback invariants, top-k at k = count against the dense
# all-reduce, compressed SGD on a least-squares problem, argument errors (fork-based ranks).
check_PROGRAMS += tests/train/test_compress
TESTS += tests/train/test_compress
tests_train_test_compress_SOURCES = tests/train/test_compress.c
tests_train_test_compress_CPPFLAGS = $(TEST_CPPFLAGS)
tests_train_test_compress_LDADD = $(TEST_MP_LDADD)
