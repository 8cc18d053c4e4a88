/* quant/mxfp4.c - MXFP4, the OCP microscaling FP4 format of the gpt-oss
 * experts (32 E2M1 values sharing one E8M0 exponent; layout in quant/quant.h):
 * scalar reference dequantize and quantize.
 *
 * Tuned for: nothing - this defines the format. Both are ggml's byte for
 * byte (dequantize_row_mxfp4 and quantize_row_mxfp4_ref of ggml-quants.c,
 * which gguf-py's quants.quantize(..., MXFP4) also writes):
 *   dequantize  w = level * 2^(e - 128): one float product, exact (levels
 *               are small integers, the scale a power of two; only levels
 *               8 and 12 at e >= 254 overflow to inf, as in ggml);
 *   quantize    per block amax = max |x| (NaN never counts), e =
 *               floorf(log2f(amax)) - 2 + 127 (0 when amax is 0), d =
 *               2^(e - 128), and each x gets the code whose |level * d - x|
 *               (in float) is smallest, the lowest code among equal ones:
 *               a value halfway between two levels takes the one nearer
 *               zero. No importance weights (ggml's quantize_mxfp4 ignores
 *               them too).
 * ggml converts the float exponent to uint8_t directly, which C leaves
 * undefined for amax < 2^-125 (a negative exponent) and amax = inf (x86-64
 * and AArch64 builds of ggml differ there). pocket defines it as x86-64
 * computes it, where the fixtures were made: the low byte of the int32
 * conversion, so amax = 2^-126 gives -1 -> e = 255, 2^-127 gives 254, and
 * inf gives 0. Such a block then encodes all zeros (d is huge against its
 * values), or it was not finite to begin with.
 */
#include <math.h>
#include <string.h>
#include "quant/quant.h"

const int8_t pk_mxfp4_values[16] = {
    0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12,
};

#define E1(e) PK_E8M0_HALF_BITS(e)
#define E4(e) E1(e), E1(e + 1), E1(e + 2), E1(e + 3)
#define E16(e) E4(e), E4(e + 4), E4(e + 8), E4(e + 12)
#define E64(e) E16(e), E16(e + 16), E16(e + 32), E16(e + 48)
const uint32_t pk_e8m0_half_bits[256] = { E64(0), E64(64), E64(128), E64(192) };

void pk_mxfp4_to_float(const void *src, float *y, int64_t n) {
    const pk_block_mxfp4 *b = src;
    for (int64_t i = 0; i < n / PK_QK_MXFP4; i++, y += PK_QK_MXFP4) {
        const float d = pk_e8m0_half(b[i].e);
        for (int j = 0; j < PK_QK_MXFP4 / 2; j++) {
            y[j] = (float)pk_mxfp4_values[b[i].qs[j] & 0xF] * d;
            y[j + 16] = (float)pk_mxfp4_values[b[i].qs[j] >> 4] * d;
        }
    }
}

/* The shared exponent of a block whose largest magnitude is amax (see the
 * header for the out-of-range cases). */
static uint8_t mxfp4_exponent(float amax) {
    if (!(amax > 0.0f)) return 0;
    const float e = floorf(log2f(amax)) - 2 + 127;   /* in [-24, 252], or +inf */
    if (!(e < 256.0f)) return 0;                      /* cvttss2si(inf) = 0x80000000 */
    return (uint8_t)((int32_t)e & 0xFF);
}

/* The code ggml's scan over all 16 levels picks for x at scale d: the first
 * code of least |level * d - x|. Only the levels of x's sign can win: for
 * x >= 0 (and NaN, which keeps code 0) a negative level -m errs by
 * round(m d + x), never less than its positive twin's round(|m d - x|),
 * which comes first in the scan; for x < 0 the positive levels err by
 * round(m d + |x|) >= |x|, code 0's error, so they never lead, and code 8
 * (-0) only ties code 0. Scanning codes 0..7 or 0, 9..15 is therefore the
 * same choice with half the work. */
static int mxfp4_code(float x, float d) {
    const int first = x < 0.0f ? 9 : 1;
    int best = 0;
    float best_err = fabsf(x);                     /* |0 * d - x| */
    for (int i = first; i < first + 7; i++) {
        const float err = fabsf((float)pk_mxfp4_values[i] * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

void pk_mxfp4_from_float(const float *src, void *dst, int64_t n) {
    pk_block_mxfp4 *b = dst;
    for (int64_t i = 0; i < n / PK_QK_MXFP4; i++) {
        const float *x = src + i * PK_QK_MXFP4;
        float amax = 0.0f;
        for (int j = 0; j < PK_QK_MXFP4; j++)
            if (amax < fabsf(x[j])) amax = fabsf(x[j]);
        const uint8_t e = mxfp4_exponent(amax);
        const float d = pk_e8m0_half(e);
        b[i].e = e;
        for (int j = 0; j < PK_QK_MXFP4 / 2; j++)
            b[i].qs[j] = (uint8_t)(mxfp4_code(x[j], d) | mxfp4_code(x[j + 16], d) << 4);
    }
}
