/* serve_chat.c - `pocket serve`'s chat formatting (tools/serve.h): a chat
 * request's messages checked and normalised into the conversation a
 * template is given (text parts joined, tool call arguments parsed into
 * objects, tools, chat_template_kwargs, reasoning_effort), rendered by the
 * model's Jinja template or the built-in formatter; where the last messages
 * start in the prompt (checkpoints), whether the prompt opened a <think>,
 * and the text that ends an assistant turn. */
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* ---- chat formatting ------------------------------------------------------------------- */

/* The text that ends an assistant turn in the template (an implicit stop
 * string, for models that write it as text rather than as a special token). */
const char *chat_end_marker(void) {
    if (!strcmp(S.chat_template, "llama3")) return "<|eot_id|>";
    if (!strcmp(S.chat_template, "gemma")) return "<end_of_turn>";
    if (!strcmp(S.chat_template, "gemma4")) return "<turn|>";
    if (!strncmp(S.chat_template, "deepseek", 8)) return "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    if (!strcmp(S.chat_template, "harmony")) return "<|return|>";
    return "<|im_end|>";
}

/* A message's content as one string: a string as it is, text parts
 * concatenated, null as "" (assistant messages, and any with tool calls).
 * New reference; NULL with e filled. */
static json_t *content_string(const json_t *content, size_t i, int null_ok, api_error *e) {
    if (json_is_string(content)) return json_incref((json_t *)content);
    if ((!content || json_is_null(content)) && null_ok) return json_string("");
    if (!json_is_array(content)) {
        api_fail(e, 400, "messages", "messages[%zu].content must be a string or an array of text parts%s", i,
                 null_ok ? " (or null)" : "");
        return NULL;
    }
    size_t total = 1;
    for (size_t k = 0; k < json_array_size(content); k++) {
        json_t *part = json_array_get(content, k);
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text)) {
            api_fail(e, 400, "messages", "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": string} "
                     "(this server takes text only)", i, k);
            return NULL;
        }
        total += json_string_length(text);
    }
    char *cat = malloc(total);
    if (!cat) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    size_t off = 0;
    for (size_t k = 0; k < json_array_size(content); k++) {
        json_t *text = json_object_get(json_array_get(content, k), "text");
        memcpy(cat + off, json_string_value(text), json_string_length(text));
        off += json_string_length(text);
    }
    json_t *v = json_stringn(cat, off);
    free(cat);
    if (!v) api_fail(e, 500, NULL, "out of memory");
    return v;
}

/* OpenAI's messages checked and made what templates expect (a new array;
 * NULL with e filled): roles system, developer, user, assistant, tool
 * (developer is system, except for gpt-oss's template, which has it);
 * content one string; assistant tool_calls with function.name, and
 * function.arguments parsed into an object when it is a JSON text of one
 * (as Hugging Face's templates are given it: Qwen3.5's iterates its items);
 * tool_call_id, name and reasoning_content passed as they are. */
static json_t *messages_normalize(const json_t *msgs, api_error *e) {
    if (!msgs) { api_fail(e, 400, "messages", "'messages' is required"); return NULL; }
    if (!json_is_array(msgs)) { api_fail(e, 400, "messages", "'messages' must be an array"); return NULL; }
    size_t n = json_array_size(msgs);
    if (n == 0) { api_fail(e, 400, "messages", "'messages' must not be empty"); return NULL; }
    json_t *out = json_array();
    if (!out) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        if (!json_is_object(m)) { api_fail(e, 400, "messages", "messages[%zu] must be an object", i); goto fail; }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) { api_fail(e, 400, "messages", "messages[%zu].role must be a string", i); goto fail; }
        const char *r = json_string_value(role);
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "developer") && strcmp(r, "tool")) {
            api_fail(e, 400, "messages", "messages[%zu].role '%.40s' is not one of system, developer, user, assistant, tool",
                     i, r);
            goto fail;
        }
        json_t *calls = json_object_get(m, "tool_calls");
        int has_calls = calls && !json_is_null(calls);
        if (has_calls && (strcmp(r, "assistant") || !json_is_array(calls))) {
            api_fail(e, 400, "messages", "messages[%zu].tool_calls must be an array (assistant messages only)", i);
            goto fail;
        }
        json_t *c = content_string(json_object_get(m, "content"), i, !strcmp(r, "assistant"), e);
        if (!c) goto fail;
        json_t *nm = json_copy(m);
        if (!nm || json_object_set_new(nm, "content", c)) { json_decref(nm); api_fail(e, 500, NULL, "out of memory"); goto fail; }
        json_array_append_new(out, nm);
        if (!strcmp(r, "developer") && strcmp(S.chat_template, "harmony"))
            json_object_set_new(nm, "role", json_string("system"));
        for (const char *const *k = (const char *const[]){"tool_call_id", "name", "reasoning_content", NULL}; *k; k++) {
            json_t *v = json_object_get(m, *k);
            if (json_is_null(v)) json_object_del(nm, *k);
            else if (v && !json_is_string(v)) { api_fail(e, 400, "messages", "messages[%zu].%s must be a string", i, *k); goto fail; }
        }
        if (!has_calls) { json_object_del(nm, "tool_calls"); continue; }
        json_t *nc = json_array();
        json_object_set_new(nm, "tool_calls", nc);
        for (size_t k = 0; k < json_array_size(calls); k++) {
            json_t *call = json_array_get(calls, k), *f = json_object_get(call, "function");
            json_t *name = json_object_get(f, "name"), *args = json_object_get(f, "arguments");
            if (!json_is_object(call) || !json_is_object(f) || !json_is_string(name)) {
                api_fail(e, 400, "messages", "messages[%zu].tool_calls[%zu] must be {\"id\", \"type\": \"function\", "
                         "\"function\": {\"name\": string, \"arguments\": string}}", i, k);
                goto fail;
            }
            json_t *ncall = json_copy(call), *nf = json_copy(f);
            if (!ncall || !nf) { json_decref(ncall); json_decref(nf); api_fail(e, 500, NULL, "out of memory"); goto fail; }
            json_object_set_new(ncall, "function", nf);
            json_array_append_new(nc, ncall);
            if (json_is_string(args)) {
                json_t *obj = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL);
                if (json_is_object(obj)) json_object_set(nf, "arguments", obj);
                json_decref(obj);
            } else if (args && !json_is_object(args) && !json_is_null(args)) {
                api_fail(e, 400, "messages", "messages[%zu].tool_calls[%zu].function.arguments must be a string", i, k);
                goto fail;
            }
        }
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* The conversation a chat template is given: {"messages": normalised,
 * "tools", "add_generation_prompt": true, the keys of chat_template_kwargs,
 * "reasoning_effort"} from a request (root). New reference; NULL with e. */
json_t *conversation_json(const json_t *root, api_error *e) {
    json_t *msgs = messages_normalize(json_object_get(root, "messages"), e);
    if (!msgs) return NULL;
    json_t *conv = json_pack("{s:o, s:b}", "messages", msgs, "add_generation_prompt", 1);
    if (!conv) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw)) { api_fail(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object"); goto fail; }
        const char *k;
        json_t *v;
        json_object_foreach(kw, k, v)
            if (strcmp(k, "messages") && strcmp(k, "add_generation_prompt")) json_object_set(conv, k, v);
    }
    json_t *re = json_object_get(root, "reasoning_effort");
    if (re && !json_is_null(re)) {
        const char *x = json_is_string(re) ? json_string_value(re) : "";
        if (strcmp(x, "low") && strcmp(x, "medium") && strcmp(x, "high") && strcmp(x, "minimal")) {
            api_fail(e, 400, "reasoning_effort", "'reasoning_effort' must be \"minimal\", \"low\", \"medium\" or \"high\"");
            goto fail;
        }
        if (!json_object_get(conv, "reasoning_effort")) json_object_set(conv, "reasoning_effort", re);
    }
    json_t *tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) { api_fail(e, 400, "tools", "'tools' must be an array"); goto fail; }
        for (size_t i = 0; i < json_array_size(tools); i++) {
            json_t *t = json_array_get(tools, i), *type = json_object_get(t, "type"), *f = json_object_get(t, "function");
            if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function") ||
                !json_is_object(f) || !json_is_string(json_object_get(f, "name"))) {
                api_fail(e, 400, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": string, "
                         "\"description\"?, \"parameters\"?}}", i);
                goto fail;
            }
        }
        if (json_array_size(tools)) json_object_set(conv, "tools", tools);
    }
    return conv;
fail:
    json_decref(conv);
    return NULL;
}

/* The prompt text of conv's first n messages (the whole conversation: n =
 * its count), with the opening of the assistant's turn if add_gen: the
 * model's Jinja template (S.jinja), else the built-in formatter. NULL with
 * e filled (a template error: 400 naming its line). */
char *render_chat(const json_t *conv, size_t n, int add_gen, api_error *e) {
    json_t *msgs = json_object_get(conv, "messages");
    char *out = NULL;
    pk_error err = {0};
    if (!S.jinja) {
        pk_chat_message *mv = calloc(n ? n : 1, sizeof *mv);
        if (!mv) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
        for (size_t i = 0; i < n; i++) {
            json_t *m = json_array_get(msgs, i), *calls = json_object_get(m, "tool_calls");
            if (calls && json_array_size(calls)) {
                api_fail(e, 400, "messages", "messages[%zu] has tool_calls: they need the model's own chat template "
                         "(this server formats with the built-in '%s'; start it without --chat-template)", i,
                         S.chat_template);
                free(mv);
                return NULL;
            }
            mv[i].role = json_string_value(json_object_get(m, "role"));
            if (!strcmp(mv[i].role, "developer")) mv[i].role = "system";
            mv[i].content = json_string_value(json_object_get(m, "content"));
        }
        if (pk_chat_format(S.model, S.chat_template, mv, (int)n, add_gen, &out, &err)) {
            api_fail(e, 400, "messages", "the messages could not be formatted: %s", err.msg);
            out = NULL;
        }
        free(mv);
        return out;
    }
    json_t *c = json_copy((json_t *)conv);
    json_t *part = n < json_array_size(msgs) ? json_array() : json_incref(msgs);
    for (size_t i = 0; part && n < json_array_size(msgs) && i < n; i++) json_array_append(part, json_array_get(msgs, i));
    char *text = NULL;
    if (c && part) {
        json_object_set_new(c, "messages", part);
        part = NULL;
        json_object_set_new(c, "add_generation_prompt", json_boolean(add_gen));
        text = json_dumps(c, JSON_COMPACT);
    }
    json_decref(part);
    json_decref(c);
    if (!text) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    pk_jinja_params p;
    pk_chat_jinja_params(S.model, &p);
    p.add_generation_prompt = add_gen;
    if (pk_chat_jinja_render(S.model, S.jinja, text, strlen(text), &p, &out, NULL, &err)) {
        api_fail(e, err.code == PK_ERR_NOMEM ? 500 : 400, "messages", "the chat template failed: %s", err.msg);
        set_code(e, "template_error");
        out = NULL;
    }
    free(text);
    return out;
}

/* Where the last messages of a chat start in j's prompt (for checkpoints):
 * for i = n, n - 1, n - 2 (the generation prompt, the last message, the one
 * before), the length of the tokens of the first i messages rendered
 * without the generation prompt, kept in j->starts only where the prompt's
 * tokens begin with exactly those tokens (text merged across the boundary
 * into one token makes it no boundary; a template that refuses such a
 * conversation gives none). */
void message_starts(job *j, const json_t *conv) {
    size_t n = json_array_size(json_object_get(conv, "messages"));
    int32_t *tok = malloc((size_t)(j->n_prompt + 1) * sizeof *tok);
    for (int k = 0; tok && k < N_STARTS && n >= (size_t)k + 1; k++) {
        api_error e;
        char *text = render_chat(conv, n - (size_t)k, 0, &e);
        if (!text) continue;
        int m = pk_model_tokenize(S.model, text, strlen(text), tok, j->n_prompt + 1, 1, 1);
        free(text);
        if (m > 0 && m <= j->n_prompt && !memcmp(tok, j->prompt, (size_t)m * sizeof *tok)) j->starts[k] = m;
    }
    free(tok);
}

/* Whether a rendered prompt ends inside a <think> block its template opened
 * (Qwen3.5 with thinking on): the answer then starts with the reasoning. */
int prompt_opens_think(const char *p) {
    if (!strcmp(S.chat_template, "harmony") || !strcmp(S.chat_template, "gemma4")) return 0;
    size_t n = strlen(p);
    while (n && (p[n - 1] == '\n' || p[n - 1] == ' ')) n--;
    return n >= 7 && !memcmp(p + n - 7, "<think>", 7);
}
