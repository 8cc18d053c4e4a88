/* test_servemisc.c - tools/serve_misc.c on its own (the files are included:
 * the tool's code is not in libpocket): --cors values and Origin matching,
 * the preflight's Allow-Headers, the access log line (format, escaping,
 * truncation), /tokenize and /detokenize on the bundled model (round trips,
 * byte pieces, every refusal), GET /v1/models/{id}, and the UTF-8 sanitizer
 * of tools/serve_api.c. */
#include "../../tools/serve_api.c"
#include "../../tools/serve_misc.c"

#include "testhelp.h"

static void test_cors(void) {
    serve_cors c = {0};
    char err[512];
    TEST_COND("a comma list", !cors_add(&c, "http://localhost:3000, https://app.example.org:8443/", err, sizeof err));
    TEST_CHECK(c.n == 2 && !strcmp(c.origin[0], "http://localhost:3000") && !strcmp(c.origin[1], "https://app.example.org:8443"),
               "origins kept without the trailing slash: %d [%s] [%s]", c.n, c.origin[0], c.origin[1]);
    TEST_COND("[IPv6]:port", !cors_add(&c, "http://[::1]:8080", err, sizeof err) && c.n == 3);
    TEST_COND("no '*' yet", !c.any);
    static const char *const bad[] = {"localhost:3000", "http://a.example/path", "null", "", "http://", "http://a b",
                                      "ftp//x", "http://a:123456", "http://[::1", "http://user@host", ",", "http://a,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        serve_cors t = {0};
        err[0] = 0;
        TEST_CHECK(cors_add(&t, bad[i], err, sizeof err) == -1 && strstr(err, "--cors"), "--cors '%s' accepted (%s)", bad[i], err);
    }
    TEST_COND("the error names the value", (cors_add(&(serve_cors){0}, "http://a.example/path", err, sizeof err), strstr(err, "'http://a.example/path'")));
    serve_cors full = {0};
    int rc = 0;
    for (int i = 0; i <= CORS_MAX && !rc; i++) rc = cors_add(&full, "http://a.example", err, sizeof err);
    TEST_CHECK(rc == -1 && full.n == CORS_MAX && strstr(err, "at most"), "more than %d origins: rc %d n %d", CORS_MAX, rc, full.n);

    TEST_COND("allowed", cors_allowed(&c, "http://localhost:3000") != NULL);
    TEST_COND("allowed, other case", cors_allowed(&c, "HTTP://LOCALHOST:3000") != NULL);
    TEST_COND("another port", !cors_allowed(&c, "http://localhost:3001"));
    TEST_COND("a prefix", !cors_allowed(&c, "http://localhost:300"));
    TEST_COND("no Origin", !cors_allowed(&c, NULL) && !cors_allowed(&c, ""));
    serve_cors none = {0}, any = {.any = 1};
    TEST_COND("without --cors nothing", !cors_allowed(&none, "http://localhost:3000"));
    const char *o = cors_allowed(&any, "https://x.example:1");
    TEST_COND("'*' echoes the origin", o && !strcmp(o, "https://x.example:1"));
    TEST_COND("'*' allows null", cors_allowed(&any, "null") != NULL);
    TEST_COND("never a CR LF into a header", !cors_allowed(&any, "http://a\r\nSet-Cookie: x"));
    TEST_COND("no spaces", !cors_allowed(&any, "http://a b"));
    TEST_COND("no non-ASCII", !cors_allowed(&any, "http://\xc3\xa9.example"));
    char longo[400];
    memset(longo, 'a', sizeof longo - 1);
    longo[sizeof longo - 1] = 0;
    TEST_COND("too long", !cors_allowed(&any, longo));

    char h[1024];
    cors_allow_headers(NULL, h, sizeof h);
    TEST_COND("fixed names", strstr(h, "Authorization") && strstr(h, "Content-Type") && strstr(h, "X-Api-Key") &&
                                 strstr(h, "Anthropic-Version"));
    size_t fixed = strlen(h);
    cors_allow_headers("authorization,content-type,x-stainless-os", h, sizeof h);
    TEST_CHECK(strstr(h, "x-stainless-os") != NULL, "asked names appended: %s", h);
    cors_allow_headers("x-a;b", h, sizeof h);
    TEST_CHECK(strlen(h) == fixed, "not header names: not echoed: %s", h);
    cors_allow_headers("x-a\r\nx-b", h, sizeof h);
    TEST_COND("CR LF not echoed", strlen(h) == fixed && !strchr(h, '\r'));
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    cors_allow_headers(big, h, sizeof h);
    TEST_COND("too long: the fixed names only", strlen(h) == fixed);
}

static void test_access(void) {
    serve_access a;
    char line[1024];
    access_begin(&a, "POST", "/v1/chat/completions", "127.0.0.1", 10.0);
    a.status = 200;
    a.n_prompt = 39, a.n_cached = 7, a.n_gen = 32;
    access_line(&a, 11.2341, line, sizeof line);
    TEST_CHECK(!strncmp(line, "access 20", 9) && strstr(line, "Z 127.0.0.1 POST /v1/chat/completions 200 1234 ms prompt 39 cached 7 generated 32") &&
               line[strlen(line) - 1] == '2', "a 200: [%s]", line);
    access_begin(&a, "GET", "/a\nb\x1b[31m c\xc3\xa9\"\\", "", 0);
    a.status = 404;
    json_t *e = json_pack("{s:{s:s, s:s}}", "error", "message", "no such\tendpoint \xc3\xa9", "type", "x");
    access_error(&a, e);
    json_decref(e);
    access_line(&a, 0.5, line, sizeof line);
    TEST_CHECK(strstr(line, " - GET /a\\x0Ab\\x1B[31m\\x20c\\xC3\\xA9\\x22\\x5C 404 500 ms error: no such\\x09endpoint \\xC3\\xA9") != NULL,
               "escaped: [%s]", line);
    for (const char *q = line; *q; q++) TEST_CHECK((unsigned char)*q >= 0x20 && (unsigned char)*q < 0x7f, "byte 0x%02x in the line", *q);
    access_begin(&a, "GET", "/x", "::1", 0);
    e = json_pack("{s:s}", "error", "ollama's shape");
    access_error(&a, e);
    json_decref(e);
    access_line(&a, 0, line, sizeof line);
    TEST_CHECK(strstr(line, "::1 GET /x 499 0 ms (the client closed the connection) error: ollama\\x27s") == NULL &&
               strstr(line, "::1 GET /x 499 0 ms (the client closed the connection) error: ollama's shape"), "499: [%s]", line);
    char small[40];
    access_line(&a, 0, small, sizeof small);
    TEST_COND("truncated, terminated", strlen(small) == sizeof small - 1);
}

static void test_utf8(void) {
    size_t n;
    char *s = api_utf8_sanitize("a\xc3\xa9" "b\xc3" "c\xed\xa0\x80" "d\xf0\x9f\x99\x82", 14, &n);
    TEST_CHECK(s && !strcmp(s, "a\xc3\xa9" "b\xef\xbf\xbd" "c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" "d\xf0\x9f\x99\x82"),
               "sanitized: [%s]", s ? s : "(null)");
    free(s);
}

static json_t *body(const char *text) {
    api_error e = {0};
    json_t *b = misc_parse_body(text, strlen(text), &e);
    TEST_CHECK(b != NULL, "body %s: %s", text, e.msg);
    return b;
}

/* fn on the body text: NULL with a 400 naming param, whose message has want */
static void refused(json_t *(*fn)(const pk_model *, const json_t *, api_error *), const pk_model *m, const char *text,
                    const char *param, const char *want) {
    api_error e = {0};
    json_t *b = body(text), *r = b ? fn(m, b, &e) : NULL;
    TEST_CHECK(!r && e.status == 400 && !strcmp(e.param, param) && strstr(e.msg, want), "%s: status %d param %s msg %s", text,
               e.status, e.param, e.msg);
    json_decref(r);
    json_decref(b);
}

static void test_tokens(void) {
    pk_model *m = NULL;
    pk_error err = {0};
    if (pk_model_load("models/kjv-moe-f16.gguf", &m, &err)) { TEST_CHECK(0, "load: %s (run from the project root)", err.msg); return; }
    api_error e = {0};
    const char *text = "And God said, Let there be light: and there was light. \xc3\xa9 \xe6\x97\xa5";
    json_t *b = json_pack("{s:s, s:b}", "content", text, "with_pieces", 1), *r = misc_tokenize(m, b, &e);
    json_t *toks = json_object_get(r, "tokens");
    TEST_CHECK(json_array_size(toks) > 0, "tokenize: %s", e.msg);
    char bytes[256];
    size_t k = 0;
    json_t *ids = json_array();
    for (size_t i = 0; i < json_array_size(toks); i++) {
        json_t *t = json_array_get(toks, i), *p = json_object_get(t, "piece");
        json_array_append(ids, json_object_get(t, "id"));
        if (json_is_string(p)) {
            size_t l = json_string_length(p);
            if (k + l < sizeof bytes) memcpy(bytes + k, json_string_value(p), l);
            k += l;
        } else {
            for (size_t j = 0; j < json_array_size(p); j++)
                if (k < sizeof bytes) bytes[k++] = (char)json_integer_value(json_array_get(p, j));
        }
    }
    TEST_CHECK(k == strlen(text) && !memcmp(bytes, text, k), "pieces spell the text (%zu bytes of %zu)", k, strlen(text));
    json_decref(b);
    json_decref(r);
    b = json_pack("{s:O}", "tokens", ids);
    r = misc_detokenize(m, b, &e);
    const char *c = json_string_value(json_object_get(r, "content"));
    TEST_CHECK(c && !strcmp(c, text), "detokenize round trip: [%s]", c ? c : e.msg);
    json_decref(b);
    json_decref(r);
    json_decref(ids);

    b = body("{\"content\": \"In the beginning\"}");
    json_t *plain = misc_tokenize(m, b, &e);
    json_decref(b);
    b = body("{\"content\": \"In the beginning\", \"add_special\": true}");
    json_t *spec = misc_tokenize(m, b, &e);
    json_decref(b);
    size_t np = json_array_size(json_object_get(plain, "tokens")), ns = json_array_size(json_object_get(spec, "tokens"));
    TEST_CHECK(np > 0 && ns >= np && json_is_integer(json_array_get(json_object_get(plain, "tokens"), 0)),
               "add_special: %zu vs %zu tokens", ns, np);
    json_decref(plain);
    json_decref(spec);

    char big[128];
    int nv = pk_model_n_vocab(m);
    snprintf(big, sizeof big, "{\"tokens\": [0, %d]}", nv);
    char want[96];
    snprintf(want, sizeof want, "tokens[1] is %d; token ids are in [0, %d)", nv, nv);
    refused(misc_detokenize, m, big, "tokens", want);
    refused(misc_detokenize, m, "{\"tokens\": [-1]}", "tokens", "tokens[0] is -1");
    refused(misc_detokenize, m, "{\"tokens\": [9223372036854775807]}", "tokens", "tokens[0] is 9223372036854775807");
    refused(misc_detokenize, m, "{\"tokens\": [1.0]}", "tokens", "must be an integer");
    refused(misc_detokenize, m, "{\"tokens\": \"1 2\"}", "tokens", "'tokens' is required");
    refused(misc_tokenize, m, "{}", "content", "'content' is required");
    refused(misc_tokenize, m, "{\"content\": [\"a\"]}", "content", "'content' is required");
    refused(misc_tokenize, m, "{\"content\": \"a\", \"add_special\": 1}", "add_special", "'add_special' must be a boolean");
    refused(misc_tokenize, m, "{\"content\": \"a\", \"parse_special\": \"no\"}", "parse_special", "must be a boolean");
    static const char *const bad_bodies[] = {"", "[1]", "{\"a\": 1, \"a\": 2}", "{\"a\": 1\0}", "{"};
    static const size_t bad_len[] = {0, 3, 16, 9, 1};
    for (size_t i = 0; i < 5; i++) {
        api_error be = {0};
        json_t *x = misc_parse_body(bad_bodies[i], bad_len[i], &be);
        TEST_CHECK(!x && be.status == 400 && be.msg[0], "bad body %zu accepted", i);
        json_decref(x);
    }

    serve_info si = {.model_id = "pocket-test", .arch = "qwen3moe", .n_ctx = 256, .n_vocab = nv, .created = 1};
    json_t *mo = misc_model_get(&si, "pocket-test", &e);
    TEST_CHECK(mo && !strcmp(json_string_value(json_object_get(mo, "id")), "pocket-test") &&
               !strcmp(json_string_value(json_object_get(mo, "object")), "model"), "model get");
    json_decref(mo);
    api_error me = {0};
    mo = misc_model_get(&si, "gpt-4o", &me);
    TEST_CHECK(!mo && me.status == 404 && strstr(me.msg, "'gpt-4o'") && !strcmp(me.param, "model"), "another id: %d %s", me.status, me.msg);

    misc_props p = {.chat_format = "chatml", .n_parallel = 3, .sp = pk_sampler_default_params()};
    json_t *pr = misc_props_json(m, &si, &p);
    json_t *dgs = json_object_get(pr, "default_generation_settings");
    TEST_CHECK(json_integer_value(json_object_get(pr, "total_slots")) == 3 && json_integer_value(json_object_get(dgs, "n_ctx")) == 256 &&
               json_integer_value(json_object_get(json_object_get(dgs, "params"), "seed")) == -1 &&
               json_is_string(json_object_get(pr, "chat_template")), "props");
    json_decref(pr);
    misc_slot sl[2] = {{.id = 0, .n_ctx = 256, .n_tokens = 12},
                       {.id = 1, .n_ctx = 256, .is_processing = 1, .request_id = "chatcmpl-1", .n_prompt = 9, .n_decoded = 3, .max_tokens = 10}};
    json_t *ss = misc_slots_json(sl, 2), *busy = json_array_get(ss, 1);
    TEST_CHECK(json_array_size(ss) == 2 && json_is_null(json_object_get(json_array_get(ss, 0), "request_id")) &&
               !strcmp(json_string_value(json_object_get(busy, "request_id")), "chatcmpl-1") &&
               json_integer_value(json_object_get(json_object_get(busy, "next_token"), "n_remain")) == 7, "slots");
    json_decref(ss);
    pk_model_free(m);
}

int main(void) {
    test_cors();
    test_access();
    test_utf8();
    test_tokens();
    return TEST_REPORT();
}
