/* blocks.c - make a model's block plan (blocks.h) at load: for each layer
 * its mixer and FFN kinds and shapes, from the architecture's descriptor
 * (arch.c) and the file's hyperparameters (model.c). This is the one place
 * where descriptor flags become per-layer facts; the kinds and the forward
 * pass read only the plan.
 */
#include <math.h>
#include <stdlib.h>
#include "model.h"

/* The rope table of (n_rot, base, freqs), shared by the layers that use the
 * same; -1 if there are PK_MAX_ROPE others already. */
static int rope_index(pk_model *m, int n_rot, float base) {
    for (int i = 0; i < m->n_rope; i++)
        if (m->rope[i].n_rot == n_rot && m->rope[i].base == base) return i;
    if (m->n_rope == PK_MAX_ROPE) return -1;
    m->rope[m->n_rope] = (pk_rope){n_rot, base, &m->rope_freqs};
    return m->n_rope++;
}

int pk_blocks_plan(pk_model *m, const unsigned char *linear, pk_error *err) {
    const pk_arch *a = m->arch;
    const pk_hparams *hp = &m->hp;
    if (!(m->blocks = pk_calloc((size_t)hp->n_layer, sizeof *m->blocks)))
        return pk_errorf(err, PK_ERR_NOMEM, "%s: out of memory", m->path);
    m->n_rope = 0;
    const int shared = hp->n_ff_shexp > 0 || a->shared_expert;
    for (int il = 0; il < hp->n_layer; il++) {
        pk_block *b = &m->blocks[il];
        b->mixer = linear && linear[il] ? &pk_mixer_deltanet : &pk_mixer_attention;
        if (b->mixer == &pk_mixer_attention) {
            b->attn = (pk_attn_shape){
                .n_head = hp->n_head, .n_head_kv = hp->n_head_kv,
                .head_dim = hp->head_dim, .head_dim_v = hp->head_dim_v,
                .n_rot = hp->n_rot, .rope_style = a->rope_style, .rope_base = hp->rope_base,
                .rope = rope_index(m, hp->n_rot, hp->rope_base),
                .scale = 1.0f / sqrtf((float)hp->head_dim),
                .qk_norm = a->qk_norm, .out_gate = a->attn_gate,
            };
            if (hp->attn_scale > 0) b->attn.scale = hp->attn_scale;
            b->attn.bias = a->attn_bias == PK_BIAS_REQUIRED;
            /* biases the architecture does not add, and an output bias (not
               computed yet): refused rather than ignored */
            static const char *const qkv_bias[3] = {"attn_q.bias", "attn_k.bias", "attn_v.bias"};
            for (int i = 0; i < 3 && a->attn_bias == PK_BIAS_REFUSED; i++)
                if (pk_has_tensor(m, il, qkv_bias[i]))
                    return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tensor 'blk.%d.%s': %s does not use q/k/v biases",
                                     m->path, il, qkv_bias[i], a->name);
            if (pk_has_tensor(m, il, "attn_output.bias"))
                return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tensor 'blk.%d.attn_output.bias': an attention "
                                 "output bias is not supported yet", m->path, il);
            if (b->attn.rope < 0)
                return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: layer %d: more than %d rope tables", m->path, il,
                                 PK_MAX_ROPE);
        } else {
            /* r v heads per q/k head: tiled (qwen35) or grouped (qwen3next)
               order; beta|alpha as two tensors or one interleaved per k head */
            const int r = hp->ssm_v_heads / hp->ssm_k_heads;
            b->ssm = (pk_ssm_shape){
                .conv = hp->ssm_conv, .state = hp->ssm_state,
                .k_heads = hp->ssm_k_heads, .v_heads = hp->ssm_v_heads, .channels = hp->ssm_channels,
                .ba = a->ssm_ba, .vk_div = a->ssm_grouped ? r : 1,
                .ba_group = a->ssm_ba ? 2 * r : r, .alpha_off = a->ssm_ba ? r : hp->ssm_v_heads,
            };
        }
        if (hp->moe) {
            b->ffn = shared ? &pk_ffn_moe_shared : &pk_ffn_moe;
            b->ff = (pk_ffn_shape){
                .n_ff = hp->n_ff_exp, .n_expert = hp->n_expert, .n_expert_used = hp->n_expert_used,
                .n_ff_shexp = shared ? hp->n_ff_shexp : 0, .gating = hp->gating, .norm_topk = hp->norm_topk,
                .shexp_gate = a->shexp_gate,
            };
        } else {
            b->ffn = &pk_ffn_dense;
            b->ff = (pk_ffn_shape){.n_ff = hp->n_ff};
        }
        b->norm[PK_NORM_PRE_MIXER] = "attn_norm.weight";
        b->norm[PK_NORM_POST_MIXER] = a->post_norm[0];
        b->norm[PK_NORM_PRE_FFN] = a->ffn_norm;
        b->norm[PK_NORM_POST_FFN] = a->post_norm[1];
    }
    return PK_OK;
}
