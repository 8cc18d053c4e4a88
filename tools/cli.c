/* cli.c - helpers shared by the pocket commands (see cli.h). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- small utilities ------------------------------------------------------- */

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("pocket: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

long parse_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        die("%s: '%s' is not an integer in [%ld, %ld]", flag, v, lo, hi);
    return x;
}

double parse_double(const char *flag, const char *v, double lo, double hi) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi))
        die("%s: '%s' is not a number in [%g, %g]", flag, v, lo, hi);
    return x;
}

/* Read a whole file; dies with a message naming it on failure. */
char *read_file(const char *path, size_t *len) {
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
const char *default_model(void) {
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

int try_load_model(const char *path, const opts *o, pk_model **out, double *secs, pk_error *err) {
    pk_model *m;
    pk_model_params mp = pk_model_default_params();
    int dflt = 0;
    if (o) {
        mp.n_ctx = o->n_ctx;
        mp.type_k = o->type_k;
        mp.type_v = o->type_v;
        mp.expert_slots = o->expert_slots;
        mp.n_checkpoints = o->n_checkpoints;
        if (o->mem_set) {
            mp.mem = o->mem;
        } else {
            struct stat st;
            uint64_t avail = pk_mem_available(), margin = avail / 20 > (256u << 20) ? avail / 20 : 256u << 20;
            if (avail > margin && stat(path, &st) == 0 && (uint64_t)st.st_size > avail - margin) {
                mp.mem = avail - margin;
                dflt = 1;
            }
        }
    }
    double t0 = now();
    int rc = pk_model_load_params(path, &mp, &m, err);
    if (rc == PK_ERR_ARG && dflt) {
        /* the default budget cannot even hold the resident part: map it all */
        fprintf(stderr, "pocket: note: %s; mapping the whole file instead (pass --mem to insist)\n", err->msg);
        mp.mem = 0;
        rc = pk_model_load_params(path, &mp, &m, err);
    }
    *out = rc ? NULL : m;
    if (secs) *secs = now() - t0;
    return rc;
}

pk_model *load_model(const char *path, const opts *o, double *secs) {
    pk_error err = {0};
    pk_model *m;
    if (try_load_model(path, o, &m, secs, &err)) die("%s", err.msg);
    return m;
}

uint64_t parse_size(const char *flag, const char *v) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    double mul = 1;
    if (end == v || errno || !(x >= 0)) die("%s: '%s' is not a size (e.g. 6G, 512M, 0 for no budget)", flag, v);
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1048576.0; end++; break;
    case 'g': case 'G': mul = 1073741824.0; end++; break;
    case 't': case 'T': mul = 1099511627776.0; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'i' || *end == 'I')) end++;
    if (mul > 1 && (*end == 'b' || *end == 'B')) end++;
    if (*end || x * mul > 1.8e19) die("%s: '%s' is not a size (e.g. 6G, 512M, 0 for no budget)", flag, v);
    return (uint64_t)(x * mul);
}

static void mib(char *b, size_t n, uint64_t v) {
    if (v >= (1ull << 30)) snprintf(b, n, "%.2f GiB", (double)v / 1073741824.0);
    else snprintf(b, n, "%.1f MiB", (double)v / 1048576.0);
}

void print_plan(const pk_model *m, FILE *f) {
    pk_model_plan p;
    pk_model_get_plan(m, &p);
    char a[32], b[32], c[32], d[32], e[32];
    mib(a, sizeof a, p.resident_bytes);
    mib(b, sizeof b, p.context_bytes);
    mib(c, sizeof c, p.expert_bytes);
    if (!p.mem && p.streaming) fprintf(f, "memory plan     no budget, %d experts per layer cached (forced)\n", p.expert_slots);
    else if (!p.mem) fprintf(f, "memory plan     no budget: the file is mapped whole\n");
    else {
        mib(d, sizeof d, p.mem);
        fprintf(f, "memory plan     budget %s\n", d);
    }
    fprintf(f, "  resident      %s of weights (all but the routed experts)\n", a);
    fprintf(f, "  context       %s for %d tokens (KV cache %.1f KiB per token, states, buffers)\n", b, p.n_ctx,
            (double)p.kv_bytes_per_token / 1024.0);
    if (p.n_checkpoints) {
        mib(d, sizeof d, p.checkpoint_bytes * (uint64_t)p.n_checkpoints);
        mib(e, sizeof e, p.checkpoint_bytes);
        fprintf(f, "  checkpoints   %s of it: %d recurrent-state checkpoints of %s (to resume a prefix)\n", d,
                p.n_checkpoints, e);
    }
    if (!p.n_expert) return;
    if (p.streaming) {
        mib(d, sizeof d, p.cache_bytes);
        mib(e, sizeof e, p.expected_read_per_token);
        fprintf(f, "  experts       %s in the file; cache of %d of %d experts per layer (%s), the rest read on demand\n",
                c, p.expert_slots, p.n_expert, d);
        fprintf(f, "  storage       %s read per token expected (uniform routing; real routing has locality)\n", e);
    } else {
        fprintf(f, "  experts       %s, all mapped (%d per layer)\n", c, p.n_expert);
    }
}

/* Tokenize, growing the buffer as needed. */
int32_t *tokenize(const pk_model *m, const char *text, size_t len, int add_special,
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

void print_piece(const pk_model *m, int32_t id, FILE *out) {
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

void opts_init(opts *o) {
    memset(o, 0, sizeof *o);
    o->n_predict = 128;
    o->n_chunks = -1;
    o->n_checkpoints = -1;
    o->sp = pk_sampler_default_params();
}

int parse_cache_type(const char *flag, const char *v) {
    int t = pk_cache_type_parse(v);
    if (t < 0) die("%s: unknown KV cache type '%s' (f32, f16, q8_0)", flag, v);
    return t;
}

int parse_common(opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
#define NEXT() (*i + 1 < argc ? argv[++*i] : (die("%s needs a value", a), (char *)0))
    if (!strcmp(a, "-m") || !strcmp(a, "--model")) o->model = NEXT();
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) o->n_threads = (int)parse_long(a, NEXT(), 1, 512);
    else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) o->n_ctx = (int)parse_long(a, NEXT(), 0, 1 << 22);
    else if (!strcmp(a, "-ctk") || !strcmp(a, "--cache-type-k")) o->type_k = parse_cache_type(a, NEXT());
    else if (!strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) o->type_v = parse_cache_type(a, NEXT());
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
    else if (!strcmp(a, "--kl-divergence-base")) o->kld_base = NEXT();
    else if (!strcmp(a, "--kl-divergence")) o->kld = NEXT();
    else if (!strcmp(a, "--mem")) { o->mem = parse_size(a, NEXT()); o->mem_set = 1; }
    else if (!strcmp(a, "--expert-slots")) o->expert_slots = (int)parse_long(a, NEXT(), 1, 1 << 16);
    else return 0;
#undef NEXT
    return 1;
}

int is_help(const char *a) { return !strcmp(a, "-h") || !strcmp(a, "--help"); }
