/* engine/context.c - create and drive a decoding context (public API in pocket.h).
 * Everything a batch needs is allocated here, once: decoding allocates
 * nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "engine/context.h"

#define DEFAULT_BATCH 512
#define DEFAULT_CHECKPOINTS 4

pk_context_params pk_context_default_params(void) {
    pk_context_params p = {.n_ctx = 0, .n_threads = 0, .n_batch = 0, .type_k = PK_CACHE_F16, .type_v = PK_CACHE_F16,
                           .n_checkpoints = -1};
    return p;
}

/* ---- KV cache types ---------------------------------------------------------- */

static const struct { const char *name; int type; } cache_types[] = {
    [PK_CACHE_DEFAULT] = {"f16", PK_TYPE_F16},
    [PK_CACHE_F32] = {"f32", PK_TYPE_F32},
    [PK_CACHE_F16] = {"f16", PK_TYPE_F16},
    [PK_CACHE_Q8_0] = {"q8_0", PK_TYPE_Q8_0},
};
#define N_CACHE_TYPES (int)(sizeof cache_types / sizeof cache_types[0])

const char *pk_cache_type_name(int type) {
    return type >= 0 && type < N_CACHE_TYPES ? cache_types[type].name : NULL;
}

int pk_cache_type_parse(const char *name) {
    for (int t = PK_CACHE_DEFAULT + 1; name && t < N_CACHE_TYPES; t++)
        if (!strcasecmp(name, cache_types[t].name)) return t;
    return -1;
}

/* The element type (PK_TYPE_*) of cache type t for rows of heads of hd
 * elements, or an error naming what (keys / values) and why. */
static int cache_elem_type(int t, const char *what, int hd, int *out, pk_error *err) {
    if (t < 0 || t >= N_CACHE_TYPES)
        return pk_errorf(err, PK_ERR_ARG, "cache type %d for the %s is not one of f32, f16, q8_0", t, what);
    *out = cache_types[t].type;
    const int blck = pk_type_get(*out)->blck;
    if (hd % blck)
        return pk_errorf(err, PK_ERR_UNSUPPORTED,
                         "a %s cache for the %s needs a head dimension that is a multiple of %d; this "
                         "model's is %d (use f16 or f32)", cache_types[t].name, what, blck, hd);
    return PK_OK;
}

/* Bytes of memory available now (0 if unknown). */
static uint64_t mem_available(void) {
#if defined(_SC_AVPHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_AVPHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0) return (uint64_t)pages * (uint64_t)size;
#endif
    return 0;
}

static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

/* Bitmask of activation types the model's matrices want. */
static uint64_t act_types(const pk_model *m) {
    uint64_t mask = 0;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const pk_type_traits *tt = pk_type_get(m->gguf->tensors[i].type);
        if (tt && tt->vec_dot_type >= 0) mask |= 1ull << tt->vec_dot_type;
    }
    return mask;
}

/* cos/sin of pos * theta_i for every position and i < n_rot/2,
 * theta_i = base^(-2i/n_rot) / freq_factor_i, scaled as r->scaling says
 * (model/blocks.h: linear or YaRN): the table of rope r. The factors are
 * dequantized into ff (half floats). */
static void rope_table(pk_context *c, const pk_rope *r, float *cos_t, float *sin_t, float *ff) {
    const int half = r->n_rot / 2;
    const pk_rope_scaling *sc = &r->scaling;
    for (int i = 0; i < half; i++) ff[i] = 1.0f;
    if (r->freqs && r->freqs->data) pk_type_get(r->freqs->type)->to_float(r->freqs->data, ff, half);
    /* YaRN's correction dims: the pairs below lo keep their frequency, those
       from hi on are fully interpolated (ggml_rope_yarn_corr_dims) */
    double lo = 0.0, hi = 0.0, mscale = sc->attn_factor;
    if (sc->ext_factor != 0.0f) {
        const double lb = 2.0 * log((double)r->base), tau = 2.0 * M_PI;
        lo = floor(r->n_rot * log(sc->n_ctx_orig / (sc->beta_fast * tau)) / lb);
        hi = ceil(r->n_rot * log(sc->n_ctx_orig / (sc->beta_slow * tau)) / lb);
        lo = lo > 0.0 ? lo : 0.0;
        hi = hi < r->n_rot - 1 ? hi : r->n_rot - 1;
        mscale *= 1.0 + 0.1 * log(1.0 / sc->freq_scale);
    }
    for (int i = 0; i < half; i++) {
        const double theta_ext = pow((double)r->base, -2.0 * i / r->n_rot) / ff[i];
        double mix = 0.0;   /* the share of the original (extrapolated) frequency */
        if (sc->ext_factor != 0.0f) {
            double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
            y = y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y;
            mix = (1.0 - y) * sc->ext_factor;
        }
        const double theta = theta_ext * sc->freq_scale * (1.0 - mix) + theta_ext * mix;
        for (int p = 0; p < c->n_ctx; p++) {
            cos_t[(size_t)p * half + i] = (float)(cos(p * theta) * mscale);
            sin_t[(size_t)p * half + i] = (float)(sin(p * theta) * mscale);
        }
    }
}

/* What each layer keeps per sequence, from its mixer (engine/kv.h); NULL if out
 * of memory. */
static pk_kv_need *kv_needs(const pk_model *m) {
    pk_kv_need *need = pk_calloc((size_t)m->hp.n_layer, sizeof *need);
    for (int l = 0; need && l < m->hp.n_layer; l++)
        if (m->blocks[l].mixer->memory) m->blocks[l].mixer->memory(m, &m->blocks[l], &need[l]);
    return need;
}

/* measure: allocate as a real context does (so mem_bytes is the real
   figure), but start no thread pool and fill no tables; the memory plan
   measures the planned context this way at every load. */
static int context_new(const pk_model *m, const pk_context_params *params, pk_context **out, int measure,
                       pk_error *err) {
    *out = NULL;
    pk_context_params p = params ? *params : pk_context_default_params();
    const pk_hparams *hp = &m->hp;
    if (p.n_ctx < 0 || p.n_ctx > (1 << 22))
        return pk_errorf(err, PK_ERR_ARG, "context size %d is out of range [1, %d]", p.n_ctx, 1 << 22);
    if (p.n_threads < 0 || p.n_threads > 512)
        return pk_errorf(err, PK_ERR_ARG, "thread count %d is out of range [1, 512]", p.n_threads);
    if (p.n_batch < 0 || p.n_batch > 4096)
        return pk_errorf(err, PK_ERR_ARG, "batch size %d is out of range [1, 4096]", p.n_batch);
    if (p.n_checkpoints < -1 || p.n_checkpoints > 4096)
        return pk_errorf(err, PK_ERR_ARG, "checkpoint count %d is out of range [0, 4096]", p.n_checkpoints);
    if (p.n_checkpoints == -1) p.n_checkpoints = DEFAULT_CHECKPOINTS;
    pk_kv_need *need = kv_needs(m);   /* freed before the context is counted */
    if (!need) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    /* the head sizes of every cached layer (layers may differ: engine/kv.h), the
       latent rows (in the key type) */
    int tk = PK_TYPE_F16, tv = PK_TYPE_F16;
    int rc = cache_elem_type(p.type_k, "keys", 0, &tk, err);
    if (!rc) rc = cache_elem_type(p.type_v, "values", 0, &tv, err);
    for (int l = 0; !rc && l < hp->n_layer; l++) {
        if (need[l].kind == PK_MEM_KV) {
            rc = cache_elem_type(p.type_k, "keys", need[l].k_dim / need[l].n_head_kv, &tk, err);
            if (!rc) rc = cache_elem_type(p.type_v, "values", need[l].v_dim / need[l].n_head_kv, &tv, err);
        } else if (need[l].kind == PK_MEM_LATENT) {
            rc = cache_elem_type(p.type_k, "keys", need[l].lat_dim, &tk, err);
        }
    }
    if (rc) {
        free(need);
        return rc;
    }
    if (p.n_ctx == 0) {
        /* the trained length when its cache fits a quarter of the free memory */
        uint64_t per_tok = 0;
        for (int l = 0; l < hp->n_layer; l++)
            if (need[l].kind == PK_MEM_KV)
                per_tok += pk_row_size(tk, need[l].k_dim) + pk_row_size(tv, need[l].v_dim);
            else if (need[l].kind == PK_MEM_LATENT)
                per_tok += pk_row_size(tk, need[l].lat_dim);
        const uint64_t avail = mem_available();
        const int train = hp->n_ctx_train < (1 << 22) ? hp->n_ctx_train : 1 << 22;
        p.n_ctx = train <= 4096 || (avail && per_tok * (uint64_t)train <= avail / 4) ? train : 4096;
    }
    if (p.n_threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        p.n_threads = n > 0 ? (int)n : 1;
    }
    if (p.n_batch == 0) p.n_batch = DEFAULT_BATCH;
    if (p.n_batch > p.n_ctx) p.n_batch = p.n_ctx;
    const uint64_t alloc0 = pk_alloc_bytes;
    pk_context *c = pk_calloc(1, sizeof *c);
    if (!c) {
        free(need);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    }
    c->m = m;
    c->n_ctx = p.n_ctx;
    c->n_batch = p.n_batch;
    c->kern = pk_kernels_get();
    const int64_t B = p.n_batch, D = hp->n_embd;
    int ok = pk_kv_init(&c->kv, hp->n_layer, need, p.n_ctx, tk, tv) == PK_OK;
    free(need);
    ok = ok && (measure || (c->pool = pk_pool_new(p.n_threads)));
    /* what the blocks need: the largest over the plan's kinds and layers;
       slot X holds every block's input and the output head's (B rows of D) */
    pk_scratch need_s = {0};
    pk_raise(&need_s.slot[PK_SLOT_X], B * D);
    pk_raise(&need_s.jobs, 1);
    pk_raise(&need_s.rows, B);
    pk_raise(&need_s.row, D);   /* the norms of D-wide rows (engine/forward.c) */
    for (int l = 0; ok && l < hp->n_layer; l++) {
        const pk_block *bk = &m->blocks[l];
        bk->mixer->scratch(c, bk, &need_s);
        bk->ffn->scratch(c, bk, &need_s);
    }
#define ALLOC(ptr, n) ok = ok && ((ptr) = pk_calloc((size_t)max2((n), 1), sizeof *(ptr)))
    ALLOC(c->x, B * D);
    ALLOC(c->xb, B * D);
    ALLOC(c->xb2, B * D);
    c->arena_bytes = (size_t)need_s.arena;
    ALLOC(c->arena, need_s.arena);
    int64_t half_max = 0;   /* rope_table's frequency factors go in c->row */
    for (int r = 0; r < m->n_rope; r++) {
        ALLOC(c->rope_cos[r], (int64_t)p.n_ctx * (m->rope[r].n_rot / 2));
        ALLOC(c->rope_sin[r], (int64_t)p.n_ctx * (m->rope[r].n_rot / 2));
        pk_raise(&half_max, m->rope[r].n_rot / 2);
    }
    pk_raise(&need_s.row, half_max);
    c->row_cap = need_s.row;
    ALLOC(c->row, c->row_cap);
    ALLOC(c->logits, hp->n_vocab);
    ALLOC(c->tokens, p.n_ctx);
    /* checkpoints: only where a layer keeps a running state */
    c->ckpt_floats = (size_t)c->kv.n_rec * ((size_t)c->kv.conv_rows * c->kv.conv_dim + (size_t)c->kv.ssm_size);
    c->ckpt_cap = c->ckpt_floats ? p.n_checkpoints : 0;
    ALLOC(c->ckpt_pos, c->ckpt_cap);
    ALLOC(c->ckpt_slot, c->ckpt_cap);
    ALLOC(c->ckpt_state, (int64_t)c->ckpt_cap * (int64_t)c->ckpt_floats);
    c->n_jobs_cap = (int)need_s.jobs;
    ALLOC(c->jobs, c->n_jobs_cap);
    c->xptr_cap = need_s.rows;
    ALLOC(c->xptr, c->xptr_cap);
    ALLOC(c->xptr_off, c->n_jobs_cap);
    /* activation slots: capacity in elements (rows x row length) */
    for (int s = 0; s < PK_N_SLOTS; s++) c->slot[s].cap = need_s.slot[s];
    uint64_t types = act_types(m) & ~1ull; /* F32 activations need no buffer */
    for (int s = 0; ok && s < PK_N_SLOTS; s++)
        for (int t = 0; t < PK_TYPE_COUNT; t++)
            if (types >> t & 1 && c->slot[s].cap > 0)
                ALLOC(*(uint8_t **)&c->slot[s].buf[t], pk_row_size(t, c->slot[s].cap) + 64);
#undef ALLOC
    if (!ok) {
        pk_context_free(c);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory for a context of %d tokens", p.n_ctx);
    }
    c->mem_bytes = pk_alloc_bytes - alloc0;
    if (!measure)
        for (int r = 0; r < m->n_rope; r++)
            rope_table(c, &m->rope[r], c->rope_cos[r], c->rope_sin[r], pk_row_buf(c, m->rope[r].n_rot / 2));
    *out = c;
    return PK_OK;
}

int pk_context_new(const pk_model *m, const pk_context_params *params, pk_context **out, pk_error *err) {
    return context_new(m, params, out, 0, err);
}

int pk_context_measure(const pk_model *m, const pk_context_params *params, uint64_t *mem_bytes, int *n_ctx,
                       uint64_t *kv_bytes_per_token, int *n_checkpoints, uint64_t *checkpoint_bytes,
                       pk_error *err) {
    pk_context *c;
    int rc = context_new(m, params, &c, 1, err);
    if (rc) return rc;
    *mem_bytes = c->mem_bytes;
    *n_ctx = c->n_ctx;
    *n_checkpoints = c->ckpt_cap;
    *checkpoint_bytes = pk_context_checkpoint_bytes(c);
    pk_context_kv_size(c, kv_bytes_per_token, NULL);
    pk_context_free(c);
    return PK_OK;
}

void pk_context_free(pk_context *c) {
    if (!c) return;
    pk_pool_free(c->pool);
    pk_kv_free(&c->kv);
    for (int s = 0; s < PK_N_SLOTS; s++)
        for (int t = 0; t < PK_TYPE_COUNT; t++) free(c->slot[s].buf[t]);
    void *bufs[] = {c->x,    c->xb,   c->xb2,      c->arena,    c->row,       c->logits,    c->jobs,
                    c->xptr, c->xptr_off, c->tokens, c->ckpt_pos, c->ckpt_slot, c->ckpt_state};
    for (int r = 0; r < PK_MAX_ROPE; r++) {
        free(c->rope_cos[r]);
        free(c->rope_sin[r]);
    }
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c);
}

void pk_context_reset(pk_context *c) { pk_context_truncate(c, 0); }
int pk_context_pos(const pk_context *c) { return c->pos; }
int pk_context_n_ctx(const pk_context *c) { return c->n_ctx; }
void pk_context_kv_size(const pk_context *c, uint64_t *kv_bytes_per_token, uint64_t *recurrent_bytes) {
    const pk_kv *kv = &c->kv;
    if (kv_bytes_per_token) *kv_bytes_per_token = (uint64_t)kv->row_bytes + (uint64_t)kv->n_lat * kv->lat_row;
    if (recurrent_bytes)
        *recurrent_bytes = (uint64_t)kv->n_rec * sizeof(float) *
                           ((uint64_t)kv->conv_rows * kv->conv_dim + (uint64_t)kv->ssm_size);
}
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

/* Feed tokens in batches of n_batch; logits of the last token into
 * c->logits, and of every token into all (n x n_vocab) if all != NULL. */
static int decode_batches(pk_context *c, const int32_t *tokens, int n, float *all, pk_error *err) {
    int rc = check_batch(c, tokens, n, err);
    if (rc) return rc;
    const size_t V = (size_t)c->m->hp.n_vocab;
    for (int i = 0; i < n; i += c->n_batch) {
        int nb = n - i < c->n_batch ? n - i : c->n_batch;
        float *out = all ? all + (size_t)i * V : i + nb == n ? c->logits : NULL;
        pk_ckpt_marks(c, nb);
        rc = pk_forward_batch(c, tokens + i, nb, out, all != NULL);
        pk_ckpt_marks_done(c, rc == PK_OK);
        if (rc) {
            if (rc == PK_ERR_IO) return pk_errorf(err, rc, "%s", c->io_msg);
            return pk_errorf(err, rc, "out of memory for scratch (position %d, %d tokens)", c->pos, nb);
        }
    }
    if (all && n > 0) memcpy(c->logits, all + (size_t)(n - 1) * V, V * sizeof(float));
    return PK_OK;
}

int pk_decode(pk_context *c, const int32_t *tokens, int n, pk_error *err) {
    return decode_batches(c, tokens, n, NULL, err);
}

int pk_decode_all(pk_context *c, const int32_t *tokens, int n, float *all_logits, pk_error *err) {
    if (n > 0 && !all_logits) return pk_errorf(err, PK_ERR_ARG, "pk_decode_all: no logits buffer");
    return decode_batches(c, tokens, n, all_logits, err);
}

/* The phase named name under parent (-1: none), made if new; -1 if the
 * table is full (that phase is then not profiled) */
static int prof_find(pk_context *c, const char *name, int parent) {
    for (int i = 0; i < c->n_prof; i++)
        if (c->prof[i].parent == parent && (c->prof[i].name == name || !strcmp(c->prof[i].name, name))) return i;
    if (c->n_prof == PK_PROF_MAX) return -1;
    c->prof[c->n_prof] = (pk_prof_entry){.name = name, .parent = parent};
    return c->n_prof++;
}

void pk_prof_add(pk_context *c, const char *name, const char *parent, const pk_prof_mark *m) {
    const int p = parent ? prof_find(c, parent, -1) : -1;
    const int i = parent && p < 0 ? -1 : prof_find(c, name, p);
    if (i < 0) return;
    pk_prof_entry *e = &c->prof[i];
    e->calls++;
    e->secs += pk_time() - m->t;
    e->wait_secs += pk_pool_wait_secs(c->pool) - m->wait;
    e->weight_bytes += c->weight_bytes - m->wb;
    e->state_bytes += c->state_bytes - m->sb;
}

void pk_context_profile(pk_context *c, int on) {
    c->prof_on = on != 0;
    if (on) c->n_prof = 0;
}

int pk_context_profile_get(const pk_context *c, pk_profile_phase *out, int max) {
    for (int i = 0; i < c->n_prof && i < max; i++)
        out[i] = (pk_profile_phase){.name = c->prof[i].name, .parent = c->prof[i].parent, .calls = c->prof[i].calls,
                                    .secs = c->prof[i].secs, .wait_secs = c->prof[i].wait_secs,
                                    .weight_bytes = c->prof[i].weight_bytes, .state_bytes = c->prof[i].state_bytes};
    return c->n_prof;
}

void pk_context_stats(const pk_context *c, pk_stats *out) {
    out->tokens = c->n_tokens;
    out->weight_bytes = c->weight_bytes;
    out->state_bytes = c->state_bytes;
    out->isa = c->kern->isa;
    out->n_threads = pk_pool_size(c->pool);
    out->mem_bytes = c->mem_bytes;
    out->expert_hits = c->xstats.hits;
    out->expert_misses = c->xstats.misses;
    out->storage_bytes = c->xstats.bytes_read;
    out->storage_secs = c->xstats.read_secs;
    out->expert_prefetches = c->xstats.prefetches;
    out->expert_prefetch_hits = c->xstats.prefetch_hits;
}
