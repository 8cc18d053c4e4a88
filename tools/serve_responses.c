/* tools/serve_responses.c - OpenAI's Responses API (POST /v1/responses, the
 * API Codex speaks) as a translation over chat completions (serve_api.h).
 *
 * Stateless: nothing is stored, so previous_response_id, conversation,
 * item_reference input items and background runs are refused (400) and a
 * response answers "store": false whatever the request said; a client keeps
 * the conversation by sending it whole (as Codex does with store: false).
 *
 * Request: input (a string: one user message; or items: messages of the
 * roles user, assistant, system, developer with string content or
 * input_text / output_text / refusal parts; function_call; function_call_
 * output; reasoning, whose text becomes the next assistant message's
 * reasoning_content), instructions (a system message first), tools
 * (function tools only), tool_choice, parallel_tool_calls (false: the first
 * call only), text.format (-> response_format),
 * max_output_tokens, temperature, top_p, reasoning.effort (-> reasoning_
 * effort; "none" turns the template's enable_thinking off), stream.
 * Accepted and without effect here: store, include (but message.output_
 * text.logprobs), user, metadata (echoed),
 * safety_identifier, prompt_cache_key, prompt_cache_retention, service_tier,
 * text.verbosity, reasoning.summary, stream_options, truncation "disabled".
 * pocket's own sampler fields (top_k, min_p, seed, stop, ...) pass through
 * as in chat completions. Anything else is a 400 naming it, as OpenAI does.
 *
 * Response: output items in the order generated: a reasoning item (its text
 * as content [{type: "reasoning_text"}], summary []), a message (one
 * output_text part), function_call items; status "incomplete" with
 * incomplete_details.reason "max_output_tokens" when cut by the limit.
 * Item ids are the completion's id with a prefix per kind and the output
 * index (msg_X_0, rs_X_0, fc_X_1), the same streamed or not.
 *
 * Stream: server-sent events, each "event: TYPE" and its JSON with
 * sequence_number from 0: response.created, response.in_progress, then per
 * item output_item.added ... output_item.done with the item's own events in
 * between (content_part.added, output_text.delta ..., output_text.done,
 * content_part.done; for reasoning the same with reasoning_text.*;
 * function_call_arguments.delta ..., .done for a call), then
 * response.completed (or response.incomplete, or response.failed with
 * error {code: "server_error", message} when generation fails). One item is
 * open at a time: a delta of another kind closes it.
 */
#include "serve_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- small helpers ------------------------------------------------------------ */

static json_t *copy_or(const json_t *v, json_t *dflt) {
    if (v && !json_is_null(v)) { json_decref(dflt); return json_deep_copy(v); }
    return dflt;
}

static int is_one_of(const char *s, const char *const *list) {
    for (; s && *list; list++)
        if (!strcmp(s, *list)) return 1;
    return 0;
}

/* ---- the request ---------------------------------------------------------------- */

/* Translating the input items: the messages so far, the last assistant
 * message (function calls that follow it join it), reasoning text waiting
 * for the assistant message it precedes. */
typedef struct rq_state {
    json_t *msgs;
    json_t *asst;       /* borrowed: the last message, when it is an assistant's that calls may join */
    api_buf reasoning;
    api_error *e;
} rq_state;

/* Content parts -> the text parts of a chat message, or NULL (refused, e
 * filled; at "where"). out: new reference. */
static json_t *parts(const json_t *v, const char *where, api_error *e) {
    if (json_is_string(v)) return json_deep_copy(v);
    if (!json_is_array(v)) {
        api_fail(e, 400, where, "'%s' must be a string or an array of content parts; got %s", where, api_kind(v));
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    const json_t *p;
    json_array_foreach(v, i, p) {
        const char *t = json_string_value(json_object_get(p, "type"));
        const char *key = t && !strcmp(t, "refusal") ? "refusal" : "text";
        const json_t *text = json_object_get(p, key);
        if (!is_one_of(t, (const char *const[]){"input_text", "output_text", "refusal", "text", NULL})) {
            char at[64];
            snprintf(at, sizeof at, "%s[%zu].type", where, i);
            if (!t) api_fail(e, 400, at, "'%s' must be a string (\"input_text\", \"output_text\")", at);
            else api_fail(e, 400, at, "'%s' \"%.64s\" is not supported: pocket serve reads text only "
                          "(input_text, output_text, refusal)", at, t);
            json_decref(out);
            return NULL;
        }
        if (!json_is_string(text)) {
            char at[64];
            snprintf(at, sizeof at, "%s[%zu].%s", where, i, key);
            api_fail(e, 400, at, "'%s' must be a string", at);
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, json_pack("{s:s, s:O}", "type", "text", "text", text));
    }
    return out;
}

/* A new assistant message (content NULL: null) that takes the waiting
 * reasoning; it becomes the one calls join. */
static json_t *new_assistant(rq_state *s, json_t *content) {
    json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content", content ? content : json_null());
    if (s->reasoning.n) {
        json_object_set_new(m, "reasoning_content", json_stringn(s->reasoning.p, s->reasoning.n));
        s->reasoning.n = 0;
    }
    json_array_append_new(s->msgs, m);
    s->asst = m;
    return m;
}

static const char *str_field(const json_t *item, const char *key, const char *where, api_error *e) {
    const char *v = json_string_value(json_object_get(item, key));
    if (!v) api_fail(e, 400, where, "'%s.%s' must be a string", where, key);
    return v;
}

/* One input item (input[i]) into s->msgs; 0, or -1 refused (s->e filled). */
static int input_item(rq_state *s, const json_t *it, size_t i) {
    char at[48];
    snprintf(at, sizeof at, "input[%zu]", i);
    if (!json_is_object(it)) {
        api_fail(s->e, 400, at, "'%s' must be an object (an input item); got %s", at, api_kind(it));
        return -1;
    }
    const json_t *tv = json_object_get(it, "type");
    const char *type = json_is_null(tv) || !tv ? "message" : json_string_value(tv);
    if (!type) {
        api_fail(s->e, 400, at, "'%s.type' must be a string", at);
        return -1;
    }
    if (!strcmp(type, "message")) {
        const char *role = json_string_value(json_object_get(it, "role"));
        if (!is_one_of(role, (const char *const[]){"user", "assistant", "system", "developer", NULL})) {
            char p[64];
            snprintf(p, sizeof p, "%s.role", at);
            api_fail(s->e, 400, p, "'%s' must be \"user\", \"assistant\", \"system\" or \"developer\"%s%.64s%s", p,
                     role ? "; got \"" : "", role ? role : "", role ? "\"" : "");
            return -1;
        }
        char p[64];
        snprintf(p, sizeof p, "%s.content", at);
        json_t *c = parts(json_object_get(it, "content"), p, s->e);
        if (!c) return -1;
        if (!strcmp(role, "assistant")) {
            new_assistant(s, c);
        } else {
            json_array_append_new(s->msgs, json_pack("{s:s, s:o}", "role", role, "content", c));
            s->asst = NULL;
            s->reasoning.n = 0;  /* reasoning that no assistant item followed */
        }
        return 0;
    }
    if (!strcmp(type, "function_call")) {
        const char *call_id = str_field(it, "call_id", at, s->e), *name = call_id ? str_field(it, "name", at, s->e) : NULL,
                   *args = name ? str_field(it, "arguments", at, s->e) : NULL;
        if (!args) return -1;
        json_t *m = s->asst && !s->reasoning.n ? s->asst : new_assistant(s, NULL);
        json_t *calls = json_object_get(m, "tool_calls");
        if (!calls) json_object_set_new(m, "tool_calls", calls = json_array());
        json_array_append_new(calls, json_pack("{s:s, s:s, s:{s:s, s:s}}", "id", call_id, "type", "function",
                                               "function", "name", name, "arguments", args));
        return 0;
    }
    if (!strcmp(type, "function_call_output")) {
        const char *call_id = str_field(it, "call_id", at, s->e);
        if (!call_id) return -1;
        char p[64];
        snprintf(p, sizeof p, "%s.output", at);
        json_t *c = parts(json_object_get(it, "output"), p, s->e);
        if (!c) return -1;
        json_array_append_new(s->msgs, json_pack("{s:s, s:s, s:o}", "role", "tool", "tool_call_id", call_id, "content", c));
        s->asst = NULL;
        return 0;
    }
    if (!strcmp(type, "reasoning")) {
        /* its text: the reasoning_text content, else the summary */
        static const char *const keys[][2] = {{"content", "reasoning_text"}, {"summary", "summary_text"}};
        size_t had = s->reasoning.n;
        for (int k = 0; k < 2 && s->reasoning.n == had; k++) {
            const json_t *arr = json_object_get(it, keys[k][0]), *p;
            size_t j;
            if (arr && !json_is_null(arr) && !json_is_array(arr)) {
                char q[64];
                snprintf(q, sizeof q, "%s.%s", at, keys[k][0]);
                api_fail(s->e, 400, q, "'%s' must be an array of {type: \"%s\", text} parts", q, keys[k][1]);
                return -1;
            }
            json_array_foreach(arr, j, p) {
                const char *t = json_string_value(json_object_get(p, "text"));
                if (!t) {
                    char q[80];
                    snprintf(q, sizeof q, "%s.%s[%zu].text", at, keys[k][0], j);
                    api_fail(s->e, 400, q, "'%s' must be a string", q);
                    return -1;
                }
                if (s->reasoning.n) api_puts(&s->reasoning, "\n\n");
                api_puts(&s->reasoning, t);
            }
        }
        s->asst = NULL;  /* the reasoning opens the next assistant turn */
        return 0;
    }
    if (!strcmp(type, "item_reference"))
        api_fail(s->e, 400, at, "'%s': item_reference needs stored items, and pocket serve stores nothing: "
                 "send the item itself", at);
    else
        api_fail(s->e, 400, at, "'%s.type' \"%.64s\" is not supported: pocket serve takes message, function_call, "
                 "function_call_output and reasoning items", at, type);
    return -1;
}

/* tools[] -> chat tools; NULL refused. */
static json_t *tools(const json_t *v, api_error *e) {
    if (!json_is_array(v)) {
        api_fail(e, 400, "tools", "'tools' must be an array of function tools; got %s", api_kind(v));
        return NULL;
    }
    json_t *out = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(v, i, t) {
        char at[48];
        snprintf(at, sizeof at, "tools[%zu]", i);
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type || strcmp(type, "function")) {
            if (type) api_fail(e, 400, at, "'%s.type' \"%.64s\" is not supported: pocket serve runs function tools "
                               "only (the client runs them); remove it", at, type);
            else api_fail(e, 400, at, "'%s' must be an object with \"type\": \"function\"", at);
            json_decref(out);
            return NULL;
        }
        const char *name = json_string_value(json_object_get(t, "name"));
        if (!name || !name[0]) {
            api_fail(e, 400, at, "'%s.name' must be a non-empty string", at);
            json_decref(out);
            return NULL;
        }
        json_t *fn = json_pack("{s:s}", "name", name);
        static const char *const keys[] = {"description", "parameters", "strict"};
        for (int k = 0; k < 3; k++) {
            const json_t *x = json_object_get(t, keys[k]);
            if (x && !json_is_null(x)) json_object_set_new(fn, keys[k], json_deep_copy(x));
        }
        json_array_append_new(out, json_pack("{s:s, s:o}", "type", "function", "function", fn));
    }
    return out;
}

static json_t *tool_choice(const json_t *v, api_error *e) {
    if (json_is_string(v)) {
        if (is_one_of(json_string_value(v), (const char *const[]){"auto", "none", "required", NULL}))
            return json_deep_copy(v);
        api_fail(e, 400, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": "
                 "\"function\", \"name\": ...}; got \"%.64s\"", json_string_value(v));
        return NULL;
    }
    const char *type = json_string_value(json_object_get(v, "type"));
    const char *name = json_string_value(json_object_get(v, "name"));
    if (type && !strcmp(type, "function") && name)
        return json_pack("{s:s, s:{s:s}}", "type", "function", "function", "name", name);
    if (type && strcmp(type, "function"))
        api_fail(e, 400, "tool_choice", "'tool_choice' of type \"%.64s\" is not supported: pocket serve takes "
                 "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"name\": ...}", type);
    else
        api_fail(e, 400, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": "
                 "\"function\", \"name\": ...}");
    return NULL;
}

/* text.format -> response_format; NULL refused. */
static json_t *text_format(const json_t *f, api_error *e) {
    const char *type = json_string_value(json_object_get(f, "type"));
    if (type && (!strcmp(type, "text") || !strcmp(type, "json_object"))) return json_pack("{s:s}", "type", type);
    if (!type || strcmp(type, "json_schema")) {
        api_fail(e, 400, "text.format.type", "'text.format.type' must be \"text\", \"json_object\" or \"json_schema\"%s%.64s%s",
                 type ? "; got \"" : "", type ? type : "", type ? "\"" : "");
        return NULL;
    }
    const json_t *name = json_object_get(f, "name"), *schema = json_object_get(f, "schema");
    if (!json_is_object(schema)) {
        api_fail(e, 400, "text.format.schema", "'text.format.schema' must be a JSON schema (an object)");
        return NULL;
    }
    if (name && !json_is_string(name)) {
        api_fail(e, 400, "text.format.name", "'text.format.name' must be a string");
        return NULL;
    }
    json_t *js = json_pack("{s:s, s:O}", "name", name ? json_string_value(name) : "response", "schema", schema);
    static const char *const keys[] = {"strict", "description"};
    for (int k = 0; k < 2; k++) {
        const json_t *x = json_object_get(f, keys[k]);
        if (x && !json_is_null(x)) json_object_set_new(js, keys[k], json_deep_copy(x));
    }
    return json_pack("{s:s, s:o}", "type", "json_schema", "json_schema", js);
}

/* The request's fields: what each is and does. */
enum { F_OTHER, F_PASS, F_ACCEPT, F_REFUSE };
static const struct { const char *name; int what; const char *refusal; } FIELDS[] = {
    {"model", F_OTHER, NULL}, {"input", F_OTHER, NULL}, {"instructions", F_OTHER, NULL},
    {"tools", F_OTHER, NULL}, {"tool_choice", F_OTHER, NULL}, {"text", F_OTHER, NULL},
    {"max_output_tokens", F_OTHER, NULL}, {"temperature", F_OTHER, NULL}, {"top_p", F_OTHER, NULL},
    {"stream", F_OTHER, NULL}, {"reasoning", F_OTHER, NULL}, {"include", F_OTHER, NULL},
    {"store", F_ACCEPT, NULL}, {"parallel_tool_calls", F_PASS, NULL}, {"user", F_ACCEPT, NULL},
    {"metadata", F_ACCEPT, NULL}, {"safety_identifier", F_ACCEPT, NULL}, {"prompt_cache_key", F_ACCEPT, NULL},
    {"prompt_cache_retention", F_ACCEPT, NULL}, {"service_tier", F_ACCEPT, NULL}, {"stream_options", F_ACCEPT, NULL},
    {"previous_response_id", F_REFUSE, "pocket serve is stateless and stores no response: send the whole conversation in 'input'"},
    {"conversation", F_REFUSE, "pocket serve is stateless and stores no conversation: send it whole in 'input'"},
    {"prompt", F_REFUSE, "stored prompt templates are not supported: send 'instructions' and 'input'"},
    {"background", F_REFUSE, "background responses are not supported (nothing is stored to poll)"},
    {"max_tool_calls", F_REFUSE, "a limit on tool calls is not supported"},
    {"top_logprobs", F_REFUSE, "logprobs are not supported by /v1/responses here (use /v1/chat/completions)"},
    {"truncation", F_REFUSE, "only \"disabled\" is supported: a request longer than the context is refused"},
    {"context_management", F_REFUSE, "context management (compaction) is not supported"},
    /* pocket's own, as in chat completions */
    {"top_k", F_PASS, NULL}, {"min_p", F_PASS, NULL}, {"seed", F_PASS, NULL}, {"stop", F_PASS, NULL},
    {"presence_penalty", F_PASS, NULL}, {"frequency_penalty", F_PASS, NULL}, {"repeat_penalty", F_PASS, NULL},
    {"logit_bias", F_PASS, NULL}, {"grammar", F_PASS, NULL}, {"chat_template_kwargs", F_PASS, NULL},
    {"thinking_budget_tokens", F_PASS, NULL}, {"reasoning_format", F_PASS, NULL},
};

/* A value that asks for nothing: null, false, 0, "", "disabled". */
static int neutral(const json_t *v) {
    return json_is_null(v) || json_is_false(v) || (json_is_integer(v) && !json_integer_value(v)) ||
           (json_is_string(v) && (!json_string_value(v)[0] || !strcmp(json_string_value(v), "disabled")));
}

#define FAIL(...) do { api_fail(e, 400, __VA_ARGS__); goto fail; } while (0)

static json_t *rs_request(const json_t *body, const serve_info *si, int *chat, api_error *e) {
    json_t *out = NULL;
    rq_state s = {.e = e};
    *chat = 1;
    if (!json_is_object(body)) {
        api_fail(e, 400, "", "the request body must be a JSON object");
        return NULL;
    }
    out = json_object();
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)body, key, v) {
        size_t f = 0, n = sizeof FIELDS / sizeof FIELDS[0];
        while (f < n && strcmp(FIELDS[f].name, key)) f++;
        if (f == n) FAIL(key, "unknown parameter '%.64s' (see docs/serving.md, \"Responses API\", for what "
                         "pocket serve takes)", key);
        if (FIELDS[f].what == F_REFUSE && !neutral(v)) FAIL(key, "'%s': %s", key, FIELDS[f].refusal);
        if (FIELDS[f].what == F_PASS) json_object_set_new(out, key, json_deep_copy(v));
    }

    if ((v = json_object_get(body, "model")) && !json_is_null(v)) {
        if (!json_is_string(v)) FAIL("model", "'model' must be a string");
        json_object_set_new(out, "model", json_deep_copy(v));
    }

    /* the conversation */
    s.msgs = json_array();
    json_object_set_new(out, "messages", s.msgs);
    v = json_object_get(body, "instructions");
    if (v && !json_is_null(v) && !json_is_string(v)) FAIL("instructions", "'instructions' must be a string");
    if (json_string_length(v))
        json_array_append_new(s.msgs, json_pack("{s:s, s:O}", "role", "system", "content", v));
    v = json_object_get(body, "input");
    if (json_is_string(v)) {
        json_array_append_new(s.msgs, json_pack("{s:s, s:O}", "role", "user", "content", v));
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *it;
        json_array_foreach(v, i, it)
            if (input_item(&s, it, i)) goto fail;
    } else {
        FAIL("input", "'input' must be a string or an array of input items%s%s", v ? "; got " : " (it is missing)",
             v ? api_kind(v) : "");
    }
    if (!json_array_size(s.msgs)) FAIL("input", "'input' has no message");

    /* tools */
    if ((v = json_object_get(body, "tools")) && !json_is_null(v)) {
        json_t *t = tools(v, e);
        if (!t) goto fail;
        json_object_set_new(out, "tools", t);
    }
    if ((v = json_object_get(body, "tool_choice")) && !json_is_null(v)) {
        json_t *t = tool_choice(v, e);
        if (!t) goto fail;
        json_object_set_new(out, "tool_choice", t);
    }

    /* output */
    if ((v = json_object_get(body, "text")) && !json_is_null(v)) {
        if (!json_is_object(v)) FAIL("text", "'text' must be an object ({format, verbosity})");
        const json_t *f = json_object_get(v, "format");
        if (f && !json_is_null(f)) {
            json_t *rf = text_format(f, e);
            if (!rf) goto fail;
            json_object_set_new(out, "response_format", rf);
        }
    }
    if ((v = json_object_get(body, "max_output_tokens")) && !json_is_null(v)) {
        if (!json_is_integer(v)) FAIL("max_output_tokens", "'max_output_tokens' must be an integer");
        json_object_set_new(out, "max_tokens", json_deep_copy(v));
    }
    static const char *const numbers[] = {"temperature", "top_p"};
    for (int k = 0; k < 2; k++)
        if ((v = json_object_get(body, numbers[k])) && !json_is_null(v)) {
            if (!json_is_number(v)) FAIL(numbers[k], "'%s' must be a number", numbers[k]);
            json_object_set_new(out, numbers[k], json_deep_copy(v));
        }
    if ((v = json_object_get(body, "stream")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) FAIL("stream", "'stream' must be a boolean");
        if (json_is_true(v)) {
            json_object_set_new(out, "stream", json_true());
            json_object_set_new(out, "stream_options", json_pack("{s:b}", "include_usage", 1));
        }
    }
    if ((v = json_object_get(body, "include")) && !json_is_null(v)) {
        static const char *const ok[] = {"reasoning.encrypted_content", "file_search_call.results", "web_search_call.results",
            "web_search_call.action.sources", "message.input_image.image_url", "computer_call_output.output.image_url",
            "code_interpreter_call.outputs", NULL};
        size_t i;
        const json_t *x;
        if (!json_is_array(v)) FAIL("include", "'include' must be an array of strings");
        json_array_foreach(v, i, x)
            if (!is_one_of(json_string_value(x), ok))
                FAIL("include", "'include[%zu]'%s%.64s%s is not supported%s", i, json_is_string(x) ? " \"" : "",
                     json_is_string(x) ? json_string_value(x) : "", json_is_string(x) ? "\"" : "",
                     json_is_string(x) && !strcmp(json_string_value(x), "message.output_text.logprobs")
                         ? ": logprobs are not supported by /v1/responses here (use /v1/chat/completions)" : "");
    }

    /* reasoning: effort -> reasoning_effort; "none" turns thinking off */
    if ((v = json_object_get(body, "reasoning")) && !json_is_null(v)) {
        if (!json_is_object(v)) FAIL("reasoning", "'reasoning' must be an object ({effort, summary})");
        const json_t *ev = json_object_get(v, "effort");
        const char *eff = json_string_value(ev);
        static const char *const efforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", NULL};
        if (ev && !json_is_null(ev) && !is_one_of(eff, efforts))
            FAIL("reasoning.effort", "'reasoning.effort' must be \"none\", \"minimal\", \"low\", \"medium\", \"high\" "
                 "or \"xhigh\"%s%.64s%s", eff ? "; got \"" : "", eff ? eff : "", eff ? "\"" : "");
        if (eff && !strcmp(eff, "none")) {
            json_t *kw = json_object_get(out, "chat_template_kwargs");
            if (!json_is_object(kw)) json_object_set_new(out, "chat_template_kwargs", kw = json_object());
            json_object_set_new(kw, "enable_thinking", json_false());
        } else if (eff) {
            json_object_set_new(out, "reasoning_effort", json_string(!strcmp(eff, "minimal") ? "low"
                                                                  : !strcmp(eff, "xhigh") ? "high" : eff));
        }
    }
    free(s.reasoning.p);
    if (s.reasoning.oom) { json_decref(out); api_fail(e, 500, "", "out of memory"); return NULL; }
    return out;
fail:
    free(s.reasoning.p);
    json_decref(out);
    return NULL;
}
#undef FAIL

/* ---- the response --------------------------------------------------------------- */

/* The response object without output and usage: what the request asked
 * for, echoed as OpenAI does. */
static json_t *skeleton(const json_t *body, const char *id, long created, const char *model) {
    const json_t *reasoning = json_object_get(body, "reasoning");
    const json_t *text = json_object_get(body, "text");
    json_t *r = json_pack("{s:s, s:s, s:I, s:s, s:b, s:n, s:n, s:o, s:o, s:s, s:[], s:o, s:n, s:{s:o, s:o}, "
                          "s:b, s:o, s:{s:o}, s:o, s:o, s:o, s:s, s:n, s:o, s:o}",
        "id", id, "object", "response", "created_at", (json_int_t)created, "status", "in_progress",
        "background", 0, "error", "incomplete_details",
        "instructions", copy_or(json_object_get(body, "instructions"), json_null()),
        "max_output_tokens", copy_or(json_object_get(body, "max_output_tokens"), json_null()),
        "model", model, "output",
        "parallel_tool_calls", copy_or(json_object_get(body, "parallel_tool_calls"), json_true()),
        "previous_response_id",
        "reasoning", "effort", copy_or(json_object_get(reasoning, "effort"), json_null()),
                     "summary", copy_or(json_object_get(reasoning, "summary"), json_null()),
        "store", 0,
        "temperature", copy_or(json_object_get(body, "temperature"), json_null()),
        "text", "format", copy_or(json_object_get(text, "format"), json_pack("{s:s}", "type", "text")),
        "tool_choice", copy_or(json_object_get(body, "tool_choice"), json_string("auto")),
        "tools", copy_or(json_object_get(body, "tools"), json_array()),
        "top_p", copy_or(json_object_get(body, "top_p"), json_null()),
        "truncation", "disabled", "usage",
        "user", copy_or(json_object_get(body, "user"), json_null()),
        "metadata", copy_or(json_object_get(body, "metadata"), json_object()));
    return r;
}

/* The completion's id without "chatcmpl-": the base of the response's ids. */
static void id_base(const json_t *obj, char *base, size_t n) {
    const char *id = json_string_value(json_object_get(obj, "id"));
    if (!id || !id[0]) id = "pocket";
    if (!strncmp(id, "chatcmpl-", 9) && id[9]) id += 9;
    snprintf(base, n, "%.100s", id);
    /* a cut UTF-8 sequence at the end would make the ids invalid strings */
    size_t len = strlen(base), k = len;
    while (k > 0 && ((unsigned char)base[k - 1] & 0xC0) == 0x80) k--;
    if (k > 0 && (unsigned char)base[k - 1] >= 0xC0) {
        unsigned char c = (unsigned char)base[k - 1];
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (len - (k - 1) < need) base[k - 1] = 0;
    }
}

static const char *model_of(const json_t *obj, const serve_info *si) {
    const char *m = json_string_value(json_object_get(obj, "model"));
    return m ? m : si && si->model_id ? si->model_id : "pocket";
}

static json_t *usage(const json_t *u) {
    json_int_t in = json_integer_value(json_object_get(u, "prompt_tokens"));
    json_int_t outn = json_integer_value(json_object_get(u, "completion_tokens"));
    json_int_t cached = json_integer_value(json_object_get(json_object_get(u, "prompt_tokens_details"), "cached_tokens"));
    json_int_t reasoning = json_integer_value(json_object_get(json_object_get(u, "completion_tokens_details"),
                                                              "reasoning_tokens"));
    return json_pack("{s:I, s:{s:I}, s:I, s:{s:I}, s:I}", "input_tokens", in, "input_tokens_details", "cached_tokens",
                     cached, "output_tokens", outn, "output_tokens_details", "reasoning_tokens", reasoning,
                     "total_tokens", in + outn);
}

static void item_id(char *out, size_t n, const char *prefix, const char *base, size_t index) {
    snprintf(out, n, "%s_%s_%zu", prefix, base, index);
}

static json_t *text_part(const char *type, const char *text, size_t len) {
    json_t *p = json_pack("{s:s, s:s%}", "type", type, "text", text ? text : "", text ? len : 0);
    if (p && !strcmp(type, "output_text")) json_object_set_new(p, "annotations", json_array());
    return p;
}

static json_t *message_item(const char *id, const char *status, json_t *content) {
    return json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", id, "type", "message", "status", status, "role", "assistant",
                     "content", content);
}

static json_t *reasoning_item(const char *id, const char *status, json_t *content) {
    return json_pack("{s:s, s:s, s:s, s:[], s:o}", "id", id, "type", "reasoning", "status", status, "summary",
                     "content", content);
}

static json_t *call_item(const char *id, const char *status, const char *call_id, const char *name, const char *args,
                         size_t args_len) {
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s%}", "id", id, "type", "function_call", "status", status,
                     "call_id", call_id, "name", name, "arguments", args, args_len);
}

/* status and incomplete_details from the finish reason */
static void set_status(json_t *r, const char *finish) {
    int cut = finish && !strcmp(finish, "length");
    json_object_set_new(r, "status", json_string(cut ? "incomplete" : "completed"));
    json_object_set_new(r, "incomplete_details", cut ? json_pack("{s:s}", "reason", "max_output_tokens") : json_null());
}

static json_t *rs_response(const json_t *body, const json_t *completion, const serve_info *si) {
    char base[128], id[192];
    id_base(completion, base, sizeof base);
    snprintf(id, sizeof id, "resp_%s", base);
    json_t *r = skeleton(body, id, (long)json_integer_value(json_object_get(completion, "created")),
                         model_of(completion, si));
    if (!r) return NULL;
    const json_t *choice = json_array_get(json_object_get(completion, "choices"), 0);
    const json_t *msg = json_object_get(choice, "message");
    const char *finish = json_string_value(json_object_get(choice, "finish_reason"));
    const char *st = finish && !strcmp(finish, "length") ? "incomplete" : "completed";
    json_t *output = json_object_get(r, "output");
    const json_t *rc = json_object_get(msg, "reasoning_content"), *c = json_object_get(msg, "content");
    const json_t *calls = json_object_get(msg, "tool_calls");
    if (json_string_length(rc)) {
        item_id(id, sizeof id, "rs", base, json_array_size(output));
        json_array_append_new(output, reasoning_item(id, st, json_pack("[o]", text_part("reasoning_text",
                              json_string_value(rc), json_string_length(rc)))));
    }
    /* the message: its text, or an empty one when there is nothing else */
    if (json_string_length(c) || !json_array_size(calls)) {
        item_id(id, sizeof id, "msg", base, json_array_size(output));
        json_array_append_new(output, message_item(id, st, json_pack("[o]", text_part("output_text",
                              json_string_value(c), json_string_length(c)))));
    }
    size_t i;
    const json_t *tc;
    json_array_foreach(calls, i, tc) {
        const json_t *fn = json_object_get(tc, "function");
        const char *call_id = json_string_value(json_object_get(tc, "id"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        const json_t *args = json_object_get(fn, "arguments");
        char cid[192];
        item_id(id, sizeof id, "fc", base, json_array_size(output));
        item_id(cid, sizeof cid, "call", base, json_array_size(output));
        json_array_append_new(output, call_item(id, st, call_id ? call_id : cid, name ? name : "",
                                                json_is_string(args) ? json_string_value(args) : "",
                                                json_string_length(args)));
    }
    set_status(r, finish);
    json_object_set_new(r, "usage", usage(json_object_get(completion, "usage")));
    return r;
}

/* ---- the stream ----------------------------------------------------------------- */

typedef struct rs_stream {
    json_t *resp;       /* the response object; output grows as items are done */
    json_t *body;       /* the request (a copy) */
    const serve_info *si;
    long seq;           /* the next sequence_number */
    int started, ended;
    char base[128];
    /* the open item: 'r' reasoning, 'm' message, 'c' a call (calls[open_call]), 0 none */
    int open;
    size_t open_out;
    api_buf text;       /* its text (or the call's arguments) */
    long *calls;        /* the chat stream's tool_calls[].index of each call so far */
    size_t n_calls, cap_calls, open_call;
    char finish[16];
    json_t *usage;      /* the OpenAI usage, when it came */
} rs_stream;

/* One event: "event: TYPE", its data with type first and sequence_number. fields stolen. */
static void emit(rs_stream *st, api_buf *out, const char *type, json_t *fields) {
    json_t *ev = json_pack("{s:s}", "type", type);
    if (!ev || !fields || json_object_update(ev, fields)) out->oom = 1;
    json_decref(fields);
    json_object_set_new(ev, "sequence_number", json_integer(st->seq++));
    api_puts(out, "event: ");
    api_puts(out, type);
    api_puts(out, "\n");
    api_put_json(out, "data: ", ev, "\n\n");
}

static json_t *item_at(rs_stream *st, size_t out_index) {
    return json_array_get(json_object_get(st->resp, "output"), out_index);
}

static const char *item_id_at(rs_stream *st, size_t out_index) {
    const char *id = json_string_value(json_object_get(item_at(st, out_index), "id"));
    return id ? id : "";
}

/* Add an item (stolen) at the end of output and announce it. */
static size_t add_item(rs_stream *st, api_buf *out, json_t *item) {
    json_t *output = json_object_get(st->resp, "output");
    size_t k = json_array_size(output);
    if (!item || json_array_append_new(output, item)) { out->oom = 1; return k; }
    emit(st, out, "response.output_item.added", json_pack("{s:I, s:O}", "output_index", (json_int_t)k, "item", item));
    return k;
}

static void open_text(rs_stream *st, api_buf *out, int kind) {
    char id[192];
    size_t k = json_array_size(json_object_get(st->resp, "output"));
    item_id(id, sizeof id, kind == 'r' ? "rs" : "msg", st->base, k);
    st->open_out = add_item(st, out, kind == 'r' ? reasoning_item(id, "in_progress", json_array())
                                                 : message_item(id, "in_progress", json_array()));
    st->open = kind;
    st->text.n = 0;
    emit(st, out, "response.content_part.added", json_pack("{s:s, s:I, s:i, s:o}", "item_id", id, "output_index",
         (json_int_t)st->open_out, "content_index", 0, "part", text_part(kind == 'r' ? "reasoning_text" : "output_text", "", 0)));
}

static void text_delta(rs_stream *st, api_buf *out, const char *s, size_t n) {
    int r = st->open == 'r';
    json_t *f = json_pack("{s:s, s:I, s:i, s:s%}", "item_id", item_id_at(st, st->open_out), "output_index",
                          (json_int_t)st->open_out, "content_index", 0, "delta", s, n);
    if (f && !r) json_object_set_new(f, "logprobs", json_array());
    emit(st, out, r ? "response.reasoning_text.delta" : "response.output_text.delta", f);
    api_put(&st->text, s, n);
}

static void call_delta(rs_stream *st, api_buf *out, const char *s, size_t n) {
    emit(st, out, "response.function_call_arguments.delta", json_pack("{s:s, s:I, s:s%}", "item_id",
         item_id_at(st, st->open_out), "output_index", (json_int_t)st->open_out, "delta", s, n));
    api_put(&st->text, s, n);
}

/* Close the open item with its status ("completed" / "incomplete"). */
static void close_open(rs_stream *st, api_buf *out, const char *status) {
    if (!st->open) return;
    json_t *item = item_at(st, st->open_out);
    const char *id = item_id_at(st, st->open_out);
    json_int_t k = (json_int_t)st->open_out;
    const char *t = st->text.p ? st->text.p : "";
    if (st->text.oom) out->oom = 1;
    if (st->open == 'c') {
        json_object_set_new(item, "arguments", json_stringn(t, st->text.n));
        emit(st, out, "response.function_call_arguments.done", json_pack("{s:s, s:I, s:O, s:s%}", "item_id", id,
             "output_index", k, "name", json_object_get(item, "name"), "arguments", t, st->text.n));
    } else {
        int r = st->open == 'r';
        json_t *f = json_pack("{s:s, s:I, s:i, s:s%}", "item_id", id, "output_index", k, "content_index", 0, "text", t,
                              st->text.n);
        if (f && !r) json_object_set_new(f, "logprobs", json_array());
        emit(st, out, r ? "response.reasoning_text.done" : "response.output_text.done", f);
        json_t *part = text_part(r ? "reasoning_text" : "output_text", t, st->text.n);
        emit(st, out, "response.content_part.done", json_pack("{s:s, s:I, s:i, s:O}", "item_id", id, "output_index", k,
             "content_index", 0, "part", part));
        json_object_set_new(item, "content", json_pack("[o]", part));
    }
    json_object_set_new(item, "status", json_string(status));
    emit(st, out, "response.output_item.done", json_pack("{s:I, s:O}", "output_index", k, "item", item));
    st->open = 0;
    st->text.n = 0;
}

/* The text of a kind ('r', 'm') goes to an open item of that kind. */
static void to_text(rs_stream *st, api_buf *out, int kind, const char *s, size_t n) {
    if (!n) return;
    if (st->open != kind) {
        close_open(st, out, "completed");
        open_text(st, out, kind);
    }
    text_delta(st, out, s, n);
}

/* One entry of a delta's tool_calls. */
static void to_call(rs_stream *st, api_buf *out, const json_t *tc) {
    const json_t *iv = json_object_get(tc, "index");
    long index = json_is_integer(iv) ? (long)json_integer_value(iv) : 0;
    const json_t *fn = json_object_get(tc, "function");
    const json_t *args = json_object_get(fn, "arguments");
    size_t c = 0;
    while (c < st->n_calls && st->calls[c] != index) c++;
    if (c == st->n_calls) {  /* a new call */
        if (st->n_calls == st->cap_calls) {
            size_t cap = st->cap_calls ? st->cap_calls * 2 : 4;
            long *p = realloc(st->calls, cap * sizeof *p);
            if (!p) { out->oom = 1; return; }
            st->calls = p;
            st->cap_calls = cap;
        }
        close_open(st, out, "completed");
        char id[192], cid[192];
        size_t k = json_array_size(json_object_get(st->resp, "output"));
        item_id(id, sizeof id, "fc", st->base, k);
        item_id(cid, sizeof cid, "call", st->base, k);
        const char *call_id = json_string_value(json_object_get(tc, "id"));
        const char *name = json_string_value(json_object_get(fn, "name"));
        st->calls[st->n_calls++] = index;
        st->open_out = add_item(st, out, call_item(id, "in_progress", call_id ? call_id : cid, name ? name : "", "", 0));
        st->open = 'c';
        st->open_call = c;
        st->text.n = 0;
    }
    /* the chat stream sends a call's pieces before the next call starts:
       pieces for a call already done are not expected, and dropped */
    if (st->open == 'c' && st->open_call == c && json_string_length(args))
        call_delta(st, out, json_string_value(args), json_string_length(args));
}

static void start(rs_stream *st, const json_t *chunk, api_buf *out) {
    char id[192];
    id_base(chunk, st->base, sizeof st->base);
    snprintf(id, sizeof id, "resp_%s", st->base);
    const json_t *cr = json_object_get(chunk, "created");
    long created = json_is_integer(cr) ? (long)json_integer_value(cr) : st->si ? st->si->created : 0;
    st->resp = skeleton(st->body, id, created, model_of(chunk, st->si));
    if (!st->resp) { out->oom = 1; return; }
    st->started = 1;
    emit(st, out, "response.created", json_pack("{s:O}", "response", st->resp));
    emit(st, out, "response.in_progress", json_pack("{s:O}", "response", st->resp));
}

static void *rs_stream_new(const json_t *body, const serve_info *si) {
    rs_stream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->body = json_is_object(body) ? json_deep_copy(body) : json_object();
    st->si = si;
    if (!st->body) { free(st); return NULL; }
    return st;
}

static int rs_stream_chunk(void *vst, const json_t *chunk, const char *err, api_buf *out) {
    rs_stream *st = vst;
    if (st->ended) return 0;
    if (!st->started) {
        start(st, chunk, out);
        if (!st->started) return -1;
    }
    if (err) {
        close_open(st, out, "incomplete");
        json_object_set_new(st->resp, "status", json_string("failed"));
        json_object_set_new(st->resp, "error", json_pack("{s:s, s:s}", "code", "server_error", "message", err));
        if (st->usage) json_object_set_new(st->resp, "usage", usage(st->usage));
        emit(st, out, "response.failed", json_pack("{s:O}", "response", st->resp));
        st->ended = 1;
        return out->oom ? -1 : 0;
    }
    if (!chunk) {
        int cut = !strcmp(st->finish, "length");
        if (!json_array_size(json_object_get(st->resp, "output"))) open_text(st, out, 'm');  /* as rs_response does */
        close_open(st, out, cut ? "incomplete" : "completed");
        set_status(st->resp, st->finish);
        json_object_set_new(st->resp, "usage", usage(st->usage));
        emit(st, out, cut ? "response.incomplete" : "response.completed", json_pack("{s:O}", "response", st->resp));
        st->ended = 1;
        return out->oom ? -1 : 0;
    }
    const json_t *u = json_object_get(chunk, "usage");
    if (json_is_object(u)) {
        json_decref(st->usage);
        st->usage = json_deep_copy(u);
    }
    size_t i;
    const json_t *ch;
    json_array_foreach(json_object_get(chunk, "choices"), i, ch) {
        const json_t *ix = json_object_get(ch, "index");
        if (ix && json_integer_value(ix) != 0) continue;  /* one choice: n is 1 */
        const json_t *d = json_object_get(ch, "delta"), *x;
        if ((x = json_object_get(d, "reasoning_content")) && json_is_string(x))
            to_text(st, out, 'r', json_string_value(x), json_string_length(x));
        if ((x = json_object_get(d, "content")) && json_is_string(x))
            to_text(st, out, 'm', json_string_value(x), json_string_length(x));
        size_t j;
        const json_t *tc;
        json_array_foreach(json_object_get(d, "tool_calls"), j, tc) to_call(st, out, tc);
        const char *f = json_string_value(json_object_get(ch, "finish_reason"));
        if (f) snprintf(st->finish, sizeof st->finish, "%s", f);
    }
    return out->oom ? -1 : 0;
}

static void rs_stream_free(void *vst) {
    rs_stream *st = vst;
    if (!st) return;
    json_decref(st->resp);
    json_decref(st->body);
    json_decref(st->usage);
    free(st->text.p);
    free(st->calls);
    free(st);
}

/* ---- errors --------------------------------------------------------------------- */

/* OpenAI's error object; message and param made valid UTF-8 (a refusal may
 * quote a value cut in the middle of a character). */
static json_t *rs_error(const api_error *e) {
    size_t ml, pl;
    char *msg = api_utf8_sanitize(e->msg, strnlen(e->msg, sizeof e->msg), &ml);
    char *param = api_utf8_sanitize(e->param, strnlen(e->param, sizeof e->param), &pl);
    const char *type = e->status == 401 ? "authentication_error" : e->status >= 500 ? "server_error"
                                                                                    : "invalid_request_error";
    json_t *r = msg && param ? json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", ml ? msg : "error", "type",
                                         type, "param", pl ? param : NULL, "code", e->code[0] ? e->code : NULL) : NULL;
    free(msg);
    free(param);
    return r ? r : json_pack("{s:{s:s, s:s, s:n, s:n}}", "error", "message", "out of memory", "type", type, "param", "code");
}

const serve_api serve_api_responses = {
    .name = "responses",
    .stream_type = "text/event-stream",
    .request = rs_request,
    .response = rs_response,
    .stream_new = rs_stream_new,
    .stream_chunk = rs_stream_chunk,
    .stream_free = rs_stream_free,
    .error = rs_error,
    .keepalive = api_sse_keepalive,
};
