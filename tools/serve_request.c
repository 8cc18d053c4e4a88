/* serve_request.c - an OpenAI completion request made into jobs
 * (tools/serve.h): the body parsed, every field checked (a 400 naming it),
 * OpenAI's parameters that are not implemented refused, the sampler, the
 * logit biases, the tools and tool_choice, the grammar (response_format,
 * "grammar", a forced call's), the stop strings, the prompt rendered and
 * tokenized; n jobs for "n" choices. No connection is needed: fuzz/fuzz_serve.c
 * calls it too. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

#define MAX_STOP_LEN 512        /* bytes per stop string */
#define MAX_TOKENS_ABSURD 1000000

void set_code(api_error *e, const char *code) {
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
}

/* ---- request parsing ------------------------------------------------------------------ */

/* Whether v (NULL: absent) asks nothing of the unsupported parameter name:
 * null, false, 0 (best_of: 1), an empty array/object/string, "none". */
static int neutral_value(const char *name, const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return 1;
    if (json_is_number(v)) return json_number_value(v) == (strcmp(name, "best_of") ? 0 : 1);
    if (json_is_array(v)) return json_array_size(v) == 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        int choice = !strcmp(name, "function_call");
        return !*s || (choice && (!strcmp(s, "none") || !strcmp(s, "auto")));
    }
    if (json_is_object(v)) return json_object_size(v) == 0;
    return 0;
}

/* The body of a request as JSON (NULL with e filled). */
json_t *parse_body(const char *body, size_t len, api_error *e) {
    /* JSON text never holds a raw NUL (in strings it must be escaped), but
       jansson 2.14 takes one right after a number: '{"seed": 1\0}' parses */
    const char *nul = memchr(body, 0, len);
    if (nul) {
        api_fail(e, 400, NULL, "the body is not valid JSON: a NUL byte at offset %zu", (size_t)(nul - body));
        set_code(e, "invalid_json");
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        api_fail(e, 400, NULL, "the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        set_code(e, "invalid_json");
        return NULL;
    }
    if (!json_is_object(root)) {
        api_fail(e, 400, NULL, "the body must be a JSON object");
        json_decref(root);
        return NULL;
    }
    return root;
}

/* OpenAI's "model": absent, null or a string. One model is served: any name
 * is taken for it (as llama-server does); the answer names the served id.
 * The other APIs' translators drop it (their clients name models of their own). */
int check_model(const json_t *root, api_error *e) {
    json_t *v = json_object_get(root, "model");
    if (!v || json_is_null(v) || json_is_string(v)) return 0;
    api_fail(e, 400, "model", "'model' must be a string");
    return -1;
}

/* The GBNF a request asks its output to follow: response_format json_object
 * (any JSON object) or json_schema (its schema), or llama.cpp's "grammar".
 * *gbnf NULL when none; -1 with e filled for a bad one. */
static int request_grammar(const json_t *root, char **gbnf, const char **param, api_error *e) {
    pk_error err = {0};
    *gbnf = NULL;
    *param = "grammar";
    json_t *g = json_object_get(root, "grammar"), *rf = json_object_get(root, "response_format");
    if (g && !json_is_null(g)) {
        if (!json_is_string(g) || !json_string_length(g) || strlen(json_string_value(g)) != json_string_length(g)) {
            api_fail(e, 400, "grammar", "'grammar' must be a non-empty GBNF text");
            return -1;
        }
        if (!(*gbnf = strdup(json_string_value(g)))) { api_fail(e, 500, NULL, "out of memory"); return -1; }
    }
    if (!rf || json_is_null(rf)) return 0;
    json_t *type = json_object_get(rf, "type");
    const char *t = json_is_string(type) ? json_string_value(type) : NULL;
    if (!json_is_object(rf) || !t || (strcmp(t, "text") && strcmp(t, "json_object") && strcmp(t, "json_schema"))) {
        api_fail(e, 400, "response_format", "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} "
                 "or {\"type\": \"json_schema\", \"json_schema\": {\"name\", \"schema\"}}");
        goto fail;
    }
    if (!strcmp(t, "text")) return 0;
    if (*gbnf) { api_fail(e, 400, "grammar", "'grammar' and a JSON 'response_format' cannot both be given"); goto fail; }
    *param = "response_format";
    json_t *schema = NULL;
    if (!strcmp(t, "json_object")) {
        /* llama.cpp's extension: {"type": "json_object", "schema": {...}} */
        schema = json_object_get(rf, "schema");
    } else {
        json_t *js = json_object_get(rf, "json_schema");
        if (!json_is_object(js)) {
            api_fail(e, 400, "response_format", "response_format.json_schema must be an object {\"name\", \"schema\", \"strict\"?}");
            goto fail;
        }
        schema = json_object_get(js, "schema");
        if (!schema) schema = json_object_get(rf, "schema");
        if (!json_is_object(schema) && !json_is_boolean(schema)) {
            api_fail(e, 400, "response_format", "response_format.json_schema.schema must be a JSON schema (an object)");
            goto fail;
        }
    }
    char *stext = schema && !json_is_null(schema) ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY)
                                                  : strdup("{\"type\": \"object\"}");
    if (!stext) { api_fail(e, 500, NULL, "out of memory"); goto fail; }
    int r = pk_json_schema_to_grammar(stext, strlen(stext), 0, gbnf, &err);
    free(stext);
    if (r) {
        *gbnf = NULL;
        api_fail(e, r == PK_ERR_NOMEM ? 500 : 400, "response_format", "response_format: %s", err.msg);
        set_code(e, "invalid_schema");
        return -1;
    }
    return 0;
fail:
    free(*gbnf);
    *gbnf = NULL;
    return -1;
}

/* logit_bias: {"token id": bias in [-100, 100]}. */
static int request_logit_bias(const json_t *root, pk_sampler *smp, api_error *e) {
    json_t *v = json_object_get(root, "logit_bias");
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) { api_fail(e, 400, "logit_bias", "'logit_bias' must be an object {\"token id\": bias}"); return -1; }
    size_t n = json_object_size(v);
    if (n == 0) return 0;
    int n_vocab = pk_model_n_vocab(S.model);
    if (n > (size_t)n_vocab) { api_fail(e, 400, "logit_bias", "'logit_bias' has more entries than the vocabulary"); return -1; }
    int32_t *ids = malloc(n * sizeof *ids);
    float *bias = malloc(n * sizeof *bias);
    int k = 0, bad = 0;
    const char *key;
    json_t *b;
    if (!ids || !bias) { api_fail(e, 500, NULL, "out of memory"); bad = 1; }
    json_object_foreach(v, key, b) {
        if (bad) break;
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (!*key || *end || errno || id < 0 || id >= n_vocab) {
            api_fail(e, 400, "logit_bias", "logit_bias: '%.40s' is not a token id (0 to %d)", key, n_vocab - 1);
            bad = 1;
        } else if (!json_is_number(b) || !(json_number_value(b) >= -100 && json_number_value(b) <= 100)) {
            api_fail(e, 400, "logit_bias", "logit_bias[%ld] must be a number in [-100, 100]", id);
            bad = 1;
        } else {
            ids[k] = (int32_t)id;
            bias[k++] = (float)json_number_value(b);
        }
    }
    pk_error err = {0};
    if (!bad && pk_sampler_set_logit_bias(smp, ids, bias, k, &err)) {
        api_fail(e, 400, "logit_bias", "logit_bias: %s", err.msg);
        bad = 1;
    }
    free(ids);
    free(bias);
    return bad ? -1 : 0;
}

/* tools and tool_choice: the tool-call format and the choice into j. */
static int request_tools(const json_t *root, job *j, api_error *e) {
    json_t *tools = json_object_get(root, "tools"), *tc = json_object_get(root, "tool_choice");
    int has_tools = json_is_array(tools) && json_array_size(tools) > 0;
    const char *choice = "auto";
    if (tc && !json_is_null(tc)) {
        json_t *f = json_object_get(json_object_get(tc, "function"), "name");
        if (json_is_string(tc) && (!strcmp(json_string_value(tc), "auto") || !strcmp(json_string_value(tc), "none") ||
                                   !strcmp(json_string_value(tc), "required")))
            choice = json_string_value(tc);
        else if (json_is_object(tc) && json_is_string(f) && json_string_length(f) > 0 &&
                 json_string_length(f) < sizeof j->tool_choice)
            choice = json_string_value(f);
        else {
            api_fail(e, 400, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                     "{\"type\": \"function\", \"function\": {\"name\": NAME}}");
            return -1;
        }
        if (!has_tools && strcmp(choice, "none") && strcmp(choice, "auto")) {
            api_fail(e, 400, "tool_choice", "'tool_choice' asks for a call but 'tools' is empty");
            return -1;
        }
        if (json_is_object(tc)) {
            int found = 0;
            for (size_t i = 0; i < json_array_size(tools) && !found; i++) {
                json_t *n = json_object_get(json_object_get(json_array_get(tools, i), "function"), "name");
                found = json_is_string(n) && !strcmp(json_string_value(n), choice);
            }
            if (!found) {
                api_fail(e, 400, "tool_choice", "tool_choice names '%.80s', which is not one of 'tools'", choice);
                return -1;
            }
        }
    }
    json_t *ptc = json_object_get(root, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc)) {
        api_fail(e, 400, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        return -1;
    }
    j->one_call = json_is_false(ptc);
    snprintf(j->tool_choice, sizeof j->tool_choice, "%s", choice);
    if (!has_tools || !strcmp(choice, "none")) return 0;
    if (!S.jinja || !S.toolfmt) {
        api_fail(e, 400, "tools", "'tools' cannot be used with this model: %s", !S.jinja ?
                 "the chat template in use is a built-in formatter (start the server without --chat-template, or "
                 "with --chat-template-file)" : "its chat template writes tool calls in a format pocket does not parse");
        set_code(e, "unsupported_parameter");
        return -1;
    }
    j->toolfmt = S.toolfmt;
    if (!(j->tools_json = json_dumps(tools, JSON_COMPACT))) { api_fail(e, 500, NULL, "out of memory"); return -1; }
    return 0;
}

/* The grammar of a forced call (tool_choice "required" or a function's
 * name; docs/tool-calls.md, "Forcing a call"): attached from the first
 * generated token, it holds the reasoning too: inside a <think> the prompt
 * opened (unless a reasoning budget closes it first: then the call comes at
 * once), or an optional one first when the template knows <think> or the
 * format is harmony's, or gemma4's with a prompt (prompt) that leaves the
 * thought channel to the model (thinking on: no empty one closes it).
 * -1 with e filled (a schema the converter refuses: 400). */
static int tool_grammar(const job *j, const char *prompt, char **gbnf, api_error *e) {
    int flags = PK_SCHEMA_LENIENT | (j->one_call ? PK_TOOLCALL_ONE_CALL : 0);
    size_t pl = strlen(prompt);
    if (j->think_open) flags |= j->reasoning_budget < 0 ? PK_TOOLCALL_THINKING : 0;
    else if (!strcmp(j->toolfmt, "harmony") ||
             (!strcmp(j->toolfmt, "gemma4") && (pl < 10 || strcmp(prompt + pl - 10, "<channel|>"))) ||
             (S.template_text && memmem(S.template_text, S.template_len, "<think>", 7)))
        flags |= PK_TOOLCALL_MAY_THINK;
    pk_error err = {0};
    if (pk_toolcall_grammar(j->toolfmt, j->tools_json, strlen(j->tools_json), j->tool_choice, flags, gbnf, &err)) {
        *gbnf = NULL;
        api_fail(e, err.code == PK_ERR_NOMEM ? 500 : 400, "tools", "%s", err.msg);
        return -1;
    }
    return 0;
}

/* Parse and validate an OpenAI completion request (root: its JSON object)
 * into a new job: the choice `index` of the request (n > 1: the seed is the
 * request's + index). NULL with e filled. No connection is needed:
 * tests/fuzz call it too. */
static job *parse_request(const json_t *root, int chat, int index, api_error *e) {
#define FAIL(st, code_, param, ...) do { api_fail(e, st, param, __VA_ARGS__); set_code(e, code_); goto fail; } while (0)
#define FAIL_BAD(param, ...) FAIL(400, NULL, param, __VA_ARGS__)
#define FAIL_OOM() FAIL(500, NULL, NULL, "out of memory")
#define CHECK(x) do { if (x) goto fail; } while (0)
    job *j = NULL;
    char *prompt_text = NULL, *gbnf = NULL;
    json_t *conv = NULL;
    if (!json_is_object(root)) FAIL_BAD(NULL, "the body must be a JSON object");
    j = calloc(1, sizeof *j);
    if (!j) FAIL_OOM();
    pthread_cond_init(&j->cv, NULL);
    j->wake = &j->cv;
    j->chat = chat;
    j->max_tokens = -1;
    j->stop_hit = -1;
    j->index = index;
    j->reasoning_budget = -1;

    json_t *v = json_object_get(root, "stream");
    if (v && !json_is_null(v) && !json_is_boolean(v)) FAIL_BAD("stream", "'stream' must be a boolean");
    j->stream = json_is_true(v);
    v = json_object_get(root, "stream_options");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) FAIL_BAD("stream_options", "'stream_options' must be an object");
        json_t *u = json_object_get(v, "include_usage");
        if (u && !json_is_null(u) && !json_is_boolean(u))
            FAIL_BAD("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        j->include_usage = json_is_true(u);
    }
    const char *mt_names[] = {"max_completion_tokens", "max_tokens"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(root, mt_names[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_integer(v)) FAIL_BAD(mt_names[i], "'%s' must be an integer", mt_names[i]);
        json_int_t x = json_integer_value(v);
        if (x < 0 || x > MAX_TOKENS_ABSURD)
            FAIL_BAD(mt_names[i], "'%s' is %lld; it must be in [0, %d]", mt_names[i], (long long)x, MAX_TOKENS_ABSURD);
        j->max_tokens = (int)x;
        break;
    }
    /* Parameters of OpenAI's API that pocket does not implement are refused
       rather than ignored. Each may be sent with its neutral value. */
    static const struct { const char *name, *neutral; } unsupported[] = {
        {"functions", "[]"}, {"function_call", "\"none\""}, {"echo", "false"}, {"suffix", "\"\""}, {"best_of", "1"},
        {"audio", "null"}, {"prediction", "null"}, {"web_search_options", "null"},
    };
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (!neutral_value(unsupported[i].name, json_object_get(root, unsupported[i].name)))
            FAIL(400, "unsupported_parameter", unsupported[i].name,
                 "'%s' is not supported by this server (pocket serve); remove it or send %s", unsupported[i].name,
                 unsupported[i].neutral);
    /* llama.cpp's names: "none" = the raw text; "auto" and "deepseek" (the
       default) = reasoning apart. "deepseek-legacy" (reasoning in both) is not done. */
    j->split = chat;
    v = json_object_get(root, "reasoning_format");
    if (v && !json_is_null(v)) {
        const char *rf = json_is_string(v) ? json_string_value(v) : NULL;
        if (!rf || (strcmp(rf, "none") && strcmp(rf, "auto") && strcmp(rf, "deepseek")))
            FAIL_BAD("reasoning_format", "'reasoning_format' must be \"auto\", \"deepseek\" (the reasoning in "
                     "reasoning_content) or \"none\" (the text as generated)%s%.40s%s", rf ? "; got \"" : "",
                     rf ? rf : "", rf ? "\"" : "");
        if (!chat && strcmp(rf, "none"))
            FAIL_BAD("reasoning_format", "'reasoning_format' applies to chat completions; a text completion "
                     "is the text as generated (\"none\")");
        j->split = chat && strcmp(rf, "none") != 0;
    }
    v = json_object_get(root, "thinking_budget_tokens");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > MAX_TOKENS_ABSURD)
            FAIL_BAD("thinking_budget_tokens", "'thinking_budget_tokens' must be an integer in [0, %d]", MAX_TOKENS_ABSURD);
        if (!chat) FAIL_BAD("thinking_budget_tokens", "'thinking_budget_tokens' applies to chat completions");
        if (!strcmp(S.chat_template, "harmony") || !strcmp(S.chat_template, "gemma4"))
            FAIL(400, "unsupported_parameter", "thinking_budget_tokens", "'thinking_budget_tokens' is not supported for "
                 "the '%s' template (only <think> ... </think> reasoning)", S.chat_template);
        j->reasoning_budget = (int)json_integer_value(v);
    }

    pk_sampler_params sp = S.sp;
    struct { const char *name; float *dst; double lo, hi; } nums[] = {
        {.name = "temperature", .dst = &sp.temperature, .lo = 0, .hi = 2},
        {.name = "top_p", .dst = &sp.top_p, .lo = 0, .hi = 1},
        {.name = "min_p", .dst = &sp.min_p, .lo = 0, .hi = 1},
        {.name = "repeat_penalty", .dst = &sp.repeat_penalty, .lo = 0, .hi = 10},
        {.name = "presence_penalty", .dst = &sp.presence_penalty, .lo = -2, .hi = 2},
        {.name = "frequency_penalty", .dst = &sp.frequency_penalty, .lo = -2, .hi = 2},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        v = json_object_get(root, nums[i].name);
        if (!v || json_is_null(v)) continue;
        if (!json_is_number(v)) FAIL_BAD(nums[i].name, "'%s' must be a number", nums[i].name);
        double x = json_number_value(v);
        if (!(x >= nums[i].lo && x <= nums[i].hi))
            FAIL_BAD(nums[i].name, "'%s' is %g; it must be in [%g, %g]", nums[i].name, x, nums[i].lo, nums[i].hi);
        *nums[i].dst = (float)x;
    }
    j->penalties = sp.presence_penalty != 0 || sp.frequency_penalty != 0;
    v = json_object_get(root, "top_k");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
            FAIL_BAD("top_k", "'top_k' must be a non-negative integer");
        sp.top_k = (int)json_integer_value(v);
    }
    v = json_object_get(root, "seed");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) FAIL_BAD("seed", "'seed' must be an integer");
        sp.seed = (uint64_t)json_integer_value(v) + (uint64_t)index;
    } else if (!S.seed_given || index > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        pthread_mutex_lock(&S.mu);
        sp.seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^ ++S.id_counter << 32;
        pthread_mutex_unlock(&S.mu);
    }
    j->tc_seed = sp.seed * 0x9E3779B97F4A7C15ull + 1;
    pk_error perr = {0};
    j->sampler = pk_sampler_new(&sp, pk_model_n_vocab(S.model), &perr);
    if (!j->sampler) FAIL_BAD(NULL, "bad sampling parameters: %s", perr.msg);
    CHECK(request_logit_bias(root, j->sampler, e));

    /* log-probabilities: chat {"logprobs": true, "top_logprobs": 0-20};
       text completions the legacy {"logprobs": 0-5} (the top count) */
    v = json_object_get(root, "logprobs");
    json_t *tl = json_object_get(root, "top_logprobs");
    if (chat) {
        if (v && !json_is_null(v) && !json_is_boolean(v)) FAIL_BAD("logprobs", "'logprobs' must be a boolean");
        j->logprobs = json_is_true(v);
        if (tl && !json_is_null(tl)) {
            if (!json_is_integer(tl) || json_integer_value(tl) < 0 || json_integer_value(tl) > MAX_TOP_LOGPROBS)
                FAIL_BAD("top_logprobs", "'top_logprobs' must be an integer in [0, %d]", MAX_TOP_LOGPROBS);
            if (json_integer_value(tl) > 0 && !j->logprobs)
                FAIL_BAD("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
            j->top_logprobs = (int)json_integer_value(tl);
        }
    } else {
        if (tl && !json_is_null(tl)) FAIL_BAD("top_logprobs", "text completions take \"logprobs\": N (0 to 5)");
        if (v && !json_is_null(v)) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 5)
                FAIL_BAD("logprobs", "'logprobs' must be an integer in [0, 5] (the most likely tokens listed)");
            j->logprobs = 1;
            j->top_logprobs = (int)json_integer_value(v);
        }
    }

    v = json_object_get(root, "stop");
    if (v && !json_is_null(v)) {
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        if (!json_is_string(v) && !json_is_array(v)) FAIL_BAD("stop", "'stop' must be a string or an array of strings");
        if (n > MAX_STOP) FAIL_BAD("stop", "'stop' has %zu strings; at most %d are allowed", n, MAX_STOP);
        for (size_t i = 0; i < n; i++) {
            json_t *s = json_is_array(v) ? json_array_get(v, i) : v;
            if (!json_is_string(s)) FAIL_BAD("stop", "'stop' must be a string or an array of strings");
            size_t sl = json_string_length(s);
            if (sl == 0 || sl > MAX_STOP_LEN || strlen(json_string_value(s)) != sl)
                FAIL_BAD("stop", "each stop string must have 1 to %d bytes (and no NUL)", MAX_STOP_LEN);
            if (!(j->stop[j->n_stop] = strdup(json_string_value(s)))) FAIL_OOM();
            j->n_stop++;
        }
    }

    j->stop_user = j->n_stop;
    if (chat) {
        CHECK(!(conv = conversation_json(root, e)));
        CHECK(request_tools(root, j, e));
        CHECK(!(prompt_text = render_chat(conv, json_array_size(json_object_get(conv, "messages")), 1, e)));
        j->think_open = prompt_opens_think(prompt_text);
        const char *end = chat_end_marker();
        if (end && j->n_stop < MAX_STOP) {
            if (!(j->stop[j->n_stop] = strdup(end))) FAIL_OOM();
            j->n_stop++;
        }
    } else {
        static const char *const chat_only[] = {"messages", "tools", "tool_choice", "chat_template_kwargs", "reasoning_effort"};
        for (size_t i = 0; i < sizeof chat_only / sizeof chat_only[0]; i++)
            if (!neutral_value(chat_only[i], json_object_get(root, chat_only[i])))
                FAIL_BAD(chat_only[i], "'%s' applies to chat completions (/v1/chat/completions)", chat_only[i]);
        json_t *p = json_object_get(root, "prompt");
        if (!p) FAIL_BAD("prompt", "'prompt' is required");
        if (json_is_array(p) && json_array_size(p) == 1) p = json_array_get(p, 0);
        if (!json_is_string(p)) FAIL_BAD("prompt", "'prompt' must be a string (or an array of one string)");
        if (!(prompt_text = strdup(json_string_value(p)))) FAIL_OOM();
    }
    for (int i = 0; i < j->n_stop; i++)
        if (strlen(j->stop[i]) > j->stop_maxlen) j->stop_maxlen = strlen(j->stop[i]);

    const char *gparam;
    CHECK(request_grammar(root, &gbnf, &gparam, e));
    /* tool_choice "required" or a name: a grammar forces the call, unless
       the request brings its own "grammar" (llama.cpp's: it is the caller's
       to make it call); a JSON response_format beside it is refused */
    int forcing = j->toolfmt && (!strcmp(j->tool_choice, "required") || (strcmp(j->tool_choice, "auto") &&
                                                                          strcmp(j->tool_choice, "none")));
    if (forcing && gbnf && strcmp(gparam, "grammar"))
        FAIL_BAD(gparam, "'%s' cannot be given with a tool_choice that forces a call (one grammar at a time)", gparam);
    if (gbnf) forcing = 0;
    if (forcing) {
        CHECK(tool_grammar(j, prompt_text, &gbnf, e));
        gparam = "tools";
    }
    if (gbnf) CHECK(!(j->grammar = grammar_acquire(gbnf, gparam, e)));
    /* constrained output after an opened <think>: the reasoning is closed
       at once unless a budget is given; the grammar starts after it (a
       forced call's grammar holds the reasoning itself: tool_grammar) */
    if (j->grammar && !forcing && j->think_open && j->reasoning_budget < 0) j->reasoning_budget = 0;

    /* Tokenize; the prompt must leave room for at least one generated token. */
    size_t plen = strlen(prompt_text);
    int cap = S.n_ctx + 1;
    j->prompt = malloc((size_t)cap * sizeof *j->prompt);
    if (!j->prompt) FAIL_OOM();
    int n = pk_model_tokenize(S.model, prompt_text, plen, j->prompt, cap, 1, 1);
    if (n < 0) FAIL_BAD(chat ? "messages" : "prompt", "the prompt could not be tokenized: %s", pk_status_str(-n));
    if (n >= S.n_ctx)
        FAIL(400, "context_length_exceeded", chat ? "messages" : "prompt",
             "the prompt has %s%d tokens; this server's context holds %d (prompt and completion)",
             n > cap ? "more than " : "", n > cap ? cap : n, S.n_ctx);
    if (n == 0) FAIL_BAD("prompt", "the prompt is empty");
    j->n_prompt = n;
    if (chat && S.recurrent && S.n_ckpt > 0) message_starts(j, conv);

    pthread_mutex_lock(&S.mu);
    uint64_t idn = ++S.id_counter;
    pthread_mutex_unlock(&S.mu);
    snprintf(j->id, sizeof j->id, "%s-%08lx%08llx", chat ? "chatcmpl" : "cmpl", (unsigned long)time(NULL),
             (unsigned long long)idn);
    j->created = (long)time(NULL);
    free(prompt_text);
    free(gbnf);
    json_decref(conv);
    return j;
fail:
    if (j) { j->refs = 1; job_unref(j); }
    free(prompt_text);
    free(gbnf);
    json_decref(conv);
    return NULL;
#undef CHECK
#undef FAIL_OOM
#undef FAIL_BAD
#undef FAIL
}

/* The jobs of a request (root: the OpenAI request): n of them (its "n"),
 * the first their leader. Returns n, or 0 with e filled. */
int request_jobs(const json_t *root, int chat, job **jobs, api_error *e) {
    json_t *v = json_object_get(root, "n");
    int n = 1;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > MAX_N) {
            api_fail(e, 400, "n", "'n' must be an integer in [1, %d]", MAX_N);
            return 0;
        }
        n = (int)json_integer_value(v);
    }
    for (int i = 0; i < n; i++) {
        if (!(jobs[i] = parse_request(root, chat, i, e))) {
            for (int k = 0; k < i; k++) { jobs[k]->refs = 1; job_unref(jobs[k]); }
            return 0;
        }
        if (i) {
            snprintf(jobs[i]->id, sizeof jobs[i]->id, "%s", jobs[0]->id);
            jobs[i]->created = jobs[0]->created;
        }
    }
    return n;
}
