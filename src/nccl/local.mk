# SPDX-License-Identifier: MIT
# The NCCL-compatible library: nccl.h and libnccl.so.2 on top of libcoll, installed in their
# own directories so that they never shadow a real NCCL by accident
# (cc -I$(includedir)/libcoll-nccl ... -L$(libdir)/libcoll-nccl -lnccl).
nccllibdir = $(libdir)/libcoll-nccl
nccllib_LTLIBRARIES = src/nccl/libnccl.la
src_nccl_libnccl_la_SOURCES = src/nccl/nccl.h src/nccl/nccl_internal.h src/nccl/nccl_comm.c \
    src/nccl/nccl_group.c src/nccl/nccl_colls.c src/nccl/nccl_premul.c src/nccl/nccl_mem.c
src_nccl_libnccl_la_CPPFLAGS = -I$(top_srcdir)/include -I$(top_srcdir)/src/nccl
src_nccl_libnccl_la_CFLAGS = $(COLL_CFLAGS)
src_nccl_libnccl_la_LDFLAGS = -version-number 2:18:3
src_nccl_libnccl_la_LIBADD = libcoll.la -lpthread -lm
ncclincludedir = $(includedir)/libcoll-nccl
ncclinclude_HEADERS = src/nccl/nccl.h
