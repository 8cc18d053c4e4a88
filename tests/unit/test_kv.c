/* test_kv.c - the KV cache types: the attention kernels over F16 and Q8_0
 * caches (att_kq / att_pv / att_kqt of every usable kernel table) and the
 * cache type names of the public API.
 *
 * For every variant, type, and odd sizes (head dims with and without SIMD
 * tails, 1..37 positions, 1..6 queries, rows strided as in the cache):
 *  - against an exact (double) computation over the same cached elements:
 *    |got - exact| <= 1e-5 * sum |terms| (float rounding only);
 *  - against the F32 path over the original (unrounded) keys and values:
 *    within the cache's own rounding, F16 2^-11 and Q8_0 half a step
 *    (d / 2 per element) times the sum of |terms|, plus float rounding;
 *  - the batching contract: a query's scores and output are bitwise the same
 *    computed alone or among other queries, and trailing zero probabilities
 *    change nothing (bitwise);
 *  - every SIMD variant (x86 and ARM) has its own entries, not the
 *    reference's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testhelp.h"
#include "quant/quant.h"
#include "kernels/kernels.h"
#include "pocket.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float rndf(void) {               /* [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * 0x1p-24) * 2.0f - 1.0f;
}

#define MAXM 14
#define MAXP 530
#define MAXN 160
#define HEADS 3                          /* rows hold 3 heads; the test uses the middle one */

/* cached rows: nk positions x HEADS heads of n elements of type t; f = the
 * original floats, deq = what the cache holds, as doubles */
typedef struct cache {
    int t, n, nk;
    size_t stride;                       /* bytes per position */
    uint8_t *rows;
    float f[MAXP][MAXN];
    double deq[MAXP][MAXN];
    double step[MAXP][MAXN];             /* the rounding bound of each element */
} cache;

static void make_cache(cache *c, int t, int n, int nk, float scale) {
    c->t = t; c->n = n; c->nk = nk;
    const pk_type_traits *tt = pk_type_get(t);
    c->stride = pk_row_size(t, (int64_t)HEADS * n);
    c->rows = calloc((size_t)nk, c->stride);
    float row[HEADS * MAXN], back[HEADS * MAXN];
    for (int p = 0; p < nk; p++) {
        for (int j = 0; j < HEADS * n; j++) row[j] = scale * rndf();
        if (p == 3) for (int j = 0; j < HEADS * n; j++) row[j] *= 100.0f;   /* one loud row */
        if (p == 5) for (int j = n; j < 2 * n; j++) row[j] = 0.0f;           /* one silent row */
        tt->from_float(row, c->rows + (size_t)p * c->stride, (int64_t)HEADS * n);
        tt->to_float(c->rows + (size_t)p * c->stride, back, (int64_t)HEADS * n);
        for (int j = 0; j < n; j++) {
            c->f[p][j] = row[n + j];
            c->deq[p][j] = back[n + j];
        }
        for (int j = 0; j < n; j++) {
            if (t == PK_TYPE_F16) c->step[p][j] = fabs(row[n + j]) * 0x1p-11;
            else {   /* Q8_0: half the block's step d */
                const pk_block_q8_0 *b = (const pk_block_q8_0 *)(c->rows + (size_t)p * c->stride) + (n + j) / 32;
                c->step[p][j] = 0.5 * pk_fp16_to_fp32(b->d) + fabs(row[n + j]) * 0x1p-11;
            }
        }
    }
}

/* the middle head of position 0 */
static const uint8_t *head0(const cache *c) { return c->rows + pk_row_size(c->t, c->n); }

static void test_kq(const pk_kernels *k, int t, int n, int nk, int M) {
    if (!k->att_kq[t]) { TEST_CHECK(0, "%s: no att_kq for %s", k->isa, pk_type_name(t)); return; }
    cache *c = malloc(sizeof *c);
    make_cache(c, t, n, nk, 1.0f);
    float Q[MAXM][MAXN], S[MAXM][MAXP + 3], S1[MAXP + 3];
    for (int m = 0; m < M; m++)
        for (int j = 0; j < n; j++) Q[m][j] = rndf() * (m == 2 ? 30.0f : 1.0f);
    k->att_kq[t](M, nk, n, &Q[0][0], MAXN, head0(c), c->stride, &S[0][0], MAXP + 3);
    int bad = 0, bad32 = 0;
    for (int m = 0; m < M; m++)
        for (int p = 0; p < nk; p++) {
            double exact = 0, abs = 0, f32 = 0, bound = 0;
            for (int j = 0; j < n; j++) {
                exact += Q[m][j] * c->deq[p][j];
                abs += fabs(Q[m][j] * c->deq[p][j]);
                f32 += (double)Q[m][j] * c->f[p][j];
                bound += fabs(Q[m][j]) * c->step[p][j];
            }
            if (!(fabs(S[m][p] - exact) <= 1e-5 * abs + 1e-30)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s kq %s n %d: S[%d][%d] = %.9g, exact %.9g\n", k->isa, pk_type_name(t), n, m,
                            p, S[m][p], exact);
            }
            if (!(fabs(S[m][p] - f32) <= bound + 1e-5 * abs + 1e-30)) bad32++;
        }
    TEST_CHECK(bad == 0, "%s att_kq %s n %d nk %d M %d: %d scores off the exact dot", k->isa, pk_type_name(t), n,
               nk, M, bad);
    TEST_CHECK(bad32 == 0, "%s att_kq %s n %d nk %d M %d: %d scores beyond the cache rounding of F32's", k->isa,
               pk_type_name(t), n, nk, M, bad32);
    /* each query alone = the same query among M (bitwise) */
    int same = 1;
    for (int m = 0; m < M; m++) {
        k->att_kq[t](1, nk, n, &Q[m][0], MAXN, head0(c), c->stride, S1, 1);
        same &= memcmp(S1, &S[m][0], (size_t)nk * sizeof(float)) == 0;
    }
    TEST_CHECK(same, "%s att_kq %s n %d M %d: a query alone differs from the same query among others", k->isa,
               pk_type_name(t), n, M);
    free(c->rows);
    free(c);
}

static void test_pv(const pk_kernels *k, int t, int n, int nk, int M) {
    if (!k->att_pv[t]) { TEST_CHECK(0, "%s: no att_pv for %s", k->isa, pk_type_name(t)); return; }
    cache *c = malloc(sizeof *c);
    make_cache(c, t, n, nk, 2.0f);
    enum { LDP = MAXP + 5, LDO = MAXN + 3 };
    float P[MAXM][LDP], O[MAXM][LDO], O1[LDO];
    for (int m = 0; m < M; m++) {
        /* row m sees positions 0..last (a causal row), probabilities >= 0 */
        const int last = nk - 1 - (m * 5) % nk;
        for (int p = 0; p < nk; p++) P[m][p] = p <= last ? (rndf() + 1.0f) / (float)nk : 0.0f;
        if (nk > 4 && last > 2) P[m][1] = 0.0f;       /* an exact zero inside */
    }
    for (int m = 0; m < M; m++) O[m][n] = 1234.0f;    /* past the row: untouched */
    k->att_pv[t](M, nk, n, &P[0][0], LDP, head0(c), c->stride, &O[0][0], LDO);
    int bad = 0, bad32 = 0;
    for (int m = 0; m < M; m++)
        for (int e = 0; e < n; e++) {
            double exact = 0, abs = 0, f32 = 0, bound = 0;
            for (int p = 0; p < nk; p++) {
                exact += P[m][p] * c->deq[p][e];
                abs += fabs(P[m][p] * c->deq[p][e]);
                f32 += (double)P[m][p] * c->f[p][e];
                bound += P[m][p] * c->step[p][e];
            }
            if (!(fabs(O[m][e] - exact) <= 1e-5 * abs + 1e-30)) {
                if (bad++ < 3)
                    fprintf(stderr, "  %s pv %s n %d: O[%d][%d] = %.9g, exact %.9g\n", k->isa, pk_type_name(t), n, m,
                            e, O[m][e], exact);
            }
            if (!(fabs(O[m][e] - f32) <= bound + 1e-5 * abs + 1e-30)) bad32++;
        }
    TEST_CHECK(bad == 0, "%s att_pv %s n %d nk %d M %d: %d outputs off the exact sum", k->isa, pk_type_name(t), n,
               nk, M, bad);
    TEST_CHECK(bad32 == 0, "%s att_pv %s n %d nk %d M %d: %d outputs beyond the cache rounding of F32's", k->isa,
               pk_type_name(t), n, nk, M, bad32);
    int untouched = 1;
    for (int m = 0; m < M; m++) untouched &= O[m][n] == 1234.0f;
    TEST_CHECK(untouched, "%s att_pv %s n %d: wrote past the row", k->isa, pk_type_name(t), n);
    /* each row alone, over only the positions it sees (no trailing zeros),
       = the same row among M (bitwise) */
    int same = 1;
    for (int m = 0; m < M; m++) {
        const int last = nk - 1 - (m * 5) % nk;
        k->att_pv[t](1, last + 1, n, &P[m][0], LDP, head0(c), c->stride, O1, LDO);
        same &= memcmp(O1, &O[m][0], (size_t)n * sizeof(float)) == 0;
    }
    TEST_CHECK(same, "%s att_pv %s n %d nk %d M %d: a row alone over its own positions differs from the batch",
               k->isa, pk_type_name(t), n, nk, M);
    free(c->rows);
    free(c);
}

/* max(a, |v|), out of line: gcc 12 for AArch64 crashes (an internal
 * compiler error in the vectoriser) on the fmax reductions inlined below */
static __attribute__((noinline)) double maxabs(double a, double v) { return fmax(a, fabs(v)); }

/* every variant against the reference variant: agreement to float rounding */
static void test_vs_ref(const pk_kernels *k, const pk_kernels *ref, int t, int n) {
    cache *c = malloc(sizeof *c);
    make_cache(c, t, n, 29, 1.0f);
    float Q[4][MAXN], S[4][MAXP], R[4][MAXP], O[4][MAXN], RO[4][MAXN];
    for (int m = 0; m < 4; m++)
        for (int j = 0; j < n; j++) Q[m][j] = rndf();
    k->att_kq[t](4, 29, n, &Q[0][0], MAXN, head0(c), c->stride, &S[0][0], MAXP);
    ref->att_kq[t](4, 29, n, &Q[0][0], MAXN, head0(c), c->stride, &R[0][0], MAXP);
    double d = 0, mx = 0;
    for (int m = 0; m < 4; m++)
        for (int p = 0; p < 29; p++) {
            d = maxabs(d, S[m][p] - R[m][p]);
            mx = maxabs(mx, R[m][p]);
        }
    TEST_CHECK(d <= 1e-5 * mx, "%s att_kq %s n %d vs ref: max diff %.3g of %.3g", k->isa, pk_type_name(t), n, d, mx);
    for (int m = 0; m < 4; m++)
        for (int p = 0; p < 29; p++) S[m][p] = (rndf() + 1.0f) / 29;
    k->att_pv[t](4, 29, n, &S[0][0], MAXP, head0(c), c->stride, &O[0][0], MAXN);
    ref->att_pv[t](4, 29, n, &S[0][0], MAXP, head0(c), c->stride, &RO[0][0], MAXN);
    d = mx = 0;
    for (int m = 0; m < 4; m++)
        for (int e = 0; e < n; e++) {
            d = maxabs(d, O[m][e] - RO[m][e]);
            mx = maxabs(mx, RO[m][e]);
        }
    TEST_CHECK(d <= 1e-5 * mx, "%s att_pv %s n %d vs ref: max diff %.3g of %.3g", k->isa, pk_type_name(t), n, d, mx);
    free(c->rows);
    free(c);
}

/* att_kqt (F16 keys in transposed tiles): positions p0 .. p0 + nk - 1 of a
 * cache of np positions written as engine/kv.h lays them out, against the
 * exact dot over the same F16 elements (float rounding), the reference's
 * bits (the contract: one FMA chain per score), and one query alone = the
 * same query among others (bitwise); the scores' row tails stay untouched */
static void test_kqt(const pk_kernels *k, const pk_kernels *ref, int n, int p0, int nk, int M) {
    const int np = p0 + nk, ntile = (np + PK_KT - 1) / PK_KT;
    uint16_t *K = calloc((size_t)ntile * PK_KT * (size_t)n, sizeof(uint16_t));
    double *deq = malloc(sizeof(double) * (size_t)np * (size_t)n);
    for (int i = 0; i < ntile * PK_KT * n; i++) K[i] = pk_fp32_to_fp16(rndf() * 1e4f);   /* unused slots: noise */
    for (int p = 0; p < np; p++)
        for (int e = 0; e < n; e++) {
            const uint16_t h = pk_fp32_to_fp16(p == 3 ? 100.0f * rndf() : rndf());
            K[((size_t)(p / PK_KT) * n + e) * PK_KT + p % PK_KT] = h;
            deq[(size_t)p * n + e] = pk_fp16_to_fp32(h);
        }
    enum { LDS = MAXP + 3 };
    static float Q[MAXM][MAXN], S[MAXM][LDS], R[MAXM][LDS], S1[LDS];
    for (int m = 0; m < M; m++)
        for (int j = 0; j < n; j++) Q[m][j] = rndf();
    for (int m = 0; m < MAXM; m++)
        for (int j = 0; j < LDS; j++) S[m][j] = R[m][j] = -7.0f;
    k->att_kqt(M, p0, nk, n, &Q[0][0], MAXN, K, &S[0][0], LDS);
    ref->att_kqt(M, p0, nk, n, &Q[0][0], MAXN, K, &R[0][0], LDS);
    int bad = 0, same = 1, untouched = 1;
    for (int m = 0; m < M; m++) {
        for (int j = 0; j < nk; j++) {
            double exact = 0, mag = 0;
            for (int e = 0; e < n; e++) {
                exact += (double)Q[m][e] * deq[(size_t)(p0 + j) * n + e];
                mag += fabs((double)Q[m][e] * deq[(size_t)(p0 + j) * n + e]);
            }
            bad += fabs(S[m][j] - exact) > 1e-5 * mag + 1e-30;
        }
        untouched &= S[m][nk] == -7.0f;
        same &= !memcmp(S[m], R[m], sizeof(float) * (size_t)nk);
    }
    TEST_CHECK(bad == 0, "%s att_kqt n %d p0 %d nk %d M %d: %d scores off the exact dot", k->isa, n, p0, nk, M, bad);
    TEST_CHECK(same, "%s att_kqt n %d p0 %d nk %d M %d: not the reference's bits", k->isa, n, p0, nk, M);
    TEST_CHECK(untouched, "%s att_kqt n %d p0 %d nk %d M %d: wrote past the row", k->isa, n, p0, nk, M);
    int alone = 1;
    for (int m = 0; m < M; m++) {
        k->att_kqt(1, p0, nk, n, &Q[m][0], MAXN, K, S1, LDS);
        alone &= !memcmp(S1, S[m], sizeof(float) * (size_t)nk);
    }
    TEST_CHECK(alone, "%s att_kqt n %d p0 %d nk %d M %d: a query alone differs from the same query among others",
               k->isa, n, p0, nk, M);
    free(K);
    free(deq);
}

static void test_names(void) {
    TEST_COND("f32", pk_cache_type_parse("f32") == PK_CACHE_F32);
    TEST_COND("F16", pk_cache_type_parse("F16") == PK_CACHE_F16);
    TEST_COND("q8_0", pk_cache_type_parse("q8_0") == PK_CACHE_Q8_0);
    TEST_COND("Q8_0", pk_cache_type_parse("Q8_0") == PK_CACHE_Q8_0);
    TEST_COND("unknown", pk_cache_type_parse("q4_k") == -1 && pk_cache_type_parse("") == -1 &&
                             pk_cache_type_parse(NULL) == -1 && pk_cache_type_parse("f16 ") == -1);
    TEST_COND("names", !strcmp(pk_cache_type_name(PK_CACHE_DEFAULT), "f16") &&
                           !strcmp(pk_cache_type_name(PK_CACHE_Q8_0), "q8_0") && pk_cache_type_name(99) == NULL &&
                           pk_cache_type_name(-1) == NULL);
    pk_context_params p = pk_context_default_params();
    TEST_COND("default is f16", p.type_k == PK_CACHE_F16 && p.type_v == PK_CACHE_F16);
}

int main(void) {
    test_names();
    const pk_kernels *list[8];
    const int nl = pk_kernels_list(list, 8);
    const int types[2] = {PK_TYPE_F16, PK_TYPE_Q8_0};
    /* head dims: SIMD-wide, with a 16/8 step left, with a scalar tail (F16) */
    const int dims_f16[] = {64, 128, 80, 72, 36, 20, 3, 160};
    const int dims_q8[] = {32, 64, 128, 96, 160};
    const int nks[] = {1, 2, 7, 13, 37, 530};   /* 530: past a 512-position block */
    for (int i = 0; i < nl; i++) {
        fprintf(stderr, "kernels: %s\n", list[i]->isa);
        /* F16 keys in transposed tiles: head dims odd and even, ranges that
           start and end inside a tile or on its edges */
        const int kqt_dims[] = {128, 64, 3, 80, 160};   /* <= MAXN */
        const int kqt_p0[] = {0, 5, 16, 37};
        const int kqt_nk[] = {1, 11, 16, 27, 48, 100, 530};
        for (int d = 0; d < 5; d++)
            for (int a = 0; a < 4; a++)
                for (int b = 0; b < 7; b++)
                    for (int M = 1; M <= MAXM; M += (M < 4 ? 1 : M < 8 ? 2 : 3))
                        test_kqt(list[i], list[0], kqt_dims[d], kqt_p0[a], kqt_nk[b], M);
        if (i > 0)
            TEST_CHECK(list[i]->att_kqt != list[0]->att_kqt, "%s: att_kqt falls back to the reference", list[i]->isa);
        for (int ti = 0; ti < 2; ti++) {
            const int t = types[ti];
            const int *dims = t == PK_TYPE_F16 ? dims_f16 : dims_q8;
            const int nd = t == PK_TYPE_F16 ? 8 : 5;
            for (int d = 0; d < nd; d++)
                for (int a = 0; a < 6; a++)
                    for (int M = 1; M <= MAXM; M += (M < 4 ? 1 : M < 8 ? 2 : 3)) {   /* 11 = 8+2+1, 14 = 8+4+2 */
                        test_kq(list[i], t, dims[d], nks[a], M);
                        test_pv(list[i], t, dims[d], nks[a], M);
                    }
            for (int d = 0; d < nd; d++) test_vs_ref(list[i], list[0], t, dims[d]);
            /* the SIMD variants (avx2 and up, neon and up) have their own */
            if (i > 0)
                TEST_CHECK(list[i]->att_kq[t] != list[0]->att_kq[t] && list[i]->att_pv[t] != list[0]->att_pv[t],
                           "%s: att_kq / att_pv %s fall back to the reference", list[i]->isa, pk_type_name(t));
        }
    }
    return TEST_REPORT();
}
