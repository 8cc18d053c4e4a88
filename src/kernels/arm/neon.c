/* kernels/arm/neon.c - the ARMv8.0 Advanced SIMD (NEON) kernel table: every
 * AArch64 CPU (Cortex-A53/A55 class phones, Raspberry Pi 3/4). Built
 * without NEON (another CPU family) it is an empty table, never selected.
 *
 * Tuned for: single-token decode on in-order little cores, where a gemv
 * streams each weight matrix once per token. The kernels themselves are
 * written once, in kernels/arm/float_ops.h (F32/F16/BF16, sgemm, exp, SwiGLU,
 * F16/BF16 conversions) and kernels/arm/quant_ops.h (the block-quantized types
 * and Q8_0/Q8_1/Q8_K quantizers), over the int8 dot vocabulary below; see
 * there for the 4-row structure and the numerics (exact int32 within a
 * block, reassociated float across blocks, bit-exact quantizers).
 *
 * The int8 products, without sdot: smull / smlal2 form int16 sums of 2
 * products (qa_dot16, qa_dot32: below 2^15 in magnitude for |w| <= 128,
 * |x| <= 127) or of 4 (qa_dot32s, qa_dot32a: used only where the weights
 * are <= 63 in magnitude, e.g. 4-bit and 5-bit levels, Q2_K's scaled levels
 * <= 45), and saddlp / sadalp widen them into int32 lanes: exact.
 */
#include <math.h>
#include <string.h>
#include "kernels/kernels.h"

#if defined(__ARM_NEON) && defined(__aarch64__)
/* GCC's pre-allocation scheduler hoists the loads of the 4-row kernels and
 * then spills (measured: 25% more instructions for Q4_K); clang is unaffected */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif
#include <arm_neon.h>

static inline __attribute__((always_inline)) int32x4_t qa_dot16(int8x16_t a, int8x16_t b) {
    return vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b));
}
static inline __attribute__((always_inline)) int32x4_t qa_dot32(int8x16_t a0, int8x16_t b0,
                                                                int8x16_t a1, int8x16_t b1) {
    int16x8_t p0 = vmlal_high_s8(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)), a0, b0);
    int16x8_t p1 = vmlal_high_s8(vmull_s8(vget_low_s8(a1), vget_low_s8(b1)), a1, b1);
    return vpadalq_s16(vpaddlq_s16(p0), p1);
}
static inline __attribute__((always_inline)) int32x4_t qa_dot32s(int8x16_t a0, int8x16_t b0,
                                                                 int8x16_t a1, int8x16_t b1) {
    int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)), a0, b0);
    p = vmlal_high_s8(vmlal_s8(p, vget_low_s8(a1), vget_low_s8(b1)), a1, b1);
    return vpaddlq_s16(p);
}
static inline __attribute__((always_inline)) int32x4_t qa_dot32a(int32x4_t acc, int8x16_t a0, int8x16_t b0,
                                                                 int8x16_t a1, int8x16_t b1) {
    int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(a0), vget_low_s8(b0)), a0, b0);
    p = vmlal_high_s8(vmlal_s8(p, vget_low_s8(a1), vget_low_s8(b1)), a1, b1);
    return vpadalq_s16(acc, p);
}

#include "kernels/arm/float_ops.h"
#include "kernels/arm/quant_ops.h"

QA_TABLE(pk_kernels_neon_table, "neon")

#else  /* not AArch64 NEON: an empty table, never selected */
const pk_kernels pk_kernels_neon_table = { .isa = "neon" };
#endif
