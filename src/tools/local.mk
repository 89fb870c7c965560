# SPDX-License-Identifier: MIT
# Tools: collrun (local launcher; it only sets environment variables, so it does not link
# libcoll) and collinfo (collinfo.mk).
bin_PROGRAMS += collrun
collrun_SOURCES = src/tools/collrun.c src/tools/collrun.h src/tools/collrun_spawn.c \
                  src/tools/collrun_loop.c src/tools/collrun_relay.c
collrun_CPPFLAGS = $(AM_CPPFLAGS) -DCOLLRUN_VERSION='"$(PACKAGE_VERSION)"'
collrun_LDADD =
dist_check_SCRIPTS += tests/tools/test_collrun.sh
TESTS += tests/tools/test_collrun.sh
man_MANS += man/man1/collrun.1
EXTRA_DIST += man/man1/collrun.1.in

include $(srcdir)/src/tools/collinfo.mk
