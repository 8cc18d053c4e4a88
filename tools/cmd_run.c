/* cmd_run.c - `pocket run`: generate a continuation of a prompt, streaming.
 * With --prompt-cache FILE the sequence state after the prompt is kept in
 * FILE (pk_state_save_file), and a later run whose prompt starts the same
 * way loads it and processes only the tokens after the common prefix. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- pocket run ------------------------------------------------------------------ */

static const char *const run_help =
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
    "  -c, --ctx-size N       context window (default: the model's trained length; more\n"
    "                         than 4096 only if its KV cache fits 1/4 of free memory)\n"
    CACHE_TYPE_HELP
    "      --mem SIZE         keep at most SIZE resident (e.g. 6G): weights every token\n"
    "                         reads, KV cache, buffers, and a cache of routed experts;\n"
    "                         other experts are read from the file when routed to\n"
    "                         (default: the memory available, if the file exceeds it;\n"
    "                         0: no budget, map the whole file)\n"
    "      --expert-slots N   cache exactly N experts per layer (experiments)\n"
    "      --temp T           temperature (default 0.8; 0 = greedy)\n"
    "      --top-k N          keep the N most likely tokens (default 40; 0 = off)\n"
    "      --top-p P          nucleus sampling (default 0.95; 1 = off)\n"
    "      --min-p P          drop tokens below P x the top probability (default 0.05; 0 = off)\n"
    "      --repeat-penalty R penalise recent tokens (default 1.0 = off)\n"
    "      --repeat-last-n N  how many recent tokens (default 64)\n"
    "      --seed S           random seed (default: from the clock; printed in the summary)\n"
    "      --ignore-eos       keep generating past end-of-text tokens\n"
    "      --no-special       treat special-token text in the prompt as plain text\n"
    "      --prompt-cache FILE  keep the state after the prompt in FILE; a later run\n"
    "                         whose prompt starts with the same tokens loads it and\n"
    "                         processes only the rest (at least the last token).\n"
    "                         stderr says how many came from it. A file of another\n"
    "                         model or cache type, or a corrupt one: a warning, the\n"
    "                         prompt processed whole, the file rewritten\n"
    "      --prompt-cache-ro  use the --prompt-cache file, never write it\n";

/* ---- --prompt-cache ------------------------------------------------------------- */

/* Fail early, naming it, if the directory of path cannot take a new file. */
static void check_writable_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash) snprintf(dir, sizeof dir, ".");
    else snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (access(dir, W_OK | X_OK))
        die("run: --prompt-cache %s: cannot write in %s: %s", path, dir, strerror(errno));
}

/* Load the state in path into c if its tokens start the prompt, and cut it
 * back to what the prompt shares with it, keeping at least the last prompt
 * token to process. Returns the tokens kept (0: the file is missing, shares
 * nothing, or cannot be used: then one warning line, and c is empty). */
static int prompt_cache_load(pk_context *c, const pk_model *m, const char *path, const int32_t *prompt,
                             int n_prompt) {
    if (access(path, F_OK)) return 0;
    pk_error err = {0};
    int32_t *toks = NULL;
    int nt = 0, lcp = 0;
    if (pk_state_file_tokens(m, path, &toks, &nt, &err) == PK_OK) {
        while (lcp < nt && lcp < n_prompt && toks[lcp] == prompt[lcp]) lcp++;
        free(toks);
        if (lcp == 0 || pk_state_load_file(c, path, &err) == PK_OK)
            return lcp ? pk_context_truncate(c, lcp < n_prompt ? lcp : n_prompt - 1) : 0;
    }
    fprintf(stderr, "pocket: warning: --prompt-cache: %s; processing the prompt from the start\n", err.msg);
    return 0;
}

int cmd_run(int argc, char **argv) {
    opts o;
    opts_init(&o);
    const char *cache_path = NULL;
    int cache_ro = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { fputs(run_help, stdout); return 0; }
        if (!strcmp(argv[i], "--prompt-cache")) {
            if (i + 1 >= argc) die("run: --prompt-cache needs a FILE");
            cache_path = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--prompt-cache-ro")) { cache_ro = 1; continue; }
        if (!parse_common(&o, argc, argv, &i)) die("run: unknown option '%s' (see pocket run --help)", argv[i]);
    }
    size_t plen = 0;
    char *ptext = NULL;
    if (o.text_file) ptext = read_file(o.text_file, &plen);
    else if (o.prompt) { ptext = strdup(o.prompt); plen = strlen(o.prompt); }
    else die("run: no prompt: give -p TEXT or -f FILE (see pocket run --help)");
    if (cache_ro && !cache_path) die("run: --prompt-cache-ro needs --prompt-cache FILE");
    if (cache_path && !cache_ro) check_writable_dir(cache_path);
    if (!o.seed_given) o.sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);

    double t_load;
    pk_model *m = load_model(o.model ? o.model : default_model(), &o, &t_load);
    int n_prompt;
    int32_t *prompt = tokenize(m, ptext, plen, 1, !o.no_special, &n_prompt);
    if (n_prompt == 0) die("run: the prompt is empty after tokenization");

    pk_error err = {0};
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.n_threads;
    cp.type_k = o.type_k;
    cp.type_v = o.type_v;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err)) die("%s", err.msg);
    int n_ctx = pk_context_n_ctx(c);
    if (n_prompt >= n_ctx)
        die("run: the prompt has %d tokens, which does not fit the context of %d (use -c)", n_prompt, n_ctx);
    pk_sampler *s = pk_sampler_new(&o.sp, pk_model_n_vocab(m), &err);
    if (!s) die("%s", err.msg);

    double t0 = now();
    int n_cached = 0;
    if (!cache_path) {
        if (pk_decode(c, prompt, n_prompt, &err)) die("%s", err.msg);
    } else {
        /* checkpoints (recurrent layers) before the last prompt token and
           after it: a later run of the same prompt, or of one that ends
           otherwise, goes back to them */
        n_cached = prompt_cache_load(c, m, cache_path, prompt, n_prompt);
        if (n_cached < n_prompt - 1 && pk_decode(c, prompt + n_cached, n_prompt - 1 - n_cached, &err))
            die("%s", err.msg);
        pk_context_checkpoint(c);
        if (pk_decode(c, prompt + n_prompt - 1, 1, &err)) die("%s", err.msg);
        pk_context_checkpoint(c);
        if (!cache_ro && pk_state_save_file(c, cache_path, &err))
            fprintf(stderr, "pocket: warning: --prompt-cache: %s\n", err.msg);
        fprintf(stderr, "prompt cache: %d of %d prompt tokens from %s%s\n", n_cached, n_prompt, cache_path,
                cache_ro ? " (read-only)" : "");
    }
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
            t_load, n_prompt, t_prompt, (n_prompt - n_cached) / (t_prompt > 0 ? t_prompt : 1e-9), n_gen, stop,
            t_gen, n_gen / (t_gen > 0 ? t_gen : 1e-9), st.n_threads, st.isa,
            (unsigned long long)o.sp.seed,
            gen_tokens ? (double)(st.weight_bytes - st0.weight_bytes) / gen_tokens / 1e6 : 0.0);
    uint64_t kv_tok;
    pk_context_kv_size(c, &kv_tok, NULL);
    fprintf(stderr, "kv cache %s keys, %s values: %llu bytes per token, %.1f MB at context %d\n",
            pk_cache_type_name(o.type_k), pk_cache_type_name(o.type_v), (unsigned long long)kv_tok,
            (double)kv_tok * n_ctx / 1e6, n_ctx);
    pk_model_plan plan;
    pk_model_get_plan(m, &plan);
    if (plan.streaming) {
        uint64_t look = st.expert_hits + st.expert_misses;
        print_plan(m, stderr);
        fprintf(stderr, "expert cache: %llu lookups, hit rate %.1f%%, %.1f MB read from storage per token (%.2f s waiting)\n",
                (unsigned long long)look, look ? 100.0 * (double)st.expert_hits / (double)look : 0.0,
                st.tokens ? (double)st.storage_bytes / (double)st.tokens / 1e6 : 0.0, st.storage_secs);
    }
    pk_sampler_free(s);
    pk_context_free(c);
    pk_model_free(m);
    free(prompt);
    free(ptext);
    return 0;
}

