/* text/jinja_parse.c - the parser of the Jinja engine: template text to a
 * syntax tree (text/jinja_internal.h), as Jinja2 3.1 reads it. Here are the
 * parser's helpers, the statements and the entry (jparse); the tokens come
 * from text/jinja_lex.c, the expressions are text/jinja_parse_expr.c.
 *
 * The parser is recursive descent. Unknown filters and tests, and break /
 * continue outside a loop, are errors when the template is read, as in
 * Jinja2. Nesting is limited (JP_MAX_DEPTH), so no template exhausts the
 * stack. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/jinja_parse_int.h"

/* ---- parser helpers -------------------------------------------------------------------------- */

static const char *tok_desc(const jtok *t, char *buf, size_t cap) {
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_DATA: return "template data";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "end of print statement ('}}')";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "end of statement block ('%}')";
    case T_NAME: snprintf(buf, cap, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s); return buf;
    case T_STRING: return "a string";
    case T_INT: case T_FLOAT: return "a number";
    default:
        for (int k = 0; k < 6; k++)
            if (t->op == jtwo_char_codes[k]) { snprintf(buf, cap, "'%s'", jtwo_char_ops[k]); return buf; }
        snprintf(buf, cap, "'%c'", t->op);
        return buf;
    }
}

_Noreturn void junexpected(jparser *P, const char *wanted) {
    char b[64];
    jtok *t = cur(P);
    if (wanted) jpfail(P, t->pos, "expected %s, got %s", wanted, tok_desc(t, b, sizeof b));
    jpfail(P, t->pos, "unexpected %s", tok_desc(t, b, sizeof b));
}

void jexpect_op(jparser *P, char op, const char *what) {
    if (!is_op(cur(P), op)) junexpected(P, what);
    adv(P);
}

static void expect_type(jparser *P, int type, const char *what) {
    if (cur(P)->type != type) junexpected(P, what);
    adv(P);
}

jnode *jnode_new(jparser *P, int kind, uint32_t pos) {
    jnode *n = jpalloc(P, sizeof *n);
    n->kind = (uint8_t)kind;
    n->pos = pos;
    n->id = -1;
    return n;
}

const jstr *jpstr(jparser *P, const char *s, size_t n) {
    jstr *j = jstr_immortal(P->a, s, n);
    if (!j) {
        pk_errorf(P->err, PK_ERR_NOMEM, "out of memory reading a template");
        longjmp(P->fail, 1);
    }
    return j;
}

void jnpush(jparser *P, nvec *v, jnode *x, const jstr *kw) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        jnode **nv = jpalloc(P, (size_t)cap * sizeof *nv);
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
        v->v = nv;
        if (v->kw_on) {
            const jstr **nk = jpalloc(P, (size_t)cap * sizeof *nk);
            if (v->n) memcpy(nk, v->kw, (size_t)v->n * sizeof *nk);
            v->kw = nk;
        }
        v->cap = cap;
    }
    if (v->kw_on) v->kw[v->n] = kw;
    v->v[v->n++] = x;
}

/* ---- statements ---------------------------------------------------------------------------- */

static jnode *parse_body(jparser *P, const char *const *ends, const char *opener, uint32_t opener_pos);

static void end_block(jparser *P) { expect_type(P, T_BLOCK_END, "end of statement block ('%}')"); }

/* An assignment target: a name, `ns.attr` (with_ns), or names separated by commas. */
static jnode *parse_target(jparser *P, int with_ns, const char *end_name) {
    uint32_t pos = cur(P)->pos;
    if (with_ns && cur(P)->type == T_NAME && is_op(peek(P, 1), '.') && peek(P, 2)->type == T_NAME) {
        jnode *ns = jnode_new(P, N_NAME, pos);
        ns->name = jpstr(P, cur(P)->s, cur(P)->n);
        ns->id = jglobal_id(cur(P)->s, cur(P)->n);
        adv(P);
        adv(P);
        jnode *x = jnode_new(P, N_ATTR, cur(P)->pos);
        x->a = ns;
        x->name = jpstr(P, cur(P)->s, cur(P)->n);
        adv(P);
        return x;
    }
    nvec names = {0};
    int paren = is_op(cur(P), '(');
    if (paren) adv(P);
    for (;;) {
        if (names.n) {
            if (!is_op(cur(P), ',')) break;
            adv(P);
            if (paren && is_op(cur(P), ')')) break;
        }
        jtok *t = cur(P);
        if (t->type != T_NAME || (end_name && is_name(t, end_name))) junexpected(P, "a name to assign to");
        jnode *x = jnode_new(P, N_NAME, t->pos);
        x->name = jpstr(P, t->s, t->n);
        jnpush(P, &names, x, NULL);
        adv(P);
    }
    if (paren) jexpect_op(P, ')', "')'");
    if (names.n == 1 && !paren) return names.v[0];
    jnode *n = jnode_new(P, N_TUPLE, pos);
    n->v = names.v;
    n->nv = names.n;
    return n;
}

static const char *const ends_for[] = {"endfor", "else", NULL};
static const char *const ends_endfor[] = {"endfor", NULL};
static const char *const ends_if[] = {"endif", "elif", "else", NULL};
static const char *const ends_endif[] = {"endif", NULL};

static jnode *parse_for(jparser *P, uint32_t pos) {
    jnode *n = jnode_new(P, N_FOR, pos);
    n->a = parse_target(P, 0, "in");
    if (!is_name(cur(P), "in")) junexpected(P, "'in'");
    adv(P);
    n->b = jparse_tuple(P, 0, 0, "recursive", 0);
    if (is_name(cur(P), "if")) {
        adv(P);
        n->c = jparse_expression(P);
    }
    if (is_name(cur(P), "recursive")) jpfail(P, cur(P)->pos, "recursive for loops are not supported");
    end_block(P);
    P->loops++;
    n->d = parse_body(P, ends_for, "for", pos);
    P->loops--;
    if (is_name(cur(P), "else")) {
        adv(P);
        end_block(P);
        jnode *e = parse_body(P, ends_endfor, "for", pos);
        n->w = e->v;
        n->nw = e->nv;
        n->flags = 1;
    }
    adv(P);                                   /* endfor */
    end_block(P);
    return n;
}

static jnode *parse_if(jparser *P, uint32_t pos) {
    jnode *n = jnode_new(P, N_IF, pos);
    n->a = jparse_tuple(P, 0, 0, NULL, 0);
    end_block(P);
    n->b = parse_body(P, ends_if, "if", pos);
    jtok *t = cur(P);
    if (is_name(t, "elif")) {
        adv(P);
        n->c = parse_if(P, t->pos);            /* reads up to and with the endif */
        return n;
    }
    if (is_name(t, "else")) {
        adv(P);
        end_block(P);
        n->c = parse_body(P, ends_endif, "if", pos);
    }
    adv(P);                                   /* endif */
    end_block(P);
    return n;
}

static jnode *parse_params(jparser *P, jnode *n) {
    nvec params = {0}, defs = {0};
    jexpect_op(P, '(', "'('");
    while (!is_op(cur(P), ')')) {
        if (params.n) jexpect_op(P, ',', "','");
        if (is_op(cur(P), ')')) break;
        jtok *t = cur(P);
        if (t->type != T_NAME) junexpected(P, "a parameter name");
        jnode *x = jnode_new(P, N_NAME, t->pos);
        x->name = jpstr(P, t->s, t->n);
        adv(P);
        jnode *d = NULL;
        if (is_op(cur(P), '=')) {
            adv(P);
            d = jparse_expression(P);
        } else if (defs.n && defs.v[defs.n - 1]) {
            jpfail(P, t->pos, "a parameter without a default after one with a default");
        }
        jnpush(P, &params, x, NULL);
        jnpush(P, &defs, d, NULL);
    }
    jexpect_op(P, ')', "')'");
    n->v = params.v;
    n->nv = params.n;
    n->w = defs.v;
    n->nw = defs.n;
    return n;
}

static jnode *parse_statement(jparser *P);

static jnode *parse_macro_body(jparser *P, jnode *n, const char *end, uint32_t pos) {
    jnode *outer = P->macro;
    int loops = P->loops;
    P->macro = n;
    P->loops = 0;
    const char *ends[] = {end, NULL};
    n->b = parse_body(P, ends, end + 3, pos);
    P->macro = outer;
    P->loops = loops;
    adv(P);
    end_block(P);
    return n;
}

static jnode *parse_statement(jparser *P) {
    ENTER(P);
    jtok *t = cur(P);
    uint32_t pos = t->pos;
    if (t->type != T_NAME) junexpected(P, "a tag name");
    jnode *n;
    if (is_name(t, "for")) { adv(P); n = parse_for(P, pos); }
    else if (is_name(t, "if")) { adv(P); n = parse_if(P, pos); }
    else if (is_name(t, "set")) {
        adv(P);
        jnode *target = parse_target(P, 1, NULL);
        if (is_op(cur(P), '=')) {
            adv(P);
            n = jnode_new(P, N_SET, pos);
            n->a = target;
            n->b = jparse_tuple(P, 0, 1, NULL, 0);
            end_block(P);
        } else {
            if (target->kind != N_NAME) junexpected(P, "'='");
            n = jnode_new(P, N_SETBLOCK, pos);
            n->a = target;
            jnode *chain = NULL;
            while (is_op(cur(P), '|')) {
                adv(P);
                jnode *f = jparse_filter(P, chain);
                chain = f;
            }
            n->c = chain;
            end_block(P);
            static const char *const ends[] = {"endset", NULL};
            n->b = parse_body(P, ends, "set", pos);
            adv(P);
            end_block(P);
        }
    } else if (is_name(t, "macro")) {
        adv(P);
        if (cur(P)->type != T_NAME) junexpected(P, "a macro name");
        n = jnode_new(P, N_MACRO, pos);
        n->name = jpstr(P, cur(P)->s, cur(P)->n);
        adv(P);
        parse_params(P, n);
        end_block(P);
        parse_macro_body(P, n, "endmacro", pos);
    } else if (is_name(t, "call")) {
        adv(P);
        n = jnode_new(P, N_CALLBLOCK, pos);
        if (is_op(cur(P), '(')) parse_params(P, n);
        n->a = jparse_expression(P);
        if (n->a->kind != N_CALL) jpfail(P, n->a->pos, "{%% call %%} needs a call expression");
        end_block(P);
        parse_macro_body(P, n, "endcall", pos);
    } else if (is_name(t, "filter")) {
        adv(P);
        n = jnode_new(P, N_FILTERBLOCK, pos);
        jnode *chain = jparse_filter(P, NULL);
        while (is_op(cur(P), '|')) {
            adv(P);
            chain = jparse_filter(P, chain);
        }
        n->c = chain;
        end_block(P);
        static const char *const ends[] = {"endfilter", NULL};
        n->b = parse_body(P, ends, "filter", pos);
        adv(P);
        end_block(P);
    } else if (is_name(t, "with")) {
        adv(P);
        n = jnode_new(P, N_WITH, pos);
        nvec targets = {0}, vals = {0};
        while (cur(P)->type != T_BLOCK_END) {
            if (targets.n) jexpect_op(P, ',', "','");
            jnpush(P, &targets, parse_target(P, 0, NULL), NULL);
            jexpect_op(P, '=', "'='");
            jnpush(P, &vals, jparse_expression(P), NULL);
        }
        n->v = targets.v;
        n->nv = targets.n;
        n->w = vals.v;
        n->nw = vals.n;
        end_block(P);
        static const char *const ends[] = {"endwith", NULL};
        n->b = parse_body(P, ends, "with", pos);
        adv(P);
        end_block(P);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        if (!P->loops) jpfail(P, pos, "'%.*s' outside loop", (int)t->n, t->s);
        n = jnode_new(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, pos);
        adv(P);
        end_block(P);
    } else if (is_name(t, "print")) {
        adv(P);
        n = jnode_new(P, N_OUTPUT, pos);
        n->a = jparse_tuple(P, 0, 1, NULL, 0);
        end_block(P);
    } else if (is_name(t, "generation")) {
        /* Hugging Face's {% generation %} (assistant masks): renders its body */
        adv(P);
        end_block(P);
        static const char *const ends[] = {"endgeneration", NULL};
        n = parse_body(P, ends, "generation", pos);
        adv(P);
        end_block(P);
    } else if (is_name(t, "block") || is_name(t, "extends") || is_name(t, "include") || is_name(t, "import") ||
               is_name(t, "from") || is_name(t, "autoescape")) {
        jpfail(P, pos, "the '%.*s' tag is not supported in chat templates", (int)t->n, t->s);
    } else {
        jpfail(P, pos, "encountered unknown tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
    }
    LEAVE(P);
    return n;
}

/* Statements up to a {% NAME %} with NAME in ends (left at NAME), or the end
 * of the template when ends is NULL. */
static jnode *parse_body(jparser *P, const char *const *ends, const char *opener, uint32_t opener_pos) {
    ENTER(P);
    jnode *body = jnode_new(P, N_BLOCK, cur(P)->pos);
    nvec v = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->type == T_EOF) {
            if (!ends) break;
            char where[64];
            jpos_text(P->t, opener_pos, where, sizeof where);
            jpfail(P, t->pos, "unexpected end of template: the '%s' at %s is not closed (expected '%s')", opener,
                  where, ends[0]);
        }
        if (t->type == T_DATA) {
            jnode *x = jnode_new(P, N_TEXT, t->pos);
            x->lit = jv_obj(JV_STR, (jobj *)jpstr(P, t->s, t->n));
            jnpush(P, &v, x, NULL);
            adv(P);
        } else if (t->type == T_VAR_BEGIN) {
            adv(P);
            jnode *x = jnode_new(P, N_OUTPUT, t->pos);
            x->a = jparse_tuple(P, 0, 1, NULL, 0);
            expect_type(P, T_VAR_END, "end of print statement ('}}')");
            jnpush(P, &v, x, NULL);
        } else if (t->type == T_BLOCK_BEGIN) {
            adv(P);
            jtok *name = cur(P);
            int is_end = 0;
            for (int k = 0; ends && ends[k]; k++)
                if (is_name(name, ends[k])) is_end = 1;
            if (is_end) break;
            if (name->type == T_NAME && name->n > 3 && !memcmp(name->s, "end", 3)) {
                if (ends)
                    jpfail(P, name->pos, "unexpected '%.*s' (the innermost open block is '%s', closed by '%s')",
                          (int)(name->n > 40 ? 40 : name->n), name->s, opener, ends[0]);
                jpfail(P, name->pos, "unexpected '%.*s': no open block to close", (int)(name->n > 40 ? 40 : name->n), name->s);
            }
            if (is_name(name, "else") || is_name(name, "elif"))
                jpfail(P, name->pos, "unexpected '%.*s' outside an if or for block", (int)name->n, name->s);
            jnpush(P, &v, parse_statement(P), NULL);
        } else {
            junexpected(P, NULL);
        }
    }
    body->v = v.v;
    body->nv = v.n;
    LEAVE(P);
    return body;
}

/* ---- entry ------------------------------------------------------------------------------------ */

jstr *jstr_immortal(struct jarena *a, const char *s, size_t n) {
    jstr *j = jarena_alloc(a, sizeof *j + n + 1);
    if (!j) return NULL;
    j->h.refs = -1;
    j->h.type = JV_STR;
    j->len = n;
    if (n) memcpy(j->s, s, n);
    j->s[n] = 0;
    jstr_hash(j);
    return j;
}

/* Unknown filters and tests: an error when the template is read, except
 * inside an if statement or a conditional expression (at the same level:
 * not in a loop, macro or block inside it), where Jinja2 3 only fails when
 * the filter or test is run (Jinja2's "soft" frames); the evaluator then
 * fails on id -1. */
static void check_names(jparser *P, const jnode *n, int soft) {
    if (!n) return;
    if (++P->depth > JP_MAX_DEPTH * 4) jpfail(P, n->pos, "the template nests too deeply");
    int inner = 0, here = soft;
    switch (n->kind) {
    case N_FILTER:
        if (n->id < 0 && !soft) jpfail(P, n->pos, "no filter named '%s'", n->name->s);
        break;
    case N_TEST:
        if (n->id < 0 && !soft) jpfail(P, (uint32_t)n->lit.u.i, "no test named '%s'", n->name->s);
        break;
    case N_IF: case N_COND:
        here = 1;
        break;
    case N_FOR:
        check_names(P, n->b, soft);
        check_names(P, n->c, 0);
        check_names(P, n->d, 0);
        for (int i = 0; i < n->nw; i++) check_names(P, n->w[i], 0);
        P->depth--;
        return;
    case N_MACRO: case N_CALLBLOCK: case N_SETBLOCK: case N_FILTERBLOCK:
        inner = 1;
        break;
    case N_WITH:                             /* the values in this frame, the body in its own */
        for (int i = 0; i < n->nw; i++) check_names(P, n->w[i], soft);
        check_names(P, n->b, 0);
        P->depth--;
        return;
    default:
        break;
    }
    if (n->kind == N_CALLBLOCK) check_names(P, n->a, soft);
    else check_names(P, n->a, inner ? 0 : here);
    check_names(P, n->b, inner ? 0 : here);
    check_names(P, n->c, inner ? 0 : here);
    check_names(P, n->d, inner ? 0 : here);
    for (int i = 0; i < n->nv; i++) check_names(P, n->v[i], inner ? 0 : here);
    for (int i = 0; i < n->nw; i++) check_names(P, n->w[i], inner ? 0 : here);
    P->depth--;
}

static int parse_guarded(jparser *P) {
    if (setjmp(P->fail)) return 1;
    jlex(P);
    P->t->root = parse_body(P, NULL, NULL, 0);
    P->depth = 0;
    check_names(P, P->t->root, 0);
    return 0;
}

int jparse(pk_jinja *t, int flags, pk_error *err) {
    jparser *P = calloc(1, sizeof *P);       /* on the heap: read after a longjmp */
    if (!P) return pk_errorf(err, PK_ERR_NOMEM, "out of memory reading a template");
    P->t = t;
    P->src = t->src;
    P->len = t->len;
    P->a = t->arena;
    P->err = err;
    P->trim_blocks = P->lstrip_blocks = !(flags & PK_JINJA_PLAIN_BLOCKS);
    int failed = parse_guarded(P);
    free(P->tok);
    free(P);
    if (failed) return err->code ? err->code : PK_ERR_FORMAT;
    return PK_OK;
}
