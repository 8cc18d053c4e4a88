/* bench_att.c - micro-benchmark of the attention kernels of a long prompt:
 * GFLOP/s of one core for the scores S = Q K^T (att_kq) and the values
 * O = P V (att_pv) of one chunk of queries against nk cached positions of
 * one kv head, per cache type (F16: att_kqt on keys in transposed tiles and
 * att_pv; Q8_0: att_kq and att_pv; F32: sgemm on the keys transposed; as
 * engine/kinds/attention.c calls them)
 * and kernel variant, beside the FMA peak of the core (independent 8-lane
 * FMA chains: 16 flops per instruction). The shape defaults to POCKET-35B's
 * gated attention: head dim 256, 8 query heads per kv head, 16 tokens per
 * chunk (M = 128 query rows, engine/kinds/attention.c's chunk; M 8 is a
 * decoded token's). The cache is laid out as the context's (rows of one
 * kv head contiguous) and larger than the caches, as a long prompt's.
 * With BLOCK > 0 each product runs as engine/kinds/attention.c calls it:
 * block by block of BLOCK positions (its ATT_BLOCK), the scores of one
 * block (M x BLOCK) in a buffer reused by the next; BLOCK 0 times one call
 * over all nk positions. Times are the thread's CPU time (BENCH_WALL=1:
 * wall clock); every draw is printed, then the mean and sd. Not a test.
 * Build and run (after `make`):
 *
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -pthread \
 *       bench/bench_att.c build/libpocket.a -o build/bench_att -lm -lpthread
 *   ./build/bench_att [TYPES [ISAS [M [NKS [HEAD [DRAWS [BLOCK]]]]]]]
 *
 * e.g. `./build/bench_att F16,Q8_0 avx2 128 4096,16384 256 3 1024` (defaults:
 * F16, Q8_0 and F32, every usable variant, M 128 - 16 tokens x 8 heads,
 * the engine's chunk -, nk 4096, 16384 and 32768, head 256, 3 draws,
 * BLOCK 1024). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kernels.h"
#include "bench_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
/* 12 independent 8-lane FMA chains (latency 4-5 x 2 ports), n rounds: 16
 * flops an instruction */
__attribute__((target("avx2,fma"), noinline)) static float fma_loop(long n, float x) {
    __m256 a[12], m = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(x);
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    for (long r = 0; r < n; r++) {
#pragma GCC unroll 12
        for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    float s = 0, o[8];
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(o, a[i]);
        s += o[0];
    }
    return s;
}
static double fma_peak(void) {
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return 0;
    const long n = 20000000;
    double best = 0;
    for (int d = 0; d < 3; d++) {
        double t0 = now();
        volatile float s = fma_loop(n, 1e-3f);
        (void)s;
        double g = 12.0 * 16.0 * (double)n / (now() - t0) / 1e9;
        if (g > best) best = g;
    }
    return best;
}
#else
static double fma_peak(void) { return 0; }
#endif

/* one product over nk positions, in calls of bk positions (0: one call) */
typedef struct job {
    const pk_kernels *K;
    int t, kq, M, nk, n, bk;
    const float *A;
    int64_t lda;
    const void *B;
    size_t stride;
    int64_t ldb;
    float *C;
    int64_t ldc;
} job;

static void run(const job *j) {
    const int bk = j->bk > 0 ? j->bk : j->nk;
    for (int p0 = 0; p0 < j->nk; p0 += bk) {
        const int nb = j->nk - p0 < bk ? j->nk - p0 : bk;
        /* a block's scores: at column p0 of S (one call), else at 0 of the
           block's buffer */
        const int64_t sc = j->bk > 0 ? 0 : p0;
        if (j->t == PK_TYPE_F32) {
            if (j->kq) j->K->sgemm(j->M, nb, j->n, j->A, j->lda, (const float *)j->B + p0, j->ldb, j->C + sc, j->ldc);
            else j->K->sgemm(j->M, j->n, nb, j->A + sc, j->lda, (const float *)j->B + (size_t)p0 * j->ldb, j->ldb,
                             j->C, j->ldc);
        } else if (j->kq && j->t == PK_TYPE_F16)
            j->K->att_kqt(j->M, p0, nb, j->n, j->A, j->lda, (const uint16_t *)j->B, j->C + sc, j->ldc);
        else if (j->kq)
            j->K->att_kq[j->t](j->M, nb, j->n, j->A, j->lda, (const uint8_t *)j->B + (size_t)p0 * j->stride,
                               j->stride, j->C + sc, j->ldc);
        else
            j->K->att_pv[j->t](j->M, nb, j->n, j->A + sc, j->lda, (const uint8_t *)j->B + (size_t)p0 * j->stride,
                               j->stride, j->C, j->ldc);
    }
}

static void time_job(const job *j, int draws, double peak) {
    double g[64], sum = 0, sq = 0;
    int nd = draws < 64 ? draws : 64;
    printf("%-8s %-5s %-3s %6d", j->K->isa, pk_type_name(j->t), j->kq ? "kq" : "pv", j->nk);
    for (int d = -1; d < nd; d++) {   /* d = -1: warm-up */
        double t0 = now();
        run(j);
        double dt = now() - t0;
        if (d < 0) continue;
        g[d] = 2.0 * j->M * (double)j->nk * j->n / dt / 1e9;
        sum += g[d]; sq += g[d] * g[d];
        printf(" %6.1f", g[d]);
    }
    double mean = sum / nd, sd = nd > 1 ? sqrt(fmax(0, (sq - nd * mean * mean) / (nd - 1))) : 0;
    printf("   %6.1f %4.1f", mean, sd);
    if (peak > 0) printf("  %3.0f%%", 100.0 * mean / peak);
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : NULL;
    const char *isas = argc > 2 ? argv[2] : NULL;
    int M = argc > 3 ? atoi(argv[3]) : 128;
    const char *nks = argc > 4 ? argv[4] : "4096,16384,32768";
    int n = argc > 5 ? atoi(argv[5]) : 256;
    int draws = argc > 6 ? atoi(argv[6]) : 3;
    int bk = argc > 7 ? atoi(argv[7]) : 1024;
    int nkl[16], nnk = 0, nkmax = 0;
    for (const char *p = nks; *p && nnk < 16;) {
        nkl[nnk] = atoi(p);
        if (nkl[nnk] < 1) break;
        if (nkl[nnk] > nkmax) nkmax = nkl[nnk];
        nnk++;
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    if (M < 1 || nnk < 1 || n < 32 || n % 32 || draws < 1 || bk < 0) {
        fprintf(stderr, "bench_att: M >= 1, NKS positive comma-separated, HEAD a multiple of 32, DRAWS >= 1, "
                        "BLOCK >= 0\n");
        return 2;
    }
    const double peak = fma_peak();
    printf("attention: M %d query rows, head %d, %s; GFLOP/s of one core (2 flops per multiply-add), "
           "%% of the FMA peak\n", M, n, bk > 0 ? "in blocks of BLOCK positions" : "one call");
    if (bk > 0) printf("BLOCK %d\n", bk);
    if (peak > 0) printf("FMA peak (12 independent 8-lane chains): %.1f GFLOP/s\n", peak);
    printf("%-8s %-5s %-3s %6s %s\n", "isa", "cache", "op", "nk", "draws ... mean sd %peak");
    float *Q = aligned_alloc(64, (size_t)M * n * sizeof(float));
    float *S = malloc((size_t)M * nkmax * sizeof(float));
    float *O = malloc((size_t)M * n * sizeof(float));
    for (int64_t i = 0; i < (int64_t)M * n; i++) Q[i] = frnd();
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);
    static const int types[] = {PK_TYPE_F16, PK_TYPE_Q8_0, PK_TYPE_F32};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int t = types[ti];
        if (!listed(only, pk_type_name(t))) continue;
        const pk_type_traits *tt = pk_type_get(t);
        const size_t stride = pk_row_size(t, n);
        char *K = rand_rows(tt, n, nkmax, stride), *V = rand_rows(tt, n, nkmax, stride);
        void *KT = NULL;
        if (t == PK_TYPE_F32) {   /* the F32 cache keeps keys transposed: [dim][position] */
            float *kt = malloc((size_t)n * nkmax * sizeof(float));
            for (int p = 0; p < nkmax; p++)
                for (int e = 0; e < n; e++) kt[(size_t)e * nkmax + p] = ((float *)K)[(size_t)p * n + e];
            KT = kt;
        } else if (t == PK_TYPE_F16) {   /* the F16 cache: tiles of PK_KT positions transposed (engine/kv.h) */
            uint16_t *kt = calloc((size_t)(nkmax + PK_KT - 1) / PK_KT * PK_KT * (size_t)n, sizeof(uint16_t));
            for (int p = 0; p < nkmax; p++)
                for (int e = 0; e < n; e++)
                    kt[((size_t)(p / PK_KT) * n + e) * PK_KT + p % PK_KT] = ((uint16_t *)K)[(size_t)p * n + e];
            KT = kt;
        }
        for (int a = 0; a < nnk; a++) {
            const int nk = nkl[a];
            /* causal-like probabilities, none zero (a chunk's rows see every position
               but their last few) */
            for (int64_t i = 0; i < (int64_t)M * nk; i++) S[i] = (frnd() + 1.0f) / (float)nk;
            for (int k = 0; k < nl; k++) {
                const pk_kernels *L = list[k];
                if (!listed(isas, L->isa)) continue;
                if (t != PK_TYPE_F32 && ((t == PK_TYPE_F16 ? !L->att_kqt : !L->att_kq[t]) || !L->att_pv[t])) continue;
                const int lds = bk > 0 ? bk : nk;
                job kq = {.K = L, .t = t, .kq = 1, .M = M, .nk = nk, .n = n, .bk = bk, .A = Q, .lda = n,
                          .B = KT ? KT : K, .stride = stride, .ldb = nkmax, .C = S, .ldc = lds};
                job pv = {.K = L, .t = t, .kq = 0, .M = M, .nk = nk, .n = n, .bk = bk, .A = S, .lda = lds, .B = V,
                          .stride = stride, .ldb = n, .C = O, .ldc = n};
                float *S0 = malloc((size_t)M * nk * sizeof(float));
                memcpy(S0, S, (size_t)M * nk * sizeof(float));
                time_job(&kq, draws, peak);
                memcpy(S, S0, (size_t)M * nk * sizeof(float));   /* probabilities again */
                free(S0);
                time_job(&pv, draws, peak);
            }
        }
        free(K); free(V); free(KT);
    }
    free(Q); free(S); free(O);
    return 0;
}
