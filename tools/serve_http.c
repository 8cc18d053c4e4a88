/* serve_http.c - `pocket serve` over HTTP (tools/serve.h): libmicrohttpd's
 * callbacks (on_request, on_completed), the route table, what can be
 * answered from the request line and headers (404, 405, 401, 413), the body
 * read within --max-body, the endpoints that are not completions (the page,
 * /health, /metrics, /v1/models, /apply-template, Anthropic's count_tokens,
 * Ollama's small endpoints, llama-server's /tokenize, /detokenize, /props,
 * /slots, OPTIONS and CORS), every response sent (counted for /metrics) and
 * each request's access log line. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "serve.h"
#include "serve_anthropic.h"
#include "serve_ollama.h"
#include "webui.h"

/* The other APIs' translators, routed when their files are built in. */
extern const serve_api serve_api_anthropic __attribute__((weak));
extern const serve_api serve_api_responses __attribute__((weak));
extern const serve_api serve_api_ollama_chat __attribute__((weak));
extern const serve_api serve_api_ollama_generate __attribute__((weak));
json_t *anthropic_count_request(const json_t *body, const serve_info *si, api_error *e) __attribute__((weak));
json_t *ollama_tags(const serve_info *si) __attribute__((weak));

/* ---- HTTP helpers -------------------------------------------------------------------- */

/* The request this connection's thread is answering (tools/serve.h). */
_Thread_local request *cur_rq;

/* --cors: Vary: Origin on every response (they differ by it), and
 * Access-Control-Allow-Origin when the request's Origin is allowed. */
static void cors_headers(struct MHD_Connection *c, struct MHD_Response *r) {
    if (!S.cors.any && !S.cors.n) return;
    MHD_add_response_header(r, "Vary", "Origin");
    const char *o = cors_allowed(&S.cors, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"));
    if (o) MHD_add_response_header(r, "Access-Control-Allow-Origin", o);
}

void access_write(const serve_access *a) {
    if (S.quiet && a->status && a->status < 400) return;
    char line[1024];
    access_line(a, now(), line, sizeof line);
    fprintf(stderr, "pocket serve: %s\n", line);
}

/* A's tokens from a request's n jobs (its choices), and why one did not
 * finish (mu held). */
void access_jobs_locked(serve_access *a, job *const *jobs, int n) {
    a->n_prompt = jobs[0]->n_prompt;
    a->n_cached = jobs[0]->n_cached;
    a->n_gen = 0;
    for (int i = 0; i < n; i++) {
        const job *j = jobs[i];
        a->n_gen += j->n_gen;
        if (!j->finish && !a->msg[0])
            snprintf(a->msg, sizeof a->msg, "%s%.200s",
                     j->err[0] ? "generation failed: " : "cancelled: the client went away", j->err);
    }
}

/* Queue r (destroyed here) and count the status for /metrics. */
mhd_result send_response(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    pthread_mutex_lock(&S.mu);
    if (status < 600) S.status_count[status]++;
    pthread_mutex_unlock(&S.mu);
    if (cur_rq) cur_rq->acc.status = (int)status;
    cors_headers(c, r);
    mhd_result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static mhd_result send_buffer(struct MHD_Connection *c, unsigned status, const char *ctype,
                              const char *data, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    /* JSON may quote the request (a 404 names the path): never let a
       browser sniff it as HTML */
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    return send_response(c, status, r);
}

/* Send a JSON value (stolen). */
mhd_result send_json(struct MHD_Connection *c, unsigned status, json_t *v) {
    if (status >= 400 && cur_rq && v) access_error(&cur_rq->acc, v);
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":null}}";
        return send_buffer(c, 500, "application/json", oom, sizeof oom - 1);
    }
    mhd_result r = send_buffer(c, status, "application/json", s, strlen(s));
    free(s);
    return r;
}

int client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) < 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* Whether h is the API key, in constant time in the key's content: every
 * byte of the key is compared, whatever the first difference. */
static int key_equal(const char *h) {
    size_t a = strlen(h), b = strlen(S.api_key);
    unsigned diff = (unsigned)(a != b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)S.api_key[i] ^ (unsigned char)(i < a ? h[i] : 0);
    return diff == 0;
}

/* authz: the Authorization header ("Bearer KEY"), xkey: x-api-key
 * (Anthropic's clients send it); NULL if absent. */
static int auth_ok(const char *authz, const char *xkey) {
    if (!S.has_api_key) return 1;
    if (xkey && key_equal(xkey)) return 1;
    if (!authz || strncasecmp(authz, "Bearer ", 7)) return 0;
    authz += 7;
    while (*authz == ' ') authz++;
    return key_equal(authz);
}

/* ---- endpoints ------------------------------------------------------------------------ */

/* llama-server's /apply-template: {messages, tools?, chat_template_kwargs?,
 * reasoning_effort?} -> {"prompt": the text the model would be given}. */
static mhd_result handle_apply_template(struct MHD_Connection *c, request *rq) {
    api_error e = {0};
    json_t *conv = NULL, *root = parse_body(rq->body ? rq->body : "", rq->len, &e);
    char *text = NULL;
    if (root && (conv = conversation_json(root, &e)))
        text = render_chat(conv, json_array_size(json_object_get(conv, "messages")), 1, &e);
    json_decref(conv);
    json_decref(root);
    if (!text) return send_api_error(c, &serve_api_openai_chat, &e);
    json_t *v = json_pack("{s:o}", "prompt", json_text(text, strlen(text)));
    free(text);
    return send_json(c, 200, v);
}

/* Anthropic's POST /v1/messages/count_tokens: the body translated as
 * /v1/messages translates it (tools/serve_anthropic.h), its prompt rendered
 * and tokenized as a request's would be: {"input_tokens": N}. */
json_t *anthropic_count_json(const char *body, size_t blen, api_error *e) {
    json_t *conv = NULL, *oreq = NULL, *root = parse_body(body, blen, e);
    char *text = NULL;
    if (root) oreq = anthropic_count_request(root, &S.info, e);
    if (oreq && (conv = conversation_json(oreq, e)))
        text = render_chat(conv, json_array_size(json_object_get(conv, "messages")), 1, e);
    json_decref(conv);
    json_decref(oreq);
    json_decref(root);
    if (!text) return NULL;
    size_t len = strlen(text);
    int32_t *tok = len + 2 <= (size_t)INT_MAX ? malloc((len + 2) * sizeof *tok) : NULL;
    int n = tok ? pk_model_tokenize(S.model, text, len, tok, (int)len + 2, 1, 1) : -PK_ERR_NOMEM;
    free(tok);
    free(text);
    if (n == -PK_ERR_NOMEM) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    if (n < 0) { api_fail(e, 400, "messages", "the prompt could not be tokenized: %s", pk_status_str(-n)); return NULL; }
    json_t *v = anthropic_count_response(n);
    if (!v) api_fail(e, 500, NULL, "out of memory");
    return v;
}

static mhd_result handle_anthropic_count(struct MHD_Connection *c, request *rq) {
    api_error e = {0};
    json_t *v = anthropic_count_json(rq->body ? rq->body : "", rq->len, &e);
    return v ? send_json(c, 200, v) : send_api_error(c, &serve_api_anthropic, &e);
}

static mhd_result handle_metrics(struct MHD_Connection *c) {
    size_t cap = 16384, k = 0;
    char *b = malloc(cap);
    if (!b) return MHD_NO;
#define P(...) do { int w_ = snprintf(b + k, cap - k, __VA_ARGS__); if (w_ > 0) k += (size_t)w_ < cap - k ? (size_t)w_ : cap - k - 1; } while (0)
    pthread_mutex_lock(&S.mu);
    P("# HELP pocket_requests_total HTTP requests answered, by status code.\n# TYPE pocket_requests_total counter\n");
    for (int s = 100; s < 600; s++)
        if (S.status_count[s]) P("pocket_requests_total{status=\"%d\"} %llu\n", s, (unsigned long long)S.status_count[s]);
    P("# HELP pocket_prompt_tokens_total Prompt tokens processed (those served from a cache not counted).\n"
      "# TYPE pocket_prompt_tokens_total counter\npocket_prompt_tokens_total %llu\n", (unsigned long long)S.prompt_tokens_total);
    P("# HELP pocket_prompt_tokens_cached_total Prompt tokens served from a slot or a stored state, not processed.\n"
      "# TYPE pocket_prompt_tokens_cached_total counter\npocket_prompt_tokens_cached_total %llu\n",
      (unsigned long long)S.prompt_tokens_cached_total);
    P("# HELP pocket_generated_tokens_total Tokens generated.\n# TYPE pocket_generated_tokens_total counter\n"
      "pocket_generated_tokens_total %llu\n", (unsigned long long)S.gen_tokens_total);
    P("# HELP pocket_tokens_per_second Generation speed per sequence since start.\n# TYPE pocket_tokens_per_second gauge\n"
      "pocket_tokens_per_second %.3f\n", S.gen_seconds_total > 0 ? S.gen_tokens_total / S.gen_seconds_total : 0.0);
    P("# HELP pocket_prompt_tokens_per_second Prompt processing speed since start.\n# TYPE pocket_prompt_tokens_per_second gauge\n"
      "pocket_prompt_tokens_per_second %.3f\n", S.prompt_seconds_total > 0 ? S.prompt_tokens_total / S.prompt_seconds_total : 0.0);
    uint64_t tok = 0, bytes = 0;
    for (int i = 0; i < S.n_parallel; i++) { tok += S.slots[i].st_tokens; bytes += S.slots[i].st_bytes; }
    P("# HELP pocket_weight_bytes_per_token Weight bytes read per decoded token (all slots, since start).\n"
      "# TYPE pocket_weight_bytes_per_token gauge\npocket_weight_bytes_per_token %.1f\n", tok ? (double)bytes / tok : 0.0);
    P("# HELP pocket_requests_cancelled_total Generations cancelled because the client went away.\n"
      "# TYPE pocket_requests_cancelled_total counter\npocket_requests_cancelled_total %llu\n", (unsigned long long)S.cancelled_total);
    P("# HELP pocket_requests_rejected_total Requests rejected because the queue was full.\n"
      "# TYPE pocket_requests_rejected_total counter\npocket_requests_rejected_total %llu\n", (unsigned long long)S.rejected_busy_total);
    P("# HELP pocket_queue_depth Requests waiting for a slot.\n# TYPE pocket_queue_depth gauge\npocket_queue_depth %d\n", S.n_waiting);
    P("# HELP pocket_busy_slots Slots generating.\n# TYPE pocket_busy_slots gauge\npocket_busy_slots %d\n", S.n_running);
    P("# HELP pocket_slots Parallel sequences (--parallel).\n# TYPE pocket_slots gauge\npocket_slots %d\n", S.n_parallel);
    P("# HELP pocket_queue_capacity Queue bound (--queue).\n# TYPE pocket_queue_capacity gauge\npocket_queue_capacity %d\n", S.n_queue);
    int ckpts = 0;
    for (int i = 0; i < S.n_parallel; i++) ckpts += S.slots[i].st_ckpts;
    P("# HELP pocket_context_checkpoints Recurrent-state checkpoints held by the slots.\n"
      "# TYPE pocket_context_checkpoints gauge\npocket_context_checkpoints %d\n", ckpts);
    P("# HELP pocket_context_checkpoint_bytes Bytes of the checkpoints held by the slots.\n"
      "# TYPE pocket_context_checkpoint_bytes gauge\npocket_context_checkpoint_bytes %llu\n",
      (unsigned long long)(S.ckpt_bytes * (uint64_t)ckpts));
    pthread_mutex_unlock(&S.mu);
    pcache_stats cs;
    pcache_get_stats(S.cache, &cs);
    P("# HELP pocket_cache_states Conversation states stored (--cache-ram, --cache-dir).\n# TYPE pocket_cache_states gauge\n"
      "pocket_cache_states{store=\"ram\"} %d\npocket_cache_states{store=\"dir\"} %d\n", cs.ram_states, cs.file_states);
    P("# HELP pocket_cache_bytes Bytes of the stored states.\n# TYPE pocket_cache_bytes gauge\n"
      "pocket_cache_bytes{store=\"ram\"} %llu\npocket_cache_bytes{store=\"dir\"} %llu\n",
      (unsigned long long)cs.ram_bytes, (unsigned long long)cs.file_bytes);
    P("# HELP pocket_cache_saves_total States stored when their slot was reused.\n# TYPE pocket_cache_saves_total counter\n"
      "pocket_cache_saves_total %llu\n", (unsigned long long)cs.saves);
    P("# HELP pocket_cache_restores_total States loaded into a slot.\n# TYPE pocket_cache_restores_total counter\n"
      "pocket_cache_restores_total{store=\"ram\"} %llu\npocket_cache_restores_total{store=\"dir\"} %llu\n",
      (unsigned long long)cs.restores_ram, (unsigned long long)cs.restores_file);
    P("# HELP pocket_cache_refused_total Stored states refused at load (corrupt, foreign), not used.\n"
      "# TYPE pocket_cache_refused_total counter\npocket_cache_refused_total %llu\n", (unsigned long long)cs.refused);
#undef P
    mhd_result r = send_buffer(c, 200, "text/plain; version=0.0.4; charset=utf-8", b, k);
    free(b);
    return r;
}

json_t *models_json(void) {
    return json_pack("{s:s, s:[o]}", "object", "list", "data", misc_model_json(&S.info));
}

/* /props: llama-server's, as far as it applies. */
json_t *props_json(void) {
    misc_props p = {.chat_format = S.chat_template, .n_parallel = S.n_parallel, .sp = S.sp, .seed_given = S.seed_given};
    return misc_props_json(S.model, &S.info, &p);
}

/* /slots: what each slot holds and does; *idle: how many are idle. */
json_t *slots_json(int *idle) {
    misc_slot *v = calloc((size_t)S.n_parallel, sizeof *v);
    if (!v) return NULL;
    *idle = 0;
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < S.n_parallel; i++) {
        const slot *s = &S.slots[i];
        const job *j = s->job;
        /* an idle slot's context is not touched while mu is held (choose_slot_locked reads it too) */
        v[i] = (misc_slot){.id = i, .n_ctx = S.n_ctx, .is_processing = j != NULL,
                           .n_tokens = j ? s->held : pk_context_pos(s->ctx), .n_checkpoints = s->st_ckpts};
        if (!j) { (*idle)++; continue; }
        snprintf(v[i].request_id, sizeof v[i].request_id, "%s", j->id);
        v[i].n_prompt = j->n_prompt;
        v[i].n_decoded = j->n_gen;
        v[i].max_tokens = j->max_tokens;
    }
    pthread_mutex_unlock(&S.mu);
    json_t *out = misc_slots_json(v, S.n_parallel);
    free(v);
    return out;
}

/* OPTIONS: 204 with Allow (the path's methods); a CORS preflight from an
 * origin --cors allows gets the Access-Control-Allow-* answer too (the
 * origin itself: send_response). Without --cors, or from another origin,
 * the browser finds no permission and refuses the request, as before. */
static mhd_result handle_options(struct MHD_Connection *c, int get, int post) {
    char allow[64], hdrs[1024];
    snprintf(allow, sizeof allow, "%s%sOPTIONS", get ? "GET, HEAD, " : "", post ? "POST, " : "");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Allow", allow);
    const char *origin = cors_allowed(&S.cors, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"));
    if (origin && MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
        cors_allow_headers(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers"), hdrs,
                           sizeof hdrs);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
        MHD_add_response_header(r, "Access-Control-Allow-Headers", hdrs);
        MHD_add_response_header(r, "Access-Control-Max-Age", "7200");
        /* Chromium's private network access: a public page calling a server on this machine */
        if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Private-Network"))
            MHD_add_response_header(r, "Access-Control-Allow-Private-Network", "true");
    }
    return send_response(c, 204, r);
}

/* Ollama's endpoints beside /api/chat and /api/generate (tools/serve_ollama.c). */
#define R_IS_OLLAMA(r) ((r) >= R_OLLAMA_TAGS && (r) <= R_OLLAMA_SHOW)

/* The endpoints: a completion endpoint (R_API) is its API's translation
 * (an API whose file is not built in has no address: no route). */
static const struct route_entry {
    const char *path, *method;
    int id;
    const serve_api *api;
} ROUTES[] = {
    {.path = "/", .method = "GET", .id = R_INDEX},
    {.path = "/index.html", .method = "GET", .id = R_INDEX},
    {.path = "/health", .method = "GET", .id = R_HEALTH},
    {.path = "/metrics", .method = "GET", .id = R_METRICS},
    {.path = "/v1/models", .method = "GET", .id = R_MODELS},
    {.path = "/models", .method = "GET", .id = R_MODELS},
    {.path = "/apply-template", .method = "POST", .id = R_APPLY_TEMPLATE},
    {.path = "/tokenize", .method = "POST", .id = R_TOKENIZE},
    {.path = "/detokenize", .method = "POST", .id = R_DETOKENIZE},
    {.path = "/props", .method = "GET", .id = R_PROPS},
    {.path = "/slots", .method = "GET", .id = R_SLOTS},
    {.path = "/v1/chat/completions", .method = "POST", .id = R_API, .api = &serve_api_openai_chat},
    {.path = "/chat/completions", .method = "POST", .id = R_API, .api = &serve_api_openai_chat},
    {.path = "/v1/completions", .method = "POST", .id = R_API, .api = &serve_api_openai_completions},
    {.path = "/completions", .method = "POST", .id = R_API, .api = &serve_api_openai_completions},
    {.path = "/v1/messages", .method = "POST", .id = R_API, .api = &serve_api_anthropic},
    {.path = "/v1/messages/count_tokens", .method = "POST", .id = R_ANTHROPIC_COUNT, .api = &serve_api_anthropic},
    {.path = "/v1/responses", .method = "POST", .id = R_API, .api = &serve_api_responses},
    {.path = "/api/chat", .method = "POST", .id = R_API, .api = &serve_api_ollama_chat},
    {.path = "/api/generate", .method = "POST", .id = R_API, .api = &serve_api_ollama_generate},
    {.path = "/api/tags", .method = "GET", .id = R_OLLAMA_TAGS, .api = &serve_api_ollama_chat},
    {.path = "/api/ps", .method = "GET", .id = R_OLLAMA_PS, .api = &serve_api_ollama_chat},
    {.path = "/api/version", .method = "GET", .id = R_OLLAMA_VERSION, .api = &serve_api_ollama_chat},
    {.path = "/api/show", .method = "POST", .id = R_OLLAMA_SHOW, .api = &serve_api_ollama_chat},
};

/* GET /v1/models/{id}: the id in url (NULL: not such a path). Ids may hold '/'. */
static const char *model_of_path(const char *url) {
    if (!strncmp(url, "/v1/models/", 11)) return url + 11;
    if (!strncmp(url, "/models/", 8)) return url + 8;
    return NULL;
}

/* The route of url (R_NONE: none), whether method is the route's, and its
 * API (OpenAI's shapes for the routes that have none). */
int route(const char *url, const char *method, int *method_ok, const serve_api **api) {
    *api = &serve_api_openai_chat;
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        if (strcmp(url, ROUTES[i].path) || (ROUTES[i].id == R_API && !ROUTES[i].api) ||
            (ROUTES[i].id == R_ANTHROPIC_COUNT && !anthropic_count_request) ||
            (R_IS_OLLAMA(ROUTES[i].id) && !ollama_tags))
            continue;
        *method_ok = !strcmp(method, ROUTES[i].method) || (!strcmp(method, "HEAD") && !strcmp(ROUTES[i].method, "GET"));
        if (ROUTES[i].api) *api = ROUTES[i].api;
        return ROUTES[i].id;
    }
    if (model_of_path(url)) {
        *method_ok = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        return R_MODEL;
    }
    return R_NONE;
}

/* What can be answered from the request line and headers alone (authz,
 * xkey and content_length: the Authorization, x-api-key and Content-Length
 * headers, NULL if absent): 0 to go on and read the body, else the HTTP
 * status, with e filled. */
int precheck(int r, int method_ok, const char *method, const char *url, const char *authz, const char *xkey,
                    const char *content_length, api_error *e) {
    if (r == R_NONE) {
        api_fail(e, 404, NULL, "no such endpoint: %s %.200s", method, url);
        set_code(e, "not_found");
        return 404;
    }
    if (!method_ok) {
        api_fail(e, 405, NULL, "%s is not allowed on %.200s", method, url);
        set_code(e, "method_not_allowed");
        return 405;
    }
    if (r != R_INDEX && r != R_HEALTH && !auth_ok(authz, xkey)) {
        api_fail(e, 401, NULL, "missing or incorrect API key: send the header 'Authorization: Bearer KEY' "
                 "(or 'x-api-key: KEY')");
        set_code(e, "invalid_api_key");
        return 401;
    }
    if (content_length) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(content_length, &end, 10);
        if (errno || end == content_length || x > S.max_body) {
            api_fail(e, 413, NULL, "the request body is larger than %zu bytes (--max-body)", S.max_body);
            set_code(e, "request_too_large");
            return 413;
        }
    }
    return 0;
}

/* The request path, percent-decoded as libmicrohttpd does, except that a
 * path with an encoded NUL (%00) is left as sent: decoded, "/%00" would end
 * at the NUL and be served as "/". */
size_t unescape_path(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    return strstr(s, "%00") ? strlen(s) : MHD_http_unescape(s);
}

/* The peer's address as text ("" if unknown); a static buffer per thread. */
static const char *client_address(struct MHD_Connection *c) {
    static _Thread_local char buf[INET6_ADDRSTRLEN];
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    buf[0] = 0;
    if (!ci || !ci->client_addr) return buf;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6) inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, sizeof buf);
    return buf;
}

mhd_result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    request *rq = *con_cls;
    int method_ok = 0;
    const serve_api *api;
    int r = route(url, method, &method_ok, &api);
    if (!rq) {
        /* Headers only: answer what can be answered without the body. */
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        rq->t0 = now();
        *con_cls = rq;
        cur_rq = rq;
        access_begin(&rq->acc, method, url, client_address(c), rq->t0);
        if (!strcmp(method, "OPTIONS") && r != R_NONE) {
            int get = 0, post = 0;
            const serve_api *ignored;
            route(url, "GET", &get, &ignored);
            route(url, "POST", &post, &ignored);
            rq->answered = 1;
            return handle_options(c, get, post);
        }
        api_error e = {0};
        int status = precheck(r, method_ok, method, url,
                              MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                              MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"),
                              MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH), &e);
        if (status) {
            rq->answered = 1;
            return send_api_error(c, api, &e);
        }
        return MHD_YES;
    }
    cur_rq = rq;
    if (*upload_size) {
        if (!rq->answered && !rq->too_big) {
            size_t n = *upload_size;
            if (rq->len + n > S.max_body) {
                rq->too_big = 1;
                free(rq->body);
                rq->body = NULL;
                rq->len = rq->cap = 0;
            } else {
                if (rq->len + n + 1 > rq->cap) {
                    size_t cap = rq->cap ? rq->cap : 4096;
                    while (cap < rq->len + n + 1) cap *= 2;
                    char *b = realloc(rq->body, cap);
                    if (!b) return MHD_NO;
                    rq->body = b;
                    rq->cap = cap;
                }
                memcpy(rq->body + rq->len, upload, n);
                rq->len += n;
                rq->body[rq->len] = 0;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->answered) return MHD_YES;
    rq->answered = 1;
    api_error e = {0};
    if (rq->too_big) {
        api_fail(&e, 413, NULL, "the request body is larger than %zu bytes (--max-body)", S.max_body);
        set_code(&e, "request_too_large");
        return send_api_error(c, api, &e);
    }
    switch (r) {
    case R_INDEX: {
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(webui_html), (void *)webui_html, MHD_RESPMEM_PERSISTENT);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:");
        return send_response(c, 200, resp);
    }
    case R_HEALTH: {
        pk_error ferr = {0};
        if (pk_model_check_file(S.model, &ferr)) {
            api_fail(&e, 503, NULL, "%s", ferr.msg);
            set_code(&e, "model_file_changed");
            return send_api_error(c, api, &e);
        }
        return send_json(c, 200, json_pack("{s:s}", "status", "ok"));
    }
    case R_METRICS: return handle_metrics(c);
    case R_MODELS: return send_json(c, 200, models_json());
    case R_API: return handle_api(c, rq, api);
    case R_APPLY_TEMPLATE: return handle_apply_template(c, rq);
    case R_ANTHROPIC_COUNT: return handle_anthropic_count(c, rq);
    case R_OLLAMA_TAGS: return send_json(c, 200, ollama_tags(&S.info));
    case R_OLLAMA_PS: return send_json(c, 200, ollama_ps(&S.info));
    case R_OLLAMA_VERSION: return send_json(c, 200, ollama_version(&S.info));
    case R_OLLAMA_SHOW: {
        json_t *root = parse_body(rq->body ? rq->body : "", rq->len, &e), *v = root ? ollama_show(root, &S.info, &e) : NULL;
        json_decref(root);
        return v ? send_json(c, 200, v) : send_api_error(c, api, &e);
    }
    case R_MODEL: {
        json_t *m = misc_model_get(&S.info, model_of_path(url), &e);
        if (!m && e.status == 404) set_code(&e, "model_not_found");
        return m ? send_json(c, 200, m) : send_api_error(c, api, &e);
    }
    case R_TOKENIZE:
    case R_DETOKENIZE: {
        json_t *body = misc_parse_body(rq->body ? rq->body : "", rq->len, &e);
        json_t *out = !body ? NULL : r == R_TOKENIZE ? misc_tokenize(S.model, body, &e) : misc_detokenize(S.model, body, &e);
        json_decref(body);
        return out ? send_json(c, 200, out) : send_api_error(c, api, &e);
    }
    case R_PROPS: return send_json(c, 200, props_json());
    case R_SLOTS: {
        int idle = 0;
        json_t *out = slots_json(&idle);
        const char *f = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
        if (out && !idle && f && strcmp(f, "0")) {
            json_decref(out);
            api_fail(&e, 503, NULL, "no slot is idle (%d busy)", S.n_parallel);
            set_code(&e, "no_slot_available");
            return send_api_error(c, api, &e);
        }
        return send_json(c, 200, out);
    }
    }
    return MHD_NO;
}

void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    request *rq = *con_cls;
    if (!rq) return;
    if (!rq->streamed) access_write(&rq->acc);
    if (cur_rq == rq) cur_rq = NULL;
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

void mhd_log(void *cls, const char *fmt, va_list ap) {
    fputs("pocket serve: microhttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}
