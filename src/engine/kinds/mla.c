/* engine/kinds/mla.c - the latent attention mixer kind (multi-head latent attention,
 * DeepSeek-V2/V3's MLA) in llama.cpp's absorbed form, over a K-only cache
 * of one latent row per position (engine/kv.h, PK_MEM_LATENT).
 *
 * For the layer input h of each token, with the layer's shape (model/blocks.h:
 * H heads, per head q/k dims nope + n_rot, latent width r, value dims dv):
 *   q = attn_q . h            (or attn_q_b . rms(attn_q_a . h, attn_q_a_norm))
 *   per head q = [q_nope | q_pe]
 *   [c | k_pe] = attn_kv_a_mqa . h;  c = rms(c, attn_kv_a_norm)
 *   q_pe (each head), k_pe (once) rotated; [c | k_pe] appended to the cache
 *   per head: qa = [K_b,h q_nope | q_pe]   (attn_k_b slice h: nope -> r)
 *             s_j = scale (qa . [c_j | k_pe_j]),  j <= i
 *             o   = V_b,h sum_j softmax_j(s) c_j  (attn_v_b slice h: r -> dv)
 *   out = attn_output . concat_h(o)
 * The cached row serves as key (all of it) and as value (its first r
 * elements), for every head: the products run over all heads of a chunk of
 * tokens at once (sgemm), each cached row converted once per chunk.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "engine/context.h"

/* The kind's buffers in the context's arena, for a batch of B tokens. */
typedef struct mla_ws {
    float *q;        /* (n_head * (nope + n_rot)) [q_nope | q_pe] per head */
    float *qlo;      /* (q_lora) the q LoRA's low-rank row (q_lora only) */
    float *kv;       /* (r + n_rot) [c | k_pe] before the cache */
    float *qa;       /* (n_head * (r + n_rot)) absorbed queries [K_b q_nope | q_pe] */
    float *lat;      /* (n_head * r) attended latent per head */
    float *att_out;  /* (n_head * dv) */
} mla_ws;

static size_t mla_layout(const pk_context *c, const pk_mla_shape *a, void *base, mla_ws *w) {
    pk_arena ar = {base, 0};
    const size_t B = (size_t)c->n_batch, H = (size_t)a->n_head, L = (size_t)(a->kv_lora + a->n_rot);
    w->q = pk_arena_take(&ar, B * H * (size_t)(a->nope + a->n_rot), sizeof(float));
    w->qlo = a->q_lora ? pk_arena_take(&ar, B * (size_t)a->q_lora, sizeof(float)) : NULL;
    w->kv = pk_arena_take(&ar, B * L, sizeof(float));
    w->qa = pk_arena_take(&ar, B * H * L, sizeof(float));
    w->lat = pk_arena_take(&ar, B * H * (size_t)a->kv_lora, sizeof(float));
    w->att_out = pk_arena_take(&ar, B * H * (size_t)a->head_dim_v, sizeof(float));
    return ar.used;
}

typedef struct mla_task {
    pk_context *c;
    const pk_mla_shape *a;
    const mla_ws *w;
    int layer, pos0, n;
    int tb, n_tb;      /* tokens per chunk, token chunks */
    int hg, n_hg;      /* heads per chunk, head chunks */
} mla_task;

/* One chunk: tokens b0..b1-1 of the batch and heads h0..h1-1, M = (b1 -
 * b0) (h1 - h0) query rows, over the cached rows 0..nk-1 (nk = pos0 + b1;
 * K, nk x L floats: the F32 cache itself, or the rows converted):
 *   S^T = K Q^T       (sgemm; each score one sum in order over the L dims)
 *   P = softmax of each row of S over its own positions, 0 beyond
 *   O = P K[:, 0:r]   (the latent is the value)
 * Every element is a sum in order over its k (pk_sgemm_fn) and zero
 * probabilities add exact zeros, so a query's result does not depend on
 * the other queries of its chunk: batched and one-token attention agree
 * bitwise. */
static void mla_run(void *arg, int chunk) {
    const mla_task *t = arg;
    pk_context *c = t->c;
    const pk_mla_shape *a = t->a;
    const pk_kv *kv = &c->kv;
    const int H = a->n_head, r = a->kv_lora, L = r + a->n_rot;
    const int hc = chunk % t->n_hg, blk = t->n_tb - 1 - chunk / t->n_hg;   /* the latest tokens first */
    const int h0 = hc * t->hg, h1 = h0 + t->hg < H ? h0 + t->hg : H, nh = h1 - h0;
    const int b0 = blk * t->tb, b1 = b0 + t->tb < t->n ? b0 + t->tb : t->n;
    const int M = (b1 - b0) * nh, nk = t->pos0 + b1;
    const int f32 = kv->type_k == PK_TYPE_F32;
    const size_t need = (size_t)L * M + 2 * (size_t)nk * M + (size_t)M * r + (f32 ? 0 : (size_t)nk * L);
    float *QT = pk_thread_scratch(sizeof(float) * need);
    if (!QT) { c->scratch_oom = 1; return; }
    float *ST = QT + (size_t)L * M, *S = ST + (size_t)nk * M, *O = S + (size_t)nk * M;
    const float *K = (const float *)pk_kv_lat(kv, t->layer, 0);
    if (!f32) {
        float *Kc = O + (size_t)M * r;
        const pk_type_traits *tt = pk_type_get(kv->type_k);
        for (int p = 0; p < nk; p++) tt->to_float(pk_kv_lat(kv, t->layer, p), Kc + (size_t)p * L, L);
        K = Kc;
    }
    for (int b = b0; b < b1; b++)
        for (int h = h0; h < h1; h++) {
            const float *q = t->w->qa + ((size_t)b * H + h) * L;
            const int m = (b - b0) * nh + (h - h0);
            for (int k = 0; k < L; k++) QT[(size_t)k * M + m] = q[k];
        }
    pk_kern_sgemm(c->kern, nk, M, L, K, L, QT, M, ST, M);
    for (int m = 0; m < M; m++) {
        const int last = t->pos0 + b0 + m / nh;
        float *sc = S + (size_t)m * nk, mx = -INFINITY;
        for (int p = 0; p <= last; p++) {
            sc[p] = ST[(size_t)p * M + m] * a->scale;
            if (sc[p] > mx) mx = sc[p];
        }
        pk_kern_exp_sub(c->kern, sc, last + 1, mx);
        double sum = 0.0;
        for (int p = 0; p <= last; p++) sum += sc[p];
        const float inv = (float)(1.0 / sum);
        for (int p = 0; p <= last; p++) sc[p] *= inv;
        for (int p = last + 1; p < nk; p++) sc[p] = 0.0f;
    }
    pk_kern_sgemm(c->kern, M, r, nk, S, nk, K, L, O, r);
    for (int b = b0; b < b1; b++)
        memcpy(t->w->lat + ((size_t)b * H + h0) * r, O + (size_t)(b - b0) * nh * r, (size_t)nh * r * sizeof(float));
}

/* For every head h: rows y + h y_off (B of them, y_stride apart) = slice h
 * of the per-head matrix w (rows h n_out ..) times the B rows at x + h
 * x_off (x_stride apart); one product per head, each weight row read once. */
static void per_head(pk_context *c, const pk_tensor *w, int H, int n_in, int n_out, const float *x, int x_off,
                     int64_t x_stride, float *y, int y_off, int64_t y_stride) {
    const int B = c->cur_batch;
    for (int h = 0; h < H; h++) {
        pk_act_set(c, PK_SLOT_ATT, x + (size_t)h * x_off, B, n_in, x_stride);
        pk_mv mv = {.w = w, .row0 = (int64_t)h * n_out, .nrows = n_out, .slot = PK_SLOT_ATT, .n_tok = B, .idx = NULL,
                    .y = y + (size_t)h * y_off, .y_stride = y_stride};
        pk_matvec(c, &mv, 1);
    }
}

static int mla_forward(pk_context *c, const pk_block *bk, const pk_layer *L, int il) {
    const pk_mla_shape *a = &bk->mla;
    const int B = c->cur_batch, pos0 = c->pos, D = c->m->hp.n_embd;
    const int H = a->n_head, r = a->kv_lora, Lw = r + a->n_rot, qk = a->nope + a->n_rot, dv = a->head_dim_v;
    PK_ASSERT(c->kv.slot[il] >= 0 && c->kv.lat_dim == Lw);   /* mla_memory asked for it */
    mla_ws w;
    const size_t used = mla_layout(c, a, c->arena, &w);
    PK_ASSERT(used <= c->arena_bytes);   /* mla_scratch asked for it */
    (void)used;

    /* q (directly or through the q LoRA) and [c | k_pe] */
    pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);
    pk_mv in[2] = {
        {.w = &L->wkv_a, .row0 = 0, .nrows = Lw, .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = w.kv, .y_stride = Lw},
        {.w = a->q_lora ? &L->wq_a : &L->wq, .row0 = 0, .nrows = a->q_lora ? a->q_lora : H * qk, .slot = PK_SLOT_X,
         .n_tok = B, .idx = NULL, .y = a->q_lora ? w.qlo : w.q, .y_stride = a->q_lora ? a->q_lora : H * qk},
    };
    pk_matvec(c, in, 2);
    if (a->q_lora) {
        pk_rmsnorm_rows(c, w.qlo, w.qlo, &L->q_a_norm, a->q_lora, B, a->q_lora);
        pk_act_set(c, PK_SLOT_FFN, w.qlo, B, a->q_lora, 0);
        pk_mv qb = {.w = &L->wq_b, .row0 = 0, .nrows = H * qk, .slot = PK_SLOT_FFN, .n_tok = B, .idx = NULL, .y = w.q,
                    .y_stride = H * qk};
        pk_matvec(c, &qb, 1);
    }
    pk_rmsnorm_rows(c, w.kv, w.kv, &L->kv_a_norm, r, B, Lw);
    for (int b = 0; b < B; b++) {
        pk_rope_rows(c, a->rope, a->rope_style, a->n_rot, w.q + (size_t)b * H * qk + a->nope, H, qk, pos0 + b);
        pk_rope_rows(c, a->rope, a->rope_style, a->n_rot, w.kv + (size_t)b * Lw + r, 1, Lw, pos0 + b);
    }
    const int tk = c->kv.type_k;
    for (int b = 0; b < B; b++) {
        if (tk == PK_TYPE_F32)
            memcpy(pk_kv_lat(&c->kv, il, pos0 + b), w.kv + (size_t)b * Lw, (size_t)Lw * sizeof(float));
        else   /* every variant's quantizer is bit-exact with the reference */
            pk_kern_quantize(c->kern, tk, w.kv + (size_t)b * Lw, pk_kv_lat(&c->kv, il, pos0 + b), Lw);
    }

    /* absorbed queries: per head [K_b,h q_nope | q_pe] */
    per_head(c, &L->wk_b, H, a->nope, r, w.q, qk, (int64_t)H * qk, w.qa, Lw, (int64_t)H * Lw);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            memcpy(w.qa + ((size_t)b * H + h) * Lw + r, w.q + ((size_t)b * H + h) * qk + a->nope,
                   (size_t)a->n_rot * sizeof(float));

    /* chunks of up to 16 tokens by all heads (each chunk converts the
       cached rows it reads once), by up to 4 heads when that leaves fewer
       than two chunks per thread; fewer tokens if their scores would pass
       4 MiB */
    mla_task t = {.c = c, .a = a, .w = &w, .layer = il, .pos0 = pos0, .n = B, .tb = 16, .n_tb = 0, .hg = H, .n_hg = 0};
    for (int pass = 0; pass < 2; pass++) {
        t.tb = 16;
        while (t.tb > 1 && (int64_t)t.tb * t.hg * (pos0 + B) > (1 << 20)) t.tb /= 2;
        t.n_tb = (B + t.tb - 1) / t.tb;
        if (t.n_tb >= 2 * pk_pool_size(c->pool) || t.hg <= 4) break;
        t.hg = 4;
    }
    t.n_hg = (H + t.hg - 1) / t.hg;
    /* state ledger: each chunk reads the rows of the positions it sees (at
       most pos0 + B); the batch writes its own rows */
    const uint64_t row = (uint64_t)c->kv.lat_row;
    c->state_bytes += (uint64_t)t.n_tb * t.n_hg * (uint64_t)(pos0 + B) * row + (uint64_t)B * row;
    const int chunks = t.n_tb * t.n_hg;
    c->scratch_oom = 0;
    if ((int64_t)B * (pos0 + B) * H * (Lw + r) < (1 << 15))   /* small: not worth a hand-off */
        for (int i = 0; i < chunks; i++) mla_run(&t, i);
    else
        pk_pool_run(c->pool, mla_run, &t, chunks);
    if (c->scratch_oom) return PK_ERR_NOMEM;

    /* values: per head V_b,h o; then the output projection */
    per_head(c, &L->wv_b, H, r, dv, w.lat, r, (int64_t)H * r, w.att_out, dv, (int64_t)H * dv);
    pk_act_set(c, PK_SLOT_ATT, w.att_out, B, (int64_t)H * dv, 0);
    pk_mv o = {.w = &L->wo, .row0 = 0, .nrows = D, .slot = PK_SLOT_ATT, .n_tok = B, .idx = NULL, .y = c->xb2,
               .y_stride = D};
    pk_matvec(c, &o, 1);
    return PK_OK;
}

/* ---- the kind's other methods ----------------------------------------------------- */

static int mla_bind(pk_model *m, int il, pk_error *err) {
    const pk_mla_shape *a = &m->blocks[il].mla;
    pk_layer *L = &m->layers[il];
    const int64_t D = m->hp.n_embd, H = a->n_head, r = a->kv_lora, ql = a->q_lora;
    const int64_t qk = a->nope + a->n_rot;
    const pk_tensor_spec spec[] = {
        {.t = &L->wq, .suffix = ql ? NULL : "attn_q.weight", .required = 1, .n_dims = 2, .ne = {D, H * qk}},
        {.t = &L->wq_a, .suffix = ql ? "attn_q_a.weight" : NULL, .required = 1, .n_dims = 2, .ne = {D, ql}},
        {.t = &L->q_a_norm, .suffix = ql ? "attn_q_a_norm.weight" : NULL, .required = 1, .n_dims = 1, .ne = {ql}},
        {.t = &L->wq_b, .suffix = ql ? "attn_q_b.weight" : NULL, .required = 1, .n_dims = 2, .ne = {ql, H * qk}},
        {.t = &L->wkv_a, .suffix = "attn_kv_a_mqa.weight", .required = 1, .n_dims = 2, .ne = {D, r + a->n_rot}},
        {.t = &L->kv_a_norm, .suffix = "attn_kv_a_norm.weight", .required = 1, .n_dims = 1, .ne = {r}},
        {.t = &L->wk_b, .suffix = "attn_k_b.weight", .required = 1, .n_dims = 3, .ne = {a->nope, r, H}},
        {.t = &L->wv_b, .suffix = "attn_v_b.weight", .required = 1, .n_dims = 3, .ne = {r, a->head_dim_v, H}},
        {.t = &L->wo, .suffix = "attn_output.weight", .required = 1, .n_dims = 2, .ne = {H * a->head_dim_v, D}},
    };
    return pk_bind_specs(m, il, spec, (int)(sizeof spec / sizeof spec[0]), err);
}

/* one latent row [c | k_pe] per position */
static void mla_memory(const pk_model *m, const pk_block *b, pk_kv_need *out) {
    *out = (pk_kv_need){.kind = PK_MEM_LATENT, .lat_dim = b->mla.kv_lora + b->mla.n_rot};
}

/* q and [c | k_pe] in one call of 2 jobs; the per-head products and the
   output projection read slot ATT, the q LoRA's second product slot FFN */
static void mla_scratch(const pk_context *c, const pk_block *b, pk_scratch *s) {
    const pk_mla_shape *a = &b->mla;
    mla_ws w;
    const int64_t B = c->n_batch, H = a->n_head;
    int64_t att = B * H * a->head_dim_v;
    pk_raise(&att, B * a->nope);
    pk_raise(&att, B * a->kv_lora);
    pk_scratch_raise(s, (int64_t)mla_layout(c, a, NULL, &w), PK_SLOT_ATT, att, 2, 2 * B);
    pk_raise(&s->slot[PK_SLOT_FFN], B * a->q_lora);
    pk_raise(&s->row, a->q_lora);    /* the q LoRA and latent norms (pk_rmsnorm_rows) */
    pk_raise(&s->row, a->kv_lora);
}

static int mla_describe(const pk_model *m, const pk_block *b, char *buf, size_t cap) {
    const pk_mla_shape *a = &b->mla;
    char ql[32];
    snprintf(ql, sizeof ql, ", q lora %d", a->q_lora);
    return snprintf(buf, cap, "mla(%d heads, q/k %d + rope %d, latent %d, v %d%s)", a->n_head, a->nope, a->n_rot,
                    a->kv_lora, a->head_dim_v, a->q_lora ? ql : "");
}

const pk_block_kind pk_mixer_mla = {.name = "mla", .bind = mla_bind, .memory = mla_memory, .scratch = mla_scratch,
                                    .forward = mla_forward, .describe = mla_describe};
