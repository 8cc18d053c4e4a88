/* text/json_schema_int.h - what the JSON schema converter
 * (text/json_schema.c: the shared pieces, rule names, keywords, $ref, the
 * walk, the API) and the rules of each type (text/json_schema_types.c)
 * share: the shared pieces' ids, the converter's state and its helpers.
 * Private to these two files. */
#ifndef PK_TEXT_JSON_SCHEMA_INT_H
#define PK_TEXT_JSON_SCHEMA_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"
#include "text/strbuf.h"

/* the shared pieces (text/json_schema.c's prims) */
enum { P_SPACE, P_CHAR, P_STRING, P_INTEGRAL, P_NUMBER, P_INTEGER, P_BOOLEAN, P_NULL, P_VALUE, P_OBJECT, P_ARRAY,
       P_DATE, P_TIME, P_DATETIME, P_UUID, P_KEY, P_BCHAR, P_COUNT };

/* Gemma-4's string quote <|"|>, inside a GBNF literal */
#define G4_QUOTE "<|\\\"|>"

typedef struct jsg {
    json_t *root;
    int lenient;
    int no_lt;               /* PK_SCHEMA_NO_LT: '<' in strings only as \u003c */
    int g4;                  /* PK_SCHEMA_GEMMA4: Gemma-4's way of writing values */
    pk_error *err;
    int failed;
    sbuf out;                /* the rules made so far */
    json_t *names;           /* rule names taken (object used as a set) */
    json_t *refs;            /* "$ref" -> rule name */
    uint32_t used;           /* shared pieces used */
    int depth;
    const char *prefix;      /* every rule name starts with it and '-' (NULL: none) */
    char *pname[P_COUNT];    /* the shared pieces' names */
} jsg;

/* Record the first error (what follows it is its consequence); -1. */
#define fail(J, code, ...) \
    ((J)->failed ? -1 : ((J)->failed = 1, pk_errorf((J)->err, code, "json_schema: " __VA_ARGS__), -1))

static inline void emit_rule(jsg *J, const char *name, const char *body) {
    sb_printf(&J->out, "%s ::= %s\n", name, body);
}

static inline const char *use(jsg *J, int prim) {
    J->used |= 1u << prim;
    return J->pname[prim];
}

static inline const char *at(const char *path) { return *path ? path : "/"; }

/* text/json_schema.c: a fresh rule name (NULL out of memory, the error
 * recorded); a JSON pointer path + "/" + key (NULL out of memory); the rule
 * of the child schema s at path/key (NULL on error); a GBNF string literal
 * of n bytes; whether a Gemma-4 object can hold key bare. */
char *pk_jsg_new_name(jsg *J, const char *hint);
char *pk_jsg_path_join(const char *path, const char *key);
char *pk_jsg_visit_child(jsg *J, json_t *s, const char *path, const char *key, const char *hint);
void pk_jsg_sb_literal(sbuf *b, const char *s, size_t n);
int pk_jsg_g4_bare_key(const char *k);

/* text/json_schema_types.c: the body of schema s at path (rule name) for
 * type t, or as an object or an array, appended to body; 0, or -1 with the
 * error recorded. */
int pk_jsg_do_type(jsg *J, json_t *s, const char *t, const char *path, const char *name, sbuf *body);
int pk_jsg_do_object(jsg *J, json_t *s, const char *path, const char *name, sbuf *body);
int pk_jsg_do_array(jsg *J, json_t *s, const char *path, const char *name, sbuf *body);

#endif
