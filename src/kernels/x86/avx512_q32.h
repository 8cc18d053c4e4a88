/* kernels/x86/avx512_q32.h - the vocabulary of the AVX-512 VNNI kernels for
 * the 32-element block types against Q8_0 activations (Q8_0 and MXFP4),
 * shared by the gemv (kernels/x86/avx512.c) and the gemm
 * (kernels/x86/avx512_gemm.c). Not a translation unit: included inside an
 * AVX-512 ISA guard, after <immintrin.h>.
 *
 * The products are vpdpbusd (u8 x s8 -> s32), so the weights are made
 * unsigned: level + 128 (Q8_0: w ^ 0x80; MXFP4: a vpshufb table of its
 * levels + 128). The extra 128 * sum(x) per block depends only on the
 * activations: -128 * (sums of 4 activations) is computed once per block
 * and seeds the accumulator of every row. Exact for the full int8 range of
 * both operands. Weight scales: the fp16 d, or MXFP4's 2^(e - 128) from
 * pk_e8m0_half_bits.
 */
#ifndef PK_KERNELS_AVX512_Q32_H
#define PK_KERNELS_AVX512_Q32_H

static inline __m256i ldq(const pk_block_q8_0 *b) {
    return _mm256_loadu_si256((const __m256i *)b->qs);
}
/* two consecutive blocks' 64 quants in one register */
static inline __m512i ldq2(const pk_block_q8_0 *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(ldq(b)), ldq(b + 1), 1);
}

/* -128 * (sum of x over each group of 4 bytes): the seed that cancels the
 * +128 added to the weights. */
static inline __m256i q8_seed(__m256i xq) {
    return _mm256_sub_epi32(_mm256_setzero_si256(),
                            _mm256_dpbusd_epi32(_mm256_setzero_si256(),
                                                _mm256_set1_epi8((char)0x80), xq));
}
static inline __m512i q8_seed2(__m512i xq) {
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(),
                                                _mm512_set1_epi8((char)0x80), xq));
}

/* Q8_0 weights + 128 */
static inline __m256i wu_q8_0(const pk_block_q8_0 *b) {
    return _mm256_xor_si256(ldq(b), _mm256_set1_epi8((char)0x80));
}
static inline __m512i wu2_q8_0(const pk_block_q8_0 *b) {
    return _mm512_xor_si512(ldq2(b), _mm512_set1_epi8((char)0x80));
}
static inline float ws_q8_0(const pk_block_q8_0 *b) { return _cvtsh_ss(b->d); }
/* the scales of 4 rows' blocks i and i + 1: [r0 r1 r2 r3 of i | of i + 1] */
static inline __m256 ws8_q8_0(const pk_block_q8_0 *w0, const pk_block_q8_0 *w1,
                              const pk_block_q8_0 *w2, const pk_block_q8_0 *w3, int64_t i) {
    uint64_t da = (uint64_t)w0[i].d | (uint64_t)w1[i].d << 16 |
                  (uint64_t)w2[i].d << 32 | (uint64_t)w3[i].d << 48;
    uint64_t db = (uint64_t)w0[i + 1].d | (uint64_t)w1[i + 1].d << 16 |
                  (uint64_t)w2[i + 1].d << 32 | (uint64_t)w3[i + 1].d << 48;
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)db, (long long)da));
}

/* MXFP4 levels + 128, by code (ggml's kvalues_mxfp4 + 128) */
#define MX_TAB128 (char)128, (char)129, (char)130, (char)131, (char)132, (char)134, (char)136, (char)140, \
                  (char)128, (char)127, (char)126, (char)125, (char)124, (char)122, (char)120, (char)116
/* one block's levels + 128 in element order: [codes qs & 15 (elements
 * 0..15) | qs >> 4 (16..31)]; two blocks' as [block 0 | block 1] */
static inline __m256i wu_mxfp4(const pk_block_mxfp4 *b) {
    const __m256i tab = _mm256_setr_epi8(MX_TAB128, MX_TAB128);
    __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)b->qs));
    q = _mm256_and_si256(_mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4)), _mm256_set1_epi8(0x0F));
    return _mm256_shuffle_epi8(tab, q);
}
static inline __m512i wu2_mxfp4(const pk_block_mxfp4 *b) {
    const __m512i tab = _mm512_broadcast_i32x4(_mm_setr_epi8(MX_TAB128));
    __m512i q = _mm512_mask_broadcast_i32x4(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)b[0].qs)),
                                            0xFF00, _mm_loadu_si128((const __m128i *)b[1].qs));
    q = _mm512_and_si512(_mm512_srlv_epi64(q, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4)),
                         _mm512_set1_epi8(0x0F));
    return _mm512_shuffle_epi8(tab, q);
}
static inline float ws_mxfp4(const pk_block_mxfp4 *b) { return pk_e8m0_half(b->e); }
static inline __m256 ws8_mxfp4(const pk_block_mxfp4 *w0, const pk_block_mxfp4 *w1,
                               const pk_block_mxfp4 *w2, const pk_block_mxfp4 *w3, int64_t i) {
    const uint32_t *t = pk_e8m0_half_bits;
    return _mm256_castsi256_ps(_mm256_setr_epi32((int)t[w0[i].e], (int)t[w1[i].e], (int)t[w2[i].e],
                                                 (int)t[w3[i].e], (int)t[w0[i + 1].e], (int)t[w1[i + 1].e],
                                                 (int)t[w2[i + 1].e], (int)t[w3[i + 1].e]));
}

/* Block b of 16 Q8_0 rows at w (rows rb bytes apart; nr < 16 valid, the
 * rest zero levels and zero scales), row-interleaved for the 16-row gemm
 * (kernels/x86/ri8.h's layout, 16 dword lanes): q[j] lane r = row r's
 * signed levels for elements 4j .. 4j + 3, d lane r its scale.
 * Rows r, r + 4 share a register; two 4 x 4 dword transposes within the
 * 128-bit lanes (rows 0..7 and 8..15) and one 128-bit shuffle per output
 * put the rows in order. */
static inline void ri16_levels_q8_0(const uint8_t *w, size_t rb, int nr, int64_t b, __m512i *q, __m512 *d) {
    __m512i v[8];
    uint16_t dh[16];
    for (int r = 0; r < 16; r++) {
        const pk_block_q8_0 *blk = (const pk_block_q8_0 *)(w + (size_t)r * rb) + b;
        dh[r] = r < nr ? blk->d : 0;
    }
    for (int i = 0; i < 8; i++) {   /* v[i]: rows r, r + 4 with r = i + 4 * (i >= 4) */
        const int r = i + 4 * (i >= 4);
        __m256i lo = r < nr ? ldq((const pk_block_q8_0 *)(w + (size_t)r * rb) + b) : _mm256_setzero_si256();
        __m256i hi = r + 4 < nr ? ldq((const pk_block_q8_0 *)(w + (size_t)(r + 4) * rb) + b) : _mm256_setzero_si256();
        v[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    for (int g = 0; g < 8; g += 4) {   /* 4 x 4 dword transposes within 128-bit lanes */
        __m512i a = _mm512_unpacklo_epi32(v[g], v[g + 1]), c = _mm512_unpackhi_epi32(v[g], v[g + 1]);
        __m512i e = _mm512_unpacklo_epi32(v[g + 2], v[g + 3]), f = _mm512_unpackhi_epi32(v[g + 2], v[g + 3]);
        v[g] = _mm512_unpacklo_epi64(a, e); v[g + 1] = _mm512_unpackhi_epi64(a, e);
        v[g + 2] = _mm512_unpacklo_epi64(c, f); v[g + 3] = _mm512_unpackhi_epi64(c, f);
    }
    /* v[g + k], lanes: [rows R..R+3 dword k | dword 4 + k | rows R+4..R+7 dword k | dword 4 + k] */
    for (int k = 0; k < 4; k++) {
        q[k] = _mm512_shuffle_i32x4(v[k], v[4 + k], 0x88);       /* lanes 0, 2 of each */
        q[4 + k] = _mm512_shuffle_i32x4(v[k], v[4 + k], 0xDD);   /* lanes 1, 3 */
    }
    *d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh));
}

#endif
