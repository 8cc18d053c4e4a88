/* chat.c - chat templates: turn a conversation (an array of {role, content}
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
 *   deepseek2  SYSTEM\n\nUser: CONTENT\n\nAssistant: CONTENT<｜end▁of▁sentence｜>
 *           (DeepSeek-V2, V2-Lite, V2.5)
 *   deepseek3  SYSTEM\n\n<｜User｜>CONTENT<｜Assistant｜>CONTENT<｜end▁of▁sentence｜>
 *           (DeepSeek-V3, R1, Moonlight's DeepSeek-V3 format)
 *   harmony <|start|>ROLE<|message|>CONTENT<|end|>, an assistant turn closed
 *           by <|return|> (gpt-oss; OpenAI's "harmony" format)
 *
 * Content is written as given for chatml, deepseek2, deepseek3 and harmony
 * and trimmed of surrounding white space for llama3 and gemma (their Jinja
 * templates apply `| trim`). Each writer produces what llama.cpp's built-in
 * formatter (llama-chat.cpp, used without --jinja) produces for the family:
 * for harmony that is the plain turn structure, without the system preamble
 * (knowledge cutoff, reasoning effort, channel list) or the channel of past
 * assistant turns that gpt-oss's Jinja template adds; the model answers in
 * its channels (<|channel|>analysis ... <|channel|>final ...) and pocket
 * returns that text as generated.
 * The BOS token is left to the tokenizer (see pk_chat_format in pocket.h).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "model.h"

enum { TMPL_CHATML, TMPL_LLAMA3, TMPL_GEMMA, TMPL_DEEPSEEK2, TMPL_DEEPSEEK3, TMPL_HARMONY, TMPL_COUNT };
static const char *const tmpl_names[TMPL_COUNT] = {"chatml", "llama3", "gemma", "deepseek2", "deepseek3", "harmony"};
#define TMPL_KNOWN "chatml, llama3, gemma, deepseek2, deepseek3, harmony"

/* ---- a growable string ------------------------------------------------------ */

typedef struct sbuf {
    char *p;
    size_t n, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) {
            if (cap > SIZE_MAX / 2) { b->oom = 1; return; }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

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

static int detect(const char *t, size_t n) {
    if (!t) return -1;
    if (has(t, n, "<|im_start|>")) {
        /* Phi-4 and SmolVLM reuse <|im_start|> with other separators. */
        if (has(t, n, "<|im_sep|>") || has(t, n, "<end_of_utterance>")) return -1;
        return TMPL_CHATML;
    }
    if (has(t, n, "<|start_header_id|>") && has(t, n, "<|end_header_id|>")) return TMPL_LLAMA3;
    if (has(t, n, "<start_of_turn>")) return TMPL_GEMMA;
    if (has(t, n, "'Assistant: ' + message['content'] + eos_token")) return TMPL_DEEPSEEK2;
    if (has(t, n, DS_ASSISTANT) && has(t, n, DS_USER) && has(t, n, DS_EOS)) return TMPL_DEEPSEEK3;
    if (has(t, n, "<|start|>") && has(t, n, "<|channel|>")) return TMPL_HARMONY;
    return -1;
}

const char *pk_chat_detect(const char *tmpl, size_t len) {
    int t = detect(tmpl, len);
    return t < 0 ? NULL : tmpl_names[t];
}

const char *pk_chat_template_text(const pk_model *m, size_t *len) {
    if (len) *len = 0;
    if (!m || !m->gguf) return NULL;
    const gguf_kv *kv = gguf_find_kv(m->gguf, "tokenizer.chat_template");
    if (!kv || kv->type != GGUF_STRING) return NULL;
    if (len) *len = (size_t)kv->str.len;
    return kv->str.ptr;
}

const char *pk_chat_template_name(const pk_model *m) {
    size_t n;
    const char *t = pk_chat_template_text(m, &n);
    return t ? pk_chat_detect(t, n) : NULL;
}

static int lookup_name(const char *name) {
    for (int i = 0; i < TMPL_COUNT; i++)
        if (!strcmp(name, tmpl_names[i])) return i;
    return -1;
}

/* Up to 40 characters of s, with control characters shown as escapes. */
static void excerpt(const char *s, size_t n, char *out, size_t cap) {
    size_t o = 0, i = 0;
    for (; i < n && o + 5 < cap && i < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n') { out[o++] = '\\'; out[o++] = 'n'; }
        else if (c < 0x20 || c == 0x7f) { out[o++] = '\\'; out[o++] = 'x';
            out[o++] = "0123456789abcdef"[c >> 4]; out[o++] = "0123456789abcdef"[c & 15]; }
        else out[o++] = (char)c;
    }
    if (i < n && o + 4 < cap) { memcpy(out + o, "...", 3); o += 3; }
    out[o] = 0;
}

int pk_chat_resolve(const pk_model *m, const char *name, const char **out, pk_error *err) {
    if (out) *out = NULL;
    if (name && *name) {
        int t = lookup_name(name);
        if (t < 0)
            return pk_errorf(err, PK_ERR_ARG, "unknown chat template '%s' (known: " TMPL_KNOWN ")",
                             name);
        if (out) *out = tmpl_names[t];
        return PK_OK;
    }
    if (!m) return pk_errorf(err, PK_ERR_ARG, "pk_chat_resolve: no model and no template name");
    size_t n;
    const char *text = pk_chat_template_text(m, &n);
    const char *path = m->path ? m->path : "model";
    if (!text)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: the model has no chat template "
                         "(tokenizer.chat_template); name one: " TMPL_KNOWN, path);
    int t = detect(text, n);
    if (t < 0) {
        char ex[256];
        excerpt(text, n, ex, sizeof ex);
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: chat template not recognised: \"%s\" "
                         "(name one instead: " TMPL_KNOWN ")", path, ex);
    }
    if (out) *out = tmpl_names[t];
    return PK_OK;
}

/* ---- formatting ------------------------------------------------------------- */

int pk_chat_apply(const char *name, const pk_chat_message *msgs, int n, int add_generation_prompt,
                  char **out, pk_error *err) {
    if (!out) return pk_errorf(err, PK_ERR_ARG, "pk_chat_apply: no output pointer");
    *out = NULL;
    int t = name ? lookup_name(name) : -1;
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

/* The BOS token's text when the template family writes it (llama3, gemma,
 * deepseek2, deepseek3) but
 * the model's tokenizer does not add it by itself, and the token is special
 * (so parse_special turns the text back into it); else NULL. */
static const char *bos_text(const pk_model *m, int t, size_t *len) {
    if (t != TMPL_LLAMA3 && t != TMPL_GEMMA && t != TMPL_DEEPSEEK2 && t != TMPL_DEEPSEEK3) return NULL;
    int32_t bos = pk_model_bos(m);
    if (bos < 0) return NULL;
    int32_t ids[4];
    int k = pk_model_tokenize(m, "", 0, ids, 4, 1, 0);
    if (k >= 1 && k <= 4 && ids[0] == bos) return NULL;   /* the tokenizer adds it */
    /* only a control (3) or user-defined (4) token is parsed back from its text */
    const gguf_kv *ty = gguf_find_kv(m->gguf, "tokenizer.ggml.token_type");
    if (!ty || ty->type != GGUF_ARRAY || ty->arr_type == GGUF_STRING || (uint64_t)bos >= ty->arr_n)
        return NULL;
    int64_t type = gguf_arr_int(ty, (uint64_t)bos);
    if (type != 3 && type != 4) return NULL;
    const gguf_kv *kv = gguf_find_kv(m->gguf, "tokenizer.ggml.tokens");
    if (!kv || kv->type != GGUF_ARRAY || kv->arr_type != GGUF_STRING || !kv->arr_str ||
        (uint64_t)bos >= kv->arr_n)
        return NULL;
    *len = (size_t)kv->arr_str[bos].len;
    return kv->arr_str[bos].ptr;
}

int pk_chat_format(const pk_model *m, const char *name, const pk_chat_message *msgs, int n,
                   int add_generation_prompt, char **out, pk_error *err) {
    if (!out) return pk_errorf(err, PK_ERR_ARG, "pk_chat_format: no output pointer");
    *out = NULL;
    const char *which;
    int rc = pk_chat_resolve(m, name, &which, err);
    if (rc) return rc;
    char *body;
    rc = pk_chat_apply(which, msgs, n, add_generation_prompt, &body, err);
    if (rc || !m) { *out = body; return rc; }
    size_t blen = 0;
    const char *bos = bos_text(m, lookup_name(which), &blen);
    if (!bos || !blen) { *out = body; return PK_OK; }
    size_t len = strlen(body);
    char *s = malloc(blen + len + 1);
    if (!s) {
        free(body);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory formatting a chat of %d messages", n);
    }
    memcpy(s, bos, blen);
    memcpy(s + blen, body, len + 1);
    free(body);
    *out = s;
    return PK_OK;
}
