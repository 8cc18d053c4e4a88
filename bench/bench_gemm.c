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
 * gate/up; 5 draws).
 *
 * On x86 each line also gives the kernel's int8 multiply-adds per second
 * (n x rows x tokens per call) as a share of the int8 issue rate of its
 * variant's ISA on this core, measured here before and after the kernels
 * (their mean; the thread's CPU time): AVX2 without VNNI an int8
 * multiply-add is vpmaddubsw + vpmaddwd + vpaddd per 32 (the two multiplies
 * share the vector multiply ports: bench/ports.c), AVX-VNNI one vpdpbusd ymm
 * per 32, AVX-512 one vpdpbusd zmm per 64. A K-quant kernel that sums
 * several vpmaddubsw in int16 before one vpmaddwd can pass 100%. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/kernels.h"
#include "bench_util.h"

#if defined(__x86_64__)
/* G multiply-adds per second of independent chains of one int8 multiply-add
 * group (its asm, operands: ymm13/zmm13 unsigned bytes, ymm14/zmm14 signed
 * bytes, ymm15 int16 ones), 6 or 12 accumulators, 32 or 64 per group */
#define ISSUE(GROUPS, MACS, CLOBBER...)                                                       \
    do {                                                                                      \
        long it_ = 20000000;                                                                  \
        double t0_ = now();                                                                   \
        __asm__ volatile("vpcmpeqw %%ymm15, %%ymm15, %%ymm15\n vpsrlw $15, %%ymm15, %%ymm15\n" \
                         "vpsllw $1, %%ymm15, %%ymm13\n vpsubw %%ymm15, %%ymm15, %%ymm14\n"    \
                         "1:\n" GROUPS "dec %0\n jnz 1b\n"                                   \
                         : "+r"(it_) : : "cc", CLOBBER);                                      \
        return (double)(MACS) * 20000000.0 / (now() - t0_) / 1e9;                            \
    } while (0)
#define G2(t, a) "vpmaddubsw %%ymm14, %%ymm13, %%ymm" #t "\n vpmaddwd %%ymm15, %%ymm" #t ", %%ymm" #t "\n" \
                 "vpaddd %%ymm" #t ", %%ymm" #a ", %%ymm" #a "\n"
__attribute__((target("avx2"))) static double issue_avx2(void) {
    ISSUE(G2(0, 6) G2(1, 7) G2(2, 8) G2(3, 9) G2(4, 10) G2(5, 11) G2(0, 6) G2(1, 7) G2(2, 8) G2(3, 9) G2(4, 10)
          G2(5, 11), 12 * 32, "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm13", "xmm14", "xmm15");
}
#define GV(k) "%{vex%} vpdpbusd %%ymm14, %%ymm13, %%ymm" #k "\n"
__attribute__((target("avx2,avxvnni"))) static double issue_avxvnni(void) {
    ISSUE(GV(0) GV(1) GV(2) GV(3) GV(4) GV(5) GV(6) GV(7) GV(8) GV(9) GV(10) GV(11), 12 * 32,
          "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
          "xmm13", "xmm14", "xmm15");
}
#define GZ(k) "vpdpbusd %%zmm14, %%zmm13, %%zmm" #k "\n"
__attribute__((target("avx512f,avx512vnni"))) static double issue_avx512(void) {
    ISSUE("vinserti64x4 $1, %%ymm13, %%zmm13, %%zmm13\n vinserti64x4 $1, %%ymm14, %%zmm14, %%zmm14\n"
          GZ(0) GZ(1) GZ(2) GZ(3) GZ(4) GZ(5) GZ(6) GZ(7) GZ(8) GZ(9) GZ(10) GZ(11), 12 * 64,
          "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
          "xmm13", "xmm14", "xmm15");
}
#endif

/* the int8 issue rate of variant isa's ISA on this core, G multiply-adds/s;
 * 0 where not measured (not x86, the CPU lacks it, the AMX tiles) */
static double issue_rate(const char *isa) {
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (!strcmp(isa, "avx2") && __builtin_cpu_supports("avx2")) return issue_avx2();
    if (!strcmp(isa, "avxvnni") && __builtin_cpu_supports("avxvnni")) return issue_avxvnni();
    if (!strcmp(isa, "avx512") && __builtin_cpu_supports("avx512vnni")) return issue_avx512();
#endif
    (void)isa;
    return 0;
}

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
                                 PK_TYPE_IQ4_XS, PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS, PK_TYPE_IQ1_S,
                                 PK_TYPE_IQ1_M, PK_TYPE_IQ3_XXS, PK_TYPE_IQ3_S, PK_TYPE_IQ2_S };
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);
    printf("gemm: %lld tokens x %lld rows x %lld; GFLOP/s of one core (2 flops per weight-token)\n",
           (long long)ntok, (long long)nrows, (long long)n);
    double rate[8][2];
    for (int k = 0; k < nl; k++) {
        rate[k][0] = listed(isas, list[k]->isa) ? issue_rate(list[k]->isa) : 0;
        if (rate[k][0] > 0)
            printf("int8 issue rate of %s (one core, before): %.1f G multiply-adds/s\n", list[k]->isa, rate[k][0]);
    }
    printf("%-8s %-7s %-5s %s\n", "isa", "type", "path", "draws ... mean sd [G multiply-adds/s, share of the issue rate]");
    struct out { int k, t; double gmacs; } rows_out[64];
    int nout = 0;
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
            printf("   %7.1f %5.1f", mean, sd);
            rows_out[nout] = (struct out){ .k = k, .t = t, .gmacs = mean / 2 };
            nout += nout < 64;
            printf("\n");
            fflush(stdout);
        }
        free(w); free(x); free(xp);
    }
    /* the rate again after the kernels: each line's share of the mean of both */
    for (int k = 0; k < nl; k++) rate[k][1] = rate[k][0] > 0 ? issue_rate(list[k]->isa) : 0;
    for (int k = 0; k < nl; k++)
        if (rate[k][0] > 0)
            printf("int8 issue rate of %s (one core, after): %.1f G multiply-adds/s\n", list[k]->isa, rate[k][1]);
    for (int i = 0; i < nout; i++) {
        double r = (rate[rows_out[i].k][0] + rate[rows_out[i].k][1]) / 2;
        if (r > 0)
            printf("%-8s %-7s %6.1f G multiply-adds/s = %5.1f%% of the int8 issue rate (%.1f)\n",
                   list[rows_out[i].k]->isa, pk_type_name(rows_out[i].t), rows_out[i].gmacs,
                   100 * rows_out[i].gmacs / r, r);
    }
    free(xf); free(y);
    return 0;
}
