/* kernels/kernels.h - the per-ISA compute kernels behind one table.
 *
 * A matrix row of weights of type T is multiplied with an activation vector
 * that has been converted once to T's vec_dot_type (F32 for F32 weights, F16
 * for F16, BF16 for BF16, Q8_0 for Q8_0, ...). Each ISA (scalar reference,
 * AVX2, AVX-512) fills the same table; pk_kernels_get() picks the best one the
 * CPU supports at run time from the one declared list in kernels/kernels.c. Results
 * of every variant are tested against the reference (tests/unit/test_kernels*.c,
 * tests/unit/test_gemm.c). POCKET_KERNELS=NAME forces a variant of that list.
 */
#ifndef PK_KERNELS_H
#define PK_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "core/common.h"
#include "quant/quant.h"

/* s = dot(row w of n weights of type T, x of n activations of vec_dot_type(T)) */
typedef void (*pk_vec_dot_fn)(int64_t n, float *s, const void *w, const void *x);
/* y[r] = dot(row r, x) for r in [0, nrows); rows are row_bytes apart. */
typedef void (*pk_gemv_fn)(int64_t n, int64_t nrows, float *y, const void *w,
                           size_t row_bytes, const void *x);
/* Several tokens at once (prompt processing): for t < ntok and r < nrows,
 * y[t * y_stride + r] = dot(row r, x[t]); rows are row_bytes apart, x[t]
 * points to token t's activations. Reads each weight once for all tokens. */
typedef void (*pk_gemm_fn)(int64_t n, int64_t nrows, int64_t ntok, float *y, int64_t y_stride,
                           const void *w, size_t row_bytes, const void *const *x);
/* F32: C[m * ldc + n] = sum over k < K of A[m * lda + k] * B[k * ldb + n],
 * for m < M, n < N (C overwritten). Every C element is one sum in order of
 * k, whatever M and N: a row's result does not depend on the other rows of
 * the call (batched and one-token attention agree bitwise). */
typedef void (*pk_sgemm_fn)(int M, int N, int K, const float *A, int64_t lda, const float *B,
                            int64_t ldb, float *C, int64_t ldc);
/* Convert n floats to an activation type (n a multiple of its block size).
 * Every variant is bit-exact with the reference from_float for finite input.
 * Q8_0 activations fed to vec_dot/gemv must keep qs in [-127, 127] (as every
 * Q8_0 quantizer produces; the AVX2 kernel relies on it); weights may use
 * the full int8 range. */
typedef void (*pk_quantize_fn)(const float *x, void *y, int64_t n);
/* One Gated DeltaNet recurrence step of one head (engine/kinds/deltanet.c): the state S
 * is d x d floats, [key i][value e]; with decay and beta of this token,
 *   S = decay S;  delta = beta (v - S^T k);  S += k delta^T;  o = S^T q.
 * Variants may reassociate (e.g. o = decay S0^T q + delta (k.q)): results
 * agree with the reference to float rounding. 1 <= d <= PK_MAX_SSM_STATE
 * (model/model.c checks ssm.state_size at load): variants keep rows of d
 * floats on the stack. */
#define PK_MAX_SSM_STATE 4096
typedef void (*pk_delta_step_fn)(float *S, int d, const float *q, const float *k, const float *v,
                                 float decay, float beta, float *o);

/* Attention over a typed KV cache (engine/kv.h): nk positions, one row of type T
 * per position, rows `stride` bytes apart, n elements of a head per row (n a
 * multiple of T's block size); queries and probabilities are F32.
 * kq (scores): S[m * lds + p] = dot(Q[m * ldq ...], key row p) for m < M,
 *   p < nk. Each element is one dot product computed the same way whatever
 *   M and nk are.
 * pv (values): O[m * ldo + e] = sum over p < nk of P[m * ldp + p] * value
 *   row p [e], for m < M, e < n (O overwritten). Each element is one sum in
 *   order of p, and a zero P adds nothing (exactly), so a query's result
 *   does not depend on the other queries of the call or on trailing zero
 *   probabilities: batched and one-token attention agree bitwise.
 * Type by type the numerics (what is exact, where rounding enters) are
 * stated in kernels/ref.c; variants reassociate within a row's dot
 * product (kq) and may fuse multiply-adds, agreeing with the reference to
 * float rounding. The engine's F32 keys use sgemm (keys transposed) and its
 * F16 keys att_kqt (below) instead. */
typedef void (*pk_att_kq_fn)(int M, int nk, int n, const float *Q, int64_t ldq, const void *K,
                             size_t stride, float *S, int64_t lds);
typedef void (*pk_att_pv_fn)(int M, int nk, int n, const float *P, int64_t ldp, const void *V,
                             size_t stride, float *O, int64_t ldo);
/* Scores over F16 keys kept in tiles of PK_KT positions, transposed (one kv
 * head: the element e of position p at K[((p / PK_KT) n + e) PK_KT + p %
 * PK_KT], engine/kv.h): S[m * lds + j] = dot(Q[m * ldq ...], key p0 + j)
 * for m < M, j < nk. Every score is one fused multiply-add chain over the n
 * elements in order from zero (vector lanes are positions): the same
 * whatever M, p0 and nk, so batched and one-token attention agree bitwise,
 * and every variant gives the reference's bits. Whole tiles are read: the
 * positions of the tiles holding p0 and p0 + nk - 1 must be readable
 * (their values do not matter). */
#define PK_KT 16
typedef void (*pk_att_kqt_fn)(int M, int p0, int nk, int n, const float *Q, int64_t ldq, const uint16_t *K,
                              float *S, int64_t lds);

typedef struct pk_kernels {
    const char *isa;                          /* variant name (kernels/kernels.c list) */
    pk_vec_dot_fn vec_dot[PK_TYPE_COUNT];     /* by weight type; NULL: unsupported */
    pk_gemv_fn gemv[PK_TYPE_COUNT];           /* by weight type; NULL: unsupported */
    pk_quantize_fn quantize[PK_TYPE_COUNT];   /* by activation type */
    /* optional multi-token kernels, by weight type; NULL: gemv per token */
    pk_gemm_fn gemm[PK_TYPE_COUNT];
    /* F32 matrix product for attention (scores and values) */
    pk_sgemm_fn sgemm;
    /* x[i] = exp(x[i] - sub) (softmax); g[i] = silu(g[i]) * u[i] (SwiGLU) */
    void (*exp_sub)(float *x, int64_t n, float sub);
    void (*silu_mul)(float *g, const float *u, int64_t n);
    /* g[i] = gelu(g[i]) * u[i] (GeGLU), ggml's FP16 table: bitwise
       pk_gelu_mul (kernels/gelu.h) in every variant */
    void (*gelu_mul)(float *g, const float *u, int64_t n);
    /* x[i] = cap tanh(x[i] / cap), the final logit soft-cap (x scaled by
       1 / cap first, as ggml); within 3e-7 of tanh relative, +-inf give
       +-cap, NaN stays NaN */
    void (*softcap)(float *x, int64_t n, float cap);
    pk_delta_step_fn delta_step;              /* Gated DeltaNet decode step */
    /* attention over F16 / Q8_0 caches, by cache element type; NULL: unsupported */
    pk_att_kq_fn att_kq[PK_TYPE_COUNT];
    pk_att_pv_fn att_pv[PK_TYPE_COUNT];
    pk_att_kqt_fn att_kqt;                    /* scores over F16 keys in transposed tiles */
} pk_kernels;

/* Every slot of pk_kernels but isa, for code that walks them all (the merge
 * in kernels/kernels.c, the tests): F(field) for one function, T(field) for
 * an array by type. A slot added to pk_kernels is added here too
 * (kernels/kernels.c checks that the sizes agree). */
#define PK_KERNEL_SLOTS(F, T)                                                          \
    T(vec_dot) T(gemv) T(quantize) T(gemm) F(sgemm) F(exp_sub) F(silu_mul) F(gelu_mul) \
    F(softcap) F(delta_step) T(att_kq) T(att_pv) F(att_kqt)

/* A row of the declared variant list (kernels/kernels.c). */
typedef struct pk_kernel_variant {
    const char *name;                 /* POCKET_KERNELS name, pocket --help's list */
    int (*cpu)(void);                 /* can this CPU and OS run it */
    int parent;                       /* index of the variant filling the slots the parts leave
                                         NULL (earlier in the list); -1: none */
    const pk_kernels *const *parts;   /* NULL-terminated partial tables, merged in order */
} pk_kernel_variant;

/* The i-th declared variant, or NULL past the end of the list. */
const pk_kernel_variant *pk_kernel_variant_get(int i);
/* The i-th declared variant's merged table whether or not this CPU can run
 * it (for tests that check the merge; call through it only if usable), or
 * NULL past the end of the list. */
const pk_kernels *pk_kernel_variant_merged(int i);

/* ---- calling an entry: the contracts above, checked -------------------------
 * Code outside kernels/ calls the entries of a table through these: each
 * checks its entry's preconditions with PK_ASSERT (on under ASSERTS=1,
 * `make sanitize`, `make fuzz`; nothing otherwise) and calls through the
 * table. Sizes are in elements, row and block sizes those of
 * quant/quant.h; "apart" means the two byte ranges do not overlap. */

static inline int pk_kern_apart(const void *a, size_t na, const void *b, size_t nb) {
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na == 0 || nb == 0 || x + na <= y || y + nb <= x;
}
/* n elements of type t are whole blocks */
static inline int pk_kern_blocks(int t, int64_t n) {
    const pk_type_traits *tt = pk_type_get(t);
    return tt && n >= 0 && n % tt->blck == 0;
}
/* bytes of a row of n activations for weights of type t */
static inline size_t pk_kern_act_bytes(int t, int64_t n) { return pk_row_size(pk_type_get(t)->vec_dot_type, n); }
/* floats spanned by rows r < R of n elements, ld apart */
static inline size_t pk_kern_span(int64_t R, int64_t n, int64_t ld) {
    return R > 0 && n > 0 ? (size_t)((R - 1) * ld + n) * sizeof(float) : 0;
}

static inline void pk_kern_vec_dot(const pk_kernels *k, int type, int64_t n, float *s, const void *w,
                                   const void *x) {
    PK_ASSERT(k->vec_dot[type] && pk_kern_blocks(type, n));
    k->vec_dot[type](n, s, w, x);
}
static inline void pk_kern_gemv(const pk_kernels *k, int type, int64_t n, int64_t nrows, float *y, const void *w,
                                size_t row_bytes, const void *x) {
    PK_ASSERT(k->gemv[type] && pk_kern_blocks(type, n) && nrows >= 0 && row_bytes >= pk_row_size(type, n));
    PK_ASSERT(pk_kern_apart(y, (size_t)nrows * sizeof(float), x, pk_kern_act_bytes(type, n)) &&
              pk_kern_apart(y, (size_t)nrows * sizeof(float), w, (size_t)nrows * row_bytes));
    k->gemv[type](n, nrows, y, w, row_bytes, x);
}
static inline void pk_kern_gemm(const pk_kernels *k, int type, int64_t n, int64_t nrows, int64_t ntok, float *y,
                                int64_t y_stride, const void *w, size_t row_bytes, const void *const *x) {
    PK_ASSERT(k->gemm[type] && pk_kern_blocks(type, n) && nrows >= 0 && ntok >= 1 &&
              row_bytes >= pk_row_size(type, n) && (ntok == 1 || y_stride >= nrows));
    PK_ASSERT(pk_kern_apart(y, pk_kern_span(ntok, nrows, y_stride), w, (size_t)nrows * row_bytes));
    k->gemm[type](n, nrows, ntok, y, y_stride, w, row_bytes, x);
}
/* type: the activation type converted to */
static inline void pk_kern_quantize(const pk_kernels *k, int type, const float *x, void *y, int64_t n) {
    PK_ASSERT(k->quantize[type] && pk_kern_blocks(type, n) &&
              pk_kern_apart(x, (size_t)n * sizeof(float), y, pk_row_size(type, n)));
    k->quantize[type](x, y, n);
}
static inline void pk_kern_sgemm(const pk_kernels *k, int M, int N, int K, const float *A, int64_t lda,
                                 const float *B, int64_t ldb, float *C, int64_t ldc) {
    PK_ASSERT(M >= 0 && N >= 0 && K >= 0 && lda >= K && ldb >= N && ldc >= N);
    PK_ASSERT(pk_kern_apart(C, pk_kern_span(M, N, ldc), A, pk_kern_span(M, K, lda)) &&
              pk_kern_apart(C, pk_kern_span(M, N, ldc), B, pk_kern_span(K, N, ldb)));
    k->sgemm(M, N, K, A, lda, B, ldb, C, ldc);
}
static inline void pk_kern_exp_sub(const pk_kernels *k, float *x, int64_t n, float sub) {
    PK_ASSERT(n >= 0);
    k->exp_sub(x, n, sub);
}
/* silu_mul, or gelu_mul if gelu */
static inline void pk_kern_act_mul(const pk_kernels *k, int gelu, float *g, const float *u, int64_t n) {
    PK_ASSERT(n >= 0 && pk_kern_apart(g, (size_t)n * sizeof(float), u, (size_t)n * sizeof(float)));
    (gelu ? k->gelu_mul : k->silu_mul)(g, u, n);
}
static inline void pk_kern_softcap(const pk_kernels *k, float *x, int64_t n, float cap) {
    PK_ASSERT(n >= 0 && cap > 0.0f);
    k->softcap(x, n, cap);
}
static inline void pk_kern_delta_step(const pk_kernels *k, float *S, int d, const float *q, const float *kk,
                                      const float *v, float decay, float beta, float *o) {
    const size_t ss = (size_t)d * (size_t)d * sizeof(float), vs = (size_t)d * sizeof(float);
    PK_ASSERT(d > 0 && pk_kern_apart(S, ss, q, vs) && pk_kern_apart(S, ss, kk, vs) && pk_kern_apart(S, ss, v, vs) &&
              pk_kern_apart(S, ss, o, vs));
    k->delta_step(S, d, q, kk, v, decay, beta, o);
}
/* The attention entries' contract: the entry exists for the cache's element
 * type, cache rows of n elements (whole blocks) stride bytes apart, M input
 * rows of n_in floats ld_in apart, M output rows of n_out ld_out apart, the
 * output apart from the input. */
static inline int pk_kern_att_ok(int have, int type, int M, int nk, int n, const float *in, int64_t ld_in,
                                 int64_t n_in, const float *out, int64_t ld_out, int64_t n_out, size_t stride) {
    return have && pk_kern_blocks(type, n) && M >= 0 && nk >= 0 && ld_in >= n_in && ld_out >= n_out &&
           stride >= pk_row_size(type, n) &&
           pk_kern_apart(out, pk_kern_span(M, n_out, ld_out), in, pk_kern_span(M, n_in, ld_in));
}
/* type: the cache's element type */
static inline void pk_kern_att_kq(const pk_kernels *k, int type, int M, int nk, int n, const float *Q, int64_t ldq,
                                  const void *K, size_t stride, float *S, int64_t lds) {
    PK_ASSERT(pk_kern_att_ok(k->att_kq[type] != NULL, type, M, nk, n, Q, ldq, n, S, lds, nk, stride));
    k->att_kq[type](M, nk, n, Q, ldq, K, stride, S, lds);
}
static inline void pk_kern_att_kqt(const pk_kernels *k, int M, int p0, int nk, int n, const float *Q, int64_t ldq,
                                   const uint16_t *K, float *S, int64_t lds) {
    PK_ASSERT(M >= 0 && p0 >= 0 && nk >= 0 && n > 0 && ldq >= n && lds >= nk &&
              pk_kern_apart(S, pk_kern_span(M, nk, lds), Q, pk_kern_span(M, n, ldq)));
    k->att_kqt(M, p0, nk, n, Q, ldq, K, S, lds);
}
static inline void pk_kern_att_pv(const pk_kernels *k, int type, int M, int nk, int n, const float *P, int64_t ldp,
                                  const void *V, size_t stride, float *O, int64_t ldo) {
    PK_ASSERT(pk_kern_att_ok(k->att_pv[type] != NULL, type, M, nk, n, P, ldp, nk, O, ldo, n, stride));
    k->att_pv[type](M, nk, n, P, ldp, V, stride, O, ldo);
}

/* The selected kernel table (decided once, thread-safe). */
const pk_kernels *pk_kernels_get(void);
/* A specific variant, or NULL if not compiled in or the CPU lacks it. */
const pk_kernels *pk_kernels_by_name(const char *isa);
/* The variants usable on this CPU, best last; returns the count. */
int pk_kernels_list(const pk_kernels **out, int max);

/* The partial tables of the ISA files, one per file: each holds only the
 * entries its file provides (the rest NULL). A variant (kernels/kernels.c)
 * is a NULL-terminated list of these, merged in order - a slot is taken
 * from the first part that has it (the parts of one variant never share a
 * slot; tests/unit/test_kernels.c checks) - then its parent fills the
 * slots still NULL. A file compiled without its ISA's flags (another CPU
 * family, or a compiler without them) defines an all-NULL table, and a
 * variant with such a part is never usable. */
extern const pk_kernels pk_kernels_ref_table;      /* kernels/ref.c: every entry */
extern const pk_kernels pk_kernels_avx2_table;     /* x86/avx2.c: vec_dot, gemv, quantize, gelu_mul */
extern const pk_kernels pk_kernels_avx2_gemm;      /* x86/avx2_gemm.c: gemm, sgemm, exp_sub, silu_mul, softcap */
extern const pk_kernels pk_kernels_avxvnni_gemm;   /* x86/avxvnni.c: avx2_gemm.c's gemm built with AVX-VNNI */
extern const pk_kernels pk_kernels_avx2_att;       /* x86/avx2_att.c: att_kq, att_pv */
extern const pk_kernels pk_kernels_avx2_deltanet;  /* x86/avx2_deltanet.c: delta_step */
extern const pk_kernels pk_kernels_avx512_table;   /* x86/avx512.c: vec_dot, gemv, quantize, sgemm, exp_sub, silu_mul */
extern const pk_kernels pk_kernels_avx512_gemm;    /* x86/avx512_gemm.c: gemm */
extern const pk_kernels pk_kernels_avx512_att;     /* x86/avx512_att.c: att_pv of F16 */
extern const pk_kernels pk_kernels_amx_gemm;       /* x86/amx.c: AMX-INT8 gemm */
extern const pk_kernels pk_kernels_neon_table;     /* arm/neon.c: ARMv8.0 Advanced SIMD */
extern const pk_kernels pk_kernels_neon_att;       /* arm/neon_att.c: att_kq, att_pv */
extern const pk_kernels pk_kernels_dotprod_table;  /* arm/dotprod.c: ARMv8.2 sdot/udot + fp16 */
extern const pk_kernels pk_kernels_i8mm_gemm;      /* arm/i8mm.c: smmla gemm */

/* The positions p0 <= p < p1 where some of the M probability rows P, P +
 * ldp, ... is nonzero (-0 counts as zero), in order into idx; returns their
 * count (kernels/ref.c; the SIMD att_pv kernels skip the others). */
int pk_att_live(int M, const float *P, int64_t ldp, int p0, int p1, int *idx);
/* AVX2 sgemm, exp_sub, silu_mul and softcap (kernels/x86/avx2_gemm.c), in the
 * avx2 table (and inherited by the tables that leave these entries NULL). */
void pk_avx2_sgemm(int M, int N, int K, const float *A, int64_t lda, const float *B, int64_t ldb,
                   float *C, int64_t ldc);
void pk_avx2_exp_sub(float *x, int64_t n, float sub);
void pk_avx2_silu_mul(float *g, const float *u, int64_t n);
void pk_avx2_softcap(float *x, int64_t n, float cap);
/* Asks Linux for the AMX tile state for this process (kernels/x86/amx.c);
 * 1 when granted. The amx variant is usable only then. */
int pk_amx_enable(void);

#endif
