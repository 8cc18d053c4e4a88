/* offline/quantize.c - pk_quantize_file: requantize a GGUF model to a preset type mix
 * (see include/pocket.h for the presets and the contract).
 *
 * Steps: parse the request (preset, overrides); open the input; decide every
 * tensor's output type with llama-quantize's rules (same tensor order, same
 * per-layer counters, same fallbacks); check that each conversion has a
 * reference dequantizer for the input type and quantizer for the output type
 * (src/quant/quant.h traits) before anything is written; then stream the output:
 * header, then per tensor either the input bytes unchanged (same type) or rows
 * converted in slabs of at most SLAB_BYTES of output, rows shared between
 * threads. Every converted row is checked: non-finite input, or output that
 * dequantizes to a non-finite value (e.g. an F16 overflow), fails the run with
 * the tensor and row named, as llama-quantize's row validation does.
 *
 * Memory: the input is mapped; besides it only one slab of output plus two
 * rows of floats per thread are held.
 */
#include <ctype.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "quant/imat.h"
#include "offline/offline.h"
#include "pocket.h"

#define SLAB_BYTES (32u << 20)        /* output bytes converted per batch */
#define GRAB_ELEMS 16384              /* elements a thread claims at a time */
#define MAX_THREADS 512
#define QUANTIZATION_VERSION 2        /* ggml's GGML_QNT_VERSION */

/* llama.cpp's llama_ftype numbers (written as general.file_type). */
enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8,
    FT_Q5_1 = 9, FT_Q2_K = 10, FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13,
    FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16, FT_Q5_K_M = 17, FT_Q6_K = 18,
    FT_IQ2_XXS = 19, FT_IQ2_XS = 20, FT_IQ3_XS = 22, FT_IQ3_XXS = 23, FT_IQ1_S = 24,
    FT_IQ4_NL = 25, FT_IQ3_S = 26, FT_IQ3_M = 27, FT_IQ2_S = 28, FT_IQ2_M = 29, FT_IQ4_XS = 30,
    FT_IQ1_M = 31, FT_BF16 = 32,
};

typedef struct preset {
    const char *name;
    int ftype;        /* general.file_type */
    int type;         /* default tensor type */
    int moe;          /* pocket's MoE-aware rules instead of llama.cpp's */
} preset;

static const preset presets[] = {
    {.name = "F32", .ftype = FT_ALL_F32, .type = PK_TYPE_F32},
    {.name = "F16", .ftype = FT_F16, .type = PK_TYPE_F16},
    {.name = "BF16", .ftype = FT_BF16, .type = PK_TYPE_BF16},
    {.name = "Q8_0", .ftype = FT_Q8_0, .type = PK_TYPE_Q8_0},
    {.name = "Q6_K", .ftype = FT_Q6_K, .type = PK_TYPE_Q6_K},
    {.name = "Q5_K_M", .ftype = FT_Q5_K_M, .type = PK_TYPE_Q5_K},
    {.name = "Q5_K_S", .ftype = FT_Q5_K_S, .type = PK_TYPE_Q5_K},
    {.name = "Q5_1", .ftype = FT_Q5_1, .type = PK_TYPE_Q5_1},
    {.name = "Q5_0", .ftype = FT_Q5_0, .type = PK_TYPE_Q5_0},
    {.name = "Q4_K_M", .ftype = FT_Q4_K_M, .type = PK_TYPE_Q4_K},
    {.name = "Q4_K_S", .ftype = FT_Q4_K_S, .type = PK_TYPE_Q4_K},
    {.name = "Q4_1", .ftype = FT_Q4_1, .type = PK_TYPE_Q4_1},
    {.name = "Q4_0", .ftype = FT_Q4_0, .type = PK_TYPE_Q4_0},
    {.name = "Q3_K_L", .ftype = FT_Q3_K_L, .type = PK_TYPE_Q3_K},
    {.name = "Q3_K_M", .ftype = FT_Q3_K_M, .type = PK_TYPE_Q3_K},
    {.name = "Q3_K_S", .ftype = FT_Q3_K_S, .type = PK_TYPE_Q3_K},
    {.name = "Q2_K", .ftype = FT_Q2_K, .type = PK_TYPE_Q2_K},
    {.name = "IQ4_XS", .ftype = FT_IQ4_XS, .type = PK_TYPE_IQ4_XS},
    {.name = "IQ4_NL", .ftype = FT_IQ4_NL, .type = PK_TYPE_IQ4_NL},
    {.name = "MOE_Q2_K", .ftype = FT_Q2_K, .type = PK_TYPE_Q2_K, .moe = 1},
    {.name = "IQ3_M", .ftype = FT_IQ3_M, .type = PK_TYPE_IQ3_S},
    {.name = "IQ3_S", .ftype = FT_IQ3_S, .type = PK_TYPE_IQ3_S},
    {.name = "IQ3_XS", .ftype = FT_IQ3_XS, .type = PK_TYPE_IQ3_S},
    {.name = "IQ3_XXS", .ftype = FT_IQ3_XXS, .type = PK_TYPE_IQ3_XXS},
    {.name = "IQ2_M", .ftype = FT_IQ2_M, .type = PK_TYPE_IQ2_S},
    {.name = "IQ2_S", .ftype = FT_IQ2_S, .type = PK_TYPE_IQ2_XS},
    {.name = "IQ2_XXS", .ftype = FT_IQ2_XXS, .type = PK_TYPE_IQ2_XXS},
    {.name = "IQ2_XS", .ftype = FT_IQ2_XS, .type = PK_TYPE_IQ2_XS},
    {.name = "IQ1_S", .ftype = FT_IQ1_S, .type = PK_TYPE_IQ1_S},
    {.name = "IQ1_M", .ftype = FT_IQ1_M, .type = PK_TYPE_IQ1_M},
    {.name = "MOE_IQ2_XXS", .ftype = FT_IQ2_XXS, .type = PK_TYPE_IQ2_XXS, .moe = 1},
    {.name = "MOE_IQ1_M", .ftype = FT_IQ1_M, .type = PK_TYPE_IQ1_M, .moe = 1},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

int pk_quantize_n_presets(void) { return N_PRESETS; }
const char *pk_quantize_preset_name(int i) { return i >= 0 && i < N_PRESETS ? presets[i].name : NULL; }

pk_quantize_params pk_quantize_default_params(void) {
    pk_quantize_params p;
    memset(&p, 0, sizeof p);
    p.preset = "Q8_0";
    return p;
}

/* ---- overrides ------------------------------------------------------------- */

typedef struct override {
    char *glob;       /* whole-name glob: the pattern with '*' added on unanchored ends */
    int type;
    int hits;         /* quantizable tensors it decided */
} override;

/* Full match of s against a glob of '*' (any run) and '?' (any character). */
static int glob_match(const char *p, const char *s) {
    const char *star = NULL, *resume = NULL;
    while (*s) {
        if (*p == '*') { star = p++; resume = s; continue; }
        if (*p && (*p == '?' || *p == *s)) { p++; s++; continue; }
        if (!star) return 0;
        p = star + 1;
        s = ++resume;
    }
    while (*p == '*') p++;
    return *p == 0;
}

/* Type id by name, case-insensitive; -1 if unknown. */
static int type_by_name(const char *name) {
    for (int t = 0; t < PK_TYPE_COUNT; t++) {
        const pk_type_traits *tt = pk_type_get(t);
        if (tt && strcasecmp(tt->name, name) == 0) return t;
    }
    return -1;
}

/* Types that only exist as activations or integers, never as weights. */
static int weight_type_ok(int t) {
    return t != PK_TYPE_Q8_1 && t != PK_TYPE_Q8_K && t != PK_TYPE_I8 && t != PK_TYPE_I16 &&
           t != PK_TYPE_I32 && t != PK_TYPE_I64 && t != PK_TYPE_F64;
}

static int parse_override(const char *s, override *o, pk_error *err) {
    const char *eq = strchr(s, '=');
    if (!eq || strchr(eq + 1, '='))
        return pk_errorf(err, PK_ERR_ARG, "tensor type override '%s': expected PATTERN=TYPE", s);
    size_t n = (size_t)(eq - s);
    const char *ts = eq + 1;
    int anch_start = n > 0 && s[0] == '^', anch_end = n > (size_t)anch_start && s[n - 1] == '$';
    size_t b = (size_t)anch_start, e = n - (size_t)anch_end;
    if (e <= b)
        return pk_errorf(err, PK_ERR_ARG, "tensor type override '%s': empty pattern", s);
    for (size_t i = b; i < e; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= ' ' || c >= 0x7f)
            return pk_errorf(err, PK_ERR_ARG,
                             "tensor type override '%s': pattern has a space or control character", s);
        if (strchr("[]{}()|+\\^$", c))
            return pk_errorf(err, PK_ERR_ARG,
                             "tensor type override '%s': unsupported pattern character '%c' (patterns are "
                             "substrings with * and ? wildcards, optionally anchored with ^ and $)", s, c);
    }
    if (!*ts) return pk_errorf(err, PK_ERR_ARG, "tensor type override '%s': empty type", s);
    o->type = type_by_name(ts);
    if (o->type < 0)
        return pk_errorf(err, PK_ERR_ARG, "tensor type override '%s': unknown type '%s'", s, ts);
    if (!weight_type_ok(o->type))
        return pk_errorf(err, PK_ERR_ARG, "tensor type override '%s': %s is not a weight type", s,
                         pk_type_name(o->type));
    o->glob = malloc(e - b + 3);
    if (!o->glob) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    char *g = o->glob;
    if (!anch_start) *g++ = '*';
    memcpy(g, s + b, e - b);
    g += e - b;
    if (!anch_end) *g++ = '*';
    *g = 0;
    return PK_OK;
}

/* ---- per-tensor type rules (llama-quantize's) --------------------------------- */

enum cat {
    CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B,
    CAT_ATTN_OUTPUT, CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER
};

static int is_token_embd(const char *n) {
    return strcmp(n, "token_embd.weight") == 0 || strcmp(n, "per_layer_token_embd.weight") == 0;
}

static int category(const char *n) {
    if (strcmp(n, "output.weight") == 0) return CAT_OUTPUT;
    if (is_token_embd(n)) return CAT_TOKEN_EMBD;
    if (strstr(n, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (strstr(n, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (strstr(n, "attn_v.weight")) return CAT_ATTN_V;
    if (strstr(n, "attn_k.weight")) return CAT_ATTN_K;
    if (strstr(n, "attn_q.weight")) return CAT_ATTN_Q;
    if (strstr(n, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (strstr(n, "ffn_up")) return CAT_FFN_UP;
    if (strstr(n, "ffn_gate")) return CAT_FFN_GATE;
    if (strstr(n, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static int is_attn_v_like(int c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

/* Dimensions ignoring trailing 1s (ggml_n_dims). */
static int eff_dims(const gguf_tensor *t) {
    for (int d = 3; d >= 1; d--)
        if (t->ne[d] > 1) return d + 1;
    return 1;
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && memcmp(s + a - b, suf, b) == 0;
}

/* Whether llama-quantize would change this tensor's type at all. */
static int allows_quantization(const gguf_tensor *t) {
    static const char *const never_sub[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
        "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
        "indexer.q_proj.weight", "time_mix_first.weight", "time_mix_w0.weight",
        "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
        "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
        "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd",
        ".patch_merger", "a.rvq.codebook", "mm.a.code_embd",
    };
    const char *n = t->name;
    if (eff_dims(t) < 2 || !has_suffix(n, "weight")) return 0;
    if (strcmp(n, "position_embd.weight") == 0 || strcmp(n, "token_types.weight") == 0) return 0;
    for (size_t i = 0; i < sizeof never_sub / sizeof never_sub[0]; i++)
        if (strstr(n, never_sub[i])) return 0;
    return 1;
}

/* "blk.N." -> N (as sscanf("blk.%d.") reads it), else -1. */
static int layer_of(const char *n) {
    if (strncmp(n, "blk.", 4) != 0 || !isdigit((unsigned char)n[4])) return -1;
    long v = 0;
    for (const char *p = n + 4; isdigit((unsigned char)*p); p++)
        if ((v = v * 10 + (*p - '0')) > 1000000000L) return -1;
    return (int)v;
}

typedef struct qstate {
    const char *file;
    const preset *ps;
    int ftype;
    int n_layer, n_head, n_head_kv, n_expert, n_gqa;
    int falcon, is_70b, tied, has_imatrix;
    int plan_only;    /* pk_quantize_plan_types: note a missing importance matrix, no error */
    int needs_imatrix;
    int n_attn_wv, i_attn_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
    int n_fallback;
} qstate;

static int use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* The i-quant presets below 3 bits, which llama-quantize gives their own
 * rules for attention v / k / output, ffn_down, the output and the token
 * embeddings (llama.cpp's llama-quant.cpp). */
static int low_iq(int ft) {
    return ft == FT_IQ2_XXS || ft == FT_IQ2_XS || ft == FT_IQ2_S || ft == FT_IQ2_M || ft == FT_IQ1_S || ft == FT_IQ1_M;
}

/* Layer of an FFN tensor: from its name in MoE models (experts need not be
 * stored in layer order), else the running counter. */
static int layer_info(const qstate *qs, int counter, const char *name, int *il, pk_error *err) {
    *il = counter;
    if (qs->n_expert > 1) {
        int l = layer_of(name);
        if (l < 0)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s': cannot tell its layer (no blk.N. prefix)",
                             qs->file, name);
        if (l >= qs->n_layer)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s': layer %d is not below block_count %d",
                             qs->file, name, l, qs->n_layer);
        *il = l;
    }
    return PK_OK;
}

static int blck(int type) { return pk_type_get(type)->blck; }

/* llama-quantize's choice for one quantizable tensor under a llama.cpp
 * preset, starting from the preset's default type nt. */
static int rule_type(qstate *qs, const gguf_tensor *t, int cat, int nt, int *out, pk_error *err) {
    const int ft = qs->ftype, n = qs->n_layer;
    const int iq2sm = ft == FT_IQ2_S || ft == FT_IQ2_M;
    int il, rc;
    if (cat == CAT_OUTPUT || (qs->tied && cat == CAT_TOKEN_EMBD)) {
        if (qs->falcon || t->ne[0] % blck(nt)) nt = PK_TYPE_Q8_0;
        else if (low_iq(ft) || ft == FT_IQ3_XXS) nt = PK_TYPE_Q5_K;
        else if (nt != PK_TYPE_Q8_0) nt = PK_TYPE_Q6_K;
    } else if (cat == CAT_TOKEN_EMBD) {   /* the other presets keep the default type */
        if (iq2sm || ft == FT_IQ3_XXS) nt = PK_TYPE_IQ3_S;
        else if (low_iq(ft)) nt = PK_TYPE_Q2_K;
    } else if (low_iq(ft)) {
        /* the counters as llama-quantize keeps them in this branch: ffn_down's
           only (its first n_layer / 8 tensors, counted, not by layer) */
        if (is_attn_v_like(cat)) {
            nt = qs->n_gqa >= 4 || qs->n_expert >= 4 ? PK_TYPE_Q4_K : iq2sm ? PK_TYPE_IQ3_S : PK_TYPE_Q2_K;
            qs->i_attn_wv++;
        } else if (qs->n_expert == 8 && cat == CAT_ATTN_K) {
            nt = PK_TYPE_Q4_K;
        } else if (cat == CAT_FFN_DOWN) {
            if (qs->i_ffn_down < n / 8) nt = iq2sm ? PK_TYPE_IQ3_S : PK_TYPE_Q2_K;
            qs->i_ffn_down++;
        } else if (cat == CAT_ATTN_OUTPUT) {
            if (qs->n_expert == 8) nt = PK_TYPE_Q5_K;
            else if (ft == FT_IQ1_S || ft == FT_IQ1_M) nt = PK_TYPE_IQ2_XXS;
            else if (iq2sm) nt = PK_TYPE_IQ3_S;
        }
    } else if (is_attn_v_like(cat)) {
        const int i = qs->i_attn_wv;
        if (ft == FT_Q2_K) nt = qs->n_gqa >= 4 ? PK_TYPE_Q4_K : PK_TYPE_Q3_K;
        else if (ft == FT_IQ3_XXS)
            nt = qs->n_gqa >= 4 ? PK_TYPE_Q4_K : !qs->has_imatrix ? PK_TYPE_IQ3_S : PK_TYPE_IQ3_XXS;
        else if ((ft == FT_IQ3_XS || ft == FT_IQ3_S) && qs->n_gqa >= 4) nt = PK_TYPE_Q4_K;
        else if (ft == FT_IQ3_M) nt = PK_TYPE_Q4_K;
        else if (ft == FT_Q3_K_M) nt = i < 2 ? PK_TYPE_Q5_K : PK_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L) nt = PK_TYPE_Q5_K;
        else if ((ft == FT_IQ4_NL || ft == FT_IQ4_XS) && qs->n_gqa >= 4) nt = PK_TYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(i, qs->n_attn_wv))
            nt = PK_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && i < 4) nt = PK_TYPE_Q5_K;
        if (qs->is_70b && (nt == PK_TYPE_Q3_K || nt == PK_TYPE_Q4_K)) nt = PK_TYPE_Q5_K;
        if (qs->n_expert == 8) nt = PK_TYPE_Q8_0;
        qs->i_attn_wv++;
    } else if (cat == CAT_ATTN_K) {
        if (qs->n_expert == 8) nt = PK_TYPE_Q8_0;
        else if (ft == FT_IQ3_XS) nt = PK_TYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) nt = PK_TYPE_IQ2_S;
    } else if (cat == CAT_ATTN_Q) {
        if (ft == FT_IQ3_XS) nt = PK_TYPE_IQ3_XXS;
        else if (ft == FT_IQ3_XXS) nt = PK_TYPE_IQ2_S;
    } else if (cat == CAT_FFN_DOWN) {
        if ((rc = layer_info(qs, qs->i_ffn_down, t->name, &il, err))) return rc;
        const int more = use_more_bits(il, n);
        if (ft == FT_Q2_K) nt = PK_TYPE_Q3_K;
        else if (ft == FT_IQ3_XXS && !qs->has_imatrix) nt = il < n / 8 ? PK_TYPE_Q4_K : PK_TYPE_Q3_K;
        else if (ft == FT_IQ3_M && (il < n / 8 || (qs->n_expert == 8 && more))) nt = PK_TYPE_Q4_K;
        else if (ft == FT_Q3_K_M)
            nt = il < n / 16 ? PK_TYPE_Q5_K : (!qs->falcon || more) ? PK_TYPE_Q4_K : PK_TYPE_Q3_K;
        else if (ft == FT_Q3_K_L) nt = qs->falcon ? PK_TYPE_Q4_K : PK_TYPE_Q5_K;
        else if (ft == FT_Q4_K_M) {
            if (qs->falcon) nt = il < n / 16 ? PK_TYPE_Q6_K : more ? PK_TYPE_Q5_K : PK_TYPE_Q4_K;
            else if (more) nt = PK_TYPE_Q6_K;
        } else if (il < n / 8 && (ft == FT_IQ4_NL || ft == FT_IQ4_XS) && !qs->has_imatrix)
            nt = PK_TYPE_Q5_K;
        else if (ft == FT_Q5_K_M && more) nt = PK_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && !qs->falcon && il < n / 8) nt = PK_TYPE_Q5_K;
        else if ((ft == FT_Q4_0 || ft == FT_Q5_0) && qs->has_imatrix && il < n / 8)
            nt = ft == FT_Q4_0 ? PK_TYPE_Q4_1 : PK_TYPE_Q5_1;
        qs->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (!qs->falcon) {
            if (qs->n_expert == 8) {
                if (ft == FT_Q2_K || ft == FT_IQ3_XS || ft == FT_IQ3_XXS || ft == FT_Q3_K_S || ft == FT_Q3_K_M ||
                    ft == FT_IQ4_NL || ft == FT_Q4_K_S || ft == FT_Q4_K_M || ft == FT_IQ3_S || ft == FT_IQ3_M ||
                    ft == FT_IQ4_XS)
                    nt = PK_TYPE_Q5_K;
            } else {
                if (ft == FT_Q2_K) nt = PK_TYPE_Q3_K;
                else if (ft == FT_IQ3_XXS) nt = PK_TYPE_IQ3_S;
                else if (ft == FT_Q3_K_M) nt = PK_TYPE_Q4_K;
                else if (ft == FT_Q3_K_L) nt = PK_TYPE_Q5_K;
                else if (ft == FT_IQ3_M) nt = PK_TYPE_Q4_K;
            }
        } else if (ft == FT_Q3_K_L) {
            nt = PK_TYPE_Q4_K;
        }
    } else if (cat == CAT_FFN_GATE || cat == CAT_FFN_UP) {
        int *ctr = cat == CAT_FFN_GATE ? &qs->i_ffn_gate : &qs->i_ffn_up;
        if ((rc = layer_info(qs, *ctr, t->name, &il, err))) return rc;
        if (ft == FT_IQ3_XS && il >= n / 8 && il < 7 * n / 8) nt = PK_TYPE_IQ3_XXS;
        (*ctr)++;
    }
    *out = nt;
    return PK_OK;
}

/* pocket's MOE_Q2_K, MOE_IQ2_XXS and MOE_IQ1_M: routed experts small (the
 * preset's type), everything used by every token (attention, shared experts,
 * dense FFNs, embeddings, output) large. */
static int moe_rule_type(const char *name, int cat, int nt) {
    if (strstr(name, "exps.") && !strstr(name, "shexp")) return nt;
    if (is_attn_v_like(cat) || strstr(name, "shexp")) return PK_TYPE_Q8_0;
    return PK_TYPE_Q6_K;
}

/* A type the row length allows: llama-quantize's fallbacks. */
static int fallback(qstate *qs, const gguf_tensor *t, int nt, int *out, pk_error *err) {
    if (t->ne[0] % blck(nt) == 0) { *out = nt; return PK_OK; }
    int r;
    switch (nt) {
    case PK_TYPE_IQ1_S: case PK_TYPE_IQ1_M: case PK_TYPE_IQ2_XXS: case PK_TYPE_IQ2_XS:
    case PK_TYPE_IQ2_S: case PK_TYPE_IQ3_XXS: case PK_TYPE_IQ3_S: case PK_TYPE_IQ4_XS:
        r = PK_TYPE_IQ4_NL; break;
    case PK_TYPE_Q2_K: case PK_TYPE_Q3_K: case PK_TYPE_TQ1_0: case PK_TYPE_TQ2_0:
        r = PK_TYPE_Q4_0; break;
    case PK_TYPE_Q4_K: r = PK_TYPE_Q5_0; break;
    case PK_TYPE_Q5_K: r = PK_TYPE_Q5_1; break;
    case PK_TYPE_Q6_K: r = PK_TYPE_Q8_0; break;
    default:
        return pk_errorf(err, PK_ERR_UNSUPPORTED,
                         "%s: tensor '%s': row length %lld is not a multiple of the %s block size %d "
                         "and %s has no fallback type", qs->file, t->name, (long long)t->ne[0],
                         pk_type_name(nt), blck(nt), pk_type_name(nt));
    }
    if (t->ne[0] % blck(r)) r = PK_TYPE_F16;
    qs->n_fallback++;
    *out = r;
    return PK_OK;
}

static int needs_imatrix(const char *name, int type) {
    if (is_token_embd(name) || strcmp(name, "output.weight") == 0) return 0;
    return type == PK_TYPE_IQ3_XXS || type == PK_TYPE_IQ2_XXS || type == PK_TYPE_IQ2_XS ||
           type == PK_TYPE_IQ2_S || type == PK_TYPE_IQ1_M || type == PK_TYPE_IQ1_S;
}

/* ---- the plan ------------------------------------------------------------------- */

typedef struct plan {
    const gguf_tensor *t;
    int type;                 /* output type */
    const float *imat;        /* ne[0] * ne[2] weights, or NULL */
} plan;

/* llama-quantize's tensor order: non-layer tensors first, then by layer
 * number, then by name. */
static int cmp_plan(const void *a, const void *b) {
    const char *na = ((const plan *)a)->t->name, *nb = ((const plan *)b)->t->name;
    int la = layer_of(na), lb = layer_of(nb);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(na, nb);
}

static int arch_int(const gguf_file *f, const char *arch, const char *suffix, int64_t *out,
                    pk_error *err) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (kv && kv->type == GGUF_ARRAY) {     /* per-layer values: llama.cpp uses layer 0 */
        if (kv->arr_n == 0 || kv->arr_type == GGUF_STRING)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s': unusable array", f->path, key);
        *out = gguf_arr_int(kv, 0);
        return PK_OK;
    }
    return gguf_get_int(f, key, 0, out, err);
}

static int read_hparams(const gguf_file *f, qstate *qs, pk_error *err) {
    char *arch = NULL;
    int rc = gguf_get_string(f, "general.architecture", 0, &arch, err);
    if (rc) return rc;
    const char *a = arch ? arch : "";
    int64_t n_layer = 0, n_head = 0, n_head_kv = -1, n_expert = 0;
    if (!(rc = arch_int(f, a, "block_count", &n_layer, err)) &&
        !(rc = arch_int(f, a, "attention.head_count", &n_head, err)) &&
        !(rc = arch_int(f, a, "attention.head_count_kv", &n_head_kv, err)))
        rc = arch_int(f, a, "expert_count", &n_expert, err);
    if (!rc && (n_layer < 0 || n_layer > 100000 || n_head < 0 || n_head > 1000000 ||
                n_head_kv > 1000000 || n_expert < 0 || n_expert > 1000000))
        rc = pk_errorf(err, PK_ERR_FORMAT,
                       "%s: implausible hyperparameters (block_count %lld, head_count %lld, "
                       "head_count_kv %lld, expert_count %lld)", f->path, (long long)n_layer,
                       (long long)n_head, (long long)n_head_kv, (long long)n_expert);
    if (!rc) {
        if (n_head_kv < 0) n_head_kv = n_head;
        qs->n_layer = (int)n_layer;
        qs->n_head = (int)n_head;
        qs->n_head_kv = (int)n_head_kv;
        qs->n_expert = (int)n_expert;
        qs->n_gqa = n_head_kv > 0 ? (int)(n_head / n_head_kv) : 0;
        qs->falcon = strcmp(a, "falcon") == 0;
        qs->is_70b = strcmp(a, "llama") == 0 && n_layer == 80 && n_head != n_head_kv;
    }
    free(arch);
    return rc;
}

static int make_plan(const gguf_file *f, qstate *qs, const pk_quantize_params *p, override *ov,
                     plan *pl, pk_error *err) {
    const uint64_t nt = f->n_tensors;
    qs->tied = gguf_find_tensor(f, "output.weight") == NULL;
    for (uint64_t i = 0; i < nt; i++) {
        pl[i].t = &f->tensors[i];
        if (is_attn_v_like(category(f->tensors[i].name))) qs->n_attn_wv++;
    }
    qsort(pl, nt, sizeof *pl, cmp_plan);
    const int def = qs->ps->type;
    const int def_quantized = blck(def) > 1;
    int rc;
    for (uint64_t i = 0; i < nt; i++) {
        const gguf_tensor *t = pl[i].t;
        if (!allows_quantization(t)) {
            pl[i].type = t->type;
            continue;
        }
        int type = def, manual = 0, cat = category(t->name);
        for (int k = 0; k < p->n_overrides; k++)
            if (glob_match(ov[k].glob, t->name)) {
                type = ov[k].type;
                ov[k].hits++;
                manual = 1;
                break;
            }
        if (!manual && t->type == PK_TYPE_MXFP4) {
            /* kept: re-quantizing 4-bit floats to another type only loses */
            pl[i].type = t->type;
            continue;
        }
        if (!manual && def_quantized) {
            if (qs->ps->moe) type = moe_rule_type(t->name, cat, type);
            else if ((rc = rule_type(qs, t, cat, type, &type, err))) return rc;
        }
        if ((rc = fallback(qs, t, type, &pl[i].type, err))) return rc;
        if (needs_imatrix(t->name, pl[i].type) && !qs->has_imatrix) {
            qs->needs_imatrix = 1;
            if (!qs->plan_only)
                return pk_errorf(err, PK_ERR_ARG, "%s: tensor '%s': type %s needs an importance matrix",
                                 f->path, t->name, pk_type_name(pl[i].type));
        }
    }
    for (int k = 0; k < p->n_overrides; k++)
        if (ov[k].hits == 0)
            return pk_errorf(err, PK_ERR_ARG,
                             "tensor type override '%s' matches no quantizable tensor of %s",
                             p->overrides[k], f->path);
    return PK_OK;
}

/* The quantizer for a type given importance weights (one row of n elements,
 * w: n per-column importances), as llama-quantize picks ggml's
 * quantize_<type> with quant_weights: the weighted searches of quant/imat.c
 * for the legacy and K types and IQ2_XXS / IQ2_XS (which have no other),
 * quant/iquant.c's for IQ4_NL (with its extra scale trials) and IQ4_XS,
 * quant/iq1.c's for IQ1_S / IQ1_M and quant/iq3.c's for IQ3_XXS, IQ3_S, IQ2_S.
 * NULL: no importance-aware quantizer. */
typedef void (*from_float_imat_fn)(const float *src, void *dst, int64_t n, const float *w);
static from_float_imat_fn imat_quantizer(int type) {
    switch (type) {
    case PK_TYPE_Q4_0: return pk_quantize_q4_0_imat;
    case PK_TYPE_Q4_1: return pk_quantize_q4_1_imat;
    case PK_TYPE_Q5_0: return pk_quantize_q5_0_imat;
    case PK_TYPE_Q5_1: return pk_quantize_q5_1_imat;
    case PK_TYPE_Q2_K: return pk_quantize_q2_K_imat;
    case PK_TYPE_Q3_K: return pk_quantize_q3_K_imat;
    case PK_TYPE_Q4_K: return pk_quantize_q4_K_imat;
    case PK_TYPE_Q5_K: return pk_quantize_q5_K_imat;
    case PK_TYPE_Q6_K: return pk_quantize_q6_K_imat;
    case PK_TYPE_IQ4_NL: return pk_quantize_iq4_nl_full;
    case PK_TYPE_IQ4_XS: return pk_quantize_iq4_xs;
    case PK_TYPE_IQ2_XXS: return pk_quantize_iq2_xxs_imat;
    case PK_TYPE_IQ2_XS: return pk_quantize_iq2_xs_imat;
    case PK_TYPE_IQ1_S: return pk_quantize_iq1_s;
    case PK_TYPE_IQ1_M: return pk_quantize_iq1_m;
    case PK_TYPE_IQ3_XXS: return pk_quantize_iq3_xxs;
    case PK_TYPE_IQ3_S: return pk_quantize_iq3_s;
    case PK_TYPE_IQ2_S: return pk_quantize_iq2_s;
    default: return NULL;
    }
}

/* Types whose quantizer has no use for importance weights (ggml's
 * quantize_q8_0 ignores them): an imatrix entry is simply not used. */
static int imat_ignored(int type) { return type == PK_TYPE_Q8_0; }

/* Check every conversion can be done, and fetch importance weights. */
static int check_plan(const gguf_file *f, const pk_quantize_params *p, plan *pl, pk_error *err) {
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = pl[i].t;
        const int ty = pl[i].type;
        if (ty == t->type) continue;
        const pk_type_traits *src = pk_type_get(t->type), *dst = pk_type_get(ty);
        if (!src->to_float)
            return pk_errorf(err, PK_ERR_UNSUPPORTED,
                             "%s: tensor '%s': cannot convert from %s: pocket has no %s dequantizer",
                             f->path, t->name, src->name, src->name);
        /* a type quantized only with importance weights (IQ1: ggml has no
           reference quantizer) needs this tensor's imatrix entry */
        const int imat_only = !dst->from_float && imat_quantizer(ty);
        if (!dst->from_float && !imat_only)
            return pk_errorf(err, PK_ERR_UNSUPPORTED,
                             "%s: tensor '%s': cannot quantize to %s: pocket has no %s quantizer yet",
                             f->path, t->name, dst->name, dst->name);
        int64_t n = 0;
        const float *w = p->imatrix && dst->blck > 1 ? p->imatrix(p->imatrix_ud, t->name, &n) : NULL;
        if (w && n != t->ne[0] * t->ne[2] && is_token_embd(t->name))
            w = NULL;                                  /* as llama-quantize: ignored */
        if (!w && p->imatrix && (imat_only || needs_imatrix(t->name, ty)))   /* as llama-quantize */
            return pk_errorf(err, PK_ERR_ARG, "%s: tensor '%s': the importance matrix has no entry for it "
                             "(type %s needs one)", f->path, t->name, dst->name);
        if (!w && imat_only)
            return pk_errorf(err, PK_ERR_ARG, "%s: tensor '%s': type %s needs an importance matrix",
                             f->path, t->name, dst->name);
        if (!w) continue;
        if (n != t->ne[0] * t->ne[2]) {
            return pk_errorf(err, PK_ERR_ARG,
                             "importance matrix for tensor '%s' has %lld values, expected %lld",
                             t->name, (long long)n, (long long)(t->ne[0] * t->ne[2]));
        }
        for (int64_t j = 0; j < n; j++)
            if (!isfinite(w[j]))
                return pk_errorf(err, PK_ERR_ARG,
                                 "importance matrix for tensor '%s': value %lld is not finite",
                                 t->name, (long long)j);
        if (imat_ignored(ty)) continue;       /* checked, but unused (Q8_0) */
        if (!imat_quantizer(ty))
            return pk_errorf(err, PK_ERR_UNSUPPORTED,
                             "tensor '%s': quantizing to %s with an importance matrix is not "
                             "implemented yet", t->name, dst->name);
        pl[i].imat = w;
    }
    return PK_OK;
}

/* ---- conversion ------------------------------------------------------------------ */

typedef struct qjob {
    const uint8_t *src;
    size_t src_row;
    pk_to_float_fn to_float;
    uint8_t *dst;             /* slab */
    size_t dst_row;
    pk_from_float_fn from_float;
    from_float_imat_fn from_float_imat; /* if set, used instead of from_float (imat may be NULL) */
    const float *imat;        /* ne0 * n_mat importances, or NULL */
    int64_t rows_per_mat, n_mat;  /* ne[1], ne[2]: row r uses imat + ((r / ne1) % ne2) * ne0 */
    pk_to_float_fn check;     /* target's dequantizer, for validation (may be NULL) */
    int64_t ne0, row0, nrows, grab;
    float *scratch;           /* 2 * ne0 floats per thread */
    atomic_llong next;
    atomic_llong bad_row;     /* -1: none */
    atomic_int bad_kind;      /* 1: non-finite input, 2: non-finite result */
} qjob;

typedef struct qworker { qjob *j; int tid; } qworker;

static int all_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return 0;
    return 1;
}

static void note_bad(qjob *j, int64_t row, int kind) {
    long long none = -1;
    if (atomic_compare_exchange_strong(&j->bad_row, &none, (long long)row))
        atomic_store(&j->bad_kind, kind);
}

static void run_rows(qjob *j, int tid) {
    float *x = j->scratch + (size_t)tid * 2 * (size_t)j->ne0, *y = x + j->ne0;
    for (;;) {
        int64_t r = atomic_fetch_add(&j->next, j->grab);
        if (r >= j->nrows || atomic_load_explicit(&j->bad_row, memory_order_relaxed) >= 0) return;
        int64_t e = r + j->grab < j->nrows ? r + j->grab : j->nrows;
        for (; r < e; r++) {
            uint8_t *d = j->dst + (size_t)r * j->dst_row;
            j->to_float(j->src + (size_t)(j->row0 + r) * j->src_row, x, j->ne0);
            if (!all_finite(x, j->ne0)) { note_bad(j, j->row0 + r, 1); return; }
            if (j->from_float_imat) {
                const int64_t mat = ((j->row0 + r) / j->rows_per_mat) % j->n_mat;
                j->from_float_imat(x, d, j->ne0, j->imat ? j->imat + mat * j->ne0 : NULL);
            } else {
                j->from_float(x, d, j->ne0);
            }
            if (j->check) {
                j->check(d, y, j->ne0);
                if (!all_finite(y, j->ne0)) { note_bad(j, j->row0 + r, 2); return; }
            }
        }
    }
}

static void *worker_main(void *arg) {
    qworker *w = arg;
    run_rows(w->j, w->tid);
    return NULL;
}

/* Convert rows [row0, row0 + nrows) of the job on up to nth threads. */
static void run_slab(qjob *j, int nth, pthread_t *tid, qworker *wk) {
    int64_t grabs = (j->nrows + j->grab - 1) / j->grab;
    if (nth > grabs) nth = (int)grabs;
    atomic_store(&j->next, 0);
    int started = 0;
    for (int i = 1; i < nth; i++) {
        wk[i].j = j;
        wk[i].tid = i;
        if (pthread_create(&tid[i], NULL, worker_main, &wk[i]) != 0) break;  /* run with fewer */
        started = i;
    }
    run_rows(j, 0);
    for (int i = 1; i <= started; i++) pthread_join(tid[i], NULL);
}

static int convert_tensor(const gguf_file *f, const plan *pl, gguf_writer *w, int nth,
                          pk_error *err) {
    const gguf_tensor *t = pl->t;
    const pk_type_traits *src = pk_type_get(t->type), *dst = pk_type_get(pl->type);
    const int64_t ne0 = t->ne[0];
    const int64_t nrows = ne0 > 0 ? t->nelements / ne0 : 0;
    qjob j;
    memset(&j, 0, sizeof j);
    j.src = t->data;
    j.src_row = pk_row_size(t->type, ne0);
    j.to_float = src->to_float;
    j.dst_row = pk_row_size(pl->type, ne0);
    j.from_float = dst->from_float;
    if (pl->imat || !dst->from_float) {   /* IQ2_XXS / IQ2_XS have only this quantizer */
        j.imat = pl->imat;
        j.from_float_imat = imat_quantizer(pl->type);
        j.rows_per_mat = t->ne[1] > 0 ? t->ne[1] : 1;
        j.n_mat = t->ne[2] > 0 ? t->ne[2] : 1;
    }
    j.check = dst->to_float;
    j.ne0 = ne0;
    j.grab = GRAB_ELEMS / ne0 > 0 ? GRAB_ELEMS / ne0 : 1;
    if (nrows == 0 || j.dst_row == 0) return PK_OK;
    int64_t slab_rows = (int64_t)(SLAB_BYTES / j.dst_row);
    if (slab_rows < 1) slab_rows = 1;
    if (slab_rows > nrows) slab_rows = nrows;
    uint64_t scratch_n;
    if (!pk_mul_ok((uint64_t)nth * 2, (uint64_t)ne0, &scratch_n) || scratch_n > SIZE_MAX / 4)
        return pk_errorf(err, PK_ERR_NOMEM, "%s: tensor '%s': row too long", f->path, t->name);
    j.dst = malloc((size_t)slab_rows * j.dst_row);
    j.scratch = malloc((size_t)scratch_n * sizeof(float));
    pthread_t *tid = pk_calloc((size_t)nth, sizeof *tid);
    qworker *wk = pk_calloc((size_t)nth, sizeof *wk);
    int rc = PK_OK;
    if (!j.dst || !j.scratch || !tid || !wk) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "%s: tensor '%s': out of memory for a %lld-row slab",
                       f->path, t->name, (long long)slab_rows);
        goto done;
    }
    atomic_init(&j.bad_row, -1);
    atomic_init(&j.bad_kind, 0);
    for (int64_t r0 = 0; r0 < nrows && !rc; r0 += slab_rows) {
        j.row0 = r0;
        j.nrows = nrows - r0 < slab_rows ? nrows - r0 : slab_rows;
        run_slab(&j, nth, tid, wk);
        long long bad = atomic_load(&j.bad_row);
        if (bad >= 0) {
            rc = atomic_load(&j.bad_kind) == 1
                 ? pk_errorf(err, PK_ERR_FORMAT, "%s: tensor '%s': row %lld has a non-finite value",
                             f->path, t->name, bad)
                 : pk_errorf(err, PK_ERR_FORMAT,
                             "%s: tensor '%s': row %lld does not fit %s (the result is not finite)",
                             f->path, t->name, bad, dst->name);
            break;
        }
        rc = gguf_writer_write(w, j.dst, (size_t)j.nrows * j.dst_row, err);
    }
done:
    free(j.dst);
    free(j.scratch);
    free(tid);
    free(wk);
    return rc;
}

/* ---- the driver --------------------------------------------------------------------- */

static int build_metadata(const gguf_file *f, gguf_writer *w, const qstate *qs,
                          const pk_quantize_params *p, pk_error *err) {
    int rc;
    for (uint64_t i = 0; i < f->n_kv; i++)
        if ((rc = gguf_writer_copy_kv(w, &f->kv[i], err))) return rc;
    gguf_writer_remove_kv(w, "split.no");
    gguf_writer_remove_kv(w, "split.count");
    gguf_writer_remove_kv(w, "split.tensors.count");
    gguf_writer_remove_kv(w, "pocket.quantize.overrides");
    gguf_writer_remove_kv(w, "pocket.quantize.imatrix");
    if ((rc = gguf_writer_set_u32(w, "general.quantization_version", QUANTIZATION_VERSION, err)) ||
        (rc = gguf_writer_set_u32(w, "general.file_type", (uint32_t)qs->ftype, err)) ||
        (rc = gguf_writer_set_str(w, "pocket.quantize.preset", qs->ps->name, err)))
        return rc;
    if (p->n_overrides > 0 &&
        (rc = gguf_writer_set_str_arr(w, "pocket.quantize.overrides", p->overrides,
                                      (uint64_t)p->n_overrides, err)))
        return rc;
    if (qs->has_imatrix && (rc = gguf_writer_set_bool(w, "pocket.quantize.imatrix", 1, err)))
        return rc;
    return PK_OK;
}

/* qs zeroed, with preset name's entry and file type (PK_ERR_ARG naming the
 * known presets if there is none). */
static int find_preset(const char *name, qstate *qs, pk_error *err) {
    memset(qs, 0, sizeof *qs);
    for (int i = 0; i < N_PRESETS; i++)
        if (strcasecmp(presets[i].name, name) == 0) qs->ps = &presets[i];
    if (!qs->ps) {
        char list[400];
        size_t o = 0;
        for (int i = 0; i < N_PRESETS && o < sizeof list; i++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%s", i ? " " : "", presets[i].name);
        return pk_errorf(err, PK_ERR_ARG, "unknown quantization type '%s' (known: %s)", name, list);
    }
    qs->ftype = qs->ps->ftype;
    return PK_OK;
}

int pk_quantize_file(const char *in, const char *out, const pk_quantize_params *p,
                     pk_error *err) {
    if (!in || !out || !p || !p->preset)
        return pk_errorf(err, PK_ERR_ARG, "pk_quantize_file: missing input, output or preset");
    if (p->n_overrides < 0 || (p->n_overrides > 0 && !p->overrides))
        return pk_errorf(err, PK_ERR_ARG, "pk_quantize_file: bad override list (%d entries)",
                         p->n_overrides);
    qstate qs;
    int rc = find_preset(p->preset, &qs, err);
    if (rc) return rc;
    qs.has_imatrix = p->imatrix != NULL;
    qs.file = in;

    override *ov = pk_calloc(p->n_overrides > 0 ? (size_t)p->n_overrides : 1, sizeof *ov);
    gguf_file *f = NULL;
    plan *pl = NULL;
    gguf_writer *w = NULL;
    if (!ov) return pk_errorf(err, PK_ERR_NOMEM, "out of memory");
    for (int k = 0; k < p->n_overrides && !rc; k++)
        rc = p->overrides[k] ? parse_override(p->overrides[k], &ov[k], err)
                             : pk_errorf(err, PK_ERR_ARG, "tensor type override %d is NULL", k);
    if (rc) goto done;
    if ((rc = gguf_open(in, &f, err))) goto done;
    int64_t n_split = 1;
    if ((rc = gguf_get_int(f, "split.count", 0, &n_split, err))) goto done;
    if (n_split > 1) {
        rc = pk_errorf(err, PK_ERR_UNSUPPORTED,
                       "%s: file is part of a %lld-way split model; merge it first (llama-gguf-split --merge)",
                       in, (long long)n_split);
        goto done;
    }
    if (f->n_tensors > (uint64_t)INT32_MAX) {
        rc = pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: too many tensors (%llu)", in,
                       (unsigned long long)f->n_tensors);
        goto done;
    }
    if ((rc = read_hparams(f, &qs, err))) goto done;
    if (!(pl = pk_calloc(f->n_tensors ? f->n_tensors : 1, sizeof *pl))) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", in);
        goto done;
    }
    if ((rc = make_plan(f, &qs, p, ov, pl, err))) goto done;
    const int n = (int)f->n_tensors;
    if (p->dry_run) {
        if (p->progress)
            for (int i = 0; i < n; i++)
                p->progress(p->progress_ud, i, n, pl[i].t->name, pk_type_name(pl[i].type));
        goto done;
    }
    if ((rc = check_plan(f, p, pl, err))) goto done;

    if ((rc = gguf_writer_new(out, &w, err))) goto done;
    struct stat si, so;
    if (stat(in, &si) == 0 && stat(gguf_writer_tmp_path(w), &so) == 0 && si.st_dev == so.st_dev &&
        si.st_ino == so.st_ino) {
        rc = pk_errorf(err, PK_ERR_ARG, "%s: the output's temporary file %s is the input", in,
                       gguf_writer_tmp_path(w));
        goto done;
    }
    if ((rc = build_metadata(f, w, &qs, p, err))) goto done;
    for (int i = 0; i < n; i++)
        if ((rc = gguf_writer_add_tensor(w, pl[i].t->name, pl[i].t->n_dims, pl[i].t->ne,
                                         pl[i].type, err)))
            goto done;
    if ((rc = gguf_writer_begin(w, err))) goto done;

    long nth = p->n_threads > 0 ? p->n_threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (nth < 1) nth = 1;
    if (nth > MAX_THREADS) nth = MAX_THREADS;
    for (int i = 0; i < n; i++) {
        const gguf_tensor *t = pl[i].t;
        if (p->progress) p->progress(p->progress_ud, i, n, t->name, pk_type_name(pl[i].type));
        if (pl[i].type == t->type) rc = gguf_writer_write(w, t->data, (size_t)t->nbytes, err);
        else rc = convert_tensor(f, &pl[i], w, (int)nth, err);
        if (rc) goto done;
    }
    rc = gguf_writer_finish(w, err);
done:
    gguf_writer_free(w);
    free(pl);
    gguf_close(f);
    for (int k = 0; k < p->n_overrides; k++) free(ov[k].glob);
    free(ov);
    return rc;
}

int pk_quantize_plan_types(const gguf_file *f, const char *name, int imatrix, int n_expert, int *types,
                           int *needs_imatrix, pk_error *err) {
    qstate qs;
    int rc = find_preset(name, &qs, err);
    if (rc) return rc;
    qs.has_imatrix = imatrix != 0;
    qs.plan_only = 1;
    qs.file = f->path;
    if ((rc = read_hparams(f, &qs, err))) return rc;
    if (n_expert > 0) qs.n_expert = n_expert;
    plan *pl = pk_calloc(f->n_tensors ? f->n_tensors : 1, sizeof *pl);
    if (!pl) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", f->path);
    const pk_quantize_params p = pk_quantize_default_params();   /* no overrides */
    rc = make_plan(f, &qs, &p, NULL, pl, err);
    for (uint64_t i = 0; !rc && i < f->n_tensors; i++) types[pl[i].t - f->tensors] = pl[i].type;
    *needs_imatrix = qs.needs_imatrix;
    free(pl);
    return rc;
}
