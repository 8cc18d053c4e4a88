/* bench_kernels.c - micro-benchmark of the gemv kernels: GB/s of weights
 * streamed by one core, per weight type and ISA variant, over a matrix much
 * larger than the caches (64 MB), i.e. the single-token decode regime.
 * Not a test. Build and run (after `make`):
 *
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -pthread \
 *       bench/bench_kernels.c build/libpocket.a -o build/bench_kernels -lm -lpthread
 *   ./build/bench_kernels [MB [TYPE]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)rs; }

/* Weights from random floats in [-1, 1] through the reference quantizer. */
static void fill_type(int type, void *dst, int64_t nelem) {
    const pk_type_traits *tt = pk_type_get(type);
    enum { CH = 1 << 16 };
    float *buf = malloc(CH * sizeof(float));
    size_t rb = pk_row_size(type, CH);
    for (int64_t i = 0; i < nelem; i += CH) {
        for (int j = 0; j < CH; j++) buf[j] = (float)rnd() / 2147483648.0f - 1.0f;
        tt->from_float(buf, (char *)dst + (size_t)(i / CH) * rb, CH);
    }
    free(buf);
}

int main(int argc, char **argv) {
    size_t mb = argc > 1 ? (size_t)atoi(argv[1]) : 64;
    const char *only = argc > 2 ? argv[2] : NULL;   /* one type name, e.g. Q4_K */
    const int64_t n = 4096;                    /* row length (a typical hidden size) */
    static const int types[] = { PK_TYPE_F32, PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_Q8_0,
                                 PK_TYPE_Q4_0, PK_TYPE_Q2_K, PK_TYPE_Q3_K, PK_TYPE_Q4_K,
                                 PK_TYPE_Q5_K, PK_TYPE_Q6_K, PK_TYPE_IQ4_XS };
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);
    printf("%-8s %-6s %10s %10s\n", "isa", "type", "GB/s", "ms/pass");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int t = types[ti];
        if (only && strcmp(only, pk_type_name(t))) continue;
        size_t rb = pk_row_size(t, n);
        int64_t nrows = (int64_t)(mb << 20) / (int64_t)rb;
        nrows &= ~(int64_t)63;
        void *w = malloc(rb * (size_t)nrows);
        fill_type(t, w, n * nrows);
        int xt = pk_type_get(t)->vec_dot_type;
        float *xf = malloc(n * sizeof(float));
        for (int64_t i = 0; i < n; i++) xf[i] = (float)rnd() / 2147483648.0f - 1.0f;
        void *x = malloc(pk_row_size(xt, n));
        float *y = malloc((size_t)nrows * sizeof(float));
        for (int k = 0; k < nl; k++) {
            list[k]->quantize[xt](xf, x, n);
            list[k]->gemv[t](n, nrows, y, w, rb, x);          /* warm up */
            int reps = strcmp(list[k]->isa, "ref") == 0 ? 2 : 8;
            double t0 = now();
            for (int r = 0; r < reps; r++) list[k]->gemv[t](n, nrows, y, w, rb, x);
            double dt = (now() - t0) / reps;
            printf("%-8s %-6s %10.2f %10.2f\n", list[k]->isa, pk_type_name(t),
                   (double)rb * (double)nrows / dt / 1e9, dt * 1e3);
        }
        free(w); free(x); free(xf); free(y);
    }
    return 0;
}
