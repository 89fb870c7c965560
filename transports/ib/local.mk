# SPDX-License-Identifier: MIT
# InfiniBand / RoCE verbs transport, built when configure finds libibverbs; with librdmacm too,
# QPs can also be connected through rdma_cm (COLL_IB_CM).
IB_SOURCES = transports/ib/ib.h transports/ib/ib.c transports/ib/ib_ep.c transports/ib/ib_cm.c \
	transports/ib/ib_boot.c transports/ib/ib_gid.c
if HAVE_IBVERBS
COLL_LIB_SOURCES += $(IB_SOURCES)
libcoll_internal_la_LIBADD += $(IBVERBS_LDFLAGS) $(IBVERBS_LIBS)
if HAVE_RDMACM
libcoll_internal_la_LIBADD += $(RDMACM_LDFLAGS) $(RDMACM_LIBS)
endif
endif
EXTRA_DIST += $(IB_SOURCES)
