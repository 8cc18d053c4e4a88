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
#include "xcache.h"

/* Called for each matrix-vector product with its input vector x (F32,
 * w->ne[0] floats) and the rows it reads; for expert tensors the expert is
 * row0 / w->ne[1]. Runs on the decoding thread, before the product. */
typedef void (*pk_matvec_observer)(void *ud, const pk_tensor *w, int64_t row0, int64_t nrows,
                                   const float *x);

/* Activation slots: a batch of input rows converted once to the format each
 * weight type's dot product wants, reused by every matrix that reads them.
 * PK_SLOT_EXP holds the hidden rows of all (token, expert) pairs. */
enum { PK_SLOT_X = 0, PK_SLOT_ATT = 1, PK_SLOT_FFN = 2, PK_SLOT_EXP = 3, PK_N_SLOTS = 4 };

typedef struct pk_slot {
    const float *src;             /* rows of F32 input, `stride` floats apart */
    int64_t n_rows, row_len, stride;
    int64_t cap;                  /* elements the buffers hold */
    uint64_t ready;               /* bitmask of prepared activation types */
    void *buf[PK_TYPE_COUNT];     /* converted rows, allocated at context creation */
} pk_slot;

/* The whole forward pass works on a batch of B <= n_batch tokens at
 * consecutive positions; decoding one token is B = 1. Buffers hold B rows. */
struct pk_context {
    const pk_model *m;
    int n_ctx;
    int n_batch;                  /* most tokens per forward pass */
    int pos;                      /* tokens in the sequence */
    pk_pool *pool;
    const pk_kernels *kern;
    pk_kv kv;

    /* activations, per token of the batch (sizes per row in comments) */
    float *x;                     /* (D) residual stream */
    float *xb;                    /* (D) normed input of a block */
    float *xb2;                   /* (D) block output */
    float *q;                     /* (n_head * hd) */
    float *qg;                    /* (2 * n_head * hd) joint q|gate projection (attn_gate) */
    float *gate;                  /* (n_head * hd) attention output gate */
    float *kb;                    /* (k_dim) per token: keys before the cache */
    float *vb;                    /* (v_dim) per token: values before a typed cache
                                     (NULL for an F32 cache, written in place) */
    int scratch_oom;                  /* set by a chunk (attention, DeltaNet) that had no scratch */
    float *att_out;               /* (n_head * hd_v) */
    float *hb, *hb2;              /* (max(F, F_shexp)) dense / shared-expert hidden */
    float *exp_h, *exp_h2;        /* (F_exp) per (token, expert) pair: B * k rows;
                                     exp_h2 shares exp_out's memory */
    float *exp_out;               /* (D) per pair, exp_cap pairs at a time */
    int exp_cap;
    float *dec_out;               /* (k + 1) x (D): one token's expert outputs and
                                     its shared expert's, decoding under a budget */
    float *arena;                 /* memory of q..att_out or of exp_h..exp_out */
    float *router;                /* (n_expert) */
    int *sel;                     /* (k) selected experts */
    float *sel_w;                 /* (k) their weights */
    float *pair_w;                /* [B * k] router weight of pair p */
    int *exp_count, *exp_off;     /* [n_expert] */
    int32_t *tok_idx;             /* [B * k] token of each pair, as matvec input rows */
    int32_t *pair_seq;            /* [B * k] 0, 1, 2, ... */
    float *rope_cos, *rope_sin;   /* (n_rot/2) per position of the context: a table */
    float *logits;                /* (n_vocab) for the rows asked for */
    /* Gated DeltaNet (hybrid archs) */
    float *ssm_qkv;               /* (channels) projection, then conv output */
    float *ssm_z;                 /* (v_heads * state) */
    float *ssm_ba;                /* (2 * v_heads) beta and alpha projections (hp->ssm_ba_*) */
    float *ssm_o;                 /* (v_heads * state) */
    float *ssm_scratch;           /* [v_heads][ssm_scratch_per]: chunked delta rule */
    size_t ssm_scratch_per;
    int cur_batch;                /* tokens in the batch being processed */

    pk_slot slot[PK_N_SLOTS];
    struct pk_mv *jobs;           /* [n_jobs_cap] scratch job list */
    const void **xptr;            /* [xptr_cap] matvec scratch: input row pointers */
    int *xptr_off;                /* [n_jobs_cap] */
    int n_jobs_cap;               /* most jobs per pk_matvec call */
    int64_t xptr_cap;             /* most input rows (sum of n_tok) per pk_matvec call */

    /* optional observer of every matrix input (importance matrix) */
    pk_matvec_observer observer;
    void *observer_ud;

    uint64_t n_tokens;            /* decoded since creation */
    uint64_t weight_bytes;        /* weight bytes read (counted in matvec) */
    uint64_t state_bytes;         /* KV / recurrent-state bytes read + written (forward.c, deltanet.c) */
    uint64_t mem_bytes;           /* allocated at creation */
    uint64_t guess_bytes;         /* of weight_bytes: routers read to guess the next
                                     layer's experts (moe.c, under a budget) */
    pk_xcache_stats xstats;       /* expert cache use (moe.c) */
    char io_msg[512];             /* the last expert read error */
};

/* ---- weight reads (matvec.c): the one place weights are read ----------- */

/* Rows [row0, row0 + nrows) of W times n_tok input rows of a slot:
 * y[t * y_stride + r] = W[row0 + r] . x[idx ? idx[t] : t]. */
typedef struct pk_mv {
    const pk_tensor *w;
    int64_t row0, nrows;
    int slot;                     /* activation slot holding the inputs */
    int n_tok;
    const int32_t *idx;           /* input rows (NULL: 0..n_tok-1) */
    float *y;
    int64_t y_stride;
} pk_mv;

/* Declare that slot s now holds n_rows rows of row_len floats, stride apart
 * (stride 0: row_len); conversions happen on demand in pk_matvec. */
void pk_act_set(pk_context *c, int s, const float *x, int64_t n_rows, int64_t row_len, int64_t stride);
/* Run all jobs as one parallel section (weight rows split across the pool's
 * threads); counts weight bytes: each weight row once per call. */
void pk_matvec(pk_context *c, const pk_mv *jobs, int n_jobs);
/* The same, with job j's rows read from data[j] (row row0 there: the expert
 * cache's copy of a slice) instead of its tensor's mapping where data[j] is
 * not NULL. */
void pk_matvec_from(pk_context *c, const pk_mv *jobs, int n_jobs, const void *const *data);
/* Dequantize row r of w into out (ne[0] floats); counts its bytes. */
void pk_get_row(pk_context *c, const pk_tensor *w, int64_t r, float *out);

/* What pk_context_new with these parameters would allocate (mem_bytes, as
 * pk_alloc_bytes counts it), its context size and KV bytes per token,
 * without starting threads or filling its tables (the memory plan). */
int pk_context_measure(const pk_model *m, const pk_context_params *params, uint64_t *mem_bytes, int *n_ctx,
                       uint64_t *kv_bytes_per_token, pk_error *err);

/* ---- blocks (forward.c, moe.c) ------------------------------------------ */
void pk_rmsnorm(float *out, const float *x, const float *w_f32, int n, float eps);
/* g[i] = silu(g[i]) * u[i] */
/* c->xb2 rows = FFN of c->xb rows through the routed experts (and shared
 * expert), for the c->cur_batch tokens of the batch (moe.c). With an expert
 * cache (a memory budget) the experts run in rounds of at most its slots
 * per layer; PK_ERR_IO (message in c->io_msg) if an expert read fails. */
int pk_moe_forward(pk_context *c, const pk_layer *L);
/* Prompt batches of at least PK_DN_CHUNK_MIN tokens use the chunked delta
 * rule, in chunks of PK_DN_CHUNK tokens. */
#define PK_DN_CHUNK_MIN 8
#define PK_DN_CHUNK 64
/* c->xb2 rows = Gated DeltaNet mixer of c->xb rows for layer il (deltanet.c). */
void pk_deltanet_forward(pk_context *c, const pk_layer *L, int il);
/* Process n <= n_batch tokens at positions pos.. pos+n-1. logits: NULL for
 * none, else n_vocab floats for the last token (all_rows == 0) or for each
 * token (all_rows == 1, n * n_vocab). */
int pk_forward_batch(pk_context *c, const int32_t *tokens, int n, float *logits, int all_rows);

#endif
