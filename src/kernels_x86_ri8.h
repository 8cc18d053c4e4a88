/* kernels_x86_ri8.h - the pieces shared by the x86 prompt kernels for
 * MXFP4, Q5_0 and Q4_0 against Q8_0 activations ("ri8" gemms of
 * kernels_avx2_gemm.c: 8 rows per group; kernels_avx512_gemm.c decodes 16
 * rows in this layout itself, with signed levels, and takes only ri_bsize,
 * ri_off and ri_x4 from here): a block of 8 weight rows decoded
 * row-interleaved, and the per-token data the products need. Not a
 * translation unit: included inside the ISA guards (after <immintrin.h>),
 * so each file gets a copy compiled with its flags.
 *
 * Layout: per block of 8 rows, 8 registers q[j] whose dword lane r holds
 * row r's unsigned levels (level + off: MXFP4 ggml's kvalues_mxfp4 + 12 in
 * 0..24, Q5_0 the raw 5 bits in 0..31, Q4_0 the raw nibble in 0..15; Q8_0
 * w ^ 0x80 in 0..255, for the AVX-512 gemm only: vpmaddubsw pairs of it
 * could saturate) for the 4 elements 4j .. 4j + 3, and the 8 row scales as
 * floats. One token's
 * 4 activations at 4j, broadcast to every lane, times q[j] (vpmaddubsw /
 * vpdpbusd, u8 x s8) then give the 8 rows' partial sums side by side: no
 * horizontal sums per row. The offset is removed per (token, block) by
 * subtracting off * (sum of the block's activations) from the int32 sum, so
 * each block's sum is exact, as the reference's.
 */
#ifndef PK_KERNELS_X86_RI8_H
#define PK_KERNELS_X86_RI8_H

#define RI_INLINE static inline __attribute__((always_inline))

/* A gemm table entry: gemm_NAME calls the driver DRIVER for the type ID
 * (the 8-row AVX2, 16-row AVX-512 and K-quant 16-row drivers alike). */
#define RI_ENTRY(NAME, DRIVER, ID)                                                   \
static void gemm_##NAME(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, \
                        const void *w, size_t rb, const void *const *x) {            \
    DRIVER(ID, n, nrows, ntok, y, ys, w, rb, x);                                     \
}

enum { RI_MXFP4, RI_Q5_0, RI_Q4_0, RI_Q8_0 };

RI_INLINE size_t ri_bsize(const int T) {
    if (T == RI_Q8_0) return sizeof(pk_block_q8_0);
    return T == RI_MXFP4 ? sizeof(pk_block_mxfp4) : T == RI_Q5_0 ? sizeof(pk_block_q5_0) : sizeof(pk_block_q4_0);
}
/* the offset of the unsigned levels */
RI_INLINE int ri_off(const int T) { return T == RI_Q8_0 ? 128 : T == RI_MXFP4 ? 12 : T == RI_Q5_0 ? 16 : 8; }

/* One block's 32 unsigned levels in element order (its nibbles: element j
 * low nibble of qs[j], j + 16 high nibble) and its scale. */
RI_INLINE __m256i ri_levels(const int T, const uint8_t *blk, float *d) {
    if (T == RI_Q8_0) {   /* level + 128 in 0..255 (w ^ 0x80) */
        uint16_t h;
        memcpy(&h, blk, 2);
        *d = _cvtsh_ss(h);
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), _mm256_set1_epi8((char)0x80));
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const uint8_t *qs = blk + (T == RI_MXFP4 ? 1 : T == RI_Q5_0 ? 6 : 2);
    __m128i c = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(c, 4), c), m4);
    if (T == RI_MXFP4) {
        const __m256i tab = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                             12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
        uint32_t bits = pk_e8m0_half_bits[blk[0]];
        memcpy(d, &bits, 4);
        return _mm256_shuffle_epi8(tab, v);
    }
    uint16_t h;
    memcpy(&h, blk, 2);
    *d = _cvtsh_ss(h);
    if (T == RI_Q5_0) {   /* bit j of qh: the fifth bit of element j */
        int32_t qh;
        memcpy(&qh, blk + 2, 4);
        const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
        __m256i hb = _mm256_shuffle_epi8(_mm256_set1_epi32(qh),
                                         _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
        hb = _mm256_cmpeq_epi8(_mm256_and_si256(hb, bits), bits);
        v = _mm256_or_si256(v, _mm256_and_si256(hb, _mm256_set1_epi8(0x10)));
    }
    return v;
}

/* Block b of 8 rows at w (rows rb bytes apart; nr < 8 valid, the rest
 * zero levels and zero scales) into q[8] and d as above. */
RI_INLINE void ri8_decode(const int T, const uint8_t *w, size_t rb, int nr, int64_t b, __m256i *q, __m256 *d) {
    __m256i v[8];
    float s[8];
    for (int r = 0; r < 8; r++) {
        if (r < nr) {
            v[r] = ri_levels(T, w + (size_t)r * rb + (size_t)b * ri_bsize(T), &s[r]);
        } else {
            v[r] = _mm256_setzero_si256();
            s[r] = 0.0f;
        }
    }
    /* an 8 x 8 dword transpose: 32-bit then 64-bit unpacks within halves
       leave rows 0-3 (v[0..3]) and 4-7 (v[4..7]) with dwords j | j + 4 of
       their rows in v[0] (j = 0), v[2] (1), v[1] (2), v[3] (3); the
       128-bit halves are then paired across the two row groups */
    for (int i = 0; i < 8; i += 2) {
        __m256i lo = _mm256_unpacklo_epi32(v[i], v[i + 1]), hi = _mm256_unpackhi_epi32(v[i], v[i + 1]);
        v[i] = lo; v[i + 1] = hi;
    }
    for (int i = 0; i < 8; i += 4)
        for (int k = 0; k < 2; k++) {
            __m256i lo = _mm256_unpacklo_epi64(v[i + k], v[i + k + 2]);
            __m256i hi = _mm256_unpackhi_epi64(v[i + k], v[i + k + 2]);
            v[i + k] = lo; v[i + k + 2] = hi;
        }
    static const int src[4] = {0, 2, 1, 3};
    for (int j = 0; j < 4; j++) {
        q[j] = _mm256_permute2x128_si256(v[src[j]], v[4 + src[j]], 0x20);
        q[j + 4] = _mm256_permute2x128_si256(v[src[j]], v[4 + src[j]], 0x31);
    }
    *d = _mm256_loadu_ps(s);
}

/* Per token t < nt and block b < nbk of xs[t]: dx[t * stride + b] its
 * scale, cx[t * stride + b] off * the sum of its 32 activations. */
static inline void ri_prep(int off, int nt, const pk_block_q8_0 *const *xs, int nbk, int stride, float *dx,
                           int32_t *cx) {
    const __m256i ones = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < nbk; b++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)xs[t][b].qs);
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones, q), one16);
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
            cx[t * stride + b] = off * _mm_cvtsi128_si32(h);
            dx[t * stride + b] = _cvtsh_ss(xs[t][b].d);
        }
}

/* acc + in each dword the sum of the 4 products of its bytes, u unsigned x
 * s signed: one vpdpbusd where 256-bit VNNI is built in (AVX-VNNI, or
 * AVX-512 VNNI + VL), else vpmaddubsw, vpmaddwd and vpaddd, which give the
 * same sum only while each pair of products fits int16 (vpmaddubsw
 * saturates): callers that need the AVX2 form for that keep it. */
#if (defined(__AVX512VNNI__) && defined(__AVX512VL__)) || defined(__AVXVNNI__)
#define X86_VNNI256 1
#endif
RI_INLINE __m256i x86_dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, u, s);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* token t's 4 activations at p as one dword (to broadcast) */
RI_INLINE int32_t ri_x4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

#endif
