/* context.h - one sequence being decoded: its KV cache, activation buffers,
 * thread pool and counters. The model it reads is shared and read-only.
 */
#ifndef PK_CONTEXT_H
#define PK_CONTEXT_H

#include <stdint.h>
#include "kernels.h"
#include "kv.h"
#include "model.h"
#include "threads.h"

/* Called for each matrix-vector product with its input vector x (F32,
 * w->ne[0] floats) and the rows it reads; for expert tensors the expert is
 * row0 / w->ne[1]. Runs on the decoding thread, before the product. */
typedef void (*pk_matvec_observer)(void *ud, const pk_tensor *w, int64_t row0, int64_t nrows,
                                   const float *x);

/* Activation slots: an input vector converted once to the format each
 * weight type's dot product wants, reused by every matrix that reads it. */
enum { PK_SLOT_X = 0, PK_SLOT_ATT = 1, PK_SLOT_FFN = 2, PK_SLOT_EXP0 = 3 };

struct pk_context {
    const pk_model *m;
    int n_ctx;
    int pos;                      /* tokens in the sequence */
    pk_pool *pool;
    const pk_kernels *kern;
    pk_kv kv;

    /* activations (sizes in comments) */
    float *x;                     /* (D) residual stream */
    float *xb;                    /* (D) normed input of a block */
    float *xb2;                   /* (D) block output */
    float *q;                     /* (n_head * hd) */
    float *qg;                    /* (2 * n_head * hd) joint q|gate projection (attn_gate) */
    float *gate;                  /* (n_head * hd) attention output gate */
    float *k, *v;                 /* (n_head_kv * hd), (n_head_kv * hd_v) */
    float *att;                   /* (n_head * n_ctx) attention scores */
    float *att_out;               /* (n_head * hd_v) */
    float *hb, *hb2;              /* (max(F, k * F_exp, F_shexp)) FFN hidden */
    float *exp_out;               /* (k * D) per selected expert outputs */
    float *router;                /* (n_expert) */
    int *sel;                     /* (k) selected experts */
    float *sel_w;                 /* (k) their weights */
    float *rope_cos, *rope_sin;   /* (n_rot/2) for the current position */
    float *logits;                /* (n_vocab) */
    /* Gated DeltaNet (hybrid archs) */
    float *ssm_qkv;               /* (channels) projection, then conv output */
    float *ssm_z;                 /* (v_heads * state) */
    float *ssm_beta, *ssm_alpha;  /* (v_heads) */
    float *ssm_o;                 /* (v_heads * state) */

    int n_slots;
    int64_t slot_cap;             /* elements each slot holds */
    void **slot;                  /* [n_slots * PK_TYPE_COUNT] lazily allocated */
    const float **slot_src;       /* [n_slots] vector a slot was prepared from */
    uint64_t *slot_ready;         /* [n_slots] bitmask of prepared activation types */

    /* optional observer of every matrix input (importance matrix) */
    pk_matvec_observer observer;
    void *observer_ud;

    uint64_t n_tokens;            /* decoded since creation */
    uint64_t weight_bytes;        /* weight bytes read (counted in matvec) */
};

/* ---- weight reads (matvec.c): the one place weights are read ----------- */

/* One matrix-vector product: y[r] = W[row0 + r] . x for r in [0, nrows). */
typedef struct pk_mv {
    const pk_tensor *w;
    int64_t row0, nrows;
    int slot;                     /* activation slot holding x (see pk_act_set) */
    float *y;
} pk_mv;

/* Declare that slot s now holds vector x (n elements); conversions to
 * activation types happen on demand in pk_matvec. */
void pk_act_set(pk_context *c, int s, const float *x);
#define PK_MAX_JOBS 128   /* 2 * the largest top-k the loader accepts */
/* Run all jobs (n_jobs <= PK_MAX_JOBS), rows split across the pool's threads; counts weight bytes. */
void pk_matvec(pk_context *c, const pk_mv *jobs, int n_jobs);
/* Dequantize row r of w into out (ne[0] floats); counts its bytes. */
void pk_get_row(pk_context *c, const pk_tensor *w, int64_t r, float *out);

/* ---- blocks (forward.c, moe.c) ------------------------------------------ */
void pk_rmsnorm(float *out, const float *x, const float *w_f32, int n, float eps);
/* out = w-weighted RMSNorm of x, w a (possibly non-F32) norm tensor */
void pk_rmsnorm_t(pk_context *c, float *out, const float *x, const pk_tensor *w, int n);
/* g[i] = silu(g[i]) * u[i] */
void pk_silu_mul(float *g, const float *u, int n);
/* c->xb2 = FFN of c->xb through the routed experts (and shared expert). */
void pk_moe_forward(pk_context *c, const pk_layer *L);
/* c->xb2 = Gated DeltaNet mixer of c->xb for layer il (deltanet.c). */
void pk_deltanet_forward(pk_context *c, const pk_layer *L, int il);
/* One token at the next position; computes logits if want_logits. */
int pk_forward_token(pk_context *c, int32_t token, int want_logits);

#endif
