/* SPDX-License-Identifier: MIT */
/*
 * collinfo's commands that need the library's internals (collinfo_algos.c, collinfo_topo.c); the
 * rest of collinfo (collinfo.c) uses the public API only.
 */
#ifndef COLL_TOOLS_COLLINFO_H
#define COLL_TOOLS_COLLINFO_H

#include <stdio.h>

/* "collinfo algos -n N ...": argv[0] is the command word. Returns the exit status. */
int collinfo_algos_main(int argc, char **argv);

/* The options of collinfo_algos_main, for the usage text. */
void collinfo_algos_usage(FILE *out);

/* "collinfo topo [--topo FILE] [--sysfs ROOT] [--xml FILE]": argv[0] is the command word. */
int collinfo_topo_main(int argc, char **argv);

/* The options of collinfo_topo_main, for the usage text. */
void collinfo_topo_usage(FILE *out);

/* "collinfo doctor [-n RANKS] [--root DIR]": exit 0 healthy (maybe warnings), 1 a problem. */
int  collinfo_doctor_main(int argc, char **argv);
void collinfo_doctor_usage(FILE *out);

#endif
