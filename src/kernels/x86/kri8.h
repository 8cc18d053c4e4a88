/* kernels/x86/kri8.h - the 256-bit multi-token kernels of the K-quants
 * (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) against Q8_K activations: 8 weight rows
 * at a time, decoded row-interleaved (the 8-row, 256-bit port of
 * kernels/x86/avx512_kri.h). Not a translation unit: included by
 * kernels/x86/avx2_gemm.c inside its ISA guard, after kernels/x86/ri8.h (its
 * x86_dpbusd) and pf_next8, so each variant gets a copy compiled with its flags; the
 * avxvnni variant uses it (one VEX vpdpbusd per 8 rows x 4 elements) from
 * a token count on (k8_min_tok there: below it, the per-row kernels).
 *
 * Layout (k8_blk, one super-block of 8 rows, decoded once per (k-block,
 * tile of up to K8_TS tokens) into a stack buffer): q[i], i < 64, holds in
 * dword lane r row r's unsigned levels of the elements 4i .. 4i + 3 (the
 * packed bytes of the 8 rows transposed 8 x 8 dwords, then split; Q2_K:
 * level * scale, <= 45, by one vpmullw on bytes that cannot carry). A
 * token's 4 activations at 4i, broadcast to every lane, times q[i] by
 * vpdpbusd (u8 x s8) give the 8 rows' partial sums side by side: the
 * accumulator lanes are rows, no horizontal sums. Per sub-block and token
 * a chain of 4 (Q5_K 8) vpdpbusd from zero gives a[s], then:
 *   Q2_K  isum += a (the scale is in the levels);
 *   Q3_K, Q4_K  isum += sc[s] * a by vpdpwssd against (sc, 0) int16 pairs:
 *         a of 16 elements fits int16 (Q4_K: 16 * 15 * 127, two chains per
 *         32-element sub-block; Q3_K: 16 * 7 * 127);
 *   Q5_K  isum += sc[s] * a by vpmulld (a of 32 * 31 * 127 does not fit
 *         int16).
 * Q6_K instead takes vpmaddubsw pairs (<= 2 * 63 * 127) of its 16-element
 * sub-blocks, summed in int16 (8 products per word, wrapping) less 32 *
 * those 8 activations (prepared per token): the true sum of (q - 32) * x
 * fits int16 (8 * 32 * 127), so the words are exact; one vpdpwssd against
 * (sc, sc) adds both words times the scale to isum (fewer multiplies than
 * vpdpbusd + vpmulld; measured faster, while Q4_K is faster on vpdpbusd).
 * The second term msum = sum over s of m[s] * (the sub-block's activation
 * sum), exact int32 from the Q8_K bsums by vpdpwssd on (m[2k], m[2k + 1])
 * int16 pairs: the mins of Q2_K, Q4_K, Q5_K; 4 * sc for Q3_K's level
 * offset, subtracted from isum in int32.
 *
 * Numerics: per super-block, row and token isum and msum are the
 * reference's exact int32 sums; then y += dx * (d * isum - dmin * msum)
 * (Q3_K: dx * d * (isum - msum), Q6_K: dx * d * isum) in float,
 * accumulated over super-blocks (reassociated). Bounds: |isum| <= 16 *
 * 128 * 16 * 32 * 127 (Q6_K); the pairs' products fit int16 (4 * 32, 63,
 * 15) times |bsum| <= 32 * 127. The activations must be in [-127, 127]
 * (every Q8_K quantizer's output): Q6_K's int16 words rely on it, as do
 * the vpmaddubsw pairs (2 * 63 * 127) where x86_dpbusd is the AVX2 form.
 */
#ifndef PK_KERNELS_X86_KRI8_H
#define PK_KERNELS_X86_KRI8_H

#include <stddef.h>

#define K8_INLINE static inline __attribute__((always_inline))

enum { K8_Q2_K, K8_Q3_K, K8_Q4_K, K8_Q5_K, K8_Q6_K };
enum {
    K8_TS = 32,   /* tokens per prepared tile */
    K8_KB = 2,    /* super-blocks per k-block (512 elements) */
    K8_TT = 8,    /* tokens per register tile */
};

typedef struct {
    __m256i q[64];    /* levels, row-interleaved by dwords */
    __m256i sc[16];   /* lane r: row r's scale of sub-block s (vpdpwssd types: high word 0) */
    __m256i mp[8];    /* int16 pairs: lane r = (m[2k], m[2k + 1]) of row r */
    __m256 d, dmin;
} k8_blk;

/* per token and super-block: the pairs of sub-block activation sums
 * (int16 each, as mp) and the scale */
typedef struct { int32_t bp[8]; float d; int32_t c[16]; } k8_act;

K8_INLINE int k8_ns(const int T) { return T == K8_Q4_K || T == K8_Q5_K ? 8 : 16; }   /* sub-blocks */
K8_INLINE size_t k8_bsize(const int T) {
    return T == K8_Q2_K ? sizeof(pk_block_q2_K) : T == K8_Q3_K ? sizeof(pk_block_q3_K)
         : T == K8_Q4_K ? sizeof(pk_block_q4_K) : T == K8_Q5_K ? sizeof(pk_block_q5_K) : sizeof(pk_block_q6_K);
}


/* 8 x 8 dwords: o[j] lane r = v[r] dword j */
K8_INLINE void k8_transpose8(const __m256i *v, __m256i *o) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {   /* u[i + m] half H: dword 4H + m of rows i .. i + 3 */
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int m = 0; m < 4; m++) {
        o[m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x20);
        o[4 + m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x31);
    }
}

/* 32 bytes at offset off of each of the 8 blocks, transposed */
K8_INLINE void k8_load8(const uint8_t *const *blk, size_t off, __m256i *o) {
    __m256i v[8];
    for (int r = 0; r < 8; r++) v[r] = _mm256_loadu_si256((const __m256i *)(blk[r] + off));
    k8_transpose8(v, o);
}

/* Super-block b of the 8 rows rows[r] (NULL: a row past the end, zero
 * levels and scales) into W. */
K8_INLINE void k8_decode(const int T, const uint8_t *const *rows, int64_t b, k8_blk *W) {
    static const uint8_t zero[256] __attribute__((aligned(32)));
    const uint8_t *blk[8];
    int32_t sc[16][8] __attribute__((aligned(32))), mn[16][8] __attribute__((aligned(32)));
    uint16_t d[8], dmin[8];
    const int ns = k8_ns(T);
    for (int r = 0; r < 8; r++) {
        blk[r] = rows[r] ? rows[r] + (size_t)b * k8_bsize(T) : zero;
        if (T == K8_Q4_K || T == K8_Q5_K) {
            const pk_block_q4_K *w4 = (const pk_block_q4_K *)blk[r];   /* Q5_K: same head */
            uint8_t s8[8], m8[8];
            pk_get_scales_mins_k4(w4->scales, s8, m8);
            for (int s = 0; s < 8; s++) { sc[s][r] = s8[s]; mn[s][r] = m8[s]; }
            d[r] = w4->d;
            dmin[r] = w4->dmin;
        } else if (T == K8_Q2_K) {
            const pk_block_q2_K *w2 = (const pk_block_q2_K *)blk[r];
            for (int s = 0; s < 16; s++) {
                sc[s][r] = (w2->scales[s] & 15) * 0x00010001;   /* both words: vpmullw */
                mn[s][r] = w2->scales[s] >> 4;
            }
            d[r] = w2->d;
            dmin[r] = w2->dmin;
        } else if (T == K8_Q3_K) {
            const pk_block_q3_K *w3 = (const pk_block_q3_K *)blk[r];
            int8_t s8[16];
            pk_q3_K_scales(w3->scales, s8);
            for (int s = 0; s < 16; s++) { sc[s][r] = s8[s] & 0xFFFF; mn[s][r] = 4 * s8[s]; }
            d[r] = dmin[r] = w3->d;
        } else {
            const pk_block_q6_K *w6 = (const pk_block_q6_K *)blk[r];
            for (int s = 0; s < 16; s++) {   /* (sc, sc) pairs; the offset is the activations' (c) */
                sc[s][r] = (int32_t)((uint32_t)(w6->scales[s] & 0xFFFF) * 0x00010001u);
                mn[s][r] = 0;
            }
            d[r] = dmin[r] = w6->d;
        }
    }
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    if (T == K8_Q4_K || T == K8_Q5_K) {
        const size_t qo = T == K8_Q4_K ? offsetof(pk_block_q4_K, qs) : offsetof(pk_block_q5_K, qs);
        __m256i qh[8];
        if (T == K8_Q5_K) k8_load8(blk, offsetof(pk_block_q5_K, qh), qh);
        for (int h = 0; h < 4; h++) {   /* 32 bytes of qs: sub-blocks 2h (low nibbles), 2h + 1 (high) */
            __m256i o[8];
            k8_load8(blk, qo + 32 * (size_t)h, o);
            for (int j = 0; j < 8; j++) {
                __m256i lo = _mm256_and_si256(o[j], m4), hi = _mm256_and_si256(_mm256_srli_epi16(o[j], 4), m4);
                if (T == K8_Q5_K) {   /* bit 2h of qh[l] for element 64h + l, 2h + 1 for 64h + 32 + l */
                    const __m256i b4 = _mm256_set1_epi8(0x10);
                    lo = _mm256_or_si256(lo, _mm256_and_si256(h < 2 ? _mm256_slli_epi16(qh[j], 4 - 2 * h)
                                                                    : _mm256_srli_epi16(qh[j], 2 * h - 4), b4));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(h < 2 ? _mm256_slli_epi16(qh[j], 3 - 2 * h)
                                                                    : _mm256_srli_epi16(qh[j], 2 * h - 3), b4));
                }
                W->q[16 * h + j] = lo;
                W->q[16 * h + 8 + j] = hi;
            }
        }
    } else if (T == K8_Q6_K) {   /* ql and qh transposed as bytes, then combined */
        const __m256i m30 = _mm256_set1_epi8(0x30);
        for (int h = 0; h < 2; h++) {
            __m256i a[8], c[8], qh[8];
            k8_load8(blk, offsetof(pk_block_q6_K, ql) + 64 * (size_t)h, a);
            k8_load8(blk, offsetof(pk_block_q6_K, ql) + 64 * (size_t)h + 32, c);
            k8_load8(blk, offsetof(pk_block_q6_K, qh) + 32 * (size_t)h, qh);
            for (int j = 0; j < 8; j++) {   /* elements 128h + 32k + 4j: bits 2k of qh */
                __m256i *o = W->q + 32 * h + j;
                o[0] = _mm256_or_si256(_mm256_and_si256(a[j], m4), _mm256_and_si256(_mm256_slli_epi16(qh[j], 4), m30));
                o[8] = _mm256_or_si256(_mm256_and_si256(c[j], m4), _mm256_and_si256(_mm256_slli_epi16(qh[j], 2), m30));
                o[16] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a[j], 4), m4), _mm256_and_si256(qh[j], m30));
                o[24] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(c[j], 4), m4),
                                        _mm256_and_si256(_mm256_srli_epi16(qh[j], 2), m30));
            }
        }
    } else {   /* Q2_K, Q3_K: element 128h + 32k + l is bits 2k of qs[32h + l] */
        const __m256i m2 = _mm256_set1_epi8(3);
        __m256i hm[8];
        if (T == K8_Q3_K) k8_load8(blk, offsetof(pk_block_q3_K, hmask), hm);
        const size_t qo = T == K8_Q2_K ? offsetof(pk_block_q2_K, qs) : offsetof(pk_block_q3_K, qs);
        for (int h = 0; h < 2; h++) {
            __m256i o[8];
            k8_load8(blk, qo + 32 * (size_t)h, o);
            for (int k = 0; k < 4; k++)
                for (int j = 0; j < 8; j++) {
                    __m256i v = _mm256_and_si256(_mm256_srli_epi16(o[j], 2 * k), m2);
                    if (T == K8_Q3_K) {   /* bit 4h + k of hmask[l] as bit 2 */
                        const int sh = 4 * h + k;
                        __m256i hb = sh < 2 ? _mm256_slli_epi16(hm[j], 2 - sh) : _mm256_srli_epi16(hm[j], sh - 2);
                        v = _mm256_or_si256(v, _mm256_and_si256(hb, _mm256_set1_epi8(4)));
                    } else {   /* level * scale of sub-block 8h + 2k + j / 4: bytes <= 45, no carry */
                        v = _mm256_mullo_epi16(v, _mm256_load_si256((const __m256i *)sc[8 * h + 2 * k + (j >> 2)]));
                    }
                    W->q[32 * h + 8 * k + j] = v;
                }
        }
    }
    for (int s = 0; s < ns; s++) W->sc[s] = _mm256_load_si256((const __m256i *)sc[s]);
    for (int k = 0; k < ns / 2; k++)
        W->mp[k] = _mm256_or_si256(_mm256_and_si256(_mm256_load_si256((const __m256i *)mn[2 * k]), _mm256_set1_epi32(0xFFFF)),
                                   _mm256_slli_epi32(_mm256_load_si256((const __m256i *)mn[2 * k + 1]), 16));
    W->d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)d));
    W->dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dmin));
}

/* Per token t < nt and super-block b < kb: X[t * K8_KB + b]. */
K8_INLINE void k8_prep(const int T, int nt, const pk_block_q8_K *const *xs, int kb, k8_act *X) {
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < kb; b++) {
            const pk_block_q8_K *x = &xs[t][b];
            k8_act *o = &X[t * K8_KB + b];
            for (int k = 0; k < k8_ns(T) / 2; k++) {
                int lo = x->bsums[2 * k], hi = x->bsums[2 * k + 1];
                if (k8_ns(T) == 8) {
                    lo = x->bsums[4 * k] + x->bsums[4 * k + 1];
                    hi = x->bsums[4 * k + 2] + x->bsums[4 * k + 3];
                }
                o->bp[k] = (int32_t)(((uint32_t)hi << 16) | ((uint32_t)lo & 0xFFFFu));
            }
            o->d = x->d;
            if (T == K8_Q6_K)   /* 32 * the activation pair sums of each word of group g: |.| <= 32 * 8 * 127 */
                for (int g = 0; g < 16; g++) {
                    int lo = 0, hi = 0;
                    for (int j = 0; j < 16; j += 4) {
                        lo += x->qs[16 * g + j] + x->qs[16 * g + j + 1];
                        hi += x->qs[16 * g + j + 2] + x->qs[16 * g + j + 3];
                    }
                    o->c[g] = (int32_t)(((uint32_t)(32 * hi) << 16) | ((uint32_t)(32 * lo) & 0xFFFFu));
                }
        }
}

K8_INLINE __m256i k8_bc(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* 8 rows (W, kb super-blocks) times NT tokens; y[t * ys + r] for r < nr. */
K8_INLINE void k8_tile(const int T, const int NT, const k8_blk *W, int kb, const pk_block_q8_K *const *xs,
                       const k8_act *X, float *y, int64_t ys, int nr, int first) {
    const int ns = k8_ns(T), dw = 64 / ns;
    __m256 acc[K8_TT], am[K8_TT];
    for (int t = 0; t < NT; t++) acc[t] = am[t] = _mm256_setzero_ps();
    for (int b = 0; b < kb; b++) {
        const k8_blk *wb = &W[b];
        __m256i is[K8_TT];
        for (int t = 0; t < NT; t++) is[t] = _mm256_setzero_si256();
        /* groups of 4 dwords (16 elements): the sub-block, or its half (Q4_K, Q5_K) */
        for (int g = 0; g < 16; g++) {
            const __m256i q0 = wb->q[4 * g], q1 = wb->q[4 * g + 1], q2 = wb->q[4 * g + 2], q3 = wb->q[4 * g + 3];
            const int s = g * 4 / dw;
            for (int t = 0; t < NT; t++) {
                const int8_t *xq = xs[t][b].qs + 16 * g;
                if (T == K8_Q6_K) {
                    /* vpmaddubsw pairs (<= 2 * 63 * 127), 8 products per word summed in int16,
                       wrapping: less 32 * their activations (c) the true sum of (q - 32) * x fits
                       int16 (8 * 32 * 127), then times (sc, sc) into isum */
                    __m256i p = _mm256_add_epi16(
                        _mm256_add_epi16(_mm256_maddubs_epi16(q0, k8_bc(xq)), _mm256_maddubs_epi16(q1, k8_bc(xq + 4))),
                        _mm256_add_epi16(_mm256_maddubs_epi16(q2, k8_bc(xq + 8)), _mm256_maddubs_epi16(q3, k8_bc(xq + 12))));
                    p = _mm256_sub_epi16(p, _mm256_set1_epi32(X[t * K8_KB + b].c[g]));
                    is[t] = x86_dpwssd(is[t], p, wb->sc[s]);
                    continue;
                }
                __m256i a = x86_dpbusd(_mm256_setzero_si256(), q0, k8_bc(xq));
                a = x86_dpbusd(a, q1, k8_bc(xq + 4));
                a = x86_dpbusd(a, q2, k8_bc(xq + 8));
                a = x86_dpbusd(a, q3, k8_bc(xq + 12));
                if (T == K8_Q2_K) {
                    is[t] = _mm256_add_epi32(is[t], a);
                } else if (T == K8_Q3_K || T == K8_Q4_K) {
                    is[t] = x86_dpwssd(is[t], a, wb->sc[s]);
                } else {   /* Q5_K: both halves of the sub-block summed first */
                    const int8_t *xr = xq + 16;
                    a = x86_dpbusd(a, wb->q[4 * g + 4], k8_bc(xr));
                    a = x86_dpbusd(a, wb->q[4 * g + 5], k8_bc(xr + 4));
                    a = x86_dpbusd(a, wb->q[4 * g + 6], k8_bc(xr + 8));
                    a = x86_dpbusd(a, wb->q[4 * g + 7], k8_bc(xr + 12));
                    is[t] = _mm256_add_epi32(is[t], _mm256_mullo_epi32(a, wb->sc[s]));
                }
            }
            if (T == K8_Q5_K) g++;
        }
        for (int t = 0; t < NT; t++) {
            const k8_act *xa = &X[t * K8_KB + b];
            __m256i im = _mm256_setzero_si256();
            if (T != K8_Q6_K)
                for (int k = 0; k < ns / 2; k++) im = x86_dpwssd(im, wb->mp[k], _mm256_set1_epi32(xa->bp[k]));
            const __m256 dx = _mm256_set1_ps(xa->d);
            if (T == K8_Q3_K || T == K8_Q6_K) {
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(is[t], im)), _mm256_mul_ps(wb->d, dx), acc[t]);
            } else {   /* as the gemv: d * dx and dmin * dx, the mins summed apart */
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is[t]), _mm256_mul_ps(wb->d, dx), acc[t]);
                acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(im), _mm256_mul_ps(wb->dmin, dx), acc[t]);
            }
        }
    }
    for (int t = 0; t < NT; t++) {
        float *yt = y + t * ys;
        acc[t] = _mm256_sub_ps(acc[t], am[t]);
        if (nr == 8) {
            _mm256_storeu_ps(yt, first ? acc[t] : _mm256_add_ps(acc[t], _mm256_loadu_ps(yt)));
        } else {
            float v[8];
            _mm256_storeu_ps(v, acc[t]);
            for (int r = 0; r < nr; r++) yt[r] = first ? v[r] : yt[r] + v[r];
        }
    }
}

/* k8_tile for nt (1 .. K8_TT) tokens: one specialised copy per count */
K8_INLINE void k8_tiles(const int T, int nt, const k8_blk *W, int kb, const pk_block_q8_K *const *xs,
                        const k8_act *X, float *y, int64_t ys, int nr, int first) {
    switch (nt) {
    case 1: k8_tile(T, 1, W, kb, xs, X, y, ys, nr, first); break;
    case 2: k8_tile(T, 2, W, kb, xs, X, y, ys, nr, first); break;
    case 3: k8_tile(T, 3, W, kb, xs, X, y, ys, nr, first); break;
    case 4: k8_tile(T, 4, W, kb, xs, X, y, ys, nr, first); break;
    case 5: k8_tile(T, 5, W, kb, xs, X, y, ys, nr, first); break;
    case 6: k8_tile(T, 6, W, kb, xs, X, y, ys, nr, first); break;
    case 7: k8_tile(T, 7, W, kb, xs, X, y, ys, nr, first); break;
    default: k8_tile(T, 8, W, kb, xs, X, y, ys, nr, first); break;
    }
}

K8_INLINE void k8_gemm(const int T, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                       size_t rb, const void *const *x) {
    k8_blk W[K8_KB];
    k8_act X[K8_TS * K8_KB];
    const int64_t nb = n / PK_QK_K;
    for (int64_t k0 = 0; k0 < nb; k0 += K8_KB) {
        int kb = nb - k0 < K8_KB ? (int)(nb - k0) : K8_KB;
        for (int64_t t0 = 0; t0 < ntok; t0 += K8_TS) {
            int nts = ntok - t0 < K8_TS ? (int)(ntok - t0) : K8_TS;
            const pk_block_q8_K *xs[K8_TS];
            for (int t = 0; t < nts; t++) xs[t] = (const pk_block_q8_K *)x[t0 + t] + k0;
            k8_prep(T, nts, xs, kb, X);
            for (int64_t r0 = 0; r0 < nrows; r0 += 8) {
                int nr = nrows - r0 < 8 ? (int)(nrows - r0) : 8;
                const uint8_t *rows[8];
                for (int r = 0; r < 8; r++)
                    rows[r] = r < nr ? (const uint8_t *)w + (size_t)(r0 + r) * rb + (size_t)k0 * k8_bsize(T) : NULL;
                /* the next 8 rows' blocks of this k-block, ahead of their decode */
                pf_next8(rows[0], rb, nrows - r0 - 8, (size_t)kb * k8_bsize(T));
                for (int b = 0; b < kb; b++) k8_decode(T, rows, b, &W[b]);
                float *yr = y + t0 * ys + r0;
                for (int t = 0; t < nts; t += K8_TT) {
                    int nt = nts - t < K8_TT ? nts - t : K8_TT;
                    k8_tiles(T, nt, W, kb, xs + t, X + t * K8_KB, yr + t * ys, ys, nr, k0 == 0);
                }
            }
        }
    }
}

#endif
