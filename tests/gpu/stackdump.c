/* SPDX-License-Identifier: MIT */
/*
 * A preloaded library for runs on a GPU machine without a debugger (tests/gpu/device_run.sh):
 * SIGUSR2 to a process writes every thread's user stack to $STACKDUMP_DIR/PID.TID (default
 * /tmp), as backtrace_symbols_fd gives it: each frame's object and offset in it, which
 * addr2line turns into a function and line on the machine that built the programs. Built by
 * tests/gpu/bundle.sh with the host compiler, not part of libcoll.
 *   LD_PRELOAD=stackdump.so program ...   then   kill -USR2 PID
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SD_THREAD_SIGNAL (SIGRTMIN + 7)

static char sd_dir[512] = "/tmp";

/* In each thread: its own stack. No allocation here: the thread may hold the allocator's lock. */
static void sd_thread(int sig)
{
    void *frames[64];
    char  path[600], head[160], comm[64] = "", cpath[64];
    long  tid = syscall(SYS_gettid);
    int   n   = backtrace(frames, 64);
    (void)sig;

    snprintf(cpath, sizeof(cpath), "/proc/self/task/%ld/comm", tid);
    int cf = open(cpath, O_RDONLY);
    if (cf >= 0) {
        ssize_t k           = read(cf, comm, sizeof(comm) - 1);
        comm[k > 0 ? k : 0] = '\0';
        close(cf);
    }
    snprintf(path, sizeof(path), "%s/%d.%ld", sd_dir, (int)getpid(), tid);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        int h = snprintf(head, sizeof(head), "pid %d thread %ld %s", (int)getpid(), tid, comm);
        if (h > 0 && write(fd, head, (size_t)h < sizeof(head) ? (size_t)h : sizeof(head) - 1) < 0) {
            h = 0; /* nothing to do about it in a handler */
        }
        backtrace_symbols_fd(frames, n, fd);
        close(fd);
    }
}

/* SIGUSR2: the same signal to every thread of the process (getdents64 on a stack buffer, as
 * opendir would allocate). */
static void sd_process(int sig)
{
    char buf[4096];
    long k;
    int  fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
    (void)sig;
    while (fd >= 0 && (k = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
        for (long off = 0; off < k;) {
            struct dirent64 *e = (struct dirent64 *)(buf + off);
            if (e->d_name[0] != '.') {
                syscall(SYS_tgkill, getpid(), atoi(e->d_name), SD_THREAD_SIGNAL);
            }
            off += e->d_reclen;
        }
    }
    if (fd >= 0) {
        close(fd);
    }
}

__attribute__((constructor)) static void sd_init(void)
{
    void            *frames[4];
    struct sigaction sa;
    const char      *dir = getenv("STACKDUMP_DIR");

    if (dir != NULL && dir[0] != '\0') {
        snprintf(sd_dir, sizeof(sd_dir), "%s", dir);
    }
    backtrace(frames, 4); /* loads the unwinder now rather than in a handler */
    memset(&sa, 0, sizeof(sa));
    sa.sa_flags   = SA_RESTART;
    sa.sa_handler = sd_thread;
    sigaction(SD_THREAD_SIGNAL, &sa, NULL);
    sa.sa_handler = sd_process;
    sigaction(SIGUSR2, &sa, NULL);
}
