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
 * expert outputs are summed in order of expert index.
 */
#include <math.h>
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

static void shared_expert(pk_context *c, const pk_layer *L) {
    const int D = c->m->hp.n_embd, S = (int)L->gate_shexp.ne[1], B = c->cur_batch;
    pk_mv gu[2] = {
        {&L->gate_shexp, 0, S, PK_SLOT_X, B, NULL, c->hb, S},
        {&L->up_shexp, 0, S, PK_SLOT_X, B, NULL, c->hb2, S},
    };
    pk_matvec(c, gu, 2);
    c->kern->silu_mul(c->hb, c->hb2, (int64_t)B * S);
    pk_act_set(c, PK_SLOT_FFN, c->hb, B, S, 0);
    float *out = c->exp_out; /* free again: routed outputs are summed already */
    pk_mv d = {&L->down_shexp, 0, D, PK_SLOT_FFN, B, NULL, out, D};
    pk_matvec(c, &d, 1);
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

void pk_moe_forward(pk_context *c, const pk_layer *L) {
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

    pk_mv *jobs = c->jobs;
    int nj = 0;
    for (int e = 0; e < E; e++) {
        if (!c->exp_count[e]) continue;
        const int off = c->exp_off[e], n = c->exp_count[e];
        jobs[nj++] = (pk_mv){&L->gate_exps, (int64_t)e * F, F, PK_SLOT_X, n, c->tok_idx + off,
                             c->exp_h + (size_t)off * F, F};
        jobs[nj++] = (pk_mv){&L->up_exps, (int64_t)e * F, F, PK_SLOT_X, n, c->tok_idx + off,
                             c->exp_h2 + (size_t)off * F, F};
    }
    PK_ASSERT(nj <= c->n_jobs_cap);   /* 2 per selected expert: n_jobs_cap = 2 E + 8 */
    pk_matvec(c, jobs, nj);
    c->kern->silu_mul(c->exp_h, c->exp_h2, (int64_t)P * F);
    pk_act_set(c, PK_SLOT_EXP, c->exp_h, P, F, 0);
    /* down products in rounds of whole experts, at most exp_cap pairs each
       (one expert has at most B <= exp_cap pairs); the pairs of a round are
       the consecutive range [base, base + used) */
    memset(c->xb2, 0, (size_t)B * D * sizeof *c->xb2);
    for (int e0 = 0; e0 < E;) {
        int e = e0, base = -1, used = 0;
        nj = 0;
        for (; e < E; e++) {
            const int off = c->exp_off[e], n = c->exp_count[e];
            if (!n) continue;
            PK_ASSERT(n <= c->exp_cap);   /* else this round would never take it */
            if (used + n > c->exp_cap) break;
            if (base < 0) base = off;
            /* inputs: the hidden rows of pairs off..off+n-1 */
            jobs[nj++] = (pk_mv){&L->down_exps, (int64_t)e * D, D, PK_SLOT_EXP, n, c->pair_seq + off,
                                 c->exp_out + (size_t)(off - base) * D, D};
            used += n;
        }
        e0 = e;
        if (!nj) break;
        pk_matvec(c, jobs, nj);
        for (int p = base; p < base + used; p++) {
            const float w = c->pair_w[p], *o = c->exp_out + (size_t)(p - base) * D;
            float *y = c->xb2 + (size_t)c->tok_idx[p] * D;
            for (int d = 0; d < D; d++) y[d] += w * o[d];
        }
    }
    if (L->gate_shexp.data) shared_expert(c, L);
}
