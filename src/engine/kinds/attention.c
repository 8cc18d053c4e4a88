/* engine/kinds/attention.c - the attention mixer kind: causal multi-head attention with
 * grouped key/value heads over the context's KV cache, for a batch of
 * tokens at consecutive positions.
 *
 * For the layer input h of each token, with the layer's shape (model/blocks.h):
 *   q = attn_q . h (+ bias),  k = attn_k . h (+ bias),  v = attn_v . h (+ bias)
 *   [v_from_k: no attn_v, v = k's projection;  v_norm: v RMS-normed per head
 *    without weight]
 *   [out_gate: attn_q's rows are [q_h | gate_h] per head]
 *   [qk_norm: q, k RMS-normed per head with attn_q_norm / attn_k_norm, or
 *    each over its full width (all heads at once)]
 *   q, k rotated (rope: the first n_rot dims of each head)
 *   k, v appended to the cache; per query head, over its kv head's keys
 *   o = softmax(scale q K^T) V     [out_gate: o *= sigmoid(gate)]
 *     [window W: a query at position i sees the keys j > i - W only]
 *     [sinks: the softmax denominator gets exp(sink_h) too, per q head h]
 *   out = attn_output . o (+ bias)
 * The cache holds every attention layer's keys and values in their types
 * (engine/kv.h); the products over it are the kernels' (sgemm for F32, att_kq /
 * att_pv for F16 and Q8_0).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "engine/context.h"

/* The kind's buffers in the context's arena, for a batch of B tokens. */
typedef struct att_ws {
    float *q;        /* (n_head * hd) */
    float *qg;       /* (2 * n_head * hd) joint q|gate projection (out_gate) */
    float *gate;     /* (n_head * hd) output gate (out_gate) */
    float *att_out;  /* (n_head * hd_v) */
    float *kb;       /* (k_dim) keys before the cache */
    float *vb;       /* (v_dim) values before a typed cache (NULL for an F32
                        cache: written in place) */
    float *sinks;    /* [n_head] sink logits (sinks; else NULL) */
} att_ws;

static size_t att_layout(const pk_context *c, const pk_attn_shape *a, void *base, att_ws *w) {
    pk_arena ar = {base, 0};
    const size_t B = (size_t)c->n_batch, qd = (size_t)a->n_head * a->head_dim;
    w->q = pk_arena_take(&ar, B * qd, sizeof(float));
    w->qg = a->out_gate ? pk_arena_take(&ar, B * 2 * qd, sizeof(float)) : NULL;
    w->gate = a->out_gate ? pk_arena_take(&ar, B * qd, sizeof(float)) : NULL;
    w->att_out = pk_arena_take(&ar, B * a->n_head * a->head_dim_v, sizeof(float));
    w->kb = pk_arena_take(&ar, B * a->n_head_kv * a->head_dim, sizeof(float));
    w->vb = c->kv.type_v != PK_TYPE_F32 ? pk_arena_take(&ar, B * a->n_head_kv * a->head_dim_v, sizeof(float))
                                        : NULL;
    w->sinks = a->sinks ? pk_arena_take(&ar, (size_t)a->n_head, sizeof(float)) : NULL;
    return ar.used;
}

/* rows of y (n floats, stride apart) += bias b, if the layer has it (read
 * once into c->row, counted) */
static void add_bias(pk_context *c, float *y, const pk_tensor *b, int n, int rows, int64_t stride) {
    if (!b->data) return;
    float *tmp = pk_row_buf(c, n);
    pk_get_row(c, b, 0, tmp);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) y[r * stride + i] += tmp[i];
}

void pk_rope_rows(const pk_context *c, int rope, int style, int n_rot, float *v, int n, int64_t stride, int pos) {
    const int half = n_rot / 2;
    const int neox = style == PK_ROPE_NEOX;
    const float *cs = c->rope_cos[rope] + (size_t)pos * half, *sn = c->rope_sin[rope] + (size_t)pos * half;
    for (int h = 0; h < n; h++) {
        float *p = v + (size_t)h * stride;
        for (int i = 0; i < half; i++) {
            int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            float x0 = p[i0], x1 = p[i1];
            p[i0] = x0 * cs[i] - x1 * sn[i];
            p[i1] = x0 * sn[i] + x1 * cs[i];
        }
    }
}

/* Rotate the first n_rot dims of each of n_heads heads of size hd in place,
 * for position pos (the layer's rope table, made in engine/context.c). */
static void rope_apply(const pk_context *c, const pk_attn_shape *a, float *v, int n_heads, int hd, int pos) {
    pk_rope_rows(c, a->rope, a->rope_style, a->n_rot, v, n_heads, hd, pos);
}

typedef struct att_task {
    pk_context *c;
    const pk_attn_shape *a;
    const att_ws *w;
    int layer, pos0, n;
    int tb, n_tb;                 /* tokens per chunk, chunks per kv head */
    const float *sinks;           /* (n_head) sink logits, or NULL */
} att_task;

/* Positions per block of att_run's online softmax: a chunk's scores are
 * M x ATT_BLOCK floats however long the context (512 KiB for POCKET-35B's
 * 128 rows), and the kernels read each block's keys and values from
 * memory once per chunk, reusing them from the caches for all M rows.
 * Blocks start at multiples of ATT_BLOCK, the same for every chunk shape.
 * Why 1024: each kernel call starts on keys its own prefetch has not
 * reached (kernels/x86/avx2_att.c), which a decoded token's few row tiles
 * cannot hide, and the larger scores buffer costs little (each score is
 * written once per 256 multiply-adds). Measured with bench/bench_att.c on
 * a shared Zen 3 (bench/results/2026-12-07-epyc-zen3-attention.md): at
 * load 1.7, F16, 1024 against 256: a decoded token (M 8) 1.04-1.23x, a
 * prompt chunk (M 128) 0.97-1.01x; under load 7 the runs disagreed by
 * more than that (0.7-1.3x). */
enum { ATT_BLOCK = 1024 };

/* per query row of a chunk: the running maximum and denominator of its
 * softmax, and the factor of the block that rescales its sums */
typedef struct att_row {
    double l;        /* sum of exp(score - mx) over the positions seen (and the sink's) */
    float mx;        /* the largest scaled score seen (or the sink logit); -inf before */
    float alpha;     /* exp(old mx - new mx) of this block */
    int live;        /* the row sees some position of this block */
} att_row;

/* max of x[0..n-1] (n >= 1), in 8 interleaved lanes (vectorisable) */
static float max_row(const float *x, int n) {
    float m8[8];
    for (int i = 0; i < 8; i++) m8[i] = x[0];
    int p = 0;
    for (; p + 8 <= n; p += 8)
        for (int i = 0; i < 8; i++) m8[i] = x[p + i] > m8[i] ? x[p + i] : m8[i];
    for (; p < n; p++) m8[0] = x[p] > m8[0] ? x[p] : m8[0];
    float m = m8[0];
    for (int i = 1; i < 8; i++) m = m8[i] > m ? m8[i] : m;
    return m;
}

/* sum of x[0..n-1] in double, in 8 interleaved lanes summed pairwise: the
 * same order for the same n */
static double sum_row(const float *x, int n) {
    double s8[8] = {0};
    int p = 0;
    for (; p + 8 <= n; p += 8)
        for (int i = 0; i < 8; i++) s8[i] += (double)x[p + i];
    for (; p < n; p++) s8[p % 8] += (double)x[p];
    return ((s8[0] + s8[1]) + (s8[2] + s8[3])) + ((s8[4] + s8[5]) + (s8[6] + s8[7]));
}

/* One chunk: kv head g and tokens b0..b1-1 of the batch, i.e. the M = (b1 -
 * b0) * group query rows that share g's keys and values. Token b (position
 * pos0 + b) attends over positions 0..pos0+b (the last W of them under a
 * window W). The positions are taken in blocks of ATT_BLOCK (from the
 * block holding the chunk's first visible position, and in it from that
 * position), each as matrix products over the block's keys and values:
 *   S = Q K^T   (Q scaled by the layer's scale; an F32 cache holds K
 *                transposed, for sgemm; an F16 cache each kv head's keys in
 *                transposed tiles of PK_KT positions, for att_kqt; a Q8_0
 *                cache each kv head's keys by position, for att_kq);
 *   per row (online softmax): the block's largest score among the row's
 *       positions raises the running maximum mx; P = exp(S - mx) on its
 *       positions, 0 elsewhere; l = l alpha + sum P (in double), alpha =
 *       exp(old mx - mx);
 *   O = O alpha + P V   (V read in place, in its type: sgemm or att_pv);
 * and at the end O /= l. A block none of whose positions a row sees leaves
 * the row untouched. Every element of a product is a sum in order over its
 * k (pk_sgemm_fn; att_kq / att_pv promise the same independence from M,
 * kernels/kernels.h), zero probabilities add exact zeros, and the blocks
 * and the per-row operations are the same whichever rows share the chunk,
 * so a query's result does not depend on the other queries of its chunk:
 * batched and one-token attention agree bitwise. */
static void att_run(void *arg, int chunk) {
    const att_task *t = arg;
    pk_context *c = t->c;
    const pk_attn_shape *a = t->a;
    const int hd = a->head_dim, hdv = a->head_dim_v, group = a->n_head / a->n_head_kv;
    const int qd = a->n_head * hd, od = a->n_head * hdv;
    /* the largest (latest) token blocks first, for balance */
    const int g = chunk % a->n_head_kv, blk = t->n_tb - 1 - chunk / a->n_head_kv;
    const int b0 = blk * t->tb, b1 = b0 + t->tb < t->n ? b0 + t->tb : t->n;
    const int M = (b1 - b0) * group, nk = t->pos0 + b1;
    const size_t nQ = (size_t)M * hd, nS = (size_t)M * ATT_BLOCK, nO = (size_t)M * hdv;
    float *Q = pk_thread_scratch(sizeof(float) * (nQ + nS + 2 * nO) + sizeof(att_row) * (size_t)M);
    if (!Q) { c->scratch_oom = 1; return; }
    float *S = Q + nQ, *O = S + nS, *Ob = O + nO;
    att_row *row = (att_row *)(Ob + nO);
    for (int b = b0; b < b1; b++) {   /* the group's heads of token b are adjacent */
        const float *q = t->w->q + (size_t)b * qd + (size_t)g * group * hd;
        float *dst = Q + (size_t)(b - b0) * group * hd;
        for (int i = 0; i < group * hd; i++) dst[i] = q[i] * a->scale;
    }
    memset(O, 0, nO * sizeof(float));
    for (int m = 0; m < M; m++) {   /* a sink counts as a position seen first */
        const float sink = t->sinks ? t->sinks[g * group + m % group] : -INFINITY;
        row[m] = (att_row){.l = t->sinks ? 1.0 : 0.0, .mx = sink, .alpha = 1.0f, .live = 0};
    }
    const pk_kv *kv = &c->kv;
    /* the chunk's first visible position: its first row's (under a window) */
    const int first0 = a->window && t->pos0 + b0 - a->window + 1 > 0 ? t->pos0 + b0 - a->window + 1 : 0;
    for (int p0 = first0 / ATT_BLOCK * ATT_BLOCK; p0 < nk; p0 += ATT_BLOCK) {
        /* the block's positions [s0, s0 + bk) that some row sees (those
           before first0 would add zeros to every row) */
        const int s0 = p0 > first0 ? p0 : first0, bk = (nk - p0 < ATT_BLOCK ? nk : p0 + ATT_BLOCK) - s0;
        if (kv->type_k == PK_TYPE_F32)
            pk_kern_sgemm(c->kern, M, bk, hd, Q, hd, pk_kv_kt(kv, t->layer, g * hd) + s0, kv->n_ctx, S, ATT_BLOCK);
        else if (kv->type_k == PK_TYPE_F16)
            pk_kern_att_kqt(c->kern, M, s0, bk, hd, Q, hd, pk_kv_kt16(kv, t->layer, g), S, ATT_BLOCK);
        else   /* a typed cache, read in its type (kernels/kernels.h) */
            pk_kern_att_kq(c->kern, kv->type_k, M, bk, hd, Q, hd, pk_kv_k(kv, t->layer, g, s0),
                           kv->att[t->layer].k_head, S, ATT_BLOCK);
        for (int m = 0; m < M; m++) {
            const int last = t->pos0 + b0 + m / group;
            const int first = a->window && last - a->window + 1 > 0 ? last - a->window + 1 : 0;
            const int lo = first > s0 ? first - s0 : 0, hi = last - s0 < bk - 1 ? last - s0 : bk - 1;
            float *sc = S + (size_t)m * ATT_BLOCK;
            att_row *r = &row[m];
            r->live = lo <= hi;
            if (!r->live) continue;
            const float bmax = max_row(sc + lo, hi + 1 - lo), mx = bmax > r->mx ? bmax : r->mx;
            r->alpha = expf(r->mx - mx);
            r->mx = mx;
            pk_kern_exp_sub(c->kern, sc + lo, hi + 1 - lo, mx);
            r->l = r->l * r->alpha + sum_row(sc + lo, hi + 1 - lo);
            for (int p = 0; p < lo; p++) sc[p] = 0.0f;
            for (int p = hi + 1; p < bk; p++) sc[p] = 0.0f;
        }
        if (kv->type_v == PK_TYPE_F32)
            pk_kern_sgemm(c->kern, M, hdv, bk, S, ATT_BLOCK, pk_kv_v(kv, t->layer, s0) + (size_t)g * hdv,
                          kv->att[t->layer].v_dim, Ob, hdv);
        else
            pk_kern_att_pv(c->kern, kv->type_v, M, bk, hdv, S, ATT_BLOCK, pk_kv_vh(kv, t->layer, g, s0),
                           kv->att[t->layer].v_head, Ob, hdv);
        for (int m = 0; m < M; m++) {
            if (!row[m].live) continue;
            float *o = O + (size_t)m * hdv;
            const float *ob = Ob + (size_t)m * hdv, al = row[m].alpha;
            for (int e = 0; e < hdv; e++) o[e] = o[e] * al + ob[e];
        }
    }
    for (int m = 0; m < M; m++) {
        const float inv = (float)(1.0 / row[m].l);
        float *o = O + (size_t)m * hdv;
        for (int e = 0; e < hdv; e++) o[e] *= inv;
    }
    for (int b = b0; b < b1; b++)
        memcpy(t->w->att_out + (size_t)b * od + (size_t)g * group * hdv, O + (size_t)(b - b0) * group * hdv,
               (size_t)group * hdv * sizeof(float));
}

static int att_forward(pk_context *c, const pk_block *bk, const pk_layer *L, int il) {
    const pk_attn_shape *a = &bk->attn;
    const int hd = a->head_dim, B = c->cur_batch, pos0 = c->pos, D = c->m->hp.n_embd;
    const int qd = a->n_head * hd, od = a->n_head * a->head_dim_v;
    const int kd = c->kv.att[il].k_dim, vd = c->kv.att[il].v_dim;
    const int gated = a->out_gate;
    /* the cache has this layer's shape (its memory method's) */
    PK_ASSERT(kd == a->n_head_kv * hd && vd == a->n_head_kv * a->head_dim_v && c->kv.slot[il] >= 0);
    att_ws w;
    const size_t used = att_layout(c, a, c->arena, &w);
    PK_ASSERT(used <= c->arena_bytes);   /* att_scratch asked for it */
    (void)used;

    /* V rows go straight into an F32 cache at their positions, or to w.vb
       and then converted into a typed cache; K rows to w.kb, then
       transposed into an F32 cache or converted row by row */
    const int tk = c->kv.type_k, tv = c->kv.type_v;
    float *vrows = tv == PK_TYPE_F32 ? pk_kv_v(&c->kv, il, pos0) : w.vb;
    const char *kind = bk->mixer->name;   /* the profile's parent phase */
    pk_prof_mark pm;
    pk_prof_begin(c, &pm);
    pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);
    pk_mv qkv[3] = {
        {.w = &L->wq, .row0 = 0, .nrows = L->wq.ne[1], .slot = PK_SLOT_X, .n_tok = B, .idx = NULL,
         .y = gated ? w.qg : w.q, .y_stride = L->wq.ne[1]},
        {.w = &L->wk, .row0 = 0, .nrows = L->wk.ne[1], .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = w.kb,
         .y_stride = kd},
        {.w = &L->wv, .row0 = 0, .nrows = L->wv.ne[1], .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = vrows,
         .y_stride = vd},
    };
    pk_matvec(c, qkv, a->v_from_k ? 2 : 3);
    pk_prof_end(c, "projections", kind, &pm);
    pk_prof_begin(c, &pm);
    add_bias(c, w.q, &L->bq, qd, B, qd);
    add_bias(c, w.kb, &L->bk, kd, B, kd);
    add_bias(c, vrows, &L->bv, vd, B, vd);
    const int nkv = a->n_head_kv, hdv = a->head_dim_v;
    if (a->v_from_k)   /* V is K's projection, before its norm and rope (bind: vd == kd) */
        memcpy(vrows, w.kb, (size_t)B * vd * sizeof(float));
    if (a->v_norm)
        for (int i = 0; i < B * nkv; i++)
            pk_rmsnorm(vrows + (size_t)i * hdv, vrows + (size_t)i * hdv, NULL, hdv, c->m->hp.rms_eps);
    if (tv != PK_TYPE_F32)   /* every variant's quantizer is bit-exact with the reference */
        for (int g = 0; g < nkv; g++)
            for (int b = 0; b < B; b++)
                pk_kern_quantize(c->kern, tv, vrows + (size_t)b * vd + (size_t)g * hdv,
                                 pk_kv_vh(&c->kv, il, g, pos0 + b), hdv);
    if (gated) /* q and gate are interleaved per head: [q_h | gate_h] */
        for (int b = 0; b < B; b++) {
            const float *qg = w.qg + (size_t)b * 2 * qd;
            for (int h = 0; h < a->n_head; h++) {
                memcpy(w.q + (size_t)b * qd + (size_t)h * hd, qg + (size_t)h * 2 * hd, (size_t)hd * sizeof(float));
                memcpy(w.gate + (size_t)b * qd + (size_t)h * hd, qg + (size_t)h * 2 * hd + hd,
                       (size_t)hd * sizeof(float));
            }
        }
    /* one call per norm for the batch (row by row: tokens and heads are
       contiguous rows), so the ledger counts each norm vector once */
    if (L->q_norm.data && a->qk_norm == PK_QK_NORM_FULL) {   /* over all heads at once */
        pk_rmsnorm_rows(c, w.q, w.q, &L->q_norm, qd, B, qd);
        pk_rmsnorm_rows(c, w.kb, w.kb, &L->k_norm, kd, B, kd);
    } else if (L->q_norm.data) {
        pk_rmsnorm_rows(c, w.q, w.q, &L->q_norm, hd, B * a->n_head, hd);
        pk_rmsnorm_rows(c, w.kb, w.kb, &L->k_norm, hd, B * a->n_head_kv, hd);
    }
    for (int b = 0; b < B; b++) {
        rope_apply(c, a, w.q + (size_t)b * qd, a->n_head, hd, pos0 + b);
        rope_apply(c, a, w.kb + (size_t)b * kd, a->n_head_kv, hd, pos0 + b);
    }
    if (tk == PK_TYPE_F32)
        for (int i = 0; i < kd; i++) {
            float *kt = pk_kv_kt(&c->kv, il, i) + pos0;
            for (int b = 0; b < B; b++) kt[b] = w.kb[(size_t)b * kd + i];
        }
    else if (tk == PK_TYPE_F16)   /* transposed tiles: element e of a position PK_KT apart */
        for (int g = 0; g < nkv; g++)
            for (int b = 0; b < B; b++) {
                uint16_t *kt = pk_kv_kt16_at(&c->kv, il, g, pos0 + b);
                const float *k = w.kb + (size_t)b * kd + (size_t)g * hd;
                for (int e = 0; e < hd; e++) kt[(size_t)e * PK_KT] = pk_fp32_to_fp16(k[e]);
            }
    else
        for (int g = 0; g < nkv; g++)
            for (int b = 0; b < B; b++)
                pk_kern_quantize(c->kern, tk, w.kb + (size_t)b * kd + (size_t)g * hd,
                                 pk_kv_k(&c->kv, il, g, pos0 + b), hd);

    pk_prof_end(c, "norms, rope, cache writes", kind, &pm);
    pk_prof_begin(c, &pm);
    /* chunks of 16 tokens per kv head (their scores take M x ATT_BLOCK
       floats whatever the context) */
    if (a->sinks) pk_get_row(c, &L->attn_sinks, 0, w.sinks);
    att_task t = {.c = c, .a = a, .w = &w, .layer = il, .pos0 = pos0, .n = B, .tb = 16, .n_tb = 0, .sinks = w.sinks};
    t.n_tb = (B + t.tb - 1) / t.tb;
    /* state ledger: each token tile reads the cached keys and values of the
       positions it sees (at most pos0 + B); the batch writes its own rows
       (bytes in the cache's types) */
    const uint64_t kv_row = (uint64_t)(c->kv.att[il].k_row + c->kv.att[il].v_row);
    c->state_bytes += (uint64_t)t.n_tb * (uint64_t)(pos0 + B) * kv_row + (uint64_t)B * kv_row;
    const int chunks = t.n_tb * a->n_head_kv;
    c->scratch_oom = 0;
    /* small attention spans are not worth a hand-off: run them on the caller */
    if ((int64_t)B * (pos0 + B) * a->n_head * (hd + a->head_dim_v) < (1 << 15))
        for (int i = 0; i < chunks; i++) att_run(&t, i);
    else
        pk_pool_run(c->pool, att_run, &t, chunks);
    if (c->scratch_oom) return PK_ERR_NOMEM;
    pk_prof_end(c, "attention", kind, &pm);

    pk_prof_begin(c, &pm);
    if (gated)
        for (int i = 0; i < B * od; i++) w.att_out[i] *= 1.0f / (1.0f + expf(-w.gate[i]));
    pk_act_set(c, PK_SLOT_ATT, w.att_out, B, od, 0);
    pk_mv o = {.w = &L->wo, .row0 = 0, .nrows = D, .slot = PK_SLOT_ATT, .n_tok = B, .idx = NULL, .y = c->xb2,
               .y_stride = D};
    pk_matvec(c, &o, 1);
    add_bias(c, c->xb2, &L->bo, D, B, D);
    pk_prof_end(c, "projections", kind, &pm);
    return PK_OK;
}

/* ---- the kind's other methods ----------------------------------------------------- */

static int att_bind(pk_model *m, int il, pk_error *err) {
    const pk_attn_shape *a = &m->blocks[il].attn;
    pk_layer *L = &m->layers[il];
    const int64_t D = m->hp.n_embd, hd = a->head_dim, hdv = a->head_dim_v;
    const int64_t q_out = (int64_t)a->n_head * hd, k_out = (int64_t)a->n_head_kv * hd;
    const int64_t v_out = (int64_t)a->n_head_kv * hdv;
    if (a->v_from_k && hd != hdv)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: layer %d has no attn_v.weight, but its value head dim %lld != key "
                         "head dim %lld", m->path, il, (long long)hdv, (long long)hd);
    const char *vs = a->v_from_k ? NULL : "attn_v.weight", *vb = a->v_from_k ? NULL : "attn_v.bias";
    const int full = a->qk_norm == PK_QK_NORM_FULL;
    const pk_tensor_spec spec[] = {
        {.t = &L->wq, .suffix = "attn_q.weight", .required = 1, .n_dims = 2,
         .ne = {D, a->out_gate ? 2 * q_out : q_out}},
        {.t = &L->wk, .suffix = "attn_k.weight", .required = 1, .n_dims = 2, .ne = {D, k_out}},
        {.t = &L->wv, .suffix = vs, .required = 1, .n_dims = 2, .ne = {D, v_out}},
        {.t = &L->wo, .suffix = "attn_output.weight", .required = 1, .n_dims = 2, .ne = {a->n_head * hdv, D}},
        {.t = &L->bq, .suffix = "attn_q.bias", .required = a->bias, .n_dims = 1, .ne = {q_out}},
        {.t = &L->bk, .suffix = "attn_k.bias", .required = a->bias, .n_dims = 1, .ne = {k_out}},
        {.t = &L->bv, .suffix = vb, .required = a->bias, .n_dims = 1, .ne = {v_out}},
        {.t = &L->bo, .suffix = "attn_output.bias", .required = a->out_bias, .n_dims = 1, .ne = {D}},
        {.t = &L->attn_sinks, .suffix = a->sinks ? "attn_sinks.weight" : NULL, .required = 1, .n_dims = 1,
         .ne = {a->n_head}},
        {.t = &L->q_norm, .suffix = "attn_q_norm.weight", .required = a->qk_norm, .n_dims = 1,
         .ne = {full ? q_out : hd}},
        {.t = &L->k_norm, .suffix = "attn_k_norm.weight", .required = a->qk_norm, .n_dims = 1,
         .ne = {full ? k_out : hd}},
    };
    return pk_bind_specs(m, il, spec, (int)(sizeof spec / sizeof spec[0]), err);
}

/* keys and values of every position, n_head_kv heads of each */
static void att_memory(const pk_model *m, const pk_block *b, pk_kv_need *out) {
    const pk_attn_shape *a = &b->attn;
    *out = (pk_kv_need){.kind = PK_MEM_KV, .n_head_kv = a->n_head_kv, .k_dim = a->n_head_kv * a->head_dim,
                        .v_dim = a->n_head_kv * a->head_dim_v};
}

/* q, k, v in one call of 3 jobs; the output projection reads slot ATT; the
 * biases and the q / k norms are rows of at most the q, k, v or model width */
static void att_scratch(const pk_context *c, const pk_block *b, pk_scratch *s) {
    att_ws w;
    const pk_attn_shape *a = &b->attn;
    const size_t bytes = att_layout(c, a, NULL, &w);
    pk_scratch_raise(s, (int64_t)bytes, PK_SLOT_ATT, (int64_t)c->n_batch * a->n_head * a->head_dim_v, 3,
                     3 * (int64_t)c->n_batch);
    pk_raise(&s->row, (int64_t)a->n_head * a->head_dim);
    pk_raise(&s->row, (int64_t)a->n_head_kv * a->head_dim);
    pk_raise(&s->row, (int64_t)a->n_head_kv * a->head_dim_v);
    pk_raise(&s->row, c->m->hp.n_embd);
}

static int att_describe(const pk_model *m, const pk_block *b, char *buf, size_t cap) {
    const pk_attn_shape *a = &b->attn;
    char hd[32], win[32], rs[48] = "", sc_s[32];
    if (a->head_dim_v == a->head_dim) snprintf(hd, sizeof hd, "%d", a->head_dim);
    else snprintf(hd, sizeof hd, "%d/%d", a->head_dim, a->head_dim_v);
    snprintf(win, sizeof win, ", window %d", a->window);
    const pk_rope_scaling *sc = &m->rope[a->rope].scaling;
    if (sc->ext_factor != 0.0f || sc->freq_scale != 1.0f)
        snprintf(rs, sizeof rs, " %s x%g", sc->ext_factor != 0.0f ? "yarn" : "linear", 1.0 / sc->freq_scale);
    /* a score scale from the file (Granite's attention.scale) */
    snprintf(sc_s, sizeof sc_s, ", scale %g", a->scale);
    return snprintf(buf, cap, "attention(%s%d q / %d kv heads, head %s, rope %d dims%s%s%s%s%s%s%s%s)",
                    a->out_gate ? "gated, " : "", a->n_head, a->n_head_kv, hd, a->n_rot, rs,
                    a->qk_norm == PK_QK_NORM_FULL ? ", full-width q/k norm" : a->qk_norm ? ", q/k norm" : "",
                    a->v_from_k ? ", v = k" : "", a->v_norm ? ", v norm" : "",
                    a->window ? win : "", a->sinks ? ", sinks" : "", a->bias ? ", biases" : "",
                    m->hp.attn_scale > 0 ? sc_s : "");
}

const pk_block_kind pk_mixer_attention = {.name = "attention", .bind = att_bind, .memory = att_memory,
                                          .scratch = att_scratch, .forward = att_forward, .describe = att_describe};
