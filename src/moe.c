/* moe.c - the Mixture-of-Experts feed-forward block: router, top-k
 * selection, and dispatch to the selected experts only.
 *
 *   p = softmax(router . x)          (or sigmoid, per the descriptor/GGUF)
 *   S = the k experts with the largest p (ties: lower index)
 *   w_e = p_e, renormalised over S if norm_topk
 *   y = sum_{e in S} w_e * down_e(silu(gate_e . x) * up_e . x)  [+ shared expert]
 *
 * The gate and up products of all selected experts run as one parallel
 * section, the down products as another: two hand-offs per layer, and only
 * the selected experts' rows are read.
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

static void route(pk_context *c, const pk_layer *L) {
    const pk_hparams *hp = &c->m->hp;
    const int E = hp->n_expert, K = hp->n_expert_used;
    pk_mv r = {&L->gate_inp, 0, E, PK_SLOT_X, c->router};
    pk_matvec(c, &r, 1);
    float *p = c->router;
    if (hp->gating == PK_GATE_SIGMOID) {
        for (int e = 0; e < E; e++) p[e] = 1.0f / (1.0f + expf(-p[e]));
    } else {
        float mx = p[0];
        for (int e = 1; e < E; e++) mx = p[e] > mx ? p[e] : mx;
        double sum = 0.0;
        for (int e = 0; e < E; e++) sum += (p[e] = expf(p[e] - mx));
        for (int e = 0; e < E; e++) p[e] = (float)(p[e] / sum);
    }
    top_k(p, E, K, c->sel);
    double wsum = 0.0;
    for (int j = 0; j < K; j++) wsum += (c->sel_w[j] = p[c->sel[j]]);
    if (hp->norm_topk && wsum > 0)
        for (int j = 0; j < K; j++) c->sel_w[j] = (float)(c->sel_w[j] / wsum);
}

static void shared_expert(pk_context *c, const pk_layer *L) {
    const int D = c->m->hp.n_embd, S = (int)L->gate_shexp.ne[1];
    pk_mv gu[2] = {
        {&L->gate_shexp, 0, S, PK_SLOT_X, c->hb},
        {&L->up_shexp, 0, S, PK_SLOT_X, c->hb2},
    };
    pk_matvec(c, gu, 2);
    pk_silu_mul(c->hb, c->hb2, S);
    pk_act_set(c, PK_SLOT_FFN, c->hb);
    float *out = c->exp_out; /* free again: routed outputs are summed already */
    pk_mv d = {&L->down_shexp, 0, D, PK_SLOT_FFN, out};
    pk_matvec(c, &d, 1);
    float g = 1.0f;
    if (L->gate_inp_shexp.data) {
        float w[D];
        pk_get_row(c, &L->gate_inp_shexp, 0, w);
        double s = 0.0;
        for (int i = 0; i < D; i++) s += (double)w[i] * c->xb[i];
        g = 1.0f / (1.0f + expf(-(float)s));
    }
    for (int i = 0; i < D; i++) c->xb2[i] += g * out[i];
}

void pk_moe_forward(pk_context *c, const pk_layer *L) {
    const pk_hparams *hp = &c->m->hp;
    const int D = hp->n_embd, K = hp->n_expert_used, F = hp->n_ff_exp;
    pk_act_set(c, PK_SLOT_X, c->xb);
    route(c, L);

    pk_mv jobs[PK_MAX_JOBS];
    int nj = 0;
    for (int j = 0; j < K; j++) {
        const int64_t e = c->sel[j];
        jobs[nj++] = (pk_mv){&L->gate_exps, e * F, F, PK_SLOT_X, c->hb + (size_t)j * F};
        jobs[nj++] = (pk_mv){&L->up_exps, e * F, F, PK_SLOT_X, c->hb2 + (size_t)j * F};
    }
    pk_matvec(c, jobs, nj);
    nj = 0;
    for (int j = 0; j < K; j++) {
        float *h = c->hb + (size_t)j * F;
        pk_silu_mul(h, c->hb2 + (size_t)j * F, F);
        pk_act_set(c, PK_SLOT_EXP0 + j, h);
        jobs[nj++] = (pk_mv){&L->down_exps, c->sel[j] * (int64_t)D, D, PK_SLOT_EXP0 + j,
                             c->exp_out + (size_t)j * D};
    }
    pk_matvec(c, jobs, nj);
    memset(c->xb2, 0, (size_t)D * sizeof *c->xb2);
    for (int j = 0; j < K; j++) {
        const float w = c->sel_w[j], *o = c->exp_out + (size_t)j * D;
        for (int i = 0; i < D; i++) c->xb2[i] += w * o[i];
    }
    if (L->gate_shexp.data) shared_expert(c, L);
}
