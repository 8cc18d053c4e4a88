/* tool_imatrix - helpers for tests/cli/t_imatrix.sh.
 *
 *   tool_imatrix collect MODEL.gguf OUT.gguf ID,ID,...
 *       decode the ids as one sequence (token i at position i) with an
 *       importance matrix attached, and save it (for the numpy reference);
 *   tool_imatrix quantize IN.gguf OUT.gguf PRESET [IMATRIX.gguf]
 *       pk_quantize_file, with the imatrix's lookup when one is given;
 *   tool_imatrix lookup IMATRIX.gguf TENSOR
 *       print the lookup's values (one per line) for TENSOR.
 * Exit 1 with a one-line message on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pocket.h"

static int fail(const char *msg) {
    fprintf(stderr, "error: %s\n", msg);
    return 1;
}

static int collect(const char *model, const char *out, const char *ids_s) {
    pk_error err = {0};
    static int32_t ids[4096];
    int n = 0;
    for (const char *s = ids_s; *s && n < 4096;) {
        char *e;
        ids[n++] = (int32_t)strtol(s, &e, 10);
        s = *e == ',' ? e + 1 : e;
        if (e == s && *s) return fail("bad id list");
    }
    pk_model *m;
    if (pk_model_load(model, &m, &err)) return fail(err.msg);
    pk_context_params cp = pk_context_default_params();
    cp.n_threads = 1;
    cp.n_ctx = n;
    pk_context *c;
    pk_imatrix *im;
    if (pk_context_new(m, &cp, &c, &err) || pk_imatrix_new(&im, &err)) return fail(err.msg);
    pk_imatrix_attach(im, c, 1);
    if (pk_decode(c, ids, n, &err) || pk_imatrix_status(im, &err)) return fail(err.msg);
    pk_imatrix_detach(c);
    pk_imatrix_set_chunks(im, 1, (uint32_t)n);
    if (pk_imatrix_add_dataset(im, "ids", &err) || pk_imatrix_save(im, out, &err)) return fail(err.msg);
    pk_imatrix_free(im);
    pk_context_free(c);
    pk_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    pk_error err = {0};
    if (argc == 5 && !strcmp(argv[1], "collect")) return collect(argv[2], argv[3], argv[4]);
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "quantize")) {
        pk_quantize_params p = pk_quantize_default_params();
        p.preset = argv[4];
        pk_imatrix *im = NULL;
        if (argc == 6) {
            if (pk_imatrix_load(argv[5], &im, &err)) return fail(err.msg);
            p.imatrix = pk_imatrix_lookup;
            p.imatrix_ud = im;
        }
        if (pk_quantize_file(argv[2], argv[3], &p, &err)) return fail(err.msg);
        pk_imatrix_free(im);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "lookup")) {
        pk_imatrix *im;
        if (pk_imatrix_load(argv[2], &im, &err)) return fail(err.msg);
        int64_t n;
        const float *v = pk_imatrix_lookup(im, argv[3], &n);
        if (!v) return fail("no such entry");
        for (int64_t i = 0; i < n; i++) printf("%.9g\n", v[i]);
        pk_imatrix_free(im);
        return 0;
    }
    fprintf(stderr, "usage: tool_imatrix collect MODEL OUT IDS | quantize IN OUT PRESET [IMATRIX] | "
                    "lookup IMATRIX TENSOR\n");
    return 2;
}
