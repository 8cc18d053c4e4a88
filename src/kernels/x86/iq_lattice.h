/* kernels/x86/iq_lattice.h - AVX2 decoding of the lattice i-quants (IQ3_XXS,
 * IQ3_S, IQ2_S; layouts in quant/quant.h): a 32-element sub-block's grid
 * coordinates (unsigned bytes: IQ3_XXS <= 62, IQ2_S <= 43, IQ3_S <= 15),
 * its signs as vpsignb operand bytes (+1 / -1) and the block's 4-bit
 * scales. Shared by the gemv (kernels/x86/avx2_gemv.h) and the prompt
 * kernels (kernels/x86/avx2_gemm.c); not a header of its own: included
 * inside their AVX2 guards, after <immintrin.h>.
 *
 * The coordinates are put together from the grid entries of the
 * sub-block's groups by scalar loads (8 of 4 bytes, or 4 of 8 bytes): the
 * grids are tables of 512 to 8192 bytes, which stay in L1 / L2. */

#define IQL_INLINE static inline __attribute__((always_inline))

/* the lattice types, each a constant that specialises the functions below */
enum { IQL_IQ3_XXS, IQL_IQ3_S, IQL_IQ2_S };

IQL_INLINE uint32_t iql_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* the 32 bits of v as bytes: byte j 0xFF when bit j is set, else 0 */
IQL_INLINE __m256i iql_bits32(uint32_t v) {
    const __m256i sel = _mm256_set1_epi64x(0x8040201008040201ll);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)v),
                                    _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                                       0x0303030303030303ll));
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel);
}

/* type T's grid (fetched once per call by the callers) */
IQL_INLINE const void *iql_grid(const int T) {
    return T == IQL_IQ3_XXS ? (const void *)pk_iq3xxs_grid() : T == IQL_IQ3_S ? (const void *)pk_iq3s_grid()
                                                                              : (const void *)pk_iq2s_grid();
}

/* type T's PK_TYPE_* */
IQL_INLINE int iql_pk(const int T) {
    return T == IQL_IQ3_XXS ? PK_TYPE_IQ3_XXS : T == IQL_IQ3_S ? PK_TYPE_IQ3_S : PK_TYPE_IQ2_S;
}

/* IQ3_S's 64 grid indices of 9 bits (group 8 sb + g: qs[8 sb + g] | (qh[sb]
 * >> g & 1) << 8) put together by vector code, int16 lane l of v[c] the
 * group 16 c + l (sub-block 2 c + l / 8): the low bytes widened, each
 * sub-block's qh byte spread to its groups' lanes by vpshufb, bit g moved to
 * bit 8 by a multiply with 2^(8 - g) and a mask. iql_levels takes them out
 * of the register 64 bits at a time: on Zen 3, 1.3x the speed of building
 * each index in general registers (IQ3_XXS's indices are bytes, IQ2_S's
 * four per sub-block share one qh byte: those gained nothing, and neither
 * did a store and reload of the indices, nor vpgatherdq). */
typedef struct {
    __m256i v[4];
} iql_idx;

IQL_INLINE void iql_index(const int T, const void *b, iql_idx *ix) {
    if (T != IQL_IQ3_S) return;
    const pk_block_iq3_s *x = b;
    const __m256i h = _mm256_broadcastsi128_si256(_mm_loadl_epi64((const __m128i *)x->qh));
    const __m256i mul = _mm256_setr_epi16(256, 128, 64, 32, 16, 8, 4, 2, 256, 128, 64, 32, 16, 8, 4, 2);
    for (int c = 0; c < 4; c++) {
        const char s0 = (char)(2 * c), s1 = (char)(2 * c + 1);
        const __m256i sel = _mm256_setr_epi8(s0, -1, s0, -1, s0, -1, s0, -1, s0, -1, s0, -1, s0, -1, s0, -1,
                                             s1, -1, s1, -1, s1, -1, s1, -1, s1, -1, s1, -1, s1, -1, s1, -1);
        const __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(x->qs + 16 * c)));
        const __m256i hi = _mm256_mullo_epi16(_mm256_shuffle_epi8(h, sel), mul);
        ix->v[c] = _mm256_or_si256(lo, _mm256_and_si256(hi, _mm256_set1_epi16(0x100)));
    }
}

/* the grid coordinates of sub-block sb (< 8) of the block at b (IQ3_S: its
 * indices from iql_index in ix; the others: pk_iq_lattice_words, two grid
 * entries per 64-bit word in general registers), four words to a vector */
IQL_INLINE __m256i iql_levels(const int T, const void *b, int sb, const void *grid, const iql_idx *ix) {
    if (T == IQL_IQ3_S) {
        const uint32_t *g = grid;
        const __m128i kv = sb % 2 ? _mm256_extracti128_si256(ix->v[sb / 2], 1) : _mm256_castsi256_si128(ix->v[sb / 2]);
        const uint64_t k0 = (uint64_t)_mm_cvtsi128_si64(kv), k1 = (uint64_t)_mm_extract_epi64(kv, 1);
        return _mm256_setr_epi32((int)g[k0 & 0xFFFF], (int)g[k0 >> 16 & 0xFFFF], (int)g[k0 >> 32 & 0xFFFF],
                                 (int)g[k0 >> 48], (int)g[k1 & 0xFFFF], (int)g[k1 >> 16 & 0xFFFF],
                                 (int)g[k1 >> 32 & 0xFFFF], (int)g[k1 >> 48]);
    }
    uint64_t w[4];
    pk_iq_lattice_words(iql_pk(T), b, sb, grid, w);
    return _mm256_setr_epi64x((long long)w[0], (long long)w[1], (long long)w[2], (long long)w[3]);
}

/* the signs of sub-block sb as vpsignb operand bytes (IQ3_XXS: its 7-bit
 * codes as IQ2_XXS's, through pk_iq2_sign8) */
IQL_INLINE __m256i iql_signs(const int T, const void *b, int sb) {
    if (T == IQL_IQ3_XXS) {
        const uint32_t s = iql_u32(((const pk_block_iq3_xxs *)b)->qs + 64 + 4 * sb);
        return _mm256_setr_epi64x((long long)pk_iq2_sign8[s & 127], (long long)pk_iq2_sign8[s >> 7 & 127],
                                  (long long)pk_iq2_sign8[s >> 14 & 127], (long long)pk_iq2_sign8[s >> 21 & 127]);
    }
    const uint8_t *s = T == IQL_IQ3_S ? ((const pk_block_iq3_s *)b)->signs : ((const pk_block_iq2_s *)b)->qs + 32;
    return _mm256_or_si256(iql_bits32(iql_u32(s + 4 * sb)), _mm256_set1_epi8(1));
}

/* the 16 scales ls of the block's halves of sub-blocks (16 elements each:
 * byte 2 sb for elements 0-15 of sub-block sb, 2 sb + 1 for 16-31; the IQ3
 * types have one scale per sub-block, so both bytes are the same) */
IQL_INLINE __m128i iql_scales16(const int T, const void *b) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    if (T == IQL_IQ2_S) {
        __m128i v = _mm_loadl_epi64((const __m128i *)((const pk_block_iq2_s *)b)->scales);
        return _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    }
    __m128i l8;
    if (T == IQL_IQ3_S) {
        __m128i v = _mm_cvtsi32_si128((int)iql_u32(((const pk_block_iq3_s *)b)->scales));
        l8 = _mm_unpacklo_epi8(_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    } else {
        __m256i ls = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(((const pk_block_iq3_xxs *)b)->qs + 64)), 28);
        l8 = _mm_packus_epi16(_mm_packs_epi32(_mm256_castsi256_si128(ls), _mm256_extracti128_si256(ls, 1)),
                              _mm_setzero_si128());
    }
    return _mm_unpacklo_epi8(l8, l8);
}

/* The odd scales 2 ls + 1 of the block's half sub-blocks as vpmaddwd
 * operands: iql_odd_scales gives the 16 as int16 with both 128-bit lanes
 * holding sub-blocks 0-3 (*lo) or 4-7 (*hi); iql_sub_scale picks sub-block
 * sb's: in the low lane the scale of its elements 0-15 (8 times), in the
 * high lane that of 16-31, the lanes of its 16 vpmaddubsw pair sums. */
IQL_INLINE void iql_odd_scales(const int T, const void *b, __m256i *lo, __m256i *hi) {
    __m256i s16 = _mm256_cvtepu8_epi16(iql_scales16(T, b));
    s16 = _mm256_add_epi16(_mm256_add_epi16(s16, s16), _mm256_set1_epi16(1));
    *lo = _mm256_permute4x64_epi64(s16, 0x44);
    *hi = _mm256_permute4x64_epi64(s16, 0xEE);
}
IQL_INLINE __m256i iql_sub_scale(__m256i lo, __m256i hi, int sb) {
    const char j0 = (char)(4 * (sb % 4)), j1 = (char)(j0 + 1), j2 = (char)(j0 + 2), j3 = (char)(j0 + 3);
    return _mm256_shuffle_epi8(sb < 4 ? lo : hi,
                               _mm256_setr_epi8(j0, j1, j0, j1, j0, j1, j0, j1, j0, j1, j0, j1, j0, j1, j0, j1,
                                                j2, j3, j2, j3, j2, j3, j2, j3, j2, j3, j2, j3, j2, j3, j2, j3));
}

/* the reference's constant factor of the type's block sums (IQ3_XXS 1/4,
 * IQ2_S 1/8: its scales are 2 ls + 1 where the format has (0.5 + ls) / 2,
 * (0.5 + ls) / 4) */
IQL_INLINE float iql_factor(const int T) { return T == IQL_IQ3_XXS ? 0.25f : T == IQL_IQ2_S ? 0.125f : 1.0f; }
