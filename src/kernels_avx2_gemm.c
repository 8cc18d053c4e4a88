/* kernels_avx2_gemm.c - AVX2 multi-token kernels for prompt processing.
 * Entries left NULL fall back to the gemv kernel per token (kernels.h).
 */
#include "kernels.h"

const pk_gemm_fn pk_gemm_avx2[PK_TYPE_COUNT] = {0};
