/* chat.h - the chat template families, without a model: what src/text/chat.c
 * formats and how a template's text or a family's name maps to one. The
 * model's side (its tokenizer.chat_template, its BOS token) is in
 * src/model/template.c. */
#ifndef PK_TEXT_CHAT_H
#define PK_TEXT_CHAT_H

#include <stddef.h>

#include "pocket.h"

enum { TMPL_CHATML, TMPL_LLAMA3, TMPL_GEMMA, TMPL_GEMMA4, TMPL_DEEPSEEK2, TMPL_DEEPSEEK3, TMPL_HARMONY, TMPL_COUNT };
#define TMPL_KNOWN "chatml, llama3, gemma, gemma4, deepseek2, deepseek3, harmony"

/* The family named name ("chatml", ...), or -1. */
int pk_chat_family(const char *name);
/* The family a Jinja template's text t[0..n) belongs to, by the special-token
 * markers it writes, or -1. */
int pk_chat_family_of(const char *t, size_t n);
/* The name of family (TMPL_*), or NULL out of range. */
const char *pk_chat_family_name(int family);

#endif
