/* quant/imat.h - importance-weighted row quantizers ("imatrix" quantization)
 * for the legacy and K-quant formats, and IQ2_XXS / IQ2_XS.
 *
 * Each function quantizes one row of n elements (n a multiple of the type's
 * block size) so as to minimise sum_j w_j * (x_j - q_j)^2, where the weights
 * come from imp[j] (per-column importance: the mean square of the inputs that
 * column multiplies, from an importance matrix) as ggml's quantize_row_*_impl
 * does it: w_j = imp[j] * sqrt(sigma2 + x_j^2), sigma2 the mean square of x
 * over the block (Q4_0..Q5_1: over the row), for Q6_K w_j = imp[j], and for
 * Q2_K w_j = imp[j] * |x_j| with the unweighted quantizer's search (see
 * quant/imat.c for why). Scale
 * and min searches are weighted least squares (finer scale grids than the
 * unweighted quantizers); the per-sub-block scales are then themselves
 * quantized with weighted fits (sub-block weights = sum of the element
 * weights).
 *
 * imp == NULL gives exactly the unweighted quantizer (pk_quantize_<type> of
 * quant/quant.h with imp NULL, i.e. ggml's quantize_row_<type>_ref). imp must hold n
 * finite non-negative values; all-zero importance in a sub-block gives a
 * valid (if arbitrary) encoding of it.
 */
#ifndef PK_QUANT_IMAT_H
#define PK_QUANT_IMAT_H

#include <stdint.h>

void pk_quantize_q2_K_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q3_K_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q4_K_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q5_K_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q6_K_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q4_0_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q4_1_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q5_0_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_q5_1_imat(const float *src, void *dst, int64_t n, const float *imp);
/* IQ2_XXS, IQ2_XS: ggml's quantize_iq2_xxs / quantize_iq2_xs, byte for byte
 * (llama-quantize requires an importance matrix for them; imp == NULL here
 * means every importance 1: there is no unweighted reference quantizer).
 * Thread-safe; the first call builds the grids' neighbour tables (~1 MB of
 * static memory, a few milliseconds). */
void pk_quantize_iq2_xxs_imat(const float *src, void *dst, int64_t n, const float *imp);
void pk_quantize_iq2_xs_imat(const float *src, void *dst, int64_t n, const float *imp);

#endif
