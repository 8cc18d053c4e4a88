/* model/arch.c - the table of supported architectures (see model/arch.h). */
#include <string.h>
#include "model/arch.h"

/* every row names its fields (the rest are zero) */
static const pk_arch archs[] = {
    {.name = "qwen3moe", .rope_style = PK_ROPE_NEOX, .qk_norm = 1, .ffn = PK_FFN_MOE, .gating = PK_GATE_SOFTMAX,
     .norm_topk = 1, .ffn_norm = "ffn_norm.weight"},
    {.name = "qwen3", .rope_style = PK_ROPE_NEOX, .qk_norm = 1, .ffn = PK_FFN_DENSE, .gating = PK_GATE_SOFTMAX,
     .ffn_norm = "ffn_norm.weight"},
    {.name = "llama", .rope_style = PK_ROPE_NORM, .ffn = PK_FFN_EITHER, .gating = PK_GATE_SOFTMAX, .norm_topk = 1,
     .ffn_norm = "ffn_norm.weight"},
    /* Qwen3.5 (POCKET-35B): Gated DeltaNet + gated attention; llama.cpp
       applies IMROPE, which for text positions is NEOX on the first n_rot dims */
    {.name = "qwen35moe", .rope_style = PK_ROPE_NEOX, .qk_norm = 1, .ffn = PK_FFN_MOE, .gating = PK_GATE_SOFTMAX,
     .norm_topk = 1, .shared_expert = 1, .hybrid = 1, .attn_gate = 1, .ffn_norm = "post_attention_norm.weight"},
    {.name = "qwen35", .rope_style = PK_ROPE_NEOX, .qk_norm = 1, .ffn = PK_FFN_DENSE, .gating = PK_GATE_SOFTMAX,
     .hybrid = 1, .attn_gate = 1, .ffn_norm = "post_attention_norm.weight"},
    /* Qwen3-Next: the same mixers with HF's head order kept (v heads grouped
       by k head, beta/alpha in one tensor) and plain NEOX partial rope */
    {.name = "qwen3next", .rope_style = PK_ROPE_NEOX, .qk_norm = 1, .ffn = PK_FFN_MOE, .gating = PK_GATE_SOFTMAX,
     .norm_topk = 1, .shared_expert = 1, .hybrid = 1, .attn_gate = 1, .ffn_norm = "post_attention_norm.weight",
     .ssm_ba = 1, .ssm_grouped = 1},
    /* gpt-oss: sliding-window (even layers) / full attention with sinks and
       biases, YaRN; biased router (softmax over the chosen logits) and
       biased experts with the clamped SwiGLU-OAI (limit 7, alpha 1.702) */
    {.name = "gpt-oss", .rope_style = PK_ROPE_NEOX, .ffn = PK_FFN_MOE, .gating = PK_GATE_SOFTMAX_WEIGHT,
     .ffn_norm = "post_attention_norm.weight", .swa_period = 2, .attn_sinks = 1, .attn_bias = PK_BIAS_REQUIRED,
     .expert_bias = 1, .swiglu_limit = 7.0f, .swiglu_alpha = 1.702f},
    /* Gemma-4 (26B-A4B layout): sliding and global layers, dense GeGLU MLP +
       routed experts, attention scale 1, V normed without weight */
    {.name = "gemma4", .rope_style = PK_ROPE_NEOX, .qk_norm = 1, .ffn = PK_FFN_DENSE_MOE, .gating = PK_GATE_SOFTMAX, .norm_topk = 1,
     .ffn_norm = "ffn_norm.weight", .post_norm = {"post_attention_norm.weight", "post_ffw_norm.weight"},
     .swa_pattern = 1, .attn_scale = 1.0f, .v_norm = 1, .v_from_k = 1, .embd_scale = 1, .act = PK_ACT_GELU,
     .layer_scale = "layer_output_scale.weight"},
    /* DeepSeek-V2/V3, Kimi, Moonlight: latent attention (GPT-J rope on its
       rope dims), leading dense layers, routed + shared experts; gating and
       renormalisation from the keys (absent: softmax, no renormalisation) */
    {.name = "deepseek2", .rope_style = PK_ROPE_NORM, .ffn = PK_FFN_MOE, .gating = PK_GATE_SOFTMAX,
     .shared_expert = 1, .ffn_norm = "ffn_norm.weight", .mla = 1},
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
