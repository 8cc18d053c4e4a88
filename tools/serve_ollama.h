/* tools/serve_ollama.h - Ollama's model endpoints for pocket serve: what
 * GET /api/tags, POST /api/show, GET /api/version and GET /api/ps answer,
 * built from the server's serve_info (tools/serve_api.h). /api/chat and
 * /api/generate are the translators serve_api_ollama_chat / _generate.
 * A refusal is answered with serve_api_ollama_chat.error (Ollama's
 * {"error": "..."}) and the status in e. */
#ifndef POCKET_SERVE_OLLAMA_H
#define POCKET_SERVE_OLLAMA_H

#include <stddef.h>

#include "serve_api.h"

/* The name Ollama clients see: the model id with the tag ":latest" unless
   it has a tag of its own. Returns buf. */
const char *ollama_model_name(const serve_info *si, char *buf, size_t n);

json_t *ollama_tags(const serve_info *si);      /* {"models": [the one model]} */
json_t *ollama_ps(const serve_info *si);        /* {"models": [it, loaded]} */
json_t *ollama_version(const serve_info *si);   /* {"version": ...} */
/* body {model (or name), verbose?} -> the model's details; NULL with e set
   on a bad body. */
json_t *ollama_show(const json_t *body, const serve_info *si, api_error *e);

#endif
