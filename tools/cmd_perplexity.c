/* cmd_perplexity.c - `pocket perplexity`: llama-perplexity-compatible scoring,
 * and KL divergence of a model's distributions against a saved base run. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ppl_score.h"

/* ---- base logits file (--kl-divergence-base) --------------------------------
 * "PKLD", u32 version (1), u32 n_vocab, u32 n_ctx, u32 n_chunk,
 * i32 tokens[n_chunk * n_ctx] (as scored, BOS substituted), then for each
 * window and each scored position j in [n_ctx/2, n_ctx-1): n_vocab float32
 * log-probabilities. Little-endian. */

#define KLD_MAGIC "PKLD"
#define KLD_VERSION 1u

typedef struct kld_stats {
    double *kld;          /* per position */
    long n, same_top;
    double nll_base, nll_diff, nll_diff2; /* sums */
} kld_stats;

static void xwrite(FILE *f, const void *p, size_t n, const char *path) {
    if (fwrite(p, 1, n, f) != n) die("%s: write failed: %s", path, strerror(errno));
}
static void xread(FILE *f, void *p, size_t n, const char *path) {
    if (fread(p, 1, n, f) != n) die("%s: truncated or unreadable KL-divergence base file", path);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *sorted, long n, double q) {
    double pos = q * (n - 1);
    long i = (long)pos;
    return i + 1 < n ? sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]) : sorted[n - 1];
}

static void kld_report(kld_stats *k, double nll_this, const char *base_path) {
    long n = k->n;
    double mean = 0, m2 = 0;
    for (long i = 0; i < n; i++) mean += k->kld[i];
    mean /= n;
    for (long i = 0; i < n; i++) m2 += (k->kld[i] - mean) * (k->kld[i] - mean);
    double se = n > 1 ? sqrt(m2 / (n - 1) / n) : 0;
    qsort(k->kld, (size_t)n, sizeof *k->kld, cmp_double);
    double p = (double)k->same_top / n;
    double d = k->nll_diff / n, dv = k->nll_diff2 / n - d * d;
    double dse = n > 1 ? sqrt((dv > 0 ? dv : 0) / (n - 1)) : 0;
    printf("KL divergence against %s (%ld positions):\n", base_path, n);
    printf("  mean KLD         %.6f +/- %.6f\n", mean, se);
    printf("  KLD percentiles  median %.6f, 90%% %.6f, 95%% %.6f, 99%% %.6f, max %.6f\n",
           pct(k->kld, n, 0.5), pct(k->kld, n, 0.9), pct(k->kld, n, 0.95), pct(k->kld, n, 0.99),
           k->kld[n - 1]);
    printf("  same top token   %.3f%% +/- %.3f%%\n", 100 * p, 100 * sqrt(p * (1 - p) / n));
    printf("  PPL base %.4f, this %.4f, ratio %.5f +/- %.5f\n", exp(k->nll_base / n), exp(nll_this / n),
           exp(d), exp(d) * dse);
}

/* ---- pocket perplexity ------------------------------------------------------------- */

static const char *ppl_help =
    "usage: pocket perplexity [-m MODEL] -f TEXT [-c CTX] [-t N] [--chunks N]\n"
    "       pocket perplexity [-m BASE] -f TEXT [-c CTX] --kl-divergence-base OUT.kld\n"
    "       pocket perplexity [-m MODEL] --kl-divergence OUT.kld [-f TEXT]\n"
    "\n"
    "Perplexity of MODEL on a text file, scored as llama.cpp's llama-perplexity\n"
    "does: the text is cut into non-overlapping windows of CTX tokens (default 512;\n"
    "the first token of each window is BOS if the model adds one), and only the\n"
    "second half of each window is scored. Prints a running estimate per window\n"
    "and the final PPL with its standard error.\n"
    "\n"
    "  --chunks N                 score only the first N windows\n"
    "  -ctk, -ctv TYPE            KV cache type of the keys / values: f32, f16\n"
    "                             (default), q8_0 (--cache-type-k, --cache-type-v)\n"
    "  --kl-divergence-base FILE  also save the log-probabilities of every scored\n"
    "                             position (n_vocab x 4 bytes each) to FILE\n"
    "  --kl-divergence FILE       compare this model with the base run saved in FILE\n"
    "                             (same tokens, windows and vocabulary; -f optional):\n"
    "                             mean KL divergence with percentiles, same-top-token\n"
    "                             rate and PPL ratio, each with its uncertainty\n";

int cmd_perplexity(int argc, char **argv) {
    opts o;
    opts_init(&o);
    o.n_ctx = 0;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) { fputs(ppl_help, stdout); return 0; }
        if (!parse_common(&o, argc, argv, &i)) die("perplexity: unknown option '%s' (see pocket perplexity --help)", argv[i]);
    }
    if (o.kld && o.kld_base) die("perplexity: --kl-divergence and --kl-divergence-base exclude each other");
    if (!o.text_file && !o.kld) die("perplexity: no text: give -f FILE");
    pk_model *m = load_model(o.model ? o.model : default_model(), &o, NULL);
    const int V = pk_model_n_vocab(m);
    const int32_t bos = pk_model_bos(m);
    int n_tok = 0, n_ctx = o.n_ctx ? o.n_ctx : 512, n_chunk = 0;
    int32_t *toks = NULL;
    FILE *kf = NULL;
    if (o.text_file) {
        size_t len;
        char *text = read_file(o.text_file, &len);
        toks = tokenize(m, text, len, 1, 0, &n_tok);
        free(text);
    }
    if (o.kld) {  /* windows come from the base file */
        uint32_t h[4];
        char magic[4];
        if (!(kf = fopen(o.kld, "rb"))) die("%s: cannot open: %s", o.kld, strerror(errno));
        xread(kf, magic, 4, o.kld);
        xread(kf, h, sizeof h, o.kld);
        if (memcmp(magic, KLD_MAGIC, 4) || h[0] != KLD_VERSION)
            die("%s: not a pocket KL-divergence base file (magic/version)", o.kld);
        if ((int)h[1] != V)
            die("%s: base vocabulary has %u tokens, this model %d", o.kld, h[1], V);
        if (h[2] < 4 || h[2] > (1u << 20) || h[3] < 1 || h[3] > (1u << 20))
            die("%s: implausible window size %u or count %u", o.kld, h[2], h[3]);
        if (o.n_ctx && o.n_ctx != (int)h[2])
            die("%s: base was scored with -c %u, not -c %d", o.kld, h[2], o.n_ctx);
        n_ctx = (int)h[2];
        n_chunk = (int)h[3];
        if (o.n_chunks > 0 && o.n_chunks < n_chunk) n_chunk = o.n_chunks;
        int32_t *bt = malloc((size_t)h[2] * h[3] * sizeof *bt);
        if (!bt) die("out of memory");
        xread(kf, bt, (size_t)h[2] * h[3] * sizeof *bt, o.kld);
        if (toks) {
            for (long i = 0; i < (long)n_chunk * n_ctx; i++)
                if (i >= n_tok || (bt[i] != toks[i] && !(i % n_ctx == 0 && bt[i] == bos)))
                    die("%s: token %ld of the base run differs from %s tokenized by this model",
                        o.kld, i, o.text_file);
            free(toks);
        }
        toks = bt;
        n_tok = (int)(h[2] * h[3]);
    } else {
        n_chunk = n_tok / n_ctx;
        if (o.n_chunks > 0 && o.n_chunks < n_chunk) n_chunk = o.n_chunks;
    }
    if (n_ctx < 4) die("perplexity: -c %d is too small (at least 4)", n_ctx);
    if (n_chunk < 1)
        die("perplexity: %s has %d tokens, fewer than one window of %d (use a smaller -c)",
            o.text_file, n_tok, n_ctx);
    pk_error err = {0};
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = o.n_threads;
    cp.type_k = o.type_k;
    cp.type_v = o.type_v;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err)) die("%s", err.msg);
    int add_bos = !o.kld && n_tok > 0 && bos >= 0 && toks[0] == bos;
    const int first = ppl_first_scored(n_ctx), n_score = n_ctx - 1 - first;
    float *logits = malloc((size_t)n_ctx * V * sizeof(float));
    float *lp = malloc((size_t)V * sizeof(float)), *blp = malloc((size_t)V * sizeof(float));
    kld_stats k = {0};
    if (o.kld) k.kld = malloc((size_t)n_chunk * n_score * sizeof *k.kld);
    if (!logits || !lp || !blp || (o.kld && !k.kld)) die("out of memory for %d x %d logits", n_ctx, V);
    FILE *bf = NULL;
    if (o.kld_base) {
        if (!(bf = fopen(o.kld_base, "wb"))) die("%s: cannot create: %s", o.kld_base, strerror(errno));
        uint32_t h[4] = {KLD_VERSION, (uint32_t)V, (uint32_t)n_ctx, (uint32_t)n_chunk};
        xwrite(bf, KLD_MAGIC, 4, o.kld_base);
        xwrite(bf, h, sizeof h, o.kld_base);
        for (int ch = 0; ch < n_chunk; ch++) {
            int32_t t0 = toks[(size_t)ch * n_ctx];
            xwrite(bf, add_bos ? &bos : &t0, sizeof t0, o.kld_base);
            xwrite(bf, toks + (size_t)ch * n_ctx + 1, (size_t)(n_ctx - 1) * sizeof *toks, o.kld_base);
        }
    }
    fprintf(stderr, "perplexity: %d tokens, %d windows of %d, scoring the last %d of each\n", n_tok,
            n_chunk, n_ctx, n_score);
    ppl_acc acc = {0};
    double t0 = now();
    for (int ch = 0; ch < n_chunk; ch++) {
        int32_t *w = toks + (size_t)ch * n_ctx;
        if (ppl_decode_window(c, w, n_ctx, add_bos ? bos : -1, logits, &err)) die("%s", err.msg);
        for (int j = first; j < n_ctx - 1; j++) {
            int am;
            double l = ppl_score_pos(&acc, logits + (size_t)j * V, V, w[j + 1], lp, &am);
            if (bf) xwrite(bf, lp, (size_t)V * sizeof *lp, o.kld_base);
            if (kf) {
                xread(kf, blp, (size_t)V * sizeof *blp, o.kld);
                double kl = 0;
                int bam = 0;
                for (int v = 0; v < V; v++) {
                    if (blp[v] > blp[bam]) bam = v;
                    kl += exp((double)blp[v]) * ((double)blp[v] - lp[v]);
                }
                k.kld[k.n++] = kl;
                k.same_top += bam == am;
                k.nll_base -= blp[w[j + 1]];
                double dd = (double)blp[w[j + 1]] - l; /* nll_this - nll_base */
                k.nll_diff += dd;
                k.nll_diff2 += dd * dd;
            }
        }
        if (ch == 0) {
            double per = now() - t0;
            fprintf(stderr, "perplexity: %.2f s per window, about %.0f s in all\n", per, per * n_chunk);
        }
        fprintf(stderr, "[%d]%.4f,", ch + 1, exp(acc.nll / acc.count));
        if ((ch + 1) % 10 == 0 || ch + 1 == n_chunk) fputc('\n', stderr);
    }
    double ppl, se;
    ppl_final(&acc, &ppl, &se);
    printf("Final estimate: PPL = %.4f +/- %.5f  (%d windows, %ld tokens scored, %.1f s)\n", ppl, se,
           n_chunk, acc.count, now() - t0);
    if (bf && fclose(bf)) die("%s: write failed: %s", o.kld_base, strerror(errno));
    if (kf) {
        kld_report(&k, acc.nll, o.kld);
        fclose(kf);
    }
    free(k.kld);
    free(lp);
    free(blp);
    free(logits);
    pk_context_free(c);
    pk_model_free(m);
    free(toks);
    return 0;
}
