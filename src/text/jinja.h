/* text/jinja.h - a Jinja template engine for chat templates (the GGUF's
 * tokenizer.chat_template), rendering as Python's Jinja2 does, byte for byte.
 * The public side (pk_jinja_parse, pk_jinja_render, pk_jinja_free,
 * pk_jinja_params) is in include/pocket.h; what is supported is in
 * docs/chat-templates.md. This header adds the entry for callers inside the
 * library that hold the variables as JSON already. */
#ifndef PK_TEXT_JINJA_H
#define PK_TEXT_JINJA_H

#include <jansson.h>
#include <stddef.h>

#include "pocket.h"

/* Render t with the variables of the JSON object vars (read, not taken
 * over; NULL: none): each key is a template variable. p's bos_token,
 * eos_token and add_generation_prompt are added as pk_jinja_render says.
 * *out is malloc'ed and NUL-terminated (the text may hold NUL bytes:
 * *out_len counts them). */
int pk_jinja_render_vars(const pk_jinja *t, json_t *vars, const pk_jinja_params *p, char **out,
                         size_t *out_len, pk_error *err);

#endif
