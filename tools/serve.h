/* tools/serve.h - the insides of `pocket serve` that its files share: the
 * server's state (S), the jobs of a request, the slots that run them, the
 * HTTP request being answered, a streamed answer, the route ids, and the
 * functions one file calls in another (each is described where it is
 * defined). Its files, in the order a request goes through them:
 *
 *   serve_http.c        libmicrohttpd's callbacks: the route of a path, what
 *                       the request line and headers decide (precheck), the
 *                       body read, the small endpoints (/health, /metrics,
 *                       /v1/models, /props, /slots, /apply-template, ...),
 *                       every response sent and its access log line
 *   serve_completion.c  a completion endpoint (handle_api): the API's body
 *                       translated, its jobs queued and waited on, the
 *                       OpenAI objects built from them (whole or streamed)
 *                       and translated back
 *   serve_request.c     an OpenAI completion request checked and made into
 *                       jobs (parse_request: fields, sampler, grammar, tokens)
 *   serve_chat.c        a chat's messages rendered into its prompt (the
 *                       model's Jinja template or a built-in formatter)
 *   serve_jobs.c        the state, the queue, the slots and their prompt
 *                       cache, the workers that generate (run_job)
 *   cmd_serve.c         the command: options, the model, the template and
 *                       the slots set up, the daemon started, the shutdown
 *
 * beside the APIs' translators (serve_api.h), serve_misc.c (the small
 * endpoints' bodies, CORS, the access log line) and serve_cache.c (stored
 * conversation states).
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
#ifndef POCKET_SERVE_H
#define POCKET_SERVE_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>
#include <microhttpd.h>

#include "cli.h"
#include "serve_api.h"
#include "serve_cache.h"
#include "serve_misc.h"

#if MHD_VERSION >= 0x00097002
typedef enum MHD_Result mhd_result;
#else
typedef int mhd_result;
#endif

#define MAX_STOP 16             /* stop strings per request */
#define N_STARTS 3              /* message starts checkpointed: the generation prompt's, the
                                   last message's and the one's before */
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

/* The one server: its settings, the queue, the slots and the metrics (defined in serve_jobs.c;
 * what is shared between threads is under mu). */
extern struct server {
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
    double keepalive_s;         /* silence on a stream before the API's keep-alive bytes (0: none) */
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

/* ---- the HTTP request ----------------------------------------------------------------- */

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

/* ---- an answer's parts, and a streamed answer --------------------------------------------- */

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

/* A streamed answer (serve_completion.c): per choice, what of its job was sent. */
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
    double last_out;            /* when bytes last went to the client (now()) */
} stream;

/* Route ids. */
enum { R_NONE, R_INDEX, R_HEALTH, R_METRICS, R_MODELS, R_API, R_APPLY_TEMPLATE, R_MODEL, R_TOKENIZE, R_DETOKENIZE,
       R_PROPS, R_SLOTS, R_ANTHROPIC_COUNT, R_OLLAMA_TAGS, R_OLLAMA_PS, R_OLLAMA_VERSION, R_OLLAMA_SHOW };

/* ---- serve_jobs.c ----------------------------------------------------------------------- */

void job_unref_locked(job *j);
void job_unref(job *j);
grammar_entry *grammar_acquire(const char *gbnf, const char *param, api_error *e);
void timed_wait(pthread_cond_t *cv, int ms);
size_t utf8_complete_len(const char *s, size_t n);
void run_job(slot *s, job *j, uint64_t entry);
void *worker_main(void *arg);
void job_cancel_locked(job *j);
int submit(job **jobs, int n);

/* ---- serve_chat.c ----------------------------------------------------------------------- */

const char *chat_end_marker(void);
json_t *conversation_json(const json_t *root, api_error *e);
char *render_chat(const json_t *conv, size_t n, int add_gen, api_error *e);
void message_starts(job *j, const json_t *conv);
int prompt_opens_think(const char *p);

/* ---- serve_request.c -------------------------------------------------------------------- */

void set_code(api_error *e, const char *code);
json_t *parse_body(const char *body, size_t len, api_error *e);
int check_model(const json_t *root, api_error *e);
int request_jobs(const json_t *root, int chat, job **jobs, api_error *e);

/* ---- serve_completion.c (fuzz/fuzz_serve.c runs a request through the same calls) ------- */

json_t *api_error_json(const serve_api *api, api_error *e);
mhd_result send_api_error(struct MHD_Connection *c, const serve_api *api, api_error *e);
json_t *json_text(const char *s, size_t n);
int outsplit_init(outsplit *o, const job *j, pk_error *err);
void outsplit_free(outsplit *o);
json_t *completion_json(job *const *jobs, int n, api_error *e);
int stream_emit(void *ctx, int kind, int index, const char *id, const char *t, size_t n);
int stream_piece(stream *st, int i, const char *t, size_t n, const tok_lp *lp, int n_lp, int final);
int stream_end_choice(stream *st, int i, char *msg, size_t cap);
int api_is_openai(const serve_api *api);
mhd_result handle_api(struct MHD_Connection *c, request *rq, const serve_api *api);

/* ---- serve_http.c ----------------------------------------------------------------------- */

/* The request this connection's thread is answering (on_request sets it;
 * libmicrohttpd runs a thread per connection): what send_response sends is
 * noted in its access log line. NULL outside on_request (tests, fuzzing). */
extern _Thread_local request *cur_rq;
void access_write(const serve_access *a);
void access_jobs_locked(serve_access *a, job *const *jobs, int n);
mhd_result send_response(struct MHD_Connection *c, unsigned status, struct MHD_Response *r);
mhd_result send_json(struct MHD_Connection *c, unsigned status, json_t *v);
int client_gone(struct MHD_Connection *c);
json_t *anthropic_count_json(const char *body, size_t blen, api_error *e);
json_t *models_json(void);
json_t *props_json(void);
json_t *slots_json(int *idle);
int route(const char *url, const char *method, int *method_ok, const serve_api **api);
int precheck(int r, int method_ok, const char *method, const char *url, const char *authz, const char *xkey,
             const char *content_length, api_error *e);
size_t unescape_path(void *cls, struct MHD_Connection *c, char *s);
mhd_result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                      const char *version, const char *upload, size_t *upload_size, void **con_cls);
void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe);
void mhd_log(void *cls, const char *fmt, va_list ap);

#endif
