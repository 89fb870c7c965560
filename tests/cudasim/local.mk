# SPDX-License-Identifier: MIT
# cudasim: the GPU tests' programs built against a host emulation of the CUDA runtime and
# driver (tests/cudasim/README.md), so that the device-memory paths run in every CUDA build,
# GPU or not. tests/cudasim/libcuda.la stands in for libcuda.so.1 and the runtime alike.
EXTRA_DIST += tests/cudasim/run.sh tests/cudasim/README.md
if HAVE_CUDA
check_LTLIBRARIES += tests/cudasim/libcuda.la
tests_cudasim_libcuda_la_SOURCES = tests/cudasim/cudasim.c tests/cudasim/cudasim_stream.c \
    tests/cudasim/cudasim_mem.c tests/cudasim/cudasim.h tests/cudasim/cudasim_int.h
tests_cudasim_libcuda_la_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
tests_cudasim_libcuda_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
# -rpath makes it a shared library, named and versioned as the driver it stands in for
tests_cudasim_libcuda_la_LDFLAGS = -rpath $(abs_builddir)/tests/cudasim -version-info 1:0:0
tests_cudasim_libcuda_la_LIBADD = -lpthread
CUDASIM_CPPFLAGS = $(TEST_CPPFLAGS) $(CUDA_CPPFLAGS) -iquote $(top_srcdir)/tests/cudasim
# the emulation comes first, so the CUDA runtime archive that libcoll-internal names
# contributes nothing (run.sh checks)
CUDASIM_LDADD = tests/cudasim/libcuda.la tests/libcolltest.la libcoll-internal.la -lpthread -lm
check_PROGRAMS += tests/cudasim/test_cudasim tests/cudasim/test_device_colls tests/cudasim/test_p2p \
    tests/cudasim/collbench
tests_cudasim_test_cudasim_SOURCES = tests/cudasim/test_cudasim.c tests/cudasim/kernels_host.c
tests_cudasim_test_cudasim_CPPFLAGS = $(CUDASIM_CPPFLAGS)
tests_cudasim_test_cudasim_LDADD = $(CUDASIM_LDADD)
tests_cudasim_test_device_colls_SOURCES = tests/gpu/test_device_colls.c tests/gpu/gpu_probe.c \
    tests/cudasim/kernels_host.c
tests_cudasim_test_device_colls_CPPFLAGS = $(CUDASIM_CPPFLAGS)
tests_cudasim_test_device_colls_LDADD = $(CUDASIM_LDADD)
tests_cudasim_test_p2p_SOURCES = tests/gpu/test_p2p.c tests/gpu/gpu_probe.c \
    tests/cudasim/kernels_host.c
tests_cudasim_test_p2p_CPPFLAGS = $(CUDASIM_CPPFLAGS)
tests_cudasim_test_p2p_LDADD = $(CUDASIM_LDADD)
# collbench on device buffers (-M cuda), run by run.sh through collrun
tests_cudasim_collbench_SOURCES = bench/collbench.c bench/collbench_ops.c bench/collbench_out.c \
    bench/collbench.h bench/collbench_cuda.c tests/cudasim/kernels_host.c
tests_cudasim_collbench_CPPFLAGS = $(CUDASIM_CPPFLAGS)
tests_cudasim_collbench_LDADD = $(CUDASIM_LDADD)
TESTS += tests/cudasim/run.sh
endif
