# SPDX-License-Identifier: MIT
# Programs written only against nccl.h, linked with the NCCL-compatible library.
check_PROGRAMS += tests/nccl/test_nccl_api
tests_nccl_test_nccl_api_SOURCES = tests/nccl/test_nccl_api.c
tests_nccl_test_nccl_api_CPPFLAGS = -I$(top_srcdir)/src/nccl
tests_nccl_test_nccl_api_CFLAGS = -std=gnu11 -Wall -Wextra -Wno-unused-parameter
tests_nccl_test_nccl_api_LDADD = src/nccl/libnccl.la -lm
TESTS += tests/nccl/test_nccl_api
