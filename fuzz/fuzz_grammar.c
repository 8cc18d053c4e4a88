/* fuzz_grammar.c - libFuzzer harness: GBNF grammars and JSON schemas
 * (pk_grammar_new, pk_grammar_check, pk_json_schema_to_grammar) and
 * sampling under them, on the bundled model's vocabulary.
 *
 * Input: byte 0's low bit picks GBNF (0) or JSON schema (1); its other bits
 * seed the sampling (and, for schemas, bit 1 is PK_SCHEMA_LENIENT, bit 2
 * makes the schema's rules with pk_json_schema_to_rules, used by a root
 * of its own). The
 * rest is the grammar or schema text, up to a NUL; for GBNF, what follows
 * the NUL is a string to check.
 *
 * Properties: a refusal is a one-line message starting "grammar: " or
 * "json_schema: "; the GBNF made from a schema is never refused for its
 * syntax (only as left-recursive or never ending: a schema that is only a
 * reference to itself); sampling under a grammar with synthetic logits and
 * a limit of 48 tokens never picks a token the grammar refuses (the status
 * is never FAILED but for the grammar's documented limits), and the text it
 * makes checks as the status says (complete: pk_grammar_check 1; open: 0),
 * and it is complete whenever the closing walk from the start
 * (pk_grammar_closing_tokens) fits in the 48 tokens;
 * a complete text under a schema's grammar is JSON (jansson parses it).
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"
#include "text/grammar.h"

static pk_model *model;
static float *logits;
static int n_vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    pk_error err = {0};
    if (pk_model_load("models/kjv-moe-f16.gguf", &model, &err)) {
        fprintf(stderr, "fuzz_grammar: %s (run from the project root)\n", err.msg);
        exit(1);
    }
    n_vocab = pk_model_n_vocab(model);
    logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits) exit(1);
    return 0;
}

static void check_msg(const pk_error *err, const char *prefix) {
    if (!err->msg[0] || strchr(err->msg, '\n') || strncmp(err->msg, prefix, strlen(prefix))) {
        fprintf(stderr, "bad message: \"%s\"\n", err->msg);
        abort();
    }
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Sample up to 48 tokens under g (synthetic logits from seed); the text in
 * out; returns the status. */
static int walk(pk_grammar *g, unsigned seed, char *out, size_t cap, size_t *len) {
    pk_error err = {0};
    pk_sampler_params sp = pk_sampler_default_params();
    sp.temperature = (float)(seed % 3) * 0.7f;
    sp.seed = seed;
    pk_sampler *s = pk_sampler_new(&sp, n_vocab, &err);
    if (!s || pk_sampler_set_grammar(s, g, &err)) { fprintf(stderr, "%s\n", err.msg); abort(); }
    pk_sampler_grammar_limit(s, 48);
    uint32_t close0 = pk_grammar_closing_tokens(g, pk_grammar_start(g));
    *len = 0;
    for (int i = 0; i < 48; i++) {
        for (int k = 0; k < n_vocab; k++) logits[k] = (float)(mix(((uint64_t)seed << 32) ^ (uint64_t)(i * n_vocab + k)) % 1000) / 100.0f;
        int32_t t = pk_sampler_sample(s, logits);
        if (t < 0 || t >= n_vocab) abort();
        if (pk_model_is_eog(model, t)) break;
        char piece[256];
        int pl = pk_model_token_piece(model, t, piece, sizeof piece);
        if (pl > 0 && *len + (size_t)pl < cap) { memcpy(out + *len, piece, (size_t)pl); *len += (size_t)pl; }
        pk_sampler_accept(s, t);
    }
    out[*len] = 0;
    const char *msg;
    int st = pk_sampler_grammar_status(s, &msg);
    if (st == PK_GRAMMAR_FAILED && !strstr(msg, "parse stacks") && !strstr(msg, "closer to its end") &&
        !strstr(msg, "continues the output")) {
        fprintf(stderr, "sampling failed: %s\n", msg);
        abort();
    }
    if (st == PK_GRAMMAR_OPEN && close0 <= 48) {
        fprintf(stderr, "open after 48 tokens, but the closing walk from the start takes %u: %s\n", close0, out);
        abort();
    }
    pk_sampler_free(s);
    return st;
}

static void check_text(pk_grammar *g, int st, const char *text, size_t len) {
    int c = pk_grammar_check(g, text, len);
    if ((st == PK_GRAMMAR_CAN_END || st == PK_GRAMMAR_MUST_END) && c != 1) {
        fprintf(stderr, "status complete but check %d: %s\n", c, text);
        abort();
    }
    if (st == PK_GRAMMAR_OPEN && c != 0) {
        fprintf(stderr, "status open but check %d: %s\n", c, text);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    unsigned mode = data[0] & 1, seed = data[0] >> 1;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    size_t tl = strlen(buf);
    const char *str = tl + 1 < size ? buf + tl + 1 : "";
    size_t sl = tl + 1 < size ? size - 1 - tl - 1 : 0;
    pk_error err = {0};
    pk_grammar *g = NULL;
    char text[4096];
    size_t len;
    if (mode == 0) {
        if (pk_grammar_new(model, buf, NULL, &g, &err)) {
            check_msg(&err, "grammar: ");
            if (g) abort();
        } else {
            int c = pk_grammar_check(g, str, sl);
            if (c < -1 || c > 1) abort();
            int st = walk(g, seed, text, sizeof text, &len);
            check_text(g, st, text, len);
            pk_grammar_free(g);
        }
    } else {
        char *gbnf = NULL;
        int flags = (seed & 1) ? PK_SCHEMA_LENIENT : 0, rc;
        if (seed & 2) {
            /* as rules inside a larger grammar */
            char *rules = NULL;
            rc = pk_json_schema_to_rules(buf, tl, flags, "v", &rules, &err);
            if (!rc) {
                size_t n = strlen(rules) + 16;
                gbnf = malloc(n);
                if (gbnf) snprintf(gbnf, n, "root ::= v\n%s", rules);
                free(rules);
                if (!gbnf) { free(buf); return 0; }
            }
        } else {
            rc = pk_json_schema_to_grammar(buf, tl, flags, &gbnf, &err);
        }
        if (rc) {
            check_msg(&err, "json_schema: ");
            if (gbnf) abort();
        } else if (pk_grammar_new(model, gbnf, NULL, &g, &err)) {
            check_msg(&err, "grammar: ");
            if (strstr(err.msg, "line ") || (!strstr(err.msg, "left-recursive") && !strstr(err.msg, "never end") &&
                                            !strstr(err.msg, "too large"))) {
                fprintf(stderr, "the schema's GBNF does not compile: %s\n%s\n", err.msg, gbnf);
                abort();
            }
        } else {
            int st = walk(g, seed, text, sizeof text, &len);
            check_text(g, st, text, len);
            if (st == PK_GRAMMAR_CAN_END || st == PK_GRAMMAR_MUST_END) {
                json_error_t je;
                json_t *v = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
                if (!v) {
                    fprintf(stderr, "complete output is not JSON (%s): %s\n%s\n", je.text, text, gbnf);
                    abort();
                }
                json_decref(v);
            }
            pk_grammar_free(g);
        }
        free(gbnf);
    }
    free(buf);
    return 0;
}
