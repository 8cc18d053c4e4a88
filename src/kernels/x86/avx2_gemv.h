/* kernels/x86/avx2_gemv.h - the AVX2 decode kernels (vec_dot and gemv) for the
 * block-quantized weight types: Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4 x Q8_0; Q4_1,
 * Q5_1 x Q8_1; Q2_K..Q6_K, IQ4_XS x Q8_K. Not a translation unit: included by
 * kernels/x86/avx2.c inside its ISA guard (after <immintrin.h> and hsum8).
 *
 * Structure: ONE driver (GV_KERNELS below: the 4-row gemv loop with the
 * software prefetch of the next rows, the shared activation view, the fold
 * of the 4 rows' fp16 scales, and the 1-row vec_dot used for the row tail)
 * is instantiated per type with two per-type pieces:
 *   - an activation view gv_x_*: what every row needs from one activation
 *     block, computed once per block for all 4 rows (its scale, the offset
 *     correction -off * pair sums for types with a level offset, bsums);
 *   - a block kernel gk_*: one weight block of one row against the view,
 *     returning 8 int32 lanes whose sum is sum(scale_sub * level * x) over
 *     the block, and for the K-quants with mins, 4 int32 lanes whose sum is
 *     sum(min_sub * bsum_sub).
 * The driver multiplies per block by d_w * d_x (the 4 rows' lanes summed
 * in int32 to [S0 S1 S2 S3] per 128-bit half, then one conversion and one
 * FMA for the 4 rows per block; times ISC, the factor of a type whose isum
 * is a multiple of the sum),
 * subtracts dmin_w * d_x * mins, or adds m_w * s_x (Q4_1, Q5_1); d_w is the
 * block's fp16 d, or for MXFP4 its E8M0 exponent's 2^(e - 128) (SC).
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
 * core streams Q2_K at half the speed, and prefetching only the next group
 * of 512-column rows costs 10-20%, measured on a Xeon VM).
 *
 * Numerics: within a block everything is exact int32. Unsigned levels x
 * int8 activations by vpmaddubsw (int16 pair sums); level offsets (Q4_0 -8,
 * Q5_0 -16, Q3_K -4, Q6_K -32, MXFP4 -12 on its levels + 12) are applied by adding -off * (pair sums of
 * x) to those int16 pair sums, which gives the exact pair sums of (level -
 * off) * x in the same lanes (no large cancelling terms in other lanes).
 * Signed levels (Q8_0, IQ4_NL, IQ4_XS) move their sign onto the activation,
 * which needs activations in [-127, 127] (every Q8 quantizer's range).
 * Bounds: |int16 pair sum| <= 2 * 63 * 127 + 2 * 32 * 127 (Q6_K) or
 * 2 * 128 * 127 (Q8_0) < 2^15; int32 lanes < 2^24, and a row's half-block
 * sum of 4 lanes < 2^26 (rounded once when converted to float, as the
 * reference converts its block's int sum). Only the float accumulation
 * across blocks differs from the reference (order, FMA, one product d_w *
 * d_x per block as the reference, 2 halves).
 */

#define GV_INLINE static inline __attribute__((always_inline))

/* ---- vocabulary -------------------------------------------------------------- */

/* isum += v, kept in this order: without the empty asm gcc -O3 reassociates
 * the block's chain of adds into one tree at the end and spills the
 * products to the stack (measured: ~20% more instructions per block) */
#define GV_ACC(isum, v) do { isum = _mm256_add_epi32(isum, v); __asm__("" : "+x"(isum)); } while (0)

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
/* 8 int32 lanes: sums of pairs of int16 */
GV_INLINE __m256i gv_sum16(__m256i p) { return _mm256_madd_epi16(p, _mm256_set1_epi16(1)); }
/* int16 pair sums of w[i] * x[i], both signed, x != -128 */
GV_INLINE __m256i gv_mul_ss(__m256i w, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}
/* vpshufb controls, from static tables (as constants gcc rebuilt them with
 * 4 instructions each at every 4-row group, ~60 per group; with the single
 * accumulator below, rows of 512 columns gained 3-12%: bench/README.md,
 * "Decode: the K-quant gemvs' 4 rows share one accumulator"): GV_B16(j): every int16 lane = int16 j of its
 * 128-bit lane; GV_P16(k): the low lane int16 2k, the high lane int16 2k + 1;
 * GV_P8(c): the low lane byte 2c, the high lane byte 2c + 1, zero-extended
 * to int16 */
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
#define GV_B16(j) _mm256_load_si256((const __m256i *)gv_b16_tab[j])
#define GV_P16(k) _mm256_load_si256((const __m256i *)gv_p16_tab[k])
#define GV_P8(c) _mm256_load_si256((const __m256i *)gv_p8_tab[c])
/* the fp16 after *d (dmin / m in the types that have one) */
GV_INLINE float gv_f16_next(const uint16_t *d) { return _cvtsh_ss(gv_u16((const char *)d + 2)); }

/* ---- activation views ---------------------------------------------------------- */

typedef struct {
    const int8_t *q;     /* the block's int8 values */
    __m256i nx[8];       /* -off * (pair sums of q[32c .. 32c + 31]), int16 */
    __m256i bs;          /* Q8_K bsums (Q2_K) */
    __m128i bp;          /* Q8_K bsums summed in pairs: 8 sums of 32, int16 (Q4_K, Q5_K) */
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
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)gv_u32(qh)),
                                    _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                                       0x0303030303030303ll));
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel), _mm256_set1_epi8(0x10));
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
 * scales it by 1/4 (ISC). */
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
            GV_ACC(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(k & 1 ? sc : sc4,
                                                                  GV_P8(c))));
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
            GV_ACC(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sv, GV_P16(k))));
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

/* the Q4_K / Q5_K body: chunk j: lo = sub-block 2j, hi = 2j + 1 */
#define GV_K4_BODY(LO, HI)                                                             \
    __m128i scm = gv_k4_scales(w->scales);                                            \
    __m256i sv = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scm));                 \
    *ms = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(scm, 8)), a->bp);           \
    __m256i isum = _mm256_setzero_si256();                                            \
    for (int j = 0; j < 4; j++) {                                                     \
        __m256i q = gv_ld(w->qs + 32 * j);                                            \
        __m256i lo = LO, hi = HI;                                                     \
        __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, gv_ld(a->q + 64 * j)),  \
                                       _mm256_shuffle_epi8(sv, GV_B16(2 * j)));      \
        __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, gv_ld(a->q + 64 * j + 32)), \
                                       _mm256_shuffle_epi8(sv, GV_B16(2 * j + 1)));  \
        GV_ACC(isum, _mm256_add_epi32(p0, p1));                      \
    }                                                                                 \
    return isum;

GV_INLINE __m256i gk_q4_K(const pk_block_q4_K *w, const gv_x *a, __m128i *ms) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    GV_K4_BODY(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4))
}

/* Q5_K: fifth bit 2j (lo) / 2j + 1 (hi) of qh[l], moved to bit 4 */
GV_INLINE __m256i gk_q5_K(const pk_block_q5_K *w, const gv_x *a, __m128i *ms) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    const __m256i qh = gv_ld(w->qh);
    GV_K4_BODY(_mm256_or_si256(_mm256_and_si256(q, m4), _mm256_and_si256(gv_shl(qh, 4 - 2 * j), b4)),
               _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                               _mm256_and_si256(gv_shl(qh, 3 - 2 * j), b4)))
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
            GV_ACC(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sv, GV_P16(k))));
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
        GV_ACC(isum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sv, GV_B16(s))));
    }
    return isum;
}

/* ---- the driver: vec_dot and 4-row gemv, written once -------------------------------- */

/* Software prefetch of the 4 rows GV_PF_GROUPS(rb) groups ahead (the 4 * rb bytes there,
 * rows being contiguous in practice): block i of nb requests 4 blocks'
 * worth, so the whole next group is in flight while this one is computed.
 * Prefetches never fault, so running past the end of the matrix (a
 * thread's chunk: the rows after it are the next chunk's) is harmless. */
#ifndef GV_PF_BYTES
#define GV_PF_BYTES 4096        /* how far ahead, at least */
#endif
/* how many 4-row groups of rows of rb bytes ahead: at least one, and at
 * least GV_PF_BYTES (short rows, as an expert's down projection of 512 or
 * 768 columns, are a few hundred bytes: the next group alone is requested
 * too late to arrive from DRAM in time) */
#define GV_PF_GROUPS(rb) ((GV_PF_BYTES + 4 * (rb) - 1) / (4 * (rb)))
#ifndef GV_PF_HINT
#define GV_PF_HINT _MM_HINT_T0
#endif
#define GV_PREFETCH(base, i, bs)                                                   \
    do {                                                                           \
        const char *p_ = (base) + (size_t)(i) * 4 * (bs);                          \
        for (size_t o_ = 0; o_ < 4 * (bs); o_ += 64) _mm_prefetch(p_ + o_, GV_PF_HINT); \
    } while (0)

/* the fp16 scales of the 4 rows' block i: with a second fp16 after d (dmin
 * or m), [d0, e0, d1, e1, ...]; without, [d0, d1, d2, d3] */
#define GV_DD2(W, i, SC)                                                            \
    _mm256_cvtph_ps(_mm_setr_epi32((int)gv_u32(GV_DA_##SC(W##0[i])), (int)gv_u32(GV_DA_##SC(W##1[i])), \
                                   (int)gv_u32(GV_DA_##SC(W##2[i])), (int)gv_u32(GV_DA_##SC(W##3[i]))))
#define GV_DD1(W, i)                                                                \
    _mm_cvtph_ps(_mm_cvtsi64_si128((long long)((uint64_t)W##0[i].d | (uint64_t)W##1[i].d << 16 | \
                                               (uint64_t)W##2[i].d << 32 | (uint64_t)W##3[i].d << 48)))

/* The weight scale of one row's block, and of 4 rows' block i as [d0 d1 d2
 * d3], by scale kind SC: f16 (the fp16 d) or e8m0 (MXFP4's e: 2^(e - 128),
 * from the 256-entry table: 4 loads, cheaper than computing it with the
 * subnormals of e = 0, 1). GV_DA: the address of
 * the fp16 d that KIND 1 and 2 read the second fp16 after (never read for
 * e8m0, which only comes with KIND 0). */
#define GV_S1_f16(b) _cvtsh_ss((b).d)
#define GV_S4_f16(W, i) GV_DD1(W, i)
#define GV_DA_f16(b) (&(b).d)
#define GV_S1_e8m0(b) pk_e8m0_half((b).e)
#define GV_DA_e8m0(b) ((const uint16_t *)(const void *)&(b))
#define GV_S4_e8m0(W, i)                                                            \
    _mm_castsi128_ps(_mm_setr_epi32((int)pk_e8m0_half_bits[W##0[i].e], (int)pk_e8m0_half_bits[W##1[i].e], \
                                    (int)pk_e8m0_half_bits[W##2[i].e], (int)pk_e8m0_half_bits[W##3[i].e]))

/* A compiler-only barrier between the rows' block kernels: without it gcc
 * interleaves the 4 rows to share activation loads and spills the partial
 * sums (16 ymm registers are too few); the core overlaps the rows anyway. */
#define GV_FENCE() __asm__ volatile("" ::: "memory")

/* the 4 rows' block sums, [S0 S1 S2 S3] in each 128-bit half (half of each
 * row's 8 lanes in each): exact in int32 (lanes < 2^24, 8 of them), so the 4
 * rows share one float conversion and one FMA per block and the gemv keeps
 * one accumulator (4 of them were spilled, then summed horizontally) */
GV_INLINE __m256i gv_sum4x8(__m256i s0, __m256i s1, __m256i s2, __m256i s3) {
    __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi32(s0, s1), _mm256_unpackhi_epi32(s0, s1));
    __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi32(s2, s3), _mm256_unpackhi_epi32(s2, s3));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(u0, u1), _mm256_unpackhi_epi64(u0, u1));
}

/* KIND 0: sum = d_w d_x isum; 1 (K-quant mins): - dmin_w d_x mins, the
 * block kernel's mins in the low 4 int32 lanes of *ms; 3: the same with
 * the mins in 8 lanes (Q2_K: its 16 mins x bsums by one vpmaddwd);
 * 2 (Q8_1 offset): + m_w s_x. SC: the kind of d_w (GV_S1_*), e8m0 only
 * with KIND 0; GV_KERNELS is the fp16 one. GV_MINS: the kinds with mins.
 * With KIND 3 the gemv sums the 4 rows' 8-lane mins by 3 vphaddd across
 * rows (integer sums, so the same per-block totals as 4-lane sums: the
 * results are bitwise those of KIND 1; 11 uops per 4 rows instead of 17). */
#define GV_MINS(KIND) ((KIND) == 1 || (KIND) == 3)
/* the type of a block kernel's mins (*ms), its zero, its 4-lane sum, and the
 * 4 rows' totals [m0 m1 m2 m3], by KIND */
#define GV_MST(KIND) GV_MST_##KIND
#define GV_MST_0 __m128i
#define GV_MST_1 __m128i
#define GV_MST_2 __m128i
#define GV_MST_3 __m256i
#define GV_MS0(KIND) ((GV_MST(KIND)){0})
#define GV_MS4(KIND, m) GV_MS4_##KIND(m)
#define GV_MS4_1(m) (m)
#define GV_MS4_3(m) _mm_add_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1))
#define GV_MS4_0(m) (m)
#define GV_MS4_2(m) (m)
#define GV_HADD4(KIND, m0, m1, m2, m3) GV_HADD4_##KIND(m0, m1, m2, m3)
#define GV_HADD4_1(m0, m1, m2, m3) _mm_hadd_epi32(_mm_hadd_epi32(m0, m1), _mm_hadd_epi32(m2, m3))
#define GV_HADD4_3(m0, m1, m2, m3) GV_MS4_3(_mm256_hadd_epi32(_mm256_hadd_epi32(m0, m1), _mm256_hadd_epi32(m2, m3)))
#define GV_HADD4_0 GV_HADD4_1
#define GV_HADD4_2 GV_HADD4_1
#define GV_KERNELS(t, WT, XT, QK, XVIEW, KIND, ISC) GV_KERNELS_SC(t, WT, XT, QK, XVIEW, KIND, ISC, f16)
#define GV_KERNELS_SC(t, WT, XT, QK, XVIEW, KIND, ISC, SC)                                 \
static void gv_vec_dot_##t(int64_t n, float *s, const void *vw, const void *vx) {     \
    const WT *w = vw;                                                                 \
    const XT *x = vx;                                                                 \
    int64_t nb = n / (QK);                                                            \
    __m256 acc = _mm256_setzero_ps();                                                 \
    __m128 am = _mm_setzero_ps();                                                     \
    for (int64_t i = 0; i < nb; i++) {                                                \
        gv_x a;                                                                       \
        GV_MST(KIND) ms = GV_MS0(KIND);                                               \
        XVIEW(&x[i], &a);                                                             \
        __m256i is = gk_##t(&w[i], &a, &ms);                                          \
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), _mm256_set1_ps(GV_S1_##SC(w[i]) * ((ISC) * a.d)), acc); \
        if (GV_MINS(KIND))                                                            \
            am = _mm_fmadd_ps(_mm_cvtepi32_ps(GV_MS4(KIND, ms)), _mm_set1_ps(gv_f16_next(GV_DA_##SC(w[i])) * a.d), am); \
        if (KIND == 2) am = _mm_add_ss(am, _mm_set_ss(gv_f16_next(GV_DA_##SC(w[i])) * a.s)); \
    }                                                                                 \
    __m128 h = _mm_add_ps(am, _mm_movehl_ps(am, am));                                 \
    h = _mm_add_ss(h, _mm_movehdup_ps(h));                                            \
    *s = hsum8(acc) + (GV_MINS(KIND) ? -1.0f : 1.0f) * _mm_cvtss_f32(h);              \
}                                                                                     \
static void gv_gemv_##t(int64_t n, int64_t nrows, float *y, const void *vw, size_t rb, \
                     const void *vx) {                                                \
    const XT *x = vx;                                                                 \
    int64_t nb = n / (QK), r = 0;                                                     \
    size_t pfg = GV_PF_GROUPS(rb);                                                    \
    for (; r + 4 <= nrows; r += 4) {                                                  \
        const WT *w0 = (const WT *)((const char *)vw + (size_t)r * rb);               \
        const WT *w1 = (const WT *)((const char *)w0 + rb);                           \
        const WT *w2 = (const WT *)((const char *)w1 + rb);                           \
        const WT *w3 = (const WT *)((const char *)w2 + rb);                           \
        const char *nxt = (const char *)w0 + 4 * pfg * rb;                            \
        __m256 acc = _mm256_setzero_ps();                                             \
        __m128 am = _mm_setzero_ps();                                                 \
        for (int64_t i = 0; i < nb; i++) {                                            \
            gv_x a;                                                                   \
            GV_MST(KIND) m0 = GV_MS0(KIND), m1 = m0, m2 = m0, m3 = m0;                \
            GV_PREFETCH(nxt, i, sizeof(WT));                                          \
            XVIEW(&x[i], &a);                                                         \
            __m256i s0 = gk_##t(&w0[i], &a, &m0);                                     \
            GV_FENCE();                                                               \
            __m256i s1 = gk_##t(&w1[i], &a, &m1);                                     \
            GV_FENCE();                                                               \
            __m256i s2 = gk_##t(&w2[i], &a, &m2);                                     \
            GV_FENCE();                                                               \
            __m256i s3 = gk_##t(&w3[i], &a, &m3);                                     \
            __m256 fd;                                                                \
            if (KIND) {                                                               \
                __m256 f = _mm256_mul_ps(GV_DD2(w, i, SC), KIND == 2 ?                \
                    _mm256_setr_ps(a.d, a.s, a.d, a.s, a.d, a.s, a.d, a.s) :   \
                    _mm256_setr_ps((ISC) * a.d, a.d, (ISC) * a.d, a.d, (ISC) * a.d, a.d, (ISC) * a.d, a.d)); \
                fd = _mm256_permutevar8x32_ps(f, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)); \
                __m128 fm = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(f,          \
                    _mm256_setr_epi32(1, 3, 5, 7, 1, 3, 5, 7)));                       \
                if (GV_MINS(KIND))                                                    \
                    am = _mm_fmadd_ps(_mm_cvtepi32_ps(GV_HADD4(KIND, m0, m1, m2, m3)), fm, am); \
                else                                                                  \
                    am = _mm_add_ps(am, fm);                                          \
            } else {                                                                  \
                __m128 f = _mm_mul_ps(GV_S4_##SC(w, i), _mm_set1_ps((ISC) * a.d));    \
                fd = _mm256_set_m128(f, f);                                           \
            }                                                                         \
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(gv_sum4x8(s0, s1, s2, s3)), fd, acc); \
            (void)m0; (void)m1; (void)m2; (void)m3;                                   \
        }                                                                             \
        __m128 r4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)); \
        _mm_storeu_ps(y + r, GV_MINS(KIND) ? _mm_sub_ps(r4, am) : _mm_add_ps(r4, am)); \
    }                                                                                 \
    for (; r < nrows; r++)                                                            \
        gv_vec_dot_##t(n, &y[r], (const char *)vw + (size_t)r * rb, vx);              \
}

GV_KERNELS(q8_0, pk_block_q8_0, pk_block_q8_0, PK_QK8_0, gv_x_q8_0, 0, 1.0f)
GV_KERNELS(q4_0, pk_block_q4_0, pk_block_q8_0, PK_QK4_0, gv_x_q8_0_o8, 0, 1.0f)
GV_KERNELS(q4_1, pk_block_q4_1, pk_block_q8_1, PK_QK4_1, gv_x_q8_1, 2, 1.0f)
GV_KERNELS(q5_0, pk_block_q5_0, pk_block_q8_0, PK_QK5_0, gv_x_q8_0_o16, 0, 1.0f)
GV_KERNELS(q5_1, pk_block_q5_1, pk_block_q8_1, PK_QK5_1, gv_x_q8_1, 2, 1.0f)
GV_KERNELS(iq4_nl, pk_block_iq4_nl, pk_block_q8_0, PK_QK4_NL, gv_x_q8_0, 0, 1.0f)
GV_KERNELS_SC(mxfp4, pk_block_mxfp4, pk_block_q8_0, PK_QK_MXFP4, gv_x_q8_0_o12, 0, 1.0f, e8m0)
GV_KERNELS(q2_K, pk_block_q2_K, pk_block_q8_K, PK_QK_K, gv_x_q8_K_bs, 3, 0.25f)
GV_KERNELS(q3_K, pk_block_q3_K, pk_block_q8_K, PK_QK_K, gv_x_q8_K_o4, 0, 1.0f)
GV_KERNELS(q4_K, pk_block_q4_K, pk_block_q8_K, PK_QK_K, gv_x_q8_K_bp, 1, 1.0f)
GV_KERNELS(q5_K, pk_block_q5_K, pk_block_q8_K, PK_QK_K, gv_x_q8_K_bp, 1, 1.0f)
GV_KERNELS(q6_K, pk_block_q6_K, pk_block_q8_K, PK_QK_K, gv_x_q8_K_o32, 0, 1.0f)
GV_KERNELS(iq4_xs, pk_block_iq4_xs, pk_block_q8_K, PK_QK_K, gv_x_q8_K, 0, 1.0f)

#define GV_VEC_DOT_ENTRIES                                                              \
    [PK_TYPE_Q8_0] = gv_vec_dot_q8_0, [PK_TYPE_Q4_0] = gv_vec_dot_q4_0,                       \
    [PK_TYPE_Q4_1] = gv_vec_dot_q4_1, [PK_TYPE_Q5_0] = gv_vec_dot_q5_0,                       \
    [PK_TYPE_Q5_1] = gv_vec_dot_q5_1, [PK_TYPE_IQ4_NL] = gv_vec_dot_iq4_nl,                   \
    [PK_TYPE_MXFP4] = gv_vec_dot_mxfp4,                                                       \
    [PK_TYPE_Q2_K] = gv_vec_dot_q2_K, [PK_TYPE_Q3_K] = gv_vec_dot_q3_K,                       \
    [PK_TYPE_Q4_K] = gv_vec_dot_q4_K, [PK_TYPE_Q5_K] = gv_vec_dot_q5_K,                       \
    [PK_TYPE_Q6_K] = gv_vec_dot_q6_K, [PK_TYPE_IQ4_XS] = gv_vec_dot_iq4_xs,
#define GV_GEMV_ENTRIES                                                                 \
    [PK_TYPE_Q8_0] = gv_gemv_q8_0, [PK_TYPE_Q4_0] = gv_gemv_q4_0,                             \
    [PK_TYPE_Q4_1] = gv_gemv_q4_1, [PK_TYPE_Q5_0] = gv_gemv_q5_0,                             \
    [PK_TYPE_Q5_1] = gv_gemv_q5_1, [PK_TYPE_IQ4_NL] = gv_gemv_iq4_nl,                         \
    [PK_TYPE_MXFP4] = gv_gemv_mxfp4,                                                          \
    [PK_TYPE_Q2_K] = gv_gemv_q2_K, [PK_TYPE_Q3_K] = gv_gemv_q3_K,                             \
    [PK_TYPE_Q4_K] = gv_gemv_q4_K, [PK_TYPE_Q5_K] = gv_gemv_q5_K,                             \
    [PK_TYPE_Q6_K] = gv_gemv_q6_K, [PK_TYPE_IQ4_XS] = gv_gemv_iq4_xs,
