/* text/jinja_lex.c - the lexer of the Jinja engine: template text to the
 * tokens the parser reads (text/jinja_parse.c), and the arena the syntax
 * tree and its constants live in.
 *
 * The lexer follows Jinja2's rules for white space exactly, since chat
 * templates are written around them: \r\n and \r read as \n and one final
 * newline is dropped (keep_trailing_newline off); `{%-` / `{{-` / `{#-`
 * strip the white space before a tag, `-%}` / `-}}` / `-#}` the white space
 * after it; with trim_blocks the newline after a block or comment tag goes;
 * with lstrip_blocks the spaces and tabs between a line's start and a block
 * or comment tag go (not before `{{`, not with `{%+`); `}}` and `%}` inside
 * brackets are operators. White space is Python's (str.isspace). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "text/jinja_parse_int.h"
#include "text/unicode.h"

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

_Noreturn void jpfail(jparser *P, uint32_t pos, const char *fmt, ...) {
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

void *jpalloc(jparser *P, size_t n) {
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
    char *b = jpalloc(P, n + 1);
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
            if (over || v > INT64_MAX) jpfail(P, (uint32_t)i, "integer literal too large for pocket (64-bit)");
            jtok *t = emit(P, T_INT, i);
            t->i = (int64_t)v;
            return j;
        }
    }
    const char *b = copy_digits(P, s + i, d - i);
    uint64_t v = 0;
    for (const char *p = b; *p; p++) {
        if (v > (UINT64_MAX - 9) / 10) jpfail(P, (uint32_t)i, "integer literal too large for pocket (64-bit)");
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v > INT64_MAX) jpfail(P, (uint32_t)i, "integer literal too large for pocket (64-bit)");
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
    if (j >= n) jpfail(P, (uint32_t)i, "unexpected end of a string literal (no closing %c)", q);
    /* decoded text is never longer than the literal, except \xNN after a
       backslash and a non-ASCII character (at most 10 bytes for 2..5) */
    char *out = jpalloc(P, (j - i) * 3 + 1);
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
                if (h < 0) jpfail(P, (uint32_t)(p - 2), "truncated \\%c escape in a string literal", e);
                cp = cp * 16 + (uint32_t)h;
            }
            if (cp > 0x10FFFF) jpfail(P, (uint32_t)(p - 2), "illegal Unicode character in a \\U escape");
            p += (size_t)want;
            put_cp(out, &k, cp);
            break;
        }
        case 'N': jpfail(P, (uint32_t)(p - 2), "\\N{...} escapes are not supported");
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

const char *const jtwo_char_ops[6] = {"//", "**", "==", "!=", ">=", "<="};
const char jtwo_char_codes[7] = "FPENGL";

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
            if (i + 1 < n && s[i] == jtwo_char_ops[k][0] && s[i + 1] == jtwo_char_ops[k][1]) { op = jtwo_char_codes[k]; w = 2; break; }
        if (!op && strchr("+-/*%~[](){}><=.:|,;", c) && c) op = (char)c;
        if (!op) {
            if (c >= 0x20 && c < 0x7f) jpfail(P, (uint32_t)i, "unexpected char '%c'", c);
            jpfail(P, (uint32_t)i, "unexpected char (byte 0x%02x)", c);
        }
        if (op == '(' || op == '[' || op == '{') {
            if (depth == JP_MAX_DEPTH) jpfail(P, (uint32_t)i, "brackets nested more than %d deep", JP_MAX_DEPTH);
            stack[depth++] = op == '(' ? ')' : op == '[' ? ']' : '}';
        } else if (op == ')' || op == ']' || op == '}') {
            if (!depth) jpfail(P, (uint32_t)i, "unexpected '%c'", op);
            if (stack[depth - 1] != op) jpfail(P, (uint32_t)i, "unexpected '%c', expected '%c'", op, stack[depth - 1]);
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

void jlex(jparser *P) {
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
            if (!eend) jpfail(P, (uint32_t)start, "missing end of raw directive ({%% endraw %%})");
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
            if (e >= n) jpfail(P, (uint32_t)start, "missing end of comment tag");
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
