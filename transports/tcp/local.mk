# SPDX-License-Identifier: MIT
# TCP transport: context and ops table, framed data path, connection setup, interface choice.
COLL_LIB_SOURCES += transports/tcp/tcp.h transports/tcp/tcp.c transports/tcp/tcp_ep.c \
    transports/tcp/tcp_conn.c transports/tcp/tcp_wire.c transports/tcp/tcp_ifaddr.c

check_PROGRAMS += tests/unit/test_tcp tests/unit/test_tcp_faults
tests_unit_test_tcp_SOURCES = tests/unit/test_tcp.c tests/unit/tcp_rig.c tests/unit/tcp_rig.h
tests_unit_test_tcp_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_tcp_LDADD = libcoll-internal.la -lpthread -lm
tests_unit_test_tcp_faults_SOURCES = tests/unit/test_tcp_faults.c tests/unit/tcp_rig.c \
    tests/unit/tcp_rig.h
tests_unit_test_tcp_faults_CPPFLAGS = $(TEST_CPPFLAGS)
tests_unit_test_tcp_faults_LDADD = libcoll-internal.la -lpthread -lm
TESTS += tests/unit/test_tcp tests/unit/test_tcp_faults
