/* text/toolcall_grammar.c - the grammar that makes a model call a tool: for
 * OpenAI's tool_choice "required" (one or more calls, to any of the tools)
 * or a named function (calls to it only), in the format the model writes
 * calls in (text/toolcall.c parses them back), each call's arguments
 * constrained by its tool's JSON schema (text/json_schema.c).
 *
 *   qwen3coder  <tool_call>\n<function=NAME>\n(<parameter=ARG>\nVALUE\n</parameter>\n)*
 *               </function>\n</tool_call>, calls one a line. A string VALUE
 *               is raw text (an enum's values as written); other types JSON.
 *   hermes      <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
 *   llama3      {"name": "NAME", "parameters": ARGS}, calls separated by "; "
 *   deepseek    <｜tool▁calls▁begin｜>(<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS
 *               <｜tool▁call▁end｜>)+<｜tool▁calls▁end｜>
 *   harmony     <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS
 *               (one call: <|call|> ends the generation, an end-of-generation
 *               token the grammar allows once complete)
 *   gemma4      <|tool_call>call:NAME{key:VALUE,...}<tool_call|>, calls one after
 *               the other; the arguments in Gemma-4's syntax (PK_SCHEMA_GEMMA4):
 *               strings between <|"|> markers, any text without <|"|> or the
 *               reasoning splitter's <|channel>, <channel|>
 *
 * Reasoning: with PK_TOOLCALL_MAY_THINK the grammar lets the model think
 * first (<think>...</think>, harmony's analysis message), with
 * PK_TOOLCALL_THINKING the output starts inside the reasoning (the prompt
 * ended with <think>), so one grammar is attached from the first token and
 * pk_sampler_grammar_limit closes the reasoning in time.
 *
 * Free text that must stop at a marker (a raw string value before
 * </parameter>, reasoning before </think>) is a small automaton written as
 * rules: a state per prefix of a forbidden marker the text ends with, one
 * alternative per character that matters and one class for the others, so
 * the matcher keeps one or two stacks and the masks are walked once per
 * state. JSON inside text that ends at a marker anywhere (qwen3coder values,
 * harmony, deepseek) writes '<' in strings as \u003c (PK_SCHEMA_NO_LT).
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/common.h"
#include "text/grammar.h"
#include "text/strbuf.h"
#include "text/toolcall.h"

#define NAME_MAX_LEN 256     /* as the parser: a longer name is not one */
#define DFA_MAX 128          /* automaton states (the markers here need < 40) */
#define MARK_MAX 32          /* a marker's length */

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define DS_SEP "<｜tool▁sep｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"

typedef struct tcg {
    int fmt, flags;
    sbuf out;
    pk_error *err;
    int failed;
} tcg;

#define fail(G, code, ...) ((G)->failed ? -1 : ((G)->failed = 1, pk_errorf((G)->err, code, __VA_ARGS__), -1))

/* s as a GBNF string literal: printable ASCII and UTF-8 as they are, the
 * rest (and the quote and backslash) as \xHH. */
static void quote(sbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7F || c == '"' || c == '\\') sb_printf(b, "\\x%02X", c);
        else sb_put(b, s, 1);
    }
    sb_put(b, "\"", 1);
}

/* ---- text that stops before a marker ----------------------------------------------- */

/* The automaton of texts that contain none of the markers forbid (ASCII)
 * and, with nullx, are not what qwen3coder reads as null (white space,
 * null in any case, white space): states are (the longest end of the text
 * that begins a marker, how far the null test is). The caller writes what
 * follows: the end marker must not join with the text's end into one of
 * forbid (the markers here start with '<' or '\n' and have no border). */
enum { NX_WS, NX_N, NX_NU, NX_NUL, NX_NULL, NX_FREE };
typedef struct dstate {
    char s[MARK_MAX];
    int nx;
} dstate;

static int nx_step(int nx, unsigned char c) {
    int ws = c == ' ' || c == '\t' || c == '\n' || c == '\r', lc = c | 0x20;
    switch (nx) {
    case NX_WS: return ws ? NX_WS : lc == 'n' ? NX_N : NX_FREE;
    case NX_N: return lc == 'u' ? NX_NU : NX_FREE;
    case NX_NU: return lc == 'l' ? NX_NUL : NX_FREE;
    case NX_NUL: return lc == 'l' ? NX_NULL : NX_FREE;
    case NX_NULL: return ws ? NX_NULL : NX_FREE;
    default: return NX_FREE;
    }
}

static int ends_with(const char *s, size_t n, const char *m) {
    size_t k = strlen(m);
    return n >= k && !memcmp(s + n - k, m, k);
}

/* From state st by character c: 0 with the next state in *to, -1 when
 * the text would contain a marker. */
static int d_step(const dstate *st, unsigned char c, const char *const *forbid, int nullx, dstate *to) {
    char t[MARK_MAX + 1];
    size_t n = strlen(st->s);
    memcpy(t, st->s, n);
    t[n++] = (char)c;
    for (int k = 0; forbid[k]; k++)
        if (ends_with(t, n, forbid[k])) return -1;
    size_t keep = 0;   /* the longest end of t that begins a marker */
    for (size_t l = n; l > 0 && !keep; l--)
        for (int k = 0; forbid[k] && !keep; k++)
            if (strlen(forbid[k]) > l && !memcmp(t + n - l, forbid[k], l)) keep = l;
    memcpy(to->s, t + n - keep, keep);
    to->s[keep] = 0;
    to->nx = nullx ? nx_step(st->nx, c) : NX_FREE;
    return 0;
}

static int d_find(const dstate *v, int n, const dstate *x) {
    for (int i = 0; i < n; i++)
        if (v[i].nx == x->nx && !strcmp(v[i].s, x->s)) return i;
    return -1;
}

/* Rules name-0 (the start), name-1, ... for the texts without the markers
 * forbid (and not null, with nullx). */
static void free_text(tcg *G, const char *name, const char *const *forbid, int nullx) {
    char chars[64];
    int nc = 0;
    for (int k = 0; forbid[k]; k++)
        for (const char *p = forbid[k]; *p; p++)
            if (!memchr(chars, *p, (size_t)nc)) chars[nc++] = *p;
    if (nullx)
        for (const char *p = "nNuUlL \t\n\r"; *p; p++)
            if (!memchr(chars, *p, (size_t)nc)) chars[nc++] = *p;
    dstate *v = malloc(DFA_MAX * sizeof *v);
    if (!v) { fail(G, PK_ERR_NOMEM, "out of memory"); return; }
    int n = 1;
    v[0] = (dstate){.s = "", .nx = nullx ? NX_WS : NX_FREE};
    for (int i = 0; i < n && !G->failed; i++) {
        sb_printf(&G->out, "%s-%d ::=", name, i);
        int alt = 0;
        for (int k = 0; k <= nc; k++) {
            dstate to = {.nx = NX_FREE};
            /* k == nc: every other character, which starts no marker */
            if (k < nc && d_step(&v[i], (unsigned char)chars[k], forbid, nullx, &to)) continue;
            if (k == nc) to = (dstate){.s = "", .nx = NX_FREE};
            int j = d_find(v, n, &to);
            if (j < 0) {
                if (n == DFA_MAX) { fail(G, PK_ERR_NOMEM, "tool-call grammar: automaton too large"); break; }
                v[j = n++] = to;
            }
            sb_printf(&G->out, "%s [", alt++ ? " |" : "");
            if (k == nc) {
                sb_str(&G->out, "^\\x00-\\x08\\x0B\\x0C\\x0E-\\x1F\\x7F");   /* no control characters */
                for (int m = 0; m < nc; m++) sb_printf(&G->out, "\\x%02X", (unsigned char)chars[m]);
            } else {
                sb_printf(&G->out, "\\x%02X", (unsigned char)chars[k]);
            }
            sb_printf(&G->out, "] %s-%d", name, j);
        }
        if (v[i].nx != NX_NULL) sb_str(&G->out, " | \"\"");   /* the text may end here */
        sb_put(&G->out, "\n", 1);
    }
    free(v);
}

/* ---- the tools ------------------------------------------------------------------- */

/* A tool's function: its name and parameters schema (NULL: none), from
 * {"type": "function", "function": {"name", "parameters"}} or {"name",
 * "input_schema"} (Anthropic's), as the parser reads them. */
static json_t *tool_fn(json_t *t) {
    json_t *f = json_object_get(t, "function");
    return json_is_object(f) ? f : t;
}

static json_t *tool_params(json_t *f) {
    json_t *p = json_object_get(f, "parameters");
    return p ? p : json_object_get(f, "input_schema");
}

/* Whether name can be written in the format and read back the same: 1 to
 * NAME_MAX_LEN bytes, no white space, control characters, quotes,
 * backslashes or angle brackets. */
static int name_writable(const char *s) {
    size_t n = strlen(s);
    if (!n || n > NAME_MAX_LEN) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c == 0x7F || strchr("\"\\<>", c)) return 0;
    }
    return 1;
}

/* The JSON schema's rules for schema as rule name (flags passed on). */
static void schema_rules(tcg *G, json_t *schema, const char *name, int flags, const char *fname, const char *pname) {
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    char *rules = NULL;
    pk_error e = {0};
    if (!text) { fail(G, PK_ERR_NOMEM, "out of memory"); return; }
    if (pk_json_schema_to_rules(text, strlen(text), flags, name, &rules, &e)) {
        if (pname) fail(G, e.code, "tools: function '%.64s', parameter '%.64s': %s", fname, pname, e.msg);
        else fail(G, e.code, "tools: function '%.64s': %s", fname, e.msg);
    } else {
        sb_str(&G->out, rules);
    }
    free(rules);
    free(text);
}

/* ---- qwen3coder parameters ------------------------------------------------------- */

/* s with local $refs (#/$defs/X, #/definitions/X) resolved against root. */
static json_t *deref(json_t *root, json_t *s) {
    for (int k = 0; k < 8; k++) {
        const char *r = json_string_value(json_object_get(s, "$ref"));
        if (!r || strncmp(r, "#/", 2)) return s;
        const char *slash = strchr(r + 2, '/');
        if (!slash) return s;
        char sect[32];
        size_t sl = (size_t)(slash - r - 2);
        if (sl >= sizeof sect) return s;
        memcpy(sect, r + 2, sl);
        sect[sl] = 0;
        json_t *t = json_object_get(json_object_get(root, sect), slash + 1);
        if (!json_is_object(t)) return s;
        s = t;
    }
    return s;
}

/* How the parser reads a raw value under the parameter's own "type" (what
 * toolcall.c's schema_allows looks at): the value v, written raw, stays
 * the string v. */
static int raw_survives(json_t *prop, const char *v) {
    json_t *type = json_object_get(prop, "type");
    int str_only = json_is_string(type) && !strcmp(json_string_value(type), "string");
    size_t n = strlen(v);
    const char *p = v;
    while (n && strchr(" \t\n\r", *p)) { p++; n--; }
    while (n && strchr(" \t\n\r", p[n - 1])) n--;
    if (n == 4 && !strncasecmp(p, "null", 4)) return 0;
    if (str_only) return 1;
    if (!n) return 1;
    json_error_t je;
    json_t *j = json_loadb(p, n, JSON_DECODE_ANY, &je);
    int is_json = j && !json_is_string(j);
    json_decref(j);
    return !is_json && !(n == 4 && !strncasecmp(p, "true", 4)) && !(n == 5 && !strncasecmp(p, "false", 5));
}

/* A raw string value's rule: any text without the value's end markers
 * that the parser does not read as null; its length and format cannot be
 * held to (refused, or ignored with PK_SCHEMA_LENIENT). */
static void raw_string(tcg *G, json_t *s, const char *rule, const char *fname, const char *pname) {
    static const char *const keys[] = {"minLength", "maxLength", "format", "pattern", NULL};
    for (int k = 0; keys[k] && !(G->flags & PK_SCHEMA_LENIENT); k++)
        if (json_object_get(s, keys[k]))
            fail(G, PK_ERR_ARG, "tools: function '%.64s', parameter '%.64s': '%s' is not supported for raw "
                                "string values (qwen3coder) unless lenient", fname, pname, keys[k]);
    static const char *const ends[] = {"</parameter>", "</function>", "</tool_call>", NULL};
    char sub[128];
    if (snprintf(sub, sizeof sub, "%s-raw", rule) >= (int)sizeof sub) { fail(G, PK_ERR_ARG, "tools: function '%.64s': a rule name is too long", fname); return; }
    sb_printf(&G->out, "%s ::= %s-0\n", rule, sub);
    free_text(G, sub, ends, 1);
}

/* A JSON value's rules: prop as a schema of its own, with the root's
 * definitions for its $refs. */
static void json_value(tcg *G, json_t *root, json_t *prop, const char *rule, const char *fname, const char *pname) {
    json_t *copy = json_is_object(prop) ? json_copy(prop) : json_incref(prop);
    if (!copy) { fail(G, PK_ERR_NOMEM, "out of memory"); return; }
    static const char *const defs[] = {"$defs", "definitions", NULL};
    for (int d = 0; defs[d]; d++)
        if (json_is_object(copy) && json_object_get(root, defs[d]) && !json_object_get(copy, defs[d]))
            json_object_set(copy, defs[d], json_object_get(root, defs[d]));
    schema_rules(G, copy, rule, (G->flags & PK_SCHEMA_LENIENT) | PK_SCHEMA_NO_LT, fname, pname);
    json_decref(copy);
}

/* The value rule of a parameter: raw text for a string, JSON for the rest. */
static void param_value(tcg *G, json_t *root, json_t *prop, const char *rule, const char *fname, const char *pname) {
    json_t *s = deref(root, prop);
    json_t *type = json_object_get(s, "type"), *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
    int str_type = json_is_string(type) && !strcmp(json_string_value(type), "string");
    int str_enum = json_is_array(en) && json_array_size(en) > 0;
    size_t i;
    json_t *e;
    json_array_foreach(en, i, e) str_enum &= json_is_string(e);
    if (json_is_string(cn) || (str_enum && (!type || str_type))) {   /* the values, as written */
        sb_printf(&G->out, "%s ::=", rule);
        int alt = 0;
        if (json_is_string(cn)) {
            if (raw_survives(prop, json_string_value(cn))) { sb_put(&G->out, " ", 1); quote(&G->out, json_string_value(cn)); alt++; }
        } else {
            json_array_foreach(en, i, e) {
                const char *v = json_string_value(e);
                if (!raw_survives(prop, v) || strstr(v, "</")) continue;
                sb_str(&G->out, alt++ ? " | " : " ");
                quote(&G->out, v);
            }
        }
        sb_put(&G->out, "\n", 1);
        if (!alt)
            fail(G, PK_ERR_ARG, "tools: function '%.64s', parameter '%.64s': none of its values can be written as "
                                "raw text in the qwen3coder format", fname, pname);
        return;
    }
    int str_in_list = 0;
    json_array_foreach(type, i, e) str_in_list |= json_is_string(e) && !strcmp(json_string_value(e), "string");
    if (str_type || str_in_list) {
        char sub[112];
        if (snprintf(sub, sizeof sub, "%s-s", rule) >= (int)sizeof sub) { fail(G, PK_ERR_ARG, "tools: function '%.64s': a rule name is too long", fname); return; }
        sb_printf(&G->out, "%s ::= %s", rule, sub);
        if (str_in_list && json_array_size(type) > 1) sb_printf(&G->out, " | %s-j", rule);
        sb_put(&G->out, "\n", 1);
        raw_string(G, s, sub, fname, pname);
        if (!str_in_list || json_array_size(type) == 1) return;
        /* the other types as JSON (a raw text that reads as one of them is one of them) */
        json_t *copy = json_copy(s), *others = json_array();
        json_array_foreach(type, i, e) if (strcmp(json_string_value(e) ? json_string_value(e) : "", "string")) json_array_append(others, e);
        if (copy) json_object_set_new(copy, "type", others);
        else json_decref(others);
        if (snprintf(sub, sizeof sub, "%s-j", rule) >= (int)sizeof sub) { json_decref(copy); copy = NULL; }
        if (copy) json_value(G, root, copy, sub, fname, pname);
        else fail(G, PK_ERR_NOMEM, "out of memory");
        json_decref(copy);
        return;
    }
    json_value(G, root, prop, rule, fname, pname);
}

/* name ::= the function's parameters, each as <parameter=ARG>\nVALUE\n</parameter>\n,
 * in the schema's order, required ones always, optional ones each may be
 * left out. */
static void qwen_params(tcg *G, json_t *params, const char *name, const char *fname) {
    json_t *props = json_object_get(params, "properties"), *req = json_object_get(params, "required");
    if (params && !json_is_object(params)) {
        fail(G, PK_ERR_ARG, "tools: function '%.64s': 'parameters' is not a JSON schema object", fname);
        return;
    }
    size_t i;
    json_t *r;
    json_array_foreach(req, i, r)
        if (!json_is_string(r) || !json_object_get(props, json_string_value(r)))
            fail(G, PK_ERR_ARG, "tools: function '%.64s': 'required' names a parameter not in 'properties'", fname);
    sbuf body = {0};
    sb_str(&body, "");
    const char *key;
    json_t *prop;
    int k = 0;
    json_object_foreach(props, key, prop) {
        if (G->failed) break;
        size_t kl = strlen(key);
        if (!kl || kl > NAME_MAX_LEN || strpbrk(key, "<>\n\r") || strchr(" \t", key[0]) || strchr(" \t", key[kl - 1])) {
            fail(G, PK_ERR_ARG, "tools: function '%.64s': parameter name '%.64s' cannot be written in the qwen3coder format",
                 fname, key);
            break;
        }
        int required = 0;
        json_array_foreach(req, i, r) required |= json_is_string(r) && !strcmp(json_string_value(r), key);
        char rule[96];
        snprintf(rule, sizeof rule, "%s-%d", name, k);
        sb_printf(&G->out, "%s ::= \"<parameter=\" ", rule);
        quote(&G->out, key);
        sb_printf(&G->out, " \">\\n\" %s-v \"\\n</parameter>\\n\"\n", rule);
        char vrule[112];
        snprintf(vrule, sizeof vrule, "%s-v", rule);
        param_value(G, params, prop, vrule, fname, key);
        sb_printf(&body, " %s%s", rule, required ? "" : "?");
        k++;
    }
    if (body.oom) fail(G, PK_ERR_NOMEM, "out of memory");
    sb_printf(&G->out, "%s ::=%s\n", name, body.n ? body.p : " \"\"");
    free(body.p);
}

/* ---- gemma4 arguments -------------------------------------------------------------- */

/* The parameters schema as an object's (new reference): Gemma-4 writes
 * the arguments as {...} after the name, and the parser reads nothing
 * else as a call. No "type" becomes "object"; another type, a top-level
 * choice (anyOf, oneOf, $ref, enum, const) or nullable are refused. */
static json_t *g4_object(tcg *G, json_t *params, const char *fname) {
    if (json_is_true(params)) return json_pack("{s:s}", "type", "object");
    if (!json_is_object(params)) {
        fail(G, PK_ERR_ARG, "tools: function '%.64s': 'parameters' is not a JSON schema object", fname);
        return NULL;
    }
    static const char *const choice[] = {"anyOf", "oneOf", "$ref", "enum", "const", NULL};
    for (int k = 0; choice[k]; k++)
        if (json_object_get(params, choice[k])) {
            fail(G, PK_ERR_ARG, "tools: function '%.64s': '%s' at the top of 'parameters' is not supported for "
                                "gemma4 (the arguments are an object)", fname, choice[k]);
            return NULL;
        }
    json_t *type = json_object_get(params, "type"), *copy = json_copy(params);
    int is_obj = !type || (json_is_string(type) && !strcmp(json_string_value(type), "object"));
    size_t i;
    json_t *t;
    json_array_foreach(type, i, t) is_obj |= json_is_string(t) && !strcmp(json_string_value(t), "object");
    if (!is_obj) {
        json_decref(copy);
        fail(G, PK_ERR_ARG, "tools: function '%.64s': 'parameters' must be an object schema for gemma4", fname);
        return NULL;
    }
    if (!copy || json_object_set_new(copy, "type", json_string("object"))) {
        json_decref(copy);
        fail(G, PK_ERR_NOMEM, "out of memory");
        return NULL;
    }
    json_object_del(copy, "nullable");
    return copy;
}

/* ---- the grammar ----------------------------------------------------------------- */

/* call-i ::= one call of function f in the format. */
static void write_call(tcg *G, int i, json_t *f) {
    const char *name = json_string_value(json_object_get(f, "name"));
    json_t *params = tool_params(f);
    json_t *empty = params ? NULL : json_pack("{s:s, s:{}}", "type", "object", "properties");
    char args[32];
    snprintf(args, sizeof args, "t%d", i);
    sb_printf(&G->out, "call-%d ::= ", i);
    switch (G->fmt) {
    case TC_QWEN3CODER:
        sb_str(&G->out, "\"<tool_call>\\n<function=\" ");
        quote(&G->out, name);
        sb_printf(&G->out, " \">\\n\" %s \"</function>\\n</tool_call>\"\n", args);
        qwen_params(G, params, args, name);
        break;
    case TC_HERMES:
    case TC_LLAMA3:
        sb_str(&G->out, G->fmt == TC_HERMES ? "\"<tool_call>\\n{\\\"name\\\": \\\"\" " : "\"{\\\"name\\\": \\\"\" ");
        quote(&G->out, name);
        sb_printf(&G->out, " \"\\\", \\\"%s\\\": \" %s \"}%s\"\n", G->fmt == TC_HERMES ? "arguments" : "parameters", args,
               G->fmt == TC_HERMES ? "\\n</tool_call>" : "");
        break;
    case TC_DEEPSEEK:
        sb_str(&G->out, "\"" DS_CALL_BEGIN "\" ");
        quote(&G->out, name);
        sb_printf(&G->out, " \"" DS_SEP "\" %s \"" DS_CALL_END "\"\n", args);
        break;
    case TC_GEMMA4:
        sb_str(&G->out, "\"<|tool_call>call:\" ");
        quote(&G->out, name);
        sb_printf(&G->out, " %s \"<tool_call|>\"\n", args);
        break;
    default:   /* harmony */
        sb_str(&G->out, "\"<|channel|>commentary to=functions.\" ");
        quote(&G->out, name);
        sb_printf(&G->out, " \" <|constrain|>json<|message|>\" %s\n", args);
    }
    if (G->fmt == TC_GEMMA4 && !G->failed) {
        json_t *obj = g4_object(G, params ? params : empty, name);
        if (obj) schema_rules(G, obj, args, (G->flags & PK_SCHEMA_LENIENT) | PK_SCHEMA_GEMMA4, name, NULL);
        json_decref(obj);
    } else if (G->fmt != TC_QWEN3CODER && !G->failed) {
        int raw_ends = G->fmt == TC_DEEPSEEK || G->fmt == TC_HARMONY;
        schema_rules(G, params ? params : empty, args, (G->flags & PK_SCHEMA_LENIENT) | (raw_ends ? PK_SCHEMA_NO_LT : 0),
                     name, NULL);
    }
    json_decref(empty);
}

/* What comes before the calls: the reasoning the flags allow. */
static void write_reasoning(tcg *G) {
    int may = G->flags & PK_TOOLCALL_MAY_THINK, in = G->flags & PK_TOOLCALL_THINKING;
    if (G->fmt == TC_GEMMA4) {   /* its thought channel */
        static const char *const close[] = {"<channel|>", NULL};
        if (in) sb_str(&G->out, "pre ::= think-0 \"<channel|>\"\n");
        else if (may) sb_str(&G->out, "pre ::= (\"<|channel>thought\" think-0 \"<channel|>\")?\n");
        else sb_str(&G->out, "pre ::= \"\"\n");
        if (may || in) free_text(G, "think", close, 0);
        return;
    }
    if (G->fmt == TC_HARMONY) {
        static const char *const marks[] = {"<|", NULL};
        sb_str(&G->out, may || in ? "pre ::= (\"<|channel|>analysis<|message|>\" think-0 \"<|end|><|start|>assistant\")?\n"
                                  : "pre ::= \"\"\n");
        if (may || in) free_text(G, "think", marks, 0);
        return;
    }
    static const char *const close[] = {"</think>", NULL};
    if (in) sb_str(&G->out, "pre ::= think-0 \"</think>\" \"\\n\"{0,2}\n");
    else if (may) sb_str(&G->out, "pre ::= (\"<think>\" think-0 \"</think>\" \"\\n\"{0,2})?\n");
    else sb_str(&G->out, "pre ::= \"\"\n");
    if (may || in) free_text(G, "think", close, 0);
}

int pk_toolcall_grammar(const char *format, const char *tools_json, size_t len, const char *choice, int flags,
                        char **gbnf, pk_error *err) {
    if (!gbnf) return pk_errorf(err, PK_ERR_ARG, "pk_toolcall_grammar: no output pointer");
    *gbnf = NULL;
    int fmt = pk_toolcall_format(format);
    if (fmt < 0)
        return pk_errorf(err, PK_ERR_ARG, "unknown tool-call format '%.64s' (known: " TC_KNOWN ")",
                         format ? format : "(null)");
    if (!choice || !strcmp(choice, "auto") || !strcmp(choice, "none"))
        return pk_errorf(err, PK_ERR_ARG, "tool_choice: a grammar is made for \"required\" or a function's name, not %s%.64s%s",
                         choice ? "\"" : "", choice ? choice : "none given", choice ? "\"" : "");
    if (!tools_json) return pk_errorf(err, PK_ERR_ARG, "tools: none given");
    json_error_t je;
    json_t *tools = json_loadb(tools_json, len, 0, &je);
    if (!tools) return pk_errorf(err, PK_ERR_ARG, "tools: not JSON (%.120s at line %d, column %d)", je.text, je.line, je.column);
    tcg G = {.fmt = fmt, .flags = flags, .err = err};
    int required = !strcmp(choice, "required"), n_calls = 0;
    size_t i;
    json_t *t;
    if (!json_is_array(tools)) fail(&G, PK_ERR_ARG, "tools: a JSON array of tools is expected, got another value");
    json_array_foreach(tools, i, t) {
        json_t *f = tool_fn(t);
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!json_is_object(t)) { fail(&G, PK_ERR_ARG, "tools[%zu]: not an object", i); break; }
        if (!name) { fail(&G, PK_ERR_ARG, "tools[%zu]: a function without a name", i); break; }
        /* harmony's parser takes to=assistant for a message, deepseek's "function" for V3's form,
           gemma4's name ends at '{' */
        if (!name_writable(name) || (fmt == TC_HARMONY && !strcmp(name, "assistant")) ||
            (fmt == TC_DEEPSEEK && !strcmp(name, "function")) || (fmt == TC_GEMMA4 && strchr(name, '{'))) {
            fail(&G, PK_ERR_ARG, "tools[%zu]: function name '%.64s' cannot be written in a tool call "
                                 "(1 to 256 bytes, no spaces, quotes, backslashes or angle brackets)", i, name);
            break;
        }
        if (!required && strcmp(name, choice)) continue;
        write_call(&G, (int)i, f);
        n_calls++;
        if (G.failed) break;
    }
    if (!G.failed && !n_calls) {
        if (required) fail(&G, PK_ERR_ARG, "tool_choice is \"required\", but there are no tools");
        else fail(&G, PK_ERR_ARG, "tool_choice names function '%.64s', which is not among the tools", choice);
    }
    if (!G.failed) {
        sb_str(&G.out, "call ::=");
        for (i = 0; i < json_array_size(tools); i++) {
            const char *name = json_string_value(json_object_get(tool_fn(json_array_get(tools, i)), "name"));
            if (required || !strcmp(name, choice)) sb_printf(&G.out, "%s call-%zu", G.out.p[G.out.n - 1] == '=' ? "" : " |", i);
        }
        sb_put(&G.out, "\n", 1);
        write_reasoning(&G);
        if (fmt == TC_GEMMA4) {   /* the text of its strings (PK_SCHEMA_GEMMA4) */
            static const char *const marks[] = {"<|\"|>", "<|channel>", "<channel|>", NULL};
            free_text(&G, PK_SCHEMA_GEMMA4_TEXT, marks, 0);
        }
        int one = (flags & PK_TOOLCALL_ONE_CALL) || fmt == TC_HARMONY;
        const char *sep = fmt == TC_LLAMA3 ? "\"; \"" : fmt == TC_DEEPSEEK || fmt == TC_GEMMA4 ? "" : "\"\\n\"";
        if (fmt == TC_DEEPSEEK) sb_str(&G.out, "root ::= pre \"" DS_CALLS_BEGIN "\" call");
        else sb_str(&G.out, "root ::= pre call");
        if (!one) sb_printf(&G.out, " (%s call)*", sep);
        sb_str(&G.out, fmt == TC_DEEPSEEK ? " \"" DS_CALLS_END "\"\n" : "\n");
    }
    json_decref(tools);
    if (!G.failed && G.out.oom) fail(&G, PK_ERR_NOMEM, "out of memory");
    if (G.failed) { free(G.out.p); return err ? err->code : PK_ERR_ARG; }
    *gbnf = G.out.p;
    return PK_OK;
}
