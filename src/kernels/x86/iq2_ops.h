/* kernels/x86/iq2_ops.h - the AVX2 decode of IQ2_XXS / IQ2_XS sub-blocks,
 * shared by the decode kernels (kernels/x86/avx2_gemv.h) and the prompt
 * kernels (kernels/x86/avx2_kquant.h). Not a translation unit: included
 * inside their ISA guards after <immintrin.h>.
 *
 * A sub-block s (32 elements, one register) is 4 groups of 8: each group a
 * grid point (its 8 magnitudes 8, 25 or 43 as unsigned bytes: vpmaddubsw's
 * unsigned operand) and a sign code (its 8 signs as +-1 bytes from
 * pk_iq2_sign8: vpsignb's operand), both taken from tables by 4 loads per
 * register. Its scales 2 ls + 1 are int16 lanes for vpmaddwd: IQ2_XXS one
 * per sub-block (bits 28-31 of its second 32-bit word), IQ2_XS one per 16
 * elements (the low 128 bits of the register: its first 16).
 */

#define IQ2_INLINE static inline __attribute__((always_inline))

/* entries i0..i3 of a table of uint64 as one register */
IQ2_INLINE __m256i iq2_tab4(const uint64_t *tab, unsigned i0, unsigned i1, unsigned i2, unsigned i3) {
    return _mm256_setr_epi64x((long long)tab[i0], (long long)tab[i1], (long long)tab[i2], (long long)tab[i3]);
}

/* sub-block s of the IQ2_XXS (XS 0) or IQ2_XS (XS 1) block at w: *pts its
 * 32 magnitudes, *sgn their signs */
IQ2_INLINE void iq2_sub(const int XS, const uint8_t *w, int s, __m256i *pts, __m256i *sgn) {
    const uint8_t *q = w + 2 + 8 * s;
    if (XS) {
        uint64_t v;
        memcpy(&v, q, 8);
        *pts = iq2_tab4(pk_iq2xs_grid, v & 511, (v >> 16) & 511, (v >> 32) & 511, (v >> 48) & 511);
        *sgn = iq2_tab4(pk_iq2_sign8, (v >> 9) & 127, (v >> 25) & 127, (v >> 41) & 127, (unsigned)(v >> 57));
    } else {
        uint32_t ix, aux;
        memcpy(&ix, q, 4);
        memcpy(&aux, q + 4, 4);
        *pts = iq2_tab4(pk_iq2xxs_grid, ix & 255, (ix >> 8) & 255, (ix >> 16) & 255, ix >> 24);
        *sgn = iq2_tab4(pk_iq2_sign8, aux & 127, (aux >> 7) & 127, (aux >> 14) & 127, (aux >> 21) & 127);
    }
}

/* IQ2_XS: the 16 scales 2 ls + 1 of the block's halves, in int16 order */
IQ2_INLINE __m256i iq2_xs_halves(const uint8_t *w) {
    __m128i s8 = _mm_loadl_epi64((const __m128i *)(w + offsetof(pk_block_iq2_xs, scales)));
    __m128i h = _mm_unpacklo_epi8(_mm_and_si128(s8, _mm_set1_epi8(0x0F)),
                                  _mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
    return _mm256_add_epi16(_mm256_slli_epi16(_mm256_cvtepu8_epi16(h), 1), _mm256_set1_epi16(1));
}

/* the int16 scales of sub-block s's lanes: IQ2_XXS from its second word,
 * IQ2_XS from the halves (iq2_xs_halves: the pair of int16 s, spread over
 * the low and the high 128 bits) */
IQ2_INLINE __m256i iq2_scale(const int XS, const uint8_t *w, int s, __m256i halves) {
    if (XS)
        return _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(halves, _mm256_set1_epi32(s)),
                                   _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
                                                    2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3));
    uint32_t aux;
    memcpy(&aux, w + 2 + 8 * s + 4, 4);
    return _mm256_set1_epi16((short)(2 * (aux >> 28) + 1));
}
