/* core/threads.h - a small fixed thread pool for data-parallel work.
 *
 * pk_pool_run(pool, fn, arg, n) calls fn(arg, i) for every chunk i in [0, n)
 * and returns when all calls are done. Chunks are claimed dynamically by the
 * caller and by whichever workers are running, so the caller never waits for
 * a worker that is not scheduled (a 2-vCPU VM with a competing process):
 * it only waits for chunks a worker has actually started. Idle workers spin
 * briefly, then sleep (a futex on Linux, a condition variable elsewhere:
 * core/platform.h).
 */
#ifndef PK_THREADS_H
#define PK_THREADS_H

#include <stddef.h>

typedef struct pk_pool pk_pool;
typedef void (*pk_chunk_fn)(void *arg, int chunk);

/* n_threads >= 1 (1 = run everything on the caller). NULL on failure. */
pk_pool *pk_pool_new(int n_threads);
void pk_pool_free(pk_pool *p);
int pk_pool_size(const pk_pool *p);
/* Run fn on chunks 0..n_chunks-1 (n_chunks < 2^24); not reentrant: one
 * caller at a time. */
void pk_pool_run(pk_pool *p, pk_chunk_fn fn, void *arg, int n_chunks);
/* Seconds the callers of pk_pool_run have spent waiting, after claiming
 * no more chunks, for chunks still running on workers (0 for NULL). */
double pk_pool_wait_secs(const pk_pool *p);
/* Scratch memory of the calling thread, at least n bytes, 64-byte aligned;
 * grows as needed (contents not kept), freed when the thread exits. NULL if
 * out of memory. For chunk functions, which do not know their thread. */
void *pk_thread_scratch(size_t n);

#endif
