/* tools/serve_ollama.c - Ollama's API as a translation over pocket serve's
 * one request path (tools/serve_api.h): POST /api/chat and /api/generate,
 * and the model endpoints /api/tags, /api/show, /api/version, /api/ps
 * (tools/serve_ollama.h). docs/serving.md, "Ollama API", says what is
 * taken, what is refused and why.
 *
 * Requests. /api/chat's messages become OpenAI messages (tool_calls with
 * arguments as an object -> arguments as a JSON string, with ids made up
 * when the client sent none; a tool result's tool_name -> the id of the call
 * it answers; thinking -> reasoning_content), tools pass as they are,
 * format ("json" or a JSON schema) -> response_format, options -> the
 * sampling fields, think -> chat_template_kwargs.enable_thinking (a level ->
 * reasoning_effort). /api/generate is a chat of one user message (and the
 * system one), or with raw: true a text completion of the prompt as it is.
 * Fields of Ollama's API that pocket cannot honour (images, template,
 * suffix, context, sampling options it does not have) are refused with a
 * 400 naming them; settings of how Ollama loads a model (num_gpu,
 * num_thread, keep_alive, ...) are pocket serve's command-line flags and are
 * accepted and ignored. Fields that are not Ollama's are ignored, as Ollama
 * ignores them, but for tool_choice (OpenAI's), which /api/chat takes.
 *
 * Responses. Ollama streams NDJSON, one object a line, "done": false until
 * the last, which carries done_reason and the counts and durations (ns).
 * Text and thinking go out as they come; tool calls, which Ollama sends
 * whole, are gathered from the OpenAI deltas and sent in one line when the
 * choice finishes. Durations are the server's "timings" when a chunk or the
 * completion carries them (llama.cpp's prompt_ms / predicted_ms), else wall
 * time measured here from the request (streamed) or the total alone
 * (not streamed).
 */
#include "serve_ollama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CALLS 128           /* tool calls gathered per answer (index bound) */
#define MAX_TOP_LOGPROBS 20

/* ---- small helpers ----------------------------------------------------------------- */

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* RFC 3339 in UTC with microseconds (what Go, JavaScript and Python all parse). */
static void rfc3339(char out[40], time_t sec, long usec) {
    struct tm tm;
    gmtime_r(&sec, &tm);
    size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 40 - n, ".%06ldZ", usec);
}

static void rfc3339_now(char out[40]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rfc3339(out, ts.tv_sec, ts.tv_nsec / 1000);
}

static int is_set(const json_t *v) { return v && !json_is_null(v); }

/* A string value as it is (NUL bytes included). */
static json_t *str_of(const json_t *v) { return json_stringn(json_string_value(v), json_string_length(v)); }

/* A whole number (JSON 40 or 40.0), within [lo, hi]. */
static int whole(const json_t *v, double lo, double hi, long long *out) {
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (!(x >= lo && x <= hi)) return 0;
        *out = (long long)x;
        return 1;
    }
    if (!json_is_number(v)) return 0;
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi) || x != floor(x)) return 0;
    *out = (long long)x;
    return 1;
}

/* The model name a response carries: the request's, else the listed one. */
static json_t *model_of(const json_t *body, const serve_info *si) {
    json_t *m = json_object_get(body, "model");
    if (json_is_string(m) && json_string_length(m)) return str_of(m);
    char buf[300];
    return json_string(ollama_model_name(si, buf, sizeof buf));
}

const char *ollama_model_name(const serve_info *si, char *buf, size_t n) {
    const char *id = si->model_id ? si->model_id : "model";
    snprintf(buf, n, "%s%s", id, strchr(id, ':') ? "" : ":latest");
    return buf;
}

/* ---- requests ---------------------------------------------------------------------- */

/* options {...} -> the OpenAI request's sampling fields. */
static int map_options(const json_t *opts, const serve_info *si, json_t *req, api_error *e) {
    if (!is_set(opts)) return 0;
    if (!json_is_object(opts)) { api_fail(e, 400, "options", "'options' must be an object"); return -1; }
    /* how Ollama loads and runs a model: pocket serve's flags say it */
    static const char *const load_opts[] = {
        "numa", "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "logits_all", "vocab_only",
        "use_mmap", "use_mlock", "embedding_only", "num_thread", "num_keep", "penalize_newline",
        "mirostat_tau", "mirostat_eta",     /* no effect without mirostat, refused below */
    };
    static const char *const same[] = {
        "temperature", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty",
    };
    json_t *rp = json_object_get(opts, "repeat_penalty");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)opts, key, v) {
        if (json_is_null(v)) continue;      /* as Ollama: a null option is not set */
        long long x;
        size_t i;
        for (i = 0; i < sizeof same / sizeof same[0]; i++)
            if (!strcmp(key, same[i])) break;
        if (i < sizeof same / sizeof same[0]) {
            if (!json_is_number(v)) { api_fail(e, 400, key, "'options.%s' must be a number", key); return -1; }
            json_object_set_new(req, key, json_copy(v));
            continue;
        }
        for (i = 0; i < sizeof load_opts / sizeof load_opts[0]; i++)
            if (!strcmp(key, load_opts[i])) break;
        if (i < sizeof load_opts / sizeof load_opts[0]) continue;
        if (!strcmp(key, "top_k")) {
            if (!whole(v, 0, 1e9, &x)) { api_fail(e, 400, key, "'options.top_k' must be a whole number >= 0"); return -1; }
            json_object_set_new(req, "top_k", json_integer(x));
        } else if (!strcmp(key, "seed")) {
            if (!whole(v, -9.2e18, 9.2e18, &x)) { api_fail(e, 400, key, "'options.seed' must be a whole number"); return -1; }
            if (x >= 0) json_object_set_new(req, "seed", json_integer(x));    /* < 0: a random seed, as Ollama */
        } else if (!strcmp(key, "num_predict")) {
            if (!whole(v, -2, 1e9, &x)) {
                api_fail(e, 400, key, "'options.num_predict' must be a whole number >= -2 (-1: no limit, -2: fill the context)");
                return -1;
            }
            if (x >= 0) json_object_set_new(req, "max_tokens", json_integer(x));
        } else if (!strcmp(key, "stop")) {
            if (json_is_string(v)) {
                json_object_set_new(req, "stop", json_array());
                json_array_append_new(json_object_get(req, "stop"), str_of(v));
                continue;
            }
            if (!json_is_array(v)) { api_fail(e, 400, key, "'options.stop' must be an array of strings"); return -1; }
            for (size_t k = 0; k < json_array_size(v); k++)
                if (!json_is_string(json_array_get(v, k))) {
                    api_fail(e, 400, key, "'options.stop' must be an array of strings; [%zu] is not a string", k);
                    return -1;
                }
            if (json_array_size(v)) json_object_set_new(req, "stop", json_deep_copy(v));
        } else if (!strcmp(key, "num_ctx")) {
            if (!whole(v, 1, 1e12, &x)) { api_fail(e, 400, key, "'options.num_ctx' must be a whole number > 0"); return -1; }
            if (x > si->n_ctx) {
                api_fail(e, 400, key, "'options.num_ctx' is %lld; this server's context holds %d tokens (pocket serve -c "
                         "sets it): send at most %d or leave it out", x, si->n_ctx, si->n_ctx);
                return -1;
            }
        } else if (!strcmp(key, "mirostat")) {
            if (!json_is_number(v) || json_number_value(v) != 0) {
                api_fail(e, 400, key, "'options.mirostat': pocket does not sample with Mirostat; send 0 or leave it out");
                return -1;
            }
        } else if (!strcmp(key, "tfs_z") || !strcmp(key, "typical_p")) {
            if (!json_is_number(v) || json_number_value(v) != 1) {
                api_fail(e, 400, key, "'options.%s': pocket does not do %s sampling; send 1 (off) or leave it out", key,
                         key[0] == 't' && key[1] == 'f' ? "tail-free" : "locally typical");
                return -1;
            }
        } else if (!strcmp(key, "repeat_last_n")) {
            /* pocket's repetition penalty looks at the last 64 tokens; the
               window matters only when there is a penalty */
            int penalty = json_is_number(rp) && json_number_value(rp) != 1;
            if (!json_is_number(v) || (penalty && json_number_value(v) != 64)) {
                api_fail(e, 400, key, "'options.repeat_last_n': pocket's repetition penalty looks at the last 64 tokens; "
                         "send 64 or leave it out");
                return -1;
            }
        } else {
            api_fail(e, 400, key, "'options.%.60s' is not an Ollama option pocket serve knows", key);
            return -1;
        }
    }
    return 0;
}

/* What /api/chat and /api/generate share: model, stream, format, options,
   think, logprobs and the fields that change nothing here. */
static int map_common(const json_t *body, const serve_info *si, json_t *req, int chat, api_error *e) {
    json_t *v = json_object_get(body, "model");
    if (!json_is_string(v) || !json_string_length(v)) {
        api_fail(e, 400, "model", "'model' is required (a string; this server serves one model, any name is taken)");
        return -1;
    }
    v = json_object_get(body, "stream");
    if (is_set(v) && !json_is_boolean(v)) { api_fail(e, 400, "stream", "'stream' must be a boolean"); return -1; }
    int stream = !is_set(v) || json_is_true(v);     /* Ollama streams unless told not to */
    json_object_set_new(req, "stream", json_boolean(stream));
    if (stream) json_object_set_new(req, "stream_options", json_pack("{s:b}", "include_usage", 1));

    v = json_object_get(body, "format");
    if (json_is_string(v) && !strcmp(json_string_value(v), "json")) {
        json_object_set_new(req, "response_format", json_pack("{s:s}", "type", "json_object"));
    } else if (json_is_object(v)) {
        json_object_set_new(req, "response_format",
                            json_pack("{s:s, s:{s:s, s:O, s:b}}", "type", "json_schema", "json_schema", "name",
                                      "format", "schema", v, "strict", 1));
    } else if (is_set(v) && !(json_is_string(v) && !json_string_length(v))) {
        api_fail(e, 400, "format", "'format' must be \"json\" or a JSON schema (an object)%s%.40s%s",
                 json_is_string(v) ? "; got \"" : "", json_is_string(v) ? json_string_value(v) : "",
                 json_is_string(v) ? "\"" : "");
        return -1;
    }
    if (map_options(json_object_get(body, "options"), si, req, e)) return -1;

    v = json_object_get(body, "think");
    if (json_is_boolean(v)) {
        json_object_set_new(req, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", json_is_true(v)));
    } else if (json_is_string(v)) {
        const char *t = json_string_value(v);
        if (strcmp(t, "low") && strcmp(t, "medium") && strcmp(t, "high") && strcmp(t, "max")) {
            api_fail(e, 400, "think", "'think' must be true, false, \"low\", \"medium\", \"high\" or \"max\"; got \"%.40s\"", t);
            return -1;
        }
        json_object_set_new(req, "chat_template_kwargs", json_pack("{s:b}", "enable_thinking", 1));
        json_object_set_new(req, "reasoning_effort", json_string(strcmp(t, "max") ? t : "high"));
    } else if (is_set(v)) {
        api_fail(e, 400, "think", "'think' must be a boolean or a level (\"low\", \"medium\", \"high\", \"max\")");
        return -1;
    }

    v = json_object_get(body, "logprobs");
    if (is_set(v) && !json_is_boolean(v)) { api_fail(e, 400, "logprobs", "'logprobs' must be a boolean"); return -1; }
    json_t *tl = json_object_get(body, "top_logprobs");
    long long top = 0;
    if (is_set(tl) && !whole(tl, 0, MAX_TOP_LOGPROBS, &top)) {
        api_fail(e, 400, "top_logprobs", "'top_logprobs' must be a whole number in [0, %d]", MAX_TOP_LOGPROBS);
        return -1;
    }
    if (json_is_true(v)) {
        if (chat) {
            json_object_set_new(req, "logprobs", json_true());
            if (top) json_object_set_new(req, "top_logprobs", json_integer(top));
        } else {
            json_object_set_new(req, "logprobs", json_integer(top));     /* /v1/completions' form */
        }
    }

    /* accepted, and nothing to do: the model stays loaded (keep_alive); a
       prompt longer than the context is refused, never cut (truncate,
       shift) */
    static const char *const bools[] = {"truncate", "shift"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(body, bools[i]);
        if (is_set(v) && !json_is_boolean(v)) { api_fail(e, 400, bools[i], "'%s' must be a boolean", bools[i]); return -1; }
    }
    v = json_object_get(body, "keep_alive");
    if (is_set(v) && !json_is_string(v) && !json_is_number(v)) {
        api_fail(e, 400, "keep_alive", "'keep_alive' must be a duration (\"5m\") or a number of seconds");
        return -1;
    }
    if (json_is_true(json_object_get(body, "_debug_render_only"))) {
        api_fail(e, 400, "_debug_render_only", "'_debug_render_only' is not supported by pocket serve (POST "
                 "/apply-template renders a conversation)");
        return -1;
    }
    return 0;
}

static int refuse_images(const json_t *v, const char *where, api_error *e) {
    if (!is_set(v) || (json_is_array(v) && json_array_size(v) == 0)) return 0;
    api_fail(e, 400, "images", "'%s': pocket serve runs text models; it takes no images", where);
    return -1;
}

/* The id of a call in the request: its own, else one made from where it is. */
static json_t *call_id(const json_t *call, size_t msg, size_t k) {
    json_t *id = json_object_get(call, "id");
    if (json_is_string(id) && json_string_length(id)) return str_of(id);
    char buf[48];
    snprintf(buf, sizeof buf, "call_%zu_%zu", msg, k);
    return json_string(buf);
}

/* Ollama messages -> OpenAI messages (new array; NULL with e set). */
static json_t *map_messages(const json_t *msgs, api_error *e) {
    if (!json_is_array(msgs)) { api_fail(e, 400, "messages", "'messages' must be an array"); return NULL; }
    if (!json_array_size(msgs)) {
        api_fail(e, 400, "messages", "'messages' is empty: pocket serve keeps its one model loaded, there is nothing to "
                 "load; send a conversation");
        return NULL;
    }
    json_t *out = json_array();
    json_t *pending = json_array();     /* the last assistant message's calls: [id, name, answered] */
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i);
        char where[64], role[16];
        if (!json_is_object(m)) { api_fail(e, 400, "messages", "messages[%zu] must be an object", i); goto fail; }
        json_t *r = json_object_get(m, "role"), *c = json_object_get(m, "content");
        size_t rl = json_is_string(r) ? json_string_length(r) : 0;
        if (!rl || rl >= sizeof role) {
            api_fail(e, 400, "messages", "messages[%zu].role must be system, user, assistant or tool", i);
            goto fail;
        }
        for (size_t k = 0; k <= rl; k++) {     /* Ollama takes the role in any case */
            char ch = json_string_value(r)[k];
            role[k] = ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch;
        }
        if (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool")) {
            api_fail(e, 400, "messages", "messages[%zu].role '%.20s' is not system, user, assistant or tool", i, role);
            goto fail;
        }
        if (is_set(c) && !json_is_string(c)) {
            api_fail(e, 400, "messages", "messages[%zu].content must be a string", i);
            goto fail;
        }
        snprintf(where, sizeof where, "messages[%zu].images", i);
        if (refuse_images(json_object_get(m, "images"), where, e)) goto fail;
        json_t *o = json_pack("{s:s, s:o}", "role", role, "content", json_is_string(c) ? str_of(c) : json_string(""));
        json_array_append_new(out, o);

        json_t *th = json_object_get(m, "thinking");
        if (is_set(th)) {
            if (!json_is_string(th) || strcmp(role, "assistant")) {
                api_fail(e, 400, "messages", "messages[%zu].thinking must be a string, on an assistant message", i);
                goto fail;
            }
            if (json_string_length(th)) json_object_set_new(o, "reasoning_content", str_of(th));
        }
        json_t *calls = json_object_get(m, "tool_calls");
        if (is_set(calls) && !(json_is_array(calls) && !json_array_size(calls))) {
            if (!json_is_array(calls) || strcmp(role, "assistant")) {
                api_fail(e, 400, "messages", "messages[%zu].tool_calls must be an array, on an assistant message", i);
                goto fail;
            }
            json_t *tc = json_array();
            json_object_set_new(o, "tool_calls", tc);
            json_array_clear(pending);
            for (size_t k = 0; k < json_array_size(calls); k++) {
                json_t *call = json_array_get(calls, k), *f = json_object_get(call, "function");
                json_t *name = json_object_get(f, "name"), *args = json_object_get(f, "arguments");
                if (!json_is_string(name) || !json_string_length(name)) {
                    api_fail(e, 400, "messages", "messages[%zu].tool_calls[%zu].function.name must be a string", i, k);
                    goto fail;
                }
                char *a = NULL;
                if (json_is_object(args)) a = json_dumps(args, JSON_COMPACT);
                else if (json_is_string(args)) a = strdup(json_string_value(args));     /* already JSON text */
                else if (!is_set(args)) a = strdup("{}");
                else {
                    api_fail(e, 400, "messages", "messages[%zu].tool_calls[%zu].function.arguments must be an object", i, k);
                    goto fail;
                }
                if (!a) { api_fail(e, 500, NULL, "out of memory"); goto fail; }
                json_t *id = call_id(call, i, k);
                json_array_append_new(tc, json_pack("{s:O, s:s, s:{s:O, s:s}}", "id", id, "type", "function",
                                                    "function", "name", name, "arguments", a));
                json_array_append_new(pending, json_pack("[o, O, b]", id, name, 0));
                free(a);
            }
        }
        if (!strcmp(role, "tool")) {
            /* the call it answers: by id, else the first unanswered call of
               that name, else the first unanswered call */
            json_t *tid = json_object_get(m, "tool_call_id"), *tname = json_object_get(m, "tool_name");
            if ((is_set(tid) && !json_is_string(tid)) || (is_set(tname) && !json_is_string(tname))) {
                api_fail(e, 400, "messages", "messages[%zu].%s must be a string", i,
                         is_set(tid) && !json_is_string(tid) ? "tool_call_id" : "tool_name");
                goto fail;
            }
            json_t *hit = NULL;
            for (int pass = 0; pass < 3 && !hit; pass++)
                for (size_t k = 0; k < json_array_size(pending) && !hit; k++) {
                    json_t *p = json_array_get(pending, k);
                    if (pass == 0 ? json_is_string(tid) && json_equal(json_array_get(p, 0), tid)
                        : pass == 1 ? json_is_string(tname) && !json_is_true(json_array_get(p, 2)) &&
                                          json_equal(json_array_get(p, 1), tname)
                                    : !json_is_string(tid) && !json_is_string(tname) && !json_is_true(json_array_get(p, 2)))
                        hit = p;
                }
            if (hit) {
                json_array_set_new(hit, 2, json_true());
                json_object_set(o, "tool_call_id", json_array_get(hit, 0));
                json_object_set(o, "name", json_array_get(hit, 1));
            } else if (json_is_string(tid)) {
                json_object_set(o, "tool_call_id", tid);
            }
            if (!hit && json_is_string(tname)) json_object_set(o, "name", tname);
        }
    }
    json_decref(pending);
    return out;
fail:
    json_decref(pending);
    json_decref(out);
    return NULL;
}

/* tools: Ollama's are OpenAI's ({type: "function", function: {name, ...}}). */
static int map_tools(const json_t *tools, json_t *req, api_error *e) {
    if (!is_set(tools)) return 0;
    if (!json_is_array(tools)) { api_fail(e, 400, "tools", "'tools' must be an array"); return -1; }
    if (!json_array_size(tools)) return 0;
    json_t *out = json_array();
    json_object_set_new(req, "tools", out);
    for (size_t i = 0; i < json_array_size(tools); i++) {
        json_t *t = json_array_get(tools, i), *type = json_object_get(t, "type"), *f = json_object_get(t, "function");
        if (!json_is_object(t) || (is_set(type) && !(json_is_string(type) && !strcmp(json_string_value(type), "function")))) {
            api_fail(e, 400, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {...}}", i);
            return -1;
        }
        json_t *name = json_object_get(f, "name");
        if (!json_is_string(name) || !json_string_length(name)) {
            api_fail(e, 400, "tools", "tools[%zu].function.name must be a non-empty string", i);
            return -1;
        }
        json_t *c = json_deep_copy(t);
        json_object_set_new(c, "type", json_string("function"));
        json_array_append_new(out, c);
    }
    return 0;
}

static json_t *chat_request(const json_t *body, const serve_info *si, int *chat, api_error *e) {
    if (!json_is_object(body)) { api_fail(e, 400, NULL, "the body must be a JSON object"); return NULL; }
    json_t *req = json_object();
    *chat = 1;
    if (map_common(body, si, req, 1, e) || map_tools(json_object_get(body, "tools"), req, e)) goto fail;
    /* pocket's extension (Ollama has none): OpenAI's tool_choice, checked by the server */
    json_t *tc = json_object_get(body, "tool_choice");
    if (is_set(tc)) {
        if (!json_is_string(tc) && !json_is_object(tc)) {
            api_fail(e, 400, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                     "{\"type\": \"function\", \"function\": {\"name\": ...}}");
            goto fail;
        }
        json_object_set(req, "tool_choice", tc);
    }
    json_t *msgs = map_messages(json_object_get(body, "messages"), e);
    if (!msgs) goto fail;
    json_object_set_new(req, "messages", msgs);
    return req;
fail:
    json_decref(req);
    return NULL;
}

static json_t *generate_request(const json_t *body, const serve_info *si, int *chat, api_error *e) {
    if (!json_is_object(body)) { api_fail(e, 400, NULL, "the body must be a JSON object"); return NULL; }
    json_t *req = json_object();
    json_t *raw = json_object_get(body, "raw"), *prompt = json_object_get(body, "prompt");
    json_t *sys = json_object_get(body, "system"), *v;
    if (is_set(raw) && !json_is_boolean(raw)) { api_fail(e, 400, "raw", "'raw' must be a boolean"); goto fail; }
    *chat = !json_is_true(raw);
    if (map_common(body, si, req, *chat, e)) goto fail;
    if (is_set(prompt) && !json_is_string(prompt)) { api_fail(e, 400, "prompt", "'prompt' must be a string"); goto fail; }
    if (!json_is_string(prompt) || !json_string_length(prompt)) {
        api_fail(e, 400, "prompt", "'prompt' is empty: pocket serve keeps its one model loaded, there is nothing to "
                 "load; send a prompt");
        goto fail;
    }
    if (is_set(sys) && !json_is_string(sys)) { api_fail(e, 400, "system", "'system' must be a string"); goto fail; }
    v = json_object_get(body, "template");
    if (is_set(v) && !(json_is_string(v) && !json_string_length(v))) {
        api_fail(e, 400, "template", "'template' is not supported: pocket serve formats prompts with the model's own "
                 "chat template; send raw: true with the prompt formatted instead");
        goto fail;
    }
    v = json_object_get(body, "suffix");
    if (is_set(v) && !(json_is_string(v) && !json_string_length(v))) {
        api_fail(e, 400, "suffix", "'suffix' (fill in the middle) is not supported by pocket serve");
        goto fail;
    }
    v = json_object_get(body, "context");
    if (is_set(v) && !(json_is_array(v) && !json_array_size(v))) {
        api_fail(e, 400, "context", "'context' (the token memory of older Ollama versions) is not kept by pocket serve; "
                 "send the conversation to /api/chat");
        goto fail;
    }
    if (refuse_images(json_object_get(body, "images"), "images", e)) goto fail;
    if (!*chat) {
        if (json_is_string(sys) && json_string_length(sys)) {
            api_fail(e, 400, "system", "'system' does not apply to raw: true (the prompt is taken as it is)");
            goto fail;
        }
        v = json_object_get(body, "think");
        if (json_is_string(v) || json_is_true(v)) {
            api_fail(e, 400, "think", "'think' does not apply to raw: true (the prompt is taken as it is)");
            goto fail;
        }
        json_object_del(req, "chat_template_kwargs");
        json_object_set_new(req, "prompt", str_of(prompt));
        return req;
    }
    json_t *msgs = json_array();
    if (json_is_string(sys) && json_string_length(sys))
        json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "system", "content", sys));
    json_array_append_new(msgs, json_pack("{s:s, s:O}", "role", "user", "content", prompt));
    json_object_set_new(req, "messages", msgs);
    return req;
fail:
    json_decref(req);
    return NULL;
}

/* ---- responses --------------------------------------------------------------------- */

/* A call's arguments as Ollama gives them: the object they parse to; text
   that is not a JSON object (a model's mistake) is passed as the string it
   is, never dropped. */
static json_t *args_value(const char *a, size_t n) {
    json_t *v = a && n ? json_loadb(a, n, JSON_DECODE_ANY, NULL) : json_object();
    if (json_is_object(v)) return v;
    json_decref(v);
    return json_stringn(a ? a : "", a ? n : 0);
}

static json_t *ollama_call(const char *id, const char *name, const char *args, size_t alen, int index) {
    json_t *c = json_pack("{s:{s:i, s:s, s:o}}", "function", "index", index, "name", name ? name : "", "arguments",
                          args_value(args, alen));
    if (c && id && *id) json_object_set_new(c, "id", json_string(id));
    return c;
}

/* OpenAI logprobs (chat: {content: [{token, logprob, bytes, top_logprobs}]};
   text completions: {tokens, token_logprobs, top_logprobs: [{token: lp}]})
   -> Ollama's [{token, logprob, bytes?, top_logprobs?}] (NULL: none). */
static json_t *map_logprobs(const json_t *lp) {
    json_t *content = json_object_get(lp, "content"), *out = NULL;
    if (json_is_array(content)) {
        out = json_array();
        for (size_t i = 0; i < json_array_size(content); i++) {
            json_t *t = json_array_get(content, i);
            if (!json_is_object(t)) continue;
            json_t *o = json_object();
            static const char *const keys[] = {"token", "logprob", "bytes", "top_logprobs"};
            for (int k = 0; k < 4; k++)
                if (is_set(json_object_get(t, keys[k]))) json_object_set(o, keys[k], json_object_get(t, keys[k]));
            json_array_append_new(out, o);
        }
        return out;
    }
    json_t *toks = json_object_get(lp, "tokens"), *lps = json_object_get(lp, "token_logprobs");
    json_t *tops = json_object_get(lp, "top_logprobs");
    if (!json_is_array(toks) || !json_is_array(lps)) return NULL;
    out = json_array();
    for (size_t i = 0; i < json_array_size(toks) && i < json_array_size(lps); i++) {
        json_t *o = json_pack("{s:O, s:O}", "token", json_array_get(toks, i), "logprob", json_array_get(lps, i));
        json_t *top = json_array_get(tops, i);
        if (json_is_object(top)) {
            json_t *arr = json_array();
            const char *k;
            json_t *x;
            json_object_foreach(top, k, x) json_array_append_new(arr, json_pack("{s:s, s:O}", "token", k, "logprob", x));
            json_object_set_new(o, "top_logprobs", arr);
        }
        if (o) json_array_append_new(out, o);
    }
    return out;
}

static const char *done_reason(const char *finish) {
    return finish && !strcmp(finish, "length") ? "length" : "stop";     /* tool_calls: "stop", as Ollama */
}

/* The counts and durations of a final object. prompt_ns / eval_ns < 0: not known. */
static void put_metrics(json_t *o, const json_t *usage, const json_t *timings, int64_t total_ns, int64_t prompt_ns,
                        int64_t eval_ns) {
    json_t *pm = json_object_get(timings, "prompt_ms"), *em = json_object_get(timings, "predicted_ms");
    if (json_is_number(pm) && json_is_number(em)) {
        prompt_ns = (int64_t)(json_number_value(pm) * 1e6);
        eval_ns = (int64_t)(json_number_value(em) * 1e6);
        if (total_ns < prompt_ns + eval_ns) total_ns = prompt_ns + eval_ns;
    }
    json_t *pt = json_object_get(usage, "prompt_tokens"), *ct = json_object_get(usage, "completion_tokens");
    json_object_set_new(o, "total_duration", json_integer(total_ns > 0 ? total_ns : 0));
    json_object_set_new(o, "load_duration", json_integer(0));     /* the model is loaded when serve starts */
    json_object_set_new(o, "prompt_eval_count", json_integer(json_is_integer(pt) ? json_integer_value(pt) : 0));
    if (prompt_ns >= 0) json_object_set_new(o, "prompt_eval_duration", json_integer(prompt_ns));
    json_object_set_new(o, "eval_count", json_integer(json_is_integer(ct) ? json_integer_value(ct) : 0));
    if (eval_ns >= 0) json_object_set_new(o, "eval_duration", json_integer(eval_ns));
}

/* One object of the answer: chat {model, created_at, message: {role,
   content}, done}, generate {model, created_at, response, done}. */
static json_t *answer_object(int chat, const json_t *model, int done) {
    char at[40];
    rfc3339_now(at);
    json_t *o = json_pack("{s:O, s:s}", "model", model, "created_at", at);
    if (chat) json_object_set_new(o, "message", json_pack("{s:s, s:s}", "role", "assistant", "content", ""));
    else json_object_set_new(o, "response", json_string(""));
    json_object_set_new(o, "done", json_boolean(done));
    return o;
}

static void set_text(json_t *o, int chat, const char *key, json_t *text) {
    if (chat) json_object_set_new(json_object_get(o, "message"), key, text);
    else json_object_set_new(o, !strcmp(key, "content") ? "response" : key, text);
}

static json_t *response_common(const json_t *body, const json_t *comp, const serve_info *si, int chat) {
    json_t *model = model_of(body, si);
    json_t *o = answer_object(chat, model, 1);
    json_decref(model);
    json_t *choice = json_array_get(json_object_get(comp, "choices"), 0), *msg = json_object_get(choice, "message");
    json_t *content = msg ? json_object_get(msg, "content") : json_object_get(choice, "text");
    json_t *reasoning = json_object_get(msg, "reasoning_content"), *calls = json_object_get(msg, "tool_calls");
    set_text(o, chat, "content", json_is_string(content) ? str_of(content) : json_string(""));
    if (json_is_string(reasoning) && json_string_length(reasoning))
        set_text(o, chat, "thinking", str_of(reasoning));
    if (json_is_array(calls) && json_array_size(calls)) {
        json_t *arr = json_array();
        for (size_t i = 0; i < json_array_size(calls); i++) {
            json_t *c = json_array_get(calls, i), *f = json_object_get(c, "function");
            json_t *a = json_object_get(f, "arguments");
            json_array_append_new(arr, ollama_call(json_string_value(json_object_get(c, "id")),
                                                   json_string_value(json_object_get(f, "name")), json_string_value(a),
                                                   json_is_string(a) ? json_string_length(a) : 0, (int)i));
        }
        if (chat) json_object_set_new(json_object_get(o, "message"), "tool_calls", arr);
        else json_object_set_new(o, "tool_calls", arr);
    }
    json_object_set_new(o, "done_reason", json_string(done_reason(json_string_value(json_object_get(choice, "finish_reason")))));
    /* not streamed: the server's timings, else the whole time alone (from
       the completion's created, in seconds) */
    json_t *created = json_object_get(comp, "created"), *timings = json_object_get(comp, "timings");
    int64_t total = json_is_integer(created) && !json_is_object(timings)
                        ? ((int64_t)time(NULL) - json_integer_value(created)) * 1000000000 : 0;
    put_metrics(o, json_object_get(comp, "usage"), timings, total, -1, -1);
    json_t *lp = map_logprobs(json_object_get(choice, "logprobs"));
    if (lp) json_object_set_new(o, "logprobs", lp);
    return o;
}

static json_t *chat_response(const json_t *body, const json_t *comp, const serve_info *si) {
    return response_common(body, comp, si, 1);
}

static json_t *generate_response(const json_t *body, const json_t *comp, const serve_info *si) {
    return response_common(body, comp, si, 0);
}

/* ---- streams ----------------------------------------------------------------------- */

typedef struct ocall {
    char *id, *name;
    api_buf args;
} ocall;

typedef struct ostream {
    int chat;
    json_t *model;
    int64_t t0, t_first;        /* request, first piece of the answer (0: none yet) */
    const char *finish;         /* done_reason once the choice finished */
    json_t *usage, *timings;
    ocall calls[MAX_CALLS];
    int n_calls;
    int ended;                  /* the last line is out */
} ostream;

static void *stream_new(const json_t *body, const serve_info *si, int chat) {
    ostream *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->chat = chat;
    st->model = model_of(body, si);
    st->t0 = now_ns();
    return st;
}

static void *chat_stream_new(const json_t *body, const serve_info *si) { return stream_new(body, si, 1); }
static void *generate_stream_new(const json_t *body, const serve_info *si) { return stream_new(body, si, 0); }

static void stream_free(void *p) {
    ostream *st = p;
    if (!st) return;
    for (int i = 0; i < st->n_calls; i++) {
        free(st->calls[i].id);
        free(st->calls[i].name);
        free(st->calls[i].args.p);
    }
    json_decref(st->model);
    json_decref(st->usage);
    json_decref(st->timings);
    free(st);
}

/* The calls gathered so far, in one line (Ollama sends a call whole). */
static void flush_calls(ostream *st, api_buf *out) {
    if (!st->n_calls) return;
    json_t *o = answer_object(st->chat, st->model, 0), *arr = json_array();
    for (int i = 0; i < st->n_calls; i++) {
        ocall *c = &st->calls[i];
        if (c->name) json_array_append_new(arr, ollama_call(c->id, c->name, c->args.p, c->args.n, i));
        free(c->id);
        free(c->name);
        free(c->args.p);
        memset(c, 0, sizeof *c);
    }
    st->n_calls = 0;
    if (!json_array_size(arr)) { json_decref(arr); json_decref(o); return; }
    if (st->chat) json_object_set_new(json_object_get(o, "message"), "tool_calls", arr);
    else json_object_set_new(o, "tool_calls", arr);
    api_put_json(out, "", o, "\n");
}

static void gather_calls(ostream *st, const json_t *calls) {
    for (size_t i = 0; i < json_array_size(calls); i++) {
        json_t *d = json_array_get(calls, i), *f = json_object_get(d, "function");
        if (!json_is_object(d)) continue;
        json_t *idx = json_object_get(d, "index");
        long long k = json_is_integer(idx) ? json_integer_value(idx) : st->n_calls ? st->n_calls - 1 : 0;
        if (k < 0 || k >= MAX_CALLS) continue;
        while (st->n_calls <= k) st->n_calls++;
        ocall *c = &st->calls[k];
        json_t *id = json_object_get(d, "id"), *name = json_object_get(f, "name"), *a = json_object_get(f, "arguments");
        if (json_is_string(id) && !c->id) c->id = strdup(json_string_value(id));
        if (json_is_string(name) && !c->name) c->name = strdup(json_string_value(name));
        if (json_is_string(a)) api_put(&c->args, json_string_value(a), json_string_length(a));
        if (!st->t_first) st->t_first = now_ns();
    }
}

static int stream_chunk(void *p, const json_t *chunk, const char *err, api_buf *out) {
    ostream *st = p;
    if (!st) { out->oom = 1; return -1; }
    if (st->ended) return 0;
    if (err) {
        /* what Ollama sends when generation fails after the stream began */
        api_put_json(out, "", json_pack("{s:s}", "error", err), "\n");
        st->ended = 1;
        return out->oom ? -1 : 0;
    }
    if (!chunk) {
        flush_calls(st, out);
        int64_t t = now_ns(), first = st->t_first ? st->t_first : t;
        json_t *o = answer_object(st->chat, st->model, 1);
        json_object_set_new(o, "done_reason", json_string(st->finish ? st->finish : "stop"));
        put_metrics(o, st->usage, st->timings, t - st->t0, first - st->t0, t - first);
        api_put_json(out, "", o, "\n");
        st->ended = 1;
        return out->oom ? -1 : 0;
    }
    json_t *u = json_object_get(chunk, "usage"), *tm = json_object_get(chunk, "timings");
    if (json_is_object(u)) { json_decref(st->usage); st->usage = json_deep_copy(u); }
    if (json_is_object(tm)) { json_decref(st->timings); st->timings = json_deep_copy(tm); }
    json_t *choice = json_array_get(json_object_get(chunk, "choices"), 0);
    if (!json_is_object(choice)) return out->oom ? -1 : 0;
    json_t *delta = json_object_get(choice, "delta");
    json_t *content = delta ? json_object_get(delta, "content") : json_object_get(choice, "text");
    json_t *reasoning = json_object_get(delta, "reasoning_content");
    json_t *lp = map_logprobs(json_object_get(choice, "logprobs"));
    int said = 0;
    if (json_is_string(reasoning) && json_string_length(reasoning)) {
        json_t *o = answer_object(st->chat, st->model, 0);
        set_text(o, st->chat, "thinking", str_of(reasoning));
        api_put_json(out, "", o, "\n");
        said = 1;
    }
    if ((json_is_string(content) && json_string_length(content)) || (lp && json_array_size(lp))) {
        json_t *o = answer_object(st->chat, st->model, 0);
        if (json_is_string(content)) set_text(o, st->chat, "content", str_of(content));
        if (lp) { json_object_set_new(o, "logprobs", lp); lp = NULL; }
        api_put_json(out, "", o, "\n");
        said = 1;
    }
    json_decref(lp);
    if (said && !st->t_first) st->t_first = now_ns();
    gather_calls(st, json_object_get(delta, "tool_calls"));
    json_t *fr = json_object_get(choice, "finish_reason");
    if (json_is_string(fr)) {
        st->finish = done_reason(json_string_value(fr));
        flush_calls(st, out);
    }
    return out->oom ? -1 : 0;
}

/* A line with nothing in it yet (an empty piece of the answer, which Ollama's
   clients add to the text as they do any other): NDJSON has no comment line,
   and a long prompt would leave the body silent past the clients' timeouts. */
static void keepalive(void *p, api_buf *out) {
    ostream *st = p;
    if (!st || st->ended) return;
    api_put_json(out, "", answer_object(st->chat, st->model, 0), "\n");
}

static json_t *ollama_error(const api_error *e) { return json_pack("{s:s}", "error", e->msg); }

const serve_api serve_api_ollama_chat = {
    .name = "ollama",
    .stream_type = "application/x-ndjson",
    .request = chat_request,
    .response = chat_response,
    .stream_new = chat_stream_new,
    .stream_chunk = stream_chunk,
    .stream_free = stream_free,
    .error = ollama_error,
    .keepalive = keepalive,
};

const serve_api serve_api_ollama_generate = {
    .name = "ollama",
    .stream_type = "application/x-ndjson",
    .request = generate_request,
    .response = generate_response,
    .stream_new = generate_stream_new,
    .stream_chunk = stream_chunk,
    .stream_free = stream_free,
    .error = ollama_error,
    .keepalive = keepalive,
};

/* ---- the model endpoints ----------------------------------------------------------- */

/* "35.1B", "730M", "12K": as Ollama prints parameter counts. */
static void human_count(uint64_t n, char *buf, size_t len) {
    if (n >= 1000000000ull) snprintf(buf, len, "%.1fB", n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, len, "%.0fM", n / 1e6);
    else if (n >= 1000ull) snprintf(buf, len, "%.0fK", n / 1e3);
    else snprintf(buf, len, "%llu", (unsigned long long)n);
}

/* 64 hex digits naming the file as served (id, name, size, parameters,
   type): Ollama's digest is the file's SHA-256; this is an identity, not
   a checksum of the contents. */
static void digest(const serve_info *si, char out[65]) {
    char buf[80];
    const char *parts[5] = {si->model_id, si->file, si->arch, si->quant, buf};
    snprintf(buf, sizeof buf, "%llu/%llu", (unsigned long long)si->file_size, (unsigned long long)si->n_params);
    for (int lane = 0; lane < 4; lane++) {
        uint64_t h = 14695981039346656037ull ^ (uint64_t)(lane + 1) * 0x9E3779B97F4A7C15ull;
        for (int k = 0; k < 5; k++) {
            for (const char *s = parts[k] ? parts[k] : ""; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
            h = (h ^ 0xff) * 1099511628211ull;
        }
        h ^= h >> 31; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 29;     /* spread the last bytes */
        snprintf(out + lane * 16, 17, "%016llx", (unsigned long long)h);
    }
}

static json_t *details(const serve_info *si) {
    char ps[32];
    human_count(si->n_params, ps, sizeof ps);
    const char *arch = si->arch ? si->arch : "";
    return json_pack("{s:s, s:s, s:s, s:[s], s:s, s:s}", "parent_model", "", "format", "gguf", "family", arch,
                     "families", arch, "parameter_size", ps, "quantization_level", si->quant ? si->quant : "");
}

/* The entry of the one model, as /api/tags and /api/ps list it. */
static json_t *model_entry(const serve_info *si) {
    char name[300], dg[65], at[40];
    ollama_model_name(si, name, sizeof name);
    digest(si, dg);
    rfc3339(at, (time_t)si->created, 0);
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:o}", "name", name, "model", name, "modified_at", at, "size",
                     (json_int_t)si->file_size, "digest", dg, "details", details(si));
}

json_t *ollama_tags(const serve_info *si) { return json_pack("{s:[o]}", "models", model_entry(si)); }

json_t *ollama_ps(const serve_info *si) {
    json_t *m = model_entry(si);
    json_object_del(m, "modified_at");
    /* loaded until the server stops: no expiry (Ollama's far future) */
    json_object_set_new(m, "expires_at", json_string("9999-12-31T23:59:59Z"));
    json_object_set_new(m, "size_vram", json_integer(0));
    json_object_set_new(m, "context_length", json_integer(si->n_ctx));
    return json_pack("{s:[o]}", "models", m);
}

json_t *ollama_version(const serve_info *si) { return json_pack("{s:s}", "version", si->version ? si->version : ""); }

/* What the template can do, from the words it uses. */
static json_t *capabilities(const serve_info *si) {
    json_t *caps = json_pack("[s]", "completion");
    const char *t = si->chat_template;
    if (!t) return caps;
    if (strstr(t, "tools") || strstr(t, "tool_calls")) json_array_append_new(caps, json_string("tools"));
    static const char *const thinking[] = {"<think>", "enable_thinking", "reasoning_content", "<|channel|>",
                                           "<|channel>thought"};
    for (size_t i = 0; i < sizeof thinking / sizeof thinking[0]; i++)
        if (strstr(t, thinking[i])) { json_array_append_new(caps, json_string("thinking")); break; }
    return caps;
}

json_t *ollama_show(const json_t *body, const serve_info *si, api_error *e) {
    if (!json_is_object(body)) { api_fail(e, 400, NULL, "the body must be a JSON object"); return NULL; }
    json_t *m = json_object_get(body, "model");
    if (!is_set(m)) m = json_object_get(body, "name");      /* the older field */
    if (!json_is_string(m) || !json_string_length(m)) {
        api_fail(e, 400, "model", "'model' is required (a string; this server serves one model, any name is taken)");
        return NULL;
    }
    json_t *vb = json_object_get(body, "verbose");
    if (is_set(vb) && !json_is_boolean(vb)) { api_fail(e, 400, "verbose", "'verbose' must be a boolean"); return NULL; }
    const char *arch = si->arch ? si->arch : "", *file = si->file ? si->file : "";
    const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
    char params[64], modelfile[600], key[160], at[40];
    snprintf(params, sizeof params, "num_ctx                        %d", si->n_ctx);
    snprintf(modelfile, sizeof modelfile, "# Modelfile of the model pocket serve serves\nFROM %.400s\nPARAMETER num_ctx %d\n",
             base, si->n_ctx);
    rfc3339(at, (time_t)si->created, 0);
    json_t *info = json_pack("{s:s, s:I}", "general.architecture", arch, "general.parameter_count", (json_int_t)si->n_params);
    snprintf(key, sizeof key, "%.100s.context_length", arch);
    json_object_set_new(info, key, json_integer(si->n_ctx_train));
    snprintf(key, sizeof key, "%.100s.vocab_size", arch);
    json_object_set_new(info, key, json_integer(si->n_vocab));
    return json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s}", "modelfile", modelfile, "parameters", params, "template",
                     si->chat_template ? si->chat_template : "", "details", details(si), "model_info", info,
                     "capabilities", capabilities(si), "modified_at", at);
}
