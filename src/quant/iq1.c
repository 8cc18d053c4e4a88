/* quant/iq1.c - IQ1_S and IQ1_M (layouts in quant/quant.h): the IQ1 grid and
 * the scalar reference dequantize.
 *
 * Tuned for: nothing - this defines the formats. Dequantize is ggml's
 * (dequantize_row_iq1_s / _iq1_m) bit for bit: per group the float
 * dl = d * (2 ls + 1), then w = dl * (level + delta), level + delta exact.
 * The quantizers follow ggml's quantize_iq1_s / quantize_iq1_m (the same
 * searches, the same float operations in the same order, so that they write
 * llama.cpp's bytes): per sub-block (IQ1_S 32 elements, IQ1_M 16) the
 * importance-weighted best split of the sorted values into the levels -1, 0,
 * 1 for each delta sign (IQ1_M: each pair of group signs), groups that land
 * off the grid moved to the nearest of their grid neighbours (the points at
 * the three smallest distances, made once), then the 3-bit scales against
 * the block's largest. ggml's constant factors are kept (1.05 is unused
 * here as in ggml's IQ1 paths; d times 1.125 for IQ1_S, 1.1125 for IQ1_M).
 * Importance weights: as ggml's quant_weights, imp[j] * sqrt(sigma2 +
 * x[j]^2); IQ1_M without them weights by x[j]^2 (IQ1_S needs them: ggml
 * asserts, llama-quantize refuses both types without an imatrix).
 */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "quant/quant.h"

/* The grid as the set it is: each point is 8 levels in {-1, 0, 1}, read as
 * the base-3 number c = sum over j of (level_j + 1) * 3^j (element 0 the
 * lowest digit), c < 3^8 = 6561. Bit c of this map is set when c is a grid
 * point; the grid is the set points in increasing c, which is ggml's order
 * of iq1s_grid. 2048 bits are set (tests/unit/test_kernels_iq1.c checks the
 * count and the expanded table's checksum against ggml's). */
static const uint64_t iq1_grid_map[103] = {
    0x514202a085142555ull, 0xa28a2086a8314508ull, 0x14508514202a081aull, 0xa005152545442082ull,
    0x8208001888208202ull, 0x0aaabb88a02a03a0ull, 0xaa0a0022000baa90ull, 0x4508514008a0828cull,
    0x0851421450808821ull, 0x2a8008a09808308aull, 0x4248208514214508ull, 0x20a0c22c01450855ull,
    0xa2aaa8242a00268aull, 0x0028280808afe208ull, 0xa82028aa284202a0ull, 0xa8bab9089b0a2080ull,
    0x3aaaaea289aeca20ull, 0xb80e82bbbaeaeb7cull, 0x2202920ed3caba22ull, 0x820aba8aa8202200ull,
    0x3ba2e04a2a000802ull, 0x81408100a22b2022ull, 0x8514012208288aaaull, 0x5421450920821550ull,
    0x203aa8230208a085ull, 0xa208514254208284ull, 0x082a021450950820ull, 0x200248a08082a8b8ull,
    0xab2802a268a28208ull, 0x083082082085082aull, 0xa085142145004045ull, 0x8229014500514200ull,
    0x1430a1082a828a00ull, 0x2145082882145005ull, 0x2aaa200202208514ull, 0xa828ae8ab1122000ull,
    0x0a820070a8aaa1baull, 0x8200840222280208ull, 0xaa2ab0eaa0804800ull, 0xa7daea22ba8b20c2ull,
    0xaa2ab092a86e8b8bull, 0x48202a0c448a8b72ull, 0x20aa082a8a284084ull, 0xa09aafa222a2ccc8ull,
    0xa82a00020002a8e8ull, 0xa2a28ba080200088ull, 0xba0a328280a0ba28ull, 0x2ba0a2ebfebab8beull,
    0x00a2ea280a8a08a2ull, 0xdeeaa4fa0c0232a1ull, 0xeb7ebe8d2ea82befull, 0xdeba7de6bf7ff7faull,
    0x12fa26bfff27fb69ull, 0x0ebeaa10228ae1e9ull, 0xae820ba8b208aa84ull, 0x62048083e924baffull,
    0x002ba40aa8f2682cull, 0x0012aae208082a02ull, 0x82c920a60a2a8202ull, 0x8c00a20028829089ull,
    0x6c00080882001380ull, 0x8abea602bbaaaa8aull, 0xd02e976b8002caa0ull, 0xdeaa2e108210e9b2ull,
    0x820a0004a5d11528ull, 0x20a1010820828a00ull, 0xa0843222ba39aa82ull, 0x0262a28a00188009ull,
    0xac21450051441481ull, 0x20aa085142145082ull, 0x45082a120a87aa28ull, 0x08514208a0051421ull,
    0x22a240a002200145ull, 0x8a6a08a208008800ull, 0x0a200080aaaab86eull, 0x5044082122c8e282ull,
    0x8515208a09514214ull, 0x2a2aaa080a861450ull, 0x21450851420a0080ull, 0xe2085142145000a8ull,
    0x082a82180a828820ull, 0x0a028bb08aaaa2aaull, 0x0aaa80822820aa2aull, 0x220288a900280828ull,
    0xba8a08b8280bbea0ull, 0xaef8a4baffaeb24bull, 0x30a0b668285220aaull, 0x6a220828020a80e6ull,
    0x2baaaa020a208062ull, 0x0808a2a0a9a2eaaaull, 0x0e8200228aa02010ull, 0x400aa08514214500ull,
    0x4a0006a921450851ull, 0x440d1000a50802aaull, 0x0514214508288214ull, 0x0020f2ac82820800ull,
    0x20ba0a280aaa0000ull, 0x280948820002a2eaull, 0x0051454b110014e9ull, 0x5142145002a80145ull,
    0x400a288808248808ull, 0x02a0051401450008ull, 0x0000000145085140ull,
};

static uint64_t iq1_grid[PK_IQ1_GRID];
static pthread_once_t iq1_grid_once = PTHREAD_ONCE_INIT;

static void iq1_grid_init(void) {
    int n = 0;
    for (int c = 0; c < 6561 && n < PK_IQ1_GRID; c++) {
        if (!(iq1_grid_map[c / 64] >> (c % 64) & 1)) continue;
        uint64_t v = 0;
        for (int j = 0, r = c; j < 8; j++, r /= 3)
            v |= (uint64_t)(uint8_t)(int8_t)(r % 3 - 1) << (8 * j);
        iq1_grid[n++] = v;
    }
}

const uint64_t *pk_iq1s_grid(void) {
    pthread_once(&iq1_grid_once, iq1_grid_init);
    return iq1_grid;
}

/* 8 elements of grid point i, shifted by delta, times dl */
static void iq1_group(const uint64_t *grid, int i, float dl, float delta, float *y) {
    for (int j = 0; j < 8; j++) y[j] = dl * ((float)(int8_t)(grid[i] >> (8 * j)) + delta);
}

void pk_iq1_s_to_float(const void *src, float *y, int64_t n) {
    const pk_block_iq1_s *b = src;
    const uint64_t *grid = pk_iq1s_grid();
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const float d = pk_fp16_to_fp32(b[i].d);
        for (int s = 0; s < 8; s++) {
            const unsigned qh = b[i].qh[s];
            const float dl = d * (float)(2 * ((qh >> 12) & 7) + 1);
            const float delta = qh & 0x8000 ? -PK_IQ1_DELTA : PK_IQ1_DELTA;
            for (int g = 0; g < 4; g++, y += 8)
                iq1_group(grid, b[i].qs[4 * s + g] | (int)((qh >> 3 * g) & 7) << 8, dl, delta, y);
        }
    }
}

void pk_iq1_m_to_float(const void *src, float *y, int64_t n) {
    const pk_block_iq1_m *b = src;
    const uint64_t *grid = pk_iq1s_grid();
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const uint8_t *sc = b[i].scales;
        const float d = pk_fp16_to_fp32(pk_iq1_m_d(sc));
        for (int s = 0; s < 8; s++) {
            const unsigned w = sc[2 * (s / 2)] | (unsigned)sc[2 * (s / 2) + 1] << 8;
            for (int g = 0; g < 4; g++, y += 8) {
                const unsigned h = (unsigned)b[i].qh[2 * s + g / 2] >> 4 * (g % 2);
                const float dl = d * (float)(2 * ((w >> (6 * (s % 2) + 3 * (g / 2))) & 7) + 1);
                iq1_group(grid, b[i].qs[4 * s + g] | (int)(h & 7) << 8, dl, h & 8 ? -PK_IQ1_DELTA : PK_IQ1_DELTA, y);
            }
        }
    }
}

/* ---- quantizing ------------------------------------------------------------------
 * The grid's neighbours: for each of the 3^8 - 2048 base-3 codes (levels
 * -1, 0, 1) that are not grid points, the grid points at the three smallest
 * squared distances from it, by distance then index (ggml's kneighbors for
 * IQ1, whose distances are 4 times these: the same order). iq1_kmap[c] is
 * the grid index of code c, or -(1 + the offset of its list in iq1_nb): a
 * count, then that many grid indices. IQ1_NB is their total, fixed by the
 * grid (tests/unit/test_kernels_iq1.c checks it). */
#define IQ1_CODES 6561
#define IQ1_NB 332234
static int iq1_kmap[IQ1_CODES];
static uint16_t iq1_nb[IQ1_NB];
static pthread_once_t iq1_nb_once = PTHREAD_ONCE_INIT;
static int iq1_nb_used;

static int iq1_code_of(uint64_t point) {
    int c = 0;
    for (int j = 7; j >= 0; j--) c = 3 * c + (int8_t)(point >> (8 * j)) + 1;
    return c;
}

static void iq1_nb_init(void) {
    const uint64_t *grid = pk_iq1s_grid();
    static int gl[PK_IQ1_GRID][8];
    for (int c = 0; c < IQ1_CODES; c++) iq1_kmap[c] = -1;
    for (int i = 0; i < PK_IQ1_GRID; i++) {
        iq1_kmap[iq1_code_of(grid[i])] = i;
        for (int j = 0; j < 8; j++) gl[i][j] = (int8_t)(grid[i] >> (8 * j));
    }
    int used = 0;
    for (int c = 0; c < IQ1_CODES; c++) {
        if (iq1_kmap[c] >= 0) continue;
        int pos[8], d2[PK_IQ1_GRID], lim[3] = {1 << 30, 1 << 30, 1 << 30};
        for (int j = 0, r = c; j < 8; j++, r /= 3) pos[j] = r % 3 - 1;
        for (int i = 0; i < PK_IQ1_GRID; i++) {
            int d = 0;
            for (int j = 0; j < 8; j++) d += (gl[i][j] - pos[j]) * (gl[i][j] - pos[j]);
            d2[i] = d;
            /* the three smallest distinct distances, lim[0] < lim[1] < lim[2] */
            if (d < lim[0]) { lim[2] = lim[1]; lim[1] = lim[0]; lim[0] = d; }
            else if (d > lim[0] && d < lim[1]) { lim[2] = lim[1]; lim[1] = d; }
            else if (d > lim[1] && d < lim[2]) lim[2] = d;
        }
        int start = used++, n = 0;
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < PK_IQ1_GRID; i++)
                if (d2[i] == lim[k] && used < IQ1_NB) { iq1_nb[used++] = (uint16_t)i; n++; }
        iq1_nb[start] = (uint16_t)n;
        iq1_kmap[c] = -(start + 1);
    }
    iq1_nb_used = used;
}

int pk_iq1_neighbours_total(void) {
    pthread_once(&iq1_nb_once, iq1_nb_init);
    return iq1_nb_used;
}

static inline int nearest_int(float v) {   /* as quant/kquant.c */
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* The grid index for the levels L[0..7] (in {0, 1, 2}, i.e. level + 1) of
 * a group: the point itself, or of its neighbours the one whose levels,
 * through xx (the three level values with the delta) times scale, are
 * nearest x in the weighted squared distance (the first of equals); L is set
 * to the chosen point's levels. Returns -1 if the group was off the grid. */
static int iq1_group_index(int8_t *L, const float *x, const float *w, float scale, const float *xx, int *index) {
    int c = 0;
    for (int j = 7; j >= 0; j--) c = 3 * c + L[j];
    if (iq1_kmap[c] >= 0) { *index = iq1_kmap[c]; return 0; }
    const uint64_t *grid = pk_iq1s_grid();
    const uint16_t *nb = iq1_nb - iq1_kmap[c] - 1;
    float best = 3.4028235e38f;
    int pick = nb[1];
    for (int k = 1; k <= nb[0]; k++) {
        float d2 = 0;
        for (int j = 0; j < 8; j++) {
            float diff = scale * xx[(int8_t)(grid[nb[k]] >> (8 * j)) + 1] - x[j];
            d2 += w[j] * diff * diff;
        }
        if (d2 < best) { best = d2; pick = nb[k]; }
    }
    for (int j = 0; j < 8; j++) L[j] = (int8_t)((int8_t)(grid[pick] >> (8 * j)) + 1);
    *index = pick;
    return -1;
}

/* values x[0..n-1] sorted ascending, equal ones in their order (a stable
 * insertion sort: glibc's qsort, which ggml calls, is a stable merge sort
 * here); idx[k] = the position of the k-th smallest */
static void iq1_sort(const float *x, int n, int *idx) {
    for (int k = 0; k < n; k++) {
        int j = k;
        while (j > 0 && x[idx[j - 1]] > x[k]) { idx[j] = idx[j - 1]; j--; }
        idx[j] = k;
    }
}

/* sigma2 = 2 / 256 * sum of x^2 over a super-block, and the weights of a
 * sub-block: imp * sqrt(sigma2 + x^2), or x^2 without imp */
static float iq1_sigma2(const float *x) {
    float s = 0;
    for (int i = 0; i < PK_QK_K; i++) s += x[i] * x[i];
    return 2 * s / PK_QK_K;
}
static void iq1_weights(const float *x, const float *imp, float sigma2, int n, float *w) {
    for (int i = 0; i < n; i++) w[i] = imp ? imp[i] * sqrtf(sigma2 + x[i] * x[i]) : x[i] * x[i];
}

static float iq1_absmax(const float *x, int n) {
    float m = fabsf(x[0]);
    for (int i = 1; i < n; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

static const float iq1_xp[3] = {-1 + PK_IQ1_DELTA, PK_IQ1_DELTA, 1 + PK_IQ1_DELTA};
static const float iq1_xm[3] = {-1 - PK_IQ1_DELTA, -PK_IQ1_DELTA, 1 - PK_IQ1_DELTA};

void pk_quantize_iq1_s(const float *src, void *dst, int64_t n, const float *imp) {
    pthread_once(&iq1_nb_once, iq1_nb_init);
    pk_block_iq1_s *y = dst;
    for (int64_t ibl = 0; ibl < n / PK_QK_K; ibl++) {
        const float *xbl = src + PK_QK_K * ibl;
        memset(&y[ibl], 0, sizeof y[ibl]);
        float scales[8], max_scale = 0;
        int shifts[8];
        const float sigma2 = iq1_sigma2(xbl);
        for (int ib = 0; ib < 8; ib++) {
            const float *xb = xbl + 32 * ib;
            float weight[32], sumx[33], sumw[33];
            int idx[32];
            int8_t L[32];
            iq1_weights(xb, imp ? imp + PK_QK_K * ibl + 32 * ib : NULL, sigma2, 32, weight);
            scales[ib] = 0;
            shifts[ib] = 1;
            if (iq1_absmax(xb, 32) < 1e-12f) continue;
            iq1_sort(xb, 32, idx);
            sumx[0] = sumw[0] = 0;
            for (int j = 0; j < 32; j++) {
                sumx[j + 1] = sumx[j] + weight[idx[j]] * xb[idx[j]];
                sumw[j + 1] = sumw[j] + weight[idx[j]];
            }
            /* levels -1 below i1, 0 up to i2, 1 above; each delta sign */
            float best = -3.4028235e38f, scale = 0;
            int b1 = -1, b2 = -1, shift = 0;
            for (int i1 = 0; i1 <= 32; i1++)
                for (int i2 = i1; i2 <= 32; i2++)
                    for (int sg = 0; sg < 2; sg++) {
                        const float *v = sg ? iq1_xm : iq1_xp;
                        float sqx = (sumx[i1] - sumx[0]) * v[0] + (sumx[i2] - sumx[i1]) * v[1] +
                                    (sumx[32] - sumx[i2]) * v[2];
                        float sq2 = (sumw[i1] - sumw[0]) * v[0] * v[0] + (sumw[i2] - sumw[i1]) * v[1] * v[1] +
                                    (sumw[32] - sumw[i2]) * v[2] * v[2];
                        if (sq2 > 0 && sqx * sqx > best * sq2) {
                            scale = sqx / sq2;
                            best = scale * sqx;
                            b1 = i1; b2 = i2; shift = sg ? -1 : 1;
                        }
                    }
            if (b1 < 0 || b2 < 0 || shift == 0) continue;
            for (int j = 0; j < 32; j++) L[idx[j]] = (int8_t)(j < b1 ? 0 : j < b2 ? 1 : 2);
            if (scale < 0) {
                for (int j = 0; j < 32; j++) L[j] = (int8_t)(2 - L[j]);
                scale = -scale;
                shift = -shift;
            }
            const float *xx = shift == 1 ? iq1_xp : iq1_xm;
            int index[4], off = 0;
            for (int k = 0; k < 4; k++)
                off |= iq1_group_index(L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xx, &index[k]);
            if (off) {   /* the scale again, for the points taken */
                float sqx = 0, sq2 = 0;
                for (int j = 0; j < 32; j++) {
                    float q = xx[L[j]];
                    sqx += weight[j] * q * xb[j];
                    sq2 += weight[j] * q * q;
                }
                if (sqx > 0 && sq2 > 0) scale = sqx / sq2;
            }
            unsigned h = 0;
            for (int k = 0; k < 4; k++) {
                y[ibl].qs[4 * ib + k] = (uint8_t)(index[k] & 255);
                h |= (unsigned)(index[k] >> 8) << 3 * k;
            }
            y[ibl].qh[ib] = (uint16_t)h;
            scales[ib] = scale;
            shifts[ib] = shift;
            max_scale = scale > max_scale ? scale : max_scale;
        }
        if (!max_scale) continue;
        const float d = max_scale / 15;
        y[ibl].d = pk_fp32_to_fp16(d * 1.125f);
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ib++) {
            int l = nearest_int(0.5f * (id * scales[ib] - 1));
            l = l < 0 ? 0 : l > 7 ? 7 : l;
            if (shifts[ib] == -1) l |= 8;
            y[ibl].qh[ib] = (uint16_t)(y[ibl].qh[ib] | l << 12);
        }
    }
}

void pk_quantize_iq1_m(const float *src, void *dst, int64_t n, const float *imp) {
    pthread_once(&iq1_nb_once, iq1_nb_init);
    static const uint8_t masks[4] = {0x00, 0x80, 0x08, 0x88};
    const uint64_t *grid = pk_iq1s_grid();
    pk_block_iq1_m *y = dst;
    for (int64_t ibl = 0; ibl < n / PK_QK_K; ibl++) {
        const float *xbl = src + PK_QK_K * ibl;
        const float *ibw = imp ? imp + PK_QK_K * ibl : NULL;
        memset(&y[ibl], 0, sizeof y[ibl]);
        float scales[16], max_scale = 0;
        int shifts[16];
        const float sigma2 = iq1_sigma2(xbl);
        /* half-sub-block ib (16 elements, groups 2ib, 2ib + 1); shift k: the
           signs of its two deltas, 0 (+, +), 1 (+, -), 2 (-, +), 3 (-, -) */
        for (int ib = 0; ib < 16; ib++) {
            const float *xb = xbl + 16 * ib;
            float weight[16];
            int idx[16];
            int8_t L[16];
            iq1_weights(xb, ibw ? ibw + 16 * ib : NULL, sigma2, 16, weight);
            scales[ib] = 0;
            shifts[ib] = 0;
            if (iq1_absmax(xb, 16) < 1e-7f) continue;
            iq1_sort(xb, 16, idx);
            float best = -3.4028235e38f, scale = 0;
            int b1 = -1, b2 = -1, bk = -1;
            for (int i1 = 0; i1 <= 16; i1++)
                for (int i2 = i1; i2 <= 16; i2++) {
                    float sqx[4] = {0, 0, 0, 0}, sq2[4] = {0, 0, 0, 0};
                    for (int j = 0; j < 16; j++) {
                        const int i = idx[j], lv = j < i1 ? 0 : j < i2 ? 1 : 2;
                        const float p = iq1_xp[lv], m = iq1_xm[lv];
                        /* group 0 takes the first sign, group 1 the second */
                        const float b = i < 8 ? p : m, c = i < 8 ? m : p;
                        sqx[0] += weight[i] * p * xb[i];
                        sqx[1] += weight[i] * b * xb[i];
                        sqx[2] += weight[i] * c * xb[i];
                        sqx[3] += weight[i] * m * xb[i];
                        sq2[0] += weight[i] * p * p;
                        sq2[1] += weight[i] * b * b;
                        sq2[2] += weight[i] * c * c;
                        sq2[3] += weight[i] * m * m;
                    }
                    for (int k = 0; k < 4; k++)
                        if (sq2[k] > 0 && sqx[k] * sqx[k] > best * sq2[k]) {
                            scale = sqx[k] / sq2[k];
                            best = scale * sqx[k];
                            b1 = i1; b2 = i2; bk = k;
                        }
                }
            if (b1 < 0 || b2 < 0 || bk < 0) continue;
            for (int j = 0; j < 16; j++) L[idx[j]] = (int8_t)(j < b1 ? 0 : j < b2 ? 1 : 2);
            if (scale < 0) {
                for (int j = 0; j < 16; j++) L[j] = (int8_t)(2 - L[j]);
                scale = -scale;
                bk = 3 - bk;
            }
            const float *xg[2] = {bk < 2 ? iq1_xp : iq1_xm, bk % 2 == 0 ? iq1_xp : iq1_xm};
            int index[2], off = 0;
            for (int k = 0; k < 2; k++)
                off |= iq1_group_index(L + 8 * k, xb + 8 * k, weight + 8 * k, scale, xg[k], &index[k]);
            if (off) {
                float sqx = 0, sq2 = 0;
                for (int j = 0; j < 16; j++) {
                    float q = xg[j / 8][L[j]];
                    sqx += weight[j] * q * xb[j];
                    sq2 += weight[j] * q * q;
                }
                if (sqx > 0 && sq2 > 0) scale = sqx / sq2;
            }
            y[ibl].qs[2 * ib] = (uint8_t)(index[0] & 255);
            y[ibl].qs[2 * ib + 1] = (uint8_t)(index[1] & 255);
            y[ibl].qh[ib] = (uint8_t)((index[0] >> 8) | (index[1] >> 8) << 4);
            scales[ib] = scale;
            shifts[ib] = bk;
            max_scale = scale > max_scale ? scale : max_scale;
        }
        if (!max_scale) continue;
        /* the 3-bit scales, then d refitted over the whole super-block */
        float d = max_scale / 15;
        const float id = 1 / d;
        float sqx = 0, sq2 = 0;
        for (int ib = 0; ib < 16; ib++) {
            int l = nearest_int(0.5f * (id * scales[ib] - 1));
            l = l < 0 ? 0 : l > 7 ? 7 : l;
            unsigned wd = y[ibl].scales[2 * (ib / 4)] | (unsigned)y[ibl].scales[2 * (ib / 4) + 1] << 8;
            wd |= (unsigned)l << 3 * (ib % 4);
            y[ibl].scales[2 * (ib / 4)] = (uint8_t)wd;
            y[ibl].scales[2 * (ib / 4) + 1] = (uint8_t)(wd >> 8);
            y[ibl].qh[ib] |= masks[shifts[ib]];
            const float *xb = xbl + 16 * ib;
            float weight[16];
            iq1_weights(xb, ibw ? ibw + 16 * ib : NULL, sigma2, 16, weight);
            for (int k = 0; k < 2; k++) {
                const float *xx = k == 0 ? (shifts[ib] < 2 ? iq1_xp : iq1_xm) : (shifts[ib] % 2 == 0 ? iq1_xp : iq1_xm);
                const int gi = y[ibl].qs[2 * ib + k] | ((y[ibl].qh[ib] >> 4 * k) & 7) << 8;
                for (int j = 0; j < 8; j++) {
                    float w = weight[8 * k + j];
                    float q = xx[(int8_t)(grid[gi] >> (8 * j)) + 1] * (float)(2 * l + 1);
                    sqx += w * q * xb[8 * k + j];
                    sq2 += w * q * q;
                }
            }
        }
        if (sq2 > 0) d = sqx / sq2;
        const uint16_t dh = pk_fp32_to_fp16(d * 1.1125f);
        for (int k = 0; k < 4; k++) y[ibl].scales[2 * k + 1] |= (uint8_t)(((dh >> 4 * k) & 0xF) << 4);
    }
}
