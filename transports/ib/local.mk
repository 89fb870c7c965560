# SPDX-License-Identifier: MIT
# InfiniBand / RoCE verbs transport, built when configure finds libibverbs; with librdmacm too,
# QPs can also be connected through rdma_cm (COLL_IB_CM).
IB_SOURCES = transports/ib/ib.h transports/ib/ib.c transports/ib/ib_ep.c transports/ib/ib_cm.c \
	transports/ib/ib_boot.c transports/ib/ib_gid.c transports/ib/ib_rndv.c transports/ib/ib_gdr.c
if HAVE_IBVERBS
COLL_LIB_SOURCES += $(IB_SOURCES)
libcoll_internal_la_LIBADD += $(IBVERBS_LDFLAGS) $(IBVERBS_LIBS)
if HAVE_RDMACM
libcoll_internal_la_LIBADD += $(RDMACM_LDFLAGS) $(RDMACM_LIBS)
endif
endif
EXTRA_DIST += $(IB_SOURCES)

# Registration cache of user buffers, and the memory hooks that keep it correct (libcoll.so
# exports munmap, mremap and madvise for them). It needs no verbs: its unit test builds it in
# every configuration, from the sources where the library does not have it.
IB_MR_SOURCES = transports/ib/ib_mr.h transports/ib/ib_mr.c src/core/memhook.h src/core/memhook.c
if HAVE_IBVERBS
COLL_LIB_SOURCES += $(IB_MR_SOURCES)
endif
EXTRA_DIST += $(IB_MR_SOURCES)
check_PROGRAMS += tests/unit/test_mr_cache
tests_unit_test_mr_cache_SOURCES = tests/unit/test_mr_cache.c
if !HAVE_IBVERBS
tests_unit_test_mr_cache_SOURCES += $(IB_MR_SOURCES)
endif
tests_unit_test_mr_cache_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_mr_cache_LDADD = libcoll-internal.la -lpthread -lm
TESTS += tests/unit/test_mr_cache
