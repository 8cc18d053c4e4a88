/* threads.h - a small fixed thread pool for data-parallel work.
 *
 * pk_pool_run(pool, fn, arg) calls fn(arg, ith, nth) once on each of the nth
 * threads (the caller is thread 0) and returns when all are done. Workers
 * wait for work by spinning briefly and then sleeping on a condition
 * variable, so an idle or oversubscribed machine does not burn a core.
 */
#ifndef PK_THREADS_H
#define PK_THREADS_H

typedef struct pk_pool pk_pool;
typedef void (*pk_task_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (1 = run everything on the caller). NULL on failure. */
pk_pool *pk_pool_new(int n_threads);
void pk_pool_free(pk_pool *p);
int pk_pool_size(const pk_pool *p);
/* Run fn on every thread; not reentrant (call from one thread at a time). */
void pk_pool_run(pk_pool *p, pk_task_fn fn, void *arg);

/* Split [0, n) into nth near-equal parts; part ith is [*b, *e). */
static inline void pk_split(long n, int ith, int nth, long *b, long *e) {
    long q = n / nth, r = n % nth;
    *b = ith * q + (ith < r ? ith : r);
    *e = *b + q + (ith < r);
}

#endif
