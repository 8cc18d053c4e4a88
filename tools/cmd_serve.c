/* cmd_serve.c - `pocket serve`: an OpenAI-compatible HTTP server on one model.
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions (streamed as
 * server-sent events or not), POST /apply-template, the other APIs' routes
 * (ROUTES), GET /v1/models, GET /health, GET /metrics (Prometheus text) and
 * GET / (a self-contained chat page, tools/webui.h); GET /v1/models/{id},
 * llama-server's /tokenize, /detokenize, /props and /slots, CORS and the
 * access log (tools/serve_misc.c). One model is served: a request may name
 * any model (--alias sets the id answers carry).
 *
 * Threads. libmicrohttpd runs one thread per connection. A request is parsed
 * and validated there (JSON, limits, tokenized prompt, sampler), then handed
 * to a bounded FIFO as a `job`. --parallel worker threads ("slots"), each
 * owning a pk_context on the shared pk_model, take jobs from it and append the
 * generated text to the job (the queue stays FIFO; which idle slot takes
 * its head is the prompt cache's choice, below). The connection thread waits on the job (a
 * non-streamed reply is built when it is done; a streamed one sends each new
 * piece of text as it appears) and polls its socket meanwhile, so a client
 * that goes away cancels its job within ~50 ms. Everything shared is guarded
 * by the one server mutex; a job is reference-counted by its connection and
 * its worker.
 *
 * APIs. Every completion endpoint is a `serve_api` (tools/serve_api.h): its
 * request body is translated into an OpenAI chat (or text) completion
 * request, which parse_request turns into a job; what the job produces is
 * built as OpenAI objects (chat.completion, chat.completion.chunk) and
 * translated back (api->response, api->stream_chunk), refusals with
 * api->error. OpenAI's own endpoints are the identity translation
 * (tools/serve_openai.c). The route table maps a path to its serve_api.
 *
 * Limits (each answered with the API's error object): request body size
 * (413), malformed JSON or fields (400), parameters of OpenAI's API that are
 * not implemented (400 unsupported_parameter, never silently ignored),
 * missing or wrong API key (401, compared in constant time), queue full
 * (503). The request line and headers must fit in HEADER_MEMORY (else
 * libmicrohttpd answers 414 / 431 itself); a connection idle or trickling
 * for --timeout seconds is closed. Memory per request is bounded by the body
 * limit and the context size; connections are capped.
 *
 * Reasoning. A chat answer is split as llama.cpp's server does by default
 * (pk_chat_reasoning): gpt-oss's analysis channel, a leading <think> ...
 * </think> and Gemma-4's thought channel go to message.reasoning_content
 * (streamed as delta.reasoning_content), the rest to content, the channel
 * markers to neither. "reasoning_format": "none" returns the text as
 * generated; "auto" and "deepseek" are the default.
 *
 * Chat templates. A chat is rendered by the model's own Jinja template
 * (or --chat-template-file), parsed once at start, with the request's
 * messages (normalised: text parts joined, tool call arguments parsed into
 * objects), tools, chat_template_kwargs and reasoning_effort; the built-in
 * formatters (--chat-template NAME) remain for models without one. The
 * answer is split into reasoning, content and tool calls (outsplit:
 * pk_chat_reasoning, pk_toolcall in the template's format), streamed as
 * OpenAI's deltas. Grammars (response_format, "grammar") are compiled once
 * per text and kept; logprobs are recorded per token by the worker; n > 1
 * is n jobs of one request, the first their leader (one condition variable
 * wakes the connection for all).
 *
 * Prompt cache. A slot keeps what it processed. What it can keep of a
 * request's prompt is the longest common prefix, as far as
 * pk_context_reachable can go back (any position for attention layers, a
 * checkpoint or the end for Gated DeltaNet ones), and never the prompt's
 * last token (its logits are needed). A request goes to the idle slot that
 * costs least (choose_slot_locked: tokens to process plus another
 * conversation's tokens dropped); the slot is cut back and only the rest is
 * processed. Models with recurrent
 * layers take checkpoints while processing a prompt (plan_checkpoints): at
 * its end, where its last messages start, and every CKPT_EVERY tokens.
 * Before a slot's contents are replaced by another conversation's, its
 * state goes to the store of serve_cache.c (--cache-ram, --cache-dir),
 * which a later request loads when it spares more than any slot.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#include "cli.h"
#include "serve_api.h"
#include "serve_anthropic.h"
#include "serve_cache.h"
#include "serve_misc.h"
#include "serve_ollama.h"
#include "webui.h"

/* The other APIs' translators, routed when their files are built in. */
extern const serve_api serve_api_anthropic __attribute__((weak));
extern const serve_api serve_api_responses __attribute__((weak));
extern const serve_api serve_api_ollama_chat __attribute__((weak));
extern const serve_api serve_api_ollama_generate __attribute__((weak));
json_t *anthropic_count_request(const json_t *body, const serve_info *si, api_error *e) __attribute__((weak));
json_t *ollama_tags(const serve_info *si) __attribute__((weak));

#ifndef POCKET_VERSION
#define POCKET_VERSION "dev"
#endif

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result;
#else
typedef int mhd_result;
#endif

#define MAX_STOP 16             /* stop strings per request */
#define MAX_STOP_LEN 512        /* bytes per stop string */
#define MAX_TOKENS_ABSURD 1000000
#define PREFILL_CHUNK 256       /* prompt tokens per pk_decode (cancel granularity) */
#define WAIT_MS 50              /* how often a waiting connection polls its socket */
#define HEADER_MEMORY 32768     /* per-connection buffer: request line + headers beyond it get
                                   libmicrohttpd's 414 / 431 (a fixed page, nothing quoted) */
#define MIN_LOAD_GAIN 16        /* a stored state is loaded when that costs this many tokens
                                   less than the best idle slot (choose_slot_locked) */
#define N_STARTS 3              /* message starts checkpointed: the generation prompt's, the
                                   last message's and the one's before */
#define CKPT_EVERY 1024         /* and every this many tokens of a long prompt */
#define MAX_CKPT 256            /* --ctx-checkpoints bound */
#define MAX_TOP_LOGPROBS 20     /* top_logprobs bound (OpenAI's) */
#define MAX_N 16                /* choices per request (n) */
#define MAX_GRAMMARS 16         /* compiled grammars kept (by their text) */

/* ---- server state ------------------------------------------------------------------ */

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

/* A generated token's log-probability and the most likely ones in its place. */
typedef struct tok_lp {
    int32_t id;
    float lp;
    int n_top;
    int32_t top_id[MAX_TOP_LOGPROBS];
    float top_lp[MAX_TOP_LOGPROBS];
} tok_lp;

/* A compiled grammar, kept by its GBNF text (compiling costs ~20 ms at a
 * 248k vocabulary); used by one job at a time (its caches grow as it runs). */
typedef struct grammar_entry {
    char *text;
    pk_grammar *g;
    int busy;
    uint64_t used;
} grammar_entry;

typedef struct job {
    /* Set by the connection thread before submission; read-only afterwards. */
    int32_t *prompt;
    int n_prompt;
    int max_tokens;             /* < 0: until end of text or a full context */
    pk_sampler *sampler;        /* owned */
    char *stop[MAX_STOP];
    int n_stop;
    size_t stop_maxlen;
    int stop_user;              /* stop[0..stop_user) are the request's (then the template's end) */
    int stop_hit;               /* the stop string that ended the text (-1: none) */
    int chat, stream, include_usage;
    int split;                  /* chat: answer and reasoning apart (pk_chat_reasoning) */
    int starts[N_STARTS];       /* where the last messages start in prompt (0: not known) */
    int think_open;             /* the prompt ends inside a <think> block (the template opened it) */
    int reasoning_budget;       /* reasoning tokens before the close marker is forced (< 0: none) */
    const char *toolfmt;        /* tools given: the format the model writes calls in (NULL: no tools) */
    char *tools_json;           /* the request's tools (pk_toolcall_set_tools) */
    char tool_choice[128];      /* "" / "auto", "none", "required" or a function's name */
    uint64_t tc_seed;           /* call ids */
    int one_call;               /* parallel_tool_calls false: the first call only */
    int logprobs, top_logprobs; /* record log-probabilities (top_logprobs of them per token) */
    struct grammar_entry *grammar;  /* the grammar attached to sampler (NULL: none) */
    int index;                  /* its choice (n > 1) */
    char id[48];
    long created;
    /* Shared; guarded by server.mu. */
    int refs;
    int state;
    int cancel;
    char *text;                 /* generated bytes, stop string cut */
    size_t len, cap;
    size_t released;            /* text[0..released) can be shown (no partial stop/UTF-8) */
    int n_gen;
    int n_cached;               /* prompt tokens not processed (the slot held them) */
    char from[80];              /* where they came from when not the slot: "RAM", a file name */
    const char *finish;         /* "stop" / "length" when done, NULL if cancelled/failed */
    char err[512];              /* non-empty: generation failed */
    struct tok_lp *lp;          /* logprobs: one per generated token */
    int n_lp, cap_lp;
    int n_reasoning;            /* tokens generated inside the reasoning block */
    double t_submit, t_start, t_first, t_end;
    double prompt_ms, gen_ms;   /* its prompt's processing and its generation (timings) */
    pthread_cond_t cv;
    pthread_cond_t *wake;       /* signalled on new text and when done: cv, or the leader's */
    struct job *leader;         /* n > 1: the request's first choice (a reference), whose cv is
                                   signalled for all */
    int penalties;              /* presence / frequency penalties: the prompt is not counted */
    struct job *next;
} job;

typedef struct slot {
    pthread_t thread;
    pk_context *ctx;
    int index;
    /* under server.mu */
    job *job;                   /* given to it, not done yet (NULL: idle) */
    uint64_t entry;             /* with it: a stored state to load first (0: none) */
    uint64_t last_used;         /* S.clock when it was last given a job (least recently used) */
    int last_prompt;            /* prompt length of its latest job (or of the state loaded) */
    uint64_t st_tokens, st_bytes;   /* last pk_context_stats */
    int st_ckpts;               /* checkpoints it holds */
    int held;                   /* tokens it holds, as of its last stats (/slots) */
} slot;

static struct server {
    pk_model *model;
    char model_id[256];         /* the id it serves: --alias, else the file name */
    serve_cors cors;            /* --cors */
    char api_key[512];
    int has_api_key;
    int quiet;                  /* no line per request on stderr */
    pk_sampler_params sp;       /* defaults for what a request does not set */
    int seed_given;             /* --seed: the default seed instead of a fresh one */
    const char *chat_template;  /* the built-in family in use (also for a Jinja template: its
                                   end marker and reasoning split) */
    pk_jinja *jinja;            /* the chat template run (NULL: the built-in formatter) */
    const char *template_text;  /* its text (for the tool-call format), NULL if none */
    size_t template_len;
    const char *toolfmt;        /* the tool-call format of the template (NULL: not known) */
    serve_info info;            /* what the translators see */
    grammar_entry grammars[MAX_GRAMMARS];   /* under mu */
    int n_ctx, n_parallel, n_queue, n_threads;
    int n_ckpt, recurrent;      /* --ctx-checkpoints; the model has recurrent layers */
    uint64_t ckpt_bytes;        /* bytes of one checkpoint */
    pcache *cache;              /* --cache-ram / --cache-dir (NULL: neither) */
    int cache_ram;              /* states go to RAM */
    size_t max_body;
    long created;

    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    job *head, *tail;           /* queued jobs */
    int n_waiting, n_running;
    int shutdown;
    char fatal[512];            /* non-empty: why the server stops by itself (model file changed) */
    slot *slots;
    uint64_t id_counter, clock;

    /* metrics (under mu) */
    uint64_t status_count[600];
    uint64_t prompt_tokens_total, gen_tokens_total, cancelled_total, rejected_busy_total;
    uint64_t prompt_tokens_cached_total;
    double gen_seconds_total, prompt_seconds_total;
} S;

static void grammar_release_locked(grammar_entry *g);

static void job_unref_locked(job *j) {
    if (--j->refs > 0) return;
    free(j->prompt);
    pk_sampler_free(j->sampler);
    if (j->grammar) grammar_release_locked(j->grammar);
    free(j->tools_json);
    free(j->lp);
    job *leader = j->leader;
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->text);
    pthread_cond_destroy(&j->cv);
    free(j);
    if (leader) job_unref_locked(leader);
}

static void job_unref(job *j) {
    pthread_mutex_lock(&S.mu);
    job_unref_locked(j);
    pthread_mutex_unlock(&S.mu);
}

/* ---- compiled grammars ------------------------------------------------------------- */

/* The grammar of gbnf for a job: a kept one of the same text that no job
 * uses, else compiled now and kept (the least recently used idle one
 * leaves when all MAX_GRAMMARS places are taken; when all are in use, it is
 * the job's alone). NULL with e filled (400 naming param) when it does not
 * compile. */
static grammar_entry *grammar_acquire(const char *gbnf, const char *param, api_error *e) {
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < MAX_GRAMMARS; i++) {
        grammar_entry *g = &S.grammars[i];
        if (g->text && !g->busy && !strcmp(g->text, gbnf)) {
            g->busy = 1;
            g->used = ++S.clock;
            pthread_mutex_unlock(&S.mu);
            return g;
        }
    }
    pthread_mutex_unlock(&S.mu);
    pk_grammar *pg = NULL;
    pk_error err = {0};
    if (pk_grammar_new(S.model, gbnf, NULL, &pg, &err)) {
        api_fail(e, err.code == PK_ERR_NOMEM ? 500 : 400, param, "'%s': %s", param, err.msg);
        snprintf(e->code, sizeof e->code, "%s", err.code == PK_ERR_NOMEM ? "" : "invalid_grammar");
        return NULL;
    }
    char *text = strdup(gbnf);
    if (!text) {
        pk_grammar_free(pg);
        api_fail(e, 500, NULL, "out of memory");
        return NULL;
    }
    pthread_mutex_lock(&S.mu);
    grammar_entry *g = NULL;
    for (int i = 0; i < MAX_GRAMMARS; i++) {
        grammar_entry *c = &S.grammars[i];
        if (c->busy) continue;
        if (!c->text) { g = c; break; }
        if (!g || c->used < g->used) g = c;
    }
    if (g) {
        free(g->text);
        pk_grammar_free(g->g);
    } else if (!(g = calloc(1, sizeof *g))) {
        pthread_mutex_unlock(&S.mu);
        free(text);
        pk_grammar_free(pg);
        api_fail(e, 500, NULL, "out of memory");
        return NULL;
    }
    g->text = text;
    g->g = pg;
    g->busy = 1;
    g->used = ++S.clock;
    pthread_mutex_unlock(&S.mu);
    return g;
}

/* The job that used g is gone (mu held; the sampler that used it is freed). */
static void grammar_release_locked(grammar_entry *g) {
    if (g >= S.grammars && g < S.grammars + MAX_GRAMMARS) { g->busy = 0; return; }
    free(g->text);
    pk_grammar_free(g->g);
    free(g);
}

/* Wait on cv for at most ms milliseconds (mu held). */
static void timed_wait(pthread_cond_t *cv, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, &S.mu, &ts);
}

/* ---- text: UTF-8 and stop strings ------------------------------------------------------ */

/* Length of the longest prefix of s[0..n) that does not end inside a UTF-8
 * sequence that could still be completed by more bytes. */
static size_t utf8_complete_len(const char *s, size_t n) {
    size_t back = 0;
    while (back < 3 && back < n && ((unsigned char)s[n - 1 - back] & 0xC0) == 0x80) back++;
    if (back == n) return n;
    unsigned char lead = (unsigned char)s[n - 1 - back];
    size_t need = lead >= 0xF0 && lead <= 0xF4 ? 4 : lead >= 0xE0 && lead < 0xF0 ? 3 : lead >= 0xC2 && lead < 0xE0 ? 2 : 1;
    if (need > 1 && back + 1 < need) return n - back - 1;
    return n;
}

/* A valid UTF-8 copy of s[0..n) (tools/serve_api.c). */
static char *utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    return api_utf8_sanitize(s, n, out_len);
}

/* Append a piece to the job's text (mu held). Cuts at a completed stop string
 * (returns 1) and advances `released` to what can be shown without revealing
 * a stop string's beginning or half a UTF-8 character. Returns -1 when out of
 * memory. */
static int job_append(job *j, const char *piece, size_t n) {
    if (j->len + n + 1 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (cap < j->len + n + 1) cap *= 2;
        char *t = realloc(j->text, cap);
        if (!t) return -1;
        j->text = t;
        j->cap = cap;
    }
    memcpy(j->text + j->len, piece, n);
    j->len += n;
    j->text[j->len] = 0;
    /* A stop string can only start at or after `released` (held back below). */
    size_t from = j->released;
    size_t cut = SIZE_MAX;
    for (int i = 0; i < j->n_stop; i++) {
        size_t sl = strlen(j->stop[i]);
        const char *hit = memmem(j->text + from, j->len - from, j->stop[i], sl);
        if (hit && (size_t)(hit - j->text) < cut) { cut = (size_t)(hit - j->text); j->stop_hit = i; }
    }
    if (cut != SIZE_MAX) {
        j->len = cut;
        j->text[cut] = 0;
        j->released = cut;
        return 1;
    }
    size_t hold = 0;
    size_t maxk = j->stop_maxlen ? j->stop_maxlen - 1 : 0;
    if (maxk > j->len - from) maxk = j->len - from;
    for (size_t k = maxk; k >= 1 && !hold; k--)
        for (int i = 0; i < j->n_stop && !hold; i++)
            if (strlen(j->stop[i]) > k && !memcmp(j->text + j->len - k, j->stop[i], k)) hold = k;
    size_t rel = utf8_complete_len(j->text, j->len - hold);
    if (rel > j->released) j->released = rel;
    return 0;
}

/* ---- the prompt cache: slots, checkpoints, stored states ------------------------------- */

static void slot_stats_locked(slot *s) {
    pk_stats st;
    pk_context_stats(s->ctx, &st);
    s->st_tokens = st.tokens;
    s->st_bytes = st.weight_bytes;
    s->st_ckpts = pk_context_checkpoints(s->ctx, NULL, 0);
    s->held = pk_context_pos(s->ctx);
}

/* How many tokens of j's prompt s would spare: the common prefix of its
 * tokens and the prompt, at most all but the prompt's last token, as far as
 * the context can go back (s idle, or its own worker calling). */
static int slot_reach(const slot *s, const job *j) {
    int l = pcache_lcp(pk_context_tokens(s->ctx), pk_context_pos(s->ctx), j->prompt, j->n_prompt);
    return pk_context_reachable(s->ctx, l < j->n_prompt - 1 ? l : j->n_prompt - 1);
}

/* The idle slot for j (mu held; NULL when none is idle): the one that costs
 * least, counting the prompt tokens it must process and the tokens of
 * another conversation it would drop (what it holds beyond what it keeps:
 * to be processed again if that conversation comes back); ties go to the
 * least recently used. So a conversation's next turn goes back to its slot,
 * a new one to an empty slot or to the one it disturbs least, and one that
 * shares a long system prompt with a slot to it, unless that would drop a
 * longer conversation. *entry: a stored state to load first (0: none), when
 * that costs at least MIN_LOAD_GAIN tokens less (it goes to the idle slot
 * holding the fewest tokens). */
static slot *choose_slot_locked(const job *j, uint64_t *entry) {
    slot *best = NULL, *emptiest = NULL;
    int64_t best_cost = 0;
    *entry = 0;
    for (int i = 0; i < S.n_parallel; i++) {
        slot *s = &S.slots[i];
        if (s->job) continue;
        int held = pk_context_pos(s->ctx), kept = slot_reach(s, j);
        int64_t cost = (int64_t)(j->n_prompt - kept) + (held - kept);
        if (!best || cost < best_cost || (cost == best_cost && s->last_used < best->last_used)) {
            best = s;
            best_cost = cost;
        }
        if (!emptiest || held < pk_context_pos(emptiest->ctx) ||
            (held == pk_context_pos(emptiest->ctx) && s->last_used < emptiest->last_used))
            emptiest = s;
    }
    if (best && S.cache) {
        uint64_t id;
        int r = pcache_match(S.cache, j->prompt, j->n_prompt, j->n_prompt - 1, &id);
        int64_t cost = (int64_t)(j->n_prompt - r) + pk_context_pos(emptiest->ctx);
        if (id && cost + MIN_LOAD_GAIN <= best_cost) {
            *entry = id;
            best = emptiest;
        }
    }
    return best;
}

/* Give queued jobs to idle slots, oldest job first (mu held). */
static void dispatch_locked(void) {
    int given = 0;
    while (S.head && !S.shutdown) {
        job *j = S.head;
        uint64_t entry;
        slot *s = choose_slot_locked(j, &entry);
        if (!s) break;
        S.head = j->next;
        if (!S.head) S.tail = NULL;
        S.n_waiting--;
        S.n_running++;
        j->state = JOB_RUNNING;
        j->t_start = now();
        s->job = j;
        s->entry = entry;
        s->last_used = ++S.clock;
        given = 1;
    }
    if (given) pthread_cond_broadcast(&S.work_cv);
}

/* Whether s's contents, of which a new prompt keeps `kept` tokens out of
 * `held`, are another conversation's that a later request may want back:
 * the new prompt does not keep the slot's last prompt, nor half of what it
 * holds. (A conversation's next turn keeps its last prompt; a reasoning
 * model's next turn drops the reasoning but keeps the prompt; another
 * conversation sharing a long system prompt keeps most of it, and loses
 * little.) */
static int slot_leaving(const slot *s, int kept, int held) {
    return held > 0 && kept < s->last_prompt && 2 * kept < held;
}

/* Make s hold the longest prefix of j's prompt it can reach: a stored
 * state (entry, when given) loaded, or its own contents, cut back with
 * pk_context_truncate. Contents that leave the slot are stored first
 * (S.cache). Returns the position reached; where: "" or where the state came
 * from. Runs on s's worker, mu not held. */
static int restore_prefix(slot *s, const job *j, uint64_t entry, char *where, size_t cap) {
    pk_context *c = s->ctx;
    int held = pk_context_pos(c), own = slot_reach(s, j);
    where[0] = 0;
    if (S.cache && slot_leaving(s, entry ? 0 : own, held)) {
        int kept = pcache_save(S.cache, c, S.cache_ram);
        if (!S.quiet && kept)
            fprintf(stderr, "pocket serve: slot %d: its %d tokens (another conversation's) kept in%s%s\n", s->index,
                    held, kept & PCACHE_RAM ? " RAM" : "", kept & PCACHE_FILE ? " the directory" : "");
    }
    if (entry && !pcache_load(S.cache, entry, c, where, cap)) {
        own = slot_reach(s, j);
        pthread_mutex_lock(&S.mu);
        s->last_prompt = pk_context_pos(c);
        pthread_mutex_unlock(&S.mu);
    }
    return pk_context_truncate(c, own);
}

static int add_position(int *pos, int k, int p, int from, int n) {
    if (p <= from || p > n) return k;
    for (int i = 0; i < k; i++)
        if (pos[i] == p) return k;
    pos[k] = p;
    return k + 1;
}

static int ascending(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

/* Where to take checkpoints while processing j's prompt from position
 * `from` (models with recurrent layers; none otherwise): positions in
 * (from, n_prompt], ascending, at most --ctx-checkpoints of them (the ring's
 * size: more would replace each other), chosen in this order: the end of the
 * prompt (the next turn of a conversation continues there, or diverges
 * there when a reasoning model's reasoning is left out of the history), the
 * starts of the generation prompt, of the last message and of the one before
 * (a regenerated or edited last message), then every CKPT_EVERY tokens, the
 * latest first (a long prompt that diverges inside). Returns their count. */
static int plan_checkpoints(const job *j, int from, int *pos) {
    if (!S.recurrent || S.n_ckpt <= 0) return 0;
    int n = j->n_prompt, k = add_position(pos, 0, n, from, n);
    for (int i = 0; i < N_STARTS && k < S.n_ckpt; i++) k = add_position(pos, k, j->starts[i], from, n);
    for (int p = n / CKPT_EVERY * CKPT_EVERY; p > from && k < S.n_ckpt; p -= CKPT_EVERY) k = add_position(pos, k, p, from, n);
    qsort(pos, (size_t)k, sizeof *pos, ascending);
    return k;
}

/* ---- the workers ------------------------------------------------------------------- */

/* Run one job on a slot (mu not held); entry: a stored state to load first
 * (0: none). Sets j->finish ("stop"/"length"), or leaves it NULL when
 * cancelled or failed (then j->err says why, if it failed or the server is
 * shutting down). */
static void run_job(slot *s, job *j, uint64_t entry) {
    pk_error err = {0};
    int n_ctx = pk_context_n_ctx(s->ctx);
    char buf[256], from[sizeof j->from];
    const char *finish = NULL;
    int n_gen = 0, cancel = 0, cached = 0;
    double t_gen = 0, t_prompt = 0;
    pthread_mutex_lock(&S.mu);
    cancel = j->cancel || S.shutdown;
    pthread_mutex_unlock(&S.mu);
    if (cancel) goto done;
    double t0 = now();
    cached = restore_prefix(s, j, entry, from, sizeof from);
    int ck[MAX_CKPT];
    int n_ck = plan_checkpoints(j, cached, ck);
    /* taken inside the batches that reach them: a batch is not cut there */
    if (pk_context_plan_checkpoints(s->ctx, ck, n_ck, &err))
        fprintf(stderr, "pocket serve: slot %d: no checkpoints for this prompt: %s\n", s->index, err.msg);
    for (int i = cached; i < j->n_prompt;) {
        pthread_mutex_lock(&S.mu);
        cancel = j->cancel || S.shutdown;
        pthread_mutex_unlock(&S.mu);
        if (cancel) break;
        int end = j->n_prompt - i < PREFILL_CHUNK ? j->n_prompt : i + PREFILL_CHUNK;
        if (pk_decode(s->ctx, j->prompt + i, end - i, &err)) {
            pthread_mutex_lock(&S.mu);
            snprintf(j->err, sizeof j->err, "%s", err.msg);
            pthread_mutex_unlock(&S.mu);
            cancel = 1;
            break;
        }
        i = end;
    }
    t_prompt = now() - t0;
    pthread_mutex_lock(&S.mu);
    S.prompt_seconds_total += t_prompt;
    if (!cancel) {
        S.prompt_tokens_total += (uint64_t)(j->n_prompt - cached);
        S.prompt_tokens_cached_total += (uint64_t)cached;
    }
    j->n_cached = cached;
    snprintf(j->from, sizeof j->from, "%s", from);
    s->last_prompt = j->n_prompt;
    slot_stats_locked(s);
    pthread_mutex_unlock(&S.mu);
    if (cancel) goto done;
    /* The prompt is the repetition penalty's history; OpenAI's presence and
       frequency penalties count the completion only. A grammar starts
       after the prompt (and after the reasoning, when the prompt opened a
       <think>), closing the output within the tokens left. */
    if (!j->penalties)
        for (int i = 0; i < j->n_prompt; i++) pk_sampler_accept(j->sampler, j->prompt[i]);

    int limit = j->max_tokens < 0 ? INT_MAX : j->max_tokens;
    /* the reasoning budget: inside <think> (opened by the prompt, or first
       in the text), after reasoning_budget tokens "\n</think>\n\n" is
       generated instead of what the model would */
    int in_think = j->reasoning_budget >= 0 && j->think_open, think_known = j->think_open, n_forced = 0, i_forced = 0;
    size_t think_from = 0;
    int32_t forced[16];
    int grammar_pending = j->grammar != NULL;
    finish = "length";
    t0 = now();
    while (n_gen < limit) {
        int32_t id;
        tok_lp lp = {0};
        if (in_think && n_forced == 0 && j->n_reasoning >= j->reasoning_budget) {
            n_forced = pk_model_tokenize(S.model, "\n</think>\n\n", 11, forced, 16, 0, 1);
            if (n_forced < 0 || n_forced > 16) n_forced = 0;
            in_think = 0;
        }
        if (i_forced < n_forced) {
            id = forced[i_forced++];
            lp.id = -1;
        } else {
            if (grammar_pending && !in_think) {
                grammar_pending = 0;
                if (pk_sampler_set_grammar(j->sampler, j->grammar->g, &err)) {
                    pthread_mutex_lock(&S.mu);
                    snprintf(j->err, sizeof j->err, "%s", err.msg);
                    pthread_mutex_unlock(&S.mu);
                    finish = NULL;
                    break;
                }
                if (limit != INT_MAX) pk_sampler_grammar_limit(j->sampler, limit - n_gen);
            }
            id = pk_sampler_sample(j->sampler, pk_context_logits(s->ctx));
            if (pk_model_is_eog(S.model, id)) { finish = "stop"; break; }
            if (j->logprobs) {
                lp.id = id;
                lp.lp = pk_sampler_logprob(j->sampler, id);
                lp.n_top = j->top_logprobs ? pk_sampler_top_logprobs(j->sampler, j->top_logprobs, lp.top_id, lp.top_lp) : 0;
            }
        }
        pk_sampler_accept(j->sampler, id);
        int n = pk_model_token_piece(S.model, id, buf, sizeof buf);
        char *big = NULL;
        if (n > (int)sizeof buf) {
            big = malloc((size_t)n);
            if (!big || pk_model_token_piece(S.model, id, big, n) != n) n = 0;
        }
        n_gen++;
        pthread_mutex_lock(&S.mu);
        int r = n > 0 ? job_append(j, big ? big : buf, (size_t)n) : 0;
        if (r >= 0 && j->logprobs && lp.id >= 0) {
            if (j->n_lp == j->cap_lp) {
                int cap = j->cap_lp ? 2 * j->cap_lp : 64;
                tok_lp *t = realloc(j->lp, (size_t)cap * sizeof *t);
                if (t) { j->lp = t; j->cap_lp = cap; }
            }
            if (j->n_lp < j->cap_lp) j->lp[j->n_lp++] = lp;
        }
        if (r >= 0 && j->reasoning_budget >= 0 && n_forced == 0) {
            if (!think_known) {
                size_t k = 0;
                while (k < j->len && (j->text[k] == ' ' || j->text[k] == '\n')) k++;
                size_t m = j->len - k < 7 ? j->len - k : 7;
                if (memcmp(j->text + k, "<think>", m)) think_known = 1;
                else if (m == 7) think_known = in_think = 1, think_from = k + 7;
            }
            if (in_think && memmem(j->text + think_from, j->len - think_from, "</think>", 8)) in_think = 0;
            else if (in_think) j->n_reasoning++;
        }
        j->n_gen = n_gen;
        S.gen_tokens_total++;
        if (n_gen == 1) j->t_first = now();
        cancel = j->cancel || S.shutdown;
        if (r < 0) snprintf(j->err, sizeof j->err, "out of memory");
        pthread_cond_broadcast(j->wake);
        pthread_mutex_unlock(&S.mu);
        free(big);
        if (r < 0 || cancel) { finish = NULL; break; }
        if (r == 1) { finish = "stop"; break; }
        /* a grammar that allows only the end has ended the output; one that is
           complete at max_tokens was closed in time by its limit: not cut */
        int gs = j->grammar && !grammar_pending ? pk_sampler_grammar_status(j->sampler, NULL) : PK_GRAMMAR_NONE;
        if (gs == PK_GRAMMAR_MUST_END || (n_gen >= limit && gs == PK_GRAMMAR_CAN_END)) {
            finish = "stop";
            break;
        }
        if (n_gen >= limit) break;
        /* prompt + completion stay within the context (the last token is not decoded) */
        if (pk_context_pos(s->ctx) + 1 >= n_ctx) break;
        if (pk_decode(s->ctx, &id, 1, &err)) {
            pthread_mutex_lock(&S.mu);
            snprintf(j->err, sizeof j->err, "%s", err.msg);
            pthread_mutex_unlock(&S.mu);
            finish = NULL;
            break;
        }
    }
    t_gen = now() - t0;
done:
    pthread_mutex_lock(&S.mu);
    S.gen_seconds_total += t_gen;
    j->prompt_ms = t_prompt * 1e3;
    j->gen_ms = t_gen * 1e3;
    slot_stats_locked(s);
    j->finish = finish;
    if (finish) j->released = j->len;   /* a partial stop string or character at the end is text */
    if (!finish && !j->err[0] && S.shutdown) snprintf(j->err, sizeof j->err, "the server is shutting down");
    const char *how = finish ? finish : j->err[0] ? "failed" : "cancelled";
    double queued = j->t_start - j->t_submit;
    pthread_mutex_unlock(&S.mu);
    if (!S.quiet)
        fprintf(stderr, "pocket serve: %s slot %d: prompt %d tokens (%d cached%s%s) %.0f ms, generated %d (%s) %.1f tok/s, "
                "queued %.0f ms\n", j->id, s->index, j->n_prompt, cached, j->from[0] ? " from " : "", j->from,
                t_prompt * 1e3, n_gen, how, t_gen > 0 ? n_gen / t_gen : 0.0, queued * 1e3);
}

/* The model file changed under the mapping (pk_model_check_file): fail the
 * job, and stop the server, since further reads of the mapping may fault or
 * see other bytes. The main thread (in sigwait) is woken by SIGTERM. */
static void model_changed(job *j, const char *msg) {
    pthread_mutex_lock(&S.mu);
    snprintf(j->err, sizeof j->err, "%s", msg);
    if (!S.fatal[0]) snprintf(S.fatal, sizeof S.fatal, "%s", msg);
    S.shutdown = 1;
    pthread_cond_broadcast(&S.work_cv);
    pthread_mutex_unlock(&S.mu);
    kill(getpid(), SIGTERM);
}

/* A slot's thread: runs the jobs dispatch_locked gives it; at shutdown,
 * the one it was given last (cancelled at once), then ends. */
static void *worker_main(void *arg) {
    slot *s = arg;
    pthread_mutex_lock(&S.mu);
    for (;;) {
        while (!s->job && !S.shutdown) pthread_cond_wait(&S.work_cv, &S.mu);
        job *j = s->job;
        if (!j) break;
        uint64_t entry = s->entry;
        int skip = j->cancel;
        pthread_mutex_unlock(&S.mu);
        pk_error ferr = {0};
        if (!skip && pk_model_check_file(S.model, &ferr)) model_changed(j, ferr.msg);
        else if (!skip) run_job(s, j, entry);
        pthread_mutex_lock(&S.mu);
        S.n_running--;
        if (j->cancel && !j->finish) S.cancelled_total++;
        j->state = JOB_DONE;
        j->t_end = now();
        s->job = NULL;
        s->entry = 0;
        pthread_cond_broadcast(j->wake);
        job_unref_locked(j);
        dispatch_locked();
    }
    pthread_mutex_unlock(&S.mu);
    return NULL;
}

/* The client went away (mu held): a queued job leaves the queue at once (and
 * its place is free), a running one stops after the current token. */
static void job_cancel_locked(job *j) {
    if (j->state == JOB_DONE) return;
    j->cancel = 1;
    if (j->state != JOB_QUEUED) return;
    job **pp = &S.head, *prev = NULL;
    while (*pp && *pp != j) { prev = *pp; pp = &(*pp)->next; }
    if (!*pp) return;
    *pp = j->next;
    if (S.tail == j) S.tail = prev;
    S.n_waiting--;
    S.cancelled_total++;
    j->state = JOB_DONE;
    pthread_cond_broadcast(j->wake);
    job_unref_locked(j);        /* the worker's reference */
}

/* ---- HTTP helpers -------------------------------------------------------------------- */

typedef struct request {
    char *body;
    size_t len, cap;
    int too_big;
    int answered;       /* a response was queued before the body was read */
    int status;
    double t0;
    serve_access acc;   /* its access log line, written when it completes */
    int streamed;       /* a stream was sent: the stream writes the line when it ends */
} request;

/* The request this connection's thread is answering (on_request sets it;
 * libmicrohttpd runs a thread per connection): what send_response sends is
 * noted in its access log line. NULL outside on_request (tests, fuzzing). */
static _Thread_local request *cur_rq;

/* --cors: Vary: Origin on every response (they differ by it), and
 * Access-Control-Allow-Origin when the request's Origin is allowed. */
static void cors_headers(struct MHD_Connection *c, struct MHD_Response *r) {
    if (!S.cors.any && !S.cors.n) return;
    MHD_add_response_header(r, "Vary", "Origin");
    const char *o = cors_allowed(&S.cors, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"));
    if (o) MHD_add_response_header(r, "Access-Control-Allow-Origin", o);
}

static void access_write(const serve_access *a) {
    if (S.quiet && a->status && a->status < 400) return;
    char line[1024];
    access_line(a, now(), line, sizeof line);
    fprintf(stderr, "pocket serve: %s\n", line);
}

/* A's tokens from a request's n jobs (its choices), and why one did not
 * finish (mu held). */
static void access_jobs_locked(serve_access *a, job *const *jobs, int n) {
    a->n_prompt = jobs[0]->n_prompt;
    a->n_cached = jobs[0]->n_cached;
    a->n_gen = 0;
    for (int i = 0; i < n; i++) {
        const job *j = jobs[i];
        a->n_gen += j->n_gen;
        if (!j->finish && !a->msg[0])
            snprintf(a->msg, sizeof a->msg, "%s%.200s",
                     j->err[0] ? "generation failed: " : "cancelled: the client went away", j->err);
    }
}

/* Queue r (destroyed here) and count the status for /metrics. */
static mhd_result send_response(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    pthread_mutex_lock(&S.mu);
    if (status < 600) S.status_count[status]++;
    pthread_mutex_unlock(&S.mu);
    if (cur_rq) cur_rq->acc.status = (int)status;
    cors_headers(c, r);
    mhd_result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static mhd_result send_buffer(struct MHD_Connection *c, unsigned status, const char *ctype,
                              const char *data, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    /* JSON may quote the request (a 404 names the path): never let a
       browser sniff it as HTML */
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    return send_response(c, status, r);
}

/* Send a JSON value (stolen). */
static mhd_result send_json(struct MHD_Connection *c, unsigned status, json_t *v) {
    if (status >= 400 && cur_rq && v) access_error(&cur_rq->acc, v);
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!s) {
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":null}}";
        return send_buffer(c, 500, "application/json", oom, sizeof oom - 1);
    }
    mhd_result r = send_buffer(c, status, "application/json", s, strlen(s));
    free(s);
    return r;
}

static int client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) < 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* Whether h is the API key, in constant time in the key's content: every
 * byte of the key is compared, whatever the first difference. */
static int key_equal(const char *h) {
    size_t a = strlen(h), b = strlen(S.api_key);
    unsigned diff = (unsigned)(a != b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)S.api_key[i] ^ (unsigned char)(i < a ? h[i] : 0);
    return diff == 0;
}

/* authz: the Authorization header ("Bearer KEY"), xkey: x-api-key
 * (Anthropic's clients send it); NULL if absent. */
static int auth_ok(const char *authz, const char *xkey) {
    if (!S.has_api_key) return 1;
    if (xkey && key_equal(xkey)) return 1;
    if (!authz || strncasecmp(authz, "Bearer ", 7)) return 0;
    authz += 7;
    while (*authz == ' ') authz++;
    return key_equal(authz);
}

/* ---- chat formatting ------------------------------------------------------------------- */

/* The text that ends an assistant turn in the template (an implicit stop
 * string, for models that write it as text rather than as a special token). */
static const char *chat_end_marker(void) {
    if (!strcmp(S.chat_template, "llama3")) return "<|eot_id|>";
    if (!strcmp(S.chat_template, "gemma")) return "<end_of_turn>";
    if (!strcmp(S.chat_template, "gemma4")) return "<turn|>";
    if (!strncmp(S.chat_template, "deepseek", 8)) return "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    if (!strcmp(S.chat_template, "harmony")) return "<|return|>";
    return "<|im_end|>";
}

static void set_code(api_error *e, const char *code) {
    snprintf(e->code, sizeof e->code, "%s", code ? code : "");
}

/* A message's content as one string: a string as it is, text parts
 * concatenated, null as "" (assistant messages, and any with tool calls).
 * New reference; NULL with e filled. */
static json_t *content_string(const json_t *content, size_t i, int null_ok, api_error *e) {
    if (json_is_string(content)) return json_incref((json_t *)content);
    if ((!content || json_is_null(content)) && null_ok) return json_string("");
    if (!json_is_array(content)) {
        api_fail(e, 400, "messages", "messages[%zu].content must be a string or an array of text parts%s", i,
                 null_ok ? " (or null)" : "");
        return NULL;
    }
    size_t total = 1;
    for (size_t k = 0; k < json_array_size(content); k++) {
        json_t *part = json_array_get(content, k);
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text)) {
            api_fail(e, 400, "messages", "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": string} "
                     "(this server takes text only)", i, k);
            return NULL;
        }
        total += json_string_length(text);
    }
    char *cat = malloc(total);
    if (!cat) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    size_t off = 0;
    for (size_t k = 0; k < json_array_size(content); k++) {
        json_t *text = json_object_get(json_array_get(content, k), "text");
        memcpy(cat + off, json_string_value(text), json_string_length(text));
        off += json_string_length(text);
    }
    json_t *v = json_stringn(cat, off);
    free(cat);
    if (!v) api_fail(e, 500, NULL, "out of memory");
    return v;
}

/* OpenAI's messages checked and made what templates expect (a new array;
 * NULL with e filled): roles system, developer, user, assistant, tool
 * (developer is system, except for gpt-oss's template, which has it);
 * content one string; assistant tool_calls with function.name, and
 * function.arguments parsed into an object when it is a JSON text of one
 * (as Hugging Face's templates are given it: Qwen3.5's iterates its items);
 * tool_call_id, name and reasoning_content passed as they are. */
static json_t *messages_normalize(const json_t *msgs, api_error *e) {
    if (!msgs) { api_fail(e, 400, "messages", "'messages' is required"); return NULL; }
    if (!json_is_array(msgs)) { api_fail(e, 400, "messages", "'messages' must be an array"); return NULL; }
    size_t n = json_array_size(msgs);
    if (n == 0) { api_fail(e, 400, "messages", "'messages' must not be empty"); return NULL; }
    json_t *out = json_array();
    if (!out) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    for (size_t i = 0; i < n; i++) {
        json_t *m = json_array_get(msgs, i);
        if (!json_is_object(m)) { api_fail(e, 400, "messages", "messages[%zu] must be an object", i); goto fail; }
        json_t *role = json_object_get(m, "role");
        if (!json_is_string(role)) { api_fail(e, 400, "messages", "messages[%zu].role must be a string", i); goto fail; }
        const char *r = json_string_value(role);
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "developer") && strcmp(r, "tool")) {
            api_fail(e, 400, "messages", "messages[%zu].role '%.40s' is not one of system, developer, user, assistant, tool",
                     i, r);
            goto fail;
        }
        json_t *calls = json_object_get(m, "tool_calls");
        int has_calls = calls && !json_is_null(calls);
        if (has_calls && (strcmp(r, "assistant") || !json_is_array(calls))) {
            api_fail(e, 400, "messages", "messages[%zu].tool_calls must be an array (assistant messages only)", i);
            goto fail;
        }
        json_t *c = content_string(json_object_get(m, "content"), i, !strcmp(r, "assistant"), e);
        if (!c) goto fail;
        json_t *nm = json_copy(m);
        if (!nm || json_object_set_new(nm, "content", c)) { json_decref(nm); api_fail(e, 500, NULL, "out of memory"); goto fail; }
        json_array_append_new(out, nm);
        if (!strcmp(r, "developer") && strcmp(S.chat_template, "harmony"))
            json_object_set_new(nm, "role", json_string("system"));
        for (const char *const *k = (const char *const[]){"tool_call_id", "name", "reasoning_content", NULL}; *k; k++) {
            json_t *v = json_object_get(m, *k);
            if (json_is_null(v)) json_object_del(nm, *k);
            else if (v && !json_is_string(v)) { api_fail(e, 400, "messages", "messages[%zu].%s must be a string", i, *k); goto fail; }
        }
        if (!has_calls) { json_object_del(nm, "tool_calls"); continue; }
        json_t *nc = json_array();
        json_object_set_new(nm, "tool_calls", nc);
        for (size_t k = 0; k < json_array_size(calls); k++) {
            json_t *call = json_array_get(calls, k), *f = json_object_get(call, "function");
            json_t *name = json_object_get(f, "name"), *args = json_object_get(f, "arguments");
            if (!json_is_object(call) || !json_is_object(f) || !json_is_string(name)) {
                api_fail(e, 400, "messages", "messages[%zu].tool_calls[%zu] must be {\"id\", \"type\": \"function\", "
                         "\"function\": {\"name\": string, \"arguments\": string}}", i, k);
                goto fail;
            }
            json_t *ncall = json_copy(call), *nf = json_copy(f);
            if (!ncall || !nf) { json_decref(ncall); json_decref(nf); api_fail(e, 500, NULL, "out of memory"); goto fail; }
            json_object_set_new(ncall, "function", nf);
            json_array_append_new(nc, ncall);
            if (json_is_string(args)) {
                json_t *obj = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, NULL);
                if (json_is_object(obj)) json_object_set(nf, "arguments", obj);
                json_decref(obj);
            } else if (args && !json_is_object(args) && !json_is_null(args)) {
                api_fail(e, 400, "messages", "messages[%zu].tool_calls[%zu].function.arguments must be a string", i, k);
                goto fail;
            }
        }
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* The conversation a chat template is given: {"messages": normalised,
 * "tools", "add_generation_prompt": true, the keys of chat_template_kwargs,
 * "reasoning_effort"} from a request (root). New reference; NULL with e. */
static json_t *conversation_json(const json_t *root, api_error *e) {
    json_t *msgs = messages_normalize(json_object_get(root, "messages"), e);
    if (!msgs) return NULL;
    json_t *conv = json_pack("{s:o, s:b}", "messages", msgs, "add_generation_prompt", 1);
    if (!conv) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (kw && !json_is_null(kw)) {
        if (!json_is_object(kw)) { api_fail(e, 400, "chat_template_kwargs", "'chat_template_kwargs' must be an object"); goto fail; }
        const char *k;
        json_t *v;
        json_object_foreach(kw, k, v)
            if (strcmp(k, "messages") && strcmp(k, "add_generation_prompt")) json_object_set(conv, k, v);
    }
    json_t *re = json_object_get(root, "reasoning_effort");
    if (re && !json_is_null(re)) {
        const char *x = json_is_string(re) ? json_string_value(re) : "";
        if (strcmp(x, "low") && strcmp(x, "medium") && strcmp(x, "high") && strcmp(x, "minimal")) {
            api_fail(e, 400, "reasoning_effort", "'reasoning_effort' must be \"minimal\", \"low\", \"medium\" or \"high\"");
            goto fail;
        }
        if (!json_object_get(conv, "reasoning_effort")) json_object_set(conv, "reasoning_effort", re);
    }
    json_t *tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) { api_fail(e, 400, "tools", "'tools' must be an array"); goto fail; }
        for (size_t i = 0; i < json_array_size(tools); i++) {
            json_t *t = json_array_get(tools, i), *type = json_object_get(t, "type"), *f = json_object_get(t, "function");
            if (!json_is_object(t) || !json_is_string(type) || strcmp(json_string_value(type), "function") ||
                !json_is_object(f) || !json_is_string(json_object_get(f, "name"))) {
                api_fail(e, 400, "tools", "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": string, "
                         "\"description\"?, \"parameters\"?}}", i);
                goto fail;
            }
        }
        if (json_array_size(tools)) json_object_set(conv, "tools", tools);
    }
    return conv;
fail:
    json_decref(conv);
    return NULL;
}

/* The prompt text of conv's first n messages (the whole conversation: n =
 * its count), with the opening of the assistant's turn if add_gen: the
 * model's Jinja template (S.jinja), else the built-in formatter. NULL with
 * e filled (a template error: 400 naming its line). */
static char *render_chat(const json_t *conv, size_t n, int add_gen, api_error *e) {
    json_t *msgs = json_object_get(conv, "messages");
    char *out = NULL;
    pk_error err = {0};
    if (!S.jinja) {
        pk_chat_message *mv = calloc(n ? n : 1, sizeof *mv);
        if (!mv) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
        for (size_t i = 0; i < n; i++) {
            json_t *m = json_array_get(msgs, i), *calls = json_object_get(m, "tool_calls");
            if (calls && json_array_size(calls)) {
                api_fail(e, 400, "messages", "messages[%zu] has tool_calls: they need the model's own chat template "
                         "(this server formats with the built-in '%s'; start it without --chat-template)", i,
                         S.chat_template);
                free(mv);
                return NULL;
            }
            mv[i].role = json_string_value(json_object_get(m, "role"));
            if (!strcmp(mv[i].role, "developer")) mv[i].role = "system";
            mv[i].content = json_string_value(json_object_get(m, "content"));
        }
        if (pk_chat_format(S.model, S.chat_template, mv, (int)n, add_gen, &out, &err)) {
            api_fail(e, 400, "messages", "the messages could not be formatted: %s", err.msg);
            out = NULL;
        }
        free(mv);
        return out;
    }
    json_t *c = json_copy((json_t *)conv);
    json_t *part = n < json_array_size(msgs) ? json_array() : json_incref(msgs);
    for (size_t i = 0; part && n < json_array_size(msgs) && i < n; i++) json_array_append(part, json_array_get(msgs, i));
    char *text = NULL;
    if (c && part) {
        json_object_set_new(c, "messages", part);
        part = NULL;
        json_object_set_new(c, "add_generation_prompt", json_boolean(add_gen));
        text = json_dumps(c, JSON_COMPACT);
    }
    json_decref(part);
    json_decref(c);
    if (!text) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    pk_jinja_params p;
    pk_chat_jinja_params(S.model, &p);
    p.add_generation_prompt = add_gen;
    if (pk_chat_jinja_render(S.model, S.jinja, text, strlen(text), &p, &out, NULL, &err)) {
        api_fail(e, err.code == PK_ERR_NOMEM ? 500 : 400, "messages", "the chat template failed: %s", err.msg);
        set_code(e, "template_error");
        out = NULL;
    }
    free(text);
    return out;
}

/* Where the last messages of a chat start in j's prompt (for checkpoints):
 * for i = n, n - 1, n - 2 (the generation prompt, the last message, the one
 * before), the length of the tokens of the first i messages rendered
 * without the generation prompt, kept in j->starts only where the prompt's
 * tokens begin with exactly those tokens (text merged across the boundary
 * into one token makes it no boundary; a template that refuses such a
 * conversation gives none). */
static void message_starts(job *j, const json_t *conv) {
    size_t n = json_array_size(json_object_get(conv, "messages"));
    int32_t *tok = malloc((size_t)(j->n_prompt + 1) * sizeof *tok);
    for (int k = 0; tok && k < N_STARTS && n >= (size_t)k + 1; k++) {
        api_error e;
        char *text = render_chat(conv, n - (size_t)k, 0, &e);
        if (!text) continue;
        int m = pk_model_tokenize(S.model, text, strlen(text), tok, j->n_prompt + 1, 1, 1);
        free(text);
        if (m > 0 && m <= j->n_prompt && !memcmp(tok, j->prompt, (size_t)m * sizeof *tok)) j->starts[k] = m;
    }
    free(tok);
}

/* Whether a rendered prompt ends inside a <think> block its template opened
 * (Qwen3.5 with thinking on): the answer then starts with the reasoning. */
static int prompt_opens_think(const char *p) {
    if (!strcmp(S.chat_template, "harmony") || !strcmp(S.chat_template, "gemma4")) return 0;
    size_t n = strlen(p);
    while (n && (p[n - 1] == '\n' || p[n - 1] == ' ')) n--;
    return n >= 7 && !memcmp(p + n - 7, "<think>", 7);
}

/* ---- request parsing ------------------------------------------------------------------ */

/* Whether v (NULL: absent) asks nothing of the unsupported parameter name:
 * null, false, 0 (best_of: 1), an empty array/object/string, "none". */
static int neutral_value(const char *name, const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return 1;
    if (json_is_number(v)) return json_number_value(v) == (strcmp(name, "best_of") ? 0 : 1);
    if (json_is_array(v)) return json_array_size(v) == 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        int choice = !strcmp(name, "function_call");
        return !*s || (choice && (!strcmp(s, "none") || !strcmp(s, "auto")));
    }
    if (json_is_object(v)) return json_object_size(v) == 0;
    return 0;
}

/* The body of a request as JSON (NULL with e filled). */
static json_t *parse_body(const char *body, size_t len, api_error *e) {
    /* JSON text never holds a raw NUL (in strings it must be escaped), but
       jansson 2.14 takes one right after a number: '{"seed": 1\0}' parses */
    const char *nul = memchr(body, 0, len);
    if (nul) {
        api_fail(e, 400, NULL, "the body is not valid JSON: a NUL byte at offset %zu", (size_t)(nul - body));
        set_code(e, "invalid_json");
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        api_fail(e, 400, NULL, "the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        set_code(e, "invalid_json");
        return NULL;
    }
    if (!json_is_object(root)) {
        api_fail(e, 400, NULL, "the body must be a JSON object");
        json_decref(root);
        return NULL;
    }
    return root;
}

/* OpenAI's "model": absent, null or a string. One model is served: any name
 * is taken for it (as llama-server does); the answer names the served id.
 * The other APIs' translators drop it (their clients name models of their own). */
static int check_model(const json_t *root, api_error *e) {
    json_t *v = json_object_get(root, "model");
    if (!v || json_is_null(v) || json_is_string(v)) return 0;
    api_fail(e, 400, "model", "'model' must be a string");
    return -1;
}

/* The GBNF a request asks its output to follow: response_format json_object
 * (any JSON object) or json_schema (its schema), or llama.cpp's "grammar".
 * *gbnf NULL when none; -1 with e filled for a bad one. */
static int request_grammar(const json_t *root, char **gbnf, const char **param, api_error *e) {
    pk_error err = {0};
    *gbnf = NULL;
    *param = "grammar";
    json_t *g = json_object_get(root, "grammar"), *rf = json_object_get(root, "response_format");
    if (g && !json_is_null(g)) {
        if (!json_is_string(g) || !json_string_length(g) || strlen(json_string_value(g)) != json_string_length(g)) {
            api_fail(e, 400, "grammar", "'grammar' must be a non-empty GBNF text");
            return -1;
        }
        if (!(*gbnf = strdup(json_string_value(g)))) { api_fail(e, 500, NULL, "out of memory"); return -1; }
    }
    if (!rf || json_is_null(rf)) return 0;
    json_t *type = json_object_get(rf, "type");
    const char *t = json_is_string(type) ? json_string_value(type) : NULL;
    if (!json_is_object(rf) || !t || (strcmp(t, "text") && strcmp(t, "json_object") && strcmp(t, "json_schema"))) {
        api_fail(e, 400, "response_format", "'response_format' must be {\"type\": \"text\"}, {\"type\": \"json_object\"} "
                 "or {\"type\": \"json_schema\", \"json_schema\": {\"name\", \"schema\"}}");
        goto fail;
    }
    if (!strcmp(t, "text")) return 0;
    if (*gbnf) { api_fail(e, 400, "grammar", "'grammar' and a JSON 'response_format' cannot both be given"); goto fail; }
    *param = "response_format";
    json_t *schema = NULL;
    if (!strcmp(t, "json_object")) {
        /* llama.cpp's extension: {"type": "json_object", "schema": {...}} */
        schema = json_object_get(rf, "schema");
    } else {
        json_t *js = json_object_get(rf, "json_schema");
        if (!json_is_object(js)) {
            api_fail(e, 400, "response_format", "response_format.json_schema must be an object {\"name\", \"schema\", \"strict\"?}");
            goto fail;
        }
        schema = json_object_get(js, "schema");
        if (!schema) schema = json_object_get(rf, "schema");
        if (!json_is_object(schema) && !json_is_boolean(schema)) {
            api_fail(e, 400, "response_format", "response_format.json_schema.schema must be a JSON schema (an object)");
            goto fail;
        }
    }
    char *stext = schema && !json_is_null(schema) ? json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY)
                                                  : strdup("{\"type\": \"object\"}");
    if (!stext) { api_fail(e, 500, NULL, "out of memory"); goto fail; }
    int r = pk_json_schema_to_grammar(stext, strlen(stext), 0, gbnf, &err);
    free(stext);
    if (r) {
        *gbnf = NULL;
        api_fail(e, r == PK_ERR_NOMEM ? 500 : 400, "response_format", "response_format: %s", err.msg);
        set_code(e, "invalid_schema");
        return -1;
    }
    return 0;
fail:
    free(*gbnf);
    *gbnf = NULL;
    return -1;
}

/* logit_bias: {"token id": bias in [-100, 100]}. */
static int request_logit_bias(const json_t *root, pk_sampler *smp, api_error *e) {
    json_t *v = json_object_get(root, "logit_bias");
    if (!v || json_is_null(v)) return 0;
    if (!json_is_object(v)) { api_fail(e, 400, "logit_bias", "'logit_bias' must be an object {\"token id\": bias}"); return -1; }
    size_t n = json_object_size(v);
    if (n == 0) return 0;
    int n_vocab = pk_model_n_vocab(S.model);
    if (n > (size_t)n_vocab) { api_fail(e, 400, "logit_bias", "'logit_bias' has more entries than the vocabulary"); return -1; }
    int32_t *ids = malloc(n * sizeof *ids);
    float *bias = malloc(n * sizeof *bias);
    int k = 0, bad = 0;
    const char *key;
    json_t *b;
    if (!ids || !bias) { api_fail(e, 500, NULL, "out of memory"); bad = 1; }
    json_object_foreach(v, key, b) {
        if (bad) break;
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (!*key || *end || errno || id < 0 || id >= n_vocab) {
            api_fail(e, 400, "logit_bias", "logit_bias: '%.40s' is not a token id (0 to %d)", key, n_vocab - 1);
            bad = 1;
        } else if (!json_is_number(b) || !(json_number_value(b) >= -100 && json_number_value(b) <= 100)) {
            api_fail(e, 400, "logit_bias", "logit_bias[%ld] must be a number in [-100, 100]", id);
            bad = 1;
        } else {
            ids[k] = (int32_t)id;
            bias[k++] = (float)json_number_value(b);
        }
    }
    pk_error err = {0};
    if (!bad && pk_sampler_set_logit_bias(smp, ids, bias, k, &err)) {
        api_fail(e, 400, "logit_bias", "logit_bias: %s", err.msg);
        bad = 1;
    }
    free(ids);
    free(bias);
    return bad ? -1 : 0;
}

/* tools and tool_choice: the tool-call format and the choice into j. */
static int request_tools(const json_t *root, job *j, api_error *e) {
    json_t *tools = json_object_get(root, "tools"), *tc = json_object_get(root, "tool_choice");
    int has_tools = json_is_array(tools) && json_array_size(tools) > 0;
    const char *choice = "auto";
    if (tc && !json_is_null(tc)) {
        json_t *f = json_object_get(json_object_get(tc, "function"), "name");
        if (json_is_string(tc) && (!strcmp(json_string_value(tc), "auto") || !strcmp(json_string_value(tc), "none") ||
                                   !strcmp(json_string_value(tc), "required")))
            choice = json_string_value(tc);
        else if (json_is_object(tc) && json_is_string(f) && json_string_length(f) > 0 &&
                 json_string_length(f) < sizeof j->tool_choice)
            choice = json_string_value(f);
        else {
            api_fail(e, 400, "tool_choice", "'tool_choice' must be \"auto\", \"none\", \"required\" or "
                     "{\"type\": \"function\", \"function\": {\"name\": NAME}}");
            return -1;
        }
        if (!has_tools && strcmp(choice, "none") && strcmp(choice, "auto")) {
            api_fail(e, 400, "tool_choice", "'tool_choice' asks for a call but 'tools' is empty");
            return -1;
        }
        if (json_is_object(tc)) {
            int found = 0;
            for (size_t i = 0; i < json_array_size(tools) && !found; i++) {
                json_t *n = json_object_get(json_object_get(json_array_get(tools, i), "function"), "name");
                found = json_is_string(n) && !strcmp(json_string_value(n), choice);
            }
            if (!found) {
                api_fail(e, 400, "tool_choice", "tool_choice names '%.80s', which is not one of 'tools'", choice);
                return -1;
            }
        }
    }
    json_t *ptc = json_object_get(root, "parallel_tool_calls");
    if (ptc && !json_is_null(ptc) && !json_is_boolean(ptc)) {
        api_fail(e, 400, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
        return -1;
    }
    j->one_call = json_is_false(ptc);
    snprintf(j->tool_choice, sizeof j->tool_choice, "%s", choice);
    if (!has_tools || !strcmp(choice, "none")) return 0;
    if (!S.jinja || !S.toolfmt) {
        api_fail(e, 400, "tools", "'tools' cannot be used with this model: %s", !S.jinja ?
                 "the chat template in use is a built-in formatter (start the server without --chat-template, or "
                 "with --chat-template-file)" : "its chat template writes tool calls in a format pocket does not parse");
        set_code(e, "unsupported_parameter");
        return -1;
    }
    j->toolfmt = S.toolfmt;
    if (!(j->tools_json = json_dumps(tools, JSON_COMPACT))) { api_fail(e, 500, NULL, "out of memory"); return -1; }
    return 0;
}

/* The grammar of a forced call (tool_choice "required" or a function's
 * name; docs/tool-calls.md, "Forcing a call"): attached from the first
 * generated token, it holds the reasoning too: inside a <think> the prompt
 * opened (unless a reasoning budget closes it first: then the call comes at
 * once), or an optional one first when the template knows <think> or the
 * format is harmony's, or gemma4's with a prompt (prompt) that leaves the
 * thought channel to the model (thinking on: no empty one closes it).
 * -1 with e filled (a schema the converter refuses: 400). */
static int tool_grammar(const job *j, const char *prompt, char **gbnf, api_error *e) {
    int flags = PK_SCHEMA_LENIENT | (j->one_call ? PK_TOOLCALL_ONE_CALL : 0);
    size_t pl = strlen(prompt);
    if (j->think_open) flags |= j->reasoning_budget < 0 ? PK_TOOLCALL_THINKING : 0;
    else if (!strcmp(j->toolfmt, "harmony") ||
             (!strcmp(j->toolfmt, "gemma4") && (pl < 10 || strcmp(prompt + pl - 10, "<channel|>"))) ||
             (S.template_text && memmem(S.template_text, S.template_len, "<think>", 7)))
        flags |= PK_TOOLCALL_MAY_THINK;
    pk_error err = {0};
    if (pk_toolcall_grammar(j->toolfmt, j->tools_json, strlen(j->tools_json), j->tool_choice, flags, gbnf, &err)) {
        *gbnf = NULL;
        api_fail(e, err.code == PK_ERR_NOMEM ? 500 : 400, "tools", "%s", err.msg);
        return -1;
    }
    return 0;
}

/* Parse and validate an OpenAI completion request (root: its JSON object)
 * into a new job: the choice `index` of the request (n > 1: the seed is the
 * request's + index). NULL with e filled. No connection is needed:
 * tests/fuzz call it too. */
static job *parse_request(const json_t *root, int chat, int index, api_error *e) {
#define FAIL(st, code_, param, ...) do { api_fail(e, st, param, __VA_ARGS__); set_code(e, code_); goto fail; } while (0)
#define FAIL_BAD(param, ...) FAIL(400, NULL, param, __VA_ARGS__)
#define FAIL_OOM() FAIL(500, NULL, NULL, "out of memory")
#define CHECK(x) do { if (x) goto fail; } while (0)
    job *j = NULL;
    char *prompt_text = NULL, *gbnf = NULL;
    json_t *conv = NULL;
    if (!json_is_object(root)) FAIL_BAD(NULL, "the body must be a JSON object");
    j = calloc(1, sizeof *j);
    if (!j) FAIL_OOM();
    pthread_cond_init(&j->cv, NULL);
    j->wake = &j->cv;
    j->chat = chat;
    j->max_tokens = -1;
    j->stop_hit = -1;
    j->index = index;
    j->reasoning_budget = -1;

    json_t *v = json_object_get(root, "stream");
    if (v && !json_is_null(v) && !json_is_boolean(v)) FAIL_BAD("stream", "'stream' must be a boolean");
    j->stream = json_is_true(v);
    v = json_object_get(root, "stream_options");
    if (v && !json_is_null(v)) {
        if (!json_is_object(v)) FAIL_BAD("stream_options", "'stream_options' must be an object");
        json_t *u = json_object_get(v, "include_usage");
        if (u && !json_is_null(u) && !json_is_boolean(u))
            FAIL_BAD("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
        j->include_usage = json_is_true(u);
    }
    const char *mt_names[] = {"max_completion_tokens", "max_tokens"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(root, mt_names[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_integer(v)) FAIL_BAD(mt_names[i], "'%s' must be an integer", mt_names[i]);
        json_int_t x = json_integer_value(v);
        if (x < 0 || x > MAX_TOKENS_ABSURD)
            FAIL_BAD(mt_names[i], "'%s' is %lld; it must be in [0, %d]", mt_names[i], (long long)x, MAX_TOKENS_ABSURD);
        j->max_tokens = (int)x;
        break;
    }
    /* Parameters of OpenAI's API that pocket does not implement are refused
       rather than ignored. Each may be sent with its neutral value. */
    static const struct { const char *name, *neutral; } unsupported[] = {
        {"functions", "[]"}, {"function_call", "\"none\""}, {"echo", "false"}, {"suffix", "\"\""}, {"best_of", "1"},
        {"audio", "null"}, {"prediction", "null"}, {"web_search_options", "null"},
    };
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (!neutral_value(unsupported[i].name, json_object_get(root, unsupported[i].name)))
            FAIL(400, "unsupported_parameter", unsupported[i].name,
                 "'%s' is not supported by this server (pocket serve); remove it or send %s", unsupported[i].name,
                 unsupported[i].neutral);
    /* llama.cpp's names: "none" = the raw text; "auto" and "deepseek" (the
       default) = reasoning apart. "deepseek-legacy" (reasoning in both) is not done. */
    j->split = chat;
    v = json_object_get(root, "reasoning_format");
    if (v && !json_is_null(v)) {
        const char *rf = json_is_string(v) ? json_string_value(v) : NULL;
        if (!rf || (strcmp(rf, "none") && strcmp(rf, "auto") && strcmp(rf, "deepseek")))
            FAIL_BAD("reasoning_format", "'reasoning_format' must be \"auto\", \"deepseek\" (the reasoning in "
                     "reasoning_content) or \"none\" (the text as generated)%s%.40s%s", rf ? "; got \"" : "",
                     rf ? rf : "", rf ? "\"" : "");
        if (!chat && strcmp(rf, "none"))
            FAIL_BAD("reasoning_format", "'reasoning_format' applies to chat completions; a text completion "
                     "is the text as generated (\"none\")");
        j->split = chat && strcmp(rf, "none") != 0;
    }
    v = json_object_get(root, "thinking_budget_tokens");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > MAX_TOKENS_ABSURD)
            FAIL_BAD("thinking_budget_tokens", "'thinking_budget_tokens' must be an integer in [0, %d]", MAX_TOKENS_ABSURD);
        if (!chat) FAIL_BAD("thinking_budget_tokens", "'thinking_budget_tokens' applies to chat completions");
        if (!strcmp(S.chat_template, "harmony") || !strcmp(S.chat_template, "gemma4"))
            FAIL(400, "unsupported_parameter", "thinking_budget_tokens", "'thinking_budget_tokens' is not supported for "
                 "the '%s' template (only <think> ... </think> reasoning)", S.chat_template);
        j->reasoning_budget = (int)json_integer_value(v);
    }

    pk_sampler_params sp = S.sp;
    struct { const char *name; float *dst; double lo, hi; } nums[] = {
        {"temperature", &sp.temperature, 0, 2}, {"top_p", &sp.top_p, 0, 1}, {"min_p", &sp.min_p, 0, 1},
        {"repeat_penalty", &sp.repeat_penalty, 0, 10}, {"presence_penalty", &sp.presence_penalty, -2, 2},
        {"frequency_penalty", &sp.frequency_penalty, -2, 2},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        v = json_object_get(root, nums[i].name);
        if (!v || json_is_null(v)) continue;
        if (!json_is_number(v)) FAIL_BAD(nums[i].name, "'%s' must be a number", nums[i].name);
        double x = json_number_value(v);
        if (!(x >= nums[i].lo && x <= nums[i].hi))
            FAIL_BAD(nums[i].name, "'%s' is %g; it must be in [%g, %g]", nums[i].name, x, nums[i].lo, nums[i].hi);
        *nums[i].dst = (float)x;
    }
    j->penalties = sp.presence_penalty != 0 || sp.frequency_penalty != 0;
    v = json_object_get(root, "top_k");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
            FAIL_BAD("top_k", "'top_k' must be a non-negative integer");
        sp.top_k = (int)json_integer_value(v);
    }
    v = json_object_get(root, "seed");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) FAIL_BAD("seed", "'seed' must be an integer");
        sp.seed = (uint64_t)json_integer_value(v) + (uint64_t)index;
    } else if (!S.seed_given || index > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        pthread_mutex_lock(&S.mu);
        sp.seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^ ++S.id_counter << 32;
        pthread_mutex_unlock(&S.mu);
    }
    j->tc_seed = sp.seed * 0x9E3779B97F4A7C15ull + 1;
    pk_error perr = {0};
    j->sampler = pk_sampler_new(&sp, pk_model_n_vocab(S.model), &perr);
    if (!j->sampler) FAIL_BAD(NULL, "bad sampling parameters: %s", perr.msg);
    CHECK(request_logit_bias(root, j->sampler, e));

    /* log-probabilities: chat {"logprobs": true, "top_logprobs": 0-20};
       text completions the legacy {"logprobs": 0-5} (the top count) */
    v = json_object_get(root, "logprobs");
    json_t *tl = json_object_get(root, "top_logprobs");
    if (chat) {
        if (v && !json_is_null(v) && !json_is_boolean(v)) FAIL_BAD("logprobs", "'logprobs' must be a boolean");
        j->logprobs = json_is_true(v);
        if (tl && !json_is_null(tl)) {
            if (!json_is_integer(tl) || json_integer_value(tl) < 0 || json_integer_value(tl) > MAX_TOP_LOGPROBS)
                FAIL_BAD("top_logprobs", "'top_logprobs' must be an integer in [0, %d]", MAX_TOP_LOGPROBS);
            if (json_integer_value(tl) > 0 && !j->logprobs)
                FAIL_BAD("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
            j->top_logprobs = (int)json_integer_value(tl);
        }
    } else {
        if (tl && !json_is_null(tl)) FAIL_BAD("top_logprobs", "text completions take \"logprobs\": N (0 to 5)");
        if (v && !json_is_null(v)) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 5)
                FAIL_BAD("logprobs", "'logprobs' must be an integer in [0, 5] (the most likely tokens listed)");
            j->logprobs = 1;
            j->top_logprobs = (int)json_integer_value(v);
        }
    }

    v = json_object_get(root, "stop");
    if (v && !json_is_null(v)) {
        size_t n = json_is_array(v) ? json_array_size(v) : 1;
        if (!json_is_string(v) && !json_is_array(v)) FAIL_BAD("stop", "'stop' must be a string or an array of strings");
        if (n > MAX_STOP) FAIL_BAD("stop", "'stop' has %zu strings; at most %d are allowed", n, MAX_STOP);
        for (size_t i = 0; i < n; i++) {
            json_t *s = json_is_array(v) ? json_array_get(v, i) : v;
            if (!json_is_string(s)) FAIL_BAD("stop", "'stop' must be a string or an array of strings");
            size_t sl = json_string_length(s);
            if (sl == 0 || sl > MAX_STOP_LEN || strlen(json_string_value(s)) != sl)
                FAIL_BAD("stop", "each stop string must have 1 to %d bytes (and no NUL)", MAX_STOP_LEN);
            if (!(j->stop[j->n_stop] = strdup(json_string_value(s)))) FAIL_OOM();
            j->n_stop++;
        }
    }

    j->stop_user = j->n_stop;
    if (chat) {
        CHECK(!(conv = conversation_json(root, e)));
        CHECK(request_tools(root, j, e));
        CHECK(!(prompt_text = render_chat(conv, json_array_size(json_object_get(conv, "messages")), 1, e)));
        j->think_open = prompt_opens_think(prompt_text);
        const char *end = chat_end_marker();
        if (end && j->n_stop < MAX_STOP) {
            if (!(j->stop[j->n_stop] = strdup(end))) FAIL_OOM();
            j->n_stop++;
        }
    } else {
        static const char *const chat_only[] = {"messages", "tools", "tool_choice", "chat_template_kwargs", "reasoning_effort"};
        for (size_t i = 0; i < sizeof chat_only / sizeof chat_only[0]; i++)
            if (!neutral_value(chat_only[i], json_object_get(root, chat_only[i])))
                FAIL_BAD(chat_only[i], "'%s' applies to chat completions (/v1/chat/completions)", chat_only[i]);
        json_t *p = json_object_get(root, "prompt");
        if (!p) FAIL_BAD("prompt", "'prompt' is required");
        if (json_is_array(p) && json_array_size(p) == 1) p = json_array_get(p, 0);
        if (!json_is_string(p)) FAIL_BAD("prompt", "'prompt' must be a string (or an array of one string)");
        if (!(prompt_text = strdup(json_string_value(p)))) FAIL_OOM();
    }
    for (int i = 0; i < j->n_stop; i++)
        if (strlen(j->stop[i]) > j->stop_maxlen) j->stop_maxlen = strlen(j->stop[i]);

    const char *gparam;
    CHECK(request_grammar(root, &gbnf, &gparam, e));
    /* tool_choice "required" or a name: a grammar forces the call, unless
       the request brings its own "grammar" (llama.cpp's: it is the caller's
       to make it call); a JSON response_format beside it is refused */
    int forcing = j->toolfmt && (!strcmp(j->tool_choice, "required") || (strcmp(j->tool_choice, "auto") &&
                                                                          strcmp(j->tool_choice, "none")));
    if (forcing && gbnf && strcmp(gparam, "grammar"))
        FAIL_BAD(gparam, "'%s' cannot be given with a tool_choice that forces a call (one grammar at a time)", gparam);
    if (gbnf) forcing = 0;
    if (forcing) {
        CHECK(tool_grammar(j, prompt_text, &gbnf, e));
        gparam = "tools";
    }
    if (gbnf) CHECK(!(j->grammar = grammar_acquire(gbnf, gparam, e)));
    /* constrained output after an opened <think>: the reasoning is closed
       at once unless a budget is given; the grammar starts after it (a
       forced call's grammar holds the reasoning itself: tool_grammar) */
    if (j->grammar && !forcing && j->think_open && j->reasoning_budget < 0) j->reasoning_budget = 0;

    /* Tokenize; the prompt must leave room for at least one generated token. */
    size_t plen = strlen(prompt_text);
    int cap = S.n_ctx + 1;
    j->prompt = malloc((size_t)cap * sizeof *j->prompt);
    if (!j->prompt) FAIL_OOM();
    int n = pk_model_tokenize(S.model, prompt_text, plen, j->prompt, cap, 1, 1);
    if (n < 0) FAIL_BAD(chat ? "messages" : "prompt", "the prompt could not be tokenized: %s", pk_status_str(-n));
    if (n >= S.n_ctx)
        FAIL(400, "context_length_exceeded", chat ? "messages" : "prompt",
             "the prompt has %s%d tokens; this server's context holds %d (prompt and completion)",
             n > cap ? "more than " : "", n > cap ? cap : n, S.n_ctx);
    if (n == 0) FAIL_BAD("prompt", "the prompt is empty");
    j->n_prompt = n;
    if (chat && S.recurrent && S.n_ckpt > 0) message_starts(j, conv);

    pthread_mutex_lock(&S.mu);
    uint64_t idn = ++S.id_counter;
    pthread_mutex_unlock(&S.mu);
    snprintf(j->id, sizeof j->id, "%s-%08lx%08llx", chat ? "chatcmpl" : "cmpl", (unsigned long)time(NULL),
             (unsigned long long)idn);
    j->created = (long)time(NULL);
    free(prompt_text);
    free(gbnf);
    json_decref(conv);
    return j;
fail:
    if (j) { j->refs = 1; job_unref(j); }
    free(prompt_text);
    free(gbnf);
    json_decref(conv);
    return NULL;
#undef CHECK
#undef FAIL_OOM
#undef FAIL_BAD
#undef FAIL
}

/* ---- response bodies ------------------------------------------------------------------ */

/* A refusal in the API's own error shape (its message made valid UTF-8). */
static json_t *api_error_json(const serve_api *api, api_error *e) {
    size_t n;
    char *clean = utf8_sanitize(e->msg, strlen(e->msg), &n);
    if (clean) {
        size_t k = n < sizeof e->msg ? n : utf8_complete_len(clean, sizeof e->msg - 1);
        memcpy(e->msg, clean, k);
        e->msg[k] = 0;
        free(clean);
    }
    if (!e->msg[0]) snprintf(e->msg, sizeof e->msg, "error");
    return api->error(e);
}

static mhd_result send_api_error(struct MHD_Connection *c, const serve_api *api, api_error *e) {
    return send_json(c, (unsigned)(e->status >= 400 && e->status < 600 ? e->status : 500), api_error_json(api, e));
}

static json_t *usage_json(job *const *jobs, int n) {
    int gen = 0;
    for (int i = 0; i < n; i++) gen += jobs[i]->n_gen;
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", jobs[0]->n_prompt, "completion_tokens", gen,
                     "total_tokens", jobs[0]->n_prompt + gen, "prompt_tokens_details", "cached_tokens", jobs[0]->n_cached);
}

/* llama-server's "timings" of n done jobs (mu held or the jobs done):
 * prompt_n the prompt tokens processed (cache_n those a slot held),
 * predicted_n the tokens generated (every choice's), their milliseconds
 * and speeds. */
static json_t *timings_json(job *const *jobs, int n) {
    int gen = 0;
    double gen_ms = 0;
    for (int i = 0; i < n; i++) {
        gen += jobs[i]->n_gen;
        gen_ms += jobs[i]->gen_ms;
    }
    int pn = jobs[0]->n_prompt - jobs[0]->n_cached;
    double pms = jobs[0]->prompt_ms;
    return json_pack("{s:i, s:i, s:f, s:f, s:f, s:i, s:f, s:f, s:f}", "cache_n", jobs[0]->n_cached, "prompt_n", pn,
                     "prompt_ms", pms, "prompt_per_token_ms", pn > 0 ? pms / pn : 0.0, "prompt_per_second",
                     pms > 0 ? pn * 1e3 / pms : 0.0, "predicted_n", gen, "predicted_ms", gen_ms,
                     "predicted_per_token_ms", gen > 0 ? gen_ms / gen : 0.0, "predicted_per_second",
                     gen_ms > 0 ? gen * 1e3 / gen_ms : 0.0);
}

/* A token's text: t (valid UTF-8, for "token") and its bytes. */
static json_t *token_json(int32_t id, const char *key_lp, float lp, json_t *extra) {
    char buf[256];
    int n = pk_model_token_piece(S.model, id, buf, sizeof buf);
    if (n < 0 || n > (int)sizeof buf) n = 0;
    size_t k;
    char *t = utf8_sanitize(buf, (size_t)n, &k);
    json_t *bytes = json_array();
    for (int i = 0; i < n && bytes; i++) json_array_append_new(bytes, json_integer((unsigned char)buf[i]));
    /* -inf (a token the grammar forbids) is not JSON: OpenAI's -9999 */
    json_t *o = json_pack("{s:s%, s:f, s:o}", "token", t ? t : "", t ? k : 0, key_lp, isfinite(lp) ? lp : -9999.0,
                          "bytes", bytes);
    free(t);
    if (o && extra) json_object_update(o, extra);
    json_decref(extra);
    return o;
}

/* The log-probabilities of lp[0..n): chat's {"content": [{token, logprob,
 * bytes, top_logprobs}]}, or text completions' {tokens, token_logprobs,
 * top_logprobs: [{token: logprob}], text_offset} (off: the text's bytes
 * before lp[0]). */
static json_t *logprobs_json(const job *j, const tok_lp *lp, int n, size_t off) {
    if (j->chat) {
        json_t *content = json_array();
        for (int i = 0; i < n && content; i++) {
            json_t *top = json_array();
            for (int k = 0; k < lp[i].n_top && top; k++)
                json_array_append_new(top, token_json(lp[i].top_id[k], "logprob", lp[i].top_lp[k], NULL));
            json_array_append_new(content, token_json(lp[i].id, "logprob", lp[i].lp, json_pack("{s:o}", "top_logprobs", top)));
        }
        return json_pack("{s:o}", "content", content);
    }
    json_t *toks = json_array(), *lps = json_array(), *tops = json_array(), *offs = json_array();
    for (int i = 0; i < n && toks && lps && tops && offs; i++) {
        char buf[256];
        int m = pk_model_token_piece(S.model, lp[i].id, buf, sizeof buf);
        if (m < 0 || m > (int)sizeof buf) m = 0;
        size_t k;
        char *t = utf8_sanitize(buf, (size_t)m, &k);
        json_array_append_new(toks, json_stringn(t ? t : "", t ? k : 0));
        free(t);
        json_array_append_new(lps, json_real(isfinite(lp[i].lp) ? lp[i].lp : -9999.0));
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += (size_t)m;
        json_t *top = json_object();
        for (int q = 0; q < lp[i].n_top && top; q++) {
            m = pk_model_token_piece(S.model, lp[i].top_id[q], buf, sizeof buf);
            if (m < 0 || m > (int)sizeof buf) m = 0;
            t = utf8_sanitize(buf, (size_t)m, &k);
            if (t) json_object_set_new(top, t, json_real(isfinite(lp[i].top_lp[q]) ? lp[i].top_lp[q] : -9999.0));
            free(t);
        }
        json_array_append_new(tops, top);
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", toks, "token_logprobs", lps, "top_logprobs", tops,
                     "text_offset", offs);
}

/* An OpenAI object around choice (stolen; NULL: no choices). */
static json_t *object_json(const job *j, const char *object, json_t *choice) {
    json_t *choices = json_array();
    if (choice) json_array_append_new(choices, choice);
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:o}", "id", j->id, "object", object, "created", (json_int_t)j->created,
                     "model", S.model_id, "system_fingerprint", "pocket", "choices", choices);
}

/* One streamed chunk: a chat delta (stolen) or a text piece, with finish
 * (NULL: null) and logprobs (stolen; NULL: null). */
static json_t *chunk_json(const job *j, json_t *delta, const char *text, size_t len, const char *finish, json_t *lp) {
    json_t *choice;
    if (j->chat)
        choice = json_pack("{s:i, s:o, s:o, s:s?}", "index", j->index, "delta", delta ? delta : json_object(),
                           "logprobs", lp ? lp : json_null(), "finish_reason", finish);
    else
        choice = json_pack("{s:i, s:s%, s:o, s:s?}", "index", j->index, "text", text ? text : "", text ? len : 0,
                           "logprobs", lp ? lp : json_null(), "finish_reason", finish);
    return object_json(j, j->chat ? "chat.completion.chunk" : "text_completion", choice);
}

/* What a chat answer is made of, decided as its text comes (all at once, or
 * in pieces when streamed): the reasoning (pk_chat_reasoning, when the job
 * splits), the tool calls (pk_toolcall, when it has tools) and the content.
 * Harmony's calls are known by their headers: the raw text goes to the call
 * parser first, its content to the splitter; for the other formats the
 * splitter's content goes to the call parser. emit (may be NULL) is told
 * each new piece. */
enum { OUT_CONTENT, OUT_REASONING, OUT_CALL, OUT_ARGS };
typedef struct outsplit {
    pk_chat_reasoning *r;
    pk_toolcall *tc;
    int harmony;
    int one_call;               /* calls after the first are dropped */
    size_t sent_c, sent_r;
    int (*emit)(void *ctx, int kind, int index, const char *id, const char *text, size_t len);
    void *ctx;
} outsplit;

static void outsplit_free(outsplit *o) {
    pk_chat_reasoning_free(o->r);
    pk_toolcall_free(o->tc);
    memset(o, 0, sizeof *o);
}

static int outsplit_init(outsplit *o, const job *j, pk_error *err) {
    memset(o, 0, sizeof *o);
    if (j->split) {
        if (pk_chat_reasoning_new(S.chat_template, &o->r, err)) return -1;
        /* the template opened <think>: the text starts inside it */
        if (j->think_open && pk_chat_reasoning_feed(o->r, "<think>", 7, 0)) goto fail;
    }
    if (j->toolfmt) {
        if (pk_toolcall_new(j->toolfmt, j->tc_seed, &o->tc, err) ||
            pk_toolcall_set_tools(o->tc, j->tools_json, strlen(j->tools_json), err))
            goto fail;
        o->harmony = !strcmp(j->toolfmt, "harmony");
        o->one_call = j->one_call;
    }
    return 0;
fail:
    outsplit_free(o);
    return -1;
}

static int out_emit(outsplit *o, int kind, int index, const char *id, const char *t, size_t n) {
    if (o->one_call && index > 0) return 0;
    return o->emit && (n || kind == OUT_CALL) ? o->emit(o->ctx, kind, index, id, t, n) : 0;
}

static int out_reason(outsplit *o, const char *t, size_t n, int final);

/* text for the call parser; its content goes on to the splitter (harmony)
 * or out */
static int out_calls(outsplit *o, const char *t, size_t n, int final) {
    if (pk_toolcall_feed(o->tc, t, n, final)) return -1;
    pk_toolcall_event ev;
    while (pk_toolcall_next(o->tc, &ev)) {
        int bad = 0;
        if (ev.kind == PK_TOOLCALL_CONTENT)
            bad = o->harmony ? out_reason(o, ev.text, ev.len, 0) : out_emit(o, OUT_CONTENT, -1, NULL, ev.text, ev.len);
        else if (ev.kind == PK_TOOLCALL_START)
            bad = out_emit(o, OUT_CALL, ev.index, ev.id, ev.text, ev.len);
        else if (ev.kind == PK_TOOLCALL_ARGS)
            bad = out_emit(o, OUT_ARGS, ev.index, NULL, ev.text, ev.len);
        if (bad) return -1;
    }
    return o->harmony && final ? out_reason(o, "", 0, 1) : 0;
}

static int out_content(outsplit *o, const char *t, size_t n, int final) {
    if (o->tc && !o->harmony) return out_calls(o, t, n, final);
    return out_emit(o, OUT_CONTENT, -1, NULL, t, n);
}

static int out_reason(outsplit *o, const char *t, size_t n, int final) {
    if (!o->r) return out_content(o, t, n, final);
    if (pk_chat_reasoning_feed(o->r, t, n, final)) return -1;
    size_t rl, cl;
    const char *r = pk_chat_reasoning_text(o->r, &rl), *c = pk_chat_reasoning_content(o->r, &cl);
    if (rl > o->sent_r && out_emit(o, OUT_REASONING, -1, NULL, r + o->sent_r, rl - o->sent_r)) return -1;
    o->sent_r = rl;
    size_t from = o->sent_c;
    o->sent_c = cl;
    return cl > from || final ? out_content(o, c + from, cl - from, final) : 0;
}

/* The next piece of the job's text (final: the last, may be empty). */
static int outsplit_feed(outsplit *o, const char *t, size_t n, int final) {
    return o->tc && o->harmony ? out_calls(o, t, n, final) : out_reason(o, t, n, final);
}

/* The answer's content (after the whole text was fed; text: the job's). */
static const char *outsplit_content(const outsplit *o, const char *text, size_t len, size_t *n) {
    if (o->tc && !o->harmony) return pk_toolcall_content(o->tc, n);
    if (o->r) return pk_chat_reasoning_content(o->r, n);
    if (o->tc) return pk_toolcall_content(o->tc, n);
    *n = len;
    return text;
}

/* Whether the calls made satisfy the request's tool_choice (after the whole
 * text): 0, or -1 with e filled. */
static int check_tool_choice(const job *j, const outsplit *o, api_error *e) {
    if (!o->tc || !strcmp(j->tool_choice, "auto") || !j->tool_choice[0]) return 0;
    pk_error err = {0};
    if (!pk_toolcall_check_choice(o->tc, j->tool_choice, &err)) return 0;
    api_fail(e, 500, "tool_choice", "the model did not follow tool_choice: %s", err.msg);
    return -1;
}

/* The request's stop string that ended the text (NULL: none, or the
   template's end of turn): choice.stop_sequence, pocket's addition to
   OpenAI's shape, which the Anthropic translator reports. */
static json_t *stop_sequence_json(const job *j) {
    return j->stop_hit >= 0 && j->stop_hit < j->stop_user ? json_string(j->stop[j->stop_hit]) : NULL;
}

static const char *finish_reason(const job *j, const outsplit *o) {
    return o->tc && pk_toolcall_count(o->tc) > 0 && !strcmp(j->finish, "stop") ? "tool_calls" : j->finish;
}

static json_t *json_text(const char *s, size_t n) {
    size_t k;
    char *t = utf8_sanitize(s, n, &k);
    json_t *v = t ? json_stringn(t, k) : NULL;
    free(t);
    return v;
}

/* A done job's choice of the chat.completion (text_completion); NULL with
 * e filled. */
static json_t *choice_json(const job *j, api_error *e) {
    const char *text = j->text ? j->text : "";
    json_t *lp = j->logprobs ? logprobs_json(j, j->lp, j->n_lp, 0) : json_null();
    if (!j->chat)
        return json_pack("{s:i, s:o, s:o, s:s, s:o*}", "index", j->index, "text", json_text(text, j->len), "logprobs", lp,
                         "finish_reason", j->finish, "stop_sequence", stop_sequence_json(j));
    outsplit o;
    pk_error err = {0};
    if (outsplit_init(&o, j, &err) || outsplit_feed(&o, text, j->len, 1)) {
        api_fail(e, 500, NULL, "the answer could not be read: %s", err.msg[0] ? err.msg : "out of memory");
        outsplit_free(&o);
        json_decref(lp);
        return NULL;
    }
    if (check_tool_choice(j, &o, e)) { outsplit_free(&o); json_decref(lp); return NULL; }
    size_t cl, rl = 0;
    const char *c = outsplit_content(&o, text, j->len, &cl);
    const char *r = o.r ? pk_chat_reasoning_text(o.r, &rl) : NULL;
    int n_calls = o.tc ? pk_toolcall_count(o.tc) : 0;
    if (o.one_call && n_calls > 1) n_calls = 1;
    json_t *m = json_pack("{s:s, s:o}", "role", "assistant", "content", n_calls && !cl ? json_null() : json_text(c, cl));
    if (m && rl) json_object_set_new(m, "reasoning_content", json_text(r, rl));
    if (m && n_calls) {
        json_t *calls = json_array();
        for (int i = 0; i < n_calls; i++) {
            pk_toolcall_call tc;
            if (pk_toolcall_get(o.tc, i, &tc)) continue;
            json_array_append_new(calls, json_pack("{s:o, s:s, s:{s:o, s:o}}", "id", json_text(tc.id, strlen(tc.id)),
                                                   "type", "function", "function", "name", json_text(tc.name, strlen(tc.name)),
                                                   "arguments", json_text(tc.arguments, tc.arguments_len)));
        }
        json_object_set_new(m, "tool_calls", calls);
    }
    const char *fin = finish_reason(j, &o);
    outsplit_free(&o);
    json_t *choice = json_pack("{s:i, s:o, s:o, s:s, s:o*}", "index", j->index, "message", m, "logprobs", lp,
                               "finish_reason", fin, "stop_sequence", stop_sequence_json(j));
    if (!choice) api_fail(e, 500, NULL, "out of memory");
    return choice;
}

/* The chat.completion (text_completion) of n done jobs; NULL with e. */
static json_t *completion_json(job *const *jobs, int n, api_error *e) {
    json_t *o = object_json(jobs[0], jobs[0]->chat ? "chat.completion" : "text_completion", NULL);
    json_t *choices = json_object_get(o, "choices");
    for (int i = 0; o && i < n; i++) {
        json_t *c = choice_json(jobs[i], e);
        if (!c) { json_decref(o); return NULL; }
        json_array_append_new(choices, c);
    }
    if (o) {
        json_object_set_new(o, "usage", usage_json(jobs, n));
        json_object_set_new(o, "timings", timings_json(jobs, n));
    } else {
        api_fail(e, 500, NULL, "out of memory");
    }
    return o;
}

/* ---- streaming ------------------------------------------------------------------------ */

typedef struct choice_stream {
    size_t sent;                /* job text bytes already fed */
    int n_lp_sent;              /* its log-probabilities already sent */
    size_t lp_off;              /* text bytes of those (text completions' text_offset) */
    int ended;                  /* its finish chunk is out */
    outsplit os;
} choice_stream;

typedef struct stream {
    job *jobs[MAX_N];
    int n;
    const serve_api *api;
    void *ast;                  /* the API's stream state */
    json_t *body;               /* the request as sent (the API's) */
    struct MHD_Connection *conn;
    api_buf out;                /* the API's bytes not yet handed to MHD */
    size_t out_pos;
    int started, finished;
    choice_stream cs[MAX_N];
    int cur;                    /* the choice being fed */
    json_t *lp_pending;         /* its log-probabilities, for the next chunk */
    serve_access acc;           /* the request's access log line (acc.status 0: none to write) */
} stream;

/* An OpenAI chunk (stolen) through the API. */
static int out_chunk(stream *st, json_t *chunk) {
    if (!chunk) return -1;
    int r = st->api->stream_chunk(st->ast, chunk, NULL, &st->out);
    json_decref(chunk);
    return r || st->out.oom ? -1 : 0;
}

/* outsplit's emit: a delta of the choice being fed. */
static int stream_emit(void *ctx, int kind, int index, const char *id, const char *t, size_t n) {
    stream *st = ctx;
    job *j = st->jobs[st->cur];
    json_t *delta = NULL, *lp = st->lp_pending;
    st->lp_pending = NULL;
    if (kind == OUT_CONTENT || kind == OUT_REASONING) {
        if (!j->chat) {
            size_t k;
            char *v = utf8_sanitize(t, n, &k);
            int bad = !v || out_chunk(st, chunk_json(j, NULL, v, k, NULL, lp));
            if (!v) json_decref(lp);
            free(v);
            return bad ? -1 : 0;
        }
        delta = json_pack("{s:o}", kind == OUT_CONTENT ? "content" : "reasoning_content", json_text(t, n));
    } else if (kind == OUT_CALL) {
        delta = json_pack("{s:[{s:i, s:o, s:s, s:{s:o, s:s}}]}", "tool_calls", "index", index, "id",
                          json_text(id, strlen(id)), "type", "function", "function", "name", json_text(t, n),
                          "arguments", "");
    } else {
        delta = json_pack("{s:[{s:i, s:{s:o}}]}", "tool_calls", "index", index, "function", "arguments", json_text(t, n));
    }
    if (!delta) { json_decref(lp); return -1; }
    return out_chunk(st, chunk_json(j, delta, NULL, 0, NULL, lp));
}

/* New text t[0..n) of choice i (final: the end of it), with its tokens'
 * log-probabilities lp[0..n_lp). */
static int stream_piece(stream *st, int i, const char *t, size_t n, const tok_lp *lp, int n_lp, int final) {
    job *j = st->jobs[i];
    choice_stream *cs = &st->cs[i];
    st->cur = i;
    if (n_lp > 0) {
        st->lp_pending = logprobs_json(j, lp, n_lp, cs->lp_off);
        for (int k = 0; k < n_lp; k++) {
            char buf[256];
            int m = pk_model_token_piece(S.model, lp[k].id, buf, sizeof buf);
            if (m > 0) cs->lp_off += (size_t)m;
        }
    }
    int bad = outsplit_feed(&cs->os, t, n, final);
    if (!bad && st->lp_pending) {   /* no piece came out yet: the log-probabilities alone */
        json_t *lpj = st->lp_pending;
        st->lp_pending = NULL;
        bad = out_chunk(st, chunk_json(j, j->chat ? json_object() : NULL, j->chat ? NULL : "", 0, NULL, lpj));
    }
    json_decref(st->lp_pending);
    st->lp_pending = NULL;
    return bad ? -1 : 0;
}

/* The end of choice i (done): the rest of its text decided, its finish
 * chunk; -1 with *msg set when it failed (or broke tool_choice). */
static int stream_end_choice(stream *st, int i, char *msg, size_t cap) {
    job *j = st->jobs[i];
    choice_stream *cs = &st->cs[i];
    cs->ended = 1;
    if (!j->finish) {
        snprintf(msg, cap, "generation failed: %s", j->err[0] ? j->err : "cancelled");
        return -1;
    }
    if (stream_piece(st, i, "", 0, NULL, 0, 1)) { snprintf(msg, cap, "out of memory"); return -1; }
    api_error e = {0};
    if (check_tool_choice(j, &cs->os, &e)) { snprintf(msg, cap, "%s", e.msg); return -1; }
    json_t *last = chunk_json(j, j->chat ? json_object() : NULL, NULL, 0, finish_reason(j, &cs->os), NULL);
    json_t *seq = stop_sequence_json(j);
    if (seq) json_object_set_new(json_array_get(json_object_get(last, "choices"), 0), "stop_sequence", seq);
    if (out_chunk(st, last)) {
        snprintf(msg, cap, "out of memory");
        return -1;
    }
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    while (st->out_pos == st->out.n) {
        st->out_pos = st->out.n = 0;
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!st->started) {
            st->started = 1;
            for (int i = 0; i < st->n; i++) {
                job *j = st->jobs[i];
                json_t *delta = j->chat ? json_pack("{s:s, s:s}", "role", "assistant", "content", "") : NULL;
                if (out_chunk(st, chunk_json(j, delta, j->chat ? NULL : "", 0, NULL, NULL)))
                    return MHD_CONTENT_READER_END_WITH_ERROR;
            }
            continue;
        }
        pthread_mutex_lock(&S.mu);
        for (;;) {
            int i, n_ended = 0, progressed = 0;
            char msg[600];
            for (i = 0; i < st->n; i++) {
                job *j = st->jobs[i];
                choice_stream *cs = &st->cs[i];
                n_ended += cs->ended;
                if (cs->ended) continue;
                if (j->released > cs->sent || j->n_lp > cs->n_lp_sent) {
                    /* the bytes are the job's until it is done: copy them out of the lock */
                    size_t n = j->released - cs->sent;
                    int n_lp = j->n_lp - cs->n_lp_sent;
                    char *t = malloc(n + 1);
                    tok_lp *lp = n_lp ? malloc((size_t)n_lp * sizeof *lp) : NULL;
                    if (t) memcpy(t, j->text + cs->sent, n);
                    if (lp) memcpy(lp, j->lp + cs->n_lp_sent, (size_t)n_lp * sizeof *lp);
                    cs->sent = j->released;
                    cs->n_lp_sent = j->n_lp;
                    pthread_mutex_unlock(&S.mu);
                    int bad = !t || (n_lp && !lp) || stream_piece(st, i, t, n, lp, n_lp, 0);
                    free(t);
                    free(lp);
                    if (bad) return MHD_CONTENT_READER_END_WITH_ERROR;
                    pthread_mutex_lock(&S.mu);
                    progressed = 1;
                    break;
                }
                if (j->state == JOB_DONE) {
                    pthread_mutex_unlock(&S.mu);
                    int bad = stream_end_choice(st, i, msg, sizeof msg);
                    if (bad) {
                        if (st->api->stream_chunk(st->ast, NULL, msg, &st->out) || st->out.oom)
                            return MHD_CONTENT_READER_END_WITH_ERROR;
                        st->finished = 1;
                        goto next;
                    }
                    pthread_mutex_lock(&S.mu);
                    progressed = 1;
                    n_ended++;
                    break;
                }
            }
            if (n_ended == st->n) {
                json_t *u = object_json(st->jobs[0], st->jobs[0]->chat ? "chat.completion.chunk" : "text_completion", NULL);
                if (u) {
                    json_object_set_new(u, "usage", usage_json(st->jobs, st->n));
                    json_object_set_new(u, "timings", timings_json(st->jobs, st->n));
                }
                pthread_mutex_unlock(&S.mu);
                if (out_chunk(st, u) || st->api->stream_chunk(st->ast, NULL, NULL, &st->out) || st->out.oom)
                    return MHD_CONTENT_READER_END_WITH_ERROR;
                st->finished = 1;
                break;
            }
            if (progressed) {
                if (st->out.n) { pthread_mutex_unlock(&S.mu); break; }
                continue;   /* all held back */
            }
            timed_wait(st->jobs[0]->wake, WAIT_MS);
            pthread_mutex_unlock(&S.mu);
            int gone = client_gone(st->conn);
            pthread_mutex_lock(&S.mu);
            if (gone) {
                for (i = 0; i < st->n; i++) job_cancel_locked(st->jobs[i]);
                pthread_mutex_unlock(&S.mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
    next:;
    }
    size_t n = st->out.n - st->out_pos < max ? st->out.n - st->out_pos : max;
    memcpy(buf, st->out.p + st->out_pos, n);
    st->out_pos += n;
    return (ssize_t)n;
}

static void jobs_release(job **jobs, int n) {
    pthread_mutex_lock(&S.mu);
    for (int i = n - 1; i >= 0; i--) {
        job_cancel_locked(jobs[i]);
        job_unref_locked(jobs[i]);
    }
    pthread_mutex_unlock(&S.mu);
}

static void stream_free(void *cls) {
    stream *st = cls;
    pthread_mutex_lock(&S.mu);
    access_jobs_locked(&st->acc, st->jobs, st->n);
    pthread_mutex_unlock(&S.mu);
    jobs_release(st->jobs, st->n);
    if (st->acc.status) access_write(&st->acc);
    for (int i = 0; i < st->n; i++) outsplit_free(&st->cs[i].os);
    if (st->ast) st->api->stream_free(st->ast);
    json_decref(st->body);
    free(st->out.p);
    free(st);
}

/* ---- endpoints ------------------------------------------------------------------------ */

/* Whether api is OpenAI's own (its "model" is checked). */
static int api_is_openai(const serve_api *api) {
    return api == &serve_api_openai_chat || api == &serve_api_openai_completions;
}

/* The jobs of a request (root: the OpenAI request): n of them (its "n"),
 * the first their leader. Returns n, or 0 with e filled. */
static int request_jobs(const json_t *root, int chat, job **jobs, api_error *e) {
    json_t *v = json_object_get(root, "n");
    int n = 1;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > MAX_N) {
            api_fail(e, 400, "n", "'n' must be an integer in [1, %d]", MAX_N);
            return 0;
        }
        n = (int)json_integer_value(v);
    }
    for (int i = 0; i < n; i++) {
        if (!(jobs[i] = parse_request(root, chat, i, e))) {
            for (int k = 0; k < i; k++) { jobs[k]->refs = 1; job_unref(jobs[k]); }
            return 0;
        }
        if (i) {
            snprintf(jobs[i]->id, sizeof jobs[i]->id, "%s", jobs[0]->id);
            jobs[i]->created = jobs[0]->created;
        }
    }
    return n;
}

/* Queue n jobs (one request's choices); 0, or -1 when the server has not
 * room for them all (parallel + queue). */
static int submit(job **jobs, int n) {
    pthread_mutex_lock(&S.mu);
    if (S.shutdown || S.n_running + S.n_waiting + n > S.n_parallel + S.n_queue) {
        S.rejected_busy_total++;
        pthread_mutex_unlock(&S.mu);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        job *j = jobs[i];
        j->refs = 2;    /* the connection and the worker */
        if (i) {
            j->leader = jobs[0];
            j->wake = &jobs[0]->cv;
            jobs[0]->refs++;
        }
        j->state = JOB_QUEUED;
        j->t_submit = now();
        j->next = NULL;
        if (S.tail) S.tail->next = j; else S.head = j;
        S.tail = j;
        S.n_waiting++;
    }
    dispatch_locked();
    pthread_mutex_unlock(&S.mu);
    return 0;
}

/* A completion request in api's form: translated, run, answered. */
static mhd_result handle_api(struct MHD_Connection *c, request *rq, const serve_api *api) {
    api_error e = {0};
    job *jobs[MAX_N];
    int chat = 1, n = 0;
    json_t *oreq = NULL, *body = parse_body(rq->body ? rq->body : "", rq->len, &e);
    if (body) oreq = api->request(body, &S.info, &chat, &e);
    if (oreq && api_is_openai(api) && check_model(oreq, &e)) { json_decref(oreq); oreq = NULL; }
    if (oreq) n = request_jobs(oreq, chat, jobs, &e);
    json_decref(oreq);
    if (!n) {
        json_decref(body);
        return send_api_error(c, api, &e);
    }
    if (submit(jobs, n)) {
        for (int i = 0; i < n; i++) { jobs[i]->refs = 1; job_unref(jobs[i]); }
        json_decref(body);
        api_fail(&e, 503, NULL, "the server is busy (%d generating, %d queued); retry later", S.n_parallel, S.n_queue);
        set_code(&e, "server_busy");
        return send_api_error(c, api, &e);
    }
    if (jobs[0]->stream) {
        stream *st = calloc(1, sizeof *st);
        int ok = st != NULL;
        pk_error serr = {0};
        if (st) {
            memcpy(st->jobs, jobs, (size_t)n * sizeof *jobs);
            st->n = n;
            st->api = api;
            st->body = body;
            st->conn = c;
            for (int i = 0; i < n && ok; i++) {
                ok = !outsplit_init(&st->cs[i].os, jobs[i], &serr);
                st->cs[i].os.emit = stream_emit;
                st->cs[i].os.ctx = st;
            }
            if (ok) ok = (st->ast = api->stream_new(body, &S.info)) != NULL;
        }
        struct MHD_Response *r = ok ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free) : NULL;
        if (!r) {
            if (st) stream_free(st);
            else { jobs_release(jobs, n); json_decref(body); }
            api_fail(&e, 500, NULL, "out of memory");
            return send_api_error(c, api, &e);
        }
        if (cur_rq) {
            st->acc = cur_rq->acc;
            st->acc.status = 200;
            cur_rq->streamed = 1;
        }
        MHD_add_response_header(r, "Content-Type", api->stream_type);
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        return send_response(c, 200, r);
    }
    /* Not streamed: wait here (this connection's own thread), watching the socket. */
    pthread_mutex_lock(&S.mu);
    for (;;) {
        int done = 0;
        for (int i = 0; i < n; i++) done += jobs[i]->state == JOB_DONE;
        if (done == n) break;
        timed_wait(jobs[0]->wake, WAIT_MS);
        pthread_mutex_unlock(&S.mu);
        int gone = client_gone(c);
        pthread_mutex_lock(&S.mu);
        if (gone) {
            pthread_mutex_unlock(&S.mu);
            jobs_release(jobs, n);
            json_decref(body);
            return MHD_NO;
        }
    }
    pthread_mutex_unlock(&S.mu);
    mhd_result ret;
    int failed = -1;
    for (int i = 0; i < n && failed < 0; i++)
        if (!jobs[i]->finish) failed = i;
    if (failed >= 0) {
        api_fail(&e, S.shutdown ? 503 : 500, NULL, "generation failed: %s",
                 jobs[failed]->err[0] ? jobs[failed]->err : "cancelled");
        ret = send_api_error(c, api, &e);
    } else {
        json_t *comp = completion_json(jobs, n, &e), *resp = comp ? api->response(body, comp, &S.info) : NULL;
        json_decref(comp);
        if (comp && !resp) api_fail(&e, 500, NULL, "out of memory");
        ret = resp ? send_json(c, 200, resp) : send_api_error(c, api, &e);
    }
    pthread_mutex_lock(&S.mu);
    if (cur_rq) access_jobs_locked(&cur_rq->acc, jobs, n);
    pthread_mutex_unlock(&S.mu);
    jobs_release(jobs, n);
    json_decref(body);
    return ret;
}

/* llama-server's /apply-template: {messages, tools?, chat_template_kwargs?,
 * reasoning_effort?} -> {"prompt": the text the model would be given}. */
static mhd_result handle_apply_template(struct MHD_Connection *c, request *rq) {
    api_error e = {0};
    json_t *conv = NULL, *root = parse_body(rq->body ? rq->body : "", rq->len, &e);
    char *text = NULL;
    if (root && (conv = conversation_json(root, &e)))
        text = render_chat(conv, json_array_size(json_object_get(conv, "messages")), 1, &e);
    json_decref(conv);
    json_decref(root);
    if (!text) return send_api_error(c, &serve_api_openai_chat, &e);
    json_t *v = json_pack("{s:o}", "prompt", json_text(text, strlen(text)));
    free(text);
    return send_json(c, 200, v);
}

/* Anthropic's POST /v1/messages/count_tokens: the body translated as
 * /v1/messages translates it (tools/serve_anthropic.h), its prompt rendered
 * and tokenized as a request's would be: {"input_tokens": N}. */
static json_t *anthropic_count_json(const char *body, size_t blen, api_error *e) {
    json_t *conv = NULL, *oreq = NULL, *root = parse_body(body, blen, e);
    char *text = NULL;
    if (root) oreq = anthropic_count_request(root, &S.info, e);
    if (oreq && (conv = conversation_json(oreq, e)))
        text = render_chat(conv, json_array_size(json_object_get(conv, "messages")), 1, e);
    json_decref(conv);
    json_decref(oreq);
    json_decref(root);
    if (!text) return NULL;
    size_t len = strlen(text);
    int32_t *tok = len + 2 <= (size_t)INT_MAX ? malloc((len + 2) * sizeof *tok) : NULL;
    int n = tok ? pk_model_tokenize(S.model, text, len, tok, (int)len + 2, 1, 1) : -PK_ERR_NOMEM;
    free(tok);
    free(text);
    if (n == -PK_ERR_NOMEM) { api_fail(e, 500, NULL, "out of memory"); return NULL; }
    if (n < 0) { api_fail(e, 400, "messages", "the prompt could not be tokenized: %s", pk_status_str(-n)); return NULL; }
    json_t *v = anthropic_count_response(n);
    if (!v) api_fail(e, 500, NULL, "out of memory");
    return v;
}

static mhd_result handle_anthropic_count(struct MHD_Connection *c, request *rq) {
    api_error e = {0};
    json_t *v = anthropic_count_json(rq->body ? rq->body : "", rq->len, &e);
    return v ? send_json(c, 200, v) : send_api_error(c, &serve_api_anthropic, &e);
}

static mhd_result handle_metrics(struct MHD_Connection *c) {
    size_t cap = 16384, k = 0;
    char *b = malloc(cap);
    if (!b) return MHD_NO;
#define P(...) do { int w_ = snprintf(b + k, cap - k, __VA_ARGS__); if (w_ > 0) k += (size_t)w_ < cap - k ? (size_t)w_ : cap - k - 1; } while (0)
    pthread_mutex_lock(&S.mu);
    P("# HELP pocket_requests_total HTTP requests answered, by status code.\n# TYPE pocket_requests_total counter\n");
    for (int s = 100; s < 600; s++)
        if (S.status_count[s]) P("pocket_requests_total{status=\"%d\"} %llu\n", s, (unsigned long long)S.status_count[s]);
    P("# HELP pocket_prompt_tokens_total Prompt tokens processed (those served from a cache not counted).\n"
      "# TYPE pocket_prompt_tokens_total counter\npocket_prompt_tokens_total %llu\n", (unsigned long long)S.prompt_tokens_total);
    P("# HELP pocket_prompt_tokens_cached_total Prompt tokens served from a slot or a stored state, not processed.\n"
      "# TYPE pocket_prompt_tokens_cached_total counter\npocket_prompt_tokens_cached_total %llu\n",
      (unsigned long long)S.prompt_tokens_cached_total);
    P("# HELP pocket_generated_tokens_total Tokens generated.\n# TYPE pocket_generated_tokens_total counter\n"
      "pocket_generated_tokens_total %llu\n", (unsigned long long)S.gen_tokens_total);
    P("# HELP pocket_tokens_per_second Generation speed per sequence since start.\n# TYPE pocket_tokens_per_second gauge\n"
      "pocket_tokens_per_second %.3f\n", S.gen_seconds_total > 0 ? S.gen_tokens_total / S.gen_seconds_total : 0.0);
    P("# HELP pocket_prompt_tokens_per_second Prompt processing speed since start.\n# TYPE pocket_prompt_tokens_per_second gauge\n"
      "pocket_prompt_tokens_per_second %.3f\n", S.prompt_seconds_total > 0 ? S.prompt_tokens_total / S.prompt_seconds_total : 0.0);
    uint64_t tok = 0, bytes = 0;
    for (int i = 0; i < S.n_parallel; i++) { tok += S.slots[i].st_tokens; bytes += S.slots[i].st_bytes; }
    P("# HELP pocket_weight_bytes_per_token Weight bytes read per decoded token (all slots, since start).\n"
      "# TYPE pocket_weight_bytes_per_token gauge\npocket_weight_bytes_per_token %.1f\n", tok ? (double)bytes / tok : 0.0);
    P("# HELP pocket_requests_cancelled_total Generations cancelled because the client went away.\n"
      "# TYPE pocket_requests_cancelled_total counter\npocket_requests_cancelled_total %llu\n", (unsigned long long)S.cancelled_total);
    P("# HELP pocket_requests_rejected_total Requests rejected because the queue was full.\n"
      "# TYPE pocket_requests_rejected_total counter\npocket_requests_rejected_total %llu\n", (unsigned long long)S.rejected_busy_total);
    P("# HELP pocket_queue_depth Requests waiting for a slot.\n# TYPE pocket_queue_depth gauge\npocket_queue_depth %d\n", S.n_waiting);
    P("# HELP pocket_busy_slots Slots generating.\n# TYPE pocket_busy_slots gauge\npocket_busy_slots %d\n", S.n_running);
    P("# HELP pocket_slots Parallel sequences (--parallel).\n# TYPE pocket_slots gauge\npocket_slots %d\n", S.n_parallel);
    P("# HELP pocket_queue_capacity Queue bound (--queue).\n# TYPE pocket_queue_capacity gauge\npocket_queue_capacity %d\n", S.n_queue);
    int ckpts = 0;
    for (int i = 0; i < S.n_parallel; i++) ckpts += S.slots[i].st_ckpts;
    P("# HELP pocket_context_checkpoints Recurrent-state checkpoints held by the slots.\n"
      "# TYPE pocket_context_checkpoints gauge\npocket_context_checkpoints %d\n", ckpts);
    P("# HELP pocket_context_checkpoint_bytes Bytes of the checkpoints held by the slots.\n"
      "# TYPE pocket_context_checkpoint_bytes gauge\npocket_context_checkpoint_bytes %llu\n",
      (unsigned long long)(S.ckpt_bytes * (uint64_t)ckpts));
    pthread_mutex_unlock(&S.mu);
    pcache_stats cs;
    pcache_get_stats(S.cache, &cs);
    P("# HELP pocket_cache_states Conversation states stored (--cache-ram, --cache-dir).\n# TYPE pocket_cache_states gauge\n"
      "pocket_cache_states{store=\"ram\"} %d\npocket_cache_states{store=\"dir\"} %d\n", cs.ram_states, cs.file_states);
    P("# HELP pocket_cache_bytes Bytes of the stored states.\n# TYPE pocket_cache_bytes gauge\n"
      "pocket_cache_bytes{store=\"ram\"} %llu\npocket_cache_bytes{store=\"dir\"} %llu\n",
      (unsigned long long)cs.ram_bytes, (unsigned long long)cs.file_bytes);
    P("# HELP pocket_cache_saves_total States stored when their slot was reused.\n# TYPE pocket_cache_saves_total counter\n"
      "pocket_cache_saves_total %llu\n", (unsigned long long)cs.saves);
    P("# HELP pocket_cache_restores_total States loaded into a slot.\n# TYPE pocket_cache_restores_total counter\n"
      "pocket_cache_restores_total{store=\"ram\"} %llu\npocket_cache_restores_total{store=\"dir\"} %llu\n",
      (unsigned long long)cs.restores_ram, (unsigned long long)cs.restores_file);
    P("# HELP pocket_cache_refused_total Stored states refused at load (corrupt, foreign), not used.\n"
      "# TYPE pocket_cache_refused_total counter\npocket_cache_refused_total %llu\n", (unsigned long long)cs.refused);
#undef P
    mhd_result r = send_buffer(c, 200, "text/plain; version=0.0.4; charset=utf-8", b, k);
    free(b);
    return r;
}

static json_t *models_json(void) {
    return json_pack("{s:s, s:[o]}", "object", "list", "data", misc_model_json(&S.info));
}

/* /props: llama-server's, as far as it applies. */
static json_t *props_json(void) {
    misc_props p = {.chat_format = S.chat_template, .n_parallel = S.n_parallel, .sp = S.sp, .seed_given = S.seed_given};
    return misc_props_json(S.model, &S.info, &p);
}

/* /slots: what each slot holds and does; *idle: how many are idle. */
static json_t *slots_json(int *idle) {
    misc_slot *v = calloc((size_t)S.n_parallel, sizeof *v);
    if (!v) return NULL;
    *idle = 0;
    pthread_mutex_lock(&S.mu);
    for (int i = 0; i < S.n_parallel; i++) {
        const slot *s = &S.slots[i];
        const job *j = s->job;
        /* an idle slot's context is not touched while mu is held (choose_slot_locked reads it too) */
        v[i] = (misc_slot){.id = i, .n_ctx = S.n_ctx, .is_processing = j != NULL,
                           .n_tokens = j ? s->held : pk_context_pos(s->ctx), .n_checkpoints = s->st_ckpts};
        if (!j) { (*idle)++; continue; }
        snprintf(v[i].request_id, sizeof v[i].request_id, "%s", j->id);
        v[i].n_prompt = j->n_prompt;
        v[i].n_decoded = j->n_gen;
        v[i].max_tokens = j->max_tokens;
    }
    pthread_mutex_unlock(&S.mu);
    json_t *out = misc_slots_json(v, S.n_parallel);
    free(v);
    return out;
}

/* OPTIONS: 204 with Allow (the path's methods); a CORS preflight from an
 * origin --cors allows gets the Access-Control-Allow-* answer too (the
 * origin itself: send_response). Without --cors, or from another origin,
 * the browser finds no permission and refuses the request, as before. */
static mhd_result handle_options(struct MHD_Connection *c, int get, int post) {
    char allow[64], hdrs[1024];
    snprintf(allow, sizeof allow, "%s%sOPTIONS", get ? "GET, HEAD, " : "", post ? "POST, " : "");
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Allow", allow);
    const char *origin = cors_allowed(&S.cors, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"));
    if (origin && MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
        cors_allow_headers(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers"), hdrs,
                           sizeof hdrs);
        MHD_add_response_header(r, "Access-Control-Allow-Methods", allow);
        MHD_add_response_header(r, "Access-Control-Allow-Headers", hdrs);
        MHD_add_response_header(r, "Access-Control-Max-Age", "7200");
        /* Chromium's private network access: a public page calling a server on this machine */
        if (MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Private-Network"))
            MHD_add_response_header(r, "Access-Control-Allow-Private-Network", "true");
    }
    return send_response(c, 204, r);
}

/* Route ids. */
enum { R_NONE, R_INDEX, R_HEALTH, R_METRICS, R_MODELS, R_API, R_APPLY_TEMPLATE, R_MODEL, R_TOKENIZE, R_DETOKENIZE,
       R_PROPS, R_SLOTS, R_ANTHROPIC_COUNT, R_OLLAMA_TAGS, R_OLLAMA_PS, R_OLLAMA_VERSION, R_OLLAMA_SHOW };

/* Ollama's endpoints beside /api/chat and /api/generate (tools/serve_ollama.c). */
#define R_IS_OLLAMA(r) ((r) >= R_OLLAMA_TAGS && (r) <= R_OLLAMA_SHOW)

/* The endpoints: a completion endpoint (R_API) is its API's translation
 * (an API whose file is not built in has no address: no route). */
static const struct route_entry {
    const char *path, *method;
    int id;
    const serve_api *api;
} ROUTES[] = {
    {"/", "GET", R_INDEX, NULL}, {"/index.html", "GET", R_INDEX, NULL}, {"/health", "GET", R_HEALTH, NULL},
    {"/metrics", "GET", R_METRICS, NULL}, {"/v1/models", "GET", R_MODELS, NULL}, {"/models", "GET", R_MODELS, NULL},
    {"/apply-template", "POST", R_APPLY_TEMPLATE, NULL},
    {"/tokenize", "POST", R_TOKENIZE, NULL}, {"/detokenize", "POST", R_DETOKENIZE, NULL},
    {"/props", "GET", R_PROPS, NULL}, {"/slots", "GET", R_SLOTS, NULL},
    {"/v1/chat/completions", "POST", R_API, &serve_api_openai_chat},
    {"/chat/completions", "POST", R_API, &serve_api_openai_chat},
    {"/v1/completions", "POST", R_API, &serve_api_openai_completions},
    {"/completions", "POST", R_API, &serve_api_openai_completions},
    {"/v1/messages", "POST", R_API, &serve_api_anthropic},
    {"/v1/messages/count_tokens", "POST", R_ANTHROPIC_COUNT, &serve_api_anthropic},
    {"/v1/responses", "POST", R_API, &serve_api_responses},
    {"/api/chat", "POST", R_API, &serve_api_ollama_chat},
    {"/api/generate", "POST", R_API, &serve_api_ollama_generate},
    {"/api/tags", "GET", R_OLLAMA_TAGS, &serve_api_ollama_chat}, {"/api/ps", "GET", R_OLLAMA_PS, &serve_api_ollama_chat},
    {"/api/version", "GET", R_OLLAMA_VERSION, &serve_api_ollama_chat},
    {"/api/show", "POST", R_OLLAMA_SHOW, &serve_api_ollama_chat},
};

/* GET /v1/models/{id}: the id in url (NULL: not such a path). Ids may hold '/'. */
static const char *model_of_path(const char *url) {
    if (!strncmp(url, "/v1/models/", 11)) return url + 11;
    if (!strncmp(url, "/models/", 8)) return url + 8;
    return NULL;
}

/* The route of url (R_NONE: none), whether method is the route's, and its
 * API (OpenAI's shapes for the routes that have none). */
static int route(const char *url, const char *method, int *method_ok, const serve_api **api) {
    *api = &serve_api_openai_chat;
    for (size_t i = 0; i < sizeof ROUTES / sizeof ROUTES[0]; i++) {
        if (strcmp(url, ROUTES[i].path) || (ROUTES[i].id == R_API && !ROUTES[i].api) ||
            (ROUTES[i].id == R_ANTHROPIC_COUNT && !anthropic_count_request) ||
            (R_IS_OLLAMA(ROUTES[i].id) && !ollama_tags))
            continue;
        *method_ok = !strcmp(method, ROUTES[i].method) || (!strcmp(method, "HEAD") && !strcmp(ROUTES[i].method, "GET"));
        if (ROUTES[i].api) *api = ROUTES[i].api;
        return ROUTES[i].id;
    }
    if (model_of_path(url)) {
        *method_ok = !strcmp(method, "GET") || !strcmp(method, "HEAD");
        return R_MODEL;
    }
    return R_NONE;
}

/* What can be answered from the request line and headers alone (authz,
 * xkey and content_length: the Authorization, x-api-key and Content-Length
 * headers, NULL if absent): 0 to go on and read the body, else the HTTP
 * status, with e filled. */
static int precheck(int r, int method_ok, const char *method, const char *url, const char *authz, const char *xkey,
                    const char *content_length, api_error *e) {
    if (r == R_NONE) {
        api_fail(e, 404, NULL, "no such endpoint: %s %.200s", method, url);
        set_code(e, "not_found");
        return 404;
    }
    if (!method_ok) {
        api_fail(e, 405, NULL, "%s is not allowed on %.200s", method, url);
        set_code(e, "method_not_allowed");
        return 405;
    }
    if (r != R_INDEX && r != R_HEALTH && !auth_ok(authz, xkey)) {
        api_fail(e, 401, NULL, "missing or incorrect API key: send the header 'Authorization: Bearer KEY' "
                 "(or 'x-api-key: KEY')");
        set_code(e, "invalid_api_key");
        return 401;
    }
    if (content_length) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(content_length, &end, 10);
        if (errno || end == content_length || x > S.max_body) {
            api_fail(e, 413, NULL, "the request body is larger than %zu bytes (--max-body)", S.max_body);
            set_code(e, "request_too_large");
            return 413;
        }
    }
    return 0;
}

/* The request path, percent-decoded as libmicrohttpd does, except that a
 * path with an encoded NUL (%00) is left as sent: decoded, "/%00" would end
 * at the NUL and be served as "/". */
static size_t unescape_path(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls;
    (void)c;
    return strstr(s, "%00") ? strlen(s) : MHD_http_unescape(s);
}

/* The peer's address as text ("" if unknown); a static buffer per thread. */
static const char *client_address(struct MHD_Connection *c) {
    static _Thread_local char buf[INET6_ADDRSTRLEN];
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    buf[0] = 0;
    if (!ci || !ci->client_addr) return buf;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, sizeof buf);
    else if (sa->sa_family == AF_INET6) inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, sizeof buf);
    return buf;
}

static mhd_result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    request *rq = *con_cls;
    int method_ok = 0;
    const serve_api *api;
    int r = route(url, method, &method_ok, &api);
    if (!rq) {
        /* Headers only: answer what can be answered without the body. */
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        rq->t0 = now();
        *con_cls = rq;
        cur_rq = rq;
        access_begin(&rq->acc, method, url, client_address(c), rq->t0);
        if (!strcmp(method, "OPTIONS") && r != R_NONE) {
            int get = 0, post = 0;
            const serve_api *ignored;
            route(url, "GET", &get, &ignored);
            route(url, "POST", &post, &ignored);
            rq->answered = 1;
            return handle_options(c, get, post);
        }
        api_error e = {0};
        int status = precheck(r, method_ok, method, url,
                              MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                              MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key"),
                              MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH), &e);
        if (status) {
            rq->answered = 1;
            return send_api_error(c, api, &e);
        }
        return MHD_YES;
    }
    cur_rq = rq;
    if (*upload_size) {
        if (!rq->answered && !rq->too_big) {
            size_t n = *upload_size;
            if (rq->len + n > S.max_body) {
                rq->too_big = 1;
                free(rq->body);
                rq->body = NULL;
                rq->len = rq->cap = 0;
            } else {
                if (rq->len + n + 1 > rq->cap) {
                    size_t cap = rq->cap ? rq->cap : 4096;
                    while (cap < rq->len + n + 1) cap *= 2;
                    char *b = realloc(rq->body, cap);
                    if (!b) return MHD_NO;
                    rq->body = b;
                    rq->cap = cap;
                }
                memcpy(rq->body + rq->len, upload, n);
                rq->len += n;
                rq->body[rq->len] = 0;
            }
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (rq->answered) return MHD_YES;
    rq->answered = 1;
    api_error e = {0};
    if (rq->too_big) {
        api_fail(&e, 413, NULL, "the request body is larger than %zu bytes (--max-body)", S.max_body);
        set_code(&e, "request_too_large");
        return send_api_error(c, api, &e);
    }
    switch (r) {
    case R_INDEX: {
        struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(webui_html), (void *)webui_html, MHD_RESPMEM_PERSISTENT);
        if (!resp) return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:");
        return send_response(c, 200, resp);
    }
    case R_HEALTH: {
        pk_error ferr = {0};
        if (pk_model_check_file(S.model, &ferr)) {
            api_fail(&e, 503, NULL, "%s", ferr.msg);
            set_code(&e, "model_file_changed");
            return send_api_error(c, api, &e);
        }
        return send_json(c, 200, json_pack("{s:s}", "status", "ok"));
    }
    case R_METRICS: return handle_metrics(c);
    case R_MODELS: return send_json(c, 200, models_json());
    case R_API: return handle_api(c, rq, api);
    case R_APPLY_TEMPLATE: return handle_apply_template(c, rq);
    case R_ANTHROPIC_COUNT: return handle_anthropic_count(c, rq);
    case R_OLLAMA_TAGS: return send_json(c, 200, ollama_tags(&S.info));
    case R_OLLAMA_PS: return send_json(c, 200, ollama_ps(&S.info));
    case R_OLLAMA_VERSION: return send_json(c, 200, ollama_version(&S.info));
    case R_OLLAMA_SHOW: {
        json_t *root = parse_body(rq->body ? rq->body : "", rq->len, &e), *v = root ? ollama_show(root, &S.info, &e) : NULL;
        json_decref(root);
        return v ? send_json(c, 200, v) : send_api_error(c, api, &e);
    }
    case R_MODEL: {
        json_t *m = misc_model_get(&S.info, model_of_path(url), &e);
        if (!m && e.status == 404) set_code(&e, "model_not_found");
        return m ? send_json(c, 200, m) : send_api_error(c, api, &e);
    }
    case R_TOKENIZE:
    case R_DETOKENIZE: {
        json_t *body = misc_parse_body(rq->body ? rq->body : "", rq->len, &e);
        json_t *out = !body ? NULL : r == R_TOKENIZE ? misc_tokenize(S.model, body, &e) : misc_detokenize(S.model, body, &e);
        json_decref(body);
        return out ? send_json(c, 200, out) : send_api_error(c, api, &e);
    }
    case R_PROPS: return send_json(c, 200, props_json());
    case R_SLOTS: {
        int idle = 0;
        json_t *out = slots_json(&idle);
        const char *f = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "fail_on_no_slot");
        if (out && !idle && f && strcmp(f, "0")) {
            json_decref(out);
            api_fail(&e, 503, NULL, "no slot is idle (%d busy)", S.n_parallel);
            set_code(&e, "no_slot_available");
            return send_api_error(c, api, &e);
        }
        return send_json(c, 200, out);
    }
    }
    return MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    request *rq = *con_cls;
    if (!rq) return;
    if (!rq->streamed) access_write(&rq->acc);
    if (cur_rq == rq) cur_rq = NULL;
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    fputs("pocket serve: microhttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* ---- pocket serve ---------------------------------------------------------------------- */

/* The weight type that holds most of m's bytes ("Q4_K", "F16"...), for
 * serve_info.quant. */
static const char *main_weight_type(const pk_model *m) {
    const char *types[64];
    uint64_t bytes[64] = {0};
    int nt = 0, best = -1;
    for (int i = 0, n = pk_model_n_tensors(m); i < n; i++) {
        const char *name, *type;
        int64_t ne[4];
        uint64_t nb;
        if (pk_model_tensor(m, i, &name, &type, ne, &nb)) continue;
        int k = 0;
        while (k < nt && strcmp(types[k], type)) k++;
        if (k == nt && nt < 64) types[nt++] = type;
        if (k < nt) bytes[k] += nb;
    }
    for (int k = 0; k < nt; k++)
        if (best < 0 || bytes[k] > bytes[best]) best = k;
    return best < 0 ? "" : types[best];
}

static const char *const serve_help =
    "usage: pocket serve [-m MODEL] [options]\n"
    "\n"
    "Serve the model over HTTP with an OpenAI-compatible API:\n"
    "  POST /v1/chat/completions, POST /v1/completions (\"stream\": true for server-sent events),\n"
    "  POST /apply-template (the prompt a chat request would give the model),\n"
    "  GET /v1/models, GET /v1/models/ID, GET /health, GET /metrics (Prometheus), GET / (a chat page);\n"
    "  llama-server's POST /tokenize, POST /detokenize, GET /props, GET /slots.\n"
    "\n"
    "  -m, --model FILE       GGUF model (default: the bundled " DEFAULT_MODEL_NAME ")\n"
    "      --host ADDR        address to listen on (default 127.0.0.1; an IPv4 or IPv6 literal)\n"
    "      --port N           TCP port (default 8080; 0: any free port, printed at start)\n"
    "      --parallel N       sequences generated at once, each with its own context (default 1)\n"
    "      --queue N          requests that may wait for a free sequence; more get 503 (default 16)\n"
    "      --api-key KEY      require 'Authorization: Bearer KEY' (or 'x-api-key: KEY') on every\n"
    "                         endpoint but the page and /health\n"
    "  -a, --alias NAME       the model id served (default: the file name without .gguf)\n"
    "      --cors ORIGIN      let pages of ORIGIN (scheme://host[:port]; a comma list, repeatable;\n"
    "                         '*': any) call the API from a browser (default: same origin only)\n"
    "  -c, --ctx-size N       context window per sequence (default: the model's trained length;\n"
    "                         more than 4096 only if its KV cache fits 1/4 of free memory)\n"
    CACHE_TYPE_HELP
    "  -t, --threads N        threads per sequence (default: cores / parallel)\n"
    "      --chat-template-file FILE  run this Jinja chat template instead of the model's own\n"
    "                         (default: the model's tokenizer.chat_template, run as Hugging Face runs it)\n"
    "      --chat-template T  a built-in formatter instead: chatml, llama3, gemma, gemma4, deepseek2,\n"
    "                         deepseek3 or harmony (also used, detected from the template's markers, else\n"
    "                         chatml, when the model has no template or it does not parse; no tools)\n"
    "      --max-body BYTES   largest request body (default 1048576); larger: 413\n"
    "      --timeout SECONDS  close a connection idle (or trickling a request) for this long (default 120)\n"
    "      --ctx-checkpoints N  recurrent-state checkpoints per slot (models with Gated DeltaNet\n"
    "                         layers; default 4, 0: none): taken at the end of each prompt, where\n"
    "                         its last messages start, and every 1024 tokens\n"
    "      --cache-ram SIZE   keep the states of conversations whose slot is reused in RAM, up to\n"
    "                         SIZE (e.g. 2G; default 0: none; taken from --mem); a request that\n"
    "                         shares more of its prompt with one than with any slot has it loaded\n"
    "      --cache-dir DIR    and save them as files in DIR (made if missing; also every slot's\n"
    "                         state at shutdown), found again after a restart\n"
    "      --cache-dir-size SIZE  bound of DIR's state files, oldest deleted first (default 4G)\n"
    "  -q, --quiet            no log line per generation on stderr, and access log lines\n"
    "                         only for refused requests (4xx, 5xx)\n"
    "      --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed\n"
    "                         sampling defaults for requests that do not set them\n"
    "\n"
    "One model is served: a request may name any model; answers carry the served id.\n"
    "Each request gets an access log line on stderr: time, client, method, path, status,\n"
    "duration, tokens (completions), the error's message (refusals).\n"
    "Prompt cache: a slot keeps what it processed; a request goes to the idle slot that holds\n"
    "the most of its prompt without dropping a longer conversation, and only the rest of the\n"
    "prompt is processed (usage.prompt_tokens_details.cached_tokens: the tokens that were not).\n"
    "Stop with Ctrl-C (SIGINT) or SIGTERM.\n";

int cmd_serve(int argc, char **argv) {
    opts o;
    opts_init(&o);
    const char *host = "127.0.0.1", *api_key = NULL, *tmpl = NULL, *tfile = NULL;
    long port = 8080, parallel = 1, queue = 16, max_body = 1 << 20, timeout = 120, n_ckpt = 4;
    const char *cache_dir = NULL, *alias = NULL;
    char cors_err[512];
    uint64_t cache_ram = 0, cache_dir_size = 4ull << 30;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
#define VAL() (i + 1 < argc ? argv[++i] : (die("serve: %s needs a value", a), (char *)0))
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(serve_help, stdout); return 0; }
        else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) o.quiet = 1;
        else if (!strcmp(a, "--host")) host = VAL();
        else if (!strcmp(a, "--port")) port = parse_long(a, VAL(), 0, 65535);
        else if (!strcmp(a, "--parallel") || !strcmp(a, "-np")) parallel = parse_long(a, VAL(), 1, 256);
        else if (!strcmp(a, "--queue")) queue = parse_long(a, VAL(), 0, 100000);
        else if (!strcmp(a, "--api-key")) api_key = VAL();
        else if (!strcmp(a, "-a") || !strcmp(a, "--alias")) alias = VAL();
        else if (!strcmp(a, "--cors")) { if (cors_add(&S.cors, VAL(), cors_err, sizeof cors_err)) die("serve: %s", cors_err); }
        else if (!strcmp(a, "--chat-template")) tmpl = VAL();
        else if (!strcmp(a, "--chat-template-file")) tfile = VAL();
        else if (!strcmp(a, "--max-body")) max_body = parse_long(a, VAL(), 1024, 1L << 30);
        else if (!strcmp(a, "--timeout")) timeout = parse_long(a, VAL(), 1, 86400);
        else if (!strcmp(a, "--ctx-checkpoints")) n_ckpt = parse_long(a, VAL(), 0, MAX_CKPT);
        else if (!strcmp(a, "--cache-ram")) cache_ram = parse_size(a, VAL());
        else if (!strcmp(a, "--cache-dir")) cache_dir = VAL();
        else if (!strcmp(a, "--cache-dir-size")) cache_dir_size = parse_size(a, VAL());
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file") ||
                 !strcmp(a, "-n") || !strcmp(a, "--n-predict"))
            die("serve: %s does not apply to serve (prompts come in requests; see pocket serve --help)", a);
        else if (!parse_common(&o, argc, argv, &i)) die("serve: unknown option '%s' (see pocket serve --help)", a);
#undef VAL
    }
    if (api_key && (!*api_key || strlen(api_key) >= sizeof S.api_key)) die("serve: --api-key must have 1 to %zu characters", sizeof S.api_key - 1);
    if (alias) {
        int ok = *alias && strlen(alias) < sizeof S.model_id;
        for (const char *q = alias; ok && *q; q++) ok = (unsigned char)*q >= 0x20 && *q != 0x7f;
        if (!ok) die("serve: --alias '%.80s' must have 1 to %zu characters, none of them control characters", alias,
                     sizeof S.model_id - 1);
    }

    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    int ipv6 = 0;
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    struct sockaddr_in *a4 = (struct sockaddr_in *)&addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&addr;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        ipv6 = 1;
    } else {
        die("serve: --host '%s' is not an IPv4 or IPv6 address", host);
    }

    /* the stored states are part of the memory budget: the model's plan gets the rest */
    if (o.mem_set && o.mem && cache_ram >= o.mem)
        die("serve: --cache-ram %llu bytes leaves nothing of --mem %llu bytes for the model", (unsigned long long)cache_ram,
            (unsigned long long)o.mem);
    if (o.mem_set && o.mem) o.mem -= cache_ram;
    o.n_checkpoints = (int)n_ckpt;
    const char *path = o.model ? o.model : default_model();
    S.model = load_model(path, &o, NULL);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(S.model_id, sizeof S.model_id, "%s", alias ? alias : base);
    size_t idl = strlen(S.model_id);
    if (!alias && idl > 5 && !strcmp(S.model_id + idl - 5, ".gguf")) S.model_id[idl - 5] = 0;
    S.quiet = o.quiet;
    S.sp = o.sp;
    S.seed_given = o.seed_given;
    pk_error sperr = {0};
    pk_sampler *probe = pk_sampler_new(&S.sp, pk_model_n_vocab(S.model), &sperr);
    if (!probe) die("serve: %s", sperr.msg);
    pk_sampler_free(probe);
    if (api_key) { snprintf(S.api_key, sizeof S.api_key, "%s", api_key); S.has_api_key = 1; }
    /* The chat template: --chat-template-file, else the model's own
       (Jinja), unless --chat-template names a built-in formatter, which is
       also the fallback for a model without a template or one that does
       not parse. */
    pk_error terr = {0};
    char *tfile_text = NULL;
    if (tmpl && tfile) die("serve: give --chat-template NAME or --chat-template-file FILE, not both");
    if (tfile) {
        size_t n;
        tfile_text = read_file(tfile, &n);
        if (pk_jinja_parse(tfile_text, n, 0, &S.jinja, &terr)) die("serve: %s: %s", tfile, terr.msg);
        S.template_text = tfile_text;
        S.template_len = n;
    } else if (!tmpl && pk_chat_template_text(S.model, &S.template_len)) {
        if (pk_chat_jinja_parse(S.model, &S.jinja, &terr)) {
            fprintf(stderr, "pocket serve: the model's chat template cannot be used (%s); formatting with the built-in "
                    "one instead\n", terr.msg);
            S.jinja = NULL;
        } else {
            S.template_text = pk_chat_template_text(S.model, &S.template_len);
        }
    }
    if (S.jinja) {
        S.chat_template = pk_chat_detect(S.template_text, S.template_len);
        if (!S.chat_template) S.chat_template = "chatml";
        S.toolfmt = pk_toolcall_detect(S.template_text, S.template_len);
    } else if (pk_chat_resolve(S.model, tmpl, &S.chat_template, &terr)) {
        if (tmpl || terr.code != PK_ERR_UNSUPPORTED) die("serve: %s", terr.msg);
        fprintf(stderr, "pocket serve: %s; using chatml (choose with --chat-template)\n", terr.msg);
        S.chat_template = "chatml";
    }
    S.n_parallel = (int)parallel;
    S.n_queue = (int)queue;
    S.max_body = (size_t)max_body;
    S.created = (long)time(NULL);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    S.n_threads = o.n_threads ? o.n_threads : (int)(cores / parallel > 0 ? cores / parallel : 1);
    pthread_mutex_init(&S.mu, NULL);
    pthread_cond_init(&S.work_cv, NULL);

    S.slots = calloc((size_t)parallel, sizeof *S.slots);
    if (!S.slots) die("out of memory");
    for (int i = 0; i < parallel; i++) {
        pk_error err = {0};
        pk_context_params cp = pk_context_default_params();
        cp.n_ctx = o.n_ctx;
        cp.n_threads = S.n_threads;
        cp.type_k = o.type_k;
        cp.type_v = o.type_v;
        cp.n_checkpoints = (int)n_ckpt;
        if (pk_context_new(S.model, &cp, &S.slots[i].ctx, &err)) die("%s", err.msg);
        S.slots[i].index = i;
    }
    S.n_ctx = pk_context_n_ctx(S.slots[0].ctx);
    S.n_ckpt = (int)n_ckpt;
    S.ckpt_bytes = pk_context_checkpoint_bytes(S.slots[0].ctx);
    S.recurrent = S.ckpt_bytes > 0;
    pk_model_info mi;
    pk_model_get_info(S.model, &mi);
    char *template_copy = S.jinja ? strndup(S.template_text, S.template_len) : NULL;   /* NUL-terminated */
    if (S.jinja && !template_copy) die("out of memory");
    S.info = (serve_info){
        .model_id = S.model_id, .arch = mi.arch, .file = path, .file_size = mi.file_bytes,
        .n_params = (uint64_t)mi.n_params, .quant = main_weight_type(S.model), .n_ctx = S.n_ctx, .n_ctx_train = mi.n_ctx_train,
        .n_vocab = mi.n_vocab, .chat_template = template_copy, .created = S.created,
        .version = POCKET_VERSION,
    };
    if (cache_ram || cache_dir) {
        pk_error cerr = {0};
        pcache_params pp = {.model = S.model, .ram_bytes = cache_ram, .dir = cache_dir,
                            .dir_bytes = cache_dir_size, .n_ctx = S.n_ctx, .recurrent = S.recurrent};
        if (pcache_open(&pp, &S.cache, &cerr)) die("serve: %s", cerr.msg);
        S.cache_ram = cache_ram > 0;
    }

    /* SIGINT/SIGTERM are taken by sigwait below; every thread inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    for (int i = 0; i < parallel; i++)
        if (pthread_create(&S.slots[i].thread, NULL, worker_main, &S.slots[i])) die("serve: cannot start a worker thread");

    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG | MHD_USE_ITC |
                     MHD_USE_POLL | (ipv6 ? MHD_USE_IPv6 : 0);
    unsigned conn_limit = (unsigned)(parallel + queue + 64);
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_request, NULL,
                                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                            MHD_OPTION_CONNECTION_LIMIT, conn_limit,
                                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)timeout,
                                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HEADER_MEMORY,
                                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                                            MHD_OPTION_UNESCAPE_CALLBACK, unescape_path, NULL,
                                            MHD_OPTION_END);
    if (!d) die("serve: cannot listen on %s port %ld: %s", host, port, strerror(errno));
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = di ? di->port : (int)port;
    char tdesc[700];
    if (S.jinja)
        snprintf(tdesc, sizeof tdesc, "%s (Jinja; %s markers; tool calls %s)", tfile ? tfile : "the model's own",
                 S.chat_template, S.toolfmt ? S.toolfmt : "not parsed");
    else
        snprintf(tdesc, sizeof tdesc, "%s", S.chat_template);
    fprintf(stderr, "pocket serve: model %s (id '%s'), context %d, %d parallel x %d threads, queue %d, template %s%s\n",
            path, S.model_id, S.n_ctx, S.n_parallel, S.n_threads, S.n_queue, tdesc,
            S.has_api_key ? ", API key required" : "");
    if (S.recurrent)
        fprintf(stderr, "pocket serve: prompt cache: %d checkpoints per slot, %.1f MiB each\n", S.n_ckpt,
                S.ckpt_bytes / 1048576.0);
    if (cache_ram)
        fprintf(stderr, "pocket serve: prompt cache: the states of reused slots kept in RAM, up to %.0f MiB\n",
                cache_ram / 1048576.0);
    if (cache_dir)
        fprintf(stderr, "pocket serve: prompt cache: the states of reused slots saved in %s, up to %.0f MiB\n", cache_dir,
                cache_dir_size / 1048576.0);
    if (S.cors.any) {
        fprintf(stderr, "pocket serve: CORS: pages of any origin may call the API\n");
    } else if (S.cors.n) {
        fprintf(stderr, "pocket serve: CORS: pages of");
        for (int i = 0; i < S.cors.n; i++) fprintf(stderr, "%s %s", i ? "," : "", S.cors.origin[i]);
        fprintf(stderr, " may call the API\n");
    }
    fprintf(stderr, "pocket serve: listening on http://%s%s%s:%d/\n", ipv6 ? "[" : "", host, ipv6 ? "]" : "", bound);
    fflush(stderr);

    int sig = 0;
    sigwait(&sigs, &sig);
    pthread_mutex_lock(&S.mu);
    int fatal = S.fatal[0] != 0;
    pthread_mutex_unlock(&S.mu);
    if (fatal) fprintf(stderr, "pocket: error: %s; the server stops\n", S.fatal);
    else fprintf(stderr, "pocket serve: signal %d, shutting down\n", sig);

    /* Cancel everything, let the workers finish, answer the waiters, close. */
    pthread_mutex_lock(&S.mu);
    S.shutdown = 1;
    pthread_cond_broadcast(&S.work_cv);
    pthread_mutex_unlock(&S.mu);
    for (int i = 0; i < parallel; i++) pthread_join(S.slots[i].thread, NULL);
    pthread_mutex_lock(&S.mu);
    while (S.head) {
        job *j = S.head;
        S.head = j->next;
        S.n_waiting--;
        j->state = JOB_DONE;
        snprintf(j->err, sizeof j->err, "the server is shutting down");
        pthread_cond_broadcast(j->wake);
        job_unref_locked(j);
    }
    S.tail = NULL;
    pthread_mutex_unlock(&S.mu);
    /* Let the connections that were answered above send their error before
       the sockets close: stop accepting, wait for them (at most 2 s; an idle
       keep-alive connection holds until then). */
    MHD_socket ls = MHD_quiesce_daemon(d);
    for (int i = 0; i < 200; i++) {
        const union MHD_DaemonInfo *ci = MHD_get_daemon_info(d, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        if (!ci || ci->num_connections == 0) break;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
    if (ls != MHD_INVALID_SOCKET) close(ls);
    /* What the slots hold survives a restart when there is a directory. */
    for (int i = 0; cache_dir && i < parallel; i++) {
        int held = pk_context_pos(S.slots[i].ctx);
        if (held <= 0) continue;
        if (pcache_save(S.cache, S.slots[i].ctx, 0) & PCACHE_FILE)
            fprintf(stderr, "pocket serve: slot %d: its %d tokens saved in %s\n", i, held, cache_dir);
    }
    pcache_free(S.cache);
    for (int i = 0; i < parallel; i++) pk_context_free(S.slots[i].ctx);
    free(S.slots);
    for (int i = 0; i < MAX_GRAMMARS; i++) { free(S.grammars[i].text); pk_grammar_free(S.grammars[i].g); }
    pk_jinja_free(S.jinja);
    free(tfile_text);
    free(template_copy);
    pk_model_free(S.model);
    return fatal ? 1 : 0;
}
