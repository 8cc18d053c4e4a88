/* test_toolcall.c - the tool-call parser (src/text/toolcall.c): for every
 * format, messages with their expected content and calls (name, arguments),
 * parsed whole, cut in two at every byte, byte by byte and in random pieces:
 * the same result each time, and the events reassembled (content deltas,
 * starts, argument deltas, ends) equal to it; every prefix of every message
 * (a generation cut off anywhere) parsed whole and byte by byte alike;
 * malformed input (unclosed tags, bad JSON, missing names, nested tags,
 * garbage) giving the output the cases state; parameter types from a tools
 * schema; the bounds (16 KiB candidates, held white space, 1024 calls);
 * detection from template text; tool_choice checks; bad arguments. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"
#include "testhelp.h"

#define MAXC 8
#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define DS_SEP "<｜tool▁sep｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"

/* ---- running the parser, checking its events ----------------------------------- */

typedef struct result {
    char *content;
    size_t clen;
    int n;
    char *name[MAXC], *args[MAXC], id[MAXC][32];
    int closed[MAXC];
    char err[1024];  /* an event inconsistency, "" if none */
} result;

static void result_free(result *r) {
    free(r->content);
    for (int i = 0; i < r->n && i < MAXC; i++) { free(r->name[i]); free(r->args[i]); }
    memset(r, 0, sizeof *r);
}

static void append(char **s, size_t *n, const char *t, size_t k) {
    *s = realloc(*s, *n + k + 1);
    memcpy(*s + *n, t, k);
    *n += k;
    (*s)[*n] = 0;
}

static int utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

/* Parse text[0..n) fed in the pieces cuts[0..ncut) say (ascending offsets;
 * final with the last piece). With valid UTF-8 input every delta must be
 * valid UTF-8 on its own. */
static result run(const char *fmt, const char *tools, const char *text, size_t n, const size_t *cuts, int ncut) {
    result r = {0};
    pk_toolcall *tc;
    pk_error err = {0};
    if (pk_toolcall_new(fmt, 42, &tc, &err)) { snprintf(r.err, sizeof r.err, "new: %.500s", err.msg); return r; }
    if (tools && pk_toolcall_set_tools(tc, tools, strlen(tools), &err)) {
        snprintf(r.err, sizeof r.err, "set_tools: %.500s", err.msg);
        pk_toolcall_free(tc);
        return r;
    }
    int valid = utf8_valid(text, n);
    char *ev_content = NULL, *ev_args[MAXC] = {0}, *ev_name[MAXC] = {0};
    size_t ev_clen = 0, ev_alen[MAXC] = {0};
    int started = 0, ended[MAXC] = {0};
    size_t prev = 0;
    for (int k = 0; k <= ncut; k++) {
        size_t end = k < ncut ? cuts[k] : n;
        if (pk_toolcall_feed(tc, text + prev, end - prev, k == ncut)) {
            snprintf(r.err, sizeof r.err, "feed failed");
            break;
        }
        prev = end;
        pk_toolcall_event ev;
        while (pk_toolcall_next(tc, &ev)) {
            if (r.err[0]) continue;
            int i = ev.index;
            if (ev.kind != PK_TOOLCALL_CONTENT && (i < 0 || i >= MAXC || i >= started + (ev.kind == PK_TOOLCALL_START)))
                snprintf(r.err, sizeof r.err, "event %d for call %d, %d started", ev.kind, i, started);
            else if ((ev.kind == PK_TOOLCALL_CONTENT || ev.kind == PK_TOOLCALL_ARGS) && valid && !utf8_valid(ev.text, ev.len))
                snprintf(r.err, sizeof r.err, "a delta of kind %d is not valid UTF-8 on its own", ev.kind);
            else if (ev.kind == PK_TOOLCALL_CONTENT) append(&ev_content, &ev_clen, ev.text, ev.len);
            else if (ev.kind == PK_TOOLCALL_START) {
                if (i != started) snprintf(r.err, sizeof r.err, "call %d starts as number %d", started, i);
                else { ev_name[i] = strndup(ev.text, ev.len); append(&ev_args[i], &ev_alen[i], "", 0); started++; }
            } else if (ended[i]) snprintf(r.err, sizeof r.err, "event %d for call %d after its end", ev.kind, i);
            else if (ev.kind == PK_TOOLCALL_ARGS) append(&ev_args[i], &ev_alen[i], ev.text, ev.len);
            else ended[i] = 1;
        }
    }
    size_t cl;
    const char *c = pk_toolcall_content(tc, &cl);
    r.content = strndup(c, cl);
    r.clen = cl;
    r.n = pk_toolcall_count(tc);
    for (int i = 0; i < r.n && i < MAXC; i++) {
        pk_toolcall_call call;
        if (pk_toolcall_get(tc, i, &call)) { snprintf(r.err, sizeof r.err, "get %d failed", i); break; }
        r.name[i] = strdup(call.name);
        r.args[i] = strndup(call.arguments, call.arguments_len);
        snprintf(r.id[i], sizeof r.id[i], "%s", call.id);
        r.closed[i] = call.closed;
        if (r.err[0]) continue;
        if (!ended[i]) snprintf(r.err, sizeof r.err, "call %d never ended", i);
        else if (strcmp(ev_name[i], call.name)) snprintf(r.err, sizeof r.err, "call %d: START named it %s", i, ev_name[i]);
        else if (ev_alen[i] != call.arguments_len || memcmp(ev_args[i], call.arguments, ev_alen[i]))
            snprintf(r.err, sizeof r.err, "call %d: the argument deltas give [%s], the call [%s]", i, ev_args[i], call.arguments);
    }
    if (!r.err[0] && started != r.n) snprintf(r.err, sizeof r.err, "%d starts, %d calls", started, r.n);
    if (!r.err[0] && (ev_clen != cl || (cl && memcmp(ev_content, c, cl))))
        snprintf(r.err, sizeof r.err, "the content deltas give [%s], the content [%s]", ev_content ? ev_content : "", c);
    free(ev_content);
    for (int i = 0; i < MAXC; i++) { free(ev_args[i]); free(ev_name[i]); }
    pk_toolcall_free(tc);
    return r;
}

static int same(const result *a, const result *b) {
    if (a->clen != b->clen || memcmp(a->content, b->content, a->clen) || a->n != b->n) return 0;
    for (int i = 0; i < a->n && i < MAXC; i++)
        if (strcmp(a->name[i], b->name[i]) || strcmp(a->args[i], b->args[i]) || strcmp(a->id[i], b->id[i]) ||
            a->closed[i] != b->closed[i])
            return 0;
    return 1;
}

static void print_result(const char *what, const result *r) {
    fprintf(stderr, "  %s: content [%s], %d calls", what, r->content, r->n);
    for (int i = 0; i < r->n && i < MAXC; i++) fprintf(stderr, " %s(%s)%s", r->name[i], r->args[i], r->closed[i] ? "" : "[cut]");
    fprintf(stderr, "%s%s\n", r->err[0] ? " ERROR " : "", r->err);
}

static unsigned rng = 12345;
static unsigned rnd(void) { rng = rng * 1103515245u + 12345u; return rng >> 8; }

/* text[0..n) whole, then in two at every byte (all), byte by byte and in
 * random pieces: each the same as whole, events consistent. Returns whole's
 * result (free it). */
static result check_splits(const char *label, const char *fmt, const char *tools, const char *text, size_t n, int all) {
    result whole = run(fmt, tools, text, n, NULL, 0);
    TEST_CHECK(!whole.err[0], "%s: whole: %s", label, whole.err);
    size_t *cuts = malloc((n + 1) * sizeof *cuts);
    int bad = 0;
    for (size_t c = 0; all && c <= n && !bad; c++) {
        result r = run(fmt, tools, text, n, &c, 1);
        if (r.err[0] || !same(&r, &whole)) {
            TEST_CHECK(0, "%s: cut at %zu differs from whole", label, c);
            print_result("whole", &whole);
            print_result("cut", &r);
            bad = 1;
        }
        result_free(&r);
    }
    for (size_t c = 0; c + 1 < n; c++) cuts[c] = c + 1;
    result bytes = run(fmt, tools, text, n, cuts, n ? (int)n - 1 : 0);
    if (!bad && (bytes.err[0] || !same(&bytes, &whole))) {
        TEST_CHECK(0, "%s: byte by byte differs from whole", label);
        print_result("whole", &whole);
        print_result("bytes", &bytes);
        bad = 1;
    }
    result_free(&bytes);
    for (int t = 0; t < 4 && all && !bad; t++) {
        int k = 0;
        for (size_t c = 1 + rnd() % 7; c < n; c += 1 + rnd() % 7) cuts[k++] = c;
        result r = run(fmt, tools, text, n, cuts, k);
        if (r.err[0] || !same(&r, &whole)) {
            TEST_CHECK(0, "%s: random pieces (%d) differ from whole", label, t);
            print_result("whole", &whole);
            print_result("pieces", &r);
            bad = 1;
        }
        result_free(&r);
    }
    free(cuts);
    TEST_COND(label, !bad);
    return whole;
}

/* ---- the cases ---------------------------------------------------------------- */

typedef struct tcase {
    const char *fmt, *text, *content;
    int n;
    const char *calls[3][2];   /* name, arguments */
    const char *closed;        /* '1'/'0' per call, NULL: all '1' */
    const char *tools;
} tcase;

#define XML_CALL(name, body) "<tool_call>\n<function=" name ">\n" body "</function>\n</tool_call>"
#define XML_PARAM(name, value) "<parameter=" name ">\n" value "\n</parameter>\n"
#define G4(name, body) "<|tool_call>call:" name "{" body "}<tool_call|>"
#define Q "<|\"|>"

static const char *const schema =
    "[{\"type\": \"function\", \"function\": {\"name\": \"t\", \"parameters\": {\"type\": \"object\", \"properties\": {"
    "\"id\": {\"type\": \"string\"}, \"count\": {\"type\": \"integer\"}, \"flag\": {\"type\": \"boolean\"},"
    "\"opts\": {\"type\": \"object\"}, \"either\": {\"type\": [\"integer\", \"string\"]}}}}},"
    "{\"name\": \"u\", \"input_schema\": {\"properties\": {\"s\": {\"type\": \"string\"}}}}]";

static const tcase cases[] = {
    /* qwen3coder */
    {.fmt = "qwen3coder", .text = XML_CALL("get_weather", XML_PARAM("location", "Paris") XML_PARAM("days", "3")),
     .content = "", .n = 1, .calls = {{"get_weather", "{\"location\": \"Paris\", \"days\": 3}"}}},
    {.fmt = "qwen3coder", .text = "Let me check.\n\n" XML_CALL("f", XML_PARAM("q", "naïve 日本")),
     .content = "Let me check.", .n = 1, .calls = {{"f", "{\"q\": \"naïve 日本\"}"}}},
    {.fmt = "qwen3coder", .text = "Two.\n" XML_CALL("a", XML_PARAM("x", "1")) "\n" XML_CALL("b", "") "\nDone. ",
     .content = "Two.\nDone. ", .n = 2, .calls = {{"a", "{\"x\": 1}"}, {"b", "{}"}}},
    {.fmt = "qwen3coder", .text = XML_CALL("w", XML_PARAM("code", "print(\"hi\")\n\tx = 'a\\b'\n\nend")),
     .content = "", .n = 1, .calls = {{"w", "{\"code\": \"print(\\\"hi\\\")\\n\\tx = 'a\\\\b'\\n\\nend\"}"}}},
    /* values: JSON when the whole value is one (numbers as JSON writes them, lower-case literals), else strings */
    {.fmt = "qwen3coder",
     .text = XML_CALL("v", XML_PARAM("a", "-1.5e3") XML_PARAM("b", "true") XML_PARAM("c", "null")
                      XML_PARAM("d", "{\"k\": [1, 2]}") XML_PARAM("e", "[1,2") XML_PARAM("f", "3 apples")
                      XML_PARAM("g", "01") XML_PARAM("h", "-") XML_PARAM("i", "True") XML_PARAM("j", "")
                      XML_PARAM("k", " 42 ") XML_PARAM("l", "[]")),
     .content = "", .n = 1,
     .calls = {{"v", "{\"a\": -1.5e3, \"b\": true, \"c\": null, \"d\": {\"k\": [1, 2]}, \"e\": \"[1,2\", "
                     "\"f\": \"3 apples\", \"g\": \"01\", \"h\": \"-\", \"i\": \"True\", \"j\": \"\", "
                     "\"k\": 42, \"l\": []}"}}},
    /* the same with the tools' schema: string, integer, boolean, object, a union, no schema */
    {.fmt = "qwen3coder",
     .text = XML_CALL("t", XML_PARAM("id", "123") XML_PARAM("count", "7") XML_PARAM("flag", "True")
                      XML_PARAM("opts", "{\"x\":1}") XML_PARAM("count", "seven") XML_PARAM("id", "null")
                      XML_PARAM("either", "12") XML_PARAM("other", "false"))
             XML_CALL("u", XML_PARAM("s", "{\"a\":1}")),
     .content = "", .n = 2,
     .calls = {{"t", "{\"id\": \"123\", \"count\": 7, \"flag\": true, \"opts\": {\"x\":1}, "
                     "\"count\": \"seven\", \"id\": null, \"either\": 12, \"other\": false}"},
               {"u", "{\"s\": \"{\\\"a\\\":1}\"}"}},
     .tools = schema},
    {.fmt = "qwen3coder", .text = "<function=f>\n<parameter=a>\n1\n</parameter>\n</function>",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    {.fmt = "qwen3coder", .text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    {.fmt = "qwen3coder", .text = "<tool_call>\n<function=f>\n<parameter=a>\nhel",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": \"hel\"}"}}, .closed = "0"},
    {.fmt = "qwen3coder", .text = "<tool_call>\n<function=f>\n<parameter=a>\n12\n</param",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 12}"}}, .closed = "0"},
    {.fmt = "qwen3coder", .text = "<tool_call>\n<function=f>\n<param",
     .content = "", .n = 1, .calls = {{"f", "{}"}}, .closed = "0"},
    {.fmt = "qwen3coder", .text = "<tool_call>\n<function=get_wea",
     .content = "<tool_call>\n<function=get_wea", .n = 0},
    {.fmt = "qwen3coder", .text = "<tool_call>", .content = "<tool_call>", .n = 0},
    {.fmt = "qwen3coder", .text = "<tool_call>\n<function=>\n</function></tool_call>",
     .content = "<tool_call>\n<function=>\n</function></tool_call>", .n = 0},
    {.fmt = "qwen3coder", .text = "<tool_call><tool_call>\n<function=f>\n</function></tool_call>",
     .content = "<tool_call>", .n = 1, .calls = {{"f", "{}"}}},
    {.fmt = "qwen3coder", .text = "<tool_call>\n<function=f>\nblah\n</function>\n</tool_call>",
     .content = "blah\n</function>\n</tool_call>", .n = 1, .calls = {{"f", "{}"}}, .closed = "0"},
    {.fmt = "qwen3coder", .text = XML_CALL("f", XML_PARAM("a", "x<tool_call>y</para") XML_PARAM("b", "c")),
     .content = "", .n = 1, .calls = {{"f", "{\"a\": \"x<tool_call>y</para\", \"b\": \"c\"}"}}},
    {.fmt = "qwen3coder", .text = "a < b and <tool", .content = "a < b and <tool", .n = 0},
    {.fmt = "qwen3coder", .text = "<tool_call>\n<function=f\nx>\n</function>",
     .content = "<tool_call>\n<function=f\nx>\n</function>", .n = 0},
    {.fmt = "qwen3coder", .text = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    /* hermes */
    {.fmt = "hermes", .text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>",
     .content = "", .n = 1, .calls = {{"get_weather", "{\"location\": \"Paris\"}"}}},
    {.fmt = "hermes", .text = "Hm.\n<tool_call>\n{\"arguments\": {\"a\": [1, \"}\"]}, \"name\": \"f\"}\n</tool_call>",
     .content = "Hm.", .n = 1, .calls = {{"f", "{\"a\": [1, \"}\"]}"}}},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    {.fmt = "hermes", .text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": oops}}\n</tool_call>",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": oops}"}}},
    {.fmt = "hermes", .text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"Par",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": \"Par"}}, .closed = "0"},
    {.fmt = "hermes", .text = "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
     .content = "<tool_call>\n{\"arguments\": {}}\n</tool_call>", .n = 0},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": \"f\"}</tool_call>",
     .content = "", .n = 1, .calls = {{"f", "{}"}}},
    {.fmt = "hermes", .text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\nThat is all.",
     .content = "\nThat is all.", .n = 1, .calls = {{"f", "{}"}}},
    {.fmt = "hermes", .text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": "
     "{\"text\": \"a</tool_call>b\\\"c\"}}\n</tool_call>", .content = "", .n = 2, .calls = {{"a", "{\"x\": 1}"}, {"b", "{\"text\": \"a</tool_call>b\\\"c\"}"}}},
    {.fmt = "hermes", .text = "<tool_call>not json</tool_call>",
     .content = "<tool_call>not json</tool_call>", .n = 0},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}} x</tool_call>",
     .content = " x</tool_call>", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}</tool_call>",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1} \"x\": [}</tool_call>z",
     .content = "z", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": 5, \"arguments\": {}}</tool_call>",
     .content = "<tool_call>{\"name\": 5, \"arguments\": {}}</tool_call>", .n = 0},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": \"f\", \"arguments\": 7}</tool_call>",
     .content = "", .n = 1, .calls = {{"f", "7"}}},
    {.fmt = "hermes", .text = "<tool_call>\n<function=g>\n<parameter=p>\nv\n</parameter>\n</function>\n</tool_call>",
     .content = "", .n = 1, .calls = {{"g", "{\"p\": \"v\"}"}}},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"a\\\": 1",
     .content = "", .n = 1, .calls = {{"f", "\"{\\\"a\\\": 1"}}, .closed = "0"},
    {.fmt = "hermes", .text = "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\", \"id\": 3, \"x\": [\"]\"]}\n</tool_call>",
     .content = "", .n = 1, .calls = {{"f", "{}"}}},
    /* harmony */
    {.fmt = "harmony", .text = "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
     "to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}<|call|>", .content = "<|channel|>analysis<|message|>Need the weather.<|end|>", .n = 1, .calls = {{"get_weather", "{\"location\":\"Paris\"}"}}},
    {.fmt = "harmony", .text = "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>",
     .content = "", .n = 1, .calls = {{"f", "{}"}}},
    {.fmt = "harmony", .text = "<|channel|>final<|message|>Hi <|start|> there<|return|>",
     .content = "<|channel|>final<|message|>Hi <|start|> there<|return|>", .n = 0},
    {.fmt = "harmony", .text = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 1",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1"}}, .closed = "0"},
    {.fmt = "harmony", .text = "<|channel|>commentary to=functions.f <|constr",
     .content = "<|channel|>commentary to=functions.f <|constr", .n = 0},
    {.fmt = "harmony", .text = "<|channel|>analysis to=browser.search code<|message|> {\"query\": \"x\"} <|call|>",
     .content = "", .n = 1, .calls = {{"browser.search", "{\"query\": \"x\"}"}}},
    {.fmt = "harmony", .text = "<|start|>functions.f to=assistant<|channel|>commentary<|message|>\"ok\"<|end|>",
     .content = "<|start|>functions.f to=assistant<|channel|>commentary<|message|>\"ok\"<|end|>", .n = 0},
    {.fmt = "harmony", .text = "<|channel|>commentary to=functions.a<|message|>{}<|call|><|channel|>commentary to=functions.b<|message|>[1]<|start|>",
     .content = "<|start|>", .n = 2, .calls = {{"a", "{}"}, {"b", "[1]"}}, .closed = "10"},
    {.fmt = "harmony", .text = " to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}<|call|>",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    {.fmt = "harmony", .text = " tomorrow to=x<|message|>", .content = " tomorrow to=x<|message|>", .n = 0},
    /* deepseek */
    {.fmt = "deepseek", .text = "Sure." DS_CALLS_BEGIN DS_CALL_BEGIN "get_weather" DS_SEP "{\"location\": \"Paris\"}" DS_CALL_END DS_CALL_BEGIN
     "get_time" DS_SEP "{}" DS_CALL_END DS_CALLS_END, .content = "Sure.", .n = 2, .calls = {{"get_weather", "{\"location\": \"Paris\"}"}, {"get_time", "{}"}}},
    {.fmt = "deepseek", .text = DS_CALLS_BEGIN DS_CALL_BEGIN "function" DS_SEP "get_weather\n```json\n{\"location\": \"Paris\"}\n```" DS_CALL_END DS_CALLS_END,
     .content = "", .n = 1, .calls = {{"get_weather", "{\"location\": \"Paris\"}"}}},
    {.fmt = "deepseek", .text = DS_CALLS_BEGIN DS_CALL_BEGIN "f" DS_SEP "{\"a\": ",
     .content = "", .n = 1, .calls = {{"f", "{\"a\":"}}, .closed = "0"},
    {.fmt = "deepseek", .text = DS_CALL_BEGIN DS_SEP "{}" DS_CALL_END,
     .content = DS_CALL_BEGIN DS_SEP "{}" DS_CALL_END, .n = 0},
    {.fmt = "deepseek", .text = DS_CALL_BEGIN "f" DS_SEP "not json" DS_CALL_END "\nafter",
     .content = "\nafter", .n = 1, .calls = {{"f", "not json"}}},
    {.fmt = "deepseek", .text = DS_CALLS_BEGIN "oops", .content = DS_CALLS_BEGIN "oops", .n = 0},
    {.fmt = "deepseek", .text = DS_CALL_BEGIN "function" DS_SEP "{\"x\": 1}" DS_CALL_END,
     .content = "", .n = 1, .calls = {{"function", "{\"x\": 1}"}}},
    {.fmt = "deepseek", .text = DS_CALL_BEGIN "function" DS_SEP "f\n```json-with-16-chr\n{\"a\": 1}\n```" DS_CALL_END,
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1}"}}},
    {.fmt = "deepseek", .text = DS_CALL_BEGIN "function" DS_SEP "f\n```json-with-17-char\n{\"a\": 1}\n```" DS_CALL_END,
     .content = "", .n = 1, .calls = {{"f", "json-with-17-char\n{\"a\": 1}"}}},
    /* llama3 */
    {.fmt = "llama3", .text = "{\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}",
     .content = "", .n = 1, .calls = {{"get_weather", "{\"location\": \"Paris\"}"}}},
    {.fmt = "llama3", .text = "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}",
     .content = "", .n = 1, .calls = {{"f", "{}"}}},
    {.fmt = "llama3", .text = " {\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"x\": 1}}",
     .content = "", .n = 2, .calls = {{"a", "{}"}, {"b", "{\"x\": 1}"}}},
    {.fmt = "llama3", .text = "{\"answer\": 42}", .content = "{\"answer\": 42}", .n = 0},
    {.fmt = "llama3", .text = "The answer is {\"name\": \"x\", \"parameters\": {}}",
     .content = "The answer is {\"name\": \"x\", \"parameters\": {}}", .n = 0},
    {.fmt = "llama3", .text = "{\"type\": \"function\", \"name\": \"f\", \"parameters\": {\"a\": [1, {\"b\": \"}\"}]}}",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": [1, {\"b\": \"}\"}]}"}}},
    {.fmt = "llama3", .text = "{\"name\": \"f\", \"parameters\": {\"a\": 1",
     .content = "", .n = 1, .calls = {{"f", "{\"a\": 1"}}, .closed = "0"},
    {.fmt = "llama3", .text = "{\"name\": \"f\"}", .content = "{\"name\": \"f\"}", .n = 0},
    {.fmt = "llama3", .text = "{\"name\": \"f\", \"parameters\": {}}\nDone.",
     .content = "\nDone.", .n = 1, .calls = {{"f", "{}"}}},
    {.fmt = "llama3", .text = "\n{ not json }", .content = "\n{ not json }", .n = 0},
    /* gemma4: keys bare, strings between <|"|>, Python's None/True too; the arguments become JSON */
    {.fmt = "gemma4", .text = G4("get_weather", "days:3,location:" Q "Paris" Q), .content = "", .n = 1,
     .calls = {{"get_weather", "{\"days\": 3, \"location\": \"Paris\"}"}}},
    {.fmt = "gemma4", .text = "Let me check.\n\n" G4("a", "x:1") G4("b", "") "<|tool_response>", .content = "Let me check.",
     .n = 2, .calls = {{"a", "{\"x\": 1}"}, {"b", "{}"}}},
    {.fmt = "gemma4", .text = G4("w", "code:" Q "print(\"hi\")\n\t{x}, [y]: z <|'|> <|\" \"|> <tool_call|> \\ naïve 日本" Q),
     .content = "", .n = 1,
     .calls = {{"w", "{\"code\": \"print(\\\"hi\\\")\\n\\t{x}, [y]: z <|'|> <|\\\" \\\"|> <tool_call|> \\\\ naïve 日本\"}"}}},
    {.fmt = "gemma4",
     .text = G4("v", "a:-1.5e3,b:true,c:None,d:True,e:False,f:null,g:{k:[1," Q "x" Q ",{}],l:[]},h:2.5e-07,i:01,"
                     "j:3 apples,k:\"q,r\",l:'s',m:inf,n:" Q Q ",o:1e+20"),
     .content = "", .n = 1,
     .calls = {{"v", "{\"a\": -1.5e3, \"b\": true, \"c\": null, \"d\": true, \"e\": false, \"f\": null, "
                     "\"g\": {\"k\": [1, \"x\", {}], \"l\": []}, \"h\": 2.5e-07, \"i\": \"01\", \"j\": \"3 apples\", "
                     "\"k\": \"q,r\", \"l\": \"s\", \"m\": \"inf\", \"n\": \"\", \"o\": 1e+20}"}}},
    /* the tools' schema: a string parameter stays a string */
    {.fmt = "gemma4", .text = G4("t", "count:7,either:12,flag:true,id:123,other:false") G4("u", "s:5"), .content = "", .n = 2,
     .calls = {{"t", "{\"count\": 7, \"either\": 12, \"flag\": true, \"id\": \"123\", \"other\": false}"}, {"u", "{\"s\": \"5\"}"}},
     .tools = schema},
    /* cut off: what is open is closed */
    {.fmt = "gemma4", .text = "<|tool_call>call:f{a:" Q "hel", .content = "", .n = 1, .calls = {{"f", "{\"a\": \"hel\"}"}},
     .closed = "0"},
    {.fmt = "gemma4", .text = "<|tool_call>call:f{a:[1,{b:", .content = "", .n = 1,
     .calls = {{"f", "{\"a\": [1, {\"b\": null}]}"}}, .closed = "0"},
    {.fmt = "gemma4", .text = "<|tool_call>call:f{a:1<tool_ca", .content = "", .n = 1, .calls = {{"f", "{\"a\": 1}"}},
     .closed = "0"},
    {.fmt = "gemma4", .text = "<|tool_call>call:f{a:" Q "x<|\"", .content = "", .n = 1, .calls = {{"f", "{\"a\": \"x\"}"}},
     .closed = "0"},
    {.fmt = "gemma4", .text = "<|tool_call>call:f{a:[1,2<tool_call|>after", .content = "after", .n = 1,
     .calls = {{"f", "{\"a\": [1, 2]}"}}},
    /* not calls */
    {.fmt = "gemma4", .text = "<|tool_call>call:{a:1}<tool_call|>", .content = "<|tool_call>call:{a:1}<tool_call|>", .n = 0},
    {.fmt = "gemma4", .text = "<|tool_call>call:f\nx{}", .content = "<|tool_call>call:f\nx{}", .n = 0},
    {.fmt = "gemma4", .text = "<|tool_call>", .content = "<|tool_call>", .n = 0},
    {.fmt = "gemma4", .text = "<|tool_call>call:get_wea", .content = "<|tool_call>call:get_wea", .n = 0},
    {.fmt = "gemma4", .text = "<|tool_call>" G4("f", ""), .content = "<|tool_call>", .n = 1, .calls = {{"f", "{}"}}},
    /* what models get wrong */
    {.fmt = "gemma4", .text = G4("f", "a:1 b:2,c," Q "e" Q ":,g:" Q "x" Q " h:2"), .content = "", .n = 1,
     .calls = {{"f", "{\"a\": \"1 b:2\", \"c\": null, \"e\": null, \"g\": \"x\", \"h\": 2}"}}},
    {.fmt = "gemma4", .text = G4("f", "\"a\": \"x, y\", 'b': 'z', " Q "c:d" Q ":1,e=" Q "w" Q ",x\"y:[]"), .content = "", .n = 1,
     .calls = {{"f", "{\"a\": \"x, y\", \"b\": \"z\", \"c:d\": 1, \"e\": \"w\", \"x\\\"y\": []}"}}},
    {.fmt = "gemma4", .text = "<|tool_call> call: f { a : 1 , b : [ 1 , 2 ] } <tool_call|> ", .content = "", .n = 1,
     .calls = {{"f", "{\"a\": 1, \"b\": [1, 2]}"}}},
    {.fmt = "gemma4", .text = "<|tool_call>get_time{a:[1}}<tool_call|>", .content = "", .n = 1,
     .calls = {{"get_time", "{\"a\": [1]}"}}},
    {.fmt = "gemma4", .text = "<|tool_call>call:f{}done", .content = "done", .n = 1, .calls = {{"f", "{}"}}},
    {.fmt = "gemma4", .text = "<|tool_call>call:f{a:{b:[,1,,]},c:,d:}", .content = "", .n = 1,
     .calls = {{"f", "{\"a\": {\"b\": [1]}, \"c\": null, \"d\": null}"}}},
};
#define NCASES (int)(sizeof cases / sizeof cases[0])

/* Whether every call of r has a JSON object for arguments (checked). */
static int args_are_json(const char *label, const result *r) {
    int ok = 1;
    for (int i = 0; i < r->n && i < MAXC; i++) {
        json_error_t e;
        json_t *j = json_loads(r->args[i], JSON_DECODE_INT_AS_REAL, &e);
        TEST_CHECK(json_is_object(j), "%s: call %d's arguments are not a JSON object: [%s]", label, i, r->args[i]);
        ok &= json_is_object(j);
        json_decref(j);
    }
    return ok;
}

static void check_case(int k, const tcase *c) {
    char label[64];
    snprintf(label, sizeof label, "case %d (%s)", k, c->fmt);
    size_t n = strlen(c->text);
    result r = check_splits(label, c->fmt, c->tools, c->text, n, 1);
    int ok = !strcmp(r.content, c->content) && r.n == c->n;
    for (int i = 0; ok && i < c->n; i++)
        ok = !strcmp(r.name[i], c->calls[i][0]) && !strcmp(r.args[i], c->calls[i][1]) &&
             r.closed[i] == (c->closed ? c->closed[i] == '1' : 1);
    TEST_CHECK(ok, "%s: text [%s]", label, c->text);
    if (!ok) {
        print_result("got", &r);
        fprintf(stderr, "  want: content [%s], %d calls", c->content, c->n);
        for (int i = 0; i < c->n; i++) fprintf(stderr, " %s(%s)", c->calls[i][0], c->calls[i][1]);
        fprintf(stderr, "\n");
    }
    /* ids: call_ and 24 letters or digits, distinct */
    for (int i = 0; i < r.n && i < MAXC; i++) {
        int good = strlen(r.id[i]) == 29 && !strncmp(r.id[i], "call_", 5);
        for (int j = 5; good && j < 29; j++)
            good = (r.id[i][j] >= 'a' && r.id[i][j] <= 'z') || (r.id[i][j] >= 'A' && r.id[i][j] <= 'Z') ||
                   (r.id[i][j] >= '0' && r.id[i][j] <= '9');
        for (int j = 0; j < i; j++) good = good && strcmp(r.id[i], r.id[j]);
        TEST_CHECK(good, "%s: call %d has id [%s]", label, i, r.id[i]);
    }
    /* the XML bodies' and gemma4's arguments are JSON (pocket writes them) */
    int writes_json = (!strcmp(c->fmt, "qwen3coder") && strstr(c->text, "<function=")) || !strcmp(c->fmt, "gemma4");
    if (writes_json) args_are_json(label, &r);
    result_free(&r);
    /* every prefix: a generation cut off anywhere (gemma4: still JSON, for UTF-8 text) */
    int bad = 0;
    for (size_t l = 0; l < n && !bad; l++) {
        char pl[128];
        snprintf(pl, sizeof pl, "%s cut to %zu bytes", label, l);
        result p = check_splits(pl, c->fmt, c->tools, c->text, l, 0);
        bad = p.err[0] != 0 || (!strcmp(c->fmt, "gemma4") && utf8_valid(c->text, l) && !args_are_json(pl, &p));
        result_free(&p);
    }
}

/* ---- bounds --------------------------------------------------------------------- */

static void test_bounds(void) {
    pk_error err = {0};
    pk_toolcall *tc;
    /* a candidate that names no call within 16 KiB is content before the end */
    size_t n = 20000;
    char *t = malloc(n + 1);
    strcpy(t, "<tool_call>{\"arguments\": \"");
    memset(t + strlen(t), 'x', n - strlen(t));
    t[n] = 0;
    TEST_COND("new hermes", pk_toolcall_new("hermes", 1, &tc, &err) == PK_OK);
    for (size_t i = 0; i < n; i += 100) pk_toolcall_feed(tc, t + i, 100, 0);
    size_t cl;
    pk_toolcall_content(tc, &cl);
    TEST_CHECK(cl == n, "16 KiB without a name: %zu bytes of content before the end, want %zu", cl, n);
    pk_toolcall_feed(tc, "", 0, 1);
    const char *c = pk_toolcall_content(tc, &cl);
    TEST_COND("16 KiB without a name: all content", cl == n && !memcmp(c, t, n) && pk_toolcall_count(tc) == 0);
    pk_toolcall_free(tc);
    free(t);

    /* white space before a call: at most 1024 bytes of it held and dropped */
    const char *call = "<tool_call>\n<function=f>\n</function>\n</tool_call>";
    t = malloc(3000);
    t[0] = 'a';
    memset(t + 1, ' ', 2000);
    strcpy(t + 2001, call);
    result r = check_splits("2000 spaces before a call", "qwen3coder", NULL, t, strlen(t), 0);
    TEST_CHECK(r.clen == 977 && r.n == 1, "2000 spaces before a call: %zu bytes of content, %d calls", r.clen, r.n);
    result_free(&r);
    free(t);

    /* gemma4: nesting deeper than the scanner follows (128) goes on as a
       bare value; the arguments stay JSON */
    t = malloc(600);
    n = (size_t)sprintf(t, "<|tool_call>call:f{a:");
    memset(t + n, '[', 200);
    t[n + 200] = '1';
    memset(t + n + 201, ']', 200);
    strcpy(t + n + 401, "}<tool_call|>");
    r = check_splits("gemma4 nested 200 deep", "gemma4", NULL, t, strlen(t), 0);
    TEST_CHECK(r.n == 1 && args_are_json("gemma4 nested 200 deep", &r), "gemma4 nested 200 deep: %d calls", r.n);
    result_free(&r);
    free(t);

    /* 1024 calls at most; the openers of more are content */
    const char *one = "<function=f></function>";
    size_t ol = strlen(one);
    t = malloc(1030 * ol + 1);
    for (int i = 0; i < 1030; i++) memcpy(t + i * ol, one, ol);
    t[1030 * ol] = 0;
    TEST_COND("new qwen3coder", pk_toolcall_new("qwen3coder", 1, &tc, &err) == PK_OK);
    pk_toolcall_feed(tc, t, 1030 * ol, 1);
    c = pk_toolcall_content(tc, &cl);
    TEST_CHECK(pk_toolcall_count(tc) == 1024 && cl == 6 * ol && !memcmp(c, t, cl),
               "1030 calls: %d calls, %zu bytes of content", pk_toolcall_count(tc), cl);
    pk_toolcall_free(tc);
    free(t);
}

/* A long message fed whole, in pieces of 4097 bytes and byte by byte: the
 * same content and calls (pieces larger than the parser's internal chunk,
 * and whole, take the same path as tokens do). */
static pk_toolcall *parse_in(const char *fmt, const char *t, size_t n, size_t piece) {
    pk_error err = {0};
    pk_toolcall *tc;
    if (pk_toolcall_new(fmt, 3, &tc, &err)) return NULL;
    for (size_t i = 0; i < n; i += piece) pk_toolcall_feed(tc, t + i, i + piece < n ? piece : n - i, i + piece >= n);
    return tc;
}

static int same_parse(const pk_toolcall *a, const pk_toolcall *b) {
    size_t al, bl;
    const char *ac = pk_toolcall_content(a, &al), *bc = pk_toolcall_content(b, &bl);
    if (al != bl || memcmp(ac, bc, al) || pk_toolcall_count(a) != pk_toolcall_count(b)) return 0;
    for (int i = 0; i < pk_toolcall_count(a); i++) {
        pk_toolcall_call x, y;
        pk_toolcall_get(a, i, &x);
        pk_toolcall_get(b, i, &y);
        if (strcmp(x.name, y.name) || strcmp(x.arguments, y.arguments) || x.closed != y.closed) return 0;
    }
    return 1;
}

static void test_long(void) {
    size_t cap = 1 << 20, n = 0;
    char *t = malloc(cap);
    for (int i = 0; i < 150; i++) {
        for (int k = 0; k < 20; k++)
            n += (size_t)snprintf(t + n, cap - n, "Line %d.%d: a < b, <tool_ and <function but no call.\n", i, k);
        n += (size_t)snprintf(t + n, cap - n, "<tool_call>\n<function=f%d>\n", i);
        for (int k = 0; k < 12; k++)
            n += (size_t)snprintf(t + n, cap - n, "<parameter=p%d>\n%s\n</parameter>\n", k,
                                  k % 3 == 0 ? "42" : k % 3 == 1 ? "{\"a\": [1, 2]}" : "some text\nover lines");
        n += (size_t)snprintf(t + n, cap - n, "</function>\n</tool_call>\n");
    }
    pk_toolcall *whole = parse_in("qwen3coder", t, n, n), *big = parse_in("qwen3coder", t, n, 4097),
                *bytes = parse_in("qwen3coder", t, n, 1);
    TEST_CHECK(whole && pk_toolcall_count(whole) == 150, "a %zu-byte message: %d calls", n, whole ? pk_toolcall_count(whole) : -1);
    TEST_COND("a long message whole = in 4097-byte pieces", whole && big && same_parse(whole, big));
    TEST_COND("a long message whole = byte by byte", whole && bytes && same_parse(whole, bytes));
    pk_toolcall_call c;
    TEST_CHECK(whole && !pk_toolcall_get(whole, 149, &c) && !strcmp(c.name, "f149") &&
               !strncmp(c.arguments, "{\"p0\": 42, \"p1\": {\"a\": [1, 2]}, \"p2\": \"some text\\nover lines\"", 60),
               "the last call: %s(%s)", c.name, c.arguments);
    pk_toolcall_free(whole);
    pk_toolcall_free(big);
    pk_toolcall_free(bytes);
    free(t);
}

/* ---- detection, tool_choice, errors ------------------------------------------------ */

static void test_detect(void) {
    static const struct { const char *tmpl, *want; } d[] = {
        /* Qwen3.5 / Qwen3-Coder: the XML example in the system prompt */
        {"{{- '\\n\\n<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{{- '<parameter=' + args_name + '>\\n' }}",
         "qwen3coder"},
        /* Qwen3, Hermes-3 */
        {"{{- '<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}", "hermes"},
        /* gpt-oss */
        {"{{- \"<|start|>assistant to=\" }}{{- \"functions.\" + tool_call.name + \"<|channel|>commentary \" }}"
         "{{- \"<|call|>\" }}",
         "harmony"},
        /* DeepSeek-V3.1 */
        {"{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>'+ tool['function']['name'] + '<｜tool▁sep｜>'}}", "deepseek"},
        /* Llama-3.1 */
        {"{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}{{- \"<|python_tag|>\" + tool_call.name }}", "llama3"},
        {"{{- '<|start_header_id|>' }}{{- '{\"name\": \"' + tool_call.name + '\", ' }}{{- '\"parameters\": ' }}", "llama3"},
        /* Gemma-4; plain ChatML */
        {"{{- '<|tool_call>call:' + function['name'] + '{' -}}", "gemma4"},
        {"{{ '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' }}", NULL},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        const char *got = pk_toolcall_detect(d[i].tmpl, strlen(d[i].tmpl));
        TEST_CHECK(got == d[i].want || (got && d[i].want && !strcmp(got, d[i].want)), "detect %zu: %s, want %s", i,
                   got ? got : "NULL", d[i].want ? d[i].want : "NULL");
    }
    TEST_COND("detect NULL", pk_toolcall_detect(NULL, 0) == NULL);
}

static void test_choice(void) {
    pk_error err = {0};
    pk_toolcall *none, *two;
    pk_toolcall_new("hermes", 7, &none, &err);
    pk_toolcall_new("hermes", 7, &two, &err);
    pk_toolcall_feed(none, "Just text.", 10, 1);
    const char *t = "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>";
    pk_toolcall_feed(two, t, strlen(t), 1);
    TEST_COND("auto", !pk_toolcall_check_choice(none, "auto", &err) && !pk_toolcall_check_choice(two, NULL, &err));
    TEST_COND("none, no call", !pk_toolcall_check_choice(none, "none", &err));
    TEST_CHECK(pk_toolcall_check_choice(two, "none", &err) == PK_ERR_FORMAT && strstr(err.msg, "'a'"), "none: %s", err.msg);
    TEST_CHECK(pk_toolcall_check_choice(none, "required", &err) == PK_ERR_FORMAT && strstr(err.msg, "no tool"),
               "required: %s", err.msg);
    TEST_COND("required, two calls", !pk_toolcall_check_choice(two, "required", &err));
    TEST_CHECK(pk_toolcall_check_choice(two, "a", &err) == PK_ERR_FORMAT && strstr(err.msg, "'a'") && strstr(err.msg, "'b'"),
               "named a: %s", err.msg);
    TEST_CHECK(pk_toolcall_check_choice(none, "a", &err) == PK_ERR_FORMAT, "named a, no call: %s", err.msg);
    pk_toolcall_free(two);
    pk_toolcall_new("hermes", 7, &two, &err);
    t = "<tool_call>{\"name\": \"a\"}</tool_call>";
    pk_toolcall_feed(two, t, strlen(t), 1);
    TEST_COND("named a, a called", !pk_toolcall_check_choice(two, "a", &err));
    pk_toolcall_free(two);
    pk_toolcall_free(none);
}

static void test_errors(void) {
    pk_error err = {0};
    pk_toolcall *tc = (pk_toolcall *)1;
    TEST_CHECK(pk_toolcall_new("jinja", 0, &tc, &err) == PK_ERR_ARG && !tc && strstr(err.msg, "'jinja'") &&
               strstr(err.msg, "qwen3coder"), "unknown format: %s", err.msg);
    TEST_COND("no format", pk_toolcall_new(NULL, 0, &tc, &err) == PK_ERR_ARG);
    TEST_COND("new", pk_toolcall_new("qwen3coder", 0, &tc, &err) == PK_OK);
    TEST_CHECK(pk_toolcall_set_tools(tc, "[{", 2, &err) == PK_ERR_ARG && strstr(err.msg, "tools: not JSON"), "bad tools: %s", err.msg);
    TEST_CHECK(pk_toolcall_set_tools(tc, "{}", 2, &err) == PK_ERR_ARG && strstr(err.msg, "array"), "object tools: %s", err.msg);
    TEST_COND("tools cleared", pk_toolcall_set_tools(tc, NULL, 0, &err) == PK_OK);
    TEST_COND("feed NULL text", pk_toolcall_feed(tc, NULL, 3, 0) == PK_ERR_ARG);
    TEST_COND("feed final", pk_toolcall_feed(tc, "x", 1, 1) == PK_OK);
    TEST_COND("feed after final", pk_toolcall_feed(tc, "y", 1, 0) == PK_ERR_ARG);
    pk_toolcall_call call;
    TEST_COND("get out of range", pk_toolcall_get(tc, 0, &call) == PK_ERR_ARG && pk_toolcall_get(tc, -1, &call) == PK_ERR_ARG);
    pk_toolcall_event ev;
    TEST_COND("no event left", pk_toolcall_next(tc, &ev) == 1 && ev.kind == PK_TOOLCALL_CONTENT && !pk_toolcall_next(tc, &ev));
    pk_toolcall_free(tc);
    pk_toolcall_free(NULL);
    TEST_COND("NULL parser", pk_toolcall_count(NULL) == 0 && pk_toolcall_feed(NULL, "", 0, 1) == PK_ERR_ARG);
}

int main(void) {
    for (int k = 0; k < NCASES; k++) check_case(k, &cases[k]);
    test_bounds();
    test_long();
    test_detect();
    test_choice();
    test_errors();
    return TEST_REPORT();
}
