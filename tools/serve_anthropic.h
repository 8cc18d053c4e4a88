/* tools/serve_anthropic.h - what the server needs of the Anthropic Messages
 * translator (tools/serve_anthropic.c) beyond its serve_api
 * (serve_api_anthropic, tools/serve_api.h): POST /v1/messages/count_tokens.
 *
 * The server counts as it would for a generation: the body is translated
 * into the OpenAI chat request /v1/messages would make of it
 * (anthropic_count_request), the server renders that request's messages and
 * tools into the prompt and tokenizes it, and the count goes back in
 * Anthropic's shape (anthropic_count_response). */
#ifndef POCKET_SERVE_ANTHROPIC_H
#define POCKET_SERVE_ANTHROPIC_H

#include <jansson.h>

#include "serve_api.h"

/* A count_tokens body (messages, model, system, tools, tool_choice,
   thinking, output_config) -> the OpenAI chat request whose prompt is to be
   counted (new reference; no max_tokens, not streamed); NULL with e filled
   (a 400 naming the field) when the body is refused. */
json_t *anthropic_count_request(const json_t *body, const serve_info *si, api_error *e);

/* {"input_tokens": n}: count_tokens' answer (new reference; NULL: oom). */
json_t *anthropic_count_response(long long input_tokens);

/* The key under which tool_use.input carries a call's arguments that are
   not a JSON object ({"_raw_arguments": "the text"}); an input of that
   shape sent back in a later turn becomes the text again. */
#define ANTHROPIC_RAW_ARGUMENTS "_raw_arguments"

#endif
