/* test_gelu.c - ggml's FP16-table GELU (src/kernels/gelu.c) against its
 * definition computed here in double precision: for every fp16 input f in
 * (-10, 10) the result is the fp16 value nearest to the tanh-form gelu(f)
 * (either neighbour where gelu(f) lies within float32 rounding of a
 * midpoint: the table is evaluated in float32); inputs are rounded to fp16
 * first (to nearest, ties to even); x <= -10 gives 0 and x >= 10 gives x;
 * pk_gelu_mul = pk_gelu_fp16(g) * u element by element, and every kernel
 * variant's gelu_mul = pk_gelu_mul bitwise (every fp16 input, inputs
 * between them and around the cut-offs, NaN, infinities, odd lengths). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gelu.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "testhelp.h"

/* ggml_gelu_f32's expression evaluated as float32 does it, each operation
 * rounded to float (products of two floats are exact in double), tanh
 * correctly rounded; *w gets 1 + tanh(...), whose cancellation for x < 0
 * magnifies the last-bit differences of a libm's tanhf */
static double gelu_f32_emulated(float x, double *w) {
    const float a = 0.044715f, s = 0.79788456080286535587989211986876f;
    const float y = (float)(1.0 + (double)(float)((double)(float)((double)a * x) * x));
    const float z = (float)((double)(float)((double)s * x) * y);
    const float t = (float)tanh((double)z);
    const float ww = (float)(1.0 + (double)t);
    *w = ww;
    return (float)((double)(float)(0.5 * (double)x) * ww);
}

/* the fp16 neighbours lo <= v <= hi of a double v in fp16 range */
static void fp16_around(double v, double *lo, double *hi) {
    const float f = (float)v;
    uint16_t h = pk_fp32_to_fp16(f);
    double r = pk_fp16_to_fp32(h);
    /* step by one fp16 code toward v: codes are monotone within a sign */
    const int up = (r < v) == (r >= 0 || h == 0x8000);
    uint16_t h2 = r == v ? h : (uint16_t)(up ? h + 1 : h - 1);
    if (r < 0 || h == 0x8000) h2 = r == v ? h : (uint16_t)(r < v ? h - 1 : h + 1);
    double r2 = pk_fp16_to_fp32(h2);
    *lo = r < r2 ? r : r2;
    *hi = r < r2 ? r2 : r;
}

int main(void) {
    int checked = 0, either = 0, bad = 0;
    for (uint32_t h = 0; h < (1u << 16); h++) {
        const float f = pk_fp16_to_fp32((uint16_t)h);
        if (!(f > -10.0f && f < 10.0f)) continue;
        double w;
        const double g = gelu_f32_emulated(f, &w);
        const float got = pk_gelu_fp16(f);
        double lo, hi;
        fp16_around(g, &lo, &hi);
        /* 1 ulp of tanh (<= 2^-24 near +-1) over |1 + tanh|, plus the products' */
        const double mid = 0.5 * (lo + hi), slack = fabs(g) * (0x1p-23 / fabs(w) + 0x1p-21) + 0x1p-149;
        const int is_fp16 = pk_fp16_to_fp32(pk_fp32_to_fp16(got)) == got;
        int ok;
        if (lo == hi) ok = got == lo;
        else if (fabs(g - mid) <= slack) ok = got == lo || got == hi, either++;
        else ok = got == (g < mid ? lo : hi);
        if (!(ok && is_fp16)) {
            if (bad++ < 10)
                TEST_CHECK(0, "gelu(%.9g) = %.9g, the nearest fp16 values to %.12g are %.9g, %.9g", f, got, g, lo,
                           hi);
        }
        checked++;
    }
    TEST_CHECK(bad == 0, "%d of %d fp16 inputs give another value", bad, checked);
    TEST_CHECK(checked == 37376, "%d fp16 inputs in (-10, 10), expected 37376", checked);
    TEST_CHECK(either < 1000, "%d inputs within tanhf error of an fp16 midpoint (746 here: mostly x < -3)", either);
    fprintf(stderr, "gelu: %d fp16 inputs in (-10, 10) checked, %d within float rounding of a midpoint\n", checked,
            either);

    /* the cut-offs, and inputs between fp16 values rounded to nearest even */
    TEST_COND("x = -10 gives 0", pk_gelu_fp16(-10.0f) == 0.0f);
    TEST_COND("x < -10 gives 0", pk_gelu_fp16(-37.5f) == 0.0f);
    TEST_COND("x = 10 gives x", pk_gelu_fp16(10.0f) == 10.0f);
    TEST_COND("x > 10 gives x", pk_gelu_fp16(12.3456f) == 12.3456f);
    TEST_COND("x just below 10 uses the table", pk_gelu_fp16(9.99f) == pk_fp16_to_fp32(pk_fp32_to_fp16(9.99f)));
    const float a = 1.0f, b = 1.0f + 0x1p-10f;   /* adjacent fp16 values */
    TEST_COND("a tie rounds to the even fp16 input", pk_gelu_fp16(1.0f + 0x1p-11f) == pk_gelu_fp16(a));
    TEST_COND("above the tie: the upper input", pk_gelu_fp16(1.0f + 0x1p-11f + 0x1p-20f) == pk_gelu_fp16(b));
    TEST_COND("the two inputs differ", pk_gelu_fp16(a) != pk_gelu_fp16(b));

    /* the product form over a spread of inputs, cut-offs included */
    enum { N = 1000 };
    float g[N], u[N], want[N];
    for (int i = 0; i < N; i++) {
        g[i] = -12.0f + 24.0f * (float)i / N + 1e-4f * (float)(i % 7);
        u[i] = 0.5f + (float)(i % 13) / 7.0f;
        want[i] = pk_gelu_fp16(g[i]) * u[i];
    }
    pk_gelu_mul(g, u, N);
    int same = 1;
    for (int i = 0; i < N; i++) same &= g[i] == want[i];
    TEST_COND("pk_gelu_mul = pk_gelu_fp16(g) * u", same);

    /* every variant's gelu_mul against pk_gelu_mul, bit for bit */
    enum { NV = (1 << 16) + 4096 + 16 };
    float *x = malloc(NV * sizeof *x), *uu = malloc(NV * sizeof *uu), *ref = malloc(NV * sizeof *ref),
          *got = malloc(NV * sizeof *got);
    uint64_t r = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < NV; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        const float f = (float)((r >> 40) * 0x1p-24) * 2.0f - 1.0f;   /* [-1, 1) */
        if (i < (1 << 16)) x[i] = pk_fp16_to_fp32((uint16_t)i);       /* every fp16 value, NaNs and infs too */
        else if (i < (1 << 16) + 4096) x[i] = 12.0f * f;               /* between fp16 values */
        else x[i] = (float[]){-10.0f, 10.0f, nextafterf(-10.0f, 0.0f), nextafterf(10.0f, 0.0f), -INFINITY,
                              INFINITY, NAN, -0.0f, 0.0f, 1e-30f, -1e-30f, 65519.0f, 65520.0f, -7e4f, 3e38f,
                              -3e38f}[i - (1 << 16) - 4096];
        uu[i] = i % 97 == 0 ? -INFINITY : i % 89 == 0 ? NAN : i % 83 == 0 ? -0.0f : 4.0f * f;
    }
    const pk_kernels *list[8];
    const int nk = pk_kernels_list(list, 8);
    for (int v = 0; v < nk; v++) {
        TEST_CHECK(list[v]->gelu_mul != NULL, "%s: no gelu_mul", list[v]->isa);
        if (!list[v]->gelu_mul) continue;
        const int lens[] = {NV, NV - 1, 13, 7, 1};
        for (int l = 0; l < 5; l++) {
            const int n = lens[l], off = NV - n;   /* the last n: the odd inputs included */
            memcpy(ref, x + off, (size_t)n * sizeof *ref);
            memcpy(got, x + off, (size_t)n * sizeof *got);
            pk_gelu_mul(ref, uu + off, n);
            list[v]->gelu_mul(got, uu + off, n);
            int diff = 0;
            for (int i = 0; i < n; i++)
                if (memcmp(&ref[i], &got[i], sizeof(float)) && diff++ < 3)
                    fprintf(stderr, "  %s gelu_mul(%.9g) * %.9g = %.9g, pk_gelu_mul %.9g\n", list[v]->isa,
                            x[off + i], uu[off + i], got[i], ref[i]);
            TEST_CHECK(diff == 0, "%s gelu_mul, n %d: %d results differ from pk_gelu_mul", list[v]->isa, n, diff);
        }
    }
    free(x), free(uu), free(ref), free(got);
    return TEST_REPORT();
}
