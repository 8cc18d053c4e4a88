/* text/jinja_method.c - what a Jinja template can call besides filters and
 * tests (text/jinja_lib.c): the methods of Python's str, list and dict that
 * templates use, loop.cycle / loop.changed, and the globals (range,
 * namespace, dict, raise_exception, strftime_now); and the binding of a
 * call's arguments to parameters, which filters and tests use too. Each
 * follows the Python function it stands for: its arguments (positional or
 * by keyword), its result's type, and its errors. */
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "text/jinja_internal.h"

/* ---- argument binding ------------------------------------------------------------------- */

/* Bind a's arguments to params (NULL-terminated; a leading '*' marks a
 * parameter that takes the remaining positional arguments, which are then
 * left in a->pos[first..]) into out[] (borrowed). */
void jbind(jrender *r, const jnode *at, const char *fname, const jargs *a, const char *const *params, jv *out) {
    int np = 0;
    while (params[np]) np++;
    for (int i = 0; i < np; i++) out[i] = jv_missing();
    if (a->npos > np) jfail(r, at, "%s() takes at most %d argument(s) (%d given)", fname, np, a->npos);
    for (int i = 0; i < a->npos; i++) out[i] = a->pos[i];
    for (int k = 0; k < a->nkw; k++) {
        int j = -1;
        for (int i = 0; i < np; i++)
            if (strlen(params[i]) == a->kwn[k]->len && !memcmp(params[i], a->kwn[k]->s, a->kwn[k]->len)) j = i;
        if (j < 0) jfail(r, at, "%s() got an unexpected keyword argument '%s'", fname, a->kwn[k]->s);
        if (jv_given(out[j])) jfail(r, at, "%s() got multiple values for argument '%s'", fname, a->kwn[k]->s);
        out[j] = a->kwv[k];
    }
}

int jarg_bool(jv v, int def) { return jv_given(v) ? jv_truthy(v) : def; }

int64_t jarg_int(jrender *r, const jnode *at, jv v, int64_t def, const char *what) {
    if (!jv_given(v) || v.t == JV_NONE) return def;
    if (v.t == JV_INT || v.t == JV_BOOL) return v.u.i;
    jfail(r, at, "%s must be an integer, not '%s'", what, jv_type_name(v));
}

jstr *jarg_str(jrender *r, const jnode *at, jv v, const char *what) {
    if (v.t == JV_STR) return jv_str(v);
    if (v.t == JV_UNDEF) jfail_undef(r, at, v);
    jfail(r, at, "%s must be a string, not '%s'", what, jv_type_name(v));
}

/* ---- methods ---------------------------------------------------------------------------------- */

enum {
    M_UNSUPPORTED,
    /* str */
    M_STARTSWITH, M_ENDSWITH, M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_RSPLIT, M_REPLACE, M_UPPER, M_LOWER,
    M_TITLE, M_CAPITALIZE, M_SWAPCASE, M_CASEFOLD, M_FIND, M_RFIND, M_INDEX, M_RINDEX, M_COUNT, M_JOIN,
    M_SPLITLINES, M_ISDIGIT, M_ISALPHA, M_ISALNUM, M_ISSPACE, M_ISUPPER, M_ISLOWER, M_ISNUMERIC, M_ISDECIMAL,
    M_REMOVEPREFIX, M_REMOVESUFFIX, M_FORMAT, M_ZFILL, M_LJUST, M_RJUST, M_CENTER, M_PARTITION, M_RPARTITION,
    /* list */
    M_APPEND, M_EXTEND, M_POP, M_INSERT, M_LINDEX, M_LCOUNT, M_COPY, M_REVERSE, M_REMOVE, M_CLEAR, M_SORT,
    /* dict */
    M_GET, M_ITEMS, M_KEYS, M_VALUES, M_DCOPY, M_DPOP, M_UPDATE, M_SETDEFAULT, M_DCLEAR,
    /* loop */
    M_CYCLE, M_CHANGED,
};

typedef struct jmdef {
    uint8_t type;               /* JV_STR, JV_LIST (lists), JV_DICT, JV_LOOP; JL_TUPLE lists: index, count */
    const char *name;
    int op;
} jmdef;

static const jmdef methods[] = {
    {JV_STR, "startswith", M_STARTSWITH}, {JV_STR, "endswith", M_ENDSWITH}, {JV_STR, "strip", M_STRIP},
    {JV_STR, "lstrip", M_LSTRIP}, {JV_STR, "rstrip", M_RSTRIP}, {JV_STR, "split", M_SPLIT},
    {JV_STR, "rsplit", M_RSPLIT}, {JV_STR, "replace", M_REPLACE}, {JV_STR, "upper", M_UPPER},
    {JV_STR, "lower", M_LOWER}, {JV_STR, "title", M_TITLE}, {JV_STR, "capitalize", M_CAPITALIZE},
    {JV_STR, "swapcase", M_SWAPCASE}, {JV_STR, "casefold", M_CASEFOLD}, {JV_STR, "find", M_FIND},
    {JV_STR, "rfind", M_RFIND}, {JV_STR, "index", M_INDEX}, {JV_STR, "rindex", M_RINDEX},
    {JV_STR, "count", M_COUNT}, {JV_STR, "join", M_JOIN}, {JV_STR, "splitlines", M_SPLITLINES},
    {JV_STR, "isdigit", M_ISDIGIT}, {JV_STR, "isalpha", M_ISALPHA}, {JV_STR, "isalnum", M_ISALNUM},
    {JV_STR, "isspace", M_ISSPACE}, {JV_STR, "isupper", M_ISUPPER}, {JV_STR, "islower", M_ISLOWER},
    {JV_STR, "isnumeric", M_ISNUMERIC}, {JV_STR, "isdecimal", M_ISDECIMAL},
    {JV_STR, "removeprefix", M_REMOVEPREFIX}, {JV_STR, "removesuffix", M_REMOVESUFFIX},
    {JV_STR, "format", M_FORMAT}, {JV_STR, "zfill", M_ZFILL}, {JV_STR, "ljust", M_LJUST},
    {JV_STR, "rjust", M_RJUST}, {JV_STR, "center", M_CENTER}, {JV_STR, "partition", M_PARTITION},
    {JV_STR, "rpartition", M_RPARTITION},
    {JV_STR, "encode", M_UNSUPPORTED}, {JV_STR, "expandtabs", M_UNSUPPORTED}, {JV_STR, "format_map", M_UNSUPPORTED},
    {JV_STR, "isascii", M_UNSUPPORTED}, {JV_STR, "isidentifier", M_UNSUPPORTED},
    {JV_STR, "isprintable", M_UNSUPPORTED}, {JV_STR, "istitle", M_UNSUPPORTED}, {JV_STR, "maketrans", M_UNSUPPORTED},
    {JV_STR, "translate", M_UNSUPPORTED},
    {JV_LIST, "append", M_APPEND}, {JV_LIST, "extend", M_EXTEND}, {JV_LIST, "pop", M_POP},
    {JV_LIST, "insert", M_INSERT}, {JV_LIST, "index", M_LINDEX}, {JV_LIST, "count", M_LCOUNT},
    {JV_LIST, "copy", M_COPY}, {JV_LIST, "reverse", M_REVERSE}, {JV_LIST, "remove", M_REMOVE},
    {JV_LIST, "clear", M_CLEAR}, {JV_LIST, "sort", M_SORT},
    {JV_DICT, "get", M_GET}, {JV_DICT, "items", M_ITEMS}, {JV_DICT, "keys", M_KEYS},
    {JV_DICT, "values", M_VALUES}, {JV_DICT, "copy", M_DCOPY}, {JV_DICT, "pop", M_DPOP},
    {JV_DICT, "update", M_UPDATE}, {JV_DICT, "setdefault", M_SETDEFAULT}, {JV_DICT, "clear", M_DCLEAR},
    {JV_DICT, "popitem", M_UNSUPPORTED}, {JV_DICT, "fromkeys", M_UNSUPPORTED},
    {JV_LOOP, "cycle", M_CYCLE}, {JV_LOOP, "changed", M_CHANGED},
};
#define N_METHODS ((int)(sizeof methods / sizeof methods[0]))

jv jmethod_get(jrender *r, jv v, const char *name, size_t n) {
    int type = v.t;
    if (type == JV_LIST) {
        int kind = jv_list(v)->kind;
        if (kind != JL_LIST && kind != JL_TUPLE) return jv_undef();
        if (kind == JL_TUPLE && !((n == 5 && !memcmp(name, "index", 5)) || (n == 5 && !memcmp(name, "count", 5))))
            return jv_undef();
    }
    for (int i = 0; i < N_METHODS; i++) {
        if (methods[i].type != type || strlen(methods[i].name) != n || memcmp(methods[i].name, name, n)) continue;
        jmethod *m = jmalloc(r, sizeof *m);
        m->h.refs = 1;
        m->h.type = JV_METHOD;
        m->id = i;
        m->self = jv_ref(v);
        return jv_obj(JV_METHOD, m);
    }
    return jv_undef();
}

static jv str_method(jrender *r, const jnode *at, int op, const char *name, jv self, const jargs *a) {
    jstr *s = jv_str(self);
    jv p[3];
    switch (op) {
    case M_STARTSWITH: case M_ENDSWITH: {
        jbind(r, at, name, a, (const char *const[]){"prefix", "start", "end", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "%s() takes at least 1 argument (0 given)", name);
        int64_t n = (int64_t)jcp_count(s->s, s->len);
        int64_t st = jarg_int(r, at, p[1], 0, "start"), en = jarg_int(r, at, p[2], n, "end");
        if (st < 0) { st += n; if (st < 0) st = 0; }
        if (en < 0) { en += n; if (en < 0) en = 0; }
        if (en > n) en = n;
        if (st > n) return jv_bool(0);
        size_t a0 = jcp_offset(s->s, s->len, (size_t)st), b0 = st <= en ? jcp_offset(s->s, s->len, (size_t)en) : a0;
        jv *cands = &p[0];
        size_t nc = 1;
        if (p[0].t == JV_LIST && jv_list(p[0])->kind == JL_TUPLE) { cands = jv_list(p[0])->v; nc = jv_list(p[0])->n; }
        for (size_t i = 0; i < nc; i++) {
            if (cands[i].t != JV_STR)
                jfail(r, at, "%s first arg must be str or a tuple of str, not %s", name, jv_type_name(cands[i]));
            jstr *x = jv_str(cands[i]);
            if (st > en) continue;
            if (x->len > b0 - a0) continue;
            if (op == M_STARTSWITH ? !memcmp(s->s + a0, x->s, x->len) : !memcmp(s->s + b0 - x->len, x->s, x->len))
                return jv_bool(1);
        }
        return jv_bool(0);
    }
    case M_STRIP: case M_LSTRIP: case M_RSTRIP:
        jbind(r, at, name, a, (const char *const[]){"chars", NULL}, p);
        return jstr_strip(r, self, jv_given(p[0]) && p[0].t != JV_NONE ? jarg_str(r, at, p[0], "chars") : NULL,
                         op == M_STRIP ? 3 : op == M_LSTRIP ? 1 : 2);
    case M_SPLIT: case M_RSPLIT:
        jbind(r, at, name, a, (const char *const[]){"sep", "maxsplit", NULL}, p);
        return jstr_split(r, at, s, jv_given(p[0]) && p[0].t != JV_NONE ? jarg_str(r, at, p[0], "sep") : NULL,
                         jarg_int(r, at, p[1], -1, "maxsplit"), op == M_RSPLIT);
    case M_REPLACE:
        jbind(r, at, name, a, (const char *const[]){"old", "new", "count", NULL}, p);
        if (!jv_given(p[0]) || !jv_given(p[1])) jfail(r, at, "replace expected at least 2 arguments");
        return jstr_replace(r, s, jarg_str(r, at, p[0], "old"), jarg_str(r, at, p[1], "new"), jarg_int(r, at, p[2], -1, "count"));
    case M_UPPER: case M_LOWER: case M_TITLE: case M_CAPITALIZE: case M_SWAPCASE: case M_CASEFOLD:
        jbind(r, at, name, a, (const char *const[]){NULL}, p);
        return jcase_map(r, s->s, s->len, op == M_UPPER ? CASE_UPPER : op == M_TITLE ? CASE_TITLE
                        : op == M_CAPITALIZE ? CASE_CAPITALIZE : op == M_SWAPCASE ? CASE_SWAP : CASE_LOWER);
    case M_FIND: case M_RFIND: case M_INDEX: case M_RINDEX: {
        jbind(r, at, name, a, (const char *const[]){"sub", "start", "end", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "%s() takes at least 1 argument (0 given)", name);
        int64_t k = jstr_find(r, s, jarg_str(r, at, p[0], "sub"), jarg_int(r, at, p[1], 0, "start"),
                             jarg_int(r, at, p[2], INT64_MAX / 2, "end"), op == M_RFIND || op == M_RINDEX);
        if (k < 0 && (op == M_INDEX || op == M_RINDEX)) jfail(r, at, "substring not found");
        return jv_int(k);
    }
    case M_COUNT:
        jbind(r, at, name, a, (const char *const[]){"sub", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "count() takes at least 1 argument (0 given)");
        return jv_int(jstr_count(r, s, jarg_str(r, at, p[0], "sub")));
    case M_JOIN: {
        jbind(r, at, name, a, (const char *const[]){"iterable", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "join() takes exactly one argument (0 given)");
        jlist *l = jiter_list(r, at, p[0]);
        jbuf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].t != JV_STR)
                jfail(r, at, "sequence item %zu: expected str instance, %s found", i, jv_type_name(l->v[i]));
            if (i) jbuf_put(r, &b, s->s, s->len);
            jbuf_put(r, &b, jv_str(l->v[i])->s, jv_str(l->v[i])->len);
        }
        jv_unref(r, jv_obj(JV_LIST, l));
        return jbuf_take(r, &b);
    }
    case M_SPLITLINES:
        jbind(r, at, name, a, (const char *const[]){"keepends", NULL}, p);
        return jstr_splitlines(r, s, jarg_bool(p[0], 0));
    case M_ISDIGIT: case M_ISALPHA: case M_ISALNUM: case M_ISSPACE: case M_ISUPPER: case M_ISLOWER:
    case M_ISNUMERIC: case M_ISDECIMAL: {
        jbind(r, at, name, a, (const char *const[]){NULL}, p);
        char k = op == M_ISALPHA ? 'a' : op == M_ISALNUM ? 'n' : op == M_ISSPACE ? 's' : op == M_ISUPPER ? 'u'
               : op == M_ISLOWER ? 'l' : 'd';
        return jv_bool(jstr_all(s, k));
    }
    case M_REMOVEPREFIX: case M_REMOVESUFFIX: {
        jbind(r, at, name, a, (const char *const[]){"affix", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "%s() takes exactly one argument (0 given)", name);
        jstr *x = jarg_str(r, at, p[0], "affix");
        if (x->len <= s->len && op == M_REMOVEPREFIX && !memcmp(s->s, x->s, x->len)) return jv_strn(r, s->s + x->len, s->len - x->len);
        if (x->len <= s->len && op == M_REMOVESUFFIX && !memcmp(s->s + s->len - x->len, x->s, x->len)) return jv_strn(r, s->s, s->len - x->len);
        return jv_ref(self);
    }
    case M_FORMAT:
        return jstr_format(r, at, s, a);
    case M_ZFILL: {
        jbind(r, at, name, a, (const char *const[]){"width", NULL}, p);
        int64_t w = jarg_int(r, at, p[0], 0, "width"), n = (int64_t)jcp_count(s->s, s->len);
        if (w <= n) return jv_ref(self);
        if (w - n > (int64_t)r->max_output) jfail(r, at, "zfill over the output limit");
        jbuf b = {0};
        size_t sign = s->len && (s->s[0] == '+' || s->s[0] == '-') ? 1 : 0;
        jbuf_put(r, &b, s->s, sign);
        for (int64_t i = n; i < w; i++) jbuf_putc(r, &b, '0');
        jbuf_put(r, &b, s->s + sign, s->len - sign);
        return jbuf_take(r, &b);
    }
    case M_LJUST: case M_RJUST: case M_CENTER: {
        jbind(r, at, name, a, (const char *const[]){"width", "fillchar", NULL}, p);
        jstr *fill = jv_given(p[1]) ? jarg_str(r, at, p[1], "fillchar") : NULL;
        if (fill && jcp_count(fill->s, fill->len) != 1) jfail(r, at, "The fill character must be exactly one character long");
        return jstr_pad(r, s, jarg_int(r, at, p[0], 0, "width"), fill, op == M_LJUST ? 'l' : op == M_RJUST ? 'r' : 'c');
    }
    case M_PARTITION: case M_RPARTITION: {
        jbind(r, at, name, a, (const char *const[]){"sep", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "%s() takes exactly one argument (0 given)", name);
        jstr *sep = jarg_str(r, at, p[0], "sep");
        if (!sep->len) jfail(r, at, "empty separator");
        int64_t k = jstr_find(r, s, sep, 0, INT64_MAX / 2, op == M_RPARTITION);
        jlist *t = jlist_new(r, JL_TUPLE, 3);
        if (k < 0) {
            jv e = jv_strn(r, "", 0);
            if (op == M_PARTITION) { jlist_push(r, t, jv_ref(self)); jlist_push(r, t, e); jlist_push(r, t, jv_strn(r, "", 0)); }
            else { jlist_push(r, t, e); jlist_push(r, t, jv_strn(r, "", 0)); jlist_push(r, t, jv_ref(self)); }
        } else {
            size_t off = jcp_offset(s->s, s->len, (size_t)k);
            jlist_push(r, t, jv_strn(r, s->s, off));
            jlist_push(r, t, jv_ref(p[0]));
            jlist_push(r, t, jv_strn(r, s->s + off + sep->len, s->len - off - sep->len));
        }
        return jv_obj(JV_LIST, t);
    }
    default:
        jfail(r, at, "str.%s() is not supported in pocket's templates", name);
    }
}

static int64_t list_index(jrender *r, const jnode *at, jlist *l, jv x) {
    for (size_t i = 0; i < l->n; i++)
        if (jv_eq(r, at, l->v[i], x)) return (int64_t)i;
    return -1;
}

static jv list_method(jrender *r, const jnode *at, int op, const char *name, jv self, const jargs *a) {
    jlist *l = jv_list(self);
    jv p[3];
    switch (op) {
    case M_APPEND:
        jbind(r, at, name, a, (const char *const[]){"object", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "list.append() takes exactly one argument (0 given)");
        jlist_push(r, l, jv_ref(p[0]));
        return jv_none();
    case M_EXTEND: {
        jbind(r, at, name, a, (const char *const[]){"iterable", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "list.extend() takes exactly one argument (0 given)");
        jlist *x = jiter_list(r, at, p[0]);
        size_t n = x->n;
        for (size_t i = 0; i < n; i++) jlist_push(r, l, jv_ref(x->v[i]));
        jv_unref(r, jv_obj(JV_LIST, x));
        return jv_none();
    }
    case M_POP: {
        jbind(r, at, name, a, (const char *const[]){"index", NULL}, p);
        if (!l->n) jfail(r, at, "pop from empty list");
        int64_t i = jarg_int(r, at, p[0], -1, "index");
        if (i < 0) i += (int64_t)l->n;
        if (i < 0 || i >= (int64_t)l->n) jfail(r, at, "pop index out of range");
        jv x = l->v[i];
        memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof(jv));
        l->n--;
        return x;
    }
    case M_INSERT: {
        jbind(r, at, name, a, (const char *const[]){"index", "object", NULL}, p);
        if (!jv_given(p[1])) jfail(r, at, "insert expected 2 arguments");
        int64_t i = jarg_int(r, at, p[0], 0, "index"), n = (int64_t)l->n;
        if (i < 0) { i += n; if (i < 0) i = 0; }
        if (i > n) i = n;
        jlist_push(r, l, jv_none());
        memmove(l->v + i + 1, l->v + i, (l->n - (size_t)i - 1) * sizeof(jv));
        l->v[i] = jv_ref(p[1]);
        return jv_none();
    }
    case M_LINDEX: case M_REMOVE: {
        jbind(r, at, name, a, (const char *const[]){"value", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "%s() takes at least 1 argument", name);
        int64_t i = list_index(r, at, l, p[0]);
        if (i < 0) jfail(r, at, op == M_REMOVE ? "list.remove(x): x not in list" : "the value is not in the list");
        if (op == M_LINDEX) return jv_int(i);
        jv x = l->v[i];
        memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof(jv));
        l->n--;
        jv_unref(r, x);
        return jv_none();
    }
    case M_LCOUNT: {
        jbind(r, at, name, a, (const char *const[]){"value", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "count() takes exactly one argument (0 given)");
        int64_t k = 0;
        for (size_t i = 0; i < l->n; i++) k += jv_eq(r, at, l->v[i], p[0]);
        return jv_int(k);
    }
    case M_COPY: {
        jbind(r, at, name, a, (const char *const[]){NULL}, p);
        jlist *o = jlist_new(r, JL_LIST, l->n);
        for (size_t i = 0; i < l->n; i++) jlist_push(r, o, jv_ref(l->v[i]));
        return jv_obj(JV_LIST, o);
    }
    case M_REVERSE:
        jbind(r, at, name, a, (const char *const[]){NULL}, p);
        for (size_t i = 0; i < l->n / 2; i++) {
            jv t = l->v[i];
            l->v[i] = l->v[l->n - 1 - i];
            l->v[l->n - 1 - i] = t;
        }
        return jv_none();
    case M_CLEAR: {
        jbind(r, at, name, a, (const char *const[]){NULL}, p);
        size_t n = l->n;
        l->n = 0;
        for (size_t i = 0; i < n; i++) jv_unref(r, l->v[i]);
        return jv_none();
    }
    case M_SORT: {
        jbind(r, at, name, a, (const char *const[]){"reverse", NULL}, p);
        size_t n = l->n;
        jv *keys = jmalloc(r, (n + 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++) keys[i] = jv_ref(l->v[i]);
        jv sorted = jsorted_list(r, at, keys, l->v, n, jarg_bool(p[0], 0), JL_LIST);
        jlist *sl = jv_list(sorted);
        memcpy(l->v, sl->v, n * sizeof(jv));       /* the items' references move back */
        sl->n = 0;
        jv_unref(r, sorted);
        jfree(r, keys);
        return jv_none();
    }
    default:
        jfail(r, at, "list.%s() is not supported in pocket's templates", name);
    }
}

static jv dict_view(jrender *r, jdict *d, int kind) {
    jlist *o = jlist_new(r, kind, d->n);
    for (size_t i = 0; i < d->n; i++) {
        if (kind == JL_ITEMS) jlist_push(r, o, jtuple2(r, jv_ref(d->k[i]), jv_ref(d->v[i])));
        else jlist_push(r, o, jv_ref(kind == JL_KEYS ? d->k[i] : d->v[i]));
    }
    return jv_obj(JV_LIST, o);
}

static jv dict_method(jrender *r, const jnode *at, int op, const char *name, jv self, const jargs *a) {
    jdict *d = jv_dict(self);
    jv p[2];
    switch (op) {
    case M_GET: case M_SETDEFAULT: {
        jbind(r, at, name, a, (const char *const[]){"key", "default", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "%s expected at least 1 argument, got 0", name);
        jv *x = jdict_get(r, d, p[0]);
        if (x) return jv_ref(*x);
        jv def = jv_given(p[1]) ? p[1] : jv_none();
        if (op == M_SETDEFAULT) jdict_set(r, at, d, jv_ref(p[0]), jv_ref(def));
        return jv_ref(def);
    }
    case M_ITEMS: case M_KEYS: case M_VALUES:
        jbind(r, at, name, a, (const char *const[]){NULL}, p);
        return dict_view(r, d, op == M_ITEMS ? JL_ITEMS : op == M_KEYS ? JL_KEYS : JL_VALUES);
    case M_DCOPY: {
        jbind(r, at, name, a, (const char *const[]){NULL}, p);
        jdict *o = jdict_new(r, JV_DICT);
        for (size_t i = 0; i < d->n; i++) jdict_set(r, at, o, jv_ref(d->k[i]), jv_ref(d->v[i]));
        return jv_obj(JV_DICT, o);
    }
    case M_DPOP: {
        jbind(r, at, name, a, (const char *const[]){"key", "default", NULL}, p);
        if (!jv_given(p[0])) jfail(r, at, "pop expected at least 1 argument, got 0");
        jv *x = jdict_get(r, d, p[0]);
        if (!x) {
            if (jv_given(p[1])) return jv_ref(p[1]);
            jbuf b = {0};
            jv_repr_to(r, at, &b, p[0], 0);
            jv k = jbuf_take(r, &b);
            jfail(r, at, "KeyError: %s", jv_str(k)->s);
        }
        jv v = jv_ref(*x);
        jdict_del(r, at, d, p[0]);
        return v;
    }
    case M_UPDATE: {
        if (a->npos > 1) jfail(r, at, "update expected at most 1 argument, got %d", a->npos);
        if (a->npos) {
            if (a->pos[0].t != JV_DICT) jfail(r, at, "dict.update() with a '%s' is not supported", jv_type_name(a->pos[0]));
            jdict *o = jv_dict(a->pos[0]);
            for (size_t i = 0; i < o->n; i++) jdict_set(r, at, d, jv_ref(o->k[i]), jv_ref(o->v[i]));
        }
        for (int k = 0; k < a->nkw; k++) jdict_set(r, at, d, jv_obj(JV_STR, (jobj *)a->kwn[k]), jv_ref(a->kwv[k]));
        return jv_none();
    }
    case M_DCLEAR: {
        jbind(r, at, name, a, (const char *const[]){NULL}, p);
        while (d->n) jdict_del(r, at, d, d->k[d->n - 1]);
        return jv_none();
    }
    default:
        jfail(r, at, "dict.%s() is not supported in pocket's templates", name);
    }
}

jv jmethod_call(jrender *r, const jnode *at, jmethod *m, const jargs *a) {
    const jmdef *def = &methods[m->id];
    switch (def->type) {
    case JV_STR: return str_method(r, at, def->op, def->name, m->self, a);
    case JV_LIST: return list_method(r, at, def->op, def->name, m->self, a);
    case JV_DICT: return dict_method(r, at, def->op, def->name, m->self, a);
    case JV_LOOP: {
        jloop *l = (jloop *)m->self.u.o;
        if (a->nkw) jfail(r, at, "loop.%s() takes no keyword arguments", def->name);
        if (def->op == M_CYCLE) {
            if (!a->npos) jfail(r, at, "no items for cycling given");
            return jv_ref(a->pos[l->i % (size_t)a->npos]);
        }
        jlist *t = jlist_new(r, JL_LIST, (size_t)a->npos);
        for (int i = 0; i < a->npos; i++) jlist_push(r, t, jv_ref(a->pos[i]));
        jv tv = jv_obj(JV_LIST, t);
        int changed = !l->has_last || !jv_eq(r, at, l->last, tv);
        if (l->has_last) jv_unref(r, l->last);
        l->last = tv;
        l->has_last = 1;
        return jv_bool(changed);
    }
    default:
        jfail(r, at, "internal error: method %d", m->id);
    }
}

/* ---- globals ------------------------------------------------------------------------------------ */

enum { G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME, G_COUNT_ };
static const char *const global_names[G_COUNT_] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

int jglobal_id(const char *name, size_t n) { return jname_in(global_names, G_COUNT_, name, n); }
const char *jglobal_name(int id) { return id >= 0 && id < G_COUNT_ ? global_names[id] : "?"; }

jv jglobal_call(jrender *r, const jnode *at, int id, const jargs *a) {
    switch (id) {
    case G_RANGE: {
        if (a->nkw) jfail(r, at, "range() takes no keyword arguments");
        if (a->npos < 1 || a->npos > 3) jfail(r, at, "range expected 1 to 3 arguments, got %d", a->npos);
        int64_t x[3];
        for (int i = 0; i < a->npos; i++) {
            if (a->pos[i].t != JV_INT && a->pos[i].t != JV_BOOL) {
                if (a->pos[i].t == JV_UNDEF) jfail_undef(r, at, a->pos[i]);
                jfail(r, at, "'%s' object cannot be interpreted as an integer", jv_type_name(a->pos[i]));
            }
            x[i] = a->pos[i].u.i;
        }
        int64_t start = a->npos == 1 ? 0 : x[0], stop = a->npos == 1 ? x[0] : x[1], step = a->npos == 3 ? x[2] : 1;
        if (!step) jfail(r, at, "range() arg 3 must not be zero");
        uint64_t n = 0;
        if (step > 0 && stop > start) n = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
        if (step < 0 && start > stop) n = ((uint64_t)start - (uint64_t)stop - 1) / (uint64_t)(-(step + 1) + 1) + 1;
        if (n > r->max_mem / sizeof(jv) || n > r->max_steps)
            jfail(r, at, "range() of %llu items is over the render's limits", (unsigned long long)n);
        jlist *l = jlist_new(r, JL_LIST, (size_t)n);
        for (uint64_t i = 0; i < n; i++) jlist_push(r, l, jv_int(start + (int64_t)i * step));
        return jv_obj(JV_LIST, l);
    }
    case G_NAMESPACE: case G_DICT: {
        jdict *d = jdict_new(r, id == G_NAMESPACE ? JV_NS : JV_DICT);
        jv dv = jv_obj(id == G_NAMESPACE ? JV_NS : JV_DICT, d);
        if (a->npos > 1) jfail(r, at, "%s expected at most 1 argument, got %d", global_names[id], a->npos);
        if (a->npos) {
            if (a->pos[0].t != JV_DICT) jfail(r, at, "%s() with a '%s' argument is not supported", global_names[id], jv_type_name(a->pos[0]));
            jdict *o = jv_dict(a->pos[0]);
            for (size_t i = 0; i < o->n; i++) jdict_set(r, at, d, jv_ref(o->k[i]), jv_ref(o->v[i]));
        }
        for (int k = 0; k < a->nkw; k++) jdict_set(r, at, d, jv_obj(JV_STR, (jobj *)a->kwn[k]), jv_ref(a->kwv[k]));
        return dv;
    }
    case G_RAISE: {
        jbuf b = {0};
        for (int i = 0; i < a->npos; i++) jv_str_to(r, at, &b, a->pos[i]);
        jbuf_putc(r, &b, 0);
        jfail(r, at, "raise_exception: %s", b.p);
    }
    case G_STRFTIME: {
        if (a->npos != 1 || a->nkw || a->pos[0].t != JV_STR) jfail(r, at, "strftime_now(format) takes one string");
        jstr *f = jv_str(a->pos[0]);
        if (f->len > 256 || memchr(f->s, 0, f->len)) jfail(r, at, "strftime_now: a format over 256 bytes");
        struct tm tm;
        time_t t = r->now ? (time_t)r->now : time(NULL);
        if (r->now ? !gmtime_r(&t, &tm) : !localtime_r(&t, &tm)) jfail(r, at, "strftime_now: no time");
        char out[1024];
        size_t n = f->len ? strftime(out, sizeof out, f->s, &tm) : 0;
        return jv_strn(r, out, n);
    }
    default:
        jfail(r, at, "internal error: global %d", id);
    }
}
