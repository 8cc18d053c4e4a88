/* text/jinja.c - the evaluator of the Jinja engine: a template's syntax tree
 * (text/jinja_parse.c) run over values (text/jinja_value.c) with Jinja2's
 * semantics, and the public entry points pk_jinja_parse / pk_jinja_render.
 * Here are scopes, calls, expressions and statements; attributes, items,
 * iteration and the operators are text/jinja_ops.c.
 *
 * Scopes as Jinja2 has them: the template's top level is one scope (an
 * {% if %} opens none); each iteration of a for loop opens a fresh scope
 * (so a {% set %} inside a loop is gone at the next iteration and after the
 * loop - what namespace() is for); a macro call opens a scope whose parent
 * is the scope the macro was defined in (looked up when read, so a macro
 * sees top-level variables set after its definition); {% with %} opens one.
 * Names not found in any scope are the globals (range, namespace, dict,
 * raise_exception, strftime_now), then undefined.
 *
 * Undefined values behave as Jinja2's default Undefined: printed as '',
 * false, iterable and empty, `is defined` false, equal only to another
 * undefined; reading an attribute of one, calling it or doing arithmetic
 * with it is an error naming what was undefined. Attributes of None, numbers
 * and strings that do not exist are undefined (not errors), as in Jinja2.
 *
 * Limits (pk_jinja_params): evaluation steps (every expression and statement
 * is one), nesting depth (macro recursion), output bytes and memory; each
 * ends the render with an error naming the template line, as any runtime
 * error does. Errors unwind with longjmp; the render's registry
 * (jinja_value.c) frees everything allocated on the way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/jinja_internal.h"

#define JINJA_MAX_SOURCE (64u << 20)

enum { X_NORMAL, X_BREAK, X_CONTINUE };

static int exec_body(jrender *r, jdict *sc, const jnode *body);
static jv capture(jrender *r, jdict *sc, const jnode *body);

/* ---- scopes ------------------------------------------------------------------------------ */

static jdict *scope_new(jrender *r, jdict *parent) {
    jdict *s = jdict_new(r, JV_DICT);
    if (parent) {
        parent->h.refs++;
        s->parent = parent;
    }
    return s;
}

static void scope_free(jrender *r, jdict *s) { jv_unref(r, jv_obj(JV_DICT, s)); }

static jv *scope_find(jdict *sc, const jstr *name) {
    for (; sc; sc = sc->parent) {
        jv *p = jdict_get_str(sc, name);
        if (p) return p;
    }
    return NULL;
}

static void scope_set(jrender *r, const jnode *at, jdict *sc, const jstr *name, jv v) {
    jdict_set(r, at, sc, jv_obj(JV_STR, (jobj *)name), v);     /* name: immortal */
}

/* ---- calls ---------------------------------------------------------------------------------- */

static jv call_macro(jrender *r, const jnode *at, jmacro *m, const jargs *a, jv caller) {
    const jnode *def = m->def;
    const char *mname = def->name ? def->name->s : "caller";
    jdict *sc = scope_new(r, m->closure);
    int np = def->nv;
    unsigned char *bound = jmalloc(r, (size_t)np + 1);
    memset(bound, 0, (size_t)np + 1);
    jlist *varargs = NULL;
    jdict *kwargs = NULL;
    if (def->flags & JM_VARARGS) varargs = jlist_new(r, JL_TUPLE, 0);
    if (def->flags & JM_KWARGS) kwargs = jdict_new(r, JV_DICT);
    for (int i = 0; i < a->npos; i++) {
        if (i < np) {
            scope_set(r, at, sc, def->v[i]->name, jv_ref(a->pos[i]));
            bound[i] = 1;
        } else if (varargs) {
            jlist_push(r, varargs, jv_ref(a->pos[i]));
        } else {
            jfail(r, at, "macro '%s' takes not more than %d argument(s)", mname, np);
        }
    }
    for (int k = 0; k < a->nkw; k++) {
        int j = -1;
        for (int i = 0; i < np; i++)
            if (def->v[i]->name->len == a->kwn[k]->len && !memcmp(def->v[i]->name->s, a->kwn[k]->s, a->kwn[k]->len)) j = i;
        if (j >= 0) {
            if (bound[j]) jfail(r, at, "macro '%s' got multiple values for argument '%s'", mname, a->kwn[k]->s);
            scope_set(r, at, sc, def->v[j]->name, jv_ref(a->kwv[k]));
            bound[j] = 1;
        } else if (kwargs) {
            jdict_set(r, at, kwargs, jv_obj(JV_STR, (jobj *)a->kwn[k]), jv_ref(a->kwv[k]));
        } else {
            jfail(r, at, "macro '%s' takes no keyword argument '%s'", mname, a->kwn[k]->s);
        }
    }
    for (int i = 0; i < np; i++) {
        if (bound[i]) continue;
        jv d = def->w[i] ? jeval(r, sc, def->w[i]) : jundef_of(JU_NAME, 0, def->v[i]->name);
        scope_set(r, at, sc, def->v[i]->name, d);
    }
    jfree(r, bound);
    if (varargs) scope_set(r, at, sc, r->t->n_varargs, jv_obj(JV_LIST, varargs));
    if (kwargs) scope_set(r, at, sc, r->t->n_kwargs, jv_obj(JV_DICT, kwargs));
    if (caller.t == JV_MACRO) scope_set(r, at, sc, r->t->n_caller, jv_ref(caller));
    jv out = capture(r, sc, def->b);
    scope_free(r, sc);
    return out;
}

jv jcall_value(jrender *r, const jnode *at, jv f, jv *args, int nargs, const jstr **kwn, jv *kwv, int nkw) {
    jargs a = {.pos = args, .npos = nargs, .kwn = kwn, .kwv = kwv, .nkw = nkw};
    switch (f.t) {
    case JV_UNDEF:
        jfail_undef(r, at, f);
    case JV_FUNC:
        return jglobal_call(r, at, f.aux, &a);
    case JV_METHOD:
        return jmethod_call(r, at, (jmethod *)f.u.o, &a);
    case JV_MACRO:
        return call_macro(r, at, (jmacro *)f.u.o, &a, jv_undef());
    case JV_LOOP:
        jfail(r, at, "loop() (recursive for loops) is not supported");
    default:
        jfail(r, at, "'%s' object is not callable", jv_type_name(f));
    }
}

/* Evaluate the arguments of n (a call, filter or test node). */
static void eval_args(jrender *r, jdict *sc, const jnode *n, jargs *a) {
    a->npos = n->nv;
    a->nkw = n->nw;
    a->pos = jmalloc(r, (size_t)(a->npos + a->nkw + 1) * sizeof(jv));
    a->kwv = a->pos + a->npos;
    a->kwn = n->kw;
    for (int i = 0; i < n->nv; i++) a->pos[i] = jeval(r, sc, n->v[i]);
    for (int i = 0; i < n->nw; i++) a->kwv[i] = jeval(r, sc, n->w[i]);
}

static void free_args(jrender *r, jargs *a) {
    for (int i = 0; i < a->npos; i++) jv_unref(r, a->pos[i]);
    for (int i = 0; i < a->nkw; i++) jv_unref(r, a->kwv[i]);
    jfree(r, a->pos);
}

/* ---- expressions ------------------------------------------------------------------------------ */

static jv build_macro(jrender *r, const jnode *def, jdict *closure) {
    jmacro *m = jmalloc(r, sizeof *m);
    m->h.refs = 1;
    m->h.type = JV_MACRO;
    m->def = def;
    m->closure = closure;
    closure->h.refs++;
    return jv_obj(JV_MACRO, m);
}

/* A call, filter or test: its operand (n->a) and arguments evaluated, then applied. */
_Noreturn static void unknown_name(jrender *r, const jnode *n) {
    jfail(r, n, "no %s named '%s'", n->kind == N_FILTER ? "filter" : "test", n->name->s);
}

static jv apply_node(jrender *r, jdict *sc, const jnode *n) {
    if (n->kind != N_CALL && n->id < 0) unknown_name(r, n);
    jv x = jeval(r, sc, n->a);
    jargs a;
    eval_args(r, sc, n, &a);
    jv v;
    if (n->kind == N_CALL) {
        v = jcall_value(r, n, x, a.pos, a.npos, a.kwn, a.kwv, a.nkw);
    } else if (n->kind == N_FILTER) {
        v = jfilter_apply(r, sc, n, n->id, x, &a);
    } else {
        int t = jtest_apply(r, n, n->id, x, &a);
        v = jv_bool(n->flags ? !t : t);
    }
    free_args(r, &a);
    jv_unref(r, x);
    return v;
}

static jv eval_inner(jrender *r, jdict *sc, const jnode *n) {
    switch (n->kind) {
    case N_CONST:
        return n->lit;
    case N_NAME: {
        jv *p = scope_find(sc, n->name);
        if (p) return jv_ref(*p);
        if (n->id >= 0) { jv f = {.t = JV_FUNC}; f.aux = (uint16_t)n->id; return f; }
        return jundef_of(JU_NAME, 0, n->name);
    }
    case N_ATTR: {
        jv o = jeval(r, sc, n->a);
        jv v = jget_attr(r, n, o, n->name);
        jv_unref(r, o);
        return v;
    }
    case N_INDEX: {
        jv o = jeval(r, sc, n->a), k = jeval(r, sc, n->b);
        jv v = jget_item(r, n, o, k);
        jv_unref(r, o);
        jv_unref(r, k);
        return v;
    }
    case N_SLICE: {
        jv o = jeval(r, sc, n->a);
        jv a = n->b ? jeval(r, sc, n->b) : jv_none(), b = n->c ? jeval(r, sc, n->c) : jv_none(),
           c = n->d ? jeval(r, sc, n->d) : jv_none();
        jv v = jdo_slice(r, n, o, a, b, c);
        jv_unref(r, o);
        jv_unref(r, a);
        jv_unref(r, b);
        jv_unref(r, c);
        return v;
    }
    case N_CALL: case N_FILTER: case N_TEST:
        return apply_node(r, sc, n);
    case N_UNARY: {
        jv x = jeval(r, sc, n->a);
        if (x.t == JV_UNDEF) jfail_undef(r, n, x);
        if (n->op == OP_POS) {
            if (!jv_is_num(x)) jfail(r, n, "bad operand type for unary +: '%s'", jv_type_name(x));
            return x.t == JV_BOOL ? jv_int(x.u.i) : x;
        }
        if (x.t == JV_FLOAT) return jv_float(-x.u.f);
        if (x.t == JV_INT || x.t == JV_BOOL) {
            if (x.u.i == INT64_MIN) joverflow(r, n);
            return jv_int(-x.u.i);
        }
        jfail(r, n, "bad operand type for unary -: '%s'", jv_type_name(x));
    }
    case N_BINARY: {
        jv a = jeval(r, sc, n->a), b = jeval(r, sc, n->b);
        jv v = jbinop(r, n, n->op, a, b);
        jv_unref(r, a);
        jv_unref(r, b);
        return v;
    }
    case N_AND: {
        jv a = jeval(r, sc, n->a);
        if (!jv_truthy(a)) return a;
        jv_unref(r, a);
        return jeval(r, sc, n->b);
    }
    case N_OR: {
        jv a = jeval(r, sc, n->a);
        if (jv_truthy(a)) return a;
        jv_unref(r, a);
        return jeval(r, sc, n->b);
    }
    case N_NOT: {
        jv a = jeval(r, sc, n->a);
        int t = jv_truthy(a);
        jv_unref(r, a);
        return jv_bool(!t);
    }
    case N_COMPARE: {
        jv l = jeval(r, sc, n->a);
        for (int i = 0; i < n->nv; i++) {
            jv x = jeval(r, sc, n->v[i]->a);
            int ok = jcompare(r, n->v[i], n->v[i]->op, l, x);
            jv_unref(r, l);
            l = x;
            if (!ok) {
                jv_unref(r, l);
                return jv_bool(0);
            }
        }
        jv_unref(r, l);
        return jv_bool(1);
    }
    case N_COND: {
        jv t = jeval(r, sc, n->a);
        int yes = jv_truthy(t);
        jv_unref(r, t);
        if (yes) return jeval(r, sc, n->b);
        return n->c ? jeval(r, sc, n->c) : jv_undef();
    }
    case N_LIST: case N_TUPLE: {
        jlist *l = jlist_new(r, n->kind == N_LIST ? JL_LIST : JL_TUPLE, (size_t)n->nv);
        jv lv = jv_obj(JV_LIST, l);
        for (int i = 0; i < n->nv; i++) jlist_push(r, l, jeval(r, sc, n->v[i]));
        return lv;
    }
    case N_DICT: {
        jdict *d = jdict_new(r, JV_DICT);
        jv dv = jv_obj(JV_DICT, d);
        for (int i = 0; i < n->nv; i++) {
            jv k = jeval(r, sc, n->v[i]);
            jv v = jeval(r, sc, n->w[i]);
            jdict_set(r, n->v[i], d, k, v);
        }
        return dv;
    }
    default:
        jfail(r, n, "internal error: node kind %d is not an expression", n->kind);
    }
}

jv jeval(jrender *r, jdict *sc, const jnode *n) {
    r->cur = n;
    if (++r->steps > r->max_steps)
        jfail(r, n, "the render took more than %llu steps (a runaway loop?)", (unsigned long long)r->max_steps);
    if (++r->depth > r->max_depth) jfail(r, n, "evaluation nested more than %d deep (runaway recursion?)", r->max_depth);
    jv v = eval_inner(r, sc, n);
    r->depth--;
    return v;
}

/* ---- statements ------------------------------------------------------------------------------- */

static void assign(jrender *r, jdict *sc, const jnode *target, jv v) {
    if (target->kind == N_NAME) {
        scope_set(r, target, sc, target->name, v);
        return;
    }
    if (target->kind == N_ATTR) {
        jv *ns = scope_find(sc, target->a->name);
        if (!ns || ns->t != JV_NS) {
            jv_unref(r, v);
            jfail(r, target, "cannot assign attribute on non-namespace object");
        }
        jdict_set(r, target, jv_dict(*ns), jv_obj(JV_STR, (jobj *)target->name), v);
        return;
    }
    /* a tuple of names: unpack */
    jlist *l = jiter_list(r, target, v);
    jv lv = jv_obj(JV_LIST, l);
    if ((int)l->n != target->nv) {
        if ((int)l->n < target->nv)
            jfail(r, target, "not enough values to unpack (expected %d, got %zu)", target->nv, l->n);
        jfail(r, target, "too many values to unpack (expected %d)", target->nv);
    }
    for (int i = 0; i < target->nv; i++) assign(r, sc, target->v[i], jv_ref(l->v[i]));
    jv_unref(r, lv);
    jv_unref(r, v);
}

/* The filter chain c applied to v (c's innermost operand is NULL: v). */
static jv apply_chain(jrender *r, jdict *sc, const jnode *c, jv v) {
    if (!c) return v;
    jv x = apply_chain(r, sc, c->a, v);
    if (c->id < 0) unknown_name(r, c);
    jargs a;
    eval_args(r, sc, c, &a);
    jv y = jfilter_apply(r, sc, c, c->id, x, &a);
    free_args(r, &a);
    jv_unref(r, x);
    return y;
}

static jv capture(jrender *r, jdict *sc, const jnode *body) {
    jbuf b = {0}, *saved = r->out;
    r->out = &b;
    exec_body(r, sc, body);
    r->out = saved;
    return jbuf_take(r, &b);
}

/* The output of body run in a scope of its own (block set, filter blocks). */
static jv capture_inner(jrender *r, jdict *sc, const jnode *body) {
    jdict *t = scope_new(r, sc);
    jv v = capture(r, t, body);
    scope_free(r, t);
    return v;
}

static int exec_for(jrender *r, jdict *sc, const jnode *n) {
    jv it = jeval(r, sc, n->b);
    jlist *seq = jiter_list(r, n->b, it);
    jv_unref(r, it);
    if (n->c) {                                   /* for x in xs if cond: filter first */
        jlist *kept = jlist_new(r, JL_LIST, 0);
        for (size_t i = 0; i < seq->n; i++) {
            jdict *t = scope_new(r, sc);
            assign(r, t, n->a, jv_ref(seq->v[i]));
            jv c = jeval(r, t, n->c);
            if (jv_truthy(c)) jlist_push(r, kept, jv_ref(seq->v[i]));
            jv_unref(r, c);
            scope_free(r, t);
        }
        jv_unref(r, jv_obj(JV_LIST, seq));
        seq = kept;
    }
    jloop *loop = jmalloc(r, sizeof *loop);
    memset(loop, 0, sizeof *loop);
    loop->h.refs = 1;
    loop->h.type = JV_LOOP;
    loop->seq = seq;                              /* takes seq's reference */
    jv lv = jv_obj(JV_LOOP, loop);
    const jstr *lname = r->t->n_loop;
    int ran = 0;
    for (size_t i = 0; i < seq->n; i++) {
        r->cur = n;
        jcharge(r, 1);
        jdict *t = scope_new(r, sc);
        assign(r, t, n->a, jv_ref(seq->v[i]));
        loop->i = i;
        scope_set(r, n, t, lname, jv_ref(lv));
        int c = exec_body(r, t, n->d);
        scope_free(r, t);
        ran = 1;
        if (c == X_BREAK) break;
    }
    if (!ran && n->flags) {
        jdict *t = scope_new(r, sc);
        jnode body = {.kind = N_BLOCK, .v = n->w, .nv = n->nw};
        exec_body(r, t, &body);
        scope_free(r, t);
    }
    jv_unref(r, lv);
    return X_NORMAL;
}

static int exec_stmt(jrender *r, jdict *sc, const jnode *n) {
    switch (n->kind) {
    case N_TEXT:
        jbuf_put(r, r->out, jv_str(n->lit)->s, jv_str(n->lit)->len);
        return X_NORMAL;
    case N_OUTPUT: {
        jv v = jeval(r, sc, n->a);
        jv_str_to(r, n, r->out, v);
        jv_unref(r, v);
        return X_NORMAL;
    }
    case N_IF: {
        for (const jnode *x = n; x;) {
            jv c = jeval(r, sc, x->a);
            int yes = jv_truthy(c);
            jv_unref(r, c);
            if (yes) return exec_body(r, sc, x->b);
            if (!x->c) return X_NORMAL;
            if (x->c->kind != N_IF) return exec_body(r, sc, x->c);
            x = x->c;
        }
        return X_NORMAL;
    }
    case N_FOR:
        return exec_for(r, sc, n);
    case N_SET:
        assign(r, sc, n->a, jeval(r, sc, n->b));
        return X_NORMAL;
    case N_SETBLOCK: {
        jv v = capture_inner(r, sc, n->b);
        assign(r, sc, n->a, apply_chain(r, sc, n->c, v));
        return X_NORMAL;
    }
    case N_MACRO:
        scope_set(r, n, sc, n->name, build_macro(r, n, sc));
        return X_NORMAL;
    case N_CALLBLOCK: {
        const jnode *call = n->a;
        jv f = jeval(r, sc, call->a);
        if (f.t != JV_MACRO) {
            if (f.t == JV_UNDEF) jfail_undef(r, call, f);
            jfail(r, call, "{%% call %%} needs a macro, not '%s'", jv_type_name(f));
        }
        jargs a;
        eval_args(r, sc, call, &a);
        jv caller = build_macro(r, n, sc);
        jv v = call_macro(r, call, (jmacro *)f.u.o, &a, caller);
        jv_unref(r, caller);
        free_args(r, &a);
        jv_unref(r, f);
        jv_str_to(r, n, r->out, v);
        jv_unref(r, v);
        return X_NORMAL;
    }
    case N_FILTERBLOCK: {
        jv v = apply_chain(r, sc, n->c, capture_inner(r, sc, n->b));
        jv_str_to(r, n, r->out, v);
        jv_unref(r, v);
        return X_NORMAL;
    }
    case N_WITH: {
        jdict *t = scope_new(r, sc);
        for (int i = 0; i < n->nv; i++) assign(r, t, n->v[i], jeval(r, sc, n->w[i]));
        int c = exec_body(r, t, n->b);
        scope_free(r, t);
        return c;
    }
    case N_BREAK:
        return X_BREAK;
    case N_CONTINUE:
        return X_CONTINUE;
    case N_BLOCK:
        return exec_body(r, sc, n);
    default:
        jfail(r, n, "internal error: node kind %d is not a statement", n->kind);
    }
}

static int exec_body(jrender *r, jdict *sc, const jnode *body) {
    if (++r->depth > r->max_depth) jfail(r, body, "nesting deeper than %d (runaway recursion?)", r->max_depth);
    int c = X_NORMAL;
    for (int i = 0; i < body->nv && c == X_NORMAL; i++) {
        r->cur = body->v[i];
        jcharge(r, 1);
        c = exec_stmt(r, sc, body->v[i]);
    }
    r->depth--;
    return c;
}

/* ---- entry points --------------------------------------------------------------------------- */

pk_jinja_params pk_jinja_default_params(void) {
    pk_jinja_params p = {
        .bos_token = NULL, .eos_token = NULL, .add_generation_prompt = -1, .now = 0,
        .max_output = 64u << 20, .max_memory = 256u << 20, .max_steps = 50000000, .max_depth = 400,
    };
    return p;
}

int pk_jinja_parse(const char *text, size_t len, int flags, pk_jinja **out, pk_error *err) {
    if (!out) return pk_errorf(err, PK_ERR_ARG, "pk_jinja_parse: no output pointer");
    *out = NULL;
    if (!text && len) return pk_errorf(err, PK_ERR_ARG, "pk_jinja_parse: no template text");
    if (len > JINJA_MAX_SOURCE)
        return pk_errorf(err, PK_ERR_ARG, "a template of %zu bytes is over pocket's limit of %u MiB", len,
                         JINJA_MAX_SOURCE >> 20);
    pk_jinja *t = calloc(1, sizeof *t);
    struct jarena *a = jarena_new();
    char *src = malloc(len + 1);
    if (!t || !a || !src) {
        free(t);
        free(a);
        free(src);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory reading a template of %zu bytes", len);
    }
    /* newlines as Jinja2 reads them: \r\n and \r are \n; one final \n is dropped */
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < len && text[i + 1] == '\n') i++;
        } else {
            src[n++] = text[i];
        }
    }
    if (n && src[n - 1] == '\n') n--;
    src[n] = 0;
    t->src = src;
    t->len = n;
    t->arena = a;
    t->n_loop = jstr_immortal(a, "loop", 4);
    t->n_varargs = jstr_immortal(a, "varargs", 7);
    t->n_kwargs = jstr_immortal(a, "kwargs", 6);
    t->n_caller = jstr_immortal(a, "caller", 6);
    if (!t->n_loop || !t->n_varargs || !t->n_kwargs || !t->n_caller) {
        pk_jinja_free(t);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory reading a template");
    }
    pk_error local = {0};
    int rc = jparse(t, flags, err ? err : &local);
    if (rc) {
        pk_jinja_free(t);
        return rc;
    }
    *out = t;
    return PK_OK;
}

void pk_jinja_free(pk_jinja *t) {
    if (!t) return;
    jarena_free(t->arena);
    free(t->src);
    free(t);
}

static void set_var(jrender *r, const char *name, jv v) {
    jv k = jv_cstr(r, name);
    jdict_set(r, NULL, r->root, k, v);
}

/* The render proper, between pk_jinja_render_vars's setjmp and its clean up. */
static void render(jrender *r, json_t *vars, const pk_jinja_params *p, jbuf *outb) {
    jinit(r);
    r->root = jdict_new(r, JV_DICT);
    if (vars) {
        const char *k;
        json_t *x;
        json_object_foreach(vars, k, x) set_var(r, k, jv_from_json(r, x, 0));
    }
    jv key = jv_cstr(r, "bos_token");
    if (p->bos_token && !jdict_get(r, r->root, key)) set_var(r, "bos_token", jv_cstr(r, p->bos_token));
    jv_unref(r, key);
    key = jv_cstr(r, "eos_token");
    if (p->eos_token && !jdict_get(r, r->root, key)) set_var(r, "eos_token", jv_cstr(r, p->eos_token));
    jv_unref(r, key);
    key = jv_cstr(r, "add_generation_prompt");
    if (p->add_generation_prompt >= 0) set_var(r, "add_generation_prompt", jv_bool(p->add_generation_prompt));
    else if (!jdict_get(r, r->root, key)) set_var(r, "add_generation_prompt", jv_bool(0));
    jv_unref(r, key);
    r->out = outb;
    exec_body(r, r->root, r->t->root);
}

/* 1 if the render failed (a longjmp to r->fail), else 0 */
static int render_guarded(jrender *r, json_t *vars, const pk_jinja_params *p, jbuf *outb) {
    if (setjmp(r->fail)) return 1;
    render(r, vars, p, outb);
    return 0;
}

int pk_jinja_render_vars(const pk_jinja *t, json_t *vars, const pk_jinja_params *p, char **out, size_t *out_len,
                         pk_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    if (!t || !out) return pk_errorf(err, PK_ERR_ARG, "pk_jinja_render: no template or no output pointer");
    if (vars && !json_is_object(vars)) return pk_errorf(err, PK_ERR_ARG, "pk_jinja_render: the variables are not a JSON object");
    static const pk_jinja_params none_given = {.add_generation_prompt = -1};
    const pk_jinja_params *dp = p ? p : &none_given;
    pk_jinja_params d = pk_jinja_default_params();
    /* on the heap: what the render sets must be read after its longjmp */
    jrender *r = calloc(1, sizeof *r);
    jbuf *outb = calloc(1, sizeof *outb);
    pk_error *local = calloc(1, sizeof *local);
    if (!r || !outb || !local) {
        free(r);
        free(outb);
        free(local);
        return pk_errorf(err, PK_ERR_NOMEM, "out of memory starting a template render");
    }
    r->t = t;
    r->err = err ? err : local;
    r->max_output = dp->max_output ? dp->max_output : d.max_output;
    r->max_mem = dp->max_memory ? dp->max_memory : d.max_memory;
    r->max_steps = dp->max_steps ? dp->max_steps : d.max_steps;
    r->max_depth = dp->max_depth > 0 ? dp->max_depth : d.max_depth;
    r->now = dp->now;
    int rc = PK_OK;
    if (render_guarded(r, vars, dp, outb)) {
        rc = r->err->code ? r->err->code : PK_ERR_FORMAT;
    } else {
        char *s = malloc(outb->n + 1);
        if (!s) {
            rc = pk_errorf(err, PK_ERR_NOMEM, "out of memory for a rendered template of %zu bytes", outb->n);
        } else {
            if (outb->n) memcpy(s, outb->p, outb->n);
            s[outb->n] = 0;
            if (out_len) *out_len = outb->n;
            *out = s;
        }
    }
    jsweep(r);
    free(r);
    free(outb);
    free(local);
    return rc;
}

int pk_jinja_render(const pk_jinja *t, const char *conversation, size_t len, const pk_jinja_params *p, char **out,
                    size_t *out_len, pk_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    json_t *vars;
    if (conversation && len) {
        json_error_t je;
        json_t *j = json_loadb(conversation, len, JSON_ALLOW_NUL, &je);
        if (!j) return pk_errorf(err, PK_ERR_FORMAT, "conversation: invalid JSON at line %d, column %d: %s", je.line,
                                 je.column, je.text);
        if (json_is_array(j)) {
            vars = json_object();
            if (!vars || json_object_set_new(vars, "messages", j)) {
                json_decref(vars);
                return pk_errorf(err, PK_ERR_NOMEM, "out of memory reading a conversation");
            }
        } else if (json_is_object(j)) {
            vars = j;
        } else {
            json_decref(j);
            return pk_errorf(err, PK_ERR_FORMAT, "conversation: expected a JSON object (messages, tools, ...) or an "
                             "array of messages");
        }
    } else {
        vars = NULL;
    }
    int rc = pk_jinja_render_vars(t, vars, p, out, out_len, err);
    json_decref(vars);
    return rc;
}
