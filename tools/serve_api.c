/* tools/serve_api.c - what the API translators share: refusals and the
 * growing output of a stream (tools/serve_api.h). */
#include "serve_api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void api_fail(api_error *e, int status, const char *param, const char *fmt, ...) {
    e->status = status;
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code[0] = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
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

void api_put_json(api_buf *b, const char *prefix, json_t *v, const char *suffix) {
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!s) { b->oom = 1; return; }
    api_puts(b, prefix);
    api_puts(b, s);
    api_puts(b, suffix);
    free(s);
}
