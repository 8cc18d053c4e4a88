/* quant/kquant.c - the K-quant super-block formats Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 * and the Q8_K activation format: scalar reference dequantize and quantize.
 *
 * Tuned for: nothing - these define the formats. The quantizers follow
 * ggml's quantize_row_<type>_ref step by step (the same scale searches with
 * the same float operations in the same order, the same rounding helper) so
 * that, built without floating-point contraction (ISO C mode, as here), they
 * write the same bytes as llama.cpp's reference quantizers.
 *
 * Importance weights: the pk_quantize_* entry points accept `imp` but ignore
 * it for now (ggml's weighted quantize_row_<type>_impl is not yet ported), so
 * with or without imp they produce the _ref bytes.
 */
#include <math.h>
#include <string.h>
#include "quant/quant.h"

#define GROUP_MAX_EPS 1e-15f

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

/* ---- scale searches (after ggml's make_*_quants) ----------------------------- */

/* Symmetric: levels l in [-nmax, nmax - 1] (stored as l + nmax) with weights
 * x^2; tries 18 scales around -nmax / max and keeps the best weighted fit. */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, pk_nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, pk_nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = pk_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Symmetric 3-bit search: start from -nmax / max, then up to 5 passes of
 * moving single levels while the weighted (x^2) fit improves. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.0f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, pk_nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int nl = imax(-nmax, imin(nmax - 1, pk_nearest_int(x[i] * sl2 / slx)));
                if (nl != L[i]) {
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl; sumlx = slx; suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric search x ~ scale * l - the_min (l in [0, nmax], min <= 0):
 * weighted least squares over nstep + 1 trial inverse scales. */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights,
                              uint8_t *L, float *the_min, uint8_t *Laux, float rmin,
                              float rdelta, int nstep, int use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = pk_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)imax(0, imin(nmax, l));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, pk_nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * l;
            sum_l2 += w * l * l;
            sum_xl += w * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* ---- Q2_K ------------------------------------------------------------------- */

void pk_q2_K_to_float(const void *src, float *y, int64_t n) {
    const pk_block_q2_K *b = src;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        float d = pk_fp16_to_fp32(b[i].d), min = pk_fp16_to_fp32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        int is = 0;
        for (int h = 0; h < 2; h++, q += 32)
            for (int shift = 0; shift < 8; shift += 2)
                for (int half = 0; half < 2; half++) {
                    uint8_t sc = b[i].scales[is++];
                    float dl = d * (float)(sc & 0xF), ml = min * (float)(sc >> 4);
                    for (int l = 0; l < 16; l++)
                        *y++ = dl * (float)((q[16 * half + l] >> shift) & 3) - ml;
                }
    }
}

void pk_quantize_q2_K(const float *x, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q2_K *y = dst;
    uint8_t L[PK_QK_K], Laux[16];
    float weights[16], mins[PK_QK_K / 16], scales[PK_QK_K / 16];
    const float q4scale = 15.0f;
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < PK_QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux,
                                         -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = q4scale / max_scale;
            for (int j = 0; j < PK_QK_K / 16; j++)
                y[i].scales[j] = (uint8_t)pk_nearest_int(iscale * scales[j]);
            y[i].d = pk_fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < PK_QK_K / 16; j++) y[i].scales[j] = 0;
            y[i].d = pk_fp32_to_fp16(0.0f);
        }
        if (max_min > 0) {
            float iscale = q4scale / max_min;
            for (int j = 0; j < PK_QK_K / 16; j++)
                y[i].scales[j] |= (uint8_t)((unsigned)pk_nearest_int(iscale * mins[j]) << 4); /* NaN in: no UB */
            y[i].dmin = pk_fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = pk_fp32_to_fp16(0.0f);
        }
        for (int j = 0; j < PK_QK_K / 16; j++) {
            float d = pk_fp16_to_fp32(y[i].d) * (float)(y[i].scales[j] & 0xF);
            if (!d) continue;
            float dm = pk_fp16_to_fp32(y[i].dmin) * (float)(y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                int l = pk_nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = (uint8_t)imax(0, imin(3, l));
            }
        }
        for (int j = 0; j < PK_QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 |
                                               L[j + l + 64] << 4 | L[j + l + 96] << 6);
    }
}

void pk_q2_K_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q2_K(src, dst, n, NULL);
}

/* ---- Q3_K ------------------------------------------------------------------- */

void pk_q3_K_to_float(const void *src, float *y, int64_t n) {
    const pk_block_q3_K *b = src;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        float d_all = pk_fp16_to_fp32(b[i].d);
        int8_t sc[16];
        pk_q3_K_scales(b[i].scales, sc);
        const uint8_t *q = b[i].qs, *hm = b[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int h = 0; h < 2; h++, q += 32)
            for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1))
                for (int half = 0; half < 2; half++) {
                    float dl = d_all * (float)sc[is++];
                    for (int l = 16 * half; l < 16 * half + 16; l++)
                        *y++ = dl * (float)(((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
                }
    }
}

void pk_quantize_q3_K(const float *x, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q3_K *y = dst;
    int8_t L[PK_QK_K];
    float scales[PK_QK_K / 16];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < PK_QK_K / 16; j++) {
            scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            float scale = fabsf(scales[j]);
            if (scale > amax) { amax = scale; max_scale = scales[j]; }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            float iscale = -32.0f / max_scale;
            for (int j = 0; j < PK_QK_K / 16; j++) {
                int l = (int8_t)pk_nearest_int(iscale * scales[j]);
                l = imax(-32, imin(31, l)) + 32;
                if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
                else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                y[i].scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[i].d = pk_fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = pk_fp32_to_fp16(0.0f);
        }
        int8_t sc[16];
        pk_q3_K_scales(y[i].scales, sc);
        for (int j = 0; j < PK_QK_K / 16; j++) {
            float d = pk_fp16_to_fp32(y[i].d) * (float)sc[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = pk_nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-4, imin(3, l)) + 4);
            }
        }
        /* third bits: element e -> bit e / 32 of hmask[e % 32] */
        memset(y[i].hmask, 0, PK_QK_K / 8);
        for (int j = 0; j < PK_QK_K; j++)
            if (L[j] > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1 << (j / 32));
                L[j] = (int8_t)(L[j] - 4);
            }
        for (int j = 0; j < PK_QK_K; j += 128)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 |
                                               L[j + l + 64] << 4 | L[j + l + 96] << 6);
    }
}

void pk_q3_K_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q3_K(src, dst, n, NULL);
}

/* ---- Q4_K / Q5_K: shared scale search and 6-bit scale packing --------------------- */

/* Fills packed scales[12] and d, dmin of a Q4_K / Q5_K block from 8 sub-block
 * searches over x (levels 0..nmax), and re-quantizes L against the rounded
 * scales, as ggml's quantize_row_q{4,5}_K_ref. */
static void k4_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *packed,
                      uint16_t *d16, uint16_t *dmin16, uint8_t *L) {
    float mins[8], scales[8], weights[32];
    uint8_t Laux[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux,
                                     rmin, 0.1f, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < 8; j++) {
        uint8_t a = (uint8_t)pk_nearest_int(inv_scale * scales[j]);
        uint8_t b = (uint8_t)pk_nearest_int(inv_min * mins[j]);
        ls[j] = a > 63 ? 63 : a;
        lm[j] = b > 63 ? 63 : b;
    }
    pk_set_scale_min_k4(packed, ls, lm);
    *d16 = pk_fp32_to_fp16(max_scale / 63.0f);
    *dmin16 = pk_fp32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        pk_get_scale_min_k4(j, packed, &sc, &m);
        float d = pk_fp16_to_fp32(*d16) * (float)sc;
        if (!d) continue;
        float dm = pk_fp16_to_fp32(*dmin16) * (float)m;
        for (int ii = 0; ii < 32; ii++) {
            int l = pk_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)imax(0, imin(nmax, l));
        }
    }
}

void pk_q4_K_to_float(const void *src, float *y, int64_t n) {
    const pk_block_q4_K *b = src;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const uint8_t *q = b[i].qs;
        float d = pk_fp16_to_fp32(b[i].d), min = pk_fp16_to_fp32(b[i].dmin);
        for (int j = 0; j < 8; j += 2, q += 32) {
            uint8_t sc, m;
            pk_get_scale_min_k4(j, b[i].scales, &sc, &m);
            float d1 = d * (float)sc, m1 = min * (float)m;
            pk_get_scale_min_k4(j + 1, b[i].scales, &sc, &m);
            float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
        }
    }
}

void pk_quantize_q4_K(const float *x, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q4_K *y = dst;
    uint8_t L[PK_QK_K];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K) {
        memset(y[i].scales, 0, sizeof y[i].scales);
        k4_scales(x, 15, -1.0f, 20, y[i].scales, &y[i].d, &y[i].dmin, L);
        for (int j = 0; j < PK_QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

void pk_q4_K_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q4_K(src, dst, n, NULL);
}

void pk_q5_K_to_float(const void *src, float *y, int64_t n) {
    const pk_block_q5_K *b = src;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const uint8_t *ql = b[i].qs, *qh = b[i].qh;
        float d = pk_fp16_to_fp32(b[i].d), min = pk_fp16_to_fp32(b[i].dmin);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < 8; j += 2, ql += 32, u1 = (uint8_t)(u1 << 2), u2 = (uint8_t)(u2 << 2)) {
            uint8_t sc, m;
            pk_get_scale_min_k4(j, b[i].scales, &sc, &m);
            float d1 = d * (float)sc, m1 = min * (float)m;
            pk_get_scale_min_k4(j + 1, b[i].scales, &sc, &m);
            float d2 = d * (float)sc, m2 = min * (float)m;
            for (int l = 0; l < 32; l++)
                *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++)
                *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

void pk_quantize_q5_K(const float *x, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q5_K *y = dst;
    uint8_t L[PK_QK_K];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K) {
        memset(y[i].scales, 0, sizeof y[i].scales);
        k4_scales(x, 31, -0.5f, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        memset(y[i].qh, 0, sizeof y[i].qh);
        for (int h = 0; h < 4; h++)
            for (int j = 0; j < 32; j++) {
                int l1 = L[64 * h + j], l2 = L[64 * h + j + 32];
                if (l1 > 15) { l1 -= 16; y[i].qh[j] |= (uint8_t)(1 << (2 * h)); }
                if (l2 > 15) { l2 -= 16; y[i].qh[j] |= (uint8_t)(2 << (2 * h)); }
                y[i].qs[32 * h + j] = (uint8_t)(l1 | l2 << 4);
            }
    }
}

void pk_q5_K_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q5_K(src, dst, n, NULL);
}

/* ---- Q6_K ------------------------------------------------------------------- */

void pk_q6_K_to_float(const void *src, float *y, int64_t n) {
    const pk_block_q6_K *b = src;
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        float d = pk_fp16_to_fp32(b[i].d);
        const uint8_t *ql = b[i].ql, *qh = b[i].qh;
        const int8_t *sc = b[i].scales;
        for (int h = 0; h < 2; h++, y += 128, ql += 64, qh += 32, sc += 8)
            for (int l = 0; l < 32; l++) {
                int is = l / 16;
                int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
    }
}

void pk_quantize_q6_K(const float *x, void *dst, int64_t n, const float *imp) {
    (void)imp;
    pk_block_q6_K *y = dst;
    int8_t L[PK_QK_K];
    float scales[PK_QK_K / 16];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < PK_QK_K / 16; ib++) {
            scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
            float abs_scale = fabsf(scales[ib]);
            if (abs_scale > max_abs_scale) { max_abs_scale = abs_scale; max_scale = scales[ib]; }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        float iscale = -128.0f / max_scale;
        y[i].d = pk_fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < PK_QK_K / 16; ib++)
            y[i].scales[ib] = (int8_t)imin(127, pk_nearest_int(iscale * scales[ib]));
        for (int j = 0; j < PK_QK_K / 16; j++) {
            float d = pk_fp16_to_fp32(y[i].d) * (float)y[i].scales[j];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = pk_nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = (int8_t)(imax(-32, imin(31, l)) + 32);
            }
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < PK_QK_K; j += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
                int q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = (uint8_t)(q1 | q3 << 4);
                ql[l + 32] = (uint8_t)(q2 | q4 << 4);
                qh[l] = (uint8_t)((L[j + l] >> 4) | (L[j + l + 32] >> 4) << 2 |
                                  (L[j + l + 64] >> 4) << 4 | (L[j + l + 96] >> 4) << 6);
            }
    }
}

void pk_q6_K_from_float(const float *src, void *dst, int64_t n) {
    pk_quantize_q6_K(src, dst, n, NULL);
}

/* ---- Q8_K ------------------------------------------------------------------- */

void pk_q8_K_to_float(const void *src, float *y, int64_t n) {
    const pk_block_q8_K *b = src;
    for (int64_t i = 0; i < n / PK_QK_K; i++)
        for (int j = 0; j < PK_QK_K; j++) *y++ = b[i].d * (float)b[i].qs[j];
}

/* As ggml's quantize_row_q8_K_ref: the first element of largest magnitude
 * (sign kept) maps to -127; q = min(127, pk_nearest_int(-127 / max * x)), so q
 * is in [-127, 127] for finite input; d = 1 / iscale stored as float. */
void pk_q8_K_from_float(const float *x, void *dst, int64_t n) {
    pk_block_q8_K *y = dst;
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < PK_QK_K; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (!amax) {
            y[i].d = 0;
            memset(y[i].qs, 0, PK_QK_K);
            memset(y[i].bsums, 0, sizeof y[i].bsums);   /* ggml leaves them unset */
            continue;
        }
        float iscale = -127.0f / max;
        for (int j = 0; j < PK_QK_K; j++)
            y[i].qs[j] = (int8_t)imax(-128, imin(127, pk_nearest_int(iscale * x[j])));
        for (int j = 0; j < PK_QK_K / 16; j++) {
            int sum = 0;
            for (int ii = 0; ii < 16; ii++) sum += y[i].qs[16 * j + ii];
            y[i].bsums[j] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}
