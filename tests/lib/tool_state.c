/* tool_state - the sequence-state calls (pk_context_truncate, checkpoints,
 * pk_state_save / load) checked against fresh contexts: tests/cli/t_state.sh.
 *
 *   tool_state [options] MODEL.gguf DIR
 *       random sequences of: decode a batch of random tokens and length,
 *       checkpoint, truncate to a random length, save / load through
 *       memory, through a file (DIR/state.bin), load into a second context
 *       (which then carries on), and a decode that overflows the context.
 *       After every decode the logits must be bitwise those of a fresh
 *       context fed the same batches (the batches that built each position
 *       held, the last one cut where a truncation cut it); after every step
 *       the tokens (pk_context_tokens), the length and the checkpoints
 *       (pk_context_checkpoints) must be what the calls made, a truncation
 *       must return what pk_context_reachable said it would (models without
 *       recurrent layers: n itself; with: the latest checkpoint <= n, or 0),
 *       and a loaded state must save again as the same bytes. Models with
 *       recurrent layers: a third of the decodes plan checkpoints inside
 *       their batches (pk_context_plan_checkpoints), which must equal
 *       batches cut there, each followed by a checkpoint.
 *   tool_state -refuse [options] MODEL.gguf DIR OTHER.gguf...
 *       the refusals: a state of MODEL loaded into a context of each OTHER
 *       model (PK_ERR_ARG, the message saying "model"), into one of other
 *       cache types (ARG, "cache"), into one too short for it (ARG); cut at a
 *       sample of lengths and with a byte flipped (PK_ERR_FORMAT); files
 *       that are not states (FORMAT; a missing one: PK_ERR_IO); a save into
 *       a buffer too small. After each refused load the context must hold
 *       what it held (tokens; the next logits, bitwise). pk_state_tokens and
 *       pk_state_file_tokens are called on every input: the tokens, or an
 *       error, never a crash.
 *
 * Options: -t THREADS (1), -b N_BATCH (16), -c N_CTX (64), -k CHECKPOINTS
 * (3), -ctk / -ctv TYPE (f16), -seed S (1), -runs R (4), -steps N (40),
 * -aligned (truncate only where a batch ended: for weights whose prompt
 * kernels make a row depend on its batch, e.g. MXFP4 experts).
 * Run r uses seed S + r; a failure prints the seed, the steps that led to
 * it and what differs: `tool_state -seed SEED -runs 1 ...` replays it. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "pocket.h"

static struct {
    int threads, n_batch, n_ctx, n_ckpt, tk, tv, runs, steps, aligned;
    uint64_t seed;
} opt = {.threads = 1, .n_batch = 16, .n_ctx = 64, .n_ckpt = 3, .seed = 1, .runs = 4, .steps = 40};

static const char *model_path, *dir;
static pk_model *model;
static int n_vocab, recurrent, refuse_mode;

/* ---- random numbers (splitmix64) ------------------------------------------ */
static uint64_t rng;
static uint64_t rnd(void) {
    uint64_t z = (rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}
static int rnd_int(int lo, int hi) { /* lo..hi inclusive */
    return hi <= lo ? lo : lo + (int)(rnd() % (uint64_t)(hi - lo + 1));
}

/* ---- the trace of a run, printed with a failure ---------------------------- */
static char trace[1 << 16];
static size_t trace_len;
static uint64_t run_seed;
static int step;

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...) {
    if (trace_len >= sizeof trace - 256) trace_len = 0; /* keep the tail */
    va_list ap;
    va_start(ap, fmt);
    trace_len += (size_t)snprintf(trace + trace_len, 64, "  %3d ", step);
    trace_len += (size_t)vsnprintf(trace + trace_len, sizeof trace - trace_len - 2, fmt, ap);
    if (trace_len > sizeof trace - 2) trace_len = sizeof trace - 2;
    trace[trace_len++] = '\n';
    trace[trace_len] = 0;
    va_end(ap);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL %s (kv %s/%s, n_ctx %d, n_batch %d, %d checkpoints, %d threads) seed %llu step %d: ",
           model_path, pk_cache_type_name(opt.tk), pk_cache_type_name(opt.tv), opt.n_ctx, opt.n_batch,
           opt.n_ckpt, opt.threads, (unsigned long long)run_seed, step);
    vprintf(fmt, ap);
    va_end(ap);
    if (trace_len) printf("\nsteps so far (step: call):\n%s", trace);
    printf("\nreplay: tool_state %s-seed %llu -runs 1 (and the options above) %s %s\n", refuse_mode ? "-refuse " : "",
           (unsigned long long)run_seed, model_path, dir);
    exit(1);
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { printf("FAIL out of memory (%zu bytes)\n", n); exit(1); }
    return p;
}

/* ---- what a context should hold: its tokens, the batches that wrote them
 * (end positions) and the checkpoint positions ------------------------------- */
typedef struct seq {
    int32_t *tok;   /* [n_ctx] */
    int *end;       /* [n_ctx] end position of each batch, ascending */
    int n_b, len;
    int *ck, n_ck;  /* checkpoint positions, ascending */
} seq;

static void seq_init(seq *s) {
    s->tok = xmalloc(sizeof(int32_t) * (size_t)opt.n_ctx);
    s->end = xmalloc(sizeof(int) * (size_t)opt.n_ctx);
    s->ck = xmalloc(sizeof(int) * (size_t)(opt.n_ckpt + 1));
    s->n_b = s->len = s->n_ck = 0;
}
static void seq_free(seq *s) { free(s->tok); free(s->end); free(s->ck); }
static void seq_copy(seq *d, const seq *s) {
    memcpy(d->tok, s->tok, sizeof(int32_t) * (size_t)s->len);
    memcpy(d->end, s->end, sizeof(int) * (size_t)s->n_b);
    memcpy(d->ck, s->ck, sizeof(int) * (size_t)s->n_ck);
    d->n_b = s->n_b; d->len = s->len; d->n_ck = s->n_ck;
}
/* what pk_context_reachable(n) must say */
static int seq_reach(const seq *s, int n) {
    if (n >= s->len) return s->len;
    if (!recurrent) return n;
    int r = 0;
    for (int i = 0; i < s->n_ck; i++) if (s->ck[i] <= n) r = s->ck[i];
    return r;
}
static void seq_cut(seq *s, int n) {
    s->len = n;
    while (s->n_b > 0 && s->end[s->n_b - 1] >= n) s->n_b--;
    if (n > (s->n_b ? s->end[s->n_b - 1] : 0)) s->end[s->n_b++] = n;
    int k = 0;
    for (int i = 0; i < s->n_ck; i++) if (s->ck[i] <= n) s->ck[k++] = s->ck[i];
    s->n_ck = k;
}
static void seq_checkpoint(seq *s) {
    if (!recurrent || opt.n_ckpt == 0) return;
    for (int i = 0; i < s->n_ck; i++) if (s->ck[i] == s->len) return;
    if (s->n_ck == opt.n_ckpt) memmove(s->ck, s->ck + 1, sizeof(int) * (size_t)--s->n_ck);
    s->ck[s->n_ck++] = s->len;
}

/* ---- contexts ----------------------------------------------------------------- */
static pk_context *new_ctx(const pk_model *m, int n_ctx, int tk, int tv) {
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = opt.threads;
    cp.n_batch = opt.n_batch;
    cp.type_k = tk;
    cp.type_v = tv;
    cp.n_checkpoints = opt.n_ckpt;
    pk_context *c;
    pk_error err = {0};
    if (pk_context_new(m, &cp, &c, &err)) fail("pk_context_new: %s", err.msg);
    return c;
}

static void decode(pk_context *c, const int32_t *t, int n, const char *who) {
    pk_error err = {0};
    int rc = pk_decode(c, t, n, &err);
    if (rc) fail("%s: pk_decode of %d tokens at %d: %s (%d)", who, n, pk_context_pos(c), err.msg, rc);
}

/* The context must hold s: its length, tokens and checkpoints. */
static void check_held(pk_context *c, const seq *s, const char *what) {
    if (pk_context_pos(c) != s->len) fail("%s: pk_context_pos %d, expected %d", what, pk_context_pos(c), s->len);
    const int32_t *t = pk_context_tokens(c);
    if (s->len && !t) fail("%s: pk_context_tokens is NULL with %d tokens", what, s->len);
    for (int i = 0; i < s->len; i++)
        if (t[i] != s->tok[i]) fail("%s: pk_context_tokens[%d] = %d, expected %d", what, i, t[i], s->tok[i]);
    int ck[64];
    int n = pk_context_checkpoints(c, ck, 64);
    int same = n == s->n_ck;
    for (int i = 0; same && i < n && i < 64; i++) same = ck[i] == s->ck[i];
    if (!same) {
        char got[256] = "", want[256] = "";
        for (int i = 0; i < n && i < 64; i++) snprintf(got + strlen(got), sizeof got - strlen(got), " %d", ck[i]);
        for (int i = 0; i < s->n_ck; i++) snprintf(want + strlen(want), sizeof want - strlen(want), " %d", s->ck[i]);
        fail("%s: checkpoints at {%s }, expected {%s }", what, got, want);
    }
}

/* A fresh context fed the batches of s (kept between checks while the
 * sequence only grows; made anew when it was cut or replaced). */
static struct { pk_context *c; int n_b; int valid; } ref;

static void ref_invalidate(void) { ref.valid = 0; }

static void check_logits(pk_context *c, const seq *s, const char *what) {
    if (!ref.valid) {
        if (ref.c) pk_context_free(ref.c);
        ref.c = new_ctx(model, opt.n_ctx, opt.tk, opt.tv);
        ref.n_b = 0;
        ref.valid = 1;
    }
    for (; ref.n_b < s->n_b; ref.n_b++) {
        int b0 = ref.n_b ? s->end[ref.n_b - 1] : 0;
        decode(ref.c, s->tok + b0, s->end[ref.n_b] - b0, "the fresh context");
    }
    const float *a = pk_context_logits(c), *r = pk_context_logits(ref.c);
    if (memcmp(a, r, sizeof(float) * (size_t)n_vocab) == 0) return;
    int first = -1, am = 0, rm = 0;
    double d = 0;
    for (int i = 0; i < n_vocab; i++) {
        double e = a[i] > r[i] ? (double)a[i] - r[i] : (double)r[i] - a[i];
        if (first < 0 && memcmp(&a[i], &r[i], sizeof(float))) first = i;
        if (e > d) d = e;
        if (a[i] > a[am]) am = i;
        if (r[i] > r[rm]) rm = i;
    }
    char b[256] = "";
    for (int i = 0; i < s->n_b; i++) snprintf(b + strlen(b), sizeof b - strlen(b), " %d", s->end[i]);
    fail("%s: logits at %d differ from a fresh context fed the same batches (ending at%s): "
         "first at id %d (%.9g vs %.9g), max |diff| %.3g, argmax %d vs %d",
         what, s->len, b, first, first >= 0 ? a[first] : 0.0, first >= 0 ? r[first] : 0.0, d, am, rm);
}

/* ---- saved states -------------------------------------------------------------- */
static unsigned char *save(pk_context *c, size_t *n, const char *what) {
    size_t sz = pk_state_size(c);
    if (sz == 0) fail("%s: pk_state_size is 0", what);
    unsigned char *buf = xmalloc(sz + 64);
    memset(buf, 0xA5, sz + 64);
    pk_error err = {0};
    /* one byte short: refused, nothing written past the buffer */
    int rc = pk_state_save(c, buf, sz - 1, &err);
    if (rc == PK_OK) fail("%s: pk_state_save into %zu bytes (of %zu) succeeded", what, sz - 1, sz);
    for (size_t i = sz - 1; i < sz + 64; i++)
        if (buf[i] != 0xA5) fail("%s: pk_state_save into %zu bytes wrote byte %zu", what, sz - 1, i);
    if ((rc = pk_state_save(c, buf, sz, &err))) fail("%s: pk_state_save: %s (%d)", what, err.msg, rc);
    for (size_t i = sz; i < sz + 64; i++)
        if (buf[i] != 0xA5) fail("%s: pk_state_save wrote byte %zu, past pk_state_size %zu", what, i, sz);
    *n = sz;
    return buf;
}

static void check_state_tokens(const unsigned char *buf, size_t n, const seq *s, const char *what) {
    int32_t *t = NULL;
    int nt = -1;
    pk_error err = {0};
    int rc = pk_state_tokens(model, buf, n, &t, &nt, &err);
    if (rc) fail("%s: pk_state_tokens: %s (%d)", what, err.msg, rc);
    if (nt != s->len || (nt && memcmp(t, s->tok, sizeof(int32_t) * (size_t)nt)))
        fail("%s: pk_state_tokens gives %d tokens, not the %d saved", what, nt, s->len);
    free(t);
}

/* c saves as exactly buf again (a loaded state is the state saved) */
static void check_resave(pk_context *c, const unsigned char *buf, size_t n, const char *what) {
    size_t n2;
    unsigned char *b2 = save(c, &n2, what);
    if (n2 != n) fail("%s: the loaded state saves as %zu bytes, not %zu", what, n2, n);
    for (size_t i = 0; i < n; i++)
        if (b2[i] != buf[i]) fail("%s: the loaded state saves otherwise (byte %zu of %zu)", what, i, n);
    free(b2);
}

/* Change c before a load, so the load must replace all of it. */
static void perturb(pk_context *c) {
    int room = opt.n_ctx - pk_context_pos(c);
    switch (rnd_int(0, 2)) {
    case 0: break;
    case 1:
        if (pk_context_truncate(c, 0) != 0) fail("pk_context_truncate(0) did not return 0");
        break;
    default:
        if (room > 0) {
            int n = rnd_int(1, room < 12 ? room : 12);
            int32_t t[12];
            for (int i = 0; i < n; i++) t[i] = (int32_t)rnd_int(0, n_vocab - 1);
            decode(c, t, n, "perturbing before a load");
            pk_context_checkpoint(c);
        }
    }
}

/* ---- one random run ------------------------------------------------------------- */
static struct { int dec, trunc, trunc_ck, ck, mem, file, swap, full, plan; } count;

/* n tokens t decoded in one or two pk_decode calls with checkpoints planned
 * (pk_context_plan_checkpoints) at random positions inside them: the
 * context must then hold what decodes cut at those positions, each followed
 * by pk_context_checkpoint, would have made - the same checkpoints, and
 * logits bitwise those of a fresh context fed the batches cut there and
 * where the context's own batches (n_batch) end. */
static void planned_decode(pk_context *c, seq *s, const int32_t *t, int n) {
    int pos[8], k = rnd_int(1, opt.n_ckpt < 3 ? opt.n_ckpt : 3), m = 0;
    for (int p = s->len + 1; p <= s->len + n && m < k; p++)   /* k ascending positions, the end possibly */
        if (rnd_int(0, s->len + n - p) < k - m) pos[m++] = p;
    int split = rnd_int(0, 1) ? rnd_int(1, n - 1) : n;        /* the second pk_decode call's start */
    char what[160];
    snprintf(what, sizeof what, "decode %d tokens at %d in calls of %d and %d, checkpoints planned at", n, s->len,
             split, n - split);
    for (int i = 0; i < m; i++) snprintf(what + strlen(what), sizeof what - strlen(what), " %d", pos[i]);
    note("%s", what);
    pk_error err = {0};
    if (pk_context_plan_checkpoints(c, pos, m, &err)) fail("pk_context_plan_checkpoints: %s", err.msg);
    decode(c, t, split, "a planned decode");
    if (split < n) decode(c, t + split, n - split, "a planned decode's second call");
    /* what it must equal: batches cut at the calls' n_batch boundaries and at the positions */
    const int start = s->len;
    memcpy(s->tok + start, t, sizeof(int32_t) * (size_t)n);
    for (int p = start + 1, i = 0; p <= start + n; p++) {
        int call0 = p - start <= split ? start : start + split;
        int cut = p == start + n || p == start + split || (p - call0) % opt.n_batch == 0;
        if (i < m && pos[i] == p) { cut = 1; }
        if (!cut) continue;
        s->len = p;
        s->end[s->n_b++] = p;
        if (i < m && pos[i] == p) { seq_checkpoint(s); i++; }
    }
    check_held(c, s, "after a planned decode");
    check_logits(c, s, "after a planned decode");
}

static void random_run(void) {
    seq s, saved;
    seq_init(&s);
    seq_init(&saved);
    pk_context *c = new_ctx(model, opt.n_ctx, opt.tk, opt.tv);
    pk_context *c2 = new_ctx(model, opt.n_ctx, opt.tk, opt.tv);
    ref_invalidate();
    char path[4096];
    snprintf(path, sizeof path, "%s/state.bin", dir);
    int32_t *t = xmalloc(sizeof(int32_t) * (size_t)(opt.n_ctx + 8));
    pk_error err = {0};
    if ((pk_context_checkpoint_bytes(c) > 0) != recurrent)
        fail("pk_context_checkpoint_bytes %llu for a model with %s recurrent layers",
             (unsigned long long)pk_context_checkpoint_bytes(c), recurrent ? "" : "no");
    step = 0;
    for (int last = opt.steps; step <= last; step++) {
        int room = opt.n_ctx - s.len, op = rnd_int(0, 99);
        if (step == last) op = room ? 0 : 60;       /* end on a checked decode */
        if (step == last && !room) last++;
        if (op < 40 && room == 0) op = 60;          /* full: cut instead */
        if (op < 40) {                              /* decode a batch */
            int n = rnd_int(0, 1) ? rnd_int(1, 3) : rnd_int(4, 2 * opt.n_batch);
            if (n > room) n = room;
            if (step == last) n = 1;
            for (int i = 0; i < n; i++) t[i] = (int32_t)rnd_int(0, n_vocab - 1);
            if (recurrent && opt.n_ckpt > 0 && n > 1 && rnd_int(0, 2) == 0) {
                planned_decode(c, &s, t, n);
                count.plan++;
                continue;
            }
            note("decode %d tokens at %d", n, s.len);
            decode(c, t, n, "decode");
            memcpy(s.tok + s.len, t, sizeof(int32_t) * (size_t)n);
            s.len += n;
            s.end[s.n_b++] = s.len;
            check_held(c, &s, "after a decode");
            check_logits(c, &s, "after a decode");
            count.dec++;
        } else if (op < 52) {                       /* checkpoint */
            if (s.len == 0) continue;
            note("checkpoint at %d", s.len);
            pk_context_checkpoint(c);
            seq_checkpoint(&s);
            check_held(c, &s, "after a checkpoint");
            count.ck++;
        } else if (op < 70) {                       /* truncate */
            int n = rnd_int(0, s.len + 2);
            if (opt.aligned) n = rnd_int(0, s.n_b) ? s.end[rnd_int(0, s.n_b - 1)] : 0;
            int want = seq_reach(&s, n), r = pk_context_reachable(c, n);
            note("truncate to %d (reachable %d, expected %d)", n, r, want);
            if (r != want) fail("pk_context_reachable(%d) = %d, expected %d", n, r, want);
            if ((r = pk_context_truncate(c, n)) != want) fail("pk_context_truncate(%d) = %d, expected %d", n, r, want);
            if (want != s.len) ref_invalidate();
            if (want < n && want < s.len) count.trunc_ck++;
            seq_cut(&s, want);
            check_held(c, &s, "after a truncation");
            count.trunc++;
        } else if (op < 90) {                       /* save, change, load: memory or file */
            int file = op >= 80;
            size_t n;
            unsigned char *buf = save(c, &n, file ? "saving for a file" : "saving to memory");
            check_state_tokens(buf, n, &s, "the saved state");
            seq_copy(&saved, &s);
            if (file) {
                if (pk_state_save_file(c, path, &err)) fail("pk_state_save_file %s: %s", path, err.msg);
                int32_t *ft = NULL;
                int nt = -1;
                if (pk_state_file_tokens(model, path, &ft, &nt, &err)) fail("pk_state_file_tokens: %s", err.msg);
                if (nt != s.len || (nt && memcmp(ft, s.tok, sizeof(int32_t) * (size_t)nt)))
                    fail("pk_state_file_tokens gives %d tokens, not the %d saved", nt, s.len);
                free(ft);
            }
            perturb(c);
            note("%s %zu bytes at %d, changed to %d, loaded", file ? "save/load file of" : "save/load", n,
                 s.len, pk_context_pos(c));
            int rc = file ? pk_state_load_file(c, path, &err) : pk_state_load(c, buf, n, &err);
            if (rc) fail("%s: %s (%d)", file ? "pk_state_load_file" : "pk_state_load", err.msg, rc);
            seq_copy(&s, &saved);
            ref_invalidate();
            check_held(c, &s, "after a load");
            check_resave(c, buf, n, "after a load");
            free(buf);
            count.mem += !file;
            count.file += file;
        } else if (op < 97) {                       /* into the second context */
            size_t n;
            unsigned char *buf = save(c, &n, "saving for the second context");
            perturb(c2);
            note("state of %zu bytes at %d loaded into the other context (at %d)", n, s.len, pk_context_pos(c2));
            int rc = pk_state_load(c2, buf, n, &err);
            if (rc) fail("pk_state_load into a second context: %s (%d)", err.msg, rc);
            pk_context *x = c;
            c = c2;
            c2 = x;
            ref_invalidate();
            check_held(c, &s, "the second context after a load");
            check_resave(c, buf, n, "the second context after a load");
            free(buf);
            count.swap++;
        } else {                                    /* a decode that does not fit */
            int n = room + rnd_int(1, 3);
            for (int i = 0; i < n; i++) t[i] = (int32_t)rnd_int(0, n_vocab - 1);
            note("decode %d tokens at %d (too many)", n, s.len);
            int rc = pk_decode(c, t, n, &err);
            if (rc != PK_ERR_CONTEXT) fail("pk_decode of %d tokens with room for %d returned %d, not PK_ERR_CONTEXT", n, room, rc);
            check_held(c, &s, "after a decode that did not fit");
            count.full++;
        }
    }
    free(t);
    pk_context_free(c);
    pk_context_free(c2);
    seq_free(&s);
    seq_free(&saved);
}

/* ---- refusals ------------------------------------------------------------------ */
/* A context x holding the sequence xs (with a checkpoint at its end): after
 * a refused load it must still hold it, and decode the next token as the
 * fresh context does; then it is cut back to xs. */
static void check_unchanged(pk_context *x, seq *xs, const char *what) {
    check_held(x, xs, what);
    int32_t t = (int32_t)rnd_int(0, n_vocab - 1);
    decode(x, &t, 1, what);
    seq ys;
    seq_init(&ys);
    seq_copy(&ys, xs);
    ys.tok[ys.len++] = t;
    ys.end[ys.n_b++] = ys.len;
    check_logits(x, &ys, what);
    seq_free(&ys);
    if (pk_context_truncate(x, xs->len) != xs->len) fail("%s: cannot cut back to %d", what, xs->len);
    ref_invalidate();
}

static void expect_refused(int rc, int want, const pk_error *err, const char *word, const char *what) {
    if (rc != want)
        fail("%s: returned %d (%s), not %d (%s)%s%s", what, rc, pk_status_str(rc), want, pk_status_str(want),
             rc ? ": " : "", rc ? err->msg : "");
    if (!err->msg[0] || strchr(err->msg, '\n')) fail("%s: the message is not one line: '%s'", what, err->msg);
    if (word) {
        int found = 0;
        for (const char *p = err->msg; *p && !found; p++) found = !strncasecmp(p, word, strlen(word));
        if (!found) fail("%s: the message does not say '%s': %s", what, word, err->msg);
    }
}

/* pk_state_tokens on bytes that may be anything: the right tokens, or an
 * error with a one-line message. */
static void poke_tokens(const pk_model *m, const unsigned char *buf, size_t n, const seq *s, const char *what) {
    int32_t *t = NULL;
    int nt = -1;
    pk_error err = {0};
    int rc = pk_state_tokens(m, buf, n, &t, &nt, &err);
    if (rc == PK_OK) {
        if (nt < 0 || (s && (nt != s->len || (nt && memcmp(t, s->tok, sizeof(int32_t) * (size_t)nt)))))
            fail("%s: pk_state_tokens succeeded with %d tokens (saved: %d)", what, nt, s ? s->len : -1);
        free(t);
    } else if (!err.msg[0] || strchr(err.msg, '\n')) {
        fail("%s: pk_state_tokens returned %d with the message '%s'", what, rc, err.msg);
    }
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f)) fail("cannot write %s", path);
}

static void refusals(char **others, int n_others) {
    run_seed = opt.seed;
    rng = opt.seed;
    step = 0;
    pk_error err = {0};
    char path[4096], what[512];
    /* the state: two batches, a checkpoint between them */
    seq s;
    seq_init(&s);
    pk_context *c = new_ctx(model, opt.n_ctx, opt.tk, opt.tv);
    int n1 = opt.n_ctx / 4, n2 = opt.n_ctx / 4 + 3;
    for (int i = 0; i < n1 + n2; i++) s.tok[i] = (int32_t)rnd_int(0, n_vocab - 1);
    decode(c, s.tok, n1, "the state to refuse");
    pk_context_checkpoint(c);
    decode(c, s.tok + n1, n2, "the state to refuse");
    size_t n;
    unsigned char *buf = save(c, &n, "the state to refuse");
    s.len = n1 + n2;
    pk_context_free(c);

    /* the context refusing: another sequence, a checkpoint at its end */
    seq xs;
    seq_init(&xs);
    pk_context *x = new_ctx(model, opt.n_ctx, opt.tk, opt.tv);
    xs.len = opt.n_ctx / 3;
    for (int i = 0; i < xs.len; i++) xs.tok[i] = (int32_t)rnd_int(0, n_vocab - 1);
    decode(x, xs.tok, xs.len, "the refusing context");
    xs.end[xs.n_b++] = xs.len;
    pk_context_checkpoint(x);
    seq_checkpoint(&xs);
    ref_invalidate();
    check_unchanged(x, &xs, "before any refusal");
    int refused = 0;

    /* truncated: every length up to 64, then a spread to the end */
    for (size_t cut = 0; cut < n; cut = cut < 64 ? cut + 1 : cut + 1 + (n - 64) / 61) {
        step = (int)cut;
        snprintf(what, sizeof what, "a state of %zu bytes cut to %zu", n, cut);
        unsigned char *b = xmalloc(cut);
        memcpy(b, buf, cut);
        int rc = pk_state_load(x, b, cut, &err);
        expect_refused(rc, PK_ERR_FORMAT, &err, NULL, what);
        check_held(x, &xs, what);
        poke_tokens(model, b, cut, &s, what);
        free(b);
        refused++;
    }
    step = 0;
    check_unchanged(x, &xs, "after the cut states");
    /* one byte flipped: the first 64 bytes each, then 64 places at random */
    unsigned char *b = xmalloc(n);
    for (int k = 0; k < 128; k++) {
        size_t at = k < 64 && (size_t)k < n ? (size_t)k : (size_t)(rnd() % n);
        unsigned char bit = (unsigned char)(1u << rnd_int(0, 7));
        step = (int)at;
        memcpy(b, buf, n);
        b[at] ^= bit;
        snprintf(what, sizeof what, "a state of %zu bytes with byte %zu ^= 0x%02x", n, at, bit);
        int rc = pk_state_load(x, b, n, &err);
        expect_refused(rc, PK_ERR_FORMAT, &err, NULL, what);
        check_held(x, &xs, what);
        poke_tokens(model, b, n, NULL, what);
        refused++;
    }
    free(b);
    step = 0;
    check_unchanged(x, &xs, "after the flipped states");

    /* too long for the context */
    pk_context *small = new_ctx(model, s.len - 1, opt.tk, opt.tv);
    int rc = pk_state_load(small, buf, n, &err);
    snprintf(what, sizeof what, "a state of %d tokens into a context of %d", s.len, s.len - 1);
    expect_refused(rc, PK_ERR_ARG, &err, NULL, what);
    if (pk_context_pos(small) != 0) fail("%s: the context holds %d tokens", what, pk_context_pos(small));
    pk_context_free(small);
    refused++;

    /* other cache types: keys, values */
    for (int kv = 0; kv < 2; kv++) {
        int tk = opt.tk, tv = opt.tv, *o = kv ? &tv : &tk;
        *o = *o == PK_CACHE_F32 ? PK_CACHE_F16 : PK_CACHE_F32;
        pk_context *y = new_ctx(model, opt.n_ctx, tk, tv);
        rc = pk_state_load(y, buf, n, &err);
        snprintf(what, sizeof what, "a state of cache types %s/%s into a context of %s/%s",
                 pk_cache_type_name(opt.tk), pk_cache_type_name(opt.tv), pk_cache_type_name(tk),
                 pk_cache_type_name(tv));
        expect_refused(rc, PK_ERR_ARG, &err, "cache", what);
        if (pk_context_pos(y) != 0) fail("%s: the context holds %d tokens", what, pk_context_pos(y));
        pk_context_free(y);
        refused++;
    }

    /* other models: their contexts refuse it, and it theirs */
    for (int i = 0; i < n_others; i++) {
        pk_model *om;
        if (pk_model_load(others[i], &om, &err)) fail("%s: %s", others[i], err.msg);
        pk_context *y = new_ctx(om, opt.n_ctx, opt.tk, opt.tv);
        int32_t one = 1;
        decode(y, &one, 1, others[i]);
        rc = pk_state_load(y, buf, n, &err);
        snprintf(what, sizeof what, "a state of %s into a context of %s", model_path, others[i]);
        expect_refused(rc, PK_ERR_ARG, &err, "model", what);
        if (pk_context_pos(y) != 1 || pk_context_tokens(y)[0] != 1) fail("%s: the context changed", what);
        int32_t *t = NULL;
        int nt;
        rc = pk_state_tokens(om, buf, n, &t, &nt, &err);
        snprintf(what, sizeof what, "pk_state_tokens of a state of %s for %s", model_path, others[i]);
        expect_refused(rc, PK_ERR_ARG, &err, "model", what);
        size_t on;
        unsigned char *ob = save(y, &on, others[i]);
        rc = pk_state_load(x, ob, on, &err);
        snprintf(what, sizeof what, "a state of %s into a context of %s", others[i], model_path);
        expect_refused(rc, PK_ERR_ARG, &err, "model", what);
        check_held(x, &xs, what);
        free(ob);
        pk_context_free(y);
        pk_model_free(om);
        refused += 2;
    }
    check_unchanged(x, &xs, "after the states of other models and cache types");

    /* files: not states at all, cut, missing */
    static const char text[] = "And God said, Let there be light: and there was light.\n";
    struct { const char *name; const void *p; size_t n; int want; } files[] = {
        {.name = "empty", .p = "", .n = 0, .want = PK_ERR_FORMAT},
        {.name = "text", .p = text, .n = sizeof text - 1, .want = PK_ERR_FORMAT},
        {.name = "half", .p = buf, .n = n / 2, .want = PK_ERR_FORMAT},
        {.name = "all but one", .p = buf, .n = n - 1, .want = PK_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/not-a-state", dir);
        write_bytes(path, files[i].p, files[i].n);
        snprintf(what, sizeof what, "pk_state_load_file of a file of %zu bytes (%s)", files[i].n, files[i].name);
        expect_refused(pk_state_load_file(x, path, &err), files[i].want, &err, NULL, what);
        check_held(x, &xs, what);
        if (!strstr(err.msg, path)) fail("%s: the message does not name the file: %s", what, err.msg);
        int32_t *t = NULL;
        int nt;
        if (pk_state_file_tokens(model, path, &t, &nt, &err) == PK_OK) {
            if (i < 2) fail("pk_state_file_tokens of a file of %zu bytes (%s) succeeded", files[i].n, files[i].name);
            free(t);
        }
        refused++;
    }
    snprintf(what, sizeof what, "pk_state_load_file of the model file %s", model_path);
    expect_refused(pk_state_load_file(x, model_path, &err), PK_ERR_FORMAT, &err, NULL, what);
    snprintf(path, sizeof path, "%s/no-such-state", dir);
    remove(path);
    snprintf(what, sizeof what, "pk_state_load_file of a missing file");
    expect_refused(pk_state_load_file(x, path, &err), PK_ERR_IO, &err, NULL, what);
    int32_t *t = NULL;
    int nt;
    if (pk_state_file_tokens(model, path, &t, &nt, &err) != PK_ERR_IO)
        fail("pk_state_file_tokens of a missing file: not PK_ERR_IO: %s", err.msg);
    refused += 2;
    check_unchanged(x, &xs, "after the files that are not states");

    /* and the state itself still loads */
    if ((rc = pk_state_load(x, buf, n, &err))) fail("the state refused after all: %s (%d)", err.msg, rc);
    s.n_b = 0;
    s.end[s.n_b++] = n1;
    s.end[s.n_b++] = n1 + n2;
    if (recurrent && opt.n_ckpt) s.ck[s.n_ck++] = n1;
    check_held(x, &s, "the state loaded at last");
    printf("ok   %s (kv %s/%s): %d refusals (a state of %zu bytes cut, flipped, too long, other cache types, "
           "%d other models; not states); the context unchanged after each\n",
           model_path, pk_cache_type_name(opt.tk), pk_cache_type_name(opt.tv), refused, n, n_others);
    pk_context_free(x);
    seq_free(&s);
    seq_free(&xs);
    free(buf);
}

int main(int argc, char **argv) {
    int a = 1, refuse = 0;
    for (; a < argc && argv[a][0] == '-'; a++) {
        const char *f = argv[a];
        if (!strcmp(f, "-refuse")) { refuse = refuse_mode = 1; continue; }
        if (!strcmp(f, "-aligned")) { opt.aligned = 1; continue; }
        if (a + 1 >= argc) break;
        const char *v = argv[++a];
        if (!strcmp(f, "-t")) opt.threads = atoi(v);
        else if (!strcmp(f, "-b")) opt.n_batch = atoi(v);
        else if (!strcmp(f, "-c")) opt.n_ctx = atoi(v);
        else if (!strcmp(f, "-k")) opt.n_ckpt = atoi(v);
        else if (!strcmp(f, "-seed")) opt.seed = strtoull(v, NULL, 10);
        else if (!strcmp(f, "-runs")) opt.runs = atoi(v);
        else if (!strcmp(f, "-steps")) opt.steps = atoi(v);
        else if (!strcmp(f, "-ctk") || !strcmp(f, "-ctv")) {
            int ty = pk_cache_type_parse(v);
            if (ty < 0) { fprintf(stderr, "tool_state: %s: unknown KV cache type '%s'\n", f, v); return 2; }
            *(f[3] == 'k' ? &opt.tk : &opt.tv) = ty;
        } else { fprintf(stderr, "tool_state: unknown option %s\n", f); return 2; }
    }
    if (argc - a < 2 || (!refuse && argc - a != 2) || opt.n_ctx < 8 || opt.n_ckpt < 0 || opt.n_ckpt > 60) {
        fprintf(stderr, "usage: tool_state [-t N] [-b N] [-c N_CTX >= 8] [-k CHECKPOINTS] [-ctk T] [-ctv T] "
                        "[-seed S] [-runs R] [-steps N] [-aligned] [-refuse] MODEL.gguf DIR [OTHER.gguf...]\n");
        return 2;
    }
    model_path = argv[a];
    dir = argv[a + 1];
    pk_error err = {0};
    if (pk_model_load(model_path, &model, &err)) { printf("FAIL %s\n", err.msg); return 1; }
    pk_model_info info;
    pk_model_get_info(model, &info);
    n_vocab = pk_model_n_vocab(model);
    recurrent = info.n_layer_recurrent > 0;
    if (refuse) {
        refusals(argv + a + 2, argc - a - 2);
    } else {
        for (int r = 0; r < opt.runs; r++) {
            run_seed = rng = opt.seed + (uint64_t)r;
            trace_len = 0;
            trace[0] = 0;
            random_run();
        }
        printf("ok   %s (kv %s/%s, %d runs from seed %llu): %d decodes = a fresh context's logits bitwise; "
               "%d truncations (%d to a checkpoint), %d checkpoints, %d + %d loads from memory / file, "
               "%d into another context, %d overflows, %d decodes with planned checkpoints\n",
               model_path, pk_cache_type_name(opt.tk), pk_cache_type_name(opt.tv), opt.runs,
               (unsigned long long)opt.seed, count.dec, count.trunc, count.trunc_ck, count.ck, count.mem,
               count.file, count.swap, count.full, count.plan);
    }
    if (ref.c) pk_context_free(ref.c);
    pk_model_free(model);
    return 0;
}
