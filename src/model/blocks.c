/* model/blocks.c - make a model's block plan (model/blocks.h) at load: for each layer
 * its mixer and FFN kinds and shapes, from the architecture's descriptor
 * (model/arch.c) and the file's hyperparameters (model/model.c). This is the one place
 * where descriptor flags become per-layer facts; the kinds and the forward
 * pass read only the plan.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "model/model.h"

/* The rope table of (n_rot, base, freqs), shared by the layers that use the
 * same; -1 if there are PK_MAX_ROPE others already. */
static int rope_index(pk_model *m, int n_rot, float base, const pk_tensor *freqs, const pk_rope_scaling *sc) {
    for (int i = 0; i < m->n_rope; i++)
        if (m->rope[i].n_rot == n_rot && m->rope[i].base == base && m->rope[i].freqs == freqs &&
            memcmp(&m->rope[i].scaling, sc, sizeof *sc) == 0)
            return i;
    if (m->n_rope == PK_MAX_ROPE) return -1;
    m->rope[m->n_rope] = (pk_rope){.n_rot = n_rot, .base = base, .freqs = freqs, .scaling = *sc};
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
        b->mixer = linear && linear[il] ? &pk_mixer_deltanet : a->mla ? &pk_mixer_mla : &pk_mixer_attention;
        if (b->mixer == &pk_mixer_mla) {
            /* llama.cpp's deepseek2: with a YaRN mscale_all_dim m, the rope
               keeps cos/sin at magnitude attn (YaRN's own 1 + 0.1 ln s
               cancelled), and the scores take the correction instead:
               scale = mscale^2 / sqrt(q/k head dim), mscale = attn (1 +
               0.1 ln s) (1 + 0.1 m ln s) */
            pk_rope_scaling sc = hp->rope_scaling;
            const double ln_s = log(1.0 / sc.freq_scale);
            if (hp->yarn_log_mul != 0.0f && sc.ext_factor != 0.0f && ln_s > 0.0) sc.attn_factor /= 1.0 + 0.1 * ln_s;
            const double ms = sc.attn_factor * (1.0 + 0.1 * ln_s) * (1.0 + 0.1 * hp->yarn_log_mul * ln_s);
            b->mla = (pk_mla_shape){
                .n_head = hp->n_head, .nope = hp->mla_k - hp->n_rot, .n_rot = hp->n_rot,
                .kv_lora = hp->kv_lora, .head_dim_v = hp->mla_v, .q_lora = hp->q_lora,
                .rope_style = a->rope_style, .rope = rope_index(m, hp->n_rot, hp->rope_base, &m->rope_freqs, &sc),
                .scale = (float)(ms * ms / sqrt((double)hp->mla_k)),
            };
            if (b->mla.rope < 0)
                return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: layer %d: more than %d rope tables", m->path, il,
                                 PK_MAX_ROPE);
        } else if (b->mixer == &pk_mixer_attention) {
            /* sliding layers: the pattern's (swa_pattern: their own head
               dims and rope, no rope_freqs), or l % period < period - 1
               (period 0: all), their own rope base */
            const int p = hp->swa_period;
            const int swa = hp->swa ? hp->swa[il] : hp->n_swa > 0 && (p == 0 || il % p < p - 1);
            const int own = swa && hp->swa;
            const int hd = own ? hp->head_dim_swa : hp->head_dim, n_rot = own ? hp->n_rot_swa : hp->n_rot;
            const float base = swa ? hp->rope_base_swa : hp->rope_base;
            b->attn = (pk_attn_shape){
                .n_head = hp->n_head, .n_head_kv = hp->n_head_kv_l[il],
                .head_dim = hd, .head_dim_v = own ? hp->head_dim_v_swa : hp->head_dim_v,
                .n_rot = n_rot, .rope_style = a->rope_style, .rope_base = base,
                .rope = rope_index(m, n_rot, base, own ? NULL : &m->rope_freqs, &hp->rope_scaling),
                .scale = a->attn_scale > 0 ? a->attn_scale : 1.0f / sqrtf((float)hd),
                .qk_norm = a->qk_norm, .out_gate = a->attn_gate,
                .bias = a->attn_bias == PK_BIAS_REQUIRED || a->attn_bias == PK_BIAS_REQUIRED_QKV,
                .out_bias = a->attn_bias == PK_BIAS_REQUIRED, .window = swa ? hp->n_swa : 0, .sinks = a->attn_sinks,
                .v_norm = a->v_norm, .v_from_k = a->v_from_k && !pk_has_tensor(m, il, "attn_v.weight"),
            };
            if (hp->attn_scale > 0) b->attn.scale = hp->attn_scale;
            /* biases the architecture does not add: refused rather than ignored */
            static const char *const refused[4] = {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias"};
            for (int i = 0; i < 4 && a->attn_bias == PK_BIAS_REFUSED; i++)
                if (pk_has_tensor(m, il, refused[i]))
                    return pk_errorf(err, PK_ERR_UNSUPPORTED, "%s: tensor 'blk.%d.%s': %s does not use attention "
                                     "biases", m->path, il, refused[i], a->name);
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
        /* dense + moe (gemma4): the experts where the layer has a router;
           leading dense layers (deepseek2) */
        const int dense_moe = a->ffn == PK_FFN_DENSE_MOE;
        if (hp->moe && il >= hp->n_dense_lead && (!dense_moe || pk_has_tensor(m, il, "ffn_gate_inp.weight"))) {
            b->ffn = dense_moe ? &pk_ffn_dense_moe : shared ? &pk_ffn_moe_shared : &pk_ffn_moe;
            b->ff = (pk_ffn_shape){
                .n_ff = hp->n_ff_exp, .n_expert = hp->n_expert_l[il], .n_expert_used = hp->n_expert_used,
                .n_ff_shexp = shared ? hp->n_ff_shexp : 0, .gating = hp->gating, .norm_topk = hp->norm_topk,
                .act = a->act, .n_ff_dense = dense_moe ? hp->n_ff : 0,
                .bias = a->expert_bias, .swiglu_limit = a->swiglu_limit, .swiglu_alpha = a->swiglu_alpha,
                .w_scale = hp->w_scale, .n_group = hp->n_group, .n_group_used = hp->n_group_used,
                .shexp_gate = a->shexp_gate,
            };
            if (b->ff.n_expert < b->ff.n_expert_used)   /* per-layer counts: model/model.c checked the most */
                return pk_errorf(err, PK_ERR_FORMAT, "%s: layer %d has %d experts, fewer than expert_used_count %d",
                                 m->path, il, b->ff.n_expert, b->ff.n_expert_used);
        } else {
            b->ffn = &pk_ffn_dense;
            b->ff = (pk_ffn_shape){.n_ff = hp->n_ff, .act = a->act};
        }
        b->norm[PK_NORM_PRE_MIXER] = "attn_norm.weight";
        b->norm[PK_NORM_POST_MIXER] = a->post_norm[0];
        b->norm[PK_NORM_PRE_FFN] = a->ffn_norm;
        b->norm[PK_NORM_POST_FFN] = a->post_norm[1];
        b->out_scale = a->layer_scale;
    }
    return PK_OK;
}
