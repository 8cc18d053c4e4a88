/* model/arch.h - model architectures as data.
 *
 * One descriptor per GGUF architecture name says everything the loader
 * needs to know that is not in the hyperparameters: rope style, per-head
 * q/k norm, FFN kind, router gating and renormalisation, the layer pattern
 * of hybrids, norm tensor names. model/blocks.c turns a descriptor and the
 * file's keys into the per-layer block plan (model/blocks.h) that the forward
 * pass reads; nothing compares architecture names. Adding an architecture
 * that fits the flags means adding one table row.
 */
#ifndef PK_ARCH_H
#define PK_ARCH_H

enum pk_rope_style {
    PK_ROPE_NORM = 0,   /* rotate adjacent pairs (2i, 2i+1) - llama */
    PK_ROPE_NEOX = 1,   /* rotate pairs (i, i + n_rot/2) - qwen, gpt-neox */
};

enum pk_ffn_kind {
    PK_FFN_DENSE = 0,   /* ffn_gate/ffn_up/ffn_down */
    PK_FFN_MOE = 1,     /* router + ffn_*_exps */
    PK_FFN_EITHER = 2,  /* MoE iff <arch>.expert_count > 0 (llama / mixtral) */
    PK_FFN_DENSE_MOE = 3, /* a dense MLP and routed experts in every layer that has a
                             router (ffn_gate_inp), the dense MLP alone elsewhere (gemma4) */
};

enum pk_act {
    PK_ACT_SILU = 0,    /* silu(gate) * up */
    PK_ACT_GELU = 1,    /* gelu(gate) * up, as ggml's FP16 table computes it (kernels/gelu.h) */
};

/* q/k RMSNorm (attn_q_norm / attn_k_norm) */
enum pk_qk_norm {
    PK_QK_NORM_NONE = 0,
    PK_QK_NORM_HEAD = 1, /* per head: weights of head_dim - qwen3 */
    PK_QK_NORM_FULL = 2, /* over all heads of q (of k) at once: weights of
                            n_head * head_dim (n_head_kv * head_dim) - olmoe */
};

/* the shared expert's sigmoid gate ffn_gate_inp_shexp */
enum pk_shexp_gate {
    PK_SHEXP_GATE_OPTIONAL = 0, /* used where the file has it */
    PK_SHEXP_GATE_REQUIRED = 1, /* qwen2moe */
    PK_SHEXP_GATE_NONE = 2,     /* never read: an ungated shared expert (granitemoe) */
};

/* attn_q/k/v.bias and attn_output.bias */
enum pk_attn_bias {
    PK_BIAS_OPTIONAL = 0,     /* each added where the file has it */
    PK_BIAS_REQUIRED = 1,     /* q/k/v and output biases required (gpt-oss) */
    PK_BIAS_REFUSED = 2,      /* llama.cpp's graph never adds them (olmoe): a file
                                 with any of the four is refused rather than run otherwise */
    PK_BIAS_REQUIRED_QKV = 3, /* q/k/v biases required, the output bias added
                                 where the file has it (qwen2moe) */
};

enum pk_gating {
    PK_GATE_SOFTMAX = 0, /* p = softmax(router logits) */
    PK_GATE_SIGMOID = 1, /* p = sigmoid(router logits) */
    PK_GATE_SOFTMAX_WEIGHT = 2, /* top-k of the logits, weights = softmax over
                                   the k chosen logits (gpt-oss) */
};

typedef struct pk_arch {
    const char *name;        /* general.architecture */
    int rope_style;          /* enum pk_rope_style */
    int qk_norm;             /* enum pk_qk_norm: RMSNorm of q and k (attn_q_norm /
                                attn_k_norm required), per head or full width */
    int ffn;                 /* enum pk_ffn_kind */
    int gating;              /* enum pk_gating (MoE only) */
    int norm_topk;           /* renormalise the top-k weights to sum 1 (default; GGUF
                                <arch>.expert_weights_norm overrides) */
    int shared_expert;       /* ffn_*_shexp tensors (optional unless set) */
    int hybrid;              /* Gated DeltaNet layers, with full attention on every
                                <arch>.full_attention_interval-th layer */
    int attn_gate;           /* attn_q holds q and a sigmoid output gate, interleaved per head */
    const char *ffn_norm;    /* the pre-FFN norm tensor: "ffn_norm.weight" or
                                "post_attention_norm.weight" */
    const char *post_norm[2];/* norms of the mixer's and of the FFN's output
                                (NULL: none) */
    /* Gated DeltaNet layout (hybrid only) */
    int ssm_ba;              /* beta and alpha in one tensor ssm_ba, per k head
                                [beta x r | alpha x r] (r = v heads per k head);
                                else ssm_beta and ssm_alpha, one row per v head */
    int ssm_grouped;         /* v head j uses q/k head j / r (grouped order);
                                else j mod k_heads (tiled) */
    /* sliding-window attention, sinks, biases, clamped experts (gpt-oss) */
    int swa_period;          /* <arch>.attention.sliding_window (W) required; layer l
                                attends over its last W positions iff l % period <
                                period - 1 (the default period;
                                <arch>.attention.sliding_window_pattern overrides) */
    int attn_sinks;          /* attn_sinks: a learned logit per q head in every softmax */
    int attn_bias;           /* enum pk_attn_bias */
    int expert_bias;         /* ffn_gate_inp.bias, ffn_{gate,up,down}_exps.bias required */
    float swiglu_limit;      /* experts' SwiGLU-OAI: gate clamped above, up to
                                [-limit, limit] (0: plain SwiGLU) */
    float swiglu_alpha;      /* ... gate * sigmoid(alpha * gate) * (up + 1) */
    /* sliding-window layers (gemma4): layer il slides iff
       <arch>.attention.sliding_window_pattern[il]; those layers take the
       *_swa keys (head dims, rope dims and base) and no rope_freqs */
    int swa_pattern;
    float attn_scale;        /* score scale; 0: 1/sqrt(head dim) */
    int v_norm;              /* V RMS-normed per head, without weight */
    int v_from_k;            /* attn_v optional: without it V is K's projection
                                (before the k norm and rope) */
    int embd_scale;          /* token embeddings times sqrt(D) */
    int act;                 /* enum pk_act: the FFNs' gate activation */
    const char *layer_scale; /* optional (1) tensor multiplying x after the layer, NULL: none */
    int mla;                 /* multi-head latent attention (engine/kinds/mla.c): every
                                attention layer caches a compressed latent */
    int shexp_gate;          /* enum pk_shexp_gate */
    int scales;              /* Granite's multipliers from the keys <arch>.embedding_scale,
                                residual_scale, attention.scale, logit_scale (required),
                                and rope.scaling.finetuned (false: no rope; refused) */
} pk_arch;

/* The descriptor for a GGUF architecture name, NULL if unsupported. */
const pk_arch *pk_arch_find(const char *name);
/* Comma-separated list of supported names, for error messages. */
const char *pk_arch_names(void);

#endif
