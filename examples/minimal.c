/* minimal.c - the smallest complete libpocket program: load a GGUF model,
 * tokenize a prompt, generate N tokens greedily, print them as they come.
 * Uses the public API (pocket.h) only.
 *
 *   cc -std=c11 minimal.c $(pkg-config --cflags --libs --static pocket) -o minimal
 *   ./minimal MODEL.gguf "And God said" 32
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pocket.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N]\n", argv[0]);
        return 2;
    }
    const char *prompt = argv[2];
    int n_predict = argc > 3 ? atoi(argv[3]) : 32;
    pk_error err = {0};

    pk_model *m;
    if (pk_model_load(argv[1], &m, &err) != PK_OK) {
        fprintf(stderr, "minimal: %s\n", err.msg);
        return 1;
    }
    pk_context_params cp = pk_context_default_params();
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err) != PK_OK) {
        fprintf(stderr, "minimal: %s\n", err.msg);
        pk_model_free(m);
        return 1;
    }

    /* Tokenize: the first call with no room returns the count needed. */
    size_t len = strlen(prompt);
    int n = pk_model_tokenize(m, prompt, len, NULL, 0, 1, 1);
    int32_t *ids = n > 0 ? malloc((size_t)n * sizeof *ids) : NULL;
    if (!ids || pk_model_tokenize(m, prompt, len, ids, n, 1, 1) != n) {
        fprintf(stderr, "minimal: cannot tokenize the prompt\n");
        return 1;
    }
    if (pk_decode(c, ids, n, &err) != PK_OK) {       /* the whole prompt at once */
        fprintf(stderr, "minimal: %s\n", err.msg);
        return 1;
    }

    pk_sampler_params sp = pk_sampler_default_params();
    sp.temperature = 0;                               /* greedy */
    pk_sampler *s = pk_sampler_new(&sp, pk_model_n_vocab(m), &err);
    if (!s) {
        fprintf(stderr, "minimal: %s\n", err.msg);
        return 1;
    }

    fputs(prompt, stdout);
    for (int i = 0; i < n_predict; i++) {
        int32_t t = pk_sampler_sample(s, pk_context_logits(c));
        if (pk_model_is_eog(m, t)) break;             /* end of text */
        char piece[128];
        int k = pk_model_token_piece(m, t, piece, sizeof piece);
        if (k > 0 && k <= (int)sizeof piece) fwrite(piece, 1, (size_t)k, stdout);
        fflush(stdout);
        pk_sampler_accept(s, t);
        if (pk_decode(c, &t, 1, &err) != PK_OK) break;  /* PK_ERR_CONTEXT: window full */
    }
    putchar('\n');

    free(ids);
    pk_sampler_free(s);
    pk_context_free(c);
    pk_model_free(m);
    return 0;
}
