/* text/jinja_parse_int.h - the inside of the Jinja engine's parser, shared
 * by the lexer (text/jinja_lex.c), the expressions (text/jinja_parse_expr.c)
 * and the statements and entry (text/jinja_parse.c); nothing else includes
 * it. What the parser reads and how: text/jinja_parse.c.
 *
 * The token helpers of one line are static inline; the functions one file
 * calls in another are j*, as in text/jinja_internal.h. */
#ifndef PK_TEXT_JINJA_PARSE_INT_H
#define PK_TEXT_JINJA_PARSE_INT_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "text/jinja_internal.h"

#define JP_MAX_DEPTH 128

/* ---- tokens (jinja_lex.c) ------------------------------------------------------------- */
enum { T_EOF, T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT,
       T_FLOAT, T_OP };

typedef struct jtok {
    uint8_t type;
    char op;                    /* T_OP: the character, or F // P ** E == N != G >= L <= */
    uint32_t pos;
    const char *s;              /* T_DATA, T_NAME, T_STRING (decoded): the text */
    size_t n;
    int64_t i;
    double f;
} jtok;

typedef struct jparser {
    pk_jinja *t;
    const char *src;
    size_t len;
    struct jarena *a;
    jtok *tok;
    size_t ntok, cap, i;
    pk_error *err;
    jmp_buf fail;
    int trim_blocks, lstrip_blocks;
    int depth, loops;
    jnode *macro;               /* the macro whose body is being read */
} jparser;

/* the two-character operators and their codes in jtok.op */
extern const char *const jtwo_char_ops[6];
extern const char jtwo_char_codes[7];

/* Stop reading with a message naming the template line of pos. */
_Noreturn void jpfail(jparser *P, uint32_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* n bytes (zeroed) in the template's arena; fails the parse if out of memory */
void *jpalloc(jparser *P, size_t n);
/* the source to P->tok, ending with T_EOF */
void jlex(jparser *P);

/* ---- parser helpers (jinja_parse.c) ----------------------------------------------------- */
static inline jtok *cur(jparser *P) { return &P->tok[P->i]; }
static inline jtok *peek(jparser *P, size_t k) { return &P->tok[P->i + k < P->ntok ? P->i + k : P->ntok - 1]; }
static inline void adv(jparser *P) { if (P->i + 1 < P->ntok) P->i++; }
static inline int is_op(const jtok *t, char op) { return t->type == T_OP && t->op == op; }
static inline int is_name(const jtok *t, const char *name) {
    size_t k = strlen(name);
    return t->type == T_NAME && t->n == k && !memcmp(t->s, name, k);
}

_Noreturn void junexpected(jparser *P, const char *wanted);
void jexpect_op(jparser *P, char op, const char *what);
jnode *jnode_new(jparser *P, int kind, uint32_t pos);
const jstr *jpstr(jparser *P, const char *s, size_t n);

/* growable node lists in the arena */
typedef struct nvec {
    jnode **v;
    int n, cap;
    const jstr **kw;            /* optional, with kw_on */
    int kw_on;
} nvec;

void jnpush(jparser *P, nvec *v, jnode *x, const jstr *kw);

#define ENTER(P) do { if (++(P)->depth > JP_MAX_DEPTH) \
    jpfail((P), cur(P)->pos, "the template nests more than %d levels deep", JP_MAX_DEPTH); } while (0)
#define LEAVE(P) ((P)->depth--)

/* ---- expressions (jinja_parse_expr.c) ---------------------------------------------------- */
jnode *jparse_expression(jparser *P);
jnode *jparse_tuple(jparser *P, int simplified, int with_condexpr, const char *extra, int explicit_parens);
jnode *jparse_filter(jparser *P, jnode *n);

#endif
