/* tool_prune - helper of tests/cli/t_prune.sh.
 *
 *   tool_prune scores MODEL.gguf IDS.txt THREADS [SLOTS]
 *       decode the ids of IDS.txt (whitespace-separated) as one sequence
 *       (token i at position i) with an expert saliency attached, and print
 *       one line per routed expert: "layer expert tokens reap" (the REAP
 *       score, %.9g), for the numpy reference. With SLOTS: one token at a
 *       time, under an expert cache of SLOTS experts per layer (the
 *       streamed path of engine/kinds/moe.c).
 * Exit 1 with a one-line message on failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pocket.h"

static int fail(const char *msg) {
    fprintf(stderr, "error: %s\n", msg);
    return 1;
}

int main(int argc, char **argv) {
    if ((argc != 5 && argc != 6) || strcmp(argv[1], "scores")) {
        fprintf(stderr, "usage: tool_prune scores MODEL IDS.txt THREADS [SLOTS]\n");
        return 2;
    }
    static int32_t ids[4096];
    int n = 0;
    FILE *f = fopen(argv[3], "r");
    if (!f) return fail("cannot open the id file");
    while (n < 4096 && fscanf(f, "%d", &ids[n]) == 1) n++;
    fclose(f);
    if (n < 1) return fail("no ids");
    pk_error err = {0};
    pk_model *m;
    pk_context *c;
    pk_saliency *s;
    pk_model_params mp = pk_model_default_params();
    const int one = argc == 6;
    mp.expert_slots = one ? atoi(argv[5]) : 0;
    if (pk_model_load_params(argv[2], &mp, &m, &err)) return fail(err.msg);
    pk_context_params cp = pk_context_default_params();
    cp.n_threads = atoi(argv[4]);
    cp.n_ctx = n;
    if (pk_context_new(m, &cp, &c, &err) || pk_saliency_new(m, &s, &err) || pk_saliency_attach(s, c, &err))
        return fail(err.msg);
    for (int i = 0; i < n; i += one ? 1 : n)
        if (pk_decode(c, ids + i, one ? 1 : n, &err) || pk_saliency_status(s, &err)) return fail(err.msg);
    pk_saliency_detach(c);
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    for (int il = 0; il < mi.n_layer; il++)
        for (int e = 0; e < pk_saliency_n_expert(s, il); e++)
            printf("%d %d %lld %.9g\n", il, e, (long long)pk_saliency_tokens(s, il, e),
                   pk_saliency_score(s, PK_SALIENCY_REAP, il, e));
    pk_saliency_free(s);
    pk_context_free(c);
    pk_model_free(m);
    return 0;
}
