/* text/grammar.c - GBNF text to a compiled grammar over bytes.
 *
 * The syntax is llama.cpp's (grammars/README.md there): rules
 * `name ::= alternatives`, `|`, groups `( )`, `*` `+` `?` `{m}` `{m,}`
 * `{m,n}`, string literals "...", character classes [a-z] [^...] with
 * ranges, `.` (any character), escapes \xXX \uXXXX \UXXXXXXXX \t \r \n \\
 * \" \[ \], comments from # to the end of the line, newlines allowed inside
 * parentheses and after `|`. Token references (<...>, <[id]>) are refused.
 *
 * Compiling turns code points into UTF-8: a literal becomes one byte set
 * per byte, a class its byte sequences (one set when every code point is
 * ASCII, else a helper rule with one alternative per sequence shape), and
 * repetitions are expanded into generated rules as llama.cpp does:
 *   X*     R ::= X R |            X+   X R (R as for X*)
 *   X?     R ::= X |              X{m,n}   m copies of X, then n - m nested
 *   optional rules (R1 ::= X | ; Rk ::= X Rk-1 | ), or R of X* when n is
 *   open.
 * Then the checks that keep the matcher finite and every stack able to
 * finish: every used rule is defined; the minimum length of each rule
 * (Knuth's shortest-derivation algorithm) is finite for every rule the root
 * reaches; no left recursion (a cycle of leftmost references through
 * nullable prefixes that is not a chain of tail calls, which the matcher
 * handles as loops). Errors are one line: "grammar: line L, column C: ..."
 * for syntax, "grammar: rule 'x' ..." for the rest.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/grammar_int.h"

#define INF32 UINT32_MAX

/* ---- building ---------------------------------------------------------- */

typedef struct gvec {
    gelem *v;
    uint32_t n, cap;
} gvec;

typedef struct brule {
    char *name;
    gvec body;           /* alternatives, each closed by GE_END */
    int defined;         /* 0: only referenced so far */
    int generated;       /* made by the parser (groups, repetitions, classes) */
    const char *used_at; /* first reference (for "never defined") */
    const char *def_at;
} brule;

typedef struct gparse {
    const char *s, *end;
    pk_error *err;
    brule *r;
    uint32_t n_r, cap_r;
    uint32_t *names;     /* open addressing: rule id + 1, by name */
    uint32_t names_cap;
    uint64_t (*sets)[4];
    uint32_t n_set, cap_set;
    gmap set_map;
    uint64_t n_elements;
    int depth;
    int failed;
} gparse;

static int grow(void **p, uint32_t *cap, uint64_t need, size_t sz) {
    if (need <= *cap) return 1;
    uint64_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    if (nc > UINT32_MAX) return 0;
    void *np = realloc(*p, nc * sz);
    if (!np) return 0;
    *p = np;
    *cap = (uint32_t)nc;
    return 1;
}

/* Line and column (in characters) of position at. */
static void where(const gparse *P, const char *at, int *line, int *col) {
    int l = 1, c = 1;
    for (const char *q = P->s; q < at && q < P->end; q++) {
        if (*q == '\n') { l++; c = 1; }
        else if (((unsigned char)*q & 0xC0) != 0x80) c++;
    }
    *line = l;
    *col = c;
}

static int perr(gparse *P, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(gparse *P, const char *at, const char *fmt, ...) {
    if (P->failed) return -1;
    P->failed = 1;
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (at) {
        int l, c;
        where(P, at, &l, &c);
        pk_errorf(P->err, PK_ERR_ARG, "grammar: line %d, column %d: %s", l, c, msg);
    } else {
        pk_errorf(P->err, PK_ERR_ARG, "grammar: %s", msg);
    }
    return -1;
}

static int nomem(gparse *P) {
    if (!P->failed) pk_errorf(P->err, PK_ERR_NOMEM, "grammar: out of memory");
    P->failed = 1;
    return -1;
}

static int vec_push(gparse *P, gvec *v, gelem e) {
    if (++P->n_elements > PK_GRAMMAR_MAX_ELEMENTS)
        return perr(P, NULL, "too large: more than %u elements once repetitions are expanded",
                    PK_GRAMMAR_MAX_ELEMENTS);
    if (!grow((void **)&v->v, &v->cap, (uint64_t)v->n + 1, sizeof *v->v)) return nomem(P);
    v->v[v->n++] = e;
    return 0;
}

static int vec_append(gparse *P, gvec *v, const gelem *e, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (vec_push(P, v, e[i])) return -1;
    return 0;
}

static uint64_t name_hash(const char *s, size_t n) { return pk_hash64(0, s, n); }

/* A new rule (NULL name: generated from base); returns its id or -1. */
static int64_t rule_new(gparse *P, const char *name, size_t len, const char *base) {
    if (P->n_r >= PK_GRAMMAR_MAX_RULES)
        return perr(P, NULL, "too large: more than %u rules once repetitions and groups are expanded",
                    PK_GRAMMAR_MAX_RULES);
    if (!grow((void **)&P->r, &P->cap_r, (uint64_t)P->n_r + 1, sizeof *P->r)) return nomem(P);
    brule *r = &P->r[P->n_r];
    memset(r, 0, sizeof *r);
    if (name) {
        r->name = malloc(len + 1);
        if (r->name) { memcpy(r->name, name, len); r->name[len] = 0; }
    } else {
        size_t bl = strlen(base);
        r->name = malloc(bl + 16);
        if (r->name) snprintf(r->name, bl + 16, "%s-%u", base, P->n_r);
        r->generated = 1;
    }
    if (!r->name) return nomem(P);
    return P->n_r++;
}

/* The id of the named rule, made (undefined) if new; -1 on error. */
static int64_t rule_id(gparse *P, const char *name, size_t len) {
    if ((uint64_t)P->n_r * 2 + 2 > P->names_cap) {
        uint32_t nc = P->names_cap ? P->names_cap * 2 : 64;
        while (nc < P->n_r * 2u + 2) nc *= 2;
        uint32_t *nn = pk_calloc(nc, sizeof *nn);
        if (!nn) return nomem(P);
        for (uint32_t i = 0; i < P->names_cap; i++) {
            if (!P->names[i]) continue;
            const char *nm = P->r[P->names[i] - 1].name;
            uint64_t h = name_hash(nm, strlen(nm)) & (nc - 1);
            while (nn[h]) h = (h + 1) & (nc - 1);
            nn[h] = P->names[i];
        }
        free(P->names);
        P->names = nn;
        P->names_cap = nc;
    }
    uint64_t h = name_hash(name, len) & (P->names_cap - 1);
    while (P->names[h]) {
        const char *nm = P->r[P->names[h] - 1].name;
        if (strlen(nm) == len && !memcmp(nm, name, len)) return P->names[h] - 1;
        h = (h + 1) & (P->names_cap - 1);
    }
    int64_t id = rule_new(P, name, len, NULL);
    if (id < 0) return -1;
    P->names[h] = (uint32_t)id + 1;
    return id;
}

/* The id of a byte set (deduplicated). */
static int64_t set_id(gparse *P, const uint64_t s[4]) {
    uint64_t key = pk_hash64(0, s, 32) | 1;
    for (uint32_t v = pk_gmap_get(&P->set_map, key); v != UINT32_MAX; ) {
        if (!memcmp(P->sets[v], s, 32)) return v;
        key = pk_hash64(key, "x", 1) | 1;     /* collision: probe another key */
        v = pk_gmap_get(&P->set_map, key);
    }
    if (!grow((void **)&P->sets, &P->cap_set, (uint64_t)P->n_set + 1, sizeof *P->sets)) return nomem(P);
    memcpy(P->sets[P->n_set], s, 32);
    if (pk_gmap_put(&P->set_map, key, P->n_set)) return nomem(P);
    return P->n_set++;
}

static int push_byte_set(gparse *P, gvec *seq, const uint64_t s[4]) {
    int64_t id = set_id(P, s);
    if (id < 0) return -1;
    return vec_push(P, seq, GE_MAKE(GE_BYTES, id));
}

static int push_byte(gparse *P, gvec *seq, uint8_t b) {
    uint64_t s[4] = {0, 0, 0, 0};
    s[b >> 6] |= 1ull << (b & 63);
    return push_byte_set(P, seq, s);
}

/* ---- characters --------------------------------------------------------- */

static int utf8_encode(uint32_t cp, uint8_t *b) {
    if (cp < 0x80) { b[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { b[0] = (uint8_t)(0xC0 | cp >> 6); b[1] = (uint8_t)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        b[0] = (uint8_t)(0xE0 | cp >> 12); b[1] = (uint8_t)(0x80 | (cp >> 6 & 63));
        b[2] = (uint8_t)(0x80 | (cp & 63));
        return 3;
    }
    b[0] = (uint8_t)(0xF0 | cp >> 18); b[1] = (uint8_t)(0x80 | (cp >> 12 & 63));
    b[2] = (uint8_t)(0x80 | (cp >> 6 & 63)); b[3] = (uint8_t)(0x80 | (cp & 63));
    return 4;
}

/* Decode one UTF-8 character at *pp (strict: no overlongs, surrogates or
 * values past U+10FFFF); -1 if invalid. */
static int utf8_decode(const char **pp, const char *end, uint32_t *cp) {
    const uint8_t *p = (const uint8_t *)*pp;
    uint32_t c = p[0];
    int n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || (const char *)p + n > end) return -1;
    if (n > 1) c &= 0x3F >> (n - 1);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return -1;
        c = c << 6 | (p[i] & 63);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return -1;
    *pp += n;
    *cp = c;
    return 0;
}

/* One character of a literal or class: an escape or a UTF-8 character. */
static int parse_char(gparse *P, const char **pp, uint32_t *cp) {
    const char *p = *pp;
    if (p >= P->end) return perr(P, p, "unexpected end of the grammar");
    if (*p == '\\') {
        if (p + 1 >= P->end) return perr(P, p, "unexpected end of the grammar after '\\'");
        int n = 0;
        switch (p[1]) {
        case 'x': n = 2; break;
        case 'u': n = 4; break;
        case 'U': n = 8; break;
        case 't': *cp = '\t'; *pp = p + 2; return 0;
        case 'r': *cp = '\r'; *pp = p + 2; return 0;
        case 'n': *cp = '\n'; *pp = p + 2; return 0;
        case '\\': case '"': case '[': case ']': case '-': case '^':
            *cp = (uint8_t)p[1]; *pp = p + 2; return 0;
        default:
            return perr(P, p, "unknown escape '\\%c'", p[1] >= 32 && p[1] < 127 ? p[1] : '?');
        }
        uint32_t v = 0;
        for (int i = 0; i < n; i++) {
            char c = p + 2 + i < P->end ? p[2 + i] : 0;
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) return perr(P, p, "expected %d hex digits after '\\%c'", n, p[1]);
            v = v << 4 | (uint32_t)d;
        }
        if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            return perr(P, p, "escape \\%c%.*s is not a Unicode character", p[1], n, p + 2);
        *cp = v;
        *pp = p + 2 + n;
        return 0;
    }
    if (utf8_decode(pp, P->end, cp)) return perr(P, p, "invalid UTF-8");
    return 0;
}

/* ---- character classes to UTF-8 byte sequences ---------------------------- */

typedef struct cprange { uint32_t lo, hi; } cprange;

typedef struct u8seq {
    int n;
    uint8_t lo[4], hi[4];
} u8seq;

typedef struct u8seqs {
    u8seq *v;
    uint32_t n, cap;
} u8seqs;

static int cmp_range(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Split [lo, hi] into sequences of byte ranges (the classic UTF-8 range
 * split: first by encoded length, then until every continuation range is
 * whole or the prefix is fixed). */
static int utf8_split(gparse *P, uint32_t lo, uint32_t hi, u8seqs *out) {
    if (lo > hi) return 0;
    static const uint32_t lens[3] = {0x7F, 0x7FF, 0xFFFF};
    for (int i = 0; i < 3; i++) {
        if (lo <= lens[i] && hi > lens[i])
            return utf8_split(P, lo, lens[i], out) || utf8_split(P, lens[i] + 1, hi, out);
    }
    if (hi >= 0x80) {
        for (int i = 1; i < 4; i++) {
            uint32_t m = (1u << (6 * i)) - 1;
            if ((lo & ~m) != (hi & ~m)) {
                if ((lo & m) != 0) return utf8_split(P, lo, lo | m, out) || utf8_split(P, (lo | m) + 1, hi, out);
                if ((hi & m) != m) return utf8_split(P, lo, (hi & ~m) - 1, out) || utf8_split(P, hi & ~m, hi, out);
            }
        }
    }
    uint8_t a[4], b[4];
    int n = utf8_encode(lo, a);
    utf8_encode(hi, b);
    if (!grow((void **)&out->v, &out->cap, (uint64_t)out->n + 1, sizeof *out->v)) return nomem(P);
    u8seq *s = &out->v[out->n++];
    s->n = n;
    for (int i = 0; i < n; i++) { s->lo[i] = a[i]; s->hi[i] = b[i]; }
    return 0;
}

/* Push a class (ranges r[0..n), negated or not) onto seq: one byte set, an
 * inline byte sequence, or a reference to a helper rule. */
static int emit_class(gparse *P, gvec *seq, cprange *r, uint32_t n, int neg, const char *at, uint32_t owner) {
    if (n) qsort(r, n, sizeof *r, cmp_range);
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (m && r[i].lo <= r[m - 1].hi + 1) { if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi; }
        else r[m++] = r[i];
    }
    /* the complement, and surrogates taken out, into a fresh list */
    cprange *c = malloc((m * 2 + 4) * sizeof *c);
    if (!c) return nomem(P);
    uint32_t k = 0;
    if (neg) {
        uint32_t next = 0;
        for (uint32_t i = 0; i < m; i++) {
            if (r[i].lo > next) c[k++] = (cprange){next, r[i].lo - 1};
            next = r[i].hi + 1;
        }
        if (next <= 0x10FFFF) c[k++] = (cprange){next, 0x10FFFF};
    } else {
        if (m) memcpy(c, r, m * sizeof *c);
        k = m;
    }
    u8seqs sq = {0};
    uint64_t one[4] = {0, 0, 0, 0};
    int has_one = 0, rc = 0;
    for (uint32_t i = 0; i < k && !rc; i++) {
        uint32_t lo = c[i].lo, hi = c[i].hi;
        if (lo <= 0xD7FF || hi >= 0xE000) {
            if (lo < 0xD800 && hi > 0xDFFF) {
                rc = utf8_split(P, lo, 0xD7FF, &sq);
                if (!rc) rc = utf8_split(P, 0xE000, hi, &sq);
            } else if (lo < 0xD800 || hi > 0xDFFF) {
                if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
                if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
                rc = utf8_split(P, lo, hi, &sq);
            }
        }
    }
    free(c);
    if (rc) { free(sq.v); return -1; }
    uint32_t n_multi = 0;
    for (uint32_t i = 0; i < sq.n; i++) {
        if (sq.v[i].n == 1) {
            for (uint32_t b = sq.v[i].lo[0]; b <= sq.v[i].hi[0]; b++) one[b >> 6] |= 1ull << (b & 63);
            has_one = 1;
        } else {
            n_multi++;
        }
    }
    if (!has_one && !n_multi) { free(sq.v); return perr(P, at, "empty character class"); }
    if (has_one && !n_multi) { free(sq.v); return push_byte_set(P, seq, one); }
    gvec *body = seq;
    int64_t h = -1;
    if (has_one || n_multi > 1) {
        h = rule_new(P, NULL, 0, P->r[owner].name);
        if (h < 0) { free(sq.v); return -1; }
        P->r[h].defined = 1;
        body = &P->r[h].body;
        if (has_one && (push_byte_set(P, body, one) || vec_push(P, body, GE_END))) rc = -1;
    }
    for (uint32_t i = 0; i < sq.n && !rc; i++) {
        const u8seq *s = &sq.v[i];
        if (s->n == 1) continue;
        for (int j = 0; j < s->n && !rc; j++) {
            uint64_t set[4] = {0, 0, 0, 0};
            for (uint32_t b = s->lo[j]; b <= s->hi[j]; b++) set[b >> 6] |= 1ull << (b & 63);
            rc = push_byte_set(P, body, set);
        }
        if (!rc && h >= 0) rc = vec_push(P, body, GE_END);
    }
    free(sq.v);
    if (rc) return -1;
    if (h >= 0) return vec_push(P, seq, GE_MAKE(GE_REF, h));
    return 0;
}

/* ---- the syntax ------------------------------------------------------------ */

static int is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

static const char *skip_space(const gparse *P, const char *p, int newline_ok) {
    while (p < P->end) {
        if (*p == ' ' || *p == '\t' || (newline_ok && (*p == '\r' || *p == '\n'))) p++;
        else if (*p == '#') { while (p < P->end && *p != '\r' && *p != '\n') p++; }
        else break;
    }
    return p;
}

static int parse_alternates(gparse *P, const char **pp, uint32_t rule, int nested);

/* Replace the symbol seq[last..n) by its repetition {min,max} (max INF32:
 * open). */
static int repeat(gparse *P, gvec *seq, uint32_t last, uint32_t min, uint32_t max, uint32_t owner, const char *at) {
    uint32_t xn = seq->n - last;
    gelem *x = malloc(xn * sizeof *x);
    if (!x) return nomem(P);
    memcpy(x, seq->v + last, xn * sizeof *x);
    seq->n = last;
    P->n_elements -= xn;
    uint64_t extra = (max == INF32 ? (uint64_t)min + 1 : (uint64_t)max) * (xn + 2);
    int rc = 0;
    if (P->n_elements + extra > PK_GRAMMAR_MAX_ELEMENTS)
        rc = perr(P, at, "too large: the repetition makes more than %u elements", PK_GRAMMAR_MAX_ELEMENTS);
    for (uint32_t i = 0; i < min && !rc; i++) rc = vec_append(P, seq, x, xn);
    if (!rc && (max == INF32 || max > min)) {
        uint32_t reps = max == INF32 ? 1 : max - min;
        int64_t prev = -1;
        for (uint32_t k = 0; k < reps && !rc; k++) {
            int64_t id = rule_new(P, NULL, 0, P->r[owner].name);
            if (id < 0) { rc = -1; break; }
            P->r[id].defined = 1;
            gvec *b = &P->r[id].body;
            rc = vec_append(P, b, x, xn);
            if (!rc && max == INF32) rc = vec_push(P, b, GE_MAKE(GE_REF, id));
            else if (!rc && prev >= 0) rc = vec_push(P, b, GE_MAKE(GE_REF, prev));
            if (!rc) rc = vec_push(P, b, GE_END);
            if (!rc) rc = vec_push(P, b, GE_END);     /* the empty alternative */
            prev = id;
        }
        if (!rc) rc = vec_push(P, seq, GE_MAKE(GE_REF, prev));
    }
    free(x);
    return rc;
}

static int parse_uint(gparse *P, const char **pp, uint32_t *v) {
    const char *p = *pp;
    uint64_t x = 0;
    if (p >= P->end || *p < '0' || *p > '9') return perr(P, p, "expected a number in { }");
    while (p < P->end && *p >= '0' && *p <= '9') {
        x = x * 10 + (uint64_t)(*p - '0');
        if (x > PK_GRAMMAR_MAX_REPEAT)
            return perr(P, *pp, "repetition count larger than %d", PK_GRAMMAR_MAX_REPEAT);
        p++;
    }
    *v = (uint32_t)x;
    *pp = p;
    return 0;
}

/* One alternative into seq, up to '|', ')', the end of the line (not
 * nested) or of the text. */
static int parse_sequence(gparse *P, const char **pp, uint32_t owner, int nested, gvec *seq) {
    const char *p = *pp;
    uint32_t last = INF32;
    while (p < P->end) {
        const char *at = p;
        char c = *p;
        if (c == '"') {
            last = seq->n;
            p++;
            while (p < P->end && *p != '"') {
                uint32_t cp;
                if (parse_char(P, &p, &cp)) return -1;
                uint8_t b[4];
                int n = utf8_encode(cp, b);
                for (int i = 0; i < n; i++)
                    if (push_byte(P, seq, b[i])) return -1;
            }
            if (p >= P->end) return perr(P, at, "unterminated string literal");
            p = skip_space(P, p + 1, nested);
        } else if (c == '[' || c == '.') {
            last = seq->n;
            cprange *r = NULL;
            uint32_t n = 0, cap = 0;
            int neg = 0;
            if (c == '.') {
                neg = 1;        /* any character: the complement of nothing */
                p++;
            } else {
                p++;
                if (p < P->end && *p == '^') { neg = 1; p++; }
                while (p < P->end && *p != ']') {
                    uint32_t lo, hi;
                    if (parse_char(P, &p, &lo)) { free(r); return -1; }
                    hi = lo;
                    if (p + 1 < P->end && *p == '-' && p[1] != ']') {
                        const char *rat = p;
                        p++;
                        if (parse_char(P, &p, &hi)) { free(r); return -1; }
                        if (hi < lo) { free(r); return perr(P, rat, "range end below its start in a class"); }
                    }
                    if (!grow((void **)&r, &cap, (uint64_t)n + 1, sizeof *r)) { free(r); return nomem(P); }
                    r[n++] = (cprange){lo, hi};
                }
                if (p >= P->end) { free(r); return perr(P, at, "unterminated character class"); }
                p++;
            }
            int rc = emit_class(P, seq, r, n, neg, at, owner);
            free(r);
            if (rc) return -1;
            p = skip_space(P, p, nested);
        } else if (is_word(c)) {
            const char *s = p;
            while (p < P->end && is_word(*p)) p++;
            int64_t id = rule_id(P, s, (size_t)(p - s));
            if (id < 0) return -1;
            if (!P->r[id].used_at) P->r[id].used_at = s;
            last = seq->n;
            if (vec_push(P, seq, GE_MAKE(GE_REF, id))) return -1;
            p = skip_space(P, p, nested);
        } else if (c == '(') {
            if (P->depth >= PK_GRAMMAR_MAX_NESTING)
                return perr(P, p, "parentheses nested more than %d deep", PK_GRAMMAR_MAX_NESTING);
            int64_t id = rule_new(P, NULL, 0, P->r[owner].name);
            if (id < 0) return -1;
            P->r[id].defined = 1;
            p = skip_space(P, p + 1, 1);
            P->depth++;
            if (parse_alternates(P, &p, (uint32_t)id, 1)) return -1;
            P->depth--;
            if (p >= P->end || *p != ')') return perr(P, at, "unclosed '('");
            last = seq->n;
            if (vec_push(P, seq, GE_MAKE(GE_REF, id))) return -1;
            p = skip_space(P, p + 1, nested);
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (last == INF32 || last == seq->n) return perr(P, p, "'%c' with nothing before it to repeat", c);
            uint32_t min = c == '+', max = c == '?' ? 1 : INF32;
            p++;
            if (c == '{') {
                p = skip_space(P, p, nested);
                if (parse_uint(P, &p, &min)) return -1;
                p = skip_space(P, p, nested);
                max = min;
                if (p < P->end && *p == ',') {
                    p = skip_space(P, p + 1, nested);
                    max = INF32;
                    if (p < P->end && *p >= '0' && *p <= '9') {
                        if (parse_uint(P, &p, &max)) return -1;
                        p = skip_space(P, p, nested);
                    }
                }
                if (p >= P->end || *p != '}') return perr(P, at, "expected '}' to close the repetition");
                p++;
                if (max < min) return perr(P, at, "repetition {%u,%u}: the maximum is below the minimum", min, max);
            }
            if (repeat(P, seq, last, min, max, owner, at)) return -1;
            last = INF32;       /* x** is an error, as in llama.cpp */
            p = skip_space(P, p, nested);
        } else if (c == '<' || c == '!') {
            return perr(P, p, "token references (<...>, !<...>) are not supported");
        } else if (c == '|' || c == ')' || c == '\n' || c == '\r') {
            break;
        } else {
            if ((unsigned char)c >= 32 && (unsigned char)c < 127) return perr(P, p, "unexpected '%c'", c);
            return perr(P, p, "unexpected byte 0x%02X", (unsigned char)c);
        }
    }
    *pp = p;
    return 0;
}

static int parse_alternates(gparse *P, const char **pp, uint32_t rule, int nested) {
    const char *p = *pp;
    gvec seq = {0};
    for (;;) {
        seq.n = 0;
        if (parse_sequence(P, &p, rule, nested, &seq)) { free(seq.v); return -1; }
        /* the seq's elements were counted when pushed; moving them is free */
        P->n_elements -= seq.n;
        if (vec_append(P, &P->r[rule].body, seq.v, seq.n) || vec_push(P, &P->r[rule].body, GE_END)) {
            free(seq.v);
            return -1;
        }
        if (p >= P->end || *p != '|') break;
        p = skip_space(P, p + 1, 1);
    }
    free(seq.v);
    *pp = p;
    return 0;
}

static int parse_rule(gparse *P, const char **pp) {
    const char *p = *pp, *s = p;
    while (p < P->end && is_word(*p)) p++;
    if (p == s) {
        if ((unsigned char)*s >= 32 && (unsigned char)*s < 127) return perr(P, s, "expected a rule name, found '%c'", *s);
        return perr(P, s, "expected a rule name, found byte 0x%02X", (unsigned char)*s);
    }
    int64_t id = rule_id(P, s, (size_t)(p - s));
    if (id < 0) return -1;
    if (P->r[id].defined) {
        int l, c;
        where(P, P->r[id].def_at, &l, &c);
        return perr(P, s, "rule '%s' is defined twice (first at line %d)", P->r[id].name, l);
    }
    P->r[id].defined = 1;
    P->r[id].def_at = s;
    p = skip_space(P, p, 0);
    if (P->end - p < 3 || memcmp(p, "::=", 3))
        return perr(P, p, "expected '::=' after the rule name '%s'", P->r[id].name);
    p = skip_space(P, p + 3, 1);
    if (parse_alternates(P, &p, (uint32_t)id, 0)) return -1;
    if (p < P->end && *p == ')') return perr(P, p, "')' without '('");
    if (p < P->end && *p != '\n' && *p != '\r') return perr(P, p, "expected the end of the line");
    *pp = skip_space(P, p, 1);
    return 0;
}

/* ---- checks ---------------------------------------------------------------- */

typedef struct heap_item { uint64_t v; uint32_t r; } heap_item;

static void heap_push(heap_item *h, uint32_t *n, heap_item x) {
    uint32_t i = (*n)++;
    while (i && h[(i - 1) / 2].v > x.v) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
    h[i] = x;
}

static heap_item heap_pop(heap_item *h, uint32_t *n) {
    heap_item top = h[0], x = h[--(*n)];
    uint32_t i = 0;
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t mv = x.v;
        if (l < *n && h[l].v < mv) { m = l; mv = h[l].v; }
        if (r < *n && h[r].v < mv) m = r;
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    h[i] = x;
    return top;
}

static uint32_t sat32(uint64_t v) { return v >= INF32 ? INF32 - 1 : (uint32_t)v; }

/* Knuth's generalisation of Dijkstra: the minimum length of every rule
 * (INF32: none, the rule never ends) and of every alternative's suffix. */
static int min_lengths(pk_grammar *g, uint32_t **out_minlen) {
    uint32_t *alt_rule = malloc((g->n_alt + 1) * sizeof *alt_rule);
    uint32_t *rem = calloc(g->n_alt + 1, sizeof *rem);
    uint64_t *sum = calloc(g->n_alt + 1, sizeof *sum);
    uint32_t *occ_n = calloc(g->n_rule + 1, sizeof *occ_n);
    uint32_t *minlen = malloc((g->n_rule + 1) * sizeof *minlen);
    heap_item *h = malloc(((size_t)g->n_el + g->n_alt + 1) * sizeof *h);
    uint32_t *occ = NULL;
    int rc = -1;
    if (!alt_rule || !rem || !sum || !occ_n || !minlen || !h) goto done;
    for (uint32_t r = 0; r < g->n_rule; r++) {
        minlen[r] = INF32;
        for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++) alt_rule[a] = r;
    }
    /* occurrences: CSR of (rule referenced -> alternative), with multiplicity */
    for (uint32_t a = 0; a < g->n_alt; a++)
        for (uint32_t i = g->alt[a]; GE_KIND(g->el[i]) != GE_END; i++) {
            if (GE_KIND(g->el[i]) == GE_REF) { occ_n[GE_VAL(g->el[i])]++; rem[a]++; }
            else sum[a]++;
        }
    uint32_t tot = 0;
    for (uint32_t r = 0; r <= g->n_rule; r++) { uint32_t c = occ_n[r]; occ_n[r] = tot; tot += c; }
    occ = malloc(((size_t)tot + 1) * sizeof *occ);
    if (!occ) goto done;
    for (uint32_t a = 0; a < g->n_alt; a++)
        for (uint32_t i = g->alt[a]; GE_KIND(g->el[i]) != GE_END; i++)
            if (GE_KIND(g->el[i]) == GE_REF) occ[occ_n[GE_VAL(g->el[i])]++] = a;
    /* occ_n[r] is now the end of r's list; its start is occ_n[r - 1] */
    uint32_t nh = 0;
    for (uint32_t a = 0; a < g->n_alt; a++)
        if (!rem[a]) heap_push(h, &nh, (heap_item){sum[a], alt_rule[a]});
    while (nh) {
        heap_item it = heap_pop(h, &nh);
        if (minlen[it.r] != INF32) continue;
        minlen[it.r] = sat32(it.v);
        for (uint32_t k = it.r ? occ_n[it.r - 1] : 0; k < occ_n[it.r]; k++) {
            uint32_t a = occ[k];
            sum[a] += minlen[it.r];
            if (--rem[a] == 0) heap_push(h, &nh, (heap_item){sum[a], alt_rule[a]});
        }
    }
    /* suffixes */
    for (uint32_t a = 0; a < g->n_alt; a++) {
        uint32_t e = g->alt[a];
        while (GE_KIND(g->el[e]) != GE_END) e++;
        uint64_t acc = 0;
        g->minsuf[e] = 0;
        for (uint32_t i = e; i-- > g->alt[a];) {
            uint32_t l = GE_KIND(g->el[i]) == GE_REF ? minlen[GE_VAL(g->el[i])] : 1;
            acc = l == INF32 || acc >= INF32 ? INF32 : acc + l;
            g->minsuf[i] = acc >= INF32 ? INF32 : sat32(acc);
        }
    }
    *out_minlen = minlen;
    minlen = NULL;
    rc = 0;
done:
    free(alt_rule); free(rem); free(sum); free(occ_n); free(minlen); free(h); free(occ);
    return rc;
}

/* The rules the root reaches (marks in reach[]). */
static int reachable(const pk_grammar *g, uint8_t *reach) {
    uint32_t *todo = malloc((g->n_rule + 1) * sizeof *todo), n = 0;
    if (!todo) return -1;
    reach[g->root] = 1;
    todo[n++] = g->root;
    while (n) {
        uint32_t r = todo[--n];
        for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
            for (uint32_t i = g->alt[a]; GE_KIND(g->el[i]) != GE_END; i++)
                if (GE_KIND(g->el[i]) == GE_REF && !reach[GE_VAL(g->el[i])]) {
                    reach[GE_VAL(g->el[i])] = 1;
                    todo[n++] = GE_VAL(g->el[i]);
                }
    }
    free(todo);
    return 0;
}

/* Left recursion: the strongly connected components (Tarjan, iterative) of
 * the graph of leftmost references (through nullable rules); a component
 * with an edge that is not a tail call inside it is left-recursive. Returns
 * the rule at fault, INF32 if none, INF32 - 1 out of memory. */
static uint32_t left_recursion(const pk_grammar *g, const uint32_t *minlen) {
    uint32_t R = g->n_rule;
    /* edges: CSR by source rule; bit 31 of a target marks a non-tail edge */
    uint32_t *deg = calloc(R + 1, sizeof *deg), *edge = NULL, n_edge = 0;
    uint32_t *index = NULL, *low = NULL, *stk = NULL, *cstk = NULL, *citer = NULL, *comp = NULL;
    uint8_t *on = NULL;
    uint32_t bad = INF32 - 1;
    if (!deg) return bad;
    for (int pass = 0; pass < 2; pass++) {
        n_edge = 0;
        for (uint32_t r = 0; r < R; r++) {
            if (pass) deg[r] = n_edge;
            for (uint32_t a = g->rule_alt[r]; a < g->rule_alt[r + 1]; a++)
                for (uint32_t i = g->alt[a]; GE_KIND(g->el[i]) == GE_REF; i++) {
                    uint32_t s = GE_VAL(g->el[i]);
                    if (pass) edge[n_edge] = s | (GE_KIND(g->el[i + 1]) == GE_END ? 0 : 1u << 31);
                    n_edge++;
                    if (minlen[s] != 0) break;
                }
        }
        if (!pass) {
            edge = malloc(((size_t)n_edge + 1) * sizeof *edge);
            if (!edge) goto done;
        }
    }
    deg[R] = n_edge;
    index = malloc(R * sizeof *index); low = malloc(R * sizeof *low);
    stk = malloc(R * sizeof *stk); cstk = malloc(R * sizeof *cstk);
    citer = malloc(R * sizeof *citer); comp = malloc(R * sizeof *comp);
    on = calloc(R, 1);
    if (!index || !low || !stk || !cstk || !citer || !comp || !on) goto done;
    for (uint32_t r = 0; r < R; r++) index[r] = INF32;
    uint32_t next = 0, ns = 0, ncomp = 0;
    for (uint32_t r0 = 0; r0 < R; r0++) {
        if (index[r0] != INF32) continue;
        uint32_t nc = 0;
        cstk[nc++] = r0;
        index[r0] = low[r0] = next++;
        citer[r0] = deg[r0];
        stk[ns++] = r0; on[r0] = 1;
        while (nc) {
            uint32_t v = cstk[nc - 1];
            if (citer[v] < deg[v + 1]) {
                uint32_t w = edge[citer[v]++] & ~(1u << 31);
                if (index[w] == INF32) {
                    index[w] = low[w] = next++;
                    citer[w] = deg[w];
                    stk[ns++] = w; on[w] = 1;
                    cstk[nc++] = w;
                } else if (on[w] && index[w] < low[v]) {
                    low[v] = index[w];
                }
                continue;
            }
            nc--;
            if (nc && low[v] < low[cstk[nc - 1]]) low[cstk[nc - 1]] = low[v];
            if (low[v] == index[v]) {
                uint32_t w;
                do { w = stk[--ns]; on[w] = 0; comp[w] = ncomp; } while (w != v);
                ncomp++;
            }
        }
    }
    bad = INF32;
    for (uint32_t r = 0; r < R && bad == INF32; r++)
        for (uint32_t k = deg[r]; k < deg[r + 1]; k++) {
            uint32_t s = edge[k] & ~(1u << 31);
            if ((edge[k] >> 31) && comp[s] == comp[r]) { bad = r; break; }
        }
done:
    free(deg); free(edge); free(index); free(low); free(stk); free(cstk); free(citer); free(comp); free(on);
    return bad;
}

/* A rule's name for messages: a generated rule is named after the rule it
 * was made in ("value-12"). */
static int check(pk_grammar *g, pk_error *err) {
    uint32_t *minlen = NULL;
    uint8_t *reach = calloc(g->n_rule + 1, 1);
    if (!reach || min_lengths(g, &minlen) || reachable(g, reach)) {
        free(reach); free(minlen);
        return pk_errorf(err, PK_ERR_NOMEM, "grammar: out of memory");
    }
    int rc = 0;
    for (uint32_t r = 0; r < g->n_rule; r++)
        if (reach[r] && minlen[r] == INF32) {
            rc = pk_errorf(err, PK_ERR_ARG, "grammar: rule '%s' can never end (each of its alternatives "
                           "leads back to it)", g->rule_name[r]);
            break;
        }
    if (!rc) {
        uint32_t bad = left_recursion(g, minlen);
        if (bad == INF32 - 1) rc = pk_errorf(err, PK_ERR_NOMEM, "grammar: out of memory");
        else if (bad != INF32)
            rc = pk_errorf(err, PK_ERR_ARG, "grammar: rule '%s' is left-recursive (it can start with "
                           "itself; rewrite it with repetition)", g->rule_name[bad]);
    }
    free(reach);
    free(minlen);
    return rc;
}

/* ---- compile ---------------------------------------------------------------- */

static void parse_free(gparse *P) {
    for (uint32_t i = 0; i < P->n_r; i++) { free(P->r[i].name); free(P->r[i].body.v); }
    free(P->r);
    free(P->names);
    free(P->sets);
    pk_gmap_free(&P->set_map);
}

void pk_grammar_free(pk_grammar *g) {
    if (!g) return;
    pk_grammar_match_free(g);
    for (uint32_t r = 0; r < g->n_rule && g->rule_name; r++) free(g->rule_name[r]);
    free(g->rule_name);
    free(g->el); free(g->alt); free(g->rule_alt); free(g->sets); free(g->minsuf);
    free(g);
}

int pk_grammar_compile(const char *gbnf, size_t len, const char *root, const pk_vtrie *v,
                       pk_grammar **out, pk_error *err) {
    *out = NULL;
    if (!gbnf) return pk_errorf(err, PK_ERR_ARG, "grammar: the text is NULL");
    if (!root || !*root) root = "root";
    gparse P = {.s = gbnf, .end = gbnf + len, .err = err};
    const char *p = skip_space(&P, gbnf, 1);
    while (p < P.end && !P.failed)
        if (parse_rule(&P, &p)) break;
    if (!P.failed && P.n_r == 0) perr(&P, NULL, "no rules");
    int64_t rootid = -1;
    if (!P.failed) {
        for (uint32_t i = 0; i < P.n_r; i++)
            if (!P.r[i].generated && !strcmp(P.r[i].name, root)) rootid = i;
        if (rootid < 0 || !P.r[rootid].defined) perr(&P, NULL, "no rule '%s' (the start rule)", root);
    }
    for (uint32_t i = 0; i < P.n_r && !P.failed; i++)
        if (!P.r[i].defined) perr(&P, P.r[i].used_at, "rule '%s' is used but never defined", P.r[i].name);
    if (P.failed) {
        parse_free(&P);
        return err ? err->code : PK_ERR_ARG;
    }
    pk_grammar *g = pk_calloc(1, sizeof *g);
    if (!g) { parse_free(&P); return pk_errorf(err, PK_ERR_NOMEM, "grammar: out of memory"); }
    uint64_t n_el = 0, n_alt = 0;
    for (uint32_t i = 0; i < P.n_r; i++) {
        n_el += P.r[i].body.n;
        for (uint32_t k = 0; k < P.r[i].body.n; k++) n_alt += P.r[i].body.v[k] == GE_END;
    }
    g->n_rule = P.n_r;
    g->el = malloc(n_el * sizeof *g->el);
    g->minsuf = malloc(n_el * sizeof *g->minsuf);
    g->alt = malloc(n_alt * sizeof *g->alt);
    g->rule_alt = malloc((P.n_r + 1) * sizeof *g->rule_alt);
    g->rule_name = calloc(P.n_r, sizeof *g->rule_name);
    if (!g->el || !g->minsuf || !g->alt || !g->rule_alt || !g->rule_name) {
        parse_free(&P);
        pk_grammar_free(g);
        return pk_errorf(err, PK_ERR_NOMEM, "grammar: out of memory");
    }
    for (uint32_t i = 0; i < P.n_r; i++) {
        g->rule_alt[i] = g->n_alt;
        const gvec *b = &P.r[i].body;
        int at_start = 1;
        for (uint32_t k = 0; k < b->n; k++) {
            if (at_start) { g->alt[g->n_alt++] = g->n_el; at_start = 0; }
            g->el[g->n_el++] = b->v[k];
            if (b->v[k] == GE_END) at_start = 1;
        }
        g->rule_name[i] = P.r[i].name;
        P.r[i].name = NULL;
    }
    g->rule_alt[P.n_r] = g->n_alt;
    g->sets = P.sets;
    g->n_set = P.n_set;
    P.sets = NULL;
    g->root = (uint32_t)rootid;
    g->vt = v;
    parse_free(&P);
    int rc = check(g, err);
    if (!rc) rc = pk_grammar_match_init(g, err);
    if (rc) { pk_grammar_free(g); return rc; }
    *out = g;
    return PK_OK;
}
