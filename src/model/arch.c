/* model/arch.c - the table of supported architectures (see model/arch.h). */
#include <string.h>
#include "model/arch.h"

/* the rows list the first fields in order and name the later ones only
   where they set them (the rest are zero) */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const pk_arch archs[] = {
    /* name       rope          qk_norm ffn            gating           norm_topk shexp hybrid attn_gate ffn_norm                     post  ssm_ba grouped */
    {"qwen3moe",  PK_ROPE_NEOX, 1,      PK_FFN_MOE,    PK_GATE_SOFTMAX, 1,        0,    0,     0,        "ffn_norm.weight",            {0}, 0,     0},
    {"qwen3",     PK_ROPE_NEOX, 1,      PK_FFN_DENSE,  PK_GATE_SOFTMAX, 0,        0,    0,     0,        "ffn_norm.weight",            {0}, 0,     0},
    {"llama",     PK_ROPE_NORM, 0,      PK_FFN_EITHER, PK_GATE_SOFTMAX, 1,        0,    0,     0,        "ffn_norm.weight",            {0}, 0,     0},
    /* Qwen3.5 (POCKET-35B): Gated DeltaNet + gated attention; llama.cpp
       applies IMROPE, which for text positions is NEOX on the first n_rot dims */
    {"qwen35moe", PK_ROPE_NEOX, 1,      PK_FFN_MOE,    PK_GATE_SOFTMAX, 1,        1,    1,     1,        "post_attention_norm.weight", {0}, 0,     0},
    {"qwen35",    PK_ROPE_NEOX, 1,      PK_FFN_DENSE,  PK_GATE_SOFTMAX, 0,        0,    1,     1,        "post_attention_norm.weight", {0}, 0,     0},
    /* Qwen3-Next: the same mixers with HF's head order kept (v heads grouped
       by k head, beta/alpha in one tensor) and plain NEOX partial rope */
    {"qwen3next", PK_ROPE_NEOX, 1,      PK_FFN_MOE,    PK_GATE_SOFTMAX, 1,        1,    1,     1,        "post_attention_norm.weight", {0}, 1,     1},
    /* gpt-oss: sliding-window (even layers) / full attention with sinks and
       biases, YaRN; biased router (softmax over the chosen logits) and
       biased experts with the clamped SwiGLU-OAI (limit 7, alpha 1.702) */
    {"gpt-oss",   PK_ROPE_NEOX, 0,      PK_FFN_MOE,    PK_GATE_SOFTMAX_WEIGHT, 0, 0,    0,     0,        "post_attention_norm.weight", {0}, 0,     0,
     .swa_period = 2, .attn_sinks = 1, .attn_bias = PK_BIAS_REQUIRED, .expert_bias = 1, .swiglu_limit = 7.0f, .swiglu_alpha = 1.702f},
    /* Gemma-4 (26B-A4B layout): sliding and global layers, dense GeGLU MLP +
       routed experts, attention scale 1, V normed without weight */
    {"gemma4", PK_ROPE_NEOX, .qk_norm = 1, .ffn = PK_FFN_DENSE_MOE, .gating = PK_GATE_SOFTMAX, .norm_topk = 1,
     .ffn_norm = "ffn_norm.weight", .post_norm = {"post_attention_norm.weight", "post_ffw_norm.weight"},
     .swa_pattern = 1, .attn_scale = 1.0f, .v_norm = 1, .v_from_k = 1, .embd_scale = 1, .act = PK_ACT_GELU,
     .layer_scale = "layer_output_scale.weight"},
    /* DeepSeek-V2/V3, Kimi, Moonlight: latent attention (GPT-J rope on its
       rope dims), leading dense layers, routed + shared experts; gating and
       renormalisation from the keys (absent: softmax, no renormalisation) */
    {"deepseek2", PK_ROPE_NORM, 0,      PK_FFN_MOE,    PK_GATE_SOFTMAX, 0,        1,    0,     0,        "ffn_norm.weight",            {0}, 0,     0,
     .mla = 1},
    /* Qwen1.5-MoE / Qwen2-57B-A14B: q/k/v biases, the top-k weights as the
       softmax gave them, a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x) */
    {.name = "qwen2moe", .rope_style = PK_ROPE_NEOX, .ffn = PK_FFN_MOE, .gating = PK_GATE_SOFTMAX,
     .shared_expert = 1, .ffn_norm = "ffn_norm.weight", .attn_bias = PK_BIAS_REQUIRED_QKV,
     .shexp_gate = PK_SHEXP_GATE_REQUIRED},
    /* OLMoE: q and k RMS-normed over their whole width, no renormalisation,
       no q/k/v biases */
    {.name = "olmoe", .rope_style = PK_ROPE_NEOX, .qk_norm = PK_QK_NORM_FULL, .ffn = PK_FFN_MOE,
     .gating = PK_GATE_SOFTMAX, .ffn_norm = "ffn_norm.weight", .attn_bias = PK_BIAS_REFUSED,
     .shexp_gate = PK_SHEXP_GATE_NONE},
    /* Granite MoE: llama's blocks with Granite's multipliers; a shared expert
       (ungated) iff expert_shared_feed_forward_length > 0 */
    {.name = "granitemoe", .rope_style = PK_ROPE_NORM, .ffn = PK_FFN_MOE, .gating = PK_GATE_SOFTMAX,
     .norm_topk = 1, .ffn_norm = "ffn_norm.weight", .shexp_gate = PK_SHEXP_GATE_NONE, .scales = 1},
};

const pk_arch *pk_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(archs[i].name, name) == 0) return &archs[i];
    return NULL;
}

const char *pk_arch_names(void) {
    return "qwen3moe, qwen3, llama (dense and mixtral-style MoE), qwen35moe, qwen35, qwen3next, gpt-oss, gemma4, "
           "deepseek2, qwen2moe, olmoe, granitemoe";
}
