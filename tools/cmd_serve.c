/* cmd_serve.c - `pocket serve`: an OpenAI-compatible HTTP server on one model.
 *
 * This file is the command: its options, the model, the chat template and
 * the slots set up, the daemon started, and the shutdown (a signal, the
 * requests answered, the slots' states saved). How the server works, and
 * which file holds what: tools/serve.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

#ifndef POCKET_VERSION
#define POCKET_VERSION "dev"
#endif

#define HEADER_MEMORY 32768     /* per-connection buffer: request line + headers beyond it get
                                   libmicrohttpd's 414 / 431 (a fixed page, nothing quoted) */

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
    {   /* 15 s; POCKET_SERVE_KEEPALIVE_MS overrides it (tests) */
        const char *e = getenv("POCKET_SERVE_KEEPALIVE_MS");
        long ms = e ? strtol(e, NULL, 10) : 0;
        S.keepalive_s = ms > 0 ? (double)ms / 1000.0 : 15.0;
    }
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
