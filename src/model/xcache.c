/* model/xcache.c - the routed-expert cache (see model/xcache.h).
 *
 * Layout: per layer, `slots` slots; a slot holds one expert's gate, up and
 * down slices, each read as the covering range of whole 4 KiB pages (what
 * O_DIRECT wants) into its own page-aligned region of the slot, so the
 * slice starts at offset (file offset mod 4096) in it. The slot memory is
 * one anonymous mapping, populated at the first lookup (it is inside the
 * budget anyway; faulting it in under the first reads was slower).
 *
 * Policy: least frequently used per layer, ties broken by least recently
 * used, among the slots no forward pass has pinned. An expert's frequency
 * counts all its lookups since load (cached or not), its recency the
 * `tick` of its last lookup. On the bundled model's real routing this beats
 * LRU by 5-7 points of hit rate at 3/8 to 1/2 of the experts cached
 * (bench/cache_sim.py on a bench/route_trace.c trace; README).
 *
 * Reads: slice requests (layer, slot, tensor) in one queue, served by the
 * cache's own reader threads blocking in pread (several requests in
 * flight: the device's queue depth, not the number of cores, bounds the
 * throughput of random reads). A slot being read is LOADING: not evicted,
 * and a lookup of its expert pins it and waits. Demand reads (an acquire's
 * misses) go to the front of the queue, prefetches (pk_xcache_prefetch:
 * experts the next layer will probably want) to the back, so reads overlap
 * the compute of the layers before. A prefetch read starts only while no
 * demand read is queued or running, and at most XC_PF_FLY run at once: a
 * miss then waits for its own reads, not for a queue of guesses already on
 * the device (a read in flight cannot be taken back). A read not yet
 * started can: when the layer's routing is known (pk_xcache_begin), the
 * caller's own guesses still queued are settled - the right ones move to
 * the front as demand reads, the wrong ones are withdrawn (their requests
 * carry the slot's generation, bumped on withdrawal, and a reader drops a
 * request of an older one). On a storage-bound run that is what the pipe
 * would have spent on them: on the 40-layer POCKET-35B Q2_K at --mem 6G,
 * 180.1 -> 171.1 MB per token read, the same hit rate.
 */
#include "model/xcache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "core/threads.h"
#include "model/model.h"

enum { XC_PAGE = 4096, XC_IO_THREADS = 8 };
/* prefetch reads in flight at most: the other readers stay free for the
   demand reads a layer's routing brings (one expert: 3 slices) */
enum { XC_PF_FLY = XC_IO_THREADS - 3 };
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
    uint32_t *freq;               /* [layer * n_expert + e] lookups since load */
    uint8_t *state;
    uint64_t tick;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* reads: a queue of (layer, slot, tensor) slice requests served by
       XC_IO_THREADS reader threads; demand reads go to the front,
       prefetches to the back */
    struct xc_req { int il, s, k, demand; uint32_t gen; } *q;
    int q_head, q_n, q_cap;
    int dm_n, pf_fly;             /* demand reads queued or in flight; prefetch reads in flight */
    uint8_t *pending;             /* [layer * slots + s] slice reads outstanding */
    uint8_t *inq;                 /* [layer * slots + s] of them still queued (not started) */
    uint32_t *gen;                /* [layer * slots + s] bumped when the slot's queued reads are
                                     withdrawn (a request of another gen is skipped) */
    const void **pf_by;           /* [layer * slots + s] who queued a prefetch (the caller's
                                     stats, as an id; never dereferenced) */
    uint8_t *pf;                  /* [layer * slots + s] 1: prefetched, not yet looked up */
    int *rd_err;                  /* [layer * slots + s] errno of a failed read (-1: EOF) */
    pthread_cond_t q_cv;
    pthread_t th[XC_IO_THREADS];
    int n_th, stop, hold;
    int populated;
};

/* Fault the slot memory in at once (under mu, before the first read):
 * zeroing the pages while the first reads land in them cost more than the
 * reads (2/3 of a cold run's time on POCKET-35B). Not at creation, so that
 * `pocket info --mem` and a model that is never decoded cost nothing. */
static void populate(pk_xcache *xc) {
    if (xc->populated) return;
    xc->populated = 1;
#ifdef MADV_POPULATE_WRITE
    if (madvise(xc->mem, xc->mem_bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
    for (size_t o = 0; o < xc->mem_bytes; o += XC_PAGE) ((volatile uint8_t *)xc->mem)[o] = 0;
}

static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t up_to(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
static void *reader(void *arg);

int pk_xcache_slots(const pk_xcache *xc) { return xc->slots; }
int pk_xcache_io_depth(void) { return XC_IO_THREADS; }

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
    pthread_cond_init(&xc->cv, NULL);
    pthread_cond_init(&xc->q_cv, NULL);
    int rc = PK_OK;
    const size_t L = (size_t)hp->n_layer, E = (size_t)hp->n_expert, S = (size_t)slots;
    if (!(xc->path = strdup(m->path)) || !(xc->off = pk_calloc(L, sizeof *xc->off)) ||
        !(xc->len = pk_calloc(L, sizeof *xc->len)) ||
        !(xc->map = pk_calloc(L * E, sizeof *xc->map)) || !(xc->slot_e = pk_calloc(L * S, sizeof *xc->slot_e)) ||
        !(xc->ref = pk_calloc(L * S, sizeof *xc->ref)) || !(xc->last = pk_calloc(L * S, sizeof *xc->last)) ||
        !(xc->freq = pk_calloc(L * E, sizeof *xc->freq)) ||
        !(xc->state = pk_calloc(L * S, 1)) || !(xc->pending = pk_calloc(L * S, 1)) ||
        !(xc->inq = pk_calloc(L * S, 1)) || !(xc->gen = pk_calloc(L * S, sizeof *xc->gen)) ||
        !(xc->pf_by = pk_calloc(L * S, sizeof *xc->pf_by)) ||
        !(xc->pf = pk_calloc(L * S, 1)) || !(xc->rd_err = pk_calloc(L * S, sizeof *xc->rd_err)) ||
        !(xc->q = pk_calloc(3 * L * S, sizeof *xc->q))) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < L * E; i++) xc->map[i] = -1;
    for (size_t i = 0; i < L * S; i++) xc->slot_e[i] = -1;
    for (int il = 0; il < hp->n_layer; il++) {
        const pk_tensor *t[3] = {&m->layers[il].gate_exps, &m->layers[il].up_exps, &m->layers[il].down_exps};
        for (int k = 0; k < 3; k++) {
            if (!t[k]->data || t[k]->ne[2] != m->blocks[il].ff.n_expert) {
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
    xc->q_cap = (int)(3 * L * S);
    for (; xc->n_th < XC_IO_THREADS; xc->n_th++)
        if (pthread_create(&xc->th[xc->n_th], NULL, reader, xc)) {
            rc = pk_errorf(err, PK_ERR_NOMEM, "cannot start the expert cache's I/O threads");
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
    pthread_mutex_lock(&xc->mu);
    xc->stop = 1;
    pthread_cond_broadcast(&xc->q_cv);
    pthread_mutex_unlock(&xc->mu);
    for (int i = 0; i < xc->n_th; i++) pthread_join(xc->th[i], NULL);
    if (xc->fd >= 0) close(xc->fd);
    if (xc->mem) munmap(xc->mem, xc->mem_bytes);
    pthread_mutex_destroy(&xc->mu);
    pthread_cond_destroy(&xc->cv);
    pthread_cond_destroy(&xc->q_cv);
    free(xc->path); free(xc->off); free(xc->len); free(xc->map); free(xc->slot_e);
    free(xc->ref); free(xc->last); free(xc->freq); free(xc->state);
    free(xc->pending); free(xc->inq); free(xc->gen); free(xc->pf_by); free(xc->pf); free(xc->rd_err); free(xc->q);
    free(xc);
}

static uint8_t *slot_mem(const pk_xcache *xc, int il, int s) {
    return xc->mem + ((size_t)il * (size_t)xc->slots + (size_t)s) * xc->slot_bytes;
}

/* The file range a read of [off, off + len) covers: whole pages, the
 * last one ending at the file's last page */
static void covering(const pk_xcache *xc, uint64_t off, uint64_t len, uint64_t *a, uint64_t *end) {
    *a = off / XC_PAGE * XC_PAGE;
    *end = up_to(off + len, XC_PAGE);
    if (*end > up_to(xc->file_size, XC_PAGE)) *end = up_to(xc->file_size, XC_PAGE);
}

/* bytes the three slice reads of expert e of layer il ask of the device */
static uint64_t expert_read_bytes(const pk_xcache *xc, int il, int e) {
    uint64_t sum = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t a, end;
        covering(xc, xc->off[il][k] + (uint64_t)e * xc->len[il][k], xc->len[il][k], &a, &end);
        sum += end - a;
    }
    return sum;
}

/* Read [off, off + len) of the file so that it lands at dst + (off mod
 * 4096), dst page-aligned; returns 0, or an errno (-1: end of file). */
static int read_range(pk_xcache *xc, uint8_t *dst, uint64_t off, uint64_t len) {
    uint64_t a, end;
    covering(xc, off, len, &a, &end);
    uint64_t need = off + len - a, got = 0;
    while (got < need) {
        ssize_t r = pread(xc->fd, dst + got, (size_t)(end - a - got), (off_t)(a + got));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return errno;
        if (r == 0) return -1;
        got += (uint64_t)r;
    }
#ifdef POSIX_FADV_DONTNEED
    if (!xc->direct) posix_fadvise(xc->fd, (off_t)a, (off_t)(end - a), POSIX_FADV_DONTNEED);
#endif
    return 0;
}

/* ---- the readers ----------------------------------------------------------- */

/* Slot i (= layer * slots + s) of layer il holds nothing from now on
 * (under mu): a failed read's, a withdrawn guess's */
static void forget(pk_xcache *xc, int il, size_t i) {
    xc->map[(size_t)il * xc->n_expert + xc->slot_e[i]] = -1;
    xc->slot_e[i] = -1;
    xc->state[i] = S_EMPTY;
    xc->pf[i] = 0;
}

/* a request of a slot whose queued reads were withdrawn since (under mu) */
static int stale(const pk_xcache *xc, const struct xc_req *r) {
    return r->gen != xc->gen[(size_t)r->il * (size_t)xc->slots + (size_t)r->s];
}

static void *reader(void *arg) {
    pk_xcache *xc = arg;
    pthread_mutex_lock(&xc->mu);
    for (;;) {
        /* a demand read at once; a prefetch only while no demand read waits
           or runs, and at most XC_PF_FLY of them: a layer's misses then
           share the device with no queue of guesses ahead of them */
        while (xc->q_n && stale(xc, &xc->q[xc->q_head])) {   /* withdrawn: drop */
            xc->q_head = (xc->q_head + 1) % xc->q_cap;
            xc->q_n--;
        }
        if (xc->stop) break;
        if (xc->hold || !(xc->q_n && (xc->q[xc->q_head].demand || (!xc->dm_n && xc->pf_fly < XC_PF_FLY)))) {
            pthread_cond_wait(&xc->q_cv, &xc->mu);
            continue;
        }
        struct xc_req r = xc->q[xc->q_head];
        xc->q_head = (xc->q_head + 1) % xc->q_cap;
        xc->q_n--;
        if (!r.demand) xc->pf_fly++;
        const size_t i = (size_t)r.il * (size_t)xc->slots + (size_t)r.s;
        const int e = xc->slot_e[i];
        xc->inq[i]--;
        pthread_mutex_unlock(&xc->mu);
        /* the slot is LOADING: nobody else writes it, and e cannot change */
        uint64_t off = xc->off[r.il][r.k] + (uint64_t)e * xc->len[r.il][r.k];
        int rc = read_range(xc, slot_mem(xc, r.il, r.s) + xc->koff[r.k], off, xc->len[r.il][r.k]);
        pthread_mutex_lock(&xc->mu);
        if (r.demand) xc->dm_n--;
        else xc->pf_fly--;
        if (xc->q_n) pthread_cond_broadcast(&xc->q_cv);   /* a prefetch may start now */
        if (rc && !xc->rd_err[i]) xc->rd_err[i] = rc;
        if (--xc->pending[i] == 0) {
            if (xc->rd_err[i]) forget(xc, r.il, i);   /* waiters see it gone */
            else xc->state[i] = S_READY;
            pthread_cond_broadcast(&xc->cv);
        }
    }
    pthread_mutex_unlock(&xc->mu);
    return NULL;
}

/* Queue the three slice reads of slot s of layer il (under mu); withdrawn
 * requests are compacted away first if the ring is full (live ones never
 * fill it: at most 3 per slot, and this slot has none). */
static void enqueue(pk_xcache *xc, int il, int s, int front) {
    const size_t i = (size_t)il * (size_t)xc->slots + (size_t)s;
    if (xc->q_n + 3 > xc->q_cap) {
        int n = 0;
        for (int j = 0; j < xc->q_n; j++) {
            const struct xc_req r = xc->q[(xc->q_head + j) % xc->q_cap];
            if (!stale(xc, &r)) xc->q[(xc->q_head + n++) % xc->q_cap] = r;
        }
        xc->q_n = n;
    }
    PK_ASSERT(xc->q_n + 3 <= xc->q_cap);
    xc->pending[i] = 3;
    xc->inq[i] = 3;
    xc->rd_err[i] = 0;
    xc->state[i] = S_LOADING;
    for (int k = 0; k < 3; k++) {
        struct xc_req r = {.il = il, .s = s, .k = front ? 2 - k : k, .demand = front, .gen = xc->gen[i]};
        xc->dm_n += front;
        if (front) {
            xc->q_head = (xc->q_head + xc->q_cap - 1) % xc->q_cap;
            xc->q[xc->q_head] = r;
        } else {
            xc->q[(xc->q_head + xc->q_n) % xc->q_cap] = r;
        }
        xc->q_n++;
    }
    pthread_cond_broadcast(&xc->q_cv);
}

/* The slot of layer il to give to a new expert (under mu): empty first,
 * then least frequently used, then least recently used; never a pinned or
 * loading slot, nor one holding an expert of want[0..nw); -1 if none. */
static int victim(pk_xcache *xc, int il, const int *want, int nw) {
    const int S = xc->slots;
    const int *se = xc->slot_e + (size_t)il * S;
    const uint32_t *ref = xc->ref + (size_t)il * S, *freq = xc->freq + (size_t)il * xc->n_expert;
    const uint64_t *last = xc->last + (size_t)il * S;
    const uint8_t *state = xc->state + (size_t)il * S;
    int v = -1;
    for (int s = 0; s < S; s++) {
        if (ref[s] || state[s] == S_LOADING) continue;
        int wanted = 0;
        for (int j = 0; j < nw && !wanted; j++) wanted = se[s] == want[j];
        if (wanted) continue;
        if (v < 0 || (se[s] < 0 && se[v] >= 0)) { v = s; continue; }
        if (se[s] < 0 || se[v] < 0) continue;
        uint32_t fs = freq[se[s]], fv = freq[se[v]];
        if (fs < fv || (fs == fv && last[s] < last[v])) v = s;
    }
    return v;
}

/* Give slot v of layer il to expert e (under mu). */
static void assign(pk_xcache *xc, int il, int v, int e) {
    const size_t i = (size_t)il * (size_t)xc->slots + (size_t)v;
    int *map = xc->map + (size_t)il * xc->n_expert;
    if (xc->slot_e[i] >= 0) map[xc->slot_e[i]] = -1;
    xc->slot_e[i] = e;
    map[e] = v;
    xc->last[i] = ++xc->tick;
    xc->pf[i] = 0;
}

static const void *slice_ptr(const pk_xcache *xc, int il, int s, int e, int k) {
    uint64_t off = xc->off[il][k] + (uint64_t)e * xc->len[il][k];
    return slot_mem(xc, il, s) + xc->koff[k] + off % XC_PAGE;
}

int pk_xcache_begin(pk_xcache *xc, pk_xcache_set *set, pk_xcache_stats *st, pk_error *err) {
    const int il = set->il, n = set->n;
    const int *ex = set->ex;
    if (il < 0 || il >= xc->n_layer || n < 0 || n > xc->slots)
        return pk_errorf(err, PK_ERR_ARG, "expert cache: %d experts of layer %d (at most %d at once)", n, il,
                         xc->slots);
    const int E = xc->n_expert, S = xc->slots;
    int *map = xc->map + (size_t)il * E, *se = xc->slot_e + (size_t)il * S, *slot = set->slot;
    uint32_t *ref = xc->ref + (size_t)il * S, *freq = xc->freq + (size_t)il * E;
    uint64_t *last = xc->last + (size_t)il * S;
    uint8_t *state = xc->state + (size_t)il * S, *pf = xc->pf + (size_t)il * S;
    int nm = 0, npf = 0;
    uint64_t bytes = 0, unread = 0, cancelled = 0;
    double t0 = wall();
    pthread_mutex_lock(&xc->mu);
    populate(xc);
    set->n_taken = 0;
    memset(set->taken, 0, (size_t)n);
    for (;;) {                                  /* enough slots to take, or wait */
        int need = 0, victims = 0;
        for (int i = 0; i < n; i++) need += map[ex[i]] < 0;
        for (int s = 0; s < S; s++) {
            if (ref[s] || state[s] == S_LOADING) continue;
            int wanted = 0;
            for (int i = 0; i < n && !wanted; i++) wanted = se[s] == ex[i];
            victims += !wanted;
        }
        if (victims >= need) break;
        pthread_cond_wait(&xc->cv, &xc->mu);   /* other contexts hold the slots */
    }
    uint32_t *gen = xc->gen + (size_t)il * S;
    const uint8_t *inq = xc->inq + (size_t)il * S;
    const void **pf_by = xc->pf_by + (size_t)il * S;
    for (int i = 0; i < n; i++) {               /* pin the hits (ready or on their way) */
        if (freq[ex[i]] < UINT32_MAX) freq[ex[i]]++;
        int s = slot[i] = map[ex[i]];
        if (s < 0) continue;
        ref[s]++;
        last[s] = ++xc->tick;
        if (pf[s] && state[s] == S_LOADING && inq[s] == 3) {   /* a guess still queued: read it now */
            gen[s]++;
            enqueue(xc, il, s, 1);
        }
        npf += pf[s];
        pf[s] = 0;
    }
    for (int s = 0; st && s < S; s++) {         /* this caller's wrong guesses still queued: withdraw */
        if (!pf[s] || pf_by[s] != (const void *)st || ref[s] || state[s] != S_LOADING || inq[s] != 3) continue;
        const size_t i = (size_t)il * (size_t)S + (size_t)s;
        gen[s]++;                               /* its 3 queued requests are dropped */
        xc->pending[i] = xc->inq[i] = 0;
        cancelled++;
        unread += expert_read_bytes(xc, il, se[s]);
        forget(xc, il, i);
    }
    for (int i = 0; i < n; i++) {               /* the misses: read them first of all */
        if (slot[i] >= 0) continue;
        int v = victim(xc, il, ex, n);
        assign(xc, il, v, ex[i]);
        ref[v] = 1;
        slot[i] = v;
        enqueue(xc, il, v, 1);
        bytes += expert_read_bytes(xc, il, ex[i]);
        nm++;
    }
    pthread_mutex_unlock(&xc->mu);
    if (st) {
        /* the withdrawn guesses were counted when queued (by this st; a
           context freed and another made at its address could inherit
           them: never below zero) */
        st->bytes_read = st->bytes_read + bytes > unread ? st->bytes_read + bytes - unread : 0;
        st->prefetches = st->prefetches > cancelled ? st->prefetches - cancelled : 0;
        st->misses += (uint64_t)nm;
        st->hits += (uint64_t)(n - nm);
        st->prefetch_hits += (uint64_t)npf;
        st->read_secs += wall() - t0;
    }
    return PK_OK;
}

int pk_xcache_next_ready(pk_xcache *xc, pk_xcache_set *set, int *idx, const void **ptr, int cap,
                         pk_xcache_stats *st, pk_error *err) {
    const int il = set->il, n = set->n, S = xc->slots;
    const int *ex = set->ex, *slot = set->slot;
    const int *se = xc->slot_e + (size_t)il * S, *rerr = xc->rd_err + (size_t)il * S;
    const uint8_t *state = xc->state + (size_t)il * S;
    uint32_t *ref = xc->ref + (size_t)il * S;
    double t0 = wall();
    int nf = 0, why = 0, lost = 0;
    if (cap < 1) {
        pk_errorf(err, PK_ERR_ARG, "expert cache: room for %d experts", cap);
        return -1;
    }
    pthread_mutex_lock(&xc->mu);
    while (nf == 0 && !lost && set->n_taken < n) {
        for (int i = 0; i < n && nf < cap && !lost; i++) {
            if (set->taken[i] || state[slot[i]] == S_LOADING) continue;
            if (se[slot[i]] != ex[i]) {              /* its read failed */
                lost = 1;
                why = rerr[slot[i]];
            } else {
                idx[nf++] = i;
            }
        }
        if (nf == 0 && !lost) pthread_cond_wait(&xc->cv, &xc->mu);
    }
    if (lost || nf == 0) {   /* none left, or a read failed: unpin all not yet returned */
        for (int i = 0; i < n; i++)
            if (!set->taken[i]) ref[slot[i]]--;
        set->n_taken = n;
        pthread_cond_broadcast(&xc->cv);
        pthread_mutex_unlock(&xc->mu);
        if (!lost)
            pk_errorf(err, PK_ERR_ARG, "expert cache: no expert of layer %d left to take", il);
        else if (why == -1)
            pk_errorf(err, PK_ERR_IO, "%s: unexpected end of file reading the experts of layer %d (was the file truncated?)",
                      xc->path, il);
        else
            pk_errorf(err, PK_ERR_IO, "%s: cannot read the experts of layer %d: %s", xc->path, il,
                      why > 0 ? strerror(why) : "the read failed");
        return -1;
    }
    for (int j = 0; j < nf; j++) set->taken[idx[j]] = 1;
    set->n_taken += nf;
    pthread_mutex_unlock(&xc->mu);
    for (int j = 0; j < nf; j++)
        for (int k = 0; k < 3; k++) ptr[3 * j + k] = slice_ptr(xc, il, slot[idx[j]], ex[idx[j]], k);
    if (st) st->read_secs += wall() - t0;
    return nf;
}

int pk_xcache_next(pk_xcache *xc, pk_xcache_set *set, const void **ptr, pk_xcache_stats *st, pk_error *err) {
    int i;
    return pk_xcache_next_ready(xc, set, &i, ptr, 1, st, err) == 1 ? i : -1;
}

int pk_xcache_acquire(pk_xcache *xc, int il, const int *ex, int n, const void **ptr,
                      pk_xcache_stats *st, pk_error *err) {
    /* the set's arrays: n slots, then n flags, in this thread's scratch */
    int *slot = pk_thread_scratch((size_t)(n > 0 ? n : 1) * (sizeof(int) + 1));
    if (!slot) return pk_errorf(err, PK_ERR_NOMEM, "expert cache: out of memory for a set of %d experts", n);
    uint8_t *taken = (uint8_t *)(slot + (n > 0 ? n : 1));
    pk_xcache_set set = {.il = il, .n = n, .n_taken = 0, .ex = ex, .slot = slot, .taken = taken};
    int rc = pk_xcache_begin(xc, &set, st, err);
    if (rc) return rc;
    for (int j = 0; j < n; j++) {
        const void *p[3];
        int i = pk_xcache_next(xc, &set, p, st, err);
        if (i < 0) {                             /* unpin those already returned too */
            for (int t = 0; t < n; t++)
                if (taken[t]) pk_xcache_release(xc, il, &ex[t], 1);
            return err && err->code ? err->code : PK_ERR_IO;
        }
        for (int k = 0; k < 3; k++) ptr[3 * i + k] = p[k];
    }
    return PK_OK;
}

void pk_xcache_prefetch(pk_xcache *xc, int il, const int *ex, int n, pk_xcache_stats *st) {
    if (il < 0 || il >= xc->n_layer || n < 0) return;
    int *map = xc->map + (size_t)il * xc->n_expert;
    uint8_t *pf = xc->pf + (size_t)il * xc->slots;
    int issued = 0;
    uint64_t bytes = 0;
    pthread_mutex_lock(&xc->mu);
    populate(xc);
    for (int i = 0; i < n; i++) {
        if (ex[i] < 0 || ex[i] >= xc->n_expert || map[ex[i]] >= 0) continue;
        int v = victim(xc, il, ex, n);
        if (v < 0) break;
        assign(xc, il, v, ex[i]);
        pf[v] = 1;
        xc->pf_by[(size_t)il * xc->slots + v] = st;
        enqueue(xc, il, v, 0);
        bytes += expert_read_bytes(xc, il, ex[i]);
        issued++;
    }
    pthread_mutex_unlock(&xc->mu);
    if (st) {
        st->prefetches += (uint64_t)issued;
        st->bytes_read += bytes;
    }
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

void pk_xcache_hold(pk_xcache *xc, int hold) {
    pthread_mutex_lock(&xc->mu);
    xc->hold = hold;
    pthread_cond_broadcast(&xc->q_cv);
    pthread_mutex_unlock(&xc->mu);
}
