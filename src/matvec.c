/* matvec.c - every weight read of the forward pass goes through here, so
 * that the bytes read per token are counted in one place (pocket bench
 * reports them against the machine's memory bandwidth).
 *
 * A call runs a list of matrix-vector products as one parallel section: the
 * rows of all jobs are concatenated and split evenly across the threads, so
 * small matrices (one expert's slice) cost no extra synchronisation.
 * Activations are converted to each weight type's dot-product format once per
 * input vector (the "slot"), not once per matrix.
 */
#include <stdlib.h>
#include <string.h>
#include "context.h"

void pk_act_set(pk_context *c, int s, const float *x) {
    c->slot_src[s] = x;
    c->slot_ready[s] = 0;
}

/* x of slot s in activation type t (t = vec_dot_type of some weight). */
static const void *act_get(pk_context *c, int s, int t, int64_t n) {
    if (t == PK_TYPE_F32) return c->slot_src[s];
    void **buf = &c->slot[(size_t)s * PK_TYPE_COUNT + t];
    if (!(c->slot_ready[s] >> t & 1)) {
        /* allocated by pk_context_new for every type the model's weights want */
        c->kern->quantize[t](c->slot_src[s], *buf, n);
        c->slot_ready[s] |= 1ull << t;
    }
    return *buf;
}

typedef struct mv_task {
    const pk_mv *jobs;
    const void **x;
    int n_jobs;
    int64_t total_rows;
    int64_t chunk_rows;
    const pk_kernels *kern;
} mv_task;

/* Chunk i covers rows [i * chunk_rows, ...) of the jobs' concatenated rows. */
static void mv_run(void *arg, int chunk) {
    const mv_task *t = arg;
    int64_t lo = chunk * t->chunk_rows;
    int64_t hi = lo + t->chunk_rows < t->total_rows ? lo + t->chunk_rows : t->total_rows;
    int64_t base = 0;
    for (int j = 0; j < t->n_jobs && base < hi; j++) {
        const pk_mv *mv = &t->jobs[j];
        int64_t r0 = lo > base ? lo - base : 0;
        int64_t r1 = hi - base < mv->nrows ? hi - base : mv->nrows;
        if (r0 < r1) {
            const pk_tensor *w = mv->w;
            const uint8_t *rows = (const uint8_t *)w->data + (size_t)(mv->row0 + r0) * w->row_bytes;
            t->kern->gemv[w->type](w->ne[0], r1 - r0, mv->y + r0, rows, w->row_bytes, t->x[j]);
        }
        base += mv->nrows;
    }
}

void pk_matvec(pk_context *c, const pk_mv *jobs, int n_jobs) {
    const void *x[PK_MAX_JOBS];
    mv_task t = {jobs, x, n_jobs, 0, 0, c->kern};
    for (int j = 0; j < n_jobs; j++) {
        const pk_tensor *w = jobs[j].w;
        x[j] = act_get(c, jobs[j].slot, pk_type_get(w->type)->vec_dot_type, w->ne[0]);
        t.total_rows += jobs[j].nrows;
        if (c->observer) c->observer(c->observer_ud, w, jobs[j].row0, jobs[j].nrows, c->slot_src[jobs[j].slot]);
        c->weight_bytes += (uint64_t)jobs[j].nrows * w->row_bytes;
    }
    /* About 8 chunks per thread for balance, but at least ~32 KiB of weights
       per chunk: a hand-off costs microseconds, so small products run on the
       caller alone. Rows go in multiples of 8 for the multi-row kernels. */
    uint64_t bytes = 0;
    for (int j = 0; j < n_jobs; j++) bytes += (uint64_t)jobs[j].nrows * jobs[j].w->row_bytes;
    int64_t chunks = 8 * (int64_t)pk_pool_size(c->pool);
    if ((int64_t)(bytes >> 15) < chunks) chunks = (int64_t)(bytes >> 15);
    if (chunks < 1) chunks = 1;
    int64_t cr = (t.total_rows + chunks - 1) / chunks;
    t.chunk_rows = (cr + 7) / 8 * 8;
    pk_pool_run(c->pool, mv_run, &t, (int)((t.total_rows + t.chunk_rows - 1) / t.chunk_rows));
}

void pk_get_row(pk_context *c, const pk_tensor *w, int64_t r, float *out) {
    pk_type_get(w->type)->to_float((const uint8_t *)w->data + (size_t)r * w->row_bytes, out, w->ne[0]);
    c->weight_bytes += w->row_bytes;
}
