/* gguf/write.c - write a GGUF v3 file, streaming the tensor data.
 *
 * Two phases. First the caller describes the file: metadata (copied from an
 * opened gguf_file, or set from C values; setting an existing key replaces its
 * value in place, a new key is appended) and the tensor infos (name, shape,
 * type) in data order. gguf_writer_begin then creates PATH.tmp and writes the
 * header, metadata, tensor infos and padding; the caller streams each tensor's
 * bytes with gguf_writer_write (tensor by tensor, in order, any chunking;
 * padding to the alignment is added between tensors). gguf_writer_finish
 * flushes, fsyncs and renames PATH.tmp to PATH. Until then PATH is untouched;
 * on any failure (and in gguf_writer_free without a finish) PATH.tmp is
 * removed.
 *
 * The alignment is general.alignment if set (a power-of-two integer) and at
 * least 8, else 32, as readers compute it: a smaller value (1, 2, 4) is legal
 * GGUF but could place a tensor where its type cannot be read, so that key is
 * dropped and 32 used. Output goes through a 1 MiB buffer and write(2), so
 * an I/O error (disk full, file size limit) is reported where it happens, with
 * errno's text and the byte offset.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

#define GGUF_MAGIC_BYTES "GGUF"
#define GGUF_WRITE_VERSION 3u
#define WRITER_DEFAULT_ALIGNMENT 32
#define WRITER_MAX_DIMS 4
#define WRITER_MAX_NAME 65535
#define WRITER_BUF (1u << 20)

/* A metadata entry. kv.key is owned; the value's pointers either reference
 * caller memory (copied entries: the source must live until begin) or own[]. */
typedef struct wkv {
    gguf_kv kv;
    void *own[2];
} wkv;

typedef struct wtensor {
    char *name;
    int n_dims;
    int64_t ne[4];
    int type;
    uint64_t nbytes, offset;
} wtensor;

enum { W_BUILD, W_WRITING, W_DONE, W_FAILED };

struct gguf_writer {
    char *path, *tmp;
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t alignment;
    int state;
    int fd;               /* -1 when closed */
    int created;          /* tmp exists on disk (ours to unlink) */
    uint64_t pos;         /* bytes handed to the file (buffered or written) */
    uint64_t written;     /* bytes the kernel accepted */
    uint8_t *buf;
    size_t buf_n;
    size_t cur;           /* tensor being written */
    uint64_t cur_done;    /* its bytes written so far */
};

/* ---- building ---------------------------------------------------------------- */

int gguf_writer_new(const char *path, gguf_writer **out, pk_error *err) {
    *out = NULL;
    gguf_writer *w = pk_calloc(1, sizeof *w);
    size_t n = path ? strlen(path) : 0;
    if (!path || n == 0)
        return free(w), pk_errorf(err, PK_ERR_ARG, "gguf writer: empty output path");
    if (!w || !(w->path = strdup(path)) || !(w->tmp = malloc(n + 5))) {
        if (w) { free(w->path); free(w); }
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(w->tmp, path, n);
    memcpy(w->tmp + n, ".tmp", 5);
    w->fd = -1;
    w->state = W_BUILD;
    *out = w;
    return PK_OK;
}

const char *gguf_writer_tmp_path(const gguf_writer *w) { return w->tmp; }

static void kv_free_value(wkv *e) {
    free(e->own[0]);
    free(e->own[1]);
    e->own[0] = e->own[1] = NULL;
}

/* The entry for key: the existing one (its value freed), or a new one at the
 * end. NULL when out of memory. */
static wkv *kv_slot(gguf_writer *w, const char *key, pk_error *err, int *rc) {
    *rc = PK_OK;
    if (w->state != W_BUILD) {
        *rc = pk_errorf(err, PK_ERR_ARG, "%s: metadata changed after writing started", w->path);
        return NULL;
    }
    size_t len = key ? strlen(key) : 0;
    if (len == 0 || len > WRITER_MAX_NAME) {
        *rc = pk_errorf(err, PK_ERR_ARG, "%s: invalid metadata key (length %zu)", w->path, len);
        return NULL;
    }
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].kv.key, key) == 0) {
            wkv *e = &w->kv[i];
            char *k = e->kv.key;
            kv_free_value(e);
            memset(&e->kv, 0, sizeof e->kv);
            e->kv.key = k;
            return e;
        }
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *nk = realloc(w->kv, cap * sizeof *nk);   /* cap bounded by memory */
        if (!nk) goto nomem;
        w->kv = nk;
        w->cap_kv = cap;
    }
    wkv *e = &w->kv[w->n_kv];
    memset(e, 0, sizeof *e);
    if (!(e->kv.key = strdup(key))) goto nomem;
    w->n_kv++;
    return e;
nomem:
    *rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for metadata key '%s'", w->path, key);
    return NULL;
}

int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *src, pk_error *err) {
    int rc;
    int bad = src->type < 0 || src->type >= GGUF_VTYPE_COUNT ||
              (src->type == GGUF_ARRAY && (src->arr_type < 0 || src->arr_type >= GGUF_VTYPE_COUNT ||
                                           src->arr_type == GGUF_ARRAY));
    if (bad)
        return pk_errorf(err, PK_ERR_ARG, "%s: key '%s': cannot write value type %d", w->path,
                         src->key, src->type);
    wkv *e = kv_slot(w, src->key, err, &rc);
    if (!e) return rc;
    char *k = e->kv.key;
    e->kv = *src;
    e->kv.key = k;
    return PK_OK;
}

int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v, pk_error *err) {
    int rc;
    wkv *e = kv_slot(w, key, err, &rc);
    if (!e) return rc;
    e->kv.type = GGUF_UINT32;
    e->kv.i64 = v;
    e->kv.u64 = v;
    e->kv.f64 = v;
    return PK_OK;
}

int gguf_writer_set_bool(gguf_writer *w, const char *key, int v, pk_error *err) {
    int rc;
    wkv *e = kv_slot(w, key, err, &rc);
    if (!e) return rc;
    e->kv.type = GGUF_BOOL;
    e->kv.i64 = v != 0;
    e->kv.u64 = v != 0;
    e->kv.f64 = v != 0;
    return PK_OK;
}

int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v, pk_error *err) {
    int rc;
    char *copy = strdup(v);
    if (!copy) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for key '%s'", w->path, key);
    wkv *e = kv_slot(w, key, err, &rc);
    if (!e) return free(copy), rc;
    e->kv.type = GGUF_STRING;
    e->kv.str.ptr = copy;
    e->kv.str.len = strlen(copy);
    e->own[0] = copy;
    return PK_OK;
}

int gguf_writer_set_str_arr(gguf_writer *w, const char *key, const char *const *v, uint64_t n,
                            pk_error *err) {
    int rc;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        if (!pk_add_ok(total, strlen(v[i]), &total))
            return pk_errorf(err, PK_ERR_ARG, "%s: key '%s': array too large", w->path, key);
    gguf_str *s = pk_calloc(n ? n : 1, sizeof *s);
    char *chars = total + 1 <= SIZE_MAX ? malloc((size_t)total + 1) : NULL;
    if (!s || !chars) {
        free(s);
        free(chars);
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for key '%s'", w->path, key);
    }
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        size_t len = strlen(v[i]);
        memcpy(chars + off, v[i], len);
        s[i].ptr = chars + off;
        s[i].len = len;
        off += len;
    }
    wkv *e = kv_slot(w, key, err, &rc);
    if (!e) {
        free(s);
        free(chars);
        return rc;
    }
    e->kv.type = GGUF_ARRAY;
    e->kv.arr_type = GGUF_STRING;
    e->kv.arr_n = n;
    e->kv.arr_str = s;
    e->own[0] = s;
    e->own[1] = chars;
    return PK_OK;
}

int gguf_writer_set_u32_arr(gguf_writer *w, const char *key, const uint32_t *v, uint64_t n, pk_error *err) {
    int rc;
    if (n > SIZE_MAX / 4) return pk_errorf(err, PK_ERR_ARG, "%s: key '%s': array too large", w->path, key);
    uint8_t *b = malloc(n ? (size_t)n * 4 : 1);
    if (!b) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for key '%s'", w->path, key);
    for (uint64_t i = 0; i < n; i++)   /* little-endian, as put_kv writes fixed-size elements */
        for (int k = 0; k < 4; k++) b[4 * i + (uint64_t)k] = (uint8_t)(v[i] >> (8 * k));
    wkv *e = kv_slot(w, key, err, &rc);
    if (!e) return free(b), rc;
    e->kv.type = GGUF_ARRAY;
    e->kv.arr_type = GGUF_UINT32;
    e->kv.arr_n = n;
    e->kv.arr_data = b;
    e->own[0] = b;
    return PK_OK;
}

int gguf_writer_remove_kv(gguf_writer *w, const char *key) {
    if (w->state != W_BUILD) return 0;
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].kv.key, key) == 0) {
            kv_free_value(&w->kv[i]);
            free(w->kv[i].kv.key);
            memmove(&w->kv[i], &w->kv[i + 1], (w->n_kv - i - 1) * sizeof *w->kv);
            w->n_kv--;
            return 1;
        }
    return 0;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, int n_dims, const int64_t ne[4],
                           int type, pk_error *err) {
    if (w->state != W_BUILD)
        return pk_errorf(err, PK_ERR_ARG, "%s: tensor added after writing started", w->path);
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > WRITER_MAX_NAME)
        return pk_errorf(err, PK_ERR_ARG, "%s: invalid tensor name (length %zu)", w->path, len);
    if (n_dims < 1 || n_dims > WRITER_MAX_DIMS)
        return pk_errorf(err, PK_ERR_ARG, "%s: tensor '%s': n_dims %d is not in 1..4", w->path,
                         name, n_dims);
    const pk_type_traits *tt = pk_type_get(type);
    if (!tt)
        return pk_errorf(err, PK_ERR_ARG, "%s: tensor '%s': unknown type %d", w->path, name, type);
    uint64_t rows = 1;
    for (int d = 0; d < WRITER_MAX_DIMS; d++) {
        int64_t n = d < n_dims ? ne[d] : 1;
        if (n < 0 || (d > 0 && !pk_mul_ok(rows, (uint64_t)n, &rows)))
            return pk_errorf(err, PK_ERR_ARG, "%s: tensor '%s': bad dimension %d = %lld", w->path,
                             name, d, (long long)n);
    }
    if (ne[0] % tt->blck)
        return pk_errorf(err, PK_ERR_ARG,
                         "%s: tensor '%s': row length %lld is not a multiple of the %s block size %d",
                         w->path, name, (long long)ne[0], tt->name, tt->blck);
    uint64_t nbytes;
    if (!pk_mul_ok((uint64_t)(ne[0] / tt->blck), tt->type_size, &nbytes) ||
        !pk_mul_ok(nbytes, rows, &nbytes) || nbytes > (uint64_t)INT64_MAX)
        return pk_errorf(err, PK_ERR_ARG, "%s: tensor '%s': byte size overflows", w->path, name);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return pk_errorf(err, PK_ERR_ARG, "%s: duplicate tensor '%s'", w->path, name);
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *nt = realloc(w->t, cap * sizeof *nt);
        if (!nt) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", w->path);
        w->t = nt;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->n_t];
    memset(t, 0, sizeof *t);
    if (!(t->name = strdup(name))) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", w->path);
    t->n_dims = n_dims;
    for (int d = 0; d < WRITER_MAX_DIMS; d++) t->ne[d] = d < n_dims ? ne[d] : 1;
    t->type = type;
    t->nbytes = nbytes;
    w->n_t++;
    return PK_OK;
}

/* ---- output -------------------------------------------------------------------- */

static void discard_tmp(gguf_writer *w) {
    if (w->fd >= 0) { close(w->fd); w->fd = -1; }
    if (w->created) { unlink(w->tmp); w->created = 0; }
}

static int io_fail(gguf_writer *w, pk_error *err, int e, const char *what) {
    int rc = pk_errorf(err, PK_ERR_IO, "%s: %s at byte %llu: %s", w->tmp, what,
                       (unsigned long long)w->written, strerror(e));
    discard_tmp(w);
    w->state = W_FAILED;
    return rc;
}

static int write_all(gguf_writer *w, const uint8_t *p, size_t n, pk_error *err) {
    while (n > 0) {
        ssize_t k = write(w->fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return io_fail(w, err, errno, "write failed");
        }
        if (k == 0) return io_fail(w, err, EIO, "write made no progress");
        p += k;
        n -= (size_t)k;
        w->written += (uint64_t)k;
    }
    return PK_OK;
}

static int flush_buf(gguf_writer *w, pk_error *err) {
    int rc = write_all(w, w->buf, w->buf_n, err);
    w->buf_n = 0;
    return rc;
}

static int put(gguf_writer *w, const void *data, size_t n, pk_error *err) {
    const uint8_t *p = data;
    int rc;
    if (w->buf_n + n > WRITER_BUF) {
        if ((rc = flush_buf(w, err))) return rc;
        if (n >= WRITER_BUF) {               /* large: straight through */
            if ((rc = write_all(w, p, n, err))) return rc;
            w->pos += n;
            return PK_OK;
        }
    }
    memcpy(w->buf + w->buf_n, p, n);
    w->buf_n += n;
    w->pos += n;
    return PK_OK;
}

static int put_zeros(gguf_writer *w, uint64_t n, pk_error *err) {
    static const uint8_t zeros[256];
    while (n > 0) {
        size_t k = n > sizeof zeros ? sizeof zeros : (size_t)n;
        int rc = put(w, zeros, k, err);
        if (rc) return rc;
        n -= k;
    }
    return PK_OK;
}

static int put_u32(gguf_writer *w, uint32_t v, pk_error *err) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(w, b, 4, err);
}

static int put_u64(gguf_writer *w, uint64_t v, pk_error *err) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return put(w, b, 8, err);
}

static int put_str(gguf_writer *w, const char *p, uint64_t len, pk_error *err) {
    int rc = put_u64(w, len, err);
    return rc ? rc : put(w, p, (size_t)len, err);
}

static size_t scalar_size(int t) {
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* One scalar from the kv's numeric fields, little-endian. */
static int put_scalar(gguf_writer *w, const gguf_kv *kv, pk_error *err) {
    uint8_t b[8];
    uint64_t u = kv->type == GGUF_UINT64 ? kv->u64 : (uint64_t)kv->i64;
    if (kv->type == GGUF_FLOAT32) {
        float f = (float)kv->f64;
        uint32_t x;
        memcpy(&x, &f, 4);
        u = x;
    } else if (kv->type == GGUF_FLOAT64) {
        memcpy(&u, &kv->f64, 8);
    }
    size_t n = scalar_size(kv->type);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(u >> (8 * i));
    return put(w, b, n, err);
}

static int put_kv(gguf_writer *w, const gguf_kv *kv, pk_error *err) {
    int rc;
    if ((rc = put_str(w, kv->key, strlen(kv->key), err))) return rc;
    if ((rc = put_u32(w, (uint32_t)kv->type, err))) return rc;
    if (kv->type == GGUF_STRING) return put_str(w, kv->str.ptr, kv->str.len, err);
    if (kv->type != GGUF_ARRAY) return put_scalar(w, kv, err);
    if ((rc = put_u32(w, (uint32_t)kv->arr_type, err))) return rc;
    if ((rc = put_u64(w, kv->arr_n, err))) return rc;
    if (kv->arr_type == GGUF_STRING) {
        for (uint64_t i = 0; i < kv->arr_n; i++)
            if ((rc = put_str(w, kv->arr_str[i].ptr, kv->arr_str[i].len, err))) return rc;
        return PK_OK;
    }
    /* fixed-size elements are already little-endian (as stored in GGUF) */
    const uint8_t *p = kv->arr_data;
    uint64_t left = kv->arr_n * scalar_size(kv->arr_type);   /* validated by the reader */
    while (left > 0) {
        size_t k = left > (1u << 30) ? (1u << 30) : (size_t)left;
        if ((rc = put(w, p, k, err))) return rc;
        p += k;
        left -= k;
    }
    return PK_OK;
}

static uint64_t pad_to(uint64_t n, uint64_t a) { return (a - n % a) % a; }

int gguf_writer_begin(gguf_writer *w, pk_error *err) {
    if (w->state != W_BUILD)
        return pk_errorf(err, PK_ERR_ARG, "%s: gguf_writer_begin called twice", w->path);
    w->alignment = WRITER_DEFAULT_ALIGNMENT;
    for (size_t i = 0; i < w->n_kv; i++) {
        const gguf_kv *kv = &w->kv[i].kv;
        if (strcmp(kv->key, "general.alignment") != 0) continue;
        int is_int = kv->type == GGUF_UINT8 || kv->type == GGUF_INT8 || kv->type == GGUF_UINT16 ||
                     kv->type == GGUF_INT16 || kv->type == GGUF_UINT32 || kv->type == GGUF_INT32 ||
                     kv->type == GGUF_UINT64 || kv->type == GGUF_INT64;
        if (!is_int || kv->i64 <= 0 || kv->i64 > (1 << 30) || (kv->i64 & (kv->i64 - 1)))
            return pk_errorf(err, PK_ERR_ARG,
                             "%s: general.alignment must be a power of two integer, got %s %lld",
                             w->path, gguf_vtype_name(kv->type), (long long)kv->i64);
        w->alignment = (uint64_t)kv->i64;
    }
    /* A smaller alignment is legal GGUF but could start a tensor at an
       address its type cannot be read from (gguf/gguf.c refuses that): drop the
       key and use the default. */
    if (w->alignment < 8) {
        gguf_writer_remove_kv(w, "general.alignment");
        w->alignment = WRITER_DEFAULT_ALIGNMENT;
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        w->t[i].offset = off;
        if (!pk_add_ok(off, w->t[i].nbytes, &off) ||
            !pk_add_ok(off, pad_to(off, w->alignment), &off))
            return pk_errorf(err, PK_ERR_ARG, "%s: total tensor data size overflows", w->path);
    }
    if (!(w->buf = malloc(WRITER_BUF)))
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory for the write buffer", w->path);
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        w->state = W_FAILED;
        return pk_errorf(err, PK_ERR_IO, "%s: cannot create: %s", w->tmp, strerror(e));
    }
    w->created = 1;
    w->state = W_WRITING;
    int rc;
    if ((rc = put(w, GGUF_MAGIC_BYTES, 4, err)) || (rc = put_u32(w, GGUF_WRITE_VERSION, err)) ||
        (rc = put_u64(w, w->n_t, err)) || (rc = put_u64(w, w->n_kv, err)))
        return rc;
    for (size_t i = 0; i < w->n_kv; i++)
        if ((rc = put_kv(w, &w->kv[i].kv, err))) return rc;
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        if ((rc = put_str(w, t->name, strlen(t->name), err)) ||
            (rc = put_u32(w, (uint32_t)t->n_dims, err)))
            return rc;
        for (int d = 0; d < t->n_dims; d++)
            if ((rc = put_u64(w, (uint64_t)t->ne[d], err))) return rc;
        if ((rc = put_u32(w, (uint32_t)t->type, err)) || (rc = put_u64(w, t->offset, err)))
            return rc;
    }
    if ((rc = put_zeros(w, pad_to(w->pos, w->alignment), err))) return rc;
    w->cur = 0;
    w->cur_done = 0;
    return PK_OK;
}

/* Skip tensors with no bytes (they need no data and no padding). */
static void skip_empty(gguf_writer *w) {
    while (w->cur < w->n_t && w->t[w->cur].nbytes == 0) w->cur++;
}

int gguf_writer_write(gguf_writer *w, const void *data, size_t n, pk_error *err) {
    if (w->state != W_WRITING)
        return pk_errorf(err, PK_ERR_ARG, "%s: tensor data written %s", w->path,
                         w->state == W_BUILD ? "before gguf_writer_begin" : "after an error or finish");
    const uint8_t *p = data;
    while (n > 0) {
        skip_empty(w);
        if (w->cur >= w->n_t) {
            w->state = W_FAILED;
            discard_tmp(w);
            return pk_errorf(err, PK_ERR_ARG, "%s: %zu bytes of tensor data beyond the last tensor",
                             w->path, n);
        }
        wtensor *t = &w->t[w->cur];
        uint64_t room = t->nbytes - w->cur_done;
        size_t k = n < room ? n : (size_t)room;
        int rc = put(w, p, k, err);
        if (rc) return rc;
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) {
            if ((rc = put_zeros(w, pad_to(t->nbytes, w->alignment), err))) return rc;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return PK_OK;
}

int gguf_writer_finish(gguf_writer *w, pk_error *err) {
    if (w->state != W_WRITING)
        return pk_errorf(err, PK_ERR_ARG, "%s: gguf_writer_finish without a successful begin",
                         w->path);
    skip_empty(w);
    if (w->cur < w->n_t) {
        int rc = pk_errorf(err, PK_ERR_ARG, "%s: tensor '%s' has %llu of its %llu bytes of data",
                           w->path, w->t[w->cur].name, (unsigned long long)w->cur_done,
                           (unsigned long long)w->t[w->cur].nbytes);
        discard_tmp(w);
        w->state = W_FAILED;
        return rc;
    }
    int rc = flush_buf(w, err);
    if (rc) return rc;
    if (fsync(w->fd) != 0 && errno != EINVAL && errno != EROFS)
        return io_fail(w, err, errno, "fsync failed");
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) != 0 && errno != EINTR)
        return io_fail(w, err, errno, "close failed");
    if (rename(w->tmp, w->path) != 0) {
        int e = errno;
        rc = pk_errorf(err, PK_ERR_IO, "%s: cannot rename %s to it: %s", w->path, w->tmp,
                       strerror(e));
        discard_tmp(w);
        w->state = W_FAILED;
        return rc;
    }
    w->created = 0;
    w->state = W_DONE;
    return PK_OK;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    discard_tmp(w);
    for (size_t i = 0; i < w->n_kv; i++) {
        kv_free_value(&w->kv[i]);
        free(w->kv[i].kv.key);
    }
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w->buf);
    free(w->path);
    free(w->tmp);
    free(w);
}
