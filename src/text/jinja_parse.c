/* text/jinja_parse.c - the lexer and parser of the Jinja engine: template
 * text to a syntax tree (text/jinja_internal.h), as Jinja2 3.1 reads it.
 *
 * The lexer follows Jinja2's rules for white space exactly, since chat
 * templates are written around them: \r\n and \r read as \n and one final
 * newline is dropped (keep_trailing_newline off); `{%-` / `{{-` / `{#-`
 * strip the white space before a tag, `-%}` / `-}}` / `-#}` the white space
 * after it; with trim_blocks the newline after a block or comment tag goes;
 * with lstrip_blocks the spaces and tabs between a line's start and a block
 * or comment tag go (not before `{{`, not with `{%+`); `}}` and `%}` inside
 * brackets are operators. White space is Python's (str.isspace).
 *
 * The parser is recursive descent with Jinja2's precedence: conditional
 * expression < or < and < not < comparisons (chained, in, not in) < + - <
 * ~ < * / // % < ** < unary - + < postfix (.attr, [index], [a:b:c], call)
 * < filters and tests. Unknown filters and tests, and break / continue
 * outside a loop, are errors when the template is read, as in Jinja2.
 * Nesting is limited (JP_MAX_DEPTH), so no template exhausts the stack. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/jinja_internal.h"
#include "text/unicode.h"

#define JP_MAX_DEPTH 128

/* ---- arena ----------------------------------------------------------------------------- */

typedef struct jchunk {
    struct jchunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
} jchunk;

struct jarena {
    jchunk *head;
};

struct jarena *jarena_new(void) { return calloc(1, sizeof(struct jarena)); }

void *jarena_alloc(struct jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        jchunk *c = malloc(sizeof *c + cap);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    memset(p, 0, n);
    return p;
}

void jarena_free(struct jarena *a) {
    if (!a) return;
    jchunk *c = a->head;
    while (c) {
        jchunk *next = c->next;
        free(c);
        c = next;
    }
    free(a);
}

/* ---- tokens ------------------------------------------------------------------------------ */

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

_Noreturn static void pfail(jparser *P, uint32_t pos, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
_Noreturn static void pfail(jparser *P, uint32_t pos, const char *fmt, ...) {
    char msg[400], where[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20) *p = ' ';
    jpos_text(P->t, pos, where, sizeof where);
    pk_errorf(P->err, PK_ERR_FORMAT, "template %s: %s", where, msg);
    longjmp(P->fail, 1);
}

static void *palloc(jparser *P, size_t n) {
    void *p = jarena_alloc(P->a, n);
    if (!p) {
        pk_errorf(P->err, PK_ERR_NOMEM, "out of memory reading a template");
        longjmp(P->fail, 1);
    }
    return p;
}

static jtok *emit(jparser *P, int type, size_t pos) {
    if (P->ntok == P->cap) {
        size_t cap = P->cap ? P->cap * 2 : 256;
        jtok *t = realloc(P->tok, cap * sizeof *t);
        if (!t) {
            pk_errorf(P->err, PK_ERR_NOMEM, "out of memory reading a template");
            longjmp(P->fail, 1);
        }
        P->tok = t;
        P->cap = cap;
    }
    jtok *t = &P->tok[P->ntok++];
    memset(t, 0, sizeof *t);
    t->type = (uint8_t)type;
    t->pos = (uint32_t)pos;
    return t;
}

/* ---- lexer ------------------------------------------------------------------------------- */

/* The length of the white space character at s[0..n) (Python's str.isspace), or 0. */
static size_t space_at(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0];
    if (c < 0x80) return jspace(c) ? 1 : 0;
    uint32_t cp;
    int k = pk_utf8_decode((const uint8_t *)s, n, &cp);
    return (cp != 0xFFFD || k > 1) && jspace(cp) ? (size_t)k : 0;
}

static size_t skip_space(const char *s, size_t i, size_t n) {
    size_t k;
    while (i < n && (k = space_at(s + i, n - i))) i += k;
    return i;
}

/* The end of s[0..n) without its trailing white space. */
static size_t rstrip_len(const char *s, size_t n) {
    size_t last = 0, i = 0, k;       /* forward, since UTF-8 is read forward */
    while (i < n) {
        if ((k = space_at(s + i, n - i))) { i += k; continue; }
        unsigned char c = (unsigned char)s[i];
        if (c < 0x80) i++;
        else { uint32_t cp; i += (size_t)pk_utf8_decode((const uint8_t *)s + i, n - i, &cp); }
        last = i;
    }
    return last;
}

/* Text before a tag, with the strip of the tag's sign ('-', '+' or 0) and
 * lstrip_blocks (for block and comment tags) applied: its new length. */
static size_t strip_before(jparser *P, const char *s, size_t n, char sign, int is_var, int line_starting) {
    if (sign == '-') return rstrip_len(s, n);
    if (sign == '+' || !P->lstrip_blocks || is_var) return n;
    size_t l = n;
    while (l && s[l - 1] != '\n') l--;
    if (l == 0 && !line_starting) return n;
    if (l == n) return n;
    if (skip_space(s, l, n) == n) return l;
    return n;
}

/* Does src[i..] start with "%}"-style end (block: c = '%'; comment: '#')
 * with its sign? Returns the length of the end match (0: none) and sets
 * *after to where the text continues. */
static size_t tag_end(jparser *P, size_t i, char c, size_t *after) {
    const char *s = P->src;
    size_t n = P->len;
    if (i + 3 <= n && (s[i] == '+' || s[i] == '-') && s[i + 1] == c && s[i + 2] == '}') {
        size_t e = i + 3;
        if (s[i] == '-') e = skip_space(s, e, n);
        *after = e;
        return 3;
    }
    if (i + 2 <= n && s[i] == c && s[i + 1] == '}') {
        size_t e = i + 2;
        if (P->trim_blocks && e < n && s[e] == '\n') e++;
        *after = e;
        return 2;
    }
    return 0;
}

static int is_ident_start(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80; }
static int is_ident(unsigned char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }
static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* digits with single '_' between them, from i; returns the end (i: none) */
static size_t digits(const char *s, size_t i, size_t n) {
    size_t j = i;
    if (j >= n || !is_digit((unsigned char)s[j])) return i;
    while (j < n) {
        if (is_digit((unsigned char)s[j])) j++;
        else if (s[j] == '_' && j + 1 < n && is_digit((unsigned char)s[j + 1])) j++;
        else break;
    }
    return j;
}

static char *copy_digits(jparser *P, const char *s, size_t n) {
    char *b = palloc(P, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] != '_') b[k++] = s[i];
    b[k] = 0;
    return b;
}

/* A number at i: T_FLOAT or T_INT token; returns the end, or i if none. */
static size_t lex_number(jparser *P, size_t i) {
    const char *s = P->src;
    size_t n = P->len;
    size_t d = digits(s, i, n);
    if (d == i) return i;
    /* float: digits (. digits)? e[+-]digits  |  digits . digits */
    if (i == 0 || s[i - 1] != '.') {
        size_t j = d, frac = d;
        if (j < n && s[j] == '.') { size_t f = digits(s, j + 1, n); if (f > j + 1) frac = f; }
        size_t e = frac;
        if (e < n && (s[e] == 'e' || s[e] == 'E')) {
            size_t k = e + 1;
            if (k < n && (s[k] == '+' || s[k] == '-')) k++;
            size_t x = digits(s, k, n);
            if (x > k) e = x;
        }
        if (e > d) {
            jtok *t = emit(P, T_FLOAT, i);
            t->f = strtod(copy_digits(P, s + i, e - i), NULL);
            return e;
        }
    }
    /* integer: 0x / 0o / 0b prefixed, or decimal */
    if (s[i] == '0' && i + 2 < n && strchr("xXoObB", s[i + 1])) {
        int base = (s[i + 1] | 32) == 'x' ? 16 : (s[i + 1] | 32) == 'o' ? 8 : 2;
        size_t j = i + 2;
        uint64_t v = 0;
        int nd = 0, over = 0;
        while (j < n) {
            int c = (unsigned char)s[j], dv;
            if (c == '_' && nd) { j++; continue; }
            if (is_digit((unsigned char)c)) dv = c - '0';
            else if ((c | 32) >= 'a' && (c | 32) <= 'f') dv = (c | 32) - 'a' + 10;
            else break;
            if (dv >= base) break;
            if (v > (UINT64_MAX >> 4)) over = 1;
            v = v * (uint64_t)base + (uint64_t)dv;
            nd++;
            j++;
        }
        if (nd) {
            if (over || v > INT64_MAX) pfail(P, (uint32_t)i, "integer literal too large for pocket (64-bit)");
            jtok *t = emit(P, T_INT, i);
            t->i = (int64_t)v;
            return j;
        }
    }
    const char *b = copy_digits(P, s + i, d - i);
    uint64_t v = 0;
    for (const char *p = b; *p; p++) {
        if (v > (UINT64_MAX - 9) / 10) pfail(P, (uint32_t)i, "integer literal too large for pocket (64-bit)");
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > INT64_MAX) pfail(P, (uint32_t)i, "integer literal too large for pocket (64-bit)");
    jtok *t = emit(P, T_INT, i);
    t->i = (int64_t)v;
    return d;
}

static void put_cp(char *out, size_t *k, uint32_t cp) {
    char u[4];
    int m = pk_utf8_encode(cp, u);
    if (!m) m = pk_utf8_encode(0xFFFD, u);       /* a surrogate: not encodable in UTF-8 */
    memcpy(out + *k, u, (size_t)m);
    *k += (size_t)m;
}

static int hexval(char c) {
    if (is_digit((unsigned char)c)) return c - '0';
    c = (char)(c | 32);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A string literal at i (the quote); returns its end. Escapes as Python's
 * unicode-escape codec reads them after Jinja2 backslash-replaced the
 * non-ASCII characters. */
static size_t lex_string(jparser *P, size_t i) {
    const char *s = P->src;
    size_t n = P->len;
    char q = s[i];
    size_t j = i + 1;
    while (j < n && s[j] != q) j += s[j] == '\\' && j + 1 < n ? 2 : 1;
    if (j >= n) pfail(P, (uint32_t)i, "unexpected end of a string literal (no closing %c)", q);
    /* decoded text is never longer than the literal, except \xNN after a
       backslash and a non-ASCII character (at most 10 bytes for 2..5) */
    char *out = palloc(P, (j - i) * 3 + 1);
    size_t k = 0;
    for (size_t p = i + 1; p < j;) {
        unsigned char c = (unsigned char)s[p];
        if (c != '\\') { out[k++] = (char)c; p++; continue; }
        unsigned char e = (unsigned char)s[p + 1];
        p += 2;
        switch (e) {
        case '\\': out[k++] = '\\'; break;
        case '\'': out[k++] = '\''; break;
        case '"': out[k++] = '"'; break;
        case 'a': out[k++] = '\a'; break;
        case 'b': out[k++] = '\b'; break;
        case 'f': out[k++] = '\f'; break;
        case 'n': out[k++] = '\n'; break;
        case 'r': out[k++] = '\r'; break;
        case 't': out[k++] = '\t'; break;
        case 'v': out[k++] = '\v'; break;
        case '\n': break;                                   /* a line continuation */
        case 'x': case 'u': case 'U': {
            int want = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int d = 0; d < want; d++) {
                int h = p + (size_t)d < j ? hexval(s[p + (size_t)d]) : -1;
                if (h < 0) pfail(P, (uint32_t)(p - 2), "truncated \\%c escape in a string literal", e);
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10FFFF) pfail(P, (uint32_t)(p - 2), "illegal Unicode character in a \\U escape");
            p += (size_t)want;
            put_cp(out, &k, cp);
            break;
        }
        case 'N': pfail(P, (uint32_t)(p - 2), "\\N{...} escapes are not supported");
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int d = 0; d < 2 && p < j && s[p] >= '0' && s[p] <= '7'; d++) cp = cp * 8 + (uint32_t)(s[p++] - '0');
                put_cp(out, &k, cp);
            } else if (e >= 0x80) {
                /* backslashreplace made this \xNN / \uNNNN / \UNNNNNNNN after the backslash:
                   the backslash escapes the next backslash, the rest is text */
                uint32_t cp;
                size_t m = (size_t)pk_utf8_decode((const uint8_t *)s + p - 1, j - (p - 1), &cp);
                char hx[16];
                int hn = cp <= 0xff ? snprintf(hx, sizeof hx, "x%02x", cp)
                       : cp <= 0xffff ? snprintf(hx, sizeof hx, "u%04x", cp) : snprintf(hx, sizeof hx, "U%08x", cp);
                out[k++] = '\\';
                memcpy(out + k, hx, (size_t)hn);
                k += (size_t)hn;
                p += m - 1;
            } else {
                out[k++] = '\\';
                out[k++] = (char)e;
            }
        }
    }
    out[k] = 0;
    jtok *t = emit(P, T_STRING, i);
    t->s = out;
    t->n = k;
    return j + 1;
}

static const char *const two_char_ops[] = {"//", "**", "==", "!=", ">=", "<="};
static const char two_char_codes[] = "FPENGL";

/* The tokens inside {{ }} or {% %} from i; returns where the text resumes
 * and sets *line_starting. */
static size_t lex_tag(jparser *P, size_t i, int is_block, int *line_starting) {
    const char *s = P->src;
    size_t n = P->len;
    char stack[JP_MAX_DEPTH];
    int depth = 0;
    for (;;) {
        i = skip_space(s, i, n);
        if (i >= n) return i;                          /* the parser reports the missing end */
        if (!depth) {
            size_t after;
            if (is_block && tag_end(P, i, '%', &after)) {
                emit(P, T_BLOCK_END, i);
                *line_starting = after > 0 && s[after - 1] == '\n';
                return after;
            }
            if (!is_block) {
                if (s[i] == '-' && i + 2 < n && s[i + 1] == '}' && s[i + 2] == '}') {
                    emit(P, T_VAR_END, i);
                    size_t e = skip_space(s, i + 3, n);
                    *line_starting = s[e - 1] == '\n';
                    return e;
                }
                if (s[i] == '}' && i + 1 < n && s[i + 1] == '}') {
                    emit(P, T_VAR_END, i);
                    *line_starting = 0;
                    return i + 2;
                }
            }
        }
        unsigned char c = (unsigned char)s[i];
        size_t e;
        if (is_digit(c) && (e = lex_number(P, i)) > i) { i = e; continue; }
        if (is_ident_start(c)) {
            e = i + 1;
            while (e < n && is_ident((unsigned char)s[e])) e++;
            jtok *t = emit(P, T_NAME, i);
            t->s = s + i;
            t->n = e - i;
            i = e;
            continue;
        }
        if (c == '\'' || c == '"') { i = lex_string(P, i); continue; }
        char op = 0;
        size_t w = 1;
        for (int k = 0; k < 6; k++)
            if (i + 1 < n && s[i] == two_char_ops[k][0] && s[i + 1] == two_char_ops[k][1]) { op = two_char_codes[k]; w = 2; break; }
        if (!op && strchr("+-/*%~[](){}><=.:|,;", c) && c) op = (char)c;
        if (!op) {
            if (c >= 0x20 && c < 0x7f) pfail(P, (uint32_t)i, "unexpected char '%c'", c);
            pfail(P, (uint32_t)i, "unexpected char (byte 0x%02x)", c);
        }
        if (op == '(' || op == '[' || op == '{') {
            if (depth == JP_MAX_DEPTH) pfail(P, (uint32_t)i, "brackets nested more than %d deep", JP_MAX_DEPTH);
            stack[depth++] = op == '(' ? ')' : op == '[' ? ']' : '}';
        } else if (op == ')' || op == ']' || op == '}') {
            if (!depth) pfail(P, (uint32_t)i, "unexpected '%c'", op);
            if (stack[depth - 1] != op) pfail(P, (uint32_t)i, "unexpected '%c', expected '%c'", op, stack[depth - 1]);
            depth--;
        }
        jtok *t = emit(P, T_OP, i);
        t->op = op;
        i += w;
    }
}

/* Is src[i..] "{%[-+]? raw %}"-like (kind: "raw" or "endraw")? Returns the
 * end of the tag (0: no) and the tag's leading and trailing signs. */
static size_t raw_tag(jparser *P, size_t i, const char *kind, char *lead, int *end_minus) {
    const char *s = P->src;
    size_t n = P->len, k = strlen(kind);
    if (i + 2 > n || s[i] != '{' || s[i + 1] != '%') return 0;
    size_t j = i + 2;
    *lead = 0;
    if (j < n && (s[j] == '-' || s[j] == '+')) *lead = s[j++];
    j = skip_space(s, j, n);
    if (j + k > n || memcmp(s + j, kind, k)) return 0;
    j = skip_space(s, j + k, n);
    *end_minus = 0;
    if (j + 3 <= n && s[j] == '-' && s[j + 1] == '%' && s[j + 2] == '}') { *end_minus = 1; return j + 3; }
    if (j + 3 <= n && s[j] == '+' && s[j + 1] == '%' && s[j + 2] == '}') { *end_minus = 2; return j + 3; }
    if (j + 2 <= n && s[j] == '%' && s[j + 1] == '}') return j + 2;
    return 0;
}

static void emit_data(jparser *P, size_t pos, size_t n) {
    if (!n) return;
    jtok *t = emit(P, T_DATA, pos);
    t->s = P->src + pos;
    t->n = n;
}

static void lex(jparser *P) {
    const char *s = P->src;
    size_t n = P->len, i = 0;
    int line_starting = 1;
    while (i < n) {
        size_t start = i;
        while (start + 1 < n && !(s[start] == '{' && (s[start + 1] == '{' || s[start + 1] == '%' || s[start + 1] == '#')))
            start++;
        if (start + 1 >= n) { emit_data(P, i, n - i); break; }
        char kind = s[start + 1];
        char sign = start + 2 < n && (s[start + 2] == '-' || s[start + 2] == '+') ? s[start + 2] : 0;
        char rlead = 0;
        int rminus = 0;
        size_t raw_end = kind == '%' ? raw_tag(P, start, "raw", &rlead, &rminus) : 0;
        if (rminus == 2) raw_end = 0;            /* "{% raw +%}" is not a raw tag in Jinja2 */
        emit_data(P, i, strip_before(P, s + i, start - i, sign, kind == '{', line_starting));
        size_t body = start + 2 + (sign ? 1 : 0);
        if (raw_end) {
            size_t after = raw_end;
            if (rminus == 1) after = skip_space(s, after, n);
            line_starting = after > 0 && s[after - 1] == '\n';
            size_t e = after;
            char elead = 0;
            int eminus = 0;
            size_t eend = 0;
            for (; e + 1 < n; e++)
                if (s[e] == '{' && s[e + 1] == '%' && (eend = raw_tag(P, e, "endraw", &elead, &eminus))) break;
            if (!eend) pfail(P, (uint32_t)start, "missing end of raw directive ({%% endraw %%})");
            emit_data(P, after, strip_before(P, s + after, e - after, elead, 0, line_starting));
            if (eminus == 1) eend = skip_space(s, eend, n);
            else if (eminus == 0 && P->trim_blocks && eend < n && s[eend] == '\n') eend++;
            line_starting = s[eend - 1] == '\n';
            i = eend;
            continue;
        }
        if (kind == '#') {
            size_t e = body, after = 0;
            while (e < n && !tag_end(P, e, '#', &after)) e++;
            if (e >= n) pfail(P, (uint32_t)start, "missing end of comment tag");
            line_starting = s[after - 1] == '\n';
            i = after;
            continue;
        }
        emit(P, kind == '{' ? T_VAR_BEGIN : T_BLOCK_BEGIN, start);
        line_starting = 0;
        i = lex_tag(P, body, kind == '%', &line_starting);
    }
    emit(P, T_EOF, n);
}

/* ---- parser helpers -------------------------------------------------------------------------- */

static jtok *cur(jparser *P) { return &P->tok[P->i]; }
static jtok *peek(jparser *P, size_t k) { return &P->tok[P->i + k < P->ntok ? P->i + k : P->ntok - 1]; }
static void adv(jparser *P) { if (P->i + 1 < P->ntok) P->i++; }
static int is_op(const jtok *t, char op) { return t->type == T_OP && t->op == op; }
static int is_name(const jtok *t, const char *name) {
    size_t k = strlen(name);
    return t->type == T_NAME && t->n == k && !memcmp(t->s, name, k);
}

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
            if (t->op == two_char_codes[k]) { snprintf(buf, cap, "'%s'", two_char_ops[k]); return buf; }
        snprintf(buf, cap, "'%c'", t->op);
        return buf;
    }
}

_Noreturn static void unexpected(jparser *P, const char *wanted) {
    char b[64];
    jtok *t = cur(P);
    if (wanted) pfail(P, t->pos, "expected %s, got %s", wanted, tok_desc(t, b, sizeof b));
    pfail(P, t->pos, "unexpected %s", tok_desc(t, b, sizeof b));
}

static void expect_op(jparser *P, char op, const char *what) {
    if (!is_op(cur(P), op)) unexpected(P, what);
    adv(P);
}

static void expect_type(jparser *P, int type, const char *what) {
    if (cur(P)->type != type) unexpected(P, what);
    adv(P);
}

static jnode *node(jparser *P, int kind, uint32_t pos) {
    jnode *n = palloc(P, sizeof *n);
    n->kind = (uint8_t)kind;
    n->pos = pos;
    n->id = -1;
    return n;
}

static const jstr *pstr(jparser *P, const char *s, size_t n) {
    jstr *j = jstr_immortal(P->a, s, n);
    if (!j) {
        pk_errorf(P->err, PK_ERR_NOMEM, "out of memory reading a template");
        longjmp(P->fail, 1);
    }
    return j;
}

/* growable node lists in the arena */
typedef struct nvec {
    jnode **v;
    int n, cap;
    const jstr **kw;            /* optional, with kw_on */
    int kw_on;
} nvec;

static void npush(jparser *P, nvec *v, jnode *x, const jstr *kw) {
    if (v->n == v->cap) {
        int cap = v->cap ? v->cap * 2 : 4;
        jnode **nv = palloc(P, (size_t)cap * sizeof *nv);
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof *nv);
        v->v = nv;
        if (v->kw_on) {
            const jstr **nk = palloc(P, (size_t)cap * sizeof *nk);
            if (v->n) memcpy(nk, v->kw, (size_t)v->n * sizeof *nk);
            v->kw = nk;
        }
        v->cap = cap;
    }
    if (v->kw_on) v->kw[v->n] = kw;
    v->v[v->n++] = x;
}

#define ENTER(P) do { if (++(P)->depth > JP_MAX_DEPTH) \
    pfail((P), cur(P)->pos, "the template nests more than %d levels deep", JP_MAX_DEPTH); } while (0)
#define LEAVE(P) ((P)->depth--)

/* ---- expressions ------------------------------------------------------------------------------ */

static jnode *parse_expression(jparser *P);
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
static jnode *parse_tuple(jparser *P, int simplified, int with_condexpr, const char *extra, int explicit_parens) {
    uint32_t pos = cur(P)->pos;
    nvec items = {0};
    int is_tuple = 0;
    for (;;) {
        if (items.n) expect_op(P, ',', "','");
        if (is_tuple_end(P, extra)) break;
        jnode *x = simplified ? parse_primary(P) : with_condexpr ? parse_expression(P) : parse_or(P);
        npush(P, &items, x, NULL);
        if (is_op(cur(P), ',')) is_tuple = 1;
        else break;
    }
    if (!is_tuple) {
        if (items.n) return items.v[0];
        if (!explicit_parens) unexpected(P, "an expression");
    }
    jnode *n = node(P, N_TUPLE, pos);
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
        jnode *n = node(P, N_COND, pos);
        n->a = test;
        n->b = e1;
        n->c = e3;
        e1 = n;
    }
    LEAVE(P);
    return e1;
}

static jnode *parse_expression(jparser *P) { return parse_condexpr(P); }

static jnode *parse_and(jparser *P);
static jnode *parse_or(jparser *P) {
    jnode *l = parse_and(P);
    while (is_name(cur(P), "or")) {
        jnode *n = node(P, N_OR, cur(P)->pos);
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
        jnode *n = node(P, N_AND, cur(P)->pos);
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
        jnode *n = node(P, N_NOT, cur(P)->pos);
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
        jnode *o = node(P, N_BINARY, t->pos);
        o->op = (uint8_t)op;
        o->a = parse_math1(P);
        npush(P, &ops, o, NULL);
    }
    if (!ops.n) return e;
    jnode *n = node(P, N_COMPARE, pos);
    n->a = e;
    n->v = ops.v;
    n->nv = ops.n;
    return n;
}

static jnode *binary(jparser *P, int op, uint32_t pos, jnode *a, jnode *b) {
    jnode *n = node(P, N_BINARY, pos);
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
        n = node(P, N_UNARY, t->pos);
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
    jnode *n = node(P, N_CONST, pos);
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
            n = node(P, N_NAME, t->pos);
            n->name = pstr(P, t->s, t->n);
            n->id = jglobal_id(t->s, t->n);
            note_name(P, t);
        }
        adv(P);
        break;
    case T_STRING: {
        size_t total = 0, k = 0;
        for (size_t j = P->i; P->tok[j].type == T_STRING; j++) total += P->tok[j].n;
        char *b = palloc(P, total + 1);
        while (cur(P)->type == T_STRING) {
            memcpy(b + k, cur(P)->s, cur(P)->n);
            k += cur(P)->n;
            adv(P);
        }
        n = constant(P, t->pos, jv_obj(JV_STR, (jobj *)pstr(P, b, k)));
        break;
    }
    case T_INT: n = constant(P, t->pos, jv_int(t->i)); adv(P); break;
    case T_FLOAT: n = constant(P, t->pos, jv_float(t->f)); adv(P); break;
    case T_OP:
        if (t->op == '(') {
            adv(P);
            n = parse_tuple(P, 0, 1, NULL, 1);
            expect_op(P, ')', "')'");
            break;
        }
        if (t->op == '[') {
            adv(P);
            nvec items = {0};
            while (!is_op(cur(P), ']')) {
                if (items.n) expect_op(P, ',', "','");
                if (is_op(cur(P), ']')) break;
                npush(P, &items, parse_expression(P), NULL);
            }
            expect_op(P, ']', "']'");
            n = node(P, N_LIST, t->pos);
            n->v = items.v;
            n->nv = items.n;
            break;
        }
        if (t->op == '{') {
            adv(P);
            nvec keys = {0}, vals = {0};
            while (!is_op(cur(P), '}')) {
                if (keys.n) expect_op(P, ',', "','");
                if (is_op(cur(P), '}')) break;
                npush(P, &keys, parse_expression(P), NULL);
                expect_op(P, ':', "':'");
                npush(P, &vals, parse_expression(P), NULL);
            }
            expect_op(P, '}', "'}'");
            n = node(P, N_DICT, t->pos);
            n->v = keys.v;
            n->nv = keys.n;
            n->w = vals.v;
            n->nw = vals.n;
            break;
        }
        unexpected(P, NULL);
    default:
        unexpected(P, NULL);
    }
    LEAVE(P);
    return n;
}

/* (args) of a call, filter or test into n->v (positional) and n->w / n->kw. */
static void parse_args(jparser *P, jnode *n) {
    expect_op(P, '(', "'('");
    nvec pos = {0}, kw = {.kw_on = 1};
    while (!is_op(cur(P), ')')) {
        if (pos.n || kw.n) expect_op(P, ',', "','");
        if (is_op(cur(P), ')')) break;
        if (is_op(cur(P), '*') || is_op(cur(P), 'P'))
            pfail(P, cur(P)->pos, "*args and **kwargs in calls are not supported");
        if (cur(P)->type == T_NAME && is_op(peek(P, 1), '=')) {
            const jstr *name = pstr(P, cur(P)->s, cur(P)->n);
            adv(P);
            adv(P);
            npush(P, &kw, parse_expression(P), name);
        } else {
            if (kw.n) pfail(P, cur(P)->pos, "a positional argument after a keyword argument");
            npush(P, &pos, parse_expression(P), NULL);
        }
    }
    expect_op(P, ')', "')'");
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
        jnode *e = parse_expression(P);
        if (!is_op(cur(P), ':')) return e;
        adv(P);
        parts[0] = e;
    }
    if (!is_op(cur(P), ':') && !is_op(cur(P), ']') && !is_op(cur(P), ',')) parts[1] = parse_expression(P);
    if (is_op(cur(P), ':')) {
        adv(P);
        if (!is_op(cur(P), ']') && !is_op(cur(P), ',')) parts[2] = parse_expression(P);
    }
    jnode *n = node(P, N_SLICE, pos);
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
                jnode *x = node(P, N_ATTR, a->pos);
                x->a = n;
                x->name = pstr(P, a->s, a->n);
                adv(P);
                n = x;
            } else if (a->type == T_INT) {
                jnode *x = node(P, N_INDEX, a->pos);
                x->a = n;
                x->b = constant(P, a->pos, jv_int(a->i));
                adv(P);
                n = x;
            } else {
                unexpected(P, "a name or number after '.'");
            }
        } else if (is_op(t, '[')) {
            adv(P);
            nvec args = {0};
            while (!is_op(cur(P), ']')) {
                if (args.n) expect_op(P, ',', "','");
                npush(P, &args, parse_subscribed(P), NULL);
            }
            expect_op(P, ']', "']'");
            if (!args.n) pfail(P, t->pos, "an empty subscript []");
            jnode *key;
            if (args.n == 1) key = args.v[0];
            else {
                for (int i = 0; i < args.n; i++)
                    if (args.v[i]->kind == N_SLICE) pfail(P, args.v[i]->pos, "a slice inside a tuple subscript is not supported");
                key = node(P, N_TUPLE, t->pos);
                key->v = args.v;
                key->nv = args.n;
            }
            if (key->kind == N_SLICE) {
                key->a = n;
                n = key;
            } else {
                jnode *x = node(P, N_INDEX, t->pos);
                x->a = n;
                x->b = key;
                n = x;
            }
        } else if (is_op(t, '(')) {
            jnode *x = node(P, N_CALL, n->pos);
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
    if (t->type != T_NAME) unexpected(P, "a name");
    const char *s = t->s;
    size_t n = t->n;
    adv(P);
    char buf[256];
    if (n >= sizeof buf) pfail(P, t->pos, "a name too long");
    memcpy(buf, s, n);
    while (is_op(cur(P), '.') && peek(P, 1)->type == T_NAME) {
        jtok *x = peek(P, 1);
        if (n + 1 + x->n >= sizeof buf) pfail(P, t->pos, "a name too long");
        buf[n++] = '.';
        memcpy(buf + n, x->s, x->n);
        n += x->n;
        adv(P);
        adv(P);
    }
    return pstr(P, buf, n);
}

/* A filter applied to n (NULL for {% filter %} blocks and {% set x | f %}). */
static jnode *parse_filter(jparser *P, jnode *n) {
    uint32_t pos = cur(P)->pos;
    const jstr *name = dotted_name(P);
    jnode *f = node(P, N_FILTER, pos);
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
    jnode *t = node(P, N_TEST, pos);
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
        if (is_name(c, "is")) pfail(P, c->pos, "you cannot chain multiple tests with is");
        jnode *arg = parse_postfix(P, parse_primary(P));
        t->v = palloc(P, sizeof *t->v);
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
            n = parse_filter(P, n);
        } else if (is_name(t, "is")) {
            n = parse_test(P, n);
        } else if (is_op(t, '(')) {
            jnode *x = node(P, N_CALL, t->pos);
            x->a = n;
            parse_args(P, x);
            n = x;
        } else {
            return n;
        }
    }
}

/* ---- statements ---------------------------------------------------------------------------- */

static jnode *parse_body(jparser *P, const char *const *ends, const char *opener, uint32_t opener_pos);

static void end_block(jparser *P) { expect_type(P, T_BLOCK_END, "end of statement block ('%}')"); }

/* An assignment target: a name, `ns.attr` (with_ns), or names separated by commas. */
static jnode *parse_target(jparser *P, int with_ns, const char *end_name) {
    uint32_t pos = cur(P)->pos;
    if (with_ns && cur(P)->type == T_NAME && is_op(peek(P, 1), '.') && peek(P, 2)->type == T_NAME) {
        jnode *ns = node(P, N_NAME, pos);
        ns->name = pstr(P, cur(P)->s, cur(P)->n);
        ns->id = jglobal_id(cur(P)->s, cur(P)->n);
        adv(P);
        adv(P);
        jnode *x = node(P, N_ATTR, cur(P)->pos);
        x->a = ns;
        x->name = pstr(P, cur(P)->s, cur(P)->n);
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
        if (t->type != T_NAME || (end_name && is_name(t, end_name))) unexpected(P, "a name to assign to");
        jnode *x = node(P, N_NAME, t->pos);
        x->name = pstr(P, t->s, t->n);
        npush(P, &names, x, NULL);
        adv(P);
    }
    if (paren) expect_op(P, ')', "')'");
    if (names.n == 1 && !paren) return names.v[0];
    jnode *n = node(P, N_TUPLE, pos);
    n->v = names.v;
    n->nv = names.n;
    return n;
}

static const char *const ends_for[] = {"endfor", "else", NULL};
static const char *const ends_endfor[] = {"endfor", NULL};
static const char *const ends_if[] = {"endif", "elif", "else", NULL};
static const char *const ends_endif[] = {"endif", NULL};

static jnode *parse_for(jparser *P, uint32_t pos) {
    jnode *n = node(P, N_FOR, pos);
    n->a = parse_target(P, 0, "in");
    if (!is_name(cur(P), "in")) unexpected(P, "'in'");
    adv(P);
    n->b = parse_tuple(P, 0, 0, "recursive", 0);
    if (is_name(cur(P), "if")) {
        adv(P);
        n->c = parse_expression(P);
    }
    if (is_name(cur(P), "recursive")) pfail(P, cur(P)->pos, "recursive for loops are not supported");
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
    jnode *n = node(P, N_IF, pos);
    n->a = parse_tuple(P, 0, 0, NULL, 0);
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
    expect_op(P, '(', "'('");
    while (!is_op(cur(P), ')')) {
        if (params.n) expect_op(P, ',', "','");
        if (is_op(cur(P), ')')) break;
        jtok *t = cur(P);
        if (t->type != T_NAME) unexpected(P, "a parameter name");
        jnode *x = node(P, N_NAME, t->pos);
        x->name = pstr(P, t->s, t->n);
        adv(P);
        jnode *d = NULL;
        if (is_op(cur(P), '=')) {
            adv(P);
            d = parse_expression(P);
        } else if (defs.n && defs.v[defs.n - 1]) {
            pfail(P, t->pos, "a parameter without a default after one with a default");
        }
        npush(P, &params, x, NULL);
        npush(P, &defs, d, NULL);
    }
    expect_op(P, ')', "')'");
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
    if (t->type != T_NAME) unexpected(P, "a tag name");
    jnode *n;
    if (is_name(t, "for")) { adv(P); n = parse_for(P, pos); }
    else if (is_name(t, "if")) { adv(P); n = parse_if(P, pos); }
    else if (is_name(t, "set")) {
        adv(P);
        jnode *target = parse_target(P, 1, NULL);
        if (is_op(cur(P), '=')) {
            adv(P);
            n = node(P, N_SET, pos);
            n->a = target;
            n->b = parse_tuple(P, 0, 1, NULL, 0);
            end_block(P);
        } else {
            if (target->kind != N_NAME) unexpected(P, "'='");
            n = node(P, N_SETBLOCK, pos);
            n->a = target;
            jnode *chain = NULL;
            while (is_op(cur(P), '|')) {
                adv(P);
                jnode *f = parse_filter(P, chain);
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
        if (cur(P)->type != T_NAME) unexpected(P, "a macro name");
        n = node(P, N_MACRO, pos);
        n->name = pstr(P, cur(P)->s, cur(P)->n);
        adv(P);
        parse_params(P, n);
        end_block(P);
        parse_macro_body(P, n, "endmacro", pos);
    } else if (is_name(t, "call")) {
        adv(P);
        n = node(P, N_CALLBLOCK, pos);
        if (is_op(cur(P), '(')) parse_params(P, n);
        n->a = parse_expression(P);
        if (n->a->kind != N_CALL) pfail(P, n->a->pos, "{%% call %%} needs a call expression");
        end_block(P);
        parse_macro_body(P, n, "endcall", pos);
    } else if (is_name(t, "filter")) {
        adv(P);
        n = node(P, N_FILTERBLOCK, pos);
        jnode *chain = parse_filter(P, NULL);
        while (is_op(cur(P), '|')) {
            adv(P);
            chain = parse_filter(P, chain);
        }
        n->c = chain;
        end_block(P);
        static const char *const ends[] = {"endfilter", NULL};
        n->b = parse_body(P, ends, "filter", pos);
        adv(P);
        end_block(P);
    } else if (is_name(t, "with")) {
        adv(P);
        n = node(P, N_WITH, pos);
        nvec targets = {0}, vals = {0};
        while (cur(P)->type != T_BLOCK_END) {
            if (targets.n) expect_op(P, ',', "','");
            npush(P, &targets, parse_target(P, 0, NULL), NULL);
            expect_op(P, '=', "'='");
            npush(P, &vals, parse_expression(P), NULL);
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
        if (!P->loops) pfail(P, pos, "'%.*s' outside loop", (int)t->n, t->s);
        n = node(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, pos);
        adv(P);
        end_block(P);
    } else if (is_name(t, "print")) {
        adv(P);
        n = node(P, N_OUTPUT, pos);
        n->a = parse_tuple(P, 0, 1, NULL, 0);
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
        pfail(P, pos, "the '%.*s' tag is not supported in chat templates", (int)t->n, t->s);
    } else {
        pfail(P, pos, "encountered unknown tag '%.*s'", (int)(t->n > 40 ? 40 : t->n), t->s);
    }
    LEAVE(P);
    return n;
}

/* Statements up to a {% NAME %} with NAME in ends (left at NAME), or the end
 * of the template when ends is NULL. */
static jnode *parse_body(jparser *P, const char *const *ends, const char *opener, uint32_t opener_pos) {
    ENTER(P);
    jnode *body = node(P, N_BLOCK, cur(P)->pos);
    nvec v = {0};
    for (;;) {
        jtok *t = cur(P);
        if (t->type == T_EOF) {
            if (!ends) break;
            char where[64];
            jpos_text(P->t, opener_pos, where, sizeof where);
            pfail(P, t->pos, "unexpected end of template: the '%s' at %s is not closed (expected '%s')", opener,
                  where, ends[0]);
        }
        if (t->type == T_DATA) {
            jnode *x = node(P, N_TEXT, t->pos);
            x->lit = jv_obj(JV_STR, (jobj *)pstr(P, t->s, t->n));
            npush(P, &v, x, NULL);
            adv(P);
        } else if (t->type == T_VAR_BEGIN) {
            adv(P);
            jnode *x = node(P, N_OUTPUT, t->pos);
            x->a = parse_tuple(P, 0, 1, NULL, 0);
            expect_type(P, T_VAR_END, "end of print statement ('}}')");
            npush(P, &v, x, NULL);
        } else if (t->type == T_BLOCK_BEGIN) {
            adv(P);
            jtok *name = cur(P);
            int is_end = 0;
            for (int k = 0; ends && ends[k]; k++)
                if (is_name(name, ends[k])) is_end = 1;
            if (is_end) break;
            if (name->type == T_NAME && name->n > 3 && !memcmp(name->s, "end", 3)) {
                if (ends)
                    pfail(P, name->pos, "unexpected '%.*s' (the innermost open block is '%s', closed by '%s')",
                          (int)(name->n > 40 ? 40 : name->n), name->s, opener, ends[0]);
                pfail(P, name->pos, "unexpected '%.*s': no open block to close", (int)(name->n > 40 ? 40 : name->n), name->s);
            }
            if (is_name(name, "else") || is_name(name, "elif"))
                pfail(P, name->pos, "unexpected '%.*s' outside an if or for block", (int)name->n, name->s);
            npush(P, &v, parse_statement(P), NULL);
        } else {
            unexpected(P, NULL);
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
    if (++P->depth > JP_MAX_DEPTH * 4) pfail(P, n->pos, "the template nests too deeply");
    int inner = 0, here = soft;
    switch (n->kind) {
    case N_FILTER:
        if (n->id < 0 && !soft) pfail(P, n->pos, "no filter named '%s'", n->name->s);
        break;
    case N_TEST:
        if (n->id < 0 && !soft) pfail(P, (uint32_t)n->lit.u.i, "no test named '%s'", n->name->s);
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
    lex(P);
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
