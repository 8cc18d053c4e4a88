/* kernels_i8mm.c - multi-token kernels of the i8mm variant (ARMv8.6 smmla /
 * ummla int8 matrix products), merged over the dotprod table. Entries left
 * NULL fall back to the dotprod gemv per token.
 */
#include "kernels.h"

const pk_gemm_fn pk_gemm_i8mm[PK_TYPE_COUNT] = {0};
