/* text/json_schema_types.c - the rules of each type of schema for the
 * JSON schema converter (text/json_schema.c, whose comment describes the
 * output): strings (formats, lengths), objects (properties in the
 * schema's order, other keys kept apart from the declared ones), arrays
 * (prefixItems, item counts), integers (bounds as rules over the digits)
 * and numbers. The converter's state and helpers are in
 * text/json_schema_int.h.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/common.h"
#include "text/json_schema_int.h"
#include "text/strbuf.h"

#define MAX_ITEMS 1000       /* minItems, maxItems, minLength, maxLength */
#define MAX_KEY 256          /* declared names other keys are kept apart from (a rule per character) */

static int get_count(jsg *J, json_t *s, const char *key, const char *path, long long def, long long *out) {
    json_t *v = json_object_get(s, key);
    *out = def;
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return fail(J, PK_ERR_ARG, "'%s' at %s must be a non-negative integer", key, at(path));
    if (json_integer_value(v) > MAX_ITEMS)
        return fail(J, PK_ERR_ARG, "'%s' at %s is %lld, more than %d is not supported", key, at(path),
                     (long long)json_integer_value(v), MAX_ITEMS);
    *out = json_integer_value(v);
    return 0;
}

/* "{m,n}" (n < 0: open) for GBNF. */
static void sb_repeat(sbuf *b, long long m, long long n) {
    if (n < 0) sb_printf(b, "{%lld,}", m);
    else sb_printf(b, "{%lld,%lld}", m, n);
}

static int do_string(jsg *J, json_t *s, const char *path, sbuf *body) {
    const char *q = J->g4 ? "\"" G4_QUOTE "\"" : "\"\\\"\"";   /* the quote, as a GBNF literal */
    json_t *fmt = json_object_get(s, "format");
    if (fmt) {
        const char *f = json_string_value(fmt);
        if (!f) return fail(J, PK_ERR_ARG, "'format' at %s must be a string", at(path));
        int prim = !strcmp(f, "date") ? P_DATE : !strcmp(f, "time") ? P_TIME : !strcmp(f, "date-time") ? P_DATETIME
                 : !strcmp(f, "uuid") ? P_UUID : -1;
        if (prim >= 0) {
            if (json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
                return fail(J, PK_ERR_ARG, "'format' with 'minLength'/'maxLength' at %s is not supported", at(path));
            sb_printf(body, "%s %s %s %s", q, use(J, prim), q, use(J, P_SPACE));
            return 0;
        }
        if (!J->lenient) return fail(J, PK_ERR_ARG, "'format' \"%s\" at %s is not supported (date, time, "
                                     "date-time, uuid are)", f, at(path));
    }
    long long mn, mx;
    if (get_count(J, s, "minLength", path, 0, &mn) || get_count(J, s, "maxLength", path, -1, &mx)) return -1;
    if (mx >= 0 && mx < mn) return fail(J, PK_ERR_ARG, "'maxLength' below 'minLength' at %s", at(path));
    if (mn == 0 && mx < 0) { sb_str(body, use(J, P_STRING)); return 0; }
    sb_printf(body, "%s %s", q, use(J, J->g4 ? P_BCHAR : P_CHAR));   /* Gemma-4's: no '<', so no marker */
    sb_repeat(body, mn, mx);
    sb_printf(body, " %s %s", q, use(J, P_SPACE));
    return 0;
}

/* A key not equal to any of the n names (plain characters, no escapes),
 * as a rule per node of the names' trie (in code points): leave the node by
 * a character that no name has next, or end where no name ends, or follow
 * a name's next character into the child's rule. */
static const char *const KEYCHAR = "[^\"\\\\\\x00-\\x1F\\x7F";
static const char *const KEYCHAR_G4 = "[^:,{}\\[\\]<\"'=\\\\\\x00-\\x20\\x7F";   /* P_KEY's, bare */

static int utf8_next(const char *s, size_t *i, uint32_t *cp) {
    const unsigned char *p = (const unsigned char *)s + *i;
    int n = p[0] < 0x80 ? 1 : (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : 4;
    uint32_t c = n == 1 ? p[0] : p[0] & (0x3F >> (n - 1));
    for (int k = 1; k < n; k++) {
        if ((p[k] & 0xC0) != 0x80) return -1;
        c = c << 6 | (p[k] & 63);
    }
    *i += (size_t)n;
    *cp = c;
    return 0;
}

static char *other_key(jsg *J, const char *const *names, size_t n, size_t depth, const char *hint) {
    uint32_t *next = malloc((n + 1) * sizeof *next);
    char *name = pk_jsg_new_name(J, hint);
    if (!next || !name) {
        free(next); free(name);
        fail(J, PK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    int ends_here = 0;
    size_t nn = 0;
    for (size_t i = 0; i < n; i++) {
        size_t pos = 0;
        uint32_t cp = 0;
        int bad = 0;
        for (size_t d = 0; d <= depth && !bad; d++) {
            if (!names[i][pos]) { bad = 1; break; }
            if (utf8_next(names[i], &pos, &cp)) bad = 1;
        }
        if (bad) {
            /* the name ends at depth (or is not UTF-8: then it never matches) */
            size_t q = 0, d = 0;
            uint32_t c2;
            while (names[i][q] && !utf8_next(names[i], &q, &c2)) d++;
            if (d == depth && !names[i][q]) ends_here = 1;
            continue;
        }
        size_t k = 0;
        while (k < nn && next[k] != cp) k++;
        if (k == nn) next[nn++] = cp;
    }
    sbuf b = {0};
    const char *kc = J->g4 ? KEYCHAR_G4 : KEYCHAR;
    if (!ends_here) sb_str(&b, "\"\" | ");
    sb_str(&b, kc);
    for (size_t k = 0; k < nn; k++) sb_printf(&b, "\\U%08X", next[k]);
    sb_str(&b, "] ");
    sb_str(&b, kc);
    sb_str(&b, "]*");
    for (size_t k = 0; k < nn && !J->failed; k++) {
        const char **sub = malloc(n * sizeof *sub);
        if (!sub) { fail(J, PK_ERR_NOMEM, "out of memory"); break; }
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            size_t pos = 0;
            uint32_t cp = 0;
            int ok = 1;
            for (size_t d = 0; d <= depth && ok; d++)
                ok = names[i][pos] && !utf8_next(names[i], &pos, &cp);
            if (ok && cp == next[k]) sub[m++] = names[i];
        }
        char *child = other_key(J, sub, m, depth + 1, hint);
        free(sub);
        if (!child) break;
        sb_printf(&b, " | \"\\U%08X\" %s", next[k], child);
        free(child);
    }
    free(next);
    if (!J->failed && b.oom) fail(J, PK_ERR_NOMEM, "out of memory");
    if (J->failed) { free(b.p); free(name); return NULL; }
    emit_rule(J, name, b.p);
    free(b.p);
    return name;
}

/* keys[0..n) in dictsort's order (case-insensitive, then as they were). */
typedef struct key_at { const char *key; size_t at; } key_at;

static int cmp_key_ci(const void *a, const void *b) {
    const key_at *x = a, *y = b;
    int c = strcasecmp(x->key, y->key);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

static void g4_sort_keys(const char **keys, size_t n) {
    key_at *v = malloc(n * sizeof *v + 1);
    if (!v) return;   /* the schema's order then: parsed back alike */
    for (size_t i = 0; i < n; i++) v[i] = (key_at){keys[i], i};
    qsort(v, n, sizeof *v, cmp_key_ci);
    for (size_t i = 0; i < n; i++) keys[i] = v[i].key;
    free(v);
}

int pk_jsg_do_object(jsg *J, json_t *s, const char *path, const char *name, sbuf *body) {
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props)) return fail(J, PK_ERR_ARG, "'properties' at %s must be an object", at(path));
    if (req && !json_is_array(req)) return fail(J, PK_ERR_ARG, "'required' at %s must be an array", at(path));
    if (add && !json_is_boolean(add) && !json_is_object(add))
        return fail(J, PK_ERR_ARG, "'additionalProperties' at %s must be a boolean or a schema", at(path));
    if (!props && (!add || json_is_true(add)) && (!req || !json_array_size(req))) {
        sb_str(body, use(J, P_OBJECT));
        return 0;
    }
    size_t n = props ? json_object_size(props) : 0;
    for (size_t i = 0; req && i < json_array_size(req); i++) {
        const char *k = json_string_value(json_array_get(req, i));
        if (!k) return fail(J, PK_ERR_ARG, "'required' at %s must list strings", at(path));
        if (!props || !json_object_get(props, k))
            return fail(J, PK_ERR_ARG, "required property '%s' at %s is not in 'properties'", k, at(path));
    }
    /* the additional properties' value rule, if any */
    char *add_kv = NULL;
    int rc = 0;
    const char **keys = calloc(n + 1, sizeof *keys);
    char **kv = calloc(n + 1, sizeof *kv);
    int *required = calloc(n + 1, sizeof *required);
    if (!keys || !kv || !required) { rc = fail(J, PK_ERR_NOMEM, "out of memory"); goto done; }
    size_t i = 0;
    const char *key;
    json_t *sub;
    char *pp = pk_jsg_path_join(path, "properties");
    if (!pp) { rc = fail(J, PK_ERR_NOMEM, "out of memory"); goto done; }
    json_object_foreach(props, key, sub) keys[i++] = key;
    if (J->g4) g4_sort_keys(keys, n);   /* the template's order */
    for (i = 0; i < n; i++) {
        key = keys[i];
        sub = json_object_get(props, key);
        for (size_t r = 0; req && r < json_array_size(req); r++)
            if (!strcmp(key, json_string_value(json_array_get(req, r)))) required[i] = 1;
        char hint[80];
        snprintf(hint, sizeof hint, "%s-%s", name, key);
        char *vr = pk_jsg_visit_child(J, sub, pp, key, hint);
        if (!vr) { rc = -1; break; }
        sbuf b = {0};
        size_t kl = strlen(key);
        /* the key as JSON text: a string with the escapes JSON needs;
           Gemma-4's bare, or between <|"|> markers */
        json_t *ks = json_stringn(key, kl);
        char *kt = ks && !J->g4 ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        if (J->g4 && pk_jsg_g4_bare_key(key)) {
            kt = strdup(key);
        } else if (J->g4 && kl && !strchr(key, '<')) {
            if ((kt = malloc(kl + 11))) snprintf(kt, kl + 11, "<|\"|>%s<|\"|>", key);
        } else if (J->g4) {
            free(vr);
            rc = fail(J, PK_ERR_ARG, "property name '%.64s' at %s cannot be written in a Gemma-4 tool call", key, at(path));
            break;
        }
        if (!kt) { free(vr); rc = fail(J, PK_ERR_NOMEM, "out of memory"); break; }
        pk_jsg_sb_literal(&b, kt, strlen(kt));
        free(kt);
        sb_printf(&b, " %s \":\" %s %s", use(J, P_SPACE), use(J, P_SPACE), vr);
        free(vr);
        char *kn = pk_jsg_new_name(J, hint);
        char hk[96];
        if (kn) { snprintf(hk, sizeof hk, "%s-kv", kn); free(kn); kn = pk_jsg_new_name(J, hk); }
        if (!kn || b.oom) { free(b.p); free(kn); rc = fail(J, PK_ERR_NOMEM, "out of memory"); break; }
        emit_rule(J, kn, b.p);
        free(b.p);
        kv[i] = kn;
    }
    free(pp);
    if (rc) goto done;
    if (add && (json_is_object(add) || json_is_true(add))) {
        for (size_t k = 0; k < n; k++)
            if (strlen(keys[k]) > MAX_KEY) {
                rc = fail(J, PK_ERR_ARG, "a property name longer than %d bytes beside additionalProperties at %s "
                          "is not supported", MAX_KEY, at(path));
                goto done;
            }
        char hint[80];
        snprintf(hint, sizeof hint, "%s-additional", name);
        char *vr = json_is_true(add) ? strdup(use(J, P_VALUE)) : pk_jsg_visit_child(J, add, path, "additionalProperties", hint);
        if (!vr) { rc = J->failed ? -1 : fail(J, PK_ERR_NOMEM, "out of memory"); goto done; }
        sbuf b = {0};
        if (!J->g4) sb_str(&b, "\"\\\"\" ");
        char kh[96];
        snprintf(kh, sizeof kh, "%s-key", hint);
        char *ok = n ? other_key(J, keys, n, 0, kh) : NULL;
        if (n && !ok) { free(vr); free(b.p); rc = -1; goto done; }
        if (ok) sb_str(&b, ok);
        else { sb_str(&b, J->g4 ? KEYCHAR_G4 : KEYCHAR); sb_str(&b, "]*"); }
        free(ok);
        sb_printf(&b, "%s %s \":\" %s %s", J->g4 ? "" : " \"\\\"\"", use(J, P_SPACE), use(J, P_SPACE), vr);
        free(vr);
        add_kv = pk_jsg_new_name(J, hint);
        if (!add_kv || b.oom) { free(b.p); rc = fail(J, PK_ERR_NOMEM, "out of memory"); goto done; }
        emit_rule(J, add_kv, b.p);
        free(b.p);
    }
    /* first_i: properties i.. with nothing before; after_i: with a comma before */
    char *first_next = NULL, *after_next = NULL;
    if (add_kv) {
        char hint[80];
        snprintf(hint, sizeof hint, "%s-rest", name);
        first_next = pk_jsg_new_name(J, hint);
        after_next = pk_jsg_new_name(J, hint);
        if (!first_next || !after_next) { free(first_next); free(after_next); rc = fail(J, PK_ERR_NOMEM, "out of memory"); goto done; }
        sbuf b = {0};
        sb_printf(&b, "(%s (\",\" %s %s)*)?", add_kv, use(J, P_SPACE), add_kv);
        emit_rule(J, first_next, b.p ? b.p : "");
        b.n = 0;
        sb_printf(&b, "(\",\" %s %s)*", use(J, P_SPACE), add_kv);
        emit_rule(J, after_next, b.p ? b.p : "");
        free(b.p);
    }
    for (size_t k = n; k-- > 0;) {
        char hint[80];
        snprintf(hint, sizeof hint, "%s-from-%zu", name, k);
        char *fr = pk_jsg_new_name(J, hint), *ar = pk_jsg_new_name(J, hint);
        sbuf b = {0};
        if (!fr || !ar) { free(fr); free(ar); free(first_next); free(after_next); rc = fail(J, PK_ERR_NOMEM, "out of memory"); goto done; }
        /* an empty alternative is written "" (a trailing '|' would continue
           the rule on the next line) */
        const char *an = after_next ? after_next : "\"\"";
        const char *fnx = first_next ? first_next : "\"\"";
        if (required[k]) sb_printf(&b, "%s %s", kv[k], an);
        else sb_printf(&b, "%s %s | %s", kv[k], an, fnx);
        emit_rule(J, fr, b.p);
        b.n = 0;
        if (required[k]) sb_printf(&b, "\",\" %s %s %s", use(J, P_SPACE), kv[k], an);
        else sb_printf(&b, "(\",\" %s %s)? %s", use(J, P_SPACE), kv[k], an);
        emit_rule(J, ar, b.p);
        free(b.p);
        free(first_next);
        free(after_next);
        first_next = fr;
        after_next = ar;
    }
    sb_printf(body, "\"{\" %s %s \"}\" %s", use(J, P_SPACE), first_next ? first_next : "\"\"", use(J, P_SPACE));
    free(first_next);
    free(after_next);
done:
    for (size_t k = 0; kv && k < n; k++) free(kv[k]);
    free(kv);
    free(keys);
    free(required);
    free(add_kv);
    return rc;
}

int pk_jsg_do_array(jsg *J, json_t *s, const char *path, const char *name, sbuf *body) {
    json_t *items = json_object_get(s, "items"), *prefix = json_object_get(s, "prefixItems");
    long long mn, mx;
    if (get_count(J, s, "minItems", path, 0, &mn) || get_count(J, s, "maxItems", path, -1, &mx)) return -1;
    if (mx >= 0 && mx < mn) return fail(J, PK_ERR_ARG, "'maxItems' below 'minItems' at %s", at(path));
    if (prefix && !json_is_array(prefix)) return fail(J, PK_ERR_ARG, "'prefixItems' at %s must be an array", at(path));
    size_t np = prefix ? json_array_size(prefix) : 0;
    char *item = NULL;
    char hint[80];
    snprintf(hint, sizeof hint, "%s-item", name);
    if (items && json_is_false(items)) item = NULL;
    else if (items) { if (!(item = pk_jsg_visit_child(J, items, path, "items", hint))) return -1; }
    else if (!np) { item = strdup(use(J, P_VALUE)); if (!item) return fail(J, PK_ERR_NOMEM, "out of memory"); }
    /* with prefixItems: exactly those, then the items (if a schema) */
    sb_printf(body, "\"[\" %s ", use(J, P_SPACE));
    if (np) {
        if ((long long)np > (mx >= 0 ? mx : (long long)np) || (!item && (long long)np < mn)) {
            free(item);
            return fail(J, PK_ERR_ARG, "'prefixItems' at %s: %zu items do not fit minItems/maxItems", at(path), np);
        }
        char *pp = pk_jsg_path_join(path, "prefixItems");
        if (!pp) { free(item); return fail(J, PK_ERR_NOMEM, "out of memory"); }
        for (size_t i = 0; i < np; i++) {
            char key[24], h2[96];
            snprintf(key, sizeof key, "%zu", i);
            snprintf(h2, sizeof h2, "%s-%zu", name, i);
            char *r = pk_jsg_visit_child(J, json_array_get(prefix, i), pp, key, h2);
            if (!r) { free(pp); free(item); return -1; }
            if (i) sb_printf(body, "\",\" %s ", use(J, P_SPACE));
            sb_printf(body, "%s ", r);
            free(r);
        }
        free(pp);
        if (item) {
            long long rmin = mn > (long long)np ? mn - (long long)np : 0, rmax = mx < 0 ? -1 : mx - (long long)np;
            if (rmax != 0) {
                sb_printf(body, "(\",\" %s %s)", use(J, P_SPACE), item);
                sb_repeat(body, rmin, rmax);
                sb_str(body, " ");
            }
        }
    } else if (item && mx != 0) {
        if (mn == 0) {
            sb_printf(body, "(%s (\",\" %s %s)", item, use(J, P_SPACE), item);
            sb_repeat(body, 0, mx < 0 ? -1 : mx - 1);
            sb_str(body, ")? ");
        } else {
            sb_printf(body, "%s (\",\" %s %s)", item, use(J, P_SPACE), item);
            sb_repeat(body, mn - 1, mx < 0 ? -1 : mx - 1);
            sb_str(body, " ");
        }
    } else if (mn > 0) {
        free(item);
        return fail(J, PK_ERR_ARG, "'minItems' at %s: the array can hold no items", at(path));
    }
    sb_printf(body, "\"]\" %s", use(J, P_SPACE));
    free(item);
    return 0;
}

/* ---- integer ranges ------------------------------------------------------------ */

#define INT_DIGITS 16                    /* as integral-part: at most 16 digits */
#define INT_BIG 9999999999999999LL       /* the largest such number */

/* The numbers of exactly L digits from x to y (digit strings, x <= y). */
static void digits_range(sbuf *b, const char *x, const char *y, int L) {
    if (L == 1) { sb_printf(b, "[%c-%c]", x[0], y[0]); return; }
    if (x[0] == y[0]) {
        sb_printf(b, "\"%c\" ", x[0]);
        digits_range(b, x + 1, y + 1, L - 1);
        return;
    }
    int low_full = 1, high_full = 1;
    for (int i = 1; i < L; i++) { low_full &= x[i] == '0'; high_full &= y[i] == '9'; }
    char lo = x[0], hi = y[0];
    const char *nines = "9999999999999999", *zeros = "0000000000000000";
    int n = 0;
    sb_str(b, "(");
    if (!low_full) {
        sb_printf(b, "\"%c\" ", x[0]);
        digits_range(b, x + 1, nines, L - 1);
        lo++;
        n++;
    }
    char top = high_full ? hi : (char)(hi - 1);
    if (lo <= top) sb_printf(b, "%s[%c-%c] [0-9]{%d}", n++ ? " | " : "", lo, top, L - 1);
    if (!high_full) {
        sb_printf(b, "%s\"%c\" ", n++ ? " | " : "", y[0]);
        digits_range(b, zeros, y + 1, L - 1);
    }
    sb_str(b, ")");
}

/* The numbers from a to b (0 <= a <= b <= INT_BIG), no leading zeros: one
 * alternative per digit count. Returns the alternatives written. */
static int nonneg_range(sbuf *b, long long a, long long c, int n) {
    char xs[24], ys[24];
    int la = snprintf(xs, sizeof xs, "%lld", a), lc = snprintf(ys, sizeof ys, "%lld", c);
    for (int L = la; L <= lc; L++) {
        long long lo = L == la ? a : 1, hi = L == lc ? c : 9;
        if (L != la) for (int i = 1; i < L; i++) lo *= 10;
        if (L != lc) for (int i = 1; i < L; i++) hi = hi * 10 + 9;
        snprintf(xs, sizeof xs, "%lld", lo);
        snprintf(ys, sizeof ys, "%lld", hi);
        if (n++) sb_str(b, " | ");
        digits_range(b, xs, ys, L);
    }
    return n;
}

/* A bound of s (minimum / exclusiveMinimum or the maxima) for integers: the
 * closest integer inside; *set 0 when absent. */
static int int_bound(jsg *J, json_t *s, const char *path, int upper, long long *out, int *set) {
    const char *inc = upper ? "maximum" : "minimum", *exc = upper ? "exclusiveMaximum" : "exclusiveMinimum";
    *set = 0;
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(s, k ? exc : inc);
        if (!v) continue;
        if (!json_is_number(v))
            return fail(J, PK_ERR_ARG, "'%s' at %s must be a number", k ? exc : inc, at(path));
        double d = json_number_value(v);
        double r = upper ? floor(d) : ceil(d);
        if (k && r == d) r += upper ? -1 : 1;         /* exclusive */
        if (r > (double)INT_BIG) r = (double)INT_BIG + 1;
        if (r < -(double)INT_BIG) r = -(double)INT_BIG - 1;
        long long x = (long long)r;
        if (!*set || (upper ? x < *out : x > *out)) *out = x;
        *set = 1;
    }
    return 0;
}

/* An integer within the schema's bounds (at most 16 digits). */
static int do_integer(jsg *J, json_t *s, const char *path, sbuf *body) {
    long long lo = 0, hi = 0;
    int has_lo, has_hi;
    if (int_bound(J, s, path, 0, &lo, &has_lo) || int_bound(J, s, path, 1, &hi, &has_hi)) return -1;
    if (!has_lo && !has_hi) { sb_str(body, use(J, P_INTEGER)); return 0; }
    if (!has_lo || lo < -INT_BIG) lo = -INT_BIG;
    if (!has_hi || hi > INT_BIG) hi = INT_BIG;
    if (lo > hi) return fail(J, PK_ERR_ARG, "no integer lies between the minimum and the maximum at %s", at(path));
    sb_str(body, "(");
    int n = 0;
    if (hi >= 0) n = nonneg_range(body, lo > 0 ? lo : 0, hi, n);
    if (lo < 0) {
        long long mlo = hi < 0 ? -hi : 1, mhi = -lo;
        sb_printf(body, "%s\"-\" (", n++ ? " | " : "");
        nonneg_range(body, mlo, mhi, 0);
        sb_str(body, ")");
    }
    sb_printf(body, ") %s", use(J, P_SPACE));
    return 0;
}

/* A number: bounds are supported as "minimum": 0 (no minus sign) only. */
static int do_number(jsg *J, json_t *s, const char *path, sbuf *body) {
    json_t *mn = json_object_get(s, "minimum");
    int other = json_object_get(s, "maximum") || json_object_get(s, "exclusiveMinimum") ||
                json_object_get(s, "exclusiveMaximum");
    if (mn && !other && json_is_number(mn) && json_number_value(mn) == 0) {
        sb_printf(body, "%s (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,16})? %s", use(J, P_INTEGRAL), use(J, P_SPACE));
        return 0;
    }
    if ((mn || other) && !J->lenient)
        return fail(J, PK_ERR_ARG, "bounds on a number at %s are not supported (integers take any; numbers "
                    "\"minimum\": 0)", at(path));
    sb_str(body, use(J, P_NUMBER));
    return 0;
}

/* The body for schema s with type t. */
int pk_jsg_do_type(jsg *J, json_t *s, const char *t, const char *path, const char *name, sbuf *body) {
    if (!strcmp(t, "string")) return do_string(J, s, path, body);
    if (!strcmp(t, "number")) return do_number(J, s, path, body);
    if (!strcmp(t, "integer")) return do_integer(J, s, path, body);
    if (!strcmp(t, "boolean")) { sb_str(body, use(J, P_BOOLEAN)); return 0; }
    if (!strcmp(t, "null")) { sb_str(body, use(J, P_NULL)); return 0; }
    if (!strcmp(t, "object")) return pk_jsg_do_object(J, s, path, name, body);
    if (!strcmp(t, "array")) return pk_jsg_do_array(J, s, path, name, body);
    return fail(J, PK_ERR_ARG, "unknown type \"%s\" at %s", t, at(path));
}
