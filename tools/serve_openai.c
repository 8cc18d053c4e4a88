/* tools/serve_openai.c - OpenAI's own API, served by the request path it
 * is (tools/serve_api.h): chat and text completions are taken as they come
 * and answered with the objects the server builds; a stream is server-sent
 * events, "data: {chunk}\n\n" each, the usage chunk only when the request
 * asks for it (stream_options.include_usage), "data: [DONE]\n\n" at the end;
 * a failure mid-stream is one "data: {"error": ...}" event before [DONE]. */
#include "serve_api.h"

#include <stdlib.h>
#include <string.h>

typedef struct oai_stream {
    int include_usage;
} oai_stream;

static json_t *chat_request(const json_t *body, const serve_info *si, int *chat, api_error *e) {
    (void)si;
    (void)e;
    *chat = 1;
    return json_incref((json_t *)body);
}

static json_t *text_request(const json_t *body, const serve_info *si, int *chat, api_error *e) {
    (void)si;
    (void)e;
    *chat = 0;
    return json_incref((json_t *)body);
}

static json_t *identity_response(const json_t *body, const json_t *completion, const serve_info *si) {
    (void)body;
    (void)si;
    return json_incref((json_t *)completion);
}

static void *oai_stream_new(const json_t *body, const serve_info *si) {
    (void)si;
    oai_stream *st = calloc(1, sizeof *st);
    if (st) st->include_usage = json_is_true(json_object_get(json_object_get(body, "stream_options"), "include_usage"));
    return st;
}

/* The usage chunk: no choices, a usage object. */
static int is_usage_chunk(const json_t *chunk) {
    const json_t *c = json_object_get(chunk, "choices");
    return json_is_array(c) && json_array_size(c) == 0 && json_object_get(chunk, "usage");
}

static json_t *oai_error(const api_error *e) {
    const char *type = e->status == 401 ? "authentication_error" : e->status == 403 ? "permission_error" :
                       e->status >= 500 ? "server_error" : "invalid_request_error";
    return json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", e->msg[0] ? e->msg : "error", "type", type,
                     "param", e->param[0] ? e->param : NULL, "code", e->code[0] ? e->code : NULL);
}

static int oai_stream_chunk(void *p, const json_t *chunk, const char *err, api_buf *out) {
    oai_stream *st = p;
    if (err) {
        api_error e = {.status = 500};
        api_fail(&e, 500, NULL, "%s", err);
        api_put_json(out, "data: ", oai_error(&e), "\n\n");
        api_puts(out, "data: [DONE]\n\n");
    } else if (!chunk) {
        api_puts(out, "data: [DONE]\n\n");
    } else if (!is_usage_chunk(chunk) || st->include_usage) {
        api_put_json(out, "data: ", json_incref((json_t *)chunk), "\n\n");
    }
    return out->oom ? -1 : 0;
}

static void oai_stream_free(void *st) { free(st); }

/* The two endpoints differ only in what the request is. */
#define OPENAI_API(req)                                                                       \
    {.name = "openai", .stream_type = "text/event-stream", .request = req, .response = identity_response, \
     .stream_new = oai_stream_new, .stream_chunk = oai_stream_chunk, .stream_free = oai_stream_free,   \
     .error = oai_error, .keepalive = api_sse_keepalive}

const serve_api serve_api_openai_chat = OPENAI_API(chat_request);
const serve_api serve_api_openai_completions = OPENAI_API(text_request);
