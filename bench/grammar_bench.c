/* grammar_bench.c - the cost of grammar-constrained sampling per token on a
 * real vocabulary: pk_sampler_sample with a grammar attached against the
 * same call without one, on the same logits.
 *
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -pthread \
 *       bench/grammar_bench.c build/libpocket.a -o build/grammar_bench -lpcre2-8 -ljansson -lm -lpthread
 *   ./build/grammar_bench ../shared/tokenizer/ggml-vocab-qwen3.gguf [EXTEND] [--check]
 *
 * The vocabulary is the GGUF's (Qwen3: 151,936 tokens); EXTEND > its size
 * adds tokens made of two of its word-like tokens joined (" the" + "ology"),
 * up to EXTEND tokens (248,320 is POCKET-35B's vocabulary size), so the
 * trie is as big as a 248k vocabulary's. Three grammars: the schema of a
 * tool call's arguments (object, enum, array, nested object, numbers),
 * json_object (any JSON object) and a hand-written JSON GBNF
 * (tests/data/grammars/json.gbnf; run from the project root). Two ways of
 * driving them:
 *   replay - JSON documents (below), tokenized, fed token by token: at each
 *            token the sampler computes the grammar's mask and picks, then
 *            the document's token is accepted (a model that writes
 *            realistic JSON);
 *   random - random logits, the sampler's pick accepted, with
 *            pk_sampler_grammar_limit 160 (a model that writes anything the
 *            grammar allows: long strings of random tokens, deep nesting).
 * Each is run on a fresh grammar (cold: every mask computed for the first
 * time, as on a request whose grammar is compiled for it) and again on the
 * same grammar (warm: as when a server keeps compiled grammars).
 * Per token: the sample call with the grammar, the call without it (the
 * baseline chain: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8), the
 * difference (the grammar's cost), and the accept call, in this thread's
 * CPU time (the sampler runs on one thread). --check compares
 * every replayed mask with brute force (every token advanced alone).
 */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "gguf/gguf.h"
#include "text/grammar.h"

typedef struct vocab {
    const pk_tokenizer *t;
    int n0, n;             /* the tokenizer's tokens, all (with the joined ones) */
    int32_t *pair;         /* [2 * (n - n0)] the two tokens each extra one joins */
} vocab;

static int v_piece(const void *ctx, int32_t id, char *buf, int cap) {
    const vocab *v = ctx;
    if (id < v->n0) return pk_token_to_piece(v->t, id, buf, cap, 0);
    int32_t a = v->pair[2 * (id - v->n0)], b = v->pair[2 * (id - v->n0) + 1];
    char tmp[512];
    int la = pk_token_to_piece(v->t, a, tmp, 256, 0), lb = pk_token_to_piece(v->t, b, tmp + 256, 256, 0);
    if (la < 0 || lb < 0 || la > 256 || lb > 256) return 0;
    if (la + lb <= cap) { memcpy(buf, tmp, (size_t)la); memcpy(buf + la, tmp + 256, (size_t)lb); }
    return la + lb;
}

static int v_eog(const void *ctx, int32_t id) {
    const vocab *v = ctx;
    return id < v->n0 && pk_tokenizer_is_eog(v->t, id);
}

/* This thread's CPU time: a shared machine's other jobs do not show in it
 * (a wall clock on a loaded machine adds whole scheduler slices, ~4 ms, to
 * some tokens). */
static double cpu_time(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

static int wordlike(const pk_tokenizer *t, int32_t id) {
    char b[64];
    int n = pk_token_to_piece(t, id, b, sizeof b, 0);
    if (n < 2 || n > 12) return 0;
    for (int i = 0; i < n; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c == ' ' && i == 0))) return 0;
    }
    return 1;
}

static const char *tool_schema =
    "{\"type\":\"object\",\"properties\":{"
    "\"location\":{\"type\":\"string\",\"description\":\"city\"},"
    "\"unit\":{\"enum\":[\"celsius\",\"fahrenheit\"]},"
    "\"days\":{\"type\":\"integer\"},"
    "\"hours\":{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"maxItems\":8},"
    "\"options\":{\"type\":\"object\",\"properties\":{\"wind\":{\"type\":\"boolean\"},\"lang\":{\"type\":\"string\"}},"
    "\"required\":[\"wind\"]}},"
    "\"required\":[\"location\",\"unit\"],\"additionalProperties\":false}";

/* the hand-written JSON grammar of the tests */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot read %s (run from the project root)\n", path); exit(1); }
    char *b = malloc(1 << 16);
    size_t n = fread(b, 1, (1 << 16) - 1, f);
    fclose(f);
    b[n] = 0;
    return b;
}

/* documents valid under every grammar above (the tool schema's first) */
static const char *const docs[] = {
    "{\"location\": \"San Francisco, CA\", \"unit\": \"celsius\", \"days\": 3, \"hours\": [6, 12.5, 18], "
    "\"options\": {\"wind\": true, \"lang\": \"en-US\"}}",
    "{\n  \"location\": \"M\\u00fcnchen\",\n  \"unit\": \"fahrenheit\",\n  \"hours\": [],\n  \"options\": {\n    \"wind\": false\n  }\n}",
    "{\"location\": \"The quick brown fox jumps over the lazy dog near the river bank, then returns home to rest.\", "
    "\"unit\": \"celsius\", \"days\": 14}",
    "{\"location\": \"\xe5\x8c\x97\xe4\xba\xac\xe5\xb8\x82\xe6\x9c\x9d\xe9\x98\xb3\xe5\x8c\xba\", \"unit\": \"celsius\", "
    "\"hours\": [0, 1, 2, 3, 4, 5, 6, 7], \"options\": {\"wind\": true}}",
};
#define N_DOCS (int)(sizeof docs / sizeof *docs)

typedef struct stats {
    double *with, *without, *accept;
    int n, cap;
} stats;

static void add(stats *s, double w, double wo, double a) {
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->with = realloc(s->with, (size_t)s->cap * sizeof *s->with);
        s->without = realloc(s->without, (size_t)s->cap * sizeof *s->without);
        s->accept = realloc(s->accept, (size_t)s->cap * sizeof *s->accept);
    }
    s->with[s->n] = w; s->without[s->n] = wo; s->accept[s->n] = a;
    s->n++;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, stats *s) {
    double sw = 0, so = 0, sa = 0, mx = 0;
    double *d = malloc((size_t)s->n * sizeof *d);
    for (int i = 0; i < s->n; i++) {
        sw += s->with[i]; so += s->without[i]; sa += s->accept[i];
        d[i] = s->with[i] - s->without[i] + s->accept[i];
        if (d[i] > mx) mx = d[i];
    }
    qsort(d, (size_t)s->n, sizeof *d, cmpd);
    printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", what, s->n, so / s->n * 1e3,
           sw / s->n * 1e3, sa / s->n * 1e3, (sw - so + sa) / s->n * 1e3, d[s->n / 2] * 1e3,
           d[(int)(s->n * 0.99)] * 1e3, mx * 1e3);
    free(d);
    s->n = 0;
}

static void fill_logits(float *l, int n) {
    for (int i = 0; i < n; i++) l[i] = (float)(rnd() % 100000) / 10000.0f;   /* uniform [0, 10) */
}

/* One replay or random run; returns the tokens it made (-1: a failure). */
static int run(pk_grammar *g, const pk_tokenizer *t, int nv, const char *doc, int check, stats *st, float *logits) {
    pk_error err = {0};
    pk_sampler_params sp = pk_sampler_default_params();
    pk_sampler *with = pk_sampler_new(&sp, nv, &err), *without = pk_sampler_new(&sp, nv, &err);
    if (!with || !without || pk_sampler_set_grammar(with, g, &err)) { fprintf(stderr, "%s\n", err.msg); exit(1); }
    int32_t ids[1024];
    int n = 160;
    if (doc) n = pk_tokenize(t, doc, strlen(doc), ids, 1024, 0, 0);
    else pk_sampler_grammar_limit(with, n);
    int made = 0;
    for (int i = 0; i < n; i++) {
        fill_logits(logits, nv);
        double t0 = cpu_time();
        int32_t pick = pk_sampler_sample(with, logits);
        double t1 = cpu_time();
        pk_sampler_sample(without, logits);
        double t2 = cpu_time();
        int32_t tok = doc ? ids[i] : pick;
        if (!doc && pk_vtrie_is_eog(pk_grammar_vtrie(g), pick)) break;
        if (check) {
            /* the mask the sampler used, against every token advanced alone */
            uint32_t s0 = pk_grammar_start(g);
            for (int k = 0; k < i; k++) s0 = pk_grammar_advance_token(g, s0, ids[k]);
            const uint64_t *m = pk_grammar_mask(g, s0);
            int bad = 0;
            for (int k = 0; k < nv && m; k++) {
                int bit = (int)(m[k >> 6] >> (k & 63) & 1);
                if (bit != (pk_grammar_advance_token(g, s0, k) != 0)) bad++;
            }
            if (!m || bad) { printf("CHECK FAILED at token %d: %d tokens differ\n", i, bad); exit(1); }
        }
        double t3 = cpu_time();
        pk_sampler_accept(with, tok);
        double t4 = cpu_time();
        add(st, t1 - t0, t2 - t1, t4 - t3);
        made++;
        const char *msg;
        if (pk_sampler_grammar_status(with, &msg) == PK_GRAMMAR_FAILED) {
            fprintf(stderr, "grammar failed at token %d: %s\n", i, msg);
            return -1;
        }
    }
    int stt = pk_sampler_grammar_status(with, NULL);
    pk_sampler_free(with);
    pk_sampler_free(without);
    return stt == PK_GRAMMAR_CAN_END || stt == PK_GRAMMAR_MUST_END ? made : -1;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s VOCAB.gguf [EXTEND] [--check]\n", argv[0]); return 2; }
    int extend = 0, check = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) check = 1;
        else extend = atoi(argv[i]);
    }
    pk_error err = {0};
    gguf_file *f;
    pk_tokenizer *t;
    if (gguf_open(argv[1], &f, &err) || pk_tokenizer_load(f, &t, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    vocab V = {.t = t, .n0 = pk_tokenizer_n_vocab(t)};
    V.n = extend > V.n0 ? extend : V.n0;
    int32_t *words = malloc((size_t)V.n0 * sizeof *words), nw = 0;
    for (int i = 0; i < V.n0; i++) if (wordlike(t, i)) words[nw++] = i;
    V.pair = malloc(((size_t)(V.n - V.n0) * 2 + 2) * sizeof *V.pair);
    for (int i = 0; i < V.n - V.n0; i++) {
        V.pair[2 * i] = words[rnd() % (uint32_t)nw];
        V.pair[2 * i + 1] = words[rnd() % (uint32_t)nw];
    }
    double t0 = pk_time();
    pk_vtrie *v;
    if (pk_vtrie_build_fn(V.n, v_piece, v_eog, &V, &v, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    double t1 = pk_time();
    int ntok, nnode;
    pk_vtrie_stats(v, &ntok, &nnode);
    printf("vocabulary %s: %d tokens (%d joined), %d with bytes, trie of %d nodes built in %.0f ms\n\n", argv[1], V.n,
           V.n - V.n0, ntok, nnode, (t1 - t0) * 1e3);
    char *tool_gbnf = NULL, *obj_gbnf = NULL;
    if (pk_json_schema_gbnf(tool_schema, strlen(tool_schema), 0, NULL, &tool_gbnf, &err) ||
        pk_json_schema_gbnf("{\"type\":\"object\"}", 17, 0, NULL, &obj_gbnf, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const char *names[3] = {"tool schema", "json_object", "JSON GBNF"};
    char *json_gbnf = read_text("tests/data/grammars/json.gbnf");
    const char *srcs[3] = {tool_gbnf, obj_gbnf, json_gbnf};
    float *logits = malloc((size_t)V.n * sizeof *logits);
    stats st = {0};
    printf("ms of CPU per token: baseline = the sample call without a grammar; with = the call with it; accept = "
           "pk_sampler_accept; cost = with - baseline + accept (median, 99th percentile, max)\n\n");
    printf("| grammar, run | tokens | baseline | with | accept | cost mean | cost p50 | cost p99 | cost max |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (int k = 0; k < 3; k++) {
        double c0 = pk_time();
        pk_grammar *g;
        if (pk_grammar_compile(srcs[k], strlen(srcs[k]), NULL, v, &g, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
        double c1 = pk_time();
        char what[96];
        for (int pass = 0; pass < 2; pass++) {
            for (int d = 0; d < N_DOCS; d++)
                if (run(g, t, V.n, docs[d], check && pass == 0, &st, logits) < 0) {
                    fprintf(stderr, "replay of document %d failed\n", d);
                    return 1;
                }
            snprintf(what, sizeof what, "%s, replay, %s", names[k], pass ? "warm" : "cold");
            report(what, &st);
        }
        pk_grammar_free(g);
        pk_grammar_compile(srcs[k], strlen(srcs[k]), NULL, v, &g, &err);
        int bad = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int r = 0; r < 4; r++) bad += run(g, t, V.n, NULL, 0, &st, logits) < 0;
            snprintf(what, sizeof what, "%s, random, %s", names[k], pass ? "warm" : "cold");
            report(what, &st);
        }
        if (bad) printf("(%d random runs did not end complete)\n", bad);
        pk_grammar_free(g);
        fprintf(stderr, "%s: compiled in %.2f ms\n", names[k], (c1 - c0) * 1e3);
    }
    free(logits);
    free(tool_gbnf);
    free(obj_gbnf);
    free(json_gbnf);
    pk_vtrie_free(v);
    pk_tokenizer_free(t);
    gguf_close(f);
    return 0;
}
