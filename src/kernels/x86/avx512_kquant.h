/* kernels/x86/avx512_kquant.h - 512-bit kernels for the K-quants (Q2_K..Q6_K)
 * and IQ4_XS against Q8_K activations. Not a translation unit: included only
 * by kernels/x86/avx512.c inside its ISA guard (after <immintrin.h>).
 *
 * Tuned for: single-token decode. A gemv runs 4 rows side by side; per
 * super-block the activation is loaded (its 128-bit lanes regrouped to match
 * the weight layout) once and shared by the 4 rows, so each row only decodes
 * its own levels and scales. Every weight register holds 64 levels. The 4
 * rows' fp16 scales (and mins) are converted in one instruction and their
 * min terms folded with one FMA. The next 4 rows are software-prefetched
 * while the current ones are computed (rows are short and cross pages, so
 * the hardware prefetcher alone does not keep up when the weights stream
 * from DRAM: bench/README.md).
 *
 * Per 64 levels: vpmaddubsw (unsigned level x int8 activation, int16 pair
 * sums) then vpdpwssd with the sub-block scales spread over the matching
 * int16 lanes (one vpermw of the block's scales). Q3_K (-4) and Q6_K (-32)
 * offsets: -off * (pair sums of x) is computed once per activation block
 * and added to the int16 pair sums, giving the exact pair sums of
 * (level - off) * x in the same lanes (an offset taken out with bsums would
 * put large cancelling values in different lanes, which the float
 * conversion then rounds). IQ4_XS: |level| from a table, the sign moved
 * onto the activation with a mask. K-quant mins use bsums as the reference.
 *
 * Numerics: within a super-block everything is exact int32. int16 pair
 * sums: |.| <= 2 * 63 * 127 + 2 * 32 * 127 (Q6_K), 2 * 127 * 127 (IQ4_XS),
 * all < 2^15 given activations in [-127, 127]; times |scale| <= 128 over 256
 * levels: < 2^23 per lane; the gemv sums each row's lanes in int32 to 4
 * quarter sums (< 2^25, rounded once when converted to float, as the
 * reference converts its block's int sum). Only the float accumulation
 * across super-blocks differs from the reference (and it stays
 * proportional to each lane's own terms).
 */

#define KQ_INLINE static inline __attribute__((always_inline))

/* int16 permutation index: 128-bit lane t of the result takes int16 lane
 * v_t of the source */
KQ_INLINE __m512i kq_idx4(int a, int b, int c, int d) {
    int A = a | a << 16, B = b | b << 16, C = c | c << 16, D = d | d << 16;
    return _mm512_setr_epi32(A, A, A, A, B, B, B, B, C, C, C, C, D, D, D, D);
}
KQ_INLINE __m512i kq_ld(const void *p) { return _mm512_loadu_si512(p); }
/* 32 bytes at p in both 256-bit halves, the upper half shifted right by sh
 * bits (16-bit lanes) */
KQ_INLINE __m512i kq_ld32x2(const void *p, int sh) {
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_srlv_epi16(v, _mm512_inserti64x4(_mm512_setzero_si512(),
                                                   _mm256_set1_epi16((short)sh), 1));
}
/* int32 lanes of pairs (u x s) times int16 scales, accumulated */
KQ_INLINE __m512i kq_dot(__m512i acc, __m512i u, __m512i s, __m512i sc16) {
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, s), sc16);
}
/* the same for (u - off) x s, with nx = -off * pair sums of s */
KQ_INLINE __m512i kq_dot_off(__m512i acc, __m512i u, __m512i s, __m512i nx, __m512i sc16) {
    return _mm512_dpwssd_epi32(acc, _mm512_add_epi16(_mm512_maddubs_epi16(u, s), nx), sc16);
}
KQ_INLINE __m512 kq_fold(__m512i isum, float d, __m512 acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
}

/* ---- activation views ------------------------------------------------------ */

/* plain: v[k] = qs[64k .. 64k + 63] */
typedef struct { __m512i v[4], nx[4]; __m256i bs; float d; } kq_xa;

/* nx[k] = -off * (pair sums of v[k]), int16 (|.| <= 2 * 32 * 127): added to
 * the pair sums of unsigned levels it makes them the exact pair sums of
 * (level - off) * x, so every int32 lane stays proportional to its own
 * terms (no cancelling offsets across lanes, which float would round) */
KQ_INLINE void kq_x_offset(kq_xa *a, int off) {
    for (int k = 0; k < 4; k++)
        a->nx[k] = _mm512_sub_epi16(_mm512_setzero_si512(),
                                    _mm512_maddubs_epi16(_mm512_set1_epi8((char)off), a->v[k]));
}

KQ_INLINE void kq_x_plain(const pk_block_q8_K *x, kq_xa *a) {
    for (int k = 0; k < 4; k++) a->v[k] = kq_ld(x->qs + 64 * k);
    a->bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    a->d = x->d;
}
KQ_INLINE void kq_x_q6(const pk_block_q8_K *x, kq_xa *a) { kq_x_plain(x, a); kq_x_offset(a, 32); }
/* Q4_K / Q5_K: 64-byte weight load j holds elements 128j + {0..31, 64..95}
 * in its low nibbles and 128j + {32..63, 96..127} in its high nibbles. */
KQ_INLINE void kq_x_k4(const pk_block_q8_K *x, kq_xa *a) {
    __m512i x0 = kq_ld(x->qs), x1 = kq_ld(x->qs + 64), x2 = kq_ld(x->qs + 128), x3 = kq_ld(x->qs + 192);
    a->v[0] = _mm512_shuffle_i64x2(x0, x1, 0x44); a->v[1] = _mm512_shuffle_i64x2(x0, x1, 0xEE);
    a->v[2] = _mm512_shuffle_i64x2(x2, x3, 0x44); a->v[3] = _mm512_shuffle_i64x2(x2, x3, 0xEE);
    /* bsums in pairs: the 8 sums over 32-element sub-blocks, int16 */
    __m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1));
    a->bs = _mm256_castsi128_si256(_mm256_cvtepi32_epi16(p));
    a->d = x->d;
}
/* Q2_K / Q3_K: 2-bit field k of the 64 qs bytes holds elements
 * {32k .. 32k + 31, 128 + 32k .. 128 + 32k + 31} */
KQ_INLINE void kq_x_k2(const pk_block_q8_K *x, kq_xa *a) {
    __m512i x0 = kq_ld(x->qs), x1 = kq_ld(x->qs + 64), x2 = kq_ld(x->qs + 128), x3 = kq_ld(x->qs + 192);
    a->v[0] = _mm512_shuffle_i64x2(x0, x2, 0x44); a->v[1] = _mm512_shuffle_i64x2(x0, x2, 0xEE);
    a->v[2] = _mm512_shuffle_i64x2(x1, x3, 0x44); a->v[3] = _mm512_shuffle_i64x2(x1, x3, 0xEE);
    a->bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    a->d = x->d;
}
KQ_INLINE void kq_x_q3(const pk_block_q8_K *x, kq_xa *a) { kq_x_k2(x, a); kq_x_offset(a, 4); }
/* IQ4_XS: 64-byte load j: 128-bit lane t holds sub-block 4j + t, low nibbles
 * its elements 0..15, high nibbles 16..31 */
KQ_INLINE void kq_x_iq4(const pk_block_q8_K *x, kq_xa *a) {
    __m512i x0 = kq_ld(x->qs), x1 = kq_ld(x->qs + 64), x2 = kq_ld(x->qs + 128), x3 = kq_ld(x->qs + 192);
    a->v[0] = _mm512_shuffle_i64x2(x0, x1, 0x88); a->v[1] = _mm512_shuffle_i64x2(x0, x1, 0xDD);
    a->v[2] = _mm512_shuffle_i64x2(x2, x3, 0x88); a->v[3] = _mm512_shuffle_i64x2(x2, x3, 0xDD);
    a->bs = _mm256_setzero_si256();
    a->d = x->d;
}

/* ---- one super-block of one row ------------------------------------------- */

/* the Q4_K / Q5_K block tail: the 4 dots of the levels lo0 .. hi1 with the
 * scales sc spread over their lanes; *ms the mins mn times the bsum pairs */
KQ_INLINE __m512i kq_k4_dots(const uint8_t *sc, const uint8_t *mn, __m512i lo0, __m512i hi0, __m512i lo1,
                             __m512i hi1, const kq_xa *a, __m128i *ms) {
    __m512i s16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    __m512i isum = kq_dot(_mm512_setzero_si512(), lo0, a->v[0],
                          _mm512_permutexvar_epi16(kq_idx4(0, 0, 2, 2), s16));
    isum = kq_dot(isum, hi0, a->v[1], _mm512_permutexvar_epi16(kq_idx4(1, 1, 3, 3), s16));
    isum = kq_dot(isum, lo1, a->v[2], _mm512_permutexvar_epi16(kq_idx4(4, 4, 6, 6), s16));
    isum = kq_dot(isum, hi1, a->v[3], _mm512_permutexvar_epi16(kq_idx4(5, 5, 7, 7), s16));
    *ms = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn)),
                         _mm256_castsi256_si128(a->bs));
    return isum;
}

KQ_INLINE __m512i kq_q4_K(const pk_block_q4_K *w, const kq_xa *a, __m128i *ms) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    uint8_t sc[8], mn[8];
    pk_get_scales_mins_k4(w->scales, sc, mn);
    __m512i q0 = kq_ld(w->qs), q1 = kq_ld(w->qs + 64);
    __m512i lo0 = _mm512_and_si512(q0, m4), hi0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
    __m512i lo1 = _mm512_and_si512(q1, m4), hi1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
    return kq_k4_dots(sc, mn, lo0, hi0, lo1, hi1, a, ms);
}

/* a | (b & m): vpternlog */
KQ_INLINE __m512i kq_or_and(__m512i a, __m512i b, __m512i m) { return _mm512_ternarylogic_epi32(a, b, m, 0xF8); }

KQ_INLINE __m512i kq_q5_K(const pk_block_q5_K *w, const kq_xa *a, __m128i *ms) {
    const __m512i m4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
    uint8_t sc[8], mn[8];
    pk_get_scales_mins_k4(w->scales, sc, mn);
    /* qh in the low half, qh >> 2 in the high half: bit 4j (lo) / 4j+1 (hi) */
    __m512i qh = kq_ld32x2(w->qh, 2);
    __m512i q0 = kq_ld(w->qs), q1 = kq_ld(w->qs + 64);
    __m512i lo0 = kq_or_and(_mm512_and_si512(q0, m4), _mm512_slli_epi16(qh, 4), b4);
    __m512i hi0 = kq_or_and(_mm512_and_si512(_mm512_srli_epi16(q0, 4), m4), _mm512_slli_epi16(qh, 3), b4);
    __m512i lo1 = kq_or_and(_mm512_and_si512(q1, m4), qh, b4);
    __m512i hi1 = kq_or_and(_mm512_and_si512(_mm512_srli_epi16(q1, 4), m4), _mm512_srli_epi16(qh, 1), b4);
    return kq_k4_dots(sc, mn, lo0, hi0, lo1, hi1, a, ms);
}

/* Q6_K: chunk c of 64 elements, 128-bit lane t = sub-block 4c + t */
KQ_INLINE __m512i kq_q6_K(const pk_block_q6_K *w, const kq_xa *a, __m128i *ms) {
    (void)ms;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
    __m512i isum = _mm512_setzero_si512();
    __m512i s16 = _mm512_castsi256_si512(sc);
    for (int h = 0; h < 2; h++) {
        __m512i l = kq_ld(w->ql + 64 * h);
        __m512i qh = kq_ld32x2(w->qh + 32 * h, 2);
        __m512i ua = kq_or_and(_mm512_and_si512(l, m4), _mm512_slli_epi16(qh, 4), m30);
        __m512i ub = kq_or_and(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4), qh, m30);
        isum = kq_dot_off(isum, ua, a->v[2 * h], a->nx[2 * h],
                      _mm512_permutexvar_epi16(kq_idx4(8 * h, 8 * h + 1, 8 * h + 2, 8 * h + 3), s16));
        isum = kq_dot_off(isum, ub, a->v[2 * h + 1], a->nx[2 * h + 1],
                      _mm512_permutexvar_epi16(kq_idx4(8 * h + 4, 8 * h + 5, 8 * h + 6, 8 * h + 7), s16));
    }
    return isum;
}

/* Q2_K: field k (bits 2k..2k+1), 128-bit lanes = sub-blocks 2k, 2k+1, 8+2k, 9+2k */
KQ_INLINE __m512i kq_q2_K(const pk_block_q2_K *w, const kq_xa *a, __m128i *ms) {
    const __m512i m3 = _mm512_set1_epi8(3);
    __m128i s8 = _mm_loadu_si128((const __m128i *)w->scales);
    __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(s8, _mm_set1_epi8(0x0F))));
    __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
    __m256i m8 = _mm256_madd_epi16(m16, a->bs);
    *ms = _mm_add_epi32(_mm256_castsi256_si128(m8), _mm256_extracti128_si256(m8, 1));
    __m512i q = kq_ld(w->qs);
    __m512i isum = kq_dot(_mm512_setzero_si512(), _mm512_and_si512(q, m3), a->v[0],
                          _mm512_permutexvar_epi16(kq_idx4(0, 1, 8, 9), s16));
    isum = kq_dot(isum, _mm512_and_si512(_mm512_srli_epi16(q, 2), m3), a->v[1],
                  _mm512_permutexvar_epi16(kq_idx4(2, 3, 10, 11), s16));
    isum = kq_dot(isum, _mm512_and_si512(_mm512_srli_epi16(q, 4), m3), a->v[2],
                  _mm512_permutexvar_epi16(kq_idx4(4, 5, 12, 13), s16));
    isum = kq_dot(isum, _mm512_and_si512(_mm512_srli_epi16(q, 6), m3), a->v[3],
                  _mm512_permutexvar_epi16(kq_idx4(6, 7, 14, 15), s16));
    return isum;
}


/* Q3_K: as Q2_K plus the third bit: bit k (low half) / 4 + k (high half) of
 * hmask; level + 4 in [0, 7] */
KQ_INLINE __m512i kq_q3_K(const pk_block_q3_K *w, const kq_xa *a, __m128i *ms) {
    (void)ms;
    const __m512i m3 = _mm512_set1_epi8(3), b4 = _mm512_set1_epi8(4);
    __m512i s16 = _mm512_castsi256_si512(lv_q3_scales(w->scales));
    __m512i hm = kq_ld32x2(w->hmask, 4);
    __m512i q = kq_ld(w->qs);
    __m512i isum = _mm512_setzero_si512();
    __m512i u0 = kq_or_and(_mm512_and_si512(q, m3), _mm512_slli_epi16(hm, 2), b4);
    __m512i u1 = kq_or_and(_mm512_and_si512(_mm512_srli_epi16(q, 2), m3), _mm512_slli_epi16(hm, 1), b4);
    __m512i u2 = kq_or_and(_mm512_and_si512(_mm512_srli_epi16(q, 4), m3), hm, b4);
    __m512i u3 = kq_or_and(_mm512_and_si512(_mm512_srli_epi16(q, 6), m3), _mm512_srli_epi16(hm, 1), b4);
    isum = kq_dot_off(isum, u0, a->v[0], a->nx[0], _mm512_permutexvar_epi16(kq_idx4(0, 1, 8, 9), s16));
    isum = kq_dot_off(isum, u1, a->v[1], a->nx[1], _mm512_permutexvar_epi16(kq_idx4(2, 3, 10, 11), s16));
    isum = kq_dot_off(isum, u2, a->v[2], a->nx[2], _mm512_permutexvar_epi16(kq_idx4(4, 5, 12, 13), s16));
    isum = kq_dot_off(isum, u3, a->v[3], a->nx[3], _mm512_permutexvar_epi16(kq_idx4(6, 7, 14, 15), s16));
    return isum;
}

/* IQ4_XS: |level| by vpshufb, the sign (levels 0..7 are negative) moved onto
 * the activation */
KQ_INLINE __m512i kq_iq4_xs(const pk_block_iq4_xs *w, const kq_xa *a, __m128i *ms) {
    (void)ms;
    const __m512i m4 = _mm512_set1_epi8(0x0F), b3 = _mm512_set1_epi8(8);
    const __m512i tab = _mm512_broadcast_i32x4(_mm_abs_epi8(
        _mm_loadu_si128((const __m128i *)pk_iq4nl_values)));
    /* scales: low nibbles of scales_l (even / odd sub-blocks), 2 bits each of scales_h */
    uint32_t sl;
    memcpy(&sl, w->scales_l, 4);
    __m128i l4 = _mm_cvtsi32_si128((int)sl);
    __m128i lo = _mm_unpacklo_epi8(_mm_and_si128(l4, _mm_set1_epi8(0x0F)),
                                   _mm_and_si128(_mm_srli_epi16(l4, 4), _mm_set1_epi8(0x0F)));
    __m128i hb = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)w->scales_h),
                                              _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                               _mm_set1_epi16(3));
    __m128i ls = _mm_sub_epi16(_mm_or_si128(_mm_cvtepu8_epi16(lo), _mm_slli_epi16(hb, 4)),
                               _mm_set1_epi16(32));
    __m512i s16 = _mm512_castsi128_si512(ls);
    const __m512i zero = _mm512_setzero_si512();
    __m512i isum = zero;
    for (int j = 0; j < 2; j++) {
        __m512i q = kq_ld(w->qs + 64 * j);
        __m512i il = _mm512_and_si512(q, m4), ih = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        __m512i sc = _mm512_permutexvar_epi16(kq_idx4(4 * j, 4 * j + 1, 4 * j + 2, 4 * j + 3), s16);
        __mmask64 nl = _mm512_testn_epi8_mask(il, b3), nh = _mm512_testn_epi8_mask(ih, b3);
        __m512i xl = _mm512_mask_sub_epi8(a->v[2 * j], nl, zero, a->v[2 * j]);
        __m512i xh = _mm512_mask_sub_epi8(a->v[2 * j + 1], nh, zero, a->v[2 * j + 1]);
        isum = kq_dot(isum, _mm512_shuffle_epi8(tab, il), xl, sc);
        isum = kq_dot(isum, _mm512_shuffle_epi8(tab, ih), xh, sc);
    }
    return isum;
}

/* Software prefetch of the next 4 rows (the next 4 * rb bytes after this
 * group, assumed contiguous-ish): step i of nb covers 4 blocks' worth
 * (block size bs), so the whole next group is requested while this one is
 * computed. Prefetches never fault, so running past the end of the matrix
 * is harmless. */
#ifndef KQ_PF_HINT
#define KQ_PF_HINT _MM_HINT_T0
#endif
KQ_INLINE void kq_prefetch(const char *base, int64_t i, size_t bs) {
    const char *p = base + (size_t)i * 4 * bs;
    for (size_t o = 0; o < 4 * bs; o += 64) _mm_prefetch(p + o, KQ_PF_HINT);
}

/* ---- the types -------------------------------------------------------------- */

enum { KQ_Q2_K, KQ_Q3_K, KQ_Q4_K, KQ_Q5_K, KQ_Q6_K, KQ_IQ4_XS };

/* 1 for the types with mins (dmin follows d in the block) */
KQ_INLINE int kq_hasmin(const int K) { return K == KQ_Q2_K || K == KQ_Q4_K || K == KQ_Q5_K; }
KQ_INLINE size_t kq_bsize(const int K) {
    return K == KQ_Q2_K   ? sizeof(pk_block_q2_K)
           : K == KQ_Q3_K ? sizeof(pk_block_q3_K)
           : K == KQ_Q4_K ? sizeof(pk_block_q4_K)
           : K == KQ_Q5_K ? sizeof(pk_block_q5_K)
           : K == KQ_Q6_K ? sizeof(pk_block_q6_K)
                          : sizeof(pk_block_iq4_xs);
}
/* the address of the fp16 d of block i of a row */
KQ_INLINE const uint16_t *kq_d(const int K, const void *w, int64_t i) {
    return K == KQ_Q2_K   ? &((const pk_block_q2_K *)w)[i].d
           : K == KQ_Q3_K ? &((const pk_block_q3_K *)w)[i].d
           : K == KQ_Q4_K ? &((const pk_block_q4_K *)w)[i].d
           : K == KQ_Q5_K ? &((const pk_block_q5_K *)w)[i].d
           : K == KQ_Q6_K ? &((const pk_block_q6_K *)w)[i].d
                          : &((const pk_block_iq4_xs *)w)[i].d;
}
/* its value (read as the block's field) */
KQ_INLINE uint16_t kq_dv(const int K, const void *w, int64_t i) {
    return K == KQ_Q2_K   ? ((const pk_block_q2_K *)w)[i].d
           : K == KQ_Q3_K ? ((const pk_block_q3_K *)w)[i].d
           : K == KQ_Q4_K ? ((const pk_block_q4_K *)w)[i].d
           : K == KQ_Q5_K ? ((const pk_block_q5_K *)w)[i].d
           : K == KQ_Q6_K ? ((const pk_block_q6_K *)w)[i].d
                          : ((const pk_block_iq4_xs *)w)[i].d;
}
/* the activation view of each type */
KQ_INLINE void kq_xview(const int K, const pk_block_q8_K *x, kq_xa *a) {
    if (K == KQ_Q2_K) kq_x_k2(x, a);
    else if (K == KQ_Q3_K) kq_x_q3(x, a);
    else if (K == KQ_Q4_K || K == KQ_Q5_K) kq_x_k4(x, a);
    else if (K == KQ_Q6_K) kq_x_q6(x, a);
    else kq_x_iq4(x, a);
}
/* block i of a row against the activation view: the int32 lanes, *ms the min terms */
KQ_INLINE __m512i kq_block(const int K, const void *w, int64_t i, const kq_xa *a, __m128i *ms) {
    return K == KQ_Q2_K   ? kq_q2_K(&((const pk_block_q2_K *)w)[i], a, ms)
           : K == KQ_Q3_K ? kq_q3_K(&((const pk_block_q3_K *)w)[i], a, ms)
           : K == KQ_Q4_K ? kq_q4_K(&((const pk_block_q4_K *)w)[i], a, ms)
           : K == KQ_Q5_K ? kq_q5_K(&((const pk_block_q5_K *)w)[i], a, ms)
           : K == KQ_Q6_K ? kq_q6_K(&((const pk_block_q6_K *)w)[i], a, ms)
                          : kq_iq4_xs(&((const pk_block_iq4_xs *)w)[i], a, ms);
}

/* ---- vec_dot and 4-row gemv ------------------------------------------------- */

KQ_INLINE int kq_u32(const void *p) { int v; memcpy(&v, p, 4); return v; }
/* fp16 scales of 4 rows' blocks i: with mins, [d0, dmin0, d1, dmin1, ...] (d
 * and dmin adjacent in the block); without, [d0, d1, d2, d3] */
KQ_INLINE __m256 kq_dd(const int K, const void *w0, const void *w1, const void *w2, const void *w3, int64_t i) {
    if (kq_hasmin(K))
        return _mm256_cvtph_ps(_mm_setr_epi32(kq_u32(kq_d(K, w0, i)), kq_u32(kq_d(K, w1, i)),
                                              kq_u32(kq_d(K, w2, i)), kq_u32(kq_d(K, w3, i))));
    return _mm256_castps128_ps256(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)(
        (uint64_t)kq_dv(K, w0, i) | (uint64_t)kq_dv(K, w1, i) << 16 |
        (uint64_t)kq_dv(K, w2, i) << 32 | (uint64_t)kq_dv(K, w3, i) << 48))));
}
/* the fp16 after *d (dmin, in the types with mins) */
KQ_INLINE float kq_f16_next(const uint16_t *d) {
    uint16_t v;
    memcpy(&v, (const char *)d + 2, 2);
    return _cvtsh_ss(v);
}

/* the 4 rows' block sums, [S0 S1 S2 S3] in each 128-bit quarter (a quarter
 * of each row's 16 lanes in each): exact in int32 (lanes < 2^23, 16 of
 * them), so the 4 rows share one float conversion and one FMA per block and
 * the gemv keeps one accumulator instead of 4 summed horizontally at the
 * end (faster on short rows: bench/README.md) */
KQ_INLINE __m512i kq_sum4x16(__m512i s0, __m512i s1, __m512i s2, __m512i s3) {
    __m512i u0 = _mm512_add_epi32(_mm512_unpacklo_epi32(s0, s1), _mm512_unpackhi_epi32(s0, s1));
    __m512i u1 = _mm512_add_epi32(_mm512_unpacklo_epi32(s2, s3), _mm512_unpackhi_epi32(s2, s3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(u0, u1), _mm512_unpackhi_epi64(u0, u1));
}

KQ_INLINE void kq_vec_dot(const int K, int64_t n, float *s, const void *w, const pk_block_q8_K *x) {
    int64_t nb = n / PK_QK_K;
    __m512 acc = _mm512_setzero_ps();
    __m128 macc = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        kq_xa a;
        __m128i ms = _mm_setzero_si128();
        kq_xview(K, &x[i], &a);
        __m512i isum = kq_block(K, w, i, &a, &ms);
        acc = kq_fold(isum, _cvtsh_ss(kq_dv(K, w, i)) * a.d, acc);
        if (kq_hasmin(K))
            macc = _mm_fmadd_ps(_mm_cvtepi32_ps(ms), _mm_set1_ps(kq_f16_next(kq_d(K, w, i)) * a.d), macc);
    }
    __m128 h = _mm_add_ps(macc, _mm_movehl_ps(macc, macc));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    *s = _mm512_reduce_add_ps(acc) - _mm_cvtss_f32(h);
}

KQ_INLINE void kq_gemv(const int K, pk_vec_dot_fn vec_dot, int64_t n, int64_t nrows, float *y, const void *vw,
                       size_t rb, const pk_block_q8_K *x) {
    int64_t nb = n / PK_QK_K, r = 0;
    const __m512i id = kq_hasmin(K) ? _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6)
                                    : _mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    const __m512i im = _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
    for (; r + 4 <= nrows; r += 4) {
        const void *w0 = (const char *)vw + (size_t)r * rb;
        const void *w1 = (const char *)w0 + rb;
        const void *w2 = (const char *)w1 + rb;
        const void *w3 = (const char *)w2 + rb;
        __m512 acc = _mm512_setzero_ps(), am = acc;
        const char *nxt = (const char *)w0 + 4 * rb;
        for (int64_t i = 0; i < nb; i++) {
            kq_xa a;
            __m128i m0 = _mm_setzero_si128(), m1 = m0, m2 = m0, m3 = m0;
            kq_prefetch(nxt, i, kq_bsize(K));
            kq_xview(K, &x[i], &a);
            __m512i s0 = kq_block(K, w0, i, &a, &m0);
            __m512i s1 = kq_block(K, w1, i, &a, &m1);
            __m512i s2 = kq_block(K, w2, i, &a, &m2);
            __m512i s3 = kq_block(K, w3, i, &a, &m3);
            __m512 f = _mm512_castps256_ps512(_mm256_mul_ps(kq_dd(K, w0, w1, w2, w3, i), _mm256_set1_ps(a.d)));
            acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(kq_sum4x16(s0, s1, s2, s3)),
                                  _mm512_permutexvar_ps(id, f), acc);
            if (kq_hasmin(K)) {
                __m512i mz = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(
                    _mm512_castsi128_si512(m0), m1, 1), m2, 2), m3, 3);
                am = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mz), _mm512_permutexvar_ps(im, f), am);
            }
        }
        /* acc: [y0 y1 y2 y3] in each 128-bit quarter; am: row j's 4 min terms
         * in quarter j */
        __m256 h = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
        __m128 y4 = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
        if (kq_hasmin(K)) {
            __m512 t = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13,
                                                               2, 6, 10, 14, 3, 7, 11, 15), am);
            __m256 u = _mm256_add_ps(_mm512_castps512_ps256(t), _mm512_extractf32x8_ps(t, 1));
            y4 = _mm_sub_ps(y4, _mm_add_ps(_mm256_castps256_ps128(u), _mm256_extractf128_ps(u, 1)));
        }
        _mm_storeu_ps(y + r, y4);
    }
    for (; r < nrows; r++) vec_dot(n, &y[r], (const char *)vw + (size_t)r * rb, x);
}

/* vec_dot_q2_K_512, gemv_q2_K_512, ... (GEMV_ENTRIES: kernels/x86/avx512.c) */
GEMV_ENTRIES(q2_K_512, kq, KQ_Q2_K)
GEMV_ENTRIES(q3_K_512, kq, KQ_Q3_K)
GEMV_ENTRIES(q4_K_512, kq, KQ_Q4_K)
GEMV_ENTRIES(q5_K_512, kq, KQ_Q5_K)
GEMV_ENTRIES(q6_K_512, kq, KQ_Q6_K)
GEMV_ENTRIES(iq4_xs_512, kq, KQ_IQ4_XS)

/* Q4_0 and IQ4_NL are inherited from the avx2 table (kernels/kernels.c parent chain) */
#define KQ_VEC_DOT_ENTRIES                                                         \
    [PK_TYPE_Q2_K] = vec_dot_q2_K_512, [PK_TYPE_Q3_K] = vec_dot_q3_K_512,          \
    [PK_TYPE_Q4_K] = vec_dot_q4_K_512, [PK_TYPE_Q5_K] = vec_dot_q5_K_512,          \
    [PK_TYPE_Q6_K] = vec_dot_q6_K_512, [PK_TYPE_IQ4_XS] = vec_dot_iq4_xs_512,
#define KQ_GEMV_ENTRIES                                                            \
    [PK_TYPE_Q2_K] = gemv_q2_K_512, [PK_TYPE_Q3_K] = gemv_q3_K_512,                \
    [PK_TYPE_Q4_K] = gemv_q4_K_512, [PK_TYPE_Q5_K] = gemv_q5_K_512,                \
    [PK_TYPE_Q6_K] = gemv_q6_K_512, [PK_TYPE_IQ4_XS] = gemv_iq4_xs_512,
