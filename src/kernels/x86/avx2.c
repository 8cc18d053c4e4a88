/* kernels/x86/avx2.c - the AVX2 + FMA + F16C kernel table (Haswell and later,
 * Zen 1 and later). Compiled with -mavx2 -mfma -mf16c (see the Makefile);
 * only called after kernels/kernels.c has checked the CPU.
 *
 * Tuned for: single-token decode, where a gemv streams each weight matrix from
 * DRAM once per token. The float gemvs (F32, F16, BF16, here) take 4 rows at
 * a time so one activation load (and conversion) feeds 4 weight streams, and
 * keep 2 independent accumulators per row so FMA latency never stalls the
 * loads (no software prefetch: a 4-row group of float rows is larger than
 * L1 and the hardware prefetcher follows these long streams). The
 * block-quantized gemvs (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4,
 * Q2_K..Q6_K, IQ4_XS, IQ2_XXS, IQ2_XS) come from one 4-row driver with software prefetch in
 * kernels/x86/avx2_gemv.h (see its header for their tuning and numerics).
 *
 * Numerics: float sums are reassociated (8 lanes x several accumulators), so
 * results differ from the reference by rounding only. Block products are
 * exact int32 per block, provided activations are in [-127, 127] (what every
 * Q8 quantizer produces); Q8_0 weights may use the full int8 range.
 * Activation quantizers are bit-exact with the reference for finite input
 * (Q8_0, Q8_K and Q8_1 from kernels/x86/quant_ops.h, shared with AVX-512).
 */
#include <string.h>
#include "kernels/gelu.h"
#include "kernels/kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- the float types: vec_dot and 4-row gemv --------------------------- */

#define FL_INLINE static inline __attribute__((always_inline))

enum { FL_F32, FL_F16, FL_BF16 };   /* the element type of a float kernel */

FL_INLINE size_t fl_size(const int T) { return T == FL_F32 ? sizeof(float) : sizeof(uint16_t); }

/* elements i .. i + 7 of p (of type T) as floats */
FL_INLINE __m256 fl_ld8(const int T, const void *p, int64_t i) {
    const char *e = (const char *)p + (size_t)i * fl_size(T);
    if (T == FL_F32) return _mm256_loadu_ps((const float *)e);
    if (T == FL_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e));
    __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)e));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
/* element i of p as a float (the scalar tails) */
FL_INLINE float fl_ld1(const int T, const void *p, int64_t i) {
    if (T == FL_F32) return ((const float *)p)[i];
    if (T == FL_F16) return _cvtsh_ss(((const uint16_t *)p)[i]);
    return pk_bf16_to_fp32(((const uint16_t *)p)[i]);
}

/* vec_dot for element type T (block size 1). Main loop: 32 elements, 4
 * accumulators; then 8 at a time; then scalars. */
FL_INLINE void fl_vec_dot(const int T, int64_t n, float *s, const void *w, const void *x) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(fl_ld8(T, w, i), fl_ld8(T, x, i), a0);
        a1 = _mm256_fmadd_ps(fl_ld8(T, w, i + 8), fl_ld8(T, x, i + 8), a1);
        a2 = _mm256_fmadd_ps(fl_ld8(T, w, i + 16), fl_ld8(T, x, i + 16), a2);
        a3 = _mm256_fmadd_ps(fl_ld8(T, w, i + 24), fl_ld8(T, x, i + 24), a3);
    }
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(fl_ld8(T, w, i), fl_ld8(T, x, i), a0);
    float sum = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) sum += fl_ld1(T, w, i) * fl_ld1(T, x, i);
    *s = sum;
}

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *x) { fl_vec_dot(FL_F32, n, s, w, x); }
static void vec_dot_f16(int64_t n, float *s, const void *w, const void *x) { fl_vec_dot(FL_F16, n, s, w, x); }
static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *x) { fl_vec_dot(FL_BF16, n, s, w, x); }

/* 4-row gemv for element type T: 16 elements per step, 2 accumulators per
 * row; then 8 at a time; then scalars; the row tail by vd, T's vec_dot */
FL_INLINE void fl_gemv(const int T, pk_vec_dot_fn vd, int64_t n, int64_t nrows, float *y, const void *vw,
                       size_t rb, const void *x) {
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        const char *w0 = (const char *)vw + (size_t)r * rb, *w1 = w0 + rb, *w2 = w1 + rb, *w3 = w2 + rb;
        __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0;
        __m256 a2 = a0, b2 = a0, a3 = a0, b3 = a0;
        int64_t i = 0;
        for (; i + 16 <= n; i += 16) {
            __m256 x0 = fl_ld8(T, x, i), x1 = fl_ld8(T, x, i + 8);
            a0 = _mm256_fmadd_ps(fl_ld8(T, w0, i), x0, a0);
            b0 = _mm256_fmadd_ps(fl_ld8(T, w0, i + 8), x1, b0);
            a1 = _mm256_fmadd_ps(fl_ld8(T, w1, i), x0, a1);
            b1 = _mm256_fmadd_ps(fl_ld8(T, w1, i + 8), x1, b1);
            a2 = _mm256_fmadd_ps(fl_ld8(T, w2, i), x0, a2);
            b2 = _mm256_fmadd_ps(fl_ld8(T, w2, i + 8), x1, b2);
            a3 = _mm256_fmadd_ps(fl_ld8(T, w3, i), x0, a3);
            b3 = _mm256_fmadd_ps(fl_ld8(T, w3, i + 8), x1, b3);
        }
        for (; i + 8 <= n; i += 8) {
            __m256 x0 = fl_ld8(T, x, i);
            a0 = _mm256_fmadd_ps(fl_ld8(T, w0, i), x0, a0);
            a1 = _mm256_fmadd_ps(fl_ld8(T, w1, i), x0, a1);
            a2 = _mm256_fmadd_ps(fl_ld8(T, w2, i), x0, a2);
            a3 = _mm256_fmadd_ps(fl_ld8(T, w3, i), x0, a3);
        }
        float s0 = hsum8(_mm256_add_ps(a0, b0)), s1 = hsum8(_mm256_add_ps(a1, b1));
        float s2 = hsum8(_mm256_add_ps(a2, b2)), s3 = hsum8(_mm256_add_ps(a3, b3));
        for (; i < n; i++) {
            float xi = fl_ld1(T, x, i);
            s0 += fl_ld1(T, w0, i) * xi; s1 += fl_ld1(T, w1, i) * xi;
            s2 += fl_ld1(T, w2, i) * xi; s3 += fl_ld1(T, w3, i) * xi;
        }
        y[r] = s0; y[r + 1] = s1; y[r + 2] = s2; y[r + 3] = s3;
    }
    for (; r < nrows; r++)
        vd(n, &y[r], (const char *)vw + (size_t)r * rb, x);
}

static void gemv_f32(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) {
    fl_gemv(FL_F32, vec_dot_f32, n, nrows, y, w, rb, x);
}
static void gemv_f16(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) {
    fl_gemv(FL_F16, vec_dot_f16, n, nrows, y, w, rb, x);
}
static void gemv_bf16(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) {
    fl_gemv(FL_BF16, vec_dot_bf16, n, nrows, y, w, rb, x);
}

/* ---- activation quantizers (bit-exact with quant/quant.c) ----------------------- */

static void quantize_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void quantize_f16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = pk_fp32_to_fp16(x[i]);
}

/* Round-to-nearest-even by integer arithmetic (as quant/quant.c), NaN made quiet. */
static inline __m256i bf16_round8(__m256 v) {
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(r, q, nan);
}

static void quantize_bf16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i lo = bf16_round8(_mm256_loadu_ps(x + i));
        __m256i hi = bf16_round8(_mm256_loadu_ps(x + i + 8));
        __m256i p = _mm256_packus_epi32(lo, hi);        /* lane-interleaved */
        p = _mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(y + i), p);
    }
    for (; i < n; i++) y[i] = pk_fp32_to_bf16(x[i]);
}

/* ---- GELU: ggml's FP16 table (kernels/gelu.h), 8 lanes ---------------------------
 * The input rounded to fp16 by vcvtps2ph (to nearest even, NaN kept quiet
 * with its upper payload: pk_fp32_to_fp16's rounding), the table entry
 * gathered, the cut-offs blended in: bitwise pk_gelu_mul. */
static void gelu_mul(float *g, const float *u, int64_t n) {
    const float *tab = pk_gelu_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256i h = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
        __m256 t = _mm256_i32gather_ps(tab, h, 4);
        t = _mm256_blendv_ps(t, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));             /* x >= 10: x * u */
        t = _mm256_mul_ps(t, _mm256_loadu_ps(u + i));
        _mm256_storeu_ps(g + i, _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LE_OQ), t));   /* x <= -10: 0 */
    }
    if (i < n) pk_gelu_mul(g + i, u + i, n - i);
}

/* ---- block-quantized types ------------------------------------------------ */

/* the Q8_0 / Q8_K / Q8_1 activation quantizers (shared with the AVX-512
 * table); its block kernels are replaced by kernels/x86/avx2_gemv.h */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kernels/x86/quant_ops.h"
#pragma GCC diagnostic pop
#include "kernels/x86/avx2_gemv.h"

const pk_kernels pk_kernels_avx2_table = {
    .isa = "avx2",
    .sgemm = pk_avx2_sgemm,
    .exp_sub = pk_avx2_exp_sub,
    .silu_mul = pk_avx2_silu_mul,
    .gelu_mul = gelu_mul,
    .softcap = pk_avx2_softcap,
    .vec_dot = {
        [PK_TYPE_F32] = vec_dot_f32, [PK_TYPE_F16] = vec_dot_f16,
        [PK_TYPE_BF16] = vec_dot_bf16,
        GV_VEC_DOT_ENTRIES
    },
    .gemv = {
        [PK_TYPE_F32] = gemv_f32, [PK_TYPE_F16] = gemv_f16,
        [PK_TYPE_BF16] = gemv_bf16,
        GV_GEMV_ENTRIES
    },
    .quantize = {
        [PK_TYPE_F32] = quantize_f32, [PK_TYPE_F16] = quantize_f16,
        [PK_TYPE_BF16] = quantize_bf16, [PK_TYPE_Q8_0] = quantize_q8_0_x,
        QX_QUANTIZE_ENTRIES
    },
};

#else  /* compiler without AVX2: an empty table, never selected */
const pk_kernels pk_kernels_avx2_table = { .isa = "avx2" };
#endif
