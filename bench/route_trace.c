/* route_trace.c - record which routed experts a model's router picks, token
 * by token, for cache-policy studies (bench/cache_sim.py). Not a test.
 *
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Iinclude -Isrc -pthread \
 *       bench/route_trace.c build/libpocket.a -o build/route_trace -lpcre2-8 -lm -lpthread
 *   build/route_trace MODEL TEXT N_TOKENS > trace.txt
 *
 * Decodes the first N_TOKENS tokens of TEXT one at a time (so each token is
 * routed on its own, as in generation) and prints one line per token: for
 * every layer the experts it ran, as "e,e,e|e,e,e|...". The experts are
 * seen through the matvec observer (the same hook the importance matrix
 * uses): a gate-projection product of an expert tensor names its expert. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "engine/context.h"

typedef struct {
    const pk_model *m;
    int *sel;          /* [layer][k] this token's experts */
    int *n;            /* [layer] */
    int k;
} rec;

static void observe(void *ud, const pk_tensor *w, int64_t row0, int64_t nrows, const float *x) {
    (void)nrows; (void)x;
    rec *r = ud;
    for (int il = 0; il < r->m->hp.n_layer; il++)
        if (w == &r->m->layers[il].gate_exps) {
            if (r->n[il] < r->k) r->sel[il * r->k + r->n[il]++] = (int)(row0 / w->ne[1]);
            return;
        }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: route_trace MODEL TEXT N_TOKENS\n");
        return 2;
    }
    pk_error err = {0};
    pk_model *m;
    if (pk_model_load(argv[1], &m, &err)) { fprintf(stderr, "route_trace: %s\n", err.msg); return 1; }
    if (!m->hp.moe) { fprintf(stderr, "route_trace: %s has no routed experts\n", argv[1]); return 1; }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { perror(argv[2]); return 1; }
    static char text[1 << 20];
    size_t len = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    int n = atoi(argv[3]);
    int32_t *ids = malloc(sizeof *ids * (len + 16));
    int nt = pk_model_tokenize(m, text, len, ids, (int)len + 16, 1, 0);
    if (nt < 0) { fprintf(stderr, "route_trace: tokenizer failed\n"); return 1; }
    if (n > nt) n = nt;
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = n;
    cp.n_threads = 1;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err)) { fprintf(stderr, "route_trace: %s\n", err.msg); return 1; }
    const int L = m->hp.n_layer, K = m->hp.n_expert_used;
    rec r = {.m = m, .sel = calloc((size_t)L * K, sizeof(int)), .n = calloc((size_t)L, sizeof(int)), .k = K};
    c->observer = observe;
    c->observer_ud = &r;
    printf("# %s: %d layers, %d experts, top-%d; %d tokens of %s\n", argv[1], L, m->hp.n_expert, K, n, argv[2]);
    for (int t = 0; t < n; t++) {
        memset(r.n, 0, (size_t)L * sizeof(int));
        if (pk_decode(c, &ids[t], 1, &err)) { fprintf(stderr, "route_trace: %s\n", err.msg); return 1; }
        for (int il = 0; il < L; il++) {
            for (int j = 0; j < r.n[il]; j++) printf("%s%d", j ? "," : "", r.sel[il * K + j]);
            putchar(il + 1 < L ? '|' : '\n');
        }
    }
    pk_context_free(c);
    pk_model_free(m);
    free(ids); free(r.sel); free(r.n);
    return 0;
}
