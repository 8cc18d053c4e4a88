/* text/sbuf.h - a growable NUL-terminated string for the text layer's writers
 * (chat formats, JSON schema to GBNF): appends never fail loudly; oom says
 * whether one could not grow the buffer (the text is then incomplete). */
#ifndef PK_SBUF_H
#define PK_SBUF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static inline void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) {
            if (cap > SIZE_MAX / 2) { b->oom = 1; return; }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static inline void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

#endif
