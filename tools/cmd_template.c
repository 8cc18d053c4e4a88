/* cmd_template.c - `pocket template`: render a conversation (OpenAI message
 * JSON, with tools) through a model's chat template or a template file, to
 * see the prompt the model is given - for debugging templates. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char *template_help =
    "usage: pocket template [-m MODEL] [--chat-template-file FILE] [options] CONVERSATION.json\n"
    "\n"
    "Render a conversation with a chat template (Jinja, run as Hugging Face's\n"
    "apply_chat_template runs it) and print the prompt text, nothing added.\n"
    "CONVERSATION.json is {\"messages\": [...], \"tools\": [...],\n"
    "\"add_generation_prompt\": true, ...} - every key is a template variable\n"
    "(enable_thinking, reasoning_effort, ...) - or a bare array of messages;\n"
    "'-' reads it from standard input. Errors name the template line.\n"
    "  -m, --model FILE          the model's tokenizer.chat_template, its BOS/EOS\n"
    "                            tokens, and the prompt as pocket tokenizes it (a\n"
    "                            leading BOS text is dropped when the tokenizer adds\n"
    "                            BOS itself); default: the bundled model\n"
    "  --chat-template-file FILE this template instead of the model's (no -m: no model)\n"
    "  --bos-token TEXT, --eos-token TEXT\n"
    "                            the variables bos_token / eos_token (default: the\n"
    "                            model's; none without a model)\n"
    "  --add-generation-prompt, --no-generation-prompt\n"
    "                            set add_generation_prompt (default: the\n"
    "                            conversation's, else false)\n"
    "  --now TIME                strftime_now()'s time, UTC: seconds since 1970 or\n"
    "                            YYYY-MM-DD[THH:MM:SS] (default: the clock, local time)\n"
    "  --plain-blocks            Jinja2's defaults (trim_blocks, lstrip_blocks off)\n"
    "                            instead of Hugging Face's (on)\n"
    "  --tokens                  with a model: print the token count to stderr\n";

static int64_t parse_time(const char *v) {
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end != v && !*end && !errno && x > 0) return x;
    struct tm tm = {0};
    int y, mo, d, h = 0, mi = 0, s = 0, n = 0;
    if (sscanf(v, "%d-%d-%d%n", &y, &mo, &d, &n) != 3 ||
        (v[n] && (sscanf(v + n, "T%d:%d:%d", &h, &mi, &s) != 3 && sscanf(v + n, " %d:%d:%d", &h, &mi, &s) != 3)) ||
        y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60)
        die("--now %s: not a time (seconds since 1970, or YYYY-MM-DD[THH:MM:SS])", v);
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = s;
    time_t t = timegm(&tm);
    if (t <= 0) die("--now %s: not a time after 1970", v);
    return (int64_t)t;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *tfile = NULL, *conv = NULL, *bos = NULL, *eos = NULL;
    int add_gen = -1, plain = 0, show_tokens = 0;
    int64_t now_t = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (is_help(a)) { fputs(template_help, stdout); return 0; }
#define NEED() do { if (!next) die("template: %s needs a value", a); i++; } while (0)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) { NEED(); model = next; }
        else if (!strcmp(a, "--chat-template-file")) { NEED(); tfile = next; }
        else if (!strcmp(a, "--bos-token")) { NEED(); bos = next; }
        else if (!strcmp(a, "--eos-token")) { NEED(); eos = next; }
        else if (!strcmp(a, "--now")) { NEED(); now_t = parse_time(next); }
        else if (!strcmp(a, "--add-generation-prompt")) add_gen = 1;
        else if (!strcmp(a, "--no-generation-prompt")) add_gen = 0;
        else if (!strcmp(a, "--plain-blocks")) plain = 1;
        else if (!strcmp(a, "--tokens")) show_tokens = 1;
        else if (a[0] == '-' && a[1]) die("template: unknown option '%s' (see pocket template --help)", a);
        else if (!conv) conv = a;
        else die("template: more than one conversation file ('%s' and '%s')", conv, a);
#undef NEED
    }
    if (!conv) die("template: no conversation file (see pocket template --help)");
    pk_model *m = NULL;
    if (model || !tfile) m = load_model(model ? model : default_model(), NULL, NULL);
    pk_error err = {0};
    pk_jinja *t;
    if (tfile) {
        size_t n;
        char *text = read_file(tfile, &n);
        if (pk_jinja_parse(text, n, plain ? PK_JINJA_PLAIN_BLOCKS : 0, &t, &err)) die("%s: %s", tfile, err.msg);
        free(text);
    } else {
        size_t n;
        const char *text = pk_chat_template_text(m, &n);
        const char *path = model ? model : default_model();
        if (!text) die("%s: the model has no chat template (tokenizer.chat_template); give --chat-template-file FILE", path);
        if (pk_jinja_parse(text, n, plain ? PK_JINJA_PLAIN_BLOCKS : 0, &t, &err))
            die("%s: tokenizer.chat_template: %s", path, err.msg);
    }
    size_t clen;
    char *cjson = read_file(strcmp(conv, "-") ? conv : "/dev/stdin", &clen);
    pk_jinja_params p;
    pk_chat_jinja_params(m, &p);
    if (bos) p.bos_token = bos;
    if (eos) p.eos_token = eos;
    p.add_generation_prompt = add_gen;
    p.now = now_t;
    char *out;
    size_t olen;
    if (pk_chat_jinja_render(m, t, cjson, clen, &p, &out, &olen, &err)) {
        if (!strncmp(err.msg, "conversation: ", 14)) die("%s: %s", conv, err.msg + 14);
        if (tfile) die("%s: %s", tfile, err.msg);
        die("%s: tokenizer.chat_template: %s", model ? model : default_model(), err.msg);
    }
    fwrite(out, 1, olen, stdout);
    if (fflush(stdout)) die("template: writing the output: %s", strerror(errno));
    if (show_tokens && m) {
        int n_tok = 0;
        int32_t *ids = tokenize(m, out, olen, 1, 1, &n_tok);
        fprintf(stderr, "%d tokens\n", n_tok);
        free(ids);
    }
    free(out);
    free(cjson);
    pk_jinja_free(t);
    pk_model_free(m);
    return 0;
}
