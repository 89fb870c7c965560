# SPDX-License-Identifier: MIT
# ctrain, the reference data-parallel trainer (public coll.h and coll_train.h only), and its
# tests: PyTorch parity and N ranks against 1 rank on a committed slice of Moby Dick.
bin_PROGRAMS += ctrain
ctrain_SOURCES = train/ctrain.c train/ctrain_opts.c train/ctrain_opts.h train/ctrain_dump.c \
    train/ctrain_dump.h train/gpt.c train/gpt.h train/gpt_layers.c train/gpt_layers.h \
    train/data.c train/data.h train/rng.h train/ckpt.c train/ckpt.h train/model.h \
    train/model_gpt.c train/model_mlp.c train/ctrain_zero.c train/ctrain_zero.h \
    train/ctrain_elastic.c train/ctrain_elastic.h \
    train/precision.c train/precision.h
ctrain_CPPFLAGS = -I$(top_srcdir)/include -I$(top_builddir)/include
ctrain_CFLAGS = $(AM_CFLAGS) $(OPENMP_CFLAGS)
ctrain_LDFLAGS = $(OPENMP_CFLAGS)
ctrain_LDADD = libcoll.la -lz -lpthread -lm
EXTRA_DIST += train/fetch_moby_dick.sh train/plot_loss.sh
dist_man_MANS += man/man1/ctrain.1
