# SPDX-License-Identifier: MIT
# libcoll core: platform, bootstrap, engine, reduction kernels, public API.
COLL_LIB_SOURCES += \
    src/core/compiler.h src/core/error.h src/core/log.h src/core/log.c \
    src/core/param.h src/core/param.c src/core/params.def src/core/util.h src/core/util.c \
    src/core/error.c \
    src/reduce/reduce.h src/reduce/reduce.c \
    src/bootstrap/bootstrap.h src/bootstrap/bootstrap.c src/bootstrap/root.c \
    src/bootstrap/wire.h src/bootstrap/wire.c src/bootstrap/sock.h src/bootstrap/sock.c src/bootstrap/ifaddr.c \
    src/bootstrap/env.c \
    src/engine/engine.h src/engine/engine.c src/engine/task.c src/engine/wait.c \
    src/engine/window.c \
    src/api/comm.h src/api/comm.c src/api/colls.c src/api/check.c src/api/check.h \
    src/api/request.c src/api/init.c src/api/info.c src/api/tune.h src/api/tune.c
