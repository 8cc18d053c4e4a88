/* text/jinja_internal.h - the inside of the Jinja engine (text/jinja*.c):
 * values, the syntax tree, the render state. Not for use outside src/text.
 *
 *   jinja_value.c  values: the render's allocator, strings, lists, dicts,
 *                  equality, order, str() / repr() / json.dumps() as Python
 *                  writes them, JSON (jansson) to values
 *   jinja_lex.c    lexer (Jinja2's whitespace rules), the template's arena
 *   jinja_parse.c  parser to the tree: helpers, statements, entry; its
 *                  expressions are jinja_parse_expr.c, and what the three
 *                  parser files share is jinja_parse_int.h
 *   jinja.c        the evaluator: statements, expressions, scopes, macros,
 *                  loops, limits; pk_jinja_render
 *   jinja_ops.c    attributes, items, slices, iteration, operators
 *   jinja_lib.c    filters, tests
 *   jinja_method.c methods of str / list / dict, globals, argument binding
 *   jinja_str.c    the library's strings: code points, case, sorting,
 *                  str % args, string operations
 *
 * Memory: every block a render allocates goes through jmalloc into one list
 * (the registry) that the render frees as a whole when it ends, so an error
 * (a longjmp out of any depth) or a reference cycle (a list appended to
 * itself) leaks nothing. Values are reference counted within a render so
 * that loops reuse memory; template constants are immortal (refs < 0) and
 * live with the template. */
#ifndef PK_TEXT_JINJA_INTERNAL_H
#define PK_TEXT_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "text/jinja.h"

/* ---- values ------------------------------------------------------------------------ */
enum jtype {
    JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_NS,
    JV_MACRO, JV_FUNC, JV_METHOD, JV_LOOP, JV_TYPES
};
/* jv.flags */
enum { JVF_SAFE = 1 };          /* a string marked safe (Markup): `+` escapes the other side */
/* kinds of list (jlist.kind): how Python would print and index them */
enum { JL_LIST, JL_TUPLE, JL_ITEMS, JL_KEYS, JL_VALUES, JL_GEN };
/* undefined values: why (jv.aux & 0xff), the parent's type (jv.aux >> 8) */
enum { JU_PLAIN, JU_NAME, JU_ATTR, JU_INDEX };

typedef struct jobj {
    int32_t refs;               /* < 0: immortal (a template constant) */
    uint8_t type;               /* enum jtype */
} jobj;

typedef struct jstr {
    jobj h;
    uint32_t hash;              /* 0: not yet computed */
    size_t len;
    char s[];                   /* len bytes and a NUL */
} jstr;

typedef struct jv {
    uint8_t t;                  /* enum jtype */
    uint8_t flags;
    uint16_t aux;               /* JV_FUNC: the global's id; JV_UNDEF: JU_* | parent type << 8 */
    int32_t aux2;               /* JV_UNDEF with JU_INDEX: the index */
    union {
        int64_t i;              /* JV_BOOL, JV_INT */
        double f;
        jobj *o;                /* JV_STR .. JV_LOOP but JV_FUNC */
        const jstr *name;       /* JV_UNDEF: the name (immortal) or NULL */
    } u;
} jv;

typedef struct jlist {
    jobj h;
    uint8_t kind;               /* JL_* */
    size_t n, cap;
    jv *v;
} jlist;

/* Insertion-ordered; JV_DICT, JV_NS, and the scopes (parent set). */
typedef struct jdict {
    jobj h;
    size_t n, cap;
    jv *k, *v;
    uint32_t *idx;              /* open addressing over k, 1 + index (0: empty); NULL while small */
    size_t icap;
    struct jdict *parent;       /* scopes: the enclosing scope */
} jdict;

struct jnode;
typedef struct jmacro {
    jobj h;
    const struct jnode *def;    /* N_MACRO or N_CALLBLOCK */
    jdict *closure;             /* the scope it was defined in */
} jmacro;

typedef struct jmethod {
    jobj h;
    int id;                     /* M_* (jinja_method.c) */
    jv self;
} jmethod;

typedef struct jloop {
    jobj h;
    jlist *seq;
    size_t i;
    jv last;                    /* loop.changed's previous arguments */
    int has_last;
} jloop;

/* ---- the syntax tree --------------------------------------------------------------- */
enum jnkind {
    /* expressions */
    N_CONST, N_NAME, N_ATTR, N_INDEX, N_SLICE, N_CALL, N_FILTER, N_TEST, N_UNARY, N_BINARY,
    N_AND, N_OR, N_NOT, N_COMPARE, N_COND, N_LIST, N_TUPLE, N_DICT,
    /* statements */
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SETBLOCK, N_MACRO, N_CALLBLOCK, N_FILTERBLOCK,
    N_WITH, N_BREAK, N_CONTINUE, N_BLOCK
};
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT, OP_NEG, OP_POS,
       OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };

typedef struct jnode jnode;
struct jnode {
    uint8_t kind, op;
    uint8_t flags;              /* N_TEST: negated; N_MACRO: JM_* */
    uint32_t pos;               /* byte offset in the (normalised) source */
    int id;                     /* N_FILTER / N_TEST: which; N_NAME: global id or -1 */
    const jstr *name;           /* names, attributes, filter / test / macro names */
    jv lit;                     /* N_CONST, N_TEXT */
    jnode *a, *b, *c, *d;       /* children (by kind) */
    jnode **v;                  /* a list: arguments, items, body, targets */
    int nv;
    jnode **w;                  /* a second list: keyword values, dict values, else body */
    int nw;
    const jstr **kw;            /* keyword names (with w) */
};
/* N_MACRO flags: the body reads varargs / kwargs / caller */
enum { JM_VARARGS = 1, JM_KWARGS = 2, JM_CALLER = 4 };

struct pk_jinja {
    char *src;                  /* the normalised source (\r\n -> \n, one final \n dropped) */
    size_t len;
    jnode *root;                /* N_BLOCK */
    struct jarena *arena;       /* nodes and constants */
    const jstr *n_loop, *n_varargs, *n_kwargs, *n_caller;   /* names the evaluator sets */
};

/* ---- the render ---------------------------------------------------------------------- */
typedef struct jbuf {
    char *p;                    /* jmalloc'ed */
    size_t n, cap;
} jbuf;

typedef struct jblk jblk;       /* the registry's header of each block (jinja_value.c) */

typedef struct jrender {
    const pk_jinja *t;
    jblk *head;                 /* the registry (a ring through a sentinel) */
    size_t mem, max_mem;
    uint64_t steps, max_steps;
    int depth, max_depth;
    size_t max_output;
    jbuf *out;                  /* where output goes now */
    jmp_buf fail;
    pk_error *err;
    int64_t now;
    jdict *root;                /* the template's top-level scope */
    jobj **freeq;               /* objects whose count reached 0, to release */
    size_t nfreeq, capfreeq;
    int draining;
    const struct jnode *cur;    /* the node being run: where errors without one point */
} jrender;

/* ---- jinja_value.c ------------------------------------------------------------------- */
void jinit(jrender *r);                            /* the registry, before any jmalloc */
void *jmalloc(jrender *r, size_t n);
void *jrealloc(jrender *r, void *p, size_t n);
void jfree(jrender *r, void *p);
void jsweep(jrender *r);                           /* free every block left */
/* Count n steps of work against the render's limit (failing past it). */
void jcharge(jrender *r, uint64_t n);
/* Stop the render with a message naming the template line of node n (or none). */
_Noreturn void jfail(jrender *r, const jnode *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "line L, column C" of a byte offset of the source into buf */
void jpos_text(const pk_jinja *t, uint32_t pos, char *buf, size_t cap);

static inline jv jv_undef(void) { jv v = {.t = JV_UNDEF}; return v; }
static inline jv jv_none(void) { jv v = {.t = JV_NONE}; return v; }
static inline jv jv_bool(int b) { jv v = {.t = JV_BOOL}; v.u.i = !!b; return v; }
static inline jv jv_int(int64_t i) { jv v = {.t = JV_INT}; v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = {.t = JV_FLOAT}; v.u.f = f; return v; }
static inline jv jv_obj(int type, void *o) { jv v = {.t = (uint8_t)type}; v.u.o = (jobj *)o; return v; }
static inline int jv_is_obj(jv v) { return v.t >= JV_STR && v.t != JV_FUNC; }
static inline jstr *jv_str(jv v) { return (jstr *)v.u.o; }
static inline jlist *jv_list(jv v) { return (jlist *)v.u.o; }
static inline jdict *jv_dict(jv v) { return (jdict *)v.u.o; }
static inline jv jv_ref(jv v) {
    if (jv_is_obj(v) && v.u.o->refs >= 0) v.u.o->refs++;
    return v;
}
void jv_unref(jrender *r, jv v);

jstr *jstr_new(jrender *r, const char *s, size_t n);
jv jv_strn(jrender *r, const char *s, size_t n);
static inline jv jv_cstr(jrender *r, const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return jv_strn(r, s, n);
}
uint32_t jstr_hash(const jstr *s);
jstr *jstr_immortal(struct jarena *a, const char *s, size_t n);

jlist *jlist_new(jrender *r, int kind, size_t cap);
void jlist_push(jrender *r, jlist *l, jv v);      /* takes the reference */
jdict *jdict_new(jrender *r, int type);
/* The value of key (a borrowed reference), or NULL. */
jv *jdict_get(jrender *r, const jdict *d, jv key);
jv *jdict_get_str(const jdict *d, const jstr *key);
/* Set key to v (both references taken). */
void jdict_set(jrender *r, const jnode *at, jdict *d, jv key, jv v);
int jdict_del(jrender *r, const jnode *at, jdict *d, jv key);

void jbuf_put(jrender *r, jbuf *b, const char *s, size_t n);
static inline void jbuf_puts(jrender *r, jbuf *b, const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    jbuf_put(r, b, s, n);
}
void jbuf_putc(jrender *r, jbuf *b, char c);
/* The bytes of b as a string value; b is emptied. */
jv jbuf_take(jrender *r, jbuf *b);

const char *jv_type_name(jv v);
int jv_hashable(jv v);                             /* as Python's hash() accepts it */
int jv_truthy(jv v);
int jv_eq(jrender *r, const jnode *at, jv a, jv b);
/* <0, 0, >0; fails for values Python does not order */
int jv_cmp(jrender *r, const jnode *at, jv a, jv b, const char *op);
/* str(v) and repr(v) appended to b */
void jv_str_to(jrender *r, const jnode *at, jbuf *b, jv v);
void jv_repr_to(jrender *r, const jnode *at, jbuf *b, jv v, int depth);
/* str(v) as a string value (a new reference) */
jv jv_to_str(jrender *r, const jnode *at, jv v);
void jfloat_repr(double f, char out[40]);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys): indent NULL for
 * none; item_sep / key_sep NULL for Python's defaults */
void jv_json_to(jrender *r, const jnode *at, jbuf *b, jv v, int ensure_ascii, const char *indent,
                const char *item_sep, const char *key_sep, int sort_keys, int depth);
jv jv_from_json(jrender *r, json_t *j, int depth);
/* Python's str.isspace for a code point */
int jspace(uint32_t cp);
/* Code points in s[0..n). */
size_t jcp_count(const char *s, size_t n);
/* Byte offset of code point i of s[0..n) (n if past the end). */
size_t jcp_offset(const char *s, size_t n, size_t i);

/* ---- jinja_lex.c, jinja_parse.c -------------------------------------------------------- */
int jparse(pk_jinja *t, int flags, pk_error *err);
struct jarena *jarena_new(void);
void *jarena_alloc(struct jarena *a, size_t n);
void jarena_free(struct jarena *a);
/* The id of filter / test / global called name, or -1 (jinja_lib.c, jinja_method.c). */
int jfilter_id(const char *name, size_t n);
int jtest_id(const char *name, size_t n);
int jglobal_id(const char *name, size_t n);

/* ---- jinja.c --------------------------------------------------------------------------- */
jv jeval(jrender *r, jdict *sc, const jnode *n);
/* Call a callable value with evaluated arguments (references borrowed). */
jv jcall_value(jrender *r, const jnode *at, jv f, jv *args, int nargs, const jstr **kwn, jv *kwv, int nkw);

/* ---- jinja_ops.c ----------------------------------------------------------------------- */
jv jget_attr(jrender *r, const jnode *at, jv obj, const jstr *name);
jv jget_item(jrender *r, const jnode *at, jv obj, jv key);
/* obj[a:b:c] (None for a bound not given) */
jv jdo_slice(jrender *r, const jnode *at, jv obj, jv a, jv b, jv c);
/* The elements of an iterable as a list (a new reference); fails for
 * values that are not iterable. */
jlist *jiter_list(jrender *r, const jnode *at, jv v);
_Noreturn void jfail_undef(jrender *r, const jnode *at, jv u);
/* An undefined value: why (JU_*), the type of the object it came from, the name */
jv jundef_of(int why, int parent_type, const jstr *name);
static inline int jv_is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
/* a OP b for the arithmetic operators and ~ (OP_ADD .. OP_CONCAT) */
jv jbinop(jrender *r, const jnode *at, int op, jv a, jv b);
/* a OP b for the comparisons (OP_EQ .. OP_NOTIN) */
int jcompare(jrender *r, const jnode *at, int op, jv a, jv b);
_Noreturn void joverflow(jrender *r, const jnode *at);

/* ---- jinja_lib.c, jinja_method.c, jinja_str.c ------------------------------------------ */
/* Arguments of a filter, test, method or global call after binding. */
typedef struct jargs {
    jv *pos;
    int npos;
    const jstr **kwn;
    jv *kwv;
    int nkw;
} jargs;
jv jfilter_apply(jrender *r, jdict *sc, const jnode *at, int id, jv v, const jargs *a);
int jtest_apply(jrender *r, const jnode *at, int id, jv v, const jargs *a);
jv jglobal_call(jrender *r, const jnode *at, int id, const jargs *a);
/* The method called name of v (JV_METHOD), or undefined when v has none. */
jv jmethod_get(jrender *r, jv v, const char *name, size_t n);
jv jmethod_call(jrender *r, const jnode *at, jmethod *m, const jargs *a);
/* HTML escape of a string value (Markup's escape), marked safe */
jv jhtml_escape(jrender *r, jv s);
/* Python's str % args */
jv jpy_format(jrender *r, const jnode *at, jv fmt, jv args);
const char *jglobal_name(int id);
/* The index of s[0..len) in names[0..n), or -1. */
int jname_in(const char *const *names, int n, const char *s, size_t len);

/* argument binding (jinja_method.c): a parameter not given is jv_missing() */
static inline jv jv_missing(void) { jv v = {.t = JV_TYPES}; return v; }
static inline int jv_given(jv v) { return v.t != JV_TYPES; }
void jbind(jrender *r, const jnode *at, const char *fname, const jargs *a, const char *const *params, jv *out);
int jarg_bool(jv v, int def);
int64_t jarg_int(jrender *r, const jnode *at, jv v, int64_t def, const char *what);
jstr *jarg_str(jrender *r, const jnode *at, jv v, const char *what);

/* strings (jinja_str.c) */
uint32_t jnext_cp(const char *s, size_t n, size_t *i);
/* CASE_WORDS is Jinja2's title filter (not str.title): after the start and
 * after each of - ( { [ < and white space, upper case; else lower case. */
enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE, CASE_SWAP, CASE_WORDS };
jv jcase_map(jrender *r, const char *s, size_t n, int mode);
jv jsoft_str(jrender *r, const jnode *at, jv v);
jv jwith_flags(jv v, int flags);
jlist *jnew_list(jrender *r, int kind);
jv jtuple2(jrender *r, jv a, jv b);
int64_t jpy_len(jrender *r, const jnode *at, jv v);
jv jget_path_default(jrender *r, const jnode *at, jv item, jv attr, jv def);
jv jget_path(jrender *r, const jnode *at, jv item, jv attr);
jv jsort_key(jrender *r, const jnode *at, jv item, jv attr, int case_sensitive);
jv jsorted_list(jrender *r, const jnode *at, jv *keys, jv *items, size_t n, int reverse, int kind);
jv jstr_format(jrender *r, const jnode *at, jstr *f, const jargs *a);
jv jstr_strip(jrender *r, jv v, const jstr *chars, int which);
jv jstr_replace(jrender *r, jstr *s, jstr *old, jstr *new_, int64_t count);
jv jstr_split(jrender *r, const jnode *at, jstr *s, const jstr *sep, int64_t maxsplit, int from_right);
int64_t jstr_find(jrender *r, jstr *s, jstr *sub, int64_t start, int64_t end, int from_right);
int64_t jstr_count(jrender *r, jstr *s, jstr *sub);
jv jstr_splitlines(jrender *r, jstr *s, int keepends);
int jstr_all(jstr *s, int kind);
jv jstr_pad(jrender *r, jstr *s, int64_t width, jstr *fill, int how);

#endif
