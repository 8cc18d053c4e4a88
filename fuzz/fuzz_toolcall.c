/* fuzz_toolcall.c - libFuzzer harness: the tool-call parser (pk_toolcall) on
 * random text fed in random pieces.
 *
 * Input: byte 0 picks the format (qwen3coder, hermes, harmony, deepseek,
 * llama3, gemma4) and whether a tools schema is set; byte 1 seeds the
 * cutting; the rest is the generated text. It is parsed in one piece, byte
 * by byte and in pieces of random lengths: the content and the calls (name,
 * arguments, id, closed) must be the same each time; in each run the
 * events, put together, must be the content and the calls (starts in order,
 * arguments only between a call's start and its end, every call ended); the
 * content cannot be longer than the text; with valid UTF-8 text every delta
 * is valid UTF-8, and gemma4's arguments (which the parser writes) are a
 * JSON object.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"

static const char *const formats[] = {"qwen3coder", "hermes", "harmony", "deepseek", "llama3", "gemma4"};
#define N_FORMATS 6
static const char tools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"properties\": {"
    "\"s\": {\"type\": \"string\"}, \"i\": {\"type\": \"integer\"}, \"b\": {\"type\": \"boolean\"},"
    "\"o\": {\"type\": \"object\"}, \"u\": {\"type\": [\"null\", \"number\"]}}}}}]";

#define FAIL(...) do { fprintf(stderr, "fuzz_toolcall %s: ", fmt); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

/* A valid UTF-8 text (no bytes past the end of a sequence). */
static int utf8_ok(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t k = s[i] < 0x80 ? 1 : (s[i] & 0xE0) == 0xC0 ? 2 : (s[i] & 0xF0) == 0xE0 ? 3 : (s[i] & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return 0;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += k;
    }
    return 1;
}

/* The text fed in pieces whose lengths step() gives (0: one piece); the
 * parser is returned for comparison, its events checked. */
static pk_toolcall *parse(const char *fmt, int with_tools, const char *text, size_t n, unsigned seed, int mode) {
    pk_toolcall *tc;
    pk_error err = {0};
    if (pk_toolcall_new(fmt, 9, &tc, &err)) FAIL("new: %s", err.msg);
    if (with_tools && pk_toolcall_set_tools(tc, tools, sizeof tools - 1, &err)) FAIL("tools: %s", err.msg);
    int valid = utf8_ok((const uint8_t *)text, n);
    size_t *alen = calloc(1025, sizeof *alen), clen = 0;
    char *ended = calloc(1025, 1);
    int started = 0;
    for (size_t at = 0;;) {
        size_t len = mode == 0 ? n - at : mode == 1 ? 1 : 1 + (seed = seed * 1103515245u + 12345u) % 13;
        if (len > n - at) len = n - at;
        int final = at + len == n;
        if (pk_toolcall_feed(tc, text + at, len, final)) FAIL("feed failed");
        at += len;
        pk_toolcall_event ev;
        while (pk_toolcall_next(tc, &ev)) {
            size_t cl;
            const char *c = pk_toolcall_content(tc, &cl);
            pk_toolcall_call call;
            if (ev.kind != PK_TOOLCALL_CONTENT &&
                (ev.index < 0 || ev.index > started - (ev.kind != PK_TOOLCALL_START) || ended[ev.index]))
                FAIL("event %d for call %d (%d started)", ev.kind, ev.index, started);
            if ((ev.kind == PK_TOOLCALL_CONTENT || ev.kind == PK_TOOLCALL_ARGS) && valid &&
                !utf8_ok((const uint8_t *)ev.text, ev.len))
                FAIL("a delta cuts a UTF-8 character");
            switch (ev.kind) {
            case PK_TOOLCALL_CONTENT:
                if (ev.text != c + clen || clen + ev.len > cl) FAIL("content delta out of place");
                clen += ev.len;
                break;
            case PK_TOOLCALL_START:
                if (ev.index != started++ || pk_toolcall_get(tc, ev.index, &call) || strcmp(call.name, ev.text) ||
                    strlen(call.name) != ev.len || !call.name[0] || strcmp(call.id, ev.id))
                    FAIL("start of call %d", ev.index);
                break;
            case PK_TOOLCALL_ARGS:
                if (pk_toolcall_get(tc, ev.index, &call) || ev.text != call.arguments + alen[ev.index] ||
                    alen[ev.index] + ev.len > call.arguments_len)
                    FAIL("arguments delta of call %d out of place", ev.index);
                alen[ev.index] += ev.len;
                break;
            case PK_TOOLCALL_END:
                if (pk_toolcall_get(tc, ev.index, &call) || alen[ev.index] != call.arguments_len || !call.arguments_len)
                    FAIL("call %d ends with %zu of %zu argument bytes sent", ev.index, alen[ev.index], call.arguments_len);
                ended[ev.index] = 1;
                break;
            default: FAIL("event kind %d", ev.kind);
            }
        }
        if (final) break;
    }
    size_t cl;
    pk_toolcall_content(tc, &cl);
    if (cl != clen || cl > n) FAIL("content %zu bytes, %zu sent, text %zu", cl, clen, n);
    if (pk_toolcall_count(tc) != started) FAIL("%d calls, %d started", pk_toolcall_count(tc), started);
    for (int i = 0; i < started; i++)
        if (!ended[i]) FAIL("call %d never ended", i);
    free(alen);
    free(ended);
    return tc;
}

/* A JSON syntax check (RFC 8259; no limit on numbers, unlike a parser
 * into doubles): the end of the value at p, or NULL. */
static const char *j_value(const char *p, const char *e, int depth);

static const char *j_ws(const char *p, const char *e) {
    while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static const char *j_string(const char *p, const char *e) {
    if (p == e || *p++ != '"') return NULL;
    while (p < e) {
        unsigned char c = (unsigned char)*p++;
        if (c == '"') return p;
        if (c < 0x20) return NULL;
        if (c != '\\') continue;
        if (p == e) return NULL;
        c = (unsigned char)*p++;
        if (c == 'u') {
            for (int k = 0; k < 4; k++, p++)
                if (p == e || !strchr("0123456789abcdefABCDEF", *p) || !*p) return NULL;
        } else if (!strchr("\"\\/bfnrt", c) || !c) {
            return NULL;
        }
    }
    return NULL;
}

static const char *j_digits(const char *p, const char *e) {
    const char *q = p;
    while (p < e && *p >= '0' && *p <= '9') p++;
    return p > q ? p : NULL;
}

static const char *j_number(const char *p, const char *e) {
    if (p < e && *p == '-') p++;
    if (p < e && *p == '0') p++;
    else if (!(p = j_digits(p, e))) return NULL;
    if (p < e && *p == '.' && !(p = j_digits(p + 1, e))) return NULL;
    if (p < e && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (!(p = j_digits(p, e))) return NULL;
    }
    return p;
}

static const char *j_value(const char *p, const char *e, int depth) {
    p = j_ws(p, e);
    if (p == e || depth > 512) return NULL;
    if (*p == '"') return j_string(p, e);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = j_ws(p + 1, e);
        if (p < e && *p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (!(p = j_string(j_ws(p, e), e))) return NULL;
                p = j_ws(p, e);
                if (p == e || *p++ != ':') return NULL;
            }
            if (!(p = j_value(p, e, depth + 1))) return NULL;
            p = j_ws(p, e);
            if (p < e && *p == ',') { p++; continue; }
            return p < e && *p == close ? p + 1 : NULL;
        }
    }
    static const char *const lits[] = {"true", "false", "null"};
    for (int k = 0; k < 3; k++)
        if ((size_t)(e - p) >= strlen(lits[k]) && !memcmp(p, lits[k], strlen(lits[k]))) return p + strlen(lits[k]);
    return j_number(p, e);
}

/* Whether s[0..n) is one JSON object. */
static int json_object_text(const char *s, size_t n) {
    const char *p = j_ws(s, s + n);
    if (p == s + n || *p != '{') return 0;
    p = j_value(p, s + n, 0);
    return p && j_ws(p, s + n) == s + n;
}

static void compare(const char *fmt, const pk_toolcall *a, const pk_toolcall *b, const char *how) {
    size_t al, bl;
    const char *ac = pk_toolcall_content(a, &al), *bc = pk_toolcall_content(b, &bl);
    if (al != bl || memcmp(ac, bc, al)) FAIL("%s: another content", how);
    if (pk_toolcall_count(a) != pk_toolcall_count(b)) FAIL("%s: %d calls, not %d", how, pk_toolcall_count(b), pk_toolcall_count(a));
    for (int i = 0; i < pk_toolcall_count(a); i++) {
        pk_toolcall_call x, y;
        pk_toolcall_get(a, i, &x);
        pk_toolcall_get(b, i, &y);
        if (strcmp(x.name, y.name) || strcmp(x.id, y.id) || x.closed != y.closed || x.arguments_len != y.arguments_len ||
            memcmp(x.arguments, y.arguments, x.arguments_len))
            FAIL("%s: call %d differs", how, i);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const char *fmt = formats[data[0] % N_FORMATS];
    int with_tools = data[0] / N_FORMATS & 1;
    const char *text = (const char *)data + 2;
    size_t n = size - 2;
    pk_toolcall *whole = parse(fmt, with_tools, text, n, 0, 0);
    pk_toolcall *bytes = parse(fmt, with_tools, text, n, 0, 1);
    pk_toolcall *pieces = parse(fmt, with_tools, text, n, data[1], 2);
    compare(fmt, whole, bytes, "byte by byte");
    compare(fmt, whole, pieces, "in pieces");
    pk_error err = {0};
    for (int i = 0; i < pk_toolcall_count(whole); i++) {
        pk_toolcall_call c;
        pk_toolcall_get(whole, i, &c);
        if (pk_toolcall_check_choice(whole, c.name, &err) && (!err.msg[0] || strchr(err.msg, '\n')))
            FAIL("check_choice message [%s]", err.msg);
        if (!strcmp(fmt, "gemma4") && utf8_ok((const uint8_t *)text, n) && !json_object_text(c.arguments, c.arguments_len))
            FAIL("call %d's arguments are not a JSON object: %.200s", i, c.arguments);
    }
    pk_toolcall_free(whole);
    pk_toolcall_free(bytes);
    pk_toolcall_free(pieces);
    return 0;
}
