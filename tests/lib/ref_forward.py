#!/usr/bin/python3
"""ref_forward.py - independent float64 numpy reference of the forward pass.

usage: ref_forward.py [--deltanet recurrent|chunked[:C]] [--kv-cache TYPE]
                      [--gelu ggml|exact] [--mla decompressed|absorbed]
                      [--stats] MODEL.gguf IDS OUT.npy
                      (IDS: comma-separated ids)

gemma4 files are computed by tests/lib/ref_gemma4.py (its docstring has the
maths); --gelu picks its GELU: ggml's FP16 table (the default) or the exact
tanh form.

Products with MXFP4 weights (gpt-oss's experts) round their input rows to
Q8_0 first, as ggml's CPU backend and pocket compute them (Model.q8_0);
--exact-act multiplies the float activations by the dequantised weights
instead.

--kv-cache f16|q8_0 rounds the cached keys (after norm and rope) and values
as a KV cache of that type holds them (Model.cache); f32 (the default) keeps
them exact.

Reads everything from the GGUF file (keys and tensors, nothing from the
generator) and writes an (n_tokens, n_vocab) float64 array: row i holds the
logits after token i at position i, attending causally to positions 0..i.
Supported architectures: llama (dense, or MoE "mixtral" with expert tensors),
qwen3, qwen3moe, gpt-oss, qwen2moe, olmoe, granitemoe, and the hybrids
qwen35moe / qwen35 and qwen3next (see below). Rope scaling: linear, or YaRN
(ggml's correction dims with beta_fast 32, beta_slow 1, cos/sin x (1 + 0.1
ln s)). Semantics
follow llama.cpp:
  rms(x, w) = x / sqrt(mean(x^2) + eps) * w
  attention: optional per-head q/k RMS norm, RoPE (NEOX for qwen3*, NORM for
  llama), scale 1/sqrt(head_dim), grouped-query heads (q head h -> kv head
  h // (Hq/Hkv))
  FFN: down(silu(gate h) * up h); MoE: softmax router over all experts, top-k
  (ties -> lower index), weights renormalised to sum 1.
  logits = output (or token_embd when output.weight is absent) . rms(x)

gpt-oss (llama.cpp's models/openai-moe.cpp): q/k/v/o biases, NEOX rope over
  the whole head; layer l attends over its last attention.sliding_window
  positions iff l % P < P - 1 (P = attention.sliding_window_pattern,
  default 2), else causally; each head's softmax has one more term,
  exp(attn_sinks[h]), in its denominator; FFN input rms(x,
  post_attention_norm); router logits + ffn_gate_inp.bias, top-k, weights =
  softmax of the k chosen logits; each expert
  down(act(gate h + b_gate, up h + b_up)) + b_down with the SwiGLU-OAI
  act(g, u) = g' sigmoid(1.702 g') (u' + 1), g' = min(g, 7), u' = clamp(u,
  -7, 7).

qwen35moe / qwen35 (Qwen3.5 hybrids, llama.cpp's models/qwen35*.cpp):
  x += mixer(rms(x, attn_norm)); x += ffn(rms(x, post_attention_norm)).
  Layer i is recurrent (Gated DeltaNet) unless (i+1) % full_attention_interval
  == 0 (default interval 4); <arch>.attention.recurrent_layers (array, or a
  scalar for all layers) overrides the interval when present.
  Full attention: attn_q gives q|gate interleaved per head, q/k per-head RMS
  norm, IMROPE (rope.dimension_sections; text positions t=h=w=pos, e=0) on
  the first n_rot dims in NEOX pairing, causal GQA softmax attention with
  scale 1/sqrt(head_dim), output * sigmoid(gate), attn_output.
  Gated DeltaNet: qkv = attn_qkv h, z = attn_gate h, beta = sigmoid(ssm_beta
  h), g = softplus(ssm_alpha h + ssm_dt.bias) * ssm_a; causal depthwise conv
  (last tap = current token) + SiLU over qkv; q, k L2-normalised per head
  (x / max(|x|, eps)), q scaled by 1/sqrt(d_k); v head j uses q/k head
  j % H_k; per v head S <- exp(g) S; S <- S + k (beta (v - S^T k))^T;
  o = S^T q; then rms(o, ssm_norm) * silu(z) per head and ssm_out.
  --deltanet chunked[:C] computes the same delta rule over the whole
  sequence in chunks of C tokens (default 64) with the WY / UT-transform form
  (an independent algorithm); the default is the token-by-token recurrence.
  FFN: qwen35moe = routed experts (softmax, top-k, renormalised) + shared
  expert * sigmoid(ffn_gate_inp_shexp . h); qwen35 = dense SiLU FFN.
  Norm weights are used as stored (no +1).

qwen3next (Qwen3-Next, llama.cpp's models/qwen3next.cpp): the qwen35moe
  blocks with three differences: plain NEOX partial RoPE (no sections key);
  beta and alpha come from one tensor ssm_ba (2 H_v rows), which holds per k
  head g [beta of v heads g r .. g r + r - 1 | alpha of the same], r = H_v /
  H_k; and v head j uses q/k head j // r (grouped order, where qwen35* files
  are tiled: j % H_k).
deepseek2 (DeepSeek-V2/V3, llama.cpp's models/deepseek2.cpp; the fixture
  README ../shared/fixtures/deepseek2/README.md): multi-head latent
  attention. q = attn_q h (or attn_q_b rms(attn_q_a h, attn_q_a_norm)),
  per head [q_nope | q_pe]; [c | k_pe] = attn_kv_a_mqa h, c = rms(c,
  attn_kv_a_norm); q_pe, k_pe rotated GPT-J style (adjacent pairs), with
  YaRN when rope.scaling.type is yarn (correction dims from
  original_context_length, beta_fast 32, beta_slow 1; cos/sin magnitude 1
  with a yarn_log_multiplier, else 1 + 0.1 ln s); score scale mscale^2 /
  sqrt(nope + rope), mscale = a (1 + 0.1 m ln s), m = yarn_log_multiplier /
  0.1. --mla decompressed (the default) attends with per-head keys
  [K_b,h^T c ; k_pe] and values V_b,h c; --mla absorbed as llama.cpp does,
  queries [K_b,h q_nope ; q_pe] against [c ; k_pe] and V_b,h applied after.
  FFN: leading_dense_block_count dense layers, then routed experts (gating
  expert_gating_func: 1 softmax, 2 sigmoid, absent softmax; chosen by p +
  exp_probs_b when present, weighted by p; renormalised if
  expert_weights_norm, the sum at least 6.1035e-5; times
  expert_weights_scale unless 0 or 1; with expert_group_count G > 1 only
  from the expert_group_used_count groups of E/G consecutive experts whose
  two best selection scores sum highest) plus the ungated shared experts.
qwen2moe (llama.cpp's models/qwen2moe.cpp): attn_q/k/v.bias added to the
  projections (required); NEOX RoPE; routed experts with the softmax
  probabilities of the top k as weights (no renormalisation), plus the
  shared expert down(silu(gate_shexp h) * up_shexp h) scaled per token by
  sigmoid(ffn_gate_inp_shexp . h) (required).
olmoe (models/olmoe.cpp): q and k RMS-normed over their whole width (all
  heads at once: attn_q_norm (Hq hd), attn_k_norm (Hkv hd)) before the
  heads are split and rotated (NEOX); experts not renormalised. llama.cpp
  loads q/k/v biases but its olmoe graph never adds them: a file with them
  is refused (as pocket refuses it).
granitemoe (models/granite.cpp, the graph granite-moe uses): llama's NORM
  RoPE and renormalised experts with Granite's multipliers: x =
  token_embd[ids] * embedding_scale (0 or absent: 1); each block's output
  (attention, FFN) * residual_scale (0 or absent: 1) before the residual
  add; attention scores * attention.scale (0 or absent: 1/sqrt(head_dim));
  logits / logit_scale (required). With expert_shared_feed_forward_length
  > 0 an ungated shared expert is added to the routed output.
Any MoE layer may hold a merged ffn_gate_up_exps (E, 2 F, D) instead of
  ffn_gate_exps and ffn_up_exps: per expert the gate rows, then the up rows.
  --stats prints the smallest router top-k margin (p_k - p_k+1) to stdout.
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_py as G  # noqa: E402

NEOX_ARCHS = ("qwen3", "qwen3moe", "qwen2", "qwen2moe", "gpt-oss", "olmoe")
NORM_ARCHS = ("llama", "granitemoe")
# MoE weights used as the softmax gives them (llama.cpp's build_moe_ffn with
# norm_w false); every other MoE renormalises the top k to sum 1
NO_RENORM_ARCHS = ("qwen2moe", "olmoe")
HYBRID_ARCHS = ("qwen35moe", "qwen35", "qwen3next")
MLA_ARCHS = ("deepseek2",)


class Model:
    def __init__(self, path, deltanet="recurrent", chunk=64, kv_cache="f32",
                 q8_act=True, gelu="ggml", mla="decompressed"):
        self.kv_cache = kv_cache
        self.q8_act = q8_act
        self.impl = None
        if mla not in ("decompressed", "absorbed"):
            raise SystemExit("ref_forward: --mla must be decompressed or "
                             "absorbed")
        self.mla_mode = mla
        g = G.read_gguf(path)
        self.g = g
        self.deltanet_mode = deltanet
        self.chunk = int(chunk)
        if deltanet not in ("recurrent", "chunked") or self.chunk < 1:
            raise SystemExit("ref_forward: bad --deltanet mode")
        self.min_router_margin = np.inf
        arch = g.get("general.architecture")
        if arch == "gemma4":   # its own file: ref_gemma4.py
            import ref_gemma4
            self.arch = arch
            self.impl = ref_gemma4.Gemma4Model(g, kv_cache, self.cache, gelu)
            self.n_vocab = self.impl.n_vocab
            return
        if arch not in NEOX_ARCHS + NORM_ARCHS + HYBRID_ARCHS + MLA_ARCHS:
            raise SystemExit("ref_forward: unsupported architecture %r" % arch)
        self.arch = arch

        def key(name, default=None, required=False):
            v = g.get(arch + "." + name)
            if v is None:
                if required:
                    raise SystemExit("ref_forward: missing key %s.%s"
                                     % (arch, name))
                return default
            return v

        self.n_layer = int(key("block_count", required=True))
        self.n_embd = int(key("embedding_length", required=True))
        self.n_head = int(key("attention.head_count", required=True))
        self.n_head_kv = int(key("attention.head_count_kv", self.n_head))
        self.head_dim = int(key("attention.key_length",
                                self.n_embd // self.n_head))
        self.head_dim_v = int(key("attention.value_length", self.head_dim))
        self.eps = float(key("attention.layer_norm_rms_epsilon",
                             required=True))
        self.rope_base = float(key("rope.freq_base", 10000.0))
        self.n_rot = int(key("rope.dimension_count", self.head_dim))
        self.neox = arch in NEOX_ARCHS + HYBRID_ARCHS
        self._load_rope_scaling(key)
        # expert_count: one value, or one per layer (pocket prune's files)
        ec = key("expert_count", 0)
        self.n_expert_l = [int(v) for v in ec] if isinstance(ec, np.ndarray) else None
        self.n_expert = max(self.n_expert_l) if self.n_expert_l else int(ec)
        self.on_expert = None   # hook: on_expert(layer, token, expert, weight, output)
        self.n_expert_used = int(key("expert_used_count", 0))
        self.hybrid = arch in HYBRID_ARCHS
        self.oss = arch == "gpt-oss"
        self.sections = None
        self.mla = arch in MLA_ARCHS
        self.renorm = arch not in NO_RENORM_ARCHS
        if self.hybrid:
            self._load_hybrid(key)
            return
        if self.mla:
            self._load_mla(key)
            return

        self.n_swa, self.swa_period = 0, 0
        if self.oss:
            self.n_swa = int(key("attention.sliding_window", required=True))
            self.swa_period = int(key("attention.sliding_window_pattern", 2))
            if self.n_expert_used <= 0:
                raise SystemExit("ref_forward: gpt-oss needs experts")
        self.full_qk_norm = arch == "olmoe"
        self.bias_required = arch == "qwen2moe"
        self.bias_refused = arch == "olmoe"    # its graph never adds them
        self.shexp = arch in ("qwen2moe", "granitemoe")
        self.shexp_gated = arch == "qwen2moe"
        self.embd_scale, self.residual_scale, self.logit_scale = 1.0, 1.0, 1.0
        self.attn_scale = 1.0 / np.sqrt(self.head_dim)
        if arch == "granitemoe":
            self.logit_scale = float(key("logit_scale", required=True))
            self.embd_scale = float(key("embedding_scale", 0.0)) or 1.0
            self.residual_scale = float(key("residual_scale", 0.0)) or 1.0
            self.attn_scale = float(key("attention.scale", 0.0)) or \
                self.attn_scale
            if not key("rope.scaling.finetuned", True):
                raise SystemExit("ref_forward: granitemoe without rope is "
                                 "not supported")

        self.tok_embd = self.t("token_embd.weight")          # (V, D)
        self.n_vocab = self.tok_embd.shape[0]
        self.out_norm = self.t("output_norm.weight")
        out = self.t("output.weight", required=False)
        self.output = self.tok_embd if out is None else out   # (V, D)
        self.tied = out is None
        self.layers = []
        opt = not self.oss     # gpt-oss requires its biases and sinks
        for i in range(self.n_layer):
            b = "blk.%d." % i
            sp = self.swa_period
            req = self.bias_required or self.oss
            if self.bias_refused and any(self.g.tensor(b + n, np.float64) is not None
                                         for n in ("attn_q.bias", "attn_k.bias", "attn_v.bias",
                                                   "attn_output.bias")):
                raise SystemExit("ref_forward: %s with attention biases" % arch)
            ly = dict(
                index=i,
                attn_norm=self.t(b + "attn_norm.weight"),
                wq=self.t(b + "attn_q.weight"),
                wk=self.t(b + "attn_k.weight"),
                wv=self.t(b + "attn_v.weight"),
                wo=self.t(b + "attn_output.weight"),
                bq=self.t(b + "attn_q.bias", required=req),
                bk=self.t(b + "attn_k.bias", required=req),
                bv=self.t(b + "attn_v.bias", required=req),
                bo=self.t(b + "attn_output.bias", required=not opt),
                sinks=self.t(b + "attn_sinks.weight", required=self.oss)
                if self.oss else None,
                window=self.n_swa if self.n_swa and
                (sp == 0 or i % sp < sp - 1) else 0,
                q_norm=self.t(b + "attn_q_norm.weight", required=False),
                k_norm=self.t(b + "attn_k_norm.weight", required=False),
                ffn_norm=self.t(b + ("post_attention_norm.weight" if self.oss
                                     else "ffn_norm.weight")),
                router=self.t(b + "ffn_gate_inp.weight", required=False),
                router_b=self.t(b + "ffn_gate_inp.bias", required=not opt),
            )
            if ly["router"] is not None:
                ly.update(self.gate_up(b))
                ly["down_exps"] = self.t(b + "ffn_down_exps.weight")
                ly["down_q8"] = self.mxfp4(b + "ffn_down_exps.weight")
                ly["gu_q8"] = self.mxfp4(b + "ffn_gate_exps.weight")
                for nm in ("gate", "up", "down"):   # (E, F) / (E, D)
                    ly[nm + "_b"] = self.t(b + "ffn_%s_exps.bias" % nm,
                                           required=not opt)
                if self.n_expert_used <= 0:
                    raise SystemExit("ref_forward: MoE layer without "
                                     "expert_used_count")
                ne = self.layer_experts(i)
                if ly["router"].shape[0] != ne and ne:
                    raise SystemExit("ref_forward: router has %d experts, "
                                     "expert_count %d"
                                     % (ly["router"].shape[0], ne))
                sh = int(key("expert_shared_feed_forward_length", 0))
                if self.shexp and (sh > 0 or self.shexp_gated):
                    ly.update(
                        gate_shexp=self.t(b + "ffn_gate_shexp.weight"),
                        up_shexp=self.t(b + "ffn_up_shexp.weight"),
                        down_shexp=self.t(b + "ffn_down_shexp.weight"))
                    if self.shexp_gated:
                        ly["shexp_gate_inp"] = self.t(
                            b + "ffn_gate_inp_shexp.weight").reshape(-1)
            else:
                ly["gate"] = self.t(b + "ffn_gate.weight")
                ly["up"] = self.t(b + "ffn_up.weight")
                ly["down"] = self.t(b + "ffn_down.weight")
            self.layers.append(ly)

    def layer_experts(self, i):
        """Routed experts of layer i (expert_count may be one per layer)."""
        return self.n_expert_l[i] if self.n_expert_l else self.n_expert

    def _load_hybrid(self, key):
        """qwen35moe / qwen35 / qwen3next: hyperparameters and per-layer
        tensors."""
        self.next = self.arch == "qwen3next"
        if not self.next:   # IMROPE; qwen3next rotates plain NEOX
            sec = key("rope.dimension_sections", required=True)
            sec = [int(v) for v in np.atleast_1d(sec)][:4]
            self.sections = sec + [0] * (4 - len(sec))
        if self.head_dim != self.head_dim_v:
            raise SystemExit("ref_forward: %s needs key_length == "
                             "value_length" % self.arch)
        self.d_conv = int(key("ssm.conv_kernel", required=True))
        self.d_inner = int(key("ssm.inner_size", required=True))
        self.d_state = int(key("ssm.state_size", required=True))
        self.H_v = int(key("ssm.time_step_rank", required=True))
        self.H_k = int(key("ssm.group_count", required=True))
        if self.d_inner != self.d_state * self.H_v:
            raise SystemExit("ref_forward: ssm.inner_size %d != state_size "
                             "%d * time_step_rank %d"
                             % (self.d_inner, self.d_state, self.H_v))
        if self.H_v % self.H_k:
            raise SystemExit("ref_forward: ssm v heads %d not a multiple of "
                             "k heads %d" % (self.H_v, self.H_k))
        rl = key("attention.recurrent_layers")
        if rl is not None:
            rl = np.atleast_1d(np.asarray(rl))
            if rl.size == 1:
                rl = np.repeat(rl, self.n_layer)
            if rl.size < self.n_layer:
                raise SystemExit("ref_forward: recurrent_layers has %d "
                                 "entries for %d layers"
                                 % (rl.size, self.n_layer))
            self.is_recr = [bool(rl[i]) for i in range(self.n_layer)]
        else:
            iv = int(key("full_attention_interval", 4))
            if iv <= 0:
                raise SystemExit("ref_forward: full_attention_interval %d"
                                 % iv)
            self.is_recr = [(i + 1) % iv != 0 for i in range(self.n_layer)]
        moe = self.arch in ("qwen35moe", "qwen3next")
        if moe and not (0 < self.n_expert_used <= self.n_expert):
            raise SystemExit("ref_forward: %s needs 0 < "
                             "expert_used_count <= expert_count" % self.arch)

        self.tok_embd = self.t("token_embd.weight")          # (V, D)
        self.n_vocab = self.tok_embd.shape[0]
        self.out_norm = self.t("output_norm.weight")
        out = self.t("output.weight", required=False)
        self.output = self.tok_embd if out is None else out
        self.tied = out is None
        conv_dim = 2 * self.H_k * self.d_state + self.d_inner
        self.layers = []
        for i in range(self.n_layer):
            b = "blk.%d." % i
            ly = dict(recurrent=self.is_recr[i],
                      attn_norm=self.t(b + "attn_norm.weight"),
                      ffn_norm=self.t(b + "post_attention_norm.weight"))
            if ly["recurrent"]:
                ly.update(
                    wqkv=self.t(b + "attn_qkv.weight"),      # (conv_dim, D)
                    wz=self.t(b + "attn_gate.weight"),       # (d_inner, D)
                    conv=self.t(b + "ssm_conv1d.weight"),    # (conv_dim, K)
                    dt_bias=self.t(b + "ssm_dt.bias"),       # (H_v,)
                    ssm_a=self.t(b + "ssm_a"),               # (H_v,)
                    ssm_norm=self.t(b + "ssm_norm.weight"),  # (d_state,)
                    ssm_out=self.t(b + "ssm_out.weight"))    # (D, d_inner)
                if self.next:
                    ba = self.t(b + "ssm_ba.weight")         # (2 H_v, D)
                    if ba.shape != (2 * self.H_v, self.n_embd):
                        raise SystemExit("ref_forward: blk.%d ssm_ba has "
                                         "shape %s" % (i, ba.shape))
                    r = self.H_v // self.H_k
                    ba = ba.reshape(self.H_k, 2 * r, self.n_embd)
                    ly["wbeta"] = ba[:, :r].reshape(self.H_v, self.n_embd)
                    ly["walpha"] = ba[:, r:].reshape(self.H_v, self.n_embd)
                else:
                    ly["wbeta"] = self.t(b + "ssm_beta.weight")    # (H_v, D)
                    ly["walpha"] = self.t(b + "ssm_alpha.weight")  # (H_v, D)
                want = {"wqkv": (conv_dim, self.n_embd),
                        "wz": (self.d_inner, self.n_embd),
                        "conv": (conv_dim, self.d_conv),
                        "dt_bias": (self.H_v,), "ssm_a": (self.H_v,),
                        "wbeta": (self.H_v, self.n_embd),
                        "walpha": (self.H_v, self.n_embd),
                        "ssm_norm": (self.d_state,),
                        "ssm_out": (self.n_embd, self.d_inner)}
            else:
                hd = self.head_dim
                ly.update(
                    wq=self.t(b + "attn_q.weight"),          # (2 Hq hd, D)
                    wk=self.t(b + "attn_k.weight"),
                    wv=self.t(b + "attn_v.weight"),
                    wo=self.t(b + "attn_output.weight"),
                    q_norm=self.t(b + "attn_q_norm.weight"),
                    k_norm=self.t(b + "attn_k_norm.weight"))
                want = {"wq": (2 * self.n_head * hd, self.n_embd),
                        "wk": (self.n_head_kv * hd, self.n_embd),
                        "wv": (self.n_head_kv * hd, self.n_embd),
                        "wo": (self.n_embd, self.n_head * hd),
                        "q_norm": (hd,), "k_norm": (hd,)}
            if moe:
                ly.update(self.gate_up(b))
                ly.update(
                    router=self.t(b + "ffn_gate_inp.weight"),
                    down_exps=self.t(b + "ffn_down_exps.weight"),
                    shexp_gate_inp=self.t(b + "ffn_gate_inp_shexp.weight")
                    .reshape(-1),
                    gate_shexp=self.t(b + "ffn_gate_shexp.weight"),
                    up_shexp=self.t(b + "ffn_up_shexp.weight"),
                    down_shexp=self.t(b + "ffn_down_shexp.weight"))
                want["router"] = (self.layer_experts(i), self.n_embd)
                want["shexp_gate_inp"] = (self.n_embd,)
            else:
                ly.update(router=None,
                          gate=self.t(b + "ffn_gate.weight"),
                          up=self.t(b + "ffn_up.weight"),
                          down=self.t(b + "ffn_down.weight"))
            for k, shp in want.items():
                if ly[k].shape != shp:
                    raise SystemExit("ref_forward: blk.%d %s has shape %s, "
                                     "expected %s" % (i, k, ly[k].shape, shp))
            self.layers.append(ly)

    def _load_rope_scaling(self, key):
        """rope.scaling.*: type none / linear (the default) / yarn, factor s
        (rope.scaling.factor or rope.scale_linear; 0 or absent: 1),
        original_context_length (default the trained context), attn_factor.
        Sets freq_scale = 1/s, ext_factor (1 for yarn), the cos/sin
        magnitude mscale and YaRN's correction dims (beta_fast 32, beta_slow
        1, as llama.cpp always uses)."""
        st = key("rope.scaling.type", "linear")
        if st not in ("none", "linear", "yarn"):
            raise SystemExit("ref_forward: rope.scaling.type %r" % st)
        s = key("rope.scaling.factor", None)
        if s is None:
            s = key("rope.scale_linear", 0.0)
        s = float(s)
        self.freq_scale = 1.0 if st == "none" or s == 0.0 else 1.0 / s
        self.ext_factor = 1.0 if st == "yarn" else 0.0
        attn = float(key("rope.scaling.attn_factor", 1.0))
        n_orig = int(key("rope.scaling.original_context_length",
                         key("context_length", 4096)))
        self.mscale = attn
        self.corr = (0.0, 0.0)
        if self.ext_factor:
            sf = 1.0 / self.freq_scale
            # the magnitude 1 + 0.1 ln s (llama.cpp's attn_factor mscale(s) /
            # (1 + 0.1 ln s) times the kernel's 1 + 0.1 ln s; mscale(s) = 1
            # for s <= 1)
            self.mscale = attn * (1.0 + 0.1 * np.log(sf) if sf > 1.0 else 1.0)

            def corr_dim(beta):   # the dim whose wavelength is n_orig / beta
                return self.n_rot * np.log(n_orig / (beta * 2 * np.pi)) / \
                    (2 * np.log(self.rope_base))
            lo = max(0.0, np.floor(corr_dim(32.0)))
            hi = min(self.n_rot - 1.0, np.ceil(corr_dim(1.0)))
            self.corr = (lo, hi)

    def rope_freqs(self):
        """The (n_rot/2,) angular frequency of each rotated pair, scaled."""
        half = self.n_rot // 2
        p = np.arange(half, dtype=np.float64)
        ext = self.rope_base ** (-2.0 * p / self.n_rot)
        inter = ext * self.freq_scale
        if not self.ext_factor:
            return inter
        lo, hi = self.corr
        ramp = 1.0 - np.clip((p - lo) / max(0.001, hi - lo), 0.0, 1.0)
        mix = ramp * self.ext_factor
        return inter * (1.0 - mix) + ext * mix

    def _load_mla(self, key):
        """deepseek2: hyperparameters and per-layer tensors."""
        self.q_lora = int(key("attention.q_lora_rank", required=True))
        self.kv_lora = int(key("attention.kv_lora_rank", required=True))
        self.mla_k = int(key("attention.key_length_mla", required=True))
        self.mla_v = int(key("attention.value_length_mla", required=True))
        self.nope = self.mla_k - self.n_rot
        if self.nope < 1:
            raise SystemExit("ref_forward: rope dims %d >= key_length_mla %d"
                             % (self.n_rot, self.mla_k))
        self.lead = int(key("leading_dense_block_count", 0))
        gf = int(key("expert_gating_func", 1))
        if gf not in (1, 2):
            raise SystemExit("ref_forward: expert_gating_func %d" % gf)
        self.sigmoid_gate = gf == 2
        self.w_norm = bool(key("expert_weights_norm", False))
        self.w_scale = float(key("expert_weights_scale", 0.0))
        self.n_group = int(key("expert_group_count", 0))
        self.n_group_used = int(key("expert_group_used_count", 0))
        if self.n_group > 1 and (self.n_expert % self.n_group or
                                 not 0 < self.n_group_used < self.n_group):
            raise SystemExit("ref_forward: bad expert groups %d / %d"
                             % (self.n_group, self.n_group_used))
        # rope scaling: YaRN (as llama.cpp's rope_yarn with ext_factor 1)
        st = key("rope.scaling.type", "none")
        st = st.decode() if isinstance(st, bytes) else str(st)
        s = float(key("rope.scaling.factor", 1.0) or 1.0)
        log_mul = float(key("rope.scaling.yarn_log_multiplier", 0.0)) / 0.1
        self.yarn = st == "yarn" and s != 1.0
        if st not in ("none", "yarn") or (st == "yarn" and s < 1.0):
            raise SystemExit("ref_forward: rope scaling %r (factor %g) "
                             "not supported for deepseek2" % (st, s))
        self.yarn_s = s if self.yarn else 1.0
        self.yarn_orig = int(key("rope.scaling.original_context_length",
                                 key("context_length", 4096)))
        # cos/sin magnitude a, and the score scale mscale^2 / sqrt(dk)
        ln_s = np.log(self.yarn_s)
        attn = float(key("rope.scaling.attn_factor", 1.0))
        self.rope_mag = attn * (1.0 if (log_mul != 0.0 or not self.yarn)
                                else 1.0 + 0.1 * ln_s)
        ms = self.rope_mag * (1.0 + 0.1 * log_mul * ln_s)
        self.kq_scale = ms * ms / np.sqrt(self.mla_k)

        self.tok_embd = self.t("token_embd.weight")
        self.n_vocab = self.tok_embd.shape[0]
        self.out_norm = self.t("output_norm.weight")
        out = self.t("output.weight", required=False)
        self.output = self.tok_embd if out is None else out
        self.tied = out is None
        H, r, rot, dv, D = (self.n_head, self.kv_lora, self.n_rot,
                            self.mla_v, self.n_embd)
        self.layers = []
        for i in range(self.n_layer):
            b = "blk.%d." % i
            ly = dict(attn_norm=self.t(b + "attn_norm.weight"),
                      ffn_norm=self.t(b + "ffn_norm.weight"),
                      wkv_a=self.t(b + "attn_kv_a_mqa.weight"),
                      kv_a_norm=self.t(b + "attn_kv_a_norm.weight"),
                      wk_b=self.t(b + "attn_k_b.weight"),    # (H, r, nope)
                      wv_b=self.t(b + "attn_v_b.weight"),    # (H, dv, r)
                      wo=self.t(b + "attn_output.weight"))
            want = {"wkv_a": (r + rot, D), "kv_a_norm": (r,),
                    "wk_b": (H, r, self.nope), "wv_b": (H, dv, r),
                    "wo": (D, H * dv)}
            if self.q_lora:
                ly.update(wq_a=self.t(b + "attn_q_a.weight"),
                          q_a_norm=self.t(b + "attn_q_a_norm.weight"),
                          wq_b=self.t(b + "attn_q_b.weight"))
                want.update(wq_a=(self.q_lora, D), q_a_norm=(self.q_lora,),
                            wq_b=(H * self.mla_k, self.q_lora))
            else:
                ly["wq"] = self.t(b + "attn_q.weight")
                want["wq"] = (H * self.mla_k, D)
            if i < self.lead:
                ly.update(router=None, gate=self.t(b + "ffn_gate.weight"),
                          up=self.t(b + "ffn_up.weight"),
                          down=self.t(b + "ffn_down.weight"))
            else:
                ly.update(self.gate_up(b))
                ly.update(router=self.t(b + "ffn_gate_inp.weight"),
                          bias=self.t(b + "exp_probs_b.bias",
                                      required=False),
                          down_exps=self.t(b + "ffn_down_exps.weight"),
                          gate_shexp=self.t(b + "ffn_gate_shexp.weight"),
                          up_shexp=self.t(b + "ffn_up_shexp.weight"),
                          down_shexp=self.t(b + "ffn_down_shexp.weight"))
                want["router"] = (self.layer_experts(i), D)
            for k, shp in want.items():
                if ly[k].shape != shp:
                    raise SystemExit("ref_forward: blk.%d %s has shape %s, "
                                     "expected %s" % (i, k, ly[k].shape, shp))
            self.layers.append(ly)

    def rope_gptj_yarn(self, x, pos):
        """deepseek2: rotate the last axis (n_rot dims) of x (T, ..., n_rot)
        in adjacent pairs, YaRN-scaled when the file says so."""
        rot = self.n_rot
        half = rot // 2
        p = np.arange(half, dtype=np.float64)
        th_ext = self.rope_base ** (-2.0 * p / rot)
        th = th_ext
        if self.yarn:
            def corr(beta):
                return rot * np.log(self.yarn_orig / (beta * 2 * np.pi)) \
                    / (2 * np.log(self.rope_base))
            lo = max(0.0, np.floor(corr(32.0)))
            hi = min(rot - 1.0, np.ceil(corr(1.0)))
            ramp = 1.0 - np.clip((p - lo) / max(0.001, hi - lo), 0.0, 1.0)
            th = th_ext / self.yarn_s * (1.0 - ramp) + th_ext * ramp
        ang = pos.astype(np.float64)[:, None] * th[None]          # (T, half)
        shape = (len(pos),) + (1,) * (x.ndim - 2) + (half,)
        cos = (np.cos(ang) * self.rope_mag).reshape(shape)
        sin = (np.sin(ang) * self.rope_mag).reshape(shape)
        a, b = x[..., 0::2], x[..., 1::2]
        y = np.empty_like(x)
        y[..., 0::2] = a * cos - b * sin
        y[..., 1::2] = a * sin + b * cos
        return y

    def mla_attention(self, ly, h, pos):
        """Multi-head latent attention over the whole sequence h (T, D)."""
        T = h.shape[0]
        H, r, nope, dv = self.n_head, self.kv_lora, self.nope, self.mla_v
        if self.q_lora:
            q = self.rms(h @ ly["wq_a"].T, ly["q_a_norm"]) @ ly["wq_b"].T
        else:
            q = h @ ly["wq"].T
        q = q.reshape(T, H, self.mla_k)
        q_nope, q_pe = q[:, :, :nope], self.rope_gptj_yarn(q[:, :, nope:],
                                                           pos)
        kv = h @ ly["wkv_a"].T
        c = self.rms(kv[:, :r], ly["kv_a_norm"])                  # (T, r)
        k_pe = self.rope_gptj_yarn(kv[:, r:], pos)                # (T, rot)
        lat = self.cache(np.concatenate([c, k_pe], 1))   # one cached row
        c, k_pe = lat[:, :r], lat[:, r:]
        mask = np.tril(np.ones((T, T), dtype=bool))
        out = np.zeros((T, H, dv))
        for hh in range(H):
            kb, vb = ly["wk_b"][hh], ly["wv_b"][hh]   # (r, nope), (dv, r)
            if self.mla_mode == "absorbed":
                qa = np.concatenate([q_nope[:, hh] @ kb.T, q_pe[:, hh]], 1)
                s = qa @ np.concatenate([c, k_pe], 1).T
            else:
                k = np.concatenate([c @ kb, k_pe], 1)              # (T, k)
                s = np.concatenate([q_nope[:, hh], q_pe[:, hh]], 1) @ k.T
            s = np.where(mask, s * self.kq_scale, -np.inf)
            pr = np.exp(s - s.max(axis=1, keepdims=True))
            pr /= pr.sum(axis=1, keepdims=True)
            if self.mla_mode == "absorbed":
                out[:, hh] = (pr @ c) @ vb.T
            else:
                out[:, hh] = pr @ (c @ vb.T)
        return out.reshape(T, H * dv) @ ly["wo"].T

    def mla_ffn(self, ly, u):
        """deepseek2 FFN: dense, or routed (bias-selected) + shared."""
        if ly["router"] is None:
            return self.ffn(ly, u)
        z = u @ ly["router"].T
        if self.sigmoid_gate:
            p = self.sigmoid(z)
        else:
            p = np.exp(z - z.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
        sel_s = p if ly["bias"] is None else p + ly["bias"]
        if self.n_group > 1:
            # group-limited: each group of E/G consecutive experts scores the
            # sum of its two best; only the best n_group_used groups stay
            g = sel_s.reshape(len(u), self.n_group, -1)
            gs = np.sort(g, axis=2)[:, :, -2:].sum(axis=2)       # (T, G)
            keep = np.argsort(-gs, axis=1, kind="stable")[:, :self.n_group_used]
            mask = np.ones(gs.shape, dtype=bool)
            np.put_along_axis(mask, keep, False, axis=1)
            sel_s = np.where(np.repeat(mask, g.shape[2], axis=1), -np.inf,
                             sel_s)
        out = np.zeros_like(u)
        for t in range(u.shape[0]):
            sel = self.top_k(sel_s[t])
            wts = p[t, sel]
            if self.w_norm:
                wts = wts / max(wts.sum(), 6.103515625e-5)
            if self.w_scale not in (0.0, 1.0):
                wts = wts * self.w_scale
            out[t] = self.experts(ly, u[t], sel, wts)
        sh = (self.silu(u @ ly["gate_shexp"].T) * (u @ ly["up_shexp"].T)) \
            @ ly["down_shexp"].T
        return out + sh

    def gate_up(self, b):
        """Expert gate and up matrices (E, F, D) of layer prefix b: two
        tensors, or one merged ffn_gate_up_exps (E, 2 F, D), gate first."""
        gu = self.t(b + "ffn_gate_up_exps.weight", required=False)
        if gu is None:
            return dict(gate_exps=self.t(b + "ffn_gate_exps.weight"),
                        up_exps=self.t(b + "ffn_up_exps.weight"))
        F = gu.shape[1] // 2
        return dict(gate_exps=gu[:, :F], up_exps=gu[:, F:])

    def mxfp4(self, name):
        """Whether tensor name is MXFP4, whose products round their input
        rows to Q8_0 first (as ggml's CPU backend, and pocket, compute
        them), unless --exact-act."""
        ti = self.g.tinfo.get(name)
        return bool(self.q8_act and ti is not None
                    and ti["type"] == G.T_MXFP4)

    @staticmethod
    def q8_0(x):
        """x (..., n) as Q8_0 holds it: per block of 32, d = amax / 127 kept
        as FP16, q = round-half-even(x * 127 / amax); returns q * fp16(d).
        x is rounded to float32 first (what the engines quantise)."""
        x32 = np.asarray(x, np.float32).astype(np.float64)
        b = x32.reshape(x32.shape[:-1] + (x32.shape[-1] // 32, 32))
        amax = np.abs(b).max(axis=-1, keepdims=True)
        d16 = (amax / 127.0).astype(np.float32).astype(np.float16) \
            .astype(np.float64)
        idv = np.divide(127.0, amax, out=np.zeros_like(amax),
                        where=amax > 0)
        q = np.rint((b * idv).astype(np.float32).astype(np.float64))
        return (q * d16).reshape(x.shape)

    def t(self, name, required=True):
        a = self.g.tensor(name, np.float64)
        if a is None and required:
            raise SystemExit("ref_forward: missing tensor %s" % name)
        return a

    # ---------------------------------------------------------------- maths
    def rms(self, x, w):
        """RMS-normalise along the last axis, then scale by w."""
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)
                           + self.eps) * w

    def rope(self, x, pos):
        """x: (T, H, hd); rotate the first n_rot dims of each head."""
        n_rot = self.n_rot
        half = n_rot // 2
        inv_freq = self.rope_freqs()                             # (half,)
        if self.sections is not None:
            ppos = self.imrope_positions(pos, half)              # (T, half)
        else:
            ppos = np.repeat(pos[:, None], half, axis=1)
        theta = ppos.astype(np.float64) * inv_freq[None]         # (T, half)
        cos = self.mscale * np.cos(theta)[:, None, :]
        sin = self.mscale * np.sin(theta)[:, None, :]
        y = x.copy()
        if self.neox:
            a = x[..., :half]
            b = x[..., half:n_rot]
            y[..., :half] = a * cos - b * sin
            y[..., half:n_rot] = a * sin + b * cos
        else:
            a = x[..., 0:n_rot:2]
            b = x[..., 1:n_rot:2]
            y[..., 0:n_rot:2] = a * cos - b * sin
            y[..., 1:n_rot:2] = a * sin + b * cos
        return y

    def imrope_positions(self, pos, half):
        """IMROPE (interleaved multi-section RoPE): the position each rotated
        pair p uses. Sections [s0, s1, s2, s3]; sector = p % (s0+s1+s2+s3);
        position t if sector % 3 == 0 and sector < 3 s0, h if sector % 3 == 1
        and sector < 3 s1, w if sector % 3 == 2 and sector < 3 s2, else e.
        Text tokens: t = h = w = pos, e = 0."""
        s0, s1, s2, s3 = self.sections
        total = s0 + s1 + s2 + s3
        comp = {"t": pos, "h": pos, "w": pos, "e": np.zeros_like(pos)}
        out = np.zeros((len(pos), half), dtype=np.int64)
        for pp in range(half):
            sec = pp % total if total > 0 else pp
            if sec % 3 == 0 and sec < 3 * s0:
                c = "t"
            elif sec % 3 == 1 and sec < 3 * s1:
                c = "h"
            elif sec % 3 == 2 and sec < 3 * s2:
                c = "w"
            else:
                c = "e"
            out[:, pp] = comp[c]
        return out

    @staticmethod
    def silu(x):
        return x / (1.0 + np.exp(-x))

    @staticmethod
    def sigmoid(x):
        return 1.0 / (1.0 + np.exp(-x))

    @staticmethod
    def softplus(x):
        return np.logaddexp(0.0, x)

    def cache(self, x):
        """What a KV cache of self.kv_cache type holds for x (..., head dim):
        f32 keeps x; f16 rounds each element to half precision; q8_0 keeps,
        per block of 32 along a head, round(x / d) * fp16(d) with d =
        max|x| / 127 (ggml's Q8_0)."""
        if self.kv_cache == "f32":
            return x
        if self.kv_cache == "f16":
            return x.astype(np.float32).astype(np.float16).astype(np.float64)
        x32 = x.astype(np.float32).astype(np.float64)
        b = x32.reshape(x32.shape[:-1] + (x32.shape[-1] // 32, 32))
        d = np.abs(b).max(axis=-1, keepdims=True) / 127.0
        inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
        q = np.trunc(b * inv + np.copysign(0.5, b))      # roundf: half away from 0
        return (q * d.astype(np.float16).astype(np.float64)).reshape(x.shape)

    @staticmethod
    def causal_softmax_attention(q, k, v, scale):
        """q (T, Hq, hd), k (T, Hkv, hd), v (T, Hkv, hdv); q head h uses kv
        head h // (Hq / Hkv). Returns (T, Hq, hdv)."""
        T, Hq, _ = q.shape
        group = Hq // k.shape[1]
        mask = np.tril(np.ones((T, T), dtype=bool))
        out = np.zeros((T, Hq, v.shape[2]))
        for hh in range(Hq):
            kv = hh // group
            s = (q[:, hh, :] @ k[:, kv, :].T) * scale
            s = np.where(mask, s, -np.inf)
            s = s - s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[:, hh, :] = p @ v[:, kv, :]
        return out

    def gated_attention(self, ly, h, pos):
        """qwen35 full-attention layer: q|gate interleaved per head."""
        T = h.shape[0]
        Hq, Hkv, hd = self.n_head, self.n_head_kv, self.head_dim
        if Hq % Hkv:
            raise SystemExit("ref_forward: head_count %d not a multiple of "
                             "head_count_kv %d" % (Hq, Hkv))
        qg = (h @ ly["wq"].T).reshape(T, Hq, 2 * hd)
        q = self.rms(qg[:, :, :hd], ly["q_norm"])
        gate = qg[:, :, hd:]
        k = self.rms((h @ ly["wk"].T).reshape(T, Hkv, hd), ly["k_norm"])
        v = (h @ ly["wv"].T).reshape(T, Hkv, hd)
        q = self.rope(q, pos)
        k = self.cache(self.rope(k, pos))
        v = self.cache(v)
        o = self.causal_softmax_attention(q, k, v, 1.0 / np.sqrt(hd))
        o = o * self.sigmoid(gate)
        return o.reshape(T, Hq * hd) @ ly["wo"].T

    # ---------------------------------------------------- Gated DeltaNet
    @staticmethod
    def delta_recurrent(q, k, v, g, beta):
        """Token-by-token gated delta rule. q, k (T, H, dk) (already
        per-v-head), v (T, H, dv), g, beta (T, H). Per head, state S
        (dk x dv) from zero: S <- exp(g) S; S <- S + k (beta (v - S^T k))^T;
        o = S^T q. Returns o (T, H, dv)."""
        T, H, dk = k.shape
        dv = v.shape[2]
        S = np.zeros((H, dk, dv))
        o = np.zeros((T, H, dv))
        for t in range(T):
            S *= np.exp(g[t])[:, None, None]
            pred = np.einsum("hkv,hk->hv", S, k[t])
            d = beta[t][:, None] * (v[t] - pred)
            S += k[t][:, :, None] * d[:, None, :]
            o[t] = np.einsum("hkv,hk->hv", S, q[t])
        return o

    @staticmethod
    def delta_chunked(q, k, v, g, beta, C):
        """The same gated delta rule, chunk-parallel (WY representation with
        the UT transform), chunks of C tokens; the last chunk may be shorter.
        Within a chunk with entry state S0 and G_r = sum_{i<=r} g_i:
            S_r = exp(G_r) S0 + sum_{i<=r} exp(G_r - G_i) k_i u_i^T
        where the pseudo-values u solve the unit lower-triangular system
            (I + A) u = beta (v - exp(G) K S0),
            A_ij = beta_i exp(G_i - G_j) k_i.k_j  (j < i).
        With Tinv = (I + A)^-1 (UT transform): u = Tinv (beta V) -
        Tinv (beta exp(G) K) S0. Outputs:
            O = exp(G) (Q S0) + [tril(exp(G_r - G_i) q_r.k_i)] u
        and the state carried on is S_n (r = n - 1 above)."""
        T, H, dk = k.shape
        dv = v.shape[2]
        o = np.zeros((T, H, dv))
        for hh in range(H):
            S = np.zeros((dk, dv))
            for c0 in range(0, T, C):
                c1 = min(c0 + C, T)
                n = c1 - c0
                Q, K, V = q[c0:c1, hh], k[c0:c1, hh], v[c0:c1, hh]
                b, G = beta[c0:c1, hh], np.cumsum(g[c0:c1, hh])
                incl = np.tril(np.ones((n, n), dtype=bool))
                strict = np.tril(np.ones((n, n), dtype=bool), -1)
                Dg = G[:, None] - G[None, :]
                decay = np.where(incl, np.exp(np.where(incl, Dg, 0.0)), 0.0)
                A = np.where(strict, b[:, None] * decay * (K @ K.T), 0.0)
                # Tinv = (I + A)^-1 by forward substitution (unit lower
                # triangular): row i of Tinv = e_i - sum_{j<i} A_ij Tinv_j
                Tinv = np.eye(n)
                for i in range(1, n):
                    Tinv[i] -= A[i, :i] @ Tinv[:i]
                Wk = Tinv @ (b[:, None] * np.exp(G)[:, None] * K)  # (n, dk)
                Uv = Tinv @ (b[:, None] * V)                       # (n, dv)
                U = Uv - Wk @ S
                QK = np.where(incl, decay * (Q @ K.T), 0.0)
                o[c0:c1, hh] = np.exp(G)[:, None] * (Q @ S) + QK @ U
                Kd = K * np.exp(G[-1] - G)[:, None]
                S = np.exp(G[-1]) * S + Kd.T @ U
        return o

    def deltanet(self, ly, h):
        """Gated DeltaNet mixer over the whole sequence h (T, D)."""
        T = h.shape[0]
        Hk, Hv, dk = self.H_k, self.H_v, self.d_state
        dv = self.d_inner // Hv
        qkv = h @ ly["wqkv"].T                                  # (T, C)
        z = (h @ ly["wz"].T).reshape(T, Hv, dv)
        beta = self.sigmoid(h @ ly["wbeta"].T)                  # (T, Hv)
        g = self.softplus(h @ ly["walpha"].T + ly["dt_bias"]) * ly["ssm_a"]
        # causal depthwise conv: tap j multiplies qkv[t - (Kc-1) + j]
        Kc = self.d_conv
        padded = np.concatenate([np.zeros((Kc - 1, qkv.shape[1])), qkv])
        c = np.zeros_like(qkv)
        for j in range(Kc):
            c += padded[j:j + T] * ly["conv"][:, j]
        c = self.silu(c)
        nq = Hk * dk
        q = c[:, :nq].reshape(T, Hk, dk)
        k = c[:, nq:2 * nq].reshape(T, Hk, dk)
        v = c[:, 2 * nq:].reshape(T, Hv, dv)

        def l2n(x):
            n = np.sqrt(np.sum(x * x, axis=-1, keepdims=True))
            return x / np.maximum(n, self.eps)
        q = l2n(q) / np.sqrt(dk)
        k = l2n(k)
        if self.next:                          # grouped v-head -> k-head map
            kh = [j // (Hv // Hk) for j in range(Hv)]
        else:                                  # tiled
            kh = [j % Hk for j in range(Hv)]
        q, k = q[:, kh, :], k[:, kh, :]
        if self.deltanet_mode == "chunked":
            o = self.delta_chunked(q, k, v, g, beta, self.chunk)
        else:
            o = self.delta_recurrent(q, k, v, g, beta)
        o = self.rms(o, ly["ssm_norm"]) * self.silu(z)
        return o.reshape(T, Hv * dv) @ ly["ssm_out"].T

    def hybrid_ffn(self, ly, h):
        out = self.ffn(ly, h)
        if ly["router"] is not None:
            sh = (self.silu(h @ ly["gate_shexp"].T) * (h @ ly["up_shexp"].T)) \
                @ ly["down_shexp"].T
            out = out + sh * self.sigmoid(h @ ly["shexp_gate_inp"])[:, None]
        return out

    def attention(self, ly, h, pos):
        T = h.shape[0]
        Hq, Hkv, hd, hdv = self.n_head, self.n_head_kv, self.head_dim, \
            self.head_dim_v
        q, k, v = h @ ly["wq"].T, h @ ly["wk"].T, h @ ly["wv"].T
        for name, y in (("bq", q), ("bk", k), ("bv", v)):
            if ly[name] is not None:
                y += ly[name]
        if self.full_qk_norm:        # olmoe: over all heads at once
            q = self.rms(q, ly["q_norm"])
            k = self.rms(k, ly["k_norm"])
        q = q.reshape(T, Hq, hd)
        k = k.reshape(T, Hkv, hd)
        v = v.reshape(T, Hkv, hdv)
        if not self.full_qk_norm:
            if ly["q_norm"] is not None:
                q = self.rms(q, ly["q_norm"])
            if ly["k_norm"] is not None:
                k = self.rms(k, ly["k_norm"])
        q = self.rope(q, pos)
        k = self.cache(self.rope(k, pos))
        v = self.cache(v)
        group = Hq // Hkv
        scale = self.attn_scale
        mask = np.tril(np.ones((T, T), dtype=bool))     # query i sees j <= i
        if ly["window"]:                                # ... and i - j < W
            mask &= ~np.tril(np.ones((T, T), dtype=bool), -ly["window"])
        out = np.zeros((T, Hq, hdv))
        for hh in range(Hq):
            kv = hh // group
            s = (q[:, hh, :] @ k[:, kv, :].T) * scale   # (T, T)
            s = np.where(mask, s, -np.inf)
            # a sink: one more logit in each row's softmax, weighing no value
            sink = -np.inf if ly["sinks"] is None else ly["sinks"][hh]
            mx = np.maximum(s.max(axis=1, keepdims=True), sink)
            p = np.exp(s - mx)
            p /= p.sum(axis=1, keepdims=True) + np.exp(sink - mx)
            out[:, hh, :] = p @ v[:, kv, :]
        o = out.reshape(T, Hq * hdv) @ ly["wo"].T
        return o if ly["bo"] is None else o + ly["bo"]

    def ffn(self, ly, h):
        if ly["router"] is None:
            return (self.silu(h @ ly["gate"].T) * (h @ ly["up"].T)) \
                @ ly["down"].T
        logits = h @ ly["router"].T                      # (T, E)
        if ly.get("router_b") is not None:
            logits = logits + ly["router_b"]
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        out = np.zeros_like(h)
        k = self.n_expert_used
        hq = self.q8_0(h) if ly.get("gu_q8") else h
        for t in range(h.shape[0]):
            # stable sort on -p: equal probabilities keep the lower index
            order = np.argsort(-p[t], kind="stable")
            if k < len(order):
                self.min_router_margin = min(
                    self.min_router_margin,
                    p[t, order[k - 1]] - p[t, order[k]])
            sel = order[:k]
            # renormalised over the chosen = gpt-oss's softmax of the chosen
            # logits
            wts = p[t, sel] / p[t, sel].sum() if self.renorm else p[t, sel]
            for e, we in zip(sel, wts):
                g = ly["gate_exps"][e] @ hq[t]
                u = ly["up_exps"][e] @ hq[t]
                if self.oss:
                    # SwiGLU-OAI: biases first, gate clamped above at 7,
                    # up to [-7, 7], g sigmoid(1.702 g) (u + 1)
                    g = np.minimum(g + ly["gate_b"][e], 7.0)
                    u = np.clip(u + ly["up_b"][e], -7.0, 7.0)
                    a = g * self.sigmoid(1.702 * g) * (u + 1.0)
                else:
                    a = self.silu(g) * u
                if ly.get("down_q8"):
                    a = self.q8_0(a)
                y = ly["down_exps"][e] @ a
                if ly.get("down_b") is not None:
                    y = y + ly["down_b"][e]
                if self.on_expert:
                    self.on_expert(ly["index"], t, e, we, y)
                out[t] += we * y
        if not self.hybrid and "gate_shexp" in ly:   # qwen2moe, granitemoe
            sh = (self.silu(h @ ly["gate_shexp"].T) * (h @ ly["up_shexp"].T)) \
                @ ly["down_shexp"].T
            if "shexp_gate_inp" in ly:
                sh = sh * self.sigmoid(h @ ly["shexp_gate_inp"])[:, None]
            out = out + sh
        return out

    def top_k(self, s):
        """The expert_used_count largest of the scores s (stable sort on -s:
        equal scores keep the lower index); notes the top-k margin."""
        k = self.n_expert_used
        order = np.argsort(-s, kind="stable")
        if k < len(order):
            self.min_router_margin = min(self.min_router_margin,
                                         s[order[k - 1]] - s[order[k]])
        return order[:k]

    def experts(self, ly, x, sel, wts):
        """sum over e in sel of w_e down_e(silu(gate_e x) * up_e x)."""
        out = np.zeros_like(x)
        for e, we in zip(sel, wts):
            g = ly["gate_exps"][e] @ x
            u = ly["up_exps"][e] @ x
            out += we * (ly["down_exps"][e] @ (self.silu(g) * u))
        return out

    def forward(self, ids):
        if self.impl is not None:
            lg = self.impl.forward(ids)
            self.min_router_margin = self.impl.min_router_margin
            return lg
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            raise SystemExit("ref_forward: no token ids")
        if ids.min() < 0 or ids.max() >= self.n_vocab:
            raise SystemExit("ref_forward: token id out of range [0, %d)"
                             % self.n_vocab)
        pos = np.arange(len(ids))
        x = self.tok_embd[ids].copy()                     # (T, D)
        if self.mla:
            for ly in self.layers:
                x = x + self.mla_attention(ly, self.rms(x, ly["attn_norm"]),
                                           pos)
                x = x + self.mla_ffn(ly, self.rms(x, ly["ffn_norm"]))
            return self.rms(x, self.out_norm) @ self.output.T
        if self.hybrid:
            for ly in self.layers:
                h = self.rms(x, ly["attn_norm"])
                if ly["recurrent"]:
                    x = x + self.deltanet(ly, h)
                else:
                    x = x + self.gated_attention(ly, h, pos)
                x = x + self.hybrid_ffn(ly, self.rms(x, ly["ffn_norm"]))
            return self.rms(x, self.out_norm) @ self.output.T
        x = x * self.embd_scale
        rs = self.residual_scale
        for ly in self.layers:
            x = x + rs * self.attention(ly, self.rms(x, ly["attn_norm"]), pos)
            x = x + rs * self.ffn(ly, self.rms(x, ly["ffn_norm"]))
        return (self.rms(x, self.out_norm) @ self.output.T) / self.logit_scale


def parse_deltanet(spec):
    """'recurrent' | 'chunked' | 'chunked:C' -> (mode, C)."""
    if spec == "recurrent":
        return "recurrent", 64
    if spec == "chunked":
        return "chunked", 64
    if spec.startswith("chunked:"):
        try:
            c = int(spec[len("chunked:"):])
        except ValueError:
            c = 0
        if c >= 1:
            return "chunked", c
    raise SystemExit("ref_forward: --deltanet must be recurrent, chunked or "
                     "chunked:C (C >= 1), not %r" % spec)


def main(argv):
    argv = list(argv)
    mode, chunk = "recurrent", 64
    stats = False
    if "--stats" in argv:
        argv.remove("--stats")
        stats = True
    if "--deltanet" in argv:
        i = argv.index("--deltanet")
        if i + 1 >= len(argv):
            raise SystemExit("ref_forward: --deltanet needs a value")
        mode, chunk = parse_deltanet(argv[i + 1])
        del argv[i:i + 2]
    gelu = "ggml"
    if "--gelu" in argv:
        i = argv.index("--gelu")
        if i + 1 >= len(argv) or argv[i + 1] not in ("ggml", "exact"):
            raise SystemExit("ref_forward: --gelu must be ggml or exact")
        gelu = argv[i + 1]
        del argv[i:i + 2]
    q8_act = True
    if "--exact-act" in argv:
        argv.remove("--exact-act")
        q8_act = False
    mla = "decompressed"
    if "--mla" in argv:
        i = argv.index("--mla")
        if i + 1 >= len(argv):
            raise SystemExit("ref_forward: --mla needs a value")
        mla = argv[i + 1]
        del argv[i:i + 2]
    kv_cache = "f32"
    if "--kv-cache" in argv:
        i = argv.index("--kv-cache")
        if i + 1 >= len(argv) or argv[i + 1] not in ("f32", "f16", "q8_0"):
            raise SystemExit("ref_forward: --kv-cache must be f32, f16 or q8_0")
        kv_cache = argv[i + 1]
        del argv[i:i + 2]
    if len(argv) != 3:
        sys.stderr.write("usage: ref_forward.py [--deltanet recurrent|"
                         "chunked[:C]] [--kv-cache f32|f16|q8_0] [--stats] "
                         "MODEL.gguf ID,ID,... "
                         "OUT.npy\n")
        return 2
    model_path, ids_s, out_path = argv
    ids = [int(s) for s in ids_s.split(",") if s.strip() != ""]
    m = Model(model_path, deltanet=mode, chunk=chunk, kv_cache=kv_cache,
              q8_act=q8_act, gelu=gelu, mla=mla)
    logits = m.forward(ids)
    np.save(out_path, logits)
    if stats:
        sys.stdout.write("ref_forward: %s, %d tokens, smallest router top-k "
                         "margin %s\n" % (m.arch, len(ids),
                                          "%.4f" % m.min_router_margin
                                          if np.isfinite(m.min_router_margin)
                                          else "n/a"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
