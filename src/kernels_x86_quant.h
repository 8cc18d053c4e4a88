/* kernels_x86_quant.h - 256-bit integer kernels for the block-quantized
 * weight types (Q4_0, IQ4_NL x Q8_0; Q2_K..Q6_K, IQ4_XS x Q8_K) and the Q8_K
 * and Q8_1 activation quantizers. Not a translation unit: it is included by
 * kernels_avx2.c and kernels_avx512.c inside their ISA guards (after
 * <immintrin.h> and their hsum8), so each ISA table gets its own copy
 * compiled with that file's flags (the AVX-512 copy gets EVEX encodings and
 * AVX-512 registers; the algorithm is the same).
 *
 * Tuned for: single-token decode (bandwidth-bound). Each kernel works on one
 * block/super-block and folds it into a float accumulator; the gemvs run 4
 * rows side by side over the same activation block (4 weight streams in
 * flight, one activation read from L1 per block), the vec_dots 2 blocks.
 *
 * Numerics: within a (super-)block every product and sum is exact int32:
 * unsigned levels (<= 63) x int8 activations by vpmaddubsw (pair sums below
 * 2^15), then vpmaddwd with the int16 sub-block scales. Signed levels (Q4_0,
 * IQ4) move their sign onto the activation, which needs activations in
 * [-127, 127] - what every Q8_0 / Q8_K quantizer produces. Q3_K and Q6_K
 * levels are made signed the same way (rather than correcting their +4 / +32
 * offsets with bsums afterwards: that would put large cancelling terms into
 * the lanes and lose float accuracy); K-quant mins use Q8_K's bsums. Only
 * the float accumulation across blocks differs from the reference (order,
 * FMA, per-lane conversion).
 * The activation quantizers are bit-exact with the reference for finite input.
 */

#define QX_INLINE static inline __attribute__((always_inline))

/* ---- building blocks ---------------------------------------------------- */

/* int16 pair sums of u[i] * s[i]; u unsigned <= 127 */
QX_INLINE __m256i qx_mul_us(__m256i u, __m256i s) { return _mm256_maddubs_epi16(u, s); }
/* int16 pair sums of w[i] * s[i]; both signed, s != -128 */
QX_INLINE __m256i qx_mul_ss(__m256i w, __m256i s) {
    return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(s, w));
}
/* 8 int32: pairs of int16 summed, times int16 scales (one per int16 lane) */
QX_INLINE __m256i qx_scale(__m256i p16, __m256i sc16) { return _mm256_madd_epi16(p16, sc16); }
/* int16 scales: a for the low 16 bytes' pairs, b for the high 16 */
QX_INLINE __m256i qx_sc2(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16((short)b), _mm_set1_epi16((short)a));
}
QX_INLINE __m256i qx_ld(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
QX_INLINE __m256 qx_fma(__m256i isum, float d, __m256 acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d), acc);
}

/* ---- Q4_0 x Q8_0, IQ4_NL x Q8_0 ------------------------------------------ */

/* the 32 nibbles of a legacy block in element order */
QX_INLINE __m256i qx_nibbles32(const uint8_t *qs) {
    __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

QX_INLINE __m256 blk_q4_0(const pk_block_q4_0 *w, const pk_block_q8_0 *x, __m256 acc) {
    __m256i q = _mm256_sub_epi8(qx_nibbles32(w->qs), _mm256_set1_epi8(8));
    __m256i p = _mm256_madd_epi16(qx_mul_ss(q, qx_ld(x->qs)), _mm256_set1_epi16(1));
    return qx_fma(p, _cvtsh_ss(w->d) * _cvtsh_ss(x->d), acc);
}

QX_INLINE __m256i qx_iq4_table(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)pk_iq4nl_values));
}

QX_INLINE __m256 blk_iq4_nl(const pk_block_iq4_nl *w, const pk_block_q8_0 *x, __m256 acc) {
    __m256i q = _mm256_shuffle_epi8(qx_iq4_table(), qx_nibbles32(w->qs));
    __m256i p = _mm256_madd_epi16(qx_mul_ss(q, qx_ld(x->qs)), _mm256_set1_epi16(1));
    return qx_fma(p, _cvtsh_ss(w->d) * _cvtsh_ss(x->d), acc);
}

/* ---- K-quants x Q8_K ---------------------------------------------------------- */

QX_INLINE __m256 blk_q2_K(const pk_block_q2_K *w, const pk_block_q8_K *x, __m256 acc) {
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q = qx_ld(w->qs + 32 * h);
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;                     /* 32-element chunk */
            __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
            __m256i sc = qx_sc2(w->scales[2 * c] & 0xF, w->scales[2 * c + 1] & 0xF);
            isum = _mm256_add_epi32(isum, qx_scale(qx_mul_us(u, qx_ld(x->qs + 32 * c)), sc));
        }
    }
    __m128i s8 = _mm_loadu_si128((const __m128i *)w->scales);
    __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(s8, 4), _mm_set1_epi8(0x0F)));
    __m256i msum = _mm256_madd_epi16(mins, qx_ld(x->bsums));
    acc = qx_fma(isum, x->d * _cvtsh_ss(w->d), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(x->d * _cvtsh_ss(w->dmin)), acc);
}

/* pk_q3_K_scales by 32-bit words: bytes 0-3 / 4-7 hold the low nibbles of
 * scales 0-3, 4-7 (low halves) and 8-11, 12-15 (high halves); bits 2k..2k+1
 * of bytes 8-11 are the top bits of scales 4k..4k+3. */
QX_INLINE void qx_q3_scales(const uint8_t *s, int8_t out[16]) {
    uint32_t a0, a1, a2, w[4];
    memcpy(&a0, s, 4); memcpy(&a1, s + 4, 4); memcpy(&a2, s + 8, 4);
    w[0] = (a0 & 0x0f0f0f0fu) | (a2 & 0x03030303u) << 4;
    w[1] = (a1 & 0x0f0f0f0fu) | ((a2 >> 2) & 0x03030303u) << 4;
    w[2] = ((a0 >> 4) & 0x0f0f0f0fu) | ((a2 >> 4) & 0x03030303u) << 4;
    w[3] = ((a1 >> 4) & 0x0f0f0f0fu) | ((a2 >> 6) & 0x03030303u) << 4;
    __m128i v = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)w), _mm_set1_epi8(32));
    _mm_storeu_si128((__m128i *)out, v);
}

QX_INLINE __m256 blk_q3_K(const pk_block_q3_K *w, const pk_block_q8_K *x, __m256 acc) {
    const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), four = _mm256_set1_epi8(4);
    int8_t sc[16];
    qx_q3_scales(w->scales, sc);
    __m256i hm = qx_ld(w->hmask);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q = qx_ld(w->qs + 32 * h);
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;
            __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, c), one);
            __m256i u = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3),
                                        _mm256_slli_epi16(hb, 2));        /* level + 4 */
            __m256i lv = _mm256_sub_epi8(u, four);                          /* signed level */
            isum = _mm256_add_epi32(isum, qx_scale(qx_mul_ss(lv, qx_ld(x->qs + 32 * c)),
                                                   qx_sc2(sc[2 * c], sc[2 * c + 1])));
        }
    }
    return qx_fma(isum, x->d * _cvtsh_ss(w->d), acc);
}


/* sum over sub-blocks j of m[j] * (bsums[2j] + bsums[2j + 1]), in 8 lanes */
QX_INLINE __m256i qx_k4_mins(const uint8_t m[8], const pk_block_q8_K *x) {
    uint64_t mm;
    memcpy(&mm, m, 8);
    __m128i m8 = _mm_cvtsi64_si128((long long)mm);
    __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    return _mm256_madd_epi16(m16, qx_ld(x->bsums));
}

QX_INLINE __m256 blk_q4_K(const pk_block_q4_K *w, const pk_block_q8_K *x, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    uint8_t sc[8], m[8];
    pk_get_scales_mins_k4(w->scales, sc, m);
    __m256i isum = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i q = qx_ld(w->qs + 32 * j);
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        __m256i p0 = qx_scale(qx_mul_us(lo, qx_ld(x->qs + 64 * j)), _mm256_set1_epi16(sc[2 * j]));
        __m256i p1 = qx_scale(qx_mul_us(hi, qx_ld(x->qs + 64 * j + 32)), _mm256_set1_epi16(sc[2 * j + 1]));
        isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
    }
    acc = qx_fma(isum, x->d * _cvtsh_ss(w->d), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(qx_k4_mins(m, x)),
                            _mm256_set1_ps(x->d * _cvtsh_ss(w->dmin)), acc);
}

QX_INLINE __m256 blk_q5_K(const pk_block_q5_K *w, const pk_block_q8_K *x, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
    uint8_t sc[8], m[8];
    pk_get_scales_mins_k4(w->scales, sc, m);
    __m256i qh = qx_ld(w->qh);
    __m256i isum = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i q = qx_ld(w->qs + 32 * j);
        __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j), one);
        __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * j + 1), one);
        __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_slli_epi16(h0, 4));
        __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                     _mm256_slli_epi16(h1, 4));
        __m256i p0 = qx_scale(qx_mul_us(lo, qx_ld(x->qs + 64 * j)), _mm256_set1_epi16(sc[2 * j]));
        __m256i p1 = qx_scale(qx_mul_us(hi, qx_ld(x->qs + 64 * j + 32)), _mm256_set1_epi16(sc[2 * j + 1]));
        isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
    }
    acc = qx_fma(isum, x->d * _cvtsh_ss(w->d), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(qx_k4_mins(m, x)),
                            _mm256_set1_ps(x->d * _cvtsh_ss(w->dmin)), acc);
}

QX_INLINE __m256 blk_q6_K(const pk_block_q6_K *w, const pk_block_q8_K *x, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), m32 = _mm256_set1_epi8(32);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i l0 = qx_ld(w->ql + 64 * h), l1 = qx_ld(w->ql + 64 * h + 32);
        __m256i qh = qx_ld(w->qh + 32 * h);
        __m256i u[4];
        u[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
        u[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
        u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
        u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
        for (int k = 0; k < 4; k++) {
            int c = 4 * h + k;
            __m256i lv = _mm256_sub_epi8(u[k], m32);                        /* signed level */
            isum = _mm256_add_epi32(isum, qx_scale(qx_mul_ss(lv, qx_ld(x->qs + 32 * c)),
                                                   qx_sc2(w->scales[2 * c], w->scales[2 * c + 1])));
        }
    }
    return qx_fma(isum, x->d * _cvtsh_ss(w->d), acc);
}

QX_INLINE __m256 blk_iq4_xs(const pk_block_iq4_xs *w, const pk_block_q8_K *x, __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), tab = qx_iq4_table();
    __m256i isum = _mm256_setzero_si256();
    for (int p = 0; p < 4; p++) {                   /* sub-blocks 2p, 2p + 1 */
        __m256i q = qx_ld(w->qs + 32 * p);
        __m256i lo = _mm256_shuffle_epi8(tab, _mm256_and_si256(q, m4));
        __m256i hi = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        __m256i v0 = _mm256_permute2x128_si256(lo, hi, 0x20);   /* sub-block 2p in order */
        __m256i v1 = _mm256_permute2x128_si256(lo, hi, 0x31);   /* sub-block 2p + 1 */
        int s0 = 2 * p, s1 = 2 * p + 1;
        int ls0 = ((w->scales_l[p] & 0xF) | ((w->scales_h >> (2 * s0)) & 3) << 4) - 32;
        int ls1 = ((w->scales_l[p] >> 4) | ((w->scales_h >> (2 * s1)) & 3) << 4) - 32;
        __m256i p0 = qx_scale(qx_mul_ss(v0, qx_ld(x->qs + 64 * p)), _mm256_set1_epi16((short)ls0));
        __m256i p1 = qx_scale(qx_mul_ss(v1, qx_ld(x->qs + 64 * p + 32)), _mm256_set1_epi16((short)ls1));
        isum = _mm256_add_epi32(isum, _mm256_add_epi32(p0, p1));
    }
    return qx_fma(isum, x->d * _cvtsh_ss(w->d), acc);
}

/* ---- vec_dot and 4-row gemv from a block kernel ------------------------------ */

#define QX_KERNELS(t, WT, XT, QK)                                                  \
static void vec_dot_##t(int64_t n, float *s, const void *vw, const void *vx) {     \
    const WT *w = vw;                                                              \
    const XT *x = vx;                                                              \
    int64_t nb = n / (QK), i = 0;                                                  \
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;                                      \
    for (; i + 2 <= nb; i += 2) {                                                  \
        a0 = blk_##t(&w[i], &x[i], a0);                                            \
        a1 = blk_##t(&w[i + 1], &x[i + 1], a1);                                    \
    }                                                                              \
    if (i < nb) a0 = blk_##t(&w[i], &x[i], a0);                                    \
    *s = hsum8(_mm256_add_ps(a0, a1));                                             \
}                                                                                  \
static void gemv_##t(int64_t n, int64_t nrows, float *y, const void *vw,           \
                     size_t rb, const void *vx) {                                  \
    const XT *x = vx;                                                              \
    int64_t nb = n / (QK), r = 0;                                                  \
    for (; r + 4 <= nrows; r += 4) {                                               \
        const WT *w0 = (const WT *)((const char *)vw + (size_t)r * rb);            \
        const WT *w1 = (const WT *)((const char *)w0 + rb);                        \
        const WT *w2 = (const WT *)((const char *)w1 + rb);                        \
        const WT *w3 = (const WT *)((const char *)w2 + rb);                        \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                \
        for (int64_t i = 0; i < nb; i++) {                                         \
            a0 = blk_##t(&w0[i], &x[i], a0);                                       \
            a1 = blk_##t(&w1[i], &x[i], a1);                                       \
            a2 = blk_##t(&w2[i], &x[i], a2);                                       \
            a3 = blk_##t(&w3[i], &x[i], a3);                                       \
        }                                                                          \
        y[r] = hsum8(a0); y[r + 1] = hsum8(a1); y[r + 2] = hsum8(a2); y[r + 3] = hsum8(a3); \
    }                                                                              \
    for (; r < nrows; r++)                                                         \
        vec_dot_##t(n, &y[r], (const char *)vw + (size_t)r * rb, vx);              \
}

QX_KERNELS(q4_0, pk_block_q4_0, pk_block_q8_0, PK_QK4_0)
QX_KERNELS(iq4_nl, pk_block_iq4_nl, pk_block_q8_0, PK_QK4_NL)
QX_KERNELS(q2_K, pk_block_q2_K, pk_block_q8_K, PK_QK_K)
QX_KERNELS(q3_K, pk_block_q3_K, pk_block_q8_K, PK_QK_K)
QX_KERNELS(q4_K, pk_block_q4_K, pk_block_q8_K, PK_QK_K)
QX_KERNELS(q5_K, pk_block_q5_K, pk_block_q8_K, PK_QK_K)
QX_KERNELS(q6_K, pk_block_q6_K, pk_block_q8_K, PK_QK_K)
QX_KERNELS(iq4_xs, pk_block_iq4_xs, pk_block_q8_K, PK_QK_K)

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

/* roundf() of 8 floats: ties away from zero (as kernels_avx2.c) */
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
#define QX_VEC_DOT_ENTRIES                                                        \
    [PK_TYPE_Q4_0] = vec_dot_q4_0, [PK_TYPE_IQ4_NL] = vec_dot_iq4_nl,             \
    [PK_TYPE_Q2_K] = vec_dot_q2_K, [PK_TYPE_Q3_K] = vec_dot_q3_K,                 \
    [PK_TYPE_Q4_K] = vec_dot_q4_K, [PK_TYPE_Q5_K] = vec_dot_q5_K,                 \
    [PK_TYPE_Q6_K] = vec_dot_q6_K, [PK_TYPE_IQ4_XS] = vec_dot_iq4_xs,
#define QX_GEMV_ENTRIES                                                           \
    [PK_TYPE_Q4_0] = gemv_q4_0, [PK_TYPE_IQ4_NL] = gemv_iq4_nl,                   \
    [PK_TYPE_Q2_K] = gemv_q2_K, [PK_TYPE_Q3_K] = gemv_q3_K,                       \
    [PK_TYPE_Q4_K] = gemv_q4_K, [PK_TYPE_Q5_K] = gemv_q5_K,                       \
    [PK_TYPE_Q6_K] = gemv_q6_K, [PK_TYPE_IQ4_XS] = gemv_iq4_xs,
#define QX_QUANTIZE_ENTRIES [PK_TYPE_Q8_K] = quantize_q8_K, [PK_TYPE_Q8_1] = quantize_q8_1,
