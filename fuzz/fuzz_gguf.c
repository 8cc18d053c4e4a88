/* fuzz_gguf.c - libFuzzer harness: GGUF bytes -> model load -> info ->
 * tokenize -> (small models) a context and a 2-token decode -> free.
 *
 * The bytes go to a memfd and are loaded by path (/proc/self/fd/N), so the
 * real gguf_open path runs: mmap, parse, bind, tokenizer, and the parser
 * alone (gguf_parse) on the same bytes. Any crash or sanitizer report is a
 * finding; an error return is fine (the message must be one line).
 * Seeds: fuzz/corpus/gguf (tiny models from tests/lib/gen_model.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "pocket.h"

static int fd = -1;
static char path[64];

static void one_line(const pk_error *e) {
    if (strchr(e->msg, '\n')) { fprintf(stderr, "multi-line error: %s\n", e->msg); abort(); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (fd < 0) {
        fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    pk_error err = {0};
    gguf_file *g = NULL;
    if (gguf_parse(data, size, "fuzz.gguf", &g, &err) == PK_OK) gguf_close(g);
    else one_line(&err);

    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) abort();
    pk_model *m = NULL;
    if (pk_model_load(path, &m, &err) != PK_OK) { one_line(&err); return 0; }
    pk_model_info info;
    pk_model_get_info(m, &info);
    for (int i = 0; i < pk_model_n_tensors(m); i++) {
        const char *name, *type;
        int64_t ne[4];
        uint64_t nb;
        pk_model_tensor(m, i, &name, &type, ne, &nb);
    }
    int32_t ids[64];
    const char text[] = "And God said, <|im_start|> let there be light\n\xe2\x80\x94 \xff\xfe";
    int n = pk_model_tokenize(m, text, sizeof text - 1, ids, 64, 1, 1);
    char piece[256];
    for (int i = 0; i < n && i < 64; i++) pk_model_token_piece(m, ids[i], piece, sizeof piece);
    pk_chat_template_name(m);
    /* a forward pass only for small models: keeps executions fast */
    if (n >= 1 && info.file_bytes < (1u << 20) && info.n_layer <= 4 && (int64_t)info.n_embd * info.n_vocab < (1 << 18)) {
        pk_context_params cp = pk_context_default_params();
        cp.n_ctx = 8;
        cp.n_threads = 1;
        pk_context *c = NULL;
        if (pk_context_new(m, &cp, &c, &err) == PK_OK) {
            int32_t two[2] = {ids[0], n > 1 ? ids[1] : ids[0]};
            if (pk_decode(c, two, 2, &err) == PK_OK) (void)pk_context_logits(c)[0];
            else one_line(&err);
            pk_context_free(c);
        } else {
            one_line(&err);
        }
    }
    pk_model_free(m);
    return 0;
}
