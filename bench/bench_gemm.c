/* bench_gemm.c - micro-benchmark of the multi-token (gemm) kernels: GFLOP/s
 * of one core, per weight type and kernel variant, on one matrix the size of
 * an expert's projection, for a batch of tokens - the prompt-processing
 * regime (compute-bound: the matrix stays in the caches across draws).
 * A variant with no gemm entry for the type is timed through its gemv per
 * token (what the engine does), marked "gemv". Times are the thread's CPU
 * time (BENCH_WALL=1: wall clock); every draw is printed, then the mean and
 * sd. Not a test. Build and run (after `make`):
 *
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -pthread \
 *       bench/bench_gemm.c build/libpocket.a -o build/bench_gemm -lm -lpthread
 *   ./build/bench_gemm [TYPES [ISAS [NTOK [ROWS [N [DRAWS]]]]]]
 *
 * e.g. `./build/bench_gemm Q4_K,Q8_0 avx2 32 768 2048 5` (defaults: all
 * types, every usable variant, 32 tokens - an expert's share of a 512-token
 * prompt with 128 experts, top 8 - 768 rows of 2048: Qwen3-30B-A3B's expert
 * gate/up; 5 draws). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/kernels.h"
#include "bench_util.h"

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    const char *isas = argc > 2 ? argv[2] : NULL;
    int64_t ntok = argc > 3 ? atoi(argv[3]) : 32;
    int64_t nrows = argc > 4 ? atoi(argv[4]) : 768;
    int64_t n = argc > 5 ? atoi(argv[5]) : 2048;
    int draws = argc > 6 ? atoi(argv[6]) : 5;
    if (ntok < 1 || nrows < 1 || n < 256 || n % 256 || draws < 1) {
        fprintf(stderr, "bench_gemm: NTOK >= 1, ROWS >= 1, N a multiple of 256, DRAWS >= 1\n");
        return 2;
    }
    static const int types[] = { PK_TYPE_Q8_0, PK_TYPE_Q4_0, PK_TYPE_Q4_1, PK_TYPE_Q5_0,
                                 PK_TYPE_Q5_1, PK_TYPE_IQ4_NL, PK_TYPE_MXFP4, PK_TYPE_Q2_K,
                                 PK_TYPE_Q3_K, PK_TYPE_Q4_K, PK_TYPE_Q5_K, PK_TYPE_Q6_K,
                                 PK_TYPE_IQ4_XS };
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);
    printf("gemm: %lld tokens x %lld rows x %lld; GFLOP/s of one core (2 flops per weight-token)\n",
           (long long)ntok, (long long)nrows, (long long)n);
    printf("%-8s %-7s %-5s %s\n", "isa", "type", "path", "draws ... mean sd");
    float *xf = malloc((size_t)(n * ntok) * sizeof(float));
    float *y = malloc((size_t)(nrows * ntok) * sizeof(float));
    for (int64_t i = 0; i < n * ntok; i++) xf[i] = frnd();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        int t = types[ti];
        if (!listed(only, pk_type_name(t))) continue;
        const pk_type_traits *tt = pk_type_get(t);
        size_t rb = pk_row_size(t, n);
        char *w = rand_rows(tt, n, nrows, rb);
        int xt = tt->vec_dot_type;
        size_t xb = pk_row_size(xt, n);
        char *x = malloc(xb * (size_t)ntok);
        const void **xp = malloc((size_t)ntok * sizeof *xp);
        for (int k = 0; k < nl; k++) {
            const pk_kernels *K = list[k];
            if (!listed(isas, K->isa) || !K->gemv[t]) continue;
            quant_tokens(K, xt, xf, n, ntok, x, xp);
            double g[64], sum = 0, sq = 0;
            int nd = draws < 64 ? draws : 64;
            printf("%-8s %-7s %-5s", K->isa, pk_type_name(t), K->gemm[t] ? "gemm" : "gemv");
            for (int d = -1; d < nd; d++) {            /* d = -1: warm-up */
                double t0 = now();
                if (K->gemm[t]) K->gemm[t](n, nrows, ntok, y, nrows, w, rb, (const void *const *)xp);
                else
                    for (int64_t j = 0; j < ntok; j++) K->gemv[t](n, nrows, y + j * nrows, w, rb, xp[j]);
                double dt = now() - t0;
                if (d < 0) continue;
                g[d] = 2.0 * (double)n * (double)nrows * (double)ntok / dt / 1e9;
                sum += g[d]; sq += g[d] * g[d];
                printf(" %7.1f", g[d]);
            }
            double mean = sum / nd, sd = nd > 1 ? sqrt(fmax(0, (sq - nd * mean * mean) / (nd - 1))) : 0;
            printf("   %7.1f %5.1f\n", mean, sd);
            fflush(stdout);
        }
        free(w); free(x); free(xp);
    }
    free(xf); free(y);
    return 0;
}
