/* test_toolcall_grammar.c - the grammar that forces a tool call
 * (pk_toolcall_grammar, src/text/toolcall_grammar.c), read back by the
 * parser (pk_toolcall) as the server reads it:
 *   - random sentences of each format's grammar (tool_choice "required" and
 *     named, one call or several, with and without reasoning first), walked
 *     byte by byte through the grammar's own matcher: each is complete for
 *     pk_grammar_check and parses - after the reasoning splitter, as the
 *     server feeds it - into calls to allowed functions whose arguments
 *     validate against the tool's schema, and nothing else;
 *   - generation with the bundled model (which knows nothing of tool calls)
 *     under each format's grammar: every output parses the same way;
 *   - a marker that is one token of the vocabulary is allowed as that token;
 *   - bad input: a one-line PK_ERR_ARG. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "pocket.h"
#include "schema_valid.h"
#include "testhelp.h"
#include "text/grammar.h"

static const char tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, "
    "\"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}, "
    "\"days\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 14}}, \"required\": [\"city\"]}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"search\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"query\": {\"type\": \"string\"}, \"limit\": {\"type\": \"number\"}, "
    "\"filters\": {\"type\": \"object\", \"properties\": {\"lang\": {\"type\": \"string\", \"enum\": [\"en\", \"fr\"]}, "
    "\"safe\": {\"type\": \"boolean\"}}, \"required\": [\"safe\"]}, "
    "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 8}, \"maxItems\": 3}}, "
    "\"required\": [\"query\", \"filters\"]}}},"
    "{\"type\": \"function\", \"function\": {\"name\": \"no_args\"}},"
    "{\"name\": \"file.write\", \"input_schema\": {\"type\": \"object\", \"properties\": {"
    "\"note\": {\"type\": [\"string\", \"null\"]}, \"level\": {\"$ref\": \"#/$defs/Level\"}, "
    "\"flag\": {\"const\": \"on\"}, \"ids\": {\"type\": \"array\", \"items\": {\"type\": \"integer\"}}}, "
    "\"required\": [\"note\", \"level\"], \"$defs\": {\"Level\": {\"type\": \"string\", \"enum\": [\"low\", \"high\"]}}}}]";

static const char *const formats[] = {"qwen3coder", "hermes", "harmony", "deepseek", "llama3", "gemma4"};
#define N_FORMATS 6

static json_t *tools_j;

/* The parameters schema of function name (NULL: no parameters). */
static json_t *params_of(const char *name) {
    for (size_t i = 0; i < json_array_size(tools_j); i++) {
        json_t *t = json_array_get(tools_j, i), *f = json_object_get(t, "function");
        if (!f) f = t;
        if (!strcmp(json_string_value(json_object_get(f, "name")), name)) {
            json_t *p = json_object_get(f, "parameters");
            return p ? p : json_object_get(f, "input_schema");
        }
    }
    return NULL;
}

/* ---- reading an output back as the server does ------------------------------------ */

/* JSON text with each number's exponent read as e0: the grammar allows
 * exponents of up to 16 digits (valid JSON), beyond the range of the
 * doubles jansson reads them into. Malloc'ed. */
static char *exponents_zero(const char *s, size_t n, size_t *out_n) {
    char *o = malloc(n + 1);
    size_t k = 0;
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        o[k++] = c;
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if ((c == 'e' || c == 'E') && i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') {
            size_t j = i + 1;
            if (j < n && (s[j] == '+' || s[j] == '-')) j++;
            while (j < n && s[j] >= '0' && s[j] <= '9') j++;
            o[k++] = '0';
            i = j - 1;
        }
    }
    o[k] = 0;
    *out_n = k;
    return o;
}

/* text (n bytes) generated under the grammar of fmt, choice, flags: "" if
 * it reads as wanted, else what is wrong (static buffer). */
static const char *read_back(const char *fmt, const char *choice, int flags, const char *text, size_t n) {
    static char why[512];
    pk_error err = {0};
    int harmony = !strcmp(fmt, "harmony"), gemma = !strcmp(fmt, "gemma4");
    const char *answer = text;
    size_t an = n;
    pk_chat_reasoning *r = NULL;
    if (!harmony && (gemma || (flags & (PK_TOOLCALL_MAY_THINK | PK_TOOLCALL_THINKING)))) {
        /* the reasoning splitter first (Gemma-4's always: it takes its markers
           anywhere); a prompt that opened the reasoning is fed its opening too */
        const char *open = gemma ? "<|channel>thought" : "<think>";
        if (pk_chat_reasoning_new(gemma ? "gemma4" : "chatml", &r, &err)) { snprintf(why, sizeof why, "%.400s", err.msg); return why; }
        if (flags & PK_TOOLCALL_THINKING) pk_chat_reasoning_feed(r, open, strlen(open), 0);
        pk_chat_reasoning_feed(r, text, n, 1);
        answer = pk_chat_reasoning_content(r, &an);
    }
    pk_toolcall *tc = NULL;
    if (pk_toolcall_new(fmt, 1, &tc, &err) || pk_toolcall_set_tools(tc, tools, sizeof tools - 1, &err) ||
        pk_toolcall_feed(tc, answer, an, 1)) {
        snprintf(why, sizeof why, "parser: %.400s", err.msg);
        goto out;
    }
    why[0] = 0;
    size_t cl;
    pk_toolcall_content(tc, &cl);
    int nc = pk_toolcall_count(tc);
    if (nc < 1 || ((flags & PK_TOOLCALL_ONE_CALL) && nc != 1)) snprintf(why, sizeof why, "%d calls", nc);
    else if (cl && !(harmony && (flags & (PK_TOOLCALL_MAY_THINK | PK_TOOLCALL_THINKING)))) snprintf(why, sizeof why, "content besides the calls");
    else if (pk_toolcall_check_choice(tc, choice, &err)) snprintf(why, sizeof why, "%.400s", err.msg);
    for (int i = 0; i < nc && !why[0]; i++) {
        pk_toolcall_call c;
        pk_toolcall_get(tc, i, &c);
        json_error_t je;
        size_t an2;
        char *a = exponents_zero(c.arguments, c.arguments_len, &an2);
        json_t *args = json_loadb(a, an2, JSON_ALLOW_NUL, &je);
        free(a);
        json_t *schema = params_of(c.name);
        root_schema = schema;
        if (!args) snprintf(why, sizeof why, "call %d (%s): arguments not JSON (%s): %.300s", i, c.name, je.text, c.arguments);
        else if (!c.closed && !harmony) snprintf(why, sizeof why, "call %d (%s) not closed", i, c.name);
        else if (schema ? !valid(args, schema) : json_object_size(args) != 0)
            snprintf(why, sizeof why, "call %d (%s): arguments do not validate: %s", i, c.name, c.arguments);
        json_decref(args);
    }
out:
    pk_toolcall_free(tc);
    pk_chat_reasoning_free(r);
    return why;
}

/* ---- random sentences of a grammar ----------------------------------------------- */

static uint64_t rs = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17;
    return (uint32_t)(rs >> 11);
}

/* A random sentence of g into out (NUL-terminated; its length returned, -1
 * if the walk got stuck): random allowed bytes until about target bytes,
 * then the bytes that bring the end closer, ending where it can with some
 * chance. */
static long random_sentence(pk_grammar *g, size_t target, char *out, size_t cap) {
    uint32_t st = pk_grammar_start(g);
    size_t n = 0;
    while (n + 1 < cap) {
        if (pk_grammar_can_end(g, st) && (n >= target || rnd() % 16 == 0)) break;
        unsigned char ok[256];
        uint32_t next[256], best = UINT32_MAX;
        int k = 0;
        for (int b = 0; b < 256; b++) {
            char c = (char)b;
            uint32_t s2 = pk_grammar_advance(g, st, &c, 1);
            if (!s2) continue;
            uint32_t d = pk_grammar_distance(g, s2);
            if (n >= target && d > best) continue;
            if (n >= target && d < best) { best = d; k = 0; }
            ok[k] = (unsigned char)b;
            next[k++] = s2;
        }
        if (!k) break;   /* only the end */
        int pick = (int)(rnd() % (uint32_t)k);
        out[n++] = (char)ok[pick];
        st = next[pick];
    }
    out[n] = 0;
    return pk_grammar_can_end(g, st) ? (long)n : -1;
}

static int flag_sets[] = {0, PK_TOOLCALL_ONE_CALL, PK_TOOLCALL_MAY_THINK, PK_TOOLCALL_THINKING | PK_TOOLCALL_ONE_CALL};

static void test_random(void) {
    int total = 0, good = 0;
    char *text = malloc(1 << 16);
    for (int fi = 0; fi < N_FORMATS; fi++) {
        for (int ci = 0; ci < 3; ci++) {
            const char *choice = ci == 0 ? "required" : ci == 1 ? "search" : "file.write";
            for (int fl = 0; fl < 4; fl++) {
                int flags = flag_sets[fl];
                pk_error err = {0};
                char *gbnf = NULL;
                pk_grammar *g = NULL, *pub = NULL;
                if (pk_toolcall_grammar(formats[fi], tools, sizeof tools - 1, choice, flags, &gbnf, &err) ||
                    pk_grammar_compile(gbnf, strlen(gbnf), NULL, NULL, &g, &err) ||
                    pk_grammar_new(NULL, gbnf, NULL, &pub, &err)) {
                    TEST_CHECK(0, "%s %s %d: %s\n%s", formats[fi], choice, flags, err.msg, gbnf ? gbnf : "");
                    free(gbnf);
                    pk_grammar_free(g);
                    continue;
                }
                for (int k = 0; k < 12; k++) {
                    size_t target = 20 + rnd() % 600;
                    long n = random_sentence(g, target, text, 1 << 16);
                    total++;
                    if (n < 0) { TEST_CHECK(0, "%s %s %d: the walk got stuck", formats[fi], choice, flags); continue; }
                    int chk = pk_grammar_check(pub, text, (size_t)n);
                    const char *why = chk == 1 ? read_back(formats[fi], choice, flags, text, (size_t)n) : "not complete";
                    TEST_CHECK(!why[0], "%s %s flags %d: %s:\n%s", formats[fi], choice, flags, why, text);
                    good += !why[0];
                }
                pk_grammar_free(g);
                pk_grammar_free(pub);
                free(gbnf);
            }
        }
    }
    free(text);
    fprintf(stderr, "test_toolcall_grammar: %d of %d random sentences read back as valid calls\n", good, total);
    TEST_CHECK(total >= 200 && good == total, "%d of %d", good, total);
}

/* ---- generation with the model ------------------------------------------------------ */

static void test_model(void) {
    pk_error err = {0};
    pk_model *m = NULL;
    pk_context *ctx = NULL;
    if (pk_model_load("models/kjv-moe-f16.gguf", &m, &err)) {
        TEST_CHECK(0, "%s (run from the project root)", err.msg);
        return;
    }
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = 1;
    if (pk_context_new(m, &cp, &ctx, &err)) { TEST_CHECK(0, "%s", err.msg); pk_model_free(m); return; }
    int32_t prompt[64];
    const char *p = "And the LORD said unto Moses,";
    int np = pk_model_tokenize(m, p, strlen(p), prompt, 64, 1, 0);
    static const float temps[] = {0.0f, 0.8f, 1.2f};
    int runs = 0, good = 0;
    char text[8192];
    for (int fi = 0; fi < N_FORMATS; fi++) {
        for (int ci = 0; ci < 2; ci++) {
            const char *choice = ci ? "get_weather" : "required";
            for (int fl = 0; fl < 4; fl++) {
                int flags = flag_sets[fl];
                char *gbnf = NULL;
                pk_grammar *g = NULL;
                if (pk_toolcall_grammar(formats[fi], tools, sizeof tools - 1, choice, flags, &gbnf, &err) ||
                    pk_grammar_new(m, gbnf, NULL, &g, &err)) {
                    TEST_CHECK(0, "%s: %s", formats[fi], err.msg);
                    free(gbnf);
                    continue;
                }
                for (int k = 0; k < 5; k++) {
                    pk_sampler_params sp = pk_sampler_default_params();
                    sp.temperature = temps[k % 3];
                    sp.seed = (uint64_t)(100 * fi + 10 * fl + k);
                    sp.top_k = 0;
                    sp.top_p = 1.0f;
                    sp.min_p = 0.0f;
                    pk_sampler *s = pk_sampler_new(&sp, pk_model_n_vocab(m), &err);
                    pk_sampler_set_grammar(s, g, &err);
                    int max_tokens = 256;
                    pk_sampler_grammar_limit(s, max_tokens);
                    pk_context_truncate(ctx, 0);
                    pk_decode(ctx, prompt, np, &err);
                    size_t len = 0;
                    for (int t = 0; t < max_tokens; t++) {
                        int32_t id = pk_sampler_sample(s, pk_context_logits(ctx));
                        if (pk_model_is_eog(m, id)) break;
                        char piece[256];
                        int pl = pk_model_token_piece(m, id, piece, sizeof piece);
                        if (pl > 0 && len + (size_t)pl < sizeof text) { memcpy(text + len, piece, (size_t)pl); len += (size_t)pl; }
                        pk_sampler_accept(s, id);
                        if (pk_decode(ctx, &id, 1, &err)) break;
                    }
                    text[len] = 0;
                    int st = pk_sampler_grammar_status(s, NULL);
                    pk_sampler_free(s);
                    const char *why = st == PK_GRAMMAR_CAN_END || st == PK_GRAMMAR_MUST_END
                                    ? read_back(formats[fi], choice, flags, text, len) : "grammar not complete";
                    runs++;
                    good += !why[0];
                    TEST_CHECK(!why[0], "model, %s %s flags %d temp %.1f: %s:\n%s", formats[fi], choice, flags,
                               (double)temps[k % 3], why, text);
                }
                pk_grammar_free(g);
                free(gbnf);
            }
        }
    }
    fprintf(stderr, "test_toolcall_grammar: %d of %d generations with the model read back as valid calls\n", good, runs);
    TEST_CHECK(runs >= 200 && good == runs, "%d of %d", good, runs);
    pk_context_free(ctx);
    pk_model_free(m);
}

/* ---- a marker that is one token ----------------------------------------------------- */

/* A vocabulary of the 256 bytes, <tool_call> and </tool_call> as tokens of
 * their own (user-defined: their piece is their text), a control token
 * that renders as nothing, and an end of generation. */
static const char *const extra[] = {"<tool_call>", "</tool_call>", "", ""};
static int v_piece(const void *ctx, int32_t id, char *buf, int cap) {
    (void)ctx;
    const char *s;
    char b;
    int n;
    if (id < 256) { b = (char)id; s = &b; n = 1; }
    else { s = extra[id - 256]; n = (int)strlen(s); }
    if (n <= cap) memcpy(buf, s, (size_t)n);
    return n;
}
static int v_eog(const void *ctx, int32_t id) { (void)ctx; return id == 259; }

static void test_special_tokens(void) {
    pk_error err = {0};
    pk_vtrie *v = NULL;
    char *gbnf = NULL;
    pk_grammar *g = NULL;
    if (pk_vtrie_build_fn(260, v_piece, v_eog, NULL, &v, &err) ||
        pk_toolcall_grammar("hermes", tools, sizeof tools - 1, "no_args", 0, &gbnf, &err) ||
        pk_grammar_compile(gbnf, strlen(gbnf), NULL, v, &g, &err)) {
        TEST_CHECK(0, "%s", err.msg);
    } else {
        uint32_t st = pk_grammar_start(g);
        const uint64_t *mask = pk_grammar_mask(g, st);
        TEST_COND("<tool_call> as one token is allowed", mask && (mask[256 / 64] >> (256 % 64) & 1));
        TEST_COND("so is its first byte", mask && (mask['<' / 64] >> ('<' % 64) & 1));
        TEST_COND("a token without text is not", mask && !(mask[258 / 64] >> (258 % 64) & 1));
        st = pk_grammar_advance_token(g, st, 256);
        const char *rest = "\n{\"name\": \"no_args\", \"arguments\": {}}\n";
        st = pk_grammar_advance(g, st, rest, strlen(rest));
        TEST_COND("the call goes on after the token", st != 0);
        mask = st ? pk_grammar_mask(g, st) : NULL;
        TEST_COND("</tool_call> as one token closes it", mask && (mask[257 / 64] >> (257 % 64) & 1) &&
                  pk_grammar_can_end(g, pk_grammar_advance_token(g, st, 257)));
    }
    pk_grammar_free(g);
    free(gbnf);
    pk_vtrie_free(v);
}

/* ---- what the grammar refuses ------------------------------------------------------ */

/* "+text" complete, "-text" refused, under the grammar of fmt, choice
 * for the tools tl. */
static void expect_texts_in(const char *tl, const char *fmt, const char *choice, const char *const *cases) {
    pk_error err = {0};
    char *gbnf = NULL;
    pk_grammar *g = NULL;
    if (pk_toolcall_grammar(fmt, tl, strlen(tl), choice, PK_TOOLCALL_ONE_CALL, &gbnf, &err) ||
        pk_grammar_new(NULL, gbnf, NULL, &g, &err)) {
        TEST_CHECK(0, "%s: %s", fmt, err.msg);
    } else {
        for (int i = 0; cases[i]; i++) {
            int want = cases[i][0] == '+' ? 1 : -1, got = pk_grammar_check(g, cases[i] + 1, strlen(cases[i] + 1));
            TEST_CHECK(got == want, "%s: %d for %s", fmt, got, cases[i]);
        }
    }
    pk_grammar_free(g);
    free(gbnf);
}

static void expect_texts(const char *fmt, const char *choice, const char *const *cases) {
    expect_texts_in(tools, fmt, choice, cases);
}

static void test_texts(void) {
#define QW(v) "<tool_call>\n<function=get_weather>\n<parameter=city>\n" v "\n</parameter>\n</function>\n</tool_call>"
    static const char *const qwen[] = {
        "+" QW("Paris"), "+" QW(""), "+" QW("nullx"), "+" QW("nul"), "+" QW("a</b>"), "+" QW("\n two lines \n"),
        "-" QW("null"), "-" QW(" NULL\n"), "-" QW("a</parameter>b"), "-" QW("a</tool_call>"), "-" QW("a\x01"),
        "+<tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n"
        "<parameter=days>\n14\n</parameter>\n</function>\n</tool_call>",
        "-<tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n<parameter=unit>\nkelvin\n</parameter>\n"
        "</function>\n</tool_call>",
        "-<tool_call>\n<function=get_weather>\n<parameter=city>\nX\n</parameter>\n<parameter=days>\n15\n</parameter>\n"
        "</function>\n</tool_call>",
        "-<tool_call>\n<function=get_weather>\n</function>\n</tool_call>",   /* city is required */
        "-<tool_call>\n<function=search>\n<parameter=query>\nX\n</parameter>\n</function>\n</tool_call>",
        NULL};
    expect_texts("qwen3coder", "get_weather", qwen);
    static const char *const harmony[] = {
        "+<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"\\u003c|call|>\"}",
        "-<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"<|call|>\"}",
        NULL};
    expect_texts("harmony", "get_weather", harmony);
    static const char *const hermes[] = {
        "+<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"<b>\"}}\n</tool_call>",
        "-<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
        NULL};
    expect_texts("hermes", "get_weather", hermes);
#define G4W(body) "<|tool_call>call:get_weather{" body "}<tool_call|>"
#define Q "<|\"|>"
    static const char *const gemma[] = {
        "+" G4W("city:" Q "Paris" Q), "+" G4W("city:" Q Q), "+" G4W("city:" Q "x<" Q),
        "+" G4W("city:" Q "a \"quoted\" {x}, [y]: <|'|> <tool_call|> <|tool_call>\nnaïve" Q ",days:14,unit:" Q "celsius" Q),
        "-" G4W("city:" Q "a<|channel>b" Q), "-" G4W("city:" Q "a<channel|>b" Q),
        "-" G4W("unit:" Q "celsius" Q ",city:" Q "X" Q),   /* not in the template's (dictsort's) order */
        "-" G4W("city:" Q "X" Q ",days:15"), "-" G4W("city:" Q "X" Q ",unit:" Q "kelvin" Q),
        "-" G4W("days:3"),                                  /* city is required */
        "-" G4W("city:\"Paris\""), "-" G4W("city: " Q "X" Q), "-" G4W("\"city\":" Q "X" Q),
        NULL};
    expect_texts("gemma4", "get_weather", gemma);
    /* keys that cannot be bare go between <|"|>; dictsort's order; a bounded string has no '<' */
    static const char keyed[] = "[{\"name\": \"k\", \"parameters\": {\"type\": \"object\", \"properties\": {"
                                "\"a:b\": {\"type\": \"integer\"}, \"Zed\": {\"type\": \"boolean\"}, "
                                "\"alpha\": {\"type\": \"string\", \"maxLength\": 3}, \"n\": {\"type\": \"null\"}}, "
                                "\"required\": [\"a:b\", \"Zed\", \"alpha\"]}}]";
#define G4K(body) "<|tool_call>call:k{" body "}<tool_call|>"
    static const char *const gkeys[] = {
        "+" G4K(Q "a:b" Q ":1,alpha:" Q "ab" Q ",Zed:true"), "+" G4K(Q "a:b" Q ":-3,alpha:" Q Q ",n:null,Zed:false"),
        "-" G4K("a:b:1,alpha:" Q "ab" Q ",Zed:true"), "-" G4K(Q "a:b" Q ":1,alpha:" Q "a<" Q ",Zed:true"),
        "-" G4K(Q "a:b" Q ":1,alpha:" Q "abcd" Q ",Zed:true"), "-" G4K(Q "a:b" Q ":1,Zed:true,alpha:" Q "ab" Q),
        NULL};
    expect_texts_in(keyed, "gemma4", "k", gkeys);
#undef G4K
#undef G4W
#undef Q
#undef QW
}

/* ---- bad input ----------------------------------------------------------------------- */

static void expect_err(const char *fmt, const char *tl, const char *choice, int flags, const char *want) {
    pk_error err = {0};
    char *gbnf = (char *)1;
    int rc = pk_toolcall_grammar(fmt, tl, tl ? strlen(tl) : 0, choice, flags, &gbnf, &err);
    TEST_CHECK(rc == PK_ERR_ARG && !gbnf && strstr(err.msg, want) && !strchr(err.msg, '\n'),
               "%s / %s: rc %d, '%s' (want '%s')", tl ? tl : "NULL", choice ? choice : "NULL", rc, err.msg, want);
}

static void test_errors(void) {
    expect_err("hermes", "{\"name\": \"f\"}", "required", 0, "JSON array");
    expect_err("hermes", "[1,", "required", 0, "not JSON");
    expect_err("hermes", "[{\"type\": \"function\", \"function\": {\"parameters\": {}}}]", "required", 0,
               "tools[0]: a function without a name");
    expect_err("hermes", "[{\"name\": \"a b\"}]", "required", 0, "cannot be written");
    expect_err("hermes", "[{\"name\": \"f\"}]", "g", 0, "'g', which is not among the tools");
    expect_err("hermes", "[]", "required", 0, "no tools");
    expect_err("hermes", "[{\"name\": \"f\"}]", "auto", 0, "tool_choice");
    expect_err("hermes", "[{\"name\": \"f\"}]", NULL, 0, "tool_choice");
    expect_err("xml", "[{\"name\": \"f\"}]", "required", 0, "unknown tool-call format 'xml'");
    expect_err("hermes", NULL, "required", 0, "tools: none given");
    const char *pat = "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": "
                      "{\"id\": {\"type\": \"integer\", \"allOf\": []}}}}]";
    expect_err("hermes", pat, "required", 0, "function 'f': json_schema: unknown keyword 'allOf' at /properties/id");
    expect_err("qwen3coder", pat, "f", 0, "parameter 'id': json_schema: unknown keyword 'allOf'");
    const char *len = "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": "
                      "{\"s\": {\"type\": \"string\", \"maxLength\": 3}}}}]";
    expect_err("qwen3coder", len, "f", 0, "'maxLength' is not supported for raw string values");
    pk_error err = {0};
    char *gbnf = NULL;
    TEST_COND("lenient: maxLength of a raw string ignored",
              pk_toolcall_grammar("qwen3coder", len, strlen(len), "f", PK_SCHEMA_LENIENT, &gbnf, &err) == PK_OK && gbnf);
    free(gbnf);
    expect_err("qwen3coder", "[{\"name\": \"f\", \"parameters\": {\"properties\": {\"a>b\": {}}}}]", "f", 0,
               "parameter name 'a>b'");
    expect_err("hermes", "[{\"name\": \"f\", \"parameters\": {\"required\": [\"x\"]}}]", "f", 0, "json_schema");
    /* gemma4: the arguments are an object, written in its syntax */
    expect_err("gemma4", "[{\"name\": \"f\", \"parameters\": {\"type\": \"string\"}}]", "f", 0, "must be an object schema");
    expect_err("gemma4", "[{\"name\": \"f\", \"parameters\": {\"anyOf\": [{\"type\": \"object\"}]}}]", "f", 0,
               "'anyOf' at the top of 'parameters'");
    expect_err("gemma4", "[{\"name\": \"f{\"}]", "required", 0, "cannot be written");
    expect_err("gemma4", "[{\"name\": \"f\", \"parameters\": {\"properties\": {\"s\": {\"enum\": [\"a<|\\\"|>b\"]}}}}]", "f", 0,
               "no value of 'enum' at /properties/s can be written");
    expect_err("gemma4", "[{\"name\": \"f\", \"parameters\": {\"properties\": {\"s\": {\"const\": \"<|channel>\"}}}}]", "f", 0,
               "'const' at /properties/s cannot be written");
    expect_err("gemma4", "[{\"name\": \"f\", \"parameters\": {\"properties\": {\"a<b\": {}}}}]", "f", 0,
               "property name 'a<b'");
}

int main(void) {
    json_error_t je;
    tools_j = json_loads(tools, 0, &je);
    if (!tools_j) { fprintf(stderr, "tools: %s\n", je.text); return 1; }
    test_errors();
    test_special_tokens();
    test_texts();
    test_random();
    test_model();
    json_decref(tools_j);
    return TEST_REPORT();
}
