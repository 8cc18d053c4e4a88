/* cmd_prune.c - `pocket prune`: keep the K most salient routed experts of
 * each layer of a MoE model, measured over calibration text, and write the
 * smaller model (src/offline/prune.c; docs/pruning.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pocket.h"

static const char *prune_help =
    "usage: pocket prune IN.gguf OUT.gguf -f CALIB.txt (--keep K | --keep-layers SPEC)\n"
    "                    [--saliency reap|freq] [--experts-used N] [-c CTX] [--chunks N] [-t N]\n"
    "\n"
    "Write OUT.gguf with K of the routed experts of each layer of IN.gguf: the\n"
    "K most salient over a calibration text. The rest are removed from the\n"
    "expert tensors and the router, and <arch>.expert_count is set to K; every\n"
    "other tensor and key is copied unchanged (quantized files stay quantized).\n"
    "The text is cut into windows of CTX tokens (default 512, or the model's\n"
    "training context if shorter), each decoded from an empty context.\n"
    "\n"
    "  --keep K              experts each routed layer keeps\n"
    "  --keep-layers SPEC    per layer: LAYERS:K[,LAYERS:K...], LAYERS a layer (5)\n"
    "                        or a range (0-3), e.g. 0-3:12,4-5:8; a layer it does\n"
    "                        not name keeps --keep's K, or all its experts. Layers\n"
    "                        that differ make an expert_count per layer, which\n"
    "                        pocket loads and llama.cpp does not\n"
    "  --saliency S          reap (default): mean over the tokens routed to an expert\n"
    "                        of its router weight x the norm of its output (REAP);\n"
    "                        freq: the number of tokens routed to it\n"
    "  --experts-used N      top-k of OUT (expert_used_count; default IN's); every\n"
    "                        layer must keep at least the top-k\n"
    "  -f FILE               calibration text\n"
    "  -c CTX                window length in tokens\n"
    "  --chunks N            use only the first N windows\n"
    "  -t N                  threads\n";

/* keep[il] from --keep / --keep-layers, checked against the layers' experts
 * and the top-k; dies naming the flag and value. */
static void plan_keep(const pk_model *m, const pk_saliency *s, int keep_all, const char *spec, int used,
                      int *keep) {
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    int *named = malloc((size_t)mi.n_layer * sizeof *named);
    if (!named) die("out of memory");
    for (int il = 0; il < mi.n_layer; il++) named[il] = -1;
    pk_error err = {0};
    char msg[1024] = "";   /* the first problem; named is freed before dying */
    if (spec && pk_prune_parse_keep(spec, mi.n_layer, named, &err))
        snprintf(msg, sizeof msg, "prune: --keep-layers: %s", err.msg);
    const int topk = used ? used : mi.n_expert_used;
    for (int il = 0; !msg[0] && il < mi.n_layer; il++) {
        const int E = pk_saliency_n_expert(s, il);
        if (!E && named[il] >= 0) {
            snprintf(msg, sizeof msg, "prune: --keep-layers '%s': layer %d has no routed experts", spec, il);
            break;
        }
        keep[il] = !E ? 0 : named[il] >= 0 ? named[il] : keep_all ? keep_all : E;
        if (keep[il] > E) {
            if (named[il] >= 0)
                snprintf(msg, sizeof msg, "prune: --keep-layers '%s': layer %d has %d experts, not %d", spec, il, E,
                         keep[il]);
            else
                snprintf(msg, sizeof msg, "prune: --keep %d: layer %d has %d experts", keep_all, il, E);
        } else if (E && keep[il] < topk) {
            if (used)
                snprintf(msg, sizeof msg, "prune: --experts-used %d: layer %d keeps only %d experts", used, il,
                         keep[il]);
            else
                snprintf(msg, sizeof msg,
                         "prune: layer %d would keep %d experts, fewer than the %d each token uses "
                         "(expert_used_count); keep at least %d, or lower the top-k with --experts-used N",
                         il, keep[il], topk, topk);
        }
    }
    free(named);
    if (msg[0]) die("%s", msg);
}

/* Run the model over the windows of the calibration text with s attached. */
static void calibrate(pk_model *m, pk_saliency *s, const opts *o, int n_ctx) {
    size_t len;
    char *text = read_file(o->text_file, &len);
    int n_tok = 0;
    int32_t *toks = tokenize(m, text, len, 1, 0, &n_tok);
    free(text);
    int n_win = n_tok / n_ctx;
    if (o->n_chunks > 0 && o->n_chunks < n_win) n_win = o->n_chunks;
    if (n_win < 1)
        die("prune: %s has %d tokens, fewer than one window of %d (use a smaller -c)", o->text_file, n_tok, n_ctx);
    pk_error err = {0};
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = o->n_threads;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err) || pk_saliency_attach(s, c, &err)) die("%s", err.msg);
    const int32_t bos = pk_model_bos(m);
    const int with_bos = bos >= 0 && toks[0] == bos, tty = isatty(2);
    const double t0 = now();
    for (int i = 0; i < n_win; i++) {
        int32_t *win = toks + (size_t)i * n_ctx, first = win[0];
        if (with_bos) win[0] = bos;   /* each window starts as a text does */
        pk_context_reset(c);
        const int rc = pk_decode(c, win, n_ctx, &err);
        win[0] = first;
        if (rc || pk_saliency_status(s, &err)) die("%s", err.msg);
        const double el = now() - t0;
        if (tty || (i + 1) % (n_win / 10 + 1) == 0 || i + 1 == n_win)   /* a log: about ten lines */
            fprintf(stderr, "%sprune: window %d/%d, %.1f tok/s%s", tty ? "\r" : "", i + 1, n_win,
                    (double)(i + 1) * n_ctx / (el > 0 ? el : 1e-9), tty && i + 1 < n_win ? "" : "\n");
    }
    pk_saliency_detach(c);
    pk_context_free(c);
    free(toks);
    printf("prune: %d windows of %d tokens of %s in %.1f s\n", n_win, n_ctx, o->text_file, now() - t0);
}

/* Per layer: what is kept, and what the dropped experts took of the
 * calibration tokens and of the router-weighted output. */
static void report(const pk_saliency *s, int n_layer, int stride, const int *keep, const uint8_t *mask) {
    for (int il = 0; il < n_layer; il++) {
        const int E = pk_saliency_n_expert(s, il);
        if (!E) continue;
        double tok = 0, tok_drop = 0, out = 0, out_drop = 0;
        char list[256] = "";
        size_t k = 0;
        for (int e = 0; e < E; e++) {
            const double n = (double)pk_saliency_tokens(s, il, e), o = n * pk_saliency_score(s, PK_SALIENCY_REAP, il, e);
            tok += n;
            out += o;
            if (mask[(size_t)il * stride + e]) continue;
            tok_drop += n;
            out_drop += o;
            if (k + 16 < sizeof list) k += (size_t)snprintf(list + k, sizeof list - k, " %d", e);
            else if (k + 4 < sizeof list) k += (size_t)snprintf(list + k, sizeof list - k, " ...");
        }
        printf("layer %3d: keep %d of %d", il, keep[il], E);
        if (keep[il] < E)
            printf("; dropped%s: %.2f%% of the routed tokens, %.2f%% of the router-weighted output", list,
                   tok > 0 ? 100.0 * tok_drop / tok : 0.0, out > 0 ? 100.0 * out_drop / out : 0.0);
        putchar('\n');
    }
}

int cmd_prune(int argc, char **argv) {
    opts o;
    opts_init(&o);
    o.n_ctx = 0;
    const char *pos[2] = {0}, *spec = NULL, *sal = "reap";
    int npos = 0, keep_all = 0, used = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) { fputs(prune_help, stdout); return 0; }
        const int takes = !strcmp(a, "--keep") || !strcmp(a, "--keep-layers") || !strcmp(a, "--saliency") ||
                          !strcmp(a, "--experts-used");
        if (takes && i + 1 >= argc) die("prune: %s needs a value", a);
        if (!strcmp(a, "--keep")) keep_all = (int)parse_long(a, argv[++i], 1, 65536);
        else if (!strcmp(a, "--keep-layers")) spec = argv[++i];
        else if (!strcmp(a, "--saliency")) sal = argv[++i];
        else if (!strcmp(a, "--experts-used")) used = (int)parse_long(a, argv[++i], 1, 64);
        else if (a[0] != '-' && npos < 2) pos[npos++] = a;
        else if (a[0] != '-') die("prune: unexpected argument '%s' (see pocket prune --help)", a);
        else if (!parse_common(&o, argc, argv, &i) || o.model || o.prompt || o.kld || o.kld_base)
            die("prune: unknown option '%s' (see pocket prune --help)", a);
    }
    if (npos < 2) die("prune: need IN.gguf OUT.gguf (see pocket prune --help)");
    if (!strcmp(pos[0], pos[1])) die("prune: input and output are the same file '%s'", pos[0]);
    const int kind = !strcmp(sal, "reap") ? PK_SALIENCY_REAP : !strcmp(sal, "freq") ? PK_SALIENCY_FREQ : -1;
    if (kind < 0) die("prune: --saliency '%s': expected reap or freq", sal);
    if (!keep_all && !spec) die("prune: say how many experts to keep: --keep K or --keep-layers SPEC");
    if (!o.text_file) die("prune: no calibration text: give -f FILE");
    if (o.n_ctx && o.n_ctx < 4) die("prune: -c %d is too small (at least 4)", o.n_ctx);

    pk_model *m = load_model(pos[0], &o, NULL);
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    const int n_ctx = o.n_ctx ? o.n_ctx : mi.n_ctx_train < 512 ? mi.n_ctx_train : 512;
    pk_error err = {0};
    pk_saliency *s;
    if (pk_prune_check(m, &err) || pk_saliency_new(m, &s, &err)) die("prune: %s", err.msg);
    int *keep = malloc((size_t)mi.n_layer * sizeof *keep);
    uint8_t *mask = malloc((size_t)mi.n_layer * (size_t)mi.n_expert);
    if (!keep || !mask) die("out of memory");
    plan_keep(m, s, keep_all, spec, used, keep);

    calibrate(m, s, &o, n_ctx);
    if (pk_saliency_select(s, kind, keep, mask, &err)) die("prune: %s", err.msg);
    report(s, mi.n_layer, mi.n_expert, keep, mask);
    pk_prune_params p = {.keep = mask, .n_expert_used = used, .saliency = sal, .calibration = o.text_file};
    if (pk_prune_file(m, pos[1], &p, &err)) die("%s", err.msg);
    int same = 1, first = -1;
    for (int il = 0; il < mi.n_layer; il++)
        if (pk_saliency_n_expert(s, il)) {
            same &= first < 0 || keep[il] == first;
            if (first < 0) first = keep[il];
        }
    printf("prune: wrote %s (%s saliency, top-%d)\n", pos[1], sal, used ? used : mi.n_expert_used);
    if (!same)
        printf("prune: note: layers keep different counts: %s.expert_count is an array, which pocket loads and "
               "llama.cpp does not\n", mi.arch);
    free(mask);
    free(keep);
    pk_saliency_free(s);
    pk_model_free(m);
    return 0;
}
