/* kernels_neon.c - the ARMv8.0 Advanced SIMD (NEON) kernel table. Built
 * without NEON (another CPU family) it is an empty table, never selected.
 */
#include "kernels.h"

const pk_kernels pk_kernels_neon_table = { .isa = "neon" };
