/* offline/prune.c - expert pruning: a saliency per routed expert measured
 * over calibration text, and the GGUF rewrite that keeps the chosen experts
 * (contract in include/pocket.h).
 *
 * Saliency. An expert observer on the context (engine/kinds/moe.c calls it
 * for every routed expert a batch used, with its tokens' router weights and
 * outputs) sums, per layer and expert, the tokens routed and |w| ||y||_2 in
 * double, in the order the decoding thread meets them: the same text gives
 * the same sums whatever the thread count.
 *
 * Rewrite. Which tensors hold experts, and along which dimension, is what
 * the block kinds said when they bound them (pk_bound.experts,
 * model/model.h): nothing here knows an architecture. A tensor with an
 * expert dimension is written with the kept experts' slices only - whole
 * rows or whole matrices, so any type, quantized ones included, is cut
 * without conversion; every other tensor and key is copied byte for byte,
 * but <arch>.expert_count (one value, or one per layer when the kept counts
 * differ), <arch>.expert_used_count when asked, and pocket.prune.*, which
 * record the choice.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "engine/context.h"
#include "gguf/gguf.h"
#include "pocket.h"
#include "quant/quant.h"

struct pk_saliency {
    const pk_model *m;
    int n_layer, stride;   /* stride: the most experts a layer has */
    int *n_expert;         /* [n_layer] routed experts (0: none) */
    int64_t *tokens;       /* [n_layer * stride] tokens routed to each expert */
    double *wnorm;         /* [n_layer * stride] sum of |w| ||y|| over them */
    int status;            /* first collection failure */
    pk_error err;
};

int pk_saliency_new(const pk_model *m, pk_saliency **out, pk_error *err) {
    *out = NULL;
    const pk_hparams *hp = &m->hp;
    if (!hp->moe)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: architecture %s has no routed experts (a dense model)", m->path,
                         m->arch->name);
    pk_saliency *s = pk_calloc(1, sizeof *s);
    const size_t n = (size_t)hp->n_layer * (size_t)hp->n_expert;
    if (!s || !(s->n_expert = pk_calloc((size_t)hp->n_layer, sizeof *s->n_expert)) ||
        !(s->tokens = pk_calloc(n, sizeof *s->tokens)) || !(s->wnorm = pk_calloc(n, sizeof *s->wnorm))) {
        pk_saliency_free(s);
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", m->path);
    }
    s->m = m;
    s->n_layer = hp->n_layer;
    s->stride = hp->n_expert;
    for (int il = 0; il < hp->n_layer; il++) s->n_expert[il] = m->blocks[il].ff.n_expert;
    *out = s;
    return PK_OK;
}

void pk_saliency_free(pk_saliency *s) {
    if (!s) return;
    free(s->n_expert);
    free(s->tokens);
    free(s->wnorm);
    free(s);
}

static void observe(void *ud, int il, int e, int n, const float *w, const float *out, int D) {
    pk_saliency *s = ud;
    if (s->status) return;
    PK_ASSERT(il >= 0 && il < s->n_layer && e >= 0 && e < s->n_expert[il]);
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        double q = 0.0;
        for (int d = 0; d < D; d++) q += (double)out[(size_t)i * D + d] * out[(size_t)i * D + d];
        sum += fabs((double)w[i]) * sqrt(q);
    }
    if (!isfinite(sum)) {
        s->status = pk_errorf(&s->err, PK_ERR_FORMAT, "%s: layer %d, expert %d: non-finite output or router weight",
                              s->m->path, il, e);
        return;
    }
    s->tokens[(size_t)il * s->stride + e] += n;
    s->wnorm[(size_t)il * s->stride + e] += sum;
}

int pk_saliency_attach(pk_saliency *s, pk_context *c, pk_error *err) {
    if (c->m != s->m) return pk_errorf(err, PK_ERR_ARG, "saliency: the context is of another model than %s", s->m->path);
    c->expert_observer = observe;
    c->expert_observer_ud = s;
    return PK_OK;
}

void pk_saliency_detach(pk_context *c) {
    c->expert_observer = NULL;
    c->expert_observer_ud = NULL;
}

int pk_saliency_status(const pk_saliency *s, pk_error *err) {
    if (s->status && err) *err = s->err;
    return s->status;
}

int pk_saliency_n_expert(const pk_saliency *s, int il) {
    return il >= 0 && il < s->n_layer ? s->n_expert[il] : 0;
}

int64_t pk_saliency_tokens(const pk_saliency *s, int il, int e) {
    return e >= 0 && e < pk_saliency_n_expert(s, il) ? s->tokens[(size_t)il * s->stride + e] : 0;
}

double pk_saliency_score(const pk_saliency *s, int kind, int il, int e) {
    const int64_t n = pk_saliency_tokens(s, il, e);
    if (kind == PK_SALIENCY_FREQ) return (double)n;
    return n > 0 ? s->wnorm[(size_t)il * s->stride + e] / (double)n : 0.0;
}

typedef struct ranked {
    double score;
    int e;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->e > y->e) - (x->e < y->e);
}

int pk_saliency_rank(const pk_saliency *s, int kind, int il, int *order) {
    const int E = pk_saliency_n_expert(s, il);
    ranked *r = pk_calloc(E ? (size_t)E : 1, sizeof *r);
    if (!r) return PK_ERR_NOMEM;
    for (int e = 0; e < E; e++) r[e] = (ranked){pk_saliency_score(s, kind, il, e), e};
    qsort(r, (size_t)E, sizeof *r, cmp_ranked);
    for (int i = 0; i < E; i++) order[i] = r[i].e;
    free(r);
    return PK_OK;
}

int pk_saliency_select(const pk_saliency *s, int kind, const int *keep, uint8_t *mask, pk_error *err) {
    int *order = pk_calloc(s->stride ? (size_t)s->stride : 1, sizeof *order);
    if (!order) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    memset(mask, 0, (size_t)s->n_layer * (size_t)s->stride);
    int rc = PK_OK;
    for (int il = 0; il < s->n_layer && !rc; il++) {
        const int E = s->n_expert[il];
        if (!E) continue;
        if (keep[il] < 1 || keep[il] > E) {
            rc = pk_errorf(err, PK_ERR_ARG, "layer %d: cannot keep %d of its %d experts", il, keep[il], E);
        } else if ((rc = pk_saliency_rank(s, kind, il, order))) {
            rc = pk_errorf(err, rc, "out of memory");
        } else {
            for (int i = 0; i < keep[il]; i++) mask[(size_t)il * s->stride + order[i]] = 1;
        }
    }
    free(order);
    return rc;
}

/* ---- the per-layer keep spec ------------------------------------------------------------ */

/* A decimal number of at most 9 digits at *p (advanced past it); -1 if none. */
static long parse_num(const char **p) {
    long v = 0;
    int n = 0;
    for (; **p >= '0' && **p <= '9' && n < 10; (*p)++, n++) v = v * 10 + (**p - '0');
    return n == 0 || n > 9 ? -1 : v;
}

int pk_prune_parse_keep(const char *spec, int n_layer, int *keep, pk_error *err) {
    if (!spec || !*spec) return pk_errorf(err, PK_ERR_ARG, "keep spec is empty (expected LAYERS:K, e.g. 0-3:12)");
    uint8_t *seen = pk_calloc(n_layer > 0 ? (size_t)n_layer : 1, 1);
    if (!seen) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    int rc = PK_OK;
    for (const char *item = spec; !rc;) {
        const char *end = strchr(item, ',');
        const int len = end ? (int)(end - item) : (int)strlen(item), show = len < 40 ? len : 40;
        const char *p = item;
        long a = parse_num(&p), b = a, k = -1;
        if (a >= 0 && *p == '-') {
            p++;
            b = parse_num(&p);
        }
        if (b >= 0 && *p == ':') {
            p++;
            k = parse_num(&p);
        }
        if (a < 0 || b < 0 || k < 0 || p != item + len) {
            rc = pk_errorf(err, PK_ERR_ARG, "keep spec item '%.*s%s' is not LAYERS:K (e.g. 0-3:12 or 5:8)", show, item,
                           show < len ? "..." : "");
        } else if (b < a) {
            rc = pk_errorf(err, PK_ERR_ARG, "keep spec item '%.*s': layer range %ld-%ld runs backwards", show, item, a, b);
        } else if (b >= n_layer) {
            rc = pk_errorf(err, PK_ERR_ARG, "keep spec item '%.*s': layer %ld is out of range (layers 0-%d)", show, item,
                           b, n_layer - 1);
        } else if (k < 1) {
            rc = pk_errorf(err, PK_ERR_ARG, "keep spec item '%.*s': keep at least 1 expert", show, item);
        } else {
            for (long il = a; il <= b && !rc; il++) {
                if (seen[il]) rc = pk_errorf(err, PK_ERR_ARG, "keep spec item '%.*s': layer %ld is named twice", show,
                                             item, il);
                seen[il] = 1;
                keep[il] = (int)k;
            }
        }
        if (!end) break;
        item = end + 1;
    }
    free(seen);
    return rc;
}

/* ---- the rewrite ---------------------------------------------------------------------------- */

/* What happens to file tensor i. */
typedef struct cut {
    int bound;             /* pocket reads it */
    int layer;             /* with dim: the layer whose experts it holds */
    pk_expert_dim dim;     /* PK_EXPERT_DIM_NONE: copied whole */
} cut;

/* One file tensor with the kept experts' slices only: outer x E units of
 * `unit` bytes, expert e's the e-th unit of each outer run. */
static int write_cut(gguf_writer *w, const gguf_tensor *t, const cut *c, const uint8_t *keep, int E, pk_error *err) {
    const int a = (int)c->dim - 1;
    uint64_t unit = a == 0 ? pk_row_size(t->type, 1) : pk_row_size(t->type, t->ne[0]), outer = 1;
    for (int i = 1; i < a; i++) unit *= (uint64_t)t->ne[i];
    for (int i = a + 1; i < 4; i++) outer *= (uint64_t)t->ne[i];
    const uint8_t *p = t->data;
    for (uint64_t o = 0; o < outer; o++)
        for (int e = 0; e < E; e++)
            if (keep[e]) {
                int rc = gguf_writer_write(w, p + (o * (uint64_t)E + (uint64_t)e) * unit, (size_t)unit, err);
                if (rc) return rc;
            }
    return PK_OK;
}

/* "blk.N.*": N, else -1 */
static long block_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    const char *p = name + 4;
    const long n = parse_num(&p);
    return *p == '.' ? n : -1;
}

/* The tensors' fates: the bound ones from the model's list; refuses what
 * cannot be cut, and tensors of a pruned layer that pocket does not read
 * (whether they hold experts is unknown). */
static int plan_cuts(const pk_model *m, const int *kept, cut *cuts, pk_error *err) {
    const gguf_file *f = m->gguf;
    for (int i = 0; i < m->n_bound; i++) {
        const pk_bound *b = &m->bound[i];
        const gguf_tensor *g = gguf_find_tensor(f, b->t->name);
        if (!g) continue;   /* bound tensors come from the file */
        cut *c = &cuts[g - f->tensors];
        c->bound = 1;
        if (b->experts == PK_EXPERT_DIM_NONE || b->layer < 0 || b->layer >= m->hp.n_layer) continue;
        const int a = (int)b->experts - 1, E = m->blocks[b->layer].ff.n_expert;
        if (g->ne[a] != E)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s' has %lld experts in ne[%d], layer %d has %d", m->path,
                             g->name, (long long)g->ne[a], a, b->layer, E);
        if (a == 0 && pk_type_get(g->type)->blck != 1 && kept[b->layer] != E)
            return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tensor '%s' (%s) has one value per expert inside blocks of %d; "
                             "cannot cut it", m->path, g->name, pk_type_name(g->type), pk_type_get(g->type)->blck);
        if (kept[b->layer] == E) continue;   /* a layer kept whole is copied */
        c->layer = b->layer;
        c->dim = b->experts;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const long il = block_of(f->tensors[i].name);
        if (!cuts[i].bound && il >= 0 && il < m->hp.n_layer && kept[il] != m->blocks[il].ff.n_expert)
            return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tensor '%s' of pruned layer %ld is not one pocket reads: "
                             "cannot tell whether it holds experts", m->path, f->tensors[i].name, il);
    }
    return PK_OK;
}

/* Metadata: the source's, with the new expert counts and the record of the choice. */
static int write_keys(const pk_model *m, gguf_writer *w, const int *kept, const pk_prune_params *p, pk_error *err) {
    const gguf_file *f = m->gguf;
    const pk_hparams *hp = &m->hp;
    const int L = hp->n_layer;
    int rc;
    for (uint64_t i = 0; i < f->n_kv; i++)
        if ((rc = gguf_writer_copy_kv(w, &f->kv[i], err))) return rc;
    const char *prev[] = {"pocket.prune.saliency", "pocket.prune.calibration", "pocket.prune.experts"};
    for (int i = 0; i < 3; i++) gguf_writer_remove_kv(w, prev[i]);
    const gguf_kv *arch = gguf_find_kv(f, "general.architecture");
    char key[160];
    uint32_t *v = pk_calloc((size_t)L * (size_t)hp->n_expert + 1, sizeof *v);
    if (!v) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    /* one count for every layer when the routed layers agree (what llama.cpp
       reads), else one per layer */
    int uniform = 1, k0 = -1;
    for (int il = 0; il < L; il++) {
        if (!m->blocks[il].ff.n_expert) continue;
        if (k0 < 0) k0 = kept[il];
        uniform &= kept[il] == k0;
    }
    for (int il = 0; il < L; il++) v[il] = (uint32_t)(m->blocks[il].ff.n_expert ? kept[il] : hp->n_expert_l[il]);
    snprintf(key, sizeof key, "%.*s.expert_count", (int)arch->str.len, arch->str.ptr);
    rc = uniform ? gguf_writer_set_u32(w, key, (uint32_t)k0, err) : gguf_writer_set_u32_arr(w, key, v, (uint64_t)L, err);
    if (!rc && p->n_expert_used) {
        snprintf(key, sizeof key, "%.*s.expert_used_count", (int)arch->str.len, arch->str.ptr);
        rc = gguf_writer_set_u32(w, key, (uint32_t)p->n_expert_used, err);
    }
    uint64_t n = 0;
    for (int il = 0; il < L; il++)
        for (int e = 0; e < m->blocks[il].ff.n_expert; e++)
            if (p->keep[(size_t)il * hp->n_expert + e]) v[n++] = (uint32_t)e;
    if (!rc) rc = gguf_writer_set_u32_arr(w, "pocket.prune.experts", v, n, err);
    if (!rc && p->saliency) rc = gguf_writer_set_str(w, "pocket.prune.saliency", p->saliency, err);
    if (!rc && p->calibration) rc = gguf_writer_set_str(w, "pocket.prune.calibration", p->calibration, err);
    free(v);
    return rc;
}

/* The kept count of every layer into kept[], checked against the top-k. */
static int count_kept(const pk_model *m, const pk_prune_params *p, int *kept, pk_error *err) {
    const pk_hparams *hp = &m->hp;
    const int topk = p->n_expert_used ? p->n_expert_used : hp->n_expert_used;
    if (p->n_expert_used < 0 || p->n_expert_used > 64)
        return pk_errorf(err, PK_ERR_ARG, "expert_used_count %d is out of range [1, 64]", p->n_expert_used);
    for (int il = 0; il < hp->n_layer; il++) {
        const int E = m->blocks[il].ff.n_expert;
        kept[il] = 0;
        for (int e = 0; e < hp->n_expert; e++) {
            const int k = p->keep[(size_t)il * hp->n_expert + e] != 0;
            if (k && e >= E)
                return pk_errorf(err, PK_ERR_ARG, "layer %d: expert %d kept, but the layer has %d", il, e, E);
            kept[il] += k;
        }
        if (E && kept[il] < topk)
            return pk_errorf(err, PK_ERR_ARG, "layer %d would keep %d experts, fewer than the %d each token uses "
                             "(expert_used_count)", il, kept[il], topk);
    }
    return PK_OK;
}

int pk_prune_check(const pk_model *m, pk_error *err) {
    const pk_hparams *hp = &m->hp;
    if (!hp->moe)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: architecture %s has no routed experts (a dense model): nothing "
                         "to prune", m->path, m->arch->name);
    if (hp->n_nextn)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: %d MTP block(s) (nextn_predict_layers): their experts never "
                         "run, so they have no saliency; not supported", m->path, hp->n_nextn);
    if (hp->n_group)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: experts in %d groups (expert_group_count): pruning would "
                         "unbalance the groups; not supported", m->path, hp->n_group);
    return PK_OK;
}

int pk_prune_file(const pk_model *m, const char *out, const pk_prune_params *p, pk_error *err) {
    const pk_hparams *hp = &m->hp;
    const gguf_file *f = m->gguf;
    if (!out || !p || !p->keep) return pk_errorf(err, PK_ERR_ARG, "pk_prune_file: missing output or keep mask");
    int rc = pk_prune_check(m, err);
    if (rc) return rc;
    int *kept = pk_calloc((size_t)hp->n_layer, sizeof *kept);
    cut *cuts = pk_calloc(f->n_tensors ? (size_t)f->n_tensors : 1, sizeof *cuts);
    gguf_writer *w = NULL;
    rc = kept && cuts ? PK_OK : pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    if (rc || (rc = count_kept(m, p, kept, err)) || (rc = plan_cuts(m, kept, cuts, err)) ||
        (rc = gguf_writer_new(out, &w, err)))
        goto done;
    struct stat si, so;
    if (stat(m->path, &si) == 0 && stat(gguf_writer_tmp_path(w), &so) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino) {
        rc = pk_errorf(err, PK_ERR_ARG, "%s: the output's temporary file %s is the input", m->path,
                       gguf_writer_tmp_path(w));
        goto done;
    }
    if ((rc = write_keys(m, w, kept, p, err))) goto done;
    for (uint64_t i = 0; i < f->n_tensors && !rc; i++) {
        const gguf_tensor *t = &f->tensors[i];
        int64_t ne[4] = {t->ne[0], t->ne[1], t->ne[2], t->ne[3]};
        if (cuts[i].dim) ne[cuts[i].dim - 1] = kept[cuts[i].layer];
        rc = gguf_writer_add_tensor(w, t->name, t->n_dims, ne, t->type, err);
    }
    if (rc || (rc = gguf_writer_begin(w, err))) goto done;
    for (uint64_t i = 0; i < f->n_tensors && !rc; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const int il = cuts[i].layer;
        rc = cuts[i].dim ? write_cut(w, t, &cuts[i], p->keep + (size_t)il * hp->n_expert, m->blocks[il].ff.n_expert, err)
                         : gguf_writer_write(w, t->data, (size_t)t->nbytes, err);
    }
    if (!rc) rc = gguf_writer_finish(w, err);
done:
    gguf_writer_free(w);
    free(cuts);
    free(kept);
    return rc;
}
