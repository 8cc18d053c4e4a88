/* test_sampler.c - tests of the sampler chain (src/engine/sampler.c): greedy argmax,
 * top-k/top-p/min-p truncation against a sort-everything reference, draw
 * frequencies against the softmax, repetition penalty, seeding, reset,
 * non-finite logits, parameter validation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "engine/sampler.h"
#include "testhelp.h"

/* Deterministic test data (independent of the sampler's own RNG). */
static uint64_t tr_state = 12345;
static double tr_uniform(void) {
    tr_state = tr_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(tr_state >> 11) * (1.0 / 9007199254740992.0);
}

static pk_sampler_params params(float temp, int top_k, float top_p, float min_p) {
    pk_sampler_params p = pk_sampler_default_params();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = 1.0f;
    return p;
}

static pk_sampler *make(pk_sampler_params p, int n_vocab) {
    pk_error err = {0};
    pk_sampler *s = pk_sampler_new(&p, n_vocab, &err);
    TEST_CHECK(s != NULL, "pk_sampler_new failed: %s", err.msg);
    if (!s) exit(1);
    return s;
}

static int ref_argmax(const float *l, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (l[i] > l[b]) b = i;
    return b;
}

/* ---- reference truncation: sort everything, then cut ------------------- */

typedef struct { int id; float logit; } ref_cand;
static int ref_cmp(const void *a, const void *b) {
    const ref_cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}

/* Marks in keep[] the tokens that top-k, top-p, min-p (in that order) leave. */
static void ref_allowed(const float *l, int n, int top_k, float top_p, float min_p,
                        unsigned char *keep) {
    ref_cand *c = malloc((size_t)n * sizeof *c);
    for (int i = 0; i < n; i++) { c[i].id = i; c[i].logit = l[i]; }
    qsort(c, (size_t)n, sizeof *c, ref_cmp);
    int m = n;
    if (top_k > 0 && top_k < m) m = top_k;
    if (top_p < 1.0f) {
        double sum = 0, cum = 0;
        for (int i = 0; i < m; i++) sum += exp((double)c[i].logit - c[0].logit);
        for (int i = 0; i < m; i++) {
            cum += exp((double)c[i].logit - c[0].logit) / sum;
            if (cum >= top_p) { m = i + 1; break; }
        }
    }
    if (min_p > 0) {
        int j = 0;
        while (j < m && exp((double)c[j].logit - c[0].logit) >= min_p) j++;
        m = j;
    }
    memset(keep, 0, (size_t)n);
    for (int i = 0; i < m; i++) keep[c[i].id] = 1;
    free(c);
}

/* ---- tests ------------------------------------------------------------- */

static void test_greedy(void) {
    /* ties go to the lowest id */
    float l[8] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 3.0f, 0.0f, -7.0f};
    pk_sampler *s = make(params(0.0f, 40, 0.95f, 0.05f), 8);
    TEST_CHECK(pk_sampler_sample(s, l) == 1, "greedy tie: got %d, want 1",
               pk_sampler_sample(s, l));
    pk_sampler_free(s);

    /* negative temperature is greedy too; top-k/top-p/min-p are ignored */
    int n = 5000, bad = 0;
    float *v = malloc((size_t)n * sizeof *v);
    pk_sampler *g1 = make(params(-1.0f, 1, 0.01f, 1.0f), n);
    pk_sampler *g2 = make(params(0.0f, 0, 1.0f, 0.0f), n);
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < n; i++) v[i] = (float)(tr_uniform() * 20 - 10);
        if (rep % 3 == 0) v[(rep * 7) % n] = v[(rep * 13) % n]; /* maybe a tie */
        int want = ref_argmax(v, n);
        if (pk_sampler_sample(g1, v) != want || pk_sampler_sample(g2, v) != want) bad++;
    }
    TEST_CHECK(bad == 0, "greedy != argmax in %d of 200 random vectors", bad);
    pk_sampler_free(g1);
    pk_sampler_free(g2);
    free(v);
}

static void test_top_k_1(void) {
    int n = 3000, bad = 0;
    float *v = malloc((size_t)n * sizeof *v);
    pk_sampler_params p = params(1.5f, 1, 1.0f, 0.0f);
    pk_sampler *s = make(p, n);
    for (int rep = 0; rep < 300; rep++) {
        for (int i = 0; i < n; i++) v[i] = (float)(tr_uniform() * 4 - 2);
        v[(rep * 31) % n] = 2.5f;
        if (rep % 2) v[(rep * 17 + 5) % n] = 2.5f;   /* tie: lowest id wins */
        if (pk_sampler_sample(s, v) != ref_argmax(v, n)) bad++;
    }
    TEST_CHECK(bad == 0, "top_k=1 at temperature 1.5 != argmax in %d of 300", bad);
    pk_sampler_free(s);
    free(v);
}

/* Frequencies of N draws against softmax(l / temp), within 5 sigma each. */
static void check_freq(const float *l, int n, float temp, uint64_t seed) {
    enum { N = 20000 };
    pk_sampler_params p = params(temp, 0, 1.0f, 0.0f);
    p.seed = seed;
    pk_sampler *s = make(p, n);
    int count[16] = {0};
    for (int i = 0; i < N; i++) {
        int t = pk_sampler_sample(s, l);
        TEST_CHECK(t >= 0 && t < n, "token %d out of range", t);
        if (t >= 0 && t < n) count[t]++;
    }
    double mx = l[ref_argmax(l, n)], sum = 0, pr[16];
    for (int i = 0; i < n; i++) sum += pr[i] = exp((l[i] - mx) / temp);
    double chi2 = 0;
    for (int i = 0; i < n; i++) {
        pr[i] /= sum;
        double mean = N * pr[i], sd = sqrt(N * pr[i] * (1 - pr[i]));
        TEST_CHECK(fabs(count[i] - mean) <= 5 * sd + 1,
                   "temp %g token %d: %d draws, expected %.1f +- %.1f",
                   (double)temp, i, count[i], mean, sd);
        chi2 += (count[i] - mean) * (count[i] - mean) / mean;
    }
    /* 4 degrees of freedom: P(chi2 > 25) < 1e-4 */
    TEST_CHECK(chi2 < 25, "temp %g: chi-square %.2f too large", (double)temp, chi2);
    pk_sampler_free(s);
}

static void test_frequencies(void) {
    const float l[5] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f};
    check_freq(l, 5, 1.0f, 1);
    check_freq(l, 5, 1.0f, 0xDEADBEEF);
    check_freq(l, 5, 0.7f, 7);
    check_freq(l, 5, 2.0f, 99);
}

/* Draw many times with truncation; every draw must be allowed by the
 * reference, and at a high temperature every allowed token must show up. */
/* Logits are uniform in [0, spread), except n_hot random tokens raised by
 * 2 * spread (to make a large vocabulary's nucleus a few hundred tokens). */
static void check_truncation(int n, int top_k, float top_p, float min_p, float spread,
                             int n_hot) {
    float *v = malloc((size_t)n * sizeof *v);
    unsigned char *keep = malloc((size_t)n), *hit = calloc((size_t)n, 1);
    for (int i = 0; i < n; i++) v[i] = (float)(tr_uniform() * spread);
    for (int i = 0; i < n_hot; i++) v[(int)(tr_uniform() * n)] += 2 * spread;
    ref_allowed(v, n, top_k, top_p, min_p, keep);
    int n_keep = 0;
    for (int i = 0; i < n; i++) n_keep += keep[i];

    pk_sampler *s = make(params(1.0f, top_k, top_p, min_p), n);
    pk_sampler *hot = make(params(1000.0f, top_k, top_p, min_p), n);
    int bad = 0, draws = 2000 + 15 * n_keep;
    for (int i = 0; i < draws; i++) {
        if (i < 2000) {     /* temperature 1: the usual draws */
            int a = pk_sampler_sample(s, v);
            if (a < 0 || a >= n || !keep[a]) bad++;
        }
        int b = pk_sampler_sample(hot, v);  /* near-uniform over the kept set */
        if (b < 0 || b >= n || !keep[b]) bad++;
        else hit[b] = 1;
    }
    int n_hit = 0;
    for (int i = 0; i < n; i++) n_hit += hit[i];
    TEST_CHECK(bad == 0, "n=%d top_k=%d top_p=%g min_p=%g: %d draws outside the %d allowed",
               n, top_k, (double)top_p, (double)min_p, bad, n_keep);
    TEST_CHECK(n_hit == n_keep, "n=%d top_k=%d top_p=%g min_p=%g: drew %d of %d allowed tokens",
               n, top_k, (double)top_p, (double)min_p, n_hit, n_keep);
    pk_sampler_free(s);
    pk_sampler_free(hot);
    free(v); free(keep); free(hit);
}

static void test_truncation(void) {
    check_truncation(1000, 10, 1.0f, 0.0f, 10, 0);      /* top-k only */
    check_truncation(1000, 0, 0.5f, 0.0f, 6, 0);        /* top-p only */
    check_truncation(1000, 0, 1.0f, 0.3f, 6, 0);        /* min-p only */
    check_truncation(1000, 40, 0.9f, 0.05f, 8, 0);      /* defaults-like chain */
    check_truncation(1000, 5, 0.99f, 0.0f, 1, 0);       /* top-k binds, not top-p */
    check_truncation(1000, 200, 0.3f, 0.0f, 3, 0);      /* top-p binds past 64 */
    check_truncation(20000, 0, 0.5f, 0.0f, 2.5f, 150);  /* nucleus > 64, no top-k */
    check_truncation(20000, 0, 0.9f, 0.2f, 2.5f, 150);  /* min-p binds after top-p */
    check_truncation(151936, 40, 0.95f, 0.05f, 12, 0);  /* Qwen-sized vocabulary */
    check_truncation(7, 0, 0.0001f, 0.0f, 1, 0);        /* top-p keeps at least one */
    check_truncation(7, 0, 1.0f, 1.0f, 1, 0);           /* min-p 1: only the max */
}

static void test_penalty(void) {
    float l[6] = {2.0f, 1.9f, 1.7f, -1.0f, -1.05f, -5.0f};
    pk_sampler_params p = params(0.0f, 0, 1.0f, 0.0f);
    p.repeat_penalty = 1.1f;
    p.repeat_last_n = 3;
    pk_sampler *s = make(p, 6);
    TEST_CHECK(pk_sampler_sample(s, l) == 0, "no history: want 0");
    pk_sampler_accept(s, 0);            /* 2.0 / 1.1 = 1.818 < 1.9 */
    TEST_CHECK(pk_sampler_sample(s, l) == 1, "penalised 0: want 1, got %d",
               pk_sampler_sample(s, l));
    pk_sampler_accept(s, 1);            /* 1.818 > 1.9 / 1.1 = 1.727 > 1.7 */
    TEST_CHECK(pk_sampler_sample(s, l) == 0, "penalised 0,1: want 0, got %d",
               pk_sampler_sample(s, l));
    pk_sampler_accept(s, 0);            /* still penalised once: 1.818 */
    pk_sampler_accept(s, 2);            /* window {1,0,2}: 0 wins at 1.818 */
    TEST_CHECK(pk_sampler_sample(s, l) == 0, "penalised 1,0,2: want 0, got %d",
               pk_sampler_sample(s, l));
    pk_sampler_accept(s, 0);            /* window {0,2,0}: 1 wins at 1.9 */
    TEST_CHECK(pk_sampler_sample(s, l) == 1, "penalised 0,2,0: want 1, got %d",
               pk_sampler_sample(s, l));
    pk_sampler_accept(s, 7);            /* out of range: kept, never penalised */
    pk_sampler_accept(s, -3);
    pk_sampler_accept(s, 5);            /* window {7,-3,5}: 0 left it */
    TEST_CHECK(pk_sampler_sample(s, l) == 0, "0 left the window: want 0, got %d",
               pk_sampler_sample(s, l));
    pk_sampler_reset(s, 1);
    TEST_CHECK(pk_sampler_sample(s, l) == 0, "after reset: want 0");

    /* negative logits are multiplied: -1.0 * 1.1 = -1.1 < -1.05 */
    float neg[3] = {-1.0f, -1.05f, -3.0f};
    pk_sampler *sn = make(p, 3);
    pk_sampler_accept(sn, 0);
    TEST_CHECK(pk_sampler_sample(sn, neg) == 1, "negative logit penalised: want 1, got %d",
               pk_sampler_sample(sn, neg));
    pk_sampler_free(sn);

    /* a token repeated in the window is penalised once, not per occurrence:
     * 2.0 / 1.1 = 1.818 > 1.7 (twice would be 1.65 < 1.7) */
    float twice[3] = {2.0f, 1.7f, 0.0f};
    p.repeat_last_n = 64;
    pk_sampler *st = make(p, 3);
    pk_sampler_accept(st, 0);
    pk_sampler_accept(st, 0);
    pk_sampler_accept(st, 0);
    TEST_CHECK(pk_sampler_sample(st, twice) == 0, "repeated token penalised more than once");
    pk_sampler_free(st);

    /* repeat_last_n = 0 disables the penalty */
    p.repeat_last_n = 0;
    pk_sampler *s0 = make(p, 6);
    pk_sampler_accept(s0, 0);
    TEST_CHECK(pk_sampler_sample(s0, l) == 0, "repeat_last_n=0 still penalised");
    pk_sampler_free(s0);
    pk_sampler_free(s);
}

static void draw_seq(pk_sampler *s, const float *l, int *out, int n) {
    for (int i = 0; i < n; i++) out[i] = pk_sampler_sample(s, l);
}

static void test_seeds(void) {
    enum { V = 64, N = 200 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)((i * 37) % 11) * 0.3f;
    pk_sampler_params p = params(1.0f, 0, 1.0f, 0.0f);
    p.seed = 42;
    pk_sampler *a = make(p, V), *b = make(p, V);
    p.seed = 43;
    pk_sampler *c = make(p, V);
    int sa[N], sb[N], sc[N], sr[N];
    draw_seq(a, l, sa, N);
    draw_seq(b, l, sb, N);
    draw_seq(c, l, sc, N);
    TEST_CHECK(memcmp(sa, sb, sizeof sa) == 0, "same seed gave different sequences");
    TEST_CHECK(memcmp(sa, sc, sizeof sa) != 0, "different seeds gave the same sequence");
    pk_sampler_accept(a, 3);
    pk_sampler_reset(a, 42);
    draw_seq(a, l, sr, N);
    TEST_CHECK(memcmp(sa, sr, sizeof sa) == 0, "reset(seed) did not restart the sequence");
    pk_sampler_reset(a, 43);
    draw_seq(a, l, sr, N);
    TEST_CHECK(memcmp(sc, sr, sizeof sc) == 0, "reset(43) != fresh sampler with seed 43");
    /* pinned: the first draws for seed 42 must not change across platforms */
    static const int pinned[8] = {6, 25, 43, 60, 63, 51, 47, 54};
    if (pinned[0] >= 0) {
        TEST_CHECK(memcmp(sa, pinned, sizeof pinned) == 0, "seed 42 sequence changed");
    } else {
        fprintf(stderr, "seed 42 draws:");
        for (int i = 0; i < 8; i++) fprintf(stderr, " %d", sa[i]);
        fputc('\n', stderr);
    }
    pk_sampler_free(a); pk_sampler_free(b); pk_sampler_free(c);
}

static void test_nonfinite(void) {
    float l[5] = {NAN, 1.0f, -INFINITY, NAN, 0.5f};
    pk_sampler *g = make(params(0.0f, 0, 1.0f, 0.0f), 5);
    pk_sampler *d = make(params(5.0f, 0, 1.0f, 0.0f), 5);
    TEST_CHECK(pk_sampler_sample(g, l) == 1, "greedy with NaN: want 1");
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        int t = pk_sampler_sample(d, l);
        if (t != 1 && t != 4) bad++;
    }
    TEST_CHECK(bad == 0, "drew a NaN or -inf token %d times", bad);
    float none[5] = {NAN, -INFINITY, NAN, -INFINITY, NAN};
    TEST_CHECK(pk_sampler_sample(g, none) == 0, "greedy, nothing finite: want 0");
    TEST_CHECK(pk_sampler_sample(d, none) == 0, "draw, nothing finite: want 0");
    float inf[5] = {1.0f, INFINITY, 3.0e38f, INFINITY, NAN};
    TEST_CHECK(pk_sampler_sample(g, inf) == 1, "greedy with +inf: want 1");
    pk_sampler *k1 = make(params(1e-30f, 1, 1.0f, 0.0f), 5);
    TEST_CHECK(pk_sampler_sample(k1, inf) == 1, "top_k=1 with +inf: want 1");
    pk_sampler_free(k1);
    /* huge spread at a tiny temperature must not overflow into NaN */
    float wide[4] = {-3.0e38f, 3.0e38f, 0.0f, 2.9e38f};
    pk_sampler *t = make(params(1e-20f, 0, 0.5f, 0.0f), 4);
    TEST_CHECK(pk_sampler_sample(t, wide) == 1, "wide logits at tiny temperature: want 1");
    pk_sampler_free(t);
    pk_sampler_free(g); pk_sampler_free(d);
}

static void check_bad(pk_sampler_params p, int n_vocab, const char *word) {
    pk_error err = {0};
    pk_sampler *s = pk_sampler_new(&p, n_vocab, &err);
    TEST_CHECK(s == NULL, "accepted bad %s", word);
    TEST_CHECK(err.code == PK_ERR_ARG, "bad %s: code %d, want PK_ERR_ARG", word, err.code);
    TEST_CHECK(strstr(err.msg, word) != NULL, "bad %s: message \"%s\" does not name it",
               word, err.msg);
    pk_sampler_free(s);
}

static void test_params(void) {
    pk_sampler_params d = pk_sampler_default_params(), p;
    TEST_CHECK(d.temperature == 0.8f && d.top_k == 40 && d.top_p == 0.95f &&
               d.min_p == 0.05f && d.repeat_penalty == 1.0f && d.repeat_last_n == 64 &&
               d.seed == 0xC0FFEE, "default params differ from engine/sampler.h");
    check_bad(d, 0, "n_vocab");
    check_bad(d, -5, "n_vocab");
    p = d; p.top_p = 0.0f;  check_bad(p, 10, "top_p");
    p = d; p.top_p = 1.5f;  check_bad(p, 10, "top_p");
    p = d; p.top_p = NAN;   check_bad(p, 10, "top_p");
    p = d; p.min_p = -0.1f; check_bad(p, 10, "min_p");
    p = d; p.min_p = 1.01f; check_bad(p, 10, "min_p");
    p = d; p.repeat_penalty = 0.0f;  check_bad(p, 10, "repeat_penalty");
    p = d; p.repeat_penalty = -1.0f; check_bad(p, 10, "repeat_penalty");
    p = d; p.temperature = NAN; check_bad(p, 10, "temperature");
    /* valid edge values */
    pk_error err = {0};
    p = d; p.temperature = -2.0f; p.top_k = -1; p.top_p = 1.0f; p.min_p = 0.0f;
    p.repeat_last_n = -1; p.repeat_penalty = 0.5f;
    pk_sampler *s = pk_sampler_new(&p, 1, &err);
    TEST_CHECK(s != NULL, "valid edge params rejected: %s", err.msg);
    if (s) {
        float one = 3.0f;
        pk_sampler_accept(s, 0);
        TEST_CHECK(pk_sampler_sample(s, &one) == 0, "one-token vocab: want 0");
        pk_sampler_free(s);
    }
    pk_sampler_free(NULL);
}

/* Not a pass/fail check: how long a default-chain sample takes on a
 * Qwen-sized vocabulary. */
static void bench(void) {
    int n = 151936, iters = 200;
    float *v = malloc((size_t)n * sizeof *v);
    for (int i = 0; i < n; i++) v[i] = (float)(tr_uniform() * 20 - 10);
    pk_sampler_params p = pk_sampler_default_params();
    pk_sampler *s = make(p, n);
    p.top_k = 0;
    pk_sampler *s2 = make(p, n);
    double t0 = pk_time();
    for (int i = 0; i < iters; i++) pk_sampler_sample(s, v);
    double t1 = pk_time();
    for (int i = 0; i < iters / 10; i++) pk_sampler_sample(s2, v);
    double t2 = pk_time();
    fprintf(stderr, "n_vocab %d, logits uniform in [-10, 10): %.3f ms/sample (defaults), "
            "%.3f ms/sample (top_k off)\n",
            n, (t1 - t0) * 1e3 / iters, (t2 - t1) * 1e3 / (iters / 10));
    pk_sampler_free(s); pk_sampler_free(s2);
    free(v);
}

int main(void) {
    test_greedy();
    test_top_k_1();
    test_frequencies();
    test_truncation();
    test_penalty();
    test_seeds();
    test_nonfinite();
    test_params();
    bench();
    return TEST_REPORT();
}
