/* engine/memplan.c - the memory plan of a model (pk_model_params.mem): what stays
 * resident, how many routed experts per layer the expert cache holds, and
 * the read-ahead hints of the mapping.
 *
 *   resident  = every tensor but the routed experts (attention / DeltaNet,
 *               norms, routers, shared experts, output head), and of the
 *               token embeddings the rows of n_ctx tokens (the whole table
 *               if it is also the output head); the MTP layers a plain
 *               decode never reads are left out
 *   context   = one context of n_ctx tokens, measured by making one
 *               (KV cache, recurrent states, activation buffers)
 *   cache     = mem - resident - context - 64 MiB margin, in slots of one
 *               expert (gate + up + down of one layer, page-aligned)
 *
 * Without a budget, or when every expert fits, the whole file is mapped
 * and read ahead as before. Under a budget only the resident tensors are
 * read ahead (and locked where the system allows: they are read by every
 * token, so the kernel must not evict them to make room for expert reads);
 * the expert ranges of the mapping are never touched.
 */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include "engine/context.h"
#include "core/platform.h"
#include "model/xcache.h"

enum { PAGE = 4096 };
#define MARGIN ((uint64_t)64 << 20)

static uint64_t tensor_bytes(const pk_tensor *t) {
    return t->data ? t->row_bytes * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]) : 0;
}

/* Hint (and, locked = 1, lock) the pages of t's data. */
static void hint_tensor(const pk_model *m, const pk_tensor *t, int locked) {
    if (!t->data) return;
    uintptr_t a = (uintptr_t)t->data / PAGE * PAGE, e = (uintptr_t)t->data + tensor_bytes(t);
    pk_map_hint_sequential((void *)a, (size_t)(e - a));
    if (locked) (void)mlock((void *)a, (size_t)(e - a)); /* best effort: RLIMIT_MEMLOCK may say no */
    (void)m;
}

static void fmt_mib(char *buf, size_t n, uint64_t b) { snprintf(buf, n, "%.1f MiB", (double)b / 1048576.0); }

int pk_memplan_apply(pk_model *m, const pk_model_params *p, pk_error *err) {
    const pk_hparams *hp = &m->hp;
    pk_model_plan *pl = &m->plan;
    memset(pl, 0, sizeof *pl);
    pl->mem = p->mem;
    pl->n_expert = hp->moe ? hp->n_expert : 0;

    /* the embedding table counts whole only when it is also the output head;
       otherwise a token reads its own row, and the context's tokens have at
       most n_ctx distinct rows (counted once the context size is known) */
    const int tied = m->output.data == m->tok_embd.data;
    uint64_t resident = tensor_bytes(&m->output_norm) + tensor_bytes(&m->rope_freqs) + tensor_bytes(&m->output);
    /* the blocks' tensors from the list of bound tensors (model/model.h);
       a file tensor bound twice (a merged ffn_gate_up_exps as gate_exps and
       up_exps) counts twice, as the expert cache's slot holds it twice (its
       gate and up regions, model/xcache.c) */
    int last_moe = -1;
    uint64_t n_slices = 0;   /* experts over all layers (layers may differ: a pruned file) */
    for (int i = 0; i < m->n_bound; i++) {
        const pk_bound *b = &m->bound[i];
        if (b->layer < 0 || b->layer >= hp->n_layer) continue;   /* the model's own, above; MTP: never read */
        if (b->role == PK_ROLE_EXPERTS) {
            pl->expert_bytes += tensor_bytes(b->t);
            if (b->layer != last_moe) {   /* a layer's entries are contiguous */
                pl->n_layer_moe++;
                n_slices += (uint64_t)m->blocks[b->layer].ff.n_expert;
            }
            last_moe = b->layer;
        } else {
            resident += tensor_bytes(b->t);
        }
    }
    pl->resident_bytes = resident;
    if (n_slices) pl->expert_slice_bytes = pl->expert_bytes / n_slices;
    pl->expert_slots = pl->n_expert;

    /* the planned context, measured */
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = p->n_ctx;
    cp.n_threads = 1;
    cp.type_k = p->type_k;
    cp.type_v = p->type_v;
    cp.n_checkpoints = p->n_checkpoints;
    int rc = pk_context_measure(m, &cp, &pl->context_bytes, &pl->n_ctx, &pl->kv_bytes_per_token,
                                &pl->n_checkpoints, &pl->checkpoint_bytes, err);
    if (rc) return rc;
    if (!tied) {
        uint64_t rows = (uint64_t)pl->n_ctx < (uint64_t)hp->n_vocab ? (uint64_t)pl->n_ctx : (uint64_t)hp->n_vocab;
        resident += rows * m->tok_embd.row_bytes;
        pl->resident_bytes = resident;
    }

    const int budget = p->mem > 0 || p->expert_slots > 0;
    if (budget && !pl->n_expert && p->expert_slots > 0)
        return pk_errorf(err, PK_ERR_ARG, "%s: expert slots asked for, but the model has no routed experts", m->path);
    int slots = pl->n_expert;
    if (budget && pl->n_expert) {
        if (pl->n_layer_moe != hp->n_layer)
            return pk_errorf(err, PK_ERR_UNSUPPORTED,
                             "%s: a memory budget needs routed experts in every layer (%d of %d have them)",
                             m->path, pl->n_layer_moe, hp->n_layer);
        const uint64_t slot = pk_xcache_plan_slot_bytes(m);
        uint64_t fixed = resident + pl->context_bytes + MARGIN;
        if (p->expert_slots > 0) {
            slots = p->expert_slots < pl->n_expert ? p->expert_slots : pl->n_expert;
        } else if (p->mem >= fixed && p->mem - fixed >= pl->expert_bytes) {
            slots = pl->n_expert;                  /* everything fits: just map it */
        } else {
            uint64_t per = slot * (uint64_t)hp->n_layer;
            uint64_t n = p->mem > fixed ? (p->mem - fixed) / per : 0;
            if (n < 1) {
                char a[32], b[32], cc[32], d[32];
                fmt_mib(a, sizeof a, p->mem);
                fmt_mib(b, sizeof b, resident);
                fmt_mib(cc, sizeof cc, pl->context_bytes);
                fmt_mib(d, sizeof d, fixed + per);
                return pk_errorf(err, PK_ERR_ARG,
                                 "%s: memory budget %s is too small: resident weights %s + context of %d tokens %s "
                                 "+ 64 MiB margin + one expert per layer need %s",
                                 m->path, a, b, pl->n_ctx, cc, d);
            }
            slots = n < (uint64_t)pl->n_expert ? (int)n : pl->n_expert;
        }
        if (slots < pl->n_expert || p->expert_slots > 0) {
            if ((rc = pk_xcache_new(m, slots, &m->xc, err))) return rc;
            pl->streaming = 1;
            pl->io_depth = pk_xcache_io_depth();
            pl->cache_bytes = pk_xcache_slot_bytes(m->xc) * (uint64_t)slots * (uint64_t)hp->n_layer;
        }
    }
    pl->expert_slots = slots;
    if (pl->streaming) {
        pl->expected_read_per_token = (uint64_t)((1.0 - (double)slots / pl->n_expert) * hp->n_expert_used *
                                                 (double)hp->n_layer * (double)pl->expert_slice_bytes);
        /* the embedding rows are read (and become resident) as tokens use them */
        const pk_tensor *tops[3] = {&m->output_norm, &m->output, &m->rope_freqs};
        for (int i = 0; i < 3; i++) hint_tensor(m, tops[i], 1);
        for (int i = 0; i < m->n_bound; i++) {
            const pk_bound *b = &m->bound[i];
            if (b->layer >= 0 && b->layer < hp->n_layer && b->role != PK_ROLE_EXPERTS) hint_tensor(m, b->t, 1);
        }
    } else {
        pk_map_hint_sequential((void *)(uintptr_t)m->gguf->map, (size_t)m->gguf->size);
    }
    return PK_OK;
}

void pk_model_get_plan(const pk_model *m, pk_model_plan *out) { *out = m->plan; }
