/* gguf/gguf.h - read-only access to a GGUF (v2/v3) model file.
 *
 * The file is mmap'ed and parsed once; metadata and tensor infos are copied
 * into small arrays, tensor data stays in the mapping. The file is untrusted:
 * every count, length, dimension product and offset is checked, and any
 * violation fails gguf_open with a one-line message naming the file, the field
 * and the value. Nothing is read outside the mapping afterwards.
 */
#ifndef PK_GGUF_H
#define PK_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include "core/common.h"

enum gguf_vtype {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3,
    GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7,
    GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12, GGUF_VTYPE_COUNT = 13
};

/* A string inside the mapping: not NUL-terminated. */
typedef struct gguf_str {
    const char *ptr;
    uint64_t len;
} gguf_str;

typedef struct gguf_kv {
    char *key;            /* NUL-terminated copy */
    int type;             /* enum gguf_vtype */
    /* scalars (type != STRING/ARRAY): integers in i64 (and u64), floats in f64 */
    int64_t i64;
    uint64_t u64;
    double f64;
    gguf_str str;         /* type == STRING */
    /* type == ARRAY */
    int arr_type;         /* element type (never ARRAY: nested arrays are rejected) */
    uint64_t arr_n;       /* element count */
    const void *arr_data; /* fixed-size elements, little-endian, in the mapping */
    gguf_str *arr_str;    /* arr_type == STRING: arr_n parsed strings */
} gguf_kv;

typedef struct gguf_tensor {
    char *name;           /* NUL-terminated copy */
    int n_dims;           /* 1..4 */
    int64_t ne[4];        /* elements per dimension, ne[0] innermost; unused = 1 */
    int type;             /* ggml tensor type (enum pk_type) */
    uint64_t offset;      /* from the start of the data section */
    const void *data;     /* in the mapping */
    uint64_t nbytes;
    int64_t nelements;
} gguf_tensor;

typedef struct gguf_file {
    char *path;
    const uint8_t *map;   /* whole file */
    uint64_t size;
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;
    int mapped;           /* map is ours to munmap (gguf_open) */
    int fd;               /* the mapped file, kept open to notice changes; -1: none */
    uint64_t st_size;     /* the file as it was mapped: size, modification time */
    int64_t st_mtime_ns;
    void *kv_index;       /* private: sorted names for lookups */
    void *tensor_index;
} gguf_file;

/* Open and validate path. On success *out owns the mapping; on failure *out
 * is NULL and err says why (code PK_ERR_IO or PK_ERR_FORMAT). */
int gguf_open(const char *path, gguf_file **out, pk_error *err);
/* Parse a file image already in memory (not copied; must outlive the result).
 * name is used in messages. Used by tests and by gguf_open. */
int gguf_parse(const uint8_t *buf, uint64_t size, const char *name,
               gguf_file **out, pk_error *err);
void gguf_close(gguf_file *f);
/* PK_OK while the mapped file is as it was mapped (same size and
 * modification time; a file replaced by rename is not a change, the mapping
 * keeps the old one). PK_ERR_IO with a message naming the file and what
 * changed when it was truncated, grown or written in place: reads of the
 * mapping may then fault (SIGBUS) or see other bytes. PK_OK for a parsed
 * buffer (gguf_parse). */
int gguf_check_unchanged(const gguf_file *f, pk_error *err);

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
const char *gguf_vtype_name(int type);

/* Typed getters. Return PK_OK, or PK_ERR_FORMAT with a message if the key is
 * missing (when required) or has an unusable type/value. When the key is
 * absent and required == 0 they return PK_OK and leave *out unchanged. */
int gguf_get_int(const gguf_file *f, const char *key, int required,
                 int64_t *out, pk_error *err);      /* any integer type or bool */
int gguf_get_float(const gguf_file *f, const char *key, int required,
                   double *out, pk_error *err);     /* float or integer type */
int gguf_get_bool(const gguf_file *f, const char *key, int required,
                  int *out, pk_error *err);
/* *out receives a malloc'ed NUL-terminated copy (free it). */
int gguf_get_string(const gguf_file *f, const char *key, int required,
                    char **out, pk_error *err);

/* Element i of an array of numbers, converted. i must be < kv->arr_n. */
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t i);
double gguf_arr_float(const gguf_kv *kv, uint64_t i);

/* ---- writing (gguf/write.c) ------------------------------------------------
 * Describe the file (metadata, then tensor infos in data order), then
 * gguf_writer_begin creates PATH.tmp and writes everything but the tensor
 * data; stream each tensor's bytes in order with gguf_writer_write (any
 * chunking; alignment padding is inserted); gguf_writer_finish fsyncs and
 * renames PATH.tmp to PATH. PATH is never touched before the rename; after a
 * failure, or gguf_writer_free without a finish, PATH.tmp is removed.
 * The alignment is general.alignment if present (power of two) and >= 8, else
 * 32 (a smaller general.alignment is dropped).
 * I/O failures return PK_ERR_IO naming PATH.tmp, the byte offset and errno's
 * text; misuse (wrong order, too much or too little data) PK_ERR_ARG. */
typedef struct gguf_writer gguf_writer;

int gguf_writer_new(const char *path, gguf_writer **out, pk_error *err);
void gguf_writer_free(gguf_writer *w);
const char *gguf_writer_tmp_path(const gguf_writer *w);   /* "PATH.tmp" */

/* Metadata. Setting an existing key replaces its value where it stands; a new
 * key is appended. gguf_writer_copy_kv does not copy the value's bytes: the
 * source (e.g. an open gguf_file) must stay alive until gguf_writer_begin. */
int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv, pk_error *err);
int gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v, pk_error *err);
int gguf_writer_set_bool(gguf_writer *w, const char *key, int v, pk_error *err);
int gguf_writer_set_str(gguf_writer *w, const char *key, const char *v, pk_error *err);
int gguf_writer_set_str_arr(gguf_writer *w, const char *key, const char *const *v, uint64_t n,
                            pk_error *err);
int gguf_writer_set_u32_arr(gguf_writer *w, const char *key, const uint32_t *v, uint64_t n, pk_error *err);
/* 1 if the key was present. */
int gguf_writer_remove_kv(gguf_writer *w, const char *key);

/* A tensor (ne[0] innermost; entries past n_dims ignored), in data order.
 * Fails on a duplicate name, an unknown type, or a row length that is not a
 * multiple of the type's block size. */
int gguf_writer_add_tensor(gguf_writer *w, const char *name, int n_dims, const int64_t ne[4],
                           int type, pk_error *err);

int gguf_writer_begin(gguf_writer *w, pk_error *err);
int gguf_writer_write(gguf_writer *w, const void *data, size_t n, pk_error *err);
int gguf_writer_finish(gguf_writer *w, pk_error *err);

#endif
