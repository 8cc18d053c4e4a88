/* kernels_avx512_gemm.c - AVX-512 multi-token kernels for prompt
 * processing: each block of weights is loaded once and applied to several
 * tokens' activations. Entries left NULL fall back to the gemv kernel per
 * token (see kernels.h). */
#include "kernels.h"

const pk_gemm_fn pk_gemm_avx512[PK_TYPE_COUNT] = {0};
