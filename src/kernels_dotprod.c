/* kernels_dotprod.c - the ARMv8.2 dot-product (sdot/udot) + fp16 kernel
 * table. Built without those extensions it is an empty table, never selected.
 */
#include "kernels.h"

const pk_kernels pk_kernels_dotprod_table = { .isa = "dotprod" };
