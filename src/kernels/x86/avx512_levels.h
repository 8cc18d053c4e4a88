/* kernels/x86/avx512_levels.h - the unsigned levels of a K-quant super-block,
 * 64 at a time in element order, for the multi-token kernels
 * (kernels/x86/avx512_gemm.c and kernels/x86/amx.c). Not a translation unit:
 * included inside an AVX-512 ISA guard, after <immintrin.h>.
 *
 * Chunk z of a super-block holds elements 64z .. 64z + 63; its 128-bit
 * lanes are sub-blocks 4z .. 4z + 3 (16-level sub-blocks: Q2_K, Q6_K) and
 * its 256-bit halves sub-blocks 2z, 2z + 1 (32-level: Q4_K).
 */
#ifndef PK_KERNELS_AVX512_LEVELS_H
#define PK_KERNELS_AVX512_LEVELS_H

#define LV_INLINE static inline __attribute__((always_inline))

/* vpermw indices spreading a block's scales (int16) over chunk z's words:
 * lv_idx16 - 128-bit lane L gets scale 4z + L (16-level sub-blocks);
 * lv_idx32 - words 0-15 get scale 2z, words 16-31 scale 2z + 1 (32-level) */
static const int16_t lv_idx16[4][32] __attribute__((aligned(64))) = {
    {0,0,0,0,0,0,0,0, 1,1,1,1,1,1,1,1, 2,2,2,2,2,2,2,2, 3,3,3,3,3,3,3,3},
    {4,4,4,4,4,4,4,4, 5,5,5,5,5,5,5,5, 6,6,6,6,6,6,6,6, 7,7,7,7,7,7,7,7},
    {8,8,8,8,8,8,8,8, 9,9,9,9,9,9,9,9, 10,10,10,10,10,10,10,10, 11,11,11,11,11,11,11,11},
    {12,12,12,12,12,12,12,12, 13,13,13,13,13,13,13,13,
     14,14,14,14,14,14,14,14, 15,15,15,15,15,15,15,15},
};
static const int16_t lv_idx32[4][32] __attribute__((aligned(64))) = {
    {0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0, 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1},
    {2,2,2,2,2,2,2,2,2,2,2,2,2,2,2,2, 3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3},
    {4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4, 5,5,5,5,5,5,5,5,5,5,5,5,5,5,5,5},
    {6,6,6,6,6,6,6,6,6,6,6,6,6,6,6,6, 7,7,7,7,7,7,7,7,7,7,7,7,7,7,7,7},
};
LV_INLINE __m512i lv_ldidx(const int16_t *p) { return _mm512_load_si512((const void *)p); }

/* per-word shift counts: a for the low 256 bits, b for the high 256 */
LV_INLINE __m512i lv_shifts2(int a, int b) {
    return _mm512_inserti64x4(_mm512_set1_epi16((short)a), _mm256_set1_epi16((short)b), 1);
}
/* 32 bytes at p in both 256-bit halves */
LV_INLINE __m512i lv_bcast32(const void *p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
}
/* Q4_K: q in [0, 15] */
LV_INLINE __m512i lv_q4_K(const pk_block_q4_K *w, int z) {
    return _mm512_and_si512(_mm512_srlv_epi16(lv_bcast32(w->qs + 32 * z), lv_shifts2(0, 4)),
                            _mm512_set1_epi8(0x0F));
}
/* Q2_K: q in [0, 3] */
LV_INLINE __m512i lv_q2_K(const pk_block_q2_K *w, int z) {
    __m512i sh = (z & 1) ? lv_shifts2(4, 6) : lv_shifts2(0, 2);
    return _mm512_and_si512(_mm512_srlv_epi16(lv_bcast32(w->qs + 32 * (z >> 1)), sh), _mm512_set1_epi8(3));
}
/* Q6_K: q in [0, 63] (the -32 offset not applied) */
LV_INLINE __m512i lv_q6_K(const pk_block_q6_K *w, int z) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    int h = z >> 1;
    __m512i l = _mm512_loadu_si512(w->ql + 64 * h), qh = lv_bcast32(w->qh + 32 * h);
    __m512i lo = (z & 1) ? _mm512_and_si512(_mm512_srli_epi16(l, 4), m4) : _mm512_and_si512(l, m4);
    __m512i hi = (z & 1) ? _mm512_srlv_epi16(qh, lv_shifts2(0, 2)) : _mm512_sllv_epi16(qh, lv_shifts2(4, 2));
    return _mm512_ternarylogic_epi32(lo, hi, _mm512_set1_epi8(0x30), 0xF8);     /* lo | (hi & 0x30) */
}

/* the 16 signed Q3_K scales (sc - 32) as int16 */
LV_INLINE __m256i lv_q3_scales(const uint8_t *s) {
    uint32_t a0, a1, a2;
    memcpy(&a0, s, 4); memcpy(&a1, s + 4, 4); memcpy(&a2, s + 8, 4);
    __m128i v = _mm_setr_epi32((int)((a0 & 0x0f0f0f0fu) | (a2 & 0x03030303u) << 4),
                               (int)((a1 & 0x0f0f0f0fu) | ((a2 >> 2) & 0x03030303u) << 4),
                               (int)(((a0 >> 4) & 0x0f0f0f0fu) | ((a2 >> 4) & 0x03030303u) << 4),
                               (int)(((a1 >> 4) & 0x0f0f0f0fu) | ((a2 >> 6) & 0x03030303u) << 4));
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(v), _mm256_set1_epi16(32));
}
/* Q5_K: q in [0, 31]: Q4_K's nibbles plus bit 2z (low half) / 2z + 1
 * (high half) of qh */
LV_INLINE __m512i lv_q5_K(const pk_block_q5_K *w, int z) {
    __m512i lo = _mm512_and_si512(_mm512_srlv_epi16(lv_bcast32(w->qs + 32 * z), lv_shifts2(0, 4)),
                                  _mm512_set1_epi8(0x0F));
    __m512i hb = _mm512_srlv_epi16(lv_bcast32(w->qh), lv_shifts2(2 * z, 2 * z + 1));
    return _mm512_ternarylogic_epi32(lo, _mm512_slli_epi16(hb, 4), _mm512_set1_epi8(0x10), 0xF8);
}
/* Q3_K: q + 4 in [0, 7]: Q2_K's two bits plus bit 4h + k of hmask for the
 * elements 128h + 32k + l */
LV_INLINE __m512i lv_q3_K(const pk_block_q3_K *w, int z) {
    __m512i sh = (z & 1) ? lv_shifts2(4, 6) : lv_shifts2(0, 2);
    __m512i lo = _mm512_and_si512(_mm512_srlv_epi16(lv_bcast32(w->qs + 32 * (z >> 1)), sh), _mm512_set1_epi8(3));
    int b = 4 * (z >> 1) + 2 * (z & 1);
    __m512i hb = _mm512_srlv_epi16(lv_bcast32(w->hmask), lv_shifts2(b, b + 1));
    return _mm512_ternarylogic_epi32(lo, _mm512_slli_epi16(hb, 2), _mm512_set1_epi8(0x04), 0xF8);
}

#endif
