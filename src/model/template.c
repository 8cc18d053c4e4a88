/* template.c - a model's chat template: the GGUF's tokenizer.chat_template,
 * the family it belongs to (src/text/chat.c formats each family), and
 * pk_chat_format, which writes the family's text with the model's BOS token
 * where the template writes it and the tokenizer does not add it; and the
 * template run as Jinja (src/text/jinja*.c) with the texts of the model's
 * BOS / EOS tokens, a leading BOS text dropped when the tokenizer adds BOS. */
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "model/model.h"
#include "text/chat.h"

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
        int t = pk_chat_family(name);
        if (t < 0)
            return pk_errorf(err, PK_ERR_ARG, "unknown chat template '%s' (known: " TMPL_KNOWN ")",
                             name);
        if (out) *out = pk_chat_family_name(t);
        return PK_OK;
    }
    if (!m) return pk_errorf(err, PK_ERR_ARG, "pk_chat_resolve: no model and no template name");
    size_t n;
    const char *text = pk_chat_template_text(m, &n);
    const char *path = m->path ? m->path : "model";
    if (!text)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: the model has no chat template "
                         "(tokenizer.chat_template); name one: " TMPL_KNOWN, path);
    int t = pk_chat_family_of(text, n);
    if (t < 0) {
        char ex[256];
        excerpt(text, n, ex, sizeof ex);
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: chat template not recognised: \"%s\" "
                         "(name one instead: " TMPL_KNOWN ")", path, ex);
    }
    if (out) *out = pk_chat_family_name(t);
    return PK_OK;
}


/* The BOS token's text when the template family writes it (llama3, gemma,
 * gemma4, deepseek2, deepseek3) but
 * the model's tokenizer does not add it by itself, and the token is special
 * (so parse_special turns the text back into it); else NULL. */
static const char *bos_text(const pk_model *m, int t, size_t *len) {
    if (t != TMPL_LLAMA3 && t != TMPL_GEMMA && t != TMPL_GEMMA4 && t != TMPL_DEEPSEEK2 && t != TMPL_DEEPSEEK3)
        return NULL;
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
    const char *bos = bos_text(m, pk_chat_family(which), &blen);
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

/* ---- Jinja: the model's own template (text/jinja*.c) ---------------------------------- */

int pk_chat_jinja_parse(const pk_model *m, pk_jinja **out, pk_error *err) {
    if (out) *out = NULL;
    if (!m) return pk_errorf(err, PK_ERR_ARG, "pk_chat_jinja_parse: no model");
    size_t n;
    const char *text = pk_chat_template_text(m, &n);
    const char *path = m->path ? m->path : "model";
    if (!text)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: the model has no chat template (tokenizer.chat_template)", path);
    pk_error local = {0};
    int rc = pk_jinja_parse(text, n, 0, out, &local);
    if (rc) return pk_errorf(err, rc, "%s: tokenizer.chat_template: %s", path, local.msg);
    return PK_OK;
}

void pk_chat_jinja_params(const pk_model *m, pk_jinja_params *p) {
    *p = pk_jinja_default_params();
    if (!m || !m->tok) return;
    int32_t bos = pk_tokenizer_bos(m->tok), eos = pk_tokenizer_eos(m->tok);
    if (bos >= 0) p->bos_token = pk_tokenizer_text(m->tok, bos);
    if (eos >= 0) p->eos_token = pk_tokenizer_text(m->tok, eos);
}

/* 1 if m's tokenizer puts BOS in front of a text by itself (add_special = 1) */
static int adds_bos(const pk_model *m) {
    int32_t bos = pk_model_bos(m);
    if (bos < 0) return 0;
    int32_t ids[4];
    int k = pk_model_tokenize(m, "", 0, ids, 4, 1, 0);
    return k >= 1 && k <= 4 && ids[0] == bos;
}

int pk_chat_jinja_render(const pk_model *m, const pk_jinja *t, const char *conversation, size_t len,
                         const pk_jinja_params *p, char **out, size_t *out_len, pk_error *err) {
    pk_jinja_params mp;
    if (!p) {
        pk_chat_jinja_params(m, &mp);
        p = &mp;
    }
    size_t n = 0;
    int rc = pk_jinja_render(t, conversation, len, p, out, &n, err);
    if (rc) return rc;
    if (m && p->bos_token && *p->bos_token && adds_bos(m)) {
        size_t bl = strlen(p->bos_token);
        if (n >= bl && !memcmp(*out, p->bos_token, bl)) {
            memmove(*out, *out + bl, n - bl + 1);
            n -= bl;
        }
    }
    if (out_len) *out_len = n;
    return PK_OK;
}

int pk_chat_render_template(const pk_model *m, const char *template_text, const char *conversation_json,
                            int add_generation_prompt, char **out, pk_error *err) {
    if (out) *out = NULL;
    if (!out) return pk_errorf(err, PK_ERR_ARG, "pk_chat_render_template: no output pointer");
    pk_jinja *t;
    int rc = template_text ? pk_jinja_parse(template_text, strlen(template_text), 0, &t, err)
                           : pk_chat_jinja_parse(m, &t, err);
    if (rc) return rc;
    pk_jinja_params p;
    pk_chat_jinja_params(m, &p);
    p.add_generation_prompt = add_generation_prompt;
    rc = pk_chat_jinja_render(m, t, conversation_json, conversation_json ? strlen(conversation_json) : 0, &p, out,
                              NULL, err);
    pk_jinja_free(t);
    return rc;
}
