/* bandwidth.c - STREAM-style memory read probe with a per-machine cache
 * (see bandwidth.h). The array is summed as 64-bit integers with several
 * independent vector accumulators so that loads, not additions, are the
 * limit; on x86-64 an AVX2 copy of the loop is used when the CPU has it. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bandwidth.h"
#include "pocket.h"

/* ---- CPU model -------------------------------------------------------------------- */

void bw_cpu_model(char *buf, size_t cap) { pk_cpu_name(buf, cap); }

/* ---- the read probe ----------------------------------------------------------------- */

typedef uint64_t v4u64 __attribute__((vector_size(32)));

/* Sum of n 32-byte vectors, four accumulators. */
static uint64_t sum_plain(const v4u64 *p, size_t n) {
    v4u64 a = {0}, b = {0}, c = {0}, d = {0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; i++) a += p[i];
    a += b + c + d;
    return a[0] + a[1] + a[2] + a[3];
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) static uint64_t sum_avx2(const v4u64 *p, size_t n) {
    v4u64 a = {0}, b = {0}, c = {0}, d = {0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; i++) a += p[i];
    a += b + c + d;
    return a[0] + a[1] + a[2] + a[3];
}
#endif

typedef struct probe {
    v4u64 *buf;
    size_t n_vec;                  /* vectors in buf */
    int n_threads, passes;
    pthread_barrier_t bar;         /* between passes */
    pthread_mutex_t mu;            /* start gate: workers begin when every */
    pthread_cond_t cv;             /* thread exists (gate 1) or leave (-1) */
    int gate;
    uint64_t (*sum)(const v4u64 *, size_t);
    double *secs;                  /* per pass, written by worker 0 */
} probe;

typedef struct worker {
    probe *p;
    int id;
    uint64_t sink;                 /* the worker's sums, kept so they are computed */
} worker;

static volatile uint64_t bw_sink;  /* where the probe's sums go */

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *work(void *arg) {
    worker *w = arg;
    probe *p = w->p;
    pthread_mutex_lock(&p->mu);
    while (!p->gate) pthread_cond_wait(&p->cv, &p->mu);
    int go = p->gate > 0;
    pthread_mutex_unlock(&p->mu);
    if (!go) return NULL;
    size_t lo = p->n_vec * (size_t)w->id / p->n_threads;
    size_t hi = p->n_vec * (size_t)(w->id + 1) / p->n_threads;
    /* first touch: each worker's pages, non-zero so no shared zero page */
    uint64_t *u = (uint64_t *)(p->buf + lo);
    for (size_t i = 0; i < (hi - lo) * 4; i++) u[i] = i * 0x9E3779B97F4A7C15ull;
    uint64_t s = 0;
    for (int pass = 0; pass <= p->passes; pass++) {  /* pass 0 is untimed */
        pthread_barrier_wait(&p->bar);
        double t0 = mono();
        s += p->sum(p->buf + lo, hi - lo);
        pthread_barrier_wait(&p->bar);
        if (w->id == 0 && pass > 0) p->secs[pass - 1] = mono() - t0;
    }
    w->sink = s;
    return NULL;
}

int bw_measure(size_t bytes, int n_threads, int passes, bw_result *out, char *why, size_t cap) {
    if (n_threads < 1) n_threads = 1;
    if (passes < 1) passes = 1;
    bytes &= ~(size_t)4095;
    if (bytes < ((size_t)1 << 20)) bytes = (size_t)1 << 20;
    probe p = {0};
    p.n_vec = bytes / sizeof(v4u64);
    p.n_threads = n_threads;
    p.passes = passes;
    p.sum = sum_plain;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) p.sum = sum_avx2;
#endif
    p.secs = calloc((size_t)passes, sizeof *p.secs);
    worker *ws = calloc((size_t)n_threads, sizeof *ws);
    pthread_t *th = calloc((size_t)n_threads, sizeof *th);
    if (posix_memalign((void **)&p.buf, 4096, bytes)) p.buf = NULL;
    if (!p.secs || !ws || !th || !p.buf) {
        snprintf(why, cap, "bandwidth probe: out of memory for %zu MiB", bytes >> 20);
        free(p.secs), free(ws), free(th), free(p.buf);
        return -1;
    }
    pthread_barrier_init(&p.bar, NULL, (unsigned)n_threads);
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    int started = 1, rc = 0;
    for (int i = 0; i < n_threads; i++) ws[i] = (worker){&p, i, 0};
    for (; started < n_threads; started++) {
        int e = pthread_create(&th[started], NULL, work, &ws[started]);
        if (e) {
            snprintf(why, cap, "bandwidth probe: cannot start thread %d of %d: %s", started + 1,
                     n_threads, strerror(e));
            rc = -1;
            break;
        }
    }
    pthread_mutex_lock(&p.mu);
    p.gate = rc ? -1 : 1;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    if (rc) {
        for (int i = 1; i < started; i++) pthread_join(th[i], NULL);
    } else {
        work(&ws[0]);
        for (int i = 1; i < n_threads; i++) pthread_join(th[i], NULL);
    }
    pthread_barrier_destroy(&p.bar);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    if (rc) {
        free(p.secs), free(ws), free(th), free(p.buf);
        return -1;
    }
    double best = 0, sum = 0, worst = 0;
    for (int i = 0; i < passes; i++) {
        double g = bytes / p.secs[i] / 1e9;
        if (g > best) best = g;
        if (i == 0 || g < worst) worst = g;
        sum += g;
    }
    *out = (bw_result){.best_gbs = best, .mean_gbs = sum / passes, .min_gbs = worst, .n_threads = n_threads,
                        .passes = passes, .bytes = bytes, .when = (long)time(NULL), .cached = 0};
    uint64_t keep = 0;  /* the sums must not be optimised away */
    for (int i = 0; i < n_threads; i++) keep += ws[i].sink;
    bw_sink = keep;
    free(p.secs), free(ws), free(th), free(p.buf);
    return 0;
}

/* ---- the cache ---------------------------------------------------------------------- */
/* One line per (threads, cpu):
 *   v1 <TAB> threads <TAB> best_gbs <TAB> mean_gbs <TAB> min_gbs <TAB> bytes <TAB> passes <TAB> unix_time <TAB> cpu */

static int cache_path(char *buf, size_t cap, int mkdirs) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[4096];
    if (xdg && *xdg) snprintf(dir, sizeof dir, "%s", xdg);
    else if (home && *home) snprintf(dir, sizeof dir, "%s/.cache", home);
    else return -1;
    if (mkdirs) mkdir(dir, 0755);
    size_t n = strlen(dir);
    snprintf(dir + n, sizeof dir - n, "/pocket");
    if (mkdirs) mkdir(dir, 0755);
    return snprintf(buf, cap, "%s/bandwidth", dir) < (int)cap ? 0 : -1;
}

static int parse_line(const char *line, bw_result *r, char *cpu, size_t cap) {
    int off = 0;
    unsigned long long bytes;
    if (sscanf(line, "v1\t%d\t%lf\t%lf\t%lf\t%llu\t%d\t%ld\t%n", &r->n_threads, &r->best_gbs,
               &r->mean_gbs, &r->min_gbs, &bytes, &r->passes, &r->when, &off) != 7 || !off)
        return -1;
    r->bytes = (size_t)bytes;
    snprintf(cpu, cap, "%.*s", (int)strcspn(line + off, "\r\n"), line + off);
    return r->best_gbs > 0 ? 0 : -1;
}

#if defined(__SANITIZE_ADDRESS__)
#define BW_NO_CACHE 1  /* instrumented loads: the figure would mislead later runs */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BW_NO_CACHE 1
#endif
#endif
#ifndef BW_NO_CACHE
#define BW_NO_CACHE 0
#endif

int bw_get(const char *cpu, int n_threads, int refresh, bw_result *out, char *why, size_t cap) {
    char path[4200], line[1024], lcpu[512];
    int have_path = !BW_NO_CACHE && cache_path(path, sizeof path, 0) == 0;
    if (have_path && !refresh) {
        FILE *f = fopen(path, "r");
        bw_result r;
        while (f && fgets(line, sizeof line, f))
            if (!parse_line(line, &r, lcpu, sizeof lcpu) && r.n_threads == n_threads && !strcmp(lcpu, cpu)) {
                *out = r;
                out->cached = 1;
                fclose(f);
                return 0;
            }
        if (f) fclose(f);
    }
    if (bw_measure((size_t)1 << 30, n_threads, 5, out, why, cap)) return -1;
    if (!have_path || cache_path(path, sizeof path, 1)) return 0;
    /* rewrite the cache without the old entry for this key, then append */
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *in = fopen(path, "r"), *o = fopen(tmp, "w");
    if (!o) {
        if (in) fclose(in);
        return 0;
    }
    bw_result r;
    while (in && fgets(line, sizeof line, in))
        if (!parse_line(line, &r, lcpu, sizeof lcpu) && !(r.n_threads == n_threads && !strcmp(lcpu, cpu)))
            fputs(line, o);
    if (in) fclose(in);
    fprintf(o, "v1\t%d\t%.4f\t%.4f\t%.4f\t%llu\t%d\t%ld\t%s\n", out->n_threads, out->best_gbs,
            out->mean_gbs, out->min_gbs, (unsigned long long)out->bytes, out->passes, out->when, cpu);
    if (fclose(o) || rename(tmp, path)) remove(tmp);
    return 0;
}
