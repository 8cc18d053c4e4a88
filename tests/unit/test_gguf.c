/* test_gguf.c - robustness tests of the GGUF reader (src/gguf/gguf.c).
 *
 * 1. The bundled model opens and reads back the right facts.
 * 2. A tiny in-memory GGUF builder crafts exact headers: a small valid file,
 *    and targeted bad values (counts, lengths, types, dims, offsets,
 *    alignment, duplicates) that must be rejected with a good message.
 * 3. Corpora of corrupted files derived from the good ones: truncation at
 *    every header byte and a stride through the data, and byte flips at
 *    random and at every field of the real header. Each parse must either
 *    fail with a one-line message naming the file, or succeed with a result
 *    whose every pointer stays inside the buffer (checked and touched, so
 *    ASan notices). Run it under -fsanitize=address,undefined.
 * Truncated images are parsed from exact-size heap copies so that any read
 * past the end is an ASan report, not a silent read of the next byte.
 */
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "testhelp.h"

#define MODEL "models/kjv-moe-f16.gguf"
#define TMPDIR "build/test_gguf_tmp"
#define NAME "corrupt.gguf"     /* file name given to gguf_parse */

static const int vsize[GGUF_VTYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* ---- a tiny GGUF writer ------------------------------------------------- */

typedef struct gb {
    uint8_t *b;
    size_t n, cap;
} gb;

/* Append n bytes; returns the offset they were written at. */
static size_t gb_put(gb *g, const void *p, size_t n) {
    if (g->n + n > g->cap) {
        g->cap = (g->n + n) * 2 + 64;
        g->b = realloc(g->b, g->cap);
        if (!g->b) { fprintf(stderr, "out of memory\n"); exit(1); }
    }
    if (n) memcpy(g->b + g->n, p, n);
    g->n += n;
    return g->n - n;
}
static size_t gb_u8(gb *g, uint8_t v) { return gb_put(g, &v, 1); }
static size_t gb_u32(gb *g, uint32_t v) { return gb_put(g, &v, 4); }
static size_t gb_u64(gb *g, uint64_t v) { return gb_put(g, &v, 8); }
static size_t gb_f32(gb *g, float v) { return gb_put(g, &v, 4); }
/* A GGUF string; returns the offset of its length field. */
static size_t gb_str(gb *g, const char *s) {
    size_t at = gb_u64(g, strlen(s));
    gb_put(g, s, strlen(s));
    return at;
}
static void gb_pad(gb *g, size_t align) {
    while (g->n % align) gb_u8(g, 0);
}
static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* The small file: two tensors and a handful of keys of every kind. */
typedef struct tdesc {
    const char *name;
    uint32_t n_dims;
    uint64_t ne[6];
    uint32_t type;
    uint64_t offset;
} tdesc;

typedef struct small_cfg {
    tdesc t[2];
    uint32_t align;
    const char *dup_key;    /* extra u32 key appended, NULL: none */
    uint64_t data_bytes;
} small_cfg;

/* Where each field of the small file was written. */
typedef struct small_off {
    size_t magic;               /* 0; first, so OFF(magic) patches the magic */
    size_t version, n_tensors, n_kv;
    size_t key[8], type[8], val[8];
    size_t tok_arr_type, tok_arr_n, tok_str0;
    size_t t_name[2], t_ndims[2], t_ne[2], t_type[2], t_off[2];
    size_t data;
} small_off;

enum { KV_ARCH, KV_ALIGN, KV_TOKENS, KV_FLOATS, KV_FLAG, KV_BIG, KV_DUP };

static small_cfg small_default(void) {
    small_cfg c = {
        .t = {{.name = "a", .n_dims = 2, .ne = {8, 2}, .type = PK_TYPE_F32, .offset = 0},
              {.name = "b", .n_dims = 2, .ne = {32, 2}, .type = PK_TYPE_F16, .offset = 64}},
        .align = 32, .dup_key = NULL, .data_bytes = 192,
    };
    return c;
}

static void build_small(gb *g, small_off *o, const small_cfg *c) {
    g->n = 0;
    o->magic = 0;
    int n_kv = c->dup_key ? 7 : 6;
    gb_put(g, "GGUF", 4);
    o->version = gb_u32(g, 3);
    o->n_tensors = gb_u64(g, 2);
    o->n_kv = gb_u64(g, (uint64_t)n_kv);

    o->key[KV_ARCH] = gb_str(g, "general.architecture");
    o->type[KV_ARCH] = gb_u32(g, GGUF_STRING);
    o->val[KV_ARCH] = gb_str(g, "tiny");

    o->key[KV_ALIGN] = gb_str(g, "general.alignment");
    o->type[KV_ALIGN] = gb_u32(g, GGUF_UINT32);
    o->val[KV_ALIGN] = gb_u32(g, c->align);

    o->key[KV_TOKENS] = gb_str(g, "tokenizer.ggml.tokens");
    o->type[KV_TOKENS] = gb_u32(g, GGUF_ARRAY);
    o->val[KV_TOKENS] = o->tok_arr_type = gb_u32(g, GGUF_STRING);
    o->tok_arr_n = gb_u64(g, 3);
    o->tok_str0 = gb_str(g, "a");
    gb_str(g, "bb");
    gb_str(g, "ccc");

    o->key[KV_FLOATS] = gb_str(g, "test.floats");
    o->type[KV_FLOATS] = gb_u32(g, GGUF_ARRAY);
    o->val[KV_FLOATS] = gb_u32(g, GGUF_FLOAT32);
    gb_u64(g, 2);
    gb_f32(g, 1.5f);
    gb_f32(g, -2.5f);

    o->key[KV_FLAG] = gb_str(g, "test.flag");
    o->type[KV_FLAG] = gb_u32(g, GGUF_BOOL);
    o->val[KV_FLAG] = gb_u8(g, 1);

    o->key[KV_BIG] = gb_str(g, "test.big");
    o->type[KV_BIG] = gb_u32(g, GGUF_UINT64);
    o->val[KV_BIG] = gb_u64(g, 1ull << 40);

    if (c->dup_key) {
        o->key[KV_DUP] = gb_str(g, c->dup_key);
        o->type[KV_DUP] = gb_u32(g, GGUF_UINT32);
        o->val[KV_DUP] = gb_u32(g, 7);
    }
    for (int j = 0; j < 2; j++) {
        const tdesc *t = &c->t[j];
        o->t_name[j] = gb_str(g, t->name);
        o->t_ndims[j] = gb_u32(g, t->n_dims);
        o->t_ne[j] = g->n;
        for (uint32_t d = 0; d < t->n_dims && d < 6; d++) gb_u64(g, t->ne[d]);
        o->t_type[j] = gb_u32(g, t->type);
        o->t_off[j] = gb_u64(g, t->offset);
    }
    gb_pad(g, c->align ? c->align : 32);
    o->data = g->n;
    for (uint64_t i = 0; i < c->data_bytes; i++) gb_u8(g, (uint8_t)(i * 7 + 1));
}

/* ---- checking one parse ------------------------------------------------- */

enum { EXPECT_ANY, EXPECT_FAIL, EXPECT_OK };

typedef struct stats {
    const char *what;
    int cases, rejected, accepted;
} stats;

static volatile uint8_t sink;

/* Every pointer of an accepted file stays inside buf[0..n); touch the ends
 * of every string, array and tensor so that ASan sees any escape. */
static int check_accepted(const gguf_file *f, const uint8_t *buf, uint64_t n, char *why,
                          size_t cap) {
    const uint8_t *end = buf + n;
#define BAD(...) do { snprintf(why, cap, __VA_ARGS__); return 0; } while (0)
    if (f->version != 2 && f->version != 3) BAD("version %u", f->version);
    if (!f->alignment || (f->alignment & (f->alignment - 1))) BAD("alignment %llu",
        (unsigned long long)f->alignment);
    if (f->data_offset > n) BAD("data_offset %llu > size", (unsigned long long)f->data_offset);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        if (!kv->key || !kv->key[0]) BAD("kv %llu: empty key", (unsigned long long)i);
        if (gguf_find_kv(f, kv->key) != kv) BAD("kv '%s' not found by name", kv->key);
        if (kv->type < 0 || kv->type >= GGUF_VTYPE_COUNT) BAD("kv '%s': type %d", kv->key, kv->type);
        if (kv->type == GGUF_STRING) {
            if ((const uint8_t *)kv->str.ptr < buf || kv->str.len > (uint64_t)(end - (const uint8_t *)kv->str.ptr))
                BAD("kv '%s': string outside the buffer", kv->key);
            if (kv->str.len) sink ^= (uint8_t)kv->str.ptr[kv->str.len - 1];
        }
        if (kv->type != GGUF_ARRAY) continue;
        if (kv->arr_type < 0 || kv->arr_type >= GGUF_VTYPE_COUNT || kv->arr_type == GGUF_ARRAY)
            BAD("kv '%s': array type %d", kv->key, kv->arr_type);
        if (kv->arr_type == GGUF_STRING) {
            if (kv->arr_n && !kv->arr_str) BAD("kv '%s': no strings", kv->key);
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                const gguf_str *s = &kv->arr_str[j];
                if ((const uint8_t *)s->ptr < buf || s->len > (uint64_t)(end - (const uint8_t *)s->ptr))
                    BAD("kv '%s': string %llu outside the buffer", kv->key, (unsigned long long)j);
                if (s->len) sink ^= (uint8_t)s->ptr[s->len - 1];
            }
        } else {
            const uint8_t *d = kv->arr_data;
            uint64_t bytes = kv->arr_n * (uint64_t)vsize[kv->arr_type];
            if (kv->arr_n && (d < buf || kv->arr_n > (uint64_t)(end - d) ||
                              bytes > (uint64_t)(end - d)))
                BAD("kv '%s': array data outside the buffer", kv->key);
            if (kv->arr_n) {
                sink ^= (uint8_t)gguf_arr_int(kv, kv->arr_n - 1);
                sink ^= (uint8_t)(gguf_arr_float(kv, 0) != 0);
            }
        }
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (!t->name || !t->name[0]) BAD("tensor %llu: empty name", (unsigned long long)i);
        if (gguf_find_tensor(f, t->name) != t) BAD("tensor '%s' not found by name", t->name);
        if (t->n_dims < 1 || t->n_dims > 4) BAD("tensor '%s': n_dims %d", t->name, t->n_dims);
        int64_t nel = 1;
        for (int d = 0; d < 4; d++) {
            if (t->ne[d] < 0) BAD("tensor '%s': ne[%d] = %lld", t->name, d, (long long)t->ne[d]);
            if (d >= t->n_dims && t->ne[d] != 1) BAD("tensor '%s': unused ne[%d] != 1", t->name, d);
            if (__builtin_mul_overflow(nel, t->ne[d], &nel)) BAD("tensor '%s': nel overflows", t->name);
        }
        if (nel != t->nelements) BAD("tensor '%s': nelements %lld != %lld", t->name,
                                     (long long)t->nelements, (long long)nel);
        const pk_type_traits *tt = pk_type_get(t->type);
        if (!tt) BAD("tensor '%s': unknown type %d", t->name, t->type);
        uint64_t want;
        if (__builtin_mul_overflow((uint64_t)nel / (uint64_t)tt->blck, (uint64_t)tt->type_size, &want))
            BAD("tensor '%s': %lld elements of %s overflow a byte count, accepted with nbytes %llu",
                t->name, (long long)nel, tt->name, (unsigned long long)t->nbytes);
        if (nel && t->nbytes != want)
            BAD("tensor '%s': nbytes %llu, want %llu", t->name, (unsigned long long)t->nbytes,
                (unsigned long long)want);
        if (t->offset % f->alignment) BAD("tensor '%s': misaligned offset", t->name);
        if ((const uint8_t *)t->data != buf + f->data_offset + t->offset)
            BAD("tensor '%s': data pointer", t->name);
        if ((uintptr_t)t->data % pk_type_align(t->type))
            BAD("tensor '%s': data misaligned for %s", t->name, tt->name);
        if (t->offset > n - f->data_offset || t->nbytes > n - f->data_offset - t->offset)
            BAD("tensor '%s': data outside the buffer", t->name);
        if (t->nbytes) {
            sink ^= ((const uint8_t *)t->data)[0];
            sink ^= ((const uint8_t *)t->data)[t->nbytes - 1];
        }
    }
    return 1;
#undef BAD
}

/* Parse img[0..n) (from an exact-size copy when copy is set) and check the
 * outcome against expect; want, when not NULL, must appear in a rejection
 * message. Returns the status code. */
static int check_parse(stats *st, const uint8_t *img, uint64_t n, int copy, int expect,
                       const char *want, const char *label) {
    uint8_t *own = NULL;
    const uint8_t *buf = img;
    if (copy) {
        own = malloc(n ? n : 1);
        if (!own) { fprintf(stderr, "out of memory\n"); exit(1); }
        memcpy(own, img, n);
        buf = own;
    }
    static gguf_file sentinel;
    gguf_file *f = &sentinel;   /* must be reset to NULL on failure */
    pk_error err;
    memset(&err, 0, sizeof err);
    int rc = gguf_parse(buf, n, NAME, &f, &err);
    st->cases++;
    if (rc != PK_OK) {
        st->rejected++;
        TEST_CHECK(f == NULL, "%s: %s: failed parse left *out set", st->what, label);
        TEST_CHECK(rc == PK_ERR_FORMAT, "%s: %s: code %d (%s), want PK_ERR_FORMAT: %s",
                   st->what, label, rc, pk_status_str(rc), err.msg);
        TEST_CHECK(err.code == rc, "%s: %s: err.code %d != rc %d", st->what, label, err.code, rc);
        TEST_CHECK(err.msg[0] != 0, "%s: %s: empty message", st->what, label);
        TEST_CHECK(!strchr(err.msg, '\n') && !strchr(err.msg, '\r'),
                   "%s: %s: message has a line break: %s", st->what, label, err.msg);
        TEST_CHECK(strstr(err.msg, NAME) != NULL, "%s: %s: message does not name the file: %s",
                   st->what, label, err.msg);
        TEST_CHECK(expect != EXPECT_OK, "%s: %s: rejected a valid file: %s", st->what, label,
                   err.msg);
        if (want)
            TEST_CHECK(strstr(err.msg, want) != NULL, "%s: %s: message lacks \"%s\": %s",
                       st->what, label, want, err.msg);
    } else {
        st->accepted++;
        char why[256] = "";
        TEST_CHECK(f != NULL, "%s: %s: PK_OK but no file", st->what, label);
        if (f) TEST_CHECK(check_accepted(f, buf, n, why, sizeof why),
                          "%s: %s: accepted file is inconsistent: %s", st->what, label, why);
        TEST_CHECK(expect != EXPECT_FAIL, "%s: %s: accepted an invalid file", st->what, label);
        gguf_close(f);
    }
    free(own);
    return rc;
}

static void report(const stats *st) {
    fprintf(stderr, "%-34s %6d cases: %6d rejected, %6d accepted\n", st->what, st->cases,
            st->rejected, st->accepted);
}

/* ---- 1. the good model ---------------------------------------------------- */

static uint8_t *read_file(const char *path, uint64_t *size) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *b = malloc(sz > 0 ? (size_t)sz : 1);
    if (b && fread(b, 1, (size_t)sz, fp) != (size_t)sz) { free(b); b = NULL; }
    fclose(fp);
    *size = (uint64_t)sz;
    return b;
}

static void test_good_model(void) {
    gguf_file *f = NULL;
    pk_error err = {0};
    int rc = gguf_open(MODEL, &f, &err);
    TEST_CHECK(rc == PK_OK && f, "gguf_open(%s): %s", MODEL, err.msg);
    if (rc != PK_OK) return;
    TEST_CHECK(f->version == 3, "version %u", f->version);
    TEST_CHECK(f->n_tensors == 75 && f->n_kv == 29, "n_tensors %llu, n_kv %llu",
               (unsigned long long)f->n_tensors, (unsigned long long)f->n_kv);
    TEST_CHECK(f->alignment == 32 && f->data_offset == 136960, "alignment %llu, data at %llu",
               (unsigned long long)f->alignment, (unsigned long long)f->data_offset);
    char *arch = NULL;
    rc = gguf_get_string(f, "general.architecture", 1, &arch, &err);
    TEST_CHECK(rc == PK_OK && arch && !strcmp(arch, "qwen3moe"), "architecture: %s",
               arch ? arch : err.msg);
    free(arch);

    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    TEST_CHECK(t && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 4096 && t->ne[2] == 1 &&
               t->type == PK_TYPE_F16 && t->nbytes == 256 * 4096 * 2,
               "token_embd.weight shape/type wrong");
    t = gguf_find_tensor(f, "blk.0.ffn_gate_exps.weight");
    TEST_CHECK(t && t->n_dims == 3 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 16 &&
               t->type == PK_TYPE_F16 && t->nelements == 256 * 256 * 16,
               "blk.0.ffn_gate_exps.weight shape/type wrong");
    t = gguf_find_tensor(f, "output_norm.weight");
    TEST_CHECK(t && t->n_dims == 1 && t->ne[0] == 256 && t->type == PK_TYPE_F32 &&
               (const uint8_t *)t->data == f->map + f->data_offset + t->offset,
               "output_norm.weight wrong");
    TEST_CHECK(gguf_find_tensor(f, "blk.6.attn_q.weight") == NULL, "found a tensor of layer 6");

    int64_t i64 = -1;
    rc = gguf_get_int(f, "qwen3moe.block_count", 1, &i64, &err);
    TEST_CHECK(rc == PK_OK && i64 == 6, "block_count %lld: %s", (long long)i64, err.msg);
    double d = 0;
    rc = gguf_get_float(f, "qwen3moe.rope.freq_base", 1, &d, &err);
    TEST_CHECK(rc == PK_OK && d == 10000.0, "rope.freq_base %g: %s", d, err.msg);
    rc = gguf_get_float(f, "qwen3moe.expert_count", 1, &d, &err);   /* int as float */
    TEST_CHECK(rc == PK_OK && d == 16.0, "expert_count as float %g", d);
    int b = -1;
    rc = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", 1, &b, &err);
    TEST_CHECK(rc == PK_OK && b == 0, "add_bos_token %d", b);
    const gguf_kv *kv = gguf_find_kv(f, "tokenizer.ggml.tokens");
    TEST_CHECK(kv && kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING && kv->arr_n == 4096,
               "tokenizer.ggml.tokens");
    kv = gguf_find_kv(f, "tokenizer.ggml.token_type");
    TEST_CHECK(kv && kv->type == GGUF_ARRAY && kv->arr_n == 4096 && gguf_arr_int(kv, 0) >= 0,
               "tokenizer.ggml.token_type");

    /* wrong types and missing keys */
    memset(&err, 0, sizeof err);
    rc = gguf_get_int(f, "general.architecture", 1, &i64, &err);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "general.architecture"),
               "string read as int: rc %d, %s", rc, err.msg);
    memset(&err, 0, sizeof err);
    i64 = 1234;
    rc = gguf_get_int(f, "qwen3moe.no_such_key", 1, &i64, &err);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "qwen3moe.no_such_key") && i64 == 1234,
               "missing required key: rc %d, msg %s", rc, err.msg);
    memset(&err, 0, sizeof err);
    rc = gguf_get_float(f, "qwen3moe.no_such_key", 1, &d, &err);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "qwen3moe.no_such_key"),
               "missing required float key: %s", err.msg);
    char *s = NULL;
    rc = gguf_get_string(f, "qwen3moe.no_such_key", 0, &s, &err);
    TEST_CHECK(rc == PK_OK && s == NULL, "missing optional key changed *out");
    rc = gguf_get_int(f, "qwen3moe.no_such_key", 0, &i64, &err);
    TEST_CHECK(rc == PK_OK && i64 == 1234, "missing optional int key changed *out");
    gguf_close(f);

    /* I/O errors name the path */
    memset(&err, 0, sizeof err);
    static gguf_file sentinel;
    f = &sentinel;
    rc = gguf_open("models/no-such-model.gguf", &f, &err);
    TEST_CHECK(rc == PK_ERR_IO && f == NULL && strstr(err.msg, "models/no-such-model.gguf"),
               "missing file: rc %d, msg %s", rc, err.msg);
    memset(&err, 0, sizeof err);
    rc = gguf_open("models", &f, &err);
    TEST_CHECK(rc == PK_ERR_IO && f == NULL && strstr(err.msg, "models"),
               "directory: rc %d, msg %s", rc, err.msg);
}

/* ---- 2. the small crafted file ---------------------------------------------- */

static void test_small_valid(void) {
    gb g = {0};
    small_off o;
    small_cfg c = small_default();
    build_small(&g, &o, &c);
    gguf_file *f = NULL;
    pk_error err = {0};
    int rc = gguf_parse(g.b, g.n, "small.gguf", &f, &err);
    TEST_CHECK(rc == PK_OK, "small valid file rejected: %s", err.msg);
    if (rc == PK_OK) {
        TEST_CHECK(f->n_tensors == 2 && f->n_kv == 6 && f->data_offset == o.data,
                   "small: counts or data offset");
        char *s = NULL;
        rc = gguf_get_string(f, "general.architecture", 1, &s, &err);
        TEST_CHECK(rc == PK_OK && s && !strcmp(s, "tiny"), "small: architecture");
        free(s);
        const gguf_kv *kv = gguf_find_kv(f, "tokenizer.ggml.tokens");
        TEST_CHECK(kv && kv->arr_n == 3 && kv->arr_str && kv->arr_str[1].len == 2 &&
                   !memcmp(kv->arr_str[1].ptr, "bb", 2), "small: string array");
        kv = gguf_find_kv(f, "test.floats");
        TEST_CHECK(kv && kv->arr_n == 2 && gguf_arr_float(kv, 1) == -2.5 &&
                   gguf_arr_int(kv, 0) == 1, "small: float array");
        int64_t v = 0;
        rc = gguf_get_int(f, "test.big", 1, &v, &err);
        TEST_CHECK(rc == PK_OK && v == (int64_t)1 << 40, "small: u64 value");
        int flag = 0;
        rc = gguf_get_bool(f, "test.flag", 1, &flag, &err);
        TEST_CHECK(rc == PK_OK && flag == 1, "small: bool value");
        const gguf_tensor *t = gguf_find_tensor(f, "b");
        TEST_CHECK(t && t->nbytes == 128 && (const uint8_t *)t->data == g.b + o.data + 64,
                   "small: tensor b");
        gguf_close(f);
    }
    /* Float elements that no int64 holds, read as integers: must not be
     * undefined behaviour (seen with -fsanitize=float-cast-overflow). */
    float odd[2] = {1e30f, NAN};
    memcpy(g.b + o.val[KV_FLOATS] + 12, odd, sizeof odd);
    rc = gguf_parse(g.b, g.n, "small.gguf", &f, &err);
    TEST_CHECK(rc == PK_OK, "small file with 1e30 and NaN floats rejected: %s", err.msg);
    if (rc == PK_OK) {
        const gguf_kv *kv = gguf_find_kv(f, "test.floats");
        volatile int64_t a = gguf_arr_int(kv, 0), b = gguf_arr_int(kv, 1);
        (void)a; (void)b;
        TEST_CHECK(gguf_arr_float(kv, 0) == 1e30f && isnan(gguf_arr_float(kv, 1)),
                   "small: odd floats read back");
        gguf_close(f);
    }
    /* An empty but valid file: header only. */
    uint8_t hdr[24];
    memcpy(hdr, "GGUF", 4);
    put_u32(hdr + 4, 3);
    put_u64(hdr + 8, 0);
    put_u64(hdr + 16, 0);
    stats st = {.what = "header-only file"};
    check_parse(&st, hdr, sizeof hdr, 1, EXPECT_OK, NULL, "no tensors, no keys");
    put_u32(hdr + 4, 2);
    check_parse(&st, hdr, sizeof hdr, 1, EXPECT_OK, NULL, "version 2, empty");
    check_parse(&st, hdr, 0, 1, EXPECT_FAIL, NULL, "0 bytes");
    check_parse(&st, hdr, 3, 1, EXPECT_FAIL, NULL, "3 bytes");
    free(g.b);
}

/* Build the small file from cfg, optionally patch a u32/u64 at an offset,
 * and check the parse. */
static stats st_target = {.what = "targeted (small file)"};

/* field is offsetof(small_off, some array or scalar), which the element;
 * patch_size 0 leaves the file as built. */
static void small_case(const small_cfg *c, int patch_size, size_t field, int which,
                       uint64_t value, int expect, const char *want, const char *label) {
    gb g = {0};
    small_off o;
    build_small(&g, &o, c);
    const size_t *fields = (const size_t *)((const char *)&o + field);
    size_t at = fields[which];
    if (patch_size == 4) put_u32(g.b + at, (uint32_t)value);
    else if (patch_size == 8) put_u64(g.b + at, value);
    else if (patch_size == 1) g.b[at] = (uint8_t)value;
    check_parse(&st_target, g.b, g.n, 1, expect, want, label);
    free(g.b);
}

#define OFF(field) offsetof(small_off, field)

static void test_small_targeted(void) {
    small_cfg c = small_default();
    const uint64_t HUGE = 1ull << 63, MAX = UINT64_MAX;

    small_case(&c, 0, OFF(magic), 0, 0, EXPECT_OK, NULL, "unchanged");
    small_case(&c, 1, OFF(magic), 0, 'g', EXPECT_FAIL, "magic", "magic 'gGUF'");
    small_case(&c, 4, OFF(magic), 0, 0x47475546u, EXPECT_FAIL, "big-endian", "byte-swapped magic");
    small_case(&c, 4, OFF(version), 0, 1, EXPECT_FAIL, "version", "version 1");
    small_case(&c, 4, OFF(version), 0, 4, EXPECT_FAIL, "version", "version 4");
    small_case(&c, 4, OFF(version), 0, 0xFFFFFFFFu, EXPECT_FAIL, "version", "version 2^32-1");
    small_case(&c, 4, OFF(version), 0, 2, EXPECT_OK, NULL, "version 2");
    uint64_t counts[] = {HUGE, MAX, 1ull << 32, 3, 1000};
    for (int i = 0; i < 5; i++) {
        char l[64];
        snprintf(l, sizeof l, "n_tensors %llu", (unsigned long long)counts[i]);
        small_case(&c, 8, OFF(n_tensors), 0, counts[i], EXPECT_FAIL, NULL, l);
        snprintf(l, sizeof l, "n_kv %llu", (unsigned long long)counts[i]);
        small_case(&c, 8, OFF(n_kv), 0, counts[i] == 3 ? 7 : counts[i], EXPECT_FAIL, NULL, l);
    }
    small_case(&c, 8, OFF(n_tensors), 0, 1, EXPECT_ANY, NULL, "n_tensors 1 of 2");
    small_case(&c, 8, OFF(n_tensors), 0, 0, EXPECT_ANY, NULL, "n_tensors 0 of 2");
    small_case(&c, 8, OFF(n_kv), 0, 5, EXPECT_ANY, NULL, "n_kv 5 of 6");

    /* keys */
    for (int k = KV_ARCH; k <= KV_BIG; k++) {
        char l[64];
        snprintf(l, sizeof l, "key %d length 0", k);
        small_case(&c, 8, OFF(key), k, 0, EXPECT_FAIL, NULL, l);
        snprintf(l, sizeof l, "key %d length 2^63", k);
        small_case(&c, 8, OFF(key), k, HUGE, EXPECT_FAIL, NULL, l);
        snprintf(l, sizeof l, "key %d length 2^64-1", k);
        small_case(&c, 8, OFF(key), k, MAX, EXPECT_FAIL, NULL, l);
        uint32_t bad_types[] = {13, 255, 0xFFFFFFFFu};
        for (int t = 0; t < 3; t++) {
            snprintf(l, sizeof l, "key %d value type %u", k, bad_types[t]);
            small_case(&c, 4, OFF(type), k, bad_types[t], EXPECT_FAIL, "type", l);
        }
        for (uint32_t t = 0; t < 13; t++) {   /* every other type: no crash */
            snprintf(l, sizeof l, "key %d value type %u", k, t);
            small_case(&c, 4, OFF(type), k, t, EXPECT_ANY, NULL, l);
        }
    }
    small_case(&c, 1, OFF(key), KV_FLAG, 0, EXPECT_ANY, NULL, "key with length byte 0");
    {   /* a NUL byte inside a key */
        gb g = {0};
        small_off o;
        build_small(&g, &o, &c);
        g.b[o.key[KV_FLAG] + 8 + 2] = 0;
        check_parse(&st_target, g.b, g.n, 1, EXPECT_FAIL, NULL, "NUL inside a key");
        g.b[o.key[KV_FLAG] + 8 + 2] = 's';
        g.b[o.t_name[1] + 8] = 0;
        check_parse(&st_target, g.b, g.n, 1, EXPECT_FAIL, NULL, "NUL tensor name");
        free(g.b);
    }
    small_case(&c, 8, OFF(val), KV_ARCH, HUGE, EXPECT_FAIL, NULL, "string value length 2^63");
    small_case(&c, 8, OFF(val), KV_ARCH, MAX, EXPECT_FAIL, NULL, "string value length 2^64-1");
    small_case(&c, 8, OFF(val), KV_ARCH, 100000, EXPECT_FAIL, NULL, "string value past the end");
    small_case(&c, 1, OFF(val), KV_FLAG, 2, EXPECT_FAIL, "bool", "bool value 2");
    small_case(&c, 1, OFF(val), KV_FLAG, 255, EXPECT_FAIL, "bool", "bool value 255");

    /* arrays */
    small_case(&c, 8, OFF(tok_arr_n), 0, HUGE, EXPECT_FAIL, NULL, "string array count 2^63");
    small_case(&c, 8, OFF(tok_arr_n), 0, MAX, EXPECT_FAIL, NULL, "string array count 2^64-1");
    small_case(&c, 8, OFF(tok_arr_n), 0, 1ull << 40, EXPECT_FAIL, NULL, "string array count 2^40");
    small_case(&c, 8, OFF(tok_arr_n), 0, 4, EXPECT_FAIL, NULL, "string array count +1");
    small_case(&c, 8, OFF(tok_str0), 0, HUGE, EXPECT_FAIL, NULL, "array string length 2^63");
    small_case(&c, 4, OFF(tok_arr_type), 0, GGUF_ARRAY, EXPECT_FAIL, NULL, "nested array");
    small_case(&c, 4, OFF(tok_arr_type), 0, 13, EXPECT_FAIL, NULL, "array element type 13");
    small_case(&c, 4, OFF(tok_arr_type), 0, 255, EXPECT_FAIL, NULL, "array element type 255");
    for (uint32_t t = 0; t < 13; t++) {
        char l[64];
        snprintf(l, sizeof l, "array element type %u", t);
        small_case(&c, 4, OFF(tok_arr_type), 0, t, EXPECT_ANY, NULL, l);
        small_case(&c, 4, OFF(val), KV_FLOATS, t, EXPECT_ANY, NULL, l);
    }
    {   /* f32 array count 2^62: count * 4 overflows to 0 */
        gb g = {0};
        small_off o;
        build_small(&g, &o, &c);
        uint64_t big[] = {1ull << 62, (1ull << 62) + 1, 1ull << 61, MAX / 4 + 1, MAX};
        for (int i = 0; i < 5; i++) {
            char l[64];
            snprintf(l, sizeof l, "f32 array count %llu", (unsigned long long)big[i]);
            put_u64(g.b + o.val[KV_FLOATS] + 4, big[i]);
            check_parse(&st_target, g.b, g.n, 1, EXPECT_FAIL, NULL, l);
        }
        free(g.b);
    }

    /* alignment */
    uint32_t bad_align[] = {0, 3, 12, 48, 0x80000000u, 0xFFFFFFFFu};
    for (int i = 0; i < 6; i++) {
        char l[64];
        snprintf(l, sizeof l, "general.alignment %u", bad_align[i]);
        small_case(&c, 4, OFF(val), KV_ALIGN, bad_align[i], EXPECT_FAIL, "alignment", l);
    }
    small_case(&c, 4, OFF(type), KV_ALIGN, GGUF_FLOAT32, EXPECT_FAIL, "alignment",
               "general.alignment as f32");
    small_case(&c, 4, OFF(type), KV_ALIGN, GGUF_INT32, EXPECT_OK, NULL, "general.alignment as i32");
    small_case(&c, 4, OFF(val), KV_ALIGN, 16, EXPECT_ANY, NULL, "general.alignment 16 (data shifts)");
    {
        small_cfg c2 = c;
        c2.align = 64;
        small_case(&c2, 0, OFF(magic), 0, 0, EXPECT_OK, NULL, "alignment 64, built so");
        c2.t[1].offset = 96;    /* 32-aligned, not 64-aligned */
        c2.data_bytes = 224;
        small_case(&c2, 0, OFF(magic), 0, 0, EXPECT_FAIL, NULL, "offset 96 with alignment 64");
        /* alignment 1 is legal, but a tensor must still sit where its type
           can be read: the header ends at 351, so the F32 tensor 'a' is
           misplaced; one more name byte makes it 352 and both fit */
        c2 = c;
        c2.align = 1;
        small_case(&c2, 0, OFF(magic), 0, 0, EXPECT_FAIL, "not a multiple of 4", "alignment 1, F32 at offset 351");
        c2.t[0].name = "aa";
        small_case(&c2, 0, OFF(magic), 0, 0, EXPECT_OK, NULL, "alignment 1, tensors aligned by their sizes");
        c2.t[1].offset = 65;
        c2.data_bytes = 200;
        small_case(&c2, 0, OFF(magic), 0, 0, EXPECT_FAIL, "not a multiple of 2", "alignment 1, F16 at an odd offset");
    }

    /* duplicates */
    {
        small_cfg c2 = c;
        c2.t[1].name = "a";
        small_case(&c2, 0, OFF(magic), 0, 0, EXPECT_FAIL, "duplicate", "duplicate tensor name");
        c2 = c;
        c2.dup_key = "general.architecture";
        small_case(&c2, 0, OFF(magic), 0, 0, EXPECT_FAIL, "duplicate", "duplicate key");
        c2.dup_key = "test.other";
        small_case(&c2, 0, OFF(magic), 0, 0, EXPECT_OK, NULL, "one more distinct key");
    }

    /* tensor infos */
    for (int j = 0; j < 2; j++) {
        char l[96];
        uint32_t nd[] = {0, 5, 255, 0xFFFFFFFFu};
        for (int i = 0; i < 4; i++) {
            snprintf(l, sizeof l, "tensor %d n_dims %u", j, nd[i]);
            small_case(&c, 4, OFF(t_ndims), j, nd[i], EXPECT_FAIL, "n_dims", l);
        }
        uint32_t types[] = {4, 5, 31, 32, 40, 1000, 0xFFFFFFFFu};
        for (int i = 0; i < 7; i++) {
            snprintf(l, sizeof l, "tensor %d type %u", j, types[i]);
            small_case(&c, 4, OFF(t_type), j, types[i], EXPECT_FAIL, "type", l);
        }
        for (uint32_t t = 0; t < 45; t++) {
            snprintf(l, sizeof l, "tensor %d type %u", j, t);
            small_case(&c, 4, OFF(t_type), j, t, EXPECT_ANY, NULL, l);
        }
        uint64_t offs[] = {1, 16, 192, 4096, MAX, MAX - 31, HUGE};
        for (int i = 0; i < 7; i++) {
            snprintf(l, sizeof l, "tensor %d offset %llu", j, (unsigned long long)offs[i]);
            small_case(&c, 8, OFF(t_off), j, offs[i], EXPECT_FAIL, NULL, l);
        }
        uint64_t nes[] = {0, 1, 7, 1ull << 40, 1ull << 62, HUGE, MAX};
        for (int i = 0; i < 7; i++) {
            snprintf(l, sizeof l, "tensor %d ne[0] %llu", j, (unsigned long long)nes[i]);
            small_case(&c, 8, OFF(t_ne), j, nes[i], nes[i] >= (1ull << 40) ? EXPECT_FAIL : EXPECT_ANY,
                       NULL, l);
        }
    }
    {   /* exact bad shapes, written with all their dims: tensor "b" at offset 64 */
        struct { tdesc t; int expect; const char *want; const char *label; } sh[] = {
            {.t = {.n_dims = 5, .ne = {32, 1, 1, 1, 1}, .type = PK_TYPE_F16},
             .expect = EXPECT_FAIL, .want = "n_dims", .label = "5 dims"},
            {.t = {.n_dims = 3, .ne = {1ull << 32, 1ull << 32, 1ull << 32}, .type = PK_TYPE_F16},
             .expect = EXPECT_FAIL, .want = "overflow", .label = "dims 2^32 x 2^32 x 2^32"},
            {.t = {.n_dims = 2, .ne = {32, 1ull << 58}, .type = PK_TYPE_F16},
             .expect = EXPECT_FAIL, .label = "nel 2^63"},
            {.t = {.n_dims = 2, .ne = {32, 1ull << 57}, .type = PK_TYPE_F16},
             .expect = EXPECT_FAIL, .label = "nel 2^62, bytes 2^63"},
            {.t = {.n_dims = 2, .ne = {32, 1ull << 59}, .type = PK_TYPE_F32},
             .expect = EXPECT_FAIL, .label = "nel 2^64"},
            {.t = {.n_dims = 4, .ne = {32, 2, 1ull << 31, 1ull << 31}, .type = PK_TYPE_F16},
             .expect = EXPECT_FAIL, .label = "4 dims, nel 2^68"},
            {.t = {.n_dims = 1, .ne = {1ull << 62}, .type = PK_TYPE_F32},
             .expect = EXPECT_FAIL, .label = "F32 [2^62]: 2^64 bytes, wraps to 0"},
            {.t = {.n_dims = 1, .ne = {33}, .type = PK_TYPE_Q8_0},
             .expect = EXPECT_FAIL, .want = "block", .label = "Q8_0 row of 33"},
            {.t = {.n_dims = 1, .ne = {64}, .type = PK_TYPE_Q8_0},
             .expect = EXPECT_OK, .label = "Q8_0 row of 64 (68 bytes)"},
            {.t = {.n_dims = 1, .ne = {256}, .type = PK_TYPE_Q4_K},
             .expect = EXPECT_OK, .label = "Q4_K row of 256 (144 bytes)"},
            {.t = {.n_dims = 1, .ne = {1024}, .type = PK_TYPE_Q4_K},
             .expect = EXPECT_FAIL, .label = "Q4_K 576 bytes past the end"},
            {.t = {.n_dims = 2, .ne = {0, 5}, .type = PK_TYPE_F16},
             .expect = EXPECT_ANY, .label = "ne[0] = 0"},
            {.t = {.n_dims = 3, .ne = {0, 1ull << 40, 1ull << 40}, .type = PK_TYPE_F16},
             .expect = EXPECT_ANY, .label = "ne = [0, 2^40, 2^40]"},
            {.t = {.n_dims = 4, .ne = {0, 1ull << 62, 1ull << 62, 1ull << 62}, .type = PK_TYPE_F16},
             .expect = EXPECT_ANY, .label = "ne = [0, 2^62, 2^62, 2^62]"},
            {.t = {.n_dims = 2, .ne = {32, 0}, .type = PK_TYPE_F16},
             .expect = EXPECT_ANY, .label = "ne[1] = 0"},
        };
        for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
            small_cfg c2 = c;
            c2.t[1] = sh[i].t;
            c2.t[1].name = "b";
            c2.t[1].offset = 64;
            c2.data_bytes = 512;
            small_case(&c2, 0, OFF(magic), 0, 0, sh[i].expect, sh[i].want, sh[i].label);
        }
    }
}

/* Exhaustive damage to the small file: every truncation, every byte set to
 * several values, from exact-size copies. */
static void test_small_exhaustive(void) {
    stats tr = {.what = "truncations (small file)"};
    stats fl = {.what = "byte flips (small file)"};
    gb g = {0};
    small_off o;
    small_cfg c = small_default();
    build_small(&g, &o, &c);
    char l[64];
    for (size_t k = 0; k < g.n; k++) {
        snprintf(l, sizeof l, "truncated to %zu of %zu", k, g.n);
        check_parse(&tr, g.b, k, 1, EXPECT_FAIL, NULL, l);
    }
    check_parse(&tr, g.b, g.n, 1, EXPECT_OK, NULL, "untruncated");
    for (size_t k = 0; k < o.data; k++) {
        uint8_t orig = g.b[k];
        uint8_t vals[] = {0x00, 0xFF, 0x80, 0x7F, (uint8_t)(orig ^ 1), (uint8_t)(orig + 1),
                          (uint8_t)(orig - 1), (uint8_t)(orig ^ 0x40)};
        for (size_t v = 0; v < sizeof vals; v++) {
            if (vals[v] == orig) continue;
            g.b[k] = vals[v];
            snprintf(l, sizeof l, "byte %zu: 0x%02x -> 0x%02x", k, orig, vals[v]);
            check_parse(&fl, g.b, g.n, 1, EXPECT_ANY, NULL, l);
        }
        g.b[k] = orig;
    }
    report(&tr);
    report(&fl);
    free(g.b);
}

/* ---- 3. the real file, damaged ---------------------------------------------- */

/* Field positions in the real header, found by an independent walk. */
typedef struct kvpos {
    size_t key, type, val;     /* val: the value, or the array's element type */
    uint32_t vtype, arr_type;
    uint64_t key_len;
} kvpos;
typedef struct tpos {
    size_t name, ndims, ne, type, off;
    uint32_t nd;
    uint64_t name_len, offset;
} tpos;

static uint64_t rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* Walk the trusted good header; returns the end of the tensor infos. */
static size_t walk_header(const uint8_t *b, kvpos *kv, uint64_t n_kv, tpos *tp, uint64_t n_t) {
    size_t p = 24;
    for (uint64_t i = 0; i < n_kv; i++) {
        kv[i].key = p;
        kv[i].key_len = rd64(b + p);
        p += 8 + kv[i].key_len;
        kv[i].type = p;
        kv[i].vtype = rd32(b + p);
        p += 4;
        kv[i].val = p;
        if (kv[i].vtype == GGUF_STRING) {
            p += 8 + rd64(b + p);
        } else if (kv[i].vtype == GGUF_ARRAY) {
            kv[i].arr_type = rd32(b + p);
            uint64_t n = rd64(b + p + 4);
            p += 12;
            if (kv[i].arr_type == GGUF_STRING)
                for (uint64_t j = 0; j < n; j++) p += 8 + rd64(b + p);
            else
                p += n * (size_t)vsize[kv[i].arr_type];
        } else {
            p += (size_t)vsize[kv[i].vtype];
        }
    }
    for (uint64_t i = 0; i < n_t; i++) {
        tp[i].name = p;
        tp[i].name_len = rd64(b + p);
        p += 8 + tp[i].name_len;
        tp[i].ndims = p;
        tp[i].nd = rd32(b + p);
        p += 4;
        tp[i].ne = p;
        p += 8 * tp[i].nd;
        tp[i].type = p;
        p += 4;
        tp[i].off = p;
        tp[i].offset = rd64(b + p);
        p += 8;
    }
    return p;
}

static stats st_real = {.what = "targeted (real header)"};

/* Set a field of the real image, parse, restore. */
static void real_case(uint8_t *img, uint64_t size, size_t at, int width, uint64_t value,
                      int expect, const char *want, const char *label) {
    uint8_t save[8];
    memcpy(save, img + at, (size_t)width);
    if (width == 8) put_u64(img + at, value);
    else if (width == 4) put_u32(img + at, (uint32_t)value);
    else img[at] = (uint8_t)value;
    check_parse(&st_real, img, size, 0, expect, want, label);
    memcpy(img + at, save, (size_t)width);
}

static void test_real_damaged(void) {
    uint64_t size = 0;
    uint8_t *img = read_file(MODEL, &size);
    TEST_CHECK(img != NULL, "cannot read %s", MODEL);
    if (!img) return;
    uint64_t n_t = rd64(img + 8), n_kv = rd64(img + 16);
    kvpos *kv = calloc(n_kv, sizeof *kv);
    tpos *tp = calloc(n_t, sizeof *tp);
    size_t hend = walk_header(img, kv, n_kv, tp, n_t);
    size_t data = (hend + 31) / 32 * 32;
    uint64_t data_size = size - data;
    const uint64_t HUGE = 1ull << 63, MAX = UINT64_MAX;
    char l[160];

    /* truncations: every byte of the first 4 KB, a stride through the rest of
     * the header, the header's end, then a stride through the data */
    stats tr = {.what = "truncations (real file)"};
    for (size_t k = 0; k < 4096; k++) {
        snprintf(l, sizeof l, "truncated to %zu", k);
        check_parse(&tr, img, k, 1, EXPECT_FAIL, NULL, l);
    }
    for (size_t k = 4096; k < data + 64; k += (k < hend - 64 ? 127 : 1)) {
        snprintf(l, sizeof l, "truncated to %zu", k);
        check_parse(&tr, img, k, 1, EXPECT_FAIL, NULL, l);
    }
    uint64_t ends[] = {data + tp[1].offset, data + tp[1].offset + 1, size / 3, size / 2,
                       size - 4096, size - 33, size - 32, size - 2, size - 1};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        snprintf(l, sizeof l, "truncated to %llu of %llu", (unsigned long long)ends[i],
                 (unsigned long long)size);
        check_parse(&tr, img, ends[i], 1, EXPECT_FAIL, "past the end", l);
    }
    check_parse(&tr, img, size, 0, EXPECT_OK, NULL, "untruncated");

    /* header fields */
    for (int i = 0; i < 4; i++) {
        snprintf(l, sizeof l, "magic byte %d", i);
        real_case(img, size, (size_t)i, 1, img[i] ^ 0x20, EXPECT_FAIL, "magic", l);
    }
    uint32_t vers[] = {0, 1, 4, 0xFFFFFFFFu};
    for (int i = 0; i < 4; i++) {
        snprintf(l, sizeof l, "version %u", vers[i]);
        real_case(img, size, 4, 4, vers[i], EXPECT_FAIL, "version", l);
    }
    real_case(img, size, 4, 4, 2, EXPECT_OK, NULL, "version 2");
    uint64_t counts[] = {HUGE, MAX, 1ull << 32, 1ull << 40};
    for (int i = 0; i < 4; i++) {
        snprintf(l, sizeof l, "n_tensors %llu", (unsigned long long)counts[i]);
        real_case(img, size, 8, 8, counts[i], EXPECT_FAIL, "tensor count", l);
        snprintf(l, sizeof l, "n_kv %llu", (unsigned long long)counts[i]);
        real_case(img, size, 16, 8, counts[i], EXPECT_FAIL, "metadata count", l);
    }
    real_case(img, size, 8, 8, n_t + 1, EXPECT_FAIL, NULL, "n_tensors + 1");
    real_case(img, size, 16, 8, n_kv + 1, EXPECT_FAIL, NULL, "n_kv + 1");
    real_case(img, size, 8, 8, n_t - 1, EXPECT_ANY, NULL, "n_tensors - 1");
    real_case(img, size, 8, 8, 0, EXPECT_ANY, NULL, "n_tensors 0");
    real_case(img, size, 16, 8, n_kv - 1, EXPECT_ANY, NULL, "n_kv - 1");
    real_case(img, size, 16, 8, 0, EXPECT_ANY, NULL, "n_kv 0");

    /* every key/value */
    for (uint64_t i = 0; i < n_kv; i++) {
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)kv[i].key_len, (const char *)img + kv[i].key + 8);
        uint64_t klen[] = {0, HUGE, MAX, size, kv[i].key_len + 1, kv[i].key_len - 1};
        for (int j = 0; j < 6; j++) {
            snprintf(l, sizeof l, "key '%s' length %llu", key, (unsigned long long)klen[j]);
            real_case(img, size, kv[i].key, 8, klen[j], j < 4 ? EXPECT_FAIL : EXPECT_ANY, NULL, l);
        }
        uint32_t types[] = {13, 255, 0xFFFFFFFFu};
        for (int j = 0; j < 3; j++) {
            snprintf(l, sizeof l, "key '%s' value type %u", key, types[j]);
            real_case(img, size, kv[i].type, 4, types[j], EXPECT_FAIL, "type", l);
        }
        for (uint32_t t = 0; t < 13; t++) {
            snprintf(l, sizeof l, "key '%s' value type %u", key, t);
            real_case(img, size, kv[i].type, 4, t, t == kv[i].vtype ? EXPECT_OK : EXPECT_ANY, NULL, l);
        }
        if (kv[i].vtype == GGUF_STRING) {
            uint64_t slen[] = {HUGE, MAX, size};
            for (int j = 0; j < 3; j++) {
                snprintf(l, sizeof l, "key '%s' string length %llu", key, (unsigned long long)slen[j]);
                real_case(img, size, kv[i].val, 8, slen[j], EXPECT_FAIL, NULL, l);
            }
        }
        if (kv[i].vtype == GGUF_BOOL) {
            snprintf(l, sizeof l, "key '%s' bool 2", key);
            real_case(img, size, kv[i].val, 1, 2, EXPECT_FAIL, "bool", l);
        }
        if (kv[i].vtype == GGUF_ARRAY) {
            uint32_t at[] = {GGUF_ARRAY, 13, 255, 0xFFFFFFFFu};
            for (int j = 0; j < 4; j++) {
                snprintf(l, sizeof l, "key '%s' array element type %u", key, at[j]);
                real_case(img, size, kv[i].val, 4, at[j], EXPECT_FAIL, NULL, l);
            }
            for (uint32_t t = 0; t < 13; t++) {
                snprintf(l, sizeof l, "key '%s' array element type %u", key, t);
                real_case(img, size, kv[i].val, 4, t, t == kv[i].arr_type ? EXPECT_OK : EXPECT_ANY,
                          NULL, l);
            }
            uint64_t an[] = {HUGE, MAX, 1ull << 62, (1ull << 62) + 1, 1ull << 61, size};
            for (int j = 0; j < 6; j++) {
                snprintf(l, sizeof l, "key '%s' array count %llu", key, (unsigned long long)an[j]);
                real_case(img, size, kv[i].val + 4, 8, an[j], EXPECT_FAIL, NULL, l);
            }
            if (kv[i].arr_type == GGUF_STRING) {
                snprintf(l, sizeof l, "key '%s' first string length 2^63", key);
                real_case(img, size, kv[i].val + 12, 8, HUGE, EXPECT_FAIL, NULL, l);
            }
        }
        if (!strcmp(key, "general.alignment")) {
            uint32_t al[] = {0, 3, 24, 48, 0x80000000u};
            for (int j = 0; j < 5; j++) {
                snprintf(l, sizeof l, "general.alignment %u", al[j]);
                real_case(img, size, kv[i].val, 4, al[j], EXPECT_FAIL, "alignment", l);
            }
            real_case(img, size, kv[i].type, 4, GGUF_FLOAT32, EXPECT_FAIL, "alignment",
                      "general.alignment as f32");
            real_case(img, size, kv[i].val, 4, 16, EXPECT_ANY, NULL, "general.alignment 16");
            real_case(img, size, kv[i].val, 4, 64, EXPECT_ANY, NULL, "general.alignment 64");
        }
        /* a duplicate: copy an earlier key of the same length over this one */
        for (uint64_t e = 0; e < i; e++) {
            if (kv[e].key_len != kv[i].key_len) continue;
            uint8_t save[256];
            size_t kl = (size_t)kv[i].key_len;
            if (kl > sizeof save) break;
            memcpy(save, img + kv[i].key + 8, kl);
            memcpy(img + kv[i].key + 8, img + kv[e].key + 8, kl);
            snprintf(l, sizeof l, "key '%s' renamed to an earlier key", key);
            check_parse(&st_real, img, size, 0, EXPECT_FAIL, "duplicate", l);
            memcpy(img + kv[i].key + 8, save, kl);
            break;
        }
    }

    /* every tensor info */
    int n_dup = 0;
    for (uint64_t i = 0; i < n_t; i++) {
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)tp[i].name_len, (const char *)img + tp[i].name + 8);
        uint64_t nlen[] = {0, HUGE, MAX, tp[i].name_len + 1};
        for (int j = 0; j < 4; j++) {
            snprintf(l, sizeof l, "tensor '%s' name length %llu", name, (unsigned long long)nlen[j]);
            real_case(img, size, tp[i].name, 8, nlen[j], j < 3 ? EXPECT_FAIL : EXPECT_ANY, NULL, l);
        }
        uint32_t nd[] = {0, 5, 255, 0xFFFFFFFFu};
        for (int j = 0; j < 4; j++) {
            snprintf(l, sizeof l, "tensor '%s' n_dims %u", name, nd[j]);
            real_case(img, size, tp[i].ndims, 4, nd[j], EXPECT_FAIL, "n_dims", l);
        }
        for (uint32_t d = 1; d <= 4; d++) {
            snprintf(l, sizeof l, "tensor '%s' n_dims %u", name, d);
            real_case(img, size, tp[i].ndims, 4, d, d == tp[i].nd ? EXPECT_OK : EXPECT_ANY, NULL, l);
        }
        uint32_t ty[] = {4, 5, 31, 32, 1000, 0xFFFFFFFFu};
        for (int j = 0; j < 6; j++) {
            snprintf(l, sizeof l, "tensor '%s' type %u", name, ty[j]);
            real_case(img, size, tp[i].type, 4, ty[j], EXPECT_FAIL, "type", l);
        }
        for (uint32_t t = 0; t < 40 && (i < 3 || i == n_t - 1); t++) {
            snprintf(l, sizeof l, "tensor '%s' type %u", name, t);
            real_case(img, size, tp[i].type, 4, t, EXPECT_ANY, NULL, l);
        }
        for (uint32_t d = 0; d < tp[i].nd; d++) {
            uint64_t ne[] = {0, 1ull << 40, 1ull << 62, HUGE, MAX};
            for (int j = 0; j < 5; j++) {
                snprintf(l, sizeof l, "tensor '%s' ne[%u] = %llu", name, d, (unsigned long long)ne[j]);
                real_case(img, size, tp[i].ne + 8 * d, 8, ne[j], j ? EXPECT_FAIL : EXPECT_ANY, NULL, l);
            }
        }
        if (tp[i].nd >= 2) {  /* ne[0] = 0 with huge outer dims: nel is 0, rows overflow */
            uint8_t save[32];
            memcpy(save, img + tp[i].ne, 8 * tp[i].nd);
            put_u64(img + tp[i].ne, 0);
            for (uint32_t d = 1; d < tp[i].nd; d++) put_u64(img + tp[i].ne + 8 * d, 1ull << 40);
            snprintf(l, sizeof l, "tensor '%s' ne = [0, 2^40, ...]", name);
            check_parse(&st_real, img, size, 0, EXPECT_ANY, NULL, l);
            memcpy(img + tp[i].ne, save, 8 * tp[i].nd);
        }
        uint64_t off[] = {tp[i].offset + 1, tp[i].offset + 16, data_size, (data_size + 31) / 32 * 32,
                          MAX, MAX - 31, HUGE};
        for (int j = 0; j < 7; j++) {
            snprintf(l, sizeof l, "tensor '%s' offset %llu", name, (unsigned long long)off[j]);
            real_case(img, size, tp[i].off, 8, off[j], EXPECT_FAIL, NULL, l);
        }
        /* a duplicate name: copy an earlier name of the same length over it */
        for (uint64_t e = 0; e < i && n_dup < 20; e++) {
            if (tp[e].name_len != tp[i].name_len) continue;
            uint8_t save[256];
            size_t nl = (size_t)tp[i].name_len;
            if (nl > sizeof save) break;
            memcpy(save, img + tp[i].name + 8, nl);
            memcpy(img + tp[i].name + 8, img + tp[e].name + 8, nl);
            snprintf(l, sizeof l, "tensor '%s' renamed to '%.*s'", name, (int)nl,
                     (const char *)img + tp[e].name + 8);
            check_parse(&st_real, img, size, 0, EXPECT_FAIL, "duplicate", l);
            memcpy(img + tp[i].name + 8, save, nl);
            n_dup++;
            break;
        }
    }
    report(&tr);
    report(&st_real);

    /* random damage anywhere in the header: single bytes, then runs of 1-8
     * random bytes, from a fixed seed */
    stats fl = {.what = "random flips (real header)"};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 4000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = (size_t)((x >> 20) % hend);
        int len = i < 2000 ? 1 : 1 + (int)((x >> 8) % 8);
        if (at + (size_t)len > hend) len = (int)(hend - at);
        uint8_t save[8];
        memcpy(save, img + at, (size_t)len);
        for (int j = 0; j < len; j++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            img[at + (size_t)j] = (uint8_t)(x >> 56);
        }
        snprintf(l, sizeof l, "random run %d: %d bytes at %zu", i, len, at);
        check_parse(&fl, img, size, 0, EXPECT_ANY, NULL, l);
        memcpy(img + at, save, (size_t)len);
    }
    report(&fl);
    check_parse(&fl, img, size, 0, EXPECT_OK, NULL, "restored image");
    free(kv);
    free(tp);
    free(img);
}

/* ---- 4. through gguf_open: files on disk -------------------------------------- */

static int write_file(const char *path, const void *b, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return 0;
    size_t w = n ? fwrite(b, 1, n, fp) : 0;
    return fclose(fp) == 0 && w == n;
}

static void open_case(const char *path, const void *b, size_t n, int want_rc, const char *label) {
    TEST_CHECK(write_file(path, b, n), "cannot write %s", path);
    gguf_file *f = NULL;
    pk_error err;
    memset(&err, 0, sizeof err);
    int rc = gguf_open(path, &f, &err);
    TEST_CHECK(rc == want_rc, "gguf_open %s: rc %d, want %d: %s", label, rc, want_rc, err.msg);
    if (rc == PK_OK && f) {
        char why[256] = "";
        TEST_CHECK(check_accepted(f, f->map, f->size, why, sizeof why), "gguf_open %s: %s",
                   label, why);
        gguf_close(f);
    } else {
        TEST_CHECK(f == NULL && strstr(err.msg, path) && !strchr(err.msg, '\n'),
                   "gguf_open %s: message \"%s\" lacks the path, or out is set", label, err.msg);
    }
    unlink(path);
}

static void test_open_files(void) {
    mkdir("build", 0755);
    mkdir(TMPDIR, 0755);
    gb g = {0};
    small_off o;
    small_cfg c = small_default();
    build_small(&g, &o, &c);
    open_case(TMPDIR "/small.gguf", g.b, g.n, PK_OK, "small valid file");
    open_case(TMPDIR "/empty.gguf", g.b, 0, PK_ERR_FORMAT, "empty file");
    open_case(TMPDIR "/tiny.gguf", g.b, 10, PK_ERR_FORMAT, "10-byte file");
    open_case(TMPDIR "/hdr.gguf", g.b, 24, PK_ERR_FORMAT, "header of counts only");
    open_case(TMPDIR "/trunc.gguf", g.b, 100, PK_ERR_FORMAT, "truncated in the keys");
    open_case(TMPDIR "/nodata.gguf", g.b, o.data, PK_ERR_FORMAT, "no tensor data");
    open_case(TMPDIR "/short.gguf", g.b, g.n - 1, PK_ERR_FORMAT, "one byte short");
    g.b[0] = 'X';
    open_case(TMPDIR "/magic.gguf", g.b, g.n, PK_ERR_FORMAT, "bad magic");
    g.b[0] = 'G';
    put_u32(g.b + o.t_ndims[1], 7);
    open_case(TMPDIR "/ndims.gguf", g.b, g.n, PK_ERR_FORMAT, "n_dims 7");
    free(g.b);

    uint64_t size = 0;
    uint8_t *img = read_file(MODEL, &size);
    if (img) {
        open_case(TMPDIR "/real-head.gguf", img, 136960, PK_ERR_FORMAT, "real header only");
        open_case(TMPDIR "/real-half.gguf", img, 136960 + 4096, PK_ERR_FORMAT, "real, 4 KB of data");
        free(img);
    }
    rmdir(TMPDIR);
}

int main(void) {
    test_good_model();
    test_small_valid();
    test_small_targeted();
    report(&st_target);
    test_small_exhaustive();
    test_real_damaged();
    test_open_files();
    return TEST_REPORT();
}
