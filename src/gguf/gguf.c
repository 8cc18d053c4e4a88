/* gguf/gguf.c - mmap, parse and validate a GGUF model file.
 *
 * Layout (little-endian): magic "GGUF", u32 version (2 or 3), u64 tensor
 * count, u64 metadata count, then the metadata key/values, then the tensor
 * infos (name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset), padding to
 * general.alignment (default 32), then the tensor data.
 *
 * The file is untrusted input. Parsing goes through a cursor that refuses any
 * read past the end; every count is bounded by the bytes left, every product
 * and sum is overflow-checked, and tensors must lie inside the data section.
 * The first violation stops parsing with a message naming the file, the field
 * (key or tensor name where known) and the offending value.
 *
 * Alignment: general.alignment may be any power of two (1 included, as in
 * llama.cpp's reader), but every tensor must start at an address that is a
 * multiple of its type's alignment (pk_type_align: 4 for F32, 2 for F16,
 * BF16 and the fp16-scaled blocks). The mapping is page-aligned, so that is
 * the file offset; all later typed reads of tensor data are then aligned.
 * Metadata values are never read in place through typed pointers: scalars
 * and array elements are memcpy'd (decode_scalar).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "core/mapguard.h"
#include "core/platform.h"
#include "quant/quant.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as little-endian u32 */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4
#define GGUF_MAX_KEY_LEN 65535
#define GGUF_MAX_NAME_LEN 65535

/* ---- cursor over the untrusted bytes ------------------------------------ */

typedef struct cursor {
    const uint8_t *buf;
    uint64_t size, pos;
    const char *name;  /* file name for messages */
    pk_error *err;
} cursor;

static uint64_t cur_left(const cursor *c) { return c->size - c->pos; }

static int cur_read(cursor *c, void *dst, uint64_t n, const char *what) {
    if (n > cur_left(c))
        return pk_errorf(c->err, PK_ERR_FORMAT,
                         "%s: truncated file: %s needs %llu bytes at offset %llu, file has %llu",
                         c->name, what, (unsigned long long)n,
                         (unsigned long long)c->pos, (unsigned long long)c->size);
    memcpy(dst, c->buf + c->pos, n);
    c->pos += n;
    return PK_OK;
}

static int cur_u32(cursor *c, uint32_t *v, const char *what) { return cur_read(c, v, 4, what); }
static int cur_u64(cursor *c, uint64_t *v, const char *what) { return cur_read(c, v, 8, what); }

static int cur_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len = 0;
    int rc = cur_u64(c, &len, what);
    if (rc) return rc;
    if (len > cur_left(c))
        return pk_errorf(c->err, PK_ERR_FORMAT,
                         "%s: %s: string length %llu at offset %llu exceeds the file (%llu bytes left)",
                         c->name, what, (unsigned long long)len,
                         (unsigned long long)(c->pos - 8), (unsigned long long)cur_left(c));
    s->ptr = (const char *)c->buf + c->pos;
    s->len = len;
    c->pos += len;
    return PK_OK;
}

/* A printable, bounded rendering of an untrusted string for messages. */
static const char *safe_str(const char *p, uint64_t len, char *out, size_t cap) {
    size_t j = 0;
    for (uint64_t i = 0; i < len && j + 5 < cap; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 32 && ch < 127) out[j++] = (char)ch;
        else j += (size_t)snprintf(out + j, cap - j, "\\x%02x", ch);
    }
    if (len > 0 && j + 5 >= cap && cap > 4) { out[cap - 4] = '.'; out[cap - 3] = '.'; out[cap - 2] = '.'; j = cap - 1; }
    out[j] = 0;
    return out;
}

static char *dup_str(const gguf_str *s) {
    char *d = malloc(s->len + 1);
    if (!d) return NULL;
    memcpy(d, s->ptr, s->len);
    d[s->len] = 0;
    return d;
}

/* ---- value types ---------------------------------------------------------- */

static const struct { const char *name; int size; } vtypes[GGUF_VTYPE_COUNT] = {
    [GGUF_UINT8] = {"u8", 1},     [GGUF_INT8] = {"i8", 1},
    [GGUF_UINT16] = {"u16", 2},   [GGUF_INT16] = {"i16", 2},
    [GGUF_UINT32] = {"u32", 4},   [GGUF_INT32] = {"i32", 4},
    [GGUF_FLOAT32] = {"f32", 4},  [GGUF_BOOL] = {"bool", 1},
    [GGUF_STRING] = {"string", 0}, [GGUF_ARRAY] = {"array", 0},
    [GGUF_UINT64] = {"u64", 8},   [GGUF_INT64] = {"i64", 8},
    [GGUF_FLOAT64] = {"f64", 8},
};

const char *gguf_vtype_name(int type) {
    return (type >= 0 && type < GGUF_VTYPE_COUNT) ? vtypes[type].name : "?";
}

/* Decode one fixed-size scalar of type t at p into the kv's numeric fields. */
static void decode_scalar(int t, const uint8_t *p, gguf_kv *kv) {
    uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
    uint64_t u64; int64_t i64; float f32; double f64;
    switch (t) {
    case GGUF_UINT8: case GGUF_BOOL: memcpy(&u8, p, 1); kv->i64 = u8; break;
    case GGUF_INT8: memcpy(&i8, p, 1); kv->i64 = i8; break;
    case GGUF_UINT16: memcpy(&u16, p, 2); kv->i64 = u16; break;
    case GGUF_INT16: memcpy(&i16, p, 2); kv->i64 = i16; break;
    case GGUF_UINT32: memcpy(&u32, p, 4); kv->i64 = u32; break;
    case GGUF_INT32: memcpy(&i32, p, 4); kv->i64 = i32; break;
    case GGUF_UINT64: memcpy(&u64, p, 8); kv->u64 = u64; kv->i64 = (int64_t)u64; kv->f64 = (double)u64; return;
    case GGUF_INT64: memcpy(&i64, p, 8); kv->i64 = i64; break;
    case GGUF_FLOAT32: memcpy(&f32, p, 4); kv->f64 = f32; kv->i64 = 0; kv->u64 = 0; return;
    case GGUF_FLOAT64: memcpy(&f64, p, 8); kv->f64 = f64; kv->i64 = 0; kv->u64 = 0; return;
    }
    kv->u64 = (uint64_t)kv->i64;
    kv->f64 = (double)kv->i64;
}

static int is_int_type(int t) {
    return t == GGUF_UINT8 || t == GGUF_INT8 || t == GGUF_UINT16 || t == GGUF_INT16 ||
           t == GGUF_UINT32 || t == GGUF_INT32 || t == GGUF_UINT64 || t == GGUF_INT64 ||
           t == GGUF_BOOL;
}

/* ---- parsing ---------------------------------------------------------------- */

static int parse_value(cursor *c, gguf_kv *kv, const char *key) {
    char what[200];
    int t = kv->type;
    if (t < 0 || t >= GGUF_VTYPE_COUNT)
        return pk_errorf(c->err, PK_ERR_FORMAT, "%s: key '%s': unknown value type %d",
                         c->name, key, t);
    if (t == GGUF_STRING) {
        snprintf(what, sizeof what, "value of key '%s'", key);
        return cur_str(c, &kv->str, what);
    }
    if (t != GGUF_ARRAY) {
        uint8_t tmp[8];
        snprintf(what, sizeof what, "value of key '%s'", key);
        int rc = cur_read(c, tmp, (uint64_t)vtypes[t].size, what);
        if (rc) return rc;
        decode_scalar(t, tmp, kv);
        if (t == GGUF_BOOL && tmp[0] > 1)
            return pk_errorf(c->err, PK_ERR_FORMAT, "%s: key '%s': bool value %u is not 0 or 1",
                             c->name, key, tmp[0]);
        return PK_OK;
    }
    uint32_t at = 0;
    uint64_t n = 0;
    snprintf(what, sizeof what, "array header of key '%s'", key);
    int rc = cur_u32(c, &at, what);
    if (!rc) rc = cur_u64(c, &n, what);
    if (rc) return rc;
    if (at >= GGUF_VTYPE_COUNT || at == GGUF_ARRAY)
        return pk_errorf(c->err, PK_ERR_FORMAT, "%s: key '%s': unsupported array element type %u",
                         c->name, key, at);
    kv->arr_type = (int)at;
    kv->arr_n = n;
    if (at == GGUF_STRING) {
        if (n > cur_left(c) / 8)  /* each string needs at least its 8-byte length */
            return pk_errorf(c->err, PK_ERR_FORMAT,
                             "%s: key '%s': array of %llu strings cannot fit in the %llu bytes left",
                             c->name, key, (unsigned long long)n, (unsigned long long)cur_left(c));
        kv->arr_str = pk_calloc(n, sizeof(gguf_str));
        if (!kv->arr_str)
            return pk_errorf(c->err, PK_ERR_NOMEM, "%s: key '%s': out of memory for %llu strings",
                             c->name, key, (unsigned long long)n);
        for (uint64_t i = 0; i < n; i++) {
            snprintf(what, sizeof what, "string %llu of key '%s'", (unsigned long long)i, key);
            if ((rc = cur_str(c, &kv->arr_str[i], what))) return rc;
        }
        return PK_OK;
    }
    uint64_t bytes;
    if (!pk_mul_ok(n, (uint64_t)vtypes[at].size, &bytes) || bytes > cur_left(c))
        return pk_errorf(c->err, PK_ERR_FORMAT,
                         "%s: key '%s': array of %llu %s elements exceeds the file (%llu bytes left)",
                         c->name, key, (unsigned long long)n, vtypes[at].name,
                         (unsigned long long)cur_left(c));
    kv->arr_data = c->buf + c->pos;
    c->pos += bytes;
    if (at == GGUF_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (((const uint8_t *)kv->arr_data)[i] > 1)
                return pk_errorf(c->err, PK_ERR_FORMAT,
                                 "%s: key '%s': bool element %llu is %u, not 0 or 1", c->name,
                                 key, (unsigned long long)i, ((const uint8_t *)kv->arr_data)[i]);
    return PK_OK;
}

/* Sorted (name, index) pairs serve lookups by bsearch and duplicate checks. */
typedef struct name_idx {
    const char *name;
    uint64_t idx;
} name_idx;

static int cmp_name_idx(const void *a, const void *b) {
    return strcmp(((const name_idx *)a)->name, ((const name_idx *)b)->name);
}

static int build_index(name_idx **out, const char *const *names, size_t stride, uint64_t n,
                       const char *file, const char *what, pk_error *err) {
    name_idx *ix = pk_calloc(n, sizeof *ix);
    if (!ix) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory indexing %s", file, what);
    for (uint64_t i = 0; i < n; i++) {
        ix[i].name = *(const char *const *)((const char *)names + i * stride);
        ix[i].idx = i;
    }
    qsort(ix, n, sizeof *ix, cmp_name_idx);
    *out = ix;
    for (uint64_t i = 1; i < n; i++)
        if (strcmp(ix[i - 1].name, ix[i].name) == 0) {
            char buf[128];
            return pk_errorf(err, PK_ERR_FORMAT, "%s: duplicate %s '%s'", file, what,
                             safe_str(ix[i].name, strlen(ix[i].name), buf, sizeof buf));
        }
    return PK_OK;
}

static int parse_tensor_info(cursor *c, gguf_tensor *t, uint64_t i) {
    char what[200], nb[128];
    gguf_str name = {0};
    snprintf(what, sizeof what, "name of tensor %llu", (unsigned long long)i);
    int rc = cur_str(c, &name, what);
    if (rc) return rc;
    if (name.len == 0 || name.len > GGUF_MAX_NAME_LEN || memchr(name.ptr, 0, name.len))
        return pk_errorf(c->err, PK_ERR_FORMAT, "%s: tensor %llu: invalid name '%s' (length %llu)",
                         c->name, (unsigned long long)i, safe_str(name.ptr, name.len, nb, sizeof nb),
                         (unsigned long long)name.len);
    if (!(t->name = dup_str(&name)))
        return pk_errorf(c->err, PK_ERR_NOMEM, "%s: out of memory", c->name);
    const char *tn = safe_str(name.ptr, name.len, nb, sizeof nb);
    uint32_t nd = 0, type = 0;
    snprintf(what, sizeof what, "n_dims of tensor '%s'", tn);
    if ((rc = cur_u32(c, &nd, what))) return rc;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return pk_errorf(c->err, PK_ERR_FORMAT, "%s: tensor '%s': n_dims %u is not in 1..%d",
                         c->name, tn, nd, GGUF_MAX_DIMS);
    t->n_dims = (int)nd;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    uint64_t nel = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t ne = 0;
        snprintf(what, sizeof what, "dimension %u of tensor '%s'", d, tn);
        if ((rc = cur_u64(c, &ne, what))) return rc;
        if (ne > (uint64_t)INT64_MAX || !pk_mul_ok(nel, ne, &nel) || nel > (uint64_t)INT64_MAX)
            return pk_errorf(c->err, PK_ERR_FORMAT,
                             "%s: tensor '%s': dimension %u = %llu makes the element count overflow",
                             c->name, tn, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    t->nelements = (int64_t)nel;
    snprintf(what, sizeof what, "type of tensor '%s'", tn);
    if ((rc = cur_u32(c, &type, what))) return rc;
    const pk_type_traits *tt = pk_type_get((int)type);
    if (type >= PK_TYPE_COUNT || !tt)
        return pk_errorf(c->err, PK_ERR_FORMAT, "%s: tensor '%s': unknown tensor type %u",
                         c->name, tn, type);
    t->type = (int)type;
    if (t->ne[0] % tt->blck)
        return pk_errorf(c->err, PK_ERR_FORMAT,
                         "%s: tensor '%s': row length %lld is not a multiple of the %s block size %d",
                         c->name, tn, (long long)t->ne[0], tt->name, tt->blck);
    uint64_t rows = 1, row_bytes;
    for (int d = 1; d < GGUF_MAX_DIMS; d++)
        if (!pk_mul_ok(rows, (uint64_t)t->ne[d], &rows))
            return pk_errorf(c->err, PK_ERR_FORMAT, "%s: tensor '%s': row count overflows", c->name, tn);
    if (!pk_mul_ok((uint64_t)(t->ne[0] / tt->blck), tt->type_size, &row_bytes) ||
        !pk_mul_ok(row_bytes, rows, &t->nbytes))
        return pk_errorf(c->err, PK_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->name, tn);
    snprintf(what, sizeof what, "offset of tensor '%s'", tn);
    return cur_u64(c, &t->offset, what);
}

int gguf_parse(const uint8_t *buf, uint64_t size, const char *name, gguf_file **out,
               pk_error *err) {
    *out = NULL;
    gguf_file *f = pk_calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(name))) {
        free(f);
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", name);
    }
    f->map = buf;
    f->size = size;
    f->fd = -1;
    cursor cc = {.buf = buf, .size = size, .pos = 0, .name = name, .err = err}, *c = &cc;
    uint32_t magic = 0;
    int rc = cur_u32(c, &magic, "magic");
    if (rc) goto fail;
    if (magic != GGUF_MAGIC) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: not a GGUF file (magic 0x%08x, expected 0x%08x \"GGUF\")%s",
                       name, magic, GGUF_MAGIC,
                       magic == 0x47475546u ? "; big-endian GGUF is not supported" : "");
        goto fail;
    }
    if ((rc = cur_u32(c, &f->version, "version"))) goto fail;
    if (f->version != 2 && f->version != 3) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: GGUF version %u is not supported (only 2 and 3)",
                       name, f->version);
        goto fail;
    }
    if ((rc = cur_u64(c, &f->n_tensors, "tensor count"))) goto fail;
    if ((rc = cur_u64(c, &f->n_kv, "metadata count"))) goto fail;
    /* each kv needs >= 8+1+4 bytes, each tensor info >= 8+1+4+8+4+8 */
    if (f->n_kv > cur_left(c) / 13) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: metadata count %llu cannot fit in a %llu-byte file",
                       name, (unsigned long long)f->n_kv, (unsigned long long)size);
        goto fail;
    }
    if (f->n_tensors > cur_left(c) / 33) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: tensor count %llu cannot fit in a %llu-byte file",
                       name, (unsigned long long)f->n_tensors, (unsigned long long)size);
        goto fail;
    }
    f->kv = pk_calloc(f->n_kv, sizeof *f->kv);
    f->tensors = pk_calloc(f->n_tensors, sizeof *f->tensors);
    if (!f->kv || !f->tensors) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", name);
        goto fail;
    }

    /* metadata */
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        gguf_kv *kv = &f->kv[i];
        gguf_str key = {0};
        char what[64], kb[128];
        snprintf(what, sizeof what, "key of metadata entry %llu", (unsigned long long)i);
        if ((rc = cur_str(c, &key, what))) goto fail;
        if (key.len == 0 || key.len > GGUF_MAX_KEY_LEN || memchr(key.ptr, 0, key.len)) {
            rc = pk_errorf(err, PK_ERR_FORMAT, "%s: metadata entry %llu: invalid key '%s' (length %llu)",
                           name, (unsigned long long)i, safe_str(key.ptr, key.len, kb, sizeof kb),
                           (unsigned long long)key.len);
            goto fail;
        }
        if (!(kv->key = dup_str(&key))) {
            rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", name);
            goto fail;
        }
        uint32_t type = 0;
        snprintf(what, sizeof what, "value type of metadata entry %llu", (unsigned long long)i);
        if ((rc = cur_u32(c, &type, what))) goto fail;
        kv->type = type >= GGUF_VTYPE_COUNT ? -1 : (int)type;
        safe_str(key.ptr, key.len, kb, sizeof kb);
        if (kv->type < 0) {
            rc = pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s': unknown value type %u", name, kb, type);
            goto fail;
        }
        if ((rc = parse_value(c, kv, kb))) goto fail;
    }
    if ((rc = build_index((name_idx **)&f->kv_index, (const char *const *)&f->kv[0].key,
                          sizeof(gguf_kv), f->n_kv, name, "metadata key", err)))
        goto fail;
    const gguf_kv *al = gguf_find_kv(f, "general.alignment");
    if (al) {
        if (!is_int_type(al->type) || al->type == GGUF_BOOL || al->i64 <= 0 ||
            al->i64 > (1 << 30) || (al->i64 & (al->i64 - 1))) {
            rc = pk_errorf(err, PK_ERR_FORMAT,
                           "%s: general.alignment must be a power of two integer, got %s %lld", name,
                           gguf_vtype_name(al->type), (long long)al->i64);
            goto fail;
        }
        f->alignment = (uint64_t)al->i64;
    }

    /* tensor infos */
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if ((rc = parse_tensor_info(c, &f->tensors[i], i))) goto fail;
    if ((rc = build_index((name_idx **)&f->tensor_index, (const char *const *)&f->tensors[0].name,
                          sizeof(gguf_tensor), f->n_tensors, name, "tensor name", err)))
        goto fail;

    /* data section */
    uint64_t pad = (f->alignment - c->pos % f->alignment) % f->alignment;
    f->data_offset = c->pos + pad;
    if (f->data_offset > size) {
        if (f->n_tensors == 0) { f->data_offset = size; }
        else {
            rc = pk_errorf(err, PK_ERR_FORMAT, "%s: truncated file: tensor data would start at %llu, file has %llu bytes",
                           name, (unsigned long long)f->data_offset, (unsigned long long)size);
            goto fail;
        }
    }
    uint64_t data_size = size - f->data_offset;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        uint64_t end;
        char tn[128];
        safe_str(t->name, strlen(t->name), tn, sizeof tn);
        if (t->offset % f->alignment) {
            rc = pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s': offset %llu is not a multiple of the alignment %llu",
                           name, tn, (unsigned long long)t->offset, (unsigned long long)f->alignment);
            goto fail;
        }
        if (!pk_add_ok(t->offset, t->nbytes, &end) || end > data_size) {
            rc = pk_errorf(err, PK_ERR_FORMAT,
                           "%s: tensor '%s': data [%llu, +%llu) lies past the end of the file (data section is %llu bytes)",
                           name, tn, (unsigned long long)t->offset,
                           (unsigned long long)t->nbytes, (unsigned long long)data_size);
            goto fail;
        }
        t->data = buf + f->data_offset + t->offset;
        /* Typed reads (fp16 scales, float rows) need the type's alignment.
           GGUF allows any power-of-two general.alignment, 1 included, which
           can place a tensor at an odd offset: such a tensor is refused here
           rather than read misaligned by every kernel. */
        size_t ta = pk_type_align(t->type);
        if ((uintptr_t)t->data % ta) {
            rc = pk_errorf(err, PK_ERR_FORMAT,
                           "%s: tensor '%s' (%s) starts at file offset %llu, not a multiple of %zu as its type needs "
                           "(general.alignment is %llu; write the file with the default alignment 32)",
                           name, tn, pk_type_name(t->type), (unsigned long long)(f->data_offset + t->offset), ta,
                           (unsigned long long)f->alignment);
            goto fail;
        }
    }
    *out = f;
    return PK_OK;
fail:
    f->map = NULL; /* the caller owns buf */
    gguf_close(f);
    return rc;
}

/* Modification time in nanoseconds (Apple names the field differently). */
static int64_t mtime_ns(const struct stat *st) {
#if defined(__APPLE__)
    return (int64_t)st->st_mtimespec.tv_sec * 1000000000 + st->st_mtimespec.tv_nsec;
#else
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
#endif
}

int gguf_open(const char *path, gguf_file **out, pk_error *err) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pk_errorf(err, PK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return pk_errorf(err, PK_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return pk_errorf(err, PK_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return pk_errorf(err, PK_ERR_FORMAT, "%s: file is empty, not a GGUF file", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    if (map == MAP_FAILED) {
        close(fd);
        return pk_errorf(err, PK_ERR_IO, "%s: cannot mmap: %s", path, strerror(e));
    }
    /* a fault in the mapping (the file truncated under us) names the file */
    pk_mapguard_add(map, (size_t)st.st_size, path);
    /* read-ahead hints come from the model's memory plan (engine/memplan.c): under
       a budget only the resident tensors are read ahead */
    int rc = gguf_parse(map, (uint64_t)st.st_size, path, out, err);
    if (rc) {
        pk_mapguard_remove(map);
        munmap(map, (size_t)st.st_size);
        close(fd);
        return rc;
    }
    gguf_file *f = *out;
    f->mapped = 1;
    f->fd = fd;   /* kept: fstat on it says whether the mapped inode changed */
    f->st_size = (uint64_t)st.st_size;
    f->st_mtime_ns = mtime_ns(&st);
    return PK_OK;
}

int gguf_check_unchanged(const gguf_file *f, pk_error *err) {
    if (f->fd < 0) return PK_OK;
    struct stat st;
    if (fstat(f->fd, &st) != 0)
        return pk_errorf(err, PK_ERR_IO, "%s: cannot stat the mapped file: %s", f->path, strerror(errno));
    if ((uint64_t)st.st_size != f->st_size)
        return pk_errorf(err, PK_ERR_IO, "%s: the model file changed while in use: %llu bytes when loaded, %llu now",
                         f->path, (unsigned long long)f->st_size, (unsigned long long)st.st_size);
    if (mtime_ns(&st) != f->st_mtime_ns)
        return pk_errorf(err, PK_ERR_IO, "%s: the model file changed while in use: written to since it was loaded",
                         f->path);
    return PK_OK;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    for (uint64_t i = 0; f->kv && i < f->n_kv; i++) {
        free(f->kv[i].key);
        free(f->kv[i].arr_str);
    }
    for (uint64_t i = 0; f->tensors && i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv);
    free(f->tensors);
    free(f->kv_index);
    free(f->tensor_index);
    if (f->mapped && f->map) {
        pk_mapguard_remove(f->map);
        munmap((void *)f->map, f->size);
    }
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    free(f);
}

/* ---- lookups ------------------------------------------------------------------ */

static int64_t find_index(const void *index, uint64_t n, const char *name) {
    if (!index || !name) return -1;
    name_idx key = {name, 0};
    const name_idx *r = bsearch(&key, index, n, sizeof key, cmp_name_idx);
    return r ? (int64_t)r->idx : -1;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    int64_t i = find_index(f->kv_index, f->n_kv, key);
    return i < 0 ? NULL : &f->kv[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    int64_t i = find_index(f->tensor_index, f->n_tensors, name);
    return i < 0 ? NULL : &f->tensors[i];
}

static int missing(const gguf_file *f, const char *key, int required, pk_error *err) {
    return required ? pk_errorf(err, PK_ERR_FORMAT, "%s: missing required key '%s'", f->path, key)
                    : PK_OK;
}

int gguf_get_int(const gguf_file *f, const char *key, int required, int64_t *out, pk_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(f, key, required, err);
    if (!is_int_type(kv->type))
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' has type %s, expected an integer",
                         f->path, key, gguf_vtype_name(kv->type));
    if (kv->type == GGUF_UINT64 && kv->u64 > (uint64_t)INT64_MAX)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s': value %llu is out of range", f->path,
                         key, (unsigned long long)kv->u64);
    *out = kv->i64;
    return PK_OK;
}

int gguf_get_float(const gguf_file *f, const char *key, int required, double *out, pk_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(f, key, required, err);
    if (kv->type != GGUF_FLOAT32 && kv->type != GGUF_FLOAT64 &&
        (!is_int_type(kv->type) || kv->type == GGUF_BOOL))
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' has type %s, expected a number",
                         f->path, key, gguf_vtype_name(kv->type));
    *out = kv->f64;
    return PK_OK;
}

int gguf_get_bool(const gguf_file *f, const char *key, int required, int *out, pk_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(f, key, required, err);
    if (!is_int_type(kv->type))
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' has type %s, expected a bool",
                         f->path, key, gguf_vtype_name(kv->type));
    *out = kv->i64 != 0;
    return PK_OK;
}

int gguf_get_string(const gguf_file *f, const char *key, int required, char **out, pk_error *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return missing(f, key, required, err);
    if (kv->type != GGUF_STRING)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' has type %s, expected a string",
                         f->path, key, gguf_vtype_name(kv->type));
    char *s = dup_str(&kv->str);
    if (!s) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", f->path);
    *out = s;
    return PK_OK;
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i) {
    gguf_kv tmp = {0};
    if (kv->type != GGUF_ARRAY || i >= kv->arr_n || kv->arr_type == GGUF_STRING) return 0;
    int sz = vtypes[kv->arr_type].size;
    decode_scalar(kv->arr_type, (const uint8_t *)kv->arr_data + i * (uint64_t)sz, &tmp);
    if (kv->arr_type == GGUF_FLOAT32 || kv->arr_type == GGUF_FLOAT64)  /* NaN, huge: 0 */
        return tmp.f64 > -9.2e18 && tmp.f64 < 9.2e18 ? (int64_t)tmp.f64 : 0;
    return tmp.i64;
}

double gguf_arr_float(const gguf_kv *kv, uint64_t i) {
    gguf_kv tmp = {0};
    if (kv->type != GGUF_ARRAY || i >= kv->arr_n || kv->arr_type == GGUF_STRING) return 0;
    int sz = vtypes[kv->arr_type].size;
    decode_scalar(kv->arr_type, (const uint8_t *)kv->arr_data + i * (uint64_t)sz, &tmp);
    return tmp.f64;
}
