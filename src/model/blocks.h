/* model/blocks.h - the per-layer block plan: what each layer of a loaded model
 * computes, and the method tables of the mixer and FFN kinds.
 *
 * Every layer is two residual blocks,
 *   x += post_mixer_norm(mixer(pre_mixer_norm(x)))
 *   x += post_ffn_norm(ffn(pre_ffn_norm(x)))      (a post norm only if named)
 * and the plan says, per layer (pk_block, computed at load by model/blocks.c from
 * the architecture's descriptor and the GGUF's keys): the mixer's kind and
 * shape (attention: heads, head sizes, rope, gate, ...; Gated DeltaNet:
 * heads, state, conv), the FFN's kind and shape (dense, routed experts,
 * routed + shared experts), the norms' tensor names.
 *
 * A kind is a method table, as Redis puts epoll and kqueue behind one aeApi
 * interface:
 *   bind      bind and shape-check the layer's tensors (a table of
 *             pk_tensor_spec: suffix, required, shape, role; model/model.h;
 *             what is bound joins the model's list of bound tensors)
 *   memory    what it keeps per sequence: nothing, a KV cache, or a fixed
 *             state (engine/kv.h), and its size
 *   scratch   what one forward over a batch needs of a context: working
 *             memory (an arena shared by all kinds: the mixer and the FFN
 *             of a layer are never live at once), activation slots, matvec
 *             job lists (engine/context.h)
 *   forward   c->xb2 rows = block(c->xb rows) for the batch
 *   describe  a short text for `pocket info`
 * The forward pass (engine/forward.c) walks the plan and calls the methods; it
 * never looks at the architecture. A new architecture is one descriptor
 * row (model/arch.c) plus, at most, a new kind here (MLA would be a mixer kind
 * whose memory is its latent cache).
 */
#ifndef PK_BLOCKS_H
#define PK_BLOCKS_H

#include <stddef.h>
#include "pocket.h"

struct pk_block;
struct pk_layer;
struct pk_scratch;
struct pk_kv_need;

typedef struct pk_block_kind {
    const char *name;   /* "attention", "deltanet", "dense", "moe", ... */
    /* bind and shape-check the tensors of layer il (m->blocks[il] is its
       plan, m->layers[il] receives them); an error names the tensor */
    int (*bind)(pk_model *m, int il, pk_error *err);
    /* the sequence memory the kind keeps for layer b (NULL: none) */
    void (*memory)(const pk_model *m, const struct pk_block *b, struct pk_kv_need *out);
    /* raise *s to what a forward of b over c->n_batch tokens needs (c's
       model, batch size and KV cache are set; its buffers are not) */
    void (*scratch)(const pk_context *c, const struct pk_block *b, struct pk_scratch *s);
    /* c->xb2 rows = the block of c->xb rows, c->cur_batch tokens at
       positions c->pos...; PK_OK, PK_ERR_NOMEM (thread scratch) or
       PK_ERR_IO (expert read, message in c->io_msg) */
    int (*forward)(pk_context *c, const struct pk_block *b, const struct pk_layer *L, int il);
    /* "name(shape)" into buf (snprintf's contract) */
    int (*describe)(const pk_model *m, const struct pk_block *b, char *buf, size_t cap);
} pk_block_kind;

/* The kinds (engine/kinds/attention.c, engine/kinds/deltanet.c, engine/kinds/ffn.c, engine/kinds/moe.c). */
extern const pk_block_kind pk_mixer_attention, pk_mixer_deltanet, pk_mixer_mla;
extern const pk_block_kind pk_ffn_dense, pk_ffn_moe, pk_ffn_moe_shared;
extern const pk_block_kind pk_ffn_dense_moe;   /* engine/kinds/ffn_dense_moe.c */

/* The dense and routed FFNs as parts of another kind (engine/kinds/ffn_dense_moe.c):
 * c->xb2 rows = the FFN of c->xb rows, with its working memory at arena
 * (bytes: what *_bytes says for the plan's shape b->ff). The moe router
 * reads router_in rows (D floats each; NULL: c->xb); each expert's output
 * is multiplied by down_exps_scale[e] where the layer has that tensor. */
size_t pk_ffn_dense_bytes(const pk_context *c, const struct pk_block *b);
int pk_ffn_dense_run(pk_context *c, const struct pk_block *b, const struct pk_layer *L, void *arena);
size_t pk_ffn_moe_bytes(const pk_context *c, const struct pk_block *b);
int pk_ffn_moe_run(pk_context *c, const struct pk_block *b, const struct pk_layer *L, int il, void *arena,
                   const float *router_in);

/* Rope scaling (<arch>.rope.scaling.*, as ggml's rope_yarn computes it):
 * with theta_ext = pos * base^(-2i/n_rot) / freqs_i and theta_int =
 * freq_scale * theta_ext,
 *   theta_i = theta_int (1 - r_i) + theta_ext r_i,  r_i = ext_factor *
 *             (1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1))
 * (lo, hi: YaRN's correction dims from n_ctx_orig, beta_fast, beta_slow:
 * floor / ceil of n_rot ln(n_ctx_orig / (2 pi beta)) / (2 ln base), clamped
 * to [0, n_rot - 1]); cos and sin are multiplied by attn_factor, and by
 * 1 + 0.1 ln(1 / freq_scale) when ext_factor != 0. None: freq_scale 1,
 * ext_factor 0, attn_factor 1; linear: ext_factor 0; YaRN: ext_factor 1. */
typedef struct pk_rope_scaling {
    float freq_scale;              /* 1 / rope.scaling.factor */
    float ext_factor;              /* YaRN's extrapolation mix (0: none) */
    float attn_factor;             /* magnitude of cos/sin (before YaRN's own) */
    float beta_fast, beta_slow;    /* YaRN's ramp, in rotations (32, 1) */
    int n_ctx_orig;                /* YaRN's original context length */
} pk_rope_scaling;

/* A rope table: cos/sin of pos * theta_i, theta_i = base^(-2i/n_rot) /
 * freqs_i (scaled as above), per position of a context (engine/context.c);
 * attention layers that share n_rot, base, freqs and scaling share one. */
enum { PK_MAX_ROPE = 4 };
typedef struct pk_rope {
    int n_rot;                     /* rotated dims per head */
    float base;
    const struct pk_tensor *freqs; /* optional (n_rot / 2) frequency divisors (NULL: none) */
    pk_rope_scaling scaling;
} pk_rope;

/* Attention: heads, sizes, rope, sliding window, sinks, biases. */
typedef struct pk_attn_shape {
    int n_head, n_head_kv;    /* query heads; key/value heads (groups of n_head / n_head_kv) */
    int head_dim, head_dim_v; /* key (= query) and value head sizes */
    int n_rot;                /* the first n_rot dims of each q/k head are rotated */
    int rope_style;           /* enum pk_rope_style (model/arch.h) */
    float rope_base;
    int rope;                 /* its table: m->rope[rope] */
    float scale;              /* score scale: 1/sqrt(head_dim), the arch's, or the file's
                                 attention.scale */
    int qk_norm;              /* RMSNorm of q and k (attn_q_norm, attn_k_norm): enum
                                 pk_qk_norm (model/arch.h), per head or over the full width */
    int out_gate;             /* attn_q holds [q_h | gate_h] per head; output *= sigmoid(gate) */
    int bias;                 /* attn_q/k/v.bias: 1 required, 0 added where the file has them */
    int out_bias;             /* attn_output.bias: 1 required, 0 added where the file has it */
    int window;               /* sliding window: a query at i sees keys j > i - window;
                                 0: every earlier position */
    int sinks;                /* per-head learned sink logit (attn_sinks): one more
                                 term exp(sink_h) in each softmax denominator */
    int v_norm;               /* V RMS-normed per head without weight (before the cache) */
    int v_from_k;             /* no attn_v: V is K's projection (before k norm and rope) */
} pk_attn_shape;

/* Gated DeltaNet (engine/kinds/deltanet.c): r = v_heads / k_heads v heads per q/k head;
 * v head j reads q/k head (j / vk_div) % k_heads (1: tiled, r: grouped);
 * its beta sits at (j / r) * ba_group + j % r of the 2 v_heads beta|alpha
 * projection rows, its alpha alpha_off further. */
typedef struct pk_ssm_shape {
    int conv;                 /* conv taps */
    int state;                /* head dim of q/k and v */
    int k_heads, v_heads;
    int channels;             /* conv channels: 2 k_heads state + v_heads state */
    int ba;                   /* beta|alpha in one ssm_ba tensor (else ssm_beta, ssm_alpha) */
    int vk_div, ba_group, alpha_off;
} pk_ssm_shape;

/* Multi-head latent attention (engine/kinds/mla.c): per head q = [q_nope | q_pe]; one
 * latent c (r) and one k_pe (n_rot) per token, shared by all heads, cached
 * as one row [c | k_pe]; attn_k_b maps q_nope into latent space, attn_v_b
 * the attended latent to the head's value. */
typedef struct pk_mla_shape {
    int n_head;
    int nope, n_rot;          /* per-head q/k dims: not rotated, rotated (nope + n_rot = k) */
    int kv_lora;              /* r, the latent width */
    int head_dim_v;           /* value dims per head */
    int q_lora;               /* q LoRA rank (0: attn_q direct) */
    int rope_style;           /* enum pk_rope_style (model/arch.h) */
    int rope;                 /* its table: m->rope[rope] */
    float scale;              /* score scale: mscale^2 / sqrt(nope + n_rot) */
} pk_mla_shape;

/* The FFN. */
typedef struct pk_ffn_shape {
    int n_ff;                    /* dense hidden size, or one routed expert's */
    int n_expert, n_expert_used; /* routed experts */
    int n_ff_shexp;              /* shared expert hidden size */
    int gating;                  /* enum pk_gating (model/arch.h) */
    int norm_topk;               /* renormalise the top-k weights to sum 1 */
    int act;                     /* enum pk_act (model/arch.h): silu or gelu of the gate */
    int n_ff_dense;              /* dense + moe: the dense MLP's hidden size */
    int bias;                    /* router and expert biases (ffn_gate_inp.bias,
                                    ffn_{gate,up,down}_exps.bias) */
    float swiglu_limit;          /* > 0: SwiGLU-OAI, g = min(g, limit), u = clamp(u,
                                    +-limit), h = g sigmoid(alpha g) (u + 1) */
    float swiglu_alpha;
    float w_scale;               /* then times this (1: none) */
    int n_group, n_group_used;   /* group-limited routing: the experts in n_group
                                    groups; only the n_group_used groups of the
                                    largest top-2 selection scores are chosen from
                                    (0: none) */
    int shexp_gate;              /* enum pk_shexp_gate (model/arch.h): the shared expert's gate */
} pk_ffn_shape;

enum { PK_NORM_PRE_MIXER, PK_NORM_POST_MIXER, PK_NORM_PRE_FFN, PK_NORM_POST_FFN, PK_NORMS };

/* One layer's plan. */
typedef struct pk_block {
    const pk_block_kind *mixer, *ffn;
    pk_attn_shape attn;          /* attention mixers */
    pk_ssm_shape ssm;            /* DeltaNet mixers */
    pk_mla_shape mla;            /* latent attention mixers */
    pk_ffn_shape ff;
    const char *norm[PK_NORMS];  /* tensor suffixes ("attn_norm.weight"), NULL: no such norm */
    const char *out_scale;       /* optional (1) tensor: x *= it after the layer; NULL: none */
} pk_block;

/* Make the plan of every layer of m (m->blocks, m->rope) from its
 * descriptor and hyperparameters; linear[il] != 0 marks the layers of a
 * hybrid architecture that use its linear (DeltaNet) mixer. */
int pk_blocks_plan(pk_model *m, const unsigned char *linear, pk_error *err);

#endif
