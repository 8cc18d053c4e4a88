/* fuzz_tokenizer.c - libFuzzer harness: text -> tokens -> text, on every
 * vocabulary of the directory $POCKET_FUZZ_VOCABS (unset: ../shared/tokenizer/,
 * llama.cpp's test vocabularies; set but empty: none), the bundled model
 * (models/kjv-moe-f16.gguf) and the toy gemma4 vocabulary (tests/data/vocab/),
 * found relative to the project root as the tests do (run from there). A
 * directory named in $POCKET_FUZZ_VOCABS that cannot be opened or holds no
 * .gguf file is an error (exit 1). tests/cli/t_fuzz_regress.sh replays with
 * it empty, so that an input picks the same vocabulary wherever it runs;
 * `make test-shared` with ../shared/tokenizer (tests/ref/shared/t_fuzz_vocabs.sh).
 *
 * The first byte picks the vocabulary and the flags (add_special,
 * parse_special); the rest is the text. Tokenize, then turn every id back
 * into its piece. For byte-level BPE vocabularies (tokenizer.ggml.model
 * "gpt2") without special-token handling, the pieces must give back exactly
 * the input bytes whenever the vocabulary has a token for each of them; for
 * gemma4 (BPE over SentencePiece text, byte fallback) they must give back
 * valid UTF-8 input, with U+2581 as a space. A failed round trip aborts (a
 * finding, like a crash).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

#define MAX_VOCABS 32

static struct vocab {
    pk_tokenizer *t;
    int byte_level;
    int gemma4;                    /* tokenizer.ggml.model "gemma4" */
    unsigned char has_byte[256];   /* the vocabulary has a token for this byte (byte level) */
    char name[128];
} vocabs[MAX_VOCABS];
static int n_vocabs;

static void add_vocab(const char *path) {
    if (n_vocabs >= MAX_VOCABS) return;
    gguf_file *f = NULL;
    pk_error err = {0};
    if (gguf_open(path, &f, &err)) { fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg); return; }
    char *model = NULL;
    struct vocab *v = &vocabs[n_vocabs];
    if (!pk_tokenizer_load(f, &v->t, &err)) {
        gguf_get_string(f, "tokenizer.ggml.model", 0, &model, &err);
        v->byte_level = model && !strcmp(model, "gpt2");
        v->gemma4 = model && !strcmp(model, "gemma4");
        snprintf(v->name, sizeof v->name, "%s", path);
        /* Some byte-level vocabularies lack a few bytes (refact: 0xF5..0xFF
           and others): those become the tokens of U+FFFD, as in llama.cpp,
           so the round trip is owed only for text of bytes they have. */
        for (int b = 0; v->byte_level && b < 256; b++) {
            char c = (char)b, piece[16];
            int32_t id[4];
            int n = pk_tokenize(v->t, &c, 1, id, 4, 0, 0);
            v->has_byte[b] = n == 1 && pk_token_to_piece(v->t, id[0], piece, sizeof piece, 0) == 1 && piece[0] == c;
        }
        n_vocabs++;
    } else {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg);
    }
    free(model);
    gguf_close(f);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *env = getenv("POCKET_FUZZ_VOCABS");
    const char *dir = env ? env : "../shared/tokenizer";
    DIR *d = *dir ? opendir(dir) : NULL;
    if (env && *env && !d) {
        fprintf(stderr, "fuzz_tokenizer: cannot open POCKET_FUZZ_VOCABS=%s\n", env);
        exit(1);
    }
    struct dirent *e;
    char names[MAX_VOCABS][800];   /* the directory (< 512) + a file name (< 256) */
    int n = 0;
    while (d && (e = readdir(d)) && n < MAX_VOCABS - 1) {
        size_t l = strlen(e->d_name);
        if (l > 5 && l < 256 && !strcmp(e->d_name + l - 5, ".gguf"))
            snprintf(names[n++], sizeof names[0], "%.511s/%.255s", dir, e->d_name);
    }
    if (d) closedir(d);
    if (env && *env && n == 0) {
        fprintf(stderr, "fuzz_tokenizer: no .gguf vocabulary in POCKET_FUZZ_VOCABS=%s\n", env);
        exit(1);
    }
    qsort(names, (size_t)n, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    for (int i = 0; i < n; i++) add_vocab(names[i]);
    add_vocab("models/kjv-moe-f16.gguf");
    add_vocab("tests/data/vocab/ggml-vocab-gemma4-toy.gguf");
    if (n_vocabs < 2) {
        fprintf(stderr, "fuzz_tokenizer: found %d vocabularies; run from the project root\n", n_vocabs);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const struct vocab *v = &vocabs[data[0] % n_vocabs];
    const int add_special = data[0] / 32 & 1, parse_special = data[0] / 64 & 1;
    const char *text = (const char *)data + 1;
    const size_t len = size - 1;
    int32_t small[64];
    int n = pk_tokenize(v->t, text, len, small, 64, add_special, parse_special);
    if (n < 0) return 0;   /* an error is allowed; a crash is not */
    int32_t *ids = small;
    if (n > 64) {
        ids = malloc((size_t)n * sizeof *ids);
        if (!ids) return 0;
        int n2 = pk_tokenize(v->t, text, len, ids, n, add_special, parse_special);
        if (n2 != n) { fprintf(stderr, "%s: token count %d then %d\n", v->name, n, n2); abort(); }
    }
    size_t cap = len * 4 + 64, k = 0;
    char *out = malloc(cap);
    if (!out) abort();
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= pk_tokenizer_n_vocab(v->t)) { fprintf(stderr, "%s: id %d out of range\n", v->name, ids[i]); abort(); }
        char piece[512];
        int pl = pk_token_to_piece(v->t, ids[i], piece, sizeof piece, 0);
        if (pl < 0) { fprintf(stderr, "%s: no piece for id %d\n", v->name, ids[i]); abort(); }
        if (pl > (int)sizeof piece) continue;   /* not a round-trip case (long special) */
        if (k + (size_t)pl > cap) { cap = (k + (size_t)pl) * 2; out = realloc(out, cap); if (!out) abort(); }
        memcpy(out + k, piece, (size_t)pl);
        k += (size_t)pl;
    }
    int owed = v->byte_level && !add_special && !parse_special;
    for (size_t i = 0; owed && i < len; i++) owed = v->has_byte[(unsigned char)text[i]];
    if (owed && (k != len || memcmp(out, text, len))) {
        fprintf(stderr, "%s: round trip of %zu bytes gave %zu bytes\n", v->name, len, k);
        abort();
    }
    if (v->gemma4 && !add_special && !parse_special) {   /* valid UTF-8 comes back */
        char *want = malloc(len + 1);
        size_t wl = 0;
        if (!want) abort();
        for (size_t i = 0; want && i < len;) {
            uint32_t cp;
            int cl = pk_utf8_decode((const uint8_t *)text + i, len - i, &cp);
            if (cp == 0xFFFD && !(cl == 3 && !memcmp(text + i, "\xef\xbf\xbd", 3))) { free(want); want = NULL; break; }
            if (cp == 0x2581) want[wl++] = ' ';
            else { memcpy(want + wl, text + i, (size_t)cl); wl += (size_t)cl; }
            i += (size_t)cl;
        }
        if (want && (k != wl || memcmp(out, want, wl))) {
            fprintf(stderr, "%s: round trip of %zu bytes gave %zu bytes, want %zu\n", v->name, len, k, wl);
            abort();
        }
        free(want);
    }
    free(out);
    if (ids != small) free(ids);
    return 0;
}
