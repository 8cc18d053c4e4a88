/* kernels/x86/avx2_gemv.h - the AVX2 decode kernels (vec_dot and gemv) for the
 * block-quantized weight types: Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4 x Q8_0; Q4_1,
 * Q5_1 x Q8_1; Q2_K..Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M, IQ3_XXS,
 * IQ3_S, IQ2_S x Q8_K. Not a translation unit: included by kernels/x86/avx2.c
 * inside its ISA guard (after <immintrin.h>, hsum8 and kernels/x86/iq_lattice.h).
 *
 * Structure: ONE driver (gv_gemv / gv_vec_dot below: the 4-row gemv loop
 * with the software prefetch of the next rows, the shared activation view, the fold
 * of the 4 rows' fp16 scales, and the 1-row vec_dot used for the row tail)
 * is specialised per type (a constant GV_*: always-inline functions whose
 * tests on it fold away, one entry function per type) with two per-type
 * pieces:
 *   - an activation view gv_x_*: what every row needs from one activation
 *     block, computed once per block for all 4 rows (its scale, the offset
 *     correction -off * pair sums for types with a level offset, bsums);
 *   - a block kernel gk_*: one weight block of one row against the view,
 *     returning 8 int32 lanes whose sum is sum(scale_sub * level * x) over
 *     the block, and for the K-quants with mins, 4 int32 lanes whose sum is
 *     sum(min_sub * bsum_sub).
 * The driver multiplies per block by d_w * d_x (the 4 rows' lanes summed
 * in int32 to [S0 S1 S2 S3] per 128-bit half, then one conversion and one
 * FMA for the 4 rows per block; times gv_isc, the factor of a type whose
 * isum is a multiple of the sum),
 * subtracts dmin_w * d_x * mins, or adds m_w * s_x (Q4_1, Q5_1); d_w is the
 * block's fp16 d (IQ1_M: assembled from its scales' top nibbles), or for
 * MXFP4 its E8M0 exponent's 2^(e - 128) (gv_s1, gv_s4).
 *
 * Tuned for: single-token decode on AVX2-only cores (Zen 2/3, Intel client
 * parts, small VMs), where each gemv streams its matrix from DRAM once. Per
 * block of 4 rows the activation view is built once; the 4 rows' fp16 scales
 * (and mins) are converted in one vcvtph2ps; sub-block scales are applied
 * in int32 with vpmaddwd against a scale vector made by one vpshufb from the
 * block's decoded scales (no float work per sub-block, no horizontal sums
 * per block); rows at least 4 KB ahead (the next 4-row group, or several
 * when rows are short) are prefetched while the current ones are computed
 * (rows are a few KB or less: the hardware prefetcher alone ramps up too
 * late on each of the 4 short streams; without the software prefetch a
 * core streams Q2_K markedly slower, and prefetching only the next group
 * of 512-column rows is slower too: bench/README.md).
 *
 * Numerics: within a block everything is exact int32. Unsigned levels x
 * int8 activations by vpmaddubsw (int16 pair sums); level offsets (Q4_0 -8,
 * Q5_0 -16, Q3_K -4, Q6_K -32, MXFP4 -12 on its levels + 12) are applied by adding -off * (pair sums of
 * x) to those int16 pair sums, which gives the exact pair sums of (level -
 * off) * x in the same lanes (no large cancelling terms in other lanes).
 * Signed levels (Q8_0, IQ4_NL, IQ4_XS; the signs of IQ2_XXS / IQ2_XS and the
 * lattice i-quants, whose grid magnitudes are the unsigned operand) move their
 * sign onto the activation, which needs activations in [-127, 127] (every Q8
 * quantizer's range).
 * Bounds: |int16 pair sum| <= 2 * 63 * 127 + 2 * 32 * 127 (Q6_K) or
 * 2 * 128 * 127 (Q8_0) < 2^15; int32 lanes < 2^24, and a row's half-block
 * sum of 4 lanes < 2^26 (rounded once when converted to float, as the
 * reference converts its block's int sum). Only the float accumulation
 * across blocks differs from the reference (order, FMA, one product d_w *
 * d_x per block as the reference, 2 halves).
 */

#define GV_INLINE static inline __attribute__((always_inline))
#include "kernels/x86/iq2_ops.h"
#include "kernels/x86/avx2_iq1.h"

/* ---- vocabulary -------------------------------------------------------------- */

GV_INLINE __m256i gv_ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* 16 bytes at p in both 128-bit lanes (a load-only uop) */
GV_INLINE __m256i gv_ld16x2(const void *p) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p));
}
GV_INLINE uint32_t gv_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
GV_INLINE uint16_t gv_u16(const void *p) { uint16_t v; memcpy(&v, p, 2); return v; }
/* the 32 nibbles of a legacy block in element order (low nibbles 0..15,
 * high nibbles 16..31) */
GV_INLINE __m256i gv_nib32(const uint8_t *qs) {
    return _mm256_and_si256(_mm256_srlv_epi64(gv_ld16x2(qs), _mm256_setr_epi64x(0, 0, 4, 4)),
                            _mm256_set1_epi8(0x0F));
}
/* isum + v, kept in this order: without the empty asm gcc -O3 reassociates
 * the block's chain of adds into one tree at the end and spills the
 * products to the stack (more instructions per block) */
GV_INLINE __m256i gv_acc(__m256i isum, __m256i v) {
    isum = _mm256_add_epi32(isum, v);
    __asm__("" : "+x"(isum));
    return isum;
}
/* 8 int32 lanes: sums of pairs of int16 */
GV_INLINE __m256i gv_sum16(__m256i p) { return _mm256_madd_epi16(p, _mm256_set1_epi16(1)); }
/* int16 pair sums of w[i] * x[i], both signed, x != -128 */
GV_INLINE __m256i gv_mul_ss(__m256i w, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}
/* vpshufb controls, from static tables (as constants gcc rebuilt them with
 * 4 instructions each at every 4-row group; with the single accumulator
 * below, rows of 512 columns are faster: bench/README.md, "Decode: the
 * K-quant gemvs' 4 rows share one accumulator"): gv_b16(j): every int16
 * lane = int16 j of its 128-bit lane; gv_p16(k): the low lane int16 2k, the
 * high lane int16 2k + 1; gv_p8(c): the low lane byte 2c, the high lane
 * byte 2c + 1, zero-extended to int16 */
#define GV_R8(v) v, v, v, v, v, v, v, v
#define GV_W(j) (uint16_t)((2 * (j) + 1) << 8 | 2 * (j))
#define GV_Z(j) (uint16_t)(0x8000 | (j))
static const uint16_t gv_b16_tab[8][16] __attribute__((aligned(32))) = {
    {GV_R8(GV_W(0)), GV_R8(GV_W(0))}, {GV_R8(GV_W(1)), GV_R8(GV_W(1))},
    {GV_R8(GV_W(2)), GV_R8(GV_W(2))}, {GV_R8(GV_W(3)), GV_R8(GV_W(3))},
    {GV_R8(GV_W(4)), GV_R8(GV_W(4))}, {GV_R8(GV_W(5)), GV_R8(GV_W(5))},
    {GV_R8(GV_W(6)), GV_R8(GV_W(6))}, {GV_R8(GV_W(7)), GV_R8(GV_W(7))}};
static const uint16_t gv_p16_tab[4][16] __attribute__((aligned(32))) = {
    {GV_R8(GV_W(0)), GV_R8(GV_W(1))}, {GV_R8(GV_W(2)), GV_R8(GV_W(3))},
    {GV_R8(GV_W(4)), GV_R8(GV_W(5))}, {GV_R8(GV_W(6)), GV_R8(GV_W(7))}};
static const uint16_t gv_p8_tab[8][16] __attribute__((aligned(32))) = {
    {GV_R8(GV_Z(0)), GV_R8(GV_Z(1))}, {GV_R8(GV_Z(2)), GV_R8(GV_Z(3))},
    {GV_R8(GV_Z(4)), GV_R8(GV_Z(5))}, {GV_R8(GV_Z(6)), GV_R8(GV_Z(7))},
    {GV_R8(GV_Z(8)), GV_R8(GV_Z(9))}, {GV_R8(GV_Z(10)), GV_R8(GV_Z(11))},
    {GV_R8(GV_Z(12)), GV_R8(GV_Z(13))}, {GV_R8(GV_Z(14)), GV_R8(GV_Z(15))}};
#undef GV_R8
#undef GV_W
#undef GV_Z
GV_INLINE __m256i gv_b16(int j) { return _mm256_load_si256((const __m256i *)gv_b16_tab[j]); }
GV_INLINE __m256i gv_p16(int k) { return _mm256_load_si256((const __m256i *)gv_p16_tab[k]); }
GV_INLINE __m256i gv_p8(int c) { return _mm256_load_si256((const __m256i *)gv_p8_tab[c]); }
/* the fp16 after *d (dmin / m in the types that have one) */
GV_INLINE float gv_f16_next(const uint16_t *d) { return _cvtsh_ss(gv_u16((const char *)d + 2)); }

/* ---- activation views ---------------------------------------------------------- */

typedef struct {
    const int8_t *q;     /* the block's int8 values */
    __m256i nx[8];       /* -off * (pair sums of q[32c .. 32c + 31]), int16 */
    __m256i bs;          /* Q8_K bsums (Q2_K) */
    __m128i bp;          /* Q8_K bsums summed in pairs: 8 sums of 32, int16 (Q4_K, Q5_K) */
    const void *grid;    /* the type's grid (IQ1_S, IQ1_M, the lattice i-quants); IQ1: */
    __m256i xp[8];       /* the activations in their order, */
    __m256i gs[2];       /* the group sums (IQ1_S: the bsums; IQ1_M: sums of 8) */
    float d, s;          /* scale; Q8_1: s */
} gv_x;

GV_INLINE void gv_offset(gv_x *a, int nc, int off) {
    for (int c = 0; c < nc; c++)
        a->nx[c] = _mm256_sub_epi16(_mm256_setzero_si256(),
                                    _mm256_maddubs_epi16(_mm256_set1_epi8((char)off), gv_ld(a->q + 32 * c)));
}
GV_INLINE void gv_x_q8_0(const pk_block_q8_0 *x, gv_x *a) { a->q = x->qs; a->d = _cvtsh_ss(x->d); }
GV_INLINE void gv_x_q8_0_o8(const pk_block_q8_0 *x, gv_x *a) { gv_x_q8_0(x, a); gv_offset(a, 1, 8); }
GV_INLINE void gv_x_q8_0_o16(const pk_block_q8_0 *x, gv_x *a) { gv_x_q8_0(x, a); gv_offset(a, 1, 16); }
GV_INLINE void gv_x_q8_0_o12(const pk_block_q8_0 *x, gv_x *a) { gv_x_q8_0(x, a); gv_offset(a, 1, 12); }
GV_INLINE void gv_x_q8_1(const pk_block_q8_1 *x, gv_x *a) {
    a->q = x->qs; a->d = _cvtsh_ss(x->d); a->s = _cvtsh_ss(x->s);
}
GV_INLINE void gv_x_q8_K(const pk_block_q8_K *x, gv_x *a) { a->q = x->qs; a->d = x->d; }
GV_INLINE void gv_x_q8_K_bs(const pk_block_q8_K *x, gv_x *a) { gv_x_q8_K(x, a); a->bs = gv_ld(x->bsums); }
GV_INLINE void gv_x_q8_K_bp(const pk_block_q8_K *x, gv_x *a) {
    gv_x_q8_K(x, a);
    __m256i p = gv_sum16(gv_ld(x->bsums));      /* |.| <= 32 * 127: no saturation */
    a->bp = _mm_packs_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
}
GV_INLINE void gv_x_q8_K_o4(const pk_block_q8_K *x, gv_x *a) { gv_x_q8_K(x, a); gv_offset(a, 8, 4); }
GV_INLINE void gv_x_q8_K_o32(const pk_block_q8_K *x, gv_x *a) { gv_x_q8_K(x, a); gv_offset(a, 8, 32); }
GV_INLINE void gv_x_iq1_s(const pk_block_q8_K *x, gv_x *a) {
    gv_x_q8_K(x, a);
    iq1_xorder(x->qs, a->xp);
    a->gs[0] = gv_ld(x->bsums);
}
GV_INLINE void gv_x_iq1_m(const pk_block_q8_K *x, gv_x *a) {
    gv_x_q8_K(x, a);
    iq1_xorder(x->qs, a->xp);
    iq1_sums8(x->qs, a->gs);
}

/* ---- block kernels: 32-element blocks ---------------------------------------------- */

GV_INLINE __m256i gk_q8_0(const pk_block_q8_0 *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    return gv_sum16(gv_mul_ss(gv_ld(w->qs), gv_ld(a->q)));
}
GV_INLINE __m256i gk_q4_0(const pk_block_q4_0 *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    return gv_sum16(_mm256_add_epi16(_mm256_maddubs_epi16(gv_nib32(w->qs), gv_ld(a->q)), a->nx[0]));
}
GV_INLINE __m256i gk_q4_1(const pk_block_q4_1 *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    return gv_sum16(_mm256_maddubs_epi16(gv_nib32(w->qs), gv_ld(a->q)));
}
/* the fifth bits of a Q5 block as 0x10 in byte j for bit j of qh */
GV_INLINE __m256i gv_bit5(const uint8_t *qh) {
    return _mm256_and_si256(iql_bits32(gv_u32(qh)), _mm256_set1_epi8(0x10));
}
GV_INLINE __m256i gk_q5_0(const pk_block_q5_0 *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    __m256i u = _mm256_or_si256(gv_nib32(w->qs), gv_bit5(w->qh));
    return gv_sum16(_mm256_add_epi16(_mm256_maddubs_epi16(u, gv_ld(a->q)), a->nx[0]));
}
GV_INLINE __m256i gk_q5_1(const pk_block_q5_1 *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    __m256i u = _mm256_or_si256(gv_nib32(w->qs), gv_bit5(w->qh));
    return gv_sum16(_mm256_maddubs_epi16(u, gv_ld(a->q)));
}
GV_INLINE __m256i gv_iq4_tab(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pk_iq4nl_values));
}
GV_INLINE __m256i gk_iq4_nl(const pk_block_iq4_nl *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    __m256i lv = _mm256_shuffle_epi8(gv_iq4_tab(), gv_nib32(w->qs));
    return gv_sum16(gv_mul_ss(lv, gv_ld(a->q)));
}
/* MXFP4: the levels + 12 (unsigned, <= 24) by vpshufb, the -12 from the view */
GV_INLINE __m256i gk_mxfp4(const pk_block_mxfp4 *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    const __m256i tab = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                         12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
    __m256i u = _mm256_shuffle_epi8(tab, gv_nib32(w->qs));
    return gv_sum16(_mm256_add_epi16(_mm256_maddubs_epi16(u, gv_ld(a->q)), a->nx[0]));
}

/* ---- block kernels: K-quant super-blocks ---------------------------------------------- */

/* Q2_K: chunk c = 4h + k (bits 2k..2k+1 of qs[32h .. 32h + 31]) holds
 * elements 32c .. 32c + 31: sub-block 2c in the low lane, 2c + 1 high.
 * One shift per 32 bytes of levels: chunks k = 0, 2 are (q >> 2k) & 3, the
 * levels; chunks k = 1, 3 are (q >> 2(k - 1)) & 12, four times the levels
 * (pair sums <= 2 * 12 * 127). The first are multiplied by 4 * scale, the
 * second by the scale, so isum is exactly 4x the block's sum (|.| <= 4 *
 * 256 * 3 * 15 * 127 < 2^23: its float conversion is exact) and the driver
 * scales it by 1/4 (gv_isc). */
GV_INLINE __m256i gk_q2_K(const pk_block_q2_K *w, const gv_x *a, __m256i *ms) {
    const __m256i m3 = _mm256_set1_epi8(3), m12 = _mm256_set1_epi8(12), m4 = _mm256_set1_epi8(0x0F);
    __m256i s8 = gv_ld16x2(w->scales);
    __m256i sc = _mm256_and_si256(s8, m4);                          /* byte scales, both lanes */
    __m256i sc4 = _mm256_slli_epi16(sc, 2);                         /* 4 * scale <= 60 per byte */
    __m256i mn = _mm256_srli_epi16(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(s8)), 4);
    *ms = _mm256_madd_epi16(mn, a->bs);                             /* 8 lanes (KIND 3) */
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q0 = gv_ld(w->qs + 32 * h), q4 = _mm256_srli_epi16(q0, 4);
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;
            __m256i u = _mm256_and_si256(k < 2 ? q0 : q4, k & 1 ? m12 : m3);
            __m256i p = _mm256_maddubs_epi16(u, gv_ld(a->q + 32 * c));
            isum = gv_acc(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(k & 1 ? sc : sc4,
                                                                  gv_p8(c))));
        }
    }
    return isum;
}

/* shift each 16-bit lane left by s (s < 0: right by -s); s is a constant */
GV_INLINE __m256i gv_shl(__m256i v, int s) {
    return s >= 0 ? _mm256_slli_epi16(v, s) : _mm256_srli_epi16(v, -s);
}

/* Q3_K: levels as Q2_K plus the third bit (bit c of hmask[l] for chunk c),
 * level + 4 in [0, 7]; 16 signed 6-bit scales */
GV_INLINE __m256i gk_q3_K(const pk_block_q3_K *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    const __m256i m3 = _mm256_set1_epi8(3), b4 = _mm256_set1_epi8(4);
    uint32_t a0 = gv_u32(w->scales), a1 = gv_u32(w->scales + 4), a2 = gv_u32(w->scales + 8);
    __m128i s8 = _mm_setr_epi32((int)((a0 & 0x0f0f0f0fu) | (a2 & 0x03030303u) << 4),
                                (int)((a1 & 0x0f0f0f0fu) | ((a2 >> 2) & 0x03030303u) << 4),
                                (int)(((a0 >> 4) & 0x0f0f0f0fu) | ((a2 >> 4) & 0x03030303u) << 4),
                                (int)(((a1 >> 4) & 0x0f0f0f0fu) | ((a2 >> 6) & 0x03030303u) << 4));
    __m256i s16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(s8, _mm_set1_epi8(32)));
    __m256i slo = _mm256_permute4x64_epi64(s16, 0x44), shi = _mm256_permute4x64_epi64(s16, 0xEE);
    __m256i hm = gv_ld(w->hmask);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q = gv_ld(w->qs + 32 * h);
        __m256i sv = h ? shi : slo;
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;
            __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3),
                                        _mm256_and_si256(gv_shl(hm, 2 - c), b4));
            __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(u, gv_ld(a->q + 32 * c)), a->nx[c]);
            isum = gv_acc(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sv, gv_p16(k))));
        }
    }
    return isum;
}

/* Q4_K / Q5_K scales and mins: bytes [sc0..sc7, m0..m7] (as
 * pk_get_scales_mins_k4), from the 12 scale bytes by 32-bit lanes (the
 * 16-byte load reads 4 bytes of the block's levels, unused) */
GV_INLINE __m128i gv_k4_scales(const uint8_t *s) {
    __m128i v = _mm_loadu_si128((const __m128i *)s);
    __m128i t = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
    t = _mm_and_si128(t, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    __m128i hb = _mm_srli_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0)), 2);
    return _mm_or_si128(t, _mm_and_si128(hb, _mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
}

/* Q4_K (Q5 0) and Q5_K (Q5 1): chunk j: lo = sub-block 2j, hi = 2j + 1;
 * Q5_K's fifth bit 2j (lo) / 2j + 1 (hi) of qh[l], moved to bit 4 */
GV_INLINE __m256i gv_k4(const int Q5, const uint8_t *scales, const uint8_t *qs, const uint8_t *qhp, const gv_x *a,
                        __m128i *ms) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const __m256i qh = Q5 ? gv_ld(qhp) : _mm256_setzero_si256();
    __m128i scm = gv_k4_scales(scales);
    __m256i sv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));
    *ms = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(scm, 8)), a->bp);
    __m256i isum = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i q = gv_ld(qs + 32 * j);
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (Q5) {
            lo = _mm256_or_si256(lo, _mm256_and_si256(gv_shl(qh, 4 - 2 * j), b4));
            hi = _mm256_or_si256(hi, _mm256_and_si256(gv_shl(qh, 3 - 2 * j), b4));
        }
        __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, gv_ld(a->q + 64 * j)),
                                       _mm256_shuffle_epi8(sv, gv_b16(2 * j)));
        __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, gv_ld(a->q + 64 * j + 32)),
                                       _mm256_shuffle_epi8(sv, gv_b16(2 * j + 1)));
        isum = gv_acc(isum, _mm256_add_epi32(p0, p1));
    }
    return isum;
}

GV_INLINE __m256i gk_q4_K(const pk_block_q4_K *w, const gv_x *a, __m128i *ms) {
    return gv_k4(0, w->scales, w->qs, NULL, a, ms);
}
GV_INLINE __m256i gk_q5_K(const pk_block_q5_K *w, const gv_x *a, __m128i *ms) {
    return gv_k4(1, w->scales, w->qs, w->qh, a, ms);
}

/* Q6_K: chunk c = 4h + k: low nibble of ql[64h + 32(k & 1) + l] (k < 2) or
 * its high nibble, bits 2k..2k+1 of qh[32h + l] on top; sub-blocks 2c (low
 * lane), 2c + 1 (high lane) */
GV_INLINE __m256i gk_q6_K(const pk_block_q6_K *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
    __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    __m256i slo = _mm256_permute4x64_epi64(s16, 0x44), shi = _mm256_permute4x64_epi64(s16, 0xEE);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i l0 = gv_ld(w->ql + 64 * h), l1 = gv_ld(w->ql + 64 * h + 32);
        __m256i qh = gv_ld(w->qh + 32 * h);
        __m256i sv = h ? shi : slo;
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;
            __m256i l = k & 1 ? l1 : l0;
            __m256i u = _mm256_or_si256(_mm256_and_si256(k < 2 ? l : _mm256_srli_epi16(l, 4), m4),
                                        _mm256_and_si256(gv_shl(qh, 4 - 2 * k), m30));
            __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(u, gv_ld(a->q + 32 * c)), a->nx[c]);
            isum = gv_acc(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sv, gv_p16(k))));
        }
    }
    return isum;
}

/* IQ4_XS: sub-block s (32 elements, IQ4_NL nibble order in qs[16s ..]),
 * scale ls[s] - 32 */
GV_INLINE __m256i gk_iq4_xs(const pk_block_iq4_xs *w, const gv_x *a, __m128i *ms) {
    (void)ms;
    const __m256i tab = gv_iq4_tab();
    uint32_t sl = gv_u32(w->scales_l);
    __m128i l4 = _mm_cvtsi32_si128((int)sl);
    __m128i lo = _mm_unpacklo_epi8(_mm_and_si128(l4, _mm_set1_epi8(0x0F)),
                                   _mm_and_si128(_mm_srli_epi16(l4, 4), _mm_set1_epi8(0x0F)));
    __m256i hb = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(w->scales_h),
                                                    _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                  _mm256_set1_epi32(3));
    __m256i ls = _mm256_sub_epi32(_mm256_or_si256(_mm256_cvtepu8_epi32(lo), _mm256_slli_epi32(hb, 4)),
                                  _mm256_set1_epi32(32));
    __m256i sv = _mm256_broadcastsi128_si256(
        _mm_packs_epi32(_mm256_castsi256_si128(ls), _mm256_extracti128_si256(ls, 1)));
    __m256i isum = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        __m256i lv = _mm256_shuffle_epi8(tab, gv_nib32(w->qs + 16 * s));
        __m256i p = gv_mul_ss(lv, gv_ld(a->q + 32 * s));
        isum = gv_acc(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sv, gv_b16(s))));
    }
    return isum;
}

/* IQ2_XXS (XS 0) / IQ2_XS (XS 1): per sub-block (kernels/x86/iq2_ops.h) the
 * grid magnitudes times the activations with their signs (vpsignb), pair
 * sums <= 2 * 43 * 127, then vpmaddwd with the scales 2 ls + 1: isum is 8x
 * the block's sum (the driver's gv_isc); lanes <= 8 * 2 * 10922 * 31 < 2^23. */
GV_INLINE __m256i gk_iq2(const int XS, const uint8_t *w, const gv_x *a) {
    const __m256i halves = XS ? iq2_xs_halves(w) : _mm256_setzero_si256();
    __m256i isum = _mm256_setzero_si256();
#pragma GCC unroll 8   /* s a constant in iq2_sub / iq2_scale */
    for (int s = 0; s < 8; s++) {
        __m256i pts, sgn;
        iq2_sub(XS, w, s, &pts, &sgn);
        __m256i p = _mm256_maddubs_epi16(pts, _mm256_sign_epi8(gv_ld(a->q + 32 * s), sgn));
        isum = gv_acc(isum, _mm256_madd_epi16(p, iq2_scale(XS, w, s, halves)));
    }
    return isum;
}

/* ---- block kernels: the lattice i-quants ----------------------------------------------------
 * (kernels/x86/iq_lattice.h) A sub-block's 32 grid coordinates times its
 * activations with the weights' signs moved onto them (vpsignb), so
 * vpmaddubsw's pair sums are <= 2 * 62 * 127 < 2^15; the odd scales
 * 2 ls + 1 of its halves by vpmaddwd (iql_sub_scale). The driver's gv_isc
 * is iql_factor. */
GV_INLINE __m256i gk_lattice(const int L, const void *w, const gv_x *a) {
    __m256i slo, shi;
    iql_odd_scales(L, w, &slo, &shi);
    __m256i isum = _mm256_setzero_si256();
    iql_idx ix;
    iql_index(L, w, &ix);
#pragma GCC unroll 8
    for (int sb = 0; sb < 8; sb++) {
        __m256i p = _mm256_maddubs_epi16(iql_levels(L, w, sb, a->grid, &ix),
                                         _mm256_sign_epi8(gv_ld(a->q + 32 * sb), iql_signs(L, w, sb)));
        isum = gv_acc(isum, _mm256_madd_epi16(p, iql_sub_scale(slo, shi, sb)));
    }
    return isum;
}

/* ---- the driver: vec_dot and 4-row gemv, written once -------------------------------- */

/* the weight types, each a constant that specialises the driver */
enum { GV_Q8_0, GV_Q4_0, GV_Q4_1, GV_Q5_0, GV_Q5_1, GV_IQ4_NL, GV_MXFP4, GV_Q2_K, GV_Q3_K, GV_Q4_K, GV_Q5_K,
       GV_Q6_K, GV_IQ4_XS, GV_IQ2_XXS, GV_IQ2_XS, GV_IQ1_S, GV_IQ1_M, GV_IQ3_XXS, GV_IQ3_S, GV_IQ2_S };

GV_INLINE int gv_kquant(const int T) { return T >= GV_Q2_K; }   /* Q8_K activations, 256-element blocks */
/* bytes of a weight block, of an activation block; elements of a block */
GV_INLINE size_t gv_wsize(const int T) {
    switch (T) {
    case GV_Q8_0: return sizeof(pk_block_q8_0);
    case GV_Q4_0: return sizeof(pk_block_q4_0);
    case GV_Q4_1: return sizeof(pk_block_q4_1);
    case GV_Q5_0: return sizeof(pk_block_q5_0);
    case GV_Q5_1: return sizeof(pk_block_q5_1);
    case GV_IQ4_NL: return sizeof(pk_block_iq4_nl);
    case GV_MXFP4: return sizeof(pk_block_mxfp4);
    case GV_Q2_K: return sizeof(pk_block_q2_K);
    case GV_Q3_K: return sizeof(pk_block_q3_K);
    case GV_Q4_K: return sizeof(pk_block_q4_K);
    case GV_Q5_K: return sizeof(pk_block_q5_K);
    case GV_Q6_K: return sizeof(pk_block_q6_K);
    case GV_IQ2_XXS: return sizeof(pk_block_iq2_xxs);
    case GV_IQ2_XS: return sizeof(pk_block_iq2_xs);
    case GV_IQ1_S: return sizeof(pk_block_iq1_s);
    case GV_IQ1_M: return sizeof(pk_block_iq1_m);
    case GV_IQ3_XXS: return sizeof(pk_block_iq3_xxs);
    case GV_IQ3_S: return sizeof(pk_block_iq3_s);
    case GV_IQ2_S: return sizeof(pk_block_iq2_s);
    default: return sizeof(pk_block_iq4_xs);
    }
}
GV_INLINE size_t gv_xsize(const int T) {
    return gv_kquant(T) ? sizeof(pk_block_q8_K) : T == GV_Q4_1 || T == GV_Q5_1 ? sizeof(pk_block_q8_1)
                                                                               : sizeof(pk_block_q8_0);
}
GV_INLINE int64_t gv_qk(const int T) { return gv_kquant(T) ? PK_QK_K : 32; }
/* the offset of the block's fp16 d (MXFP4: 0, its E8M0 byte; see gv_da) */
GV_INLINE size_t gv_doff(const int T) {
    switch (T) {
    case GV_Q8_0: return offsetof(pk_block_q8_0, d);
    case GV_Q4_0: return offsetof(pk_block_q4_0, d);
    case GV_Q4_1: return offsetof(pk_block_q4_1, d);
    case GV_Q5_0: return offsetof(pk_block_q5_0, d);
    case GV_Q5_1: return offsetof(pk_block_q5_1, d);
    case GV_IQ4_NL: return offsetof(pk_block_iq4_nl, d);
    case GV_Q2_K: return offsetof(pk_block_q2_K, d);
    case GV_Q3_K: return offsetof(pk_block_q3_K, d);
    case GV_Q4_K: return offsetof(pk_block_q4_K, d);
    case GV_Q5_K: return offsetof(pk_block_q5_K, d);
    case GV_Q6_K: return offsetof(pk_block_q6_K, d);
    case GV_IQ4_XS: return offsetof(pk_block_iq4_xs, d);
    case GV_IQ2_XXS: return offsetof(pk_block_iq2_xxs, d);
    case GV_IQ2_XS: return offsetof(pk_block_iq2_xs, d);
    case GV_IQ1_S: return offsetof(pk_block_iq1_s, d);
    case GV_IQ3_XXS: return offsetof(pk_block_iq3_xxs, d);
    case GV_IQ3_S: return offsetof(pk_block_iq3_s, d);
    case GV_IQ2_S: return offsetof(pk_block_iq2_s, d);
    default: return 0;
    }
}

/* KIND 0: sum = d_w d_x isum; 1 (K-quant mins): - dmin_w d_x mins, the
 * block kernel's mins in the low 4 int32 lanes of m4; 3: the same with
 * the mins in 8 lanes (m8; Q2_K: its 16 mins x bsums by one vpmaddwd);
 * 2 (Q8_1 offset): + m_w s_x. gv_isc: the factor of a type whose isum is a
 * multiple of the sum. The d_w of MXFP4 is its E8M0 exponent's
 * 2^(e - 128), of every other type the fp16 d (only KIND 0 has E8M0).
 * With KIND 3 the gemv sums the 4 rows' 8-lane mins by 3 vphaddd across
 * rows (integer sums, so the same per-block totals as 4-lane sums: the
 * results are bitwise those of KIND 1; fewer uops per 4 rows). */
GV_INLINE int gv_kind(const int T) {
    return T == GV_Q4_1 || T == GV_Q5_1 ? 2 : T == GV_Q2_K ? 3 : T == GV_Q4_K || T == GV_Q5_K ? 1 : 0;
}
GV_INLINE int gv_has_mins(const int K) { return K == 1 || K == 3; }
GV_INLINE int gv_iq1(const int T) { return T == GV_IQ1_S || T == GV_IQ1_M; }
/* a lattice i-quant's IQL_* (kernels/x86/iq_lattice.h), -1 for the other types */
GV_INLINE int gv_lattice(const int T) {
    return T == GV_IQ3_XXS ? IQL_IQ3_XXS : T == GV_IQ3_S ? IQL_IQ3_S : T == GV_IQ2_S ? IQL_IQ2_S : -1;
}
GV_INLINE float gv_isc(const int T) {
    return T == GV_Q2_K ? 0.25f : T == GV_IQ2_XXS || T == GV_IQ2_XS || gv_iq1(T) ? 0.125f
         : gv_lattice(T) >= 0 ? iql_factor(gv_lattice(T)) : 1.0f;
}
/* the grid of IQ1_S / IQ1_M or a lattice i-quant (NULL for the other
 * types), fetched once per call and handed to the block kernels in the view */
GV_INLINE const void *gv_grid(const int T) {
    return gv_iq1(T) ? (const void *)pk_iq1s_grid() : gv_lattice(T) >= 0 ? iql_grid(gv_lattice(T)) : NULL;
}

/* a block kernel's mins: m4 (KIND 1), m8 (KIND 3) */
typedef struct { __m128i m4; __m256i m8; } gv_mins;
/* their 4-lane sum, and the 4 rows' totals [m0 m1 m2 m3], by KIND */
GV_INLINE __m128i gv_ms4(const int K, const gv_mins *m) {
    return K == 3 ? _mm_add_epi32(_mm256_castsi256_si128(m->m8), _mm256_extracti128_si256(m->m8, 1)) : m->m4;
}
GV_INLINE __m128i gv_hadd4(const int K, const gv_mins *m0, const gv_mins *m1, const gv_mins *m2,
                           const gv_mins *m3) {
    if (K == 3) {
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(m0->m8, m1->m8), _mm256_hadd_epi32(m2->m8, m3->m8));
        return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    }
    return _mm_hadd_epi32(_mm_hadd_epi32(m0->m4, m1->m4), _mm_hadd_epi32(m2->m4, m3->m4));
}

/* IQ1_S, IQ1_M: kernels/x86/avx2_iq1.h; the sum is 8 times the block's
 * (gv_isc). A row's block is decoded (gv_iq1_prep: its group indices stored)
 * before its sum is taken (gv_iq1_sum: the grid loads at the indices read
 * back); the 4-row gemv decodes its 4 rows' blocks first. */
GV_INLINE void gv_iq1_prep(const int T, const void *w, iq1_w *d) {
    if (T == GV_IQ1_S) iq1_s_prep(w, d);
    else iq1_m_prep(w, d);
}
GV_INLINE __m256i gv_iq1_sum(const int T, const iq1_w *d, const gv_x *a) {
    __m256i v[8];
    iq1_fetch(a->grid, d, v);
    return iq1_sum(T == GV_IQ1_M, v, d->S, d->C, a->xp, a->gs);
}
GV_INLINE __m256i gk_iq1(const int T, const void *w, const gv_x *a) {
    iq1_w d;
    gv_iq1_prep(T, w, &d);
    iq1_stored();
    return gv_iq1_sum(T, &d, a);
}

/* type T's activation view of the block at x */
GV_INLINE void gv_view(const int T, const void *x, gv_x *a) {
    switch (T) {
    case GV_Q4_0: gv_x_q8_0_o8(x, a); break;
    case GV_Q5_0: gv_x_q8_0_o16(x, a); break;
    case GV_MXFP4: gv_x_q8_0_o12(x, a); break;
    case GV_Q4_1: case GV_Q5_1: gv_x_q8_1(x, a); break;
    case GV_Q2_K: gv_x_q8_K_bs(x, a); break;
    case GV_Q3_K: gv_x_q8_K_o4(x, a); break;
    case GV_Q4_K: case GV_Q5_K: gv_x_q8_K_bp(x, a); break;
    case GV_Q6_K: gv_x_q8_K_o32(x, a); break;
    case GV_IQ4_XS: case GV_IQ2_XXS: case GV_IQ2_XS: case GV_IQ3_XXS: case GV_IQ3_S: case GV_IQ2_S:
        gv_x_q8_K(x, a);
        break;
    case GV_IQ1_S: gv_x_iq1_s(x, a); break;
    case GV_IQ1_M: gv_x_iq1_m(x, a); break;
    default: gv_x_q8_0(x, a); break;   /* Q8_0, IQ4_NL */
    }
}
/* type T's block kernel on the block at w */
GV_INLINE __m256i gv_block(const int T, const void *w, const gv_x *a, gv_mins *ms) {
    switch (T) {
    case GV_Q8_0: return gk_q8_0(w, a, &ms->m4);
    case GV_Q4_0: return gk_q4_0(w, a, &ms->m4);
    case GV_Q4_1: return gk_q4_1(w, a, &ms->m4);
    case GV_Q5_0: return gk_q5_0(w, a, &ms->m4);
    case GV_Q5_1: return gk_q5_1(w, a, &ms->m4);
    case GV_IQ4_NL: return gk_iq4_nl(w, a, &ms->m4);
    case GV_MXFP4: return gk_mxfp4(w, a, &ms->m4);
    case GV_Q2_K: return gk_q2_K(w, a, &ms->m8);
    case GV_Q3_K: return gk_q3_K(w, a, &ms->m4);
    case GV_Q4_K: return gk_q4_K(w, a, &ms->m4);
    case GV_Q5_K: return gk_q5_K(w, a, &ms->m4);
    case GV_Q6_K: return gk_q6_K(w, a, &ms->m4);
    case GV_IQ2_XXS: return gk_iq2(0, w, a);
    case GV_IQ2_XS: return gk_iq2(1, w, a);
    case GV_IQ1_S: case GV_IQ1_M: return gk_iq1(T, w, a);
    case GV_IQ3_XXS: case GV_IQ3_S: case GV_IQ2_S: return gk_lattice(gv_lattice(T), w, a);
    default: return gk_iq4_xs(w, a, &ms->m4);
    }
}

/* the address of the block's fp16 d, which KIND 1 and 2 read the second
 * fp16 after (never read for MXFP4, KIND 0) */
GV_INLINE const uint16_t *gv_da(const int T, const char *b) { return (const uint16_t *)(const void *)(b + gv_doff(T)); }
/* the fp16 d of a block (IQ1_M: from its scales) */
GV_INLINE uint16_t gv_d16(const int T, const char *b) {
    return T == GV_IQ1_M ? pk_iq1_m_d(((const pk_block_iq1_m *)(const void *)b)->scales) : gv_u16(gv_da(T, b));
}
/* The weight scale of one row's block: the fp16 d, or MXFP4's E8M0 e as
 * 2^(e - 128) */
GV_INLINE float gv_s1(const int T, const char *b) {
    return T == GV_MXFP4 ? pk_e8m0_half(((const pk_block_mxfp4 *)(const void *)b)->e) : _cvtsh_ss(gv_d16(T, b));
}
/* the weight scales of 4 rows' blocks as [d0 d1 d2 d3] (MXFP4: from the
 * 256-entry table, 4 loads, cheaper than computing them with the
 * subnormals of e = 0, 1) */
GV_INLINE __m128 gv_s4(const int T, const char *b0, const char *b1, const char *b2, const char *b3) {
    if (T == GV_MXFP4) {
        const pk_block_mxfp4 *m0 = (const void *)b0, *m1 = (const void *)b1, *m2 = (const void *)b2,
                             *m3 = (const void *)b3;
        return _mm_castsi128_ps(_mm_setr_epi32((int)pk_e8m0_half_bits[m0->e], (int)pk_e8m0_half_bits[m1->e],
                                               (int)pk_e8m0_half_bits[m2->e], (int)pk_e8m0_half_bits[m3->e]));
    }
    return _mm_cvtph_ps(_mm_cvtsi64_si128((long long)((uint64_t)gv_d16(T, b0) | (uint64_t)gv_d16(T, b1) << 16 |
                                                      (uint64_t)gv_d16(T, b2) << 32 | (uint64_t)gv_d16(T, b3) << 48)));
}
/* the fp16 d and the fp16 after it (dmin or m) of 4 rows' blocks: [d0, e0, d1, e1, ...] */
GV_INLINE __m256 gv_dd2(const int T, const char *b0, const char *b1, const char *b2, const char *b3) {
    return _mm256_cvtph_ps(_mm_setr_epi32((int)gv_u32(gv_da(T, b0)), (int)gv_u32(gv_da(T, b1)),
                                          (int)gv_u32(gv_da(T, b2)), (int)gv_u32(gv_da(T, b3))));
}

/* Software prefetch of the 4 rows gv_pf_groups(rb) groups ahead (the 4 * rb
 * bytes there, rows being contiguous in practice): block i of nb requests 4
 * blocks' worth, so the whole next group is in flight while this one is
 * computed. Prefetches never fault, so running past the end of the matrix
 * (a thread's chunk: the rows after it are the next chunk's) is harmless. */
#ifndef GV_PF_BYTES
#define GV_PF_BYTES 4096        /* how far ahead, at least */
#endif
#ifndef GV_PF_HINT
#define GV_PF_HINT _MM_HINT_T0
#endif
/* how many 4-row groups of rows of rb bytes ahead: at least one, and at
 * least GV_PF_BYTES (short rows, as an expert's down projection of 512 or
 * 768 columns, are a few hundred bytes: the next group alone is requested
 * too late to arrive from DRAM in time) */
GV_INLINE size_t gv_pf_groups(size_t rb) { return (GV_PF_BYTES + 4 * rb - 1) / (4 * rb); }
GV_INLINE void gv_prefetch(const char *base, int64_t i, size_t bs) {
    const char *p = base + (size_t)i * 4 * bs;
    for (size_t o = 0; o < 4 * bs; o += 64) _mm_prefetch(p + o, GV_PF_HINT);
}

/* A compiler-only barrier between the rows' block kernels: without it gcc
 * interleaves the 4 rows to share activation loads and spills the partial
 * sums (16 ymm registers are too few); the core overlaps the rows anyway. */
GV_INLINE void gv_fence(void) { __asm__ volatile("" ::: "memory"); }

/* the 4 rows' block sums, [S0 S1 S2 S3] in each 128-bit half (half of each
 * row's 8 lanes in each): exact in int32 (lanes < 2^24, 8 of them), so the 4
 * rows share one float conversion and one FMA per block and the gemv keeps
 * one accumulator (4 of them were spilled, then summed horizontally) */
GV_INLINE __m256i gv_sum4x8(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
    __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi32(s0, s1), _mm256_unpackhi_epi32(s0, s1));
    __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi32(s2, s3), _mm256_unpackhi_epi32(s2, s3));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(u0, u1), _mm256_unpackhi_epi64(u0, u1));
}

/* one row: s = w . x over n elements of type T */
GV_INLINE void gv_vec_dot(const int T, int64_t n, float *s, const void *vw, const void *vx) {
    const int K = gv_kind(T);
    const size_t ws = gv_wsize(T), xs = gv_xsize(T);
    const char *w = vw, *x = vx;
    int64_t nb = n / gv_qk(T);
    const void *grid = gv_grid(T);
    __m256 acc = _mm256_setzero_ps();
    __m128 am = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const char *b = w + (size_t)i * ws;
        gv_x a;
        gv_mins ms = {_mm_setzero_si128(), _mm256_setzero_si256()};
        gv_view(T, x + (size_t)i * xs, &a);
        a.grid = grid;
        __m256i is = gv_block(T, b, &a, &ms);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(gv_s1(T, b) * (gv_isc(T) * a.d)), acc);
        if (gv_has_mins(K))
            am = _mm_fmadd_ps(_mm_cvtepi32_ps(gv_ms4(K, &ms)), _mm_set1_ps(gv_f16_next(gv_da(T, b)) * a.d), am);
        if (K == 2) am = _mm_add_ss(am, _mm_set_ss(gv_f16_next(gv_da(T, b)) * a.s));
    }
    __m128 h = _mm_add_ps(am, _mm_movehl_ps(am, am));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    *s = hsum8(acc) + (gv_has_mins(K) ? -1.0f : 1.0f) * _mm_cvtss_f32(h);
}

/* 4 rows at a time of type T; the row tail by vd, T's vec_dot */
GV_INLINE void gv_gemv(const int T, pk_vec_dot_fn vd, int64_t n, int64_t nrows, float *y, const void *vw,
                       size_t rb, const void *vx) {
    const int K = gv_kind(T);
    const float isc = gv_isc(T);
    const size_t ws = gv_wsize(T), xs = gv_xsize(T);
    const char *x = vx;
    int64_t nb = n / gv_qk(T), r = 0;
    size_t pfg = gv_pf_groups(rb);
    const void *grid = gv_grid(T);
    for (; r + 4 <= nrows; r += 4) {
        const char *w0 = (const char *)vw + (size_t)r * rb, *w1 = w0 + rb, *w2 = w1 + rb, *w3 = w2 + rb;
        const char *nxt = w0 + 4 * pfg * rb;
        __m256 acc = _mm256_setzero_ps();
        __m128 am = _mm_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            const char *b0 = w0 + (size_t)i * ws, *b1 = w1 + (size_t)i * ws, *b2 = w2 + (size_t)i * ws,
                       *b3 = w3 + (size_t)i * ws;
            gv_x a;
            gv_mins m0 = {_mm_setzero_si128(), _mm256_setzero_si256()}, m1 = m0, m2 = m0, m3 = m0;
            gv_prefetch(nxt, i, ws);
            gv_view(T, x + (size_t)i * xs, &a);
            a.grid = grid;
            __m256i s0, s1, s2, s3;
            if (gv_iq1(T)) {
                iq1_w d[4];
                gv_iq1_prep(T, b0, &d[0]);
                gv_iq1_prep(T, b1, &d[1]);
                gv_iq1_prep(T, b2, &d[2]);
                gv_iq1_prep(T, b3, &d[3]);
                iq1_stored();
                s0 = gv_iq1_sum(T, &d[0], &a);
                gv_fence();
                s1 = gv_iq1_sum(T, &d[1], &a);
                gv_fence();
                s2 = gv_iq1_sum(T, &d[2], &a);
                gv_fence();
                s3 = gv_iq1_sum(T, &d[3], &a);
            } else {
                s0 = gv_block(T, b0, &a, &m0);
                gv_fence();
                s1 = gv_block(T, b1, &a, &m1);
                gv_fence();
                s2 = gv_block(T, b2, &a, &m2);
                gv_fence();
                s3 = gv_block(T, b3, &a, &m3);
            }
            __m256 fd;
            if (K) {
                __m256 f = _mm256_mul_ps(gv_dd2(T, b0, b1, b2, b3), K == 2 ?
                    _mm256_setr_ps(a.d, a.s, a.d, a.s, a.d, a.s, a.d, a.s) :
                    _mm256_setr_ps(isc * a.d, a.d, isc * a.d, a.d, isc * a.d, a.d, isc * a.d, a.d));
                fd = _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
                __m128 fm = _mm256_castps256_ps128(
                    _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7)));
                if (gv_has_mins(K))
                    am = _mm_fmadd_ps(_mm_cvtepi32_ps(gv_hadd4(K, &m0, &m1, &m2, &m3)), fm, am);
                else
                    am = _mm_add_ps(am, fm);
            } else {
                __m128 f = _mm_mul_ps(gv_s4(T, b0, b1, b2, b3), _mm_set1_ps(isc * a.d));
                fd = _mm256_set_m128(f, f);
            }
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(gv_sum4x8(s0, s1, s2, s3)), fd, acc);
        }
        __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        _mm_storeu_ps(y + r, gv_has_mins(K) ? _mm_sub_ps(r4, am) : _mm_add_ps(r4, am));
    }
    for (; r < nrows; r++)
        vd(n, &y[r], (const char *)vw + (size_t)r * rb, vx);
}

/* the entries of type T (gv_vec_dot_t, gv_gemv_t): one line per type */
#define GV_ENTRIES(t, T)                                                                                  \
static void gv_vec_dot_##t(int64_t n, float *s, const void *w, const void *x) { gv_vec_dot(T, n, s, w, x); } \
static void gv_gemv_##t(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) {    \
    gv_gemv(T, gv_vec_dot_##t, n, nrows, y, w, rb, x);                                                    \
}
GV_ENTRIES(q8_0, GV_Q8_0)
GV_ENTRIES(q4_0, GV_Q4_0)
GV_ENTRIES(q4_1, GV_Q4_1)
GV_ENTRIES(q5_0, GV_Q5_0)
GV_ENTRIES(q5_1, GV_Q5_1)
GV_ENTRIES(iq4_nl, GV_IQ4_NL)
GV_ENTRIES(mxfp4, GV_MXFP4)
GV_ENTRIES(q2_K, GV_Q2_K)
GV_ENTRIES(q3_K, GV_Q3_K)
GV_ENTRIES(q4_K, GV_Q4_K)
GV_ENTRIES(q5_K, GV_Q5_K)
GV_ENTRIES(q6_K, GV_Q6_K)
GV_ENTRIES(iq4_xs, GV_IQ4_XS)
GV_ENTRIES(iq2_xxs, GV_IQ2_XXS)
GV_ENTRIES(iq2_xs, GV_IQ2_XS)
GV_ENTRIES(iq1_s, GV_IQ1_S)
GV_ENTRIES(iq1_m, GV_IQ1_M)
GV_ENTRIES(iq3_xxs, GV_IQ3_XXS)
GV_ENTRIES(iq3_s, GV_IQ3_S)
GV_ENTRIES(iq2_s, GV_IQ2_S)
#undef GV_ENTRIES

#define GV_VEC_DOT_ENTRIES                                                              \
    [PK_TYPE_Q8_0] = gv_vec_dot_q8_0, [PK_TYPE_Q4_0] = gv_vec_dot_q4_0,                       \
    [PK_TYPE_Q4_1] = gv_vec_dot_q4_1, [PK_TYPE_Q5_0] = gv_vec_dot_q5_0,                       \
    [PK_TYPE_Q5_1] = gv_vec_dot_q5_1, [PK_TYPE_IQ4_NL] = gv_vec_dot_iq4_nl,                   \
    [PK_TYPE_MXFP4] = gv_vec_dot_mxfp4,                                                       \
    [PK_TYPE_Q2_K] = gv_vec_dot_q2_K, [PK_TYPE_Q3_K] = gv_vec_dot_q3_K,                       \
    [PK_TYPE_Q4_K] = gv_vec_dot_q4_K, [PK_TYPE_Q5_K] = gv_vec_dot_q5_K,                       \
    [PK_TYPE_Q6_K] = gv_vec_dot_q6_K, [PK_TYPE_IQ4_XS] = gv_vec_dot_iq4_xs,                   \
    [PK_TYPE_IQ2_XXS] = gv_vec_dot_iq2_xxs, [PK_TYPE_IQ2_XS] = gv_vec_dot_iq2_xs,             \
    [PK_TYPE_IQ1_S] = gv_vec_dot_iq1_s, [PK_TYPE_IQ1_M] = gv_vec_dot_iq1_m,                   \
    [PK_TYPE_IQ3_XXS] = gv_vec_dot_iq3_xxs, [PK_TYPE_IQ3_S] = gv_vec_dot_iq3_s,               \
    [PK_TYPE_IQ2_S] = gv_vec_dot_iq2_s,
#define GV_GEMV_ENTRIES                                                                 \
    [PK_TYPE_Q8_0] = gv_gemv_q8_0, [PK_TYPE_Q4_0] = gv_gemv_q4_0,                             \
    [PK_TYPE_Q4_1] = gv_gemv_q4_1, [PK_TYPE_Q5_0] = gv_gemv_q5_0,                             \
    [PK_TYPE_Q5_1] = gv_gemv_q5_1, [PK_TYPE_IQ4_NL] = gv_gemv_iq4_nl,                         \
    [PK_TYPE_MXFP4] = gv_gemv_mxfp4,                                                          \
    [PK_TYPE_Q2_K] = gv_gemv_q2_K, [PK_TYPE_Q3_K] = gv_gemv_q3_K,                             \
    [PK_TYPE_Q4_K] = gv_gemv_q4_K, [PK_TYPE_Q5_K] = gv_gemv_q5_K,                             \
    [PK_TYPE_Q6_K] = gv_gemv_q6_K, [PK_TYPE_IQ4_XS] = gv_gemv_iq4_xs,                         \
    [PK_TYPE_IQ2_XXS] = gv_gemv_iq2_xxs, [PK_TYPE_IQ2_XS] = gv_gemv_iq2_xs,                   \
    [PK_TYPE_IQ1_S] = gv_gemv_iq1_s, [PK_TYPE_IQ1_M] = gv_gemv_iq1_m,                         \
    [PK_TYPE_IQ3_XXS] = gv_gemv_iq3_xxs, [PK_TYPE_IQ3_S] = gv_gemv_iq3_s,                     \
    [PK_TYPE_IQ2_S] = gv_gemv_iq2_s,
