/* kernels/x86/ri8.h - the pieces shared by the x86 prompt kernels for
 * MXFP4, Q5_0, Q4_0 and Q8_0 against Q8_0 activations ("ri8" gemms of
 * kernels/x86/avx2_gemm.c: 8 rows per group; kernels/x86/avx512_gemm.c decodes 16
 * rows in the same layout itself and takes only ri_bsize, ri_off, ri_x4 and
 * RI_ENTRY from here): a block of 8 weight rows decoded row-interleaved,
 * and the per-token data the products need. Not a translation unit:
 * included inside the ISA guards (after <immintrin.h>), so each file gets a
 * copy compiled with its flags.
 *
 * Layout (ri8): per block of 8 rows, 8 registers q[j] whose dword lane r
 * holds row r's signed levels (MXFP4 ggml's kvalues_mxfp4 in -12..12, Q5_0
 * -16..15, Q4_0 -8..7, Q8_0 as stored) for the 4 elements 4j .. 4j + 3, the
 * 8 rows' seeds c = -128 * (sum of the block's levels) (int32; without
 * VNNI per int16 lane, see ri8_seed) and their scales as floats. The activations are prepared once per tile as unsigned
 * bytes x + 128 (ri_act, 1..255 for the quantizers' [-127, 127]). One
 * token's 4 activations at 4j, broadcast to every lane, times q[j]
 * (vpdpbusd / vpmaddubsw, u8 x s8) then give the 8 rows' partial sums side
 * by side: no horizontal sums per row. Seeded with c, each block's int32
 * sum is exactly sum(x * level), as the reference's.
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
/* the offset of the stored (unsigned) levels: level = stored - off */
RI_INLINE int ri_off(const int T) { return T == RI_Q8_0 ? 128 : T == RI_MXFP4 ? 12 : T == RI_Q5_0 ? 16 : 8; }

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

/* acc + in each dword the sum of the 2 products of its int16 words, a x b
 * (vpdpwssd where 256-bit VNNI is built in, else vpmaddwd and vpaddd: the
 * same sum) */
RI_INLINE __m256i x86_dpwssd(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(acc, a, b);
#elif defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

/* token t's 4 activations at p as one dword (to broadcast) */
RI_INLINE int32_t ri_x4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* one block of 8 rows: levels, seeds, scales (see the top) */
typedef struct { __m256i q[8]; __m256i c; __m256 d; } ri8;

/* the 8 rows' dwords at base + o[r] (o: rows 0-3 and 4-7 as 64-bit offsets) */
RI_INLINE __m256i ri8_gather(const uint8_t *base, __m256i olo, __m256i ohi) {
    return _mm256_set_m128i(_mm256_i64gather_epi32((const int *)base, ohi, 1),
                            _mm256_i64gather_epi32((const int *)base, olo, 1));
}

/* The seeds: -128 * the sum of the 8 registers' bytes per dword (int32)
 * where 256-bit VNNI is built in, else per int16 lane (its two bytes of
 * each register, mod 2^16: kernels/x86/avx2_gemm.c sums in int16 with
 * wrapping adds, exact because the true sums fit). MXFP4, Q5_0, Q4_0 from
 * the bytes summed first (|level| <= 16: the sum of 8 fits int8), Q8_0
 * from int16 pair sums (vpmaddubsw of ones: |.| <= 256 per register,
 * <= 2048 over 8). */
RI_INLINE __m256i ri8_seed(const int T, const __m256i *q) {
    const __m256i ones = _mm256_set1_epi8(1);
    __m256i s;
    if (T == RI_Q8_0) {
        s = _mm256_maddubs_epi16(ones, q[0]);
        for (int j = 1; j < 8; j++) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(ones, q[j]));
    } else {
        s = _mm256_add_epi8(_mm256_add_epi8(_mm256_add_epi8(q[0], q[1]), _mm256_add_epi8(q[2], q[3])),
                            _mm256_add_epi8(_mm256_add_epi8(q[4], q[5]), _mm256_add_epi8(q[6], q[7])));
        s = _mm256_maddubs_epi16(ones, s);
    }
#ifdef X86_VNNI256
    return _mm256_madd_epi16(s, _mm256_set1_epi16(-128));
#else
    return _mm256_slli_epi16(_mm256_sub_epi16(_mm256_setzero_si256(), s), 7);
#endif
}

/* Blocks 0 .. nbk - 1 of 8 rows at w (rows rb bytes apart; rows >= nr read
 * row 0 and get a zero scale) into W. MXFP4, Q5_0, Q4_0: each row's 16
 * bytes of packed quants, rows r | r + 4 in one register, a 4 x 4 dword
 * transpose within 128-bit halves (dword lane = row), then the nibbles
 * split (low nibbles of dword j: elements 4j .. 4j + 3, high: 16 + 4j ..)
 * and made signed levels; the scales and Q5_0's high bits gathered. Q8_0:
 * the rows' 32 levels, an 8 x 8 dword transpose. */
RI_INLINE void ri8_decode(const int T, const uint8_t *w, size_t rb, int nr, int nbk, ri8 *W) {
    const size_t bs = ri_bsize(T), qo = T == RI_Q8_0 ? 2 : T == RI_MXFP4 ? 1 : T == RI_Q5_0 ? 6 : 2;
    const uint8_t *p[8];
    long long o[8];
    for (int r = 0; r < 8; r++) {
        o[r] = (long long)(r < nr ? r : 0) * (long long)rb;
        p[r] = w + o[r] + qo;
    }
    const __m256i olo = _mm256_loadu_si256((const __m256i *)o), ohi = _mm256_loadu_si256((const __m256i *)(o + 4));
    const __m256 live = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int b = 0; b < nbk; b++) {
        const size_t bo = (size_t)b * bs;
        ri8 *ob = &W[b];
        __m256i q[8];
        if (T == RI_Q8_0) {
            __m256i v[8];
            for (int r = 0; r < 8; r++) v[r] = _mm256_loadu_si256((const __m256i *)(p[r] + bo));
            /* 32-bit then 64-bit unpacks within halves leave rows 0-3 (v[0..3])
               and 4-7 (v[4..7]) with dwords j | j + 4 of their rows in v[0]
               (j = 0), v[2] (1), v[1] (2), v[3] (3); the 128-bit halves are
               then paired across the two row groups */
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
        } else {
            __m256i z[4];
            for (int k = 0; k < 4; k++)
                z[k] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(p[k + 4] + bo)),
                                        _mm_loadu_si128((const __m128i *)(p[k] + bo)));
            const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
            const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
            const __m256i Q[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                                  _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
            for (int j = 0; j < 4; j++) {
                q[j] = _mm256_and_si256(Q[j], m4);
                q[j + 4] = _mm256_and_si256(_mm256_srli_epi16(Q[j], 4), m4);
            }
            if (T == RI_MXFP4) {
                const __m256i tab = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pk_mxfp4_values));
                for (int j = 0; j < 8; j++) q[j] = _mm256_shuffle_epi8(tab, q[j]);
            }
            if (T == RI_Q5_0) {   /* element e's fifth bit: bit e % 8 of qh byte e / 8; level = nibble - 16 where it is 0 */
                const __m256i H = ri8_gather(w + bo + 2, olo, ohi), m16 = _mm256_set1_epi8(-16);
                const __m256i lane = _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12,
                                                      0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
                for (int j = 0; j < 8; j++) {   /* elements e0 .. e0 + 3 */
                    const int e0 = j < 4 ? 4 * j : 16 + 4 * (j - 4);
                    const __m256i idx = _mm256_add_epi8(_mm256_set1_epi8((char)(e0 / 8)), lane);
                    const __m256i bm = _mm256_set1_epi32(e0 % 8 ? (int)0x80402010 : 0x08040201);
                    const __m256i hb = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(H, idx), bm), bm);
                    q[j] = _mm256_add_epi8(q[j], _mm256_andnot_si256(hb, m16));
                }
            }
            if (T == RI_Q4_0) {
                const __m256i off = _mm256_set1_epi8((char)ri_off(T));
                for (int j = 0; j < 8; j++) q[j] = _mm256_sub_epi8(q[j], off);
            }
        }
        const __m256i g = ri8_gather(w + bo, olo, ohi);   /* each row's first 4 bytes */
        __m256 d;
        if (T == RI_MXFP4) {   /* PK_E8M0_HALF_BITS of the E8M0 byte */
            const __m256i e = _mm256_and_si256(g, _mm256_set1_epi32(0xFF));
            const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
            const __m256i big = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
            d = _mm256_castsi256_ps(_mm256_blendv_epi8(big, _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e), small));
        } else {   /* the fp16 d: low halves of the dwords, in order */
            __m256i h = _mm256_packus_epi32(_mm256_and_si256(g, _mm256_set1_epi32(0xFFFF)), _mm256_setzero_si256());
            h = _mm256_permute4x64_epi64(h, 0x08);
            d = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
        }
        ob->d = _mm256_and_ps(d, live);
        ob->c = ri8_seed(T, q);
        for (int j = 0; j < 8; j++) _mm256_store_si256(&ob->q[j], q[j]);
    }
}

#endif
