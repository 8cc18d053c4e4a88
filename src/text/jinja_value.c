/* text/jinja_value.c - the values of the Jinja engine and how Python writes
 * them: the render's allocator (a registry freed as a whole), strings, lists,
 * insertion-ordered dicts, equality and order as Python defines them, str()
 * and repr() (floats in Python's shortest round-trip form, strings quoted
 * and escaped as repr does), json.dumps (what Hugging Face's tojson is), and
 * JSON (jansson) to values. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/jinja_internal.h"
#include "text/unicode.h"

/* Deepest nesting of values that equality, order, repr and JSON walk. */
#define JV_MAX_NEST 512

/* ---- the registry ------------------------------------------------------------------ */

struct jblk {
    jblk *prev, *next;
    size_t size;
    size_t pad;                 /* keeps what follows 16-byte aligned */
};

void jinit(jrender *r) {
    r->head = NULL;
    jblk *h = malloc(sizeof *h);
    if (!h) {
        pk_errorf(r->err, PK_ERR_NOMEM, "out of memory starting a template render");
        longjmp(r->fail, 1);
    }
    h->prev = h->next = h;
    h->size = 0;
    r->head = h;
}

void jcharge(jrender *r, uint64_t n) {
    r->steps += n;
    if (r->steps > r->max_steps)
        jfail(r, NULL, "the render took more than %llu steps (a runaway loop?)", (unsigned long long)r->max_steps);
}

void *jmalloc(jrender *r, size_t n) {
    jcharge(r, n >> 5);                 /* work is mostly proportional to what it allocates */
    if (n > r->max_mem || r->mem > r->max_mem - n)
        jfail(r, NULL, "the render needs more than its memory limit of %zu MiB", r->max_mem >> 20);
    jblk *b = malloc(sizeof *b + n);
    if (!b) jfail(r, NULL, "out of memory (%zu bytes)", n);
    b->size = n;
    b->next = r->head->next;
    b->prev = r->head;
    r->head->next->prev = b;
    r->head->next = b;
    r->mem += n;
    return b + 1;
}

void jfree(jrender *r, void *p) {
    if (!p) return;
    jblk *b = (jblk *)p - 1;
    b->prev->next = b->next;
    b->next->prev = b->prev;
    r->mem -= b->size;
    free(b);
}

void *jrealloc(jrender *r, void *p, size_t n) {
    if (!p) return jmalloc(r, n);
    jblk *b = (jblk *)p - 1;
    if (n > b->size && (n - b->size > r->max_mem || r->mem > r->max_mem - (n - b->size)))
        jfail(r, NULL, "the render needs more than its memory limit of %zu MiB", r->max_mem >> 20);
    jcharge(r, n >> 5);
    jblk *prev = b->prev, *next = b->next;
    size_t old = b->size;
    jblk *nb = realloc(b, sizeof *nb + n);
    if (!nb) jfail(r, NULL, "out of memory (%zu bytes)", n);
    prev->next = nb;
    next->prev = nb;
    nb->size = n;
    r->mem = r->mem - old + n;
    return nb + 1;
}

void jsweep(jrender *r) {
    if (!r->head) return;
    jblk *b = r->head->next;
    while (b != r->head) {
        jblk *next = b->next;
        free(b);
        b = next;
    }
    free(r->head);
    r->head = NULL;
    r->mem = 0;
}

void jpos_text(const pk_jinja *t, uint32_t pos, char *buf, size_t cap) {
    size_t line = 1, col = 1;
    if (pos > t->len) pos = (uint32_t)t->len;
    for (size_t i = 0; i < pos; i++) {
        unsigned char c = (unsigned char)t->src[i];
        if (c == '\n') { line++; col = 1; }
        else if ((c & 0xC0) != 0x80) col++;
    }
    snprintf(buf, cap, "line %zu, column %zu", line, col);
}

_Noreturn void jfail(jrender *r, const jnode *n, const char *fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';        /* one line, whatever the template said */
    char where[64] = "";
    if (!n) n = r->cur;
    if (n) jpos_text(r->t, n->pos, where, sizeof where);
    pk_errorf(r->err, PK_ERR_FORMAT, "template%s%s: %s", n ? " " : "", where, msg);
    longjmp(r->fail, 1);
}

/* ---- reference counts ---------------------------------------------------------------- */

static void release(jrender *r, jobj *o) {
    switch (o->type) {
    case JV_LIST: {
        jlist *l = (jlist *)o;
        for (size_t i = 0; i < l->n; i++) jv_unref(r, l->v[i]);
        jfree(r, l->v);
        break;
    }
    case JV_DICT: case JV_NS: {
        jdict *d = (jdict *)o;
        for (size_t i = 0; i < d->n; i++) { jv_unref(r, d->k[i]); jv_unref(r, d->v[i]); }
        jfree(r, d->k);
        jfree(r, d->v);
        jfree(r, d->idx);
        if (d->parent) jv_unref(r, jv_obj(JV_DICT, d->parent));
        break;
    }
    case JV_MACRO:
        if (((jmacro *)o)->closure) jv_unref(r, jv_obj(JV_DICT, ((jmacro *)o)->closure));
        break;
    case JV_METHOD:
        jv_unref(r, ((jmethod *)o)->self);
        break;
    case JV_LOOP: {
        jloop *l = (jloop *)o;
        jv_unref(r, jv_obj(JV_LIST, l->seq));
        if (l->has_last) jv_unref(r, l->last);
        break;
    }
    default:
        break;
    }
    jfree(r, o);
}

/* Objects are released from a work list, not recursively: a list nested a
 * million deep is freed without a million stack frames. */
void jv_unref(jrender *r, jv v) {
    if (!jv_is_obj(v)) return;
    jobj *o = v.u.o;
    if (o->refs < 0 || --o->refs > 0) return;
    if (r->nfreeq == r->capfreeq) {
        size_t cap = r->capfreeq ? r->capfreeq * 2 : 64;
        r->freeq = jrealloc(r, r->freeq, cap * sizeof *r->freeq);
        r->capfreeq = cap;
    }
    r->freeq[r->nfreeq++] = o;
    if (r->draining) return;
    r->draining = 1;
    while (r->nfreeq) release(r, r->freeq[--r->nfreeq]);
    r->draining = 0;
}

/* ---- strings ------------------------------------------------------------------------- */

jstr *jstr_new(jrender *r, const char *s, size_t n) {
    if (n > r->max_mem) jfail(r, NULL, "the render needs more than its memory limit of %zu MiB", r->max_mem >> 20);
    jstr *j = jmalloc(r, sizeof *j + n + 1);
    j->h.refs = 1;
    j->h.type = JV_STR;
    j->hash = 0;
    j->len = n;
    if (n) memcpy(j->s, s, n);
    j->s[n] = 0;
    return j;
}

jv jv_strn(jrender *r, const char *s, size_t n) { return jv_obj(JV_STR, jstr_new(r, s, n)); }

uint32_t jstr_hash(const jstr *s) {
    if (s->hash) return s->hash;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < s->len; i++) h = (h ^ (unsigned char)s->s[i]) * 16777619u;
    if (!h) h = 1;
    ((jstr *)s)->hash = h;                 /* a cache: the same for every reader */
    return h;
}

int jspace(uint32_t cp) { return pk_unicode_is_space(cp) || (cp >= 0x1c && cp <= 0x1f); }

size_t jcp_count(const char *s, size_t n) {
    size_t k = 0, i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) { i++; k++; continue; }
        uint32_t cp;
        i += (size_t)pk_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        k++;
    }
    return k;
}

size_t jcp_offset(const char *s, size_t n, size_t idx) {
    size_t i = 0;
    while (idx && i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) i++;
        else { uint32_t cp; i += (size_t)pk_utf8_decode((const uint8_t *)s + i, n - i, &cp); }
        idx--;
    }
    return i;
}

/* ---- lists and dicts ------------------------------------------------------------------ */

jlist *jlist_new(jrender *r, int kind, size_t cap) {
    jlist *l = jmalloc(r, sizeof *l);
    l->h.refs = 1;
    l->h.type = JV_LIST;
    l->kind = (uint8_t)kind;
    l->n = 0;
    l->cap = cap;
    l->v = NULL;
    if (cap) {
        if (cap > r->max_mem / sizeof(jv)) jfail(r, NULL, "a list of %zu items is over the memory limit", cap);
        l->v = jmalloc(r, cap * sizeof(jv));
    }
    return l;
}

void jlist_push(jrender *r, jlist *l, jv v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        if (cap > r->max_mem / sizeof(jv)) { jv_unref(r, v); jfail(r, NULL, "a list grew over the memory limit"); }
        l->v = jrealloc(r, l->v, cap * sizeof(jv));
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

jdict *jdict_new(jrender *r, int type) {
    jdict *d = jmalloc(r, sizeof *d);
    memset(d, 0, sizeof *d);
    d->h.refs = 1;
    d->h.type = (uint8_t)type;
    return d;
}

static uint32_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x | 1;
}

static uint32_t key_hash(jrender *r, const jnode *at, jv k) {
    switch (k.t) {
    case JV_STR: return jstr_hash(jv_str(k));
    case JV_INT: case JV_BOOL: return mix64((uint64_t)k.u.i);
    case JV_FLOAT:
        if (k.u.f == floor(k.u.f) && fabs(k.u.f) < 9.2e18) return mix64((uint64_t)(int64_t)k.u.f);
        { uint64_t b; memcpy(&b, &k.u.f, 8); return mix64(b); }
    case JV_NONE: return 0x9e3779b9u;
    case JV_FUNC: return mix64(k.aux + 77u);
    case JV_LIST:
        if (jv_list(k)->kind == JL_TUPLE) {
            uint32_t h = 0x345678u;
            for (size_t i = 0; i < jv_list(k)->n; i++) h = (h * 1000003u) ^ key_hash(r, at, jv_list(k)->v[i]);
            return h | 1;
        }
        break;
    case JV_NS: case JV_MACRO: case JV_METHOD: case JV_LOOP:
        return mix64((uint64_t)(uintptr_t)k.u.o);
    default:
        break;
    }
    if (k.t == JV_UNDEF) jfail_undef(r, at, k);
    jfail(r, at, "unhashable type: '%s'", jv_type_name(k));
}

int jv_hashable(jv v) {
    if (v.t == JV_DICT) return 0;
    if (v.t != JV_LIST) return 1;
    jlist *l = jv_list(v);
    if (l->kind == JL_GEN) return 1;
    if (l->kind != JL_TUPLE) return 0;
    for (size_t i = 0; i < l->n; i++)
        if (!jv_hashable(l->v[i])) return 0;
    return 1;
}

static int key_eq(jrender *r, jv a, jv b) {
    if (a.t == JV_STR && b.t == JV_STR)
        return jv_str(a)->len == jv_str(b)->len && !memcmp(jv_str(a)->s, jv_str(b)->s, jv_str(a)->len);
    if (a.t == JV_STR || b.t == JV_STR) return 0;
    return jv_eq(r, NULL, a, b);
}

static void reindex(jrender *r, const jnode *at, jdict *d) {
    size_t icap = 16;
    while (icap < d->n * 2 + 2) icap *= 2;
    jfree(r, d->idx);
    d->idx = jmalloc(r, icap * sizeof *d->idx);
    memset(d->idx, 0, icap * sizeof *d->idx);
    d->icap = icap;
    for (size_t i = 0; i < d->n; i++) {
        size_t j = key_hash(r, at, d->k[i]) & (icap - 1);
        while (d->idx[j]) j = (j + 1) & (icap - 1);
        d->idx[j] = (uint32_t)(i + 1);
    }
}

static long dict_find(jrender *r, const jnode *at, const jdict *d, jv key) {
    if (!d->idx) {
        for (size_t i = 0; i < d->n; i++)
            if (key_eq(r, d->k[i], key)) return (long)i;
        if (key.t != JV_STR) key_hash(r, at, key);     /* an unhashable key fails as in Python */
        return -1;
    }
    size_t j = key_hash(r, at, key) & (d->icap - 1);
    while (d->idx[j]) {
        size_t i = d->idx[j] - 1;
        if (key_eq(r, d->k[i], key)) return (long)i;
        j = (j + 1) & (d->icap - 1);
    }
    return -1;
}

jv *jdict_get(jrender *r, const jdict *d, jv key) {
    long i = dict_find(r, NULL, d, key);
    return i < 0 ? NULL : &d->v[i];
}

jv *jdict_get_str(const jdict *d, const jstr *key) {
    if (!d->idx) {
        for (size_t i = 0; i < d->n; i++) {
            if (d->k[i].t != JV_STR) continue;
            const jstr *k = jv_str(d->k[i]);
            if (k->len == key->len && !memcmp(k->s, key->s, key->len)) return &d->v[i];
        }
        return NULL;
    }
    size_t j = jstr_hash(key) & (d->icap - 1);
    while (d->idx[j]) {
        size_t i = d->idx[j] - 1;
        if (d->k[i].t == JV_STR) {
            const jstr *k = jv_str(d->k[i]);
            if (k->len == key->len && !memcmp(k->s, key->s, key->len)) return &d->v[i];
        }
        j = (j + 1) & (d->icap - 1);
    }
    return NULL;
}

void jdict_set(jrender *r, const jnode *at, jdict *d, jv key, jv v) {
    long i = dict_find(r, at, d, key);
    if (i >= 0) {
        jv old = d->v[i];
        d->v[i] = v;
        jv_unref(r, old);
        jv_unref(r, key);
        return;
    }
    if (key.t != JV_STR) key_hash(r, at, key);
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 4;
        if (cap > r->max_mem / sizeof(jv)) jfail(r, at, "a dict grew over the memory limit");
        d->k = jrealloc(r, d->k, cap * sizeof(jv));
        d->v = jrealloc(r, d->v, cap * sizeof(jv));
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n] = v;
    d->n++;
    if (d->idx && d->n * 2 + 2 <= d->icap) {
        size_t j = key_hash(r, at, key) & (d->icap - 1);
        while (d->idx[j]) j = (j + 1) & (d->icap - 1);
        d->idx[j] = (uint32_t)d->n;
    } else if (d->n > 8) {
        reindex(r, at, d);
    }
}

int jdict_del(jrender *r, const jnode *at, jdict *d, jv key) {
    long i = dict_find(r, at, d, key);
    if (i < 0) return 0;
    jv k = d->k[i], v = d->v[i];
    memmove(d->k + i, d->k + i + 1, (d->n - (size_t)i - 1) * sizeof(jv));
    memmove(d->v + i, d->v + i + 1, (d->n - (size_t)i - 1) * sizeof(jv));
    d->n--;
    if (d->idx) reindex(r, at, d);
    jv_unref(r, k);
    jv_unref(r, v);
    return 1;
}

/* ---- output buffers -------------------------------------------------------------------- */

void jbuf_put(jrender *r, jbuf *b, const char *s, size_t n) {
    if (!n) return;
    if (n >= 64) jcharge(r, n >> 6);
    if (n > r->max_output || b->n > r->max_output - n)
        jfail(r, NULL, "the output is longer than the limit of %zu bytes", r->max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = jrealloc(r, b->p, cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void jbuf_putc(jrender *r, jbuf *b, char c) { jbuf_put(r, b, &c, 1); }

jv jbuf_take(jrender *r, jbuf *b) {
    jv v = jv_strn(r, b->p ? b->p : "", b->n);
    jfree(r, b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    return v;
}

/* ---- types, truth, equality, order ------------------------------------------------------ */

const char *jv_type_name(jv v) {
    switch (v.t) {
    case JV_UNDEF: return "Undefined";
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST:
        switch (jv_list(v)->kind) {
        case JL_TUPLE: return "tuple";
        case JL_ITEMS: return "dict_items";
        case JL_KEYS: return "dict_keys";
        case JL_VALUES: return "dict_values";
        case JL_GEN: return "generator";
        default: return "list";
        }
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_MACRO: return "Macro";
    case JV_FUNC: return "function";
    case JV_METHOD: return "builtin_function_or_method";
    case JV_LOOP: return "LoopContext";
    default: return "object";
    }
}

int jv_truthy(jv v) {
    switch (v.t) {
    case JV_UNDEF: case JV_NONE: return 0;
    case JV_BOOL: case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0;
    case JV_STR: return jv_str(v)->len > 0;
    case JV_LIST: return jv_list(v)->kind == JL_GEN || jv_list(v)->n > 0;
    case JV_DICT: return jv_dict(v)->n > 0;
    default: return 1;
    }
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }

/* a == b for numbers, exact between int and float as in Python */
static int num_eq(jv a, jv b) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) return a.u.i == b.u.i;
    if (a.t == JV_FLOAT && b.t == JV_FLOAT) return a.u.f == b.u.f;
    double f = a.t == JV_FLOAT ? a.u.f : b.u.f;
    int64_t i = a.t == JV_FLOAT ? b.u.i : a.u.i;
    if (f != floor(f) || !(f >= -9223372036854775808.0 && f < 9223372036854775808.0)) return 0;
    return (int64_t)f == i;
}

static int num_cmp(jv a, jv b) {
    if (a.t != JV_FLOAT && b.t != JV_FLOAT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
    double x = a.t == JV_FLOAT ? a.u.f : (double)a.u.i, y = b.t == JV_FLOAT ? b.u.f : (double)b.u.i;
    if (x != x || y != y) return 2;                  /* NaN: unordered */
    return (x > y) - (x < y);
}

static int eq_nest(jrender *r, const jnode *at, jv a, jv b, int depth) {
    jcharge(r, 1);
    if (depth > JV_MAX_NEST) jfail(r, at, "values nested more than %d deep", JV_MAX_NEST);
    if (is_num(a) && is_num(b)) return num_eq(a, b);
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JV_UNDEF: case JV_NONE: return 1;
    case JV_STR:
        return jv_str(a)->len == jv_str(b)->len && !memcmp(jv_str(a)->s, jv_str(b)->s, jv_str(a)->len);
    case JV_LIST: {
        jlist *x = jv_list(a), *y = jv_list(b);
        if (x == y) return 1;
        if (x->kind != y->kind || x->kind == JL_GEN || x->kind == JL_VALUES || x->n != y->n) return 0;
        for (size_t i = 0; i < x->n; i++)
            if (!eq_nest(r, at, x->v[i], y->v[i], depth + 1)) return 0;
        return 1;
    }
    case JV_DICT: {
        jdict *x = jv_dict(a), *y = jv_dict(b);
        if (x == y) return 1;
        if (x->n != y->n) return 0;
        for (size_t i = 0; i < x->n; i++) {
            long j = dict_find(r, at, y, x->k[i]);
            if (j < 0 || !eq_nest(r, at, x->v[i], y->v[j], depth + 1)) return 0;
        }
        return 1;
    }
    case JV_FUNC: return a.aux == b.aux;
    default: return a.u.o == b.u.o;
    }
}

int jv_eq(jrender *r, const jnode *at, jv a, jv b) { return eq_nest(r, at, a, b, 0); }

static int cmp_nest(jrender *r, const jnode *at, jv a, jv b, const char *op, int depth) {
    if (depth > JV_MAX_NEST) jfail(r, at, "values nested more than %d deep", JV_MAX_NEST);
    if (a.t == JV_UNDEF) jfail_undef(r, at, a);
    if (b.t == JV_UNDEF) jfail_undef(r, at, b);
    if (is_num(a) && is_num(b)) return num_cmp(a, b);
    if (a.t == JV_STR && b.t == JV_STR) {
        jstr *x = jv_str(a), *y = jv_str(b);
        int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
        if (c) return c < 0 ? -1 : 1;
        return (x->len > y->len) - (x->len < y->len);
    }
    if (a.t == JV_LIST && b.t == JV_LIST && jv_list(a)->kind == jv_list(b)->kind &&
        (jv_list(a)->kind == JL_LIST || jv_list(a)->kind == JL_TUPLE)) {
        jlist *x = jv_list(a), *y = jv_list(b);
        for (size_t i = 0; i < x->n && i < y->n; i++)
            if (!eq_nest(r, at, x->v[i], y->v[i], depth + 1)) return cmp_nest(r, at, x->v[i], y->v[i], op, depth + 1);
        return (x->n > y->n) - (x->n < y->n);
    }
    jfail(r, at, "'%s' not supported between instances of '%s' and '%s'", op, jv_type_name(a), jv_type_name(b));
}

int jv_cmp(jrender *r, const jnode *at, jv a, jv b, const char *op) { return cmp_nest(r, at, a, b, op, 0); }

/* ---- str(), repr() ---------------------------------------------------------------------- */

void jfloat_repr(double f, char out[40]) {
    if (f != f) { strcpy(out, "nan"); return; }
    if (isinf(f)) { strcpy(out, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { strcpy(out, signbit(f) ? "-0.0" : "0.0"); return; }
    char tmp[40];
    for (int p = 1; p <= 17; p++) {      /* the fewest digits that read back as f */
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    const char *s = tmp;
    char *o = out;
    if (*s == '-') { *o++ = '-'; s++; }
    char dig[24];
    int nd = 0;
    for (; *s && *s != 'e' && nd < 20; s++)
        if (*s != '.') dig[nd++] = *s;
    int e = *s == 'e' ? atoi(s + 1) : 0;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    if (e >= -4 && e < 16) {                /* Python's repr: fixed notation in this range */
        if (e >= 0) {
            for (int i = 0; i <= e; i++) *o++ = i < nd ? dig[i] : '0';
            *o++ = '.';
            if (nd > e + 1) for (int i = e + 1; i < nd; i++) *o++ = dig[i];
            else *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -e - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = dig[i];
        }
        *o = 0;
    } else {
        *o++ = dig[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = dig[i];
        }
        snprintf(o, 16, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
    }
}

static int printable(uint32_t cp) {
    if (cp == ' ') return 1;
    int c = pk_unicode_class(cp);
    return c != PK_UC_CONTROL && c != PK_UC_SEPARATOR && c != PK_UC_UNASSIGNED;
}

/* Python's repr of a str */
static void repr_str(jrender *r, jbuf *b, const char *s, size_t n) {
    char q = '\'';
    if (memchr(s, '\'', n) && !memchr(s, '"', n)) q = '"';
    jbuf_putc(r, b, q);
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != (unsigned char)q && c != '\\') { i++; run++; continue; }
        jbuf_put(r, b, s + i - run, run);
        run = 0;
        char e[16];
        if (c < 0x80) {
            i++;
            if (c == (unsigned char)q || c == '\\') { e[0] = '\\'; e[1] = (char)c; e[2] = 0; }
            else if (c == '\n') strcpy(e, "\\n");
            else if (c == '\r') strcpy(e, "\\r");
            else if (c == '\t') strcpy(e, "\\t");
            else snprintf(e, sizeof e, "\\x%02x", c);
            jbuf_puts(r, b, e);
            continue;
        }
        uint32_t cp;
        int k = pk_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        if (cp == 0xFFFD && k == 1 && !(n - i >= 3 && !memcmp(s + i, "\xef\xbf\xbd", 3))) {
            snprintf(e, sizeof e, "\\udc%02x", c);        /* a stray byte, as surrogateescape shows it */
            jbuf_puts(r, b, e);
        } else if (printable(cp)) {
            jbuf_put(r, b, s + i, (size_t)k);
        } else {
            if (cp <= 0xff) snprintf(e, sizeof e, "\\x%02x", cp);
            else if (cp <= 0xffff) snprintf(e, sizeof e, "\\u%04x", cp);
            else snprintf(e, sizeof e, "\\U%08x", cp);
            jbuf_puts(r, b, e);
        }
        i += (size_t)k;
    }
    jbuf_put(r, b, s + n - run, run);
    jbuf_putc(r, b, q);
}

static void repr_seq(jrender *r, const jnode *at, jbuf *b, jlist *l, int depth) {
    const char *open = "[", *close = "]";
    switch (l->kind) {
    case JL_TUPLE: open = "("; close = l->n == 1 ? ",)" : ")"; break;
    case JL_ITEMS: open = "dict_items(["; close = "])"; break;
    case JL_KEYS: open = "dict_keys(["; close = "])"; break;
    case JL_VALUES: open = "dict_values(["; close = "])"; break;
    case JL_GEN: jbuf_puts(r, b, "<generator object>"); return;
    default: break;
    }
    jbuf_puts(r, b, open);
    for (size_t i = 0; i < l->n; i++) {
        if (i) jbuf_put(r, b, ", ", 2);
        jv_repr_to(r, at, b, l->v[i], depth + 1);
    }
    jbuf_puts(r, b, close);
}

static void repr_dict(jrender *r, const jnode *at, jbuf *b, jdict *d, int depth) {
    jbuf_putc(r, b, '{');
    for (size_t i = 0; i < d->n; i++) {
        if (i) jbuf_put(r, b, ", ", 2);
        jv_repr_to(r, at, b, d->k[i], depth + 1);
        jbuf_put(r, b, ": ", 2);
        jv_repr_to(r, at, b, d->v[i], depth + 1);
    }
    jbuf_putc(r, b, '}');
}

static void put_other(jrender *r, const jnode *at, jbuf *b, jv v, int depth) {
    char tmp[80];
    switch (v.t) {
    case JV_NONE: jbuf_put(r, b, "None", 4); break;
    case JV_BOOL: jbuf_puts(r, b, v.u.i ? "True" : "False"); break;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); jbuf_puts(r, b, tmp); break;
    case JV_FLOAT: jfloat_repr(v.u.f, tmp); jbuf_puts(r, b, tmp); break;
    case JV_LIST: repr_seq(r, at, b, jv_list(v), depth); break;
    case JV_DICT: repr_dict(r, at, b, jv_dict(v), depth); break;
    case JV_NS:
        jbuf_puts(r, b, "<Namespace ");
        repr_dict(r, at, b, jv_dict(v), depth);
        jbuf_putc(r, b, '>');
        break;
    case JV_MACRO: {
        const jnode *d = ((jmacro *)v.u.o)->def;
        jbuf_puts(r, b, "<Macro ");
        if (d->name) repr_str(r, b, d->name->s, d->name->len);
        else jbuf_puts(r, b, "'caller'");
        jbuf_putc(r, b, '>');
        break;
    }
    case JV_FUNC:
        snprintf(tmp, sizeof tmp, "<function %s>", jglobal_name(v.aux));
        jbuf_puts(r, b, tmp);
        break;
    case JV_METHOD: jbuf_puts(r, b, "<built-in method>"); break;
    case JV_LOOP: {
        jloop *l = (jloop *)v.u.o;
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", l->i + 1, l->seq->n);
        jbuf_puts(r, b, tmp);
        break;
    }
    default: break;
    }
}

void jv_repr_to(jrender *r, const jnode *at, jbuf *b, jv v, int depth) {
    if (depth > JV_MAX_NEST) jfail(r, at, "values nested more than %d deep", JV_MAX_NEST);
    if (v.t == JV_STR) repr_str(r, b, jv_str(v)->s, jv_str(v)->len);
    else if (v.t == JV_UNDEF) jbuf_puts(r, b, "Undefined");
    else put_other(r, at, b, v, depth);
}

void jv_str_to(jrender *r, const jnode *at, jbuf *b, jv v) {
    if (v.t == JV_STR) jbuf_put(r, b, jv_str(v)->s, jv_str(v)->len);
    else if (v.t != JV_UNDEF) put_other(r, at, b, v, 0);
}

jv jv_to_str(jrender *r, const jnode *at, jv v) {
    if (v.t == JV_STR) return jv_ref(v);
    jbuf b = {0};
    jv_str_to(r, at, &b, v);
    return jbuf_take(r, &b);
}

/* ---- json.dumps ---------------------------------------------------------------------------- */

static void json_str(jrender *r, jbuf *b, const char *s, size_t n, int ensure_ascii) {
    jbuf_putc(r, b, '"');
    size_t i = 0, run = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\' && (c < 0x80 || !ensure_ascii)) { i++; run++; continue; }
        jbuf_put(r, b, s + i - run, run);
        run = 0;
        char e[16];
        if (c < 0x80) {
            i++;
            switch (c) {
            case '"': strcpy(e, "\\\""); break;
            case '\\': strcpy(e, "\\\\"); break;
            case '\n': strcpy(e, "\\n"); break;
            case '\r': strcpy(e, "\\r"); break;
            case '\t': strcpy(e, "\\t"); break;
            case '\b': strcpy(e, "\\b"); break;
            case '\f': strcpy(e, "\\f"); break;
            default: snprintf(e, sizeof e, "\\u%04x", c); break;
            }
            jbuf_puts(r, b, e);
            continue;
        }
        uint32_t cp;
        i += (size_t)pk_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            snprintf(e, sizeof e, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
        } else {
            snprintf(e, sizeof e, "\\u%04x", cp);
        }
        jbuf_puts(r, b, e);
    }
    jbuf_put(r, b, s + n - run, run);
    jbuf_putc(r, b, '"');
}

static void json_float(jrender *r, jbuf *b, double f) {
    char tmp[40];
    if (f != f) strcpy(tmp, "NaN");
    else if (isinf(f)) strcpy(tmp, f < 0 ? "-Infinity" : "Infinity");
    else jfloat_repr(f, tmp);
    jbuf_puts(r, b, tmp);
}

static void json_newline(jrender *r, jbuf *b, const char *indent, int level) {
    jbuf_putc(r, b, '\n');
    for (int i = 0; i < level; i++) jbuf_puts(r, b, indent);
}

/* A dict key as json.dumps writes it. */
static void json_key(jrender *r, const jnode *at, jbuf *b, jv k, int ensure_ascii) {
    char tmp[40];
    switch (k.t) {
    case JV_STR: json_str(r, b, jv_str(k)->s, jv_str(k)->len, ensure_ascii); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "\"%lld\"", (long long)k.u.i); break;
    case JV_BOOL: strcpy(tmp, k.u.i ? "\"true\"" : "\"false\""); break;
    case JV_NONE: strcpy(tmp, "\"null\""); break;
    case JV_FLOAT: {
        jbuf kb = {0};
        json_float(r, &kb, k.u.f);
        jv s = jbuf_take(r, &kb);
        json_str(r, b, jv_str(s)->s, jv_str(s)->len, ensure_ascii);
        jv_unref(r, s);
        return;
    }
    default:
        jfail(r, at, "tojson: keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
    jbuf_puts(r, b, tmp);
}

static int cmp_keys(const void *a, const void *b) {
    const jstr *x = *(const jstr *const *)a, *y = *(const jstr *const *)b;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

void jv_json_to(jrender *r, const jnode *at, jbuf *b, jv v, int ensure_ascii, const char *indent,
                const char *item_sep, const char *key_sep, int sort_keys, int depth) {
    if (depth > JV_MAX_NEST) jfail(r, at, "tojson: values nested more than %d deep", JV_MAX_NEST);
    if (!item_sep) item_sep = indent ? "," : ", ";
    if (!key_sep) key_sep = ": ";
    char tmp[40];
    switch (v.t) {
    case JV_NONE: jbuf_puts(r, b, "null"); return;
    case JV_BOOL: jbuf_puts(r, b, v.u.i ? "true" : "false"); return;
    case JV_INT: snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i); jbuf_puts(r, b, tmp); return;
    case JV_FLOAT: json_float(r, b, v.u.f); return;
    case JV_STR: json_str(r, b, jv_str(v)->s, jv_str(v)->len, ensure_ascii); return;
    case JV_LIST: {
        jlist *l = jv_list(v);
        if (l->kind != JL_LIST && l->kind != JL_TUPLE) break;
        if (!l->n) { jbuf_put(r, b, "[]", 2); return; }
        jbuf_putc(r, b, '[');
        if (indent) json_newline(r, b, indent, depth + 1);
        for (size_t i = 0; i < l->n; i++) {
            if (i) {
                jbuf_puts(r, b, item_sep);
                if (indent) json_newline(r, b, indent, depth + 1);
            }
            jv_json_to(r, at, b, l->v[i], ensure_ascii, indent, item_sep, key_sep, sort_keys, depth + 1);
        }
        if (indent) json_newline(r, b, indent, depth);
        jbuf_putc(r, b, ']');
        return;
    }
    case JV_DICT: {
        jdict *d = jv_dict(v);
        if (!d->n) { jbuf_put(r, b, "{}", 2); return; }
        size_t *order = NULL;
        if (sort_keys) {
            for (size_t i = 0; i < d->n; i++)
                if (d->k[i].t != JV_STR) jfail(r, at, "tojson: sort_keys with keys that are not all strings");
            const jstr **ks = jmalloc(r, d->n * sizeof *ks);
            for (size_t i = 0; i < d->n; i++) ks[i] = jv_str(d->k[i]);
            qsort(ks, d->n, sizeof *ks, cmp_keys);
            order = jmalloc(r, d->n * sizeof *order);
            for (size_t i = 0; i < d->n; i++) {
                jv *hit = jdict_get_str(d, ks[i]);
                order[i] = (size_t)(hit - d->v);
            }
            jfree(r, (void *)ks);
        }
        jbuf_putc(r, b, '{');
        if (indent) json_newline(r, b, indent, depth + 1);
        for (size_t i = 0; i < d->n; i++) {
            size_t j = order ? order[i] : i;
            if (i) {
                jbuf_puts(r, b, item_sep);
                if (indent) json_newline(r, b, indent, depth + 1);
            }
            json_key(r, at, b, d->k[j], ensure_ascii);
            jbuf_puts(r, b, key_sep);
            jv_json_to(r, at, b, d->v[j], ensure_ascii, indent, item_sep, key_sep, sort_keys, depth + 1);
        }
        if (indent) json_newline(r, b, indent, depth);
        jbuf_putc(r, b, '}');
        jfree(r, order);
        return;
    }
    default:
        break;
    }
    jfail(r, at, "tojson: Object of type %s is not JSON serializable", jv_type_name(v));
}

/* ---- JSON to values -------------------------------------------------------------------------- */

jv jv_from_json(jrender *r, json_t *j, int depth) {
    if (depth > JV_MAX_NEST) jfail(r, NULL, "the variables are nested more than %d deep", JV_MAX_NEST);
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        jdict *d = jdict_new(r, JV_DICT);
        jv dv = jv_obj(JV_DICT, d);
        const char *k;
        json_t *x;
        json_object_foreach(j, k, x) {
            jv key = jv_strn(r, k, strlen(k));
            jdict_set(r, NULL, d, key, jv_from_json(r, x, depth + 1));
        }
        return dv;
    }
    case JSON_ARRAY: {
        jlist *l = jlist_new(r, JL_LIST, json_array_size(j));
        for (size_t i = 0; i < json_array_size(j); i++) jlist_push(r, l, jv_from_json(r, json_array_get(j, i), depth + 1));
        return jv_obj(JV_LIST, l);
    }
    case JSON_STRING: return jv_strn(r, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(1);
    case JSON_FALSE: return jv_bool(0);
    default: return jv_none();
    }
}
