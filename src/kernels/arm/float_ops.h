/* kernels/arm/float_ops.h - the float kernels of the AArch64 tables: F32 / F16 /
 * BF16 vec_dot and 4-row gemv, F32 sgemm, exp_sub, silu_mul and the F16 /
 * BF16 activation conversions. Not a translation unit: included by
 * kernels/arm/neon.c and kernels/arm/dotprod.c inside their ISA guards (after
 * <arm_neon.h>), so each table gets a copy built with its own flags.
 *
 * Tuned for: single-token decode. The gemvs run 4 rows side by side over the
 * same 8 activations (converted to f32 once for the 4 rows), 2 accumulators
 * per row. F16 is widened to f32 (fcvtl) in both tables: fp16 arithmetic
 * (fmla .8h) would round every partial sum to 11 bits, far outside the
 * tests' float tolerance.
 *
 * Numerics: float sums are reassociated (4 lanes x 2 accumulators per row,
 * fused multiply-adds), so results differ from the reference by rounding
 * only. sgemm keeps the reference contract exactly: every C element is one
 * fused multiply-add chain in order of k starting from 0 (vector lanes and
 * the scalar column tail both use fma), so a row's result is the same bit
 * for bit whatever M and N are. exp: 2^k e^r with a degree-6 polynomial,
 * relative error below 3e-7. F16 conversion is fcvtn (round to nearest
 * even, subnormals kept, NaN quieted with its top payload bits - the
 * reference's rules, bit for bit, under Linux's default FPCR); BF16 is the
 * reference's integer rounding.
 */

#define QF_INLINE static inline __attribute__((always_inline))

QF_INLINE float qa_h2f(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, 2);
    return (float)f;
}

/* ---- the element types, as compile-time kinds --------------------------- */

enum { QF_F32, QF_F16, QF_BF16 };

/* elements i + o .. i + o + 7 of p (kind K) as two float32x4 */
QF_INLINE void qf_ld8(const int K, const void *p, int64_t i, const int o, float32x4_t *a, float32x4_t *b) {
    if (K == QF_F32) {
        const float *f = (const float *)p + i + o;
        *a = vld1q_f32(f);
        *b = vld1q_f32(f + 4);
    } else if (K == QF_F16) {
        float16x8_t h = vreinterpretq_f16_u16(vld1q_u16((const uint16_t *)p + i + o));
        *a = vcvt_f32_f16(vget_low_f16(h));
        *b = vcvt_high_f32_f16(h);
    } else {
        uint16x8_t h = vld1q_u16((const uint16_t *)p + i + o);
        *a = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        *b = vreinterpretq_f32_u32(vshll_high_n_u16(h, 16));
    }
}

/* element i of p (kind K) as a float */
QF_INLINE float qf_ld1(const int K, const void *p, int64_t i) {
    if (K == QF_F32) return ((const float *)p)[i];
    if (K == QF_F16) return qa_h2f(((const uint16_t *)p)[i]);
    return pk_bf16_to_fp32(((const uint16_t *)p)[i]);
}

/* ---- vec_dot and 4-row gemv of the float-like types (block size 1) ------- */

/* 16 elements per step, then 8, then scalars */
QF_INLINE void qf_vec_dot(const int K, int64_t n, float *s, const void *w, const void *x) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float32x4_t w0, w1, w2, w3, x0, x1, x2, x3;
        qf_ld8(K, w, i, 0, &w0, &w1); qf_ld8(K, w, i, 8, &w2, &w3);
        qf_ld8(K, x, i, 0, &x0, &x1); qf_ld8(K, x, i, 8, &x2, &x3);
        a0 = vfmaq_f32(a0, w0, x0); a1 = vfmaq_f32(a1, w1, x1);
        a2 = vfmaq_f32(a2, w2, x2); a3 = vfmaq_f32(a3, w3, x3);
    }
    for (; i + 8 <= n; i += 8) {
        float32x4_t w0, w1, x0, x1;
        qf_ld8(K, w, i, 0, &w0, &w1); qf_ld8(K, x, i, 0, &x0, &x1);
        a0 = vfmaq_f32(a0, w0, x0); a1 = vfmaq_f32(a1, w1, x1);
    }
    float sum = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) sum += qf_ld1(K, w, i) * qf_ld1(K, x, i);
    *s = sum;
}

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *x) { qf_vec_dot(QF_F32, n, s, w, x); }
static void vec_dot_f16(int64_t n, float *s, const void *w, const void *x) { qf_vec_dot(QF_F16, n, s, w, x); }
static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *x) { qf_vec_dot(QF_BF16, n, s, w, x); }

/* 4 rows at a time over the same 8 activations, 2 accumulators per row;
 * the last rows one at a time by the kind's vec_dot */
QF_INLINE void qf_gemv(const int K, int64_t n, int64_t nrows, float *y, const void *vw, size_t rb,
                       const void *x) {
    const pk_vec_dot_fn dot = K == QF_F32 ? vec_dot_f32 : K == QF_F16 ? vec_dot_f16 : vec_dot_bf16;
    int64_t r = 0;
    for (; r + 4 <= nrows; r += 4) {
        const void *w0 = (const char *)vw + (size_t)r * rb;
        const void *w1 = (const char *)w0 + rb;
        const void *w2 = (const char *)w1 + rb;
        const void *w3 = (const char *)w2 + rb;
        float32x4_t a0 = vdupq_n_f32(0), b0 = a0, a1 = a0, b1 = a0;
        float32x4_t a2 = a0, b2 = a0, a3 = a0, b3 = a0;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            float32x4_t x0, x1, u, v;
            qf_ld8(K, x, i, 0, &x0, &x1);
            qf_ld8(K, w0, i, 0, &u, &v); a0 = vfmaq_f32(a0, u, x0); b0 = vfmaq_f32(b0, v, x1);
            qf_ld8(K, w1, i, 0, &u, &v); a1 = vfmaq_f32(a1, u, x0); b1 = vfmaq_f32(b1, v, x1);
            qf_ld8(K, w2, i, 0, &u, &v); a2 = vfmaq_f32(a2, u, x0); b2 = vfmaq_f32(b2, v, x1);
            qf_ld8(K, w3, i, 0, &u, &v); a3 = vfmaq_f32(a3, u, x0); b3 = vfmaq_f32(b3, v, x1);
        }
        float s0 = vaddvq_f32(vaddq_f32(a0, b0)), s1 = vaddvq_f32(vaddq_f32(a1, b1));
        float s2 = vaddvq_f32(vaddq_f32(a2, b2)), s3 = vaddvq_f32(vaddq_f32(a3, b3));
        for (; i < n; i++) {
            float xi = qf_ld1(K, x, i);
            s0 += qf_ld1(K, w0, i) * xi; s1 += qf_ld1(K, w1, i) * xi;
            s2 += qf_ld1(K, w2, i) * xi; s3 += qf_ld1(K, w3, i) * xi;
        }
        y[r] = s0; y[r + 1] = s1; y[r + 2] = s2; y[r + 3] = s3;
    }
    for (; r < nrows; r++) dot(n, &y[r], (const char *)vw + (size_t)r * rb, x);
}

static void gemv_f32(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) {
    qf_gemv(QF_F32, n, nrows, y, w, rb, x);
}
static void gemv_f16(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) {
    qf_gemv(QF_F16, n, nrows, y, w, rb, x);
}
static void gemv_bf16(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) {
    qf_gemv(QF_BF16, n, nrows, y, w, rb, x);
}

/* ---- F32 matrix product (attention) ---------------------------------------- */

/* R rows (R <= 4) x 4 * NV columns of C; C element = fma chain in k order */
QF_INLINE void sgemm_tile(const int R, const int NV, int K, const float *A, int64_t lda,
                          const float *B, int64_t ldb, float *C, int64_t ldc) {
    float32x4_t acc[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NV; j++) acc[r][j] = vdupq_n_f32(0);
    for (int k = 0; k < K; k++) {
        float32x4_t b[4];
        for (int j = 0; j < NV; j++) b[j] = vld1q_f32(B + (int64_t)k * ldb + 4 * j);
        for (int r = 0; r < R; r++) {
            float a = A[r * lda + k];
            for (int j = 0; j < NV; j++) acc[r][j] = vfmaq_n_f32(acc[r][j], b[j], a);
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < NV; j++) vst1q_f32(C + r * ldc + 4 * j, acc[r][j]);
}

/* one column, R rows, scalar fma in k order (the same chain as a lane above) */
QF_INLINE void sgemm_col(const int R, int K, const float *A, int64_t lda, const float *B,
                         int64_t ldb, float *C, int64_t ldc) {
    float s[4] = {0, 0, 0, 0};
    for (int k = 0; k < K; k++) {
        float b = B[(int64_t)k * ldb];
        for (int r = 0; r < R; r++) s[r] = fmaf(A[r * lda + k], b, s[r]);
    }
    for (int r = 0; r < R; r++) C[r * ldc] = s[r];
}

QF_INLINE void sgemm_rows(const int R, int N, int K, const float *A, int64_t lda, const float *B,
                          int64_t ldb, float *C, int64_t ldc) {
    int n = 0;
    for (; n + 16 <= N; n += 16) sgemm_tile(R, 4, K, A, lda, B + n, ldb, C + n, ldc);
    for (; n + 4 <= N; n += 4) sgemm_tile(R, 1, K, A, lda, B + n, ldb, C + n, ldc);
    for (; n < N; n++) sgemm_col(R, K, A, lda, B + n, ldb, C + n, ldc);
}

static void sgemm(int M, int N, int K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                  int64_t ldc) {
    int m = 0;
    for (; m + 4 <= M; m += 4) sgemm_rows(4, N, K, A + m * lda, lda, B, ldb, C + m * ldc, ldc);
    switch (M - m) {
    case 3: sgemm_rows(3, N, K, A + m * lda, lda, B, ldb, C + m * ldc, ldc); break;
    case 2: sgemm_rows(2, N, K, A + m * lda, lda, B, ldb, C + m * ldc, ldc); break;
    case 1: sgemm_rows(1, N, K, A + m * lda, lda, B, ldb, C + m * ldc, ldc); break;
    default: break;
    }
}

/* ---- exp, SwiGLU ------------------------------------------------------------
 * exp(x) = 2^k e^r, k = round(x / ln 2), r = x - k ln 2 (ln 2 in two parts),
 * e^r by its degree-6 Taylor polynomial (|r| <= ln 2 / 2); 2^k as two
 * normal powers 2^(k>>1) 2^(k-(k>>1)) so k in [-150, 128] needs no special
 * case. x below -104 gives 0, above 88.72284 +inf, NaN stays NaN. */
QF_INLINE float32x4_t qa_exp4(float32x4_t x) {
    const float32x4_t lo = vdupq_n_f32(-104.0f), hi = vdupq_n_f32(88.72284f);
    float32x4_t xc = vminq_f32(vmaxq_f32(x, lo), hi);
    float32x4_t k = vrndnq_f32(vmulq_n_f32(xc, 1.44269504f));
    float32x4_t r = vfmsq_f32(xc, k, vdupq_n_f32(0.693145752f));
    r = vfmsq_f32(r, k, vdupq_n_f32(1.42860677e-6f));
    float32x4_t p = vdupq_n_f32(1.0f / 720);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t ki = vcvtq_s32_f32(k);
    int32x4_t k1 = vshrq_n_s32(ki, 1), k2 = vsubq_s32(ki, k1);
    float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k1, vdupq_n_s32(127)), 23));
    float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(k2, vdupq_n_s32(127)), 23));
    float32x4_t y = vmulq_f32(vmulq_f32(p, s1), s2);
    y = vbslq_f32(vcltq_f32(x, lo), vdupq_n_f32(0.0f), y);
    y = vbslq_f32(vcgtq_f32(x, hi), vdupq_n_f32(INFINITY), y);
    return vbslq_f32(vceqq_f32(x, x), y, x);
}

static void exp_sub(float *x, int64_t n, float sub) {
    const float32x4_t s = vdupq_n_f32(sub);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, qa_exp4(vsubq_f32(vld1q_f32(x + i), s)));
    if (i < n) {
        float t[4] = {0, 0, 0, 0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        vst1q_f32(t, qa_exp4(vsubq_f32(vld1q_f32(t), s)));
        memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
    }
}

/* tanh(y) as kernels/x86/avx2_gemm.c's tanh8: the odd polynomial below 0.625,
 * sign(y) (1 - 2 / (e^(2|y|) + 1)) above, both on |y| and then y's sign;
 * NaN stays NaN, -0 stays -0 */
QF_INLINE float32x4_t qa_tanh4(float32x4_t y) {
    const float32x4_t one = vdupq_n_f32(1.0f), a = vabsq_f32(y), z = vmulq_f32(y, y);
    float32x4_t p = vdupq_n_f32(-5.69198560e-3f);
    p = vfmaq_f32(vdupq_n_f32(2.06262916e-2f), p, z);
    p = vfmaq_f32(vdupq_n_f32(-5.37353195e-2f), p, z);
    p = vfmaq_f32(vdupq_n_f32(1.33313820e-1f), p, z);
    p = vfmaq_f32(vdupq_n_f32(-3.33332807e-1f), p, z);
    const float32x4_t small = vfmaq_f32(a, vmulq_f32(p, z), a);
    const float32x4_t e = qa_exp4(vaddq_f32(a, a));
    const float32x4_t big = vsubq_f32(one, vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, one)));
    const float32x4_t t = vbslq_f32(vcltq_f32(a, vdupq_n_f32(0.625f)), small, big);
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(t),   /* tanh(|y|), y's sign */
                                           vandq_u32(vreinterpretq_u32_f32(y), vdupq_n_u32(0x80000000u))));
}

static void softcap(float *x, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_n_f32(qa_tanh4(vmulq_n_f32(vld1q_f32(x + i), inv)), cap));
    if (i < n) {
        float t[4] = {0, 0, 0, 0};
        memcpy(t, x + i, (size_t)(n - i) * sizeof(float));
        vst1q_f32(t, vmulq_n_f32(qa_tanh4(vmulq_n_f32(vld1q_f32(t), inv)), cap));
        memcpy(x + i, t, (size_t)(n - i) * sizeof(float));
    }
}

QF_INLINE float32x4_t qa_silu_mul4(float32x4_t g, float32x4_t u) {
    float32x4_t e = qa_exp4(vnegq_f32(g));
    return vmulq_f32(vdivq_f32(g, vaddq_f32(vdupq_n_f32(1.0f), e)), u);
}

static void silu_mul(float *g, const float *u, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(g + i, qa_silu_mul4(vld1q_f32(g + i), vld1q_f32(u + i)));
    if (i < n) {
        float t[4] = {0, 0, 0, 0}, v[4] = {0, 0, 0, 0};
        memcpy(t, g + i, (size_t)(n - i) * sizeof(float));
        memcpy(v, u + i, (size_t)(n - i) * sizeof(float));
        vst1q_f32(t, qa_silu_mul4(vld1q_f32(t), vld1q_f32(v)));
        memcpy(g + i, t, (size_t)(n - i) * sizeof(float));
    }
}

/* ---- F32 / F16 / BF16 activations (bit-exact with quant/quant.c) -------------------- */

static void quantize_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void quantize_f16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        float16x8_t h = vcvt_high_f16_f32(vcvt_f16_f32(vld1q_f32(x + i)), vld1q_f32(x + i + 4));
        vst1q_u16(y + i, vreinterpretq_u16_f16(h));
    }
    for (; i < n; i++) y[i] = pk_fp32_to_fp16(x[i]);
}

/* round to nearest even by integer arithmetic, NaN made quiet (as quant/quant.c) */
QF_INLINE uint16x4_t qa_bf16_round4(float32x4_t v) {
    uint32x4_t u = vreinterpretq_u32_f32(v);
    uint32x4_t bias = vaddq_u32(vandq_u32(vshrq_n_u32(u, 16), vdupq_n_u32(1)), vdupq_n_u32(0x7fff));
    uint16x4_t r = vaddhn_u32(u, bias);
    uint16x4_t q = vorr_u16(vshrn_n_u32(u, 16), vdup_n_u16(0x40));
    return vbsl_u16(vmovn_u32(vceqq_f32(v, v)), r, q);
}

static void quantize_bf16(const float *x, void *vy, int64_t n) {
    uint16_t *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        vst1q_u16(y + i, vcombine_u16(qa_bf16_round4(vld1q_f32(x + i)), qa_bf16_round4(vld1q_f32(x + i + 4))));
    for (; i < n; i++) y[i] = pk_fp32_to_bf16(x[i]);
}
