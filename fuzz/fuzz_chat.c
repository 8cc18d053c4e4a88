/* fuzz_chat.c - libFuzzer harness: chat templates (pk_chat_format on the
 * bundled model, pk_chat_apply, pk_chat_detect) on random conversations,
 * and the reasoning / answer splitter (pk_chat_reasoning) on the same bytes.
 *
 * Input: byte 0 picks the template name (chatml, llama3, gemma, deepseek2,
 * deepseek3, harmony, gemma4, none, an unknown one) and
 * add_generation_prompt; the rest is split at NUL bytes
 * into role, content, role, content, ... (at most 64 messages; an empty
 * role is allowed, the library must refuse or format it). The bytes are
 * also given to pk_chat_detect as a template. On success the output must be
 * a NUL-terminated string that contains every message's content with its
 * white space trimmed (every family keeps the text itself; the DeepSeek
 * ones leave out roles other than system, user and assistant; gemma4 leaves
 * out tool messages and thinking blocks of model turns). The splitter must
 * give the same content and reasoning whether the text comes in one piece,
 * byte by byte or cut in two where byte 0 says.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"

static pk_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    pk_error err = {0};
    if (pk_model_load("models/kjv-moe-f16.gguf", &model, &err)) {
        fprintf(stderr, "fuzz_chat: %s (run from the project root)\n", err.msg);
        exit(1);
    }
    return 0;
}

/* The splitter on text[0..n) in one piece, byte by byte and in two pieces
 * cut at a place chosen by seed: the same content and reasoning. */
static void check_split(const char *name, const char *text, size_t n, unsigned seed) {
    pk_chat_reasoning *r[3];
    pk_error err = {0};
    for (int k = 0; k < 3; k++)
        if (pk_chat_reasoning_new(name, &r[k], &err)) abort();
    size_t cut = n ? (size_t)seed * 2654435761u % (n + 1) : 0;
    if (pk_chat_reasoning_feed(r[0], text, n, 1)) abort();
    for (size_t i = 0; i < n; i++)
        if (pk_chat_reasoning_feed(r[1], text + i, 1, i + 1 == n)) abort();
    if (!n && pk_chat_reasoning_feed(r[1], "", 0, 1)) abort();
    if (pk_chat_reasoning_feed(r[2], text, cut, 0) || pk_chat_reasoning_feed(r[2], text + cut, n - cut, 1)) abort();
    size_t c0, t0;
    const char *c = pk_chat_reasoning_content(r[0], &c0), *t = pk_chat_reasoning_text(r[0], &t0);
    for (int k = 1; k < 3; k++) {
        size_t ck, tk;
        const char *ca = pk_chat_reasoning_content(r[k], &ck), *ta = pk_chat_reasoning_text(r[k], &tk);
        if (ck != c0 || tk != t0 || memcmp(ca, c, c0) || memcmp(ta, t, t0)) {
            fprintf(stderr, "splitter %s: %s pieces give another split\n", name, k == 1 ? "one-byte" : "two");
            abort();
        }
    }
    if (c0 + t0 > n) { fprintf(stderr, "splitter %s: more out than in\n", name); abort(); }
    for (int k = 0; k < 3; k++) pk_chat_reasoning_free(r[k]);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const names[] = {"chatml", "llama3", "gemma", "deepseek2", "deepseek3", "harmony",
                                        "gemma4", NULL, "", "jinja2"};
    const char *name = names[data[0] % 10];
    const int deepseek = name && !strncmp(name, "deepseek", 8);
    const int gemma4 = name && !strcmp(name, "gemma4");
    const int add_gen = data[0] / 8 & 1;
    char *buf = malloc(size + 1);
    if (!buf) return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = 0;
    pk_chat_detect(buf, size - 1);
    pk_chat_message msgs[64];
    int n = 0;
    char *p = buf, *end = buf + size - 1;
    while (p < end && n < 64) {
        msgs[n].role = p;
        p += strlen(p) + 1;
        msgs[n].content = p < end ? p : "";
        if (p < end) p += strlen(p) + 1;
        n++;
    }
    pk_error err = {0};
    char *out = NULL;
    int rc = pk_chat_format(model, name, msgs, n, add_gen, &out, &err);
    if (rc == PK_OK) {
        if (!out) abort();
        size_t ol = strlen(out);
        for (int i = 0; i < n; i++) {
            const char *c = msgs[i].content, *r = msgs[i].role;
            if (deepseek && strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant")) continue;
            if (gemma4 && (!strcmp(r, "tool") || ((!strcmp(r, "assistant") || !strcmp(r, "model")) &&
                                                  (strstr(c, "<|channel>") || strstr(c, "<channel|>")))))
                continue;
            size_t cl = strlen(c);
            while (cl && is_space(*c)) { c++; cl--; }
            while (cl && is_space(c[cl - 1])) cl--;
            if (cl && !memmem(out, ol, c, cl)) {
                fprintf(stderr, "template %s: message %d's content is missing from the output\n", name ? name : "(model)", i);
                abort();
            }
        }
        free(out);
    } else if (strchr(err.msg, '\n') || !err.msg[0]) {
        abort();
    }
    char *out2 = NULL;
    if (name && pk_chat_apply(name, msgs, n, add_gen, &out2, &err) == PK_OK) free(out2);
    free(buf);
    if (name && *name && strcmp(name, "jinja2")) check_split(name, (const char *)data + 1, size - 1, data[0]);
    return 0;
}
