# SPDX-License-Identifier: MIT
# UCX transport, built when configure finds UCX (libucx-dev).
if HAVE_UCX
COLL_LIB_SOURCES += transports/ucx/ucx.h transports/ucx/ucx.c transports/ucx/ucx_ep.c
libcoll_internal_la_LIBADD += $(UCX_LDFLAGS) $(UCX_LIBS) -lucs
endif
EXTRA_DIST += transports/ucx/ucx.h transports/ucx/ucx.c transports/ucx/ucx_ep.c
