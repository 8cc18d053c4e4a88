/* engine/sampler.c - turning a vector of logits into the next token.
 *
 * A chain of small steps over a candidate list {id, logit, p}, in the order of
 * llama.cpp's default sampler chain:
 *
 *   repetition penalty -> top-k -> top-p -> min-p -> temperature -> pick
 *
 * (min-p is applied before top-p finishes, with the same result; see
 * pk_sampler_sample.)
 *
 * The pick is greedy (argmax, ties to the lowest id) when temperature <= 0;
 * greedy skips the truncation steps entirely, so it is exactly the argmax of
 * the penalised logits. Otherwise the kept candidates are softmax'ed at the
 * given temperature and one is drawn with a seeded xoshiro256** generator, so
 * a given seed gives the same sequence on every platform (up to libm's exp()
 * rounding, which can only matter when a draw lands exactly on a boundary).
 *
 * Tuned for large vocabularies (150k tokens) and small top-k: nothing sorts
 * the whole vocabulary unless top-p needs it. Sorting is done lazily on a
 * prefix: "make the first m candidates the best m, in order" by a bounded
 * heap (O(n log m)); top-p doubles m until the nucleus is inside the sorted
 * prefix. All buffers are allocated by pk_sampler_new; sampling allocates
 * nothing.
 *
 * Non-finite logits: NaN is treated as -inf, +inf as the largest finite float.
 * A -inf candidate is never picked, unless every logit is -inf/NaN: then the
 * result is token 0.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "engine/sampler.h"
#include "text/grammar.h"

/* ---- candidates ------------------------------------------------------ */

typedef struct pk_cand {
    int32_t id;
    float logit;
    double p;       /* unnormalised probability, filled by the final step */
} pk_cand;

/* The working list: c[0..n) are live; c[0..n_sorted) are the best n_sorted
 * of them in order (best first), and every other live candidate ranks after
 * c[n_sorted-1]. */
typedef struct cand_list {
    pk_cand *c;
    int n;
    int n_sorted;
} cand_list;

/* Total order used everywhere: higher logit first, then lower id. Making it
 * total keeps every selection deterministic and ties resolved to low ids. */
static int cand_before(const pk_cand *a, const pk_cand *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static void cand_swap(pk_cand *a, pk_cand *b) {
    pk_cand t = *a; *a = *b; *b = t;
}

/* Restore the heap property below index i of a heap of n whose root is the
 * candidate ranked *last* (a "worst-on-top" heap). */
static void heap_sift(pk_cand *h, int n, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && cand_before(&h[w], &h[l])) w = l;
        if (r < n && cand_before(&h[w], &h[r])) w = r;
        if (w == i) return;
        cand_swap(&h[i], &h[w]);
        i = w;
    }
}

/* Make c[0..m) the best m live candidates in order (m is clamped to n).
 * Only the unsorted tail is touched: O((n - n_sorted) log m). */
static void cand_sort_prefix(cand_list *L, int m) {
    if (m > L->n) m = L->n;
    if (m <= L->n_sorted) return;
    pk_cand *h = L->c + L->n_sorted;
    int k = m - L->n_sorted, len = L->n - L->n_sorted;
    for (int i = k / 2 - 1; i >= 0; i--) heap_sift(h, k, i);
    for (int i = k; i < len; i++) {
        if (cand_before(&h[i], &h[0])) {
            cand_swap(&h[i], &h[0]);
            heap_sift(h, k, 0);
        }
    }
    /* Heap-sort: the worst goes to the back each round, best ends first. */
    for (int end = k - 1; end > 0; end--) {
        cand_swap(&h[0], &h[end]);
        heap_sift(h, end, 0);
    }
    L->n_sorted = m;
}

/* Largest logit among the live candidates. */
static float cand_max_logit(const cand_list *L) {
    if (L->n_sorted > 0) return L->c[0].logit;
    float mx = -INFINITY;
    for (int i = 0; i < L->n; i++)
        if (L->c[i].logit > mx) mx = L->c[i].logit;
    return mx;
}

/* ---- the sampler object ---------------------------------------------- */

struct pk_sampler {
    pk_sampler_params p;
    int n_vocab;
    pk_cand *cand;      /* [n_vocab] working candidates */
    float *work;        /* [n_vocab] penalised logits */
    int32_t *hist;      /* [repeat_last_n] ring of accepted tokens */
    int hist_cap, hist_len, hist_pos;
    uint8_t *seen;      /* [n_vocab] scratch flags for distinct tokens */
    uint64_t rng[4];    /* xoshiro256** state */
    /* logit bias: n_bias (id, bias) pairs */
    int32_t *bias_id;
    float *bias;
    int n_bias;
    /* presence / frequency penalties: counts of the accepted tokens, and
       the distinct ones in order (allocated when a penalty is on) */
    int32_t *count, *counted;
    int n_counted;
    /* log-probabilities of the last sample: log-sum-exp of work[] */
    double lse;
    int lse_ok;
    /* the grammar: its state, the accepted tokens since it was attached or
       reset, the limit, and what went wrong */
    pk_grammar *g;
    uint32_t gst;
    int g_failed, g_limit, g_count;
    char g_msg[200];
};

/* ---- RNG: xoshiro256** seeded by splitmix64 (public-domain algorithms) --- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

static void rng_seed(pk_sampler *s, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

static uint64_t rng_next(pk_sampler *s) {
    uint64_t *st = s->rng;
    uint64_t out = rotl64(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;
    st[2] ^= st[0]; st[3] ^= st[1]; st[1] ^= st[2]; st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return out;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(pk_sampler *s) {
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- chain steps ----------------------------------------------------- */

/* Repetition penalty (llama.cpp semantics) on the distinct in-vocabulary
 * tokens among the last repeat_last_n accepted ones, applied to logits
 * indexed by token id. */
static void step_penalty(pk_sampler *s, float *logits) {
    float pen = s->p.repeat_penalty;
    if (pen == 1.0f || s->hist_len == 0) return;
    for (int i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i];
        if (t < 0 || t >= s->n_vocab || s->seen[t]) continue;
        s->seen[t] = 1;
        logits[t] = logits[t] > 0 ? logits[t] / pen : logits[t] * pen;
    }
    for (int i = 0; i < s->hist_len; i++) {
        int32_t t = s->hist[i];
        if (t >= 0 && t < s->n_vocab) s->seen[t] = 0;
    }
}

/* NaN -> -inf, +inf -> FLT_MAX, in place. */
static void step_sanitize(float *logits, int n) {
    for (int i = 0; i < n; i++) {
        float l = logits[i];
        if (isnan(l)) logits[i] = -INFINITY;
        else if (l == INFINITY) logits[i] = FLT_MAX;
    }
}

/* Greedy pick: argmax, ties to the lowest id, 0 if nothing is finite. */
static int32_t pick_greedy(const float *logits, int n) {
    int32_t best = -1;
    float bl = -INFINITY;
    for (int i = 0; i < n; i++) {
        if (logits[i] > bl) { bl = logits[i]; best = i; }
    }
    return best < 0 ? 0 : best;
}

/* Build the candidate list from the finite logits (-inf ones never win). */
static void step_candidates(pk_sampler *s, const float *logits, cand_list *L) {
    int n = 0;
    for (int i = 0; i < s->n_vocab; i++) {
        if (logits[i] == -INFINITY) continue;
        s->cand[n].id = i;
        s->cand[n].logit = logits[i];
        s->cand[n].p = 0;
        n++;
    }
    L->c = s->cand;
    L->n = n;
    L->n_sorted = 0;
}

/* Keep the k best candidates. */
static void step_top_k(cand_list *L, int k) {
    if (k <= 0 || k >= L->n) return;
    cand_sort_prefix(L, k);
    L->n = k;
}

/* Softmax mass of the live candidates at temperature 1, relative to the
 * largest: sum of exp(logit - max). top-p needs it before min-p runs. */
static double cand_mass(const cand_list *L) {
    double mx = cand_max_logit(L), sum = 0;
    for (int i = 0; i < L->n; i++) sum += exp((double)L->c[i].logit - mx);
    return sum;
}

/* Keep the smallest best-first prefix whose softmax mass reaches top_p of
 * mass (cand_mass of the list top-p is defined on); at least one. */
static void step_top_p(cand_list *L, float top_p, double mass) {
    if (top_p >= 1.0f || L->n <= 1) return;
    double mx = cand_max_logit(L), target = (double)top_p * mass, cum = 0;
    int i = 0, m = L->n_sorted > 64 ? L->n_sorted : 64;
    for (;;) {
        cand_sort_prefix(L, m);
        for (; i < L->n_sorted; i++) {
            cum += exp((double)L->c[i].logit - mx);
            if (cum >= target) { L->n = i + 1; return; }
        }
        if (L->n_sorted >= L->n) return;   /* not reached: keep everything */
        m = L->n_sorted > L->n / 2 ? L->n : 2 * L->n_sorted;
    }
}

/* Keep candidates whose probability is at least min_p times the largest,
 * i.e. logit >= max + ln(min_p). The order survives, and so does the sorted
 * prefix: if a sorted candidate fails, every later one fails too. */
static void step_min_p(cand_list *L, float min_p) {
    if (min_p <= 0.0f || L->n <= 1) return;
    double cut = (double)cand_max_logit(L) + log((double)min_p);
    int n = 0;
    for (int i = 0; i < L->n; i++) {
        if ((double)L->c[i].logit >= cut) L->c[n++] = L->c[i];
    }
    L->n = n;
    if (L->n_sorted > n) L->n_sorted = n;
}

/* Temperature and softmax: p = exp((logit - max) / temp), unnormalised;
 * computed in double so a tiny temperature cannot overflow. Returns the sum. */
static double step_temperature(cand_list *L, float temp) {
    double mx = cand_max_logit(L), sum = 0;
    for (int i = 0; i < L->n; i++) {
        L->c[i].p = exp(((double)L->c[i].logit - mx) / (double)temp);
        sum += L->c[i].p;
    }
    return sum;
}

/* Draw one candidate in proportion to p. */
static int32_t pick_dist(pk_sampler *s, const cand_list *L, double sum) {
    double u = rng_uniform(s) * sum, acc = 0;
    int last = 0;
    for (int i = 0; i < L->n; i++) {
        if (L->c[i].p <= 0) continue;
        acc += L->c[i].p;
        last = i;
        if (u < acc) return L->c[i].id;
    }
    return L->c[last].id;   /* u fell past the rounded total */
}

/* OpenAI's presence and frequency penalties over the tokens accepted since
 * the last reset: logit -= presence + frequency * count. */
static void step_presence(pk_sampler *s, float *logits) {
    if (!s->count) return;
    for (int i = 0; i < s->n_counted; i++) {
        int32_t t = s->counted[i];
        logits[t] -= s->p.presence_penalty + s->p.frequency_penalty * (float)s->count[t];
    }
}

/* ---- the grammar ------------------------------------------------------- */

static int32_t chain_pick(pk_sampler *s, float *w);
static int32_t grammar_eog(const pk_sampler *s);
static void grammar_fail(pk_sampler *s, const char *msg);

/* Whether the grammar can finish from state y in `left` tokens: the fewest
 * bytes to the end fit (each token is at least one byte), or else the
 * walk along closing tokens (longer ones, counted once per state) does. */
static int grammar_fits_in(pk_grammar *g, uint32_t y, int left) {
    if (!y || left < 0) return 0;
    if (pk_grammar_distance(g, y) <= (uint32_t)left) return 1;
    return pk_grammar_closing_tokens(g, y) <= (uint32_t)left;
}

/* Whether token t keeps the grammar able to finish within the limit. An
 * end-of-generation token fits when complete. */
static int grammar_fits(pk_sampler *s, int32_t t) {
    if (pk_vtrie_is_eog(pk_grammar_vtrie(s->g), t)) return pk_grammar_can_end(s->g, s->gst);
    return grammar_fits_in(s->g, pk_grammar_advance_token(s->g, s->gst, t), s->g_limit - s->g_count - 1);
}

/* With a limit: pick by the chain, and while the pick would leave too
 * little room to finish, take it out and pick again (rarely more than
 * once); after 16 tries, the closing token (the longest on a shortest way). */
static int32_t grammar_pick_in_time(pk_sampler *s, float *w) {
    if (s->g_limit - s->g_count <= 0) return chain_pick(s, w);   /* past the limit: nothing to keep */
    for (int tries = 0; tries < 16; tries++) {
        int32_t t = chain_pick(s, w);
        if (w[t] == -INFINITY) break;          /* nothing left: chain_pick fell back */
        if (grammar_fits(s, t)) return t;
        w[t] = -INFINITY;
    }
    int32_t t = pk_grammar_closing_token(s->g, s->gst);
    if (t < 0) {
        const char *o = pk_grammar_overflow(s->g);
        grammar_fail(s, o ? o : "grammar: no token of the vocabulary brings the output closer to its end");
        return grammar_eog(s);
    }
    return t;
}

static void grammar_fail(pk_sampler *s, const char *msg) {
    if (s->g_failed) return;
    s->g_failed = 1;
    snprintf(s->g_msg, sizeof s->g_msg, "%s", msg);
}

static void grammar_restart(pk_sampler *s) {
    s->gst = pk_grammar_start(s->g);
    s->g_failed = !s->gst;
    s->g_count = 0;
    s->g_msg[0] = 0;
    if (s->g_failed) grammar_fail(s, "grammar: no start state");
}

/* An end-of-generation token of the grammar's vocabulary (the first). */
static int32_t grammar_eog(const pk_sampler *s) {
    int n;
    const int32_t *e = pk_vtrie_eog_ids(pk_grammar_vtrie(s->g), &n);
    return n ? e[0] : 0;
}

/* Closing in time (the closing walk takes every token left): keep, of the
 * (at most 64) best allowed tokens, those after which the grammar can still
 * finish in the tokens left; if none can, the longest token on a shortest
 * way (the walk's next). Returns that forced token, or -1 (w masked in
 * place). */
static int32_t grammar_close(pk_sampler *s, float *w, int left) {
    cand_list L;
    step_candidates(s, w, &L);
    int m = L.n < 64 ? L.n : 64, kept = 0;
    cand_sort_prefix(&L, m);
    for (int i = 0; i < m; i++) {
        int32_t t = L.c[i].id;
        uint32_t y = pk_vtrie_is_eog(pk_grammar_vtrie(s->g), t) ? 0 : pk_grammar_advance_token(s->g, s->gst, t);
        if (grammar_fits_in(s->g, y, left - 1)) L.c[kept++] = L.c[i];
    }
    for (int i = 0; i < s->n_vocab; i++) w[i] = -INFINITY;
    for (int i = 0; i < kept; i++) w[L.c[i].id] = L.c[i].logit;
    if (kept) return -1;
    int32_t t = pk_grammar_closing_token(s->g, s->gst);
    if (t < 0) {
        const char *o = pk_grammar_overflow(s->g);
        grammar_fail(s, o ? o : "grammar: no token of the vocabulary brings the output closer to its end");
        return grammar_eog(s);
    }
    return t;
}

/* -inf for every token the grammar does not allow here; end-of-generation
 * tokens only when it is complete. Returns a token to pick without the rest
 * of the chain (the only possible one, or an end when the grammar failed),
 * else -1. */
static int32_t step_grammar(pk_sampler *s, float *w) {
    pk_grammar *g = s->g;
    if (s->g_failed) return grammar_eog(s);
    const uint64_t *mask = pk_grammar_mask(g, s->gst);
    if (!mask) {
        grammar_fail(s, pk_grammar_overflow(g) ? pk_grammar_overflow(g) : "grammar: no mask");
        return grammar_eog(s);
    }
    int n_words = (s->n_vocab + 63) / 64, any = 0;
    for (int k = 0; k < n_words; k++) {
        uint64_t m = mask[k];
        if (m == ~0ull) { any = 1; continue; }
        int base = k * 64, lim = s->n_vocab - base < 64 ? s->n_vocab - base : 64;
        for (int b = 0; b < lim; b++)
            if (!(m >> b & 1)) w[base + b] = -INFINITY;
            else if (w[base + b] > -INFINITY) any = 1;
    }
    int n_eog;
    const int32_t *eog = pk_vtrie_eog_ids(pk_grammar_vtrie(g), &n_eog);
    int can_end = pk_grammar_can_end(g, s->gst);
    for (int i = 0; i < n_eog; i++) {
        if (!can_end) w[eog[i]] = -INFINITY;
        else if (w[eog[i]] > -INFINITY) any = 1;
    }
    if (s->g_limit > 0) {
        uint32_t d = pk_grammar_distance(g, s->gst);
        int left = s->g_limit - s->g_count;
        if (d > 0 && (int64_t)d >= left && pk_grammar_closing_tokens(g, s->gst) >= (uint32_t)(left > 0 ? left : 0))
            return grammar_close(s, w, left);
        if (d == 0 && left <= 0 && n_eog) return eog[0];
    }
    if (!any) {
        /* every allowed token has -inf from the model, the bias or a
         * penalty: take the grammar's shortest way, or end */
        if (can_end && n_eog) return eog[0];
        int32_t t = pk_grammar_closing_token(g, s->gst);
        if (t >= 0) return t;
        grammar_fail(s, "grammar: no token of the vocabulary continues the output");
        return grammar_eog(s);
    }
    return -1;
}

static void grammar_accept(pk_sampler *s, int32_t token) {
    if (s->g_failed) return;
    const pk_vtrie *v = pk_grammar_vtrie(s->g);
    if (pk_vtrie_is_eog(v, token)) {
        if (!pk_grammar_can_end(s->g, s->gst)) grammar_fail(s, "grammar: the output ended before it was complete");
        return;
    }
    uint32_t y = pk_grammar_advance_token(s->g, s->gst, token);
    if (!y) {
        const char *o = pk_grammar_overflow(s->g);
        char msg[120];
        snprintf(msg, sizeof msg, "grammar: token %d is not allowed after the output so far", (int)token);
        grammar_fail(s, o ? o : msg);
        return;
    }
    s->gst = y;
    s->g_count++;
}

int pk_sampler_set_grammar(pk_sampler *s, pk_grammar *g, pk_error *err) {
    if (g) {
        const pk_vtrie *v = pk_grammar_vtrie(g);
        if (!v) return pk_errorf(err, PK_ERR_ARG, "grammar: compiled without a model, it cannot constrain a sampler");
        if (pk_vtrie_n_vocab(v) != s->n_vocab)
            return pk_errorf(err, PK_ERR_ARG, "grammar: compiled for a vocabulary of %d tokens, the sampler has %d",
                             pk_vtrie_n_vocab(v), s->n_vocab);
    }
    s->g = g;
    s->g_limit = 0;
    if (g) grammar_restart(s);
    return PK_OK;
}

void pk_sampler_grammar_limit(pk_sampler *s, int n) { s->g_limit = n > 0 ? n : 0; }

int pk_sampler_grammar_status(const pk_sampler *s, const char **msg) {
    if (msg) *msg = NULL;
    if (!s->g) return PK_GRAMMAR_NONE;
    if (s->g_failed) {
        if (msg) *msg = s->g_msg;
        return PK_GRAMMAR_FAILED;
    }
    if (pk_grammar_must_end(s->g, s->gst)) return PK_GRAMMAR_MUST_END;
    return pk_grammar_can_end(s->g, s->gst) ? PK_GRAMMAR_CAN_END : PK_GRAMMAR_OPEN;
}

/* ---- public API -------------------------------------------------------- */

/* The defaults documented in engine/sampler.h. */
pk_sampler_params pk_sampler_default_params(void) {
    pk_sampler_params p;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.seed = 0xC0FFEE;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    return p;
}

/* Validate p and allocate every buffer a sample call needs. Returns NULL with
 * PK_ERR_ARG (message names the parameter and value) on bad parameters, or
 * PK_ERR_NOMEM. temperature <= 0 (greedy), top_k <= 0 and repeat_last_n <= 0
 * (off) are valid; top_p must be in (0, 1], min_p in [0, 1], repeat_penalty
 * > 0, all finite. */
pk_sampler *pk_sampler_new(const pk_sampler_params *p, int n_vocab, pk_error *err) {
    if (!p) { pk_errorf(err, PK_ERR_ARG, "sampler: params is NULL"); return NULL; }
    if (n_vocab <= 0) {
        pk_errorf(err, PK_ERR_ARG, "sampler: n_vocab = %d, must be > 0", n_vocab);
        return NULL;
    }
    if (!isfinite(p->temperature)) {
        pk_errorf(err, PK_ERR_ARG, "sampler: temperature = %g, must be finite",
                  (double)p->temperature);
        return NULL;
    }
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f)) {
        pk_errorf(err, PK_ERR_ARG, "sampler: top_p = %g, must be in (0, 1]",
                  (double)p->top_p);
        return NULL;
    }
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f)) {
        pk_errorf(err, PK_ERR_ARG, "sampler: min_p = %g, must be in [0, 1]",
                  (double)p->min_p);
        return NULL;
    }
    if (!(p->repeat_penalty > 0.0f) || !isfinite(p->repeat_penalty)) {
        pk_errorf(err, PK_ERR_ARG, "sampler: repeat_penalty = %g, must be finite and > 0",
                  (double)p->repeat_penalty);
        return NULL;
    }
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty)) {
        pk_errorf(err, PK_ERR_ARG, "sampler: presence_penalty = %g, frequency_penalty = %g, must be finite",
                  (double)p->presence_penalty, (double)p->frequency_penalty);
        return NULL;
    }
    pk_sampler *s = pk_calloc(1, sizeof *s);
    if (!s) { pk_errorf(err, PK_ERR_NOMEM, "sampler: out of memory"); return NULL; }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->hist_cap = p->repeat_last_n > 0 ? p->repeat_last_n : 0;
    s->cand = pk_calloc((size_t)n_vocab, sizeof *s->cand);
    s->work = pk_calloc((size_t)n_vocab, sizeof *s->work);
    s->seen = pk_calloc((size_t)n_vocab, 1);
    s->hist = s->hist_cap ? pk_calloc((size_t)s->hist_cap, sizeof *s->hist) : NULL;
    int counting = p->presence_penalty != 0.0f || p->frequency_penalty != 0.0f;
    if (counting) {
        s->count = pk_calloc((size_t)n_vocab, sizeof *s->count);
        s->counted = pk_calloc((size_t)n_vocab, sizeof *s->counted);
    }
    if (!s->cand || !s->work || !s->seen || (s->hist_cap && !s->hist) || (counting && (!s->count || !s->counted))) {
        pk_errorf(err, PK_ERR_NOMEM,
                  "sampler: out of memory (n_vocab = %d, repeat_last_n = %d)",
                  n_vocab, p->repeat_last_n);
        pk_sampler_free(s);
        return NULL;
    }
    rng_seed(s, p->seed);
    return s;
}

/* Free s and its buffers; NULL is a no-op. */
void pk_sampler_free(pk_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->work);
    free(s->seen);
    free(s->hist);
    free(s->bias_id);
    free(s->bias);
    free(s->count);
    free(s->counted);
    free(s);
}

/* Pick the next token from logits[n_vocab] (not modified); see the file
 * comment for the chain and the handling of non-finite logits. Always
 * returns an id in [0, n_vocab). */
int32_t pk_sampler_sample(pk_sampler *s, const float *logits) {
    float *w = s->work;
    memcpy(w, logits, (size_t)s->n_vocab * sizeof *w);
    s->lse_ok = 0;
    for (int i = 0; i < s->n_bias; i++) w[s->bias_id[i]] += s->bias[i];
    step_penalty(s, w);
    step_presence(s, w);
    step_sanitize(w, s->n_vocab);
    if (s->g) {
        int32_t forced = step_grammar(s, w);
        if (forced >= 0) return forced;
        if (s->g_limit > 0) return grammar_pick_in_time(s, w);
    }
    return chain_pick(s, w);
}

/* The chain after the penalties and the grammar: greedy, or top-k, top-p,
 * min-p, temperature and a draw. */
static int32_t chain_pick(pk_sampler *s, float *w) {
    if (s->p.temperature <= 0.0f) return pick_greedy(w, s->n_vocab);

    cand_list L;
    step_candidates(s, w, &L);
    if (L.n == 0) return 0;
    step_top_k(&L, s->p.top_k);
    /* top-p then min-p, as in llama.cpp. Both keep a best-first prefix (and
     * min-p's cut, relative to the max, is unchanged by top-p), so the result
     * is the shorter prefix whichever runs first, provided top-p measures
     * mass over the set it would have seen. Running the O(n) min-p filter
     * first saves sorting a tail that min-p would drop anyway. */
    double mass = s->p.top_p < 1.0f ? cand_mass(&L) : 0;
    step_min_p(&L, s->p.min_p);
    step_top_p(&L, s->p.top_p, mass);
    double sum = step_temperature(&L, s->p.temperature);
    return pick_dist(s, &L, sum);
}

/* Record token in the repetition window (the oldest falls out when it is
 * full). Ids outside the vocabulary are kept in the window but never
 * penalised. */
void pk_sampler_accept(pk_sampler *s, int32_t token) {
    if (s->g) grammar_accept(s, token);
    if (s->count && token >= 0 && token < s->n_vocab && s->count[token]++ == 0)
        s->counted[s->n_counted++] = token;
    if (s->hist_cap == 0) return;
    s->hist[s->hist_pos] = token;
    s->hist_pos = (s->hist_pos + 1) % s->hist_cap;
    if (s->hist_len < s->hist_cap) s->hist_len++;
}

/* Forget every accepted token and reseed the RNG with seed; the grammar
 * starts again. */
void pk_sampler_reset(pk_sampler *s, uint64_t seed) {
    s->hist_len = 0;
    s->hist_pos = 0;
    for (int i = 0; i < s->n_counted; i++) s->count[s->counted[i]] = 0;
    s->n_counted = 0;
    if (s->g) grammar_restart(s);
    rng_seed(s, seed);
}

int pk_sampler_set_logit_bias(pk_sampler *s, const int32_t *ids, const float *bias, int n, pk_error *err) {
    if (n < 0 || (n > 0 && (!ids || !bias)))
        return pk_errorf(err, PK_ERR_ARG, "logit_bias: bad list (n = %d)", n);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= s->n_vocab)
            return pk_errorf(err, PK_ERR_ARG, "logit_bias: token %d is outside the vocabulary (0..%d)",
                             (int)ids[i], s->n_vocab - 1);
        if (!isfinite(bias[i]))
            return pk_errorf(err, PK_ERR_ARG, "logit_bias: the bias of token %d is not finite", (int)ids[i]);
    }
    int32_t *ni = n ? malloc((size_t)n * sizeof *ni) : NULL;
    float *nb = n ? malloc((size_t)n * sizeof *nb) : NULL;
    if (n && (!ni || !nb)) { free(ni); free(nb); return pk_errorf(err, PK_ERR_NOMEM, "logit_bias: out of memory"); }
    if (n) { memcpy(ni, ids, (size_t)n * sizeof *ni); memcpy(nb, bias, (size_t)n * sizeof *nb); }
    free(s->bias_id);
    free(s->bias);
    s->bias_id = ni;
    s->bias = nb;
    s->n_bias = n;
    return PK_OK;
}

/* ---- log-probabilities --------------------------------------------------- */

static double work_lse(pk_sampler *s) {
    if (!s->lse_ok) {
        float mx = -INFINITY;
        for (int i = 0; i < s->n_vocab; i++) if (s->work[i] > mx) mx = s->work[i];
        double sum = 0;
        if (mx > -INFINITY)
            for (int i = 0; i < s->n_vocab; i++) sum += exp((double)s->work[i] - mx);
        s->lse = mx > -INFINITY ? mx + log(sum) : INFINITY;
        s->lse_ok = 1;
    }
    return s->lse;
}

float pk_sampler_logprob(pk_sampler *s, int32_t token) {
    if (token < 0 || token >= s->n_vocab || s->work[token] == -INFINITY) return -INFINITY;
    return (float)((double)s->work[token] - work_lse(s));
}

int pk_sampler_top_logprobs(pk_sampler *s, int k, int32_t *ids, float *logprobs) {
    if (k <= 0) return 0;
    double lse = work_lse(s);
    cand_list L;
    step_candidates(s, s->work, &L);
    if (k > L.n) k = L.n;
    cand_sort_prefix(&L, k);
    for (int i = 0; i < k; i++) {
        ids[i] = L.c[i].id;
        logprobs[i] = (float)((double)L.c[i].logit - lse);
    }
    return k;
}
