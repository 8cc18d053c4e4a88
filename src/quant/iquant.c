/* quant/iquant.c - the non-linear 4-bit formats IQ4_NL (blocks of 32) and IQ4_XS
 * (super-blocks of 256 with 6-bit sub-block scales): scalar reference
 * dequantize and quantize.
 *
 * Tuned for: nothing - these define the formats. The quantizers follow
 * ggml's quantize_row_iq4_nl_impl (same searches, same float operations in
 * the same order) so that they write llama.cpp's bytes:
 *   from_float(IQ4_NL)  = quantize_row_iq4_nl_ref (no extra scale trials)
 *   pk_quantize_iq4_nl_full = quantize_iq4_nl (7 trials each side, what
 *                        llama-quantize writes)
 *   from_float(IQ4_XS)  = quantize_row_iq4_xs_ref = quantize_iq4_xs.
 * Importance weights: used exactly as ggml uses quant_weights (the weight of
 * element j becomes imp[j] * sqrt(sigma2 + x[j]^2) instead of x[j]^2).
 */
#include <math.h>
#include <string.h>
#include "quant/quant.h"

#define GROUP_MAX_EPS 1e-15f

const int8_t pk_iq4nl_values[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* Index of the level nearest x (ties to the lower level); NaN gives 15. */
static int best_index(const int8_t *val, float x) {
    if (x <= val[0]) return 0;
    if (!(x < val[15])) return 15;
    int ml = 0, mu = 15;
    while (mu - ml > 1) {
        int mid = (ml + mu) / 2;
        if (x < val[mid]) mu = mid; else ml = mid;
    }
    return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

/* One super-block of sbs elements in sub-blocks of 32. For sbs == 32 (IQ4_NL)
 * writes *dh and q4; for sbs == 256 (IQ4_XS) also the packed 6-bit scales.
 * ntry > 0: also try 2 * ntry + 1 inverse scales per sub-block. L persists
 * between calls (ggml keeps it too: a zero IQ4_NL block with ntry <= 0 reuses
 * the previous block's levels - harmless, as its d is 0). */
static void iq4_block(int sbs, const float *x, uint16_t *dh, uint8_t *q4, uint16_t *scales_h,
                      uint8_t *scales_l, float *scales, uint8_t *L, const float *qw, int ntry) {
    const int8_t *values = pk_iq4nl_values;
    float weight[32];
    float sigma2 = 0;
    for (int j = 0; j < sbs; j++) sigma2 += x[j] * x[j];
    sigma2 *= 2.0f / sbs;
    memset(q4, 0, (size_t)sbs / 2);
    *dh = pk_fp32_to_fp16(0.0f);

    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < sbs / 32; ib++) {
        const float *xb = x + 32 * ib;
        uint8_t *Lb = L + 32 * ib;
        if (qw)
            for (int j = 0; j < 32; j++) weight[j] = qw[32 * ib + j] * sqrtf(sigma2 + xb[j] * xb[j]);
        else
            for (int j = 0; j < 32; j++) weight[j] = xb[j] * xb[j];
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++) {
            float ax = fabsf(xb[j]);
            if (ax > amax) { amax = ax; max = xb[j]; }
        }
        if (amax < GROUP_MAX_EPS) {
            scales[ib] = 0;
            continue;
        }
        float d = ntry > 0 ? -max / values[0] : max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            int l = best_index(values, id * xb[j]);
            Lb[j] = (uint8_t)l;
            float q = values[l], w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.0f;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; itry++) {
            id = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < 32; j++) {
                int l = best_index(values, id * xb[j]);
                float q = values[l], w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        float abs_d = fabsf(d);
        if (abs_d > amax_scale) { amax_scale = abs_d; max_scale = d; }
    }

    if (sbs > 32) {
        *scales_h = 0;
        float d = -max_scale / 32;
        *dh = pk_fp32_to_fp16(d);
        float id = d ? 1 / d : 0.0f;
        for (int ib = 0; ib < sbs / 32; ib++) {
            int l = pk_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            float dl = d * l;
            float idl = dl ? 1 / dl : 0.0f;
            for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)best_index(values, idl * x[32 * ib + j]);
            l += 32;
            if (ib % 2 == 0) scales_l[ib / 2] = (uint8_t)(l & 0xF);
            else scales_l[ib / 2] |= (uint8_t)((l & 0xF) << 4);
            *scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
    } else {
        *dh = pk_fp32_to_fp16(scales[0]);
        if (ntry > 0) {
            float id = scales[0] ? 1 / scales[0] : 0;
            for (int j = 0; j < 32; j++) L[j] = (uint8_t)best_index(values, id * x[j]);
        }
    }
    for (int i = 0; i < sbs / 32; i++)
        for (int j = 0; j < 16; j++)
            q4[16 * i + j] = (uint8_t)(L[32 * i + j] | L[32 * i + 16 + j] << 4);
}

/* ---- IQ4_NL ------------------------------------------------------------------ */

void pk_iq4_nl_to_float(const void *src, float *y, int64_t n) {
    const pk_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / PK_QK4_NL; i++, y += PK_QK4_NL) {
        float d = pk_fp16_to_fp32(b[i].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * (float)pk_iq4nl_values[b[i].qs[j] & 0xF];
            y[j + 16] = d * (float)pk_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

static void iq4_nl_rows(const float *src, void *dst, int64_t n, const float *imp, int ntry) {
    pk_block_iq4_nl *b = dst;
    uint8_t L[32] = { 0 };
    float scale;
    for (int64_t i = 0; i < n / PK_QK4_NL; i++)
        iq4_block(32, src + 32 * i, &b[i].d, b[i].qs, NULL, NULL, &scale, L,
                  imp ? imp + 32 * i : NULL, ntry);
}

void pk_quantize_iq4_nl(const float *src, void *dst, int64_t n, const float *imp) {
    iq4_nl_rows(src, dst, n, imp, -1);
}
void pk_quantize_iq4_nl_full(const float *src, void *dst, int64_t n, const float *imp) {
    iq4_nl_rows(src, dst, n, imp, 7);
}
void pk_iq4_nl_from_float(const float *src, void *dst, int64_t n) {
    iq4_nl_rows(src, dst, n, NULL, -1);
}

/* ---- IQ4_XS ------------------------------------------------------------------ */

void pk_iq4_xs_to_float(const void *src, float *y, int64_t n) {
    const pk_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const uint8_t *qs = b[i].qs;
        float d = pk_fp16_to_fp32(b[i].d);
        for (int ib = 0; ib < 8; ib++, y += 32, qs += 16) {
            int ls = ((b[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xF) |
                     ((b[i].scales_h >> 2 * ib) & 3) << 4;
            float dl = d * (float)(ls - 32);
            for (int j = 0; j < 16; j++) {
                y[j] = dl * (float)pk_iq4nl_values[qs[j] & 0xF];
                y[j + 16] = dl * (float)pk_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

void pk_quantize_iq4_xs(const float *src, void *dst, int64_t n, const float *imp) {
    pk_block_iq4_xs *b = dst;
    uint8_t L[PK_QK_K] = { 0 };
    float scales[8];
    for (int64_t i = 0; i < n / PK_QK_K; i++)
        iq4_block(PK_QK_K, src + PK_QK_K * i, &b[i].d, b[i].qs, &b[i].scales_h, b[i].scales_l,
                  scales, L, imp ? imp + PK_QK_K * i : NULL, 7);
}

void pk_iq4_xs_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_iq4_xs(src, dst, n, NULL);
}
