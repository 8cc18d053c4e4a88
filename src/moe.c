/* moe.c - the Mixture-of-Experts feed-forward block: router, top-k
 * selection, and dispatch to the selected experts only.
 *
 *   p = softmax(router . x)          (or sigmoid, per the descriptor/GGUF)
 *   S = the k experts with the largest p (ties: lower index)
 *   w_e = p_e, renormalised over S if norm_topk
 *   y = sum_{e in S} w_e * down_e(silu(gate_e . x) * up_e . x)  [+ shared expert]
 *
 * For a batch, the (token, expert) pairs are grouped by expert, so each
 * selected expert's weights are read once for all the tokens routed to it.
 * The gate and up products of all experts run as one parallel section, the
 * down products as another (up to four for large batches, whose outputs
 * are buffered a quarter at a time, to bound the context's memory). Each token's
 * expert outputs are summed in order of expert index. Under a memory budget
 * the experts come from the model's expert cache (xcache.c), in rounds of
 * at most its slots per layer; a decoded token instead queues all its
 * experts' reads at once, runs the shared expert while they are in flight
 * and computes each expert as soon as its slices are in. The products and
 * the order of the sums are the same either way, so the output is bitwise
 * the output without a budget.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "context.h"

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

/* Router for every row: c->sel / c->sel_w get k entries per token. */
static void route(pk_context *c, const pk_layer *L) {
    const pk_hparams *hp = &c->m->hp;
    const int E = hp->n_expert, K = hp->n_expert_used, B = c->cur_batch;
    pk_mv r = {&L->gate_inp, 0, E, PK_SLOT_X, B, NULL, c->router, E};
    pk_matvec(c, &r, 1);
    for (int b = 0; b < B; b++) {
        float *p = c->router + (size_t)b * E;
        if (hp->gating == PK_GATE_SIGMOID) {
            for (int e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
        } else {
            float mx = p[0];
            for (int e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
            double sum = 0.0;
            for (int e = 0; e < E; e++) sum += (p[e] = expf(p[e] - mx));
            for (int e = 0; e < E; e++) p[e] = (float)(p[e] / sum);
        }
        int *sel = c->sel + (size_t)b * K;
        float *w = c->sel_w + (size_t)b * K;
        top_k(p, E, K, sel);
        double wsum = 0.0;
        for (int j = 0; j < K; j++) wsum += (w[j] = p[sel[j]]);
        if (hp->norm_topk && wsum > 0)
            for (int j = 0; j < K; j++) w[j] = (float)(w[j] / wsum);
    }
}

/* Decoding under a memory budget: guess the experts layer il will route
 * this token to - its router applied to this layer's FFN input (the
 * residual stream changes little from one layer to the next) - and queue
 * their reads behind this layer's, so they overlap this layer's compute.
 * Only the hit rate depends on the guess. The logits go to the router
 * buffer's second row (free at B = 1). */
static void prefetch_next(pk_context *c, int il) {
    const pk_hparams *hp = &c->m->hp;
    const pk_layer *N = &c->m->layers[il];
    const int E = hp->n_expert, K = hp->n_expert_used;
    float *p = c->router + E;
    pk_mv r = {&N->gate_inp, 0, E, PK_SLOT_X, 1, NULL, p, E};
    const uint64_t b0 = c->weight_bytes;
    pk_matvec(c, &r, 1);
    c->guess_bytes += c->weight_bytes - b0;
    int sel[K];
    top_k(p, E, K, sel);                        /* softmax and sigmoid keep the order */
    pk_xcache_prefetch(c->m->xc, il, sel, K, &c->xstats);
}

/* out (B x D) = the shared expert of the c->cur_batch rows of c->xb */
static void shared_expert(pk_context *c, const pk_layer *L, float *out) {
    const int D = c->m->hp.n_embd, S = (int)L->gate_shexp.ne[1], B = c->cur_batch;
    pk_mv gu[2] = {
        {&L->gate_shexp, 0, S, PK_SLOT_X, B, NULL, c->hb, S},
        {&L->up_shexp, 0, S, PK_SLOT_X, B, NULL, c->hb2, S},
    };
    pk_matvec(c, gu, 2);
    c->kern->silu_mul(c->hb, c->hb2, (int64_t)B * S);
    pk_act_set(c, PK_SLOT_FFN, c->hb, B, S, 0);
    pk_mv d = {&L->down_shexp, 0, D, PK_SLOT_FFN, B, NULL, out, D};
    pk_matvec(c, &d, 1);
}

/* c->xb2 += the shared expert's output out, times its sigmoid gate */
static void shared_expert_add(pk_context *c, const pk_layer *L, const float *out) {
    const int D = c->m->hp.n_embd, B = c->cur_batch;
    float w[L->gate_inp_shexp.data ? D : 1];
    if (L->gate_inp_shexp.data) pk_get_row(c, &L->gate_inp_shexp, 0, w);
    for (int b = 0; b < B; b++) {
        float g = 1.0f;
        if (L->gate_inp_shexp.data) {
            double s = 0.0;
            for (int i = 0; i < D; i++) s += (double)w[i] * c->xb[(size_t)b * D + i];
            g = 1.0f / (1.0f + expf(-(float)s));
        }
        for (int i = 0; i < D; i++) c->xb2[(size_t)b * D + i] += g * out[(size_t)b * D + i];
    }
}

/* One token under a memory budget, its nx <= slots experts ex[] (in index
 * order, one pair each): all their reads are queued at once, the shared
 * expert runs while they are in flight, and each expert is computed as
 * soon as its slices are in, into its own row of dec_out. The rows are then
 * summed in expert order, as in the batched path: the same products in the
 * same order, so the output is bitwise the same. */
static int moe_streamed_token(pk_context *c, const pk_layer *L, int il, const int *ex, int nx) {
    const pk_hparams *hp = &c->m->hp;
    const int D = hp->n_embd, F = hp->n_ff_exp, K = hp->n_expert_used;
    const int64_t gs = L->gate_exps.ne[1], us = L->up_exps.ne[1];
    pk_xcache *xc = c->m->xc;
    float *out = c->dec_out, *sh = c->dec_out + (size_t)K * D;
    int slot[nx];
    uint8_t taken[nx];
    pk_xcache_set set = {il, nx, 0, ex, slot, taken, 0};
    pk_error err = {0};
    if (pk_xcache_begin(xc, &set, &c->xstats, &err)) goto io;
    if (L->gate_shexp.data) shared_expert(c, L, sh);
    for (int j = 0; j < nx; j++) {
        const void *p[3];
        const int i = pk_xcache_next(xc, &set, p, &c->xstats, &err);
        if (i < 0) goto io;
        const int e = ex[i], off = c->exp_off[e];
        pk_mv gu[2] = {
            {&L->gate_exps, e * gs, F, PK_SLOT_X, 1, NULL, c->exp_h + (size_t)off * F, F},
            {&L->up_exps, (e + 1) * us - F, F, PK_SLOT_X, 1, NULL, c->exp_h2 + (size_t)off * F, F},
        };
        const void *gd[2] = {p[0], (const uint8_t *)p[1] + (size_t)(us - F) * L->up_exps.row_bytes};
        pk_matvec_from(c, gu, 2, gd);
        c->kern->silu_mul(c->exp_h + (size_t)off * F, c->exp_h2 + (size_t)off * F, F);
        pk_act_set(c, PK_SLOT_EXP, c->exp_h + (size_t)off * F, 1, F, 0);
        pk_mv d = {&L->down_exps, (int64_t)e * D, D, PK_SLOT_EXP, 1, NULL, out + (size_t)off * D, D};
        pk_matvec_from(c, &d, 1, &p[2]);
        pk_xcache_release(xc, il, &ex[i], 1);
    }
    memset(c->xb2, 0, (size_t)D * sizeof *c->xb2);
    for (int i = 0; i < nx; i++) {
        const int off = c->exp_off[ex[i]];
        const float w = c->pair_w[off], *o = out + (size_t)off * D;
        for (int d = 0; d < D; d++) c->xb2[d] += w * o[d];
    }
    if (L->gate_shexp.data) shared_expert_add(c, L, sh);
    return PK_OK;
io:
    snprintf(c->io_msg, sizeof c->io_msg, "%s", err.msg);
    return PK_ERR_IO;
}

int pk_moe_forward(pk_context *c, const pk_layer *L) {
    const pk_hparams *hp = &c->m->hp;
    const int D = hp->n_embd, K = hp->n_expert_used, F = hp->n_ff_exp, E = hp->n_expert;
    const int B = c->cur_batch, P = B * K;
    /* exp_h / exp_h2 / tok_idx / pair_w hold n_batch * k pairs (context.c) */
    PK_ASSERT(B >= 1 && B <= c->n_batch && B <= c->exp_cap);
    pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);
    route(c, L);

    /* group the P = B*k (token, expert) pairs by expert (counting sort):
       pair p = exp_off[e] + i is the i-th token routed to e */
    memset(c->exp_count, 0, (size_t)E * sizeof *c->exp_count);
    for (int i = 0; i < P; i++) c->exp_count[c->sel[i]]++;
    for (int e = 0, off = 0; e < E; e++) { c->exp_off[e] = off; off += c->exp_count[e]; }
    for (int i = 0; i < P; i++) {
        PK_ASSERT(c->sel[i] >= 0 && c->sel[i] < E);
        int p = c->exp_off[c->sel[i]]++;
        c->tok_idx[p] = i / K;
        c->pair_w[p] = c->sel_w[i];
    }
    for (int e = 0; e < E; e++) c->exp_off[e] -= c->exp_count[e];

    /* The used experts in rounds of at most R (all of them at once without
       an expert cache), in order of expert index: per round the gate and up
       products as one parallel section, then the down products in sections
       of at most exp_cap pairs (one expert has at most B <= exp_cap pairs).
       The pairs of a round, and of a section, are a consecutive range. */
    /* expert e's gate rows are the first F of its gate_exps.ne[1] rows, its
       up rows the last F of its up_exps.ne[1]: the whole slices, or the two
       halves of a merged ffn_gate_up_exps bound in both fields (model.c) */
    const int64_t gs = L->gate_exps.ne[1], us = L->up_exps.ne[1];
    pk_xcache *xc = c->m->xc;
    const int il = (int)(L - c->m->layers), R = xc ? pk_xcache_slots(xc) : E;
    if (xc && B == 1 && c->n_batch >= 2 && il + 1 < hp->n_layer) prefetch_next(c, il + 1);
    int ex[R];
    const void *ptr[xc ? 3 * R : 1], *jd[2 * R];
    pk_mv *jobs = c->jobs;
    if (xc && B == 1 && K <= R) {
        int nx = 0;
        for (int e = 0; e < E; e++)
            if (c->exp_count[e]) ex[nx++] = e;
        return moe_streamed_token(c, L, il, ex, nx);
    }
    memset(c->xb2, 0, (size_t)B * D * sizeof *c->xb2);
    for (int e = 0; e < E;) {
        int nx = 0;
        for (; e < E && nx < R; e++)
            if (c->exp_count[e]) ex[nx++] = e;
        if (!nx) break;
        if (xc) {
            pk_error err = {0};
            if (pk_xcache_acquire(xc, il, ex, nx, ptr, &c->xstats, &err)) {
                snprintf(c->io_msg, sizeof c->io_msg, "%s", err.msg);
                return PK_ERR_IO;
            }
        }
        const int p_lo = c->exp_off[ex[0]], p_hi = c->exp_off[ex[nx - 1]] + c->exp_count[ex[nx - 1]];
        int nj = 0;
        for (int i = 0; i < nx; i++) {
            const int off = c->exp_off[ex[i]], n = c->exp_count[ex[i]];
            jobs[nj++] = (pk_mv){&L->gate_exps, ex[i] * gs, F, PK_SLOT_X, n, c->tok_idx + off,
                                 c->exp_h + (size_t)off * F, F};
            jd[nj - 1] = xc ? ptr[3 * i] : NULL;
            jobs[nj++] = (pk_mv){&L->up_exps, (ex[i] + 1) * us - F, F, PK_SLOT_X, n, c->tok_idx + off,
                                 c->exp_h2 + (size_t)off * F, F};
            /* the cache's copy starts at the slice's first row */
            jd[nj - 1] = xc ? (const uint8_t *)ptr[3 * i + 1] + (size_t)(us - F) * L->up_exps.row_bytes : NULL;
        }
        PK_ASSERT(nj <= c->n_jobs_cap);   /* 2 per expert of the round: n_jobs_cap = 2 E + 8 */
        pk_matvec_from(c, jobs, nj, jd);
        c->kern->silu_mul(c->exp_h + (size_t)p_lo * F, c->exp_h2 + (size_t)p_lo * F, (int64_t)(p_hi - p_lo) * F);
        pk_act_set(c, PK_SLOT_EXP, c->exp_h + (size_t)p_lo * F, p_hi - p_lo, F, 0);
        for (int i0 = 0; i0 < nx;) {
            int i = i0, base = c->exp_off[ex[i0]], used = 0;
            nj = 0;
            for (; i < nx; i++) {
                const int off = c->exp_off[ex[i]], n = c->exp_count[ex[i]];
                PK_ASSERT(n <= c->exp_cap);   /* else no section would ever take it */
                if (used + n > c->exp_cap) break;
                /* inputs: the hidden rows of pairs off..off+n-1 (slot row off - p_lo) */
                jobs[nj++] = (pk_mv){&L->down_exps, (int64_t)ex[i] * D, D, PK_SLOT_EXP, n,
                                     c->pair_seq + (off - p_lo), c->exp_out + (size_t)(off - base) * D, D};
                jd[nj - 1] = xc ? ptr[3 * i + 2] : NULL;
                used += n;
            }
            i0 = i;
            pk_matvec_from(c, jobs, nj, jd);
            for (int p = base; p < base + used; p++) {
                const float w = c->pair_w[p], *o = c->exp_out + (size_t)(p - base) * D;
                float *y = c->xb2 + (size_t)c->tok_idx[p] * D;
                for (int d = 0; d < D; d++) y[d] += w * o[d];
            }
        }
        if (xc) pk_xcache_release(xc, il, ex, nx);
    }
    if (L->gate_shexp.data) {
        shared_expert(c, L, c->exp_out);   /* free again: routed outputs are summed already */
        shared_expert_add(c, L, c->exp_out);
    }
    return PK_OK;
}
