/* threads.c - the thread pool (see threads.h).
 *
 * Tuned for decode: hundreds of short parallel sections per token, so the
 * hand-off must be cheap. A generation counter announces work; workers spin
 * on it for a bounded time (yielding the CPU between checks) and then block
 * on a condition variable. The caller spins on a completion counter the same
 * way. Bounded spinning keeps a 2-vCPU machine with a competing process from
 * collapsing into threads that spin while the thread they wait for is
 * descheduled.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "threads.h"
#include "common.h"

#define SPIN_ITERS 20000

struct pk_pool {
    int n;
    pthread_t *tid;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    atomic_uint gen;        /* incremented for each job */
    atomic_int pending;     /* workers still running the current job */
    atomic_int stop;
    pk_task_fn fn;
    void *arg;
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

typedef struct { pk_pool *p; int ith; } worker_arg;

static void *worker(void *va) {
    worker_arg wa = *(worker_arg *)va;
    free(va);
    pk_pool *p = wa.p;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERS) { cpu_relax(); continue; }
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->work_cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        p->fn(p->arg, wa.ith, p->n);
        if (atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

pk_pool *pk_pool_new(int n_threads) {
    if (n_threads < 1) n_threads = 1;
    pk_pool *p = pk_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->tid = pk_calloc((size_t)n_threads, sizeof *p->tid);
    if (!p->tid) { free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (!wa || (wa->p = p, wa->ith = i, pthread_create(&p->tid[i], NULL, worker, wa)) != 0) {
            free(wa);
            p->n = i;  /* run with the threads we have */
            break;
        }
    }
    return p;
}

void pk_pool_free(pk_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p->tid);
    free(p);
}

int pk_pool_size(const pk_pool *p) { return p ? p->n : 1; }

void pk_pool_run(pk_pool *p, pk_task_fn fn, void *arg) {
    if (!p || p->n == 1) { fn(arg, 0, 1); return; }
    p->fn = fn;
    p->arg = arg;
    atomic_store(&p->pending, p->n - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, p->n);
    int spins = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) {
        if (++spins < SPIN_ITERS) { cpu_relax(); continue; }
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done_cv, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}
