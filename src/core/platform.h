/* core/platform.h - the few operating-system services pocket uses beyond C11 and
 * POSIX, each with a POSIX fallback.
 *
 * Linux gets futex waits, madvise read-ahead/huge-page hints and
 * getauxval() CPU features; Apple gets sysctlbyname(); everything else (and
 * Linux built with -DPK_PORTABLE, `make PORTABLE=1`, which is how the
 * fallback is tested) gets a pthread mutex + condition variable and no
 * hints. No Linux header is included outside the Linux branch of
 * core/platform.c. pk_platform_name() says which branch was compiled.
 */
#ifndef PK_PLATFORM_H
#define PK_PLATFORM_H

#include <stddef.h>
#include <stdatomic.h>

/* "linux", "apple" or "posix" (the fallback), for logs and tests. */
const char *pk_platform_name(void);

/* Block while *word == seen (returns at once if it already differs). May
 * also return spuriously: callers re-check *word in a loop. */
void pk_word_wait(atomic_uint *word, unsigned seen);
/* Wake every thread blocked in pk_word_wait(word, ...). The caller changes
 * *word (with a sequentially consistent store) before calling this, so a
 * waiter either sees the new value or is woken. */
void pk_word_wake_all(atomic_uint *word);

/* Hint that the read-only mapping [addr, addr+len) will be streamed soon:
 * huge pages and read-ahead where the system has them, nothing otherwise.
 * Never fails (hints that the system refuses are ignored). */
void pk_map_hint_sequential(void *addr, size_t len);
/* pk_mem_available (pocket.h) lives in core/platform.c */

/* Spin-wait pause for one polling iteration (x86 pause, AArch64 isb). */
static inline void pk_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("isb" ::: "memory");
#endif
}

/* AArch64 features beyond baseline NEON that kernel tables may need, as a
 * bit set: from getauxval(AT_HWCAP/AT_HWCAP2) on Linux,
 * sysctlbyname("hw.optional.arm.FEAT_*") on Apple; 0 elsewhere, on other
 * architectures and in the POSIX fallback (only baseline NEON, which every
 * ARMv8-A CPU has, is then assumed). */
enum {
    PK_ARM_FP16    = 1 << 0,   /* half-precision arithmetic (FEAT_FP16) */
    PK_ARM_DOTPROD = 1 << 1,   /* sdot/udot (FEAT_DotProd) */
    PK_ARM_I8MM    = 1 << 2,   /* smmla/ummla/usdot (FEAT_I8MM) */
    PK_ARM_BF16    = 1 << 3,   /* bfdot/bfmmla (FEAT_BF16) */
    PK_ARM_SVE     = 1 << 4,   /* SVE */
};
unsigned pk_arm_features(void);

/* pk_cpu_name (a short CPU name for reports) is public: include/pocket.h. */

#endif
