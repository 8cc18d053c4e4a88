/* kernels/arm/iq2_ops.h - the NEON decode of IQ2_XXS / IQ2_XS sub-blocks,
 * shared by the decode kernels (kernels/arm/quant_ops.h) and the i8mm
 * prompt kernels (kernels/arm/i8mm.c). Not a translation unit: included
 * inside their ISA guards after <arm_neon.h>.
 *
 * A sub-block s (32 elements) is 4 groups of 8: each a grid point (its 8
 * magnitudes 8, 25 or 43) times its signs (pk_iq2_sign8: +-1 bytes), both
 * taken from tables by one 8-byte load per group, multiplied into int8
 * levels, |level| <= 43. Its scales 2 ls + 1: IQ2_XXS one per sub-block
 * (bits 28-31 of its second 32-bit word), IQ2_XS one per 16 elements.
 */

#define IQ2A_INLINE static inline __attribute__((always_inline))

/* two table entries as the halves of one vector */
IQ2A_INLINE int8x16_t iq2a_tab2(const uint64_t *tab, unsigned i0, unsigned i1) {
    return vreinterpretq_s8_u64(vcombine_u64(vld1_u64(tab + i0), vld1_u64(tab + i1)));
}

/* the signed levels of sub-block s of the IQ2_XXS (XS 0) or IQ2_XS (XS 1)
 * block at w: *lo its elements 0..15, *hi 16..31; *s0, *s1 the scales
 * 2 ls + 1 of the two halves (equal for IQ2_XXS) */
IQ2A_INLINE void iq2a_sub(const int XS, const uint8_t *w, int s, int8x16_t *lo, int8x16_t *hi, int *s0, int *s1) {
    const uint8_t *q = w + 2 + 8 * s;
    unsigned i[4], c[4];
    if (XS) {
        uint16_t v[4];
        memcpy(v, q, 8);
        for (int g = 0; g < 4; g++) i[g] = v[g] & 511, c[g] = v[g] >> 9;
        const uint8_t sc = w[offsetof(pk_block_iq2_xs, scales) + s];
        *s0 = 2 * (sc & 15) + 1;
        *s1 = 2 * (sc >> 4) + 1;
    } else {
        uint32_t ix, aux;
        memcpy(&ix, q, 4);
        memcpy(&aux, q + 4, 4);
        for (int g = 0; g < 4; g++) i[g] = (ix >> 8 * g) & 255, c[g] = (aux >> 7 * g) & 127;
        *s0 = *s1 = (int)(2 * (aux >> 28) + 1);
    }
    const uint64_t *grid = XS ? pk_iq2xs_grid : pk_iq2xxs_grid;
    *lo = vmulq_s8(iq2a_tab2(grid, i[0], i[1]), iq2a_tab2(pk_iq2_sign8, c[0], c[1]));
    *hi = vmulq_s8(iq2a_tab2(grid, i[2], i[3]), iq2a_tab2(pk_iq2_sign8, c[2], c[3]));
}
