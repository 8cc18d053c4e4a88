/* offline/build.c - pk_build_estimate: what another build of a loaded model
 * (quantized by a preset, experts pruned, or both) would take, from its
 * tensor shapes alone (see include/pocket.h).
 *
 * Nothing is converted: the quantizer's planner (offline/quantize.c) gives
 * every file tensor its type, pruning cuts a tensor's expert dimension (the
 * one its binding names, as offline/prune.c cuts it) to the kept count, and
 * the model's own ledger (model/model.c: bytes per token, resident and
 * expert bytes) counts the result, so the figures are the ones `pocket info`
 * prints for the written file. The context is measured as the memory plan
 * measures it, with the activation buffers of the build's types.
 */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "engine/context.h"
#include "model/model.h"
#include "offline/offline.h"
#include "quant/quant.h"
#include "pocket.h"

typedef struct build {
    const pk_model *m;
    const int *types;         /* per file tensor; NULL: as they are */
    const int *keep;          /* per layer; NULL: all experts */
} build;

/* Bytes of file tensor i in the build (one row's in *row): of its layer il's
 * kept experts when dim counts them. */
static uint64_t build_tensor_bytes(const build *b, uint64_t i, int il, pk_expert_dim dim, uint64_t *row) {
    const gguf_tensor *g = &b->m->gguf->tensors[i];
    const int type = b->types ? b->types[i] : g->type;
    int64_t ne[4] = {g->ne[0], g->ne[1], g->ne[2], g->ne[3]};
    if (b->keep && dim != PK_EXPERT_DIM_NONE && il >= 0 && il < b->m->hp.n_layer &&
        b->m->blocks[il].ff.n_expert > 0)
        ne[dim - PK_EXPERT_DIM_0] = b->keep[il];
    *row = pk_row_size(type, ne[0]);
    return *row * (uint64_t)(ne[1] * ne[2] * ne[3]);
}

/* The ledger's view (pk_tensor_size_fn): a bound tensor is a view of the file
 * tensor of its name. */
static uint64_t build_size(void *ud, const pk_tensor *t, int il, pk_expert_dim dim, uint64_t *row) {
    const build *b = ud;
    const gguf_tensor *g = gguf_find_tensor(b->m->gguf, t->name);
    if (!g) {            /* not a file tensor (cannot happen for a bound one): as loaded */
        *row = t->row_bytes;
        return t->row_bytes * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]);
    }
    return build_tensor_bytes(b, (uint64_t)(g - b->m->gguf->tensors), il, dim, row);
}

/* Each file tensor's layer and expert dimension, from the bound tensors
 * (tensors pocket does not bind: none). */
static void expert_dims(const pk_model *m, int *layer, pk_expert_dim *dim) {
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        layer[i] = -1;
        dim[i] = PK_EXPERT_DIM_NONE;
    }
    for (int i = 0; i < m->n_bound; i++) {
        const gguf_tensor *g = gguf_find_tensor(m->gguf, m->bound[i].t->name);
        if (!g) continue;
        layer[g - m->gguf->tensors] = m->bound[i].layer;
        dim[g - m->gguf->tensors] = m->bound[i].experts;
    }
}

/* keep checked against the layers (pk_prune_file's rules); *n_expert: the
 * expert_count the pruned file's quantizer would read (one count, or the
 * first layer's of an array). */
static int check_keep(const pk_model *m, const int *keep, int *n_expert, pk_error *err) {
    const pk_hparams *hp = &m->hp;
    int rc = pk_prune_check(m, err);
    if (rc) return rc;
    int uniform = 1, k0 = -1;
    for (int il = 0; il < hp->n_layer; il++) {
        const pk_ffn_shape *ff = &m->blocks[il].ff;
        if (!ff->n_expert) continue;
        if (keep[il] < 1 || keep[il] > ff->n_expert)
            return pk_errorf(err, PK_ERR_ARG, "%s: layer %d has %d experts; it cannot keep %d", m->path, il,
                             ff->n_expert, keep[il]);
        if (keep[il] < ff->n_expert_used)
            return pk_errorf(err, PK_ERR_ARG, "%s: layer %d would keep %d experts, fewer than the %d a token uses",
                             m->path, il, keep[il], ff->n_expert_used);
        if (k0 < 0) k0 = keep[il];
        uniform &= keep[il] == k0;
    }
    *n_expert = uniform ? k0 : m->blocks[0].ff.n_expert ? keep[0] : hp->n_expert_l[0];
    return PK_OK;
}

int pk_build_estimate(const pk_model *m, const pk_build_params *p, pk_build_size *out, pk_error *err) {
    memset(out, 0, sizeof *out);
    const gguf_file *f = m->gguf;
    const uint64_t nt = f->n_tensors;
    int n_expert = 0, rc = PK_OK;
    if (p->keep && (rc = check_keep(m, p->keep, &n_expert, err))) return rc;
    int *types = NULL, *layer = pk_calloc(nt ? nt : 1, sizeof *layer);
    pk_expert_dim *dim = pk_calloc(nt ? nt : 1, sizeof *dim);
    int *keep_l = p->keep ? pk_calloc((size_t)m->hp.n_layer, sizeof *keep_l) : NULL;
    if (!layer || !dim || (p->keep && !keep_l) || (p->preset && !(types = pk_calloc(nt ? nt : 1, sizeof *types)))) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (p->preset) {
        int needs = 0;
        out->imatrix = p->imatrix != 0;
        rc = pk_quantize_plan_types(f, p->preset, out->imatrix, n_expert, types, &needs, err);
        if (!rc && needs) {            /* the preset needs a matrix: planned with one */
            out->imatrix = out->imatrix_needed = 1;
            rc = pk_quantize_plan_types(f, p->preset, 1, n_expert, types, &needs, err);
        }
        if (rc) goto done;
    }
    /* the ledger's experts per layer: the kept ones */
    for (int il = 0; keep_l && il < m->hp.n_layer; il++)
        keep_l[il] = m->blocks[il].ff.n_expert ? p->keep[il] : 0;
    const build b = {.m = m, .types = types, .keep = keep_l};

    /* the file: this one's header, then every tensor padded to the alignment */
    expert_dims(m, layer, dim);
    const uint64_t align = f->alignment ? f->alignment : 32;
    uint64_t data = 0, act = 0;
    for (uint64_t i = 0; i < nt; i++) {
        uint64_t row;
        const uint64_t n = build_tensor_bytes(&b, i, layer[i], dim[i], &row);
        data += (n + align - 1) / align * align;
        const pk_type_traits *tt = pk_type_get(types ? types[i] : f->tensors[i].type);
        if (tt && tt->vec_dot_type >= 0) act |= 1ull << tt->vec_dot_type;
    }
    out->file_bytes = f->data_offset + data;

    pk_ledger l;
    pk_model_ledger(m, build_size, (void *)&b, keep_l, &l);
    out->bytes_per_token = l.bytes_per_token;
    /* bit 0 (F32, which needs no buffer) keeps the mask from reading as "the model's" */
    out->expert_bytes = l.expert_bytes;
    const pk_context_params cp = pk_memplan_context(&m->load);
    int n_ctx, n_ckpt;
    uint64_t kv_tok, ckpt;
    if ((rc = pk_context_measure(m, &cp, act | 1, &out->context_bytes, &n_ctx, &kv_tok, &n_ckpt, &ckpt, err)))
        goto done;
    out->resident_bytes = pk_ledger_resident(m, &l, n_ctx);
    out->need_bytes = out->resident_bytes + out->expert_bytes + out->context_bytes + PK_MEM_MARGIN;
done:
    free(types);
    free(layer);
    free(dim);
    free(keep_l);
    return rc;
}
