/* test_grammar_gen.c - constrained generation with the bundled model (a
 * model of King James English that knows nothing of JSON): for each of a
 * set of JSON schemas, generations with different seeds and temperatures
 * under the schema's grammar, each output parsed with jansson and
 * validated against its schema by a small validator of the supported
 * subset written here (JSON Schema's rules, not the grammar's: absent
 * additionalProperties allows anything, oneOf needs exactly one). With
 * pk_sampler_grammar_limit every run must end complete and valid; without
 * it, a run cut short must say so (PK_GRAMMAR_OPEN). Also through the
 * public API: a GBNF grammar, the sampler's logit bias, presence and
 * frequency penalties and log-probabilities. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"
#include "schema_valid.h"
#include "testhelp.h"

/* ---- generation ------------------------------------------------------------------ */

static pk_model *model;
static pk_context *ctx;

/* Generate under grammar g from a prompt, at most max_tokens (limit: close
 * in time); the text in out (NUL-terminated), the grammar status returned. */
static int generate(pk_grammar *g, float temp, uint64_t seed, int max_tokens, int limit, char *out, size_t cap,
                    int *n_tokens) {
    pk_error err = {0};
    pk_sampler_params sp = pk_sampler_default_params();
    sp.temperature = temp;
    sp.seed = seed;
    sp.top_k = 0;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    pk_sampler *s = pk_sampler_new(&sp, pk_model_n_vocab(model), &err);
    if (!s || pk_sampler_set_grammar(s, g, &err)) { fprintf(stderr, "%s\n", err.msg); exit(1); }
    if (limit) pk_sampler_grammar_limit(s, max_tokens);
    int32_t prompt[64];
    const char *p = "And the LORD said unto Moses,";
    int np = pk_model_tokenize(model, p, strlen(p), prompt, 64, 1, 0);
    pk_context_truncate(ctx, 0);
    if (pk_decode(ctx, prompt, np, &err)) { fprintf(stderr, "%s\n", err.msg); exit(1); }
    size_t len = 0;
    int n = 0;
    for (; n < max_tokens; n++) {
        int32_t t = pk_sampler_sample(s, pk_context_logits(ctx));
        if (pk_model_is_eog(model, t)) break;
        char piece[256];
        int pl = pk_model_token_piece(model, t, piece, sizeof piece);
        if (pl > 0 && len + (size_t)pl < cap) { memcpy(out + len, piece, (size_t)pl); len += (size_t)pl; }
        pk_sampler_accept(s, t);
        if (pk_decode(ctx, &t, 1, &err)) break;
    }
    out[len] = 0;
    *n_tokens = n;
    int st = pk_sampler_grammar_status(s, NULL);
    pk_sampler_free(s);
    return st;
}

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
    "\"admin\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":0},\"minItems\":1,\"maxItems\":4}",
    "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"exclusiveMinimum\":-20,\"exclusiveMaximum\":9},\"maxItems\":5}",
    "{\"type\":\"object\",\"properties\":{\"color\":{\"enum\":[\"red\",\"green\",\"blue\"]},\"tags\":{\"type\":\"array\","
    "\"items\":{\"type\":\"string\",\"maxLength\":6},\"maxItems\":3}},\"required\":[\"color\",\"tags\"]}",
    "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"object\",\"properties\":{\"ok\":{\"const\":true}},\"required\":[\"ok\"]}]}",
    "{\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"},\"y\":{\"type\":\"number\"}},"
    "\"required\":[\"x\",\"y\"]}},\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/pt\"},\"b\":"
    "{\"$ref\":\"#/$defs/pt\"}},\"required\":[\"a\"]}",
    "{\"type\":[\"string\",\"null\"],\"minLength\":2,\"maxLength\":8}",
    "{\"type\":\"object\",\"properties\":{\"when\":{\"type\":\"string\",\"format\":\"date\"},\"id\":{\"type\":\"string\","
    "\"format\":\"uuid\"}},\"required\":[\"when\",\"id\"]}",
    "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\",\"maxLength\":5},{\"type\":\"integer\"}],\"items\":"
    "{\"type\":\"boolean\"},\"maxItems\":4}",
    "{\"oneOf\":[{\"type\":\"string\",\"maxLength\":4},{\"type\":\"array\",\"items\":{\"type\":\"null\"},\"maxItems\":2}]}",
    "{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"integer\"}},\"required\":[\"k\"],\"additionalProperties\":"
    "{\"type\":\"string\",\"maxLength\":3}}",
    "{\"type\":\"object\"}",
};
#define N_SCHEMAS (int)(sizeof schemas / sizeof *schemas)

static void test_schemas(void) {
    int runs = 0, ok = 0, closed = 0, natural = 0;
    static const float temps[] = {0.0f, 0.7f, 1.0f, 1.5f};
    for (int si = 0; si < N_SCHEMAS; si++) {
        pk_error err = {0};
        char *gbnf = NULL;
        pk_grammar *g = NULL;
        if (pk_json_schema_to_grammar(schemas[si], strlen(schemas[si]), 0, &gbnf, &err) ||
            pk_grammar_new(model, gbnf, NULL, &g, &err)) {
            TEST_CHECK(0, "schema %d: %s", si, err.msg);
            free(gbnf);
            continue;
        }
        json_error_t je;
        root_schema = json_loads(schemas[si], 0, &je);
        for (int k = 0; k < 20; k++) {
            char text[4096];
            int n_tok;
            float temp = temps[k % 4];
            int max_tokens = 72 + 8 * (k % 6);   /* every schema here completes in 72 bytes */
            int st = generate(g, temp, 1000u * (unsigned)si + (unsigned)k, max_tokens, 1, text, sizeof text, &n_tok);
            runs++;
            json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
            int good = (st == PK_GRAMMAR_CAN_END || st == PK_GRAMMAR_MUST_END) && v && valid(v, root_schema);
            TEST_CHECK(good, "schema %d, temp %.1f, seed %d: status %d, %s: %s", si, (double)temp, k, st,
                       v ? "does not validate" : je.text, text);
            ok += good;
            natural += n_tok < max_tokens;
            closed += n_tok == max_tokens;
            json_decref(v);
        }
        json_decref(root_schema);
        pk_grammar_free(g);
        free(gbnf);
    }
    fprintf(stderr, "test_grammar_gen: %d of %d constrained generations valid (%d ended by the model, %d closed at the limit)\n",
            ok, runs, natural, closed);
    TEST_CHECK(runs >= 200 && ok == runs, "%d of %d valid", ok, runs);
}

/* The grammar of gbnf for the model (NULL, a failed check, if refused). */
static pk_grammar *grammar(const char *gbnf) {
    pk_error err = {0};
    pk_grammar *g = NULL;
    TEST_CHECK(pk_grammar_new(model, gbnf, NULL, &g, &err) == PK_OK, "%s", err.msg);
    return g;
}

/* Without the limit, a run cut short says it is incomplete. */
static void test_cut_short(void) {
    pk_grammar *g = grammar("root ::= \"{\\\"text\\\": \\\"\" [a-z ]{40,60} \"\\\"}\"\n");
    if (!g) return;
    char text[1024];
    int n;
    int st = generate(g, 0.8f, 7, 6, 0, text, sizeof text, &n);
    TEST_CHECK(st == PK_GRAMMAR_OPEN && n == 6, "cut short: status %d after %d tokens: %s", st, n, text);
    TEST_COND("cut short: the text so far is a prefix", pk_grammar_check(g, text, strlen(text)) == 0);
    /* a limit below what the grammar needs cannot be met: still reported */
    st = generate(g, 0.8f, 7, 10, 1, text, sizeof text, &n);
    TEST_CHECK(st == PK_GRAMMAR_OPEN, "limit too small: status %d: %s", st, text);
    /* with room, the same grammar completes; the text checks */
    st = generate(g, 0.8f, 7, 90, 1, text, sizeof text, &n);
    TEST_CHECK(st >= PK_GRAMMAR_CAN_END && pk_grammar_check(g, text, strlen(text)) == 1, "with room: status %d: %s", st, text);
    pk_grammar_free(g);
}

/* A GBNF grammar from the public API, sampling only what it allows. */
static void test_gbnf(void) {
    pk_error err = {0};
    pk_grammar *g = grammar("root ::= (\"yea\" | \"nay\") (\", \" (\"yea\" | \"nay\")){0,3} \".\"\n");
    if (!g) return;
    for (int k = 0; k < 8; k++) {
        char text[512];
        int n;
        int st = generate(g, 1.0f, (uint64_t)k, 40, 1, text, sizeof text, &n);
        TEST_CHECK(st == PK_GRAMMAR_MUST_END && pk_grammar_check(g, text, strlen(text)) == 1, "yea/nay: %d %s", st, text);
    }
    pk_grammar_free(g);
    TEST_COND("bad grammar refused", pk_grammar_new(model, "root ::= (", NULL, &g, &err) == PK_ERR_ARG && !g &&
              strstr(err.msg, "line 1"));
    /* a grammar without a model checks strings but cannot drive a sampler */
    TEST_COND("string-only grammar", pk_grammar_new(NULL, "root ::= \"a\"", NULL, &g, &err) == PK_OK);
    pk_sampler_params sp = pk_sampler_default_params();
    pk_sampler *s = pk_sampler_new(&sp, pk_model_n_vocab(model), &err);
    TEST_COND("string-only grammar refused by a sampler", pk_sampler_set_grammar(s, g, &err) == PK_ERR_ARG);
    pk_grammar_free(g);
    pk_sampler_free(s);
    s = pk_sampler_new(&sp, 10, &err);
    TEST_COND("vocabulary size checked", pk_grammar_new(model, "root ::= \"a\"", NULL, &g, &err) == PK_OK &&
              pk_sampler_set_grammar(s, g, &err) == PK_ERR_ARG && strstr(err.msg, "vocabulary"));
    pk_grammar_free(g);
    pk_sampler_free(s);
}

/* Logit bias, penalties and log-probabilities on synthetic logits. */
static void test_sampler_options(void) {
    pk_error err = {0};
    int nv = 1000;
    float *l = malloc((size_t)nv * sizeof *l);
    for (int i = 0; i < nv; i++) l[i] = (float)((i * 37) % 101) / 10.0f;   /* max 10.0 at i = 100 (first) */
    pk_sampler_params sp = pk_sampler_default_params();
    sp.temperature = 0;
    pk_sampler *s = pk_sampler_new(&sp, nv, &err);
    int32_t best = pk_sampler_sample(s, l);
    TEST_CHECK(l[best] == 10.0f, "greedy picks the max (%d)", best);
    int32_t ids[2] = {5, best};
    float bias[2] = {100.0f, -100.0f};
    TEST_COND("logit bias set", pk_sampler_set_logit_bias(s, ids, bias, 2, &err) == PK_OK);
    TEST_COND("logit bias forces token 5", pk_sampler_sample(s, l) == 5);
    int32_t badid = nv;
    TEST_COND("logit bias: id out of range", pk_sampler_set_logit_bias(s, &badid, bias, 1, &err) == PK_ERR_ARG);
    pk_sampler_set_logit_bias(s, NULL, NULL, 0, &err);
    TEST_COND("logit bias cleared", pk_sampler_sample(s, l) == best);
    /* log-probabilities: a distribution, the top ones in order */
    double sum = 0;
    for (int i = 0; i < nv; i++) sum += exp(pk_sampler_logprob(s, i));
    TEST_CHECK(fabs(sum - 1.0) < 1e-4, "probabilities sum to %f", sum);
    int32_t top[5];
    float lp[5];
    int nt = pk_sampler_top_logprobs(s, 5, top, lp);
    TEST_COND("top logprobs", nt == 5 && top[0] == best && lp[0] >= lp[1] && lp[3] >= lp[4] &&
              fabsf(lp[0] - pk_sampler_logprob(s, best)) < 1e-6f);
    pk_sampler_free(s);
    /* presence / frequency: the accepted best loses its place */
    sp.presence_penalty = 0.5f;
    sp.frequency_penalty = 1.0f;
    s = pk_sampler_new(&sp, nv, &err);
    pk_sampler_accept(s, best);
    int32_t second = pk_sampler_sample(s, l);
    TEST_CHECK(second != best && l[second] == 10.0f - 0.1f * 0, "penalised: %d (%.1f)", second, (double)l[second]);
    TEST_CHECK(fabsf(pk_sampler_logprob(s, best) - pk_sampler_logprob(s, second) - (l[best] - 1.5f - l[second])) < 1e-4f,
               "penalty is presence + frequency * count");
    pk_sampler_reset(s, 1);
    TEST_COND("reset forgets the counts", pk_sampler_sample(s, l) == best);
    pk_sampler_free(s);
    sp.presence_penalty = NAN;
    TEST_COND("NaN penalty refused", pk_sampler_new(&sp, nv, &err) == NULL && strstr(err.msg, "presence_penalty"));
    free(l);
}

/* The grammar's mask shows in the log-probabilities: -inf outside. */
static void test_grammar_logprobs(void) {
    pk_error err = {0};
    pk_grammar *g = NULL;
    if (pk_grammar_new(model, "root ::= [0-9]+\n", NULL, &g, &err)) { TEST_CHECK(0, "%s", err.msg); return; }
    pk_sampler_params sp = pk_sampler_default_params();
    pk_sampler *s = pk_sampler_new(&sp, pk_model_n_vocab(model), &err);
    pk_sampler_set_grammar(s, g, &err);
    pk_context_truncate(ctx, 0);
    int32_t bos = pk_model_bos(model);
    pk_decode(ctx, &bos, 1, &err);
    int32_t t = pk_sampler_sample(s, pk_context_logits(ctx));
    char piece[64];
    int pl = pk_model_token_piece(model, t, piece, sizeof piece);
    TEST_COND("sampled a digit token", pl > 0 && piece[0] >= '0' && piece[0] <= '9');
    int32_t top[8];
    float lp[8];
    int n = pk_sampler_top_logprobs(s, 8, top, lp);
    int digits_only = n > 0;
    for (int i = 0; i < n; i++) {
        pl = pk_model_token_piece(model, top[i], piece, sizeof piece);
        digits_only &= pl > 0 && piece[0] >= '0' && piece[0] <= '9';
    }
    TEST_COND("top logprobs are all allowed", digits_only);
    int32_t a;
    pk_model_tokenize(model, "And", 3, &a, 1, 0, 0);
    TEST_COND("a forbidden token has -inf", isinf(pk_sampler_logprob(s, a)));
    TEST_COND("end not allowed before a digit", pk_sampler_grammar_status(s, NULL) == PK_GRAMMAR_OPEN);
    pk_sampler_accept(s, t);
    TEST_COND("complete after a digit", pk_sampler_grammar_status(s, NULL) == PK_GRAMMAR_CAN_END);
    pk_sampler_accept(s, a);
    const char *msg;
    TEST_COND("a forbidden token fails the grammar", pk_sampler_grammar_status(s, &msg) == PK_GRAMMAR_FAILED &&
              msg && strstr(msg, "not allowed"));
    pk_sampler_reset(s, 3);
    TEST_COND("reset starts the grammar again", pk_sampler_grammar_status(s, NULL) == PK_GRAMMAR_OPEN);
    pk_sampler_free(s);
    pk_grammar_free(g);
}

int main(void) {
    pk_error err = {0};
    if (pk_model_load("models/kjv-moe-f16.gguf", &model, &err)) {
        fprintf(stderr, "%s (run from the project root)\n", err.msg);
        return 1;
    }
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 1;
    if (pk_context_new(model, &cp, &ctx, &err)) { fprintf(stderr, "%s\n", err.msg); return 1; }
    test_sampler_options();
    test_gbnf();
    test_grammar_logprobs();
    test_cut_short();
    test_schemas();
    pk_context_free(ctx);
    pk_model_free(model);
    return TEST_REPORT();
}
