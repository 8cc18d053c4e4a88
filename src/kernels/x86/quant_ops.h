/* kernels/x86/quant_ops.h - the 256-bit activation quantizers (Q8_K, Q8_0, Q8_1)
 * shared by the x86 tables. Not a translation unit: it is included by
 * kernels/x86/avx2.c and kernels/x86/avx512.c inside their ISA guards (after
 * <immintrin.h>), so each table gets a copy compiled with that file's flags.
 * (The weight kernels live in kernels/x86/avx2_gemv.h / kernels/x86/avx2_gemm.c and
 * kernels_avx512*.c.)
 *
 * The quantizers are bit-exact with the reference for finite input.
 */

#define QX_INLINE static inline __attribute__((always_inline))

QX_INLINE __m256i qx_ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* ---- activation quantizers --------------------------------------------------- */

/* Q8_K: bit-exact with pk_q8_K_from_float. vcvtps2dq rounds to nearest even
 * like the reference's nearest_int (|values| <= 127 here); the packs
 * saturate at 127 like its min(127, .). */
static void quantize_q8_K(const float *xf, void *vy, int64_t n) {
    pk_block_q8_K *y = vy;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / PK_QK_K; b++) {
        const float *x = xf + b * PK_QK_K;
        __m256 m = _mm256_setzero_ps();
        for (int j = 0; j < PK_QK_K; j += 8)
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        float amax = _mm_cvtss_f32(h);
        if (!(amax > 0.0f)) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* the first element of that magnitude gives the sign */
        __m256 va = _mm256_set1_ps(amax);
        float max = 0.0f;
        for (int j = 0; j < PK_QK_K; j += 8) {
            __m256 v = _mm256_loadu_ps(x + j);
            int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), va, _CMP_EQ_OQ));
            if (mask) { max = x[j + __builtin_ctz((unsigned)mask)]; break; }
        }
        float iscale = -127.0f / max;
        __m256 vs = _mm256_set1_ps(iscale);
        for (int j = 0; j < PK_QK_K; j += 32) {
            __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j)));
            __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8)));
            __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 16)));
            __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 24)));
            __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
            q = _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(y[b].qs + j), q);
        }
        /* bsums: byte sums of each 16; bias to unsigned for vpsadbw */
        for (int j = 0; j < PK_QK_K; j += 32) {
            __m256i q = _mm256_xor_si256(qx_ld(y[b].qs + j), _mm256_set1_epi8((char)0x80));
            __m256i sad = _mm256_sad_epu8(q, _mm256_setzero_si256());   /* 4 x sum of 8 */
            int64_t s[4];
            _mm256_storeu_si256((__m256i *)s, sad);
            y[b].bsums[j / 16] = (int16_t)(s[0] + s[1] - 16 * 128);
            y[b].bsums[j / 16 + 1] = (int16_t)(s[2] + s[3] - 16 * 128);
        }
        y[b].d = 1 / iscale;
    }
}

/* roundf() of 8 floats: ties away from zero (as kernels/x86/avx2.c) */
QX_INLINE __m256i qx_round_away8(__m256 v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(sign, v));
    __m256 step = _mm256_and_ps(_mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ), one);
    return _mm256_cvtps_epi32(_mm256_add_ps(t, step));
}

/* One 32-value block as Q8_0/Q8_1 define it: d = amax / 127 (returned in
 * *d) and q = roundf(x / d) as 32 int8 in memory order, bit-exact with the
 * reference quantizers for finite input. */
QX_INLINE __m256i qx_q8_block32(const float *p, float *d) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
    __m256 v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
    __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                             _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    *d = _mm_cvtss_f32(h) / 127.0f;
    __m256 vid = _mm256_set1_ps(*d != 0.0f ? 1.0f / *d : 0.0f);
    __m256i i0 = qx_round_away8(_mm256_mul_ps(v0, vid)), i1 = qx_round_away8(_mm256_mul_ps(v1, vid));
    __m256i i2 = qx_round_away8(_mm256_mul_ps(v2, vid)), i3 = qx_round_away8(_mm256_mul_ps(v3, vid));
    __m256i q = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
    return _mm256_permutevar8x32_epi32(q, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Q8_0: bit-exact with pk_q8_0_from_float for finite input. */
static void quantize_q8_0_x(const float *x, void *vy, int64_t n) {
    pk_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / PK_QK8_0; b++) {
        float d;
        __m256i q = qx_q8_block32(x + b * PK_QK8_0, &d);
        y[b].d = pk_fp32_to_fp16(d);
        _mm256_storeu_si256((__m256i *)y[b].qs, q);
    }
}

/* Q8_1: bit-exact with pk_q8_1_from_float for finite input. */
static void quantize_q8_1(const float *x, void *vy, int64_t n) {
    pk_block_q8_1 *y = vy;
    for (int64_t b = 0; b < n / PK_QK8_1; b++) {
        float d;
        __m256i q = qx_q8_block32(x + b * PK_QK8_1, &d);
        _mm256_storeu_si256((__m256i *)y[b].qs, q);
        /* sum of the stored int8 (as the reference): sad of q + 128 */
        __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)),
                                      _mm256_setzero_si256());
        __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
        int sum = (int)(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 32 * 128;
        y[b].d = pk_fp32_to_fp16(d);
        y[b].s = pk_fp32_to_fp16((float)sum * d);
    }
}

/* table entries for the including file */
#define QX_QUANTIZE_ENTRIES [PK_TYPE_Q8_K] = quantize_q8_K, [PK_TYPE_Q8_1] = quantize_q8_1,
