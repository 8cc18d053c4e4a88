/* kernels.c - run-time choice of the kernel table.
 *
 * Tuned for: being called on every matmul - pk_kernels_get() is one
 * pthread_once check and a pointer load after the first call. The choice is
 * made once: the best ISA table the CPU supports, or the one named by the
 * POCKET_KERNELS environment variable ("ref", "avx2", "avx512", "amx") if the
 * CPU supports it (otherwise the best supported one). "amx" is the AVX-512
 * table with AMX-INT8 multi-token kernels for prompt processing; it needs
 * the CPU's AMX-TILE and AMX-INT8 and Linux's permission for the tile state. Every table handed out is a
 * merged copy in which the ISA's NULL entries are filled from the reference
 * table, so callers never see NULL for a type the reference supports.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

enum { V_REF, V_AVX2, V_AVX512, V_AMX, V_COUNT };
static const char *const names[V_COUNT] = {"ref", "avx2", "avx512", "amx"};

static const pk_kernels *const raw_tables[V_COUNT] = {
    &pk_kernels_ref_table, &pk_kernels_avx2_table, &pk_kernels_avx512_table, &pk_kernels_avx512_table,
};

static pk_kernels merged[V_COUNT];
static int usable[V_COUNT];
static const pk_kernels *selected;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
/* F16C by CPUID leaf 1 (clang's __builtin_cpu_supports lacks "f16c"). Only
 * consulted after AVX2 is known usable, so the OS saves the ymm state. */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#endif

/* Does the CPU (and OS, for the register state) support variant v? */
static int cpu_has(int v) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               has_f16c();
    if (v == V_AVX2) return avx2;
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                 __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni") &&
                 __builtin_cpu_supports("avx512bf16");
    if (v == V_AVX512) return avx512;
    if (v == V_AMX) {
        /* CPUID.(7,0):EDX bit 24 AMX-TILE, bit 25 AMX-INT8 */
        unsigned a, b, c, d;
        return avx512 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 3) == 3 &&
               pk_gemm_amx[PK_TYPE_Q4_K] != NULL && pk_amx_enable();
    }
#endif
    return v == V_REF;
}

static void merge(pk_kernels *out, const pk_kernels *isa, const pk_kernels *ref) {
    *out = *isa;
    for (int t = 0; t < PK_TYPE_COUNT; t++) {
        if (!out->vec_dot[t]) out->vec_dot[t] = ref->vec_dot[t];
        if (!out->gemv[t]) out->gemv[t] = ref->gemv[t];
        if (!out->quantize[t]) out->quantize[t] = ref->quantize[t];
    }
    if (!out->sgemm) out->sgemm = ref->sgemm;
    if (!out->exp_sub) out->exp_sub = ref->exp_sub;
    if (!out->silu_mul) out->silu_mul = ref->silu_mul;
}

static void init(void) {
    for (int v = 0; v < V_COUNT; v++) {
        /* an ISA file built without its flags has an empty table */
        int compiled = raw_tables[v]->vec_dot[PK_TYPE_F32] != NULL;
        usable[v] = compiled && cpu_has(v);
        merge(&merged[v], raw_tables[v], &pk_kernels_ref_table);
    }
    for (int t = 0; t < PK_TYPE_COUNT; t++)
        if (pk_gemm_avx512[t]) merged[V_AVX512].gemm[t] = merged[V_AMX].gemm[t] = pk_gemm_avx512[t];
    for (int t = 0; t < PK_TYPE_COUNT; t++)
        if (pk_gemm_amx[t]) merged[V_AMX].gemm[t] = pk_gemm_amx[t];
    merged[V_AMX].isa = names[V_AMX];
    int best = V_REF;
    for (int v = 0; v < V_COUNT; v++)
        if (usable[v]) best = v;
    const char *want = getenv("POCKET_KERNELS");
    if (want)
        for (int v = 0; v < V_COUNT; v++)
            if (usable[v] && strcmp(want, names[v]) == 0) best = v;
    selected = &merged[best];
}

/* The kernel table for this process: chosen on first call, then fixed.
 * Thread-safe; never NULL. */
const pk_kernels *pk_kernels_get(void) {
    pthread_once(&init_once, init);
    return selected;
}

/* The merged table of variant `isa` ("ref", "avx2", "avx512", "amx"), or NULL if it
 * is unknown, not compiled in, or unsupported by this CPU. */
const pk_kernels *pk_kernels_by_name(const char *isa) {
    pthread_once(&init_once, init);
    if (!isa) return NULL;
    for (int v = 0; v < V_COUNT; v++)
        if (usable[v] && strcmp(isa, names[v]) == 0) return &merged[v];
    return NULL;
}

/* Store up to max usable variants (merged tables) in out, ref first, best
 * last; returns how many were stored. */
int pk_kernels_list(const pk_kernels **out, int max) {
    pthread_once(&init_once, init);
    int k = 0;
    for (int v = 0; v < V_COUNT && k < max; v++)
        if (usable[v]) out[k++] = &merged[v];
    return k;
}
