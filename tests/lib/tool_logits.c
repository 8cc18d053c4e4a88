/* tool_logits - write the logits pocket computes at every position, for the
 * independent numpy reference (tests/ref/t_forward_ref.sh) to compare with.
 *
 *   tool_logits [-t THREADS] [-b BATCH] [-ctk T] [-ctv T] [-s SLOTS] [-last] MODEL.gguf OUT.f32 ID,ID,...
 *
 * -s: load under a memory plan with an expert cache of SLOTS experts per
 * layer (the rest read from the file on demand: tests/cli/t_xcache.sh).
 * Feeds the ids in batches of BATCH (default: the context's default; 1 =
 * one token at a time), token i at position i, and writes
 * n_ids x n_vocab little-endian float32 logits to OUT.f32. -ctk / -ctv set
 * the KV cache types (f32, f16, q8_0; default: the library's, f16). -last:
 * the ids by pk_decode instead, which computes the logits of the last id
 * only (the last layer's FFN for that row alone, none in the batches
 * before), and writes those n_vocab logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pocket.h"

int main(int argc, char **argv) {
    int threads = 1, batch = 0, slots = 0, a = 1, tk = 0, tv = 0, last = 0;
    while (argc - a > 3 && argv[a][0] == '-') {
        if (!strcmp(argv[a], "-last")) { last = 1; a++; continue; }
        if (!strcmp(argv[a], "-t")) threads = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-b")) batch = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-s")) slots = atoi(argv[a + 1]);
        else if (!strcmp(argv[a], "-ctk") || !strcmp(argv[a], "-ctv")) {
            int t = pk_cache_type_parse(argv[a + 1]);
            if (t < 0) { fprintf(stderr, "error: %s: unknown KV cache type '%s'\n", argv[a], argv[a + 1]); return 2; }
            *(argv[a][3] == 'k' ? &tk : &tv) = t;
        } else break;
        a += 2;
    }
    if (argc - a != 3) {
        fprintf(stderr, "usage: tool_logits [-t THREADS] [-b BATCH] [-ctk T] [-ctv T] [-s SLOTS] [-last] MODEL.gguf OUT.f32 ID,ID,...\n");
        return 2;
    }
    pk_error err = {0};
    pk_model *m;
    pk_model_params mp = pk_model_default_params();
    mp.expert_slots = slots;
    if (pk_model_load_params(argv[a], &mp, &m, &err)) { fprintf(stderr, "error: %s\n", err.msg); return 1; }
    int32_t ids[4096];
    int n = 0;
    for (char *s = argv[a + 2]; *s && n < 4096;) {
        ids[n++] = (int32_t)strtol(s, &s, 10);
        if (*s == ',') s++;
    }
    pk_context_params cp = pk_context_default_params();
    cp.n_threads = threads;
    cp.n_ctx = n;
    cp.n_batch = batch;
    cp.type_k = tk;
    cp.type_v = tv;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err)) {
        fprintf(stderr, "error: %s\n", err.msg);
        pk_model_free(m);
        return 1;
    }
    int V = pk_model_n_vocab(m);
    float *logits = malloc((size_t)n * V * sizeof(float));
    if (!logits || (last ? pk_decode(c, ids, n, &err) : pk_decode_all(c, ids, n, logits, &err))) {
        fprintf(stderr, "error: %s\n", logits ? err.msg : "out of memory");
        return 1;
    }
    const size_t nw = last ? (size_t)V : (size_t)n * V;
    if (last) memcpy(logits, pk_context_logits(c), nw * sizeof(float));
    FILE *f = fopen(argv[a + 1], "wb");
    if (!f || fwrite(logits, sizeof(float), nw, f) != nw || fclose(f)) {
        fprintf(stderr, "error: cannot write %s\n", argv[a + 1]);
        return 1;
    }
    free(logits);
    pk_context_free(c);
    pk_model_free(m);
    return 0;
}
