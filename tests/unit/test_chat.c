/* test_chat.c - chat templates (src/text/chat.c): the exact text each family
 * writes for a system + user + assistant + user conversation, with and
 * without the generation prompt; detection from template strings as they
 * appear in GGUF files; override by name; the errors for unknown names,
 * unknown templates and models without a template (the bundled KJV model);
 * the reasoning / answer splitter on every cut of its input into pieces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"
#include "testhelp.h"

static const pk_chat_message conv[] = {
    {"system", "You are terse."},
    {"user", "Who begat Enos?"},
    {"assistant", " Seth. \n"},
    {"user", "And then?\n"},
};
#define NCONV 4

/* Format conv with template name and compare to want. */
static void check_format(const char *name, int add_gen, const char *want) {
    char *out = (char *)1;
    pk_error err = {0};
    int rc = pk_chat_apply(name, conv, NCONV, add_gen, &out, &err);
    TEST_CHECK(rc == PK_OK && out, "%s: pk_chat_apply failed: %s", name, err.msg);
    if (rc == PK_OK && out)
        TEST_CHECK(!strcmp(out, want), "%s (gen %d):\n got [%s]\nwant [%s]", name, add_gen, out, want);
    free(rc == PK_OK ? out : NULL);
}

/* ---- representative template snippets, as stored in tokenizer.chat_template */

/* Qwen2.5 / Qwen3 (ChatML) */
static const char *const tmpl_qwen =
    "{%- if messages[0]['role'] == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n";

/* Meta Llama 3 / 3.1 */
static const char *const tmpl_llama3 =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

/* Gemma 2 / 3 */
static const char *const tmpl_gemma =
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{% set first_user_prefix = messages[0]['content'] + '\n\n' %}{% endif %}"
    "{% for message in loop_messages %}{% if (message['role'] == 'assistant') %}"
    "{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}";

/* Gemma-4 (google-gemma-4-31B-it, abridged) */
static const char *const tmpl_gemma4 =
    "{{- bos_token -}}{%- if (enable_thinking is defined and enable_thinking) or tools or "
    "messages[0]['role'] in ['system', 'developer'] -%}{{- '<|turn>system\n' -}}"
    "{{- '<turn|>\n' -}}{%- endif %}{%- set role = 'model' if message['role'] == 'assistant' "
    "else message['role'] -%}{{- '<|turn>' + role + '\n' }}{{- '<|tool_call>call:' + function['name'] "
    "+ '{' -}}{%- if add_generation_prompt -%}{{- '<|turn>model\n' -}}{%- if not enable_thinking | "
    "default(false) -%}{{- '<|channel>thought\n<channel|>' -}}{%- endif -%}{%- endif -%}";

/* DeepSeek-V2-Lite-Chat, DeepSeek-V3 (abridged), gpt-oss (harmony, abridged) */
static const char *const tmpl_deepseek2 =
    "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ 'User: ' + message['content'] + '\n\n' }}{% elif message['role'] == 'assistant' %}"
    "{{ 'Assistant: ' + message['content'] + eos_token }}{% elif message['role'] == 'system' %}"
    "{{ message['content'] + '\n\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";
static const char *const tmpl_deepseek3 =
    "{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}"
    "{%- if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}{%- endif %}"
    "{%- if message['role'] == 'assistant' %}{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}"
    "{%- endif %}{%- endfor %}{% if add_generation_prompt %}{{'<｜Assistant｜>'}}{% endif %}";
static const char *const tmpl_harmony =
    "{{- \"<|start|>system<|message|>\" }}{{- \"Reasoning: \" + reasoning_effort + \"\\n\\n\" }}"
    "{{- \"<|end|>\" }}{%- for message in loop_messages -%}"
    "{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}"
    "{%- endfor -%}{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}";

/* Not supported: Mistral [INST], Phi-4 (ChatML markers with <|im_sep|>). */
static const char *const tmpl_mistral =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '[INST] ' + message['content'] + ' [/INST]' }}{% else %}{{ message['content'] + eos_token }}"
    "{% endif %}{% endfor %}";
static const char *const tmpl_phi4 =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '<|im_sep|>' + "
    "message['content'] + '<|im_end|>'}}{% endfor %}";

static void test_formats(void) {
    check_format("chatml", 0,
                 "<|im_start|>system\nYou are terse.<|im_end|>\n"
                 "<|im_start|>user\nWho begat Enos?<|im_end|>\n"
                 "<|im_start|>assistant\n Seth. \n<|im_end|>\n"
                 "<|im_start|>user\nAnd then?\n<|im_end|>\n");
    check_format("chatml", 1,
                 "<|im_start|>system\nYou are terse.<|im_end|>\n"
                 "<|im_start|>user\nWho begat Enos?<|im_end|>\n"
                 "<|im_start|>assistant\n Seth. \n<|im_end|>\n"
                 "<|im_start|>user\nAnd then?\n<|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_format("llama3", 0,
                 "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWho begat Enos?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nSeth.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nAnd then?<|eot_id|>");
    check_format("llama3", 1,
                 "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWho begat Enos?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nSeth.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nAnd then?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    check_format("gemma", 0,
                 "<start_of_turn>user\nYou are terse.\n\nWho begat Enos?<end_of_turn>\n"
                 "<start_of_turn>model\nSeth.<end_of_turn>\n"
                 "<start_of_turn>user\nAnd then?<end_of_turn>\n");
    check_format("gemma", 1,
                 "<start_of_turn>user\nYou are terse.\n\nWho begat Enos?<end_of_turn>\n"
                 "<start_of_turn>model\nSeth.<end_of_turn>\n"
                 "<start_of_turn>user\nAnd then?<end_of_turn>\n"
                 "<start_of_turn>model\n");
    check_format("gemma4", 0,
                 "<|turn>system\nYou are terse.<turn|>\n"
                 "<|turn>user\nWho begat Enos?<turn|>\n"
                 "<|turn>model\nSeth.<turn|>\n"
                 "<|turn>user\nAnd then?<turn|>\n");
    check_format("gemma4", 1,
                 "<|turn>system\nYou are terse.<turn|>\n"
                 "<|turn>user\nWho begat Enos?<turn|>\n"
                 "<|turn>model\nSeth.<turn|>\n"
                 "<|turn>user\nAnd then?<turn|>\n"
                 "<|turn>model\n<|channel>thought\n<channel|>");

    check_format("deepseek2", 0,
                 "You are terse.\n\nUser: Who begat Enos?\n\n"
                 "Assistant:  Seth. \n<｜end▁of▁sentence｜>User: And then?\n\n\n");
    check_format("deepseek2", 1,
                 "You are terse.\n\nUser: Who begat Enos?\n\n"
                 "Assistant:  Seth. \n<｜end▁of▁sentence｜>User: And then?\n\n\nAssistant:");
    check_format("deepseek3", 0,
                 "You are terse.\n\n<｜User｜>Who begat Enos?"
                 "<｜Assistant｜> Seth. \n<｜end▁of▁sentence｜><｜User｜>And then?\n");
    check_format("deepseek3", 1,
                 "You are terse.\n\n<｜User｜>Who begat Enos?"
                 "<｜Assistant｜> Seth. \n<｜end▁of▁sentence｜><｜User｜>And then?\n<｜Assistant｜>");
    check_format("harmony", 0,
                 "<|start|>system<|message|>You are terse.<|end|>"
                 "<|start|>user<|message|>Who begat Enos?<|end|>"
                 "<|start|>assistant<|message|> Seth. \n<|return|>"
                 "<|start|>user<|message|>And then?\n<|end|>");
    check_format("harmony", 1,
                 "<|start|>system<|message|>You are terse.<|end|>"
                 "<|start|>user<|message|>Who begat Enos?<|end|>"
                 "<|start|>assistant<|message|> Seth. \n<|return|>"
                 "<|start|>user<|message|>And then?\n<|end|>"
                 "<|start|>assistant");

    /* an empty conversation: "" or just the generation prompt */
    pk_error err = {0};
    char *out = NULL;
    TEST_COND("empty chatml", pk_chat_apply("chatml", NULL, 0, 0, &out, &err) == PK_OK && out && !*out);
    free(out);
    out = NULL;
    TEST_COND("empty gemma + gen",
              pk_chat_apply("gemma", NULL, 0, 1, &out, &err) == PK_OK && out &&
              !strcmp(out, "<start_of_turn>model\n"));
    free(out);
    /* a lone system message in gemma becomes a user turn */
    pk_chat_message sys = {"system", "Be brief."};
    out = NULL;
    TEST_COND("gemma lone system",
              pk_chat_apply("gemma", &sys, 1, 0, &out, &err) == PK_OK && out &&
              !strcmp(out, "<start_of_turn>user\nBe brief.<end_of_turn>\n"));
    free(out);
    /* gemma4: earlier thinking is dropped from model turns, tool messages are
       left out, and a model message after a model message continues its turn */
    static const pk_chat_message g4[] = {
        {"user", " Hi "}, {"assistant", "<|channel>thought\nhmm<channel|>Hello. "},
        {"tool", "ignored"}, {"assistant", "More <|channel>x<channel|>here"}, {"user", "Bye"},
    };
    out = NULL;
    TEST_COND("gemma4 strip thinking, tool, continuation",
              pk_chat_apply("gemma4", g4, 5, 0, &out, &err) == PK_OK && out &&
              !strcmp(out, "<|turn>user\nHi<turn|>\n<|turn>model\nHello.<turn|>\nMore here<turn|>\n"
                           "<|turn>user\nBye<turn|>\n"));
    free(out);
    /* bad messages */
    pk_chat_message bad = {"user", NULL};
    out = (char *)1;
    TEST_COND("NULL content", pk_chat_apply("chatml", &bad, 1, 0, &out, &err) == PK_ERR_ARG && !out);
    TEST_COND("NULL content message", strstr(err.msg, "message 0") != NULL);
}

static void test_detect(void) {
    const struct { const char *tmpl, *want; } cases[] = {
        {tmpl_qwen, "chatml"}, {tmpl_llama3, "llama3"}, {tmpl_gemma, "gemma"}, {tmpl_gemma4, "gemma4"},
        {tmpl_deepseek2, "deepseek2"}, {tmpl_deepseek3, "deepseek3"}, {tmpl_harmony, "harmony"},
        {tmpl_mistral, NULL}, {tmpl_phi4, NULL}, {"", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = pk_chat_detect(cases[i].tmpl, strlen(cases[i].tmpl));
        TEST_CHECK(cases[i].want ? got && !strcmp(got, cases[i].want) : got == NULL,
                   "detect case %zu: got %s, want %s", i, got ? got : "NULL",
                   cases[i].want ? cases[i].want : "NULL");
    }
    /* the length bounds the search: a marker past len is not seen */
    TEST_COND("detect honours len", pk_chat_detect(tmpl_gemma, 10) == NULL);
    TEST_COND("detect NULL", pk_chat_detect(NULL, 0) == NULL);
}

static void test_names(void) {
    pk_error err = {0};
    const char *name = NULL;
    TEST_COND("resolve chatml by name", pk_chat_resolve(NULL, "chatml", &name, &err) == PK_OK &&
              name && !strcmp(name, "chatml"));
    TEST_COND("resolve llama3 by name", pk_chat_resolve(NULL, "llama3", &name, &err) == PK_OK &&
              !strcmp(name, "llama3"));
    TEST_COND("unknown name", pk_chat_resolve(NULL, "vicuna", &name, &err) == PK_ERR_ARG);
    TEST_COND("unknown name message", strstr(err.msg, "'vicuna'") && strstr(err.msg, "chatml") &&
              !strchr(err.msg, '\n'));
    char *out = (char *)1;
    TEST_COND("apply unknown name", pk_chat_apply("alpaca", conv, NCONV, 1, &out, &err) == PK_ERR_ARG &&
              !out);
}

/* The bundled model has no chat template: an error unless overridden. */
static void test_model(void) {
    const char *path = "models/kjv-moe-f16.gguf";
    pk_error err = {0};
    pk_model *m = NULL;
    if (pk_model_load(path, &m, &err)) {
        TEST_CHECK(0, "cannot load %s (run from the project root): %s", path, err.msg);
        return;
    }
    size_t len = 99;
    TEST_COND("KJV: no template text", pk_chat_template_text(m, &len) == NULL && len == 0);
    TEST_COND("KJV: no template name", pk_chat_template_name(m) == NULL);
    const char *name = "x";
    int rc = pk_chat_resolve(m, NULL, &name, &err);
    TEST_CHECK(rc == PK_ERR_UNSUPPORTED && name == NULL, "KJV resolve: rc %d", rc);
    TEST_CHECK(strstr(err.msg, "no chat template") && strstr(err.msg, path), "message: %s", err.msg);
    char *out = (char *)1;
    TEST_COND("KJV format without override fails",
              pk_chat_format(m, NULL, conv, NCONV, 1, &out, &err) == PK_ERR_UNSUPPORTED && !out);
    /* overridden: same text as pk_chat_apply (the model adds no BOS for chatml) */
    char *want = NULL;
    out = NULL;
    TEST_COND("KJV format chatml",
              pk_chat_format(m, "chatml", conv, NCONV, 1, &out, &err) == PK_OK &&
              pk_chat_apply("chatml", conv, NCONV, 1, &want, &err) == PK_OK && out && want &&
              !strcmp(out, want));
    free(out);
    free(want);
    out = (char *)1;
    TEST_COND("KJV format bad override",
              pk_chat_format(m, "nope", conv, NCONV, 1, &out, &err) == PK_ERR_ARG && !out);
    pk_model_free(m);
}

/* ---- reasoning / answer splitting ---------------------------------------- */

/* Split text for template name, fed in pieces cut at `cuts` (sorted
 * offsets; NULL with k = 0: one piece, or with k < 0: byte by byte), and
 * compare content and reasoning. */
static int split_once(const char *name, const char *text, const size_t *cuts, int k, const char *want_c,
                      const char *want_r) {
    pk_chat_reasoning *r = NULL;
    pk_error err = {0};
    if (pk_chat_reasoning_new(name, &r, &err)) return 0;
    size_t n = strlen(text), at = 0;
    int ok = 1;
    size_t seen_c = 0, seen_r = 0;
    for (int i = 0; ok && (k < 0 ? at < n : i <= k); i++) {
        size_t end = k < 0 ? at + 1 : i < k ? cuts[i] : n;
        ok = pk_chat_reasoning_feed(r, text + at, end - at, end == n) == PK_OK;
        at = end;
        /* what is out never shrinks and is always a prefix of the final answer */
        size_t lc, lr;
        const char *c = pk_chat_reasoning_content(r, &lc), *t = pk_chat_reasoning_text(r, &lr);
        ok = ok && lc >= seen_c && lr >= seen_r && lc <= strlen(want_c) && lr <= strlen(want_r) &&
             !memcmp(c, want_c, lc) && !memcmp(t, want_r, lr);
        seen_c = lc;
        seen_r = lr;
    }
    size_t lc, lr;
    const char *c = pk_chat_reasoning_content(r, &lc), *t = pk_chat_reasoning_text(r, &lr);
    ok = ok && lc == strlen(want_c) && !strcmp(c, want_c) && lr == strlen(want_r) && !strcmp(t, want_r);
    if (!ok) fprintf(stderr, "  split %s [%s]: content [%s] reasoning [%s]\n", name, text, c, t);
    pk_chat_reasoning_free(r);
    return ok;
}

static void check_split(const char *name, const char *text, const char *want_c, const char *want_r) {
    TEST_CHECK(split_once(name, text, NULL, 0, want_c, want_r), "%s: one piece: [%s]", name, text);
    TEST_CHECK(split_once(name, text, NULL, -1, want_c, want_r), "%s: byte by byte: [%s]", name, text);
    size_t n = strlen(text);
    int bad = 0;
    for (size_t a = 0; a <= n; a++)
        for (size_t b = a; b <= n; b += 3) {
            size_t cuts[2] = {a, b};
            bad += !split_once(name, text, cuts, 2, want_c, want_r);
        }
    TEST_CHECK(bad == 0, "%s: %d cuts into three pieces differ: [%s]", name, bad, text);
}

static void test_reasoning(void) {
    /* gpt-oss: analysis is reasoning, final (and a commentary preamble) the answer */
    check_split("harmony", "<|channel|>analysis<|message|>Think  it over.<|end|><|start|>assistant"
                "<|channel|>final<|message|>Seth begat Enos.", "Seth begat Enos.", "Think  it over.");
    check_split("harmony", "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis"
                "<|message|>b<|end|><|start|>assistant<|channel|>commentary<|message|>Looking.<|end|>"
                "<|start|>assistant<|channel|>final<|message|> x <|", "Looking. x <|", "ab");
    check_split("harmony", "<|channel|>final<|message|>Only the answer", "Only the answer", "");
    check_split("harmony", "Plain text, no channels.", "Plain text, no channels.", "");
    check_split("harmony", "<|channel|>analysis<|message|>cut sh", "", "cut sh");
    check_split("harmony", "<|channel|>analysis<|message|>done<|end|><|start|>assistant<|channel|>fin",
                "", "done");
    /* a "header" longer than any is text, whether the text ends there or not */
    static char longh[600];
    memcpy(longh, "<|channel|>", 11);
    memset(longh + 11, 'x', 530);
    check_split("harmony", longh, longh, "");
    memcpy(longh + 541, "<|message|>y", 13);
    check_split("harmony", longh, longh, "");
    /* Qwen3 / DeepSeek-R1 */
    check_split("chatml", "<think>\nLet me see.\n</think>\n\nIt is Enos.", "It is Enos.", "Let me see.");
    check_split("chatml", "  <think></think>Hi", "Hi", "");
    check_split("deepseek3", "<think>a < b </thin", "", "a < b </thin");
    check_split("chatml", "No thinking <think>here</think>", "No thinking <think>here</think>", "");
    check_split("llama3", "<thinker>", "<thinker>", "");
    check_split("chatml", "<thi", "<thi", "");
    check_split("chatml", "", "", "");
    /* Gemma-4 */
    check_split("gemma4", "<|channel>thought\nPonder.<channel|>The answer.", "The answer.", "Ponder.");
    check_split("gemma4", "Answer<channel|> and<|channel>thought\nmore<channel|> end", "Answer and end", "more");
    check_split("gemma4", "Just <|chan", "Just <|chan", "");

    pk_chat_reasoning *r = (pk_chat_reasoning *)1;
    pk_error err = {0};
    TEST_COND("reasoning: unknown family", pk_chat_reasoning_new("vicuna", &r, &err) == PK_ERR_ARG && !r &&
              strstr(err.msg, "'vicuna'"));
}

int main(void) {
    test_formats();
    test_reasoning();
    test_detect();
    test_names();
    test_model();
    return TEST_REPORT();
}
