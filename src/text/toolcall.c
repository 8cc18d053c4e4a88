/* text/toolcall.c - the tool calls in what a model generates: its answer
 * text split into content and calls (name, JSON arguments, id), streamed as
 * the text comes, in the formats the chat templates train models to write:
 *
 *   qwen3coder  <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n
 *               </function>\n</tool_call>   (Qwen3.5, Qwen3-Coder)
 *   hermes      <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
 *               (Qwen3, Qwen2.5, Hermes); the two are parsed alike: either
 *               body inside <tool_call>, or a bare <function=NAME>
 *   harmony     [<|start|>assistant]<|channel|>commentary to=functions.NAME
 *               <|constrain|>json<|message|>{...}<|call|>   (gpt-oss; the
 *               header may also start the message, " to=functions.NAME...",
 *               going on from a prompt that ends with <|start|>assistant)
 *   deepseek    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
 *               <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>  (DeepSeek-V3.1; also
 *               V3/R1's function<｜tool▁sep｜>NAME\n```json\n{...}\n```)
 *   llama3      {"name": NAME, "parameters": {...}} as the message (or after
 *               <|python_tag|>), several separated by ';' or white space
 *   gemma4      <|tool_call>call:NAME{key:VALUE,...}<tool_call|>   (Gemma-4: bare
 *               keys, strings between <|"|> markers, the rest as Python
 *               prints it - None, True - or JSON; turned into JSON as read)
 *
 * Tuned for: one assistant turn of up to a few hundred kilobytes fed a token
 * piece at a time, or whole; the work per byte is constant (held text is
 * scanned again only within the bounds below, and what waits undecided -
 * pend - stays under about 22 KiB: a candidate's window, held white space,
 * a chunk of the piece).
 *
 * How it streams. The text fed waits in pend until what it is is known:
 * content before a possible opening marker flows out at once; a marker cut
 * between pieces (`<tool_` + `call>`) is held until it is complete or
 * disproved. A call is committed - its start event sent - as soon as its
 * name is known (and, for llama3's bare JSON, that it has arguments); before
 * that the opening marker and what follows are held, at most CAND_MAX bytes,
 * and if they turn out not to be a call the marker is content and the text
 * after it is read again as content. Every decision looks only at bytes
 * already seen and is the one any later byte would leave standing, so the
 * result does not depend on where the text was cut into pieces; the
 * argument deltas concatenated are the final arguments by construction (the
 * arguments grow only by the deltas sent).
 *
 * Tolerance: text before, between and after calls is content (white space
 * before a call, between calls and after the last one at the end is
 * dropped); a call cut off at the end (max tokens) is
 * completed with what was read, and a marker cut off at the end is dropped;
 * arguments that are not JSON are passed as they are (raw formats, JSON
 * bodies); a call with no name is not a call (its text stays content).
 *
 * This file is the parser's machinery (events and output, candidates, what
 * follows a call, the API); the body parsers of each format are in
 * text/toolcall_formats.c, the state they share in text/toolcall_int.h.
 */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/strbuf.h"
#include "text/toolcall.h"
#include "text/toolcall_int.h"

static const char *const format_names[TC_COUNT] = {"qwen3coder", "hermes", "harmony", "deepseek", "llama3", "gemma4"};

int pk_toolcall_format(const char *name) {
    for (int i = 0; name && i < TC_COUNT; i++)
        if (!strcmp(name, format_names[i])) return i;
    return -1;
}

const char *pk_toolcall_format_name(int format) {
    return format >= 0 && format < TC_COUNT ? format_names[format] : NULL;
}

/* The markers each template renders calls with, most specific first: Qwen3.5
 * and Qwen3-Coder also write <tool_call>, Hermes-3 (Llama-3.1 based) no
 * <|python_tag|>. */
int pk_toolcall_format_of(const char *t, size_t n) {
    if (!t) return -1;
    if (memmem(t, n, G4_OPEN "call:", 17)) return TC_GEMMA4;
    if (memmem(t, n, "<function=", 10) && memmem(t, n, "<parameter=", 11)) return TC_QWEN3CODER;
    if (memmem(t, n, "<tool_call>", 11)) return TC_HERMES;
    if (memmem(t, n, DS_CALL_BEGIN, strlen(DS_CALL_BEGIN))) return TC_DEEPSEEK;
    if (memmem(t, n, "to=functions.", 13) || (memmem(t, n, "<|channel|>", 11) && memmem(t, n, "<|call|>", 8)))
        return TC_HARMONY;
    if (memmem(t, n, "<|python_tag|>", 14) ||
        (memmem(t, n, "<|start_header_id|>", 19) && memmem(t, n, "\"parameters\"", 12)))
        return TC_LLAMA3;
    return -1;
}

const char *pk_toolcall_detect(const char *tmpl, size_t len) {
    return pk_toolcall_format_name(pk_toolcall_format_of(tmpl, len));
}

/* ---- events and output ----------------------------------------------------------- */

static void push_event(pk_toolcall *tc, int kind, int index, size_t off, size_t len) {
    if (tc->n_ev) {   /* text right after text of the same place: one event */
        tc_event *l = &tc->ev[tc->n_ev - 1];
        if ((kind == PK_TOOLCALL_CONTENT || kind == PK_TOOLCALL_ARGS) && l->kind == kind && l->index == index &&
            l->off + l->len == off) {
            l->len += len;
            return;
        }
    }
    if (tc->n_ev == tc->cap_ev) {
        int cap = tc->cap_ev ? 2 * tc->cap_ev : 16;
        tc_event *e = realloc(tc->ev, (size_t)cap * sizeof *e);
        if (!e) { tc->oom = 1; return; }
        tc->ev = e;
        tc->cap_ev = cap;
    }
    tc->ev[tc->n_ev++] = (tc_event){.kind = kind, .index = index, .off = off, .len = len};
}

static void emit_content(pk_toolcall *tc, const char *s, size_t n) {
    if (!n) return;
    size_t off = tc->content.n;
    sb_put(&tc->content, s, n);
    if (tc->content.oom) { tc->oom = 1; return; }
    push_event(tc, PK_TOOLCALL_CONTENT, -1, off, n);
}

void tc_emit_args(pk_toolcall *tc, const char *s, size_t n) {
    if (!n || tc->cur < 0) return;
    tc_call *c = &tc->calls[tc->cur];
    size_t off = c->args.n;
    sb_put(&c->args, s, n);
    if (c->args.oom) { tc->oom = 1; return; }
    push_event(tc, PK_TOOLCALL_ARGS, tc->cur, off, n);
}

/* s[0..n) as the inside of a JSON string. */
void tc_emit_escaped(pk_toolcall *tc, const char *s, size_t n) {
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char u[8];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (!e && c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); e = u; }
        if (!e) continue;
        tc_emit_args(tc, s + r, i - r);
        tc_emit_args(tc, e, strlen(e));
        r = i + 1;
    }
    tc_emit_args(tc, s + r, n - r);
}

void tc_emit_json_string(pk_toolcall *tc, const char *s, size_t n) {
    tc_emit_args(tc, "\"", 1);
    tc_emit_escaped(tc, s, n);
    tc_emit_args(tc, "\"", 1);
}

/* Whether name[0..n) can name a function: 1 to NAME_MAX_LEN bytes, no
 * control characters. */
int tc_name_ok(const char *name, size_t n) {
    if (!n || n > NAME_MAX_LEN) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) return 0;
    return 1;
}

/* Start call number n_calls named name[0..n) (trimmed by the caller);
 * -1 when that is no name, there are MAX_CALLS already or no memory. */
int tc_call_start(pk_toolcall *tc, const char *name, size_t n) {
    if (!tc_name_ok(name, n) || tc->n_calls == MAX_CALLS) return -1;
    if (tc->n_calls == tc->cap_calls) {
        int cap = tc->cap_calls ? 2 * tc->cap_calls : 4;
        tc_call *c = realloc(tc->calls, (size_t)cap * sizeof *c);
        if (!c) { tc->oom = 1; return -1; }
        tc->calls = c;
        tc->cap_calls = cap;
    }
    int i = tc->n_calls++;
    tc_call *c = &tc->calls[i];
    memset(c, 0, sizeof *c);
    /* call_ and 24 letters or digits, from the seed and the index */
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    uint64_t h = pk_hash64(pk_hash64(0, &tc->seed, sizeof tc->seed), &i, sizeof i);
    memcpy(c->id, "call_", 5);
    for (int k = 0; k < 24; k++) {
        if (k % 8 == 0) h = pk_hash64(h, &k, sizeof k);
        c->id[5 + k] = abc[h % 62];
        h /= 62;
    }
    c->id[29] = 0;
    sb_put(&c->name, name, n);
    sb_str(&c->args, "");
    if (c->name.oom || c->args.oom) { tc->oom = 1; return -1; }
    tc->cur = i;
    push_event(tc, PK_TOOLCALL_START, i, 0, n);
    return 0;
}

/* End the current call; arguments that are still empty become {}. */
void tc_call_end(pk_toolcall *tc, int closed) {
    if (tc->cur < 0) return;
    if (!tc->calls[tc->cur].args.n) tc_emit_args(tc, "{}", 2);
    tc->calls[tc->cur].closed = closed;
    push_event(tc, PK_TOOLCALL_END, tc->cur, 0, 0);
    tc->cur = -1;
    tc->state = S_AFTER;
}

/* ---- candidates: an opening marker, held until it is known to open a call --------- */

void tc_begin_candidate(pk_toolcall *tc, size_t lead, size_t open, int state) {
    tc->lead = lead;
    tc->open = open;
    tc->pos = lead + open;
    tc->state = state;
}

/* Not a call: the held white space and the marker are content, the rest is
 * read again as content. Returns 1 (progress). */
int tc_fail_candidate(pk_toolcall *tc) {
    size_t k = tc->lead + tc->open;
    emit_content(tc, tc->pend.p, k);
    take(tc, k);
    tc->state = S_CONTENT;
    return 1;
}

static const char *const openers_tag[] = {"<tool_call>", "<function=", NULL};
static const char *const openers_harmony[] = {"<|start|>", "<|channel|>", NULL};
static const char *const openers_ds[] = {DS_CALLS_BEGIN, DS_CALL_BEGIN, NULL};
static const char *const openers_llama[] = {"<|python_tag|>", NULL};
static const char *const openers_g4[] = {G4_OPEN, NULL};
static const char *const *const openers[TC_COUNT] = {openers_tag, openers_tag, openers_harmony, openers_ds,
                                                      openers_llama, openers_g4};
static const int opener_state[TC_COUNT][2] = {
    {S_TAG, S_XML_NAME}, {S_TAG, S_XML_NAME}, {S_H_HEADER, S_H_HEADER}, {S_DS_BEGIN, S_DS_NAME}, {S_PYTAG, 0},
    {S_G4_HEAD, 0}};

static int st_content(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t n = tc->pend.n;
    if (!n) return 0;
    const char *const *ops = openers[tc->fmt];
    int w = 0;
    size_t at = find_first(p, n, ops, &w);
    if (at < n && tc->n_calls < MAX_CALLS) {
        size_t e = ws_start(p, at);
        emit_content(tc, p, e);
        take(tc, e);
        tc_begin_candidate(tc, at - e, strlen(ops[w]), opener_state[tc->fmt][w]);
        return 1;
    }
    size_t e = n;
    if (!final) e = utf8_cut(p, ws_start(p, n - tail_any(p, n, ops)));
    if (!e) return 0;
    emit_content(tc, p, e);
    take(tc, e);
    return 1;
}

/* llama3: '{' or <|python_tag|> after white space opens a call; anything else is content. */
static int st_llama_start(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, i = 0;
    while (i < n && is_ws((unsigned char)p[i])) i++;
    if (i > WS_HOLD_MAX) {
        emit_content(tc, p, i - WS_HOLD_MAX);
        take(tc, i - WS_HOLD_MAX);
        return 1;
    }
    if (i == n) {
        if (!final) return 0;
        tc->state = S_CONTENT;
        return 1;
    }
    if (p[i] == '{' && tc->n_calls < MAX_CALLS) {
        tc_begin_candidate(tc, i, 1, S_JSON);
        tc->js = (jscan){.st = J_KEY_OR_END, .tagged = 0};
        return 1;
    }
    int w;
    int m = match_start(p + i, n - i, openers_llama, &w);
    if (m == M_PART && !final) return 0;
    if (m == M_FULL && tc->n_calls < MAX_CALLS) {
        tc_begin_candidate(tc, i, strlen(openers_llama[0]), S_PYTAG);
        return 1;
    }
    tc->state = S_CONTENT;
    return 1;
}

static int st_pytag(pk_toolcall *tc, int final) {
    size_t i = cand_skip_ws(tc);
    if (i == cand_lim(tc)) return cand_out(tc, final) ? tc_fail_candidate(tc) : 0;
    if (tc->pend.p[i] != '{') return tc_fail_candidate(tc);
    tc->pos = i + 1;
    tc->js = (jscan){.st = J_KEY_OR_END, .tagged = 0};
    tc->state = S_JSON;
    return 1;
}

static int st_tag(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc), i = cand_skip_ws(tc);
    if (i == lim) return cand_out(tc, final) ? tc_fail_candidate(tc) : 0;
    if (p[i] == '{') {
        tc->pos = i + 1;
        tc->js = (jscan){.st = J_KEY_OR_END, .tagged = 1};
        tc->state = S_JSON;
        return 1;
    }
    static const char *const fn[] = {"<function=", NULL};
    int w;
    int m = match_start(p + i, lim - i, fn, &w);
    if (m == M_FULL) {
        tc->pos = i + strlen(fn[0]);
        tc->state = S_XML_NAME;
        return 1;
    }
    if (m == M_PART && !cand_out(tc, final)) return 0;
    return tc_fail_candidate(tc);
}

/* ---- after a call ----------------------------------------------------------------- */

static const char *const after_tag[] = {"</tool_call>", NULL};
static const char *const after_ds[] = {DS_CALL_END, DS_CALLS_END, NULL};
static const char *const after_llama[] = {";", NULL};
static const char *const after_g4[] = {G4_END, "<|tool_response>", NULL};
static const char *const *const after_marks[TC_COUNT] = {after_tag, after_tag, NULL, after_ds, after_llama, after_g4};

/* The call's (and the calls') closing markers go, with the white space
 * around them; white space before text stays with the text, before the end
 * of the message it goes (at most WS_HOLD_MAX of it is held). */
static int st_after(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, i = 0;
    while (i < n && is_ws((unsigned char)p[i])) i++;
    if (i >= WS_HOLD_MAX) { tc->state = S_CONTENT; return 1; }
    if (i == n) {
        if (final) take(tc, n);
        return final && n;
    }
    const char *const *marks = after_marks[tc->fmt];
    int w = 0, m = marks ? match_start(p + i, n - i, marks, &w) : M_NONE;
    if (m == M_FULL) { take(tc, i + strlen(marks[w])); return 1; }
    if (m == M_PART && !final) return 0;
    if (m == M_PART) { take(tc, n); return 1; }
    tc->state = tc->fmt == TC_LLAMA3 ? S_LLAMA_START : S_CONTENT;
    return 1;
}

/* One step over pend; 1 when something changed (call again). */
static int step(pk_toolcall *tc, int final) {
    switch (tc->state) {
    case S_CONTENT: return st_content(tc, final);
    case S_LLAMA_START: return st_llama_start(tc, final);
    case S_PYTAG: return st_pytag(tc, final);
    case S_TAG: return st_tag(tc, final);
    case S_XML_NAME: return tc_st_xml_name(tc, final);
    case S_XML_BODY: return tc_st_xml_body(tc, final);
    case S_XML_PNAME: return tc_st_xml_pname(tc, final);
    case S_XML_VALUE: return tc_st_xml_value(tc, final);
    case S_JSON: return tc_st_json(tc, final);
    case S_H_START: return tc_st_h_start(tc, final);
    case S_H_HEADER: return tc_st_h_header(tc, final);
    case S_DS_BEGIN: return tc_st_ds_begin(tc, final);
    case S_DS_NAME: return tc_st_ds_name(tc, final);
    case S_DS_R1NAME: return tc_st_ds_r1name(tc, final);
    case S_DS_FENCE: return tc_st_ds_fence(tc, final);
    case S_RAW: return tc_st_raw(tc, final);
    case S_G4_HEAD: return tc_st_g4_head(tc, final);
    case S_G4_BODY: return tc_st_g4_body(tc, final);
    default: return st_after(tc, final);
    }
}

/* ---- the API ------------------------------------------------------------------- */

int pk_toolcall_new(const char *format, uint64_t id_seed, pk_toolcall **out, pk_error *err) {
    if (!out) return pk_errorf(err, PK_ERR_ARG, "pk_toolcall_new: no output pointer");
    *out = NULL;
    int f = pk_toolcall_format(format);
    if (f < 0)
        return pk_errorf(err, PK_ERR_ARG, "unknown tool-call format '%.64s' (known: " TC_KNOWN ")",
                         format ? format : "(null)");
    pk_toolcall *tc = calloc(1, sizeof *tc);
    if (!tc) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    tc->fmt = f;
    tc->seed = id_seed;
    tc->cur = -1;
    tc->state = f == TC_LLAMA3 ? S_LLAMA_START : f == TC_HARMONY ? S_H_START : S_CONTENT;
    sb_str(&tc->pend, "");
    sb_str(&tc->content, "");
    if (tc->pend.oom || tc->content.oom) {
        pk_toolcall_free(tc);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    }
    *out = tc;
    return PK_OK;
}

int pk_toolcall_set_tools(pk_toolcall *tc, const char *tools_json, size_t len, pk_error *err) {
    if (!tc) return pk_errorf(err, PK_ERR_ARG, "pk_toolcall_set_tools: no parser");
    json_decref(tc->tools);
    tc->tools = NULL;
    if (!tools_json) return PK_OK;
    json_error_t e;
    json_t *t = json_loadb(tools_json, len, 0, &e);
    if (!t) return pk_errorf(err, PK_ERR_ARG, "tools: not JSON (%.120s at line %d, column %d)", e.text, e.line, e.column);
    if (!json_is_array(t)) {
        json_decref(t);
        return pk_errorf(err, PK_ERR_ARG, "tools: a JSON array of tools is expected, got another value");
    }
    tc->tools = t;
    return PK_OK;
}

void pk_toolcall_free(pk_toolcall *tc) {
    if (!tc) return;
    for (int i = 0; i < tc->n_calls; i++) {
        free(tc->calls[i].name.p);
        free(tc->calls[i].args.p);
    }
    free(tc->calls);
    free(tc->ev);
    free(tc->pend.p);
    free(tc->content.p);
    free(tc->vbuf.p);
    free(tc->nbuf.p);
    free(tc->abuf.p);
    json_decref(tc->tools);
    free(tc);
}

static int oom_any(const pk_toolcall *tc) {
    return tc->oom || tc->pend.oom || tc->vbuf.oom || tc->nbuf.oom || tc->abuf.oom;
}

int pk_toolcall_feed(pk_toolcall *tc, const char *text, size_t n, int final) {
    if (!tc || (!text && n) || tc->done) return PK_ERR_ARG;
    tc->n_ev = tc->ev_next = 0;
    /* in chunks, so that what waits in pend (moved down as it is taken) stays
     * small whatever the piece: the result does not depend on the cuts */
    size_t at = 0;
    do {
        size_t k = n - at < FEED_CHUNK ? n - at : FEED_CHUNK;
        sb_put(&tc->pend, text ? text + at : "", k);
        at += k;
        while (!oom_any(tc) && step(tc, final && at == n)) {}
    } while (at < n && !oom_any(tc));
    if (oom_any(tc)) {
        tc->done = 1;   /* what is decided stays readable; nothing more is taken */
        return PK_ERR_NOMEM;
    }
    if (final) {
        PK_ASSERT(tc->pend.n == 0 && tc->cur < 0);
        tc->done = 1;
    }
    return PK_OK;
}

int pk_toolcall_next(pk_toolcall *tc, pk_toolcall_event *ev) {
    if (!tc || !ev || tc->ev_next >= tc->n_ev) return 0;
    const tc_event *e = &tc->ev[tc->ev_next++];
    const tc_call *c = e->index >= 0 ? &tc->calls[e->index] : NULL;
    *ev = (pk_toolcall_event){
        .kind = e->kind,
        .index = e->index,
        .text = e->kind == PK_TOOLCALL_CONTENT ? tc->content.p + e->off
              : e->kind == PK_TOOLCALL_ARGS ? c->args.p + e->off
              : e->kind == PK_TOOLCALL_START ? c->name.p : "",
        .len = e->kind == PK_TOOLCALL_START ? c->name.n : e->len,
        .id = c ? c->id : NULL,
    };
    return 1;
}

const char *pk_toolcall_content(const pk_toolcall *tc, size_t *len) {
    if (len) *len = tc ? tc->content.n : 0;
    return tc ? tc->content.p : NULL;
}

int pk_toolcall_count(const pk_toolcall *tc) { return tc ? tc->n_calls : 0; }

int pk_toolcall_get(const pk_toolcall *tc, int i, pk_toolcall_call *out) {
    if (!tc || !out || i < 0 || i >= tc->n_calls) return PK_ERR_ARG;
    const tc_call *c = &tc->calls[i];
    *out = (pk_toolcall_call){
        .id = c->id, .name = c->name.p, .arguments = c->args.p, .arguments_len = c->args.n, .closed = c->closed,
    };
    return PK_OK;
}

/* name as a message quotes it: at most 64 bytes, control bytes as '?'. */
static void quote_name(char *dst, size_t cap, const char *name) {
    size_t i = 0;
    for (; name[i] && i + 1 < cap && i < 64; i++) dst[i] = (unsigned char)name[i] < 0x20 ? '?' : name[i];
    dst[i] = 0;
}

int pk_toolcall_check_choice(const pk_toolcall *tc, const char *choice, pk_error *err) {
    if (!tc) return pk_errorf(err, PK_ERR_ARG, "pk_toolcall_check_choice: no parser");
    if (!choice || !strcmp(choice, "auto")) return PK_OK;
    char got[72] = "";
    if (tc->n_calls) quote_name(got, sizeof got, tc->calls[0].name.p);
    if (!strcmp(choice, "none")) {
        if (!tc->n_calls) return PK_OK;
        return pk_errorf(err, PK_ERR_FORMAT, "tool_choice is \"none\", but the model called '%s'", got);
    }
    if (!tc->n_calls)
        return pk_errorf(err, PK_ERR_FORMAT, "tool_choice is \"%s\", but the model called no tool",
                         !strcmp(choice, "required") ? "required" : "a named function");
    if (!strcmp(choice, "required")) return PK_OK;
    for (int i = 0; i < tc->n_calls; i++) {
        if (strcmp(tc->calls[i].name.p, choice)) {
            char want[72];
            quote_name(want, sizeof want, choice);
            quote_name(got, sizeof got, tc->calls[i].name.p);
            return pk_errorf(err, PK_ERR_FORMAT, "tool_choice names function '%s', but the model called '%s'", want, got);
        }
    }
    return PK_OK;
}
