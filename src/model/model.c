/* model/model.c - load a GGUF model: read hyperparameters from the keys llama.cpp
 * writes, bind every weight tensor by llama.cpp's names, and check each one's
 * type and shape against the hyperparameters, so the forward pass can trust
 * them. What differs between architectures comes from the descriptor
 * (model/arch.h); the names and shapes here are shared by all of them.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "model/xcache.h"
#include "pocket.h"
#include "quant/quant.h"
#include "text/grammar.h"

/* ---- hyperparameters ------------------------------------------------------ */

/* Read "<arch>.<suffix>" as an int within [lo, hi]. Some keys (head counts,
 * FFN sizes) may be per-layer arrays; all elements must then be equal. */
static int get_hp(const gguf_file *f, const char *arch, const char *suffix, int required,
                  int64_t lo, int64_t hi, int *out, pk_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_kv *kv = gguf_find_kv(f, key);
    int64_t v = *out;
    if (kv && kv->type == GGUF_ARRAY && kv->arr_type != GGUF_STRING && kv->arr_n > 0) {
        v = gguf_arr_int(kv, 0);
        for (uint64_t i = 1; i < kv->arr_n; i++)
            if (gguf_arr_int(kv, i) != v)
                return pk_errorf(err, PK_ERR_UNSUPPORTED,
                                 "%s: key '%s': per-layer values differ (%lld vs %lld); not supported",
                                 f->path, key, (long long)v, (long long)gguf_arr_int(kv, i));
    } else {
        int rc = gguf_get_int(f, key, required, &v, err);
        if (rc) return rc;
        if (!kv) return PK_OK;
    }
    if (v < lo || v > hi)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' = %lld is out of range [%lld, %lld]",
                         f->path, key, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return PK_OK;
}

/* Read "<arch>.<suffix>" per layer into out[0..n): a scalar for every
 * layer or an integer array of at least n elements (a file's MTP blocks
 * may follow), each within [lo, hi]; absent and not required: dflt. */
static int get_hp_layers(const gguf_file *f, const char *arch, const char *suffix, int required, int64_t lo,
                         int64_t hi, int dflt, int *out, int n, pk_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (kv && kv->type == GGUF_ARRAY && (kv->arr_type == GGUF_STRING || kv->arr_n < (uint64_t)n))
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' must be an integer or %d integers (one per layer)",
                         f->path, key, n);
    int v = dflt, rc;
    if ((!kv || kv->type != GGUF_ARRAY) && (rc = get_hp(f, arch, suffix, required, lo, hi, &v, err))) return rc;
    for (int il = 0; il < n; il++) {
        const int64_t x = kv && kv->type == GGUF_ARRAY ? gguf_arr_int(kv, (uint64_t)il) : v;
        if (x < lo || x > hi)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s'[%d] = %lld is out of range [%lld, %lld]", f->path,
                             key, il, (long long)x, (long long)lo, (long long)hi);
        out[il] = (int)x;
    }
    return PK_OK;
}

static int get_hpf(const gguf_file *f, const char *arch, const char *suffix, float lo, float hi,
                   float *out, pk_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    double v = *out;
    int rc = gguf_get_float(f, key, 0, &v, err);
    if (rc) return rc;
    if (!(v >= lo && v <= hi))
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' = %g is out of range [%g, %g]", f->path,
                         key, v, lo, hi);
    *out = (float)v;
    return PK_OK;
}

/* Gated DeltaNet geometry and the layer pattern: (*linear)[il] = 1 for the
 * DeltaNet layers (allocated here). */
static int load_hybrid_hparams(pk_model *m, const char *an, uint8_t **linear, pk_error *err) {
    const gguf_file *f = m->gguf;
    pk_hparams *hp = &m->hp;
    int rc, inner = 0;
    hp->full_attn_interval = 4;
    if ((rc = get_hp(f, an, "full_attention_interval", 0, 1, 4096, &hp->full_attn_interval, err)) ||
        (rc = get_hp(f, an, "ssm.conv_kernel", 1, 1, 64, &hp->ssm_conv, err)) ||
        (rc = get_hp(f, an, "ssm.state_size", 1, 1, PK_MAX_SSM_STATE, &hp->ssm_state, err)) ||
        (rc = get_hp(f, an, "ssm.group_count", 1, 1, 4096, &hp->ssm_k_heads, err)) ||
        (rc = get_hp(f, an, "ssm.time_step_rank", 1, 1, 4096, &hp->ssm_v_heads, err)) ||
        (rc = get_hp(f, an, "ssm.inner_size", 1, 1, 1 << 20, &inner, err)))
        return rc;
    if (inner != hp->ssm_state * hp->ssm_v_heads)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s.ssm.inner_size %d != state_size %d x time_step_rank %d",
                         f->path, an, inner, hp->ssm_state, hp->ssm_v_heads);
    if (hp->ssm_v_heads % hp->ssm_k_heads)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s.ssm.time_step_rank %d is not a multiple of group_count %d",
                         f->path, an, hp->ssm_v_heads, hp->ssm_k_heads);
    hp->ssm_channels = 2 * hp->ssm_k_heads * hp->ssm_state + hp->ssm_v_heads * hp->ssm_state;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", an);
    const gguf_kv *sec = gguf_find_kv(f, key);
    if (sec && (sec->type != GGUF_ARRAY || sec->arr_type == GGUF_STRING || sec->arr_n > 4))
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' must be an integer array of at most 4", f->path, key);
    /* Text positions use the same position for every IMROPE section, which
       makes it NEOX rope on the first n_rot dims: the sections do not matter. */
    uint8_t *rec = *linear = pk_calloc((size_t)hp->n_layer, 1);
    if (!rec) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", f->path);
    /* <arch>.attention.recurrent_layers (bool per layer, or one for all)
       overrides the interval rule */
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", an);
    const gguf_kv *rl = gguf_find_kv(f, key);
    if (rl && !(rl->type == GGUF_ARRAY ? rl->arr_type != GGUF_STRING && rl->arr_n >= (uint64_t)hp->n_layer
                                       : rl->type != GGUF_STRING))
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' must be a bool/int per layer (%d)", f->path,
                         key, hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++) {
        if (rl) rec[il] = (rl->type == GGUF_ARRAY ? gguf_arr_int(rl, (uint64_t)il) : rl->i64) != 0;
        else rec[il] = (il + 1) % hp->full_attn_interval != 0;
        hp->n_layer_rec += rec[il];
    }
    return PK_OK;
}

/* Sliding-window layers (arch swa_pattern): the pattern, the window and
 * the sliding layers' own head and rope keys. */
static int load_swa_hparams(pk_model *m, const char *an, pk_error *err) {
    const gguf_file *f = m->gguf;
    pk_hparams *hp = &m->hp;
    char key[128];
    int rc, pl = 0, shared = 0;
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", an);
    const gguf_kv *pat = gguf_find_kv(f, key);
    if (!pat) return pk_errorf(err, PK_ERR_FORMAT, "%s: missing required key '%s'", f->path, key);
    if (pat->type != GGUF_ARRAY || pat->arr_type == GGUF_STRING || pat->arr_n < (uint64_t)hp->n_layer)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' must be a bool per layer (%d)", f->path, key,
                         hp->n_layer);
    if (!(hp->swa = pk_calloc((size_t)hp->n_layer, 1))) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", f->path);
    for (int il = 0; il < hp->n_layer; il++) hp->swa[il] = gguf_arr_int(pat, (uint64_t)il) != 0;
    hp->rope_base_swa = 10000.0f;
    if ((rc = get_hp(f, an, "attention.sliding_window", 1, 1, 1 << 24, &hp->n_swa, err)) ||
        (rc = get_hp(f, an, "attention.key_length_swa", 1, 1, 65536, &hp->head_dim_swa, err)) ||
        (rc = get_hp(f, an, "attention.value_length_swa", 1, 1, 65536, &hp->head_dim_v_swa, err)) ||
        (rc = get_hpf(f, an, "rope.freq_base_swa", 1e-3f, 1e12f, &hp->rope_base_swa, err)) ||
        (rc = get_hp(f, an, "embedding_length_per_layer_input", 1, 0, 1 << 20, &pl, err)) ||
        (rc = get_hp(f, an, "attention.shared_kv_layers", 0, 0, hp->n_layer, &shared, err)))
        return rc;
    hp->n_rot_swa = hp->head_dim_swa;
    if ((rc = get_hp(f, an, "rope.dimension_count_swa", 0, 2, 65536, &hp->n_rot_swa, err))) return rc;
    if (hp->n_rot_swa > hp->head_dim_swa || hp->n_rot_swa % 2)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s.rope.dimension_count_swa %d must be even and <= head dim %d",
                         f->path, an, hp->n_rot_swa, hp->head_dim_swa);
    if (pl || shared)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: %s.%s = %d: %s are not supported yet", f->path, an,
                         pl ? "embedding_length_per_layer_input" : "attention.shared_kv_layers", pl ? pl : shared,
                         pl ? "per-layer embeddings" : "layers sharing another layer's KV cache");
    return PK_OK;
}

/* <arch>.rope.scaling.* into hp->rope_scaling (model/blocks.h), as llama.cpp reads
 * them: the type "none", "linear" (the default) or "yarn", the factor s
 * (rope.scaling.factor, or the older rope.scale_linear; 0 or absent: 1),
 * freq_scale = 1 / s; YaRN's original context (default the trained one),
 * beta_fast 32 and beta_slow 1 (llama.cpp never reads them from a file),
 * and its magnitude: attn_factor = mscale(s) / (1 + 0.1 ln s) times
 * rope.scaling.attn_factor, mscale(s) = 1 + 0.1 ln s for s > 1, else 1 (the
 * kernel multiplies by 1 + 0.1 ln s again). Another type is refused. */
static int load_rope_scaling(pk_model *m, const char *an, pk_error *err) {
    const gguf_file *f = m->gguf;
    pk_hparams *hp = &m->hp;
    pk_rope_scaling *rs = &hp->rope_scaling;
    *rs = (pk_rope_scaling){.freq_scale = 1.0f, .ext_factor = 0.0f, .attn_factor = 1.0f,
                            .beta_fast = 32.0f, .beta_slow = 1.0f, .n_ctx_orig = hp->n_ctx_train};
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", an);
    const gguf_kv *sc = gguf_find_kv(f, key);
    if (sc && sc->type != GGUF_STRING)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: key '%s' must be a string", f->path, key);
    const int n = sc ? (int)(sc->str.len > 32 ? 32 : sc->str.len) : 0;
    const char *type = sc ? sc->str.ptr : "linear";
#define IS(name) ((sc ? sc->str.len : 6) == sizeof name - 1 && memcmp(type, name, sizeof name - 1) == 0)
    const int none = IS("none"), linear = IS("linear"), yarn = IS("yarn");
#undef IS
    if (!none && !linear && !yarn)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: %s '%.*s' is not supported (none, linear, yarn)", f->path, key,
                         n, type);
    float factor = 0.0f, attn = 1.0f;
    int rc;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", an);
    if (!gguf_find_kv(f, key) && (rc = get_hpf(f, an, "rope.scale_linear", 0.0f, 1e6f, &factor, err))) return rc;
    if ((rc = get_hpf(f, an, "rope.scaling.factor", 0.0f, 1e6f, &factor, err)) ||
        (rc = get_hpf(f, an, "rope.scaling.attn_factor", 1e-6f, 1e6f, &attn, err)) ||
        (rc = get_hp(f, an, "rope.scaling.original_context_length", 0, 1, 1 << 24, &rs->n_ctx_orig, err)))
        return rc;
    if (factor > 0.0f && factor < 1e-6f)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s = %g is too small", f->path, key, factor);
    if (!none && factor != 0.0f) rs->freq_scale = 1.0f / factor;
    if (yarn) {
        const double s = 1.0 / rs->freq_scale, ms = s <= 1.0 ? 1.0 : 1.0 + 0.1 * log(s);
        rs->ext_factor = 1.0f;
        rs->attn_factor = (float)(ms / (1.0 + 0.1 * log(s)));
    }
    rs->attn_factor *= attn;
    return PK_OK;
}

/* Multi-head latent attention (arch mla, llama.cpp's deepseek2 keys): q
 * LoRA rank (0: attn_q direct; the key is required unless the file is one
 * of the "lite" geometries llama.cpp recognises by layer count), latent
 * width, per-head q/k and value dims (their _mla keys: without them the
 * file is the legacy attn_kv_b form, refused), the YaRN mscale_all_dim. */
static int load_mla_hparams(pk_model *m, const char *an, pk_error *err) {
    const gguf_file *f = m->gguf;
    pk_hparams *hp = &m->hp;
    int rc;
    const gguf_kv *tl = gguf_find_kv(f, "tokenizer.ggml.tokens");
    const int lite = hp->n_layer == 26 || hp->n_layer == 27 ||
                     (hp->n_layer == 48 && tl && tl->type == GGUF_ARRAY && tl->arr_n == 128256);
    if ((rc = get_hp(f, an, "attention.q_lora_rank", !lite, 0, 1 << 16, &hp->q_lora, err)) ||
        (rc = get_hp(f, an, "attention.kv_lora_rank", 1, 1, 1 << 16, &hp->kv_lora, err)) ||
        (rc = get_hp(f, an, "attention.key_length_mla", 0, 1, 65536, &hp->mla_k, err)) ||
        (rc = get_hp(f, an, "attention.value_length_mla", 0, 1, 65536, &hp->mla_v, err)) ||
        (rc = get_hpf(f, an, "rope.scaling.yarn_log_multiplier", -100.0f, 100.0f, &hp->yarn_log_mul, err)))
        return rc;
    hp->yarn_log_mul /= 0.1f;   /* the converter writes 0.1 * mscale_all_dim */
    float temp = 0.0f;   /* Mistral-Large-3's query scaling by position */
    if ((rc = get_hpf(f, an, "attention.temperature_scale", -1e6f, 1e6f, &temp, err))) return rc;
    if (temp != 0.0f)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: %s.attention.temperature_scale (query temperature) is not "
                         "supported", f->path, an);
    if (!hp->mla_k || !hp->mla_v)
        return pk_errorf(err, PK_ERR_UNSUPPORTED,
                         "%s: no %s.attention.key_length_mla / value_length_mla: the legacy attn_kv_b form of "
                         "latent attention is not supported", f->path, an);
    if (hp->n_head_kv != 1)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s.attention.head_count_kv %d: latent attention has 1", f->path,
                         an, hp->n_head_kv);
    if (hp->n_rot >= hp->mla_k)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s.rope.dimension_count %d must be below key_length_mla %d",
                         f->path, an, hp->n_rot, hp->mla_k);
    if (hp->head_dim != hp->kv_lora + hp->n_rot || hp->head_dim_v != hp->kv_lora)
        return pk_errorf(err, PK_ERR_FORMAT,
                         "%s: %s.attention.key_length %d / value_length %d must be kv_lora_rank + rope dims %d / "
                         "kv_lora_rank %d (the latent cache's rows)", f->path, an, hp->head_dim, hp->head_dim_v,
                         hp->kv_lora + hp->n_rot, hp->kv_lora);
    return PK_OK;
}

/* Granite's multipliers: embedding_scale and residual_scale (0 or absent:
 * none), attention.scale (0 or absent: 1/sqrt(head_dim)), logit_scale
 * (required); rope.scaling.finetuned false means no rope, refused. */
static int load_scales(pk_model *m, const char *an, pk_error *err) {
    const gguf_file *f = m->gguf;
    pk_hparams *hp = &m->hp;
    char key[128];
    int rc, rope = 1;
    snprintf(key, sizeof key, "%s.logit_scale", an);
    if (!gguf_find_kv(f, key))
        return pk_errorf(err, PK_ERR_FORMAT, "%s: missing required key '%s'", f->path, key);
    float emb = 0.0f, res = 0.0f;
    if ((rc = get_hpf(f, an, "logit_scale", 1e-6f, 1e6f, &hp->logit_scale, err)) ||
        (rc = get_hpf(f, an, "embedding_scale", 0.0f, 1e6f, &emb, err)) ||
        (rc = get_hpf(f, an, "residual_scale", 0.0f, 1e6f, &res, err)) ||
        (rc = get_hpf(f, an, "attention.scale", 0.0f, 1e6f, &hp->attn_scale, err)))
        return rc;
    if (emb > 0) hp->embd_scale = emb;
    if (res > 0) hp->residual_scale = res;
    snprintf(key, sizeof key, "%s.rope.scaling.finetuned", an);
    if ((rc = gguf_get_bool(f, key, 0, &rope, err))) return rc;
    if (!rope)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: key '%s' = false (attention without rope) is not supported",
                         f->path, key);
    return PK_OK;
}

/* The <arch>.* keys into m->hp; for hybrid architectures *linear receives
 * the layer pattern (else it stays NULL). */
static int load_hparams(pk_model *m, const char *an, uint8_t **linear, pk_error *err) {
    const gguf_file *f = m->gguf;
    pk_hparams *hp = &m->hp;
    const int BIG = 1 << 20;
    int rc;
    hp->n_ctx_train = 4096;
    hp->rope_base = 10000.0f;
    hp->rms_eps = 1e-6f;
    if ((rc = get_hp(f, an, "context_length", 0, 1, 1 << 24, &hp->n_ctx_train, err)) ||
        (rc = get_hp(f, an, "embedding_length", 1, 1, BIG, &hp->n_embd, err)) ||
        (rc = get_hp(f, an, "block_count", 1, 1, 4096, &hp->n_layer, err)) ||
        (rc = get_hp(f, an, "attention.head_count", 1, 1, 4096, &hp->n_head, err)))
        return rc;
    if ((rc = get_hp(f, an, "nextn_predict_layers", 0, 0, hp->n_layer - 1, &hp->n_nextn, err))) return rc;
    hp->n_layer -= hp->n_nextn;
    if (!(hp->n_head_kv_l = pk_calloc((size_t)hp->n_layer, sizeof *hp->n_head_kv_l)))
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", f->path);
    if ((rc = get_hp_layers(f, an, "attention.head_count_kv", 0, 1, 4096, hp->n_head, hp->n_head_kv_l, hp->n_layer,
                            err)))
        return rc;
    hp->n_head_kv = hp->n_head_kv_l[0];
    for (int il = 0; il < hp->n_layer; il++)
        if (hp->n_head % hp->n_head_kv_l[il])
            return pk_errorf(err, PK_ERR_FORMAT,
                             "%s: %s.attention.head_count %d is not a multiple of head_count_kv %d (layer %d)",
                             f->path, an, hp->n_head, hp->n_head_kv_l[il], il);
    hp->head_dim = hp->n_embd / hp->n_head;
    if ((rc = get_hp(f, an, "attention.key_length", 0, 1, 65536, &hp->head_dim, err))) return rc;
    hp->head_dim_v = hp->head_dim;
    if ((rc = get_hp(f, an, "attention.value_length", 0, 1, 65536, &hp->head_dim_v, err))) return rc;
    hp->n_rot = hp->head_dim;
    if ((rc = get_hp(f, an, "rope.dimension_count", 0, 2, 65536, &hp->n_rot, err))) return rc;
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: %s.rope.dimension_count %d must be even and <= head dim %d",
                         f->path, an, hp->n_rot, hp->head_dim);
    if ((rc = get_hpf(f, an, "rope.freq_base", 1e-3f, 1e12f, &hp->rope_base, err)) ||
        (rc = get_hpf(f, an, "attention.layer_norm_rms_epsilon", 0.0f, 1.0f, &hp->rms_eps, err)) ||
        (rc = get_hpf(f, an, "final_logit_softcapping", 0.0f, 1e6f, &hp->softcap, err)))
        return rc;
    hp->embd_scale = m->arch->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    if ((rc = load_rope_scaling(m, an, err))) return rc;
    char key[128];
    /* expert_count: one value, or one per layer (a pruned file) */
    if (!(hp->n_expert_l = pk_calloc((size_t)hp->n_layer, sizeof *hp->n_expert_l)))
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", f->path);
    if ((rc = get_hp(f, an, "feed_forward_length", 0, 0, BIG, &hp->n_ff, err)) ||
        (rc = get_hp_layers(f, an, "expert_count", 0, 0, 65536, 0, hp->n_expert_l, hp->n_layer, err)) ||
        (rc = get_hp(f, an, "expert_used_count", 0, 0, 65536, &hp->n_expert_used, err)))
        return rc;
    int n_expert_min = hp->n_expert_l[0];
    for (int il = 0; il < hp->n_layer; il++) {
        if (hp->n_expert_l[il] > hp->n_expert) hp->n_expert = hp->n_expert_l[il];
        if (hp->n_expert_l[il] < n_expert_min) n_expert_min = hp->n_expert_l[il];
    }
    const pk_arch *a = m->arch;
    hp->moe = a->ffn == PK_FFN_MOE || a->ffn == PK_FFN_DENSE_MOE || (a->ffn == PK_FFN_EITHER && hp->n_expert > 0);
    if (a->ffn == PK_FFN_DENSE_MOE && hp->n_ff < 1)
        return pk_errorf(err, PK_ERR_FORMAT, "%s: missing required key '%s.feed_forward_length'", f->path, an);
    hp->gating = a->gating;
    hp->norm_topk = a->norm_topk;
    if (hp->moe) {
        if (hp->n_expert < 1 || hp->n_expert_used < 1 || hp->n_expert_used > hp->n_expert)
            return pk_errorf(err, PK_ERR_FORMAT,
                             "%s: %s.expert_used_count %d must be in 1..expert_count (%d)", f->path,
                             an, hp->n_expert_used, hp->n_expert);
        if (hp->n_expert_used > 64)
            return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: %s.expert_used_count %d: at most 64 supported",
                             f->path, an, hp->n_expert_used);
        hp->n_ff_exp = hp->n_ff;
        int n_shared = 0;
        hp->w_scale = 1.0f;
        if ((rc = get_hp(f, an, "expert_feed_forward_length", 0, 1, BIG, &hp->n_ff_exp, err)) ||
            (rc = get_hp(f, an, "expert_shared_feed_forward_length", 0, 0, BIG, &hp->n_ff_shexp, err)) ||
            (rc = get_hp(f, an, "expert_shared_count", 0, 0, 64, &n_shared, err)) ||
            (rc = get_hp(f, an, "leading_dense_block_count", 0, 0, hp->n_layer, &hp->n_dense_lead, err)) ||
            (rc = get_hpf(f, an, "expert_weights_scale", 0.0f, 1e6f, &hp->w_scale, err)) ||
            (rc = get_hp(f, an, "expert_group_count", 0, 0, 65536, &hp->n_group, err)) ||
            (rc = get_hp(f, an, "expert_group_used_count", 0, 0, 65536, &hp->n_group_used, err)))
            return rc;
        /* groups of experts: at least 2 each (a group scores by its two
           best), some but not all used, holding the top-k */
        if (hp->n_group > 1 &&
            (hp->n_expert % hp->n_group || hp->n_expert / hp->n_group < 2 || hp->n_group_used < 1 ||
             hp->n_group_used >= hp->n_group || hp->n_expert_used > hp->n_group_used * (hp->n_expert / hp->n_group)))
            return pk_errorf(err, PK_ERR_FORMAT,
                             "%s: %s.expert_group_count %d / expert_group_used_count %d do not fit %d experts, top-%d",
                             f->path, an, hp->n_group, hp->n_group_used, hp->n_expert, hp->n_expert_used);
        if (hp->n_group <= 1) hp->n_group = hp->n_group_used = 0;
        if (hp->n_group && n_expert_min != hp->n_expert)
            return pk_errorf(err, PK_ERR_UNSUPPORTED,
                             "%s: %s.expert_count differs between layers (%d to %d) with expert groups; not supported",
                             f->path, an, n_expert_min, hp->n_expert);
        if (hp->w_scale == 0.0f) hp->w_scale = 1.0f;   /* 0: not scaled (llama.cpp) */
        if (hp->n_ff_exp < 1)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: missing required key '%s.expert_feed_forward_length'",
                             f->path, an);
        /* n shared experts: one SwiGLU n times as wide */
        if (!hp->n_ff_shexp) hp->n_ff_shexp = n_shared * hp->n_ff_exp;
        if (hp->n_dense_lead && hp->n_ff < 1)
            return pk_errorf(err, PK_ERR_FORMAT,
                             "%s: %s.leading_dense_block_count %d needs the dense width '%s.feed_forward_length'",
                             f->path, an, hp->n_dense_lead, an);
        int norm = hp->norm_topk;
        snprintf(key, sizeof key, "%s.expert_weights_norm", an);
        if ((rc = gguf_get_bool(f, key, 0, &norm, err))) return rc;
        hp->norm_topk = norm;
        int gf = 0;
        if ((rc = get_hp(f, an, "expert_gating_func", 0, 0, 3, &gf, err))) return rc;
        if (gf == 1) hp->gating = PK_GATE_SOFTMAX;
        if (gf == 2) hp->gating = PK_GATE_SIGMOID;
        if (gf == 3) hp->gating = PK_GATE_SOFTMAX_WEIGHT;
        if (a->ffn != PK_FFN_DENSE_MOE && !hp->n_dense_lead) hp->n_ff = 0;
    } else if (hp->n_ff < 1) {
        return pk_errorf(err, PK_ERR_FORMAT, "%s: missing required key '%s.feed_forward_length'",
                         f->path, an);
    }
    hp->rope_base_swa = hp->rope_base;
    if (a->swa_period) {
        /* llama.cpp's set_swa_pattern: period 0 makes every layer slide */
        hp->swa_period = a->swa_period;
        snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", an);
        const gguf_kv *pat = gguf_find_kv(f, key);
        if (pat && pat->type == GGUF_ARRAY)
            return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: key '%s': a per-layer array is not supported (a period is)",
                             f->path, key);
        if ((rc = get_hp(f, an, "attention.sliding_window", 1, 1, 1 << 24, &hp->n_swa, err)) ||
            (rc = get_hp(f, an, "attention.sliding_window_pattern", 0, 0, 4096, &hp->swa_period, err)) ||
            (rc = get_hpf(f, an, "rope.freq_base_swa", 1e-3f, 1e12f, &hp->rope_base_swa, err)))
            return rc;
    }
    if (a->swa_pattern && (rc = load_swa_hparams(m, an, err))) return rc;
    if (a->mla && (rc = load_mla_hparams(m, an, err))) return rc;
    if (hp->moe && a->shared_expert && !a->mla && hp->n_ff_shexp < 1)   /* deepseek2: from expert_shared_count */
        return pk_errorf(err, PK_ERR_FORMAT, "%s: missing required key '%s.expert_shared_feed_forward_length'",
                         f->path, an);
    hp->residual_scale = hp->logit_scale = 1.0f;   /* embd_scale: set above */
    hp->attn_scale = 0.0f;
    if (a->scales && (rc = load_scales(m, an, err))) return rc;
    if (a->hybrid) return load_hybrid_hparams(m, an, linear, err);
    return PK_OK;
}

/* ---- tensors ---------------------------------------------------------------- */

/* Bind tensor `name` into *t. Expected dims ne[0..n_dims), the rest 1. A
 * missing tensor is an error only if required. The type must be
 * computable (and F32 for PK_ROLE_F32). */
static int bind(pk_model *m, pk_tensor *t, const char *name, int required, int n_dims, const int64_t *ne,
                pk_tensor_role role, pk_error *err) {
    const gguf_tensor *g = gguf_find_tensor(m->gguf, name);
    memset(t, 0, sizeof *t);
    if (!g) {
        if (required)
            return pk_errorf(err, PK_ERR_FORMAT, "%s: missing required tensor '%s'", m->path, name);
        return PK_OK;
    }
    int64_t want[4] = {ne[0], n_dims > 1 ? ne[1] : 1, n_dims > 2 ? ne[2] : 1, 1};
    if (g->ne[0] != want[0] || g->ne[1] != want[1] || g->ne[2] != want[2] || g->ne[3] != 1)
        return pk_errorf(err, PK_ERR_FORMAT,
                         "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld, 1]",
                         m->path, name, (long long)g->ne[0], (long long)g->ne[1], (long long)g->ne[2],
                         (long long)g->ne[3], (long long)want[0], (long long)want[1], (long long)want[2]);
    const pk_type_traits *tt = pk_type_get(g->type);
    const pk_kernels *k = pk_kernels_get();
    if (!tt || !tt->to_float || tt->vec_dot_type < 0 || !k->gemv[g->type])
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which pocket cannot compute yet",
                         m->path, name, pk_type_name(g->type));
    if (role == PK_ROLE_F32 && g->type != PK_TYPE_F32)
        return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s; pocket needs F32 here", m->path,
                         name, pk_type_name(g->type));
    t->name = g->name;
    t->data = g->data;
    t->type = g->type;
    memcpy(t->ne, g->ne, sizeof t->ne);
    t->row_bytes = pk_row_size(g->type, g->ne[0]);
    return PK_OK;
}

static void tensor_name(char *nm, size_t cap, int il, const char *suffix) {
    if (il < 0) snprintf(nm, cap, "%s", suffix);
    else snprintf(nm, cap, "blk.%d.%s", il, suffix);
}

/* Append t (bound, present) to the model's list of bound tensors. */
static int record(pk_model *m, const pk_tensor *t, int il, pk_tensor_role role, pk_expert_dim experts,
                  pk_error *err) {
    if (m->n_bound == m->cap_bound) {
        const int cap = m->cap_bound ? 2 * m->cap_bound : 64;
        pk_bound *nb = realloc(m->bound, (size_t)cap * sizeof *nb);
        if (!nb) return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", m->path);
        m->bound = nb;
        m->cap_bound = cap;
    }
    m->bound[m->n_bound++] = (pk_bound){.t = t, .layer = il, .role = role, .experts = experts};
    return PK_OK;
}

int pk_bind_specs(pk_model *m, int il, const pk_tensor_spec *spec, int n, pk_error *err) {
    for (int i = 0; i < n; i++) {
        const pk_tensor_spec *s = &spec[i];
        if (!s->suffix) continue;
        char nm[128];
        tensor_name(nm, sizeof nm, il, s->suffix);
        int rc = bind(m, s->t, nm, s->required, s->n_dims, s->ne, s->role, err);
        /* the roles that count experts say which dimension does */
        PK_ASSERT(s->role != PK_ROLE_EXPERTS || s->experts == PK_EXPERT_DIM_2);
        PK_ASSERT(s->role != PK_ROLE_EXPERT_BIAS || s->experts == PK_EXPERT_DIM_1);
        if (!rc && s->t->data) rc = record(m, s->t, il, s->role, s->experts, err);
        if (rc) return rc;
    }
    return PK_OK;
}

int pk_has_tensor(const pk_model *m, int il, const char *suffix) {
    char nm[128];
    tensor_name(nm, sizeof nm, il, suffix);
    return gguf_find_tensor(m->gguf, nm) != NULL;
}

static int64_t nel(const pk_tensor *t) {
    return t->data ? t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] : 0;
}
static uint64_t nbytes(const pk_tensor *t) {
    return t->data ? t->row_bytes * (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]) : 0;
}

/* A layer: its norms, then its mixer's tensors and its FFN's, as the
 * plan's kinds bind them. */
static int bind_layer(pk_model *m, int il, pk_error *err) {
    const pk_block *b = &m->blocks[il];
    pk_layer *L = &m->layers[il];
    const int64_t D = m->hp.n_embd;
    const pk_tensor_spec pre[] = {
        {.t = &L->attn_norm, .suffix = b->norm[PK_NORM_PRE_MIXER], .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &L->post_mixer_norm, .suffix = b->norm[PK_NORM_POST_MIXER], .required = 1, .n_dims = 1, .ne = {D}},
    };
    const pk_tensor_spec post[] = {
        {.t = &L->ffn_norm, .suffix = b->norm[PK_NORM_PRE_FFN], .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &L->post_ffn_norm, .suffix = b->norm[PK_NORM_POST_FFN], .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &L->out_scale, .suffix = b->out_scale, .required = 0, .n_dims = 1, .ne = {1}},
    };
    int rc;
    if ((rc = pk_bind_specs(m, il, pre, 2, err)) || (rc = b->mixer->bind(m, il, err)) ||
        (rc = pk_bind_specs(m, il, post, 3, err)) || (rc = b->ffn->bind(m, il, err)))
        return rc;
    return PK_OK;
}

/* The MTP blocks after the n_layer blocks of the plan: loaded and checked. */
static int bind_nextn(pk_model *m, int i, pk_error *err) {
    struct pk_nextn *n = &m->nextn[i];
    const int64_t D = m->hp.n_embd, V = m->hp.n_vocab;
    const pk_tensor_spec spec[] = {
        {.t = &n->eh_proj, .suffix = "nextn.eh_proj.weight", .required = 1, .n_dims = 2, .ne = {2 * D, D}},
        {.t = &n->enorm, .suffix = "nextn.enorm.weight", .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &n->hnorm, .suffix = "nextn.hnorm.weight", .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &n->embed_tokens, .suffix = "nextn.embed_tokens.weight", .required = 0, .n_dims = 2, .ne = {D, V}},
        {.t = &n->shared_head_head, .suffix = "nextn.shared_head_head.weight", .required = 0, .n_dims = 2,
         .ne = {D, V}},
        {.t = &n->shared_head_norm, .suffix = "nextn.shared_head_norm.weight", .required = 0, .n_dims = 1,
         .ne = {D}},
    };
    return pk_bind_specs(m, m->hp.n_layer + i, spec, (int)(sizeof spec / sizeof spec[0]), err);
}

/* Count parameters and the weight bytes one decoded token reads: everything
 * but the unselected experts and the embedding table (one row is read).
 * The blocks' tensors are the list of bound tensors; a file tensor bound
 * into two fields (its entry repeats the previous one's data) counts once. */
static void count_params(pk_model *m) {
    const pk_hparams *hp = &m->hp;
    int64_t total = nel(&m->tok_embd) + nel(&m->output_norm) + nel(&m->rope_freqs);
    /* active counts the whole embedding table, as model cards do ("A3B");
       bytes counts the one row a token reads */
    int64_t active = nel(&m->tok_embd) + nel(&m->output_norm);
    uint64_t bytes = m->tok_embd.row_bytes + nbytes(&m->output_norm) + nbytes(&m->output);
    if (m->output.data != m->tok_embd.data) {
        total += nel(&m->output);
        active += nel(&m->output);
    }
    for (int i = 0; i < m->n_bound; i++) {
        const pk_bound *b = &m->bound[i];
        if (b->layer < 0 || (i > 0 && b->t->data == m->bound[i - 1].t->data)) continue;
        total += nel(b->t);
        if (b->layer >= hp->n_layer) continue;   /* MTP blocks: loaded, not read by decoding */
        const pk_ffn_shape *ff = &m->blocks[b->layer].ff;
        if (b->role == PK_ROLE_EXPERTS || b->role == PK_ROLE_EXPERT_BIAS) {
            active += nel(b->t) / ff->n_expert * ff->n_expert_used;
            bytes += nbytes(b->t) / (uint64_t)ff->n_expert * (uint64_t)ff->n_expert_used;
        } else {
            active += nel(b->t);
            bytes += nbytes(b->t);
        }
    }
    m->n_params = total;
    m->n_params_active = active;
    m->bytes_per_token = bytes;
}

pk_model_params pk_model_default_params(void) {
    pk_model_params p = {.mem = 0, .n_ctx = 0, .type_k = 0, .type_v = 0, .expert_slots = 0, .n_checkpoints = -1};
    return p;
}

/* Whose saved states are these (engine/state.c): a hash of the file's size,
 * its header (metadata, tensor names, types, shapes, offsets) and the first
 * bytes of every tensor but the routed experts' (files with one header and
 * other weights differ there; the experts' pages are not touched, as a
 * memory budget may keep them on disk). */
static uint64_t file_identity(const pk_model *m) {
    uint64_t h = pk_hash64(0, &m->gguf->size, sizeof m->gguf->size);
    h = pk_hash64(h, m->gguf->map, (size_t)m->gguf->data_offset);
    for (int i = 0; i < m->n_bound; i++) {
        const pk_tensor *t = m->bound[i].t;
        if (m->bound[i].role == PK_ROLE_EXPERTS || !t->data) continue;
        h = pk_hash64(h, t->data, t->row_bytes < 64 ? (size_t)t->row_bytes : 64);
    }
    const pk_tensor *top[] = {&m->tok_embd, &m->output, &m->output_norm};
    for (int i = 0; i < 3; i++)
        if (top[i]->data) h = pk_hash64(h, top[i]->data, top[i]->row_bytes < 64 ? (size_t)top[i]->row_bytes : 64);
    return h;
}

int pk_model_load(const char *path, pk_model **out, pk_error *err) {
    return pk_model_load_params(path, NULL, out, err);
}

int pk_model_load_params(const char *path, const pk_model_params *params, pk_model **out, pk_error *err) {
    *out = NULL;
    pk_model_params mp = params ? *params : pk_model_default_params();
    pk_model *m = pk_calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        free(m);
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", path);
    }
    char *an = NULL;
    uint8_t *linear = NULL;
    int rc = gguf_open(path, &m->gguf, err);
    if (rc) goto fail;
    if ((rc = gguf_get_string(m->gguf, "general.architecture", 1, &an, err))) goto fail;
    if (!(m->arch = pk_arch_find(an))) {
        char safe[64];
        snprintf(safe, sizeof safe, "%s", an);
        rc = pk_errorf(err, PK_ERR_UNSUPPORTED,
                       "%s: general.architecture '%s' is not supported (supported: %s)", path, safe,
                       pk_arch_names());
        goto fail;
    }
    if ((rc = load_hparams(m, an, &linear, err)) || (rc = pk_blocks_plan(m, linear, err))) goto fail;

    pk_hparams *hp = &m->hp;
    const gguf_tensor *te = gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!te) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: missing required tensor 'token_embd.weight'", path);
        goto fail;
    }
    if (te->ne[1] < 1 || te->ne[1] > (1 << 24)) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: tensor 'token_embd.weight' has %lld rows (vocab), out of range",
                       path, (long long)te->ne[1]);
        goto fail;
    }
    hp->n_vocab = (int)te->ne[1];
    const int64_t D = hp->n_embd, V = hp->n_vocab;
    const pk_tensor_spec top[] = {
        {.t = &m->tok_embd, .suffix = "token_embd.weight", .required = 1, .n_dims = 2, .ne = {D, V}},
        {.t = &m->output_norm, .suffix = "output_norm.weight", .required = 1, .n_dims = 1, .ne = {D}},
        {.t = &m->output, .suffix = "output.weight", .required = 0, .n_dims = 2, .ne = {D, V}},
        {.t = &m->rope_freqs, .suffix = "rope_freqs.weight", .required = 0, .n_dims = 1, .ne = {hp->n_rot / 2}},
    };
    if ((rc = pk_bind_specs(m, -1, top, (int)(sizeof top / sizeof top[0]), err))) goto fail;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    if (!(m->layers = pk_calloc((size_t)hp->n_layer, sizeof *m->layers))) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (int il = 0; il < hp->n_layer; il++)
        if ((rc = bind_layer(m, il, err))) goto fail;
    if (hp->n_nextn && !(m->nextn = pk_calloc((size_t)hp->n_nextn, sizeof *m->nextn))) {
        rc = pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    for (int i = 0; i < hp->n_nextn; i++)
        if ((rc = bind_nextn(m, i, err))) goto fail;
    if ((rc = pk_tokenizer_load(m->gguf, &m->tok, err))) goto fail;
    if (pk_tokenizer_n_vocab(m->tok) > hp->n_vocab) {
        rc = pk_errorf(err, PK_ERR_FORMAT, "%s: tokenizer has %d tokens but token_embd.weight only %d rows",
                       path, pk_tokenizer_n_vocab(m->tok), hp->n_vocab);
        goto fail;
    }
    count_params(m);
    m->file_id = file_identity(m);
    if ((rc = pk_memplan_apply(m, &mp, err))) goto fail;
    free(an);
    free(linear);
    *out = m;
    return PK_OK;
fail:
    free(an);
    free(linear);
    pk_model_free(m);
    return rc;
}

void pk_model_free(pk_model *m) {
    if (!m) return;
    pk_tokenizer_free(m->tok);
    pk_vtrie_free(m->vtrie);
    pk_xcache_free(m->xc);
    free(m->layers);
    free(m->bound);
    free(m->blocks);
    free(m->hp.n_head_kv_l);
    free(m->hp.n_expert_l);
    free(m->hp.swa);
    free(m->nextn);
    gguf_close(m->gguf);
    free(m->path);
    free(m);
}

/* ---- public accessors --------------------------------------------------------- */

void pk_model_get_info(const pk_model *m, pk_model_info *o) {
    const pk_hparams *hp = &m->hp;
    const gguf_kv *nm = gguf_find_kv(m->gguf, "general.name");
    memset(o, 0, sizeof *o);
    o->arch = m->arch->name;
    o->name = "";
    static _Thread_local char namebuf[128];
    if (nm && nm->type == GGUF_STRING) {
        snprintf(namebuf, sizeof namebuf, "%.*s", (int)(nm->str.len > 127 ? 127 : nm->str.len),
                 nm->str.ptr);
        o->name = namebuf;
    }
    o->n_vocab = hp->n_vocab;
    o->n_ctx_train = hp->n_ctx_train;
    o->n_embd = hp->n_embd;
    o->n_layer = hp->n_layer;
    o->n_nextn = hp->n_nextn;
    o->n_head = hp->n_head;
    o->n_head_kv = hp->n_head_kv;
    o->head_dim = hp->head_dim;
    o->head_dim_v = hp->head_dim_v;
    o->n_rot = hp->n_rot;
    o->rope_base = hp->rope_base;
    o->rms_eps = hp->rms_eps;
    o->rope_style = m->arch->rope_style == PK_ROPE_NEOX ? "neox" : "norm";
    o->qk_norm = m->arch->qk_norm;   /* enum pk_qk_norm */
    o->n_layer_recurrent = hp->n_layer_rec;
    o->full_attn_interval = hp->n_layer_rec ? hp->full_attn_interval : 0;
    o->attn_gate = m->arch->attn_gate;
    o->ssm_conv = hp->ssm_conv;
    o->ssm_state = hp->ssm_state;
    o->ssm_k_heads = hp->ssm_k_heads;
    o->ssm_v_heads = hp->ssm_v_heads;
    o->n_ff = hp->n_ff;
    o->n_expert = hp->moe ? hp->n_expert : 0;
    o->n_expert_used = hp->moe ? hp->n_expert_used : 0;
    o->n_ff_exp = hp->moe ? hp->n_ff_exp : 0;
    o->n_ff_shexp = hp->n_ff_shexp;
    o->gating = hp->gating == PK_GATE_SIGMOID          ? "sigmoid"
                : hp->gating == PK_GATE_SOFTMAX_WEIGHT ? "softmax of top-k"
                                                       : "softmax";
    o->norm_topk = hp->norm_topk;
    o->tied_output = m->output.data == m->tok_embd.data;
    o->n_params = m->n_params;
    o->n_params_active = m->n_params_active;
    o->file_bytes = m->gguf->size;
    o->bytes_per_token = m->bytes_per_token;
    o->embd_scale = hp->embd_scale;
    o->residual_scale = hp->residual_scale;
    o->attn_scale = hp->attn_scale > 0        ? hp->attn_scale
                    : m->arch->attn_scale > 0 ? m->arch->attn_scale
                                              : 1.0f / sqrtf((float)hp->head_dim);
    o->logit_scale = hp->logit_scale;
    o->scales = m->arch->scales;
}

int pk_model_layer_desc(const pk_model *m, int il, char *buf, size_t cap) {
    if (il < 0 || il >= m->hp.n_layer || (!buf && cap)) return -PK_ERR_ARG;
    const pk_block *b = &m->blocks[il];
    char mix[256], ffn[256];
    b->mixer->describe(m, b, mix, sizeof mix);
    b->ffn->describe(m, b, ffn, sizeof ffn);
    const int post = b->norm[PK_NORM_POST_MIXER] || b->norm[PK_NORM_POST_FFN];
    return snprintf(buf, cap, "%s + %s%s", mix, ffn, post ? ", post norms" : "");
}

int pk_model_check_file(const pk_model *m, pk_error *err) { return gguf_check_unchanged(m->gguf, err); }

int pk_model_n_vocab(const pk_model *m) { return m->hp.n_vocab; }
int pk_model_n_tensors(const pk_model *m) { return (int)m->gguf->n_tensors; }

int pk_model_tensor(const pk_model *m, int i, const char **name, const char **type,
                    int64_t ne[4], uint64_t *nb) {
    if (i < 0 || (uint64_t)i >= m->gguf->n_tensors) return PK_ERR_ARG;
    const gguf_tensor *t = &m->gguf->tensors[i];
    *name = t->name;
    *type = pk_type_name(t->type);
    memcpy(ne, t->ne, sizeof t->ne);
    *nb = t->nbytes;
    return PK_OK;
}

int pk_model_tokenize(const pk_model *m, const char *text, size_t len, int32_t *out, int max,
                      int add_special, int parse_special) {
    return pk_tokenize(m->tok, text, len, out, max, add_special, parse_special);
}

int pk_model_token_piece(const pk_model *m, int32_t id, char *buf, int buflen) {
    return pk_token_to_piece(m->tok, id, buf, buflen, 0);
}

int pk_model_is_eog(const pk_model *m, int32_t id) { return pk_tokenizer_is_eog(m->tok, id); }
int32_t pk_model_bos(const pk_model *m) { return pk_tokenizer_bos(m->tok); }

/* The vocabulary trie is made once per model, by the first grammar, under a
 * lock shared by all models (it is taken once per grammar). */
static pthread_mutex_t vtrie_mu = PTHREAD_MUTEX_INITIALIZER;

int pk_grammar_new(const pk_model *m, const char *gbnf, const char *root, pk_grammar **out, pk_error *err) {
    if (!out) return pk_errorf(err, PK_ERR_ARG, "grammar: out is NULL");
    *out = NULL;
    if (!gbnf) return pk_errorf(err, PK_ERR_ARG, "grammar: the text is NULL");
    const pk_vtrie *v = NULL;
    if (m) {
        pthread_mutex_lock(&vtrie_mu);
        int rc = m->vtrie ? PK_OK : pk_vtrie_build(m->tok, &((pk_model *)m)->vtrie, err);
        v = m->vtrie;
        pthread_mutex_unlock(&vtrie_mu);
        if (rc) return rc;
    }
    return pk_grammar_compile(gbnf, strlen(gbnf), root, v, out, err);
}
