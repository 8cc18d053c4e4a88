/* kernels/arm/iq_lattice.h - NEON decoding of the lattice i-quants (IQ3_XXS,
 * IQ3_S, IQ2_S; layouts in quant/quant.h): a 32-element sub-block's grid
 * coordinates (unsigned bytes: IQ3_XXS <= 62, IQ2_S <= 43, IQ3_S <= 15)
 * and signs, and the block's 4-bit scales. Shared by the gemv
 * (kernels/arm/quant_ops.h) and the i8mm prompt kernels (kernels/arm/i8mm.c);
 * not a header of its own: included inside their AArch64 guards, after
 * <arm_neon.h>. The coordinates are put together from the grid entries of
 * the sub-block's groups, two to a 64-bit word in general registers
 * (quant/quant.h's pk_iq_lattice_words, shared with the x86 kernels). */

#define IQA_INLINE static inline __attribute__((always_inline))

/* the lattice types, each a constant that specialises the functions below */
enum { IQA_IQ3_XXS, IQA_IQ3_S, IQA_IQ2_S };

IQA_INLINE uint32_t iqa_u32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* type T's grid */
IQA_INLINE const void *iqa_grid(const int T) {
    return T == IQA_IQ3_XXS ? (const void *)pk_iq3xxs_grid() : T == IQA_IQ3_S ? (const void *)pk_iq3s_grid()
                                                                              : (const void *)pk_iq2s_grid();
}

/* type T's PK_TYPE_* */
IQA_INLINE int iqa_pk(const int T) {
    return T == IQA_IQ3_XXS ? PK_TYPE_IQ3_XXS : T == IQA_IQ3_S ? PK_TYPE_IQ3_S : PK_TYPE_IQ2_S;
}

/* the grid coordinates of sub-block sb (< 8) of the block at b: *lo
 * elements 0..15, *hi 16..31 (pk_iq_lattice_words) */
IQA_INLINE void iqa_levels(const int T, const void *b, int sb, const void *grid, uint8x16_t *lo, uint8x16_t *hi) {
    uint64_t w[4];
    pk_iq_lattice_words(iqa_pk(T), b, sb, grid, w);
    *lo = vcombine_u8(vcreate_u8(w[0]), vcreate_u8(w[1]));
    *hi = vcombine_u8(vcreate_u8(w[2]), vcreate_u8(w[3]));
}

/* the sub-block's levels with their signs: *lo, *hi as iqa_levels, negated
 * where the sign bit is set ((v ^ m) - m with m = 0 or -1) */
IQA_INLINE void iqa_signed(const int T, const void *b, int sb, const void *grid, int8x16_t *lo, int8x16_t *hi) {
    uint32_t s;
    if (T == IQA_IQ3_XXS) {
        const uint32_t a = iqa_u32(((const pk_block_iq3_xxs *)b)->qs + 64 + 4 * sb);
        s = pk_iq2_signs(a) | pk_iq2_signs(a >> 7) << 8 | pk_iq2_signs(a >> 14) << 16 | pk_iq2_signs(a >> 21) << 24;
    } else {
        s = iqa_u32((T == IQA_IQ3_S ? ((const pk_block_iq3_s *)b)->signs : ((const pk_block_iq2_s *)b)->qs + 32) + 4 * sb);
    }
    static const uint8_t il[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const uint8_t bits[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t sv = vreinterpretq_u8_u32(vdupq_n_u32(s)), idx = vld1q_u8(il), bm = vld1q_u8(bits);
    const int8x16_t mlo = vreinterpretq_s8_u8(vtstq_u8(vqtbl1q_u8(sv, idx), bm));
    const int8x16_t mhi = vreinterpretq_s8_u8(vtstq_u8(vqtbl1q_u8(sv, vaddq_u8(idx, vdupq_n_u8(2))), bm));
    uint8x16_t l, h;
    iqa_levels(T, b, sb, grid, &l, &h);
    *lo = vsubq_s8(veorq_s8(vreinterpretq_s8_u8(l), mlo), mlo);
    *hi = vsubq_s8(veorq_s8(vreinterpretq_s8_u8(h), mhi), mhi);
}

/* the odd scales 2 ls + 1 of the block's 16 halves of sub-blocks (16
 * elements each: byte 2 sb for elements 0-15 of sub-block sb, 2 sb + 1 for
 * 16-31; the IQ3 types have one scale per sub-block, so both are equal) */
IQA_INLINE uint8x16_t iqa_scales16(const int T, const void *b) {
    uint8x8_t l8;
    if (T == IQA_IQ2_S) {
        const uint8x8_t v = vld1_u8(((const pk_block_iq2_s *)b)->scales);
        const uint8x8_t a = vand_u8(v, vdup_n_u8(0x0F)), c = vshr_n_u8(v, 4);
        const uint8x16_t l16 = vcombine_u8(vzip1_u8(a, c), vzip2_u8(a, c));
        return vaddq_u8(vaddq_u8(l16, l16), vdupq_n_u8(1));
    }
    if (T == IQA_IQ3_S) {
        const uint8x8_t v = vreinterpret_u8_u32(vdup_n_u32(iqa_u32(((const pk_block_iq3_s *)b)->scales)));
        l8 = vzip1_u8(vand_u8(v, vdup_n_u8(0x0F)), vshr_n_u8(v, 4));
    } else {
        const uint8_t *a = ((const pk_block_iq3_xxs *)b)->qs + 64;
        uint32x4_t a0 = vshrq_n_u32(vreinterpretq_u32_u8(vld1q_u8(a)), 28);
        uint32x4_t a1 = vshrq_n_u32(vreinterpretq_u32_u8(vld1q_u8(a + 16)), 28);
        l8 = vmovn_u16(vcombine_u16(vmovn_u32(a0), vmovn_u32(a1)));
    }
    const uint8x16_t l16 = vzip1q_u8(vcombine_u8(l8, l8), vcombine_u8(l8, l8));
    return vaddq_u8(vaddq_u8(l16, l16), vdupq_n_u8(1));
}

/* the reference's constant factor of the type's block sums (IQ3_XXS 1/4,
 * IQ2_S 1/8) */
IQA_INLINE float iqa_factor(const int T) { return T == IQA_IQ3_XXS ? 0.25f : T == IQA_IQ2_S ? 0.125f : 1.0f; }
