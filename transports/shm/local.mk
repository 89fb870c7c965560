# SPDX-License-Identifier: MIT
# Shared-memory transport: context and data path, SPSC ring and doorbell, /dev/shm segments,
# shared windows.
COLL_LIB_SOURCES += transports/shm/shm.h transports/shm/shm.c transports/shm/shm_ring.c \
    transports/shm/shm_seg.c transports/shm/shm_win.c transports/shm/shm_cma.c

check_PROGRAMS += tests/unit/test_shm
tests_unit_test_shm_SOURCES = tests/unit/test_shm.c
tests_unit_test_shm_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_shm_LDADD = libcoll-internal.la -lpthread -lm
TESTS += tests/unit/test_shm
