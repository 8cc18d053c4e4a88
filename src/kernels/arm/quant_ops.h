/* kernels/arm/quant_ops.h - the block-quantized kernels of the AArch64 tables:
 * Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4 x Q8_0; Q4_1, Q5_1 x Q8_1; Q2_K..Q6_K, IQ4_XS,
 * IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, IQ3_XXS, IQ3_S, IQ2_S x Q8_K (those i-quants in
 * kernels/arm/quant_ops_iq.h, included below); and the Q8_0 / Q8_1 / Q8_K
 * activation quantizers. Not a translation
 * unit: included by kernels/arm/neon.c and kernels/arm/dotprod.c inside their ISA
 * guards, after they define the int8 dot vocabulary:
 *   qa_dot32(a0, b0, a1, b1)  int32x4 whose lanes sum to a0.b0 + a1.b1
 *                             (32 int8 pairs, any weights, |b| <= 127)
 *   qa_dot32s(a0, b0, a1, b1) the same when any 4 products sum below 2^15
 *                             in magnitude (levels <= 63 x activations)
 *   qa_dot16(a, b)            int32x4 whose lanes sum to a.b (16 pairs)
 *   qa_dot32a(acc, a0, b0, a1, b1)  acc plus lanes summing to a0.b0 + a1.b1,
 *                             when any 4 products sum below 2^15
 * kernels/arm/dotprod.c spells them with sdot (vdotq_s32), kernels/arm/neon.c with
 * smull / smlal2 / saddlp / sadalp; everything below is written once.
 *
 * Tuned for: single-token decode (bandwidth-bound). The gemvs run 4 rows
 * side by side over each activation block (4 weight streams in flight; the
 * activation vectors are shared by the rows - Q4_K loads each 128 once for
 * the 4 rows, the others leave it to the compiler), prefetching each row
 * 1 KB ahead, one prefetch per 64 bytes of a step (rounded down, at least
 * one; the hardware prefetcher covers the rest). A row's per-(sub-)block
 * int32 vectors are folded by pairwise adds into one vector whose lanes are
 * 4 sub-block sums (multiplied by the sub-block scales as a vector) and
 * then into one vector whose lane r is row r's block sum; so each block
 * costs one int-to-float conversion and one fused multiply-add for all 4
 * rows, the fp16 scales of the 4 rows are converted together, and the
 * accumulator lanes are the 4 results: no horizontal sum per block, none at
 * the end. Q2_K multiplies its levels by their 4-bit scales in bytes (<= 45)
 * and sums everything into one accumulator. Scale decoding (Q4_K/Q5_K 6-bit
 * packing, Q3_K, IQ4_XS) is vectorised, once per row and super-block.
 * Each kernel is written once, as always-inline functions specialised by a
 * constant weight kind (QA_Q8_0 ...: qa_gemv, qa_rows_dot, qa_blk) behind
 * thin per-type entries (vec_dot_t, gemv_t).
 *
 * Numerics: within a block or super-block every product and sum is exact
 * int32 (activations in [-127, 127], as every quantizer makes them).
 * Unsigned levels are used as they are stored; the +4 (Q3_K) and +32 (Q6_K)
 * level offsets and the K-quant mins are taken out with Q8_K's bsums in
 * int32, exactly. Only the float accumulation across blocks differs from
 * the reference (order, fused multiply-adds). The activation quantizers are
 * bit-exact with the reference for finite input (fcvtas = roundf's ties
 * away, fcvtns = nearest_int's ties to even, saturating narrows = the
 * reference's clamps).
 */

#define QA_INLINE static inline __attribute__((always_inline))
#define QA_PF_DIST 1024          /* prefetch distance per row, bytes */

/* ---- building blocks ---------------------------------------------------- */

/* lanes 0..R-1: the sums of the lanes of p[0..R-1] */
QA_INLINE int32x4_t qa_rows(const int R, const int32x4_t *p) {
    int32x4_t a = vpaddq_s32(p[0], p[R > 1 ? 1 : 0]);
    int32x4_t b = R > 2 ? vpaddq_s32(p[2], p[R > 3 ? 3 : 2]) : a;
    return vpaddq_s32(a, b);
}
/* lanes: the sums of the lanes of a, b, c, d */
QA_INLINE int32x4_t qa_red4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

/* The R weight rows of the block kernels are w[0..R-1] (w[R..3] any valid
 * row), each at its block 0; `at` is a byte offset into every row (block i
 * of size bs: i * bs + the field's offset). */

/* the fp16 at byte `at` of rows w[0..R-1] as floats in lanes 0..R-1 */
QA_INLINE float32x4_t qa_f16x4(const int R, const void *const *w, size_t at) {
    uint16x4_t h = vld1_dup_u16((const uint16_t *)((const char *)w[0] + at));
    if (R > 1) h = vld1_lane_u16((const uint16_t *)((const char *)w[1] + at), h, 1);
    if (R > 2) h = vld1_lane_u16((const uint16_t *)((const char *)w[2] + at), h, 2);
    if (R > 3) h = vld1_lane_u16((const uint16_t *)((const char *)w[3] + at), h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* two adjacent fp16 (d, dmin) at byte `at` of rows w[0..R-1]: lanes r of *d and *m */
QA_INLINE void qa_f16x4x2(const int R, const void *const *w, size_t at, float32x4_t *d, float32x4_t *m) {
    const uint16_t *p0 = (const uint16_t *)((const char *)w[0] + at), *p1 = (const uint16_t *)((const char *)w[1] + at);
    const uint16_t *p2 = (const uint16_t *)((const char *)w[2] + at), *p3 = (const uint16_t *)((const char *)w[3] + at);
    uint16x8_t h = vdupq_n_u16(0);
    h = vld1q_lane_u16(p0, h, 0); h = vld1q_lane_u16(p0 + 1, h, 1);
    if (R > 1) { h = vld1q_lane_u16(p1, h, 2); h = vld1q_lane_u16(p1 + 1, h, 3); }
    if (R > 2) { h = vld1q_lane_u16(p2, h, 4); h = vld1q_lane_u16(p2 + 1, h, 5); }
    if (R > 3) { h = vld1q_lane_u16(p3, h, 6); h = vld1q_lane_u16(p3 + 1, h, 7); }
    float16x8_t f = vreinterpretq_f16_u16(h);
    float32x4_t a = vcvt_f32_f16(vget_low_f16(f)), b = vcvt_high_f32_f16(f);
    *d = vuzp1q_f32(a, b);
    *m = vuzp2q_f32(a, b);
}

QA_INLINE int32x4_t qa_u8lo_s32(uint8x16_t v) {    /* bytes 0..3 */
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vget_low_u8(v)))));
}

/* the signed scales s8[0..7] as two int32x4 */
QA_INLINE void qa_s8x8_s32(int8x8_t s8, int32x4_t *lo, int32x4_t *hi) {
    int16x8_t s16 = vmovl_s8(s8);
    *lo = vmovl_s16(vget_low_s16(s16));
    *hi = vmovl_high_s16(s16);
}

/* sum of c[j] * d[j] over 8 int16 lanes, as int32x4 lanes */
QA_INLINE int32x4_t qa_mul16(int16x8_t c, int16x8_t d) {
    return vmlal_high_s16(vmull_s16(vget_low_s16(c), vget_low_s16(d)), c, d);
}

/* ---- legacy 32-element blocks ------------------------------------------------ */

/* the 32 nibbles of a block as element order: *lo elements 0..15, *hi 16..31 */
QA_INLINE void qa_nib(const uint8_t *qs, uint8x16_t *lo, uint8x16_t *hi) {
    uint8x16_t q = vld1q_u8(qs);
    *lo = vandq_u8(q, vdupq_n_u8(0x0F));
    *hi = vshrq_n_u8(q, 4);
}

/* the fifth bits of a Q5 block: 0xFF where set, elements 0..15 and 16..31 */
QA_INLINE void qa_q5_bits(const uint8_t *qh, uint8x16_t *lo, uint8x16_t *hi) {
    static const uint8_t il[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    uint32_t h;
    memcpy(&h, qh, 4);
    uint8x16_t hv = vreinterpretq_u8_u32(vdupq_n_u32(h));
    uint8x16_t idx = vld1q_u8(il), bm = vld1q_u8(bits);
    *lo = vtstq_u8(vqtbl1q_u8(hv, idx), bm);
    *hi = vtstq_u8(vqtbl1q_u8(hv, vaddq_u8(idx, vdupq_n_u8(2))), bm);
}

/* Each block kernel: block i of the R rows w[0..R-1] (each row at its
 * block 0, as qa_f16x4), one activation block x; adds row r's block result
 * to lane r of acc. */

QA_INLINE float32x4_t blk_q8_0(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_0 *x, float32x4_t acc) {
    int8x16_t x0 = vld1q_s8(x->qs), x1 = vld1q_s8(x->qs + 16);
    int32x4_t p[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        const pk_block_q8_0 *b = (const pk_block_q8_0 *)w[k] + i;
        p[k] = qa_dot32(vld1q_s8(b->qs), x0, vld1q_s8(b->qs + 16), x1);
    }
    float32x4_t d = vmulq_n_f32(qa_f16x4(R, w, i * sizeof(pk_block_q8_0) + offsetof(pk_block_q8_0, d)),
                                qa_h2f(x->d));
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, p)), d);
}

QA_INLINE float32x4_t blk_q4_0(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_0 *x, float32x4_t acc) {
    int8x16_t x0 = vld1q_s8(x->qs), x1 = vld1q_s8(x->qs + 16);
    const int8x16_t m8 = vdupq_n_s8(8);
    int32x4_t p[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        uint8x16_t lo, hi;
        qa_nib(((const pk_block_q4_0 *)w[k])[i].qs, &lo, &hi);
        p[k] = qa_dot32s(vsubq_s8(vreinterpretq_s8_u8(lo), m8), x0,
                         vsubq_s8(vreinterpretq_s8_u8(hi), m8), x1);
    }
    float32x4_t d = vmulq_n_f32(qa_f16x4(R, w, i * sizeof(pk_block_q4_0) + offsetof(pk_block_q4_0, d)),
                                qa_h2f(x->d));
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, p)), d);
}

/* IQ4_NL and MXFP4: the 32 codes of R rows' blocks (nibbles as Q4_0, at
 * byte `at` of the rows w[k]) through the 16 int8 levels of tab, against x:
 * the rows' exact block sums in lanes 0..R-1. SMALL: levels <= 12 in
 * magnitude (MXFP4), so 4 products sum below 2^15 (qa_dot32s). */
QA_INLINE int32x4_t qa_tab_rows(const int R, const int SMALL, const void *const *w, size_t at, int8x16_t tab,
                                const pk_block_q8_0 *x) {
    int8x16_t x0 = vld1q_s8(x->qs), x1 = vld1q_s8(x->qs + 16);
    int32x4_t p[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        uint8x16_t lo, hi;
        qa_nib((const uint8_t *)w[k] + at, &lo, &hi);
        p[k] = SMALL ? qa_dot32s(vqtbl1q_s8(tab, lo), x0, vqtbl1q_s8(tab, hi), x1)
                     : qa_dot32(vqtbl1q_s8(tab, lo), x0, vqtbl1q_s8(tab, hi), x1);
    }
    return qa_rows(R, p);
}

QA_INLINE float32x4_t blk_iq4_nl(const int R, const void *const *w, int64_t i,
                                 const pk_block_q8_0 *x, float32x4_t acc) {
    float32x4_t d = vmulq_n_f32(qa_f16x4(R, w, i * sizeof(pk_block_iq4_nl) + offsetof(pk_block_iq4_nl, d)),
                                qa_h2f(x->d));
    int32x4_t s = qa_tab_rows(R, 0, w, i * sizeof(pk_block_iq4_nl) + offsetof(pk_block_iq4_nl, qs),
                              vld1q_s8(pk_iq4nl_values), x);
    return vfmaq_f32(acc, vcvtq_f32_s32(s), d);
}

/* the MXFP4 scales 2^(e - 128) of R rows' blocks in lanes 0..R-1 (from the
 * table of their float bits) */
QA_INLINE float32x4_t qa_e8m0x4(const int R, uint8_t e0, uint8_t e1, uint8_t e2, uint8_t e3) {
    uint32x4_t v = vld1q_dup_u32(&pk_e8m0_half_bits[e0]);
    if (R > 1) v = vld1q_lane_u32(&pk_e8m0_half_bits[e1], v, 1);
    if (R > 2) v = vld1q_lane_u32(&pk_e8m0_half_bits[e2], v, 2);
    if (R > 3) v = vld1q_lane_u32(&pk_e8m0_half_bits[e3], v, 3);
    return vreinterpretq_f32_u32(v);
}

QA_INLINE float32x4_t blk_mxfp4(const int R, const void *const *w, int64_t i,
                                const pk_block_q8_0 *x, float32x4_t acc) {
    const pk_block_mxfp4 *b0 = (const pk_block_mxfp4 *)w[0] + i, *b1 = (const pk_block_mxfp4 *)w[1] + i;
    const pk_block_mxfp4 *b2 = (const pk_block_mxfp4 *)w[2] + i, *b3 = (const pk_block_mxfp4 *)w[3] + i;
    float32x4_t d = vmulq_n_f32(qa_e8m0x4(R, b0->e, b1->e, b2->e, b3->e), qa_h2f(x->d));
    int32x4_t s = qa_tab_rows(R, 1, w, i * sizeof(pk_block_mxfp4) + offsetof(pk_block_mxfp4, qs),
                              vld1q_s8(pk_mxfp4_values), x);
    return vfmaq_f32(acc, vcvtq_f32_s32(s), d);
}

QA_INLINE float32x4_t blk_q5_0(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_0 *x, float32x4_t acc) {
    int8x16_t x0 = vld1q_s8(x->qs), x1 = vld1q_s8(x->qs + 16);
    const uint8x16_t m16 = vdupq_n_u8(16);
    int32x4_t p[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        uint8x16_t lo, hi, blo, bhi;
        const pk_block_q5_0 *b = (const pk_block_q5_0 *)w[k] + i;
        qa_nib(b->qs, &lo, &hi);
        qa_q5_bits(b->qh, &blo, &bhi);
        /* q - 16 = nibble - (fifth bit ? 0 : 16) */
        int8x16_t l = vreinterpretq_s8_u8(vsubq_u8(lo, vbicq_u8(m16, blo)));
        int8x16_t h = vreinterpretq_s8_u8(vsubq_u8(hi, vbicq_u8(m16, bhi)));
        p[k] = qa_dot32s(l, x0, h, x1);
    }
    float32x4_t d = vmulq_n_f32(qa_f16x4(R, w, i * sizeof(pk_block_q5_0) + offsetof(pk_block_q5_0, d)),
                                qa_h2f(x->d));
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, p)), d);
}

QA_INLINE float32x4_t blk_q4_1(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_1 *x, float32x4_t acc) {
    int8x16_t x0 = vld1q_s8(x->qs), x1 = vld1q_s8(x->qs + 16);
    int32x4_t p[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        uint8x16_t lo, hi;
        qa_nib(((const pk_block_q4_1 *)w[k])[i].qs, &lo, &hi);
        p[k] = qa_dot32s(vreinterpretq_s8_u8(lo), x0, vreinterpretq_s8_u8(hi), x1);
    }
    float32x4_t d, m;
    qa_f16x4x2(R, w, i * sizeof(pk_block_q4_1) + offsetof(pk_block_q4_1, d), &d, &m);
    acc = vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, p)), vmulq_n_f32(d, qa_h2f(x->d)));
    return vfmaq_n_f32(acc, m, qa_h2f(x->s));
}

QA_INLINE float32x4_t blk_q5_1(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_1 *x, float32x4_t acc) {
    int8x16_t x0 = vld1q_s8(x->qs), x1 = vld1q_s8(x->qs + 16);
    const uint8x16_t m16 = vdupq_n_u8(16);
    int32x4_t p[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        uint8x16_t lo, hi, blo, bhi;
        const pk_block_q5_1 *b = (const pk_block_q5_1 *)w[k] + i;
        qa_nib(b->qs, &lo, &hi);
        qa_q5_bits(b->qh, &blo, &bhi);
        int8x16_t l = vreinterpretq_s8_u8(vorrq_u8(lo, vandq_u8(blo, m16)));
        int8x16_t h = vreinterpretq_s8_u8(vorrq_u8(hi, vandq_u8(bhi, m16)));
        p[k] = qa_dot32s(l, x0, h, x1);
    }
    float32x4_t d, m;
    qa_f16x4x2(R, w, i * sizeof(pk_block_q5_1) + offsetof(pk_block_q5_1, d), &d, &m);
    acc = vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, p)), vmulq_n_f32(d, qa_h2f(x->d)));
    return vfmaq_n_f32(acc, m, qa_h2f(x->s));
}

/* ---- K-quants x Q8_K: one row's super-block as int32 vectors ----------------- */

/* 16 sub-block dots e[0..15] (int32x4 each) times 16 int32 scales sc[0..3]
 * (4 per vector, sub-block order): lanes summing to sum sc[s] * dot[s] */
QA_INLINE int32x4_t qa_scale16(const int32x4_t *e, const int32x4_t *sc) {
    int32x4_t a = vmulq_s32(qa_red4(e[0], e[1], e[2], e[3]), sc[0]);
    a = vmlaq_s32(a, qa_red4(e[4], e[5], e[6], e[7]), sc[1]);
    a = vmlaq_s32(a, qa_red4(e[8], e[9], e[10], e[11]), sc[2]);
    return vmlaq_s32(a, qa_red4(e[12], e[13], e[14], e[15]), sc[3]);
}

/* the 16 int8 scales of v as 4 int32x4 (sub-block order); *s16 the int16 */
QA_INLINE void qa_s8x16_s32(int8x16_t v, int32x4_t *sc, int16x8_t *s16) {
    s16[0] = vmovl_s8(vget_low_s8(v));
    s16[1] = vmovl_high_s8(v);
    sc[0] = vmovl_s16(vget_low_s16(s16[0])); sc[1] = vmovl_high_s16(s16[0]);
    sc[2] = vmovl_s16(vget_low_s16(s16[1])); sc[3] = vmovl_high_s16(s16[1]);
}

/* byte `lane` of v in all 16 lanes (lane a constant once inlined and unrolled) */
QA_INLINE uint8x16_t qa_bcast_u8(uint8x16_t v, const int lane) {
    switch (lane) {
    case 0: return vdupq_laneq_u8(v, 0);   case 1: return vdupq_laneq_u8(v, 1);
    case 2: return vdupq_laneq_u8(v, 2);   case 3: return vdupq_laneq_u8(v, 3);
    case 4: return vdupq_laneq_u8(v, 4);   case 5: return vdupq_laneq_u8(v, 5);
    case 6: return vdupq_laneq_u8(v, 6);   case 7: return vdupq_laneq_u8(v, 7);
    case 8: return vdupq_laneq_u8(v, 8);   case 9: return vdupq_laneq_u8(v, 9);
    case 10: return vdupq_laneq_u8(v, 10); case 11: return vdupq_laneq_u8(v, 11);
    case 12: return vdupq_laneq_u8(v, 12); case 13: return vdupq_laneq_u8(v, 13);
    case 14: return vdupq_laneq_u8(v, 14); default: return vdupq_laneq_u8(v, 15);
    }
}

/* Q2_K: level (<= 3) times its 4-bit sub-block scale fits a byte (<= 45), so
 * the scaled levels go straight into one accumulator: isum lanes sum to
 * sum_s sc[s] * (q . x)[s], msum to sum_s m[s] * bsums[s] */
QA_INLINE void row_q2_K(const pk_block_q2_K *w, const pk_block_q8_K *x, const int16x8_t *bs,
                        int32x4_t *isum, int32x4_t *msum) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    uint8x16_t s8 = vld1q_u8(w->scales), sc = vandq_u8(s8, vdupq_n_u8(0x0F));
    int32x4_t a = vdupq_n_s32(0);
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        uint8x16_t q0 = vld1q_u8(w->qs + 32 * h), q1 = vld1q_u8(w->qs + 32 * h + 16);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;
            const int8_t *xc = x->qs + 32 * c;
            uint8x16_t u0 = vmulq_u8(vandq_u8(q0, m3), qa_bcast_u8(sc, 2 * c));
            uint8x16_t u1 = vmulq_u8(vandq_u8(q1, m3), qa_bcast_u8(sc, 2 * c + 1));
            a = qa_dot32a(a, vreinterpretq_s8_u8(u0), vld1q_s8(xc), vreinterpretq_s8_u8(u1), vld1q_s8(xc + 16));
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
        }
    }
    *isum = a;
    uint8x16_t mn = vshrq_n_u8(s8, 4);
    int16x8_t m0 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn)));
    int16x8_t m1 = vreinterpretq_s16_u16(vmovl_high_u8(mn));
    *msum = vaddq_s32(qa_mul16(m0, bs[0]), qa_mul16(m1, bs[1]));
}

/* the 16 signed 6-bit scales of a Q3_K block (as pk_q3_K_scales) */
QA_INLINE int8x16_t qa_q3_scales(const uint8_t *s) {
    uint64_t a01;
    uint32_t a2;
    memcpy(&a01, s, 8);
    memcpy(&a2, s + 8, 4);
    static const int32_t sl[4] = {0, 0, -4, -4}, sh[4] = {0, -2, -4, -6};
    uint32x4_t lo = vreinterpretq_u32_u64(vdupq_n_u64(a01));          /* a0 a1 a0 a1 */
    lo = vandq_u32(vshlq_u32(lo, vld1q_s32(sl)), vdupq_n_u32(0x0f0f0f0fu));
    uint32x4_t hi = vandq_u32(vshlq_u32(vdupq_n_u32(a2), vld1q_s32(sh)), vdupq_n_u32(0x03030303u));
    uint8x16_t v = vorrq_u8(vreinterpretq_u8_u32(lo), vshlq_n_u8(vreinterpretq_u8_u32(hi), 4));
    return vsubq_s8(vreinterpretq_s8_u8(v), vdupq_n_s8(32));
}

/* Q3_K: levels u = q + 4 in [0, 7] (unsigned), the -4 taken out with bsums */
QA_INLINE int32x4_t row_q3_K(const pk_block_q3_K *w, const pk_block_q8_K *x, const int16x8_t *bs) {
    const uint8x16_t one = vdupq_n_u8(1);
    uint8x16_t hm0 = vld1q_u8(w->hmask), hm1 = vld1q_u8(w->hmask + 16);
    int32x4_t e[16];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        uint8x16_t q0 = vld1q_u8(w->qs + 32 * h), q1 = vld1q_u8(w->qs + 32 * h + 16);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;
            const int8_t *xc = x->qs + 32 * c;
            uint8x16_t u0 = vsliq_n_u8(q0, vandq_u8(hm0, one), 2);   /* hbit << 2 | (q & 3) */
            uint8x16_t u1 = vsliq_n_u8(q1, vandq_u8(hm1, one), 2);
            e[2 * c] = qa_dot16(vreinterpretq_s8_u8(u0), vld1q_s8(xc));
            e[2 * c + 1] = qa_dot16(vreinterpretq_s8_u8(u1), vld1q_s8(xc + 16));
            q0 = vshrq_n_u8(q0, 2);
            q1 = vshrq_n_u8(q1, 2);
            hm0 = vshrq_n_u8(hm0, 1);
            hm1 = vshrq_n_u8(hm1, 1);
        }
    }
    int32x4_t sc[4];
    int16x8_t s16[2];
    qa_s8x16_s32(qa_q3_scales(w->scales), sc, s16);
    int32x4_t corr = vaddq_s32(qa_mul16(s16[0], bs[0]), qa_mul16(s16[1], bs[1]));
    return vsubq_s32(qa_scale16(e, sc), vshlq_n_s32(corr, 2));
}

/* Q6_K: levels in [0, 63] (unsigned), the -32 taken out with bsums */
QA_INLINE int32x4_t row_q6_K(const pk_block_q6_K *w, const pk_block_q8_K *x, const int16x8_t *bs) {
    const uint8x16_t m3 = vdupq_n_u8(3), m30 = vdupq_n_u8(0x30);
    int32x4_t e[16];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = w->ql + 64 * h;
        uint8x16_t qh[2] = {vld1q_u8(w->qh + 32 * h), vld1q_u8(w->qh + 32 * h + 16)};
#pragma GCC unroll 2
        for (int v = 0; v < 2; v++) {              /* l in [16v, 16v + 16) */
            uint8x16_t l0 = vld1q_u8(ql + 16 * v), l1 = vld1q_u8(ql + 32 + 16 * v);
            uint8x16_t t = vshrq_n_u8(qh[v], 2);
            uint8x16_t u0 = vsliq_n_u8(l0, vandq_u8(qh[v], m3), 4);  /* k = 0 */
            uint8x16_t u1 = vsliq_n_u8(l1, vandq_u8(t, m3), 4);      /* k = 1 */
            uint8x16_t u2 = vsriq_n_u8(vandq_u8(qh[v], m30), l0, 4); /* k = 2 */
            uint8x16_t u3 = vsriq_n_u8(vandq_u8(t, m30), l1, 4);     /* k = 3 */
            const int8_t *xh = x->qs + 128 * h + 16 * v;
            /* chunk k = element 128h + 32k + l: sub-block 8h + 2k + v */
            e[8 * h + v] = qa_dot16(vreinterpretq_s8_u8(u0), vld1q_s8(xh));
            e[8 * h + 2 + v] = qa_dot16(vreinterpretq_s8_u8(u1), vld1q_s8(xh + 32));
            e[8 * h + 4 + v] = qa_dot16(vreinterpretq_s8_u8(u2), vld1q_s8(xh + 64));
            e[8 * h + 6 + v] = qa_dot16(vreinterpretq_s8_u8(u3), vld1q_s8(xh + 96));
        }
    }
    int32x4_t sc[4];
    int16x8_t s16[2];
    qa_s8x16_s32(vld1q_s8(w->scales), sc, s16);
    int32x4_t corr = vaddq_s32(qa_mul16(s16[0], bs[0]), qa_mul16(s16[1], bs[1]));
    return vsubq_s32(qa_scale16(e, sc), vshlq_n_s32(corr, 5));
}

/* the 8 six-bit scales and mins of a Q4_K / Q5_K block (pk_get_scales_mins_k4) */
QA_INLINE void qa_k4_scales(const uint8_t *q, uint8x8_t *sc, uint8x8_t *m) {
    uint64_t a01;
    uint32_t a2;
    memcpy(&a01, q, 8);
    memcpy(&a2, q + 8, 4);
    static const int8_t sh[8] = {0, 0, 0, 0, -4, -4, -4, -4};
    uint8x8_t A = vcreate_u8(a01);                                   /* u0 | u1 */
    uint8x8_t low = vand_u8(A, vdup_n_u8(63));                       /* sc0-3 | m0-3 */
    uint8x8_t hn = vshl_u8(vreinterpret_u8_u32(vdup_n_u32(a2)), vld1_s8(sh));
    uint8x8_t high = vsli_n_u8(hn, vshr_n_u8(A, 6), 4);              /* sc4-7 | m4-7 */
    *sc = vreinterpret_u8_u32(vzip1_u32(vreinterpret_u32_u8(low), vreinterpret_u32_u8(high)));
    *m = vreinterpret_u8_u32(vzip2_u32(vreinterpret_u32_u8(low), vreinterpret_u32_u8(high)));
}

/* 8 sub-block dots e[0..7] x the 8 scales sc: lanes summing to the isum */
QA_INLINE int32x4_t qa_scale8(const int32x4_t *e, uint8x8_t sc) {
    uint16x8_t s16 = vmovl_u8(sc);
    int32x4_t lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s16)));
    int32x4_t hi = vreinterpretq_s32_u32(vmovl_high_u16(s16));
    return vmlaq_s32(vmulq_s32(qa_red4(e[0], e[1], e[2], e[3]), lo), qa_red4(e[4], e[5], e[6], e[7]), hi);
}

/* b[0], b[1]: the 8 sub-block sums as lanes; times the 8 scales sc */
QA_INLINE int32x4_t qa_scale8b(const int32x4_t *b, uint8x8_t sc) {
    uint16x8_t s16 = vmovl_u8(sc);
    int32x4_t lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(s16)));
    int32x4_t hi = vreinterpretq_s32_u32(vmovl_high_u16(s16));
    return vmlaq_s32(vmulq_s32(b[0], lo), b[1], hi);
}

/* sum_j m[j] * (bsums[2j] + bsums[2j + 1]); bp = the pair sums */
QA_INLINE int32x4_t qa_k4_mins(uint8x8_t m, int16x8_t bp) {
    return qa_mul16(vreinterpretq_s16_u16(vmovl_u8(m)), bp);
}

QA_INLINE void row_q5_K(const pk_block_q5_K *w, const pk_block_q8_K *x, int16x8_t bp,
                        int32x4_t *isum, int32x4_t *msum) {
    const uint8x16_t one = vdupq_n_u8(1), two = vdupq_n_u8(2);
    uint8x16_t h0 = vld1q_u8(w->qh), h1 = vld1q_u8(w->qh + 16);
    int32x4_t e[8];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        uint8x16_t q0 = vld1q_u8(w->qs + 32 * j), q1 = vld1q_u8(w->qs + 32 * j + 16);
        const int8_t *xj = x->qs + 64 * j;
        /* low nibble | bit 2j << 4;  high nibble | bit 2j+1 << 4 */
        uint8x16_t l0 = vsliq_n_u8(q0, vandq_u8(h0, one), 4);
        uint8x16_t l1 = vsliq_n_u8(q1, vandq_u8(h1, one), 4);
        uint8x16_t u0 = vsriq_n_u8(vshlq_n_u8(vandq_u8(h0, two), 3), q0, 4);
        uint8x16_t u1 = vsriq_n_u8(vshlq_n_u8(vandq_u8(h1, two), 3), q1, 4);
        e[2 * j] = qa_dot32s(vreinterpretq_s8_u8(l0), vld1q_s8(xj),
                             vreinterpretq_s8_u8(l1), vld1q_s8(xj + 16));
        e[2 * j + 1] = qa_dot32s(vreinterpretq_s8_u8(u0), vld1q_s8(xj + 32),
                                 vreinterpretq_s8_u8(u1), vld1q_s8(xj + 48));
        h0 = vshrq_n_u8(h0, 2);
        h1 = vshrq_n_u8(h1, 2);
    }
    uint8x8_t sc, m;
    qa_k4_scales(w->scales, &sc, &m);
    *isum = qa_scale8(e, sc);
    *msum = qa_k4_mins(m, bp);
}

/* ---- K-quant block kernels over R rows -------------------------------------- */

QA_INLINE float32x4_t blk_q2_K(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_K *x, float32x4_t acc) {
    const int16x8_t bs[2] = {vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8)};
    int32x4_t is[4], ms[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) row_q2_K((const pk_block_q2_K *)w[k] + i, x, bs, &is[k], &ms[k]);
    float32x4_t d, m;
    qa_f16x4x2(R, w, i * sizeof(pk_block_q2_K) + offsetof(pk_block_q2_K, d), &d, &m);
    acc = vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, x->d));
    return vfmsq_f32(acc, vcvtq_f32_s32(qa_rows(R, ms)), vmulq_n_f32(m, x->d));
}

QA_INLINE float32x4_t blk_q3_K(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_K *x, float32x4_t acc) {
    const int16x8_t bs[2] = {vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8)};
    int32x4_t is[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) is[k] = row_q3_K((const pk_block_q3_K *)w[k] + i, x, bs);
    float32x4_t d = qa_f16x4(R, w, i * sizeof(pk_block_q3_K) + offsetof(pk_block_q3_K, d));
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, x->d));
}

QA_INLINE float32x4_t blk_q6_K(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_K *x, float32x4_t acc) {
    const int16x8_t bs[2] = {vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8)};
    int32x4_t is[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) is[k] = row_q6_K((const pk_block_q6_K *)w[k] + i, x, bs);
    float32x4_t d = qa_f16x4(R, w, i * sizeof(pk_block_q6_K) + offsetof(pk_block_q6_K, d));
    return vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, x->d));
}

/* Q4_K chunk j (64 elements: sub-blocks 2j, 2j + 1) of one row against the
 * activation vectors xv[0..3]: lanes 0-1 sum sub-block 2j, lanes 2-3 2j + 1 */
QA_INLINE int32x4_t qa_q4k_chunk(const uint8_t *qs, const int8x16_t *xv) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    uint8x16_t q0 = vld1q_u8(qs), q1 = vld1q_u8(qs + 16);
    int32x4_t lo = qa_dot32s(vreinterpretq_s8_u8(vandq_u8(q0, m4)), xv[0],
                             vreinterpretq_s8_u8(vandq_u8(q1, m4)), xv[1]);
    int32x4_t hi = qa_dot32s(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), xv[2],
                             vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), xv[3]);
    return vpaddq_s32(lo, hi);
}

/* Q4_K: 128 activations (8 vectors) at a time, shared by the R rows */
QA_INLINE float32x4_t blk_q4_K(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_K *x, float32x4_t acc) {
    int32x4_t b[4][2], is[4], ms[4];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        int8x16_t xv[8];
        for (int v = 0; v < 8; v++) xv[v] = vld1q_s8(x->qs + 128 * h + 16 * v);
#pragma GCC unroll 4
        for (int k = 0; k < R; k++) {
            const uint8_t *qs = ((const pk_block_q4_K *)w[k])[i].qs + 64 * h;
            /* lanes: the sums of sub-blocks 4h .. 4h + 3 */
            b[k][h] = vpaddq_s32(qa_q4k_chunk(qs, xv), qa_q4k_chunk(qs + 32, xv + 4));
        }
    }
    int16x8_t bp = vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8));
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) {
        uint8x8_t sc, m;
        qa_k4_scales(((const pk_block_q4_K *)w[k])[i].scales, &sc, &m);
        is[k] = qa_scale8b(b[k], sc);
        ms[k] = qa_k4_mins(m, bp);
    }
    float32x4_t d, m;
    qa_f16x4x2(R, w, i * sizeof(pk_block_q4_K) + offsetof(pk_block_q4_K, d), &d, &m);
    acc = vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, x->d));
    return vfmsq_f32(acc, vcvtq_f32_s32(qa_rows(R, ms)), vmulq_n_f32(m, x->d));
}

QA_INLINE float32x4_t blk_q5_K(const int R, const void *const *w, int64_t i,
                               const pk_block_q8_K *x, float32x4_t acc) {
    int16x8_t bp = vpaddq_s16(vld1q_s16(x->bsums), vld1q_s16(x->bsums + 8));
    int32x4_t is[4], ms[4];
#pragma GCC unroll 4
    for (int k = 0; k < R; k++) row_q5_K((const pk_block_q5_K *)w[k] + i, x, bp, &is[k], &ms[k]);
    float32x4_t d, m;
    qa_f16x4x2(R, w, i * sizeof(pk_block_q5_K) + offsetof(pk_block_q5_K, d), &d, &m);
    acc = vfmaq_f32(acc, vcvtq_f32_s32(qa_rows(R, is)), vmulq_n_f32(d, x->d));
    return vfmsq_f32(acc, vcvtq_f32_s32(qa_rows(R, ms)), vmulq_n_f32(m, x->d));
}

#include "kernels/arm/quant_ops_iq.h"   /* IQ4_XS, IQ2, IQ1, the lattice i-quants */

/* ---- vec_dot and the 4-row gemv driver, over the block kernels -------------- */

/* the weight types of the block kernels, as compile-time kinds */
enum { QA_Q8_0, QA_Q4_0, QA_Q4_1, QA_Q5_0, QA_Q5_1, QA_IQ4_NL, QA_MXFP4,
       QA_Q2_K, QA_Q3_K, QA_Q4_K, QA_Q5_K, QA_Q6_K, QA_IQ4_XS, QA_IQ2_XXS, QA_IQ2_XS, QA_IQ1_S, QA_IQ1_M,
       QA_IQ3_XXS, QA_IQ3_S, QA_IQ2_S };

/* a lattice kind's IQA_* (kernels/arm/iq_lattice.h), -1 for the others */
QA_INLINE int qa_lattice(const int T) {
    return T == QA_IQ3_XXS ? IQA_IQ3_XXS : T == QA_IQ3_S ? IQA_IQ3_S : T == QA_IQ2_S ? IQA_IQ2_S : -1;
}

/* bytes of a weight block of kind T */
QA_INLINE size_t qa_wsize(const int T) {
    switch (T) {
    case QA_Q8_0: return sizeof(pk_block_q8_0);
    case QA_Q4_0: return sizeof(pk_block_q4_0);
    case QA_Q4_1: return sizeof(pk_block_q4_1);
    case QA_Q5_0: return sizeof(pk_block_q5_0);
    case QA_Q5_1: return sizeof(pk_block_q5_1);
    case QA_IQ4_NL: return sizeof(pk_block_iq4_nl);
    case QA_MXFP4: return sizeof(pk_block_mxfp4);
    case QA_Q2_K: return sizeof(pk_block_q2_K);
    case QA_Q3_K: return sizeof(pk_block_q3_K);
    case QA_Q4_K: return sizeof(pk_block_q4_K);
    case QA_Q5_K: return sizeof(pk_block_q5_K);
    case QA_Q6_K: return sizeof(pk_block_q6_K);
    case QA_IQ2_XXS: return sizeof(pk_block_iq2_xxs);
    case QA_IQ2_XS: return sizeof(pk_block_iq2_xs);
    case QA_IQ1_S: return sizeof(pk_block_iq1_s);
    case QA_IQ1_M: return sizeof(pk_block_iq1_m);
    case QA_IQ3_XXS: return sizeof(pk_block_iq3_xxs);
    case QA_IQ3_S: return sizeof(pk_block_iq3_s);
    case QA_IQ2_S: return sizeof(pk_block_iq2_s);
    default: return sizeof(pk_block_iq4_xs);
    }
}

/* bytes of its activation block: Q8_1 (Q4_1, Q5_1), Q8_K (the K-quants,
 * IQ4_XS, IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, the lattice types) or Q8_0 */
QA_INLINE size_t qa_xsize(const int T) {
    return T == QA_Q4_1 || T == QA_Q5_1 ? sizeof(pk_block_q8_1)
         : T >= QA_Q2_K ? sizeof(pk_block_q8_K) : sizeof(pk_block_q8_0);
}

/* elements per block */
QA_INLINE int64_t qa_qk(const int T) {
    return T >= QA_Q2_K ? PK_QK_K : PK_QK8_0;
}

/* blocks per step of the driver, sharing one set of prefetches (steps of
 * at least 34 bytes) */
QA_INLINE int qa_step(const int T) {
    switch (T) {
    case QA_Q8_0: return 2;
    case QA_Q4_1: case QA_Q5_0: case QA_Q5_1: return 3;
    case QA_Q4_0: case QA_IQ4_NL: case QA_MXFP4: return 4;
    default: return 1;
    }
}

/* the block kernel of kind T (grid: the lattice kinds' grid, else unused) */
QA_INLINE float32x4_t qa_blk(const int T, const int R, const void *const *w, int64_t i, const void *x,
                             const void *grid, float32x4_t acc) {
    switch (T) {
    case QA_Q8_0: return blk_q8_0(R, w, i, x, acc);
    case QA_Q4_0: return blk_q4_0(R, w, i, x, acc);
    case QA_Q4_1: return blk_q4_1(R, w, i, x, acc);
    case QA_Q5_0: return blk_q5_0(R, w, i, x, acc);
    case QA_Q5_1: return blk_q5_1(R, w, i, x, acc);
    case QA_IQ4_NL: return blk_iq4_nl(R, w, i, x, acc);
    case QA_MXFP4: return blk_mxfp4(R, w, i, x, acc);
    case QA_Q2_K: return blk_q2_K(R, w, i, x, acc);
    case QA_Q3_K: return blk_q3_K(R, w, i, x, acc);
    case QA_Q4_K: return blk_q4_K(R, w, i, x, acc);
    case QA_Q5_K: return blk_q5_K(R, w, i, x, acc);
    case QA_Q6_K: return blk_q6_K(R, w, i, x, acc);
    case QA_IQ2_XXS: return blk_iq2(0, R, w, i, x, acc);
    case QA_IQ2_XS: return blk_iq2(1, R, w, i, x, acc);
    case QA_IQ1_S: return blk_iq1_s(R, w, i, x, acc);
    case QA_IQ1_M: return blk_iq1_m(R, w, i, x, acc);
    case QA_IQ3_XXS: case QA_IQ3_S: case QA_IQ2_S: return blk_lattice(qa_lattice(T), R, w, i, x, grid, acc);
    default: return blk_iq4_xs(R, w, i, x, acc);
    }
}

/* R rows of kind T (nb blocks each) starting at w0, rows rb bytes apart,
 * against the activation blocks vx, into y[0..R-1]; qa_step(T) blocks per
 * step, prefetching each row QA_PF_DIST bytes ahead. */
QA_INLINE void qa_rows_dot(const int T, const int R, int64_t nb, float *y, const char *w0, size_t rb,
                           const void *vx) {
    const int U = qa_step(T);
    const size_t ws = qa_wsize(T), xs = qa_xsize(T);
    const char *x = vx;
    const void *grid = qa_lattice(T) >= 0 ? iqa_grid(qa_lattice(T)) : NULL;
    const void *w[4];
    for (int k = 0; k < 4; k++) w[k] = w0 + (size_t)(k < R ? k : 0) * rb;
    float32x4_t acc = vdupq_n_f32(0);
    int64_t i = 0;
    const size_t npf = U * ws < 128 ? 1 : U * ws / 64;   /* prefetches per row and step */
    for (; i + (U - 1) < nb; i += U) {   /* U blocks left */
        for (int k = 0; k < R; k++)
            for (size_t j = 0; j < npf; j++) __builtin_prefetch((const char *)w[k] + QA_PF_DIST + 64 * j);
        for (int u = 0; u < U; u++) acc = qa_blk(T, R, w, u, x + u * xs, grid, acc);
        for (int k = 0; k < 4; k++) w[k] = (const char *)w[k] + U * ws;
        x += U * xs;
    }
    for (; i < nb; i++) {
        acc = qa_blk(T, R, w, 0, x, grid, acc);
        for (int k = 0; k < 4; k++) w[k] = (const char *)w[k] + ws;
        x += xs;
    }
    y[0] = vgetq_lane_f32(acc, 0);
    if (R > 1) y[1] = vgetq_lane_f32(acc, 1);
    if (R > 2) y[2] = vgetq_lane_f32(acc, 2);
    if (R > 3) y[3] = vgetq_lane_f32(acc, 3);
}

QA_INLINE void qa_vec_dot(const int T, int64_t n, float *s, const void *w, const void *x) {
    qa_rows_dot(T, 1, n / qa_qk(T), s, w, 0, x);
}

/* 4 rows at a time, then the last 1 to 3 together */
QA_INLINE void qa_gemv(const int T, int64_t n, int64_t nrows, float *y, const void *vw, size_t rb,
                       const void *x) {
    const char *w = vw;
    int64_t nb = n / qa_qk(T), r = 0;
    for (; r + 4 <= nrows; r += 4) qa_rows_dot(T, 4, nb, y + r, w + (size_t)r * rb, rb, x);
    switch (nrows - r) {
    case 3: qa_rows_dot(T, 3, nb, y + r, w + (size_t)r * rb, rb, x); break;
    case 2: qa_rows_dot(T, 2, nb, y + r, w + (size_t)r * rb, rb, x); break;
    case 1: qa_rows_dot(T, 1, nb, y + r, w + (size_t)r * rb, rb, x); break;
    default: break;
    }
}

/* the entries of weight type t (kind T): vec_dot_t, gemv_t */
#define QA_ENTRY(t, T)                                                                               \
static void vec_dot_##t(int64_t n, float *s, const void *w, const void *x) { qa_vec_dot(T, n, s, w, x); } \
static void gemv_##t(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) {     \
    qa_gemv(T, n, nrows, y, w, rb, x);                                                               \
}
QA_ENTRY(q8_0, QA_Q8_0)
QA_ENTRY(q4_0, QA_Q4_0)
QA_ENTRY(q4_1, QA_Q4_1)
QA_ENTRY(q5_0, QA_Q5_0)
QA_ENTRY(q5_1, QA_Q5_1)
QA_ENTRY(iq4_nl, QA_IQ4_NL)
QA_ENTRY(mxfp4, QA_MXFP4)
QA_ENTRY(q2_K, QA_Q2_K)
QA_ENTRY(q3_K, QA_Q3_K)
QA_ENTRY(q4_K, QA_Q4_K)
QA_ENTRY(q5_K, QA_Q5_K)
QA_ENTRY(q6_K, QA_Q6_K)
QA_ENTRY(iq4_xs, QA_IQ4_XS)
QA_ENTRY(iq2_xxs, QA_IQ2_XXS)
QA_ENTRY(iq2_xs, QA_IQ2_XS)
QA_ENTRY(iq1_s, QA_IQ1_S)
QA_ENTRY(iq1_m, QA_IQ1_M)
QA_ENTRY(iq3_xxs, QA_IQ3_XXS)
QA_ENTRY(iq3_s, QA_IQ3_S)
QA_ENTRY(iq2_s, QA_IQ2_S)
#undef QA_ENTRY

/* ---- activation quantizers (bit-exact with the reference) ---------------------- */

/* One 32-value block as Q8_0 / Q8_1 define it: d = amax / 127, q =
 * roundf(x * (1 / d)) (fcvtas: ties away from zero), saturated to int8. */
QA_INLINE void qa_q8_block32(const float *p, float *d, int8x16_t *q0, int8x16_t *q1) {
    float32x4_t v[8];
    for (int j = 0; j < 8; j++) v[j] = vld1q_f32(p + 4 * j);
    float32x4_t m = vabsq_f32(v[0]);
    for (int j = 1; j < 8; j++) m = vmaxq_f32(m, vabsq_f32(v[j]));
    *d = vmaxvq_f32(m) / 127.0f;
    float id = *d != 0.0f ? 1.0f / *d : 0.0f;
    int16x8_t h[4];
    for (int j = 0; j < 4; j++)
        h[j] = vcombine_s16(vqmovn_s32(vcvtaq_s32_f32(vmulq_n_f32(v[2 * j], id))),
                            vqmovn_s32(vcvtaq_s32_f32(vmulq_n_f32(v[2 * j + 1], id))));
    *q0 = vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1]));
    *q1 = vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3]));
}

static void quantize_q8_0(const float *x, void *vy, int64_t n) {
    pk_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / PK_QK8_0; b++) {
        float d;
        int8x16_t q0, q1;
        qa_q8_block32(x + b * PK_QK8_0, &d, &q0, &q1);
        y[b].d = pk_fp32_to_fp16(d);
        vst1q_s8(y[b].qs, q0);
        vst1q_s8(y[b].qs + 16, q1);
    }
}

static void quantize_q8_1(const float *x, void *vy, int64_t n) {
    pk_block_q8_1 *y = vy;
    for (int64_t b = 0; b < n / PK_QK8_1; b++) {
        float d;
        int8x16_t q0, q1;
        qa_q8_block32(x + b * PK_QK8_1, &d, &q0, &q1);
        vst1q_s8(y[b].qs, q0);
        vst1q_s8(y[b].qs + 16, q1);
        int sum = vaddlvq_s8(q0) + vaddlvq_s8(q1);
        y[b].d = pk_fp32_to_fp16(d);
        y[b].s = pk_fp32_to_fp16((float)sum * d);
    }
}

/* Q8_K: the first element of largest magnitude maps to -127; q =
 * nearest_int(iscale * x) (fcvtns: ties to even), saturated; bsums by
 * pairwise adds. */
static void quantize_q8_K(const float *xf, void *vy, int64_t n) {
    pk_block_q8_K *y = vy;
    for (int64_t b = 0; b < n / PK_QK_K; b++) {
        const float *x = xf + b * PK_QK_K;
        float32x4_t m = vdupq_n_f32(0);
        for (int j = 0; j < PK_QK_K; j += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + j)));
        float amax = vmaxvq_f32(m);
        if (!(amax > 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        float max = 0.0f;
        float32x4_t va = vdupq_n_f32(amax);
        for (int j = 0; j < PK_QK_K; j += 4) {
            if (vmaxvq_u32(vceqq_f32(vabsq_f32(vld1q_f32(x + j)), va))) {
                int l = 0;
                while (fabsf(x[j + l]) != amax) l++;
                max = x[j + l];
                break;
            }
        }
        float iscale = -127.0f / max;
        int16x8_t s16[16];
        for (int j = 0; j < PK_QK_K; j += 16) {
            int16x8_t h0 = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j), iscale))),
                                        vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4), iscale))));
            int16x8_t h1 = vcombine_s16(vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 8), iscale))),
                                        vqmovn_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 12), iscale))));
            int8x16_t q = vcombine_s8(vqmovn_s16(h0), vqmovn_s16(h1));
            vst1q_s8(y[b].qs + j, q);
            s16[j / 16] = vpaddlq_s8(q);
        }
        for (int g = 0; g < 16; g += 8) {
            int16x8_t a = vpaddq_s16(vpaddq_s16(s16[g], s16[g + 1]), vpaddq_s16(s16[g + 2], s16[g + 3]));
            int16x8_t c = vpaddq_s16(vpaddq_s16(s16[g + 4], s16[g + 5]), vpaddq_s16(s16[g + 6], s16[g + 7]));
            vst1q_s16(y[b].bsums + g, vpaddq_s16(a, c));
        }
        y[b].d = 1 / iscale;
    }
}

/* ---- the table, for the including file ------------------------------------------ */

#define QA_TABLE(NAME, ISA)                                                        \
const pk_kernels NAME = {                                                          \
    .isa = ISA,                                                                    \
    .sgemm = sgemm, .exp_sub = exp_sub, .silu_mul = silu_mul, .softcap = softcap,  \
    .vec_dot = {                                                                   \
        [PK_TYPE_F32] = vec_dot_f32, [PK_TYPE_F16] = vec_dot_f16,                  \
        [PK_TYPE_BF16] = vec_dot_bf16, [PK_TYPE_Q8_0] = vec_dot_q8_0,              \
        [PK_TYPE_Q4_0] = vec_dot_q4_0, [PK_TYPE_Q4_1] = vec_dot_q4_1,              \
        [PK_TYPE_Q5_0] = vec_dot_q5_0, [PK_TYPE_Q5_1] = vec_dot_q5_1,              \
        [PK_TYPE_IQ4_NL] = vec_dot_iq4_nl, [PK_TYPE_Q2_K] = vec_dot_q2_K,          \
        [PK_TYPE_Q3_K] = vec_dot_q3_K, [PK_TYPE_Q4_K] = vec_dot_q4_K,              \
        [PK_TYPE_Q5_K] = vec_dot_q5_K, [PK_TYPE_Q6_K] = vec_dot_q6_K,              \
        [PK_TYPE_IQ4_XS] = vec_dot_iq4_xs, [PK_TYPE_MXFP4] = vec_dot_mxfp4,        \
        [PK_TYPE_IQ2_XXS] = vec_dot_iq2_xxs, [PK_TYPE_IQ2_XS] = vec_dot_iq2_xs,    \
        [PK_TYPE_IQ1_S] = vec_dot_iq1_s, [PK_TYPE_IQ1_M] = vec_dot_iq1_m,          \
        [PK_TYPE_IQ3_XXS] = vec_dot_iq3_xxs, [PK_TYPE_IQ3_S] = vec_dot_iq3_s,      \
        [PK_TYPE_IQ2_S] = vec_dot_iq2_s,                                           \
    },                                                                             \
    .gemv = {                                                                      \
        [PK_TYPE_F32] = gemv_f32, [PK_TYPE_F16] = gemv_f16,                        \
        [PK_TYPE_BF16] = gemv_bf16, [PK_TYPE_Q8_0] = gemv_q8_0,                    \
        [PK_TYPE_Q4_0] = gemv_q4_0, [PK_TYPE_Q4_1] = gemv_q4_1,                    \
        [PK_TYPE_Q5_0] = gemv_q5_0, [PK_TYPE_Q5_1] = gemv_q5_1,                    \
        [PK_TYPE_IQ4_NL] = gemv_iq4_nl, [PK_TYPE_Q2_K] = gemv_q2_K,                \
        [PK_TYPE_Q3_K] = gemv_q3_K, [PK_TYPE_Q4_K] = gemv_q4_K,                    \
        [PK_TYPE_Q5_K] = gemv_q5_K, [PK_TYPE_Q6_K] = gemv_q6_K,                    \
        [PK_TYPE_IQ4_XS] = gemv_iq4_xs, [PK_TYPE_MXFP4] = gemv_mxfp4,              \
        [PK_TYPE_IQ2_XXS] = gemv_iq2_xxs, [PK_TYPE_IQ2_XS] = gemv_iq2_xs,          \
        [PK_TYPE_IQ1_S] = gemv_iq1_s, [PK_TYPE_IQ1_M] = gemv_iq1_m,                \
        [PK_TYPE_IQ3_XXS] = gemv_iq3_xxs, [PK_TYPE_IQ3_S] = gemv_iq3_s,            \
        [PK_TYPE_IQ2_S] = gemv_iq2_s,                                              \
    },                                                                             \
    .quantize = {                                                                  \
        [PK_TYPE_F32] = quantize_f32, [PK_TYPE_F16] = quantize_f16,                \
        [PK_TYPE_BF16] = quantize_bf16, [PK_TYPE_Q8_0] = quantize_q8_0,            \
        [PK_TYPE_Q8_1] = quantize_q8_1, [PK_TYPE_Q8_K] = quantize_q8_K,            \
    },                                                                             \
};
