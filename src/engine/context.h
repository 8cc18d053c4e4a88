/* engine/context.h - one sequence being decoded: its KV cache, activation buffers,
 * thread pool and counters. The model it reads is shared and read-only.
 */
#ifndef PK_CONTEXT_H
#define PK_CONTEXT_H

#include <stdint.h>
#include "kernels/kernels.h"
#include "kernels/gelu.h"
#include "engine/kv.h"
#include "model/model.h"
#include "core/threads.h"
#include "model/xcache.h"

/* Called for each matrix-vector product with its input vector x (F32,
 * w->ne[0] floats) and the rows it reads; for expert tensors the expert is
 * row0 / w->ne[1]. Runs on the decoding thread, before the product. */
typedef void (*pk_matvec_observer)(void *ud, const pk_tensor *w, int64_t row0, int64_t nrows,
                                   const float *x);

/* Called for each routed expert of a layer a batch used, once its outputs
 * are computed: layer il, expert e, the n tokens routed to it, their router
 * weights w[0..n) (what each output is multiplied by before the sum) and
 * outputs out[i * D .. (i + 1) * D) (before the weight). Runs on the
 * decoding thread (expert saliency, offline/prune.c). */
typedef void (*pk_expert_observer)(void *ud, int il, int e, int n, const float *w, const float *out, int D);

/* Activation slots: a batch of input rows converted once to the format each
 * weight type's dot product wants, reused by every matrix that reads them.
 * PK_SLOT_X: a block's normed input (and the output head's); PK_SLOT_ATT:
 * a mixer's output, before its output projection; PK_SLOT_FFN: a dense or
 * shared-expert hidden layer; PK_SLOT_EXP: the hidden rows of all (token,
 * expert) pairs. Capacities: the kinds' scratch methods (model/blocks.h). */
enum { PK_SLOT_X = 0, PK_SLOT_ATT = 1, PK_SLOT_FFN = 2, PK_SLOT_EXP = 3, PK_N_SLOTS = 4 };

typedef struct pk_slot {
    const float *src;             /* rows of F32 input, `stride` floats apart */
    int64_t n_rows, row_len, stride;
    int64_t cap;                  /* elements the buffers hold */
    uint64_t ready;               /* bitmask of prepared activation types */
    void *buf[PK_TYPE_COUNT];     /* converted rows, allocated at context creation */
} pk_slot;

#define PK_PLAN_MAX 256        /* checkpoints one pk_context_plan_checkpoints may plan */

/* The per-phase profile (pk_context_profile, include/pocket.h): a phase is
 * a named span of the forward pass: its parts (embedding, norms, each mixer
 * and FFN kind, the output head), or parts of one of those (parent: its
 * name; e.g. a MoE's router and experts). pk_prof_begin before the span,
 * pk_prof_end after it: both cost nothing while profiling is off. */
#define PK_PROF_MAX 32
typedef struct pk_prof_entry {
    const char *name;             /* a string that outlives the context (a literal, a kind's name) */
    int parent;                   /* index of the phase this one is part of, -1: none */
    uint64_t calls, weight_bytes, state_bytes;
    double secs, wait_secs;       /* wall time; of it, the caller waiting for workers */
} pk_prof_entry;
typedef struct pk_prof_mark {
    double t, wait;
    uint64_t wb, sb;
} pk_prof_mark;

/* The whole forward pass works on a batch of B <= n_batch tokens at
 * consecutive positions; decoding one token is B = 1. Buffers hold B rows. */
struct pk_context {
    const pk_model *m;
    int n_ctx;
    int n_batch;                  /* most tokens per forward pass */
    int pos;                      /* tokens in the sequence */
    int32_t *tokens;              /* [n_ctx] the tokens of positions 0..pos-1 */
    /* recurrent-state checkpoints (engine/state.c), ascending positions:
       checkpoint i is at ckpt_pos[i], its conv states then recurrent states
       (kv.n_rec layers each) at ckpt_state + ckpt_slot[i] * ckpt_floats */
    int n_ckpt, ckpt_cap;
    int *ckpt_pos, *ckpt_slot;
    float *ckpt_state;
    size_t ckpt_floats;
    /* checkpoints planned (pk_context_plan_checkpoints): positions ahead of
       pos, ascending, taken as decodes reach them; the current batch's are
       marks: after mark_off[k] of its tokens, the DeltaNet layers copy their
       states into mark_data[k] (a checkpoint's data, engine/kinds/deltanet.c) */
    int n_plan, plan[PK_PLAN_MAX];
    int n_mark, mark_off[PK_PLAN_MAX];
    float *mark_data[PK_PLAN_MAX];
    pk_pool *pool;
    const pk_kernels *kern;
    pk_kv kv;

    /* activations, per token of the batch (sizes per row in comments) */
    float *x;                     /* (D) residual stream */
    float *xb;                    /* (D) normed input of a block */
    float *xb2;                   /* (D) block output */
    float *logits;                /* (n_vocab) for the rows asked for */
    /* the working memory of the block kinds (model/blocks.h): each lays out its
       buffers in it for the layer it runs (pk_arena_take); the largest
       need over the plan's kinds and layers (pk_scratch.arena) */
    unsigned char *arena;
    size_t arena_bytes;
    float *rope_cos[PK_MAX_ROPE], *rope_sin[PK_MAX_ROPE]; /* (n_rot/2) per position: m->rope[i]'s table */
    float *row;                   /* (row_cap) a one-row temporary of the decoding
                                     thread: a bias, norm weight, gate or scale row
                                     dequantized (pk_row_buf), live within one call */
    int64_t row_cap;
    int scratch_oom;              /* set by a chunk (attention, DeltaNet) that had no scratch */
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
    /* optional observer of every routed expert's outputs (expert saliency) */
    pk_expert_observer expert_observer;
    void *expert_observer_ud;

    uint64_t n_tokens;            /* decoded since creation */
    uint64_t weight_bytes;        /* weight bytes read (counted in matvec) */
    uint64_t state_bytes;         /* KV / recurrent-state bytes read + written (engine/forward.c, engine/kinds/deltanet.c) */
    uint64_t mem_bytes;           /* allocated at creation */
    uint64_t guess_bytes;         /* of weight_bytes: routers read to guess the next
                                     layer's experts (engine/kinds/moe.c, under a budget) */
    pk_xcache_stats xstats;       /* expert cache use (engine/kinds/moe.c) */
    int prof_on, n_prof;          /* the per-phase profile, in first-seen order */
    pk_prof_entry prof[PK_PROF_MAX];
    char io_msg[512];             /* the last expert read error */
};

static inline void pk_prof_begin(const pk_context *c, pk_prof_mark *m) {
    if (!c->prof_on) return;
    m->t = pk_time();
    m->wait = pk_pool_wait_secs(c->pool);
    m->wb = c->weight_bytes;
    m->sb = c->state_bytes;
}
/* Adds the span since m to phase `name`, part of phase `parent` (NULL:
 * none) (engine/context.c) */
void pk_prof_add(pk_context *c, const char *name, const char *parent, const pk_prof_mark *m);
static inline void pk_prof_end(pk_context *c, const char *name, const char *parent, const pk_prof_mark *m) {
    if (c->prof_on) pk_prof_add(c, name, parent, m);
}

/* What a block kind needs of a context for a forward over n_batch tokens
 * (pk_block_kind.scratch raises each field to its need; the context
 * allocates the maximum over the plan). */
typedef struct pk_scratch {
    int64_t arena;                /* bytes of working buffers (c->arena) */
    int64_t slot[PK_N_SLOTS];     /* elements each activation slot must hold */
    int64_t jobs;                 /* most jobs of one pk_matvec call */
    int64_t rows;                 /* most input rows (sum of n_tok) of one pk_matvec call */
    int64_t row;                  /* floats of c->row: the widest row a kind dequantizes
                                     through pk_row_buf (the context asks for D) */
} pk_scratch;

/* *need = max(*need, v) */
static inline void pk_raise(int64_t *need, int64_t v) {
    if (v > *need) *need = v;
}
/* A kind's need: arena bytes, slot `slot` (besides PK_SLOT_X, the blocks'
 * input, which the context sizes) to slot_cap elements, jobs and rows. */
static inline void pk_scratch_raise(pk_scratch *s, int64_t arena, int slot, int64_t slot_cap, int64_t jobs,
                                    int64_t rows) {
    pk_raise(&s->arena, arena);
    pk_raise(&s->slot[slot], slot_cap);
    pk_raise(&s->jobs, jobs);
    pk_raise(&s->rows, rows);
}

/* c->row for a row of n floats (the kind's scratch method raised
 * pk_scratch.row to n); not for chunk functions on the pool's workers. */
static inline float *pk_row_buf(pk_context *c, int64_t n) {
    PK_ASSERT(n >= 0 && n <= c->row_cap);
    (void)n;
    return c->row;
}

/* A bump allocator over c->arena: a kind's layout function takes its
 * buffers in order, the same way when it measures (base NULL: every
 * pointer NULL, `used` the bytes) and when it runs. Pieces are 64-byte
 * aligned. */
typedef struct pk_arena {
    unsigned char *base;
    size_t used;
} pk_arena;

static inline void *pk_arena_take(pk_arena *a, size_t n, size_t size) {
    void *p = a->base ? a->base + a->used : NULL;
    a->used += (n * size + 63) / 64 * 64;
    return p;
}

/* ---- weight reads (engine/matvec.c): the one place weights are read ----------- */

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
 * pk_alloc_bytes counts it), its context size, KV bytes per token and
 * recurrent-state checkpoints (count, bytes of one), without starting
 * threads or filling its tables (the memory plan). */
int pk_context_measure(const pk_model *m, const pk_context_params *params, uint64_t *mem_bytes, int *n_ctx,
                       uint64_t *kv_bytes_per_token, int *n_checkpoints, uint64_t *checkpoint_bytes,
                       pk_error *err);

/* ---- blocks (engine/forward.c and the kinds) ------------------------------------ */
/* g = act(g) * u, n floats (enum pk_act, model/arch.h): the kernels' SiLU or
 * ggml's FP16-table GELU (kernels/gelu.h) */
static inline void pk_act_mul(const pk_context *c, int act, float *g, const float *u, int64_t n) {
    pk_kern_act_mul(c->kern, act == PK_ACT_GELU, g, u, n);
}
void pk_rmsnorm(float *out, const float *x, const float *w_f32, int n, float eps);
/* rows x (n floats each, stride apart) normed with weight tensor w into
 * out; counts w's bytes once (one read per call, whatever the rows); a
 * weight not in F32 is dequantized into c->row (n <= c->row_cap) */
void pk_rmsnorm_rows(pk_context *c, float *out, const float *x, const pk_tensor *w, int n, int rows,
                     int64_t stride);
/* Rotate n_rot dims at v, v + stride, ... (n rows) in place for position
 * pos with rope table `rope` (c->rope_cos/sin) in style (enum
 * pk_rope_style) (engine/kinds/attention.c; engine/kinds/mla.c rotates its rope dims with it) */
void pk_rope_rows(const pk_context *c, int rope, int style, int n_rot, float *v, int n, int64_t stride, int pos);
/* Prompt batches of at least PK_DN_CHUNK_MIN tokens use the chunked delta
 * rule, in chunks of PK_DN_CHUNK tokens (engine/kinds/deltanet.c). */
#define PK_DN_CHUNK_MIN 8
#define PK_DN_CHUNK 64
/* Process n <= n_batch tokens at positions pos.. pos+n-1. logits: NULL for
 * none, else n_vocab floats for the last token (all_rows == 0) or for each
 * token (all_rows == 1, n * n_vocab). */
int pk_forward_batch(pk_context *c, const int32_t *tokens, int n, float *logits, int all_rows);

/* Planned checkpoints (engine/state.c): before a batch of nb tokens, the
 * marks inside it (each with a new checkpoint's data to fill); after it,
 * ok: the one at its end taken, the passed ones dropped from the plan; not
 * ok: the marks' checkpoints and the plan dropped. Where layer il's conv and
 * recurrent states lie in a checkpoint's data. */
void pk_ckpt_marks(pk_context *c, int nb);
void pk_ckpt_marks_done(pk_context *c, int ok);
size_t pk_ckpt_conv_offset(const pk_context *c, int il);
size_t pk_ckpt_ssm_offset(const pk_context *c, int il);

#endif
