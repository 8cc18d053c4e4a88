/* kernels/x86/avx512.c - the AVX-512 kernel table (F, BW, VL, DQ, VNNI: Cascade
 * Lake, Ice Lake, Sapphire Rapids and later, Zen 4 and later). Compiled with the
 * ISA flags in the Makefile; only called after kernels/kernels.c has checked the CPU.
 *
 * Tuned for: single-token decode, where each gemv streams a weight matrix
 * from DRAM once per token. gemvs take 4 rows at a time so one activation
 * load feeds 4 weight streams, with 2 accumulators per row for the float
 * types. Tails of block-1 types use masked loads (no scalar loop).
 *
 * F32, F16 and BF16 (widened to fp32 by a shift, exactly) use 16-lane FMA;
 * no AVX512-BF16 instruction is used, so CPUs without it (Cascade Lake, Ice
 * Lake, some cloud VMs that hide it) run this table too.
 * Q8_0 and MXFP4 use VNNI vpdpbusd (u8 x s8 -> s32). The weights are made
 * unsigned by adding 128 (Q8_0: w ^ 0x80; MXFP4: a vpshufb table of its
 * levels + 128); the resulting extra 128*sum(x) per block depends only on
 * the activations, so it is computed once per block and shared across rows
 * (it seeds the accumulator). Exact for the full int8 range of both operands
 * (the vocabulary, shared with the gemm: kernels/x86/avx512_q32.h).
 * Activation quantizers are bit-exact with the reference for finite input.
 *
 * The Q8_0 / MXFP4 gemv (one driver) puts 2 blocks in one 512-bit register
 * and converts the 4 rows' 8 weight scales at once; it software-prefetches
 * the next 4 rows.
 *
 * Q2_K..Q6_K and IQ4_XS use the 512-bit kernels of kernels/x86/avx512_kquant.h
 * (64 levels per instruction, vpmaddubsw + vpdpwssd with the sub-block
 * scales, 4 rows sharing each activation block, the rows' fp16 scales and
 * mins converted together, software prefetch of the next 4 rows). The Q8_K
 * / Q8_1 activation quantizers come from kernels/x86/quant_ops.h (shared with
 * AVX2, compiled with AVX-512 flags); Q4_0, IQ4_NL, Q4_1, Q5_0 and Q5_1 are
 * inherited from the avx2 table.
 */
#include <math.h>
#include <string.h>
#include "kernels/kernels.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512VNNI__) && defined(__F16C__)
#include <immintrin.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __mmask16 tail16(int64_t k) { return (__mmask16)((1u << k) - 1); }

#include "kernels/x86/avx512_q32.h"

/* ---- F32, F16, BF16: 16 lanes of FMA, masked tail ------------------------- */

#define FK_INLINE static inline __attribute__((always_inline))

/* The non-inline entries of one type: vec_dot_NAME and gemv_NAME, which
 * call the always-inline FAM_vec_dot / FAM_gemv of their kernel family
 * with the constant kind K (gemv's last rows: vec_dot_NAME). */
#define GEMV_ENTRIES(NAME, FAM, K)                                                                \
    static void vec_dot_##NAME(int64_t n, float *s, const void *vw, const void *vx) {             \
        FAM##_vec_dot(K, n, s, vw, vx);                                                           \
    }                                                                                             \
    static void gemv_##NAME(int64_t n, int64_t nrows, float *y, const void *vw, size_t rb, const void *vx) { \
        FAM##_gemv(K, vec_dot_##NAME, n, nrows, y, vw, rb, vx);                                   \
    }

enum { FK_F32, FK_F16, FK_BF16 };   /* the element kind: float, fp16, bf16 */

static inline __m512 ld16_f32(const float *p) { return _mm512_loadu_ps(p); }
static inline __m512 ldm16_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
static inline __m512 ld16_f16(const uint16_t *p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}
static inline __m512 ldm16_f16(const uint16_t *p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
/* bf16 is the top half of an fp32: widen and shift (exact) */
static inline __m512 ld16_bf16(const uint16_t *p) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
static inline __m512 ldm16_bf16(const uint16_t *p, __mmask16 m) {
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
}
/* elements i .. i + 15 of a kind K vector as fp32; masked: the lanes of m */
FK_INLINE __m512 fk_ld(const int K, const void *p, int64_t i) {
    return K == FK_F32 ? ld16_f32((const float *)p + i)
           : K == FK_F16 ? ld16_f16((const uint16_t *)p + i)
                         : ld16_bf16((const uint16_t *)p + i);
}
FK_INLINE __m512 fk_ldm(const int K, const void *p, int64_t i, __mmask16 m) {
    return K == FK_F32 ? ldm16_f32((const float *)p + i, m)
           : K == FK_F16 ? ldm16_f16((const uint16_t *)p + i, m)
                         : ldm16_bf16((const uint16_t *)p + i, m);
}
/* row r of a matrix of rows rb bytes apart */
FK_INLINE const void *fk_row(const void *w, int64_t r, size_t rb) {
    return (const char *)w + (size_t)r * rb;
}

FK_INLINE void fk_vec_dot(const int K, int64_t n, float *s, const void *w, const void *x) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(fk_ld(K, w, i), fk_ld(K, x, i), a0);
        a1 = _mm512_fmadd_ps(fk_ld(K, w, i + 16), fk_ld(K, x, i + 16), a1);
        a2 = _mm512_fmadd_ps(fk_ld(K, w, i + 32), fk_ld(K, x, i + 32), a2);
        a3 = _mm512_fmadd_ps(fk_ld(K, w, i + 48), fk_ld(K, x, i + 48), a3);
    }
    for (; i + 16 <= n; i += 16)
        a0 = _mm512_fmadd_ps(fk_ld(K, w, i), fk_ld(K, x, i), a0);
    if (i < n) {
        __mmask16 m = tail16(n - i);
        a1 = _mm512_fmadd_ps(fk_ldm(K, w, i, m), fk_ldm(K, x, i, m), a1);
    }
    *s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

/* 4 rows at a time, 2 accumulators per row; the last rows by vec_dot */
FK_INLINE void fk_gemv(const int K, pk_vec_dot_fn vec_dot, int64_t n, int64_t nrows, float *y, const void *vw,
                       size_t rb, const void *x) {
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        const void *w0 = fk_row(vw, r, rb), *w1 = fk_row(w0, 1, rb);
        const void *w2 = fk_row(w1, 1, rb), *w3 = fk_row(w2, 1, rb);
        __m512 a0 = _mm512_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;
        __m512 a2 = a0, b2 = a0, a3 = a0, b3 = a0;
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            __m512 x0 = fk_ld(K, x, i), x1 = fk_ld(K, x, i + 16);
            a0 = _mm512_fmadd_ps(fk_ld(K, w0, i), x0, a0);
            b0 = _mm512_fmadd_ps(fk_ld(K, w0, i + 16), x1, b0);
            a1 = _mm512_fmadd_ps(fk_ld(K, w1, i), x0, a1);
            b1 = _mm512_fmadd_ps(fk_ld(K, w1, i + 16), x1, b1);
            a2 = _mm512_fmadd_ps(fk_ld(K, w2, i), x0, a2);
            b2 = _mm512_fmadd_ps(fk_ld(K, w2, i + 16), x1, b2);
            a3 = _mm512_fmadd_ps(fk_ld(K, w3, i), x0, a3);
            b3 = _mm512_fmadd_ps(fk_ld(K, w3, i + 16), x1, b3);
        }
        for (; i < n; i += 16) {
            __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
            __m512 x0 = fk_ldm(K, x, i, m);
            a0 = _mm512_fmadd_ps(fk_ldm(K, w0, i, m), x0, a0);
            a1 = _mm512_fmadd_ps(fk_ldm(K, w1, i, m), x0, a1);
            a2 = _mm512_fmadd_ps(fk_ldm(K, w2, i, m), x0, a2);
            a3 = _mm512_fmadd_ps(fk_ldm(K, w3, i, m), x0, a3);
        }
        y[r] = _mm512_reduce_add_ps(_mm512_add_ps(a0, b0));
        y[r + 1] = _mm512_reduce_add_ps(_mm512_add_ps(a1, b1));
        y[r + 2] = _mm512_reduce_add_ps(_mm512_add_ps(a2, b2));
        y[r + 3] = _mm512_reduce_add_ps(_mm512_add_ps(a3, b3));
    }
    for (; r < nrows; r++) vec_dot(n, &y[r], fk_row(vw, r, rb), x);
}

GEMV_ENTRIES(f32, fk, FK_F32)
GEMV_ENTRIES(f16, fk, FK_F16)
GEMV_ENTRIES(bf16, fk, FK_BF16)

/* ---- F32 matrix product (attention) ------------------------------------------- */

/* R rows (R <= 4) x up to 64 columns of C: 4 x R accumulators, one FMA per
 * k in order (the result of an element is the same for any R, N) */
static inline __attribute__((always_inline)) void sgemm_tile(const int R, int K, const float *A, int64_t lda,
                                                             const float *B, int64_t ldb, float *C, int64_t ldc,
                                                             int nc) {
    __m512 acc[4][4];
    __mmask16 mk[4];
    for (int j = 0; j < 4; j++) {
        int left = nc - 16 * j;
        mk[j] = left >= 16 ? (__mmask16)0xffff : left > 0 ? tail16(left) : 0;
        for (int r = 0; r < R; r++) acc[r][j] = _mm512_setzero_ps();
    }
    for (int k = 0; k < K; k++) {
        __m512 b[4];
        for (int j = 0; j < 4; j++) b[j] = _mm512_maskz_loadu_ps(mk[j], B + k * ldb + 16 * j);
        for (int r = 0; r < R; r++) {
            __m512 a = _mm512_set1_ps(A[r * lda + k]);
            for (int j = 0; j < 4; j++) acc[r][j] = _mm512_fmadd_ps(a, b[j], acc[r][j]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 4; j++)
            if (mk[j]) _mm512_mask_storeu_ps(C + r * ldc + 16 * j, mk[j], acc[r][j]);
}

static void sgemm(int M, int N, int K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                  int64_t ldc) {
    for (int n0 = 0; n0 < N; n0 += 64) {
        int nc = N - n0 < 64 ? N - n0 : 64;
        int m = 0;
        for (; m + 4 <= M; m += 4) sgemm_tile(4, K, A + m * lda, lda, B + n0, ldb, C + m * ldc + n0, ldc, nc);
        switch (M - m) {
        case 3: sgemm_tile(3, K, A + m * lda, lda, B + n0, ldb, C + m * ldc + n0, ldc, nc); break;
        case 2: sgemm_tile(2, K, A + m * lda, lda, B + n0, ldb, C + m * ldc + n0, ldc, nc); break;
        case 1: sgemm_tile(1, K, A + m * lda, lda, B + n0, ldb, C + m * ldc + n0, ldc, nc); break;
        default: break;
        }
    }
}

/* ---- exp, SwiGLU ------------------------------------------------------------------
 * exp(x) = 2^k * e^r, k = round(x / ln 2), r = x - k ln 2 (ln 2 in two
 * parts), e^r by its degree-6 Taylor polynomial (|r| <= ln 2 / 2: relative
 * error below 2e-7, about 2 ulp). x below -104 gives 0, above 88.7 +inf,
 * NaN stays NaN. */
static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(-104.0f), hi = _mm512_set1_ps(88.72284f);
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
    __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693145752f), xc);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512 y = _mm512_scalef_ps(p, k);
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), y, _mm512_setzero_ps());
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), y, _mm512_set1_ps(INFINITY));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), y, x);
}

static void exp_sub(float *x, int64_t n, float sub) {
    const __m512 s = _mm512_set1_ps(sub);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
        _mm512_mask_storeu_ps(x + i, m, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), s)));
    }
}

static void silu_mul(float *g, const float *u, int64_t n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, g + i);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), v));
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(_mm512_div_ps(v, _mm512_add_ps(one, e)),
                                                     _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* ---- Q8_0 and MXFP4 x Q8_0 with VNNI (vocabulary: kernels/x86/avx512_q32.h) ---- */

enum { Q32_Q8_0, Q32_MXFP4 };   /* the weight kind */

FK_INLINE size_t q32_bsize(const int K) { return K == Q32_Q8_0 ? sizeof(pk_block_q8_0) : sizeof(pk_block_mxfp4); }
/* block i of a row: its weights + 128 (one block in 256 bits, blocks i and
 * i + 1 in 512 bits) and its scale */
FK_INLINE __m256i q32_wu(const int K, const void *w, int64_t i) {
    return K == Q32_Q8_0 ? wu_q8_0(&((const pk_block_q8_0 *)w)[i]) : wu_mxfp4(&((const pk_block_mxfp4 *)w)[i]);
}
FK_INLINE __m512i q32_wu2(const int K, const void *w, int64_t i) {
    return K == Q32_Q8_0 ? wu2_q8_0(&((const pk_block_q8_0 *)w)[i]) : wu2_mxfp4(&((const pk_block_mxfp4 *)w)[i]);
}
FK_INLINE float q32_ws(const int K, const void *w, int64_t i) {
    return K == Q32_Q8_0 ? ws_q8_0(&((const pk_block_q8_0 *)w)[i]) : ws_mxfp4(&((const pk_block_mxfp4 *)w)[i]);
}
FK_INLINE __m256 q32_ws8(const int K, const void *w0, const void *w1, const void *w2, const void *w3, int64_t i) {
    return K == Q32_Q8_0 ? ws8_q8_0(w0, w1, w2, w3, i) : ws8_mxfp4(w0, w1, w2, w3, i);
}

/* vec_dot: 2 blocks per step in two 256-bit accumulators; gemv: 4 rows x 2
 * blocks per step, one 512-bit dot per row, the 4 rows' 8 weight scales
 * spread to [block i x 8 | block i + 1 x 8] per row, software prefetch of
 * the next 4 rows; an odd last block in 256 bits. */
FK_INLINE void q32_vec_dot(const int K, int64_t n, float *s, const void *w, const pk_block_q8_0 *x) {
    int64_t nb = n / 32, i = 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0;
    for (; i + 2 <= nb; i += 2) {
        __m256i x0 = ldq(&x[i]), x1 = ldq(&x[i + 1]);
        __m256i p0 = _mm256_dpbusd_epi32(q8_seed(x0), q32_wu(K, w, i), x0);
        __m256i p1 = _mm256_dpbusd_epi32(q8_seed(x1), q32_wu(K, w, i + 1), x1);
        __m256 d0 = _mm256_set1_ps(q32_ws(K, w, i) * _cvtsh_ss(x[i].d));
        __m256 d1 = _mm256_set1_ps(q32_ws(K, w, i + 1) * _cvtsh_ss(x[i + 1].d));
        a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), d0, a0);
        a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), d1, a1);
    }
    for (; i < nb; i++) {
        __m256i x0 = ldq(&x[i]);
        __m256i p0 = _mm256_dpbusd_epi32(q8_seed(x0), q32_wu(K, w, i), x0);
        __m256 d0 = _mm256_set1_ps(q32_ws(K, w, i) * _cvtsh_ss(x[i].d));
        a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), d0, a0);
    }
    *s = hsum8(_mm256_add_ps(a0, a1));
}

FK_INLINE void q32_gemv(const int K, pk_vec_dot_fn vec_dot, int64_t n, int64_t nrows, float *y, const void *vw,
                        size_t rb, const pk_block_q8_0 *x) {
    int64_t nb = n / 32, r = 0;
    const __m512i i0 = _mm512_inserti64x4(_mm512_set1_epi32(0), _mm256_set1_epi32(4), 1);
    const __m512i i1 = _mm512_inserti64x4(_mm512_set1_epi32(1), _mm256_set1_epi32(5), 1);
    const __m512i i2 = _mm512_inserti64x4(_mm512_set1_epi32(2), _mm256_set1_epi32(6), 1);
    const __m512i i3 = _mm512_inserti64x4(_mm512_set1_epi32(3), _mm256_set1_epi32(7), 1);
    for (; r + 4 <= nrows; r += 4) {
        const void *w0 = fk_row(vw, r, rb), *w1 = fk_row(w0, 1, rb);
        const void *w2 = fk_row(w1, 1, rb), *w3 = fk_row(w2, 1, rb);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int64_t i = 0;
        const char *nxt = (const char *)w0 + 4 * rb;    /* the next 4 rows */
        for (; i + 2 <= nb; i += 2) {
            /* software prefetch of the next group, 4 x 2 blocks per step */
            for (size_t o = 0; o < 8 * q32_bsize(K); o += 64)
                _mm_prefetch(nxt + (size_t)i * 4 * q32_bsize(K) + o, _MM_HINT_T0);
            __m512i xq = ldq2(&x[i]), seed = q8_seed2(xq);
            uint32_t xd = (uint32_t)x[i].d | (uint32_t)x[i + 1].d << 16;
            __m256 dx = _mm256_cvtph_ps(_mm_shuffle_epi8(_mm_cvtsi32_si128((int)xd),
                _mm_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3)));
            __m512 d8 = _mm512_castps256_ps512(_mm256_mul_ps(q32_ws8(K, w0, w1, w2, w3, i), dx));
            a0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(seed, q32_wu2(K, w0, i), xq)),
                                 _mm512_permutexvar_ps(i0, d8), a0);
            a1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(seed, q32_wu2(K, w1, i), xq)),
                                 _mm512_permutexvar_ps(i1, d8), a1);
            a2 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(seed, q32_wu2(K, w2, i), xq)),
                                 _mm512_permutexvar_ps(i2, d8), a2);
            a3 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(seed, q32_wu2(K, w3, i), xq)),
                                 _mm512_permutexvar_ps(i3, d8), a3);
        }
        __m256 b0 = _mm256_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;
        if (i < nb) {
            __m256i xq = ldq(&x[i]), seed = q8_seed(xq);
            float dx = _cvtsh_ss(x[i].d);
            b0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(seed, q32_wu(K, w0, i), xq)),
                               _mm256_set1_ps(q32_ws(K, w0, i) * dx));
            b1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(seed, q32_wu(K, w1, i), xq)),
                               _mm256_set1_ps(q32_ws(K, w1, i) * dx));
            b2 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(seed, q32_wu(K, w2, i), xq)),
                               _mm256_set1_ps(q32_ws(K, w2, i) * dx));
            b3 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_dpbusd_epi32(seed, q32_wu(K, w3, i), xq)),
                               _mm256_set1_ps(q32_ws(K, w3, i) * dx));
        }
        y[r] = _mm512_reduce_add_ps(a0) + hsum8(b0);
        y[r + 1] = _mm512_reduce_add_ps(a1) + hsum8(b1);
        y[r + 2] = _mm512_reduce_add_ps(a2) + hsum8(b2);
        y[r + 3] = _mm512_reduce_add_ps(a3) + hsum8(b3);
    }
    for (; r < nrows; r++) vec_dot(n, &y[r], fk_row(vw, r, rb), x);
}

GEMV_ENTRIES(q8_0, q32, Q32_Q8_0)
GEMV_ENTRIES(mxfp4, q32, Q32_MXFP4)

/* ---- activation quantizers (bit-exact with quant/quant.c) ----------------------- */

static void quantize_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void quantize_f16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(y + i, m, h);
    }
}

/* Integer round-to-nearest-even (vcvtneps2bf16 would flush subnormals). */
static void quantize_bf16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : tail16(n - i);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
        __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_and_si512(hi, one), bias));
        r = _mm512_srli_epi32(r, 16);
        __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x40));
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtepi32_epi16(r));
    }
}

/* roundf(): ties away from zero (see kernels/x86/avx2.c). */
static inline __m512i round_away16(__m512 v) {
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_abs_ps(_mm512_sub_ps(v, t));
    __mmask16 step = _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512i sgn = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u));
    __m512 one = _mm512_castsi512_ps(_mm512_or_si512(sgn, _mm512_castps_si512(_mm512_set1_ps(1.0f))));
    return _mm512_cvtps_epi32(_mm512_mask_add_ps(t, step, t, one));
}

static void quantize_q8_0(const float *x, void *vy, int64_t n) {
    pk_block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / PK_QK8_0; b++) {
        const float *p = x + b * PK_QK8_0;
        __m512 v0 = _mm512_loadu_ps(p), v1 = _mm512_loadu_ps(p + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = pk_fp32_to_fp16(d);
        __m512 vid = _mm512_set1_ps(id);
        __m128i q0 = _mm512_cvtsepi32_epi8(round_away16(_mm512_mul_ps(v0, vid)));
        __m128i q1 = _mm512_cvtsepi32_epi8(round_away16(_mm512_mul_ps(v1, vid)));
        _mm_storeu_si128((__m128i *)y[b].qs, q0);
        _mm_storeu_si128((__m128i *)(y[b].qs + 16), q1);
    }
}

/* ---- block-quantized types (shared 256-bit code, this file's flags) ------- */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"   /* quantize_q8_0_x: it has its own */
#include "kernels/x86/quant_ops.h"
#pragma GCC diagnostic pop
#include "kernels/x86/avx512_levels.h"
#include "kernels/x86/avx512_kquant.h"

const pk_kernels pk_kernels_avx512_table = {
    .isa = "avx512",
    .sgemm = sgemm,
    .exp_sub = exp_sub,
    .silu_mul = silu_mul,
    .vec_dot = {
        [PK_TYPE_F32] = vec_dot_f32, [PK_TYPE_F16] = vec_dot_f16,
        [PK_TYPE_BF16] = vec_dot_bf16, [PK_TYPE_Q8_0] = vec_dot_q8_0,
        [PK_TYPE_MXFP4] = vec_dot_mxfp4,
        KQ_VEC_DOT_ENTRIES
    },
    .gemv = {
        [PK_TYPE_F32] = gemv_f32, [PK_TYPE_F16] = gemv_f16,
        [PK_TYPE_BF16] = gemv_bf16, [PK_TYPE_Q8_0] = gemv_q8_0,
        [PK_TYPE_MXFP4] = gemv_mxfp4,
        KQ_GEMV_ENTRIES
    },
    .quantize = {
        [PK_TYPE_F32] = quantize_f32, [PK_TYPE_F16] = quantize_f16,
        [PK_TYPE_BF16] = quantize_bf16, [PK_TYPE_Q8_0] = quantize_q8_0,
        QX_QUANTIZE_ENTRIES
    },
};

#else  /* compiler without these ISA extensions: an empty table, never selected */
const pk_kernels pk_kernels_avx512_table = { .isa = "avx512" };
#endif
