/* text/toolcall_int.h - the inside of the tool-call parser, shared by
 * text/toolcall.c (the parser's machinery: events and output, candidates,
 * what follows a call, the API) and text/toolcall_formats.c (the body
 * parsers of each format); nothing else includes it. The formats, how the
 * parser streams and what it tolerates: text/toolcall.c.
 *
 * The marker and window helpers are static inline, as in text/strbuf.h:
 * each of the two files gets its own copy, nothing is exported. The
 * functions one file calls in the other are tc_*.
 */
#ifndef PK_TEXT_TOOLCALL_INT_H
#define PK_TEXT_TOOLCALL_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "text/strbuf.h"
#include "text/toolcall.h"

#define NAME_MAX_LEN 256     /* a longer function or parameter name is not one */
#define CAND_MAX 16384       /* a call must be known within this many bytes of its opening marker */
#define WS_HOLD_MAX 1024     /* white space before a possible call (or end) held back, and dropped */
#define HEADER_MAX 512       /* a harmony header longer than this is not a call's */
#define MAX_CALLS 1024       /* calls per message; the opener of another is content */
#define FEED_CHUNK 4096      /* a piece is parsed in chunks of this many bytes */

#define DS_CALLS_BEGIN "<｜tool▁calls▁begin｜>"
#define DS_CALL_BEGIN "<｜tool▁call▁begin｜>"
#define DS_SEP "<｜tool▁sep｜>"
#define DS_CALL_END "<｜tool▁call▁end｜>"
#define DS_CALLS_END "<｜tool▁calls▁end｜>"

#define G4_OPEN "<|tool_call>"
#define G4_END "<tool_call|>"
#define G4_QUOTE "<|\"|>"

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

static inline int is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* k less an incomplete UTF-8 sequence at the end of s[0..k). */
static inline size_t utf8_cut(const char *s, size_t k) {
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
static inline size_t ws_start(const char *s, size_t k) {
    size_t e = k;
    while (e > 0 && is_ws((unsigned char)s[e - 1]) && k - e < WS_HOLD_MAX) e--;
    return e;
}

/* Earliest of the markers ms (NULL-terminated) in s[0..n): its offset (n if
 * none) and index in *w. */
static inline size_t find_first(const char *s, size_t n, const char *const *ms, int *w) {
    size_t best = n;
    for (int k = 0; ms[k]; k++) {
        size_t at = find_at(s, best, ms[k]);
        if (at < best) { best = at; *w = k; }
    }
    return best;
}

/* The longest end of s[0..n) that begins one of ms. */
static inline size_t tail_any(const char *s, size_t n, const char *const *ms) {
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
static inline int match_start(const char *s, size_t n, const char *const *ms, int *w) {
    int part = 0;
    for (int k = 0; ms[k]; k++) {
        size_t l = strlen(ms[k]);
        if (n >= l && !memcmp(s, ms[k], l)) { *w = k; return M_FULL; }
        if (n < l && !memcmp(s, ms[k], n)) part = 1;
    }
    return part ? M_PART : M_NONE;
}

static inline void take(pk_toolcall *tc, size_t k) { sb_take(&tc->pend, k); }

/* ---- candidates: the window, names ---------------------------------------------- */

/* The end of the candidate's window: min(n, CAND_MAX). A scan that reaches
 * it without knowing waits, unless the window is full or the text ended. */
static inline size_t cand_lim(const pk_toolcall *tc) { return tc->pend.n < CAND_MAX ? tc->pend.n : CAND_MAX; }
static inline int cand_out(const pk_toolcall *tc, int final) { return final || tc->pend.n >= CAND_MAX; }

/* A name in s[0..n) up to the first of stop (not found: -1 if more may
 * come, -2 if s cannot hold one: a newline or '<' first, or too long). */
static inline long name_until(const char *s, size_t n, char stop) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == stop) return (long)i;
        if (s[i] == '\n' || s[i] == '<' || i >= NAME_MAX_LEN) return -2;
    }
    return n > NAME_MAX_LEN ? -2 : -1;
}

/* s[0..*n) trimmed of white space. */
static inline const char *trim(const char *s, size_t *n) {
    while (*n && is_ws((unsigned char)*s)) { s++; (*n)--; }
    while (*n && is_ws((unsigned char)s[*n - 1])) (*n)--;
    return s;
}

/* The candidate's scan position moved over white space (within its window). */
static inline size_t cand_skip_ws(pk_toolcall *tc) {
    size_t lim = cand_lim(tc), i = tc->pos;
    while (i < lim && is_ws((unsigned char)tc->pend.p[i])) i++;
    return tc->pos = i;
}

/* ---- across the two files ---------------------------------------------------------- */

/* text/toolcall.c: the current call's arguments (emit_*), a call's start
 * and end, a candidate's start and failure (each one's contract at its
 * definition). */
void tc_emit_args(pk_toolcall *tc, const char *s, size_t n);
void tc_emit_escaped(pk_toolcall *tc, const char *s, size_t n);
void tc_emit_json_string(pk_toolcall *tc, const char *s, size_t n);
int tc_name_ok(const char *name, size_t n);
int tc_call_start(pk_toolcall *tc, const char *name, size_t n);
void tc_call_end(pk_toolcall *tc, int closed);
void tc_begin_candidate(pk_toolcall *tc, size_t lead, size_t open, int state);
int tc_fail_candidate(pk_toolcall *tc);

/* text/toolcall_formats.c: one step over pend in each state of a call's
 * body (S_XML_NAME .. S_G4_BODY), for step(); 1 when something changed. */
int tc_st_xml_name(pk_toolcall *tc, int final);
int tc_st_xml_body(pk_toolcall *tc, int final);
int tc_st_xml_pname(pk_toolcall *tc, int final);
int tc_st_xml_value(pk_toolcall *tc, int final);
int tc_st_json(pk_toolcall *tc, int final);
int tc_st_h_start(pk_toolcall *tc, int final);
int tc_st_h_header(pk_toolcall *tc, int final);
int tc_st_ds_begin(pk_toolcall *tc, int final);
int tc_st_ds_name(pk_toolcall *tc, int final);
int tc_st_ds_r1name(pk_toolcall *tc, int final);
int tc_st_ds_fence(pk_toolcall *tc, int final);
int tc_st_raw(pk_toolcall *tc, int final);
int tc_st_g4_head(pk_toolcall *tc, int final);
int tc_st_g4_body(pk_toolcall *tc, int final);

#endif
