/* fuzz_api_ollama.c - libFuzzer harness: Ollama's API translation
 * (tools/serve_ollama.c) on any JSON.
 *
 * Input: JSON text (any value). It goes, as a request body, through
 * /api/chat's and /api/generate's request translations and /api/show: each
 * must give an object, or refuse with a 4xx/500 status and a message (never
 * both, never neither); a chat request has non-empty messages, a text one a
 * prompt, both a boolean stream, and every request serialises. As an OpenAI
 * completion it goes through both response translations: an object, done.
 * As a chunk sequence (an array; a string element is a failure with that
 * message) it goes through both stream translations, then the end: every
 * line is one JSON object and the stream ends with exactly one line that is
 * done or an error, nothing after it. Anything else aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_ollama.h"

#define FAIL(...) do { fprintf(stderr, "fuzz_api_ollama: "); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

static const serve_info SI = {
    .model_id = "fuzz-model",
    .arch = "qwen35moe",
    .file = "/m/fuzz-model.gguf",
    .file_size = 1000,
    .n_params = 2000000,
    .quant = "Q8_0",
    .n_ctx = 512,
    .n_ctx_train = 4096,
    .n_vocab = 256,
    .chat_template = "{{ tools }}<think>",
    .created = 1,
    .version = "0.0.0",
};

static void check_refusal(json_t *r, const api_error *e, const char *what) {
    if (r && e->status) FAIL("%s: an answer and a refusal (%d %s)", what, e->status, e->msg);
    if (!r && !((e->status >= 400 && e->status < 500) || e->status == 500)) FAIL("%s: no answer, status %d", what, e->status);
    if (!r && !e->msg[0]) FAIL("%s: a refusal without a message", what);
}

static void requests(const json_t *v) {
    const serve_api *apis[2] = {&serve_api_ollama_chat, &serve_api_ollama_generate};
    for (int i = 0; i < 2; i++) {
        api_error e = {0};
        int chat = -1;
        json_t *r = apis[i]->request(v, &SI, &chat, &e);
        check_refusal(r, &e, i ? "generate" : "chat");
        if (r) {
            if (!json_is_object(r) || !json_is_boolean(json_object_get(r, "stream"))) FAIL("a request without stream");
            if (chat == 1 && (!json_is_array(json_object_get(r, "messages")) ||
                              !json_array_size(json_object_get(r, "messages"))))
                FAIL("a chat request without messages");
            if (chat == 0 && !json_is_string(json_object_get(r, "prompt"))) FAIL("a text request without a prompt");
            if (chat != 0 && chat != 1) FAIL("chat not set");
            char *s = json_dumps(r, JSON_COMPACT);
            if (!s) FAIL("a request that does not serialise");
            free(s);
        } else {
            json_t *err = apis[i]->error(&e);
            if (!json_is_string(json_object_get(err, "error"))) FAIL("an error object without its message");
            json_decref(err);
        }
        json_decref(r);
    }
    api_error e = {0};
    json_t *s = ollama_show(v, &SI, &e);
    check_refusal(s, &e, "show");
    json_decref(s);
}

static void responses(const json_t *v) {
    const serve_api *apis[2] = {&serve_api_ollama_chat, &serve_api_ollama_generate};
    for (int i = 0; i < 2; i++) {
        json_t *r = apis[i]->response(v, v, &SI);
        if (!json_is_object(r) || !json_is_true(json_object_get(r, "done"))) FAIL("a response that is not done");
        char *s = json_dumps(r, JSON_COMPACT);
        if (!s) FAIL("a response that does not serialise");
        free(s);
        json_decref(r);
    }
}

static void streams(const json_t *v) {
    if (!json_is_array(v)) return;
    const serve_api *apis[2] = {&serve_api_ollama_chat, &serve_api_ollama_generate};
    for (int i = 0; i < 2; i++) {
        void *st = apis[i]->stream_new(v, &SI);
        api_buf out = {0};
        for (size_t k = 0; k < json_array_size(v); k++) {
            json_t *c = json_array_get(v, k);
            if (json_is_string(c)) apis[i]->stream_chunk(st, NULL, json_string_value(c), &out);
            else apis[i]->stream_chunk(st, c, NULL, &out);
        }
        apis[i]->stream_chunk(st, NULL, NULL, &out);
        apis[i]->stream_free(st);
        if (out.oom) FAIL("out of memory");
        int ended = 0;
        for (char *p = out.p, *nl; p && *p; p = nl + 1) {
            if (ended) FAIL("a line after the end: %s", p);
            if (!(nl = strchr(p, '\n'))) FAIL("a line without its newline");
            json_error_t je;
            json_t *l = json_loadb(p, (size_t)(nl - p), 0, &je);
            if (!json_is_object(l)) FAIL("a line that is not an object: %.*s", (int)(nl - p), p);
            if (json_is_true(json_object_get(l, "done")) || json_object_get(l, "error")) ended = 1;
            else if (!json_is_false(json_object_get(l, "done"))) FAIL("a line without done");
            json_decref(l);
        }
        if (!ended) FAIL("a stream that does not end");
        free(out.p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!v) return 0;
    requests(v);
    responses(v);
    streams(v);
    json_decref(v);
    return 0;
}
