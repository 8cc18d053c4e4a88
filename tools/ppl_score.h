/* ppl_score.h - perplexity scoring shared by `pocket perplexity` and
 * `pocket bench`: llama-perplexity's scheme of non-overlapping windows of
 * n_ctx tokens, each decoded from an empty context (first token BOS if the
 * model adds one), of which positions [n_ctx/2, n_ctx - 1) are scored. */
#ifndef POCKET_PPL_SCORE_H
#define POCKET_PPL_SCORE_H

#include <stdint.h>
#include "pocket.h"

/* Running sums of the negative log-likelihood of scored tokens. */
typedef struct ppl_acc {
    double nll, nll2;  /* sum of -log p and of (log p)^2 */
    long count;        /* tokens scored */
} ppl_acc;

typedef struct ppl_result {
    double ppl, se;    /* perplexity and its standard error */
    int n_chunk, n_ctx;
    long count;        /* tokens scored */
} ppl_result;

/* log-softmax of l[V] into out[V] (double accumulation); returns the argmax. */
int ppl_log_softmax(const float *l, int V, float *out);

/* First scored position of a window of n_ctx tokens. */
int ppl_first_scored(int n_ctx);

/* Reset c and decode the window w[0..n_ctx), with w[0] read as bos when
 * bos >= 0 (w itself is left unchanged), copying the logits after every
 * token into logits[n_ctx * n_vocab]. Returns PK_OK or the pk_decode_all
 * status with its message in err. */
int ppl_decode_window(pk_context *c, int32_t *w, int n_ctx, int32_t bos, float *logits,
                      pk_error *err);

/* Score one position: row is the logits before token next. Writes the row's
 * log-softmax to lp[V] and its argmax to *argmax (if not NULL), adds -log p
 * of next to a, and returns log p. */
double ppl_score_pos(ppl_acc *a, const float *row, int V, int32_t next, float *lp, int *argmax);

/* Perplexity exp(mean nll) and its standard error from a (count > 0). */
void ppl_final(const ppl_acc *a, double *ppl, double *se);

/* The whole scheme on toks[n_tok]: the first max_chunk windows (all when
 * max_chunk <= 0) of n_ctx tokens; BOS substituted at each window start when
 * toks[0] is the model's BOS. Fails with PK_ERR_ARG (message in err) if the
 * text is shorter than one window or n_ctx < 4, PK_ERR_NOMEM, or a decode
 * status. c must hold n_ctx tokens. */
int ppl_run(const pk_model *m, pk_context *c, int32_t *toks, int n_tok, int n_ctx, int max_chunk,
            ppl_result *out, pk_error *err);

#endif
