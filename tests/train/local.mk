# SPDX-License-Identifier: MIT
# Training-layer tests: DDP and ZeRO against single-process references (fork-based ranks).
TRAIN_TESTS = tests/train/test_ddp
check_PROGRAMS += $(TRAIN_TESTS)
TESTS += $(TRAIN_TESTS)
TRAIN_TEST_SOURCES = tests/train/train_model.h tests/train/train_model.c
tests_train_test_ddp_SOURCES = tests/train/test_ddp.c $(TRAIN_TEST_SOURCES)
tests_train_test_ddp_CPPFLAGS = $(TEST_CPPFLAGS)
tests_train_test_ddp_LDADD = $(TEST_MP_LDADD)
check_PROGRAMS += tests/train/test_zero
TESTS += tests/train/test_zero
tests_train_test_zero_SOURCES = tests/train/test_zero.c $(TRAIN_TEST_SOURCES)
tests_train_test_zero_CPPFLAGS = $(TEST_CPPFLAGS)
tests_train_test_zero_LDADD = $(TEST_MP_LDADD)
# Gradient compression: error-feedback invariants, top-k at k = count against the dense
# all-reduce, compressed SGD on a least-squares problem, argument errors.
check_PROGRAMS += tests/train/test_compress
TESTS += tests/train/test_compress
tests_train_test_compress_SOURCES = tests/train/test_compress.c
tests_train_test_compress_CPPFLAGS = $(TEST_CPPFLAGS)
tests_train_test_compress_LDADD = $(TEST_MP_LDADD)
# DDP on one host: registered buckets, inline (direct path) and in-flight all-reduces mixed.
check_PROGRAMS += tests/train/test_ddp_direct
TESTS += tests/train/test_ddp_direct
tests_train_test_ddp_direct_SOURCES = tests/train/test_ddp_direct.c
tests_train_test_ddp_direct_CPPFLAGS = $(TEST_CPPFLAGS)
tests_train_test_ddp_direct_LDADD = $(TEST_MP_LDADD)
