/* quant/imat.c - importance-weighted quantizers for Q2_K..Q6_K,
 * Q4_0/Q4_1/Q5_0/Q5_1, IQ2_XXS and IQ2_XS (contract in quant/imat.h).
 *
 * The approach is ggml's (quantize_row_<type>_impl in ggml-quants.c, used by
 * llama-quantize when it is given an imatrix): every element gets a weight
 * w_j from its column's importance, each (sub-)block's scale (and min) is the
 * weighted least-squares fit found by searching a grid of trial inverse scales
 * around the range-based one, and the K-quants' per-sub-block scales are
 * quantized against the super-block scale with a weighted fit too (weights:
 * the sub-block's total element weight) instead of plain rounding. Elements
 * are then re-rounded against the stored (fp16 / 4-6 bit) scales.
 *
 * Block layouts, packing and the unweighted paths come from quant/quant.h and
 * quant/kquant.c / quant/legacy.c; nothing here changes those files' results.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "core/common.h"
#include "quant/quant.h"
#include "quant/imat.h"

#define GROUP_MAX_EPS 1e-15f

/* Round to nearest, ties to even (the trick quant/kquant.c uses); exact for
 * |v| <= 2^22, some int without UB otherwise. */
static inline int nearest_int(float v) {
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- weighted scale searches ------------------------------------------------ */

/* Symmetric fit x ~ scale * l, l in [-nmax, nmax - 1], stored as l + nmax in
 * L. Trial inverse scales -(nmax + 0.1 k) / max (k = -9..9, max the signed
 * value of largest magnitude); for each the least-squares scale is
 * sum(w x l) / sum(w l^2), and the trial with the largest explained weighted
 * energy sum(w x l)^2 / sum(w l^2) wins. Returns the scale (0 for an all-zero
 * block or all-zero weights). */
static float fit_sym(int n, int nmax, const float *x, const float *w, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) { amax = ax; max = x[i]; }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        L[i] = (int8_t)(l + nmax);
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int k = -9; k <= 9; k++) {
        if (k == 0) continue;
        iscale = -(nmax + 0.1f * k) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            sumlx += w[i] * x[i] * l;
            suml2 += w[i] * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Asymmetric fit x ~ scale * l - m (l in [0, nmax], m >= 0 returned in
 * *the_min): starts from the range [min(x, 0), max x], then for nstep + 1
 * trial inverse scales (rmin + rdelta * k + nmax) / range rounds the levels
 * and solves the 2x2 weighted least-squares problem for (scale, offset)
 * (offset clamped to <= 0); keeps the trial with the smallest weighted
 * squared error (mad: weighted absolute error). */
static float fit_asym(int n, int nmax, const float *x, const float *w, uint8_t *L,
                      float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep, int mad) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = w[0] * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max <= min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
        float d = scale * L[i] + min - x[i];
        best += w[i] * (mad ? fabsf(d) : d * d);
    }
    for (int k = 0; k <= nstep; k++) {
        iscale = (rmin + rdelta * k + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float s = (sum_w * sum_xl - sum_x * sum_l) / D;
            float m = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (m > 0) {
                m = 0;
                s = sum_xl / sum_l2;
            }
            float err = 0;
            for (int i = 0; i < n; i++) {
                float d = s * Laux[i] + m - x[i];
                err += w[i] * (mad ? fabsf(d) : d * d);
            }
            if (err < best) {
                memcpy(L, Laux, (size_t)n);
                best = err;
                scale = s;
                min = m;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Fit of values x, meant to be non-negative (sub-block scales or mins; the
 * IQ2 magnitudes, of which one per group may be negative), as scale * l,
 * l <= nmax: the best of 9 trial inverse scales (nmax + 0.1 k) / max by
 * weighted squared error, then up to 5 passes moving single levels while the
 * weighted fit improves. Returns the scale; L receives the levels. This is
 * ggml's make_qp_quants operation for operation (IQ2_XXS's scale search
 * starts from it): levels are only bounded above, and a negative level is
 * stored, and then read back, as its byte (mod 256), as ggml's is. */
static float fit_pos(int n, int nmax, const float *x, uint8_t *L, const float *w) {
    float max = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > max) max = x[i];
    if (max < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = nmax / max, best = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)nearest_int(iscale * x[i]);
        float d = x[i] - 1 / iscale * L[i];
        best += w[i] * d * d;
    }
    for (int k = -4; k <= 4; k++) {
        if (k == 0) continue;
        float is = (0.1f * k + nmax) / max, s = 1 / is, err = 0;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(is * x[i]);
            float d = x[i] - s * (l < nmax ? l : nmax);
            err += w[i] * d * d;
        }
        if (err < best) {
            best = err;
            iscale = is;
        }
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        if (l > nmax) l = nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * l;
        suml2 += w[i] * l * l;
    }
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = sumlx - w[i] * x[i] * L[i], sl2 = suml2 - w[i] * L[i] * L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            int nl = nearest_int(x[i] * sl2 / slx);
            if (nl > nmax) nl = nmax;
            if (nl == L[i]) continue;
            slx += w[i] * x[i] * nl;
            sl2 += w[i] * nl * nl;
            if (slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (uint8_t)nl;
                sumlx = slx;
                suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* w[j] = imp[j] * sqrt(sigma2 + x[j]^2) for j < n; returns sum of w. */
static float element_weights(int n, const float *x, const float *imp, float sigma2, float *w) {
    float s = 0;
    for (int j = 0; j < n; j++) s += (w[j] = imp[j] * sqrtf(sigma2 + x[j] * x[j]));
    return s;
}

static float sum_sq(const float *x, int64_t n) {
    float s = 0;
    for (int64_t j = 0; j < n; j++) s += x[j] * x[j];
    return s;
}

/* ---- K-quants --------------------------------------------------------------- */

/* 2-bit levels of a Q2_K / Q3_K block: element 128h + 32k + l at bits 2k of qs[32h + l]. */
static void pack_2bit(const int8_t *L, uint8_t *qs) {
    for (int j = 0; j < PK_QK_K; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 |
                                      L[j + l + 96] << 6);
}

/* Q2_K: ggml's weighted Q2_K (squared error, w = imp * sqrt(sigma2 + x^2),
 * 37 trial scales, weighted fits of the 4-bit sub-block scales) measured worse
 * than the unweighted quantizer on pocket's MoE test model (mean KLD 0.0303
 * vs 0.0268 on valid.txt), even with an imatrix of the evaluation text. What
 * works is the unweighted quantizer's own search (weighted absolute error, 16
 * trial scales, scales rounded against the largest) with its weights |x_j|
 * multiplied by the importance: w_j = imp[j] * |x_j|. */
void pk_quantize_q2_K_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q2_K(x, dst, n, NULL); return; }
    pk_block_q2_K *y = dst;
    uint8_t L[PK_QK_K], Laux[16], Ls[16], Lm[16];
    int8_t Lq[PK_QK_K];
    float w[16], scales[16], mins[16];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K, imp += PK_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = imp[16 * j + l] * fabsf(x[16 * j + l]);
            scales[j] = fit_asym(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        for (int j = 0; j < 16; j++) {
            Ls[j] = max_scale > 0 ? (uint8_t)clampi(nearest_int(15 / max_scale * scales[j]), 0, 15) : 0;
            Lm[j] = max_min > 0 ? (uint8_t)clampi(nearest_int(15 / max_min * mins[j]), 0, 15) : 0;
        }
        y[i].d = pk_fp32_to_fp16(max_scale / 15);
        y[i].dmin = pk_fp32_to_fp16(max_min / 15);
        const float dm = pk_fp16_to_fp32(y[i].d), mm = pk_fp16_to_fp32(y[i].dmin);
        for (int j = 0; j < 16; j++) {
            y[i].scales[j] = (uint8_t)(Ls[j] | Lm[j] << 4);
            const float d = dm * Ls[j], m = mm * Lm[j];
            for (int l = 0; l < 16; l++)
                Lq[16 * j + l] = (int8_t)(d ? clampi(nearest_int((x[16 * j + l] + m) / d), 0, 3)
                                            : L[16 * j + l]);
        }
        pack_2bit(Lq, y[i].qs);
    }
}

void pk_quantize_q3_K_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q3_K(x, dst, n, NULL); return; }
    pk_block_q3_K *y = dst;
    int8_t L[PK_QK_K], Ls[16], sc[16];
    float w[16], sw[16], scales[16];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K, imp += PK_QK_K) {
        const float sigma2 = 2 * sum_sq(x, PK_QK_K) / PK_QK_K;
        for (int j = 0; j < 16; j++) {
            sw[j] = element_weights(16, x + 16 * j, imp + 16 * j, sigma2, w);
            scales[j] = fit_sym(16, 4, x + 16 * j, w, L + 16 * j);
        }
        /* 6-bit signed sub-block scales (stored + 32) against one fp16 scale */
        const float d_block = fit_sym(16, 32, scales, sw, Ls);
        memset(y[i].scales, 0, sizeof y[i].scales);
        for (int j = 0; j < 16; j++) {
            int l = Ls[j];
            if (j < 8) y[i].scales[j] = (uint8_t)(l & 0xF);
            else y[i].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
            y[i].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        y[i].d = pk_fp32_to_fp16(d_block);
        pk_q3_K_scales(y[i].scales, sc);
        for (int j = 0; j < 16; j++) {
            const float d = pk_fp16_to_fp32(y[i].d) * sc[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clampi(nearest_int(x[16 * j + l] / d), -4, 3) + 4);
        }
        memset(y[i].hmask, 0, sizeof y[i].hmask);
        for (int j = 0; j < PK_QK_K; j++)
            if (L[j] > 3) {
                y[i].hmask[j % 32] |= (uint8_t)(1 << (j / 32));
                L[j] = (int8_t)(L[j] - 4);
            }
        pack_2bit(L, y[i].qs);
    }
}

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scale and min. Fills scales[12],
 * d, dmin and the levels L (0..nmax) re-rounded against the stored scales. */
static void k4_imat_block(const float *x, const float *imp, int nmax, uint8_t *packed,
                          uint16_t *d16, uint16_t *dmin16, uint8_t *L) {
    float w[32], sw[8], scales[8], mins[8];
    uint8_t Laux[32], Ls[8], Lm[8];
    const float sigma2 = 2 * sum_sq(x, PK_QK_K) / PK_QK_K;
    for (int j = 0; j < 8; j++) {
        sw[j] = element_weights(32, x + 32 * j, imp + 32 * j, sigma2, w);
        scales[j] = fit_asym(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, 0);
    }
    const float d_block = fit_pos(8, 63, scales, Ls, sw);
    const float m_block = fit_pos(8, 63, mins, Lm, sw);
    pk_set_scale_min_k4(packed, Ls, Lm);
    *d16 = pk_fp32_to_fp16(d_block);
    *dmin16 = pk_fp32_to_fp16(m_block);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        pk_get_scale_min_k4(j, packed, &sc, &m);
        const float d = pk_fp16_to_fp32(*d16) * sc;
        if (!d) continue;
        const float dm = pk_fp16_to_fp32(*dmin16) * m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clampi(nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

void pk_quantize_q4_K_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q4_K(x, dst, n, NULL); return; }
    pk_block_q4_K *y = dst;
    uint8_t L[PK_QK_K];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K, imp += PK_QK_K) {
        k4_imat_block(x, imp, 15, y[i].scales, &y[i].d, &y[i].dmin, L);
        for (int j = 0; j < PK_QK_K; j += 64)
            for (int l = 0; l < 32; l++)
                y[i].qs[j / 2 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
    }
}

void pk_quantize_q5_K_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q5_K(x, dst, n, NULL); return; }
    pk_block_q5_K *y = dst;
    uint8_t L[PK_QK_K];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K, imp += PK_QK_K) {
        k4_imat_block(x, imp, 31, y[i].scales, &y[i].d, &y[i].dmin, L);
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

/* Q6_K: as the unweighted quantizer, but each sub-block's scale search is
 * weighted by the raw importances (ggml does the same). */
void pk_quantize_q6_K_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q6_K(x, dst, n, NULL); return; }
    pk_block_q6_K *y = dst;
    int8_t L[PK_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / PK_QK_K; i++, x += PK_QK_K, imp += PK_QK_K) {
        float max_scale = 0, max_abs = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = fit_sym(16, 32, x + 16 * j, imp + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > max_abs) { max_abs = fabsf(scales[j]); max_scale = scales[j]; }
        }
        if (max_abs < GROUP_MAX_EPS) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = -128.0f / max_scale;
        y[i].d = pk_fp32_to_fp16(1 / iscale);
        for (int j = 0; j < 16; j++) y[i].scales[j] = (int8_t)clampi(nearest_int(iscale * scales[j]), -128, 127);
        for (int j = 0; j < 16; j++) {
            const float d = pk_fp16_to_fp32(y[i].d) * y[i].scales[j];
            if (!d) continue;
            for (int l = 0; l < 16; l++)
                L[16 * j + l] = (int8_t)(clampi(nearest_int(x[16 * j + l] / d), -32, 31) + 32);
        }
        uint8_t *ql = y[i].ql, *qh = y[i].qh;
        for (int j = 0; j < PK_QK_K; j += 128, ql += 64, qh += 32)
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((L[j + l] & 0xF) | (L[j + l + 64] & 0xF) << 4);
                ql[l + 32] = (uint8_t)((L[j + l + 32] & 0xF) | (L[j + l + 96] & 0xF) << 4);
                qh[l] = (uint8_t)((L[j + l] >> 4) | (L[j + l + 32] >> 4) << 2 |
                                  (L[j + l + 64] >> 4) << 4 | (L[j + l + 96] >> 4) << 6);
            }
    }
}

/* ---- legacy 32-element formats (sigma2 over the whole row, as ggml) ------------- */

static void store_qh(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

void pk_quantize_q4_0_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q4_0(x, dst, n, NULL); return; }
    pk_block_q4_0 *y = dst;
    const float sigma2 = n > 0 ? sum_sq(x, n) / (float)n : 0.0f;
    float w[32];
    int8_t L[32];
    for (int64_t i = 0; i < n / 32; i++) {
        element_weights(32, x + 32 * i, imp + 32 * i, sigma2, w);
        y[i].d = pk_fp32_to_fp16(fit_sym(32, 8, x + 32 * i, w, L));
        for (int j = 0; j < 16; j++) y[i].qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
    }
}

void pk_quantize_q5_0_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q5_0(x, dst, n, NULL); return; }
    pk_block_q5_0 *y = dst;
    const float sigma2 = n > 0 ? sum_sq(x, n) / (float)n : 0.0f;
    float w[32];
    int8_t L[32];
    for (int64_t i = 0; i < n / 32; i++) {
        element_weights(32, x + 32 * i, imp + 32 * i, sigma2, w);
        y[i].d = pk_fp32_to_fp16(fit_sym(32, 16, x + 32 * i, w, L));
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            y[i].qs[j] = (uint8_t)((L[j] & 0xF) | (L[j + 16] & 0xF) << 4);
            qh |= (uint32_t)((L[j] >> 4) & 1) << j | (uint32_t)((L[j + 16] >> 4) & 1) << (j + 16);
        }
        store_qh(y[i].qh, qh);
    }
}

void pk_quantize_q4_1_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q4_1(x, dst, n, NULL); return; }
    pk_block_q4_1 *y = dst;
    const float sigma2 = n > 0 ? sum_sq(x, n) / (float)n : 0.0f;
    float w[32], min;
    uint8_t L[32], Laux[32];
    for (int64_t i = 0; i < n / 32; i++) {
        element_weights(32, x + 32 * i, imp + 32 * i, sigma2, w);
        const float d = fit_asym(32, 15, x + 32 * i, w, L, &min, Laux, -0.9f, 0.05f, 36, 0);
        y[i].d = pk_fp32_to_fp16(d);
        y[i].m = pk_fp32_to_fp16(-min);
        for (int j = 0; j < 16; j++) y[i].qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
    }
}

void pk_quantize_q5_1_imat(const float *x, void *dst, int64_t n, const float *imp) {
    if (!imp) { pk_quantize_q5_1(x, dst, n, NULL); return; }
    pk_block_q5_1 *y = dst;
    const float sigma2 = n > 0 ? sum_sq(x, n) / (float)n : 0.0f;
    float w[32], min;
    uint8_t L[32], Laux[32];
    for (int64_t i = 0; i < n / 32; i++) {
        element_weights(32, x + 32 * i, imp + 32 * i, sigma2, w);
        const float d = fit_asym(32, 31, x + 32 * i, w, L, &min, Laux, -0.9f, 0.05f, 36, 0);
        y[i].d = pk_fp32_to_fp16(d);
        y[i].m = pk_fp32_to_fp16(-min);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            y[i].qs[j] = (uint8_t)((L[j] & 0xF) | (L[j + 16] & 0xF) << 4);
            qh |= (uint32_t)(L[j] >> 4) << j | (uint32_t)(L[j + 16] >> 4) << (j + 16);
        }
        store_qh(y[i].qh, qh);
    }
}

/* ---- IQ2_XXS, IQ2_XS ----------------------------------------------------------
 * ggml's quantize_row_iq2_xxs_impl / quantize_row_iq2_xs_impl step for step
 * (the same searches, the same float operations in the same order), so the
 * bytes are llama-quantize's. Per group of 8 the signs come from x (the
 * format stores an even count of minus signs: with an odd count, the element
 * of least weighted energy w x^2 keeps its level but not its sign, and is
 * fitted as -|x|); the magnitudes are fitted as scale * (2 l + 1), l in
 * {0, 1, 2}, over trial scales (IQ2_XXS: 13 around a first fit of the
 * sub-block of 32, IQ2_XS: 19 around max / 5 for each half of 16); a group
 * whose levels are not a grid point takes the grid point, among those of
 * the two smallest distances to its levels, of least weighted squared error
 * (weights sqrt(w)); the scale of the best trial is refined by least
 * squares, and the sub-block scales are coded against d = max scale / 31. */

enum { IQ2_NU = 0xAAAA + 1 };              /* level vectors u: 8 x 2 bits, each <= 2 */
enum { IQ2_NB_XXS = 6305 + 113157,         /* neighbour lists: per point off the grid, */
       IQ2_NB_XS = 6049 + 181721 };        /* a count, then that many grid indices */

typedef struct {
    const uint64_t *grid;                  /* the format's points (bytes 8, 25, 43) */
    int npts;
    uint16_t pts[512];                     /* point j as its level vector u */
    int32_t map[IQ2_NU];                   /* u: point index, or -1 - offset of its list */
    uint16_t *nb;
    int nb_cap;
} iq2_tab;

static uint16_t iq2_nb_xxs[IQ2_NB_XXS], iq2_nb_xs[IQ2_NB_XS];
static iq2_tab iq2_tabs[2] = {
    {.grid = pk_iq2xxs_grid, .npts = 256, .nb = iq2_nb_xxs, .nb_cap = IQ2_NB_XXS},
    {.grid = pk_iq2xs_grid, .npts = 512, .nb = iq2_nb_xs, .nb_cap = IQ2_NB_XS},
};
static pthread_once_t iq2_once = PTHREAD_ONCE_INIT;

static int iq2_level(uint64_t point, int j) {
    const int v = (uint8_t)(point >> 8 * j);
    return v == 8 ? 0 : v == 25 ? 1 : 2;
}

/* squared distance of level vectors (in units of the 2 l + 1 coordinates / 2) */
static int iq2_dist(unsigned u, unsigned v) {
    int d = 0;
    for (int j = 0; j < 8; j++) {
        const int a = (int)((u >> 2 * j) & 3) - (int)((v >> 2 * j) & 3);
        d += a * a;
    }
    return d;
}

/* The map and, for every u with all levels <= 2 off the grid, its list: the
 * points at the smallest and the next smallest distance, by distance then
 * index (ggml's neighbour lists, which ggml also makes for the unreachable
 * u with a level 3). The list sizes are the grids': the capacities above
 * are their exact totals (test_iq2.c quantizes through every list). */
static void iq2_build(iq2_tab *t) {
    for (int u = 0; u < IQ2_NU; u++) t->map[u] = INT32_MIN;
    for (int j = 0; j < t->npts; j++) {
        unsigned u = 0;
        for (int k = 0; k < 8; k++) u |= (unsigned)iq2_level(t->grid[j], k) << 2 * k;
        t->pts[j] = (uint16_t)u;
        t->map[u] = j;
    }
    int used = 0;
    for (unsigned u = 0; u < IQ2_NU; u++) {
        int ok = 1;
        for (int k = 0; k < 8; k++) ok &= ((u >> 2 * k) & 3) != 3;
        if (!ok || t->map[u] >= 0) continue;
        int d0 = INT32_MAX, d1 = INT32_MAX;
        for (int j = 0; j < t->npts; j++) {
            const int d = iq2_dist(u, t->pts[j]);
            if (d < d0) { d1 = d0; d0 = d; }
            else if (d > d0 && d < d1) d1 = d;
        }
        int cnt = 0;
        for (int j = 0; j < t->npts; j++) cnt += iq2_dist(u, t->pts[j]) <= d1;
        PK_ASSERT(used + 1 + cnt <= t->nb_cap);
        if (used + 1 + cnt > t->nb_cap) continue;          /* never with these grids */
        t->map[u] = -1 - used;
        t->nb[used++] = (uint16_t)cnt;
        for (int pass = 0; pass < 2; pass++)
            for (int j = 0; j < t->npts; j++)
                if (iq2_dist(u, t->pts[j]) == (pass ? d1 : d0)) t->nb[used++] = (uint16_t)j;
    }
}

static void iq2_build_all(void) {
    iq2_build(&iq2_tabs[0]);
    iq2_build(&iq2_tabs[1]);
}

/* u of 8 levels */
static unsigned iq2_pack(const int8_t *L) {
    unsigned u = 0;
    for (int i = 0; i < 8; i++) u |= (unsigned)L[i] << 2 * i;
    return u;
}

/* The grid index of levels L (8, each 0..2) fitted to xv with weights wv at
 * scale: L's own point, or its list's best point (written to L). */
static int iq2_point(const iq2_tab *t, int8_t *L, const float *xv, const float *wv, float scale, int *on_grid) {
    const unsigned u = iq2_pack(L);
    int32_t m = t->map[u];
    *on_grid = m >= 0;
    if (m >= 0) return m;
    if (m == INT32_MIN) return 0;                          /* no list: never with these grids */
    const uint16_t *nb = t->nb + (-1 - m);
    float best = FLT_MAX;
    int idx = nb[1];
    for (int c = 1; c <= nb[0]; c++) {
        const unsigned v = t->pts[nb[c]];
        float d2 = 0;
        for (int i = 0; i < 8; i++) {
            const float diff = scale * (float)(2 * (int)((v >> 2 * i) & 3) + 1) - xv[i];
            d2 += wv[i] * diff * diff;
        }
        if (d2 < best) {
            best = d2;
            idx = nb[c];
        }
    }
    for (int i = 0; i < 8; i++) L[i] = (int8_t)((t->pts[idx] >> 2 * i) & 3);
    return idx;
}

/* levels l = round((x / scale - 1) / 2) clamped to 0..2, from id = 1 / scale */
static void iq2_round(const float *xv, float id, int8_t *L) {
    for (int i = 0; i < 8; i++) L[i] = (int8_t)clampi(nearest_int(0.5f * (id * xv[i] - 1)), 0, 2);
}

/* sum w x q and sum w q^2 of n elements at levels L, q = 2 l + 1 */
static void iq2_sums(int n, const float *w, const float *xv, const int8_t *L, float *sqx, float *sq2) {
    float a = 0, b = 0;
    for (int i = 0; i < n; i++) {
        const float q = (float)(2 * L[i] + 1);
        a += w[i] * xv[i] * q;
        b += w[i] * q * q;
    }
    *sqx = a;
    *sq2 = b;
}

/* Element weights, |x| with the group signs, sqrt weights for one sub-block
 * of n (32 or 16) at x; signs[k]: the 7 stored sign bits of group k. */
static void iq2_prepare(int n, const float *x, const float *imp, float sigma2, float *w, float *xv, float *wv,
                        uint8_t *signs) {
    for (int i = 0; i < n; i++) w[i] = imp[i] * sqrtf(sigma2 + x[i] * x[i]);
    for (int i = 0; i < n; i++) wv[i] = sqrtf(w[i]);
    for (int k = 0; k < n / 8; k++) {
        int nflip = 0;
        unsigned s = 0;
        for (int i = 8 * k; i < 8 * k + 8; i++) {
            if (x[i] >= 0) {
                xv[i] = x[i];
            } else {
                xv[i] = -x[i];
                nflip++;
                s |= 1u << (i - 8 * k);
            }
        }
        if (nflip % 2) {
            int imin = 8 * k;
            float min = w[imin] * x[imin] * x[imin];
            for (int i = 8 * k + 1; i < 8 * k + 8; i++) {
                const float e = w[i] * x[i] * x[i];
                if (e < min) { min = e; imin = i; }
            }
            xv[imin] = -xv[imin];
            s ^= 1u << (imin - 8 * k);
        }
        signs[k] = (uint8_t)(s & 127);
    }
}

/* IQ2_XXS sub-block of 32: its grid indices and sign codes into its 8 bytes
 * qs (little-endian words: indices, then codes; the scale code is added
 * later); returns its scale (0: an all-zero or zero-weight sub-block, qs
 * left 0). */
static float iq2_xxs_sub(const iq2_tab *t, const float *x, const float *imp, float sigma2, uint8_t *qs) {
    float w[32], xv[32], wv[32], sumqx, sumq2;
    int8_t L[32], Laux[32];
    uint8_t signs[4];
    int on;
    iq2_prepare(32, x, imp, sigma2, w, xv, wv, signs);
    float max = xv[0];
    for (int i = 1; i < 32; i++) max = max > xv[i] ? max : xv[i];
    if (max < GROUP_MAX_EPS) return 0.0f;
    float scale = fit_pos(32, 4, xv, (uint8_t *)L, w);
    const float eff_max = scale * 3;
    if (eff_max <= 0) return 0.0f;
    float best = 0;
    for (int is = -6; is <= 6; is++) {
        const float id = (5 + is * 0.1f) / eff_max, this_scale = 1 / id;
        for (int k = 0; k < 4; k++) {
            iq2_round(xv + 8 * k, id, Laux + 8 * k);
            iq2_point(t, Laux + 8 * k, xv + 8 * k, wv + 8 * k, this_scale, &on);
        }
        iq2_sums(32, w, xv, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 32);
        }
    }
    if (scale > 0) {
        const float id = 1 / scale;
        for (int k = 0; k < 4; k++) {
            iq2_round(xv + 8 * k, id, L + 8 * k);
            iq2_point(t, L + 8 * k, xv + 8 * k, wv + 8 * k, scale, &on);
        }
        iq2_sums(32, w, xv, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {                       /* the sign of the fit goes to the signs */
        scale = -scale;
        for (int k = 0; k < 4; k++) signs[k] = (uint8_t)(~signs[k] & 127);
    }
    uint32_t q2[2] = {0, 0};
    for (int k = 0; k < 4; k++) {
        q2[0] |= (uint32_t)t->map[iq2_pack(L + 8 * k)] << 8 * k;
        q2[1] |= (uint32_t)signs[k] << 7 * k;
    }
    memcpy(qs, q2, 8);
    return scale;
}

/* IQ2_XS half of 16: its two groups' 16-bit codes into its 4 bytes qs;
 * returns its scale. */
static float iq2_xs_half(const iq2_tab *t, const float *x, const float *imp, float sigma2, uint8_t *qs) {
    float w[16], xv[16], wv[16], sumqx, sumq2;
    int8_t L[16] = {0}, Laux[16];
    uint8_t signs[2];
    int on[2] = {1, 1}, on_aux[2];
    iq2_prepare(16, x, imp, sigma2, w, xv, wv, signs);
    float max = xv[0];
    for (int i = 1; i < 16; i++) max = max > xv[i] ? max : xv[i];
    if (max < GROUP_MAX_EPS) return 0.0f;
    float best = 0, scale = max / 5;
    for (int is = -9; is <= 9; is++) {
        const float id = (5 + is * 0.1f) / max, this_scale = 1 / id;
        for (int k = 0; k < 2; k++) {
            iq2_round(xv + 8 * k, id, Laux + 8 * k);
            iq2_point(t, Laux + 8 * k, xv + 8 * k, wv + 8 * k, this_scale, &on_aux[k]);
        }
        iq2_sums(16, w, xv, Laux, &sumqx, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, 16);
            on[0] = on_aux[0];
            on[1] = on_aux[1];
        }
    }
    if ((!on[0] || !on[1]) && scale > 0) {
        const float id = 1 / scale;
        int dummy;
        for (int k = 0; k < 2; k++) {
            if (on[k]) continue;
            iq2_round(xv + 8 * k, id, L + 8 * k);
            iq2_point(t, L + 8 * k, xv + 8 * k, wv + 8 * k, scale, &dummy);
        }
        iq2_sums(16, w, xv, L, &sumqx, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {
        scale = -scale;
        for (int k = 0; k < 2; k++) signs[k] = (uint8_t)(~signs[k] & 127);
    }
    uint16_t q2[2];
    for (int k = 0; k < 2; k++) q2[k] = (uint16_t)(t->map[iq2_pack(L + 8 * k)] | signs[k] << 9);
    memcpy(qs, q2, 4);
    return scale;
}

/* The 4-bit code of a sub-block scale against d (1 / d = id): 2 l + 1 ~ scale / d */
static int iq2_scale_code(float scale, float id) { return clampi(nearest_int(0.5f * (id * scale - 1)), 0, 15); }

/* Both formats: per block the scaled pieces (IQ2_XXS sub-blocks of 32,
 * IQ2_XS halves of 16), then d = max scale / 31 and the 4-bit scale codes
 * (an all-zero block: d = 0, every code 0). */
static void iq2_quantize(const int xs, const float *x, void *dst, int64_t n, const float *imp) {
    pthread_once(&iq2_once, iq2_build_all);
    const iq2_tab *t = &iq2_tabs[xs];
    const int np = xs ? 16 : 8, len = PK_QK_K / np;
    const size_t bs = xs ? sizeof(pk_block_iq2_xs) : sizeof(pk_block_iq2_xxs);
    float unit[PK_QK_K];
    for (int i = 0; i < PK_QK_K; i++) unit[i] = 1.0f;
    for (int64_t b = 0; b < n / PK_QK_K; b++, x += PK_QK_K) {
        uint8_t *blk = (uint8_t *)dst + (size_t)b * bs, qs[PK_QK_K / 4] = {0}, sc[PK_QK_K / 32] = {0};
        const float *w = imp ? imp + b * PK_QK_K : unit;
        const float sigma2 = sum_sq(x, PK_QK_K) / PK_QK_K;
        float scales[16], max_scale = 0;
        for (int p = 0; p < np; p++) {
            scales[p] = xs ? iq2_xs_half(t, x + len * p, w + len * p, sigma2, qs + 4 * p)
                           : iq2_xxs_sub(t, x + len * p, w + len * p, sigma2, qs + 8 * p);
            max_scale = max_scale > scales[p] ? max_scale : scales[p];
        }
        uint16_t d16 = pk_fp32_to_fp16(0.0f);
        if (max_scale) {
            const float d = max_scale / 31, id = 1 / d;
            d16 = pk_fp32_to_fp16(d);
            for (int p = 0; p < np; p++) {
                const int c = iq2_scale_code(scales[p], id);
                if (xs) sc[p / 2] |= (uint8_t)(c << 4 * (p % 2));
                else qs[8 * p + 7] |= (uint8_t)(c << 4);     /* bits 28-31 of the second word */
            }
        } else {
            memset(qs, 0, sizeof qs);
        }
        memcpy(blk, &d16, 2);
        memcpy(blk + 2, qs, sizeof qs);
        if (xs) memcpy(blk + 2 + sizeof qs, sc, sizeof sc);
    }
}

void pk_quantize_iq2_xxs_imat(const float *x, void *dst, int64_t n, const float *imp) {
    iq2_quantize(0, x, dst, n, imp);
}
void pk_quantize_iq2_xs_imat(const float *x, void *dst, int64_t n, const float *imp) {
    iq2_quantize(1, x, dst, n, imp);
}
