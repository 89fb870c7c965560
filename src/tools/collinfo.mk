# SPDX-License-Identifier: MIT
bin_PROGRAMS += collinfo
# The prediction table (collinfo_algos.c) calls the registry, the cost model and the parameter
# table directly, so collinfo links the convenience library rather than libcoll.so.
collinfo_SOURCES = src/tools/collinfo.c src/tools/collinfo.h src/tools/collinfo_algos.c
collinfo_LDADD = libcoll-internal.la -lpthread -lm
