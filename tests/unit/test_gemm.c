/* test_gemm.c - the multi-token (prompt processing) kernels: every non-NULL
 * gemm entry of every usable kernel table against the reference gemv run
 * once per token.
 *
 * Per type: weights quantized from random floats with the reference
 * from_float (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M: random blocks; rows padded apart with 0xAB bytes), activations quantized with
 * the reference quantizer of the vec_dot_type, one buffer per token and
 * the token pointers not in memory order; n over a few k-block counts, rows
 * and token counts covering every tile tail; y with a stride larger than
 * nrows, filled with a sentinel that must survive outside the written
 * entries. Results must agree within a tolerance proportional to
 * sum |w_i * x_i| (float accumulation over blocks).
 *
 * `test_gemm bench` instead times gemm against gemv per token (not a test).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testhelp.h"
#define TESTRAND_SEED 0x9e3779b97f4a7c15ull
#include "testrand.h"
#include "quant/quant.h"
#include "kernels/kernels.h"


static const int types[] = { PK_TYPE_F32, PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_Q8_0, PK_TYPE_Q4_0,
                             PK_TYPE_Q4_1, PK_TYPE_Q5_0, PK_TYPE_Q5_1, PK_TYPE_IQ4_NL,
                             PK_TYPE_MXFP4, PK_TYPE_Q2_K, PK_TYPE_Q3_K, PK_TYPE_Q4_K, PK_TYPE_Q5_K,
                             PK_TYPE_Q6_K, PK_TYPE_IQ4_XS, PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS, PK_TYPE_IQ1_S,
                             PK_TYPE_IQ1_M, PK_TYPE_IQ3_XXS, PK_TYPE_IQ3_S, PK_TYPE_IQ2_S };
/* The gemm entries each variant must have when it is usable here: a
 * variant whose multi-token kernels went missing (a build without its ISA
 * flags, an entry dropped from its array) fails instead of testing nothing. */
static const struct { const char *isa; int types[24]; } required[] = {
    { "avx2", { PK_TYPE_Q8_0, PK_TYPE_Q4_0, PK_TYPE_Q4_1, PK_TYPE_Q5_0, PK_TYPE_Q5_1, PK_TYPE_IQ4_NL,
                PK_TYPE_MXFP4, PK_TYPE_Q2_K, PK_TYPE_Q3_K, PK_TYPE_Q4_K, PK_TYPE_Q5_K, PK_TYPE_Q6_K,
                PK_TYPE_IQ4_XS, PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS, PK_TYPE_IQ1_S, PK_TYPE_IQ1_M, PK_TYPE_IQ3_XXS,
                PK_TYPE_IQ3_S, PK_TYPE_IQ2_S, -1 } },
    { "avxvnni", { PK_TYPE_Q8_0, PK_TYPE_Q4_0, PK_TYPE_Q5_0, PK_TYPE_MXFP4, PK_TYPE_Q2_K, PK_TYPE_Q3_K,
                   PK_TYPE_Q4_K, PK_TYPE_Q5_K, PK_TYPE_Q6_K, -1 } },
    { "avx512", { PK_TYPE_Q8_0, PK_TYPE_Q4_0, PK_TYPE_Q5_0, PK_TYPE_MXFP4, PK_TYPE_Q2_K, PK_TYPE_Q3_K,
                  PK_TYPE_Q4_K, PK_TYPE_Q5_K, PK_TYPE_Q6_K, -1 } },
};
enum { NTYPES = sizeof types / sizeof *types };

/* activations: normal, all +-1 (full-scale levels), or all +1 with the
 * weights' level bytes (and K-quant scales) at their extreme: the largest
 * int16 / int32 partial sums any kernel can meet */
enum { D_NORMAL, D_MAX, D_EXT, D_COUNT };

static void fill(float *v, int64_t n, int kind, float scale) {
    for (int64_t i = 0; i < n; i++)
        v[i] = kind == D_EXT ? scale : kind == D_MAX ? ((rnd64() & 1) ? scale : -scale) : rndn() * scale;
}

/* Set the level bytes (and 4/6-bit scales) of every block of a row to their
 * extreme: offset and length within the block, and the byte value. */
static void extreme_levels(int t, uint8_t *row, int64_t n) {
    int off = 0, len = 0, val = 0xFF;
    switch (t) {
    case PK_TYPE_Q8_0: off = 2; len = 32; val = 0x80; break;            /* -128 */
    case PK_TYPE_Q4_0: case PK_TYPE_IQ4_NL: off = 2; len = 16; val = t == PK_TYPE_Q4_0 ? 0xFF : 0; break;
    case PK_TYPE_Q4_1: off = 4; len = 16; break;
    case PK_TYPE_Q5_0: off = 2; len = 20; break;
    case PK_TYPE_Q5_1: off = 4; len = 20; break;
    case PK_TYPE_Q2_K: off = 0; len = 80; break;                        /* scales 15, mins 15, q 3 */
    case PK_TYPE_Q3_K: off = 0; len = 96; break;                        /* q 7 */
    case PK_TYPE_Q4_K: off = 4; len = 140; break;                       /* scales, mins 63, q 15 */
    case PK_TYPE_Q5_K: off = 4; len = 172; break;                       /* q 31 */
    case PK_TYPE_Q6_K: off = 0; len = 192; break;                       /* q 63 */
    case PK_TYPE_IQ4_XS: off = 2; len = 134; val = 0; break;            /* scales -32, level -127 */
    case PK_TYPE_MXFP4: off = 1; len = 16; break;                       /* level -12 */
    case PK_TYPE_IQ2_XXS: off = 2; len = 64; break;      /* point 255, all signs minus, scales 15 */
    case PK_TYPE_IQ2_XS: off = 2; len = 72; break;       /* point 511 (all 43), signs minus, scales 15 */
    case PK_TYPE_IQ1_S: off = 2; len = 48; break;        /* point 2047 (all +1), scales 7 */
    case PK_TYPE_IQ1_M: off = 0; len = 48; break;        /* point 2047 (all +1) */
    /* the lattice i-quants: every byte after d 0xFF: the last grid point,
       every sign negative, scales 15 (IQ3_XXS: 4 28 52 62; IQ3_S, IQ2_S:
       index 511 / 1023) */
    case PK_TYPE_IQ3_XXS: off = 2; len = 96; break;
    case PK_TYPE_IQ3_S: off = 2; len = 108; break;
    case PK_TYPE_IQ2_S: off = 2; len = 80; break;
    default: return;
    }
    const pk_type_traits *tr = pk_type_get(t);
    for (int64_t b = 0; b < n / tr->blck; b++) memset(row + b * tr->type_size + off, val, (size_t)len);
}

#define SENT (-12345.0f)

/* A row of type t holding f: its from_float, or for the types without one
 * (IQ2_XXS, IQ2_XS, IQ1_S, IQ1_M: ggml has none) random blocks whose fp16 d
 * follows the block's largest |f| (0 for a zero block; IQ1_M's d is the top
 * nibbles of its scale words) */
static void make_row(int t, const float *f, uint8_t *row, int64_t n) {
    const pk_type_traits *tw = pk_type_get(t);
    if (tw->from_float) {
        tw->from_float(f, row, n);
        return;
    }
    for (size_t i = 0; i < pk_row_size(t, n); i++) row[i] = (uint8_t)rnd64();
    for (int64_t b = 0; b < n / tw->blck; b++) {
        float amax = 0.0f;
        for (int i = 0; i < tw->blck; i++) amax = fmaxf(amax, fabsf(f[b * tw->blck + i]));
        uint16_t d = pk_fp32_to_fp16(amax / 160.0f);
        uint8_t *blk = row + b * tw->type_size;
        if (t == PK_TYPE_IQ1_M)
            for (int k = 0; k < 4; k++)
                blk[49 + 2 * k] = (uint8_t)((blk[49 + 2 * k] & 0x0F) | ((d >> 4 * k) & 0xF) << 4);
        else
            memcpy(blk, &d, 2);
    }
}

static void test_type(const pk_kernels *k, int t, int64_t n, int kind) {
    const pk_type_traits *tw = pk_type_get(t), *tx = pk_type_get(tw->vec_dot_type);
    static const int rows_list[] = { 1, 3, 8, 13, 16, 37 };
    static const int tok_list[] = { 1, 2, 3, 5, 8, 12, 15, 16, 17, 31, 33, 64, 101, 203 };
    enum { MAXR = 37, MAXT = 203 };
    size_t rs = pk_row_size(t, n), xs = pk_row_size(tw->vec_dot_type, n);
    size_t rb = rs + 3 * tw->type_size + 4;           /* rows not densely packed */
    uint8_t *w = malloc(rb * MAXR);
    float *f = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * MAXR * sizeof(float));
    float *xf = malloc((size_t)n * MAXT * sizeof(float));
    void *xb[MAXT];
    const void *xp[MAXT];
    for (int r = 0; r < MAXR; r++) {
        fill(f, n, D_NORMAL, 1.0f);
        make_row(t, f, w + r * rb, n);
        if (kind == D_EXT) extreme_levels(t, w + r * rb, n);
        memset(w + r * rb + rs, 0xAB, rb - rs);
        tw->to_float(w + r * rb, wf + (size_t)r * n, n);
    }
    for (int i = 0; i < MAXT; i++) {
        xb[i] = malloc(xs);
        fill(f, n, kind, 1.0f);
        tx->from_float(f, xb[i], n);
        tx->to_float(xb[i], xf + (size_t)i * n, n);
        xp[MAXT - 1 - i] = xb[i];                      /* reversed order */
    }
    /* reference results and magnitudes: token j uses xp[j] */
    float *yref = malloc(sizeof(float) * MAXR * MAXT);
    double *mag = malloc(sizeof(double) * MAXR * MAXT);
    const pk_kernels *ref = pk_kernels_by_name("ref");
    for (int j = 0; j < MAXT; j++) {
        ref->gemv[t](n, MAXR, yref + j * MAXR, w, rb, xp[j]);
        const float *xj = xf + (size_t)(MAXT - 1 - j) * n;
        for (int r = 0; r < MAXR; r++) {
            double m = 0;
            for (int64_t i = 0; i < n; i++) m += fabs((double)wf[(size_t)r * n + i] * xj[i]);
            mag[j * MAXR + r] = m;
        }
    }
    int bad = 0, bad_sent = 0;
    for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++)
        for (size_t ti = 0; ti < sizeof tok_list / sizeof *tok_list; ti++) {
            int nr = rows_list[ri], nt = tok_list[ti];
            int64_t ys = nr + 5;
            size_t ylen = (size_t)ys * nt + 7;
            float *y = malloc(ylen * sizeof(float));
            for (size_t i = 0; i < ylen; i++) y[i] = SENT;
            k->gemm[t](n, nr, nt, y, ys, w, rb, xp);
            for (int j = 0; j < nt; j++)
                for (int r = 0; r < nr; r++) {
                    double got = y[j * ys + r], want = yref[j * MAXR + r], m = mag[j * MAXR + r];
                    double tol = 4.0 * ((double)n / tw->blck + 16) * 0x1p-23 * m + 1e-30;
                    if (!(fabs(got - want) <= tol) && !bad++)
                        fprintf(stderr, "  %s %s gemm n=%lld rows=%d tok=%d: y[%d][%d] = %.9g want %.9g "
                                "(tol %.3g)\n", k->isa, tw->name, (long long)n, nr, nt, j, r, got,
                                want, tol);
                }
            for (size_t i = 0; i < ylen; i++) {
                int64_t j = (int64_t)i / ys, r = (int64_t)i % ys;
                if (j < nt && r < nr) continue;
                if (y[i] != SENT && !bad_sent++)
                    fprintf(stderr, "  %s %s gemm n=%lld rows=%d tok=%d wrote y[%zu]\n", k->isa,
                            tw->name, (long long)n, nr, nt, i);
            }
            free(y);
        }
    TEST_CHECK(bad == 0, "%s %s gemm n=%lld kind %d: %d results off", k->isa, tw->name,
               (long long)n, kind, bad);
    TEST_CHECK(bad_sent == 0, "%s %s gemm n=%lld: writes outside its y entries", k->isa,
               tw->name, (long long)n);
    for (int i = 0; i < MAXT; i++) free(xb[i]);
    free(w); free(f); free(wf); free(xf); free(yref); free(mag);
}

static void test_all(void) {
    const pk_kernels *list[8];
    int nk = pk_kernels_list(list, 8), tested = 0;
    for (int v = 0; v < nk; v++)
        for (int ti = 0; ti < NTYPES; ti++) {
            int t = types[ti];
            if (!list[v]->gemm[t]) continue;
            int blck = pk_type_get(t)->blck;
            /* 1, 2, 16 super-blocks; 6 (a partial k-block of the AVX2
               kernels); for 32-element blocks 3 and 37 (partial groups of 4,
               a partial k-block) */
            int64_t ns[5] = { 256, 512, 4096, 1536, 0 };
            if (blck == 1) ns[3] = 100;                /* F16 / F32: a masked tail */
            else if (blck == 32) ns[3] = 96, ns[4] = 32 * 37;
            for (int i = 0; i < 5; i++) {
                if (!ns[i]) continue;
                for (int kind = 0; kind < D_COUNT; kind++) test_type(list[v], t, ns[i], kind);
            }
            tested++;
        }
    fprintf(stderr, "tested %d gemm kernels\n", tested);
    for (size_t i = 0; i < sizeof required / sizeof *required; i++) {
        const pk_kernels *k = pk_kernels_by_name(required[i].isa);
        if (!k) continue;                              /* not usable on this CPU */
        for (const int *t = required[i].types; *t >= 0; t++)
            TEST_CHECK(k->gemm[*t] != NULL, "%s variant has a %s gemm", required[i].isa, pk_type_name(*t));
    }
}

/* ---- sweep: every type, ntok 1..33 and 49, odd row counts, 1.. several blocks, extreme scales ----
 * Per (variant, type, n, data kind): MAXR_S rows and MAXT_S tokens quantized
 * once; every gemm call takes the first nr rows and nt tokens, for nr in
 * rows_s and every nt in 1..33, then 49 (both sides of every token count
 * at which an entry switches kernels, e.g. kernels/x86/avx2_kquant.h's kt_use and
 * k8_min_tok, and token tiles with a tail). Kinds: normal data;
 * activations all +-1 (full-scale levels); extreme scales (row r scaled by 10^(r mod 9 - 4),
 * token j by 10^(j mod 7 - 3), one zero row and one zero token); for MXFP4
 * also the ends of the E8M0 range: block exponents 0..5 (subnormal scales)
 * against activations of magnitude ~1e3, and 246..254 (up to 2^126)
 * against ~1e-5 (fp16 subnormal scales), so that every product and sum
 * stays a finite normal float. */

static const int sweep_types[] = { PK_TYPE_F32, PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_Q8_0, PK_TYPE_Q4_0,
                                   PK_TYPE_Q4_1, PK_TYPE_Q5_0, PK_TYPE_Q5_1, PK_TYPE_IQ4_NL,
                                   PK_TYPE_MXFP4, PK_TYPE_Q2_K, PK_TYPE_Q3_K, PK_TYPE_Q4_K, PK_TYPE_Q5_K,
                                   PK_TYPE_Q6_K, PK_TYPE_IQ4_XS, PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS, PK_TYPE_IQ1_S,
                                   PK_TYPE_IQ1_M, PK_TYPE_IQ3_XXS, PK_TYPE_IQ3_S, PK_TYPE_IQ2_S };
enum { NSWEEP = sizeof sweep_types / sizeof *sweep_types };
enum { S_NORMAL, S_MAX, S_EXTREME, S_E8M0_LO, S_E8M0_HI, S_COUNT };

static float sweep_scale(int extreme, int i, int mod, int zero_at) {
    if (!extreme) return 1.0f;
    if (i == zero_at) return 0.0f;
    return powf(10.0f, (float)(i % mod - mod / 2));
}

/* element i of a weight row as a double: its dequantized float f, except
 * MXFP4, decoded in double (its levels 8, 12 overflow a float at e >= 253) */
static double wval(int t, const uint8_t *row, int64_t i, float f) {
    if (t != PK_TYPE_MXFP4) return f;
    const pk_block_mxfp4 *b = (const pk_block_mxfp4 *)row + i / PK_QK_MXFP4;
    int j = (int)(i % PK_QK_MXFP4), q = j < 16 ? b->qs[j] & 15 : b->qs[j - 16] >> 4;
    return ldexp(pk_mxfp4_values[q], b->e - 128);
}

static void sweep_type(const pk_kernels *k, int t, int64_t n, int kind) {
    const pk_type_traits *tw = pk_type_get(t), *tx = pk_type_get(tw->vec_dot_type);
    static const int rows_s[] = { 1, 2, 3, 5, 7 };
    enum { MAXR_S = 7, MAXT_S = 49 };
    size_t rs = pk_row_size(t, n), xs = pk_row_size(tw->vec_dot_type, n);
    size_t rb = rs + tw->type_size + 2;
    uint8_t *w = malloc(rb * MAXR_S);
    float *f = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * MAXR_S * sizeof(float));
    float *xf = malloc((size_t)n * MAXT_S * sizeof(float));
    uint8_t *xbuf = malloc(xs * MAXT_S + 1);
    const void *xp[MAXT_S];
    const int e8m0 = kind == S_E8M0_LO || kind == S_E8M0_HI;
    for (int r = 0; r < MAXR_S; r++) {
        fill(f, n, D_NORMAL, sweep_scale(kind == S_EXTREME, r, 9, 3));
        make_row(t, f, w + r * rb, n);
        if (e8m0)
            for (int64_t b = 0; b < n / PK_QK_MXFP4; b++)
                w[r * rb + (size_t)b * sizeof(pk_block_mxfp4)] =
                    (uint8_t)(kind == S_E8M0_LO ? rnd64() % 6 : 246 + rnd64() % 9);
        memset(w + r * rb + rs, 0xCD, rb - rs);
        tw->to_float(w + r * rb, wf + (size_t)r * n, n);
    }
    for (int j = 0; j < MAXT_S; j++) {
        float xs_scale = kind == S_E8M0_LO ? 1e3f : kind == S_E8M0_HI ? 1e-5f : 1.0f;
        fill(f, n, kind == S_MAX ? D_MAX : D_NORMAL, xs_scale * sweep_scale(kind == S_EXTREME, j, 7, 5));
        /* token j at an odd offset order: tokens interleaved back to front */
        uint8_t *dst = xbuf + xs * (size_t)(MAXT_S - 1 - j);
        tx->from_float(f, dst, n);
        tx->to_float(dst, xf + (size_t)j * n, n);
        xp[j] = dst;
    }
    const pk_kernels *ref = pk_kernels_by_name("ref");
    float *yref = malloc(sizeof(float) * MAXR_S * MAXT_S);
    double *mag = malloc(sizeof(double) * MAXR_S * MAXT_S);
    for (int j = 0; j < MAXT_S; j++) {
        ref->gemv[t](n, MAXR_S, yref + j * MAXR_S, w, rb, xp[j]);
        for (int r = 0; r < MAXR_S; r++) {
            double m = 0;
            for (int64_t i = 0; i < n; i++)
                m += fabs(wval(t, w + r * rb, i, wf[(size_t)r * n + i]) * xf[(size_t)j * n + i]);
            mag[j * MAXR_S + r] = m;
        }
    }
    int bad = 0, bad_sent = 0;
    for (size_t ri = 0; ri < sizeof rows_s / sizeof *rows_s; ri++)
        for (int nt = 1; nt <= MAXT_S; nt = nt == 33 ? MAXT_S : nt + 1) {
            int nr = rows_s[ri];
            int64_t ys = nr + 3;
            size_t ylen = (size_t)ys * nt + 5;
            float *y = malloc(ylen * sizeof(float));
            for (size_t i = 0; i < ylen; i++) y[i] = SENT;
            k->gemm[t](n, nr, nt, y, ys, w, rb, xp);
            for (int j = 0; j < nt; j++)
                for (int r = 0; r < nr; r++) {
                    double got = y[j * ys + r], want = yref[j * MAXR_S + r], m = mag[j * MAXR_S + r];
                    double tol = 4.0 * ((double)n / tw->blck + 16) * 0x1p-23 * m + 1e-30;
                    if (!(fabs(got - want) <= tol) && !bad++)
                        fprintf(stderr, "  %s %s gemm n=%lld rows=%d tok=%d kind %d: y[%d][%d] = %.9g "
                                "want %.9g (tol %.3g)\n", k->isa, tw->name, (long long)n, nr, nt, kind,
                                j, r, got, want, tol);
                }
            for (size_t i = 0; i < ylen; i++) {
                int64_t j = (int64_t)i / ys, r = (int64_t)i % ys;
                if (j < nt && r < nr) continue;
                if (y[i] != SENT && !bad_sent++)
                    fprintf(stderr, "  %s %s gemm n=%lld rows=%d tok=%d wrote y[%zu]\n", k->isa,
                            tw->name, (long long)n, nr, nt, i);
            }
            free(y);
        }
    TEST_CHECK(bad == 0, "%s %s gemm sweep n=%lld kind %d: %d results off", k->isa, tw->name,
               (long long)n, kind, bad);
    TEST_CHECK(bad_sent == 0, "%s %s gemm sweep n=%lld kind %d: writes outside its y entries",
               k->isa, tw->name, (long long)n, kind);
    free(w); free(f); free(wf); free(xf); free(xbuf); free(yref); free(mag);
}

static void test_sweep(void) {
    const pk_kernels *list[8];
    int nk = pk_kernels_list(list, 8), tested = 0;
    for (int v = 0; v < nk; v++)
        for (int ti = 0; ti < NSWEEP; ti++) {
            int t = sweep_types[ti];
            if (!list[v]->gemm[t]) continue;
            int blck = pk_type_get(t)->blck;
            /* 1, 2, 3 blocks and one count past a k-block boundary */
            int64_t ns[4];
            if (blck == 1) { ns[0] = 1; ns[1] = 7; ns[2] = 100; ns[3] = 1030; }
            else if (blck == 32) { ns[0] = 32; ns[1] = 64; ns[2] = 96; ns[3] = 32 * 67; }
            else { ns[0] = 256; ns[1] = 512; ns[2] = 768; ns[3] = 256 * 9; }
            int nkind = t == PK_TYPE_MXFP4 ? S_COUNT : S_E8M0_LO;
            for (int i = 0; i < 4; i++)
                for (int kind = 0; kind < nkind; kind++) sweep_type(list[v], t, ns[i], kind);
            tested++;
        }
    fprintf(stderr, "sweep: %d gemm kernels\n", tested);
}

/* ---- the i8mm variant: usable exactly when the CPU has i8mm (and dotprod), and
 * then a gemm entry for every weight type ---------------------------------------- */
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

static void test_i8mm_complete(void) {
    static const int need[] = { PK_TYPE_Q4_K, PK_TYPE_Q8_0, PK_TYPE_Q2_K, PK_TYPE_Q6_K, PK_TYPE_Q5_K,
                                PK_TYPE_Q3_K, PK_TYPE_Q4_0, PK_TYPE_Q4_1, PK_TYPE_Q5_0, PK_TYPE_Q5_1,
                                PK_TYPE_IQ4_NL, PK_TYPE_IQ4_XS, PK_TYPE_MXFP4, PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS,
                                PK_TYPE_IQ3_XXS, PK_TYPE_IQ3_S, PK_TYPE_IQ2_S,
#if defined(PK_GEMM_FLOAT) && PK_GEMM_FLOAT
                                PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_F32,
#endif
    };
    const pk_kernels *k = pk_kernels_by_name("i8mm");
#if defined(__aarch64__) && defined(__linux__)
    unsigned long h = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
    int cpu = (h & (1ul << 20)) && (h & (1ul << 9)) && (h & (1ul << 10)) && (h2 & (1ul << 13));
    /* compiled in: the i8mm file was built with its flags, and dotprod has a table */
    int compiled = pk_kernels_i8mm_gemm.gemm[PK_TYPE_Q4_K] != NULL && pk_kernels_dotprod_table.vec_dot[PK_TYPE_F32];
    TEST_CHECK(!(k && !cpu), "i8mm variant listed on a CPU without i8mm/dotprod (HWCAP %#lx HWCAP2 %#lx)", h, h2);
    TEST_CHECK(!(cpu && compiled && !k), "CPU has i8mm and dotprod but the i8mm variant is not usable");
    fprintf(stderr, "i8mm: CPU %s, compiled %s, variant %s\n", cpu ? "yes" : "no", compiled ? "yes" : "no",
            k ? "usable" : "not usable");
#endif
    if (!k) return;
    int missing = 0;
    for (size_t i = 0; i < sizeof need / sizeof *need; i++)
        if (!k->gemm[need[i]]) {
            missing++;
            fprintf(stderr, "  i8mm: no gemm for %s\n", pk_type_name(need[i]));
        }
    TEST_CHECK(missing == 0, "i8mm variant lacks %d gemm entries", missing);
}

/* ---- benchmark: `test_gemm bench [n] [nrows] [ntok] [chunk]` -------------------------- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);   /* the machine may be shared */
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void bench(int64_t n, int64_t nrows, int ntok, int64_t chunk) {
    const pk_kernels *k = pk_kernels_get();
    printf("%s kernels, n=%lld nrows=%lld ntok=%d, chunks of %lld rows, one thread\n", k->isa,
           (long long)n, (long long)nrows, ntok, (long long)chunk);
    printf("%-6s %12s %12s %8s\n", "type", "gemv GFLOP/s", "gemm GFLOP/s", "speedup");
    for (int ti = 0; ti < NTYPES; ti++) {
        int t = types[ti];
        const pk_type_traits *tw = pk_type_get(t);
        if (!k->gemm[t]) continue;
        size_t rb = pk_row_size(t, n), xs = pk_row_size(tw->vec_dot_type, n);
        uint8_t *w = malloc(rb * nrows);
        float *f = malloc((size_t)n * sizeof(float));
        for (int64_t r = 0; r < nrows; r++) {
            fill(f, n, D_NORMAL, 1.0f);
            make_row(t, f, w + r * rb, n);
        }
        uint8_t *xbuf = malloc(xs * ntok);
        const void *xp[256];
        for (int j = 0; j < ntok; j++) {
            fill(f, n, D_NORMAL, 1.0f);
            pk_type_get(tw->vec_dot_type)->from_float(f, xbuf + j * xs, n);
            xp[j] = xbuf + j * xs;
        }
        float *y = malloc(sizeof(float) * nrows * ntok);
        /* chunks of rows, as the thread pool hands them out */
        double best[2] = { 1e30, 1e30 };
        for (int rep = 0; rep < 9; rep++)
            for (int mode = 0; mode < 2; mode++) {
                double t0 = now();
                for (int64_t r0 = 0; r0 < nrows; r0 += chunk) {
                    int64_t nr = nrows - r0 < chunk ? nrows - r0 : chunk;
                    const uint8_t *wr = w + r0 * rb;
                    if (mode)
                        k->gemm[t](n, nr, ntok, y + r0, nrows, wr, rb, xp);
                    else
                        for (int j = 0; j < ntok; j++)
                            k->gemv[t](n, nr, y + j * nrows + r0, wr, rb, xp[j]);
                }
                double dt = now() - t0;
                if (dt < best[mode]) best[mode] = dt;
            }
        double flop = 2.0 * n * nrows * ntok;
        printf("%-6s %12.1f %12.1f %7.2fx\n", tw->name, flop / best[0] * 1e-9, flop / best[1] * 1e-9,
               best[0] / best[1]);
        free(w); free(f); free(xbuf); free(y);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "bench") == 0) {
        bench(argc > 2 ? atoll(argv[2]) : 2048, argc > 3 ? atoll(argv[3]) : 4096,
              argc > 4 ? atoi(argv[4]) : 64, argc > 5 ? atoll(argv[5]) : 256);
        return 0;
    }
    test_all();
    test_sweep();
    test_i8mm_complete();
    return TEST_REPORT();
}
