/* test_iq2.c - the tables of the IQ2_XXS / IQ2_XS formats (quant/iq2.c) and
 * their dequantization on hand-built blocks.
 *
 * The grids and the sign rule are part of the format: they must equal
 * ggml's iq2xxs_grid, iq2xs_grid and ksigns_iq2xs. Checked here: the point
 * counts, the level set {8, 25, 43} of every byte, the points distinct and
 * in ggml's order (increasing as numbers of 2-bit level indices, element 0
 * lowest), and FNV-1a 64 checksums of the expanded tables, computed once
 * from llama.cpp 34af94c's ggml/src/ggml-common.h: each grid's uint64
 * entries as 8 little-endian bytes each, in table order; ksigns_iq2xs's 128
 * bytes. The random-block decoding and the kernels are in
 * test_kernels_quant.c.
 */
#include <string.h>
#include "testhelp.h"
#include "quant/quant.h"

static uint64_t fnv1a_step(uint64_t h, uint8_t b) { return (h ^ b) * 0x100000001b3ull; }

static uint64_t grid_fnv(const uint64_t *g, int n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < 8; j++) h = fnv1a_step(h, (uint8_t)(g[i] >> 8 * j));
    return h;
}

/* bad bytes, and whether the points increase as base-4 numbers of level indices */
static void check_grid(const char *name, const uint64_t *g, int n, uint64_t want) {
    int bad = 0, order = 0;
    long prev = -1;
    for (int i = 0; i < n; i++) {
        long packed = 0;
        for (int j = 0; j < 8; j++) {
            int v = (uint8_t)(g[i] >> 8 * j), l = v == 8 ? 0 : v == 25 ? 1 : v == 43 ? 2 : -1;
            bad += l < 0;
            packed |= (long)(l < 0 ? 3 : l) << 2 * j;
        }
        order += packed <= prev;
        prev = packed;
    }
    TEST_CHECK(bad == 0, "%s: every level is 8, 25 or 43 (%d bytes are not)", name, bad);
    TEST_CHECK(order == 0, "%s: %d points distinct and in increasing order (%d out of order)", name, n, order);
    uint64_t h = grid_fnv(g, n);
    TEST_CHECK(h == want, "%s: checksum %016llx, llama.cpp's %016llx", name, (unsigned long long)h,
               (unsigned long long)want);
}

static void test_tables(void) {
    TEST_CHECK(sizeof pk_iq2xxs_grid / sizeof *pk_iq2xxs_grid == 256, "IQ2_XXS grid: 256 points");
    TEST_CHECK(sizeof pk_iq2xs_grid / sizeof *pk_iq2xs_grid == 512, "IQ2_XS grid: 512 points");
    check_grid("iq2xxs_grid", pk_iq2xxs_grid, 256, 0xbb4ee025b5ac6e8eull);
    check_grid("iq2xs_grid", pk_iq2xs_grid, 512, 0xc9b1ee61e79909bdull);
    /* signs: the 7 code bits, then the parity bit: every pattern has an even
     * number of minus signs, and the 128 codes give the 128 such patterns */
    uint64_t h = 0xcbf29ce484222325ull;
    int odd = 0, seen[256] = { 0 }, dup = 0;
    for (unsigned c = 0; c < 128; c++) {
        unsigned s = pk_iq2_signs(c);
        odd += __builtin_popcount(s) & 1;
        dup += seen[s & 255]++;
        h = fnv1a_step(h, (uint8_t)s);
    }
    TEST_CHECK(odd == 0 && dup == 0, "sign patterns: even minus counts (%d odd), distinct (%d repeated)", odd, dup);
    TEST_CHECK(h == 0xf19ba8f8c3292ba5ull, "sign table checksum %016llx, llama.cpp's ksigns_iq2xs f19ba8f8c3292ba5",
               (unsigned long long)h);
    TEST_CHECK(pk_iq2_signs(128 + 3) == 3, "sign codes use 7 bits");
    int bad = 0;
    for (unsigned c = 0; c < 128; c++)
        for (int j = 0; j < 8; j++)
            bad += (int8_t)(pk_iq2_sign8[c] >> 8 * j) != ((pk_iq2_signs(c) >> j) & 1 ? -1 : 1);
    TEST_CHECK(bad == 0, "pk_iq2_sign8: the signs of pk_iq2_signs as +-1 bytes (%d wrong)", bad);
}

static void test_known_blocks(void) {
    float out[256];
    /* IQ2_XXS, d = 1: sub-block 0 ls 3 (db = 3.5 / 4), groups 0 and 1 on
     * points 0 (all 8) and 1 (element 0 = 43), group 1 sign code 1 (element 0
     * minus, the parity bit makes element 7 minus); sub-block 7 ls 15 (db =
     * 15.5 / 4), group 3 on point 255 (levels 8 25 8 8 25 43 43 43) with sign
     * code 127 (elements 0-6 minus, parity 1: element 7 minus too) */
    pk_block_iq2_xxs xxs;
    memset(&xxs, 0, sizeof xxs);
    xxs.d = pk_fp32_to_fp16(1.0f);
    uint8_t *q = (uint8_t *)xxs.qs;
    q[1] = 1;
    uint32_t aux0 = 3u << 28 | 1u << 7, aux7 = 15u << 28 | 127u << 21;
    memcpy(q + 4, &aux0, 4);
    q[8 * 7 + 3] = 255;
    memcpy(q + 8 * 7 + 4, &aux7, 4);
    pk_type_get(PK_TYPE_IQ2_XXS)->to_float(&xxs, out, 256);
    TEST_CHECK(out[0] == 7.0f && out[8] == -37.625f && out[9] == 7.0f && out[15] == -7.0f &&
                   out[32] == 0.25f * 0.5f * 8 && out[224 + 24] == -3.875f * 8 && out[224 + 25] == -3.875f * 25 &&
                   out[255] == -3.875f * 43 && out[224] == 3.875f * 8,
               "IQ2_XXS known values (%g %g %g %g %g %g %g)", out[0], out[8], out[15], out[32], out[248],
               out[249], out[255]);

    /* IQ2_XS, d = 0.5: group 0 on point 511 (all 43) with sign code 2
     * (elements 1 and 7 minus); group 2 (sub-block 0's second half: the high
     * nibble) on point 256; scales[0] = 0x4A: ls 10, then 4 */
    pk_block_iq2_xs xs;
    memset(&xs, 0, sizeof xs);
    xs.d = pk_fp32_to_fp16(0.5f);
    xs.qs[0] = (uint16_t)(511 | 2 << 9);
    xs.qs[2] = 256;
    xs.scales[0] = 0x4A;
    pk_type_get(PK_TYPE_IQ2_XS)->to_float(&xs, out, 256);
    const float db0 = 0.5f * 10.5f * 0.25f, db1 = 0.5f * 4.5f * 0.25f;
    int ok = 1;
    for (int j = 0; j < 8; j++) {
        float want0 = db0 * (float)(uint8_t)(pk_iq2xs_grid[511] >> 8 * j) * (j == 1 || j == 7 ? -1.0f : 1.0f);
        float want2 = db1 * (float)(uint8_t)(pk_iq2xs_grid[256] >> 8 * j);
        ok &= out[j] == want0 && out[16 + j] == want2 && out[8 + j] == db0 * 8;
    }
    TEST_CHECK(ok && out[32] == 0.5f * 0.5f * 0.25f * 8, "IQ2_XS known values (%g %g %g %g)", out[0], out[1],
               out[16], out[32]);
    TEST_CHECK(pk_iq2xs_grid[511] == 0x2b2b2b2b2b2b2b2bull && pk_iq2xs_grid[256] == 0x190808080808192bull &&
                   pk_iq2xxs_grid[255] == 0x2b2b2b1908081908ull,
               "grid corner points");
}

int main(void) {
    test_tables();
    test_known_blocks();
    return TEST_REPORT();
}
