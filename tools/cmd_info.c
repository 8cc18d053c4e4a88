/* cmd_info.c - `pocket info`: describe a GGUF model. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "info_fit.h"

/* ---- pocket info ------------------------------------------------------------------ */

static const char *info_help =
    "usage: pocket info [--tensors] [-c N] [-ctk T] [-ctv T] [--mem SIZE [--fit] [--json]] [MODEL]\n"
    "\n"
    "Describe a GGUF model: architecture, geometry, the block plan (what each\n"
    "layer's mixer and FFN are, layers alike grouped), total and active\n"
    "parameters per token, tensor types, the weight bytes read per decoded\n"
    "token, and the sequence memory: KV cache bytes per token and for the\n"
    "context, with the cache types and context size that run, chat, serve,\n"
    "bench and perplexity would use with the same flags.\n"
    "  --tensors   also list every tensor with its type and shape\n"
    "  -c N        context size (default: as pocket run's)\n"
    "  -ctk T, -ctv T  KV cache type of the keys / values: f32, f16 (default), q8_0\n"
    "  --mem SIZE  show the memory plan under this budget (e.g. 6G; 0: none;\n"
    "              default: the memory available if the file does not fit in it);\n"
    "              when the model does not fit in it whole, the builds that would\n"
    "              (quantized by a pocket quantize preset, experts pruned by pocket\n"
    "              prune, or both), best first, with the commands that make them\n"
    "  --fit       list every build that fits, even when the model does\n"
    "  --json      print only that list, as JSON, with every build\n";

static void human_bytes(double b, char *out, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) { b /= 1024; i++; }
    snprintf(out, cap, "%.2f %s", b, u[i]);
}

/* ranges lo[i]..hi[i] (i < n) as "0-2, 4-6, 8-10", or "0-2, 4-6, ..., 36-38"
 * when there are more than three of one length at one spacing */
static void print_ranges(const int *lo, const int *hi, int n) {
    int periodic = n > 3;
    for (int i = 1; periodic && i < n; i++)
        periodic = hi[i] - lo[i] == hi[0] - lo[0] && lo[i] - lo[i - 1] == lo[1] - lo[0];
    for (int i = 0; i < n; i++) {
        if (periodic && i >= 2 && i < n - 1) {
            if (i == 2) printf(", ...");
            continue;
        }
        printf("%s%d", i ? ", " : "", lo[i]);
        if (hi[i] > lo[i]) printf("-%d", hi[i]);
    }
}

/* The block plan, one group per distinct layer description (in order of
 * first appearance), with the layers that have it run-length grouped:
 * "layers 0-2, 4-6: deltanet(...) + moe(...); layers 3, 7: attention(...) + ..." */
static void print_blocks(const pk_model *m, int n_layer) {
    char (*desc)[512] = calloc((size_t)n_layer, sizeof *desc);
    int *lo = calloc((size_t)n_layer, sizeof *lo), *hi = calloc((size_t)n_layer, sizeof *hi);
    unsigned char *done = calloc((size_t)n_layer, 1);
    if (!desc || !lo || !hi || !done) die("out of memory");
    for (int il = 0; il < n_layer; il++) pk_model_layer_desc(m, il, desc[il], sizeof desc[il]);
    printf("blocks          ");
    for (int il = 0, groups = 0; il < n_layer; il++) {
        if (done[il]) continue;
        int n = 0;
        for (int j = il; j < n_layer; j++) {
            if (done[j] || strcmp(desc[j], desc[il])) continue;
            done[j] = 1;
            if (n && hi[n - 1] == j - 1) hi[n - 1] = j;
            else { lo[n] = hi[n] = j; n++; }
        }
        printf("%slayers ", groups++ ? "; " : "");
        print_ranges(lo, hi, n);
        printf(": %s", desc[il]);
    }
    printf("\n");
    free(desc);
    free(lo);
    free(hi);
    free(done);
}

int cmd_info(int argc, char **argv) {
    opts o;
    opts_init(&o);
    int fit = 0, json = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(info_help, stdout); return 0; }
        if (!strcmp(argv[i], "--fit")) { fit = 1; continue; }
        if (!strcmp(argv[i], "--json")) { json = 1; continue; }
        if (argv[i][0] != '-' && !o.model) { o.model = argv[i]; continue; }
        if (!parse_common(&o, argc, argv, &i)) die("info: unknown option '%s' (see pocket info --help)", argv[i]);
    }
    const char *path = o.model ? o.model : default_model();
    /* a budget too small for the model's plan is a finding here, not an error:
       the model is described without one, and the builds that fit are listed */
    pk_model *m;
    pk_error perr = {0};
    char plan_error[sizeof perr.msg] = "";
    if (try_load_model(path, &o, &m, NULL, &perr)) {
        if (perr.code != PK_ERR_ARG || !o.mem_set || !o.mem) die("%s", perr.msg);
        snprintf(plan_error, sizeof plan_error, "%s", perr.msg);
        opts whole = o;
        whole.mem = 0;
        m = load_model(path, &whole, NULL);
    }
    pk_model_plan plan;
    pk_model_get_plan(m, &plan);
    /* the budget the advice is for: --mem, the default one, or (--fit) what is available */
    const uint64_t budget = o.mem_set ? o.mem : plan.mem ? plan.mem : fit || json ? pk_mem_available() : 0;
    if ((fit || json) && !budget) die("info: --fit and --json need a memory budget: give --mem SIZE");
    if (json) {
        info_fit(m, path, budget, 1, 1, plan_error[0] ? plan_error : NULL);
        pk_model_free(m);
        return 0;
    }
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    char b1[32], b2[32];
    printf("file            %s\n", path);
    printf("architecture    %s%s%s\n", mi.arch, *mi.name ? "  name: " : "", mi.name);
    printf("vocab           %d\n", mi.n_vocab);
    printf("context (train) %d\n", mi.n_ctx_train);
    printf("hidden          %d\n", mi.n_embd);
    if (mi.n_layer_recurrent)
        printf("layers          %d: %d Gated DeltaNet + %d full attention (every %d%s)\n", mi.n_layer,
               mi.n_layer_recurrent, mi.n_layer - mi.n_layer_recurrent, mi.full_attn_interval,
               mi.full_attn_interval == 2 ? "nd" : mi.full_attn_interval == 3 ? "rd" : "th");
    else
        printf("layers          %d\n", mi.n_layer);
    print_blocks(m, mi.n_layer);
    if (mi.n_nextn)
        printf("mtp             %d next-token-prediction layer(s), loaded (not used for plain decoding)\n",
               mi.n_nextn);
    if (mi.n_layer_recurrent)
        printf("deltanet        %d q/k heads, %d v heads, head dim %d, conv %d taps\n", mi.ssm_k_heads,
               mi.ssm_v_heads, mi.ssm_state, mi.ssm_conv);
    printf("attention       %d q heads, %d kv heads, head dim %d (v %d)%s%s\n", mi.n_head, mi.n_head_kv,
           mi.head_dim, mi.head_dim_v,
           mi.qk_norm == 2 ? ", q/k RMSNorm over the full width" : mi.qk_norm ? ", per-head q/k RMSNorm" : "",
           mi.attn_gate ? ", sigmoid output gate" : "");
    if (mi.scales)
        printf("multipliers     embeddings x %g, block outputs x %g, attention scores x %g, logits / %g\n",
               mi.embd_scale, mi.residual_scale, mi.attn_scale, mi.logit_scale);
    printf("rope            %s, %d of %d dims rotated, base %g\n", mi.rope_style, mi.n_rot, mi.head_dim,
           mi.rope_base);
    printf("rms eps         %g\n", mi.rms_eps);
    if (mi.n_expert)
        printf("ffn             MoE: %d experts, top-%d, expert FFN %d, %s router%s%s\n", mi.n_expert,
               mi.n_expert_used, mi.n_ff_exp, mi.gating,
               mi.norm_topk ? ", top-k weights renormalised" : "",
               mi.n_ff_shexp ? ", shared expert" : "");
    else
        printf("ffn             dense SwiGLU, FFN %d\n", mi.n_ff);
    printf("output head     %s\n", mi.tied_output ? "tied to token_embd" : "separate (output.weight)");
    printf("parameters      %.2f M total, %.2f M active per token (%.1f%%)\n", mi.n_params / 1e6,
           mi.n_params_active / 1e6, 100.0 * mi.n_params_active / (mi.n_params ? mi.n_params : 1));
    human_bytes((double)mi.file_bytes, b1, sizeof b1);
    human_bytes((double)mi.bytes_per_token, b2, sizeof b2);
    printf("file size       %s\n", b1);
    printf("bytes/token     %s of weights read per decoded token\n", b2);
    if (plan_error[0]) printf("memory plan     does not run: %s\n", plan_error);
    else print_plan(m, stdout);

    /* the sequence memory of a context made as pocket run makes it */
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_threads = 1;
    cp.n_batch = 1;
    cp.type_k = o.type_k;
    cp.type_v = o.type_v;
    pk_context *c;
    pk_error err = {0};
    if (pk_context_new(m, &cp, &c, &err)) die("%s: %s", path, err.msg);
    uint64_t kv_tok, rec;
    pk_context_kv_size(c, &kv_tok, &rec);
    const int n_ctx = pk_context_n_ctx(c);
    pk_context_free(c);
    char b3[32];
    human_bytes((double)kv_tok, b1, sizeof b1);
    human_bytes((double)kv_tok * n_ctx, b2, sizeof b2);
    printf("kv cache        %s keys, %s values: %s per token (%llu bytes), %s at context %d%s\n",
           pk_cache_type_name(o.type_k), pk_cache_type_name(o.type_v), b1, (unsigned long long)kv_tok, b2, n_ctx,
           o.n_ctx ? "" : n_ctx == mi.n_ctx_train ? " (the trained length)" : " (default cap)");
    if (rec) {
        human_bytes((double)rec, b3, sizeof b3);
        printf("deltanet state  %s (conv + recurrent, F32, whatever the context)\n", b3);
    }

    /* tensor types summary */
    const char *tnames[64];
    int tcount[64] = {0};
    uint64_t tbytes[64] = {0};
    int nt = 0, N = pk_model_n_tensors(m);
    for (int i = 0; i < N; i++) {
        const char *name, *type;
        int64_t ne[4];
        uint64_t nb;
        pk_model_tensor(m, i, &name, &type, ne, &nb);
        int j = 0;
        while (j < nt && strcmp(tnames[j], type)) j++;
        if (j == nt && nt < 64) tnames[nt++] = type;
        if (j < 64) { tcount[j]++; tbytes[j] += nb; }
    }
    printf("tensor types   ");
    for (int j = 0; j < nt; j++) {
        human_bytes((double)tbytes[j], b1, sizeof b1);
        printf(" %s: %d (%s)%s", tnames[j], tcount[j], b1, j + 1 < nt ? "," : "");
    }
    printf("\n");
    if (budget) info_fit(m, path, budget, fit, 0, NULL);
    if (o.show_tensors) {
        printf("\n%-40s %-6s %s\n", "tensor", "type", "shape");
        for (int i = 0; i < N; i++) {
            const char *name, *type;
            int64_t ne[4];
            uint64_t nb;
            pk_model_tensor(m, i, &name, &type, ne, &nb);
            printf("%-40s %-6s [%lld, %lld, %lld, %lld]\n", name, type, (long long)ne[0],
                   (long long)ne[1], (long long)ne[2], (long long)ne[3]);
        }
    }
    pk_model_free(m);
    return 0;
}

