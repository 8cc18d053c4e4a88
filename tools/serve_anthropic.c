/* tools/serve_anthropic.c - Anthropic's Messages API (POST /v1/messages and
 * /v1/messages/count_tokens) as a translation over the server's one request
 * path, OpenAI chat completions (tools/serve_api.h).
 *
 * Request: model and max_tokens (required), system (a string or text
 * blocks), messages (role user, assistant or system; content a string or
 * blocks), tools, tool_choice, stop_sequences, temperature, top_p, top_k,
 * stream, thinking, output_config (effort, format), metadata.user_id ->
 * the OpenAI chat request. Blocks: text; tool_result (a string or text
 * blocks; is_error prefixes "Error: ") becomes a tool message in place; an
 * assistant's text, thinking (-> reasoning_content) and tool_use (->
 * tool_calls) blocks become one assistant message; redacted_thinking is
 * dropped (Anthropic's encrypted reasoning: nothing a local model can read).
 * Images, documents and the blocks and tools of Anthropic's server tools
 * are refused, naming the block; so is any top-level field this file does
 * not know (as Anthropic's API refuses extra inputs). Hints with no local
 * meaning are accepted and ignored: cache_control (the server has its own
 * prompt cache), service_tier, inference_geo, citations,
 * tool_choice.disable_parallel_tool_use, the thinking blocks' signature.
 *
 * Response: the chat.completion -> a Message: thinking (reasoning_content;
 * its signature is a digest of the text, not checked when it comes back),
 * text, tool_use blocks (input: the arguments parsed; arguments that are
 * not a JSON object go as {"_raw_arguments": "the text"}, and that shape
 * sent back becomes the text again); stop_reason end_turn, max_tokens,
 * model_context_window_exceeded (length before max_tokens), tool_use, or
 * stop_sequence when the completion's choice names the stop string that
 * ended it (choice.stop_sequence, which pocket serve adds to OpenAI's
 * shape); usage: input_tokens = prompt tokens not read from the cache,
 * cache_read_input_tokens = the cached ones (Anthropic counts them apart).
 *
 * Stream: chat.completion.chunk objects -> the events message_start,
 * content_block_start / content_block_delta (text_delta, thinking_delta,
 * signature_delta, input_json_delta) / content_block_stop, message_delta
 * (stop_reason, stop_sequence, usage), message_stop; a failure -> an error
 * event. The input tokens are known only at the end: message_start says 0,
 * message_delta the count (the SDKs take it from there). A tool call's
 * arguments are held until the call ends, then sent as the pieces they came
 * in when together they are a JSON object, else as one piece, the
 * {"_raw_arguments": ...} object: a client never receives input it cannot
 * parse.
 */
#include "serve_anthropic.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small things ------------------------------------------------------------------- */

static const char *str_of(const json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* a JSON string of s, bytes that are not UTF-8 (a message cut mid-character) made '?' */
static json_t *lossy_string(const char *s) {
    json_t *v = json_string(s);
    if (v) return v;
    size_t n = strlen(s);
    char *t = malloc(n + 1);
    if (!t) return NULL;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        int ok = k && i + k <= n;
        for (size_t j = 1; ok && j < k; j++) ok = ((unsigned char)s[i + j] & 0xC0) == 0x80;
        if (ok) { memcpy(t + i, s + i, k); i += k; }
        else t[i++] = '?';
    }
    t[n] = 0;
    v = json_string(t);
    free(t);
    return v;
}

/* The signature of a thinking block: FNV-1a 64 of its text, in hex. */
#define FNV_START 0xcbf29ce484222325ull
static uint64_t fnv(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}
static json_t *signature(uint64_t h) {
    char s[17];
    snprintf(s, sizeof s, "%016llx", (unsigned long long)h);
    return json_string(s);
}

/* "msg_" and what follows the OpenAI id's "chatcmpl-" */
static json_t *message_id(const char *id) {
    if (!id) id = "pocket";
    if (!strncmp(id, "chatcmpl-", 9)) id += 9;
    char s[128];
    snprintf(s, sizeof s, "msg_%.120s", id);
    return lossy_string(s);
}

/* ---- the request -------------------------------------------------------------------- */

#define REFUSE(param, ...) do { api_fail(e, 400, (param), __VA_ARGS__); return -1; } while (0)
#define OOM() do { api_fail(e, 500, NULL, "out of memory"); return -1; } while (0)

/* Where a top-level field may be: a Messages request, a count_tokens one. */
enum { IN_CREATE = 1, IN_COUNT = 2 };
static const struct { const char *name; int in; } known_fields[] = {
    {"model", IN_CREATE | IN_COUNT},     {"messages", IN_CREATE | IN_COUNT}, {"system", IN_CREATE | IN_COUNT},
    {"tools", IN_CREATE | IN_COUNT},     {"tool_choice", IN_CREATE | IN_COUNT},
    {"thinking", IN_CREATE | IN_COUNT},  {"output_config", IN_CREATE | IN_COUNT},
    {"output_format", IN_CREATE | IN_COUNT}, {"cache_control", IN_CREATE | IN_COUNT},
    {"max_tokens", IN_CREATE},           {"stream", IN_CREATE},              {"stop_sequences", IN_CREATE},
    {"temperature", IN_CREATE},          {"top_p", IN_CREATE},               {"top_k", IN_CREATE},
    {"metadata", IN_CREATE},             {"service_tier", IN_CREATE},        {"inference_geo", IN_CREATE},
    {"container", IN_CREATE},
};

/* Why a block of type t cannot be sent (path names it). */
static int refuse_block(const char *path, const char *t, const char *where, api_error *e) {
    if (!strcmp(t, "image"))
        REFUSE(path, "%s: image blocks are not supported: pocket serves text-only models", path);
    if (!strcmp(t, "document") || !strcmp(t, "search_result"))
        REFUSE(path, "%s: %s blocks are not supported: send their text in a text block", path, t);
    REFUSE(path, "%s: a '%.40s' block is not supported %s", path, t, where);
}

/* The text of a text block b at path (NULL with e filled if it has none). */
static json_t *text_of(const json_t *b, const char *path, api_error *e) {
    json_t *t = json_object_get(b, "text");
    if (!json_is_string(t)) {
        api_fail(e, 400, path, "%s.text must be a string, got %s", path, api_kind(t));
        return NULL;
    }
    return t;
}

/* content[k] at path must be an object with a string type: returned, or NULL with e filled. */
static const char *block_type(const json_t *b, const char *path, api_error *e) {
    if (!json_is_object(b)) {
        api_fail(e, 400, path, "%s must be a content block (an object), got %s", path, api_kind(b));
        return NULL;
    }
    const char *t = str_of(b, "type");
    if (!t) api_fail(e, 400, path, "%s.type must be a string", path);
    return t;
}

/* A tool_result's content: a string, or text blocks as OpenAI text parts;
   is_error puts "Error: " first. New reference, or NULL with e filled. */
static json_t *tool_result_content(const json_t *b, const char *path, api_error *e) {
    json_t *c = json_object_get(b, "content"), *err = json_object_get(b, "is_error");
    if (err && !json_is_null(err) && !json_is_boolean(err)) {
        api_fail(e, 400, path, "%s.is_error must be a boolean, got %s", path, api_kind(err));
        return NULL;
    }
    int is_error = json_is_true(err);
    if (!c || json_is_null(c) || json_is_string(c)) {
        const char *s = c && json_is_string(c) ? json_string_value(c) : "";
        size_t n = c && json_is_string(c) ? json_string_length(c) : 0;
        if (!is_error) return json_stringn(s, n);
        api_buf t = {0};
        api_puts(&t, "Error: ");
        api_put(&t, s, n);
        json_t *v = t.oom ? NULL : json_stringn(t.p, t.n);
        free(t.p);
        if (!v) api_fail(e, 500, NULL, "out of memory");
        return v;
    }
    if (!json_is_array(c)) {
        api_fail(e, 400, path, "%s.content must be a string or an array of text blocks, got %s", path, api_kind(c));
        return NULL;
    }
    json_t *parts = json_array();
    if (!parts) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    if (is_error) json_array_append_new(parts, json_pack("{s:s, s:s}", "type", "text", "text", "Error: "));
    for (size_t k = 0; k < json_array_size(c); k++) {
        char p[96];
        snprintf(p, sizeof p, "%s.content.%zu", path, k);
        json_t *x = json_array_get(c, k), *text;
        const char *t = block_type(x, p, e);
        if (!t || (strcmp(t, "text") && refuse_block(p, t, "in a tool_result (text only)", e) < 0) ||
            !(text = text_of(x, p, e))) {
            json_decref(parts);
            return NULL;
        }
        json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text));
    }
    return parts;
}

/* The OpenAI message {role, content: []} appended to out, its content array returned (borrowed). */
static json_t *new_parts_message(json_t *out, const char *role) {
    json_t *m = json_pack("{s:s, s:[]}", "role", role, "content");
    json_t *parts = json_object_get(m, "content");
    return json_array_append_new(out, m) ? NULL : parts;
}

/* A user or system message's blocks: runs of text blocks as messages of
   text parts, each tool_result (user only) as a tool message in place. */
static int user_blocks(json_t *out, const char *role, const json_t *content, size_t i, api_error *e) {
    json_t *parts = NULL;   /* the open message's text parts */
    size_t before = json_array_size(out);
    for (size_t k = 0; k < json_array_size(content); k++) {
        char path[64];
        snprintf(path, sizeof path, "messages.%zu.content.%zu", i, k);
        json_t *b = json_array_get(content, k);
        const char *t = block_type(b, path, e);
        if (!t) return -1;
        if (!strcmp(t, "text")) {
            json_t *text = text_of(b, path, e);
            if (!text) return -1;
            if (!parts && !(parts = new_parts_message(out, role))) OOM();
            if (json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text))) OOM();
        } else if (!strcmp(t, "tool_result") && !strcmp(role, "user")) {
            const char *id = str_of(b, "tool_use_id");
            if (!id) REFUSE(path, "%s.tool_use_id must be a string", path);
            json_t *c = tool_result_content(b, path, e);
            if (!c) return -1;
            if (json_array_append_new(out, json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", id, "content", c)))
                OOM();
            parts = NULL;
        } else if (!strcmp(t, "tool_use") || !strcmp(t, "thinking") || !strcmp(t, "redacted_thinking")) {
            REFUSE(path, "%s: a %s block belongs in an assistant message", path, t);
        } else {
            return refuse_block(path, t, !strcmp(role, "user") ? "in a user message (text and tool_result)"
                                                               : "in a system message (text only)", e);
        }
    }
    if (json_array_size(out) == before &&
        json_array_append_new(out, json_pack("{s:s, s:s}", "role", role, "content", "")))
        OOM();
    return 0;
}

/* tool_use.input -> OpenAI arguments text: the JSON, or the text of a
   {"_raw_arguments": "..."} object (new reference, NULL: oom). */
static json_t *arguments_of(const json_t *input) {
    if (!input) return json_string("{}");
    json_t *raw = json_object_get(input, ANTHROPIC_RAW_ARGUMENTS);
    if (json_is_object(input) && json_object_size(input) == 1 && json_is_string(raw))
        return json_stringn(json_string_value(raw), json_string_length(raw));
    char *s = json_dumps(input, JSON_COMPACT | JSON_ENCODE_ANY);
    json_t *v = s ? json_string(s) : NULL;
    free(s);
    return v;
}

/* An assistant message's blocks -> one OpenAI assistant message. */
static int assistant_blocks(json_t *out, const json_t *content, size_t i, api_error *e) {
    api_buf text = {0}, thinking = {0};
    json_t *calls = json_array(), *m = NULL;
    int rc = -1;
    if (!calls) OOM();
    for (size_t k = 0; k < json_array_size(content); k++) {
        char path[64];
        snprintf(path, sizeof path, "messages.%zu.content.%zu", i, k);
        json_t *b = json_array_get(content, k), *v;
        const char *t = block_type(b, path, e);
        if (!t) goto done;
        if (!strcmp(t, "text")) {
            if (!(v = text_of(b, path, e))) goto done;
            api_put(&text, json_string_value(v), json_string_length(v));
        } else if (!strcmp(t, "thinking")) {
            v = json_object_get(b, "thinking");
            if (!json_is_string(v)) { api_fail(e, 400, path, "%s.thinking must be a string", path); goto done; }
            api_put(&thinking, json_string_value(v), json_string_length(v));
        } else if (!strcmp(t, "redacted_thinking")) {
            continue;
        } else if (!strcmp(t, "tool_use")) {
            const char *id = str_of(b, "id"), *name = str_of(b, "name");
            if (!id) { api_fail(e, 400, path, "%s.id must be a string", path); goto done; }
            if (!name) { api_fail(e, 400, path, "%s.name must be a string", path); goto done; }
            json_t *args = arguments_of(json_object_get(b, "input"));
            if (!args || json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:o}}", "id", id, "type", "function",
                                                                "function", "name", name, "arguments", args))) {
                api_fail(e, 500, NULL, "out of memory");
                goto done;
            }
        } else if (!strcmp(t, "tool_result")) {
            api_fail(e, 400, path, "%s: a tool_result block belongs in a user message", path);
            goto done;
        } else {
            refuse_block(path, t, "in an assistant message (text, thinking, tool_use)", e);
            goto done;
        }
    }
    m = json_object();
    if (!m || text.oom || thinking.oom) { api_fail(e, 500, NULL, "out of memory"); goto done; }
    json_object_set_new(m, "role", json_string("assistant"));
    json_object_set_new(m, "content", text.n || !json_array_size(calls) ? json_stringn(text.p ? text.p : "", text.n)
                                                                         : json_null());
    if (thinking.n) json_object_set_new(m, "reasoning_content", json_stringn(thinking.p, thinking.n));
    if (json_array_size(calls)) json_object_set(m, "tool_calls", calls);
    rc = json_array_append(out, m) ? -1 : 0;
    if (rc) api_fail(e, 500, NULL, "out of memory");
done:
    json_decref(m);
    json_decref(calls);
    free(text.p);
    free(thinking.p);
    return rc;
}

static int put_messages(json_t *out, const json_t *msgs, api_error *e) {
    if (!json_is_array(msgs)) REFUSE("messages", "messages must be an array, got %s", api_kind(msgs));
    if (!json_array_size(msgs)) REFUSE("messages", "messages must not be empty");
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        char path[32];
        snprintf(path, sizeof path, "messages.%zu", i);
        json_t *m = json_array_get(msgs, i), *c;
        if (!json_is_object(m)) REFUSE(path, "%s must be an object, got %s", path, api_kind(m));
        const char *role = str_of(m, "role");
        if (!role) REFUSE(path, "%s.role must be a string", path);
        if (strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "system"))
            REFUSE(path, "%s.role '%.40s' is not user, assistant or system", path, role);
        c = json_object_get(m, "content");
        if (json_is_string(c)) {
            if (json_array_append_new(out, json_pack("{s:s, s:O}", "role", role, "content", c))) OOM();
        } else if (json_is_array(c)) {
            if ((!strcmp(role, "assistant") ? assistant_blocks(out, c, i, e) : user_blocks(out, role, c, i, e)) < 0)
                return -1;
        } else {
            REFUSE(path, "%s.content must be a string or an array of content blocks, got %s", path, api_kind(c));
        }
    }
    return 0;
}

static int put_system(json_t *out, const json_t *sys, api_error *e) {
    if (!sys || json_is_null(sys)) return 0;
    if (json_is_string(sys)) {
        if (json_string_length(sys) && json_array_append_new(out, json_pack("{s:s, s:O}", "role", "system", "content", sys)))
            OOM();
        return 0;
    }
    if (!json_is_array(sys)) REFUSE("system", "system must be a string or an array of text blocks, got %s", api_kind(sys));
    json_t *parts = NULL;
    for (size_t k = 0; k < json_array_size(sys); k++) {
        char path[32];
        snprintf(path, sizeof path, "system.%zu", k);
        json_t *b = json_array_get(sys, k), *text;
        const char *t = block_type(b, path, e);
        if (!t) return -1;
        if (strcmp(t, "text")) return refuse_block(path, t, "in the system prompt (text only)", e);
        if (!(text = text_of(b, path, e))) return -1;
        if (!parts && !(parts = new_parts_message(out, "system"))) OOM();
        if (json_array_append_new(parts, json_pack("{s:s, s:O}", "type", "text", "text", text))) OOM();
    }
    return 0;
}

static int put_tools(json_t *req, const json_t *tools, api_error *e) {
    if (!tools || json_is_null(tools)) return 0;
    if (!json_is_array(tools)) REFUSE("tools", "tools must be an array, got %s", api_kind(tools));
    if (!json_array_size(tools)) return 0;
    json_t *out = json_array();
    if (!out || json_object_set_new(req, "tools", out)) OOM();
    for (size_t k = 0; k < json_array_size(tools); k++) {
        char path[32];
        snprintf(path, sizeof path, "tools.%zu", k);
        json_t *t = json_array_get(tools, k), *type, *desc, *schema;
        if (!json_is_object(t)) REFUSE(path, "%s must be an object, got %s", path, api_kind(t));
        type = json_object_get(t, "type");
        if (type && !json_is_null(type) && !(json_is_string(type) && !strcmp(json_string_value(type), "custom"))) {
            if (!json_is_string(type)) REFUSE(path, "%s.type must be a string, got %s", path, api_kind(type));
            REFUSE(path, "%s: '%.60s' is a tool Anthropic defines or runs itself; pocket takes tools given by name, "
                   "description and input_schema", path, json_string_value(type));
        }
        const char *name = str_of(t, "name");
        if (!name || !*name) REFUSE(path, "%s.name must be a non-empty string", path);
        desc = json_object_get(t, "description");
        if (desc && !json_is_null(desc) && !json_is_string(desc))
            REFUSE(path, "%s.description must be a string, got %s", path, api_kind(desc));
        schema = json_object_get(t, "input_schema");
        if (!json_is_object(schema))
            REFUSE(path, "%s.input_schema must be a JSON schema (an object), got %s", path, api_kind(schema));
        json_t *fn = json_pack("{s:s, s:O}", "name", name, "parameters", schema);
        if (fn && json_is_string(desc)) json_object_set(fn, "description", desc);
        if (!fn || json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn))) OOM();
    }
    return 0;
}

static int has_tool(const json_t *req, const char *name) {
    json_t *tools = json_object_get(req, "tools");
    for (size_t k = 0; k < json_array_size(tools); k++) {
        const char *n = str_of(json_object_get(json_array_get(tools, k), "function"), "name");
        if (n && !strcmp(n, name)) return 1;
    }
    return 0;
}

static int put_tool_choice(json_t *req, const json_t *tc, api_error *e) {
    if (!tc || json_is_null(tc)) return 0;
    if (!json_is_object(tc)) REFUSE("tool_choice", "tool_choice must be an object, got %s", api_kind(tc));
    json_t *par = json_object_get(tc, "disable_parallel_tool_use");
    if (par && !json_is_null(par) && !json_is_boolean(par))
        REFUSE("tool_choice", "tool_choice.disable_parallel_tool_use must be a boolean, got %s", api_kind(par));
    const char *type = str_of(tc, "type");
    json_t *v;
    if (!type) REFUSE("tool_choice", "tool_choice.type must be a string (auto, any, tool or none)");
    if (!strcmp(type, "auto")) v = json_string("auto");
    else if (!strcmp(type, "none")) v = json_string("none");
    else if (!strcmp(type, "any") || !strcmp(type, "tool")) {
        if (!json_object_get(req, "tools"))
            REFUSE("tool_choice", "tool_choice.type '%s' needs tools, and the request has none", type);
        if (!strcmp(type, "any")) v = json_string("required");
        else {
            const char *name = str_of(tc, "name");
            if (!name) REFUSE("tool_choice", "tool_choice.name must be a string when tool_choice.type is 'tool'");
            if (!has_tool(req, name)) REFUSE("tool_choice", "tool_choice.name '%.60s' is not one of the tools", name);
            v = json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name);
        }
    } else {
        REFUSE("tool_choice", "tool_choice.type '%.40s' is not auto, any, tool or none", type);
    }
    if (!v || json_object_set_new(req, "tool_choice", v)) OOM();
    return 0;
}

/* thinking -> chat_template_kwargs.enable_thinking and thinking_budget_tokens */
static int put_thinking(json_t *req, const json_t *th, api_error *e) {
    if (!th || json_is_null(th)) return 0;
    if (!json_is_object(th)) REFUSE("thinking", "thinking must be an object, got %s", api_kind(th));
    const char *type = str_of(th, "type");
    if (!type) REFUSE("thinking", "thinking.type must be a string (enabled, adaptive or disabled)");
    int on;
    if (!strcmp(type, "enabled")) {
        json_t *b = json_object_get(th, "budget_tokens");
        if (!json_is_integer(b) || json_integer_value(b) < 0)
            REFUSE("thinking.budget_tokens", "thinking.budget_tokens must be a non-negative integer when "
                   "thinking.type is 'enabled'");
        if (json_object_set(req, "thinking_budget_tokens", b)) OOM();
        on = 1;
    } else if (!strcmp(type, "adaptive")) {
        on = 1;
    } else if (!strcmp(type, "disabled")) {
        on = 0;
    } else {
        REFUSE("thinking", "thinking.type '%.40s' is not enabled, adaptive or disabled", type);
    }
    if (json_object_set_new(req, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", on))) OOM();
    return 0;
}

/* output_config {effort, format} (and the older top-level output_format) */
static int put_format(json_t *req, const json_t *f, const char *name, api_error *e) {
    if (!f || json_is_null(f)) return 0;
    const char *type = str_of(f, "type");
    json_t *schema = json_object_get(f, "schema");
    if (!json_is_object(f) || !type || strcmp(type, "json_schema"))
        REFUSE(name, "%s must be {\"type\": \"json_schema\", \"schema\": {...}}", name);
    if (!json_is_object(schema)) REFUSE(name, "%s.schema must be a JSON schema (an object)", name);
    json_t *rf = json_pack("{s:s, s:{s:s, s:O, s:b}}", "type", "json_schema", "json_schema", "name", "output",
                           "schema", schema, "strict", 1);
    if (!rf || json_object_set_new(req, "response_format", rf)) OOM();
    return 0;
}

static int put_output_config(json_t *req, const json_t *oc, api_error *e) {
    if (!oc || json_is_null(oc)) return 0;
    if (!json_is_object(oc)) REFUSE("output_config", "output_config must be an object, got %s", api_kind(oc));
    json_t *eff = json_object_get(oc, "effort");
    if (eff && !json_is_null(eff)) {
        static const char *const levels[][2] = {
            {"low", "low"}, {"medium", "medium"}, {"high", "high"}, {"xhigh", "high"}, {"max", "high"}};
        const char *s = json_is_string(eff) ? json_string_value(eff) : "";
        size_t k = 0;
        while (k < 5 && strcmp(s, levels[k][0])) k++;
        if (k == 5) REFUSE("output_config.effort", "output_config.effort must be low, medium, high, xhigh or max");
        if (json_object_set_new(req, "reasoning_effort", json_string(levels[k][1]))) OOM();
    }
    return put_format(req, json_object_get(oc, "format"), "output_config.format", e);
}

/* A number field in [lo, hi] copied as to (absent or null: nothing). */
static int put_number(json_t *req, const json_t *body, const char *name, double lo, double hi, api_error *e) {
    json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_number(v) || !(json_number_value(v) >= lo && json_number_value(v) <= hi))
        REFUSE(name, "%s must be a number in [%g, %g]", name, lo, hi);
    if (json_object_set(req, name, v)) OOM();
    return 0;
}

/* The generation's own fields: max_tokens, stream, stop_sequences, sampling, metadata, container. */
static int put_generation(json_t *req, const json_t *body, api_error *e) {
    json_t *v = json_object_get(body, "max_tokens");
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        REFUSE("max_tokens", "max_tokens must be a non-negative integer, got %s", api_kind(v));
    if (json_object_set(req, "max_tokens", v)) OOM();
    v = json_object_get(body, "stream");
    if (v && !json_is_null(v) && !json_is_boolean(v)) REFUSE("stream", "stream must be a boolean, got %s", api_kind(v));
    if (json_is_true(v) && (json_object_set_new(req, "stream", json_true()) ||
                            json_object_set_new(req, "stream_options", json_pack("{s:b}", "include_usage", 1))))
        OOM();
    v = json_object_get(body, "stop_sequences");
    if (v && !json_is_null(v)) {
        if (!json_is_array(v)) REFUSE("stop_sequences", "stop_sequences must be an array of strings, got %s", api_kind(v));
        for (size_t k = 0; k < json_array_size(v); k++)
            if (!json_is_string(json_array_get(v, k)))
                REFUSE("stop_sequences", "stop_sequences.%zu must be a string, got %s", k, api_kind(json_array_get(v, k)));
        if (json_array_size(v) && json_object_set(req, "stop", v)) OOM();
    }
    if (put_number(req, body, "temperature", 0, 1, e) || put_number(req, body, "top_p", 0, 1, e)) return -1;
    v = json_object_get(body, "top_k");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0) REFUSE("top_k", "top_k must be a non-negative integer");
        if (json_object_set(req, "top_k", v)) OOM();
    }
    v = json_object_get(body, "metadata");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) REFUSE("metadata", "metadata must be an object, got %s", api_kind(v));
        json_t *u = json_object_get(v, "user_id");
        if (u && !json_is_null(u) && !json_is_string(u))
            REFUSE("metadata.user_id", "metadata.user_id must be a string, got %s", api_kind(u));
        if (json_is_string(u) && json_object_set(req, "user", u)) OOM();
    }
    v = json_object_get(body, "container");
    if (v && !json_is_null(v))
        REFUSE("container", "container: pocket runs no code execution tool (send null or leave it out)");
    static const char *const hints[] = {"service_tier", "inference_geo"};
    for (int k = 0; k < 2; k++) {
        v = json_object_get(body, hints[k]);
        if (v && !json_is_null(v) && !json_is_string(v))
            REFUSE(hints[k], "%s must be a string, got %s", hints[k], api_kind(v));
    }
    return 0;
}

/* body -> the OpenAI request; in: IN_CREATE (POST /v1/messages) or IN_COUNT. */
static json_t *translate(const json_t *body, int in, api_error *e) {
    if (!json_is_object(body)) { api_fail(e, 400, NULL, "the body must be a JSON object"); return NULL; }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        size_t k = 0, n = sizeof known_fields / sizeof *known_fields;
        while (k < n && strcmp(known_fields[k].name, key)) k++;
        if (k == n || !(known_fields[k].in & in)) {
            api_fail(e, 400, key, "%.60s: not a field of %s pocket knows (it takes model, messages, system, tools, "
                     "tool_choice, thinking, output_config%s)", key,
                     in == IN_COUNT ? "a count_tokens request" : "a Messages request",
                     in == IN_COUNT ? "" : ", max_tokens, stream, stop_sequences, temperature, top_p, top_k, metadata");
            return NULL;
        }
    }
    v = json_object_get(body, "model");
    if (!json_is_string(v)) {
        api_fail(e, 400, "model", "model must be a string, got %s", api_kind(v));
        return NULL;
    }
    json_t *msgs = json_array();
    json_t *req = json_pack("{s:O, s:o}", "model", v, "messages", msgs);
    if (!req) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    json_t *cc = json_object_get(body, "cache_control");
    if (cc && !json_is_null(cc) && !json_is_object(cc))
        api_fail(e, 400, "cache_control", "cache_control must be an object, got %s", api_kind(cc));
    else if (!put_system(msgs, json_object_get(body, "system"), e) &&
             !put_messages(msgs, json_object_get(body, "messages"), e) &&
             !put_tools(req, json_object_get(body, "tools"), e) &&
             !put_tool_choice(req, json_object_get(body, "tool_choice"), e) &&
             !put_thinking(req, json_object_get(body, "thinking"), e) &&
             !put_format(req, json_object_get(body, "output_format"), "output_format", e) &&
             !put_output_config(req, json_object_get(body, "output_config"), e) &&
             (in == IN_COUNT || !put_generation(req, body, e)))
        return req;
    json_decref(req);
    return NULL;
}

static json_t *anthropic_request(const json_t *body, const serve_info *si, int *chat, api_error *e) {
    *chat = 1;
    return translate(body, IN_CREATE, e);
}

json_t *anthropic_count_request(const json_t *body, const serve_info *si, api_error *e) {
    return translate(body, IN_COUNT, e);
}

json_t *anthropic_count_response(long long input_tokens) {
    return json_pack("{s:I}", "input_tokens", (json_int_t)input_tokens);
}

/* ---- the response ------------------------------------------------------------------- */

/* OpenAI arguments text -> tool_use.input (new reference; NULL: oom);
   *raw: -1 no arguments (white space: {}), 0 a JSON object, 1 not one
   (wrapped: {"_raw_arguments": text}). */
static json_t *input_of(const char *args, size_t n, int *raw) {
    size_t i = 0;
    *raw = -1;
    while (i < n && (args[i] == ' ' || args[i] == '\n' || args[i] == '\t' || args[i] == '\r')) i++;
    if (i == n) return json_object();
    *raw = 0;
    json_t *v = json_loadb(args, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (json_is_object(v)) return v;
    json_decref(v);
    *raw = 1;
    return json_pack("{s:s%}", ANTHROPIC_RAW_ARGUMENTS, args, n);
}

/* The stop_reason for OpenAI's finish_reason (NULL: none), given the stop
   string that ended it (NULL: none), whether there are tool calls, and the
   tokens generated and asked for (-1: unknown). */
static const char *stop_reason(const char *finish, const char *stop_sequence, int has_calls,
                               long long completion_tokens, long long max_tokens) {
    if (!finish) return "end_turn";
    if (!strcmp(finish, "length"))
        return completion_tokens >= 0 && completion_tokens < max_tokens ? "model_context_window_exceeded" : "max_tokens";
    if (!strcmp(finish, "tool_calls") || has_calls) return "tool_use";
    return stop_sequence ? "stop_sequence" : "end_turn";
}

static long long max_tokens_of(const json_t *body) {
    json_t *mt = json_object_get(body, "max_tokens");
    return json_is_integer(mt) ? json_integer_value(mt) : -1;
}

/* OpenAI usage -> Anthropic's (new reference); NULL usage: zeros. */
static json_t *usage_of(const json_t *u) {
    json_int_t p = json_integer_value(json_object_get(u, "prompt_tokens"));
    json_int_t c = json_integer_value(json_object_get(u, "completion_tokens"));
    json_int_t cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    if (cached < 0 || cached > p) cached = 0;
    return json_pack("{s:I, s:I, s:I, s:I}", "input_tokens", p - cached, "output_tokens", c,
                     "cache_read_input_tokens", cached, "cache_creation_input_tokens", (json_int_t)0);
}

static json_t *anthropic_response(const json_t *body, const json_t *completion, const serve_info *si) {
    json_t *choice = json_array_get(json_object_get(completion, "choices"), 0);
    json_t *msg = json_object_get(choice, "message"), *v;
    json_t *content = json_array();
    v = json_object_get(msg, "reasoning_content");
    if (json_is_string(v) && json_string_length(v))
        json_array_append_new(content, json_pack("{s:s, s:O, s:o}", "type", "thinking", "thinking", v, "signature",
                                                 signature(fnv(FNV_START, json_string_value(v), json_string_length(v)))));
    v = json_object_get(msg, "content");
    if (json_is_string(v) && json_string_length(v))
        json_array_append_new(content, json_pack("{s:s, s:O}", "type", "text", "text", v));
    json_t *calls = json_object_get(msg, "tool_calls");
    for (size_t k = 0; k < json_array_size(calls); k++) {
        json_t *c = json_array_get(calls, k), *fn = json_object_get(c, "function");
        json_t *args = json_object_get(fn, "arguments");
        const char *id = str_of(c, "id"), *name = str_of(fn, "name");
        char gen[32];
        int raw;
        snprintf(gen, sizeof gen, "toolu_%zu", k);
        json_array_append_new(content, json_pack("{s:s, s:s, s:s, s:o, s:{s:s}}", "type", "tool_use", "id",
                                                 id ? id : gen, "name", name ? name : "", "input",
                                                 input_of(json_is_string(args) ? json_string_value(args) : "",
                                                          json_string_length(args), &raw),
                                                 "caller", "type", "direct"));
    }
    json_t *usage = json_object_get(completion, "usage");
    const char *stop_seq = str_of(choice, "stop_sequence");
    json_t *ct = json_object_get(usage, "completion_tokens");
    const char *reason = stop_reason(str_of(choice, "finish_reason"), stop_seq, json_array_size(calls) > 0,
                                     json_is_integer(ct) ? json_integer_value(ct) : -1, max_tokens_of(body));
    const char *model = str_of(completion, "model");
    return json_pack("{s:o, s:s, s:s, s:s, s:o, s:s, s:o, s:o}", "id", message_id(str_of(completion, "id")),
                     "type", "message", "role", "assistant", "model", model ? model : (si ? si->model_id : ""),
                     "content", content, "stop_reason", reason, "stop_sequence",
                     strcmp(reason, "stop_sequence") ? json_null() : json_string(stop_seq), "usage", usage_of(usage));
}

/* ---- errors ------------------------------------------------------------------------- */

static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: case 529: return "overloaded_error";
    default: return status >= 500 ? "api_error" : "invalid_request_error";
    }
}

static json_t *error_object(const char *type, const char *msg) {
    return json_pack("{s:s, s:{s:s, s:o}}", "type", "error", "error", "type", type, "message", lossy_string(msg));
}

static json_t *anthropic_error(const api_error *e) {
    return error_object(error_type(e->status), e->msg[0] ? e->msg : "error");
}

/* ---- the stream --------------------------------------------------------------------- */

enum { B_NONE, B_TEXT, B_THINKING, B_TOOL };

typedef struct astream {
    long long max_tokens;       /* the request's (-1: none) */
    const serve_info *si;
    int started, done;
    int block, kind;            /* the open block's index (-1: none) and kind */
    int n_blocks, n_calls;
    long long call;             /* the OpenAI index of the open tool call */
    json_t *pieces;             /* its arguments as they came */
    uint64_t sig;               /* the open thinking block's signature so far */
    char finish[16];            /* OpenAI's finish_reason ("" until known) */
    char *stop_sequence;
    json_t *usage;              /* the last usage seen */
} astream;

static void event(api_buf *out, const char *name, json_t *data) {
    api_puts(out, "event: ");
    api_puts(out, name);
    api_put_json(out, "\ndata: ", data, "\n\n");
}

static void start_message(astream *s, const json_t *chunk, api_buf *out) {
    if (s->started) return;
    s->started = 1;
    const char *model = str_of(chunk, "model");
    json_t *u = usage_of(s->usage);
    json_object_set_new(u, "output_tokens", json_integer(0));
    event(out, "message_start",
          json_pack("{s:s, s:{s:o, s:s, s:s, s:s, s:[], s:n, s:n, s:o}}", "type", "message_start", "message", "id",
                    message_id(str_of(chunk, "id")), "type", "message", "role", "assistant", "model",
                    model ? model : (s->si ? s->si->model_id : ""), "content", "stop_reason", "stop_sequence",
                    "usage", u));
}

static void delta(astream *s, api_buf *out, json_t *d) {
    event(out, "content_block_delta", json_pack("{s:s, s:i, s:o}", "type", "content_block_delta", "index", s->block, "delta", d));
}

/* The open tool call's arguments: the pieces if together they are a JSON
   object, nothing if they are white space, else one piece,
   {"_raw_arguments": text}. */
static void flush_arguments(astream *s, api_buf *out) {
    api_buf all = {0};
    for (size_t k = 0; k < json_array_size(s->pieces); k++) {
        json_t *p = json_array_get(s->pieces, k);
        api_put(&all, json_string_value(p), json_string_length(p));
    }
    int raw = 0;
    json_t *input = all.oom ? NULL : input_of(all.p ? all.p : "", all.n, &raw);
    if (!input) out->oom = 1;
    else if (raw == 0) {
        for (size_t k = 0; k < json_array_size(s->pieces); k++)
            delta(s, out, json_pack("{s:s, s:O}", "type", "input_json_delta", "partial_json", json_array_get(s->pieces, k)));
    } else if (raw == 1) {
        char *t = json_dumps(input, JSON_COMPACT);
        delta(s, out, t ? json_pack("{s:s, s:s}", "type", "input_json_delta", "partial_json", t) : NULL);
        free(t);
    }
    json_decref(input);
    free(all.p);
    json_array_clear(s->pieces);
}

static void close_block(astream *s, api_buf *out) {
    if (s->block < 0) return;
    if (s->kind == B_TOOL) flush_arguments(s, out);
    if (s->kind == B_THINKING)
        delta(s, out, json_pack("{s:s, s:o}", "type", "signature_delta", "signature", signature(s->sig)));
    event(out, "content_block_stop", json_pack("{s:s, s:i}", "type", "content_block_stop", "index", s->block));
    s->block = -1;
    s->kind = B_NONE;
}

/* Open a block of kind with its content_block (stolen). */
static void open_block(astream *s, int kind, json_t *cb, api_buf *out) {
    close_block(s, out);
    s->block = s->n_blocks++;
    s->kind = kind;
    event(out, "content_block_start", json_pack("{s:s, s:i, s:o}", "type", "content_block_start", "index", s->block,
                                                "content_block", cb));
}

static void text_delta(astream *s, int kind, const json_t *v, api_buf *out) {
    if (!json_is_string(v) || !json_string_length(v)) return;
    if (s->kind != kind) {
        if (kind == B_TEXT) open_block(s, kind, json_pack("{s:s, s:s}", "type", "text", "text", ""), out);
        else open_block(s, kind, json_pack("{s:s, s:s, s:s}", "type", "thinking", "thinking", "", "signature", ""), out);
        s->sig = FNV_START;
    }
    if (kind == B_TEXT) {
        delta(s, out, json_pack("{s:s, s:O}", "type", "text_delta", "text", v));
    } else {
        s->sig = fnv(s->sig, json_string_value(v), json_string_length(v));
        delta(s, out, json_pack("{s:s, s:O}", "type", "thinking_delta", "thinking", v));
    }
}

/* One entry of delta.tool_calls: a call's start (it has an id or a name)
   or a piece of the open call's arguments (pieces of another call, which
   pocket serve never sends, are dropped). */
static void tool_delta(astream *s, const json_t *tc, api_buf *out) {
    json_t *ix = json_object_get(tc, "index"), *fn = json_object_get(tc, "function");
    long long index = json_is_integer(ix) ? json_integer_value(ix) : s->call;
    const char *id = str_of(tc, "id"), *name = str_of(fn, "name");
    json_t *args = json_object_get(fn, "arguments");
    if ((id || name) && (s->kind != B_TOOL || index != s->call)) {
        char gen[32];
        snprintf(gen, sizeof gen, "toolu_%d", s->n_calls);  /* as the response names a call without an id */
        open_block(s, B_TOOL, json_pack("{s:s, s:s, s:s, s:{}, s:{s:s}}", "type", "tool_use", "id", id ? id : gen,
                                        "name", name ? name : "", "input", "caller", "type", "direct"), out);
        s->n_calls++;
        s->call = index;
    }
    if (s->kind == B_TOOL && index == s->call && json_is_string(args) && json_string_length(args))
        json_array_append(s->pieces, args);
}

static void *anthropic_stream_new(const json_t *body, const serve_info *si) {
    astream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->max_tokens = max_tokens_of(body);
    s->si = si;
    s->block = -1;
    s->call = -1;
    if (!(s->pieces = json_array())) { free(s); return NULL; }
    return s;
}

static void anthropic_stream_free(void *p) {
    astream *s = p;
    if (!s) return;
    json_decref(s->pieces);
    json_decref(s->usage);
    free(s->stop_sequence);
    free(s);
}

static int anthropic_stream_chunk(void *p, const json_t *chunk, const char *err, api_buf *out) {
    astream *s = p;
    if (s->done) return out->oom ? -1 : 0;
    if (err) {
        event(out, "error", error_object("api_error", err));
        s->done = 1;
        return out->oom ? -1 : 0;
    }
    json_t *u = json_object_get(chunk, "usage");
    if (json_is_object(u)) {
        json_decref(s->usage);
        s->usage = json_incref(u);
    }
    start_message(s, chunk, out);
    if (!chunk) {
        close_block(s, out);
        json_t *ct = json_object_get(s->usage, "completion_tokens");
        const char *reason = stop_reason(s->finish[0] ? s->finish : NULL, s->stop_sequence, s->n_calls > 0,
                                         json_is_integer(ct) ? json_integer_value(ct) : -1, s->max_tokens);
        event(out, "message_delta",
              json_pack("{s:s, s:{s:s, s:o}, s:o}", "type", "message_delta", "delta", "stop_reason", reason,
                        "stop_sequence", strcmp(reason, "stop_sequence") ? json_null() : json_string(s->stop_sequence),
                        "usage", usage_of(s->usage)));
        event(out, "message_stop", json_pack("{s:s}", "type", "message_stop"));
        s->done = 1;
        return out->oom ? -1 : 0;
    }
    json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
    json_t *d = json_object_get(choice, "delta");
    text_delta(s, B_THINKING, json_object_get(d, "reasoning_content"), out);
    text_delta(s, B_TEXT, json_object_get(d, "content"), out);
    json_t *calls = json_object_get(d, "tool_calls");
    for (size_t k = 0; k < json_array_size(calls); k++) tool_delta(s, json_array_get(calls, k), out);
    const char *finish = str_of(choice, "finish_reason");
    if (finish) {
        close_block(s, out);
        snprintf(s->finish, sizeof s->finish, "%s", finish);
        const char *seq = str_of(choice, "stop_sequence");
        free(s->stop_sequence);
        s->stop_sequence = seq ? strdup(seq) : NULL;
    }
    return out->oom ? -1 : 0;
}

/* Anthropic's own keep-alive event */
static void anthropic_ping(void *st, api_buf *out) { api_puts(out, "event: ping\ndata: {\"type\": \"ping\"}\n\n"); }

const serve_api serve_api_anthropic = {
    .name = "anthropic",
    .stream_type = "text/event-stream",
    .request = anthropic_request,
    .response = anthropic_response,
    .stream_new = anthropic_stream_new,
    .stream_chunk = anthropic_stream_chunk,
    .stream_free = anthropic_stream_free,
    .error = anthropic_error,
    .keepalive = anthropic_ping,
};
