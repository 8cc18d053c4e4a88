/* kernels/gelu.c - ggml's FP16-table GELU (see kernels/gelu.h): a 65536-entry table of
 * float results, one per fp16 bit pattern, made once on first use. */
#include <math.h>
#include <pthread.h>
#include "kernels/gelu.h"
#include "quant/quant.h"

static float gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

/* ggml_gelu_f32's expression in float32, operation by operation (-std=c11:
   no contraction into fused multiply-adds) */
static float gelu_f32(float x) {
    const float a = 0.044715f, s = 0.79788456080286535587989211986876f;
    return 0.5f * x * (1.0f + tanhf(s * x * (1.0f + a * x * x)));
}

static void gelu_init(void) {
    for (uint32_t h = 0; h < (1u << 16); h++)
        gelu_table[h] = pk_fp16_to_fp32(pk_fp32_to_fp16(gelu_f32(pk_fp16_to_fp32((uint16_t)h))));
}

const float *pk_gelu_table(void) {
    pthread_once(&gelu_once, gelu_init);
    return gelu_table;
}

float pk_gelu_fp16(float x) {
    pthread_once(&gelu_once, gelu_init);
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return gelu_table[pk_fp32_to_fp16(x)];
}

void pk_gelu_mul(float *g, const float *u, int64_t n) {
    pthread_once(&gelu_once, gelu_init);
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i];
        g[i] = x <= -10.0f ? 0.0f : x >= 10.0f ? x * u[i] : gelu_table[pk_fp32_to_fp16(x)] * u[i];
    }
}
