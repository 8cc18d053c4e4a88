#!/usr/bin/python3
"""gen_model.py - write a small random-weight GGUF model for tests.

usage: gen_model.py ARCH OUT.gguf [--seed S] [--type f32|f16|bf16|q8_0]
                    [--tied] [--vocab V] [--embd D] [--layers L]
                    [--heads H] [--heads-kv HKV] [--head-dim HD]
                    [--ff F] [--experts E] [--used K] [--expert-ff FE]
                    [--ctx N] [--rope-base B] [--eps EPS] [--out-scale S]
                    [--rope-scaling none|linear|yarn] [--rope-factor S]
                    [--rope-orig-ctx N]
                    [--shared-ff F] [--embd-scale S] [--residual-scale S]
                    [--attn-scale S] [--logit-scale S]

ARCH is one of
  qwen3moe  Qwen3-MoE: q/k RMS norm per head, NEOX RoPE, merged expert tensors
  qwen3     Qwen3 dense: same attention, dense SiLU-gated FFN
  llama     LLaMA dense: no q/k norm, head_dim = D/heads, NORM RoPE
  mixtral   architecture "llama" with experts (llama.expert_count, ...);
            expert FFN size = llama.feed_forward_length
  qwen35moe Qwen3.5-MoE hybrid: Gated DeltaNet layers + a gated full-attention
            layer every --interval-th layer, routed experts + sigmoid-gated
            shared expert (--shared-ff); the key/tensor names and layout of
            ../shared/fixtures/qwen35moe/tiny-qwen35moe.gguf
  qwen35    Qwen3.5 dense hybrid: the same mixers, dense ffn_gate/up/down (--ff)
  gemma4    Gemma-4 MoE (26B-A4B layout, ../shared/fixtures/gemma4/README.md):
            sliding layers (--pattern 1,1,0,1: 1 = sliding, window --window)
            with --head-dim / --heads-kv, global layers with --head-dim-global
            / --heads-kv-global, K = V (no attn_v; --global-v writes one),
            rope_freqs rotating a quarter of the global pairs (base
            --rope-base-global), dense GeGLU MLP (--ff) + experts (merged
            ffn_gate_up_exps; --split-gate-up: two tensors), router and
            expert scales, layer_output_scale, soft-cap --softcap
  qwen2moe  Qwen1.5/2-MoE: q/k/v biases, NEOX RoPE, routed experts
            (expert_feed_forward_length, weights not renormalised) + a
            shared expert (--shared-ff) gated by sigmoid(ffn_gate_inp_shexp . x)
  olmoe     OLMoE: q/k RMS norms over the whole q and k width, NEOX RoPE,
            routed experts of size feed_forward_length, not renormalised
  granitemoe Granite MoE: llama's NORM RoPE and renormalised experts (size
            feed_forward_length) with Granite's multipliers (--embd-scale,
            --residual-scale, --attn-scale, --logit-scale; defaults 6, 0.22,
            0.05, 3.5); --shared-ff > 0 adds an ungated shared expert
  qwen3next Qwen3-Next: qwen35moe's blocks with llama.cpp's qwen3next layout
            (../shared/fixtures/qwen3next/README.md): no rope sections key,
            beta/alpha as one ssm_ba tensor interleaved per k head; the v
            heads are read in grouped order (the weights are random either way)
  gpt-oss   gpt-oss (../shared/fixtures/gpt-oss/README.md): q/k/v/o biases,
            attention sinks, sliding-window layers (--swa-window W, default
            4; --swa-pattern P writes attention.sliding_window_pattern), YaRN
            (factor 8 over an original context of 64 unless --rope-*
            say otherwise), biased router and experts; --exps-type mxfp4
            stores the experts as MXFP4 (the released files' type). Init as
            the fixture's: biases N(0, 0.3^2), sinks 0.5 + N(0, 1), gate/up
            3 x N(0, 1/D) so the clamp at 7 is active, router 2 x N(0, 1/D)

  deepseek2 DeepSeek-V2/V3 (llama.cpp's deepseek2, ../shared/fixtures/deepseek2/
            README.md): multi-head latent attention (attn_q or, with
            --q-lora R, attn_q_a / attn_q_a_norm / attn_q_b; attn_kv_a_mqa,
            attn_kv_a_norm, attn_k_b, attn_v_b), --dense-lead leading dense
            layers (--ff), then routed experts + --shared shared experts
            (one SwiGLU of --expert-ff x --shared), routing by --gating
            (sigmoid: V3, with the selection bias exp_probs_b unless
            --no-bias; softmax: V2), --no-norm (no expert_weights_norm),
            --w-scale (expert_weights_scale); MLA sizes --kv-lora (r),
            --nope, --n-rot, --v-dim; --groups G --groups-used U (expert
            groups, group-limited routing); rope scaling as --rope-scaling
            etc. say, --yarn-log-mul M writing
            rope.scaling.yarn_log_multiplier = 0.1 M (as the converter)

Hybrid options (qwen35moe, qwen35): --ssm-k-heads (ssm.group_count),
--ssm-v-heads (ssm.time_step_rank), --ssm-state (head dim of q/k/v),
--conv (conv kernel), --n-rot (rope.dimension_count), --sections a,b,c,d
(rope.dimension_sections), --interval (full_attention_interval), or
--recurrent-layers 1,1,0,... (writes <arch>.attention.recurrent_layers
instead of the interval), --merged-gate-up (qwen35moe, qwen3next: one
ffn_gate_up_exps per layer, gate rows then up rows per expert, holding the
values the two tensors would have). Hybrid init follows the fixture README: ssm_alpha
x 0.5, ssm_a = -U(1, 16), ssm_dt.bias = log(expm1(dt)) with dt log-uniform
in [1e-3, 1e-1], conv N(0, 1/kernel); ssm_conv1d, ssm_a, ssm_dt.bias, norms,
the router and the shared-expert gate stay F32 whatever --type is.

Key and tensor names follow llama.cpp. Matrices are N(0, 1/fan_in), norm
weights 1 + 0.1 N(0,1), token_embd N(0,1), output.weight scaled by
--out-scale (default 3) so logits are well spread. --tied omits
output.weight (the output projection then reuses token_embd).
--type applies to 2-D and 3-D tensors except ffn_gate_inp (the router stays
F32 as llama.cpp's converters keep it); 1-D norm weights are always F32.
The tokenizer is a minimal valid GPT-2 byte-level one: the 256 byte
characters followed by "tok256", "tok257", ... and no merges.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_py as G  # noqa: E402

DEFAULTS = {
    # arch: dict of defaults
    "qwen3moe": dict(vocab=300, embd=64, layers=2, heads=4, heads_kv=2,
                     head_dim=32, ff=96, experts=8, used=3, expert_ff=32),
    "qwen3":    dict(vocab=320, embd=64, layers=2, heads=4, heads_kv=2,
                     head_dim=32, ff=96, experts=0, used=0, expert_ff=0),
    "llama":    dict(vocab=290, embd=96, layers=2, heads=6, heads_kv=2,
                     head_dim=None, ff=128, experts=0, used=0, expert_ff=0),
    "mixtral":  dict(vocab=310, embd=64, layers=2, heads=4, heads_kv=1,
                     head_dim=None, ff=48, experts=4, used=2, expert_ff=0),
    # llama.cpp's qwen2moe and olmoe want n_head * head_dim = embd (and
    # olmoe's full-width k norm n_head_kv * head_dim = embd: no GQA)
    "qwen2moe": dict(vocab=300, embd=64, layers=2, heads=2, heads_kv=1,
                     head_dim=None, ff=96, experts=8, used=3, expert_ff=32,
                     shared_ff=48),
    "olmoe":    dict(vocab=300, embd=64, layers=2, heads=2, heads_kv=2,
                     head_dim=None, ff=32, experts=8, used=3, expert_ff=0),
    "granitemoe": dict(vocab=300, embd=64, layers=2, heads=2, heads_kv=1,
                       head_dim=None, ff=32, experts=8, used=3, expert_ff=0,
                       shared_ff=0),
    "qwen35moe": dict(vocab=300, embd=64, layers=4, heads=4, heads_kv=2,
                      head_dim=32, ff=32, experts=8, used=2, expert_ff=32,
                      shared_ff=32, ssm_k_heads=2, ssm_v_heads=4,
                      ssm_state=16, conv=4, n_rot=8, sections="2,1,1,0",
                      interval=4, recurrent_layers=None),
    "qwen3next": dict(vocab=300, embd=64, layers=4, heads=4, heads_kv=2,
                      head_dim=32, ff=32, experts=8, used=2, expert_ff=32,
                      shared_ff=32, ssm_k_heads=2, ssm_v_heads=4,
                      ssm_state=16, conv=4, n_rot=8, sections="",
                      interval=4, recurrent_layers=None),
    "gpt-oss":  dict(vocab=300, embd=64, layers=4, heads=4, heads_kv=2,
                     head_dim=32, ff=32, experts=8, used=3, expert_ff=32),
    "gemma4":   dict(vocab=300, embd=64, layers=4, heads=4, heads_kv=2,
                     head_dim=16, ff=48, experts=8, used=2, expert_ff=32,
                     heads_kv_global=1, head_dim_global=32, window=512,
                     pattern="1,1,0,1"),
    "qwen35":   dict(vocab=300, embd=64, layers=4, heads=4, heads_kv=2,
                     head_dim=32, ff=96, experts=0, used=0, expert_ff=0,
                     shared_ff=0, ssm_k_heads=2, ssm_v_heads=4,
                     ssm_state=16, conv=4, n_rot=8, sections="2,1,1,0",
                     interval=4, recurrent_layers=None),
    "deepseek2": dict(vocab=300, embd=64, layers=3, heads=4, heads_kv=1,
                      head_dim=None, ff=96, experts=8, used=3, expert_ff=24,
                      n_rot=8),
}
HYBRID = ("qwen35moe", "qwen35", "qwen3next")

TYPES = {"f32": G.T_F32, "f16": G.T_F16, "bf16": G.T_BF16, "q8_0": G.T_Q8_0}
FILE_TYPES = {"f32": 0, "f16": 1, "q8_0": 7, "bf16": 32}   # llama_ftype


def gpt2_byte_chars():
    """The 256 GPT-2 byte-level characters, in bytes_to_unicode order:
    the printable bytes ('!'..'~', '\xa1'..'\xac', '\xae'..'\xff') map to
    themselves, the remaining bytes (in increasing order) to 256, 257, ..."""
    printable = (list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    chars = [chr(b) for b in printable]
    extra = 0
    for b in range(256):
        if b not in printable:
            chars.append(chr(256 + extra))
            extra += 1
    assert len(chars) == 256 and len(set(chars)) == 256
    return chars


def parse_args(argv):
    p = argparse.ArgumentParser(description="write a small random GGUF model")
    p.add_argument("arch", choices=sorted(DEFAULTS))
    p.add_argument("out")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--type", choices=sorted(TYPES), default="f32")
    p.add_argument("--tied", action="store_true")
    p.add_argument("--mtp", action="store_true",
                   help="qwen35*: append one MTP (nextn) block after the others")
    for name in ("vocab", "embd", "layers", "heads", "heads-kv", "head-dim",
                 "ff", "experts", "used", "expert-ff", "ctx", "shared-ff",
                 "ssm-k-heads", "ssm-v-heads", "ssm-state", "conv", "n-rot",
                 "interval", "heads-kv-global", "head-dim-global", "window"):
        p.add_argument("--" + name, type=int, default=None)
    p.add_argument("--pattern", default=None,
                   help="gemma4: 1 (sliding) or 0 (global) per layer")
    p.add_argument("--global-v", action="store_true",
                   help="gemma4: global layers get an attn_v (else V = K)")
    p.add_argument("--split-gate-up", action="store_true",
                   help="gemma4: ffn_gate_exps + ffn_up_exps, not merged")
    p.add_argument("--softcap", type=float, default=20.0)
    p.add_argument("--rope-base-global", type=float, default=1e6)
    p.add_argument("--merged-gate-up", action="store_true",
                   help="qwen35moe, qwen3next: one ffn_gate_up_exps per layer")
    for name in ("q-lora", "kv-lora", "nope", "v-dim", "dense-lead",
                 "shared"):
        p.add_argument("--" + name, type=int, default=None)
    p.add_argument("--gating", choices=("softmax", "sigmoid"),
                   default="sigmoid")
    p.add_argument("--no-bias", action="store_true")
    p.add_argument("--no-norm", action="store_true")
    p.add_argument("--w-scale", type=float, default=2.5)
    p.add_argument("--yarn-log-mul", type=float, default=None)
    p.add_argument("--groups", type=int, default=None)
    p.add_argument("--groups-used", type=int, default=None)
    p.add_argument("--sections", default=None)
    p.add_argument("--recurrent-layers", default=None)
    p.add_argument("--rope-base", type=float, default=10000.0)
    p.add_argument("--rope-scaling", choices=("none", "linear", "yarn"),
                   default=None)
    p.add_argument("--rope-factor", type=float, default=None)
    p.add_argument("--rope-orig-ctx", type=int, default=None)
    p.add_argument("--swa-window", type=int, default=4)
    p.add_argument("--swa-pattern", type=int, default=None)
    p.add_argument("--exps-type", choices=("f32", "f16", "q8_0", "mxfp4"),
                   default=None, help="gpt-oss: the expert tensors' type")
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--out-scale", type=float, default=3.0)
    # granitemoe's multipliers
    p.add_argument("--embd-scale", type=float, default=6.0)
    p.add_argument("--residual-scale", type=float, default=0.22)
    p.add_argument("--attn-scale", type=float, default=0.05)
    p.add_argument("--logit-scale", type=float, default=3.5)
    a = p.parse_args(argv)
    cfg = dict(DEFAULTS[a.arch])
    for k in list(cfg):
        v = getattr(a, k, None)
        if v is not None:
            cfg[k] = v
    cfg["ctx"] = a.ctx if a.ctx is not None else 256
    return a, cfg


def add_tokenizer(w, V):
    """Minimal valid GPT-2 byte-level tokenizer: the 256 byte characters,
    then "tok256", "tok257", ...; no merges."""
    tokens = gpt2_byte_chars() + ["tok%d" % i for i in range(256, V)]
    w.add_str("tokenizer.ggml.model", "gpt2")
    w.add_str("tokenizer.ggml.pre", "gpt-2")
    w.add_arr("tokenizer.ggml.tokens", tokens, G.STRING)
    w.add_arr("tokenizer.ggml.token_type", np.ones(V, dtype=np.int32),
              G.INT32)
    w.add_arr("tokenizer.ggml.merges", [], G.STRING)
    w.add_u32("tokenizer.ggml.bos_token_id", 256)
    w.add_u32("tokenizer.ggml.eos_token_id", 257)
    w.add_bool("tokenizer.ggml.add_bos_token", False)


def add_geometry(w, pre, cfg, F):
    """context length, embedding size, layers, FFN size F, head counts."""
    w.add_u32(pre + "context_length", cfg["ctx"])
    w.add_u32(pre + "embedding_length", cfg["embd"])
    w.add_u32(pre + "block_count", cfg["layers"])
    w.add_u32(pre + "feed_forward_length", F)
    w.add_u32(pre + "attention.head_count", cfg["heads"])
    w.add_u32(pre + "attention.head_count_kv", cfg["heads_kv"])


def add_rope_scaling(w, pre, a):
    """<arch>.rope.scaling.* from --rope-scaling / --rope-factor /
    --rope-orig-ctx (each written only if given)."""
    if a.rope_scaling is not None:
        w.add_str(pre + "rope.scaling.type", a.rope_scaling)
    if a.rope_factor is not None:
        w.add_f32(pre + "rope.scaling.factor", a.rope_factor)
    if a.rope_orig_ctx is not None:
        w.add_u32(pre + "rope.scaling.original_context_length",
                  a.rope_orig_ctx)


def int_list(s, what):
    try:
        return [int(x) for x in str(s).split(",") if x.strip() != ""]
    except ValueError:
        sys.exit("gen_model: bad %s %r" % (what, s))


def build_hybrid(a, cfg):
    """qwen35moe / qwen35 (Gated DeltaNet + gated attention hybrids)."""
    arch = a.arch
    moe = arch in ("qwen35moe", "qwen3next")
    nxt = arch == "qwen3next"
    if a.merged_gate_up and not moe:
        sys.exit("gen_model: --merged-gate-up needs experts")
    rng = np.random.default_rng(a.seed)
    V, D, L = cfg["vocab"], cfg["embd"], cfg["layers"]
    Hq, Hkv, hd = cfg["heads"], cfg["heads_kv"], cfg["head_dim"]
    E, K, F_exp, F_sh, F = (cfg["experts"], cfg["used"], cfg["expert_ff"],
                            cfg["shared_ff"], cfg["ff"])
    Hk, Hv, ds, Kc = (cfg["ssm_k_heads"], cfg["ssm_v_heads"],
                      cfg["ssm_state"], cfg["conv"])
    n_rot = cfg["n_rot"]
    sections = int_list(cfg["sections"], "--sections")
    if hd is None:
        sys.exit("gen_model: %s needs --head-dim" % arch)
    if Hq % Hkv:
        sys.exit("gen_model: heads %d not a multiple of heads_kv %d"
                 % (Hq, Hkv))
    if Hv % Hk:
        sys.exit("gen_model: ssm v heads %d not a multiple of k heads %d"
                 % (Hv, Hk))
    if n_rot % 2 or not 0 < n_rot <= hd:
        sys.exit("gen_model: n_rot %d must be even and in (0, head_dim]"
                 % n_rot)
    if len(sections) > 4:
        sys.exit("gen_model: at most 4 rope sections")
    sections = sections + [0] * (4 - len(sections))
    if V < 258:
        sys.exit("gen_model: vocab must be >= 258")
    if moe and not (0 < K <= E):
        sys.exit("gen_model: need 0 < used <= experts for %s" % arch)
    if cfg["recurrent_layers"] is not None:
        recr = [bool(v) for v in int_list(cfg["recurrent_layers"],
                                          "--recurrent-layers")]
        if len(recr) != L:
            sys.exit("gen_model: --recurrent-layers needs %d entries" % L)
    else:
        iv = cfg["interval"]
        if iv <= 0:
            sys.exit("gen_model: --interval must be > 0")
        recr = [(i + 1) % iv != 0 for i in range(L)]
    wtype = TYPES[a.type]
    key_dim, val_dim = Hk * ds, Hv * ds
    conv_dim = 2 * key_dim + val_dim

    w = G.GGUFWriter()
    pre = arch + "."
    w.add_str("general.architecture", arch)
    w.add_str("general.type", "model")
    w.add_str("general.name", "pocket-test-%s%s-%s" % (
        arch, "-tied" if a.tied else "", a.type))
    w.add_u32("general.file_type", FILE_TYPES[a.type])
    w.add_u32("general.quantization_version", 2)
    w.add_u32(pre + "block_count", L + (1 if a.mtp else 0))
    if a.mtp:
        w.add_u32(pre + "nextn_predict_layers", 1)
    w.add_u32(pre + "context_length", cfg["ctx"])
    w.add_u32(pre + "embedding_length", D)
    w.add_u32(pre + "feed_forward_length", F)
    w.add_u32(pre + "attention.head_count", Hq)
    w.add_u32(pre + "attention.head_count_kv", Hkv)
    w.add_f32(pre + "rope.freq_base", a.rope_base)
    w.add_f32(pre + "attention.layer_norm_rms_epsilon", a.eps)
    add_rope_scaling(w, pre, a)
    if moe:
        w.add_u32(pre + "expert_count", E)
        w.add_u32(pre + "expert_used_count", K)
    w.add_u32(pre + "attention.key_length", hd)
    w.add_u32(pre + "attention.value_length", hd)
    if moe:
        w.add_u32(pre + "expert_feed_forward_length", F_exp)
        w.add_u32(pre + "expert_shared_feed_forward_length", F_sh)
    w.add_u32(pre + "rope.dimension_count", n_rot)
    if not nxt:
        w.add_arr(pre + "rope.dimension_sections",
                  np.array(sections, dtype=np.int32), G.INT32)
    w.add_u32(pre + "ssm.conv_kernel", Kc)
    w.add_u32(pre + "ssm.state_size", ds)
    w.add_u32(pre + "ssm.group_count", Hk)
    w.add_u32(pre + "ssm.time_step_rank", Hv)
    w.add_u32(pre + "ssm.inner_size", val_dim)
    if cfg["recurrent_layers"] is not None:
        w.add_arr(pre + "attention.recurrent_layers",
                  np.array(recr, dtype=bool), G.BOOL)
    else:
        w.add_u32(pre + "full_attention_interval", cfg["interval"])
    add_tokenizer(w, V)

    def mat(*shape):   # numpy order, last dim = fan_in
        return rng.standard_normal(shape) / np.sqrt(shape[-1])

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    def put(name, arr, big=True):
        w.add_tensor(name, arr, wtype if big else G.T_F32)

    put("token_embd.weight", rng.standard_normal((V, D)))
    for i in range(L):
        b = "blk.%d." % i
        put(b + "attn_norm.weight", norm(D), False)
        if recr[i]:
            put(b + "attn_qkv.weight", mat(conv_dim, D))
            put(b + "attn_gate.weight", mat(val_dim, D))
            put(b + "ssm_conv1d.weight",
                rng.standard_normal((conv_dim, Kc)) / np.sqrt(Kc), False)
            dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), Hv))
            put(b + "ssm_dt.bias", np.log(np.expm1(dt)), False)
            put(b + "ssm_a", -rng.uniform(1.0, 16.0, Hv), False)
            beta, alpha = mat(Hv, D), 0.5 * mat(Hv, D)
            if nxt:   # per k head: beta of its r v heads, then their alpha
                r = Hv // Hk
                put(b + "ssm_ba.weight", np.concatenate(
                    [beta.reshape(Hk, r, D), alpha.reshape(Hk, r, D)],
                    axis=1).reshape(2 * Hv, D))
            else:
                put(b + "ssm_beta.weight", beta)
                put(b + "ssm_alpha.weight", alpha)
            put(b + "ssm_norm.weight", norm(ds), False)
            put(b + "ssm_out.weight", mat(D, val_dim))
        else:
            put(b + "attn_q.weight", mat(2 * Hq * hd, D))
            put(b + "attn_k.weight", mat(Hkv * hd, D))
            put(b + "attn_v.weight", mat(Hkv * hd, D))
            put(b + "attn_output.weight", mat(D, Hq * hd))
            put(b + "attn_q_norm.weight", norm(hd), False)
            put(b + "attn_k_norm.weight", norm(hd), False)
        put(b + "post_attention_norm.weight", norm(D), False)
        if moe:
            # router scaled up a little so the expert choice is clear-cut
            put(b + "ffn_gate_inp.weight", 2.0 * mat(E, D), False)
            gate, down, up = (mat(E, F_exp, D), mat(E, D, F_exp),
                              mat(E, F_exp, D))
            if a.merged_gate_up:
                put(b + "ffn_gate_up_exps.weight",
                    np.concatenate([gate, up], axis=1))
            else:
                put(b + "ffn_gate_exps.weight", gate)
                put(b + "ffn_up_exps.weight", up)
            put(b + "ffn_down_exps.weight", down)
            put(b + "ffn_gate_inp_shexp.weight", mat(D), False)
            put(b + "ffn_gate_shexp.weight", mat(F_sh, D))
            put(b + "ffn_down_shexp.weight", mat(D, F_sh))
            put(b + "ffn_up_shexp.weight", mat(F_sh, D))
        else:
            put(b + "ffn_gate.weight", mat(F, D))
            put(b + "ffn_down.weight", mat(D, F))
            put(b + "ffn_up.weight", mat(F, D))
    put("output_norm.weight", norm(D), False)
    if not a.tied:
        put("output.weight", a.out_scale * mat(V, D))
    if a.mtp:  # drawn last: the other tensors equal those of the model without it
        b = "blk.%d.nextn." % L
        put(b + "eh_proj.weight", mat(D, 2 * D))
        put(b + "enorm.weight", norm(D), False)
        put(b + "hnorm.weight", norm(D), False)
        put(b + "shared_head_norm.weight", norm(D), False)
    return w


def build_gptoss(a, cfg):
    """gpt-oss: the fixture's layout (keys, tensor names, shapes)."""
    rng = np.random.default_rng(a.seed)
    V, D, L = cfg["vocab"], cfg["embd"], cfg["layers"]
    Hq, Hkv, hd = cfg["heads"], cfg["heads_kv"], cfg["head_dim"]
    E, K, F = cfg["experts"], cfg["used"], cfg["expert_ff"]
    if Hq % Hkv or not 0 < K <= E or V < 258:
        sys.exit("gen_model: bad gpt-oss geometry")
    wtype = TYPES[a.type]
    etype = G.T_MXFP4 if a.exps_type == "mxfp4" else \
        TYPES[a.exps_type] if a.exps_type else wtype
    if a.rope_scaling is None:
        a.rope_scaling, a.rope_factor, a.rope_orig_ctx = "yarn", 8.0, 64
    w = G.GGUFWriter()
    pre = "gpt-oss."
    w.add_str("general.architecture", "gpt-oss")
    w.add_str("general.type", "model")
    w.add_str("general.name", "pocket-test-gpt-oss-%s" % a.type)
    w.add_u32("general.file_type", FILE_TYPES[a.type])
    w.add_u32("general.quantization_version", 2)
    add_geometry(w, pre, cfg, F)
    w.add_u32(pre + "attention.key_length", hd)
    w.add_u32(pre + "attention.value_length", hd)
    w.add_f32(pre + "attention.layer_norm_rms_epsilon", a.eps)
    w.add_u32(pre + "attention.sliding_window", a.swa_window)
    if a.swa_pattern is not None:
        w.add_u32(pre + "attention.sliding_window_pattern", a.swa_pattern)
    w.add_f32(pre + "rope.freq_base", a.rope_base)
    add_rope_scaling(w, pre, a)
    w.add_u32(pre + "expert_count", E)
    w.add_u32(pre + "expert_used_count", K)
    w.add_u32(pre + "expert_feed_forward_length", F)
    add_tokenizer(w, V)

    def mat(*shape):
        return rng.standard_normal(shape) / np.sqrt(shape[-1])

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    def bias(*shape, sd=0.3):
        return sd * rng.standard_normal(shape)

    def put(name, arr, ttype=None):
        w.add_tensor(name, arr, G.T_F32 if ttype is None else ttype)

    put("token_embd.weight", rng.standard_normal((V, D)), wtype)
    for i in range(L):
        b = "blk.%d." % i
        put(b + "attn_norm.weight", norm(D))
        put(b + "attn_q.weight", mat(Hq * hd, D), wtype)
        put(b + "attn_q.bias", bias(Hq * hd))
        put(b + "attn_k.weight", mat(Hkv * hd, D), wtype)
        put(b + "attn_k.bias", bias(Hkv * hd))
        put(b + "attn_v.weight", mat(Hkv * hd, D), wtype)
        put(b + "attn_v.bias", bias(Hkv * hd))
        put(b + "attn_output.weight", mat(D, Hq * hd), wtype)
        put(b + "attn_output.bias", bias(D))
        put(b + "attn_sinks.weight", 0.5 + rng.standard_normal(Hq))
        put(b + "post_attention_norm.weight", norm(D))
        put(b + "ffn_gate_inp.weight", 2.0 * mat(E, D))
        put(b + "ffn_gate_inp.bias", bias(E, sd=0.5))
        put(b + "ffn_gate_exps.weight", 3.0 * mat(E, F, D), etype)
        put(b + "ffn_gate_exps.bias", bias(E, F, sd=0.5))
        put(b + "ffn_up_exps.weight", 3.0 * mat(E, F, D), etype)
        put(b + "ffn_up_exps.bias", bias(E, F, sd=0.5))
        put(b + "ffn_down_exps.weight", mat(E, D, F), etype)
        put(b + "ffn_down_exps.bias", bias(E, D))
    put("output_norm.weight", norm(D))
    put("output.weight", a.out_scale * mat(V, D), wtype)
    return w


def build_gemma4(a, cfg):
    """gemma4 in its MoE form: the fixture's keys, tensors and init."""
    rng = np.random.default_rng(a.seed)
    V, D, L = cfg["vocab"], cfg["embd"], cfg["layers"]
    Hq, E, K, F, Fe = (cfg["heads"], cfg["experts"], cfg["used"], cfg["ff"],
                       cfg["expert_ff"])
    swa = [bool(v) for v in int_list(cfg["pattern"], "--pattern")]
    if len(swa) != L:
        sys.exit("gen_model: --pattern needs %d entries" % L)
    kvh = [cfg["heads_kv"] if s else cfg["heads_kv_global"] for s in swa]
    hds = [cfg["head_dim"] if s else cfg["head_dim_global"] for s in swa]
    hd_g = cfg["head_dim_global"]
    if any(Hq % h for h in kvh) or not 0 < K <= E or V < 258:
        sys.exit("gen_model: gemma4 heads / experts / vocab out of range")
    wtype = TYPES[a.type]
    w = G.GGUFWriter()
    pre = "gemma4."
    w.add_str("general.architecture", "gemma4")
    w.add_str("general.type", "model")
    w.add_str("general.name", "pocket-test-gemma4%s-%s"
              % ("-tied" if a.tied else "", a.type))
    w.add_u32("general.file_type", FILE_TYPES[a.type])
    w.add_u32(pre + "context_length", cfg["ctx"])
    w.add_u32(pre + "embedding_length", D)
    w.add_u32(pre + "block_count", L)
    w.add_u32(pre + "feed_forward_length", F)
    w.add_u32(pre + "attention.head_count", Hq)
    w.add_arr(pre + "attention.head_count_kv", np.array(kvh, dtype=np.int32),
              G.INT32)
    w.add_f32(pre + "attention.layer_norm_rms_epsilon", a.eps)
    w.add_u32(pre + "attention.key_length", hd_g)
    w.add_u32(pre + "attention.value_length", hd_g)
    w.add_u32(pre + "attention.key_length_swa", cfg["head_dim"])
    w.add_u32(pre + "attention.value_length_swa", cfg["head_dim"])
    w.add_f32(pre + "rope.freq_base", a.rope_base_global)
    w.add_f32(pre + "rope.freq_base_swa", a.rope_base)
    w.add_u32(pre + "rope.dimension_count", hd_g)
    w.add_u32(pre + "rope.dimension_count_swa", cfg["head_dim"])
    w.add_u32(pre + "attention.sliding_window", cfg["window"])
    w.add_arr(pre + "attention.sliding_window_pattern",
              np.array(swa, dtype=bool), G.BOOL)
    w.add_u32(pre + "attention.shared_kv_layers", 0)
    w.add_u32(pre + "embedding_length_per_layer_input", 0)
    if a.softcap > 0:
        w.add_f32(pre + "final_logit_softcapping", a.softcap)
    w.add_u32(pre + "expert_count", E)
    w.add_u32(pre + "expert_used_count", K)
    w.add_u32(pre + "expert_feed_forward_length", Fe)
    add_tokenizer(w, V)
    mat, norm, put = weight_makers(rng, w, wtype)

    put("token_embd.weight", rng.standard_normal((V, D)) / np.sqrt(D))
    q = hd_g // 8   # rotating pairs of a global head: a quarter of hd_g / 2
    put("rope_freqs.weight", np.where(np.arange(hd_g // 2) < q, 1.0, 1e30),
        False)
    for i in range(L):
        b = "blk.%d." % i
        hd, nk = hds[i], kvh[i]
        put(b + "attn_norm.weight", norm(D), False)
        put(b + "attn_q.weight", mat(Hq * hd, D))
        put(b + "attn_k.weight", mat(nk * hd, D))
        if swa[i] or a.global_v:
            put(b + "attn_v.weight", mat(nk * hd, D))
        put(b + "attn_output.weight", mat(D, Hq * hd))
        put(b + "attn_q_norm.weight", norm(hd), False)
        put(b + "attn_k_norm.weight", norm(hd), False)
        put(b + "post_attention_norm.weight", norm(D), False)
        put(b + "ffn_norm.weight", norm(D), False)
        put(b + "ffn_gate.weight", mat(F, D))
        put(b + "ffn_up.weight", mat(F, D))
        put(b + "ffn_down.weight", mat(D, F))
        put(b + "post_ffw_norm_1.weight", norm(D), False)
        put(b + "ffn_gate_inp.weight", 1.5 * rng.standard_normal((E, D)), False)
        put(b + "ffn_gate_inp.scale", 1.0 + 0.2 * rng.standard_normal(D), False)
        put(b + "pre_ffw_norm_2.weight", norm(D), False)
        gate, up = mat(E, Fe, D), mat(E, Fe, D)
        if a.split_gate_up:
            put(b + "ffn_gate_exps.weight", gate)
            put(b + "ffn_up_exps.weight", up)
        else:
            put(b + "ffn_gate_up_exps.weight", np.concatenate([gate, up], axis=1))
        put(b + "ffn_down_exps.weight", mat(E, D, Fe))
        put(b + "ffn_down_exps.scale", rng.uniform(0.5, 1.5, E), False)
        put(b + "post_ffw_norm_2.weight", norm(D), False)
        put(b + "post_ffw_norm.weight", norm(D), False)
        put(b + "layer_output_scale.weight", rng.uniform(0.7, 1.0, 1), False)
    put("output_norm.weight", norm(D), False)
    if not a.tied:
        put("output.weight", 6.0 * mat(V, D))
    return w


def weight_makers(rng, w, wtype):
    """mat(*shape): N(0, 1/fan_in) in numpy order (last dim = fan_in);
    norm(n): 1 + 0.1 N(0, 1); put(name, arr, big=True): a tensor of type
    wtype (F32 unless big)."""
    def mat(*shape):
        return rng.standard_normal(shape) / np.sqrt(shape[-1])

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    def put(name, arr, big=True):
        w.add_tensor(name, arr, wtype if big else G.T_F32)
    return mat, norm, put


def build_deepseek2(a, cfg):
    """deepseek2: MLA + leading dense layers + routed and shared experts."""
    rng = np.random.default_rng(a.seed)
    V, D, L, H = cfg["vocab"], cfg["embd"], cfg["layers"], cfg["heads"]
    E, K, FE, F = cfg["experts"], cfg["used"], cfg["expert_ff"], cfg["ff"]
    ql = a.q_lora or 0
    r = a.kv_lora if a.kv_lora is not None else 32
    nope = a.nope if a.nope is not None else 16
    rot = cfg["n_rot"]
    dv = a.v_dim if a.v_dim is not None else 20
    lead = a.dense_lead if a.dense_lead is not None else 1
    n_sh = a.shared if a.shared is not None else 2
    if rot % 2 or rot < 2 or not 0 <= lead <= L or not 0 < K <= E:
        sys.exit("gen_model: bad deepseek2 geometry")
    wtype = TYPES[a.type]
    w = G.GGUFWriter()
    pre = "deepseek2."
    w.add_str("general.architecture", "deepseek2")
    w.add_str("general.type", "model")
    w.add_str("general.name", "pocket-test-deepseek2%s-%s" % (
        "-tied" if a.tied else "", a.type))
    w.add_u32("general.file_type", FILE_TYPES[a.type])
    w.add_u32(pre + "context_length", cfg["ctx"])
    w.add_u32(pre + "embedding_length", D)
    w.add_u32(pre + "block_count", L)
    w.add_u32(pre + "feed_forward_length", F)
    w.add_u32(pre + "attention.head_count", H)
    w.add_u32(pre + "attention.head_count_kv", 1)
    w.add_f32(pre + "rope.freq_base", a.rope_base)
    w.add_f32(pre + "attention.layer_norm_rms_epsilon", a.eps)
    w.add_u32(pre + "expert_count", E)
    w.add_u32(pre + "expert_used_count", K)
    w.add_u32(pre + "expert_gating_func", 2 if a.gating == "sigmoid" else 1)
    w.add_u32(pre + "leading_dense_block_count", lead)
    w.add_u32(pre + "vocab_size", V)
    w.add_u32(pre + "attention.q_lora_rank", ql)
    w.add_u32(pre + "attention.kv_lora_rank", r)
    w.add_u32(pre + "attention.key_length", r + rot)
    w.add_u32(pre + "attention.value_length", r)
    w.add_u32(pre + "attention.key_length_mla", nope + rot)
    w.add_u32(pre + "attention.value_length_mla", dv)
    w.add_u32(pre + "expert_feed_forward_length", FE)
    w.add_u32(pre + "expert_shared_count", n_sh)
    w.add_f32(pre + "expert_weights_scale", a.w_scale)
    w.add_bool(pre + "expert_weights_norm", not a.no_norm)
    if a.groups is not None:
        w.add_u32(pre + "expert_group_count", a.groups)
        w.add_u32(pre + "expert_group_used_count", a.groups_used or 1)
    w.add_u32(pre + "rope.dimension_count", rot)
    add_rope_scaling(w, pre, a)
    if a.yarn_log_mul is not None:
        w.add_f32(pre + "rope.scaling.yarn_log_multiplier",
                  0.1 * a.yarn_log_mul)
    add_tokenizer(w, V)
    mat, norm, put = weight_makers(rng, w, wtype)
    put("token_embd.weight", rng.standard_normal((V, D)))
    for i in range(L):
        b = "blk.%d." % i
        put(b + "attn_norm.weight", norm(D), False)
        if ql:
            put(b + "attn_q_a.weight", mat(ql, D))
            put(b + "attn_q_a_norm.weight", norm(ql), False)
            put(b + "attn_q_b.weight", mat(H * (nope + rot), ql))
        else:
            put(b + "attn_q.weight", mat(H * (nope + rot), D))
        put(b + "attn_kv_a_mqa.weight", mat(r + rot, D))
        put(b + "attn_kv_a_norm.weight", norm(r), False)
        put(b + "attn_k_b.weight", mat(H, r, nope))    # (H, r, nope): ne [nope, r, H]
        put(b + "attn_v_b.weight", mat(H, dv, r))
        put(b + "attn_output.weight", mat(D, H * dv))
        put(b + "ffn_norm.weight", norm(D), False)
        if i < lead:
            put(b + "ffn_gate.weight", mat(F, D))
            put(b + "ffn_up.weight", mat(F, D))
            put(b + "ffn_down.weight", mat(D, F))
        else:
            put(b + "ffn_gate_inp.weight", 2.0 * mat(E, D), False)
            if not a.no_bias:
                put(b + "exp_probs_b.bias", 0.1 * rng.standard_normal(E),
                    False)
            put(b + "ffn_gate_exps.weight", mat(E, FE, D))
            put(b + "ffn_up_exps.weight", mat(E, FE, D))
            put(b + "ffn_down_exps.weight", mat(E, D, FE))
            if n_sh:
                put(b + "ffn_gate_shexp.weight", mat(n_sh * FE, D))
                put(b + "ffn_up_shexp.weight", mat(n_sh * FE, D))
                put(b + "ffn_down_shexp.weight", mat(D, n_sh * FE))
    put("output_norm.weight", norm(D), False)
    if not a.tied:
        put("output.weight", a.out_scale * mat(V, D))
    return w


def build(a, cfg):
    arch = a.arch
    if arch == "gemma4":
        return build_gemma4(a, cfg)
    if arch in HYBRID:
        return build_hybrid(a, cfg)
    if arch == "gpt-oss":
        return build_gptoss(a, cfg)
    if arch == "deepseek2":
        return build_deepseek2(a, cfg)
    rng = np.random.default_rng(a.seed)
    V, D, L = cfg["vocab"], cfg["embd"], cfg["layers"]
    Hq, Hkv = cfg["heads"], cfg["heads_kv"]
    E, K = cfg["experts"], cfg["used"]
    moe = arch in ("qwen3moe", "mixtral", "qwen2moe", "olmoe", "granitemoe")
    qk_norm = arch in ("qwen3moe", "qwen3")
    full_qk_norm = arch == "olmoe"
    bias = arch == "qwen2moe"
    F_sh = cfg.get("shared_ff") or 0
    if arch == "qwen2moe" and F_sh <= 0:
        sys.exit("gen_model: qwen2moe needs --shared-ff > 0")
    gguf_arch = "llama" if arch == "mixtral" else arch
    if cfg["head_dim"] is None:
        if D % Hq:
            sys.exit("gen_model: embd %d not divisible by heads %d" % (D, Hq))
        hd = D // Hq
    else:
        hd = cfg["head_dim"]
    if Hq % Hkv:
        sys.exit("gen_model: heads %d not a multiple of heads_kv %d"
                 % (Hq, Hkv))
    if V < 258:
        sys.exit("gen_model: vocab must be >= 258")
    if moe and not (0 < K <= E):
        sys.exit("gen_model: need 0 < used <= experts for %s" % arch)
    if arch in ("mixtral", "olmoe", "granitemoe"):
        F_exp = cfg["ff"]
    else:
        F_exp = cfg["expert_ff"]
    F = cfg["ff"]
    wtype = TYPES[a.type]

    w = G.GGUFWriter()
    pre = gguf_arch + "."
    w.add_str("general.architecture", gguf_arch)
    w.add_str("general.name", "pocket-test-%s%s-%s" % (
        arch, "-tied" if a.tied else "", a.type))
    w.add_u32("general.file_type", FILE_TYPES[a.type])
    w.add_u32(pre + "vocab_size", V)
    add_geometry(w, pre, cfg, F)
    w.add_f32(pre + "rope.freq_base", a.rope_base)
    w.add_f32(pre + "attention.layer_norm_rms_epsilon", a.eps)
    add_rope_scaling(w, pre, a)
    if gguf_arch == "llama":
        w.add_u32(pre + "rope.dimension_count", hd)
    else:
        w.add_u32(pre + "attention.key_length", hd)
        w.add_u32(pre + "attention.value_length", hd)
    if arch == "granitemoe":
        w.add_u32(pre + "rope.dimension_count", hd)
    if moe:
        w.add_u32(pre + "expert_count", E)
        w.add_u32(pre + "expert_used_count", K)
        if arch in ("qwen3moe", "qwen2moe"):
            w.add_u32(pre + "expert_feed_forward_length", F_exp)
        if F_sh > 0:
            w.add_u32(pre + "expert_shared_feed_forward_length", F_sh)
    if arch == "granitemoe":
        w.add_f32(pre + "embedding_scale", a.embd_scale)
        w.add_f32(pre + "residual_scale", a.residual_scale)
        w.add_f32(pre + "attention.scale", a.attn_scale)
        w.add_f32(pre + "logit_scale", a.logit_scale)

    add_tokenizer(w, V)

    def mat(*shape):   # numpy order, last dim = fan_in
        return rng.standard_normal(shape) / np.sqrt(shape[-1])

    def norm(n):
        return 1.0 + 0.1 * rng.standard_normal(n)

    def put(name, arr, big=True):
        w.add_tensor(name, arr, wtype if big else G.T_F32)

    put("token_embd.weight", rng.standard_normal((V, D)))
    for i in range(L):
        b = "blk.%d." % i
        put(b + "attn_norm.weight", norm(D), False)
        put(b + "attn_q.weight", mat(Hq * hd, D))
        put(b + "attn_k.weight", mat(Hkv * hd, D))
        put(b + "attn_v.weight", mat(Hkv * hd, D))
        put(b + "attn_output.weight", mat(D, Hq * hd))
        if bias:
            put(b + "attn_q.bias", 0.5 * rng.standard_normal(Hq * hd), False)
            put(b + "attn_k.bias", 0.5 * rng.standard_normal(Hkv * hd), False)
            put(b + "attn_v.bias", 0.5 * rng.standard_normal(Hkv * hd), False)
        if qk_norm:
            put(b + "attn_q_norm.weight", norm(hd), False)
            put(b + "attn_k_norm.weight", norm(hd), False)
        if full_qk_norm:
            put(b + "attn_q_norm.weight", norm(Hq * hd), False)
            put(b + "attn_k_norm.weight", norm(Hkv * hd), False)
        put(b + "ffn_norm.weight", norm(D), False)
        if moe:
            # router scaled up a little so the expert choice is clear-cut
            put(b + "ffn_gate_inp.weight", 2.0 * mat(E, D), False)
            put(b + "ffn_gate_exps.weight", mat(E, F_exp, D))
            put(b + "ffn_up_exps.weight", mat(E, F_exp, D))
            put(b + "ffn_down_exps.weight", mat(E, D, F_exp))
            if F_sh > 0:
                if arch == "qwen2moe":
                    put(b + "ffn_gate_inp_shexp.weight", mat(D), False)
                put(b + "ffn_gate_shexp.weight", mat(F_sh, D))
                put(b + "ffn_up_shexp.weight", mat(F_sh, D))
                put(b + "ffn_down_shexp.weight", mat(D, F_sh))
        else:
            put(b + "ffn_gate.weight", mat(F, D))
            put(b + "ffn_up.weight", mat(F, D))
            put(b + "ffn_down.weight", mat(D, F))
    put("output_norm.weight", norm(D), False)
    if not a.tied:
        put("output.weight", a.out_scale * mat(V, D))
    return w


def main(argv):
    a, cfg = parse_args(argv)
    w = build(a, cfg)
    w.write(a.out)


if __name__ == "__main__":
    main(sys.argv[1:])
