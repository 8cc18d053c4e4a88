/* kernels/kernels.c - the declared list of kernel variants and the run-time choice.
 *
 * Every variant is one row of `variants` below: its name, the CPU check that
 * says whether this machine (and OS) can run it, its parent, and its parts:
 * the partial tables of ISA files (kernels/kernels.h), merged in order,
 * after which the parent's merged table fills the slots still NULL. A
 * variant is usable when every part was built (has an entry), its parent
 * is usable and the CPU check passes.
 * POCKET_KERNELS, `pocket --help`, `bench --ab` and the tests all read this
 * one list (pk_kernels_list / pk_kernel_variant_name), so a variant that is
 * not listed cannot be selected and one that is listed is tested.
 *
 * Tuned for: being called on every matmul - pk_kernels_get() is one
 * pthread_once check and a pointer load after the first call. The choice is
 * made once: the last usable variant of the list (the list is ordered from
 * plain to best within each CPU family), or the one POCKET_KERNELS names if
 * it is usable here (pk_kernel_env_status() says when it is not). Every
 * table handed out is merged: NULL entries are filled from the parent chain
 * down to the reference, so callers never see NULL for a type the
 * reference supports.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kernels.h"
#include "pocket.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif
#if defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#endif

/* ---- CPU checks ------------------------------------------------------------ */

static int cpu_ref(void) { return 1; }

#if defined(__x86_64__) || defined(__i386__)
/* F16C by CPUID leaf 1 (clang's __builtin_cpu_supports lacks "f16c"). Only
 * consulted after AVX2 is known usable, so the OS saves the ymm state. */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
static int cpu_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
}
/* AVX-VNNI (VEX vpdpbusd): CPUID.(7,1):EAX bit 4 */
static int cpu_avxvnni(void) {
    unsigned a, b, c, d;
    return cpu_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
}
static int cpu_avx512(void) {
    return cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}
static int cpu_amx(void) {
    /* CPUID.(7,0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8; then Linux's permission
       (asked only once the amx part is known to be built: init checks first) */
    unsigned a, b, c, d;
    return cpu_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 3) == 3 && pk_amx_enable();
}
#else
static int cpu_avx2(void) { return 0; }
static int cpu_avxvnni(void) { return 0; }
static int cpu_avx512(void) { return 0; }
static int cpu_amx(void) { return 0; }
#endif

#if defined(__aarch64__)
#if defined(__linux__)
/* HWCAP bits (asm/hwcap.h), spelled out so older headers still compile */
#define PK_HWCAP_FPHP (1ul << 9)
#define PK_HWCAP_ASIMDHP (1ul << 10)
#define PK_HWCAP_ASIMDDP (1ul << 20)
#define PK_HWCAP2_I8MM (1ul << 13)
static int cpu_dotprod(void) {
    unsigned long h = getauxval(AT_HWCAP);
    return (h & PK_HWCAP_ASIMDDP) && (h & PK_HWCAP_FPHP) && (h & PK_HWCAP_ASIMDHP);
}
static int cpu_i8mm(void) { return cpu_dotprod() && (getauxval(AT_HWCAP2) & PK_HWCAP2_I8MM); }
#elif defined(__APPLE__)
static int sysctl_flag(const char *name) {
    int v = 0;
    size_t len = sizeof v;
    return sysctlbyname(name, &v, &len, NULL, 0) == 0 && v != 0;
}
static int cpu_dotprod(void) {
    return sysctl_flag("hw.optional.arm.FEAT_DotProd") && sysctl_flag("hw.optional.arm.FEAT_FP16");
}
static int cpu_i8mm(void) { return cpu_dotprod() && sysctl_flag("hw.optional.arm.FEAT_I8MM"); }
#else
static int cpu_dotprod(void) { return 0; }
static int cpu_i8mm(void) { return 0; }
#endif
static int cpu_neon(void) { return 1; }  /* Advanced SIMD is part of ARMv8-A */
#else
static int cpu_neon(void) { return 0; }
static int cpu_dotprod(void) { return 0; }
static int cpu_i8mm(void) { return 0; }
#endif

/* ---- the declared list ------------------------------------------------------ */

/* Each row: name, CPU check, parent, parts (kernels/kernels.h). Parents come
 * before their children; within a CPU family the list goes from plain to
 * best. */
#define PARTS(...) ((const pk_kernels *const[]){__VA_ARGS__, NULL})
enum { V_REF, V_AVX2, V_AVXVNNI, V_AVX512, V_AMX, V_NEON, V_DOTPROD, V_I8MM, V_COUNT };
static const pk_kernel_variant variants[V_COUNT] = {
    [V_REF] = {.name = "ref", .cpu = cpu_ref, .parent = -1, .parts = PARTS(&pk_kernels_ref_table)},
    [V_AVX2] = {.name = "avx2", .cpu = cpu_avx2, .parent = V_REF,
                .parts = PARTS(&pk_kernels_avx2_table, &pk_kernels_avx2_gemm, &pk_kernels_avx2_att,
                               &pk_kernels_avx2_deltanet)},
    [V_AVXVNNI] = {.name = "avxvnni", .cpu = cpu_avxvnni, .parent = V_AVX2, .parts = PARTS(&pk_kernels_avxvnni_gemm)},
    [V_AVX512] = {.name = "avx512", .cpu = cpu_avx512, .parent = V_AVX2,
                  .parts = PARTS(&pk_kernels_avx512_table, &pk_kernels_avx512_gemm, &pk_kernels_avx512_att)},
    [V_AMX] = {.name = "amx", .cpu = cpu_amx, .parent = V_AVX512, .parts = PARTS(&pk_kernels_amx_gemm)},
    [V_NEON] = {.name = "neon", .cpu = cpu_neon, .parent = V_REF,
                .parts = PARTS(&pk_kernels_neon_table, &pk_kernels_neon_att)},
    [V_DOTPROD] = {.name = "dotprod", .cpu = cpu_dotprod, .parent = V_NEON, .parts = PARTS(&pk_kernels_dotprod_table)},
    [V_I8MM] = {.name = "i8mm", .cpu = cpu_i8mm, .parent = V_DOTPROD, .parts = PARTS(&pk_kernels_i8mm_gemm)},
};

#define SLOT_SIZE(f) +sizeof(((pk_kernels *)0)->f)
_Static_assert(sizeof(pk_kernels) == sizeof(const char *) PK_KERNEL_SLOTS(SLOT_SIZE, SLOT_SIZE),
               "PK_KERNEL_SLOTS (kernels/kernels.h) must name every slot of pk_kernels");

static pk_kernels merged[V_COUNT];
static int usable[V_COUNT];
static const pk_kernels *selected;
static int env_status;             /* 0 ok / unset, 1 unknown name, 2 not usable here */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Slots of out left NULL are taken from p. */
static void fill(pk_kernels *out, const pk_kernels *p) {
#define FILL_ONE(f) \
    if (!out->f) out->f = p->f;
#define FILL_TYPED(f)                             \
    for (int t = 0; t < PK_TYPE_COUNT; t++)       \
        if (!out->f[t]) out->f[t] = p->f[t];
    PK_KERNEL_SLOTS(FILL_ONE, FILL_TYPED)
#undef FILL_ONE
#undef FILL_TYPED
}

/* Whether p has any entry: a file built without its ISA's flags has none. */
static int built(const pk_kernels *p) {
    int n = 0;
#define COUNT_ONE(f) n += p->f != NULL;
#define COUNT_TYPED(f) \
    for (int t = 0; t < PK_TYPE_COUNT; t++) n += p->f[t] != NULL;
    PK_KERNEL_SLOTS(COUNT_ONE, COUNT_TYPED)
#undef COUNT_ONE
#undef COUNT_TYPED
    return n > 0;
}

static void init(void) {
    /* parents come before children in the list, so one pass merges */
    for (int v = 0; v < V_COUNT; v++) {
        const pk_kernel_variant *d = &variants[v];
        pk_kernels *m = &merged[v];
        int compiled = 1;
        for (const pk_kernels *const *p = d->parts; *p; p++) {
            fill(m, *p);
            compiled &= built(*p);
        }
        if (d->parent >= 0) fill(m, &merged[d->parent]);
        m->isa = d->name;
        usable[v] = compiled && (d->parent < 0 || usable[d->parent]) && d->cpu();
    }
    int best = V_REF;
    for (int v = 0; v < V_COUNT; v++)
        if (usable[v]) best = v;
    const char *want = getenv("POCKET_KERNELS");
    if (want && *want) {
        env_status = 1;
        for (int v = 0; v < V_COUNT; v++)
            if (strcmp(want, variants[v].name) == 0) {
                env_status = usable[v] ? 0 : 2;
                if (usable[v]) best = v;
            }
    }
    selected = &merged[best];
}

/* The kernel table for this process: chosen on first call, then fixed.
 * Thread-safe; never NULL. */
const pk_kernels *pk_kernels_get(void) {
    pthread_once(&init_once, init);
    return selected;
}

/* The merged table of the variant named isa, or NULL if it is unknown, not
 * compiled in, or unsupported by this CPU. */
const pk_kernels *pk_kernels_by_name(const char *isa) {
    pthread_once(&init_once, init);
    if (!isa) return NULL;
    for (int v = 0; v < V_COUNT; v++)
        if (usable[v] && strcmp(isa, variants[v].name) == 0) return &merged[v];
    return NULL;
}

/* Store up to max usable variants (merged tables) in out, in list order
 * (ref first); returns how many were stored. */
int pk_kernels_list(const pk_kernels **out, int max) {
    pthread_once(&init_once, init);
    int k = 0;
    for (int v = 0; v < V_COUNT && k < max; v++)
        if (usable[v]) out[k++] = &merged[v];
    return k;
}

const pk_kernel_variant *pk_kernel_variant_get(int i) { return i >= 0 && i < V_COUNT ? &variants[i] : NULL; }

const pk_kernels *pk_kernel_variant_merged(int i) {
    pthread_once(&init_once, init);
    return i >= 0 && i < V_COUNT ? &merged[i] : NULL;
}

/* The i-th declared variant's name (whether or not this CPU can run it), or
 * NULL past the end of the list. */
const char *pk_kernel_variant_name(int i) {
    return i >= 0 && i < V_COUNT ? variants[i].name : NULL;
}

/* 1 if the variant named isa is compiled in and this CPU can run it. */
int pk_kernel_variant_usable(const char *isa) { return pk_kernels_by_name(isa) != NULL; }

/* 0 when POCKET_KERNELS is unset or names a usable variant; 1 when it names
 * no declared variant; 2 when the variant is declared but not usable here
 * (the best usable one was selected instead). */
int pk_kernel_env_status(void) {
    pthread_once(&init_once, init);
    return env_status;
}
