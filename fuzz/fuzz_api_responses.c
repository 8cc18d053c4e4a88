/* fuzz_api_responses.c - libFuzzer harness: the Responses API translator
 * (tools/serve_responses.c) on random requests and random chunk streams.
 *
 * Input: byte 0 picks how the stream ends (bit 0: generation fails) and
 * whether each chunk is also taken for a whole chat.completion (bit 1); the
 * rest is lines: the first the request body, each other line one OpenAI
 * chunk (lines that are not JSON are skipped). Checks: a request is either
 * translated into a chat request with messages, or refused with a 4xx/5xx,
 * a one-line message and a param that fits, as an OpenAI error object that
 * serialises and parses back; the stream (for any body) is server-sent
 * events "event: T" + "data: JSON" whose type is T, numbered from 0, that
 * start with response.created and end with exactly one of response.
 * completed / incomplete / failed, items added at consecutive output
 * indexes, every item_id the id of the item at its output_index, nothing
 * after the end; a response object for any completion serialises with an
 * output array. Anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_api.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_api_responses: "); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

static const serve_info SI = {.model_id = "fuzz", .created = 1, .n_ctx = 32};

static void check_serialises(const json_t *v, const char *what) {
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    if (!s) FAIL("%s: no JSON", what);
    json_error_t je;
    json_t *back = json_loads(s, JSON_REJECT_DUPLICATES, &je);
    if (!back) FAIL("%s: invalid JSON %s: %s", what, je.text, s);
    json_decref(back);
    free(s);
}

static void check_request(const json_t *body) {
    api_error e = {0};
    int chat = -1;
    json_t *r = serve_api_responses.request(body, &SI, &chat, &e);
    if (r) {
        if (chat != 1 || !json_is_object(r) || !json_array_size(json_object_get(r, "messages")))
            FAIL("an accepted request without messages");
        check_serialises(r, "the chat request");
        json_decref(r);
        return;
    }
    if (e.status < 400 || e.status > 599 || !e.msg[0] || strchr(e.msg, '\n') || strlen(e.param) >= sizeof e.param)
        FAIL("a refusal with status %d, param [%s], message [%s]", e.status, e.param, e.msg);
    json_t *err = serve_api_responses.error(&e);
    const json_t *o = json_object_get(err, "error");
    if (!json_string_length(json_object_get(o, "message")) || !json_is_string(json_object_get(o, "type")))
        FAIL("an error object without message or type");
    check_serialises(err, "the error object");
    json_decref(err);
}

/* The stream's bytes must be well-formed events (above). */
static void check_stream(const char *p, size_t n) {
    long seq = 0;
    int ended = 0;
    size_t n_items = 0, cap = 0;
    char **ids = NULL;
    const char *end_of = p + n;
    while (p < end_of) {
        const char *blank = strstr(p, "\n\n");
        if (!blank) FAIL("an event without its blank line");
        if (ended) FAIL("events after the end");
        const char *nl = memchr(p, '\n', (size_t)(blank - p));
        if (strncmp(p, "event: ", 7) || !nl || strncmp(nl + 1, "data: ", 6)) FAIL("not event + data");
        json_error_t je;
        json_t *ev = json_loadb(nl + 7, (size_t)(blank - nl - 7), JSON_REJECT_DUPLICATES, &je);
        if (!ev) FAIL("data is not JSON: %s", je.text);
        const char *type = json_string_value(json_object_get(ev, "type"));
        if (!type || strlen(type) != (size_t)(nl - p - 7) || strncmp(type, p + 7, strlen(type)))
            FAIL("event name and type differ");
        if (json_integer_value(json_object_get(ev, "sequence_number")) != seq) FAIL("sequence_number");
        if ((seq == 0) != !strcmp(type, "response.created")) FAIL("response.created is not first");
        seq++;
        const json_t *oi = json_object_get(ev, "output_index");
        if (!strcmp(type, "response.output_item.added")) {
            const char *id = json_string_value(json_object_get(json_object_get(ev, "item"), "id"));
            if (json_integer_value(oi) != (json_int_t)n_items || !id) FAIL("item added at %lld", (long long)json_integer_value(oi));
            if (n_items == cap) {
                cap = cap ? 2 * cap : 8;
                char **q = realloc(ids, cap * sizeof *q);
                if (!q) FAIL("out of memory");
                ids = q;
            }
            ids[n_items++] = strdup(id);
        } else if (oi) {
            json_int_t k = json_integer_value(oi);
            const char *id = json_string_value(json_object_get(ev, "item_id"));
            if (!id) id = json_string_value(json_object_get(json_object_get(ev, "item"), "id"));
            if (k < 0 || (size_t)k >= n_items || !id || strcmp(id, ids[k])) FAIL("%s: item id or index", type);
        }
        ended = !strcmp(type, "response.completed") || !strcmp(type, "response.incomplete") ||
                !strcmp(type, "response.failed");
        if (ended && json_array_size(json_object_get(json_object_get(ev, "response"), "output")) != n_items)
            FAIL("the final response has not all the items");
        json_decref(ev);
        p = blank + 2;
    }
    if (!ended) FAIL("no final event");
    for (size_t i = 0; i < n_items; i++) free(ids[i]);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int fails = data[0] & 1, as_completion = data[0] & 2;
    const char *text = (const char *)data + 1, *end = text + size - 1;
    const char *nl = memchr(text, '\n', (size_t)(end - text));
    const char *line_end = nl ? nl : end;
    json_error_t je;
    json_t *body = json_loadb(text, (size_t)(line_end - text), JSON_DECODE_ANY, &je);
    if (body) check_request(body);

    void *st = serve_api_responses.stream_new(body, &SI);
    if (!st) FAIL("stream_new");
    api_buf out = {0};
    for (const char *p = nl ? nl + 1 : end; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (!e) e = end;
        json_t *chunk = json_loadb(p, (size_t)(e - p), JSON_DECODE_ANY, &je);
        if (chunk) {
            if (serve_api_responses.stream_chunk(st, chunk, NULL, &out)) FAIL("stream_chunk failed");
            if (as_completion) {
                json_t *r = serve_api_responses.response(body, chunk, &SI);
                if (!json_is_array(json_object_get(r, "output"))) FAIL("a response without output");
                check_serialises(r, "the response");
                json_decref(r);
            }
            json_decref(chunk);
        }
        p = e + 1;
    }
    if (serve_api_responses.stream_chunk(st, NULL, fails ? "generation failed: fuzz" : NULL, &out)) FAIL("the end failed");
    if (out.oom) FAIL("out of memory");
    check_stream(out.p ? out.p : "", out.n);
    serve_api_responses.stream_free(st);
    free(out.p);
    json_decref(body);
    return 0;
}
