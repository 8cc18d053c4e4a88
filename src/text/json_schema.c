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
 *
 * This file is the frame: the shared pieces, rule names, keywords,
 * $ref, the walk over the schema, the API. The rules of each type are
 * text/json_schema_types.c's; text/json_schema_int.h is between them.
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/grammar.h"
#include "text/json_schema_int.h"
#include "text/strbuf.h"

#define MAX_DEPTH 64


/* A GBNF string literal of n bytes. */
void pk_jsg_sb_literal(sbuf *b, const char *s, size_t n) {
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
static const struct prim g4_prims[] = {
    [P_SPACE] = {"space", "\"\"", 0},
    [P_STRING] = {"string", "\"" G4_QUOTE "\" " PK_SCHEMA_GEMMA4_TEXT "-0 \"" G4_QUOTE "\"", 0},
    [P_OBJECT] = {"object", "\"{\" (@key \":\" @value (\",\" @key \":\" @value)*)? \"}\"", 1u << P_KEY | 1u << P_VALUE},
};

/* ---- the converter ---------------------------------------------------------------- */

/* A fresh rule name from hint (letters, digits and '-' kept; others become '-'). */
char *pk_jsg_new_name(jsg *J, const char *hint) {
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
char *pk_jsg_path_join(const char *path, const char *key) {
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

/* Visit the child s under path/key, with hint for its rule's name. */
char *pk_jsg_visit_child(jsg *J, json_t *s, const char *path, const char *key, const char *hint) {
    char *p = pk_jsg_path_join(path, key);
    if (!p) { fail(J, PK_ERR_NOMEM, "out of memory"); return NULL; }
    char *r = visit(J, s, p, hint);
    free(p);
    return r;
}

/* Whether key can be written bare in a Gemma-4 object: what the parser
 * reads back as it is (P_KEY's characters). */
int pk_jsg_g4_bare_key(const char *k) {
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
            if (pk_jsg_g4_bare_key(k)) sb_str(b, k);
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
    pk_jsg_sb_literal(body, t.p ? t.p : "", t.n);
    sb_printf(body, " %s", use(J, P_SPACE));
    free(t.p);
    return 0;
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
        char *name = pk_jsg_new_name(J, last && last[1] ? last + 1 : "ref");
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
    char *name = pk_jsg_new_name(J, hint);
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
        char *pp = rc ? NULL : pk_jsg_path_join(path, kw);
        if (!rc && !pp) rc = fail(J, PK_ERR_NOMEM, "out of memory");
        for (size_t i = 0; !rc && i < json_array_size(alts); i++) {
            char k[24], h2[96];
            snprintf(k, sizeof k, "%zu", i);
            snprintf(h2, sizeof h2, "%s-%zu", name, i);
            char *r = pk_jsg_visit_child(J, json_array_get(alts, i), pp, k, h2);
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
            rc = pk_jsg_do_type(J, s, t, path, name, &body);
            sb_str(&body, ")");
        }
    } else if (type) {
        const char *t = json_string_value(type);
        if (!t) rc = fail(J, PK_ERR_ARG, "'type' at %s must be a string or a list of strings", at(path));
        else rc = pk_jsg_do_type(J, s, t, path, name, &body);
    } else if (json_object_get(s, "properties") || json_object_get(s, "additionalProperties") ||
               json_object_get(s, "required")) {
        rc = pk_jsg_do_object(J, s, path, name, &body);
    } else if (json_object_get(s, "items") || json_object_get(s, "prefixItems")) {
        rc = pk_jsg_do_array(J, s, path, name, &body);
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
