# SPDX-License-Identifier: MIT
COLL_LIB_SOURCES += algorithms/sched.h algorithms/sched.c algorithms/algo.h \
    algorithms/registry.c algorithms/cost.h algorithms/cost.c \
    algorithms/layout.h algorithms/layout.c algorithms/model.h \
    algorithms/ring/ring.h algorithms/ring/allreduce.c algorithms/ring/reduce_scatter.c \
    algorithms/ring/allgather.c algorithms/ring/broadcast.c algorithms/ring/reduce.c \
    algorithms/basic/basic.h algorithms/basic/alltoall.c algorithms/basic/barrier.c \
    algorithms/basic/sendrecv.c algorithms/basic/allgather_bruck.c \
    algorithms/rd/rd.h algorithms/rd/allreduce_rd.c algorithms/rd/allreduce_rab.c \
    algorithms/rd/reduce_scatter_rh.c \
    algorithms/tree/tree.h algorithms/tree/dbtree.c algorithms/tree/allreduce.c \
    algorithms/tree/bcast_reduce.c \
    algorithms/hier/compose.h algorithms/hier/compose.c algorithms/hier/hier.h algorithms/hier/hier.c \
    algorithms/window/window.h algorithms/window/common.c algorithms/window/oneshot.c \
    algorithms/window/twoshot.c
