/* text/grammar_match.c - matching a compiled grammar byte by byte, and the
 * tokens of a vocabulary it allows next.
 *
 * Stacks are hash-consed: a node is (element to match next, the node below)
 * and equal stacks are one node, so a state (a set of stacks after some
 * bytes) is a sorted list of node ids, itself interned. Advancing a state
 * by a byte keeps the stacks whose top byte set holds it and expands what
 * follows (the end of an alternative pops to the node below; a reference
 * pushes its return position unless it ends the alternative - a tail call,
 * so right recursion and repetitions run in constant depth); every result
 * is memoised as (state, byte) -> state.
 *
 * The tokens a state allows, for a vocabulary of up to 262k tokens, are
 * found without walking the vocabulary for each state:
 *   - each stack is cut to its top two frames, with "unknown" below: a walk
 *     of the vocabulary trie from that cut stack (pruning a subtree as soon
 *     as no stack takes its byte) sorts the tokens into accepted (taken
 *     whatever is below), rejected, and uncertain (the cut stack emptied
 *     before the token's bytes ran out). The result is cached per cut stack,
 *     so a string's or a number's loop is walked once per grammar;
 *   - the state's mask is the union of its stacks' accepted tokens, plus
 *     the uncertain ones that the whole state takes, checked token by token
 *     in byte order so that shared prefixes are advanced once;
 *   - masks are cached per state (a ring of slots).
 * Limits (PK_GRAMMAR_MAX_STACKS live stacks, PK_GRAMMAR_MAX_NODES nodes)
 * stop ambiguous grammars that would grow without bound: the state turns
 * dead and pk_grammar_overflow says why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/grammar_int.h"

#define MISS UINT32_MAX
#define MASK_SLOTS 32
#define CUT_FRAMES 2

/* ---- hash map ------------------------------------------------------------ */

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint32_t pk_gmap_get(const gmap *m, uint64_t k) {
    if (!m->cap) return MISS;
    uint64_t i = mix64(k) & (m->cap - 1);
    for (;;) {
        uint64_t s = m->key[i];
        if (!s) return MISS;
        if (s == k + 1) return m->val[i];
        i = (i + 1) & (m->cap - 1);
    }
}

int pk_gmap_put(gmap *m, uint64_t k, uint32_t v) {
    if ((m->n + 1) * 2 > m->cap) {
        uint64_t nc = m->cap ? m->cap * 2 : 256;
        uint64_t *nk = pk_calloc(nc, sizeof *nk);
        uint32_t *nv = pk_calloc(nc, sizeof *nv);
        if (!nk || !nv) { free(nk); free(nv); return -1; }
        for (uint64_t i = 0; i < m->cap; i++) {
            if (!m->key[i]) continue;
            uint64_t j = mix64(m->key[i] - 1) & (nc - 1);
            while (nk[j]) j = (j + 1) & (nc - 1);
            nk[j] = m->key[i];
            nv[j] = m->val[i];
        }
        free(m->key); free(m->val);
        m->key = nk; m->val = nv; m->cap = nc;
    }
    uint64_t i = mix64(k) & (m->cap - 1);
    while (m->key[i] && m->key[i] != k + 1) i = (i + 1) & (m->cap - 1);
    if (!m->key[i]) m->n++;
    m->key[i] = k + 1;
    m->val[i] = v;
    return 0;
}

void pk_gmap_free(gmap *m) {
    free(m->key);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* ---- the vocabulary trie ---------------------------------------------------- */

/* A trie node: the tokens of its subtree are sorted indices [lo, hi); its
 * own (whose bytes are the path) come first, then the children's, which
 * are nodes [child, child + n_child) in byte order. */
typedef struct vnode {
    uint32_t lo, hi, child;
    uint16_t n_child;
    uint8_t byte;
    uint8_t pad;
} vnode;

struct pk_vtrie {
    int n_vocab;
    uint32_t n_tok;          /* tokens with bytes */
    int32_t *sid;            /* [n_tok] id of each sorted index */
    uint32_t *soff;          /* [n_tok + 1] where each sorted token's bytes start */
    char *bytes;
    uint32_t *sidx;          /* [n_vocab] sorted index of each id, MISS: no bytes */
    vnode *node;
    uint32_t n_node;
    uint32_t max_len;
    int32_t byte_tok[256];   /* a token of exactly that byte, -1 */
    uint8_t *eog;            /* [n_vocab] */
    int32_t *eog_ids;        /* [n_eog] */
    int n_eog;
};

static _Thread_local const pk_vtrie *sort_ctx;
static _Thread_local const uint32_t *sort_off;

static int cmp_tok(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = sort_off[x + 1] - sort_off[x], ly = sort_off[y + 1] - sort_off[y];
    int c = memcmp(sort_ctx->bytes + sort_off[x], sort_ctx->bytes + sort_off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

void pk_vtrie_free(pk_vtrie *v) {
    if (!v) return;
    free(v->sid); free(v->soff); free(v->bytes); free(v->sidx); free(v->node); free(v->eog);
    free(v->eog_ids);
    free(v);
}

int pk_vtrie_n_vocab(const pk_vtrie *v) { return v->n_vocab; }
int pk_vtrie_is_eog(const pk_vtrie *v, int32_t id) { return id >= 0 && id < v->n_vocab && v->eog[id]; }

const int32_t *pk_vtrie_eog_ids(const pk_vtrie *v, int *n) {
    *n = v->n_eog;
    return v->eog_ids;
}

void pk_vtrie_stats(const pk_vtrie *v, int *n_tokens, int *n_nodes) {
    *n_tokens = (int)v->n_tok;
    *n_nodes = (int)v->n_node;
}

static int tok_piece(const void *ctx, int32_t id, char *buf, int cap) {
    return pk_token_to_piece(ctx, id, buf, cap, 0);
}

static int tok_eog(const void *ctx, int32_t id) { return pk_tokenizer_is_eog(ctx, id); }

int pk_vtrie_build(const pk_tokenizer *t, pk_vtrie **out, pk_error *err) {
    return pk_vtrie_build_fn(pk_tokenizer_n_vocab(t), tok_piece, tok_eog, t, out, err);
}

int pk_vtrie_build_fn(int nv, int (*piece)(const void *ctx, int32_t id, char *buf, int cap),
                      int (*is_eog)(const void *ctx, int32_t id), const void *t, pk_vtrie **out, pk_error *err) {
    *out = NULL;
    if (nv <= 0) return pk_errorf(err, PK_ERR_ARG, "grammar: a vocabulary of %d tokens", nv);
    pk_vtrie *v = pk_calloc(1, sizeof *v);
    uint32_t *off = malloc(((size_t)nv + 1) * sizeof *off);   /* by id */
    char *raw = NULL, *buf = NULL;
    size_t raw_cap = 0, raw_n = 0;
    int32_t *ids = NULL;
    uint32_t *queue = NULL;
    if (!v || !off) goto nomem;
    v->n_vocab = nv;
    v->sidx = malloc((size_t)nv * sizeof *v->sidx);
    v->eog = pk_calloc((size_t)nv, 1);
    ids = malloc((size_t)nv * sizeof *ids);
    int cap = 256;
    buf = malloc((size_t)cap);
    if (!v->sidx || !v->eog || !ids || !buf) goto nomem;
    for (int i = 0; i < 256; i++) v->byte_tok[i] = -1;
    uint32_t n = 0;
    for (int id = 0; id < nv; id++) {
        v->eog[id] = (uint8_t)(is_eog(t, id) != 0);
        int len = piece(t, id, buf, cap);
        if (len > cap) {
            char *nb = realloc(buf, (size_t)len);
            if (!nb) goto nomem;
            buf = nb;
            cap = len;
            len = piece(t, id, buf, cap);
        }
        if (len < 0) len = 0;
        if (raw_n + (size_t)len > UINT32_MAX) {
            pk_vtrie_free(v); free(off); free(raw); free(buf); free(ids);
            return pk_errorf(err, PK_ERR_UNSUPPORTED, "grammar: the vocabulary's text is larger than 4 GB");
        }
        if (raw_n + (size_t)len > raw_cap) {
            size_t nc = raw_cap ? raw_cap * 2 : 1 << 16;
            while (nc < raw_n + (size_t)len) nc *= 2;
            char *nr = realloc(raw, nc);
            if (!nr) goto nomem;
            raw = nr;
            raw_cap = nc;
        }
        off[id] = (uint32_t)raw_n;
        memcpy(raw + raw_n, buf, (size_t)len);
        raw_n += (size_t)len;
        if (len > 0 && !v->eog[id]) ids[n++] = id;
        if ((uint32_t)len > v->max_len) v->max_len = (uint32_t)len;
    }
    off[nv] = (uint32_t)raw_n;
    for (int id = 0; id < nv; id++) v->n_eog += v->eog[id];
    v->eog_ids = malloc(((size_t)v->n_eog + 1) * sizeof *v->eog_ids);
    if (!v->eog_ids) goto nomem;
    for (int id = 0, k = 0; id < nv; id++)
        if (v->eog[id]) v->eog_ids[k++] = id;
    struct pk_vtrie tmp = {.bytes = raw};
    sort_ctx = &tmp;
    sort_off = off;
    qsort(ids, n, sizeof *ids, cmp_tok);
    /* the sorted copy of the bytes */
    v->n_tok = n;
    v->sid = ids;
    ids = NULL;
    v->soff = malloc(((size_t)n + 1) * sizeof *v->soff);
    v->bytes = malloc(raw_n ? raw_n : 1);
    if (!v->soff || !v->bytes) goto nomem;
    for (int id = 0; id < nv; id++) v->sidx[id] = MISS;
    uint32_t at = 0;
    for (uint32_t i = 0; i < n; i++) {
        int32_t id = v->sid[i];
        uint32_t len = off[id + 1] - off[id];
        v->soff[i] = at;
        memcpy(v->bytes + at, raw + off[id], len);
        at += len;
        v->sidx[id] = i;
        if (len == 1 && v->byte_tok[(uint8_t)raw[off[id]]] < 0) v->byte_tok[(uint8_t)raw[off[id]]] = id;
    }
    v->soff[n] = at;
    free(raw); raw = NULL;
    free(off); off = NULL;
    /* the trie, breadth first: a node's children are made together */
    uint32_t cap_node = 1024, nq = 0, qh = 0, cap_q = 1024;
    v->node = malloc(cap_node * sizeof *v->node);
    queue = malloc(cap_q * 2 * sizeof *queue);   /* (node, depth) */
    if (!v->node || !queue) goto nomem;
    v->node[0] = (vnode){.lo = 0, .hi = n};
    v->n_node = 1;
    queue[0] = 0; queue[1] = 0; nq = 1;
    while (qh < nq) {
        uint32_t ni = queue[2 * (qh % cap_q)], d = queue[2 * (qh % cap_q) + 1];
        qh++;
        uint32_t lo = v->node[ni].lo, hi = v->node[ni].hi, i = lo;
        while (i < hi && v->soff[i + 1] - v->soff[i] == d) i++;      /* its own tokens */
        uint32_t first = v->n_node, nc = 0;
        while (i < hi) {
            uint8_t b = (uint8_t)v->bytes[v->soff[i] + d];
            uint32_t j = i + 1;
            while (j < hi && (uint8_t)v->bytes[v->soff[j] + d] == b) j++;
            if (v->n_node == cap_node) {
                vnode *nn = realloc(v->node, (size_t)cap_node * 2 * sizeof *nn);
                if (!nn) goto nomem;
                v->node = nn;
                cap_node *= 2;
            }
            v->node[v->n_node++] = (vnode){.lo = i, .hi = j, .byte = b};
            if (nq - qh == cap_q) {
                /* grow the ring: unroll it into a bigger one */
                uint32_t *nqb = malloc((size_t)cap_q * 4 * sizeof *nqb);
                if (!nqb) goto nomem;
                for (uint32_t k = 0; k < nq - qh; k++) {
                    nqb[2 * k] = queue[2 * ((qh + k) % cap_q)];
                    nqb[2 * k + 1] = queue[2 * ((qh + k) % cap_q) + 1];
                }
                free(queue);
                queue = nqb;
                nq -= qh; qh = 0;
                cap_q *= 2;
            }
            queue[2 * (nq % cap_q)] = v->n_node - 1;
            queue[2 * (nq % cap_q) + 1] = d + 1;
            nq++;
            nc++;
            i = j;
        }
        v->node[ni].child = first;
        v->node[ni].n_child = (uint16_t)nc;
    }
    free(queue);
    free(buf);
    *out = v;
    return PK_OK;
nomem:
    free(off); free(raw); free(buf); free(ids); free(queue);
    pk_vtrie_free(v);
    return pk_errorf(err, PK_ERR_NOMEM, "grammar: out of memory building the vocabulary trie");
}

/* ---- nodes and states ------------------------------------------------------- */

static void overflow(pk_grammar *g, const char *what) {
    if (g->overflow) return;
    g->overflow = 1;
    snprintf(g->overflow_msg, sizeof g->overflow_msg, "grammar: %s", what);
}

static uint32_t node_get(pk_grammar *g, uint32_t pos, uint32_t parent) {
    uint64_t key = (uint64_t)pos << 32 | parent;
    uint32_t v = pk_gmap_get(&g->node_map, key);
    if (v != MISS) return v;
    if (g->n_node >= PK_GRAMMAR_MAX_NODES) { overflow(g, "too many parse stacks (the grammar is too ambiguous)"); return MISS; }
    if (g->n_node == g->cap_node) {
        uint32_t nc = g->cap_node * 2;
        gnode *nn = realloc(g->node, (size_t)nc * sizeof *nn);
        if (!nn) { overflow(g, "out of memory"); return MISS; }
        g->node = nn;
        g->cap_node = nc;
    }
    if (pk_gmap_put(&g->node_map, key, g->n_node)) { overflow(g, "out of memory"); return MISS; }
    g->node[g->n_node] = (gnode){.pos = pos, .parent = parent, .stamp = 0, .dist = MISS};
    return g->n_node++;
}

static int push_u32(pk_grammar *g, uint32_t **a, uint32_t *cap, uint32_t n, uint32_t x) {
    if (n == *cap) {
        uint32_t nc = *cap ? *cap * 2 : 256;
        uint32_t *na = realloc(*a, (size_t)nc * sizeof *na);
        if (!na) { overflow(g, "out of memory"); return -1; }
        *a = na;
        *cap = nc;
    }
    (*a)[n] = x;
    return 0;
}

static void next_stamp(pk_grammar *g) {
    if (++g->stamp == 0) {
        for (uint32_t i = 0; i < g->n_node; i++) g->node[i].stamp = 0;
        g->stamp = 1;
    }
}

/* Expand the n_work nodes of g->work into the stacks they stand for,
 * appended to g->out; returns the count, MISS on overflow. */
static uint32_t expand(pk_grammar *g, uint32_t n_work) {
    uint32_t n_out = 0;
    while (n_work) {
        uint32_t x = g->work[--n_work];
        if (x == MISS) return MISS;
        gnode *nd = &g->node[x];
        if (nd->stamp == g->stamp) continue;
        nd->stamp = g->stamp;
        if (x == GN_EMPTY || x == GN_UNKNOWN) {
            if (push_u32(g, &g->out, &g->cap_out, n_out++, x)) return MISS;
            continue;
        }
        uint32_t pos = nd->pos, parent = nd->parent;
        gelem e = g->el[pos];
        switch (GE_KIND(e)) {
        case GE_END:
            if (push_u32(g, &g->work, &g->cap_work, n_work++, parent)) return MISS;
            break;
        case GE_BYTES:
            if (n_out >= PK_GRAMMAR_MAX_STACKS) {
                overflow(g, "more than 4096 parse stacks at once (the grammar is too ambiguous)");
                return MISS;
            }
            if (push_u32(g, &g->out, &g->cap_out, n_out++, x)) return MISS;
            break;
        default: {
            uint32_t r = GE_VAL(e);
            uint32_t np = GE_KIND(g->el[pos + 1]) == GE_END ? parent : node_get(g, pos + 1, parent);
            if (np == MISS) return MISS;
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) {
                uint32_t c = node_get(g, g->alt[a], np);
                if (c == MISS || push_u32(g, &g->work, &g->cap_work, n_work++, c)) return MISS;
            }
        }
        }
    }
    return n_out;
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The state of the n sorted nodes of g->out (0 when n is 0). */
static uint32_t intern(pk_grammar *g, uint32_t n) {
    if (!n) return 0;
    qsort(g->out, n, sizeof *g->out, cmp_u32);
    uint64_t h = pk_hash64(0, g->out, (size_t)n * sizeof *g->out);
    uint32_t s = pk_gmap_get(&g->st_map, h);
    for (uint32_t k = s; k != MISS; k = g->st_next[k])
        if (g->st[k].n == n && !memcmp(g->pool + g->st[k].off, g->out, (size_t)n * sizeof *g->out)) return k;
    if (g->n_st == g->cap_st) {
        uint32_t nc = g->cap_st * 2;
        gstate *ns = realloc(g->st, (size_t)nc * sizeof *ns);
        uint32_t *nn = ns ? realloc(g->st_next, (size_t)nc * sizeof *nn) : NULL;
        if (ns) g->st = ns;
        if (!nn) { overflow(g, "out of memory"); return 0; }
        g->st_next = nn;
        g->cap_st = nc;
    }
    if (g->n_pool + n > g->cap_pool) {
        uint64_t nc = g->cap_pool * 2;
        while (nc < g->n_pool + n) nc *= 2;
        uint32_t *np = realloc(g->pool, nc * sizeof *np);
        if (!np) { overflow(g, "out of memory"); return 0; }
        g->pool = np;
        g->cap_pool = nc;
    }
    if (g->n_pool + n > UINT32_MAX) { overflow(g, "too many parse states"); return 0; }
    uint32_t id = g->n_st;
    gstate *st = &g->st[id];
    memset(st, 0, sizeof *st);
    st->off = (uint32_t)g->n_pool;
    st->n = n;
    st->dist = MISS;
    st->ctok = MISS;
    st->mask = -1;
    memcpy(g->pool + g->n_pool, g->out, (size_t)n * sizeof *g->out);
    g->n_pool += n;
    st->has_end = g->out[0] == GN_EMPTY;
    st->has_unknown = g->out[0] == GN_UNKNOWN || (n > 1 && g->out[1] == GN_UNKNOWN);
    g->st_next[id] = s;
    if (pk_gmap_put(&g->st_map, h, id)) { overflow(g, "out of memory"); return 0; }
    g->n_st++;
    return id;
}

static const uint64_t *first_bytes(pk_grammar *g, uint32_t s) {
    gstate *st = &g->st[s];
    if (!st->has_first) {
        const uint32_t *nd = g->pool + st->off;
        for (uint32_t i = 0; i < st->n; i++) {
            if (nd[i] <= GN_UNKNOWN) continue;
            const uint64_t *set = g->sets[GE_VAL(g->el[g->node[nd[i]].pos])];
            for (int w = 0; w < 4; w++) st->first[w] |= set[w];
        }
        st->has_first = 1;
    }
    return st->first;
}

/* The state after byte b from state s (memoised). */
static uint32_t step(pk_grammar *g, uint32_t s, uint8_t b) {
    if (!s) return 0;
    if (!(first_bytes(g, s)[b >> 6] >> (b & 63) & 1)) return 0;
    uint64_t key = (uint64_t)s << 8 | b;
    uint32_t r = pk_gmap_get(&g->trans, key);
    if (r != MISS) return r;
    if (g->overflow) return 0;
    next_stamp(g);
    uint32_t nw = 0;
    const gstate *st = &g->st[s];
    for (uint32_t i = 0; i < st->n; i++) {
        uint32_t x = g->pool[st->off + i];
        if (x <= GN_UNKNOWN) continue;
        uint32_t pos = g->node[x].pos;
        if (!(g->sets[GE_VAL(g->el[pos])][b >> 6] >> (b & 63) & 1)) continue;
        uint32_t y = node_get(g, pos + 1, g->node[x].parent);
        if (y == MISS || push_u32(g, &g->work, &g->cap_work, nw++, y)) return 0;
        st = &g->st[s];
    }
    uint32_t n = expand(g, nw);
    if (n == MISS) return 0;
    r = intern(g, n);
    if (g->overflow) return 0;
    if (pk_gmap_put(&g->trans, key, r)) { overflow(g, "out of memory"); return 0; }
    return r;
}

/* ---- set up ------------------------------------------------------------------ */

int pk_grammar_match_init(pk_grammar *g, pk_error *err) {
    g->cap_node = 1024;
    g->node = malloc(g->cap_node * sizeof *g->node);
    g->cap_st = 256;
    g->st = malloc(g->cap_st * sizeof *g->st);
    g->st_next = malloc(g->cap_st * sizeof *g->st_next);
    g->cap_pool = 4096;
    g->pool = malloc(g->cap_pool * sizeof *g->pool);
    if (!g->node || !g->st || !g->st_next || !g->pool) return pk_errorf(err, PK_ERR_NOMEM, "grammar: out of memory");
    g->node[GN_EMPTY] = (gnode){.pos = MISS, .parent = MISS, .dist = 0};
    g->node[GN_UNKNOWN] = (gnode){.pos = MISS, .parent = MISS, .dist = 0};
    g->n_node = 2;
    memset(&g->st[0], 0, sizeof g->st[0]);     /* the dead state */
    g->st[0].dist = MISS;
    g->st[0].ctok = MISS - 1;
    g->st[0].mask = -1;
    g->st[0].has_first = 1;
    g->st_next[0] = MISS;
    g->n_st = 1;
    g->stamp = 1;
    uint32_t nw = 0;
    for (uint32_t a = g->rule_alt[g->root]; a < g->rule_alt[g->root + 1]; a++) {
        uint32_t x = node_get(g, g->alt[a], GN_EMPTY);
        if (x == MISS || push_u32(g, &g->work, &g->cap_work, nw++, x)) break;
    }
    uint32_t n = g->overflow ? MISS : expand(g, nw);
    g->start = n == MISS ? 0 : intern(g, n);
    if (g->overflow || !g->start) return pk_errorf(err, PK_ERR_ARG, "%s", g->overflow ? g->overflow_msg : "grammar: no start state");
    if (g->vt) {
        g->mask_words = (uint32_t)((g->vt->n_vocab + 63) / 64);
        g->n_mask_slots = MASK_SLOTS;
        g->mask_bits = malloc((size_t)g->n_mask_slots * g->mask_words * sizeof *g->mask_bits);
        g->mask_owner = malloc(g->n_mask_slots * sizeof *g->mask_owner);
        g->sbits = malloc(((size_t)g->vt->n_tok / 64 + 1) * sizeof *g->sbits);
        g->cap_path = g->vt->max_len + 2;
        g->path = malloc(g->cap_path * sizeof *g->path);
        if (!g->mask_bits || !g->mask_owner || !g->sbits || !g->path)
            return pk_errorf(err, PK_ERR_NOMEM, "grammar: out of memory");
        for (uint32_t i = 0; i < g->n_mask_slots; i++) g->mask_owner[i] = MISS;
    }
    return PK_OK;
}

void pk_grammar_match_free(pk_grammar *g) {
    free(g->node);
    pk_gmap_free(&g->node_map);
    free(g->pool);
    free(g->st);
    free(g->st_next);
    pk_gmap_free(&g->st_map);
    pk_gmap_free(&g->trans);
    pk_gmap_free(&g->local_map);
    for (uint32_t i = 0; i < g->n_local; i++) { free(g->local[i].acc); free(g->local[i].unc); }
    free(g->local);
    free(g->work); free(g->out);
    free(g->mask_bits); free(g->mask_owner); free(g->sbits); free(g->path);
}

/* ---- queries ------------------------------------------------------------------- */

uint32_t pk_grammar_start(pk_grammar *g) { return g->start; }
const char *pk_grammar_overflow(const pk_grammar *g) { return g->overflow ? g->overflow_msg : NULL; }
const pk_vtrie *pk_grammar_vtrie(const pk_grammar *g) { return g->vt; }

uint32_t pk_grammar_advance(pk_grammar *g, uint32_t st, const char *s, size_t n) {
    for (size_t i = 0; i < n && st; i++) st = step(g, st, (uint8_t)s[i]);
    return st;
}

uint32_t pk_grammar_advance_token(pk_grammar *g, uint32_t st, int32_t id) {
    const pk_vtrie *v = g->vt;
    if (!v || id < 0 || id >= v->n_vocab || v->sidx[id] == MISS) return 0;
    uint32_t i = v->sidx[id];
    return pk_grammar_advance(g, st, v->bytes + v->soff[i], v->soff[i + 1] - v->soff[i]);
}

int pk_grammar_check(pk_grammar *g, const char *text, size_t len) {
    if (!g || (!text && len)) return -1;
    uint32_t s = pk_grammar_advance(g, g->start, text, len);
    return !s ? -1 : g->st[s].has_end ? 1 : 0;
}

int pk_grammar_can_end(pk_grammar *g, uint32_t st) { return st && g->st[st].has_end; }
int pk_grammar_must_end(pk_grammar *g, uint32_t st) { return st && g->st[st].has_end && g->st[st].n == 1; }

/* Min bytes from node x to an empty stack. */
static uint32_t node_dist(pk_grammar *g, uint32_t x) {
    uint32_t n = 0;
    for (uint32_t y = x; g->node[y].dist == MISS; y = g->node[y].parent) {
        if (push_u32(g, &g->work, &g->cap_work, n++, y)) return MISS - 1;
    }
    while (n) {
        uint32_t y = g->work[--n];
        uint64_t d = (uint64_t)g->minsuf[g->node[y].pos] + g->node[g->node[y].parent].dist;
        g->node[y].dist = d >= MISS - 1 ? MISS - 1 : (uint32_t)d;
    }
    return g->node[x].dist;
}

uint32_t pk_grammar_distance(pk_grammar *g, uint32_t st) {
    if (!st) return MISS;
    gstate *s = &g->st[st];
    if (s->dist == MISS) {
        uint32_t best = MISS - 1;
        for (uint32_t i = 0; i < s->n; i++) {
            uint32_t d = node_dist(g, g->pool[g->st[st].off + i]);
            if (d < best) best = d;
        }
        g->st[st].dist = best;
    }
    return g->st[st].dist;
}

int32_t pk_grammar_closing_token(pk_grammar *g, uint32_t st) {
    if (!g->vt || !st) return -1;
    uint32_t d = pk_grammar_distance(g, st);
    if (d == 0 || d >= MISS - 1) return -1;
    /* down the trie, at each node the first child whose byte takes the
       state one byte closer (a shortest way goes on); the token of the
       deepest node that has one */
    const pk_vtrie *v = g->vt;
    uint32_t ni = 0, s = st;
    int32_t best = -1;
    for (uint32_t depth = 0; depth < d && depth < v->max_len; depth++) {
        const vnode *n = &v->node[ni];
        uint32_t next = MISS, y = 0, ds = pk_grammar_distance(g, s);
        for (uint32_t c = n->child; c < n->child + n->n_child; c++) {
            uint32_t z = step(g, s, v->node[c].byte);
            if (g->overflow) return best;
            if (z && pk_grammar_distance(g, z) < ds) { next = c; y = z; break; }
        }
        if (next == MISS) break;
        ni = next;
        s = y;
        const vnode *cn = &v->node[ni];
        uint32_t own_end = cn->n_child ? v->node[cn->child].lo : cn->hi;
        for (uint32_t i = cn->lo; i < own_end; i++)
            if (!v->eog[v->sid[i]]) { best = v->sid[i]; break; }
    }
    return best;
}

uint32_t pk_grammar_closing_tokens(pk_grammar *g, uint32_t st) {
    if (!g->vt || !st) return MISS - 1;
    /* follow closing tokens to a state whose count is known (or complete),
       then give each state on the way its count */
    uint32_t *path = NULL, s = st, base = MISS - 1;
    size_t n = 0, cap = 0;
    for (;;) {
        if (g->st[s].ctok != MISS) { base = g->st[s].ctok; break; }
        uint32_t d = pk_grammar_distance(g, s);
        if (d == 0) { g->st[s].ctok = base = 0; break; }
        if (n == cap) {
            size_t nc = cap ? 2 * cap : 16;
            uint32_t *np = realloc(path, nc * sizeof *np);
            if (!np) { overflow(g, "out of memory"); break; }
            path = np;
            cap = nc;
        }
        path[n++] = s;
        int32_t t = d >= MISS - 1 ? -1 : pk_grammar_closing_token(g, s);
        uint32_t y = t < 0 ? 0 : pk_grammar_advance_token(g, s, t);
        if (!y || g->overflow || pk_grammar_distance(g, y) >= d) break;   /* no way on: base stays "none" */
        s = y;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t c = (uint64_t)base + (n - i);
        g->st[path[i]].ctok = c >= MISS - 1 ? MISS - 1 : (uint32_t)c;
    }
    free(path);
    return g->st[st].ctok;
}

/* ---- local walks ------------------------------------------------------------------ */

/* Node x cut to its top k frames ("unknown" below, unless the stack ends). */
static uint32_t cut(pk_grammar *g, uint32_t x, int k) {
    if (x <= GN_UNKNOWN) return x;
    if (k == 0) return GN_UNKNOWN;
    uint32_t p = cut(g, g->node[x].parent, k - 1);
    return p == MISS ? MISS : node_get(g, g->node[x].pos, p);
}

static int range_add(pk_grammar *g, uint32_t **r, uint32_t *n, uint32_t *cap, uint32_t lo, uint32_t hi) {
    if (lo >= hi) return 0;
    if (*n && (*r)[2 * *n - 1] == lo) { (*r)[2 * *n - 1] = hi; return 0; }
    if (2 * *n + 2 > *cap) {
        uint32_t nc = *cap ? *cap * 2 : 64;
        uint32_t *nr = realloc(*r, (size_t)nc * sizeof *nr);
        if (!nr) { overflow(g, "out of memory"); return -1; }
        *r = nr;
        *cap = nc;
    }
    (*r)[2 * *n] = lo;
    (*r)[2 * *n + 1] = hi;
    (*n)++;
    return 0;
}

typedef struct wframe { uint32_t node, st, next, end; int popped; } wframe;

/* Walk the trie from the cut stack c (a node whose top is a byte set). */
static int local_walk(pk_grammar *g, uint32_t c, glocal *L) {
    const pk_vtrie *v = g->vt;
    memset(L, 0, sizeof *L);
    uint32_t cap_acc = 0, cap_unc = 0;
    if (push_u32(g, &g->out, &g->cap_out, 0, c)) return -1;
    uint32_t s0 = intern(g, 1);
    if (!s0) return -1;
    wframe *stk = malloc(((size_t)v->max_len + 2) * sizeof *stk);
    if (!stk) { overflow(g, "out of memory"); return -1; }
    uint32_t ns = 0;
    stk[ns++] = (wframe){.node = 0, .st = s0, .next = v->node[0].child, .end = v->node[0].child + v->node[0].n_child,
                         .popped = g->st[s0].has_unknown};
    int rc = 0;
    while (ns && !rc) {
        wframe *f = &stk[ns - 1];
        if (f->next == f->end) { ns--; continue; }
        const vnode *cn = &v->node[f->next++];
        uint32_t y = step(g, f->st, cn->byte);
        if (g->overflow) { rc = -1; break; }
        if (!y) {
            if (f->popped) rc = range_add(g, &L->unc, &L->n_unc, &cap_unc, cn->lo, cn->hi);
            continue;
        }
        uint32_t own_end = cn->n_child ? v->node[cn->child].lo : cn->hi;
        rc = range_add(g, &L->acc, &L->n_acc, &cap_acc, cn->lo, own_end);
        if (cn->n_child)
            stk[ns++] = (wframe){.node = (uint32_t)(cn - v->node), .st = y, .next = cn->child,
                                 .end = cn->child + cn->n_child, .popped = f->popped || g->st[y].has_unknown};
    }
    free(stk);
    return rc;
}

static const glocal *local_get(pk_grammar *g, uint32_t x) {
    uint32_t c = cut(g, x, CUT_FRAMES);
    if (c == MISS) return NULL;
    uint32_t i = pk_gmap_get(&g->local_map, c);
    if (i != MISS) return &g->local[i];
    if (g->n_local == g->cap_local) {
        uint32_t nc = g->cap_local ? g->cap_local * 2 : 64;
        glocal *nl = realloc(g->local, (size_t)nc * sizeof *nl);
        if (!nl) { overflow(g, "out of memory"); return NULL; }
        g->local = nl;
        g->cap_local = nc;
    }
    glocal L;
    if (local_walk(g, c, &L)) { free(L.acc); free(L.unc); return NULL; }
    if (pk_gmap_put(&g->local_map, c, g->n_local)) { free(L.acc); free(L.unc); overflow(g, "out of memory"); return NULL; }
    g->local[g->n_local] = L;
    return &g->local[g->n_local++];
}

/* ---- masks --------------------------------------------------------------------------- */

static void bits_fill(uint64_t *b, uint32_t lo, uint32_t hi) {
    while (lo < hi && (lo & 63)) { b[lo >> 6] |= 1ull << (lo & 63); lo++; }
    while (lo + 64 <= hi) { b[lo >> 6] = ~0ull; lo += 64; }
    while (lo < hi) { b[lo >> 6] |= 1ull << (lo & 63); lo++; }
}

static int cmp_range2(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

const uint64_t *pk_grammar_mask(pk_grammar *g, uint32_t st) {
    const pk_vtrie *v = g->vt;
    if (!v || !st || g->overflow) return NULL;
    int32_t slot = g->st[st].mask;
    if (slot >= 0 && g->mask_owner[slot] == st) return g->mask_bits + (size_t)slot * g->mask_words;
    uint64_t *sb = g->sbits;
    size_t sw = (size_t)v->n_tok / 64 + 1;
    memset(sb, 0, sw * sizeof *sb);
    uint32_t *unc = NULL, n_unc = 0, cap_unc = 0;
    uint32_t n = g->st[st].n;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t x = g->pool[g->st[st].off + i];
        if (x <= GN_UNKNOWN) continue;
        const glocal *L = local_get(g, x);
        if (!L) { free(unc); return NULL; }
        for (uint32_t k = 0; k < L->n_acc; k++) bits_fill(sb, L->acc[2 * k], L->acc[2 * k + 1]);
        for (uint32_t k = 0; k < L->n_unc; k++) {
            if (2 * n_unc + 2 > cap_unc) {
                uint32_t nc = cap_unc ? cap_unc * 2 : 256;
                uint32_t *nu = realloc(unc, (size_t)nc * sizeof *nu);
                if (!nu) { free(unc); overflow(g, "out of memory"); return NULL; }
                unc = nu;
                cap_unc = nc;
            }
            unc[2 * n_unc] = L->unc[2 * k];
            unc[2 * n_unc + 1] = L->unc[2 * k + 1];
            n_unc++;
        }
    }
    /* uncertain tokens: advance the whole state, prefixes shared */
    if (n_unc) qsort(unc, n_unc, 2 * sizeof *unc, cmp_range2);
    uint32_t *path = g->path, plen = 0;          /* path[d]: state after d bytes of prev */
    const char *prev = NULL;
    uint32_t prev_len = 0, done_to = 0;
    path[0] = st;
    for (uint32_t k = 0; k < n_unc; k++) {
        uint32_t lo = unc[2 * k] > done_to ? unc[2 * k] : done_to, hi = unc[2 * k + 1];
        for (uint32_t i = lo; i < hi; i++) {
            if (sb[i >> 6] >> (i & 63) & 1) continue;
            const char *b = v->bytes + v->soff[i];
            uint32_t len = v->soff[i + 1] - v->soff[i], l = 0;
            if (prev) {
                uint32_t m = len < prev_len ? len : prev_len;
                if (m > plen) m = plen;
                while (l < m && b[l] == prev[l]) l++;
            }
            uint32_t s = path[l];
            while (l < len && s) {
                s = step(g, s, (uint8_t)b[l]);
                path[++l] = s;
            }
            plen = l;
            prev = b;
            prev_len = len;
            if (g->overflow) { free(unc); return NULL; }
            if (s) sb[i >> 6] |= 1ull << (i & 63);
        }
        if (hi > done_to) done_to = hi;
    }
    free(unc);
    /* to token ids */
    slot = (int32_t)g->mask_next;
    g->mask_next = (g->mask_next + 1) % g->n_mask_slots;
    uint64_t *m = g->mask_bits + (size_t)slot * g->mask_words;
    memset(m, 0, (size_t)g->mask_words * sizeof *m);
    for (size_t w = 0; w < sw; w++) {
        uint64_t x = sb[w];
        while (x) {
            uint32_t i = (uint32_t)(w * 64 + (uint32_t)__builtin_ctzll(x));
            x &= x - 1;
            int32_t id = v->sid[i];
            m[id >> 6] |= 1ull << (id & 63);
        }
    }
    g->mask_owner[slot] = st;
    g->st[st].mask = slot;
    return m;
}
