/* fuzz_serve.c - libFuzzer harness: `pocket serve`'s request handling as a
 * function, without sockets: the server's files are linked in
 * (tools/serve.h declares what the HTTP callbacks call), with the bundled model, a
 * 32-token context, an API key and a 4 KiB body limit; chatml built in, or
 * Qwen3.5's Jinja template (tests/data/templates/).
 *
 * Input: byte 0's low 7 bits pick the route and method (chat and text
 * completions, health, models, metrics, the page, an unknown path, a wrong
 * method, /tokenize, /detokenize, /props, /slots, /v1/models/{id}, an
 * OPTIONS preflight, Anthropic's count_tokens, Ollama's /api/show and
 * /api/tags, whose answers are checked in their API's shape), its high bit
 * the template; byte 1 the Authorization, x-api-key and Content-Length
 * headers, byte 2 whether a
 * valid completion is generated (byte 2 = 'g', for 1 in 64 such inputs: at most 2 tokens, on the calling
 * thread); the rest is the body. The answer goes through the same
 * functions as on the wire: precheck (route, method, key, length),
 * the API's request translation, parse_request (JSON, fields, template,
 * tools, grammar, tokenizer; n jobs), run_job and the result, and the same
 * text streamed in two pieces through the API's stream (every event JSON);
 * serve_misc.c's endpoints with the body (the id of /v1/models/{id} too).
 * Every answer must serialise to valid JSON that
 * parses back: an OpenAI-style error object {"error": {"message": non-empty
 * string, "type": string, "code": ...}} with a 4xx/5xx status, or a result.
 * A preflight takes the body as its Origin and Access-Control-Request-Headers
 * lines (and as a --cors value): what goes back into a header must be
 * visible ASCII, and the access log line of the body as path and message one
 * line of it. Anything else aborts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/serve.h"
#include "../tools/serve_ollama.h"

static slot fuzz_slot;
static pk_jinja *tmpl;
static char *tmpl_text;
static size_t tmpl_len;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    pk_error err = {0};
    if (pk_model_load("models/kjv-moe-f16.gguf", &S.model, &err)) {
        fprintf(stderr, "fuzz_serve: %s (run from the project root)\n", err.msg);
        exit(1);
    }
    snprintf(S.model_id, sizeof S.model_id, "kjv-moe-f16");
    snprintf(S.api_key, sizeof S.api_key, "s3cret-key");
    S.has_api_key = 1;
    S.quiet = 1;
    S.sp = pk_sampler_default_params();
    S.seed_given = 1;
    S.chat_template = "chatml";
    S.n_parallel = 1;
    S.n_queue = 1;
    S.max_body = 4096;
    char cerr[256];
    if (cors_add(&S.cors, "http://localhost:3000, https://app.example.org:8443/", cerr, sizeof cerr)) abort();
    pthread_mutex_init(&S.mu, NULL);
    pthread_cond_init(&S.work_cv, NULL);
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = 32;
    cp.n_threads = 1;
    if (pk_context_new(S.model, &cp, &fuzz_slot.ctx, &err)) { fprintf(stderr, "fuzz_serve: %s\n", err.msg); exit(1); }
    S.slots = &fuzz_slot;
    S.n_ctx = pk_context_n_ctx(fuzz_slot.ctx);
    S.info = (serve_info){.model_id = S.model_id, .arch = "qwen3moe", .file = "models/kjv-moe-f16.gguf",
                          .n_ctx = S.n_ctx, .n_vocab = pk_model_n_vocab(S.model), .version = POCKET_VERSION};
    /* inputs with bit 7 of byte 0 set run Qwen3.5's Jinja template (tools,
       tool calls, reasoning), the others the built-in chatml */
    size_t n;
    tmpl_text = read_file("tests/data/templates/Qwen3.5-4B.jinja", &n);
    if (pk_jinja_parse(tmpl_text, n, 0, &tmpl, &err)) { fprintf(stderr, "fuzz_serve: %s\n", err.msg); exit(1); }
    tmpl_len = n;
    return 0;
}

/* s must be visible ASCII (and spaces, if spaces): what goes into a header or a log line. */
static void check_visible(const char *what, const char *s, int spaces) {
    for (const char *q = s; *q; q++)
        if ((unsigned char)*q < (spaces ? 0x20 : 0x21) || (unsigned char)*q >= 0x7f) {
            fprintf(stderr, "%s: byte 0x%02x at %zu\n", what, (unsigned char)*q, (size_t)(q - s));
            abort();
        }
}

/* The preflight and the log line: origin, requested headers and a --cors value from the body. */
static void check_cors_and_log(const char *body, size_t len) {
    char *t = malloc(len + 1);
    if (!t) abort();
    memcpy(t, body, len);
    t[len] = 0;
    char *nl = strchr(t, '\n');
    const char *acrh = nl ? nl + 1 : NULL;
    if (nl) *nl = 0;
    const char *o = cors_allowed(&S.cors, t);
    if (o) check_visible("Access-Control-Allow-Origin", o, 0);
    char hdrs[1024];
    cors_allow_headers(acrh, hdrs, sizeof hdrs);
    check_visible("Access-Control-Allow-Headers", hdrs, 1);
    serve_cors any = {.any = 1}, c = {0};
    if ((o = cors_allowed(&any, t))) check_visible("Access-Control-Allow-Origin (*)", o, 0);
    char err[512];
    if (!cors_add(&c, t, err, sizeof err))
        for (int i = 0; i < c.n; i++) check_visible("--cors origin", c.origin[i], 0);
    serve_access a;
    access_begin(&a, "POST", t, "127.0.0.1", now());
    a.status = 400;
    json_t *e = json_pack("{s:{s:s}}", "error", "message", acrh ? acrh : t);
    if (e) access_error(&a, e);
    json_decref(e);
    char line[1024];
    access_line(&a, now(), line, sizeof line);
    check_visible("access log line", line, 1);
    free(t);
}

/* v (stolen), an answer of another API than OpenAI's: JSON that parses
 * back, and for a refusal an error naming a non-empty message (Anthropic's
 * {"type": "error", "error": {"message"}}, Ollama's {"error": "..."}). */
static void check_other(int status, json_t *v) {
    if (!v) { fprintf(stderr, "no JSON for status %d\n", status); abort(); }
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    json_t *back = s ? json_loads(s, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL) : NULL;
    if (!back) { fprintf(stderr, "status %d: invalid JSON %s\n", status, s ? s : "(none)"); abort(); }
    json_t *e = json_object_get(back, "error");
    const char *msg = json_is_string(e) ? json_string_value(e) : json_string_value(json_object_get(e, "message"));
    if (status < 400 ? status != 200 || e : status >= 600 || !msg || !*msg) {
        fprintf(stderr, "status %d: not a valid answer: %s\n", status, s);
        abort();
    }
    json_decref(back);
    free(s);
}

/* v (stolen) must be a valid answer for status. */
static void check_answer(int status, json_t *v) {
    if (!v) { fprintf(stderr, "no JSON for status %d\n", status); abort(); }
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    if (!s) { fprintf(stderr, "status %d: JSON does not serialise\n", status); abort(); }
    json_error_t je;
    /* "\u0000" is JSON (a byte token 0 detokenized, a piece of it): jansson takes it when told */
    json_t *back = json_loads(s, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!back) { fprintf(stderr, "status %d: invalid JSON %s: %s\n", status, s, je.text); abort(); }
    json_t *e = json_object_get(back, "error");
    int ok;
    if (status >= 400)
        ok = json_is_object(e) && json_is_string(json_object_get(e, "message")) &&
             json_string_length(json_object_get(e, "message")) > 0 && json_is_string(json_object_get(e, "type")) &&
             json_object_get(e, "code") != NULL && status < 600;
    else
        ok = status == 200 && !e;
    if (!ok) { fprintf(stderr, "status %d: not an OpenAI-style answer: %s\n", status, s); abort(); }
    json_decref(back);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    static const char *const routes[][2] = {
        {"POST", "/v1/chat/completions"}, {"POST", "/v1/completions"}, {"GET", "/health"}, {"GET", "/v1/models"},
        {"GET", "/metrics"}, {"GET", "/"}, {"POST", "/v1/engines/<b>x</b>"}, {"GET", "/chat/completions"},
        {"POST", "/tokenize"}, {"POST", "/detokenize"}, {"GET", "/props"}, {"GET", "/slots"},
        {"GET", "/v1/models/kjv-moe-f16"}, {"OPTIONS", "/v1/chat/completions"},
        {"POST", "/v1/messages/count_tokens"}, {"POST", "/api/show"}, {"GET", "/api/tags"},
    };
    static const char *const auths[] = {NULL, "Bearer s3cret-key", "Bearer s3cret-kez", "s3cret-key", "Bearer  s3cret-key"};
    static const char *const lengths[] = {NULL, "10", "99999999999999999999", "-1", "4097", "abc"};
    static const char *const xkeys[] = {NULL, "s3cret-key", "s3cret-kez"};
    const int n_routes = (int)(sizeof routes / sizeof routes[0]);
    const char *method = routes[(data[0] & 0x7f) % n_routes][0], *url = routes[(data[0] & 0x7f) % n_routes][1];
    const char *authz = auths[data[1] % 5], *clen = lengths[data[1] / 5 % 6], *xkey = xkeys[data[1] / 30 % 3];
    S.jinja = data[0] & 0x80 ? tmpl : NULL;
    S.template_text = S.jinja ? tmpl_text : NULL;
    S.template_len = S.jinja ? tmpl_len : 0;
    S.toolfmt = S.jinja ? pk_toolcall_detect(tmpl_text, tmpl_len) : NULL;
    /* byte 2 = 'g' asks for a generation, which runs for 1 in 64 of those
       inputs (by a hash of the whole input): a generation costs ~44 ms under
       ASan, everything else ~0.07 ms, and mutations of a generating input
       would otherwise all generate too */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < size; i++) h = (h ^ data[i]) * 16777619u;
    const int generate = data[2] == 'g' && h % 64 == 0;
    const char *body = (const char *)data + 3;
    const size_t len = size - 3;

    int method_ok = 0;
    const serve_api *api;
    int r = route(url, method, &method_ok, &api);
    if (!strcmp(method, "OPTIONS")) { check_cors_and_log(body, len); return 0; }
    api_error e = {0};
    int status = precheck(r, method_ok, method, url, authz, xkey, clen, &e);
    /* refusals in the route's API's shape: OpenAI's, or Anthropic's / Ollama's */
    void (*check_refusal)(int, json_t *) = api_is_openai(api) ? check_answer : check_other;
    if (status) { check_refusal(status, api_error_json(api, &e)); return 0; }
    if (len > S.max_body) {   /* as on_request after reading the body */
        api_fail(&e, 413, NULL, "too large");
        check_refusal(413, api_error_json(api, &e));
        return 0;
    }
    if (r == R_HEALTH) { check_answer(200, json_pack("{s:s}", "status", "ok")); return 0; }
    if (r == R_MODELS) { check_answer(200, models_json()); return 0; }
    if (r == R_ANTHROPIC_COUNT || r == R_OLLAMA_SHOW || r == R_OLLAMA_TAGS) {
        json_t *out = NULL, *b = NULL;
        if (r == R_ANTHROPIC_COUNT) out = anthropic_count_json(body, len, &e);
        else if (r == R_OLLAMA_TAGS) out = ollama_tags(&S.info);
        else if ((b = parse_body(body, len, &e))) out = ollama_show(b, &S.info, &e);
        json_decref(b);
        check_other(out ? 200 : e.status, out ? out : api_error_json(api, &e));
        return 0;
    }
    if (r == R_PROPS) { check_answer(200, props_json()); return 0; }
    if (r == R_SLOTS) { int idle; check_answer(200, slots_json(&idle)); return 0; }
    if (r == R_MODEL || r == R_TOKENIZE || r == R_DETOKENIZE) {
        json_t *out = NULL;
        if (r == R_MODEL) {
            char *id = strndup(body, len);
            if (!id) abort();
            out = misc_model_get(&S.info, id, &e);
            free(id);
        } else {
            json_t *b = misc_parse_body(body, len, &e);
            if (b) out = r == R_TOKENIZE ? misc_tokenize(S.model, b, &e) : misc_detokenize(S.model, b, &e);
            json_decref(b);
        }
        if (out) check_answer(200, out);
        else check_answer(e.status, api_error_json(api, &e));
        return 0;
    }
    if (r != R_API) return 0;   /* text answers: /metrics, the page */
    int chat = 1, n = 0;
    job *jobs[MAX_N];
    json_t *oreq = NULL, *root = parse_body(body, len, &e);
    if (root) oreq = api->request(root, &S.info, &chat, &e);
    if (oreq && check_model(oreq, &e)) { json_decref(oreq); oreq = NULL; }
    if (oreq) n = request_jobs(oreq, chat, jobs, &e);
    json_decref(oreq);
    if (!n) { json_decref(root); check_answer(e.status, api_error_json(api, &e)); return 0; }
    job *j = jobs[0];
    if (generate) {
        if (j->max_tokens < 0 || j->max_tokens > 2) j->max_tokens = 2;
        j->refs = 1;
        run_job(&fuzz_slot, j, 0);
        j->state = JOB_DONE;
        if (j->finish) {
            json_t *comp = completion_json(jobs, 1, &e);
            if (comp) check_answer(200, api->response(root, comp, &S.info));
            else check_answer(e.status, api_error_json(api, &e));
            json_decref(comp);
            /* the same text streamed in two pieces: every event is JSON */
            stream st = {.n = 1, .api = api, .jobs = {j}};
            pk_error serr = {0};
            if (!(st.ast = api->stream_new(root, &S.info)) || outsplit_init(&st.cs[0].os, j, &serr)) abort();
            st.cs[0].os.emit = stream_emit;
            st.cs[0].os.ctx = &st;
            char msg[600];
            size_t half = j->len / 2;
            if (stream_piece(&st, 0, j->text ? j->text : "", half, j->lp, j->n_lp, 0) ||
                stream_piece(&st, 0, j->text ? j->text + half : "", j->len - half, NULL, 0, 0))
                abort();
            st.cs[0].sent = j->len;
            if (stream_end_choice(&st, 0, msg, sizeof msg)) api->stream_chunk(st.ast, NULL, msg, &st.out);
            else api->stream_chunk(st.ast, NULL, NULL, &st.out);
            if (st.out.oom) abort();
            for (char *p = st.out.p; p && (p = strstr(p, "data: ")); p += 6) {
                char *end = strstr(p, "\n\n");
                if (!end) abort();
                if (strncmp(p + 6, "[DONE]", 6)) {
                    json_t *ev = json_loadb(p + 6, (size_t)(end - p - 6), 0, NULL);
                    if (!ev) { fprintf(stderr, "stream event is not JSON: %.*s\n", (int)(end - p - 6), p + 6); abort(); }
                    json_decref(ev);
                }
            }
            outsplit_free(&st.cs[0].os);
            api->stream_free(st.ast);
            free(st.out.p);
        } else {
            api_fail(&e, 500, NULL, "generation failed: %s", j->err[0] ? j->err : "cancelled");
            check_answer(500, api_error_json(api, &e));
        }
    }
    for (int i = 0; i < n; i++) { jobs[i]->refs = 1; job_unref(jobs[i]); }
    json_decref(root);
    return 0;
}
