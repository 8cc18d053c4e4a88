/* kernels/gelu.h - GELU of a gate times an up projection, exactly as ggml's CPU
 * backend computes it (GGML_GELU_FP16, its default): the tanh form
 *   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
 * looked up in a table of every fp16 input, so for -10 < x < 10 the result
 * is f32(fp16(gelu_f32(f32(fp16(x))))) (fp16 rounding to nearest even, the
 * table entry evaluated in float32 with tanhf); x <= -10 gives 0, x >= 10
 * gives x. gemma4's reference outputs depend on these steps (the fixture
 * README: an exact GELU moves its logits by up to 0.25).
 */
#ifndef PK_GELU_H
#define PK_GELU_H

#include <stdint.h>

/* g[i] = gelu(g[i]) * u[i] for i < n, ggml's FP16-table semantics. */
void pk_gelu_mul(float *g, const float *u, int64_t n);
/* The table's value for one input: gelu(x) with ggml's semantics above. */
float pk_gelu_fp16(float x);
/* The table itself (made on first use): entry h = the result for the fp16
 * input of bits h, for the SIMD kernels' lookups (kernels/kernels.h gelu_mul). */
const float *pk_gelu_table(void);

#endif
