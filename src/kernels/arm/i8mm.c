/* kernels/arm/i8mm.c - multi-token kernels of the i8mm variant (ARMv8.6 smmla
 * int8 matrix products: Apple M2+, Snapdragon 8 Gen 1+, Graviton 3+),
 * merged over the dotprod table. Entries left NULL fall back to the dotprod
 * gemv per token.
 *
 * Tuned for: prompt processing, which is compute-bound. One smmla
 * (vmmlaq_s32) multiplies a 2x8 int8 matrix by an 8x2 one into a 2x2 int32
 * tile: 32 multiply-adds, twice sdot's 16. Two weight rows are interleaved
 * in 8-byte groups ([row A 8 levels | row B 8 levels]) and so are two
 * tokens' activations, so one tile is (2 rows) x (2 tokens). Blocking:
 *   - the reduction dimension is cut into k-blocks (512 elements for the
 *     K-quants, 1024 for the 32-element types) and tokens into tiles (32
 *     for the K-quants, 16 for the 32-element types); per (k-block, token
 *     tile) the activations are interleaved by token pairs once (with, for
 *     the K-quants, their bsums split into int8 halves for the mins) into a
 *     stack buffer of 20-25 KiB that stays in L1 while every row of the
 *     chunk passes;
 *   - K-quants, IQ4_XS, IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M: per tile of 4 rows (2 row pairs; 2 rows for the
 *     last one or two) each super-block of the k-block is decoded once into
 *     512 bytes of interleaved int8 levels per row pair plus per-sub-block
 *     int32 scale vectors (stack, L1), then applied to the token pairs 4 at
 *     a time: 2 row pairs x 4 token pairs = 8 int32 tiles, each activation
 *     load feeding two smmla;
 *   - 32-element blocks: per tile of 4 rows and 4 token pairs each block is
 *     decoded in registers and applied (8 int32 tiles, as above).
 * No weights are repacked outside the call: the only memory is ~25 KiB of
 * stack per call.
 * Tails: an odd last row is paired with itself and an odd last token with
 * itself (the duplicates are not stored); the token-pair count of a tile is
 * a compile-time constant of each tile instance.
 *
 * Numerics: within a (super-)block every product and sum is exact int32.
 *   Levels are decoded to int8 (Q4_K/Q5_K/Q2_K unsigned values, Q3_K
 *   q - 4, Q6_K q - 32, Q4_0 q - 8, Q5_0 q - 16, IQ4_NL/IQ4_XS/MXFP4
 *   table values, IQ2_XXS/IQ2_XS grid magnitudes times signs, Q8_0 as
 *   stored, IQ1_S/IQ1_M 8 * (grid level + delta), whose sums are 8x - the
 *   full int8 range is fine for smmla);
 *   sub-block scales multiply the smmla sums in int32 (vmlaq_s32), bounded
 *   by 2^28 per super-block. The K-quant mins term sum_j m_j * bsum_j is
 *   exact int32 as well: bsum = 128 * hi + lo with lo in [0, 127] and hi in
 *   [-32, 31] are int8, so two smmla with the mins give it. Per block the
 *   int32 sums are converted to float and accumulated with one FMA
 *   (d_w * d_x) (and one for the mins / Q4_1-Q5_1 offsets m_w * s_x): only
 *   the float accumulation across blocks and k-blocks differs from the
 *   reference.
 *   F32 / F16 / BF16 (only with -DPK_GEMM_FLOAT=1, see their section):
 *   widened to F32, FMA in 4 lanes, reassociated float sums.
 */
#include <string.h>
#include "kernels/kernels.h"

#if defined(__aarch64__) && defined(__ARM_FEATURE_MATMUL_INT8)
#include <arm_neon.h>

#define GI static inline __attribute__((always_inline))
#include "kernels/arm/iq2_ops.h"
/* fully unroll the short loops over token pairs / rows, so the accumulators stay in registers */
#define UNROLL _Pragma("GCC unroll 16")

enum {
    TT = 16, TPMAX = TT / 2,   /* tokens per tile of the 32-element types, token pairs */
    TT_K = 32,                 /* tokens per tile of the K-quant kernels */
    KB_K = 2,                  /* K-quant super-blocks per k-block (512 elements) */
    KB_L = 32,                 /* 32-element blocks per k-block (1024 elements) */
};

GI float f16f(uint16_t h) {
    __fp16 v;
    memcpy(&v, &h, 2);
    return (float)v;
}
GI int32x4_t mm(int32x4_t acc, int8x16_t a, int8x16_t b) { return vmmlaq_s32(acc, a, b); }
/* [a 0..7 | b 0..7] and [a 8..15 | b 8..15] */
GI uint8x16_t zlo(uint8x16_t a, uint8x16_t b) {
    return vreinterpretq_u8_u64(vzip1q_u64(vreinterpretq_u64_u8(a), vreinterpretq_u64_u8(b)));
}
GI uint8x16_t zhi(uint8x16_t a, uint8x16_t b) {
    return vreinterpretq_u8_u64(vzip2q_u64(vreinterpretq_u64_u8(a), vreinterpretq_u64_u8(b)));
}
GI float32x4_t dup2(float a, float b) { return vcombine_f32(vdup_n_f32(a), vdup_n_f32(b)); }
GI int8x16_t ld8(const int8_t *p) { return vld1q_s8(p); }

/* y[0] (+)= lane 0 (row A, token A), y[ys] lane 1 (row A, token B), y[1]
 * lane 2 (row B, token A), y[ys + 1] lane 3; y points at row A's column of
 * token A. */
GI void store2x2(float32x4_t a, float *y, int64_t ys, int two_t, int two_r, int first) {
    float v[4];
    vst1q_f32(v, a);
    float *p = y, *q = y + ys;
    if (first) {
        p[0] = v[0];
        if (two_r) p[1] = v[2];
        if (two_t) { q[0] = v[1]; if (two_r) q[1] = v[3]; }
    } else {
        p[0] += v[0];
        if (two_r) p[1] += v[2];
        if (two_t) { q[0] += v[1]; if (two_r) q[1] += v[3]; }
    }
}

/* S[j] = [a_j, a_j, b_j, b_j] for j < 8 from 8 int16 scales per row */
GI void scales8(int16x8_t a, int16x8_t b, int32x4_t *S) {
    /* [a0 a0 a1 a1 ..] and [b0 b0 b1 b1 ..], then 32-bit zips: [a0 a0 b0 b0 a1 a1 b1 b1] */
    int16x8_t aa0 = vzip1q_s16(a, a), aa1 = vzip2q_s16(a, a);
    int16x8_t bb0 = vzip1q_s16(b, b), bb1 = vzip2q_s16(b, b);
    int16x8_t s01 = vreinterpretq_s16_s32(vzip1q_s32(vreinterpretq_s32_s16(aa0), vreinterpretq_s32_s16(bb0)));
    int16x8_t s23 = vreinterpretq_s16_s32(vzip2q_s32(vreinterpretq_s32_s16(aa0), vreinterpretq_s32_s16(bb0)));
    int16x8_t s45 = vreinterpretq_s16_s32(vzip1q_s32(vreinterpretq_s32_s16(aa1), vreinterpretq_s32_s16(bb1)));
    int16x8_t s67 = vreinterpretq_s16_s32(vzip2q_s32(vreinterpretq_s32_s16(aa1), vreinterpretq_s32_s16(bb1)));
    S[0] = vmovl_s16(vget_low_s16(s01)); S[1] = vmovl_high_s16(s01);
    S[2] = vmovl_s16(vget_low_s16(s23)); S[3] = vmovl_high_s16(s23);
    S[4] = vmovl_s16(vget_low_s16(s45)); S[5] = vmovl_high_s16(s45);
    S[6] = vmovl_s16(vget_low_s16(s67)); S[7] = vmovl_high_s16(s67);
}
GI int16x8_t u8to16(const uint8_t *p) { return vreinterpretq_s16_u16(vmovl_u8(vld1_u8(p))); }
GI int16x8_t s8to16(const int8_t *p) { return vmovl_s8(vld1_s8(p)); }

/* ---- K-quants and IQ4_XS x Q8_K ------------------------------------------------ */

/* Activations of a token pair for one super-block: the levels interleaved
 * in 8-byte groups, the bsums split into int8 halves (bsum = 128 hi + lo),
 * by 16 (Q2_K) and summed by 32 (Q4_K, Q5_K), and the scales [d0 d1 d0 d1]. */
typedef struct {
    int8_t qs[512];
    int8_t lo16[32], hi16[32];   /* [tok 0: groups 0..7 | tok 1: 0..7], then groups 8..15 */
    int8_t lo8[16], hi8[16];     /* [tok 0: 8 pair sums | tok 1] */
    float d[4];
} xk_t;

static void prep_k(int np, const pk_block_q8_K *const *xs, int kb, xk_t *X) {
    for (int p = 0; p < np; p++)
        for (int b = 0; b < kb; b++) {
            const pk_block_q8_K *x0 = xs[2 * p] + b, *x1 = xs[2 * p + 1] + b;
            xk_t *o = &X[p * kb + b];
            for (int g = 0; g < 16; g++) {
                uint8x16_t a = vld1q_u8((const uint8_t *)x0->qs + 16 * g);
                uint8x16_t c = vld1q_u8((const uint8_t *)x1->qs + 16 * g);
                vst1q_u8((uint8_t *)o->qs + 32 * g, zlo(a, c));
                vst1q_u8((uint8_t *)o->qs + 32 * g + 16, zhi(a, c));
            }
            for (int t = 0; t < 2; t++) {
                const int16_t *bs = (t ? x1 : x0)->bsums;
                for (int j = 0; j < 16; j++) {
                    int v = bs[j], i = (j / 8) * 16 + t * 8 + j % 8;
                    o->lo16[i] = (int8_t)(v & 127);
                    o->hi16[i] = (int8_t)((v - (v & 127)) / 128);
                }
                for (int j = 0; j < 8; j++) {
                    int v = bs[2 * j] + bs[2 * j + 1];
                    o->lo8[t * 8 + j] = (int8_t)(v & 127);
                    o->hi8[t * 8 + j] = (int8_t)((v - (v & 127)) / 128);
                }
            }
            o->d[0] = o->d[2] = x0->d;
            o->d[1] = o->d[3] = x1->d;
        }
}

/* A decoded pair of weight super-blocks: levels interleaved as the
 * activations, per-sub-block scales [sA sA sB sB], mins [A 8 | B 8] (two
 * vectors for 16 sub-blocks), and [dA dA dB dB], [dminA dminA dminB dminB]. */
typedef struct {
    int8_t W[512];
    int32x4_t S[16];
    int8x16_t ma[2];
    float32x4_t dv, dmv;
} wk_t;

/* the weight types, as compile-time kinds: the K-quants, IQ4_XS, IQ2_XXS,
 * IQ2_XS, IQ1_S and IQ1_M (Q8_K activations), then the 32-element blocks (Q8_0 / Q8_1) */
enum { T_Q2_K, T_Q3_K, T_Q4_K, T_Q5_K, T_Q6_K, T_IQ4_XS, T_IQ2_XXS, T_IQ2_XS, T_IQ1_S, T_IQ1_M,
       T_Q8_0, T_Q4_0, T_Q4_1, T_Q5_0, T_Q5_1, T_IQ4_NL, T_MXFP4 };

/* Store the 4 interleaved vectors z0..z3 of chunk c (32 elements). */
GI void put_z(int8_t *W, int c, uint8x16_t z0, uint8x16_t z1, uint8x16_t z2, uint8x16_t z3) {
    uint8_t *o = (uint8_t *)W + 64 * c;
    vst1q_u8(o, z0); vst1q_u8(o + 16, z1); vst1q_u8(o + 32, z2); vst1q_u8(o + 48, z3);
}

GI void dec_q4_K(const pk_block_q4_K *A, const pk_block_q4_K *B, wk_t *o) {
    uint8_t scA[8], mA[8], scB[8], mB[8];
    pk_get_scales_mins_k4(A->scales, scA, mA);
    pk_get_scales_mins_k4(B->scales, scB, mB);
    scales8(u8to16(scA), u8to16(scB), o->S);
    o->ma[0] = vreinterpretq_s8_u8(vcombine_u8(vld1_u8(mA), vld1_u8(mB)));
    o->dv = dup2(f16f(A->d), f16f(B->d));
    o->dmv = dup2(f16f(A->dmin), f16f(B->dmin));
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int h = 0; h < 4; h++) {
        uint8x16_t a0 = vld1q_u8(A->qs + 32 * h), a1 = vld1q_u8(A->qs + 32 * h + 16);
        uint8x16_t b0 = vld1q_u8(B->qs + 32 * h), b1 = vld1q_u8(B->qs + 32 * h + 16);
        uint8x16_t z0 = zlo(a0, b0), z1 = zhi(a0, b0), z2 = zlo(a1, b1), z3 = zhi(a1, b1);
        put_z(o->W, 2 * h, vandq_u8(z0, m4), vandq_u8(z1, m4), vandq_u8(z2, m4), vandq_u8(z3, m4));
        put_z(o->W, 2 * h + 1, vshrq_n_u8(z0, 4), vshrq_n_u8(z1, 4), vshrq_n_u8(z2, 4), vshrq_n_u8(z3, 4));
    }
}

/* bit c of each byte of z, as the value `to` (or 0) */
GI uint8x16_t bitc(uint8x16_t z, int c, uint8_t to) {
    return vandq_u8(vtstq_u8(z, vdupq_n_u8((uint8_t)(1u << c))), vdupq_n_u8(to));
}

GI void dec_q5_K(const pk_block_q5_K *A, const pk_block_q5_K *B, wk_t *o) {
    uint8_t scA[8], mA[8], scB[8], mB[8];
    pk_get_scales_mins_k4(A->scales, scA, mA);
    pk_get_scales_mins_k4(B->scales, scB, mB);
    scales8(u8to16(scA), u8to16(scB), o->S);
    o->ma[0] = vreinterpretq_s8_u8(vcombine_u8(vld1_u8(mA), vld1_u8(mB)));
    o->dv = dup2(f16f(A->d), f16f(B->d));
    o->dmv = dup2(f16f(A->dmin), f16f(B->dmin));
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    uint8x16_t ha0 = vld1q_u8(A->qh), ha1 = vld1q_u8(A->qh + 16);
    uint8x16_t hb0 = vld1q_u8(B->qh), hb1 = vld1q_u8(B->qh + 16);
    uint8x16_t h0 = zlo(ha0, hb0), h1 = zhi(ha0, hb0), h2 = zlo(ha1, hb1), h3 = zhi(ha1, hb1);
    for (int h = 0; h < 4; h++) {
        uint8x16_t a0 = vld1q_u8(A->qs + 32 * h), a1 = vld1q_u8(A->qs + 32 * h + 16);
        uint8x16_t b0 = vld1q_u8(B->qs + 32 * h), b1 = vld1q_u8(B->qs + 32 * h + 16);
        uint8x16_t z0 = zlo(a0, b0), z1 = zhi(a0, b0), z2 = zlo(a1, b1), z3 = zhi(a1, b1);
        int c = 2 * h;
        put_z(o->W, c, vorrq_u8(vandq_u8(z0, m4), bitc(h0, c, 16)), vorrq_u8(vandq_u8(z1, m4), bitc(h1, c, 16)),
              vorrq_u8(vandq_u8(z2, m4), bitc(h2, c, 16)), vorrq_u8(vandq_u8(z3, m4), bitc(h3, c, 16)));
        c++;
        put_z(o->W, c, vorrq_u8(vshrq_n_u8(z0, 4), bitc(h0, c, 16)), vorrq_u8(vshrq_n_u8(z1, 4), bitc(h1, c, 16)),
              vorrq_u8(vshrq_n_u8(z2, 4), bitc(h2, c, 16)), vorrq_u8(vshrq_n_u8(z3, 4), bitc(h3, c, 16)));
    }
}

GI void dec_q2_K(const pk_block_q2_K *A, const pk_block_q2_K *B, wk_t *o) {
    uint8x16_t sa = vld1q_u8(A->scales), sb = vld1q_u8(B->scales);
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(3);
    uint8x16_t la = vandq_u8(sa, m4), lb = vandq_u8(sb, m4);
    scales8(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(la))), vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(lb))), o->S);
    scales8(vreinterpretq_s16_u16(vmovl_high_u8(la)), vreinterpretq_s16_u16(vmovl_high_u8(lb)), o->S + 8);
    uint8x16_t ma = vshrq_n_u8(sa, 4), mb = vshrq_n_u8(sb, 4);
    o->ma[0] = vreinterpretq_s8_u8(zlo(ma, mb));
    o->ma[1] = vreinterpretq_s8_u8(zhi(ma, mb));
    o->dv = dup2(f16f(A->d), f16f(B->d));
    o->dmv = dup2(f16f(A->dmin), f16f(B->dmin));
    for (int h = 0; h < 2; h++) {
        uint8x16_t a0 = vld1q_u8(A->qs + 32 * h), a1 = vld1q_u8(A->qs + 32 * h + 16);
        uint8x16_t b0 = vld1q_u8(B->qs + 32 * h), b1 = vld1q_u8(B->qs + 32 * h + 16);
        uint8x16_t z0 = zlo(a0, b0), z1 = zhi(a0, b0), z2 = zlo(a1, b1), z3 = zhi(a1, b1);
        put_z(o->W, 4 * h + 0, vandq_u8(z0, m2), vandq_u8(z1, m2), vandq_u8(z2, m2), vandq_u8(z3, m2));
        put_z(o->W, 4 * h + 1, vandq_u8(vshrq_n_u8(z0, 2), m2), vandq_u8(vshrq_n_u8(z1, 2), m2),
              vandq_u8(vshrq_n_u8(z2, 2), m2), vandq_u8(vshrq_n_u8(z3, 2), m2));
        put_z(o->W, 4 * h + 2, vandq_u8(vshrq_n_u8(z0, 4), m2), vandq_u8(vshrq_n_u8(z1, 4), m2),
              vandq_u8(vshrq_n_u8(z2, 4), m2), vandq_u8(vshrq_n_u8(z3, 4), m2));
        put_z(o->W, 4 * h + 3, vshrq_n_u8(z0, 6), vshrq_n_u8(z1, 6), vshrq_n_u8(z2, 6), vshrq_n_u8(z3, 6));
    }
}

/* The 16 signed scales (sc - 32) of a Q3_K block (pk_q3_K_scales), without
 * reading past its 12 scale bytes: low nibbles of bytes 0..7 for s < 8,
 * high nibbles for s >= 8; bits 2(s/4).. of byte 8 + s % 4 on top. */
GI int8x16_t q3_scales(const uint8_t *sc) {
    uint8x8_t l8 = vld1_u8(sc);
    uint32_t h;
    memcpy(&h, sc + 8, 4);
    uint8x16_t lo = vcombine_u8(vand_u8(l8, vdup_n_u8(0x0F)), vshr_n_u8(l8, 4));
    static const int8_t sh[16] = {0, 0, 0, 0, -2, -2, -2, -2, -4, -4, -4, -4, -6, -6, -6, -6};
    uint8x16_t hi = vandq_u8(vshlq_u8(vreinterpretq_u8_u32(vdupq_n_u32(h)), vld1q_s8(sh)), vdupq_n_u8(3));
    return vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
}

/* Q3_K levels q - 4 of chunk c (bits 2k of z, high bit c of hz): as uint8
 * (low2 | hbit << 2) - 4 */
GI uint8x16_t lev3(uint8x16_t z, uint8x16_t hz, int k, int c) {
    const uint8x16_t low2 = vandq_u8(vshlq_u8(z, vdupq_n_s8((int8_t)(-2 * k))), vdupq_n_u8(3));
    return vsubq_u8(vorrq_u8(low2, bitc(hz, c, 4)), vdupq_n_u8(4));
}

GI void dec_q3_K(const pk_block_q3_K *A, const pk_block_q3_K *B, wk_t *o) {
    int8x16_t sa = q3_scales(A->scales), sb = q3_scales(B->scales);
    scales8(vmovl_s8(vget_low_s8(sa)), vmovl_s8(vget_low_s8(sb)), o->S);
    scales8(vmovl_high_s8(sa), vmovl_high_s8(sb), o->S + 8);
    o->dv = dup2(f16f(A->d), f16f(B->d));
    o->dmv = vdupq_n_f32(0);
    o->ma[0] = o->ma[1] = vdupq_n_s8(0);
    uint8x16_t ha0 = vld1q_u8(A->hmask), ha1 = vld1q_u8(A->hmask + 16);
    uint8x16_t hb0 = vld1q_u8(B->hmask), hb1 = vld1q_u8(B->hmask + 16);
    uint8x16_t h0 = zlo(ha0, hb0), h1 = zhi(ha0, hb0), h2 = zlo(ha1, hb1), h3 = zhi(ha1, hb1);
    for (int h = 0; h < 2; h++) {
        uint8x16_t a0 = vld1q_u8(A->qs + 32 * h), a1 = vld1q_u8(A->qs + 32 * h + 16);
        uint8x16_t b0 = vld1q_u8(B->qs + 32 * h), b1 = vld1q_u8(B->qs + 32 * h + 16);
        uint8x16_t z0 = zlo(a0, b0), z1 = zhi(a0, b0), z2 = zlo(a1, b1), z3 = zhi(a1, b1);
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;
            put_z(o->W, c, lev3(z0, h0, k, c), lev3(z1, h1, k, c), lev3(z2, h2, k, c), lev3(z3, h3, k, c));
        }
    }
}

/* Q6_K levels q - 32 of chunk k: (lo | ((qh >> 2k) & 3) << 4) - 32, lo the
 * low (hi = 0) or high nibbles of z, qh of hz */
GI uint8x16_t lev6(uint8x16_t z, uint8x16_t hz, int hi, int k) {
    const uint8x16_t lo = hi ? vshrq_n_u8(z, 4) : vandq_u8(z, vdupq_n_u8(0x0F));
    const uint8x16_t qh = vandq_u8(vshlq_u8(hz, vdupq_n_s8((int8_t)(4 - 2 * k))), vdupq_n_u8(3 << 4));
    return vsubq_u8(vorrq_u8(lo, qh), vdupq_n_u8(32));
}

GI void dec_q6_K(const pk_block_q6_K *A, const pk_block_q6_K *B, wk_t *o) {
    scales8(s8to16(A->scales), s8to16(B->scales), o->S);
    scales8(s8to16(A->scales + 8), s8to16(B->scales + 8), o->S + 8);
    o->dv = dup2(f16f(A->d), f16f(B->d));
    o->dmv = vdupq_n_f32(0);
    o->ma[0] = o->ma[1] = vdupq_n_s8(0);
    for (int h = 0; h < 2; h++) {
        uint8x16_t qa0 = vld1q_u8(A->qh + 32 * h), qa1 = vld1q_u8(A->qh + 32 * h + 16);
        uint8x16_t qb0 = vld1q_u8(B->qh + 32 * h), qb1 = vld1q_u8(B->qh + 32 * h + 16);
        uint8x16_t h0 = zlo(qa0, qb0), h1 = zhi(qa0, qb0), h2 = zlo(qa1, qb1), h3 = zhi(qa1, qb1);
        for (int half = 0; half < 2; half++) {   /* ql[64h + 32 half + l]: k = half (low), half + 2 (high) */
            const uint8_t *pa = A->ql + 64 * h + 32 * half, *pb = B->ql + 64 * h + 32 * half;
            uint8x16_t a0 = vld1q_u8(pa), a1 = vld1q_u8(pa + 16), b0 = vld1q_u8(pb), b1 = vld1q_u8(pb + 16);
            uint8x16_t z0 = zlo(a0, b0), z1 = zhi(a0, b0), z2 = zlo(a1, b1), z3 = zhi(a1, b1);
            for (int hi = 0; hi < 2; hi++) {
                int k = half + 2 * hi;
                put_z(o->W, 4 * h + k, lev6(z0, h0, hi, k), lev6(z1, h1, hi, k), lev6(z2, h2, hi, k),
                      lev6(z3, h3, hi, k));
            }
        }
    }
}

/* the table values of the codes i */
GI uint8x16_t tabv(int8x16_t tab, uint8x16_t i) { return vreinterpretq_u8_s8(vqtbl1q_s8(tab, i)); }

GI void dec_iq4_xs(const pk_block_iq4_xs *A, const pk_block_iq4_xs *B, wk_t *o) {
    int16_t la[8], lb[8];
    for (int s = 0; s < 8; s++) {
        la[s] = (int16_t)((((A->scales_l[s / 2] >> 4 * (s % 2)) & 0xF) | ((A->scales_h >> 2 * s) & 3) << 4) - 32);
        lb[s] = (int16_t)((((B->scales_l[s / 2] >> 4 * (s % 2)) & 0xF) | ((B->scales_h >> 2 * s) & 3) << 4) - 32);
    }
    scales8(vld1q_s16(la), vld1q_s16(lb), o->S);
    o->dv = dup2(f16f(A->d), f16f(B->d));
    o->dmv = vdupq_n_f32(0);
    o->ma[0] = o->ma[1] = vdupq_n_s8(0);
    const int8x16_t tab = vld1q_s8(pk_iq4nl_values);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int s = 0; s < 8; s++) {
        uint8x16_t a = vld1q_u8(A->qs + 16 * s), b = vld1q_u8(B->qs + 16 * s);
        uint8x16_t z0 = zlo(a, b), z1 = zhi(a, b);
        put_z(o->W, s, tabv(tab, vandq_u8(z0, m4)), tabv(tab, vandq_u8(z1, m4)), tabv(tab, vshrq_n_u8(z0, 4)),
              tabv(tab, vshrq_n_u8(z1, 4)));
    }
}

/* IQ2_XXS (XS 0) / IQ2_XS (XS 1): the signed levels (kernels/arm/iq2_ops.h,
 * |.| <= 43) interleaved as IQ4_XS's, the scales 2 ls + 1 per sub-block (8)
 * or per half (16: SUB16), d / 8 (the scales are 8x the format's). */
GI void dec_iq2(const int XS, const uint8_t *A, const uint8_t *B, wk_t *o) {
    int16_t sa[16], sb[16];
    for (int s = 0; s < 8; s++) {
        int8x16_t alo, ahi, blo, bhi;
        int a0, a1, b0, b1;
        iq2a_sub(XS, A, s, &alo, &ahi, &a0, &a1);
        iq2a_sub(XS, B, s, &blo, &bhi, &b0, &b1);
        put_z(o->W, s, zlo(vreinterpretq_u8_s8(alo), vreinterpretq_u8_s8(blo)),
              zhi(vreinterpretq_u8_s8(alo), vreinterpretq_u8_s8(blo)),
              zlo(vreinterpretq_u8_s8(ahi), vreinterpretq_u8_s8(bhi)),
              zhi(vreinterpretq_u8_s8(ahi), vreinterpretq_u8_s8(bhi)));
        if (XS) {
            sa[2 * s] = (int16_t)a0, sa[2 * s + 1] = (int16_t)a1;
            sb[2 * s] = (int16_t)b0, sb[2 * s + 1] = (int16_t)b1;
        } else {
            sa[s] = (int16_t)a0, sb[s] = (int16_t)b0;
        }
    }
    scales8(vld1q_s16(sa), vld1q_s16(sb), o->S);
    if (XS) scales8(vld1q_s16(sa + 8), vld1q_s16(sb + 8), o->S + 8);
    uint16_t da, db;
    memcpy(&da, A, 2);
    memcpy(&db, B, 2);
    o->dv = dup2(0.125f * f16f(da), 0.125f * f16f(db));
    o->dmv = vdupq_n_f32(0);
    o->ma[0] = o->ma[1] = vdupq_n_s8(0);
}

/* IQ1_S, IQ1_M: group i of rows A, B (grid indices ia, ib; delta signs sa,
 * sb) as levels 8 l + s; the scales 2 ls + 1 (IQ1_S per sub-block, IQ1_M
 * per 16 elements: 16 of them, SUB16), d / 8 */
GI uint8x16_t iq1_z(const uint64_t *grid, unsigned ia, unsigned ib, int sa, int sb) {
    int8x16_t g = vcombine_s8(vcreate_s8(grid[ia]), vcreate_s8(grid[ib]));
    return vreinterpretq_u8_s8(vaddq_s8(vshlq_n_s8(g, 3), vcombine_s8(vdup_n_s8((int8_t)sa), vdup_n_s8((int8_t)sb))));
}

GI void dec_iq1_s(const pk_block_iq1_s *A, const pk_block_iq1_s *B, wk_t *o) {
    const uint64_t *grid = pk_iq1s_grid();
    int16_t la[8], lb[8];
    for (int c = 0; c < 8; c++) {
        const unsigned ha = A->qh[c], hb = B->qh[c];
        const int sa = ha & 0x8000 ? -1 : 1, sb = hb & 0x8000 ? -1 : 1;
        la[c] = (int16_t)(2 * ((ha >> 12) & 7) + 1);
        lb[c] = (int16_t)(2 * ((hb >> 12) & 7) + 1);
        uint8x16_t z[4];
        for (int g = 0; g < 4; g++)
            z[g] = iq1_z(grid, A->qs[4 * c + g] | ((ha >> 3 * g) & 7) << 8, B->qs[4 * c + g] | ((hb >> 3 * g) & 7) << 8,
                         sa, sb);
        put_z(o->W, c, z[0], z[1], z[2], z[3]);
    }
    scales8(vld1q_s16(la), vld1q_s16(lb), o->S);
    o->dv = dup2(0.125f * f16f(A->d), 0.125f * f16f(B->d));
    o->dmv = vdupq_n_f32(0);
    o->ma[0] = o->ma[1] = vdupq_n_s8(0);
}

/* the 16 IQ1_M scales 2 ls + 1 of a block, entry 2s + h = field 3 (k % 4) of word k / 4 */
GI void iq1m_scales(const uint8_t *sc, int16_t *l) {
    for (int k = 0; k < 16; k++) {
        const unsigned wd = sc[2 * (k / 4)] | (unsigned)sc[2 * (k / 4) + 1] << 8;
        l[k] = (int16_t)(2 * ((wd >> 3 * (k % 4)) & 7) + 1);
    }
}

GI void dec_iq1_m(const pk_block_iq1_m *A, const pk_block_iq1_m *B, wk_t *o) {
    const uint64_t *grid = pk_iq1s_grid();
    int16_t la[16], lb[16];
    iq1m_scales(A->scales, la);
    iq1m_scales(B->scales, lb);
    for (int c = 0; c < 8; c++) {
        uint8x16_t z[4];
        for (int g = 0; g < 4; g++) {
            const unsigned ha = (unsigned)A->qh[2 * c + g / 2] >> 4 * (g % 2), hb = (unsigned)B->qh[2 * c + g / 2] >> 4 * (g % 2);
            z[g] = iq1_z(grid, A->qs[4 * c + g] | (ha & 7) << 8, B->qs[4 * c + g] | (hb & 7) << 8, ha & 8 ? -1 : 1,
                         hb & 8 ? -1 : 1);
        }
        put_z(o->W, c, z[0], z[1], z[2], z[3]);
    }
    scales8(vld1q_s16(la), vld1q_s16(lb), o->S);
    scales8(vld1q_s16(la + 8), vld1q_s16(lb + 8), o->S + 8);
    o->dv = dup2(0.125f * f16f(pk_iq1_m_d(A->scales)), 0.125f * f16f(pk_iq1_m_d(B->scales)));
    o->dmv = vdupq_n_f32(0);
    o->ma[0] = o->ma[1] = vdupq_n_s8(0);
}

/* Super-block sums for RP (1, 2) decoded row pairs wd[] and NP (<= 4) token
 * pairs: acc[q * 4 + p] += (d_w d_x) * isum - (dmin_w d_x) * msum.
 * SUB16: 16 sub-blocks of 16 (else 8 of 32); MINS: 0 none, 8 or 16 mins.
 * X: pair 0's block, pairs kb apart. */
GI void kq_prod(const int RP, const int NP, const int SUB16, const int MINS, const wk_t *wd, const xk_t *X,
                int kb, float32x4_t *acc) {
    int32x4_t sb[2][4];
    const int32x4_t z = vdupq_n_s32(0);
    UNROLL
    for (int q = 0; q < RP; q++)
        UNROLL
        for (int p = 0; p < NP; p++) sb[q][p] = z;
    for (int c = 0; c < 8; c++) {
        int8x16_t w[2][4];
        UNROLL
        for (int q = 0; q < RP; q++)
            UNROLL
            for (int i = 0; i < 4; i++) w[q][i] = ld8(wd[q].W + 64 * c + 16 * i);
        UNROLL
        for (int p = 0; p < NP; p++) {
            const int8_t *x = X[p * kb].qs + 64 * c;
            int8x16_t x0 = ld8(x), x1 = ld8(x + 16), x2 = ld8(x + 32), x3 = ld8(x + 48);
            UNROLL
            for (int q = 0; q < RP; q++) {
                if (SUB16) {
                    sb[q][p] = vmlaq_s32(sb[q][p], mm(mm(z, w[q][0], x0), w[q][1], x1), wd[q].S[2 * c]);
                    sb[q][p] = vmlaq_s32(sb[q][p], mm(mm(z, w[q][2], x2), w[q][3], x3), wd[q].S[2 * c + 1]);
                } else {
                    int32x4_t s = mm(mm(mm(mm(z, w[q][0], x0), w[q][1], x1), w[q][2], x2), w[q][3], x3);
                    sb[q][p] = vmlaq_s32(sb[q][p], s, wd[q].S[c]);
                }
            }
        }
    }
    UNROLL
    for (int p = 0; p < NP; p++) {
        const xk_t *xp = &X[p * kb];
        float32x4_t dx = vld1q_f32(xp->d);
        UNROLL
        for (int q = 0; q < RP; q++) {
            float32x4_t *a = &acc[q * 4 + p];
            *a = vfmaq_f32(*a, vcvtq_f32_s32(sb[q][p]), vmulq_f32(wd[q].dv, dx));
            if (MINS) {
                int32x4_t m;
                if (MINS == 16) {
                    m = mm(mm(z, wd[q].ma[0], ld8(xp->hi16)), wd[q].ma[1], ld8(xp->hi16 + 16));
                    m = vshlq_n_s32(m, 7);
                    m = mm(mm(m, wd[q].ma[0], ld8(xp->lo16)), wd[q].ma[1], ld8(xp->lo16 + 16));
                } else {
                    m = vshlq_n_s32(mm(z, wd[q].ma[0], ld8(xp->hi8)), 7);
                    m = mm(m, wd[q].ma[0], ld8(xp->lo8));
                }
                *a = vfmsq_f32(*a, vcvtq_f32_s32(m), vmulq_f32(wd[q].dmv, dx));
            }
        }
    }
}

GI void decode_k(const int TYPE, const void *A, const void *B, int64_t b, wk_t *wd) {
    switch (TYPE) {
    case T_Q2_K: dec_q2_K((const pk_block_q2_K *)A + b, (const pk_block_q2_K *)B + b, wd); break;
    case T_Q3_K: dec_q3_K((const pk_block_q3_K *)A + b, (const pk_block_q3_K *)B + b, wd); break;
    case T_Q4_K: dec_q4_K((const pk_block_q4_K *)A + b, (const pk_block_q4_K *)B + b, wd); break;
    case T_Q5_K: dec_q5_K((const pk_block_q5_K *)A + b, (const pk_block_q5_K *)B + b, wd); break;
    case T_Q6_K: dec_q6_K((const pk_block_q6_K *)A + b, (const pk_block_q6_K *)B + b, wd); break;
    case T_IQ2_XXS: dec_iq2(0, (const uint8_t *)((const pk_block_iq2_xxs *)A + b),
                            (const uint8_t *)((const pk_block_iq2_xxs *)B + b), wd); break;
    case T_IQ2_XS: dec_iq2(1, (const uint8_t *)((const pk_block_iq2_xs *)A + b),
                           (const uint8_t *)((const pk_block_iq2_xs *)B + b), wd); break;
    case T_IQ1_S: dec_iq1_s((const pk_block_iq1_s *)A + b, (const pk_block_iq1_s *)B + b, wd); break;
    case T_IQ1_M: dec_iq1_m((const pk_block_iq1_m *)A + b, (const pk_block_iq1_m *)B + b, wd); break;
    default: dec_iq4_xs((const pk_block_iq4_xs *)A + b, (const pk_block_iq4_xs *)B + b, wd); break;
    }
}

/* RP decoded row pairs (wd[b * 2 + q] for super-block b < kb) times NP (<=
 * 4) token pairs; results to y (the tile's first row and token); nr rows,
 * nt tokens are stored. */
GI void tile_k(const int RP, const int NP, const int TYPE, const wk_t *wd, const xk_t *X, int kb,
               float *y, int64_t ys, int nr, int nt, int first) {
    const int SUB16 = TYPE == T_Q2_K || TYPE == T_Q3_K || TYPE == T_Q6_K || TYPE == T_IQ2_XS || TYPE == T_IQ1_M;
    const int MINS = TYPE == T_Q2_K ? 16 : (TYPE == T_Q4_K || TYPE == T_Q5_K) ? 8 : 0;
    float32x4_t acc[8];
    UNROLL
    for (int i = 0; i < 8; i++) acc[i] = vdupq_n_f32(0);
    for (int b = 0; b < kb; b++) kq_prod(RP, NP, SUB16, MINS, wd + 2 * b, X + b, kb, acc);
    UNROLL
    for (int q = 0; q < RP; q++)
        UNROLL
        for (int p = 0; p < NP; p++)
            store2x2(acc[q * 4 + p], y + 2 * p * ys + 2 * q, ys, 2 * p + 1 < nt, 2 * q + 1 < nr, first);
}

/* ---- 32-element blocks x Q8_0 / Q8_1 ---------------------------------------------- */

/* A token pair's block: levels interleaved, [d0 d1 d0 d1], [s0 s1 s0 s1] (Q8_1) */
typedef struct {
    int8_t qs[64];
    float d[4], s[4];
} xl_t;

static void prep_l(int np, const void *const *xs, int q81, int kb, xl_t *X) {
    size_t bs = q81 ? sizeof(pk_block_q8_1) : sizeof(pk_block_q8_0);
    size_t off = q81 ? 4 : 2;
    for (int p = 0; p < np; p++)
        for (int b = 0; b < kb; b++) {
            const uint8_t *x0 = (const uint8_t *)xs[2 * p] + b * bs, *x1 = (const uint8_t *)xs[2 * p + 1] + b * bs;
            xl_t *o = &X[p * kb + b];
            uint8x16_t a0 = vld1q_u8(x0 + off), a1 = vld1q_u8(x0 + off + 16);
            uint8x16_t c0 = vld1q_u8(x1 + off), c1 = vld1q_u8(x1 + off + 16);
            vst1q_u8((uint8_t *)o->qs, zlo(a0, c0));
            vst1q_u8((uint8_t *)o->qs + 16, zhi(a0, c0));
            vst1q_u8((uint8_t *)o->qs + 32, zlo(a1, c1));
            vst1q_u8((uint8_t *)o->qs + 48, zhi(a1, c1));
            uint16_t h;
            memcpy(&h, x0, 2); o->d[0] = o->d[2] = f16f(h);
            memcpy(&h, x1, 2); o->d[1] = o->d[3] = f16f(h);
            if (q81) {
                memcpy(&h, x0 + 2, 2); o->s[0] = o->s[2] = f16f(h);
                memcpy(&h, x1 + 2, 2); o->s[1] = o->s[3] = f16f(h);
            }
        }
}

/* Byte indexes and bit masks that spread the fifth bits of rows A and B
 * (qh words in bytes 0..3 and 4..7 of a vector) to the interleaved order:
 * vector i = [A elements 8i..8i+7 | B elements 8i..8i+7]. */
static const uint8_t qh_idx[4][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4}, {1, 1, 1, 1, 1, 1, 1, 1, 5, 5, 5, 5, 5, 5, 5, 5},
    {2, 2, 2, 2, 2, 2, 2, 2, 6, 6, 6, 6, 6, 6, 6, 6}, {3, 3, 3, 3, 3, 3, 3, 3, 7, 7, 7, 7, 7, 7, 7, 7}};
static const uint8_t qh_bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};

/* u | (fifth bit of its elements) << 4, for vector i of the interleaved order */
GI uint8x16_t or_qh(uint8x16_t u, uint8x16_t q, int i) {
    uint8x16_t t = vtstq_u8(vqtbl1q_u8(q, vld1q_u8(qh_idx[i])), vld1q_u8(qh_bits));
    return vorrq_u8(u, vandq_u8(t, vdupq_n_u8(16)));
}

/* Block b of rows A and B: 4 interleaved level vectors, [dA dA dB dB] and
 * (Q4_1, Q5_1) [mA mA mB mB]. */
GI void decode_l(const int TYPE, const void *A, const void *B, int64_t b, int8x16_t v[4], float32x4_t *dv,
                 float32x4_t *mv) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    if (TYPE == T_Q8_0) {
        const pk_block_q8_0 *a = (const pk_block_q8_0 *)A + b, *c = (const pk_block_q8_0 *)B + b;
        uint8x16_t a0 = vld1q_u8((const uint8_t *)a->qs), a1 = vld1q_u8((const uint8_t *)a->qs + 16);
        uint8x16_t c0 = vld1q_u8((const uint8_t *)c->qs), c1 = vld1q_u8((const uint8_t *)c->qs + 16);
        v[0] = vreinterpretq_s8_u8(zlo(a0, c0)); v[1] = vreinterpretq_s8_u8(zhi(a0, c0));
        v[2] = vreinterpretq_s8_u8(zlo(a1, c1)); v[3] = vreinterpretq_s8_u8(zhi(a1, c1));
        *dv = dup2(f16f(a->d), f16f(c->d));
        return;
    }
    /* nibble types: qs at offset off of a block of size bs, elements j | j + 16 */
    size_t bs, off;
    switch (TYPE) {
    case T_MXFP4: bs = sizeof(pk_block_mxfp4); off = 1; break;
    case T_Q4_0: bs = sizeof(pk_block_q4_0); off = 2; break;
    case T_Q4_1: bs = sizeof(pk_block_q4_1); off = 4; break;
    case T_Q5_0: bs = sizeof(pk_block_q5_0); off = 6; break;
    case T_Q5_1: bs = sizeof(pk_block_q5_1); off = 8; break;
    default: bs = sizeof(pk_block_iq4_nl); off = 2; break;
    }
    const uint8_t *a = (const uint8_t *)A + b * bs, *c = (const uint8_t *)B + b * bs;
    uint8x16_t qa = vld1q_u8(a + off), qc = vld1q_u8(c + off);
    uint8x16_t z0 = zlo(qa, qc), z1 = zhi(qa, qc);
    uint8x16_t u0 = vandq_u8(z0, m4), u1 = vandq_u8(z1, m4), u2 = vshrq_n_u8(z0, 4), u3 = vshrq_n_u8(z1, 4);
    if (TYPE == T_Q5_0 || TYPE == T_Q5_1) {
        uint32_t ha, hc;
        memcpy(&ha, a + (TYPE == T_Q5_0 ? 2 : 4), 4);
        memcpy(&hc, c + (TYPE == T_Q5_0 ? 2 : 4), 4);
        uint8x16_t q = vreinterpretq_u8_u32(vsetq_lane_u32(hc, vdupq_n_u32(ha), 1));
        u0 = or_qh(u0, q, 0); u1 = or_qh(u1, q, 1); u2 = or_qh(u2, q, 2); u3 = or_qh(u3, q, 3);
    }
    if (TYPE == T_IQ4_NL || TYPE == T_MXFP4) {
        const int8x16_t tab = vld1q_s8(TYPE == T_MXFP4 ? pk_mxfp4_values : pk_iq4nl_values);
        v[0] = vqtbl1q_s8(tab, u0); v[1] = vqtbl1q_s8(tab, u1);
        v[2] = vqtbl1q_s8(tab, u2); v[3] = vqtbl1q_s8(tab, u3);
    } else {
        const int8x16_t ofs = vdupq_n_s8((int8_t)(TYPE == T_Q4_0 ? 8 : TYPE == T_Q5_0 ? 16 : 0));
        v[0] = vsubq_s8(vreinterpretq_s8_u8(u0), ofs); v[1] = vsubq_s8(vreinterpretq_s8_u8(u1), ofs);
        v[2] = vsubq_s8(vreinterpretq_s8_u8(u2), ofs); v[3] = vsubq_s8(vreinterpretq_s8_u8(u3), ofs);
    }
    uint16_t da, dc;
    memcpy(&da, a, 2);
    memcpy(&dc, c, 2);
    *dv = TYPE == T_MXFP4 ? dup2(pk_e8m0_half(a[0]), pk_e8m0_half(c[0])) : dup2(f16f(da), f16f(dc));
    if (TYPE == T_Q4_1 || TYPE == T_Q5_1) {
        memcpy(&da, a + 2, 2);
        memcpy(&dc, c + 2, 2);
        *mv = dup2(f16f(da), f16f(dc));
    }
}

/* RP row pairs (rows R[2q], R[2q + 1]; kb blocks each) times NP (<= 4)
 * token pairs; results to y (the tile's first row and token); nr rows, nt
 * tokens are stored. */
GI void tile_l(const int RP, const int NP, const int TYPE, const void *const *R, const xl_t *X, int kb,
               float *y, int64_t ys, int nr, int nt, int first) {
    const int OFS = TYPE == T_Q4_1 || TYPE == T_Q5_1;
    const int32x4_t z = vdupq_n_s32(0);
    float32x4_t acc[2][4];
    UNROLL
    for (int q = 0; q < 2; q++)
        UNROLL
        for (int p = 0; p < 4; p++) acc[q][p] = vdupq_n_f32(0);
    for (int b = 0; b < kb; b++) {
        int8x16_t v[2][4];
        float32x4_t dv[2], mv[2];
        UNROLL
        for (int q = 0; q < RP; q++) {
            mv[q] = vdupq_n_f32(0);
            decode_l(TYPE, R[2 * q], R[2 * q + 1], b, v[q], &dv[q], &mv[q]);
        }
        UNROLL
        for (int p = 0; p < NP; p++) {
            const xl_t *xp = &X[p * kb + b];
            int8x16_t x0 = ld8(xp->qs), x1 = ld8(xp->qs + 16), x2 = ld8(xp->qs + 32), x3 = ld8(xp->qs + 48);
            float32x4_t dx = vld1q_f32(xp->d);
            UNROLL
            for (int q = 0; q < RP; q++) {
                int32x4_t s = mm(mm(mm(mm(z, v[q][0], x0), v[q][1], x1), v[q][2], x2), v[q][3], x3);
                acc[q][p] = vfmaq_f32(acc[q][p], vcvtq_f32_s32(s), vmulq_f32(dv[q], dx));
                if (OFS) acc[q][p] = vfmaq_f32(acc[q][p], mv[q], vld1q_f32(xp->s));
            }
        }
    }
    UNROLL
    for (int q = 0; q < RP; q++)
        UNROLL
        for (int p = 0; p < NP; p++)
            store2x2(acc[q][p], y + 2 * p * ys + 2 * q, ys, 2 * p + 1 < nt, 2 * q + 1 < nr, first);
}

/* ---- the gemm drivers ----------------------------------------------------------- */

/* the tile of RP row pairs and NP token pairs: tile_k (wd, X an xk_t
 * array) for the K-quants, tile_l (R, X an xl_t array) for the others */
GI void tile(const int RP, const int NP, const int TYPE, const wk_t *wd, const void *const *R, const void *X,
             int kb, float *y, int64_t ys, int nr, int nt, int first) {
    if (TYPE < T_Q8_0) tile_k(RP, NP, TYPE, wd, X, kb, y, ys, nr, nt, first);
    else tile_l(RP, NP, TYPE, R, X, kb, y, ys, nr, nt, first);
}

/* the tile for ng (1..4) token pairs, the count a constant of each call */
GI void tiles(const int RP, const int TYPE, int ng, const wk_t *wd, const void *const *R, const void *X, int kb,
              float *y, int64_t ys, int nr, int nt, int first) {
    switch (ng) {
    case 1: tile(RP, 1, TYPE, wd, R, X, kb, y, ys, nr, nt, first); break;
    case 2: tile(RP, 2, TYPE, wd, R, X, kb, y, ys, nr, nt, first); break;
    case 3: tile(RP, 3, TYPE, wd, R, X, kb, y, ys, nr, nt, first); break;
    default: tile(RP, 4, TYPE, wd, R, X, kb, y, ys, nr, nt, first); break;
    }
}

/* bytes of a weight block */
GI size_t bsize(const int TYPE) {
    switch (TYPE) {
    case T_Q2_K: return sizeof(pk_block_q2_K);
    case T_Q3_K: return sizeof(pk_block_q3_K);
    case T_Q4_K: return sizeof(pk_block_q4_K);
    case T_Q5_K: return sizeof(pk_block_q5_K);
    case T_Q6_K: return sizeof(pk_block_q6_K);
    case T_IQ4_XS: return sizeof(pk_block_iq4_xs);
    case T_IQ2_XXS: return sizeof(pk_block_iq2_xxs);
    case T_IQ2_XS: return sizeof(pk_block_iq2_xs);
    case T_IQ1_S: return sizeof(pk_block_iq1_s);
    case T_IQ1_M: return sizeof(pk_block_iq1_m);
    case T_Q8_0: return sizeof(pk_block_q8_0);
    case T_Q4_0: return sizeof(pk_block_q4_0);
    case T_Q4_1: return sizeof(pk_block_q4_1);
    case T_Q5_0: return sizeof(pk_block_q5_0);
    case T_Q5_1: return sizeof(pk_block_q5_1);
    case T_IQ4_NL: return sizeof(pk_block_iq4_nl);
    default: return sizeof(pk_block_mxfp4);
    }
}

/* gemm for K-quant type TYPE: per k-block and token tile of up to TT_K
 * tokens, the activations are interleaved once; per tile of 4 rows (2 for
 * the last one or two) the k-block's super-blocks are decoded once and
 * applied to the token pairs, 4 pairs at a time. */
GI void gemm_k(const int TYPE, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
               size_t rb, const void *const *x) {
    xk_t X[TT_K / 2 * KB_K] __attribute__((aligned(16)));
    wk_t wd[2 * KB_K];
    int64_t nb = n / PK_QK_K;
    for (int64_t k0 = 0; k0 < nb; k0 += KB_K) {
        int kb = nb - k0 < KB_K ? (int)(nb - k0) : KB_K;
        for (int64_t t0 = 0; t0 < ntok; t0 += TT_K) {
            int nt = ntok - t0 < TT_K ? (int)(ntok - t0) : TT_K, np = (nt + 1) / 2;
            const pk_block_q8_K *xs[TT_K];
            for (int t = 0; t < 2 * np; t++)
                xs[t] = (const pk_block_q8_K *)x[t0 + (t < nt ? t : nt - 1)] + k0;
            prep_k(np, xs, kb, X);
            float *yt = y + t0 * ys;
            for (int64_t r = 0; r < nrows; r += 4) {
                int nr = nrows - r < 4 ? (int)(nrows - r) : 4, rp = nr > 2 ? 2 : 1;
                const void *R[4];
                for (int i = 0; i < 4; i++)
                    R[i] = (const char *)w + (size_t)(r + (i < nr ? i : nr - 1)) * rb + (size_t)k0 * bsize(TYPE);
                for (int b = 0; b < kb; b++)
                    for (int q = 0; q < rp; q++)
                        decode_k(TYPE, R[2 * q], R[2 * q + 1], b, &wd[2 * b + q]);
                for (int g = 0; g < np; g += 4) {
                    int ng = np - g < 4 ? np - g : 4, ntg = nt - 2 * g;
                    const xk_t *Xg = X + g * kb;
                    float *yg = yt + 2 * g * ys + r;
                    if (rp == 2) tiles(2, TYPE, ng, wd, R, Xg, kb, yg, ys, nr, ntg, k0 == 0);
                    else tiles(1, TYPE, ng, wd, R, Xg, kb, yg, ys, nr, ntg, k0 == 0);
                }
            }
        }
    }
}

/* gemm for 32-element type TYPE (Q4_1, Q5_1: Q8_1 activations, else Q8_0):
 * k-blocks, token tiles of TT, tiles of 4 rows (2 for the last one or two)
 * times 4 token pairs */
GI void gemm_l(const int TYPE, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
               size_t rb, const void *const *x) {
    xl_t X[TPMAX * KB_L] __attribute__((aligned(16)));
    const int q81 = TYPE == T_Q4_1 || TYPE == T_Q5_1;
    const size_t xbs = q81 ? sizeof(pk_block_q8_1) : sizeof(pk_block_q8_0);
    int64_t nb = n / 32;
    for (int64_t k0 = 0; k0 < nb; k0 += KB_L) {
        int kb = nb - k0 < KB_L ? (int)(nb - k0) : KB_L;
        for (int64_t t0 = 0; t0 < ntok; t0 += TT) {
            int nt = ntok - t0 < TT ? (int)(ntok - t0) : TT, np = (nt + 1) / 2;
            const void *xs[TT];
            for (int t = 0; t < 2 * np; t++)
                xs[t] = (const char *)x[t0 + (t < nt ? t : nt - 1)] + k0 * xbs;
            prep_l(np, xs, q81, kb, X);
            float *yt = y + t0 * ys;
            for (int64_t r = 0; r < nrows; r += 4) {
                int nr = nrows - r < 4 ? (int)(nrows - r) : 4;
                const void *R[4];
                for (int i = 0; i < 4; i++)
                    R[i] = (const char *)w + (size_t)(r + (i < nr ? i : nr - 1)) * rb + k0 * bsize(TYPE);
                for (int g = 0; g < np; g += 4) {
                    int ng = np - g < 4 ? np - g : 4, ntg = nt - 2 * g;
                    const xl_t *Xg = X + g * kb;
                    float *yg = yt + 2 * g * ys + r;
                    if (nr > 2) tiles(2, TYPE, ng, NULL, R, Xg, kb, yg, ys, nr, ntg, k0 == 0);
                    else tiles(1, TYPE, ng, NULL, R, Xg, kb, yg, ys, nr, ntg, k0 == 0);
                }
            }
        }
    }
}
/* the gemm entry of weight type t: DRIVER specialised to TYPE */
#define I8_ENTRY(t, DRIVER, TYPE)                                                                   \
static void gemm_##t(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w, size_t rb, \
                     const void *const *x) {                                                       \
    DRIVER(TYPE, n, nrows, ntok, y, ys, w, rb, x);                                                 \
}
I8_ENTRY(q2_K, gemm_k, T_Q2_K)
I8_ENTRY(q3_K, gemm_k, T_Q3_K)
I8_ENTRY(q4_K, gemm_k, T_Q4_K)
I8_ENTRY(q5_K, gemm_k, T_Q5_K)
I8_ENTRY(q6_K, gemm_k, T_Q6_K)
I8_ENTRY(iq4_xs, gemm_k, T_IQ4_XS)
I8_ENTRY(iq2_xxs, gemm_k, T_IQ2_XXS)
I8_ENTRY(iq2_xs, gemm_k, T_IQ2_XS)
I8_ENTRY(iq1_s, gemm_k, T_IQ1_S)
I8_ENTRY(iq1_m, gemm_k, T_IQ1_M)
I8_ENTRY(q8_0, gemm_l, T_Q8_0)
I8_ENTRY(q4_0, gemm_l, T_Q4_0)
I8_ENTRY(q4_1, gemm_l, T_Q4_1)
I8_ENTRY(q5_0, gemm_l, T_Q5_0)
I8_ENTRY(q5_1, gemm_l, T_Q5_1)
I8_ENTRY(iq4_nl, gemm_l, T_IQ4_NL)
I8_ENTRY(mxfp4, gemm_l, T_MXFP4)

/* ---- F32, F16, BF16 -----------------------------------------------------------------
 * Not registered by default, as in kernels/x86/avx512_gemm.c: tests/cli/t_batch.sh
 * requires batched logits to be bitwise identical to one-token decoding on
 * its F16 / F32 models, and these kernels sum in a different order than the
 * dotprod gemvs (within float rounding, as tests/unit/test_gemm.c checks). Build
 * with -DPK_GEMM_FLOAT=1 to use them for weights.
 * A register tile is 4 rows x 4 tokens of F32 FMA accumulators (4 lanes);
 * F16 / BF16 activations are widened to F32 once per (k-block, token tile). */
#ifndef PK_GEMM_FLOAT
#define PK_GEMM_FLOAT 0
#endif
#if PK_GEMM_FLOAT
enum { KB_F = 512, TF = 4 };

/* 4 weights of kind K (0 F32, 1 F16, 2 BF16) at element i of row w, as F32 */
GI float32x4_t ldw(const int K, const void *w, int64_t i) {
    if (K == 0) return vld1q_f32((const float *)w + i);
    uint16x4_t h = vld1_u16((const uint16_t *)w + i);
    if (K == 1) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}
GI float ldw1(const int K, const void *w, int64_t i) {
    if (K == 0) return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    if (K == 1) return f16f(h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* rows w[0..3] (len elements of kind K) times tokens x[0..3] (F32); stores
 * nr rows x nt tokens to y[t * ys + r] */
GI void tile_f(const int K, const void *const *w, const float *const *x, int64_t len, float *y, int64_t ys,
               int nr, int nt, int first) {
    float32x4_t acc[4][4];
    UNROLL
    for (int r = 0; r < 4; r++)
        UNROLL
        for (int t = 0; t < 4; t++) acc[r][t] = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 4 <= len; i += 4) {
        float32x4_t wv[4], xv[4];
        UNROLL
        for (int r = 0; r < 4; r++) wv[r] = ldw(K, w[r], i);
        UNROLL
        for (int t = 0; t < 4; t++) xv[t] = vld1q_f32(x[t] + i);
        UNROLL
        for (int r = 0; r < 4; r++)
            UNROLL
            for (int t = 0; t < 4; t++) acc[r][t] = vfmaq_f32(acc[r][t], wv[r], xv[t]);
    }
    for (int r = 0; r < nr; r++)
        for (int t = 0; t < nt; t++) {
            float s = vaddvq_f32(acc[r][t]);
            for (int64_t j = i; j < len; j++) s += ldw1(K, w[r], j) * x[t][j];
            float *o = y + t * ys + r;
            *o = first ? s : *o + s;
        }
}

GI void gemm_float(const int K, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                   size_t rb, const void *const *x) {
    float buf[TF * KB_F] __attribute__((aligned(16)));
    const size_t es = K == 0 ? 4 : 2;
    for (int64_t k0 = 0; k0 < n; k0 += KB_F) {
        int64_t len = n - k0 < KB_F ? n - k0 : KB_F;
        for (int64_t t0 = 0; t0 < ntok; t0 += TF) {
            int nt = ntok - t0 < TF ? (int)(ntok - t0) : TF;
            const float *xf[TF];
            for (int t = 0; t < TF; t++) {
                int tt = t < nt ? t : nt - 1;
                if (K == 0) {
                    xf[t] = (const float *)x[t0 + tt] + k0;
                } else if (t < nt) {   /* F16 / BF16 activations widened once per tile */
                    const uint16_t *src = (const uint16_t *)x[t0 + t] + k0;
                    float *dst = buf + t * KB_F;
                    int64_t j = 0;
                    for (; j + 4 <= len; j += 4) vst1q_f32(dst + j, ldw(K, src, j));
                    for (; j < len; j++) dst[j] = ldw1(K, src, j);
                    xf[t] = dst;
                } else {
                    xf[t] = xf[nt - 1];
                }
            }
            float *yt = y + t0 * ys;
            for (int64_t r = 0; r < nrows; r += 4) {
                int nr = nrows - r < 4 ? (int)(nrows - r) : 4;
                const void *wr[4];
                for (int i = 0; i < 4; i++)
                    wr[i] = (const char *)w + (size_t)(r + (i < nr ? i : 0)) * rb + (size_t)k0 * es;
                tile_f(K, wr, xf, len, yt + r, ys, nr, nt, k0 == 0);
            }
        }
    }
}

I8_ENTRY(f32, gemm_float, 0)
I8_ENTRY(f16, gemm_float, 1)
I8_ENTRY(bf16, gemm_float, 2)
#endif

const pk_kernels pk_kernels_i8mm_gemm = {.gemm = {
#if PK_GEMM_FLOAT
    [PK_TYPE_F32] = gemm_f32, [PK_TYPE_F16] = gemm_f16, [PK_TYPE_BF16] = gemm_bf16,
#endif
    [PK_TYPE_Q2_K] = gemm_q2_K, [PK_TYPE_Q3_K] = gemm_q3_K, [PK_TYPE_Q4_K] = gemm_q4_K,
    [PK_TYPE_Q5_K] = gemm_q5_K, [PK_TYPE_Q6_K] = gemm_q6_K, [PK_TYPE_IQ4_XS] = gemm_iq4_xs,
    [PK_TYPE_Q8_0] = gemm_q8_0, [PK_TYPE_Q4_0] = gemm_q4_0, [PK_TYPE_Q4_1] = gemm_q4_1,
    [PK_TYPE_Q5_0] = gemm_q5_0, [PK_TYPE_Q5_1] = gemm_q5_1, [PK_TYPE_IQ4_NL] = gemm_iq4_nl,
    [PK_TYPE_MXFP4] = gemm_mxfp4, [PK_TYPE_IQ2_XXS] = gemm_iq2_xxs, [PK_TYPE_IQ2_XS] = gemm_iq2_xs,
    [PK_TYPE_IQ1_S] = gemm_iq1_s, [PK_TYPE_IQ1_M] = gemm_iq1_m,
}};

#else
const pk_kernels pk_kernels_i8mm_gemm = {0};
#endif
