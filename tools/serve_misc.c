/* tools/serve_misc.c - pocket serve's small endpoints and habits beside its
 * request path (tools/serve_misc.h): the model object, llama-server's
 * /tokenize, /detokenize, /props and /slots, CORS and the access log line.
 * Every input here comes from a request: sizes are bounded by the body
 * limit, each id and field is checked before use, and what is echoed into a
 * header or the log is checked or escaped first. */
#include "serve_misc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* ---- models ---------------------------------------------------------------------------- */

json_t *misc_model_json(const serve_info *si) {
    return json_pack("{s:s, s:s, s:I, s:s, s:{s:s, s:i, s:i, s:i, s:I, s:I, s:s}}", "id", si->model_id, "object",
                     "model", "created", (json_int_t)si->created, "owned_by", "pocket", "meta", "arch",
                     si->arch ? si->arch : "", "n_ctx", si->n_ctx, "n_ctx_train", si->n_ctx_train, "n_vocab",
                     si->n_vocab, "n_params", (json_int_t)si->n_params, "size", (json_int_t)si->file_size, "quant",
                     si->quant ? si->quant : "");
}

json_t *misc_model_get(const serve_info *si, const char *id, api_error *e) {
    if (!strcmp(id, si->model_id)) return misc_model_json(si);
    api_fail(e, 404, "model", "The model '%.200s' does not exist; this server serves '%s'", id, si->model_id);
    return NULL;
}

/* ---- llama-server's endpoints ----------------------------------------------------------- */

json_t *misc_parse_body(const char *body, size_t len, api_error *e) {
    /* jansson 2.14 takes a NUL right after a number ('{"a": 1\0}'): JSON text never holds one */
    const char *nul = memchr(body, 0, len);
    if (nul) {
        api_fail(e, 400, NULL, "the body is not valid JSON: a NUL byte at offset %zu", (size_t)(nul - body));
        return NULL;
    }
    json_error_t je;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        api_fail(e, 400, NULL, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        api_fail(e, 400, NULL, "the body must be a JSON object");
        return NULL;
    }
    return v;
}

/* An optional boolean field: 0 with *out set (def when absent or null), -1 with e filled. */
static int opt_bool(const json_t *body, const char *name, int def, int *out, api_error *e) {
    const json_t *v = json_object_get(body, name);
    *out = def;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) {
        api_fail(e, 400, name, "'%s' must be a boolean", name);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

/* The bytes of token id, malloc'ed (*n: their count); NULL when out of memory. */
static char *token_bytes(const pk_model *m, int32_t id, int *n) {
    char small[256];
    int k = pk_model_token_piece(m, id, small, sizeof small);
    if (k < 0) k = 0;
    char *p = malloc((size_t)k + 1);
    if (!p) return NULL;
    if (k <= (int)sizeof small) memcpy(p, small, (size_t)k);
    else if (pk_model_token_piece(m, id, p, k) != k) k = 0;
    *n = k;
    return p;
}

json_t *misc_tokenize(const pk_model *m, const json_t *body, api_error *e) {
    const json_t *content = json_object_get(body, "content");
    int add_special, parse_special, with_pieces;
    if (!json_is_string(content)) {
        api_fail(e, 400, "content", "'content' is required: the text to tokenize, a string");
        return NULL;
    }
    if (opt_bool(body, "add_special", 0, &add_special, e) || opt_bool(body, "parse_special", 1, &parse_special, e) ||
        opt_bool(body, "with_pieces", 0, &with_pieces, e))
        return NULL;
    const char *text = json_string_value(content);
    size_t len = json_string_length(content);
    /* a token covers at least one byte; specials may add a few */
    if (len > (size_t)INT32_MAX / 2) { api_fail(e, 400, "content", "'content' is too long"); return NULL; }
    int cap = (int)len + 8, n;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    n = pk_model_tokenize(m, text, len, ids, cap, add_special, parse_special);
    if (n > cap) {
        int32_t *more = realloc(ids, (size_t)n * sizeof *ids);
        if (!more) { free(ids); api_fail(e, 500, NULL, "out of memory"); return NULL; }
        ids = more;
        n = pk_model_tokenize(m, text, len, ids, n, add_special, parse_special);
    }
    if (n < 0) {
        free(ids);
        api_fail(e, 400, "content", "'content' could not be tokenized: %s", pk_status_str(-n));
        return NULL;
    }
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        if (!with_pieces) { json_array_append_new(arr, json_integer(ids[i])); continue; }
        int k = 0;
        char *b = token_bytes(m, ids[i], &k);
        json_t *piece = b ? json_stringn(b, (size_t)k) : NULL;
        if (b && !piece) {      /* not UTF-8 on its own: its bytes */
            piece = json_array();
            for (int t = 0; piece && t < k; t++) json_array_append_new(piece, json_integer((unsigned char)b[t]));
        }
        free(b);
        if (!piece || json_array_append_new(arr, json_pack("{s:i, s:o}", "id", ids[i], "piece", piece))) {
            json_decref(arr);
            arr = NULL;
        }
    }
    free(ids);
    if (!arr) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    return json_pack("{s:o}", "tokens", arr);
}

json_t *misc_detokenize(const pk_model *m, const json_t *body, api_error *e) {
    const json_t *tokens = json_object_get(body, "tokens");
    if (!json_is_array(tokens)) {
        api_fail(e, 400, "tokens", "'tokens' is required: an array of token ids");
        return NULL;
    }
    int n_vocab = pk_model_n_vocab(m);
    api_buf out = {0};
    for (size_t i = 0; i < json_array_size(tokens); i++) {
        const json_t *t = json_array_get(tokens, i);
        if (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) >= n_vocab) {
            free(out.p);
            if (json_is_integer(t))
                api_fail(e, 400, "tokens", "tokens[%zu] is %lld; token ids are in [0, %d)", i,
                         (long long)json_integer_value(t), n_vocab);
            else
                api_fail(e, 400, "tokens", "tokens[%zu] must be an integer (a token id)", i);
            return NULL;
        }
        int k = 0;
        char *b = token_bytes(m, (int32_t)json_integer_value(t), &k);
        if (!b) out.oom = 1;
        else api_put(&out, b, (size_t)k);
        free(b);
    }
    api_put(&out, "", 0);
    size_t n = 0;
    char *text = out.oom ? NULL : api_utf8_sanitize(out.p, out.n, &n);
    free(out.p);
    json_t *r = text ? json_pack("{s:s%}", "content", text, n) : NULL;
    free(text);
    if (!r) api_fail(e, 500, NULL, "out of memory");
    return r;
}

json_t *misc_props_json(const pk_model *m, const serve_info *si, const misc_props *p) {
    const pk_sampler_params *sp = &p->sp;
    json_t *params = json_pack("{s:i, s:i, s:I, s:f, s:i, s:f, s:f, s:i, s:f, s:f, s:f, s:[], s:b, s:i}",
                               "n_predict", -1, "max_tokens", -1, "seed",
                               p->seed_given ? (json_int_t)sp->seed : (json_int_t)-1, "temperature",
                               (double)sp->temperature, "top_k", sp->top_k, "top_p", (double)sp->top_p, "min_p",
                               (double)sp->min_p, "repeat_last_n", sp->repeat_last_n, "repeat_penalty",
                               (double)sp->repeat_penalty, "presence_penalty", (double)sp->presence_penalty,
                               "frequency_penalty", (double)sp->frequency_penalty, "stop", "stream", 0,
                               "n_probs", 0);
    /* the template: the one in use, else the model's own (pocket formats with a built-in writer of its family) */
    size_t tl = 0;
    const char *tmpl = si->chat_template;
    if (tmpl) tl = strlen(tmpl);
    else tmpl = pk_chat_template_text(m, &tl);
    size_t cl = 0;
    char *tclean = api_utf8_sanitize(tmpl ? tmpl : "", tmpl ? tl : 0, &cl);
    char bos[256] = "";
    int32_t b = pk_model_bos(m);
    if (b >= 0) {
        int k = 0;
        char *t = token_bytes(m, b, &k);
        size_t bl = 0;
        char *c = t ? api_utf8_sanitize(t, (size_t)k, &bl) : NULL;
        if (c && bl < sizeof bos) memcpy(bos, c, bl + 1);
        free(t);
        free(c);
    }
    char build[64];
    snprintf(build, sizeof build, "pocket %s", si->version ? si->version : POCKET_VERSION);
    json_t *r = json_pack("{s:{s:i, s:i, s:b, s:b, s:o?}, s:i, s:s, s:s, s:s%, s:s, s:{s:b, s:b}, s:s, s:s, s:b}",
                          "default_generation_settings", "id", 0, "n_ctx", si->n_ctx, "speculative", 0,
                          "is_processing", 0, "params", params, "total_slots", p->n_parallel, "model_alias",
                          si->model_id, "model_path", si->file ? si->file : "", "chat_template",
                          tclean ? tclean : "", tclean ? cl : 0, "chat_format", p->chat_format ? p->chat_format : "",
                          "modalities", "vision", 0, "audio", 0, "build_info", build, "bos_token", bos,
                          "is_sleeping", 0);
    free(tclean);
    return r;
}

json_t *misc_slots_json(const misc_slot *s, int n) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++) {
        const misc_slot *x = &s[i];
        int remain = !x->is_processing ? 0 : x->max_tokens < 0 ? -1 : x->max_tokens - x->n_decoded;
        json_t *o = json_pack("{s:i, s:i, s:b, s:b, s:i, s:i, s:s?, s:i, s:{s:b, s:i, s:i}}", "id", x->id, "n_ctx",
                              x->n_ctx, "speculative", 0, "is_processing", x->is_processing, "n_tokens", x->n_tokens,
                              "n_checkpoints", x->n_checkpoints, "request_id",
                              x->is_processing ? x->request_id : NULL, "n_prompt_tokens",
                              x->is_processing ? x->n_prompt : 0, "next_token", "has_next_token", x->is_processing,
                              "n_remain", remain, "n_decoded", x->is_processing ? x->n_decoded : 0);
        if (!o || json_array_append_new(arr, o)) { json_decref(arr); arr = NULL; }
    }
    return arr;
}

/* ---- CORS ----------------------------------------------------------------------------------- */

static int is_alpha(char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Whether s[0..n) is scheme://host[:port]: a URL scheme, a host name, IPv4
 * or [IPv6] literal, an optional port; no path, no user. */
static int origin_ok(const char *s, size_t n) {
    size_t i = 0;
    if (i >= n || !is_alpha(s[i])) return 0;
    while (i < n && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '+' || s[i] == '-' || s[i] == '.')) i++;
    if (n - i < 4 || memcmp(s + i, "://", 3)) return 0;
    i += 3;
    size_t h = i;
    if (i < n && s[i] == '[') {
        while (i < n && s[i] != ']') {
            char c = s[i];
            if (!(c == '[' || c == ':' || c == '.' || is_digit(c) || ((c | 32) >= 'a' && (c | 32) <= 'f')))
                return 0;
            i++;
        }
        if (i >= n) return 0;
        i++;
    } else {
        while (i < n && (is_alpha(s[i]) || is_digit(s[i]) || s[i] == '-' || s[i] == '.')) i++;
    }
    if (i == h) return 0;
    if (i < n && s[i] == ':') {
        size_t p = ++i;
        while (i < n && is_digit(s[i])) i++;
        if (i == p || i - p > 5) return 0;
    }
    return i == n;
}

int cors_add(serve_cors *c, const char *list, char *err, size_t cap) {
    const char *p = list;
    for (;;) {
        while (*p == ' ') p++;
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && p[n - 1] == ' ') n--;
        if (n && p[n - 1] == '/' && n > 1 && p[n - 2] != '/') n--;    /* "http://a:3000/": what a browser sends has no slash */
        if (n == 1 && *p == '*') {
            c->any = 1;
        } else if (!n || n >= sizeof c->origin[0] || !origin_ok(p, n)) {
            snprintf(err, cap, "--cors '%.*s': an origin is '*' or scheme://host[:port] (as a browser sends it in "
                     "Origin, e.g. http://localhost:3000)", (int)(n > 200 ? 200 : n), p);
            return -1;
        } else if (c->n >= CORS_MAX) {
            snprintf(err, cap, "--cors: at most %d origins", CORS_MAX);
            return -1;
        } else {
            memcpy(c->origin[c->n], p, n);
            c->origin[c->n++][n] = 0;
        }
        if (!end) return 0;
        p = end + 1;
    }
}

const char *cors_allowed(const serve_cors *c, const char *origin) {
    if (!origin || !*origin || (!c->any && !c->n)) return NULL;
    size_t n = strlen(origin);
    if (n >= sizeof c->origin[0]) return NULL;
    for (size_t i = 0; i < n; i++)   /* echoed into a header: visible ASCII only */
        if ((unsigned char)origin[i] <= 0x20 || (unsigned char)origin[i] >= 0x7f) return NULL;
    if (c->any) return origin;
    for (int i = 0; i < c->n; i++)
        if (!strcasecmp(c->origin[i], origin)) return origin;
    return NULL;
}

static int tchar(char c) {
    return is_digit(c) || is_alpha(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

void cors_allow_headers(const char *requested, char *buf, size_t cap) {
    static const char fixed[] = "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta, "
                                "Anthropic-Dangerous-Direct-Browser-Access, OpenAI-Organization, OpenAI-Project";
    int ok = requested && *requested && strlen(requested) + sizeof fixed + 2 <= cap;
    for (const char *q = requested; ok && *q; q++) ok = tchar(*q) || *q == ',' || *q == ' ';
    snprintf(buf, cap, "%s%s%s", fixed, ok ? ", " : "", ok ? requested : "");
}

/* ---- the access log ------------------------------------------------------------------------ */

static void copy_str(char *dst, size_t cap, const char *s) {
    snprintf(dst, cap, "%s", s ? s : "");
}

void access_begin(serve_access *a, const char *method, const char *url, const char *client, double t0) {
    memset(a, 0, sizeof *a);
    copy_str(a->method, sizeof a->method, method);
    copy_str(a->path, sizeof a->path, url);
    copy_str(a->client, sizeof a->client, client);
    a->t0 = t0;
    a->n_prompt = a->n_cached = a->n_gen = -1;
}

void access_error(serve_access *a, const json_t *body) {
    const json_t *err = json_object_get(body, "error");
    const json_t *msg = json_is_object(err) ? json_object_get(err, "message") : err;
    if (json_is_string(msg)) copy_str(a->msg, sizeof a->msg, json_string_value(msg));
}

typedef struct wbuf { char *p; size_t cap, k; } wbuf;

static void w_printf(wbuf *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void w_printf(wbuf *w, const char *fmt, ...) {
    if (w->k + 1 >= w->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(w->p + w->k, w->cap - w->k, fmt, ap);
    va_end(ap);
    if (r > 0) w->k = (size_t)r < w->cap - w->k ? w->k + (size_t)r : w->cap - 1;
}

/* s with control, quote, backslash and non-ASCII bytes (and spaces, if
 * space) as \xHH: one line, no terminal escapes, one field */
static void w_escaped(wbuf *w, const char *s, int space) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c >= 0x7f || c == '\\' || c == '"' || (space && c == ' ')) w_printf(w, "\\x%02X", c);
        else w_printf(w, "%c", c);
    }
}

void access_line(const serve_access *a, double t_end, char *buf, size_t cap) {
    wbuf w = {buf, cap, 0};
    if (cap) buf[0] = 0;
    struct timespec ts;
    struct tm tm;
    char when[32] = "";
    clock_gettime(CLOCK_REALTIME, &ts);
    if (gmtime_r(&ts.tv_sec, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    double ms = (t_end - a->t0) * 1e3;
    w_printf(&w, "access %s.%03ldZ %s ", when, ts.tv_nsec / 1000000L, a->client[0] ? a->client : "-");
    w_escaped(&w, a->method, 1);
    w_printf(&w, " ");
    w_escaped(&w, a->path, 1);
    w_printf(&w, " %d %.0f ms", a->status ? a->status : 499, ms > 0 ? ms : 0.0);
    if (a->n_prompt >= 0)
        w_printf(&w, " prompt %d cached %d generated %d", a->n_prompt, a->n_cached > 0 ? a->n_cached : 0,
                 a->n_gen > 0 ? a->n_gen : 0);
    if (!a->status) w_printf(&w, " (the client closed the connection)");
    if (a->msg[0]) {
        w_printf(&w, " error: ");
        w_escaped(&w, a->msg, 0);
    }
}
