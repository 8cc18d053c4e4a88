#!/usr/bin/python3
"""gen_model.py - write a small random-weight GGUF model for tests.

usage: gen_model.py ARCH OUT.gguf [--seed S] [--type f32|f16|bf16|q8_0]
                    [--tied] [--vocab V] [--embd D] [--layers L]
                    [--heads H] [--heads-kv HKV] [--head-dim HD]
                    [--ff F] [--experts E] [--used K] [--expert-ff FE]
                    [--ctx N] [--rope-base B] [--eps EPS] [--out-scale S]

ARCH is one of
  qwen3moe  Qwen3-MoE: q/k RMS norm per head, NEOX RoPE, merged expert tensors
  qwen3     Qwen3 dense: same attention, dense SiLU-gated FFN
  llama     LLaMA dense: no q/k norm, head_dim = D/heads, NORM RoPE
  mixtral   architecture "llama" with experts (llama.expert_count, ...);
            expert FFN size = llama.feed_forward_length

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
}

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
    for name in ("vocab", "embd", "layers", "heads", "heads-kv", "head-dim",
                 "ff", "experts", "used", "expert-ff", "ctx"):
        p.add_argument("--" + name, type=int, default=None)
    p.add_argument("--rope-base", type=float, default=10000.0)
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--out-scale", type=float, default=3.0)
    a = p.parse_args(argv)
    cfg = dict(DEFAULTS[a.arch])
    for k in list(cfg):
        v = getattr(a, k)
        if v is not None:
            cfg[k] = v
    cfg["ctx"] = a.ctx if a.ctx is not None else 256
    return a, cfg


def build(a, cfg):
    arch = a.arch
    rng = np.random.default_rng(a.seed)
    V, D, L = cfg["vocab"], cfg["embd"], cfg["layers"]
    Hq, Hkv = cfg["heads"], cfg["heads_kv"]
    E, K = cfg["experts"], cfg["used"]
    moe = arch in ("qwen3moe", "mixtral")
    qk_norm = arch in ("qwen3moe", "qwen3")
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
    if arch == "mixtral":
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
    w.add_u32(pre + "context_length", cfg["ctx"])
    w.add_u32(pre + "embedding_length", D)
    w.add_u32(pre + "block_count", L)
    w.add_u32(pre + "feed_forward_length", F)
    w.add_u32(pre + "attention.head_count", Hq)
    w.add_u32(pre + "attention.head_count_kv", Hkv)
    w.add_f32(pre + "rope.freq_base", a.rope_base)
    w.add_f32(pre + "attention.layer_norm_rms_epsilon", a.eps)
    if gguf_arch == "llama":
        w.add_u32(pre + "rope.dimension_count", hd)
    else:
        w.add_u32(pre + "attention.key_length", hd)
        w.add_u32(pre + "attention.value_length", hd)
    if moe:
        w.add_u32(pre + "expert_count", E)
        w.add_u32(pre + "expert_used_count", K)
        if arch == "qwen3moe":
            w.add_u32(pre + "expert_feed_forward_length", F_exp)

    # tokenizer
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
        if qk_norm:
            put(b + "attn_q_norm.weight", norm(hd), False)
            put(b + "attn_k_norm.weight", norm(hd), False)
        put(b + "ffn_norm.weight", norm(D), False)
        if moe:
            # router scaled up a little so the expert choice is clear-cut
            put(b + "ffn_gate_inp.weight", 2.0 * mat(E, D), False)
            put(b + "ffn_gate_exps.weight", mat(E, F_exp, D))
            put(b + "ffn_up_exps.weight", mat(E, F_exp, D))
            put(b + "ffn_down_exps.weight", mat(E, D, F_exp))
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
