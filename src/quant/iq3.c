/* quant/iq3.c - the lattice i-quants IQ3_XXS, IQ3_S and IQ2_S: their grids,
 * scalar reference dequantization and the importance-weighted quantizers
 * (block layouts: quant/quant.h).
 *
 * Tuned for: nothing - this defines the formats. to_float computes what
 * ggml's dequantize_row_iq3_xxs / _iq3_s / _iq2_s compute, with the same
 * float operations in the same order, so the results are equal bit for bit.
 *
 * The grids are the formats' codebooks. Each is a sorted list of points
 * whose coordinates take L levels (IQ3_XXS: 4, 12, 20, 28, 36, 44, 52, 62;
 * IQ3_S: 1, 3, ..., 15; IQ2_S: 8, 25, 43); a point with level indices
 * (i_0 .. i_{n-1}) has the key i_0 + L i_1 + L^2 i_2 + ..., and the grid is
 * the list of the points whose key bit is set in a bitmap over all L^n
 * keys, in increasing key order (which is the order of ggml's tables, read
 * as little-endian integers). The bitmaps below were made from ggml's
 * iq3xxs_grid, iq3s_grid and iq2s_grid; tests/unit/test_kernels_quant.c
 * checks the expanded tables' counts, levels and checksums.
 */
#include <math.h>
#include <pthread.h>
#include <string.h>
#include "quant/quant.h"

static const uint8_t iq3xxs_levels[8] = { 4, 12, 20, 28, 36, 44, 52, 62 };
static const uint8_t iq3s_levels[8] = { 1, 3, 5, 7, 9, 11, 13, 15 };
static const uint8_t iq2s_levels[3] = { 8, 25, 43 };

/* 4096 keys (8 levels, 4 coordinates), 256 set */
static const uint64_t iq3xxs_keys[64] = {
    0x2800000402058a15ull, 0x010010020522050aull, 0x200082008a050215ull, 0x0100000000200582ull,
    0x2800801080000800ull, 0x0000040004000082ull, 0x0010000020000000ull, 0x0002000800005100ull,
    0x00000180150a050aull, 0x0000000000050205ull, 0x040000000102050aull, 0x0040004002010005ull,
    0x0000010000000022ull, 0x0200004000110000ull, 0x0000000000000020ull, 0x0000000100040000ull,
    0x0000000402450a05ull, 0x018800000102052aull, 0x0000200180058205ull, 0x1100000000001102ull,
    0x0000080020000000ull, 0x1000000200800008ull, 0x0000000000000000ull, 0x000000200000400aull,
    0x04200100000a0502ull, 0x0000005002010005ull, 0x040004000020010aull, 0x0000000008000200ull,
    0x0400008001000000ull, 0x0000200000040041ull, 0x0008000040001000ull, 0x0001000008000000ull,
    0x00008800a0008010ull, 0x1000000000000000ull, 0x0041000180010000ull, 0x0000002000000080ull,
    0x0010020000000010ull, 0x0100000800200000ull, 0x0000000000000000ull, 0x0000000001000520ull,
    0x0100000200000400ull, 0x0000200000400041ull, 0x0400000004001000ull, 0x0000080000000004ull,
    0x0400000000880100ull, 0x0000000002000004ull, 0x0000010000000000ull, 0x0000000400100000ull,
    0x0010005000100000ull, 0x0002000000020000ull, 0x0010000000008000ull, 0x0000000041000000ull,
    0x0000001000000000ull, 0x0000040000000020ull, 0x0000000008000000ull, 0x0000000000020008ull,
    0x00000400040001a8ull, 0x0000000100400000ull, 0x0000042000000400ull, 0x0001000008002001ull,
    0x0000000200020000ull, 0x0000000000100005ull, 0x0000000001000000ull, 0x0000000000000000ull,
};

/* 4096 keys (8 levels, 4 coordinates), 512 set */
static const uint64_t iq3s_keys[64] = {
    0x92050aa5082357a7ull, 0x0422001022892317ull, 0x09000aa4112249a3ull, 0x228005104a052208ull,
    0x0100020904128801ull, 0x084000a208450014ull, 0x0200040002000a40ull, 0x0000110008450015ull,
    0x040250005205ab17ull, 0x410005020902114bull, 0x040120090411a401ull, 0x0104000211820992ull,
    0x000011440a001428ull, 0x0000020005020902ull, 0x0000005000910000ull, 0x010400022002050aull,
    0x2980052a058a55abull, 0x0000020412248905ull, 0x12008802810a0092ull, 0x004001040a140225ull,
    0x2400000224090082ull, 0x0100080180040210ull, 0x0002200000020085ull, 0x0000010801400220ull,
    0x020802942a04aa04ull, 0x44010001000a102aull, 0x0000010014010401ull, 0x0800208a018a1102ull,
    0x0011040002044208ull, 0x0800401004200502ull, 0x0000000200004000ull, 0x000000002005000aull,
    0x0100010204910411ull, 0x0000220821040a84ull, 0x010480010802210aull, 0x0000000022050a10ull,
    0x0200000180100005ull, 0x00040000000200a0ull, 0x0001000010000800ull, 0x0000020801002100ull,
    0x1040049100041104ull, 0x040000000402042aull, 0x0000080041080201ull, 0x0820021000800184ull,
    0x0000004004010012ull, 0x00000a0000400400ull, 0x0000000400000000ull, 0x0000000000040014ull,
    0x000100000a002a00ull, 0x0010000000810001ull, 0x0104200410000400ull, 0x0000000100021001ull,
    0x0004000800200000ull, 0x0001000010000009ull, 0x0000000100000020ull, 0x0000000000000a00ull,
    0x0004100140050091ull, 0x0000002800100204ull, 0x0000020001024112ull, 0x0000080024000004ull,
    0x0000010000010822ull, 0x0000000400040000ull, 0x0000000002000004ull, 0x0000000000000001ull,
};

/* 6561 keys (3 levels, 8 coordinates), 1024 set */
static const uint64_t iq2s_keys[103] = {
    0x1555455551555555ull, 0x5545505155551105ull, 0x5010515414150514ull, 0x5550101111000455ull,
    0x5145541555555545ull, 0x5414555514555550ull, 0x1451000455401051ull, 0x1155154000105004ull,
    0x0540010110515555ull, 0x0040401051440455ull, 0x0000100510140100ull, 0x4551515554004000ull,
    0x5555541451151555ull, 0x5000145505155545ull, 0x0414000504414114ull, 0x1455551455455000ull,
    0x5505155540105154ull, 0x0514400010500414ull, 0x4000001000041401ull, 0x0140105154045155ull,
    0x0010500414550000ull, 0x1000041004000010ull, 0x5154000000000400ull, 0x0011010405415115ull,
    0x1401050540415054ull, 0x0104510010100004ull, 0x0514554400050000ull, 0x1440001050041455ull,
    0x0000110004140105ull, 0x0004000400010500ull, 0x1050001411000000ull, 0x0004150000400000ull,
    0x0000100000000000ull, 0x0140040000004004ull, 0x1555554555555000ull, 0x5505554550514414ull,
    0x1541401051541455ull, 0x4000005004145104ull, 0x4550515554555555ull, 0x1051541455550041ull,
    0x5004145500004150ull, 0x5514100000400010ull, 0x0001040041455051ull, 0x0100004140105154ull,
    0x0000400010500040ull, 0x1555455000000000ull, 0x5540005154145555ull, 0x0010500414550515ull,
    0x1400041401051440ull, 0x5154145555000000ull, 0x0414550000414010ull, 0x1400000040001050ull,
    0x0000000000110004ull, 0x0040414010515400ull, 0x0040001050000001ull, 0x1000100000000000ull,
    0x4400004000000000ull, 0x1040041451051545ull, 0x0004140105154000ull, 0x0400010400100010ull,
    0x1451010000000100ull, 0x0000004000105004ull, 0x0010001010000414ull, 0x0000000000040004ull,
    0x0000105000100000ull, 0x0010010000100000ull, 0x0000000000004000ull, 0x0000000400000000ull,
    0x5414114515404000ull, 0x1455450001411011ull, 0x1140004140005154ull, 0x0000000010500015ull,
    0x0041455011555400ull, 0x4140105154000105ull, 0x0010500001010000ull, 0x1000000000000050ull,
    0x0000000105000141ull, 0x4000010000014040ull, 0x0004000000000000ull, 0x5545010000400500ull,
    0x0000414010515410ull, 0x0000101050001411ull, 0x0000100004140000ull, 0x4010515440000000ull,
    0x1050004001000041ull, 0x1100000000004000ull, 0x0010001000000010ull, 0x0001100041400000ull,
    0x0000005000000000ull, 0x0000000000001100ull, 0x0040000000000000ull, 0x0000105410111100ull,
    0x0010000001040000ull, 0x4004100000000400ull, 0x5100014400000014ull, 0x0100000000400010ull,
    0x0000000010001040ull, 0x0000000000000000ull, 0x0040000000000004ull, 0x0100000000000040ull,
    0x0400004000000000ull, 0x0000011401400000ull, 0x0000000100001000ull,
};

static uint32_t iq3xxs_grid[256], iq3s_grid[512];
static uint64_t iq2s_grid[1024];
static pthread_once_t grids_once = PTHREAD_ONCE_INIT;

/* The points of a bitmap over nkeys keys of n coordinates with nl levels,
 * in key order, as little-endian bytes (coordinate j in byte j); returns
 * how many were written (at most cap). */
static int expand(const uint64_t *bits, int nkeys, const uint8_t *levels, int nl, int n, uint64_t *out,
                  int cap) {
    int cnt = 0;
    for (int key = 0; key < nkeys; key++) {
        if (!(bits[key / 64] >> (key % 64) & 1)) continue;
        uint64_t v = 0;
        for (int j = 0, k = key; j < n; j++, k /= nl) v |= (uint64_t)levels[k % nl] << (8 * j);
        if (cnt < cap) out[cnt] = v;
        cnt++;
    }
    return cnt;
}

static void grids_init(void) {
    uint64_t tmp[512];
    expand(iq3xxs_keys, 4096, iq3xxs_levels, 8, 4, tmp, 256);
    for (int i = 0; i < 256; i++) iq3xxs_grid[i] = (uint32_t)tmp[i];
    expand(iq3s_keys, 4096, iq3s_levels, 8, 4, tmp, 512);
    for (int i = 0; i < 512; i++) iq3s_grid[i] = (uint32_t)tmp[i];
    expand(iq2s_keys, 6561, iq2s_levels, 3, 8, iq2s_grid, 1024);
}

const uint32_t *pk_iq3xxs_grid(void) {
    pthread_once(&grids_once, grids_init);
    return iq3xxs_grid;
}
const uint32_t *pk_iq3s_grid(void) {
    pthread_once(&grids_once, grids_init);
    return iq3s_grid;
}
const uint64_t *pk_iq2s_grid(void) {
    pthread_once(&grids_once, grids_init);
    return iq2s_grid;
}

/* coordinate j of a grid point */
static inline float coord(uint64_t point, int j) { return (float)(uint8_t)(point >> (8 * j)); }

/* ---- dequantization ------------------------------------------------------------- */

void pk_iq3_xxs_to_float(const void *src, float *y, int64_t n) {
    const pk_block_iq3_xxs *b = src;
    const uint32_t *grid = pk_iq3xxs_grid();
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const float d = pk_fp16_to_fp32(b[i].d);
        for (int s = 0; s < 8; s++) {
            uint32_t a;
            memcpy(&a, b[i].qs + 64 + 4 * s, 4);
            const float db = d * (0.5f + (float)(a >> 28)) * 0.5f;
            for (int h = 0; h < 4; h++, y += 8) {
                const unsigned sg = pk_iq2_signs(a >> 7 * h);
                const uint32_t p0 = grid[b[i].qs[8 * s + 2 * h]], p1 = grid[b[i].qs[8 * s + 2 * h + 1]];
                for (int j = 0; j < 4; j++) {
                    y[j] = db * coord(p0, j) * (sg >> j & 1 ? -1.0f : 1.0f);
                    y[j + 4] = db * coord(p1, j) * (sg >> (j + 4) & 1 ? -1.0f : 1.0f);
                }
            }
        }
    }
}

void pk_iq3_s_to_float(const void *src, float *y, int64_t n) {
    const pk_block_iq3_s *b = src;
    const uint32_t *grid = pk_iq3s_grid();
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const float d = pk_fp16_to_fp32(b[i].d);
        for (int s = 0; s < 8; s++) {
            const float db = d * (float)(1 + 2 * ((b[i].scales[s / 2] >> 4 * (s % 2)) & 0xF));
            for (int g = 0; g < 8; g++, y += 4) {
                const uint32_t p = grid[b[i].qs[8 * s + g] | (b[i].qh[s] >> g & 1) << 8];
                const int e = 32 * s + 4 * g;
                for (int j = 0; j < 4; j++)
                    y[j] = db * coord(p, j) * (b[i].signs[(e + j) / 8] >> (e + j) % 8 & 1 ? -1.0f : 1.0f);
            }
        }
    }
}

void pk_iq2_s_to_float(const void *src, float *y, int64_t n) {
    const pk_block_iq2_s *b = src;
    const uint64_t *grid = pk_iq2s_grid();
    for (int64_t i = 0; i < n / PK_QK_K; i++) {
        const float d = pk_fp16_to_fp32(b[i].d);
        for (int s = 0; s < 8; s++) {
            const float db[2] = { d * (0.5f + (float)(b[i].scales[s] & 0xF)) * 0.25f,
                                  d * (0.5f + (float)(b[i].scales[s] >> 4)) * 0.25f };
            for (int g = 0; g < 4; g++, y += 8) {
                const uint64_t p = grid[b[i].qs[4 * s + g] | (b[i].qh[s] >> 2 * g & 3) << 8];
                const uint8_t sg = b[i].qs[32 + 4 * s + g];
                for (int j = 0; j < 8; j++) y[j] = db[g / 2] * coord(p, j) * (sg >> j & 1 ? -1.0f : 1.0f);
            }
        }
    }
}

/* ---- quantization ---------------------------------------------------------------
 * As ggml's quantize_row_iq3_xxs_impl (256-point grid), quantize_row_iq3_s_impl
 * and quantize_row_iq2_s_impl, with the same searches and the same float
 * operations in the same order, so that they write llama.cpp's bytes
 * (except where ggml's IQ3_S skips a sub-block of zeros: ggml then writes
 * the later sub-blocks' indices and signs one slot early, a mis-encoding;
 * here every sub-block keeps its own slots).
 *
 * Per sub-block (32 elements; IQ2_S: 16) of a super-block: weights (the
 * importances times sqrt(sigma2 + x^2), or x^2; IQ2_S without importances
 * sigma2 / 4 + x^2), magnitudes and sign bits (IQ3_XXS: an even number of
 * minus signs, the element of least weight * x^2 flipped if needed), then a
 * search over 2 T + 1 inverse scales (2 m - 1 + t * step) / max: each group
 * of 4 (IQ2_S: 8) magnitudes rounded to levels l (the value 2 l + 1) and,
 * off the grid, replaced by the grid point of least weighted error among
 * its precomputed neighbours; the scale with the best sumqx^2 / sumq2
 * kept, then the groups off the grid redone with that scale (IQ3_S: every
 * group, when any is off). The sub-block scales become 4-bit codes of
 * max_scale / 31, times a fudge factor in d.
 *
 * The grids are the level-index keys of the dequantization grids above
 * (point k has level i_j = digit j of its key), the neighbours of a key off
 * the grid its nearest grid points in the N closest distances (IQ3_XXS 2,
 * IQ3_S 3, IQ2_S 1), ordered by distance then index (ggml's order, which
 * decides ties). */

typedef struct {
    int n_grid, dim, nl, nkeys;
    int nwant;                       /* distance shells of neighbours */
    uint16_t *key;                   /* n_grid: the key of each point */
    uint8_t *lv;                     /* n_grid * dim: its levels (the key's digits) */
    int32_t *map;                    /* nkeys: point, or -(1 + offset into nbr) */
    uint16_t *nbr;                   /* per key off the grid: count, then points */
    int n_nbr;                       /* entries of nbr used */
} lattice_q;

/* neighbour list sizes (counts included), computed once by lattice_q_init
 * and checked there */
#define IQ3XXS_NBR 22825
#define IQ3S_NBR 28317
#define IQ2S_NBR 50253

static uint16_t q3xxs_key[256], q3s_key[512], q2s_key[1024];
static uint8_t q3xxs_lv[256 * 4], q3s_lv[512 * 4], q2s_lv[1024 * 8];
static int32_t q3xxs_map[4096], q3s_map[4096], q2s_map[6561];
static uint16_t q3xxs_nbr[IQ3XXS_NBR], q3s_nbr[IQ3S_NBR], q2s_nbr[IQ2S_NBR];
static lattice_q q3xxs = {.n_grid = 256, .dim = 4, .nl = 8, .nkeys = 4096, .nwant = 2, .key = q3xxs_key,
                          .lv = q3xxs_lv, .map = q3xxs_map, .nbr = q3xxs_nbr};
static lattice_q q3s = {.n_grid = 512, .dim = 4, .nl = 8, .nkeys = 4096, .nwant = 3, .key = q3s_key,
                        .lv = q3s_lv, .map = q3s_map, .nbr = q3s_nbr};
static lattice_q q2s = {.n_grid = 1024, .dim = 8, .nl = 3, .nkeys = 6561, .nwant = 1, .key = q2s_key,
                        .lv = q2s_lv, .map = q2s_map, .nbr = q2s_nbr};
static pthread_once_t qgrids_once = PTHREAD_ONCE_INIT;
static int qgrids_ok;

static int key_digit(const lattice_q *g, int key, int j) {
    for (int i = 0; i < j; i++) key /= g->nl;
    return key % g->nl;
}

/* the keys of a bitmap's points, the map, the neighbour lists; 0 if the
 * lists do not fill cap entries exactly */
static int lattice_q_init(lattice_q *g, const uint64_t *bits, int cap) {
    int k = 0;
    for (int key = 0; key < g->nkeys; key++) {
        g->map[key] = -1;
        if (bits[key / 64] >> (key % 64) & 1) {
            g->map[key] = k;
            g->key[k++] = (uint16_t)key;
        }
    }
    if (k != g->n_grid) return 0;
    for (int p = 0; p < g->n_grid; p++)
        for (int j = 0; j < g->dim; j++) g->lv[g->dim * p + j] = (uint8_t)key_digit(g, g->key[p], j);
    int n = 0;
    for (int key = 0; key < g->nkeys; key++) {
        if (g->map[key] >= 0) continue;
        int lv[8], shell[3], ns = 0;
        for (int j = 0; j < g->dim; j++) lv[j] = key_digit(g, key, j);
        /* the nwant smallest distinct distances, ascending */
        for (int p = 0; p < g->n_grid; p++) {
            int d2 = 0;
            for (int j = 0; j < g->dim; j++) {
                int d = g->lv[g->dim * p + j] - lv[j];
                d2 += d * d;
            }
            int at = ns;
            while (at > 0 && shell[at - 1] > d2) at--;
            if (at > 0 && shell[at - 1] == d2) continue;
            if (at >= g->nwant) continue;
            for (int s = ns < g->nwant ? ns : g->nwant - 1; s > at; s--) shell[s] = shell[s - 1];
            shell[at] = d2;
            if (ns < g->nwant) ns++;
        }
        if (n >= cap) return 0;
        int start = n++, cnt = 0;
        g->map[key] = -(1 + start);
        for (int s = 0; s < ns; s++)
            for (int p = 0; p < g->n_grid; p++) {
                int d2 = 0;
                for (int j = 0; j < g->dim; j++) {
                    int d = g->lv[g->dim * p + j] - lv[j];
                    d2 += d * d;
                }
                if (d2 != shell[s]) continue;
                if (n >= cap) return 0;
                g->nbr[n++] = (uint16_t)p;
                cnt++;
            }
        g->nbr[start] = (uint16_t)cnt;
    }
    g->n_nbr = n;
    return n == cap;
}

static void qgrids_init(void) {
    qgrids_ok = lattice_q_init(&q3xxs, iq3xxs_keys, IQ3XXS_NBR) && lattice_q_init(&q3s, iq3s_keys, IQ3S_NBR) &&
                lattice_q_init(&q2s, iq2s_keys, IQ2S_NBR);
}

/* The grid point among key's neighbours (nb: count, then points) with the
 * least weighted squared error against scale * (2 l + 1); its levels to L */
static int best_neighbour(const lattice_q *g, const uint16_t *nb, const float *xval, const float *w, float scale,
                          int8_t *L) {
    float best_d2 = 3.40282347e38f;
    int best = -1;
    for (int j = 1; j <= nb[0]; j++) {
        float d2 = 0;
        for (int i = 0; i < g->dim; i++) {
            float q = (float)(2 * g->lv[g->dim * nb[j] + i] + 1);
            float diff = scale * q - xval[i];
            d2 += w[i] * diff * diff;
        }
        if (best < 0 || d2 < best_d2) { /* the first when every d2 is NaN */
            best_d2 = d2;
            best = nb[j];
        }
    }
    for (int i = 0; i < g->dim; i++) L[i] = (int8_t)g->lv[g->dim * best + i];
    return best;
}

/* The levels of group xv (dim magnitudes) at inverse scale id, clamped to
 * the grid's levels, and its key */
static int group_key(const lattice_q *g, const float *xv, float id, int8_t *L) {
    int key = 0;
    for (int i = g->dim - 1; i >= 0; i--) {
        int l = pk_nearest_int(0.5f * (id * xv[i] - 1));
        l = l < 0 ? 0 : l > g->nl - 1 ? g->nl - 1 : l;
        L[i] = (int8_t)l;
        key = key * g->nl + l;
    }
    return key;
}

/* the search's parameters per type */
typedef struct {
    const lattice_q *g;
    int sub;                   /* elements per sub-block (one scale) */
    int ntry;                  /* inverse scales tried: 2 ntry + 1 */
    float step;
    float eps;                 /* a sub-block below it is zero; 0: only exact zeros */
    float fudge;               /* d = max_scale / 31 * fudge */
    int even_signs;            /* IQ3_XXS: 7 sign bits, the 8th the parity */
    int start_on_grid;         /* the groups' state before any scale improves */
    int redo_all;              /* second pass: every group (IQ3_S) or those off the grid */
    int sigma_w;               /* without importances: sigma2 / 4 + x^2 (IQ2_S), else x^2 */
} lattice_kind;

/* sum w x q (returned) and sum w q^2 (*sumq2) of the values q = 2 l + 1 of
 * levels L against the magnitudes xval, in ggml's order */
static float fit_sums(const float *weight, const float *xval, const int8_t *L, int n, float *sumq2) {
    float sumqx = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        float w = weight[i], q = (float)(2 * L[i] + 1);
        sumqx += w * xval[i] * q;
        s2 += w * q * q;
    }
    *sumq2 = s2;
    return sumqx;
}

/* One sub-block of n = k->sub elements: its scale and, per group, the grid
 * point (idx) and the sign bytes (one per 8 elements); returns 0 for a
 * sub-block too small to quantize (then nothing of it is stored, *scale 0) */
static int lattice_sub(const lattice_kind *k, const float *xb, const float *qw, float sigma2, float *scale_out,
                       int *idx, uint8_t *signs) {
    const lattice_q *g = k->g;
    const int n = k->sub, ng = n / g->dim, kmax = g->nl;
    float weight[32], waux[32], xval[32] = {0};
    int8_t L[32], Laux[32];
    int on[8], on_aux[8];
    for (int i = 0; i < n; i++) {
        if (qw) weight[i] = qw[i] * sqrtf(sigma2 + xb[i] * xb[i]);
        else if (k->sigma_w) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
        else weight[i] = xb[i] * xb[i];
    }
    for (int i = 0; i < n; i++) waux[i] = sqrtf(weight[i]);
    for (int b = 0; b < n / 8; b++) {
        int nflip = 0;
        uint8_t s = 0;
        for (int i = 0; i < 8; i++) {
            if (xb[8 * b + i] >= 0) xval[8 * b + i] = xb[8 * b + i];
            else {
                xval[8 * b + i] = -xb[8 * b + i];
                nflip++;
                s |= (uint8_t)(1 << i);
            }
        }
        if (k->even_signs && nflip % 2) {
            int imin = 0;
            float min = weight[8 * b] * xb[8 * b] * xb[8 * b];
            for (int i = 1; i < 8; i++) {
                float ax = weight[8 * b + i] * xb[8 * b + i] * xb[8 * b + i];
                if (ax < min) { min = ax; imin = i; }
            }
            xval[8 * b + imin] = -xval[8 * b + imin];
            s ^= (uint8_t)(1 << imin);
        }
        signs[b] = k->even_signs ? s & 127 : s;
    }
    float max = xval[0];
    for (int i = 1; i < n; i++) max = max > xval[i] ? max : xval[i];
    memset(L, 0, sizeof L);
    if (k->eps > 0 ? max < k->eps : !max) {
        *scale_out = 0.0f;
        return 0;
    }
    float best = 0, scale = max / (2 * kmax - 1);
    for (int j = 0; j < ng; j++) on[j] = k->start_on_grid;
    for (int t = -k->ntry; t <= k->ntry; t++) {
        float id = (2 * kmax - 1 + t * k->step) / max, this_scale = 1 / id;
        for (int j = 0; j < ng; j++) {
            int key = group_key(g, xval + g->dim * j, id, Laux + g->dim * j);
            on_aux[j] = g->map[key] >= 0;
            if (!on_aux[j])
                best_neighbour(g, g->nbr - g->map[key] - 1, xval + g->dim * j, waux + g->dim * j, this_scale,
                               Laux + g->dim * j);
        }
        float sumq2, sumqx = fit_sums(weight, xval, Laux, n, &sumq2);
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            memcpy(L, Laux, (size_t)n);
            for (int j = 0; j < ng; j++) on[j] = on_aux[j];
        }
    }
    int off = 0;
    for (int j = 0; j < ng; j++) off += !on[j];
    if (off > 0 && scale > 0) {
        float id = 1 / scale;
        for (int j = 0; j < ng; j++) {
            if (on[j] && !k->redo_all) continue;
            int key = group_key(g, xval + g->dim * j, id, L + g->dim * j);
            if (g->map[key] < 0)
                best_neighbour(g, g->nbr - g->map[key] - 1, xval + g->dim * j, waux + g->dim * j, scale,
                               L + g->dim * j);
        }
        float sumq2, sumqx = fit_sums(weight, xval, L, n, &sumq2);
        if (sumq2 > 0) scale = sumqx / sumq2;
    }
    if (scale < 0) {   /* cannot happen with non-negative weights; as ggml, flip the signs */
        scale = -scale;
        for (int b = 0; b < n / 8; b++) signs[b] = (uint8_t)(k->even_signs ? ~signs[b] & 127 : ~signs[b]);
    }
    for (int j = 0; j < ng; j++) {
        int key = 0;
        for (int i = g->dim - 1; i >= 0; i--) key = key * g->nl + L[g->dim * j + i];
        idx[j] = g->map[key];      /* on the grid by construction */
    }
    *scale_out = scale;
    return 1;
}

static const lattice_kind kind_iq3_xxs = {
    .g = &q3xxs, .sub = 32, .ntry = 15, .step = 0.2f, .eps = 1e-8f, .fudge = 1.0125f,
    .even_signs = 1, .start_on_grid = 1, .redo_all = 0, .sigma_w = 0,
};
static const lattice_kind kind_iq3_s = {
    .g = &q3s, .sub = 32, .ntry = 9, .step = 0.2f, .eps = 0.0f, .fudge = 1.033f,
    .even_signs = 0, .start_on_grid = 0, .redo_all = 1, .sigma_w = 0,
};
static const lattice_kind kind_iq2_s = {
    .g = &q2s, .sub = 16, .ntry = 9, .step = 0.1f, .eps = 1e-8f, .fudge = 0.9875f,
    .even_signs = 0, .start_on_grid = 1, .redo_all = 0, .sigma_w = 1,
};

/* the 4-bit code of a sub-block scale given 1 / d */
static inline uint8_t scale_code(float id, float s) {
    int l = pk_nearest_int(0.5f * (id * s - 1));
    return (uint8_t)(l < 0 ? 0 : l > 15 ? 15 : l);
}

/* One super-block of type t at x (importances qw or NULL) into block blk */
static void lattice_block(int t, const float *x, const float *qw, uint8_t *blk) {
    const lattice_kind *k = t == PK_TYPE_IQ3_XXS ? &kind_iq3_xxs : t == PK_TYPE_IQ3_S ? &kind_iq3_s : &kind_iq2_s;
    const int nsub = PK_QK_K / k->sub, ng = k->sub / k->g->dim;
    memset(blk, 0, pk_type_get(t)->type_size);
    float sumx2 = 0;
    for (int i = 0; i < PK_QK_K; i++) sumx2 += x[i] * x[i];
    const float sigma2 = 2 * sumx2 / PK_QK_K;
    float scales[16], max_scale = 0;
    for (int ib = 0; ib < nsub; ib++) {
        int idx[8];
        uint8_t signs[4];
        float s;
        if (!lattice_sub(k, x + k->sub * ib, qw ? qw + k->sub * ib : NULL, sigma2, &s, idx, signs)) {
            scales[ib] = 0.0f;
            continue;
        }
        scales[ib] = s;
        if (t == PK_TYPE_IQ3_XXS) {
            pk_block_iq3_xxs *b = (pk_block_iq3_xxs *)(void *)blk;
            for (int j = 0; j < ng; j++) b->qs[8 * ib + j] = (uint8_t)idx[j];
            uint32_t sa = (uint32_t)signs[0] | (uint32_t)signs[1] << 7 | (uint32_t)signs[2] << 14 |
                          (uint32_t)signs[3] << 21;
            memcpy(b->qs + 64 + 4 * ib, &sa, 4);
        } else if (t == PK_TYPE_IQ3_S) {
            pk_block_iq3_s *b = (pk_block_iq3_s *)(void *)blk;
            for (int j = 0; j < ng; j++) {
                b->qs[8 * ib + j] = (uint8_t)(idx[j] & 255);
                b->qh[ib] |= (uint8_t)((idx[j] >> 8) << j);
            }
            memcpy(b->signs + 4 * ib, signs, 4);
        } else {
            pk_block_iq2_s *b = (pk_block_iq2_s *)(void *)blk;
            for (int j = 0; j < ng; j++) {
                const int i8 = 2 * ib + j;
                b->qs[i8] = (uint8_t)(idx[j] & 255);
                b->qh[i8 / 4] |= (uint8_t)((idx[j] >> 8) << 2 * (i8 % 4));
                b->qs[32 + i8] = signs[j];
            }
        }
        max_scale = max_scale > s ? max_scale : s;
    }
    if (!max_scale) {
        memset(blk, 0, pk_type_get(t)->type_size);
        return;
    }
    const float d = max_scale / 31, id = 1 / d;
    const uint16_t dh = pk_fp32_to_fp16(d * k->fudge);
    memcpy(blk, &dh, 2);
    if (t == PK_TYPE_IQ3_XXS) {
        pk_block_iq3_xxs *b = (pk_block_iq3_xxs *)(void *)blk;
        for (int ib = 0; ib < nsub; ib++) b->qs[64 + 4 * ib + 3] |= (uint8_t)(scale_code(id, scales[ib]) << 4);
    } else if (t == PK_TYPE_IQ3_S) {
        pk_block_iq3_s *b = (pk_block_iq3_s *)(void *)blk;
        for (int ib = 0; ib < nsub; ib += 2)
            b->scales[ib / 2] = (uint8_t)(scale_code(id, scales[ib]) | scale_code(id, scales[ib + 1]) << 4);
    } else {
        pk_block_iq2_s *b = (pk_block_iq2_s *)(void *)blk;
        for (int ib = 0; ib < nsub; ib += 2)
            b->scales[ib / 2] = (uint8_t)(scale_code(id, scales[ib]) | scale_code(id, scales[ib + 1]) << 4);
    }
}

/* the grids' quantization tables, made once; 0 if they could not be (the
 * neighbour lists not of the sizes above: a bug, which the tests catch) */
static int qgrids(void) {
    pthread_once(&qgrids_once, qgrids_init);
    return qgrids_ok;
}

static void lattice_rows(int t, const float *src, void *dst, int64_t n, const float *imp) {
    const size_t bs = pk_type_get(t)->type_size;
    if (!qgrids()) {
        memset(dst, 0, (size_t)(n / PK_QK_K) * bs);
        return;
    }
    for (int64_t i = 0; i < n / PK_QK_K; i++)
        lattice_block(t, src + PK_QK_K * i, imp ? imp + PK_QK_K * i : NULL, (uint8_t *)dst + (size_t)i * bs);
}

void pk_quantize_iq3_xxs(const float *src, void *dst, int64_t n, const float *imp) {
    lattice_rows(PK_TYPE_IQ3_XXS, src, dst, n, imp);
}
void pk_quantize_iq3_s(const float *src, void *dst, int64_t n, const float *imp) {
    lattice_rows(PK_TYPE_IQ3_S, src, dst, n, imp);
}
void pk_quantize_iq2_s(const float *src, void *dst, int64_t n, const float *imp) {
    lattice_rows(PK_TYPE_IQ2_S, src, dst, n, imp);
}
void pk_iq3_xxs_from_float(const float *src, void *dst, int64_t n) { pk_quantize_iq3_xxs(src, dst, n, NULL); }
void pk_iq3_s_from_float(const float *src, void *dst, int64_t n) { pk_quantize_iq3_s(src, dst, n, NULL); }
void pk_iq2_s_from_float(const float *src, void *dst, int64_t n) { pk_quantize_iq2_s(src, dst, n, NULL); }

int pk_iq_lattice_tables_ok(void) { return qgrids(); }
