/* kernels/x86/avx512_att.c - attention values over an F16 KV cache (pk_att_pv_fn
 * in kernels/kernels.h) with AVX-512: the F16 att_pv entry of the avx512 table; its
 * other attention entries are the avx2 table's (kernels/x86/avx2_att.c).
 *
 * Tuned for: prompts, where O = P V of a chunk of queries is compute-bound:
 * tiles of 8 probability rows x 32 elements (16 zmm accumulators; then 4, 2
 * and 1 rows), each F16 value row loaded and widened once per tile and each
 * probability broadcast once per row, the positions whose probabilities are
 * all zero in the tile skipped through a list made once per block of 512
 * positions and shared by every group of elements. Row tails are masked.
 *
 * Numerics, as kernels/x86/avx2_att.c's: every element is one sum in order of p
 * of fused products (FMA), so a row's result depends neither on its tile
 * nor on the other rows; skipped positions add nothing, the others of a
 * tile add their exact zeros: batched and one-token results agree bitwise.
 */
#include "kernels/kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__F16C__)
#include <immintrin.h>

#define AI static inline __attribute__((always_inline))

enum { PV_BLOCK = 512 };

/* 16 F16 values at p (the lanes of m) as floats */
AI __m512 ld16h(const uint16_t *p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

/* O rows i < MT, elements [e0, e0 + 16 NV) (the last 16 through mask ml),
 * over the cnt positions idx[]; the sums start from zero or (more) from O */
AI void pv_tile(const int MT, const int NV, const int *idx, int cnt, int more, const float *P, int64_t ldp,
                const uint8_t *V, size_t stride, int e0, __mmask16 ml, float *O, int64_t ldo) {
    __m512 a[8][2];
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < NV; h++)
            a[i][h] = more ? _mm512_maskz_loadu_ps(h == NV - 1 ? ml : 0xFFFF, O + i * ldo + e0 + 16 * h)
                           : _mm512_setzero_ps();
    for (int j = 0; j < cnt; j++) {
        const int p = idx[j];
        const uint16_t *v = (const uint16_t *)(V + (size_t)p * stride) + e0;
        __m512 vh[2];
        for (int h = 0; h < NV; h++) vh[h] = ld16h(v + 16 * h, h == NV - 1 ? ml : 0xFFFF);
        for (int i = 0; i < MT; i++) {
            const __m512 w = _mm512_set1_ps(P[i * ldp + p]);
            for (int h = 0; h < NV; h++) a[i][h] = _mm512_fmadd_ps(w, vh[h], a[i][h]);
        }
    }
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < NV; h++)
            _mm512_mask_storeu_ps(O + i * ldo + e0 + 16 * h, h == NV - 1 ? ml : 0xFFFF, a[i][h]);
}

/* MT rows over every position, in blocks of PV_BLOCK */
AI void pv_rows(const int MT, int nk, int n, const float *P, int64_t ldp, const uint8_t *V, size_t stride,
                float *O, int64_t ldo) {
    int idx[PV_BLOCK];
    if (nk <= 0) {   /* no positions: zero sums */
        for (int i = 0; i < MT; i++)
            for (int e = 0; e < n; e++) O[i * ldo + e] = 0.0f;
        return;
    }
    for (int p0 = 0; p0 < nk; p0 += PV_BLOCK) {
        const int p1 = nk - p0 < PV_BLOCK ? nk : p0 + PV_BLOCK;
        const int cnt = pk_att_live(MT, P, ldp, p0, p1, idx);
        int e0 = 0;
        for (; e0 + 32 <= n; e0 += 32) pv_tile(MT, 2, idx, cnt, p0 > 0, P, ldp, V, stride, e0, 0xFFFF, O, ldo);
        if (e0 < n) {   /* 1..31 elements left: one or two vectors, the last masked */
            const int r = n - e0;
            const __mmask16 ml = (__mmask16)(r % 16 ? (1u << (r % 16)) - 1 : 0xFFFF);
            if (r > 16) pv_tile(MT, 2, idx, cnt, p0 > 0, P, ldp, V, stride, e0, ml, O, ldo);
            else pv_tile(MT, 1, idx, cnt, p0 > 0, P, ldp, V, stride, e0, ml, O, ldo);
        }
    }
}

void pk_avx512_att_pv_f16(int M, int nk, int n, const float *P, int64_t ldp, const void *V, size_t stride,
                          float *O, int64_t ldo) {
    int m = 0;
    for (; m + 8 <= M; m += 8) pv_rows(8, nk, n, P + m * ldp, ldp, V, stride, O + m * ldo, ldo);
    if (M - m >= 4) {
        pv_rows(4, nk, n, P + m * ldp, ldp, V, stride, O + m * ldo, ldo);
        m += 4;
    }
    if (M - m >= 2) {
        pv_rows(2, nk, n, P + m * ldp, ldp, V, stride, O + m * ldo, ldo);
        m += 2;
    }
    if (m < M) pv_rows(1, nk, n, P + m * ldp, ldp, V, stride, O + m * ldo, ldo);
}

const pk_kernels pk_kernels_avx512_att = {.att_pv = {[PK_TYPE_F16] = pk_avx512_att_pv_f16}};
#else
const pk_kernels pk_kernels_avx512_att = {0};
#endif
