/* test_jinja.c - the Jinja engine through its API (include/pocket.h): parse
 * once and render many times, from several threads at once; the limits of
 * pk_jinja_params (output, steps, depth, memory) ending a render with a
 * one-line error naming the template line; bos/eos/add_generation_prompt/
 * now; text with NUL bytes; values Python prints in its own way (floats);
 * reference cycles and errors deep in a render leaking nothing (run under
 * ASan by `make sanitize`). Byte equality with Jinja2 over real templates is
 * tests/cli/t_jinja.sh's. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"
#include "testhelp.h"

/* Render src with conversation conv (NULL: none) and params p (NULL:
 * defaults); returns the text (malloc'ed) or NULL with err filled. */
static char *render(const char *src, const char *conv, const pk_jinja_params *p, size_t *len, pk_error *err) {
    pk_jinja *t;
    if (pk_jinja_parse(src, strlen(src), 0, &t, err)) return NULL;
    char *out = NULL;
    int rc = pk_jinja_render(t, conv, conv ? strlen(conv) : 0, p, &out, len, err);
    pk_jinja_free(t);
    return rc ? NULL : out;
}

static int renders_to(const char *src, const char *conv, const char *want) {
    pk_error err = {0};
    char *out = render(src, conv, NULL, NULL, &err);
    int ok = out && !strcmp(out, want);
    if (!ok) fprintf(stderr, "  %s -> %s (want %s)\n", src, out ? out : err.msg, want);
    free(out);
    return ok;
}

/* fails with a one-line message containing want */
static int fails_with(const char *src, const char *conv, const pk_jinja_params *p, const char *want) {
    pk_error err = {0};
    char *out = render(src, conv, p, NULL, &err);
    int ok = !out && err.code == PK_ERR_FORMAT && strstr(err.msg, want) && !strchr(err.msg, '\n');
    if (!ok) fprintf(stderr, "  %s -> %s (want an error with: %s)\n", src, out ? out : err.msg, want);
    free(out);
    return ok;
}

typedef struct job {
    const pk_jinja *t;
    const char *conv;
    char *out;
    int rc;
} job;

static void *run_job(void *arg) {
    job *j = arg;
    pk_error err = {0};
    for (int i = 0; i < 20 && !j->rc; i++) {
        free(j->out);
        j->rc = pk_jinja_render(j->t, j->conv, strlen(j->conv), NULL, &j->out, NULL, &err);
    }
    return NULL;
}

static const char *chat =
    "{%- set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
    "<|{{ m.role }}|>{{ m.content | trim }}{% if m.tool_calls %}{{ m.tool_calls | tojson }}{% endif %}\n"  /* trimmed */
    "{% endfor %}{{ ns.n }}{% if add_generation_prompt %}<|assistant|>{% endif %}";

int main(void) {
    pk_error err = {0};

    /* parse once, render many, from four threads at once: each equal to a serial render */
    pk_jinja *t;
    TEST_COND("parse a chat template", pk_jinja_parse(chat, strlen(chat), 0, &t, &err) == PK_OK);
    const char *convs[4] = {
        "{\"messages\": [{\"role\": \"user\", \"content\": \" hi \"}], \"add_generation_prompt\": true}",
        "[{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"u\"}]",
        "{\"messages\": [{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"function\": "
        "{\"name\": \"f\", \"arguments\": {\"a\": [1, 2.5, null, \"\\u00e9\"]}}}]}]}",
        "{\"messages\": []}",
    };
    char *serial[4];
    for (int i = 0; i < 4; i++) {
        serial[i] = NULL;
        TEST_CHECK(pk_jinja_render(t, convs[i], strlen(convs[i]), NULL, &serial[i], NULL, &err) == PK_OK,
                   "render %d: %s", i, err.msg);
    }
    TEST_COND("first render", serial[0] && !strcmp(serial[0], "<|user|>hi1<|assistant|>"));
    TEST_COND("a bare array is the messages", serial[1] && !strcmp(serial[1], "<|system|>s<|user|>u2"));
    TEST_COND("tojson of tool arguments", serial[2] && strstr(serial[2], "{\"a\": [1, 2.5, null, \"\xc3\xa9\"]}"));
    job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){.t = t, .conv = convs[i], .out = NULL, .rc = 0};
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        TEST_CHECK(!jobs[i].rc && jobs[i].out && serial[i] && !strcmp(jobs[i].out, serial[i]),
                   "thread %d renders as the serial render", i);
        free(jobs[i].out);
        free(serial[i]);
    }

    /* parameters: bos/eos (the conversation's win), add_generation_prompt, now */
    pk_jinja_params p = pk_jinja_default_params();
    p.bos_token = "<s>";
    p.eos_token = "</s>";
    p.add_generation_prompt = 1;
    p.now = 86400 * 365;
    const char *vars = "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ strftime_now('%Y-%m-%d') }}";
    char *out = render(vars, "{\"eos_token\": \"E\", \"add_generation_prompt\": false}", &p, NULL, &err);
    TEST_CHECK(out && !strcmp(out, "<s>|E|True|1971-01-01"), "params: %s", out ? out : err.msg);
    free(out);
    out = render(vars, NULL, NULL, NULL, &err);
    TEST_CHECK(out && !strncmp(out, "||False|", 8), "no params: %s", out ? out : err.msg);
    free(out);

    /* NUL bytes in the text: out_len counts them */
    size_t len = 0;
    out = render("[{{ messages[0].content }}]", "[{\"role\": \"user\", \"content\": \"a\\u0000b\"}]", NULL, &len, &err);
    TEST_COND("a NUL inside content", out && len == 5 && !memcmp(out, "[a\0b]", 5));
    free(out);

    /* Python's printing */
    TEST_COND("floats as Python's repr", renders_to(
        "{{ [1.0, 0.1, 1e16, 1e15, 1e-5, 0.0001, 1/3, 2.5e-7, 123456789.0, -0.0] }}", NULL,
        "[1.0, 0.1, 1e+16, 1000000000000000.0, 1e-05, 0.0001, 0.3333333333333333, 2.5e-07, 123456789.0, -0.0]"));
    TEST_COND("None, True, str repr", renders_to("{{ [none, true, \"it's\", 'a\\nb'] }}|{{ none }}", NULL,
                                                 "[None, True, \"it's\", 'a\\nb']|None"));
    TEST_COND("tojson keeps order and non-ASCII", renders_to("{{ {'z': 1, 'a': '\\u00e9'}|tojson }}", NULL,
                                                             "{\"z\": 1, \"a\": \"\xc3\xa9\"}"));
    TEST_COND("whitespace control as Hugging Face", renders_to("  {% if true %}\n  x\n  {% endif %}\n", NULL, "  x\n"));

    /* limits: each a one-line error naming the line */
    pk_jinja_params lim = pk_jinja_default_params();
    lim.max_output = 100;
    TEST_COND("max_output", fails_with("\n{% for i in range(50) %}{{ 'abc' }}{% endfor %}", NULL, &lim,
                                       "line 2, column 28: the output is longer than the limit of 100 bytes"));
    lim = pk_jinja_default_params();
    lim.max_steps = 10000;
    TEST_COND("max_steps", fails_with("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
                                      NULL, &lim, "the render took more than 10000 steps"));
    lim = pk_jinja_default_params();
    lim.max_depth = 50;
    TEST_COND("max_depth", fails_with("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}", NULL, &lim,
                                      "nested more than 50 deep"));
    lim = pk_jinja_default_params();
    lim.max_memory = 1 << 20;
    TEST_COND("max_memory", fails_with("{% set ns = namespace(s='x') %}{% for i in range(30) %}"
                                       "{% set ns.s = ns.s ~ ns.s %}{% endfor %}", NULL, &lim,
                                       "memory limit of 1 MiB"));
    TEST_COND("an error deep inside macros and loops", fails_with(
        "{% macro a(x) %}{% for i in x %}{{ b(i) }}{% endfor %}{% endmacro %}\n"
        "{% macro b(y) %}{{ y.k.z }}{% endmacro %}\n{{ a([{'k': 1}, {}]) }}", NULL, NULL,
        "line 2, column 24: 'dict object' has no attribute 'k'"));
    TEST_COND("raise_exception's message", fails_with("{{ raise_exception('roles must alternate') }}", NULL, NULL,
                                                      "raise_exception: roles must alternate"));
    TEST_COND("a syntax error", fails_with("a\n{% if x %}\n{% endfor %}", NULL, NULL, "line 3, column 4: unexpected 'endfor'"));
    TEST_COND("invalid JSON", fails_with("x", "{\"messages\": [", NULL, "conversation: invalid JSON at line 1"));

    /* a list holding itself, a namespace holding a macro that holds the scope: freed at the end */
    TEST_COND("cycles", renders_to("{% set l = [] %}{% set _ = l.append(l) %}{% set ns = namespace() %}"
                                   "{% macro m() %}{% endmacro %}{% set ns.m = m %}{{ l|length }}", NULL, "1"));
    /* bytes that are not UTF-8 in a template: no crash, no reading past the end */
    const char junk[] = "{{ '\xff\xfe' ~ '\xc3' }}\xe2\x82{{ 'x'|upper }}\xf0";
    out = render(junk, NULL, NULL, &len, &err);
    TEST_COND("stray bytes pass through", out && len == 7 && !memcmp(out, "\xff\xfe\xc3\xe2\x82X\xf0", 7));
    free(out);

    /* the model-level one-shot form without a model */
    out = NULL;
    TEST_COND("pk_chat_render_template without a model",
              pk_chat_render_template(NULL, "{{ messages[0].content }}{{ add_generation_prompt }}",
                                      "[{\"role\": \"user\", \"content\": \"q\"}]", 1, &out, &err) == PK_OK &&
              out && !strcmp(out, "qTrue"));
    free(out);
    TEST_COND("pk_chat_render_template needs a template or a model",
              pk_chat_render_template(NULL, NULL, "[]", 0, &out, &err) == PK_ERR_ARG && !out);

    /* bad arguments */
    TEST_COND("no output pointer", pk_jinja_parse("x", 1, 0, NULL, &err) == PK_ERR_ARG);
    TEST_COND("render without output", pk_jinja_render(t, "[]", 2, NULL, NULL, NULL, &err) == PK_ERR_ARG);
    pk_jinja_free(t);
    pk_jinja_free(NULL);
    return TEST_REPORT();
}
