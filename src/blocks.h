/* blocks.h - the per-layer block plan: what each layer of a loaded model
 * computes, and the method tables of the mixer and FFN kinds.
 *
 * Every layer is two residual blocks,
 *   x += post_mixer_norm(mixer(pre_mixer_norm(x)))
 *   x += post_ffn_norm(ffn(pre_ffn_norm(x)))      (a post norm only if named)
 * and the plan says, per layer (pk_block, computed at load by blocks.c from
 * the architecture's descriptor and the GGUF's keys): the mixer's kind and
 * shape (attention: heads, head sizes, rope, gate, ...; Gated DeltaNet:
 * heads, state, conv), the FFN's kind and shape (dense, routed experts,
 * routed + shared experts), the norms' tensor names.
 *
 * A kind is a method table, as Redis puts epoll and kqueue behind one aeApi
 * interface:
 *   bind      bind and shape-check the layer's tensors (a table of
 *             pk_tensor_spec: suffix, required, shape; model.h)
 *   memory    what it keeps per sequence: nothing, a KV cache, or a fixed
 *             state (kv.h), and its size
 *   scratch   what one forward over a batch needs of a context: working
 *             memory (an arena shared by all kinds: the mixer and the FFN
 *             of a layer are never live at once), activation slots, matvec
 *             job lists (context.h)
 *   forward   c->xb2 rows = block(c->xb rows) for the batch
 *   describe  a short text for `pocket info`
 * The forward pass (forward.c) walks the plan and calls the methods; it
 * never looks at the architecture. A new architecture is one descriptor
 * row (arch.c) plus, at most, a new kind here (MLA would be a mixer kind
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

/* The kinds (attention.c, deltanet.c, ffn.c, moe.c). */
extern const pk_block_kind pk_mixer_attention, pk_mixer_deltanet;
extern const pk_block_kind pk_ffn_dense, pk_ffn_moe, pk_ffn_moe_shared;

/* A rope table: cos/sin of pos * theta_i, theta_i = base^(-2i/n_rot) /
 * freqs_i, per position of a context (context.c); attention layers that
 * share n_rot, base and freqs share one. */
enum { PK_MAX_ROPE = 4 };
typedef struct pk_rope {
    int n_rot;                     /* rotated dims per head */
    float base;
    const struct pk_tensor *freqs; /* optional (n_rot / 2) frequency divisors */
} pk_rope;

/* Attention: heads, sizes, rope; fields no architecture sets yet (window,
 * sinks) are refused by the attention kind's bind until it computes them. */
typedef struct pk_attn_shape {
    int n_head, n_head_kv;    /* query heads; key/value heads (groups of n_head / n_head_kv) */
    int head_dim, head_dim_v; /* key (= query) and value head sizes */
    int n_rot;                /* the first n_rot dims of each q/k head are rotated */
    int rope_style;           /* enum pk_rope_style (arch.h) */
    float rope_base;
    int rope;                 /* its table: m->rope[rope] */
    float scale;              /* score scale: 1/sqrt(head_dim), or the file's attention.scale */
    int qk_norm;              /* RMSNorm of q and k (attn_q_norm, attn_k_norm): enum
                                 pk_qk_norm (arch.h), per head or over the full width */
    int out_gate;             /* attn_q holds [q_h | gate_h] per head; output *= sigmoid(gate) */
    int bias;                 /* attn_q/k/v.bias: 1 required, 0 added where the file has them */
    int window;               /* sliding window in positions, 0: every earlier position */
    int sinks;                /* per-head learned sink logit (attn_sinks) */
} pk_attn_shape;

/* Gated DeltaNet (deltanet.c): r = v_heads / k_heads v heads per q/k head;
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

/* The FFN. */
typedef struct pk_ffn_shape {
    int n_ff;                    /* dense hidden size, or one routed expert's */
    int n_expert, n_expert_used; /* routed experts */
    int n_ff_shexp;              /* shared expert hidden size */
    int gating;                  /* enum pk_gating (arch.h) */
    int norm_topk;               /* renormalise the top-k weights to sum 1 */
    int shexp_gate;              /* enum pk_shexp_gate (arch.h): the shared expert's gate */
} pk_ffn_shape;

enum { PK_NORM_PRE_MIXER, PK_NORM_POST_MIXER, PK_NORM_PRE_FFN, PK_NORM_POST_FFN, PK_NORMS };

/* One layer's plan. */
typedef struct pk_block {
    const pk_block_kind *mixer, *ffn;
    pk_attn_shape attn;          /* attention mixers */
    pk_ssm_shape ssm;            /* DeltaNet mixers */
    pk_ffn_shape ff;
    const char *norm[PK_NORMS];  /* tensor suffixes ("attn_norm.weight"), NULL: no such norm */
} pk_block;

/* Make the plan of every layer of m (m->blocks, m->rope) from its
 * descriptor and hyperparameters; linear[il] != 0 marks the layers of a
 * hybrid architecture that use its linear (DeltaNet) mixer. */
int pk_blocks_plan(pk_model *m, const unsigned char *linear, pk_error *err);

#endif
