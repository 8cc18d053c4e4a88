/* test_bound.c - the model's list of bound tensors (model/model.h,
 * pk_model.bound), which the parameter count, the byte ledger and the memory
 * plan walk, checked against the GGUF file itself: every tensor of the file
 * is in the list once (a merged ffn_gate_up_exps twice in a row: it fills
 * gate_exps and up_exps), each entry's block is the one its name says, its
 * role matches its name (ffn_*_exps.weight: routed experts, ffn_*_exps.bias:
 * expert biases, nothing else), the parameter count is the file's element
 * count, and the plan's expert bytes are the expert entries' bytes. Run
 * from the project root: the bundled model, then every model named on the
 * command line (tests/lib/run.sh passes none; the fixtures are checked when
 * ../shared is there). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model/model.h"
#include "quant/quant.h"
#include "testhelp.h"

static const char *const FIXTURES[] = {
    "../shared/fixtures/qwen35moe/tiny-qwen35moe.gguf", "../shared/fixtures/gemma4/tiny-gemma4.gguf",
    "../shared/fixtures/gpt-oss/tiny-gpt-oss.gguf",     "../shared/fixtures/qwen3next/tiny-qwen3next.gguf",
    "../shared/fixtures/deepseek2/tiny-deepseek2.gguf",
};

static int ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

/* the block of a tensor name: N of "blk.N.", -1 for the model's own */
static int name_block(const char *name) { return strncmp(name, "blk.", 4) == 0 ? atoi(name + 4) : -1; }

static void check_model(const char *path) {
    pk_model *m = NULL;
    pk_error err;
    if (pk_model_load(path, &m, &err) != PK_OK) {
        TEST_CHECK(0, "%s: load: %s", path, err.msg);
        return;
    }
    const gguf_file *g = m->gguf;
    int missing = 0, twice = 0, bad_block = 0, bad_role = 0, merged = 0;
    int64_t elements = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *gt = &g->tensors[i];
        elements += gt->nelements;
        int n = 0, first = -1;
        for (int j = 0; j < m->n_bound; j++)
            if (m->bound[j].t->data == gt->data) {
                n++;
                if (first < 0) first = j;
            }
        const int gate_up = ends_with(gt->name, "ffn_gate_up_exps.weight");
        missing += n == 0;
        twice += gate_up ? n != 2 || m->bound[first + 1].t->data != gt->data : n > 1;
        merged += gate_up;
        if (n == 0) {
            fprintf(stderr, "  %s: tensor %s not bound\n", path, gt->name);
            continue;
        }
        const pk_bound *b = &m->bound[first];
        bad_block += b->layer != name_block(gt->name) || strcmp(b->t->name, gt->name) != 0;
        const pk_tensor_role want = ends_with(gt->name, "_exps.weight") ? PK_ROLE_EXPERTS
                                    : ends_with(gt->name, "_exps.bias") ? PK_ROLE_EXPERT_BIAS
                                                                         : b->role;
        const int other = b->role == PK_ROLE_EXPERTS || b->role == PK_ROLE_EXPERT_BIAS;
        bad_role += b->role != want || (want != PK_ROLE_EXPERTS && want != PK_ROLE_EXPERT_BIAS && other);
        if (b->role == PK_ROLE_F32) bad_role += gt->type != PK_TYPE_F32;
    }
    TEST_CHECK(missing == 0, "%s: %d file tensors not in the list", path, missing);
    TEST_CHECK(twice == 0, "%s: %d tensors listed more than once (merged gate_up: twice in a row)", path, twice);
    TEST_CHECK(bad_block == 0, "%s: %d entries of the wrong block or name", path, bad_block);
    TEST_CHECK(bad_role == 0, "%s: %d entries with a role their name contradicts", path, bad_role);
    TEST_CHECK(m->n_bound == (int)g->n_tensors + merged, "%s: %d entries for %d tensors (%d merged)", path,
               m->n_bound, (int)g->n_tensors, merged);
    TEST_CHECK(m->n_params == elements, "%s: n_params %lld, the file holds %lld elements", path,
               (long long)m->n_params, (long long)elements);
    /* the plan's routed-expert bytes: those of the expert entries (each
       entry: the cache holds a merged gate_up in two regions) */
    uint64_t exp_bytes = 0;
    for (int j = 0; j < m->n_bound; j++)
        if (m->bound[j].role == PK_ROLE_EXPERTS && m->bound[j].layer < m->hp.n_layer)
            exp_bytes += m->bound[j].t->row_bytes * (uint64_t)(m->bound[j].t->ne[1] * m->bound[j].t->ne[2]);
    pk_model_plan pl;
    pk_model_get_plan(m, &pl);
    TEST_CHECK(pl.expert_bytes == exp_bytes, "%s: plan expert bytes %llu, entries %llu", path,
               (unsigned long long)pl.expert_bytes, (unsigned long long)exp_bytes);
    fprintf(stderr, "%s: %d bound tensors (%d merged gate_up), %.2f M params\n", path, m->n_bound, merged,
            m->n_params / 1e6);
    pk_model_free(m);
}

int main(int argc, char **argv) {
    check_model("models/kjv-moe-f16.gguf");
    for (size_t i = 0; i < sizeof FIXTURES / sizeof *FIXTURES; i++) {
        FILE *f = fopen(FIXTURES[i], "rb");
        if (!f) {
            fprintf(stderr, "%s: not there, not checked\n", FIXTURES[i]);
            continue;
        }
        fclose(f);
        check_model(FIXTURES[i]);
    }
    for (int i = 1; i < argc; i++) check_model(argv[i]);
    return TEST_REPORT();
}
