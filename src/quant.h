/* quant.h - tensor element types (ggml numbering, as stored in GGUF), their
 * block layouts, and the scalar reference conversions to and from float.
 *
 * Each quantized type packs `blck` consecutive elements of a row into a block
 * of `type_size` bytes; a row of n elements (n % blck == 0) takes
 * n / blck * type_size bytes. The reference functions here are the
 * definition of each format: SIMD kernels (kernels.h) are tested against them.
 */
#ifndef PK_QUANT_H
#define PK_QUANT_H

#include <stddef.h>
#include <stdint.h>

enum pk_type {
    PK_TYPE_F32 = 0, PK_TYPE_F16 = 1, PK_TYPE_Q4_0 = 2, PK_TYPE_Q4_1 = 3,
    PK_TYPE_Q5_0 = 6, PK_TYPE_Q5_1 = 7, PK_TYPE_Q8_0 = 8, PK_TYPE_Q8_1 = 9,
    PK_TYPE_Q2_K = 10, PK_TYPE_Q3_K = 11, PK_TYPE_Q4_K = 12, PK_TYPE_Q5_K = 13,
    PK_TYPE_Q6_K = 14, PK_TYPE_Q8_K = 15, PK_TYPE_IQ2_XXS = 16,
    PK_TYPE_IQ2_XS = 17, PK_TYPE_IQ3_XXS = 18, PK_TYPE_IQ1_S = 19,
    PK_TYPE_IQ4_NL = 20, PK_TYPE_IQ3_S = 21, PK_TYPE_IQ2_S = 22,
    PK_TYPE_IQ4_XS = 23, PK_TYPE_I8 = 24, PK_TYPE_I16 = 25, PK_TYPE_I32 = 26,
    PK_TYPE_I64 = 27, PK_TYPE_F64 = 28, PK_TYPE_IQ1_M = 29, PK_TYPE_BF16 = 30,
    PK_TYPE_TQ1_0 = 34, PK_TYPE_TQ2_0 = 35, PK_TYPE_MXFP4 = 39,
    PK_TYPE_COUNT = 40
};

typedef void (*pk_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*pk_from_float_fn)(const float *src, void *dst, int64_t n);

typedef struct pk_type_traits {
    const char *name;           /* "F16", "Q8_0", ... ; NULL: unknown type id */
    int blck;                   /* elements per block */
    size_t type_size;           /* bytes per block */
    int vec_dot_type;           /* activation type a dot product wants, -1: none */
    pk_to_float_fn to_float;    /* reference dequantize; NULL if unsupported */
    pk_from_float_fn from_float;/* reference quantize; NULL if unsupported */
} pk_type_traits;

/* Traits of a type id; NULL if the id is not a known ggml type. Known types
 * with to_float == NULL are recognised (sizes known) but not computable. */
const pk_type_traits *pk_type_get(int type);
const char *pk_type_name(int type);       /* "?" for unknown ids */
/* Bytes of a row of n elements, 0 if n is not a multiple of the block size
 * or the type is unknown. */
size_t pk_row_size(int type, int64_t n);

/* ---- scalar conversions ---------------------------------------------- */
float pk_fp16_to_fp32(uint16_t h);
uint16_t pk_fp32_to_fp16(float f);        /* round to nearest even */
float pk_bf16_to_fp32(uint16_t h);
uint16_t pk_fp32_to_bf16(float f);        /* round to nearest even, NaN kept */

/* ---- block formats ---------------------------------------------------- */
#define PK_QK8_0 32
/* Q8_0: 32 weights as int8 with one fp16 scale: 8.5 bits per weight.
 * w[i] = d * qs[i]. */
typedef struct {
    uint16_t d;                 /* fp16 scale */
    int8_t qs[PK_QK8_0];
} pk_block_q8_0;
_Static_assert(sizeof(pk_block_q8_0) == 2 + PK_QK8_0, "wrong q8_0 block size");

#endif
