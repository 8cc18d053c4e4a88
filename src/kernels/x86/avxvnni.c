/* kernels/x86/avxvnni.c - the avxvnni variant's prompt kernels: the AVX2 gemm
 * drivers of kernels/x86/avx2_gemm.c built again with AVX-VNNI (VEX-encoded
 * vpdpbusd / vpdpwssd on 256-bit registers: Intel Alder Lake and later
 * client CPUs, Sapphire Rapids, AMD Zen 5), as pk_kernels_avxvnni_gemm. Where they
 * call x86_dpbusd (kernels/x86/ri8.h), one vpdpbusd replaces vpmaddubsw,
 * vpmaddwd and vpaddd; the rest of the variant (gemv, quantizers,
 * attention, sgemm) is the avx2 table's (kernels/kernels.c). Compiled with
 * -mavx2 -mfma -mf16c -mavxvnni; without AVX-VNNI the table is empty and
 * the variant is never usable.
 */
#define PK_VNNI256 1
#include "kernels/x86/avx2_gemm.c"
