/* text/jinja_ops.c - what the Jinja evaluator (text/jinja.c) does to
 * values, with Python's semantics: attributes, items and slices (of
 * undefined values too, and the errors that name what was undefined),
 * iteration, and the operators (arithmetic, in, comparisons).
 *
 * Attributes of None, numbers and strings that do not exist are undefined
 * (not errors), as in Jinja2; arithmetic with an undefined is an error. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "text/jinja_internal.h"

/* Python's name for the type of the object an undefined came from */
static const char *parent_word(int t) {
    switch (t) {
    case JV_NONE: return "NoneType";
    case JV_BOOL: return "bool";
    case JV_INT: return "int";
    case JV_FLOAT: return "float";
    case JV_STR: return "str";
    case JV_LIST: return "list";
    case JV_DICT: return "dict";
    case JV_NS: return "Namespace";
    case JV_LOOP: return "LoopContext";
    default: return "object";
    }
}

_Noreturn void jfail_undef(jrender *r, const jnode *at, jv u) {
    const char *name = u.u.name ? u.u.name->s : NULL;
    int why = u.aux & 0xff;
    const char *ptype = parent_word(u.aux >> 8);
    if (why == JU_NAME && name) jfail(r, at, "'%s' is undefined", name);
    if (why == JU_ATTR && name) jfail(r, at, "'%s object' has no attribute '%s'", ptype, name);
    if (why == JU_INDEX) jfail(r, at, "'%s object' has no element %d", ptype, (int)u.aux2);
    if (why == JU_ATTR) jfail(r, at, "'%s object' has no such key", ptype);
    jfail(r, at, "an undefined value was used");
}

jv jundef_of(int why, int parent_type, const jstr *name) {
    jv u = jv_undef();
    u.aux = (uint16_t)(why | parent_type << 8);
    u.u.name = name;
    return u;
}

/* ---- attributes and items ------------------------------------------------------------------ */

static jv loop_attr(jrender *r, jv lv, const char *name, size_t n, const jstr *iname) {
    jloop *l = (jloop *)lv.u.o;
    size_t i = l->i, len = l->seq->n;
#define IS(s) (n == sizeof(s) - 1 && !memcmp(name, s, n))
    if (IS("index")) return jv_int((int64_t)i + 1);
    if (IS("index0")) return jv_int((int64_t)i);
    if (IS("revindex")) return jv_int((int64_t)(len - i));
    if (IS("revindex0")) return jv_int((int64_t)(len - i - 1));
    if (IS("first")) return jv_bool(i == 0);
    if (IS("last")) return jv_bool(i + 1 == len);
    if (IS("length")) return jv_int((int64_t)len);
    if (IS("depth")) return jv_int(1);
    if (IS("depth0")) return jv_int(0);
    if (IS("previtem")) return i > 0 ? jv_ref(l->seq->v[i - 1]) : jundef_of(JU_ATTR, JV_LOOP, iname);
    if (IS("nextitem")) return i + 1 < len ? jv_ref(l->seq->v[i + 1]) : jundef_of(JU_ATTR, JV_LOOP, iname);
#undef IS
    jv m = jmethod_get(r, lv, name, n);
    if (m.t != JV_UNDEF) return m;
    return jundef_of(JU_ATTR, JV_LOOP, iname);
}

jv jget_attr(jrender *r, const jnode *at, jv obj, const jstr *name) {
    switch (obj.t) {
    case JV_UNDEF:
        jfail_undef(r, at, obj);
    case JV_DICT: {
        jv m = jmethod_get(r, obj, name->s, name->len);
        if (m.t != JV_UNDEF) return m;
        jv *p = jdict_get_str(jv_dict(obj), name);
        return p ? jv_ref(*p) : jundef_of(JU_ATTR, JV_DICT, name);
    }
    case JV_NS: {
        jv *p = jdict_get_str(jv_dict(obj), name);
        return p ? jv_ref(*p) : jundef_of(JU_ATTR, JV_NS, name);
    }
    case JV_STR: case JV_LIST: {
        jv m = jmethod_get(r, obj, name->s, name->len);
        if (m.t != JV_UNDEF) return m;
        return jundef_of(JU_ATTR, obj.t, name);
    }
    case JV_LOOP:
        return loop_attr(r, obj, name->s, name->len, name);
    case JV_INT: case JV_BOOL: case JV_FLOAT:
        if (name->len == 4 && !memcmp(name->s, "real", 4)) return obj.t == JV_BOOL ? jv_int(obj.u.i) : obj;
        if (name->len == 4 && !memcmp(name->s, "imag", 4)) return obj.t == JV_FLOAT ? jv_float(0) : jv_int(0);
        return jundef_of(JU_ATTR, obj.t, name);
    default:
        return jundef_of(JU_ATTR, obj.t <= JV_STR ? obj.t : JV_UNDEF, name);
    }
}

static jv str_char(jrender *r, jstr *s, int64_t i) {
    int64_t n = (int64_t)jcp_count(s->s, s->len);
    if (i < 0) i += n;
    if (i < 0 || i >= n) return jv_undef();
    size_t a = jcp_offset(s->s, s->len, (size_t)i);
    size_t b = jcp_offset(s->s + a, s->len - a, 1);
    return jv_strn(r, s->s + a, b);
}

jv jget_item(jrender *r, const jnode *at, jv obj, jv key) {
    if (obj.t == JV_UNDEF) jfail_undef(r, at, obj);
    int int_key = key.t == JV_INT || key.t == JV_BOOL;
    switch (obj.t) {
    case JV_LIST: {
        jlist *l = jv_list(obj);
        if (int_key && (l->kind == JL_LIST || l->kind == JL_TUPLE)) {
            int64_t i = key.u.i, n = (int64_t)l->n;
            if (i < 0) i += n;
            if (i >= 0 && i < n) return jv_ref(l->v[i]);
            jv u = jundef_of(JU_INDEX, JV_LIST, NULL);
            u.aux2 = (int32_t)key.u.i;
            return u;
        }
        break;
    }
    case JV_STR:
        if (int_key) return str_char(r, jv_str(obj), key.u.i);
        break;
    case JV_DICT: {
        if (key.t != JV_UNDEF && jv_hashable(key)) {
            jv *p = jdict_get(r, jv_dict(obj), key);
            if (p) return jv_ref(*p);
        }
        break;
    }
    case JV_NS:
        if (key.t == JV_STR) {
            jv *p = jdict_get_str(jv_dict(obj), jv_str(key));
            if (p) return jv_ref(*p);
        }
        break;
    case JV_LOOP:
        if (key.t == JV_STR) return loop_attr(r, obj, jv_str(key)->s, jv_str(key)->len, NULL);
        break;
    default:
        break;
    }
    if (key.t == JV_STR && obj.t != JV_NS) {
        jv m = jmethod_get(r, obj, jv_str(key)->s, jv_str(key)->len);
        if (m.t != JV_UNDEF) return m;
    }
    /* the undefined names the key for its error message; a key made at run
       time is kept (an extra reference) until the render ends */
    const jstr *name = NULL;
    if (key.t == JV_STR) {
        name = jv_str(key);
        jv_ref(key);
    }
    return jundef_of(JU_ATTR, obj.t, name);
}

/* Python's slice of a sequence of n items: start, step and count. Returns 0
 * when the bounds are not integers or None. */
static int slice_bounds(jrender *r, const jnode *at, jv a, jv b, jv c, int64_t n, int64_t *start, int64_t *step,
                        int64_t *count) {
    for (int k = 0; k < 3; k++) {
        jv x = k == 0 ? a : k == 1 ? b : c;
        if (x.t != JV_NONE && x.t != JV_INT && x.t != JV_BOOL) return 0;
    }
    int64_t st = c.t == JV_NONE ? 1 : c.u.i;
    if (st == 0) jfail(r, at, "slice step cannot be zero");
    if (st == INT64_MIN) st = -INT64_MAX;
    int64_t lo, hi;
    if (a.t == JV_NONE) lo = st < 0 ? n - 1 : 0;
    else {
        lo = a.u.i;
        if (lo < 0) { lo += n; if (lo < 0) lo = st < 0 ? -1 : 0; }
        else if (lo >= n) lo = st < 0 ? n - 1 : n;
    }
    if (b.t == JV_NONE) hi = st < 0 ? -1 : n;
    else {
        hi = b.u.i;
        if (hi < 0) { hi += n; if (hi < 0) hi = st < 0 ? -1 : 0; }
        else if (hi >= n) hi = st < 0 ? n - 1 : n;
    }
    int64_t k = 0;
    if (st > 0 && hi > lo) k = (hi - lo - 1) / st + 1;
    if (st < 0 && lo > hi) k = (lo - hi - 1) / (-st) + 1;
    *start = lo;
    *step = st;
    *count = k;
    return 1;
}

_Noreturn static void bad_slice(jrender *r, const jnode *at) {
    jfail(r, at, "slice indices must be integers or None or have an __index__ method");
}

jv jdo_slice(jrender *r, const jnode *at, jv obj, jv a, jv b, jv c) {
    if (obj.t == JV_UNDEF) jfail_undef(r, at, obj);
    int64_t start, step, count;
    if (obj.t == JV_LIST && (jv_list(obj)->kind == JL_LIST || jv_list(obj)->kind == JL_TUPLE)) {
        jlist *l = jv_list(obj);
        if (!slice_bounds(r, at, a, b, c, (int64_t)l->n, &start, &step, &count)) bad_slice(r, at);
        jlist *o = jlist_new(r, l->kind, (size_t)count);
        for (int64_t k = 0; k < count; k++) jlist_push(r, o, jv_ref(l->v[start + k * step]));
        return jv_obj(JV_LIST, o);
    }
    if (obj.t == JV_STR) {
        jstr *s = jv_str(obj);
        size_t n = jcp_count(s->s, s->len);
        if (!slice_bounds(r, at, a, b, c, (int64_t)n, &start, &step, &count)) bad_slice(r, at);
        if (n == s->len) {                                      /* ASCII: bytes are characters */
            if (step == 1) return jv_strn(r, s->s + start, (size_t)count);
            jbuf o = {0};
            for (int64_t k = 0; k < count; k++) jbuf_putc(r, &o, s->s[start + k * step]);
            return jbuf_take(r, &o);
        }
        size_t *off = jmalloc(r, (n + 1) * sizeof *off);
        for (size_t i = 0, p = 0; i <= n; i++) {
            off[i] = p;
            if (i < n) p += jcp_offset(s->s + p, s->len - p, 1);
        }
        jbuf o = {0};
        for (int64_t k = 0; k < count; k++) {
            int64_t i = start + k * step;
            jbuf_put(r, &o, s->s + off[i], off[i + 1] - off[i]);
        }
        jfree(r, off);
        return jbuf_take(r, &o);
    }
    /* a slice is a plain Python subscript in Jinja2: no undefined to fall back to */
    if (obj.t == JV_DICT) jfail(r, at, "unhashable type: 'slice'");
    jfail(r, at, "'%s' object is not subscriptable", jv_type_name(obj));
}

/* ---- iteration ------------------------------------------------------------------------------- */

jlist *jiter_list(jrender *r, const jnode *at, jv v) {
    switch (v.t) {
    case JV_UNDEF:
        return jlist_new(r, JL_LIST, 0);
    case JV_LIST:
        jv_list(v)->h.refs++;
        return jv_list(v);
    case JV_DICT: {
        jdict *d = jv_dict(v);
        jlist *l = jlist_new(r, JL_LIST, d->n);
        for (size_t i = 0; i < d->n; i++) jlist_push(r, l, jv_ref(d->k[i]));
        return l;
    }
    case JV_STR: {
        jstr *s = jv_str(v);
        jlist *l = jlist_new(r, JL_LIST, 0);
        for (size_t p = 0; p < s->len;) {
            size_t k = jcp_offset(s->s + p, s->len - p, 1);
            jlist_push(r, l, jv_strn(r, s->s + p, k));
            p += k;
        }
        return l;
    }
    default:
        jfail(r, at, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---- operators ------------------------------------------------------------------------------ */

static double num_f(jv v) { return v.t == JV_FLOAT ? v.u.f : (double)v.u.i; }

static const char *op_sym(int op) {
    switch (op) {
    case OP_ADD: return "+";
    case OP_SUB: return "-";
    case OP_MUL: return "*";
    case OP_DIV: return "/";
    case OP_FLOORDIV: return "//";
    case OP_MOD: return "%";
    case OP_POW: return "** or pow()";
    default: return "?";
    }
}

_Noreturn static void bad_operands(jrender *r, const jnode *at, int op, jv a, jv b) {
    if (op == OP_ADD && a.t == JV_STR)
        jfail(r, at, "can only concatenate str (not \"%s\") to str", jv_type_name(b));
    if (op == OP_ADD && a.t == JV_LIST && jv_list(a)->kind == JL_LIST)
        jfail(r, at, "can only concatenate list (not \"%s\") to list", jv_type_name(b));
    jfail(r, at, "unsupported operand type(s) for %s: '%s' and '%s'", op_sym(op), jv_type_name(a), jv_type_name(b));
}

_Noreturn void joverflow(jrender *r, const jnode *at) {
    jfail(r, at, "integer joverflow (pocket's integers are 64-bit; Python's are unbounded)");
}

static void python_divmod(double x, double y, double *div_out, double *mod_out) {
    double mod = fmod(x, y), div = (x - mod) / y;
    if (mod) {
        if ((y < 0) != (mod < 0)) { mod += y; div -= 1.0; }
    } else {
        mod = copysign(0.0, y);
    }
    double fl;
    if (div) {
        fl = floor(div);
        if (div - fl > 0.5) fl += 1.0;
    } else {
        fl = copysign(0.0, x / y);
    }
    *div_out = fl;
    *mod_out = mod;
}


jv jbinop(jrender *r, const jnode *at, int op, jv a, jv b) {
    if (op == OP_CONCAT) {
        jbuf o = {0};
        jv_str_to(r, at, &o, a);
        jv_str_to(r, at, &o, b);
        return jbuf_take(r, &o);
    }
    if (a.t == JV_UNDEF) jfail_undef(r, at, a);
    if (b.t == JV_UNDEF) jfail_undef(r, at, b);
    if (jv_is_num(a) && jv_is_num(b)) {
        int ints = a.t != JV_FLOAT && b.t != JV_FLOAT;
        int64_t x = a.u.i, y = b.u.i, z;
        double fx = num_f(a), fy = num_f(b);
        switch (op) {
        case OP_ADD:
            if (!ints) return jv_float(fx + fy);
            if (__builtin_add_overflow(x, y, &z)) joverflow(r, at);
            return jv_int(z);
        case OP_SUB:
            if (!ints) return jv_float(fx - fy);
            if (__builtin_sub_overflow(x, y, &z)) joverflow(r, at);
            return jv_int(z);
        case OP_MUL:
            if (!ints) return jv_float(fx * fy);
            if (__builtin_mul_overflow(x, y, &z)) joverflow(r, at);
            return jv_int(z);
        case OP_DIV:
            if (fy == 0) jfail(r, at, "division by zero");
            return jv_float(fx / fy);
        case OP_FLOORDIV: case OP_MOD:
            if (ints) {
                if (y == 0) jfail(r, at, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) {
                    if (op == OP_MOD) return jv_int(0);
                    joverflow(r, at);
                }
                int64_t q = x / y, m = x % y;
                if (m && ((m < 0) != (y < 0))) { q--; m += y; }
                return jv_int(op == OP_FLOORDIV ? q : m);
            } else {
                if (fy == 0) jfail(r, at, "float division by zero");
                double d, m;
                python_divmod(fx, fy, &d, &m);
                return jv_float(op == OP_FLOORDIV ? d : m);
            }
        case OP_POW:
            if (ints && y >= 0) {
                int64_t res = 1, base = x, e = y;
                while (e) {
                    if (e & 1 && __builtin_mul_overflow(res, base, &res)) joverflow(r, at);
                    e >>= 1;
                    if (e && __builtin_mul_overflow(base, base, &base)) joverflow(r, at);
                }
                return jv_int(res);
            }
            if (fx == 0 && fy < 0) jfail(r, at, "0.0 cannot be raised to a negative power");
            if (fx < 0 && fy != floor(fy)) jfail(r, at, "a negative number to a fractional power (a complex result)");
            return jv_float(pow(fx, fy));
        default:
            break;
        }
    }
    if (op == OP_ADD && a.t == JV_STR && b.t == JV_STR) {
        jv x = a, y = b;
        int safe = (a.flags | b.flags) & JVF_SAFE;
        if (safe && !(a.flags & JVF_SAFE)) x = jhtml_escape(r, a);   /* Markup + str escapes the str */
        if (safe && !(b.flags & JVF_SAFE)) y = jhtml_escape(r, b);
        jbuf o = {0};
        jbuf_put(r, &o, jv_str(x)->s, jv_str(x)->len);
        jbuf_put(r, &o, jv_str(y)->s, jv_str(y)->len);
        if (x.u.o != a.u.o) jv_unref(r, x);
        if (y.u.o != b.u.o) jv_unref(r, y);
        jv v = jbuf_take(r, &o);
        v.flags = (uint8_t)safe;
        return v;
    }
    if (op == OP_ADD && a.t == JV_LIST && b.t == JV_LIST && jv_list(a)->kind == jv_list(b)->kind &&
        (jv_list(a)->kind == JL_LIST || jv_list(a)->kind == JL_TUPLE)) {
        jlist *x = jv_list(a), *y = jv_list(b);
        jlist *o = jlist_new(r, x->kind, x->n + y->n);
        for (size_t i = 0; i < x->n; i++) jlist_push(r, o, jv_ref(x->v[i]));
        for (size_t i = 0; i < y->n; i++) jlist_push(r, o, jv_ref(y->v[i]));
        return jv_obj(JV_LIST, o);
    }
    if (op == OP_MUL) {
        jv seq = a, cnt = b;
        if (a.t == JV_INT || a.t == JV_BOOL) { seq = b; cnt = a; }
        if ((cnt.t == JV_INT || cnt.t == JV_BOOL) && (seq.t == JV_STR || (seq.t == JV_LIST &&
            (jv_list(seq)->kind == JL_LIST || jv_list(seq)->kind == JL_TUPLE)))) {
            int64_t k = cnt.u.i < 0 ? 0 : cnt.u.i;
            if (seq.t == JV_STR) {
                jstr *s = jv_str(seq);
                if (s->len && (uint64_t)k > r->max_output / s->len)
                    jfail(r, at, "a string repeated %lld times is over the output limit", (long long)k);
                jbuf o = {0};
                for (int64_t i = 0; i < k; i++) jbuf_put(r, &o, s->s, s->len);
                return jbuf_take(r, &o);
            }
            jlist *l = jv_list(seq);
            if (l->n && (uint64_t)k > (r->max_mem / sizeof(jv)) / l->n)
                jfail(r, at, "a list repeated %lld times is over the memory limit", (long long)k);
            jlist *o = jlist_new(r, l->kind, l->n * (size_t)k);
            for (int64_t i = 0; i < k; i++)
                for (size_t j = 0; j < l->n; j++) jlist_push(r, o, jv_ref(l->v[j]));
            return jv_obj(JV_LIST, o);
        }
    }
    if (op == OP_MOD && a.t == JV_STR) return jpy_format(r, at, a, b);
    bad_operands(r, at, op, a, b);
}

static int contains(jrender *r, const jnode *at, jv container, jv item) {
    switch (container.t) {
    case JV_UNDEF:
        return 0;
    case JV_STR:
        if (item.t != JV_STR)
            jfail(r, at, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        if (!jv_str(item)->len) return 1;
        jcharge(r, jv_str(container)->len >> 6);
        return memmem(jv_str(container)->s, jv_str(container)->len, jv_str(item)->s, jv_str(item)->len) != NULL;
    case JV_LIST: {
        jlist *l = jv_list(container);
        for (size_t i = 0; i < l->n; i++)
            if (jv_eq(r, at, l->v[i], item)) return 1;
        return 0;
    }
    case JV_DICT:
        if (!jv_hashable(item)) jfail(r, at, "unhashable type: '%s'", jv_type_name(item));
        return jdict_get(r, jv_dict(container), item) != NULL;
    default:
        jfail(r, at, "argument of type '%s' is not iterable", jv_type_name(container));
    }
}

int jcompare(jrender *r, const jnode *at, int op, jv a, jv b) {
    static const char *const sym[] = {[OP_LT] = "<", [OP_LE] = "<=", [OP_GT] = ">", [OP_GE] = ">="};
    switch (op) {
    case OP_EQ: return jv_eq(r, at, a, b);
    case OP_NE: return !jv_eq(r, at, a, b);
    case OP_IN: return contains(r, at, b, a);
    case OP_NOTIN: return !contains(r, at, b, a);
    default: {
        int c = jv_cmp(r, at, a, b, sym[op]);
        if (c == 2) return 0;                              /* NaN */
        switch (op) {
        case OP_LT: return c < 0;
        case OP_LE: return c <= 0;
        case OP_GT: return c > 0;
        default: return c >= 0;
        }
    }
    }
}
