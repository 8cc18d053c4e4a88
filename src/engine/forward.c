/* engine/forward.c - the transformer forward pass over a batch of B tokens at
 * consecutive positions (B = 1 when decoding).
 *
 * Reads top to bottom like the maths, each step applied to every row:
 *   x = token_embd[token] * embd_scale
 *   per layer, as its block plan says (model/blocks.h):
 *     x += mixer(rmsnorm(x)) * residual_scale
 *                               attention (engine/kinds/attention.c) or a Gated
 *                               DeltaNet (engine/kinds/deltanet.c)
 *     x += ffn(rmsnorm(x)) * residual_scale
 *                               dense SwiGLU (engine/kinds/ffn.c) or routed experts
 *                               (engine/kinds/moe.c), each output normed first where
 *                               the plan names a post norm
 *     [x *= layer_output_scale where the layer has one]
 *   logits = output . rmsnorm(x) / logit_scale   [c tanh(logits / c): final soft-cap]
 * (embd_scale: sqrt(D) for gemma4, Granite's embedding_scale; residual_scale
 * and logit_scale: Granite's keys; each 1 for other architectures)
 * The mixer and the FFN are the layer's kinds, called through their method
 * tables: nothing here depends on the architecture. Batching changes how
 * often weights are read, never the result of a row: a prompt processed in
 * one batch gives the logits of one token at a time. The last layer's FFN
 * runs only on the rows whose logits are wanted (usually the last one).
 */
#include <math.h>
#include <string.h>
#include "engine/context.h"

/* ---- norms ------------------------------------------------------------------ */

void pk_rmsnorm(float *out, const float *x, const float *w, int n, float eps) {
    double ss = 0.0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * scale * (w ? w[i] : 1.0f);
}

void pk_rmsnorm_rows(pk_context *c, float *out, const float *x, const pk_tensor *w, int n, int rows,
                     int64_t stride) {
    const float *wf = w->data;
    if (w->type != PK_TYPE_F32) {  /* norm weights are F32 in practice */
        float *tmp = pk_row_buf(c, n);
        pk_type_get(w->type)->to_float(w->data, tmp, n);
        wf = tmp;
    }
    for (int r = 0; r < rows; r++)
        pk_rmsnorm(out + r * stride, x + r * stride, wf, n, c->m->hp.rms_eps);
    c->weight_bytes += w->row_bytes;
}

/* x += s * y over n elements (s = 1: the plain sum, bitwise) */
static void residual_add(float *x, const float *y, int n, float s) {
    if (s == 1.0f)
        for (int i = 0; i < n; i++) x[i] += y[i];
    else
        for (int i = 0; i < n; i++) x[i] += s * y[i];
}

/* ---- the final soft-cap ------------------------------------------------------- */

typedef struct softcap_task {
    float *x;
    size_t n, per;   /* values, values per chunk */
    float cap;
    const pk_kernels *kern;
} softcap_task;

/* c tanh(x / c) over one chunk, as ggml: scale by 1/c, tanh, scale by c
 * (the kernels' softcap) */
static void softcap_run(void *arg, int chunk) {
    const softcap_task *t = arg;
    const size_t lo = (size_t)chunk * t->per, hi = lo + t->per < t->n ? lo + t->per : t->n;
    if (lo < hi) pk_kern_softcap(t->kern, t->x + lo, (int64_t)(hi - lo), t->cap);
}

/* ---- a batch ---------------------------------------------------------------------------- */

int pk_forward_batch(pk_context *c, const int32_t *tokens, int n, float *logits, int all_rows) {
    const pk_model *m = c->m;
    const pk_hparams *hp = &m->hp;
    const int D = hp->n_embd;
    /* every buffer of the context holds n_batch rows (engine/context.c); the KV
       cache holds n_ctx positions; ids were checked by pk_decode */
    PK_ASSERT(n >= 1 && n <= c->n_batch && c->pos + n <= c->n_ctx);
    c->cur_batch = n;
    const uint64_t bytes0 = c->weight_bytes, guess0 = c->guess_bytes;   /* for the ledger check below */
    (void)bytes0, (void)guess0;
    static const char NORMS[] = "norms, residuals";
    pk_prof_mark pm;
    pk_prof_begin(c, &pm);
    for (int b = 0; b < n; b++) {
        PK_ASSERT(tokens[b] >= 0 && tokens[b] < hp->n_vocab);
        pk_get_row(c, &m->tok_embd, tokens[b], c->x + (size_t)b * D);
    }
    if (hp->embd_scale != 1.0f)   /* gemma4: x sqrt(D) */
        for (int i = 0; i < n * D; i++) c->x[i] *= hp->embd_scale;
    pk_prof_end(c, "embedding", NULL, &pm);
    /* The rows the output head reads: the last, every row, or none (a
       prompt's batch before its last). The last layer's FFN is computed for
       those rows only: its mixer has written every row's KV cache or state,
       and the other rows' FFN outputs would only feed the discarded rest of
       x (llama.cpp prunes the same rows). Not while an observer collects
       every row's inputs (pocket imatrix) or experts (pocket prune). */
    const int keep = c->observer || c->expert_observer ? n : !logits ? 0 : all_rows ? n : 1;
    int rows = n;   /* rows of x carried through the layers */
    for (int il = 0; il < hp->n_layer; il++) {
        const pk_block *bk = &m->blocks[il];
        const pk_layer *L = &m->layers[il];
        int rc;
        pk_prof_begin(c, &pm);
        pk_rmsnorm_rows(c, c->xb, c->x, &L->attn_norm, D, n, D);
        pk_prof_end(c, NORMS, NULL, &pm);
        pk_prof_begin(c, &pm);
        if ((rc = bk->mixer->forward(c, bk, L, il))) return rc;
        pk_prof_end(c, bk->mixer->name, NULL, &pm);
        pk_prof_begin(c, &pm);
        if (L->post_mixer_norm.data) pk_rmsnorm_rows(c, c->xb2, c->xb2, &L->post_mixer_norm, D, n, D);
        residual_add(c->x, c->xb2, n * D, hp->residual_scale);
        if (il == hp->n_layer - 1 && keep < n) {
            if (!keep) {
                pk_prof_end(c, NORMS, NULL, &pm);
                break;
            }
            memmove(c->x, c->x + (size_t)(n - 1) * D, (size_t)D * sizeof *c->x);   /* keep = 1: the last row */
            rows = c->cur_batch = keep;
        }
        pk_rmsnorm_rows(c, c->xb, c->x, &L->ffn_norm, D, rows, D);
        pk_prof_end(c, NORMS, NULL, &pm);
        pk_prof_begin(c, &pm);
        if ((rc = bk->ffn->forward(c, bk, L, il))) return rc;
        pk_prof_end(c, bk->ffn->name, NULL, &pm);
        pk_prof_begin(c, &pm);
        if (L->post_ffn_norm.data) pk_rmsnorm_rows(c, c->xb2, c->xb2, &L->post_ffn_norm, D, rows, D);
        residual_add(c->x, c->xb2, rows * D, hp->residual_scale);
        if (L->out_scale.data) {   /* the whole residual stream, scaled */
            float s;
            pk_get_row(c, &L->out_scale, 0, &s);
            for (int i = 0; i < rows * D; i++) c->x[i] *= s;
        }
        pk_prof_end(c, NORMS, NULL, &pm);
    }
    memcpy(c->tokens + c->pos, tokens, (size_t)n * sizeof *tokens);
    c->pos += n;
    c->n_tokens += (uint64_t)n;
    if (!logits) return PK_OK;
    /* the output head for the last row, or for every row (x holds only the
       last row when the last layer kept it alone) */
    const int first = all_rows ? 0 : rows - 1, nout = rows - first;
    pk_prof_begin(c, &pm);
    pk_rmsnorm_rows(c, c->xb, c->x + (size_t)first * D, &m->output_norm, D, nout, D);
    pk_act_set(c, PK_SLOT_X, c->xb, nout, D, 0);
    pk_mv o = {.w = &m->output, .row0 = 0, .nrows = hp->n_vocab, .slot = PK_SLOT_X, .n_tok = nout, .idx = NULL,
               .y = logits, .y_stride = hp->n_vocab};
    pk_matvec(c, &o, 1);
    if (hp->logit_scale != 1.0f) {   /* Granite: logits / logit_scale */
        const float inv = 1.0f / hp->logit_scale;
        for (size_t i = 0; i < (size_t)nout * hp->n_vocab; i++) logits[i] *= inv;
    }
    if (hp->softcap > 0) {   /* c tanh(logit / c): a vocabulary of tanh is worth the threads */
        const size_t nv = (size_t)nout * hp->n_vocab;
        const int chunks = nv < 65536 ? 1 : 8 * pk_pool_size(c->pool);
        softcap_task st = {.x = logits, .n = nv, .per = (nv + (size_t)chunks - 1) / (size_t)chunks, .cap = hp->softcap,
                           .kern = c->kern};
        pk_pool_run(c->pool, softcap_run, &st, chunks);
    }
    pk_prof_end(c, "output head", NULL, &pm);
    /* the weight-byte ledger: every weight read is counted (pk_matvec,
       pk_get_row, pk_rmsnorm_rows, engine/kinds/deltanet.c's small tensors), so one token
       reads exactly what model/model.c's count_params says a token reads */
    /* (the expert cache's read-ahead guesses read routers on top: engine/kinds/moe.c) */
    PK_ASSERT(n != 1 || c->weight_bytes - bytes0 - (c->guess_bytes - guess0) == m->bytes_per_token);
    return PK_OK;
}
