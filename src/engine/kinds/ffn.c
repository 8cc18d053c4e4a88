/* engine/kinds/ffn.c - the dense FFN kind: a SwiGLU (or GeGLU: the plan's act)
 * feed-forward block,
 *   y = ffn_down . (silu(ffn_gate . x) * (ffn_up . x))
 * for every row of the batch, the gate and up products as one parallel
 * section.
 */
#include <stdio.h>
#include "engine/context.h"

typedef struct dense_ws {
    float *hb, *hb2;   /* (F) gate and up products */
} dense_ws;

static size_t dense_layout(const pk_context *c, const pk_ffn_shape *f, void *base, dense_ws *w) {
    pk_arena ar = {base, 0};
    w->hb = pk_arena_take(&ar, (size_t)c->n_batch * f->n_ff, sizeof(float));
    w->hb2 = pk_arena_take(&ar, (size_t)c->n_batch * f->n_ff, sizeof(float));
    return ar.used;
}

size_t pk_ffn_dense_bytes(const pk_context *c, const pk_block *b) {
    dense_ws w;
    return dense_layout(c, &b->ff, NULL, &w);
}

int pk_ffn_dense_run(pk_context *c, const pk_block *b, const pk_layer *L, void *arena) {
    const int F = b->ff.n_ff, D = c->m->hp.n_embd, B = c->cur_batch;
    dense_ws w;
    const size_t used = dense_layout(c, &b->ff, arena, &w);
    /* the kind's scratch (or the enclosing kind's) asked for it */
    PK_ASSERT((size_t)((unsigned char *)arena - c->arena) + used <= c->arena_bytes);
    (void)used;
    pk_act_set(c, PK_SLOT_X, c->xb, B, D, 0);
    pk_mv gu[2] = {
        {.w = &L->ffn_gate, .row0 = 0, .nrows = F, .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = w.hb,
         .y_stride = F},
        {.w = &L->ffn_up, .row0 = 0, .nrows = F, .slot = PK_SLOT_X, .n_tok = B, .idx = NULL, .y = w.hb2, .y_stride = F},
    };
    pk_matvec(c, gu, 2);
    pk_act_mul(c, b->ff.act, w.hb, w.hb2, (int64_t)B * F);
    pk_act_set(c, PK_SLOT_FFN, w.hb, B, F, 0);
    pk_mv d = {.w = &L->ffn_down, .row0 = 0, .nrows = D, .slot = PK_SLOT_FFN, .n_tok = B, .idx = NULL, .y = c->xb2,
               .y_stride = D};
    pk_matvec(c, &d, 1);
    return PK_OK;
}

static int dense_forward(pk_context *c, const pk_block *b, const pk_layer *L, int il) {
    return pk_ffn_dense_run(c, b, L, c->arena);
}

static int dense_bind(pk_model *m, int il, pk_error *err) {
    pk_layer *L = &m->layers[il];
    const int64_t D = m->hp.n_embd, F = m->blocks[il].ff.n_ff;
    const pk_tensor_spec spec[] = {
        {.t = &L->ffn_gate, .suffix = "ffn_gate.weight", .required = 1, .n_dims = 2, .ne = {D, F}},
        {.t = &L->ffn_up, .suffix = "ffn_up.weight", .required = 1, .n_dims = 2, .ne = {D, F}},
        {.t = &L->ffn_down, .suffix = "ffn_down.weight", .required = 1, .n_dims = 2, .ne = {F, D}},
    };
    return pk_bind_specs(m, il, spec, (int)(sizeof spec / sizeof spec[0]), err);
}

static void dense_scratch(const pk_context *c, const pk_block *b, pk_scratch *s) {
    dense_ws w;
    const int64_t B = c->n_batch;
    pk_scratch_raise(s, (int64_t)dense_layout(c, &b->ff, NULL, &w), PK_SLOT_FFN, B * b->ff.n_ff, 2, 2 * B);
}

static int dense_describe(const pk_model *m, const pk_block *b, char *buf, size_t cap) {
    return snprintf(buf, cap, "dense(ff %d%s)", b->ff.n_ff, b->ff.act == PK_ACT_GELU ? ", gelu" : "");
}

const pk_block_kind pk_ffn_dense = {.name = "dense", .bind = dense_bind, .memory = NULL, .scratch = dense_scratch,
                                    .forward = dense_forward, .describe = dense_describe};
