# SPDX-License-Identifier: MIT
# Fuzz harnesses of every wire parser. `make check` replays each committed seed corpus with
# deterministic mutations (driver.c); `make check-fuzz` builds them with clang's libFuzzer,
# ASan and UBSan in a separate tree and fuzzes each for FUZZ_SECONDS (check-fuzz.sh).
FUZZ_NAMES = boot tcp shm ckpt
FUZZ_PROGS = tests/fuzz/fuzz_boot tests/fuzz/fuzz_tcp tests/fuzz/fuzz_shm tests/fuzz/fuzz_ckpt
FUZZ_COMMON = tests/fuzz/fuzz.h tests/fuzz/quiet.c
if LIBFUZZER
FUZZ_LINK = -fsanitize=fuzzer
else
FUZZ_COMMON += tests/fuzz/driver.c
FUZZ_LINK =
endif
FUZZ_CPPFLAGS = $(TEST_CPPFLAGS) -iquote $(top_srcdir)/tests/fuzz
check_PROGRAMS += $(FUZZ_PROGS)
tests_fuzz_fuzz_boot_SOURCES = tests/fuzz/fuzz_boot.c $(FUZZ_COMMON)
tests_fuzz_fuzz_boot_CPPFLAGS = $(FUZZ_CPPFLAGS) -DFUZZ_CORPUS='"$(top_srcdir)/tests/fuzz/corpus/boot"'
tests_fuzz_fuzz_boot_LDADD = $(TEST_UNIT_LDADD)
tests_fuzz_fuzz_boot_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_tcp_SOURCES = tests/fuzz/fuzz_tcp.c $(FUZZ_COMMON)
tests_fuzz_fuzz_tcp_CPPFLAGS = $(FUZZ_CPPFLAGS) -DFUZZ_CORPUS='"$(top_srcdir)/tests/fuzz/corpus/tcp"'
tests_fuzz_fuzz_tcp_LDADD = $(TEST_UNIT_LDADD)
tests_fuzz_fuzz_tcp_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_shm_SOURCES = tests/fuzz/fuzz_shm.c $(FUZZ_COMMON)
tests_fuzz_fuzz_shm_CPPFLAGS = $(FUZZ_CPPFLAGS) -DFUZZ_CORPUS='"$(top_srcdir)/tests/fuzz/corpus/shm"'
tests_fuzz_fuzz_shm_LDADD = $(TEST_UNIT_LDADD)
tests_fuzz_fuzz_shm_LDFLAGS = $(FUZZ_LINK)
tests_fuzz_fuzz_ckpt_SOURCES = tests/fuzz/fuzz_ckpt.c $(FUZZ_COMMON)
tests_fuzz_fuzz_ckpt_CPPFLAGS = $(FUZZ_CPPFLAGS) -DFUZZ_CORPUS='"$(top_srcdir)/tests/fuzz/corpus/ckpt"'
tests_fuzz_fuzz_ckpt_LDADD = $(TEST_UNIT_LDADD)
tests_fuzz_fuzz_ckpt_LDFLAGS = $(FUZZ_LINK)
TESTS += $(FUZZ_PROGS)

# The seed generator: rebuild the committed corpus after a wire format changes
# (make tests/fuzz/make_seeds && tests/fuzz/make_seeds $(top_srcdir)/tests/fuzz/corpus).
EXTRA_PROGRAMS = tests/fuzz/make_seeds
tests_fuzz_make_seeds_SOURCES = tests/fuzz/make_seeds.c
tests_fuzz_make_seeds_CPPFLAGS = $(TEST_CPPFLAGS)
tests_fuzz_make_seeds_LDADD = $(TEST_UNIT_LDADD)
CLEANFILES += tests/fuzz/make_seeds

EXTRA_DIST += tests/fuzz/corpus tests/fuzz/README.md
EXTRA_DIST += tests/fuzz/check-fuzz.sh
check-fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) CLANG=$(CLANG) $(SHELL) $(srcdir)/tests/fuzz/check-fuzz.sh $(srcdir)
.PHONY: check-fuzz
