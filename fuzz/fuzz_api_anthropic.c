/* fuzz_api_anthropic.c - libFuzzer harness: the Anthropic Messages
 * translator (tools/serve_anthropic.c) on request bodies and on streams of
 * OpenAI chunks the input makes.
 *
 * Input: byte 0: bit 0 "raw" mode, the other bits max_tokens; then a
 * request body up to the first 0xFF byte; then stream operations, each a
 * byte (op % 8) and its arguments (a length byte and that many bytes for a
 * string): 0 content, 1 reasoning, 2 a tool call starts (name), 3 a piece
 * of its arguments, 4 finish_reason (and maybe a stop_sequence), 5 usage,
 * 6 a chunk of arbitrary JSON (raw mode; else a piece of text), 7 a failure.
 *
 * The body goes through the Messages and count_tokens translations: a
 * request with messages (roles the server knows, content a string, parts
 * or null) whose JSON dumps and reloads, or a 4xx/5xx refusal with a
 * message whose error object dumps. The stream's bytes must be events
 * ("event: NAME\ndata: JSON\n\n", data.type == NAME) in Anthropic's order:
 * one message_start first, blocks started with the next index, deltas of
 * the open block's kind, stopped before the next, a tool_use's partial_json
 * together a JSON object, then message_delta and message_stop, or an error
 * last and alone. Outside raw mode the stream is also compared with the
 * non-streamed response to the same generation (the chat.completion the ops
 * add up to): the same text, thinking, tool calls (id, name, input) and
 * stop_reason. Anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_anthropic.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_api_anthropic: "); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

static const serve_info SI = {.model_id = "m"};

/* ---- requests ------------------------------------------------------------------------- */

static void check_refusal(const api_error *e) {
    if (e->status < 400 || e->status > 599 || !e->msg[0]) FAIL("refusal with status %d, message '%s'", e->status, e->msg);
    json_t *eo = serve_api_anthropic.error(e);
    char *s = eo ? json_dumps(eo, JSON_COMPACT) : NULL;
    if (!s) FAIL("the error object of '%s' does not serialise", e->msg);
    free(s);
    json_decref(eo);
}

static void check_request(json_t *r, const api_error *e) {
    if (!r) { check_refusal(e); return; }
    json_t *msgs = json_object_get(r, "messages");
    if (!json_is_array(msgs) || !json_array_size(msgs)) FAIL("a request without messages");
    for (size_t i = 0; i < json_array_size(msgs); i++) {
        json_t *m = json_array_get(msgs, i), *c = json_object_get(m, "content");
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role || (strcmp(role, "system") && strcmp(role, "user") && strcmp(role, "assistant") && strcmp(role, "tool")))
            FAIL("message %zu: role %s", i, role ? role : "(none)");
        if (!json_is_string(c) && !json_is_array(c) && !(json_is_null(c) && !strcmp(role, "assistant")))
            FAIL("message %zu: content of type %d", i, c ? (int)json_typeof(c) : -1);
    }
    char *s = json_dumps(r, JSON_COMPACT);
    json_t *back = s ? json_loads(s, 0, NULL) : NULL;
    if (!back || !json_equal(back, r)) FAIL("the request does not dump and reload");
    json_decref(back);
    free(s);
    json_decref(r);
}

/* ---- the stream's events -------------------------------------------------------------- */

/* What the events add up to, checked as they are read. */
typedef struct seen {
    api_buf text, thinking;
    json_t *calls;              /* [{id, name, input}] */
    const char *stop_reason;    /* borrowed from last */
    json_t *last;
    int error;
} seen;

static void read_events(const char *p, size_t n, seen *sn) {
    enum { NONE, TEXT, THINKING, TOOL } kind = NONE;
    int started = 0, blocks = 0, open = -1, delta_seen = 0, stopped = 0;
    api_buf json = {0};
    const char *end = p + n;
    while (p < end) {
        const char *e = memmem(p, (size_t)(end - p), "\n\n", 2), *nl = memchr(p, '\n', (size_t)(end - p));
        if (!e || !nl || strncmp(p, "event: ", 7) || nl >= e || strncmp(nl, "\ndata: ", 7)) FAIL("not an event: %.60s", p);
        if (sn->error || stopped) FAIL("an event after %s", sn->error ? "an error" : "message_stop");
        size_t nl_len = (size_t)(nl - p - 7);
        json_t *d = json_loadb(nl + 7, (size_t)(e - nl - 7), JSON_ALLOW_NUL, NULL);
        const char *type = json_string_value(json_object_get(d, "type"));
        if (!type || strlen(type) != nl_len || strncmp(type, p + 7, nl_len)) FAIL("event %.*s with data %.60s", (int)nl_len, p + 7, nl + 7);
        json_t *ix = json_object_get(d, "index");
        if (!strcmp(type, "error")) {
            if (!json_string_value(json_object_get(json_object_get(d, "error"), "message"))) FAIL("an error without a message");
            sn->error = 1;
        } else if (!started) {
            if (strcmp(type, "message_start")) FAIL("%s before message_start", type);
            started = 1;
        } else if (!strcmp(type, "message_start")) {
            FAIL("a second message_start");
        } else if (!strcmp(type, "content_block_start")) {
            json_t *cb = json_object_get(d, "content_block");
            const char *t = json_string_value(json_object_get(cb, "type"));
            if (open >= 0 || delta_seen || json_integer_value(ix) != blocks || !json_is_integer(ix) || !t)
                FAIL("content_block_start %lld (open %d, %d blocks)", (long long)json_integer_value(ix), open, blocks);
            open = blocks++;
            kind = !strcmp(t, "text") ? TEXT : !strcmp(t, "thinking") ? THINKING : !strcmp(t, "tool_use") ? TOOL : NONE;
            if (kind == NONE) FAIL("a block of type %s", t);
            if (kind == TOOL) {
                json_array_append_new(sn->calls, json_pack("{s:O, s:O}", "id", json_object_get(cb, "id"), "name",
                                                           json_object_get(cb, "name")));
                json.n = 0;
            }
        } else if (!strcmp(type, "content_block_delta")) {
            json_t *dl = json_object_get(d, "delta");
            const char *t = json_string_value(json_object_get(dl, "type"));
            if (open < 0 || json_integer_value(ix) != open || !t) FAIL("a delta outside its block");
            json_t *v = json_object_get(dl, !strcmp(t, "text_delta") ? "text" : !strcmp(t, "thinking_delta") ? "thinking"
                                            : !strcmp(t, "input_json_delta") ? "partial_json" : "signature");
            if (!json_is_string(v)) FAIL("a %s without its string", t);
            api_buf *to = NULL;
            if (kind == TEXT && !strcmp(t, "text_delta")) to = &sn->text;
            else if (kind == THINKING && !strcmp(t, "thinking_delta")) to = &sn->thinking;
            else if (kind == TOOL && !strcmp(t, "input_json_delta")) to = &json;
            else if (!(kind == THINKING && !strcmp(t, "signature_delta"))) FAIL("a %s in a block of kind %d", t, kind);
            if (to) api_put(to, json_string_value(v), json_string_length(v));
        } else if (!strcmp(type, "content_block_stop")) {
            if (open < 0 || json_integer_value(ix) != open) FAIL("content_block_stop of a block not open");
            if (kind == TOOL) {
                json_t *input = json.n ? json_loadb(json.p, json.n, JSON_ALLOW_NUL, NULL) : json_object();
                if (!json_is_object(input)) FAIL("a tool_use's partial_json is not an object: %.*s", (int)json.n, json.p);
                json_object_set_new(json_array_get(sn->calls, json_array_size(sn->calls) - 1), "input", input);
            }
            open = -1;
            kind = NONE;
        } else if (!strcmp(type, "message_delta")) {
            if (open >= 0 || delta_seen) FAIL("message_delta with a block open or twice");
            delta_seen = 1;
            json_decref(sn->last);
            sn->last = json_incref(d);
            sn->stop_reason = json_string_value(json_object_get(json_object_get(d, "delta"), "stop_reason"));
            if (!sn->stop_reason || !json_is_integer(json_object_get(json_object_get(d, "usage"), "output_tokens")))
                FAIL("message_delta without stop_reason or usage");
        } else if (!strcmp(type, "message_stop")) {
            if (!delta_seen) FAIL("message_stop before message_delta");
            stopped = 1;
        } else {
            FAIL("an event %s", type);
        }
        json_decref(d);
        p = e + 2;
    }
    if (!sn->error && !stopped) FAIL("the stream ends without message_stop or an error");
    free(json.p);
}

/* ---- the stream the input makes -------------------------------------------------------- */

typedef struct gen {
    const uint8_t *p, *end;
    api_buf text, thinking;
    json_t *calls;              /* the completion's tool_calls */
    const char *finish;
    json_t *stop_sequence, *usage;
    int tool_open, failed;
} gen;

static int byte(gen *g) { return g->p < g->end ? *g->p++ : 0; }

/* a string of the input (a length byte, then bytes); NULL if not UTF-8 */
static json_t *string(gen *g) {
    size_t n = (size_t)byte(g);
    if (n > (size_t)(g->end - g->p)) n = (size_t)(g->end - g->p);
    json_t *s = json_stringn((const char *)g->p, n);
    g->p += n;
    return s;
}

static json_t *chunk(json_t *choices) {
    return json_pack("{s:s, s:s, s:i, s:s, s:o}", "id", "chatcmpl-f", "object", "chat.completion.chunk", "created", 1,
                     "model", "m", "choices", choices);
}

static json_t *delta_chunk(json_t *delta, const char *finish) {
    return chunk(json_pack("[{s:i, s:o, s:s?}]", "index", 0, "delta", delta, "finish_reason", finish));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int raw = data[0] & 1, max_tokens = data[0] >> 1;
    const uint8_t *sep = memchr(data + 1, 0xFF, size - 1);
    size_t blen = sep ? (size_t)(sep - data - 1) : size - 1;

    json_t *body = json_loadb((const char *)data + 1, blen, JSON_DECODE_ANY, NULL);
    if (body) {
        api_error e = {0};
        int chat = 0;
        check_request(serve_api_anthropic.request(body, &SI, &chat, &e), &e);
        memset(&e, 0, sizeof e);
        check_request(anthropic_count_request(body, &SI, &e), &e);
        json_decref(body);
    }
    if (!sep) return 0;

    body = json_pack("{s:s, s:i}", "model", "m", "max_tokens", max_tokens);
    gen g = {.p = sep + 1, .end = data + size, .calls = json_array()};
    void *st = serve_api_anthropic.stream_new(body, &SI);
    api_buf out = {0};
    json_t *c0 = delta_chunk(json_pack("{s:s, s:s}", "role", "assistant", "content", ""), NULL);
    serve_api_anthropic.stream_chunk(st, c0, NULL, &out);
    json_decref(c0);
    while (g.p < g.end && !g.failed) {
        int op = byte(&g) % 8;
        json_t *c = NULL;
        if (op == 6 && raw) {
            json_t *s = string(&g);
            c = s ? json_loads(json_string_value(s), JSON_DECODE_ANY, NULL) : NULL;
            json_decref(s);
            if (c) serve_api_anthropic.stream_chunk(st, c, NULL, &out);
            json_decref(c);
            continue;
        }
        if (op == 0 || op == 1 || op == 6) {
            json_t *s = string(&g);
            if (!s) continue;
            if (json_string_length(s)) {
                api_put(op == 1 ? &g.thinking : &g.text, json_string_value(s), json_string_length(s));
                g.tool_open = 0;
            }
            c = delta_chunk(json_pack("{s:o}", op == 1 ? "reasoning_content" : "content", s), NULL);
        } else if (op == 2) {
            json_t *name = string(&g);
            if (!name) continue;
            char id[32];
            snprintf(id, sizeof id, "call_%zu", json_array_size(g.calls));
            int index = (int)json_array_size(g.calls);
            if (raw) index = byte(&g) % 3;
            json_array_append_new(g.calls, json_pack("{s:s, s:s, s:{s:O, s:s}}", "id", id, "type", "function", "function",
                                                     "name", name, "arguments", ""));
            c = delta_chunk(json_pack("{s:[{s:i, s:s, s:s, s:{s:o, s:s}}]}", "tool_calls", "index", index, "id", id,
                                      "type", "function", "function", "name", name, "arguments", ""), NULL);
            g.tool_open = 1;
        } else if (op == 3) {
            json_t *a = string(&g);
            if (!a) continue;
            if (!g.tool_open && !raw) { json_decref(a); continue; }
            json_t *call = json_object_get(json_array_get(g.calls, json_array_size(g.calls) - 1), "function");
            if (call) {
                api_buf t = {0};
                json_t *was = json_object_get(call, "arguments");
                api_put(&t, json_string_value(was), json_string_length(was));
                api_put(&t, json_string_value(a), json_string_length(a));
                json_object_set_new(call, "arguments", json_stringn(t.p ? t.p : "", t.n));
                free(t.p);
            }
            c = delta_chunk(json_pack("{s:[{s:i, s:{s:o}}]}", "tool_calls", "index",
                                      (int)json_array_size(g.calls) - 1, "function", "arguments", a), NULL);
        } else if (op == 4) {
            static const char *const reasons[] = {"stop", "length", "tool_calls", "content_filter"};
            g.finish = reasons[byte(&g) % 4];
            json_decref(g.stop_sequence);
            g.stop_sequence = byte(&g) & 1 ? string(&g) : NULL;
            g.tool_open = 0;
            c = chunk(json_pack("[{s:i, s:{}, s:s, s:O*}]", "index", 0, "delta", "finish_reason", g.finish,
                                "stop_sequence", g.stop_sequence));
        } else if (op == 5) {
            int p = byte(&g), k = byte(&g), cached = byte(&g);
            json_decref(g.usage);
            g.usage = json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", p, "completion_tokens", k, "total_tokens",
                                p + k, "prompt_tokens_details", "cached_tokens", cached);
            c = json_pack("{s:s, s:s, s:[], s:O}", "id", "chatcmpl-f", "object", "chat.completion.chunk", "choices",
                          "usage", g.usage);
        } else {
            json_t *s = string(&g);
            serve_api_anthropic.stream_chunk(st, NULL, s ? json_string_value(s) : "failed", &out);
            json_decref(s);
            g.failed = 1;
        }
        if (c && serve_api_anthropic.stream_chunk(st, c, NULL, &out)) FAIL("stream_chunk failed");
        json_decref(c);
    }
    if (!g.failed && serve_api_anthropic.stream_chunk(st, NULL, NULL, &out)) FAIL("the end failed");
    serve_api_anthropic.stream_free(st);
    if (out.oom) FAIL("out of memory");

    seen sn = {.calls = json_array()};
    read_events(out.p, out.n, &sn);

    /* the same generation, not streamed */
    if (!raw && !g.failed) {
        json_t *msg = json_pack("{s:s, s:s%, s:s%}", "role", "assistant", "content", g.text.p ? g.text.p : "", g.text.n,
                                "reasoning_content", g.thinking.p ? g.thinking.p : "", g.thinking.n);
        if (json_array_size(g.calls)) json_object_set(msg, "tool_calls", g.calls);
        json_t *cmpl = json_pack("{s:s, s:s, s:[{s:i, s:o, s:s?, s:O?}], s:O?}", "id", "chatcmpl-f", "model", "m",
                                 "choices", "index", 0, "message", msg, "finish_reason", g.finish, "stop_sequence",
                                 g.stop_sequence, "usage", g.usage);
        json_t *r = serve_api_anthropic.response(body, cmpl, &SI), *content = json_object_get(r, "content");
        if (!r) FAIL("no response");
        size_t k = 0, calls = 0;
        for (; k < json_array_size(content); k++) {
            json_t *b = json_array_get(content, k);
            const char *t = json_string_value(json_object_get(b, "type"));
            json_t *v = json_object_get(b, !strcmp(t, "text") ? "text" : "thinking");
            const api_buf *want = !strcmp(t, "text") ? &sn.text : &sn.thinking;
            if (!strcmp(t, "tool_use")) {
                json_t *sc = json_array_get(sn.calls, calls++);
                if (!json_equal(json_object_get(sc, "id"), json_object_get(b, "id")) ||
                    !json_equal(json_object_get(sc, "name"), json_object_get(b, "name")) ||
                    !json_equal(json_object_get(sc, "input"), json_object_get(b, "input")))
                    FAIL("tool call %zu differs streamed", calls - 1);
            } else if (json_string_length(v) != want->n || memcmp(json_string_value(v), want->p, want->n)) {
                FAIL("the %s differs streamed", t);
            }
        }
        if (calls != json_array_size(sn.calls) || (!g.text.n) != (!sn.text.n) || (!g.thinking.n) != (!sn.thinking.n))
            FAIL("%zu calls, %zu streamed; text %zu / %zu; thinking %zu / %zu", calls, json_array_size(sn.calls), g.text.n,
                 sn.text.n, g.thinking.n, sn.thinking.n);
        if (strcmp(json_string_value(json_object_get(r, "stop_reason")), sn.stop_reason) ||
            !json_equal(json_object_get(r, "usage"), json_object_get(sn.last, "usage")))
            FAIL("stop_reason %s, streamed %s, or the usage differs", json_string_value(json_object_get(r, "stop_reason")),
                 sn.stop_reason);
        json_decref(r);
        json_decref(cmpl);
    }
    json_decref(sn.calls);
    json_decref(sn.last);
    free(sn.text.p);
    free(sn.thinking.p);
    free(out.p);
    free(g.text.p);
    free(g.thinking.p);
    json_decref(g.calls);
    json_decref(g.stop_sequence);
    json_decref(g.usage);
    json_decref(body);
    return 0;
}
