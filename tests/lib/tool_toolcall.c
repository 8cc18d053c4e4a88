/* tool_toolcall - the tool-call parser from the command line, for the tests
 * against real chat templates (tests/ref/shared/t_toolcall_templates.sh) and
 * for looking at what a model's output parses to.
 *
 *   tool_toolcall detect TEMPLATE_FILE          the format the template makes its model write, or "none"
 *   tool_toolcall parse FORMAT [TOOLS_JSON_FILE] <TEXT
 *
 * parse feeds the text a byte at a time and prints one JSON object:
 * {"content": ..., "tool_calls": [{"id", "name", "arguments", "closed"}, ...]}.
 * Exit status 2 for bad usage or input files, 1 if the parser fails. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pocket.h"

static char *slurp(FILE *f, size_t *n) {
    size_t cap = 1 << 16, r;
    char *b = malloc(cap);
    *n = 0;
    while (b && (r = fread(b + *n, 1, cap - *n, f)) > 0) {
        *n += r;
        if (*n == cap) { char *nb = realloc(b, cap *= 2); if (!nb) { free(b); return NULL; } b = nb; }
    }
    return b;
}

static char *slurp_path(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "tool_toolcall: cannot open %s\n", path); exit(2); }
    char *b = slurp(f, n);
    fclose(f);
    if (!b) { fprintf(stderr, "tool_toolcall: out of memory reading %s\n", path); exit(2); }
    return b;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "detect")) {
        size_t n;
        char *t = slurp_path(argv[2], &n);
        const char *f = pk_toolcall_detect(t, n);
        printf("%s\n", f ? f : "none");
        free(t);
        return 0;
    }
    if ((argc != 3 && argc != 4) || strcmp(argv[1], "parse")) {
        fprintf(stderr, "usage: tool_toolcall detect TEMPLATE_FILE | parse FORMAT [TOOLS_JSON_FILE] <TEXT\n");
        return 2;
    }
    pk_error err = {0};
    pk_toolcall *tc;
    if (pk_toolcall_new(argv[2], 1, &tc, &err)) { fprintf(stderr, "tool_toolcall: %s\n", err.msg); return 2; }
    if (argc == 4) {
        size_t n;
        char *t = slurp_path(argv[3], &n);
        int rc = pk_toolcall_set_tools(tc, t, n, &err);
        free(t);
        if (rc) { fprintf(stderr, "tool_toolcall: %s: %s\n", argv[3], err.msg); return 2; }
    }
    size_t n;
    char *text = slurp(stdin, &n);
    if (!text) { fprintf(stderr, "tool_toolcall: out of memory\n"); return 2; }
    for (size_t i = 0; i <= n; i++)
        if (pk_toolcall_feed(tc, text + i, i < n, i == n)) { fprintf(stderr, "tool_toolcall: feed failed\n"); return 1; }
    size_t cl;
    const char *c = pk_toolcall_content(tc, &cl);
    json_t *out = json_object(), *calls = json_array();
    json_object_set_new(out, "content", json_stringn(c, cl));
    for (int i = 0; i < pk_toolcall_count(tc); i++) {
        pk_toolcall_call call;
        pk_toolcall_get(tc, i, &call);
        json_array_append_new(calls, json_pack("{s:s, s:s, s:s%, s:b}", "id", call.id, "name", call.name, "arguments",
                                               call.arguments, call.arguments_len, "closed", call.closed));
    }
    json_object_set_new(out, "tool_calls", calls);
    char *s = json_dumps(out, JSON_ENSURE_ASCII);
    if (!s) { fprintf(stderr, "tool_toolcall: output is not valid UTF-8\n"); return 1; }
    puts(s);
    free(s);
    json_decref(out);
    pk_toolcall_free(tc);
    free(text);
    return 0;
}
