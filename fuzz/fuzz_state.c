/* fuzz_state.c - libFuzzer harness: saved sequence states (untrusted bytes)
 * -> pk_state_tokens, pk_state_load / pk_state_load_file into a context.
 *
 * Two tiny models of the gguf corpus: qwen3moe (attention) and qwen35moe
 * (a Gated DeltaNet layer), each with a context of 32 positions and 2
 * checkpoints that holds 8 tokens (a checkpoint at 5). Byte 0 of the input
 * picks the model (bit 0) and memory or a file (bit 1, the bytes in a
 * memfd); the rest is the state. Any crash or sanitizer report is a
 * finding, and so is (abort) an error whose message is not one line, a
 * refused load that changed the context (its tokens, checkpoints), or a
 * load that succeeded but saves as other bytes or leaves a sequence that
 * cannot decode one more token.
 * Seeds: fuzz/corpus/state, states of both models (8 tokens, 1 checkpoint;
 * 20 tokens, 2; empty), written by
 *     POCKET_FUZZ_STATE_SEEDS=fuzz/corpus/state build/fuzz/fuzz_state
 * (run from the project root; again when the state format changes).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pocket.h"

static const char *const model_paths[2] = {"fuzz/corpus/gguf/qwen3moe.gguf", "fuzz/corpus/gguf/qwen35moe.gguf"};
static struct {
    pk_model *m;
    pk_context *c;
    unsigned char *base;      /* the context's state between inputs */
    size_t base_n;
    int32_t toks[8];
    int ck[4], n_ck;
} mod[2];
static int fd = -1;
static char path[64];

static void one_line(const pk_error *e) {
    if (!e->msg[0] || strchr(e->msg, '\n')) { fprintf(stderr, "not a one-line error: '%s'\n", e->msg); abort(); }
}

static unsigned char *save(pk_context *c, size_t *n) {
    pk_error err = {0};
    *n = pk_state_size(c);
    unsigned char *b = malloc(*n);
    if (!b || pk_state_save(c, b, *n, &err)) { fprintf(stderr, "fuzz_state: save: %s\n", err.msg); abort(); }
    return b;
}

static void write_seed(const char *dir, const char *name, int k, const unsigned char *b, size_t n) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    unsigned char head = (unsigned char)k;
    if (!f || fwrite(&head, 1, 1, f) != 1 || fwrite(b, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "fuzz_state: cannot write %s\n", p);
        exit(1);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    pk_error err = {0};
    const char *seeds = getenv("POCKET_FUZZ_STATE_SEEDS");
    for (int k = 0; k < 2; k++) {
        if (pk_model_load(model_paths[k], &mod[k].m, &err)) {
            fprintf(stderr, "fuzz_state: %s (run from the project root)\n", err.msg);
            exit(1);
        }
        pk_context_params cp = pk_context_default_params();
        cp.n_ctx = 32;
        cp.n_threads = 1;
        cp.n_checkpoints = 2;
        if (pk_context_new(mod[k].m, &cp, &mod[k].c, &err)) { fprintf(stderr, "fuzz_state: %s\n", err.msg); exit(1); }
        pk_context *c = mod[k].c;
        size_t n;
        unsigned char *b;
        if (seeds) {
            b = save(c, &n);
            write_seed(seeds, k ? "qwen35moe-empty" : "qwen3moe-empty", k, b, n);
            free(b);
        }
        for (int i = 0; i < 8; i++) mod[k].toks[i] = (int32_t)(i * 37 + 11) % 100;
        if (pk_decode(c, mod[k].toks, 5, &err)) { fprintf(stderr, "fuzz_state: %s\n", err.msg); exit(1); }
        pk_context_checkpoint(c);
        if (pk_decode(c, mod[k].toks + 5, 3, &err)) { fprintf(stderr, "fuzz_state: %s\n", err.msg); exit(1); }
        mod[k].n_ck = pk_context_checkpoints(c, mod[k].ck, 4);
        mod[k].base = save(c, &mod[k].base_n);
        if (seeds) {
            write_seed(seeds, k ? "qwen35moe-8" : "qwen3moe-8", k, mod[k].base, mod[k].base_n);
            write_seed(seeds, k ? "qwen35moe-8-file" : "qwen3moe-8-file", k | 2, mod[k].base, mod[k].base_n);
            int32_t more[12];
            for (int i = 0; i < 12; i++) more[i] = (int32_t)(i * 53 + 7) % 100;
            if (pk_decode(c, more, 12, &err)) { fprintf(stderr, "fuzz_state: %s\n", err.msg); exit(1); }
            pk_context_checkpoint(c);
            b = save(c, &n);
            write_seed(seeds, k ? "qwen35moe-20" : "qwen3moe-20", k, b, n);
            free(b);
            if (pk_state_load(c, mod[k].base, mod[k].base_n, &err)) { fprintf(stderr, "fuzz_state: %s\n", err.msg); exit(1); }
        }
    }
    if (seeds) { printf("fuzz_state: seeds written to %s\n", seeds); exit(0); }
    return 0;
}

/* the context k holds its 8 tokens and checkpoints */
static void check_base(int k, const char *after) {
    pk_context *c = mod[k].c;
    int ck[4];
    int n_ck = pk_context_checkpoints(c, ck, 4);
    if (pk_context_pos(c) != 8 || memcmp(pk_context_tokens(c), mod[k].toks, sizeof mod[k].toks) ||
        n_ck != mod[k].n_ck || memcmp(ck, mod[k].ck, sizeof(int) * (size_t)(n_ck < 4 ? n_ck : 4))) {
        fprintf(stderr, "fuzz_state: %s changed the context (%d tokens, %d checkpoints)\n", after, pk_context_pos(c), n_ck);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (fd < 0) {
        fd = memfd_create("fuzz.state", MFD_CLOEXEC);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    const int k = data[0] & 1, file = (data[0] >> 1) & 1;
    const uint8_t *b = data + 1;
    const size_t n = size - 1;
    pk_model *m = mod[k].m;
    pk_context *c = mod[k].c;
    pk_error err = {0};
    int32_t *toks = NULL;
    int nt = -1, rc;
    if (file) {
        if (ftruncate(fd, 0) || pwrite(fd, b, n, 0) != (ssize_t)n) abort();
        rc = pk_state_file_tokens(m, path, &toks, &nt, &err);
    } else {
        rc = pk_state_tokens(m, b, n, &toks, &nt, &err);
    }
    if (rc == PK_OK) {
        if (nt < 0) { fprintf(stderr, "fuzz_state: pk_state_tokens gave %d tokens\n", nt); abort(); }
        for (int i = 0; i < nt; i++) (void)(toks[i] + 1); /* read them all (ASan) */
        free(toks);
    } else {
        one_line(&err);
    }
    rc = file ? pk_state_load_file(c, path, &err) : pk_state_load(c, b, n, &err);
    if (rc != PK_OK) {
        one_line(&err);
        check_base(k, "a refused load");
        return 0;
    }
    int pos = pk_context_pos(c);
    if (pos < 0 || pos > pk_context_n_ctx(c)) { fprintf(stderr, "fuzz_state: loaded %d tokens\n", pos); abort(); }
    for (int i = 0; i < pos; i++) (void)(pk_context_tokens(c)[i] + 1);
    size_t n2;
    unsigned char *again = save(c, &n2);
    if (n2 != n || memcmp(again, b, n)) { fprintf(stderr, "fuzz_state: a loaded state saves otherwise\n"); abort(); }
    free(again);
    int32_t one = 3;
    if (pos < pk_context_n_ctx(c) && pk_decode(c, &one, 1, &err)) {
        fprintf(stderr, "fuzz_state: decode after a load: %s\n", err.msg);
        abort();
    }
    if (pk_state_load(c, mod[k].base, mod[k].base_n, &err)) { fprintf(stderr, "fuzz_state: %s\n", err.msg); abort(); }
    check_base(k, "loading the base state");
    return 0;
}
