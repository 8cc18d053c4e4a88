/* text/jinja_parse_expr.c - the expressions of the Jinja engine's parser
 * (text/jinja_parse.c), recursive descent with Jinja2's precedence:
 * conditional expression < or < and < not < comparisons (chained, in, not
 * in) < + - < ~ < * / // % < ** < unary - + < postfix (.attr, [index],
 * [a:b:c], call) < filters and tests. */
#include <string.h>

#include "text/jinja_parse_int.h"

/* ---- expressions ------------------------------------------------------------------------------ */

static jnode *parse_or(jparser *P);
static jnode *parse_unary(jparser *P, int with_filter);
static jnode *parse_primary(jparser *P);
static jnode *parse_postfix(jparser *P, jnode *n);
static jnode *parse_filter_expr(jparser *P, jnode *n);

static int is_tuple_end(jparser *P, const char *extra) {
    jtok *t = cur(P);
    if (t->type == T_VAR_END || t->type == T_BLOCK_END || t->type == T_EOF || is_op(t, ')')) return 1;
    return extra && is_name(t, extra);
}

/* Jinja2's parse_tuple: one expression, or a tuple of them separated by commas. */
jnode *jparse_tuple(jparser *P, int simplified, int with_condexpr, const char *extra, int explicit_parens) {
    uint32_t pos = cur(P)->pos;
    nvec items = {0};
    int is_tuple = 0;
    for (;;) {
        if (items.n) jexpect_op(P, ',', "','");
        if (is_tuple_end(P, extra)) break;
        jnode *x = simplified ? parse_primary(P) : with_condexpr ? jparse_expression(P) : parse_or(P);
        jnpush(P, &items, x, NULL);
        if (is_op(cur(P), ',')) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) junexpected(P, "an expression");
    }
    jnode *n = jnode_new(P, N_TUPLE, pos);
    n->v = items.v;
    n->nv = items.n;
    return n;
}

static jnode *parse_condexpr(jparser *P) {
    ENTER(P);
    jnode *e1 = parse_or(P);
    while (is_name(cur(P), "if")) {
        uint32_t pos = cur(P)->pos;
        adv(P);
        jnode *test = parse_or(P), *e3 = NULL;
        if (is_name(cur(P), "else")) { adv(P); e3 = parse_condexpr(P); }
        jnode *n = jnode_new(P, N_COND, pos);
        n->a = test;
        n->b = e1;
        n->c = e3;
        e1 = n;
    }
    LEAVE(P);
    return e1;
}

jnode *jparse_expression(jparser *P) { return parse_condexpr(P); }

static jnode *parse_and(jparser *P);
static jnode *parse_or(jparser *P) {
    jnode *l = parse_and(P);
    while (is_name(cur(P), "or")) {
        jnode *n = jnode_new(P, N_OR, cur(P)->pos);
        adv(P);
        n->a = l;
        n->b = parse_and(P);
        l = n;
    }
    return l;
}

static jnode *parse_not(jparser *P);
static jnode *parse_and(jparser *P) {
    jnode *l = parse_not(P);
    while (is_name(cur(P), "and")) {
        jnode *n = jnode_new(P, N_AND, cur(P)->pos);
        adv(P);
        n->a = l;
        n->b = parse_not(P);
        l = n;
    }
    return l;
}

static jnode *parse_compare(jparser *P);
static jnode *parse_not(jparser *P) {
    if (is_name(cur(P), "not")) {
        ENTER(P);
        jnode *n = jnode_new(P, N_NOT, cur(P)->pos);
        adv(P);
        n->a = parse_not(P);
        LEAVE(P);
        return n;
    }
    return parse_compare(P);
}

static jnode *parse_math1(jparser *P);
static jnode *parse_compare(jparser *P) {
    uint32_t pos = cur(P)->pos;
    jnode *e = parse_math1(P);
    nvec ops = {0};
    for (;;) {
        jtok *t = cur(P);
        int op = -1;
        if (t->type == T_OP) {
            switch (t->op) {
            case 'E': op = OP_EQ; break;
            case 'N': op = OP_NE; break;
            case '<': op = OP_LT; break;
            case 'L': op = OP_LE; break;
            case '>': op = OP_GT; break;
            case 'G': op = OP_GE; break;
            default: break;
            }
            if (op >= 0) adv(P);
        } else if (is_name(t, "in")) {
            op = OP_IN;
            adv(P);
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = OP_NOTIN;
            adv(P);
            adv(P);
        }
        if (op < 0) break;
        jnode *o = jnode_new(P, N_BINARY, t->pos);
        o->op = (uint8_t)op;
        o->a = parse_math1(P);
        jnpush(P, &ops, o, NULL);
    }
    if (!ops.n) return e;
    jnode *n = jnode_new(P, N_COMPARE, pos);
    n->a = e;
    n->v = ops.v;
    n->nv = ops.n;
    return n;
}

static jnode *binary(jparser *P, int op, uint32_t pos, jnode *a, jnode *b) {
    jnode *n = jnode_new(P, N_BINARY, pos);
    n->op = (uint8_t)op;
    n->a = a;
    n->b = b;
    return n;
}

static jnode *parse_concat(jparser *P);
static jnode *parse_math1(jparser *P) {
    jnode *l = parse_concat(P);
    while (is_op(cur(P), '+') || is_op(cur(P), '-')) {
        jtok *t = cur(P);
        adv(P);
        l = binary(P, t->op == '+' ? OP_ADD : OP_SUB, t->pos, l, parse_concat(P));
    }
    return l;
}

static jnode *parse_math2(jparser *P);
static jnode *parse_concat(jparser *P) {
    jnode *l = parse_math2(P);
    while (is_op(cur(P), '~')) {
        jtok *t = cur(P);
        adv(P);
        l = binary(P, OP_CONCAT, t->pos, l, parse_math2(P));
    }
    return l;
}

static jnode *parse_pow(jparser *P);
static jnode *parse_math2(jparser *P) {
    jnode *l = parse_pow(P);
    for (;;) {
        jtok *t = cur(P);
        int op = is_op(t, '*') ? OP_MUL : is_op(t, '/') ? OP_DIV : is_op(t, 'F') ? OP_FLOORDIV : is_op(t, '%') ? OP_MOD : -1;
        if (op < 0) break;
        adv(P);
        l = binary(P, op, t->pos, l, parse_pow(P));
    }
    return l;
}

static jnode *parse_pow(jparser *P) {
    jnode *l = parse_unary(P, 1);
    while (is_op(cur(P), 'P')) {
        jtok *t = cur(P);
        adv(P);
        l = binary(P, OP_POW, t->pos, l, parse_unary(P, 1));
    }
    return l;
}

static jnode *parse_unary(jparser *P, int with_filter) {
    ENTER(P);
    jtok *t = cur(P);
    jnode *n;
    if (is_op(t, '-') || is_op(t, '+')) {
        adv(P);
        n = jnode_new(P, N_UNARY, t->pos);
        n->op = t->op == '-' ? OP_NEG : OP_POS;
        n->a = parse_unary(P, 0);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    LEAVE(P);
    return n;
}

static jnode *constant(jparser *P, uint32_t pos, jv v) {
    jnode *n = jnode_new(P, N_CONST, pos);
    n->lit = v;
    return n;
}

static void note_name(jparser *P, const jtok *t) {
    if (!P->macro) return;
    if (is_name(t, "varargs")) P->macro->flags |= JM_VARARGS;
    else if (is_name(t, "kwargs")) P->macro->flags |= JM_KWARGS;
    else if (is_name(t, "caller")) P->macro->flags |= JM_CALLER;
}

static jnode *parse_primary(jparser *P) {
    ENTER(P);
    jtok *t = cur(P);
    jnode *n;
    switch (t->type) {
    case T_NAME:
        if (is_name(t, "true") || is_name(t, "True")) n = constant(P, t->pos, jv_bool(1));
        else if (is_name(t, "false") || is_name(t, "False")) n = constant(P, t->pos, jv_bool(0));
        else if (is_name(t, "none") || is_name(t, "None")) n = constant(P, t->pos, jv_none());
        else {
            n = jnode_new(P, N_NAME, t->pos);
            n->name = jpstr(P, t->s, t->n);
            n->id = jglobal_id(t->s, t->n);
            note_name(P, t);
        }
        adv(P);
        break;
    case T_STRING: {
        size_t total = 0, k = 0;
        for (size_t j = P->i; P->tok[j].type == T_STRING; j++) total += P->tok[j].n;
        char *b = jpalloc(P, total + 1);
        while (cur(P)->type == T_STRING) {
            memcpy(b + k, cur(P)->s, cur(P)->n);
            k += cur(P)->n;
            adv(P);
        }
        n = constant(P, t->pos, jv_obj(JV_STR, (jobj *)jpstr(P, b, k)));
        break;
    }
    case T_INT: n = constant(P, t->pos, jv_int(t->i)); adv(P); break;
    case T_FLOAT: n = constant(P, t->pos, jv_float(t->f)); adv(P); break;
    case T_OP:
        if (t->op == '(') {
            adv(P);
            n = jparse_tuple(P, 0, 1, NULL, 1);
            jexpect_op(P, ')', "')'");
            break;
        }
        if (t->op == '[') {
            adv(P);
            nvec items = {0};
            while (!is_op(cur(P), ']')) {
                if (items.n) jexpect_op(P, ',', "','");
                if (is_op(cur(P), ']')) break;
                jnpush(P, &items, jparse_expression(P), NULL);
            }
            jexpect_op(P, ']', "']'");
            n = jnode_new(P, N_LIST, t->pos);
            n->v = items.v;
            n->nv = items.n;
            break;
        }
        if (t->op == '{') {
            adv(P);
            nvec keys = {0}, vals = {0};
            while (!is_op(cur(P), '}')) {
                if (keys.n) jexpect_op(P, ',', "','");
                if (is_op(cur(P), '}')) break;
                jnpush(P, &keys, jparse_expression(P), NULL);
                jexpect_op(P, ':', "':'");
                jnpush(P, &vals, jparse_expression(P), NULL);
            }
            jexpect_op(P, '}', "'}'");
            n = jnode_new(P, N_DICT, t->pos);
            n->v = keys.v;
            n->nv = keys.n;
            n->w = vals.v;
            n->nw = vals.n;
            break;
        }
        junexpected(P, NULL);
    default:
        junexpected(P, NULL);
    }
    LEAVE(P);
    return n;
}

/* (args) of a call, filter or test into n->v (positional) and n->w / n->kw. */
static void parse_args(jparser *P, jnode *n) {
    jexpect_op(P, '(', "'('");
    nvec pos = {0}, kw = {.kw_on = 1};
    while (!is_op(cur(P), ')')) {
        if (pos.n || kw.n) jexpect_op(P, ',', "','");
        if (is_op(cur(P), ')')) break;
        if (is_op(cur(P), '*') || is_op(cur(P), 'P'))
            jpfail(P, cur(P)->pos, "*args and **kwargs in calls are not supported");
        if (cur(P)->type == T_NAME && is_op(peek(P, 1), '=')) {
            const jstr *name = jpstr(P, cur(P)->s, cur(P)->n);
            adv(P);
            adv(P);
            jnpush(P, &kw, jparse_expression(P), name);
        } else {
            if (kw.n) jpfail(P, cur(P)->pos, "a positional argument after a keyword argument");
            jnpush(P, &pos, jparse_expression(P), NULL);
        }
    }
    jexpect_op(P, ')', "')'");
    n->v = pos.v;
    n->nv = pos.n;
    n->w = kw.v;
    n->nw = kw.n;
    n->kw = kw.kw;
}

static jnode *parse_subscribed(jparser *P) {
    uint32_t pos = cur(P)->pos;
    jnode *parts[3] = {NULL, NULL, NULL};
    if (is_op(cur(P), ':')) {
        adv(P);
    } else {
        jnode *e = jparse_expression(P);
        if (!is_op(cur(P), ':')) return e;
        adv(P);
        parts[0] = e;
    }
    if (!is_op(cur(P), ':') && !is_op(cur(P), ']') && !is_op(cur(P), ',')) parts[1] = jparse_expression(P);
    if (is_op(cur(P), ':')) {
        adv(P);
        if (!is_op(cur(P), ']') && !is_op(cur(P), ',')) parts[2] = jparse_expression(P);
    }
    jnode *n = jnode_new(P, N_SLICE, pos);
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    return n;
}

static jnode *parse_postfix(jparser *P, jnode *n) {
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, '.')) {
            adv(P);
            jtok *a = cur(P);
            if (a->type == T_NAME) {
                jnode *x = jnode_new(P, N_ATTR, a->pos);
                x->a = n;
                x->name = jpstr(P, a->s, a->n);
                adv(P);
                n = x;
            } else if (a->type == T_INT) {
                jnode *x = jnode_new(P, N_INDEX, a->pos);
                x->a = n;
                x->b = constant(P, a->pos, jv_int(a->i));
                adv(P);
                n = x;
            } else {
                junexpected(P, "a name or number after '.'");
            }
        } else if (is_op(t, '[')) {
            adv(P);
            nvec args = {0};
            while (!is_op(cur(P), ']')) {
                if (args.n) jexpect_op(P, ',', "','");
                jnpush(P, &args, parse_subscribed(P), NULL);
            }
            jexpect_op(P, ']', "']'");
            if (!args.n) jpfail(P, t->pos, "an empty subscript []");
            jnode *key;
            if (args.n == 1) key = args.v[0];
            else {
                for (int i = 0; i < args.n; i++)
                    if (args.v[i]->kind == N_SLICE) jpfail(P, args.v[i]->pos, "a slice inside a tuple subscript is not supported");
                key = jnode_new(P, N_TUPLE, t->pos);
                key->v = args.v;
                key->nv = args.n;
            }
            if (key->kind == N_SLICE) {
                key->a = n;
                n = key;
            } else {
                jnode *x = jnode_new(P, N_INDEX, t->pos);
                x->a = n;
                x->b = key;
                n = x;
            }
        } else if (is_op(t, '(')) {
            jnode *x = jnode_new(P, N_CALL, n->pos);
            x->a = n;
            parse_args(P, x);
            n = x;
        } else {
            return n;
        }
    }
}

static const jstr *dotted_name(jparser *P) {
    jtok *t = cur(P);
    if (t->type != T_NAME) junexpected(P, "a name");
    const char *s = t->s;
    size_t n = t->n;
    adv(P);
    char buf[256];
    if (n >= sizeof buf) jpfail(P, t->pos, "a name too long");
    memcpy(buf, s, n);
    while (is_op(cur(P), '.') && peek(P, 1)->type == T_NAME) {
        jtok *x = peek(P, 1);
        if (n + 1 + x->n >= sizeof buf) jpfail(P, t->pos, "a name too long");
        buf[n++] = '.';
        memcpy(buf + n, x->s, x->n);
        n += x->n;
        adv(P);
        adv(P);
    }
    return jpstr(P, buf, n);
}

/* A filter applied to n (NULL for {% filter %} blocks and {% set x | f %}). */
jnode *jparse_filter(jparser *P, jnode *n) {
    uint32_t pos = cur(P)->pos;
    const jstr *name = dotted_name(P);
    jnode *f = jnode_new(P, N_FILTER, pos);
    f->a = n;
    f->name = name;
    f->id = jfilter_id(name->s, name->len);       /* -1: checked by check_names */
    if (is_op(cur(P), '(')) parse_args(P, f);
    return f;
}

static jnode *parse_test(jparser *P, jnode *n) {
    uint32_t pos = cur(P)->pos;
    adv(P);                                   /* is */
    int negated = 0;
    if (is_name(cur(P), "not")) { negated = 1; adv(P); }
    uint32_t npos = cur(P)->pos;
    const jstr *name = dotted_name(P);
    jnode *t = jnode_new(P, N_TEST, pos);
    t->a = n;
    t->name = name;
    t->flags = (uint8_t)negated;
    t->id = jtest_id(name->s, name->len);         /* -1: checked by check_names */
    t->lit = jv_int(npos);
    jtok *c = cur(P);
    if (is_op(c, '(')) {
        parse_args(P, t);
    } else if ((c->type == T_NAME || c->type == T_STRING || c->type == T_INT || c->type == T_FLOAT ||
                is_op(c, '(') || is_op(c, '[') || is_op(c, '{')) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) jpfail(P, c->pos, "you cannot chain multiple tests with is");
        jnode *arg = parse_postfix(P, parse_primary(P));
        t->v = jpalloc(P, sizeof *t->v);
        t->v[0] = arg;
        t->nv = 1;
    }
    return t;
}

static jnode *parse_filter_expr(jparser *P, jnode *n) {
    for (;;) {
        jtok *t = cur(P);
        if (is_op(t, '|')) {
            adv(P);
            n = jparse_filter(P, n);
        } else if (is_name(t, "is")) {
            n = parse_test(P, n);
        } else if (is_op(t, '(')) {
            jnode *x = jnode_new(P, N_CALL, t->pos);
            x->a = n;
            parse_args(P, x);
            n = x;
        } else {
            return n;
        }
    }
}
