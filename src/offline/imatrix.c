/* offline/imatrix.c - collect, save, load and look up importance matrices (contract
 * and file format in include/pocket.h).
 *
 * Entries are kept in an array sorted by tensor name (the file's order, and
 * binary search for lookups). Sums are accumulated in double and written as
 * F32, as the format wants. During collection the observer is called for
 * every product of every token, so tensors are resolved through a "seen"
 * list in first-observation order with a cursor: products come in the same
 * order every token, so the next one is nearly always at the cursor.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"
#include "engine/context.h"
#include "gguf/gguf.h"
#include "pocket.h"
#include "quant/quant.h"

typedef struct entry {
    char *name;
    int64_t ne0, n_mat;
    double *sum2;          /* ne0 * n_mat */
    double *sum;           /* ne0 * n_mat, or NULL (loaded without in_sum) */
    int64_t *counts;       /* n_mat */
    float *mean;           /* lookup result, ne0 * n_mat; valid if mean_ok */
    int mean_ok;
} entry;

typedef struct seen {
    const pk_tensor *w;
    entry *e;              /* NULL: not collected */
} seen;

struct pk_imatrix {
    entry **ent;           /* sorted by name */
    int n_ent, cap_ent;
    seen *seen;
    int n_seen, cap_seen, cursor;
    int process_output;
    char **datasets;
    int n_datasets;
    uint32_t chunk_count, chunk_size;
    int status;            /* first collection failure */
    pk_error err;
};

static void entry_free(entry *e) {
    if (!e) return;
    free(e->name);
    free(e->sum2);
    free(e->sum);
    free(e->counts);
    free(e->mean);
    free(e);
}

int pk_imatrix_new(pk_imatrix **out, pk_error *err) {
    *out = pk_calloc(1, sizeof **out);
    return *out ? PK_OK : pk_errorf(err, PK_ERR_NOMEM, "imatrix: out of memory");
}

void pk_imatrix_free(pk_imatrix *im) {
    if (!im) return;
    for (int i = 0; i < im->n_ent; i++) entry_free(im->ent[i]);
    free(im->ent);
    free(im->seen);
    for (int i = 0; i < im->n_datasets; i++) free(im->datasets[i]);
    free(im->datasets);
    free(im);
}

/* Index of name in the sorted entries, or -(insertion point) - 1. */
static int find_entry(const pk_imatrix *im, const char *name) {
    int lo = 0, hi = im->n_ent - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(im->ent[mid]->name, name);
        if (c == 0) return mid;
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return -lo - 1;
}

/* New zeroed entry inserted in name order (name must be absent); NULL on OOM. */
static entry *add_entry(pk_imatrix *im, const char *name, int64_t ne0, int64_t n_mat, int with_sum) {
    uint64_t nv;
    if (ne0 < 1 || n_mat < 1 || !pk_mul_ok((uint64_t)ne0, (uint64_t)n_mat, &nv) || nv > (1ull << 40))
        return NULL;
    if (im->n_ent == im->cap_ent) {
        int cap = im->cap_ent ? 2 * im->cap_ent : 64;
        entry **p = realloc(im->ent, (size_t)cap * sizeof *p);
        if (!p) return NULL;
        im->ent = p;
        im->cap_ent = cap;
    }
    entry *e = pk_calloc(1, sizeof *e);
    if (!e) return NULL;
    e->name = strdup(name);
    e->ne0 = ne0;
    e->n_mat = n_mat;
    e->sum2 = pk_calloc((size_t)nv, sizeof *e->sum2);
    e->sum = with_sum ? pk_calloc((size_t)nv, sizeof *e->sum) : NULL;
    e->counts = pk_calloc((size_t)n_mat, sizeof *e->counts);
    if (!e->name || !e->sum2 || (with_sum && !e->sum) || !e->counts) {
        entry_free(e);
        return NULL;
    }
    int pos = -find_entry(im, name) - 1;
    memmove(im->ent + pos + 1, im->ent + pos, (size_t)(im->n_ent - pos) * sizeof *im->ent);
    im->ent[pos] = e;
    im->n_ent++;
    return e;
}

/* ---- collection --------------------------------------------------------------- */

static void fail(pk_imatrix *im, int code, const char *fmt, const char *name) {
    if (im->status) return;
    im->status = pk_errorf(&im->err, code, fmt, name);
}

/* The entry collecting tensor w (creating it on first sight), or NULL. */
static entry *resolve(pk_imatrix *im, const pk_tensor *w) {
    if (im->cursor < im->n_seen && im->seen[im->cursor].w == w) return im->seen[im->cursor++].e;
    for (int i = 0; i < im->n_seen; i++)
        if (im->seen[i].w == w) {
            im->cursor = i + 1;
            return im->seen[i].e;
        }
    /* first sight: llama-imatrix's rule */
    const char *name = w->name ? w->name : "";
    entry *e = NULL;
    if (strncmp(name, "blk.", 4) == 0 || (im->process_output && strcmp(name, "output.weight") == 0)) {
        const int64_t ne0 = w->ne[0], n_mat = w->ne[2] > 1 ? w->ne[2] : 1;
        int i = find_entry(im, name);
        if (i >= 0) {
            e = im->ent[i];
            if (e->ne0 != ne0 || (e->n_mat != n_mat)) {
                fail(im, PK_ERR_FORMAT, "imatrix: tensor '%s': shape differs from the loaded entry", name);
                return NULL;
            }
        } else if (!(e = add_entry(im, name, ne0, n_mat, 1))) {
            fail(im, PK_ERR_NOMEM, "imatrix: out of memory for tensor '%s'", name);
            return NULL;
        }
    }
    if (im->n_seen == im->cap_seen) {
        int cap = im->cap_seen ? 2 * im->cap_seen : 64;
        seen *p = realloc(im->seen, (size_t)cap * sizeof *p);
        if (!p) {
            fail(im, PK_ERR_NOMEM, "imatrix: out of memory for tensor '%s'", name);
            return NULL;
        }
        im->seen = p;
        im->cap_seen = cap;
    }
    im->seen[im->n_seen++] = (seen){w, e};
    im->cursor = im->n_seen;
    return e;
}

static void observe(void *ud, const pk_tensor *w, int64_t row0, int64_t nrows, const float *x) {
    (void)nrows;
    pk_imatrix *im = ud;
    if (im->status) return;
    entry *e = resolve(im, w);
    if (!e) return;
    int64_t mat = 0;
    if (e->n_mat > 1) mat = (w->ne[1] > 0 ? row0 / w->ne[1] : 0) % e->n_mat;
    double *s2 = e->sum2 + mat * e->ne0, *s = e->sum ? e->sum + mat * e->ne0 : NULL;
    int finite = 1;
    for (int64_t j = 0; j < e->ne0; j++) {
        const double v = x[j];
        finite &= isfinite(x[j]) != 0;
        s2[j] += v * v;
        if (s) s[j] += v;
    }
    if (!finite) fail(im, PK_ERR_FORMAT, "imatrix: non-finite activation in the input of tensor '%s'", e->name);
    e->counts[mat]++;
    e->mean_ok = 0;
}

void pk_imatrix_attach(pk_imatrix *im, pk_context *c, int process_output) {
    im->process_output = process_output;
    im->cursor = 0;
    c->observer = observe;
    c->observer_ud = im;
}

void pk_imatrix_detach(pk_context *c) {
    c->observer = NULL;
    c->observer_ud = NULL;
}

int pk_imatrix_status(const pk_imatrix *im, pk_error *err) {
    if (im->status && err) *err = im->err;
    return im->status;
}

int pk_imatrix_add_dataset(pk_imatrix *im, const char *name, pk_error *err) {
    char **p = realloc(im->datasets, (size_t)(im->n_datasets + 1) * sizeof *p);
    if (!p) return pk_errorf(err, PK_ERR_NOMEM, "imatrix: out of memory");
    im->datasets = p;
    if (!(p[im->n_datasets] = strdup(name))) return pk_errorf(err, PK_ERR_NOMEM, "imatrix: out of memory");
    im->n_datasets++;
    return PK_OK;
}

void pk_imatrix_set_chunks(pk_imatrix *im, uint32_t chunk_count, uint32_t chunk_size) {
    im->chunk_count = chunk_count;
    im->chunk_size = chunk_size;
}

/* ---- saving ---------------------------------------------------------------------- */

static int write_f64_as_f32(gguf_writer *w, const double *v, int64_t n, float *buf, pk_error *err) {
    for (int64_t i = 0; i < n; i += 4096) {
        int64_t m = n - i < 4096 ? n - i : 4096;
        for (int64_t k = 0; k < m; k++) buf[k] = (float)v[i + k];
        int rc = gguf_writer_write(w, buf, (size_t)m * sizeof *buf, err);
        if (rc) return rc;
    }
    return PK_OK;
}

int pk_imatrix_save(const pk_imatrix *im, const char *path, pk_error *err) {
    if (im->n_ent == 0) return pk_errorf(err, PK_ERR_ARG, "%s: nothing collected, no imatrix to write", path);
    gguf_writer *w = NULL;
    float *buf = malloc(4096 * sizeof *buf);
    char *tn = NULL;
    int rc = buf ? gguf_writer_new(path, &w, err) : pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    if (rc) goto done;
    if ((rc = gguf_writer_set_str(w, "general.type", "imatrix", err)) ||
        (rc = gguf_writer_set_str_arr(w, "imatrix.datasets", (const char *const *)im->datasets,
                                      (uint64_t)im->n_datasets, err)) ||
        (rc = gguf_writer_set_u32(w, "imatrix.chunk_count", im->chunk_count, err)) ||
        (rc = gguf_writer_set_u32(w, "imatrix.chunk_size", im->chunk_size, err)))
        goto done;
    size_t maxlen = 0;
    for (int i = 0; i < im->n_ent; i++)
        if (strlen(im->ent[i]->name) > maxlen) maxlen = strlen(im->ent[i]->name);
    if (!(tn = malloc(maxlen + 16))) { rc = pk_errorf(err, PK_ERR_NOMEM, "out of memory"); goto done; }
    for (int i = 0; i < im->n_ent && !rc; i++) {
        const entry *e = im->ent[i];
        /* ggml_n_dims: trailing 1s dropped */
        const int nd = e->n_mat > 1 ? 2 : 1;
        const int64_t ne_v[4] = {e->ne0, e->n_mat, 1, 1}, ne_c[4] = {1, e->n_mat, 1, 1};
        sprintf(tn, "%s.in_sum2", e->name);
        if ((rc = gguf_writer_add_tensor(w, tn, nd, ne_v, PK_TYPE_F32, err))) break;
        sprintf(tn, "%s.counts", e->name);
        if ((rc = gguf_writer_add_tensor(w, tn, nd, ne_c, PK_TYPE_F32, err))) break;
        if (e->sum) {
            sprintf(tn, "%s.in_sum", e->name);
            rc = gguf_writer_add_tensor(w, tn, nd, ne_v, PK_TYPE_F32, err);
        }
    }
    if (rc || (rc = gguf_writer_begin(w, err))) goto done;
    for (int i = 0; i < im->n_ent && !rc; i++) {
        const entry *e = im->ent[i];
        const int64_t nv = e->ne0 * e->n_mat;
        if ((rc = write_f64_as_f32(w, e->sum2, nv, buf, err))) break;
        for (int64_t k0 = 0; k0 < e->n_mat && !rc; k0 += 4096) {
            const int64_t m = e->n_mat - k0 < 4096 ? e->n_mat - k0 : 4096;
            for (int64_t k = 0; k < m; k++) buf[k] = (float)e->counts[k0 + k];
            rc = gguf_writer_write(w, buf, (size_t)m * sizeof *buf, err);
        }
        if (!rc && e->sum) rc = write_f64_as_f32(w, e->sum, nv, buf, err);
    }
    if (!rc) rc = gguf_writer_finish(w, err);
done:
    gguf_writer_free(w);
    free(buf);
    free(tn);
    return rc;
}

/* ---- loading ----------------------------------------------------------------------- */

typedef struct group {
    const char *base;      /* tensor name with the suffix removed (points into key) */
    size_t base_len;
    const gguf_tensor *sum2, *counts, *sum;
} group;

static int has_suffix(const char *s, const char *suf, size_t *base_len) {
    size_t a = strlen(s), b = strlen(suf);
    if (a <= b || memcmp(s + a - b, suf, b) != 0) return 0;
    *base_len = a - b;
    return 1;
}

static int cmp_group(const void *a, const void *b) {
    const group *x = a, *y = b;
    size_t n = x->base_len < y->base_len ? x->base_len : y->base_len;
    int c = memcmp(x->base, y->base, n);
    return c ? c : (x->base_len > y->base_len) - (x->base_len < y->base_len);
}

static int load_entry(pk_imatrix *im, const gguf_file *f, const group *g, pk_error *err) {
    char name[512];
    if (g->base_len >= sizeof name)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: imatrix entry name too long (%zu bytes)", f->path, g->base_len);
    memcpy(name, g->base, g->base_len);
    name[g->base_len] = 0;
    if (!g->sum2 || !g->counts)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: imatrix entry '%s' has %s but no %s tensor", f->path, name,
                         g->sum2 ? "in_sum2" : g->counts ? "counts" : "in_sum",
                         g->sum2 ? "counts" : "in_sum2");
    const gguf_tensor *ts[3] = {g->sum2, g->counts, g->sum};
    for (int k = 0; k < 3; k++)
        if (ts[k] && ts[k]->type != PK_TYPE_F32)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s' has type %s, expected F32", f->path,
                             ts[k]->name, pk_type_name(ts[k]->type));
    const int64_t ne0 = g->sum2->ne[0], n_mat = g->sum2->nelements / (ne0 > 0 ? ne0 : 1);
    const int64_t nc = g->counts->nelements;
    if (ne0 < 1 || n_mat < 1)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s' is empty", f->path, g->sum2->name);
    if (nc != n_mat && nc != 1)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s' has %lld counts for %lld matrices", f->path,
                         g->counts->name, (long long)nc, (long long)n_mat);
    if (g->sum && g->sum->nelements != g->sum2->nelements)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s' has %lld values, '%s' %lld", f->path,
                         g->sum->name, (long long)g->sum->nelements, g->sum2->name,
                         (long long)g->sum2->nelements);
    if (find_entry(im, name) >= 0)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: imatrix entry '%s' appears twice", f->path, name);
    entry *e = add_entry(im, name, ne0, n_mat, g->sum != NULL);
    if (!e) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for entry '%s'", f->path, name);
    const float *cv = g->counts->data;
    for (int64_t m = 0; m < n_mat; m++) {
        float c;
        memcpy(&c, cv + (nc == 1 ? 0 : m), sizeof c);
        if (!isfinite(c) || c < 0 || c > 9e18f)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s': count %lld is %g", f->path,
                             g->counts->name, (long long)m, (double)c);
        e->counts[m] = llroundf(c);
    }
    const float *sv = g->sum2->data, *av = g->sum ? g->sum->data : NULL;
    for (int64_t i = 0; i < ne0 * n_mat; i++) {
        float v;
        memcpy(&v, sv + i, sizeof v);
        if (!isfinite(v) || v < 0)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s': value %lld is %g (not a finite sum of squares)",
                             f->path, g->sum2->name, (long long)i, (double)v);
        e->sum2[i] = v;
        if (av) {
            memcpy(&v, av + i, sizeof v);
            e->sum[i] = v;
        }
    }
    return PK_OK;
}

int pk_imatrix_load(const char *path, pk_imatrix **out, pk_error *err) {
    *out = NULL;
    gguf_file *f = NULL;
    pk_imatrix *im = NULL;
    group *gr = NULL;
    char *type = NULL;
    int rc = gguf_open(path, &f, err);
    if (rc) return rc;
    if ((rc = gguf_get_string(f, "general.type", 0, &type, err))) goto done;
    if (type && strcmp(type, "imatrix") != 0) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: general.type is '%s', not 'imatrix'", path, type);
        goto done;
    }
    if ((rc = pk_imatrix_new(&im, err))) goto done;
    /* group the tensors by entry */
    int ng = 0;
    if (!(gr = pk_calloc(f->n_tensors ? f->n_tensors : 1, sizeof *gr))) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        size_t bl;
        int kind = has_suffix(t->name, ".in_sum2", &bl) ? 0 : has_suffix(t->name, ".counts", &bl) ? 1
                 : has_suffix(t->name, ".in_sum", &bl) ? 2 : -1;
        if (kind < 0) continue;            /* other tensors are ignored, as llama.cpp does */
        gr[ng] = (group){.base = t->name, .base_len = bl, .sum2 = NULL, .counts = NULL, .sum = NULL};
        if (kind == 0) gr[ng].sum2 = t; else if (kind == 1) gr[ng].counts = t; else gr[ng].sum = t;
        ng++;
    }
    qsort(gr, (size_t)ng, sizeof *gr, cmp_group);
    int k = 0;
    for (int i = 0; i < ng; i++) {         /* merge runs of the same base name */
        if (k > 0 && cmp_group(&gr[k - 1], &gr[i]) == 0) {
            group *g = &gr[k - 1];
            const gguf_tensor **slot = gr[i].sum2 ? &g->sum2 : gr[i].counts ? &g->counts : &g->sum;
            const gguf_tensor *t = gr[i].sum2 ? gr[i].sum2 : gr[i].counts ? gr[i].counts : gr[i].sum;
            if (*slot) {
                rc = pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s' appears twice", path, t->name);
                goto done;
            }
            *slot = t;
        } else {
            gr[k++] = gr[i];
        }
    }
    if (k == 0) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: no imatrix entries (no '*.in_sum2' tensors)", path);
        goto done;
    }
    for (int i = 0; i < k; i++)
        if ((rc = load_entry(im, f, &gr[i], err))) goto done;
    const gguf_kv *kv = gguf_find_kv(f, "imatrix.datasets");
    if (kv && kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING)
        for (uint64_t i = 0; i < kv->arr_n; i++) {
            char *s = strndup(kv->arr_str[i].ptr, (size_t)kv->arr_str[i].len);
            if (!s) { rc = pk_errorf(err, PK_ERR_NOMEM, "out of memory"); goto done; }
            rc = pk_imatrix_add_dataset(im, s, err);
            free(s);
            if (rc) goto done;
        }
    int64_t cc = 0, cs = 0;
    if ((rc = gguf_get_int(f, "imatrix.chunk_count", 0, &cc, err)) ||
        (rc = gguf_get_int(f, "imatrix.chunk_size", 0, &cs, err)))
        goto done;
    if (cc < 0 || cc > UINT32_MAX || cs < 0 || cs > UINT32_MAX) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: imatrix.chunk_count %lld / chunk_size %lld out of range", path,
                       (long long)cc, (long long)cs);
        goto done;
    }
    im->chunk_count = (uint32_t)cc;
    im->chunk_size = (uint32_t)cs;
    for (int i = 0; i < im->n_ent; i++) {   /* so that lookups cannot fail later */
        int64_t n;
        if (!pk_imatrix_lookup(im, im->ent[i]->name, &n)) {
            rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
    }
done:
    free(type);
    free(gr);
    gguf_close(f);
    if (rc) pk_imatrix_free(im);
    else *out = im;
    return rc;
}

/* ---- lookup / inspection ------------------------------------------------------------ */

const float *pk_imatrix_lookup(void *imatrix, const char *tensor_name, int64_t *n) {
    pk_imatrix *im = imatrix;
    *n = 0;
    if (!im || !tensor_name) return NULL;
    int i = find_entry(im, tensor_name);
    if (i < 0) return NULL;
    entry *e = im->ent[i];
    if (!e->mean_ok) {
        if (!e->mean && !(e->mean = malloc((size_t)(e->ne0 * e->n_mat) * sizeof *e->mean))) return NULL;
        for (int64_t m = 0; m < e->n_mat; m++) {
            float *o = e->mean + m * e->ne0;
            const double *s = e->sum2 + m * e->ne0;
            const int64_t c = e->counts[m];
            for (int64_t j = 0; j < e->ne0; j++) o[j] = c > 0 ? (float)(s[j] / (double)c) : 1.0f;
        }
        e->mean_ok = 1;
    }
    *n = e->ne0 * e->n_mat;
    return e->mean;
}

int pk_imatrix_n_entries(const pk_imatrix *im) { return im->n_ent; }

int pk_imatrix_entry(const pk_imatrix *im, int i, const char **name, int64_t *ne0, int64_t *n_mat,
                     const int64_t **counts) {
    if (i < 0 || i >= im->n_ent) return PK_ERR_ARG;
    const entry *e = im->ent[i];
    if (name) *name = e->name;
    if (ne0) *ne0 = e->ne0;
    if (n_mat) *n_mat = e->n_mat;
    if (counts) *counts = e->counts;
    return PK_OK;
}

uint32_t pk_imatrix_chunk_count(const pk_imatrix *im) { return im->chunk_count; }
uint32_t pk_imatrix_chunk_size(const pk_imatrix *im) { return im->chunk_size; }
