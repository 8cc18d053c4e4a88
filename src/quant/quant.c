/* quant/quant.c - the element-type table (every ggml type id, so any GGUF tensor
 * can be sized) and the scalar reference conversions of the computable types.
 *
 * Tuned for: nothing - this is the definition of each format, written for
 * clarity and exactness (it is what the SIMD kernels are tested against, and
 * what files we write must match llama.cpp bit for bit). Conversions used on
 * hot paths live in the per-ISA kernel files.
 *
 * Adding a type: declare its block struct in quant/quant.h, write a
 * <type>_to_float / <type>_from_float pair (static here, or in the family's
 * file: quant/legacy.c, quant/kquant.c, quant/iquant.c, quant/iq2.c, quant/mxfp4.c), and fill its
 * row in type_table (to_float, from_float, vec_dot_type).
 */
#include <math.h>
#include <string.h>
#include "quant/quant.h"

/* ---- scalar conversions ---------------------------------------------- */

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* Exact: every half is representable as a float. NaNs are returned quiet with
 * their payload kept (as F16C's vcvtph2ps does). */
float pk_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0) {                        /* zero or subnormal: mant * 2^-24 */
        float v = (float)mant * 0x1p-24f;
        return bits_f32(f32_bits(v) | sign);
    }
    if (exp == 31)                         /* inf, or NaN made quiet */
        return bits_f32(sign | 0x7f800000u | (mant << 13) | (mant ? 0x00400000u : 0));
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

/* Round to nearest, ties to even; overflow gives inf; subnormal halves are
 * produced exactly; NaNs stay NaN (quiet, top payload bits kept), matching
 * F16C's vcvtps2ph bit for bit. */
uint16_t pk_fp32_to_fp16(float f) {
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)                                   /* NaN */
        return (uint16_t)(sign | 0x7e00 | ((a >> 13) & 0x3ff));
    if (a >= 0x477ff000u)                  /* >= 65520: rounds to inf (or is inf) */
        return (uint16_t)(sign | 0x7c00);
    if (a >= 0x38800000u) {                /* normal half: rebias exponent 127 -> 15 */
        uint32_t h = (a - 0x38000000u) >> 13, rem = a & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
        return (uint16_t)(sign | h);
    }
    /* subnormal half or zero: count units of 2^-24 */
    uint32_t e = a >> 23;
    if (e < 102) return sign;              /* < 2^-25: rounds to zero */
    uint32_t m = (a & 0x7fffff) | 0x800000, shift = 126 - e;   /* 14..24 */
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

float pk_bf16_to_fp32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* Round to nearest even; NaN stays NaN (made quiet so truncation cannot turn
 * it into inf); subnormals are kept (not flushed). */
uint16_t pk_fp32_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* ---- reference row conversions ---------------------------------------- */

static void f32_to_float(const void *src, float *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}
static void f32_from_float(const float *src, void *dst, int64_t n) {
    memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = pk_fp16_to_fp32(s[i]);
}
static void f16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = pk_fp32_to_fp16(src[i]);
}

static void bf16_to_float(const void *src, float *dst, int64_t n) {
    const uint16_t *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = pk_bf16_to_fp32(s[i]);
}
static void bf16_from_float(const float *src, void *dst, int64_t n) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = pk_fp32_to_bf16(src[i]);
}

static void q8_0_to_float(const void *src, float *dst, int64_t n) {
    const pk_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / PK_QK8_0; i++) {
        float d = pk_fp16_to_fp32(b[i].d);
        for (int j = 0; j < PK_QK8_0; j++) dst[i * PK_QK8_0 + j] = d * (float)b[i].qs[j];
    }
}

/* As ggml's quantize_row_q8_0_ref: d = amax/127 (rounded to fp16 for
 * storage), q = roundf(x * (1/d)) with the float reciprocal of the unrounded
 * d, ties away from zero. Results are in [-127, 127] for finite input;
 * non-finite input gives unspecified (but defined) qs. */
static void q8_0_from_float(const float *src, void *dst, int64_t n) {
    pk_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / PK_QK8_0; i++) {
        const float *x = src + i * PK_QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < PK_QK8_0; j++) {
            float v = fabsf(x[j]);
            if (v > amax) amax = v;
        }
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        b[i].d = pk_fp32_to_fp16(d);
        for (int j = 0; j < PK_QK8_0; j++) {
            float r = roundf(x[j] * id);
            b[i].qs[j] = (int8_t)(r >= -128.0f && r <= 127.0f ? r : 0.0f); /* NaN: 0 */
        }
    }
}

/* ---- the table ---------------------------------------------------------- */

#define SIZED(nm, bl, sz) \
    {.name = (nm), .blck = (bl), .type_size = (sz), .vec_dot_type = -1, .to_float = NULL, .from_float = NULL}

static const pk_type_traits type_table[PK_TYPE_COUNT] = {
    [PK_TYPE_F32]     = {.name = "F32", .blck = 1, .type_size = 4,
                         .vec_dot_type = PK_TYPE_F32, .to_float = f32_to_float, .from_float = f32_from_float},
    [PK_TYPE_F16]     = {.name = "F16", .blck = 1, .type_size = 2,
                         .vec_dot_type = PK_TYPE_F16, .to_float = f16_to_float, .from_float = f16_from_float},
    [PK_TYPE_Q4_0]    = {.name = "Q4_0", .blck = PK_QK4_0, .type_size = sizeof(pk_block_q4_0),
                         .vec_dot_type = PK_TYPE_Q8_0, .to_float = pk_q4_0_to_float, .from_float = pk_q4_0_from_float},
    [PK_TYPE_Q4_1]    = {.name = "Q4_1", .blck = PK_QK4_1, .type_size = sizeof(pk_block_q4_1),
                         .vec_dot_type = PK_TYPE_Q8_1, .to_float = pk_q4_1_to_float, .from_float = pk_q4_1_from_float},
    [PK_TYPE_Q5_0]    = {.name = "Q5_0", .blck = PK_QK5_0, .type_size = sizeof(pk_block_q5_0),
                         .vec_dot_type = PK_TYPE_Q8_0, .to_float = pk_q5_0_to_float, .from_float = pk_q5_0_from_float},
    [PK_TYPE_Q5_1]    = {.name = "Q5_1", .blck = PK_QK5_1, .type_size = sizeof(pk_block_q5_1),
                         .vec_dot_type = PK_TYPE_Q8_1, .to_float = pk_q5_1_to_float, .from_float = pk_q5_1_from_float},
    [PK_TYPE_Q8_0]    = {.name = "Q8_0", .blck = PK_QK8_0, .type_size = sizeof(pk_block_q8_0),
                         .vec_dot_type = PK_TYPE_Q8_0, .to_float = q8_0_to_float, .from_float = q8_0_from_float},
    /* Q8_1 and Q8_K are activation formats: their own vec_dot_type is -1 */
    [PK_TYPE_Q8_1]    = {.name = "Q8_1", .blck = PK_QK8_1, .type_size = sizeof(pk_block_q8_1),
                         .vec_dot_type = -1, .to_float = pk_q8_1_to_float, .from_float = pk_q8_1_from_float},
    [PK_TYPE_Q2_K]    = {.name = "Q2_K", .blck = PK_QK_K, .type_size = sizeof(pk_block_q2_K),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_q2_K_to_float, .from_float = pk_q2_K_from_float},
    [PK_TYPE_Q3_K]    = {.name = "Q3_K", .blck = PK_QK_K, .type_size = sizeof(pk_block_q3_K),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_q3_K_to_float, .from_float = pk_q3_K_from_float},
    [PK_TYPE_Q4_K]    = {.name = "Q4_K", .blck = PK_QK_K, .type_size = sizeof(pk_block_q4_K),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_q4_K_to_float, .from_float = pk_q4_K_from_float},
    [PK_TYPE_Q5_K]    = {.name = "Q5_K", .blck = PK_QK_K, .type_size = sizeof(pk_block_q5_K),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_q5_K_to_float, .from_float = pk_q5_K_from_float},
    [PK_TYPE_Q6_K]    = {.name = "Q6_K", .blck = PK_QK_K, .type_size = sizeof(pk_block_q6_K),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_q6_K_to_float, .from_float = pk_q6_K_from_float},
    [PK_TYPE_Q8_K]    = {.name = "Q8_K", .blck = PK_QK_K, .type_size = sizeof(pk_block_q8_K),
                         .vec_dot_type = -1, .to_float = pk_q8_K_to_float, .from_float = pk_q8_K_from_float},
    [PK_TYPE_IQ2_XXS] = {.name = "IQ2_XXS", .blck = PK_QK_K, .type_size = sizeof(pk_block_iq2_xxs),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_iq2_xxs_to_float, .from_float = NULL},
    [PK_TYPE_IQ2_XS]  = {.name = "IQ2_XS", .blck = PK_QK_K, .type_size = sizeof(pk_block_iq2_xs),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_iq2_xs_to_float, .from_float = NULL},
    [PK_TYPE_IQ3_XXS] = SIZED("IQ3_XXS", 256, 98),
    [PK_TYPE_IQ1_S]   = {.name = "IQ1_S", .blck = PK_QK_K, .type_size = sizeof(pk_block_iq1_s),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_iq1_s_to_float, .from_float = NULL},
    [PK_TYPE_IQ4_NL]  = {.name = "IQ4_NL", .blck = PK_QK4_NL, .type_size = sizeof(pk_block_iq4_nl),
                         .vec_dot_type = PK_TYPE_Q8_0, .to_float = pk_iq4_nl_to_float,
                         .from_float = pk_iq4_nl_from_float},
    [PK_TYPE_IQ3_S]   = SIZED("IQ3_S", 256, 110),
    [PK_TYPE_IQ2_S]   = SIZED("IQ2_S", 256, 82),
    [PK_TYPE_IQ4_XS]  = {.name = "IQ4_XS", .blck = PK_QK_K, .type_size = sizeof(pk_block_iq4_xs),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_iq4_xs_to_float,
                         .from_float = pk_iq4_xs_from_float},
    [PK_TYPE_I8]      = SIZED("I8", 1, 1),
    [PK_TYPE_I16]     = SIZED("I16", 1, 2),
    [PK_TYPE_I32]     = SIZED("I32", 1, 4),
    [PK_TYPE_I64]     = SIZED("I64", 1, 8),
    [PK_TYPE_F64]     = SIZED("F64", 1, 8),
    [PK_TYPE_IQ1_M]   = {.name = "IQ1_M", .blck = PK_QK_K, .type_size = sizeof(pk_block_iq1_m),
                         .vec_dot_type = PK_TYPE_Q8_K, .to_float = pk_iq1_m_to_float, .from_float = NULL},
    [PK_TYPE_BF16]    = {.name = "BF16", .blck = 1, .type_size = 2,
                         .vec_dot_type = PK_TYPE_BF16, .to_float = bf16_to_float, .from_float = bf16_from_float},
    [PK_TYPE_TQ1_0]   = SIZED("TQ1_0", 256, 54),
    [PK_TYPE_TQ2_0]   = SIZED("TQ2_0", 256, 66),
    [PK_TYPE_MXFP4]   = {.name = "MXFP4", .blck = PK_QK_MXFP4, .type_size = sizeof(pk_block_mxfp4),
                         .vec_dot_type = PK_TYPE_Q8_0, .to_float = pk_mxfp4_to_float,
                         .from_float = pk_mxfp4_from_float},
    /* 4, 5 (Q4_2, Q4_3), 31-33 (Q4_0_4_4 ...), 36-38 (IQ4_NL_4_4 ...): removed */
};

const pk_type_traits *pk_type_get(int type) {
    if (type < 0 || type >= PK_TYPE_COUNT || !type_table[type].name) return NULL;
    return &type_table[type];
}

const char *pk_type_name(int type) {
    const pk_type_traits *t = pk_type_get(type);
    return t ? t->name : "?";
}

/* The types pocket does not compute are only ever copied as bytes; their
 * entries follow ggml's structs anyway (fp16 scales: 2; IQ1_M: bytes). */
static const unsigned char type_align[PK_TYPE_COUNT] = {
    [PK_TYPE_F32] = _Alignof(float),           [PK_TYPE_F16] = _Alignof(uint16_t),
    [PK_TYPE_BF16] = _Alignof(uint16_t),       [PK_TYPE_Q4_0] = _Alignof(pk_block_q4_0),
    [PK_TYPE_Q4_1] = _Alignof(pk_block_q4_1),  [PK_TYPE_Q5_0] = _Alignof(pk_block_q5_0),
    [PK_TYPE_Q5_1] = _Alignof(pk_block_q5_1),  [PK_TYPE_Q8_0] = _Alignof(pk_block_q8_0),
    [PK_TYPE_Q8_1] = _Alignof(pk_block_q8_1),  [PK_TYPE_Q2_K] = _Alignof(pk_block_q2_K),
    [PK_TYPE_Q3_K] = _Alignof(pk_block_q3_K),  [PK_TYPE_Q4_K] = _Alignof(pk_block_q4_K),
    [PK_TYPE_Q5_K] = _Alignof(pk_block_q5_K),  [PK_TYPE_Q6_K] = _Alignof(pk_block_q6_K),
    [PK_TYPE_Q8_K] = _Alignof(pk_block_q8_K),  [PK_TYPE_IQ4_NL] = _Alignof(pk_block_iq4_nl),
    [PK_TYPE_IQ4_XS] = _Alignof(pk_block_iq4_xs),
    [PK_TYPE_IQ2_XXS] = 2, [PK_TYPE_IQ2_XS] = 2, [PK_TYPE_IQ3_XXS] = 2, [PK_TYPE_IQ1_S] = _Alignof(pk_block_iq1_s),
    [PK_TYPE_IQ3_S] = 2, [PK_TYPE_IQ2_S] = 2, [PK_TYPE_IQ1_M] = _Alignof(pk_block_iq1_m), [PK_TYPE_TQ1_0] = 2,
    [PK_TYPE_TQ2_0] = 2, [PK_TYPE_MXFP4] = _Alignof(pk_block_mxfp4),
    [PK_TYPE_I8] = 1, [PK_TYPE_I16] = 2, [PK_TYPE_I32] = 4, [PK_TYPE_I64] = 8, [PK_TYPE_F64] = 8,
};

size_t pk_type_align(int type) {
    return pk_type_get(type) && type_align[type] ? type_align[type] : 1;
}

size_t pk_row_size(int type, int64_t n) {
    const pk_type_traits *t = pk_type_get(type);
    if (!t || n < 0 || n % t->blck) return 0;
    uint64_t r;
    if (__builtin_mul_overflow((uint64_t)(n / t->blck), (uint64_t)t->type_size, &r) ||
        r > SIZE_MAX)
        return 0;
    return (size_t)r;
}
