/* kernels/x86/avx2_att.c - attention over F16 and Q8_0 KV caches (pk_att_kq_fn,
 * pk_att_pv_fn, pk_att_kqt_fn in kernels/kernels.h) with AVX2 + FMA + F16C: merged
 * into the avx2 table (kernels/kernels.c) and inherited by avx512 and amx
 * (avx512 has its own F16 values).
 *
 * The engine's F16 keys are in transposed tiles of 16 positions (engine/kv.h):
 * att_kqt's tile is 6 query rows x one key tile, per element 6 broadcasts
 * and 2 key widenings feeding 12 FMAs, the lanes being positions - the
 * values' shape, with no horizontal sums. att_kq below (key rows, a
 * horizontal sum per score) serves Q8_0 keys and F16 rows.
 *
 * Tuned for: long prompts, where a chunk of M query rows (engine/kinds/attention.c:
 * 16 tokens times the heads of a GQA group, 128 rows for POCKET-35B) meets
 * thousands of cached positions and both products are compute-bound; and
 * decoding (M = one token's group) with the same tiles. An AVX2 core issues
 * two FMAs a cycle, and the loads and F16 widenings that feed them compete
 * for fewer slots, so both products are register-blocked, twelve 8-lane
 * accumulators a tile, each load and widening feeding several FMAs:
 *   scores: 4 query rows x 3 key rows: per 8 elements 4 query loads and 3
 *     key widenings feed 12 FMAs (one accumulator per pair);
 *   values: 6 probability rows x 16 elements: per position 6 broadcasts and
 *     2 value widenings feed 12 FMAs (the last rows 4 x 24, 3 x 32, ...; 8
 *     rows left, a decoded token's group, as 4 + 4).
 * (Zen 3, the tiles alone on rows in L1: 4 x 3 scores ~80% of the FMA
 * peak, 6 x 16 values ~90%; 3 x 32 values, 4 widenings per 12 FMAs, ~45%;
 * the kernels as called: bench/bench_att.c.) The positions are walked in
 * blocks of KB (48: 24 KiB of a 256-element F16 head), each once per row
 * tile while it sits in L1, so a long call reads the cache from memory
 * once; the scores' first row tile over a block prefetches the next
 * block's keys (a decoded token has too few row tiles to hide memory
 * otherwise: bench_att, M 8, 16k positions, from ~36% to ~53% of the
 * peak). Q8_0 rows are widened and scaled in registers, element by
 * element (the block scale once per 32 elements of a key).
 *
 * Numerics, against the reference (kernels/ref.c), for the same cached
 * elements (F16 widened exactly; Q8_0 each element (float)qs * d rounded,
 * where the reference scales a block's sum: a difference of float
 * rounding):
 *   scores: lane l of a pair's accumulator sums the elements j = l mod 8 in
 *     order with FMA; the lanes are summed as ((l0+l1)+(l2+l3)) +
 *     ((l4+l5)+(l6+l7)) (sum4), then the scalar tail (n mod 8) in order.
 *     Every pair goes through these operations whatever tile it is in, so a
 *     score depends neither on M nor on nk.
 *   values: every element is one FMA chain in order of p from zero (blocks
 *     continue the sums left in O), whatever its tile; zero probabilities
 *     add exact zeros (for finite values), so a row's result depends
 *     neither on the other rows nor on trailing zero probabilities:
 *     batched and one-token attention agree bitwise.
 */
#include <math.h>
#include "kernels/kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

enum {
    KB = 48,        /* positions per block */
    T_F16 = 0,      /* cache element types of the tiles */
    T_Q8 = 1,
};

/* elements j..j+7 (j a multiple of 8) of cached row r as floats */
/* elements j..j+7 of Q8_0 row r, its block's scale d given */
AI __m256 widen8q(const uint8_t *r, int j, __m256 d) {
    const pk_block_q8_0 *b = (const pk_block_q8_0 *)r + j / PK_QK8_0;
    const __m128i q = _mm_loadl_epi64((const __m128i *)(b->qs + j % PK_QK8_0));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d);
}
AI __m256 load8(const int T, const uint8_t *r, int j) {
    if (T == T_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)r + j)));
    return widen8q(r, j, _mm256_set1_ps(_cvtsh_ss(((const pk_block_q8_0 *)r)[j / PK_QK8_0].d)));
}
/* element j of cached row r (the scalar tails: F16 only, Q8_0 rows are
   whole blocks) */
AI float load1(const int T, const uint8_t *r, int j) {
    (void)T;
    return _cvtsh_ss(((const uint16_t *)r)[j]);
}

/* the lane sums of a, b, c, d: each ((l0+l1)+(l2+l3)) + ((l4+l5)+(l6+l7)) */
AI __m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

/* ---- scores ------------------------------------------------------------------ */

/* S[i * lds + k] = dot(Q row i, key row k) for i < MR (1..4), k < NR (1..3) */
AI void kq_tile(const int T, const int MR, const int NR, int n, const float *Q, int64_t ldq, const uint8_t *K,
                size_t stride, float *S, int64_t lds) {
    __m256 a[4][3];
    for (int i = 0; i < MR; i++)
        for (int k = 0; k < NR; k++) a[i][k] = _mm256_setzero_ps();
    const int n8 = n & ~7, JB = T == T_Q8 ? PK_QK8_0 : 8;
    for (int j0 = 0; j0 < n8; j0 += JB) {   /* Q8_0: the keys' block scales once per block */
        __m256 dk[3];
        if (T == T_Q8)
            for (int k = 0; k < NR; k++)
                dk[k] = _mm256_set1_ps(_cvtsh_ss(((const pk_block_q8_0 *)(K + k * stride))[j0 / PK_QK8_0].d));
        for (int j = j0; j < j0 + JB; j += 8) {
            __m256 kv[3];
            for (int k = 0; k < NR; k++)
                kv[k] = T == T_Q8 ? widen8q(K + k * stride, j, dk[k]) : load8(T, K + k * stride, j);
            for (int i = 0; i < MR; i++) {
                const __m256 q = _mm256_loadu_ps(Q + i * ldq + j);
                for (int k = 0; k < NR; k++) a[i][k] = _mm256_fmadd_ps(q, kv[k], a[i][k]);
            }
        }
    }
    const __m256 z = _mm256_setzero_ps();
    for (int i = 0; i < MR; i++) {
        float s[4];
        _mm_storeu_ps(s, sum4(a[i][0], NR > 1 ? a[i][1] : z, NR > 2 ? a[i][2] : z, z));
        for (int k = 0; k < NR; k++) {
            for (int t = n8; t < n; t++) s[k] += Q[i * ldq + t] * load1(T, K + k * stride, t);
            S[i * lds + k] = s[k];
        }
    }
}

/* Software prefetch (to L2) of rows [r0, r1) of the next block, bytes
 * each: the first row tile over a block asks for the next block's rows
 * tile by tile, ahead of the tiles that read them (a decoded token's few
 * row tiles leave the hardware prefetcher too little time) */
AI void pf_next(const uint8_t *next, int r0, int r1, size_t stride, size_t bytes) {
    if (!next) return;
    for (int r = r0; r < r1; r++)
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)next + (size_t)r * stride + o, _MM_HINT_T1);
}

/* MR query rows against nk (<= KB) key rows; next: the next block's nn
 * rows to prefetch (rb bytes each), or NULL */
AI void kq_rows(const int T, const int MR, int nk, int n, const float *Q, int64_t ldq, const uint8_t *K,
                size_t stride, float *S, int64_t lds, const uint8_t *next, int nn, size_t rb) {
    int p = 0;
    for (; p + 3 <= nk; p += 3) {
        pf_next(next, p, p + 3 < nn ? p + 3 : nn, stride, rb);
        kq_tile(T, MR, 3, n, Q, ldq, K + p * stride, stride, S + p, lds);
    }
    pf_next(next, p, nn, stride, rb);
    if (nk - p == 2) kq_tile(T, MR, 2, n, Q, ldq, K + p * stride, stride, S + p, lds);
    if (nk - p == 1) kq_tile(T, MR, 1, n, Q, ldq, K + p * stride, stride, S + p, lds);
}

AI void att_kq(const int T, int M, int nk, int n, const float *Q, int64_t ldq, const void *K, size_t stride,
               float *S, int64_t lds) {
    const size_t rb = T == T_F16 ? (size_t)n * 2 : (size_t)n / PK_QK8_0 * sizeof(pk_block_q8_0);
    for (int p0 = 0; p0 < nk; p0 += KB) {
        const int nb = nk - p0 < KB ? nk - p0 : KB, nn = nk - p0 - nb < KB ? nk - p0 - nb : KB;
        const uint8_t *Kb = (const uint8_t *)K + (size_t)p0 * stride, *next = nn > 0 ? Kb + (size_t)nb * stride : NULL;
        int m = 0;
        for (; m + 4 <= M; m += 4, next = NULL)
            kq_rows(T, 4, nb, n, Q + m * ldq, ldq, Kb, stride, S + m * lds + p0, lds, next, nn, rb);
        if (M - m == 3) kq_rows(T, 3, nb, n, Q + m * ldq, ldq, Kb, stride, S + m * lds + p0, lds, next, nn, rb);
        if (M - m == 2) kq_rows(T, 2, nb, n, Q + m * ldq, ldq, Kb, stride, S + m * lds + p0, lds, next, nn, rb);
        if (M - m == 1) kq_rows(T, 1, nb, n, Q + m * ldq, ldq, Kb, stride, S + m * lds + p0, lds, next, nn, rb);
    }
}

/* ---- values ------------------------------------------------------------------ */

/* O rows i < MR, elements [e0, e0 + 8 NV) (MR * NV <= 12), over nk value
 * rows: the sums start from zero, or (more) from O's values */
AI void pv_tile(const int T, const int MR, const int NV, int nk, const float *P, int64_t ldp, const uint8_t *V,
                size_t stride, int e0, int more, float *O, int64_t ldo) {
    __m256 a[6][8];
    for (int i = 0; i < MR; i++)
        for (int h = 0; h < NV; h++)
            a[i][h] = more ? _mm256_loadu_ps(O + i * ldo + e0 + 8 * h) : _mm256_setzero_ps();
    for (int p = 0; p < nk; p++) {
        const uint8_t *v = V + (size_t)p * stride;
        __m256 vh[8];
        for (int h = 0; h < NV; h++) vh[h] = load8(T, v, e0 + 8 * h);
        for (int i = 0; i < MR; i++) {
            const __m256 w = _mm256_broadcast_ss(P + i * ldp + p);
            for (int h = 0; h < NV; h++) a[i][h] = _mm256_fmadd_ps(w, vh[h], a[i][h]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int h = 0; h < NV; h++) _mm256_storeu_ps(O + i * ldo + e0 + 8 * h, a[i][h]);
}

/* MR rows, every element, over nk (<= KB) value rows: tiles of NV vectors,
 * then single vectors, then the scalar tail (F16 rows of n mod 8 != 0) */
AI void pv_rows(const int T, const int MR, const int NV, int nk, int n, const float *P, int64_t ldp,
                const uint8_t *V, size_t stride, int more, float *O, int64_t ldo) {
    const int n8 = n & ~7;
    int e0 = 0;
    for (; e0 + 8 * NV <= n8; e0 += 8 * NV) pv_tile(T, MR, NV, nk, P, ldp, V, stride, e0, more, O, ldo);
    for (; e0 < n8; e0 += 8) pv_tile(T, MR, 1, nk, P, ldp, V, stride, e0, more, O, ldo);
    for (int i = 0; i < MR; i++)
        for (int e = n8; e < n; e++) {
            float o = more ? O[i * ldo + e] : 0.0f;
            for (int p = 0; p < nk; p++) o = fmaf(P[i * ldp + p], load1(T, V + (size_t)p * stride, e), o);
            O[i * ldo + e] = o;
        }
}

AI void att_pv(const int T, int M, int nk, int n, const float *P, int64_t ldp, const void *V, size_t stride,
               float *O, int64_t ldo) {
    if (nk <= 0)   /* no positions: zero sums */
        for (int m = 0; m < M; m++)
            for (int e = 0; e < n; e++) O[m * ldo + e] = 0.0f;
    for (int p0 = 0; p0 < nk; p0 += KB) {
        const int nb = nk - p0 < KB ? nk - p0 : KB, more = p0 > 0;
        const uint8_t *Vb = (const uint8_t *)V + (size_t)p0 * stride;
        const float *Pb = P + p0;
        /* tiles of 6 rows; 8 rows left (a decoded token of an 8-head group)
           as 4 + 4, not 6 + 2 */
        const int m6 = M % 6 == 2 && M >= 8 ? M - 8 : M / 6 * 6;
        int m = 0;
        for (; m < m6; m += 6) pv_rows(T, 6, 2, nb, n, Pb + m * ldp, ldp, Vb, stride, more, O + m * ldo, ldo);
        if (M - m == 8) {
            pv_rows(T, 4, 3, nb, n, Pb + m * ldp, ldp, Vb, stride, more, O + m * ldo, ldo);
            m += 4;
        }
        switch (M - m) {   /* the last rows: 12 accumulators where they fill them */
        case 5: pv_rows(T, 5, 2, nb, n, Pb + m * ldp, ldp, Vb, stride, more, O + m * ldo, ldo); break;
        case 4: pv_rows(T, 4, 3, nb, n, Pb + m * ldp, ldp, Vb, stride, more, O + m * ldo, ldo); break;
        case 3: pv_rows(T, 3, 4, nb, n, Pb + m * ldp, ldp, Vb, stride, more, O + m * ldo, ldo); break;
        case 2: pv_rows(T, 2, 6, nb, n, Pb + m * ldp, ldp, Vb, stride, more, O + m * ldo, ldo); break;
        case 1: pv_rows(T, 1, 8, nb, n, Pb + m * ldp, ldp, Vb, stride, more, O + m * ldo, ldo); break;
        default: break;
        }
    }
}

/* ---- scores over F16 keys in transposed tiles ---------------------------------- */

/* kqt_tile of kernels/kqt_driver.h: R query rows (1..6) x one tile of PK_KT = 16 positions (two 8-lane
 * vectors): per element e, R broadcasts of a query element and two widened
 * key vectors feed 2R FMAs; no horizontal sums (the lanes are positions) */
AI void kqt_tile(const int R, int n, const float *Q, int64_t ldq, const uint16_t *Kt, float *out, int64_t ldo) {
    __m256 a[6][2];
    for (int r = 0; r < R; r++) a[r][0] = a[r][1] = _mm256_setzero_ps();
    for (int e = 0; e < n; e++) {
        const __m256 k0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(Kt + e * PK_KT)));
        const __m256 k1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(Kt + e * PK_KT + 8)));
        for (int r = 0; r < R; r++) {
            const __m256 q = _mm256_broadcast_ss(Q + r * ldq + e);
            a[r][0] = _mm256_fmadd_ps(q, k0, a[r][0]);
            a[r][1] = _mm256_fmadd_ps(q, k1, a[r][1]);
        }
    }
    for (int r = 0; r < R; r++) {
        _mm256_storeu_ps(out + r * ldo, a[r][0]);
        _mm256_storeu_ps(out + r * ldo + 8, a[r][1]);
    }
}

enum { KQT_R = 6 };
#include "kernels/kqt_driver.h"

/* the table's entries: pk_att_kq_fn and pk_att_pv_fn share one signature */
#define ATT_ENTRY(name, fn, T)                                                                            \
    static void name(int M, int nk, int n, const float *A, int64_t lda, const void *B, size_t stride, float *C, \
                     int64_t ldc) {                                                                       \
        fn(T, M, nk, n, A, lda, B, stride, C, ldc);                                                       \
    }
ATT_ENTRY(att_kq_f16, att_kq, T_F16)
ATT_ENTRY(att_kq_q8_0, att_kq, T_Q8)
ATT_ENTRY(att_pv_f16, att_pv, T_F16)
ATT_ENTRY(att_pv_q8_0, att_pv, T_Q8)

const pk_kernels pk_kernels_avx2_att = {
    .att_kqt = att_kqt,
    .att_kq = {[PK_TYPE_F16] = att_kq_f16, [PK_TYPE_Q8_0] = att_kq_q8_0},
    .att_pv = {[PK_TYPE_F16] = att_pv_f16, [PK_TYPE_Q8_0] = att_pv_q8_0},
};
#else
const pk_kernels pk_kernels_avx2_att = {0};
#endif
