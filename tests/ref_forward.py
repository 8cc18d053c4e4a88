#!/usr/bin/python3
"""ref_forward.py - independent float64 numpy reference of the forward pass.

usage: ref_forward.py MODEL.gguf IDS OUT.npy      (IDS: comma-separated ids)

Reads everything from the GGUF file (keys and tensors, nothing from the
generator) and writes an (n_tokens, n_vocab) float64 array: row i holds the
logits after token i at position i, attending causally to positions 0..i.
Supported architectures: llama (dense, or MoE "mixtral" with expert tensors),
qwen3, qwen3moe. Semantics follow llama.cpp:
  rms(x, w) = x / sqrt(mean(x^2) + eps) * w
  attention: optional per-head q/k RMS norm, RoPE (NEOX for qwen3*, NORM for
  llama), scale 1/sqrt(head_dim), grouped-query heads (q head h -> kv head
  h // (Hq/Hkv))
  FFN: down(silu(gate h) * up h); MoE: softmax router over all experts, top-k
  (ties -> lower index), weights renormalised to sum 1.
  logits = output (or token_embd when output.weight is absent) . rms(x)
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_py as G  # noqa: E402

NEOX_ARCHS = ("qwen3", "qwen3moe", "qwen2", "qwen2moe")
NORM_ARCHS = ("llama",)


class Model:
    def __init__(self, path):
        g = G.read_gguf(path)
        self.g = g
        arch = g.get("general.architecture")
        if arch not in NEOX_ARCHS + NORM_ARCHS:
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
        self.neox = arch in NEOX_ARCHS
        self.n_expert = int(key("expert_count", 0))
        self.n_expert_used = int(key("expert_used_count", 0))

        self.tok_embd = self.t("token_embd.weight")          # (V, D)
        self.n_vocab = self.tok_embd.shape[0]
        self.out_norm = self.t("output_norm.weight")
        out = self.t("output.weight", required=False)
        self.output = self.tok_embd if out is None else out   # (V, D)
        self.tied = out is None
        self.layers = []
        for i in range(self.n_layer):
            b = "blk.%d." % i
            ly = dict(
                attn_norm=self.t(b + "attn_norm.weight"),
                wq=self.t(b + "attn_q.weight"),
                wk=self.t(b + "attn_k.weight"),
                wv=self.t(b + "attn_v.weight"),
                wo=self.t(b + "attn_output.weight"),
                q_norm=self.t(b + "attn_q_norm.weight", required=False),
                k_norm=self.t(b + "attn_k_norm.weight", required=False),
                ffn_norm=self.t(b + "ffn_norm.weight"),
                router=self.t(b + "ffn_gate_inp.weight", required=False),
            )
            if ly["router"] is not None:
                ly["gate_exps"] = self.t(b + "ffn_gate_exps.weight")
                ly["up_exps"] = self.t(b + "ffn_up_exps.weight")
                ly["down_exps"] = self.t(b + "ffn_down_exps.weight")
                if self.n_expert_used <= 0:
                    raise SystemExit("ref_forward: MoE layer without "
                                     "expert_used_count")
                if ly["router"].shape[0] != self.n_expert and self.n_expert:
                    raise SystemExit("ref_forward: router has %d experts, "
                                     "expert_count %d"
                                     % (ly["router"].shape[0], self.n_expert))
            else:
                ly["gate"] = self.t(b + "ffn_gate.weight")
                ly["up"] = self.t(b + "ffn_up.weight")
                ly["down"] = self.t(b + "ffn_down.weight")
            self.layers.append(ly)

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
        p = np.arange(half, dtype=np.float64)
        inv_freq = self.rope_base ** (-2.0 * p / n_rot)          # (half,)
        theta = pos[:, None].astype(np.float64) * inv_freq[None]  # (T, half)
        cos = np.cos(theta)[:, None, :]
        sin = np.sin(theta)[:, None, :]
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

    @staticmethod
    def silu(x):
        return x / (1.0 + np.exp(-x))

    def attention(self, ly, h, pos):
        T = h.shape[0]
        Hq, Hkv, hd, hdv = self.n_head, self.n_head_kv, self.head_dim, \
            self.head_dim_v
        q = (h @ ly["wq"].T).reshape(T, Hq, hd)
        k = (h @ ly["wk"].T).reshape(T, Hkv, hd)
        v = (h @ ly["wv"].T).reshape(T, Hkv, hdv)
        if ly["q_norm"] is not None:
            q = self.rms(q, ly["q_norm"])
        if ly["k_norm"] is not None:
            k = self.rms(k, ly["k_norm"])
        q = self.rope(q, pos)
        k = self.rope(k, pos)
        group = Hq // Hkv
        scale = 1.0 / np.sqrt(hd)
        mask = np.tril(np.ones((T, T), dtype=bool))     # query i sees j <= i
        out = np.zeros((T, Hq, hdv))
        for hh in range(Hq):
            kv = hh // group
            s = (q[:, hh, :] @ k[:, kv, :].T) * scale   # (T, T)
            s = np.where(mask, s, -np.inf)
            s = s - s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[:, hh, :] = p @ v[:, kv, :]
        return out.reshape(T, Hq * hdv) @ ly["wo"].T

    def ffn(self, ly, h):
        if ly["router"] is None:
            return (self.silu(h @ ly["gate"].T) * (h @ ly["up"].T)) \
                @ ly["down"].T
        logits = h @ ly["router"].T                      # (T, E)
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        k = self.n_expert_used
        out = np.zeros_like(h)
        for t in range(h.shape[0]):
            # stable sort on -p: equal probabilities keep the lower index
            sel = np.argsort(-p[t], kind="stable")[:k]
            wts = p[t, sel] / p[t, sel].sum()
            for e, we in zip(sel, wts):
                g = ly["gate_exps"][e] @ h[t]
                u = ly["up_exps"][e] @ h[t]
                out[t] += we * (ly["down_exps"][e] @ (self.silu(g) * u))
        return out

    def forward(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            raise SystemExit("ref_forward: no token ids")
        if ids.min() < 0 or ids.max() >= self.n_vocab:
            raise SystemExit("ref_forward: token id out of range [0, %d)"
                             % self.n_vocab)
        pos = np.arange(len(ids))
        x = self.tok_embd[ids].copy()                     # (T, D)
        for ly in self.layers:
            x = x + self.attention(ly, self.rms(x, ly["attn_norm"]), pos)
            x = x + self.ffn(ly, self.rms(x, ly["ffn_norm"]))
        return self.rms(x, self.out_norm) @ self.output.T   # (T, V)


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: ref_forward.py MODEL.gguf ID,ID,... "
                         "OUT.npy\n")
        return 2
    model_path, ids_s, out_path = argv
    ids = [int(s) for s in ids_s.split(",") if s.strip() != ""]
    m = Model(model_path)
    logits = m.forward(ids)
    np.save(out_path, logits)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
