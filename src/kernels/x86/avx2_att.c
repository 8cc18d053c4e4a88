/* kernels/x86/avx2_att.c - attention over F16 and Q8_0 KV caches (pk_att_kq_fn,
 * pk_att_pv_fn in kernels/kernels.h) with AVX2 + FMA + F16C: merged into the avx2
 * table (kernels/kernels.c) and inherited by avx512 and amx.
 *
 * Tuned for: decoding with a long context, where attention streams the whole
 * cache once per token per kv head. Each cached row is read from memory once
 * per call and widened to float in registers (never copied out): scores take
 * up to 4 queries (the heads of a GQA group) per key row, values up to 4
 * (F16) or 2 (Q8_0) probability rows per value row, so the group's heads
 * share each load.
 *
 * Numerics, against the reference (kernels/ref.c), for the same cached
 * elements:
 *   scores: each dot product is reassociated (F16: two 8-lane FMA chains
 *     over 16 elements, one over a last 8, then a horizontal sum and a
 *     scalar tail; Q8_0: per block the 32 products summed in 8 lanes, then
 *     one FMA with the block scale per lane, a horizontal sum at the end),
 *     float rounding apart from the reference's left-to-right sum. Every
 *     query goes through the same operations whatever the tile it is in, so
 *     a score does not depend on M.
 *   values: every element is still one sum in order of p; the products are
 *     fused (FMA) where the reference rounds them first, and Q8_0 folds the
 *     block scale into the probability (p * d, rounded, as the reference).
 *     Positions whose probabilities are all zero in a tile are skipped (F16:
 *     listed once per block of positions, pv_f16_rows); the others add
 *     exact zeros, so batched and one-token results agree bitwise.
 */
#include "kernels/kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

AI float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

AI __m256 load_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* 8 int8 -> 8 floats */
AI __m256 widen8(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }

#include "kernels/att_driver.h"

/* ---- scores ------------------------------------------------------------------ */

/* s[i * lds] = dot(Q row i, k) for i < MT (1..4): F16 key row of n elements */
AI void kq_f16_tile(const int MT, int n, const float *Q, int64_t ldq, const uint16_t *k, float *s,
                    int64_t lds) {
    __m256 a[4][2];
    for (int i = 0; i < MT; i++) a[i][0] = a[i][1] = _mm256_setzero_ps();
    int j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m256 k0 = load_f16(k + j), k1 = load_f16(k + j + 8);
        for (int i = 0; i < MT; i++) {
            a[i][0] = _mm256_fmadd_ps(_mm256_loadu_ps(Q + i * ldq + j), k0, a[i][0]);
            a[i][1] = _mm256_fmadd_ps(_mm256_loadu_ps(Q + i * ldq + j + 8), k1, a[i][1]);
        }
    }
    if (j + 8 <= n) {
        const __m256 k0 = load_f16(k + j);
        for (int i = 0; i < MT; i++) a[i][0] = _mm256_fmadd_ps(_mm256_loadu_ps(Q + i * ldq + j), k0, a[i][0]);
        j += 8;
    }
    for (int i = 0; i < MT; i++) {
        float sum = hsum8(_mm256_add_ps(a[i][0], a[i][1]));
        for (int t = j; t < n; t++) sum += Q[i * ldq + t] * pk_fp16_to_fp32(k[t]);
        s[i * lds] = sum;
    }
}

/* the same for a Q8_0 key row of nb blocks */
AI void kq_q8_0_tile(const int MT, int nb, const float *Q, int64_t ldq, const pk_block_q8_0 *k, float *s,
                     int64_t lds) {
    __m256 a[4];
    for (int i = 0; i < MT; i++) a[i] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const __m128i lo = _mm_loadu_si128((const __m128i *)k[b].qs);
        const __m128i hi = _mm_loadu_si128((const __m128i *)(k[b].qs + 16));
        const __m256 k0 = widen8(lo), k1 = widen8(_mm_srli_si128(lo, 8));
        const __m256 k2 = widen8(hi), k3 = widen8(_mm_srli_si128(hi, 8));
        const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)k[b].d));
        for (int i = 0; i < MT; i++) {
            const float *q = Q + i * ldq + b * PK_QK8_0;
            __m256 t = _mm256_mul_ps(_mm256_loadu_ps(q), k0);
            t = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8), k1, t);
            t = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16), k2, t);
            t = _mm256_fmadd_ps(_mm256_loadu_ps(q + 24), k3, t);
            a[i] = _mm256_fmadd_ps(t, d, a[i]);
        }
    }
    for (int i = 0; i < MT; i++) s[i * lds] = hsum8(a[i]);
}

/* ---- values ------------------------------------------------------------------ */

/* O rows i < MT (1..4), elements [e0, e0 + 8 NV) (NV = 1 or 2), from the
 * F16 rows of the cnt positions idx[] (in order): the sums start from zero,
 * or (more) from O's values, the sums of the positions before */
AI void pv_f16_tile(const int MT, const int NV, const int *idx, int cnt, int more, const float *P, int64_t ldp,
                    const uint8_t *V, size_t stride, int e0, float *O, int64_t ldo) {
    __m256 a[4][2];
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < NV; h++)
            a[i][h] = more ? _mm256_loadu_ps(O + i * ldo + e0 + 8 * h) : _mm256_setzero_ps();
    for (int j = 0; j < cnt; j++) {
        const int p = idx[j];
        const uint16_t *v = (const uint16_t *)(V + (size_t)p * stride) + e0;
        __m256 w[4];
        for (int i = 0; i < MT; i++) w[i] = _mm256_broadcast_ss(P + i * ldp + p);
        for (int h = 0; h < NV; h++) {
            const __m256 vh = load_f16(v + 8 * h);
            for (int i = 0; i < MT; i++) a[i][h] = _mm256_fmadd_ps(w[i], vh, a[i][h]);
        }
    }
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < NV; h++) _mm256_storeu_ps(O + i * ldo + e0 + 8 * h, a[i][h]);
}

/* The positions are taken in blocks of PV_BLOCK: per block, the list of
 * those where some row of the tile has a nonzero probability is made once
 * and shared by every group of elements (positions where all are zero are
 * skipped, the others add their exact zeros) */
enum { PV_BLOCK = 512 };

AI void pv_f16_rows(const int MT, int nk, int n, const float *P, int64_t ldp, const uint8_t *V, size_t stride,
                    float *O, int64_t ldo) {
    int idx[PV_BLOCK];
    const int nv = n / 8 * 8;
    for (int p0 = 0; p0 < nk; p0 += PV_BLOCK) {
        const int p1 = nk - p0 < PV_BLOCK ? nk : p0 + PV_BLOCK;
        const int cnt = pk_att_live(MT, P, ldp, p0, p1, idx);
        int e0 = 0;
        for (; e0 + 16 <= nv; e0 += 16) pv_f16_tile(MT, 2, idx, cnt, p0 > 0, P, ldp, V, stride, e0, O, ldo);
        if (e0 < nv) pv_f16_tile(MT, 1, idx, cnt, p0 > 0, P, ldp, V, stride, e0, O, ldo);
    }
    if (nk <= 0)   /* no positions: zero sums */
        for (int i = 0; i < MT; i++)
            for (int e = 0; e < nv; e++) O[i * ldo + e] = 0.0f;
    if (nv < n) pv_f16_tail(MT, nk, P, ldp, V, stride, nv, n, O, ldo);
}

/* O rows i < MT (1..2), the 32 elements of block b, from Q8_0 rows */
AI void pv_q8_0_tile(const int MT, int nk, const float *P, int64_t ldp, const uint8_t *V, size_t stride, int b,
                     float *O, int64_t ldo) {
    __m256 a[2][4];
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < 4; h++) a[i][h] = _mm256_setzero_ps();
    for (int p = 0; p < nk; p++) {
        float x[2];
        int nz = 0;
        for (int i = 0; i < MT; i++) nz |= (x[i] = P[i * ldp + p]) != 0.0f;
        if (!nz) continue;
        const pk_block_q8_0 *blk = (const pk_block_q8_0 *)(V + (size_t)p * stride) + b;
        const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)blk->d));
        const __m128i lo = _mm_loadu_si128((const __m128i *)blk->qs);
        const __m128i hi = _mm_loadu_si128((const __m128i *)(blk->qs + 16));
        const __m256 v[4] = {widen8(lo), widen8(_mm_srli_si128(lo, 8)), widen8(hi), widen8(_mm_srli_si128(hi, 8))};
        for (int i = 0; i < MT; i++) {
            const __m256 wd = _mm256_mul_ps(_mm256_set1_ps(x[i]), d);
            for (int h = 0; h < 4; h++) a[i][h] = _mm256_fmadd_ps(wd, v[h], a[i][h]);
        }
    }
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < 4; h++) _mm256_storeu_ps(O + i * ldo + b * PK_QK8_0 + 8 * h, a[i][h]);
}

const pk_kernels pk_kernels_avx2_att = {
    .att_kq = {[PK_TYPE_F16] = att_kq_f16, [PK_TYPE_Q8_0] = att_kq_q8_0},
    .att_pv = {[PK_TYPE_F16] = att_pv_f16, [PK_TYPE_Q8_0] = att_pv_q8_0},
};
#else
const pk_kernels pk_kernels_avx2_att = {0};
#endif
