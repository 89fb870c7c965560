# SPDX-License-Identifier: MIT
# GPU tests: built whenever CUDA is, part of make check (they report SKIP, exit 77, without a
# CUDA device), and run on their own by make check-gpu.
GPU_CHECK_BINS =
GPU_CHECK_SH =
EXTRA_DIST += tests/gpu/check-gpu.sh tests/gpu/bundle.sh tests/gpu/device_run.sh \
    tests/gpu/stackdump.c
if HAVE_CUDA
GPU_CHECK_BINS += tests/gpu/test_kernels tests/gpu/test_device_colls tests/gpu/test_p2p
check_PROGRAMS += tests/gpu/test_kernels tests/gpu/test_device_colls tests/gpu/test_p2p
TESTS += tests/gpu/test_kernels tests/gpu/test_device_colls tests/gpu/test_p2p
tests_gpu_test_kernels_SOURCES = tests/gpu/test_kernels.c
tests_gpu_test_kernels_CPPFLAGS = $(TEST_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_test_kernels_LDADD = $(TEST_UNIT_LDADD)
tests_gpu_test_device_colls_SOURCES = tests/gpu/test_device_colls.c tests/gpu/gpu_probe.c \
    tests/gpu/gpu_probe.h
tests_gpu_test_device_colls_CPPFLAGS = $(TEST_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_test_device_colls_LDADD = $(TEST_MP_LDADD) $(CUDA_LDFLAGS) $(CUDA_LIBS)
tests_gpu_test_p2p_SOURCES = tests/gpu/test_p2p.c tests/gpu/gpu_probe.c tests/gpu/gpu_probe.h
tests_gpu_test_p2p_CPPFLAGS = $(TEST_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_gpu_test_p2p_LDADD = $(TEST_MP_LDADD) $(CUDA_LDFLAGS) $(CUDA_LIBS)
endif

check-gpu: $(GPU_CHECK_BINS)
	@$(SHELL) $(srcdir)/tests/gpu/check-gpu.sh $(GPU_CHECK_BINS) $(GPU_CHECK_SH)
.PHONY: check-gpu
