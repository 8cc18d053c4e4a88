/* fuzz_prune.c - libFuzzer harness: a keep spec and a GGUF file -> expert
 * pruning -> the pruned file loaded again.
 *
 * Input: the spec (pk_prune_parse_keep's text; a leading 'f' ranks by
 * frequency instead of REAP) up to the first newline, then GGUF bytes. The spec is parsed for an 8-layer model; the file goes
 * to a memfd and is loaded by path. A small MoE model is decoded for two
 * tokens with a saliency attached, and pruned to the spec's count per layer
 * (brought into top-k..experts; layers it does not name keep all) into a
 * temporary file, which must load, with those expert counts. Errors must be
 * one line; a model that loads must prune (or be refused as
 * PK_ERR_UNSUPPORTED) and its pruned file must load.
 * Seeds: fuzz/corpus/prune (a spec line + a tiny qwen3moe / mixtral from
 * tests/lib/gen_model.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "pocket.h"

static int fd = -1;
static char path[64], out[96];

static void one_line(const pk_error *e) {
    if (strchr(e->msg, '\n')) { fprintf(stderr, "multi-line error: %s\n", e->msg); abort(); }
}

/* Decode two tokens with s attached (small models only: keeps runs fast). */
static void calibrate(pk_model *m, pk_saliency *s, const pk_model_info *mi) {
    if (mi->file_bytes >= (1u << 20) || mi->n_layer > 4 || (int64_t)mi->n_embd * mi->n_vocab >= (1 << 18)) return;
    pk_context_params cp = pk_context_default_params();
    cp.n_ctx = 8;
    cp.n_threads = 1;
    pk_context *c = NULL;
    pk_error err = {0};
    if (pk_context_new(m, &cp, &c, &err)) { one_line(&err); return; }
    int32_t two[2] = {1 % mi->n_vocab, 7 % mi->n_vocab};
    if (pk_saliency_attach(s, c, &err) || pk_decode(c, two, 2, &err)) one_line(&err);
    pk_saliency_detach(c);
    pk_context_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fd < 0) {
        fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        snprintf(out, sizeof out, "/tmp/fuzz_prune.%d.gguf", (int)getpid());
    }
    const uint8_t *nl = memchr(data, '\n', size < 256 ? size : 256);
    const size_t sl = nl ? (size_t)(nl - data) : 0;
    char spec[257];
    memcpy(spec, data, sl);
    spec[sl] = 0;
    data += nl ? sl + 1 : 0;
    size -= nl ? sl + 1 : 0;
    int named[8];
    for (int i = 0; i < 8; i++) named[i] = -1;
    pk_error err = {0};
    const int kind = spec[0] == 'f' ? PK_SALIENCY_FREQ : PK_SALIENCY_REAP;   /* "f0:3": frequency */
    if (pk_prune_parse_keep(spec + (kind == PK_SALIENCY_FREQ), 8, named, &err)) one_line(&err);

    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    pk_model *m = NULL;
    if (pk_model_load(path, &m, &err) != PK_OK) { one_line(&err); return 0; }
    pk_model_info mi;
    pk_model_get_info(m, &mi);
    pk_saliency *s = NULL;
    if (pk_saliency_new(m, &s, &err)) {
        one_line(&err);
        pk_model_free(m);
        return 0;
    }
    calibrate(m, s, &mi);
    int *keep = calloc((size_t)mi.n_layer, sizeof *keep);
    uint8_t *mask = calloc((size_t)mi.n_layer * (size_t)mi.n_expert + 1, 1);
    if (!keep || !mask) abort();
    for (int il = 0; il < mi.n_layer; il++) {
        const int E = pk_saliency_n_expert(s, il), k = il < 8 ? named[il] : -1;
        keep[il] = k < 0 || k > E ? E : k < mi.n_expert_used ? mi.n_expert_used : k;
    }
    if (pk_saliency_select(s, kind, keep, mask, &err)) { one_line(&err); abort(); }
    pk_prune_params p = {.keep = mask, .n_expert_used = 0, .saliency = "fuzz", .calibration = NULL};
    const int rc = pk_prune_file(m, out, &p, &err);
    if (rc) {
        one_line(&err);
        if (rc != PK_ERR_UNSUPPORTED) { fprintf(stderr, "prune failed: %s\n", err.msg); abort(); }
    } else {
        pk_model *q = NULL;
        if (pk_model_load(out, &q, &err)) { fprintf(stderr, "the pruned file does not load: %s\n", err.msg); abort(); }
        pk_saliency *sq = NULL;
        if (pk_saliency_new(q, &sq, &err)) { fprintf(stderr, "pruned, no experts: %s\n", err.msg); abort(); }
        for (int il = 0; il < mi.n_layer; il++)
            if (pk_saliency_n_expert(sq, il) != keep[il]) {
                fprintf(stderr, "layer %d: %d experts, %d kept\n", il, pk_saliency_n_expert(sq, il), keep[il]);
                abort();
            }
        pk_saliency_free(sq);
        pk_model_free(q);
        unlink(out);
    }
    free(keep);
    free(mask);
    pk_saliency_free(s);
    pk_model_free(m);
    return 0;
}
