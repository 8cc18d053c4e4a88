/* strbuf.h - a growable string, and the marker tests of the streaming text
 * splitters (text/chat.c's reasoning splitter, text/toolcall.c): where a
 * marker is, whether the end of a text may be the start of one. Static
 * inline: each user gets its own copy, nothing is exported. */
#ifndef PK_TEXT_STRBUF_H
#define PK_TEXT_STRBUF_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A NUL-terminated byte string that grows; after a failed allocation oom is
 * set and every later append does nothing. */
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
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static inline void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* Append printf-formatted text. */
static inline void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) { sb_put(b, tmp, (size_t)n); return; }
    char *big = malloc((size_t)n + 1);
    if (!big) { b->oom = 1; return; }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_put(b, big, (size_t)n);
    free(big);
}

/* Drop the first k (<= n) bytes. */
static inline void sb_take(sbuf *b, size_t k) {
    if (!k) return;
    memmove(b->p, b->p + k, b->n - k + 1);
    b->n -= k;
}

/* Offset of m in s[0..n), or n. */
static inline size_t find_at(const char *s, size_t n, const char *m) {
    const char *h = memmem(s, n, m, strlen(m));
    return h ? (size_t)(h - s) : n;
}

/* Length of the longest end of s[0..n) that begins m (and is shorter). */
static inline size_t partial_tail(const char *s, size_t n, const char *m) {
    size_t ml = strlen(m);
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, m, k)) return k;
    return 0;
}

/* Whether s[0..n) and m agree on their common length. */
static inline int agrees(const char *s, size_t n, const char *m) {
    size_t ml = strlen(m);
    return !memcmp(s, m, n < ml ? n : ml);
}

#endif
