/* cmd_serve.c - `pocket serve`: an OpenAI-compatible HTTP server on one model.
 *
 * Endpoints: POST /v1/chat/completions, POST /v1/completions (streamed as
 * server-sent events or not), GET /v1/models, GET /health, GET /metrics
 * (Prometheus text) and GET / (a self-contained chat page, tools/webui.h).
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
 * Limits (each answered with an OpenAI-style error JSON): request body size
 * (413), malformed JSON or fields (400), parameters of OpenAI's API that are
 * not implemented (tools, response_format, logprobs, ...: 400
 * unsupported_parameter, never silently ignored), unknown model (404),
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
#include "serve_cache.h"
#include "webui.h"

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

/* ---- server state ------------------------------------------------------------------ */

enum { JOB_QUEUED, JOB_RUNNING, JOB_DONE };

typedef struct job {
    /* Set by the connection thread before submission; read-only afterwards. */
    int32_t *prompt;
    int n_prompt;
    int max_tokens;             /* < 0: until end of text or a full context */
    pk_sampler *sampler;        /* owned */
    char *stop[MAX_STOP];
    int n_stop;
    size_t stop_maxlen;
    int chat, stream, include_usage;
    int split;                  /* chat: answer and reasoning apart (pk_chat_reasoning) */
    int starts[N_STARTS];       /* where the last messages start in prompt (0: not known) */
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
    double t_submit, t_start, t_first, t_end;
    pthread_cond_t cv;          /* signalled on new text and when done */
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
} slot;

static struct server {
    pk_model *model;
    char model_id[256];
    char api_key[512];
    int has_api_key;
    int quiet;                  /* no line per request on stderr */
    pk_sampler_params sp;       /* defaults for what a request does not set */
    int seed_given;             /* --seed: the default seed instead of a fresh one */
    const char *chat_template;  /* the name in use */
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

static void job_unref_locked(job *j) {
    if (--j->refs > 0) return;
    free(j->prompt);
    pk_sampler_free(j->sampler);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->text);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void job_unref(job *j) {
    pthread_mutex_lock(&S.mu);
    job_unref_locked(j);
    pthread_mutex_unlock(&S.mu);
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

/* A valid UTF-8 copy of s[0..n) (invalid bytes become U+FFFD); NULL if out of
 * memory. *out_len gets its length. */
static char *utf8_sanitize(const char *s, size_t n, size_t *out_len) {
    char *o = malloc(n * 3 + 1);
    if (!o) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t need = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        int ok = need > 0 && i + need <= n;
        for (size_t t = 1; ok && t < need; t++) ok = ((unsigned char)s[i + t] & 0xC0) == 0x80;
        if (ok && need == 3) {  /* overlong and surrogates */
            unsigned char c1 = (unsigned char)s[i + 1];
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) ok = 0;
        }
        if (ok && need == 4) {
            unsigned char c1 = (unsigned char)s[i + 1];
            if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90)) ok = 0;
        }
        if (ok) { memcpy(o + k, s + i, need); k += need; i += need; }
        else { memcpy(o + k, "\xEF\xBF\xBD", 3); k += 3; i++; }
    }
    o[k] = 0;
    *out_len = k;
    return o;
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
        if (hit && (size_t)(hit - j->text) < cut) cut = (size_t)(hit - j->text);
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
    for (int i = 0; i < j->n_prompt; i++) pk_sampler_accept(j->sampler, j->prompt[i]);

    int limit = j->max_tokens < 0 ? INT_MAX : j->max_tokens;
    finish = "length";
    t0 = now();
    while (n_gen < limit) {
        int32_t id = pk_sampler_sample(j->sampler, pk_context_logits(s->ctx));
        if (pk_model_is_eog(S.model, id)) { finish = "stop"; break; }
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
        j->n_gen = n_gen;
        S.gen_tokens_total++;
        if (n_gen == 1) j->t_first = now();
        cancel = j->cancel || S.shutdown;
        if (r < 0) snprintf(j->err, sizeof j->err, "out of memory");
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&S.mu);
        free(big);
        if (r < 0 || cancel) { finish = NULL; break; }
        if (r == 1) { finish = "stop"; break; }
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
        pthread_cond_broadcast(&j->cv);
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
    pthread_cond_broadcast(&j->cv);
    job_unref_locked(j);        /* the worker's reference */
}

/* Queue a job; 0, or -1 when the server is full (parallel + queue). */
static int submit(job *j) {
    pthread_mutex_lock(&S.mu);
    if (S.shutdown || S.n_running + S.n_waiting >= S.n_parallel + S.n_queue) {
        S.rejected_busy_total++;
        pthread_mutex_unlock(&S.mu);
        return -1;
    }
    j->refs = 2;    /* the connection and the worker */
    j->state = JOB_QUEUED;
    j->t_submit = now();
    j->next = NULL;
    if (S.tail) S.tail->next = j; else S.head = j;
    S.tail = j;
    S.n_waiting++;
    dispatch_locked();
    pthread_mutex_unlock(&S.mu);
    return 0;
}

/* ---- HTTP helpers -------------------------------------------------------------------- */

typedef struct request {
    char *body;
    size_t len, cap;
    int too_big;
    int answered;       /* a response was queued before the body was read */
    int status;
    double t0;
} request;

/* Queue r (destroyed here) and count the status for /metrics. */
static mhd_result send_response(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    pthread_mutex_lock(&S.mu);
    if (status < 600) S.status_count[status]++;
    pthread_mutex_unlock(&S.mu);
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

static json_t *error_json(const char *type, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static json_t *error_json(const char *type, const char *code, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t n;
    char *clean = utf8_sanitize(msg, strlen(msg), &n);
    json_t *e = json_pack("{s:{s:s, s:s, s:s?, s:s?}}", "error", "message", clean ? clean : "error",
                          "type", type, "param", param, "code", code);
    free(clean);
    return e;
}

#define SEND_ERROR(conn, status, type, code, param, ...) \
    send_json(conn, status, error_json(type, code, param, __VA_ARGS__))
#define BAD_REQUEST(conn, param, ...) \
    SEND_ERROR(conn, 400, "invalid_request_error", NULL, param, __VA_ARGS__)

static int client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 1;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLRDHUP};
    if (poll(&p, 1, 0) < 0) return 0;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* h: the Authorization header, NULL if absent. */
static int auth_ok(const char *h) {
    if (!S.has_api_key) return 1;
    if (!h || strncasecmp(h, "Bearer ", 7)) return 0;
    h += 7;
    while (*h == ' ') h++;
    /* constant time in the key's content: every byte of the key is compared,
       whatever the first difference */
    size_t a = strlen(h), b = strlen(S.api_key);
    unsigned diff = (unsigned)(a != b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)S.api_key[i] ^ (unsigned char)(i < a ? h[i] : 0);
    return diff == 0;
}

/* ---- chat formatting ------------------------------------------------------------------- */

/* The prompt for n {role, content} messages, ending with the opening of the
 * assistant's turn, in the server's template family (pk_chat_format); NULL
 * with a message in err on failure. */
static char *format_chat(const pk_chat_message *msgs, int n, pk_error *err) {
    char *out = NULL;
    if (pk_chat_format(S.model, S.chat_template, msgs, n, 1, &out, err)) return NULL;
    return out;
}

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

/* Where the last messages of a chat start in j's prompt (for checkpoints):
 * for i = n, n - 1, n - 2 (the generation prompt, the last message, the one
 * before), the length of the tokens of msgs[0..i) formatted without the
 * generation prompt, kept in j->starts only where the prompt's tokens begin
 * with exactly those tokens (text merged across the boundary into one token
 * makes it no boundary). */
static void message_starts(job *j, const pk_chat_message *msgs, int n) {
    int32_t *tok = malloc((size_t)(j->n_prompt + 1) * sizeof *tok);
    for (int k = 0; tok && k < N_STARTS && n - k >= 1; k++) {
        char *text = NULL;
        pk_error err = {0};
        if (pk_chat_format(S.model, S.chat_template, msgs, n - k, 0, &text, &err)) continue;
        int m = pk_model_tokenize(S.model, text, strlen(text), tok, j->n_prompt + 1, 1, 1);
        free(text);
        if (m > 0 && m <= j->n_prompt && !memcmp(tok, j->prompt, (size_t)m * sizeof *tok)) j->starts[k] = m;
    }
    free(tok);
}

/* ---- request parsing ------------------------------------------------------------------ */

/* Whether v (NULL: absent) asks nothing of the unsupported parameter name:
 * null, false, 0 (best_of: 1), an empty array/object/string, "none" (and
 * "auto" for tool_choice / function_call: nothing to call), or
 * response_format {"type": "text"}. */
static int neutral_value(const char *name, const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return 1;
    if (json_is_number(v)) return json_number_value(v) == (strcmp(name, "best_of") ? 0 : 1);
    if (json_is_array(v)) return json_array_size(v) == 0;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        int choice = !strcmp(name, "tool_choice") || !strcmp(name, "function_call");
        return !*s || (choice && (!strcmp(s, "none") || !strcmp(s, "auto")));
    }
    if (json_is_object(v)) {
        const json_t *t = json_object_get(v, "type");
        return json_object_size(v) == 0 || (!strcmp(name, "response_format") && json_object_size(v) == 1 &&
                                            json_is_string(t) && !strcmp(json_string_value(t), "text"));
    }
    return 0;
}

/* Parse and validate a completion request into a new job. On error returns
 * NULL with the HTTP status in *status and the OpenAI-style error object in
 * *error (new reference). No connection is needed: tests/fuzz call it too. */
static job *parse_request(const char *body, size_t len, int chat, int *status, json_t **error) {
#define FAIL(st, ...) do { *status = (st); *error = error_json(__VA_ARGS__); goto fail; } while (0)
#define FAIL_BAD(param, ...) FAIL(400, "invalid_request_error", NULL, param, __VA_ARGS__)
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    job *j = NULL;
    char *prompt_text = NULL;
    pk_chat_message *msgv = NULL;
    char **owned = NULL;
    int n_owned = 0, n_msgs = 0;
    /* JSON text never holds a raw NUL (in strings it must be escaped), but
       jansson 2.14 takes one right after a number: '{"seed": 1\0}' parses */
    const char *nul = memchr(body, 0, len);
    if (nul) FAIL(400, "invalid_request_error", "invalid_json", NULL,
                  "the body is not valid JSON: a NUL byte at offset %zu", (size_t)(nul - body));
    if (!root) FAIL(400, "invalid_request_error", "invalid_json", NULL,
                    "the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
    if (!json_is_object(root)) FAIL_BAD(NULL, "the body must be a JSON object");

    json_t *v = json_object_get(root, "model");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) FAIL_BAD("model", "'model' must be a string");
        if (strcmp(json_string_value(v), S.model_id))
            FAIL(404, "invalid_request_error", "model_not_found", "model",
                 "The model '%.200s' does not exist; this server serves '%s'", json_string_value(v), S.model_id);
    }
    j = calloc(1, sizeof *j);
    if (!j) FAIL(500, "server_error", NULL, NULL, "out of memory");
    pthread_cond_init(&j->cv, NULL);
    j->chat = chat;
    j->max_tokens = -1;

    v = json_object_get(root, "stream");
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
       rather than ignored, so that a client never believes it got tool
       calls, JSON mode, log-probabilities or penalties. Each may be sent with
       its neutral value (the OpenAI clients do). */
    static const struct { const char *name, *neutral; } unsupported[] = {
        {"tools", "[]"}, {"tool_choice", "\"none\""}, {"functions", "[]"}, {"function_call", "\"none\""},
        {"response_format", "{\"type\": \"text\"}"}, {"logprobs", "false"}, {"top_logprobs", "0"},
        {"logit_bias", "{}"}, {"echo", "false"}, {"suffix", "\"\""}, {"best_of", "1"},
        {"presence_penalty", "0"}, {"frequency_penalty", "0"},
    };
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (!neutral_value(unsupported[i].name, json_object_get(root, unsupported[i].name)))
            FAIL(400, "invalid_request_error", "unsupported_parameter", unsupported[i].name,
                 "'%s' is not supported by this server (pocket serve); remove it or send %s", unsupported[i].name,
                 unsupported[i].neutral);
    v = json_object_get(root, "n");
    if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) != 1))
        FAIL_BAD("n", "only n = 1 is supported");
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

    pk_sampler_params sp = S.sp;
    struct { const char *name; float *dst; double lo, hi; } nums[] = {
        {"temperature", &sp.temperature, 0, 2}, {"top_p", &sp.top_p, 0, 1}, {"min_p", &sp.min_p, 0, 1},
        {"repeat_penalty", &sp.repeat_penalty, 0, 10},
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
    v = json_object_get(root, "top_k");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
            FAIL_BAD("top_k", "'top_k' must be a non-negative integer");
        sp.top_k = (int)json_integer_value(v);
    }
    v = json_object_get(root, "seed");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) FAIL_BAD("seed", "'seed' must be an integer");
        sp.seed = (uint64_t)json_integer_value(v);
    } else if (!S.seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        pthread_mutex_lock(&S.mu);
        sp.seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^ ++S.id_counter << 32;
        pthread_mutex_unlock(&S.mu);
    }
    pk_error perr = {0};
    j->sampler = pk_sampler_new(&sp, pk_model_n_vocab(S.model), &perr);
    if (!j->sampler) FAIL_BAD(NULL, "bad sampling parameters: %s", perr.msg);

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
            if (!(j->stop[j->n_stop] = strdup(json_string_value(s)))) FAIL(500, "server_error", NULL, NULL, "out of memory");
            j->n_stop++;
        }
    }

    int add_special = 1;
    if (chat) {
        json_t *msgs = json_object_get(root, "messages");
        if (!msgs) FAIL_BAD("messages", "'messages' is required");
        if (!json_is_array(msgs)) FAIL_BAD("messages", "'messages' must be an array");
        size_t n = json_array_size(msgs);
        if (n == 0) FAIL_BAD("messages", "'messages' must not be empty");
        n_msgs = (int)n;
        msgv = calloc(n, sizeof *msgv);
        owned = calloc(n, sizeof *owned);
        if (!msgv || !owned) FAIL(500, "server_error", NULL, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *m = json_array_get(msgs, i);
            if (!json_is_object(m)) FAIL_BAD("messages", "messages[%zu] must be an object", i);
            json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
            if (!json_is_string(role)) FAIL_BAD("messages", "messages[%zu].role must be a string", i);
            const char *r = json_string_value(role);
            if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "developer") && strcmp(r, "tool"))
                FAIL_BAD("messages", "messages[%zu].role '%.40s' is not one of system, developer, user, assistant, tool", i, r);
            msgv[i].role = !strcmp(r, "developer") ? "system" : r;
            if (json_is_string(content)) {
                msgv[i].content = json_string_value(content);
            } else if (json_is_null(content) && !strcmp(r, "assistant")) {
                msgv[i].content = "";
            } else if (json_is_array(content)) {
                size_t total = 1;
                for (size_t k = 0; k < json_array_size(content); k++) {
                    json_t *part = json_array_get(content, k);
                    json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
                    if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") || !json_is_string(text))
                        FAIL_BAD("messages", "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": string}", i, k);
                    total += json_string_length(text);
                }
                char *cat = malloc(total);
                if (!cat) FAIL(500, "server_error", NULL, NULL, "out of memory");
                owned[n_owned++] = cat;
                size_t off = 0;
                for (size_t k = 0; k < json_array_size(content); k++) {
                    json_t *text = json_object_get(json_array_get(content, k), "text");
                    memcpy(cat + off, json_string_value(text), json_string_length(text));
                    off += json_string_length(text);
                }
                cat[off] = 0;
                msgv[i].content = cat;
            } else {
                FAIL_BAD("messages", "messages[%zu].content must be a string or an array of text parts", i);
            }
        }
        pk_error ferr = {0};
        prompt_text = format_chat(msgv, (int)n, &ferr);
        if (!prompt_text) FAIL_BAD("messages", "the messages could not be formatted: %s", ferr.msg);
        const char *end = chat_end_marker();
        if (end && j->n_stop < MAX_STOP) {
            if (!(j->stop[j->n_stop] = strdup(end))) FAIL(500, "server_error", NULL, NULL, "out of memory");
            j->n_stop++;
        }
    } else {
        json_t *p = json_object_get(root, "prompt");
        if (!p) FAIL_BAD("prompt", "'prompt' is required");
        if (json_is_array(p) && json_array_size(p) == 1) p = json_array_get(p, 0);
        if (!json_is_string(p)) FAIL_BAD("prompt", "'prompt' must be a string (or an array of one string)");
        if (!(prompt_text = strdup(json_string_value(p)))) FAIL(500, "server_error", NULL, NULL, "out of memory");
    }
    for (int i = 0; i < j->n_stop; i++)
        if (strlen(j->stop[i]) > j->stop_maxlen) j->stop_maxlen = strlen(j->stop[i]);

    /* Tokenize; the prompt must leave room for at least one generated token. */
    size_t plen = strlen(prompt_text);
    int cap = S.n_ctx + 1;
    j->prompt = malloc((size_t)cap * sizeof *j->prompt);
    if (!j->prompt) FAIL(500, "server_error", NULL, NULL, "out of memory");
    int n = pk_model_tokenize(S.model, prompt_text, plen, j->prompt, cap, add_special, 1);
    if (n < 0) FAIL_BAD(chat ? "messages" : "prompt", "the prompt could not be tokenized: %s", pk_status_str(-n));
    if (n >= S.n_ctx)
        FAIL(400, "invalid_request_error", "context_length_exceeded", chat ? "messages" : "prompt",
             "the prompt has %s%d tokens; this server's context holds %d (prompt and completion)",
             n > cap ? "more than " : "", n > cap ? cap : n, S.n_ctx);
    if (n == 0) FAIL_BAD("prompt", "the prompt is empty");
    j->n_prompt = n;
    if (chat && S.recurrent && S.n_ckpt > 0) message_starts(j, msgv, n_msgs);

    pthread_mutex_lock(&S.mu);
    uint64_t idn = ++S.id_counter;
    pthread_mutex_unlock(&S.mu);
    snprintf(j->id, sizeof j->id, "%s-%08lx%08llx", chat ? "chatcmpl" : "cmpl", (unsigned long)time(NULL),
             (unsigned long long)idn);
    j->created = (long)time(NULL);
    free(prompt_text);
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    free(owned); free(msgv);
    json_decref(root);
    return j;
fail:
    if (j) { j->refs = 1; job_unref(j); }
    free(prompt_text);
    for (int i = 0; i < n_owned; i++) free(owned[i]);
    free(owned); free(msgv);
    json_decref(root);
    return NULL;
#undef FAIL_BAD
#undef FAIL
}

/* ---- response bodies ------------------------------------------------------------------ */

static json_t *usage_json(const job *j) {
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", j->n_prompt, "completion_tokens", j->n_gen,
                     "total_tokens", j->n_prompt + j->n_gen, "prompt_tokens_details", "cached_tokens", j->n_cached);
}

/* One streamed chunk; text may be NULL (no content), finish NULL (null).
 * key: the delta's field for text ("content", "reasoning_content"; chat). */
static json_t *chunk_json(const job *j, const char *key, const char *text, size_t len, int role,
                          const char *finish) {
    json_t *choice;
    if (j->chat) {
        json_t *delta = json_object();
        if (role) json_object_set_new(delta, "role", json_string("assistant"));
        if (text) json_object_set_new(delta, key, json_stringn(text, len));
        choice = json_pack("{s:i, s:o, s:n, s:s?}", "index", 0, "delta", delta, "logprobs", "finish_reason", finish);
    } else {
        choice = json_pack("{s:i, s:s%, s:n, s:s?}", "index", 0, "text", text ? text : "", text ? len : 0,
                           "logprobs", "finish_reason", finish);
    }
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o]}", "id", j->id, "object",
                     j->chat ? "chat.completion.chunk" : "text_completion", "created", (json_int_t)j->created,
                     "model", S.model_id, "system_fingerprint", "pocket", "choices", choice);
}

/* The assistant's message for the whole text: content, and reasoning_content
 * when the job splits and there is reasoning. NULL when out of memory. */
static json_t *message_json(const job *j, const char *text, size_t len) {
    if (!j->split) return json_pack("{s:s, s:s%}", "role", "assistant", "content", text, len);
    pk_chat_reasoning *r = NULL;
    pk_error err = {0};
    if (pk_chat_reasoning_new(S.chat_template, &r, &err) || pk_chat_reasoning_feed(r, text, len, 1)) {
        pk_chat_reasoning_free(r);
        return NULL;
    }
    size_t cl, rl;
    const char *c = pk_chat_reasoning_content(r, &cl), *t = pk_chat_reasoning_text(r, &rl);
    json_t *m = json_pack("{s:s, s:s%}", "role", "assistant", "content", c, cl);
    if (m && rl) json_object_set_new(m, "reasoning_content", json_stringn(t, rl));
    pk_chat_reasoning_free(r);
    return m;
}

static json_t *final_json(const job *j, const char *text, size_t len) {
    json_t *choice;
    if (j->chat)
        choice = json_pack("{s:i, s:o, s:n, s:s}", "index", 0, "message", message_json(j, text, len),
                           "logprobs", "finish_reason", j->finish);
    else
        choice = json_pack("{s:i, s:s%, s:n, s:s}", "index", 0, "text", text, len, "logprobs", "finish_reason", j->finish);
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:[o], s:o}", "id", j->id, "object",
                     j->chat ? "chat.completion" : "text_completion", "created", (json_int_t)j->created, "model",
                     S.model_id, "system_fingerprint", "pocket", "choices", choice, "usage", usage_json(j));
}

/* ---- streaming ------------------------------------------------------------------------ */

typedef struct stream {
    job *j;
    struct MHD_Connection *conn;
    char *out;                  /* formatted bytes not yet handed to MHD */
    size_t out_len, out_pos, out_cap;
    size_t sent;                /* job text bytes already formatted */
    int started, finished;
    pk_chat_reasoning *split;   /* the job splits: what it has decided so far */
    size_t sent_c, sent_r;      /* its content / reasoning bytes already formatted */
} stream;

static int out_add(stream *st, const char *s, size_t n) {
    if (st->out_len + n > st->out_cap) {
        size_t cap = st->out_cap ? st->out_cap : 1024;
        while (cap < st->out_len + n) cap *= 2;
        char *t = realloc(st->out, cap);
        if (!t) return -1;
        st->out = t;
        st->out_cap = cap;
    }
    memcpy(st->out + st->out_len, s, n);
    st->out_len += n;
    return 0;
}

/* Append "data: JSON\n\n" (v stolen). */
static int out_event(stream *st, json_t *v) {
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!s) return -1;
    int r = out_add(st, "data: ", 6) || out_add(st, s, strlen(s)) || out_add(st, "\n\n", 2) ? -1 : 0;
    free(s);
    return r;
}

/* A chunk of text[0..n) (made valid UTF-8) in the delta's field key. */
static int out_text(stream *st, const char *key, const char *text, size_t n) {
    size_t k;
    char *t = utf8_sanitize(text, n, &k);
    int bad = !t || out_event(st, chunk_json(st->j, key, t, k, 0, NULL));
    free(t);
    return bad ? -1 : 0;
}

/* New job text t[0..n) (final: the last of it): as it is, or through the
 * splitter as a reasoning chunk and a content chunk, each only if non-empty.
 * Nothing is sent of a marker cut between pieces before it is complete. */
static int out_generated(stream *st, const char *t, size_t n, int final) {
    if (!st->split) return n ? out_text(st, "content", t, n) : 0;
    if (pk_chat_reasoning_feed(st->split, t, n, final)) return -1;
    size_t rl, cl;
    const char *r = pk_chat_reasoning_text(st->split, &rl), *c = pk_chat_reasoning_content(st->split, &cl);
    if (rl > st->sent_r && out_text(st, "reasoning_content", r + st->sent_r, rl - st->sent_r)) return -1;
    st->sent_r = rl;
    if (cl > st->sent_c && out_text(st, "content", c + st->sent_c, cl - st->sent_c)) return -1;
    st->sent_c = cl;
    return 0;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    stream *st = cls;
    job *j = st->j;
    while (st->out_pos == st->out_len) {
        st->out_pos = st->out_len = 0;
        if (st->finished) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!st->started) {
            st->started = 1;
            if (out_event(st, chunk_json(j, "content", j->chat ? "" : NULL, 0, j->chat, NULL)))
                return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        pthread_mutex_lock(&S.mu);
        for (;;) {
            if (j->released > st->sent) {
                /* the bytes are the job's until it is done: copy them out of the lock */
                size_t n = j->released - st->sent;
                char *t = malloc(n);
                if (t) memcpy(t, j->text + st->sent, n);
                st->sent = j->released;
                pthread_mutex_unlock(&S.mu);
                int bad = !t || out_generated(st, t, n, 0);
                free(t);
                if (bad) return MHD_CONTENT_READER_END_WITH_ERROR;
                if (st->out_len == 0) { pthread_mutex_lock(&S.mu); continue; }   /* all held back */
                break;
            }
            if (j->state == JOB_DONE) {
                int bad = 0;
                if (j->finish) {
                    bad = out_generated(st, "", 0, 1) || out_event(st, chunk_json(j, "content", NULL, 0, 0, j->finish));
                    if (!bad && j->include_usage) {
                        json_t *u = chunk_json(j, "content", NULL, 0, 0, NULL);
                        json_object_set_new(u, "choices", json_array());
                        json_object_set_new(u, "usage", usage_json(j));
                        bad = out_event(st, u);
                    }
                } else {
                    bad = out_event(st, error_json("server_error", NULL, NULL, "generation failed: %s",
                                                   j->err[0] ? j->err : "cancelled"));
                }
                pthread_mutex_unlock(&S.mu);
                if (bad || out_add(st, "data: [DONE]\n\n", 14)) return MHD_CONTENT_READER_END_WITH_ERROR;
                st->finished = 1;
                break;
            }
            timed_wait(&j->cv, WAIT_MS);
            if (j->state != JOB_DONE && j->released == st->sent) {
                pthread_mutex_unlock(&S.mu);
                int gone = client_gone(st->conn);
                pthread_mutex_lock(&S.mu);
                if (gone) {
                    job_cancel_locked(j);
                    pthread_mutex_unlock(&S.mu);
                    return MHD_CONTENT_READER_END_WITH_ERROR;
                }
            }
        }
    }
    size_t n = st->out_len - st->out_pos < max ? st->out_len - st->out_pos : max;
    memcpy(buf, st->out + st->out_pos, n);
    st->out_pos += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    stream *st = cls;
    pthread_mutex_lock(&S.mu);
    job_cancel_locked(st->j);
    job_unref_locked(st->j);
    pthread_mutex_unlock(&S.mu);
    pk_chat_reasoning_free(st->split);
    free(st->out);
    free(st);
}

/* ---- endpoints ------------------------------------------------------------------------ */

static mhd_result handle_completion(struct MHD_Connection *c, request *rq, int chat) {
    int status = 0;
    json_t *error = NULL;
    job *j = parse_request(rq->body ? rq->body : "", rq->len, chat, &status, &error);
    if (!j) return send_json(c, (unsigned)status, error);
    if (submit(j)) {
        j->refs = 1;
        job_unref(j);
        return SEND_ERROR(c, 503, "server_error", "server_busy", NULL,
                          "the server is busy (%d generating, %d queued); retry later", S.n_parallel, S.n_queue);
    }
    if (j->stream) {
        stream *st = calloc(1, sizeof *st);
        pk_error serr = {0};
        if (st && j->split && pk_chat_reasoning_new(S.chat_template, &st->split, &serr)) { free(st); st = NULL; }
        struct MHD_Response *r = st ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, st, stream_free) : NULL;
        if (!r) {
            if (st) pk_chat_reasoning_free(st->split);
            pthread_mutex_lock(&S.mu);
            job_cancel_locked(j);
            job_unref_locked(j);
            pthread_mutex_unlock(&S.mu);
            free(st);
            return SEND_ERROR(c, 500, "server_error", NULL, NULL, "out of memory");
        }
        st->j = j;
        st->conn = c;
        MHD_add_response_header(r, "Content-Type", "text/event-stream");
        MHD_add_response_header(r, "Cache-Control", "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        return send_response(c, 200, r);
    }
    /* Not streamed: wait here (this connection's own thread), watching the socket. */
    pthread_mutex_lock(&S.mu);
    while (j->state != JOB_DONE) {
        timed_wait(&j->cv, WAIT_MS);
        if (j->state == JOB_DONE) break;
        pthread_mutex_unlock(&S.mu);
        int gone = client_gone(c);
        pthread_mutex_lock(&S.mu);
        if (gone) {
            job_cancel_locked(j);
            job_unref_locked(j);
            pthread_mutex_unlock(&S.mu);
            return MHD_NO;
        }
    }
    pthread_mutex_unlock(&S.mu);
    mhd_result ret;
    if (!j->finish) {
        ret = SEND_ERROR(c, S.shutdown ? 503 : 500, "server_error", NULL, NULL, "generation failed: %s",
                         j->err[0] ? j->err : "cancelled");
    } else {
        size_t n;
        char *t = utf8_sanitize(j->text ? j->text : "", j->len, &n);
        ret = t ? send_json(c, 200, final_json(j, t, n)) : SEND_ERROR(c, 500, "server_error", NULL, NULL, "out of memory");
        free(t);
    }
    job_unref(j);
    return ret;
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
    pk_model_info info;
    pk_model_get_info(S.model, &info);
    return json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:s, s:i, s:i, s:I}}]}", "object", "list",
                                       "data", "id", S.model_id, "object", "model", "created", (json_int_t)S.created,
                                       "owned_by", "pocket", "meta", "arch", info.arch, "n_ctx", S.n_ctx,
                                       "n_vocab", info.n_vocab, "n_params", (json_int_t)info.n_params);
}

/* Route ids. */
enum { R_NONE, R_INDEX, R_HEALTH, R_METRICS, R_MODELS, R_CHAT, R_COMPLETIONS };

static int route(const char *url, const char *method, int *method_ok) {
    static const struct { const char *path; const char *method; int id; } T[] = {
        {"/", "GET", R_INDEX}, {"/index.html", "GET", R_INDEX}, {"/health", "GET", R_HEALTH},
        {"/metrics", "GET", R_METRICS}, {"/v1/models", "GET", R_MODELS}, {"/models", "GET", R_MODELS},
        {"/v1/chat/completions", "POST", R_CHAT}, {"/chat/completions", "POST", R_CHAT},
        {"/v1/completions", "POST", R_COMPLETIONS}, {"/completions", "POST", R_COMPLETIONS},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
        if (!strcmp(url, T[i].path)) {
            *method_ok = !strcmp(method, T[i].method) || (!strcmp(method, "HEAD") && !strcmp(T[i].method, "GET"));
            return T[i].id;
        }
    return R_NONE;
}

/* What can be answered from the request line and headers alone (authz and
 * content_length: those headers, NULL if absent): 0 to go on and read the
 * body, else the HTTP status, with the error object in *error. */
static int precheck(int r, int method_ok, const char *method, const char *url, const char *authz,
                    const char *content_length, json_t **error) {
    if (r == R_NONE) {
        *error = error_json("invalid_request_error", "not_found", NULL, "no such endpoint: %s %.200s", method, url);
        return 404;
    }
    if (!method_ok) {
        *error = error_json("invalid_request_error", "method_not_allowed", NULL, "%s is not allowed on %.200s",
                            method, url);
        return 405;
    }
    if ((r == R_METRICS || r == R_MODELS || r == R_CHAT || r == R_COMPLETIONS) && !auth_ok(authz)) {
        *error = error_json("authentication_error", "invalid_api_key", NULL,
                            "missing or incorrect API key: send the header 'Authorization: Bearer KEY'");
        return 401;
    }
    if (content_length) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(content_length, &end, 10);
        if (errno || end == content_length || x > S.max_body) {
            *error = error_json("invalid_request_error", "request_too_large", NULL,
                                "the request body is larger than %zu bytes (--max-body)", S.max_body);
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

static mhd_result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                             const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    request *rq = *con_cls;
    int method_ok = 0;
    int r = route(url, method, &method_ok);
    if (!rq) {
        /* Headers only: answer what can be answered without the body. */
        rq = calloc(1, sizeof *rq);
        if (!rq) return MHD_NO;
        rq->t0 = now();
        *con_cls = rq;
        json_t *error = NULL;
        int status = precheck(r, method_ok, method, url,
                              MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization"),
                              MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH), &error);
        if (status) {
            rq->answered = 1;
            return send_json(c, (unsigned)status, error);
        }
        return MHD_YES;
    }
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
    if (rq->too_big)
        return SEND_ERROR(c, 413, "invalid_request_error", "request_too_large", NULL,
                          "the request body is larger than %zu bytes (--max-body)", S.max_body);
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
        if (pk_model_check_file(S.model, &ferr))
            return SEND_ERROR(c, 503, "server_error", "model_file_changed", NULL, "%s", ferr.msg);
        return send_json(c, 200, json_pack("{s:s}", "status", "ok"));
    }
    case R_METRICS: return handle_metrics(c);
    case R_MODELS: return send_json(c, 200, models_json());
    case R_CHAT: return handle_completion(c, rq, 1);
    case R_COMPLETIONS: return handle_completion(c, rq, 0);
    }
    return MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    request *rq = *con_cls;
    if (!rq) return;
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    fputs("pocket serve: microhttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* ---- pocket serve ---------------------------------------------------------------------- */

static const char *const serve_help =
    "usage: pocket serve [-m MODEL] [options]\n"
    "\n"
    "Serve the model over HTTP with an OpenAI-compatible API:\n"
    "  POST /v1/chat/completions, POST /v1/completions (\"stream\": true for server-sent events),\n"
    "  GET /v1/models, GET /health, GET /metrics (Prometheus), GET / (a chat page).\n"
    "\n"
    "  -m, --model FILE       GGUF model (default: the bundled " DEFAULT_MODEL_NAME ")\n"
    "      --host ADDR        address to listen on (default 127.0.0.1; an IPv4 or IPv6 literal)\n"
    "      --port N           TCP port (default 8080; 0: any free port, printed at start)\n"
    "      --parallel N       sequences generated at once, each with its own context (default 1)\n"
    "      --queue N          requests that may wait for a free sequence; more get 503 (default 16)\n"
    "      --api-key KEY      require 'Authorization: Bearer KEY' on /v1/* and /metrics\n"
    "  -c, --ctx-size N       context window per sequence (default: the model's trained length;\n"
    "                         more than 4096 only if its KV cache fits 1/4 of free memory)\n"
    CACHE_TYPE_HELP
    "  -t, --threads N        threads per sequence (default: cores / parallel)\n"
    "      --chat-template T  chat template: chatml, llama3, gemma, gemma4, deepseek2, deepseek3\n"
    "                         or harmony (default: detected from the model's\n"
    "                         tokenizer.chat_template, else chatml)\n"
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
    "  -q, --quiet            no log line per generation on stderr\n"
    "      --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n, --seed\n"
    "                         sampling defaults for requests that do not set them\n"
    "\n"
    "The model id (for \"model\" in requests) is the file name without .gguf.\n"
    "Prompt cache: a slot keeps what it processed; a request goes to the idle slot that holds\n"
    "the most of its prompt without dropping a longer conversation, and only the rest of the\n"
    "prompt is processed (usage.prompt_tokens_details.cached_tokens: the tokens that were not).\n"
    "Stop with Ctrl-C (SIGINT) or SIGTERM.\n";

int cmd_serve(int argc, char **argv) {
    opts o;
    opts_init(&o);
    const char *host = "127.0.0.1", *api_key = NULL, *tmpl = NULL;
    long port = 8080, parallel = 1, queue = 16, max_body = 1 << 20, timeout = 120, n_ckpt = 4;
    const char *cache_dir = NULL;
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
        else if (!strcmp(a, "--chat-template")) tmpl = VAL();
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
    snprintf(S.model_id, sizeof S.model_id, "%s", base);
    size_t idl = strlen(S.model_id);
    if (idl > 5 && !strcmp(S.model_id + idl - 5, ".gguf")) S.model_id[idl - 5] = 0;
    S.quiet = o.quiet;
    S.sp = o.sp;
    S.seed_given = o.seed_given;
    pk_error sperr = {0};
    pk_sampler *probe = pk_sampler_new(&S.sp, pk_model_n_vocab(S.model), &sperr);
    if (!probe) die("serve: %s", sperr.msg);
    pk_sampler_free(probe);
    if (api_key) { snprintf(S.api_key, sizeof S.api_key, "%s", api_key); S.has_api_key = 1; }
    pk_error terr = {0};
    if (pk_chat_resolve(S.model, tmpl, &S.chat_template, &terr)) {
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
    fprintf(stderr, "pocket serve: model %s (id '%s'), context %d, %d parallel x %d threads, queue %d, template %s%s\n",
            path, S.model_id, S.n_ctx, S.n_parallel, S.n_threads, S.n_queue, S.chat_template,
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
        pthread_cond_broadcast(&j->cv);
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
    pk_model_free(S.model);
    return fatal ? 1 : 0;
}
