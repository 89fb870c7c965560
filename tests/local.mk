# SPDX-License-Identifier: MIT
# make check: unit tests per module, multi-process correctness and failure tests (they fork
# their own ranks), docs-consistency checks. Small chunks so every multi-chunk path runs.
AM_TESTS_ENVIRONMENT = COLL_DEBUG=$${COLL_DEBUG:-warn}; COLL_CHUNK_SIZE=4k; \
    COLLRUN=$(abs_top_builddir)/collrun; top_builddir=$(top_builddir); \
    export COLL_DEBUG COLL_CHUNK_SIZE COLLRUN top_builddir;

check_LTLIBRARIES += tests/libcolltest.la
tests_libcolltest_la_SOURCES = tests/harness/coll_test.h tests/harness/coll_test.c \
    tests/mp/mp_data.h tests/mp/mp_data.c
tests_libcolltest_la_CPPFLAGS = $(AM_CPPFLAGS) -iquote $(top_srcdir)/tests/harness

TEST_CPPFLAGS = $(AM_CPPFLAGS) -iquote $(top_srcdir)/tests/harness -iquote $(top_srcdir)/tests/mp \
    -iquote $(top_srcdir)/tests/sim
TEST_MP_LDADD = tests/libcolltest.la libcoll.la -lm
TEST_UNIT_LDADD = tests/libcolltest.la libcoll-internal.la -lpthread -lm

# ---- unit tests (internal functions, no network) ----
check_PROGRAMS += tests/unit/test_reduce tests/unit/test_reduce_nt tests/unit/test_params tests/unit/test_log_filter \
    tests/unit/test_sched_matrix tests/unit/test_sched_struct tests/unit/test_sched_registry \
    tests/unit/test_env tests/unit/test_win_sched tests/unit/test_topo tests/unit/test_topo_sysfs \
    tests/unit/test_topo_ring tests/unit/test_topo_nic tests/unit/test_auth tests/unit/test_p2p_plan \
    tests/unit/test_p2p_topo tests/unit/test_cuda_order tests/unit/test_boot_connect \
    tests/unit/test_match
tests_unit_test_boot_connect_SOURCES = tests/unit/test_boot_connect.c
tests_unit_test_boot_connect_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_boot_connect_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_cuda_order_SOURCES = tests/unit/test_cuda_order.c
tests_unit_test_cuda_order_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_cuda_order_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_p2p_topo_SOURCES = tests/unit/test_p2p_topo.c
tests_unit_test_p2p_topo_CPPFLAGS = $(TEST_CPPFLAGS) -DTOPO_DIR='"$(abs_top_srcdir)/tests/topologies"'
tests_unit_test_p2p_topo_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_p2p_plan_SOURCES = tests/unit/test_p2p_plan.c
tests_unit_test_p2p_plan_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_p2p_plan_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_match_SOURCES = tests/unit/test_match.c
tests_unit_test_match_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_match_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_auth_SOURCES = tests/unit/test_auth.c
tests_unit_test_auth_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_auth_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_env_SOURCES = tests/unit/test_env.c
tests_unit_test_env_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_env_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_reduce_SOURCES = tests/unit/test_reduce.c
tests_unit_test_reduce_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_reduce_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_reduce_nt_SOURCES = tests/unit/test_reduce_nt.c
tests_unit_test_reduce_nt_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_reduce_nt_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_params_SOURCES = tests/unit/test_params.c
tests_unit_test_params_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_params_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_log_filter_SOURCES = tests/unit/test_log_filter.c
tests_unit_test_log_filter_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_log_filter_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_sched_matrix_SOURCES = tests/unit/test_sched_matrix.c tests/unit/sched_case.c \
    tests/unit/sched_case.h tests/sim/sim.c tests/sim/sim.h
tests_unit_test_sched_matrix_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_sched_matrix_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_sched_struct_SOURCES = tests/unit/test_sched_struct.c tests/sim/sim.c \
    tests/sim/sim.h tests/sim/sim_selftest.c
tests_unit_test_sched_struct_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_sched_struct_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_sched_registry_SOURCES = tests/unit/test_sched_registry.c
tests_unit_test_sched_registry_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_sched_registry_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_win_sched_SOURCES = tests/unit/test_win_sched.c
tests_unit_test_win_sched_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_win_sched_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_topo_SOURCES = tests/unit/test_topo.c
tests_unit_test_topo_CPPFLAGS = $(TEST_CPPFLAGS) -DTOPO_DIR='"$(abs_top_srcdir)/tests/topologies"'
tests_unit_test_topo_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_topo_ring_SOURCES = tests/unit/test_topo_ring.c
tests_unit_test_topo_ring_CPPFLAGS = $(TEST_CPPFLAGS) -DTOPO_DIR='"$(abs_top_srcdir)/tests/topologies"'
tests_unit_test_topo_ring_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_topo_nic_SOURCES = tests/unit/test_topo_nic.c
tests_unit_test_topo_nic_CPPFLAGS = $(TEST_CPPFLAGS) -DTOPO_DIR='"$(abs_top_srcdir)/tests/topologies"'
tests_unit_test_topo_nic_LDADD = $(TEST_UNIT_LDADD)
tests_unit_test_topo_sysfs_SOURCES = tests/unit/test_topo_sysfs.c
tests_unit_test_topo_sysfs_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_topo_sysfs_LDADD = $(TEST_UNIT_LDADD)

# ---- multi-process correctness matrix: one program per collective ----
MP_COLL_TESTS = tests/mp/test_allreduce tests/mp/test_reduce_scatter tests/mp/test_allgather \
    tests/mp/test_broadcast tests/mp/test_reduce tests/mp/test_alltoall
check_PROGRAMS += $(MP_COLL_TESTS)
tests_mp_test_allreduce_SOURCES = tests/mp/test_colls.c
tests_mp_test_allreduce_CPPFLAGS = $(TEST_CPPFLAGS) -DMP_COLL=0
tests_mp_test_allreduce_LDADD = $(TEST_MP_LDADD)
tests_mp_test_reduce_scatter_SOURCES = tests/mp/test_colls.c
tests_mp_test_reduce_scatter_CPPFLAGS = $(TEST_CPPFLAGS) -DMP_COLL=1
tests_mp_test_reduce_scatter_LDADD = $(TEST_MP_LDADD)
tests_mp_test_allgather_SOURCES = tests/mp/test_colls.c
tests_mp_test_allgather_CPPFLAGS = $(TEST_CPPFLAGS) -DMP_COLL=2
tests_mp_test_allgather_LDADD = $(TEST_MP_LDADD)
tests_mp_test_broadcast_SOURCES = tests/mp/test_colls.c
tests_mp_test_broadcast_CPPFLAGS = $(TEST_CPPFLAGS) -DMP_COLL=3
tests_mp_test_broadcast_LDADD = $(TEST_MP_LDADD)
tests_mp_test_reduce_SOURCES = tests/mp/test_colls.c
tests_mp_test_reduce_CPPFLAGS = $(TEST_CPPFLAGS) -DMP_COLL=4
tests_mp_test_reduce_LDADD = $(TEST_MP_LDADD)
tests_mp_test_alltoall_SOURCES = tests/mp/test_colls.c
tests_mp_test_alltoall_CPPFLAGS = $(TEST_CPPFLAGS) -DMP_COLL=5
tests_mp_test_alltoall_LDADD = $(TEST_MP_LDADD)

# ---- multi-process API, point-to-point and failure tests ----
MP_OTHER_TESTS = tests/mp/test_p2p tests/mp/test_split tests/mp/test_failures tests/mp/test_shrink \
    tests/mp/test_args tests/mp/test_window tests/mp/test_diag tests/mp/test_soak \
    tests/mp/test_register tests/mp/test_direct_cma tests/mp/test_small tests/mp/test_agree \
    tests/mp/test_unexpected
check_PROGRAMS += $(MP_OTHER_TESTS)
tests_mp_test_p2p_SOURCES = tests/mp/test_p2p.c
tests_mp_test_p2p_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_p2p_LDADD = $(TEST_MP_LDADD)
tests_mp_test_unexpected_SOURCES = tests/mp/test_unexpected.c
tests_mp_test_unexpected_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_unexpected_LDADD = $(TEST_MP_LDADD)
tests_mp_test_split_SOURCES = tests/mp/test_split.c
tests_mp_test_split_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_split_LDADD = $(TEST_MP_LDADD)
tests_mp_test_shrink_SOURCES = tests/mp/test_shrink.c
tests_mp_test_shrink_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_shrink_LDADD = $(TEST_MP_LDADD)
tests_mp_test_failures_SOURCES = tests/mp/test_failures.c
tests_mp_test_failures_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_failures_LDADD = $(TEST_UNIT_LDADD)
tests_mp_test_window_SOURCES = tests/mp/test_window.c
tests_mp_test_window_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_window_LDADD = $(TEST_MP_LDADD)
tests_mp_test_register_SOURCES = tests/mp/test_register.c
tests_mp_test_register_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_register_LDADD = $(TEST_MP_LDADD)
tests_mp_test_direct_cma_SOURCES = tests/mp/test_direct_cma.c
tests_mp_test_direct_cma_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_direct_cma_LDADD = $(TEST_MP_LDADD) -lpthread
tests_mp_test_small_SOURCES = tests/mp/test_small.c
tests_mp_test_small_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_small_LDADD = $(TEST_UNIT_LDADD)
tests_mp_test_diag_SOURCES = tests/mp/test_diag.c
tests_mp_test_diag_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_diag_LDADD = $(TEST_MP_LDADD)
tests_mp_test_soak_SOURCES = tests/mp/test_soak.c
tests_mp_test_soak_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_soak_LDADD = $(TEST_MP_LDADD)
tests_mp_test_agree_SOURCES = tests/mp/test_agree.c
tests_mp_test_agree_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_agree_LDADD = $(TEST_MP_LDADD)
tests_mp_test_args_SOURCES = tests/mp/test_args.c
tests_mp_test_args_CPPFLAGS = $(TEST_CPPFLAGS)
tests_mp_test_args_LDADD = $(TEST_MP_LDADD)

TESTS += tests/unit/test_reduce tests/unit/test_reduce_nt tests/unit/test_p2p_plan tests/unit/test_p2p_topo tests/unit/test_cuda_order tests/unit/test_params tests/unit/test_log_filter \
    tests/unit/test_sched_matrix tests/unit/test_sched_struct tests/unit/test_sched_registry \
    tests/unit/test_env tests/unit/test_win_sched tests/unit/test_topo tests/unit/test_topo_sysfs \
    tests/unit/test_topo_ring tests/unit/test_topo_nic tests/unit/test_auth tests/unit/test_boot_connect \
    tests/unit/test_match $(MP_COLL_TESTS) $(MP_OTHER_TESTS)

dist_check_SCRIPTS += tests/docs/check-getenv.sh tests/docs/check-format.sh tests/tools/test_launchers.sh \
    tests/mp/test_multihost.sh tests/tools/test_netns.sh tests/tools/test_collinfo.sh \
    tests/tools/test_nic_netns.sh tests/tools/test_topo_comm.sh tests/tools/test_doctor.sh
dist_check_SCRIPTS += tests/mp/test_ucx.sh
TESTS += tests/mp/test_ucx.sh
TESTS += tests/docs/check-getenv.sh tests/docs/check-format.sh tests/tools/test_launchers.sh \
    tests/mp/test_multihost.sh tests/tools/test_netns.sh tests/tools/test_collinfo.sh \
    tests/tools/test_nic_netns.sh tests/tools/test_topo_comm.sh tests/tools/test_doctor.sh
# Sourced by test_netns.sh and bench/{algo,train}_sweep.sh: hosts as network namespaces.
EXTRA_DIST += tests/tools/netns_lib.sh tests/tools/ports_lib.sh
# Machines as hwloc XML, for collinfo topo and the topology tests (COLL_TOPO_FILE replays them).
EXTRA_DIST += tests/topologies/synthetic_2s8g4n.xml tests/topologies/synthetic_dgx.xml \
    tests/topologies/synthetic_quadnuma.xml


# ---- ctrain: PyTorch parity (77 without python3-torch), N ranks = 1 rank, bad options,
# kill -9 and resume ----
dist_check_SCRIPTS += tests/ctrain/test_ctrain_parity.sh tests/ctrain/test_ctrain_ranks.sh \
    tests/ctrain/test_ctrain_ckpt.sh tests/ctrain/test_ctrain_elastic.sh
TESTS += tests/ctrain/test_ctrain_parity.sh tests/ctrain/test_ctrain_ranks.sh \
    tests/ctrain/test_ctrain_ckpt.sh tests/ctrain/test_ctrain_elastic.sh
# ctrain's bf16/fp16 rounding and loss scaler (train/precision.c) against hand-worked values
check_PROGRAMS += tests/ctrain/test_precision
tests_ctrain_test_precision_SOURCES = tests/ctrain/test_precision.c train/precision.c train/precision.h
tests_ctrain_test_precision_CPPFLAGS = -I$(top_srcdir)/train
tests_ctrain_test_precision_LDADD = -lm
TESTS += tests/ctrain/test_precision
EXTRA_DIST += tests/ctrain/torch_ref.py tests/ctrain/moby_dick_200k.txt
# bench/membw, collbench --bound and bench/compare's option checks.
dist_check_SCRIPTS += tests/tools/test_bench_bound.sh
TESTS += tests/tools/test_bench_bound.sh
dist_check_SCRIPTS += tests/tools/test_boot_join.sh
TESTS += tests/tools/test_boot_join.sh
