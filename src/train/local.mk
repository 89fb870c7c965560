# SPDX-License-Identifier: MIT
# The training layer (include/coll_train.h): DDP, ZeRO and the gradient compressors (top-k and
# 1-bit with error feedback) on the public API, built into libcoll.
include_HEADERS += include/coll_train.h
COLL_LIB_SOURCES += src/train/train.h src/train/worker.c src/train/ddp.c
COLL_LIB_SOURCES += src/train/zero.h src/train/zero.c src/train/optim.c src/train/zero_ckpt.c
COLL_LIB_SOURCES += src/train/compress.h src/train/compress.c src/train/topk.c src/train/onebit.c
