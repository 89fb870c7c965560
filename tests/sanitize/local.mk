# SPDX-License-Identifier: MIT
# make check-sanitize: the suite's stated subsets under ASan+UBSan and TSan (each in its own
# build of a copy of the tree, sanitize-build/), and under valgrind memcheck (check-sanitize.sh).
EXTRA_DIST += tests/sanitize/check-sanitize.sh tests/sanitize/valgrind.supp
check-sanitize: all
	$(SHELL) $(srcdir)/tests/sanitize/check-sanitize.sh $(srcdir)
.PHONY: check-sanitize
