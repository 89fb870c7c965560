# SPDX-License-Identifier: MIT
# make check-sanitize: the suite's stated subsets under ASan+UBSan and TSan (each in its own
# build of a copy of the tree, sanitize-build/), and under valgrind memcheck (check-sanitize.sh).
EXTRA_DIST += tests/sanitize/check-sanitize.sh tests/sanitize/valgrind.supp
check-sanitize: all
	$(SHELL) $(srcdir)/tests/sanitize/check-sanitize.sh $(srcdir)
.PHONY: check-sanitize

# The subset CI runs after make check (a few minutes on 2 cores): the reduction kernels (plain
# and streamed), authentication and parameters, point-to-point over shm (single-copy included)
# and tcp, the failure cases and the registered buffers under ASan+UBSan; point-to-point and
# desync diagnosis under TSan; authentication and point-to-point under valgrind memcheck.
# make check-sanitize runs the larger sets.
check-sanitize-ci: all
	SAN_TESTS="tests/unit/test_reduce tests/unit/test_reduce_nt tests/unit/test_auth tests/unit/test_params tests/mp/test_p2p tests/mp/test_failures tests/mp/test_register" \
	TSAN_TESTS="tests/mp/test_p2p tests/mp/test_diag" \
	VG_TESTS="tests/unit/test_auth tests/mp/test_p2p" \
	    $(SHELL) $(srcdir)/tests/sanitize/check-sanitize.sh $(srcdir)
.PHONY: check-sanitize-ci
