/* text/jinja_lib.c - what a Jinja template can call: Jinja2's filters and
 * tests (the methods of str, list and dict, loop.cycle / loop.changed and
 * the globals are text/jinja_method.c; the string work they share is
 * text/jinja_str.c). Each follows the Python function it stands for - its
 * arguments (positional or by keyword), its result's type (map, select,
 * reject, items, unique and reverse give generators, as Jinja2 3.1 does: no
 * length, always true), and its errors.
 *
 * tojson is Hugging Face's: json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False) - keys in insertion order, non-ASCII
 * kept, no HTML escaping (Jinja2's own tojson escapes <>&' and sorts keys). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/jinja_internal.h"
#include "text/unicode.h"

/* ---- filters ----------------------------------------------------------------------------------- */

enum {
    F_ABS, F_ATTR, F_CAPITALIZE, F_CENTER, F_COUNT, F_D, F_DEFAULT, F_DICTSORT, F_E, F_ESCAPE, F_FIRST,
    F_FLOAT, F_FORCEESCAPE, F_FORMAT, F_INDENT, F_INT, F_ITEMS, F_JOIN, F_LAST, F_LENGTH, F_LIST, F_LOWER,
    F_MAP, F_MAX, F_MIN, F_REJECT, F_REJECTATTR, F_REPLACE, F_REVERSE, F_ROUND, F_SAFE, F_SELECT,
    F_SELECTATTR, F_SORT, F_STRING, F_SUM, F_TITLE, F_TOJSON, F_TRIM, F_TRUNCATE, F_UNIQUE, F_UPPER,
    F_WORDCOUNT, F_COUNT_
};
static const char *const filter_names[F_COUNT_] = {
    "abs", "attr", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first",
    "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list", "lower",
    "map", "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select",
    "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "truncate", "unique", "upper",
    "wordcount",
};

int jname_in(const char *const *names, int n, const char *s, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], s, len)) return i;
    return -1;
}

int jfilter_id(const char *name, size_t n) { return jname_in(filter_names, F_COUNT_, name, n); }

jv jhtml_escape(jrender *r, jv s) {
    jbuf b = {0};
    jstr *x = jv_str(s);
    for (size_t i = 0; i < x->len; i++) {
        switch (x->s[i]) {
        case '&': jbuf_puts(r, &b, "&amp;"); break;
        case '<': jbuf_puts(r, &b, "&lt;"); break;
        case '>': jbuf_puts(r, &b, "&gt;"); break;
        case '"': jbuf_puts(r, &b, "&#34;"); break;
        case '\'': jbuf_puts(r, &b, "&#39;"); break;
        default: jbuf_putc(r, &b, x->s[i]);
        }
    }
    return jwith_flags(jbuf_take(r, &b), JVF_SAFE);
}

static jv html_escape_v(jrender *r, const jnode *at, jv v, int force) {
    if (v.t == JV_STR && (v.flags & JVF_SAFE) && !force) return jv_ref(v);
    jv s = jsoft_str(r, at, v);
    jv e = jhtml_escape(r, s);
    jv_unref(r, s);
    return e;
}

/* select / reject / selectattr / rejectattr: the test and its arguments
 * start at a->pos[first] */
static jv select_items(jrender *r, const jnode *at, jv v, const jargs *a, int by_attr, int keep) {
    int first = by_attr ? 1 : 0;
    if (by_attr && a->npos < 1) jfail(r, at, "selectattr / rejectattr need an attribute");
    int test = -1;
    if (a->npos > first) {
        jstr *tn = jarg_str(r, at, a->pos[first], "the test name");
        test = jtest_id(tn->s, tn->len);
        if (test < 0) jfail(r, at, "no test named '%s'", tn->s);
    }
    jargs ta = {.pos = a->pos + first + 1, .npos = a->npos > first + 1 ? a->npos - first - 1 : 0,
                .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    jlist *in = jiter_list(r, at, v);
    jlist *out = jnew_list(r, JL_GEN);
    for (size_t i = 0; i < in->n; i++) {
        jv x = by_attr ? jget_path(r, at, in->v[i], a->pos[0]) : jv_ref(in->v[i]);
        int ok = test < 0 ? jv_truthy(x) : jtest_apply(r, at, test, x, &ta);
        jv_unref(r, x);
        if (ok == keep) jlist_push(r, out, jv_ref(in->v[i]));
    }
    jv_unref(r, jv_obj(JV_LIST, in));
    return jv_obj(JV_LIST, out);
}

static jv round_value(jrender *r, const jnode *at, jv v, int64_t prec, jstr *method) {
    if (v.t != JV_INT && v.t != JV_BOOL && v.t != JV_FLOAT) {
        if (v.t == JV_UNDEF) jfail_undef(r, at, v);
        jfail(r, at, "type %s doesn't define __round__ method", jv_type_name(v));
    }
    int common = !method || (method->len == 6 && !memcmp(method->s, "common", 6));
    if (!common && !(method->len == 4 && !memcmp(method->s, "ceil", 4)) && !(method->len == 5 && !memcmp(method->s, "floor", 5)))
        jfail(r, at, "method must be common, ceil or floor");
    if (prec > 300) prec = 300;
    if (prec < -300) prec = -300;
    if (common && v.t != JV_FLOAT) {
        if (prec >= 0) return jv_int(v.u.i);
        double p = pow(10.0, (double)-prec), q = (double)v.u.i / p, fq = floor(q), d = q - fq;
        if (d > 0.5 || (d == 0.5 && fmod(fq, 2.0) != 0)) fq += 1;
        if (!(fabs(fq * p) < 9.2e18)) jfail(r, at, "round: the result is out of pocket's 64-bit integer range");
        return jv_int((int64_t)(fq * p));
    }
    double x = v.t == JV_FLOAT ? v.u.f : (double)v.u.i;
    if (!isfinite(x)) return jv_float(x);
    if (common) {
        if (prec >= 0) {
            char buf[400];
            snprintf(buf, sizeof buf, "%.*f", (int)(prec > 340 ? 340 : prec), x);  /* correctly rounded, half to even */
            return jv_float(strtod(buf, NULL));
        }
        double p = pow(10.0, (double)-prec), q = x / p, fq = floor(q), d = q - fq;
        if (d > 0.5 || (d == 0.5 && fmod(fq, 2.0) != 0)) fq += 1;
        return jv_float(fq * p);
    }
    double p = pow(10.0, (double)prec);
    double y = method->s[0] == 'c' ? ceil(x * p) : floor(x * p);
    return jv_float(y / p);
}

/* The text of a number without '_' and surrounding white space, or NULL if
 * it cannot be one (too long, hexadecimal for float()). */
static const char *number_text(jstr *s, char *buf, size_t cap, int allow_hex) {
    size_t a = 0, b = s->len, k = 0;
    while (a < b && jspace((unsigned char)s->s[a])) a++;
    while (b > a && jspace((unsigned char)s->s[b - 1])) b--;
    if (b == a || b - a >= cap) return NULL;
    for (size_t i = a; i < b; i++) {
        char c = s->s[i];
        if (!c || (!allow_hex && (c == 'x' || c == 'X'))) return NULL;
        if (c == '_') {
            if (i == a || i + 1 == b || s->s[i - 1] == '_') return NULL;
            continue;
        }
        buf[k++] = c;
    }
    buf[k] = 0;
    return buf;
}

/* Python's float(v); 0 if it raises */
static int to_float(jv v, double *out) {
    switch (v.t) {
    case JV_FLOAT: *out = v.u.f; return 1;
    case JV_INT: case JV_BOOL: *out = (double)v.u.i; return 1;
    case JV_STR: {
        char buf[80], *end;
        const char *t = number_text(jv_str(v), buf, sizeof buf, 0);
        if (!t) return 0;
        *out = strtod(t, &end);
        return end != t && !*end;
    }
    default:
        return 0;
    }
}

/* Jinja2's int filter: int(v, base), else int(float(v)); 0 if both raise */
static int to_int(jv v, int64_t base, int64_t *out) {
    switch (v.t) {
    case JV_INT: case JV_BOOL: *out = v.u.i; return 1;
    case JV_FLOAT:
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) return 0;
        *out = (int64_t)v.u.f;
        return 1;
    case JV_STR: {
        char buf[80], *end;
        const char *t = number_text(jv_str(v), buf, sizeof buf, base == 16 || base == 0);
        if (!t) return 0;
        errno = 0;
        long long x = strtoll(t, &end, (int)(base >= 2 && base <= 36 ? base : 10));
        if (end != t && !*end && !errno) { *out = x; return 1; }
        double f;
        if (!to_float(v, &f) || !isfinite(f) || fabs(f) >= 9.2e18) return 0;
        *out = (int64_t)f;
        return 1;
    }
    default:
        return 0;
    }
}

static jv do_tojson(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    jv p[4];
    jbind(r, at, "tojson", a, params, p);
    char ind[64];
    const char *indent = NULL;
    if (jv_given(p[1]) && p[1].t != JV_NONE) {
        if (p[1].t == JV_INT || p[1].t == JV_BOOL) {
            int64_t k = p[1].u.i < 0 ? 0 : p[1].u.i > 63 ? 63 : p[1].u.i;
            memset(ind, ' ', (size_t)k);
            ind[k] = 0;
            indent = ind;
        } else if (p[1].t == JV_STR) {
            indent = jv_str(p[1])->s;
        } else {
            jfail(r, at, "tojson: indent must be an integer or a string");
        }
    }
    const char *isep = NULL, *ksep = NULL;
    if (jv_given(p[2]) && p[2].t != JV_NONE) {
        if (p[2].t != JV_LIST || jv_list(p[2])->n != 2 || jv_list(p[2])->v[0].t != JV_STR || jv_list(p[2])->v[1].t != JV_STR)
            jfail(r, at, "tojson: separators must be a pair of strings");
        isep = jv_str(jv_list(p[2])->v[0])->s;
        ksep = jv_str(jv_list(p[2])->v[1])->s;
    }
    jbuf b = {0};
    jv_json_to(r, at, &b, v, jarg_bool(p[0], 0), indent, isep, ksep, jarg_bool(p[3], 0), 0);
    return jbuf_take(r, &b);
}

static jv do_indent(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"width", "first", "blank", NULL};
    jv p[3];
    jbind(r, at, "indent", a, params, p);
    jv ind;
    if (jv_given(p[0]) && p[0].t == JV_STR) ind = jv_ref(p[0]);
    else {
        int64_t w = jarg_int(r, at, p[0], 4, "indent width");
        if (w < 0) w = 0;
        if (w > 4096) jfail(r, at, "indent width over 4096");
        jbuf wb = {0};
        for (int64_t i = 0; i < w; i++) jbuf_putc(r, &wb, ' ');
        ind = jbuf_take(r, &wb);
    }
    jv s = jsoft_str(r, at, v);
    jbuf sb = {0};
    jbuf_put(r, &sb, jv_str(s)->s, jv_str(s)->len);
    jbuf_putc(r, &sb, '\n');                  /* Jinja2 appends a newline before splitlines */
    jv sn = jbuf_take(r, &sb);
    jv lines = jstr_splitlines(r, jv_str(sn), 0);
    jlist *l = jv_list(lines);
    jstr *is = jv_str(ind);
    jbuf b = {0};
    if (jarg_bool(p[1], 0)) jbuf_put(r, &b, is->s, is->len);
    for (size_t i = 0; i < l->n; i++) {
        jstr *line = jv_str(l->v[i]);
        if (i) {
            jbuf_putc(r, &b, '\n');
            if (jarg_bool(p[2], 0) || line->len) jbuf_put(r, &b, is->s, is->len);
        }
        jbuf_put(r, &b, line->s, line->len);
    }
    jv_unref(r, lines);
    jv_unref(r, sn);
    jv_unref(r, ind);
    int flags = v.t == JV_STR ? v.flags : 0;
    jv_unref(r, s);
    return jwith_flags(jbuf_take(r, &b), flags);
}

static jv do_join(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"d", "attribute", NULL};
    jv p[2];
    jbind(r, at, "join", a, params, p);
    jlist *l = jiter_list(r, at, v);
    jbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i && jv_given(p[0])) jv_str_to(r, at, &b, p[0]);
        if (jv_given(p[1]) && p[1].t != JV_NONE) {
            jv x = jget_path(r, at, l->v[i], p[1]);
            jv_str_to(r, at, &b, x);
            jv_unref(r, x);
        } else {
            jv_str_to(r, at, &b, l->v[i]);
        }
    }
    jv_unref(r, jv_obj(JV_LIST, l));
    return jbuf_take(r, &b);
}

static jv do_map(jrender *r, jdict *sc, const jnode *at, jv v, const jargs *a) {
    jv attr = jv_missing(), def = jv_missing();
    for (int k = 0; k < a->nkw; k++) {
        if (a->kwn[k]->len == 9 && !memcmp(a->kwn[k]->s, "attribute", 9)) attr = a->kwv[k];
        else if (a->kwn[k]->len == 7 && !memcmp(a->kwn[k]->s, "default", 7)) def = a->kwv[k];
    }
    jlist *in = jiter_list(r, at, v);
    jlist *out = jnew_list(r, JL_GEN);
    if (jv_given(attr)) {
        if (a->npos) jfail(r, at, "map: positional arguments with attribute=");
        for (size_t i = 0; i < in->n; i++) jlist_push(r, out, jget_path_default(r, at, in->v[i], attr, def));
    } else {
        if (!a->npos) jfail(r, at, "map: no filter or attribute given");
        jstr *fname = jarg_str(r, at, a->pos[0], "the filter name");
        int f = jfilter_id(fname->s, fname->len);
        if (f < 0) jfail(r, at, "no filter named '%s'", fname->s);
        jargs fa = {.pos = a->pos + 1, .npos = a->npos - 1, .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
        for (size_t i = 0; i < in->n; i++) jlist_push(r, out, jfilter_apply(r, sc, at, f, in->v[i], &fa));
    }
    jv_unref(r, jv_obj(JV_LIST, in));
    return jv_obj(JV_LIST, out);
}

static jv do_sort(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"reverse", "case_sensitive", "attribute", NULL};
    jv p[3];
    jbind(r, at, "sort", a, params, p);
    jlist *in = jiter_list(r, at, v);
    size_t n = in->n;
    jv *keys = jmalloc(r, (n + 1) * sizeof *keys), *items = jmalloc(r, (n + 1) * sizeof *items);
    for (size_t i = 0; i < n; i++) {
        keys[i] = jsort_key(r, at, in->v[i], p[2], jarg_bool(p[1], 0));
        items[i] = jv_ref(in->v[i]);
    }
    jv out = jsorted_list(r, at, keys, items, n, jarg_bool(p[0], 0), JL_LIST);
    jfree(r, keys);
    jfree(r, items);
    jv_unref(r, jv_obj(JV_LIST, in));
    return out;
}

static jv do_dictsort(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"case_sensitive", "by", "reverse", NULL};
    jv p[3];
    jbind(r, at, "dictsort", a, params, p);
    if (v.t != JV_DICT) {
        if (v.t == JV_UNDEF) jfail_undef(r, at, v);
        jfail(r, at, "dictsort: '%s' object has no attribute 'items'", jv_type_name(v));
    }
    int by_value = 0;
    if (jv_given(p[1])) {
        jstr *by = jarg_str(r, at, p[1], "by");
        if (by->len == 5 && !memcmp(by->s, "value", 5)) by_value = 1;
        else if (!(by->len == 3 && !memcmp(by->s, "key", 3))) jfail(r, at, "You can only sort by either \"key\" or \"value\"");
    }
    jdict *d = jv_dict(v);
    jv *keys = jmalloc(r, (d->n + 1) * sizeof *keys), *items = jmalloc(r, (d->n + 1) * sizeof *items);
    for (size_t i = 0; i < d->n; i++) {
        keys[i] = jsort_key(r, at, by_value ? d->v[i] : d->k[i], jv_missing(), jarg_bool(p[0], 0));
        items[i] = jtuple2(r, jv_ref(d->k[i]), jv_ref(d->v[i]));
    }
    jv out = jsorted_list(r, at, keys, items, d->n, jarg_bool(p[2], 0), JL_LIST);
    jfree(r, keys);
    jfree(r, items);
    return out;
}

static jv do_unique(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"case_sensitive", "attribute", NULL};
    jv p[2];
    jbind(r, at, "unique", a, params, p);
    jlist *in = jiter_list(r, at, v);
    jlist *seen = jnew_list(r, JL_LIST), *out = jnew_list(r, JL_GEN);
    for (size_t i = 0; i < in->n; i++) {
        jv k = jsort_key(r, at, in->v[i], p[1], jarg_bool(p[0], 0));
        if (!jv_hashable(k)) jfail(r, at, "unhashable type: '%s'", jv_type_name(k));
        int dup = 0;
        for (size_t j = 0; j < seen->n && !dup; j++) dup = jv_eq(r, at, seen->v[j], k);
        if (dup) { jv_unref(r, k); continue; }
        jlist_push(r, seen, k);
        jlist_push(r, out, jv_ref(in->v[i]));
    }
    jv_unref(r, jv_obj(JV_LIST, seen));
    jv_unref(r, jv_obj(JV_LIST, in));
    return jv_obj(JV_LIST, out);
}

static jv do_minmax(jrender *r, const jnode *at, jv v, const jargs *a, int want_max) {
    static const char *const params[] = {"case_sensitive", "attribute", NULL};
    jv p[2];
    jbind(r, at, want_max ? "max" : "min", a, params, p);
    jlist *in = jiter_list(r, at, v);
    jv best = jv_undef(), bestk = jv_undef();
    for (size_t i = 0; i < in->n; i++) {
        jv k = jsort_key(r, at, in->v[i], p[1], jarg_bool(p[0], 0));
        int c = i ? jv_cmp(r, at, k, bestk, want_max ? ">" : "<") : 0;
        if (!i || (c != 2 && (want_max ? c > 0 : c < 0))) {
            jv_unref(r, bestk);
            jv_unref(r, best);
            bestk = k;
            best = jv_ref(in->v[i]);
        } else {
            jv_unref(r, k);
        }
    }
    jv_unref(r, bestk);
    jv_unref(r, jv_obj(JV_LIST, in));
    return best;
}

static jv do_truncate(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"length", "killwords", "end", "leeway", NULL};
    jv p[4];
    jbind(r, at, "truncate", a, params, p);
    int64_t length = jarg_int(r, at, p[0], 255, "length"), leeway = jarg_int(r, at, p[3], 5, "leeway");
    jv s = jsoft_str(r, at, v);
    jstr *end = jv_given(p[2]) ? jarg_str(r, at, p[2], "end") : NULL;
    int64_t endn = end ? (int64_t)jcp_count(end->s, end->len) : 3;
    if (length < endn) jfail(r, at, "expected length >= %lld, got %lld", (long long)endn, (long long)length);
    if (leeway < 0) jfail(r, at, "expected leeway >= 0, got %lld", (long long)leeway);
    int64_t n = (int64_t)jcp_count(jv_str(s)->s, jv_str(s)->len);
    if (n <= length + leeway) return s;
    size_t cut = jcp_offset(jv_str(s)->s, jv_str(s)->len, (size_t)(length - endn));
    if (!jarg_bool(p[1], 0)) {
        size_t k = cut;
        while (k > 0 && jv_str(s)->s[k - 1] != ' ') k--;
        if (k > 0) cut = k - 1;
    }
    jbuf b = {0};
    jbuf_put(r, &b, jv_str(s)->s, cut);
    if (end) jbuf_put(r, &b, end->s, end->len);
    else jbuf_puts(r, &b, "...");
    jv_unref(r, s);
    return jbuf_take(r, &b);
}

static int is_word(uint32_t cp) {
    if (cp == '_') return 1;
    int c = pk_unicode_class(cp);
    return c == PK_UC_LETTER || c == PK_UC_NUMBER;
}

jv jfilter_apply(jrender *r, jdict *sc, const jnode *at, int id, jv v, const jargs *a) {
    jv p[4];
    switch (id) {
    case F_ABS:
        jbind(r, at, "abs", a, (const char *const[]){NULL}, p);
        if (v.t == JV_INT || v.t == JV_BOOL) {
            if (v.u.i == INT64_MIN) jfail(r, at, "integer overflow in abs");
            return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.t == JV_FLOAT) return jv_float(fabs(v.u.f));
        if (v.t == JV_UNDEF) jfail_undef(r, at, v);
        jfail(r, at, "bad operand type for abs(): '%s'", jv_type_name(v));
    case F_ATTR: {
        jbind(r, at, "attr", a, (const char *const[]){"name", NULL}, p);
        jstr *n = jarg_str(r, at, p[0], "attr name");
        if (v.t == JV_NS) {
            jv *x = jdict_get_str(jv_dict(v), n);
            return x ? jv_ref(*x) : jv_undef();
        }
        if (v.t == JV_UNDEF) jfail_undef(r, at, v);
        return jmethod_get(r, v, n->s, n->len);
    }
    case F_CAPITALIZE: case F_LOWER: case F_UPPER: case F_TITLE: {
        jbind(r, at, filter_names[id], a, (const char *const[]){NULL}, p);
        jv s = jsoft_str(r, at, v);
        int mode = id == F_CAPITALIZE ? CASE_CAPITALIZE : id == F_LOWER ? CASE_LOWER : id == F_UPPER ? CASE_UPPER : CASE_WORDS;
        jv o = jcase_map(r, jv_str(s)->s, jv_str(s)->len, mode);
        int flags = v.t == JV_STR ? v.flags : 0;
        jv_unref(r, s);
        return jwith_flags(o, flags);
    }
    case F_CENTER: {
        jbind(r, at, "center", a, (const char *const[]){"width", NULL}, p);
        jv s = jsoft_str(r, at, v);
        jv o = jstr_pad(r, jv_str(s), jarg_int(r, at, p[0], 80, "width"), NULL, 'c');
        jv_unref(r, s);
        return o;
    }
    case F_COUNT: case F_LENGTH:
        jbind(r, at, "length", a, (const char *const[]){NULL}, p);
        return jv_int(jpy_len(r, at, v));
    case F_D: case F_DEFAULT:
        jbind(r, at, "default", a, (const char *const[]){"default_value", "boolean", NULL}, p);
        if (v.t == JV_UNDEF || (jarg_bool(p[1], 0) && !jv_truthy(v)))
            return jv_given(p[0]) ? jv_ref(p[0]) : jv_strn(r, "", 0);
        return jv_ref(v);
    case F_DICTSORT:
        return do_dictsort(r, at, v, a);
    case F_E: case F_ESCAPE: case F_FORCEESCAPE:
        jbind(r, at, filter_names[id], a, (const char *const[]){NULL}, p);
        return html_escape_v(r, at, v, id == F_FORCEESCAPE);
    case F_FIRST: case F_LAST: {
        jbind(r, at, filter_names[id], a, (const char *const[]){NULL}, p);
        if (id == F_LAST && v.t == JV_LIST && jv_list(v)->kind == JL_GEN)
            jfail(r, at, "'generator' object is not reversible");
        jlist *l = jiter_list(r, at, v);
        jv o = l->n ? jv_ref(l->v[id == F_FIRST ? 0 : l->n - 1]) : jv_undef();
        jv_unref(r, jv_obj(JV_LIST, l));
        return o;
    }
    case F_FLOAT: {
        jbind(r, at, "float", a, (const char *const[]){"default", NULL}, p);
        double f;
        if (to_float(v, &f)) return jv_float(f);
        return jv_given(p[0]) ? jv_ref(p[0]) : jv_float(0.0);
    }
    case F_FORMAT: {
        jv s = jsoft_str(r, at, v);
        jv o;
        if (a->nkw) {
            jdict *d = jdict_new(r, JV_DICT);
            for (int k = 0; k < a->nkw; k++) jdict_set(r, at, d, jv_obj(JV_STR, (jobj *)a->kwn[k]), jv_ref(a->kwv[k]));
            o = jpy_format(r, at, s, jv_obj(JV_DICT, d));
            jv_unref(r, jv_obj(JV_DICT, d));
        } else {
            jlist *t = jlist_new(r, JL_TUPLE, (size_t)a->npos);
            for (int i = 0; i < a->npos; i++) jlist_push(r, t, jv_ref(a->pos[i]));
            o = jpy_format(r, at, s, jv_obj(JV_LIST, t));
            jv_unref(r, jv_obj(JV_LIST, t));
        }
        jv_unref(r, s);
        return o;
    }
    case F_INDENT:
        return do_indent(r, at, v, a);
    case F_INT: {
        jbind(r, at, "int", a, (const char *const[]){"default", "base", NULL}, p);
        int64_t x;
        if (to_int(v, jarg_int(r, at, p[1], 10, "base"), &x)) return jv_int(x);
        return jv_given(p[0]) ? jv_ref(p[0]) : jv_int(0);
    }
    case F_ITEMS: {
        jbind(r, at, "items", a, (const char *const[]){NULL}, p);
        jlist *o = jnew_list(r, JL_GEN);
        if (v.t == JV_UNDEF) return jv_obj(JV_LIST, o);
        if (v.t != JV_DICT) jfail(r, at, "Can only get item pairs from a mapping.");
        jdict *d = jv_dict(v);
        for (size_t i = 0; i < d->n; i++) jlist_push(r, o, jtuple2(r, jv_ref(d->k[i]), jv_ref(d->v[i])));
        return jv_obj(JV_LIST, o);
    }
    case F_JOIN:
        return do_join(r, at, v, a);
    case F_LIST: {
        jbind(r, at, "list", a, (const char *const[]){NULL}, p);
        jlist *l = jiter_list(r, at, v);
        jlist *o = jlist_new(r, JL_LIST, l->n);
        for (size_t i = 0; i < l->n; i++) jlist_push(r, o, jv_ref(l->v[i]));
        jv_unref(r, jv_obj(JV_LIST, l));
        return jv_obj(JV_LIST, o);
    }
    case F_MAP:
        return do_map(r, sc, at, v, a);
    case F_MAX: case F_MIN:
        return do_minmax(r, at, v, a, id == F_MAX);
    case F_REJECT: case F_SELECT:
        return select_items(r, at, v, a, 0, id == F_SELECT);
    case F_REJECTATTR: case F_SELECTATTR:
        return select_items(r, at, v, a, 1, id == F_SELECTATTR);
    case F_REPLACE: {
        jbind(r, at, "replace", a, (const char *const[]){"old", "new", "count", NULL}, p);
        if (!jv_given(p[0]) || !jv_given(p[1])) jfail(r, at, "replace() needs old and new");
        jv s = jsoft_str(r, at, v), o_ = jsoft_str(r, at, p[0]), n_ = jsoft_str(r, at, p[1]);
        jv o = jstr_replace(r, jv_str(s), jv_str(o_), jv_str(n_), jarg_int(r, at, p[2], -1, "count"));
        jv_unref(r, s);
        jv_unref(r, o_);
        jv_unref(r, n_);
        return o;
    }
    case F_REVERSE: {
        jbind(r, at, "reverse", a, (const char *const[]){NULL}, p);
        if (v.t == JV_STR) {
            jlist *l = jiter_list(r, at, v);
            jbuf b = {0};
            for (size_t i = l->n; i-- > 0;) jbuf_put(r, &b, jv_str(l->v[i])->s, jv_str(l->v[i])->len);
            jv_unref(r, jv_obj(JV_LIST, l));
            return jbuf_take(r, &b);
        }
        jlist *l = jiter_list(r, at, v);
        jlist *o = jnew_list(r, v.t == JV_UNDEF ? JL_LIST : JL_GEN);
        for (size_t i = l->n; i-- > 0;) jlist_push(r, o, jv_ref(l->v[i]));
        jv_unref(r, jv_obj(JV_LIST, l));
        return jv_obj(JV_LIST, o);
    }
    case F_ROUND:
        jbind(r, at, "round", a, (const char *const[]){"precision", "method", NULL}, p);
        return round_value(r, at, v, jarg_int(r, at, p[0], 0, "precision"),
                           jv_given(p[1]) ? jarg_str(r, at, p[1], "method") : NULL);
    case F_SAFE:
        jbind(r, at, "safe", a, (const char *const[]){NULL}, p);
        return jwith_flags(jsoft_str(r, at, v), JVF_SAFE);
    case F_SORT:
        return do_sort(r, at, v, a);
    case F_STRING:
        jbind(r, at, "string", a, (const char *const[]){NULL}, p);
        return jsoft_str(r, at, v);
    case F_SUM: {
        jbind(r, at, "sum", a, (const char *const[]){"attribute", "start", NULL}, p);
        jlist *l = jiter_list(r, at, v);
        jv acc = jv_given(p[1]) ? jv_ref(p[1]) : jv_int(0);
        for (size_t i = 0; i < l->n; i++) {
            jv x = jv_given(p[0]) && p[0].t != JV_NONE ? jget_path(r, at, l->v[i], p[0]) : jv_ref(l->v[i]);
            jv s;
            if ((acc.t == JV_INT || acc.t == JV_BOOL) && (x.t == JV_INT || x.t == JV_BOOL)) {
                int64_t z;
                if (__builtin_add_overflow(acc.u.i, x.u.i, &z)) jfail(r, at, "integer overflow in sum");
                s = jv_int(z);
            } else if ((acc.t == JV_INT || acc.t == JV_BOOL || acc.t == JV_FLOAT) &&
                       (x.t == JV_INT || x.t == JV_BOOL || x.t == JV_FLOAT)) {
                s = jv_float((acc.t == JV_FLOAT ? acc.u.f : (double)acc.u.i) + (x.t == JV_FLOAT ? x.u.f : (double)x.u.i));
            } else {
                if (x.t == JV_UNDEF) jfail_undef(r, at, x);
                jfail(r, at, "unsupported operand type(s) for +: '%s' and '%s'", jv_type_name(acc), jv_type_name(x));
            }
            jv_unref(r, acc);
            jv_unref(r, x);
            acc = s;
        }
        jv_unref(r, jv_obj(JV_LIST, l));
        return acc;
    }
    case F_TOJSON:
        return do_tojson(r, at, v, a);
    case F_TRIM: {
        jbind(r, at, "trim", a, (const char *const[]){"chars", NULL}, p);
        jv s = jsoft_str(r, at, v);
        if (v.t == JV_STR) s.flags = v.flags;
        jstr *chars = jv_given(p[0]) && p[0].t != JV_NONE ? jarg_str(r, at, p[0], "chars") : NULL;
        jv o = jstr_strip(r, s, chars, 3);
        jv_unref(r, s);
        return o;
    }
    case F_TRUNCATE:
        return do_truncate(r, at, v, a);
    case F_UNIQUE:
        return do_unique(r, at, v, a);
    case F_WORDCOUNT: {
        jbind(r, at, "wordcount", a, (const char *const[]){NULL}, p);
        jv s = jsoft_str(r, at, v);
        int64_t k = 0;
        int in = 0;
        for (size_t i = 0; i < jv_str(s)->len;) {
            int w = is_word(jnext_cp(jv_str(s)->s, jv_str(s)->len, &i));
            if (w && !in) k++;
            in = w;
        }
        jv_unref(r, s);
        return jv_int(k);
    }
    default:
        jfail(r, at, "internal error: filter %d", id);
    }
}

/* ---- tests ---------------------------------------------------------------------------------- */

enum {
    T_DEFINED, T_UNDEFINED, T_NONE, T_BOOLEAN, T_FALSE, T_TRUE, T_INTEGER, T_FLOAT, T_NUMBER, T_STRING,
    T_MAPPING, T_ITERABLE, T_SEQUENCE, T_CALLABLE, T_ODD, T_EVEN, T_DIVISIBLEBY, T_EQ, T_EQUALTO, T_EQSYM,
    T_NE, T_NESYM, T_LT, T_LESSTHAN, T_LTSYM, T_LE, T_LESYM, T_GT, T_GREATERTHAN, T_GTSYM, T_GE, T_GESYM,
    T_IN, T_SAMEAS, T_LOWER, T_UPPER, T_ESCAPED, T_FILTER, T_TEST, T_COUNT_
};
static const char *const test_names[T_COUNT_] = {
    "defined", "undefined", "none", "boolean", "false", "true", "integer", "float", "number", "string",
    "mapping", "iterable", "sequence", "callable", "odd", "even", "divisibleby", "eq", "equalto", "==",
    "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=",
    "in", "sameas", "lower", "upper", "escaped", "filter", "test",
};

int jtest_id(const char *name, size_t n) { return jname_in(test_names, T_COUNT_, name, n); }

/* value % 2 as Python computes it (the sign of the divisor), as a double */
static double mod2(jrender *r, const jnode *at, jv v) {
    if (v.t == JV_INT || v.t == JV_BOOL) return (double)(((v.u.i % 2) + 2) % 2);
    if (v.t == JV_FLOAT) {
        double m = fmod(v.u.f, 2.0);
        if (m && m < 0) m += 2.0;
        return m;
    }
    if (v.t == JV_UNDEF) jfail_undef(r, at, v);
    if (v.t == JV_STR) jfail(r, at, "not all arguments converted during string formatting");
    jfail(r, at, "unsupported operand type(s) for %%: '%s' and 'int'", jv_type_name(v));
}

int jtest_apply(jrender *r, const jnode *at, int id, jv v, const jargs *a) {
    jv p[1];
    switch (id) {
    case T_DEFINED: return v.t != JV_UNDEF;
    case T_UNDEFINED: return v.t == JV_UNDEF;
    case T_NONE: return v.t == JV_NONE;
    case T_BOOLEAN: return v.t == JV_BOOL;
    case T_FALSE: return v.t == JV_BOOL && !v.u.i;
    case T_TRUE: return v.t == JV_BOOL && v.u.i;
    case T_INTEGER: return v.t == JV_INT;
    case T_FLOAT: return v.t == JV_FLOAT;
    case T_NUMBER: return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
    case T_STRING: return v.t == JV_STR;
    case T_MAPPING: return v.t == JV_DICT;
    case T_ITERABLE: return v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_LIST || v.t == JV_DICT;
    case T_SEQUENCE:
        return v.t == JV_UNDEF || v.t == JV_STR || v.t == JV_DICT ||
               (v.t == JV_LIST && (jv_list(v)->kind == JL_LIST || jv_list(v)->kind == JL_TUPLE));
    case T_CALLABLE:
        return v.t == JV_UNDEF || v.t == JV_MACRO || v.t == JV_FUNC || v.t == JV_METHOD || v.t == JV_LOOP;
    case T_ODD: return mod2(r, at, v) == 1.0;
    case T_EVEN: return mod2(r, at, v) == 0.0;
    case T_DIVISIBLEBY: {
        jbind(r, at, "divisibleby", a, (const char *const[]){"num", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "divisibleby needs a number");
        if ((v.t == JV_INT || v.t == JV_BOOL) && (p[0].t == JV_INT || p[0].t == JV_BOOL)) {
            if (!p[0].u.i) jfail(r, at, "integer division or modulo by zero");
            if (p[0].u.i == -1) return 1;
            return v.u.i % p[0].u.i == 0;
        }
        if ((v.t == JV_FLOAT || v.t == JV_INT) && (p[0].t == JV_FLOAT || p[0].t == JV_INT)) {
            double x = v.t == JV_FLOAT ? v.u.f : (double)v.u.i, y = p[0].t == JV_FLOAT ? p[0].u.f : (double)p[0].u.i;
            if (y == 0) jfail(r, at, "float modulo");
            return fmod(x, y) == 0;
        }
        if (v.t == JV_UNDEF) jfail_undef(r, at, v);
        jfail(r, at, "unsupported operand type(s) for %%: '%s' and '%s'", jv_type_name(v), jv_type_name(p[0]));
    }
    case T_EQ: case T_EQUALTO: case T_EQSYM: case T_NE: case T_NESYM:
    case T_LT: case T_LESSTHAN: case T_LTSYM: case T_LE: case T_LESYM:
    case T_GT: case T_GREATERTHAN: case T_GTSYM: case T_GE: case T_GESYM: case T_SAMEAS: case T_IN: {
        jbind(r, at, test_names[id], a, (const char *const[]){"other", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "the test '%s' needs an argument", test_names[id]);
        jv o = p[0];
        switch (id) {
        case T_EQ: case T_EQUALTO: case T_EQSYM: return jv_eq(r, at, v, o);
        case T_NE: case T_NESYM: return !jv_eq(r, at, v, o);
        case T_SAMEAS:
            if (v.t != o.t) return 0;
            if (v.t == JV_NONE || v.t == JV_UNDEF) return 1;
            if (v.t == JV_BOOL || v.t == JV_INT) return v.u.i == o.u.i;
            if (v.t == JV_FLOAT) return 0;
            if (v.t == JV_FUNC) return v.aux == o.aux;
            return v.u.o == o.u.o;
        case T_IN: {
            if (o.t == JV_STR) {
                if (v.t != JV_STR) jfail(r, at, "'in <string>' requires string as left operand, not %s", jv_type_name(v));
                return !jv_str(v)->len || memmem(jv_str(o)->s, jv_str(o)->len, jv_str(v)->s, jv_str(v)->len) != NULL;
            }
            if (o.t == JV_LIST) {
                for (size_t i = 0; i < jv_list(o)->n; i++)
                    if (jv_eq(r, at, jv_list(o)->v[i], v)) return 1;
                return 0;
            }
            if (o.t == JV_DICT) return jdict_get(r, jv_dict(o), v) != NULL;
            if (o.t == JV_UNDEF) return 0;
            jfail(r, at, "argument of type '%s' is not iterable", jv_type_name(o));
        }
        default: {
            const char *sym = id <= T_LTSYM ? "<" : id <= T_LESYM ? "<=" : id <= T_GTSYM ? ">" : ">=";
            int c = jv_cmp(r, at, v, o, sym);
            if (c == 2) return 0;
            if (id <= T_LTSYM) return c < 0;
            if (id <= T_LESYM) return c <= 0;
            if (id <= T_GTSYM) return c > 0;
            return c >= 0;
        }
        }
    }
    case T_LOWER: case T_UPPER: {
        jv s = jsoft_str(r, at, v);
        int x = jstr_all(jv_str(s), id == T_LOWER ? 'l' : 'u');
        jv_unref(r, s);
        return x;
    }
    case T_ESCAPED: return v.t == JV_STR && (v.flags & JVF_SAFE);
    case T_FILTER: case T_TEST:
        if (v.t != JV_STR) return 0;
        return id == T_FILTER ? jfilter_id(jv_str(v)->s, jv_str(v)->len) >= 0 : jtest_id(jv_str(v)->s, jv_str(v)->len) >= 0;
    default:
        jfail(r, at, "internal error: test %d", id);
    }
}
