/* cmd_bench.c - `pocket bench`: prompt-processing (pp) and generation (tg)
 * throughput the way llama-bench measures it, with every draw published,
 * the machine and configuration recorded, the decode speed set against the
 * memory-bandwidth ceiling (weight bytes counted by the engine), an optional
 * A/B comparison run in interleaved child processes with a Welch interval on
 * the difference, an optional perplexity as quality gate, and JSON output.
 *
 * Method. Tokens are pseudo-random ids in [0, n_vocab) from a fixed seed.
 * pp: decode -p tokens in one pk_decode call from an empty context.
 * tg: decode -n tokens one pk_decode call at a time from an empty context.
 * With -d D both start after D other tokens instead (as llama-bench's
 * "pp512 @ d4096"): the context is filled once, untimed, and cut back to
 * them before each run (pk_context_truncate; a model with recurrent layers
 * returns to a checkpoint taken there).
 * Each test gets one untimed warm-up run, then -r timed draws.
 *
 * A/B. The kernel table is fixed per process, so with --ab every draw runs
 * in a child `pocket bench --single ...` (the same binary, via /proc/self/exe),
 * children alternating A B A B ...; each child does its own warm-up, one pp
 * and one tg draw, and prints one `POCKET_BENCH key=value ...` line.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bandwidth.h"
#include "storage.h"
#include "cli.h"
#include "ppl_score.h"

#define TOKEN_SEED 1234u
#define PPL_CTX 512
#define PPL_CHUNKS 8
#define MAX_DRAWS 1000

static const char *bench_help =
    "usage: pocket bench [-m MODEL] [-p 512] [-n 64] [-d 0] [-r 5] [-t N] [-c N] [-b N] [--mem SIZE] [--json OUT]\n"
    "                    [--ab \"FLAGS_A\" \"FLAGS_B\"] [--ppl-file TEXT] [--no-bw] [--bw-refresh]\n"
    "                    [--profile]\n"
    "\n"
    "Throughput of MODEL as llama-bench measures it: pp (a prompt of -p tokens\n"
    "decoded from an empty context) and tg (-n tokens decoded one at a time from\n"
    "an empty context), both with fixed pseudo-random token ids; one untimed\n"
    "warm-up, then -r draws of each. Every draw is printed with n, mean, sd, min\n"
    "and max of tok/s, with the machine (CPU, cores, kernel ISA, load average)\n"
    "and configuration (type mix, threads, context size).\n"
    "\n"
    "  -p N, -n N        prompt and generation lengths (0 skips that test)\n"
    "  -d N              depth: both tests start after N other tokens in the\n"
    "                    context (filled once, untimed), not from an empty one\n"
    "  -r N              timed draws per test (default 5)\n"
    "  -t N, -c N        threads (default: all cores), context size (default d + p + n)\n"
    "  -b N              prompt tokens per forward pass (default: the library's)\n"
    "  -ctk T, -ctv T    KV cache type of the keys / values: f32, f16 (default), q8_0\n"
    "  --json OUT        also write everything (every draw) as JSON to OUT\n"
    "  --ab \"A\" \"B\"      compare two configurations; each is flags overriding the\n"
    "                    base ones: -t N, -c N, -b N, -ctk T, -ctv T,\n"
    "                    POCKET_KERNELS=NAME.\n"
    "                    Draws run in child processes, interleaved A B A B, each\n"
    "                    under the same --mem / --expert-slots; prints the\n"
    "                    difference of means B - A with a 95% Welch interval\n"
    "  --ppl-file TEXT   also score the first 8 windows of 512 tokens of TEXT\n"
    "                    (as `pocket perplexity`), the quality beside the speed\n"
    "  --mem SIZE        load under a memory budget (see pocket run --help); the\n"
    "                    report adds the expert cache's hit rate, the storage\n"
    "                    bytes per token and the time spent waiting for them,\n"
    "                    and the share of the draws' time the file's device had\n"
    "                    a read in flight (the kernel's counters, Linux)\n"
    "  --no-bw           skip the memory-bandwidth probe\n"
    "  --bw-refresh      re-measure the bandwidth instead of using the cached figure\n"
    "  --profile         after the draws, one more run of each test with the phases\n"
    "                    of the forward pass timed: per phase (embedding, norms,\n"
    "                    each mixer and FFN kind and their parts, output head) the\n"
    "                    time per token, its share, the time waiting for worker\n"
    "                    threads, the weight and state bytes read and the GB/s\n"
    "                    that makes (against the bandwidth probe)\n"
    "\n"
    "The probe reads a 1 GiB array 5 times with the bench's thread count and is\n"
    "cached per CPU model and thread count in ~/.cache/pocket/bandwidth. The tg\n"
    "ceiling is bandwidth / (weight bytes + state bytes) per token, both counted\n"
    "by the engine while decoding: weights read, plus the KV cache read and\n"
    "written and the recurrent (DeltaNet) and conv states read and written.\n";

/* ---- configuration and results ----------------------------------------------------- */

typedef struct cfg {
    char label[4];        /* "A", "B", or "" without --ab */
    char flags[256];      /* as given to --ab */
    int n_threads, n_ctx; /* 0: default */
    int n_batch;          /* prompt tokens per forward pass, 0: the library's default */
    int type_k, type_v;   /* KV cache types (PK_CACHE_*), 0: the library's default */
    char kernels[16];     /* POCKET_KERNELS for the child, or "" (inherited) */
} cfg;

typedef struct series {
    double tps[MAX_DRAWS];  /* tok/s of each draw, in run order */
    int n;
} series;

#define PROF_MAX 40   /* phases --profile keeps (the engine has at most 32) */

typedef struct stats { int n; double mean, sd, min, max; } stats;

/* What one configuration measured. */
typedef struct cres {
    series pp, tg;
    uint64_t pp_tokens, pp_bytes, tg_tokens, tg_bytes;  /* timed draws, engine counts */
    uint64_t tg_state;
    uint64_t tg_hits, tg_misses, tg_storage;            /* expert cache (--mem) in the tg draws */
    uint64_t tg_pf, tg_pf_hits;
    double tg_wait;                                  /* seconds waiting for storage in the tg draws */
    double tg_secs;                                  /* the tg draws' wall time */
    int dev_ok;                                      /* the device's counters were read */
    uint64_t dev_busy_ms, dev_read;                  /* ... over the tg draws */
    char isa[16];
    int n_threads, n_ctx;
    int have_ppl;
    ppl_result ppl;
    char ppl_isa[16];
    int have_bw;
    bw_result bw;
    /* --profile: the phases of one more run of each test (0: pp, 1: tg) */
    struct {
        int n, tokens;
        double secs;
        struct {
            char name[40];
            int parent;
            double secs, wait;
            uint64_t wbytes, sbytes;
        } ph[PROF_MAX];
    } prof[2];
} cres;

typedef struct bench {
    const char *model, *json, *ppl_file;
    int n_prompt, n_gen, reps, no_bw, bw_refresh, ab, profile;
    int n_depth;          /* -d: tokens in the context before each test */
    int mem_set, expert_slots;   /* --mem, --expert-slots: passed to --ab's children */
    uint64_t mem;
    cfg base, c[2];
    cres r[2];
    /* model */
    pk_model_info mi;     /* its strings: copies in arch, name (the model may go first) */
    char arch[64], name[256];
    pk_model_plan plan;   /* the memory plan (--mem) */
    char types[512];      /* "F16: 44 (42.25 MiB), F32: ..." */
    char types_json[1024];
    uint64_t tensor_bytes;
    /* machine */
    char cpu[256], os[256];
    long cores;
    double load[3];
    uint64_t llc_bytes;
    char start[32];
} bench;

static stats stats_of(const series *s) {
    stats st = {.n = s->n};
    if (!s->n) return st;
    st.min = st.max = s->tps[0];
    for (int i = 0; i < s->n; i++) {
        st.mean += s->tps[i];
        if (s->tps[i] < st.min) st.min = s->tps[i];
        if (s->tps[i] > st.max) st.max = s->tps[i];
    }
    st.mean /= s->n;
    double m2 = 0;
    for (int i = 0; i < s->n; i++) m2 += (s->tps[i] - st.mean) * (s->tps[i] - st.mean);
    st.sd = s->n > 1 ? sqrt(m2 / (s->n - 1)) : 0;
    return st;
}

static void push(series *s, double v) {
    if (s->n < MAX_DRAWS) s->tps[s->n++] = v;
}

/* ---- Student t quantile (for Welch's interval) -------------------------------------- */

/* Continued fraction of the regularized incomplete beta (modified Lentz). */
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300;
    double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 500; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d; if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c; if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d; if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c; if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15) break;
    }
    return h;
}

/* I_x(a, b) */
static double incbeta(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1) / (a + b + 2)) return exp(lbt) * betacf(a, b, x) / a;
    return 1 - exp(lbt) * betacf(b, a, 1 - x) / b;
}

/* P(T <= t) for Student's t with df degrees of freedom (df > 0, real). */
static double student_cdf(double t, double df) {
    double tail = 0.5 * incbeta(df / 2, 0.5, df / (df + t * t));
    return t >= 0 ? 1 - tail : tail;
}

/* The p-quantile (0.5 < p < 1) of Student's t with df degrees of freedom,
 * by bisection on the CDF. */
static double student_quantile(double p, double df) {
    double lo = 0, hi = 1;
    while (student_cdf(hi, df) < p && hi < 1e12) hi *= 2;
    for (int i = 0; i < 200; i++) {
        double mid = (lo + hi) / 2;
        if (student_cdf(mid, df) < p) lo = mid; else hi = mid;
    }
    return (lo + hi) / 2;
}

typedef struct welch { int ok; double diff, lo, hi, df, q; } welch;

/* Difference of means b - a with a 95% Welch interval; ok = 0 when either
 * side has fewer than 2 draws. Zero spread on both sides gives df = inf and
 * a zero-width interval. */
static welch welch_of(const series *a, const series *b) {
    stats sa = stats_of(a), sb = stats_of(b);
    welch w = {.diff = sb.mean - sa.mean};
    if (sa.n < 2 || sb.n < 2) return w;
    double va = sa.sd * sa.sd / sa.n, vb = sb.sd * sb.sd / sb.n, se = sqrt(va + vb);
    w.ok = 1;
    if (se == 0) {
        w.lo = w.hi = w.diff;
        w.df = INFINITY;
        w.q = 1.959963984540054;
        return w;
    }
    w.df = (va + vb) * (va + vb) / (va * va / (sa.n - 1) + vb * vb / (sb.n - 1));
    w.q = student_quantile(0.975, w.df);
    w.lo = w.diff - w.q * se;
    w.hi = w.diff + w.q * se;
    return w;
}

/* ---- machine and model description --------------------------------------------------- */

static void human_bytes(double b, char *out, size_t cap) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) { b /= 1024; i++; }
    snprintf(out, cap, "%.2f %s", b, u[i]);
}

/* Size of the highest-level data/unified cache of cpu0, from sysfs (0: unknown). */
static uint64_t llc_size(void) {
    uint64_t best = 0;
    int best_level = 0;
    for (int i = 0; i < 16; i++) {
        char path[128], buf[64];
        int level = 0;
        unsigned long long sz = 0;
        char unit = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fscanf(f, "%d", &level) != 1) level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) {
            if (!fgets(buf, sizeof buf, f)) buf[0] = 0;
            fclose(f);
            if (!strncmp(buf, "Instruction", 11)) continue;
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r"))) continue;
        if (fscanf(f, "%llu%c", &sz, &unit) < 1) sz = 0;
        fclose(f);
        if (unit == 'K') sz <<= 10;
        else if (unit == 'M') sz <<= 20;
        else if (unit == 'G') sz <<= 30;
        if (level > best_level) { best_level = level; best = sz; }
    }
    return best;
}

static void describe_machine(bench *b) {
    bw_cpu_model(b->cpu, sizeof b->cpu);
    b->cores = sysconf(_SC_NPROCESSORS_ONLN);
    b->load[0] = b->load[1] = b->load[2] = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf %lf", &b->load[0], &b->load[1], &b->load[2]) != 3)
            b->load[0] = b->load[1] = b->load[2] = -1;
        fclose(f);
    }
    struct utsname u;
    if (uname(&u) == 0) snprintf(b->os, sizeof b->os, "%s %s %s", u.sysname, u.release, u.machine);
    else snprintf(b->os, sizeof b->os, "unknown");
    b->llc_bytes = llc_size();
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(b->start, sizeof b->start, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void json_str(FILE *f, const char *s);

/* Tensor type mix from pk_model_tensor, as text and as a JSON object. */
static void describe_model(bench *b, const pk_model *m) {
    pk_model_get_plan(m, &b->plan);
    pk_model_get_info(m, &b->mi);
    snprintf(b->arch, sizeof b->arch, "%s", b->mi.arch ? b->mi.arch : "");
    snprintf(b->name, sizeof b->name, "%s", b->mi.name ? b->mi.name : "");
    b->mi.arch = b->arch;
    b->mi.name = b->name;
    const char *tn[64];
    int cnt[64] = {0};
    uint64_t tb[64] = {0};
    int nt = 0, N = pk_model_n_tensors(m);
    b->tensor_bytes = 0;
    for (int i = 0; i < N; i++) {
        const char *name, *type;
        int64_t ne[4];
        uint64_t nb;
        if (pk_model_tensor(m, i, &name, &type, ne, &nb)) continue;
        int j = 0;
        while (j < nt && strcmp(tn[j], type)) j++;
        if (j == nt && nt < 64) tn[nt++] = type;
        if (j < 64) { cnt[j]++; tb[j] += nb; }
        b->tensor_bytes += nb;
    }
    size_t o = 0, oj = 0;
    oj += snprintf(b->types_json + oj, sizeof b->types_json - oj, "{");
    for (int j = 0; j < nt; j++) {
        char hb[32];
        human_bytes((double)tb[j], hb, sizeof hb);
        if (o < sizeof b->types)
            o += snprintf(b->types + o, sizeof b->types - o, "%s%s: %d (%s)", j ? ", " : "", tn[j], cnt[j], hb);
        if (oj < sizeof b->types_json)
            oj += snprintf(b->types_json + oj, sizeof b->types_json - oj,
                           "%s\"%s\": {\"tensors\": %d, \"bytes\": %llu}", j ? ", " : "", tn[j], cnt[j],
                           (unsigned long long)tb[j]);
    }
    if (oj < sizeof b->types_json) snprintf(b->types_json + oj, sizeof b->types_json - oj, "}");
    else snprintf(b->types_json, sizeof b->types_json, "{}");  /* too many types to list */
}

/* ---- the draws ------------------------------------------------------------------------ */

/* n fixed pseudo-random token ids in [0, V) (splitmix64 from TOKEN_SEED). */
static int32_t *bench_tokens(int n, int V) {
    int32_t *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    if (!t) die("out of memory");
    uint64_t x = TOKEN_SEED;
    for (int i = 0; i < n; i++) {
        uint64_t z = (x += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        t[i] = (int32_t)(((z >> 32) * (uint64_t)V) >> 32);
    }
    return t;
}

/* The context holding the depth tokens dt[0..nd) alone: cut back to them,
 * or (when they are not reachable: the first run, a model with recurrent
 * layers and no checkpoint there) filled again, untimed, and a checkpoint
 * kept at their end. */
static void to_depth(pk_context *c, const int32_t *dt, int nd) {
    pk_error err = {0};
    if (pk_context_truncate(c, nd) == nd) return;
    pk_context_reset(c);
    if (pk_decode(c, dt, nd, &err)) die("%s", err.msg);
    pk_context_checkpoint(c);
}

/* One pp (gen = 0) or tg (gen = 1) run of n tokens after the depth tokens
 * dtok[0..nd) (nd 0: from an empty context); returns tok/s, adds the
 * engine's token and weight-byte counts. */
static double run_once(pk_context *c, const int32_t *dtok, int nd, const int32_t *toks, int n, int gen,
                       uint64_t *tokens, uint64_t *bytes, uint64_t *state, cres *xr, const char *dev) {
    pk_error err = {0};
    pk_stats s0, s1;
    st_dev_count d0, d1;
    to_depth(c, dtok, nd);
    pk_context_stats(c, &s0);
    const int dev_ok = dev && st_dev_counters(dev, &d0) == 0;
    double t0 = now();
    if (!gen) {
        if (pk_decode(c, toks, n, &err)) die("%s", err.msg);
    } else {
        for (int i = 0; i < n; i++)
            if (pk_decode(c, toks + i, 1, &err)) die("%s", err.msg);
    }
    double dt = now() - t0;
    pk_context_stats(c, &s1);
    if (xr && dev_ok && st_dev_counters(dev, &d1) == 0) {
        xr->dev_ok = 1;
        xr->dev_busy_ms += d1.busy_ms - d0.busy_ms;
        xr->dev_read += d1.read_bytes - d0.read_bytes;
    }
    if (xr) xr->tg_secs += dt;
    if (tokens) *tokens += s1.tokens - s0.tokens;
    if (bytes) *bytes += s1.weight_bytes - s0.weight_bytes;
    if (state) *state += s1.state_bytes - s0.state_bytes;
    if (xr) {
        xr->tg_hits += s1.expert_hits - s0.expert_hits;
        xr->tg_misses += s1.expert_misses - s0.expert_misses;
        xr->tg_storage += s1.storage_bytes - s0.storage_bytes;
        xr->tg_pf += s1.expert_prefetches - s0.expert_prefetches;
        xr->tg_pf_hits += s1.expert_prefetch_hits - s0.expert_prefetch_hits;
        xr->tg_wait += s1.storage_secs - s0.storage_secs;
    }
    return n / (dt > 0 ? dt : 1e-9);
}

static int default_ctx(const bench *b, const cfg *c) {
    return c->n_ctx ? c->n_ctx : b->n_depth + b->n_prompt + b->n_gen;
}

/* One more run of test gen (0: pp, 1: tg) with the phases timed, into r. */
static void run_profiled(pk_context *c, const int32_t *dt, int nd, const int32_t *toks, int n, int gen, cres *r) {
    pk_profile_phase ph[PROF_MAX];
    to_depth(c, dt, nd);   /* a refill is not profiled */
    pk_context_profile(c, 1);
    const double tps = run_once(c, dt, nd, toks, n, gen, NULL, NULL, NULL, NULL, NULL);
    pk_context_profile(c, 0);
    int np = pk_context_profile_get(c, ph, PROF_MAX);
    if (np > PROF_MAX) np = PROF_MAX;
    r->prof[gen].n = np;
    r->prof[gen].tokens = n;
    r->prof[gen].secs = n / tps;
    for (int i = 0; i < np; i++) {
        snprintf(r->prof[gen].ph[i].name, sizeof r->prof[gen].ph[i].name, "%s", ph[i].name);
        r->prof[gen].ph[i].parent = ph[i].parent;
        r->prof[gen].ph[i].secs = ph[i].secs;
        r->prof[gen].ph[i].wait = ph[i].wait_secs;
        r->prof[gen].ph[i].wbytes = ph[i].weight_bytes;
        r->prof[gen].ph[i].sbytes = ph[i].state_bytes;
    }
}

/* Warm-up and reps draws of each test in this process, into r. */
static void run_local(const bench *b, const pk_model *m, const cfg *c, int reps, cres *r) {
    pk_error err = {0};
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = default_ctx(b, c);
    cp.n_threads = c->n_threads;
    cp.n_batch = c->n_batch;
    cp.type_k = c->type_k;
    cp.type_v = c->type_v;
    if (cp.n_ctx < b->n_depth + b->n_prompt || cp.n_ctx < b->n_depth + b->n_gen)
        die("bench: -c %d is smaller than the test (-d %d, -p %d, -n %d)", cp.n_ctx, b->n_depth, b->n_prompt,
            b->n_gen);
    pk_context *ctx;
    if (pk_context_new(m, &cp, &ctx, &err)) die("%s", err.msg);
    int n_max = b->n_prompt > b->n_gen ? b->n_prompt : b->n_gen;
    /* the warm-up and every draw get tokens of their own: under a memory
       budget a draw must not find its experts cached by the one before;
       the depth tokens come after them */
    int32_t *toks = bench_tokens(n_max * (reps + 1) + b->n_depth, pk_model_n_vocab(m));
    const int32_t *dt = toks + (size_t)n_max * (reps + 1);
    const int nd = b->n_depth;
    if (b->n_prompt) {
        run_once(ctx, dt, nd, toks, b->n_prompt, 0, NULL, NULL, NULL, NULL, NULL);  /* warm-up */
        for (int i = 0; i < reps; i++)
            push(&r->pp, run_once(ctx, dt, nd, toks + (size_t)(i + 1) * n_max, b->n_prompt, 0, &r->pp_tokens,
                                  &r->pp_bytes, NULL, NULL, NULL));
        if (b->profile) run_profiled(ctx, dt, nd, toks, b->n_prompt, 0, r);
    }
    if (b->n_gen) {
        run_once(ctx, dt, nd, toks, b->n_gen, 1, NULL, NULL, NULL, NULL, NULL);
        for (int i = 0; i < reps; i++)
            push(&r->tg, run_once(ctx, dt, nd, toks + (size_t)(i + 1) * n_max, b->n_gen, 1, &r->tg_tokens,
                                  &r->tg_bytes, &r->tg_state, r, b->plan.streaming ? b->model : NULL));
        if (b->profile) run_profiled(ctx, dt, nd, toks, b->n_gen, 1, r);
    }
    pk_stats st;
    pk_context_stats(ctx, &st);
    snprintf(r->isa, sizeof r->isa, "%s", st.isa);
    r->n_threads = st.n_threads;
    r->n_ctx = pk_context_n_ctx(ctx);
    free(toks);
    pk_context_free(ctx);
}

/* Perplexity of the first PPL_CHUNKS windows of the text, in this process. */
static void run_ppl_local(const bench *b, const pk_model *m, const cfg *c, cres *r) {
    size_t len;
    char *text = read_file(b->ppl_file, &len);
    int n_tok;
    int32_t *toks = tokenize(m, text, len, 1, 0, &n_tok);
    free(text);
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    int w = PPL_CTX;
    if (mi.n_ctx_train > 0 && mi.n_ctx_train < w) w = mi.n_ctx_train;  /* stay within training */
    if (w > n_tok) w = n_tok;  /* a short text: one window of all of it */
    pk_error err = {0};
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = w > 0 ? w : 1;
    cp.n_threads = c->n_threads;
    cp.n_batch = c->n_batch;
    cp.type_k = c->type_k;
    cp.type_v = c->type_v;
    pk_context *ctx;
    if (pk_context_new(m, &cp, &ctx, &err)) die("%s", err.msg);
    if (ppl_run(m, ctx, toks, n_tok, w, PPL_CHUNKS, &r->ppl, &err))
        die("%s: %s", b->ppl_file, err.msg);
    pk_stats st;
    pk_context_stats(ctx, &st);
    snprintf(r->ppl_isa, sizeof r->ppl_isa, "%s", st.isa);
    r->have_ppl = 1;
    pk_context_free(ctx);
    free(toks);
}

/* ---- child processes (--ab) ------------------------------------------------------------ */

/* Parse FLAGS of --ab into c (starting from the base configuration). */
static void parse_ab_flags(const char *label, const char *flags, const cfg *base, cfg *c) {
    *c = *base;
    snprintf(c->label, sizeof c->label, "%s", label);
    if (strlen(flags) >= sizeof c->flags) die("--ab: configuration %s is too long", label);
    snprintf(c->flags, sizeof c->flags, "%s", flags);
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", flags);
    for (char *tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
        if (!strcmp(tok, "-ctk") || !strcmp(tok, "-ctv")) {
            char *v = strtok_r(NULL, " \t", &save);
            if (!v) die("--ab: %s needs a value in configuration %s \"%s\"", tok, label, flags);
            *(tok[3] == 'k' ? &c->type_k : &c->type_v) = parse_cache_type(tok, v);
        } else if (!strcmp(tok, "-t") || !strcmp(tok, "-c") || !strcmp(tok, "-b")) {
            char *v = strtok_r(NULL, " \t", &save);
            if (!v) die("--ab: %s needs a value in configuration %s \"%s\"", tok, label, flags);
            if (tok[1] == 't') c->n_threads = (int)parse_long("--ab -t", v, 1, 512);
            else if (tok[1] == 'c') c->n_ctx = (int)parse_long("--ab -c", v, 1, 1 << 22);
            else c->n_batch = (int)parse_long("--ab -b", v, 1, 1 << 20);
        } else if (!strncmp(tok, "POCKET_KERNELS=", 15)) {
            const char *k = tok + 15;
            if (!pk_kernel_variant_usable(k))
                die("--ab: POCKET_KERNELS=%s is not a kernel variant this CPU can run "
                    "(see pocket --help)", k);
            snprintf(c->kernels, sizeof c->kernels, "%s", k);
        } else {
            die("--ab: unsupported flag '%s' in configuration %s \"%s\" (use -t N, -c N, -b N, "
                "-ctk T, -ctv T, POCKET_KERNELS=NAME)", tok, label, flags);
        }
    }
}

/* Run this binary as `bench ARGS...` with c's kernels in its environment;
 * returns its `POCKET_BENCH ` line (without the prefix) in out[cap]. Dies if
 * the child fails or prints no such line (its stderr passes through). */
static void run_child(const cfg *c, char *const *args, char *out, size_t cap) {
    int fd[2];
    if (pipe(fd)) die("bench: pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) die("bench: fork: %s", strerror(errno));
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], STDOUT_FILENO) < 0) _exit(127);
        close(fd[1]);
        if (c->kernels[0]) setenv("POCKET_KERNELS", c->kernels, 1);
        execv("/proc/self/exe", args);
        fprintf(stderr, "pocket: error: bench: cannot run /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    char buf[8192];
    size_t n = 0;
    ssize_t k;
    while ((k = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0 || (k < 0 && errno == EINTR))
        if (k > 0) n += (size_t)k;
    buf[n] = 0;
    close(fd[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) die("bench: waitpid: %s", strerror(errno));
    const char *name = c->label[0] ? c->label : "base";
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        die("bench: configuration %s (\"%s\") failed in its child process (%s %d)", name, c->flags,
            WIFEXITED(status) ? "exit" : "signal", WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    char *line = strstr(buf, "POCKET_BENCH ");
    if (!line) die("bench: configuration %s: the child process printed no result line", name);
    line += 13;
    snprintf(out, cap, "%.*s", (int)strcspn(line, "\n"), line);
}

/* Value of key in a "k=v k=v" line, or NULL. */
static const char *kv(const char *line, const char *key, char *val, size_t cap) {
    size_t kl = strlen(key);
    for (const char *p = line; (p = strstr(p, key)); p += kl)
        if ((p == line || p[-1] == ' ') && p[kl] == '=') {
            snprintf(val, cap, "%.*s", (int)strcspn(p + kl + 1, " \n"), p + kl + 1);
            return val;
        }
    return NULL;
}

static double kv_num(const char *line, const char *key) {
    char v[64];
    if (!kv(line, key, v, sizeof v)) die("bench: child result line lacks %s: %s", key, line);
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end) die("bench: child result %s='%s' is not a number", key, v);
    return x;
}

/* argv for a child: bench --single|--single-ppl ... with c's -t and -c. */
static void child_args(const bench *b, const cfg *c, int ppl, char **a, char bufs[9][32]) {
    int k = 0;
    static char exe[] = "pocket", cmd[] = "bench", single[] = "--single", sppl[] = "--single-ppl",
                fm[] = "-m", fp[] = "-p", fn[] = "-n", fd[] = "-d", ft[] = "-t", fc[] = "-c", fb[] = "-b",
                fctk[] = "-ctk", fctv[] = "-ctv", fmem[] = "--mem", fxs[] = "--expert-slots";
    a[k++] = exe;
    a[k++] = cmd;
    a[k++] = ppl ? sppl : single;
    if (ppl) a[k++] = (char *)b->ppl_file;
    a[k++] = fm;
    a[k++] = (char *)b->model;
    snprintf(bufs[0], 32, "%d", b->n_prompt);
    snprintf(bufs[1], 32, "%d", b->n_gen);
    a[k++] = fp; a[k++] = bufs[0];
    a[k++] = fn; a[k++] = bufs[1];
    if (b->n_depth) { snprintf(bufs[8], 32, "%d", b->n_depth); a[k++] = fd; a[k++] = bufs[8]; }
    if (c->n_threads) { snprintf(bufs[2], 32, "%d", c->n_threads); a[k++] = ft; a[k++] = bufs[2]; }
    if (c->n_ctx) { snprintf(bufs[3], 32, "%d", c->n_ctx); a[k++] = fc; a[k++] = bufs[3]; }
    if (c->n_batch) { snprintf(bufs[4], 32, "%d", c->n_batch); a[k++] = fb; a[k++] = bufs[4]; }
    if (c->type_k) { a[k++] = fctk; a[k++] = (char *)pk_cache_type_name(c->type_k); }
    if (c->type_v) { a[k++] = fctv; a[k++] = (char *)pk_cache_type_name(c->type_v); }
    if (b->mem_set) { snprintf(bufs[6], 32, "%llu", (unsigned long long)b->mem); a[k++] = fmem; a[k++] = bufs[6]; }
    if (b->expert_slots) { snprintf(bufs[7], 32, "%d", b->expert_slots); a[k++] = fxs; a[k++] = bufs[7]; }
    a[k] = NULL;
}

/* Interleaved A B A B ... child draws, then each configuration's perplexity. */
static void run_ab(bench *b) {
    char *args[32], bufs[9][32], line[1024], v[64];
    for (int rep = 0; rep < b->reps; rep++)
        for (int k = 0; k < 2; k++) {
            child_args(b, &b->c[k], 0, args, bufs);
            run_child(&b->c[k], args, line, sizeof line);
            cres *r = &b->r[k];
            if (b->n_prompt) push(&r->pp, kv_num(line, "pp_tps"));
            if (b->n_gen) push(&r->tg, kv_num(line, "tg_tps"));
            r->pp_tokens += (uint64_t)kv_num(line, "pp_tokens");
            r->pp_bytes += (uint64_t)kv_num(line, "pp_bytes");
            r->tg_tokens += (uint64_t)kv_num(line, "tg_tokens");
            r->tg_bytes += (uint64_t)kv_num(line, "tg_bytes");
            r->tg_state += (uint64_t)kv_num(line, "tg_state");
            /* the expert cache's and the device's counts (a budget) */
            r->tg_hits += (uint64_t)kv_num(line, "xc_hits");
            r->tg_misses += (uint64_t)kv_num(line, "xc_misses");
            r->tg_storage += (uint64_t)kv_num(line, "xc_storage");
            r->tg_pf += (uint64_t)kv_num(line, "xc_pf");
            r->tg_pf_hits += (uint64_t)kv_num(line, "xc_pf_hits");
            r->tg_wait += kv_num(line, "xc_wait");
            r->tg_secs += kv_num(line, "tg_secs");
            r->dev_ok |= kv_num(line, "dev_ok") != 0;
            r->dev_busy_ms += (uint64_t)kv_num(line, "dev_busy_ms");
            r->dev_read += (uint64_t)kv_num(line, "dev_read");
            r->n_threads = (int)kv_num(line, "threads");
            r->n_ctx = (int)kv_num(line, "n_ctx");
            snprintf(r->isa, sizeof r->isa, "%.15s", kv(line, "isa", v, sizeof v) ? v : "?");
        }
    if (b->ppl_file)
        for (int k = 0; k < 2; k++) {
            child_args(b, &b->c[k], 1, args, bufs);
            run_child(&b->c[k], args, line, sizeof line);
            cres *r = &b->r[k];
            r->ppl.ppl = kv_num(line, "ppl");
            r->ppl.se = kv_num(line, "se");
            r->ppl.n_chunk = (int)kv_num(line, "windows");
            r->ppl.n_ctx = (int)kv_num(line, "window");
            r->ppl.count = (long)kv_num(line, "scored");
            snprintf(r->ppl_isa, sizeof r->ppl_isa, "%.15s", kv(line, "isa", v, sizeof v) ? v : "?");
            r->have_ppl = 1;
        }
}

/* ---- output ------------------------------------------------------------------------------ */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double x) {
    if (isfinite(x)) fprintf(f, "%.17g", x);
    else fputs("null", f);
}

static double bytes_per_tok(uint64_t bytes, uint64_t tokens) {
    return tokens ? (double)bytes / tokens : 0;
}

/* "pp512", "tg64"; after -d tokens "pp512 @ d4096" (llama-bench's names) */
static void test_name(char *out, size_t cap, int gen, int n, int depth) {
    if (depth) snprintf(out, cap, "%s%d @ d%d", gen ? "tg" : "pp", n, depth);
    else snprintf(out, cap, "%s%d", gen ? "tg" : "pp", n);
}

static void json_series(FILE *f, const char *name, const series *s, int n_tokens) {
    stats st = stats_of(s);
    fputs("{\"test\": ", f);
    json_str(f, name);
    fprintf(f, ", \"n_tokens\": %d, \"draws_tok_s\": [", n_tokens);
    for (int i = 0; i < s->n; i++) {
        if (i) fputs(", ", f);
        json_num(f, s->tps[i]);
    }
    fprintf(f, "], \"n\": %d, \"mean\": ", st.n);
    json_num(f, st.mean);
    fputs(", \"sd\": ", f);
    json_num(f, st.sd);
    fputs(", \"min\": ", f);
    json_num(f, st.min);
    fputs(", \"max\": ", f);
    json_num(f, st.max);
    fputs("}", f);
}

static void write_json(const bench *b) {
    FILE *f = fopen(b->json, "w");
    if (!f) die("%s: cannot create: %s", b->json, strerror(errno));
    int nc = b->ab ? 2 : 1;
    fputs("{\n  \"pocket_bench\": 1,\n  \"started\": ", f);
    json_str(f, b->start);
    fputs(",\n  \"machine\": {\"cpu\": ", f);
    json_str(f, b->cpu);
    fprintf(f, ", \"cores\": %ld, \"os\": ", b->cores);
    json_str(f, b->os);
    fputs(", \"loadavg_at_start\": [", f);
    for (int i = 0; i < 3; i++) { if (i) fputs(", ", f); json_num(f, b->load[i] >= 0 ? b->load[i] : NAN); }
    fprintf(f, "], \"llc_bytes\": %llu},\n", (unsigned long long)b->llc_bytes);
    fputs("  \"model\": {\"file\": ", f);
    json_str(f, b->model);
    fputs(", \"arch\": ", f);
    json_str(f, b->mi.arch);
    fputs(", \"name\": ", f);
    json_str(f, b->mi.name);
    fprintf(f, ", \"n_params\": %lld, \"n_params_active\": %lld, \"file_bytes\": %llu, \"tensor_bytes\": %llu, "
               "\"bytes_per_token_info\": %llu, \"type_mix\": %s},\n",
            (long long)b->mi.n_params, (long long)b->mi.n_params_active, (unsigned long long)b->mi.file_bytes,
            (unsigned long long)b->tensor_bytes, (unsigned long long)b->mi.bytes_per_token, b->types_json);
    fprintf(f, "  \"settings\": {\"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, \"repetitions\": %d, "
               "\"token_seed\": %u, \"warmup_runs\": 1, \"ab\": %s, \"ppl_file\": ",
            b->n_prompt, b->n_gen, b->n_depth, b->reps, TOKEN_SEED, b->ab ? "true" : "false");
    if (b->ppl_file) json_str(f, b->ppl_file); else fputs("null", f);
    fputs("},\n  \"configs\": [\n", f);
    for (int k = 0; k < nc; k++) {
        const cfg *c = &b->c[k];
        const cres *r = &b->r[k];
        char tn[32];
        fputs("    {\"label\": ", f);
        json_str(f, c->label);
        fputs(", \"flags\": ", f);
        json_str(f, c->flags);
        fputs(", \"requested_kernels\": ", f);
        if (c->kernels[0]) json_str(f, c->kernels); else fputs("null", f);
        fputs(", \"isa\": ", f);
        json_str(f, r->isa);
        fprintf(f, ", \"n_threads\": %d, \"n_ctx\": %d, \"n_batch\": ", r->n_threads, r->n_ctx);
        if (c->n_batch) fprintf(f, "%d", c->n_batch); else fputs("null", f);  /* null: library default */
        fprintf(f, ", \"cache_type_k\": \"%s\", \"cache_type_v\": \"%s\"", pk_cache_type_name(c->type_k),
                pk_cache_type_name(c->type_v));
        fputs(",\n     \"tests\": [", f);
        int first = 1;
        if (b->n_prompt) {
            test_name(tn, sizeof tn, 0, b->n_prompt, b->n_depth);
            json_series(f, tn, &r->pp, b->n_prompt);
            first = 0;
        }
        if (b->n_gen) {
            if (!first) fputs(",\n               ", f);
            test_name(tn, sizeof tn, 1, b->n_gen, b->n_depth);
            json_series(f, tn, &r->tg, b->n_gen);
        }
        fputs("],\n     \"decode\": {\"bytes_per_token\": ", f);
        json_num(f, r->tg_tokens ? bytes_per_tok(r->tg_bytes, r->tg_tokens) : NAN);
        fputs(", \"state_bytes_per_token\": ", f);
        json_num(f, r->tg_tokens ? bytes_per_tok(r->tg_state, r->tg_tokens) : NAN);
        fputs(", \"bytes_per_token_prompt\": ", f);
        json_num(f, r->pp_tokens ? bytes_per_tok(r->pp_bytes, r->pp_tokens) : NAN);
        fprintf(f, ", \"tokens_counted\": %llu, \"weight_bytes_counted\": %llu, \"bandwidth\": ",
                (unsigned long long)r->tg_tokens, (unsigned long long)r->tg_bytes);
        if (r->have_bw) {
            fputs("{\"best_gb_s\": ", f);
            json_num(f, r->bw.best_gbs);
            fputs(", \"mean_gb_s\": ", f);
            json_num(f, r->bw.mean_gbs);
            fputs(", \"min_gb_s\": ", f);
            json_num(f, r->bw.min_gbs);
            fprintf(f, ", \"threads\": %d, \"passes\": %d, \"array_bytes\": %llu, \"measured_unix\": %ld, "
                       "\"cached\": %s}",
                    r->bw.n_threads, r->bw.passes, (unsigned long long)r->bw.bytes, r->bw.when,
                    r->bw.cached ? "true" : "false");
            double bpt = bytes_per_tok(r->tg_bytes + r->tg_state, r->tg_tokens);
            double ceil = bpt > 0 ? r->bw.best_gbs * 1e9 / bpt : NAN;
            fputs(", \"ceiling_tok_s\": ", f);
            json_num(f, ceil);
            fputs(", \"achieved_fraction\": ", f);
            json_num(f, r->tg.n && ceil > 0 ? stats_of(&r->tg).mean / ceil : NAN);
        } else {
            fputs("null, \"ceiling_tok_s\": null, \"achieved_fraction\": null", f);
        }
        fputs("},\n     \"perplexity\": ", f);
        if (r->have_ppl) {
            fputs("{\"ppl\": ", f);
            json_num(f, r->ppl.ppl);
            fputs(", \"se\": ", f);
            json_num(f, r->ppl.se);
            fprintf(f, ", \"windows\": %d, \"window\": %d, \"scored\": %ld, \"isa\": ", r->ppl.n_chunk,
                    r->ppl.n_ctx, r->ppl.count);
            json_str(f, r->ppl_isa);
            fputs("}", f);
        } else {
            fputs("null", f);
        }
        fputs(",\n     \"profile\": ", f);
        if (b->profile) {
            for (int gen = 0; gen < 2; gen++) {
                char ptn[32];
                test_name(ptn, sizeof ptn, gen, r->prof[gen].tokens, b->n_depth);
                fputs(gen ? ", " : "{", f);
                json_str(f, gen ? "tg" : "pp");
                if (!r->prof[gen].n) {
                    fputs(": null", f);
                    continue;
                }
                fputs(": {\"test\": ", f);
                json_str(f, ptn);
                fprintf(f, ", \"tokens\": %d, \"secs\": ", r->prof[gen].tokens);
                json_num(f, r->prof[gen].secs);
                fputs(", \"phases\": [", f);
                for (int i = 0; i < r->prof[gen].n; i++) {
                    fputs(i ? ", {\"name\": " : "{\"name\": ", f);
                    json_str(f, r->prof[gen].ph[i].name);
                    fprintf(f, ", \"parent\": %d, \"secs\": ", r->prof[gen].ph[i].parent);
                    json_num(f, r->prof[gen].ph[i].secs);
                    fputs(", \"wait_secs\": ", f);
                    json_num(f, r->prof[gen].ph[i].wait);
                    fprintf(f, ", \"weight_bytes\": %llu, \"state_bytes\": %llu}",
                            (unsigned long long)r->prof[gen].ph[i].wbytes,
                            (unsigned long long)r->prof[gen].ph[i].sbytes);
                }
                fputs("]}", f);
            }
            fputs("}", f);
        } else {
            fputs("null", f);
        }
        fprintf(f, "}%s\n", k + 1 < nc ? "," : "");
    }
    fputs("  ],\n  \"differences\": [", f);
    if (b->ab) {
        int first = 1;
        for (int gen = 0; gen < 2; gen++) {
            if (!(gen ? b->n_gen : b->n_prompt)) continue;
            const series *sa = gen ? &b->r[0].tg : &b->r[0].pp, *sb = gen ? &b->r[1].tg : &b->r[1].pp;
            welch w = welch_of(sa, sb);
            char tn[32];
            test_name(tn, sizeof tn, gen, gen ? b->n_gen : b->n_prompt, b->n_depth);
            fputs(first ? "\n    {\"test\": " : ",\n    {\"test\": ", f);
            first = 0;
            json_str(f, tn);
            fputs(", \"b_minus_a_tok_s\": ", f);
            json_num(f, w.diff);
            fputs(", \"ci95\": ", f);
            if (w.ok) {
                fputs("[", f);
                json_num(f, w.lo);
                fputs(", ", f);
                json_num(f, w.hi);
                fputs("], \"welch_df\": ", f);
                json_num(f, w.df);
                fputs(", \"t_quantile\": ", f);
                json_num(f, w.q);
            } else {
                fputs("null, \"welch_df\": null, \"t_quantile\": null", f);
            }
            fputs("}", f);
        }
        fputs("\n  ", f);
    }
    fputs("]\n}\n", f);
    if (ferror(f) | fclose(f)) die("%s: write failed", b->json);
}

static const char *batch_str(const cfg *c) {
    static char buf[2][32];
    static int i;
    i ^= 1;
    if (c->n_batch) snprintf(buf[i], sizeof buf[i], "%d", c->n_batch);
    else snprintf(buf[i], sizeof buf[i], "default");
    return buf[i];
}

/* --profile's tables: per test, each phase's share of the run */
static void print_profile(const bench *b) {
    const cres *r = &b->r[0];
    for (int gen = 0; gen < 2; gen++) {
        const int n = r->prof[gen].n, ntok = r->prof[gen].tokens;
        if (!n) continue;
        const double total = r->prof[gen].secs;
        char tn[32];
        test_name(tn, sizeof tn, gen, ntok, b->n_depth);
        printf("\nprofile of one %s run (%.1f ms per token; %s", tn, 1e3 * total / ntok,
               gen ? "one token per forward pass" : "the prompt in batches");
        if (r->have_bw) printf("; bandwidth probe %.2f GB/s", r->bw.best_gbs);
        printf("):\n");
        printf("| %-32s | %9s | %6s | %9s | %9s | %9s | %7s |\n", "phase", "ms/token", "share", "waiting",
               "weight MB", "state MB", "GB/s");
        printf("| %.32s | %.9s | %.6s | %.9s | %.9s | %.9s | %.7s |\n", "--------------------------------",
               "--------:", "-----:", "--------:", "--------:", "--------:", "------:");
        double top = 0.0;
        /* each top-level phase, then its parts (the parts always follow their phase) */
        for (int i = 0; i < n; i++) {
            if (r->prof[gen].ph[i].parent >= 0) continue;
            for (int j = i; j < n; j++) {
                if (j != i && r->prof[gen].ph[j].parent != i) continue;
                const double s = r->prof[gen].ph[j].secs;
                const double bytes = (double)(r->prof[gen].ph[j].wbytes + r->prof[gen].ph[j].sbytes);
                char name[48];
                snprintf(name, sizeof name, "%s%s", j == i ? "" : "  ", r->prof[gen].ph[j].name);
                printf("| %-32s | %9.3f | %5.1f%% | %9.3f | %9.2f | %9.2f | %7.2f |\n", name, 1e3 * s / ntok,
                       100.0 * s / total, 1e3 * r->prof[gen].ph[j].wait / ntok,
                       r->prof[gen].ph[j].wbytes / 1e6 / ntok, r->prof[gen].ph[j].sbytes / 1e6 / ntok,
                       s > 0 ? bytes / s / 1e9 : 0.0);
                if (j == i) top += s;
            }
        }
        printf("| %-32s | %9.3f | %5.1f%% | %9s | %9s | %9s | %7s |\n", "outside the phases", 1e3 * (total - top) / ntok,
               100.0 * (total - top) / total, "", "", "", "");
    }
}

static void print_report(const bench *b) {
    int nc = b->ab ? 2 : 1;
    char size[32], fname[256], tn[32];
    human_bytes((double)b->tensor_bytes, size, sizeof size);
    const char *slash = strrchr(b->model, '/');
    snprintf(fname, sizeof fname, "%s", slash ? slash + 1 : b->model);
    printf("machine: %s, %ld cores, %s, load average %.2f %.2f %.2f at start\n", b->cpu, b->cores, b->os,
           b->load[0], b->load[1], b->load[2]);
    printf("model:   %s (%s), types %s\n", b->model, b->mi.arch, b->types);
    printf("tests:   -p %d -n %d -r %d", b->n_prompt, b->n_gen, b->reps);
    if (b->n_depth) printf(" -d %d (each test after %d other tokens)", b->n_depth, b->n_depth);
    printf(", random tokens (seed %u), 1 untimed warm-up per test%s\n", TOKEN_SEED,
           b->ab ? ", child process per draw, A B interleaved" : "");
    for (int k = 0; k < nc; k++)
        if (b->ab)
            printf("config %s: \"%s\" -> kernels %s, %d thread%s, n_ctx %d, n_batch %s, kv cache %s/%s\n",
                   b->c[k].label, b->c[k].flags, b->r[k].isa, b->r[k].n_threads, b->r[k].n_threads == 1 ? "" : "s",
                   b->r[k].n_ctx, batch_str(&b->c[k]), pk_cache_type_name(b->c[k].type_k),
                   pk_cache_type_name(b->c[k].type_v));
        else
            printf("config:  kernels %s, %d thread%s, n_ctx %d, n_batch %s, kv cache %s/%s\n", b->r[k].isa,
                   b->r[k].n_threads, b->r[k].n_threads == 1 ? "" : "s", b->r[k].n_ctx, batch_str(&b->c[k]),
                   pk_cache_type_name(b->c[k].type_k), pk_cache_type_name(b->c[k].type_v));
    printf("\n| %-20s | %10s | %8s |%s %-6s | %7s | %-6s | %18s |\n", "model", "size", "params",
           b->ab ? " cfg |" : "", "isa", "threads", "test", "t/s");
    printf("| %.20s | %.10s | %.8s |%s %.6s | %.7s | %.6s | %.18s |\n", "--------------------", "---------:",
           "-------:", b->ab ? " --- |" : "", "------", "------:", "------", "-----------------:");
    for (int gen = 0; gen < 2; gen++) {
        int n = gen ? b->n_gen : b->n_prompt;
        if (!n) continue;
        test_name(tn, sizeof tn, gen, n, b->n_depth);
        for (int k = 0; k < nc; k++) {
            stats st = stats_of(gen ? &b->r[k].tg : &b->r[k].pp);
            char ts[64], params[32];
            snprintf(ts, sizeof ts, "%.2f ± %.2f", st.mean, st.sd);
            snprintf(params, sizeof params, "%.2f M", b->mi.n_params / 1e6);
            printf("| %-20.20s | %10s | %8s |", fname, size, params);
            if (b->ab) printf(" %-3s |", b->c[k].label);
            printf(" %-6s | %7d | %-6s | %19s |\n", b->r[k].isa, b->r[k].n_threads, tn, ts);
        }
    }
    printf("\ndraws (tok/s, in run order):\n");
    for (int gen = 0; gen < 2; gen++) {
        int n = gen ? b->n_gen : b->n_prompt;
        if (!n) continue;
        test_name(tn, sizeof tn, gen, n, b->n_depth);
        for (int k = 0; k < nc; k++) {
            const series *s = gen ? &b->r[k].tg : &b->r[k].pp;
            stats st = stats_of(s);
            printf("  %s%s%-7s", b->ab ? b->c[k].label : "", b->ab ? " " : "", tn);
            for (int i = 0; i < s->n; i++) printf(" %.2f", s->tps[i]);
            printf("   n=%d mean=%.2f sd=%.2f min=%.2f max=%.2f\n", st.n, st.mean, st.sd, st.min, st.max);
        }
    }
    char h1[32], h2[32];
    for (int k = 0; k < nc; k++) {
        const cres *r = &b->r[k];
        const char *pre = b->ab ? (k ? "B " : "A ") : "";
        printf("\n");
        if (r->tg_tokens) {
            double bpt = bytes_per_tok(r->tg_bytes, r->tg_tokens);
            human_bytes(bpt, h1, sizeof h1);
            human_bytes((double)b->mi.bytes_per_token, h2, sizeof h2);
            printf("%sbytes/token: %.0f (%s) of weights read per generated token, counted by the engine over "
                   "%llu tokens (pocket info: %s)\n", pre, bpt, h1, (unsigned long long)r->tg_tokens, h2);
            human_bytes(bytes_per_tok(r->tg_state, r->tg_tokens), h1, sizeof h1);
            printf("%s  state: %.0f (%s) of KV cache and recurrent state read + written per generated token\n",
                   pre, bytes_per_tok(r->tg_state, r->tg_tokens), h1);
            if (r->tg_hits + r->tg_misses && r->have_bw) {
                /* the ceiling of a budgeted run: RAM for what is resident,
                   the device (probed at the cache's read size and depth) for
                   what is read per token */
                st_result so;
                char why[256];
                const pk_model_plan pl = b->plan;
                size_t blk = (size_t)(pl.expert_slice_bytes / 3);
                if (st_get(b->model, blk, pl.io_depth, b->bw_refresh, &so, why, sizeof why) == 0) {
                    double ram = bytes_per_tok(r->tg_bytes + r->tg_state, r->tg_tokens) - bytes_per_tok(r->tg_storage, r->tg_tokens);
                    double sto = bytes_per_tok(r->tg_storage, r->tg_tokens);
                    double t_ram = ram / (r->bw.best_gbs * 1e9), t_sto = sto / (so.rnd_gbs * 1e9);
                    double ceil = 1.0 / (t_ram + t_sto), got = r->tg.n ? stats_of(&r->tg).mean : 0;
                    printf("%s  storage: %.2f GB/s in random reads of %zu KiB, %d in flight (4 MiB: %.2f, sequential: "
                           "%.2f; %s; %s)\n", pre, so.rnd_gbs, so.block >> 10, so.depth, so.rnd4m_gbs, so.seq_gbs,
                           so.direct ? "O_DIRECT" : "buffered", so.cached ? "cached; --bw-refresh re-measures" : "measured now");
                    double over = 1.0 / (t_ram > t_sto ? t_ram : t_sto);
                    printf("%s  budget ceiling: %.2f tok/s = 1 / (%.1f MB / %.2f GB/s RAM + %.1f MB / %.2f GB/s storage) "
                           "= 1 / (%.1f + %.1f ms); tg%d reached %.2f tok/s = %.1f%% of it; with reads fully "
                           "overlapping the RAM-bound compute, 1 / max(...) = %.2f tok/s: %.1f%%\n", pre, ceil, ram / 1e6,
                           r->bw.best_gbs, sto / 1e6, so.rnd_gbs, 1e3 * t_ram, 1e3 * t_sto, b->n_gen, got,
                           100 * got / ceil, over, 100 * got / over);
                } else {
                    printf("%s  storage: no figure (%s)\n", pre, why);
                }
            }
            if (r->tg_hits + r->tg_misses) {
                const pk_model_plan pl = b->plan;
                double look = (double)(r->tg_hits + r->tg_misses), sps = bytes_per_tok(r->tg_storage, r->tg_tokens);
                printf("%s  experts: cache of %d of %d per layer (--mem); hit rate %.1f%%; %.1f MB per token read "
                       "from storage at %.2f GB/s, %.1f ms per token waiting for it\n", pre, pl.expert_slots,
                       pl.n_expert, 100.0 * (double)r->tg_hits / look, sps / 1e6,
                       r->tg_wait > 0 ? (double)r->tg_storage / r->tg_wait / 1e9 : 0.0,
                       1e3 * r->tg_wait / (double)r->tg_tokens);
                if (r->dev_ok && r->tg_secs > 0)
                    printf("%s  device: busy (a read in flight) %.1f%% of the tg draws' time, %.1f MB per token "
                           "read from it, %.2f GB/s while busy (kernel counters; other processes' reads "
                           "included)\n", pre, 100.0 * (double)r->dev_busy_ms / 1e3 / r->tg_secs,
                           bytes_per_tok(r->dev_read, r->tg_tokens) / 1e6,
                           r->dev_busy_ms ? (double)r->dev_read / ((double)r->dev_busy_ms / 1e3) / 1e9 : 0.0);
                if (r->tg_pf)
                    printf("%s  prefetch: %.1f experts per token read ahead for the next layer, %.1f%% of them "
                           "used by it\n", pre, (double)r->tg_pf / (double)r->tg_tokens,
                           100.0 * (double)r->tg_pf_hits / (double)r->tg_pf);
            }
            if (r->pp_tokens) {
                human_bytes(bytes_per_tok(r->pp_bytes, r->pp_tokens), h1, sizeof h1);
                printf("%s  prompt: %s of weights read per token (batched reads, logits after the last only)\n",
                       pre, h1);
            }
        }
        if (r->have_bw) {
            printf("%sbandwidth: %.2f GB/s best, %.2f mean, %.2f worst of %d read passes over %zu MiB, %d "
                   "thread%s (%s)\n", pre, r->bw.best_gbs, r->bw.mean_gbs, r->bw.min_gbs, r->bw.passes,
                   r->bw.bytes >> 20, r->bw.n_threads, r->bw.n_threads == 1 ? "" : "s",
                   r->bw.cached ? "cached; --bw-refresh re-measures" : "measured now");
            if (r->tg_tokens && r->tg.n) {
                double bpt = bytes_per_tok(r->tg_bytes + r->tg_state, r->tg_tokens);
                double ceil = r->bw.best_gbs * 1e9 / bpt, got = stats_of(&r->tg).mean;
                printf("%sceiling: %.1f tok/s = %.2f GB/s / %.2f MB per token (weights + state); tg%d reached "
                       "%.2f tok/s = %.1f%% of it\n", pre, ceil, r->bw.best_gbs, bpt / 1e6, b->n_gen, got,
                       100 * got / ceil);
                if (b->llc_bytes && b->tensor_bytes <= b->llc_bytes) {
                    human_bytes((double)b->llc_bytes, h1, sizeof h1);
                    printf("%snote: all weights (%s) fit in the %s last-level cache, so decode need not be "
                           "bound by memory bandwidth and can pass this ceiling\n", pre, size, h1);
                }
            }
        }
        if (r->have_ppl)
            printf("%squality: PPL = %.4f +/- %.5f on the first %d window%s of %d tokens of %s (%ld scored, "
                   "kernels %s)\n", pre, r->ppl.ppl, r->ppl.se, r->ppl.n_chunk, r->ppl.n_chunk == 1 ? "" : "s",
                   r->ppl.n_ctx, b->ppl_file, r->ppl.count, r->ppl_isa);
    }
    if (b->ab) {
        printf("\n");
        for (int gen = 0; gen < 2; gen++) {
            int n = gen ? b->n_gen : b->n_prompt;
            if (!n) continue;
            const series *sa = gen ? &b->r[0].tg : &b->r[0].pp, *sb = gen ? &b->r[1].tg : &b->r[1].pp;
            welch w = welch_of(sa, sb);
            double ma = stats_of(sa).mean;
            test_name(tn, sizeof tn, gen, n, b->n_depth);
            printf("difference B - A, %s: %+.2f tok/s (%+.1f%%)", tn, w.diff, ma > 0 ? 100 * w.diff / ma : 0);
            if (w.ok)
                printf(", 95%% interval [%+.2f, %+.2f] (Welch t, df %.1f, t %.3f)%s\n", w.lo, w.hi, w.df, w.q,
                       w.lo > 0 || w.hi < 0 ? "" : " - not distinguishable from zero");
            else
                printf(", no interval (needs -r 2 or more)\n");
        }
    }
    if (b->load[0] >= 0 && b->load[0] > 0.5)
        printf("\nwarning: load average was %.2f at start; other work on the machine skews the draws\n",
               b->load[0]);
}

/* ---- pocket bench ------------------------------------------------------------------------ */

int cmd_bench(int argc, char **argv) {
    bench *b = calloc(1, sizeof *b);
    if (!b) die("out of memory");
    b->n_prompt = 512;
    b->n_gen = 64;
    b->reps = 5;
    int single = 0;
    const char *ab_a = NULL, *ab_b = NULL, *single_ppl = NULL;
    opts o;
    opts_init(&o);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
#define VAL() (i + 1 < argc ? argv[++i] : (die("bench: %s needs a value", a), (char *)0))
        if (is_help(a)) { fputs(bench_help, stdout); free(b); return 0; }
        else if (!strcmp(a, "-p") || !strcmp(a, "--n-prompt")) b->n_prompt = (int)parse_long(a, VAL(), 0, 1 << 20);
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-gen")) b->n_gen = (int)parse_long(a, VAL(), 0, 1 << 20);
        else if (!strcmp(a, "-d") || !strcmp(a, "--n-depth")) b->n_depth = (int)parse_long(a, VAL(), 0, 1 << 20);
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) b->reps = (int)parse_long(a, VAL(), 1, MAX_DRAWS);
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) b->base.n_batch = (int)parse_long(a, VAL(), 1, 1 << 20);
        else if (!strcmp(a, "--json")) b->json = VAL();
        else if (!strcmp(a, "--ppl-file")) b->ppl_file = VAL();
        else if (!strcmp(a, "--no-bw")) b->no_bw = 1;
        else if (!strcmp(a, "--bw-refresh")) b->bw_refresh = 1;
        else if (!strcmp(a, "--profile")) b->profile = 1;
        else if (!strcmp(a, "--single")) single = 1;            /* internal: one child draw */
        else if (!strcmp(a, "--single-ppl")) single_ppl = VAL(); /* internal: child perplexity */
        else if (!strcmp(a, "--ab")) {
            if (i + 2 >= argc) die("bench: --ab needs two configurations, e.g. --ab \"-t 1\" \"-t 2\"");
            ab_a = argv[++i];
            ab_b = argv[++i];
            b->ab = 1;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "-t") || !strcmp(a, "--threads") ||
                   !strcmp(a, "-c") || !strcmp(a, "--ctx-size") || !strcmp(a, "--mem") ||
                   !strcmp(a, "--expert-slots") || !strcmp(a, "-ctk") ||
                   !strcmp(a, "--cache-type-k") || !strcmp(a, "-ctv") || !strcmp(a, "--cache-type-v")) {
            parse_common(&o, argc, argv, &i);
        } else {
            die("bench: unknown option '%s' (see pocket bench --help)", a);
        }
#undef VAL
    }
    if (!b->n_prompt && !b->n_gen) die("bench: -p 0 and -n 0 leave nothing to measure");
    b->model = o.model ? o.model : default_model();
    b->base.n_threads = o.n_threads;
    b->base.n_ctx = o.n_ctx;
    b->base.type_k = o.type_k;
    b->base.type_v = o.type_v;
    b->mem_set = o.mem_set;
    b->mem = o.mem;
    b->expert_slots = o.expert_slots;
    if (b->base.n_ctx && (b->base.n_ctx < b->n_depth + b->n_prompt || b->base.n_ctx < b->n_depth + b->n_gen))
        die("bench: -c %d is smaller than the test (-d %d, -p %d, -n %d)", b->base.n_ctx, b->n_depth, b->n_prompt,
            b->n_gen);
    if (b->ab) {
        if (single || single_ppl) die("bench: --ab cannot run inside a child draw");
        if (b->profile) die("bench: --profile times one configuration; it does not combine with --ab");
        parse_ab_flags("A", ab_a, &b->base, &b->c[0]);
        parse_ab_flags("B", ab_b, &b->base, &b->c[1]);
        for (int k = 0; k < 2; k++)
            if (b->c[k].n_ctx && (b->c[k].n_ctx < b->n_depth + b->n_prompt || b->c[k].n_ctx < b->n_depth + b->n_gen))
                die("bench: configuration %s: -c %d is smaller than the test (-d %d, -p %d, -n %d)", b->c[k].label,
                    b->c[k].n_ctx, b->n_depth, b->n_prompt, b->n_gen);
    } else {
        b->c[0] = b->base;
    }
    describe_machine(b);  /* load average before our own work */

    pk_model *m = load_model(b->model, &o, NULL);
    if (single_ppl) {  /* child: perplexity only */
        b->ppl_file = single_ppl;
        cres *r = &b->r[0];
        run_ppl_local(b, m, &b->c[0], r);
        printf("POCKET_BENCH ppl=%.9g se=%.9g windows=%d window=%d scored=%ld isa=%s\n", r->ppl.ppl, r->ppl.se,
               r->ppl.n_chunk, r->ppl.n_ctx, r->ppl.count, r->ppl_isa);
        pk_model_free(m);
        free(b);
        return 0;
    }
    if (single) {  /* child: warm-up and one draw of each test */
        cres *r = &b->r[0];
        pk_model_get_plan(m, &b->plan);
        run_local(b, m, &b->c[0], 1, r);
        printf("POCKET_BENCH pp_tps=%.9g tg_tps=%.9g pp_tokens=%llu pp_bytes=%llu tg_tokens=%llu "
               "tg_bytes=%llu tg_state=%llu isa=%s threads=%d n_ctx=%d xc_hits=%llu xc_misses=%llu "
               "xc_storage=%llu xc_pf=%llu xc_pf_hits=%llu xc_wait=%.9g tg_secs=%.9g dev_ok=%d "
               "dev_busy_ms=%llu dev_read=%llu\n",
               r->pp.n ? r->pp.tps[0] : 0, r->tg.n ? r->tg.tps[0] : 0, (unsigned long long)r->pp_tokens,
               (unsigned long long)r->pp_bytes, (unsigned long long)r->tg_tokens, (unsigned long long)r->tg_bytes,
               (unsigned long long)r->tg_state, r->isa, r->n_threads, r->n_ctx, (unsigned long long)r->tg_hits,
               (unsigned long long)r->tg_misses, (unsigned long long)r->tg_storage, (unsigned long long)r->tg_pf,
               (unsigned long long)r->tg_pf_hits, r->tg_wait, r->tg_secs, r->dev_ok,
               (unsigned long long)r->dev_busy_ms, (unsigned long long)r->dev_read);
        pk_model_free(m);
        free(b);
        return 0;
    }
    describe_model(b, m);
    if (b->ab) {
        run_ab(b);
    } else {
        run_local(b, m, &b->c[0], b->reps, &b->r[0]);
        if (b->ppl_file) run_ppl_local(b, m, &b->c[0], &b->r[0]);
    }
    /* bandwidth after the draws, so the probe does not disturb them; under
       a memory budget the model goes first: its expert cache and the
       probe's 1 GiB buffer together would pass the budget (--mem bounds
       the process's resident memory, the probe included) */
    if (b->plan.cache_bytes) {
        pk_model_free(m);
        m = NULL;
    }
    if (!b->no_bw) {
        char why[256];
        for (int k = 0; k < (b->ab ? 2 : 1); k++) {
            cres *r = &b->r[k];
            if (k == 1 && r->n_threads == b->r[0].n_threads && b->r[0].have_bw) {
                r->bw = b->r[0].bw;
                r->have_bw = 1;
                continue;
            }
            if (bw_get(b->cpu, r->n_threads, b->bw_refresh, &r->bw, why, sizeof why))
                fprintf(stderr, "pocket: warning: %s; no bandwidth ceiling\n", why);
            else
                r->have_bw = 1;
        }
    }
    print_report(b);
    if (b->profile) print_profile(b);
    if (b->json) write_json(b);
    pk_model_free(m);
    free(b);
    return 0;
}
