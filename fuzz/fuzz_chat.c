/* fuzz_chat.c - libFuzzer harness: chat templates (pk_chat_format on the
 * bundled model, pk_chat_apply, pk_chat_detect) on random conversations.
 *
 * Input: byte 0 picks the template name (chatml, llama3, gemma, deepseek2,
 * deepseek3, harmony, none, an unknown one) and add_generation_prompt; the rest is split at NUL bytes
 * into role, content, role, content, ... (at most 64 messages; an empty
 * role is allowed, the library must refuse or format it). The bytes are
 * also given to pk_chat_detect as a template. On success the output must be
 * a NUL-terminated string that contains every message's content with its
 * white space trimmed (every family keeps the text itself; the DeepSeek
 * ones leave out roles other than system, user and assistant).
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

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const names[] = {"chatml", "llama3", "gemma", "deepseek2", "deepseek3", "harmony",
                                        NULL, "", "jinja2"};
    const char *name = names[data[0] % 9];
    const int deepseek = name && !strncmp(name, "deepseek", 8);
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
    return 0;
}
