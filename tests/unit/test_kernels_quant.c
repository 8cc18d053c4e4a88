/* test_kernels_quant.c - the block-quantized weight types (Q4_0, Q4_1, Q5_0,
 * Q5_1, Q2_K..Q6_K, IQ4_NL, IQ4_XS, MXFP4, IQ2_XXS, IQ2_XS, IQ3_XXS, IQ3_S,
 * IQ2_S) and their activation types (Q8_1, Q8_K): formats (quant_*.c) and
 * every usable kernel table (kernels_*.c).
 *
 * Checks, per type: the type table; the i-quants' lattice grids and sign
 * bytes against ggml's tables (counts, levels, order, checksums);
 * dequantization of blocks with known
 * contents, against hand-computed values and against an independent
 * element-by-element decoder written from the layouts documented in quant/quant.h
 * (so scale/min packing is checked bit by bit); quantize -> dequantize RMS
 * error bounds; quantizer output identical to llama.cpp's reference
 * quantizers (hashes of ggml's quantize_row_*_ref output on fixed inputs);
 * for every ISA table: vec_dot and gemv against an exact double dot of the
 * dequantized data on random / zero / max-magnitude / outlier data (this is
 * also the llama.cpp compatibility check: the kernels compute what
 * dequantize-then-dot computes, to float rounding), MXFP4 also at the
 * extreme E8M0 exponents (0..4, 250..255), and the activation quantizers
 * bit-exact against the reference.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testhelp.h"
#define TESTRAND_SEED 0x243f6a8885a308d3ull
#include "testrand.h"
#include "quant/quant.h"
#include "quant/imat.h"
#include "kernels/kernels.h"

/* ---- deterministic data (and testrand.h) ----------------------------------- */

static uint16_t f16(float f) { return pk_fp32_to_fp16(f); }
static double h2d(const uint8_t *p) { uint16_t h; memcpy(&h, p, 2); return pk_fp16_to_fp32(h); }

static const int8_t iq4_levels[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                       1, 13, 25, 38, 53, 69, 89, 113 };
/* E2M1 magnitudes (MXFP4: code bit 3 is the sign, the scale 2^(e - 127)) */
static const double e2m1[8] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };

/* ---- the types under test ---------------------------------------------------- */

/* the lattice i-quants' round-trip bounds (relative RMS error, normal data) */
#define RMS_IQ3_XXS 0.23
#define RMS_IQ3_S 0.175
#define RMS_IQ2_S 0.28
/* FNV-1a of ggml's quantizers' bytes (test_ggml_bytes) */
#define GOLD_IQ3_XXS 0x8d107e9269ee915full
#define GOLD_IQ2_S 0x922fb6c46b264f20ull
#define GOLD_IQ3_XXS_IMP 0xc771554bf6ee30f9ull
#define GOLD_IQ2_S_IMP 0xc9ee56919f58eb26ull
#define GOLD_IQ3_S_NZ 0x9c1a8e4576d62bc0ull
#define GOLD_IQ3_S_NZ_IMP 0xb066b9dd3fa8ed36ull
#define GOLD_IQ3_XXS_NZ_IMP 0xfc039f73030668b1ull
#define GOLD_IQ2_S_NZ 0xeebdd86f25ffa586ull

static const struct { int t, act, blck; size_t size; double rms_bound; } types[] = {
    /* rms_bound: RMS(x - deq(q(x))) / RMS(x) for roughly normal data */
    { .t = PK_TYPE_Q4_0, .act = PK_TYPE_Q8_0, .blck = 32, .size = 18, .rms_bound = 0.125 },
    { .t = PK_TYPE_Q4_1, .act = PK_TYPE_Q8_1, .blck = 32, .size = 20, .rms_bound = 0.105 },
    { .t = PK_TYPE_Q5_0, .act = PK_TYPE_Q8_0, .blck = 32, .size = 22, .rms_bound = 0.062 },
    { .t = PK_TYPE_Q5_1, .act = PK_TYPE_Q8_1, .blck = 32, .size = 24, .rms_bound = 0.052 },
    { .t = PK_TYPE_Q2_K, .act = PK_TYPE_Q8_K, .blck = 256, .size = 84, .rms_bound = 0.36 },
    { .t = PK_TYPE_Q3_K, .act = PK_TYPE_Q8_K, .blck = 256, .size = 110, .rms_bound = 0.19 },
    { .t = PK_TYPE_Q4_K, .act = PK_TYPE_Q8_K, .blck = 256, .size = 144, .rms_bound = 0.095 },
    { .t = PK_TYPE_Q5_K, .act = PK_TYPE_Q8_K, .blck = 256, .size = 176, .rms_bound = 0.048 },
    { .t = PK_TYPE_Q6_K, .act = PK_TYPE_Q8_K, .blck = 256, .size = 210, .rms_bound = 0.025 },
    { .t = PK_TYPE_IQ4_NL, .act = PK_TYPE_Q8_0, .blck = 32, .size = 18, .rms_bound = 0.11 },
    { .t = PK_TYPE_IQ4_XS, .act = PK_TYPE_Q8_K, .blck = 256, .size = 136, .rms_bound = 0.11 },
    { .t = PK_TYPE_MXFP4, .act = PK_TYPE_Q8_0, .blck = 32, .size = 17, .rms_bound = 0.13 },
    { .t = PK_TYPE_IQ2_XXS, .act = PK_TYPE_Q8_K, .blck = 256, .size = 66, .rms_bound = 0.36 },
    { .t = PK_TYPE_IQ2_XS, .act = PK_TYPE_Q8_K, .blck = 256, .size = 74, .rms_bound = 0.32 },
    { .t = PK_TYPE_IQ3_XXS, .act = PK_TYPE_Q8_K, .blck = 256, .size = 98, .rms_bound = RMS_IQ3_XXS },
    { .t = PK_TYPE_IQ3_S, .act = PK_TYPE_Q8_K, .blck = 256, .size = 110, .rms_bound = RMS_IQ3_S },
    { .t = PK_TYPE_IQ2_S, .act = PK_TYPE_Q8_K, .blck = 256, .size = 82, .rms_bound = RMS_IQ2_S },
};
enum { NTYPES = sizeof types / sizeof *types };

/* The types without from_float (ggml has none: llama-quantize needs an
 * imatrix for them) and their importance quantizers, which the tests use
 * with importance 1 (imp NULL) where the others use from_float. */
static const struct { int t; void (*fn)(const float *, void *, int64_t, const float *); } imat_only[] = {
    { PK_TYPE_IQ2_XXS, pk_quantize_iq2_xxs_imat }, { PK_TYPE_IQ2_XS, pk_quantize_iq2_xs_imat },
};
static int is_imat_only(int t) {
    for (size_t i = 0; i < sizeof imat_only / sizeof *imat_only; i++)
        if (imat_only[i].t == t) return 1;
    return 0;
}

/* a row of type t holding x */
static void quant_row(int t, const float *x, void *q, int64_t n) {
    for (size_t i = 0; i < sizeof imat_only / sizeof *imat_only; i++)
        if (imat_only[i].t == t) {
            imat_only[i].fn(x, q, n, NULL);
            return;
        }
    pk_type_get(t)->from_float(x, q, n);
}

/* ---- an independent decoder: element e of one block as a - b ----------------
 * (a: the scaled level, b: the subtracted min/offset, both exact in double),
 * written from the layout comments in quant/quant.h. */
static void elem(int t, const uint8_t *p, int e, double *a, double *b) {
    *b = 0;
    switch (t) {
    case PK_TYPE_Q4_0: case PK_TYPE_IQ4_NL: {
        int q = e < 16 ? p[2 + e] & 15 : p[2 + e - 16] >> 4;
        *a = h2d(p) * (t == PK_TYPE_Q4_0 ? q - 8 : iq4_levels[q]);
        break;
    }
    case PK_TYPE_Q4_1: {
        int q = e < 16 ? p[4 + e] & 15 : p[4 + e - 16] >> 4;
        *a = h2d(p) * q; *b = -h2d(p + 2);
        break;
    }
    case PK_TYPE_Q5_0: case PK_TYPE_Q5_1: {
        int off = t == PK_TYPE_Q5_0 ? 2 : 4;
        uint32_t qh = p[off] | p[off + 1] << 8 | p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
        const uint8_t *qs = p + off + 4;
        int q = (e < 16 ? qs[e] & 15 : qs[e - 16] >> 4) | (int)((qh >> e) & 1) << 4;
        if (t == PK_TYPE_Q5_0) *a = h2d(p) * (q - 16);
        else { *a = h2d(p) * q; *b = -h2d(p + 2); }
        break;
    }
    case PK_TYPE_Q8_1:
        *a = h2d(p) * (int8_t)p[4 + e];
        break;
    case PK_TYPE_Q2_K: {
        int h = e / 128, k = e % 128 / 32, l = e % 32, s = e / 16;
        int q = (p[16 + 32 * h + l] >> 2 * k) & 3;
        *a = h2d(p + 80) * (p[s] & 15) * q; *b = h2d(p + 82) * (p[s] >> 4);
        break;
    }
    case PK_TYPE_Q3_K: {
        int h = e / 128, k = e % 128 / 32, l = e % 32, s = e / 16;
        int q = ((p[32 + 32 * h + l] >> 2 * k) & 3) + 4 * ((p[e % 32] >> (e / 32)) & 1) - 4;
        const uint8_t *sc = p + 96;
        int lo = (sc[s % 8] >> 4 * (s / 8)) & 15, hi = (sc[8 + s % 4] >> 2 * (s / 4)) & 3;
        *a = h2d(p + 108) * ((lo | hi << 4) - 32) * q;
        break;
    }
    case PK_TYPE_Q4_K: case PK_TYPE_Q5_K: {
        int s = e / 32, h = e / 64, l = e % 32;
        const uint8_t *sc = p + 4;
        int scale, min;
        if (s < 4) { scale = sc[s] & 63; min = sc[s + 4] & 63; }
        else {
            scale = (sc[s + 4] & 15) | (sc[s - 4] >> 6) << 4;
            min = (sc[s + 4] >> 4) | (sc[s] >> 6) << 4;
        }
        const uint8_t *qs = p + 16 + (t == PK_TYPE_Q5_K ? 32 : 0);
        int q = e % 64 < 32 ? qs[32 * h + l] & 15 : qs[32 * h + l] >> 4;
        if (t == PK_TYPE_Q5_K) q |= ((p[16 + l] >> (e / 32)) & 1) << 4;
        *a = h2d(p) * scale * q; *b = h2d(p + 2) * min;
        break;
    }
    case PK_TYPE_Q6_K: {
        int h = e / 128, k = e % 128 / 32, l = e % 32;
        int lo = p[64 * h + l + 32 * (k & 1)];
        lo = k < 2 ? lo & 15 : lo >> 4;
        int q = (lo | ((p[128 + 32 * h + l] >> 2 * k) & 3) << 4) - 32;
        *a = h2d(p + 208) * (int8_t)p[192 + e / 16] * q;
        break;
    }
    case PK_TYPE_Q8_K: {
        float d;
        memcpy(&d, p, 4);
        *a = (double)d * (int8_t)p[4 + e];
        break;
    }
    case PK_TYPE_MXFP4: {
        int q = e < 16 ? p[1 + e] & 15 : p[1 + e - 16] >> 4;
        *a = (q & 8 ? -1 : 1) * ldexp(e2m1[q & 7], p[0] - 127);
        break;
    }
    case PK_TYPE_IQ4_XS: {
        int s = e / 32, j = e % 32;
        uint16_t sh = (uint16_t)(p[2] | p[3] << 8);
        int ls = ((p[4 + s / 2] >> 4 * (s % 2)) & 15) | ((sh >> 2 * s) & 3) << 4;
        int byte = p[8 + 16 * s + j % 16];
        *a = h2d(p) * (ls - 32) * iq4_levels[j < 16 ? byte & 15 : byte >> 4];
        break;
    }
    case PK_TYPE_IQ2_XXS: case PK_TYPE_IQ2_XS: {
        int g = e / 8, j = e % 8, code, ls;
        uint64_t point;
        if (t == PK_TYPE_IQ2_XXS) {
            const uint8_t *sb = p + 2 + 8 * (e / 32);
            uint32_t aux = sb[4] | sb[5] << 8 | sb[6] << 16 | (uint32_t)sb[7] << 24;
            point = pk_iq2xxs_grid[sb[g % 4]];
            code = (aux >> 7 * (g % 4)) & 127;
            ls = aux >> 28;
        } else {
            int q = p[2 + 2 * g] | p[3 + 2 * g] << 8;
            point = pk_iq2xs_grid[q & 511];
            code = q >> 9;
            ls = (p[66 + e / 32] >> (e % 32 < 16 ? 0 : 4)) & 15;
        }
        int minus = j < 7 ? (code >> j) & 1 : __builtin_popcount(code) & 1;
        *a = h2d(p) * (0.5 + ls) / 4 * (int)(uint8_t)(point >> 8 * j) * (minus ? -1 : 1);
        break;
    }
    case PK_TYPE_IQ3_XXS: {                 /* d, 64 indices, 8 x uint32 (ls << 28 | signs) */
        int s = e / 32, g = e % 32 / 4;
        uint32_t sa = p[66 + 4 * s] | p[67 + 4 * s] << 8 | p[68 + 4 * s] << 16 | (uint32_t)p[69 + 4 * s] << 24;
        uint32_t s7 = sa >> 7 * (e % 32 / 8) & 127, ones = 0;
        for (int k = 0; k < 7; k++) ones += s7 >> k & 1;
        int neg = e % 8 == 7 ? (int)(ones & 1) : (int)(s7 >> (e % 8) & 1);
        int v = (int)(pk_iq3xxs_grid()[p[2 + 8 * s + g]] >> 8 * (e % 4) & 255);
        *a = h2d(p) * (0.5 + (sa >> 28)) * 0.5 * (neg ? -v : v);
        break;
    }
    case PK_TYPE_IQ3_S: {                   /* d, qs[64], qh[8], signs[32], scales[4] */
        int s = e / 32, g = e % 32 / 4;
        int k = p[2 + 8 * s + g] | ((p[66 + s] >> g) & 1) << 8;
        int v = (int)(pk_iq3s_grid()[k] >> 8 * (e % 4) & 255);
        int ls = (p[106 + s / 2] >> 4 * (s % 2)) & 15;
        *a = h2d(p) * (1 + 2 * ls) * ((p[74 + e / 8] >> (e % 8)) & 1 ? -v : v);
        break;
    }
    case PK_TYPE_IQ2_S: {                   /* d, qs[32], signs[32], qh[8], scales[8] */
        int s = e / 32, g = e % 32 / 8;
        int k = p[2 + 4 * s + g] | ((p[66 + s] >> 2 * g) & 3) << 8;
        int v = (int)(pk_iq2s_grid()[k] >> 8 * (e % 8) & 255);
        int ls = (p[74 + s] >> 4 * (g / 2)) & 15;
        *a = h2d(p) * (0.5 + ls) * 0.25 * ((p[34 + 4 * s + g] >> (e % 8)) & 1 ? -v : v);
        break;
    }
    default: *a = NAN;
    }
}

/* offsets of the fp16 scales of each type, to keep random blocks finite */
static void sane_scales(int t, uint8_t *p) {
    static const struct { int t; int off[2]; } tab[] = {
        { PK_TYPE_Q4_0, { 0, -1 } }, { PK_TYPE_IQ4_NL, { 0, -1 } }, { PK_TYPE_Q4_1, { 0, 2 } },
        { PK_TYPE_Q5_0, { 0, -1 } }, { PK_TYPE_Q5_1, { 0, 2 } }, { PK_TYPE_Q8_1, { 0, 2 } },
        { PK_TYPE_Q2_K, { 80, 82 } }, { PK_TYPE_Q3_K, { 108, -1 } }, { PK_TYPE_Q4_K, { 0, 2 } },
        { PK_TYPE_Q5_K, { 0, 2 } }, { PK_TYPE_Q6_K, { 208, -1 } }, { PK_TYPE_IQ4_XS, { 0, -1 } },
        { PK_TYPE_IQ2_XXS, { 0, -1 } }, { PK_TYPE_IQ2_XS, { 0, -1 } }, { PK_TYPE_IQ3_XXS, { 0, -1 } },
        { PK_TYPE_IQ3_S, { 0, -1 } }, { PK_TYPE_IQ2_S, { 0, -1 } },
    };
    for (size_t i = 0; i < sizeof tab / sizeof *tab; i++)
        if (tab[i].t == t)
            for (int k = 0; k < 2; k++)
                if (tab[i].off[k] >= 0) {
                    uint16_t h = f16(ldexpf(1.0f + rndf() * 0.5f, (int)(rnd64() % 12) - 8));
                    if (rnd64() & 1) h |= 0x8000;
                    memcpy(p + tab[i].off[k], &h, 2);
                }
    if (t == PK_TYPE_Q8_K) { float d = ldexpf(1.0f + rndf() * 0.5f, -7); memcpy(p, &d, 4); }
    if (t == PK_TYPE_MXFP4) p[0] = (uint8_t)(127 + (int)(rnd64() % 12) - 8);   /* 2^-9 .. 2^2 */
}

static int type_blck(int t) { return pk_type_get(t)->blck; }

/* ---- type table ------------------------------------------------------------------ */

static void test_traits(void) {
    for (int i = 0; i < NTYPES; i++) {
        const pk_type_traits *tt = pk_type_get(types[i].t);
        TEST_CHECK(tt && tt->to_float && (tt->from_float == NULL) == is_imat_only(types[i].t) && tt->vec_dot_type == types[i].act &&
                   tt->blck == types[i].blck && tt->type_size == types[i].size,
                   "traits of %s", pk_type_name(types[i].t));
        TEST_CHECK(pk_kernels_ref_table.vec_dot[types[i].t] && pk_kernels_ref_table.gemv[types[i].t],
                   "reference kernels for %s", pk_type_name(types[i].t));
    }
    static const int acts[] = { PK_TYPE_Q8_1, PK_TYPE_Q8_K };
    for (int i = 0; i < 2; i++) {
        const pk_type_traits *tt = pk_type_get(acts[i]);
        TEST_CHECK(tt->to_float && tt->from_float && tt->vec_dot_type == -1 &&
                   pk_kernels_ref_table.quantize[acts[i]], "activation type %s", tt->name);
    }
    TEST_CHECK(sizeof(pk_block_q8_K) == 292 && sizeof(pk_block_q8_1) == 36, "activation sizes");
}

/* ---- the i-quant lattice grids ------------------------------------------------------- */

/* Each grid: its count, every coordinate one of its levels, entries in
 * strictly increasing order (so unique), and FNV-1a 64 over the entries as
 * little-endian bytes equal to that of ggml's table (iq3xxs_grid, iq3s_grid,
 * iq2s_grid of ggml-common.h, llama.cpp 34af94c: the same bytes hashed with
 * the same FNV-1a by a Python one-off). Their sign rule is IQ2_XXS's
 * (pk_iq2_signs, test_iq2.c). */
static void test_iq_grids(void) {
    static const uint8_t l3xxs[] = { 4, 12, 20, 28, 36, 44, 52, 62 }, l3s[] = { 1, 3, 5, 7, 9, 11, 13, 15 },
                         l2s[] = { 8, 25, 43 };
    const struct { const char *name; int count, dim, nl; const uint8_t *levels; uint64_t fnv; } g[] = {
        { .name = "iq3xxs", .count = 256, .dim = 4, .nl = 8, .levels = l3xxs, .fnv = 0xdfa5dc83d6a155d5ull },
        { .name = "iq3s", .count = 512, .dim = 4, .nl = 8, .levels = l3s, .fnv = 0xfa37020c25b44829ull },
        { .name = "iq2s", .count = 1024, .dim = 8, .nl = 3, .levels = l2s, .fnv = 0x123edd38a3b62b90ull },
    };
    for (int gi = 0; gi < 3; gi++) {
        uint8_t *bytes = malloc((size_t)g[gi].count * g[gi].dim);
        int bad_level = 0, bad_order = 0;
        uint64_t prev = 0;
        for (int k = 0; k < g[gi].count; k++) {
            uint64_t v = gi == 0 ? pk_iq3xxs_grid()[k] : gi == 1 ? pk_iq3s_grid()[k] : pk_iq2s_grid()[k];
            if (gi < 2) TEST_CHECK(v >> 32 == 0, "%s entry %d fits 32 bits", g[gi].name, k);
            bad_order += k > 0 && v <= prev;
            prev = v;
            for (int j = 0; j < g[gi].dim; j++) {
                uint8_t c = (uint8_t)(v >> 8 * j);
                bytes[k * g[gi].dim + j] = c;
                bad_level += memchr(g[gi].levels, c, (size_t)g[gi].nl) == NULL;
            }
        }
        uint64_t h = fnv1a(bytes, (size_t)g[gi].count * g[gi].dim);
        TEST_CHECK(bad_level == 0 && bad_order == 0, "%s grid: %d coordinates off the levels, %d out of order",
                   g[gi].name, bad_level, bad_order);
        TEST_CHECK(h == g[gi].fnv, "%s grid equals ggml's (FNV-1a %016llx)", g[gi].name, (unsigned long long)h);
        free(bytes);
    }
    TEST_CHECK(pk_iq3xxs_grid() == pk_iq3xxs_grid() && pk_iq2s_grid() == pk_iq2s_grid(), "grids made once");
}

/* ---- hand-built blocks -------------------------------------------------------------- */

/* known values, computed by hand from the format definitions */
static void test_known_blocks(void) {
    float out[256];
    int bad;

    pk_block_q4_0 q40 = { f16(0.5f), { 0 } };
    q40.qs[0] = 0x1F; q40.qs[15] = 0x80;       /* e0 = 15, e16 = 1, e15 = 0, e31 = 8 */
    pk_type_get(PK_TYPE_Q4_0)->to_float(&q40, out, 32);
    TEST_CHECK(out[0] == 3.5f && out[16] == -3.5f && out[15] == -4.0f && out[31] == 0.0f &&
               out[1] == -4.0f, "Q4_0 known values");

    pk_block_q4_1 q41 = { f16(0.25f), f16(-1.0f), { 0 } };
    q41.qs[3] = 0xF2;                           /* e3 = 2, e19 = 15 */
    pk_type_get(PK_TYPE_Q4_1)->to_float(&q41, out, 32);
    TEST_CHECK(out[3] == -0.5f && out[19] == 2.75f && out[0] == -1.0f, "Q4_1 known values");

    pk_block_q5_0 q50 = { f16(1.0f), { 0x01, 0, 0, 0x80 }, { 0 } };   /* bits 0 and 31 */
    q50.qs[0] = 0x0F; q50.qs[15] = 0xF0;
    pk_type_get(PK_TYPE_Q5_0)->to_float(&q50, out, 32);
    TEST_CHECK(out[0] == 15.0f && out[31] == 15.0f && out[15] == -16.0f && out[16] == -16.0f,
               "Q5_0 known values (%g %g %g %g)", out[0], out[31], out[15], out[16]);

    pk_block_q5_1 q51 = { .d = f16(2.0f), .m = f16(0.5f), .qh = { 0, 0, 1, 0 } };   /* bit 16 */
    q51.qs[0] = 0x30;                           /* e0 = 0, e16 = 3 | 16 */
    pk_type_get(PK_TYPE_Q5_1)->to_float(&q51, out, 32);
    TEST_CHECK(out[0] == 0.5f && out[16] == 38.5f, "Q5_1 known values");

    /* Q2_K: sub-block 0 scale 3 min 2; sub-block 9 scale 15 min 15 */
    pk_block_q2_K q2 = { .d = f16(0.5f), .dmin = f16(0.25f) };
    q2.scales[0] = 0x23; q2.scales[9] = 0xFF;
    q2.qs[0] = 0xE4;                            /* e0 = 0, e32 = 1, e64 = 2, e96 = 3 */
    q2.qs[32 + 16] = 0x0C;                      /* element 128 + 32 + 16 = 176 (sub 11) = 3 */
    q2.qs[16 + 1] = 0x03;                       /* element 17 (sub 1) */
    q2.qs[32 + 1 + 16] = 0x30;                  /* element 128 + 64 + 17 = 209 (sub 13) */
    q2.qs[9] = 0x00;
    q2.qs[32 + 9] = 0x02;                       /* element 128 + 0 + 9 = 137? sub 8 */
    pk_type_get(PK_TYPE_Q2_K)->to_float(&q2, out, 256);
    TEST_CHECK(out[0] == -0.5f && out[1] == -0.5f, "Q2_K sub-block 0 (%g)", out[0]);
    /* element 144 + 2 is sub-block 9: scale 15, min 15, q of qs[32 + 16 + 2] bits 0-1 */
    q2.qs[32 + 18] = 0x02;
    pk_type_get(PK_TYPE_Q2_K)->to_float(&q2, out, 256);
    TEST_CHECK(out[146] == 0.5f * 15 * 2 - 0.25f * 15 && out[145] == -3.75f,
               "Q2_K sub-block 9 (%g)", out[146]);

    /* Q3_K: d = 1; sub-block s scale = s - 10 (6-bit code s + 22) */
    pk_block_q3_K q3;
    memset(&q3, 0, sizeof q3);
    q3.d = f16(1.0f);
    for (int s = 0; s < 16; s++) {
        int code = s + 22;
        q3.scales[s % 8] |= (uint8_t)((code & 15) << 4 * (s / 8));
        q3.scales[8 + s % 4] |= (uint8_t)((code >> 4) << 2 * (s / 4));
    }
    q3.qs[5] = 0x03;          /* e5: low 3, hmask bit 0 of hmask[5] set -> 3 + 4 - 4 = 3 */
    q3.hmask[5] = 0x01;
    q3.qs[32 + 20] = 0x40;    /* element 128 + 64 + 20 = 212 (sub 13): low 0, no high -> -4 */
    pk_type_get(PK_TYPE_Q3_K)->to_float(&q3, out, 256);
    TEST_CHECK(out[5] == -10.0f * 3 && out[212] == 3.0f * -4 && out[0] == -10.0f * -4 &&
               out[255] == 5.0f * -4, "Q3_K known values (%g %g %g %g)", out[5], out[212], out[0], out[255]);

    /* Q4_K / Q5_K: scales 1,2,3,4,40,50,60,63 mins 0,1,2,3,17,33,48,63 */
    static const int ksc[8] = { 1, 2, 3, 4, 40, 50, 60, 63 }, kmn[8] = { 0, 1, 2, 3, 17, 33, 48, 63 };
    uint8_t packed[12] = { 0 };
    for (int j = 0; j < 8; j++) {
        if (j < 4) { packed[j] = (uint8_t)ksc[j]; packed[j + 4] = (uint8_t)kmn[j]; }
        else {
            packed[j + 4] = (uint8_t)((ksc[j] & 15) | (kmn[j] & 15) << 4);
            packed[j - 4] |= (uint8_t)((ksc[j] >> 4) << 6);
            packed[j] |= (uint8_t)((kmn[j] >> 4) << 6);
        }
    }
    pk_block_q4_K q4;
    q4.d = f16(1.0f); q4.dmin = f16(0.5f);
    memcpy(q4.scales, packed, 12);
    memset(q4.qs, 0x5A, sizeof q4.qs);          /* low nibble 10, high 5 */
    pk_type_get(PK_TYPE_Q4_K)->to_float(&q4, out, 256);
    TEST_CHECK(out[0] == 10.0f && out[32] == 9.5f && out[128] == 391.5f && out[225] == 283.5f &&
               out[200] == 600.0f - 24.0f, "Q4_K known values (%g %g %g %g %g)",
               out[0], out[32], out[128], out[225], out[200]);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        pk_get_scale_min_k4(j, packed, &sc, &m);
        TEST_CHECK(sc == ksc[j] && m == kmn[j], "pk_get_scale_min_k4(%d)", j);
    }
    pk_block_q5_K q5;
    q5.d = f16(1.0f); q5.dmin = f16(0.5f);
    memcpy(q5.scales, packed, 12);
    memset(q5.qs, 0x5A, sizeof q5.qs);
    memset(q5.qh, 0, sizeof q5.qh);
    q5.qh[3] = 0x80;                            /* bit 7: element 64 * 3 + 32 + 3 = 227 */
    pk_type_get(PK_TYPE_Q5_K)->to_float(&q5, out, 256);
    TEST_CHECK(out[227] == 63.0f * 21 - 31.5f && out[226] == 283.5f, "Q5_K known values (%g)", out[227]);

    pk_block_q6_K q6;
    memset(&q6, 0, sizeof q6);
    q6.d = f16(0.5f);
    for (int s = 0; s < 16; s++) q6.scales[s] = (int8_t)(s % 2 ? -(s + 1) : s + 1);
    q6.ql[0] = 0xF3;           /* e0 low 3, e64 low 15 */
    q6.qh[0] = 0xC6;           /* e0 hi 2 -> 35, e32 hi 1 -> 16, e64 hi 0, e96 hi 3 -> 48 */
    q6.ql[32 + 1] = 0x07;      /* e33 low 7 (hi of qh[1] = 0) -> 7 */
    pk_type_get(PK_TYPE_Q6_K)->to_float(&q6, out, 256);
    /* e0: scale 1 * (35 - 32) = 3; e32 (sub 2, scale 3): 16 - 32 = -16;
     * e64 (sub 4, scale 5): 15 - 32; e96 (sub 6, scale 7): 48 - 32; e33: 7 - 32 (scale 3) */
    TEST_CHECK(out[0] == 1.5f && out[32] == 0.5f * 3 * -16 && out[64] == 0.5f * 5 * -17 &&
               out[96] == 0.5f * 7 * 16 && out[33] == 0.5f * 3 * -25 && out[16] == 0.5f * -2 * -32,
               "Q6_K known values (%g %g %g %g %g %g)", out[0], out[32], out[64], out[96], out[33], out[16]);

    pk_block_iq4_nl nl = { f16(0.5f), { 0 } };
    nl.qs[0] = 0xF0; nl.qs[7] = 0x78;
    pk_type_get(PK_TYPE_IQ4_NL)->to_float(&nl, out, 32);
    TEST_CHECK(out[0] == -63.5f && out[16] == 56.5f && out[7] == 0.5f && out[23] == -5.0f,
               "IQ4_NL known values");

    pk_block_iq4_xs xs;
    memset(&xs, 0, sizeof xs);
    xs.d = f16(0.25f);
    /* ls: sub-block 0 -> 33 (+1), sub-block 5 -> 0 (-32), sub-block 7 -> 63 (+31) */
    xs.scales_l[0] = 0x01 | 0x00; xs.scales_h = (uint16_t)(2 << 0 | 3 << 14);
    xs.scales_l[2] = 0x00;        /* sub-block 5 high nibble 0, h bits 0 */
    xs.scales_l[3] = 0xF0;        /* sub-block 7 low bits 15 */
    memset(xs.qs, 0x8F, sizeof xs.qs);          /* low 15 (113), high 8 (1) */
    pk_type_get(PK_TYPE_IQ4_XS)->to_float(&xs, out, 256);
    TEST_CHECK(out[0] == 0.25f * 1 * 113 && out[16] == 0.25f && out[5 * 32] == 0.25f * -32 * 113 &&
               out[7 * 32 + 31] == 0.25f * 31 && out[32] == 0.25f * -32 * 113,
               "IQ4_XS known values (%g %g %g %g)", out[0], out[16], out[160], out[255]);

    /* MXFP4: e = 128 is d = 1; code 7 = 12, 15 = -12, 8 = -0, 9 = -1, 1 = 1 */
    pk_block_mxfp4 mx = { 128, { 0 } };
    mx.qs[0] = 0xF7; mx.qs[3] = 0x98; mx.qs[15] = 0x1A;
    pk_type_get(PK_TYPE_MXFP4)->to_float(&mx, out, 32);
    TEST_CHECK(out[0] == 12.0f && out[16] == -12.0f && out[3] == 0.0f && out[19] == -1.0f &&
               out[15] == -2.0f && out[31] == 1.0f && out[1] == 0.0f,
               "MXFP4 known values (%g %g %g %g %g %g)", out[0], out[16], out[3], out[19], out[15], out[31]);
    /* every exponent: 2^(e - 128) exactly (and in the kernels' table),
     * subnormal for e = 0, 1; 12 * 2^126
     * and 8 * 2^126 overflow (inf, as ggml) */
    bad = 0;
    for (int e = 0; e < 256; e++) {
        pk_block_mxfp4 b = { (uint8_t)e, { 0 } };
        b.qs[0] = 0x71; b.qs[1] = 0xE6;       /* e0: 1, e16: 12, e1: 8, e17: -8 */
        pk_type_get(PK_TYPE_MXFP4)->to_float(&b, out, 32);
        double d = ldexp(1.0, e - 128);
        float tf;
        memcpy(&tf, &pk_e8m0_half_bits[e], 4);
        bad += out[0] != (float)d || pk_e8m0_half((uint8_t)e) != (float)d || tf != (float)d;
        bad += out[16] != (12 * d > 3.4028234663852886e38 ? INFINITY : (float)(12 * d));
        bad += out[1] != (8 * d > 3.4028234663852886e38 ? INFINITY : (float)(8 * d));
        bad += out[17] != -out[1];
    }
    TEST_CHECK(bad == 0, "MXFP4 scale 2^(e - 128) for all 256 exponents (%d wrong)", bad);
    /* quantizer corner cases: a value halfway between two levels takes the
     * one nearer zero; amax = 0 gives e = 0; amax 2^-127 wraps the exponent
     * to 254 (x86-64's conversion of ggml's float, all codes 0); amax 6
     * gives e = 2 - 2 + 127, d = 0.5 */
    float xm[32] = { 0 };
    xm[0] = 6.0f; xm[1] = 0.25f; xm[2] = -0.25f; xm[3] = 0.75f; xm[4] = 5.0f; xm[5] = -2.5f;
    xm[16] = 0.26f; xm[17] = -5.1f;
    pk_type_get(PK_TYPE_MXFP4)->from_float(xm, &mx, 32);
    TEST_CHECK(mx.e == 127 && (mx.qs[0] & 15) == 7 && (mx.qs[1] & 15) == 0 && (mx.qs[2] & 15) == 0 &&
               (mx.qs[3] & 15) == 1 && (mx.qs[4] & 15) == 6 && (mx.qs[5] & 15) == 12 &&
               (mx.qs[0] >> 4) == 1 && (mx.qs[1] >> 4) == 15,
               "MXFP4 quantizer levels and ties (e %d, qs %02x %02x %02x %02x %02x %02x)", mx.e,
               mx.qs[0], mx.qs[1], mx.qs[2], mx.qs[3], mx.qs[4], mx.qs[5]);
    memset(xm, 0, sizeof xm);
    pk_type_get(PK_TYPE_MXFP4)->from_float(xm, &mx, 32);
    TEST_CHECK(mx.e == 0 && mx.qs[0] == 0, "MXFP4 zeros: e = 0");
    xm[9] = 0x1p-127f; xm[10] = -0x1p-128f;
    pk_type_get(PK_TYPE_MXFP4)->from_float(xm, &mx, 32);
    TEST_CHECK(mx.e == 254 && mx.qs[9] == 0 && mx.qs[10] == 0, "MXFP4 tiny block: e wraps to %d", mx.e);

    /* IQ3_XXS, d = 1: sub-block 0 has ls = 3 (1.75); elements 0-3 grid[1] =
     * 20 4 4 4, 4-7 grid[0] = 4s, 8-11 grid[255] = 4 28 52 62; stored signs
     * 0000001 (parity sets bit 7: elements 0 and 7 negative) and 0000011
     * (elements 8, 9); sub-block 1: ls 0 (0.25), grid[0], no signs */
    pk_block_iq3_xxs x3;
    memset(&x3, 0, sizeof x3);
    x3.d = f16(1.0f);
    x3.qs[0] = 1; x3.qs[2] = 255;
    uint32_t sa = 3u << 28 | 0x01 | 0x03 << 7;
    memcpy(x3.qs + 64, &sa, 4);
    pk_type_get(PK_TYPE_IQ3_XXS)->to_float(&x3, out, 256);
    TEST_CHECK(out[0] == -35.0f && out[1] == 7.0f && out[4] == 7.0f && out[7] == -7.0f && out[8] == -7.0f &&
               out[9] == -49.0f && out[10] == 91.0f && out[11] == 108.5f && out[32] == 1.0f && out[255] == 1.0f,
               "IQ3_XXS known values (%g %g %g %g %g %g)", out[0], out[7], out[8], out[9], out[11], out[32]);

    /* IQ3_S, d = 0.5: ls 1 (1.5) then 2 (2.5); group 0 grid[1] = 3 1 1 1,
     * group 1 grid[256] (9th bit from qh) = 7 5 9 5, element 4 negative */
    pk_block_iq3_s s3;
    memset(&s3, 0, sizeof s3);
    s3.d = f16(0.5f);
    s3.scales[0] = 0x21; s3.qs[0] = 1; s3.qh[0] = 0x02; s3.signs[0] = 0x10;
    pk_type_get(PK_TYPE_IQ3_S)->to_float(&s3, out, 256);
    TEST_CHECK(out[0] == 4.5f && out[1] == 1.5f && out[4] == -10.5f && out[5] == 7.5f && out[6] == 13.5f &&
               out[8] == 1.5f && out[32] == 2.5f && out[64] == 0.5f,
               "IQ3_S known values (%g %g %g %g %g)", out[0], out[4], out[6], out[32], out[64]);

    /* IQ2_S, d = 2: elements 0-15 ls 1 (0.75), 16-31 ls 3 (1.75); group 0
     * grid[2] = 25 25 8 ..., group 1 grid[256] = 25 x5 8 25 8, group 2
     * grid[0] = 8s; elements 0 and 23 negative */
    pk_block_iq2_s s2;
    memset(&s2, 0, sizeof s2);
    s2.d = f16(2.0f);
    s2.scales[0] = 0x31; s2.qs[0] = 2; s2.qh[0] = 0x04; s2.qs[32] = 0x01; s2.qs[34] = 0x80;
    pk_type_get(PK_TYPE_IQ2_S)->to_float(&s2, out, 256);
    TEST_CHECK(out[0] == -18.75f && out[1] == 18.75f && out[2] == 6.0f && out[8] == 18.75f && out[13] == 6.0f &&
               out[14] == 18.75f && out[16] == 14.0f && out[23] == -14.0f && out[32] == 2.0f,
               "IQ2_S known values (%g %g %g %g %g %g)", out[0], out[2], out[8], out[13], out[16], out[23]);

    pk_block_q8_K q8k;
    memset(&q8k, 0, sizeof q8k);
    q8k.d = 0.125f; q8k.qs[0] = -128; q8k.qs[255] = 127;
    pk_type_get(PK_TYPE_Q8_K)->to_float(&q8k, out, 256);
    TEST_CHECK(out[0] == -16.0f && out[255] == 15.875f && out[1] == 0.0f, "Q8_K known values");

    pk_block_q8_1 q81 = { f16(0.5f), f16(3.0f), { 0 } };
    q81.qs[31] = -7;
    pk_type_get(PK_TYPE_Q8_1)->to_float(&q81, out, 32);
    TEST_CHECK(out[31] == -3.5f && out[0] == 0.0f, "Q8_1 known values");

    /* random bytes against the independent decoder */
    static const int all[] = { PK_TYPE_Q4_0, PK_TYPE_Q4_1, PK_TYPE_Q5_0, PK_TYPE_Q5_1, PK_TYPE_Q8_1,
                               PK_TYPE_Q2_K, PK_TYPE_Q3_K, PK_TYPE_Q4_K, PK_TYPE_Q5_K, PK_TYPE_Q6_K,
                               PK_TYPE_Q8_K, PK_TYPE_IQ4_NL, PK_TYPE_IQ4_XS, PK_TYPE_MXFP4,
                               PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS, PK_TYPE_IQ3_XXS, PK_TYPE_IQ3_S, PK_TYPE_IQ2_S };
    for (size_t ti = 0; ti < sizeof all / sizeof *all; ti++) {
        int t = all[ti];
        const pk_type_traits *tt = pk_type_get(t);
        enum { NB = 64 };
        uint8_t *blk = malloc(NB * tt->type_size);
        float *f = malloc(NB * (size_t)tt->blck * sizeof(float));
        for (size_t i = 0; i < NB * tt->type_size; i++) blk[i] = (uint8_t)rnd64();
        for (int b = 0; b < NB; b++) sane_scales(t, blk + b * tt->type_size);
        tt->to_float(blk, f, (int64_t)NB * tt->blck);
        bad = 0;
        for (int b = 0; b < NB; b++)
            for (int e = 0; e < tt->blck; e++) {
                double a, m;
                elem(t, blk + b * tt->type_size, e, &a, &m);
                double got = f[b * tt->blck + e];
                if (!(fabs(got - (a - m)) <= (fabs(a) + fabs(m)) * 0x1p-22)) {
                    if (!bad++)
                        fprintf(stderr, "  %s block %d elem %d: got %.9g want %.9g\n", tt->name, b, e,
                                got, a - m);
                }
            }
        TEST_CHECK(bad == 0, "%s: random blocks decode as documented (%d wrong)", tt->name, bad);
        free(blk); free(f);
    }
}

/* ---- round trip ------------------------------------------------------------------------ */

static void test_round_trip(void) {
    enum { N = 256 * 64 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    void *q = malloc(N * 2);
    for (int i = 0; i < N; i++) x[i] = rndn() * ldexpf(1.0f, (i / 256) % 9 - 4);
    for (int ti = 0; ti < NTYPES; ti++) {
        const pk_type_traits *tt = pk_type_get(types[ti].t);
        quant_row(types[ti].t, x, q, N);
        tt->to_float(q, y, N);
        /* per 256-block relative RMS, averaged (scales vary by block) */
        double rel = 0, worst = 0;
        for (int b = 0; b < N / 256; b++) {
            double se = 0, sx = 0;
            for (int i = b * 256; i < b * 256 + 256; i++) {
                se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
                sx += (double)x[i] * x[i];
            }
            double r = sqrt(se / sx);
            rel += r / (N / 256);
            if (r > worst) worst = r;
        }
        TEST_CHECK(rel < types[ti].rms_bound && worst < 1.5 * types[ti].rms_bound,
                   "%s round trip: relative RMS error %.4f (worst block %.4f), bound %.3f",
                   tt->name, rel, worst, types[ti].rms_bound);
        /* zeros stay zeros; a constant row is close */
        float z[256] = { 0 }, zo[256];
        quant_row(types[ti].t, z, q, 256);
        tt->to_float(q, zo, 256);
        int nz = 0;
        for (int i = 0; i < 256; i++) nz += zo[i] != 0.0f;
        TEST_CHECK(nz == 0, "%s: zeros round-trip to zeros", tt->name);
        /* one outlier: it is kept to within its block's step */
        for (int i = 0; i < 256; i++) z[i] = rndf() * 1e-3f;
        z[77] = 100.0f;
        quant_row(types[ti].t, z, q, 256);
        tt->to_float(q, zo, 256);
        TEST_CHECK(fabsf(zo[77] - 100.0f) < 100.0f * 2 * (float)types[ti].rms_bound,
                   "%s: outlier kept (%g)", tt->name, zo[77]);
    }
    free(x); free(y); free(q);
}

/* ---- byte compatibility with llama.cpp's reference quantizers ------------------------------ */

static void test_ggml_bytes(void) {
    /* FNV-1a of ggml's quantize_row_<type>_ref(gold_input, 4096 elements)
     * (ggml-quants.c built with -ffp-contract=off) */
    static const struct { int t; uint64_t h; } gold[] = {
{ PK_TYPE_Q4_0, 0xf54863c3506f5a57ull },
        { PK_TYPE_Q4_1, 0x578dfe01196c2866ull },
        { PK_TYPE_Q5_0, 0x6ef42b56f29772baull },
        { PK_TYPE_Q5_1, 0xac255046d823657cull },
        { PK_TYPE_Q8_0, 0xbd29554107ae010dull },
        { PK_TYPE_Q8_1, 0xf7059c1e6eba1814ull },
        { PK_TYPE_Q2_K, 0x1cc1ce160fd65b8cull },
        { PK_TYPE_Q3_K, 0xae2789b933bbd0ecull },
        { PK_TYPE_Q4_K, 0x6059325c069c1e2eull },
        { PK_TYPE_Q5_K, 0x5c9a14f7be8a2453ull },
        { PK_TYPE_Q6_K, 0x0354acd7ee6e220aull },
        { PK_TYPE_Q8_K, 0x5b75b96828bd4e55ull },
        { PK_TYPE_IQ4_NL, 0xf5671a0127552b2aull },
        { PK_TYPE_IQ4_XS, 0x0fd673ac3dd492dcull },
        { -PK_TYPE_IQ4_NL, 0xba891499f3a2fc39ull },
        /* ggml-org/ggml d99724f2 quantize_row_mxfp4_ref, built as above */
        { PK_TYPE_MXFP4, 0x068c9ff39cda89d9ull },
        /* llama.cpp 34af94c quantize_row_iq3_xxs_ref, quantize_row_iq2_s_ref,
           built as above (IQ3_S below) */
        { PK_TYPE_IQ3_XXS, GOLD_IQ3_XXS },
        { PK_TYPE_IQ2_S, GOLD_IQ2_S },
    };
    enum { N = 4096 };
    float *x = malloc(N * sizeof(float));
    uint8_t *q = malloc(N * 2);
    gold_input(x, N);
    for (size_t i = 0; i < sizeof gold / sizeof *gold; i++) {
        size_t sz = pk_row_size(abs(gold[i].t), N);
        memset(q, 0, sz);
        if (gold[i].t == -PK_TYPE_IQ4_NL) pk_quantize_iq4_nl_full(x, q, N, NULL);
        else pk_type_get(gold[i].t)->from_float(x, q, N);
        uint64_t h = fnv1a(q, sz);
        TEST_CHECK(h == gold[i].h, "%s%s quantizer bytes match ggml (hash %016llx)",
                   pk_type_name(abs(gold[i].t)), gold[i].t < 0 ? " (full)" : "",
                   (unsigned long long)h);
    }
    /* IQ2_XXS, IQ2_XS: FNV-1a of ggml's quantize_iq2_xxs / quantize_iq2_xs
     * (llama.cpp 34af94c's ggml-quants.c built alone with -O2
     * -ffp-contract=off, after iq2xs_init_impl) of the gold input, one row,
     * importances 0.25 + ((7 i) mod 13) / 2; and of it as two rows of 2048
     * with importances 1 (what imp == NULL means here) */
    static const struct { int t; void (*fn)(const float *, void *, int64_t, const float *); uint64_t h, h1; } iq[] = {
        { .t = PK_TYPE_IQ2_XXS, .fn = pk_quantize_iq2_xxs_imat,
          .h = 0xdd8a174a18ed384bull, .h1 = 0x7156f0470e9866adull },
        { .t = PK_TYPE_IQ2_XS, .fn = pk_quantize_iq2_xs_imat,
          .h = 0xf1d1ba2ae9901d6eull, .h1 = 0xa42cc4e4db19a4d7ull },
    };
    float *imp = malloc(N * sizeof(float));
    for (size_t i = 0; i < sizeof iq / sizeof *iq; i++) {
        const size_t sz = pk_row_size(iq[i].t, N);
        for (int j = 0; j < N; j++) imp[j] = 0.25f + (float)((j * 7) % 13) * 0.5f;
        memset(q, 0, sz);
        iq[i].fn(x, q, N, imp);
        uint64_t h = fnv1a(q, sz);
        TEST_CHECK(h == iq[i].h, "%s quantizer bytes match ggml's (hash %016llx)", pk_type_name(iq[i].t),
                   (unsigned long long)h);
        memset(q, 0, sz);
        iq[i].fn(x, q, N / 2, NULL);
        iq[i].fn(x + N / 2, q + sz / 2, N / 2, NULL);
        h = fnv1a(q, sz);
        TEST_CHECK(h == iq[i].h1, "%s quantizer with importance 1 matches ggml's (hash %016llx)",
                   pk_type_name(iq[i].t), (unsigned long long)h);
    }
    /* imp == NULL is the reference; imp given changes nothing where unused */
    uint8_t *q2 = malloc(N * 2);
    for (int i = 0; i < N; i++) imp[i] = 1.0f + (float)(i % 5);
    /* The lattice types with importances (ggml's quantize_iq3_xxs, _iq3_s,
     * _iq2_s with quant_weights imp, one row; built as above), and IQ3_S
     * without: on the input without its zero 32-blocks, as ggml's IQ3_S
     * quantizer mis-places the indices and signs after an all-zero
     * sub-block (this one keeps them in place: test_iq_zero_sub below) */
    TEST_CHECK(pk_iq_lattice_tables_ok(), "lattice quantization tables made");
    static const struct { int t, zeros, use_imp; uint64_t h; } gold_iq[] = {
        { .t = PK_TYPE_IQ3_XXS, .zeros = 1, .use_imp = 1, .h = GOLD_IQ3_XXS_IMP },
        { .t = PK_TYPE_IQ2_S, .zeros = 1, .use_imp = 1, .h = GOLD_IQ2_S_IMP },
        { .t = PK_TYPE_IQ3_S, .zeros = 0, .use_imp = 0, .h = GOLD_IQ3_S_NZ },
        { .t = PK_TYPE_IQ3_S, .zeros = 0, .use_imp = 1, .h = GOLD_IQ3_S_NZ_IMP },
        { .t = PK_TYPE_IQ3_XXS, .zeros = 0, .use_imp = 1, .h = GOLD_IQ3_XXS_NZ_IMP },
        { .t = PK_TYPE_IQ2_S, .zeros = 0, .use_imp = 0, .h = GOLD_IQ2_S_NZ },
    };
    for (size_t i = 0; i < sizeof gold_iq / sizeof *gold_iq; i++) {
        size_t sz = pk_row_size(gold_iq[i].t, N);
        gold_input_z(x, N, gold_iq[i].zeros);
        void (*fn)(const float *, void *, int64_t, const float *) =
            gold_iq[i].t == PK_TYPE_IQ3_XXS ? pk_quantize_iq3_xxs : gold_iq[i].t == PK_TYPE_IQ3_S ? pk_quantize_iq3_s
                                                                                               : pk_quantize_iq2_s;
        memset(q, 0, sz);
        fn(x, q, N, gold_iq[i].use_imp ? imp : NULL);
        uint64_t h = fnv1a(q, sz);
        TEST_CHECK(h == gold_iq[i].h, "%s%s%s quantizer bytes match ggml (hash %016llx)",
                   pk_type_name(gold_iq[i].t), gold_iq[i].use_imp ? " with importances" : "",
                   gold_iq[i].zeros ? "" : " (no zero blocks)", (unsigned long long)h);
    }
    gold_input(x, N);
    static const struct { int t; void (*fn)(const float *, void *, int64_t, const float *); } fns[] = {
        { PK_TYPE_Q4_0, pk_quantize_q4_0 }, { PK_TYPE_Q4_1, pk_quantize_q4_1 },
        { PK_TYPE_Q5_0, pk_quantize_q5_0 }, { PK_TYPE_Q5_1, pk_quantize_q5_1 },
        { PK_TYPE_Q2_K, pk_quantize_q2_K }, { PK_TYPE_Q3_K, pk_quantize_q3_K },
        { PK_TYPE_Q4_K, pk_quantize_q4_K }, { PK_TYPE_Q5_K, pk_quantize_q5_K },
        { PK_TYPE_Q6_K, pk_quantize_q6_K }, { PK_TYPE_IQ4_NL, pk_quantize_iq4_nl },
        { PK_TYPE_IQ4_XS, pk_quantize_iq4_xs }, { PK_TYPE_IQ3_XXS, pk_quantize_iq3_xxs },
        { PK_TYPE_IQ3_S, pk_quantize_iq3_s }, { PK_TYPE_IQ2_S, pk_quantize_iq2_s },
    };
    for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) {
        size_t sz = pk_row_size(fns[i].t, N);
        pk_type_get(fns[i].t)->from_float(x, q, N);
        fns[i].fn(x, q2, N, NULL);
        TEST_CHECK(memcmp(q, q2, sz) == 0, "%s: pk_quantize(imp = NULL) == from_float",
                   pk_type_name(fns[i].t));
        /* with imp: still a valid encoding of x (round trip close) */
        fns[i].fn(x, q2, N, imp);
        float *y = malloc(N * sizeof(float));
        pk_type_get(fns[i].t)->to_float(q2, y, N);
        double se = 0, sx = 0;
        for (int j = 0; j < N; j++) { se += (x[j] - y[j]) * (double)(x[j] - y[j]); sx += (double)x[j] * x[j]; }
        TEST_CHECK(sqrt(se / sx) < 0.5, "%s with imp: round trip %.3f", pk_type_name(fns[i].t),
                   sqrt(se / sx));
        free(y);
    }
    free(x); free(q); free(q2); free(imp);
}

/* An all-zero sub-block (IQ3_S: ggml's quantizer then writes the later
 * sub-blocks' indices and signs a slot early): it decodes to its smallest
 * values (these formats have no zero level: grid point 0 at scale code 0)
 * and the rest of the super-block decodes as well as a block without one
 * (indices in the wrong slots would not). */
static void test_iq_zero_sub(void) {
    static const struct { int t; double rms; } ts[] = {
        { PK_TYPE_IQ3_S, RMS_IQ3_S }, { PK_TYPE_IQ3_XXS, RMS_IQ3_XXS }, { PK_TYPE_IQ2_S, RMS_IQ2_S } };
    float x[256], y[256];
    uint8_t q[128];
    for (size_t ti = 0; ti < 3; ti++) {
        const pk_type_traits *tt = pk_type_get(ts[ti].t);
        for (int i = 0; i < 256; i++) x[i] = i >= 64 && i < 96 ? 0.0f : rndn();   /* sub-block 2 zero */
        tt->from_float(x, q, 256);
        tt->to_float(q, y, 256);
        double se = 0, sx = 0, zmax = 0, amax = 0;
        for (int i = 0; i < 256; i++) {
            if (i >= 64 && i < 96) {
                zmax = fmax(zmax, fabs(y[i]));
                continue;
            }
            se += (x[i] - y[i]) * (double)(x[i] - y[i]);
            sx += (double)x[i] * x[i];
            amax = fmax(amax, fabs(x[i]));
        }
        TEST_CHECK(zmax < 0.1 * amax && sqrt(se / sx) < 1.5 * ts[ti].rms,
                   "%s: a zero sub-block decodes small (%.3g of max %.3g), the others decode (relative RMS %.3f)",
                   tt->name, zmax, amax, sqrt(se / sx));
    }
}

/* ---- kernels against exact double sums ------------------------------------------------------ */

/* D_RAW: random weight bytes against normal activations; D_RAW_MAX: against
 * activations at full scale (the largest integer sums) */
enum { D_RANDOM, D_ZEROS, D_MAX, D_OUTLIER, D_RAW, D_RAW_MAX, D_COUNT };
static const char *dname[D_COUNT] = { "random", "zeros", "max", "outlier", "raw-bytes", "raw-bytes-max" };

/* max magnitude: 3e4 keeps fp16 scales finite; Q8_1's s = fp16(d * sum q)
 * overflows past |sum x| = 65504, so its users get 1e3 */
static float max_mag = 3e4f;

static void fill(float *v, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case D_ZEROS: v[i] = 0.0f; break;
        case D_MAX: v[i] = (rnd64() & 1) ? max_mag : -max_mag; break;
        case D_OUTLIER: v[i] = rndf() * 1e-3f; break;
        default: v[i] = rndn(); break;
        }
    }
    if (kind == D_OUTLIER) v[rnd64() % (uint64_t)n] = 1e4f;
}

/* Raw weight rows: random bytes with sane fp16 scales (exercises every
 * level and scale code, incl. ones no quantizer writes). */
static void fill_raw(int t, uint8_t *w, int64_t n) {
    const pk_type_traits *tt = pk_type_get(t);
    int64_t nb = n / tt->blck;
    for (size_t i = 0; i < (size_t)nb * tt->type_size; i++) w[i] = (uint8_t)rnd64();
    for (int64_t b = 0; b < nb; b++) sane_scales(t, w + b * tt->type_size);
}

/* exact dot of the dequantized weights with the dequantized activations,
 * and the sum of |a| + |b| terms times |x| (the decoder's split) */
static void exact_dot(int t, int64_t n, const uint8_t *w, const void *x, double *dot, double *mag) {
    const pk_type_traits *tw = pk_type_get(t), *tx = pk_type_get(tw->vec_dot_type);
    float *xf = malloc((size_t)n * sizeof(float));
    tx->to_float(x, xf, n);
    double s = 0, m = 0;
    for (int64_t e = 0; e < n; e++) {
        double a, b;
        elem(t, w + (e / tw->blck) * tw->type_size, (int)(e % tw->blck), &a, &b);
        s += (a - b) * xf[e];
        m += (fabs(a) + fabs(b)) * fabs(xf[e]);
    }
    /* Q8_1 carries s = fp16(d * sum q) for the weight offsets: ggml's dot
     * uses it in place of d16 * sum q, a difference of up to ~2^-10 relative */
    if (tw->vec_dot_type == PK_TYPE_Q8_1) {
        const pk_block_q8_1 *xb = x;
        size_t mo = 2;                                /* offset of m in Q4_1 / Q5_1 */
        for (int64_t b = 0; b < n / 32; b++) {
            uint16_t mh;
            memcpy(&mh, w + b * tw->type_size + mo, 2);
            int sum = 0;
            for (int j = 0; j < 32; j++) sum += xb[b].qs[j];
            double exact_part = pk_fp16_to_fp32(mh) * pk_fp16_to_fp32(xb[b].d) * sum;
            double ggml_part = (double)pk_fp16_to_fp32(mh) * pk_fp16_to_fp32(xb[b].s);
            s += ggml_part - exact_part;
            m += fabs(ggml_part);
        }
    }
    *dot = s; *mag = m;
    free(xf);
}

static int close_enough(double got, double exact, double mag, int64_t n, int blck) {
    /* float sums over blocks + a few roundings per block term */
    double tol = ((double)n / blck + 16) * 0x1p-23 * mag + 1e-30;
    return fabs(got - exact) <= tol;
}

static void test_dot_type(const pk_kernels *k, int t, int64_t n, int kind) {
    const pk_type_traits *tw = pk_type_get(t);
    int xt = tw->vec_dot_type;
    size_t rs = pk_row_size(t, n), xs = pk_row_size(xt, n);
    static const int rows_list[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    enum { MAXR = 9 };
    size_t pad = 3 * tw->type_size;                 /* rows not densely packed */
    size_t rb = rs + pad;
    uint8_t *w = malloc(rb * MAXR + 64);
    void *x = malloc(xs);
    float *f = malloc((size_t)n * sizeof(float));
    max_mag = xt == PK_TYPE_Q8_1 ? 1e3f : 3e4f;
    for (int r = 0; r < MAXR; r++) {
        if (kind >= D_RAW) fill_raw(t, w + r * rb, n);
        else { fill(f, n, kind); quant_row(t, f, w + r * rb, n); }
        memset(w + r * rb + rs, 0xAB, pad);
    }
    fill(f, n, kind == D_RAW ? D_RANDOM : kind == D_RAW_MAX ? D_MAX : kind);
    pk_type_get(xt)->from_float(f, x, n);

    double ex[MAXR], mg[MAXR];
    int bad_dot = 0, bad_gemv = 0, bad_ref = 0;
    for (int r = 0; r < MAXR; r++) {
        exact_dot(t, n, w + r * rb, x, &ex[r], &mg[r]);
        float s = NAN, sr = NAN;
        k->vec_dot[t](n, &s, w + r * rb, x);
        pk_kernels_ref_table.vec_dot[t](n, &sr, w + r * rb, x);
        if (!close_enough(s, ex[r], mg[r], n, tw->blck) && !bad_dot++)
            fprintf(stderr, "  %s %s vec_dot n=%lld %s row %d: got %.9g want %.9g (mag %.3g)\n",
                    k->isa, tw->name, (long long)n, dname[kind], r, s, ex[r], mg[r]);
        if (!close_enough(sr, ex[r], mg[r], n, tw->blck) && !bad_ref++)
            fprintf(stderr, "  ref %s vec_dot n=%lld %s row %d: got %.9g want %.9g\n",
                    tw->name, (long long)n, dname[kind], r, sr, ex[r]);
        if (kind == D_ZEROS) bad_dot += s != 0.0f;
    }
    for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++) {
        int nr = rows_list[ri];
        float y[MAXR + 1];
        for (int r = 0; r <= MAXR; r++) y[r] = -12345.0f;
        k->gemv[t](n, nr, y, w, rb, x);
        for (int r = 0; r < nr; r++)
            if (!close_enough(y[r], ex[r], mg[r], n, tw->blck) && !bad_gemv++)
                fprintf(stderr, "  %s %s gemv n=%lld rows=%d %s row %d: got %.9g want %.9g\n",
                        k->isa, tw->name, (long long)n, nr, dname[kind], r, y[r], ex[r]);
        if (nr < MAXR + 1 && y[nr] != -12345.0f) bad_gemv++;
    }
    TEST_CHECK(bad_dot == 0, "%s %s vec_dot n=%lld %s: %d rows wrong", k->isa, tw->name,
               (long long)n, dname[kind], bad_dot);
    TEST_CHECK(bad_ref == 0, "ref %s vec_dot agrees with dequantize-then-dot n=%lld %s",
               tw->name, (long long)n, dname[kind]);
    TEST_CHECK(bad_gemv == 0, "%s %s gemv n=%lld %s: %d wrong", k->isa, tw->name,
               (long long)n, dname[kind], bad_gemv);
    free(w); free(x); free(f);
    max_mag = 3e4f;
}

static void test_kernels_dot(const pk_kernels *k) {
    static const int64_t nk[] = { 256, 512, 1792, 2816 };         /* 1, 2, 7, 11 blocks */
    static const int64_t nl[] = { 32, 64, 96, 224, 2816 };        /* 1, 2, 3, 7, 88 */
    for (int ti = 0; ti < NTYPES; ti++) {
        int t = types[ti].t;
        const int64_t *ns = type_blck(t) == 256 ? nk : nl;
        int cnt = type_blck(t) == 256 ? 4 : 5;
        for (int i = 0; i < cnt; i++)
            for (int kind = 0; kind < D_COUNT; kind++)
                test_dot_type(k, t, ns[i], kind);
    }
}

/* MXFP4 at the ends of the E8M0 range: random levels with exponents 0..5
 * (subnormal and tiny scales) against activations with fp16 scales 2^10 ..
 * 2^15, and 246..254 (2^118 .. 2^126) against fp16 subnormal scales (2^-24
 * .. 2^-22), so every d_w * d_x is a normal float and every sum finite;
 * vec_dot and gemv over 1..9 rows (rows padded apart) against the exact
 * double dot. */
static void test_mxfp4_extreme(const pk_kernels *k) {
    static const int64_t ns[] = { 32, 96, 2816 };
    enum { MAXR = 9 };
    for (int hi = 0; hi < 2; hi++)
        for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++) {
            const int64_t n = ns[ni], nb = n / PK_QK_MXFP4;
            const size_t rb = (size_t)nb * sizeof(pk_block_mxfp4) + 5;
            uint8_t *w = malloc(rb * MAXR);
            pk_block_q8_0 *x = malloc((size_t)nb * sizeof *x);
            for (size_t i = 0; i < rb * MAXR; i++) w[i] = (uint8_t)rnd64();
            for (int r = 0; r < MAXR; r++)
                for (int64_t b = 0; b < nb; b++)
                    w[r * rb + (size_t)b * sizeof(pk_block_mxfp4)] =
                        (uint8_t)(hi ? 246 + rnd64() % 9 : rnd64() % 6);
            for (int64_t b = 0; b < nb; b++) {
                x[b].d = (uint16_t)(hi ? 1 + rnd64() % 4 : 0x6400 + rnd64() % 0x1400);
                for (int j = 0; j < 32; j++) x[b].qs[j] = (int8_t)((int)(rnd64() % 255) - 127);
            }
            int bad = 0;
            double ex[MAXR], mg[MAXR];
            for (int r = 0; r < MAXR; r++) {
                float s = NAN;
                exact_dot(PK_TYPE_MXFP4, n, w + r * rb, x, &ex[r], &mg[r]);
                k->vec_dot[PK_TYPE_MXFP4](n, &s, w + r * rb, x);
                if (!close_enough(s, ex[r], mg[r], n, PK_QK_MXFP4) && !bad++)
                    fprintf(stderr, "  %s MXFP4 vec_dot n=%lld %s row %d: got %.9g want %.9g\n", k->isa,
                            (long long)n, hi ? "high" : "low", r, s, ex[r]);
            }
            for (int nr = 1; nr <= MAXR; nr++) {
                float y[MAXR + 1];
                for (int r = 0; r <= MAXR; r++) y[r] = -12345.0f;
                k->gemv[PK_TYPE_MXFP4](n, nr, y, w, rb, x);
                for (int r = 0; r < nr; r++)
                    if (!close_enough(y[r], ex[r], mg[r], n, PK_QK_MXFP4) && !bad++)
                        fprintf(stderr, "  %s MXFP4 gemv n=%lld rows=%d %s row %d: got %.9g want %.9g\n",
                                k->isa, (long long)n, nr, hi ? "high" : "low", r, y[r], ex[r]);
                if (nr < MAXR && y[nr] != -12345.0f) bad++;
            }
            TEST_CHECK(bad == 0, "%s MXFP4 %s exponents n=%lld: %d wrong", k->isa, hi ? "high" : "low",
                       (long long)n, bad);
            free(w); free(x);
        }
}

/* ---- activation quantizers bit-exact ---------------------------------------------------------- */

static void check_quant_exact(const pk_kernels *k, int type, const float *x, int64_t n,
                              const char *what) {
    size_t sz = pk_row_size(type, n);
    unsigned char *a = malloc(sz), *b = malloc(sz);
    memset(a, 0x5a, sz); memset(b, 0xa5, sz);
    pk_type_get(type)->from_float(x, a, n);
    k->quantize[type](x, b, n);
    size_t at = sz;
    for (size_t i = 0; i < sz; i++) if (a[i] != b[i]) { at = i; break; }
    TEST_CHECK(at == sz, "%s quantize %s n=%lld (%s): differs at byte %zu", k->isa,
               pk_type_name(type), (long long)n, what, at);
    free(a); free(b);
}

static void test_kernels_quant(const pk_kernels *k) {
    enum { N = 256 * 40 };
    float *x = malloc(N * sizeof(float));
    static const int64_t ns[] = { 256, 512, 2816, N };
    static const int acts[] = { PK_TYPE_Q8_K, PK_TYPE_Q8_1 };
    for (int ai = 0; ai < 2; ai++) {
        int t = acts[ai];
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
            int64_t n = ns[i];
            for (int64_t b = 0; b < n / 32; b++) {
                float scale = ldexpf(1.0f, (int)(rnd64() % 40) - 20);
                for (int j = 0; j < 32; j++) x[b * 32 + j] = rndf() * scale;
                if (b % 3 == 1) x[b * 32 + (int)(rnd64() % 32)] = -30.0f * scale;
                if (b % 5 == 2) for (int j = 0; j < 32; j++) x[b * 32 + j] = 0.0f;
                if (b % 7 == 3) {              /* amax 127: many exact .5 ties */
                    for (int j = 0; j < 32; j++) x[b * 32 + j] = (float)((int)(rnd64() % 253) - 126) + 0.5f;
                    x[b * 32] = (b & 1) ? 127.0f : -127.0f;
                }
            }
            check_quant_exact(k, t, x, n, "mixed");
            /* equal magnitudes of both signs: the first one decides Q8_K's sign */
            for (int64_t j = 0; j < n; j++) x[j] = rndf();
            for (int64_t b = 0; b < n / 256; b++) {
                x[b * 256 + 100] = (b & 1) ? 2.0f : -2.0f;
                x[b * 256 + 200] = (b & 1) ? -2.0f : 2.0f;
            }
            check_quant_exact(k, t, x, n, "sign ties");
            fill(x, n, D_MAX);
            check_quant_exact(k, t, x, n, "max");
            fill(x, n, D_OUTLIER);
            check_quant_exact(k, t, x, n, "outlier");
            fill(x, n, D_ZEROS);
            check_quant_exact(k, t, x, n, "zeros");
            for (int64_t j = 0; j < n; j++) x[j] = (j % 32 == 5) ? 3.4e38f : rndf();
            check_quant_exact(k, t, x, n, "huge");
            for (int64_t j = 0; j < n; j++) x[j] = j % 32 ? rndf() * 1e-36f : 1e-36f;
            check_quant_exact(k, t, x, n, "tiny");
        }
    }
    /* Q8_K bsums are the sums of qs, and |qs| <= 127 */
    pk_block_q8_K *q = malloc(sizeof(pk_block_q8_K) * 4);
    for (int j = 0; j < 1024; j++) x[j] = rndn() * 3;
    k->quantize[PK_TYPE_Q8_K](x, q, 1024);
    int bad = 0;
    for (int b = 0; b < 4; b++)
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++) { s += q[b].qs[16 * g + j]; bad += q[b].qs[16 * g + j] == -128; }
            bad += s != q[b].bsums[g];
        }
    TEST_CHECK(bad == 0, "%s Q8_K bsums and range", k->isa);
    free(q);
    free(x);
}

int main(void) {
    test_traits();
    test_iq_grids();
    test_known_blocks();
    test_round_trip();
    test_ggml_bytes();
    test_iq_zero_sub();
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);
    for (int i = 0; i < nl; i++) {
        fprintf(stderr, "kernels: %s\n", list[i]->isa);
        test_kernels_dot(list[i]);
        test_mxfp4_extreme(list[i]);
        test_kernels_quant(list[i]);
    }
    return TEST_REPORT();
}
