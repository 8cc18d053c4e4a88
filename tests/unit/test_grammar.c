/* test_grammar.c - GBNF grammars (src/text/grammar.c, grammar_match.c) and
 * JSON schemas to grammars (src/text/json_schema.c):
 *   - grammars that parse, and strings each accepts, completes or rejects
 *     (repetitions, classes with ranges and negation, UTF-8, escapes,
 *     comments, groups, tail and nullable loops);
 *   - bad grammars: the one-line message and where it points;
 *   - the token masks against brute force (every token advanced from the
 *     state) on the bundled model's vocabulary, along random walks through
 *     several grammars, so the trie walks, the cut stacks and the uncertain
 *     tokens are checked exactly;
 *   - schemas: strings that validate or not, and what is refused.
 * Generation under schemas with the model is test_grammar_gen.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "gguf/gguf.h"
#include "text/grammar.h"
#include "testhelp.h"

static pk_grammar *compile(const char *src, const pk_vtrie *v) {
    pk_error err = {0};
    pk_grammar *g = NULL;
    int rc = pk_grammar_compile(src, strlen(src), NULL, v, &g, &err);
    TEST_CHECK(rc == PK_OK, "grammar should compile: %s\n%s", err.msg, src);
    return g;
}

/* strings: "+text" complete, "~text" a prefix only, "-text" rejected */
static void expect(const char *src, const char *const *cases) {
    pk_grammar *g = compile(src, NULL);
    if (!g) return;
    for (; *cases; cases++) {
        const char *t = *cases + 1;
        int want = **cases == '+' ? 1 : **cases == '~' ? 0 : -1;
        int got = pk_grammar_check(g, t, strlen(t));
        TEST_CHECK(got == want, "grammar %.40s...: \"%s\" gives %d, want %d", src, t, got, want);
    }
    pk_grammar_free(g);
}

static void test_accepts(void) {
    expect("root ::= \"ab\" | \"a\" \"c\"*\n", (const char *const[]){"+ab", "+a", "+accc", "~", "-abc", "-b", "-acb", NULL});
    expect("root ::= [a-c]+ [0-9]{2,3}\n", (const char *const[]){"+a12", "+cab999", "~a1", "~abc", "-a1234", "-12", "-d1", NULL});
    expect("root ::= x{3}\nx ::= \"x\"\n", (const char *const[]){"+xxx", "~xx", "-xxxx", NULL});
    expect("root ::= \"a\"{2,} \"b\"?\n", (const char *const[]){"+aa", "+aaaaab", "~a", "-ab", "-aabb", NULL});
    expect("root ::= \"a\"{0,2} \"b\"\n", (const char *const[]){"+b", "+ab", "+aab", "-aaab", NULL});
    expect("root ::= [^abc\\n]* \"\\n\"\n", (const char *const[]){"+xyz\n", "+\n", "-xaz\n", "~d", "+\xc3\xa9\n", "-\xc3\n", "~\xc3", NULL});
    /* code points: a range across encoded lengths, negation of multibyte */
    expect("root ::= [\\u00e0-\\u4e2d]\n",
           (const char *const[]){"+\xc3\xa0", "+\xe4\xb8\xad", "+\xdf\xbf", "-\xe4\xb8\xae", "-a", "~\xe0", "-\xc3\x9f", NULL});
    expect("root ::= [^\\x00-\\x7f]\n", (const char *const[]){"+\xf0\x9f\x98\x80", "+\xc2\x80", "-a", "-\xed\xa0\x80", "-\xc0\x80", "-\xff", NULL});
    expect("root ::= .+\n", (const char *const[]){"+a\n\xe2\x82\xac", "-\x80", "~", NULL});
    /* escapes, literal with UTF-8, comments, newlines in groups and after | */
    expect("# a comment\nroot ::= \"\\x41\\u00e9\\\"\\\\\" ( # inside\n  \"t\" |\n  \"\\t\"\n) # end\n",
           (const char *const[]){"+A\xc3\xa9\"\\t", "+A\xc3\xa9\"\\\t", "~A\xc3\xa9\"\\", "-A\xc3\xa9\"\\x", NULL});
    expect("root ::= a |\n  b\na ::= \"1\"\nb ::= \"2\"\n", (const char *const[]){"+1", "+2", "-3", NULL});
    /* nullable loops, tail recursion, nested repetitions */
    expect("root ::= (\"a\"? \"b\"?)* \"c\"\n", (const char *const[]){"+c", "+ababbac", "~aab", "-ca", NULL});
    expect("root ::= \"(\" root \")\" | \"x\"\n", (const char *const[]){"+x", "+((x))", "~((x)", "-(x))", NULL});
    expect("root ::= item (\",\" item)*\nitem ::= [0-9]+ | \"[\" root \"]\"\n",
           (const char *const[]){"+1,[2,[3]],45", "~1,", "~[1,[2", "-1,,2", "-[]", NULL});
    expect("root ::= ((\"ab\"){2}){0,2}\n", (const char *const[]){"+", "+abab", "+abababab", "~aba", "-ababababab", NULL});
    expect("root ::= [\\]\\[\\-^]+\n", (const char *const[]){"+[]-^", "-a", NULL});
    expect("root ::= [a-]\n", (const char *const[]){"+a", "+-", "-b", NULL});
    expect("root ::= \"\"\n", (const char *const[]){"+", "-a", NULL});
    /* a start rule other than root */
    pk_error err = {0};
    pk_grammar *g = NULL;
    const char *two = "root ::= \"r\"\nother ::= \"o\"+\n";
    TEST_COND("start rule by name", pk_grammar_compile(two, strlen(two), "other", NULL, &g, &err) == PK_OK &&
              pk_grammar_check(g, "oo", 2) == 1 && pk_grammar_check(g, "r", 1) == -1);
    pk_grammar_free(g);
}

static void expect_error(const char *src, const char *want) {
    pk_error err = {0};
    pk_grammar *g = NULL;
    int rc = pk_grammar_compile(src, strlen(src), NULL, NULL, &g, &err);
    TEST_CHECK(rc == PK_ERR_ARG && !g, "bad grammar compiled: %s", src);
    TEST_CHECK(strstr(err.msg, want) != NULL, "message \"%s\" lacks \"%s\"", err.msg, want);
    TEST_CHECK(!strchr(err.msg, '\n'), "message has a newline: %s", err.msg);
    pk_grammar_free(g);
}

static void test_errors(void) {
    expect_error("root ::= \"a\n", "line 1, column 10: unterminated string literal");
    expect_error("root ::= [ab\n", "unterminated character class");
    expect_error("root := \"a\"\n", "line 1, column 6: expected '::=' after the rule name 'root'");
    expect_error("root ::= foo\n", "line 1, column 10: rule 'foo' is used but never defined");
    expect_error("x ::= \"a\"\n", "no rule 'root'");
    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "line 2, column 1: rule 'root' is defined twice (first at line 1)");
    expect_error("root ::= (\"a\" | \"b\"\n", "unclosed '('");
    expect_error("root ::= \"a\")\n", "')' without '('");
    expect_error("root ::= * \"a\"\n", "'*' with nothing before it");
    expect_error("root ::= \"a\"{3,2}\n", "the maximum is below the minimum");
    expect_error("root ::= \"a\"{99999}\n", "repetition count larger than 10000");
    expect_error("root ::= \"a\"{2\n", "expected '}'");
    expect_error("root ::= \"\\q\"\n", "unknown escape '\\q'");
    expect_error("root ::= \"\\x4\"\n", "expected 2 hex digits");
    expect_error("root ::= \"\\ud800\"\n", "is not a Unicode character");
    expect_error("root ::= [z-a]\n", "range end below its start");
    expect_error("root ::= [^\\x00-\\U0010FFFF]\n", "empty character class");
    expect_error("root ::= \"\xff\"\n", "invalid UTF-8");
    expect_error("root ::= <think>\n", "token references");
    expect_error("root ::= \"a\" @\n", "line 1, column 14: unexpected '@'");
    expect_error("\n\n  root ::= x\nx ::= x \"a\"\n", "can never end");
    expect_error("root ::= x\nx ::= x \"a\" | \"b\"\n", "rule 'x' is left-recursive");
    expect_error("root ::= a\na ::= b \"x\" | \"y\"\nb ::= c? a\nc ::= \"c\"\n", "left-recursive");
    expect_error("", "no rules");
    expect_error("root ::= ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((\"a\")))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))\n",
                 "parentheses nested more than 64 deep");
    /* nested repetitions share their group: small, however many they accept */
    expect("root ::= ((\"a\"{1000}){1000}){1000}\n", (const char *const[]){"~aaa", "-b", NULL});
    char big[300];
    snprintf(big, sizeof big, "root ::= \"%0200d\"{6000}\n", 0);
    expect_error(big, "too large");
    /* a generated rule reports the rule it was made in */
    expect_error("root ::= (\"(\" root)\n", "rule 'root");
}

/* ---- masks against brute force ------------------------------------------------------ */

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

static int n_mask_checks;

/* Walk the grammar by random allowed tokens; at each state compare the mask
 * with every token advanced one by one. */
static void check_masks(const pk_vtrie *v, const char *src, int steps, int walks) {
    pk_grammar *g = compile(src, v);
    if (!g) return;
    int nv = pk_vtrie_n_vocab(v), words = (nv + 63) / 64;
    int32_t *allowed = malloc((size_t)nv * sizeof *allowed);
    uint64_t *copy = malloc((size_t)words * sizeof *copy);
    for (int w = 0; w < walks; w++) {
        uint32_t st = pk_grammar_start(g);
        for (int k = 0; k < steps && st; k++) {
            const uint64_t *m = pk_grammar_mask(g, st);
            TEST_CHECK(m != NULL, "mask failed: %s", pk_grammar_overflow(g) ? pk_grammar_overflow(g) : "?");
            if (!m) break;
            memcpy(copy, m, (size_t)words * sizeof *copy);
            int na = 0, bad = 0;
            for (int t = 0; t < nv; t++) {
                int brute = pk_grammar_advance_token(g, st, t) != 0;
                int bit = (int)(copy[t >> 6] >> (t & 63) & 1);
                if (brute != bit && bad++ < 3)
                    fprintf(stderr, "  token %d: mask %d, brute force %d\n", t, bit, brute);
                if (brute) allowed[na++] = t;
            }
            TEST_CHECK(bad == 0, "grammar %.30s...: step %d: %d tokens differ from brute force", src, k, bad);
            n_mask_checks++;
            if (!na) break;
            st = pk_grammar_advance_token(g, st, allowed[rnd() % (uint32_t)na]);
        }
    }
    free(allowed);
    free(copy);
    pk_grammar_free(g);
}

/* tests/data/grammars/json.gbnf (NULL: a failed check) */
static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    char *b = f ? malloc(1 << 16) : NULL;
    size_t n = b ? fread(b, 1, (1 << 16) - 1, f) : 0;
    if (f) fclose(f);
    TEST_CHECK(b && n > 0, "cannot read %s (run from the project root)", path);
    if (b) b[n] = 0;
    return b;
}

static void test_masks(void) {
    pk_error err = {0};
    gguf_file *f = NULL;
    pk_tokenizer *t = NULL;
    pk_vtrie *v = NULL;
    if (gguf_open("models/kjv-moe-f16.gguf", &f, &err) || pk_tokenizer_load(f, &t, &err) || pk_vtrie_build(t, &v, &err)) {
        TEST_CHECK(0, "vocabulary of the bundled model: %s (run from the project root)", err.msg);
        return;
    }
    int nt, nn;
    pk_vtrie_stats(v, &nt, &nn);
    TEST_CHECK(nt > 4000 && nn > nt, "trie: %d tokens, %d nodes", nt, nn);
    char *json_gbnf = read_text("tests/data/grammars/json.gbnf");
    if (!json_gbnf) return;
    check_masks(v, json_gbnf, 60, 6);
    check_masks(v, "root ::= (\"And\" | \" God\" | \" said\" | [a-z ,.]{1,8})+ \".\"\n", 40, 4);
    check_masks(v, "root ::= line{1,3}\nline ::= [^\\n]{0,30} \"\\n\"\n", 50, 4);
    check_masks(v, "root ::= \"the \" (\"lord\" | \"land\" | \"light\") (\" \" root)?\n", 30, 6);
    check_masks(v, "root ::= [\\u00e0-\\u00ff\\u4e00-\\u4e10 ]+\n", 20, 3);
    TEST_CHECK(n_mask_checks > 200, "only %d masks checked", n_mask_checks);
    /* the initial JSON mask: '{', '[', '"', digits, '-', t/f/n starts */
    pk_grammar *g = compile(json_gbnf, v);
    if (g) {
        const uint64_t *m = pk_grammar_mask(g, pk_grammar_start(g));
        int32_t ids[8];
        int n = pk_tokenize(t, "{", 1, ids, 8, 0, 0);
        TEST_COND("'{' allowed first", n == 1 && m && (m[ids[0] >> 6] >> (ids[0] & 63) & 1));
        n = pk_tokenize(t, "And", 3, ids, 8, 0, 0);
        TEST_COND("'And' not allowed first", n == 1 && m && !(m[ids[0] >> 6] >> (ids[0] & 63) & 1));
        uint32_t st = pk_grammar_advance(g, pk_grammar_start(g), "[1, \"a", 6);
        TEST_COND("JSON prefix open", st && !pk_grammar_can_end(g, st));
        TEST_CHECK(pk_grammar_distance(g, st) == 2, "distance of [1, \"a is %u, want 2 (\"])", pk_grammar_distance(g, st));
        int32_t c = pk_grammar_closing_token(g, st);
        char piece[8];
        TEST_COND("closing token is a quote", c >= 0 && pk_token_to_piece(t, c, piece, 8, 0) == 1 && piece[0] == '"');
        st = pk_grammar_advance(g, st, "\"]", 2);
        TEST_COND("JSON complete", pk_grammar_can_end(g, st) && !pk_grammar_must_end(g, st) && pk_grammar_distance(g, st) == 0);
        pk_grammar_free(g);
    }
    /* the closing path takes whole tokens: a 33-byte literal closes in far
       fewer tokens than bytes, and a sampler limited to 12 tokens (every
       logit equal, so the model never heads for the end) ends complete */
    static const char lit[] = "And God said, Let there be light.";
    g = compile("root ::= [a-z ]* \"And God said, Let there be light.\"\n", v);
    if (g) {
        uint32_t st = pk_grammar_start(g);
        int n = 0;
        char piece[64];
        while (st && pk_grammar_distance(g, st) > 0 && n < 64) {
            int32_t c = pk_grammar_closing_token(g, st);
            int pl = c >= 0 ? pk_token_to_piece(t, c, piece, sizeof piece, 0) : -1;
            st = pl > 0 ? pk_grammar_advance(g, st, piece, (size_t)pl) : 0;
            n++;
        }
        TEST_CHECK(st && pk_grammar_can_end(g, st) && n <= 12, "closing path: %d tokens for the %zu bytes, %s", n,
                   strlen(lit), st ? "complete" : "dead");
        pk_sampler_params sp = pk_sampler_default_params();
        pk_sampler *s = pk_sampler_new(&sp, pk_vtrie_n_vocab(v), &err);
        float *logits = calloc((size_t)pk_vtrie_n_vocab(v), sizeof *logits);
        if (s && logits && !pk_sampler_set_grammar(s, g, &err)) {
            pk_sampler_grammar_limit(s, 12);
            int k = 0;
            char out[256];
            size_t no = 0;
            for (; k < 12; k++) {
                int32_t id = pk_sampler_sample(s, logits);
                if (pk_vtrie_is_eog(v, id)) break;
                pk_sampler_accept(s, id);
                int pl = pk_token_to_piece(t, id, out + no, sizeof out - 1 - no, 0);
                if (pl > 0 && (size_t)pl < sizeof out - 1 - no) no += (size_t)pl;
            }
            out[no] = 0;
            int gs = pk_sampler_grammar_status(s, NULL);
            TEST_CHECK(gs == PK_GRAMMAR_CAN_END || gs == PK_GRAMMAR_MUST_END,
                       "a 12-token limit on a 33-byte close: grammar status %d after %d tokens", gs, k);
            /* the limit counts the close in tokens, not bytes: with 12
               tokens for a 9-token close the output starts free ([a-z ]),
               not with the literal at once */
            TEST_CHECK(out[0] && out[0] != 'A' && k > n, "a 12-token limit on a %d-token close: '%s' in %d tokens", n,
                       out, k);
        } else {
            TEST_CHECK(0, "sampler with the grammar: %s", err.msg);
        }
        free(logits);
        pk_sampler_free(s);
        pk_grammar_free(g);
    }
    g = compile("root ::= \"x\"\n", v);
    if (g) {
        uint32_t st = pk_grammar_advance(g, pk_grammar_start(g), "x", 1);
        TEST_COND("must end after x", pk_grammar_must_end(g, st));
        const uint64_t *m = pk_grammar_mask(g, st);
        int any = 0;
        for (int k = 0; m && k < (pk_vtrie_n_vocab(v) + 63) / 64; k++) any |= m[k] != 0;
        TEST_COND("nothing allowed after the end", m && !any);
        pk_grammar_free(g);
    }
    /* ambiguity limits: exponentially many stacks turn the state dead with a message */
    g = compile("root ::= \"a\" root \"x\" | \"a\" root \"y\" | \"\"\n", v);
    if (g) {
        uint32_t st = pk_grammar_start(g);
        for (int i = 0; i < 20 && st; i++) st = pk_grammar_advance(g, st, "a", 1);
        TEST_COND("ambiguous grammar hits the stack limit", !st && pk_grammar_overflow(g) &&
                  strstr(pk_grammar_overflow(g), "parse stacks"));
        pk_grammar_free(g);
    }
    free(json_gbnf);
    pk_vtrie_free(v);
    pk_tokenizer_free(t);
    gguf_close(f);
}

/* ---- JSON schema ---------------------------------------------------------------------- */

/* "+json" valid, "-json" not (as complete texts) */
static void schema_expect(const char *schema, int flags, const char *const *cases) {
    pk_error err = {0};
    char *gbnf = NULL;
    int rc = pk_json_schema_gbnf(schema, strlen(schema), flags, NULL, &gbnf, &err);
    TEST_CHECK(rc == PK_OK, "schema %s: %s", schema, err.msg);
    if (rc) return;
    pk_grammar *g = compile(gbnf, NULL);
    for (; g && *cases; cases++) {
        const char *t = *cases + 1;
        int want = **cases == '+';
        int got = pk_grammar_check(g, t, strlen(t)) == 1;
        TEST_CHECK(got == want, "schema %s: %s gives %d\n%s", schema, t, got, gbnf);
    }
    pk_grammar_free(g);
    free(gbnf);
}

static void schema_error(const char *schema, int flags, const char *want) {
    pk_error err = {0};
    char *gbnf = NULL;
    int rc = pk_json_schema_gbnf(schema, strlen(schema), flags, NULL, &gbnf, &err);
    TEST_CHECK(rc == PK_ERR_ARG && !gbnf, "schema %s was accepted", schema);
    TEST_CHECK(strstr(err.msg, want) != NULL, "schema %s: message \"%s\" lacks \"%s\"", schema, err.msg, want);
    free(gbnf);
}

static void test_schema(void) {
    schema_expect("{\"type\":\"object\"}", 0, (const char *const[]){
        "+{}", "+{\"a\": [1, 2.5e3, \"x\\n\", true, null, {\"b\": {}}]}", "-[]", "-{\"a\"}", "-{a: 1}", NULL});
    schema_expect("{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"string\"},\"a\":{\"type\":\"integer\"}},"
                  "\"required\":[\"a\"]}", 0, (const char *const[]){
        "+{\"n\": \"x\", \"a\": 1}", "+{\"a\": -12}", "-{\"n\": \"x\"}", "-{\"a\": 1.5}", "-{\"a\": 1, \"n\": \"x\"}",
        "-{\"a\": 1, \"z\": 2}", "-{\"a\": 01}", "+{\n  \"a\": 0\n}", NULL});
    schema_expect("{\"properties\":{\"a\":{\"type\":\"boolean\"}},\"additionalProperties\":{\"type\":\"null\"}}", 0,
                  (const char *const[]){"+{}", "+{\"a\": true, \"b\": null, \"ab\": null}", "-{\"a\": true, \"a\": null}",
                                        "-{\"b\": 1}", "+{\"\": null}", "+{\"aa\": null}", NULL});
    schema_expect("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":2,\"maxItems\":3}", 0,
                  (const char *const[]){"+[1, 2]", "+[1,2,3]", "-[1]", "-[1,2,3,4]", "-[1,\"a\"]", NULL});
    schema_expect("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"const\":3}]}", 0,
                  (const char *const[]){"+[\"a\", 3]", "-[\"a\", 4]", "-[\"a\"]", "-[\"a\", 3, 3]", NULL});
    schema_expect("{\"enum\":[\"red\",\"gr\\\"een\",1,null,{\"a\":[true]}]}", 0,
                  (const char *const[]){"+\"red\"", "+\"gr\\\"een\"", "+1", "+null", "+{\"a\":[true]}", "-\"blue\"", "-2", NULL});
    schema_expect("{\"type\":[\"string\",\"null\"],\"maxLength\":3}", 0,
                  (const char *const[]){"+\"abc\"", "+\"\\u00e9\\n\"", "-\"abcd\"", "+null", "-1", "-\"\\ud800\"", NULL});
    schema_expect("{\"type\":\"string\",\"minLength\":2,\"nullable\":true}", 0,
                  (const char *const[]){"+\"\xc3\xa9\xc3\xa9\"", "-\"a\"", "+null", NULL});
    schema_expect("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"boolean\"}]}", 0,
                  (const char *const[]){"+5", "+false", "-\"5\"", NULL});
    schema_expect("{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"}}},"
                  "\"required\":[\"c\"]}},\"$ref\":\"#/$defs/t\"}", 0,
                  (const char *const[]){"+{\"c\": []}", "+{\"c\": [{\"c\": [{\"c\": []}]}]}", "-{\"c\": [{}]}", NULL});
    schema_expect("{\"definitions\":{\"a b\":{\"const\":\"x\"}},\"properties\":{\"p\":{\"$ref\":\"#/definitions/a b\"}},\"required\":[\"p\"]}",
                  0, (const char *const[]){"+{\"p\": \"x\"}", "-{\"p\": \"y\"}", NULL});
    schema_expect("{\"type\":\"string\",\"format\":\"date-time\"}", 0,
                  (const char *const[]){"+\"2026-12-06T17:42:02Z\"", "+\"2026-01-31T00:00:00.5+01:00\"", "-\"2026-13-01T00:00:00Z\"", NULL});
    schema_expect("{\"type\":\"string\",\"format\":\"uuid\"}", 0,
                  (const char *const[]){"+\"123e4567-e89b-12d3-a456-426614174000\"", "-\"123e4567\"", NULL});
    schema_expect("{\"type\":\"integer\",\"minimum\":-12,\"maximum\":305}", 0, (const char *const[]){
        "+-12", "+-1", "+0", "+9", "+10", "+99", "+100", "+299", "+305", "-306", "-310", "-400", "-1000", "--13", "--0",
        "-007", "-1.5", NULL});
    schema_expect("{\"type\":\"integer\",\"exclusiveMinimum\":7,\"exclusiveMaximum\":1000}", 0, (const char *const[]){
        "+8", "+999", "+100", "-7", "-1000", "-0", NULL});
    schema_expect("{\"type\":\"integer\",\"minimum\":1.5}", 0, (const char *const[]){
        "+2", "+123456789", "-1", "-0", "--5", NULL});
    schema_expect("{\"type\":\"integer\",\"maximum\":-3}", 0, (const char *const[]){
        "+-3", "+-100", "--2", "-0", "-5", NULL});
    schema_expect("{\"type\":\"number\",\"minimum\":0}", 0, (const char *const[]){"+0.5", "+12e3", "--1", NULL});
    schema_expect("{\"type\":\"number\",\"maximum\":3}", PK_SCHEMA_LENIENT, (const char *const[]){"+7", NULL});
    schema_expect("true", 0, (const char *const[]){"+1", "+[]", "+\"x\"", NULL});
    schema_expect("{\"title\":\"t\",\"description\":\"d\",\"type\":\"boolean\",\"x-extra\":1}", 0,
                  (const char *const[]){"+true", "-1", NULL});
    schema_expect("{\"type\":\"string\",\"pattern\":\"^a$\",\"format\":\"email\"}", PK_SCHEMA_LENIENT,
                  (const char *const[]){"+\"zz\"", NULL});
    schema_expect("{\"type\":\"object\",\"properties\":{\"\\u00e9t\\u00e9\":{\"type\":\"null\"}},\"additionalProperties\":true}", 0,
                  (const char *const[]){"+{\"\xc3\xa9t\xc3\xa9\": null, \"\xc3\xa9t\": 1}", "-{\"\xc3\xa9t\xc3\xa9\": 1}", NULL});
    static const struct { const char *schema, *want; } bad[] = {
        {"{\"type\":\"string\",\"pattern\":\"^a$\"}", "'pattern' at / is not supported"},
        {"{\"properties\":{\"age\":{\"type\":\"number\",\"minimum\":1}}}", "bounds on a number at /properties/age"},
        {"{\"minimum\":1}", "bounds without \"type\": \"integer\" at /"},
        {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer lies between"},
        {"{\"type\":\"integer\",\"minimum\":\"5\"}", "'minimum' at / must be a number"},
        {"{\"type\":\"strin\"}", "unknown type \"strin\" at /"},
        {"{\"tpye\":\"string\"}", "unknown keyword 'tpye' at /"},
        {"{\"$ref\":\"#/$defs/none\"}", "does not resolve"},
        {"{\"$ref\":\"http://x/y\"}", "only references inside the schema"},
        {"{\"properties\":{\"a\":{}},\"required\":[\"b\"]}", "required property 'b' at / is not in 'properties'"},
        {"{\"type\":\"array\",\"maxItems\":100000}", "more than 1000"},
        {"{\"items\":{\"not\":{}}}", "'not' at /items is not supported"},
        {"{\"anyOf\":[]}", "non-empty array"},
        {"false", "nothing is valid"},
        {"{\"type\":\"string\",\"format\":\"email\"}", "'format' \"email\" at / is not supported"},
        {"{\"a\":", "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) schema_error(bad[i].schema, 0, bad[i].want);
    char longkey[400];
    snprintf(longkey, sizeof longkey, "{\"properties\":{\"%0300d\":{}},\"additionalProperties\":true}", 0);
    schema_error(longkey, 0, "longer than 256 bytes");
}

/* Integer ranges against arithmetic: random bounds of random sizes, and
 * numbers at, around and between them. */
static void test_int_ranges(void) {
    static const long long scale[] = {1, 10, 100, 1000, 100000, 10000000, 10000000000LL};
    int bad = 0, n = 0;
    for (int k = 0; k < 150; k++) {
        long long a = (long long)(rnd() % 2001) - 1000, b = (long long)(rnd() % 2001) - 1000;
        a *= scale[rnd() % 7]; b *= scale[rnd() % 7];
        if (a > b) { long long t = a; a = b; b = t; }
        char schema[160], *gbnf = NULL;
        snprintf(schema, sizeof schema, "{\"type\":\"integer\",\"minimum\":%lld,\"maximum\":%lld}", a, b);
        pk_error err = {0};
        pk_grammar *g = NULL;
        if (pk_json_schema_gbnf(schema, strlen(schema), 0, NULL, &gbnf, &err) ||
            pk_grammar_compile(gbnf, strlen(gbnf), NULL, NULL, &g, &err)) {
            TEST_CHECK(0, "%s: %s", schema, err.msg);
            free(gbnf);
            continue;
        }
        long long probe[12] = {a, b, a - 1, b + 1, a + 1, b - 1, 0, -1, 1, (a + b) / 2, a * 10, b * 10};
        for (int i = 0; i < 12 + 20; i++) {
            long long x = i < 12 ? probe[i] : a + (long long)(rnd() % (uint32_t)(b - a + 1 > 4000000000LL ? 4000000000LL : b - a + 1));
            char t[32];
            snprintf(t, sizeof t, "%lld", x);
            int want = x >= a && x <= b, got = pk_grammar_check(g, t, strlen(t)) == 1;
            if (want != got && bad++ < 5) fprintf(stderr, "  %s: %s gives %d\n", schema, t, got);
            n++;
        }
        pk_grammar_free(g);
        free(gbnf);
    }
    TEST_CHECK(bad == 0, "integer ranges: %d of %d numbers judged wrong", bad, n);
}

/* A schema whose GBNF does not compile is reported by the grammar. */
static void test_schema_self_ref(void) {
    pk_error err = {0};
    char *gbnf = NULL;
    const char *s = "{\"$ref\":\"#\"}";
    int rc = pk_json_schema_gbnf(s, strlen(s), 0, NULL, &gbnf, &err);
    if (rc == PK_OK) {
        pk_grammar *g = NULL;
        rc = pk_grammar_compile(gbnf, strlen(gbnf), NULL, NULL, &g, &err);
        pk_grammar_free(g);
        free(gbnf);
    }
    TEST_CHECK(rc == PK_ERR_ARG && (strstr(err.msg, "left-recursive") || strstr(err.msg, "never end")),
               "a schema that is only itself: %s", err.msg);
}

/* Two schemas' rules in one grammar: a tool call to either function. */
static void test_schema_rules(void) {
    pk_error err = {0};
    char *a = NULL, *b = NULL;
    const char *sa = "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},\"required\":[\"city\"]}";
    const char *sb = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"}},\"required\":[\"n\"]}";
    int rc = pk_json_schema_to_rules(sa, strlen(sa), 0, "weather-args", &a, &err);
    if (!rc) rc = pk_json_schema_to_rules(sb, strlen(sb), 0, "count-args", &b, &err);
    TEST_CHECK(rc == PK_OK, "rules: %s", err.msg);
    if (!rc) {
        size_t n = strlen(a) + strlen(b) + 512;
        char *gbnf = malloc(n);
        snprintf(gbnf, n, "root ::= \"<tool_call>{\\\"name\\\": \" (\"\\\"weather\\\", \\\"arguments\\\": \" weather-args"
                 " | \"\\\"count\\\", \\\"arguments\\\": \" count-args) \"}</tool_call>\"\n%s%s", a, b);
        TEST_COND("rules carry no root", strncmp(a, "root ::=", 8) && !strstr(a, "\nroot ::=") && !strstr(b, "\nroot ::="));
        expect(gbnf, (const char *const[]){"+<tool_call>{\"name\": \"weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>",
                                           "+<tool_call>{\"name\": \"count\", \"arguments\": {\"n\": 3}}</tool_call>",
                                           "-<tool_call>{\"name\": \"count\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>", NULL});
        free(gbnf);
    }
    free(a);
    free(b);
    TEST_COND("rule name checked", pk_json_schema_to_rules(sa, strlen(sa), 0, "bad name", &a, &err) == PK_ERR_ARG &&
              strstr(err.msg, "rule name"));
}

int main(void) {
    test_accepts();
    test_errors();
    test_masks();
    test_schema();
    test_schema_self_ref();
    test_schema_rules();
    test_int_ranges();
    return TEST_REPORT();
}
