/* text/json_schema.c - a JSON schema to GBNF, for response_format json_schema
 * and json_object and for tool-call arguments.
 *
 * Every schema node becomes a rule named after its place ("root",
 * "root-name", "root-items", "Address" for #/$defs/Address); the shared
 * pieces (string, number, value, space, ...) are written once, at the end,
 * if used. White space: none before a value, `space` (nothing, one blank,
 * or a newline and up to 20 blanks or tabs) after each value and token, so
 * the output is compact or pretty as the model likes but cannot grow
 * white space without bound.
 *
 * Objects list their properties in the schema's order, required ones always
 * present, optional ones each may be left out: two rules per property (with
 * and without a comma before it) keep the grammar linear in their number.
 * additionalProperties false, or absent when properties are given (as
 * llama.cpp does), allows no other key; true or a schema allows other keys
 * (not equal to a declared one) after the declared ones. {"type": "object"}
 * alone is any object.
 *
 * What is not supported is refused with the keyword and its place (the
 * JSON pointer of the schema node): "json_schema: 'pattern' at
 * /properties/id is not supported". With PK_SCHEMA_LENIENT, the keywords
 * that only narrow values (pattern, bounds on numbers, multipleOf,
 * uniqueItems, ...) are ignored instead: the output still has the schema's
 * shape. Integer bounds are rules over the digits (any range of integers of
 * at most 16 digits is a union of digit-by-digit ranges).
 *
 * PK_SCHEMA_GEMMA4 (text/grammar.h) writes the same shapes in Gemma-4's
 * tool-call syntax instead of JSON: no white space, bare keys in
 * dictsort's order, strings between <|"|> markers (a bounded one without
 * '<'), enum and const values that syntax cannot hold left out.
 */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/common.h"
#include "text/grammar.h"
#include "text/strbuf.h"

#define MAX_DEPTH 64
#define MAX_ITEMS 1000       /* minItems, maxItems, minLength, maxLength */
#define MAX_KEY 256          /* declared names other keys are kept apart from (a rule per character) */


/* A GBNF string literal of n bytes. */
static void sb_literal(sbuf *b, const char *s, size_t n) {
    sb_str(b, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') sb_str(b, "\\\"");
        else if (c == '\\') sb_str(b, "\\\\");
        else if (c == '\n') sb_str(b, "\\n");
        else if (c == '\r') sb_str(b, "\\r");
        else if (c == '\t') sb_str(b, "\\t");
        else if (c < 0x20 || c == 0x7F) sb_printf(b, "\\x%02X", c);
        else sb_put(b, (const char *)&c, 1);
    }
    sb_str(b, "\"");
}

/* ---- the shared pieces --------------------------------------------------------- */

enum { P_SPACE, P_CHAR, P_STRING, P_INTEGRAL, P_NUMBER, P_INTEGER, P_BOOLEAN, P_NULL, P_VALUE, P_OBJECT, P_ARRAY,
       P_DATE, P_TIME, P_DATETIME, P_UUID, P_KEY, P_BCHAR, P_COUNT };

static const struct prim {
    const char *name, *body;
    uint32_t needs;          /* bits of the pieces it uses */
} prims[P_COUNT] = {
    [P_SPACE] = {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", 0},
    /* \u escapes of surrogates are left out: a lone one is not Unicode, and
       strict parsers (jansson) refuse it; such characters are written raw */
    [P_CHAR] = {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
                "([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))", 0},
    [P_STRING] = {"string", "\"\\\"\" @char* \"\\\"\" @space", 1u << P_CHAR | 1u << P_SPACE},
    [P_INTEGRAL] = {"integral-part", "\"0\" | [1-9] [0-9]{0,15}", 0},
    [P_NUMBER] = {"number", "\"-\"? @integral-part (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,16})? @space",
                  1u << P_INTEGRAL | 1u << P_SPACE},
    [P_INTEGER] = {"integer", "\"-\"? @integral-part @space", 1u << P_INTEGRAL | 1u << P_SPACE},
    [P_BOOLEAN] = {"boolean", "(\"true\" | \"false\") @space", 1u << P_SPACE},
    [P_NULL] = {"null", "\"null\" @space", 1u << P_SPACE},
    [P_VALUE] = {"value", "@object | @array | @string | @number | @boolean | @null",
                 1u << P_OBJECT | 1u << P_ARRAY | 1u << P_STRING | 1u << P_NUMBER | 1u << P_BOOLEAN | 1u << P_NULL},
    [P_OBJECT] = {"object", "\"{\" @space (@string \":\" @space @value (\",\" @space @string \":\" @space @value)*)? \"}\" @space",
                  1u << P_STRING | 1u << P_VALUE | 1u << P_SPACE},
    [P_ARRAY] = {"array", "\"[\" @space (@value (\",\" @space @value)*)? \"]\" @space", 1u << P_VALUE | 1u << P_SPACE},
    [P_DATE] = {"date", "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])", 0},
    [P_TIME] = {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
                "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])", 0},
    [P_DATETIME] = {"date-time", "@date \"T\" @time", 1u << P_DATE | 1u << P_TIME},
    [P_UUID] = {"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
                "\"-\" [0-9a-fA-F]{12}", 0},
    /* Gemma-4's (PK_SCHEMA_GEMMA4): a bare key, a bounded string's character */
    [P_KEY] = {"key", "[^:,{}\\[\\]<\"'=\\\\\\x00-\\x20\\x7F]+", 0},
    [P_BCHAR] = {"bchar", "[^<\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F]", 0},
};

/* Gemma-4's shapes of the pieces that differ: no white space, strings
 * between <|"|> markers, bare keys. */
#define G4_QUOTE "<|\\\"|>"
static const struct prim g4_prims[] = {
    [P_SPACE] = {"space", "\"\"", 0},
    [P_STRING] = {"string", "\"" G4_QUOTE "\" " PK_SCHEMA_GEMMA4_TEXT "-0 \"" G4_QUOTE "\"", 0},
    [P_OBJECT] = {"object", "\"{\" (@key \":\" @value (\",\" @key \":\" @value)*)? \"}\"", 1u << P_KEY | 1u << P_VALUE},
};

/* ---- the converter ---------------------------------------------------------------- */

typedef struct jsg {
    json_t *root;
    int lenient;
    int no_lt;               /* PK_SCHEMA_NO_LT: '<' in strings only as \u003c */
    int g4;                  /* PK_SCHEMA_GEMMA4: Gemma-4's way of writing values */
    pk_error *err;
    int failed;
    sbuf out;                /* the rules made so far */
    json_t *names;           /* rule names taken (object used as a set) */
    json_t *refs;            /* "$ref" -> rule name */
    uint32_t used;           /* shared pieces used */
    int depth;
    const char *prefix;      /* every rule name starts with it and '-' (NULL: none) */
    char *pname[P_COUNT];    /* the shared pieces' names */
} jsg;

/* Record the first error (what follows it is its consequence); -1. */
#define fail(J, code, ...) \
    ((J)->failed ? -1 : ((J)->failed = 1, pk_errorf((J)->err, code, "json_schema: " __VA_ARGS__), -1))

/* A fresh rule name from hint (letters, digits and '-' kept; others become '-'). */
static char *new_name(jsg *J, const char *hint) {
    char base[64];
    size_t n = 0;
    for (const char *p = hint; *p && n < sizeof base - 12; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        base[n++] = ok ? c : '-';
    }
    if (!n) base[n++] = 'r';
    base[n] = 0;
    size_t cap = n + 16 + (J->prefix ? strlen(J->prefix) + 1 : 0);
    char *name = malloc(cap);
    if (!name) { fail(J, PK_ERR_NOMEM, "out of memory"); return NULL; }
    const char *pre = J->prefix ? J->prefix : "", *dash = J->prefix ? "-" : "";
    snprintf(name, cap, "%s%s%s", pre, dash, base);
    int clash = json_object_get(J->names, name) != NULL;
    for (int i = 0; i < P_COUNT && !clash; i++) clash = !strcmp(name, J->pname[i]);
    for (unsigned k = 1; clash; k++) {
        snprintf(name, cap, "%s%s%s-%u", pre, dash, base, k);
        clash = json_object_get(J->names, name) != NULL;
        for (int i = 0; i < P_COUNT && !clash; i++) clash = !strcmp(name, J->pname[i]);
    }
    json_object_set_new(J->names, name, json_true());
    return name;
}

static void emit_rule(jsg *J, const char *name, const char *body) {
    sb_printf(&J->out, "%s ::= %s\n", name, body);
}

static const char *use(jsg *J, int prim) {
    J->used |= 1u << prim;
    return J->pname[prim];
}

/* A string's character without a raw '<' (PK_SCHEMA_NO_LT): the text
 * around tool-call arguments that ends at a marker (<|call|>, </parameter>)
 * cannot be cut by one inside a string; \u003c still writes it. */
static const char char_no_lt[] = "[^\"\\\\<\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" "
                                 "([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))";

/* A shared piece as J writes it. */
static const struct prim *prim_of(const jsg *J, int prim) {
    if (J->g4 && prim < (int)(sizeof g4_prims / sizeof g4_prims[0]) && g4_prims[prim].name) return &g4_prims[prim];
    return &prims[prim];
}

/* A shared piece's rule, its references (@name) to the others named as J
 * names them. */
static void emit_prim(jsg *J, int prim) {
    sbuf b = {0};
    for (const char *p = prim == P_CHAR && J->no_lt ? char_no_lt : prim_of(J, prim)->body; *p;) {
        if (*p != '@') { sb_put(&b, p++, 1); continue; }
        const char *q = ++p;
        while ((*q >= 'a' && *q <= 'z') || *q == '-') q++;
        for (int i = 0; i < P_COUNT; i++)
            if ((size_t)(q - p) == strlen(prims[i].name) && !memcmp(p, prims[i].name, (size_t)(q - p)))
                sb_str(&b, J->pname[i]);
        p = q;
    }
    if (b.oom) fail(J, PK_ERR_NOMEM, "out of memory");
    else emit_rule(J, J->pname[prim], b.p);
    free(b.p);
}

/* Keywords: what each does here. */
static const char *const annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "$defs", "definitions", "contentEncoding", "contentMediaType", "strict", NULL};
static const char *const narrowing[] = {
    "pattern", "multipleOf", "uniqueItems",
    "contains", "minContains", "maxContains", "minProperties", "maxProperties", "propertyNames",
    "patternProperties", "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
    "not", "if", "then", "else", NULL};
static const char *const handled[] = {
    "type", "properties", "required", "additionalProperties", "items", "prefixItems", "minItems", "maxItems",
    "enum", "const", "anyOf", "oneOf", "$ref", "nullable", "minLength", "maxLength", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL};

static int in_list(const char *const *l, const char *k) {
    for (; *l; l++) if (!strcmp(*l, k)) return 1;
    return 0;
}

static char *visit(jsg *J, json_t *s, const char *path, const char *hint);

/* The JSON pointer path + "/" + key (escaped as JSON pointers are). */
static char *path_join(const char *path, const char *key) {
    size_t n = strlen(path), k = strlen(key), extra = 0;
    for (size_t i = 0; i < k; i++) extra += key[i] == '~' || key[i] == '/';
    char *p = malloc(n + k + extra + 2);
    if (!p) return NULL;
    memcpy(p, path, n);
    p[n++] = '/';
    for (size_t i = 0; i < k; i++) {
        if (key[i] == '~') { p[n++] = '~'; p[n++] = '0'; }
        else if (key[i] == '/') { p[n++] = '~'; p[n++] = '1'; }
        else p[n++] = key[i];
    }
    p[n] = 0;
    return p;
}

static const char *at(const char *path) { return *path ? path : "/"; }

/* Visit the child s under path/key, with hint for its rule's name. */
static char *visit_child(jsg *J, json_t *s, const char *path, const char *key, const char *hint) {
    char *p = path_join(path, key);
    if (!p) { fail(J, PK_ERR_NOMEM, "out of memory"); return NULL; }
    char *r = visit(J, s, p, hint);
    free(p);
    return r;
}

/* Whether key can be written bare in a Gemma-4 object: what the parser
 * reads back as it is (P_KEY's characters). */
static int g4_bare_key(const char *k) {
    if (!*k) return 0;
    for (; *k; k++)
        if ((unsigned char)*k <= 0x20 || *k == 0x7F || strchr(":,{}[]<\"'=\\", *k)) return 0;
    return 1;
}

/* Text the parser would cut, or the reasoning splitter would take. */
static int g4_unwritable(const char *s, size_t n) {
    return memchr(s, 0, n) || memmem(s, n, "<|\"|>", 5) || memmem(s, n, "<|channel>", 10) ||
           memmem(s, n, "<channel|>", 10);
}

/* v as Gemma-4 writes it into b; -1 if it cannot be written. */
static int g4_dump(sbuf *b, json_t *v) {
    if (json_is_string(v)) {
        if (g4_unwritable(json_string_value(v), json_string_length(v))) return -1;
        sb_str(b, "<|\"|>");
        sb_put(b, json_string_value(v), json_string_length(v));
        sb_str(b, "<|\"|>");
        return 0;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        sb_str(b, "[");
        json_array_foreach(v, i, e) {
            if (i) sb_str(b, ",");
            if (g4_dump(b, e)) return -1;
        }
        sb_str(b, "]");
        return 0;
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *e;
        int first = 1;
        sb_str(b, "{");
        json_object_foreach(v, k, e) {
            if (!first) sb_str(b, ",");
            first = 0;
            if (g4_bare_key(k)) sb_str(b, k);
            else if (!strchr(k, '<')) { sb_str(b, "<|\"|>"); sb_str(b, k); sb_str(b, "<|\"|>"); }
            else return -1;
            sb_str(b, ":");
            if (g4_dump(b, e)) return -1;
        }
        sb_str(b, "}");
        return 0;
    }
    char *txt = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!txt) { b->oom = 1; return 0; }
    sb_str(b, txt);
    free(txt);
    return 0;
}

/* A JSON value as a GBNF literal followed by space; 1 (nothing written)
 * when it cannot be written in Gemma-4's way. */
static int literal_value(jsg *J, json_t *v, sbuf *body) {
    sbuf t = {0};
    if (J->g4) {
        if (g4_dump(&t, v)) { free(t.p); return 1; }
    } else {
        char *txt = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (txt) sb_str(&t, txt);
        else t.oom = 1;
        free(txt);
    }
    if (t.oom) { free(t.p); return fail(J, PK_ERR_NOMEM, "out of memory"); }
    sb_literal(body, t.p ? t.p : "", t.n);
    sb_printf(body, " %s", use(J, P_SPACE));
    free(t.p);
    return 0;
}

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
    char *name = new_name(J, hint);
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

static int do_object(jsg *J, json_t *s, const char *path, const char *name, sbuf *body) {
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
    char *pp = path_join(path, "properties");
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
        char *vr = visit_child(J, sub, pp, key, hint);
        if (!vr) { rc = -1; break; }
        sbuf b = {0};
        size_t kl = strlen(key);
        /* the key as JSON text: a string with the escapes JSON needs;
           Gemma-4's bare, or between <|"|> markers */
        json_t *ks = json_stringn(key, kl);
        char *kt = ks && !J->g4 ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
        json_decref(ks);
        if (J->g4 && g4_bare_key(key)) {
            kt = strdup(key);
        } else if (J->g4 && kl && !strchr(key, '<')) {
            if ((kt = malloc(kl + 11))) snprintf(kt, kl + 11, "<|\"|>%s<|\"|>", key);
        } else if (J->g4) {
            free(vr);
            rc = fail(J, PK_ERR_ARG, "property name '%.64s' at %s cannot be written in a Gemma-4 tool call", key, at(path));
            break;
        }
        if (!kt) { free(vr); rc = fail(J, PK_ERR_NOMEM, "out of memory"); break; }
        sb_literal(&b, kt, strlen(kt));
        free(kt);
        sb_printf(&b, " %s \":\" %s %s", use(J, P_SPACE), use(J, P_SPACE), vr);
        free(vr);
        char *kn = new_name(J, hint);
        char hk[96];
        if (kn) { snprintf(hk, sizeof hk, "%s-kv", kn); free(kn); kn = new_name(J, hk); }
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
        char *vr = json_is_true(add) ? strdup(use(J, P_VALUE)) : visit_child(J, add, path, "additionalProperties", hint);
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
        add_kv = new_name(J, hint);
        if (!add_kv || b.oom) { free(b.p); rc = fail(J, PK_ERR_NOMEM, "out of memory"); goto done; }
        emit_rule(J, add_kv, b.p);
        free(b.p);
    }
    /* first_i: properties i.. with nothing before; after_i: with a comma before */
    char *first_next = NULL, *after_next = NULL;
    if (add_kv) {
        char hint[80];
        snprintf(hint, sizeof hint, "%s-rest", name);
        first_next = new_name(J, hint);
        after_next = new_name(J, hint);
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
        char *fr = new_name(J, hint), *ar = new_name(J, hint);
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

static int do_array(jsg *J, json_t *s, const char *path, const char *name, sbuf *body) {
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
    else if (items) { if (!(item = visit_child(J, items, path, "items", hint))) return -1; }
    else if (!np) { item = strdup(use(J, P_VALUE)); if (!item) return fail(J, PK_ERR_NOMEM, "out of memory"); }
    /* with prefixItems: exactly those, then the items (if a schema) */
    sb_printf(body, "\"[\" %s ", use(J, P_SPACE));
    if (np) {
        if ((long long)np > (mx >= 0 ? mx : (long long)np) || (!item && (long long)np < mn)) {
            free(item);
            return fail(J, PK_ERR_ARG, "'prefixItems' at %s: %zu items do not fit minItems/maxItems", at(path), np);
        }
        char *pp = path_join(path, "prefixItems");
        if (!pp) { free(item); return fail(J, PK_ERR_NOMEM, "out of memory"); }
        for (size_t i = 0; i < np; i++) {
            char key[24], h2[96];
            snprintf(key, sizeof key, "%zu", i);
            snprintf(h2, sizeof h2, "%s-%zu", name, i);
            char *r = visit_child(J, json_array_get(prefix, i), pp, key, h2);
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
static int do_type(jsg *J, json_t *s, const char *t, const char *path, const char *name, sbuf *body) {
    if (!strcmp(t, "string")) return do_string(J, s, path, body);
    if (!strcmp(t, "number")) return do_number(J, s, path, body);
    if (!strcmp(t, "integer")) return do_integer(J, s, path, body);
    if (!strcmp(t, "boolean")) { sb_str(body, use(J, P_BOOLEAN)); return 0; }
    if (!strcmp(t, "null")) { sb_str(body, use(J, P_NULL)); return 0; }
    if (!strcmp(t, "object")) return do_object(J, s, path, name, body);
    if (!strcmp(t, "array")) return do_array(J, s, path, name, body);
    return fail(J, PK_ERR_ARG, "unknown type \"%s\" at %s", t, at(path));
}

/* Resolve a local reference "#/a/b" from the root schema. */
static json_t *resolve(jsg *J, const char *ref, const char *path) {
    if (ref[0] != '#') {
        fail(J, PK_ERR_ARG, "'$ref' \"%s\" at %s: only references inside the schema (#/...) are supported", ref, at(path));
        return NULL;
    }
    json_t *cur = J->root;
    const char *p = ref + 1;
    while (*p) {
        if (*p != '/') break;
        p++;
        const char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        char *key = malloc(n + 1);
        if (!key) { fail(J, PK_ERR_NOMEM, "out of memory"); return NULL; }
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) { key[k++] = p[i + 1] == '0' ? '~' : '/'; i++; }
            else key[k++] = p[i];
        }
        key[k] = 0;
        json_t *next = NULL;
        if (json_is_object(cur)) next = json_object_get(cur, key);
        else if (json_is_array(cur)) {
            char *end;
            unsigned long idx = strtoul(key, &end, 10);
            if (*key && !*end) next = json_array_get(cur, idx);
        }
        free(key);
        cur = next;
        if (!cur) break;
        p += n;
    }
    if (!cur || *p) {
        fail(J, PK_ERR_ARG, "'$ref' \"%s\" at %s does not resolve", ref, at(path));
        return NULL;
    }
    return cur;
}

/* The rule for schema s at path (malloc'ed name), NULL on error. */
static char *visit(jsg *J, json_t *s, const char *path, const char *hint) {
    if (J->failed) return NULL;
    if (json_is_true(s)) return strdup(use(J, P_VALUE));
    if (json_is_false(s)) { fail(J, PK_ERR_ARG, "the schema at %s is false: nothing is valid", at(path)); return NULL; }
    if (!json_is_object(s)) { fail(J, PK_ERR_ARG, "the schema at %s is not an object", at(path)); return NULL; }
    if (J->depth >= MAX_DEPTH) { fail(J, PK_ERR_ARG, "schemas nested more than %d deep at %s", MAX_DEPTH, at(path)); return NULL; }
    const char *key;
    json_t *v;
    int n_handled = 0;
    json_object_foreach(s, key, v) {
        if (in_list(handled, key)) { n_handled++; continue; }
        if (in_list(annotations, key) || !strncmp(key, "x-", 2)) continue;
        if (in_list(narrowing, key)) {
            if (J->lenient) continue;
            fail(J, PK_ERR_ARG, "'%s' at %s is not supported", key, at(path));
            return NULL;
        }
        fail(J, PK_ERR_ARG, "unknown keyword '%s' at %s", key, at(path));
        return NULL;
    }
    json_t *ref = json_object_get(s, "$ref");
    if (ref) {
        const char *r = json_string_value(ref);
        if (!r) { fail(J, PK_ERR_ARG, "'$ref' at %s must be a string", at(path)); return NULL; }
        if (n_handled > 1) { fail(J, PK_ERR_ARG, "'$ref' with other keywords at %s is not supported", at(path)); return NULL; }
        json_t *known = json_object_get(J->refs, r);
        if (known) return strdup(json_string_value(known));
        json_t *target = resolve(J, r, path);
        if (!target) return NULL;
        const char *last = strrchr(r, '/');
        char *name = new_name(J, last && last[1] ? last + 1 : "ref");
        if (!name) return NULL;
        json_object_set_new(J->refs, r, json_string(name));
        J->depth++;
        char *inner = visit(J, target, r + 1, name);
        J->depth--;
        if (!inner) { free(name); return NULL; }
        emit_rule(J, name, inner);
        free(inner);
        return name;
    }
    char *name = new_name(J, hint);
    if (!name) return NULL;
    sbuf body = {0};
    int rc = 0;
    J->depth++;
    json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
    json_t *type = json_object_get(s, "type");
    json_t *nullable = json_object_get(s, "nullable");
    if (cn) {
        rc = literal_value(J, cn, &body);
        if (rc > 0) rc = fail(J, PK_ERR_ARG, "'const' at %s cannot be written in a Gemma-4 tool call", at(path));
    } else if (en) {
        if (!json_is_array(en) || !json_array_size(en)) rc = fail(J, PK_ERR_ARG, "'enum' at %s must be a non-empty array", at(path));
        int alts = 0;
        for (size_t i = 0; !rc && i < json_array_size(en); i++) {
            size_t at_alt = body.n;
            if (alts) sb_str(&body, " | ");
            rc = literal_value(J, json_array_get(en, i), &body);
            if (rc > 0) {   /* left out: Gemma-4 cannot write it */
                body.n = at_alt;
                if (body.p) body.p[at_alt] = 0;
                rc = 0;
            } else {
                alts++;
            }
        }
        if (!rc && !alts)
            rc = fail(J, PK_ERR_ARG, "no value of 'enum' at %s can be written in a Gemma-4 tool call", at(path));
    } else if (any || one) {
        json_t *alts = any ? any : one;
        const char *kw = any ? "anyOf" : "oneOf";
        if (any && one) rc = fail(J, PK_ERR_ARG, "'anyOf' with 'oneOf' at %s is not supported", at(path));
        else if (!json_is_array(alts) || !json_array_size(alts))
            rc = fail(J, PK_ERR_ARG, "'%s' at %s must be a non-empty array", kw, at(path));
        else if (n_handled > 1 + (nullable != NULL))
            rc = fail(J, PK_ERR_ARG, "'%s' with other keywords at %s is not supported (move them into each "
                      "alternative)", kw, at(path));
        char *pp = rc ? NULL : path_join(path, kw);
        if (!rc && !pp) rc = fail(J, PK_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !rc && i < json_array_size(alts); i++) {
            char k[24], h2[96];
            snprintf(k, sizeof k, "%zu", i);
            snprintf(h2, sizeof h2, "%s-%zu", name, i);
            char *r = visit_child(J, json_array_get(alts, i), pp, k, h2);
            if (!r) { rc = -1; break; }
            if (i) sb_str(&body, " | ");
            sb_str(&body, r);
            free(r);
        }
        free(pp);
    } else if (json_is_array(type)) {
        if (!json_array_size(type)) rc = fail(J, PK_ERR_ARG, "'type' at %s is an empty list", at(path));
        for (size_t i = 0; !rc && i < json_array_size(type); i++) {
            const char *t = json_string_value(json_array_get(type, i));
            if (!t) { rc = fail(J, PK_ERR_ARG, "'type' at %s must list strings", at(path)); break; }
            if (i) sb_str(&body, " | ");
            sb_str(&body, "(");
            rc = do_type(J, s, t, path, name, &body);
            sb_str(&body, ")");
        }
    } else if (type) {
        const char *t = json_string_value(type);
        if (!t) rc = fail(J, PK_ERR_ARG, "'type' at %s must be a string or a list of strings", at(path));
        else rc = do_type(J, s, t, path, name, &body);
    } else if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
               json_object_get(s, "required")) {
        rc = do_object(J, s, path, name, &body);
    } else if (json_object_get(s, "items") || json_object_get(s, "prefixItems")) {
        rc = do_array(J, s, path, name, &body);
    } else if (!J->lenient && (json_object_get(s, "minimum") || json_object_get(s, "maximum") ||
                               json_object_get(s, "exclusiveMinimum") || json_object_get(s, "exclusiveMaximum"))) {
        rc = fail(J, PK_ERR_ARG, "bounds without \"type\": \"integer\" at %s are not supported", at(path));
    } else {
        sb_str(&body, use(J, P_VALUE));
    }
    if (!rc && nullable && json_is_true(nullable)) sb_printf(&body, " | %s", use(J, P_NULL));
    J->depth--;
    if (!rc && body.oom) rc = fail(J, PK_ERR_NOMEM, "out of memory");
    if (rc || J->failed) { free(body.p); free(name); return NULL; }
    emit_rule(J, name, body.p);
    free(body.p);
    return name;
}

int pk_json_schema_gbnf(const char *schema, size_t len, int flags, const char *name, char **out, pk_error *err) {
    *out = NULL;
    if (!schema) return pk_errorf(err, PK_ERR_ARG, "json_schema: the schema is NULL");
    if (name) {
        int ok = *name != 0;
        for (const char *p = name; *p; p++)
            ok &= (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-';
        if (!ok) return pk_errorf(err, PK_ERR_ARG, "json_schema: rule name \"%.60s\" is not letters, digits and '-'", name);
    }
    json_error_t je;
    json_t *root = json_loadb(schema, len, JSON_DECODE_ANY, &je);
    if (!root) return pk_errorf(err, PK_ERR_ARG, "json_schema: not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    jsg J = {.root = root, .lenient = (flags & PK_SCHEMA_LENIENT) != 0, .no_lt = (flags & PK_SCHEMA_NO_LT) != 0,
             .g4 = (flags & PK_SCHEMA_GEMMA4) != 0, .err = err,
             .names = json_object(), .refs = json_object(), .prefix = name};
    int oom = !J.names || !J.refs;
    for (int i = 0; i < P_COUNT && !oom; i++) {
        size_t n = strlen(prims[i].name) + (name ? strlen(name) + 2 : 1);
        J.pname[i] = malloc(n);
        if (!J.pname[i]) oom = 1;
        else snprintf(J.pname[i], n, "%s%s%s", name ? name : "", name ? "-" : "", prims[i].name);
    }
    const char *start = name ? name : "root";
    char *top = oom ? NULL : visit(&J, root, "", "root");
    if (top) {
        if (strcmp(top, start)) emit_rule(&J, start, top);   /* without a prefix the top rule is root */
        free(top);
        /* the shared pieces and what they use */
        uint32_t used = J.used, prev = 0;
        while (used != prev) {
            prev = used;
            for (int i = 0; i < P_COUNT; i++) if (used >> i & 1) used |= prim_of(&J, i)->needs;
        }
        for (int i = 0; i < P_COUNT; i++) if (used >> i & 1) emit_prim(&J, i);
    }
    json_decref(root);
    json_decref(J.names);
    json_decref(J.refs);
    for (int i = 0; i < P_COUNT; i++) free(J.pname[i]);
    if (oom && !J.failed) fail(&J, PK_ERR_NOMEM, "out of memory");
    if (!J.failed && J.out.oom) fail(&J, PK_ERR_NOMEM, "out of memory");
    if (J.failed) { free(J.out.p); return err ? err->code : PK_ERR_ARG; }
    *out = J.out.p;
    return PK_OK;
}

int pk_json_schema_to_grammar(const char *schema, size_t len, int flags, char **gbnf, pk_error *err) {
    if (!gbnf) return pk_errorf(err, PK_ERR_ARG, "json_schema: out is NULL");
    return pk_json_schema_gbnf(schema, len, flags, NULL, gbnf, err);
}

int pk_json_schema_to_rules(const char *schema, size_t len, int flags, const char *name, char **gbnf, pk_error *err) {
    if (!gbnf) return pk_errorf(err, PK_ERR_ARG, "json_schema: out is NULL");
    if (!name) return pk_errorf(err, PK_ERR_ARG, "json_schema: the rule name is NULL");
    return pk_json_schema_gbnf(schema, len, flags, name, gbnf, err);
}
