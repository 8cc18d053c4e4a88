/* kernels/arm/neon_att.c - attention over F16 and Q8_0 KV caches (pk_att_kq_fn,
 * pk_att_pv_fn in kernels/kernels.h) with ARMv8.0 Advanced SIMD: merged into the
 * neon table (kernels/kernels.c) and inherited by dotprod and i8mm. Built without
 * NEON (another CPU family) its entries are NULL.
 *
 * Tuned for: decoding with a long context on phone-class cores. The same
 * structure as kernels/x86/avx2_att.c, in 4-lane vectors: each cached row is read
 * once per call and widened in registers (F16 by fcvtl, which ARMv8.0 has;
 * Q8_0 by sxtl + scvtf), scores for up to 4 queries per key row, values for
 * up to 4 (F16) or 2 (Q8_0) probability rows per value row.
 *
 * Numerics, against the reference (kernels/ref.c), for the same cached
 * elements:
 *   scores: each dot product is reassociated (F16: two 4-lane FMA chains
 *     over 8 elements, one over a last 4, a pairwise lane sum and a scalar
 *     tail; Q8_0: per block the 32 products summed in 4 lanes, one FMA with
 *     the block scale per lane, a lane sum at the end). Every query goes
 *     through the same operations whatever its tile: a score does not
 *     depend on M.
 *   values: every element is one sum in order of p, with fused products;
 *     Q8_0 folds the scale into the probability (p * d, rounded, as the
 *     reference). Probability rows all zero in a tile are skipped, the
 *     others add exact zeros: batched and one-token results agree bitwise.
 */
#include "kernels/kernels.h"

#if defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>

#define AI static inline __attribute__((always_inline))

AI float32x4_t load_f16x4(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
AI float32x4_t dup_f16(uint16_t h) { return vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(h))); }

/* the 32 int8 of a Q8_0 block as 8 x 4 floats */
AI void widen32(const int8_t *qs, float32x4_t v[8]) {
    const int8x16_t lo = vld1q_s8(qs), hi = vld1q_s8(qs + 16);
    const int16x8_t w[4] = {vmovl_s8(vget_low_s8(lo)), vmovl_high_s8(lo), vmovl_s8(vget_low_s8(hi)),
                            vmovl_high_s8(hi)};
    for (int i = 0; i < 4; i++) {
        v[2 * i] = vcvtq_f32_s32(vmovl_s16(vget_low_s16(w[i])));
        v[2 * i + 1] = vcvtq_f32_s32(vmovl_high_s16(w[i]));
    }
}

#include "kernels/att_driver.h"

/* ---- scores ------------------------------------------------------------------ */

AI void kq_f16_tile(const int MT, int n, const float *Q, int64_t ldq, const uint16_t *k, float *s,
                    int64_t lds) {
    float32x4_t a[4][2];
    for (int i = 0; i < MT; i++) a[i][0] = a[i][1] = vdupq_n_f32(0.0f);
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const float32x4_t k0 = load_f16x4(k + j), k1 = load_f16x4(k + j + 4);
        for (int i = 0; i < MT; i++) {
            a[i][0] = vfmaq_f32(a[i][0], vld1q_f32(Q + i * ldq + j), k0);
            a[i][1] = vfmaq_f32(a[i][1], vld1q_f32(Q + i * ldq + j + 4), k1);
        }
    }
    if (j + 4 <= n) {
        const float32x4_t k0 = load_f16x4(k + j);
        for (int i = 0; i < MT; i++) a[i][0] = vfmaq_f32(a[i][0], vld1q_f32(Q + i * ldq + j), k0);
        j += 4;
    }
    for (int i = 0; i < MT; i++) {
        float sum = vaddvq_f32(vaddq_f32(a[i][0], a[i][1]));
        for (int t = j; t < n; t++) sum += Q[i * ldq + t] * pk_fp16_to_fp32(k[t]);
        s[i * lds] = sum;
    }
}

AI void kq_q8_0_tile(const int MT, int nb, const float *Q, int64_t ldq, const pk_block_q8_0 *k, float *s,
                     int64_t lds) {
    float32x4_t a[4];
    for (int i = 0; i < MT; i++) a[i] = vdupq_n_f32(0.0f);
    for (int b = 0; b < nb; b++) {
        float32x4_t v[8];
        widen32(k[b].qs, v);
        const float32x4_t d = dup_f16(k[b].d);
        for (int i = 0; i < MT; i++) {
            const float *q = Q + i * ldq + b * PK_QK8_0;
            float32x4_t t = vmulq_f32(vld1q_f32(q), v[0]);
            for (int h = 1; h < 8; h++) t = vfmaq_f32(t, vld1q_f32(q + 4 * h), v[h]);
            a[i] = vfmaq_f32(a[i], t, d);
        }
    }
    for (int i = 0; i < MT; i++) s[i * lds] = vaddvq_f32(a[i]);
}

/* ---- values ------------------------------------------------------------------ */

/* O rows i < MT (1..4), elements [e0, e0 + 4 NV) (NV = 1..4), from F16 rows */
AI void pv_f16_tile(const int MT, const int NV, int nk, const float *P, int64_t ldp, const uint8_t *V,
                    size_t stride, int e0, float *O, int64_t ldo) {
    float32x4_t a[4][4];
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < NV; h++) a[i][h] = vdupq_n_f32(0.0f);
    for (int p = 0; p < nk; p++) {
        float x[4];
        int nz = 0;
        for (int i = 0; i < MT; i++) nz |= (x[i] = P[i * ldp + p]) != 0.0f;
        if (!nz) continue;
        const uint16_t *v = (const uint16_t *)(V + (size_t)p * stride) + e0;
        for (int h = 0; h < NV; h++) {
            const float32x4_t vh = load_f16x4(v + 4 * h);
            for (int i = 0; i < MT; i++) a[i][h] = vfmaq_n_f32(a[i][h], vh, x[i]);
        }
    }
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < NV; h++) vst1q_f32(O + i * ldo + e0 + 4 * h, a[i][h]);
}

AI void pv_f16_rows(const int MT, int nk, int n, const float *P, int64_t ldp, const uint8_t *V, size_t stride,
                    float *O, int64_t ldo) {
    int e0 = 0;
    for (; e0 + 16 <= n; e0 += 16) pv_f16_tile(MT, 4, nk, P, ldp, V, stride, e0, O, ldo);
    for (; e0 + 4 <= n; e0 += 4) pv_f16_tile(MT, 1, nk, P, ldp, V, stride, e0, O, ldo);
    if (e0 < n) pv_f16_tail(MT, nk, P, ldp, V, stride, e0, n, O, ldo);
}

AI void pv_q8_0_tile(const int MT, int nk, const float *P, int64_t ldp, const uint8_t *V, size_t stride, int b,
                     float *O, int64_t ldo) {
    float32x4_t a[2][8];
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < 8; h++) a[i][h] = vdupq_n_f32(0.0f);
    for (int p = 0; p < nk; p++) {
        float x[2];
        int nz = 0;
        for (int i = 0; i < MT; i++) nz |= (x[i] = P[i * ldp + p]) != 0.0f;
        if (!nz) continue;
        const pk_block_q8_0 *blk = (const pk_block_q8_0 *)(V + (size_t)p * stride) + b;
        const float32x4_t d = dup_f16(blk->d);
        float32x4_t v[8];
        widen32(blk->qs, v);
        for (int i = 0; i < MT; i++) {
            const float32x4_t wd = vmulq_n_f32(d, x[i]);
            for (int h = 0; h < 8; h++) a[i][h] = vfmaq_f32(a[i][h], wd, v[h]);
        }
    }
    for (int i = 0; i < MT; i++)
        for (int h = 0; h < 8; h++) vst1q_f32(O + i * ldo + b * PK_QK8_0 + 4 * h, a[i][h]);
}

/* ---- scores over F16 keys in transposed tiles (pk_att_kqt_fn) ---------------- */

/* kqt_tile of kernels/kqt_driver.h: R query rows (1..4) x one tile of PK_KT = 16 positions (four 4-lane
 * vectors): per element e, four widened key vectors and R query elements
 * feed 4R fused multiply-adds (the reference's fmaf chain per lane) */
AI void kqt_tile(const int R, int n, const float *Q, int64_t ldq, const uint16_t *Kt, float *out, int64_t ldo) {
    float32x4_t a[4][4];
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 4; h++) a[r][h] = vdupq_n_f32(0.0f);
    for (int e = 0; e < n; e++) {
        const float32x4_t k[4] = {load_f16x4(Kt + e * PK_KT), load_f16x4(Kt + e * PK_KT + 4),
                                  load_f16x4(Kt + e * PK_KT + 8), load_f16x4(Kt + e * PK_KT + 12)};
        for (int r = 0; r < R; r++) {
            const float q = Q[r * ldq + e];
            for (int h = 0; h < 4; h++) a[r][h] = vfmaq_n_f32(a[r][h], k[h], q);
        }
    }
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 4; h++) vst1q_f32(out + r * ldo + 4 * h, a[r][h]);
}

enum { KQT_R = 4 };
#include "kernels/kqt_driver.h"

const pk_kernels pk_kernels_neon_att = {
    .att_kqt = att_kqt,
    .att_kq = {[PK_TYPE_F16] = att_kq_f16, [PK_TYPE_Q8_0] = att_kq_q8_0},
    .att_pv = {[PK_TYPE_F16] = att_pv_f16, [PK_TYPE_Q8_0] = att_pv_q8_0},
};
#else
const pk_kernels pk_kernels_neon_att = {0};
#endif
