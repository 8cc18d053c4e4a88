/* kernels/kernels.c - the declared list of kernel variants and the run-time choice.
 *
 * Every variant is one row of `variants` below: its name, its own table of
 * entries (an ISA file's pk_kernels), optional multi-token (gemm) entries
 * merged over it, the parent whose entries fill the ones it leaves NULL,
 * and the CPU check that says whether this machine (and OS) can run it.
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
/* AVX-VNNI (VEX vpdpbusd): CPUID.(7,1):EAX bit 4; the variant also needs
 * its gemm file built with -mavxvnni (a compiler without it leaves the
 * table empty). */
static int cpu_avxvnni(void) {
    unsigned a, b, c, d;
    return cpu_avx2() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1) &&
           pk_gemm_avxvnni[PK_TYPE_Q4_0] != NULL;
}
static int cpu_avx512(void) {
    return cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}
static int cpu_amx(void) {
    /* CPUID.(7,0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8; then Linux's permission */
    unsigned a, b, c, d;
    return cpu_avx512() && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 3) == 3 &&
           pk_gemm_amx[PK_TYPE_Q4_K] != NULL && pk_amx_enable();
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

typedef struct variant {
    const char *name;
    const pk_kernels *table;   /* the ISA file's own entries */
    const pk_gemm_fn *gemm;    /* multi-token entries merged over the table, or NULL */
    int parent;                /* index of the variant that fills NULL entries; -1: none */
    int (*cpu)(void);          /* can this CPU and OS run it */
} variant;

enum { V_REF, V_AVX2, V_AVXVNNI, V_AVX512, V_AMX, V_NEON, V_DOTPROD, V_I8MM, V_COUNT };
static const variant variants[V_COUNT] = {
    [V_REF] = {"ref", &pk_kernels_ref_table, NULL, -1, cpu_ref},
    [V_AVX2] = {"avx2", &pk_kernels_avx2_table, pk_gemm_avx2, V_REF, cpu_avx2},
    [V_AVXVNNI] = {"avxvnni", &pk_kernels_avx2_table, pk_gemm_avxvnni, V_AVX2, cpu_avxvnni},
    [V_AVX512] = {"avx512", &pk_kernels_avx512_table, pk_gemm_avx512, V_AVX2, cpu_avx512},
    [V_AMX] = {"amx", &pk_kernels_avx512_table, pk_gemm_amx, V_AVX512, cpu_amx},
    [V_NEON] = {"neon", &pk_kernels_neon_table, NULL, V_REF, cpu_neon},
    [V_DOTPROD] = {"dotprod", &pk_kernels_dotprod_table, NULL, V_NEON, cpu_dotprod},
    [V_I8MM] = {"i8mm", &pk_kernels_dotprod_table, pk_gemm_i8mm, V_DOTPROD, cpu_i8mm},
};

static pk_kernels merged[V_COUNT];
static int usable[V_COUNT];
static const pk_kernels *selected;
static int env_status;             /* 0 ok / unset, 1 unknown name, 2 not usable here */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Entries of out left NULL are taken from p. */
static void fill(pk_kernels *out, const pk_kernels *p) {
    for (int t = 0; t < PK_TYPE_COUNT; t++) {
        if (!out->vec_dot[t]) out->vec_dot[t] = p->vec_dot[t];
        if (!out->gemv[t]) out->gemv[t] = p->gemv[t];
        if (!out->quantize[t]) out->quantize[t] = p->quantize[t];
        if (!out->gemm[t]) out->gemm[t] = p->gemm[t];
        if (!out->att_kq[t]) out->att_kq[t] = p->att_kq[t];
        if (!out->att_pv[t]) out->att_pv[t] = p->att_pv[t];
    }
    if (!out->sgemm) out->sgemm = p->sgemm;
    if (!out->exp_sub) out->exp_sub = p->exp_sub;
    if (!out->silu_mul) out->silu_mul = p->silu_mul;
    if (!out->gelu_mul) out->gelu_mul = p->gelu_mul;
    if (!out->softcap) out->softcap = p->softcap;
    if (!out->delta_step) out->delta_step = p->delta_step;
}

static void init(void) {
    /* parents come before children in the list, so one pass merges */
    for (int v = 0; v < V_COUNT; v++) {
        const variant *d = &variants[v];
        pk_kernels *m = &merged[v];
        *m = *d->table;
        m->isa = d->name;
        if (d->gemm)
            for (int t = 0; t < PK_TYPE_COUNT; t++)
                if (d->gemm[t]) m->gemm[t] = d->gemm[t];
        if (v == V_AVX2 && !m->delta_step) m->delta_step = pk_delta_step_avx2;
        if (v == V_AVX2 || v == V_NEON)   /* attention over typed KV caches */
            for (int t = 0; t < PK_TYPE_COUNT; t++) {
                if (!m->att_kq[t]) m->att_kq[t] = v == V_AVX2 ? pk_att_kq_avx2[t] : pk_att_kq_neon[t];
                if (!m->att_pv[t]) m->att_pv[t] = v == V_AVX2 ? pk_att_pv_avx2[t] : pk_att_pv_neon[t];
            }
        if (d->parent >= 0) fill(m, &merged[d->parent]);
        /* an ISA file built without its flags has an empty table */
        int compiled = d->table->vec_dot[PK_TYPE_F32] != NULL;
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
