/* quant/iq1.c - IQ1_S and IQ1_M (layouts in quant/quant.h): the IQ1 grid and
 * the scalar reference dequantize.
 *
 * Tuned for: nothing - this defines the formats. Dequantize is ggml's
 * (dequantize_row_iq1_s / _iq1_m) bit for bit: per group the float
 * dl = d * (2 ls + 1), then w = dl * (level + delta), level + delta exact.
 * No quantizer yet: ggml's needs an importance matrix (llama-quantize
 * refuses IQ1 without one), and the kernels read these files as written.
 */
#include <pthread.h>
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
