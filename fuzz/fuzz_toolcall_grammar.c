/* fuzz_toolcall_grammar.c - libFuzzer harness: the grammar that forces a
 * tool call (pk_toolcall_grammar) from a request's tools.
 *
 * Input: byte 0 picks the format and tool_choice, byte 1 the flags; the
 * rest is the "tools" JSON text. Either the grammar is made - and then it
 * compiles (pk_grammar_new) and needs a call (the empty text is a prefix,
 * not complete) - or the result is PK_ERR_ARG / PK_ERR_NOMEM with a
 * one-line message and no grammar.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"

static const char *const formats[] = {"qwen3coder", "hermes", "harmony", "deepseek", "llama3", "gemma4"};
#define N_FORMATS 6
static const char *const choices[] = {"required", "f", "get_weather", "a.b-c_d"};

#define FAIL(...) do { fprintf(stderr, "fuzz_toolcall_grammar: "); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const char *fmt = formats[data[0] % N_FORMATS], *choice = choices[data[0] / N_FORMATS % 4];
    int flags = data[1] & (PK_SCHEMA_LENIENT | PK_TOOLCALL_ONE_CALL | PK_TOOLCALL_MAY_THINK | PK_TOOLCALL_THINKING);
    pk_error err = {0};
    char *gbnf = NULL;
    int rc = pk_toolcall_grammar(fmt, (const char *)data + 2, size - 2, choice, flags, &gbnf, &err);
    if (rc) {
        if (gbnf) FAIL("%s: an error (%d) and a grammar", fmt, rc);
        if ((rc != PK_ERR_ARG && rc != PK_ERR_NOMEM) || !err.msg[0] || strchr(err.msg, '\n'))
            FAIL("%s: error %d, message [%s]", fmt, rc, err.msg);
        return 0;
    }
    pk_grammar *g = NULL;
    if (pk_grammar_new(NULL, gbnf, NULL, &g, &err)) FAIL("%s: the grammar does not compile: %s\n%s", fmt, err.msg, gbnf);
    if (pk_grammar_check(g, "", 0) != 0) FAIL("%s: the empty text is not a prefix, or is complete", fmt);
    pk_grammar_free(g);
    free(gbnf);
    return 0;
}
