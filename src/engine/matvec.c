/* engine/matvec.c - every weight read of the forward pass goes through here, so
 * that the bytes read per token are counted in one place (pocket bench
 * reports them against the machine's memory bandwidth).
 *
 * A call runs a list of products "rows of W times a few input rows" as one
 * parallel section: the weight rows of all jobs are concatenated and cut into
 * chunks claimed by the threads, so small matrices (one expert's slice) cost
 * no extra synchronisation. A chunk of weight rows is applied to every input
 * row of its job while it sits in cache: with a batch of B tokens each weight
 * byte is read from memory once, not B times. Activations are converted to
 * each weight type's dot-product format once per slot, not once per matrix.
 */
#include <stdlib.h>
#include <string.h>
#include "engine/context.h"

void pk_act_set(pk_context *c, int s, const float *x, int64_t n_rows, int64_t row_len, int64_t stride) {
    PK_ASSERT(s >= 0 && s < PK_N_SLOTS);
    PK_ASSERT(x && n_rows >= 1 && n_rows <= c->n_batch * (int64_t)(c->m->hp.moe ? c->m->hp.n_expert_used : 1));
    PK_ASSERT(row_len >= 1 && (stride == 0 || stride >= row_len));
    pk_slot *sl = &c->slot[s];
    sl->src = x;
    sl->n_rows = n_rows;
    sl->row_len = row_len;
    sl->stride = stride ? stride : row_len;
    sl->ready = 0;
}

/* The slot's rows in activation type t; *row_bytes receives their stride. */
static const uint8_t *act_get(pk_context *c, int s, int t, size_t *row_bytes) {
    pk_slot *sl = &c->slot[s];
    if (t == PK_TYPE_F32) {
        *row_bytes = (size_t)sl->stride * sizeof(float);
        return (const uint8_t *)sl->src;
    }
    *row_bytes = pk_row_size(t, sl->row_len);
    if (!(sl->ready >> t & 1)) {
        /* buffers exist for every type the model's weights want, sized for
           the slot's capacity (engine/context.c) */
        PK_ASSERT(t > 0 && t < PK_TYPE_COUNT && sl->buf[t] && *row_bytes > 0);
        PK_ASSERT(sl->n_rows * sl->row_len <= sl->cap);
        for (int64_t r = 0; r < sl->n_rows; r++)
            pk_kern_quantize(c->kern, t, sl->src + r * sl->stride, (uint8_t *)sl->buf[t] + r * *row_bytes,
                             sl->row_len);
        sl->ready |= 1ull << t;
    }
    return sl->buf[t];
}

typedef struct mv_task {
    const pk_mv *jobs;
    const void **xptr;            /* input row pointers of all jobs */
    const int *xptr_off;          /* [job] first of its pointers */
    int n_jobs;
    const void *const *data;      /* [job] rows elsewhere (NULL: all mapped) */
    int64_t total_rows, chunk_rows;
    const pk_kernels *kern;
} mv_task;

/* Chunk i covers weight rows [i * chunk_rows, ...) of the jobs' concatenation. */
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
            const uint8_t *rows = t->data && t->data[j]
                                      ? (const uint8_t *)t->data[j] + (size_t)r0 * w->row_bytes
                                      : (const uint8_t *)w->data + (size_t)(mv->row0 + r0) * w->row_bytes;
            const void *const *xp = t->xptr + t->xptr_off[j];
            if (mv->n_tok > 1 && t->kern->gemm[w->type])
                pk_kern_gemm(t->kern, w->type, w->ne[0], r1 - r0, mv->n_tok, mv->y + r0, mv->y_stride, rows,
                             w->row_bytes, xp);
            else
                for (int k = 0; k < mv->n_tok; k++)
                    pk_kern_gemv(t->kern, w->type, w->ne[0], r1 - r0, mv->y + k * mv->y_stride + r0, rows,
                                 w->row_bytes, xp[k]);
        }
        base += mv->nrows;
    }
}

void pk_matvec(pk_context *c, const pk_mv *jobs, int n_jobs) { pk_matvec_from(c, jobs, n_jobs, NULL); }

void pk_matvec_from(pk_context *c, const pk_mv *jobs, int n_jobs, const void *const *data) {
    /* the scratch lists are sized in engine/context.c: at most n_jobs_cap jobs with
       at most xptr_cap input rows in all */
    PK_ASSERT(n_jobs >= 1 && n_jobs <= c->n_jobs_cap);
    mv_task t = {.jobs = jobs, .xptr = c->xptr, .xptr_off = c->xptr_off, .n_jobs = n_jobs, .data = data,
                 .total_rows = 0, .chunk_rows = 0, .kern = c->kern};
    uint64_t work = 0, bytes = 0;
    int np = 0;
    for (int j = 0; j < n_jobs; j++) {
        const pk_tensor *w = jobs[j].w;
        const pk_slot *in = &c->slot[jobs[j].slot];
        /* a bound weight, whole rows of it, inputs as long as its rows */
        PK_ASSERT(w && w->data && jobs[j].slot >= 0 && jobs[j].slot < PK_N_SLOTS);
        PK_ASSERT(jobs[j].row0 >= 0 && jobs[j].nrows >= 1 && jobs[j].row0 + jobs[j].nrows <= w->ne[1] * w->ne[2]);
        PK_ASSERT(in->row_len == w->ne[0] && jobs[j].n_tok >= 1 && np + jobs[j].n_tok <= c->xptr_cap);
        PK_ASSERT(jobs[j].y_stride >= jobs[j].nrows || jobs[j].n_tok == 1);
        size_t stride;
        const uint8_t *x = act_get(c, jobs[j].slot, pk_type_get(w->type)->vec_dot_type, &stride);
        c->xptr_off[j] = np;
        for (int k = 0; k < jobs[j].n_tok; k++) {
            PK_ASSERT((jobs[j].idx ? jobs[j].idx[k] : k) >= 0 && (jobs[j].idx ? jobs[j].idx[k] : k) < in->n_rows);
            c->xptr[np++] = x + (size_t)(jobs[j].idx ? jobs[j].idx[k] : k) * stride;
        }
        t.total_rows += jobs[j].nrows;
        bytes += (uint64_t)jobs[j].nrows * w->row_bytes;
        work += (uint64_t)jobs[j].nrows * w->row_bytes * (uint64_t)jobs[j].n_tok;
        if (c->observer) {
            const pk_slot *sl = &c->slot[jobs[j].slot];
            for (int k = 0; k < jobs[j].n_tok; k++)
                c->observer(c->observer_ud, w, jobs[j].row0, jobs[j].nrows,
                            sl->src + (jobs[j].idx ? jobs[j].idx[k] : k) * sl->stride);
        }
    }
    c->weight_bytes += bytes;
    /* About 8 chunks per thread for balance, but at least ~32 KiB of
       weight-times-tokens work per chunk: a hand-off costs microseconds, so
       small products run on the caller alone. Rows in multiples of 16 keep the
       multi-row kernels on full groups (AVX-512's take 16 rows, AVX2's 8: a
       chunk of 8 x odd rows left half of a 16-row group empty at each chunk
       edge, 3.4% of qwen3-next's expert gate/up products in its prompts). */
    int64_t chunks = 8 * (int64_t)pk_pool_size(c->pool);
    if ((int64_t)(work >> 15) < chunks) chunks = (int64_t)(work >> 15);
    /* Multi-token products: the gemm kernels read a chunk's weight rows once
       per tile of tokens, so chunks of at most ~256 KiB of weights keep them
       in L2 from one tile to the next (an expert's whole matrix may not fit) */
    if (work > bytes && chunks < (int64_t)(bytes >> 18)) chunks = (int64_t)(bytes >> 18);
    if (chunks > t.total_rows / 16) chunks = t.total_rows / 16;
    if (chunks < 1) chunks = 1;
    int64_t cr = (t.total_rows + chunks - 1) / chunks;
    t.chunk_rows = (cr + 15) / 16 * 16;
    pk_pool_run(c->pool, mv_run, &t, (int)((t.total_rows + t.chunk_rows - 1) / t.chunk_rows));
}

void pk_get_row(pk_context *c, const pk_tensor *w, int64_t r, float *out) {
    PK_ASSERT(w && w->data && r >= 0 && r < w->ne[1] * w->ne[2]);
    pk_type_get(w->type)->to_float((const uint8_t *)w->data + (size_t)r * w->row_bytes, out, w->ne[0]);
    c->weight_bytes += w->row_bytes;
}
