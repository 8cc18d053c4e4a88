/* cmd_chat.c - `pocket chat`: an interactive chat in the terminal.
 *
 * Each turn the whole conversation is formatted again with the chat template
 * (pk_chat_format) and tokenized; the tokens already in the context (the
 * previous turns, the answer included) are kept when they are a prefix of the
 * new ones, so only the new tokens are decoded. When they are not (the
 * template rewrote history, e.g. trimmed an answer, or a re-tokenization
 * differs, or old turns were dropped) the context is cut back to what they
 * share (pk_context_truncate: any prefix for attention layers; for
 * recurrent ones the checkpoint taken at the end of each prompt, or 0) and
 * the rest decoded.
 * A full context is not an error: when the next prompt would leave less than
 * a quarter of the context (or -n tokens, if fewer) for the answer, the
 * oldest turns are dropped, the system text kept, and one line says so.
 * The answer streams to stdout; notes go to stderr. With a reasoning model
 * (gpt-oss's analysis channel, gemma4's thought channel, a leading <think>)
 * the splitter (pk_chat_reasoning) keeps the answer on stdout and the
 * reasoning on stderr between "[reasoning]" and "[end of reasoning]", the
 * markers on neither; the history keeps the answer only, as llama.cpp's
 * server clients send it back. --reasoning-format none streams the raw text.
 *
 * On a terminal the input line is edited with libedit (Debian's libedit,
 * through its readline-compatible API): arrows, Ctrl-A/E, history of the
 * session's lines (in memory only: conversations are not written to disk).
 * Ctrl-C is a key there (the tty's ISIG is off while editing): on an empty
 * line it quits, on a typed line it clears it. During an answer Ctrl-C is
 * SIGINT and stops the answer. Piped input is read line by line and echoed.
 */
#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <editline/readline.h>

#include "cli.h"

static const char *const chat_help =
    "usage: pocket chat [-m MODEL] [options]\n"
    "\n"
    "Chat with a model in the terminal. Type a message and press Enter; the answer\n"
    "streams back. The whole conversation is the prompt of each answer (the tokens\n"
    "already decoded are reused). When the next prompt would leave the answer less\n"
    "than a quarter of the context (or -n tokens, if fewer), the oldest turns are\n"
    "dropped, the system text kept, and a line says so.\n"
    "\n"
    "On a terminal the line is edited as in a shell (arrows, Ctrl-A, Ctrl-E, Ctrl-K)\n"
    "and Up / Down recall the lines typed in this session (kept in memory only).\n"
    "Ctrl-C stops an answer; at an empty prompt one Ctrl-C quits, as do /exit and end\n"
    "of input (Ctrl-D); on a typed line Ctrl-C clears it. /reset starts a new\n"
    "conversation (the system text stays). Piped input is read line by line.\n"
    "\n"
    "The chat template comes from the model's GGUF (tokenizer.chat_template: ChatML,\n"
    "Llama-3, Gemma, Gemma-4, DeepSeek and harmony are recognised) or is named with\n"
    "--chat-template. The bundled\n"
    DEFAULT_MODEL_NAME " has no chat template (it is a plain text model): use\n"
    "--chat-template chatml with it.\n"
    "\n"
    "  -m, --model FILE         GGUF model (default: the bundled " DEFAULT_MODEL_NAME ")\n"
    "      --chat-template NAME chatml, llama3, gemma, gemma4, deepseek2, deepseek3 or harmony\n"
    "                           (default: detected from the model)\n"
    "      --system TEXT        system message opening the conversation\n"
    "  -n, --n-predict N        most tokens per answer (default 256; -1: until end of turn)\n"
    "  -t, --threads N          threads (default: all cores)\n"
    "  -c, --ctx-size N         context window (default: the model's trained length; more\n"
    "                           than 4096 only if its KV cache fits 1/4 of free memory)\n"
    "  -ctk, -ctv TYPE          KV cache type of the keys / values: f32, f16 (default), q8_0\n"
    "      --temp T             temperature (default 0.8; 0 = greedy)\n"
    "      --top-k N, --top-p P, --min-p P, --repeat-penalty R, --repeat-last-n N, --seed S\n"
    "                           sampling, as for pocket run\n"
    "      --show-prompt        print each formatted prompt and its token counts to stderr\n"
    "      --reasoning-format F auto (default): a reasoning model's reasoning (harmony's analysis\n"
    "                           channel, gemma4's thought channel, <think> ... </think>) goes to\n"
    "                           stderr between [reasoning] and [end of reasoning], the answer to\n"
    "                           stdout, the markers to neither, and the history keeps the answer;\n"
    "                           none: the generated text as it is, markers included\n"
    "      --hide-reasoning     auto, without printing the reasoning\n";

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct chat {
    pk_chat_message *msgs;
    int n, cap;
    int n_keep;              /* leading messages /reset keeps (the system text) */
} chat;

/* Where the answer's text goes: through the splitter (answer to stdout,
 * reasoning to stderr) or as it is. */
typedef struct shown {
    pk_chat_reasoning *split;   /* NULL: --reasoning-format none */
    int hide;                   /* --hide-reasoning */
    size_t out_c, out_r;        /* bytes of content / reasoning printed */
    int in_r;                   /* "[reasoning]" open on stderr */
} shown;

static void show_text(shown *v, const char *t, size_t n, int final) {
    if (!v->split) { fwrite(t, 1, n, stdout); fflush(stdout); return; }
    if (pk_chat_reasoning_feed(v->split, t, n, final)) die("out of memory");
    size_t rl, cl;
    const char *r = pk_chat_reasoning_text(v->split, &rl), *c = pk_chat_reasoning_content(v->split, &cl);
    if (rl > v->out_r && !v->hide) {
        fflush(stdout);                 /* what went before stays before */
        if (!v->in_r) { fputs("[reasoning]\n", stderr); v->in_r = 1; }
        fwrite(r + v->out_r, 1, rl - v->out_r, stderr);
        fflush(stderr);
    }
    v->out_r = rl;
    if ((cl > v->out_c || final) && v->in_r) { fputs("\n[end of reasoning]\n", stderr); v->in_r = 0; }
    if (cl > v->out_c) fwrite(c + v->out_c, 1, cl - v->out_c, stdout);
    v->out_c = cl;
    fflush(stdout);
}

static void chat_push(chat *h, const char *role, const char *content, size_t len) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 16;
        h->msgs = realloc(h->msgs, (size_t)h->cap * sizeof *h->msgs);
        if (!h->msgs) die("out of memory");
    }
    char *c = malloc(len + 1);
    if (!c) die("out of memory");
    memcpy(c, content, len);
    c[len] = 0;
    h->msgs[h->n].role = role;
    h->msgs[h->n].content = c;
    h->n++;
}

static void chat_truncate(chat *h, int n) {
    while (h->n > n) free((char *)h->msgs[--h->n].content);
}

/* Trailing newline and carriage return off. */
static void chomp(char *s) {
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) s[--n] = 0;
}

/* Drop the oldest turn after the kept messages (the system text): its user
 * message and what answered it, up to the next user message. The last message
 * (the one being answered) is never dropped. Returns 0 when there is no turn
 * to drop. */
static int chat_drop_oldest(chat *h) {
    int a = h->n_keep, b = a + 1;
    if (a >= h->n - 1) return 0;
    while (b < h->n - 1 && strcmp(h->msgs[b].role, "user")) b++;
    for (int i = a; i < b; i++) free((char *)h->msgs[i].content);
    memmove(h->msgs + a, h->msgs + b, (size_t)(h->n - b) * sizeof *h->msgs);
    h->n -= b - a;
    return 1;
}

/* ---- reading a line ----------------------------------------------------------------
 * A terminal gets libedit; anything else getline(). read_line returns one of: */
enum { IN_LINE, IN_END, IN_CLEARED };   /* a line; quit (end of input, Ctrl-C); Ctrl-C cleared a typed line */

static int ctrl_c_key;                  /* set by the Ctrl-C key binding: 1 on an empty line, 2 on a typed one */

static int on_ctrl_c_key(int count, int key) {
    (void)count; (void)key;
    ctrl_c_key = rl_end > 0 ? 2 : 1;
    rl_done = 1;                        /* el_gets returns NULL */
    return 0;
}

/* Before each line: libedit's edit mode clears ISIG, so Ctrl-C is a key
 * (readline() resets the tty modes it sets on every call, hence a hook). */
static int editor_pre_input(void) {
    rl_parse_and_bind("setty -d -isig");
    return 0;
}

/* libedit for a terminal: Ctrl-C bound to on_ctrl_c_key while a line is
 * edited; its own signal handlers stay off (ours stops answers). */
static void editor_init(void) {
    rl_readline_name = "pocket";
    rl_catch_signals = 0;
    rl_pre_input_hook = editor_pre_input;
    setlocale(LC_CTYPE, "");
    rl_initialize();
    setlocale(LC_CTYPE, "C");
    rl_add_defun("pocket-ctrl-c", on_ctrl_c_key, 3);
}

/* The next line into *line (without its newline). */
static int read_line(int tty, char **line, size_t *cap) {
    if (!tty) {
        fputs("> ", stdout);
        fflush(stdout);
        ssize_t got = interrupted ? -1 : getline(line, cap, stdin);
        if (got < 0) { fputc('\n', stdout); return IN_END; }    /* end of input, or Ctrl-C */
        chomp(*line);
        fputs(*line, stdout);           /* show piped input in the transcript */
        fputc('\n', stdout);
        return IN_LINE;
    }
    ctrl_c_key = 0;
    /* the terminal's character set (UTF-8 input) while editing; the rest of
     * pocket runs in the C locale, as its ctype calls expect */
    setlocale(LC_CTYPE, "");
    char *l = interrupted ? NULL : readline("> ");
    setlocale(LC_CTYPE, "C");
    if (!l) {                           /* Ctrl-D or Ctrl-C on an empty line, SIGINT: quit */
        fputc('\n', stdout);
        return ctrl_c_key == 2 ? IN_CLEARED : IN_END;
    }
    if (*l) add_history(l);
    size_t n = strlen(l);
    if (n + 1 > *cap) {
        free(*line);
        *cap = n + 1;
        if (!(*line = malloc(*cap))) die("out of memory");
    }
    memcpy(*line, l, n + 1);
    free(l);
    return IN_LINE;
}

int cmd_chat(int argc, char **argv) {
    opts o;
    opts_init(&o);
    o.n_predict = 256;
    const char *tmpl_name = NULL, *system_text = NULL;
    int show_prompt = 0, split = 1, hide = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) { fputs(chat_help, stdout); return 0; }
        if (!strcmp(a, "--chat-template") || !strcmp(a, "--system")) {
            if (i + 1 >= argc) die("%s needs a value", a);
            if (a[2] == 'c') tmpl_name = argv[++i]; else system_text = argv[++i];
        } else if (!strcmp(a, "--show-prompt")) {
            show_prompt = 1;
        } else if (!strcmp(a, "--hide-reasoning")) {
            hide = 1;
        } else if (!strcmp(a, "--reasoning-format")) {
            if (i + 1 >= argc) die("%s needs a value", a);
            const char *f = argv[++i];
            if (!strcmp(f, "none")) split = 0;
            else if (strcmp(f, "auto")) die("--reasoning-format: '%s' is not auto or none", f);
        } else if (!strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "-f") ||
                   !strcmp(a, "--file") || !parse_common(&o, argc, argv, &i)) {
            die("chat: unknown option '%s' (see pocket chat --help)", a);
        }
    }
    if (!o.seed_given) o.sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);

    pk_model *m = load_model(o.model ? o.model : default_model(), &o, NULL);
    pk_error err = {0};
    const char *tmpl;
    if (pk_chat_resolve(m, tmpl_name, &tmpl, &err)) die("%s", err.msg);
    if (hide && !split) die("--hide-reasoning needs --reasoning-format auto");

    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.n_threads;
    cp.type_k = o.type_k;
    cp.type_v = o.type_v;
    pk_context *c;
    if (pk_context_new(m, &cp, &c, &err)) die("%s", err.msg);
    int n_ctx = pk_context_n_ctx(c);
    pk_sampler *s = pk_sampler_new(&o.sp, pk_model_n_vocab(m), &err);
    if (!s) die("%s", err.msg);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;                    /* no SA_RESTART: a read at the prompt returns */
    sigaction(SIGINT, &sa, NULL);

    int tty = isatty(STDIN_FILENO);
    if (tty) editor_init();
    fprintf(stderr, "pocket chat: template %s (%s), context %d tokens. /reset starts over, /exit or Ctrl-C at an "
            "empty prompt quits, Ctrl-C stops an answer.\n", tmpl, tmpl_name ? "named" : "from the model", n_ctx);

    chat h = {0};
    if (system_text) chat_push(&h, "system", system_text, strlen(system_text));
    h.n_keep = h.n;
    char *line = NULL;
    size_t line_cap = 0;
    int limit = o.n_predict < 0 ? INT_MAX : o.n_predict;
    /* room the answer should have: older turns are dropped to keep it */
    int reserve = limit < n_ctx / 4 ? limit : n_ctx / 4;
    uint64_t turn = 0;

    for (;;) {
        interrupted = 0;
        int in = read_line(tty, &line, &line_cap);
        if (in == IN_END) break;
        if (in == IN_CLEARED || !*line) continue;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            chat_truncate(&h, h.n_keep);
            pk_context_reset(c);
            pk_sampler_reset(s, o.sp.seed + ++turn);
            fprintf(stderr, "[conversation reset]\n");
            continue;
        }
        if (line[0] == '/' && line[1] != '/' && line[1] != ' ' && line[1]) {
            fprintf(stderr, "[unknown command '%s': /reset starts over, /exit quits; "
                    "start a message with // to send a leading /]\n", line);
            continue;
        }
        const char *text = line[0] == '/' && line[1] == '/' ? line + 1 : line;
        chat_push(&h, "user", text, strlen(text));

        /* the prompt, the oldest turns dropped until the answer has room */
        char *prompt;
        int n_tok, dropped = 0;
        int32_t *toks;
        for (;;) {
            if (pk_chat_format(m, tmpl, h.msgs, h.n, 1, &prompt, &err)) die("%s", err.msg);
            toks = tokenize(m, prompt, strlen(prompt), 1, 1, &n_tok);
            if (n_tok + reserve <= n_ctx || !chat_drop_oldest(&h)) break;
            free(toks);
            free(prompt);
            dropped++;
        }
        if (dropped == 1) fprintf(stderr, "[dropped the oldest turn to fit the %d-token context]\n", n_ctx);
        if (dropped > 1) fprintf(stderr, "[dropped the %d oldest turns to fit the %d-token context]\n", dropped, n_ctx);
        if (n_tok >= n_ctx) {
            fprintf(stderr, "[message too long: the prompt would be %d tokens, the context holds %d "
                    "(a larger -c, or a shorter message)]\n", n_tok, n_ctx);
            chat_truncate(&h, h.n - 1);
            free(toks);
            free(prompt);
            continue;
        }
        /* the context keeps what the new prompt shares with it; at least the
         * last token is decoded again, for its logits */
        const int32_t *held = pk_context_tokens(c);
        int n_held = pk_context_pos(c), p = 0, from = 0;
        while (p < n_held && p < n_tok - 1 && held[p] == toks[p]) p++;
        if (p < n_held) {               /* history changed: back to what is shared */
            p = pk_context_truncate(c, p);
            pk_sampler_reset(s, o.sp.seed + ++turn);
        } else {
            from = p;                   /* the sampler has seen the tokens before p */
        }
        if (show_prompt)
            fprintf(stderr, "[prompt: %d tokens, %d new]\n%s[end of prompt]\n", n_tok, n_tok - p, prompt);
        free(prompt);
        if (pk_decode(c, toks + p, n_tok - p, &err)) die("%s", err.msg);
        pk_context_checkpoint(c);       /* recurrent layers: the next turn may go back here */
        for (int i = from; i < n_tok; i++) pk_sampler_accept(s, toks[i]);
        free(toks);

        /* the answer */
        shown v = {.hide = hide};
        if (split && pk_chat_reasoning_new(tmpl, &v.split, &err)) die("%s", err.msg);
        char *ans = NULL;
        size_t ans_n = 0, ans_cap = 0;
        int n_gen = 0;
        const char *stop = NULL;
        while (n_gen < limit) {
            if (interrupted) { stop = "[answer stopped]"; break; }
            int32_t id = pk_sampler_sample(s, pk_context_logits(c));
            if (pk_model_is_eog(m, id)) {
                /* keep the end-of-turn token in the context: the next prompt has it */
                if (pk_context_pos(c) < n_ctx) pk_decode(c, &id, 1, &err);
                break;
            }
            char sbuf[256], *buf = sbuf;
            int len = pk_model_token_piece(m, id, sbuf, sizeof sbuf);
            if (len > (int)sizeof sbuf &&
                (!(buf = malloc((size_t)len)) || pk_model_token_piece(m, id, buf, len) != len))
                die("out of memory for token %d's text (%d bytes)", id, len);
            if (len > 0) {
                show_text(&v, buf, (size_t)len, 0);
                if (ans_n + (size_t)len + 1 > ans_cap) {
                    ans_cap = 2 * (ans_n + (size_t)len + 64);
                    if (!(ans = realloc(ans, ans_cap))) die("out of memory");
                }
                memcpy(ans + ans_n, buf, (size_t)len);
                ans_n += (size_t)len;
            }
            if (buf != sbuf) free(buf);
            n_gen++;
            pk_sampler_accept(s, id);
            if (pk_context_pos(c) >= n_ctx) {
                stop = "[answer cut: the context is full; the next message drops old turns to make room]";
                break;
            }
            if (pk_decode(c, &id, 1, &err)) die("%s", err.msg);
        }
        show_text(&v, "", 0, 1);
        fputc('\n', stdout);
        fflush(stdout);
        if (stop) fprintf(stderr, "%s\n", stop);
        if (v.split) {
            size_t cl;
            const char *cont = pk_chat_reasoning_content(v.split, &cl);
            chat_push(&h, "assistant", cont, cl);
            pk_chat_reasoning_free(v.split);
        } else {
            chat_push(&h, "assistant", ans ? ans : "", ans_n);
        }
        free(ans);
    }

    chat_truncate(&h, 0);
    free(h.msgs);
    free(line);
    pk_sampler_free(s);
    pk_context_free(c);
    pk_model_free(m);
    return 0;
}
