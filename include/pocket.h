/* pocket.h - public API of libpocket: load a GGUF Mixture-of-Experts (or
 * dense) language model, tokenize, run the forward pass, sample.
 *
 * Every type is opaque. Every fallible call returns a status code (PK_OK on
 * success) and, when given a pk_error, fills it with a one-line message that
 * names the file, the field and the value at fault. The library never exits
 * the process and never prints, except through callbacks you install (and
 * the opt-in SIGBUS guard, pk_fault_guard_install).
 *
 * Usage (greedy generation; examples/minimal.c is the complete program):
 *
 *     pk_error err = {0};
 *     pk_model *m;  pk_context *c;
 *     if (pk_model_load("model.gguf", &m, &err)) { puts(err.msg); return 1; }
 *     pk_context_params cp = pk_context_default_params();
 *     if (pk_context_new(m, &cp, &c, &err)) { ... }
 *     int32_t ids[256];
 *     int n = pk_model_tokenize(m, "And God said", 12, ids, 256, 1, 1);
 *     pk_decode(c, ids, n, &err);                        // the prompt
 *     pk_sampler_params sp = pk_sampler_default_params();
 *     sp.temperature = 0;                                // greedy
 *     pk_sampler *s = pk_sampler_new(&sp, pk_model_n_vocab(m), &err);
 *     for (int i = 0; i < 32; i++) {
 *         int32_t t = pk_sampler_sample(s, pk_context_logits(c));
 *         if (pk_model_is_eog(m, t)) break;
 *         char piece[64];
 *         int len = pk_model_token_piece(m, t, piece, sizeof piece);
 *         fwrite(piece, 1, len, stdout);
 *         pk_sampler_accept(s, t);
 *         if (pk_decode(c, &t, 1, &err)) break;          // PK_ERR_CONTEXT: full
 *     }
 *     pk_sampler_free(s); pk_context_free(c); pk_model_free(m);
 *
 * Chat models: pk_chat_format() turns {role, content} messages into the
 * prompt text (ChatML, Llama-3, Gemma), detected from the GGUF or by name;
 * pk_chat_jinja_render() runs the model's own Jinja chat template (tools,
 * tool calls, reasoning) on an OpenAI-style conversation in JSON.
 * Build against the installed library with
 *     cc prog.c $(pkg-config --cflags --libs --static pocket)
 * (`make install PREFIX=DIR` installs lib/, include/, lib/pkgconfig/pocket.pc).
 */
#ifndef POCKET_H
#define POCKET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ---------------------------------------------------- */
enum {
    PK_OK = 0,
    PK_ERR_IO = 1,          /* file could not be opened, read or mapped */
    PK_ERR_FORMAT = 2,      /* malformed or inconsistent file contents */
    PK_ERR_UNSUPPORTED = 3, /* valid, but not something pocket runs (yet) */
    PK_ERR_NOMEM = 4,       /* allocation failed */
    PK_ERR_ARG = 5,         /* bad argument from the caller */
    PK_ERR_CONTEXT = 6,     /* context window is full */
};

typedef struct pk_error {
    int code;
    char msg[512];
} pk_error;

/* A short name for a status code ("format error", ...). */
const char *pk_status_str(int code);

/* ---- model ------------------------------------------------------------- */
typedef struct pk_model pk_model;

/* Load a GGUF model (mapped, not copied). Fails with PK_ERR_IO for an
 * unreadable file, PK_ERR_FORMAT for a malformed one (missing or inconsistent
 * key or tensor), PK_ERR_UNSUPPORTED for an architecture or tensor type pocket
 * does not run. */
int pk_model_load(const char *path, pk_model **out, pk_error *err);
void pk_model_free(pk_model *m);

/* Load-time parameters: a memory budget. With mem > 0 the model keeps
 * resident at most mem bytes for itself and one context of n_ctx tokens:
 * the weights every token reads (attention / DeltaNet, norms, routers,
 * shared experts, embeddings, output head), the context's KV cache and
 * buffers, a 64 MiB margin, and a cache of routed experts in what is left;
 * experts not in the cache are read from the file when a token needs them
 * (the output is bitwise the same). If every expert fits, the file is just
 * mapped, as with mem = 0. The expert cache is the model's: every context
 * shares it. Fails with PK_ERR_ARG if mem cannot hold the resident part
 * plus one expert per layer (the message names both sizes). */
typedef struct pk_model_params {
    uint64_t mem;              /* bytes (0: no budget) */
    int n_ctx;                 /* the context the plan reserves (0: as pk_context_new) */
    int type_k, type_v;        /* its KV cache types (PK_CACHE_*, 0: F16) */
    int expert_slots;          /* > 0: cache exactly this many experts per layer,
                                  whatever mem says (tests, experiments) */
    int n_checkpoints;         /* its recurrent-state checkpoints (as
                                  pk_context_params.n_checkpoints; -1: the default) */
} pk_model_params;
pk_model_params pk_model_default_params(void);
int pk_model_load_params(const char *path, const pk_model_params *p, pk_model **out, pk_error *err);

/* The memory plan a model was loaded with. */
typedef struct pk_model_plan {
    uint64_t mem;              /* the budget (0: none) */
    uint64_t resident_bytes;   /* weights kept resident: all but the routed experts */
    uint64_t expert_bytes;     /* all routed experts */
    uint64_t context_bytes;    /* one context of n_ctx tokens: KV cache, states, buffers */
    uint64_t kv_bytes_per_token; /* of that context's KV cache */
    int n_checkpoints;         /* of that context's recurrent-state checkpoints, */
    uint64_t checkpoint_bytes; /* each of these bytes (in context_bytes) */
    int n_ctx;
    int streaming;             /* 1: experts are read into a cache */
    int expert_slots;          /* cached experts per layer (n_expert if all resident) */
    int n_expert, n_layer_moe;
    uint64_t cache_bytes;      /* the expert cache (slots x layers x slot) */
    uint64_t expert_slice_bytes; /* one expert of one layer: gate + up + down */
    int io_depth;              /* expert reads in flight (the cache's I/O threads) */
    uint64_t expected_read_per_token; /* bytes read from the file per decoded token
                                         if routing were uniform: (1 - slots / n_expert)
                                         x k experts x layers x slice */
} pk_model_plan;
void pk_model_get_plan(const pk_model *m, pk_model_plan *out);
/* Memory this process may still use: MemAvailable, or less if its cgroup's
 * limit says so (Linux); 0 if unknown. */
uint64_t pk_mem_available(void);

typedef struct pk_model_info {
    const char *arch;          /* general.architecture */
    const char *name;          /* general.name, or "" */
    int n_vocab, n_ctx_train, n_embd, n_layer;
    int n_nextn;               /* MTP layers after the n_layer blocks (loaded, unused) */
    int n_head, n_head_kv, head_dim, head_dim_v, n_rot;
    float rope_base, rms_eps;
    const char *rope_style;    /* "norm" or "neox" */
    int qk_norm;               /* 0: none, 1: per head, 2: over the full q (k) width */
    int attn_gate;             /* sigmoid output gate on attention */
    int n_layer_recurrent;     /* Gated DeltaNet layers (hybrid archs), else 0 */
    int full_attn_interval;    /* every n-th layer is full attention (hybrid) */
    int ssm_conv, ssm_state, ssm_k_heads, ssm_v_heads; /* DeltaNet geometry */
    int n_ff;                  /* dense FFN (0 for MoE) */
    int n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    const char *gating;        /* "softmax" / "sigmoid" (MoE) */
    int norm_topk;
    int tied_output;           /* output head shares token_embd */
    int64_t n_params;          /* all weights */
    int64_t n_params_active;   /* weights used per token */
    uint64_t file_bytes;
    uint64_t bytes_per_token;  /* weight bytes read per decoded token */
    /* the multipliers: embeddings *= embd_scale (gemma4: sqrt(n_embd)), block
       outputs *= residual_scale, attention scores *= attn_scale, logits /=
       logit_scale; scales: they come from Granite's keys (else residual and
       logit scale are 1) */
    float embd_scale, residual_scale, attn_scale, logit_scale;
    int scales;
} pk_model_info;

/* A model file is mapped, not copied. If another program truncates or
 * rewrites it in place while it is loaded, reads of the mapping fault
 * (SIGBUS) or see other bytes; replacing it by rename is harmless (the
 * mapping keeps the old file). pk_model_check_file: PK_OK while the mapped
 * file has the size and modification time it had at load, else PK_ERR_IO
 * with a message naming the file and what changed (a server calls it before
 * each request). pk_fault_guard_install (opt-in, for programs, not called by
 * the library itself): installs a SIGBUS handler that turns a fault inside a
 * loaded model's mapping into one line on stderr, "pocket: error: FILE: the
 * model file changed while in use ...", and _exit(1); other SIGBUS go to the
 * handler installed before, or the default action. Returns PK_OK, or
 * PK_ERR_IO if sigaction failed. */
int pk_model_check_file(const pk_model *m, pk_error *err);
int pk_fault_guard_install(void);

void pk_model_get_info(const pk_model *m, pk_model_info *out);
/* What layer il (0 <= il < n_layer) computes, from its block plan, as
 * "MIXER(shape) + FFN(shape)", e.g. "attention(16 q / 4 kv heads, head 64,
 * rope 64 dims, q/k norm) + moe(top-4 of 16, ff 512)". Writes at most cap
 * bytes (NUL included, as snprintf) and returns the full length, or
 * -PK_ERR_ARG for a bad il. Layers with equal texts compute the same. */
int pk_model_layer_desc(const pk_model *m, int il, char *buf, size_t cap);
int pk_model_n_vocab(const pk_model *m);
/* Tensor i (0 <= i < pk_model_n_tensors): name, type name, dims. */
int pk_model_n_tensors(const pk_model *m);
int pk_model_tensor(const pk_model *m, int i, const char **name, const char **type,
                    int64_t ne[4], uint64_t *nbytes);

/* ---- tokenizer (the model's vocabulary) -------------------------------- */
/* Tokenize len bytes. add_special adds BOS/EOS as the model's GGUF says;
 * parse_special turns special-token text into those tokens. Writes at most
 * max ids, returns the count needed (> max: call again with more room), or
 * -PK_ERR_* on error. */
int pk_model_tokenize(const pk_model *m, const char *text, size_t len, int32_t *out,
                      int max, int add_special, int parse_special);
/* Bytes of a token (no NUL); returns the full length or -PK_ERR_ARG. */
int pk_model_token_piece(const pk_model *m, int32_t id, char *buf, int buflen);
int pk_model_is_eog(const pk_model *m, int32_t id);
int32_t pk_model_bos(const pk_model *m);

/* ---- context: one sequence being decoded -------------------------------- */
typedef struct pk_context pk_context;

/* Element types of the KV cache (pk_context_params.type_k / type_v), named
 * as llama.cpp's --cache-type-k/-v name them. Keys and values are chosen
 * independently; the attention kernels read each type directly. F16 halves
 * F32's bytes (rounding to 11 significant bits; |x| > 65504 overflows), Q8_0
 * (blocks of 32 int8 with one fp16 scale: 8.5 bits, 27% of F32's bytes)
 * needs head dimensions that are multiples of 32. Gated DeltaNet states
 * stay F32 whatever is chosen. */
enum {
    PK_CACHE_DEFAULT = 0,   /* F16 */
    PK_CACHE_F32 = 1,
    PK_CACHE_F16 = 2,
    PK_CACHE_Q8_0 = 3,
};
/* "f32", "f16", "q8_0" for a PK_CACHE_* value (PK_CACHE_DEFAULT: "f16"),
 * NULL for any other value. */
const char *pk_cache_type_name(int type);
/* The PK_CACHE_* value of a name (case-insensitive, as above), -1 if none. */
int pk_cache_type_parse(const char *name);

typedef struct pk_context_params {
    int n_ctx;        /* context window in tokens (0: the model's trained length if
                         its KV cache takes at most a quarter of the memory
                         available now, else that length capped at 4096) */
    int n_threads;    /* worker threads (0: all cores) */
    int n_batch;      /* most prompt tokens per forward pass (0: 512); prompts are
                         processed in batches that read each weight once */
    int type_k, type_v; /* KV cache element types, PK_CACHE_* (0: F16). PK_ERR_ARG
                         for an unknown value, PK_ERR_UNSUPPORTED for Q8_0 with a
                         head dimension that is not a multiple of 32 */
    int n_checkpoints;  /* recurrent-state checkpoints the context holds (models
                         with Gated DeltaNet layers; allocated at creation and
                         counted in its memory; 0: none, -1: the default, 4) */
} pk_context_params;

pk_context_params pk_context_default_params(void);
int pk_context_new(const pk_model *m, const pk_context_params *p, pk_context **out,
                   pk_error *err);
void pk_context_free(pk_context *c);
/* Forget the sequence (positions restart at 0). */
void pk_context_reset(pk_context *c);
int pk_context_pos(const pk_context *c);       /* tokens in the sequence */
int pk_context_n_ctx(const pk_context *c);
/* The sequence memory: KV cache bytes per position of context (keys and
 * values of every attention layer, in their cache types; x n_ctx allocated),
 * and the fixed bytes of the Gated DeltaNet conv and recurrent states. */
void pk_context_kv_size(const pk_context *c, uint64_t *kv_bytes_per_token, uint64_t *recurrent_bytes);

/* Append n tokens to the sequence (in batches of up to n_batch). Afterwards
 * pk_context_logits() holds the logits after the last of them. Fails with PK_ERR_CONTEXT when the window
 * would overflow (nothing is appended), PK_ERR_ARG for an out-of-range id. */
int pk_decode(pk_context *c, const int32_t *tokens, int n, pk_error *err);
/* Like pk_decode, and copies the logits after each token into
 * all_logits[n * n_vocab] (for scoring, e.g. perplexity). */
int pk_decode_all(pk_context *c, const int32_t *tokens, int n, float *all_logits,
                  pk_error *err);
const float *pk_context_logits(const pk_context *c);   /* n_vocab floats */

/* ---- sequence state: truncation, checkpoints, saved states ---------------
 * A context knows the tokens it holds. Layers that keep a row per position
 * (attention: full, sliding-window, latent) can be cut back to any shorter
 * prefix for free. A Gated DeltaNet layer keeps a running state, which can
 * only go back to a position where a checkpoint of it was taken. */

/* The tokens of the sequence, pk_context_pos() of them, oldest first
 * (valid until the next call that changes the sequence). */
const int32_t *pk_context_tokens(const pk_context *c);
/* The length pk_context_truncate(c, n) would leave, without changing c: the
 * largest position <= min(n, pos) the context can return to (that position
 * itself for a model without recurrent layers; else the position of the
 * latest checkpoint <= it, or 0). */
int pk_context_reachable(const pk_context *c, int n);
/* Cut the sequence back to pk_context_reachable(c, n) tokens and return that
 * length. Checkpoints after it are dropped. The logits are stale until the
 * next decode. pk_context_reset is pk_context_truncate(c, 0). */
int pk_context_truncate(pk_context *c, int n);
/* Keep the recurrent states at the current position (a no-op for models
 * without recurrent layers, for a context made with n_checkpoints 0, and
 * where one is already kept). When all checkpoints are in use, the oldest
 * position's is replaced. */
void pk_context_checkpoint(pk_context *c);
/* Plan checkpoints at positions the next decodes will reach: pos[0..n),
 * ascending, each in (pk_context_pos, n_ctx], at most the context's
 * n_checkpoints (and 256). Each is taken while the batch holding it is
 * processed, without cutting the batch in two for the other layers: the
 * states are bitwise those of a decode cut there followed by
 * pk_context_checkpoint, the whole batch's weights read once. A checkpoint
 * at a batch's end is taken after it. A later call replaces the plan; a
 * truncation, a load or a failed decode drops it. PK_ERR_ARG for positions
 * out of order or range; a no-op for a context that keeps no checkpoints. */
int pk_context_plan_checkpoints(pk_context *c, const int *pos, int n, pk_error *err);
/* Positions of the checkpoints held, ascending: writes at most cap, returns
 * how many there are. */
int pk_context_checkpoints(const pk_context *c, int *pos, int cap);
/* Bytes of one checkpoint (0 for a model without recurrent layers). */
uint64_t pk_context_checkpoint_bytes(const pk_context *c);

/* A context's state as bytes: the identity of the model file (a hash of its
 * header: metadata, tensor names, types, shapes and offsets, and its size),
 * the cache types, the tokens, the cached keys / values / latents of their
 * positions, the conv and recurrent states and the checkpoints, and a
 * checksum. pk_state_size: the bytes pk_state_save writes. Loading replaces
 * the context's sequence; it refuses (context unchanged) a state of another
 * model file or other cache types, or one longer than the context, with
 * PK_ERR_ARG, and a malformed, truncated or corrupt one with PK_ERR_FORMAT,
 * each with a one-line message. The files are written atomically (a
 * temporary file renamed over PATH). */
size_t pk_state_size(const pk_context *c);
int pk_state_save(const pk_context *c, void *buf, size_t cap, pk_error *err);
int pk_state_load(pk_context *c, const void *buf, size_t n, pk_error *err);
int pk_state_save_file(const pk_context *c, const char *path, pk_error *err);
int pk_state_load_file(pk_context *c, const char *path, pk_error *err);
/* The tokens of a saved state (buffer or file) of model m, checked as far as
 * its header (model identity, lengths, the total size; not the checksum:
 * that is checked at load), without loading it: *tokens is allocated (free()), *n their count.
 * For a cache that matches prompts against stored states. */
int pk_state_tokens(const pk_model *m, const void *buf, size_t n, int32_t **tokens, int *n_tokens,
                    pk_error *err);
int pk_state_file_tokens(const pk_model *m, const char *path, int32_t **tokens, int *n_tokens, pk_error *err);

typedef struct pk_stats {
    uint64_t tokens;          /* tokens decoded since the context was made */
    uint64_t weight_bytes;    /* weight bytes read by them */
    uint64_t state_bytes;     /* sequence-state bytes they read and wrote: KV cache
                                 reads and writes, recurrent (DeltaNet) and conv states */
    const char *isa;          /* kernel variant in use */
    int n_threads;
    uint64_t mem_bytes;       /* the context's own memory (KV cache, buffers) */
    /* the expert cache (a model loaded with a memory budget): lookups of
       routed experts by these tokens, bytes they asked to read from the
       file (their misses and read-ahead guesses, used or not; whole pages,
       counted when queued), and the wall time spent waiting for reads */
    uint64_t expert_hits, expert_misses, storage_bytes;
    double storage_secs;
    /* experts read ahead for the next layer (decode under a budget), and
       lookups that found one of them */
    uint64_t expert_prefetches, expert_prefetch_hits;
} pk_stats;
void pk_context_stats(const pk_context *c, pk_stats *out);

/* Where a forward pass's time goes (pocket bench --profile): phases of the
 * pass in the order first seen - its parts (embedding, norms and residuals,
 * each mixer and FFN kind by name, the output head) and parts of those (a
 * MoE's router, experts and shared expert; a mixer's projections and its
 * attention or recurrence: parent the index of the phase they are part of,
 * always an earlier one; -1 for the pass's own parts) - with their wall
 * time, the time the decoding thread waited for worker threads within it,
 * and the weight and sequence-state bytes they read. */
typedef struct pk_profile_phase {
    const char *name;
    int parent;
    uint64_t calls;
    double secs, wait_secs;
    uint64_t weight_bytes, state_bytes;
} pk_profile_phase;
/* on: start timing phases (counters zeroed); 0: stop (counters kept).
 * Off by default; costs two clock reads per phase and layer when on. */
void pk_context_profile(pk_context *c, int on);
/* The phases timed since profiling started: writes at most max, returns
 * how many there are. Names live as long as the model. */
int pk_context_profile_get(const pk_context *c, pk_profile_phase *out, int max);

/* Kernel variants, from the one declared list: the i-th variant's name
 * ("ref", "avx2", ..., "neon", "dotprod", "i8mm"), NULL past the end;
 * whether this CPU can run a variant; and whether POCKET_KERNELS (which
 * forces one) is usable: 0 unset or usable, 1 unknown name, 2 not usable on
 * this CPU (the best usable variant is used instead). */
const char *pk_kernel_variant_name(int i);
int pk_kernel_variant_usable(const char *name);
int pk_kernel_env_status(void);

/* ---- sampling ------------------------------------------------------------ */
typedef struct pk_sampler pk_sampler;
typedef struct pk_sampler_params {
    float temperature;      /* <= 0: greedy (default 0.8) */
    int top_k;              /* <= 0: off (default 40) */
    float top_p;            /* >= 1: off (default 0.95) */
    float min_p;            /* <= 0: off (default 0.05) */
    float repeat_penalty;   /* 1: off (default 1.0) */
    int repeat_last_n;      /* window of recent tokens penalised (default 64) */
    uint64_t seed;          /* RNG seed */
    float presence_penalty; /* OpenAI's: subtracted from the logit of every token accepted
                               since the last reset (default 0: off) */
    float frequency_penalty;/* OpenAI's: times the number of times it was accepted (0: off) */
} pk_sampler_params;

pk_sampler_params pk_sampler_default_params(void);
/* NULL on bad params (message in err) or out of memory. */
pk_sampler *pk_sampler_new(const pk_sampler_params *p, int n_vocab, pk_error *err);
void pk_sampler_free(pk_sampler *s);
/* Pick the next token from logits[n_vocab] (not modified). */
int32_t pk_sampler_sample(pk_sampler *s, const float *logits);
/* Record a token that entered the context, for the repetition penalty. */
void pk_sampler_accept(pk_sampler *s, int32_t token);
/* Forget accepted tokens; reseed the RNG; a grammar starts again. */
void pk_sampler_reset(pk_sampler *s, uint64_t seed);

/* The chain pk_sampler_sample runs: logits + logit bias -> repetition,
 * presence and frequency penalties -> the grammar (tokens it does not allow
 * get -inf) -> top-k -> top-p / min-p -> temperature -> pick. */

/* Logit bias (OpenAI's logit_bias): bias[i] is added to the logit of ids[i]
 * before everything else (-100 in practice bans a token, +100 forces it).
 * Replaces the previous set; n = 0 clears it. PK_ERR_ARG for an id outside
 * the vocabulary or a bias that is not finite. */
int pk_sampler_set_logit_bias(pk_sampler *s, const int32_t *ids, const float *bias, int n, pk_error *err);

/* Log-probabilities of the last pk_sampler_sample call: the log-softmax of
 * the logits the chain started from (after bias, penalties and the grammar,
 * at temperature 1, before top-k/top-p/min-p), so a token the grammar
 * forbids has -inf. pk_sampler_logprob gives one token's (-inf for an id
 * out of range); pk_sampler_top_logprobs writes the k most likely, best
 * first, and returns how many it wrote (at most k; fewer when fewer tokens
 * are possible). Valid until the next sample call. */
float pk_sampler_logprob(pk_sampler *s, int32_t token);
int pk_sampler_top_logprobs(pk_sampler *s, int k, int32_t *ids, float *logprobs);

/* ---- grammars: constrained output (docs/grammars.md) ------------------------
 * A grammar in GBNF, llama.cpp's notation (its `grammar` field), compiled for
 * a model's vocabulary. Attached to a sampler, it leaves only the tokens that
 * keep the output a prefix of the language: pk_sampler_sample picks among
 * them (end-of-generation tokens only once the grammar is complete) and
 * pk_sampler_accept advances it. JSON schemas are turned into GBNF first.
 *
 *     char *gbnf;  pk_grammar *g;
 *     pk_json_schema_to_grammar(schema, strlen(schema), 0, &gbnf, &err);
 *     pk_grammar_new(m, gbnf, NULL, &g, &err);   free(gbnf);
 *     pk_sampler_set_grammar(s, g, &err);
 *     pk_sampler_grammar_limit(s, max_tokens);    // close the output in time
 *     ... sample / accept as usual; stop at an end-of-generation token ...
 *     pk_sampler_grammar_status(s, NULL) == PK_GRAMMAR_CAN_END: complete
 *
 * A grammar keeps caches that grow as it is used (what it allows after each
 * state, shared by every sampler it is attached to); it is used by one
 * thread at a time, and freed after the samplers that use it. */
typedef struct pk_grammar pk_grammar;

/* Compile gbnf (NUL-terminated) with start rule root (NULL: "root") for m's
 * vocabulary; m = NULL compiles a grammar that can only check strings
 * (pk_grammar_check). PK_ERR_ARG with a one-line message for a bad grammar:
 * "grammar: line L, column C: ..." (syntax), "grammar: rule 'x' ..."
 * (undefined, left-recursive, never ending), limits exceeded. */
int pk_grammar_new(const pk_model *m, const char *gbnf, const char *root, pk_grammar **out, pk_error *err);
void pk_grammar_free(pk_grammar *g);
/* Whether text (len bytes) is in the grammar's language: 1 complete, 0 a
 * prefix of a sentence but not complete, -1 not even a prefix. */
int pk_grammar_check(pk_grammar *g, const char *text, size_t len);

/* The GBNF (malloc'ed, NUL-terminated; free it) of a JSON schema (len
 * bytes): types object (properties, required, additionalProperties),
 * array (items, prefixItems, minItems, maxItems), string (enum, const,
 * minLength, maxLength, format date/time/date-time/uuid), number (minimum
 * 0), integer (minimum, maximum, exclusive ones), boolean, null, type lists,
 * nullable, enum and const of any type, anyOf,
 * oneOf, $ref to #/$defs and #/definitions; {} and true: any JSON value.
 * {"type": "object"} alone is any object (response_format json_object).
 * PK_ERR_ARG naming the keyword and its place ("at /properties/age") for what
 * is not supported (pattern, bounds on numbers, ...) or not valid. With flags
 * PK_SCHEMA_LENIENT the keywords that only narrow values (pattern, bounds
 * on numbers, multipleOf, uniqueItems, unknown formats, ...) are ignored
 * instead of refused: for tool arguments, whose schemas the client wrote. */
enum { PK_SCHEMA_LENIENT = 1 };
int pk_json_schema_to_grammar(const char *schema, size_t len, int flags, char **gbnf, pk_error *err);
/* The same as rules to put into a larger grammar: the value's rule is named
 * name (letters, digits, '-'), every other rule name starts with "name-",
 * and there is no root. A tool call constrained to a function's arguments:
 *     root ::= "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " args "}\n</tool_call>"
 * followed by the rules of pk_json_schema_to_rules(parameters, ..., "args"). */
int pk_json_schema_to_rules(const char *schema, size_t len, int flags, const char *name, char **gbnf, pk_error *err);

/* Attach g (NULL: detach) to s, from its start, with no limit; g must have
 * been compiled for a model with s's vocabulary size (else PK_ERR_ARG). */
int pk_sampler_set_grammar(pk_sampler *s, pk_grammar *g, pk_error *err);
/* Finish within n more accepted tokens (n <= 0: no limit, the default):
 * a token is taken only if the grammar can still be completed in the
 * tokens left after it, counted along the closing walk (the longest token
 * on a shortest way, again and again); once that walk takes every token
 * left, only tokens that keep it in time are allowed (the model's best
 * ones first, else the walk's next token), so a run stopped at n tokens is
 * complete when the walk fits in them. */
void pk_sampler_grammar_limit(pk_sampler *s, int n);
enum {
    PK_GRAMMAR_NONE = 0,     /* no grammar attached */
    PK_GRAMMAR_OPEN = 1,     /* the output so far is incomplete */
    PK_GRAMMAR_CAN_END = 2,  /* complete; it may also go on */
    PK_GRAMMAR_MUST_END = 3, /* complete; only the end is allowed */
    PK_GRAMMAR_FAILED = 4,   /* a token it does not allow was accepted, or a limit was hit */
};
/* The grammar's state after the tokens accepted; *msg (if msg) says why for
 * PK_GRAMMAR_FAILED, else NULL. */
int pk_sampler_grammar_status(const pk_sampler *s, const char **msg);

/* ---- chat templates (text/chat.c) ---------------------------------------------
 * Built-in writers for the template families, chosen by name or detected
 * from the GGUF's tokenizer.chat_template by its markers (no Jinja is run):
 *   "chatml"  <|im_start|>ROLE\nCONTENT<|im_end|>\n      (Qwen and others)
 *   "llama3"  <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|>
 *   "gemma"   <start_of_turn>ROLE\nCONTENT<end_of_turn>\n (assistant -> "model",
 *             system text folded into the first user turn)
 *   "gemma4"  <|turn>ROLE\nCONTENT<turn|>\n (Gemma-4; assistant -> "model")
 *   "deepseek2", "deepseek3", "harmony" (gpt-oss): see src/text/chat.c
 * llama3, gemma and gemma4 trim white space around each content, as their
 * templates do. The generation prompt opens an assistant turn:
 * "<|im_start|>assistant\n", "<|start_header_id|>assistant<|end_header_id|>\n\n",
 * "<start_of_turn>model\n", "<|turn>model\n<|channel>thought\n<channel|>"
 * (gemma4: thinking off, as its template's default), ... */
typedef struct pk_chat_message {
    const char *role;       /* "system", "user", "assistant" (any non-empty role) */
    const char *content;
} pk_chat_message;

/* The raw tokenizer.chat_template of the model (inside the mapped file, NOT
 * NUL-terminated; valid while the model is loaded), its length in *len; NULL
 * (and *len = 0) if the model has none. */
const char *pk_chat_template_text(const pk_model *m, size_t *len);
/* The family of a template string ("chatml", "llama3", "gemma", "gemma4", ...),
 * or NULL when not recognised. */
const char *pk_chat_detect(const char *tmpl, size_t len);
/* The family detected from the model's template, or NULL (none, or unknown). */
const char *pk_chat_template_name(const pk_model *m);
/* The family pk_chat_format would use: name if given (non-NULL, non-empty;
 * PK_ERR_ARG if it is not one of the families), else the detected one.
 * PK_ERR_UNSUPPORTED when the model has no template, or one that is not
 * recognised (the message quotes its first characters). *out is static. */
int pk_chat_resolve(const pk_model *m, const char *name, const char **out, pk_error *err);
/* Format n messages with the template family called name (no model needed)
 * into *out (malloc'ed, NUL-terminated; free it). add_generation_prompt
 * appends the opening of the assistant's turn. No BOS is written. */
int pk_chat_apply(const char *name, const pk_chat_message *msgs, int n, int add_generation_prompt,
                  char **out, pk_error *err);
/* Format for model m, with the family of pk_chat_resolve(m, name). Tokenize
 * the result with add_special = 1 and parse_special = 1: the BOS token
 * (<|begin_of_text|>, <bos>) is added by the tokenizer when the model's GGUF
 * says so (gemma4's always adds it); for llama3/gemma/gemma4/deepseek models
 * whose tokenizer does not add it, its text
 * starts the result instead. Never both. */
int pk_chat_format(const pk_model *m, const char *name, const pk_chat_message *msgs, int n,
                   int add_generation_prompt, char **out, pk_error *err);

/* ---- Jinja chat templates (text/jinja*.c, model/template.c) -------------------
 * The model's own chat template run as Hugging Face's apply_chat_template
 * runs it (Python's Jinja2 with trim_blocks and lstrip_blocks, loop
 * controls, tojson as json.dumps(x, ensure_ascii=False), raise_exception,
 * strftime_now): the text equals Jinja2's byte for byte. What is supported
 * (the constructs real chat templates use) is in docs/chat-templates.md.
 * Templates and conversations are untrusted: every error is one line naming
 * the template line and column ("template line 12, column 8: 'dict object'
 * has no attribute 'role'"), and rendering stops at the limits of
 * pk_jinja_params (steps, nesting, output, memory) with such an error. */
typedef struct pk_jinja pk_jinja;

/* flags of pk_jinja_parse: Jinja2's own defaults (trim_blocks and
 * lstrip_blocks off) instead of Hugging Face's (on). */
enum { PK_JINJA_PLAIN_BLOCKS = 1 };

/* Parse a template once (text[0..len), copied); render it many times,
 * from any number of threads at once. PK_ERR_FORMAT for a syntax error
 * (unknown tag, filter or test, unclosed block, break outside a loop...),
 * PK_ERR_NOMEM. */
int pk_jinja_parse(const char *text, size_t len, int flags, pk_jinja **out, pk_error *err);
void pk_jinja_free(pk_jinja *t);

typedef struct pk_jinja_params {
    const char *bos_token, *eos_token; /* the variables bos_token / eos_token, unless the
                                          conversation sets them (NULL: not set) */
    int add_generation_prompt;         /* 0 / 1: the variable; -1: the conversation's,
                                          false if it has none */
    int64_t now;                       /* strftime_now(): this time (seconds since 1970,
                                          as UTC); 0: the clock, local time */
    size_t max_output;                 /* bytes of text (default 64 MiB) */
    size_t max_memory;                 /* bytes of values alive at once (default 256 MiB) */
    uint64_t max_steps;                /* expressions, statements, loop iterations and bytes
                                          / 32 handled (default 50 M, about 2 s) */
    int max_depth;                     /* nested evaluation, e.g. macro recursion (default 400) */
} pk_jinja_params;
pk_jinja_params pk_jinja_default_params(void);

/* Render t with a conversation: a JSON object whose keys are the template's
 * variables ({"messages": [...], "tools": [...], "add_generation_prompt":
 * true, "enable_thinking": false, ...any other}) or a JSON array (the
 * messages); NULL / len 0: no variables. Messages are passed as given
 * (OpenAI's form: role, content as a string or a list of parts,
 * tool_calls with function.arguments as a string or an object, ...).
 * *out is malloc'ed and NUL-terminated; *out_len (may be NULL) counts its
 * bytes. PK_ERR_FORMAT for invalid JSON or any template error, including
 * raise_exception(msg) (the message carries msg). */
int pk_jinja_render(const pk_jinja *t, const char *conversation, size_t len, const pk_jinja_params *p,
                    char **out, size_t *out_len, pk_error *err);

/* The model's side. pk_chat_jinja_parse: parse m's tokenizer.chat_template
 * (PK_ERR_UNSUPPORTED if it has none). pk_chat_jinja_params: defaults with
 * bos_token / eos_token the text of m's BOS / EOS tokens. pk_chat_jinja_render:
 * render with those, for tokenizing with add_special = 1 and parse_special =
 * 1: when m's tokenizer adds BOS itself, a BOS text the template wrote at
 * the start is dropped (as llama.cpp does), so there is one BOS, not two.
 * pk_chat_render_template: all in one (template_text NULL: the model's;
 * m may be NULL with a template_text: no BOS/EOS), conversation as in
 * pk_jinja_render (NUL-terminated), add_generation_prompt as in
 * pk_jinja_params. */
int pk_chat_jinja_parse(const pk_model *m, pk_jinja **out, pk_error *err);
void pk_chat_jinja_params(const pk_model *m, pk_jinja_params *p);
int pk_chat_jinja_render(const pk_model *m, const pk_jinja *t, const char *conversation, size_t len,
                         const pk_jinja_params *p, char **out, size_t *out_len, pk_error *err);
int pk_chat_render_template(const pk_model *m, const char *template_text, const char *conversation_json,
                            int add_generation_prompt, char **out, pk_error *err);

/* Splitting a generated assistant turn into its answer and its reasoning,
 * for the template family called name: harmony's analysis channel (its final
 * and commentary channels are the answer; headers and <|end|>/<|start|> are
 * dropped), gemma4's <|channel>thought ... <channel|>, else a leading
 * <think> ... </think> (Qwen3, DeepSeek-R1). Feed the text in pieces as it is
 * generated, split anywhere (final = 1 with the last piece, or an empty one):
 * a marker cut between pieces is held back until it is known, never shown.
 * Content and reasoning grow as text is decided (NUL-terminated; owned by
 * the splitter). Reasoning is trimmed of white space (not harmony bodies),
 * and so is the start of the answer after </think>. PK_ERR_ARG for an unknown name, PK_ERR_NOMEM. */
typedef struct pk_chat_reasoning pk_chat_reasoning;
int pk_chat_reasoning_new(const char *name, pk_chat_reasoning **out, pk_error *err);
void pk_chat_reasoning_free(pk_chat_reasoning *r);
int pk_chat_reasoning_feed(pk_chat_reasoning *r, const char *text, size_t n, int final);
const char *pk_chat_reasoning_content(const pk_chat_reasoning *r, size_t *len);
const char *pk_chat_reasoning_text(const pk_chat_reasoning *r, size_t *len);

/* ---- tool calls (text/toolcall.c; docs/tool-calls.md) ----------------------------
 * Splitting a generated assistant turn into its content and the tool calls
 * it writes, streamed as it is generated, for the format called name:
 *   "qwen3coder" <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n
 *                </function>\n</tool_call> (Qwen3.5, Qwen3-Coder). Each VALUE
 *                (less one newline each side) becomes a JSON number, true/false,
 *                null, object or array when the whole of it is one (and the
 *                tool's schema, pk_toolcall_set_tools, allows it), else a string.
 *   "hermes"     <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
 *                (Qwen3, Qwen2.5, Hermes). The two tagged formats are parsed
 *                alike: either body inside <tool_call>, or a bare <function=.
 *   "harmony"    [<|start|>assistant]<|channel|>commentary to=functions.NAME
 *                <|constrain|>json<|message|>{...}<|call|> (gpt-oss; also a
 *                header that starts the text, " to=functions.NAME<|channel|>...",
 *                going on from the prompt's <|start|>assistant)
 *   "deepseek"   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
 *                <｜tool▁call▁end｜>...<｜tool▁calls▁end｜> (DeepSeek-V3.1; V3/R1's
 *                function<｜tool▁sep｜>NAME\n```json\n{...}\n``` too)
 *   "llama3"     {"name": NAME, "parameters": {...}} as the message, or after
 *                <|python_tag|>; several separated by ';' or white space
 *   "gemma4"     <|tool_call>call:NAME{key:VALUE,...}<tool_call|> (Gemma-4): keys
 *                bare, strings between <|"|> markers (raw: no escapes), numbers,
 *                true/false, null (None, True, False too), nested {...} and
 *                [...]; turned into a JSON object as it streams, whatever the
 *                model wrote (a key without a value gets null, what is left open
 *                at the end is closed); a bare value that is no JSON number or
 *                literal is a string, and so is a number or boolean where the
 *                tool's schema wants a string (top-level parameters)
 * Feed the answer text: pk_chat_reasoning's content, except for harmony,
 * whose tool calls are known by their headers - feed it the raw text; its
 * content is then that text with the call messages taken out, for
 * pk_chat_reasoning to split.
 *
 * Feed the text in pieces, split anywhere (final = 1 with the last piece, or
 * an empty one); the result does not depend on where it was split. Content
 * before a possible call flows out at once; a marker cut between pieces is
 * held back until it is known. A call starts as soon as its name is known;
 * its arguments (a JSON text, as OpenAI's function.arguments) then grow by
 * the deltas sent, so the deltas concatenated are the final arguments.
 * Tolerant: text before, between and after calls is content (white space
 * before a call, between calls and after the last one at the end is
 * dropped); a call cut off at the end is completed with
 * what was read (a marker cut off at the end is dropped); arguments that are
 * not JSON are passed as written; what has no name is not a call and stays
 * content. A call must be recognised within 16 KiB of its opening marker,
 * else the marker is content; at most 1024 calls per message. */
typedef struct pk_toolcall pk_toolcall;
/* The format a chat template's text makes its model write ("qwen3coder",
 * "hermes", "harmony", "deepseek", "llama3", "gemma4"), by the markers it
 * renders tool calls with; NULL if none is recognised. Static string. */
const char *pk_toolcall_detect(const char *tmpl, size_t len);
/* A parser for format (PK_ERR_ARG naming the known ones if unknown). Call ids
 * are "call_" and 24 letters and digits, derived from id_seed and the call's
 * index: give each request its own seed. */
int pk_toolcall_new(const char *format, uint64_t id_seed, pk_toolcall **out, pk_error *err);
/* Optional, before feeding: the request's "tools" (a JSON array of
 * {"type": "function", "function": {"name", "parameters": SCHEMA}}, or of
 * {"name", "input_schema"}), whose parameter types decide qwen3coder values:
 * a "string" parameter stays a string ("123" is not 123; "null" is still
 * null), a "boolean" one reads True/FALSE too. NULL clears them. PK_ERR_ARG
 * if the text is not a JSON array. */
int pk_toolcall_set_tools(pk_toolcall *tc, const char *tools_json, size_t len, pk_error *err);
void pk_toolcall_free(pk_toolcall *tc);
/* Parse the next piece. PK_ERR_ARG after the final piece, PK_ERR_NOMEM. */
int pk_toolcall_feed(pk_toolcall *tc, const char *text, size_t n, int final);

/* What the last feed decided, in order (pk_toolcall_next); text deltas never
 * end inside a UTF-8 character unless the text did. */
enum {
    PK_TOOLCALL_CONTENT = 1,  /* text: more content */
    PK_TOOLCALL_START,        /* call index starts: text is its name, id its id */
    PK_TOOLCALL_ARGS,         /* text: more of call index's arguments */
    PK_TOOLCALL_END,          /* call index is complete */
};
typedef struct pk_toolcall_event {
    int kind;                 /* PK_TOOLCALL_* */
    int index;                /* the call (0, 1, ...); -1 for content */
    const char *text;         /* not NUL-terminated; valid until the next feed */
    size_t len;
    const char *id;           /* the call's id (NULL for content) */
} pk_toolcall_event;
/* The next event of the last feed into *ev: 1, or 0 when there is none. */
int pk_toolcall_next(pk_toolcall *tc, pk_toolcall_event *ev);

/* The content so far (NUL-terminated, owned by the parser). */
const char *pk_toolcall_content(const pk_toolcall *tc, size_t *len);
/* The calls so far (a call's arguments grow until its END event). */
int pk_toolcall_count(const pk_toolcall *tc);
typedef struct pk_toolcall_call {
    const char *id, *name;    /* NUL-terminated, owned by the parser */
    const char *arguments;    /* JSON text (as written when the model wrote no JSON), NUL-terminated */
    size_t arguments_len;
    int closed;               /* its text ended properly (0: cut off, or ended by other text) */
} pk_toolcall_call;
/* Call i into *out; PK_ERR_ARG out of range. */
int pk_toolcall_get(const pk_toolcall *tc, int i, pk_toolcall_call *out);
/* Whether the calls made satisfy an OpenAI tool_choice: NULL or "auto"
 * (anything), "none" (no call), "required" (at least one) or a function's
 * name (at least one, all to it). PK_ERR_FORMAT with a message naming what
 * was wanted and what the model called. */
int pk_toolcall_check_choice(const pk_toolcall *tc, const char *choice, pk_error *err);

/* The GBNF grammar (malloc'ed, NUL-terminated; free it) that makes a model
 * call a tool in format's way of writing calls (the names above), for
 * tool_choice choice: "required" (one or more calls, to any of the tools)
 * or a function's name (calls to it only). tools_json (len bytes) is the
 * request's "tools", as pk_toolcall_set_tools reads it; each call's
 * arguments follow its tool's "parameters" schema (pk_json_schema_to_rules;
 * flags PK_SCHEMA_LENIENT passed on). qwen3coder writes string values raw:
 * their minLength, maxLength, format and pattern are refused, or ignored
 * with PK_SCHEMA_LENIENT. gemma4 writes the arguments in its own syntax
 * (the schema's shape, keys in the template's order; a length-bounded
 * string has no '<'); its parameters must be an object schema. flags also: PK_TOOLCALL_ONE_CALL exactly one call
 * (parallel_tool_calls false; harmony always: <|call|> ends the turn),
 * PK_TOOLCALL_MAY_THINK the model may reason first (<think>...</think>,
 * harmony's analysis message), PK_TOOLCALL_THINKING the output starts
 * inside the reasoning (the prompt ended with <think>). Compile it with
 * pk_grammar_new from the first generated token, and parse the output with
 * pk_toolcall_set_tools given the same tools. PK_ERR_ARG with a one-line
 * message for tools that are not a JSON array, a tool without a name or
 * with one that cannot be written, an unknown function, choice "auto" or
 * "none", a schema the converter refuses (docs/tool-calls.md). */
enum { PK_TOOLCALL_ONE_CALL = 2, PK_TOOLCALL_MAY_THINK = 4, PK_TOOLCALL_THINKING = 8 };
int pk_toolcall_grammar(const char *format, const char *tools_json, size_t len, const char *choice, int flags,
                        char **gbnf, pk_error *err);

/* A short human-readable CPU name into buf[cap] (always NUL-terminated, no
 * tabs or control characters): /proc/cpuinfo's "model name" (x86) or, on
 * AArch64 Linux, "Hardware"/"Model" lines, else "aarch64 (implementer 0x41
 * part 0xd0c)"; machdep.cpu.brand_string on Apple; "unknown" when nothing
 * says. */
void pk_cpu_name(char *buf, size_t cap);

/* ---- Quantization (src/offline/quantize.c) -------------------------------
 * Convert a GGUF model to another weight type mix ("preset"),
 * as llama.cpp's llama-quantize does, writing a new GGUF file.
 *
 * Presets (llama.cpp names, case-insensitive): F32 F16 BF16 Q8_0 Q6_K Q5_K_M
 * Q5_K_S Q5_0 Q5_1 Q4_K_M Q4_K_S Q4_0 Q4_1 Q3_K_L Q3_K_M Q3_K_S Q2_K IQ4_XS
 * IQ4_NL IQ3_M IQ3_S IQ3_XS IQ3_XXS IQ2_M IQ2_S IQ2_XXS IQ2_XS IQ1_S IQ1_M
 * (IQ3_XXS and the ones after it need an importance matrix with an entry for
 * every tensor of theirs of the types IQ3_XXS, IQ2_* and IQ1_*, as
 * llama-quantize does; token embeddings Q2_K - IQ3_S for IQ3_XXS, IQ2_M,
 * IQ2_S -, output Q5_K, and the IQ1 presets' attn_output IQ2_XXS), and pocket's
 * MoE-aware MOE_Q2_K, MOE_IQ2_XXS and MOE_IQ1_M: routed-expert tensors
 * (*_exps) at Q2_K / IQ2_XXS / IQ1_M; attention, shared experts, dense FFNs,
 * token embeddings and output at Q6_K, with attn_v and shared experts at
 * Q8_0; router (ffn_gate_inp) and norms kept as they are (MOE_IQ2_XXS and
 * MOE_IQ1_M need an importance matrix entry for every routed-expert tensor).
 *
 * For the llama.cpp presets each tensor gets the type llama-quantize picks:
 * 1-D tensors, norms and the router keep their input type; output.weight
 * (and a tied token_embd) goes to Q6_K; the *_M presets give attn_v and
 * ffn_down more bits on some layers; IQ2_XXS and IQ2_XS put output.weight at
 * Q5_K, token_embd at Q2_K, attn_v at Q4_K (Q2_K when the model has fewer
 * than 4 experts and fewer than 4 query heads per kv head), the first eighth
 * of the ffn_down tensors at Q2_K, attn_k at Q4_K and attn_output at Q5_K in
 * 8-expert models (IQ2_S, IQ2_M: IQ3_S where those have Q2_K, and
 * attn_output IQ3_S); the IQ3 presets follow llama-quantize's rules for
 * attn_q/k/v/output, ffn_down and (IQ3_XS) ffn_gate/up; rows whose length
 * is not a multiple of the block size fall back (Q2_K/Q3_K -> Q4_0, Q4_K ->
 * Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS and the IQ1/IQ2/IQ3 types ->
 * IQ4_NL, then F16). Tensors are written in
 * llama-quantize's order (by layer, then by name). With the same input,
 * preset and no importance matrix the tensor data equals llama-quantize's
 * bit for bit, given reference quantizers that match ggml's; the i-quant
 * tensors below 4 bits equal llama-quantize's with the same importance
 * matrix.
 * MXFP4 tensors (gpt-oss experts) are copied unchanged under every preset
 * (llama-quantize would dequantize and re-quantize them); an override that
 * names one converts it like any other tensor.
 */
typedef struct pk_quantize_params {
    const char *preset;              /* target mix, e.g. "Q4_K_M" (required) */
    int n_threads;                   /* <= 0: all online cores */
    /* Per-tensor overrides "PATTERN=TYPE" (llama-quantize --tensor-type),
     * checked in order, the first match wins. PATTERN is searched anywhere in
     * the tensor name; '*' matches any run of characters, '?' one character,
     * a leading '^' / trailing '$' anchors it to the start / end of the name;
     * other characters are literal ('.' too). TYPE is a type name (q4_k,
     * Q8_0, f16, ...). Overrides apply only to tensors a preset may quantize
     * (not norms, 1-D tensors, the router); each must match at least one. */
    const char *const *overrides;
    int n_overrides;
    /* Importance matrix hook (may be NULL): for a tensor about to be
     * quantized, return ne[0] * ne[2] floats (per expert, per column), or
     * NULL for none; *n receives the count. */
    const float *(*imatrix)(void *ud, const char *tensor_name, int64_t *n);
    void *imatrix_ud;
    /* Called before each tensor is processed: i in [0, n), the tensor's name
     * and the type it is written as. */
    void (*progress)(void *ud, int i, int n, const char *name, const char *type);
    void *progress_ud;
    /* Only decide the types (progress is called for each tensor); read the
     * input, write nothing, and do not require the quantizers to exist. */
    int dry_run;
} pk_quantize_params;

pk_quantize_params pk_quantize_default_params(void);

/* Quantize the GGUF file `in` into `out` (written as out.tmp, renamed on
 * success; out is left untouched on failure). Metadata is copied, with
 * general.file_type set to the preset's llama.cpp ftype number,
 * general.quantization_version = 2, and pocket.quantize.preset /
 * pocket.quantize.overrides recording the request.
 * Errors: PK_ERR_ARG (unknown preset, bad override, override matching
 * nothing), PK_ERR_IO / PK_ERR_FORMAT (reading in, writing out: the message
 * names the file), PK_ERR_UNSUPPORTED (a tensor type with no reference
 * quantizer or dequantizer yet, split files; names the type and tensor),
 * PK_ERR_NOMEM. */
int pk_quantize_file(const char *in, const char *out, const pk_quantize_params *p,
                     pk_error *err);

/* Number of presets, and the name of preset i (NULL when out of range), for
 * help texts. */
int pk_quantize_n_presets(void);
const char *pk_quantize_preset_name(int i);

/* ---- Importance matrices (src/offline/imatrix.c) ---------------------------
 * Importance matrices: per weight matrix and per input column,
 * the mean square of the activations that column multiplies, collected
 * while the model runs over calibration text, then used to weight the
 * quantization error (pk_quantize_params.imatrix).
 *
 * Collection follows llama.cpp's llama-imatrix: every matrix-vector product
 * of a tensor whose name starts with "blk." is recorded (attention, router,
 * dense and shared FFNs, experts); output.weight only when asked
 * (process_output); token embeddings never (they are row lookups). For a
 * tensor with ne[2] > 1 (merged experts, ffn_*_exps) statistics are kept per
 * expert, and only the experts a token was routed to see it: counts[e] is
 * the number of tokens expert e processed. Dense tensors have one count.
 *
 * File format: llama.cpp's GGUF imatrix (what llama-imatrix writes by default
 * and llama-quantize --imatrix reads), so files go both ways:
 *   general.type        string  "imatrix"
 *   imatrix.datasets    [string] calibration files
 *   imatrix.chunk_count u32     chunks processed
 *   imatrix.chunk_size  u32     tokens per chunk
 * and per collected tensor NAME, in name order:
 *   NAME.in_sum2  F32 [ne0, n_mat]  sum over tokens of x[j]^2
 *   NAME.counts   F32 [1, n_mat]    tokens seen (per expert)
 *   NAME.in_sum   F32 [ne0, n_mat]  sum of x[j] (newer llama.cpp; optional
 *                                   when reading)
 * (trailing dimensions of 1 are dropped from n_dims, as ggml writes them).
 *
 * Lookup (the quantizer's view): mean square per column, in_sum2 / count,
 * per expert; an expert with count 0 (no calibration token was routed to it)
 * gets importance 1 for every column - uniform, i.e. the plain weighted
 * error without column preferences, exactly what llama-quantize does.
 */
typedef struct pk_imatrix pk_imatrix;

/* An empty matrix (to collect into). */
int pk_imatrix_new(pk_imatrix **out, pk_error *err);
void pk_imatrix_free(pk_imatrix *im);

/* Start recording every matrix-vector product of context c into im (replaces
 * any observer c had); process_output also records output.weight. im must
 * outlive the attachment. Detach before freeing either. */
void pk_imatrix_attach(pk_imatrix *im, pk_context *c, int process_output);
void pk_imatrix_detach(pk_context *c);
/* Collection cannot fail inside the forward pass; a failure (out of memory,
 * a non-finite activation, a tensor seen with two different shapes) is kept
 * and reported here: PK_OK, or the first error with its message. */
int pk_imatrix_status(const pk_imatrix *im, pk_error *err);

/* Metadata written by pk_imatrix_save: one more calibration file name, and
 * the chunks processed / their size (chunk_count adds to what was loaded). */
int pk_imatrix_add_dataset(pk_imatrix *im, const char *name, pk_error *err);
void pk_imatrix_set_chunks(pk_imatrix *im, uint32_t chunk_count, uint32_t chunk_size);

/* Write im as a GGUF imatrix file (PATH.tmp then renamed). PK_ERR_ARG if
 * nothing was collected, PK_ERR_IO naming the file. */
int pk_imatrix_save(const pk_imatrix *im, const char *path, pk_error *err);

/* Read a GGUF imatrix file (llama.cpp's or ours). Entries for some of a
 * model's tensors may be missing (lookup then returns NULL for them); an
 * entry's in_sum is optional; old-style files with one count for a 3-D
 * entry have it broadcast to every expert. Errors: PK_ERR_IO (unreadable),
 * PK_ERR_FORMAT (not GGUF, general.type not "imatrix", an entry with in_sum2
 * but no counts or the reverse, wrong tensor type, sizes that do not match,
 * negative or non-finite counts), naming the file and the tensor. */
int pk_imatrix_load(const char *path, pk_imatrix **out, pk_error *err);

/* The importances of a tensor, in the shape pk_quantize_params.imatrix wants:
 * ne0 * n_mat floats (expert-major), *n set to that count; NULL (and *n = 0)
 * when the matrix has no entry for tensor_name. imatrix is a pk_imatrix *.
 * The array stays valid until pk_imatrix_free; not thread-safe against
 * concurrent collection. */
const float *pk_imatrix_lookup(void *imatrix, const char *tensor_name, int64_t *n);

/* ---- inspection ------------------------------------------------------------ */
int pk_imatrix_n_entries(const pk_imatrix *im);
/* Entry i (in name order): its tensor name, columns, matrices (experts) and
 * counts (n_mat values). Returns PK_ERR_ARG for i out of range. */
int pk_imatrix_entry(const pk_imatrix *im, int i, const char **name, int64_t *ne0,
                     int64_t *n_mat, const int64_t **counts);
uint32_t pk_imatrix_chunk_count(const pk_imatrix *im);
uint32_t pk_imatrix_chunk_size(const pk_imatrix *im);

/* ---- Expert pruning (src/offline/prune.c) ---------------------------------
 * Keep K of a MoE model's routed experts in each layer, chosen by a saliency
 * measured while the model runs over calibration text, and write the smaller
 * model as a new GGUF file (docs/pruning.md).
 *
 * Saliency of expert e of layer l, over the calibration tokens routed to it:
 *   PK_SALIENCY_REAP  the mean of |w| ||y||_2, w the token's router weight for
 *                     e as the layer applies it (after top-k renormalisation
 *                     and scales), y the expert's output: the mean size of
 *                     what e adds to the layer's output (REAP's
 *                     router-weighted expert activation); 0 for an expert no
 *                     token reached
 *   PK_SALIENCY_FREQ  the number of tokens routed to e
 * A layer keeps its K largest (ties: the lower index). The sums are taken in
 * the order the decoding thread meets them: the same text, model and kernels
 * give the same ranking at any thread count.
 */
typedef struct pk_saliency pk_saliency;
enum { PK_SALIENCY_REAP = 0, PK_SALIENCY_FREQ = 1 };

/* Empty counters for m's routed experts. PK_ERR_UNSUPPORTED (naming the
 * file and architecture) when m has none. */
int pk_saliency_new(const pk_model *m, pk_saliency **out, pk_error *err);
void pk_saliency_free(pk_saliency *s);
/* Record every routed expert context c runs (c must be of s's model:
 * PK_ERR_ARG otherwise). Detach before freeing either. */
int pk_saliency_attach(pk_saliency *s, pk_context *c, pk_error *err);
void pk_saliency_detach(pk_context *c);
/* PK_OK, or the first collection failure (a non-finite expert output). */
int pk_saliency_status(const pk_saliency *s, pk_error *err);
/* Routed experts of layer il (0: none: a dense layer, or il out of range);
 * tokens routed to expert e; its score by kind (PK_SALIENCY_*). */
int pk_saliency_n_expert(const pk_saliency *s, int il);
int64_t pk_saliency_tokens(const pk_saliency *s, int il, int e);
double pk_saliency_score(const pk_saliency *s, int kind, int il, int e);
/* Layer il's experts by score, best first, into order[0..n_expert).
 * PK_ERR_NOMEM or PK_OK. */
int pk_saliency_rank(const pk_saliency *s, int kind, int il, int *order);
/* The keep mask for pk_prune_params: per routed layer the keep[il] best
 * experts by kind (keep[] of n_layer entries; ignored for dense layers).
 * mask has n_layer x n_expert bytes, n_expert as pk_model_get_info gives it
 * (the most any layer has). PK_ERR_ARG naming the layer when a count is not
 * in 1..its experts. */
int pk_saliency_select(const pk_saliency *s, int kind, const int *keep, uint8_t *mask, pk_error *err);

/* Parse a per-layer keep spec, "LAYERS:K[,LAYERS:K...]" with LAYERS a layer
 * number or a range "A-B" (blk.N numbering, 0-based, inclusive): keep[il] = K
 * for each layer named; the others are left as they are. PK_ERR_ARG, naming
 * the item, for a malformed item, a layer outside 0..n_layer-1, a range that
 * runs backwards, K = 0, or a layer named twice. */
int pk_prune_parse_keep(const char *spec, int n_layer, int *keep, pk_error *err);

typedef struct pk_prune_params {
    /* [n_layer x n_expert] (n_expert: pk_model_info's): nonzero keeps expert
       e of layer il; bytes of dense layers and past a layer's experts must
       be 0. Every routed layer keeps at least the top-k. */
    const uint8_t *keep;
    int n_expert_used;       /* top-k written (<arch>.expert_used_count); 0: the model's */
    const char *saliency;    /* recorded as pocket.prune.saliency (NULL: not written) */
    const char *calibration; /* recorded as pocket.prune.calibration (NULL: not written) */
} pk_prune_params;

/* Whether m can be pruned: PK_OK, or PK_ERR_UNSUPPORTED naming the file and
 * the reason (no routed experts; MTP blocks, whose experts never run;
 * expert groups, which pruning would unbalance). */
int pk_prune_check(const pk_model *m, pk_error *err);

/* Write m with only the kept experts to out (out.tmp, renamed on success).
 * Every tensor a block kind marks as holding experts (pk_tensor_spec
 * experts: the merged expert matrices, the router's rows, per-expert biases
 * and scales) loses the dropped experts' slices - whole rows or matrices, so
 * types are kept, quantized ones too; everything else is copied byte for
 * byte. Keys: <arch>.expert_count becomes the kept count (an array of one
 * per layer when layers keep different counts: pocket loads that, llama.cpp
 * does not), <arch>.expert_used_count n_expert_used if set, and
 * pocket.prune.experts (u32 array: the kept experts' indices in m, layer by
 * layer), pocket.prune.saliency and .calibration are added.
 * Errors: PK_ERR_UNSUPPORTED (pk_prune_check's; a tensor of a pruned layer
 * that pocket does not read), PK_ERR_ARG (a bad mask,
 * a layer keeping fewer than the top-k, n_expert_used out of 1..64, out
 * naming the input), PK_ERR_IO (writing out), PK_ERR_NOMEM. */
int pk_prune_file(const pk_model *m, const char *out, const pk_prune_params *p, pk_error *err);

/* ---- Other builds of a model (src/offline/build.c) --------------------------
 * What another build of a loaded model would take, computed from its tensor
 * shapes without writing or reading any weights: its tensors at the types
 * `pocket quantize` would give them under a preset (the quantizer's own
 * planner, as pk_quantize_file decides them, no overrides), and/or keep[il]
 * of each layer's routed experts kept (`pocket prune`; pruned first, then
 * quantized: the planner sees the pruned expert count). Bytes are counted as
 * pk_model_info.bytes_per_token and the memory plan (pk_model_plan) count
 * them for a loaded file, for the context m's plan was made for (its n_ctx,
 * cache types and checkpoints).
 */
typedef struct pk_build_params {
    const char *preset;  /* a pocket quantize preset (pk_quantize_preset_name); NULL: m's types */
    int imatrix;         /* quantized with an importance matrix (some rules differ); a preset
                            that needs one is planned with one whatever this says */
    const int *keep;     /* [n_layer] routed experts kept per layer (dense layers' entries are
                            ignored); NULL: all */
} pk_build_params;

typedef struct pk_build_size {
    uint64_t file_bytes;      /* m's header + the build's tensor data, aligned as written (the
                                 keys quantize / prune add are not counted: under 1 KiB, and
                                 4 bytes per kept expert) */
    uint64_t bytes_per_token; /* weight bytes read per decoded token */
    uint64_t resident_bytes;  /* the plan's resident weights (all but the routed experts) */
    uint64_t expert_bytes;    /* the routed experts */
    uint64_t context_bytes;   /* the planned context (KV cache, states, buffers: the
                                 activation buffers follow the build's types) */
    uint64_t need_bytes;      /* resident + experts + context + the plan's 64 MiB margin: the
                                 least budget (pk_model_params.mem) under which the whole build
                                 stays in memory, no expert read from the file */
    int imatrix;              /* planned as quantized with an importance matrix */
    int imatrix_needed;       /* the preset needs one (pocket quantize --imatrix) */
} pk_build_size;

/* PK_OK, or PK_ERR_ARG (an unknown preset, naming the known ones; a keep
 * count out of 1..the layer's experts or below the top-k, naming the layer;
 * keep for a model without routed experts), PK_ERR_UNSUPPORTED (a model
 * pk_prune_check refuses, when keep is set; a quantizer rule that cannot
 * place a tensor), PK_ERR_NOMEM. */
int pk_build_estimate(const pk_model *m, const pk_build_params *p, pk_build_size *out, pk_error *err);

#ifdef __cplusplus
}
#endif
#endif
