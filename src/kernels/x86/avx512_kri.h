/* kernels/x86/avx512_kri.h - the AVX-512 multi-token kernels of the K-quants
 * (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against Q8_K activations: 16 weight rows at a time,
 * decoded row-interleaved. Not a translation unit: included by
 * kernels/x86/avx512_gemm.c inside its ISA guard, after its TT (tokens per
 * register tile, 8).
 *
 * Layout (kr_blk, one super-block of 16 rows, decoded on the fly into a
 * stack buffer once per (k-block, tile of up to KR_TS tokens); no second
 * copy of the weights): q[i], i < 64, holds in dword lane r row r's
 * unsigned levels of the elements 4i .. 4i + 3 (Q4_K, Q6_K: their packed
 * bytes transposed 16 x 16 dwords, then unpacked; Q2_K, Q3_K, Q5_K: the
 * levels of kernels/x86/avx512_levels.h transposed per chunk of 64); a
 * token's 4 activations at 4i, broadcast to every lane, times q[i] by
 * vpdpbusd (u8 x s8) give the 16 rows' partial sums side by side: the
 * accumulator lanes are rows, no horizontal sums.
 *
 * Numerics, per super-block, row and token: each sub-block's level x
 * activation sum a[s] is exact int32 (vpdpbusd chain); the second term
 * imin = sum over s of m[s] * (the sub-block's activation sum) is exact
 * int32 too, from the Q8_K bsums by vpdpwssd on (m[2k], m[2k + 1]) int16
 * pairs (m: the mins of Q2_K / Q4_K / Q5_K; 32 * sc for Q6_K's level
 * offset and 4 * sc for Q3_K's, with dmin = d). Q4_K, Q5_K: isum = sum of
 * sc[s] * a[s] in int32 (Q4_K: a[s] as two int16-sized halves of 16
 * elements, times sc[s] by vpdpwssd; Q5_K, whose halves do not fit int16:
 * by vpmulld), one convert: y += dx * (d * isum - dmin * imin) - its mins
 * cancel most of the sum, so the sum stays exact (per-sub-block float sums
 * doubled the batch-vs-gemv logit difference of tests/cli/t_batch.sh's Q4_K_M
 * model). Q2_K, Q3_K, Q6_K: y += dx * (sum of (d * sc[s]) * a[s] in float
 * - dmin * imin). Bounds: Q4_K |isum| <= 8 * 63 * 32 * 15 * 128, Q5_K
 * 8 * 63 * 32 * 31 * 128; Q6_K |a| <= 16 * 63 * 128; the pairs' products
 * fit int16 (32 * 128, 4 * 32, 63, 15) times |bsum| <= 32 * 128.
 */
#ifndef PK_KERNELS_AVX512_KRI_H
#define PK_KERNELS_AVX512_KRI_H

#define KR_INLINE static inline __attribute__((always_inline))

enum { KR_Q2_K, KR_Q3_K, KR_Q4_K, KR_Q5_K, KR_Q6_K };
enum {
    KR_TS = 32,   /* tokens per prepared tile */
    KR_KB = 2,    /* super-blocks per k-block (512 elements) */
};

typedef struct {
    __m512i q[64];    /* levels, row-interleaved by dwords */
    __m512 sc[16];    /* lane r = d * row r's scale of sub-block s (Q4_K, Q5_K: the int32 scale) */
    __m512i mp[8];    /* int16 pairs: lane r = (m[2k], m[2k + 1]) of row r */
    __m512 d, dmin;   /* Q3_K, Q6_K: dmin = d */
} kr_blk;

/* per token and super-block: the pairs of sub-block activation sums
 * (int16 each, as mp) and the scale */
typedef struct { int32_t bp[8]; float d; } kr_act;

KR_INLINE int kr_ns(const int T) { return T == KR_Q4_K || T == KR_Q5_K ? 8 : 16; }   /* sub-blocks */
/* the types whose sub-block scales multiply in int32 (kr_blk.sc) */
KR_INLINE int kr_int(const int T) { return T == KR_Q4_K || T == KR_Q5_K; }
KR_INLINE size_t kr_bsize(const int T) {
    return T == KR_Q2_K   ? sizeof(pk_block_q2_K)
           : T == KR_Q3_K ? sizeof(pk_block_q3_K)
           : T == KR_Q4_K ? sizeof(pk_block_q4_K)
           : T == KR_Q5_K ? sizeof(pk_block_q5_K)
                          : sizeof(pk_block_q6_K);
}

KR_INLINE __m512i kr_levels(const int T, const void *blk, int z) {
    return T == KR_Q2_K   ? lv_q2_K(blk, z)
           : T == KR_Q3_K ? lv_q3_K(blk, z)
           : T == KR_Q4_K ? lv_q4_K(blk, z)
           : T == KR_Q5_K ? lv_q5_K(blk, z)
                          : lv_q6_K(blk, z);
}

/* 16 x 16 dwords: o[c] lane r = v[r] lane c */
KR_INLINE void kr_transpose16(__m512i *v, __m512i *o) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {     /* u[i + m] lane L: column 4L + m of rows i .. i + 3 */
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int m = 0; m < 4; m++) {
        __m512i a0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x44), a1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xEE);
        __m512i b0 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x44);
        __m512i b1 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xEE);
        o[m] = _mm512_shuffle_i32x4(a0, b0, 0x88);
        o[4 + m] = _mm512_shuffle_i32x4(a0, b0, 0xDD);
        o[8 + m] = _mm512_shuffle_i32x4(a1, b1, 0x88);
        o[12 + m] = _mm512_shuffle_i32x4(a1, b1, 0xDD);
    }
}

/* Row blk's scales as int32 lanes: a[s] the scale of sub-block s (Q4_K,
 * Q5_K: a[8 + s] its min), bm[s] the min of sub-block s (Q2_K). */
KR_INLINE void kr_scales(const int T, const void *blk, __m512i *a, __m512i *bm) {
    if (T == KR_Q4_K || T == KR_Q5_K) {
        uint8_t sm[16];
        pk_get_scales_mins_k4(T == KR_Q4_K ? ((const pk_block_q4_K *)blk)->scales
                                           : ((const pk_block_q5_K *)blk)->scales, sm, sm + 8);
        *a = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)sm));
    } else if (T == KR_Q3_K) {
        *a = _mm512_cvtepi16_epi32(lv_q3_scales(((const pk_block_q3_K *)blk)->scales));
    } else if (T == KR_Q2_K) {
        __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)((const pk_block_q2_K *)blk)->scales));
        *a = _mm512_and_si512(v, _mm512_set1_epi32(15));
        *bm = _mm512_srli_epi32(v, 4);
    } else {
        *a = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)((const pk_block_q6_K *)blk)->scales));
    }
}

/* Super-block b of the 16 rows rows[r] (NULL: a row past the end, zero
 * levels and scales) into W. */
KR_INLINE void kr_decode(const int T, const uint8_t *const *rows, int64_t b, kr_blk *W) {
    static const uint8_t zero[256] __attribute__((aligned(64)));
    const void *blk[16];
    uint16_t d[16], dmin[16];
    __m512i va[16], vb[16], sa[16], sb[16];
    for (int r = 0; r < 16; r++) {
        blk[r] = rows[r] ? (const void *)(rows[r] + (size_t)b * kr_bsize(T)) : (const void *)zero;
        kr_scales(T, blk[r], &va[r], &vb[r]);
        if (T == KR_Q6_K) {
            d[r] = dmin[r] = ((const pk_block_q6_K *)blk[r])->d;
        } else if (T == KR_Q3_K) {
            d[r] = dmin[r] = ((const pk_block_q3_K *)blk[r])->d;
        } else if (T == KR_Q5_K) {
            d[r] = ((const pk_block_q5_K *)blk[r])->d;
            dmin[r] = ((const pk_block_q5_K *)blk[r])->dmin;
        } else if (T == KR_Q4_K) {
            d[r] = ((const pk_block_q4_K *)blk[r])->d;
            dmin[r] = ((const pk_block_q4_K *)blk[r])->dmin;
        } else {
            d[r] = ((const pk_block_q2_K *)blk[r])->d;
            dmin[r] = ((const pk_block_q2_K *)blk[r])->dmin;
        }
    }
    if (T == KR_Q4_K) {  /* the packed bytes transposed, then split: half the transposes */
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        for (int h = 0; h < 2; h++) {
            __m512i v[16], o[16];
            for (int r = 0; r < 16; r++) v[r] = _mm512_loadu_si512(((const pk_block_q4_K *)blk[r])->qs + 64 * h);
            kr_transpose16(v, o);
            for (int c = 0; c < 16; c++) {   /* 32 bytes j: sub-blocks 2j (low nibbles), 2j + 1 (high) */
                int j = 2 * h + (c >> 3);
                W->q[16 * j + (c & 7)] = _mm512_and_si512(o[c], m4);
                W->q[16 * j + 8 + (c & 7)] = _mm512_and_si512(_mm512_srli_epi16(o[c], 4), m4);
            }
        }
    } else if (T == KR_Q6_K) {   /* ql and qh transposed as bytes, then combined */
        const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
        __m512i v[16], qh[16];
        for (int r = 0; r < 16; r++) v[r] = _mm512_loadu_si512(((const pk_block_q6_K *)blk[r])->qh);
        kr_transpose16(v, qh);
        for (int h = 0; h < 2; h++) {
            __m512i ql[16];
            for (int r = 0; r < 16; r++) v[r] = _mm512_loadu_si512(((const pk_block_q6_K *)blk[r])->ql + 64 * h);
            kr_transpose16(v, ql);
            for (int c = 0; c < 8; c++) {  /* elements 128h + 32k + 4c: ql bytes 4c (k even) or 32 + 4c, nibble k / 2 */
                __m512i hb = qh[8 * h + c];
                __m512i l0 = _mm512_and_si512(ql[c], m4), l1 = _mm512_and_si512(ql[8 + c], m4);
                __m512i l2 = _mm512_and_si512(_mm512_srli_epi16(ql[c], 4), m4);
                __m512i l3 = _mm512_and_si512(_mm512_srli_epi16(ql[8 + c], 4), m4);
                __m512i *o = W->q + 32 * h + c;
                o[0] = _mm512_ternarylogic_epi32(l0, _mm512_slli_epi16(hb, 4), m30, 0xF8);
                o[8] = _mm512_ternarylogic_epi32(l1, _mm512_slli_epi16(hb, 2), m30, 0xF8);
                o[16] = _mm512_ternarylogic_epi32(l2, hb, m30, 0xF8);
                o[24] = _mm512_ternarylogic_epi32(l3, _mm512_srli_epi16(hb, 2), m30, 0xF8);
            }
        }
    } else {
        for (int z = 0; z < 4; z++) {
            __m512i v[16];
            for (int r = 0; r < 16; r++) v[r] = kr_levels(T, blk[r], z);
            kr_transpose16(v, W->q + 16 * z);
        }
    }
    kr_transpose16(va, sa);
    const __m512i *m = sa + 8;
    if (T == KR_Q2_K) {
        kr_transpose16(vb, sb);
        m = sb;
    } else if (T == KR_Q6_K || T == KR_Q3_K) {   /* the level offsets 32 and 4 */
        for (int s = 0; s < 16; s++) sb[s] = _mm512_slli_epi32(sa[s], T == KR_Q6_K ? 5 : 2);
        m = sb;
    }
    const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)d));
    for (int s = 0; s < kr_ns(T); s++)
        W->sc[s] = kr_int(T) ? _mm512_castsi512_ps(sa[s]) : _mm512_mul_ps(_mm512_cvtepi32_ps(sa[s]), dv);
    W->d = dv;
    for (int k = 0; k < kr_ns(T) / 2; k++)
        W->mp[k] = _mm512_or_si512(_mm512_and_si512(m[2 * k], _mm512_set1_epi32(0xFFFF)),
                                   _mm512_slli_epi32(m[2 * k + 1], 16));
    W->dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dmin));
}

/* Per token t < nt and super-block b < kb: X[t * KR_KB + b]. */
KR_INLINE void kr_prep(const int T, int nt, const pk_block_q8_K *const *xs, int kb, kr_act *X) {
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < kb; b++) {
            const pk_block_q8_K *x = &xs[t][b];
            kr_act *o = &X[t * KR_KB + b];
            for (int k = 0; k < kr_ns(T) / 2; k++) {
                int lo = x->bsums[2 * k], hi = x->bsums[2 * k + 1];
                if (kr_ns(T) == 8) {
                    lo = x->bsums[4 * k] + x->bsums[4 * k + 1];
                    hi = x->bsums[4 * k + 2] + x->bsums[4 * k + 3];
                }
                o->bp[k] = (int32_t)(((uint32_t)hi << 16) | ((uint32_t)lo & 0xFFFFu));
            }
            o->d = x->d;
        }
}

KR_INLINE __m512i kr_bc(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* 16 rows (W, kb super-blocks) times NT tokens; y[t * ys + r] for r < nr. */
KR_INLINE void kr_tile(const int T, const int NT, const kr_blk *W, int kb, const pk_block_q8_K *const *xs,
                       const kr_act *X, float *y, int64_t ys, int nr, int first) {
    const int ns = kr_ns(T), dw = 64 / ns;
    __m512 acc[TT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < kb; b++) {
        const kr_blk *wb = &W[b];
        __m512 f[TT];
        __m512i is[TT];
        for (int t = 0; t < NT; t++) { f[t] = _mm512_setzero_ps(); is[t] = _mm512_setzero_si512(); }
        for (int s = 0; s < ns; s++) {
            __m512i q[8];
            for (int j = 0; j < dw; j++) q[j] = wb->q[s * dw + j];
            for (int t = 0; t < NT; t++) {
                const int8_t *xq = xs[t][b].qs + 4 * s * dw;
                if (T == KR_Q5_K) {   /* one chain of 32, times the scale in int32 */
                    __m512i a = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], kr_bc(xq));
                    for (int j = 1; j < 8; j++) a = _mm512_dpbusd_epi32(a, q[j], kr_bc(xq + 4 * j));
                    is[t] = _mm512_add_epi32(is[t], _mm512_mullo_epi32(a, _mm512_castps_si512(wb->sc[s])));
                } else if (kr_int(T)) {   /* two chains of 16 elements: |a| <= 16 * 15 * 128 fits int16 */
                    __m512i a0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], kr_bc(xq));
                    __m512i a1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[4], kr_bc(xq + 16));
                    for (int j = 1; j < 4; j++) {
                        a0 = _mm512_dpbusd_epi32(a0, q[j], kr_bc(xq + 4 * j));
                        a1 = _mm512_dpbusd_epi32(a1, q[4 + j], kr_bc(xq + 16 + 4 * j));
                    }
                    /* the scale in each dword's low word, 0 against a's sign word */
                    is[t] = _mm512_dpwssd_epi32(is[t], a0, _mm512_castps_si512(wb->sc[s]));
                    is[t] = _mm512_dpwssd_epi32(is[t], a1, _mm512_castps_si512(wb->sc[s]));
                } else {
                    __m512i a = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q[0], kr_bc(xq));
                    for (int j = 1; j < dw; j++) a = _mm512_dpbusd_epi32(a, q[j], kr_bc(xq + 4 * j));
                    f[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a), wb->sc[s], f[t]);
                }
            }
        }
        for (int t = 0; t < NT; t++) {
            const kr_act *xa = &X[t * KR_KB + b];
            __m512i im = _mm512_setzero_si512();
            for (int k = 0; k < ns / 2; k++) im = _mm512_dpwssd_epi32(im, wb->mp[k], _mm512_set1_epi32(xa->bp[k]));
            if (kr_int(T)) f[t] = _mm512_mul_ps(_mm512_cvtepi32_ps(is[t]), wb->d);
            f[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(im), wb->dmin, f[t]);
            acc[t] = _mm512_fmadd_ps(f[t], _mm512_set1_ps(xa->d), acc[t]);
        }
    }
    const __mmask16 mk = (__mmask16)((1u << nr) - 1);
    for (int t = 0; t < NT; t++) {
        float *yt = y + t * ys;
        _mm512_mask_storeu_ps(yt, mk, first ? acc[t] : _mm512_add_ps(acc[t], _mm512_maskz_loadu_ps(mk, yt)));
    }
}

KR_INLINE void kr_gemm(const int T, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                       size_t rb, const void *const *x) {
    kr_blk W[KR_KB];
    kr_act X[KR_TS * KR_KB];
    const int64_t nb = n / PK_QK_K;
    for (int64_t k0 = 0; k0 < nb; k0 += KR_KB) {
        int kb = nb - k0 < KR_KB ? (int)(nb - k0) : KR_KB;
        for (int64_t t0 = 0; t0 < ntok; t0 += KR_TS) {
            int nts = ntok - t0 < KR_TS ? (int)(ntok - t0) : KR_TS;
            const pk_block_q8_K *xs[KR_TS];
            for (int t = 0; t < nts; t++) xs[t] = (const pk_block_q8_K *)x[t0 + t] + k0;
            kr_prep(T, nts, xs, kb, X);
            for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
                int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
                const uint8_t *rows[16];
                for (int r = 0; r < 16; r++)
                    rows[r] = r < nr ? (const uint8_t *)w + (size_t)(r0 + r) * rb + (size_t)k0 * kr_bsize(T) : NULL;
                /* the next 16 rows' blocks of this k-block, ahead of their decode (16 short
                   streams per group: the hardware prefetcher ramps up too late) */
                if (r0 + 32 <= nrows)
                    for (int r = 0; r < 16; r++)
                        for (size_t o = 0; o < (size_t)kb * kr_bsize(T); o += 64)
                            _mm_prefetch((const char *)rows[r] + 16 * rb + o, _MM_HINT_T0);
                for (int b = 0; b < kb; b++) kr_decode(T, rows, b, &W[b]);
                float *yr = y + t0 * ys + r0;
                for (int t = 0; t < nts; t += TT) {
                    int nt = nts - t < TT ? nts - t : TT;
                    switch (nt) {   /* NT a compile-time constant of each instance */
                    case 1: kr_tile(T, 1, W, kb, xs + t, X + t * KR_KB, yr + t * ys, ys, nr, k0 == 0); break;
                    case 2: kr_tile(T, 2, W, kb, xs + t, X + t * KR_KB, yr + t * ys, ys, nr, k0 == 0); break;
                    case 3: kr_tile(T, 3, W, kb, xs + t, X + t * KR_KB, yr + t * ys, ys, nr, k0 == 0); break;
                    case 4: kr_tile(T, 4, W, kb, xs + t, X + t * KR_KB, yr + t * ys, ys, nr, k0 == 0); break;
                    case 5: kr_tile(T, 5, W, kb, xs + t, X + t * KR_KB, yr + t * ys, ys, nr, k0 == 0); break;
                    case 6: kr_tile(T, 6, W, kb, xs + t, X + t * KR_KB, yr + t * ys, ys, nr, k0 == 0); break;
                    case 7: kr_tile(T, 7, W, kb, xs + t, X + t * KR_KB, yr + t * ys, ys, nr, k0 == 0); break;
                    default: kr_tile(T, 8, W, kb, xs + t, X + t * KR_KB, yr + t * ys, ys, nr, k0 == 0); break;
                    }
                }
            }
        }
    }
}

#endif
