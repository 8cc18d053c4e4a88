#!/usr/bin/python3
"""gen_bench_model.py - random-weight GGUF models of real geometries, written
directly in a quantized type (no float master copy), for speed benchmarks.

    python3 bench/gen_bench_model.py OUT.gguf --geometry G --layers N \
        --type Q8_0|Q4_K|Q4_K_M|Q2_K|IQ2_M|IQ1_M|F16 [--seed S]
    python3 bench/gen_bench_model.py --verify OUT.gguf     # read back, check
    python3 bench/gen_bench_model.py OUT.gguf --geometry pocket-35b --layers 4 \
        --vocab ../shared/tokenizer/ggml-vocab-qwen3.gguf  # a real tokenizer

The tokenizer is a byte vocabulary by default (the 256 byte characters, one
token per byte of text, fillers, Qwen's chat specials; no merges) and the
context 4,096 for the Qwen geometries. --vocab FILE writes instead the
tokenizer of a GGUF vocabulary (llama.cpp's ggml-vocab-*.gguf: tokens, types,
merges, special ids, pre-tokenizer), its tokens padded to the geometry's
vocabulary with unused tokens "[PAD<id>]" (type UNUSED, as converted Qwen files
pad: 151,936 -> 248,320 for pocket-35b), the real model's declared context
(REAL_CTX: 262,144 for pocket-35b) and a chat template: pocket-35b gets
Qwen3.5's (chat-templates/Qwen3.5-4B.jinja of ../shared, or $POCKET_SHARED),
the other geometries the vocabulary file's own. Text then tokenizes exactly
as with that vocabulary: an agent's 60 KB request is ~15k tokens, not ~60k.
The pre-tokenizer is the vocabulary's (qwen2 for Qwen3's), not the real
model's (Qwen3.5's qwen35 also joins combining marks to letters), so that it
stays equal to the vocabulary file. --chat-template FILE and --ctx N set
those two with either tokenizer; --vocab-only writes the metadata alone (no
tensors), a vocabulary file like llama.cpp's, for tokenizer tests.

Geometries (tensor and key names follow llama.cpp):
  qwen3-30b-a3b  arch qwen3moe: hidden 2048, 48 layers, 32 q / 4 kv heads of
                 128, 128 experts top-8 of FFN 768, vocab 151936, untied output.
  dense          arch qwen3: hidden 4096, 32 q / 8 kv heads of 128, FFN 12288,
                 vocab 151936, untied. Default 23 layers: 5.69 G parameters,
                 the same total as qwen3-30b-a3b at 8 layers (5.61 G), so the
                 two files have about the same size at a given type while the
                 dense one reads all of it per token.
  pocket-35b     arch qwen35moe (Qwen3.5-35B-A3B shape): hidden 2048, 40
                 layers, every 4th full attention (16 q / 2 kv heads of 256,
                 gated q, partial RoPE 64 dims), the others Gated DeltaNet (16
                 k-heads / 32 v-heads of 128, conv 4), 256 experts top-8 of FFN
                 512 + a gated shared expert of 512, vocab 248320. pocket
                 cannot run it yet; see ../shared/fixtures/qwen35moe/README.md.
  qwen3-next-80b-a3b  arch qwen3next (Qwen3-Next-80B-A3B): hidden 2048, 48
                 layers, every 4th full attention (16 q / 2 kv heads of 256,
                 gated q, partial RoPE 64 dims, base 1e7), the others Gated
                 DeltaNet (16 k-heads / 32 v-heads of 128, conv 4; beta and
                 alpha in one ssm_ba), 512 experts top-10 of FFN 512 + a gated
                 shared expert of 512, vocab 151936. 1.6 G parameters per
                 layer, so --layers 4 (one attention layer) is ~2.5 GB at Q2_K.
  gpt-oss-20b    arch gpt-oss (OpenAI gpt-oss-20b): hidden 2880, 24 layers
                 alternating sliding-window (128) / full attention, 64 q / 8
                 kv heads of 64 with biases and learned sinks, YaRN (factor
                 32 over 4096, base 150000), 32 experts top-4 of FFN 2880
                 with biases, vocab 201088. The experts are MXFP4 whatever
                 --type says (as released); --type sets the other matrices.
  gemma-4-26b-a4b  arch gemma4 (Gemma-4 26B-A4B): hidden 2816, 30 layers,
                 every 6th global (16 q / 2 kv heads of 512, K = V, RoPE base
                 1e6 on a quarter of the pairs via rope_freqs), the others
                 sliding-window 1024 (16 q / 8 kv heads of 256, base 1e4);
                 every layer a dense GeGLU MLP of 2112 and 128 experts top-8
                 of FFN 704; vocab 262144, final logit soft-cap 30. 25.2 G
                 parameters, 3.8 G active, KV 210 KiB per token at F16 (the
                 published figures; the shape is fitted to them).
  deepseek-v2-lite  arch deepseek2 (DeepSeek-V2-Lite): hidden 2048, 27
                 layers, MLA (16 heads, no q LoRA, latent 512, q/k 128 + 64
                 rotated, v 128; the cache keeps latent + rope key, 576
                 floats per token), YaRN (factor 40 over 4096), layer 0 a
                 dense SwiGLU of 10944, then 64 experts top-6 of FFN 1408
                 (softmax, not renormalised) + 2 shared, vocab 102400.

Types: 1-D tensors, norms, routers (ffn_gate_inp) and ssm_conv1d are F32.
A row length the type's block does not divide takes llama-quantize's
fallback (Q4_K -> Q5_0, Q2_K -> Q4_0, Q6_K -> Q8_0, the IQ types ->
IQ4_NL), as real files of
these geometries have (gpt-oss's 2880, Gemma-4's 2112 and 704,
DeepSeek-V2-Lite's 1408 and 128).
Q8_0 / Q4_K / Q2_K / F16 put every other matrix in that type; Q4_K_M is
llama-quantize's mix (src/offline/quantize.c rule_type): output Q6_K, attn_v (and
qwen35moe's attn_qkv) and ffn_down* Q6_K on the layers use_more_bits picks
(first n/8, last n/8, every third in between), everything else Q4_K.
IQ1_M and IQ2_M are llama-quantize's presets (iq_mix: its rules for the
presets below 3 bits): IQ1_M puts the matrices in IQ1_M, attn_output in
IQ2_XXS, attn_v / attn_qkv in Q4_K (4 experts or more), the first n/8
ffn_down tensors (counted in llama-quantize's order, routed and shared
alike) and token_embd in Q2_K, output in Q5_K; IQ2_M the same with IQ2_S for
IQ1_M and IQ3_S for IQ2_XXS and Q2_K. For pocket-35b at 40 layers: IQ1_M
8.23 GB (the published IQ1_M file of the real model: 8.24 GB), IQ2_M
11.65 GB.

Weights are random but every block is valid and zero-mean with a standard
deviation of about 1/sqrt(fan_in) (token_embd: 1), so activations stay O(1):
  Q8_0  d = sigma*sqrt(3)/127, qs uniform in [-127, 127]
  Q4_K  q uniform 4-bit, sc uniform 6-bit in [32, 63], dmin = 7.5 d, m = sc:
        w = d*sc*(q - 7.5)
  Q2_K  q uniform 2-bit, sc in [8, 15], dmin = 1.5 d, m = sc:
        w = d*sc*(q - 1.5)
  Q6_K  q uniform 6-bit, scales in [16, 48]: w = d*scale*(q - 32)
  Q4_0 / Q5_0  q uniform in [1, 15] / [1, 31]: w = d*(q - 8) / d*(q - 16)
  MXFP4 levels uniform over the 16 codes, exponent e or e + 1 per block so
        that the mean square is sigma^2
  Q5_K  as Q4_K with q uniform 5-bit and dmin = 15.5 d
  IQ4_NL levels uniform over the 16, d of random sign
  IQ2_XXS, IQ2_S, IQ3_S, IQ1_M  grid indices, sign bits (and IQ1_M's delta
        signs) uniform: every bit pattern is a valid index for these grids
        (2^8, 2^10, 2^9, 2^11 points) and sign code; sub-block scales ls
        uniform in the upper half of their range (4-bit: [8, 15], IQ1_M's
        3-bit: [4, 7]); d from the grid's mean square (grids read from
        pocket's sources, src/quant/iq*.c) so that the std is sigma
d is jittered per block by +-20%. Blocks are made with vectorised numpy in
chunks of about 64 MB and streamed to the file, so a 3 GB model takes a
minute or two (mostly disk and random-byte generation).
"""

import argparse
import math
import os
import re
import struct
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "lib"))
import gguf_py as G  # noqa: E402

# ggml type ids and (block elements, block bytes)
F32, F16, Q4_0, Q5_0, Q8_0, Q2_K, Q4_K, Q5_K, Q6_K, MXFP4 = (0, 1, 2, 6, 8, 10,
                                                             12, 13, 14, 39)
IQ2_XXS, IQ2_XS, IQ1_S, IQ4_NL, IQ3_S, IQ2_S, IQ1_M = 16, 17, 19, 20, 21, 22, 29
TNAME = {F32: "F32", F16: "F16", Q4_0: "Q4_0", Q5_0: "Q5_0", Q8_0: "Q8_0",
         Q2_K: "Q2_K", Q4_K: "Q4_K", Q5_K: "Q5_K", Q6_K: "Q6_K",
         MXFP4: "MXFP4", IQ2_XXS: "IQ2_XXS", IQ4_NL: "IQ4_NL", IQ3_S: "IQ3_S",
         IQ2_S: "IQ2_S", IQ1_M: "IQ1_M", IQ2_XS: "IQ2_XS", IQ1_S: "IQ1_S"}
BLOCK = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q5_0: (32, 22),
         Q8_0: (32, 34), Q2_K: (256, 84), Q4_K: (256, 144), Q5_K: (256, 176),
         Q6_K: (256, 210), MXFP4: (32, 17), IQ2_XXS: (256, 66),
         IQ4_NL: (32, 18), IQ3_S: (256, 110), IQ2_S: (256, 82),
         IQ1_M: (256, 56)}
FALLBACK = {Q4_K: Q5_0, Q2_K: Q4_0, Q6_K: Q8_0, IQ2_XXS: IQ4_NL,
            IQ3_S: IQ4_NL, IQ2_S: IQ4_NL, IQ1_M: IQ4_NL}
# llama_ftype written as general.file_type
FILE_TYPE = {"F16": 1, "Q8_0": 7, "Q2_K": 10, "Q4_K": 14, "Q4_K_M": 15,
             "IQ2_M": 29, "IQ1_M": 31}
# llama-quantize's presets below 3 bits: the default type of each (the
# generator writes IQ1_M and IQ2_M; iq_mix knows the rules of all six, which
# tests/ref/shared/t_bench_iq.sh checks against llama-quantize's files)
IQ_PRESETS = {"IQ1_S": IQ1_S, "IQ1_M": IQ1_M, "IQ2_XXS": IQ2_XXS,
              "IQ2_XS": IQ2_XS, "IQ2_S": IQ2_XS, "IQ2_M": IQ2_S}
ALIGN = 32
CHUNK_BYTES = 64 << 20


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


# ------------------------------------------------------------- geometries

def layers_default(geometry):
    return {"qwen3-30b-a3b": 48, "dense": 23, "pocket-35b": 40,
            "qwen3-next-80b-a3b": 48, "gpt-oss-20b": 24,
            "gemma-4-26b-a4b": 30, "deepseek-v2-lite": 27}[geometry]


def gpt2_byte_chars():
    """The 256 GPT-2 byte-level characters in bytes_to_unicode order."""
    printable = (list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) +
                 list(range(0xAE, 0x100)))
    chars = [chr(b) for b in printable]
    extra = 0
    for b in range(256):
        if b not in printable:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


# the context each Qwen geometry's real model declares (the others' specs
# already write theirs)
REAL_CTX = {"qwen3-30b-a3b": 40960, "dense": 40960, "pocket-35b": 262144,
            "qwen3-next-80b-a3b": 262144}
# the real model's chat template, in ../shared/chat-templates (else the
# --vocab file's own tokenizer.chat_template)
REAL_TEMPLATE = {"pocket-35b": "Qwen3.5-4B.jinja"}


def shared_dir():
    return os.environ.get("POCKET_SHARED") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")


def vocab_kv(path, vocab):
    """The tokenizer.ggml.* keys of the GGUF vocabulary at path, its tokens
    (types, scores) padded to vocab entries with "[PAD<id>]" UNUSED tokens,
    and its tokenizer.chat_template (None if it has none)."""
    try:
        g = G.read_gguf(path, load_data=False)
    except (OSError, G.GGUFError) as e:
        raise SystemExit("--vocab %s: %s" % (path, e))
    toks = g.kv.get("tokenizer.ggml.tokens")
    if not isinstance(toks, list) or not toks:
        raise SystemExit("--vocab %s: no tokenizer.ggml.tokens" % path)
    n = len(toks)
    if n > vocab:
        raise SystemExit("--vocab %s: %d tokens, more than the geometry's "
                         "vocabulary of %d" % (path, n, vocab))
    kv = []
    for k in g.kv_order:
        if not k.startswith("tokenizer.ggml."):
            continue
        vtype, at = g.kv_types[k]
        v = g.kv[k]
        if k == "tokenizer.ggml.tokens":
            v = toks + ["[PAD%d]" % i for i in range(n, vocab)]
        elif k in ("tokenizer.ggml.token_type", "tokenizer.ggml.scores"):
            if len(v) != n:
                raise SystemExit("--vocab %s: %s has %d entries for %d tokens"
                                 % (path, k, len(v), n))
            fill = 5 if k.endswith("token_type") else 0   # UNUSED / score 0
            v = np.concatenate([v, np.full(vocab - n, fill, dtype=v.dtype)])
        kv.append((k, vtype, v, at))
    return kv, g.kv.get("tokenizer.chat_template")


def set_tokenizer(spec, a, vocab):
    """Apply --vocab, --chat-template and --ctx to spec (vocab entries)."""
    template = None
    if a.vocab:
        kv, template = vocab_kv(a.vocab, vocab)
        spec.kv = [e for e in spec.kv if not e[0].startswith("tokenizer.")]
        spec.kv += kv
        if a.geometry in REAL_TEMPLATE and not a.chat_template:
            a.chat_template = os.path.join(shared_dir(), "chat-templates",
                                           REAL_TEMPLATE[a.geometry])
        if a.ctx is None and a.geometry in REAL_CTX:
            a.ctx = REAL_CTX[a.geometry]
    if a.chat_template:
        try:
            with open(a.chat_template, encoding="utf-8") as f:
                template = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise SystemExit("--chat-template %s: %s (POCKET_SHARED=DIR names "
                             "the shared directory)" % (a.chat_template, e))
    if template is not None:
        spec.kv = [e for e in spec.kv if e[0] != "tokenizer.chat_template"]
        spec.key("tokenizer.chat_template", G.STRING, template)
    if a.ctx is not None:
        key = [e[0] for e in spec.kv if e[0].endswith(".context_length") and
               not e[0].endswith("original_context_length")]
        assert len(key) == 1, key
        spec.kv = [e for e in spec.kv if e[0] != key[0]]
        spec.key(key[0], G.UINT32, a.ctx)


def tokenizer_kv(vocab, pre, first_special):
    """A loadable byte-level BPE vocabulary: the 256 byte characters, unique
    filler tokens, and Qwen's three chat specials at first_special.."""
    tokens = gpt2_byte_chars()
    tokens += ["<f%d>" % i for i in range(len(tokens), vocab)]
    types = np.ones(vocab, dtype=np.int32)           # NORMAL
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    for k, s in enumerate(specials):
        tokens[first_special + k] = s
        types[first_special + k] = 3                 # CONTROL
    eot, eos = first_special, first_special + 2
    return [
        ("tokenizer.ggml.model", G.STRING, "gpt2", None),
        ("tokenizer.ggml.pre", G.STRING, pre, None),
        ("tokenizer.ggml.tokens", G.ARRAY, tokens, G.STRING),
        ("tokenizer.ggml.token_type", G.ARRAY, types, G.INT32),
        ("tokenizer.ggml.merges", G.ARRAY, [], G.STRING),
        ("tokenizer.ggml.bos_token_id", G.UINT32, eot, None),
        ("tokenizer.ggml.eos_token_id", G.UINT32, eos, None),
        ("tokenizer.ggml.padding_token_id", G.UINT32, eot, None),
        ("tokenizer.ggml.add_bos_token", G.BOOL, False, None),
        ("tokenizer.ggml.add_eos_token", G.BOOL, False, None),
    ]


class Spec:
    """Tensor list: (name, ne (ggml order), kind, layer, sigma)."""

    def __init__(self):
        self.kv = []
        self.tensors = []

    def key(self, k, vtype, v, arr_type=None):
        self.kv.append((k, vtype, v, arr_type))

    def mat(self, name, ne, layer=-1, sigma=None, kind="mat"):
        """kind "mat" follows --type; "mxfp4" is always MXFP4."""
        if sigma is None:
            sigma = 1.0 / math.sqrt(ne[0])
        self.tensors.append((name, list(ne), kind, layer, sigma))

    def f32(self, name, ne, kind, layer=-1, sigma=1.0):
        self.tensors.append((name, list(ne), kind, layer, sigma))


def spec_qwen3(a, moe):
    s = Spec()
    if moe:
        arch, D, Hq, Hkv, hd, F, E, K, Fe = ("qwen3moe", 2048, 32, 4, 128,
                                             6144, 128, 8, 768)
    else:
        arch, D, Hq, Hkv, hd, F, E, K, Fe = ("qwen3", 4096, 32, 8, 128,
                                             12288, 0, 0, 0)
    V, L, p = 151936, a.layers, arch + "."
    s.key("general.architecture", G.STRING, arch)
    s.key("general.name", G.STRING, "pocket-bench-%s-%dL-%s" %
          (a.geometry, L, a.type))
    s.key("general.file_type", G.UINT32, FILE_TYPE[a.type])
    s.key("general.quantization_version", G.UINT32, 2)
    s.key(p + "block_count", G.UINT32, L)
    s.key(p + "context_length", G.UINT32, 4096)
    s.key(p + "embedding_length", G.UINT32, D)
    s.key(p + "feed_forward_length", G.UINT32, F)
    s.key(p + "attention.head_count", G.UINT32, Hq)
    s.key(p + "attention.head_count_kv", G.UINT32, Hkv)
    s.key(p + "attention.key_length", G.UINT32, hd)
    s.key(p + "attention.value_length", G.UINT32, hd)
    s.key(p + "attention.layer_norm_rms_epsilon", G.FLOAT32, 1e-6)
    s.key(p + "rope.freq_base", G.FLOAT32, 1e6)
    if moe:
        s.key(p + "expert_count", G.UINT32, E)
        s.key(p + "expert_used_count", G.UINT32, K)
        s.key(p + "expert_feed_forward_length", G.UINT32, Fe)
    for k in tokenizer_kv(V, "qwen2", 151643):
        s.key(*k)
    s.mat("token_embd.weight", [D, V], sigma=1.0)
    s.f32("output_norm.weight", [D], "norm")
    s.mat("output.weight", [D, V])
    for i in range(L):
        b = "blk.%d." % i
        s.f32(b + "attn_norm.weight", [D], "norm", i)
        s.mat(b + "attn_q.weight", [D, Hq * hd], i)
        s.mat(b + "attn_k.weight", [D, Hkv * hd], i)
        s.mat(b + "attn_v.weight", [D, Hkv * hd], i)
        s.mat(b + "attn_output.weight", [Hq * hd, D], i)
        s.f32(b + "attn_q_norm.weight", [hd], "norm", i)
        s.f32(b + "attn_k_norm.weight", [hd], "norm", i)
        s.f32(b + "ffn_norm.weight", [D], "norm", i)
        if moe:
            s.f32(b + "ffn_gate_inp.weight", [D, E], "router", i,
                  1.0 / math.sqrt(D))
            s.mat(b + "ffn_gate_exps.weight", [D, Fe, E], i)
            s.mat(b + "ffn_up_exps.weight", [D, Fe, E], i)
            s.mat(b + "ffn_down_exps.weight", [Fe, D, E], i)
        else:
            s.mat(b + "ffn_gate.weight", [D, F], i)
            s.mat(b + "ffn_up.weight", [D, F], i)
            s.mat(b + "ffn_down.weight", [F, D], i)
    return s


# the two Gated DeltaNet hybrids: Qwen3.5-35B-A3B's shape (qwen35moe: IMROPE
# sections, separate beta/alpha) and Qwen3-Next-80B-A3B's (qwen3next: plain
# partial RoPE, beta/alpha in one ssm_ba)
HYBRIDS = {
    "pocket-35b": dict(arch="qwen35moe", V=248320, rope_base=1e7, E=256, K=8,
                       F=512, pre="qwen35", first_special=248044),
    "qwen3-next-80b-a3b": dict(arch="qwen3next", V=151936, rope_base=1e7,
                               E=512, K=10, F=5120, pre="qwen2",
                               first_special=151643),
}


def spec_hybrid(a):
    s = Spec()
    g = HYBRIDS[a.geometry]
    arch = g["arch"]
    nxt = arch == "qwen3next"
    D, V, L, p = 2048, g["V"], a.layers, arch + "."
    Hq, Hkv, hd, n_rot = 16, 2, 256, 64
    Hk, Hv, dS, conv = 16, 32, 128, 4          # DeltaNet heads, head dim
    E, K, Fe, Fs, interval = g["E"], g["K"], 512, 512, 4
    qkv = 2 * Hk * dS + Hv * dS                # conv channels: q | k | v
    s.key("general.architecture", G.STRING, arch)
    s.key("general.type", G.STRING, "model")
    s.key("general.name", G.STRING, "pocket-bench-%s-%dL-%s" %
          (a.geometry, L, a.type))
    s.key("general.file_type", G.UINT32, FILE_TYPE[a.type])
    s.key("general.quantization_version", G.UINT32, 2)
    s.key(p + "block_count", G.UINT32, L)
    s.key(p + "context_length", G.UINT32, 4096)
    s.key(p + "embedding_length", G.UINT32, D)
    s.key(p + "feed_forward_length", G.UINT32, g["F"])
    s.key(p + "attention.head_count", G.UINT32, Hq)
    s.key(p + "attention.head_count_kv", G.UINT32, Hkv)
    s.key(p + "attention.key_length", G.UINT32, hd)
    s.key(p + "attention.value_length", G.UINT32, hd)
    s.key(p + "attention.layer_norm_rms_epsilon", G.FLOAT32, 1e-6)
    s.key(p + "rope.freq_base", G.FLOAT32, g["rope_base"])
    s.key(p + "rope.dimension_count", G.UINT32, n_rot)
    if not nxt:
        s.key(p + "rope.dimension_sections", G.ARRAY,
              np.array([11, 11, 10, 0], dtype=np.int32), G.INT32)
    s.key(p + "expert_count", G.UINT32, E)
    s.key(p + "expert_used_count", G.UINT32, K)
    s.key(p + "expert_feed_forward_length", G.UINT32, Fe)
    s.key(p + "expert_shared_feed_forward_length", G.UINT32, Fs)
    s.key(p + "ssm.conv_kernel", G.UINT32, conv)
    s.key(p + "ssm.state_size", G.UINT32, dS)
    s.key(p + "ssm.group_count", G.UINT32, Hk)
    s.key(p + "ssm.time_step_rank", G.UINT32, Hv)
    s.key(p + "ssm.inner_size", G.UINT32, Hv * dS)
    s.key(p + "full_attention_interval", G.UINT32, interval)
    for k in tokenizer_kv(V, g["pre"], g["first_special"]):
        s.key(*k)
    s.mat("token_embd.weight", [D, V], sigma=1.0)
    s.f32("output_norm.weight", [D], "norm")
    s.mat("output.weight", [D, V])
    for i in range(L):
        b = "blk.%d." % i
        s.f32(b + "attn_norm.weight", [D], "norm", i)
        s.f32(b + "post_attention_norm.weight", [D], "norm", i)
        if (i + 1) % interval == 0:            # gated full attention
            s.mat(b + "attn_q.weight", [D, 2 * Hq * hd], i)
            s.mat(b + "attn_k.weight", [D, Hkv * hd], i)
            s.mat(b + "attn_v.weight", [D, Hkv * hd], i)
            s.f32(b + "attn_q_norm.weight", [hd], "norm", i)
            s.f32(b + "attn_k_norm.weight", [hd], "norm", i)
            s.mat(b + "attn_output.weight", [Hq * hd, D], i)
        else:                                  # Gated DeltaNet
            s.mat(b + "attn_qkv.weight", [D, qkv], i)
            s.mat(b + "attn_gate.weight", [D, Hv * dS], i)
            s.f32(b + "ssm_conv1d.weight", [conv, qkv], "conv", i, 0.5)
            s.f32(b + "ssm_dt.bias", [Hv], "dt_bias", i)
            s.f32(b + "ssm_a", [Hv], "ssm_a", i)
            if nxt:                            # per k head [beta | alpha]
                s.mat(b + "ssm_ba.weight", [D, 2 * Hv], i)
            else:
                s.mat(b + "ssm_beta.weight", [D, Hv], i)
                s.mat(b + "ssm_alpha.weight", [D, Hv], i, 0.5 / math.sqrt(D))
            s.f32(b + "ssm_norm.weight", [dS], "norm", i)
            s.mat(b + "ssm_out.weight", [Hv * dS, D], i)
        s.f32(b + "ffn_gate_inp.weight", [D, E], "router", i,
              1.0 / math.sqrt(D))
        s.mat(b + "ffn_gate_exps.weight", [D, Fe, E], i)
        s.mat(b + "ffn_up_exps.weight", [D, Fe, E], i)
        s.mat(b + "ffn_down_exps.weight", [Fe, D, E], i)
        s.f32(b + "ffn_gate_inp_shexp.weight", [D], "router", i,
              1.0 / math.sqrt(D))
        s.mat(b + "ffn_gate_shexp.weight", [D, Fs], i)
        s.mat(b + "ffn_up_shexp.weight", [D, Fs], i)
        s.mat(b + "ffn_down_shexp.weight", [Fs, D], i)
    return s


def spec_head(s, a, arch, file_type=None):
    s.key("general.architecture", G.STRING, arch)
    s.key("general.type", G.STRING, "model")
    s.key("general.name", G.STRING, "pocket-bench-%s-%dL-%s" %
          (a.geometry, a.layers, a.type))
    s.key("general.file_type", G.UINT32,
          FILE_TYPE[a.type] if file_type is None else file_type)
    s.key("general.quantization_version", G.UINT32, 2)


def spec_vocab(s, D, V, pre, first_special, tied=False):
    """The tokenizer keys, the embedding, the final norm and (untied) the
    LM head."""
    for k in tokenizer_kv(V, pre, first_special):
        s.key(*k)
    s.mat("token_embd.weight", [D, V], sigma=1.0)
    s.f32("output_norm.weight", [D], "norm")
    if not tied:
        s.mat("output.weight", [D, V])


def spec_gptoss(a):
    s = Spec()
    arch, p = "gpt-oss", "gpt-oss."
    D, L, V, Hq, Hkv, hd, E, K, Fe, W = (2880, a.layers, 201088, 64, 8, 64,
                                         32, 4, 2880, 128)
    spec_head(s, a, arch, 38)                  # MOSTLY_MXFP4_MOE
    for k, t, v in (("block_count", G.UINT32, L),
                    ("context_length", G.UINT32, 131072),
                    ("embedding_length", G.UINT32, D),
                    ("feed_forward_length", G.UINT32, Fe),
                    ("attention.head_count", G.UINT32, Hq),
                    ("attention.head_count_kv", G.UINT32, Hkv),
                    ("attention.key_length", G.UINT32, hd),
                    ("attention.value_length", G.UINT32, hd),
                    ("attention.layer_norm_rms_epsilon", G.FLOAT32, 1e-5),
                    ("attention.sliding_window", G.UINT32, W),
                    ("rope.freq_base", G.FLOAT32, 150000.0),
                    ("rope.scaling.type", G.STRING, "yarn"),
                    ("rope.scaling.factor", G.FLOAT32, 32.0),
                    ("rope.scaling.original_context_length", G.UINT32, 4096),
                    ("expert_count", G.UINT32, E),
                    ("expert_used_count", G.UINT32, K),
                    ("expert_feed_forward_length", G.UINT32, Fe)):
        s.key(p + k, t, v)
    spec_vocab(s, D, V, "gpt-4o", 199998)
    for i in range(L):
        b = "blk.%d." % i
        s.f32(b + "attn_norm.weight", [D], "norm", i)
        for n, rows in (("attn_q", Hq * hd), ("attn_k", Hkv * hd),
                        ("attn_v", Hkv * hd)):
            s.mat(b + n + ".weight", [D, rows], i)
            s.f32(b + n + ".bias", [rows], "bias", i)
        s.mat(b + "attn_output.weight", [Hq * hd, D], i)
        s.f32(b + "attn_output.bias", [D], "bias", i)
        s.f32(b + "attn_sinks.weight", [Hq], "bias", i)
        s.f32(b + "post_attention_norm.weight", [D], "norm", i)
        s.f32(b + "ffn_gate_inp.weight", [D, E], "router", i,
              1.0 / math.sqrt(D))
        s.f32(b + "ffn_gate_inp.bias", [E], "bias", i)
        for n, ne, bias in (("ffn_gate_exps", [D, Fe, E], [Fe, E]),
                            ("ffn_up_exps", [D, Fe, E], [Fe, E]),
                            ("ffn_down_exps", [Fe, D, E], [D, E])):
            s.mat(b + n + ".weight", ne, i, kind="mxfp4")
            s.f32(b + n + ".bias", bias, "bias", i)
    return s


def spec_gemma4(a):
    s = Spec()
    arch, p = "gemma4", "gemma4."
    D, L, V, Hq = 2816, a.layers, 262144, 16
    hd_s, kv_s, hd_g, kv_g, W = 256, 8, 512, 2, 1024
    F, E, K, Fe = 2112, 128, 8, 704
    glob = [i % 6 == 5 for i in range(L)]
    spec_head(s, a, arch)
    for k, t, v in (("block_count", G.UINT32, L),
                    ("context_length", G.UINT32, 262144),
                    ("embedding_length", G.UINT32, D),
                    ("feed_forward_length", G.UINT32, F),
                    ("attention.head_count", G.UINT32, Hq),
                    ("attention.layer_norm_rms_epsilon", G.FLOAT32, 1e-6),
                    ("attention.key_length", G.UINT32, hd_g),
                    ("attention.value_length", G.UINT32, hd_g),
                    ("attention.key_length_swa", G.UINT32, hd_s),
                    ("attention.value_length_swa", G.UINT32, hd_s),
                    ("rope.freq_base", G.FLOAT32, 1e6),
                    ("rope.freq_base_swa", G.FLOAT32, 1e4),
                    ("rope.dimension_count", G.UINT32, hd_g),
                    ("rope.dimension_count_swa", G.UINT32, hd_s),
                    ("attention.sliding_window", G.UINT32, W),
                    ("attention.shared_kv_layers", G.UINT32, 0),
                    ("embedding_length_per_layer_input", G.UINT32, 0),
                    ("final_logit_softcapping", G.FLOAT32, 30.0),
                    ("expert_count", G.UINT32, E),
                    ("expert_used_count", G.UINT32, K),
                    ("expert_feed_forward_length", G.UINT32, Fe)):
        s.key(p + k, t, v)
    s.key(p + "attention.head_count_kv", G.ARRAY,
          np.array([kv_g if g else kv_s for g in glob], dtype=np.int32),
          G.INT32)
    s.key(p + "attention.sliding_window_pattern", G.ARRAY,
          [not g for g in glob], G.BOOL)
    spec_vocab(s, D, V, "gpt-2", 262140, tied=True)
    s.f32("rope_freqs.weight", [hd_g // 2], "rope_freqs")
    for i in range(L):
        b = "blk.%d." % i
        hd, kv = (hd_g, kv_g) if glob[i] else (hd_s, kv_s)
        s.f32(b + "attn_norm.weight", [D], "norm", i)
        s.mat(b + "attn_q.weight", [D, Hq * hd], i)
        s.mat(b + "attn_k.weight", [D, kv * hd], i)
        if not glob[i]:                        # global layers: V = K
            s.mat(b + "attn_v.weight", [D, kv * hd], i)
        s.f32(b + "attn_q_norm.weight", [hd], "norm", i)
        s.f32(b + "attn_k_norm.weight", [hd], "norm", i)
        s.mat(b + "attn_output.weight", [Hq * hd, D], i)
        s.f32(b + "post_attention_norm.weight", [D], "norm", i)
        s.f32(b + "ffn_norm.weight", [D], "norm", i)
        s.mat(b + "ffn_gate.weight", [D, F], i)
        s.mat(b + "ffn_up.weight", [D, F], i)
        s.mat(b + "ffn_down.weight", [F, D], i)
        s.f32(b + "post_ffw_norm_1.weight", [D], "norm", i)
        s.f32(b + "ffn_gate_inp.weight", [D, E], "router", i, 1.0)
        s.f32(b + "ffn_gate_inp.scale", [D], "norm", i)
        s.f32(b + "pre_ffw_norm_2.weight", [D], "norm", i)
        s.mat(b + "ffn_gate_up_exps.weight", [D, 2 * Fe, E], i)
        s.mat(b + "ffn_down_exps.weight", [Fe, D, E], i)
        s.f32(b + "ffn_down_exps.scale", [E], "norm", i)
        s.f32(b + "post_ffw_norm_2.weight", [D], "norm", i)
        s.f32(b + "post_ffw_norm.weight", [D], "norm", i)
        s.f32(b + "layer_output_scale.weight", [1], "norm", i)
    return s


def spec_deepseek2(a):
    s = Spec()
    arch, p = "deepseek2", "deepseek2."
    D, L, V, H = 2048, a.layers, 102400, 16
    r, nope, rope, dv = 512, 128, 64, 128
    F, E, K, Fe, n_sh, n_dense = 10944, 64, 6, 1408, 2, 1
    spec_head(s, a, arch)
    for k, t, v in (("block_count", G.UINT32, L),
                    ("context_length", G.UINT32, 163840),
                    ("embedding_length", G.UINT32, D),
                    ("feed_forward_length", G.UINT32, F),
                    ("attention.head_count", G.UINT32, H),
                    ("attention.head_count_kv", G.UINT32, 1),
                    ("rope.freq_base", G.FLOAT32, 10000.0),
                    ("attention.layer_norm_rms_epsilon", G.FLOAT32, 1e-6),
                    ("expert_count", G.UINT32, E),
                    ("expert_used_count", G.UINT32, K),
                    ("expert_gating_func", G.UINT32, 1),
                    ("leading_dense_block_count", G.UINT32, n_dense),
                    ("vocab_size", G.UINT32, V),
                    ("attention.q_lora_rank", G.UINT32, 0),
                    ("attention.kv_lora_rank", G.UINT32, r),
                    ("attention.key_length", G.UINT32, r + rope),
                    ("attention.value_length", G.UINT32, r),
                    ("attention.key_length_mla", G.UINT32, nope + rope),
                    ("attention.value_length_mla", G.UINT32, dv),
                    ("expert_feed_forward_length", G.UINT32, Fe),
                    ("expert_shared_count", G.UINT32, n_sh),
                    ("expert_weights_scale", G.FLOAT32, 1.0),
                    ("expert_weights_norm", G.BOOL, False),
                    ("rope.dimension_count", G.UINT32, rope),
                    ("rope.scaling.type", G.STRING, "yarn"),
                    ("rope.scaling.factor", G.FLOAT32, 40.0),
                    ("rope.scaling.original_context_length", G.UINT32, 4096),
                    ("rope.scaling.yarn_log_multiplier", G.FLOAT32, 0.0707)):
        s.key(p + k, t, v)
    spec_vocab(s, D, V, "deepseek-llm", 100000)
    for i in range(L):
        b = "blk.%d." % i
        s.f32(b + "attn_norm.weight", [D], "norm", i)
        s.mat(b + "attn_q.weight", [D, H * (nope + rope)], i)
        s.mat(b + "attn_kv_a_mqa.weight", [D, r + rope], i)
        s.f32(b + "attn_kv_a_norm.weight", [r], "norm", i)
        s.mat(b + "attn_k_b.weight", [nope, r, H], i)
        s.mat(b + "attn_v_b.weight", [r, dv, H], i)
        s.mat(b + "attn_output.weight", [H * dv, D], i)
        s.f32(b + "ffn_norm.weight", [D], "norm", i)
        if i < n_dense:
            s.mat(b + "ffn_gate.weight", [D, F], i)
            s.mat(b + "ffn_up.weight", [D, F], i)
            s.mat(b + "ffn_down.weight", [F, D], i)
            continue
        s.f32(b + "ffn_gate_inp.weight", [D, E], "router", i,
              1.0 / math.sqrt(D))
        s.mat(b + "ffn_gate_exps.weight", [D, Fe, E], i)
        s.mat(b + "ffn_up_exps.weight", [D, Fe, E], i)
        s.mat(b + "ffn_down_exps.weight", [Fe, D, E], i)
        s.mat(b + "ffn_gate_shexp.weight", [D, n_sh * Fe], i)
        s.mat(b + "ffn_up_shexp.weight", [D, n_sh * Fe], i)
        s.mat(b + "ffn_down_shexp.weight", [n_sh * Fe, D], i)
    return s


SPECS = {"gpt-oss-20b": spec_gptoss, "gemma-4-26b-a4b": spec_gemma4,
         "deepseek-v2-lite": spec_deepseek2}


def tensor_type(name, kind, layer, n_layer, qtype, ne0, iq=None):
    """ggml type of one tensor under --type qtype (iq: its type in an IQ
    preset's mix), with llama-quantize's fallback where the row length is
    not a multiple of the block."""
    t = _tensor_type(name, kind, layer, n_layer, qtype) if iq is None or \
        kind == "mxfp4" else iq
    if ne0 % BLOCK[t][0] and t in FALLBACK:
        t = FALLBACK[t]
    return t


def _tensor_type(name, kind, layer, n_layer, qtype):
    if kind == "mxfp4":
        return MXFP4
    if kind != "mat":
        return F32
    if qtype != "Q4_K_M":
        return {"Q8_0": Q8_0, "Q4_K": Q4_K, "Q2_K": Q2_K, "F16": F16}[qtype]
    if name == "output.weight":
        return Q6_K
    # attn_v-like tensors: one per layer here, so llama-quantize's running
    # counter equals the layer number; ffn_down*: layer from the name.
    if ("attn_v.weight" in name or "attn_qkv.weight" in name or
            "ffn_down" in name):
        return Q6_K if use_more_bits(layer, n_layer) else Q4_K
    return Q4_K


def layer_of(name):
    m = re.match(r"blk\.(\d+)\.", name)
    return int(m.group(1)) if m else -1


def iq_mix(tensors, preset, n_layer, n_gqa, n_expert):
    """llama-quantize's types for a preset below 3 bits (llama.cpp's
    llama-quant.cpp; pocket's copy is src/offline/quantize.c rule_type):
    tensors is a list of (name, ne, quantizable), the result a dict name ->
    ggml type before the row-length fallback. The first n_layer / 8 ffn_down
    tensors are counted in llama-quantize's order (layer, then name), so a
    layer's routed and shared ffn_down both count."""
    two = preset in ("IQ2_S", "IQ2_M")
    tied = all(t[0] != "output.weight" for t in tensors)
    out, i_down = {}, 0
    for name, ne, quantizable in sorted(tensors,
                                        key=lambda t: (layer_of(t[0]), t[0])):
        if not quantizable:
            continue
        t = IQ_PRESETS[preset]
        if name == "output.weight" or (tied and name == "token_embd.weight"):
            t = Q8_0 if ne[0] % 256 else Q5_K
        elif name == "token_embd.weight":
            t = IQ3_S if two else Q2_K
        elif any(k in name for k in ("attn_qkv.weight", "attn_kv_b.weight",
                                     "attn_v.weight")):
            t = (Q4_K if n_gqa >= 4 or n_expert >= 4 else
                 IQ3_S if two else Q2_K)
        elif n_expert == 8 and "attn_k.weight" in name:
            t = Q4_K
        elif "attn_q.weight" in name or "ffn_up" in name or "ffn_gate" in name:
            pass
        elif "ffn_down" in name:
            if i_down < n_layer // 8:
                t = IQ3_S if two else Q2_K
            i_down += 1
        elif "attn_output.weight" in name:
            t = (Q5_K if n_expert == 8 else IQ3_S if two else
                 IQ2_XXS if preset in ("IQ1_S", "IQ1_M") else t)
        out[name] = t
    return out


def spec_iq_mix(spec, a):
    """iq_mix for the geometry's tensors (None unless --type is an IQ
    preset); n_gqa and n_expert as llama.cpp reads them (layer 0's head
    count where it is per layer)."""
    if a.type not in IQ_PRESETS:
        return None

    def hp(suffix):
        v = next((v for k, _, v, _ in spec.kv if k.endswith("." + suffix)), 0)
        return int(v[0]) if hasattr(v, "__len__") else int(v)
    n_head, n_kv = hp("attention.head_count"), hp("attention.head_count_kv")
    return iq_mix([(n, ne, k == "mat") for n, ne, k, _, _ in spec.tensors],
                  a.type, a.layers, n_head // (n_kv or n_head),
                  hp("expert_count"))


# ------------------------------------------------------------ block makers

def _jitter(rng, n):
    return rng.uniform(0.8, 1.2, n)


def make_q8_0(rng, nb, sigma):
    dt = np.dtype([("d", "<f2"), ("q", "i1", (32,))])
    a = np.frombuffer(bytearray(rng.bytes(nb * 34)), dtype=dt)
    q = a["q"]
    np.maximum(q, -127, out=q)                 # as ggml's quantizer: no -128
    a["d"] = (sigma * math.sqrt(3.0) / 127.0 * _jitter(rng, nb))
    return a


def _k_scales(rng, a, nb, sigma, bits):
    """d, dmin and the 12 packed scale bytes of a Q4_K (bits 4) or Q5_K
    (bits 5) block: sc uniform 6-bit in [32, 63], m = sc and dmin = h d with
    h = (2^bits - 1) / 2, so w = d*sc*(q - h): zero mean, std d * sc *
    sqrt((4^bits - 1) / 12) for q uniform."""
    h = ((1 << bits) - 1) / 2.0
    sc = rng.integers(32, 64, size=(nb, 8), dtype=np.uint8)
    m = sc
    d = (sigma / (47.5 * math.sqrt(((1 << 2 * bits) - 1) / 12.0)) *
         _jitter(rng, nb))
    d16 = d.astype(np.float16)
    a["d"] = d16
    a["dmin"] = (d16.astype(np.float32) * h).astype(np.float16)
    p = a["sc"]
    p[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    p[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    p[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    return a


def make_q4_K(rng, nb, sigma):
    dt = np.dtype([("d", "<f2"), ("dmin", "<f2"), ("sc", "u1", (12,)),
                   ("q", "u1", (128,))])
    return _k_scales(rng, np.frombuffer(bytearray(rng.bytes(nb * 144)),
                                        dtype=dt), nb, sigma, 4)


def make_q5_K(rng, nb, sigma):
    dt = np.dtype([("d", "<f2"), ("dmin", "<f2"), ("sc", "u1", (12,)),
                   ("qh", "u1", (32,)), ("q", "u1", (128,))])
    return _k_scales(rng, np.frombuffer(bytearray(rng.bytes(nb * 176)),
                                        dtype=dt), nb, sigma, 5)


def make_q2_K(rng, nb, sigma):
    dt = np.dtype([("sc", "u1", (16,)), ("q", "u1", (64,)), ("d", "<f2"),
                   ("dmin", "<f2")])
    a = np.frombuffer(bytearray(rng.bytes(nb * 84)), dtype=dt)
    sc = rng.integers(8, 16, size=(nb, 16), dtype=np.uint8)
    a["sc"] = sc | (sc << 4)                   # min = scale, dmin = 1.5 d
    # std of d*sc*(q-1.5), q uniform 0..3: d * sc * sqrt(15/12)
    d = (sigma / (11.5 * math.sqrt(15.0 / 12.0)) * _jitter(rng, nb))
    d16 = d.astype(np.float16)
    a["d"] = d16
    a["dmin"] = (d16.astype(np.float32) * 1.5).astype(np.float16)
    return a


def make_q6_K(rng, nb, sigma):
    dt = np.dtype([("ql", "u1", (128,)), ("qh", "u1", (64,)),
                   ("sc", "i1", (16,)), ("d", "<f2")])
    a = np.frombuffer(bytearray(rng.bytes(nb * 210)), dtype=dt)
    a["sc"] = rng.integers(16, 49, size=(nb, 16), dtype=np.int8)
    # std of d*sc*(q-32), q uniform 0..63: d * sc * sqrt(4095/12)
    a["d"] = (sigma / (32.0 * math.sqrt(4095.0 / 12.0)) * _jitter(rng, nb))
    return a


def make_q4_0(rng, nb, sigma):
    dt = np.dtype([("d", "<f2"), ("q", "u1", (16,))])
    a = np.zeros(nb, dtype=dt)
    q = rng.integers(1, 16, size=(nb, 32), dtype=np.uint8)
    a["q"] = q[:, :16] | (q[:, 16:] << 4)
    a["d"] = sigma / math.sqrt(224.0 / 12.0) * _jitter(rng, nb)
    return a


def make_q5_0(rng, nb, sigma):
    dt = np.dtype([("d", "<f2"), ("qh", "<u4"), ("q", "u1", (16,))])
    a = np.zeros(nb, dtype=dt)
    q = rng.integers(1, 32, size=(nb, 32), dtype=np.uint8)
    a["q"] = (q[:, :16] & 15) | ((q[:, 16:] & 15) << 4)
    a["qh"] = np.packbits(q >> 4, axis=1, bitorder="little").view("<u4")[:, 0]
    a["d"] = sigma / math.sqrt(960.0 / 12.0) * _jitter(rng, nb)
    return a


MXFP4_LEVELS = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8,
                         -12], dtype=np.float64)


def make_mxfp4(rng, nb, sigma):
    dt = np.dtype([("e", "u1"), ("q", "u1", (16,))])
    a = np.frombuffer(bytearray(rng.bytes(nb * 17)), dtype=dt)
    # weight = level * 2^(e - 128); mean square of the levels 34.25: pick
    # e0 = floor(log2 d) and e0 + 1 with the probability that gives sigma^2
    d = sigma / math.sqrt(34.25)
    e0 = math.floor(math.log2(d))
    pr = ((d / 2.0 ** e0) ** 2 - 1) / 3
    a["e"] = 128 + e0 + (rng.random(nb) < pr)
    return a


def make_iq4_nl(rng, nb, sigma):
    """IQ4_NL (the IQ types' fallback for rows of 32k): nibbles uniform over
    the 16 levels, d of either sign (the levels are not symmetric; ggml's
    quantizer gives d either sign too)."""
    dt = np.dtype([("d", "<f2"), ("q", "u1", (16,))])
    a = np.frombuffer(bytearray(rng.bytes(nb * 18)), dtype=dt)
    rms = math.sqrt(float(np.mean(IQ4NL_LEVELS ** 2)))
    a["d"] = (sigma / rms * _jitter(rng, nb) *
              np.where(rng.random(nb) < 0.5, -1.0, 1.0))
    return a


# ------------------------------------------------------- i-quant grids
# The lattice grids of the i-quants are part of their formats. They are read
# from pocket's sources (src/quant/iq1.c, iq2.c, iq3.c), where each is kept
# in a compact form with a test against ggml's tables: the generator needs
# their mean square (to set d) and --verify their points.

QUANT_SRC = os.path.normpath(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "src", "quant"))
IQ4NL_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25,
                         38, 53, 69, 89, 113], dtype=np.float64)
# per type (source file, C name, keys, levels, coordinates, points): the C
# array is a bitmap over the keys k = sum_j i_j L^j (i_j the level index of
# coordinate j), the grid its set keys in increasing order; IQ2_XXS's is
# instead a macro listing its points as 2-bit level indices.
GRID_SRC = {
    IQ1_M: ("iq1.c", "iq1_grid_map", 6561, (-1, 0, 1), 8, 2048),
    IQ2_XXS: ("iq2.c", "PK_IQ2XXS_POINTS", None, (8, 25, 43), 8, 256),
    IQ2_S: ("iq3.c", "iq2s_keys", 6561, (8, 25, 43), 8, 1024),
    IQ3_S: ("iq3.c", "iq3s_keys", 4096, tuple(range(1, 16, 2)), 4, 512),
}
_GRIDS = {}


def iq_grid(t):
    """The grid of i-quant type t: (points, coordinates) float64."""
    if t in _GRIDS:
        return _GRIDS[t]
    fname, cname, nkeys, levels, n, count = GRID_SRC[t]
    path = os.path.join(QUANT_SRC, fname)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SystemExit("%s: %s (the %s grid is read from pocket's sources)"
                         % (path, e.strerror, TNAME[t]))
    L = len(levels)
    if nkeys is None:
        # the macro runs to the first blank line
        m = re.search(r"#define %s\(G\)(.*?)\n\s*\n" % cname, text, re.S)
        body = m.group(1) if m else ""
        keys = np.array([int(x, 16) for x in
                         re.findall(r"G\((0x[0-9a-fA-F]+)\)", body)])
        idx = (keys[:, None] >> (2 * np.arange(n))) & 3
    else:
        m = re.search(r"\b%s\[\d+\]\s*=\s*\{(.*?)\};" % cname, text, re.S)
        words = [int(x, 16) for x in
                 re.findall(r"0x([0-9a-fA-F]+)", m.group(1) if m else "")]
        bits = np.unpackbits(np.array(words, dtype="<u8").view(np.uint8),
                             bitorder="little")[:nkeys]
        keys = np.nonzero(bits)[0]
        idx = (keys[:, None] // L ** np.arange(n)) % L
    if len(keys) != count:
        raise SystemExit("%s: %s gives %d %s grid points, not %d" % (
            path, cname, len(keys), TNAME[t], count))
    g = np.asarray(levels, np.float64)[idx]
    _GRIDS[t] = g
    return g


def _iq_d(rng, nb, sigma, t, scale, ls, extra=0.0):
    """d of an i-quant block whose weights are d * scale(ls) * (level (+-
    delta)), levels from uniformly random grid points: E w^2 = d^2 *
    E scale^2 * (E level^2 + extra), ls uniform over the given range."""
    ms = (np.mean(scale(np.asarray(ls, np.float64)) ** 2) *
          (np.mean(iq_grid(t) ** 2) + extra))
    return (sigma / math.sqrt(ms) * _jitter(rng, nb)).astype(np.float16)


# Every bit pattern of the i-quants' index and sign fields is valid (11-bit
# IQ1 index into 2048 points, IQ2_XXS 8 bits into 256, IQ2_S 10 into 1024,
# IQ3_S 9 into 512, 7-bit sign codes into 128), so those bytes stay random;
# the 3- and 4-bit sub-block scales ls are drawn from the upper half of their
# range, as the existing K-quant makers draw theirs, and d set for sigma.

def make_iq2_xxs(rng, nb, sigma):
    # per sub-block two words: 4 grid indices; 4 x 7 sign bits and ls << 28.
    # w = d * (0.5 + ls) / 4 * level * sign
    dt = np.dtype([("d", "<f2"), ("qs", "<u4", (16,))])
    a = np.frombuffer(bytearray(rng.bytes(nb * 66)), dtype=dt)
    ls = rng.integers(8, 16, size=(nb, 8), dtype=np.uint32)
    a["qs"][:, 1::2] = (a["qs"][:, 1::2] & 0x0FFFFFFF) | (ls << 28)
    a["d"] = _iq_d(rng, nb, sigma, IQ2_XXS, lambda x: (0.5 + x) / 4,
                   range(8, 16))
    return a


def make_iq2_s(rng, nb, sigma):
    # w = d * (0.5 + ls) / 4 * level * sign, ls two nibbles a byte
    dt = np.dtype([("d", "<f2"), ("qs", "u1", (64,)), ("qh", "u1", (8,)),
                   ("sc", "u1", (8,))])
    a = np.frombuffer(bytearray(rng.bytes(nb * 82)), dtype=dt)
    a["sc"] = rng.integers(8, 16, size=(nb, 8), dtype=np.uint8) | \
        (rng.integers(8, 16, size=(nb, 8), dtype=np.uint8) << 4)
    a["d"] = _iq_d(rng, nb, sigma, IQ2_S, lambda x: (0.5 + x) / 4,
                   range(8, 16))
    return a


def make_iq3_s(rng, nb, sigma):
    # w = d * (1 + 2 ls) * level * sign, ls two nibbles a byte
    dt = np.dtype([("d", "<f2"), ("qs", "u1", (64,)), ("qh", "u1", (8,)),
                   ("signs", "u1", (32,)), ("sc", "u1", (4,))])
    a = np.frombuffer(bytearray(rng.bytes(nb * 110)), dtype=dt)
    a["sc"] = rng.integers(8, 16, size=(nb, 4), dtype=np.uint8) | \
        (rng.integers(8, 16, size=(nb, 4), dtype=np.uint8) << 4)
    a["d"] = _iq_d(rng, nb, sigma, IQ3_S, lambda x: 1 + 2 * x, range(8, 16))
    return a


def make_iq1_m(rng, nb, sigma):
    # w = d * (2 ls + 1) * (level + delta), delta = +-1/8 by bit 3 of the
    # group's qh nibble; the fp16 d in the top nibbles of the four scale
    # words, each word's low 12 bits four 3-bit ls
    dt = np.dtype([("qs", "u1", (32,)), ("qh", "u1", (16,)),
                   ("sc", "<u2", (4,))])
    a = np.frombuffer(bytearray(rng.bytes(nb * 56)), dtype=dt)
    ls = rng.integers(4, 8, size=(nb, 4, 4), dtype=np.uint16)
    d = _iq_d(rng, nb, sigma, IQ1_M, lambda x: 2 * x + 1, range(4, 8),
              1.0 / 64).view(np.uint16)
    a["sc"] = ((ls << (3 * np.arange(4, dtype=np.uint16))).sum(
        axis=2, dtype=np.uint16) |
        (((d[:, None] >> (4 * np.arange(4, dtype=np.uint16))) & 15) << 12))
    return a


def make_f16(rng, n, sigma):
    return (rng.standard_normal(n, dtype=np.float32) * sigma).astype("<f2")


MAKERS = {Q8_0: make_q8_0, Q4_K: make_q4_K, Q5_K: make_q5_K, Q2_K: make_q2_K,
          Q6_K: make_q6_K, Q4_0: make_q4_0, Q5_0: make_q5_0,
          MXFP4: make_mxfp4, IQ4_NL: make_iq4_nl, IQ2_XXS: make_iq2_xxs,
          IQ2_S: make_iq2_s, IQ3_S: make_iq3_s, IQ1_M: make_iq1_m}


def f32_values(rng, kind, ne, sigma):
    n = int(np.prod(ne))
    if kind == "norm":
        v = 1.0 + 0.1 * rng.standard_normal(n)
    elif kind == "router":
        v = rng.standard_normal(n) * sigma
    elif kind == "conv":
        v = rng.standard_normal(n) * sigma
    elif kind == "ssm_a":
        v = -rng.uniform(1.0, 16.0, n)
    elif kind == "bias":
        v = 0.1 * rng.standard_normal(n)
    elif kind == "rope_freqs":                 # a quarter of the pairs rotate
        v = np.where(np.arange(n) < n // 4, 1.0, 1e30)
    elif kind == "dt_bias":
        dt = np.exp(rng.uniform(math.log(1e-3), math.log(1e-1), n))
        v = np.log(np.expm1(dt))
    else:
        raise ValueError(kind)
    return v.astype("<f4")


# ------------------------------------------------------------------ routing skew

def zipf_norms(E, K, S, seed):
    """Row norm factors for a router of E experts, top-K, so that expert
    popularity (share of tokens routed to it) follows a Zipf law of exponent
    S, for inputs whose router logits are independent Gaussians (random
    weights and hidden states: a logit's spread is its row's norm). Found by
    fitting on 20000 sampled tokens; capped so no expert exceeds 90% of
    tokens."""
    rng = np.random.default_rng([seed, 99991])
    t = 1.0 / np.arange(1, E + 1) ** S
    t = t / t.sum() * K
    for _ in range(E):                      # cap, then give the rest out again
        over = t > 0.9
        if not over.any():
            break
        spare = (t[over] - 0.9).sum()
        t[over] = 0.9
        t[~over] += spare * t[~over] / t[~over].sum()
    Z = rng.standard_normal((20000, E)).astype(np.float32)
    n = np.ones(E)
    for _ in range(80):
        sel = np.argpartition(-(Z * n), K - 1, axis=1)[:, :K]
        f = np.bincount(sel.ravel(), minlength=E) / Z.shape[0]
        n *= (t / np.clip(f, 1e-4, None)) ** 0.25
        n /= np.exp(np.log(n).mean())
    return n


def skew_router(data, ne, layer, a):
    """Scale router rows (ggml [D, E]: E rows of D) by zipf_norms, a random
    permutation per layer (each layer has its own popular experts)."""
    D, E = ne
    n = zipf_norms(E, a.n_used, a.route_skew, a.seed)
    perm = np.random.default_rng([a.seed, 7, layer]).permutation(E)
    return (data.reshape(E, D) * n[perm][:, None]).astype("<f4").reshape(-1)


# ------------------------------------------------------------------ writer

def nbytes_of(ne, ttype):
    be, bb = BLOCK[ttype]
    n = int(np.prod(ne))
    if ne[0] % be:
        raise SystemExit("row length %d is not a multiple of %s's block %d"
                         % (ne[0], TNAME[ttype], be))
    return n // be * bb


def pad(n):
    return (ALIGN - n % ALIGN) % ALIGN


def write_model(a, spec):
    w = G.GGUFWriter()       # used for its metadata serialisation only
    plan = []
    offset = 0
    # a tied LM head (no output.weight) takes the output's type, as in
    # llama-quantize
    tied = all(t[0] != "output.weight" for t in spec.tensors)
    mix = spec_iq_mix(spec, a)
    for name, ne, kind, layer, sigma in spec.tensors:
        as_name = "output.weight" if tied and name == "token_embd.weight" else name
        t = tensor_type(as_name, kind, layer, a.layers, a.type, ne[0],
                        mix.get(name) if mix else None)
        nb = nbytes_of(ne, t)
        plan.append((name, ne, kind, layer, sigma, t, offset, nb))
        offset += nb + pad(nb)
    for t in set(p[5] for p in plan) & set(GRID_SRC):
        iq_grid(t)           # a grid that cannot be read: stop before writing
    head = [G.GGUF_MAGIC, struct.pack("<IQQ", 3, len(plan), len(spec.kv))]
    for key, vtype, v, arr_type in spec.kv:
        head += [w._str(key), struct.pack("<I", vtype),
                 w._value(vtype, v, arr_type)]
    for name, ne, kind, layer, sigma, t, off, nb in plan:
        head += [w._str(name), struct.pack("<I", len(ne)),
                 struct.pack("<%dQ" % len(ne), *ne),
                 struct.pack("<IQ", t, off)]
    head = b"".join(head)
    total = len(head) + pad(len(head)) + offset
    print("%s: %d tensors, %.3f GB" % (a.out, len(plan), total / 1e9),
          flush=True)
    t0 = time.time()
    done = 0
    with open(a.out, "wb") as f:
        f.write(head + b"\0" * pad(len(head)))
        for idx, (name, ne, kind, layer, sigma, t, off, nb) in \
                enumerate(plan):
            rng = np.random.default_rng([a.seed, idx])
            if t == F32:
                data = f32_values(rng, kind, ne, sigma)
                if a.route_skew and name.endswith("ffn_gate_inp.weight"):
                    data = skew_router(data, ne, layer, a)
                assert data.nbytes == nb
                f.write(data.tobytes())
            else:
                be, bb = BLOCK[t]
                nblk = nb // bb
                step = max(1, CHUNK_BYTES // bb)
                for s0 in range(0, nblk, step):
                    k = min(step, nblk - s0)
                    if t == F16:
                        blk = make_f16(rng, k, sigma)
                    else:
                        blk = MAKERS[t](rng, k, sigma)
                    f.write(memoryview(blk).cast("B"))
            f.write(b"\0" * pad(nb))
            done += nb
            if a.verbose:
                print("  %-34s %-5s %s %.1f MB" % (name, TNAME[t], ne,
                                                  nb / 1e6), flush=True)
        size = f.tell()
    assert size == total, (size, total)
    dt = time.time() - t0
    counts = {}
    for p in plan:
        counts[TNAME[p[5]]] = counts.get(TNAME[p[5]], 0) + p[7]
    print("wrote %.3f GB in %.1f s (%.0f MB/s); bytes by type: %s" % (
        size / 1e9, dt, size / 1e6 / max(dt, 1e-9),
        ", ".join("%s %.1f MB" % (k, v / 1e6)
                  for k, v in sorted(counts.items()))), flush=True)


# ------------------------------------------------------------------ verify

def dequant(raw, t, nblk):
    """Dequantise nblk blocks of type t (reference formulas of src/quant/quant.h)."""
    if t == Q8_0:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("q", "i1", (32,))],
                          count=nblk)
        return b["d"].astype(np.float32)[:, None] * b["q"]
    if t == Q4_K:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("dmin", "<f2"),
                                      ("sc", "u1", (12,)),
                                      ("q", "u1", (128,))], count=nblk)
        p = b["sc"].astype(np.int32)
        sc = np.empty((nblk, 8), np.int32)
        m = np.empty((nblk, 8), np.int32)
        sc[:, :4], m[:, :4] = p[:, :4] & 63, p[:, 4:8] & 63
        sc[:, 4:] = (p[:, 8:] & 15) | ((p[:, :4] >> 6) << 4)
        m[:, 4:] = (p[:, 8:] >> 4) | ((p[:, 4:8] >> 6) << 4)
        q = b["q"].reshape(nblk, 4, 32)
        qq = np.stack([q & 15, q >> 4], axis=2).reshape(nblk, 8, 32)
        d = b["d"].astype(np.float32)[:, None, None]
        dm = b["dmin"].astype(np.float32)[:, None, None]
        return (d * sc[:, :, None] * qq - dm * m[:, :, None]).reshape(nblk, -1)
    if t == Q2_K:
        b = np.frombuffer(raw, dtype=[("sc", "u1", (16,)), ("q", "u1", (64,)),
                                      ("d", "<f2"), ("dmin", "<f2")],
                          count=nblk)
        q = b["q"].reshape(nblk, 2, 1, 32)
        sh = np.array([0, 2, 4, 6], np.uint8).reshape(1, 1, 4, 1)
        qq = ((q >> sh) & 3).reshape(nblk, 16, 16)
        sc = (b["sc"] & 15).astype(np.float32)[:, :, None]
        mn = (b["sc"] >> 4).astype(np.float32)[:, :, None]
        d = b["d"].astype(np.float32)[:, None, None]
        dm = b["dmin"].astype(np.float32)[:, None, None]
        return (d * sc * qq - dm * mn).reshape(nblk, -1)
    if t == Q6_K:
        b = np.frombuffer(raw, dtype=[("ql", "u1", (128,)), ("qh", "u1", (64,)),
                                      ("sc", "i1", (16,)), ("d", "<f2")],
                          count=nblk)
        ql = b["ql"].reshape(nblk, 2, 2, 32).astype(np.int32)  # h, k&1, l
        qh = b["qh"].reshape(nblk, 2, 1, 32).astype(np.int32)  # h, -, l
        out = np.empty((nblk, 2, 4, 32), np.int32)
        for k in range(4):
            lo = ql[:, :, k & 1] if k < 2 else ql[:, :, k & 1] >> 4
            out[:, :, k] = (lo & 15) | (((qh[:, :, 0] >> (2 * k)) & 3) << 4)
        q = out.reshape(nblk, 16, 16) - 32
        return (b["d"].astype(np.float32)[:, None, None] *
                b["sc"].astype(np.float32)[:, :, None] * q).reshape(nblk, -1)
    if t == Q4_0:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("q", "u1", (16,))],
                          count=nblk)
        q = np.concatenate([b["q"] & 15, b["q"] >> 4], axis=1).astype(np.int32)
        return b["d"].astype(np.float32)[:, None] * (q - 8)
    if t == Q5_0:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("qh", "<u4"),
                                      ("q", "u1", (16,))], count=nblk)
        q = np.concatenate([b["q"] & 15, b["q"] >> 4], axis=1).astype(np.int32)
        hi = (b["qh"][:, None] >> np.arange(32, dtype=np.uint32)) & 1
        return b["d"].astype(np.float32)[:, None] * ((q | (hi.astype(np.int32) << 4)) - 16)
    if t == MXFP4:
        b = np.frombuffer(raw, dtype=[("e", "u1"), ("q", "u1", (16,))],
                          count=nblk)
        q = np.concatenate([b["q"] & 15, b["q"] >> 4], axis=1)
        d = np.ldexp(1.0, b["e"].astype(np.int32) - 128)
        return (MXFP4_LEVELS[q] * d[:, None]).astype(np.float32)
    if t == Q5_K:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("dmin", "<f2"),
                                      ("sc", "u1", (12,)), ("qh", "u1", (32,)),
                                      ("q", "u1", (128,))], count=nblk)
        base = dequant(raw_q4_K_of_q5_K(b), Q4_K, nblk).reshape(nblk, 8, 32)
        hi = (b["qh"][:, None, :] >> np.arange(8, dtype=np.uint8)[:, None]) & 1
        sc = np.empty((nblk, 8), np.float32)
        p = b["sc"].astype(np.int32)
        sc[:, :4] = p[:, :4] & 63
        sc[:, 4:] = (p[:, 8:] & 15) | ((p[:, :4] >> 6) << 4)
        d = b["d"].astype(np.float32)[:, None, None]
        return (base + d * sc[:, :, None] * 16 * hi).reshape(nblk, -1)
    if t == IQ4_NL:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("q", "u1", (16,))],
                          count=nblk)
        q = np.concatenate([b["q"] & 15, b["q"] >> 4], axis=1)
        return (b["d"].astype(np.float32)[:, None] * IQ4NL_LEVELS[q])
    if t == IQ2_XXS:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "<u4", (16,))],
                          count=nblk)
        idx = np.ascontiguousarray(b["qs"][:, 0::2]).view(np.uint8)
        aux = b["qs"][:, 1::2].astype(np.int64)            # (nblk, 8)
        code = (aux[:, :, None] >> (7 * np.arange(4))) & 127  # per group
        sbits = (code[..., None] >> np.arange(7)) & 1
        sbits = np.concatenate([sbits, sbits.sum(axis=3, keepdims=True) & 1],
                               axis=3)                      # even count
        w = iq_grid(IQ2_XXS)[idx.reshape(nblk, 8, 4)] * (1 - 2 * sbits)
        ls = (aux >> 28).astype(np.float64)
        return (b["d"].astype(np.float64)[:, None, None, None] *
                ((0.5 + ls) / 4)[:, :, None, None] * w).reshape(nblk, -1)
    if t == IQ2_S:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "u1", (64,)),
                                      ("qh", "u1", (8,)), ("sc", "u1", (8,))],
                          count=nblk)
        qh = b["qh"].astype(np.int64)[:, :, None]
        idx = (b["qs"][:, :32].reshape(nblk, 8, 4).astype(np.int64) |
               ((qh >> (2 * np.arange(4))) & 3) << 8)
        sbits = np.unpackbits(b["qs"][:, 32:], axis=1, bitorder="little")
        ls = (b["sc"][:, :, None] >> (4 * (np.arange(4) // 2))) & 15
        w = iq_grid(IQ2_S)[idx].reshape(nblk, 256) * (1 - 2.0 * sbits)
        return (b["d"].astype(np.float64)[:, None] *
                np.repeat(((0.5 + ls) / 4).reshape(nblk, 32), 8, axis=1) * w)
    if t == IQ3_S:
        b = np.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "u1", (64,)),
                                      ("qh", "u1", (8,)), ("signs", "u1", (32,)),
                                      ("sc", "u1", (4,))], count=nblk)
        qh = b["qh"].astype(np.int64)[:, :, None]
        idx = (b["qs"].reshape(nblk, 8, 8).astype(np.int64) |
               ((qh >> np.arange(8)) & 1) << 8)
        sbits = np.unpackbits(b["signs"], axis=1, bitorder="little")
        ls = np.stack([b["sc"] & 15, b["sc"] >> 4], axis=2).reshape(nblk, 8)
        w = iq_grid(IQ3_S)[idx].reshape(nblk, 256) * (1 - 2.0 * sbits)
        return (b["d"].astype(np.float64)[:, None] *
                np.repeat(1 + 2.0 * ls, 32, axis=1) * w)
    if t == IQ1_M:
        b = np.frombuffer(raw, dtype=[("qs", "u1", (32,)), ("qh", "u1", (16,)),
                                      ("sc", "<u2", (4,))], count=nblk)
        h = np.stack([b["qh"] & 15, b["qh"] >> 4], axis=2).reshape(nblk, 32)
        idx = b["qs"].astype(np.int64) | (h & 7).astype(np.int64) << 8
        delta = np.where(h & 8, -0.125, 0.125)
        sc = b["sc"].astype(np.int64)                       # (nblk, 4)
        ls = (sc[:, :, None] >> (3 * np.arange(4))) & 7     # group 8k + 2i..
        ls = np.repeat(ls.reshape(nblk, 16), 2, axis=1)     # per group
        d = ((sc >> 12) << (4 * np.arange(4))).sum(axis=1).astype(
            np.uint16).view(np.float16).astype(np.float64)
        w = iq_grid(IQ1_M)[idx] + delta[:, :, None]         # (nblk, 32, 8)
        return (d[:, None, None] * (2 * ls + 1)[:, :, None] * w).reshape(
            nblk, -1)
    if t == F16:
        return np.frombuffer(raw, dtype="<f2", count=nblk).astype(np.float32)
    if t == F32:
        return np.frombuffer(raw, dtype="<f4", count=nblk)
    raise ValueError(t)


def raw_q4_K_of_q5_K(b):
    """The Q4_K blocks of Q5_K blocks b without their fifth bits."""
    q4 = np.zeros(len(b), dtype=[("d", "<f2"), ("dmin", "<f2"),
                                 ("sc", "u1", (12,)), ("q", "u1", (128,))])
    for k in ("d", "dmin", "sc", "q"):
        q4[k] = b[k]
    return q4.tobytes()


def verify(path):
    """Header via tests/lib/gguf_py.py; every tensor's extent inside the file;
    a sample of blocks of every tensor dequantised: finite, mean ~ 0, std
    vs 1/sqrt(fan_in)."""
    g = G.read_gguf(path, load_data=False)
    size = os.path.getsize(path)
    arch = g.kv["general.architecture"]
    print("%s: GGUF v%d, arch %s, %d keys, %d tensors, %d bytes" % (
        path, g.version, arch, len(g.kv), len(g.tinfo), size))
    bad = 0
    worst = 0.0
    with open(path, "rb") as f:
        for name in g.tensor_order:
            ti = g.tinfo[name]
            t, ne = ti["type"], ti["ne"]
            if t not in BLOCK:
                print("  %s: unexpected type %d" % (name, t))
                bad += 1
                continue
            nb = nbytes_of(ne, t)
            start = g.data_offset + ti["offset"]
            if start + nb > size:
                print("  %s: data beyond end of file" % name)
                bad += 1
                continue
            be, bb = BLOCK[t]
            nblk = nb // bb
            take = min(nblk, max(1, 65536 // be))
            f.seek(start + (nblk - take) // 2 * bb)   # blocks mid-tensor
            x = dequant(f.read(take * bb), t, take).astype(np.float64)
            if not np.all(np.isfinite(x)):
                print("  %s: non-finite values" % name)
                bad += 1
                continue
            if t in (F32,) or len(ne) == 1:
                continue
            if "ssm_conv1d" in name or "ffn_gate_inp" in name:
                continue
            want = 1.0 if name == "token_embd.weight" else 1 / math.sqrt(ne[0])
            if "ssm_alpha" in name:
                want *= 0.5
            r = x.std() / want
            worst = max(worst, abs(r - 1), abs(x.mean()) / want)
            if abs(r - 1) > 0.1 or abs(x.mean()) > 0.05 * want:
                print("  %s: std %.3g (want %.3g), mean %.3g" % (
                    name, x.std(), want, x.mean()))
                bad += 1
    toks = g.kv.get("tokenizer.ggml.tokens") or []
    ctx = [v for k, v in g.kv.items() if k == arch + ".context_length"]
    print("  tokenizer %s (pre %s), %d tokens, %d merges; context %s; chat "
          "template %s" % (
              g.kv.get("tokenizer.ggml.model"), g.kv.get("tokenizer.ggml.pre"),
              len(toks), len(g.kv.get("tokenizer.ggml.merges") or []),
              ctx[0] if ctx else "-",
              "%d bytes" % len(g.kv["tokenizer.chat_template"].encode())
              if "tokenizer.chat_template" in g.kv else "none"))
    if g.tinfo:
        last = max(g.tinfo.values(), key=lambda ti: ti["offset"])
        print("  data section ends at %d of %d bytes" % (
            g.data_offset + last["offset"] +
            nbytes_of(last["ne"], last["type"]), size))
    types = {}
    for ti in g.tinfo.values():
        types[TNAME.get(ti["type"], ti["type"])] = types.get(
            TNAME.get(ti["type"], ti["type"]), 0) + 1
    print("  tensors by type: %s; worst std/mean deviation %.3f; %s" % (
        types, worst, "OK" if not bad else "%d PROBLEMS" % bad))
    return 1 if bad else 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out")
    p.add_argument("--geometry", choices=["qwen3-30b-a3b", "dense",
                                          "pocket-35b",
                                          "qwen3-next-80b-a3b"] + sorted(SPECS))
    p.add_argument("--layers", type=int, default=None)
    p.add_argument("--type", choices=sorted(FILE_TYPE), default="Q4_K_M")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--route-skew", type=float, default=0.0, metavar="S",
                   help="routers whose expert popularity per layer follows a "
                        "Zipf law of exponent S (0: uniform, as random "
                        "weights route)")
    p.add_argument("--vocab", metavar="FILE",
                   help="the tokenizer of this GGUF vocabulary (e.g. "
                        "../shared/tokenizer/ggml-vocab-qwen3.gguf) padded to "
                        "the geometry's, the real context and chat template")
    p.add_argument("--chat-template", metavar="FILE",
                   help="write this Jinja file as tokenizer.chat_template")
    p.add_argument("--ctx", type=int, default=None, metavar="N",
                   help="the declared context (context_length)")
    p.add_argument("--vocab-only", action="store_true",
                   help="write the metadata only, no tensors")
    p.add_argument("--verify", action="store_true",
                   help="read OUT back and check it instead of writing")
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    if a.verify:
        return verify(a.out)
    if not a.geometry:
        p.error("--geometry is required")
    if a.layers is None:
        a.layers = layers_default(a.geometry)
    if a.layers < 1:
        p.error("--layers must be >= 1")
    if a.geometry in SPECS:
        spec = SPECS[a.geometry](a)
    elif a.geometry in HYBRIDS:
        spec = spec_hybrid(a)
    else:
        spec = spec_qwen3(a, a.geometry == "qwen3-30b-a3b")
    if a.ctx is not None and not 1 <= a.ctx <= 1 << 24:
        p.error("--ctx must be in 1..16777216")
    vocab = next(t[1][1] for t in spec.tensors if t[0] == "token_embd.weight")
    set_tokenizer(spec, a, vocab)
    if a.vocab_only:
        spec.tensors = []
    a.n_used = next((v for k, _, v, _ in spec.kv if k.endswith(".expert_used_count")), 0)
    if a.route_skew < 0 or (a.route_skew and not a.n_used):
        p.error("--route-skew needs S >= 0 and a geometry with experts")
    if a.route_skew:
        spec.key("pocket.bench.route_skew", G.FLOAT32, float(a.route_skew))
    d = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(d, exist_ok=True)
    write_model(a, spec)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
