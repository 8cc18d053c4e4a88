/* ab_gemm.c - A/B of two builds of one variant's gemm table on one matrix,
 * draws alternated A B A B within the process, so that a VM's clock and
 * steal time, which move the figures of separate runs by up to 2x, fall on
 * both alike. A is the library's table (build/libpocket.a); B is the same
 * source built again with other flags or from another revision, its table
 * renamed pk_kernels_B_gemm. Prints whether both give bitwise the same y, the mean
 * GFLOP/s of each (one core, thread CPU time) and the mean and sd of the
 * per-pair speed ratio B/A. Not a test. For instance, the avxvnni table of
 * the last commit as B:
 *
 *   mkdir -p /tmp/old/kernels/x86
 *   for f in avx2_gemm.c avx2_kquant.h ri8.h kri8.h; do
 *       git show HEAD:src/kernels/x86/$f > /tmp/old/kernels/x86/$f; done
 *   printf '#define PK_VNNI256 1\n#include "kernels/x86/avx2_gemm.c"\n' > /tmp/old/vnni.c
 *   gcc -std=c11 -O3 -D_GNU_SOURCE -I/tmp/old -Iinclude -Isrc -mavx2 -mfma -mf16c \
 *       -mavxvnni -Dpk_kernels_avxvnni_gemm=pk_kernels_B_gemm -c /tmp/old/vnni.c -o /tmp/B.o
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -pthread bench/ab_gemm.c \
 *       /tmp/B.o build/libpocket.a -o build/ab_gemm -lm -lpthread
 *   ./build/ab_gemm Q4_K avxvnni 10 512 2048 40
 *
 * (-I/tmp/old first: the old copies of the files it includes by their
 * kernels/x86/ paths are found before src/'s. For the avx2 table, B is
 * /tmp/old/kernels/x86/avx2_gemm.c itself with
 * -Dpk_kernels_avx2_gemm=pk_kernels_B_gemm and also
 * -Dpk_avx2_sgemm=pk_avx2_sgemm_B, and the same for pk_avx2_exp_sub,
 * pk_avx2_silu_mul and pk_avx2_softcap, which that file defines too).
 * NTOK 0 compares gemv (one token, the decode kernels) instead: B is then a
 * whole kernel table built from another revision, renamed
 * pk_kernels_B_table, e.g. the avx512 K-quant gemvs of the last commit:
 *
 *   mkdir -p /tmp/old && git show HEAD:src/kernels/x86/avx512.c > /tmp/old/kernels_avx512.c
 *   git show HEAD:src/kernels/x86/avx512_kquant.h > /tmp/old/kernels_avx512_kquant.h  (and the
 *       other headers it includes that changed)
 *   gcc -std=c11 -O3 -D_GNU_SOURCE -Iinclude -Isrc -mavx2 -mfma -mf16c -mavx512f -mavx512bw \
 *       -mavx512vl -mavx512dq -mavx512vnni -Dpk_kernels_avx512_table=pk_kernels_B_table \
 *       -c /tmp/old/kernels_avx512.c -o /tmp/B.o
 *   ./build/ab_gemm Q2_K avx512 0 64 512 400
 *
 * (kernels/x86/avx2.c with -Dpk_kernels_avx2_table=pk_kernels_B_table for the
 * avx2 gemvs; B's table is unmerged, so it must define the type's gemv).
 * Arguments: TYPE ISA NTOK ROWS N PAIRS [COLD_MB]. With COLD_MB, the
 * matrix is copied over COLD_MB MB and each call takes the next copy, so
 * the weights come from memory, as an expert's do in a prompt, instead of
 * from cache (choose more than the last-level cache). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kernels/kernels.h"
#include "bench_util.h"

/* whichever of the two B provides (the other is NULL) */
extern const pk_kernels pk_kernels_B_gemm __attribute__((weak));
extern const pk_kernels pk_kernels_B_table __attribute__((weak));

/* gemv (NTOK 0) through the gemm call's shape: y = W x[0] */
static pk_gemv_fn gv_a, gv_b;
static void gemv_a(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w, size_t rb,
                   const void *const *x) { (void)ntok; (void)ys; gv_a(n, nrows, y, w, rb, x[0]); }
static void gemv_b(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t ys, const void *w, size_t rb,
                   const void *const *x) { (void)ntok; (void)ys; gv_b(n, nrows, y, w, rb, x[0]); }

int main(int argc, char **argv) {
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: ab_gemm TYPE ISA NTOK ROWS N PAIRS [COLD_MB]\n");
        return 2;
    }
    int64_t ntok = atoll(argv[3]), nrows = atoll(argv[4]), n = atoll(argv[5]);
    int pairs = atoi(argv[6]), t = -1;
    for (int i = 0; i < PK_TYPE_COUNT; i++)
        if (pk_type_name(i) && !strcmp(pk_type_name(i), argv[1])) t = i;
    const pk_kernels *list[8], *K = NULL;
    int nl = pk_kernels_list(list, 8);
    for (int k = 0; k < nl; k++)
        if (!strcmp(list[k]->isa, argv[2])) K = list[k];
    int gemv = ntok == 0;
    if (gemv) {
        gv_a = t >= 0 && K ? K->gemv[t] : NULL;
        gv_b = t >= 0 && &pk_kernels_B_table ? pk_kernels_B_table.gemv[t] : NULL;
        ntok = 1;
    }
    if (t < 0 || !K || (gemv ? !gv_a || !gv_b : !K->gemm[t] || !&pk_kernels_B_gemm || !pk_kernels_B_gemm.gemm[t])) {
        fprintf(stderr, "ab_gemm: no %s for type '%s' in variant '%s' (usable here) and in B\n",
                gemv ? "gemv" : "gemm", argv[1], argv[2]);
        return 2;
    }
    const pk_type_traits *tt = pk_type_get(t);
    if (ntok < 0 || nrows < 1 || n < tt->blck || n % tt->blck || pairs < 2) {
        fprintf(stderr, "ab_gemm: NTOK >= 0, ROWS >= 1, N a multiple of %d, PAIRS >= 2\n", tt->blck);
        return 2;
    }
    size_t rb = pk_row_size(t, n);
    float *xf = malloc((size_t)(n * ntok) * sizeof(float));
    for (int64_t i = 0; i < n * ntok; i++) xf[i] = frnd();
    char *w = rand_rows(tt, n, nrows, rb);
    size_t mb = rb * (size_t)nrows, ncopy = 1;
    if (argc == 8) {   /* copies of the matrix over COLD_MB MB, used in turn */
        ncopy = (size_t)(atof(argv[7]) * 1e6 / (double)mb) + 1;
        char *c = malloc(mb * ncopy);
        if (!c) {
            fprintf(stderr, "ab_gemm: cannot allocate %s MB\n", argv[7]);
            return 2;
        }
        for (size_t i = 0; i < ncopy; i++) memcpy(c + i * mb, w, mb);
        free(w);
        w = c;
    }
    size_t ci = 0;   /* the copy the next call takes */
    int xt = tt->vec_dot_type;
    size_t xb = pk_row_size(xt, n);
    char *x = malloc(xb * (size_t)ntok);
    const void **xp = malloc((size_t)ntok * sizeof *xp);
    quant_tokens(K, xt, xf, n, ntok, x, xp);
    float *ya = malloc((size_t)(nrows * ntok) * sizeof(float)), *yb = malloc((size_t)(nrows * ntok) * sizeof(float));
    const pk_gemm_fn A = gemv ? gemv_a : K->gemm[t], B = gemv ? gemv_b : pk_kernels_B_gemm.gemm[t];
    A(n, nrows, ntok, ya, nrows, w, rb, (const void *const *)xp);   /* also the warm-up */
    B(n, nrows, ntok, yb, nrows, w, rb, (const void *const *)xp);
    printf("outputs %s\n", memcmp(ya, yb, (size_t)(nrows * ntok) * sizeof(float)) ? "differ" : "bitwise equal");
    double ga = 0, gb = 0, sr = 0, sr2 = 0, flop = 2.0 * (double)n * (double)nrows * (double)ntok / 1e9;
    for (int p = 0; p < pairs; p++) {
        double t0 = now();
        const char *wa = w + ci * mb, *wb = w + ((ci + 1) % ncopy) * mb;
        ci = (ci + 2) % ncopy;
        A(n, nrows, ntok, ya, nrows, wa, rb, (const void *const *)xp);
        double ta = now() - t0;
        t0 = now();
        B(n, nrows, ntok, yb, nrows, wb, rb, (const void *const *)xp);
        double tb = now() - t0;
        ga += flop / ta; gb += flop / tb;
        sr += ta / tb; sr2 += (ta / tb) * (ta / tb);
    }
    double mr = sr / pairs, sd = sqrt(fmax(0, (sr2 - pairs * mr * mr) / (pairs - 1)));
    printf("%s%s%s %s %lld x %lld x %lld: A %.1f B %.1f GFLOP/s; speed B/A %.3f sd %.3f (%d pairs)\n", ncopy > 1 ? "cold " : "", gemv ? "gemv " : "", argv[1],
           argv[2], (long long)ntok, (long long)nrows, (long long)n, ga / pairs, gb / pairs, mr, sd, pairs);
    free(w); free(xf); free(x); free(xp); free(ya); free(yb);
    return 0;
}
