# SPDX-License-Identifier: MIT
# The training layer's gradient compressors (coll_compress_*, include/coll_train.h): top-k and
# 1-bit with error feedback, on the public API, built into libcoll.
include_HEADERS += include/coll_train.h
COLL_LIB_SOURCES += src/train/compress.h src/train/compress.c src/train/topk.c src/train/onebit.c
