/* pocket - command-line front end of libpocket.
 *
 *   pocket run        generate text from a prompt
 *   pocket info       describe a GGUF model
 *   pocket perplexity score a text file the way llama-perplexity does
 *
 * `pocket CMD --help` explains each command. Everything here goes through the
 * public API in include/pocket.h. Errors print one line and exit non-zero.
 */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pocket.h"

#define DEFAULT_MODEL_NAME "kjv-moe-f16.gguf"

/* ---- small utilities ------------------------------------------------------- */

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("pocket: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long parse_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        die("%s: '%s' is not an integer in [%ld, %ld]", flag, v, lo, hi);
    return x;
}

static double parse_double(const char *flag, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi))
        die("%s: '%s' is not a number in [%g, %g]", flag, v, lo, hi);
    return x;
}

/* Read a whole file; dies with a message naming it on failure. */
static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (!buf) die("%s: out of memory", path);
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        buf = realloc(buf, cap);
    }
    if (ferror(f)) die("%s: read error", path);
    fclose(f);
    buf[n < cap ? n : cap - 1] = 0;
    *len = n;
    return buf;
}

/* The bundled model: $POCKET_MODEL, ./models/, or models/ beside the binary's
 * build directory, or the installed share directory. */
static const char *default_model(void) {
    static char path[PATH_MAX + 64];
    const char *env = getenv("POCKET_MODEL");
    if (env && *env) return env;
    if (access("models/" DEFAULT_MODEL_NAME, R_OK) == 0) return "models/" DEFAULT_MODEL_NAME;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *rel[] = {"/../models/", "/../share/pocket/"};
        for (int i = 0; i < 2; i++) {
            snprintf(path, sizeof path, "%s%s%s", exe, rel[i], DEFAULT_MODEL_NAME);
            if (access(path, R_OK) == 0) return path;
        }
    }
    return "models/" DEFAULT_MODEL_NAME;
}

static pk_model *load_model(const char *path, double *secs) {
    pk_error err = {0};
    pk_model *m;
    double t0 = now();
    if (pk_model_load(path, &m, &err)) die("%s", err.msg);
    if (secs) *secs = now() - t0;
    return m;
}

/* Tokenize, growing the buffer as needed. */
static int32_t *tokenize(const pk_model *m, const char *text, size_t len, int add_special,
                         int parse_special, int *n_out) {
    int cap = (int)(len < (1 << 20) ? len : (1 << 20)) + 16;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) die("out of memory");
    int n = pk_model_tokenize(m, text, len, ids, cap, add_special, parse_special);
    if (n > cap) {
        ids = realloc(ids, (size_t)n * sizeof *ids);
        if (!ids) die("out of memory");
        n = pk_model_tokenize(m, text, len, ids, n, add_special, parse_special);
    }
    if (n < 0) die("tokenizer failed: %s", pk_status_str(-n));
    *n_out = n;
    return ids;
}

static void print_piece(const pk_model *m, int32_t id, FILE *out) {
    char buf[256];
    int n = pk_model_token_piece(m, id, buf, sizeof buf);
    if (n > (int)sizeof buf) {
        char *big = malloc((size_t)n);
        if (big && pk_model_token_piece(m, id, big, n) == n) fwrite(big, 1, (size_t)n, out);
        free(big);
    } else if (n > 0) {
        fwrite(buf, 1, (size_t)n, out);
    }
}

/* ---- shared option parsing ---------------------------------------------------- */

typedef struct opts {
    const char *model, *prompt, *prompt_file, *text_file;
    int n_predict, n_threads, n_ctx, n_chunks;
    int no_special, ignore_eos, quiet, show_tensors;
    pk_sampler_params sp;
    int seed_given;
} opts;

static void opts_init(opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->n_chunks = -1;
    o->sp = pk_sampler_default_params();
}

/* Parse the flags common to the commands; returns 1 if argv[*i] was one. */
static int parse_common(opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
#define NEXT() (*i + 1 < argc ? argv[++*i] : (die("%s needs a value", a), (char *)0))
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = NEXT();
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) o->n_threads = (int)parse_long(a, NEXT(), 1, 512);
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) o->n_ctx = (int)parse_long(a, NEXT(), 0, 1 << 22);
    else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) o->prompt = NEXT();
    else if (!strcmp(a, "-f") || !strcmp(a, "--file")) o->text_file = NEXT();
    else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) o->n_predict = (int)parse_long(a, NEXT(), -1, INT_MAX);
    else if (!strcmp(a, "--temp")) o->sp.temperature = (float)parse_double(a, NEXT(), 0, 100);
    else if (!strcmp(a, "--top-k")) o->sp.top_k = (int)parse_long(a, NEXT(), 0, INT_MAX);
    else if (!strcmp(a, "--top-p")) o->sp.top_p = (float)parse_double(a, NEXT(), 0, 1);
    else if (!strcmp(a, "--min-p")) o->sp.min_p = (float)parse_double(a, NEXT(), 0, 1);
    else if (!strcmp(a, "--repeat-penalty")) o->sp.repeat_penalty = (float)parse_double(a, NEXT(), 0.01, 100);
    else if (!strcmp(a, "--repeat-last-n")) o->sp.repeat_last_n = (int)parse_long(a, NEXT(), 0, 1 << 20);
    else if (!strcmp(a, "--seed")) { o->sp.seed = (uint64_t)parse_long(a, NEXT(), 0, LONG_MAX); o->seed_given = 1; }
    else if (!strcmp(a, "--chunks")) o->n_chunks = (int)parse_long(a, NEXT(), 1, INT_MAX);
    else if (!strcmp(a, "--no-special")) o->no_special = 1;
    else if (!strcmp(a, "--ignore-eos")) o->ignore_eos = 1;
    else if (!strcmp(a, "--tensors")) o->show_tensors = 1;
    else return 0;
#undef NEXT
    return 1;
}

/* ---- pocket run ------------------------------------------------------------------ */

static const char *run_help =
    "usage: pocket run [-m MODEL] -p PROMPT [options]\n"
    "\n"
    "Generate a continuation of PROMPT. Tokens stream to stdout as they are made;\n"
    "a summary (load time, prompt and generation speed) goes to stderr.\n"
    "\n"
    "  -m, --model FILE       GGUF model (default: the bundled " DEFAULT_MODEL_NAME ")\n"
    "  -p, --prompt TEXT      prompt text\n"
    "  -f, --file FILE        read the prompt from FILE\n"
    "  -n, --n-predict N      tokens to generate (default 128; -1: until end of text or context)\n"
    "  -t, --threads N        threads (default: all cores)\n"
    "  -c, --ctx-size N       context window (default: the model's, at most 4096)\n"
    "      --temp T           temperature (default 0.8; 0 = greedy)\n"
    "      --top-k N          keep the N most likely tokens (default 40; 0 = off)\n"
    "      --top-p P          nucleus sampling (default 0.95; 1 = off)\n"
    "      --min-p P          drop tokens below P x the top probability (default 0.05; 0 = off)\n"
    "      --repeat-penalty R penalise recent tokens (default 1.0 = off)\n"
    "      --repeat-last-n N  how many recent tokens (default 64)\n"
    "      --seed S           random seed (default: from the clock; printed in the summary)\n"
    "      --ignore-eos       keep generating past end-of-text tokens\n"
    "      --no-special       treat special-token text in the prompt as plain text\n";

static int cmd_run(int argc, char **argv) {
    opts o;
    opts_init(&o);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(run_help, stdout); return 0; }
        if (!parse_common(&o, argc, argv, &i)) die("run: unknown option '%s' (see pocket run --help)", argv[i]);
    }
    size_t plen = 0;
    char *ptext = NULL;
    if (o.text_file) ptext = read_file(o.text_file, &plen);
    else if (o.prompt) { ptext = strdup(o.prompt); plen = strlen(o.prompt); }
    else die("run: no prompt: give -p TEXT or -f FILE (see pocket run --help)");
    if (!o.seed_given) o.sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);

    double t_load;
    pk_model *m = load_model(o.model ? o.model : default_model(), &t_load);
    int n_prompt;
    int32_t *prompt = tokenize(m, ptext, plen, 1, !o.no_special, &n_prompt);
    if (n_prompt == 0) die("run: the prompt is empty after tokenization");

    pk_error err = {0};
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.n_threads;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err)) die("%s", err.msg);
    int n_ctx = pk_context_n_ctx(c);
    if (n_prompt >= n_ctx)
        die("run: the prompt has %d tokens, which does not fit the context of %d (use -c)", n_prompt, n_ctx);
    pk_sampler *s = pk_sampler_new(&o.sp, pk_model_n_vocab(m), &err);
    if (!s) die("%s", err.msg);

    double t0 = now();
    if (pk_decode(c, prompt, n_prompt, &err)) die("%s", err.msg);
    double t_prompt = now() - t0;
    for (int i = 0; i < n_prompt; i++) pk_sampler_accept(s, prompt[i]);
    pk_stats st0;
    pk_context_stats(c, &st0);

    fwrite(ptext, 1, plen, stdout);
    fflush(stdout);
    int n_gen = 0, limit = o.n_predict < 0 ? INT_MAX : o.n_predict;
    const char *stop = "length";
    t0 = now();
    while (n_gen < limit) {
        int32_t id = pk_sampler_sample(s, pk_context_logits(c));
        if (!o.ignore_eos && pk_model_is_eog(m, id)) { stop = "end of text"; break; }
        print_piece(m, id, stdout);
        fflush(stdout);
        n_gen++;
        pk_sampler_accept(s, id);
        if (pk_context_pos(c) >= n_ctx) { stop = "context full"; break; }
        if (n_gen < limit && pk_decode(c, &id, 1, &err)) die("%s", err.msg);
    }
    double t_gen = now() - t0;
    putchar('\n');
    pk_stats st;
    pk_context_stats(c, &st);
    uint64_t gen_tokens = st.tokens - st0.tokens;
    fprintf(stderr,
            "\nload %.2f s | prompt %d tokens, %.2f s, %.1f tok/s | generated %d tokens (%s), %.2f s, %.1f tok/s\n"
            "threads %d, kernels %s, seed %llu, %.1f MB of weights read per generated token\n",
            t_load, n_prompt, t_prompt, n_prompt / (t_prompt > 0 ? t_prompt : 1e-9), n_gen, stop,
            t_gen, n_gen / (t_gen > 0 ? t_gen : 1e-9), st.n_threads, st.isa,
            (unsigned long long)o.sp.seed,
            gen_tokens ? (double)(st.weight_bytes - st0.weight_bytes) / gen_tokens / 1e6 : 0.0);
    pk_sampler_free(s);
    pk_context_free(c);
    pk_model_free(m);
    free(prompt);
    free(ptext);
    return 0;
}

/* ---- pocket info ------------------------------------------------------------------ */

static const char *info_help =
    "usage: pocket info [--tensors] [MODEL]\n"
    "\n"
    "Describe a GGUF model: architecture, geometry, total and active parameters\n"
    "per token, tensor types, and the weight bytes read per decoded token.\n"
    "  --tensors   also list every tensor with its type and shape\n";

static void human_bytes(double b, char *out, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) { b /= 1024; i++; }
    snprintf(out, cap, "%.2f %s", b, u[i]);
}

static int cmd_info(int argc, char **argv) {
    opts o;
    opts_init(&o);
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(info_help, stdout); return 0; }
        if (argv[i][0] != '-' && !o.model) { o.model = argv[i]; continue; }
        if (!parse_common(&o, argc, argv, &i)) die("info: unknown option '%s' (see pocket info --help)", argv[i]);
    }
    const char *path = o.model ? o.model : default_model();
    pk_model *m = load_model(path, NULL);
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    char b1[32], b2[32];
    printf("file            %s\n", path);
    printf("architecture    %s%s%s\n", mi.arch, *mi.name ? "  name: " : "", mi.name);
    printf("vocab           %d\n", mi.n_vocab);
    printf("context (train) %d\n", mi.n_ctx_train);
    printf("hidden          %d\n", mi.n_embd);
    printf("layers          %d\n", mi.n_layer);
    printf("attention       %d q heads, %d kv heads, head dim %d (v %d)%s\n", mi.n_head, mi.n_head_kv,
           mi.head_dim, mi.head_dim_v, mi.qk_norm ? ", per-head q/k RMSNorm" : "");
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

/* ---- pocket perplexity ------------------------------------------------------------- */

static const char *ppl_help =
    "usage: pocket perplexity [-m MODEL] -f TEXT [-c CTX] [-t N] [--chunks N]\n"
    "\n"
    "Perplexity of MODEL on a text file, scored as llama.cpp's llama-perplexity\n"
    "does: the text is cut into non-overlapping windows of CTX tokens (default 512;\n"
    "the first token of each window is BOS if the model adds one), and only the\n"
    "second half of each window is scored. Prints a running estimate per window\n"
    "and the final PPL with its standard error.\n"
    "  --chunks N   score only the first N windows\n";

static int cmd_perplexity(int argc, char **argv) {
    opts o;
    opts_init(&o);
    o.n_ctx = 512;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(ppl_help, stdout); return 0; }
        if (!parse_common(&o, argc, argv, &i)) die("perplexity: unknown option '%s' (see pocket perplexity --help)", argv[i]);
    }
    if (!o.text_file) die("perplexity: no text: give -f FILE");
    if (o.n_ctx < 4) die("perplexity: -c %d is too small (at least 4)", o.n_ctx);
    size_t len;
    char *text = read_file(o.text_file, &len);
    pk_model *m = load_model(o.model ? o.model : default_model(), NULL);
    int n_tok;
    int32_t *toks = tokenize(m, text, len, 1, 0, &n_tok);
    const int n_ctx = o.n_ctx;
    int n_chunk = n_tok / n_ctx;
    if (o.n_chunks > 0 && o.n_chunks < n_chunk) n_chunk = o.n_chunks;
    if (n_chunk < 1)
        die("perplexity: %s has %d tokens, fewer than one window of %d (use a smaller -c)",
            o.text_file, n_tok, n_ctx);
    pk_error err = {0};
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = o.n_threads;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err)) die("%s", err.msg);
    const int V = pk_model_n_vocab(m);
    const int32_t bos = pk_model_bos(m);
    int add_bos = n_tok > 0 && bos >= 0 && toks[0] == bos;
    float *logits = malloc((size_t)n_ctx * V * sizeof(float));
    if (!logits) die("out of memory for %d x %d logits", n_ctx, V);
    fprintf(stderr, "perplexity: %d tokens, %d windows of %d, scoring the last %d of each\n", n_tok,
            n_chunk, n_ctx, n_ctx - 1 - n_ctx / 2);
    double nll = 0, nll2 = 0;
    long count = 0;
    double t0 = now();
    const int first = n_ctx / 2;
    for (int ch = 0; ch < n_chunk; ch++) {
        int32_t *w = toks + (size_t)ch * n_ctx;
        int32_t saved = w[0];
        if (add_bos) w[0] = bos;
        pk_context_reset(c);
        if (pk_decode_all(c, w, n_ctx, logits, &err)) die("%s", err.msg);
        w[0] = saved;
        for (int j = first; j < n_ctx - 1; j++) {
            const float *l = logits + (size_t)j * V;
            float mx = l[0];
            for (int v = 1; v < V; v++) mx = l[v] > mx ? l[v] : mx;
            double sum = 0;
            for (int v = 0; v < V; v++) sum += exp((double)l[v] - mx);
            double lp = (double)l[w[j + 1]] - mx - log(sum);
            nll -= lp;
            nll2 += lp * lp;
            count++;
        }
        if (ch == 0) {
            double per = now() - t0;
            fprintf(stderr, "perplexity: %.2f s per window, about %.0f s in all\n", per, per * n_chunk);
        }
        fprintf(stderr, "[%d]%.4f,", ch + 1, exp(nll / count));
        if ((ch + 1) % 10 == 0 || ch + 1 == n_chunk) fputc('\n', stderr);
    }
    double mean = nll / count, var = nll2 / count - mean * mean;
    double ppl = exp(mean), se = count > 1 ? sqrt(var / (count - 1)) * ppl : 0;
    printf("Final estimate: PPL = %.4f +/- %.5f  (%d windows, %ld tokens scored, %.1f s)\n", ppl, se,
           n_chunk, count, now() - t0);
    free(logits);
    pk_context_free(c);
    pk_model_free(m);
    free(toks);
    free(text);
    return 0;
}

/* ---- main ------------------------------------------------------------------------------ */

static const char *main_help =
    "pocket - run Mixture-of-Experts language models (GGUF) on a CPU\n"
    "\n"
    "usage: pocket COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  run          generate text from a prompt\n"
    "  info         describe a model: geometry, parameters, bytes per token\n"
    "  perplexity   score a text file (llama.cpp-compatible perplexity)\n"
    "\n"
    "`pocket COMMAND --help` explains a command. With no -m, the bundled model\n"
    "(" DEFAULT_MODEL_NAME ", a small Qwen3-MoE trained on the King James Bible) is used.\n"
    "POCKET_KERNELS=ref|avx2|avx512 forces a kernel variant.\n";

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(main_help, stdout);
        return argc < 2 ? 1 : 0;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 2, argv + 2);
    if (!strcmp(cmd, "perplexity")) return cmd_perplexity(argc - 2, argv + 2);
    die("unknown command '%s' (see pocket --help)", cmd);
}
