# SPDX-License-Identifier: MIT
bin_PROGRAMS += collinfo
# The prediction table (collinfo_algos.c) and the topology view (collinfo_topo.c) call the
# registry, the cost model, the parameter table and the topology model directly, so collinfo
# links the convenience library rather than libcoll.so.
collinfo_SOURCES = src/tools/collinfo.c src/tools/collinfo.h src/tools/collinfo_algos.c \
    src/tools/collinfo_topo.c src/tools/collinfo_doctor.c
collinfo_LDADD = libcoll-internal.la -lpthread -lm
