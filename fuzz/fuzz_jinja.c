/* fuzz_jinja.c - libFuzzer harness: the Jinja engine (pk_jinja_parse,
 * pk_jinja_render) on random templates and conversations.
 *
 * Input: byte 0 holds flags (bit 0: --plain-blocks, bits 1-2:
 * add_generation_prompt -1 / 0 / 1, bit 3: also render with the fuzzed
 * conversation); the rest is TEMPLATE, then optionally a NUL byte and a
 * conversation in JSON. The template is rendered with a fixed conversation
 * that has what chat templates read (system / user / assistant / tool
 * messages, tool calls with arguments as a string and as an object,
 * reasoning_content, multi-part content, tools, enable_thinking), and
 * with the fuzzed one. Small limits keep each run short.
 *
 * Checks: never a crash, hang or leak (the limits end runaway templates);
 * a failed parse or render leaves a one-line, non-empty message and no
 * output; a successful render gives a NUL-terminated text of the length it
 * reports; the same render twice gives the same result. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"

static const char *fixed_conversation =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"You are helpful.\"},"
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"What is the weather?\"}]},"
    "{\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"Call the tool.\", \"tool_calls\": ["
    "{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}},"
    "{\"id\": \"c2\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"c1\", \"name\": \"get_weather\", \"content\": \"sunny\"},"
    "{\"role\": \"tool\", \"tool_call_id\": \"c2\", \"content\": \"cold\"},"
    "{\"role\": \"assistant\", \"content\": \"<think>\\nok\\n</think>\\n\\nSunny in Paris, cold in Oslo.\"},"
    "{\"role\": \"user\", \"content\": \"Thanks \\u00e9 \\ud83d\\ude00\"}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather.\","
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"City\"},"
    "\"days\": {\"type\": \"integer\", \"enum\": [1, 2]}}, \"required\": [\"city\"]}}}],"
    "\"enable_thinking\": false, \"reasoning_effort\": \"low\"}";

static int one_line(const pk_error *e) { return e->msg[0] && !strchr(e->msg, '\n'); }

static void render_twice(const pk_jinja *t, const char *conv, size_t len, const pk_jinja_params *p) {
    char *out[2] = {NULL, NULL};
    size_t n[2] = {0, 0};
    int rc[2];
    pk_error err[2];
    for (int k = 0; k < 2; k++) {
        memset(&err[k], 0, sizeof err[k]);
        rc[k] = pk_jinja_render(t, conv, len, p, &out[k], &n[k], &err[k]);
        if (rc[k] == PK_OK) {
            if (!out[k] || out[k][n[k]] != 0 || n[k] > p->max_output) abort();
        } else {
            if (out[k] || !one_line(&err[k])) {
                fprintf(stderr, "fuzz_jinja: a failed render left output or a bad message: '%s'\n", err[k].msg);
                abort();
            }
        }
    }
    if (rc[0] != rc[1] || n[0] != n[1] || (rc[0] == PK_OK && memcmp(out[0], out[1], n[0])) ||
        (rc[0] != PK_OK && strcmp(err[0].msg, err[1].msg))) {
        fprintf(stderr, "fuzz_jinja: two renders of the same input differ\n");
        abort();
    }
    free(out[0]);
    free(out[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int flags = data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    const char *nul = memchr(text, 0, n);
    size_t tlen = nul ? (size_t)(nul - text) : n;
    pk_error err = {0};
    pk_jinja *t = NULL;
    int rc = pk_jinja_parse(text, tlen, flags & 1 ? PK_JINJA_PLAIN_BLOCKS : 0, &t, &err);
    if (rc) {
        if (t || !one_line(&err)) {
            fprintf(stderr, "fuzz_jinja: a failed parse left a template or a bad message: '%s'\n", err.msg);
            abort();
        }
        return 0;
    }
    pk_jinja_params p = pk_jinja_default_params();
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.add_generation_prompt = (flags >> 1 & 3) == 3 ? 1 : (flags >> 1 & 3) - 1;
    p.now = 1767225600;
    p.max_output = 1 << 20;
    p.max_memory = 16 << 20;
    p.max_steps = 200000;
    p.max_depth = 200;
    render_twice(t, fixed_conversation, strlen(fixed_conversation), &p);
    if (nul && (flags & 8)) render_twice(t, nul + 1, n - tlen - 1, &p);
    pk_jinja_free(t);
    return 0;
}
