/* context.c - create and drive a decoding context (public API in pocket.h).
 * Everything a token needs is allocated here, once: decoding allocates
 * nothing. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "context.h"

pk_context_params pk_context_default_params(void) {
    pk_context_params p = {0, 0};
    return p;
}

static int max3(int a, int b, int c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Bitmask of activation types the model's matrices want. */
static uint64_t act_types(const pk_model *m) {
    uint64_t mask = 0;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const pk_type_traits *tt = pk_type_get(m->gguf->tensors[i].type);
        if (tt && tt->vec_dot_type >= 0) mask |= 1ull << tt->vec_dot_type;
    }
    return mask;
}

int pk_context_new(const pk_model *m, const pk_context_params *params, pk_context **out,
                   pk_error *err) {
    *out = NULL;
    pk_context_params p = params ? *params : pk_context_default_params();
    const pk_hparams *hp = &m->hp;
    if (p.n_ctx < 0 || p.n_ctx > (1 << 22))
        return pk_errorf(err, PK_ERR_ARG, "context size %d is out of range [1, %d]", p.n_ctx, 1 << 22);
    if (p.n_threads < 0 || p.n_threads > 512)
        return pk_errorf(err, PK_ERR_ARG, "thread count %d is out of range [1, 512]", p.n_threads);
    if (p.n_ctx == 0) p.n_ctx = hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096;
    if (p.n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        p.n_threads = n > 0 ? (int)n : 1;
    }
    pk_context *c = pk_calloc(1, sizeof *c);
    if (!c) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    c->m = m;
    c->n_ctx = p.n_ctx;
    c->kern = pk_kernels_get();
    const int D = hp->n_embd, qd = hp->n_head * hp->head_dim, vd = hp->n_head * hp->head_dim_v;
    const int K = hp->moe ? hp->n_expert_used : 0;
    const int ffh = max3(hp->n_ff, K * hp->n_ff_exp, hp->n_ff_shexp);
    const int C = hp->ssm_channels, VD = hp->ssm_v_heads * hp->ssm_state;
    int ok = pk_kv_init(&c->kv, hp->n_layer, m->recurrent, p.n_ctx, hp->n_head_kv * hp->head_dim,
                        hp->n_head_kv * hp->head_dim_v, hp->ssm_conv > 0 ? hp->ssm_conv - 1 : 0, C,
                        hp->ssm_v_heads * hp->ssm_state * hp->ssm_state) == PK_OK;
    ok = ok && (c->pool = pk_pool_new(p.n_threads));
#define ALLOC(ptr, n) ok = ok && ((ptr) = pk_calloc((size_t)(n), sizeof *(ptr)))
    ALLOC(c->x, D);
    ALLOC(c->xb, D);
    ALLOC(c->xb2, D);
    ALLOC(c->q, qd);
    ALLOC(c->qg, 2 * qd);
    ALLOC(c->gate, qd);
    ALLOC(c->ssm_qkv, C > 0 ? C : 1);
    ALLOC(c->ssm_z, VD > 0 ? VD : 1);
    ALLOC(c->ssm_beta, hp->ssm_v_heads > 0 ? hp->ssm_v_heads : 1);
    ALLOC(c->ssm_alpha, hp->ssm_v_heads > 0 ? hp->ssm_v_heads : 1);
    ALLOC(c->ssm_o, VD > 0 ? VD : 1);
    ALLOC(c->att, (size_t)hp->n_head * p.n_ctx);
    ALLOC(c->att_out, vd);
    ALLOC(c->hb, ffh);
    ALLOC(c->hb2, ffh);
    ALLOC(c->exp_out, (size_t)(K > 1 ? K : 1) * D);
    ALLOC(c->router, hp->n_expert > 0 ? hp->n_expert : 1);
    ALLOC(c->sel, K > 0 ? K : 1);
    ALLOC(c->sel_w, K > 0 ? K : 1);
    ALLOC(c->rope_cos, hp->n_rot / 2);
    ALLOC(c->rope_sin, hp->n_rot / 2);
    ALLOC(c->logits, hp->n_vocab);
    c->n_slots = PK_SLOT_EXP0 + (K > 0 ? K : 1);
    c->slot_cap = max3(max3(D, qd > vd ? qd : vd, ffh), C, VD);
    ALLOC(c->slot, (size_t)c->n_slots * PK_TYPE_COUNT);
    ALLOC(c->slot_src, c->n_slots);
    ALLOC(c->slot_ready, c->n_slots);
    uint64_t types = act_types(m) & ~1ull; /* F32 activations need no buffer */
    for (int s = 0; ok && s < c->n_slots; s++)
        for (int t = 0; t < PK_TYPE_COUNT; t++)
            if (types >> t & 1)
                ALLOC(*(uint8_t **)&c->slot[(size_t)s * PK_TYPE_COUNT + t],
                      pk_row_size(t, c->slot_cap) + 64);
#undef ALLOC
    if (!ok) {
        pk_context_free(c);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory for a context of %d tokens", p.n_ctx);
    }
    *out = c;
    return PK_OK;
}

void pk_context_free(pk_context *c) {
    if (!c) return;
    pk_pool_free(c->pool);
    pk_kv_free(&c->kv);
    if (c->slot)
        for (int i = 0; i < c->n_slots * PK_TYPE_COUNT; i++) free(c->slot[i]);
    void *bufs[] = {c->x, c->xb, c->xb2, c->q, c->qg, c->gate, c->ssm_qkv, c->ssm_z, c->ssm_beta,
                    c->ssm_alpha, c->ssm_o, c->att, c->att_out, c->hb, c->hb2, c->exp_out,
                    c->router, c->sel, c->sel_w, c->rope_cos, c->rope_sin, c->logits, c->slot,
                    c->slot_src, c->slot_ready};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c);
}

void pk_context_reset(pk_context *c) {
    c->pos = 0;
    pk_kv_clear(&c->kv);
}
int pk_context_pos(const pk_context *c) { return c->pos; }
int pk_context_n_ctx(const pk_context *c) { return c->n_ctx; }
const float *pk_context_logits(const pk_context *c) { return c->logits; }

static int check_batch(pk_context *c, const int32_t *tokens, int n, pk_error *err) {
    if (n < 0 || (n > 0 && !tokens)) return pk_errorf(err, PK_ERR_ARG, "bad token batch (n = %d)", n);
    if ((int64_t)c->pos + n > c->n_ctx)
        return pk_errorf(err, PK_ERR_CONTEXT,
                         "context full: %d tokens in the sequence + %d new > context size %d",
                         c->pos, n, c->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->m->hp.n_vocab)
            return pk_errorf(err, PK_ERR_ARG, "token id %d at batch index %d is out of range [0, %d)",
                             tokens[i], i, c->m->hp.n_vocab);
    return PK_OK;
}

int pk_decode(pk_context *c, const int32_t *tokens, int n, pk_error *err) {
    int rc = check_batch(c, tokens, n, err);
    if (rc) return rc;
    for (int i = 0; i < n; i++)
        if ((rc = pk_forward_token(c, tokens[i], i == n - 1))) return rc;
    return PK_OK;
}

int pk_decode_all(pk_context *c, const int32_t *tokens, int n, float *all_logits, pk_error *err) {
    int rc = check_batch(c, tokens, n, err);
    if (rc) return rc;
    const size_t V = (size_t)c->m->hp.n_vocab;
    for (int i = 0; i < n; i++) {
        if ((rc = pk_forward_token(c, tokens[i], 1))) return rc;
        memcpy(all_logits + (size_t)i * V, c->logits, V * sizeof(float));
    }
    return PK_OK;
}

void pk_context_stats(const pk_context *c, pk_stats *out) {
    out->tokens = c->n_tokens;
    out->weight_bytes = c->weight_bytes;
    out->isa = c->kern->isa;
    out->n_threads = pk_pool_size(c->pool);
}
