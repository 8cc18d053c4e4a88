/* tools/serve_api.h - the APIs pocket serve speaks, each a thin translation
 * over its one request path: OpenAI chat completions (tools/serve.h).
 *
 * A request in another API (Anthropic /v1/messages, OpenAI /v1/responses,
 * Ollama /api/chat and /api/generate) is translated into an OpenAI chat (or
 * text) completion request; the server runs it as it runs its own; what it
 * produces comes back as OpenAI objects (chat.completion when not streamed,
 * chat.completion.chunk objects when streamed) and is translated into the
 * API's own response or stream. The translators see JSON only: no slot, no
 * job, no connection, so each is tested on its own (tests/unit/) and through
 * its official client library (tests/cli/serve/).
 *
 * The OpenAI request the server takes (what a translator may produce):
 *   model (ignored by the translators: the server serves one model),
 *   messages: [{role: "system"|"developer"|"user"|"assistant"|"tool",
 *               content: string | [{type: "text", text}] | null,
 *               reasoning_content?: string (assistant: its earlier reasoning),
 *               tool_calls?: [{id, type: "function", function: {name, arguments: string}}],
 *               tool_call_id?: string (role tool), name?: string}],
 *   prompt: string (text completions, *chat = 0),
 *   tools: [{type: "function", function: {name, description?, parameters?}}],
 *   tool_choice: "auto" | "none" | "required" | {type: "function", function: {name}},
 *   parallel_tool_calls: bool (false: the first call only),
 *   response_format: {type: "text" | "json_object"} |
 *                    {type: "json_schema", json_schema: {name, schema, strict?}},
 *   grammar: GBNF text (llama.cpp's field),
 *   max_tokens, temperature, top_p, top_k, min_p, seed, stop (string or up to 4... strings),
 *   presence_penalty, frequency_penalty, repeat_penalty, logit_bias, logprobs, top_logprobs, n,
 *   stream, stream_options: {include_usage},
 *   reasoning_format: "auto" | "none",
 *   chat_template_kwargs: {enable_thinking: bool, ...} (passed to the model's template),
 *   reasoning_effort: "low" | "medium" | "high" (gpt-oss templates), thinking_budget_tokens: int.
 *
 * The chunks a streamed request yields, in order (OpenAI's shapes):
 *   {id, object: "chat.completion.chunk", created, model, choices: [{index, delta: {role: "assistant",
 *    content: ""}}]}, then deltas: {content} | {reasoning_content} |
 *   {tool_calls: [{index, id, type: "function", function: {name, arguments: ""}}]} (a call starts) |
 *   {tool_calls: [{index, function: {arguments: "..."}}]} (its arguments, in pieces),
 *   then {choices: [{index, delta: {}, finish_reason: "stop" | "length" | "tool_calls"}]},
 *   then always (translators get it whatever stream_options says) {choices: [], usage: {prompt_tokens,
 *   completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}}.
 * A non-streamed request yields one chat.completion object: choices[i].message {role, content
 * (null when there are tool calls and no text), reasoning_content?, tool_calls?}, finish_reason, usage.
 */
#ifndef POCKET_SERVE_API_H
#define POCKET_SERVE_API_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>


/* What a translator may need to know of the server. */
typedef struct serve_info {
    const char *model_id;       /* the name the server answers to (--alias, else the file's) */
    const char *arch;           /* GGUF general.architecture */
    const char *file;           /* the model file's path */
    uint64_t file_size, n_params;
    const char *quant;          /* the file's main weight type ("Q4_K_M"...) */
    int n_ctx, n_ctx_train, n_vocab;
    const char *chat_template;  /* the template text in use (NULL: a built-in formatter) */
    long created;               /* server start (unix time) */
    const char *version;        /* pocket's version */
} serve_info;

/* A refusal: the HTTP status and a one-line message naming the field and
 * the value (each API wraps it in its own error shape: api->error). */
typedef struct api_error {
    int status;                 /* 400, 404, 413, 500 ... */
    char param[64];             /* the request field at fault ("" if none) */
    char msg[512];
    char code[48];              /* OpenAI's error code ("unsupported_parameter", "model_not_found",
                                   "context_length_exceeded"...; "" if none): api_fail clears it */
} api_error;

void api_fail(api_error *e, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A JSON value's kind for messages: "an object", "an array", "a string",
 * "a number", "a boolean", "null"; "nothing" for NULL (absent). */
const char *api_kind(const json_t *v);

/* Bytes of a response stream that grow; after a failed allocation oom is
 * set and later appends do nothing. */
typedef struct api_buf {
    char *p;
    size_t n, cap;
    int oom;
} api_buf;

void api_put(api_buf *b, const char *s, size_t n);
void api_puts(api_buf *b, const char *s);
/* the SSE comment ": keep-alive" (a keepalive of the OpenAI-style streams) */
void api_sse_keepalive(void *st, api_buf *b);
/* prefix, v as compact JSON (v stolen; NULL: oom), suffix: "data: " v "\n\n"
   for server-sent events, "" v "\n" for NDJSON. */
void api_put_json(api_buf *b, const char *prefix, json_t *v, const char *suffix);

/* A valid UTF-8 copy of s[0..n) (invalid bytes become U+FFFD, overlong forms and
 * surrogates included), NUL-terminated, malloc'ed; NULL if out of memory.
 * *out_len gets its length. */
char *api_utf8_sanitize(const char *s, size_t n, size_t *out_len);

/* One API: its request and response translations. A stream state is made
 * per request; stream_chunk appends to out the bytes of the API's stream
 * for one OpenAI chunk (chunk NULL: the end of the stream, after the usage
 * chunk; err non-NULL instead: generation failed with that message). */
typedef struct serve_api {
    const char *name;                   /* "openai", "anthropic", "responses", "ollama" */
    const char *stream_type;            /* Content-Type of its stream */
    /* body -> the OpenAI request (new reference); *chat = 0 for a text
       completion. NULL with e filled when the request is refused. */
    json_t *(*request)(const json_t *body, const serve_info *si, int *chat, api_error *e);
    /* the OpenAI chat.completion (or text_completion) -> the API's response (new reference) */
    json_t *(*response)(const json_t *body, const json_t *completion, const serve_info *si);
    void *(*stream_new)(const json_t *body, const serve_info *si);
    int (*stream_chunk)(void *st, const json_t *chunk, const char *err, api_buf *out);
    void (*stream_free)(void *st);
    /* the API's error object for a refusal (new reference) */
    json_t *(*error)(const api_error *e);
    /* writes bytes its clients ignore (or read as an empty piece of the
       answer), sent on a stream that has been silent for a while (a long
       prompt): HTTP clients cut a response whose body stalls (Node's fetch
       after 300 s); NULL: none */
    void (*keepalive)(void *st, api_buf *out);
} serve_api;

extern const serve_api serve_api_openai_chat;        /* tools/serve_openai.c: /v1/chat/completions */
extern const serve_api serve_api_openai_completions; /* tools/serve_openai.c: /v1/completions */
extern const serve_api serve_api_anthropic;  /* tools/serve_anthropic.c: /v1/messages */
extern const serve_api serve_api_responses;  /* tools/serve_responses.c: /v1/responses */
extern const serve_api serve_api_ollama_chat;     /* tools/serve_ollama.c: /api/chat */
extern const serve_api serve_api_ollama_generate; /* tools/serve_ollama.c: /api/generate */

#endif
