/* text/chat.c - chat templates: turn a conversation (an array of {role, content}
 * messages) into the prompt text a chat-tuned model was trained on.
 *
 * pocket does not run Jinja. It recognises the family of the GGUF's
 * tokenizer.chat_template by the special-token markers the template writes
 * (the approach llama.cpp takes) and formats with a built-in writer for that
 * family:
 *
 *   chatml  <|im_start|>ROLE\nCONTENT<|im_end|>\n ...   (Qwen, many others)
 *   llama3  <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
 *   gemma   <start_of_turn>ROLE\nCONTENT<end_of_turn>\n  (assistant is "model",
 *           system text is folded into the first user turn)
 *   gemma4  <|turn>ROLE\nCONTENT<turn|>\n  (Gemma-4: assistant is "model", a
 *           leading system turn of its own; the generation prompt closes an
 *           empty thinking channel, <|turn>model\n<|channel>thought\n<channel|>,
 *           as the template does unless enable_thinking is set)
 *   deepseek2  SYSTEM\n\nUser: CONTENT\n\nAssistant: CONTENT<｜end▁of▁sentence｜>
 *           (DeepSeek-V2, V2-Lite, V2.5)
 *   deepseek3  SYSTEM\n\n<｜User｜>CONTENT<｜Assistant｜>CONTENT<｜end▁of▁sentence｜>
 *           (DeepSeek-V3, R1, Moonlight's DeepSeek-V3 format)
 *   harmony <|start|>ROLE<|message|>CONTENT<|end|>, an assistant turn closed
 *           by <|return|> (gpt-oss; OpenAI's "harmony" format)
 *
 * Content is written as given for chatml, deepseek2, deepseek3 and harmony
 * and trimmed of surrounding white space for llama3, gemma and gemma4 (their
 * Jinja templates apply `| trim`). Each writer produces what llama.cpp's
 * built-in formatter (llama-chat.cpp, used without --jinja) produces for the
 * family; gemma4, which has no built-in formatter there, follows the text of
 * Gemma-4's Jinja template for plain conversations (no tools, no images):
 * for harmony that is the plain turn structure, without the system preamble
 * (knowledge cutoff, reasoning effort, channel list) or the channel of past
 * assistant turns that gpt-oss's Jinja template adds; the model answers in
 * its channels (<|channel|>analysis ... <|channel|>final ...), which
 * pk_chat_reasoning (below) tells apart.
 * The BOS token is left to the tokenizer (see pk_chat_format in pocket.h).
 *
 * pk_chat_reasoning splits what an assistant turn generates into its answer
 * and its reasoning, as llama.cpp's server does by default: harmony's
 * analysis channel, gemma4's <|channel>thought ... <channel|>, and a leading
 * <think> ... </think> (Qwen3, DeepSeek-R1) for the other families.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/chat.h"
#include "text/strbuf.h"

static const char *const tmpl_names[TMPL_COUNT] = {"chatml", "llama3", "gemma", "gemma4", "deepseek2", "deepseek3",
                                                   "harmony"};

const char *pk_chat_family_name(int family) {
    return family >= 0 && family < TMPL_COUNT ? tmpl_names[family] : NULL;
}

/* s without leading and trailing white space: start in *out, length returned. */
static size_t trimmed(const char *s, const char **out) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s)) { s++; n--; }
    while (n && isspace((unsigned char)s[n - 1])) n--;
    *out = s;
    return n;
}

static void sb_trim(sbuf *b, const char *s) {
    const char *t;
    size_t n = trimmed(s, &t);
    sb_put(b, t, n);
}

/* ---- the writers ------------------------------------------------------------ */

static void fmt_chatml(sbuf *b, const pk_chat_message *msgs, int n, int add_gen) {
    for (int i = 0; i < n; i++) {
        sb_str(b, "<|im_start|>");
        sb_str(b, msgs[i].role);
        sb_str(b, "\n");
        sb_str(b, msgs[i].content);
        sb_str(b, "<|im_end|>\n");
    }
    if (add_gen) sb_str(b, "<|im_start|>assistant\n");
}

static void fmt_llama3(sbuf *b, const pk_chat_message *msgs, int n, int add_gen) {
    for (int i = 0; i < n; i++) {
        sb_str(b, "<|start_header_id|>");
        sb_str(b, msgs[i].role);
        sb_str(b, "<|end_header_id|>\n\n");
        sb_trim(b, msgs[i].content);
        sb_str(b, "<|eot_id|>");
    }
    if (add_gen) sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Gemma has no system role: system texts (joined by a blank line) open the
 * next non-model turn. A system text with no turn after it becomes a user
 * turn of its own. */
static void fmt_gemma(sbuf *b, const pk_chat_message *msgs, int n, int add_gen) {
    sbuf sys = {0};
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (!strcmp(role, "system")) {
            if (sys.n) sb_str(&sys, "\n\n");
            sb_trim(&sys, msgs[i].content);
            continue;
        }
        int model = !strcmp(role, "assistant") || !strcmp(role, "model");
        sb_str(b, "<start_of_turn>");
        sb_str(b, model ? "model" : role);
        sb_str(b, "\n");
        if (sys.n && !model) {
            sb_put(b, sys.p, sys.n);
            sb_str(b, "\n\n");
            sys.n = 0;
        }
        sb_trim(b, msgs[i].content);
        sb_str(b, "<end_of_turn>\n");
    }
    if (sys.n) {
        sb_str(b, "<start_of_turn>user\n");
        sb_put(b, sys.p, sys.n);
        sb_str(b, "<end_of_turn>\n");
    }
    if (sys.oom) b->oom = 1;
    free(sys.p);
    if (add_gen) sb_str(b, "<start_of_turn>model\n");
}

/* An earlier model answer without its thinking: every <|channel>...<channel|>
 * block is dropped (the template's strip_thinking), then the rest trimmed. */
static void sb_gemma4_answer(sbuf *b, const char *s) {
    sbuf out = {0};
    sb_str(&out, "");
    for (const char *part = s;;) {
        const char *end = strstr(part, "<channel|>");
        size_t n = end ? (size_t)(end - part) : strlen(part);
        const char *open = memmem(part, n, "<|channel>", 10);
        sb_put(&out, part, open ? (size_t)(open - part) : n);
        if (!end) break;
        part = end + 10;
    }
    if (out.oom) b->oom = 1;
    else sb_trim(b, out.p);
    free(out.p);
}

/* Gemma-4: a leading system message is a turn of its own; tool messages are
 * left out (no tool calls here); a model message right after another model
 * message continues its turn (no new header), as the template writes. */
static void fmt_gemma4(sbuf *b, const pk_chat_message *msgs, int n, int add_gen) {
    const char *prev = NULL;                /* the previous non-tool role */
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (!strcmp(role, "tool")) continue;
        int model = !strcmp(role, "assistant") || !strcmp(role, "model");
        if (!(model && prev && !strcmp(prev, "assistant"))) {
            sb_str(b, "<|turn>");
            sb_str(b, model ? "model" : role);
            sb_str(b, "\n");
        }
        if (model) sb_gemma4_answer(b, msgs[i].content);
        else sb_trim(b, msgs[i].content);
        sb_str(b, "<turn|>\n");
        prev = role;
    }
    if (add_gen) sb_str(b, "<|turn>model\n<|channel>thought\n<channel|>");
}

/* DeepSeek-V2 and V3: system texts open the prompt, each followed by a
 * blank line; user and assistant turns by their markers; an assistant turn
 * ends with the end-of-sentence token. Other roles are left out, as
 * llama.cpp does. */
#define DS_EOS "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
#define DS_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
static void fmt_deepseek(sbuf *b, const pk_chat_message *msgs, int n, int add_gen, int v3) {
    for (int i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        if (!strcmp(role, "system")) {
            sb_str(b, msgs[i].content);
            sb_str(b, "\n\n");
        } else if (!strcmp(role, "user")) {
            sb_str(b, v3 ? DS_USER : "User: ");
            sb_str(b, msgs[i].content);
            if (!v3) sb_str(b, "\n\n");
        } else if (!strcmp(role, "assistant")) {
            sb_str(b, v3 ? DS_ASSISTANT : "Assistant: ");
            sb_str(b, msgs[i].content);
            sb_str(b, DS_EOS);
        }
    }
    if (add_gen) sb_str(b, v3 ? DS_ASSISTANT : "Assistant:");
}

static void fmt_harmony(sbuf *b, const pk_chat_message *msgs, int n, int add_gen) {
    for (int i = 0; i < n; i++) {
        sb_str(b, "<|start|>");
        sb_str(b, msgs[i].role);
        sb_str(b, "<|message|>");
        sb_str(b, msgs[i].content);
        sb_str(b, strcmp(msgs[i].role, "assistant") ? "<|end|>" : "<|return|>");
    }
    if (add_gen) sb_str(b, "<|start|>assistant");
}

/* ---- detection -------------------------------------------------------------- */

static int has(const char *s, size_t n, const char *needle) {
    return memmem(s, n, needle, strlen(needle)) != NULL;
}

int pk_chat_family_of(const char *t, size_t n) {
    if (!t) return -1;
    if (has(t, n, "<|im_start|>")) {
        /* Phi-4 and SmolVLM reuse <|im_start|> with other separators. */
        if (has(t, n, "<|im_sep|>") || has(t, n, "<end_of_utterance>")) return -1;
        return TMPL_CHATML;
    }
    if (has(t, n, "<|start_header_id|>") && has(t, n, "<|end_header_id|>")) return TMPL_LLAMA3;
    if (has(t, n, "<|turn>") && has(t, n, "<turn|>")) return TMPL_GEMMA4;
    if (has(t, n, "<start_of_turn>")) return TMPL_GEMMA;
    if (has(t, n, "'Assistant: ' + message['content'] + eos_token")) return TMPL_DEEPSEEK2;
    if (has(t, n, DS_ASSISTANT) && has(t, n, DS_USER) && has(t, n, DS_EOS)) return TMPL_DEEPSEEK3;
    if (has(t, n, "<|start|>") && has(t, n, "<|channel|>")) return TMPL_HARMONY;
    return -1;
}

const char *pk_chat_detect(const char *tmpl, size_t len) {
    int t = pk_chat_family_of(tmpl, len);
    return t < 0 ? NULL : tmpl_names[t];
}

int pk_chat_family(const char *name) {
    for (int i = 0; i < TMPL_COUNT; i++)
        if (!strcmp(name, tmpl_names[i])) return i;
    return -1;
}

/* ---- formatting ------------------------------------------------------------- */

int pk_chat_apply(const char *name, const pk_chat_message *msgs, int n, int add_generation_prompt,
                  char **out, pk_error *err) {
    if (!out) return pk_errorf(err, PK_ERR_ARG, "pk_chat_apply: no output pointer");
    *out = NULL;
    int t = name ? pk_chat_family(name) : -1;
    if (t < 0)
        return pk_errorf(err, PK_ERR_ARG, "unknown chat template '%s' (known: " TMPL_KNOWN ")",
                         name ? name : "(null)");
    if (n < 0 || (n > 0 && !msgs)) return pk_errorf(err, PK_ERR_ARG, "pk_chat_apply: bad message array");
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content || !*msgs[i].role)
            return pk_errorf(err, PK_ERR_ARG, "chat message %d has no %s", i,
                             msgs[i].role && *msgs[i].role ? "content" : "role");
    sbuf b = {0};
    sb_str(&b, "");   /* an empty conversation is "", not NULL */
    switch (t) {
    case TMPL_CHATML: fmt_chatml(&b, msgs, n, add_generation_prompt); break;
    case TMPL_LLAMA3: fmt_llama3(&b, msgs, n, add_generation_prompt); break;
    case TMPL_GEMMA: fmt_gemma(&b, msgs, n, add_generation_prompt); break;
    case TMPL_GEMMA4: fmt_gemma4(&b, msgs, n, add_generation_prompt); break;
    case TMPL_DEEPSEEK2: fmt_deepseek(&b, msgs, n, add_generation_prompt, 0); break;
    case TMPL_DEEPSEEK3: fmt_deepseek(&b, msgs, n, add_generation_prompt, 1); break;
    default: fmt_harmony(&b, msgs, n, add_generation_prompt); break;
    }
    if (b.oom) {
        free(b.p);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory formatting a chat of %d messages", n);
    }
    *out = b.p;
    return PK_OK;
}

/* ---- reasoning and answer ----------------------------------------------------------- */

/* The generated text is fed in pieces; what is decided goes to content or
 * reasoning, and the bytes that might still be the start of a marker wait in
 * pend. The markers:
 *   SPLIT_THINK    <think> (only as the first non-blank text) ... </think>
 *   SPLIT_GEMMA4   <|channel>thought ... <channel|>, anywhere in the answer;
 *                  a stray <channel|> is dropped
 *   SPLIT_HARMONY  messages [<|start|>]HEADER<|message|>BODY<|end|>: the body
 *                  of a header naming <|channel|>analysis is reasoning, any
 *                  other body (final, commentary) content; headers and
 *                  markers are dropped. Text that does not start like a header
 *                  (<|channel|>..., assistant...) is all content.
 * Reasoning is trimmed of white space at both ends, and so is the start of
 * the answer after </think>; harmony bodies are kept as written. */
enum { SPLIT_THINK, SPLIT_GEMMA4, SPLIT_HARMONY };
enum { ST_START, ST_REASON, ST_CONTENT, ST_H_HEADER, ST_H_BODY, ST_H_BETWEEN, ST_RAW };

struct pk_chat_reasoning {
    int kind, state;
    int to_reasoning;           /* ST_H_BODY: the body is reasoning */
    int trim_lead;              /* drop white space at the start of what comes next */
    sbuf pend, content, reasoning;
};

#define HARMONY_HEADER_MAX 512  /* a longer header is not one: the text is content */

int pk_chat_reasoning_new(const char *name, pk_chat_reasoning **out, pk_error *err) {
    if (!out) return pk_errorf(err, PK_ERR_ARG, "pk_chat_reasoning_new: no output pointer");
    *out = NULL;
    int t = name ? pk_chat_family(name) : -1;
    if (t < 0)
        return pk_errorf(err, PK_ERR_ARG, "unknown chat template '%s' (known: " TMPL_KNOWN ")",
                         name ? name : "(null)");
    pk_chat_reasoning *r = calloc(1, sizeof *r);
    if (!r) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    r->kind = t == TMPL_HARMONY ? SPLIT_HARMONY : t == TMPL_GEMMA4 ? SPLIT_GEMMA4 : SPLIT_THINK;
    r->state = r->kind == SPLIT_HARMONY ? ST_H_HEADER : ST_START;
    sb_str(&r->content, "");
    sb_str(&r->reasoning, "");
    sb_str(&r->pend, "");
    if (r->content.oom || r->reasoning.oom || r->pend.oom) {
        pk_chat_reasoning_free(r);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    }
    *out = r;
    return PK_OK;
}

void pk_chat_reasoning_free(pk_chat_reasoning *r) {
    if (!r) return;
    free(r->pend.p);
    free(r->content.p);
    free(r->reasoning.p);
    free(r);
}

/* Drop the first k bytes of pend. */
static void pend_take(pk_chat_reasoning *r, size_t k) { sb_take(&r->pend, k); }

/* Move k bytes of pend to dst (white space at its end kept back in pend
 * unless final, when reasoning is trimmed). */
static void emit(pk_chat_reasoning *r, sbuf *dst, size_t k, int trim_end) {
    size_t e = k;
    if (trim_end) while (e > 0 && isspace((unsigned char)r->pend.p[e - 1])) e--;
    sb_put(dst, r->pend.p, e);
    pend_take(r, k);
}

/* One step over pend; returns 1 when something changed (call again). */
static int split_step(pk_chat_reasoning *r, int final) {
    const char *p = r->pend.p;
    size_t n = r->pend.n;
    if (r->trim_lead) {
        size_t k = 0;
        while (k < n && isspace((unsigned char)p[k])) k++;
        if (k) { pend_take(r, k); return 1; }
        if (n) r->trim_lead = 0;
        if (!n) return 0;
    }
    const char *open = r->kind == SPLIT_GEMMA4 ? "<|channel>thought" : "<think>";
    const char *close = r->kind == SPLIT_GEMMA4 ? "<channel|>" : "</think>";
    switch (r->state) {
    case ST_START: {
        size_t k = 0;
        while (k < n && isspace((unsigned char)p[k])) k++;
        if (n - k >= strlen(open) && !memcmp(p + k, open, strlen(open))) {
            pend_take(r, k + strlen(open));
            r->state = ST_REASON;
            r->trim_lead = 1;
            return 1;
        }
        if (!final && agrees(p + k, n - k, open)) return 0;   /* could still open */
        r->state = ST_CONTENT;
        return 1;
    }
    case ST_REASON: {
        size_t at = find_at(p, n, close);
        if (at < n) {
            emit(r, &r->reasoning, at, 1);
            pend_take(r, strlen(close));
            r->state = ST_CONTENT;
            r->trim_lead = r->kind == SPLIT_THINK;
            return 1;
        }
        if (final) { emit(r, &r->reasoning, n, 1); return n > 0; }
        size_t k = n - partial_tail(p, n, close);
        while (k > 0 && isspace((unsigned char)p[k - 1])) k--;   /* may be the end */
        if (!k) return 0;
        emit(r, &r->reasoning, k, 0);
        return 1;
    }
    case ST_CONTENT:
        if (r->kind == SPLIT_GEMMA4) {
            size_t a = find_at(p, n, open), c = find_at(p, n, close);
            if (a < n || c < n) {
                int opens = a < c;
                emit(r, &r->content, opens ? a : c, 0);
                pend_take(r, strlen(opens ? open : close));
                if (opens) { r->state = ST_REASON; r->trim_lead = 1; }
                return 1;
            }
            size_t ta = partial_tail(p, n, open), tc = partial_tail(p, n, close);
            size_t k = final ? n : n - (ta > tc ? ta : tc);
            if (!k) return 0;
            emit(r, &r->content, k, 0);
            return 1;
        }
        /* fall through - after </think> everything is the answer */
    case ST_RAW:
        if (!n) return 0;
        emit(r, &r->content, n, 0);
        return 1;
    case ST_H_HEADER: {
        /* decided on the first bytes alone, so that any cut of the text agrees */
        int header = agrees(p, n, "<|channel|>") || agrees(p, n, "assistant");
        size_t lim = n < HARMONY_HEADER_MAX + 11 ? n : HARMONY_HEADER_MAX + 11;
        size_t at = header ? find_at(p, lim, "<|message|>") : lim;
        if (at < lim) {
            r->to_reasoning = find_at(p, at, "<|channel|>analysis") < at;
            pend_take(r, at + 11);
            r->state = ST_H_BODY;
            return 1;
        }
        int short_enough = n < HARMONY_HEADER_MAX + 11;
        if (header && short_enough && !final) return 0;
        if (header && short_enough && find_at(p, n, "<|channel|>") < n) {   /* final: a header cut short */
            pend_take(r, n);
            return n > 0;
        }
        r->state = ST_RAW;
        return 1;
    }
    case ST_H_BODY: {
        sbuf *dst = r->to_reasoning ? &r->reasoning : &r->content;
        size_t at = find_at(p, n, "<|end|>");
        if (at < n) {
            emit(r, dst, at, 0);
            pend_take(r, 7);
            r->state = ST_H_BETWEEN;
            return 1;
        }
        size_t k = final ? n : n - partial_tail(p, n, "<|end|>");
        if (!k) return 0;
        emit(r, dst, k, 0);
        return 1;
    }
    default:   /* ST_H_BETWEEN */
        if (n >= 9 && !memcmp(p, "<|start|>", 9)) {
            pend_take(r, 9);
            r->state = ST_H_HEADER;
            return 1;
        }
        if (!n || (!final && agrees(p, n, "<|start|>"))) return 0;
        r->state = ST_H_HEADER;                       /* a header without <|start|> */
        return 1;
    }
}

int pk_chat_reasoning_feed(pk_chat_reasoning *r, const char *text, size_t n, int final) {
    if (!r || (!text && n)) return PK_ERR_ARG;
    sb_put(&r->pend, text ? text : "", n);
    while (!r->pend.oom && split_step(r, final)) {}
    return r->pend.oom || r->content.oom || r->reasoning.oom ? PK_ERR_NOMEM : PK_OK;
}

const char *pk_chat_reasoning_content(const pk_chat_reasoning *r, size_t *len) {
    if (len) *len = r ? r->content.n : 0;
    return r ? r->content.p : NULL;
}

const char *pk_chat_reasoning_text(const pk_chat_reasoning *r, size_t *len) {
    if (len) *len = r ? r->reasoning.n : 0;
    return r ? r->reasoning.p : NULL;
}
