# SPDX-License-Identifier: MIT
bin_PROGRAMS += collinfo
collinfo_SOURCES = src/tools/collinfo.c
collinfo_LDADD = libcoll.la
