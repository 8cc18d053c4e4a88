/* engine/state.c - the sequence state of a context: the tokens it holds, cutting
 * it back, recurrent-state checkpoints, and saving / loading it as bytes.
 *
 * Truncation: attention layers keep a row per position (engine/kv.h), so a
 * shorter prefix is just a smaller c->pos; later rows are overwritten as
 * positions are reused. A Gated DeltaNet layer's conv and recurrent states
 * are a running sum over all positions: they go back only to a checkpoint,
 * a copy of every such layer's states taken at a position.
 *
 * A saved state, all integers little-endian (the hosts pocket runs on):
 *
 *   header   HEADER_BYTES: magic, version, the model file's identity
 *            (pk_model.file_id, its size), the cache element types, the
 *            layer counts, tokens, checkpoints, the payload's bytes, a
 *            checksum of the whole (pk_hash64 of the header from byte 72
 *            on zeroed, then of each region below in order) and one of the
 *            header's first 72 bytes (so a damaged header is told from
 *            another model's state)
 *   tokens   int32 [n_tokens]
 *   ckpts    int32 [n_ckpt] positions, ascending, in [1, n_tokens]
 *   caches   per attention layer, in layer order, the rows of the first
 *            n_tokens positions: keys (F32: each key dimension's n_tokens
 *            floats; else each kv head's n_tokens rows), then values (F32:
 *            n_tokens rows of v_dim floats; else per head); per latent
 *            layer its n_tokens rows
 *   states   conv then recurrent states of the DeltaNet layers (live)
 *   ckpt i   the same, as checkpoint i kept them
 *
 * The regions are walked by one function (walk) for saving, checking and
 * loading, so the three cannot disagree on the layout.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "engine/context.h"

enum { HEADER_BYTES = 96, STATE_VERSION = 2 };   /* 2: F16 keys in transposed tiles */
static const char MAGIC[8] = {'P', 'K', 'S', 'T', 'A', 'T', 'E', 0};

/* ---- truncation and checkpoints ------------------------------------------------ */

const int32_t *pk_context_tokens(const pk_context *c) { return c->tokens; }

/* Index of the latest checkpoint at or before position n, -1 if none. */
static int ckpt_at_or_before(const pk_context *c, int n) {
    int i = c->n_ckpt - 1;
    while (i >= 0 && c->ckpt_pos[i] > n) i--;
    return i;
}

int pk_context_reachable(const pk_context *c, int n) {
    n = n < 0 ? 0 : n > c->pos ? c->pos : n;
    if (n == c->pos || c->kv.n_rec == 0) return n;
    const int i = ckpt_at_or_before(c, n);
    return i < 0 ? 0 : c->ckpt_pos[i];
}

static size_t conv_floats(const pk_kv *kv) { return (size_t)kv->n_rec * kv->conv_rows * kv->conv_dim; }
static size_t ssm_floats(const pk_kv *kv) { return (size_t)kv->n_rec * kv->ssm_size; }

static float *ckpt_data(const pk_context *c, int i) {
    return c->ckpt_state + (size_t)c->ckpt_slot[i] * c->ckpt_floats;
}

int pk_context_truncate(pk_context *c, int n) {
    const int to = pk_context_reachable(c, n);
    if (to == c->pos) return to;
    if (c->kv.n_rec) {
        const int i = ckpt_at_or_before(c, to);
        if (i >= 0 && c->ckpt_pos[i] == to) {
            const float *d = ckpt_data(c, i);
            memcpy(c->kv.conv, d, conv_floats(&c->kv) * sizeof(float));
            memcpy(c->kv.ssm, d + conv_floats(&c->kv), ssm_floats(&c->kv) * sizeof(float));
        } else {
            PK_ASSERT(to == 0);
            pk_kv_clear(&c->kv);
        }
        c->n_ckpt = i + 1;   /* later ones described positions that are gone */
    }
    c->pos = to;
    c->n_plan = 0;
    return to;
}

/* A new checkpoint at pos (after every one held): the ring's next data
 * slot, or the earliest position's when all are in use; its data is the
 * caller's to fill. */
static float *ckpt_push(pk_context *c, int pos) {
    int slot;
    if (c->n_ckpt < c->ckpt_cap) {
        /* the first data slot no checkpoint uses */
        for (slot = 0;; slot++) {
            int used = 0;
            for (int j = 0; j < c->n_ckpt && !used; j++) used = c->ckpt_slot[j] == slot;
            if (!used) break;
        }
    } else {   /* replace the earliest position's */
        slot = c->ckpt_slot[0];
        memmove(c->ckpt_pos, c->ckpt_pos + 1, (size_t)(c->n_ckpt - 1) * sizeof *c->ckpt_pos);
        memmove(c->ckpt_slot, c->ckpt_slot + 1, (size_t)(c->n_ckpt - 1) * sizeof *c->ckpt_slot);
        c->n_ckpt--;
    }
    c->ckpt_pos[c->n_ckpt] = pos;
    c->ckpt_slot[c->n_ckpt] = slot;
    return ckpt_data(c, c->n_ckpt++);
}

void pk_context_checkpoint(pk_context *c) {
    if (!c->ckpt_cap || c->pos == 0) return;
    int i = ckpt_at_or_before(c, c->pos);
    if (i >= 0 && c->ckpt_pos[i] == c->pos) return;
    /* checkpoints are taken at the end of the sequence: after every other */
    float *d = ckpt_push(c, c->pos);
    memcpy(d, c->kv.conv, conv_floats(&c->kv) * sizeof(float));
    memcpy(d + conv_floats(&c->kv), c->kv.ssm, ssm_floats(&c->kv) * sizeof(float));
}

int pk_context_plan_checkpoints(pk_context *c, const int *pos, int n, pk_error *err) {
    if (n < 0 || (n && !pos)) return pk_errorf(err, PK_ERR_ARG, "bad checkpoint plan (n = %d)", n);
    const int most = c->ckpt_cap < PK_PLAN_MAX ? c->ckpt_cap : PK_PLAN_MAX;
    if (c->ckpt_cap && n > most)
        return pk_errorf(err, PK_ERR_ARG, "%d checkpoints planned; this context keeps at most %d", n, most);
    for (int i = 0; i < n; i++)
        if (pos[i] <= c->pos || pos[i] > c->n_ctx || (i && pos[i] <= pos[i - 1]))
            return pk_errorf(err, PK_ERR_ARG, "checkpoint position %d (index %d) is not ascending in (%d, %d]",
                             pos[i], i, c->pos, c->n_ctx);
    c->n_plan = c->ckpt_cap ? n : 0;   /* nothing to keep without recurrent layers */
    if (c->n_plan) memcpy(c->plan, pos, (size_t)n * sizeof *pos);
    return PK_OK;
}

void pk_ckpt_marks(pk_context *c, int nb) {
    c->n_mark = 0;
    for (int i = 0; i < c->n_plan && c->plan[i] < c->pos + nb; i++) {
        if (c->plan[i] <= c->pos) continue;
        c->mark_off[c->n_mark] = c->plan[i] - c->pos;
        c->mark_data[c->n_mark++] = ckpt_push(c, c->plan[i]);
    }
}

void pk_ckpt_marks_done(pk_context *c, int ok) {
    c->n_mark = 0;
    if (!ok) {   /* the marks' data was not all written: drop what lies ahead */
        while (c->n_ckpt > 0 && c->ckpt_pos[c->n_ckpt - 1] > c->pos) c->n_ckpt--;
        c->n_plan = 0;
        return;
    }
    int k = 0;
    for (int i = 0; i < c->n_plan; i++) {
        if (c->plan[i] == c->pos) pk_context_checkpoint(c);
        if (c->plan[i] > c->pos) c->plan[k++] = c->plan[i];
    }
    c->n_plan = k;
}

size_t pk_ckpt_conv_offset(const pk_context *c, int il) { return (size_t)(pk_kv_conv(&c->kv, il) - c->kv.conv); }
size_t pk_ckpt_ssm_offset(const pk_context *c, int il) {
    return conv_floats(&c->kv) + (size_t)(pk_kv_ssm(&c->kv, il) - c->kv.ssm);
}

int pk_context_checkpoints(const pk_context *c, int *pos, int cap) {
    for (int i = 0; i < c->n_ckpt && i < cap; i++) pos[i] = c->ckpt_pos[i];
    return c->n_ckpt;
}

uint64_t pk_context_checkpoint_bytes(const pk_context *c) { return (uint64_t)c->ckpt_floats * sizeof(float); }

/* ---- the regions of a saved state ------------------------------------------------ */

/* Called with each region of context memory in the saved order: p, bytes. */
typedef void (*region_fn)(void *ud, void *p, size_t n);

/* The cache and state regions of c for n_tok positions and n_ck checkpoints
 * in data slots slots[0..n_ck) (NULL, or a slot < 0: a NULL region of the
 * same size, for walks that only count, check or skip). The tokens and the
 * checkpoints' positions are not context memory: the callers handle them. */
static void walk(pk_context *c, int n_tok, const int *slots, int n_ck, region_fn fn, void *ud) {
    const pk_kv *kv = &c->kv;
    const size_t n = (size_t)n_tok;
    for (int l = 0; l < kv->n_layer; l++) {
        const pk_kv_layer *a = &kv->att[l];
        if (kv->kind[l] == PK_MEM_KV) {
            if (kv->type_k == PK_TYPE_F32)
                for (int i = 0; i < a->k_dim; i++) fn(ud, pk_kv_kt(kv, l, i), n * sizeof(float));
            else if (kv->type_k == PK_TYPE_F16)   /* the whole tiles, then the last one's positions */
                for (int g = 0; g < a->n_head_kv; g++) {
                    const size_t hd = (size_t)(a->k_dim / a->n_head_kv), full = n / PK_KT, rem = n % PK_KT;
                    uint16_t *t = pk_kv_kt16(kv, l, g);
                    if (full) fn(ud, t, full * PK_KT * hd * sizeof(uint16_t));
                    for (size_t e = 0; rem && e < hd; e++)
                        fn(ud, t + (full * hd + e) * PK_KT, rem * sizeof(uint16_t));
                }
            else
                for (int g = 0; g < a->n_head_kv; g++) fn(ud, pk_kv_k(kv, l, g, 0), n * a->k_head);
            if (kv->type_v == PK_TYPE_F32)
                fn(ud, pk_kv_v(kv, l, 0), n * a->v_dim * sizeof(float));
            else
                for (int g = 0; g < a->n_head_kv; g++) fn(ud, pk_kv_vh(kv, l, g, 0), n * a->v_head);
        } else if (kv->kind[l] == PK_MEM_LATENT) {
            fn(ud, pk_kv_lat(kv, l, 0), n * kv->lat_row);
        }
    }
    fn(ud, kv->conv, conv_floats(kv) * sizeof(float));
    fn(ud, kv->ssm, ssm_floats(kv) * sizeof(float));
    for (int i = 0; i < n_ck; i++) {
        float *d = slots && slots[i] >= 0 ? c->ckpt_state + (size_t)slots[i] * c->ckpt_floats : NULL;
        fn(ud, d, conv_floats(kv) * sizeof(float));
        fn(ud, d ? d + conv_floats(kv) : NULL, ssm_floats(kv) * sizeof(float));
    }
}

/* ---- the header ------------------------------------------------------------------ */

typedef struct state_header {
    uint64_t model_id, file_size, payload_bytes, checksum;
    int32_t type_k, type_v, n_layer, n_att, n_lat, n_rec, n_tokens, n_ckpt;
} state_header;

static void put32(uint8_t *b, int32_t v) { memcpy(b, &v, 4); }
static void put64(uint8_t *b, uint64_t v) { memcpy(b, &v, 8); }
static int32_t get32(const uint8_t *b) {
    int32_t v;
    memcpy(&v, b, 4);
    return v;
}
static uint64_t get64(const uint8_t *b) {
    uint64_t v;
    memcpy(&v, b, 8);
    return v;
}

static void header_write(uint8_t b[HEADER_BYTES], const state_header *h) {
    memset(b, 0, HEADER_BYTES);
    memcpy(b, MAGIC, 8);
    put32(b + 8, STATE_VERSION);
    put32(b + 12, HEADER_BYTES);
    put64(b + 16, h->model_id);
    put64(b + 24, h->file_size);
    const int32_t f[] = {h->type_k, h->type_v, h->n_layer, h->n_att, h->n_lat, h->n_rec, h->n_tokens, h->n_ckpt};
    for (int i = 0; i < 8; i++) put32(b + 32 + 4 * i, f[i]);
    put64(b + 64, h->payload_bytes);
    put64(b + 72, h->checksum);
    put64(b + 80, pk_hash64(0, b, 72));
}

/* Read and check a header against model m: its identity and layer counts;
 * the lengths in it must be possible. `what` names the source. */
static int header_read(const pk_model *m, const uint8_t *b, size_t n, state_header *h, const char *what,
                       pk_error *err) {
    if (n < HEADER_BYTES)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: truncated: %zu bytes, a state's header alone is %d", what, n,
                         HEADER_BYTES);
    if (memcmp(b, MAGIC, 8)) return pk_errorf(err, PK_ERR_FORMAT, "%s: not a pocket state (bad magic)", what);
    if (get32(b + 8) != STATE_VERSION || get32(b + 12) != HEADER_BYTES)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: state version %d is not %d (saved by another pocket)", what,
                         get32(b + 8), STATE_VERSION);
    /* a damaged header is corrupt, not another model's state */
    if (get64(b + 80) != pk_hash64(0, b, 72) || get64(b + 88) != 0)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: corrupt (its header's checksum does not match)", what);
    h->model_id = get64(b + 16);
    h->file_size = get64(b + 24);
    int32_t *f[] = {&h->type_k, &h->type_v, &h->n_layer, &h->n_att, &h->n_lat, &h->n_rec, &h->n_tokens, &h->n_ckpt};
    for (int i = 0; i < 8; i++) *f[i] = get32(b + 32 + 4 * i);
    h->payload_bytes = get64(b + 64);
    h->checksum = get64(b + 72);
    if (h->file_size != m->gguf->size)
        return pk_errorf(err, PK_ERR_ARG,
                         "%s: the state was saved with another model file (of %llu bytes; %s has %llu)", what,
                         (unsigned long long)h->file_size, m->path, (unsigned long long)m->gguf->size);
    if (h->model_id != m->file_id)
        return pk_errorf(err, PK_ERR_ARG,
                         "%s: the state was saved with another model file (of the same size as %s, but other "
                         "metadata or weights)", what, m->path);
    if (h->n_layer != m->hp.n_layer)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %d layers in the state, %d in the model", what, h->n_layer,
                         m->hp.n_layer);
    if (h->n_tokens < 0 || h->n_tokens > (1 << 22) || h->n_ckpt < 0 || h->n_ckpt > h->n_tokens)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: bad lengths (%d tokens, %d checkpoints)", what, h->n_tokens,
                         h->n_ckpt);
    const uint64_t need = (uint64_t)HEADER_BYTES + 4ull * ((uint64_t)h->n_tokens + (uint64_t)h->n_ckpt);
    if (n < need)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: truncated: %zu bytes, its tokens end at %llu", what, n,
                         (unsigned long long)need);
    return PK_OK;
}

/* ---- saving ------------------------------------------------------------------------ */

/* Bytes of the regions (walk) */
static void count_fn(void *ud, void *p, size_t n) {
    (void)p;
    *(uint64_t *)ud += n;
}

static state_header header_of(const pk_context *c) {
    const pk_kv *kv = &c->kv;
    state_header h = {
        .model_id = c->m->file_id,
        .file_size = c->m->gguf->size,
        .type_k = kv->type_k,
        .type_v = kv->type_v,
        .n_layer = kv->n_layer,
        .n_att = kv->n_att,
        .n_lat = kv->n_lat,
        .n_rec = kv->n_rec,
        .n_tokens = c->pos,
        .n_ckpt = c->n_ckpt,
    };
    uint64_t regions = 0;
    walk((pk_context *)c, c->pos, c->ckpt_slot, c->n_ckpt, count_fn, &regions);
    h.payload_bytes = 4ull * (uint64_t)(c->pos + c->n_ckpt) + regions;
    return h;
}

size_t pk_state_size(const pk_context *c) { return HEADER_BYTES + (size_t)header_of(c).payload_bytes; }

/* Where saved bytes go: a buffer, or a file through a buffer. */
typedef struct sink {
    uint8_t *out;         /* memory: the destination */
    size_t off;
    int fd;               /* file (-1: memory) */
    uint8_t *buf;         /* file: pending bytes */
    size_t n_buf, cap_buf;
    int error;            /* errno of a failed write */
    uint64_t hash;
} sink;

static void sink_flush(sink *s) {
    for (size_t done = 0; done < s->n_buf && !s->error;) {
        ssize_t w = write(s->fd, s->buf + done, s->n_buf - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) s->error = w < 0 ? errno : EIO;
        else done += (size_t)w;
    }
    s->n_buf = 0;
}

static void sink_put(void *ud, void *p, size_t n) {
    sink *s = ud;
    s->hash = pk_hash64(s->hash, p, n);
    if (s->fd < 0) {
        memcpy(s->out + s->off, p, n);
        s->off += n;
        return;
    }
    for (const uint8_t *q = p; n > 0 && !s->error;) {
        size_t k = s->cap_buf - s->n_buf < n ? s->cap_buf - s->n_buf : n;
        memcpy(s->buf + s->n_buf, q, k);
        s->n_buf += k;
        q += k;
        n -= k;
        if (s->n_buf == s->cap_buf) sink_flush(s);
    }
}

/* Everything after the header into s; fills h (checksum included) */
static void save_payload(const pk_context *c, sink *s, state_header *h) {
    *h = header_of(c);
    uint8_t hb[HEADER_BYTES];
    header_write(hb, h);
    memset(hb + 72, 0, HEADER_BYTES - 72);   /* the checksums: not hashed */
    s->hash = pk_hash64(0, hb, HEADER_BYTES);
    sink_put(s, c->tokens, (size_t)c->pos * sizeof *c->tokens);
    sink_put(s, c->ckpt_pos, (size_t)c->n_ckpt * sizeof *c->ckpt_pos);
    walk((pk_context *)c, c->pos, c->ckpt_slot, c->n_ckpt, sink_put, s);
    h->checksum = s->hash;
}

int pk_state_save(const pk_context *c, void *buf, size_t cap, pk_error *err) {
    const size_t need = pk_state_size(c);
    if (!buf || cap < need)
        return pk_errorf(err, PK_ERR_ARG, "pk_state_save: the buffer holds %zu bytes, the state needs %zu", cap,
                         need);
    sink s = {.out = (uint8_t *)buf + HEADER_BYTES, .fd = -1};
    state_header h;
    save_payload(c, &s, &h);
    header_write(buf, &h);
    return PK_OK;
}

int pk_state_save_file(const pk_context *c, const char *path, pk_error *err) {
    const size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    sink s = {.fd = -1, .cap_buf = (size_t)1 << 20};
    s.buf = malloc(s.cap_buf);
    if (!tmp || !s.buf) {
        free(tmp);
        free(s.buf);
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    s.fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = PK_OK;
    if (s.fd < 0) {
        rc = pk_errorf(err, PK_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    uint8_t hb[HEADER_BYTES] = {0};
    sink_put(&s, hb, HEADER_BYTES);   /* a placeholder: the checksum is known at the end */
    state_header h;
    save_payload(c, &s, &h);
    sink_flush(&s);
    header_write(hb, &h);
    if (!s.error && pwrite(s.fd, hb, HEADER_BYTES, 0) != HEADER_BYTES) s.error = errno ? errno : EIO;
    if (!s.error && fsync(s.fd)) s.error = errno;
    if (close(s.fd) && !s.error) s.error = errno;
    s.fd = -1;
    if (!s.error && rename(tmp, path)) s.error = errno;
    if (s.error) {
        rc = pk_errorf(err, PK_ERR_IO, "%s: cannot write the state: %s", path, strerror(s.error));
        unlink(tmp);
    }
done:
    free(tmp);
    free(s.buf);
    return rc;
}

/* ---- loading ----------------------------------------------------------------------- */

/* Reading regions from a buffer: hash them (check) or also copy them into
 * the context (load; a NULL region is skipped). */
typedef struct source {
    const uint8_t *in;
    size_t off;
    int copy;
    uint64_t hash;
} source;

static void source_get(void *ud, void *p, size_t n) {
    source *s = ud;
    if (!s->copy) s->hash = pk_hash64(s->hash, s->in + s->off, n);
    else if (p) memcpy(p, s->in + s->off, n);
    s->off += n;
}

static const char *type_name(int t) {
    return t == PK_TYPE_F32 ? "f32" : t == PK_TYPE_F16 ? "f16" : t == PK_TYPE_Q8_0 ? "q8_0" : "an unknown type";
}

static int state_load(pk_context *c, const uint8_t *b, size_t n, const char *what, pk_error *err) {
    state_header h;
    int rc = header_read(c->m, b, n, &h, what, err);
    if (rc) return rc;
    const pk_kv *kv = &c->kv;
    if (h.type_k != kv->type_k || h.type_v != kv->type_v)
        return pk_errorf(err, PK_ERR_ARG, "%s: the state's cache holds %s keys and %s values, this context's %s and %s",
                         what, type_name(h.type_k), type_name(h.type_v), type_name(kv->type_k),
                         type_name(kv->type_v));
    if (h.n_tokens > c->n_ctx)
        return pk_errorf(err, PK_ERR_ARG, "%s: the state holds %d tokens, more than this context's %d", what,
                         h.n_tokens, c->n_ctx);
    if (h.n_att != kv->n_att || h.n_lat != kv->n_lat || h.n_rec != kv->n_rec)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: its layer kinds are not this model's", what);
    uint64_t regions = 0;
    walk(c, h.n_tokens, NULL, h.n_ckpt, count_fn, &regions);
    const uint64_t payload = 4ull * (uint64_t)(h.n_tokens + h.n_ckpt) + regions;
    if (h.payload_bytes != payload)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: its payload is %llu bytes, %d tokens take %llu", what,
                         (unsigned long long)h.payload_bytes, h.n_tokens, (unsigned long long)payload);
    if (n != HEADER_BYTES + payload)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s: %zu bytes, the state is %llu", what,
                         n < HEADER_BYTES + payload ? "truncated" : "trailing bytes", n,
                         (unsigned long long)(HEADER_BYTES + payload));
    /* the checksum, before anything is changed */
    uint8_t hb[HEADER_BYTES];
    memcpy(hb, b, HEADER_BYTES);
    memset(hb + 72, 0, HEADER_BYTES - 72);
    source s = {.in = b + HEADER_BYTES};
    s.hash = pk_hash64(0, hb, HEADER_BYTES);
    source_get(&s, NULL, 4 * (size_t)h.n_tokens);
    source_get(&s, NULL, 4 * (size_t)h.n_ckpt);
    walk(c, h.n_tokens, NULL, h.n_ckpt, source_get, &s);
    if (s.hash != h.checksum) return pk_errorf(err, PK_ERR_FORMAT, "%s: corrupt (its checksum does not match)", what);
    const uint8_t *tok = b + HEADER_BYTES, *ck = tok + 4 * (size_t)h.n_tokens;
    for (int i = 0; i < h.n_tokens; i++) {
        const int32_t t = get32(tok + 4 * (size_t)i);
        if (t < 0 || t >= c->m->hp.n_vocab)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: token %d at position %d is out of range [0, %d)", what, t, i,
                             c->m->hp.n_vocab);
    }
    for (int i = 0; i < h.n_ckpt; i++) {
        const int32_t p = get32(ck + 4 * (size_t)i);
        if (p < 1 || p > h.n_tokens || (i && p <= get32(ck + 4 * (size_t)(i - 1))))
            return pk_errorf(err, PK_ERR_FORMAT, "%s: checkpoint %d at position %d is out of order", what, i, p);
    }
    /* load: the latest checkpoints this context has room for */
    const int skip = h.n_ckpt > c->ckpt_cap ? h.n_ckpt - c->ckpt_cap : 0;
    int *slots = malloc(((size_t)h.n_ckpt + 1) * sizeof *slots);
    if (!slots) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", what);
    for (int i = 0; i < h.n_ckpt; i++) slots[i] = i < skip ? -1 : i - skip;
    memcpy(c->tokens, tok, 4 * (size_t)h.n_tokens);
    c->n_ckpt = h.n_ckpt - skip;
    for (int i = 0; i < c->n_ckpt; i++) {
        c->ckpt_pos[i] = get32(ck + 4 * (size_t)(i + skip));
        c->ckpt_slot[i] = i;
    }
    c->pos = h.n_tokens;
    c->n_plan = 0;
    source ld = {.in = ck + 4 * (size_t)h.n_ckpt, .copy = 1};
    walk(c, h.n_tokens, slots, h.n_ckpt, source_get, &ld);
    free(slots);
    return PK_OK;
}

int pk_state_load(pk_context *c, const void *buf, size_t n, pk_error *err) {
    if (!buf && n) return pk_errorf(err, PK_ERR_ARG, "pk_state_load: no buffer");
    return state_load(c, buf, n, "state", err);
}

/* Map a state file read-only; *size its bytes. */
static int map_file(const char *path, const uint8_t **map, size_t *size, pk_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pk_errorf(err, PK_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return pk_errorf(err, PK_ERR_IO, "%s: not a regular file", path);
    }
    *size = (size_t)st.st_size;
    *map = NULL;
    if (*size) {
        void *p = mmap(NULL, *size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            close(fd);
            return pk_errorf(err, PK_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        }
        *map = p;
    }
    close(fd);
    return PK_OK;
}

int pk_state_load_file(pk_context *c, const char *path, pk_error *err) {
    const uint8_t *map = NULL;
    size_t size = 0;
    int rc = map_file(path, &map, &size, err);
    if (rc) return rc;
    rc = state_load(c, map ? map : (const uint8_t *)"", size, path, err);
    if (map) munmap((void *)map, size);
    return rc;
}

static int state_tokens(const pk_model *m, const uint8_t *b, size_t n, int32_t **tokens, int *n_tokens,
                        const char *what, pk_error *err) {
    *tokens = NULL;
    *n_tokens = 0;
    state_header h;
    int rc = header_read(m, b, n, &h, what, err);
    if (rc) return rc;
    if (h.payload_bytes != n - HEADER_BYTES)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s: %zu bytes, its header says %llu", what,
                         n - HEADER_BYTES < h.payload_bytes ? "truncated" : "trailing bytes", n,
                         (unsigned long long)(HEADER_BYTES + h.payload_bytes));
    int32_t *t = malloc(4 * (size_t)h.n_tokens + 4);
    if (!t) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", what);
    memcpy(t, b + HEADER_BYTES, 4 * (size_t)h.n_tokens);
    for (int i = 0; i < h.n_tokens; i++)
        if (t[i] < 0 || t[i] >= m->hp.n_vocab) {
            const int32_t bad = t[i];
            free(t);
            return pk_errorf(err, PK_ERR_FORMAT, "%s: token %d at position %d is out of range [0, %d)", what, bad,
                             i, m->hp.n_vocab);
        }
    *tokens = t;
    *n_tokens = h.n_tokens;
    return PK_OK;
}

int pk_state_tokens(const pk_model *m, const void *buf, size_t n, int32_t **tokens, int *n_tokens, pk_error *err) {
    if (!buf && n) return pk_errorf(err, PK_ERR_ARG, "pk_state_tokens: no buffer");
    return state_tokens(m, buf ? buf : "", n, tokens, n_tokens, "state", err);
}

int pk_state_file_tokens(const pk_model *m, const char *path, int32_t **tokens, int *n_tokens, pk_error *err) {
    const uint8_t *map = NULL;
    size_t size = 0;
    *tokens = NULL;
    *n_tokens = 0;
    int rc = map_file(path, &map, &size, err);
    if (rc) return rc;
    rc = state_tokens(m, map ? map : (const uint8_t *)"", size, tokens, n_tokens, path, err);
    if (map) munmap((void *)map, size);
    return rc;
}
