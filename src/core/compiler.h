/* SPDX-License-Identifier: MIT */
/* Compiler helpers shared by every file: branch hints, alignment, unused markers. */
#ifndef COLL_CORE_COMPILER_H
#define COLL_CORE_COMPILER_H

#define coll_likely(_x)     __builtin_expect(!!(_x), 1)
#define coll_unlikely(_x)   __builtin_expect(!!(_x), 0)
#define COLL_CACHELINE      64
#define COLL_ALIGNED(_n)    __attribute__((aligned(_n)))
#define COLL_UNUSED         __attribute__((unused))
#define COLL_ARRAY_SIZE(_a) (sizeof(_a) / sizeof((_a)[0]))
#define COLL_MIN_OF(_a, _b) ((_a) < (_b) ? (_a) : (_b))
#define COLL_MAX_OF(_a, _b) ((_a) > (_b) ? (_a) : (_b))
#define COLL_DIV_UP(_a, _b) (((_a) + (_b)-1) / (_b))

/* One pass of a spin-wait: tells the core (and a hyperthread sibling) that we poll. */
static inline void coll_cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

#endif
