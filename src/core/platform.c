/* core/platform.c - operating-system services behind src/core/platform.h: Linux
 * (futex, madvise, getauxval, /proc/cpuinfo), Apple (sysctlbyname) and the
 * POSIX fallback (pthread mutex + condition variable, no hints), which
 * -DPK_PORTABLE forces on Linux so that it is built and tested there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/platform.h"
#include "pocket.h"

#if defined(__linux__) && !defined(PK_PORTABLE)
#define PK_OS_LINUX 1
#include <linux/futex.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#endif
#elif defined(__APPLE__) && !defined(PK_PORTABLE)
#define PK_OS_APPLE 1
#include <sys/sysctl.h>
#include <sys/types.h>
#endif

#if !defined(PK_OS_LINUX)
#include <pthread.h>
#endif

const char *pk_platform_name(void) {
#if defined(PK_OS_LINUX)
    return "linux";
#elif defined(PK_OS_APPLE)
    return "apple";
#else
    return "posix";
#endif
}

/* ---- waiting on a word ------------------------------------------------------- */

#if defined(PK_OS_LINUX)
void pk_word_wait(atomic_uint *word, unsigned seen) {
    /* the kernel compares *word with seen under its own lock: no lost wake-up */
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
}
void pk_word_wake_all(atomic_uint *word) {
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}
#else
/* One mutex + condition variable for every word: waits are rare (a worker
 * that has spun for ~100 us without work) and every wake is a broadcast, so
 * sharing costs only spurious wake-ups, which callers tolerate. A waiter
 * checks the word while holding the mutex and the waker broadcasts while
 * holding it, after changing the word: the change is either seen by the
 * check or happens before the waiter sleeps, and then the broadcast finds
 * it sleeping. */
static pthread_mutex_t word_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t word_cv = PTHREAD_COND_INITIALIZER;

void pk_word_wait(atomic_uint *word, unsigned seen) {
    pthread_mutex_lock(&word_mu);
    while (atomic_load(word) == seen) pthread_cond_wait(&word_cv, &word_mu);
    pthread_mutex_unlock(&word_mu);
}
void pk_word_wake_all(atomic_uint *word) {
    (void)word;
    pthread_mutex_lock(&word_mu);
    pthread_cond_broadcast(&word_cv);
    pthread_mutex_unlock(&word_mu);
}
#endif

/* ---- mapping hints ------------------------------------------------------------ */

void pk_map_hint_sequential(void *addr, size_t len) {
#if defined(PK_OS_LINUX)
    /* weights are streamed: huge pages (fewer TLB misses) and read-ahead */
    madvise(addr, len, MADV_HUGEPAGE);
    madvise(addr, len, MADV_WILLNEED);
#else
    (void)addr, (void)len;
#endif
}

/* ---- AArch64 features ------------------------------------------------------------ */

#if defined(PK_OS_APPLE)
static int apple_flag(const char *name) {
    int v = 0;
    size_t n = sizeof v;
    return sysctlbyname(name, &v, &n, NULL, 0) == 0 && v != 0;
}
#endif

unsigned pk_arm_features(void) {
    unsigned f = 0;
#if defined(__aarch64__) && defined(PK_OS_LINUX)
    /* bit numbers from the kernel's uapi asm/hwcap.h (stable ABI) */
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    if ((hw >> 9 & 1) && (hw >> 10 & 1)) f |= PK_ARM_FP16;   /* FPHP, ASIMDHP */
    if (hw >> 20 & 1) f |= PK_ARM_DOTPROD;                   /* ASIMDDP */
    if (hw >> 22 & 1) f |= PK_ARM_SVE;                       /* SVE */
    if (hw2 >> 13 & 1) f |= PK_ARM_I8MM;                     /* HWCAP2_I8MM */
    if (hw2 >> 14 & 1) f |= PK_ARM_BF16;                     /* HWCAP2_BF16 */
#elif defined(__aarch64__) && defined(PK_OS_APPLE)
    if (apple_flag("hw.optional.arm.FEAT_FP16")) f |= PK_ARM_FP16;
    if (apple_flag("hw.optional.arm.FEAT_DotProd")) f |= PK_ARM_DOTPROD;
    if (apple_flag("hw.optional.arm.FEAT_I8MM")) f |= PK_ARM_I8MM;
    if (apple_flag("hw.optional.arm.FEAT_BF16")) f |= PK_ARM_BF16;
#endif
    return f;
}

/* ---- CPU name ----------------------------------------------------------------------- */

static void clean_name(char *buf) {
    for (char *p = buf; *p; p++)  /* names go into tab-separated files */
        if (*p == '\t' || (unsigned char)*p < 32) *p = ' ';
}

#if !defined(PK_OS_APPLE)
/* The value of the first line of /proc/cpuinfo whose key is key, into
 * out[cap]; 0 if there is none (or no /proc/cpuinfo: not Linux). */
static int cpuinfo_value(const char *key, char *out, size_t cap) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    size_t kn = strlen(key);
    while (!found && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (!colon || strncmp(line, key, kn)) continue;
        /* the key must be followed only by blanks before the colon */
        const char *k = line + kn;
        while (k < colon && (*k == ' ' || *k == '\t')) k++;
        if (k != colon) continue;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        size_t n = strcspn(v, "\r\n");
        if (!n) continue;
        snprintf(out, cap, "%.*s", (int)n, v);
        found = 1;
    }
    fclose(f);
    return found;
}
#endif

#if !defined(PK_OS_APPLE) && defined(__aarch64__)
/* Names of the commonest AArch64 cores by MIDR implementer and part. */
static const char *arm_core_name(unsigned impl, unsigned part) {
    static const struct { unsigned impl, part; const char *name; } cores[] = {
        {0x41, 0xd03, "ARM Cortex-A53"}, {0x41, 0xd04, "ARM Cortex-A35"},
        {0x41, 0xd05, "ARM Cortex-A55"}, {0x41, 0xd07, "ARM Cortex-A57"},
        {0x41, 0xd08, "ARM Cortex-A72"}, {0x41, 0xd09, "ARM Cortex-A73"},
        {0x41, 0xd0a, "ARM Cortex-A75"}, {0x41, 0xd0b, "ARM Cortex-A76"},
        {0x41, 0xd0c, "ARM Neoverse-N1"}, {0x41, 0xd0d, "ARM Cortex-A77"},
        {0x41, 0xd40, "ARM Neoverse-V1"}, {0x41, 0xd41, "ARM Cortex-A78"},
        {0x41, 0xd44, "ARM Cortex-X1"}, {0x41, 0xd46, "ARM Cortex-A510"},
        {0x41, 0xd47, "ARM Cortex-A710"}, {0x41, 0xd48, "ARM Cortex-X2"},
        {0x41, 0xd49, "ARM Neoverse-N2"}, {0x41, 0xd4d, "ARM Cortex-A715"},
        {0x41, 0xd4e, "ARM Cortex-X3"}, {0x41, 0xd4f, "ARM Neoverse-V2"},
        {0x41, 0xd80, "ARM Cortex-A520"}, {0x41, 0xd81, "ARM Cortex-A720"},
        {0x41, 0xd82, "ARM Cortex-X4"}, {0x46, 0x001, "Fujitsu A64FX"},
        {0xc0, 0xac3, "Ampere-1"}, {0xc0, 0xac4, "Ampere-1a"},
    };
    for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
        if (cores[i].impl == impl && cores[i].part == part) return cores[i].name;
    return NULL;
}

static void arm_midr_name(char *buf, size_t cap, unsigned impl, unsigned part) {
    const char *n = arm_core_name(impl, part);
    if (n) snprintf(buf, cap, "%s (implementer 0x%02x part 0x%03x)", n, impl, part);
    else snprintf(buf, cap, "aarch64 (implementer 0x%02x part 0x%03x)", impl, part);
}
#endif

void pk_cpu_name(char *buf, size_t cap) {
    if (!cap) return;
    snprintf(buf, cap, "unknown");
#if defined(PK_OS_APPLE)
    size_t n = cap;
    if (sysctlbyname("machdep.cpu.brand_string", buf, &n, NULL, 0) != 0 || !n || !buf[0])
        snprintf(buf, cap, "unknown");
    buf[cap - 1] = 0;
#elif defined(__aarch64__)
    /* AArch64 Linux has no "model name": a board ("Model", e.g. a Raspberry
       Pi), a SoC ("Hardware"), the core's MIDR fields from /proc/cpuinfo or,
       where the kernel lets user space read ID registers (HWCAP_CPUID; also
       qemu-user, whose /proc/cpuinfo is the host's), MIDR_EL1 itself;
       "model name"/"Processor" last */
    char impl[64], part[64];
    if (cpuinfo_value("Model", buf, cap) || cpuinfo_value("Hardware", buf, cap)) {
    } else if (cpuinfo_value("CPU implementer", impl, sizeof impl) &&
               cpuinfo_value("CPU part", part, sizeof part)) {
        arm_midr_name(buf, cap, (unsigned)strtoul(impl, NULL, 0), (unsigned)strtoul(part, NULL, 0));
#if defined(PK_OS_LINUX)
    } else if (getauxval(AT_HWCAP) >> 11 & 1) { /* HWCAP_CPUID */
        uint64_t midr;
        __asm__ __volatile__("mrs %0, MIDR_EL1" : "=r"(midr));
        arm_midr_name(buf, cap, (unsigned)(midr >> 24 & 0xff), (unsigned)(midr >> 4 & 0xfff));
#endif
    } else if (!cpuinfo_value("model name", buf, cap) && !cpuinfo_value("Processor", buf, cap)) {
        snprintf(buf, cap, "aarch64");
    }
#else
    if (!cpuinfo_value("model name", buf, cap) && !cpuinfo_value("Processor", buf, cap))
        cpuinfo_value("cpu model", buf, cap);
#endif
    clean_name(buf);
}

/* ---- memory available ----------------------------------------------------------- */

#if defined(__linux__)
/* the first number in a file (a cgroup v2 value), or -1 ("max", absent) */
static long long file_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v;
}
#endif

uint64_t pk_mem_available(void) {
#if defined(__linux__)
    uint64_t avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char line[256];
        unsigned long long kb;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
                avail = (uint64_t)kb << 10;
                break;
            }
        fclose(f);
    }
    /* a cgroup v2 limit below that (containers, systemd slices) */
    long long lim = file_number("/sys/fs/cgroup/memory.max"), cur = file_number("/sys/fs/cgroup/memory.current");
    if (lim > 0 && cur >= 0) {
        uint64_t left = lim > cur ? (uint64_t)(lim - cur) : 0;
        if (!avail || left < avail) avail = left;
    }
    return avail;
#else
    return 0;
#endif
}
