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
 */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/strbuf.h"
#include "text/toolcall.h"

#define NAME_MAX_LEN 256     /* a longer function or parameter name is not one */
#define CAND_MAX 16384       /* a call must be known within this many bytes of its opening marker */
#define WS_HOLD_MAX 1024     /* white space before a possible call (or end) held back, and dropped */
#define HEADER_MAX 512       /* a harmony header longer than this is not a call's */
#define MAX_CALLS 1024       /* calls per message; the opener of another is content */
#define FEED_CHUNK 4096      /* a piece is parsed in chunks of this many bytes */

static const char *const format_names[TC_COUNT] = {"qwen3coder", "hermes", "harmony", "deepseek", "llama3", "gemma4"};

int pk_toolcall_format(const char *name) {
    for (int i = 0; name && i < TC_COUNT; i++)
        if (!strcmp(name, format_names[i])) return i;
    return -1;
}

const char *pk_toolcall_format_name(int format) {
    return format >= 0 && format < TC_COUNT ? format_names[format] : NULL;
}

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define DS_SEP "<｜tool▁sep｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"

#define G4_OPEN "<|tool_call>"
#define G4_END "<tool_call|>"
#define G4_QUOTE "<|\"|>"

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

/* ---- the parser's state -------------------------------------------------------- */

enum {
    S_CONTENT,      /* answer text, watching for an opening marker */
    S_LLAMA_START,  /* llama3: at the message start or after a call, where '{' opens one */
    S_PYTAG,        /* llama3: after <|python_tag|>, before '{' */
    S_TAG,          /* after <tool_call>: an XML or a JSON body */
    S_XML_NAME,     /* after <function=: the name up to '>' */
    S_XML_BODY,     /* between a function's parameters */
    S_XML_PNAME,    /* after <parameter=: the name up to '>' */
    S_XML_VALUE,    /* a parameter's value */
    S_JSON,         /* a JSON object {"name": ..., "arguments": ...} */
    S_H_START,      /* harmony: at the message start, where the header may go on from the prompt's */
    S_H_HEADER,     /* harmony: a message header up to <|message|> */
    S_DS_BEGIN,     /* deepseek: after the calls' begin marker */
    S_DS_NAME,      /* deepseek: after a call's begin marker, the name up to the separator */
    S_DS_R1NAME,    /* deepseek V3/R1: the name line after function<｜tool▁sep｜> */
    S_DS_FENCE,     /* deepseek V3/R1: the ```json line */
    S_RAW,          /* arguments as written, up to an end marker */
    S_G4_HEAD,      /* gemma4: after <|tool_call>, call:NAME up to '{' */
    S_G4_BODY,      /* gemma4: the arguments, turned into JSON */
    S_AFTER,        /* after a call: its closing markers, then content */
};

/* An XML parameter's value: a JSON value other than a string (number,
 * true/false, null, object, array) when the whole of it is one and the
 * parameter's schema allows it; else a string. Streamed as a string as soon
 * as no other reading is possible. */
enum { A_NUM = 1, A_BOOL = 2, A_BOOL_CI = 4, A_NULL = 8, A_OBJ = 16, A_ANY = A_NUM | A_BOOL | A_NULL | A_OBJ };
enum { N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };   /* JSON number prefixes */
typedef struct xval {
    int string;       /* decided: a string, streamed */
    int allow;        /* A_* the schema allows */
    int nl_checked;   /* the newline after <parameter=NAME> has been dropped (or was not there) */
    int kind;         /* 0: nothing but white space yet; 'n' number, 'l' literal, 'o' object/array */
    const char *lit;  /* the literal being matched, */
    int li, lit_ci;   /* how far, case-insensitively */
    int nst;          /* N_*: the number's DFA state */
    int trail;        /* in white space after the value */
} xval;

/* The JSON object scanner (hermes bodies, llama3). */
enum { J_KEY_OR_END, J_KEY, J_COLON, J_VAL_START, J_VAL, J_NEXT };
enum { K_OTHER, K_NAME, K_ARGS };
typedef struct jscan {
    int st, key;
    int depth, in_str, esc, vstr, scalar;
    int have_name, have_args, args_done;
    int tagged;       /* inside <tool_call>: </tool_call> outside a string ends it */
    int streaming;    /* the arguments' bytes go out as they are read, from ef */
    size_t ef;
    char kbuf[12];
    int klen;
} jscan;

/* The gemma4 argument scanner: where it is in the nested objects and
 * arrays (a key, a value, between members) and what each one open has
 * written. Keys and bare values are gathered in nbuf / vbuf, strings
 * streamed. */
#define G4_DEPTH 128
enum { G_KEY, G_KEY_BARE, G_KEY_STR, G_COLON, G_VALUE, G_STR, G_SCALAR, G_NEXT };
typedef struct g4scan {
    int mode, depth;
    char kind[G4_DEPTH];              /* 'o' object, 'a' array, per open one */
    unsigned char more[G4_DEPTH];     /* it has a member already (a comma goes first) */
    int key_quoted;                   /* the key was written between <|"|> markers */
    int quote, esc;                   /* G_SCALAR: inside a '...' or "..." value */
} g4scan;

typedef struct tc_call {
    char id[32];
    sbuf name, args;
    int closed;
} tc_call;

typedef struct tc_event {
    int kind, index;
    size_t off, len;
} tc_event;

struct pk_toolcall {
    int fmt, state, done, oom;
    uint64_t seed;
    sbuf pend, content;
    sbuf vbuf, nbuf, abuf;     /* an XML value; a JSON body's name and arguments (gemma4: a bare value, a key) */
    tc_call *calls;
    int n_calls, cap_calls, cur;
    tc_event *ev;
    int n_ev, cap_ev, ev_next;
    json_t *tools;
    size_t lead, open, pos;    /* candidate: held white space, its marker, scan position */
    int n_params;
    int r1;                    /* deepseek V3/R1 form */
    int raw_lead;              /* S_RAW: still at the arguments' leading white space */
    xval xv;
    jscan js;
    g4scan g4;
};

static int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* k less an incomplete UTF-8 sequence at the end of s[0..k). */
static size_t utf8_cut(const char *s, size_t k) {
    for (size_t i = 1; i <= 3 && i <= k; i++) {
        unsigned char c = (unsigned char)s[k - i];
        if ((c & 0xC0) == 0x80) continue;
        if (c < 0xC0) return k;
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        return need > i ? k - i : k;
    }
    return k;
}

/* Where the white space at the end of s[0..k) starts (at most WS_HOLD_MAX of it). */
static size_t ws_start(const char *s, size_t k) {
    size_t e = k;
    while (e > 0 && is_ws((unsigned char)s[e - 1]) && k - e < WS_HOLD_MAX) e--;
    return e;
}

/* Earliest of the markers ms (NULL-terminated) in s[0..n): its offset (n if
 * none) and index in *w. */
static size_t find_first(const char *s, size_t n, const char *const *ms, int *w) {
    size_t best = n;
    for (int k = 0; ms[k]; k++) {
        size_t at = find_at(s, best, ms[k]);
        if (at < best) { best = at; *w = k; }
    }
    return best;
}

/* The longest end of s[0..n) that begins one of ms. */
static size_t tail_any(const char *s, size_t n, const char *const *ms) {
    size_t t = 0;
    for (int k = 0; ms[k]; k++) {
        size_t tk = partial_tail(s, n, ms[k]);
        if (tk > t) t = tk;
    }
    return t;
}

/* Whether s[0..n) starts with one of ms (M_FULL, index in *w), is the start
 * of one (M_PART; also when n is 0), or neither. */
enum { M_NONE, M_PART, M_FULL };
static int match_start(const char *s, size_t n, const char *const *ms, int *w) {
    int part = 0;
    for (int k = 0; ms[k]; k++) {
        size_t l = strlen(ms[k]);
        if (n >= l && !memcmp(s, ms[k], l)) { *w = k; return M_FULL; }
        if (n < l && !memcmp(s, ms[k], n)) part = 1;
    }
    return part ? M_PART : M_NONE;
}

static void take(pk_toolcall *tc, size_t k) { sb_take(&tc->pend, k); }

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

static void emit_args(pk_toolcall *tc, const char *s, size_t n) {
    if (!n || tc->cur < 0) return;
    tc_call *c = &tc->calls[tc->cur];
    size_t off = c->args.n;
    sb_put(&c->args, s, n);
    if (c->args.oom) { tc->oom = 1; return; }
    push_event(tc, PK_TOOLCALL_ARGS, tc->cur, off, n);
}

/* s[0..n) as the inside of a JSON string. */
static void emit_escaped(pk_toolcall *tc, const char *s, size_t n) {
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char u[8];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (!e && c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); e = u; }
        if (!e) continue;
        emit_args(tc, s + r, i - r);
        emit_args(tc, e, strlen(e));
        r = i + 1;
    }
    emit_args(tc, s + r, n - r);
}

static void emit_json_string(pk_toolcall *tc, const char *s, size_t n) {
    emit_args(tc, "\"", 1);
    emit_escaped(tc, s, n);
    emit_args(tc, "\"", 1);
}

/* Whether name[0..n) can name a function: 1 to NAME_MAX_LEN bytes, no
 * control characters. */
static int name_ok(const char *name, size_t n) {
    if (!n || n > NAME_MAX_LEN) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) return 0;
    return 1;
}

/* Start call number n_calls named name[0..n) (trimmed by the caller);
 * -1 when that is no name, there are MAX_CALLS already or no memory. */
static int call_start(pk_toolcall *tc, const char *name, size_t n) {
    if (!name_ok(name, n) || tc->n_calls == MAX_CALLS) return -1;
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
static void call_end(pk_toolcall *tc, int closed) {
    if (tc->cur < 0) return;
    if (!tc->calls[tc->cur].args.n) emit_args(tc, "{}", 2);
    tc->calls[tc->cur].closed = closed;
    push_event(tc, PK_TOOLCALL_END, tc->cur, 0, 0);
    tc->cur = -1;
    tc->state = S_AFTER;
}

/* ---- candidates: an opening marker, held until it is known to open a call --------- */

static void begin_candidate(pk_toolcall *tc, size_t lead, size_t open, int state) {
    tc->lead = lead;
    tc->open = open;
    tc->pos = lead + open;
    tc->state = state;
}

/* Not a call: the held white space and the marker are content, the rest is
 * read again as content. Returns 1 (progress). */
static int fail_candidate(pk_toolcall *tc) {
    size_t k = tc->lead + tc->open;
    emit_content(tc, tc->pend.p, k);
    take(tc, k);
    tc->state = S_CONTENT;
    return 1;
}

/* The end of the candidate's window: min(n, CAND_MAX). A scan that reaches
 * it without knowing waits, unless the window is full or the text ended. */
static size_t cand_lim(const pk_toolcall *tc) { return tc->pend.n < CAND_MAX ? tc->pend.n : CAND_MAX; }
static int cand_out(const pk_toolcall *tc, int final) { return final || tc->pend.n >= CAND_MAX; }

/* A name in s[0..n) up to the first of stop (not found: -1 if more may
 * come, -2 if s cannot hold one: a newline or '<' first, or too long). */
static long name_until(const char *s, size_t n, char stop) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == stop) return (long)i;
        if (s[i] == '\n' || s[i] == '<' || i >= NAME_MAX_LEN) return -2;
    }
    return n > NAME_MAX_LEN ? -2 : -1;
}

/* s[0..*n) trimmed of white space. */
static const char *trim(const char *s, size_t *n) {
    while (*n && is_ws((unsigned char)*s)) { s++; (*n)--; }
    while (*n && is_ws((unsigned char)s[*n - 1])) (*n)--;
    return s;
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
        begin_candidate(tc, at - e, strlen(ops[w]), opener_state[tc->fmt][w]);
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
        begin_candidate(tc, i, 1, S_JSON);
        tc->js = (jscan){.st = J_KEY_OR_END, .tagged = 0};
        return 1;
    }
    int w;
    int m = match_start(p + i, n - i, openers_llama, &w);
    if (m == M_PART && !final) return 0;
    if (m == M_FULL && tc->n_calls < MAX_CALLS) {
        begin_candidate(tc, i, strlen(openers_llama[0]), S_PYTAG);
        return 1;
    }
    tc->state = S_CONTENT;
    return 1;
}

/* The candidate's scan position moved over white space (within its window). */
static size_t cand_skip_ws(pk_toolcall *tc) {
    size_t lim = cand_lim(tc), i = tc->pos;
    while (i < lim && is_ws((unsigned char)tc->pend.p[i])) i++;
    return tc->pos = i;
}

static int st_pytag(pk_toolcall *tc, int final) {
    size_t i = cand_skip_ws(tc);
    if (i == cand_lim(tc)) return cand_out(tc, final) ? fail_candidate(tc) : 0;
    if (tc->pend.p[i] != '{') return fail_candidate(tc);
    tc->pos = i + 1;
    tc->js = (jscan){.st = J_KEY_OR_END, .tagged = 0};
    tc->state = S_JSON;
    return 1;
}

static int st_tag(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc), i = cand_skip_ws(tc);
    if (i == lim) return cand_out(tc, final) ? fail_candidate(tc) : 0;
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
    return fail_candidate(tc);
}

/* ---- qwen3coder: XML bodies ---------------------------------------------------- */

/* What the schema of tool fname (set by pk_toolcall_set_tools) allows for
 * its parameter pname: A_* bits. Strings may always be; "null" is read as
 * null whatever the type (as Qwen's own parser does). */
static int type_allows(const char *t) {
    if (!strcmp(t, "string")) return A_NULL;
    if (!strcmp(t, "integer") || !strcmp(t, "number")) return A_NUM | A_NULL;
    if (!strcmp(t, "boolean")) return A_BOOL | A_BOOL_CI | A_NULL;
    if (!strcmp(t, "object") || !strcmp(t, "array")) return A_OBJ | A_NULL;
    if (!strcmp(t, "null")) return A_NULL;
    return A_ANY;
}

static int schema_allows(const pk_toolcall *tc, const char *fname, const char *pname) {
    size_t i;
    json_t *t;
    json_array_foreach(tc->tools, i, t) {
        json_t *f = json_object_get(t, "function");
        if (!json_is_object(f)) f = t;
        const char *name = json_string_value(json_object_get(f, "name"));
        if (!name || strcmp(name, fname)) continue;
        json_t *params = json_object_get(f, "parameters");
        if (!params) params = json_object_get(f, "input_schema");
        json_t *type = json_object_get(json_object_get(json_object_get(params, "properties"), pname), "type");
        if (json_is_string(type)) return type_allows(json_string_value(type));
        if (!json_is_array(type) || !json_array_size(type)) return A_ANY;
        int a = 0;
        size_t k;
        json_t *e;
        json_array_foreach(type, k, e) a |= json_is_string(e) ? type_allows(json_string_value(e)) : A_ANY;
        return a;
    }
    return A_ANY;
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Whether the value read so far, then c, may still be a JSON value other
 * than a string (of a kind x->allow allows). */
static int xv_viable(xval *x, unsigned char c) {
    if (x->trail) return is_ws(c);
    switch (x->kind) {
    case 0:
        if (is_ws(c)) return 1;
        if ((c == '{' || c == '[') && (x->allow & A_OBJ)) { x->kind = 'o'; return 1; }
        if ((c == '-' || (c >= '0' && c <= '9')) && (x->allow & A_NUM)) {
            x->kind = 'n';
            x->nst = c == '-' ? N_MINUS : c == '0' ? N_ZERO : N_INT;
            return 1;
        }
        x->lit = (x->allow & A_BOOL) && lower(c) == 't' ? "true" : (x->allow & A_BOOL) && lower(c) == 'f' ? "false"
               : (x->allow & A_NULL) && lower(c) == 'n' ? "null" : NULL;
        if (!x->lit) return 0;
        x->lit_ci = x->lit[0] == 'n' || (x->allow & A_BOOL_CI);
        if (!x->lit_ci && c != (unsigned char)x->lit[0]) return 0;
        x->kind = 'l';
        x->li = 1;
        return 1;
    case 'l':
        if (!x->lit[x->li]) return is_ws(c) ? (x->trail = 1) : 0;
        if ((x->lit_ci ? lower(c) : c) != x->lit[x->li]) return 0;
        x->li++;
        return 1;
    case 'n': {
        int d = c >= '0' && c <= '9', s = x->nst;
        int accepting = s == N_ZERO || s == N_INT || s == N_FRAC || s == N_EXP;
        if (is_ws(c)) return accepting ? (x->trail = 1) : 0;
        if (d) {
            if (s == N_ZERO) return 0;   /* 01 */
            x->nst = s == N_MINUS ? (c == '0' ? N_ZERO : N_INT) : s == N_DOT ? N_FRAC
                   : s == N_E || s == N_ESIGN ? N_EXP : s;
            return 1;
        }
        if (c == '.' && (s == N_ZERO || s == N_INT)) { x->nst = N_DOT; return 1; }
        if ((c == 'e' || c == 'E') && (s == N_ZERO || s == N_INT || s == N_FRAC)) { x->nst = N_E; return 1; }
        if ((c == '+' || c == '-') && s == N_E) { x->nst = N_ESIGN; return 1; }
        return 0;
    }
    default:   /* 'o': decided at the end */
        return 1;
    }
}

/* The value's next n bytes. */
static void xv_feed(pk_toolcall *tc, const char *s, size_t n) {
    xval *x = &tc->xv;
    size_t i = 0;
    for (; i < n && !x->string; i++) {
        sb_put(&tc->vbuf, s + i, 1);
        if (xv_viable(x, (unsigned char)s[i])) continue;
        x->string = 1;
        emit_args(tc, "\"", 1);
        emit_escaped(tc, tc->vbuf.p, tc->vbuf.n);
        tc->vbuf.n = 0;
    }
    if (x->string) emit_escaped(tc, s + i, n - i);
}

/* The value ends: close its string, or write what it turned out to be. */
static void xv_finish(pk_toolcall *tc) {
    xval *x = &tc->xv;
    if (x->string) { emit_args(tc, "\"", 1); return; }
    size_t tn = tc->vbuf.n;
    const char *t = trim(tc->vbuf.p ? tc->vbuf.p : "", &tn);
    int s = x->nst;
    if (tn && x->kind == 'l' && !x->lit[x->li]) { emit_args(tc, x->lit, strlen(x->lit)); return; }
    if (tn && x->kind == 'n' && (s == N_ZERO || s == N_INT || s == N_FRAC || s == N_EXP)) {
        emit_args(tc, t, tn);
        return;
    }
    if (tn && x->kind == 'o') {
        json_error_t e;
        json_t *j = json_loadb(t, tn, JSON_DECODE_ANY, &e);
        json_decref(j);
        if (j) { emit_args(tc, t, tn); return; }
    }
    emit_json_string(tc, tc->vbuf.p ? tc->vbuf.p : "", tc->vbuf.n);
}

static void xml_close(pk_toolcall *tc, int closed) {
    emit_args(tc, "}", 1);
    call_end(tc, closed);
}

static int st_xml_name(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc);
    long e = name_until(p + tc->pos, lim - tc->pos, '>');
    if (e == -1 && !cand_out(tc, final)) return 0;
    if (e < 0) return fail_candidate(tc);
    size_t nl = (size_t)e;
    const char *name = trim(p + tc->pos, &nl);
    if (!nl || call_start(tc, name, nl)) return fail_candidate(tc);
    take(tc, tc->pos + (size_t)e + 1);
    emit_args(tc, "{", 1);
    tc->n_params = 0;
    tc->state = S_XML_BODY;
    return 1;
}

static const char *const xml_body_tags[] = {"<parameter=", "</function>", "</tool_call>", NULL};

static int st_xml_body(pk_toolcall *tc, int final) {
    size_t i = 0;
    while (i < tc->pend.n && is_ws((unsigned char)tc->pend.p[i])) i++;
    take(tc, i);
    int w = 0;
    int m = match_start(tc->pend.p, tc->pend.n, xml_body_tags, &w);
    if (m == M_PART && !final) return i > 0;
    if (m == M_FULL) {
        take(tc, strlen(xml_body_tags[w]));
        if (w == 0) tc->state = S_XML_PNAME;
        else xml_close(tc, 1);
        return 1;
    }
    if (m == M_PART) take(tc, tc->pend.n);   /* a tag cut off at the end */
    xml_close(tc, 0);                        /* other text: the call is over */
    return 1;
}

static int st_xml_pname(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    long e = name_until(p, tc->pend.n, '>');
    if (e == -1 && !final) return 0;
    size_t nl = e >= 0 ? (size_t)e : 0;
    const char *name = trim(p, &nl);
    if (!nl) {   /* no name: the call is over; the tag (or what is cut off at the end) is dropped */
        take(tc, e >= 0 ? (size_t)e + 1 : e == -1 ? tc->pend.n : 0);
        xml_close(tc, 0);
        return 1;
    }
    char pname[NAME_MAX_LEN + 1];
    memcpy(pname, name, nl);
    pname[nl] = 0;
    if (tc->n_params++) emit_args(tc, ", ", 2);
    emit_json_string(tc, name, nl);
    emit_args(tc, ": ", 2);
    tc->xv = (xval){.allow = tc->tools ? schema_allows(tc, tc->calls[tc->cur].name.p, pname) : A_ANY};
    tc->vbuf.n = 0;
    take(tc, (size_t)e + 1);
    tc->state = S_XML_VALUE;
    return 1;
}

static const char *const xml_value_ends[] = {"</parameter>", "</function>", "</tool_call>", NULL};

/* A value runs to </parameter> (or the end of its function or call), less
 * one newline on each side. */
static int st_xml_value(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t n = tc->pend.n;
    if (!tc->xv.nl_checked) {
        if (!n && !final) return 0;
        if (n && p[0] == '\n') take(tc, 1);
        tc->xv.nl_checked = 1;
        return 1;
    }
    int w = 0;
    size_t at = find_first(p, n, xml_value_ends, &w);
    if (at == n && !final) {   /* stream what cannot be the end */
        size_t k = n - tail_any(p, n, xml_value_ends);
        if (k && p[k - 1] == '\n') k--;
        k = utf8_cut(p, k);
        if (!k) return 0;
        xv_feed(tc, p, k);
        take(tc, k);
        return 1;
    }
    size_t e = at < n ? at : n - tail_any(p, n, xml_value_ends);
    if (e && p[e - 1] == '\n') e--;
    xv_feed(tc, p, e);
    xv_finish(tc);
    if (at < n && w == 0) {
        take(tc, at + strlen(xml_value_ends[0]));
        tc->state = S_XML_BODY;
    } else {
        take(tc, at < n ? at + strlen(xml_value_ends[w]) : n);
        xml_close(tc, at < n);
    }
    return 1;
}

/* ---- hermes, llama3: JSON bodies ----------------------------------------------- */

enum { STOP_DATA, STOP_OBJ, STOP_TAG, STOP_TAG_PART, STOP_ERR, STOP_FAIL };

/* Commit the call the JSON body names (the arguments read before the name,
 * if any, go out now). -1 if it cannot be started. */
static int js_commit(pk_toolcall *tc) {
    if (call_start(tc, tc->nbuf.p, tc->nbuf.n)) return -1;
    if (tc->js.args_done) emit_args(tc, tc->abuf.p, tc->abuf.n);
    return 0;
}

/* The JSON string literal in b, decoded into b; 0 if it is not one. */
static int decode_string(sbuf *b) {
    json_error_t e;
    json_t *j = json_loadb(b->p ? b->p : "", b->n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    int ok = json_is_string(j);
    if (ok) {
        size_t n = json_string_length(j);
        b->n = 0;
        sb_put(b, json_string_value(j), n);
    }
    json_decref(j);
    return ok;
}

/* A value ends (the byte before pend[end] is its last). */
static void js_value_end(pk_toolcall *tc, size_t end) {
    jscan *j = &tc->js;
    if (j->key == K_NAME) {
        if (decode_string(&tc->nbuf) && name_ok(tc->nbuf.p, tc->nbuf.n)) j->have_name = 1;
    } else if (j->key == K_ARGS) {
        j->args_done = 1;
        if (j->streaming) {
            emit_args(tc, tc->pend.p + j->ef, end - j->ef);
            j->streaming = 0;
        } else if (j->vstr) {
            decode_string(&tc->abuf);   /* arguments sent as a JSON string: its text; else as written */
            if (tc->cur >= 0) emit_args(tc, tc->abuf.p, tc->abuf.n);
        }
    }
    j->key = K_OTHER;
    j->st = J_NEXT;
    if (tc->cur < 0 && j->have_name && j->args_done) js_commit(tc);   /* else tried again at the end */
}

/* One byte of a JSON body at pend[i]: 0 to go on, else STOP_*. */
static int js_byte(pk_toolcall *tc, size_t i) {
    jscan *j = &tc->js;
    unsigned char c = (unsigned char)tc->pend.p[i];
    switch (j->st) {
    case J_KEY_OR_END:
        if (is_ws(c) || c == ',') return 0;
        if (c == '}') return STOP_OBJ;
        if (c != '"') return STOP_ERR;
        j->st = J_KEY;
        j->klen = 0;
        j->esc = 0;
        return 0;
    case J_KEY:
        if (!j->esc && c == '"') { j->st = J_COLON; return 0; }
        j->esc = !j->esc && c == '\\';
        if (j->klen < (int)sizeof j->kbuf) j->kbuf[j->klen] = (char)c;
        j->klen++;
        return 0;
    case J_COLON:
        if (is_ws(c)) return 0;
        if (c != ':') return STOP_ERR;
        j->st = J_VAL_START;
        return 0;
    case J_VAL_START: {
        if (is_ws(c)) return 0;
        if (c == ',' || c == '}' || c == ']' || c == ':') return STOP_ERR;
#define KEY_IS(s) (j->klen == (int)strlen(s) && !memcmp(j->kbuf, s, strlen(s)))
        j->key = KEY_IS("name") && !j->have_name && c == '"' ? K_NAME
               : (KEY_IS("arguments") || KEY_IS("parameters")) && !j->have_args ? K_ARGS : K_OTHER;
#undef KEY_IS
        j->vstr = c == '"';
        j->in_str = j->vstr;
        j->esc = 0;
        j->depth = c == '{' || c == '[';
        j->scalar = !j->vstr && !j->depth;
        j->st = J_VAL;
        if (j->key == K_NAME) tc->nbuf.n = 0;
        if (j->key == K_ARGS) {
            j->have_args = 1;
            tc->abuf.n = 0;
            if (tc->cur < 0 && j->have_name && !j->vstr && js_commit(tc)) return STOP_FAIL;
            if (tc->cur >= 0 && !j->vstr) { j->streaming = 1; j->ef = i; }
        }
        if (j->key == K_NAME) sb_put(&tc->nbuf, (const char *)&c, 1);
        else if (j->key == K_ARGS && !j->streaming) sb_put(&tc->abuf, (const char *)&c, 1);
        return 0;
    }
    case J_VAL:
        if (j->scalar && (is_ws(c) || c == ',' || c == '}' || c == ']')) {
            js_value_end(tc, i);
            return js_byte(tc, i);   /* the byte is the object's, read again in J_NEXT */
        }
        if (j->key == K_NAME) sb_put(&tc->nbuf, (const char *)&c, 1);
        else if (j->key == K_ARGS && !j->streaming) sb_put(&tc->abuf, (const char *)&c, 1);
        if (j->in_str) {
            if (j->esc) j->esc = 0;
            else if (c == '\\') j->esc = 1;
            else if (c == '"') {
                j->in_str = 0;
                if (!j->depth) js_value_end(tc, i + 1);
            }
        } else if (!j->scalar) {
            if (c == '"') j->in_str = 1;
            else if (c == '{' || c == '[') j->depth++;
            else if ((c == '}' || c == ']') && !--j->depth) js_value_end(tc, i + 1);
        }
        return 0;
    default:   /* J_NEXT */
        if (is_ws(c)) return 0;
        if (c == ',') { j->st = J_KEY_OR_END; return 0; }
        if (c == '}') return STOP_OBJ;
        if (c != '"') return STOP_ERR;
        j->st = J_KEY;   /* a missing comma */
        j->klen = 0;
        j->esc = 0;
        return 0;
    }
}

/* The body ends at pend[upto] (its bytes before are read), and pend[0..drop)
 * goes: the call is completed with what was read, or, not committed, made
 * from what was read when it has a name (and, untagged, arguments). */
static int js_close(pk_toolcall *tc, size_t upto, size_t drop, int closed) {
    jscan *j = &tc->js;
    if (tc->cur < 0 && (!j->have_name || (!j->tagged && !j->have_args) || js_commit(tc))) return fail_candidate(tc);
    if (j->streaming) {
        emit_args(tc, tc->pend.p + j->ef, upto - j->ef);
        j->streaming = 0;
    } else if (j->key == K_ARGS && j->st == J_VAL) {
        emit_args(tc, tc->abuf.p, tc->abuf.n);   /* a string cut short: as written */
    }
    take(tc, drop);
    call_end(tc, closed);
    return 1;
}

static int st_json(pk_toolcall *tc, int final) {
    jscan *j = &tc->js;
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, start = tc->pos, i = start;
    size_t lim = tc->cur >= 0 ? n : cand_lim(tc);
    int stop = STOP_DATA;
    static const char *const close_tag[] = {"</tool_call>", NULL};
    for (; i < lim; i++) {
        if (j->tagged && !j->in_str && p[i] == '<') {
            int w;
            int m = match_start(p + i, lim - i, close_tag, &w);
            if (m == M_FULL) { stop = STOP_TAG; break; }
            if (m == M_PART) { stop = STOP_TAG_PART; break; }
        }
        stop = js_byte(tc, i);
        if (stop) break;
    }
    switch (stop) {
    case STOP_FAIL: return fail_candidate(tc);
    case STOP_OBJ: return js_close(tc, i, i + 1, 1);
    case STOP_TAG: return js_close(tc, i, i + strlen(close_tag[0]), 1);
    case STOP_ERR: return tc->cur >= 0 ? js_close(tc, i, i, 0) : fail_candidate(tc);
    case STOP_TAG_PART:
        if (tc->cur < 0 && n >= CAND_MAX) return fail_candidate(tc);   /* the window is full, no call */
        if (final) return js_close(tc, i, n, 0);                       /* the tag cut off at the end */
        break;
    default:
        if (tc->cur < 0 && i == lim && n >= CAND_MAX) return fail_candidate(tc);
        if (final && i == n) return js_close(tc, n, n, 0);
    }
    /* waiting for more: a committed call's arguments so far go out, what is read goes */
    tc->pos = i;
    if (tc->cur < 0) return i > start;
    size_t drop = i;
    if (j->streaming) {
        size_t k = j->ef + utf8_cut(p + j->ef, i - j->ef);
        emit_args(tc, p + j->ef, k - j->ef);
        drop = k;
        j->ef = 0;
    }
    take(tc, drop);
    tc->pos = i - drop;
    return i > start || drop > 0;
}

/* ---- harmony, deepseek: headers and raw arguments ---------------------------------- */

static int st_h_header(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, hmax = tc->pos + HEADER_MAX + 11;
    size_t lim = n < hmax ? n : hmax;
    size_t m = tc->pos + find_at(p + tc->pos, lim - tc->pos, "<|message|>");
    if (m == lim) return final || lim == hmax ? fail_candidate(tc) : 0;
    const char *h = p + tc->pos;
    size_t hl = m - tc->pos, to = find_at(h, hl, "to=");
    if (to == hl) return fail_candidate(tc);
    const char *r = h + to + 3;
    size_t rl = 0;
    while (r + rl < h + hl && !is_ws((unsigned char)r[rl]) && r[rl] != '<') rl++;
    if (rl > 10 && !memcmp(r, "functions.", 10)) { r += 10; rl -= 10; }
    if (!rl || rl > NAME_MAX_LEN || (rl == 9 && !memcmp(r, "assistant", 9))) return fail_candidate(tc);
    if (call_start(tc, r, rl)) return fail_candidate(tc);
    take(tc, m + 11);
    tc->raw_lead = 1;
    tc->r1 = 0;
    tc->state = S_RAW;
    return 1;
}

/* A prompt that ends with <|start|>assistant (gpt-oss's) leaves the header
 * open: the model may go on with " to=functions.NAME<|channel|>...". */
static int st_h_start(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, i = 0;
    while (i < n && i <= WS_HOLD_MAX && p[i] == ' ') i++;
    if (i > WS_HOLD_MAX) {
        tc->state = S_CONTENT;
        return 1;
    }
    if (i == n || (n - i < 3 && agrees(p + i, n - i, "to="))) {
        if (!final) return 0;
    } else if (!memcmp(p + i, "to=", 3)) {
        begin_candidate(tc, 0, 0, S_H_HEADER);
        return 1;
    }
    tc->state = S_CONTENT;
    return 1;
}

static int st_ds_begin(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc), i = cand_skip_ws(tc);
    static const char *const begin[] = {DS_CALL_BEGIN, NULL};
    int w;
    int m = match_start(p + i, lim - i, begin, &w);
    if (m == M_PART && !cand_out(tc, final)) return 0;
    if (m != M_FULL) return fail_candidate(tc);
    tc->pos = i + strlen(DS_CALL_BEGIN);
    tc->state = S_DS_NAME;
    return 1;
}

static int ds_commit(pk_toolcall *tc, const char *name, size_t nl, size_t consumed, int r1) {
    if (!nl || call_start(tc, name, nl)) return fail_candidate(tc);
    take(tc, consumed);
    tc->raw_lead = 1;
    tc->r1 = r1;
    tc->state = r1 ? S_DS_FENCE : S_RAW;
    return 1;
}

static int st_ds_name(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc), sl = strlen(DS_SEP), avail = lim - tc->pos;
    size_t at = find_at(p + tc->pos, avail, DS_SEP);
    if (at == avail || memchr(p + tc->pos, '\n', at) || at > NAME_MAX_LEN) {
        if (at == avail && avail < NAME_MAX_LEN + sl && !memchr(p + tc->pos, '\n', avail) && !cand_out(tc, final))
            return 0;
        return fail_candidate(tc);
    }
    size_t nl = at;
    const char *name = trim(p + tc->pos, &nl);
    size_t after = tc->pos + at + sl, i = after;
    if (nl == 8 && !memcmp(name, "function", 8)) {   /* V3/R1: the name is on the next line, unless '{' follows */
        while (i < lim && is_ws((unsigned char)p[i]) && p[i] != '\n') i++;
        if (i == lim && !cand_out(tc, final)) return 0;
        if (i == lim || p[i] != '{') {
            tc->pos = after;
            tc->state = S_DS_R1NAME;
            return 1;
        }
    }
    return ds_commit(tc, name, nl, after, 0);
}

static int st_ds_r1name(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc);
    long e = name_until(p + tc->pos, lim - tc->pos, '\n');
    if (e == -1 && !cand_out(tc, final)) return 0;
    if (e < 0) return fail_candidate(tc);
    size_t nl = (size_t)e;
    const char *name = trim(p + tc->pos, &nl);
    return ds_commit(tc, name, nl, tc->pos + (size_t)e + 1, 1);
}

/* V3/R1: the arguments' opening fence, ```json and its line (dropped). */
static int st_ds_fence(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, i = 0;
    while (i < n && is_ws((unsigned char)p[i])) i++;
    if (i == n && !final) { take(tc, i); return i > 0; }
    if (n - i < 3 && agrees(p + i, n - i, "```") && !final) { take(tc, i); return i > 0; }
    if (n - i >= 3 && !memcmp(p + i, "```", 3)) {   /* its line: a newline within 16 bytes */
        size_t e = i + 3, lim = i + 20;
        while (e < n && e < lim && p[e] != '\n') e++;
        if (e == n && n < lim && !final) { take(tc, i); return i > 0; }
        i = e < n && e < lim ? e + 1 : i + 3;
    }
    take(tc, i);
    tc->state = S_RAW;
    return 1;
}

static const char *const raw_ends_harmony[] = {"<|call|>", "<|end|>", "<|return|>", "<|start|>", "<|channel|>", NULL};
static const int raw_keep_harmony = 3;   /* from this index the end marker is the next message's */
static const char *const raw_ends_ds[] = {DS_CALL_END, DS_CALLS_END, DS_CALL_BEGIN, NULL};
static const char *const raw_ends_r1[] = {"\n```", DS_CALL_END, DS_CALLS_END, DS_CALL_BEGIN, NULL};

/* Arguments as written, up to an end marker, trimmed of white space (at
 * most WS_HOLD_MAX of it at the end). */
static int st_raw(pk_toolcall *tc, int final) {
    if (tc->raw_lead) {
        size_t i = 0;
        while (i < tc->pend.n && is_ws((unsigned char)tc->pend.p[i])) i++;
        take(tc, i);
        if (!tc->pend.n && !final) return i > 0;
        tc->raw_lead = 0;
        return 1;
    }
    const char *p = tc->pend.p;
    size_t n = tc->pend.n;
    const char *const *ends = tc->fmt == TC_HARMONY ? raw_ends_harmony : tc->r1 ? raw_ends_r1 : raw_ends_ds;
    int keep_from = tc->fmt == TC_HARMONY ? raw_keep_harmony : tc->r1 ? 3 : 2;
    int w = 0;
    size_t at = find_first(p, n, ends, &w);
    size_t k = at < n ? at : n - tail_any(p, n, ends), e = ws_start(p, k);
    if (at == n && !final) {
        e = utf8_cut(p, e);
        if (!e) return 0;
        emit_args(tc, p, e);
        take(tc, e);
        return 1;
    }
    emit_args(tc, p, e);
    int consumed = at < n && w < keep_from;
    take(tc, at == n ? n : consumed ? at + strlen(ends[w]) : at);
    call_end(tc, consumed);
    return 1;
}

/* ---- gemma4: call:NAME{key:VALUE,...} ---------------------------------------------- */

/* After <|tool_call>: "call:" (the template writes it; tolerated without),
 * then the name up to '{', which opens the arguments. */
static int st_g4_head(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc), i = cand_skip_ws(tc);
    static const char *const call[] = {"call:", NULL};
    int w;
    int m = match_start(p + i, lim - i, call, &w);
    if (m == M_PART && !cand_out(tc, final)) return 0;
    if (m == M_FULL) i += 5;
    long e = name_until(p + i, lim - i, '{');
    if (e == -1 && !cand_out(tc, final)) return 0;
    if (e < 0) return fail_candidate(tc);
    size_t nl = (size_t)e;
    const char *name = trim(p + i, &nl);
    if (!nl || call_start(tc, name, nl)) return fail_candidate(tc);
    take(tc, i + (size_t)e + 1);
    tc->g4 = (g4scan){.mode = G_KEY, .depth = 1};
    tc->g4.kind[0] = 'o';
    emit_args(tc, "{", 1);
    tc->state = S_G4_BODY;
    return 1;
}

static int g4_in_object(const g4scan *g) { return g->kind[g->depth - 1] == 'o'; }

/* A member or element is written in the innermost one: the comma first. */
static void g4_member(pk_toolcall *tc) {
    g4scan *g = &tc->g4;
    if (g->more[g->depth - 1]) emit_args(tc, ", ", 2);
    g->more[g->depth - 1] = 1;
}

/* The key read (nbuf) goes out, then ": ". A bare key is trimmed, and one
 * written as a JSON string or in single quotes is unquoted. */
static void g4_key_out(pk_toolcall *tc) {
    sbuf *k = &tc->nbuf;
    if (!tc->g4.key_quoted && k->p) {
        size_t n = k->n;
        const char *s = trim(k->p, &n);
        int single = n >= 2 && s[0] == '\'' && s[n - 1] == '\'';
        if (single) { s++; n -= 2; }
        memmove(k->p, s, n);
        k->p[n] = 0;
        k->n = n;
        if (!single && n >= 2 && k->p[0] == '"' && k->p[n - 1] == '"') decode_string(k);
    }
    g4_member(tc);
    emit_json_string(tc, tc->nbuf.p ? tc->nbuf.p : "", tc->nbuf.n);
    emit_args(tc, ": ", 2);
}

/* Whether s[0..n) is a JSON number. */
static int json_number(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') {
        i++;
    } else if (i < n && s[i] >= '1' && s[i] <= '9') {
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    } else {
        return 0;
    }
    if (i < n && s[i] == '.') {
        if (++i == n || s[i] < '0' || s[i] > '9') return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        if (++i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i == n || s[i] < '0' || s[i] > '9') return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    return i == n;
}

/* A bare value (vbuf) goes out as JSON: a number, true / false / null
 * (Python's True, False, None too) as such - unless the top-level
 * parameter's schema wants a string - a JSON string literal as it is, a
 * '...' one as its text, anything else as a string of its text. */
static void g4_scalar_out(pk_toolcall *tc) {
    g4scan *g = &tc->g4;
    if (!g4_in_object(g)) g4_member(tc);
    size_t n = tc->vbuf.n;
    const char *s = trim(tc->vbuf.p ? tc->vbuf.p : "", &n);
    static const char *const lits[] = {"true", "false", "null", "True", "False", "None"};
    int lit = -1, num = json_number(s, n);
    for (int k = 0; k < 6 && lit < 0; k++)
        if (n == strlen(lits[k]) && !memcmp(s, lits[k], n)) lit = k % 3;
    if ((num || lit == 0 || lit == 1) && tc->tools && g->depth == 1 && tc->nbuf.n <= NAME_MAX_LEN) {
        char key[NAME_MAX_LEN + 1] = "";
        if (tc->nbuf.n) memcpy(key, tc->nbuf.p, tc->nbuf.n);
        key[tc->nbuf.n] = 0;
        int allow = schema_allows(tc, tc->calls[tc->cur].name.p, key);
        if (!(allow & (num ? A_NUM : A_BOOL))) num = 0, lit = -1;
    }
    if (num) { emit_args(tc, s, n); return; }
    if (lit >= 0) { emit_args(tc, lits[lit], strlen(lits[lit])); return; }
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        json_error_t e;
        json_t *j = json_loadb(s, n, JSON_DECODE_ANY, &e);
        int str = json_is_string(j);
        json_decref(j);
        if (str) { emit_args(tc, s, n); return; }
    }
    if (n >= 2 && s[0] == '\'' && s[n - 1] == '\'') { s++; n -= 2; }
    emit_json_string(tc, s, n);
}

/* The innermost object or array closes; the call ends with the outermost. */
static void g4_close(pk_toolcall *tc) {
    g4scan *g = &tc->g4;
    emit_args(tc, g4_in_object(g) ? "}" : "]", 1);
    g->mode = G_NEXT;
    if (!--g->depth) call_end(tc, 1);
}

/* The call ends (its end marker, or the end of the text): what is open is
 * completed - a key without a value gets null, a string its quote - and
 * closed, so the arguments are JSON. */
static void g4_finish(pk_toolcall *tc, int closed) {
    g4scan *g = &tc->g4;
    switch (g->mode) {
    case G_KEY_BARE: case G_KEY_STR: case G_COLON: g4_key_out(tc); emit_args(tc, "null", 4); break;
    case G_VALUE: if (g4_in_object(g)) emit_args(tc, "null", 4); break;
    case G_STR: emit_args(tc, "\"", 1); break;
    case G_SCALAR: g4_scalar_out(tc); break;
    default: break;
    }
    for (; g->depth > 0; g->depth--) emit_args(tc, g4_in_object(g) ? "}" : "]", 1);
    call_end(tc, closed);
}

/* One byte c of the arguments (quote: it starts <|"|>) in the scanner's
 * mode: the bytes used (0: read again in the new mode). Text that breaks
 * the syntax is read as the nearest thing that makes JSON: a key without
 * ':' gets null, a missing comma is assumed, a closer closes the innermost
 * one whichever it is. */
static size_t g4_byte(pk_toolcall *tc, unsigned char c, int quote) {
    g4scan *g = &tc->g4;
    int obj = g4_in_object(g), closer = c == '}' || c == ']';
    switch (g->mode) {
    case G_KEY:
        if (is_ws(c) || c == ',') return 1;
        if (closer) { g4_close(tc); return 1; }
        tc->nbuf.n = 0;
        g->key_quoted = quote;
        g->mode = quote ? G_KEY_STR : G_KEY_BARE;
        return quote ? 5 : 0;
    case G_KEY_BARE:
        if (c == ':' || c == '=') { g4_key_out(tc); g->mode = G_VALUE; return 1; }
        if (c == '{' || c == '[' || quote) { g4_key_out(tc); g->mode = G_VALUE; return 0; }
        if (c == ',' || closer) { g4_key_out(tc); emit_args(tc, "null", 4); g->mode = G_NEXT; return 0; }
        sb_put(&tc->nbuf, (const char *)&c, 1);
        return 1;
    case G_COLON:
        if (is_ws(c)) return 1;
        g4_key_out(tc);
        if (c == ':' || c == '=') { g->mode = G_VALUE; return 1; }
        emit_args(tc, "null", 4);
        g->mode = G_NEXT;
        return 0;
    case G_VALUE:
        if (is_ws(c)) return 1;
        if (quote) {
            if (!obj) g4_member(tc);
            emit_args(tc, "\"", 1);
            g->mode = G_STR;
            return 5;
        }
        if ((c == '{' || c == '[') && g->depth < G4_DEPTH) {
            if (!obj) g4_member(tc);
            emit_args(tc, (const char *)&c, 1);
            g->kind[g->depth] = c == '{' ? 'o' : 'a';
            g->more[g->depth++] = 0;
            g->mode = c == '{' ? G_KEY : G_VALUE;
            return 1;
        }
        if (closer || c == ',') {
            if (obj) { emit_args(tc, "null", 4); g->mode = G_NEXT; return 0; }
            if (c == ',') return 1;   /* an element left out */
            g4_close(tc);
            return 1;
        }
        tc->vbuf.n = 0;
        g->quote = c == '"' || c == '\'' ? c : 0;
        g->esc = 0;
        sb_put(&tc->vbuf, (const char *)&c, 1);
        g->mode = G_SCALAR;
        return 1;
    case G_SCALAR:
        if (g->quote) {
            if (g->esc) g->esc = 0;
            else if (c == '\\' && g->quote == '"') g->esc = 1;
            else if (c == g->quote) g->quote = 0;
        } else if (c == ',' || closer || quote) {
            g4_scalar_out(tc);
            g->mode = G_NEXT;
            return 0;
        }
        sb_put(&tc->vbuf, (const char *)&c, 1);
        return 1;
    default:   /* G_NEXT */
        if (is_ws(c)) return 1;
        if (closer) { g4_close(tc); return 1; }
        g->mode = obj ? G_KEY : G_VALUE;
        return c == ',';   /* else a comma left out: c starts the next one */
    }
}

static const char *const g4_marks[] = {G4_END, G4_QUOTE, NULL};

/* The arguments: converted to JSON as they come; strings stream, keys and
 * bare values go out when they end. The call ends at the '}' closing them
 * (its <tool_call|> then goes as a closing marker), at <tool_call|> (what
 * is open is closed), or with the text. A marker cut off at the end is
 * dropped. */
static int st_g4_body(pk_toolcall *tc, int final) {
    g4scan *g = &tc->g4;
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, i = 0;
    while (tc->cur >= 0) {
        if (g->mode == G_STR || g->mode == G_KEY_STR) {   /* text up to <|"|> */
            size_t at = i + find_at(p + i, n - i, G4_QUOTE);
            size_t k = at < n ? at : final ? n - partial_tail(p + i, n - i, G4_QUOTE)
                     : i + utf8_cut(p + i, n - i - partial_tail(p + i, n - i, G4_QUOTE));
            if (g->mode == G_STR) emit_escaped(tc, p + i, k - i);
            else sb_put(&tc->nbuf, p + i, k - i);
            i = k;
            if (at < n) {
                i += strlen(G4_QUOTE);
                if (g->mode == G_STR) emit_args(tc, "\"", 1);
                g->mode = g->mode == G_STR ? G_NEXT : G_COLON;
                continue;
            }
            if (final) { i = n; g4_finish(tc, 0); }
            break;
        }
        if (i == n) {
            if (final) g4_finish(tc, 0);
            break;
        }
        int w = -1, m = p[i] == '<' ? match_start(p + i, n - i, g4_marks, &w) : M_NONE;
        if (m == M_PART) {
            if (!final) break;
            i = n;
            g4_finish(tc, 0);
            break;
        }
        if (m == M_FULL && w == 0) { g4_finish(tc, 1); break; }   /* <tool_call|> stays for st_after */
        i += g4_byte(tc, (unsigned char)p[i], m == M_FULL);
    }
    take(tc, i);
    return i > 0 || tc->cur < 0;
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
    case S_XML_NAME: return st_xml_name(tc, final);
    case S_XML_BODY: return st_xml_body(tc, final);
    case S_XML_PNAME: return st_xml_pname(tc, final);
    case S_XML_VALUE: return st_xml_value(tc, final);
    case S_JSON: return st_json(tc, final);
    case S_H_START: return st_h_start(tc, final);
    case S_H_HEADER: return st_h_header(tc, final);
    case S_DS_BEGIN: return st_ds_begin(tc, final);
    case S_DS_NAME: return st_ds_name(tc, final);
    case S_DS_R1NAME: return st_ds_r1name(tc, final);
    case S_DS_FENCE: return st_ds_fence(tc, final);
    case S_RAW: return st_raw(tc, final);
    case S_G4_HEAD: return st_g4_head(tc, final);
    case S_G4_BODY: return st_g4_body(tc, final);
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
