/* kernels/x86/avx2_iq1.h - IQ1_S / IQ1_M super-blocks decoded for vpmaddubsw,
 * by the AVX2 gemv (kernels/x86/avx2_gemv.h); the prompt kernels
 * (kernels/x86/avx2_kquant.h, kq_iq1) take its grid indices and scales
 * alone. Not a translation unit: included inside an AVX2 ISA guard, after
 * <immintrin.h>.
 *
 * The sum over a super-block is taken 8 times over, as the exact integer
 *   8 * sum(ls' * (l + 1) * x) + sum(ls' * (s - 8) * x)
 * with l the grid level, s = +-1 the sign of the group's delta and ls' =
 * 2 ls + 1: the first part from unsigned bytes l + 1 in {0, 1, 2}, the
 * second from group sums of x (IQ1_S: Q8_K's bsums, its delta being per
 * sub-block; IQ1_M: sums of 8 made from the activations once).
 *
 * Order: register V(h, j) (h < 2, j < 4) holds group j of sub-blocks 4h,
 * 4h + 1, 4h + 2, 4h + 3 in its four 64-bit lanes, so the 16-bit lanes of
 * every register of a half h belong to the same sub-blocks: the vpmaddubsw
 * products of the four registers (each pair <= 2 * 2 * 127) are summed in
 * int16 and scaled by one vpmaddwd (IQ1_M: two, groups 0-1 and 2-3 having
 * their own scale). The activations are put in the same order once
 * (iq1_xorder). Each group's 8 levels are one 64-bit load from the grid
 * (16 KB, in L1) at the index the decoder computed for all 32 groups with
 * vector operations.
 */
#ifndef PK_KERNELS_AVX2_IQ1_H
#define PK_KERNELS_AVX2_IQ1_H

#define IQ1_INLINE static inline __attribute__((always_inline))

/* ---- activations ------------------------------------------------------------ */

/* the 8 registers of a super-block's activations in the V order: xp[4h + j]
 * = 64-bit lane j of the registers of sub-blocks 4h .. 4h + 3 */
IQ1_INLINE void iq1_xorder(const int8_t *q, __m256i xp[8]) {
    for (int h = 0; h < 2; h++) {
        const __m256i *r = (const __m256i *)(const void *)(q + 128 * h);
        __m256i r0 = _mm256_loadu_si256(r), r1 = _mm256_loadu_si256(r + 1), r2 = _mm256_loadu_si256(r + 2),
                r3 = _mm256_loadu_si256(r + 3);
        __m256i l01 = _mm256_unpacklo_epi64(r0, r1), h01 = _mm256_unpackhi_epi64(r0, r1);
        __m256i l23 = _mm256_unpacklo_epi64(r2, r3), h23 = _mm256_unpackhi_epi64(r2, r3);
        xp[4 * h + 0] = _mm256_permute2x128_si256(l01, l23, 0x20);
        xp[4 * h + 1] = _mm256_permute2x128_si256(h01, h23, 0x20);
        xp[4 * h + 2] = _mm256_permute2x128_si256(l01, l23, 0x31);
        xp[4 * h + 3] = _mm256_permute2x128_si256(h01, h23, 0x31);
    }
}

/* IQ1_M: the 32 sums of 8 activations, groups 0-15 in s8[0], 16-31 in s8[1]
 * (int16, |.| <= 1016) */
IQ1_INLINE void iq1_sums8(const int8_t *q, __m256i s8[2]) {
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    __m256i f[8];
    for (int r = 0; r < 8; r++)   /* sums of 4: group 4r + g at int32 lanes 2g, 2g + 1 */
        f[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, _mm256_loadu_si256((const __m256i *)(const void *)(q + 32 * r))),
                                 one16);
    for (int k = 0; k < 2; k++) {
        /* hadd: groups [0 1 4 5 | 2 3 6 7] of the two registers' 8 groups, then
           packs: int16 dwords [0 1] [4 5] [8 9] [12 13] | [2 3] [6 7] [10 11] [14 15] */
        __m256i a = _mm256_hadd_epi32(f[4 * k], f[4 * k + 1]), b = _mm256_hadd_epi32(f[4 * k + 2], f[4 * k + 3]);
        s8[k] = _mm256_permutevar8x32_epi32(_mm256_packs_epi32(a, b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    }
}

/* ---- weights ------------------------------------------------------------------ */

/* The indices are stored, then read back one by one (scalar loads, then the
 * grid loads at them): without this barrier gcc extracts them from the
 * registers with vpextrw, two uops each. Read back right after the store,
 * the loads wait for it: the 4-row gemv decodes its 4 rows' blocks before
 * the first row's sum (bench_kernels on Zen 3: IQ1_S 2.9 -> 3.3 GB/s, IQ1_M
 * 2.7 -> 3.1, a shared machine). */
IQ1_INLINE void iq1_stored(void) { __asm__ volatile("" ::: "memory"); }

/* IQ1_S: the grid index of group k, qs[k] | ((qh[k / 4] >> 3 (k % 4)) & 7)
 * << 8, for all 32 groups: the word qh[k / 4] shifted by 8 - 3 (k % 4)
 * (vpmullw by 256, 32, 4 keeps the low 16 bits; k % 4 = 3 is a right shift
 * by 1: vpmulhuw by 2^15) */
IQ1_INLINE void iq1_s_index(const pk_block_iq1_s *w, uint16_t idx[32]) {
    const __m256i h = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)w->qh));
    const __m256i rep = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,
                                         4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7);
    const __m256i lo = _mm256_setr_epi16(256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0, 256, 32, 4, 0);
    const __m256i hi = _mm256_setr_epi16(0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768, 0, 0, 0, -32768);
    for (int half = 0; half < 2; half++) {
        __m256i v = _mm256_shuffle_epi8(h, _mm256_add_epi8(rep, _mm256_set1_epi8((char)(8 * half))));
        v = _mm256_and_si256(_mm256_or_si256(_mm256_mullo_epi16(v, lo), _mm256_mulhi_epu16(v, hi)),
                             _mm256_set1_epi16(0x700));
        v = _mm256_or_si256(v, _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(w->qs + 16 * half))));
        _mm256_store_si256((__m256i *)(void *)(idx + 16 * half), v);
    }
}

/* IQ1_M: group k's nibble is nibble k % 2 of qh[k / 2], its bits 0-2 the
 * index's bits 8-10, bit 3 the delta's sign; the byte times 256 (k even) or
 * 16 (k odd) puts them at bits 8-10 and 11. neg[k / 16], int16 lane k % 16:
 * 2 where the delta is negative, else 0. */
IQ1_INLINE void iq1_m_index(const pk_block_iq1_m *w, uint16_t idx[32], __m256i neg[2]) {
    const __m128i qh = _mm_loadu_si128((const __m128i *)(const void *)w->qh);
    const __m256i mul = _mm256_setr_epi16(256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256, 16);
    for (int half = 0; half < 2; half++) {
        __m128i d = _mm_shuffle_epi8(qh, _mm_add_epi8(_mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7),
                                                      _mm_set1_epi8((char)(8 * half))));
        __m256i v = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(d), mul);
        neg[half] = _mm256_srli_epi16(_mm256_and_si256(v, _mm256_set1_epi16(0x800)), 10);
        v = _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi16(0x700)),
                            _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(w->qs + 16 * half))));
        _mm256_store_si256((__m256i *)(void *)(idx + 16 * half), v);
    }
}

/* register V(h, j): levels + 1 of group j of sub-blocks 4h .. 4h + 3 */
IQ1_INLINE __m256i iq1_v(const uint64_t *grid, const uint16_t *idx, int h, int j) {
    const uint16_t *i = idx + 16 * h + j;
    __m256i g = _mm256_setr_epi64x((long long)grid[i[0]], (long long)grid[i[4]], (long long)grid[i[8]],
                                   (long long)grid[i[12]]);
    return _mm256_add_epi8(g, _mm256_set1_epi8(1));
}

/* IQ1_S: the 8 scales 2 ls + 1 (ls = bits 12-14 of qh[s]) as int16 */
IQ1_INLINE __m128i iq1_s_scales(const pk_block_iq1_s *w) {
    __m128i ls = _mm_and_si128(_mm_srli_epi16(_mm_loadu_si128((const __m128i *)(const void *)w->qh), 12),
                               _mm_set1_epi16(7));
    return _mm_or_si128(_mm_add_epi16(ls, ls), _mm_set1_epi16(1));
}

/* IQ1_M: the 16 scales 2 ls + 1 as int16, entry 2s + h for sub-block s, half
 * h: sub-blocks 0-3 in the low 128-bit lane, 4-7 in the high one. The field
 * of (s, h) is at bit 6 (s % 2) + 3h of word s / 2, moved to bits 9-11 by a
 * vpmullw. */
IQ1_INLINE __m256i iq1_m_scales(const pk_block_iq1_m *w) {
    uint64_t sc;
    memcpy(&sc, w->scales, 8);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)sc),
                                    _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3,
                                                     4, 5, 4, 5, 4, 5, 4, 5, 6, 7, 6, 7, 6, 7, 6, 7));
    v = _mm256_mullo_epi16(v, _mm256_setr_epi16(512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1, 512, 64, 8, 1));
    v = _mm256_and_si256(_mm256_srli_epi16(v, 9), _mm256_set1_epi16(7));
    return _mm256_or_si256(_mm256_add_epi16(v, v), _mm256_set1_epi16(1));
}

/* the lane scales of a register: 64-bit lane q gets 8 times int16 entry eq
 * of a 128-bit lane of scales (the same in both 128-bit lanes) */
IQ1_INLINE __m256i iq1_lane_scales(__m256i sc128x2, int e0, int e1, int e2, int e3) {
    const __m256i pick = _mm256_setr_epi8(
        (char)(2 * e0), (char)(2 * e0 + 1), (char)(2 * e0), (char)(2 * e0 + 1), (char)(2 * e0), (char)(2 * e0 + 1),
        (char)(2 * e0), (char)(2 * e0 + 1), (char)(2 * e1), (char)(2 * e1 + 1), (char)(2 * e1), (char)(2 * e1 + 1),
        (char)(2 * e1), (char)(2 * e1 + 1), (char)(2 * e1), (char)(2 * e1 + 1), (char)(2 * e2), (char)(2 * e2 + 1),
        (char)(2 * e2), (char)(2 * e2 + 1), (char)(2 * e2), (char)(2 * e2 + 1), (char)(2 * e2), (char)(2 * e2 + 1),
        (char)(2 * e3), (char)(2 * e3 + 1), (char)(2 * e3), (char)(2 * e3 + 1), (char)(2 * e3), (char)(2 * e3 + 1),
        (char)(2 * e3), (char)(2 * e3 + 1));
    return _mm256_slli_epi16(_mm256_shuffle_epi8(sc128x2, pick), 3);
}

/* A super-block's weights, decoded: S[h] (IQ1_S) or S[2h + k] (IQ1_M,
 * groups 2k, 2k + 1) the lane scales of half h's registers, times 8;
 * C[0..1] the delta terms' coefficients ls' * (8 - s) (positive, 7 or 9 times
 * ls') against the group sums: IQ1_S one per sub-block, doubled against the
 * 16 bsums in C[0]; IQ1_M per group in the order of iq1_sums8 */
typedef struct {
    uint16_t idx[32];
    __m256i S[4];
    __m256i C[2];
} iq1_w;

IQ1_INLINE void iq1_s_prep(const pk_block_iq1_s *w, iq1_w *o) {
    iq1_s_index(w, o->idx);
    const __m128i ls = iq1_s_scales(w);
    const __m256i l2 = _mm256_broadcastsi128_si256(ls);
    o->S[0] = iq1_lane_scales(l2, 0, 1, 2, 3);
    o->S[1] = iq1_lane_scales(l2, 4, 5, 6, 7);
    __m128i t = _mm_add_epi16(_mm_set1_epi16(7), _mm_and_si128(_mm_srai_epi16(_mm_loadu_si128((const __m128i *)(const void *)w->qh), 15),
                                                               _mm_set1_epi16(2)));
    __m128i c = _mm_mullo_epi16(ls, t);
    o->C[0] = _mm256_set_m128i(_mm_unpackhi_epi16(c, c), _mm_unpacklo_epi16(c, c));
}

IQ1_INLINE void iq1_m_prep(const pk_block_iq1_m *w, iq1_w *o) {
    __m256i neg[2];
    iq1_m_index(w, o->idx, neg);
    const __m256i nat = iq1_m_scales(w);
    const __m256i lo = _mm256_permute4x64_epi64(nat, 0x44), hi = _mm256_permute4x64_epi64(nat, 0xEE);
    o->S[0] = iq1_lane_scales(lo, 0, 2, 4, 6);
    o->S[1] = iq1_lane_scales(lo, 1, 3, 5, 7);
    o->S[2] = iq1_lane_scales(hi, 0, 2, 4, 6);
    o->S[3] = iq1_lane_scales(hi, 1, 3, 5, 7);
    /* per group k the scale of entry k / 2: each entry twice */
    __m256i d0 = _mm256_unpacklo_epi16(nat, nat), d1 = _mm256_unpackhi_epi16(nat, nat);
    __m256i g0 = _mm256_permute2x128_si256(d0, d1, 0x20), g1 = _mm256_permute2x128_si256(d0, d1, 0x31);
    o->C[0] = _mm256_mullo_epi16(g0, _mm256_add_epi16(neg[0], _mm256_set1_epi16(7)));
    o->C[1] = _mm256_mullo_epi16(g1, _mm256_add_epi16(neg[1], _mm256_set1_epi16(7)));
}

/* the 8 registers V(h, j) (v[4h + j]) of a decoded super-block */
IQ1_INLINE void iq1_fetch(const uint64_t *grid, const iq1_w *d, __m256i v[8]) {
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++) v[4 * h + j] = iq1_v(grid, d->idx, h, j);
}

/* 8 times the super-block's integer sum, in 8 int32 lanes: v its registers,
 * S and C as in iq1_w, xp the activations in the V order, gs the group sums
 * (IQ1_S: the 16 bsums in gs[0]; IQ1_M: iq1_sums8) */
IQ1_INLINE __m256i iq1_sum(const int M, const __m256i *v, const __m256i *S, const __m256i *C, const __m256i *xp,
                           const __m256i *gs) {
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i *vh = v + 4 * h, *xh = xp + 4 * h;
        __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(vh[0], xh[0]), _mm256_maddubs_epi16(vh[1], xh[1]));
        __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(vh[2], xh[2]), _mm256_maddubs_epi16(vh[3], xh[3]));
        if (M) isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_madd_epi16(p01, S[2 * h]),
                                                             _mm256_madd_epi16(p23, S[2 * h + 1])));
        else isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_add_epi16(p01, p23), S[h]));
    }
    __m256i c = _mm256_madd_epi16(C[0], gs[0]);
    if (M) c = _mm256_add_epi32(c, _mm256_madd_epi16(C[1], gs[1]));
    return _mm256_sub_epi32(isum, c);
}

#endif
