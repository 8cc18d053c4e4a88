/* forward.c - the transformer forward pass over a batch of B tokens at
 * consecutive positions (B = 1 when decoding).
 *
 * Reads top to bottom like the maths, each step applied to every row:
 *   x = token_embd[token]
 *   per layer:  x += mixer(rmsnorm(x))   attention (q/k norm, rope, GQA, KV
 *                                        cache, optional output gate) or a
 *                                        Gated DeltaNet (deltanet.c)
 *               x += ffn(rmsnorm(x))     dense SwiGLU or MoE (moe.c)
 *   logits = output . rmsnorm(x)
 * Architecture differences come from flags (arch.h) and optional tensors.
 * Batching changes how often weights are read, never the result of a row:
 * a prompt processed in one batch gives the logits of one token at a time.
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

/* rows x (n floats each, stride apart) normed with weight tensor w into out */
static void rmsnorm_rows(pk_context *c, float *out, const float *x, const pk_tensor *w, int n,
                         int rows, int64_t stride) {
    const float *wf = w->data;
    float tmp[w->type == PK_TYPE_F32 ? 1 : n];
    if (w->type != PK_TYPE_F32) {  /* norm weights are F32 in practice */
        pk_type_get(w->type)->to_float(w->data, tmp, n);
        wf = tmp;
    }
    for (int r = 0; r < rows; r++)
        pk_rmsnorm(out + r * stride, x + r * stride, wf, n, c->m->hp.rms_eps);
    c->weight_bytes += w->row_bytes;
}

static void add_bias(pk_context *c, float *y, const pk_tensor *b, int n, int rows, int64_t stride) {
    if (!b->data) return;
    float tmp[n];
    pk_get_row(c, b, 0, tmp);
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < n; i++) y[r * stride + i] += tmp[i];
}

/* Rotate the first n_rot dims of each of n_heads heads of size hd in place,
 * for position pos (table made in context.c). */
static void rope_apply(const pk_context *c, float *v, int n_heads, int hd, int pos) {
    const int n_rot = c->m->hp.n_rot, half = n_rot / 2;
    const int neox = c->m->arch->rope_style == PK_ROPE_NEOX;
    const float *cs = c->rope_cos + (size_t)pos * half, *sn = c->rope_sin + (size_t)pos * half;
    for (int h = 0; h < n_heads; h++) {
        float *p = v + (size_t)h * hd;
        for (int i = 0; i < half; i++) {
            int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            float a = p[i0], b = p[i1];
            p[i0] = a * cs[i] - b * sn[i];
            p[i1] = a * sn[i] + b * cs[i];
        }
    }
}

/* ---- attention ----------------------------------------------------------------- */

typedef struct att_task {
    pk_context *c;
    int layer, pos0, n;
    int tb, n_tb;                 /* tokens per chunk, chunks per kv head */
} att_task;

/* One chunk: kv head g and tokens b0..b1-1 of the batch, i.e. the M = (b1 -
 * b0) * group query heads that share g's keys and values. Token b (position
 * pos0 + b) attends over positions 0..pos0+b. Over keys 0..nk-1 (nk = pos0 +
 * b1), as matrix products:
 *   S = Q K^T   (an F32 cache holds K transposed, for sgemm; a typed cache,
 *                F16 or Q8_0, each kv head's keys by position, for att_kq;
 *                each key is read once for all M queries);
 *   P = softmax of each row over its own positions, 0 beyond;
 *   O = P V     (V read in place, in its type: sgemm or att_pv).
 * Every element is a sum in order over its k (pk_sgemm_fn; att_kq / att_pv
 * promise the same independence from M, kernels.h), and zero
 * probabilities add exact zeros, so a query's result does not depend on
 * which other queries share its chunk: batched and one-token attention agree
 * bitwise. */
static void att_run(void *arg, int chunk) {
    const att_task *t = arg;
    pk_context *c = t->c;
    const pk_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, hdv = hp->head_dim_v, group = hp->n_head / hp->n_head_kv;
    const int qd = hp->n_head * hd, od = hp->n_head * hdv;
    const float scale = 1.0f / sqrtf((float)hd);
    /* the largest (latest) token blocks first, for balance */
    const int g = chunk % hp->n_head_kv, blk = t->n_tb - 1 - chunk / hp->n_head_kv;
    const int b0 = blk * t->tb, b1 = b0 + t->tb < t->n ? b0 + t->tb : t->n;
    const int M = (b1 - b0) * group, nk = t->pos0 + b1;
    float *Q = pk_thread_scratch(sizeof(float) * ((size_t)M * hd + (size_t)M * nk + (size_t)M * hdv));
    if (!Q) { c->scratch_oom = 1; return; }
    float *S = Q + (size_t)M * hd, *O = S + (size_t)M * nk;
    for (int b = b0; b < b1; b++)   /* the group's heads of token b are adjacent */
        memcpy(Q + (size_t)(b - b0) * group * hd, c->q + (size_t)b * qd + (size_t)g * group * hd,
               (size_t)group * hd * sizeof(float));
    const pk_kv *kv = &c->kv;
    if (kv->type_k == PK_TYPE_F32)
        c->kern->sgemm(M, nk, hd, Q, hd, pk_kv_kt(kv, t->layer, g * hd), kv->n_ctx, S, nk);
    else   /* a typed cache, read in its type (kernels.h) */
        c->kern->att_kq[kv->type_k](M, nk, hd, Q, hd, pk_kv_k(kv, t->layer, g, 0), kv->k_head, S, nk);
    for (int m = 0; m < M; m++) {
        const int last = t->pos0 + b0 + m / group;
        float *sc = S + (size_t)m * nk, mx = -INFINITY;
        for (int p = 0; p <= last; p++) {
            sc[p] *= scale;
            if (sc[p] > mx) mx = sc[p];
        }
        c->kern->exp_sub(sc, last + 1, mx);
        double sum = 0.0;
        for (int p = 0; p <= last; p++) sum += sc[p];
        const float inv = (float)(1.0 / sum);
        for (int p = 0; p <= last; p++) sc[p] *= inv;
        for (int p = last + 1; p < nk; p++) sc[p] = 0.0f;
    }
    if (kv->type_v == PK_TYPE_F32)
        c->kern->sgemm(M, hdv, nk, S, nk, pk_kv_v(kv, t->layer, 0) + (size_t)g * hdv, kv->v_dim, O, hdv);
    else
        c->kern->att_pv[kv->type_v](M, nk, hdv, S, nk, pk_kv_vh(kv, t->layer, g, 0), kv->v_head, O, hdv);
    for (int b = b0; b < b1; b++)
        memcpy(c->att_out + (size_t)b * od + (size_t)g * group * hdv, O + (size_t)(b - b0) * group * hdv,
               (size_t)group * hdv * sizeof(float));
}

static int attention(pk_context *c, const pk_layer *L, int il) {
    const pk_hparams *hp = &c->m->hp;
    const int hd = hp->head_dim, B = c->cur_batch, pos0 = c->pos, D = hp->n_embd;
    const int qd = hp->n_head * hd, od = hp->n_head * hp->head_dim_v;
    const int kd = c->kv.k_dim, vd = c->kv.v_dim;
    const int gated = c->m->arch->attn_gate;

    /* V rows go straight into an F32 cache at their positions, or to c->vb
       and then converted into a typed cache; K rows to c->kb, then
       transposed into an F32 cache or converted row by row */
    const int tk = c->kv.type_k, tv = c->kv.type_v;
    float *vrows = tv == PK_TYPE_F32 ? pk_kv_v(&c->kv, il, pos0) : c->vb;
    pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);
    pk_mv qkv[3] = {
        {&L->wq, 0, L->wq.ne[1], PK_SLOT_X, B, NULL, gated ? c->qg : c->q, L->wq.ne[1]},
        {&L->wk, 0, L->wk.ne[1], PK_SLOT_X, B, NULL, c->kb, kd},
        {&L->wv, 0, L->wv.ne[1], PK_SLOT_X, B, NULL, vrows, vd},
    };
    pk_matvec(c, qkv, 3);
    add_bias(c, c->q, &L->bq, qd, B, qd);
    add_bias(c, c->kb, &L->bk, kd, B, kd);
    add_bias(c, vrows, &L->bv, vd, B, vd);
    const int nkv = hp->n_head_kv, hdv = hp->head_dim_v;
    if (tv != PK_TYPE_F32)   /* every variant's quantizer is bit-exact with the reference */
        for (int g = 0; g < nkv; g++)
            for (int b = 0; b < B; b++)
                c->kern->quantize[tv](vrows + (size_t)b * vd + (size_t)g * hdv,
                                      pk_kv_vh(&c->kv, il, g, pos0 + b), hdv);
    for (int b = 0; b < B; b++) {
        float *q = c->q + (size_t)b * qd, *k = c->kb + (size_t)b * kd;
        if (gated) { /* q and gate are interleaved per head: [q_h | gate_h] */
            const float *qg = c->qg + (size_t)b * 2 * qd;
            for (int h = 0; h < hp->n_head; h++) {
                memcpy(q + (size_t)h * hd, qg + (size_t)h * 2 * hd, (size_t)hd * sizeof(float));
                memcpy(c->gate + (size_t)b * qd + (size_t)h * hd, qg + (size_t)h * 2 * hd + hd,
                       (size_t)hd * sizeof(float));
            }
        }
        if (L->q_norm.data) {
            rmsnorm_rows(c, q, q, &L->q_norm, hd, hp->n_head, hd);
            rmsnorm_rows(c, k, k, &L->k_norm, hd, hp->n_head_kv, hd);
        }
    }
    if (L->q_norm.data) /* rmsnorm_rows counts a norm vector once per call: once per batch, not per token */
        c->weight_bytes -= (uint64_t)(B - 1) * (L->q_norm.row_bytes + L->k_norm.row_bytes);
    for (int b = 0; b < B; b++) {
        rope_apply(c, c->q + (size_t)b * qd, hp->n_head, hd, pos0 + b);
        rope_apply(c, c->kb + (size_t)b * kd, hp->n_head_kv, hd, pos0 + b);
    }
    if (tk == PK_TYPE_F32)
        for (int i = 0; i < kd; i++) {
            float *kt = pk_kv_kt(&c->kv, il, i) + pos0;
            for (int b = 0; b < B; b++) kt[b] = c->kb[(size_t)b * kd + i];
        }
    else
        for (int g = 0; g < nkv; g++)
            for (int b = 0; b < B; b++)
                c->kern->quantize[tk](c->kb + (size_t)b * kd + (size_t)g * hd,
                                      pk_kv_k(&c->kv, il, g, pos0 + b), hd);

    /* chunks of up to 16 tokens per kv head, fewer if their scores would
       pass 4 MiB */
    att_task t = {c, il, pos0, B, 16, 0};
    while (t.tb > 1 && (int64_t)t.tb * (hp->n_head / hp->n_head_kv) * (pos0 + B) > (1 << 20)) t.tb /= 2;
    t.n_tb = (B + t.tb - 1) / t.tb;
    /* state ledger: each token tile reads the cached keys and values of the
       positions it sees (at most pos0 + B); the batch writes its own rows
       (bytes in the cache's types) */
    const uint64_t kv_row = (uint64_t)(c->kv.k_row + c->kv.v_row);
    c->state_bytes += (uint64_t)t.n_tb * (uint64_t)(pos0 + B) * kv_row + (uint64_t)B * kv_row;
    const int chunks = t.n_tb * hp->n_head_kv;
    c->scratch_oom = 0;
    /* small attention spans are not worth a hand-off: run them on the caller */
    if ((int64_t)B * (pos0 + B) * hp->n_head * (hd + hp->head_dim_v) < (1 << 15))
        for (int i = 0; i < chunks; i++) att_run(&t, i);
    else
        pk_pool_run(c->pool, att_run, &t, chunks);
    if (c->scratch_oom) return PK_ERR_NOMEM;

    if (gated)
        for (int i = 0; i < B * od; i++) c->att_out[i] *= 1.0f / (1.0f + expf(-c->gate[i]));
    pk_act_set(c, PK_SLOT_ATT, c->att_out, B, od, 0);
    pk_mv o = {&L->wo, 0, D, PK_SLOT_ATT, B, NULL, c->xb2, D};
    pk_matvec(c, &o, 1);
    return PK_OK;
}

/* ---- feed-forward ----------------------------------------------------------------- */

static void ffn_dense(pk_context *c, const pk_layer *L) {
    const int F = (int)L->ffn_gate.ne[1], D = c->m->hp.n_embd, B = c->cur_batch;
    pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);
    pk_mv gu[2] = {
        {&L->ffn_gate, 0, F, PK_SLOT_X, B, NULL, c->hb, F},
        {&L->ffn_up, 0, F, PK_SLOT_X, B, NULL, c->hb2, F},
    };
    pk_matvec(c, gu, 2);
    c->kern->silu_mul(c->hb, c->hb2, (int64_t)B * F);
    pk_act_set(c, PK_SLOT_FFN, c->hb, B, F, 0);
    pk_mv d = {&L->ffn_down, 0, D, PK_SLOT_FFN, B, NULL, c->xb2, D};
    pk_matvec(c, &d, 1);
}

/* ---- a batch ---------------------------------------------------------------------------- */

int pk_forward_batch(pk_context *c, const int32_t *tokens, int n, float *logits, int all_rows) {
    const pk_model *m = c->m;
    const pk_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    /* every buffer of the context holds n_batch rows (context.c); the KV
       cache holds n_ctx positions; ids were checked by pk_decode */
    PK_ASSERT(n >= 1 && n <= c->n_batch && c->pos + n <= c->n_ctx);
    c->cur_batch = n;
    const uint64_t bytes0 = c->weight_bytes, guess0 = c->guess_bytes;   /* for the ledger check below */
    (void)bytes0, (void)guess0;
    for (int b = 0; b < n; b++) {
        PK_ASSERT(tokens[b] >= 0 && tokens[b] < hp->n_vocab);
        pk_get_row(c, &m->tok_embd, tokens[b], c->x + (size_t)b * D);
    }
    for (int il = 0; il < hp->n_layer; il++) {
        const pk_layer *L = &m->layers[il];
        rmsnorm_rows(c, c->xb, c->x, &L->attn_norm, D, n, D);
        if (m->recurrent && m->recurrent[il]) {
            c->scratch_oom = 0;
            pk_deltanet_forward(c, L, il);
            if (c->scratch_oom) return PK_ERR_NOMEM;
        }
        else if (attention(c, L, il) != PK_OK) return PK_ERR_NOMEM;
        for (int i = 0; i < n * D; i++) c->x[i] += c->xb2[i];
        rmsnorm_rows(c, c->xb, c->x, &L->ffn_norm, D, n, D);
        if (hp->moe) {
            int rc = pk_moe_forward(c, L);
            if (rc) return rc;
        } else {
            ffn_dense(c, L);
        }
        for (int i = 0; i < n * D; i++) c->x[i] += c->xb2[i];
    }
    c->pos += n;
    c->n_tokens += (uint64_t)n;
    if (!logits) return PK_OK;
    /* the output head for the last row, or for every row */
    const int first = all_rows ? 0 : n - 1, rows = n - first;
    rmsnorm_rows(c, c->xb, c->x + (size_t)first * D, &m->output_norm, D, rows, D);
    pk_act_set(c, PK_SLOT_X, c->xb, rows, D, 0);
    pk_mv o = {&m->output, 0, hp->n_vocab, PK_SLOT_X, rows, NULL, logits, hp->n_vocab};
    pk_matvec(c, &o, 1);
    /* the weight-byte ledger: every weight read is counted (pk_matvec,
       pk_get_row, the norms here, deltanet.c's small tensors), so one token
       reads exactly what model.c's count_params says a token reads */
    /* (the expert cache's read-ahead guesses read routers on top: moe.c) */
    PK_ASSERT(n != 1 || c->weight_bytes - bytes0 - (c->guess_bytes - guess0) == m->bytes_per_token);
    return PK_OK;
}
