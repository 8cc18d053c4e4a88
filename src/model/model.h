/* model/model.h - a loaded model: hyperparameters, weight views into the mapped
 * GGUF file, and the tokenizer. Read-only after load, so any number of
 * contexts (sequences) can share one model.
 */
#ifndef PK_MODEL_H
#define PK_MODEL_H

#include <stdint.h>
#include "model/arch.h"
#include "model/blocks.h"
#include "gguf/gguf.h"
#include "text/tokenizer.h"

/* A weight tensor: a view into the mapping. A matrix has ne[0] columns (the
 * input size) and ne[1] rows (the output size); expert tensors stack ne[2]
 * such matrices. data == NULL means absent (optional tensor). */
typedef struct pk_tensor {
    const char *name;
    const void *data;
    int type;            /* enum pk_type */
    int64_t ne[4];
    size_t row_bytes;    /* bytes of one row of ne[0] elements */
} pk_tensor;

/* What a bound tensor is to the parameter count (count_params), the byte
 * ledger (bytes_per_token) and the memory plan (engine/memplan.c). */
typedef enum pk_tensor_role {
    PK_ROLE_WEIGHT = 0,  /* read whole by every token (any type pk_matvec computes); resident */
    PK_ROLE_F32,         /* the same, but read directly as F32 (not through pk_matvec): no
                            other type will do */
    PK_ROLE_EXPERTS,     /* routed experts, ne[2] = n_expert matrices: a token reads
                            n_expert_used of them; under a budget from the expert cache,
                            never resident */
    PK_ROLE_EXPERT_BIAS, /* per-expert vectors, ne[1] = n_expert: a token reads n_expert_used
                            of them; resident */
} pk_tensor_role;

/* Which dimension of a tensor counts its layer's routed experts (what
 * expert pruning, offline/prune.c, cuts along): none; ne[0] (one value per
 * expert: router bias, selection bias, output scales); ne[1] (the router's
 * rows, per-expert bias vectors); ne[2] (the stacked expert matrices). */
typedef enum pk_expert_dim {
    PK_EXPERT_DIM_NONE = 0,
    PK_EXPERT_DIM_0,
    PK_EXPERT_DIM_1,
    PK_EXPERT_DIM_2,
} pk_expert_dim;

/* One entry of the model's list of bound tensors: the field bound, its
 * block (-1: the model's own tensors, n_layer + i: MTP block i), its role
 * and its expert dimension. A file tensor bound into two fields (a merged
 * ffn_gate_up_exps as gate_exps and up_exps) has two entries, one after the
 * other. */
typedef struct pk_bound {
    const pk_tensor *t;
    int layer;
    pk_tensor_role role;
    pk_expert_dim experts;
} pk_bound;

/* The file's hyperparameters (its <arch>.* keys): one value for all
 * layers. What each layer computes is its block plan (model/blocks.h), made from
 * these; the forward pass reads the plan. */
typedef struct pk_hparams {
    int n_vocab;
    int n_ctx_train;
    int n_embd;          /* hidden size D */
    int n_layer;         /* blocks of the forward pass */
    int n_nextn;         /* MTP blocks after them (<arch>.nextn_predict_layers) */
    int n_head, n_head_kv;
    int head_dim;        /* key (= query) head size */
    int head_dim_v;      /* value head size */
    int n_rot;           /* rotated dims per head */
    float rope_base;
    pk_rope_scaling rope_scaling; /* rope.scaling.* (model/blocks.h) */
    float rms_eps;
    int n_ff;            /* dense FFN size */
    int n_expert, n_expert_used; /* n_expert: the most any layer has */
    int *n_expert_l;     /* [n_layer] routed experts per layer (expert_count may be an array:
                            a file pruned to other counts per layer, pocket prune) */
    int n_ff_exp;        /* expert FFN size */
    int n_ff_shexp;      /* shared expert FFN size (0: none) */
    int moe;             /* layers use routed experts */
    int norm_topk;       /* renormalise the top-k router weights */
    int gating;          /* enum pk_gating */
    /* sliding-window attention (arch swa_period) */
    int n_swa;           /* window W in positions (attention.sliding_window) */
    int swa_period;      /* layer l slides iff l % period < period - 1 */
    float rope_base_swa; /* rope base of the sliding layers (rope.freq_base_swa) */
    /* multipliers (arch scales: Granite's keys; 1 otherwise; embd_scale
       below takes <arch>.embedding_scale) */
    float residual_scale;/* each block's output *= (<arch>.residual_scale) before the residual add */
    float attn_scale;    /* attention score scale (<arch>.attention.scale); 0: 1/sqrt(head_dim) */
    float logit_scale;   /* logits /= (<arch>.logit_scale) */
    /* hybrid (Gated DeltaNet) architectures */
    int full_attn_interval; /* layer il is full attention iff (il + 1) % interval == 0
                               (unless <arch>.attention.recurrent_layers says) */
    int n_layer_rec;     /* DeltaNet layers */
    int ssm_conv;        /* conv taps (ssm.conv_kernel) */
    int ssm_state;       /* head dim of q/k and v (ssm.state_size) */
    int ssm_k_heads;     /* q/k heads (ssm.group_count) */
    int ssm_v_heads;     /* v heads (ssm.time_step_rank) */
    int ssm_channels;    /* conv channels: 2 * k_heads * state + v_heads * state */
    int *n_head_kv_l;    /* [n_layer] kv heads per layer (head_count_kv may be an array;
                            n_head_kv is layer 0's) */
    float softcap;       /* final logits c tanh(logit / c) (final_logit_softcapping), 0: none */
    float embd_scale;    /* token embeddings times this (1, or sqrtf(D): arch embd_scale) */
    /* sliding-window layers (arch swa_pattern) */
    uint8_t *swa;        /* [n_layer] 1: sliding (attention.sliding_window_pattern: arch
                            swa_pattern; window n_swa, rope base rope_base_swa), or NULL */
    int head_dim_swa, head_dim_v_swa, n_rot_swa; /* key_length_swa, value_length_swa,
                                                    rope.dimension_count_swa */
    /* routing details (any MoE architecture) */
    int n_dense_lead;    /* the first layers use the dense FFN (leading_dense_block_count) */
    float w_scale;       /* routed weights times this (expert_weights_scale; 1: none) */
    int n_group, n_group_used; /* group-limited routing (expert_group_count / _used_count; 0: none) */
    /* multi-head latent attention (arch mla) */
    int q_lora;          /* q LoRA rank (attention.q_lora_rank; 0: attn_q direct) */
    int kv_lora;         /* latent width r (attention.kv_lora_rank) */
    int mla_k, mla_v;    /* per-head q/k dim (nope + rope) and value dim (key/value_length_mla) */
    float yarn_log_mul;  /* mscale_all_dim (rope.scaling.yarn_log_multiplier / 0.1; 0: none) */
} pk_hparams;

/* A layer's tensors by name. The block kinds bind the fields they use
 * (model/blocks.h); the rest stay absent. What was bound is also recorded
 * in the model's list (pk_model.bound), which the parameter count, the byte
 * ledger and the memory plan walk. */
typedef struct pk_layer {
    pk_tensor attn_norm;                 /* (D) pre-mixer norm */
    pk_tensor post_mixer_norm;           /* (D) optional norm of the mixer's output */
    pk_tensor post_ffn_norm;             /* (D) optional norm of the FFN's output */
    pk_tensor wq, wk, wv;                /* (D -> n_head*hd), (D -> n_head_kv*hd), (D -> n_head_kv*hd_v) */
    pk_tensor bq, bk, bv;                /* optional biases */
    pk_tensor wo;                        /* (n_head*hd_v -> D) */
    pk_tensor q_norm, k_norm;            /* (hd), qk_norm archs */
    pk_tensor ffn_norm;                  /* (D) pre-FFN norm */
    pk_tensor ffn_gate, ffn_up, ffn_down;/* dense: (D -> F), (D -> F), (F -> D) */
    pk_tensor gate_inp;                  /* router: (D -> n_expert) */
    pk_tensor gate_exps, up_exps;        /* (D -> F_exp) x n_expert; or both the merged
                                            ffn_gate_up_exps (D -> 2 F_exp) x n_expert:
                                            per expert the gate rows, then the up rows */
    pk_tensor down_exps;                 /* (F_exp -> D) x n_expert */
    /* dense + moe FFN (engine/kinds/ffn_dense_moe.c) */
    pk_tensor gate_inp_scale;            /* (D) router input scale (ffn_gate_inp.scale) */
    pk_tensor down_exps_scale;           /* (n_expert) per-expert output scale */
    pk_tensor post_ffn_norm_1;           /* (D) norm of the dense MLP's output */
    pk_tensor pre_ffn_norm_2;            /* (D) norm of the experts' input */
    pk_tensor post_ffn_norm_2;           /* (D) norm of the experts' weighted sum */
    pk_tensor out_scale;                 /* (1) optional: x *= it after the layer (plan out_scale) */
    pk_tensor gate_shexp, up_shexp, down_shexp; /* shared expert */
    pk_tensor gate_inp_shexp;            /* (D) shared expert gate, optional */
    pk_tensor bo;                        /* (D) attn_output.bias, optional */
    pk_tensor attn_sinks;                /* (n_head) sink logits, F32 (attention sinks) */
    pk_tensor gate_inp_b;                /* (n_expert) router bias (expert_bias archs) */
    pk_tensor gate_exps_b, up_exps_b;    /* (F_exp) x n_expert expert biases */
    pk_tensor down_exps_b;               /* (D) x n_expert */
    pk_tensor exp_probs_b;               /* (n_expert) selection-only router bias, optional */
    /* multi-head latent attention (engine/kinds/mla.c; wq and wo above are attn_q / attn_output) */
    pk_tensor wq_a, q_a_norm, wq_b;      /* q LoRA: (D -> q_lora), (q_lora), (q_lora -> n_head*k) */
    pk_tensor wkv_a;                     /* (D -> r + rope): latent c | shared k_pe */
    pk_tensor kv_a_norm;                 /* (r) */
    pk_tensor wk_b;                      /* (nope -> r) x n_head: q_nope into latent space */
    pk_tensor wv_b;                      /* (r -> v) x n_head: latent to value */
    /* Gated DeltaNet layers (hybrid archs) */
    pk_tensor attn_qkv;                  /* (D -> channels): q | k | v */
    pk_tensor attn_z;                    /* attn_gate: (D -> v_heads * state), output gate z */
    pk_tensor ssm_conv1d;                /* (conv taps) x channels, F32 */
    pk_tensor ssm_dt;                    /* (v_heads) dt bias, F32 */
    pk_tensor ssm_a;                     /* (v_heads) -exp(A_log), F32 */
    pk_tensor ssm_beta, ssm_alpha;       /* (D -> v_heads) */
    pk_tensor ssm_ba;                    /* arch ssm_ba: (D -> 2 v_heads) instead of both */
    pk_tensor ssm_norm;                  /* (state) gated RMSNorm weight, F32 */
    pk_tensor ssm_out;                   /* (v_heads * state -> D) */
} pk_layer;

struct pk_model {
    char *path;
    gguf_file *gguf;
    uint64_t file_id;                    /* hash of the file's header and size: whose
                                            saved states are these (engine/state.c) */
    const pk_arch *arch;
    pk_hparams hp;
    pk_tensor tok_embd;                  /* (D) x n_vocab rows */
    pk_tensor output_norm;               /* (D) */
    pk_tensor output;                    /* (D -> n_vocab); tok_embd if tied */
    pk_tensor rope_freqs;                /* optional (n_rot/2) frequency divisors */
    /* MTP (next-token prediction) layers: the last n_nextn blocks of the
       file; loaded and checked, not used by plain decoding */
    struct pk_nextn {
        pk_tensor eh_proj;               /* (2D -> D) */
        pk_tensor enorm, hnorm;          /* (D) */
        pk_tensor embed_tokens, shared_head_head, shared_head_norm; /* optional */
    } *nextn;
    pk_layer *layers;                    /* [n_layer] tensors */
    pk_bound *bound;                     /* [n_bound] every tensor bound, in binding order */
    int n_bound, cap_bound;
    pk_block *blocks;                    /* [n_layer] the block plan (model/blocks.h) */
    pk_rope rope[PK_MAX_ROPE];           /* the rope tables the attention layers use */
    int n_rope;
    pk_tokenizer *tok;
    struct pk_vtrie *vtrie;              /* the vocabulary as a trie, made by the first
                                            grammar (pk_grammar_new) */
    int64_t n_params;                    /* all weights */
    int64_t n_params_active;             /* weights used per token */
    uint64_t bytes_per_token;            /* weight bytes read per decoded token */
    struct pk_xcache *xc;                /* routed-expert cache (memory budget), or NULL */
    pk_model_plan plan;                  /* engine/memplan.c */
};

/* A tensor a block kind binds: the pk_layer field, the name after
 * "blk.N." (or the whole name for il < 0; NULL: the layer has no such
 * tensor, skipped), whether the file must have it, its shape (n_dims dims
 * ne[0..n_dims), the rest 1), its role and which of its dimensions counts
 * the routed experts (PK_ROLE_EXPERTS: ne[2], PK_ROLE_EXPERT_BIAS: ne[1];
 * the router and per-expert scalars name theirs). */
typedef struct pk_tensor_spec {
    pk_tensor *t;
    const char *suffix;
    int required;
    int n_dims;
    int64_t ne[3];
    pk_tensor_role role;
    pk_expert_dim experts;
} pk_tensor_spec;

/* Bind the n tensors of layer il (model/model.c), in order; the first that is
 * missing (and required), misshapen or of a type pocket cannot compute is
 * the error, naming it. */
int pk_bind_specs(pk_model *m, int il, const pk_tensor_spec *spec, int n, pk_error *err);
/* Whether the file has tensor "blk.il.suffix". */
int pk_has_tensor(const pk_model *m, int il, const char *suffix);

/* engine/memplan.c: decide what stays resident under p->mem, make the expert
 * cache if needed, and give the mapping its read-ahead hints (all of it,
 * or only the resident tensors). */
int pk_memplan_apply(pk_model *m, const pk_model_params *p, pk_error *err);

#endif
