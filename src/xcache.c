/* xcache.c - the routed-expert cache (see xcache.h).
 *
 * Layout: per layer, `slots` slots; a slot holds one expert's gate, up and
 * down slices, each read as the covering range of whole 4 KiB pages (what
 * O_DIRECT wants) into its own page-aligned region of the slot, so the
 * slice starts at offset (file offset mod 4096) in it. The slot memory is
 * one anonymous mapping: a slot costs resident memory once it is first
 * filled, not before.
 *
 * Policy: least recently used per layer, among the slots no forward pass
 * has pinned. The eviction order is recorded by `tick`, a counter bumped
 * per lookup.
 *
 * Reads: the misses of one acquire are read by the cache's own I/O threads
 * (several requests in flight: the device's queue depth, not the number of
 * cores, bounds the throughput of random reads), blocking in pread; one
 * acquire's reads at a time (the pool takes one caller).
 */
#include "xcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "model.h"

enum { XC_PAGE = 4096, XC_IO_THREADS = 4 };
enum { S_EMPTY = 0, S_LOADING = 1, S_READY = 2 };

struct pk_xcache {
    char *path;
    int fd, direct;               /* direct: fd has O_DIRECT */
    int n_layer, n_expert, slots;
    uint64_t file_size;
    /* per layer and tensor k (gate, up, down): file offset of expert 0's
       slice and the slice's bytes (an expert's slice is contiguous) */
    uint64_t (*off)[3], (*len)[3];
    uint64_t koff[3], slot_bytes; /* slice regions within a slot (sized for
                                     the largest layer: types vary by layer) */
    uint8_t *mem;                 /* n_layer * slots * slot_bytes */
    size_t mem_bytes;
    int *map;                     /* [layer * n_expert + e] slot or -1 */
    int *slot_e;                  /* [layer * slots + s] expert or -1 */
    uint32_t *ref;
    uint64_t *last;
    uint8_t *state;
    uint64_t tick;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pk_pool *io;
    pthread_mutex_t io_mu;        /* one pk_pool_run on io at a time */
};

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t up_to(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

int pk_xcache_slots(const pk_xcache *xc) { return xc->slots; }

/* Bytes of a slot and of its three regions: each the covering pages of the
 * largest slice of its tensor over the layers, plus one page (a slice
 * starts anywhere in its first page). */
static uint64_t slot_layout(const pk_model *m, uint64_t region[3]) {
    uint64_t total = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t mx = 0;
        for (int il = 0; il < m->hp.n_layer; il++) {
            const pk_layer *Ly = &m->layers[il];
            const pk_tensor *t = k == 0 ? &Ly->gate_exps : k == 1 ? &Ly->up_exps : &Ly->down_exps;
            uint64_t len = t->data ? (uint64_t)t->ne[1] * t->row_bytes : 0;
            if (len > mx) mx = len;
        }
        region[k] = up_to(mx, XC_PAGE) + XC_PAGE;
        total += region[k];
    }
    return total;
}

uint64_t pk_xcache_plan_slot_bytes(const pk_model *m) {
    uint64_t region[3];
    return slot_layout(m, region);
}
uint64_t pk_xcache_slot_bytes(const pk_xcache *xc) { return xc->slot_bytes; }

int pk_xcache_new(const pk_model *m, int slots, pk_xcache **out, pk_error *err) {
    *out = NULL;
    const pk_hparams *hp = &m->hp;
    if (!hp->moe || hp->n_expert < 1)
        return pk_errorf(err, PK_ERR_ARG, "%s: the model has no routed experts to cache", m->path);
    if (slots < 1 || slots > hp->n_expert)
        return pk_errorf(err, PK_ERR_ARG, "expert cache of %d slots per layer is out of range [1, %d]", slots,
                         hp->n_expert);
    pk_xcache *xc = pk_calloc(1, sizeof *xc);
    if (!xc) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    xc->fd = -1;
    xc->n_layer = hp->n_layer;
    xc->n_expert = hp->n_expert;
    xc->slots = slots;
    xc->file_size = m->gguf->size;
    pthread_mutex_init(&xc->mu, NULL);
    pthread_mutex_init(&xc->io_mu, NULL);
    pthread_cond_init(&xc->cv, NULL);
    int rc = PK_OK;
    const size_t L = (size_t)hp->n_layer, E = (size_t)hp->n_expert, S = (size_t)slots;
    if (!(xc->path = strdup(m->path)) || !(xc->off = pk_calloc(L, sizeof *xc->off)) ||
        !(xc->len = pk_calloc(L, sizeof *xc->len)) ||
        !(xc->map = pk_calloc(L * E, sizeof *xc->map)) || !(xc->slot_e = pk_calloc(L * S, sizeof *xc->slot_e)) ||
        !(xc->ref = pk_calloc(L * S, sizeof *xc->ref)) || !(xc->last = pk_calloc(L * S, sizeof *xc->last)) ||
        !(xc->state = pk_calloc(L * S, 1))) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < L * E; i++) xc->map[i] = -1;
    for (size_t i = 0; i < L * S; i++) xc->slot_e[i] = -1;
    for (int il = 0; il < hp->n_layer; il++) {
        const pk_tensor *t[3] = {&m->layers[il].gate_exps, &m->layers[il].up_exps, &m->layers[il].down_exps};
        for (int k = 0; k < 3; k++) {
            if (!t[k]->data || t[k]->ne[2] != hp->n_expert) {
                rc = pk_errorf(err, PK_ERR_FORMAT, "%s: layer %d has no stacked expert tensors to cache", m->path, il);
                goto fail;
            }
            xc->len[il][k] = (uint64_t)t[k]->ne[1] * t[k]->row_bytes;
            xc->off[il][k] = (uint64_t)((const uint8_t *)t[k]->data - m->gguf->map);
        }
    }
    uint64_t region[3];
    xc->slot_bytes = slot_layout(m, region);
    for (int k = 0; k < 3; k++) xc->koff[k] = k ? xc->koff[k - 1] + region[k - 1] : 0;
    xc->mem_bytes = (size_t)(L * S * xc->slot_bytes);
    void *mem = mmap(NULL, xc->mem_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "out of memory for an expert cache of %zu bytes", xc->mem_bytes);
        xc->mem = NULL;
        goto fail;
    }
    xc->mem = mem;
#ifdef MADV_HUGEPAGE
    madvise(mem, xc->mem_bytes, MADV_HUGEPAGE);   /* a hint: fewer TLB misses over the slots */
#endif
#ifdef O_DIRECT
    /* O_DIRECT where the file system takes it (tmpfs, for one, does not):
       probed with one aligned read */
    xc->fd = open(m->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (xc->fd >= 0 && pread(xc->fd, xc->mem, XC_PAGE, 0) < 0) {
        close(xc->fd);
        xc->fd = -1;
    }
    xc->direct = xc->fd >= 0;
#endif
    if (xc->fd < 0) xc->fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (xc->fd < 0) {
        rc = pk_errorf(err, PK_ERR_IO, "%s: cannot open for expert reads: %s", m->path, strerror(errno));
        goto fail;
    }
    if (!(xc->io = pk_pool_new(XC_IO_THREADS))) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "out of memory for the expert cache's I/O threads");
        goto fail;
    }
    *out = xc;
    return PK_OK;
fail:
    pk_xcache_free(xc);
    return rc;
}

void pk_xcache_free(pk_xcache *xc) {
    if (!xc) return;
    pk_pool_free(xc->io);
    if (xc->fd >= 0) close(xc->fd);
    if (xc->mem) munmap(xc->mem, xc->mem_bytes);
    pthread_mutex_destroy(&xc->mu);
    pthread_mutex_destroy(&xc->io_mu);
    pthread_cond_destroy(&xc->cv);
    free(xc->path); free(xc->off); free(xc->len); free(xc->map); free(xc->slot_e);
    free(xc->ref); free(xc->last); free(xc->state);
    free(xc);
}

static uint8_t *slot_mem(const pk_xcache *xc, int il, int s) {
    return xc->mem + ((size_t)il * (size_t)xc->slots + (size_t)s) * xc->slot_bytes;
}

/* one slice read: (slot, tensor k) */
typedef struct {
    pk_xcache *xc;
    int il;
    const int *slot, *expert;     /* [miss] */
    int err_no;                   /* first errno (0: all good); written under mu */
    int short_read;
    uint64_t bytes;
} rd_task;

/* Read [off, off + len) of the file so that it lands at dst + (off mod
 * 4096), dst page-aligned; returns 0, or an errno (-1: end of file). */
static int read_range(pk_xcache *xc, uint8_t *dst, uint64_t off, uint64_t len, uint64_t *done) {
    uint64_t a = off / XC_PAGE * XC_PAGE, end = up_to(off + len, XC_PAGE);
    if (end > up_to(xc->file_size, XC_PAGE)) end = up_to(xc->file_size, XC_PAGE);
    uint64_t need = off + len - a, got = 0;
    while (got < need) {
        ssize_t r = pread(xc->fd, dst + got, (size_t)(end - a - got), (off_t)(a + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        if (r == 0) return -1;
        got += (uint64_t)r;
    }
    if (!xc->direct) posix_fadvise(xc->fd, (off_t)a, (off_t)(end - a), POSIX_FADV_DONTNEED);
    *done = got;
    return 0;
}

static void rd_run(void *arg, int i) {
    rd_task *t = arg;
    pk_xcache *xc = t->xc;
    const int miss = i / 3, k = i % 3, s = t->slot[miss], e = t->expert[miss];
    uint64_t off = xc->off[t->il][k] + (uint64_t)e * xc->len[t->il][k], done = 0;
    int r = read_range(xc, slot_mem(xc, t->il, s) + xc->koff[k], off, xc->len[t->il][k], &done);
    pthread_mutex_lock(&xc->mu);
    if (r && !t->err_no) t->err_no = r;
    t->bytes += done;
    pthread_mutex_unlock(&xc->mu);
}

static const void *slice_ptr(const pk_xcache *xc, int il, int s, int e, int k) {
    uint64_t off = xc->off[il][k] + (uint64_t)e * xc->len[il][k];
    return slot_mem(xc, il, s) + xc->koff[k] + off % XC_PAGE;
}

int pk_xcache_acquire(pk_xcache *xc, int il, const int *ex, int n, const void **ptr,
                      pk_xcache_stats *st, pk_error *err) {
    if (il < 0 || il >= xc->n_layer || n < 0 || n > xc->slots)
        return pk_errorf(err, PK_ERR_ARG, "expert cache: %d experts of layer %d (at most %d at once)", n, il,
                         xc->slots);
    const int E = xc->n_expert, S = xc->slots;
    int *map = xc->map + (size_t)il * E, *se = xc->slot_e + (size_t)il * S;
    uint32_t *ref = xc->ref + (size_t)il * S;
    uint64_t *last = xc->last + (size_t)il * S;
    uint8_t *state = xc->state + (size_t)il * S;
    int slot[n > 0 ? n : 1], mslot[n > 0 ? n : 1], mexp[n > 0 ? n : 1], nm = 0;
    double t0 = wall();
    pthread_mutex_lock(&xc->mu);
    for (;;) {
        int need = 0, victims = 0;
        for (int i = 0; i < n; i++) need += map[ex[i]] < 0;
        for (int s = 0; s < S; s++) {
            if (ref[s]) continue;
            int wanted = 0;
            for (int i = 0; i < n && !wanted; i++) wanted = se[s] == ex[i];
            victims += !wanted;
        }
        if (victims >= need) break;
        pthread_cond_wait(&xc->cv, &xc->mu);   /* other contexts hold the slots */
    }
    for (int i = 0; i < n; i++) {               /* pin the hits first */
        int s = slot[i] = map[ex[i]];
        if (s < 0) continue;
        ref[s]++;
        last[s] = ++xc->tick;
    }
    for (int i = 0; i < n; i++) {
        if (slot[i] >= 0) continue;
        int v = -1;
        for (int s = 0; s < S; s++)
            if (!ref[s] && (v < 0 || (se[s] < 0 && se[v] >= 0) || ((se[s] < 0) == (se[v] < 0) && last[s] < last[v])))
                v = s;
        if (se[v] >= 0) map[se[v]] = -1;
        se[v] = ex[i];
        map[ex[i]] = v;
        ref[v] = 1;
        last[v] = ++xc->tick;
        state[v] = S_LOADING;
        slot[i] = v;
        mslot[nm] = v;
        mexp[nm++] = ex[i];
    }
    pthread_mutex_unlock(&xc->mu);

    rd_task t = {xc, il, mslot, mexp, 0, 0, 0};
    if (nm) {
        pthread_mutex_lock(&xc->io_mu);
        pk_pool_run(xc->io, rd_run, &t, 3 * nm);
        pthread_mutex_unlock(&xc->io_mu);
    }

    pthread_mutex_lock(&xc->mu);
    for (int j = 0; j < nm; j++) {
        int s = mslot[j];
        if (t.err_no) {                          /* forget the slot's contents */
            map[se[s]] = -1;
            se[s] = -1;
            state[s] = S_EMPTY;
        } else {
            state[s] = S_READY;
        }
    }
    if (nm) pthread_cond_broadcast(&xc->cv);
    int lost = 0;
    for (int i = 0; i < n && !t.err_no; i++) {  /* hits another context is still reading */
        while (state[slot[i]] == S_LOADING) pthread_cond_wait(&xc->cv, &xc->mu);
        if (se[slot[i]] != ex[i]) lost = 1;      /* its read failed */
    }
    if (t.err_no || lost) {
        for (int i = 0; i < n; i++) ref[slot[i]]--;
        pthread_cond_broadcast(&xc->cv);
        pthread_mutex_unlock(&xc->mu);
        if (t.err_no == -1)
            return pk_errorf(err, PK_ERR_IO, "%s: unexpected end of file reading the experts of layer %d (was the file truncated?)",
                             xc->path, il);
        return pk_errorf(err, PK_ERR_IO, "%s: cannot read the experts of layer %d: %s", xc->path, il,
                         lost ? "a read in another context failed" : strerror(t.err_no));
    }
    pthread_mutex_unlock(&xc->mu);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) ptr[3 * i + k] = slice_ptr(xc, il, slot[i], ex[i], k);
    if (st) {
        st->misses += (uint64_t)nm;
        st->hits += (uint64_t)(n - nm);
        st->bytes_read += t.bytes;
        st->read_secs += wall() - t0;
    }
    return PK_OK;
}

void pk_xcache_release(pk_xcache *xc, int il, const int *ex, int n) {
    int *map = xc->map + (size_t)il * xc->n_expert;
    uint32_t *ref = xc->ref + (size_t)il * xc->slots;
    pthread_mutex_lock(&xc->mu);
    for (int i = 0; i < n; i++) {
        int s = map[ex[i]];
        if (s >= 0 && ref[s]) ref[s]--;
    }
    pthread_cond_broadcast(&xc->cv);
    pthread_mutex_unlock(&xc->mu);
}
