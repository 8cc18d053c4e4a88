/* test_serve_ollama.c - Ollama's API over pocket serve (tools/serve_ollama.c):
 * /api/chat and /api/generate request bodies -> OpenAI requests, every
 * refusal, OpenAI completions -> Ollama's objects, OpenAI chunk sequences ->
 * Ollama's NDJSON streams (text; thinking then text; tool calls gathered
 * whole; a length stop; a failure), and /api/tags, /api/show,
 * /api/version, /api/ps. JSON in, JSON out: no model, no server. */
#include <string.h>

#include "serve_ollama.h"
#include "testhelp.h"

static const serve_info SI = {
    .model_id = "qwen35-tiny",
    .arch = "qwen35moe",
    .file = "/models/qwen35-tiny.gguf",
    .file_size = 123456789,
    .n_params = 35100000000ull,
    .quant = "Q4_K_M",
    .n_ctx = 4096,
    .n_ctx_train = 262144,
    .n_vocab = 248320,
    .chat_template = "{% if tools %}...{% endif %}<think>\n{{ enable_thinking }}",
    .created = 1765000000,
    .version = "0.9.1",
};

static json_t *parse(const char *s) {
    json_error_t err;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &err);
    if (!v) fprintf(stderr, "bad test JSON: %s: %s\n", err.text, s);
    return v;
}

/* The OpenAI request for a body (NULL: refused, e filled). */
static json_t *req(const serve_api *api, const char *body, int *chat, api_error *e) {
    json_t *b = parse(body);
    memset(e, 0, sizeof *e);
    int c = -1;
    json_t *r = api->request(b, &SI, chat ? chat : &c, e);
    json_decref(b);
    return r;
}

/* The body is refused with status 400 and a message holding want. */
static void refused(const serve_api *api, const char *body, const char *want) {
    api_error e;
    json_t *r = req(api, body, NULL, &e);
    TEST_CHECK(!r && e.status == 400 && strstr(e.msg, want), "%s: want a 400 with '%s', got %d '%s'", body, want,
               e.status, e.msg);
    json_decref(r);
}

/* r's JSON (compact) equals want's. */
static int same(const json_t *r, const char *want) {
    json_t *w = parse(want);
    int eq = json_equal(r, w);
    if (!eq) {
        char *s = json_dumps(r, JSON_COMPACT);
        fprintf(stderr, "  got  %s\n  want %s\n", s ? s : "(null)", want);
        free(s);
    }
    json_decref(w);
    return eq;
}

static const char *str(const json_t *o, const char *key) { return json_string_value(json_object_get(o, key)); }

/* ---- requests ---- */

static void test_chat_request(void) {
    const serve_api *A = &serve_api_ollama_chat;
    api_error e;
    int chat = -1;
    json_t *r = req(A, "{\"model\": \"x:latest\", \"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
                       "{\"role\": \"USER\", \"content\": \"Hi\"}], \"keep_alive\": \"5m\", \"truncate\": true}",
                    &chat, &e);
    TEST_CHECK(r && chat == 1, "plain chat: %s", e.msg);
    TEST_COND("plain chat: streamed by default, usage asked for, messages as they are",
              same(r, "{\"stream\": true, \"stream_options\": {\"include_usage\": true}, \"messages\": ["
                      "{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi\"}]}"));
    json_decref(r);

    r = req(A, "{\"model\": \"m\", \"stream\": false, \"messages\": [{\"role\": \"user\"}]}", NULL, &e);
    TEST_COND("stream false, missing content is empty",
              same(r, "{\"stream\": false, \"messages\": [{\"role\": \"user\", \"content\": \"\"}]}"));
    json_decref(r);

    /* options */
    r = req(A, "{\"model\": \"m\", \"stream\": false, \"messages\": [{\"role\": \"user\", \"content\": \"a\"}],"
               "\"options\": {\"temperature\": 0, \"top_p\": 0.9, \"top_k\": 20, \"min_p\": 0.05, \"seed\": 42,"
               "\"num_predict\": 100, \"stop\": [\"\\n\", \"user:\"], \"repeat_penalty\": 1.1, \"repeat_last_n\": 64,"
               "\"presence_penalty\": 0.5, \"frequency_penalty\": 0.25, \"num_ctx\": 2048, \"num_gpu\": 99,"
               "\"num_thread\": 8, \"use_mmap\": true, \"mirostat\": 0, \"mirostat_tau\": 5, \"tfs_z\": 1,"
               "\"typical_p\": 1.0, \"penalize_newline\": true, \"num_batch\": 512, \"num_keep\": 5, \"low_vram\": null}}",
            NULL, &e);
    TEST_CHECK(r, "all options: %s", e.msg);
    json_object_del(r, "messages");
    TEST_COND("options -> sampling fields; load options, neutral values and nulls change nothing",
              same(r, "{\"stream\": false, \"temperature\": 0, \"top_p\": 0.9, \"top_k\": 20, \"min_p\": 0.05,"
                      "\"seed\": 42, \"max_tokens\": 100, \"stop\": [\"\\n\", \"user:\"], \"repeat_penalty\": 1.1,"
                      "\"presence_penalty\": 0.5, \"frequency_penalty\": 0.25}"));
    json_decref(r);
    r = req(A, "{\"model\": \"m\", \"stream\": false, \"messages\": [{\"role\": \"user\", \"content\": \"a\"}],"
               "\"options\": {\"seed\": -1, \"num_predict\": -1, \"top_k\": 40.0, \"stop\": \"END\", \"num_ctx\": 4096,"
               "\"repeat_last_n\": 32}}", NULL, &e);
    json_object_del(r, "messages");
    TEST_COND("seed -1 random, num_predict -1 no limit, 40.0 whole, one stop string, num_ctx = the server's, "
              "repeat_last_n without a penalty",
              same(r, "{\"stream\": false, \"top_k\": 40, \"stop\": [\"END\"]}"));
    json_decref(r);

    /* format */
    r = req(A, "{\"model\": \"m\", \"stream\": false, \"format\": \"json\", \"messages\": [{\"role\": \"user\", "
               "\"content\": \"a\"}]}", NULL, &e);
    TEST_COND("format json", same(json_object_get(r, "response_format"), "{\"type\": \"json_object\"}"));
    json_decref(r);
    r = req(A, "{\"model\": \"m\", \"format\": {\"type\": \"object\", \"properties\": {\"age\": {\"type\": \"integer\"}},"
               "\"required\": [\"age\"]}, \"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}", NULL, &e);
    TEST_COND("format schema -> json_schema, strict",
              same(json_object_get(r, "response_format"),
                   "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"format\", \"strict\": true, \"schema\": "
                   "{\"type\": \"object\", \"properties\": {\"age\": {\"type\": \"integer\"}}, \"required\": [\"age\"]}}}"));
    json_decref(r);
    r = req(A, "{\"model\": \"m\", \"format\": \"\", \"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}", NULL, &e);
    TEST_COND("format \"\" is no format", r && !json_object_get(r, "response_format"));
    json_decref(r);

    /* think */
    r = req(A, "{\"model\": \"m\", \"think\": false, \"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}", NULL, &e);
    TEST_COND("think false", same(json_object_get(r, "chat_template_kwargs"), "{\"enable_thinking\": false}"));
    json_decref(r);
    r = req(A, "{\"model\": \"m\", \"think\": true, \"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}", NULL, &e);
    TEST_COND("think true", same(json_object_get(r, "chat_template_kwargs"), "{\"enable_thinking\": true}") &&
                                !json_object_get(r, "reasoning_effort"));
    json_decref(r);
    r = req(A, "{\"model\": \"m\", \"think\": \"max\", \"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}", NULL, &e);
    TEST_COND("think max -> high", same(json_object_get(r, "chat_template_kwargs"), "{\"enable_thinking\": true}") &&
                                       !strcmp(str(r, "reasoning_effort"), "high"));
    json_decref(r);
    r = req(A, "{\"model\": \"m\", \"think\": \"low\", \"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}", NULL, &e);
    TEST_COND("think low", !strcmp(str(r, "reasoning_effort"), "low"));
    json_decref(r);

    /* logprobs */
    r = req(A, "{\"model\": \"m\", \"logprobs\": true, \"top_logprobs\": 3, \"messages\": [{\"role\": \"user\", "
               "\"content\": \"a\"}]}", NULL, &e);
    TEST_COND("logprobs", json_is_true(json_object_get(r, "logprobs")) &&
                              json_integer_value(json_object_get(r, "top_logprobs")) == 3);
    json_decref(r);

    /* tools and a tool-call round trip */
    r = req(A, "{\"model\": \"m\", \"stream\": false, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
               "\"get_weather\", \"parameters\": {\"type\": \"object\"}}}, {\"function\": {\"name\": \"f2\"}}],"
               "\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Paris and Rome?\"},"
               "{\"role\": \"assistant\", \"content\": \"\", \"thinking\": \"two calls\", \"tool_calls\": ["
               "{\"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"C\"}}},"
               "{\"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}},"
               "{\"id\": \"own\", \"function\": {\"name\": \"f2\", \"arguments\": \"{\\\"a\\\":1}\"}}]},"
               "{\"role\": \"tool\", \"tool_name\": \"get_weather\", \"content\": \"18\"},"
               "{\"role\": \"tool\", \"tool_name\": \"get_weather\", \"content\": \"21\"},"
               "{\"role\": \"tool\", \"tool_call_id\": \"own\", \"content\": \"ok\"}]}", NULL, &e);
    TEST_CHECK(r, "tool round trip: %s", e.msg);
    TEST_COND("tools as OpenAI's (type added)",
              same(json_object_get(r, "tools"),
                   "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\"}}},"
                   "{\"type\": \"function\", \"function\": {\"name\": \"f2\"}}]"));
    TEST_COND("calls with string arguments and ids; results matched to their calls",
              same(json_object_get(r, "messages"),
                   "[{\"role\": \"user\", \"content\": \"Weather in Paris and Rome?\"},"
                   "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"two calls\", \"tool_calls\": ["
                   "{\"id\": \"call_1_0\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                   "\"arguments\": \"{\\\"city\\\":\\\"Paris\\\",\\\"unit\\\":\\\"C\\\"}\"}},"
                   "{\"id\": \"call_1_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
                   "\"arguments\": \"{\\\"city\\\":\\\"Rome\\\"}\"}},"
                   "{\"id\": \"own\", \"type\": \"function\", \"function\": {\"name\": \"f2\", \"arguments\": \"{\\\"a\\\":1}\"}}]},"
                   "{\"role\": \"tool\", \"content\": \"18\", \"tool_call_id\": \"call_1_0\", \"name\": \"get_weather\"},"
                   "{\"role\": \"tool\", \"content\": \"21\", \"tool_call_id\": \"call_1_1\", \"name\": \"get_weather\"},"
                   "{\"role\": \"tool\", \"content\": \"ok\", \"tool_call_id\": \"own\", \"name\": \"f2\"}]"));
    json_decref(r);
    r = req(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"tool\", \"tool_name\": \"t\", \"content\": \"1\"}]}", NULL, &e);
    TEST_COND("a result with no call keeps its tool name",
              same(json_object_get(r, "messages"), "[{\"role\": \"tool\", \"content\": \"1\", \"name\": \"t\"}]"));
    json_decref(r);
    r = req(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
               "{\"function\": {\"name\": \"a\"}}]}, {\"role\": \"tool\", \"content\": \"x\"}, {\"role\": \"user\", "
               "\"content\": \"hi\", \"images\": []}]}", NULL, &e);
    TEST_COND("no arguments is {}; an anonymous result answers the first open call; empty images are fine",
              same(json_object_get(r, "messages"),
                   "[{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call_0_0\", \"type\": "
                   "\"function\", \"function\": {\"name\": \"a\", \"arguments\": \"{}\"}}]},"
                   "{\"role\": \"tool\", \"content\": \"x\", \"tool_call_id\": \"call_0_0\", \"name\": \"a\"},"
                   "{\"role\": \"user\", \"content\": \"hi\"}]"));
    json_decref(r);

    r = req(A, "{\"model\": \"m\", \"tool_choice\": \"required\", \"messages\": [{\"role\": \"user\", \"content\": \"a\"}]}",
            NULL, &e);
    TEST_COND("tool_choice passes (pocket's extension)", r && !strcmp(str(r, "tool_choice"), "required"));
    json_decref(r);

    /* refusals */
    const char *M = "\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]";
    char b[512];
#define REFUSE(extra, want) do { snprintf(b, sizeof b, "{\"model\": \"m\", %s, %s}", M, extra); refused(A, b, want); } while (0)
    refused(A, "[1]", "JSON object");
    refused(A, "{\"messages\": []}", "'model' is required");
    refused(A, "{\"model\": 3, \"messages\": []}", "'model' is required");
    refused(A, "{\"model\": \"m\"}", "'messages' must be an array");
    refused(A, "{\"model\": \"m\", \"messages\": []}", "'messages' is empty");
    refused(A, "{\"model\": \"m\", \"messages\": [3]}", "messages[0] must be an object");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"content\": \"a\"}]}", "messages[0].role");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"bot\", \"content\": \"a\"}]}", "'bot' is not");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": [1]}]}", "content must be a string");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"a\", \"images\": [\"iVBOR\"]}]}",
            "messages[0].images': pocket serve runs text models");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"a\", \"thinking\": \"x\"}]}",
            "thinking must be a string, on an assistant");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"user\", \"content\": \"a\", \"tool_calls\": [{}]}]}",
            "tool_calls must be an array, on an assistant");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {}}]}]}",
            "tool_calls[0].function.name");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": "
               "{\"name\": \"f\", \"arguments\": [1]}}]}]}", "arguments must be an object");
    refused(A, "{\"model\": \"m\", \"messages\": [{\"role\": \"tool\", \"tool_name\": 1, \"content\": \"a\"}]}",
            "tool_name must be a string");
    REFUSE("\"stream\": \"yes\"", "'stream' must be a boolean");
    REFUSE("\"format\": \"xml\"", "'format' must be \"json\" or a JSON schema (an object); got \"xml\"");
    REFUSE("\"format\": 1", "'format' must be");
    REFUSE("\"think\": \"extreme\"", "got \"extreme\"");
    REFUSE("\"think\": 1", "'think' must be a boolean or a level");
    REFUSE("\"tools\": {}", "'tools' must be an array");
    REFUSE("\"tool_choice\": 1", "'tool_choice' must be");
    REFUSE("\"tools\": [{\"type\": \"web\"}]", "tools[0] must be");
    REFUSE("\"tools\": [{\"function\": {}}]", "tools[0].function.name");
    REFUSE("\"logprobs\": 1", "'logprobs' must be a boolean");
    REFUSE("\"top_logprobs\": 21", "'top_logprobs' must be a whole number in [0, 20]");
    REFUSE("\"truncate\": 1", "'truncate' must be a boolean");
    REFUSE("\"keep_alive\": []", "'keep_alive' must be a duration");
    REFUSE("\"_debug_render_only\": true", "'_debug_render_only' is not supported");
    REFUSE("\"options\": 1", "'options' must be an object");
    REFUSE("\"options\": {\"temperature\": \"hot\"}", "'options.temperature' must be a number");
    REFUSE("\"options\": {\"top_k\": 2.5}", "'options.top_k' must be a whole number");
    REFUSE("\"options\": {\"top_k\": -1}", "'options.top_k' must be a whole number");
    REFUSE("\"options\": {\"seed\": \"x\"}", "'options.seed' must be a whole number");
    REFUSE("\"options\": {\"num_predict\": -3}", "'options.num_predict' must be a whole number >= -2");
    REFUSE("\"options\": {\"stop\": [1]}", "'options.stop' must be an array of strings; [0]");
    REFUSE("\"options\": {\"stop\": 1}", "'options.stop' must be an array of strings");
    REFUSE("\"options\": {\"num_ctx\": 8192}", "'options.num_ctx' is 8192; this server's context holds 4096");
    REFUSE("\"options\": {\"num_ctx\": 0}", "'options.num_ctx' must be a whole number > 0");
    REFUSE("\"options\": {\"mirostat\": 2}", "'options.mirostat': pocket does not sample with Mirostat");
    REFUSE("\"options\": {\"tfs_z\": 0.9}", "'options.tfs_z': pocket does not do tail-free sampling");
    REFUSE("\"options\": {\"typical_p\": 0.7}", "'options.typical_p': pocket does not do locally typical sampling");
    REFUSE("\"options\": {\"repeat_penalty\": 1.2, \"repeat_last_n\": 32}", "looks at the last 64 tokens");
    REFUSE("\"options\": {\"warp\": 9}", "'options.warp' is not an Ollama option");
#undef REFUSE
}

static void test_generate_request(void) {
    const serve_api *G = &serve_api_ollama_generate;
    api_error e;
    int chat = -1;
    json_t *r = req(G, "{\"model\": \"m\", \"prompt\": \"Why?\", \"system\": \"Be terse.\", \"stream\": false,"
                       "\"context\": [], \"images\": null, \"template\": \"\", \"suffix\": \"\"}", &chat, &e);
    TEST_CHECK(r && chat == 1, "generate: %s", e.msg);
    TEST_COND("generate -> a chat of the system prompt and the user's",
              same(r, "{\"stream\": false, \"messages\": [{\"role\": \"system\", \"content\": \"Be terse.\"},"
                      "{\"role\": \"user\", \"content\": \"Why?\"}]}"));
    json_decref(r);
    r = req(G, "{\"model\": \"m\", \"prompt\": \"[INST] hi [/INST]\", \"raw\": true, \"think\": false, \"logprobs\": true,"
               "\"top_logprobs\": 2, \"options\": {\"num_predict\": 8}}", &chat, &e);
    TEST_CHECK(r && chat == 0, "raw: %s", e.msg);
    TEST_COND("raw -> a text completion of the prompt as it is (logprobs as /v1/completions counts them)",
              same(r, "{\"stream\": true, \"stream_options\": {\"include_usage\": true}, \"prompt\": \"[INST] hi [/INST]\","
                      "\"max_tokens\": 8, \"logprobs\": 2}"));
    json_decref(r);
    r = req(G, "{\"model\": \"m\", \"prompt\": \"p\", \"think\": \"high\", \"format\": \"json\"}", &chat, &e);
    TEST_COND("generate with think and format", r && chat == 1 && !strcmp(str(r, "reasoning_effort"), "high") &&
                                                    json_object_get(r, "response_format"));
    json_decref(r);

    refused(G, "{\"model\": \"m\"}", "'prompt' is empty");
    refused(G, "{\"model\": \"m\", \"prompt\": \"\"}", "'prompt' is empty");
    refused(G, "{\"model\": \"m\", \"prompt\": 5}", "'prompt' must be a string");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"raw\": \"yes\"}", "'raw' must be a boolean");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"system\": 1}", "'system' must be a string");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"template\": \"{{ .Prompt }}\"}", "'template' is not supported");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"suffix\": \"return x\"}", "'suffix' (fill in the middle)");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"context\": [1, 2, 3]}", "'context' (the token memory");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"images\": [\"iVBOR\"]}", "'images': pocket serve runs text models");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"raw\": true, \"system\": \"s\"}", "'system' does not apply to raw");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"raw\": true, \"think\": true}", "'think' does not apply to raw");
    refused(G, "{\"prompt\": \"p\"}", "'model' is required");
    refused(G, "{\"model\": \"m\", \"prompt\": \"p\", \"options\": {\"mirostat\": 1}}", "Mirostat");
}

/* ---- responses ---- */

static void check_created_at(const char *at, const char *what) {
    /* 2026-12-06T21:08:00.123456Z */
    int ok = at && strlen(at) == 27 && at[4] == '-' && at[7] == '-' && at[10] == 'T' && at[13] == ':' &&
             at[16] == ':' && at[19] == '.' && at[26] == 'Z';
    TEST_CHECK(ok, "%s: created_at '%s' is not RFC 3339", what, at ? at : "(null)");
}

static json_t *respond(const serve_api *api, const char *body, const char *completion) {
    json_t *b = parse(body), *c = parse(completion);
    json_t *r = api->response(b, c, &SI);
    json_decref(b);
    json_decref(c);
    return r;
}

static void test_responses(void) {
    json_t *r = respond(&serve_api_ollama_chat, "{\"model\": \"tiny:latest\"}",
                        "{\"id\": \"c1\", \"object\": \"chat.completion\", \"created\": 1765000000, \"choices\": [{\"index\": 0,"
                        "\"message\": {\"role\": \"assistant\", \"content\": \"Hello.\", \"reasoning_content\": \"greet\"},"
                        "\"finish_reason\": \"stop\"}], \"usage\": {\"prompt_tokens\": 26, \"completion_tokens\": 3,"
                        "\"total_tokens\": 29}, \"timings\": {\"prompt_ms\": 12.5, \"predicted_ms\": 30}}");
    check_created_at(str(r, "created_at"), "chat response");
    json_object_del(r, "created_at");
    TEST_COND("chat response: message, thinking, counts, durations from the timings",
              same(r, "{\"model\": \"tiny:latest\", \"message\": {\"role\": \"assistant\", \"content\": \"Hello.\","
                      "\"thinking\": \"greet\"}, \"done\": true, \"done_reason\": \"stop\", \"total_duration\": 42500000,"
                      "\"load_duration\": 0, \"prompt_eval_count\": 26, \"prompt_eval_duration\": 12500000,"
                      "\"eval_count\": 3, \"eval_duration\": 30000000}"));
    json_decref(r);

    r = respond(&serve_api_ollama_chat, "{}",
                "{\"object\": \"chat.completion\", \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\","
                "\"content\": null, \"tool_calls\": [{\"id\": \"call_a\", \"type\": \"function\", \"function\": {\"name\":"
                "\"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Paris\\\"}\"}}, {\"id\": \"call_b\", \"type\": "
                "\"function\", \"function\": {\"name\": \"broken\", \"arguments\": \"{\\\"city\\\": \"}}]},"
                "\"finish_reason\": \"tool_calls\"}], \"usage\": {\"prompt_tokens\": 5, \"completion_tokens\": 9}}");
    json_object_del(r, "created_at");
    json_t *m = json_object_get(r, "message");
    TEST_COND("tool calls: arguments as an object; text that is not JSON stays a string; done_reason stop",
              same(m, "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
                      "{\"id\": \"call_a\", \"function\": {\"index\": 0, \"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}},"
                      "{\"id\": \"call_b\", \"function\": {\"index\": 1, \"name\": \"broken\", \"arguments\": \"{\\\"city\\\": \"}}]}") &&
                  !strcmp(str(r, "done_reason"), "stop") && !strcmp(str(r, "model"), "qwen35-tiny:latest"));
    TEST_COND("not streamed, no timings: the parts are not made up",
              !json_object_get(r, "prompt_eval_duration") && !json_object_get(r, "eval_duration") &&
                  json_is_integer(json_object_get(r, "total_duration")) &&
                  json_integer_value(json_object_get(r, "eval_count")) == 9);
    json_decref(r);

    r = respond(&serve_api_ollama_generate, "{\"model\": \"m\", \"raw\": true}",
                "{\"object\": \"text_completion\", \"choices\": [{\"index\": 0, \"text\": \" the sky\", \"finish_reason\": "
                "\"length\", \"logprobs\": {\"tokens\": [\" the\"], \"token_logprobs\": [-0.5], \"top_logprobs\": "
                "[{\" the\": -0.5, \" a\": -1.5}]}}], \"usage\": {\"prompt_tokens\": 4, \"completion_tokens\": 2}}");
    TEST_COND("generate from a text completion: response, length, logprobs",
              r && !strcmp(str(r, "response"), " the sky") && !strcmp(str(r, "done_reason"), "length") &&
                  !json_object_get(r, "message") &&
                  same(json_object_get(r, "logprobs"), "[{\"token\": \" the\", \"logprob\": -0.5, \"top_logprobs\": "
                                                       "[{\"token\": \" the\", \"logprob\": -0.5}, {\"token\": \" a\", \"logprob\": -1.5}]}]"));
    json_decref(r);
    r = respond(&serve_api_ollama_generate, "{\"model\": \"m\"}",
                "{\"object\": \"chat.completion\", \"choices\": [{\"index\": 0, \"message\": {\"role\": \"assistant\", "
                "\"content\": \"{\\\"a\\\": 1}\", \"reasoning_content\": \"hm\"}, \"finish_reason\": \"stop\", \"logprobs\": "
                "{\"content\": [{\"token\": \"{\", \"logprob\": -0.1, \"bytes\": [123], \"top_logprobs\": []}]}}]}");
    TEST_COND("generate from a chat completion: response, thinking, logprobs",
              r && !strcmp(str(r, "response"), "{\"a\": 1}") && !strcmp(str(r, "thinking"), "hm") &&
                  same(json_object_get(r, "logprobs"), "[{\"token\": \"{\", \"logprob\": -0.1, \"bytes\": [123], "
                                                       "\"top_logprobs\": []}]"));
    json_decref(r);

    api_error e = {.status = 404};
    snprintf(e.msg, sizeof e.msg, "model 'x' not found");
    r = serve_api_ollama_chat.error(&e);
    TEST_COND("error object", same(r, "{\"error\": \"model 'x' not found\"}"));
    json_decref(r);
    TEST_COND("NDJSON content type", !strcmp(serve_api_ollama_chat.stream_type, "application/x-ndjson") &&
                                         !strcmp(serve_api_ollama_generate.stream_type, "application/x-ndjson"));
}

/* ---- streams ---- */

/* Feed the chunks (a JSON array; the string "ERR:..." fails the generation)
   then the end; the lines as a JSON array (each line must parse). */
static json_t *stream(const serve_api *api, const char *body, const char *chunks) {
    json_t *b = parse(body), *cs = parse(chunks);
    void *st = api->stream_new(b, &SI);
    api_buf out = {0};
    int rc = 0;
    for (size_t i = 0; i < json_array_size(cs); i++) {
        json_t *c = json_array_get(cs, i);
        if (json_is_string(c)) rc |= api->stream_chunk(st, NULL, json_string_value(c) + 4, &out);
        else rc |= api->stream_chunk(st, c, NULL, &out);
    }
    rc |= api->stream_chunk(st, NULL, NULL, &out);
    api->stream_free(st);
    TEST_CHECK(rc == 0 && !out.oom, "stream_chunk failed");
    json_t *lines = json_array();
    for (char *p = out.p, *nl; p && *p; p = nl + 1) {
        nl = strchr(p, '\n');
        TEST_CHECK(nl != NULL, "a line without its newline: %s", p);
        if (!nl) break;
        *nl = 0;
        json_t *v = parse(p);
        TEST_CHECK(json_is_object(v), "a line that is not an object: %s", p);
        json_array_append_new(lines, v ? v : json_null());
    }
    free(out.p);
    json_decref(b);
    json_decref(cs);
    return lines;
}

#define CHUNK(delta) "{\"object\": \"chat.completion.chunk\", \"choices\": [{\"index\": 0, \"delta\": " delta "}]}"
#define FINISH(why) "{\"object\": \"chat.completion.chunk\", \"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"" why "\"}]}"
#define USAGE(p, c) "{\"object\": \"chat.completion.chunk\", \"choices\": [], \"usage\": {\"prompt_tokens\": " #p ", \"completion_tokens\": " #c "}}"

/* Line i's fields other than created_at and the durations equal want. */
static int line_is(json_t *lines, size_t i, const char *want) {
    json_t *l = json_array_get(lines, i);
    if (!l) { fprintf(stderr, "  no line %zu\n", i); return 0; }
    check_created_at(str(l, "created_at"), "stream line");
    json_t *c = json_deep_copy(l);
    static const char *const drop[] = {"created_at", "total_duration", "load_duration", "prompt_eval_duration", "eval_duration"};
    for (int k = 0; k < 5; k++) json_object_del(c, drop[k]);
    int eq = same(c, want);
    json_decref(c);
    return eq;
}

static int has_durations(json_t *l) {
    static const char *const keys[] = {"total_duration", "load_duration", "prompt_eval_duration", "eval_duration"};
    for (int k = 0; k < 4; k++)
        if (!json_is_integer(json_object_get(l, keys[k])) || json_integer_value(json_object_get(l, keys[k])) < 0) return 0;
    return 1;
}

static void test_streams(void) {
    const serve_api *A = &serve_api_ollama_chat, *G = &serve_api_ollama_generate;
    json_t *L = stream(A, "{\"model\": \"m\"}",
                       "[" CHUNK("{\"role\": \"assistant\", \"content\": \"\"}") "," CHUNK("{\"content\": \"Hel\"}") ","
                       CHUNK("{\"content\": \"lo\"}") "," FINISH("stop") "," USAGE(26, 2) "]");
    TEST_COND("text: two pieces and the end", json_array_size(L) == 3 &&
              line_is(L, 0, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"Hel\"}, \"done\": false}") &&
              line_is(L, 1, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"lo\"}, \"done\": false}") &&
              line_is(L, 2, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\"}, \"done\": true,"
                            "\"done_reason\": \"stop\", \"prompt_eval_count\": 26, \"eval_count\": 2}") &&
              has_durations(json_array_get(L, 2)));
    json_decref(L);

    L = stream(A, "{\"model\": \"m\"}",
               "[" CHUNK("{\"role\": \"assistant\", \"content\": \"\"}") "," CHUNK("{\"reasoning_content\": \"Let me\"}") ","
               CHUNK("{\"reasoning_content\": \" think.\"}") "," CHUNK("{\"content\": \"42\"}") "," FINISH("stop") ","
               USAGE(10, 5) "]");
    TEST_COND("thinking then text", json_array_size(L) == 4 &&
              line_is(L, 0, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\", \"thinking\": \"Let me\"}, \"done\": false}") &&
              line_is(L, 1, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\", \"thinking\": \" think.\"}, \"done\": false}") &&
              line_is(L, 2, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"42\"}, \"done\": false}") &&
              line_is(L, 3, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\"}, \"done\": true,"
                            "\"done_reason\": \"stop\", \"prompt_eval_count\": 10, \"eval_count\": 5}"));
    json_decref(L);

    L = stream(A, "{\"model\": \"m\"}",
               "[" CHUNK("{\"role\": \"assistant\", \"content\": \"\"}") "," CHUNK("{\"content\": \"Checking.\"}") ","
               CHUNK("{\"tool_calls\": [{\"index\": 0, \"id\": \"call_x\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"\"}}]}") ","
               CHUNK("{\"tool_calls\": [{\"index\": 0, \"function\": {\"arguments\": \"{\\\"ci\"}}]}") ","
               CHUNK("{\"tool_calls\": [{\"index\": 0, \"function\": {\"arguments\": \"ty\\\": \\\"Paris\\\"}\"}}]}") ","
               CHUNK("{\"tool_calls\": [{\"index\": 1, \"id\": \"call_y\", \"type\": \"function\", \"function\": {\"name\": \"now\", \"arguments\": \"\"}}]}") ","
               FINISH("tool_calls") "," USAGE(50, 20) "]");
    TEST_COND("tool calls: gathered, sent whole in one line, done_reason stop", json_array_size(L) == 3 &&
              line_is(L, 0, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"Checking.\"}, \"done\": false}") &&
              line_is(L, 1, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
                            "{\"id\": \"call_x\", \"function\": {\"index\": 0, \"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}},"
                            "{\"id\": \"call_y\", \"function\": {\"index\": 1, \"name\": \"now\", \"arguments\": {}}}]}, \"done\": false}") &&
              line_is(L, 2, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\"}, \"done\": true,"
                            "\"done_reason\": \"stop\", \"prompt_eval_count\": 50, \"eval_count\": 20}"));
    json_decref(L);

    L = stream(A, "{\"model\": \"m\"}",
               "[" CHUNK("{\"tool_calls\": [{\"index\": 0, \"id\": \"c\", \"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\"\"}}]}") "]");
    TEST_COND("a call cut by the end still goes out, its text as it is",
              json_array_size(L) == 2 &&
              line_is(L, 0, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": ["
                            "{\"id\": \"c\", \"function\": {\"index\": 0, \"name\": \"f\", \"arguments\": \"{\\\"a\\\"\"}}]}, \"done\": false}") &&
              line_is(L, 1, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"\"}, \"done\": true,"
                            "\"done_reason\": \"stop\", \"prompt_eval_count\": 0, \"eval_count\": 0}"));
    json_decref(L);

    L = stream(A, "{\"model\": \"m\"}", "[" CHUNK("{\"content\": \"a b\"}") "," FINISH("length") "," USAGE(3, 2) "]");
    TEST_COND("length stop", json_array_size(L) == 2 && !strcmp(str(json_array_get(L, 1), "done_reason"), "length"));
    json_decref(L);

    L = stream(A, "{\"model\": \"m\"}", "[" CHUNK("{\"content\": \"par\"}") ", \"ERR:the model file changed\"]");
    TEST_COND("failure: the error line ends the stream", json_array_size(L) == 2 &&
              line_is(L, 0, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"par\"}, \"done\": false}") &&
              same(json_array_get(L, 1), "{\"error\": \"the model file changed\"}"));
    json_decref(L);

    L = stream(A, "{\"model\": \"m\"}",
               "[" CHUNK("{\"content\": \"x\"}") "," FINISH("stop") ","
               "{\"choices\": [], \"usage\": {\"prompt_tokens\": 7, \"completion_tokens\": 1}, \"timings\": {\"prompt_ms\": 100, \"predicted_ms\": 250.5}}]");
    json_t *last = json_array_get(L, 1);
    TEST_COND("durations from the timings when the server gives them",
              json_integer_value(json_object_get(last, "prompt_eval_duration")) == 100000000 &&
              json_integer_value(json_object_get(last, "eval_duration")) == 250500000 &&
              json_integer_value(json_object_get(last, "total_duration")) >= 350500000);
    json_decref(L);

    L = stream(G, "{\"model\": \"g\"}",
               "[" CHUNK("{\"role\": \"assistant\", \"content\": \"\"}") "," CHUNK("{\"reasoning_content\": \"hm\"}") ","
               CHUNK("{\"content\": \"Blue.\"}") "," FINISH("stop") "," USAGE(12, 3) "]");
    TEST_COND("generate stream: response and thinking", json_array_size(L) == 3 &&
              line_is(L, 0, "{\"model\": \"g\", \"response\": \"\", \"thinking\": \"hm\", \"done\": false}") &&
              line_is(L, 1, "{\"model\": \"g\", \"response\": \"Blue.\", \"done\": false}") &&
              line_is(L, 2, "{\"model\": \"g\", \"response\": \"\", \"done\": true, \"done_reason\": \"stop\","
                            "\"prompt_eval_count\": 12, \"eval_count\": 3}"));
    json_decref(L);

    L = stream(G, "{\"model\": \"g\", \"raw\": true}",
               "[{\"object\": \"text_completion\", \"choices\": [{\"index\": 0, \"text\": \" sky\", \"finish_reason\": null}]},"
               "{\"object\": \"text_completion\", \"choices\": [{\"index\": 0, \"text\": \"\", \"finish_reason\": \"length\"}]},"
               USAGE(4, 1) "]");
    TEST_COND("generate raw stream from text completion chunks", json_array_size(L) == 2 &&
              line_is(L, 0, "{\"model\": \"g\", \"response\": \" sky\", \"done\": false}") &&
              line_is(L, 1, "{\"model\": \"g\", \"response\": \"\", \"done\": true, \"done_reason\": \"length\","
                            "\"prompt_eval_count\": 4, \"eval_count\": 1}"));
    json_decref(L);

    L = stream(A, "{\"model\": \"m\"}",
               "[{\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"Hi\"}, \"logprobs\": {\"content\": [{\"token\": \"Hi\","
               "\"logprob\": -0.25, \"bytes\": [72, 105], \"top_logprobs\": [{\"token\": \"Hi\", \"logprob\": -0.25}]}]}}]}]");
    TEST_COND("logprobs ride on their line",
              line_is(L, 0, "{\"model\": \"m\", \"message\": {\"role\": \"assistant\", \"content\": \"Hi\"}, \"done\": false,"
                            "\"logprobs\": [{\"token\": \"Hi\", \"logprob\": -0.25, \"bytes\": [72, 105], \"top_logprobs\": "
                            "[{\"token\": \"Hi\", \"logprob\": -0.25}]}]}"));
    json_decref(L);

    L = stream(A, "{}", "[{\"choices\": 5}, {\"choices\": [{\"delta\": {\"tool_calls\": [{\"index\": 1000}, {\"index\": -1}, 7]}}]}, 3]");
    TEST_COND("junk chunks: only the end", json_array_size(L) == 1 &&
              !strcmp(str(json_array_get(L, 0), "model"), "qwen35-tiny:latest"));
    json_decref(L);
}

/* ---- the model endpoints ---- */

static void test_model_endpoints(void) {
    char name[64];
    TEST_COND("name with :latest", !strcmp(ollama_model_name(&SI, name, sizeof name), "qwen35-tiny:latest"));
    serve_info tagged = SI;
    tagged.model_id = "qwen3:30b";
    TEST_COND("a name with its own tag", !strcmp(ollama_model_name(&tagged, name, sizeof name), "qwen3:30b"));

    json_t *t = ollama_tags(&SI), *m = json_array_get(json_object_get(t, "models"), 0);
    const char *dg = str(m, "digest");
    TEST_COND("tags: one model", json_array_size(json_object_get(t, "models")) == 1 &&
              !strcmp(str(m, "name"), "qwen35-tiny:latest") && !strcmp(str(m, "model"), "qwen35-tiny:latest") &&
              json_integer_value(json_object_get(m, "size")) == 123456789 &&
              !strcmp(str(m, "modified_at"), "2025-12-06T05:46:40.000000Z"));
    TEST_COND("tags: a digest of 64 hex digits", dg && strlen(dg) == 64 && strspn(dg, "0123456789abcdef") == 64);
    TEST_COND("tags: details",
              same(json_object_get(m, "details"), "{\"parent_model\": \"\", \"format\": \"gguf\", \"family\": \"qwen35moe\","
                   "\"families\": [\"qwen35moe\"], \"parameter_size\": \"35.1B\", \"quantization_level\": \"Q4_K_M\"}"));
    json_t *t2 = ollama_tags(&tagged);
    TEST_COND("the digest tells files apart",
              strcmp(dg, str(json_array_get(json_object_get(t2, "models"), 0), "digest")) != 0);
    json_decref(t2);

    json_t *p = ollama_ps(&SI), *pm = json_array_get(json_object_get(p, "models"), 0);
    TEST_COND("ps: loaded, with the server's context", pm && !strcmp(str(pm, "digest"), dg) &&
              json_integer_value(json_object_get(pm, "context_length")) == 4096 && str(pm, "expires_at") &&
              json_is_integer(json_object_get(pm, "size_vram")));
    json_decref(p);
    json_decref(t);

    json_t *v = ollama_version(&SI);
    TEST_COND("version", same(v, "{\"version\": \"0.9.1\"}"));
    json_decref(v);

    api_error e = {0};
    json_t *b = parse("{\"model\": \"anything:latest\"}");
    json_t *s = ollama_show(b, &SI, &e);
    TEST_CHECK(s != NULL, "show: %s", e.msg);
    TEST_COND("show: capabilities from the template",
              same(json_object_get(s, "capabilities"), "[\"completion\", \"tools\", \"thinking\"]"));
    TEST_COND("show: model_info",
              same(json_object_get(s, "model_info"), "{\"general.architecture\": \"qwen35moe\", \"general.parameter_count\":"
                   " 35100000000, \"qwen35moe.context_length\": 262144, \"qwen35moe.vocab_size\": 248320}"));
    TEST_COND("show: template, parameters, modelfile (the file's name, not its path)",
              !strcmp(str(s, "template"), SI.chat_template) && strstr(str(s, "parameters"), "num_ctx") &&
              strstr(str(s, "parameters"), "4096") && strstr(str(s, "modelfile"), "FROM qwen35-tiny.gguf\n") &&
              !strstr(str(s, "modelfile"), "/models/") && json_object_get(s, "details"));
    json_decref(s);
    json_decref(b);

    serve_info plain = SI;
    plain.chat_template = NULL;
    b = parse("{\"name\": \"x\"}");
    s = ollama_show(b, &plain, &e);
    TEST_COND("show (the older 'name'): a built-in formatter completes only",
              same(json_object_get(s, "capabilities"), "[\"completion\"]") && !strcmp(str(s, "template"), ""));
    json_decref(s);
    json_decref(b);

    const char *bad[][2] = {{"{}", "'model' is required"}, {"[]", "JSON object"}, {"{\"model\": 1}", "'model' is required"},
                            {"{\"model\": \"m\", \"verbose\": 1}", "'verbose' must be a boolean"}};
    for (int i = 0; i < 4; i++) {
        b = parse(bad[i][0]);
        memset(&e, 0, sizeof e);
        s = ollama_show(b, &SI, &e);
        TEST_CHECK(!s && e.status == 400 && strstr(e.msg, bad[i][1]), "show %s: got %d '%s'", bad[i][0], e.status, e.msg);
        json_decref(b);
    }
}

int main(void) {
    test_chat_request();
    test_generate_request();
    test_responses();
    test_streams();
    test_model_endpoints();
    return TEST_REPORT();
}
