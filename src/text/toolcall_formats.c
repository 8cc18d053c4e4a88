/* text/toolcall_formats.c - the tool-call parser's body parsers, a section
 * a format: qwen3coder's XML bodies, hermes' and llama3's JSON bodies,
 * harmony's and deepseek's headers and raw arguments, gemma4's
 * call:NAME{key:VALUE,...}. Each tc_st_* function is one step in one state
 * (text/toolcall_int.h), called by text/toolcall.c's step(). The formats,
 * how the parser streams and what it tolerates: text/toolcall.c.
 */
#include <jansson.h>
#include <string.h>

#include "text/strbuf.h"
#include "text/toolcall_int.h"

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
        tc_emit_args(tc, "\"", 1);
        tc_emit_escaped(tc, tc->vbuf.p, tc->vbuf.n);
        tc->vbuf.n = 0;
    }
    if (x->string) tc_emit_escaped(tc, s + i, n - i);
}

/* The value ends: close its string, or write what it turned out to be. */
static void xv_finish(pk_toolcall *tc) {
    xval *x = &tc->xv;
    if (x->string) { tc_emit_args(tc, "\"", 1); return; }
    size_t tn = tc->vbuf.n;
    const char *t = trim(tc->vbuf.p ? tc->vbuf.p : "", &tn);
    int s = x->nst;
    if (tn && x->kind == 'l' && !x->lit[x->li]) { tc_emit_args(tc, x->lit, strlen(x->lit)); return; }
    if (tn && x->kind == 'n' && (s == N_ZERO || s == N_INT || s == N_FRAC || s == N_EXP)) {
        tc_emit_args(tc, t, tn);
        return;
    }
    if (tn && x->kind == 'o') {
        json_error_t e;
        json_t *j = json_loadb(t, tn, JSON_DECODE_ANY, &e);
        json_decref(j);
        if (j) { tc_emit_args(tc, t, tn); return; }
    }
    tc_emit_json_string(tc, tc->vbuf.p ? tc->vbuf.p : "", tc->vbuf.n);
}

static void xml_close(pk_toolcall *tc, int closed) {
    tc_emit_args(tc, "}", 1);
    tc_call_end(tc, closed);
}

int tc_st_xml_name(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc);
    long e = name_until(p + tc->pos, lim - tc->pos, '>');
    if (e == -1 && !cand_out(tc, final)) return 0;
    if (e < 0) return tc_fail_candidate(tc);
    size_t nl = (size_t)e;
    const char *name = trim(p + tc->pos, &nl);
    if (!nl || tc_call_start(tc, name, nl)) return tc_fail_candidate(tc);
    take(tc, tc->pos + (size_t)e + 1);
    tc_emit_args(tc, "{", 1);
    tc->n_params = 0;
    tc->state = S_XML_BODY;
    return 1;
}

static const char *const xml_body_tags[] = {"<parameter=", "</function>", "</tool_call>", NULL};

int tc_st_xml_body(pk_toolcall *tc, int final) {
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

int tc_st_xml_pname(pk_toolcall *tc, int final) {
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
    if (tc->n_params++) tc_emit_args(tc, ", ", 2);
    tc_emit_json_string(tc, name, nl);
    tc_emit_args(tc, ": ", 2);
    tc->xv = (xval){.allow = tc->tools ? schema_allows(tc, tc->calls[tc->cur].name.p, pname) : A_ANY};
    tc->vbuf.n = 0;
    take(tc, (size_t)e + 1);
    tc->state = S_XML_VALUE;
    return 1;
}

static const char *const xml_value_ends[] = {"</parameter>", "</function>", "</tool_call>", NULL};

/* A value runs to </parameter> (or the end of its function or call), less
 * one newline on each side. */
int tc_st_xml_value(pk_toolcall *tc, int final) {
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
    if (tc_call_start(tc, tc->nbuf.p, tc->nbuf.n)) return -1;
    if (tc->js.args_done) tc_emit_args(tc, tc->abuf.p, tc->abuf.n);
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
        if (decode_string(&tc->nbuf) && tc_name_ok(tc->nbuf.p, tc->nbuf.n)) j->have_name = 1;
    } else if (j->key == K_ARGS) {
        j->args_done = 1;
        if (j->streaming) {
            tc_emit_args(tc, tc->pend.p + j->ef, end - j->ef);
            j->streaming = 0;
        } else if (j->vstr) {
            decode_string(&tc->abuf);   /* arguments sent as a JSON string: its text; else as written */
            if (tc->cur >= 0) tc_emit_args(tc, tc->abuf.p, tc->abuf.n);
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
    if (tc->cur < 0 && (!j->have_name || (!j->tagged && !j->have_args) || js_commit(tc))) return tc_fail_candidate(tc);
    if (j->streaming) {
        tc_emit_args(tc, tc->pend.p + j->ef, upto - j->ef);
        j->streaming = 0;
    } else if (j->key == K_ARGS && j->st == J_VAL) {
        tc_emit_args(tc, tc->abuf.p, tc->abuf.n);   /* a string cut short: as written */
    }
    take(tc, drop);
    tc_call_end(tc, closed);
    return 1;
}

int tc_st_json(pk_toolcall *tc, int final) {
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
    case STOP_FAIL: return tc_fail_candidate(tc);
    case STOP_OBJ: return js_close(tc, i, i + 1, 1);
    case STOP_TAG: return js_close(tc, i, i + strlen(close_tag[0]), 1);
    case STOP_ERR: return tc->cur >= 0 ? js_close(tc, i, i, 0) : tc_fail_candidate(tc);
    case STOP_TAG_PART:
        if (tc->cur < 0 && n >= CAND_MAX) return tc_fail_candidate(tc);   /* the window is full, no call */
        if (final) return js_close(tc, i, n, 0);                       /* the tag cut off at the end */
        break;
    default:
        if (tc->cur < 0 && i == lim && n >= CAND_MAX) return tc_fail_candidate(tc);
        if (final && i == n) return js_close(tc, n, n, 0);
    }
    /* waiting for more: a committed call's arguments so far go out, what is read goes */
    tc->pos = i;
    if (tc->cur < 0) return i > start;
    size_t drop = i;
    if (j->streaming) {
        size_t k = j->ef + utf8_cut(p + j->ef, i - j->ef);
        tc_emit_args(tc, p + j->ef, k - j->ef);
        drop = k;
        j->ef = 0;
    }
    take(tc, drop);
    tc->pos = i - drop;
    return i > start || drop > 0;
}

/* ---- harmony, deepseek: headers and raw arguments ---------------------------------- */

int tc_st_h_header(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, hmax = tc->pos + HEADER_MAX + 11;
    size_t lim = n < hmax ? n : hmax;
    size_t m = tc->pos + find_at(p + tc->pos, lim - tc->pos, "<|message|>");
    if (m == lim) return final || lim == hmax ? tc_fail_candidate(tc) : 0;
    const char *h = p + tc->pos;
    size_t hl = m - tc->pos, to = find_at(h, hl, "to=");
    if (to == hl) return tc_fail_candidate(tc);
    const char *r = h + to + 3;
    size_t rl = 0;
    while (r + rl < h + hl && !is_ws((unsigned char)r[rl]) && r[rl] != '<') rl++;
    if (rl > 10 && !memcmp(r, "functions.", 10)) { r += 10; rl -= 10; }
    if (!rl || rl > NAME_MAX_LEN || (rl == 9 && !memcmp(r, "assistant", 9))) return tc_fail_candidate(tc);
    if (tc_call_start(tc, r, rl)) return tc_fail_candidate(tc);
    take(tc, m + 11);
    tc->raw_lead = 1;
    tc->r1 = 0;
    tc->state = S_RAW;
    return 1;
}

/* A prompt that ends with <|start|>assistant (gpt-oss's) leaves the header
 * open: the model may go on with " to=functions.NAME<|channel|>...". */
int tc_st_h_start(pk_toolcall *tc, int final) {
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
        tc_begin_candidate(tc, 0, 0, S_H_HEADER);
        return 1;
    }
    tc->state = S_CONTENT;
    return 1;
}

int tc_st_ds_begin(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc), i = cand_skip_ws(tc);
    static const char *const begin[] = {DS_CALL_BEGIN, NULL};
    int w;
    int m = match_start(p + i, lim - i, begin, &w);
    if (m == M_PART && !cand_out(tc, final)) return 0;
    if (m != M_FULL) return tc_fail_candidate(tc);
    tc->pos = i + strlen(DS_CALL_BEGIN);
    tc->state = S_DS_NAME;
    return 1;
}

static int ds_commit(pk_toolcall *tc, const char *name, size_t nl, size_t consumed, int r1) {
    if (!nl || tc_call_start(tc, name, nl)) return tc_fail_candidate(tc);
    take(tc, consumed);
    tc->raw_lead = 1;
    tc->r1 = r1;
    tc->state = r1 ? S_DS_FENCE : S_RAW;
    return 1;
}

int tc_st_ds_name(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc), sl = strlen(DS_SEP), avail = lim - tc->pos;
    size_t at = find_at(p + tc->pos, avail, DS_SEP);
    if (at == avail || memchr(p + tc->pos, '\n', at) || at > NAME_MAX_LEN) {
        if (at == avail && avail < NAME_MAX_LEN + sl && !memchr(p + tc->pos, '\n', avail) && !cand_out(tc, final))
            return 0;
        return tc_fail_candidate(tc);
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

int tc_st_ds_r1name(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc);
    long e = name_until(p + tc->pos, lim - tc->pos, '\n');
    if (e == -1 && !cand_out(tc, final)) return 0;
    if (e < 0) return tc_fail_candidate(tc);
    size_t nl = (size_t)e;
    const char *name = trim(p + tc->pos, &nl);
    return ds_commit(tc, name, nl, tc->pos + (size_t)e + 1, 1);
}

/* V3/R1: the arguments' opening fence, ```json and its line (dropped). */
int tc_st_ds_fence(pk_toolcall *tc, int final) {
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
int tc_st_raw(pk_toolcall *tc, int final) {
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
        tc_emit_args(tc, p, e);
        take(tc, e);
        return 1;
    }
    tc_emit_args(tc, p, e);
    int consumed = at < n && w < keep_from;
    take(tc, at == n ? n : consumed ? at + strlen(ends[w]) : at);
    tc_call_end(tc, consumed);
    return 1;
}

/* ---- gemma4: call:NAME{key:VALUE,...} ---------------------------------------------- */

/* After <|tool_call>: "call:" (the template writes it; tolerated without),
 * then the name up to '{', which opens the arguments. */
int tc_st_g4_head(pk_toolcall *tc, int final) {
    const char *p = tc->pend.p;
    size_t lim = cand_lim(tc), i = cand_skip_ws(tc);
    static const char *const call[] = {"call:", NULL};
    int w;
    int m = match_start(p + i, lim - i, call, &w);
    if (m == M_PART && !cand_out(tc, final)) return 0;
    if (m == M_FULL) i += 5;
    long e = name_until(p + i, lim - i, '{');
    if (e == -1 && !cand_out(tc, final)) return 0;
    if (e < 0) return tc_fail_candidate(tc);
    size_t nl = (size_t)e;
    const char *name = trim(p + i, &nl);
    if (!nl || tc_call_start(tc, name, nl)) return tc_fail_candidate(tc);
    take(tc, i + (size_t)e + 1);
    tc->g4 = (g4scan){.mode = G_KEY, .depth = 1};
    tc->g4.kind[0] = 'o';
    tc_emit_args(tc, "{", 1);
    tc->state = S_G4_BODY;
    return 1;
}

static int g4_in_object(const g4scan *g) { return g->kind[g->depth - 1] == 'o'; }

/* A member or element is written in the innermost one: the comma first. */
static void g4_member(pk_toolcall *tc) {
    g4scan *g = &tc->g4;
    if (g->more[g->depth - 1]) tc_emit_args(tc, ", ", 2);
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
    tc_emit_json_string(tc, tc->nbuf.p ? tc->nbuf.p : "", tc->nbuf.n);
    tc_emit_args(tc, ": ", 2);
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
    if (num) { tc_emit_args(tc, s, n); return; }
    if (lit >= 0) { tc_emit_args(tc, lits[lit], strlen(lits[lit])); return; }
    if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
        json_error_t e;
        json_t *j = json_loadb(s, n, JSON_DECODE_ANY, &e);
        int str = json_is_string(j);
        json_decref(j);
        if (str) { tc_emit_args(tc, s, n); return; }
    }
    if (n >= 2 && s[0] == '\'' && s[n - 1] == '\'') { s++; n -= 2; }
    tc_emit_json_string(tc, s, n);
}

/* The innermost object or array closes; the call ends with the outermost. */
static void g4_close(pk_toolcall *tc) {
    g4scan *g = &tc->g4;
    tc_emit_args(tc, g4_in_object(g) ? "}" : "]", 1);
    g->mode = G_NEXT;
    if (!--g->depth) tc_call_end(tc, 1);
}

/* The call ends (its end marker, or the end of the text): what is open is
 * completed - a key without a value gets null, a string its quote - and
 * closed, so the arguments are JSON. */
static void g4_finish(pk_toolcall *tc, int closed) {
    g4scan *g = &tc->g4;
    switch (g->mode) {
    case G_KEY_BARE: case G_KEY_STR: case G_COLON: g4_key_out(tc); tc_emit_args(tc, "null", 4); break;
    case G_VALUE: if (g4_in_object(g)) tc_emit_args(tc, "null", 4); break;
    case G_STR: tc_emit_args(tc, "\"", 1); break;
    case G_SCALAR: g4_scalar_out(tc); break;
    default: break;
    }
    for (; g->depth > 0; g->depth--) tc_emit_args(tc, g4_in_object(g) ? "}" : "]", 1);
    tc_call_end(tc, closed);
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
        if (c == ',' || closer) { g4_key_out(tc); tc_emit_args(tc, "null", 4); g->mode = G_NEXT; return 0; }
        sb_put(&tc->nbuf, (const char *)&c, 1);
        return 1;
    case G_COLON:
        if (is_ws(c)) return 1;
        g4_key_out(tc);
        if (c == ':' || c == '=') { g->mode = G_VALUE; return 1; }
        tc_emit_args(tc, "null", 4);
        g->mode = G_NEXT;
        return 0;
    case G_VALUE:
        if (is_ws(c)) return 1;
        if (quote) {
            if (!obj) g4_member(tc);
            tc_emit_args(tc, "\"", 1);
            g->mode = G_STR;
            return 5;
        }
        if ((c == '{' || c == '[') && g->depth < G4_DEPTH) {
            if (!obj) g4_member(tc);
            tc_emit_args(tc, (const char *)&c, 1);
            g->kind[g->depth] = c == '{' ? 'o' : 'a';
            g->more[g->depth++] = 0;
            g->mode = c == '{' ? G_KEY : G_VALUE;
            return 1;
        }
        if (closer || c == ',') {
            if (obj) { tc_emit_args(tc, "null", 4); g->mode = G_NEXT; return 0; }
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
int tc_st_g4_body(pk_toolcall *tc, int final) {
    g4scan *g = &tc->g4;
    const char *p = tc->pend.p;
    size_t n = tc->pend.n, i = 0;
    while (tc->cur >= 0) {
        if (g->mode == G_STR || g->mode == G_KEY_STR) {   /* text up to <|"|> */
            size_t at = i + find_at(p + i, n - i, G4_QUOTE);
            size_t k = at < n ? at : final ? n - partial_tail(p + i, n - i, G4_QUOTE)
                     : i + utf8_cut(p + i, n - i - partial_tail(p + i, n - i, G4_QUOTE));
            if (g->mode == G_STR) tc_emit_escaped(tc, p + i, k - i);
            else sb_put(&tc->nbuf, p + i, k - i);
            i = k;
            if (at < n) {
                i += strlen(G4_QUOTE);
                if (g->mode == G_STR) tc_emit_args(tc, "\"", 1);
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
