/* text/jinja_lib.c - what a Jinja template can call: Jinja2's filters and
 * tests, the methods of Python's str, list and dict that templates use,
 * loop.cycle / loop.changed, and the globals (range, namespace, dict,
 * raise_exception, strftime_now). Each follows the Python function it
 * stands for - its arguments (positional or by keyword), its result's type
 * (map, select, reject, items, unique and reverse give generators, as
 * Jinja2 3.1 does: no length, always true), and its errors.
 *
 * tojson is Hugging Face's: json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False) - keys in insertion order, non-ASCII
 * kept, no HTML escaping (Jinja2's own tojson escapes <>&' and sorts keys).
 *
 * Case mapping (upper, lower, title, capitalize) uses Unicode's simple
 * mappings (text/unicode_data.c) plus ß -> SS and İ -> i̇; Python's full
 * mappings differ on a few dozen rare characters (ligatures, some Greek). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "text/jinja_internal.h"
#include "text/unicode.h"

/* a parameter not given */
static const jv MISSING = {.t = JV_TYPES};
static int given(jv v) { return v.t != JV_TYPES; }

/* ---- argument binding ------------------------------------------------------------------- */

/* Bind a's arguments to params (NULL-terminated; a leading '*' marks a
 * parameter that takes the remaining positional arguments, which are then
 * left in a->pos[first..]) into out[] (borrowed). */
static void bind(jrender *r, const jnode *at, const char *fname, const jargs *a, const char *const *params, jv *out) {
    int np = 0;
    while (params[np]) np++;
    for (int i = 0; i < np; i++) out[i] = MISSING;
    if (a->npos > np) jfail(r, at, "%s() takes at most %d argument(s) (%d given)", fname, np, a->npos);
    for (int i = 0; i < a->npos; i++) out[i] = a->pos[i];
    for (int k = 0; k < a->nkw; k++) {
        int j = -1;
        for (int i = 0; i < np; i++)
            if (strlen(params[i]) == a->kwn[k]->len && !memcmp(params[i], a->kwn[k]->s, a->kwn[k]->len)) j = i;
        if (j < 0) jfail(r, at, "%s() got an unexpected keyword argument '%s'", fname, a->kwn[k]->s);
        if (given(out[j])) jfail(r, at, "%s() got multiple values for argument '%s'", fname, a->kwn[k]->s);
        out[j] = a->kwv[k];
    }
}

static int arg_bool(jv v, int def) { return given(v) ? jv_truthy(v) : def; }

static int64_t arg_int(jrender *r, const jnode *at, jv v, int64_t def, const char *what) {
    if (!given(v) || v.t == JV_NONE) return def;
    if (v.t == JV_INT || v.t == JV_BOOL) return v.u.i;
    jfail(r, at, "%s must be an integer, not '%s'", what, jv_type_name(v));
}

static jstr *arg_str(jrender *r, const jnode *at, jv v, const char *what) {
    if (v.t == JV_STR) return jv_str(v);
    if (v.t == JV_UNDEF) jfail_undef(r, at, v);
    jfail(r, at, "%s must be a string, not '%s'", what, jv_type_name(v));
}

/* ---- code points and case -------------------------------------------------------------- */

static uint32_t next_cp(const char *s, size_t n, size_t *i) {
    unsigned char c = (unsigned char)s[*i];
    if (c < 0x80) { (*i)++; return c; }
    uint32_t cp;
    *i += (size_t)pk_utf8_decode((const uint8_t *)s + *i, n - *i, &cp);
    return cp;
}

static void put_cp(jrender *r, jbuf *b, uint32_t cp) {
    char u[4];
    int k = pk_utf8_encode(cp, u);
    if (!k) k = pk_utf8_encode(0xFFFD, u);
    jbuf_put(r, b, u, (size_t)k);
}

extern const uint32_t pk_uc_lower[][2];
extern const size_t pk_uc_lower_n;
static uint32_t (*upper_tab)[2];
static size_t upper_n;
static pthread_once_t upper_once = PTHREAD_ONCE_INIT;

static int cmp_pair(const void *a, const void *b) {
    const uint32_t *x = a, *y = b;
    if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static void upper_init(void) {
    upper_tab = malloc(pk_uc_lower_n * sizeof *upper_tab);
    if (!upper_tab) return;
    for (size_t i = 0; i < pk_uc_lower_n; i++) {
        upper_tab[i][0] = pk_uc_lower[i][1];
        upper_tab[i][1] = pk_uc_lower[i][0];
    }
    qsort(upper_tab, pk_uc_lower_n, sizeof *upper_tab, cmp_pair);
    size_t k = 0;                     /* one upper case per lower case: the lowest */
    for (size_t i = 0; i < pk_uc_lower_n; i++)
        if (!k || upper_tab[k - 1][0] != upper_tab[i][0]) {
            upper_tab[k][0] = upper_tab[i][0];
            upper_tab[k][1] = upper_tab[i][1];
            k++;
        }
    upper_n = k;
}

static uint32_t cp_upper(uint32_t cp) {
    if (cp < 0x80) return cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
    if (cp == 0xB5) return 0x39C;
    pthread_once(&upper_once, upper_init);
    size_t lo = 0, hi = upper_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (upper_tab[mid][0] < cp) lo = mid + 1;
        else hi = mid;
    }
    return lo < upper_n && upper_tab[lo][0] == cp ? upper_tab[lo][1] : cp;
}

static uint32_t cp_lower(uint32_t cp) { return pk_unicode_tolower(cp); }
static int cp_cased(uint32_t cp) { return cp_lower(cp) != cp || cp_upper(cp) != cp; }
static int cp_is_lower(uint32_t cp) { return cp_upper(cp) != cp; }
static int cp_is_upper(uint32_t cp) { return cp_lower(cp) != cp; }

static void put_upper(jrender *r, jbuf *b, uint32_t cp) {
    if (cp == 0xDF) jbuf_put(r, b, "SS", 2);
    else put_cp(r, b, cp_upper(cp));
}

/* title case (str.title, str.capitalize): upper case but for ß and the
 * digraphs, which have title forms of their own */
static void put_title(jrender *r, jbuf *b, uint32_t cp) {
    if (cp == 0xDF) jbuf_put(r, b, "Ss", 2);
    else if (cp >= 0x1C4 && cp <= 0x1CC) put_cp(r, b, 0x1C5 + (cp - 0x1C4) / 3 * 3);
    else if (cp >= 0x1F1 && cp <= 0x1F3) put_cp(r, b, 0x1F2);
    else put_upper(r, b, cp);
}

static void put_lower(jrender *r, jbuf *b, uint32_t cp) {
    if (cp == 0x130) jbuf_put(r, b, "i\xcc\x87", 3);
    else put_cp(r, b, cp_lower(cp));
}

/* CASE_WORDS is Jinja2's title filter (not str.title): after the start and
 * after each of - ( { [ < and white space, upper case; else lower case. */
enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_SWAP, CASE_WORDS };

/* Is Σ at s[i..] final (after a cased letter, before none)? Python's
 * lower() writes ς there. */
static int final_sigma(const char *s, size_t n, size_t i, int prev_cased) {
    if (!prev_cased) return 0;
    size_t j = i;
    next_cp(s, n, &j);
    return j >= n || !cp_cased(next_cp(s, n, &j));
}

static void put_lower_at(jrender *r, jbuf *b, uint32_t cp, const char *s, size_t n, size_t at, int prev_cased) {
    if (cp == 0x3A3 && final_sigma(s, n, at, prev_cased)) put_cp(r, b, 0x3C2);
    else put_lower(r, b, cp);
}

static jv case_map(jrender *r, const char *s, size_t n, int mode) {
    jbuf b = {0};
    int prev_cased = 0, first = 1, prev_sep = 0;
    for (size_t i = 0; i < n;) {
        size_t at = i;
        uint32_t cp = next_cp(s, n, &i);
        switch (mode) {
        case CASE_UPPER: put_upper(r, &b, cp); break;
        case CASE_LOWER: put_lower_at(r, &b, cp, s, n, at, prev_cased); break;
        case CASE_TITLE:
            if (prev_cased) put_lower_at(r, &b, cp, s, n, at, prev_cased);
            else put_title(r, &b, cp);
            break;
        case CASE_CAPITALIZE:
            if (first) put_title(r, &b, cp);
            else put_lower_at(r, &b, cp, s, n, at, prev_cased);
            break;
        case CASE_WORDS:
            if (first || prev_sep) put_upper(r, &b, cp);
            else put_lower_at(r, &b, cp, s, n, at, prev_cased);
            break;
        default:
            if (cp_is_upper(cp)) put_lower_at(r, &b, cp, s, n, at, prev_cased);
            else if (cp_is_lower(cp)) put_upper(r, &b, cp);
            else put_cp(r, &b, cp);
        }
        prev_cased = cp_cased(cp);
        prev_sep = jspace(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
        first = 0;
    }
    return jbuf_take(r, &b);
}

/* ---- small helpers ------------------------------------------------------------------------ */

static jv soft_str(jrender *r, const jnode *at, jv v) { return jv_to_str(r, at, v); }

static jv with_flags(jv v, int flags) {
    v.flags = (uint8_t)flags;
    return v;
}

static jlist *new_list(jrender *r, int kind) { return jlist_new(r, kind, 0); }

static jv tuple2(jrender *r, jv a, jv b) {
    jlist *t = jlist_new(r, JL_TUPLE, 2);
    jlist_push(r, t, a);
    jlist_push(r, t, b);
    return jv_obj(JV_LIST, t);
}

static int64_t py_len(jrender *r, const jnode *at, jv v) {
    switch (v.t) {
    case JV_UNDEF: return 0;
    case JV_STR: return (int64_t)jcp_count(jv_str(v)->s, jv_str(v)->len);
    case JV_LIST:
        if (jv_list(v)->kind == JL_GEN) break;
        return (int64_t)jv_list(v)->n;
    case JV_DICT: return (int64_t)jv_dict(v)->n;
    default: break;
    }
    jfail(r, at, "object of type '%s' has no len()", jv_type_name(v));
}

/* Jinja2's attribute getter: "a.b.0" -> item a, then b, then 0; an
 * undefined step becomes def when one is given. */
static jv get_path_default(jrender *r, const jnode *at, jv item, jv attr, jv def) {
    if (attr.t == JV_INT) {
        jv x = jget_item(r, at, item, attr);
        return x.t == JV_UNDEF && given(def) ? jv_ref(def) : x;
    }
    jstr *a = arg_str(r, at, attr, "attribute");
    jv cur = jv_ref(item);
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < a->len && a->s[j] != '.') j++;
        jv key;
        int digits = j > i;
        for (size_t k = i; k < j; k++)
            if (a->s[k] < '0' || a->s[k] > '9') digits = 0;
        if (digits && j - i < 18) {
            int64_t x = 0;
            for (size_t k = i; k < j; k++) x = x * 10 + (a->s[k] - '0');
            key = jv_int(x);
        } else {
            key = jv_strn(r, a->s + i, j - i);
        }
        jv next = jget_item(r, at, cur, key);
        jv_unref(r, key);
        jv_unref(r, cur);
        cur = next.t == JV_UNDEF && given(def) ? jv_ref(def) : next;
        if (j >= a->len) return cur;
        i = j + 1;
    }
}

static jv get_path(jrender *r, const jnode *at, jv item, jv attr) { return get_path_default(r, at, item, attr, MISSING); }

/* ---- sorting ---------------------------------------------------------------------------- */

typedef struct skey {
    jv key, item;
} skey;

static int key_cmp(jrender *r, const jnode *at, const skey *a, const skey *b, int reverse) {
    jcharge(r, 1);
    int c = jv_cmp(r, at, a->key, b->key, "<");
    if (c == 2) c = 0;
    return reverse ? -c : c;
}

/* Stable merge sort (Python's sort is stable; reverse keeps equal items in
 * their order, as Python's reverse=True does). */
static void msort(jrender *r, const jnode *at, skey *v, skey *tmp, size_t n, int reverse) {
    if (n < 2) return;
    size_t h = n / 2;
    msort(r, at, v, tmp, h, reverse);
    msort(r, at, v + h, tmp, n - h, reverse);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = key_cmp(r, at, &v[j], &v[i], reverse) < 0 ? v[j++] : v[i++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

/* key of an item for sort, dictsort, unique, min, max: its attribute if
 * given, lowered if a string and not case sensitive (a new reference) */
static jv sort_key(jrender *r, const jnode *at, jv item, jv attr, int case_sensitive) {
    jv k = given(attr) && attr.t != JV_NONE ? get_path(r, at, item, attr) : jv_ref(item);
    if (!case_sensitive && k.t == JV_STR) {
        jv l = case_map(r, jv_str(k)->s, jv_str(k)->len, CASE_LOWER);
        jv_unref(r, k);
        return l;
    }
    return k;
}

/* items sorted by key (keys[i] for items[i], both references taken): a new list */
static jv sorted_list(jrender *r, const jnode *at, jv *keys, jv *items, size_t n, int reverse, int kind) {
    skey *v = jmalloc(r, (n + 1) * sizeof *v), *tmp = jmalloc(r, (n + 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++) { v[i].key = keys[i]; v[i].item = items[i]; }
    msort(r, at, v, tmp, n, reverse);
    jlist *o = jlist_new(r, kind, n);
    for (size_t i = 0; i < n; i++) {
        jlist_push(r, o, v[i].item);
        jv_unref(r, v[i].key);
    }
    jfree(r, v);
    jfree(r, tmp);
    return jv_obj(JV_LIST, o);
}

/* ---- Python string formatting (str % args) ------------------------------------------------- */

static void pad_to(jrender *r, jbuf *b, const char *s, size_t n, int width, int left, char fill) {
    size_t cps = jcp_count(s, n);
    if (!left) for (size_t i = cps; (int64_t)i < width; i++) jbuf_putc(r, b, fill);
    jbuf_put(r, b, s, n);
    if (left) for (size_t i = cps; (int64_t)i < width; i++) jbuf_putc(r, b, ' ');
}

jv jpy_format(jrender *r, const jnode *at, jv fmt, jv args) {
    jstr *f = jv_str(fmt);
    jv *av = &args;
    size_t an = 1, ai = 0;
    int mapping = args.t == JV_DICT;
    if (args.t == JV_LIST && jv_list(args)->kind == JL_TUPLE) { av = jv_list(args)->v; an = jv_list(args)->n; }
    jbuf b = {0};
    for (size_t i = 0; i < f->len; i++) {
        char c = f->s[i];
        if (c != '%') { jbuf_putc(r, &b, c); continue; }
        if (++i >= f->len) jfail(r, at, "incomplete format");
        jv arg = MISSING;
        if (f->s[i] == '(') {
            size_t j = i + 1;
            while (j < f->len && f->s[j] != ')') j++;
            if (j >= f->len || !mapping) jfail(r, at, "format requires a mapping");
            jv k = jv_strn(r, f->s + i + 1, j - i - 1);
            jv *p = jdict_get(r, jv_dict(args), k);
            if (!p) jfail(r, at, "KeyError: '%s'", jv_str(k)->s);
            jv_unref(r, k);
            arg = *p;
            i = j + 1;
        }
        char flags[8];
        int nf = 0;
        while (i < f->len && strchr("-+ #0", f->s[i]) && nf < 7) flags[nf++] = f->s[i++];
        flags[nf] = 0;
        int width = -1, prec = -1;
        if (i < f->len && f->s[i] >= '0' && f->s[i] <= '9') {
            width = 0;
            while (i < f->len && f->s[i] >= '0' && f->s[i] <= '9' && width < 100000) width = width * 10 + (f->s[i++] - '0');
        }
        if (i < f->len && f->s[i] == '.') {
            i++;
            prec = 0;
            while (i < f->len && f->s[i] >= '0' && f->s[i] <= '9' && prec < 100000) prec = prec * 10 + (f->s[i++] - '0');
        }
        if (i >= f->len) jfail(r, at, "incomplete format");
        char t = f->s[i];
        if (t == '%') { jbuf_putc(r, &b, '%'); continue; }
        if (!given(arg)) {
            if (mapping) arg = args;
            else if (ai < an) arg = av[ai++];
            else jfail(r, at, "not enough arguments for format string");
        }
        if (width > 4096 || prec > 4096) jfail(r, at, "a format width or precision over 4096");
        int left = strchr(flags, '-') != NULL;
        char spec[32], tmp[4200];
        switch (t) {
        case 's': case 'r': case 'a': {
            jbuf sb = {0};
            if (t == 's') jv_str_to(r, at, &sb, arg);
            else jv_repr_to(r, at, &sb, arg, 0);
            jv s = jbuf_take(r, &sb);
            size_t n = jv_str(s)->len;
            if (prec >= 0) n = jcp_offset(jv_str(s)->s, n, (size_t)prec);
            pad_to(r, &b, jv_str(s)->s, n, width, left, ' ');
            jv_unref(r, s);
            break;
        }
        case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': case 'c': {
            if (arg.t != JV_INT && arg.t != JV_BOOL && arg.t != JV_FLOAT)
                jfail(r, at, "%%%c format: a real number is required, not %s", t, jv_type_name(arg));
            if (t == 'c') {
                if (arg.t == JV_FLOAT) jfail(r, at, "%%c requires int or char");
                if (arg.u.i < 0 || arg.u.i > 0x10FFFF) jfail(r, at, "%%c arg not in range(0x110000)");
                jbuf cb = {0};
                put_cp(r, &cb, (uint32_t)arg.u.i);
                jv s = jbuf_take(r, &cb);
                pad_to(r, &b, jv_str(s)->s, jv_str(s)->len, width, left, ' ');
                jv_unref(r, s);
                break;
            }
            if (arg.t == JV_FLOAT && !(arg.u.f > -9.2e18 && arg.u.f < 9.2e18))
                jfail(r, at, "%%%c format: %s is out of pocket's 64-bit integer range", t,
                      arg.u.f != arg.u.f ? "NaN" : "the number");
            long long x = arg.t == JV_FLOAT ? (long long)arg.u.f : (long long)arg.u.i;
            snprintf(spec, sizeof spec, "%%%s%s%s%s%s", flags, width >= 0 ? "*" : "", prec >= 0 ? ".*" : "", "ll",
                     t == 'i' || t == 'u' ? "d" : (char[2]){t, 0});
            if (width >= 0 && prec >= 0) snprintf(tmp, sizeof tmp, spec, width, prec, x);
            else if (width >= 0) snprintf(tmp, sizeof tmp, spec, width, x);
            else if (prec >= 0) snprintf(tmp, sizeof tmp, spec, prec, x);
            else snprintf(tmp, sizeof tmp, spec, x);
            jbuf_puts(r, &b, tmp);
            break;
        }
        case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
            if (arg.t != JV_INT && arg.t != JV_BOOL && arg.t != JV_FLOAT)
                jfail(r, at, "must be real number, not %s", jv_type_name(arg));
            double x = arg.t == JV_FLOAT ? arg.u.f : (double)arg.u.i;
            snprintf(spec, sizeof spec, "%%%s%s.*%c", flags, width >= 0 ? "*" : "", t);
            if (width >= 0) snprintf(tmp, sizeof tmp, spec, width, prec >= 0 ? prec : 6, x);
            else snprintf(tmp, sizeof tmp, spec, prec >= 0 ? prec : 6, x);
            jbuf_puts(r, &b, tmp);
            break;
        }
        default:
            jfail(r, at, "unsupported format character '%c'", t);
        }
    }
    if (!mapping && ai < an) jfail(r, at, "not all arguments converted during string formatting");
    return jbuf_take(r, &b);
}

/* str.format: {} {0} {name}, with !r / !s; format specs are refused */
static jv str_format(jrender *r, const jnode *at, jstr *f, const jargs *a) {
    jbuf b = {0};
    int auto_i = 0;
    for (size_t i = 0; i < f->len; i++) {
        char c = f->s[i];
        if (c == '}') {
            if (i + 1 < f->len && f->s[i + 1] == '}') { jbuf_putc(r, &b, '}'); i++; continue; }
            jfail(r, at, "single '}' encountered in format string");
        }
        if (c != '{') { jbuf_putc(r, &b, c); continue; }
        if (i + 1 < f->len && f->s[i + 1] == '{') { jbuf_putc(r, &b, '{'); i++; continue; }
        size_t j = i + 1;
        while (j < f->len && f->s[j] != '}' && f->s[j] != '!' && f->s[j] != ':') j++;
        size_t name_end = j;
        char conv = 0;
        if (j < f->len && f->s[j] == '!') { conv = j + 1 < f->len ? f->s[j + 1] : 0; j += 2; }
        if (j < f->len && f->s[j] == ':') {
            if (j + 1 < f->len && f->s[j + 1] != '}') jfail(r, at, "str.format: format specs are not supported");
            j++;
        }
        if (j >= f->len || f->s[j] != '}') jfail(r, at, "str.format: expected '}' before end of string");
        jv arg = MISSING;
        size_t nl = name_end - (i + 1);
        const char *nm = f->s + i + 1;
        if (!nl) {
            if (auto_i >= a->npos) jfail(r, at, "str.format: replacement index %d out of range", auto_i);
            arg = a->pos[auto_i++];
        } else if (nm[0] >= '0' && nm[0] <= '9') {
            int64_t k = 0;
            for (size_t d = 0; d < nl && k <= a->npos; d++) {
                if (nm[d] < '0' || nm[d] > '9') jfail(r, at, "str.format: fields like '%.*s' are not supported", (int)nl, nm);
                k = k * 10 + (nm[d] - '0');
            }
            if (k >= a->npos) jfail(r, at, "str.format: replacement index %.*s out of range", (int)nl, nm);
            arg = a->pos[k];
        } else {
            for (int k = 0; k < a->nkw; k++)
                if (a->kwn[k]->len == nl && !memcmp(a->kwn[k]->s, nm, nl)) arg = a->kwv[k];
            if (!given(arg)) jfail(r, at, "str.format: KeyError '%.*s'", (int)nl, nm);
        }
        if (conv == 'r' || conv == 'a') jv_repr_to(r, at, &b, arg, 0);
        else jv_str_to(r, at, &b, arg);
        i = j;
    }
    return jbuf_take(r, &b);
}

/* ---- string operations shared by filters and methods ------------------------------------------ */

static int in_chars(uint32_t cp, const jstr *chars) {
    if (!chars) return jspace(cp);
    for (size_t i = 0; i < chars->len;)
        if (next_cp(chars->s, chars->len, &i) == cp) return 1;
    return 0;
}

/* strip: which = 1 left, 2 right, 3 both; chars NULL: white space */
static jv str_strip(jrender *r, jv v, const jstr *chars, int which) {
    jstr *s = jv_str(v);
    size_t a = 0, b = s->len;
    if (which & 1)
        while (a < b) {
            size_t i = a;
            if (!in_chars(next_cp(s->s, b, &i), chars)) break;
            a = i;
        }
    if (which & 2) {
        size_t last = a;                      /* end of the last character not stripped */
        for (size_t i = a; i < b;) {
            uint32_t cp = next_cp(s->s, b, &i);
            if (!in_chars(cp, chars)) last = i;
        }
        b = last;
    }
    if (a == 0 && b == s->len) return jv_ref(v);
    return with_flags(jv_strn(r, s->s + a, b - a), v.flags);
}

static jv str_replace(jrender *r, jstr *s, jstr *old, jstr *new_, int64_t count) {
    jbuf b = {0};
    if (!old->len) {
        size_t i = 0;
        int64_t k = 0;
        if (count != 0) { jbuf_put(r, &b, new_->s, new_->len); k++; }
        while (i < s->len) {
            size_t j = i;
            next_cp(s->s, s->len, &j);
            jbuf_put(r, &b, s->s + i, j - i);
            i = j;
            if (count < 0 || k < count) { jbuf_put(r, &b, new_->s, new_->len); k++; }
        }
        return jbuf_take(r, &b);
    }
    size_t i = 0;
    int64_t k = 0;
    while (i < s->len) {
        const char *hit = (count < 0 || k < count) ? memmem(s->s + i, s->len - i, old->s, old->len) : NULL;
        if (!hit) break;
        size_t at = (size_t)(hit - s->s);
        jbuf_put(r, &b, s->s + i, at - i);
        jbuf_put(r, &b, new_->s, new_->len);
        i = at + old->len;
        k++;
    }
    jbuf_put(r, &b, s->s + i, s->len - i);
    return jbuf_take(r, &b);
}

/* str.split / rsplit: sep NULL splits at runs of white space */
static jv str_split(jrender *r, const jnode *at, jstr *s, const jstr *sep, int64_t maxsplit, int from_right) {
    jlist *l = new_list(r, JL_LIST);
    jv lv = jv_obj(JV_LIST, l);
    if (sep && !sep->len) jfail(r, at, "empty separator");
    if (!from_right) {
        size_t i = 0;
        int64_t k = 0;
        if (!sep) {
            for (;;) {
                while (i < s->len) {                      /* skip white space */
                    size_t j = i;
                    if (!jspace(next_cp(s->s, s->len, &j))) break;
                    i = j;
                }
                if (i >= s->len) break;
                if (maxsplit >= 0 && k >= maxsplit) { jlist_push(r, l, jv_strn(r, s->s + i, s->len - i)); break; }
                size_t e = i;
                while (e < s->len) {
                    size_t j = e;
                    if (jspace(next_cp(s->s, s->len, &j))) break;
                    e = j;
                }
                jlist_push(r, l, jv_strn(r, s->s + i, e - i));
                k++;
                i = e;
            }
            return lv;
        }
        for (;;) {
            const char *hit = (maxsplit < 0 || k < maxsplit) ? memmem(s->s + i, s->len - i, sep->s, sep->len) : NULL;
            if (!hit) { jlist_push(r, l, jv_strn(r, s->s + i, s->len - i)); return lv; }
            size_t at2 = (size_t)(hit - s->s);
            jlist_push(r, l, jv_strn(r, s->s + i, at2 - i));
            i = at2 + sep->len;
            k++;
        }
    }
    /* from the right: collect pieces backwards, then reverse */
    size_t end = s->len;
    int64_t k = 0;
    if (!sep) {
        /* code point boundaries, to walk backwards */
        size_t n = jcp_count(s->s, s->len);
        size_t *off = jmalloc(r, (n + 1) * sizeof *off);
        for (size_t i = 0, p = 0; i <= n; i++) { off[i] = p; if (i < n) p += jcp_offset(s->s + p, s->len - p, 1); }
        size_t c = n;                                  /* code point index of end */
        for (;;) {
            while (c > 0) {
                size_t j = off[c - 1];
                if (!jspace(next_cp(s->s, s->len, &j))) break;
                c--;
            }
            if (c == 0) break;
            end = off[c];
            if (maxsplit >= 0 && k >= maxsplit) { jlist_push(r, l, jv_strn(r, s->s, end)); break; }
            size_t b = c;
            while (b > 0) {
                size_t j = off[b - 1];
                if (jspace(next_cp(s->s, s->len, &j))) break;
                b--;
            }
            jlist_push(r, l, jv_strn(r, s->s + off[b], end - off[b]));
            k++;
            c = b;
        }
        jfree(r, off);
    } else {
        for (;;) {
            const char *hit = NULL;
            if ((maxsplit < 0 || k < maxsplit) && end >= sep->len)
                for (size_t p = end - sep->len + 1; p-- > 0;)
                    if (!memcmp(s->s + p, sep->s, sep->len)) { hit = s->s + p; break; }
            if (!hit) { jlist_push(r, l, jv_strn(r, s->s, end)); break; }
            size_t at2 = (size_t)(hit - s->s);
            jlist_push(r, l, jv_strn(r, s->s + at2 + sep->len, end - at2 - sep->len));
            end = at2;
            k++;
        }
    }
    for (size_t i = 0; i < l->n / 2; i++) {
        jv t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    return lv;
}

/* find / rfind / count / index with optional start, end (code points) */
static int64_t str_find(jrender *r, jstr *s, jstr *sub, int64_t start, int64_t end, int from_right) {
    jcharge(r, s->len >> 6);
    int64_t n = (int64_t)jcp_count(s->s, s->len);
    if (start < 0) { start += n; if (start < 0) start = 0; }
    if (end < 0) { end += n; if (end < 0) end = 0; }
    if (end > n) end = n;
    if (start > n || start > end) return -1;
    size_t a = jcp_offset(s->s, s->len, (size_t)start), b = jcp_offset(s->s, s->len, (size_t)end);
    if (sub->len > b - a) return -1;
    size_t hit = (size_t)-1;
    if (!from_right) {
        const char *h = sub->len ? memmem(s->s + a, b - a, sub->s, sub->len) : s->s + a;
        if (h) hit = (size_t)(h - s->s);
    } else {
        for (size_t p = b - sub->len + 1; p-- > a;)
            if (!memcmp(s->s + p, sub->s, sub->len)) { hit = p; break; }
    }
    if (hit == (size_t)-1) return -1;
    return (int64_t)jcp_count(s->s, hit);
}

static int64_t str_count(jrender *r, jstr *s, jstr *sub) {
    jcharge(r, s->len >> 6);
    if (!sub->len) return (int64_t)jcp_count(s->s, s->len) + 1;
    int64_t k = 0;
    for (size_t i = 0; i + sub->len <= s->len;) {
        const char *h = memmem(s->s + i, s->len - i, sub->s, sub->len);
        if (!h) break;
        k++;
        i = (size_t)(h - s->s) + sub->len;
    }
    return k;
}

static int is_linebreak(uint32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d || cp == 0x1e ||
           cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

static jv str_splitlines(jrender *r, jstr *s, int keepends) {
    jlist *l = new_list(r, JL_LIST);
    size_t i = 0, start = 0;
    while (i < s->len) {
        size_t j = i;
        uint32_t cp = next_cp(s->s, s->len, &j);
        if (is_linebreak(cp)) {
            size_t e = j;
            if (cp == '\r' && e < s->len && s->s[e] == '\n') e++;
            jlist_push(r, l, jv_strn(r, s->s + start, (keepends ? e : i) - start));
            start = i = e;
        } else {
            i = j;
        }
    }
    if (start < s->len) jlist_push(r, l, jv_strn(r, s->s + start, s->len - start));
    return jv_obj(JV_LIST, l);
}

static int str_all(jstr *s, int kind) {
    if (!s->len) return 0;
    int cased = 0;
    for (size_t i = 0; i < s->len;) {
        uint32_t cp = next_cp(s->s, s->len, &i);
        int cls = pk_unicode_class(cp);
        switch (kind) {
        case 'd': if (!(cp >= '0' && cp <= '9') && cls != PK_UC_NUMBER) return 0; break;
        case 'a': if (cls != PK_UC_LETTER) return 0; break;
        case 'n': if (cls != PK_UC_LETTER && cls != PK_UC_NUMBER) return 0; break;
        case 's': if (!jspace(cp)) return 0; break;
        case 'u': if (cp_is_lower(cp)) return 0; if (cp_is_upper(cp)) cased = 1; break;
        case 'l': if (cp_is_upper(cp)) return 0; if (cp_is_lower(cp)) cased = 1; break;
        default: break;
        }
    }
    return kind == 'u' || kind == 'l' ? cased : 1;
}

static jv str_pad(jrender *r, jstr *s, int64_t width, jstr *fill, int how) {
    int64_t n = (int64_t)jcp_count(s->s, s->len);
    if (width <= n) return jv_ref(jv_obj(JV_STR, s));
    if (width - n > (int64_t)r->max_output) jfail(r, NULL, "padding to %lld characters is over the output limit", (long long)width);
    int64_t marg = width - n, left = how == 'r' ? marg : how == 'l' ? 0 : marg / 2 + (marg & width & 1);
    const char *f = fill ? fill->s : " ";
    size_t fl = fill ? fill->len : 1;
    jbuf b = {0};
    for (int64_t i = 0; i < left; i++) jbuf_put(r, &b, f, fl);
    jbuf_put(r, &b, s->s, s->len);
    for (int64_t i = left; i < marg; i++) jbuf_put(r, &b, f, fl);
    return jbuf_take(r, &b);
}

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

static int name_in(const char *const *names, int n, const char *s, size_t len) {
    for (int i = 0; i < n; i++)
        if (strlen(names[i]) == len && !memcmp(names[i], s, len)) return i;
    return -1;
}

int jfilter_id(const char *name, size_t n) { return name_in(filter_names, F_COUNT_, name, n); }

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
    return with_flags(jbuf_take(r, &b), JVF_SAFE);
}

static jv html_escape_v(jrender *r, const jnode *at, jv v, int force) {
    if (v.t == JV_STR && (v.flags & JVF_SAFE) && !force) return jv_ref(v);
    jv s = soft_str(r, at, v);
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
        jstr *tn = arg_str(r, at, a->pos[first], "the test name");
        test = jtest_id(tn->s, tn->len);
        if (test < 0) jfail(r, at, "no test named '%s'", tn->s);
    }
    jargs ta = {.pos = a->pos + first + 1, .npos = a->npos > first + 1 ? a->npos - first - 1 : 0,
                .kwn = a->kwn, .kwv = a->kwv, .nkw = a->nkw};
    jlist *in = jiter_list(r, at, v);
    jlist *out = new_list(r, JL_GEN);
    for (size_t i = 0; i < in->n; i++) {
        jv x = by_attr ? get_path(r, at, in->v[i], a->pos[0]) : jv_ref(in->v[i]);
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
    bind(r, at, "tojson", a, params, p);
    char ind[64];
    const char *indent = NULL;
    if (given(p[1]) && p[1].t != JV_NONE) {
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
    if (given(p[2]) && p[2].t != JV_NONE) {
        if (p[2].t != JV_LIST || jv_list(p[2])->n != 2 || jv_list(p[2])->v[0].t != JV_STR || jv_list(p[2])->v[1].t != JV_STR)
            jfail(r, at, "tojson: separators must be a pair of strings");
        isep = jv_str(jv_list(p[2])->v[0])->s;
        ksep = jv_str(jv_list(p[2])->v[1])->s;
    }
    jbuf b = {0};
    jv_json_to(r, at, &b, v, arg_bool(p[0], 0), indent, isep, ksep, arg_bool(p[3], 0), 0);
    return jbuf_take(r, &b);
}

static jv do_indent(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"width", "first", "blank", NULL};
    jv p[3];
    bind(r, at, "indent", a, params, p);
    jv ind;
    if (given(p[0]) && p[0].t == JV_STR) ind = jv_ref(p[0]);
    else {
        int64_t w = arg_int(r, at, p[0], 4, "indent width");
        if (w < 0) w = 0;
        if (w > 4096) jfail(r, at, "indent width over 4096");
        jbuf wb = {0};
        for (int64_t i = 0; i < w; i++) jbuf_putc(r, &wb, ' ');
        ind = jbuf_take(r, &wb);
    }
    jv s = soft_str(r, at, v);
    jbuf sb = {0};
    jbuf_put(r, &sb, jv_str(s)->s, jv_str(s)->len);
    jbuf_putc(r, &sb, '\n');                  /* Jinja2 appends a newline before splitlines */
    jv sn = jbuf_take(r, &sb);
    jv lines = str_splitlines(r, jv_str(sn), 0);
    jlist *l = jv_list(lines);
    jstr *is = jv_str(ind);
    jbuf b = {0};
    if (arg_bool(p[1], 0)) jbuf_put(r, &b, is->s, is->len);
    for (size_t i = 0; i < l->n; i++) {
        jstr *line = jv_str(l->v[i]);
        if (i) {
            jbuf_putc(r, &b, '\n');
            if (arg_bool(p[2], 0) || line->len) jbuf_put(r, &b, is->s, is->len);
        }
        jbuf_put(r, &b, line->s, line->len);
    }
    jv_unref(r, lines);
    jv_unref(r, sn);
    jv_unref(r, ind);
    int flags = v.t == JV_STR ? v.flags : 0;
    jv_unref(r, s);
    return with_flags(jbuf_take(r, &b), flags);
}

static jv do_join(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"d", "attribute", NULL};
    jv p[2];
    bind(r, at, "join", a, params, p);
    jlist *l = jiter_list(r, at, v);
    jbuf b = {0};
    for (size_t i = 0; i < l->n; i++) {
        if (i && given(p[0])) jv_str_to(r, at, &b, p[0]);
        if (given(p[1]) && p[1].t != JV_NONE) {
            jv x = get_path(r, at, l->v[i], p[1]);
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
    jv attr = MISSING, def = MISSING;
    for (int k = 0; k < a->nkw; k++) {
        if (a->kwn[k]->len == 9 && !memcmp(a->kwn[k]->s, "attribute", 9)) attr = a->kwv[k];
        else if (a->kwn[k]->len == 7 && !memcmp(a->kwn[k]->s, "default", 7)) def = a->kwv[k];
    }
    jlist *in = jiter_list(r, at, v);
    jlist *out = new_list(r, JL_GEN);
    if (given(attr)) {
        if (a->npos) jfail(r, at, "map: positional arguments with attribute=");
        for (size_t i = 0; i < in->n; i++) jlist_push(r, out, get_path_default(r, at, in->v[i], attr, def));
    } else {
        if (!a->npos) jfail(r, at, "map: no filter or attribute given");
        jstr *fname = arg_str(r, at, a->pos[0], "the filter name");
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
    bind(r, at, "sort", a, params, p);
    jlist *in = jiter_list(r, at, v);
    size_t n = in->n;
    jv *keys = jmalloc(r, (n + 1) * sizeof *keys), *items = jmalloc(r, (n + 1) * sizeof *items);
    for (size_t i = 0; i < n; i++) {
        keys[i] = sort_key(r, at, in->v[i], p[2], arg_bool(p[1], 0));
        items[i] = jv_ref(in->v[i]);
    }
    jv out = sorted_list(r, at, keys, items, n, arg_bool(p[0], 0), JL_LIST);
    jfree(r, keys);
    jfree(r, items);
    jv_unref(r, jv_obj(JV_LIST, in));
    return out;
}

static jv do_dictsort(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"case_sensitive", "by", "reverse", NULL};
    jv p[3];
    bind(r, at, "dictsort", a, params, p);
    if (v.t != JV_DICT) {
        if (v.t == JV_UNDEF) jfail_undef(r, at, v);
        jfail(r, at, "dictsort: '%s' object has no attribute 'items'", jv_type_name(v));
    }
    int by_value = 0;
    if (given(p[1])) {
        jstr *by = arg_str(r, at, p[1], "by");
        if (by->len == 5 && !memcmp(by->s, "value", 5)) by_value = 1;
        else if (!(by->len == 3 && !memcmp(by->s, "key", 3))) jfail(r, at, "You can only sort by either \"key\" or \"value\"");
    }
    jdict *d = jv_dict(v);
    jv *keys = jmalloc(r, (d->n + 1) * sizeof *keys), *items = jmalloc(r, (d->n + 1) * sizeof *items);
    for (size_t i = 0; i < d->n; i++) {
        keys[i] = sort_key(r, at, by_value ? d->v[i] : d->k[i], MISSING, arg_bool(p[0], 0));
        items[i] = tuple2(r, jv_ref(d->k[i]), jv_ref(d->v[i]));
    }
    jv out = sorted_list(r, at, keys, items, d->n, arg_bool(p[2], 0), JL_LIST);
    jfree(r, keys);
    jfree(r, items);
    return out;
}

static jv do_unique(jrender *r, const jnode *at, jv v, const jargs *a) {
    static const char *const params[] = {"case_sensitive", "attribute", NULL};
    jv p[2];
    bind(r, at, "unique", a, params, p);
    jlist *in = jiter_list(r, at, v);
    jlist *seen = new_list(r, JL_LIST), *out = new_list(r, JL_GEN);
    for (size_t i = 0; i < in->n; i++) {
        jv k = sort_key(r, at, in->v[i], p[1], arg_bool(p[0], 0));
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
    bind(r, at, want_max ? "max" : "min", a, params, p);
    jlist *in = jiter_list(r, at, v);
    jv best = jv_undef(), bestk = jv_undef();
    for (size_t i = 0; i < in->n; i++) {
        jv k = sort_key(r, at, in->v[i], p[1], arg_bool(p[0], 0));
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
    bind(r, at, "truncate", a, params, p);
    int64_t length = arg_int(r, at, p[0], 255, "length"), leeway = arg_int(r, at, p[3], 5, "leeway");
    jv s = soft_str(r, at, v);
    jstr *end = given(p[2]) ? arg_str(r, at, p[2], "end") : NULL;
    int64_t endn = end ? (int64_t)jcp_count(end->s, end->len) : 3;
    if (length < endn) jfail(r, at, "expected length >= %lld, got %lld", (long long)endn, (long long)length);
    if (leeway < 0) jfail(r, at, "expected leeway >= 0, got %lld", (long long)leeway);
    int64_t n = (int64_t)jcp_count(jv_str(s)->s, jv_str(s)->len);
    if (n <= length + leeway) return s;
    size_t cut = jcp_offset(jv_str(s)->s, jv_str(s)->len, (size_t)(length - endn));
    if (!arg_bool(p[1], 0)) {
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
        bind(r, at, "abs", a, (const char *const[]){NULL}, p);
        if (v.t == JV_INT || v.t == JV_BOOL) {
            if (v.u.i == INT64_MIN) jfail(r, at, "integer overflow in abs");
            return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.t == JV_FLOAT) return jv_float(fabs(v.u.f));
        if (v.t == JV_UNDEF) jfail_undef(r, at, v);
        jfail(r, at, "bad operand type for abs(): '%s'", jv_type_name(v));
    case F_ATTR: {
        bind(r, at, "attr", a, (const char *const[]){"name", NULL}, p);
        jstr *n = arg_str(r, at, p[0], "attr name");
        if (v.t == JV_NS) {
            jv *x = jdict_get_str(jv_dict(v), n);
            return x ? jv_ref(*x) : jv_undef();
        }
        if (v.t == JV_UNDEF) jfail_undef(r, at, v);
        return jmethod_get(r, v, n->s, n->len);
    }
    case F_CAPITALIZE: case F_LOWER: case F_UPPER: case F_TITLE: {
        bind(r, at, filter_names[id], a, (const char *const[]){NULL}, p);
        jv s = soft_str(r, at, v);
        int mode = id == F_CAPITALIZE ? CASE_CAPITALIZE : id == F_LOWER ? CASE_LOWER : id == F_UPPER ? CASE_UPPER : CASE_WORDS;
        jv o = case_map(r, jv_str(s)->s, jv_str(s)->len, mode);
        int flags = v.t == JV_STR ? v.flags : 0;
        jv_unref(r, s);
        return with_flags(o, flags);
    }
    case F_CENTER: {
        bind(r, at, "center", a, (const char *const[]){"width", NULL}, p);
        jv s = soft_str(r, at, v);
        jv o = str_pad(r, jv_str(s), arg_int(r, at, p[0], 80, "width"), NULL, 'c');
        jv_unref(r, s);
        return o;
    }
    case F_COUNT: case F_LENGTH:
        bind(r, at, "length", a, (const char *const[]){NULL}, p);
        return jv_int(py_len(r, at, v));
    case F_D: case F_DEFAULT:
        bind(r, at, "default", a, (const char *const[]){"default_value", "boolean", NULL}, p);
        if (v.t == JV_UNDEF || (arg_bool(p[1], 0) && !jv_truthy(v)))
            return given(p[0]) ? jv_ref(p[0]) : jv_strn(r, "", 0);
        return jv_ref(v);
    case F_DICTSORT:
        return do_dictsort(r, at, v, a);
    case F_E: case F_ESCAPE: case F_FORCEESCAPE:
        bind(r, at, filter_names[id], a, (const char *const[]){NULL}, p);
        return html_escape_v(r, at, v, id == F_FORCEESCAPE);
    case F_FIRST: case F_LAST: {
        bind(r, at, filter_names[id], a, (const char *const[]){NULL}, p);
        if (id == F_LAST && v.t == JV_LIST && jv_list(v)->kind == JL_GEN)
            jfail(r, at, "'generator' object is not reversible");
        jlist *l = jiter_list(r, at, v);
        jv o = l->n ? jv_ref(l->v[id == F_FIRST ? 0 : l->n - 1]) : jv_undef();
        jv_unref(r, jv_obj(JV_LIST, l));
        return o;
    }
    case F_FLOAT: {
        bind(r, at, "float", a, (const char *const[]){"default", NULL}, p);
        double f;
        if (to_float(v, &f)) return jv_float(f);
        return given(p[0]) ? jv_ref(p[0]) : jv_float(0.0);
    }
    case F_FORMAT: {
        jv s = soft_str(r, at, v);
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
        bind(r, at, "int", a, (const char *const[]){"default", "base", NULL}, p);
        int64_t x;
        if (to_int(v, arg_int(r, at, p[1], 10, "base"), &x)) return jv_int(x);
        return given(p[0]) ? jv_ref(p[0]) : jv_int(0);
    }
    case F_ITEMS: {
        bind(r, at, "items", a, (const char *const[]){NULL}, p);
        jlist *o = new_list(r, JL_GEN);
        if (v.t == JV_UNDEF) return jv_obj(JV_LIST, o);
        if (v.t != JV_DICT) jfail(r, at, "Can only get item pairs from a mapping.");
        jdict *d = jv_dict(v);
        for (size_t i = 0; i < d->n; i++) jlist_push(r, o, tuple2(r, jv_ref(d->k[i]), jv_ref(d->v[i])));
        return jv_obj(JV_LIST, o);
    }
    case F_JOIN:
        return do_join(r, at, v, a);
    case F_LIST: {
        bind(r, at, "list", a, (const char *const[]){NULL}, p);
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
        bind(r, at, "replace", a, (const char *const[]){"old", "new", "count", NULL}, p);
        if (!given(p[0]) || !given(p[1])) jfail(r, at, "replace() needs old and new");
        jv s = soft_str(r, at, v), o_ = soft_str(r, at, p[0]), n_ = soft_str(r, at, p[1]);
        jv o = str_replace(r, jv_str(s), jv_str(o_), jv_str(n_), arg_int(r, at, p[2], -1, "count"));
        jv_unref(r, s);
        jv_unref(r, o_);
        jv_unref(r, n_);
        return o;
    }
    case F_REVERSE: {
        bind(r, at, "reverse", a, (const char *const[]){NULL}, p);
        if (v.t == JV_STR) {
            jlist *l = jiter_list(r, at, v);
            jbuf b = {0};
            for (size_t i = l->n; i-- > 0;) jbuf_put(r, &b, jv_str(l->v[i])->s, jv_str(l->v[i])->len);
            jv_unref(r, jv_obj(JV_LIST, l));
            return jbuf_take(r, &b);
        }
        jlist *l = jiter_list(r, at, v);
        jlist *o = new_list(r, v.t == JV_UNDEF ? JL_LIST : JL_GEN);
        for (size_t i = l->n; i-- > 0;) jlist_push(r, o, jv_ref(l->v[i]));
        jv_unref(r, jv_obj(JV_LIST, l));
        return jv_obj(JV_LIST, o);
    }
    case F_ROUND:
        bind(r, at, "round", a, (const char *const[]){"precision", "method", NULL}, p);
        return round_value(r, at, v, arg_int(r, at, p[0], 0, "precision"),
                           given(p[1]) ? arg_str(r, at, p[1], "method") : NULL);
    case F_SAFE:
        bind(r, at, "safe", a, (const char *const[]){NULL}, p);
        return with_flags(soft_str(r, at, v), JVF_SAFE);
    case F_SORT:
        return do_sort(r, at, v, a);
    case F_STRING:
        bind(r, at, "string", a, (const char *const[]){NULL}, p);
        return soft_str(r, at, v);
    case F_SUM: {
        bind(r, at, "sum", a, (const char *const[]){"attribute", "start", NULL}, p);
        jlist *l = jiter_list(r, at, v);
        jv acc = given(p[1]) ? jv_ref(p[1]) : jv_int(0);
        for (size_t i = 0; i < l->n; i++) {
            jv x = given(p[0]) && p[0].t != JV_NONE ? get_path(r, at, l->v[i], p[0]) : jv_ref(l->v[i]);
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
        bind(r, at, "trim", a, (const char *const[]){"chars", NULL}, p);
        jv s = soft_str(r, at, v);
        if (v.t == JV_STR) s.flags = v.flags;
        jstr *chars = given(p[0]) && p[0].t != JV_NONE ? arg_str(r, at, p[0], "chars") : NULL;
        jv o = str_strip(r, s, chars, 3);
        jv_unref(r, s);
        return o;
    }
    case F_TRUNCATE:
        return do_truncate(r, at, v, a);
    case F_UNIQUE:
        return do_unique(r, at, v, a);
    case F_WORDCOUNT: {
        bind(r, at, "wordcount", a, (const char *const[]){NULL}, p);
        jv s = soft_str(r, at, v);
        int64_t k = 0;
        int in = 0;
        for (size_t i = 0; i < jv_str(s)->len;) {
            int w = is_word(next_cp(jv_str(s)->s, jv_str(s)->len, &i));
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

int jtest_id(const char *name, size_t n) { return name_in(test_names, T_COUNT_, name, n); }

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
        bind(r, at, "divisibleby", a, (const char *const[]){"num", NULL}, p);
        if (!given(p[0])) jfail(r, at, "divisibleby needs a number");
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
        bind(r, at, test_names[id], a, (const char *const[]){"other", NULL}, p);
        if (!given(p[0])) jfail(r, at, "the test '%s' needs an argument", test_names[id]);
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
        jv s = soft_str(r, at, v);
        int x = str_all(jv_str(s), id == T_LOWER ? 'l' : 'u');
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
        bind(r, at, name, a, (const char *const[]){"prefix", "start", "end", NULL}, p);
        if (!given(p[0])) jfail(r, at, "%s() takes at least 1 argument (0 given)", name);
        int64_t n = (int64_t)jcp_count(s->s, s->len);
        int64_t st = arg_int(r, at, p[1], 0, "start"), en = arg_int(r, at, p[2], n, "end");
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
        bind(r, at, name, a, (const char *const[]){"chars", NULL}, p);
        return str_strip(r, self, given(p[0]) && p[0].t != JV_NONE ? arg_str(r, at, p[0], "chars") : NULL,
                         op == M_STRIP ? 3 : op == M_LSTRIP ? 1 : 2);
    case M_SPLIT: case M_RSPLIT:
        bind(r, at, name, a, (const char *const[]){"sep", "maxsplit", NULL}, p);
        return str_split(r, at, s, given(p[0]) && p[0].t != JV_NONE ? arg_str(r, at, p[0], "sep") : NULL,
                         arg_int(r, at, p[1], -1, "maxsplit"), op == M_RSPLIT);
    case M_REPLACE:
        bind(r, at, name, a, (const char *const[]){"old", "new", "count", NULL}, p);
        if (!given(p[0]) || !given(p[1])) jfail(r, at, "replace expected at least 2 arguments");
        return str_replace(r, s, arg_str(r, at, p[0], "old"), arg_str(r, at, p[1], "new"), arg_int(r, at, p[2], -1, "count"));
    case M_UPPER: case M_LOWER: case M_TITLE: case M_CAPITALIZE: case M_SWAPCASE: case M_CASEFOLD:
        bind(r, at, name, a, (const char *const[]){NULL}, p);
        return case_map(r, s->s, s->len, op == M_UPPER ? CASE_UPPER : op == M_TITLE ? CASE_TITLE
                        : op == M_CAPITALIZE ? CASE_CAPITALIZE : op == M_SWAPCASE ? CASE_SWAP : CASE_LOWER);
    case M_FIND: case M_RFIND: case M_INDEX: case M_RINDEX: {
        bind(r, at, name, a, (const char *const[]){"sub", "start", "end", NULL}, p);
        if (!given(p[0])) jfail(r, at, "%s() takes at least 1 argument (0 given)", name);
        int64_t k = str_find(r, s, arg_str(r, at, p[0], "sub"), arg_int(r, at, p[1], 0, "start"),
                             arg_int(r, at, p[2], INT64_MAX / 2, "end"), op == M_RFIND || op == M_RINDEX);
        if (k < 0 && (op == M_INDEX || op == M_RINDEX)) jfail(r, at, "substring not found");
        return jv_int(k);
    }
    case M_COUNT:
        bind(r, at, name, a, (const char *const[]){"sub", NULL}, p);
        if (!given(p[0])) jfail(r, at, "count() takes at least 1 argument (0 given)");
        return jv_int(str_count(r, s, arg_str(r, at, p[0], "sub")));
    case M_JOIN: {
        bind(r, at, name, a, (const char *const[]){"iterable", NULL}, p);
        if (!given(p[0])) jfail(r, at, "join() takes exactly one argument (0 given)");
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
        bind(r, at, name, a, (const char *const[]){"keepends", NULL}, p);
        return str_splitlines(r, s, arg_bool(p[0], 0));
    case M_ISDIGIT: case M_ISALPHA: case M_ISALNUM: case M_ISSPACE: case M_ISUPPER: case M_ISLOWER:
    case M_ISNUMERIC: case M_ISDECIMAL: {
        bind(r, at, name, a, (const char *const[]){NULL}, p);
        char k = op == M_ISALPHA ? 'a' : op == M_ISALNUM ? 'n' : op == M_ISSPACE ? 's' : op == M_ISUPPER ? 'u'
               : op == M_ISLOWER ? 'l' : 'd';
        return jv_bool(str_all(s, k));
    }
    case M_REMOVEPREFIX: case M_REMOVESUFFIX: {
        bind(r, at, name, a, (const char *const[]){"affix", NULL}, p);
        if (!given(p[0])) jfail(r, at, "%s() takes exactly one argument (0 given)", name);
        jstr *x = arg_str(r, at, p[0], "affix");
        if (x->len <= s->len && op == M_REMOVEPREFIX && !memcmp(s->s, x->s, x->len)) return jv_strn(r, s->s + x->len, s->len - x->len);
        if (x->len <= s->len && op == M_REMOVESUFFIX && !memcmp(s->s + s->len - x->len, x->s, x->len)) return jv_strn(r, s->s, s->len - x->len);
        return jv_ref(self);
    }
    case M_FORMAT:
        return str_format(r, at, s, a);
    case M_ZFILL: {
        bind(r, at, name, a, (const char *const[]){"width", NULL}, p);
        int64_t w = arg_int(r, at, p[0], 0, "width"), n = (int64_t)jcp_count(s->s, s->len);
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
        bind(r, at, name, a, (const char *const[]){"width", "fillchar", NULL}, p);
        jstr *fill = given(p[1]) ? arg_str(r, at, p[1], "fillchar") : NULL;
        if (fill && jcp_count(fill->s, fill->len) != 1) jfail(r, at, "The fill character must be exactly one character long");
        return str_pad(r, s, arg_int(r, at, p[0], 0, "width"), fill, op == M_LJUST ? 'l' : op == M_RJUST ? 'r' : 'c');
    }
    case M_PARTITION: case M_RPARTITION: {
        bind(r, at, name, a, (const char *const[]){"sep", NULL}, p);
        if (!given(p[0])) jfail(r, at, "%s() takes exactly one argument (0 given)", name);
        jstr *sep = arg_str(r, at, p[0], "sep");
        if (!sep->len) jfail(r, at, "empty separator");
        int64_t k = str_find(r, s, sep, 0, INT64_MAX / 2, op == M_RPARTITION);
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
        bind(r, at, name, a, (const char *const[]){"object", NULL}, p);
        if (!given(p[0])) jfail(r, at, "list.append() takes exactly one argument (0 given)");
        jlist_push(r, l, jv_ref(p[0]));
        return jv_none();
    case M_EXTEND: {
        bind(r, at, name, a, (const char *const[]){"iterable", NULL}, p);
        if (!given(p[0])) jfail(r, at, "list.extend() takes exactly one argument (0 given)");
        jlist *x = jiter_list(r, at, p[0]);
        size_t n = x->n;
        for (size_t i = 0; i < n; i++) jlist_push(r, l, jv_ref(x->v[i]));
        jv_unref(r, jv_obj(JV_LIST, x));
        return jv_none();
    }
    case M_POP: {
        bind(r, at, name, a, (const char *const[]){"index", NULL}, p);
        if (!l->n) jfail(r, at, "pop from empty list");
        int64_t i = arg_int(r, at, p[0], -1, "index");
        if (i < 0) i += (int64_t)l->n;
        if (i < 0 || i >= (int64_t)l->n) jfail(r, at, "pop index out of range");
        jv x = l->v[i];
        memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof(jv));
        l->n--;
        return x;
    }
    case M_INSERT: {
        bind(r, at, name, a, (const char *const[]){"index", "object", NULL}, p);
        if (!given(p[1])) jfail(r, at, "insert expected 2 arguments");
        int64_t i = arg_int(r, at, p[0], 0, "index"), n = (int64_t)l->n;
        if (i < 0) { i += n; if (i < 0) i = 0; }
        if (i > n) i = n;
        jlist_push(r, l, jv_none());
        memmove(l->v + i + 1, l->v + i, (l->n - (size_t)i - 1) * sizeof(jv));
        l->v[i] = jv_ref(p[1]);
        return jv_none();
    }
    case M_LINDEX: case M_REMOVE: {
        bind(r, at, name, a, (const char *const[]){"value", NULL}, p);
        if (!given(p[0])) jfail(r, at, "%s() takes at least 1 argument", name);
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
        bind(r, at, name, a, (const char *const[]){"value", NULL}, p);
        if (!given(p[0])) jfail(r, at, "count() takes exactly one argument (0 given)");
        int64_t k = 0;
        for (size_t i = 0; i < l->n; i++) k += jv_eq(r, at, l->v[i], p[0]);
        return jv_int(k);
    }
    case M_COPY: {
        bind(r, at, name, a, (const char *const[]){NULL}, p);
        jlist *o = jlist_new(r, JL_LIST, l->n);
        for (size_t i = 0; i < l->n; i++) jlist_push(r, o, jv_ref(l->v[i]));
        return jv_obj(JV_LIST, o);
    }
    case M_REVERSE:
        bind(r, at, name, a, (const char *const[]){NULL}, p);
        for (size_t i = 0; i < l->n / 2; i++) {
            jv t = l->v[i];
            l->v[i] = l->v[l->n - 1 - i];
            l->v[l->n - 1 - i] = t;
        }
        return jv_none();
    case M_CLEAR: {
        bind(r, at, name, a, (const char *const[]){NULL}, p);
        size_t n = l->n;
        l->n = 0;
        for (size_t i = 0; i < n; i++) jv_unref(r, l->v[i]);
        return jv_none();
    }
    case M_SORT: {
        bind(r, at, name, a, (const char *const[]){"reverse", NULL}, p);
        size_t n = l->n;
        jv *keys = jmalloc(r, (n + 1) * sizeof *keys);
        for (size_t i = 0; i < n; i++) keys[i] = jv_ref(l->v[i]);
        jv sorted = sorted_list(r, at, keys, l->v, n, arg_bool(p[0], 0), JL_LIST);
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
        if (kind == JL_ITEMS) jlist_push(r, o, tuple2(r, jv_ref(d->k[i]), jv_ref(d->v[i])));
        else jlist_push(r, o, jv_ref(kind == JL_KEYS ? d->k[i] : d->v[i]));
    }
    return jv_obj(JV_LIST, o);
}

static jv dict_method(jrender *r, const jnode *at, int op, const char *name, jv self, const jargs *a) {
    jdict *d = jv_dict(self);
    jv p[2];
    switch (op) {
    case M_GET: case M_SETDEFAULT: {
        bind(r, at, name, a, (const char *const[]){"key", "default", NULL}, p);
        if (!given(p[0])) jfail(r, at, "%s expected at least 1 argument, got 0", name);
        jv *x = jdict_get(r, d, p[0]);
        if (x) return jv_ref(*x);
        jv def = given(p[1]) ? p[1] : jv_none();
        if (op == M_SETDEFAULT) jdict_set(r, at, d, jv_ref(p[0]), jv_ref(def));
        return jv_ref(def);
    }
    case M_ITEMS: case M_KEYS: case M_VALUES:
        bind(r, at, name, a, (const char *const[]){NULL}, p);
        return dict_view(r, d, op == M_ITEMS ? JL_ITEMS : op == M_KEYS ? JL_KEYS : JL_VALUES);
    case M_DCOPY: {
        bind(r, at, name, a, (const char *const[]){NULL}, p);
        jdict *o = jdict_new(r, JV_DICT);
        for (size_t i = 0; i < d->n; i++) jdict_set(r, at, o, jv_ref(d->k[i]), jv_ref(d->v[i]));
        return jv_obj(JV_DICT, o);
    }
    case M_DPOP: {
        bind(r, at, name, a, (const char *const[]){"key", "default", NULL}, p);
        if (!given(p[0])) jfail(r, at, "pop expected at least 1 argument, got 0");
        jv *x = jdict_get(r, d, p[0]);
        if (!x) {
            if (given(p[1])) return jv_ref(p[1]);
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
        bind(r, at, name, a, (const char *const[]){NULL}, p);
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

int jglobal_id(const char *name, size_t n) { return name_in(global_names, G_COUNT_, name, n); }
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
