# SPDX-License-Identifier: MIT
# make check-rdma: the correctness matrix over the ib transport inside a Soft-RoCE VM.
EXTRA_DIST += tests/rdma/check-rdma.sh tests/rdma/run-in-rxe-vm.sh tests/rdma/gid_error.sh tests/rdma/gdr_probe.sh tests/rdma/mixed_offer.sh tests/rdma/two_node.sh
dist_check_SCRIPTS += tests/rdma/test_rdma.sh
TESTS += tests/rdma/test_rdma.sh
check-rdma: all
	@$(MAKE) $(AM_MAKEFLAGS) $(check_PROGRAMS)
	srcdir=$(srcdir) $(SHELL) $(srcdir)/tests/rdma/check-rdma.sh
.PHONY: check-rdma
clean-local:
	rm -rf rdma-run fuzz-build bindings/torch/build bindings/torch/lib
