/* kernels/arm/dotprod.c - the ARMv8.2 dot-product (sdot/udot) + fp16 kernel
 * table: phones since ~2018 (Cortex-A55/A75 and later), Apple M1 and
 * later, Raspberry Pi 5, Graviton 2 and later. Compiled with
 * -march=armv8.2-a+dotprod+fp16; only selected after kernels/kernels.c has checked
 * the CPU (asimddp, fphp, asimdhp). Built without those extensions it is an
 * empty table, never selected.
 *
 * Tuned for: single-token decode (bandwidth-bound). The kernels are the
 * NEON table's (kernels/arm/float_ops.h, kernels/arm/quant_ops.h: 4 rows per
 * activation block, vector scale decoding, no horizontal sums per block),
 * with the int8 products below done by sdot: 16 int8 pairs into 4 int32
 * lanes per instruction, exact. F16 rows are widened to f32 as in the NEON
 * table (fp16 fmla would lose the tests' float accuracy).
 */
#include <math.h>
#include <string.h>
#include "kernels/kernels.h"

#if defined(__ARM_NEON) && defined(__aarch64__) && defined(__ARM_FEATURE_DOTPROD) && \
    defined(__ARM_FEATURE_FP16_VECTOR_ARITHMETIC)
/* GCC's pre-allocation scheduler hoists the loads of the 4-row kernels and
 * then spills (measured: 25% more instructions for Q4_K); clang is unaffected */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-schedule-insns")
#endif
#include <arm_neon.h>

static inline __attribute__((always_inline)) int32x4_t qa_dot16(int8x16_t a, int8x16_t b) {
    return vdotq_s32(vdupq_n_s32(0), a, b);
}
static inline __attribute__((always_inline)) int32x4_t qa_dot32(int8x16_t a0, int8x16_t b0,
                                                                int8x16_t a1, int8x16_t b1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a0, b0), a1, b1);
}
#define qa_dot32s qa_dot32
static inline __attribute__((always_inline)) int32x4_t qa_dot32a(int32x4_t acc, int8x16_t a0, int8x16_t b0,
                                                                 int8x16_t a1, int8x16_t b1) {
    return vdotq_s32(vdotq_s32(acc, a0, b0), a1, b1);
}

#include "kernels/arm/float_ops.h"
#include "kernels/arm/quant_ops.h"

QA_TABLE(pk_kernels_dotprod_table, "dotprod")

#else  /* no dotprod + fp16 in this compiler's target: an empty table, never selected */
const pk_kernels pk_kernels_dotprod_table = { .isa = "dotprod" };
#endif
