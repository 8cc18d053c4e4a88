/* tools/serve_api.c - what the API translators share: refusals and the
 * growing output of a stream (tools/serve_api.h). */
#include "serve_api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the length of the valid UTF-8 sequence at s[i] (of n bytes), 0 if none */
static size_t utf8_seq(const char *s, size_t i, size_t n) {
    unsigned char c = (unsigned char)s[i];
    size_t need = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    int ok = need > 0 && i + need <= n;
    for (size_t t = 1; ok && t < need; t++) ok = ((unsigned char)s[i + t] & 0xC0) == 0x80;
    if (ok && need == 3) {  /* overlong and surrogates */
        unsigned char c1 = (unsigned char)s[i + 1];
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) ok = 0;
    }
    if (ok && need == 4) {
        unsigned char c1 = (unsigned char)s[i + 1];
        if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90)) ok = 0;
    }
    return ok ? need : 0;
}

/* A refusal is one line of UTF-8: a request's own text quoted in it
 * ("'tool_choice' of type \"f\nction\"", or cut by a %.64s in the middle of
 * a character) keeps its characters but not its line breaks, nor a broken
 * sequence: control characters become spaces, invalid bytes '?'. */
static void one_line_utf8(char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t m = utf8_seq(s, i, n);
        if (m == 1 && ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)) s[i] = ' ';
        else if (!m) { s[i] = '?'; m = 1; }
        i += m;
    }
}

void api_fail(api_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code[0] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    one_line_utf8(e->msg);
    one_line_utf8(e->param);
}

const char *api_kind(const json_t *v) {
    if (!v) return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: case JSON_REAL: return "a number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

void api_put(api_buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n + 1) {
            if (cap > ((size_t)-1) / 2) { b->oom = 1; return; }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void api_puts(api_buf *b, const char *s) { api_put(b, s, strlen(s)); }

void api_sse_keepalive(void *st, api_buf *b) { api_puts(b, ": keep-alive\n\n"); }

void api_put_json(api_buf *b, const char *prefix, json_t *v, const char *suffix) {
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!s) { b->oom = 1; return; }
    api_puts(b, prefix);
    api_puts(b, s);
    api_puts(b, suffix);
    free(s);
}

/* A valid UTF-8 copy of s[0..n) (invalid bytes become U+FFFD); NULL if out of
 * memory. *out_len gets its length. */
char *api_utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    char *o = malloc(n * 3 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        size_t m = utf8_seq(s, i, n);
        if (m) { memcpy(o + k, s + i, m); k += m; i += m; }
        else { memcpy(o + k, "\xEF\xBF\xBD", 3); k += 3; i++; }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}
