/* kernels/ref.c - the scalar reference kernel table.
 *
 * Tuned for: nothing but clarity and portability. It defines the expected
 * result of each kernel (the SIMD tables are tested against it) and is the
 * fallback for any entry an ISA table leaves NULL. Sums run strictly left to
 * right in float (Q8_0: exact int32 per block, then one float FMA-free
 * multiply-add per block; other block types likewise: exact int32 per block
 * or super-block, then float multiply-adds with the block scales).
 */
#include <math.h>
#include <string.h>
#include "kernels/gelu.h"
#include "kernels/kernels.h"

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

/* ---- legacy blocks: exact int32 dot per block, then one float multiply-add
 * per block (plus m * s for the offset types), as ggml's generic kernels ---- */

static void vec_dot_q4_0(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_q4_0 *a = w;
    const pk_block_q8_0 *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK4_0; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += ((a[i].qs[j] & 0xF) - 8) * b[i].qs[j] + ((a[i].qs[j] >> 4) - 8) * b[i].qs[j + 16];
        sum += (float)isum * (pk_fp16_to_fp32(a[i].d) * pk_fp16_to_fp32(b[i].d));
    }
    *s = sum;
}

static void vec_dot_q4_1(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_q4_1 *a = w;
    const pk_block_q8_1 *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK4_1; i++) {
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += (a[i].qs[j] & 0xF) * b[i].qs[j] + (a[i].qs[j] >> 4) * b[i].qs[j + 16];
        sum += (float)isum * (pk_fp16_to_fp32(a[i].d) * pk_fp16_to_fp32(b[i].d)) +
               pk_fp16_to_fp32(a[i].m) * pk_fp16_to_fp32(b[i].s);
    }
    *s = sum;
}

static inline uint32_t qh32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void vec_dot_q5_0(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_q5_0 *a = w;
    const pk_block_q8_0 *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK5_0; i++) {
        uint32_t qh = qh32(a[i].qh);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = ((a[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4) - 16;
            int q1 = ((a[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16;
            isum += q0 * b[i].qs[j] + q1 * b[i].qs[j + 16];
        }
        sum += (float)isum * (pk_fp16_to_fp32(a[i].d) * pk_fp16_to_fp32(b[i].d));
    }
    *s = sum;
}

static void vec_dot_q5_1(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_q5_1 *a = w;
    const pk_block_q8_1 *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK5_1; i++) {
        uint32_t qh = qh32(a[i].qh);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            int q0 = (a[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            int q1 = (a[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            isum += q0 * b[i].qs[j] + q1 * b[i].qs[j + 16];
        }
        sum += (float)isum * (pk_fp16_to_fp32(a[i].d) * pk_fp16_to_fp32(b[i].d)) +
               pk_fp16_to_fp32(a[i].m) * pk_fp16_to_fp32(b[i].s);
    }
    *s = sum;
}

/* IQ4_NL and MXFP4: 4-bit codes into a table of 16 int8 levels, nibbles as
 * Q4_0, one scale per block: IQ4_NL's fp16 d, MXFP4's E8M0 2^(e - 128)
 * (ggml's ggml_vec_dot_mxfp4_q8_0_generic: the same exact int32 sum per
 * block and one float multiply-add with d_w * d_x) */
static void vec_dot_tab4(int64_t n, float *s, const void *w, const void *x, int mxfp4) {
    const size_t bs = mxfp4 ? sizeof(pk_block_mxfp4) : sizeof(pk_block_iq4_nl);
    const int8_t *tab = mxfp4 ? pk_mxfp4_values : pk_iq4nl_values;
    const pk_block_q8_0 *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)i * bs, *qs = blk + (mxfp4 ? 1 : 2);
        uint16_t d16;
        memcpy(&d16, blk, 2);
        const float dw = mxfp4 ? pk_e8m0_half(blk[0]) : pk_fp16_to_fp32(d16);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++)
            isum += tab[qs[j] & 0xF] * b[i].qs[j] + tab[qs[j] >> 4] * b[i].qs[j + 16];
        sum += (float)isum * (dw * pk_fp16_to_fp32(b[i].d));
    }
    *s = sum;
}
static void vec_dot_iq4_nl(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_tab4(n, s, w, x, 0);
}
static void vec_dot_mxfp4(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_tab4(n, s, w, x, 1);
}

/* ---- super-blocks x Q8_K: per super-block an exact int32 sum of
 * scale * (q . x) over sub-blocks, and one of min * bsum; then
 * sum += d * dx * isum - dmin * dx * msum in float. ---- */

static void vec_dot_q2_K(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_q2_K *a = w;
    const pk_block_q8_K *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        int32_t isum = 0, msum = 0;
        for (int e = 0; e < PK_QK_K; e++) {
            int h = e / 128, k = (e % 128) / 32, l = e % 32;
            int q = (a[i].qs[32 * h + l] >> (2 * k)) & 3;
            isum += (a[i].scales[e / 16] & 0xF) * q * b[i].qs[e];
        }
        for (int g = 0; g < 16; g++) msum += (a[i].scales[g] >> 4) * b[i].bsums[g];
        float dx = b[i].d;
        sum += dx * pk_fp16_to_fp32(a[i].d) * (float)isum -
               dx * pk_fp16_to_fp32(a[i].dmin) * (float)msum;
    }
    *s = sum;
}

static void vec_dot_q3_K(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_q3_K *a = w;
    const pk_block_q8_K *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        int8_t sc[16];
        pk_q3_K_scales(a[i].scales, sc);
        int32_t isum = 0;
        for (int e = 0; e < PK_QK_K; e++) {
            int h = e / 128, k = (e % 128) / 32, l = e % 32;
            int q = ((a[i].qs[32 * h + l] >> (2 * k)) & 3) - ((a[i].hmask[l] >> (e / 32)) & 1 ? 0 : 4);
            isum += sc[e / 16] * q * b[i].qs[e];
        }
        sum += b[i].d * pk_fp16_to_fp32(a[i].d) * (float)isum;
    }
    *s = sum;
}

/* 4-bit (or 5-bit with the Q5_K high bits) level of element e of a Q4_K/Q5_K block */
static inline int q4k_level(const uint8_t *qs, int e) {
    int h = e / 64, l = e % 32;
    return (e % 64) < 32 ? qs[32 * h + l] & 0xF : qs[32 * h + l] >> 4;
}

static void vec_dot_q45_K(int64_t n, float *s, const void *w, const void *x, int five) {
    const pk_block_q8_K *b = x;
    size_t bs = five ? sizeof(pk_block_q5_K) : sizeof(pk_block_q4_K);
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)i * bs;
        uint16_t d16, dmin16;
        memcpy(&d16, blk, 2);
        memcpy(&dmin16, blk + 2, 2);
        const uint8_t *scales = blk + 4;
        const uint8_t *qh = five ? blk + 4 + PK_K_SCALE_SIZE : NULL;
        const uint8_t *qs = blk + 4 + PK_K_SCALE_SIZE + (five ? PK_QK_K / 8 : 0);
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            pk_get_scale_min_k4(j, scales, &sc, &m);
            int32_t dot = 0;
            for (int e = 32 * j; e < 32 * j + 32; e++) {
                int q = q4k_level(qs, e);
                if (five) q += ((qh[e % 32] >> (e / 32)) & 1) << 4;
                dot += q * b[i].qs[e];
            }
            isum += sc * dot;
            msum += m * (b[i].bsums[2 * j] + b[i].bsums[2 * j + 1]);
        }
        float dx = b[i].d;
        sum += dx * pk_fp16_to_fp32(d16) * (float)isum - dx * pk_fp16_to_fp32(dmin16) * (float)msum;
    }
    *s = sum;
}
static void vec_dot_q4_K(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_q45_K(n, s, w, x, 0);
}
static void vec_dot_q5_K(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_q45_K(n, s, w, x, 1);
}

static void vec_dot_q6_K(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_q6_K *a = w;
    const pk_block_q8_K *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        int32_t isum = 0;
        for (int e = 0; e < PK_QK_K; e++) {
            int h = e / 128, k = (e % 128) / 32, l = e % 32;
            int lo = a[i].ql[64 * h + l + 32 * (k & 1)];
            lo = k < 2 ? lo & 0xF : lo >> 4;
            int q = (lo | ((a[i].qh[32 * h + l] >> (2 * k)) & 3) << 4) - 32;
            isum += a[i].scales[e / 16] * q * b[i].qs[e];
        }
        sum += b[i].d * pk_fp16_to_fp32(a[i].d) * (float)isum;
    }
    *s = sum;
}

static void vec_dot_iq4_xs(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_iq4_xs *a = w;
    const pk_block_q8_K *b = x;
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        int32_t isum = 0;
        for (int ib = 0; ib < 8; ib++) {
            int ls = ((a[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) |
                     ((a[i].scales_h >> 2 * ib) & 3) << 4;
            const uint8_t *qs = a[i].qs + 16 * ib;
            const int8_t *q8 = b[i].qs + 32 * ib;
            int32_t dot = 0;
            for (int j = 0; j < 16; j++)
                dot += pk_iq4nl_values[qs[j] & 0xF] * q8[j] + pk_iq4nl_values[qs[j] >> 4] * q8[j + 16];
            isum += (ls - 32) * dot;
        }
        sum += b[i].d * pk_fp16_to_fp32(a[i].d) * (float)isum;
    }
    *s = sum;
}

/* IQ1_S, IQ1_M: per super-block the exact int32 sum, over groups of 8, of
 * ls' * (8 * (grid . x) + s * sum(x)) with ls' = 2 ls + 1 and s = +-1 the
 * delta's sign: 8 times the block's sum (|.| < 2^23), then one float
 * multiply-add with dw * dx / 8. */
static int32_t iq1_group_dot(const uint64_t *grid, int i, const int8_t *x, int neg) {
    int32_t dot = 0, sx = 0;
    for (int j = 0; j < 8; j++) {
        dot += (int8_t)(grid[i] >> (8 * j)) * x[j];
        sx += x[j];
    }
    return 8 * dot + (neg ? -sx : sx);
}

static void vec_dot_iq1_s(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_iq1_s *a = w;
    const pk_block_q8_K *b = x;
    const uint64_t *grid = pk_iq1s_grid();
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        int32_t isum = 0;
        for (int sb = 0; sb < 8; sb++) {
            const unsigned qh = a[i].qh[sb];
            int32_t dot = 0;
            for (int g = 0; g < 4; g++)
                dot += iq1_group_dot(grid, a[i].qs[4 * sb + g] | (int)((qh >> 3 * g) & 7) << 8,
                                     b[i].qs + 32 * sb + 8 * g, qh >> 15);
            isum += (int32_t)(2 * ((qh >> 12) & 7) + 1) * dot;
        }
        sum += b[i].d * pk_fp16_to_fp32(a[i].d) * (0.125f * (float)isum);
    }
    *s = sum;
}

static void vec_dot_iq1_m(int64_t n, float *s, const void *w, const void *x) {
    const pk_block_iq1_m *a = w;
    const pk_block_q8_K *b = x;
    const uint64_t *grid = pk_iq1s_grid();
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const uint8_t *sc = a[i].scales;
        int32_t isum = 0;
        for (int sb = 0; sb < 8; sb++) {
            const unsigned ws = sc[2 * (sb / 2)] | (unsigned)sc[2 * (sb / 2) + 1] << 8;
            for (int g = 0; g < 4; g++) {
                const unsigned h = (unsigned)a[i].qh[2 * sb + g / 2] >> 4 * (g % 2);
                const int ls = 2 * ((ws >> (6 * (sb % 2) + 3 * (g / 2))) & 7) + 1;
                isum += ls * iq1_group_dot(grid, a[i].qs[4 * sb + g] | (int)(h & 7) << 8,
                                           b[i].qs + 32 * sb + 8 * g, (h >> 3) & 1);
            }
        }
        sum += b[i].d * pk_fp16_to_fp32(pk_iq1_m_d(sc)) * (0.125f * (float)isum);
    }
    *s = sum;
}

/* ---- lattice i-quants x Q8_K (ggml's generic kernels): per 16 elements
 * an exact int32 dot of the signed grid coordinates with the activations,
 * times the odd scale 2 ls + 1, summed exactly over the super-block; then
 * sum += dw * dx * isum; at the end the constant factor (IQ3_XXS 1/4, IQ3_S
 * 1, IQ2_XXS / IQ2_XS / IQ2_S 1/8: (0.5 + ls) / 4 = (2 ls + 1) / 8). Blocks
 * are read as bytes (layouts: quant/quant.h), all with the fp16 d first;
 * IQ2_XXS / IQ2_XS's groups through pk_iq2_group (their scale per 16
 * elements: IQ2_XXS's per 32 is the same for both halves). ---- */

/* the signed coordinate of element e (< 256) of block p */
static inline int lattice_level(int t, const uint8_t *p, const void *grid, int e) {
    int v, neg;
    if (t == PK_TYPE_IQ2_XXS || t == PK_TYPE_IQ2_XS) {
        unsigned code;
        int ls;
        v = (int)(uint8_t)(pk_iq2_group(p, t == PK_TYPE_IQ2_XS, e / 8, &code, &ls) >> 8 * (e % 8));
        neg = pk_iq2_signs(code) >> (e % 8) & 1;
    } else if (t == PK_TYPE_IQ3_XXS) {
        uint32_t sa;
        memcpy(&sa, p + 66 + 4 * (e / 32), 4);
        v = (int)(((const uint32_t *)grid)[p[2 + e / 4]] >> 8 * (e % 4) & 0xFF);
        neg = pk_iq2_signs(sa >> 7 * (e % 32 / 8)) >> (e % 8) & 1;
    } else if (t == PK_TYPE_IQ3_S) {
        const pk_block_iq3_s *a = (const pk_block_iq3_s *)p;
        v = (int)(((const uint32_t *)grid)[a->qs[e / 4] | (a->qh[e / 32] >> (e % 32 / 4) & 1) << 8] >> 8 * (e % 4) &
                  0xFF);
        neg = a->signs[e / 8] >> (e % 8) & 1;
    } else {
        const pk_block_iq2_s *a = (const pk_block_iq2_s *)p;
        v = (int)(((const uint64_t *)grid)[a->qs[e / 8] | (a->qh[e / 32] >> 2 * (e % 32 / 8) & 3) << 8] >>
                      8 * (e % 8) & 0xFF);
        neg = a->qs[32 + e / 8] >> (e % 8) & 1;
    }
    return neg ? -v : v;
}
/* 2 ls + 1 for elements 16h .. 16h + 15 */
static inline int lattice_scale(int t, const uint8_t *p, int h) {
    if (t == PK_TYPE_IQ2_XXS || t == PK_TYPE_IQ2_XS) {
        unsigned code;
        int ls;
        pk_iq2_group(p, t == PK_TYPE_IQ2_XS, 2 * h + 1, &code, &ls);
        return 2 * ls + 1;
    }
    if (t == PK_TYPE_IQ3_XXS) return 2 * (p[66 + 4 * (h / 2) + 3] >> 4) + 1;
    if (t == PK_TYPE_IQ3_S) return 2 * (((const pk_block_iq3_s *)p)->scales[h / 4] >> 4 * (h / 2 % 2) & 0xF) + 1;
    return 2 * (((const pk_block_iq2_s *)p)->scales[h / 2] >> 4 * (h % 2) & 0xF) + 1;
}
static inline __attribute__((always_inline)) void vec_dot_lattice(int t, int64_t n, float *s, const void *w,
                                                                  const void *x) {
    const pk_block_q8_K *b = x;
    const size_t bs = pk_type_get(t)->type_size;
    const void *grid = t == PK_TYPE_IQ3_XXS ? (const void *)pk_iq3xxs_grid()
                       : t == PK_TYPE_IQ3_S ? (const void *)pk_iq3s_grid()
                                            : (const void *)pk_iq2s_grid();
    float sum = 0.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const uint8_t *p = (const uint8_t *)w + (size_t)i * bs;
        uint16_t d16;
        memcpy(&d16, p, 2);
        int32_t isum = 0;
        for (int h = 0; h < 16; h++) {
            int32_t dot = 0;
            for (int e = 16 * h; e < 16 * h + 16; e++) dot += lattice_level(t, p, grid, e) * b[i].qs[e];
            isum += dot * lattice_scale(t, p, h);
        }
        sum += pk_fp16_to_fp32(d16) * b[i].d * (float)isum;
    }
    *s = (t == PK_TYPE_IQ3_XXS ? 0.25f : t == PK_TYPE_IQ3_S ? 1.0f : 0.125f) * sum;
}
static void vec_dot_iq2_xxs(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_lattice(PK_TYPE_IQ2_XXS, n, s, w, x);
}
static void vec_dot_iq2_xs(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_lattice(PK_TYPE_IQ2_XS, n, s, w, x);
}
static void vec_dot_iq3_xxs(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_lattice(PK_TYPE_IQ3_XXS, n, s, w, x);
}
static void vec_dot_iq3_s(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_lattice(PK_TYPE_IQ3_S, n, s, w, x);
}
static void vec_dot_iq2_s(int64_t n, float *s, const void *w, const void *x) {
    vec_dot_lattice(PK_TYPE_IQ2_S, n, s, w, x);
}

/* gemv as one vec_dot per row, rows in order */
static inline __attribute__((always_inline)) void gemv_by(pk_vec_dot_fn dot, int64_t n, int64_t nrows, float *y,
                                                         const void *w, size_t row_bytes, const void *x) {
    for (int64_t r = 0; r < nrows; r++) dot(n, &y[r], (const char *)w + (size_t)r * row_bytes, x);
}
/* the gemv entry of type t */
#define GEMV_ENTRY(t) \
    static void gemv_##t(int64_t n, int64_t nrows, float *y, const void *w, size_t rb, const void *x) { \
        gemv_by(vec_dot_##t, n, nrows, y, w, rb, x); \
    }
GEMV_ENTRY(f32)
GEMV_ENTRY(f16)
GEMV_ENTRY(bf16)
GEMV_ENTRY(q8_0)
GEMV_ENTRY(q4_0)
GEMV_ENTRY(q4_1)
GEMV_ENTRY(q5_0)
GEMV_ENTRY(q5_1)
GEMV_ENTRY(iq4_nl)
GEMV_ENTRY(mxfp4)
GEMV_ENTRY(q2_K)
GEMV_ENTRY(q3_K)
GEMV_ENTRY(q4_K)
GEMV_ENTRY(q5_K)
GEMV_ENTRY(q6_K)
GEMV_ENTRY(iq4_xs)
GEMV_ENTRY(iq2_xxs)
GEMV_ENTRY(iq2_xs)
GEMV_ENTRY(iq1_s)
GEMV_ENTRY(iq1_m)
GEMV_ENTRY(iq3_xxs)
GEMV_ENTRY(iq3_s)
GEMV_ENTRY(iq2_s)

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
static void quantize_q8_1(const float *x, void *y, int64_t n) { pk_q8_1_from_float(x, y, n); }
static void quantize_q8_K(const float *x, void *y, int64_t n) { pk_q8_K_from_float(x, y, n); }

#define QTYPES(X) X(Q4_0, q4_0) X(Q4_1, q4_1) X(Q5_0, q5_0) X(Q5_1, q5_1) X(IQ4_NL, iq4_nl) \
    X(MXFP4, mxfp4) X(Q2_K, q2_K) X(Q3_K, q3_K) X(Q4_K, q4_K) X(Q5_K, q5_K) X(Q6_K, q6_K) \
    X(IQ4_XS, iq4_xs) \
    X(IQ2_XXS, iq2_xxs) X(IQ2_XS, iq2_xs) X(IQ1_S, iq1_s) X(IQ1_M, iq1_m) \
    X(IQ3_XXS, iq3_xxs) X(IQ3_S, iq3_s) X(IQ2_S, iq2_s)
#define VD(T, t) [PK_TYPE_##T] = vec_dot_##t,
#define GV(T, t) [PK_TYPE_##T] = gemv_##t,

/* C = A B, each element summed in order of k */
static void sgemm(int M, int N, int K, const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                  int64_t ldc) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float s = 0.0f;
            for (int k = 0; k < K; k++) s += A[m * lda + k] * B[k * ldb + n];
            C[m * ldc + n] = s;
        }
}

static void exp_sub(float *x, int64_t n, float sub) {
    for (int64_t i = 0; i < n; i++) x[i] = expf(x[i] - sub);
}

static void softcap(float *x, int64_t n, float cap) {
    const float inv = 1.0f / cap;
    for (int64_t i = 0; i < n; i++) x[i] = tanhf(x[i] * inv) * cap;
}
/* The recurrence as written: decay, read S^T k, update, read S^T q. */
static void delta_step(float *S, int d, const float *q, const float *k, const float *v, float decay,
                       float beta, float *o) {
    float kv[PK_MAX_SSM_STATE];
    memset(kv, 0, (size_t)d * sizeof *kv);
    for (int i = 0; i < d; i++) {
        float *row = S + (size_t)i * d;
        for (int e = 0; e < d; e++) {
            row[e] *= decay;
            kv[e] += row[e] * k[i];
        }
    }
    for (int e = 0; e < d; e++) kv[e] = beta * (v[e] - kv[e]);   /* delta */
    memset(o, 0, (size_t)d * sizeof *o);
    for (int i = 0; i < d; i++) {
        float *row = S + (size_t)i * d;
        for (int e = 0; e < d; e++) {
            row[e] += k[i] * kv[e];
            o[e] += row[e] * q[i];
        }
    }
}

static void silu_mul(float *g, const float *u, int64_t n) {
    for (int64_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- attention over typed KV caches (kernels/kernels.h: pk_att_kq_fn / pv_fn) ----
 * Queries and probabilities stay F32; cached elements are widened to float
 * where they are used, never copied out as a whole:
 *   F16 keys:   s = sum over j, left to right, of q[j] * float(k[j]) (the
 *               widening is exact: every F16 value is a float);
 *   Q8_0 keys:  per block, b = sum over its 32 j of q[j] * qs[j] in float,
 *               then s += b * d (the block scale), blocks left to right;
 *   F16 values: o[e] += p * float(v[e]) for p = 0, 1, ... (zero p skipped);
 *   Q8_0 values: o[e] += (p * d) * qs[e] for p = 0, 1, ... (zero p skipped).
 * Against an F32 cache the only new error is the cache's rounding: F16
 * keeps 11 significant bits, Q8_0 a relative step of 1/127 of each block's
 * largest magnitude. */
static void att_kq_f16(int M, int nk, int n, const float *Q, int64_t ldq, const void *K, size_t stride,
                       float *S, int64_t lds) {
    for (int p = 0; p < nk; p++) {
        const uint16_t *k = (const uint16_t *)((const uint8_t *)K + (size_t)p * stride);
        for (int m = 0; m < M; m++) {
            const float *q = Q + m * ldq;
            float sum = 0.0f;
            for (int j = 0; j < n; j++) sum += q[j] * pk_fp16_to_fp32(k[j]);
            S[m * lds + p] = sum;
        }
    }
}

/* F16 keys in transposed tiles (pk_att_kqt_fn): each score one fmaf chain
 * over the elements in order, as the SIMD lanes compute it */
static void att_kqt(int M, int p0, int nk, int n, const float *Q, int64_t ldq, const uint16_t *K, float *S,
                    int64_t lds) {
    for (int j = 0; j < nk; j++) {
        const int p = p0 + j;
        const uint16_t *k = K + (size_t)(p / PK_KT) * (size_t)n * PK_KT + p % PK_KT;
        for (int m = 0; m < M; m++) {
            const float *q = Q + m * ldq;
            float sum = 0.0f;
            for (int e = 0; e < n; e++) sum = fmaf(q[e], pk_fp16_to_fp32(k[(size_t)e * PK_KT]), sum);
            S[m * lds + j] = sum;
        }
    }
}

static void att_kq_q8_0(int M, int nk, int n, const float *Q, int64_t ldq, const void *K, size_t stride,
                        float *S, int64_t lds) {
    for (int p = 0; p < nk; p++) {
        const pk_block_q8_0 *k = (const pk_block_q8_0 *)((const uint8_t *)K + (size_t)p * stride);
        for (int m = 0; m < M; m++) {
            const float *q = Q + m * ldq;
            float sum = 0.0f;
            for (int i = 0; i < n / PK_QK8_0; i++) {
                float b = 0.0f;
                for (int j = 0; j < PK_QK8_0; j++) b += q[i * PK_QK8_0 + j] * (float)k[i].qs[j];
                sum += b * pk_fp16_to_fp32(k[i].d);
            }
            S[m * lds + p] = sum;
        }
    }
}

int pk_att_live(int M, const float *P, int64_t ldp, int p0, int p1, int *idx) {
    int cnt = 0;
    for (int p = p0; p < p1; p++) {
        int nz = 0;
        for (int i = 0; i < M; i++) nz |= P[i * ldp + p] != 0.0f;
        idx[cnt] = p;
        cnt += nz;
    }
    return cnt;
}

static void att_pv_f16(int M, int nk, int n, const float *P, int64_t ldp, const void *V, size_t stride,
                       float *O, int64_t ldo) {
    for (int m = 0; m < M; m++) {
        float *o = O + m * ldo;
        for (int e = 0; e < n; e++) o[e] = 0.0f;
        for (int p = 0; p < nk; p++) {
            const float w = P[m * ldp + p];
            if (w == 0.0f) continue;
            const uint16_t *v = (const uint16_t *)((const uint8_t *)V + (size_t)p * stride);
            for (int e = 0; e < n; e++) o[e] += w * pk_fp16_to_fp32(v[e]);
        }
    }
}

static void att_pv_q8_0(int M, int nk, int n, const float *P, int64_t ldp, const void *V, size_t stride,
                        float *O, int64_t ldo) {
    for (int m = 0; m < M; m++) {
        float *o = O + m * ldo;
        for (int e = 0; e < n; e++) o[e] = 0.0f;
        for (int p = 0; p < nk; p++) {
            const float w = P[m * ldp + p];
            if (w == 0.0f) continue;
            const pk_block_q8_0 *v = (const pk_block_q8_0 *)((const uint8_t *)V + (size_t)p * stride);
            for (int i = 0; i < n / PK_QK8_0; i++) {
                const float wd = w * pk_fp16_to_fp32(v[i].d);
                for (int j = 0; j < PK_QK8_0; j++) o[i * PK_QK8_0 + j] += wd * (float)v[i].qs[j];
            }
        }
    }
}

const pk_kernels pk_kernels_ref_table = {
    .isa = "ref",
    .sgemm = sgemm,
    .exp_sub = exp_sub,
    .silu_mul = silu_mul,
    .gelu_mul = pk_gelu_mul,
    .softcap = softcap,
    .delta_step = delta_step,
    .att_kqt = att_kqt,
    .att_kq = {[PK_TYPE_F16] = att_kq_f16, [PK_TYPE_Q8_0] = att_kq_q8_0},
    .att_pv = {[PK_TYPE_F16] = att_pv_f16, [PK_TYPE_Q8_0] = att_pv_q8_0},
    .vec_dot = {
        [PK_TYPE_F32] = vec_dot_f32, [PK_TYPE_F16] = vec_dot_f16,
        [PK_TYPE_BF16] = vec_dot_bf16, [PK_TYPE_Q8_0] = vec_dot_q8_0,
        QTYPES(VD)
    },
    .gemv = {
        [PK_TYPE_F32] = gemv_f32, [PK_TYPE_F16] = gemv_f16,
        [PK_TYPE_BF16] = gemv_bf16, [PK_TYPE_Q8_0] = gemv_q8_0,
        QTYPES(GV)
    },
    .quantize = {
        [PK_TYPE_F32] = quantize_f32, [PK_TYPE_F16] = quantize_f16,
        [PK_TYPE_BF16] = quantize_bf16, [PK_TYPE_Q8_0] = quantize_q8_0,
        [PK_TYPE_Q8_1] = quantize_q8_1, [PK_TYPE_Q8_K] = quantize_q8_K,
    },
};
