/* cmd_quantize.c - `pocket quantize`: convert a GGUF model to a quantized
 * type mix (llama.cpp's presets, plus MOE_Q2_K, MOE_IQ2_XXS, MOE_IQ1_M). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pocket.h"

static void help(void) {
    printf("usage: pocket quantize IN.gguf OUT.gguf TYPE [options]\n"
           "\n"
           "Write OUT.gguf with IN's weights converted to TYPE, a llama.cpp preset\n"
           "name or pocket's MoE-aware preset (per-tensor rules as llama-quantize\n"
           "applies them: norms and router stay as they are, output gets more bits,\n"
           "*_M presets give attn_v / ffn_down more bits on some layers). TYPE is one of:\n ");
    for (int i = 0; i < pk_quantize_n_presets(); i++) printf(" %s", pk_quantize_preset_name(i));
    printf("\n\nMOE_Q2_K, MOE_IQ2_XXS, MOE_IQ1_M: routed experts (ffn_*_exps) at Q2_K,\n"
           "IQ2_XXS, IQ1_M; attention, embeddings, output and dense FFNs at Q6_K;\n"
           "attn_v and the shared expert at Q8_0.\n"
           "IQ3_XXS, IQ3_XS, IQ2_*, IQ1_*, MOE_IQ2_XXS, MOE_IQ1_M: need --imatrix (an\n"
           "entry for every tensor they quantize to IQ3_XXS, IQ2_* or IQ1_*).\n"
           "\n"
           "  --tensor-type PATTERN=TYPE  type for tensors whose name matches PATTERN\n"
           "                              ('*' any run, '?' one char, ^ and $ anchors);\n"
           "                              may be repeated, the first match wins\n"
           "  --imatrix FILE              importance matrix (pocket imatrix / llama-imatrix)\n"
           "  -t, --threads N             threads (default: all cores)\n");
}

typedef struct progress_state {
    double t0;
    int quiet, tty;
} progress_state;

static void progress(void *ud, int i, int n, const char *name, const char *type) {
    progress_state *ps = ud;
    if (ps->quiet) return;
    /* a terminal gets one updating line, a log one line per tensor */
    fprintf(stderr, "%s[%4d/%4d] %-36s -> %-7s (%.1f s)%s", ps->tty ? "\r" : "", i + 1, n, name,
            type, now() - ps->t0, ps->tty && i + 1 < n ? "" : "\n");
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {0};
    int npos = 0, n_threads = 0;
    const char *over[256];
    int n_over = 0;
    const char *imatrix_path = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) { help(); return 0; }
        if (!strcmp(a, "--tensor-type") || !strcmp(a, "-t") || !strcmp(a, "--threads") ||
            !strcmp(a, "--imatrix")) {
            if (i + 1 >= argc) die("quantize: %s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--tensor-type")) {
                if (n_over == 256) die("quantize: too many --tensor-type overrides (at most 256)");
                over[n_over++] = v;
            } else if (!strcmp(a, "--imatrix")) {
                imatrix_path = v;
            } else {
                n_threads = (int)parse_long(a, v, 1, 512);
            }
        } else if (a[0] == '-' && a[1]) {
            die("quantize: unknown option '%s' (see pocket quantize --help)", a);
        } else if (npos < 3) {
            pos[npos++] = a;
        } else {
            die("quantize: unexpected argument '%s' (see pocket quantize --help)", a);
        }
    }
    if (npos < 3) die("quantize: need IN.gguf OUT.gguf TYPE (see pocket quantize --help)");
    if (!strcmp(pos[0], pos[1])) die("quantize: input and output are the same file '%s'", pos[0]);
    pk_quantize_params p = pk_quantize_default_params();
    p.preset = pos[2];
    p.n_threads = n_threads;
    p.overrides = over;
    p.n_overrides = n_over;
    progress_state ps = {now(), 0, isatty(2)};
    p.progress = progress;
    p.progress_ud = &ps;
    pk_error err = {0};
    pk_imatrix *im = NULL;
    if (imatrix_path) {
        if (pk_imatrix_load(imatrix_path, &im, &err)) die("%s", err.msg);
        p.imatrix = pk_imatrix_lookup;
        p.imatrix_ud = im;
    }
    if (pk_quantize_file(pos[0], pos[1], &p, &err)) {
        fputc('\n', stderr);
        die("%s", err.msg);
    }
    pk_imatrix_free(im);
    FILE *f = fopen(pos[1], "rb");
    long sz = 0;
    if (f) { fseek(f, 0, SEEK_END); sz = ftell(f); fclose(f); }
    fprintf(stderr, "wrote %s (%s, %.2f MiB) in %.1f s\n", pos[1], pos[2], sz / 1048576.0, now() - ps.t0);
    return 0;
}
