/* kernels_ref.c - the scalar reference kernel table.
 *
 * Tuned for: nothing but clarity and portability. It defines the expected
 * result of each kernel (the SIMD tables are tested against it) and is the
 * fallback for any entry an ISA table leaves NULL. Sums run strictly left to
 * right in float (Q8_0: exact int32 per block, then one float FMA-free
 * multiply-add per block).
 */
#include <string.h>
#include "kernels.h"

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *x) {
    const float *a = w, *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += a[i] * b[i];
    *s = sum;
}

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += pk_fp16_to_fp32(a[i]) * pk_fp16_to_fp32(b[i]);
    *s = sum;
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w, *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n; i++) sum += pk_bf16_to_fp32(a[i]) * pk_bf16_to_fp32(b[i]);
    *s = sum;
}

static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_q8_0 *a = w, *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK8_0; i++) {
        int32_t isum = 0;
        for (int j = 0; j < PK_QK8_0; j++) isum += (int32_t)a[i].qs[j] * b[i].qs[j];
        sum += (float)isum * (pk_fp16_to_fp32(a[i].d) * pk_fp16_to_fp32(b[i].d));
    }
    *s = sum;
}

#define GEMV_BY_VEC_DOT(name, dot)                                           \
    static void name(int64_t n, int64_t nrows, float *y, const void *w,      \
                     size_t row_bytes, const void *x) {                      \
        for (int64_t r = 0; r < nrows; r++)                                  \
            dot(n, &y[r], (const char *)w + (size_t)r * row_bytes, x);       \
    }
GEMV_BY_VEC_DOT(gemv_f32, vec_dot_f32)
GEMV_BY_VEC_DOT(gemv_f16, vec_dot_f16)
GEMV_BY_VEC_DOT(gemv_bf16, vec_dot_bf16)
GEMV_BY_VEC_DOT(gemv_q8_0, vec_dot_q8_0)

/* Activation conversions are the reference from_float of each type. */
static void quantize_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}
static void quantize_f16(const float *x, void *y, int64_t n) {
    pk_type_get(PK_TYPE_F16)->from_float(x, y, n);
}
static void quantize_bf16(const float *x, void *y, int64_t n) {
    pk_type_get(PK_TYPE_BF16)->from_float(x, y, n);
}
static void quantize_q8_0(const float *x, void *y, int64_t n) {
    pk_type_get(PK_TYPE_Q8_0)->from_float(x, y, n);
}

const pk_kernels pk_kernels_ref_table = {
    .isa = "ref",
    .vec_dot = {
        [PK_TYPE_F32] = vec_dot_f32, [PK_TYPE_F16] = vec_dot_f16,
        [PK_TYPE_BF16] = vec_dot_bf16, [PK_TYPE_Q8_0] = vec_dot_q8_0,
    },
    .gemv = {
        [PK_TYPE_F32] = gemv_f32, [PK_TYPE_F16] = gemv_f16,
        [PK_TYPE_BF16] = gemv_bf16, [PK_TYPE_Q8_0] = gemv_q8_0,
    },
    .quantize = {
        [PK_TYPE_F32] = quantize_f32, [PK_TYPE_F16] = quantize_f16,
        [PK_TYPE_BF16] = quantize_bf16, [PK_TYPE_Q8_0] = quantize_q8_0,
    },
};
