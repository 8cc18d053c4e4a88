/* test_kernels_iq1.c - IQ1_S and IQ1_M: the IQ1 grid, the formats
 * (quant/iq1.c) and every usable kernel table's vec_dot and gemv.
 *
 * Checks: the grid's invariants (2048 distinct points of 8 levels in
 * {-1, 0, 1}, in increasing base-3 order) and its checksum against ggml's
 * table; the type table; hand-built blocks against values computed by hand;
 * random blocks against an independent element decoder written from the
 * layout comments in quant/quant.h; blocks copied from llama-quantize's
 * files (../shared/models/iq/kjv-moe-IQ1_S.gguf, -IQ1_M.gguf) against a
 * checksum of ggml's dequantize_row_iq1_s / _iq1_m output on them; for every
 * kernel table vec_dot and gemv (1..9 rows, rows padded apart) against an
 * exact double dot of the dequantized data: random bytes, the real blocks,
 * zero activations, and the extremes (every group the all +1 or all -1
 * point at the largest scale against full-scale activations: the largest
 * int sums a kernel meets).
 * The quantizers (importance-weighted, as ggml's; there is no reference
 * from_float): their bytes against ggml's on fixed inputs, a round trip.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testhelp.h"
#define TESTRAND_SEED 0x13198a2e03707344ull
#include "testrand.h"
#include "quant/quant.h"
#include "kernels/kernels.h"

static uint16_t u16le(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static const int types[] = { PK_TYPE_IQ1_S, PK_TYPE_IQ1_M };
enum { NTYPES = 2 };

/* ---- the grid ------------------------------------------------------------------ */

static int level(uint64_t point, int j) { return (int8_t)(point >> (8 * j)); }

static void test_grid(void) {
    const uint64_t *g = pk_iq1s_grid();
    int bad_level = 0, bad_order = 0, prev = -1;
    int count[9] = { 0 };   /* points by their number of zero levels */
    for (int i = 0; i < PK_IQ1_GRID; i++) {
        int code = 0, zeros = 0;
        for (int j = 7; j >= 0; j--) {
            int l = level(g[i], j);
            bad_level += l < -1 || l > 1;
            code = 3 * code + l + 1;
            zeros += l == 0;
        }
        bad_order += code <= prev;   /* strictly increasing: distinct too */
        prev = code;
        count[zeros]++;
    }
    TEST_CHECK(bad_level == 0, "IQ1 grid: %d points with a level outside {-1, 0, 1}", bad_level);
    TEST_CHECK(bad_order == 0, "IQ1 grid: %d points out of increasing base-3 order", bad_order);
    TEST_CHECK(level(g[0], 0) == -1 && level(g[0], 7) == -1 && level(g[2047], 0) == 1 &&
               level(g[2047], 7) == 1, "IQ1 grid: the all -1 point first, the all +1 point last");
    /* how many points have 0..8 zero levels (counted once from ggml's table) */
    static const int want[9] = { 250, 3, 114, 992, 150, 410, 112, 16, 1 };
    int bad_count = 0;
    for (int z = 0; z < 9; z++) bad_count += count[z] != want[z];
    TEST_CHECK(bad_count == 0, "IQ1 grid: points by zero count");
    /* FNV-1a 64 of the table as 16384 bytes (each entry's 8 levels in
     * element order), computed once from ggml-common.h's iq1s_grid
     * (llama.cpp 34af94c) with a Python script reading its hex constants */
    uint8_t bytes[PK_IQ1_GRID * 8];
    for (int i = 0; i < PK_IQ1_GRID; i++)
        for (int j = 0; j < 8; j++) bytes[8 * i + j] = (uint8_t)(g[i] >> (8 * j));
    uint64_t h = fnv1a(bytes, sizeof bytes);
    TEST_CHECK(h == 0x6703ed863501ae2eull, "IQ1 grid checksum %016llx", (unsigned long long)h);
    TEST_CHECK(pk_iq1s_grid() == g, "IQ1 grid made once");
}

/* ---- the type table ------------------------------------------------------------ */

static void test_traits(void) {
    static const size_t size[NTYPES] = { 50, 56 };
    for (int i = 0; i < NTYPES; i++) {
        const pk_type_traits *tt = pk_type_get(types[i]);
        TEST_CHECK(tt && tt->to_float && !tt->from_float && tt->vec_dot_type == PK_TYPE_Q8_K &&
                   tt->blck == 256 && tt->type_size == size[i], "traits of %s", pk_type_name(types[i]));
        TEST_CHECK(pk_kernels_ref_table.vec_dot[types[i]] && pk_kernels_ref_table.gemv[types[i]],
                   "reference kernels for %s", pk_type_name(types[i]));
    }
    TEST_CHECK(pk_type_align(PK_TYPE_IQ1_S) == 2 && pk_type_align(PK_TYPE_IQ1_M) == 1, "IQ1 alignment");
}

/* ---- an independent decoder: element e of one block, in double, from the
 * layout comments in quant/quant.h -------------------------------------------------- */

static double elem(int t, const uint8_t *p, int e) {
    const int s = e / 32, g = e % 32 / 8, j = e % 8;
    int idx, ls, neg;
    double d;
    if (t == PK_TYPE_IQ1_S) {
        unsigned qh = u16le(p + 2 + 32 + 2 * s);
        idx = p[2 + 4 * s + g] | (int)((qh >> 3 * g) & 7) << 8;
        ls = (qh >> 12) & 7;
        neg = qh >> 15;
        d = pk_fp16_to_fp32(u16le(p));
    } else {
        const uint8_t *qs = p, *qh = p + 32, *sc = p + 48;
        unsigned h = (unsigned)qh[2 * s + g / 2] >> 4 * (g % 2);
        idx = qs[4 * s + g] | (int)(h & 7) << 8;
        neg = (h >> 3) & 1;
        ls = (u16le(sc + 2 * (s / 2)) >> (6 * (s % 2) + 3 * (g / 2))) & 7;
        uint16_t dh = 0;
        for (int k = 0; k < 4; k++) dh |= (uint16_t)((u16le(sc + 2 * k) >> 12) << 4 * k);
        d = pk_fp16_to_fp32(dh);
    }
    return d * (2 * ls + 1) * (level(pk_iq1s_grid()[idx], j) + (neg ? -0.125 : 0.125));
}

/* a finite fp16 d of magnitude 2^-8 .. 2^3, either sign */
static uint16_t sane_d(void) {
    uint16_t h = pk_fp32_to_fp16(ldexpf(1.0f + rndf() * 0.5f, (int)(rnd64() % 12) - 8));
    return (uint16_t)(h | (rnd64() & 1 ? 0x8000 : 0));
}
static void set_d(int t, uint8_t *blk, uint16_t h) {
    if (t == PK_TYPE_IQ1_S) { blk[0] = (uint8_t)h; blk[1] = (uint8_t)(h >> 8); return; }
    for (int k = 0; k < 4; k++) {
        uint8_t *hi = blk + 48 + 2 * k + 1;
        *hi = (uint8_t)((*hi & 0x0F) | ((h >> 4 * k) & 0xF) << 4);
    }
}
/* nb random blocks with sane scales */
static void fill_raw(int t, uint8_t *w, int64_t nb) {
    size_t bs = pk_type_get(t)->type_size;
    for (size_t i = 0; i < (size_t)nb * bs; i++) w[i] = (uint8_t)rnd64();
    for (int64_t b = 0; b < nb; b++) set_d(t, w + b * bs, sane_d());
}
/* nb blocks of the extremes: every group the all -1 or all +1 point, every
 * scale 7 (2 ls + 1 = 15), delta signs random */
static void fill_ext(int t, uint8_t *w, int64_t nb) {
    size_t bs = pk_type_get(t)->type_size;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = w + b * bs;
        for (int grp = 0; grp < 32; grp++) {
            int top = rnd64() & 1;                    /* index 2047 or 0 */
            int s = grp / 4, g = grp % 4, neg = rnd64() & 1;
            if (t == PK_TYPE_IQ1_S) {
                uint8_t *q = p + 2, *qh = p + 34 + 2 * s;
                q[grp] = top ? 0xFF : 0;
                unsigned v = u16le(qh);
                v = (v & ~(7u << 3 * g)) | (top ? 7u : 0u) << 3 * g;
                v = (v & 0x0FFF) | 7u << 12 | (g == 0 ? (unsigned)neg : v >> 15) << 15;
                qh[0] = (uint8_t)v; qh[1] = (uint8_t)(v >> 8);
            } else {
                p[grp] = top ? 0xFF : 0;
                uint8_t *h = p + 32 + 2 * s + g / 2;
                int sh = 4 * (g % 2);
                *h = (uint8_t)((*h & ~(0xF << sh)) | ((top ? 7 : 0) | neg << 3) << sh);
            }
        }
        if (t == PK_TYPE_IQ1_M)
            for (int k = 0; k < 4; k++) { p[48 + 2 * k] = 0xFF; p[49 + 2 * k] |= 0x0F; }   /* ls 7 */
        set_d(t, p, pk_fp32_to_fp16(rnd64() & 1 ? 4.0f : -4.0f));
    }
}

/* ---- blocks from llama-quantize's files ---------------------------------------------
 * 4 consecutive super-blocks of the first IQ1_S tensor of kjv-moe-IQ1_S.gguf
 * (blk.0.attn_k.weight, blocks 40-43) and of the first IQ1_M tensor of
 * kjv-moe-IQ1_M.gguf (blocks 77-80), with the FNV-1a 64 of the 1024 floats
 * ggml's dequantize_row_iq1_s / _iq1_m (llama.cpp 34af94c's libggml-base, via
 * ggml_get_type_traits()->to_float) gives for them. */
static const struct { int t; const char *hex[4]; uint64_t fnv; } real[NTYPES] = {
    { PK_TYPE_IQ1_S, {
        "071cc485e915edc1e56b9416bea237e0fd69199b6838650bbef939adbc27549554f3daf93cc2dcff64f850783e573fe62b6a",
        "231c9d5ea567cb3f86ba0424dae5a478c43965491923bfd89bfbdb02f60108f55e9297672ac2346aad4b7c7be666607f8557",
        "6a1c45e07ec419fabb83163ff29a9cea5dcd6624edb5dc932230f6484943bd14eb3e59d1b5c047495c5081740ef25fe4c26e",
        "6e1b07447ba998e6b43d912ff7d3d0682b80311d831cbe44f5c198a10baf5df285840cee87cc575d6efb2b796c5609d3bdeb" },
      0x564a5ed74ec5fd02ull },
    { PK_TYPE_IQ1_M, {
        "d13dfa29be6917cc6b03430ba1df0abb3940d24e08a66766c28e4a3d322124e68345ab654df0c1fabc449c19b2118936"
        "224b1c05dbdafc18",
        "3fe291e75226b10a31bd5df37960c5703b6bb379aae76902afd3fdc2db9fa5566f2ba050c44cb16081dd5d5ce9dfe2fc"
        "366b73b72ebf571f",
        "c33ec8620605c990dab6e6080f02d90664d7653bff05578f1f314ea50be0064ccffa4c46a2ca754ae074c36a9d6d2c1c"
        "d3d5aca61ce71419",
        "02eefcceaee0b94d409881dec656409f603cd90b042fa2c36b76a7fd4b1af01db409dd0d6268da8ccfda0db206bd41d4"
        "1ea9753bdcbbfd1b" },
      0x65bcc952a2786c7dull },
};

/* the 4 real blocks of type index ti into w (4 * type_size bytes) */
static void real_blocks(int ti, uint8_t *w) {
    size_t bs = pk_type_get(real[ti].t)->type_size, k = 0;
    for (int b = 0; b < 4; b++) {
        const char *h = real[ti].hex[b];
        TEST_CHECK(strlen(h) == 2 * bs, "%s real block %d: %zu hex digits", pk_type_name(real[ti].t), b, strlen(h));
        for (size_t i = 0; i < bs; i++) {
            unsigned v = 0;
            sscanf(h + 2 * i, "%2x", &v);
            w[k++] = (uint8_t)v;
        }
    }
}

/* ---- dequantization ------------------------------------------------------------- */

static void test_dequant(void) {
    float out[256];
    /* IQ1_S by hand: d = 0.5; sub-block 0: ls 3 (x7), delta +1/8, group 0 =
     * point 0 (all -1), group 1 = point 2047 (all +1); sub-block 7: ls 0,
     * delta -1/8, group 3 = point 1 (element 0 +1, the rest -1) */
    pk_block_iq1_s s1;
    memset(&s1, 0, sizeof s1);
    s1.d = pk_fp32_to_fp16(0.5f);
    s1.qs[1] = 0xFF;
    s1.qh[0] = (uint16_t)(3u << 12 | 7u << 3);
    s1.qs[31] = 1;
    s1.qh[7] = 0x8000;
    pk_type_get(PK_TYPE_IQ1_S)->to_float(&s1, out, 256);
    TEST_CHECK(out[0] == 3.5f * -0.875f && out[7] == 3.5f * -0.875f && out[8] == 3.5f * 1.125f &&
               out[15] == 3.5f * 1.125f && out[248] == 0.5f * 0.875f && out[249] == 0.5f * -1.125f,
               "IQ1_S known values (%g %g %g %g)", out[0], out[8], out[248], out[249]);

    /* IQ1_M by hand: d = 0.25 (fp16 0x3400 in the scales' top nibbles);
     * sub-block 1: groups 0-1 ls 2 (x5), groups 2-3 ls 6 (x13); group 1 =
     * point 2047, delta -1/8; group 2 = point 1, delta +1/8 */
    pk_block_iq1_m m1;
    memset(&m1, 0, sizeof m1);
    const uint16_t dm = pk_fp32_to_fp16(0.25f);
    for (int k = 0; k < 4; k++) m1.scales[2 * k + 1] = (uint8_t)(((dm >> 4 * k) & 0xF) << 4);
    m1.scales[0] = (uint8_t)((2 | 6 << 3) << 6);          /* bits 6-11 of sc[0]: sub-block 1 */
    m1.scales[1] |= (uint8_t)((2 | 6 << 3) >> 2);
    m1.qs[5] = 0xFF;
    m1.qh[2] = 0x70 | 0x80;                               /* group 1: high bits 7, delta - */
    m1.qs[6] = 1;
    TEST_CHECK(pk_iq1_m_d(m1.scales) == dm, "IQ1_M d from the scales' top nibbles");
    pk_type_get(PK_TYPE_IQ1_M)->to_float(&m1, out, 256);
    TEST_CHECK(out[40] == 1.25f * 0.875f && out[47] == 1.25f * 0.875f && out[48] == 3.25f * 1.125f &&
               out[49] == 3.25f * -0.875f && out[32] == 1.25f * -0.875f && out[0] == 0.25f * -0.875f,
               "IQ1_M known values (%g %g %g %g %g)", out[40], out[48], out[49], out[32], out[0]);

    /* random bytes against the independent decoder */
    for (int ti = 0; ti < NTYPES; ti++) {
        int t = types[ti];
        const pk_type_traits *tt = pk_type_get(t);
        enum { NB = 64 };
        uint8_t *blk = malloc(NB * tt->type_size);
        float *f = malloc(NB * 256 * sizeof(float));
        fill_raw(t, blk, NB);
        tt->to_float(blk, f, NB * 256);
        int bad = 0;
        for (int b = 0; b < NB; b++)
            for (int e = 0; e < 256; e++) {
                double want = elem(t, blk + b * tt->type_size, e), got = f[b * 256 + e];
                if (!(fabs(got - want) <= fabs(want) * 0x1p-22) && !bad++)
                    fprintf(stderr, "  %s block %d elem %d: got %.9g want %.9g\n", tt->name, b, e, got, want);
            }
        TEST_CHECK(bad == 0, "%s: random blocks decode as documented (%d wrong)", tt->name, bad);
        /* the real blocks: bitwise ggml's floats */
        uint8_t w[4 * 56];
        real_blocks(ti, w);
        tt->to_float(w, f, 4 * 256);
        uint64_t h = fnv1a(f, 4 * 256 * sizeof(float));
        TEST_CHECK(h == real[ti].fnv, "%s: llama-quantize's blocks dequantize to ggml's floats (%016llx)",
                   tt->name, (unsigned long long)h);
        free(blk); free(f);
    }
}

/* ---- kernels against exact double sums ---------------------------------------------- */

enum { D_RAW, D_REAL, D_ZEROS, D_EXT, D_COUNT };
static const char *dname[D_COUNT] = { "raw-bytes", "real", "zeros", "extreme" };

static void test_dot_type(const pk_kernels *k, int ti, int64_t n, int kind) {
    const int t = types[ti];
    const pk_type_traits *tw = pk_type_get(t), *tx = pk_type_get(PK_TYPE_Q8_K);
    const int64_t nb = n / 256;
    enum { MAXR = 9 };
    size_t rs = pk_row_size(t, n), rb = rs + 3 * tw->type_size, xs = pk_row_size(PK_TYPE_Q8_K, n);
    uint8_t *w = malloc(rb * MAXR);
    void *x = malloc(xs);
    float *f = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * sizeof(float));
    uint8_t real4[4 * 56];
    real_blocks(ti, real4);
    for (int r = 0; r < MAXR; r++) {
        uint8_t *row = w + r * rb;
        if (kind == D_EXT) fill_ext(t, row, nb);
        else if (kind == D_REAL)
            for (int64_t b = 0; b < nb; b++)
                memcpy(row + b * tw->type_size, real4 + ((b + r) % 4) * tw->type_size, tw->type_size);
        else fill_raw(t, row, nb);
        memset(row + rs, 0xAB, rb - rs);
    }
    for (int64_t i = 0; i < n; i++)
        f[i] = kind == D_ZEROS ? 0.0f : kind == D_EXT ? (rnd64() % 4 ? 3e4f : -3e4f) : rndn();
    tx->from_float(f, x, n);
    tx->to_float(x, f, n);

    double ex[MAXR], mg[MAXR];
    int bad_dot = 0, bad_ref = 0, bad_gemv = 0;
    for (int r = 0; r < MAXR; r++) {
        tw->to_float(w + r * rb, wf, n);
        double s = 0, m = 0;
        for (int64_t e = 0; e < n; e++) {
            double a = elem(t, w + r * rb + (e / 256) * tw->type_size, (int)(e % 256));
            s += a * f[e];
            m += fabs(a * f[e]);
            bad_ref += (float)a != wf[e];
        }
        ex[r] = s; mg[r] = m;
        float got = NAN, gr = NAN;
        k->vec_dot[t](n, &got, w + r * rb, x);
        pk_kernels_ref_table.vec_dot[t](n, &gr, w + r * rb, x);
        double tol = ((double)nb + 16) * 0x1p-23 * m + 1e-30;
        if (!(fabs(got - s) <= tol) && !bad_dot++)
            fprintf(stderr, "  %s %s vec_dot n=%lld %s row %d: got %.9g want %.9g (mag %.3g)\n", k->isa,
                    tw->name, (long long)n, dname[kind], r, got, s, m);
        if (!(fabs(gr - s) <= tol) && !bad_ref++)
            fprintf(stderr, "  ref %s vec_dot n=%lld %s row %d: got %.9g want %.9g\n", tw->name,
                    (long long)n, dname[kind], r, gr, s);
        if (kind == D_ZEROS) bad_dot += got != 0.0f;
    }
    for (int nr = 1; nr <= MAXR; nr++) {
        float y[MAXR + 1];
        for (int r = 0; r <= MAXR; r++) y[r] = -12345.0f;
        k->gemv[t](n, nr, y, w, rb, x);
        for (int r = 0; r < nr; r++)
            if (!(fabs(y[r] - ex[r]) <= ((double)nb + 16) * 0x1p-23 * mg[r] + 1e-30) && !bad_gemv++)
                fprintf(stderr, "  %s %s gemv n=%lld rows=%d %s row %d: got %.9g want %.9g\n", k->isa,
                        tw->name, (long long)n, nr, dname[kind], r, y[r], ex[r]);
        bad_gemv += y[nr] != -12345.0f;
    }
    TEST_CHECK(bad_dot == 0, "%s %s vec_dot n=%lld %s: %d rows wrong", k->isa, tw->name, (long long)n,
               dname[kind], bad_dot);
    TEST_CHECK(bad_ref == 0, "ref %s: vec_dot and to_float agree with the decoder n=%lld %s", tw->name,
               (long long)n, dname[kind]);
    TEST_CHECK(bad_gemv == 0, "%s %s gemv n=%lld %s: %d wrong", k->isa, tw->name, (long long)n,
               dname[kind], bad_gemv);
    free(w); free(x); free(f); free(wf);
}

static void test_kernels_dot(const pk_kernels *k) {
    static const int64_t ns[] = { 256, 512, 1792, 2816 };   /* 1, 2, 7, 11 super-blocks */
    for (int ti = 0; ti < NTYPES; ti++) {
        TEST_CHECK(k->vec_dot[types[ti]] && k->gemv[types[ti]], "%s has %s kernels", k->isa,
                   pk_type_name(types[ti]));
        if (!k->vec_dot[types[ti]] || !k->gemv[types[ti]]) continue;
        for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
            for (int kind = 0; kind < D_COUNT; kind++) test_dot_type(k, ti, ns[i], kind);
    }
}

/* ---- the quantizers ------------------------------------------------------------------ */

/* a second one: uniform values, every other 512 scaled by 1/100, one
 * 32-block constant and one below ggml's zero-block threshold */
static void gold_input2(float *x, int n) {
    for (int i = 0; i < n; i++) {
        uint32_t h = (uint32_t)i * 747796405u + 2891336453u;
        h ^= h >> 16;
        x[i] = ((float)(h & 0xFFFF) / 32768.0f - 1.0f) * ((i / 512) % 2 ? 0.01f : 1.0f);
    }
    for (int i = 1024; i < 1056; i++) x[i] = 0.5f;
    for (int i = 2048; i < 2080; i++) x[i] = 1e-13f;
}

static void test_quantizers(void) {
    enum { N = 4096, ROW = 1024 };
    /* the neighbour lists: 4513 codes off the grid, 327721 neighbours (both
       counted once with a Python transcription of ggml's iq2xs_init_impl) */
    TEST_CHECK(pk_iq1_neighbours_total() == 4513 + 327721, "IQ1 neighbour table: %d entries",
               pk_iq1_neighbours_total());
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), imp[ROW];
    uint8_t *q = malloc(N);
    for (int i = 0; i < ROW; i++) imp[i] = 0.25f + (float)((i * 37) % 101) / 25.0f;
    /* FNV-1a of ggml's quantize_iq1_s / quantize_iq1_m (llama.cpp 34af94c's
       ggml-quants.c built with -ffp-contract=off) of 4 rows of 1024 with these
       importances (IQ1_M also without) */
    static const struct { int t, input, use_imp; uint64_t h; } gold[] = {
        { .t = PK_TYPE_IQ1_S, .input = 1, .use_imp = 1, .h = 0xa1fe3ffc0789fb48ull },
        { .t = PK_TYPE_IQ1_M, .input = 1, .use_imp = 1, .h = 0x06d1540b70d8106bull },
        { .t = PK_TYPE_IQ1_M, .input = 1, .use_imp = 0, .h = 0xeeab209167f0d210ull },
        { .t = PK_TYPE_IQ1_S, .input = 2, .use_imp = 1, .h = 0xbdf427143aad7c09ull },
        { .t = PK_TYPE_IQ1_M, .input = 2, .use_imp = 1, .h = 0x53454c6f60249eccull },
    };
    for (size_t g = 0; g < sizeof gold / sizeof *gold; g++) {
        if (gold[g].input == 1) gold_input(x, N);
        else gold_input2(x, N);
        const size_t rs = pk_row_size(gold[g].t, ROW);
        memset(q, 0xA5, N);
        for (int r = 0; r < N / ROW; r++)
            (gold[g].t == PK_TYPE_IQ1_S ? pk_quantize_iq1_s : pk_quantize_iq1_m)(
                x + r * ROW, q + r * rs, ROW, gold[g].use_imp ? imp : NULL);
        uint64_t h = fnv1a(q, rs * (N / ROW));
        TEST_CHECK(h == gold[g].h, "%s quantizer bytes match ggml's (input %d%s, hash %016llx)",
                   pk_type_name(gold[g].t), gold[g].input, gold[g].use_imp ? ", imp" : "", (unsigned long long)h);
    }
    /* a round trip of roughly normal data: relative RMS error per super-block
       (1.5-1.75 bits: about half the signal is lost), zeros stay zeros */
    for (int ti = 0; ti < NTYPES; ti++) {
        int t = types[ti];
        for (int i = 0; i < N; i++) x[i] = rndn() * ldexpf(1.0f, (i / 256) % 5 - 2);
        void (*qf)(const float *, void *, int64_t, const float *) = t == PK_TYPE_IQ1_S ? pk_quantize_iq1_s
                                                                                       : pk_quantize_iq1_m;
        for (int r = 0; r < N / ROW; r++) qf(x + r * ROW, q + r * pk_row_size(t, ROW), ROW, imp);
        pk_type_get(t)->to_float(q, y, N);
        double worst = 0, mean = 0;
        for (int b = 0; b < N / 256; b++) {
            double se = 0, sx = 0;
            for (int i = 256 * b; i < 256 * b + 256; i++) {
                se += ((double)x[i] - y[i]) * ((double)x[i] - y[i]);
                sx += (double)x[i] * x[i];
            }
            double rel = sqrt(se / sx);
            mean += rel / (N / 256);
            worst = rel > worst ? rel : worst;
        }
        TEST_CHECK(mean < 0.6 && worst < 0.75, "%s round trip: relative RMS %.3f (worst block %.3f)",
                   pk_type_name(t), mean, worst);
        memset(x, 0, ROW * sizeof(float));
        qf(x, q, ROW, imp);
        pk_type_get(t)->to_float(q, y, ROW);
        int nz = 0;
        for (int i = 0; i < ROW; i++) nz += y[i] != 0.0f;
        TEST_CHECK(nz == 0, "%s: zeros quantize to zeros", pk_type_name(t));
    }
    free(x); free(y); free(q);
}

int main(void) {
    test_grid();
    test_quantizers();
    test_traits();
    test_dequant();
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);
    for (int i = 0; i < nl; i++) {
        fprintf(stderr, "kernels: %s\n", list[i]->isa);
        test_kernels_dot(list[i]);
    }
    return TEST_REPORT();
}
