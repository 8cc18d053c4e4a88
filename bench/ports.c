/* ports.c - how many 256-bit integer operations one core of this machine
 * issues per cycle: vpmaddwd, vpmaddubsw and vpaddd alone (12 independent
 * chains, so latency does not bound them) and vpmaddwd + vpaddd mixed, the
 * two a prompt kernel's inner loop is made of. The clock comes from a chain
 * of dependent imul (3 cycles each on every x86 core since Sandy Bridge and
 * Zen 1). Not a test; x86-64 with AVX2 only. Pin it to a core:
 *
 *   gcc -O2 -mavx2 bench/ports.c -o build/ports && taskset -c 1 build/ports
 *
 * It tells the bound of a kernel that is made of these operations: for
 * instance 16 vpmaddwd + 16 vpaddd per 256 products need 16 cycles at 2
 * operations per cycle, 11 at 3. The last line is the int8 issue rate of
 * AVX2 without VNNI: a multiply-add of 32 unsigned x signed bytes is
 * vpmaddubsw + vpmaddwd + vpaddd (bench_gemm measures the same per second
 * and gives each kernel's share of it). Built with -mavxvnni as well, on a CPU
 * with AVX-VNNI it also times VEX vpdpbusd from registers, with a memory
 * operand, and fed each by its own vpbroadcastd load (as a prompt kernel
 * that broadcasts one token's 4 activations per instruction):
 *
 *   gcc -O2 -mavx2 -mavxvnni bench/ports.c -o build/ports && taskset -c 1 build/ports */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define N_ITER 50000000L
/* one instruction on each of the 12 accumulators, the operand %12 */
#define X12(op)                                                                         \
    op " %12,%0,%0\n" op " %12,%1,%1\n" op " %12,%2,%2\n" op " %12,%3,%3\n"         \
    op " %12,%4,%4\n" op " %12,%5,%5\n" op " %12,%6,%6\n" op " %12,%7,%7\n"         \
    op " %12,%8,%8\n" op " %12,%9,%9\n" op " %12,%10,%10\n" op " %12,%11,%11\n"
#define ACC "+x"(a[0]), "+x"(a[1]), "+x"(a[2]), "+x"(a[3]), "+x"(a[4]), "+x"(a[5]), \
            "+x"(a[6]), "+x"(a[7]), "+x"(a[8]), "+x"(a[9]), "+x"(a[10]), "+x"(a[11])
/* run BODY (24 instructions) N_ITER times; the operations per cycle */
#define RATE(BODY, ghz) ({                                                              \
    double t0_ = now();                                                                 \
    for (long i_ = 0; i_ < N_ITER; i_++) __asm__ volatile(BODY : ACC : "x"(b));        \
    24.0 * (double)N_ITER / ((now() - t0_) * (ghz) * 1e9);                              \
})

int main(void) {
    long x = 3, n = 300000000L;
    double t = now();
    __asm__ volatile("1: imul %0, %0\n imul %0, %0\n sub $2, %1\n jnz 1b" : "+r"(x), "+r"(n));
    double ghz = 3.0 * 300000000.0 / ((now() - t) * 1e9);
    __m256i a[12], b = _mm256_set1_epi16(3);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_epi16((short)i);
    printf("clock: %.2f GHz (dependent imul)\n", ghz);
    printf("vpmaddwd ymm:          %.2f per cycle\n", RATE(X12("vpmaddwd") X12("vpmaddwd"), ghz));
    printf("vpmaddubsw ymm:        %.2f per cycle\n", RATE(X12("vpmaddubsw") X12("vpmaddubsw"), ghz));
    printf("vpaddd ymm:            %.2f per cycle\n", RATE(X12("vpaddd") X12("vpaddd"), ghz));
    printf("vpmaddwd + vpaddd 1:1: %.2f per cycle\n", RATE(X12("vpmaddwd") X12("vpaddd"), ghz));
    {   /* vpmaddubsw + vpmaddwd + vpaddd: AVX2's int8 multiply-add without VNNI, 32 per group */
        __m256i c[6], o = _mm256_set1_epi16(1);
        for (int i = 0; i < 6; i++) c[i] = a[i];
#define MG(k) "vpmaddubsw %7,%6,%%ymm" #k "\n vpmaddwd %8,%%ymm" #k ",%%ymm" #k "\n vpaddd %%ymm" #k ",%" #k ",%" #k "\n"
        double t0 = now();
        for (long i = 0; i < N_ITER; i++)
            __asm__ volatile(MG(0) MG(1) MG(2) MG(3) MG(4) MG(5) MG(0) MG(1) MG(2) MG(3) MG(4) MG(5)
                             : "+x"(c[0]), "+x"(c[1]), "+x"(c[2]), "+x"(c[3]), "+x"(c[4]), "+x"(c[5])
                             : "x"(b), "x"(a[6]), "x"(o)
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5");
        double g = 12.0 * (double)N_ITER / ((now() - t0) * ghz * 1e9);
        printf("vpmaddubsw + vpmaddwd + vpaddd groups: %.2f per cycle = %.1f int8 multiply-adds per cycle\n", g, 32 * g);
        for (int i = 0; i < 6; i++) a[i] = _mm256_add_epi32(a[i], c[i]);
    }
#ifdef __AVXVNNI__
    if (__builtin_cpu_supports("avxvnni")) {
        static int buf[128] __attribute__((aligned(64)));
        for (int i = 0; i < 128; i++) buf[i] = (int)(0x01010101u * (unsigned)i);
#define VD(k) "%{vex%} vpdpbusd %12,%12,%" #k "\n"
#define VM(k, off) "%{vex%} vpdpbusd " #off "(%13),%12,%" #k "\n"
#define VB(k, off) "vpbroadcastd " #off "(%13),%%ymm15\n %{vex%} vpdpbusd %%ymm15,%12,%" #k "\n"
#define V12(M, a) M(0, a##0) M(1, a##1) M(2, a##2) M(3, a##3) M(4, a##4) M(5, a##5) \
                  M(6, a##6) M(7, a##7) M(8, a##8) M(9, a##9) M(10, a##10) M(11, a##11)
#define VRATE(BODY) ({                                                                  \
    double t0_ = now();                                                                 \
    for (long i_ = 0; i_ < N_ITER; i_++) __asm__ volatile(BODY : ACC : "x"(b), "r"(buf) : "xmm15"); \
    24.0 * (double)N_ITER / ((now() - t0_) * ghz * 1e9);                                \
})
#define R0 VD(0) VD(1) VD(2) VD(3) VD(4) VD(5) VD(6) VD(7) VD(8) VD(9) VD(10) VD(11)
#define M0 VM(0, 0) VM(1, 32) VM(2, 64) VM(3, 96) VM(4, 128) VM(5, 160) VM(6, 192) VM(7, 224) \
           VM(8, 256) VM(9, 288) VM(10, 320) VM(11, 352)
#define B0 VB(0, 0) VB(1, 36) VB(2, 72) VB(3, 108) VB(4, 144) VB(5, 180) VB(6, 216) VB(7, 252) \
           VB(8, 288) VB(9, 324) VB(10, 360) VB(11, 396)
        printf("vpdpbusd ymm, registers:        %.2f per cycle\n", VRATE(R0 R0));
        printf("vpdpbusd ymm, memory operand:   %.2f per cycle\n", VRATE(M0 M0));
        printf("vpbroadcastd load + vpdpbusd:   %.2f vpdpbusd per cycle\n", VRATE(B0 B0));
    }
#endif
    int s = (int)x;
    for (int i = 0; i < 12; i++) s += _mm256_extract_epi32(a[i], 0);
    return s == 0x7fffffff;   /* keeps the results live */
}
