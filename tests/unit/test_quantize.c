/* test_quantize.c - the GGUF writer (src/gguf/write.c) and pk_quantize_file
 * (src/offline/quantize.c).
 *
 * On the bundled model (models/kjv-moe-f16.gguf, qwen3moe) quantized to Q8_0,
 * F32 and Q4_K_M: metadata is preserved (same keys, order and values except
 * general.file_type, plus general.quantization_version and pocket.quantize.*),
 * tensor names and shapes are unchanged, tensors come in llama-quantize's
 * order, types follow the preset's rules, and every tensor's data equals the
 * reference quantize(dequantize(input)) bit for bit. The Q8_0 file is also read
 * by tests/lib/gguf_py.py (an independent reader) through $PYTHON. Output is the
 * same with 1 and 2 threads. On small synthetic models written with the
 * writer: the row-length fallbacks, alignment 64, overrides, non-finite
 * values. IQ1_S / IQ1_M: the presets' mix (llama-quantize's), the importance
 * matrix they need, and IQ1 rows equal to the quantizer's with their
 * importances. Errors: missing input, output directory missing, unknown preset,
 * bad override syntax, override matching nothing, a file size limit hit while
 * writing (as a full disk would be) - and no output or .tmp file left behind.
 * Run from the project root; files go to $BUILD/tmp/quantize.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/imat.h"
#include "pocket.h"
#include "testhelp.h"

#define MODEL "models/kjv-moe-f16.gguf"

static char tmpdir[512];

static const char *tmp_path(const char *name) {
    static char buf[8][700];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static int tmp_exists(const char *out) {
    char t[800];
    snprintf(t, sizeof t, "%s.tmp", out);
    return file_exists(t);
}

/* ---- comparisons ---------------------------------------------------------------- */

static size_t vsize(int t) {
    switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    default: return 8;
    }
}

static int kv_equal(const gguf_kv *a, const gguf_kv *b) {
    if (a->type != b->type) return 0;
    if (a->type == GGUF_STRING)
        return a->str.len == b->str.len && memcmp(a->str.ptr, b->str.ptr, a->str.len) == 0;
    if (a->type != GGUF_ARRAY)
        return a->i64 == b->i64 && a->u64 == b->u64 && memcmp(&a->f64, &b->f64, 8) == 0;
    if (a->arr_type != b->arr_type || a->arr_n != b->arr_n) return 0;
    if (a->arr_type == GGUF_STRING) {
        for (uint64_t i = 0; i < a->arr_n; i++)
            if (a->arr_str[i].len != b->arr_str[i].len ||
                memcmp(a->arr_str[i].ptr, b->arr_str[i].ptr, a->arr_str[i].len) != 0)
                return 0;
        return 1;
    }
    return memcmp(a->arr_data, b->arr_data, a->arr_n * vsize(a->arr_type)) == 0;
}

static int layer_num(const char *n) {
    int l = -1;
    if (strncmp(n, "blk.", 4) == 0) l = atoi(n + 4);
    return l;
}

/* Check out against in: metadata, names, shapes, order, and each tensor's data
 * equal to the reference conversion of the input (every `step`-th row). */
/* The rows of an output tensor o against its input t: every step-th row of t
 * dequantized and quantized again to o's type - by fn with the importances
 * imp + (r / ne1) * ne0 of its matrix (imp NULL: none), or without fn by
 * the type's from_float - must be o's bytes. Returns the first row that is
 * not, -1 if none (-2: out of memory). */
typedef void (*requant_fn)(const float *src, void *dst, int64_t n, const float *imp);
static int64_t requant_mismatch(const gguf_tensor *t, const gguf_tensor *o, int64_t step, requant_fn fn,
                                const float *imp) {
    const int64_t ne0 = t->ne[0], ne1 = t->ne[1], rows = t->nelements / ne0;
    const size_t srow = pk_row_size(t->type, ne0), drow = pk_row_size(o->type, ne0);
    float *x = malloc((size_t)ne0 * sizeof *x);
    uint8_t *q = malloc(drow);
    int64_t bad = x && q ? -1 : -2;
    for (int64_t r = 0; r < rows && bad == -1; r += step) {
        pk_type_get(t->type)->to_float((const uint8_t *)t->data + (size_t)r * srow, x, ne0);
        if (fn) fn(x, q, ne0, imp ? imp + (r / ne1) * ne0 : NULL);
        else pk_type_get(o->type)->from_float(x, q, ne0);
        if (memcmp(q, (const uint8_t *)o->data + (size_t)r * drow, drow) != 0) bad = r;
    }
    free(x);
    free(q);
    return bad;
}

static void check_output(const char *in_path, const char *out_path, int ftype,
                         const char *preset, int step) {
    pk_error err = {0};
    gguf_file *in = NULL, *out = NULL;
    int rc = gguf_open(in_path, &in, &err);
    TEST_CHECK(rc == PK_OK, "open %s: %s", in_path, err.msg);
    rc = gguf_open(out_path, &out, &err);
    TEST_CHECK(rc == PK_OK, "open %s: %s", out_path, err.msg);
    if (!in || !out) { gguf_close(in); gguf_close(out); return; }

    /* metadata: input keys in order, values kept except general.file_type */
    TEST_CHECK(out->version == 3, "%s: version %u", out_path, out->version);
    uint64_t j = 0;
    for (uint64_t i = 0; i < in->n_kv; i++) {
        const gguf_kv *a = &in->kv[i];
        if (strcmp(a->key, "general.quantization_version") == 0 ||
            strncmp(a->key, "pocket.quantize.", 16) == 0)
            continue;
        while (j < out->n_kv && (strcmp(out->kv[j].key, "general.quantization_version") == 0 ||
                                 strncmp(out->kv[j].key, "pocket.quantize.", 16) == 0))
            j++;
        TEST_CHECK(j < out->n_kv && strcmp(out->kv[j].key, a->key) == 0,
                   "%s: key %llu is '%s', expected '%s'", out_path, (unsigned long long)j,
                   j < out->n_kv ? out->kv[j].key : "(end)", a->key);
        if (j >= out->n_kv) break;
        if (strcmp(a->key, "general.file_type") == 0)
            TEST_CHECK(out->kv[j].type == GGUF_UINT32 && out->kv[j].i64 == ftype,
                       "%s: general.file_type = %lld, expected %d", out_path,
                       (long long)out->kv[j].i64, ftype);
        else
            TEST_CHECK(kv_equal(a, &out->kv[j]), "%s: value of '%s' changed", out_path, a->key);
        j++;
    }
    int64_t qv = -1;
    char *ps = NULL;
    gguf_get_int(out, "general.quantization_version", 0, &qv, &err);
    gguf_get_string(out, "pocket.quantize.preset", 0, &ps, &err);
    TEST_CHECK(qv == 2, "%s: general.quantization_version = %lld", out_path, (long long)qv);
    TEST_CHECK(ps && strcmp(ps, preset) == 0, "%s: pocket.quantize.preset = %s", out_path,
               ps ? ps : "(missing)");
    free(ps);

    /* tensors: same set, same shapes, llama-quantize order, aligned */
    TEST_CHECK(out->n_tensors == in->n_tensors, "%s: %llu tensors, input has %llu", out_path,
               (unsigned long long)out->n_tensors, (unsigned long long)in->n_tensors);
    for (uint64_t i = 1; i < out->n_tensors; i++) {
        const char *a = out->tensors[i - 1].name, *b = out->tensors[i].name;
        int la = layer_num(a), lb = layer_num(b);
        TEST_CHECK(la < lb || (la == lb && strcmp(a, b) < 0), "%s: order: '%s' before '%s'",
                   out_path, a, b);
    }
    for (uint64_t i = 0; i < out->n_tensors; i++) {
        const gguf_tensor *o = &out->tensors[i];
        const gguf_tensor *t = gguf_find_tensor(in, o->name);
        TEST_CHECK(t != NULL, "%s: tensor '%s' is not in the input", out_path, o->name);
        if (!t) continue;
        TEST_CHECK(t->n_dims == o->n_dims && memcmp(t->ne, o->ne, sizeof t->ne) == 0,
                   "%s: '%s' shape changed", out_path, o->name);
        TEST_CHECK(o->offset % out->alignment == 0, "%s: '%s' misaligned", out_path, o->name);
        if (o->type == t->type) {
            TEST_CHECK(o->nbytes == t->nbytes && memcmp(o->data, t->data, t->nbytes) == 0,
                       "%s: '%s' (%s, copied) differs from the input", out_path, o->name,
                       pk_type_name(o->type));
            continue;
        }
        const pk_type_traits *st = pk_type_get(t->type), *dt = pk_type_get(o->type);
        if (!dt->from_float) continue;   /* importance-only types (IQ1): test_iq1 checks them */
        int64_t bad = requant_mismatch(t, o, step, NULL, NULL);
        TEST_CHECK(bad == -1, "%s: '%s' (%s from %s): row %lld differs from the reference",
                   out_path, o->name, dt->name, st->name, (long long)bad);
    }
    gguf_close(in);
    gguf_close(out);
}

/* Type of each tensor in a file, by name. */
static int type_of(const gguf_file *f, const char *name) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    return t ? t->type : -1;
}

/* ---- progress recording ------------------------------------------------------------ */

typedef struct prog {
    int calls, bad_seq, n;
    char names[256][64];
    char types[256][12];
} prog;

static void on_progress(void *ud, int i, int n, const char *name, const char *type) {
    prog *p = ud;
    if (i != p->calls) p->bad_seq = 1;
    p->n = n;
    if (i >= 0 && i < 256) {
        snprintf(p->names[i], sizeof p->names[i], "%s", name);
        snprintf(p->types[i], sizeof p->types[i], "%s", type);
    }
    p->calls++;
}

static const char *prog_type(const prog *p, const char *name) {
    for (int i = 0; i < p->calls && i < 256; i++)
        if (strcmp(p->names[i], name) == 0) return p->types[i];
    return "(none)";
}

/* ---- the bundled model ----------------------------------------------------------------- */

/* The rule for Q8_0 / F32 on this model: what llama-quantize may quantize
 * (2-D+ weights, not norms or the router) goes to the preset type. */
static int simple_expected(const gguf_tensor *t, int type) {
    int nd = t->ne[3] > 1 ? 4 : t->ne[2] > 1 ? 3 : t->ne[1] > 1 ? 2 : 1;
    if (nd < 2 || strstr(t->name, "_norm.weight") || strstr(t->name, "ffn_gate_inp")) return t->type;
    return type;
}

static void test_simple_preset(const char *preset, int type, int ftype, const char *outname,
                               int threads) {
    pk_quantize_params p = pk_quantize_default_params();
    prog pr = {0};
    pk_error err = {0};
    const char *out = tmp_path(outname);
    p.preset = preset;
    p.n_threads = threads;
    p.progress = on_progress;
    p.progress_ud = &pr;
    double t0 = pk_time();
    int rc = pk_quantize_file(MODEL, out, &p, &err);
    fprintf(stderr, "%s: %s -t %d in %.2fs\n", out, preset, threads, pk_time() - t0);
    TEST_CHECK(rc == PK_OK, "quantize %s: %s", preset, err.msg);
    TEST_CHECK(!tmp_exists(out), "%s.tmp left behind", out);
    TEST_CHECK(pr.calls == 75 && pr.n == 75 && !pr.bad_seq, "progress: %d calls, n %d, seq %d",
               pr.calls, pr.n, pr.bad_seq);
    if (rc) return;
    check_output(MODEL, out, ftype, preset, 1);
    gguf_file *in = NULL, *of = NULL;
    if (gguf_open(MODEL, &in, &err) || gguf_open(out, &of, &err)) {
        TEST_CHECK(0, "reopen: %s", err.msg);
    } else {
        int n_q = 0;
        for (uint64_t i = 0; i < in->n_tensors; i++) {
            const gguf_tensor *t = &in->tensors[i];
            int want = simple_expected(t, type), got = type_of(of, t->name);
            n_q += want == type;
            TEST_CHECK(got == want, "%s: '%s' is %s, expected %s", preset, t->name,
                       pk_type_name(got), pk_type_name(want));
            TEST_CHECK(strcmp(prog_type(&pr, t->name), pk_type_name(want)) == 0,
                       "%s: progress said '%s' -> %s", preset, t->name, prog_type(&pr, t->name));
        }
        /* F32: everything; else token_embd, output and 7 matrices per layer */
        TEST_CHECK(n_q == (type == PK_TYPE_F32 ? 75 : 2 + 6 * 7),
                   "%s: %d tensors of the preset type", preset, n_q);
    }
    gguf_close(in);
    gguf_close(of);
}

/* The llama-quantize Q4_K_M mix on this model (6 layers, 16 experts, GQA 2):
 * output Q6_K, token_embd Q4_K, attn_v and ffn_down_exps Q6_K on layers
 * 2 and 5 (use_more_bits), Q4_K elsewhere; norms and router F32. */
static int q4km_expected(const char *name) {
    if (strcmp(name, "output.weight") == 0) return PK_TYPE_Q6_K;
    if (strcmp(name, "token_embd.weight") == 0) return PK_TYPE_Q4_K;
    if (strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp")) return PK_TYPE_F32;
    int l = layer_num(name);
    if ((strstr(name, "attn_v.weight") || strstr(name, "ffn_down_exps")) && (l == 2 || l == 5))
        return PK_TYPE_Q6_K;
    return PK_TYPE_Q4_K;
}

/* pocket's MOE_Q2_K: experts Q2_K, attn_v Q8_0, other matrices Q6_K. */
static int moeq2k_expected(const char *name) {
    if (strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp")) return PK_TYPE_F32;
    if (strstr(name, "_exps")) return PK_TYPE_Q2_K;
    if (strstr(name, "attn_v.weight")) return PK_TYPE_Q8_0;
    return PK_TYPE_Q6_K;
}

static void test_mix(const char *preset, int (*expected)(const char *), int ftype,
                     const char *outname) {
    pk_quantize_params p = pk_quantize_default_params();
    prog pr = {0};
    pk_error err = {0};
    p.preset = preset;
    p.dry_run = 1;
    p.progress = on_progress;
    p.progress_ud = &pr;
    int rc = pk_quantize_file(MODEL, tmp_path(outname), &p, &err);
    TEST_CHECK(rc == PK_OK, "%s dry run: %s", preset, err.msg);
    TEST_CHECK(!file_exists(tmp_path(outname)), "%s dry run wrote a file", preset);
    TEST_CHECK(pr.calls == 75, "%s dry run: %d progress calls", preset, pr.calls);
    for (int i = 0; i < pr.calls && i < 256; i++) {
        int want = expected(pr.names[i]);
        TEST_CHECK(strcmp(pr.types[i], pk_type_name(want)) == 0, "%s: '%s' -> %s, expected %s",
                   preset, pr.names[i], pr.types[i], pk_type_name(want));
    }
    /* a real run if the quantizers exist (another engineer adds them) */
    int have = pk_type_get(PK_TYPE_Q4_K)->from_float && pk_type_get(PK_TYPE_Q6_K)->from_float &&
               pk_type_get(PK_TYPE_Q2_K)->from_float;
    p.dry_run = 0;
    p.progress = NULL;
    p.n_threads = 2;
    const char *out = tmp_path(outname);
    double t0 = pk_time();
    rc = pk_quantize_file(MODEL, out, &p, &err);
    if (!have) {
        TEST_CHECK(rc == PK_ERR_UNSUPPORTED && strstr(err.msg, "quantizer"),
                   "%s without K quantizers: rc %d: %s", preset, rc, err.msg);
        fprintf(stderr, "note: %s: K-quant quantizers missing, data not checked\n", preset);
        return;
    }
    fprintf(stderr, "%s: %s in %.2fs\n", out, preset, pk_time() - t0);
    TEST_CHECK(rc == PK_OK, "%s: %s", preset, err.msg);
    if (rc) return;
    check_output(MODEL, out, ftype, preset, 3);
    gguf_file *of = NULL;
    if (gguf_open(out, &of, &err) == PK_OK) {
        for (uint64_t i = 0; i < of->n_tensors; i++) {
            int want = expected(of->tensors[i].name);
            TEST_CHECK(of->tensors[i].type == want, "%s file: '%s' is %s, expected %s", preset,
                       of->tensors[i].name, pk_type_name(of->tensors[i].type), pk_type_name(want));
        }
        gguf_close(of);
    }
}

static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = getc(fa), cb = getc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

/* The Q8_0 file through tests/lib/gguf_py.py: every key equal to the input's
 * (bar the changed ones), F32 tensors identical, Q8_0 tensors within half a
 * quantization step of the input. */
static void test_python_reader(const char *q8) {
    const char *py = getenv("PYTHON");
    if (!py || !*py) py = "/usr/bin/python3";
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' - '%s' '%s'", py, MODEL, q8);
    FILE *pp = popen(cmd, "w");
    TEST_CHECK(pp != NULL, "popen %s", cmd);
    if (!pp) return;
    fputs(
        "import sys\n"
        "sys.path.insert(0, 'tests/lib')\n"
        "import numpy as np, gguf_py as G\n"
        "a = G.read_gguf(sys.argv[1]); b = G.read_gguf(sys.argv[2])\n"
        "changed = {'general.file_type', 'general.quantization_version', 'pocket.quantize.preset'}\n"
        "for k in a.kv_order:\n"
        "    if k in changed: continue\n"
        "    va, vb = a.kv[k], b.kv[k]\n"
        "    assert a.kv_types[k] == b.kv_types[k], k\n"
        "    assert (np.array_equal(va, vb) if isinstance(va, np.ndarray) else va == vb), k\n"
        "assert set(b.kv) == set(a.kv) | changed, set(b.kv) ^ set(a.kv)\n"
        "assert b.kv['general.file_type'] == 7 and b.kv['general.quantization_version'] == 2\n"
        "assert b.kv['pocket.quantize.preset'] == 'Q8_0'\n"
        "assert b.alignment == a.alignment\n"
        "n8 = 0\n"
        "for name in a.tensor_order:\n"
        "    x = a.tensors[name].astype(np.float32); y = b.tensors[name]\n"
        "    assert x.shape == y.shape, name\n"
        "    if b.tinfo[name]['type'] == G.T_Q8_0:\n"
        "        n8 += 1\n"
        "        xb = x.reshape(-1, 32); yb = y.reshape(-1, 32)\n"
        "        d = np.abs(xb).max(axis=1, keepdims=True) / 127\n"
        "        d16 = d.astype(np.float16).astype(np.float32)\n"
        "        bound = 0.5 * d + 127 * np.abs(d - d16)\n"
        "        assert np.all(np.abs(xb - yb) <= bound * 1.001 + 1e-7), name\n"
        "    else:\n"
        "        assert b.tinfo[name]['type'] == G.T_F32 and np.array_equal(x, y), name\n"
        "assert n8 == 44, n8\n"
        "print('gguf_py: %d tensors, %d keys ok' % (len(b.tinfo), len(b.kv)))\n",
        pp);
    int st = pclose(pp);
    TEST_CHECK(st == 0, "gguf_py check of %s failed (status %d)", q8, st);
}

/* importance 1 for every tensor of the gguf_file ud, of its size ne0 * ne2 */
static const float *imat_all(void *ud, const char *name, int64_t *n) {
    static float ones[1 << 16];
    const gguf_tensor *t = gguf_find_tensor(ud, name);
    if (!t || t->ne[0] * t->ne[2] > (int64_t)(sizeof ones / sizeof *ones)) return NULL;
    for (size_t i = 0; i < sizeof ones / sizeof *ones; i++) ones[i] = 1.0f;
    *n = t->ne[0] * t->ne[2];
    return ones;
}

/* ---- synthetic models -------------------------------------------------------------------- */

typedef struct syn_tensor {
    const char *name;
    int n_dims;
    int64_t ne[4];
} syn_tensor;

/* A small llama-like F32 model written with gguf_writer; values are a fixed
 * pseudo-random pattern, `poison` (if not 0) put in the first element of
 * the third tensor. */
static int write_synthetic(const char *path, const syn_tensor *ts, int n, uint32_t align,
                           float poison) {
    pk_error err = {0};
    gguf_writer *w = NULL;
    int rc = gguf_writer_new(path, &w, &err);
    if (!rc) rc = gguf_writer_set_str(w, "general.architecture", "llama", &err);
    if (!rc) rc = gguf_writer_set_u32(w, "general.alignment", align, &err);
    if (!rc) rc = gguf_writer_set_u32(w, "llama.block_count", 1, &err);
    if (!rc) rc = gguf_writer_set_u32(w, "llama.attention.head_count", 4, &err);
    if (!rc) rc = gguf_writer_set_bool(w, "test.flag", 1, &err);
    const char *arr[] = {"a", "", "b c"};
    if (!rc) rc = gguf_writer_set_str_arr(w, "test.strings", arr, 3, &err);
    for (int i = 0; i < n && !rc; i++)
        rc = gguf_writer_add_tensor(w, ts[i].name, ts[i].n_dims, ts[i].ne, PK_TYPE_F32, &err);
    if (!rc) rc = gguf_writer_begin(w, &err);
    uint32_t s = 12345;
    for (int i = 0; i < n && !rc; i++) {
        int64_t cnt = ts[i].ne[0];
        for (int d = 1; d < ts[i].n_dims; d++) cnt *= ts[i].ne[d];
        for (int64_t k = 0; k < cnt && !rc; k++) {
            s = s * 1664525u + 1013904223u;
            float v = ((float)(s >> 8) / 16777216.0f - 0.5f) * 0.2f;
            if (i == 2 && k == 0 && poison != 0) v = poison;
            rc = gguf_writer_write(w, &v, 4, &err);   /* tiny chunks on purpose */
        }
    }
    if (!rc) rc = gguf_writer_finish(w, &err);
    if (rc) fprintf(stderr, "write_synthetic %s: %s\n", path, err.msg);
    gguf_writer_free(w);
    return rc;
}

static void test_synthetic(void) {
    pk_error err = {0};
    const syn_tensor ts[] = {
        {"token_embd.weight", 2, {96, 8, 1, 1}},
        {"output.weight", 2, {96, 8, 1, 1}},
        {"blk.0.attn_q.weight", 2, {48, 4, 1, 1}},
        {"blk.0.attn_v.weight", 2, {256, 2, 1, 1}},
        {"blk.0.ffn_down.weight", 2, {256, 2, 1, 1}},
        {"blk.0.ffn_gate.weight", 2, {256, 2, 1, 1}},
        {"blk.0.attn_norm.weight", 1, {96, 1, 1, 1}},
    };
    const char *syn = tmp_path("syn.gguf");
    TEST_CHECK(write_synthetic(syn, ts, 7, 64, 0) == PK_OK, "synthetic model written");
    gguf_file *f = NULL;
    int rc = gguf_open(syn, &f, &err);
    TEST_CHECK(rc == PK_OK, "reopen synthetic: %s", err.msg);
    if (f) {
        TEST_CHECK(f->alignment == 64 && f->n_tensors == 7 && f->n_kv == 6,
                   "synthetic: alignment %llu, %llu tensors, %llu keys",
                   (unsigned long long)f->alignment, (unsigned long long)f->n_tensors,
                   (unsigned long long)f->n_kv);
        const gguf_kv *kv = gguf_find_kv(f, "test.strings");
        TEST_CHECK(kv && kv->type == GGUF_ARRAY && kv->arr_n == 3 && kv->arr_str[2].len == 3 &&
                   memcmp(kv->arr_str[2].ptr, "b c", 3) == 0 && kv->arr_str[1].len == 0,
                   "synthetic: string array");
        gguf_close(f);
    }
    /* general.alignment 1 (legal GGUF) would let the writer misplace typed
       data: the key is dropped and 32 used, so the file opens */
    const char *syn1 = tmp_path("syn-align1.gguf");
    TEST_CHECK(write_synthetic(syn1, ts, 7, 1, 0) == PK_OK, "synthetic model (alignment 1) written");
    f = NULL;
    rc = gguf_open(syn1, &f, &err);
    TEST_CHECK(rc == PK_OK, "reopen synthetic (alignment 1): %s", err.msg);
    if (f) {
        TEST_CHECK(f->alignment == 32 && !gguf_find_kv(f, "general.alignment") && f->n_kv == 5,
                   "alignment 1 written as %llu, %llu keys", (unsigned long long)f->alignment,
                   (unsigned long long)f->n_kv);
        gguf_close(f);
    }

    /* Q4_K_M: fallbacks for rows not a multiple of 256 */
    pk_quantize_params p = pk_quantize_default_params();
    prog pr = {0};
    p.preset = "q4_k_m";    /* case-insensitive */
    p.dry_run = 1;
    p.progress = on_progress;
    p.progress_ud = &pr;
    rc = pk_quantize_file(syn, tmp_path("syn-q4km.gguf"), &p, &err);
    TEST_CHECK(rc == PK_OK, "synthetic Q4_K_M dry run: %s", err.msg);
    static const char *const want[][2] = {
        {"output.weight", "Q8_0"},          /* output: 96 % 256 -> Q8_0 */
        {"token_embd.weight", "Q5_0"},      /* Q4_K -> Q5_0 */
        {"blk.0.attn_q.weight", "F16"},     /* Q4_K -> Q5_0 -> 48 % 32 -> F16 */
        {"blk.0.attn_v.weight", "Q6_K"},    /* use_more_bits(0, 1) */
        {"blk.0.ffn_down.weight", "Q6_K"},
        {"blk.0.ffn_gate.weight", "Q4_K"},
        {"blk.0.attn_norm.weight", "F32"},
    };
    for (int i = 0; i < 7; i++)
        TEST_CHECK(strcmp(prog_type(&pr, want[i][0]), want[i][1]) == 0, "synthetic Q4_K_M: '%s' -> %s, expected %s",
                   want[i][0], prog_type(&pr, want[i][0]), want[i][1]);
    TEST_CHECK(strcmp(pr.names[0], "output.weight") == 0 && strcmp(pr.names[1], "token_embd.weight") == 0,
               "order: non-layer tensors first, by name (%s, %s)", pr.names[0], pr.names[1]);

    /* IQ2_XXS (importances of 1): llama-quantize's rules for the 2-bit
       i-quants, one layer, no experts, 1 query head per kv head */
    gguf_file *sf = NULL;
    if (gguf_open(syn, &sf, &err) == PK_OK) {
        p = pk_quantize_default_params();
        memset(&pr, 0, sizeof pr);
        p.preset = "IQ2_XXS";
        p.dry_run = 1;
        p.progress = on_progress;
        p.progress_ud = &pr;
        p.imatrix = imat_all;
        p.imatrix_ud = sf;
        rc = pk_quantize_file(syn, tmp_path("syn-iq2.gguf"), &p, &err);
        TEST_CHECK(rc == PK_OK, "synthetic IQ2_XXS dry run: %s", err.msg);
        static const char *const want2[][2] = {
            {"output.weight", "Q8_0"},          /* Q5_K, but 96 % 256 -> Q8_0 */
            {"token_embd.weight", "Q4_0"},      /* Q2_K -> Q4_0 */
            {"blk.0.attn_q.weight", "F16"},     /* IQ2_XXS -> IQ4_NL -> 48 % 32 -> F16 */
            {"blk.0.attn_v.weight", "Q2_K"},    /* no experts, 1 query head per kv head */
            {"blk.0.ffn_down.weight", "IQ2_XXS"},  /* the first 1 / 8 of 1 layer: none */
            {"blk.0.ffn_gate.weight", "IQ2_XXS"},
            {"blk.0.attn_norm.weight", "F32"},
        };
        for (int i = 0; i < 7; i++)
            TEST_CHECK(strcmp(prog_type(&pr, want2[i][0]), want2[i][1]) == 0,
                       "synthetic IQ2_XXS: '%s' -> %s, expected %s", want2[i][0], prog_type(&pr, want2[i][0]),
                       want2[i][1]);
        gguf_close(sf);
    }

    /* Q8_0 has no fallback: a 48-element row is an error naming the tensor */
    p = pk_quantize_default_params();
    p.preset = "Q8_0";
    const char *o8 = tmp_path("syn-q8.gguf");
    rc = pk_quantize_file(syn, o8, &p, &err);
    TEST_CHECK(rc == PK_ERR_UNSUPPORTED && strstr(err.msg, "blk.0.attn_q.weight") &&
               strstr(err.msg, "48"), "Q8_0 on a 48-row: rc %d: %s", rc, err.msg);
    TEST_CHECK(!file_exists(o8) && !tmp_exists(o8), "no output after a planning error");

    /* ... unless an override keeps that tensor in F16; alignment 64 is kept */
    const char *ovr[] = {"attn_q=f16", "^output.weight$=F32", "blk.?.ffn_*=BF16"};
    p.overrides = ovr;
    p.n_overrides = 3;
    rc = pk_quantize_file(syn, o8, &p, &err);
    TEST_CHECK(rc == PK_OK, "Q8_0 with overrides: %s", err.msg);
    if (rc == PK_OK) {
        check_output(syn, o8, 7, "Q8_0", 1);
        if (gguf_open(o8, &f, &err) == PK_OK) {
            TEST_CHECK(f->alignment == 64, "alignment %llu", (unsigned long long)f->alignment);
            TEST_CHECK(type_of(f, "blk.0.attn_q.weight") == PK_TYPE_F16 &&
                       type_of(f, "output.weight") == PK_TYPE_F32 &&
                       type_of(f, "token_embd.weight") == PK_TYPE_Q8_0 &&
                       type_of(f, "blk.0.attn_v.weight") == PK_TYPE_Q8_0 &&
                       type_of(f, "blk.0.ffn_down.weight") == PK_TYPE_BF16 &&
                       type_of(f, "blk.0.ffn_gate.weight") == PK_TYPE_BF16 &&
                       type_of(f, "blk.0.attn_norm.weight") == PK_TYPE_F32,
                       "override types");
            const gguf_kv *kv = gguf_find_kv(f, "pocket.quantize.overrides");
            TEST_CHECK(kv && kv->type == GGUF_ARRAY && kv->arr_type == GGUF_STRING &&
                       kv->arr_n == 3 && kv->arr_str[1].len == strlen(ovr[1]) &&
                       memcmp(kv->arr_str[1].ptr, ovr[1], kv->arr_str[1].len) == 0,
                       "pocket.quantize.overrides recorded");
            gguf_close(f);
        }
    }

    /* non-finite input, and a value F16 cannot hold */
    const char *nan_in = tmp_path("syn-nan.gguf"), *big_in = tmp_path("syn-big.gguf");
    const syn_tensor ok_ts[] = {
        {"token_embd.weight", 2, {64, 8, 1, 1}},
        {"output.weight", 2, {64, 8, 1, 1}},
        {"blk.0.attn_q.weight", 2, {64, 4, 1, 1}},
    };
    TEST_CHECK(write_synthetic(nan_in, ok_ts, 3, 32, NAN) == PK_OK, "nan model written");
    TEST_CHECK(write_synthetic(big_in, ok_ts, 3, 32, 1e6f) == PK_OK, "big model written");
    p = pk_quantize_default_params();
    p.preset = "Q8_0";
    rc = pk_quantize_file(nan_in, tmp_path("nan-q8.gguf"), &p, &err);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "blk.0.attn_q.weight") &&
               strstr(err.msg, "non-finite"), "NaN input: rc %d: %s", rc, err.msg);
    TEST_CHECK(!file_exists(tmp_path("nan-q8.gguf")) && !tmp_exists(tmp_path("nan-q8.gguf")),
               "no output after a data error");
    p.preset = "F16";
    rc = pk_quantize_file(big_in, tmp_path("big-f16.gguf"), &p, &err);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "F16"), "1e6 to F16: rc %d: %s", rc, err.msg);
    p.preset = "BF16";
    rc = pk_quantize_file(big_in, tmp_path("big-bf16.gguf"), &p, &err);
    TEST_CHECK(rc == PK_OK, "1e6 to BF16: %s", err.msg);
}

/* ---- the writer's own contract ------------------------------------------------------------- */

static void test_writer_misuse(void) {
    pk_error err = {0};
    gguf_writer *w = NULL;
    const char *path = tmp_path("misuse.gguf");
    int64_t ne[4] = {32, 2, 1, 1};
    float data[64] = {0};
    TEST_CHECK(gguf_writer_new(path, &w, &err) == PK_OK, "writer new");
    TEST_CHECK(gguf_writer_add_tensor(w, "a", 2, ne, PK_TYPE_F32, &err) == PK_OK, "add a");
    TEST_CHECK(gguf_writer_add_tensor(w, "a", 2, ne, PK_TYPE_F32, &err) == PK_ERR_ARG &&
               strstr(err.msg, "duplicate"), "duplicate tensor: %s", err.msg);
    int64_t ne_bad[4] = {30, 2, 1, 1};
    TEST_CHECK(gguf_writer_add_tensor(w, "b", 2, ne_bad, PK_TYPE_Q8_0, &err) == PK_ERR_ARG,
               "row not a block multiple: %s", err.msg);
    TEST_CHECK(gguf_writer_set_u32(w, "general.alignment", 48, &err) == PK_OK, "set");
    TEST_CHECK(gguf_writer_begin(w, &err) == PK_ERR_ARG && strstr(err.msg, "alignment"),
               "alignment 48: %s", err.msg);
    gguf_writer_free(w);
    TEST_CHECK(!file_exists(path) && !tmp_exists(path), "nothing written");

    w = NULL;
    gguf_writer_new(path, &w, &err);
    gguf_writer_add_tensor(w, "a", 2, ne, PK_TYPE_F32, &err);
    TEST_CHECK(gguf_writer_write(w, data, 4, &err) == PK_ERR_ARG, "write before begin");
    TEST_CHECK(gguf_writer_begin(w, &err) == PK_OK, "begin: %s", err.msg);
    TEST_CHECK(tmp_exists(path) && !file_exists(path), "writing goes to .tmp");
    TEST_CHECK(gguf_writer_write(w, data, 100, &err) == PK_OK, "write part");
    TEST_CHECK(gguf_writer_finish(w, &err) == PK_ERR_ARG && strstr(err.msg, "100 of its 256"),
               "finish with missing data: %s", err.msg);
    TEST_CHECK(!tmp_exists(path) && !file_exists(path), "incomplete file removed");
    gguf_writer_free(w);

    w = NULL;
    gguf_writer_new(path, &w, &err);
    gguf_writer_add_tensor(w, "a", 2, ne, PK_TYPE_F32, &err);
    gguf_writer_begin(w, &err);
    TEST_CHECK(gguf_writer_write(w, data, sizeof data + 4, &err) == PK_ERR_ARG &&
               strstr(err.msg, "beyond"), "too much data: %s", err.msg);
    gguf_writer_free(w);
    TEST_CHECK(!tmp_exists(path) && !file_exists(path), "failed file removed");

    w = NULL;
    gguf_writer_new(path, &w, &err);
    gguf_writer_add_tensor(w, "a", 2, ne, PK_TYPE_F32, &err);
    gguf_writer_begin(w, &err);
    gguf_writer_write(w, data, 8, &err);
    gguf_writer_free(w);   /* abandoned */
    TEST_CHECK(!tmp_exists(path) && !file_exists(path), "abandoned file removed");
}

/* ---- errors ----------------------------------------------------------------------------------- */

static void expect_fail(const char *what, const char *preset, const char *ov, const char *in,
                        const char *out, int code, const char *needle) {
    pk_quantize_params p = pk_quantize_default_params();
    pk_error err = {0};
    const char *ovs[1] = {ov};
    p.preset = preset;
    if (ov) { p.overrides = ovs; p.n_overrides = 1; }
    int rc = pk_quantize_file(in, out, &p, &err);
    TEST_CHECK(rc == code && strstr(err.msg, needle) && !strchr(err.msg, '\n'),
               "%s: rc %d (want %d), message '%s' should contain '%s'", what, rc, code, err.msg,
               needle);
    TEST_CHECK(!file_exists(out) && !tmp_exists(out), "%s: output left behind", what);
    fprintf(stderr, "ok: %s -> %s\n", what, err.msg);
}

static void test_errors(void) {
    const char *out = tmp_path("err.gguf");
    expect_fail("missing input", "Q8_0", NULL, "models/no-such-model.gguf", out, PK_ERR_IO,
                "no-such-model.gguf");
    expect_fail("output directory missing", "Q8_0", NULL, MODEL, tmp_path("no/such/dir/x.gguf"),
                PK_ERR_IO, "no/such/dir/x.gguf.tmp");
    expect_fail("unknown preset", "Q9_Z", NULL, MODEL, out, PK_ERR_ARG, "Q9_Z");
    expect_fail("override without =", "Q8_0", "attn_v", MODEL, out, PK_ERR_ARG, "PATTERN=TYPE");
    expect_fail("override empty pattern", "Q8_0", "=q8_0", MODEL, out, PK_ERR_ARG, "empty pattern");
    expect_fail("override empty type", "Q8_0", "attn_v=", MODEL, out, PK_ERR_ARG, "empty type");
    expect_fail("override unknown type", "Q8_0", "attn_v=Q9_9", MODEL, out, PK_ERR_ARG, "Q9_9");
    expect_fail("override regex class", "Q8_0", "blk\\.[0-3]\\.attn_v=q8_0", MODEL, out, PK_ERR_ARG,
                "unsupported pattern character");
    expect_fail("override misplaced anchor", "Q8_0", "attn^v=q8_0", MODEL, out, PK_ERR_ARG,
                "unsupported pattern character '^'");
    expect_fail("override two =", "Q8_0", "a=b=q8_0", MODEL, out, PK_ERR_ARG, "PATTERN=TYPE");
    expect_fail("override space", "Q8_0", "attn v=q8_0", MODEL, out, PK_ERR_ARG, "space");
    expect_fail("override activation type", "Q8_0", "attn_v=q8_k", MODEL, out, PK_ERR_ARG,
                "not a weight type");
    expect_fail("override matching nothing", "Q8_0", "attn_vv=q8_0", MODEL, out, PK_ERR_ARG,
                "matches no quantizable tensor");
    expect_fail("override matching only norms", "Q8_0", "_norm=q8_0", MODEL, out, PK_ERR_ARG,
                "matches no quantizable tensor");
    expect_fail("override needing an imatrix", "Q8_0", "ffn_up_exps=iq2_xxs", MODEL, out,
                PK_ERR_ARG, "importance matrix");
    expect_fail("type without a quantizer", "Q8_0", "ffn_up_exps=tq2_0", MODEL, out,
                PK_ERR_UNSUPPORTED, "TQ2_0");
}

static const float *imat_wrong_size(void *ud, const char *name, int64_t *n) {
    static float w[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    (void)ud;
    if (!strstr(name, "attn_q.weight")) return NULL;
    *n = 8;
    return w;
}

static const float *imat_ok(void *ud, const char *name, int64_t *n) {
    static float w[256 * 16];
    (void)ud;
    if (!strstr(name, "ffn_up_exps")) return NULL;
    for (int i = 0; i < 256 * 16; i++) w[i] = 1.0f;
    *n = 256 * 16;
    return w;
}

static void test_imatrix_hook(void) {
    pk_quantize_params p = pk_quantize_default_params();
    pk_error err = {0};
    const char *out = tmp_path("imat.gguf");
    p.preset = "Q8_0";
    p.imatrix = imat_wrong_size;
    int rc = pk_quantize_file(MODEL, out, &p, &err);
    TEST_CHECK(rc == PK_ERR_ARG && strstr(err.msg, "attn_q.weight") && strstr(err.msg, "8 values"),
               "imatrix of the wrong size: rc %d: %s", rc, err.msg);
    p.imatrix = imat_ok;
    rc = pk_quantize_file(MODEL, out, &p, &err);     /* Q8_0 ignores importances, as ggml */
    TEST_CHECK(rc == PK_OK && file_exists(out), "imatrix with Q8_0: rc %d: %s", rc, err.msg);
    remove(out);
    p.preset = "Q2_K";                                /* ffn_up_exps -> Q2_K, weighted */
    rc = pk_quantize_file(MODEL, out, &p, &err);
    TEST_CHECK(rc == PK_OK && file_exists(out), "imatrix with Q2_K: rc %d: %s", rc, err.msg);
    remove(out);
}

/* ---- IQ2_XXS, IQ2_XS: llama-quantize's rules, an importance matrix required ---- */

/* the bundled model (6 layers, 16 experts) under IQ2_XXS / IQ2_XS with the
 * experts overridden to Q8_0 (quantizing them at 2 bits takes a minute) */
static int iq2_expected(const char *name, int t) {
    if (strcmp(name, "output.weight") == 0) return PK_TYPE_Q5_K;
    if (strcmp(name, "token_embd.weight") == 0) return PK_TYPE_Q2_K;
    if (strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp")) return PK_TYPE_F32;
    if (strstr(name, "_exps")) return PK_TYPE_Q8_0;
    if (strstr(name, "attn_v.weight")) return PK_TYPE_Q4_K;    /* 16 experts: not 2 bits */
    return t;
}

static void test_iq2_presets(void) {
    static const struct { const char *preset; int type, ftype; } ps[] = {
        { "IQ2_XXS", PK_TYPE_IQ2_XXS, 19 }, { "IQ2_XS", PK_TYPE_IQ2_XS, 20 },
    };
    const char *out = tmp_path("iq2.gguf"), *ov[1] = {"_exps=q8_0"};
    gguf_file *in = NULL;
    pk_error err = {0};
    TEST_CHECK(gguf_open(MODEL, &in, &err) == PK_OK, "open %s: %s", MODEL, err.msg);
    if (!in) return;
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        expect_fail("IQ2 preset without an importance matrix", ps[i].preset, NULL, MODEL, out, PK_ERR_ARG,
                    "needs an importance matrix");
        pk_quantize_params p = pk_quantize_default_params();
        p.preset = ps[i].preset;
        p.overrides = ov;
        p.n_overrides = 1;
        p.n_threads = 2;
        p.imatrix = imat_ok;                  /* entries for ffn_up_exps only */
        int rc = pk_quantize_file(MODEL, out, &p, &err);
        TEST_CHECK(rc == PK_ERR_ARG && strstr(err.msg, "has no entry") && strstr(err.msg, ps[i].preset),
                   "%s: a tensor without its importance entry: rc %d: %s", ps[i].preset, rc, err.msg);
        TEST_CHECK(!file_exists(out), "%s: failed run left a file", ps[i].preset);
        p.imatrix = imat_all;
        p.imatrix_ud = in;
        double t0 = pk_time();
        rc = pk_quantize_file(MODEL, out, &p, &err);
        TEST_CHECK(rc == PK_OK, "%s with an importance matrix: %s", ps[i].preset, err.msg);
        if (rc) continue;
        fprintf(stderr, "%s: %s in %.2fs\n", out, ps[i].preset, pk_time() - t0);
        gguf_file *of = NULL;
        int n2 = 0;
        int64_t ft = -1;
        if (gguf_open(out, &of, &err) == PK_OK) {
            gguf_get_int(of, "general.file_type", 0, &ft, &err);
            for (uint64_t k = 0; k < of->n_tensors; k++) {
                const gguf_tensor *o = &of->tensors[k], *t = gguf_find_tensor(in, o->name);
                int want = iq2_expected(o->name, ps[i].type);
                TEST_CHECK(o->type == want, "%s file: '%s' is %s, expected %s", ps[i].preset, o->name,
                           pk_type_name(o->type), pk_type_name(want));
                if (o->type != ps[i].type || !t) continue;
                /* every row: the F16 row quantized with importance 1 (imp NULL) */
                n2++;
                int64_t bad = requant_mismatch(
                    t, o, 1, o->type == PK_TYPE_IQ2_XXS ? pk_quantize_iq2_xxs_imat : pk_quantize_iq2_xs_imat, NULL);
                TEST_CHECK(bad == -1, "%s: '%s' row %lld is not the quantizer's", ps[i].preset, o->name,
                           (long long)bad);
            }
            gguf_close(of);
        }
        TEST_CHECK(ft == ps[i].ftype, "%s: general.file_type %lld, expected %d", ps[i].preset, (long long)ft,
                   ps[i].ftype);
        TEST_CHECK(n2 == 18, "%s: %d tensors of the preset's type (attn_q, attn_k, attn_output)", ps[i].preset,
                   n2);
        remove(out);
    }
    gguf_close(in);
}

/* ---- IQ1_S, IQ1_M ------------------------------------------------------------------------ */

/* an importance matrix for every quantizable tensor of a file (ne[0] * ne[2]
 * values of a fixed pattern), except those whose name contains skip */
typedef struct imat_fill {
    gguf_file *f;
    float *buf;
    int64_t cap;
    const char *skip;
} imat_fill;

static const float *imat_all_fn(void *ud, const char *name, int64_t *n) {
    imat_fill *a = ud;
    const gguf_tensor *t = gguf_find_tensor(a->f, name);
    if (!t || (a->skip && strstr(name, a->skip))) return NULL;
    *n = t->ne[0] * (t->ne[2] > 0 ? t->ne[2] : 1);
    if (*n > a->cap) return NULL;
    for (int64_t i = 0; i < *n; i++) a->buf[i] = 0.5f + (float)((i * 29) % 17) / 8.0f;
    return a->buf;
}

/* the bundled model opened in ia, its buffer sized for its largest tensor;
 * 0 (a failed check) if it cannot be opened */
static int imat_fill_model(imat_fill *ia) {
    pk_error err = {0};
    if (gguf_open(MODEL, &ia->f, &err)) {
        TEST_CHECK(0, "open %s: %s", MODEL, err.msg);
        return 0;
    }
    for (uint64_t i = 0; i < ia->f->n_tensors; i++) {
        const gguf_tensor *t = &ia->f->tensors[i];
        int64_t n = t->ne[0] * (t->ne[2] > 0 ? t->ne[2] : 1);
        if (n > ia->cap) ia->cap = n;
    }
    ia->buf = malloc((size_t)ia->cap * sizeof(float));
    return 1;
}

/* llama-quantize's IQ1_S / IQ1_M mix on this model (its files in
 * ../shared/models/iq/ have these types): output Q5_K, token_embd Q2_K,
 * attn_v Q4_K (16 experts), attn_output IQ2_XXS, no ffn_down at Q2_K (the
 * first 6 / 8 = 0), the rest the preset's type; norms and router F32. */
static int iq1_type;
static int iq1_expected(const char *name) {
    if (strcmp(name, "output.weight") == 0) return PK_TYPE_Q5_K;
    if (strcmp(name, "token_embd.weight") == 0) return PK_TYPE_Q2_K;
    if (strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp")) return PK_TYPE_F32;
    if (strstr(name, "attn_v.weight")) return PK_TYPE_Q4_K;
    if (strstr(name, "attn_output.weight")) return PK_TYPE_IQ2_XXS;
    return iq1_type;
}

static void test_iq1(void) {
    pk_error err = {0};
    imat_fill ia = {0};
    if (!imat_fill_model(&ia)) return;
    static const char *const names[2] = {"IQ1_S", "IQ1_M"};
    static const int types[2] = {PK_TYPE_IQ1_S, PK_TYPE_IQ1_M};
    for (int k = 0; k < 2; k++) {
        pk_quantize_params p = pk_quantize_default_params();
        prog pr = {0};
        p.preset = names[k];
        p.dry_run = 1;
        p.progress = on_progress;
        p.progress_ud = &pr;
        p.imatrix = imat_all_fn;
        p.imatrix_ud = &ia;
        iq1_type = types[k];
        int rc = pk_quantize_file(MODEL, tmp_path("iq1.gguf"), &p, &err);
        TEST_CHECK(rc == PK_OK && pr.calls == 75, "%s dry run: rc %d, %d tensors: %s", names[k], rc, pr.calls,
                   err.msg);
        for (int i = 0; i < pr.calls && i < 256; i++)
            TEST_CHECK(strcmp(pr.types[i], pk_type_name(iq1_expected(pr.names[i]))) == 0,
                       "%s: '%s' -> %s, expected %s", names[k], pr.names[i], pr.types[i],
                       pk_type_name(iq1_expected(pr.names[i])));
        /* as llama-quantize: no importance matrix, no IQ1 */
        expect_fail(names[k], names[k], NULL, MODEL, tmp_path("iq1.gguf"), PK_ERR_ARG, "needs an importance matrix");
    }
    /* a tensor the importance matrix lacks */
    pk_quantize_params p = pk_quantize_default_params();
    const char *ovs[3] = {"blk.0.ffn_up_exps=iq1_s", "blk.1.ffn_down_exps=iq1_m", "blk.2.attn_q=iq1_s"};
    const char *out = tmp_path("iq1.gguf");
    p.preset = "Q8_0";
    p.overrides = ovs;
    p.n_overrides = 3;
    p.imatrix = imat_all_fn;
    p.imatrix_ud = &ia;
    p.n_threads = 2;
    ia.skip = "blk.1.ffn_down_exps";
    int rc = pk_quantize_file(MODEL, out, &p, &err);
    TEST_CHECK(rc == PK_ERR_ARG && strstr(err.msg, "'blk.1.ffn_down_exps.weight'") &&
                   strstr(err.msg, "has no entry") && strstr(err.msg, "IQ1_M needs one") && !file_exists(out),
               "IQ1 tensor without an imatrix entry: rc %d: %s", rc, err.msg);
    /* three tensors to IQ1 under Q8_0: every row is the quantizer's of its
       dequantized input with its importances */
    ia.skip = NULL;
    rc = pk_quantize_file(MODEL, out, &p, &err);
    TEST_CHECK(rc == PK_OK, "Q8_0 with IQ1 overrides: %s", err.msg);
    gguf_file *of = NULL;
    if (rc == PK_OK && gguf_open(out, &of, &err) == PK_OK) {
        check_output(MODEL, out, 7, "Q8_0", 3);
        static const char *const tn[3] = {"blk.0.ffn_up_exps.weight", "blk.1.ffn_down_exps.weight",
                                          "blk.2.attn_q.weight"};
        for (int k = 0; k < 3; k++) {
            const gguf_tensor *t = gguf_find_tensor(ia.f, tn[k]), *o = gguf_find_tensor(of, tn[k]);
            const int want = k == 1 ? PK_TYPE_IQ1_M : PK_TYPE_IQ1_S;
            TEST_CHECK(t && o && o->type == want, "%s is %s", tn[k], o ? pk_type_name(o->type) : "missing");
            if (!t || !o || o->type != want) continue;
            int64_t n = 0;
            const float *imp = imat_all_fn(&ia, tn[k], &n);
            int64_t bad = requant_mismatch(t, o, 7, want == PK_TYPE_IQ1_S ? pk_quantize_iq1_s : pk_quantize_iq1_m,
                                           imp);
            TEST_CHECK(bad == -1, "%s: row %lld is not the quantizer's", tn[k], (long long)bad);
        }
        gguf_close(of);
    }
    remove(out);
    free(ia.buf);
    gguf_close(ia.f);
}

/* ---- the i-quant presets of IQ3_XXS, IQ3_S, IQ2_S (llama-quantize's rules on
 * this model: 6 layers, 16 experts, GQA 2) ------------------------------------------- */

static int is_norm_or_router(const char *name) {
    return strstr(name, "_norm.weight") || strstr(name, "ffn_gate_inp");
}
/* IQ3_S: IQ3_S everywhere but output (Q6_K) */
static int iq3s_expected(const char *name) {
    if (is_norm_or_router(name)) return PK_TYPE_F32;
    return strcmp(name, "output.weight") == 0 ? PK_TYPE_Q6_K : PK_TYPE_IQ3_S;
}
/* IQ3_M: attn_v and attn_output Q4_K, output Q6_K, the rest IQ3_S (its
 * ffn_down rule, Q4_K below layer n / 8 = 0 or in 8-expert models, picks
 * none here) */
static int iq3m_expected(const char *name) {
    if (is_norm_or_router(name)) return PK_TYPE_F32;
    if (strcmp(name, "output.weight") == 0) return PK_TYPE_Q6_K;
    if (strstr(name, "attn_v.weight") || strstr(name, "attn_output.weight")) return PK_TYPE_Q4_K;
    return PK_TYPE_IQ3_S;
}
/* IQ3_XS (with an importance matrix: its IQ3_XXS tensors need one): attn_q,
 * attn_k IQ3_XXS; ffn_gate / ffn_up of layers 0 <= l < 5 (n / 8 = 0 ..
 * 7 n / 8 = 5) IQ3_XXS; output Q6_K; the rest IQ3_S */
static int iq3xs_expected(const char *name) {
    if (is_norm_or_router(name)) return PK_TYPE_F32;
    if (strcmp(name, "output.weight") == 0) return PK_TYPE_Q6_K;
    if (strstr(name, "attn_q.weight") || strstr(name, "attn_k.weight")) return PK_TYPE_IQ3_XXS;
    int l = layer_num(name);
    if ((strstr(name, "ffn_gate_exps") || strstr(name, "ffn_up_exps")) && l >= 0 && l < 5) return PK_TYPE_IQ3_XXS;
    return PK_TYPE_IQ3_S;
}
/* IQ3_XXS with an importance matrix: output Q5_K, token_embd and
 * attn_output IQ3_S, attn_q / attn_k IQ2_S, the rest (attn_v included)
 * IQ3_XXS - the mix of llama-quantize's file in ../shared/models/iq */
static int iq3xxs_expected(const char *name) {
    if (is_norm_or_router(name)) return PK_TYPE_F32;
    if (strcmp(name, "output.weight") == 0) return PK_TYPE_Q5_K;
    if (strcmp(name, "token_embd.weight") == 0 || strstr(name, "attn_output.weight")) return PK_TYPE_IQ3_S;
    if (strstr(name, "attn_q.weight") || strstr(name, "attn_k.weight")) return PK_TYPE_IQ2_S;
    return PK_TYPE_IQ3_XXS;
}
/* IQ2_M (IQ2_S: the same with IQ2_XS for IQ2_S) with an importance matrix:
 * output Q5_K, token_embd and attn_output IQ3_S, attn_v Q4_K (16 experts >=
 * 4), no ffn_down at IQ3_S (the first 6 / 8 = 0), the rest IQ2_S */
static int iq2_sm_expected(const char *name, int rest) {
    if (is_norm_or_router(name)) return PK_TYPE_F32;
    if (strcmp(name, "output.weight") == 0) return PK_TYPE_Q5_K;
    if (strcmp(name, "token_embd.weight") == 0 || strstr(name, "attn_output.weight")) return PK_TYPE_IQ3_S;
    if (strstr(name, "attn_v.weight")) return PK_TYPE_Q4_K;
    return rest;
}
static int iq2m_expected(const char *name) { return iq2_sm_expected(name, PK_TYPE_IQ2_S); }
static int iq2s_expected(const char *name) { return iq2_sm_expected(name, PK_TYPE_IQ2_XS); }
/* pocket's MOE_IQ2_XXS / MOE_IQ1_M: MOE_Q2_K's rule with the routed experts
 * at IQ2_XXS / IQ1_M (attn_v Q8_0, other matrices Q6_K, norms and router F32) */
static int moe_iq_expected(const char *name, int experts) {
    int t = moeq2k_expected(name);
    return t == PK_TYPE_Q2_K ? experts : t;
}
static int moeiq2xxs_expected(const char *name) { return moe_iq_expected(name, PK_TYPE_IQ2_XXS); }
static int moeiq1m_expected(const char *name) { return moe_iq_expected(name, PK_TYPE_IQ1_M); }

/* The presets that need an importance matrix are refused without one
 * (naming a tensor: for the MoE-aware ones a routed-expert tensor, the only
 * ones at a type that needs it), and plan llama-quantize's mix (pocket's for
 * MOE_*) with one; a real IQ2_M run writes every converted row as the
 * importance-weighted quantizer does. */
static void test_iq_presets(void) {
    pk_error err = {0};
    imat_fill ia = {0};
    if (!imat_fill_model(&ia)) return;
    static const struct { const char *preset; int (*expected)(const char *); int needs; } ps[] = {
        { "IQ3_M", iq3m_expected, 0 }, { "IQ3_XS", iq3xs_expected, 1 },
        { "IQ3_XXS", iq3xxs_expected, 1 }, { "IQ2_M", iq2m_expected, 1 }, { "IQ2_S", iq2s_expected, 1 },
        { "MOE_IQ2_XXS", moeiq2xxs_expected, 1 }, { "MOE_IQ1_M", moeiq1m_expected, 1 },
    };
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        pk_quantize_params p = pk_quantize_default_params();
        prog pr = {0};
        p.preset = ps[i].preset;
        p.dry_run = 1;
        p.progress = on_progress;
        p.progress_ud = &pr;
        int rc = pk_quantize_file(MODEL, tmp_path("iq.gguf"), &p, &err);
        if (ps[i].needs) {
            TEST_CHECK(rc == PK_ERR_ARG && strstr(err.msg, "needs an importance matrix") && strstr(err.msg, "tensor '"),
                       "%s without an importance matrix: rc %d: %s", ps[i].preset, rc, err.msg);
            if (strncmp(ps[i].preset, "MOE_", 4) == 0)
                TEST_CHECK(strstr(err.msg, "_exps.weight'") != NULL, "%s: the refusal names no expert tensor: %s",
                           ps[i].preset, err.msg);
            memset(&pr, 0, sizeof pr);
            p.imatrix = imat_all_fn;
            p.imatrix_ud = &ia;
            rc = pk_quantize_file(MODEL, tmp_path("iq.gguf"), &p, &err);
        }
        TEST_CHECK(rc == PK_OK && pr.calls == 75, "%s dry run: rc %d (%s), %d tensors", ps[i].preset, rc, err.msg,
                   pr.calls);
        for (int k = 0; k < pr.calls && k < 256; k++) {
            int want = ps[i].expected(pr.names[k]);
            TEST_CHECK(strcmp(pr.types[k], pk_type_name(want)) == 0, "%s: '%s' -> %s, expected %s", ps[i].preset,
                       pr.names[k], pr.types[k], pk_type_name(want));
        }
    }
    /* a real IQ2_M run with importances (every tensor has some): IQ2_S,
     * IQ3_S, Q4_K, Q5_K rows checked */
    pk_quantize_params p = pk_quantize_default_params();
    p.preset = "IQ2_M";
    p.imatrix = imat_all_fn;
    p.imatrix_ud = &ia;
    p.n_threads = 2;
    const char *out = tmp_path("kjv-iq2_m.gguf");
    double t0 = pk_time();
    int rc = pk_quantize_file(MODEL, out, &p, &err);
    fprintf(stderr, "%s: IQ2_M in %.2fs\n", out, pk_time() - t0);
    TEST_CHECK(rc == PK_OK, "IQ2_M: %s", err.msg);
    gguf_file *of = NULL;
    if (rc == PK_OK && gguf_open(out, &of, &err) == PK_OK) {
        static const char *const names[] = { "blk.1.ffn_down_exps.weight", "blk.2.attn_output.weight",
                                             "blk.3.attn_v.weight", "output.weight" };
        for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
            const gguf_tensor *t = gguf_find_tensor(ia.f, names[i]), *o = gguf_find_tensor(of, names[i]);
            TEST_CHECK(t && o && o->type == iq2m_expected(names[i]), "IQ2_M: '%s' is there as %s", names[i],
                       o ? pk_type_name(o->type) : "-");
            if (!t || !o) continue;
            int64_t n = 0;
            const float *w = imat_all_fn(&ia, names[i], &n);
            const requant_fn fn = o->type == PK_TYPE_IQ2_S ? pk_quantize_iq2_s
                                : o->type == PK_TYPE_IQ3_S ? pk_quantize_iq3_s
                                : o->type == PK_TYPE_Q4_K  ? pk_quantize_q4_K_imat
                                                           : pk_quantize_q5_K_imat;
            int64_t bad = requant_mismatch(t, o, 5, fn, w);
            TEST_CHECK(bad == -1, "IQ2_M: '%s' (%s) row %lld differs from the weighted quantizer", names[i],
                       pk_type_name(o->type), (long long)bad);
        }
        gguf_close(of);
    }
    remove(out);
    free(ia.buf);
    gguf_close(ia.f);
}

/* A file size limit below the output size: write fails with EFBIG, just as a
 * full disk fails with ENOSPC. Run in a child so the limit stays there. */
static void test_write_failure(void) {
    const char *out = tmp_path("limit.gguf");
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {4u << 20, 4u << 20};
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(3);
        pk_quantize_params p = pk_quantize_default_params();
        pk_error err = {0};
        p.preset = "Q8_0";
        int rc = pk_quantize_file(MODEL, out, &p, &err);
        fprintf(stderr, "file size limit: rc %d: %s\n", rc, err.msg);
        char want[800];
        snprintf(want, sizeof want, "%s.tmp: write failed at byte", out);
        _exit(rc == PK_ERR_IO && strstr(err.msg, want) && strstr(err.msg, strerror(EFBIG)) ? 0 : 1);
    }
    int st = 0;
    TEST_CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork/wait");
    TEST_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "write failure reported (status %d)", st);
    TEST_CHECK(!file_exists(out) && !tmp_exists(out), "write failure: nothing left behind");
}

int main(void) {
    const char *build = getenv("BUILD");
    snprintf(tmpdir, sizeof tmpdir, "%s/tmp/quantize", build && *build ? build : "build");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", tmpdir, tmpdir);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot make %s\n", tmpdir);
        return 1;
    }

    TEST_CHECK(pk_quantize_n_presets() >= 15 && pk_quantize_preset_name(0) &&
               !pk_quantize_preset_name(pk_quantize_n_presets()), "preset list");
    test_writer_misuse();
    test_simple_preset("Q8_0", PK_TYPE_Q8_0, 7, "kjv-q8_0.gguf", 2);
    test_simple_preset("Q8_0", PK_TYPE_Q8_0, 7, "kjv-q8_0-t1.gguf", 1);
    TEST_CHECK(files_equal(tmp_path("kjv-q8_0.gguf"), tmp_path("kjv-q8_0-t1.gguf")),
               "Q8_0 output identical with 1 and 2 threads");
    test_python_reader(tmp_path("kjv-q8_0.gguf"));
    test_simple_preset("F32", PK_TYPE_F32, 0, "kjv-f32.gguf", 2);
    /* requantize an already quantized file: Q8_0 -> F16 goes through to_float */
    {
        pk_quantize_params p = pk_quantize_default_params();
        pk_error err = {0};
        p.preset = "F16";
        int rc = pk_quantize_file(tmp_path("kjv-q8_0.gguf"), tmp_path("kjv-q8-f16.gguf"), &p, &err);
        TEST_CHECK(rc == PK_OK, "Q8_0 -> F16: %s", err.msg);
        if (!rc) check_output(tmp_path("kjv-q8_0.gguf"), tmp_path("kjv-q8-f16.gguf"), 1, "F16", 1);
    }
    test_mix("Q4_K_M", q4km_expected, 15, "kjv-q4_k_m.gguf");
    test_mix("MOE_Q2_K", moeq2k_expected, 10, "kjv-moe_q2_k.gguf");
    test_mix("IQ3_S", iq3s_expected, 26, "kjv-iq3_s.gguf");
    test_iq_presets();
    test_synthetic();
    test_errors();
    test_imatrix_hook();
    test_iq2_presets();
    test_iq1();
    test_write_failure();

    int r = TEST_REPORT();
    if (r == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "note: could not remove %s\n", tmpdir);
    }
    return r;
}
