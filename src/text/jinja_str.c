/* text/jinja_str.c - the string work of the Jinja engine's library
 * (text/jinja_lib.c, text/jinja_method.c): code points and case mapping,
 * small helpers, stable sorting, Python's str % args and str.format, and
 * the string operations filters and methods share.
 *
 * Case mapping (upper, lower, title, capitalize) uses Unicode's simple
 * mappings (text/unicode_data.c) plus ß -> SS and İ -> i̇; Python's full
 * mappings differ on a few dozen rare characters (ligatures, some Greek). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/jinja_internal.h"
#include "text/unicode.h"

/* ---- code points and case -------------------------------------------------------------- */

uint32_t jnext_cp(const char *s, size_t n, size_t *i) {
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

/* Is Σ at s[i..] final (after a cased letter, before none)? Python's
 * lower() writes ς there. */
static int final_sigma(const char *s, size_t n, size_t i, int prev_cased) {
    if (!prev_cased) return 0;
    size_t j = i;
    jnext_cp(s, n, &j);
    return j >= n || !cp_cased(jnext_cp(s, n, &j));
}

static void put_lower_at(jrender *r, jbuf *b, uint32_t cp, const char *s, size_t n, size_t at, int prev_cased) {
    if (cp == 0x3A3 && final_sigma(s, n, at, prev_cased)) put_cp(r, b, 0x3C2);
    else put_lower(r, b, cp);
}

jv jcase_map(jrender *r, const char *s, size_t n, int mode) {
    jbuf b = {0};
    int prev_cased = 0, first = 1, prev_sep = 0;
    for (size_t i = 0; i < n;) {
        size_t at = i;
        uint32_t cp = jnext_cp(s, n, &i);
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

jv jsoft_str(jrender *r, const jnode *at, jv v) { return jv_to_str(r, at, v); }

jv jwith_flags(jv v, int flags) {
    v.flags = (uint8_t)flags;
    return v;
}

jlist *jnew_list(jrender *r, int kind) { return jlist_new(r, kind, 0); }

jv jtuple2(jrender *r, jv a, jv b) {
    jlist *t = jlist_new(r, JL_TUPLE, 2);
    jlist_push(r, t, a);
    jlist_push(r, t, b);
    return jv_obj(JV_LIST, t);
}

int64_t jpy_len(jrender *r, const jnode *at, jv v) {
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
jv jget_path_default(jrender *r, const jnode *at, jv item, jv attr, jv def) {
    if (attr.t == JV_INT) {
        jv x = jget_item(r, at, item, attr);
        return x.t == JV_UNDEF && jv_given(def) ? jv_ref(def) : x;
    }
    jstr *a = jarg_str(r, at, attr, "attribute");
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
        cur = next.t == JV_UNDEF && jv_given(def) ? jv_ref(def) : next;
        if (j >= a->len) return cur;
        i = j + 1;
    }
}

jv jget_path(jrender *r, const jnode *at, jv item, jv attr) { return jget_path_default(r, at, item, attr, jv_missing()); }

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
jv jsort_key(jrender *r, const jnode *at, jv item, jv attr, int case_sensitive) {
    jv k = jv_given(attr) && attr.t != JV_NONE ? jget_path(r, at, item, attr) : jv_ref(item);
    if (!case_sensitive && k.t == JV_STR) {
        jv l = jcase_map(r, jv_str(k)->s, jv_str(k)->len, CASE_LOWER);
        jv_unref(r, k);
        return l;
    }
    return k;
}

/* items sorted by key (keys[i] for items[i], both references taken): a new list */
jv jsorted_list(jrender *r, const jnode *at, jv *keys, jv *items, size_t n, int reverse, int kind) {
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
        jv arg = jv_missing();
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
        if (!jv_given(arg)) {
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
jv jstr_format(jrender *r, const jnode *at, jstr *f, const jargs *a) {
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
        jv arg = jv_missing();
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
            if (!jv_given(arg)) jfail(r, at, "str.format: KeyError '%.*s'", (int)nl, nm);
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
        if (jnext_cp(chars->s, chars->len, &i) == cp) return 1;
    return 0;
}

/* strip: which = 1 left, 2 right, 3 both; chars NULL: white space */
jv jstr_strip(jrender *r, jv v, const jstr *chars, int which) {
    jstr *s = jv_str(v);
    size_t a = 0, b = s->len;
    if (which & 1)
        while (a < b) {
            size_t i = a;
            if (!in_chars(jnext_cp(s->s, b, &i), chars)) break;
            a = i;
        }
    if (which & 2) {
        size_t last = a;                      /* end of the last character not stripped */
        for (size_t i = a; i < b;) {
            uint32_t cp = jnext_cp(s->s, b, &i);
            if (!in_chars(cp, chars)) last = i;
        }
        b = last;
    }
    if (a == 0 && b == s->len) return jv_ref(v);
    return jwith_flags(jv_strn(r, s->s + a, b - a), v.flags);
}

jv jstr_replace(jrender *r, jstr *s, jstr *old, jstr *new_, int64_t count) {
    jbuf b = {0};
    if (!old->len) {
        size_t i = 0;
        int64_t k = 0;
        if (count != 0) { jbuf_put(r, &b, new_->s, new_->len); k++; }
        while (i < s->len) {
            size_t j = i;
            jnext_cp(s->s, s->len, &j);
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
jv jstr_split(jrender *r, const jnode *at, jstr *s, const jstr *sep, int64_t maxsplit, int from_right) {
    jlist *l = jnew_list(r, JL_LIST);
    jv lv = jv_obj(JV_LIST, l);
    if (sep && !sep->len) jfail(r, at, "empty separator");
    if (!from_right) {
        size_t i = 0;
        int64_t k = 0;
        if (!sep) {
            for (;;) {
                while (i < s->len) {                      /* skip white space */
                    size_t j = i;
                    if (!jspace(jnext_cp(s->s, s->len, &j))) break;
                    i = j;
                }
                if (i >= s->len) break;
                if (maxsplit >= 0 && k >= maxsplit) { jlist_push(r, l, jv_strn(r, s->s + i, s->len - i)); break; }
                size_t e = i;
                while (e < s->len) {
                    size_t j = e;
                    if (jspace(jnext_cp(s->s, s->len, &j))) break;
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
                if (!jspace(jnext_cp(s->s, s->len, &j))) break;
                c--;
            }
            if (c == 0) break;
            end = off[c];
            if (maxsplit >= 0 && k >= maxsplit) { jlist_push(r, l, jv_strn(r, s->s, end)); break; }
            size_t b = c;
            while (b > 0) {
                size_t j = off[b - 1];
                if (jspace(jnext_cp(s->s, s->len, &j))) break;
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
int64_t jstr_find(jrender *r, jstr *s, jstr *sub, int64_t start, int64_t end, int from_right) {
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

int64_t jstr_count(jrender *r, jstr *s, jstr *sub) {
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

jv jstr_splitlines(jrender *r, jstr *s, int keepends) {
    jlist *l = jnew_list(r, JL_LIST);
    size_t i = 0, start = 0;
    while (i < s->len) {
        size_t j = i;
        uint32_t cp = jnext_cp(s->s, s->len, &j);
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

int jstr_all(jstr *s, int kind) {
    if (!s->len) return 0;
    int cased = 0;
    for (size_t i = 0; i < s->len;) {
        uint32_t cp = jnext_cp(s->s, s->len, &i);
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

jv jstr_pad(jrender *r, jstr *s, int64_t width, jstr *fill, int how) {
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
