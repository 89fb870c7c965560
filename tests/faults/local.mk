# SPDX-License-Identifier: MIT
# Fault injection: fault_rank runs under collrun and injects one fault; check-faults.sh draws
# trials over collectives x algorithms x transports. make check runs 2 trials per fault kind,
# make check-faults FAULT_TRIALS=N (default 100).
check_PROGRAMS += tests/faults/fault_rank
tests_faults_fault_rank_SOURCES = tests/faults/fault_rank.c
tests_faults_fault_rank_CPPFLAGS = $(AM_CPPFLAGS)
tests_faults_fault_rank_LDADD = libcoll.la -lpthread
dist_check_SCRIPTS += tests/faults/test_faults.sh tests/faults/check-faults.sh
TESTS += tests/faults/test_faults.sh
FAULT_TRIALS = 100
check-faults: collrun tests/faults/fault_rank tests/mp/test_args
	top_builddir=$(abs_top_builddir) $(SHELL) $(srcdir)/tests/faults/check-faults.sh $(FAULT_TRIALS)
.PHONY: check-faults
