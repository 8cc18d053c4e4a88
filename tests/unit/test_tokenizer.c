/* test_tokenizer.c - the tokenizer against llama.cpp's test vectors for the
 * toy gemma4 vocabulary tests/data/vocab/ggml-vocab-gemma4-toy.gguf (whose
 * .out/.out-special are llama.cpp's answers, see tests/lib/mk_gemma4_vocab.py),
 * byte round trips and concurrent use on the bundled KJV model, and error
 * paths on small GGUF images built in memory.
 *
 * test_tokenizer --vocabs DIR runs instead the tests on llama.cpp's test
 * vocabularies DIR/ggml-vocab-*.gguf with their .inp/.out (../shared/tokenizer,
 * 1-6 MB each, not in the repository: tests/ref/shared/t_tokenizer_vocabs.sh,
 * `make test-shared`): every vector, byte round trips, special tokens of
 * qwen3 / llama SPM / BERT, concurrent use of the qwen3 vocabulary. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testhelp.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

#define KJV_MODEL "models/kjv-moe-f16.gguf"
#define GEMMA4_TOY "tests/data/vocab/ggml-vocab-gemma4-toy.gguf"

/* ===================================================================== */
/* Helpers                                                                */
/* ===================================================================== */

static char *read_file(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) { free(buf); buf = NULL; }
    fclose(fp);
    if (buf) { buf[n] = 0; *len = (size_t)n; }
    return buf;
}

/* Tokenize into a malloc'ed array; *n = count (or negative error). */
static int32_t *tokenize(const pk_tokenizer *t, const char *s, size_t len, int add_special,
                         int parse_special, int *n) {
    int need = pk_tokenize(t, s, len, NULL, 0, add_special, parse_special);
    *n = need;
    if (need < 0) return NULL;
    int32_t *ids = malloc(((size_t)need + 1) * sizeof *ids);
    int got = pk_tokenize(t, s, len, ids, need, add_special, parse_special);
    if (got != need) *n = -1000;
    return ids;
}

/* Concatenated pieces of ids (malloc'ed), length in *len. */
static char *detokenize(const pk_tokenizer *t, const int32_t *ids, int n, size_t *len) {
    size_t cap = 64, at = 0;
    char *out = malloc(cap);
    for (int i = 0; i < n; i++) {
        int k = pk_token_to_piece(t, ids[i], NULL, 0, 0);
        if (k < 0) { free(out); return NULL; }
        while (at + (size_t)k + 1 > cap) out = realloc(out, cap *= 2);
        pk_token_to_piece(t, ids[i], out + at, k, 0);
        at += (size_t)k;
    }
    out[at] = 0;
    *len = at;
    return out;
}

static pk_tokenizer *load_vocab(const char *path) {
    gguf_file *f = NULL;
    pk_error err = { 0 };
    pk_tokenizer *t = NULL;
    int rc = gguf_open(path, &f, &err);
    TEST_CHECK(rc == PK_OK, "gguf_open %s: %s", path, err.msg);
    if (rc) return NULL;
    rc = pk_tokenizer_load(f, &t, &err);
    TEST_CHECK(rc == PK_OK, "pk_tokenizer_load %s: %s", path, err.msg);
    gguf_close(f);   /* the tokenizer must not need the file any more */
    return t;
}

/* ===================================================================== */
/* llama.cpp test vectors                                                 */
/* ===================================================================== */

typedef struct vecs {
    char *inp;
    size_t n;
    const char **str;   /* into inp (separators overwritten) */
    size_t *len;
    char **out;         /* expected id lines */
} vecs;

/* Strings separated by "\n__ggml_vocab_test__\n", one .out line per string
 * (the convention of llama.cpp's tests/test-tokenizer-0.cpp). */
static int read_vectors(const char *gguf, const char *out_ext, vecs *v) {
    char p[512];
    size_t ilen, olen;
    memset(v, 0, sizeof *v);
    snprintf(p, sizeof p, "%s.inp", gguf);
    if (!(v->inp = read_file(p, &ilen))) return 0;
    snprintf(p, sizeof p, "%s%s", gguf, out_ext);
    char *outs = read_file(p, &olen);
    if (!outs) { free(v->inp); return 0; }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t cap = 16;
    v->str = malloc(cap * sizeof *v->str);
    v->len = malloc(cap * sizeof *v->len);
    for (size_t pos = 0; pos < ilen;) {
        char *next = strstr(v->inp + pos, sep);
        size_t end = next ? (size_t)(next - v->inp) : ilen;
        if (v->n == cap) {
            cap *= 2;
            v->str = realloc(v->str, cap * sizeof *v->str);
            v->len = realloc(v->len, cap * sizeof *v->len);
        }
        v->str[v->n] = v->inp + pos;
        v->len[v->n] = end - pos;
        v->n++;
        if (!next) break;
        pos = end + sizeof sep - 1;
    }
    for (size_t i = 0; i < v->n; i++) ((char *)v->str[i])[v->len[i]] = 0;
    v->out = calloc(v->n, sizeof *v->out);
    size_t k = 0;
    for (char *line = outs; k < v->n && line < outs + olen;) {   /* keep empty lines */
        char *e = strchr(line, '\n');
        if (e) *e = 0;
        v->out[k++] = strdup(line);
        if (!e) break;
        line = e + 1;
    }
    free(outs);
    return k == v->n;
}

static void free_vectors(vecs *v) {
    for (size_t i = 0; i < v->n; i++) free(v->out ? v->out[i] : NULL);
    free(v->out); free(v->str); free(v->len); free(v->inp);
}

/* Parse a line of space-separated ids into ids; returns the count. */
static int parse_ids(const char *line, int32_t *ids, int max) {
    int n = 0;
    const char *p = line;
    while (*p) {
        char *e;
        long x = strtol(p, &e, 10);
        if (e == p) { p++; continue; }
        if (n < max) ids[n] = (int32_t)x;
        n++;
        p = e;
    }
    return n;
}

static int is_model(const char *path, const char *model) {
    gguf_file *f = NULL;
    pk_error err;
    if (gguf_open(path, &f, &err)) return 0;
    char *m = NULL;
    int yes = gguf_get_string(f, "tokenizer.ggml.model", 0, &m, &err) == PK_OK && m &&
              strcmp(m, model) == 0;
    free(m);
    gguf_close(f);
    return yes;
}

/* What valid UTF-8 gemma4 text detokenizes to: s[0..n) with each U+2581 as
 * a space (malloc'ed); NULL if s is not valid UTF-8 (its ids are checked
 * against llama.cpp's, its bytes do not come back). */
static char *gemma4_roundtrip(const char *s, size_t n, size_t *len) {
    char *o = malloc(3 * n + 1);
    size_t k = 0;
    for (size_t i = 0; o && i < n;) {
        uint32_t cp;
        int cl = pk_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        if (cp == 0xFFFD && !(cl == 3 && !memcmp(s + i, "\xef\xbf\xbd", 3))) { free(o); return NULL; }
        if (cp == 0x2581) o[k++] = ' ';
        else { memcpy(o + k, s + i, (size_t)cl); k += (size_t)cl; }
        i += (size_t)cl;
    }
    *len = k;
    return o;
}

/* Every test string of one vocab against the ids in path + out_ext (taken
 * with add_special = parse_special = special); returns 1 if all pass. */
static int run_vocab_ext(const char *path, const char *out_ext, int special, int *n_pass, int *n_total) {
    vecs v;
    *n_pass = *n_total = 0;
    if (!read_vectors(path, out_ext, &v)) {
        TEST_CHECK(0, "%s: cannot read .inp/%s (or counts differ)", path, out_ext);
        return 0;
    }
    pk_tokenizer *t = load_vocab(path);
    if (!t) { free_vectors(&v); return 0; }
    int bpe = is_model(path, "gpt2"), spm = is_model(path, "llama"), gemma4 = is_model(path, "gemma4");
    for (size_t i = 0; i < v.n; i++) {
        int32_t want[512];
        int nw = parse_ids(v.out[i], want, 512);
        int n;
        int32_t *got = tokenize(t, v.str[i], v.len[i], special, special, &n);
        int ok = n == nw && got && memcmp(got, want, (size_t)n * sizeof *got) == 0;
        (*n_total)++;
        *n_pass += ok;
        if (!ok) {
            fprintf(stderr, "  %s string %zu '%s'\n    want:", path, i, v.str[i]);
            for (int k = 0; k < nw; k++) fprintf(stderr, " %d", want[k]);
            fprintf(stderr, "\n    got: ");
            for (int k = 0; k < n; k++) fprintf(stderr, " %d", got[k]);
            fprintf(stderr, "\n");
        }
        TEST_CHECK(ok, "%s: test string %zu tokenizes differently from llama.cpp (%s)", path, i, out_ext);

        /* gemma4: valid UTF-8 text comes back (U+2581 as a space) */
        size_t fl;
        char *fx = gemma4 && !special && got && n >= 0 ? gemma4_roundtrip(v.str[i], v.len[i], &fl) : NULL;
        if (fx) {
            size_t dl;
            char *d = detokenize(t, got, n, &dl);
            TEST_CHECK(d && dl == fl && memcmp(d, fx, dl) == 0,
                       "%s: string %zu does not round-trip ('%s' -> '%s')", path, i, v.str[i], d ? d : "(null)");
            free(d);
            free(fx);
        }

        /* detokenizing gives the text back (SPM adds its leading space) */
        if ((bpe || spm) && got && n >= 0) {
            size_t dl;
            char *d = detokenize(t, got, n, &dl);
            int rt;
            if (bpe) rt = d && dl == v.len[i] && memcmp(d, v.str[i], dl) == 0;
            else rt = d && (v.len[i] == 0 ? dl == 0
                             : dl == v.len[i] + 1 && d[0] == ' ' && memcmp(d + 1, v.str[i], v.len[i]) == 0);
            TEST_CHECK(rt, "%s: string %zu does not round-trip ('%s' -> '%s')", path, i, v.str[i],
                       d ? d : "(null)");
            free(d);
        }
        free(got);
    }
    pk_tokenizer_free(t);
    free_vectors(&v);
    return *n_pass == *n_total;
}

static int run_vocab(const char *path, int *n_pass, int *n_total) {
    return run_vocab_ext(path, ".out", 0, n_pass, n_total);
}

/* The toy gemma4 vocabulary: llama.cpp's ids without and with specials (BOS
 * forced on although add_bos_token is false), the special ids and ends of
 * generation, pieces of byte and U+2581 tokens. */
static void test_gemma4_toy(void) {
    int pass, total;
    run_vocab_ext(GEMMA4_TOY, ".out", 0, &pass, &total);
    fprintf(stderr, "%-32s %d/%d strings match llama.cpp\n", "gemma4-toy (no specials)", pass, total);
    TEST_CHECK(total >= 30, "gemma4 toy: only %d strings", total);
    run_vocab_ext(GEMMA4_TOY, ".out-special", 1, &pass, &total);
    fprintf(stderr, "%-32s %d/%d strings match llama.cpp\n", "gemma4-toy (specials)", pass, total);
    TEST_CHECK(total >= 30, "gemma4 toy: only %d strings", total);
    pk_tokenizer *t = load_vocab(GEMMA4_TOY);
    if (!t) return;
    TEST_CHECK(pk_tokenizer_bos(t) == 2 && pk_tokenizer_eos(t) == 1, "gemma4 bos %d eos %d",
               pk_tokenizer_bos(t), pk_tokenizer_eos(t));
    TEST_CHECK(pk_tokenizer_is_eog(t, 1) && pk_tokenizer_is_eog(t, 5) && pk_tokenizer_is_eog(t, 8),
               "<eos>, <turn|> and <|tool_response> end generation");
    TEST_CHECK(!pk_tokenizer_is_eog(t, 4) && !pk_tokenizer_is_eog(t, 2), "<|turn> and <bos> do not");
    char buf[16];
    int k = pk_token_to_piece(t, 12 + 0x41, buf, sizeof buf, 0);
    TEST_CHECK(k == 1 && buf[0] == 'A', "<0x41> decodes to 'A' (%d)", k);
    int m;
    int32_t *ids = tokenize(t, " hello", 6, 0, 0, &m);
    k = m == 1 ? pk_token_to_piece(t, ids[0], buf, sizeof buf, 0) : -1;
    TEST_CHECK(k == 6 && !memcmp(buf, " hello", 6), "U+2581hello decodes with a space (%d, n=%d)", k, m);
    free(ids);
    k = pk_token_to_piece(t, 4, buf, sizeof buf, 0);
    TEST_CHECK(k == 0, "<|turn> is not shown without render_special (%d)", k);
    k = pk_token_to_piece(t, 6, buf, sizeof buf, 0);
    TEST_CHECK(k == 10 && !memcmp(buf, "<|channel>", 10), "<|channel> is written out (%d)", k);
    k = pk_token_to_piece(t, 7, buf, sizeof buf, 0);
    TEST_CHECK(k == 10 && !memcmp(buf, "<channel|>", 10), "<channel|> is written out (%d)", k);
    /* the tool-call markers, the last three (control tokens here), too */
    static const char *const calls[] = {"<|tool_call>", "<tool_call|>", "<|\"|>"};
    for (int i = 0; i < 3; i++) {
        int32_t id = pk_tokenizer_n_vocab(t) - 3 + i;
        k = pk_token_to_piece(t, id, buf, sizeof buf, 0);
        TEST_CHECK(k == (int)strlen(calls[i]) && !memcmp(buf, calls[i], (size_t)k), "%s is written out (%d)", calls[i], k);
    }
    pk_tokenizer_free(t);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_all_vocabs(const char *dir) {
    DIR *d = opendir(dir);
    TEST_CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    char *names[64];
    int nn = 0;
    struct dirent *e;
    while ((e = readdir(d)) && nn < 64) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "ggml-vocab-", 11) == 0 && l > 5 && strcmp(e->d_name + l - 5, ".gguf") == 0)
            names[nn++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)nn, sizeof *names, cmp_str);
    int n_vocab_tested = 0;
    for (int i = 0; i < nn; i++) {
        char path[512], inp[600];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        snprintf(inp, sizeof inp, "%s.inp", path);
        FILE *fp = fopen(inp, "rb");
        if (fp) {
            fclose(fp);
            int pass, total;
            run_vocab(path, &pass, &total);
            fprintf(stderr, "%-32s %d/%d strings match llama.cpp\n", names[i], pass, total);
            n_vocab_tested++;
        }
        free(names[i]);
    }
    TEST_CHECK(n_vocab_tested >= 11, "only %d vocabularies with test vectors found", n_vocab_tested);
}

/* ===================================================================== */
/* Byte round trips, special tokens, concurrency                          */
/* ===================================================================== */

static void test_byte_roundtrip(const char *path) {
    pk_tokenizer *t = load_vocab(path);
    if (!t) return;
    unsigned seed = 12345;
    int bad = 0;
    for (int iter = 0; iter < 300; iter++) {
        char s[96];
        size_t len = (size_t)(iter % 90) + 1;
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            unsigned r = seed >> 16;
            /* mix ASCII, spaces/newlines, UTF-8 lead/continuation and random bytes */
            if (r % 4 == 0) s[i] = (char)(' ' + r % 95);
            else if (r % 4 == 1) s[i] = "\n \t'"[r % 5 % 4];
            else s[i] = (char)((r >> 3) & 0xFF);
        }
        int n;
        int32_t *ids = tokenize(t, s, len, 0, 0, &n);
        size_t dl = 0;
        char *d = ids && n >= 0 ? detokenize(t, ids, n, &dl) : NULL;
        if (!d || dl != len || memcmp(d, s, len) != 0) bad++;
        free(ids);
        free(d);
    }
    TEST_CHECK(bad == 0, "%s: %d of 300 random byte strings do not round-trip", path, bad);
    pk_tokenizer_free(t);
}

/* DIR/ggml-vocab-NAME.gguf, in a static buffer (one at a time) */
static const char *vocab_file(const char *dir, const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, name);
    return path;
}

static void test_qwen3_specials(const char *dir) {
    pk_tokenizer *t = load_vocab(vocab_file(dir, "qwen3"));
    if (!t) return;
    const char *s = "<|im_start|>user\nHi<|im_end|>";
    int n;
    int32_t *ids = tokenize(t, s, strlen(s), 0, 1, &n);
    TEST_CHECK(n >= 3 && ids[0] == 151644 && ids[n - 1] == 151645,
               "parse_special: <|im_start|>/<|im_end|> not recognized (n=%d first=%d)", n,
               n > 0 ? ids[0] : -1);
    free(ids);
    ids = tokenize(t, s, strlen(s), 0, 0, &n);
    int found = 0;
    for (int i = 0; i < n; i++) found |= ids[i] == 151644 || ids[i] == 151645;
    TEST_CHECK(n > 3 && !found, "without parse_special control tokens must stay text");
    free(ids);

    TEST_CHECK(pk_tokenizer_is_eog(t, 151645), "<|im_end|> (eos) is end-of-generation");
    TEST_CHECK(pk_tokenizer_is_eog(t, 151643), "<|endoftext|> is end-of-generation");
    TEST_CHECK(!pk_tokenizer_is_eog(t, 1000), "a normal token is not end-of-generation");
    char buf[32];
    TEST_CHECK(pk_token_to_piece(t, 151645, buf, sizeof buf, 0) == 0, "control piece is empty");
    int k = pk_token_to_piece(t, 151645, buf, sizeof buf, 1);
    TEST_CHECK(k == 10 && memcmp(buf, "<|im_end|>", 10) == 0, "render_special shows the text");
    TEST_CHECK(pk_tokenizer_bos(t) == 151643 && pk_tokenizer_eos(t) == 151645, "bos/eos ids");
    /* add_special: qwen adds no BOS */
    ids = tokenize(t, "Hi", 2, 1, 0, &n);
    TEST_CHECK(n == 1, "qwen3 add_special adds nothing (got %d tokens)", n);
    free(ids);
    /* a too-small buffer still reports the full count */
    int32_t one[1];
    int need = pk_tokenize(t, "Hello world, again", 18, one, 1, 0, 0);
    TEST_CHECK(need > 1, "pk_tokenize returns the needed count (%d)", need);
    pk_tokenizer_free(t);
}

static void test_spm_bos(const char *dir) {
    pk_tokenizer *t = load_vocab(vocab_file(dir, "llama-spm"));
    if (!t) return;
    int n;
    int32_t *ids = tokenize(t, "Hello", 5, 1, 0, &n);
    TEST_CHECK(n == 2 && ids[0] == 1, "llama SPM add_special prepends BOS 1 (n=%d)", n);
    free(ids);
    ids = tokenize(t, "", 0, 1, 0, &n);
    TEST_CHECK(n == 1 && ids[0] == 1, "empty text with add_special gives [BOS]");
    free(ids);
    char buf[8];
    int k = pk_token_to_piece(t, 3 + 0x41, buf, sizeof buf, 0);   /* <0x41> */
    TEST_CHECK(k == 1 && buf[0] == 'A', "byte token <0x41> decodes to 'A'");
    /* stray UTF-8 lead bytes before spaces: each takes a byte of the U+2581
       that escapes the space, the rest become symbols of their own, so there
       are more symbols than bytes (the symbol array overflowed; found by
       fuzz/fuzz_tokenizer.c, ASan) */
    char stray[1022];   /* 1.5 symbols per byte: past the 1024 the old sizing allotted */
    for (int i = 0; i < (int)sizeof stray; i += 2) { stray[i] = (char)0xC3; stray[i + 1] = ' '; }
    ids = tokenize(t, stray, sizeof stray, 0, 0, &n);
    TEST_CHECK(ids && n > 0, "llama SPM: 511 x \\xC3 + space tokenizes (n=%d)", n);
    free(ids);
    pk_tokenizer_free(t);
}

static void test_bert_special(const char *dir) {
    pk_tokenizer *t = load_vocab(vocab_file(dir, "bert-bge"));
    if (!t) return;
    int n;
    int32_t *ids = tokenize(t, "Hello", 5, 1, 0, &n);
    TEST_CHECK(n >= 3 && ids[0] == 101 && ids[n - 1] == 102, "WordPiece add_special: [CLS] .. [SEP]");
    free(ids);
    ids = tokenize(t, "[CLS]", 5, 0, 1, &n);
    TEST_CHECK(n == 1 && ids[0] == 101, "parse_special finds [CLS]");
    free(ids);
    char buf[16];
    int k = pk_token_to_piece(t, 2000, buf, sizeof buf, 0);   /* "\u2581to" */
    TEST_CHECK(k == 3 && memcmp(buf, " to", 3) == 0, "U+2581 decodes to a space");
    pk_tokenizer_free(t);
}

typedef struct job { const pk_tokenizer *t; vecs *v; int32_t **expect; int *nexp; int bad; } job;

static void *worker(void *arg) {
    job *j = arg;
    for (int rep = 0; rep < 5; rep++)
        for (size_t i = 0; i < j->v->n; i++) {
            int n;
            int32_t *ids = tokenize(j->t, j->v->str[i], j->v->len[i], 0, 0, &n);
            if (n != j->nexp[i] || (n > 0 && memcmp(ids, j->expect[i], (size_t)n * sizeof *ids)))
                j->bad++;
            free(ids);
        }
    return NULL;
}

/* One tokenizer (the vocabulary PATH) used by 4 threads at once on the test
 * strings of STRINGS (a vocabulary with .inp/.out vectors) gives each string
 * the ids of a single thread. */
static void test_threads(const char *path, const char *strings) {
    vecs v;
    TEST_CHECK(read_vectors(strings, ".out", &v), "cannot read the vectors of %s", strings);
    if (!v.n) return;
    pk_tokenizer *t = load_vocab(path);
    if (!t) { free_vectors(&v); return; }
    int32_t **expect = calloc(v.n, sizeof *expect);
    int *nexp = calloc(v.n, sizeof *nexp);
    for (size_t i = 0; i < v.n; i++) expect[i] = tokenize(t, v.str[i], v.len[i], 0, 0, &nexp[i]);
    enum { NT = 4 };
    pthread_t th[NT];
    job jobs[NT];
    for (int i = 0; i < NT; i++) {
        jobs[i] = (job){ .t = t, .v = &v, .expect = expect, .nexp = nexp };
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    int bad = 0;
    for (int i = 0; i < NT; i++) { pthread_join(th[i], NULL); bad += jobs[i].bad; }
    TEST_CHECK(bad == 0, "concurrent tokenization differs in %d cases", bad);
    for (size_t i = 0; i < v.n; i++) free(expect[i]);
    free(expect); free(nexp);
    pk_tokenizer_free(t);
    free_vectors(&v);
}

static void test_kjv(void) {
    pk_tokenizer *t = load_vocab(KJV_MODEL);
    if (!t) return;
    int n;
    int32_t *ids = tokenize(t, "And God said", 12, 1, 0, &n);
    TEST_CHECK(n == 3 && ids[0] == 295 && ids[1] == 394 && ids[2] == 379,
               "kjv: 'And God said' -> [295 394 379], got %d tokens [%d %d %d]", n,
               n > 0 ? ids[0] : -1, n > 1 ? ids[1] : -1, n > 2 ? ids[2] : -1);
    free(ids);
    TEST_CHECK(pk_tokenizer_n_vocab(t) == 4096, "kjv vocab has 4096 tokens");
    char buf[16];
    TEST_CHECK(pk_token_to_piece(t, -1, buf, sizeof buf, 0) == -PK_ERR_ARG, "id -1 is out of range");
    TEST_CHECK(pk_token_to_piece(t, 4096, buf, sizeof buf, 0) == -PK_ERR_ARG, "id 4096 is out of range");
    TEST_CHECK(pk_tokenizer_text(t, 4096) == NULL, "text of id 4096 is NULL");
    int k = pk_token_to_piece(t, 394, buf, sizeof buf, 0);
    TEST_CHECK(k == 4 && memcmp(buf, " God", 4) == 0, "token 394 is ' God'");
    TEST_CHECK(pk_token_to_piece(t, 394, buf, 2, 0) == 4, "short buffer: full length returned");
    pk_tokenizer_free(t);
}

/* ===================================================================== */
/* Error paths on GGUF images built in memory                             */
/* ===================================================================== */

typedef struct wbuf { uint8_t *p; size_t n, cap; } wbuf;

static void w_bytes(wbuf *b, const void *src, size_t n) {
    while (b->n + n > b->cap) b->p = realloc(b->p, b->cap = b->cap ? b->cap * 2 : 256);
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void w_u32(wbuf *b, uint32_t v) { w_bytes(b, &v, 4); }
static void w_u64(wbuf *b, uint64_t v) { w_bytes(b, &v, 8); }
static void w_str(wbuf *b, const char *s) { w_u64(b, strlen(s)); w_bytes(b, s, strlen(s)); }
static void kv_str(wbuf *b, const char *k, const char *v) { w_str(b, k); w_u32(b, GGUF_STRING); w_str(b, v); }
static void kv_strs(wbuf *b, const char *k, const char *const *v, int n) {
    w_str(b, k); w_u32(b, GGUF_ARRAY); w_u32(b, GGUF_STRING); w_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) w_str(b, v[i]);
}
static void kv_u32(wbuf *b, const char *k, uint32_t v) { w_str(b, k); w_u32(b, GGUF_UINT32); w_u32(b, v); }
static void kv_i32s(wbuf *b, const char *k, const int32_t *v, int n) {
    w_str(b, k); w_u32(b, GGUF_ARRAY); w_u32(b, GGUF_INT32); w_u64(b, (uint64_t)n);
    w_bytes(b, v, (size_t)n * 4);
}

/* A GGUF image: header with n_kv entries followed by body. */
static int load_image(const wbuf *body, int n_kv, pk_tokenizer **t, pk_error *err) {
    wbuf b = { 0 };
    w_u32(&b, 0x46554747u);  /* "GGUF" */
    w_u32(&b, 3);
    w_u64(&b, 0);
    w_u64(&b, (uint64_t)n_kv);
    w_bytes(&b, body->p, body->n);
    gguf_file *f = NULL;
    *t = NULL;
    int rc = gguf_parse(b.p, b.n, "mem.gguf", &f, err);
    if (rc == PK_OK) {
        rc = pk_tokenizer_load(f, t, err);
        gguf_close(f);
    }
    free(b.p);
    return rc;
}

static void test_errors(void) {
    static const char *const toks[] = { "a", "b", "c", "ab", "abc", "\xc4\xa0" };
    static const char *const merges[] = { "a b", "ab c" };
    pk_error err = { 0 };
    pk_tokenizer *t;
    wbuf b = { 0 };

    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    int rc = load_image(&b, 1, &t, &err);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "tokenizer.ggml.tokens"),
               "missing tokens: rc %d msg '%s'", rc, err.msg);
    TEST_CHECK(strchr(err.msg, '\n') == NULL && strstr(err.msg, "mem.gguf"), "message names the file");
    free(b.p); b = (wbuf){ 0 };

    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.tokens", "not an array");
    rc = load_image(&b, 2, &t, &err);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "tokenizer.ggml.tokens"),
               "tokens of the wrong type: rc %d msg '%s'", rc, err.msg);
    free(b.p); b = (wbuf){ 0 };

    kv_str(&b, "tokenizer.ggml.model", "klingon");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 6);
    rc = load_image(&b, 2, &t, &err);
    TEST_CHECK(rc == PK_ERR_UNSUPPORTED && strstr(err.msg, "klingon"), "unknown model: '%s'", err.msg);
    free(b.p); b = (wbuf){ 0 };

    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 6);
    rc = load_image(&b, 2, &t, &err);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "tokenizer.ggml.merges"), "missing merges: '%s'", err.msg);
    free(b.p); b = (wbuf){ 0 };

    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "no-such-pre");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 6);
    kv_strs(&b, "tokenizer.ggml.merges", merges, 2);
    rc = load_image(&b, 4, &t, &err);
    TEST_CHECK(rc == PK_ERR_UNSUPPORTED && strstr(err.msg, "no-such-pre"), "unknown pre: '%s'", err.msg);
    free(b.p); b = (wbuf){ 0 };

    /* a working toy vocabulary: merges by rank, byte-level space */
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "gpt-2");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 6);
    kv_strs(&b, "tokenizer.ggml.merges", merges, 2);
    kv_u32(&b, "tokenizer.ggml.eos_token_id", 99);   /* out of range: ignored */
    rc = load_image(&b, 5, &t, &err);
    TEST_CHECK(rc == PK_OK, "toy vocab loads: %s", err.msg);
    if (t) {
        int n;
        int32_t *ids = tokenize(t, "abc ab c", 8, 0, 0, &n);
        /* "abc" | " ab" (no token for "Ġab": Ġ a b -> Ġ ab) | " c" (Ġ c) */
        static const int32_t want[] = { 4, 5, 3, 5, 2 };
        TEST_CHECK(n == 5 && memcmp(ids, want, sizeof want) == 0, "toy BPE merges (n=%d)", n);
        free(ids);
        TEST_CHECK(pk_tokenizer_eos(t) != 99, "out-of-range eos id ignored");
        TEST_CHECK(pk_tokenize(t, NULL, 3, NULL, 0, 0, 0) == -PK_ERR_ARG, "NULL text is an error");
        pk_tokenizer_free(t);
    }
    free(b.p);
}

/* A gemma4 vocabulary without a BOS id is refused (BOS is always added). */
static void test_gemma4_no_bos(void) {
    static const char *const toks[] = { "<pad>", "a", "b", "\xe2\x96\x81" };
    pk_error err = { 0 };
    pk_tokenizer *t = NULL;
    wbuf b = { 0 };
    kv_str(&b, "tokenizer.ggml.model", "gemma4");
    kv_strs(&b, "tokenizer.ggml.tokens", toks, 4);
    kv_strs(&b, "tokenizer.ggml.merges", toks, 0);
    int rc = load_image(&b, 3, &t, &err);
    free(b.p);
    TEST_CHECK(rc == PK_ERR_FORMAT && strstr(err.msg, "gemma4") && strstr(err.msg, "bos_token_id"),
               "gemma4 without BOS: rc %d, %s", rc, err.msg);
    pk_tokenizer_free(t);
}

/* gpt-oss's harmony specials (as llama.cpp): with <|return|> and <|call|>
 * ending generation, <|end|> does not (an answer has several messages), and
 * <|end|>, <|start|>, <|channel|>, <|message|> are written out in text;
 * without <|call|>, <|end|> stays end-of-generation. */
static void test_harmony_specials(void) {
    static const char *const toks[] = { "a", "b", "\xc4\xa0", "<|start|>", "<|message|>", "<|channel|>",
                                        "<|end|>", "<|return|>", "<|call|>" };
    static const int32_t types[] = { 1, 1, 1, 3, 3, 3, 3, 3, 3 };
    for (int with_call = 0; with_call < 2; with_call++) {
        const int n = with_call ? 9 : 8;
        pk_error err = { 0 };
        pk_tokenizer *t;
        wbuf b = { 0 };
        kv_str(&b, "tokenizer.ggml.model", "gpt2");
        kv_str(&b, "tokenizer.ggml.pre", "gpt-4o");
        kv_strs(&b, "tokenizer.ggml.tokens", toks, n);
        kv_i32s(&b, "tokenizer.ggml.token_type", types, n);
        kv_strs(&b, "tokenizer.ggml.merges", toks, 0);
        int rc = load_image(&b, 5, &t, &err);
        TEST_CHECK(rc == PK_OK, "harmony toy vocab loads: %s", err.msg);
        free(b.p);
        if (rc) continue;
        TEST_CHECK(pk_tokenizer_is_eog(t, 7), "<|return|> ends generation (call %d)", with_call);
        if (with_call) {
            TEST_CHECK(pk_tokenizer_is_eog(t, 8), "<|call|> ends generation");
            TEST_CHECK(!pk_tokenizer_is_eog(t, 6), "<|end|> does not end a harmony answer");
            char buf[32];
            int k = pk_token_to_piece(t, 6, buf, sizeof buf, 0);
            TEST_CHECK(k == 7 && !memcmp(buf, "<|end|>", 7), "<|end|> is written out (%d)", k);
        } else {
            TEST_CHECK(pk_tokenizer_is_eog(t, 6), "without <|call|>, <|end|> still ends generation");
        }
        char buf[32];
        int k = pk_token_to_piece(t, 5, buf, sizeof buf, 0);
        TEST_CHECK(k == 11 && !memcmp(buf, "<|channel|>", 11), "<|channel|> is written out (%d)", k);
        /* and read back from text without parse_special, as a user-defined token */
        int m;
        int32_t *ids = tokenize(t, "<|channel|>a", 12, 0, 0, &m);
        TEST_CHECK(m == 2 && ids[0] == 5 && ids[1] == 0, "<|channel|> tokenized from text (n=%d)", m);
        free(ids);
        pk_tokenizer_free(t);
    }
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--vocabs")) {
        const char *dir = argv[2];
        char qwen3[512];
        snprintf(qwen3, sizeof qwen3, "%s", vocab_file(dir, "qwen3"));
        test_all_vocabs(dir);
        test_byte_roundtrip(vocab_file(dir, "gpt-2"));
        test_byte_roundtrip(qwen3);
        test_qwen3_specials(dir);
        test_spm_bos(dir);
        test_bert_special(dir);
        test_threads(qwen3, qwen3);
        return TEST_REPORT();
    }
    if (argc != 1) {
        fprintf(stderr, "usage: test_tokenizer [--vocabs DIR]\n");
        return 2;
    }
    test_gemma4_toy();
    test_gemma4_no_bos();
    test_harmony_specials();
    test_byte_roundtrip(KJV_MODEL);
    test_threads(KJV_MODEL, GEMMA4_TOY);
    test_kjv();
    test_errors();
    return TEST_REPORT();
}
