/* kernels/arm/quant_ops_iq.h - the i-quant kernels of the AArch64 decode
 * tables: IQ4_XS, IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M and the lattice types
 * IQ3_XXS, IQ3_S, IQ2_S x Q8_K, each as a row's super-block in int32
 * vectors (row_*) and a block kernel over R rows (blk_*). Not a
 * translation unit, nor a header of its own: included by
 * kernels/arm/quant_ops.h after its K-quant block kernels (whose building
 * blocks and scale helpers these use) and before the driver (qa_blk) that
 * calls them; tuning and numerics are as quant_ops.h describes them.
 * It brings in the i-quants' decoders, kernels/arm/iq2_ops.h and
 * kernels/arm/iq_lattice.h (the driver uses the latter's IQA_* kinds too).
 */

#include "kernels/arm/iq2_ops.h"
#include "kernels/arm/iq_lattice.h"

/* ---- i-quants x Q8_K: one row's super-block as int32 vectors ----------------- */

/* the 8 signed scales ls - 32 of an IQ4_XS block */
QA_INLINE int8x8_t qa_iq4xs_scales(const pk_block_iq4_xs *w) {
    static const int8_t shl[8] = {0, -4, 0, -4, 0, -4, 0, -4};
    static const int16_t shh[8] = {0, -2, -4, -6, -8, -10, -12, -14};
    uint32_t sl;
    memcpy(&sl, w->scales_l, 4);
    uint8x8_t L = vreinterpret_u8_u32(vdup_n_u32(sl));
    uint8x8_t lo = vshl_u8(vzip1_u8(L, L), vld1_s8(shl));
    uint8x8_t hi = vmovn_u16(vshlq_u16(vdupq_n_u16(w->scales_h), vld1q_s16(shh)));
    uint8x8_t ls = vsli_n_u8(lo, vand_u8(hi, vdup_n_u8(3)), 4);
    return vsub_s8(vreinterpret_s8_u8(ls), vdup_n_s8(32));
}

QA_INLINE int32x4_t row_iq4_xs(const pk_block_iq4_xs *w, const pk_block_q8_K *x) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t tab = vld1q_s8(pk_iq4nl_values);
    int32x4_t e[8];
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        uint8x16_t q = vld1q_u8(w->qs + 16 * s);
        e[s] = qa_dot32(vqtbl1q_s8(tab, vandq_u8(q, m4)), vld1q_s8(x->qs + 32 * s),
                        vqtbl1q_s8(tab, vshrq_n_u8(q, 4)), vld1q_s8(x->qs + 32 * s + 16));
    }
    int32x4_t lo, hi;
    qa_s8x8_s32(qa_iq4xs_scales(w), &lo, &hi);
    return vmlaq_s32(vmulq_s32(qa_red4(e[0], e[1], e[2], e[3]), lo), qa_red4(e[4], e[5], e[6], e[7]), hi);
}

/* IQ2_XXS (XS 0) / IQ2_XS (XS 1): per sub-block the signed levels
 * (kernels/arm/iq2_ops.h, |.| <= 43: 4 products sum below 2^15) against x,
 * times the scales 2 ls + 1: lanes summing to 8x the block's sum (the 1/8
 * is in the block factor) */
QA_INLINE int32x4_t row_iq2(const int XS, const uint8_t *w, const pk_block_q8_K *x) {
    int32x4_t a = vdupq_n_s32(0);
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        int8x16_t lo, hi;
        int s0, s1;
        iq2a_sub(XS, w, s, &lo, &hi, &s0, &s1);
        int8x16_t x0 = vld1q_s8(x->qs + 32 * s), x1 = vld1q_s8(x->qs + 32 * s + 16);
        if (XS) a = vmlaq_n_s32(vmlaq_n_s32(a, qa_dot16(lo, x0), s0), qa_dot16(hi, x1), s1);
        else a = vmlaq_n_s32(a, qa_dot32s(lo, x0, hi, x1), s0);
    }
    return a;
}

/* IQ1_S, IQ1_M: a group's 8 levels l in {-1, 0, 1} (one 64-bit load from
 * the grid) become 8 l + s, s = +-1 the sign of its delta (|.| <= 9, so 4
 * products sum below 2^15): the dots are 8 times the sums of (l + delta) * x,
 * times the scales 2 ls + 1 (IQ1_S per sub-block, IQ1_M per half) */
QA_INLINE int8x16_t qa_iq1_pair(const uint64_t *grid, unsigned i0, unsigned i1, int8x16_t s) {
    int8x16_t g = vcombine_s8(vcreate_s8(grid[i0]), vcreate_s8(grid[i1]));
    return vaddq_s8(vshlq_n_s8(g, 3), s);
}

QA_INLINE int32x4_t row_iq1_s(const pk_block_iq1_s *w, const pk_block_q8_K *x, const uint64_t *grid) {
    int32x4_t e[8];
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        const unsigned qh = w->qh[s];
        const uint8_t *qs = w->qs + 4 * s;
        const int8x16_t sg = vdupq_n_s8(qh & 0x8000 ? -1 : 1);
        e[s] = qa_dot32s(qa_iq1_pair(grid, qs[0] | (qh << 8 & 0x700), qs[1] | (qh << 5 & 0x700), sg),
                         vld1q_s8(x->qs + 32 * s),
                         qa_iq1_pair(grid, qs[2] | (qh << 2 & 0x700), qs[3] | (qh >> 1 & 0x700), sg),
                         vld1q_s8(x->qs + 32 * s + 16));
    }
    uint16x8_t ls = vandq_u16(vshrq_n_u16(vld1q_u16(w->qh), 12), vdupq_n_u16(7));
    ls = vorrq_u16(vshlq_n_u16(ls, 1), vdupq_n_u16(1));
    int32x4_t lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(ls))), hi = vreinterpretq_s32_u32(vmovl_high_u16(ls));
    return vmlaq_s32(vmulq_s32(qa_red4(e[0], e[1], e[2], e[3]), lo), qa_red4(e[4], e[5], e[6], e[7]), hi);
}

/* the 16 IQ1_M scales 2 ls + 1, entry 2s + h (sub-block s, half h) = field
 * 3 (k % 4) of word k / 4, as 4 int32x4 */
QA_INLINE void qa_iq1m_scales(const uint8_t *sc, int32x4_t *o) {
    static const int16_t sh[8] = {0, -3, -6, -9, 0, -3, -6, -9};
    uint16x4_t wv = vreinterpret_u16_u8(vld1_u8(sc));
    const int16x8_t shv = vld1q_s16(sh);
    uint16x8_t a = vcombine_u16(vdup_lane_u16(wv, 0), vdup_lane_u16(wv, 1));
    uint16x8_t b = vcombine_u16(vdup_lane_u16(wv, 2), vdup_lane_u16(wv, 3));
    a = vandq_u16(vshlq_u16(a, shv), vdupq_n_u16(7));
    b = vandq_u16(vshlq_u16(b, shv), vdupq_n_u16(7));
    a = vorrq_u16(vshlq_n_u16(a, 1), vdupq_n_u16(1));
    b = vorrq_u16(vshlq_n_u16(b, 1), vdupq_n_u16(1));
    o[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(a))); o[1] = vreinterpretq_s32_u32(vmovl_high_u16(a));
    o[2] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(b))); o[3] = vreinterpretq_s32_u32(vmovl_high_u16(b));
}

QA_INLINE int32x4_t row_iq1_m(const pk_block_iq1_m *w, const pk_block_q8_K *x, const uint64_t *grid) {
    int32x4_t e[16];
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        const unsigned h0 = w->qh[2 * s], h1 = w->qh[2 * s + 1];
        const uint8_t *qs = w->qs + 4 * s;
        const int8x16_t s0 = vcombine_s8(vdup_n_s8(h0 & 0x08 ? -1 : 1), vdup_n_s8(h0 & 0x80 ? -1 : 1));
        const int8x16_t s1 = vcombine_s8(vdup_n_s8(h1 & 0x08 ? -1 : 1), vdup_n_s8(h1 & 0x80 ? -1 : 1));
        e[2 * s] = qa_dot16(qa_iq1_pair(grid, qs[0] | (h0 << 8 & 0x700), qs[1] | (h0 << 4 & 0x700), s0),
                            vld1q_s8(x->qs + 32 * s));
        e[2 * s + 1] = qa_dot16(qa_iq1_pair(grid, qs[2] | (h1 << 8 & 0x700), qs[3] | (h1 << 4 & 0x700), s1),
                                vld1q_s8(x->qs + 32 * s + 16));
    }
    int32x4_t sc[4];
    qa_iq1m_scales(w->scales, sc);
    return qa_scale16(e, sc);
}

/* ---- i-quant block kernels over R rows --------------------------------------- */

QA_INLINE float32x4_t blk_iq4_xs(const int R, const void *const *w, int64_t i,
                                 const pk_block_q8_K *x, float32x4_t acc) {
    int32x4_t is[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) is[k] = row_iq4_xs((const pk_block_iq4_xs *)w[k] + i, x);
    float32x4_t d = qa_f16x4(R, w, i * sizeof(pk_block_iq4_xs) + offsetof(pk_block_iq4_xs, d));
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, x->d));
}

QA_INLINE float32x4_t blk_iq2(const int XS, const int R, const void *const *w, int64_t i,
                              const pk_block_q8_K *x, float32x4_t acc) {
    const size_t bs = XS ? sizeof(pk_block_iq2_xs) : sizeof(pk_block_iq2_xxs);
    int32x4_t is[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) is[k] = row_iq2(XS, (const uint8_t *)w[k] + i * bs, x);
    float32x4_t d = qa_f16x4(R, w, i * bs);
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, 0.125f * x->d));
}

/* IQ1_S, IQ1_M: the rows' sums are 8 times theirs (d / 8) */
QA_INLINE float32x4_t blk_iq1_s(const int R, const void *const *w, int64_t i,
                                const pk_block_q8_K *x, float32x4_t acc) {
    const uint64_t *grid = pk_iq1s_grid();
    int32x4_t is[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) is[k] = row_iq1_s((const pk_block_iq1_s *)w[k] + i, x, grid);
    float32x4_t d = qa_f16x4(R, w, i * sizeof(pk_block_iq1_s) + offsetof(pk_block_iq1_s, d));
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, 0.125f * x->d));
}

QA_INLINE float32x4_t blk_iq1_m(const int R, const void *const *w, int64_t i,
                                const pk_block_q8_K *x, float32x4_t acc) {
    const uint64_t *grid = pk_iq1s_grid();
    int32x4_t is[4];
    uint16_t dh[4] = {0, 0, 0, 0};
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const pk_block_iq1_m *b = (const pk_block_iq1_m *)w[k] + i;
        is[k] = row_iq1_m(b, x, grid);
        dh[k] = pk_iq1_m_d(b->scales);
    }
    float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(dh)));
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, 0.125f * x->d));
}

/* ---- the lattice i-quants x Q8_K (kernels/arm/iq_lattice.h) -------------------
 * Per half sub-block (16 elements) the signed grid coordinates against the
 * activations (qa_dot16: pairs of products below 2^15), then the 16 odd
 * scales 2 ls + 1; the reference's factor (1/4, 1/8) with d_x. */
QA_INLINE int32x4_t row_lattice(const int L, const void *w, const pk_block_q8_K *x, const void *grid) {
    int32x4_t e[16];
#pragma GCC unroll 8
    for (int sb = 0; sb < 8; sb++) {
        int8x16_t lo, hi;
        iqa_signed(L, w, sb, grid, &lo, &hi);
        e[2 * sb] = qa_dot16(lo, vld1q_s8(x->qs + 32 * sb));
        e[2 * sb + 1] = qa_dot16(hi, vld1q_s8(x->qs + 32 * sb + 16));
    }
    int32x4_t sc[4];
    int16x8_t s16[2];
    qa_s8x16_s32(vreinterpretq_s8_u8(iqa_scales16(L, w)), sc, s16);
    return qa_scale16(e, sc);
}

QA_INLINE float32x4_t blk_lattice(const int L, const int R, const void *const *w, int64_t i,
                                  const pk_block_q8_K *x, const void *grid, float32x4_t acc) {
    const size_t bs = L == IQA_IQ3_XXS ? sizeof(pk_block_iq3_xxs)
                    : L == IQA_IQ3_S ? sizeof(pk_block_iq3_s) : sizeof(pk_block_iq2_s);
    int32x4_t is[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) is[k] = row_lattice(L, (const char *)w[k] + (size_t)i * bs, x, grid);
    float32x4_t d = qa_f16x4(R, w, (size_t)i * bs);   /* every one of these blocks starts with its d */
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, x->d * iqa_factor(L)));
}
