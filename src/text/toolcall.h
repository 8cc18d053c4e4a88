/* toolcall.h - the tool-call formats of src/text/toolcall.c by number: what
 * a format's name or a chat template's text maps to. The parser itself is
 * public (pk_toolcall_* in pocket.h). */
#ifndef PK_TEXT_TOOLCALL_H
#define PK_TEXT_TOOLCALL_H

#include <stddef.h>

#include "pocket.h"

enum { TC_QWEN3CODER, TC_HERMES, TC_HARMONY, TC_DEEPSEEK, TC_LLAMA3, TC_GEMMA4, TC_COUNT };
#define TC_KNOWN "qwen3coder, hermes, harmony, deepseek, llama3, gemma4"

/* The format named name ("qwen3coder", ...), or -1. */
int pk_toolcall_format(const char *name);
/* The format a Jinja chat template's text t[0..n) makes the model write, by
 * the markers it renders tool calls with, or -1. */
int pk_toolcall_format_of(const char *t, size_t n);
/* The name of format (TC_*), or NULL out of range. */
const char *pk_toolcall_format_name(int format);

#endif
