/* kernels_avx512_gemm.c - AVX-512 multi-token kernels for prompt
 * processing: each block of weights is loaded once and applied to several
 * tokens' activations. Entries left NULL fall back to the gemv kernel per
 * token (see kernels.h).
 *
 * Tuned for: prompt processing, which is compute-bound. Blocking:
 *   - the reduction dimension is cut into k-blocks (a few KiB of
 *     activations per token), so a tile of tokens' activations stays in L1;
 *   - tokens are taken in tiles of up to TT = 8; per (k-block, token tile)
 *     the activation data the kernels want in another form (Q8_0 repacked
 *     to 64-byte pairs with their +128 seeds and scales, F16 as F32) is prepared once in a stack buffer and
 *     shared by every row;
 *   - each weight row of the chunk is then decoded once per (k-block, token
 *     tile) and applied to the tile's tokens: 1 row x NT tokens of 512-bit
 *     accumulators. Partial sums of later k-blocks are added to y.
 *   - MXFP4, Q5_0, Q4_0 (kernels_x86_ri8.h) and Q2_K, Q4_K, Q6_K
 *     (kernels_avx512_kri.h): 16 rows at a time, decoded row-interleaved
 *     once per (k-block, tile of up to 32 tokens), so
 *     each 512-bit product covers 16 rows x 4 elements of one token and the
 *     accumulator lanes are rows: no reduction per row.
 * Tails: NT (1..8) is a compile-time constant of each tile instance (the
 * switch in each driver); odd Q8_0 block counts and F16/F32 lengths use
 * zero padding / masked loads.
 *
 * Numerics: within a (super-)block all products and sums are exact int32.
 *   Q8_0: vpdpbusd on level + 128 (unsigned: w ^ 0x80) x activations,
 *     seeded with -128 * (sums of 4 activations) - exact for the full int8
 *     range (kernels_avx512_q32.h). MXFP4, Q5_0, Q4_0: vpdpbusd on level +
 *     12 / 16 / 8 (unsigned, at most 31), seeded with -offset * the block's
 *     activation sum.
 *   Q2_K, Q4_K, Q6_K: vpdpbusd on the unsigned levels, per sub-block
 *     exact int32; scales, mins and Q6_K's offset as kernels_avx512_kri.h
 *     says.
 * Only float accumulation across blocks differs from the reference.
 */
#include <string.h>
#include "kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__F16C__)
#include <immintrin.h>
#include "kernels_avx512_levels.h"
#include "kernels_avx512_q32.h"
#include "kernels_x86_ri8.h"

#define GI static inline __attribute__((always_inline))

enum {
    TT = 8,        /* tokens per tile */
    KB_K = 8,      /* K-quant super-blocks per k-block (2048 elements) */
    KB_Q8 = 32,    /* Q8_0 block pairs per k-block (2048 elements) */
    KB_F = 1024,   /* F16 / F32 elements per k-block */
};

/* Instantiate CALL(NT) for the run-time token count nt (1..TT). */
#define NT_SWITCH(nt, CALL)                                                    \
    switch (nt) {                                                              \
    case 1: CALL(1); break; case 2: CALL(2); break;                            \
    case 3: CALL(3); break; case 4: CALL(4); break;                            \
    case 5: CALL(5); break; case 6: CALL(6); break;                            \
    case 7: CALL(7); break; default: CALL(8); break;                           \
    }

/* y[t * ys] (+)= the sum of acc[t], t < NT. Eight accumulators are reduced
 * together (transposing adds); fewer are padded with zeros. */
GI void store_sums(const int NT, const __m512 *acc, float *y, int64_t ys, int first) {
    __m512 a[8];
    for (int t = 0; t < 8; t++) a[t] = t < NT ? acc[t] : _mm512_setzero_ps();
    /* pairs: 256-bit halves summed -> [t0 x8 | t1 x8] */
    __m512 p[4];
    for (int i = 0; i < 4; i++)
        p[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(a[2 * i], a[2 * i + 1], 0xEE));
    /* quads: 128-bit lanes summed -> [t0 x4 | t1 x4 | t2 x4 | t3 x4] */
    __m512 q0 = _mm512_add_ps(_mm512_shuffle_f32x4(p[0], p[1], 0x88),
                              _mm512_shuffle_f32x4(p[0], p[1], 0xDD));
    __m512 q1 = _mm512_add_ps(_mm512_shuffle_f32x4(p[2], p[3], 0x88),
                              _mm512_shuffle_f32x4(p[2], p[3], 0xDD));
    /* within 128-bit lanes: lane L -> [tL, t(4+L), tL, t(4+L)] after two steps */
    __m512 u = _mm512_add_ps(_mm512_unpacklo_ps(q0, q1), _mm512_unpackhi_ps(q0, q1));
    u = _mm512_add_ps(u, _mm512_permute_ps(u, 0x4E));
    float s[16];
    _mm512_storeu_ps(s, u);
    for (int t = 0; t < NT; t++) {
        float v = s[4 * (t & 3) + (t >> 2)];
        y[t * ys] = first ? v : y[t * ys] + v;
    }
}

/* ---- K-quants x Q8_K: 16 rows at a time (kernels_avx512_kri.h) ------------------ */

GI __m512i ld64(const void *p) { return _mm512_loadu_si512(p); }
GI float f16f(uint16_t h) { return _cvtsh_ss(h); }

#include "kernels_avx512_kri.h"
#define KR_GEMM(T, ID)                                                                \
static void gemm_##T(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,  \
                     const void *w, size_t rb, const void *const *x) {              \
    kr_gemm(ID, n, nrows, ntok, y, ys, w, rb, x);                                   \
}
KR_GEMM(q2_K, KR_Q2_K)
KR_GEMM(q4_K, KR_Q4_K)
KR_GEMM(q6_K, KR_Q6_K)

/* ---- Q8_0 x Q8_0 ------------------------------------------------------------- */

/* Per token and pair of blocks: the 64 activations, -128 * their sums of 4
 * (the seed cancelling the +128 on the weights) and the two scales. */
typedef struct { int8_t qs[64]; __m512i seed; __m512 d; } q8_pair;

static void prep_q8_0(int nt, const pk_block_q8_0 *const *xs, int64_t nbk, int npair, q8_pair *X) {
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    for (int t = 0; t < nt; t++)
        for (int p = 0; p < npair; p++) {
            const pk_block_q8_0 *b0 = &xs[t][2 * p];
            int two = 2 * p + 1 < nbk;
            __m256i lo = _mm256_loadu_si256((const __m256i *)b0->qs);
            __m256i hi = two ? _mm256_loadu_si256((const __m256i *)b0[1].qs) : _mm256_setzero_si256();
            __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            q8_pair *o = &X[t * npair + p];
            _mm512_storeu_si512(o->qs, q);
            o->seed = _mm512_sub_epi32(_mm512_setzero_si512(),
                                       _mm512_dpbusd_epi32(_mm512_setzero_si512(), k80, q));
            o->d = _mm512_insertf32x8(_mm512_set1_ps(f16f(b0->d)),
                                      _mm256_set1_ps(two ? f16f(b0[1].d) : 0.0f), 1);
        }
}

/* Block pair p of a Q8_0 row: its 64 levels + 128 (an odd last block: the
 * upper half zero, as its activations) and scales [d0 x 8 | d1 x 8]. */
GI void wpair(const void *w, int p, int two, __m512i *q, __m512 *dw) {
    const pk_block_q8_0 *b0 = (const pk_block_q8_0 *)w + 2 * p;
    *q = two ? wu2_q8_0(b0) : _mm512_castsi256_si512(wu_q8_0(b0));
    float d0 = ws_q8_0(b0), d1 = two ? ws_q8_0(b0 + 1) : 0.0f;
    if (!two) *q = _mm512_inserti64x4(*q, _mm256_setzero_si256(), 1);
    *dw = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
}

GI void tile_q32(const int NT, const void *w, const q8_pair *X, int64_t nbk, int npair,
                 float *y, int64_t ys, int first) {
    __m512 acc[TT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int p = 0; p < npair; p++) {
        __m512i q;
        __m512 dw;
        wpair(w, p, 2 * p + 1 < nbk, &q, &dw);
        for (int t = 0; t < NT; t++) {
            const q8_pair *xp = &X[t * npair + p];
            __m512i s = _mm512_dpbusd_epi32(xp->seed, q, ld64(xp->qs));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, xp->d), acc[t]);
        }
    }
    store_sums(NT, acc, y, ys, first);
}

static void gemm_q8_0(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,
                      const void *w, size_t rb, const void *const *x) {
    q8_pair X[TT * KB_Q8];
    const size_t bs = sizeof(pk_block_q8_0);
    int64_t nb = n / 32;
    for (int64_t k0 = 0; k0 < nb; k0 += 2 * KB_Q8) {
        int64_t nbk = nb - k0 < 2 * KB_Q8 ? nb - k0 : 2 * KB_Q8;
        int npair = (int)((nbk + 1) / 2);
        for (int64_t t0 = 0; t0 < ntok; t0 += TT) {
            int nt = ntok - t0 < TT ? (int)(ntok - t0) : TT;
            const pk_block_q8_0 *xs[TT];
            for (int t = 0; t < nt; t++) xs[t] = (const pk_block_q8_0 *)x[t0 + t] + k0;
            prep_q8_0(nt, xs, nbk, npair, X);
            float *yt = y + t0 * ys;
            for (int64_t r = 0; r < nrows; r++) {
                const char *wr = (const char *)w + (size_t)r * rb + (size_t)k0 * bs;
#define C(NT) tile_q32(NT, wr, X, nbk, npair, yt + r, ys, k0 == 0)
                NT_SWITCH(nt, C)
#undef C
            }
        }
    }
}


/* ---- MXFP4, Q5_0, Q4_0 x Q8_0: 16 rows at a time ---------------------------------
 * Rows in groups of 16 (two row-interleaved groups of 8 of
 * kernels_x86_ri8.h in the halves of each register), decoded once per
 * (k-block, tile of up to RI_TS tokens); per block and token 8 vpdpbusd with
 * the broadcast activations, seeded with -off * their sum (exact int32), one
 * convert and one multiply-add into the 16 rows' float accumulators. */
enum {
    RI_TS = 32,   /* tokens per prepared tile */
    RI_KB = 32,   /* blocks per k-block at most (1024 elements) */
};
typedef struct { __m512i q[8]; __m512 d; } ri16;

GI void tile_ri16(const int NT, const ri16 *W, int nbk, const pk_block_q8_0 *const *xs, const float *dx,
                  const int32_t *cx, float *y, int64_t ys, int nr, int first) {
    __m512 acc[TT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nbk; b++) {
        const ri16 *wb = &W[b];
        for (int t = 0; t < NT; t++) {
            const int8_t *q = xs[t][b].qs;
            __m512i s = _mm512_set1_epi32(-cx[t * RI_KB + b]);
            for (int j = 0; j < 8; j++) s = _mm512_dpbusd_epi32(s, wb->q[j], _mm512_set1_epi32(ri_x4(q + 4 * j)));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wb->d, _mm512_set1_ps(dx[t * RI_KB + b])),
                                     acc[t]);
        }
    }
    const __mmask16 m = (__mmask16)((1u << nr) - 1);
    for (int t = 0; t < NT; t++) {
        float *yt = y + t * ys;
        _mm512_mask_storeu_ps(yt, m, first ? acc[t] : _mm512_add_ps(acc[t], _mm512_maskz_loadu_ps(m, yt)));
    }
}

GI void gemm_ri16(const int T, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w,
                  size_t rb, const void *const *x) {
    ri16 W[RI_KB];
    float dx[RI_TS * RI_KB];
    int32_t cx[RI_TS * RI_KB];
    int64_t nb = n / 32, nkb = (nb + RI_KB - 1) / RI_KB, kbs = (nb + nkb - 1) / nkb;
    for (int64_t k0 = 0; k0 < nb; k0 += kbs) {
        int nbk = nb - k0 < kbs ? (int)(nb - k0) : (int)kbs;
        for (int64_t t0 = 0; t0 < ntok; t0 += RI_TS) {
            int nts = ntok - t0 < RI_TS ? (int)(ntok - t0) : RI_TS;
            const pk_block_q8_0 *xs[RI_TS];
            for (int t = 0; t < nts; t++) xs[t] = (const pk_block_q8_0 *)x[t0 + t] + k0;
            ri_prep(ri_off(T), nts, xs, nbk, RI_KB, dx, cx);
            for (int64_t r0 = 0; r0 < nrows; r0 += 16) {
                int nr = nrows - r0 < 16 ? (int)(nrows - r0) : 16;
                const uint8_t *wr = (const uint8_t *)w + (size_t)r0 * rb + (size_t)k0 * ri_bsize(T);
                for (int b = 0; b < nbk; b++) {
                    __m256i lo[8], hi[8];
                    __m256 dlo, dhi;
                    ri8_decode(T, wr, rb, nr < 8 ? nr : 8, b, lo, &dlo);
                    ri8_decode(T, nr > 8 ? wr + 8 * rb : wr, rb, nr - 8, b, hi, &dhi);
                    for (int j = 0; j < 8; j++) W[b].q[j] = _mm512_inserti64x4(_mm512_castsi256_si512(lo[j]), hi[j], 1);
                    W[b].d = _mm512_insertf32x8(_mm512_castps256_ps512(dlo), dhi, 1);
                }
                float *yr = y + t0 * ys + r0;
                for (int t = 0; t < nts; t += TT) {
                    int nt = nts - t < TT ? nts - t : TT;
#define C(NT) tile_ri16(NT, W, nbk, xs + t, dx + t * RI_KB, cx + t * RI_KB, yr + t * ys, ys, nr, k0 == 0)
                    NT_SWITCH(nt, C)
#undef C
                }
            }
        }
    }
}
#define RI_GEMM16(T, ID)                                                              \
static void gemm_##T(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,  \
                     const void *w, size_t rb, const void *const *x) {              \
    gemm_ri16(ID, n, nrows, ntok, y, ys, w, rb, x);                                 \
}
RI_GEMM16(mxfp4, RI_MXFP4)
RI_GEMM16(q5_0, RI_Q5_0)
RI_GEMM16(q4_0, RI_Q4_0)

/* ---- F32, F16 -------------------------------------------------------------------
 * They are not registered by default: tests/t_batch.sh requires batched
 * logits to be bitwise identical to one-token decoding on its F16 / F32
 * models, and these kernels sum in a different order than the gemvs (within
 * float rounding, as tests/test_gemm.c checks). Build with -DPK_GEMM_FLOAT=1
 * to use them for weights. */
#ifndef PK_GEMM_FLOAT
#define PK_GEMM_FLOAT 0
#endif
#if PK_GEMM_FLOAT

/* One row of len elements (F32 or F16 at w) times NT F32 activation rows. */
GI void tile_f(const int NT, int is16, const void *w, const float *const *xf, int64_t len,
               float *y, int64_t ys, int first) {
    __m512 acc[TT];
    for (int t = 0; t < NT; t++) acc[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= len; i += 16) {
        __m512 wv = is16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)w + i)))
                         : _mm512_loadu_ps((const float *)w + i);
        for (int t = 0; t < NT; t++) acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(xf[t] + i), acc[t]);
    }
    if (i < len) {
        __mmask16 m = (__mmask16)((1u << (len - i)) - 1);
        __m512 wv = is16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)w + i))
                         : _mm512_maskz_loadu_ps(m, (const float *)w + i);
        for (int t = 0; t < NT; t++)
            acc[t] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, xf[t] + i), acc[t]);
    }
    store_sums(NT, acc, y, ys, first);
}

GI void gemm_float(int is16, int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,
                       const void *w, size_t rb, const void *const *x) {
    float buf[TT * KB_F] __attribute__((aligned(64)));
    size_t es = is16 ? 2 : 4;
    for (int64_t k0 = 0; k0 < n; k0 += KB_F) {
        int64_t len = n - k0 < KB_F ? n - k0 : KB_F;
        for (int64_t t0 = 0; t0 < ntok; t0 += TT) {
            int nt = ntok - t0 < TT ? (int)(ntok - t0) : TT;
            const float *xf[TT];
            for (int t = 0; t < nt; t++) {
                if (is16) {      /* F16 activations to F32 once per tile */
                    const uint16_t *src = (const uint16_t *)x[t0 + t] + k0;
                    float *dst = buf + t * KB_F;
                    for (int64_t i = 0; i < len; i += 16) {
                        __mmask16 m = len - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - i)) - 1);
                        _mm512_mask_storeu_ps(dst + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + i)));
                    }
                    xf[t] = dst;
                } else {
                    xf[t] = (const float *)x[t0 + t] + k0;
                }
            }
            float *yt = y + t0 * ys;
            for (int64_t r = 0; r < nrows; r++) {
                const char *wr = (const char *)w + (size_t)r * rb + (size_t)k0 * es;
#define C(NT) tile_f(NT, is16, wr, xf, len, yt + r, ys, k0 == 0)
                NT_SWITCH(nt, C)
#undef C
            }
        }
    }
}

static void gemm_f32(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,
                     const void *w, size_t rb, const void *const *x) {
    gemm_float(0, n, nrows, ntok, y, ys, w, rb, x);
}
static void gemm_f16(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys,
                     const void *w, size_t rb, const void *const *x) {
    gemm_float(1, n, nrows, ntok, y, ys, w, rb, x);
}
#endif

const pk_gemm_fn pk_gemm_avx512[PK_TYPE_COUNT] = {
#if PK_GEMM_FLOAT
    [PK_TYPE_F32] = gemm_f32, [PK_TYPE_F16] = gemm_f16,
#endif
    [PK_TYPE_Q8_0] = gemm_q8_0, [PK_TYPE_MXFP4] = gemm_mxfp4, [PK_TYPE_Q5_0] = gemm_q5_0, [PK_TYPE_Q4_0] = gemm_q4_0,
    [PK_TYPE_Q2_K] = gemm_q2_K, [PK_TYPE_Q4_K] = gemm_q4_K, [PK_TYPE_Q6_K] = gemm_q6_K,
};

#else
const pk_gemm_fn pk_gemm_avx512[PK_TYPE_COUNT] = {0};
#endif
