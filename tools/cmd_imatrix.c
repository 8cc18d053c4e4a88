/* cmd_imatrix.c - `pocket imatrix`: collect an importance matrix over a
 * calibration text, as llama.cpp's llama-imatrix does, and save it in the
 * GGUF imatrix format (include/pocket.h) for `pocket quantize --imatrix` or
 * llama-quantize. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pocket.h"

static const char *imatrix_help =
    "usage: pocket imatrix [-m MODEL] -f CALIB.txt [-o OUT.gguf] [-c CTX] [--chunks N] [-t N]\n"
    "                      [--process-output] [--no-ppl]\n"
    "\n"
    "Run MODEL over a calibration text and record, for every weight matrix of\n"
    "the blocks (attention, router, FFN, each expert separately), the mean\n"
    "square of the inputs each column multiplies. `pocket quantize --imatrix`\n"
    "then minimises the quantization error weighted by it. The text is cut into\n"
    "windows of CTX tokens (default 512; the first token of each is BOS if the\n"
    "model adds one), each decoded from an empty context, as llama-imatrix does.\n"
    "The file is llama.cpp's GGUF imatrix format (default name imatrix.gguf).\n"
    "\n"
    "  -o FILE            output file (default imatrix.gguf)\n"
    "  --chunks N         use only the first N windows\n"
    "  --process-output   also collect output.weight (skipped by default)\n"
    "  --no-ppl           do not compute the perplexity of the windows\n";

/* log p(tok) from logits l[V] */
static double log_prob(const float *l, int V, int tok) {
    float mx = l[0];
    for (int v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
    double s = 0;
    for (int v = 0; v < V; v++) s += exp((double)l[v] - mx);
    return (double)l[tok] - mx - log(s);
}

int cmd_imatrix(int argc, char **argv) {
    opts o;
    opts_init(&o);
    o.n_ctx = 0;
    const char *out = "imatrix.gguf";
    int process_output = 0, no_ppl = 0;
    for (int i = 0; i < argc; i++) {
        if (is_help(argv[i])) { fputs(imatrix_help, stdout); return 0; }
        if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (i + 1 >= argc) die("imatrix: %s needs a value", argv[i]);
            out = argv[++i];
        } else if (!strcmp(argv[i], "--process-output")) {
            process_output = 1;
        } else if (!strcmp(argv[i], "--no-ppl")) {
            no_ppl = 1;
        } else if (!parse_common(&o, argc, argv, &i) || o.prompt || o.kld || o.kld_base) {
            die("imatrix: unknown option '%s' (see pocket imatrix --help)", argv[i]);
        }
    }
    if (!o.text_file) die("imatrix: no calibration text: give -f FILE");
    if (!*out) die("imatrix: empty output file name");
    const int n_ctx = o.n_ctx ? o.n_ctx : 512;
    if (n_ctx < 4) die("imatrix: -c %d is too small (at least 4)", n_ctx);

    pk_model *m = load_model(o.model ? o.model : default_model(), &o, NULL);
    const int V = pk_model_n_vocab(m);
    const int32_t bos = pk_model_bos(m);
    size_t len;
    char *text = read_file(o.text_file, &len);
    int n_tok = 0;
    int32_t *toks = tokenize(m, text, len, 1, 0, &n_tok);
    free(text);
    int n_chunk = n_tok / n_ctx;
    if (o.n_chunks > 0 && o.n_chunks < n_chunk) n_chunk = o.n_chunks;
    if (n_chunk < 1)
        die("imatrix: %s has %d tokens, fewer than one window of %d (use a smaller -c)", o.text_file,
            n_tok, n_ctx);

    pk_error err = {0};
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = o.n_threads;
    cp.type_k = o.type_k;
    cp.type_v = o.type_v;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err)) die("%s", err.msg);
    pk_imatrix *im;
    if (pk_imatrix_new(&im, &err)) die("%s", err.msg);
    pk_imatrix_attach(im, c, process_output);
    float *logits = no_ppl ? NULL : malloc((size_t)n_ctx * V * sizeof *logits);
    if (!no_ppl && !logits) die("out of memory for %d x %d logits", n_ctx, V);
    const int add_bos = n_tok > 0 && bos >= 0 && toks[0] == bos;
    const int tty = isatty(2);

    fprintf(stderr, "imatrix: %d tokens, %d windows of %d\n", n_tok, n_chunk, n_ctx);
    double nll = 0, t0 = now();
    long scored = 0;
    for (int ch = 0; ch < n_chunk; ch++) {
        int32_t *w = toks + (size_t)ch * n_ctx, saved = w[0];
        if (add_bos) w[0] = bos;
        pk_context_reset(c);
        int rc = no_ppl ? pk_decode(c, w, n_ctx, &err) : pk_decode_all(c, w, n_ctx, logits, &err);
        w[0] = saved;
        if (rc) die("%s", err.msg);
        if (pk_imatrix_status(im, &err)) die("%s", err.msg);
        if (!no_ppl)
            for (int j = n_ctx / 2; j < n_ctx - 1; j++, scored++)
                nll -= log_prob(logits + (size_t)j * V, V, w[j + 1]);
        double el = now() - t0, tps = (double)(ch + 1) * n_ctx / (el > 0 ? el : 1e-9);
        char ppl[48] = "";
        if (scored) snprintf(ppl, sizeof ppl, ", PPL %.4f", exp(nll / scored));
        fprintf(stderr, "%simatrix: chunk %d/%d, %.1f tok/s, ETA %.0f s%s%s", tty ? "\r" : "", ch + 1,
                n_chunk, tps, (double)(n_chunk - ch - 1) * n_ctx / tps, ppl, tty ? "   " : "\n");
    }
    if (tty) fputc('\n', stderr);
    pk_imatrix_detach(c);
    const double secs = now() - t0;

    pk_imatrix_set_chunks(im, (uint32_t)n_chunk, (uint32_t)n_ctx);
    if (pk_imatrix_add_dataset(im, o.text_file, &err) || pk_imatrix_save(im, out, &err))
        die("%s", err.msg);

    /* summary */
    int n_ent = pk_imatrix_n_entries(im), n_exp_ent = 0;
    long n_mats = 0, n_unseen = 0;
    for (int i = 0; i < n_ent; i++) {
        int64_t nm;
        const int64_t *cnt;
        pk_imatrix_entry(im, i, NULL, NULL, &nm, &cnt);
        if (nm > 1) {
            n_exp_ent++;
            n_mats += nm;
            for (int64_t e = 0; e < nm; e++) n_unseen += cnt[e] == 0;
        }
    }
    printf("imatrix: %d chunks of %d tokens (%ld tokens) in %.1f s, %.1f tok/s\n", n_chunk, n_ctx,
           (long)n_chunk * n_ctx, secs, (double)n_chunk * n_ctx / (secs > 0 ? secs : 1e-9));
    if (scored) printf("imatrix: PPL %.4f over %ld scored tokens\n", exp(nll / scored), scored);
    printf("imatrix: %d tensors (%d with per-expert data: %ld expert matrices, %ld never routed to)\n",
           n_ent, n_exp_ent, n_mats, n_unseen);
    printf("imatrix: wrote %s\n", out);

    free(logits);
    pk_imatrix_free(im);
    pk_context_free(c);
    pk_model_free(m);
    free(toks);
    return 0;
}
