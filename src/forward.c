/* forward.c - the transformer forward pass for one token (batch 1).
 *
 * Reads top to bottom like the maths:
 *   x = token_embd[token]
 *   per layer:  x += attention(rmsnorm(x))   (q/k norm, rope, GQA, KV cache)
 *               x += ffn(rmsnorm(x))         (dense SwiGLU or MoE, moe.c)
 *   logits = output . rmsnorm(x)
 * Architecture differences come from flags (arch.h) and optional tensors.
 */
#include <math.h>
#include <string.h>
#include "context.h"

/* ---- small blocks ----------------------------------------------------------- */

void pk_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void pk_rmsnorm_t(pk_context *c, float *out, const float *x, const pk_tensor *w, int n) {
    float wf[1024];
    if (w->type == PK_TYPE_F32) {
        c->weight_bytes += w->row_bytes;
        pk_rmsnorm(out, x, w->data, n, c->m->hp.rms_eps);
        return;
    }
    /* norm weights are F32 in practice; other types are converted in pieces */
    pk_rmsnorm(out, x, NULL, n, c->m->hp.rms_eps);
    for (int i0 = 0; i0 < n; i0 += 1024) {
        int len = n - i0 < 1024 ? n - i0 : 1024;
        const pk_type_traits *tt = pk_type_get(w->type);
        if (i0 % tt->blck || len % tt->blck) { len = n - i0; } /* blocked types: whole row */
        if (len > 1024) {
            float big[len];  /* only for exotic blocked norm types */
            tt->to_float((const uint8_t *)w->data + pk_row_size(w->type, i0), big, len);
            for (int i = 0; i < len; i++) out[i0 + i] *= big[i];
        } else {
            tt->to_float((const uint8_t *)w->data + pk_row_size(w->type, i0), wf, len);
            for (int i = 0; i < len; i++) out[i0 + i] *= wf[i];
        }
    }
    c->weight_bytes += w->row_bytes;
}

static void add_bias(pk_context *c, float *y, const pk_tensor *b, int n) {
    if (!b->data) return;
    float tmp[n];
    pk_get_row(c, b, 0, tmp);
    for (int i = 0; i < n; i++) y[i] += tmp[i];
}

/* cos/sin of pos * theta_i for i < n_rot/2, theta_i = base^(-2i/n_rot) / freq_factor_i */
static void rope_prepare(pk_context *c, int pos) {
    const pk_hparams *hp = &c->m->hp;
    const int half = hp->n_rot / 2;
    float ff[half > 0 ? half : 1];
    if (c->m->rope_freqs.data) pk_get_row(c, &c->m->rope_freqs, 0, ff);
    for (int i = 0; i < half; i++) {
        double theta = pow((double)hp->rope_base, -2.0 * i / hp->n_rot);
        if (c->m->rope_freqs.data) theta /= ff[i];
        double a = pos * theta;
        c->rope_cos[i] = (float)cos(a);
        c->rope_sin[i] = (float)sin(a);
    }
}

/* Rotate the first n_rot dims of each of n_heads heads of size hd in place. */
static void rope_apply(const pk_context *c, float *v, int n_heads, int hd) {
    const int n_rot = c->m->hp.n_rot, half = n_rot / 2;
    const int neox = c->m->arch->rope_style == PK_ROPE_NEOX;
    for (int h = 0; h < n_heads; h++) {
        float *p = v + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            float a = p[i0], b = p[i1];
            p[i0] = a * c->rope_cos[i] - b * c->rope_sin[i];
            p[i1] = a * c->rope_sin[i] + b * c->rope_cos[i];
        }
    }
}

void pk_silu_mul(float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- attention ----------------------------------------------------------------- */

typedef struct att_task {
    pk_context *c;
    int layer, pos;
} att_task;

/* One chunk per head: it attends over positions 0..pos. Scores are one
 * F32 matrix-vector product over the cached keys of the head's kv group. */
static void att_run(void *arg, int h) {
    const att_task *t = arg;
    pk_context *c = t->c;
    const pk_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, hdv = hp->head_dim_v, group = hp->n_head / hp->n_head_kv;
    const float scale = 1.0f / sqrtf((float)hd);
    const float *q = c->q + (size_t)h * hd;
    const int kvh = h / group;
    float *sc = c->att + (size_t)h * c->n_ctx;
    c->kern->gemv[PK_TYPE_F32](hd, t->pos + 1, sc, pk_kv_k(&c->kv, t->layer, 0) + (size_t)kvh * hd,
                               (size_t)c->kv.k_dim * sizeof(float), q);
    float mx = -INFINITY;
    for (int p = 0; p <= t->pos; p++) {
        sc[p] *= scale;
        if (sc[p] > mx) mx = sc[p];
    }
    double sum = 0.0;
    for (int p = 0; p <= t->pos; p++) {
        sc[p] = expf(sc[p] - mx);
        sum += sc[p];
    }
    const float inv = (float)(1.0 / sum);
    float *o = c->att_out + (size_t)h * hdv;
    memset(o, 0, (size_t)hdv * sizeof *o);
    for (int p = 0; p <= t->pos; p++) {
        const float *v = pk_kv_v(&c->kv, t->layer, p) + (size_t)kvh * hdv;
        const float a = sc[p] * inv;
        for (int i = 0; i < hdv; i++) o[i] += a * v[i];
    }
}

static void attention(pk_context *c, const pk_layer *L, int il) {
    const pk_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim;
    const int pos = c->pos;
    float *kc = pk_kv_k(&c->kv, il, pos), *vc = pk_kv_v(&c->kv, il, pos);

    const int gated = c->m->arch->attn_gate;
    pk_act_set(c, PK_SLOT_X, c->xb);
    pk_mv qkv[3] = {
        {&L->wq, 0, L->wq.ne[1], PK_SLOT_X, gated ? c->qg : c->q},
        {&L->wk, 0, L->wk.ne[1], PK_SLOT_X, kc},
        {&L->wv, 0, L->wv.ne[1], PK_SLOT_X, vc},
    };
    pk_matvec(c, qkv, 3);
    if (gated) /* q and gate are interleaved per head: [q_h | gate_h] */
        for (int h = 0; h < hp->n_head; h++) {
            memcpy(c->q + (size_t)h * hd, c->qg + (size_t)h * 2 * hd, (size_t)hd * sizeof(float));
            memcpy(c->gate + (size_t)h * hd, c->qg + (size_t)h * 2 * hd + hd, (size_t)hd * sizeof(float));
        }
    add_bias(c, c->q, &L->bq, hp->n_head * hd);
    add_bias(c, kc, &L->bk, (int)L->wk.ne[1]);
    add_bias(c, vc, &L->bv, (int)L->wv.ne[1]);
    if (L->q_norm.data) {
        for (int h = 0; h < hp->n_head; h++) pk_rmsnorm_t(c, c->q + h * hd, c->q + h * hd, &L->q_norm, hd);
        for (int h = 0; h < hp->n_head_kv; h++) pk_rmsnorm_t(c, kc + h * hd, kc + h * hd, &L->k_norm, hd);
        /* one read of each norm vector per token, not per head */
        c->weight_bytes -= (uint64_t)(hp->n_head - 1) * L->q_norm.row_bytes +
                           (uint64_t)(hp->n_head_kv - 1) * L->k_norm.row_bytes;
    }
    rope_apply(c, c->q, hp->n_head, hd);
    rope_apply(c, kc, hp->n_head_kv, hd);

    att_task t = {c, il, pos};
    /* small attention spans are not worth a hand-off: run them on the caller */
    if ((int64_t)(pos + 1) * hp->n_head * (hd + hp->head_dim_v) < (1 << 15))
        for (int h = 0; h < hp->n_head; h++) att_run(&t, h);
    else
        pk_pool_run(c->pool, att_run, &t, hp->n_head);

    if (gated)
        for (int i = 0; i < hp->n_head * hp->head_dim_v; i++)
            c->att_out[i] *= 1.0f / (1.0f + expf(-c->gate[i]));
    pk_act_set(c, PK_SLOT_ATT, c->att_out);
    pk_mv o = {&L->wo, 0, L->wo.ne[1], PK_SLOT_ATT, c->xb2};
    pk_matvec(c, &o, 1);
}

/* ---- feed-forward ----------------------------------------------------------------- */

static void ffn_dense(pk_context *c, const pk_layer *L) {
    const int F = (int)L->ffn_gate.ne[1];
    pk_act_set(c, PK_SLOT_X, c->xb);
    pk_mv gu[2] = {
        {&L->ffn_gate, 0, F, PK_SLOT_X, c->hb},
        {&L->ffn_up, 0, F, PK_SLOT_X, c->hb2},
    };
    pk_matvec(c, gu, 2);
    pk_silu_mul(c->hb, c->hb2, F);
    pk_act_set(c, PK_SLOT_FFN, c->hb);
    pk_mv d = {&L->ffn_down, 0, L->ffn_down.ne[1], PK_SLOT_FFN, c->xb2};
    pk_matvec(c, &d, 1);
}

/* ---- one token ------------------------------------------------------------------------ */

int pk_forward_token(pk_context *c, int32_t token, int want_logits) {
    const pk_model *m = c->m;
    const pk_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    pk_get_row(c, &m->tok_embd, token, c->x);
    rope_prepare(c, c->pos);
    for (int il = 0; il < hp->n_layer; il++) {
        const pk_layer *L = &m->layers[il];
        pk_rmsnorm_t(c, c->xb, c->x, &L->attn_norm, D);
        if (m->recurrent && m->recurrent[il]) pk_deltanet_forward(c, L, il);
        else attention(c, L, il);
        for (int i = 0; i < D; i++) c->x[i] += c->xb2[i];
        pk_rmsnorm_t(c, c->xb, c->x, &L->ffn_norm, D);
        if (hp->moe) pk_moe_forward(c, L);
        else ffn_dense(c, L);
        for (int i = 0; i < D; i++) c->x[i] += c->xb2[i];
    }
    c->pos++;
    c->n_tokens++;
    if (!want_logits) return PK_OK;
    pk_rmsnorm_t(c, c->xb, c->x, &m->output_norm, D);
    pk_act_set(c, PK_SLOT_X, c->xb);
    pk_mv o = {&m->output, 0, hp->n_vocab, PK_SLOT_X, c->logits};
    pk_matvec(c, &o, 1);
    return PK_OK;
}
