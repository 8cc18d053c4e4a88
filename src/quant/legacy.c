/* quant/legacy.c - the 32-element "legacy" formats Q4_0, Q4_1, Q5_0, Q5_1 and
 * the Q8_1 activation format: scalar reference dequantize and quantize.
 *
 * Tuned for: nothing - these define the formats. The quantizers reproduce
 * ggml's quantize_row_<type>_ref byte for byte (same scale choice, same float
 * operations in the same order, same truncating conversions) so files we
 * write are interchangeable with llama.cpp's.
 *
 * Importance weights: the pk_quantize_* entry points accept `imp` but ignore
 * it for now (ggml's weighted quantize_row_<type>_impl is not yet ported), so
 * with or without imp they produce the _ref bytes.
 */
#include <float.h>
#include <math.h>
#include <string.h>
#include "quant/quant.h"

/* (int)v truncated toward zero and clamped to [lo, hi]; NaN gives lo. For v
 * inside [lo, hi + 1) this is the plain C conversion ggml uses. */
static inline int trunc_clamp(float v, int lo, int hi) {
    if (!(v >= (float)lo)) return lo;
    if (v >= (float)hi) return hi;
    return (int)v;
}

/* ---- Q4_0 ----------------------------------------------------------------- */

void pk_q4_0_to_float(const void *src, float *dst, int64_t n) {
    const pk_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / PK_QK4_0; i++, dst += PK_QK4_0) {
        float d = pk_fp16_to_fp32(b[i].d);
        for (int j = 0; j < PK_QK4_0 / 2; j++) {
            dst[j] = (float)((b[i].qs[j] & 0xF) - 8) * d;
            dst[j + PK_QK4_0 / 2] = (float)((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

/* d = (signed value of largest magnitude) / -8, so that value maps to q = 0
 * (-8) exactly; q = min(15, trunc(x / d + 8.5)). */
void pk_quantize_q4_0(const float *src, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / PK_QK4_0; i++) {
        const float *x = src + i * PK_QK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < PK_QK4_0; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        float d = max / -8;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = pk_fp32_to_fp16(d);
        for (int j = 0; j < PK_QK4_0 / 2; j++) {
            int q0 = trunc_clamp(x[j] * id + 8.5f, 0, 15);
            int q1 = trunc_clamp(x[j + PK_QK4_0 / 2] * id + 8.5f, 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void pk_q4_0_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q4_0(src, dst, n, NULL);
}

/* ---- Q4_1 ----------------------------------------------------------------- */

void pk_q4_1_to_float(const void *src, float *dst, int64_t n) {
    const pk_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / PK_QK4_1; i++, dst += PK_QK4_1) {
        float d = pk_fp16_to_fp32(b[i].d), m = pk_fp16_to_fp32(b[i].m);
        for (int j = 0; j < PK_QK4_1 / 2; j++) {
            dst[j] = (float)(b[i].qs[j] & 0xF) * d + m;
            dst[j + PK_QK4_1 / 2] = (float)(b[i].qs[j] >> 4) * d + m;
        }
    }
}

/* d = (max - min) / 15, m = min; q = min(15, trunc((x - min) / d + 0.5)). */
void pk_quantize_q4_1(const float *src, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / PK_QK4_1; i++) {
        const float *x = src + i * PK_QK4_1;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < PK_QK4_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        float d = (max - min) / 15;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = pk_fp32_to_fp16(d);
        b[i].m = pk_fp32_to_fp16(min);
        for (int j = 0; j < PK_QK4_1 / 2; j++) {
            int q0 = trunc_clamp((x[j] - min) * id + 0.5f, 0, 15);
            int q1 = trunc_clamp((x[j + PK_QK4_1 / 2] - min) * id + 0.5f, 0, 15);
            b[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void pk_q4_1_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q4_1(src, dst, n, NULL);
}

/* ---- Q5_0 ----------------------------------------------------------------- */

static inline uint32_t load_qh(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void store_qh(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

void pk_q5_0_to_float(const void *src, float *dst, int64_t n) {
    const pk_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / PK_QK5_0; i++, dst += PK_QK5_0) {
        float d = pk_fp16_to_fp32(b[i].d);
        uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < PK_QK5_0 / 2; j++) {
            int q0 = (b[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (float)(q0 - 16) * d;
            dst[j + PK_QK5_0 / 2] = (float)(q1 - 16) * d;
        }
    }
}

/* As Q4_0 with 32 levels: d = max / -16, q = min(31, trunc(x / d + 16.5)). */
void pk_quantize_q5_0(const float *src, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / PK_QK5_0; i++) {
        const float *x = src + i * PK_QK5_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < PK_QK5_0; j++)
            if (amax < fabsf(x[j])) { amax = fabsf(x[j]); max = x[j]; }
        float d = max / -16;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = pk_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < PK_QK5_0 / 2; j++) {
            int q0 = trunc_clamp(x[j] * id + 16.5f, 0, 31);
            int q1 = trunc_clamp(x[j + PK_QK5_0 / 2] * id + 16.5f, 0, 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        store_qh(b[i].qh, qh);
    }
}

void pk_q5_0_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q5_0(src, dst, n, NULL);
}

/* ---- Q5_1 ----------------------------------------------------------------- */

void pk_q5_1_to_float(const void *src, float *dst, int64_t n) {
    const pk_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / PK_QK5_1; i++, dst += PK_QK5_1) {
        float d = pk_fp16_to_fp32(b[i].d), m = pk_fp16_to_fp32(b[i].m);
        uint32_t qh = load_qh(b[i].qh);
        for (int j = 0; j < PK_QK5_1 / 2; j++) {
            int q0 = (b[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (float)q0 * d + m;
            dst[j + PK_QK5_1 / 2] = (float)q1 * d + m;
        }
    }
}

/* d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5). */
void pk_quantize_q5_1(const float *src, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / PK_QK5_1; i++) {
        const float *x = src + i * PK_QK5_1;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < PK_QK5_1; j++) {
            if (x[j] < min) min = x[j];
            if (x[j] > max) max = x[j];
        }
        float d = (max - min) / 31;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = pk_fp32_to_fp16(d);
        b[i].m = pk_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < PK_QK5_1 / 2; j++) {
            int q0 = trunc_clamp((x[j] - min) * id + 0.5f, 0, 31);
            int q1 = trunc_clamp((x[j + PK_QK5_1 / 2] - min) * id + 0.5f, 0, 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        store_qh(b[i].qh, qh);
    }
}

void pk_q5_1_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q5_1(src, dst, n, NULL);
}

/* ---- Q8_1 ----------------------------------------------------------------- */

void pk_q8_1_to_float(const void *src, float *dst, int64_t n) {
    const pk_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / PK_QK8_1; i++) {
        float d = pk_fp16_to_fp32(b[i].d);
        for (int j = 0; j < PK_QK8_1; j++) dst[i * PK_QK8_1 + j] = d * (float)b[i].qs[j];
    }
}

/* As Q8_0 (d = amax / 127, q = roundf(x / d)), plus s = fp16(sum(q) * d)
 * with the float (not fp16-rounded) d, as ggml's quantize_row_q8_1_ref. */
void pk_q8_1_from_float(const float *src, void *dst, int64_t n) {
    pk_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / PK_QK8_1; i++) {
        const float *x = src + i * PK_QK8_1;
        float amax = 0.0f;
        for (int j = 0; j < PK_QK8_1; j++) {
            float v = fabsf(x[j]);
            if (v > amax) amax = v;
        }
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = pk_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < PK_QK8_1; j++) {
            float r = roundf(x[j] * id);
            b[i].qs[j] = (int8_t)(r >= -128.0f && r <= 127.0f ? r : 0.0f);
            sum += b[i].qs[j];
        }
        b[i].s = pk_fp32_to_fp16((float)sum * d);
    }
}
