# SPDX-License-Identifier: MIT
# InfiniBand / RoCE verbs transport, built when configure finds libibverbs and librdmacm.
if HAVE_IBVERBS
if HAVE_RDMACM
COLL_LIB_SOURCES += transports/ib/ib.h transports/ib/ib.c transports/ib/ib_ep.c transports/ib/ib_cm.c
libcoll_internal_la_LIBADD += $(IBVERBS_LDFLAGS) $(IBVERBS_LIBS) $(RDMACM_LDFLAGS) $(RDMACM_LIBS)
endif
endif
EXTRA_DIST += transports/ib/ib.h transports/ib/ib.c transports/ib/ib_ep.c transports/ib/ib_cm.c
