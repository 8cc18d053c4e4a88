/* ppl_score.c - perplexity scoring shared by the commands (see ppl_score.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "ppl_score.h"

int ppl_log_softmax(const float *l, int V, float *out) {
    int am = 0;
    for (int v = 1; v < V; v++) if (l[v] > l[am]) am = v;
    double sum = 0;
    for (int v = 0; v < V; v++) sum += exp((double)l[v] - l[am]);
    double lse = l[am] + log(sum);
    for (int v = 0; v < V; v++) out[v] = (float)((double)l[v] - lse);
    return am;
}

int ppl_first_scored(int n_ctx) { return n_ctx / 2; }

int ppl_decode_window(pk_context *c, int32_t *w, int n_ctx, int32_t bos, float *logits,
                      pk_error *err) {
    int32_t saved = w[0];
    if (bos >= 0) w[0] = bos;
    pk_context_reset(c);
    int rc = pk_decode_all(c, w, n_ctx, logits, err);
    w[0] = saved;
    return rc;
}

double ppl_score_pos(ppl_acc *a, const float *row, int V, int32_t next, float *lp, int *argmax) {
    int am = ppl_log_softmax(row, V, lp);
    if (argmax) *argmax = am;
    double l = lp[next];
    a->nll -= l;
    a->nll2 += l * l;
    a->count++;
    return l;
}

void ppl_final(const ppl_acc *a, double *ppl, double *se) {
    double mean = a->nll / a->count, var = a->nll2 / a->count - mean * mean;
    *ppl = exp(mean);
    *se = a->count > 1 ? sqrt((var > 0 ? var : 0) / (a->count - 1)) * *ppl : 0;
}

int ppl_run(const pk_model *m, pk_context *c, int32_t *toks, int n_tok, int n_ctx, int max_chunk,
            ppl_result *out, pk_error *err) {
    if (n_ctx < 4) {
        snprintf(err->msg, sizeof err->msg, "perplexity window %d is too small (at least 4)", n_ctx);
        return err->code = PK_ERR_ARG;
    }
    int n_chunk = n_tok / n_ctx;
    if (max_chunk > 0 && max_chunk < n_chunk) n_chunk = max_chunk;
    if (n_chunk < 1) {
        snprintf(err->msg, sizeof err->msg,
                 "the text has %d tokens, fewer than one perplexity window of %d", n_tok, n_ctx);
        return err->code = PK_ERR_ARG;
    }
    const int V = pk_model_n_vocab(m);
    const int32_t bos = pk_model_bos(m);
    const int32_t sub = bos >= 0 && toks[0] == bos ? bos : -1;
    float *logits = malloc((size_t)n_ctx * V * sizeof(float)), *lp = malloc((size_t)V * sizeof(float));
    if (!logits || !lp) {
        free(logits);
        free(lp);
        snprintf(err->msg, sizeof err->msg, "out of memory for %d x %d logits", n_ctx, V);
        return err->code = PK_ERR_NOMEM;
    }
    ppl_acc a = {0};
    int rc = PK_OK;
    for (int ch = 0; ch < n_chunk && !rc; ch++) {
        int32_t *w = toks + (size_t)ch * n_ctx;
        if ((rc = ppl_decode_window(c, w, n_ctx, sub, logits, err))) break;
        for (int j = ppl_first_scored(n_ctx); j < n_ctx - 1; j++)
            ppl_score_pos(&a, logits + (size_t)j * V, V, w[j + 1], lp, NULL);
    }
    free(logits);
    free(lp);
    if (rc) return rc;
    ppl_final(&a, &out->ppl, &out->se);
    out->n_chunk = n_chunk;
    out->n_ctx = n_ctx;
    out->count = a.count;
    return PK_OK;
}
