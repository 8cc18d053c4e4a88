/* core/threads.c - the thread pool (see core/threads.h).
 *
 * Tuned for decode: a few hundred short parallel sections per token, on
 * machines that may have fewer free cores than threads.
 *
 * One 64-bit atomic word holds the job: generation (16 bits), chunk count
 * (24 bits) and next unclaimed chunk (24 bits). A thread claims a chunk with
 * a compare-and-swap that succeeds only while the word still names the same
 * job and chunks remain, so a late worker can never run a chunk of a job
 * that has ended. The caller claims chunks too; once none remain it waits
 * only for the chunks in flight (counted in `done`). fn and arg are written
 * before the job word is published and read only after a successful claim,
 * which proves the job is still running.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include "core/common.h"
#include "core/platform.h"
#include "core/threads.h"

#define SPIN_ITERS 4000 /* ~50-100 us of polling before sleeping */

struct pk_pool {
    int n;
    pthread_t *tid;
    _Atomic uint64_t job;   /* gen:16 | n_chunks:24 | next:24 */
    atomic_int done;        /* chunks finished in the current job */
    atomic_uint wake;       /* bumped when a job is published; sleepers wait
                               on it with pk_word_wait (futex on Linux) */
    atomic_int sleepers;
    atomic_int stop;
    pk_chunk_fn fn;
    void *arg;
    double wait_secs;       /* the caller's time waiting for workers' chunks
                               after it found none left to claim */
};

#define JOB(gen, n, next) (((uint64_t)(gen) << 48) | ((uint64_t)(n) << 24) | (uint64_t)(next))
#define JOB_N(w) ((int)(((w) >> 24) & 0xFFFFFF))
#define JOB_NEXT(w) ((int)((w) & 0xFFFFFF))


/* Claim and run chunks of the current job until none remain. */
static void work(pk_pool *p) {
    uint64_t w = atomic_load_explicit(&p->job, memory_order_acquire);
    while (JOB_NEXT(w) < JOB_N(w)) {
        if (!atomic_compare_exchange_weak_explicit(&p->job, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        p->fn(p->arg, JOB_NEXT(w));
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
        w = atomic_load_explicit(&p->job, memory_order_acquire);
    }
}

static void *worker(void *va) {
    pk_pool *p = va;
    for (;;) {
        unsigned seen = atomic_load_explicit(&p->wake, memory_order_acquire);
        work(p);
        int spins = 0;
        while (atomic_load_explicit(&p->wake, memory_order_acquire) == seen) {
            if (atomic_load(&p->stop)) return NULL;
            if (++spins < SPIN_ITERS) {
                /* yield now and then: if another process wants this core,
                   let it run rather than polling */
                if (spins % 64 == 0) sched_yield();
                else pk_cpu_relax();
                continue;
            }
            atomic_fetch_add(&p->sleepers, 1);
            pk_word_wait(&p->wake, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            spins = 0;
        }
    }
}

pk_pool *pk_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    pk_pool *p = pk_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    p->tid = pk_calloc((size_t)n_threads, sizeof *p->tid);
    if (!p->tid) { free(p); return NULL; }
    for (int i = 1; i < n_threads; i++)
        if (pthread_create(&p->tid[i], NULL, worker, p) != 0) {
            p->n = i; /* run with the threads we have */
            break;
        }
    return p;
}

void pk_pool_free(pk_pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->wake, 1);
    pk_word_wake_all(&p->wake);
    for (int i = 1; i < p->n; i++) pthread_join(p->tid[i], NULL);
    free(p->tid);
    free(p);
}

int pk_pool_size(const pk_pool *p) { return p ? p->n : 1; }

void pk_pool_run(pk_pool *p, pk_chunk_fn fn, void *arg, int n_chunks) {
    if (n_chunks <= 0) return;
    if (!p || p->n == 1 || n_chunks == 1) {
        for (int i = 0; i < n_chunks; i++) fn(arg, i);
        return;
    }
    uint64_t old = atomic_load_explicit(&p->job, memory_order_relaxed);
    p->fn = fn;
    p->arg = arg;
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->job, JOB((old >> 48) + 1, n_chunks, 0), memory_order_release);
    /* sequentially consistent, as the worker's sleepers increment: either
       the worker then sees the new wake value, or this load sees it asleep
       (a release store here could be ordered after the load on ARM) */
    atomic_fetch_add(&p->wake, 1);
    if (atomic_load(&p->sleepers) > 0) pk_word_wake_all(&p->wake);
    work(p);
    /* wait for chunks still in flight on workers; yield if that takes long,
       in case the worker shares our core (timed: the synchronisation cost a
       profile reports; two clock reads only when there is a wait) */
    if (atomic_load_explicit(&p->done, memory_order_acquire) >= n_chunks) return;
    const double t0 = pk_time();
    int spins = 0;
    while (atomic_load_explicit(&p->done, memory_order_acquire) < n_chunks) {
        if (++spins < SPIN_ITERS) pk_cpu_relax();
        else sched_yield();
    }
    p->wait_secs += pk_time() - t0;
}

double pk_pool_wait_secs(const pk_pool *p) { return p ? p->wait_secs : 0.0; }

/* ---- per-thread scratch ------------------------------------------------------ */

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static void scratch_key_make(void) { pthread_key_create(&scratch_key, free); }

typedef struct { size_t cap; } scratch_hdr;   /* followed (64 bytes on) by the data */

void *pk_thread_scratch(size_t n) {
    pthread_once(&scratch_once, scratch_key_make);
    scratch_hdr *h = pthread_getspecific(scratch_key);
    if (!h || h->cap < n) {
        size_t cap = n + n / 4 + 4096;
        void *m = NULL;
        if (posix_memalign(&m, 64, 64 + cap) != 0) return NULL;
        free(h);
        h = m;
        h->cap = cap;
        pthread_setspecific(scratch_key, h);
    }
    return (char *)h + 64;
}
