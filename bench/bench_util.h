/* bench_util.h - what the kernel benchmarks (bench_kernels.c, bench_gemm.c,
 * bench_att.c, ab_gemm.c) share: the thread's CPU clock (BENCH_WALL=1: the
 * wall clock), a fixed pseudo-random stream, random weight rows quantized
 * to a type, tokens quantized to a kernel's activation type and the
 * command lines' lists of names. Header-only: each benchmark stays one
 * file. Not a test. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/kernels.h"

static inline double now(void) {
    static int wall = -1;
    if (wall < 0) wall = getenv("BENCH_WALL") && atoi(getenv("BENCH_WALL"));
    struct timespec ts;
    clock_gettime(wall ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rs = 88172645463325252ull;
static inline float frnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (float)(uint32_t)rs / 2147483648.0f - 1.0f;
}

/* nrows rows of n uniform values in [-1, 1) quantized to tt's type, rb
 * bytes apart (malloc'd); types without a quantizer of their own (IQ2_XXS,
 * IQ2_XS, IQ1_S, IQ1_M: an importance matrix needed) get random bytes in
 * 0x20 .. 0x3F, whose fp16 scales are normal numbers of magnitude 2^-7 .. 2
 * (as bench_kernels.c) */
static inline char *rand_rows(const pk_type_traits *tt, int64_t n, int64_t nrows, size_t rb) {
    char *w = malloc(rb * (size_t)nrows);
    if (!tt->from_float) {
        for (size_t i = 0; i < rb * (size_t)nrows; i++) w[i] = (char)(0x20 + (int)((frnd() + 1.0f) * 16.0f) % 32);
        return w;
    }
    float *wf = malloc((size_t)n * sizeof(float));
    for (int64_t r = 0; r < nrows; r++) {
        for (int64_t i = 0; i < n; i++) wf[i] = frnd();
        tt->from_float(wf, w + (size_t)r * rb, n);
    }
    free(wf);
    return w;
}

/* ntok rows of n floats (xf) quantized by K to type xt into x, xp[j] the
 * j-th (x holds ntok rows of pk_row_size(xt, n) bytes) */
static inline void quant_tokens(const pk_kernels *K, int xt, const float *xf, int64_t n, int64_t ntok,
                                char *x, const void **xp) {
    size_t xb = pk_row_size(xt, n);
    for (int64_t j = 0; j < ntok; j++) {
        K->quantize[xt](xf + j * n, x + (size_t)j * xb, n);
        xp[j] = x + (size_t)j * xb;
    }
}

/* 1 if name is an item of the comma-separated list (NULL, "all" or "-":
 * every name) */
static inline int listed(const char *list, const char *name) {
    if (!list || !strcmp(list, "all") || !strcmp(list, "-")) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}
