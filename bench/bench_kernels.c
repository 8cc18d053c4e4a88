/* bench_kernels.c - micro-benchmark of the gemv kernels: GB/s of weights
 * streamed by one core, per weight type and ISA variant, over a matrix much
 * larger than the caches (default 64 MB; use more than the L3), i.e. the
 * single-token decode regime. Each (type, variant) is timed in D draws of
 * one full pass each, after one warm-up pass; every draw is printed, with
 * the best (times are the thread's CPU time, see now()). The first line is the core's plain read bandwidth over the same
 * size (a streaming 64-bit sum, 4 rows of 16 KB side by side as the F32 gemv
 * reads them; with AVX2 where the compiler has it), the
 * reference the gemv figures are a fraction of. Not a test. Build and run
 * (after `make`):
 *
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -pthread \
 *       bench/bench_kernels.c build/libpocket.a -o build/bench_kernels -lm -lpthread
 *   ./build/bench_kernels [MB [TYPE[,TYPE...] [ISA[,ISA...] [DRAWS [COLS]]]]]
 *
 * e.g. `./build/bench_kernels 512 Q4_K,Q8_0 ref,avx2 3`; "all" or "-" for
 * every type / every usable variant; COLS, the row length, defaults to 4096
 * (an expert's down projection has 512 or 768: short rows).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/kernels.h"
#include "bench_util.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* now(): CPU time of this thread, not wall time: on a shared machine (VMs,
 * other jobs on the core) the time the thread is descheduled is not the
 * kernel's; BENCH_WALL=1 uses the wall clock instead. */
static uint32_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)rs; }

/* Weights from random floats in [-1, 1] through the reference quantizer
 * (types without one, IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M: random bytes in 0x20 ..
 * 0x3F, whose fp16 scales - IQ1_M's in its scales' top nibbles - are normal
 * numbers of magnitude 2^-7 .. 2):
 * the first 8 MB of rows quantized, then copied over the rest (quantizing
 * hundreds of MB with the reference takes minutes; the bandwidth does not
 * depend on the values repeating). */
static void fill_type(int type, void *dst, int64_t nelem) {
    const pk_type_traits *tt = pk_type_get(type);
    enum { CH = 1 << 16 };
    if (!tt->from_float) {
        size_t total = pk_row_size(type, nelem);
        for (size_t i = 0; i < total; i++) ((uint8_t *)dst)[i] = (uint8_t)(0x20 + rnd() % 32);
        return;
    }
    float *buf = malloc(CH * sizeof(float));
    size_t total = pk_row_size(type, nelem), done = 0;
    for (int64_t i = 0; i < nelem && done < (8u << 20); i += CH) {
        /* the last piece may be short (nelem is whole rows, not whole CH) */
        int64_t m = nelem - i < CH ? nelem - i : CH;
        for (int64_t j = 0; j < m; j++) buf[j] = (float)rnd() / 2147483648.0f - 1.0f;
        tt->from_float(buf, (char *)dst + done, m);
        done += pk_row_size(type, m);
    }
    for (; done < total; done += done < total - done ? done : total - done)
        memcpy((char *)dst + done, dst, done < total - done ? done : total - done);
    free(buf);
}

/* the plain read bandwidth: sum of all 64-bit words, read as a gemv reads a
 * matrix of 16 KB rows: 4 rows side by side (4 streams), 4 x 256 bits each */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("avx2")))
static uint64_t stream_sum(const void *p, size_t bytes) {
    enum { RB = 16384 / 32 };                  /* a row, in 256-bit words */
    const __m256i *v = p;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t g = 0; g + 4 * RB <= bytes / 32; g += 4 * RB)
        for (size_t i = 0; i < RB; i += 2) {
            a0 = _mm256_add_epi64(a0, _mm256_add_epi64(_mm256_load_si256(v + g + i),
                                                       _mm256_load_si256(v + g + i + 1)));
            a1 = _mm256_add_epi64(a1, _mm256_add_epi64(_mm256_load_si256(v + g + RB + i),
                                                       _mm256_load_si256(v + g + RB + i + 1)));
            a2 = _mm256_add_epi64(a2, _mm256_add_epi64(_mm256_load_si256(v + g + 2 * RB + i),
                                                       _mm256_load_si256(v + g + 2 * RB + i + 1)));
            a3 = _mm256_add_epi64(a3, _mm256_add_epi64(_mm256_load_si256(v + g + 3 * RB + i),
                                                       _mm256_load_si256(v + g + 3 * RB + i + 1)));
        }
    uint64_t o[4];
    _mm256_storeu_si256((__m256i *)o, _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
    return o[0] + o[1] + o[2] + o[3];
}
#else
static uint64_t stream_sum(const void *p, size_t bytes) {
    const uint64_t *v = p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (size_t i = 0; i + 4 <= bytes / 8; i += 4) { a0 += v[i]; a1 += v[i + 1]; a2 += v[i + 2]; a3 += v[i + 3]; }
    return a0 + a1 + a2 + a3;
}
#endif

int main(int argc, char **argv) {
    size_t mb = argc > 1 ? (size_t)atoi(argv[1]) : 64;
    const char *only = argc > 2 ? argv[2] : NULL;   /* type names, e.g. Q4_K,Q8_0 */
    const char *isas = argc > 3 ? argv[3] : NULL;   /* variants, e.g. ref,avx2 */
    int draws = argc > 4 ? atoi(argv[4]) : 3;
    if (draws < 1) draws = 1;
    const int64_t n = argc > 5 ? atoll(argv[5]) : 4096;   /* row length (default: a typical hidden size) */
    static const int types[] = { PK_TYPE_F32, PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_Q8_0,
                                 PK_TYPE_Q4_0, PK_TYPE_Q4_1, PK_TYPE_Q5_0, PK_TYPE_Q5_1,
                                 PK_TYPE_IQ4_NL, PK_TYPE_MXFP4, PK_TYPE_Q2_K, PK_TYPE_Q3_K,
                                 PK_TYPE_Q4_K, PK_TYPE_Q5_K, PK_TYPE_Q6_K, PK_TYPE_IQ4_XS,
                                 PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS, PK_TYPE_IQ1_S, PK_TYPE_IQ1_M,
                                 PK_TYPE_IQ3_XXS, PK_TYPE_IQ3_S, PK_TYPE_IQ2_S };
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);

    {   /* plain read bandwidth of one core over the same size */
        size_t bytes = mb << 20;
        void *m = aligned_alloc(64, bytes);
        memset(m, 1, bytes);
        volatile uint64_t sink = stream_sum(m, bytes);
        printf("%-8s %-6s", "read", "-");
        double best = 0;
        for (int d = 0; d < draws; d++) {
            double t0 = now();
            sink += stream_sum(m, bytes);
            double gbs = (double)bytes / (now() - t0) / 1e9;
            if (gbs > best) best = gbs;
            printf(" %7.2f", gbs);
        }
        printf("   best %7.2f GB/s\n", best);
        (void)sink;
        free(m);
    }

    printf("%-8s %-6s %s (GB/s of weights per draw)   best   ms/pass\n", "isa", "type", "draws");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int t = types[ti];
        if (!listed(only, pk_type_name(t))) continue;
        size_t rb = pk_row_size(t, n);
        if (rb == 0 || n % pk_type_get(t)->blck) {
            printf("%-8s %-6s skipped: a row of %lld is not whole blocks of %d\n", "-", pk_type_name(t),
                   (long long)n, (int)pk_type_get(t)->blck);
            continue;
        }
        int64_t nrows = (int64_t)(mb << 20) / (int64_t)rb;
        nrows &= ~(int64_t)63;
        if (nrows < 64) nrows = 64;   /* at least one group of each kernel's rows */
        void *w = malloc(rb * (size_t)nrows);
        fill_type(t, w, n * nrows);
        int xt = pk_type_get(t)->vec_dot_type;
        float *xf = malloc(n * sizeof(float));
        for (int64_t i = 0; i < n; i++) xf[i] = (float)rnd() / 2147483648.0f - 1.0f;
        void *x = malloc(pk_row_size(xt, n));
        float *y = malloc((size_t)nrows * sizeof(float));
        for (int k = 0; k < nl; k++) {
            if (!listed(isas, list[k]->isa)) continue;
            list[k]->quantize[xt](xf, x, n);
            list[k]->gemv[t](n, nrows, y, w, rb, x);          /* warm up */
            double best = 1e30;
            printf("%-8s %-6s", list[k]->isa, pk_type_name(t));
            for (int d = 0; d < draws; d++) {
                double t0 = now();
                list[k]->gemv[t](n, nrows, y, w, rb, x);
                double dt = now() - t0;
                if (dt < best) best = dt;
                printf(" %7.2f", (double)rb * (double)nrows / dt / 1e9);
            }
            printf("   %7.2f %8.2f\n", (double)rb * (double)nrows / best / 1e9, best * 1e3);
            fflush(stdout);
        }
        free(w); free(x); free(xf); free(y);
    }
    return 0;
}
