# SPDX-License-Identifier: MIT
COLL_LIB_SOURCES += transports/transport.h transports/registry.c \
    transports/match.h transports/match.c \
    transports/match_index.h transports/match_index.c
include $(srcdir)/transports/shm/local.mk
include $(srcdir)/transports/tcp/local.mk
include $(srcdir)/transports/ucx/local.mk
include $(srcdir)/transports/ib/local.mk
