/* quant/quant.h - tensor element types (ggml numbering, as stored in GGUF), their
 * block layouts, and the scalar reference conversions to and from float.
 *
 * Each quantized type packs `blck` consecutive elements of a row into a block
 * of `type_size` bytes; a row of n elements (n % blck == 0) takes
 * n / blck * type_size bytes. The reference functions here are the
 * definition of each format: SIMD kernels (kernels/kernels.h) are tested against them.
 */
#ifndef PK_QUANT_H
#define PK_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
    pk_from_float_fn from_float;/* reference quantize; NULL if unsupported or ggml has none
                                   (IQ2_XXS, IQ2_XS: importance-weighted quantizers only) */
} pk_type_traits;

/* Traits of a type id; NULL if the id is not a known ggml type. Known types
 * with to_float == NULL are recognised (sizes known) but not computable. */
const pk_type_traits *pk_type_get(int type);
const char *pk_type_name(int type);       /* "?" for unknown ids */
/* Bytes of a row of n elements, 0 if n is not a multiple of the block size
 * or the type is unknown. */
size_t pk_row_size(int type, int64_t n);
/* Byte alignment a tensor of this type needs in memory: the _Alignof of its
 * element or block struct (F32: 4, F16/BF16 and the blocks with fp16 scales:
 * 2). Every block size is a multiple of it, so a tensor whose first byte is
 * aligned has every row and block aligned. 1 for unknown ids. */
size_t pk_type_align(int type);

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

/* Legacy 32-element blocks. Elements j and j + 16 of a block share byte
 * qs[j] (low nibble: j, high nibble: j + 16). For the 5-bit types, bit j of
 * the little-endian 32-bit word qh is the fifth bit of element j. */
#define PK_QK4_0 32
/* Q4_0: w[j] = d * (q[j] - 8), q in [0, 15]: 4.5 bits per weight. */
typedef struct {
    uint16_t d;                 /* fp16 scale */
    uint8_t qs[PK_QK4_0 / 2];   /* nibbles */
} pk_block_q4_0;
_Static_assert(sizeof(pk_block_q4_0) == 2 + PK_QK4_0 / 2, "wrong q4_0 block size");

#define PK_QK4_1 32
/* Q4_1: w[j] = d * q[j] + m, q in [0, 15]: 5 bits per weight. */
typedef struct {
    uint16_t d;                 /* fp16 scale */
    uint16_t m;                 /* fp16 minimum (offset) */
    uint8_t qs[PK_QK4_1 / 2];
} pk_block_q4_1;
_Static_assert(sizeof(pk_block_q4_1) == 4 + PK_QK4_1 / 2, "wrong q4_1 block size");

#define PK_QK5_0 32
/* Q5_0: w[j] = d * (q[j] - 16), q in [0, 31]: 5.5 bits per weight. */
typedef struct {
    uint16_t d;
    uint8_t qh[4];              /* fifth bits, little-endian uint32 */
    uint8_t qs[PK_QK5_0 / 2];   /* low nibbles */
} pk_block_q5_0;
_Static_assert(sizeof(pk_block_q5_0) == 6 + PK_QK5_0 / 2, "wrong q5_0 block size");

#define PK_QK5_1 32
/* Q5_1: w[j] = d * q[j] + m, q in [0, 31]: 6 bits per weight. */
typedef struct {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[PK_QK5_1 / 2];
} pk_block_q5_1;
_Static_assert(sizeof(pk_block_q5_1) == 8 + PK_QK5_1 / 2, "wrong q5_1 block size");

#define PK_QK8_1 32
/* Q8_1 (activations for Q4_1 / Q5_1): x[j] = d * qs[j]; s = fp16(d * sum(qs))
 * with the unrounded float d, so the weight offsets m multiply one number. */
typedef struct {
    uint16_t d;
    uint16_t s;
    int8_t qs[PK_QK8_1];
} pk_block_q8_1;
_Static_assert(sizeof(pk_block_q8_1) == 4 + PK_QK8_1, "wrong q8_1 block size");

/* K-quants: super-blocks of 256 elements made of 16 or 8 sub-blocks, each
 * with a 4-, 6- or 8-bit scale (and min) relative to fp16 super-scales. */
#define PK_QK_K 256
#define PK_K_SCALE_SIZE 12

/* Q2_K: 16 sub-blocks of 16. w = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4),
 * q in [0, 3]: 2.625 bits per weight. Element 128h + 32k + l (h < 2, k < 4,
 * l < 32) is bits 2k..2k+1 of qs[32h + l]; its sub-block is (128h + 32k + l) / 16. */
typedef struct {
    uint8_t scales[PK_QK_K / 16];   /* low nibble: scale, high nibble: min */
    uint8_t qs[PK_QK_K / 4];
    uint16_t d;                     /* fp16 super-scale of the scales */
    uint16_t dmin;                  /* fp16 super-scale of the mins */
} pk_block_q2_K;
_Static_assert(sizeof(pk_block_q2_K) == 4 + PK_QK_K / 16 + PK_QK_K / 4, "wrong q2_K block size");

/* Q3_K: 16 sub-blocks of 16. w = d * (sc[s] - 32) * (q - 4), q in [0, 7]:
 * 3.4375 bits per weight. The low two bits of q sit as in Q2_K; the third is
 * bit (e / 32) of hmask[e % 32] for element e. The 6-bit sc[s]: low nibble is
 * nibble (s / 8) of scales[s % 8]; high two bits are bits 2(s/4)..2(s/4)+1
 * of scales[8 + s % 4]. */
typedef struct {
    uint8_t hmask[PK_QK_K / 8];
    uint8_t qs[PK_QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} pk_block_q3_K;
_Static_assert(sizeof(pk_block_q3_K) == 2 + PK_QK_K / 4 + PK_QK_K / 8 + 12, "wrong q3_K block size");

/* Q4_K: 8 sub-blocks of 32. w = d * sc[s] * q - dmin * m[s], q in [0, 15]:
 * 4.5 bits per weight. Element 64h + l (l < 32) is the low nibble of
 * qs[32h + l], element 64h + 32 + l its high nibble. 6-bit sc/m packing: see
 * pk_get_scale_min_k4. */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[PK_K_SCALE_SIZE];
    uint8_t qs[PK_QK_K / 2];
} pk_block_q4_K;
_Static_assert(sizeof(pk_block_q4_K) == 4 + PK_K_SCALE_SIZE + PK_QK_K / 2, "wrong q4_K block size");

/* Q5_K: Q4_K plus a fifth bit: bit 2h of qh[l] for element 64h + l, bit
 * 2h + 1 for element 64h + 32 + l. q in [0, 31]: 5.5 bits per weight. */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[PK_K_SCALE_SIZE];
    uint8_t qh[PK_QK_K / 8];
    uint8_t qs[PK_QK_K / 2];
} pk_block_q5_K;
_Static_assert(sizeof(pk_block_q5_K) == 4 + PK_K_SCALE_SIZE + PK_QK_K / 8 + PK_QK_K / 2,
               "wrong q5_K block size");

/* Q6_K: 16 sub-blocks of 16. w = d * scales[s] * (q - 32), q in [0, 63]:
 * 6.5625 bits per weight. For element 128h + 32k + l: the low nibble comes
 * from ql[64h + l + 32(k & 1)] (low nibble for k < 2, high for k >= 2), the
 * top two bits are bits 2k..2k+1 of qh[32h + l]. */
typedef struct {
    uint8_t ql[PK_QK_K / 2];
    uint8_t qh[PK_QK_K / 4];
    int8_t scales[PK_QK_K / 16];
    uint16_t d;
} pk_block_q6_K;
_Static_assert(sizeof(pk_block_q6_K) == 2 + PK_QK_K / 16 + 3 * PK_QK_K / 4, "wrong q6_K block size");

/* Q8_K (activations for the K-quants and IQ4_XS): x = d * qs with a float
 * d; bsums[g] = sum of qs[16g .. 16g + 15] (for the mins / offsets). */
typedef struct {
    float d;
    int8_t qs[PK_QK_K];
    int16_t bsums[PK_QK_K / 16];
} pk_block_q8_K;
_Static_assert(sizeof(pk_block_q8_K) == 4 + PK_QK_K + PK_QK_K / 8, "wrong q8_K block size");

/* IQ4_NL: 32 elements, w[j] = d * pk_iq4nl_values[q[j]], nibbles as Q4_0. */
#define PK_QK4_NL 32
typedef struct {
    uint16_t d;
    uint8_t qs[PK_QK4_NL / 2];
} pk_block_iq4_nl;
_Static_assert(sizeof(pk_block_iq4_nl) == 2 + PK_QK4_NL / 2, "wrong iq4_nl block size");

/* IQ4_XS: 8 sub-blocks of 32, w = d * (ls[s] - 32) * pk_iq4nl_values[q]:
 * 4.25 bits per weight. ls[s] = nibble (s % 2) of scales_l[s / 2] | bits
 * 2s..2s+1 of scales_h << 4. Sub-block s uses qs[16s .. 16s + 15] with the
 * IQ4_NL nibble order. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[PK_QK_K / 64];
    uint8_t qs[PK_QK_K / 2];
} pk_block_iq4_xs;
_Static_assert(sizeof(pk_block_iq4_xs) == 4 + PK_QK_K / 64 + PK_QK_K / 2, "wrong iq4_xs block size");

/* Round to nearest, ties to even, by adding 1.5 * 2^23 (ggml's nearest_int),
 * for the quantizers. Exact for |v| <= 2^22; any other input gives some int
 * without UB. */
static inline int pk_nearest_int(float v) {
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* The 16 non-linear levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl). */
extern const int8_t pk_iq4nl_values[16];

/* IQ2_XXS and IQ2_XS (quant/iq2.c): groups of 8 weights, each one point of a
 * grid (its 8 magnitudes in bytes: pk_iq2xxs_grid, 256 points;
 * pk_iq2xs_grid, 512) with 8 signs from a 7-bit sign code (pk_iq2_signs)
 * and a 4-bit scale ls: w = d * (0.5 + ls) / 4 * level * sign.
 * IQ2_XXS: 2.0625 bits per weight. Sub-block s (elements 32s .. 32s + 31)
 * is qs[4s .. 4s + 3]: bytes 0-3 of it (byte g: group g, elements 32s + 8g
 * .. 32s + 8g + 7) are the grid indices; the little-endian 32-bit word of
 * qs[4s + 2], qs[4s + 3] holds group g's sign code in bits
 * 7g .. 7g + 6 and the sub-block's ls in bits 28-31. */
typedef struct {
    uint16_t d;                 /* fp16 scale */
    uint16_t qs[PK_QK_K / 8];
} pk_block_iq2_xxs;
_Static_assert(sizeof(pk_block_iq2_xxs) == 2 + PK_QK_K / 4, "wrong iq2_xxs block size");

/* IQ2_XS: 2.3125 bits per weight. qs[g] codes group g (elements 8g .. 8g + 7):
 * bits 0-8 its grid index, bits 9-15 its sign code. scales[s] holds the ls
 * of sub-block s's first 16 elements (groups 4s, 4s + 1) in its low nibble,
 * of the other 16 in its high nibble. */
typedef struct {
    uint16_t d;                 /* fp16 scale */
    uint16_t qs[PK_QK_K / 8];
    uint8_t scales[PK_QK_K / 32];
} pk_block_iq2_xs;
_Static_assert(sizeof(pk_block_iq2_xs) == 2 + PK_QK_K / 4 + PK_QK_K / 32, "wrong iq2_xs block size");

extern const uint64_t pk_iq2xxs_grid[256];
extern const uint64_t pk_iq2xs_grid[512];
/* pk_iq2_signs(c) as 8 int8 multipliers, +1 or -1, element j in byte j */
extern const uint64_t pk_iq2_sign8[128];
/* The signs of a group from its 7-bit code c: bit j set = element j
 * negative; bits 0-6 are c's, bit 7 makes the count of minus signs even. */
static inline unsigned pk_iq2_signs(unsigned c) {
    return (c & 127) | (unsigned)__builtin_parity(c & 127) << 7;
}
/* Group g (elements 8g .. 8g + 7) of an IQ2_XXS (xs = 0) or IQ2_XS (xs = 1)
 * block: returns its grid point; *code its sign code, *ls the scale of its
 * 16 elements (both groups of sub-block g / 4's half (g / 2) % 2). */
static inline uint64_t pk_iq2_group(const void *blk, int xs, int g, unsigned *code, int *ls) {
    if (xs) {
        const pk_block_iq2_xs *b = blk;
        *code = b->qs[g] >> 9;
        *ls = (b->scales[g / 4] >> 4 * (g / 2 % 2)) & 15;
        return pk_iq2xs_grid[b->qs[g] & 511];
    }
    const pk_block_iq2_xxs *b = blk;
    const uint32_t aux = (uint32_t)b->qs[g / 4 * 4 + 2] | (uint32_t)b->qs[g / 4 * 4 + 3] << 16;
    *code = (aux >> 7 * (g % 4)) & 127;
    *ls = (int)(aux >> 28);
    return pk_iq2xxs_grid[((const uint8_t *)b->qs)[g / 4 * 8 + g % 4]];
}

/* IQ1_S, IQ1_M: super-blocks of 256 in groups of 8 elements. A group is one
 * of the 2048 points of the IQ1 grid (pk_iq1s_grid: 8 levels in {-1, 0, 1})
 * by an 11-bit index, shifted by delta = +-1/8 and scaled by d * (2 ls + 1)
 * with a 3-bit ls: w[j] = d * (2 ls + 1) * (grid[i][j] + delta). */
#define PK_IQ1_GRID 2048
#define PK_IQ1_DELTA 0.125f

/* IQ1_S: 8 sub-blocks of 32 (4 groups each), 1.5625 bits per weight. For
 * element 32s + 8g + j (s < 8, g < 4, j < 8): index i = qs[4s + g] |
 * ((qh[s] >> 3g) & 7) << 8, ls = (qh[s] >> 12) & 7, delta = -1/8 if bit 15
 * of qh[s] is set, else +1/8 (one delta and scale per sub-block). */
typedef struct {
    uint16_t d;                 /* fp16 super-scale */
    uint8_t qs[PK_QK_K / 8];    /* low 8 bits of each group's index */
    uint16_t qh[PK_QK_K / 32];  /* per sub-block: 4 x 3 high index bits, ls, delta sign */
} pk_block_iq1_s;
_Static_assert(sizeof(pk_block_iq1_s) == 2 + PK_QK_K / 8 + PK_QK_K / 16, "wrong iq1_s block size");

/* IQ1_M: 8 sub-blocks of 32 whose halves (groups 0-1, 2-3) have a 3-bit
 * scale each, a delta per group: 1.75 bits per weight. With the scales as
 * four little-endian words sc[k] = scales[2k] | scales[2k + 1] << 8 and the
 * nibble h = qh[2s + g / 2] >> 4 (g % 2), element 32s + 8g + j has index i =
 * qs[4s + g] | (h & 7) << 8, delta = -1/8 if h & 8, else +1/8, and ls =
 * (sc[s / 2] >> (6 (s % 2) + 3 (g / 2))) & 7. No d field: the fp16 d is
 * bits 12-15 of sc[0], sc[1], sc[2], sc[3] as its bits 0-3, 4-7, 8-11,
 * 12-15 (pk_iq1_m_d). */
typedef struct {
    uint8_t qs[PK_QK_K / 8];    /* low 8 bits of each group's index */
    uint8_t qh[PK_QK_K / 16];   /* per group a nibble: 3 high index bits, delta sign */
    uint8_t scales[PK_QK_K / 32];/* 16 x 3-bit scales, the fp16 d in the top nibbles */
} pk_block_iq1_m;
_Static_assert(sizeof(pk_block_iq1_m) == PK_QK_K / 8 + PK_QK_K / 16 + PK_QK_K / 32, "wrong iq1_m block size");

/* the fp16 d of an IQ1_M block from its 8 scale bytes */
static inline uint16_t pk_iq1_m_d(const uint8_t *sc) {
    return (uint16_t)(sc[1] >> 4 | (sc[3] & 0xF0) | (sc[5] & 0xF0) << 4 | (sc[7] & 0xF0) << 8);
}

/* The IQ1 grid (ggml's iq1s_grid): PK_IQ1_GRID points, byte j of entry i
 * the int8 level of element j of point i; made on the first call. */
const uint64_t *pk_iq1s_grid(void);

/* The i-quants below 4 bits (IQ3_XXS, IQ3_S, IQ2_S) code groups of 4 or 8
 * magnitudes as one index into a lattice grid (a fixed list of points, the
 * format's codebook: pk_iq3xxs_grid, pk_iq3s_grid, pk_iq2s_grid in
 * quant/iq3.c, byte j of entry k = coordinate j of point k) and carry the
 * signs apart, bit i of a sign byte negating element i of a group of 8.
 * Sub-blocks of 32 have 4-bit scales ls. */

/* IQ3_XXS: 3.0625 bits per weight. Element 32s + 4g + j (sub-block s < 8,
 * group g < 8, j < 4) is d * (0.5 + ls) * 0.5 * grid[qs[8s + g]][j] * sign
 * (pk_iq3xxs_grid: 256 points in {4, 12, 20, 28, 36, 44, 52, 62}^4). The
 * little-endian uint32 a = qs[64 + 4s .. 67 + 4s] holds ls = a >> 28 and, for
 * the 8 elements 32s + 8h + i (h < 4, i < 8), the sign byte
 * pk_iq2_signs((a >> 7h) & 127): seven stored bits, the eighth making the
 * count of minus signs even (as IQ2_XXS's codes). */
typedef struct {
    uint16_t d;
    uint8_t qs[3 * PK_QK_K / 8];    /* 64 grid indices, then 8 x (4-bit ls, 4 x 7 sign bits) */
} pk_block_iq3_xxs;
_Static_assert(sizeof(pk_block_iq3_xxs) == 2 + 3 * PK_QK_K / 8, "wrong iq3_xxs block size");

/* IQ3_S: 3.4375 bits per weight. Element e = 32s + 4g + j is
 * d * (1 + 2 ls) * grid[k][j], negated when bit e % 8 of signs[e / 8] is
 * set; k = qs[8s + g] | (bit g of qh[s]) << 8 (pk_iq3s_grid: 512 points in
 * {1, 3, ..., 15}^4), ls = nibble s % 2 of scales[s / 2]. */
typedef struct {
    uint16_t d;
    uint8_t qs[PK_QK_K / 4];        /* low 8 bits of the 64 grid indices */
    uint8_t qh[PK_QK_K / 32];       /* their 9th bits, 8 per sub-block */
    uint8_t signs[PK_QK_K / 8];     /* one bit per element */
    uint8_t scales[PK_QK_K / 64];   /* 4-bit ls, two sub-blocks a byte */
} pk_block_iq3_s;
_Static_assert(sizeof(pk_block_iq3_s) == 2 + 13 * PK_QK_K / 32 + PK_QK_K / 64, "wrong iq3_s block size");

/* IQ2_S: 2.5625 bits per weight. Element 32s + 8g + j (g < 4, j < 8) is
 * d * (0.5 + ls) * 0.25 * grid[k][j], negated when bit j of qs[32 + 4s + g] is
 * set; k = qs[4s + g] | ((qh[s] >> 2g) & 3) << 8 (pk_iq2s_grid: 1024 points in
 * {8, 25, 43}^8), ls = nibble g / 2 of scales[s] (low: elements 0-15). */
typedef struct {
    uint16_t d;
    uint8_t qs[PK_QK_K / 4];        /* 32 low bytes of the grid indices, then 32 sign bytes */
    uint8_t qh[PK_QK_K / 32];       /* bits 8-9 of the indices, 4 pairs per sub-block */
    uint8_t scales[PK_QK_K / 32];   /* 4-bit ls, two half sub-blocks a byte */
} pk_block_iq2_s;
_Static_assert(sizeof(pk_block_iq2_s) == 2 + PK_QK_K / 4 + PK_QK_K / 16, "wrong iq2_s block size");

/* The lattice grids, expanded on first use (thread-safe) from their compact
 * form in quant/iq3.c; each call returns the same table. */
const uint32_t *pk_iq3xxs_grid(void);     /* 256 entries */
const uint32_t *pk_iq3s_grid(void);       /* 512 entries */
const uint64_t *pk_iq2s_grid(void);       /* 1024 entries */

/* The grid coordinates of sub-block sb (< 8: 32 elements) of an IQ3_XXS,
 * IQ3_S or IQ2_S block b as 4 little-endian words (word i: elements
 * 8i .. 8i + 7), grid the type's pk_*_grid(): what the SIMD kernels gather
 * in general registers before moving to vectors. */
static inline __attribute__((always_inline)) void pk_iq_lattice_words(int type, const void *b, int sb,
                                                                      const void *grid, uint64_t w[4]) {
    if (type == PK_TYPE_IQ2_S) {
        const pk_block_iq2_s *x = b;
        const uint64_t *g = grid;
        const uint8_t *q = x->qs + 4 * sb;
        const uint32_t h = x->qh[sb];
        w[0] = g[q[0] | (h << 8 & 0x300)];
        w[1] = g[q[1] | (h << 6 & 0x300)];
        w[2] = g[q[2] | (h << 4 & 0x300)];
        w[3] = g[q[3] | (h << 2 & 0x300)];
        return;
    }
    const uint32_t *g = grid;
    uint32_t k[8];
    if (type == PK_TYPE_IQ3_XXS) {
        const uint8_t *q = ((const pk_block_iq3_xxs *)b)->qs + 8 * sb;
        k[0] = q[0]; k[1] = q[1]; k[2] = q[2]; k[3] = q[3];
        k[4] = q[4]; k[5] = q[5]; k[6] = q[6]; k[7] = q[7];
    } else {
        const pk_block_iq3_s *x = b;
        const uint8_t *q = x->qs + 8 * sb;
        const uint32_t h = x->qh[sb];
        k[0] = q[0] | (h << 8 & 256); k[1] = q[1] | (h << 7 & 256);
        k[2] = q[2] | (h << 6 & 256); k[3] = q[3] | (h << 5 & 256);
        k[4] = q[4] | (h << 4 & 256); k[5] = q[5] | (h << 3 & 256);
        k[6] = q[6] | (h << 2 & 256); k[7] = q[7] | (h << 1 & 256);
    }
    w[0] = g[k[0]] | (uint64_t)g[k[1]] << 32;
    w[1] = g[k[2]] | (uint64_t)g[k[3]] << 32;
    w[2] = g[k[4]] | (uint64_t)g[k[5]] << 32;
    w[3] = g[k[6]] | (uint64_t)g[k[7]] << 32;
}

/* MXFP4 (OCP microscaling FP4, the gpt-oss experts): 32 E2M1 values sharing
 * one E8M0 exponent: 4.25 bits per weight. w[j] = pk_mxfp4_values[q[j]] *
 * 2^(e - 128), nibbles as Q4_0 (element j: low nibble of qs[j], element
 * j + 16: its high nibble). The levels are twice the E2M1 values {0, 0.5,
 * 1, 1.5, 2, 3, 4, 6}, bit 3 their sign, so the scale is half of E8M0's
 * 2^(e - 127) (ggml's GGML_E8M0_TO_FP32_HALF); e = 0 and 1 give the
 * float32 subnormals 2^-128 and 2^-127, e = 255 is 2^127 (not NaN: ggml
 * does not special-case it). */
#define PK_QK_MXFP4 32
typedef struct {
    uint8_t e;                  /* E8M0 shared exponent */
    uint8_t qs[PK_QK_MXFP4 / 2];/* nibbles: bit 3 sign, bits 0-2 E2M1 magnitude */
} pk_block_mxfp4;
_Static_assert(sizeof(pk_block_mxfp4) == 1 + PK_QK_MXFP4 / 2, "wrong mxfp4 block size");

/* The 16 MXFP4 levels, 2 x E2M1 (ggml's kvalues_mxfp4): 0 1 2 3 4 6 8 12,
 * then the same negated (code 8 is -0 = 0). */
extern const int8_t pk_mxfp4_values[16];

/* The scale of an MXFP4 block: 2^(e - 128) exactly, as a float ((e) & 1 where
 * e < 2: clang warns of a shift by e in the branch not taken for e >= 32). */
#define PK_E8M0_HALF_BITS(e) ((e) < 2 ? 0x00200000u << ((e) & 1) : (uint32_t)((e) - 1) << 23)
static inline float pk_e8m0_half(uint8_t e) {
    uint32_t u = PK_E8M0_HALF_BITS(e);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* The same as float bits for every e: a table the SIMD kernels load lanes
 * from (fewer instructions than computing them with the subnormals). */
extern const uint32_t pk_e8m0_half_bits[256];

/* 6-bit scale and min j (0..7) of a Q4_K / Q5_K block's 12 scale bytes:
 * j < 4: sc = q[j] & 63, m = q[j + 4] & 63; j >= 4: low nibbles from
 * q[j + 4], top two bits from bits 6-7 of q[j - 4] (sc) and q[j] (m). */
static inline void pk_get_scale_min_k4(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All 8 scales and mins of a Q4_K / Q5_K block at once (the values of
 * pk_get_scale_min_k4 for j = 0..7), with 32-bit word operations. */
static inline void pk_get_scales_mins_k4(const uint8_t *q, uint8_t sc[8], uint8_t m[8]) {
    uint32_t u0, u1, u2;
    memcpy(&u0, q, 4); memcpy(&u1, q + 4, 4); memcpy(&u2, q + 8, 4);
    uint32_t a = u0 & 0x3f3f3f3fu, b = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    uint32_t c = u1 & 0x3f3f3f3fu, d = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    memcpy(sc, &a, 4); memcpy(sc + 4, &b, 4);
    memcpy(m, &c, 4); memcpy(m + 4, &d, 4);
}

/* The inverse: pack 8 six-bit scales ls[] and mins lm[] (each <= 63) into
 * the 12 scale bytes q[] of a Q4_K / Q5_K block. */
static inline void pk_set_scale_min_k4(uint8_t *q, const uint8_t ls[8], const uint8_t lm[8]) {
    for (int j = 0; j < 12; j++) q[j] = 0;
    for (int j = 0; j < 8; j++) {
        if (j < 4) {
            q[j] = ls[j];
            q[j + 4] = lm[j];
        } else {
            q[j + 4] = (uint8_t)((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
            q[j - 4] |= (uint8_t)((ls[j] >> 4) << 6);
            q[j] |= (uint8_t)((lm[j] >> 4) << 6);
        }
    }
}

/* The 16 signed 6-bit sub-block scales (sc - 32) of a Q3_K block. */
static inline void pk_q3_K_scales(const uint8_t *scales, int8_t out[16]) {
    for (int s = 0; s < 16; s++) {
        int lo = (scales[s % 8] >> (4 * (s / 8))) & 0xF;
        int hi = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
        out[s] = (int8_t)((lo | hi << 4) - 32);
    }
}

/* ---- quantizers with an importance weight per column ------------------
 * Row quantizers (n a multiple of the block size) taking an optional array
 * `imp` of n non-negative per-column importances (an imatrix row); imp ==
 * NULL gives exactly the type's from_float, which matches ggml's
 * quantize_row_<type>_ref byte for byte. Which types use imp: see the
 * per-file comments (quant/legacy.c, quant/kquant.c, quant/iquant.c). */
void pk_quantize_q4_0(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q4_1(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q5_0(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q5_1(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q2_K(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q3_K(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q4_K(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q5_K(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q6_K(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_iq4_nl(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_iq4_xs(const float *src, void *dst, int64_t n, const float *imp);
/* IQ1_S, IQ1_M as ggml's quantize_iq1_s / _iq1_m (quant/iq1.c): imp is
 * required for IQ1_S (NULL gives weights x^2, which ggml does not offer);
 * IQ1_M without imp weights by x^2 as ggml does. */
void pk_quantize_iq1_s(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_iq1_m(const float *src, void *dst, int64_t n, const float *imp);
/* the length of the IQ1 quantizers' table of grid neighbours (a check) */
int pk_iq1_neighbours_total(void);
/* IQ4_NL as llama-quantize writes it (ggml's quantize_iq4_nl: 7 extra scale
 * trials per block); from_float is the faster quantize_row_iq4_nl_ref. */
void pk_quantize_iq4_nl_full(const float *src, void *dst, int64_t n, const float *imp);
/* The lattice i-quants (quant/iq3.c): ggml's quantize_iq3_xxs, _iq3_s,
 * _iq2_s; from_float is the same with imp == NULL (their _ref). */
void pk_quantize_iq3_xxs(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_iq3_s(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_iq2_s(const float *src, void *dst, int64_t n, const float *imp);
/* 1 when their quantization tables (grid maps, neighbour lists) were made
 * as expected (made on first use; the quantizers write zeros otherwise) */
int pk_iq_lattice_tables_ok(void);

/* Reference conversions of the types above (used by the type table). */
void pk_q4_0_to_float(const void *src, float *dst, int64_t n);
void pk_q4_1_to_float(const void *src, float *dst, int64_t n);
void pk_q5_0_to_float(const void *src, float *dst, int64_t n);
void pk_q5_1_to_float(const void *src, float *dst, int64_t n);
void pk_q8_1_to_float(const void *src, float *dst, int64_t n);
void pk_q8_1_from_float(const float *src, void *dst, int64_t n);
void pk_q2_K_to_float(const void *src, float *dst, int64_t n);
void pk_q3_K_to_float(const void *src, float *dst, int64_t n);
void pk_q4_K_to_float(const void *src, float *dst, int64_t n);
void pk_q5_K_to_float(const void *src, float *dst, int64_t n);
void pk_q6_K_to_float(const void *src, float *dst, int64_t n);
void pk_q8_K_to_float(const void *src, float *dst, int64_t n);
void pk_q8_K_from_float(const float *src, void *dst, int64_t n);
void pk_iq4_nl_to_float(const void *src, float *dst, int64_t n);
void pk_iq4_xs_to_float(const void *src, float *dst, int64_t n);
void pk_mxfp4_to_float(const void *src, float *dst, int64_t n);
void pk_iq2_xxs_to_float(const void *src, float *dst, int64_t n);
void pk_iq2_xs_to_float(const void *src, float *dst, int64_t n);
void pk_iq1_s_to_float(const void *src, float *dst, int64_t n);
void pk_iq1_m_to_float(const void *src, float *dst, int64_t n);
void pk_iq3_xxs_to_float(const void *src, float *dst, int64_t n);
void pk_iq3_s_to_float(const void *src, float *dst, int64_t n);
void pk_iq2_s_to_float(const void *src, float *dst, int64_t n);
void pk_iq3_xxs_from_float(const float *src, void *dst, int64_t n);
void pk_iq3_s_from_float(const float *src, void *dst, int64_t n);
void pk_iq2_s_from_float(const float *src, void *dst, int64_t n);
void pk_q4_0_from_float(const float *src, void *dst, int64_t n);
void pk_q4_1_from_float(const float *src, void *dst, int64_t n);
void pk_q5_0_from_float(const float *src, void *dst, int64_t n);
void pk_q5_1_from_float(const float *src, void *dst, int64_t n);
void pk_q2_K_from_float(const float *src, void *dst, int64_t n);
void pk_q3_K_from_float(const float *src, void *dst, int64_t n);
void pk_q4_K_from_float(const float *src, void *dst, int64_t n);
void pk_q5_K_from_float(const float *src, void *dst, int64_t n);
void pk_q6_K_from_float(const float *src, void *dst, int64_t n);
void pk_iq4_nl_from_float(const float *src, void *dst, int64_t n);
void pk_iq4_xs_from_float(const float *src, void *dst, int64_t n);
void pk_mxfp4_from_float(const float *src, void *dst, int64_t n);

#endif
