/* serve_cache.c - the saved conversations of `pocket serve` (serve_cache.h).
 *
 * An entry is one sequence state, known by its tokens: its bytes in RAM
 * (buf), its file (path), or both. The RAM part is dropped least recently
 * used first when the RAM bound is passed, the file part oldest first when
 * the directory's bound is; an entry with neither is freed. The workload is
 * a handful of long states (a conversation of thousands of tokens is tens to
 * hundreds of MB), so every lookup is a linear scan under the mutex, and
 * every byte of state I/O happens outside it.
 *
 * Files are named after a hash of their tokens (HASH.pkstate), written by
 * pk_state_save_file (atomic: a temporary file renamed), one writer at a
 * time. At start every *.pkstate of the directory is read as far as its
 * header (pk_state_file_tokens: model identity, lengths); a file refused
 * there, or later by pk_state_load_file (checksum), is skipped with one log
 * line and left on disk (it may be another model's).
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "serve_cache.h"

typedef struct entry {
    uint64_t id;
    int32_t *tok;           /* the state's tokens, n of them */
    int n;
    int *ck;                /* its checkpoint positions, n_ck (ck_known: 0 for a file not loaded yet) */
    int n_ck, ck_known;
    void *buf;              /* its bytes in RAM (NULL: not in RAM) */
    size_t buf_len;
    char *path;             /* its file (NULL: none) */
    uint64_t file_len;
    uint64_t used;          /* pc->clock when last saved or loaded (LRU) */
} entry;

struct pcache {
    pcache_params p;
    char *dir;
    pthread_mutex_t mu;     /* everything below */
    pthread_mutex_t file_mu;/* one file writer at a time */
    entry **e;
    int n, cap;
    uint64_t clock, next_id;
    pcache_stats st;        /* bytes and counts (its states counted when asked) */
};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("pocket serve: cache: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

int pcache_lcp(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- entries (mu held) ---------------------------------------------------------------- */

static void entry_free(entry *e) {
    free(e->tok);
    free(e->ck);
    free(e->buf);
    free(e->path);
    free(e);
}

static entry *find_id(pcache *pc, uint64_t id) {
    for (int i = 0; i < pc->n; i++)
        if (pc->e[i]->id == id) return pc->e[i];
    return NULL;
}

static entry *find_tokens(pcache *pc, const int32_t *tok, int n) {
    for (int i = 0; i < pc->n; i++)
        if (pc->e[i]->n == n && !memcmp(pc->e[i]->tok, tok, (size_t)n * sizeof *tok)) return pc->e[i];
    return NULL;
}

/* A list of files to delete once the mutex is released. */
typedef struct doomed {
    char **path;
    int n, cap;
} doomed;

static void doom(doomed *d, char *path) {
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 8;
        char **t = realloc(d->path, (size_t)cap * sizeof *t);
        if (!t) { free(path); return; }     /* out of memory: the file stays, unindexed */
        d->path = t;
        d->cap = cap;
    }
    d->path[d->n++] = path;
}

static void doomed_unlink(doomed *d) {
    for (int i = 0; i < d->n; i++) {
        if (unlink(d->path[i]) && errno != ENOENT) logf_("cannot delete %s: %s", d->path[i], strerror(errno));
        free(d->path[i]);
    }
    free(d->path);
    memset(d, 0, sizeof *d);
}

static void drop_ram(pcache *pc, entry *e) {
    if (!e->buf) return;
    free(e->buf);
    e->buf = NULL;
    pc->st.ram_bytes -= e->buf_len;
    e->buf_len = 0;
}

static void drop_file(pcache *pc, entry *e, doomed *d) {
    if (!e->path) return;
    if (d) doom(d, e->path); else free(e->path);
    e->path = NULL;
    pc->st.file_bytes -= e->file_len;
    e->file_len = 0;
}

/* Free the entries that hold nothing any more. */
static void sweep(pcache *pc) {
    int k = 0;
    for (int i = 0; i < pc->n; i++) {
        if (pc->e[i]->buf || pc->e[i]->path) pc->e[k++] = pc->e[i];
        else entry_free(pc->e[i]);
    }
    pc->n = k;
}

/* Bring RAM and files within their bounds, least recently used first;
 * keep is spared. */
static void enforce_bounds(pcache *pc, const entry *keep, doomed *d) {
    while (pc->st.ram_bytes > pc->p.ram_bytes || pc->st.file_bytes > pc->p.dir_bytes) {
        int ram = pc->st.ram_bytes > pc->p.ram_bytes;
        entry *old = NULL;
        for (int i = 0; i < pc->n; i++) {
            entry *e = pc->e[i];
            if (e != keep && (ram ? e->buf != NULL : e->path != NULL) && (!old || e->used < old->used)) old = e;
        }
        if (!old) break;
        if (ram) drop_ram(pc, old);
        else {
            logf_("deleting %s (%d tokens): the directory holds more than its bound", old->path, old->n);
            drop_file(pc, old, d);
        }
    }
    sweep(pc);
}

static void set_checkpoints(entry *e, const int *ck, int n_ck) {
    int *t = n_ck ? malloc((size_t)n_ck * sizeof *t) : NULL;
    if (n_ck && !t) { e->ck_known = 0; return; }     /* estimated again until loaded */
    free(e->ck);
    if (n_ck) memcpy(t, ck, (size_t)n_ck * sizeof *t);
    e->ck = t;
    e->n_ck = n_ck;
    e->ck_known = 1;
}

/* The entry holding tok[0..n) (made if there is none; NULL when out of
 * memory), marked as just used; entries holding a strict prefix of it are
 * dropped, their files deleted. */
static entry *attach_locked(pcache *pc, const int32_t *tok, int n, doomed *d) {
    for (int i = 0; i < pc->n; i++) {
        entry *e = pc->e[i];
        if (e->n < n && !memcmp(e->tok, tok, (size_t)e->n * sizeof *tok)) {
            drop_ram(pc, e);
            drop_file(pc, e, d);
        }
    }
    sweep(pc);
    entry *e = find_tokens(pc, tok, n);
    if (!e) {
        if (pc->n == pc->cap) {
            int cap = pc->cap ? 2 * pc->cap : 16;
            entry **t = realloc(pc->e, (size_t)cap * sizeof *t);
            if (!t) return NULL;
            pc->e = t;
            pc->cap = cap;
        }
        e = calloc(1, sizeof *e);
        if (!e || !(e->tok = malloc((size_t)(n ? n : 1) * sizeof *tok))) { free(e); return NULL; }
        memcpy(e->tok, tok, (size_t)n * sizeof *tok);
        e->n = n;
        e->id = ++pc->next_id;
        pc->e[pc->n++] = e;
    }
    e->used = ++pc->clock;
    return e;
}

/* ---- the store ------------------------------------------------------------------------ */

typedef struct found {
    char *path;
    int32_t *tok;
    int n;
    uint64_t len;
    struct timespec mtime;
} found;

static int older(const void *a, const void *b) {
    const found *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Index the *.pkstate files of the directory, oldest first. */
static int index_dir(pcache *pc, pk_error *err) {
    DIR *dd = opendir(pc->dir);
    if (!dd) {
        err->code = PK_ERR_IO;
        snprintf(err->msg, sizeof err->msg, "--cache-dir %s: %s", pc->dir, strerror(errno));
        return err->code;
    }
    found *f = NULL;
    int nf = 0, capf = 0;
    struct dirent *de;
    while ((de = readdir(dd))) {
        size_t l = strlen(de->d_name);
        if (l <= 8 || strcmp(de->d_name + l - 8, ".pkstate")) continue;
        size_t pl = strlen(pc->dir) + l + 2;
        char *path = malloc(pl);
        if (!path) break;
        snprintf(path, pl, "%s/%s", pc->dir, de->d_name);
        struct stat st;
        int32_t *tok = NULL;
        int n = 0;
        pk_error e = {0};
        if (stat(path, &st) || !S_ISREG(st.st_mode)) { free(path); continue; }
        if (pk_state_file_tokens(pc->p.model, path, &tok, &n, &e)) {
            logf_("ignored: %s", e.msg);
            free(path);
            continue;
        }
        if (n <= 0 || n > pc->p.n_ctx) {
            logf_("ignored: %s: it holds %d tokens; this server's context holds %d", path, n, pc->p.n_ctx);
            free(tok);
            free(path);
            continue;
        }
        if (nf == capf) {
            capf = capf ? 2 * capf : 16;
            found *t = realloc(f, (size_t)capf * sizeof *t);
            if (!t) { free(tok); free(path); break; }
            f = t;
        }
        f[nf++] = (found){.path = path, .tok = tok, .n = n, .len = (uint64_t)st.st_size, .mtime = st.st_mtim};
    }
    closedir(dd);
    if (nf) qsort(f, (size_t)nf, sizeof *f, older);
    doomed d = {0};
    for (int i = 0; i < nf; i++) {
        entry *e = attach_locked(pc, f[i].tok, f[i].n, &d);
        if (e && !e->path) {
            e->path = f[i].path;
            e->file_len = f[i].len;
            pc->st.file_bytes += f[i].len;
        } else {
            if (e) logf_("ignored: %s: the same tokens as %s", f[i].path, e->path);
            free(f[i].path);    /* out of memory, or the same tokens twice: the older file stays unindexed */
        }
        free(f[i].tok);
    }
    free(f);
    sweep(pc);
    enforce_bounds(pc, NULL, &d);
    doomed_unlink(&d);
    logf_("%s: %d saved state%s (%.1f MiB)", pc->dir, pc->n, pc->n == 1 ? "" : "s", pc->st.file_bytes / 1048576.0);
    return 0;
}

int pcache_open(const pcache_params *p, pcache **out, pk_error *err) {
    *out = NULL;
    pcache *pc = calloc(1, sizeof *pc);
    if (!pc) {
        err->code = PK_ERR_NOMEM;
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return err->code;
    }
    pc->p = *p;
    pthread_mutex_init(&pc->mu, NULL);
    pthread_mutex_init(&pc->file_mu, NULL);
    if (p->dir) {
        pc->dir = strdup(p->dir);
        if (!pc->dir) {
            pcache_free(pc);
            err->code = PK_ERR_NOMEM;
            snprintf(err->msg, sizeof err->msg, "out of memory");
            return err->code;
        }
        size_t l = strlen(pc->dir);
        while (l > 1 && pc->dir[l - 1] == '/') pc->dir[--l] = 0;
        if (mkdir(pc->dir, 0777) && errno != EEXIST) {
            err->code = PK_ERR_IO;
            snprintf(err->msg, sizeof err->msg, "--cache-dir %s: cannot make it: %s", pc->dir, strerror(errno));
            pcache_free(pc);
            return err->code;
        }
        if (index_dir(pc, err)) { pcache_free(pc); return err->code; }
    }
    *out = pc;
    return 0;
}

void pcache_free(pcache *pc) {
    if (!pc) return;
    for (int i = 0; i < pc->n; i++) entry_free(pc->e[i]);
    free(pc->e);
    free(pc->dir);
    pthread_mutex_destroy(&pc->mu);
    pthread_mutex_destroy(&pc->file_mu);
    free(pc);
}

/* What loading e spares of a prompt sharing lcp tokens with it: all of them
 * (attention layers), else its end or the latest checkpoint at or before. */
static int entry_reach(const pcache *pc, const entry *e, int lcp) {
    if (!pc->p.recurrent || lcp == e->n || !e->ck_known) return lcp;
    int r = 0;
    for (int i = 0; i < e->n_ck; i++)
        if (e->ck[i] <= lcp && e->ck[i] > r) r = e->ck[i];
    return r;
}

int pcache_match(pcache *pc, const int32_t *prompt, int n, int limit, uint64_t *id) {
    *id = 0;
    int best = 0;
    const entry *be = NULL;
    pthread_mutex_lock(&pc->mu);
    for (int i = 0; i < pc->n; i++) {
        const entry *e = pc->e[i];
        int l = pcache_lcp(e->tok, e->n, prompt, n);
        int r = entry_reach(pc, e, l < limit ? l : limit);
        /* ties: RAM before a file, then the more recent */
        if (r > best || (r == best && r > 0 && be &&
                         ((e->buf && !be->buf) || (!e->buf == !be->buf && e->used > be->used)))) {
            best = r;
            be = e;
        }
    }
    if (be) *id = be->id;
    pthread_mutex_unlock(&pc->mu);
    return best;
}

/* A FNV-1a hash of the tokens: the file name. */
static uint64_t tokens_hash(const int32_t *tok, int n) {
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)tok;
    for (size_t i = 0; i < (size_t)n * sizeof *tok; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

int pcache_save(pcache *pc, const pk_context *c, int to_ram) {
    int n = pk_context_pos(c), kept = 0;
    if (!pc || n <= 0) return 0;
    const int32_t *tok = pk_context_tokens(c);
    size_t size = pk_state_size(c);
    int n_ck = pk_context_checkpoints(c, NULL, 0);
    int *ck = n_ck > 0 ? malloc((size_t)n_ck * sizeof *ck) : NULL;
    if (ck) n_ck = pk_context_checkpoints(c, ck, n_ck);
    else n_ck = 0;
    pk_error err = {0};
    doomed d = {0};

    void *buf = NULL;
    if (to_ram && size <= pc->p.ram_bytes && (buf = malloc(size)) && pk_state_save(c, buf, size, &err)) {
        logf_("cannot keep a state of %d tokens in RAM: %s", n, err.msg);
        free(buf);
        buf = NULL;
    }
    pthread_mutex_lock(&pc->mu);
    if (buf) {
        entry *e = attach_locked(pc, tok, n, &d);
        if (e) {
            drop_ram(pc, e);
            e->buf = buf;
            e->buf_len = size;
            pc->st.ram_bytes += size;
            set_checkpoints(e, ck, n_ck);
            pc->st.saves++;
            enforce_bounds(pc, e, &d);
            kept |= e->buf ? PCACHE_RAM : 0;
        } else {
            free(buf);
        }
    }
    const entry *same = find_tokens(pc, tok, n);
    int write = pc->dir && size <= pc->p.dir_bytes && !(same && same->path);
    if (same && same->path) kept |= PCACHE_FILE;
    pthread_mutex_unlock(&pc->mu);
    doomed_unlink(&d);

    if (write) {
        size_t pl = strlen(pc->dir) + 32;
        char *path = malloc(pl);
        struct stat st;
        memset(&st, 0, sizeof st);
        int ok = 0;
        if (path) {
            snprintf(path, pl, "%s/%016llx.pkstate", pc->dir, (unsigned long long)tokens_hash(tok, n));
            pthread_mutex_lock(&pc->file_mu);
            if (pk_state_save_file(c, path, &err)) logf_("cannot save a state of %d tokens: %s", n, err.msg);
            else if (stat(path, &st)) logf_("%s: %s", path, strerror(errno));
            else ok = 1;
            pthread_mutex_unlock(&pc->file_mu);
        }
        pthread_mutex_lock(&pc->mu);
        entry *e = ok ? attach_locked(pc, tok, n, &d) : NULL;
        if (e) {
            for (int i = 0; i < pc->n; i++)     /* a hash collision overwrote another entry's file */
                if (pc->e[i] != e && pc->e[i]->path && !strcmp(pc->e[i]->path, path)) drop_file(pc, pc->e[i], NULL);
            drop_file(pc, e, NULL);
            e->path = path;
            path = NULL;
            e->file_len = (uint64_t)st.st_size;
            pc->st.file_bytes += e->file_len;
            set_checkpoints(e, ck, n_ck);
            pc->st.saves++;
            enforce_bounds(pc, e, &d);
            kept |= e->path ? PCACHE_FILE : 0;
        }
        pthread_mutex_unlock(&pc->mu);
        if (path && ok) doom(&d, path);     /* no entry for it (out of memory): delete it */
        else free(path);
        doomed_unlink(&d);
    }
    free(ck);
    return kept;
}

int pcache_load(pcache *pc, uint64_t id, pk_context *c, char *where, size_t cap) {
    pthread_mutex_lock(&pc->mu);
    entry *e = find_id(pc, id);
    if (!e) { pthread_mutex_unlock(&pc->mu); return -1; }
    void *buf = e->buf;
    size_t len = e->buf_len;
    char *path = NULL;
    if (buf) {      /* the slot holds it from now on */
        e->buf = NULL;
        e->buf_len = 0;
        pc->st.ram_bytes -= len;
        sweep(pc);
    } else if (!(path = strdup(e->path))) {
        pthread_mutex_unlock(&pc->mu);
        return -1;
    }
    pthread_mutex_unlock(&pc->mu);

    pk_error err = {0};
    int rc = buf ? pk_state_load(c, buf, len, &err) : pk_state_load_file(c, path, &err);
    free(buf);
    pthread_mutex_lock(&pc->mu);
    e = find_id(pc, id);
    if (rc) {
        pc->st.refused++;
        if (path) logf_("ignored: %s", err.msg);
        else logf_("a state in RAM was refused: %s", err.msg);
        if (e && path) { drop_file(pc, e, NULL); sweep(pc); }  /* the file stays on disk, out of the index */
    } else {
        if (buf) pc->st.restores_ram++; else pc->st.restores_file++;
        if (e) {
            e->used = ++pc->clock;
            int n_ck = pk_context_checkpoints(c, NULL, 0);
            int *ck = n_ck > 0 ? malloc((size_t)n_ck * sizeof *ck) : NULL;
            if (ck || n_ck <= 0) set_checkpoints(e, ck, ck ? pk_context_checkpoints(c, ck, n_ck) : 0);
            free(ck);
        }
        snprintf(where, cap, "%s", buf ? "RAM" : base_name(path));
    }
    pthread_mutex_unlock(&pc->mu);
    free(path);
    return rc ? -1 : 0;
}

void pcache_get_stats(pcache *pc, pcache_stats *st) {
    memset(st, 0, sizeof *st);
    if (!pc) return;
    pthread_mutex_lock(&pc->mu);
    *st = pc->st;
    for (int i = 0; i < pc->n; i++) {
        st->ram_states += pc->e[i]->buf != NULL;
        st->file_states += pc->e[i]->path != NULL;
    }
    pthread_mutex_unlock(&pc->mu);
}
