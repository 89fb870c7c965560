# SPDX-License-Identifier: MIT
# bench/local.mk -- collbench (the nccl-tests-compatible benchmark, public API only), its man
# page, the plot and algorithm-sweep scripts, and the Open MPI comparison program, which is
# built only on request (make bench-mpi) and only where configure found mpicc.
bin_PROGRAMS += collbench
collbench_SOURCES = bench/collbench.c bench/collbench_ops.c bench/collbench_out.c bench/collbench.h \
    bench/collbench_cuda.c
collbench_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
collbench_LDADD = libcoll.la $(CUDA_LDFLAGS) $(CUDA_LIBS)
man_MANS += man/man1/collbench.1
EXTRA_DIST += man/man1/collbench.1.in bench/README.md bench/plot_busbw.sh \
    bench/results/cuda_h100_2026-11-22.md \
    bench/algo_sweep.sh bench/sim_scale.sh bench/sweep_lib.sh bench/train_sweep.sh \
    bench/mpi_allreduce_bench.c \
    bench/results/train_sweep_2026-11-22/info.txt bench/results/train_sweep_2026-11-22/raw.csv \
    bench/results/train_sweep_2026-11-22/medians.csv \
    bench/results/train_sweep_2026-11-22/summary.csv \
    bench/results/train_sweep_2026-11-22/step_time.png

# MPI_Allreduce with collbench's sweep and columns: make bench-mpi, then
# mpirun -np 4 bench/mpi_allreduce_bench -b 8 -e 64M -f 4
if HAVE_MPICC
bench/mpi_allreduce_bench$(EXEEXT): $(srcdir)/bench/mpi_allreduce_bench.c
	@$(MKDIR_P) bench
	$(AM_V_CC)$(MPICC) $(COLL_CFLAGS) $(CFLAGS) -o $@ $(srcdir)/bench/mpi_allreduce_bench.c
bench-mpi: bench/mpi_allreduce_bench$(EXEEXT)
else
bench-mpi:
	@echo "bench-mpi: configure found no mpicc; install Open MPI and run configure again" >&2
	@exit 1
endif
CLEANFILES += bench/mpi_allreduce_bench$(EXEEXT)
.PHONY: bench-mpi

# The device-to-device copy bandwidth, the ceiling device collectives are compared with.
if HAVE_CUDA
noinst_PROGRAMS += bench/cuda_copy_bw
bench_cuda_copy_bw_SOURCES = bench/cuda_copy_bw.c
bench_cuda_copy_bw_CPPFLAGS = $(AM_CPPFLAGS) $(CUDA_CPPFLAGS)
bench_cuda_copy_bw_LDADD = $(CUDA_LDFLAGS) $(CUDA_LIBS)
endif

# The training layer's benchmark (DDP overlap, ZeRO bytes per rank): collrun -n 2 ./train_bench;
# bench/train_sweep.sh runs it overlapped vs blocking in rounds, on one host and shaped hosts.
noinst_PROGRAMS += train_bench
train_bench_SOURCES = bench/train_bench.c bench/bench_time.h
train_bench_LDADD = libcoll.la
# Gradient compression: step time and wire bytes, dense against top-k and 1-bit
# (bench/compress_bench.sh runs it on one host and on shaped network-namespace hosts).
noinst_PROGRAMS += bench/compress_bench
bench_compress_bench_SOURCES = bench/compress_bench.c bench/bench_time.h
bench_compress_bench_LDADD = libcoll.la
EXTRA_DIST += bench/compress_bench.sh bench/ib_vm.sh bench/shm_cma_compare.sh bench/env_ab.sh bench/small_compare.sh \
    bench/cuda_p2p.sh bench/cuda_p2p_summary.awk bench/cuda_call_cost.sh bench/median.awk
# Many non-blocking operations in flight: start and wait cost per operation against their number.
noinst_PROGRAMS += bench/nb_outstanding
bench_nb_outstanding_SOURCES = bench/nb_outstanding.c bench/bench_time.h
bench_nb_outstanding_LDADD = libcoll.la
# Memory bandwidth (read, write, copy, add; 1..T threads): the ceiling collectives are held to.
noinst_PROGRAMS += bench/membw
bench_membw_SOURCES = bench/membw.c bench/bench_time.h
bench_membw_LDADD = -lpthread
# Cross-memory attach's copy rate beside memcpy's (the unregistered direct path's ceiling).
noinst_PROGRAMS += bench/cma_bw
bench_cma_bw_SOURCES = bench/cma_bw.c bench/bench_time.h
# bench/compare: the harnesses it builds against Open MPI, MPICH, Gloo and torch, and its tables.
EXTRA_DIST += bench/compare bench/compare.d/mpi.c bench/compare.d/gloo.cc \
    bench/compare.d/torch_gloo.py bench/compare.d/summary.py
