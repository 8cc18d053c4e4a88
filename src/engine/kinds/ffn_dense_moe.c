/* engine/kinds/ffn_dense_moe.c - the "dense+moe" FFN kind (gemma4): every layer with a
 * router runs a dense MLP and routed experts side by side, each with its
 * own input and output norms, on the residual stream a (c->x):
 *   m = rms(dense(rms(a, ffn_norm)), post_ffw_norm_1)      (c->xb holds the input)
 *   r = rms(a) / sqrt(D) * ffn_gate_inp.scale                the router's input
 *   n = rms(moe_r(rms(a, pre_ffw_norm_2)), post_ffw_norm_2)  routed by r; expert e's
 *                                                            output * ffn_down_exps.scale[e]
 *   c->xb2 = m + n     (engine/forward.c then norms it with post_ffw_norm and adds it)
 * The dense MLP and the experts are engine/kinds/ffn.c's and engine/kinds/moe.c's (pk_ffn_dense_run,
 * pk_ffn_moe_run) with the plan's activation (GELU for gemma4).
 */
#include <math.h>
#include <stdio.h>
#include "engine/context.h"

typedef struct dm_ws {
    float *mlp;    /* (D) the dense MLP's normed output */
    float *rin;    /* (D) the router's input */
    void *sub;     /* the dense MLP's, then the experts' working memory */
} dm_ws;

/* the dense MLP's plan: the layer's, with the dense hidden size */
static pk_block dense_part(const pk_block *b) {
    pk_block d = *b;
    d.ff.n_ff = b->ff.n_ff_dense;
    return d;
}

static size_t dm_layout(const pk_context *c, const pk_block *b, void *base, dm_ws *w) {
    pk_arena ar = {base, 0};
    const size_t BD = (size_t)c->n_batch * c->m->hp.n_embd;
    const pk_block d = dense_part(b);
    const size_t dn = pk_ffn_dense_bytes(c, &d), mo = pk_ffn_moe_bytes(c, b);
    w->mlp = pk_arena_take(&ar, BD, sizeof(float));
    w->rin = pk_arena_take(&ar, BD, sizeof(float));
    w->sub = pk_arena_take(&ar, dn > mo ? dn : mo, 1);
    return ar.used;
}

static int dm_forward(pk_context *c, const pk_block *b, const pk_layer *L, int il) {
    const int D = c->m->hp.n_embd, B = c->cur_batch;
    const float eps = c->m->hp.rms_eps, inv_sqrt_d = 1.0f / sqrtf((float)D);
    dm_ws w;
    const size_t used = dm_layout(c, b, c->arena, &w);
    PK_ASSERT(used <= c->arena_bytes);   /* dm_scratch asked for it */
    (void)used;
    const pk_block d = dense_part(b);
    int rc = pk_ffn_dense_run(c, &d, L, w.sub);
    if (rc) return rc;
    pk_rmsnorm_rows(c, w.mlp, c->xb2, &L->post_ffn_norm_1, D, B, D);
    float *sc = pk_row_buf(c, D);   /* the context's rows hold D */
    pk_get_row(c, &L->gate_inp_scale, 0, sc);
    for (int t = 0; t < B; t++) {   /* ggml: rms_norm, scale by 1/sqrtf(D), mul */
        float *r = w.rin + (size_t)t * D;
        pk_rmsnorm(r, c->x + (size_t)t * D, NULL, D, eps);
        for (int i = 0; i < D; i++) r[i] = r[i] * inv_sqrt_d * sc[i];
    }
    pk_rmsnorm_rows(c, c->xb, c->x, &L->pre_ffn_norm_2, D, B, D);
    if ((rc = pk_ffn_moe_run(c, b, L, il, w.sub, w.rin))) return rc;
    pk_rmsnorm_rows(c, c->xb2, c->xb2, &L->post_ffn_norm_2, D, B, D);
    for (int i = 0; i < B * D; i++) c->xb2[i] += w.mlp[i];
    return PK_OK;
}

static int dm_bind(pk_model *m, int il, pk_error *err) {
    pk_layer *L = &m->layers[il];
    const pk_ffn_shape *f = &m->blocks[il].ff;
    const int64_t D = m->hp.n_embd, F = f->n_ff_dense;
    const pk_tensor_spec spec[] = {
        {.t = &L->ffn_gate, .suffix = "ffn_gate.weight", .required = 1, .n_dims = 2, .ne = {D, F}},
        {.t = &L->ffn_up, .suffix = "ffn_up.weight", .required = 1, .n_dims = 2, .ne = {D, F}},
        {.t = &L->ffn_down, .suffix = "ffn_down.weight", .required = 1, .n_dims = 2, .ne = {F, D}},
        {.t = &L->post_ffn_norm_1, .suffix = "post_ffw_norm_1.weight", .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &L->gate_inp_scale, .suffix = "ffn_gate_inp.scale", .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &L->pre_ffn_norm_2, .suffix = "pre_ffw_norm_2.weight", .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &L->post_ffn_norm_2, .suffix = "post_ffw_norm_2.weight", .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &L->down_exps_scale, .suffix = "ffn_down_exps.scale", .required = 1, .n_dims = 1, .ne = {f->n_expert},
         .experts = PK_EXPERT_DIM_0},
    };
    const int rc = pk_bind_specs(m, il, spec, (int)(sizeof spec / sizeof spec[0]), err);
    return rc ? rc : pk_ffn_moe.bind(m, il, err);
}

/* the parts' slots, jobs and rows; the arena holds m, r and the larger part */
static void dm_scratch(const pk_context *c, const pk_block *b, pk_scratch *s) {
    const pk_block d = dense_part(b);
    dm_ws w;
    pk_ffn_dense.scratch(c, &d, s);
    pk_ffn_moe.scratch(c, b, s);
    pk_raise(&s->arena, (int64_t)dm_layout(c, b, NULL, &w));
}

static int dm_describe(const pk_model *m, const pk_block *b, char *buf, size_t cap) {
    const pk_ffn_shape *f = &b->ff;
    return snprintf(buf, cap, "dense+moe(ff %d + top-%d of %d, ff %d%s)", f->n_ff_dense, f->n_expert_used,
                    f->n_expert, f->n_ff, f->act == PK_ACT_GELU ? ", gelu" : "");
}

const pk_block_kind pk_ffn_dense_moe = {.name = "dense+moe", .bind = dm_bind, .memory = NULL, .scratch = dm_scratch,
                                        .forward = dm_forward, .describe = dm_describe};
