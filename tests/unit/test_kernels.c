/* test_kernels.c - element types (quant/quant.c) and every usable kernel table
 * (kernels_*.c) against the scalar reference.
 *
 * Checks: the type table (sizes, unknown ids, pk_row_size); fp16/bf16
 * conversions exhaustively over all 65536 codes and on every rounding
 * boundary; Q8_0 format (hand-built block, ggml rounding, error bound);
 * for every ISA table and type: vec_dot and gemv against an exact double
 * computation on random and adversarial data with odd lengths and row counts,
 * and activation quantizers bit-exact against the reference.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "testhelp.h"
#define TESTRAND_SEED 0x9e3779b97f4a7c15ull
#include "testrand.h"
#include "quant/quant.h"
#include "kernels/kernels.h"
#include "pocket.h"

/* ---- deterministic data (and testrand.h) ------------------------------------ */

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* ---- type table ---------------------------------------------------------------- */

/* the 8-at-once Q4_K / Q5_K scale decoder = the one-at-a-time definition */
static void test_k4_scales(void) {
    uint32_t st = 12345;
    int bad = 0;
    for (int it = 0; it < 4096; it++) {
        uint8_t q[12], sc[8], m[8];
        for (int i = 0; i < 12; i++) q[i] = (uint8_t)((st = st * 1103515245u + 12345u) >> 23);
        pk_get_scales_mins_k4(q, sc, m);
        for (int j = 0; j < 8; j++) {
            uint8_t s1, m1;
            pk_get_scale_min_k4(j, q, &s1, &m1);
            bad += s1 != sc[j] || m1 != m[j];
        }
    }
    TEST_CHECK(bad == 0, "pk_get_scales_mins_k4 = pk_get_scale_min_k4 (%d differ)", bad);
}

static void test_types(void) {
    static const int unknown[] = { -1, 4, 5, 31, 32, 33, 36, 37, 38, 40, 1000 };
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
        TEST_CHECK(pk_type_get(unknown[i]) == NULL, "type %d should be unknown", unknown[i]);
        TEST_CHECK(strcmp(pk_type_name(unknown[i]), "?") == 0, "name of %d", unknown[i]);
    }
    static const struct { int t; int blck; size_t size; const char *name; } known[] = {
        { .t = PK_TYPE_F32, .blck = 1, .size = 4, .name = "F32" },
        { .t = PK_TYPE_F16, .blck = 1, .size = 2, .name = "F16" },
        { .t = PK_TYPE_Q4_0, .blck = 32, .size = 18, .name = "Q4_0" },
        { .t = PK_TYPE_Q4_1, .blck = 32, .size = 20, .name = "Q4_1" },
        { .t = PK_TYPE_Q5_0, .blck = 32, .size = 22, .name = "Q5_0" },
        { .t = PK_TYPE_Q5_1, .blck = 32, .size = 24, .name = "Q5_1" },
        { .t = PK_TYPE_Q8_0, .blck = 32, .size = 34, .name = "Q8_0" },
        { .t = PK_TYPE_Q8_1, .blck = 32, .size = 36, .name = "Q8_1" },
        { .t = PK_TYPE_Q2_K, .blck = 256, .size = 84, .name = "Q2_K" },
        { .t = PK_TYPE_Q3_K, .blck = 256, .size = 110, .name = "Q3_K" },
        { .t = PK_TYPE_Q4_K, .blck = 256, .size = 144, .name = "Q4_K" },
        { .t = PK_TYPE_Q5_K, .blck = 256, .size = 176, .name = "Q5_K" },
        { .t = PK_TYPE_Q6_K, .blck = 256, .size = 210, .name = "Q6_K" },
        { .t = PK_TYPE_Q8_K, .blck = 256, .size = 292, .name = "Q8_K" },
        { .t = PK_TYPE_IQ2_XXS, .blck = 256, .size = 66, .name = "IQ2_XXS" },
        { .t = PK_TYPE_IQ2_XS, .blck = 256, .size = 74, .name = "IQ2_XS" },
        { .t = PK_TYPE_IQ3_XXS, .blck = 256, .size = 98, .name = "IQ3_XXS" },
        { .t = PK_TYPE_IQ1_S, .blck = 256, .size = 50, .name = "IQ1_S" },
        { .t = PK_TYPE_IQ4_NL, .blck = 32, .size = 18, .name = "IQ4_NL" },
        { .t = PK_TYPE_IQ3_S, .blck = 256, .size = 110, .name = "IQ3_S" },
        { .t = PK_TYPE_IQ2_S, .blck = 256, .size = 82, .name = "IQ2_S" },
        { .t = PK_TYPE_IQ4_XS, .blck = 256, .size = 136, .name = "IQ4_XS" },
        { .t = PK_TYPE_I8, .blck = 1, .size = 1, .name = "I8" },
        { .t = PK_TYPE_I16, .blck = 1, .size = 2, .name = "I16" },
        { .t = PK_TYPE_I32, .blck = 1, .size = 4, .name = "I32" },
        { .t = PK_TYPE_I64, .blck = 1, .size = 8, .name = "I64" },
        { .t = PK_TYPE_F64, .blck = 1, .size = 8, .name = "F64" },
        { .t = PK_TYPE_IQ1_M, .blck = 256, .size = 56, .name = "IQ1_M" },
        { .t = PK_TYPE_BF16, .blck = 1, .size = 2, .name = "BF16" },
        { .t = PK_TYPE_TQ1_0, .blck = 256, .size = 54, .name = "TQ1_0" },
        { .t = PK_TYPE_TQ2_0, .blck = 256, .size = 66, .name = "TQ2_0" },
        { .t = PK_TYPE_MXFP4, .blck = 32, .size = 17, .name = "MXFP4" },
    };
    int nknown = 0;
    for (int t = 0; t < PK_TYPE_COUNT; t++) nknown += pk_type_get(t) != NULL;
    TEST_CHECK(nknown == (int)(sizeof known / sizeof *known), "%d known types", nknown);
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        const pk_type_traits *tt = pk_type_get(known[i].t);
        TEST_CHECK(tt && tt->blck == known[i].blck && tt->type_size == known[i].size &&
                   strcmp(tt->name, known[i].name) == 0 &&
                   strcmp(pk_type_name(known[i].t), known[i].name) == 0,
                   "traits of %s", known[i].name);
    }
    /* computable types */
    static const int comp[][2] = { { PK_TYPE_F32, PK_TYPE_F32 }, { PK_TYPE_F16, PK_TYPE_F16 },
                                   { PK_TYPE_BF16, PK_TYPE_BF16 }, { PK_TYPE_Q8_0, PK_TYPE_Q8_0 } };
    for (int i = 0; i < 4; i++) {
        const pk_type_traits *tt = pk_type_get(comp[i][0]);
        TEST_CHECK(tt->to_float && tt->from_float && tt->vec_dot_type == comp[i][1],
                   "%s computable", tt->name);
    }
    /* Q4_K and the other block types: tests/unit/test_kernels_quant.c */
    TEST_CHECK(pk_type_get(PK_TYPE_Q4_K)->to_float != NULL &&
               pk_type_get(PK_TYPE_Q4_K)->vec_dot_type == PK_TYPE_Q8_K, "Q4_K computable");
    TEST_CHECK(pk_type_get(PK_TYPE_TQ1_0)->to_float == NULL &&
               pk_type_get(PK_TYPE_TQ1_0)->vec_dot_type == -1, "TQ1_0 not computable yet");

    TEST_CHECK(pk_row_size(PK_TYPE_F32, 10) == 40, "row F32");
    TEST_CHECK(pk_row_size(PK_TYPE_F16, 7) == 14, "row F16");
    TEST_CHECK(pk_row_size(PK_TYPE_Q8_0, 64) == 68, "row Q8_0");
    TEST_CHECK(pk_row_size(PK_TYPE_Q8_0, 33) == 0, "row Q8_0 partial block");
    TEST_CHECK(pk_row_size(PK_TYPE_Q4_K, 4096) == 16 * 144, "row Q4_K");
    TEST_CHECK(pk_row_size(PK_TYPE_MXFP4, 64) == 34, "row MXFP4");
    TEST_CHECK(pk_row_size(PK_TYPE_F32, 0) == 0, "row empty");
    TEST_CHECK(pk_row_size(PK_TYPE_F32, -4) == 0, "row negative");
    TEST_CHECK(pk_row_size(4, 32) == 0, "row unknown type");
    TEST_CHECK(pk_row_size(PK_TYPE_F64, INT64_MAX) == 0, "row overflow");
}

/* ---- fp16 / bf16 ------------------------------------------------------------------ */

/* Value of a half computed independently (double arithmetic). */
static double half_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp((double)m, -24);
    return s ? -v : v;
}

static void test_fp16(void) {
    int bad_val = 0, bad_rt = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = pk_fp16_to_fp32((uint16_t)h);
        uint16_t back = pk_fp32_to_fp16(f);
        int e = (h >> 10) & 31, m = h & 1023;
        if (e == 31 && m) {                     /* NaN: stays NaN, sign kept, made quiet */
            bad_nan += !isnan(f) || (signbit(f) != 0) != (h >> 15) || back != (h | 0x200);
        } else if (e == 31) {
            bad_val += !isinf(f) || (signbit(f) != 0) != (h >> 15);
            bad_rt += back != h;
        } else {
            bad_val += (double)f != half_value((uint16_t)h) || (signbit(f) != 0) != (h >> 15);
            bad_rt += back != h;
        }
    }
    TEST_CHECK(bad_val == 0, "fp16->fp32: %d wrong values", bad_val);
    TEST_CHECK(bad_rt == 0, "fp16 round trip: %d wrong", bad_rt);
    TEST_CHECK(bad_nan == 0, "fp16 NaN: %d wrong", bad_nan);

    /* every rounding boundary: the float midpoint between consecutive finite
     * halves, and its neighbours one float ulp away */
    int bad_mid = 0;
    for (uint32_t h = 0; h < 0x7bff; h++) {
        for (int sgn = 0; sgn < 2; sgn++) {
            double lo = half_value((uint16_t)h), hi = half_value((uint16_t)(h + 1));
            float mid = (float)((lo + hi) / 2);   /* exact: needs 12 bits */
            uint16_t s = (uint16_t)(sgn << 15);
            float m = sgn ? -mid : mid;
            uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
            bad_mid += pk_fp32_to_fp16(m) != (s | even);
            bad_mid += pk_fp32_to_fp16(nextafterf(m, 0.0f)) != (s | h);
            bad_mid += pk_fp32_to_fp16(nextafterf(m, sgn ? -INFINITY : INFINITY)) != (s | (h + 1));
        }
    }
    TEST_CHECK(bad_mid == 0, "fp16 rounding boundaries: %d wrong", bad_mid);

    static const struct { float f; uint16_t h; } sp[] = {
        { 0.0f, 0x0000 }, { -0.0f, 0x8000 }, { 1.0f, 0x3c00 }, { -2.0f, 0xc000 },
        { 65504.0f, 0x7bff }, { 65519.996f, 0x7bff }, { 65520.0f, 0x7c00 }, { 1e10f, 0x7c00 },
        { -1e10f, 0xfc00 }, { INFINITY, 0x7c00 }, { -INFINITY, 0xfc00 },
        { 0x1p-14f, 0x0400 }, { 0x1p-24f, 0x0001 }, { 0x1p-25f, 0x0000 },
        { 0x1.000002p-25f, 0x0001 }, { 0x3p-25f, 0x0002 }, { -0x1p-24f, 0x8001 },
        { 0x1p-30f, 0x0000 }, { 1e-45f, 0x0000 }, { 0x1.002p0f, 0x3c00 }, { 0x1.006p0f, 0x3c02 },
        { 0x1.ffcp-15f, 0x0400 } /* largest subnormal + half ulp: ties to even -> min normal */,
    };
    for (size_t i = 0; i < sizeof sp / sizeof *sp; i++)
        TEST_CHECK(pk_fp32_to_fp16(sp[i].f) == sp[i].h, "fp32_to_fp16(%a) = %04x, want %04x",
                   sp[i].f, pk_fp32_to_fp16(sp[i].f), sp[i].h);
    TEST_CHECK((pk_fp32_to_fp16(NAN) & 0x7c00) == 0x7c00 && (pk_fp32_to_fp16(NAN) & 0x3ff),
               "fp32_to_fp16(NaN) is NaN");
    TEST_CHECK(pk_fp32_to_fp16(bits_f(0x7f800001)) == 0x7e00, "signalling NaN made quiet, not inf");
    TEST_CHECK(pk_fp16_to_fp32(0x7c00) == INFINITY && pk_fp16_to_fp32(0xfc00) == -INFINITY, "inf");
    TEST_CHECK(pk_fp16_to_fp32(0x0001) == 0x1p-24f && pk_fp16_to_fp32(0x03ff) == 0x1.ff8p-15f,
               "subnormal halves");
}

static void test_bf16(void) {
    int bad = 0, bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = pk_bf16_to_fp32((uint16_t)h);
        if (f_bits(f) != h << 16) bad++;
        uint16_t back = pk_fp32_to_bf16(f);
        if (isnan(f)) bad_nan += back != (h | 0x40);
        else bad += back != h;
    }
    TEST_CHECK(bad == 0, "bf16 round trip: %d wrong", bad);
    TEST_CHECK(bad_nan == 0, "bf16 NaN: %d wrong", bad_nan);
    int bad_mid = 0;
    for (uint32_t h = 0; h < 0x7f7f; h++) {
        for (uint32_t s = 0; s < 2; s++) {
            uint32_t mid = (s << 31) | (h << 16) | 0x8000;
            uint16_t sh = (uint16_t)(s << 15), even = (uint16_t)((h & 1) ? h + 1 : h);
            bad_mid += pk_fp32_to_bf16(bits_f(mid)) != (sh | even);
            bad_mid += pk_fp32_to_bf16(bits_f(mid - 1)) != (sh | h);
            bad_mid += pk_fp32_to_bf16(bits_f(mid + 1)) != (sh | (h + 1));
        }
    }
    TEST_CHECK(bad_mid == 0, "bf16 rounding boundaries: %d wrong", bad_mid);
    TEST_CHECK(pk_fp32_to_bf16(1.0f) == 0x3f80, "bf16 1");
    TEST_CHECK(pk_fp32_to_bf16(0x1.01p0f) == 0x3f80, "bf16 tie to even (down)");
    TEST_CHECK(pk_fp32_to_bf16(0x1.03p0f) == 0x3f82, "bf16 tie to even (up)");
    TEST_CHECK(pk_fp32_to_bf16(3.4028235e38f) == 0x7f80, "bf16 FLT_MAX rounds to inf");
    TEST_CHECK(pk_fp32_to_bf16(-INFINITY) == 0xff80, "bf16 -inf");
    TEST_CHECK(pk_fp32_to_bf16(bits_f(0x00012345)) == 0x0001, "bf16 subnormal kept");
    TEST_CHECK(pk_fp32_to_bf16(bits_f(0x7f800001)) == 0x7fc0, "bf16 sNaN stays NaN");
    TEST_CHECK(pk_fp32_to_bf16(bits_f(0xffc00000)) == 0xffc0, "bf16 -qNaN");
}

/* ---- Q8_0 format ------------------------------------------------------------------- */

static void test_q8_0_format(void) {
    const pk_type_traits *tt = pk_type_get(PK_TYPE_Q8_0);
    pk_block_q8_0 b[2];
    b[0].d = 0x3800;                                  /* 0.5 */
    for (int j = 0; j < 32; j++) b[0].qs[j] = (int8_t)(j - 16);
    b[1].d = 0xc000;                                  /* -2 */
    for (int j = 0; j < 32; j++) b[1].qs[j] = (int8_t)(j % 2 ? 127 : -128);
    float out[64];
    tt->to_float(b, out, 64);
    int bad = 0;
    for (int j = 0; j < 32; j++) bad += out[j] != 0.5f * (float)(j - 16);
    for (int j = 0; j < 32; j++) bad += out[32 + j] != (j % 2 ? -254.0f : 256.0f);
    TEST_CHECK(bad == 0, "hand-built Q8_0 blocks dequantize to known values (%d wrong)", bad);

    /* amax 127 -> d = 1: q = roundf(x), halves away from zero (not to even) */
    float x[32] = { 127, -127, 0, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 63.5f, -63.5f,
                    0.49999997f, 126.5f, 3.25f, -3.75f };
    static const int8_t want[32] = { 127, -127, 0, 1, -1, 2, 3, -3, 64, -64, 0, 127, 3, -4 };
    tt->from_float(x, b, 32);
    TEST_CHECK(b[0].d == 0x3c00, "Q8_0 d = amax/127 = 1 (%04x)", b[0].d);
    TEST_CHECK(memcmp(b[0].qs, want, 32) == 0, "Q8_0 rounding as roundf");
    float z[32] = { 0 };
    tt->from_float(z, b, 32);
    bad = b[0].d != 0;
    for (int j = 0; j < 32; j++) bad += b[0].qs[j] != 0;
    TEST_CHECK(bad == 0, "Q8_0 of zeros");

    /* error bound: |x - deq(q(x))| <= d/2, plus the fp16 rounding of d (<= 127|d - d16|) */
    enum { NB = 512 };
    float *src = malloc(NB * 32 * sizeof(float)), *deq = malloc(NB * 32 * sizeof(float));
    pk_block_q8_0 *q = malloc(NB * sizeof *q);
    for (int i = 0; i < NB; i++) {
        float scale = ldexpf(1.0f, (int)(rnd64() % 30) - 20);
        for (int j = 0; j < 32; j++) src[i * 32 + j] = rndf() * scale;
        if (i % 7 == 0) src[i * 32 + (int)(rnd64() % 32)] = 50.0f * scale;   /* outlier */
    }
    tt->from_float(src, q, NB * 32);
    tt->to_float(q, deq, NB * 32);
    int bad_bound = 0;
    for (int i = 0; i < NB; i++) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(src[i * 32 + j]));
        double d = amax / 127.0f, d16 = pk_fp16_to_fp32(q[i].d);
        double bound = d / 2 + 127 * fabs(d - d16) + 1e-6 * amax;
        for (int j = 0; j < 32; j++) bad_bound += fabs(src[i * 32 + j] - deq[i * 32 + j]) > bound;
    }
    TEST_CHECK(bad_bound == 0, "Q8_0 round-trip error bound: %d elements over", bad_bound);
    free(src); free(deq); free(q);
}

/* ---- kernels against exact double sums ---------------------------------------------- */

enum { D_RANDOM, D_ZEROS, D_MAX, D_OUTLIER, D_COUNT };
static const char *dname[D_COUNT] = { "random", "zeros", "max", "outlier" };

static void fill(float *v, int64_t n, int kind, int type) {
    float big = type == PK_TYPE_F16 ? 65504.0f : type == PK_TYPE_Q8_0 ? 1e4f : 1e17f;
    for (int64_t i = 0; i < n; i++) {
        switch (kind) {
        case D_RANDOM: v[i] = rndf(); break;
        case D_ZEROS: v[i] = 0.0f; break;
        case D_MAX: v[i] = (rnd64() & 1) ? big : -big; break;
        default: v[i] = rndf() * 1e-3f; break;
        }
    }
    if (kind == D_OUTLIER) v[rnd64() % (uint64_t)n] = type == PK_TYPE_F16 ? 6e4f : 1e4f;
}

/* Raw Q8_0 weight blocks using the full int8 range (incl. -128) and random
 * scales; activations keep to [-127, 127] as every quantizer does. */
static void fill_q8_raw(pk_block_q8_0 *b, int64_t nb, int act) {
    for (int64_t i = 0; i < nb; i++) {
        b[i].d = pk_fp32_to_fp16(ldexpf(1.0f + rndf() * 0.5f, (int)(rnd64() % 16) - 12));
        for (int j = 0; j < 32; j++) {
            int v = (int)(rnd64() % 256) - 128;
            b[i].qs[j] = (int8_t)(act && v == -128 ? -127 : v);
        }
    }
}

/* exact (double) dot of the dequantized vectors, and the sum of |products| */
static void exact_dot(int type, int64_t n, const void *w, const void *x, double *dot,
                      double *abs_sum) {
    const pk_type_traits *tw = pk_type_get(type), *tx = pk_type_get(tw->vec_dot_type);
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    tw->to_float(w, a, n);
    tx->to_float(x, b, n);
    double s = 0, sa = 0;
    for (int64_t i = 0; i < n; i++) {
        s += (double)a[i] * b[i];
        sa += fabs((double)a[i] * b[i]);
    }
    *dot = s; *abs_sum = sa;
    free(a); free(b);
}

/* Any float summation order of n terms is within gamma_n * sum|terms| of the
 * exact sum; allow a few extra roundings for products and block scales. */
static int close_enough(double got, double exact, double abs_sum, int64_t n) {
    double tol = (double)(n + 8) * 0x1p-24 * abs_sum * 1.01 + 1e-30;
    return fabs(got - exact) <= tol;
}

static void test_dot_type(const pk_kernels *k, int type, int64_t n, int kind) {
    const pk_type_traits *tw = pk_type_get(type);
    int xt = tw->vec_dot_type;
    size_t rs = pk_row_size(type, n), xs = pk_row_size(xt, n);
    static const int rows_list[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 17 };
    int maxrows = 17;
    size_t pad = 3 * tw->type_size;                     /* rows not densely packed */
    size_t rb = rs + pad;
    char *w = malloc(rb * maxrows), *x = malloc(xs);
    float *f = malloc((size_t)n * sizeof(float));
    int raw = type == PK_TYPE_Q8_0 && kind == D_RANDOM && (n / 32) % 2 == 0;
    for (int r = 0; r < maxrows; r++) {
        if (raw) fill_q8_raw((pk_block_q8_0 *)(w + r * rb), n / 32, 0);
        else { fill(f, n, kind, type); tw->from_float(f, w + r * rb, n); }
        memset(w + r * rb + rs, 0xAB, pad);
    }
    if (type == PK_TYPE_Q8_0 && kind == D_MAX) {     /* extreme blocks, full scale */
        for (int r = 0; r < maxrows; r++) {
            pk_block_q8_0 *b = (pk_block_q8_0 *)(w + r * rb);
            for (int64_t i = 0; i < n / 32; i++) {
                b[i].d = 0x7bff;
                for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)((j + r) % 3 ? -128 : 127);
            }
        }
    }
    if (raw) fill_q8_raw((pk_block_q8_0 *)x, n / 32, 1);
    else { fill(f, n, kind, type); pk_type_get(xt)->from_float(f, x, n); }
    if (type == PK_TYPE_Q8_0 && kind == D_MAX) {
        pk_block_q8_0 *b = (pk_block_q8_0 *)x;
        for (int64_t i = 0; i < n / 32; i++) {
            b[i].d = 0x7bff;
            for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)(j % 2 ? -127 : 127);
        }
    }

    double ex[17], ab[17];
    int bad_dot = 0, bad_gemv = 0;
    for (int r = 0; r < maxrows; r++) {
        exact_dot(type, n, w + r * rb, x, &ex[r], &ab[r]);
        float s = NAN;
        k->vec_dot[type](n, &s, w + r * rb, x);
        if (!close_enough(s, ex[r], ab[r], n)) {
            if (!bad_dot++)
                fprintf(stderr, "  %s %s vec_dot n=%lld %s row %d: got %.9g want %.9g (abs %.3g)\n",
                        k->isa, tw->name, (long long)n, dname[kind], r, s, ex[r], ab[r]);
        }
    }
    for (size_t ri = 0; ri < sizeof rows_list / sizeof *rows_list; ri++) {
        int nr = rows_list[ri];
        float y[18];
        for (int r = 0; r < 18; r++) y[r] = -12345.0f;
        k->gemv[type](n, nr, y, w, rb, x);
        for (int r = 0; r < nr; r++)
            if (!close_enough(y[r], ex[r], ab[r], n) && !bad_gemv++)
                fprintf(stderr, "  %s %s gemv n=%lld rows=%d %s row %d: got %.9g want %.9g\n",
                        k->isa, tw->name, (long long)n, nr, dname[kind], r, y[r], ex[r]);
        if (y[nr] != -12345.0f) bad_gemv++;            /* wrote past nrows */
    }
    TEST_CHECK(bad_dot == 0, "%s %s vec_dot n=%lld %s: %d rows wrong", k->isa, tw->name,
               (long long)n, dname[kind], bad_dot);
    TEST_CHECK(bad_gemv == 0, "%s %s gemv n=%lld %s: %d wrong", k->isa, tw->name,
               (long long)n, dname[kind], bad_gemv);
    free(w); free(x); free(f);
}

static void test_kernels_dot(const pk_kernels *k) {
    static const int64_t n1[] = { 1, 3, 7, 31, 33, 127, 255, 1000, 4097 };
    static const int64_t nq[] = { 32, 64, 96, 224, 4096 + 32 };
    static const int types[] = { PK_TYPE_F32, PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_Q8_0 };
    for (int ti = 0; ti < 4; ti++) {
        int t = types[ti];
        int is_q = t == PK_TYPE_Q8_0;
        size_t cnt = is_q ? sizeof nq / sizeof *nq : sizeof n1 / sizeof *n1;
        for (size_t i = 0; i < cnt; i++)
            for (int kind = 0; kind < D_COUNT; kind++)
                test_dot_type(k, t, is_q ? nq[i] : n1[i], kind);
    }
}

/* ---- activation quantizers bit-exact ------------------------------------------------- */

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
    enum { N = 3 * 65536 * 2 };
    float *x = malloc(N * sizeof(float));
    static const int64_t n1[] = { 1, 3, 7, 31, 33, 127, 255, 1000, 4097 };
    for (size_t i = 0; i < sizeof n1 / sizeof *n1; i++) {
        for (int64_t j = 0; j < n1[i]; j++) x[j] = rndf() * 100.0f;
        check_quant_exact(k, PK_TYPE_F32, x, n1[i], "random");
        check_quant_exact(k, PK_TYPE_F16, x, n1[i], "random");
        check_quant_exact(k, PK_TYPE_BF16, x, n1[i], "random");
    }
    /* every fp16 rounding boundary, plus specials */
    int64_t m = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float lo = pk_fp16_to_fp32((uint16_t)h), hi = pk_fp16_to_fp32((uint16_t)(h + 1));
        float mid = (float)(((double)lo + hi) / 2);
        x[m++] = mid; x[m++] = nextafterf(mid, 0); x[m++] = -nextafterf(mid, INFINITY);
    }
    x[0] = NAN; x[1] = -INFINITY; x[2] = INFINITY; x[3] = bits_f(0x7f800001);
    x[4] = bits_f(0xffc12345); x[5] = 1e-45f; x[6] = -0.0f; x[7] = 3.4e38f;
    check_quant_exact(k, PK_TYPE_F16, x, m, "fp16 boundaries");
    /* bf16 boundaries across the whole exponent range, plus specials */
    m = 0;
    for (uint32_t h = 0; h < 0x7f80; h += 1) {
        uint32_t mid = (h << 16) | 0x8000;
        x[m++] = bits_f(mid);
        x[m++] = bits_f(mid - 1);
        x[m++] = bits_f(mid + 1 + 0x80000000u);
    }
    x[0] = NAN; x[1] = -INFINITY; x[2] = INFINITY; x[3] = bits_f(0x7f800001);
    x[4] = bits_f(0xffc12345); x[5] = 1e-45f; x[6] = -0.0f; x[7] = 3.4028235e38f;
    check_quant_exact(k, PK_TYPE_BF16, x, m, "bf16 boundaries");
    /* a sweep over float bit patterns */
    m = 0;
    for (uint64_t u = 0; u < 0x100000000ull && m < N; u += 10007) x[m++] = bits_f((uint32_t)u);
    check_quant_exact(k, PK_TYPE_F16, x, m, "bit sweep");
    check_quant_exact(k, PK_TYPE_BF16, x, m, "bit sweep");

    /* Q8_0: random scales, outliers, zero blocks, exact ties after scaling */
    static const int64_t nq[] = { 32, 64, 96, 224, 4096 + 32 };
    for (size_t i = 0; i < sizeof nq / sizeof *nq; i++) {
        for (int64_t b = 0; b < nq[i] / 32; b++) {
            float scale = ldexpf(1.0f, (int)(rnd64() % 40) - 20);
            for (int j = 0; j < 32; j++) x[b * 32 + j] = rndf() * scale;
            if (b % 3 == 1) x[b * 32 + (int)(rnd64() % 32)] = -30.0f * scale;
            if (b % 5 == 2) for (int j = 0; j < 32; j++) x[b * 32 + j] = 0.0f;
            if (b % 4 == 3) {                  /* amax 127: x*id = x; many .5 ties */
                for (int j = 0; j < 32; j++) x[b * 32 + j] = (float)((int)(rnd64() % 253) - 126) + 0.5f;
                x[b * 32] = 127.0f;
            }
        }
        check_quant_exact(k, PK_TYPE_Q8_0, x, nq[i], "mixed");
        fill(x, nq[i], D_MAX, PK_TYPE_Q8_0);
        check_quant_exact(k, PK_TYPE_Q8_0, x, nq[i], "max");
        for (int64_t j = 0; j < nq[i]; j++) x[j] = (j % 32 == 5) ? 3.4e38f : rndf();
        check_quant_exact(k, PK_TYPE_Q8_0, x, nq[i], "huge");
        /* tiny input: d = amax/127 is a subnormal float (1/d still finite) */
        for (int64_t j = 0; j < nq[i]; j++) x[j] = j % 32 ? rndf() * 1e-36f : 1e-36f;
        check_quant_exact(k, PK_TYPE_Q8_0, x, nq[i], "tiny");
    }
    free(x);
}

/* ---- selection ------------------------------------------------------------------------- */

/* softcap of table k against double-precision maths: cap tanh(x / cap)
 * over -40 cap .. 40 cap (both forms of the SIMD tanh and the boundary
 * between them, tiny and saturated values), n = N - 3 (a tail, and 3
 * values untouched), and the special values */
static int test_softcap(const pk_kernels *k) {
    enum { N = 4099 };
    static float x[N], x0[N];
    const float cap = 30.0f;
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double u = -1.0 + 2.0 * i / (N - 1);   /* -1 .. 1, steps denser near 0 below */
        x0[i] = x[i] = (float)(cap * (i % 3 == 0 ? 40.0 * u : i % 3 == 1 ? 1.5 * u : 1e-3 * u));
    }
    k->softcap(x, N - 3, cap);
    for (int i = 0; i < N; i++) {
        double want = i < N - 3 ? cap * tanh((double)(x0[i] * (1.0f / cap))) : x0[i];   /* argument rounded as the kernel's */
        int ok = fabs(x[i] - want) <= 3e-7 * fabs(want) + 1e-37;
        if (!ok && !bad++) fprintf(stderr, "  %s softcap(%.9g) = %.9g want %.9g\n", k->isa, x0[i], x[i], want);
    }
    float sp[6] = {INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 1e30f};
    k->softcap(sp, 6, cap);
    TEST_CHECK(sp[0] == cap && sp[1] == -cap && isnan(sp[2]) && sp[3] == 0.0f && !signbit(sp[3]) &&
                   sp[4] == 0.0f && signbit(sp[4]) && sp[5] == cap,
               "%s softcap: +-inf -> +-cap, NaN, +-0 kept, 1e30 -> cap", k->isa);
    return bad;
}

/* exp_sub, silu_mul, softcap and sgemm of table k against double-precision maths */
static void test_kernels_float(const pk_kernels *k) {
    enum { N = 1000 };
    static float x[N], g[N], u[N];
    int bad = test_softcap(k);
    for (int i = 0; i < N; i++) x[i] = -110.0f + 200.0f * (float)i / N;   /* -110 .. 90 */
    k->exp_sub(x, N, 1.5f);
    for (int i = 0; i < N; i++) {
        double want = exp((double)((-110.0f + 200.0f * (float)i / N) - 1.5f));   /* argument rounded as the kernel's */
        double got = x[i];
        int ok = want > 3.4e38 ? isinf(got) && got > 0
                 : want < 1e-37 ? got >= 0 && got <= 2e-37
                 : fabs(got - want) <= 4e-7 * want;
        if (!ok && !bad++) fprintf(stderr, "  %s exp_sub[%d] = %.9g want %.9g\n", k->isa, i, got, want);
    }
    float sp[3] = {-INFINITY, NAN, 0.0f};
    k->exp_sub(sp, 3, 0.0f);
    TEST_CHECK(sp[0] == 0.0f && isnan(sp[1]) && sp[2] == 1.0f, "%s exp_sub: exp(-inf) = 0, NaN, exp(0) = 1", k->isa);
    for (int i = 0; i < N; i++) { g[i] = -30.0f + 60.0f * (float)i / N; u[i] = 0.5f + (float)(i % 7); }
    k->silu_mul(g, u, N - 3);                       /* a tail, and 3 untouched */
    for (int i = 0; i < N; i++) {
        double gi = -30.0f + 60.0f * (float)i / N;
        double want = i < N - 3 ? gi / (1.0 + exp(-gi)) * (0.5 + i % 7) : (float)gi;
        if (!(fabs(g[i] - want) <= 6e-7 * fabs(want) + 1e-30) && !bad++)
            fprintf(stderr, "  %s silu_mul[%d] = %.9g want %.9g\n", k->isa, i, g[i], want);
    }
    /* sgemm: C (5 x 70) = A (5 x 37, lda 40) B (37 x 70, ldb 75), ldc 72; the
       padding of C must stay untouched */
    static float A[5 * 40], Bm[37 * 75], C[5 * 72];
    for (int i = 0; i < 5 * 40; i++) A[i] = (float)((i * 37) % 19) / 7.0f - 1.0f;
    for (int i = 0; i < 37 * 75; i++) Bm[i] = (float)((i * 53) % 23) / 11.0f - 1.0f;
    for (int i = 0; i < 5 * 72; i++) C[i] = -7.0f;
    k->sgemm(5, 70, 37, A, 40, Bm, 75, C, 72);
    for (int m = 0; m < 5; m++)
        for (int n = 0; n < 72; n++) {
            double want = -7.0, mag = 0;
            if (n < 70) {
                want = 0;
                for (int kk = 0; kk < 37; kk++) {
                    want += (double)A[m * 40 + kk] * Bm[kk * 75 + n];
                    mag += fabs((double)A[m * 40 + kk] * Bm[kk * 75 + n]);
                }
            }
            int ok = n < 70 ? fabs(C[m * 72 + n] - want) <= 1e-6 * mag : C[m * 72 + n] == -7.0f;
            if (!ok && !bad++)
                fprintf(stderr, "  %s sgemm C[%d][%d] = %.9g want %.9g\n", k->isa, m, n, C[m * 72 + n], want);
        }
    /* a row's result does not depend on the rows around it */
    static float C1[72];
    k->sgemm(1, 70, 37, A + 3 * 40, 40, Bm, 75, C1, 72);
    TEST_CHECK(memcmp(C1, C + 3 * 72, 70 * sizeof(float)) == 0, "%s sgemm: one row = the same row of five, bitwise",
               k->isa);
    TEST_CHECK(bad == 0, "%s: exp_sub / silu_mul / softcap / sgemm off (%d)", k->isa, bad);
}

/* uniform in [-1, 1) from a xorshift state */
static double frand(uint32_t *st) {
    *st ^= *st << 13; *st ^= *st >> 17; *st ^= *st << 5;
    return (double)*st / 2147483648.0 - 1.0;
}

/* The Gated DeltaNet decode step against the recurrence in double
 * precision: odd state sizes and the real one (128), several steps in a row
 * so errors in S would compound, decays near 0 and 1. */
static void test_delta_step(const pk_kernels *k) {
    static const int sizes[] = {1, 3, 8, 13, 32, 45, 128};
    int bad = 0;
    uint32_t seed = 7;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int d = sizes[si];
        float *S = malloc(sizeof(float) * (size_t)d * d), q[128], kk[128], v[128], o[128];
        double *R = malloc(sizeof(double) * (size_t)d * d), ro[128], kv[128];
        for (int i = 0; i < d * d; i++) R[i] = S[i] = (float)(frand(&seed) * 0.5);
        for (int step = 0; step < 4; step++) {
            const float decay = step == 1 ? 0.001f : step == 2 ? 1.0f : 0.9f, beta = 0.3f + 0.2f * (float)step;
            for (int i = 0; i < d; i++) {
                q[i] = (float)frand(&seed); kk[i] = (float)frand(&seed); v[i] = (float)frand(&seed);
            }
            k->delta_step(S, d, q, kk, v, decay, beta, o);
            for (int e = 0; e < d; e++) kv[e] = 0;
            for (int i = 0; i < d; i++)
                for (int e = 0; e < d; e++) { R[i * d + e] *= decay; kv[e] += R[i * d + e] * kk[i]; }
            for (int e = 0; e < d; e++) { kv[e] = beta * (v[e] - kv[e]); ro[e] = 0; }
            for (int i = 0; i < d; i++)
                for (int e = 0; e < d; e++) { R[i * d + e] += kk[i] * kv[e]; ro[e] += R[i * d + e] * q[i]; }
            double scale = 1.0;
            for (int e = 0; e < d; e++) scale = fmax(scale, fabs(ro[e]));
            for (int e = 0; e < d; e++) bad += fabs(o[e] - ro[e]) > 1e-5 * scale * sqrt((double)d);
            for (int i = 0; i < d * d; i++) bad += fabs(S[i] - R[i]) > 1e-5 * (1.0 + fabs(R[i]));
        }
        free(S);
        free(R);
    }
    TEST_CHECK(bad == 0, "%s: delta_step off the recurrence (%d)", k->isa, bad);
}

static int variant_index(const char *name) {
    for (int i = 0; pk_kernel_variant_get(i); i++)
        if (strcmp(pk_kernel_variant_get(i)->name, name) == 0) return i;
    return -1;
}

/* The merge of the declared list, checked slot by slot against its
 * definition for every variant (usable here or not): a slot comes from the
 * first of the variant's parts that has it, else from the parent's merged
 * table; no two parts of a variant provide the same slot. Then the list's
 * content: the kernels each family's variants must share. */
static void test_variant_merge(void) {
    int nv = 0;
    for (; pk_kernel_variant_get(nv); nv++) {
        const pk_kernel_variant *d = pk_kernel_variant_get(nv);
        const pk_kernels *m = pk_kernel_variant_merged(nv);
        TEST_CHECK(m && strcmp(m->isa, d->name) == 0 && strcmp(d->name, pk_kernel_variant_name(nv)) == 0,
                   "variant %d: %s", nv, d->name);
        TEST_CHECK(d->parent < nv && (d->parent >= 0 || nv == 0), "%s: parent %d", d->name, d->parent);
        TEST_CHECK(d->parts && d->parts[0], "%s: no parts", d->name);
        const pk_kernels *par = d->parent >= 0 ? pk_kernel_variant_merged(d->parent) : NULL;
        int wrong = 0, shared = 0, slots = 0;
#define SLOT_CHECK(e)                                                   \
    do {                                                                \
        const pk_kernels *src = NULL;                                   \
        int owners = 0;                                                 \
        for (const pk_kernels *const *p = d->parts; *p; p++)            \
            if ((*p)->e) {                                              \
                if (!src) src = *p;                                     \
                owners++;                                               \
            }                                                           \
        if (!src) src = par;                                            \
        wrong += src ? m->e != src->e : m->e != NULL;                   \
        shared += owners > 1;                                           \
        slots++;                                                        \
    } while (0);
#define ONE(f) SLOT_CHECK(f)
#define TYPED(f) \
    for (int t = 0; t < PK_TYPE_COUNT; t++) SLOT_CHECK(f[t])
        PK_KERNEL_SLOTS(ONE, TYPED)
#undef ONE
#undef TYPED
#undef SLOT_CHECK
        TEST_CHECK(wrong == 0, "%s: %d of %d slots are not the merge of its parts and parent", d->name, wrong, slots);
        TEST_CHECK(shared == 0, "%s: %d slots provided by two parts", d->name, shared);
    }
    TEST_CHECK(nv == 8, "declared variants: %d", nv);
    /* the x86 family inherits AVX2's DeltaNet step and typed-cache
       attention (AVX-512 overrides the F16 values kernel); the ARM one NEON's
       attention; the gemm-only variants keep their parent's gemv */
    const int x86 = variant_index("avx2"), vnni = variant_index("avxvnni"), a512 = variant_index("avx512"),
              amx = variant_index("amx"), neon = variant_index("neon"), i8 = variant_index("i8mm");
    TEST_CHECK(x86 > 0 && vnni > 0 && a512 > 0 && amx > 0 && neon > 0 && i8 > 0, "variant names");
    if (x86 < 0 || vnni < 0 || a512 < 0 || amx < 0 || neon < 0 || i8 < 0) return;
    const pk_kernels *ref = pk_kernel_variant_merged(0);
    const int f16 = PK_TYPE_F16, q8 = PK_TYPE_Q8_0;
    const pk_kernels *const want_dn = pk_kernels_avx2_deltanet.delta_step ? &pk_kernels_avx2_deltanet : ref;
    const pk_kernels *const want_att = pk_kernels_avx2_att.att_kq[f16] ? &pk_kernels_avx2_att : ref;
    for (int v = x86; v <= amx; v++) {
        const pk_kernels *k = pk_kernel_variant_merged(v);
        TEST_CHECK(k->delta_step == want_dn->delta_step, "%s: delta_step", k->isa);
        TEST_CHECK(k->att_kq[f16] == want_att->att_kq[f16] && k->att_kq[q8] == want_att->att_kq[q8] &&
                       k->att_pv[q8] == want_att->att_pv[q8],
                   "%s: attention kernels", k->isa);
        TEST_CHECK(k->att_pv[f16] == (v >= a512 && pk_kernels_avx512_att.att_pv[f16] ? pk_kernels_avx512_att.att_pv[f16]
                                                                                     : want_att->att_pv[f16]),
                   "%s: F16 values kernel", k->isa);
    }
    const pk_kernels *const want_natt = pk_kernels_neon_att.att_kq[f16] ? &pk_kernels_neon_att : ref;
    for (int v = neon; v <= i8; v++) {
        const pk_kernels *k = pk_kernel_variant_merged(v);
        TEST_CHECK(k->att_kq[q8] == want_natt->att_kq[q8] && k->att_pv[f16] == want_natt->att_pv[f16],
                   "%s: attention kernels", k->isa);
    }
    for (int t = 0; t < PK_TYPE_COUNT; t++) {
        TEST_CHECK(pk_kernel_variant_merged(vnni)->gemv[t] == pk_kernel_variant_merged(x86)->gemv[t] &&
                       pk_kernel_variant_merged(amx)->gemv[t] == pk_kernel_variant_merged(a512)->gemv[t] &&
                       pk_kernel_variant_merged(i8)->gemv[t] == pk_kernel_variant_merged(i8 - 1)->gemv[t],
                   "%s: gemv of the gemm-only variants", pk_type_name(t));
        if (pk_kernels_amx_gemm.gemm[t])
            TEST_CHECK(pk_kernel_variant_merged(amx)->gemm[t] == pk_kernels_amx_gemm.gemm[t], "amx gemm %d", t);
    }
    TEST_CHECK(pk_kernel_variant_get(nv) == NULL && pk_kernel_variant_get(-1) == NULL &&
                   pk_kernel_variant_merged(nv) == NULL,
               "past the end of the list");
}

static void test_selection(void) {
    setenv("POCKET_KERNELS", "ref", 1);              /* before the first pk_kernels_* call */
    const pk_kernels *sel = pk_kernels_get();
    TEST_CHECK(sel && strcmp(sel->isa, "ref") == 0, "POCKET_KERNELS=ref honoured");
    TEST_CHECK(pk_kernels_get() == sel, "selection is fixed");
    TEST_CHECK(pk_kernel_env_status() == 0, "POCKET_KERNELS=ref is usable");
    /* the declared list: ref first, names unique, usable ones listed */
    int nd = 0, nusable = 0;
    while (pk_kernel_variant_name(nd)) nd++;
    TEST_CHECK(nd >= 4 && strcmp(pk_kernel_variant_name(0), "ref") == 0, "declared list (%d)", nd);
    TEST_CHECK(pk_kernel_variant_name(-1) == NULL, "negative index");
    for (int i = 0; i < nd; i++) {
        for (int j = 0; j < i; j++)
            TEST_CHECK(strcmp(pk_kernel_variant_name(i), pk_kernel_variant_name(j)) != 0,
                       "duplicate name %s", pk_kernel_variant_name(i));
        nusable += pk_kernel_variant_usable(pk_kernel_variant_name(i));
    }
    TEST_CHECK(pk_kernels_by_name("ref") != NULL, "ref always available");
    TEST_CHECK(pk_kernels_by_name("sse9") == NULL && pk_kernels_by_name(NULL) == NULL,
               "unknown variant");
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);
    TEST_CHECK(nl >= 1 && strcmp(list[0]->isa, "ref") == 0, "list starts with ref");
    TEST_CHECK(pk_kernels_list(list, 1) == 1, "list respects max");
    nl = pk_kernels_list(list, 8);
    TEST_CHECK(nl == nusable, "list holds the %d usable variants (%d)", nusable, nl);
    for (int i = 0; i < nl; i++) {
        TEST_CHECK(pk_kernels_by_name(list[i]->isa) == list[i], "by_name(%s)", list[i]->isa);
        int missing = 0;
        for (int t = 0; t < PK_TYPE_COUNT; t++) {
            missing += pk_kernels_ref_table.vec_dot[t] && !list[i]->vec_dot[t];
            missing += pk_kernels_ref_table.gemv[t] && !list[i]->gemv[t];
            missing += pk_kernels_ref_table.quantize[t] && !list[i]->quantize[t];
        }
        TEST_CHECK(missing == 0, "%s: %d entries missing after merge", list[i]->isa, missing);
    }
}

/* On x86-64 no weight type may fall back to the scalar reference in a
 * variant this CPU can run (each has the avx2 table's gemv and vec_dot or
 * its own, and a gemm for every block-quantized type): the types listed,
 * which are all the ref table has. */
static void test_x86_no_ref_fallback(void) {
#if defined(__x86_64__)
    static const int wt[] = { PK_TYPE_F32, PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_Q8_0, PK_TYPE_Q4_0,
                              PK_TYPE_Q4_1, PK_TYPE_Q5_0, PK_TYPE_Q5_1, PK_TYPE_Q2_K, PK_TYPE_Q3_K,
                              PK_TYPE_Q4_K, PK_TYPE_Q5_K, PK_TYPE_Q6_K, PK_TYPE_IQ4_NL, PK_TYPE_IQ4_XS,
                              PK_TYPE_MXFP4, PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS, PK_TYPE_IQ1_S, PK_TYPE_IQ1_M,
                              PK_TYPE_IQ3_XXS, PK_TYPE_IQ3_S, PK_TYPE_IQ2_S };
    const pk_kernels *ref = &pk_kernels_ref_table, *list[8];
    int listed = 0;
    for (int t = 0; t < PK_TYPE_COUNT; t++) listed += ref->gemv[t] != NULL;
    TEST_CHECK(listed == (int)(sizeof wt / sizeof *wt), "x86 list: %d types, the reference has %d",
               (int)(sizeof wt / sizeof *wt), listed);
    int nl = pk_kernels_list(list, 8);
    for (int v = 0; v < nl; v++) {
        if (list[v] == pk_kernels_by_name("ref")) continue;
        for (size_t i = 0; i < sizeof wt / sizeof *wt; i++) {
            int t = wt[i];
            const int quant = pk_type_get(t)->blck > 1;
            TEST_CHECK(list[v]->gemv[t] && list[v]->gemv[t] != ref->gemv[t] && list[v]->vec_dot[t] &&
                           list[v]->vec_dot[t] != ref->vec_dot[t] && (!quant || list[v]->gemm[t]),
                       "%s: %s gemv/vec_dot%s are SIMD, not the reference's", list[v]->isa, pk_type_name(t),
                       quant ? "/gemm" : "");
        }
    }
#endif
}

/* On AArch64 no weight type may fall back to the scalar reference in an ARM
 * variant that this CPU can run: gemv and vec_dot of every type, the
 * activation quantizers and the float kernels are the variant's own. */
static void test_arm_no_ref_fallback(void) {
#if defined(__aarch64__)
    static const int wt[] = { PK_TYPE_F32, PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_Q8_0, PK_TYPE_Q4_0,
                              PK_TYPE_Q4_1, PK_TYPE_Q5_0, PK_TYPE_Q5_1, PK_TYPE_Q2_K, PK_TYPE_Q3_K,
                              PK_TYPE_Q4_K, PK_TYPE_Q5_K, PK_TYPE_Q6_K, PK_TYPE_IQ4_NL, PK_TYPE_IQ4_XS,
                              PK_TYPE_MXFP4, PK_TYPE_IQ2_XXS, PK_TYPE_IQ2_XS, PK_TYPE_IQ1_S, PK_TYPE_IQ1_M,
                              PK_TYPE_IQ3_XXS, PK_TYPE_IQ3_S, PK_TYPE_IQ2_S };
    static const int at[] = { PK_TYPE_F16, PK_TYPE_BF16, PK_TYPE_Q8_0, PK_TYPE_Q8_1, PK_TYPE_Q8_K };
    static const char *const arm[] = { "neon", "dotprod", "i8mm" };
    const pk_kernels *ref = &pk_kernels_ref_table;
    TEST_CHECK(pk_kernels_by_name("neon") != NULL, "aarch64: the neon variant is usable");
    for (size_t v = 0; v < sizeof arm / sizeof *arm; v++) {
        const pk_kernels *k = pk_kernels_by_name(arm[v]);
        if (!k) continue;                         /* this CPU lacks it */
        int fallback = 0;
        for (size_t i = 0; i < sizeof wt / sizeof *wt; i++) {
            int t = wt[i];
            int g = !k->gemv[t] || k->gemv[t] == ref->gemv[t];
            int d = !k->vec_dot[t] || k->vec_dot[t] == ref->vec_dot[t];
            TEST_CHECK(!g && !d, "%s: %s gemv/vec_dot are SIMD, not the reference's", arm[v],
                       pk_type_name(t));
            fallback += g + d;
        }
        for (size_t i = 0; i < sizeof at / sizeof *at; i++)
            TEST_CHECK(k->quantize[at[i]] && k->quantize[at[i]] != ref->quantize[at[i]],
                       "%s: %s quantizer is SIMD", arm[v], pk_type_name(at[i]));
        TEST_CHECK(k->sgemm != ref->sgemm && k->exp_sub != ref->exp_sub && k->silu_mul != ref->silu_mul &&
                       k->softcap != ref->softcap,
                   "%s: sgemm / exp_sub / silu_mul / softcap are SIMD", arm[v]);
        fprintf(stderr, "%s: %d of %d weight-type entries fall back to the reference\n", arm[v],
                fallback, (int)(2 * sizeof wt / sizeof *wt));
    }
#endif
}

int main(void) {
    test_selection();
    test_variant_merge();
    test_arm_no_ref_fallback();
    test_x86_no_ref_fallback();
    test_types();
    test_k4_scales();
    test_fp16();
    test_bf16();
    test_q8_0_format();
    const pk_kernels *list[8];
    int nl = pk_kernels_list(list, 8);
    for (int i = 0; i < nl; i++) {
        fprintf(stderr, "kernels: %s\n", list[i]->isa);
        test_kernels_dot(list[i]);
        test_kernels_quant(list[i]);
        test_kernels_float(list[i]);
        test_delta_step(list[i]);
    }
    return TEST_REPORT();
}
