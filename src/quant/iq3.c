/* quant/iq3.c - the lattice i-quants IQ3_XXS, IQ3_S and IQ2_S: their grids
 * and scalar reference dequantization (block layouts: quant/quant.h).
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
                const uint8_t sg = pk_iq_sign8((a >> 7 * h) & 127);
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
