/* engine/kinds/moe.c - the Mixture-of-Experts feed-forward block: router, top-k
 * selection, and dispatch to the selected experts only.
 *
 *   p = softmax(router . x)          (or sigmoid, per the descriptor/GGUF)
 *   S = the k experts with the largest p (ties: lower index), or of the
 *       largest p + exp_probs_b where the layer has that selection bias;
 *       with expert groups, only from the n_group_used groups whose two
 *       best selection scores sum highest
 *   w_e = p_e, renormalised over S if norm_topk (the sum at least
 *       6.1035e-5, as llama.cpp clamps it), times w_scale
 *   y = sum_{e in S} w_e * down_e(silu(gate_e . x) * up_e . x)  [+ shared expert]
 * Variants the plan sets (pk_ffn_shape): gating "softmax over the chosen"
 * (top-k of the logits, w = softmax of those k); biases on the router and
 * on each expert's gate, up (before the activation) and down products; the
 * clamped SwiGLU-OAI activation g' sigmoid(alpha g') (u' + 1), g' = min(g,
 * limit), u' = clamp(u, -limit, limit).
 *
 * For a batch, the (token, expert) pairs are grouped by expert, so each
 * selected expert's weights are read once for all the tokens routed to it.
 * The gate and up products of all experts run as one parallel section, the
 * down products as another (up to four for large batches, whose outputs
 * are buffered a quarter at a time, to bound the context's memory). Each token's
 * expert outputs are summed in order of expert index. Under a memory budget
 * the experts come from the model's expert cache (model/xcache.c), in rounds of
 * at most its slots per layer; a decoded token instead queues all its
 * experts' reads at once, runs the shared expert while they are in flight
 * and computes each expert as soon as its slices are in. The products and
 * the order of the sums are the same either way, so the output is bitwise
 * the output without a budget.
 * Two FFN kinds (model/blocks.h): "moe" (routed experts) and "moe(shared)"
 * (routed experts plus a shared expert, gated by a sigmoid of
 * ffn_gate_inp_shexp . x where the plan's shexp_gate asks for it or allows
 * it and the file has it); they differ in what they bind.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "engine/context.h"

/* The kind's buffers in the context's arena, for a batch of B tokens
 * (P = B * k (token, expert) pairs). */
typedef struct moe_ws {
    float *router;                /* [B][n_expert] router logits, then probabilities */
    float *sel_score;             /* [n_expert] selection scores (exp_probs_b) */
    int *sel;                     /* [B][k] selected experts */
    float *sel_w;                 /* [B][k] their weights */
    float *pair_w;                /* [P] router weight of pair p */
    int *exp_count, *exp_off;     /* [n_expert] */
    int32_t *tok_idx;             /* [P] token of each pair, as matvec input rows */
    int32_t *pair_seq;            /* [P] 0, 1, 2, ... */
    float *exp_h;                 /* (F_exp) per pair: gate products, then hidden rows */
    float *exp_h2;                /* (F_exp) per pair: up products */
    float *exp_out;               /* (D) per pair, exp_cap pairs at a time (exp_h2's
                                     memory: the up products are dead by then) */
    int exp_cap;
    float *dec_out;               /* (k + 1) x (D): one token's expert outputs and
                                     its shared expert's, decoding under a budget */
    float *hb, *hb2;              /* (F_shexp) shared expert's gate and up products */
    float *sel_bias;              /* [n_expert] the selection bias exp_probs_b */
    float *grp_score;             /* [n_group] group scores (group-limited routing) */
    int *grp_keep;                /* [n_group] the groups kept */
    float *down_scale;            /* [n_expert] per-expert output scales (ffn_down_exps.scale) */
    int *guess;                   /* [k] the next layer's guessed experts */
    int *ex;                      /* [n_expert] the experts of a round */
    const void **ex_data;         /* [3 n_expert] their slices in the expert cache */
    const void **job_data;        /* [2 n_expert] each job's weight rows (NULL: the tensor's) */
    int *tok_slot, *tok_got;      /* [k] one decoded token's experts: cache slots, ready order */
    uint8_t *tok_taken;           /* [k] */
} moe_ws;

static size_t moe_layout(const pk_context *c, const pk_ffn_shape *f, void *base, moe_ws *w) {
    pk_arena ar = {base, 0};
    const size_t B = (size_t)c->n_batch, E = (size_t)f->n_expert, P = B * (size_t)f->n_expert_used;
    const size_t FE = (size_t)f->n_ff, D = (size_t)c->m->hp.n_embd, S = (size_t)f->n_ff_shexp;
    /* exp_out holds the down products of at most exp_cap pairs at a time,
       or the shared expert's B rows */
    w->exp_cap = (int)((P + 3) / 4 > B ? (P + 3) / 4 : B);
    w->router = pk_arena_take(&ar, B * E, sizeof(float));
    w->sel_score = pk_arena_take(&ar, E, sizeof(float));
    w->sel = pk_arena_take(&ar, P, sizeof(int));
    w->sel_w = pk_arena_take(&ar, P, sizeof(float));
    w->pair_w = pk_arena_take(&ar, P, sizeof(float));
    w->exp_count = pk_arena_take(&ar, E, sizeof(int));
    w->exp_off = pk_arena_take(&ar, E, sizeof(int));
    w->tok_idx = pk_arena_take(&ar, P, sizeof(int32_t));
    w->pair_seq = pk_arena_take(&ar, P, sizeof(int32_t));
    w->exp_h = pk_arena_take(&ar, P * FE, sizeof(float));
    const size_t out = (size_t)w->exp_cap * D > P * FE ? (size_t)w->exp_cap * D : P * FE;
    w->exp_out = w->exp_h2 = pk_arena_take(&ar, out, sizeof(float));
    w->dec_out = pk_arena_take(&ar, ((size_t)f->n_expert_used + 1) * D, sizeof(float));
    w->hb = S ? pk_arena_take(&ar, B * S, sizeof(float)) : NULL;
    w->hb2 = S ? pk_arena_take(&ar, B * S, sizeof(float)) : NULL;
    const size_t G = f->n_group > 0 ? (size_t)f->n_group : 1, K = (size_t)f->n_expert_used;
    w->sel_bias = pk_arena_take(&ar, E, sizeof(float));
    w->grp_score = pk_arena_take(&ar, G, sizeof(float));
    w->grp_keep = pk_arena_take(&ar, G, sizeof(int));
    w->down_scale = pk_arena_take(&ar, E, sizeof(float));
    w->guess = pk_arena_take(&ar, K, sizeof(int));
    w->ex = pk_arena_take(&ar, E, sizeof(int));
    w->ex_data = pk_arena_take(&ar, 3 * E, sizeof(void *));
    w->job_data = pk_arena_take(&ar, 2 * E, sizeof(void *));
    w->tok_slot = pk_arena_take(&ar, K, sizeof(int));
    w->tok_got = pk_arena_take(&ar, K, sizeof(int));
    w->tok_taken = pk_arena_take(&ar, K, 1);
    return ar.used;
}

/* Indices of the k largest values of p[0..n) into sel, in descending order. */
static void top_k(const float *p, int n, int k, int *sel) {
    for (int j = 0; j < k; j++) sel[j] = -1;
    for (int i = 0; i < n; i++) {
        int j = k;
        while (j > 0 && (sel[j - 1] < 0 || p[i] > p[sel[j - 1]])) j--;
        if (j == k) continue;
        for (int t = k - 1; t > j; t--) sel[t] = sel[t - 1];
        sel[j] = i;
    }
}

/* rows[0..n) (each of width floats) += row `row` of bias tensor b, if the
 * layer has it (read once into c->row, counted) */
static void add_row_bias(pk_context *c, const pk_tensor *b, int64_t row, float *rows, int n, int width) {
    if (!b->data || n <= 0) return;
    float *tmp = pk_row_buf(c, width);
    pk_get_row(c, b, row, tmp);
    for (int r = 0; r < n; r++)
        for (int i = 0; i < width; i++) rows[(size_t)r * width + i] += tmp[i];
}

/* g[0..n) = the experts' activation of gate products g and up products u:
 * SwiGLU, or SwiGLU-OAI (as ggml's swiglu_oai computes it; its exponentials
 * by the kernels' exp_sub, in pieces of a stack buffer) */
static void expert_act(pk_context *c, const pk_ffn_shape *f, float *g, const float *u, int64_t n) {
    if (f->swiglu_limit <= 0.0f) {
        pk_act_mul(c, f->act, g, u, n);
        return;
    }
    const float lim = f->swiglu_limit, alpha = f->swiglu_alpha;
    enum { PIECE = 256 };
    float e[PIECE];
    for (int64_t i0 = 0; i0 < n; i0 += PIECE) {
        const int len = n - i0 < PIECE ? (int)(n - i0) : PIECE;
        float *gp = g + i0;
        const float *up = u + i0;
        for (int i = 0; i < len; i++) e[i] = alpha * -(gp[i] < lim ? gp[i] : lim);
        pk_kern_exp_sub(c->kern, e, len, 0.0f);
        for (int i = 0; i < len; i++) {
            const float x = gp[i] < lim ? gp[i] : lim;
            const float y = up[i] < -lim ? -lim : up[i] > lim ? lim : up[i];
            gp[i] = x / (1.0f + e[i]) * (y + 1.0f);
        }
    }
}

/* Group-limited routing: score each of the n_group groups of consecutive
 * experts by the sum of its two largest s, and set s of every expert
 * outside the n_group_used best groups to -inf. */
static void limit_groups(const pk_ffn_shape *f, const moe_ws *w, float *s) {
    const int G = f->n_group, n = f->n_expert / G;
    float *gs = w->grp_score;
    int *keep = w->grp_keep, two[2];
    for (int g = 0; g < G; g++) {
        top_k(s + g * n, n, 2, two);
        gs[g] = s[g * n + two[0]] + s[g * n + two[1]];
    }
    top_k(gs, G, f->n_group_used, keep);
    for (int g = 0; g < G; g++) {
        int kept = 0;
        for (int j = 0; j < f->n_group_used; j++) kept |= keep[j] == g;
        if (!kept)
            for (int e = 0; e < n; e++) s[g * n + e] = -INFINITY;
    }
}

/* Router for every row: w->sel / w->sel_w get k entries per token. */
static void route(pk_context *c, const pk_ffn_shape *f, const pk_layer *L, const moe_ws *w) {
    const int E = f->n_expert, K = f->n_expert_used, B = c->cur_batch;
    pk_mv r = {.w = &L->gate_inp, .row0 = 0, .nrows = E, .slot = PK_SLOT_X, .n_tok = B, .idx = NULL,
               .y = w->router, .y_stride = E};
    pk_matvec(c, &r, 1);
    add_row_bias(c, &L->gate_inp_b, 0, w->router, B, E);
    float *bias = w->sel_bias;
    if (L->exp_probs_b.data) pk_get_row(c, &L->exp_probs_b, 0, bias);
    for (int b = 0; b < B; b++) {
        float *p = w->router + (size_t)b * E;
        if (f->gating == PK_GATE_SOFTMAX_WEIGHT) {   /* softmax over the k chosen logits */
            int *sel = w->sel + (size_t)b * K;
            float *sw = w->sel_w + (size_t)b * K;
            top_k(p, E, K, sel);
            float mx = p[sel[0]];
            double sum = 0.0;
            for (int j = 0; j < K; j++) sum += (sw[j] = expf(p[sel[j]] - mx));
            for (int j = 0; j < K; j++) sw[j] = (float)(sw[j] / sum);
            continue;
        }
        if (f->gating == PK_GATE_SIGMOID) {
            for (int e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
        } else {
            float mx = p[0];
            for (int e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
            double sum = 0.0;
            for (int e = 0; e < E; e++) sum += (p[e] = expf(p[e] - mx));
            for (int e = 0; e < E; e++) p[e] = (float)(p[e] / sum);
        }
        int *sel = w->sel + (size_t)b * K;
        float *sw = w->sel_w + (size_t)b * K;
        if (L->exp_probs_b.data || f->n_group) {   /* the bias chooses; the weights stay p */
            float *s = w->sel_score;
            for (int e = 0; e < E; e++) s[e] = p[e] + (L->exp_probs_b.data ? bias[e] : 0.0f);
            if (f->n_group) limit_groups(f, w, s);
            top_k(s, E, K, sel);
        } else {
            top_k(p, E, K, sel);
        }
        double wsum = 0.0;
        for (int j = 0; j < K; j++) wsum += (sw[j] = p[sel[j]]);
        if (f->norm_topk) {
            const double d = wsum > 6.103515625e-5 ? wsum : 6.103515625e-5;
            for (int j = 0; j < K; j++) sw[j] = (float)(sw[j] / d);
        }
        if (f->w_scale != 1.0f)
            for (int j = 0; j < K; j++) sw[j] *= f->w_scale;
    }
}

/* Decoding under a memory budget, w the layout of layer il - 1 (of the same
 * expert count and experts used): guess the experts layer il will route
 * this token to - its router applied to this layer's FFN input (the
 * residual stream changes little from one layer to the next) - and queue
 * their reads behind this layer's, so they overlap this layer's compute.
 * Only the hit rate depends on the guess. The logits go to the router
 * buffer's second row (free at B = 1). */
static void prefetch_next(pk_context *c, int il, const moe_ws *w) {
    const pk_ffn_shape *f = &c->m->blocks[il].ff;
    const pk_layer *N = &c->m->layers[il];
    const int E = f->n_expert, K = f->n_expert_used;
    float *p = w->router + E;
    pk_mv r = {.w = &N->gate_inp, .row0 = 0, .nrows = E, .slot = PK_SLOT_X, .n_tok = 1, .idx = NULL, .y = p,
               .y_stride = E};
    const uint64_t b0 = c->weight_bytes;
    pk_matvec(c, &r, 1);
    c->guess_bytes += c->weight_bytes - b0;
    int *sel = w->guess;   /* k entries: the caller's layer has as many experts and used ones */
    top_k(p, E, K, sel);                        /* softmax and sigmoid keep the order */
    pk_xcache_prefetch(c->m->xc, il, sel, K, &c->xstats);
}

/* out (B x D) = the shared expert of the c->cur_batch rows of c->xb */
static void shared_expert(pk_context *c, const pk_layer *L, int act, const moe_ws *w, float *out) {
    const int D = c->m->hp.n_embd, S = (int)L->gate_shexp.ne[1], B = c->cur_batch;
    pk_mv gu[2] = {
        {.w = &L->gate_shexp, .row0 = 0, .nrows = S, .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = w->hb,
         .y_stride = S},
        {.w = &L->up_shexp, .row0 = 0, .nrows = S, .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = w->hb2,
         .y_stride = S},
    };
    pk_matvec(c, gu, 2);
    pk_act_mul(c, act, w->hb, w->hb2, (int64_t)B * S);
    pk_act_set(c, PK_SLOT_FFN, w->hb, B, S, 0);
    pk_mv d = {.w = &L->down_shexp, .row0 = 0, .nrows = D, .slot = PK_SLOT_FFN, .n_tok = B, .idx = NULL, .y = out,
               .y_stride = D};
    pk_matvec(c, &d, 1);
}

/* c->xb2 += the shared expert's output out, times its sigmoid gate */
static void shared_expert_add(pk_context *c, const pk_layer *L, const float *out) {
    const int D = c->m->hp.n_embd, B = c->cur_batch;
    float *g_w = pk_row_buf(c, D);
    if (L->gate_inp_shexp.data) pk_get_row(c, &L->gate_inp_shexp, 0, g_w);
    for (int b = 0; b < B; b++) {
        float g = 1.0f;
        if (L->gate_inp_shexp.data) {
            double s = 0.0;
            for (int i = 0; i < D; i++) s += (double)g_w[i] * c->xb[(size_t)b * D + i];
            g = 1.0f / (1.0f + expf(-(float)s));
        }
        for (int i = 0; i < D; i++) c->xb2[(size_t)b * D + i] += g * out[(size_t)b * D + i];
    }
}

/* One token under a memory budget, its nx <= slots experts ex[] (in index
 * order, one pair each): all their reads are queued at once, then (guess)
 * the next layer's guessed experts behind them, the shared
 * expert runs while they are in flight, then the experts are computed in
 * rounds: each round takes all those whose slices are in (the hits at once,
 * the misses as they land), their gate and up products as one parallel
 * section and their down products as another, each expert's output into
 * its own row of dec_out. The rows are then summed in expert order, as in
 * the batched path: the same products in the same order, so the output is
 * bitwise the same. (A round per expert cost two thread hand-offs per
 * expert, ~16 per layer.) */
static int moe_streamed_token(pk_context *c, const pk_block *bk, const pk_layer *L, int il, const moe_ws *w,
                              const int *ex, int nx, int guess) {
    const int D = c->m->hp.n_embd, F = bk->ff.n_ff, K = bk->ff.n_expert_used;
    const int64_t gs = L->gate_exps.ne[1], us = L->up_exps.ne[1];
    pk_xcache *xc = c->m->xc;
    float *out = w->dec_out, *sh = w->dec_out + (size_t)K * D;
    /* nx <= k: the set's arrays hold k; the slices of a round go to
       ex_data, its jobs to c->jobs (2 per expert) and their data to job_data */
    PK_ASSERT(nx >= 1 && nx <= K && 2 * nx <= c->n_jobs_cap);
    int *got = w->tok_got;
    const void **p = w->ex_data, **jd = w->job_data;
    pk_mv *gu = c->jobs, *dn = c->jobs;
    pk_xcache_set set = {.il = il, .n = nx, .n_taken = 0, .ex = ex, .slot = w->tok_slot, .taken = w->tok_taken};
    pk_error err = {0};
    if (pk_xcache_begin(xc, &set, &c->xstats, &err)) goto io;
    if (guess) prefetch_next(c, il + 1, w);   /* behind this layer's misses */
    if (L->gate_shexp.data) shared_expert(c, L, bk->ff.act, w, sh);
    for (int left = nx; left > 0;) {
        const int m = pk_xcache_next_ready(xc, &set, got, p, left, &c->xstats, &err);
        if (m < 0) goto io;
        /* round row j (expert ex[got[j]]): gate and up products in rows j of
           exp_h / exp_h2, its output in its pair's row of dec_out */
        for (int j = 0; j < m; j++) {
            const int e = ex[got[j]];
            gu[2 * j] = (pk_mv){.w = &L->gate_exps, .row0 = e * gs, .nrows = F, .slot = PK_SLOT_X, .n_tok = 1,
                                .idx = NULL, .y = w->exp_h + (size_t)j * F, .y_stride = F};
            gu[2 * j + 1] = (pk_mv){.w = &L->up_exps, .row0 = (e + 1) * us - F, .nrows = F, .slot = PK_SLOT_X,
                                    .n_tok = 1, .idx = NULL, .y = w->exp_h2 + (size_t)j * F, .y_stride = F};
            jd[2 * j] = p[3 * j];
            jd[2 * j + 1] = (const uint8_t *)p[3 * j + 1] + (size_t)(us - F) * L->up_exps.row_bytes;
        }
        pk_matvec_from(c, gu, 2 * m, jd);
        for (int j = 0; j < m; j++) {
            const int e = ex[got[j]];
            add_row_bias(c, &L->gate_exps_b, e, w->exp_h + (size_t)j * F, 1, F);
            add_row_bias(c, &L->up_exps_b, e, w->exp_h2 + (size_t)j * F, 1, F);
            expert_act(c, &bk->ff, w->exp_h + (size_t)j * F, w->exp_h2 + (size_t)j * F, F);
        }
        pk_act_set(c, PK_SLOT_EXP, w->exp_h, m, F, 0);
        for (int j = 0; j < m; j++) {
            const int e = ex[got[j]];
            /* the gate and up jobs are done: their list and data are free */
            dn[j] = (pk_mv){.w = &L->down_exps, .row0 = (int64_t)e * D, .nrows = D, .slot = PK_SLOT_EXP, .n_tok = 1,
                            .idx = w->pair_seq + j, .y = out + (size_t)w->exp_off[e] * D, .y_stride = D};
            jd[j] = p[3 * j + 2];
        }
        pk_matvec_from(c, dn, m, jd);
        for (int j = 0; j < m; j++) {
            const int e = ex[got[j]];
            float *o = out + (size_t)w->exp_off[e] * D;
            add_row_bias(c, &L->down_exps_b, e, o, 1, D);
            if (c->expert_observer) c->expert_observer(c->expert_observer_ud, il, e, 1, w->pair_w + w->exp_off[e], o, D);
            pk_xcache_release(xc, il, &ex[got[j]], 1);
        }
        left -= m;
    }
    memset(c->xb2, 0, (size_t)D * sizeof *c->xb2);
    for (int i = 0; i < nx; i++) {
        const int off = w->exp_off[ex[i]];
        const float pw = w->pair_w[off], *o = out + (size_t)off * D;
        for (int d = 0; d < D; d++) c->xb2[d] += pw * o[d];
    }
    if (L->gate_shexp.data) shared_expert_add(c, L, sh);
    return PK_OK;
io:
    snprintf(c->io_msg, sizeof c->io_msg, "%s", err.msg);
    return PK_ERR_IO;
}

size_t pk_ffn_moe_bytes(const pk_context *c, const pk_block *b) {
    moe_ws w;
    return moe_layout(c, &b->ff, NULL, &w);
}

int pk_ffn_moe_run(pk_context *c, const pk_block *bk, const pk_layer *L, int il, void *arena,
                   const float *router_in) {
    const pk_ffn_shape *f = &bk->ff;
    const int D = c->m->hp.n_embd, K = f->n_expert_used, F = f->n_ff, E = f->n_expert;
    const int B = c->cur_batch, P = B * K;
    moe_ws ws;
    const size_t ws_bytes = moe_layout(c, f, arena, &ws);
    /* moe_scratch (or the enclosing kind's scratch) asked for it */
    PK_ASSERT((size_t)((unsigned char *)arena - c->arena) + ws_bytes <= c->arena_bytes);
    (void)ws_bytes;
    /* exp_h / exp_h2 / tok_idx / pair_w hold n_batch * k pairs (moe_layout) */
    PK_ASSERT(B >= 1 && B <= c->n_batch && B <= ws.exp_cap);
    const char *kind = bk->ffn->name;   /* the profile's parent phase */
    pk_prof_mark pm;
    pk_prof_begin(c, &pm);
    if (router_in) pk_act_set(c, PK_SLOT_X, router_in, B, D, 0);
    else pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);
    route(c, f, L, &ws);
    if (router_in) pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);   /* the experts' input */
    /* per-expert output scales (ffn_down_exps.scale) go into the pair weights */
    float *dsc = ws.down_scale;
    if (L->down_exps_scale.data) pk_get_row(c, &L->down_exps_scale, 0, dsc);

    /* group the P = B*k (token, expert) pairs by expert (counting sort):
       pair p = exp_off[e] + i is the i-th token routed to e */
    int *exp_count = ws.exp_count, *exp_off = ws.exp_off;
    memset(exp_count, 0, (size_t)E * sizeof *exp_count);
    for (int i = 0; i < P; i++) exp_count[ws.sel[i]]++;
    for (int e = 0, off = 0; e < E; e++) { exp_off[e] = off; off += exp_count[e]; }
    for (int i = 0; i < P; i++) {
        PK_ASSERT(ws.sel[i] >= 0 && ws.sel[i] < E);
        int p = exp_off[ws.sel[i]]++;
        ws.tok_idx[p] = i / K;
        ws.pair_w[p] = L->down_exps_scale.data ? ws.sel_w[i] * dsc[ws.sel[i]] : ws.sel_w[i];
        ws.pair_seq[i] = i;
    }
    for (int e = 0; e < E; e++) exp_off[e] -= exp_count[e];
    pk_prof_end(c, "router", kind, &pm);
    pk_prof_begin(c, &pm);

    /* The used experts in rounds of at most R (all of them at once without
       an expert cache), in order of expert index: per round the gate and up
       products as one parallel section, then the down products in sections
       of at most exp_cap pairs (one expert has at most B <= exp_cap pairs).
       The pairs of a round, and of a section, are a consecutive range. */
    /* expert e's gate rows are the first F of its gate_exps.ne[1] rows, its
       up rows the last F of its up_exps.ne[1]: the whole slices, or the two
       halves of a merged ffn_gate_up_exps bound in both fields (model/model.c) */
    const int64_t gs = L->gate_exps.ne[1], us = L->up_exps.ne[1];
    pk_xcache *xc = c->m->xc;
    /* a layer may have fewer experts than the cache has slots (a pruned file) */
    const int R = xc && pk_xcache_slots(xc) < E ? pk_xcache_slots(xc) : E;
    const int guess = xc && B == 1 && c->n_batch >= 2 && il + 1 < c->m->hp.n_layer &&
                      c->m->blocks[il + 1].ff.n_expert == E && c->m->blocks[il + 1].ff.n_expert_used == K;
    if (guess && K > R) prefetch_next(c, il + 1, &ws);   /* else after this layer's misses are queued */
    PK_ASSERT(R >= 1 && R <= E);   /* ex, ex_data and job_data hold E experts' */
    int *ex = ws.ex;
    const void **ptr = ws.ex_data, **jd = ws.job_data;
    pk_mv *jobs = c->jobs;
    if (xc && B == 1 && K <= R) {
        int nx = 0;
        for (int e = 0; e < E; e++)
            if (exp_count[e]) ex[nx++] = e;
        const int rc = moe_streamed_token(c, bk, L, il, &ws, ex, nx, guess);
        pk_prof_end(c, "experts", kind, &pm);
        return rc;
    }
    memset(c->xb2, 0, (size_t)B * D * sizeof *c->xb2);
    for (int e = 0; e < E;) {
        int nx = 0;
        for (; e < E && nx < R; e++)
            if (exp_count[e]) ex[nx++] = e;
        if (!nx) break;
        if (xc) {
            pk_error err = {0};
            if (pk_xcache_acquire(xc, il, ex, nx, ptr, &c->xstats, &err)) {
                snprintf(c->io_msg, sizeof c->io_msg, "%s", err.msg);
                return PK_ERR_IO;
            }
        }
        const int p_lo = exp_off[ex[0]], p_hi = exp_off[ex[nx - 1]] + exp_count[ex[nx - 1]];
        int nj = 0;
        for (int i = 0; i < nx; i++) {
            const int off = exp_off[ex[i]], n = exp_count[ex[i]];
            jobs[nj++] = (pk_mv){.w = &L->gate_exps, .row0 = ex[i] * gs, .nrows = F, .slot = PK_SLOT_X, .n_tok = n,
                                 .idx = ws.tok_idx + off, .y = ws.exp_h + (size_t)off * F, .y_stride = F};
            jd[nj - 1] = xc ? ptr[3 * i] : NULL;
            jobs[nj++] = (pk_mv){.w = &L->up_exps, .row0 = (ex[i] + 1) * us - F, .nrows = F, .slot = PK_SLOT_X,
                                 .n_tok = n, .idx = ws.tok_idx + off, .y = ws.exp_h2 + (size_t)off * F, .y_stride = F};
            /* the cache's copy starts at the slice's first row */
            jd[nj - 1] = xc ? (const uint8_t *)ptr[3 * i + 1] + (size_t)(us - F) * L->up_exps.row_bytes : NULL;
        }
        PK_ASSERT(nj <= c->n_jobs_cap);   /* 2 per expert of the round: moe_scratch asks 2 E + 8 */
        pk_matvec_from(c, jobs, nj, jd);
        for (int i = 0; i < nx; i++) {
            const int off = exp_off[ex[i]], n = exp_count[ex[i]];
            add_row_bias(c, &L->gate_exps_b, ex[i], ws.exp_h + (size_t)off * F, n, F);
            add_row_bias(c, &L->up_exps_b, ex[i], ws.exp_h2 + (size_t)off * F, n, F);
        }
        expert_act(c, f, ws.exp_h + (size_t)p_lo * F, ws.exp_h2 + (size_t)p_lo * F, (int64_t)(p_hi - p_lo) * F);
        pk_act_set(c, PK_SLOT_EXP, ws.exp_h + (size_t)p_lo * F, p_hi - p_lo, F, 0);
        for (int i0 = 0; i0 < nx;) {
            int i = i0, base = exp_off[ex[i0]], used = 0;
            nj = 0;
            for (; i < nx; i++) {
                const int off = exp_off[ex[i]], n = exp_count[ex[i]];
                PK_ASSERT(n <= ws.exp_cap);   /* else no section would ever take it */
                if (used + n > ws.exp_cap) break;
                /* inputs: the hidden rows of pairs off..off+n-1 (slot row off - p_lo) */
                jobs[nj++] = (pk_mv){.w = &L->down_exps, .row0 = (int64_t)ex[i] * D, .nrows = D, .slot = PK_SLOT_EXP,
                                     .n_tok = n, .idx = ws.pair_seq + (off - p_lo),
                                     .y = ws.exp_out + (size_t)(off - base) * D, .y_stride = D};
                jd[nj - 1] = xc ? ptr[3 * i + 2] : NULL;
                used += n;
            }
            pk_matvec_from(c, jobs, nj, jd);
            for (int j = i0; j < i; j++) {
                const int x = ex[j], n = exp_count[x];
                float *o = ws.exp_out + (size_t)(exp_off[x] - base) * D;
                add_row_bias(c, &L->down_exps_b, x, o, n, D);
                if (c->expert_observer) c->expert_observer(c->expert_observer_ud, il, x, n, ws.pair_w + exp_off[x], o, D);
            }
            i0 = i;
            for (int p = base; p < base + used; p++) {
                const float pw = ws.pair_w[p], *o = ws.exp_out + (size_t)(p - base) * D;
                float *y = c->xb2 + (size_t)ws.tok_idx[p] * D;
                for (int d = 0; d < D; d++) y[d] += pw * o[d];
            }
        }
        if (xc) pk_xcache_release(xc, il, ex, nx);
    }
    pk_prof_end(c, "experts", kind, &pm);
    if (L->gate_shexp.data) {
        pk_prof_begin(c, &pm);
        shared_expert(c, L, f->act, &ws, ws.exp_out);   /* free again: routed outputs are summed already */
        shared_expert_add(c, L, ws.exp_out);
        pk_prof_end(c, "shared expert", kind, &pm);
    }
    return PK_OK;
}

static int moe_forward(pk_context *c, const pk_block *bk, const pk_layer *L, int il) {
    return pk_ffn_moe_run(c, bk, L, il, c->arena, NULL);
}

/* ---- the kinds' other methods ---------------------------------------------------- */

/* The routed experts; with shared != 0 also the shared expert. */
static int bind_experts(pk_model *m, int il, int shared, pk_error *err) {
    pk_layer *L = &m->layers[il];
    const pk_ffn_shape *f = &m->blocks[il].ff;
    const int64_t D = m->hp.n_embd, E = f->n_expert, F = f->n_ff, S = f->n_ff_shexp;
    /* a merged ffn_gate_up_exps (per expert the gate rows, then the up
       rows) is bound into both fields */
    const int merged = pk_has_tensor(m, il, "ffn_gate_up_exps.weight");
    const pk_tensor_spec spec[] = {
        {.t = &L->gate_inp, .suffix = "ffn_gate_inp.weight", .required = 1, .n_dims = 2, .ne = {D, E},
         .experts = PK_EXPERT_DIM_1},
        {.t = &L->gate_exps, .suffix = merged ? "ffn_gate_up_exps.weight" : "ffn_gate_exps.weight", .required = 1,
         .n_dims = 3, .ne = {D, merged ? 2 * F : F, E}, .role = PK_ROLE_EXPERTS, .experts = PK_EXPERT_DIM_2},
        {.t = &L->up_exps, .suffix = merged ? "ffn_gate_up_exps.weight" : "ffn_up_exps.weight", .required = 1,
         .n_dims = 3, .ne = {D, merged ? 2 * F : F, E}, .role = PK_ROLE_EXPERTS, .experts = PK_EXPERT_DIM_2},
        {.t = &L->down_exps, .suffix = "ffn_down_exps.weight", .required = 1, .n_dims = 3, .ne = {F, D, E},
         .role = PK_ROLE_EXPERTS, .experts = PK_EXPERT_DIM_2},
        {.t = &L->gate_shexp, .suffix = shared ? "ffn_gate_shexp.weight" : NULL, .required = 1, .n_dims = 2,
         .ne = {D, S}},
        {.t = &L->up_shexp, .suffix = shared ? "ffn_up_shexp.weight" : NULL, .required = 1, .n_dims = 2, .ne = {D, S}},
        {.t = &L->down_shexp, .suffix = shared ? "ffn_down_shexp.weight" : NULL, .required = 1, .n_dims = 2,
         .ne = {S, D}},
        {.t = &L->gate_inp_shexp,
         .suffix = shared && f->shexp_gate != PK_SHEXP_GATE_NONE ? "ffn_gate_inp_shexp.weight" : NULL,
         .required = f->shexp_gate == PK_SHEXP_GATE_REQUIRED, .n_dims = 1, .ne = {D}},
        {.t = &L->gate_inp_b, .suffix = f->bias ? "ffn_gate_inp.bias" : NULL, .required = 1, .n_dims = 1, .ne = {E},
         .experts = PK_EXPERT_DIM_0},
        {.t = &L->gate_exps_b, .suffix = f->bias ? "ffn_gate_exps.bias" : NULL, .required = 1, .n_dims = 2,
         .ne = {F, E}, .role = PK_ROLE_EXPERT_BIAS, .experts = PK_EXPERT_DIM_1},
        {.t = &L->up_exps_b, .suffix = f->bias ? "ffn_up_exps.bias" : NULL, .required = 1, .n_dims = 2, .ne = {F, E},
         .role = PK_ROLE_EXPERT_BIAS, .experts = PK_EXPERT_DIM_1},
        {.t = &L->down_exps_b, .suffix = f->bias ? "ffn_down_exps.bias" : NULL, .required = 1, .n_dims = 2,
         .ne = {D, E}, .role = PK_ROLE_EXPERT_BIAS, .experts = PK_EXPERT_DIM_1},
        {.t = &L->exp_probs_b, .suffix = "exp_probs_b.bias", .required = 0, .n_dims = 1, .ne = {E},
         .experts = PK_EXPERT_DIM_0},
    };
    if (f->shexp_gate == PK_SHEXP_GATE_NONE && pk_has_tensor(m, il, "ffn_gate_inp_shexp.weight"))
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tensor 'blk.%d.ffn_gate_inp_shexp.weight': %s's shared "
                         "expert is not gated", m->path, il, m->arch->name);
    if (merged && f->bias)   /* the biases are split: so must the tensors be */
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: blk.%d.ffn_gate_up_exps.weight with expert biases is not "
                         "supported", m->path, il);
    return pk_bind_specs(m, il, spec, (int)(sizeof spec / sizeof spec[0]), err);
}

static int moe_bind(pk_model *m, int il, pk_error *err) { return bind_experts(m, il, 0, err); }
static int moe_shared_bind(pk_model *m, int il, pk_error *err) { return bind_experts(m, il, 1, err); }

static void moe_scratch(const pk_context *c, const pk_block *b, pk_scratch *s) {
    moe_ws w;
    const pk_ffn_shape *f = &b->ff;
    const int64_t B = c->n_batch, P = B * f->n_expert_used;
    /* gate and up jobs: 2 per expert of a round; their input rows: 2 per
       pair; the router and the shared expert: B and 2 B rows */
    pk_scratch_raise(s, (int64_t)moe_layout(c, f, NULL, &w), PK_SLOT_EXP, P * f->n_ff, 2 * (int64_t)f->n_expert + 8,
                     2 * P + 2 * B);
    pk_raise(&s->slot[PK_SLOT_FFN], B * f->n_ff_shexp);
    /* c->row: the router's, the experts' and the shared gate's bias rows */
    pk_raise(&s->row, f->n_expert);
    pk_raise(&s->row, f->n_ff);
    pk_raise(&s->row, c->m->hp.n_embd);
}

static int moe_describe(const pk_model *m, const pk_block *b, char *buf, size_t cap) {
    const pk_ffn_shape *f = &b->ff;
    char sh[32], sc[32];
    snprintf(sh, sizeof sh, ", shared ff %d", f->n_ff_shexp);
    char act[48] = "";
    if (f->swiglu_limit > 0.0f) snprintf(act, sizeof act, ", swiglu-oai limit %g", f->swiglu_limit);
    snprintf(sc, sizeof sc, ", weights x %g", f->w_scale);
    char gr[48];
    snprintf(gr, sizeof gr, ", %d of %d groups", f->n_group_used, f->n_group);
    const int bias = pk_has_tensor(m, (int)(b - m->blocks), "exp_probs_b.bias");
    return snprintf(buf, cap, "moe(top-%d of %d, ff %d%s%s%s%s%s%s%s)", f->n_expert_used, f->n_expert, f->n_ff,
                    f->gating == PK_GATE_SIGMOID          ? ", sigmoid"
                    : f->gating == PK_GATE_SOFTMAX_WEIGHT ? ", softmax of top-k"
                                                          : "",
                    bias ? ", selection bias" : "", f->n_group ? gr : "", f->w_scale != 1.0f ? sc : "",
                    f->bias ? ", biases" : "", act, b->ffn == &pk_ffn_moe_shared ? sh : "");
}

const pk_block_kind pk_ffn_moe = {.name = "moe", .bind = moe_bind, .memory = NULL, .scratch = moe_scratch,
                                  .forward = moe_forward, .describe = moe_describe};
const pk_block_kind pk_ffn_moe_shared = {.name = "moe(shared)", .bind = moe_shared_bind, .memory = NULL,
                                         .scratch = moe_scratch, .forward = moe_forward, .describe = moe_describe};
