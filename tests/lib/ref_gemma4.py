#!/usr/bin/python3
"""ref_gemma4.py - the float64 numpy reference of llama.cpp's gemma4
architecture in its MoE form (Gemma-4 26B-A4B layout), used by
ref_forward.py (which hands gemma4 files to Gemma4Model) and
check_fixture.py. Reads everything from the GGUF file; semantics as in
../shared/fixtures/gemma4/README.md ("The forward pass, precisely"):

  x = token_embd[id] * sqrtf(D)
  per layer (sliding iff attention.sliding_window_pattern[il]):
    h = rms(x, attn_norm)
    q = rms_head(W_q h, attn_q_norm); kr = W_k h; v = W_v h, or kr without
    attn_v; k = rms_head(kr, attn_k_norm); v = rms_head(v) (no weight)
    q, k: NEOX RoPE; sliding: n_rot = rope.dimension_count_swa, base
    rope.freq_base_swa; global: rope.dimension_count, rope.freq_base,
    theta_p divided by rope_freqs[p]
    s = q.k (scale 1), causal, on sliding layers only the W most recent
    positions (i - W < j <= i); GQA consecutive grouping
    a = x + rms(W_o o, post_attention_norm)
    m = rms(W_down (gelu(W_gate b) * W_up b), post_ffw_norm_1), b = rms(a, ffn_norm)
    r = rms(a) / sqrtf(D) * ffn_gate_inp.scale; p = softmax(W_router r)
    top-k by p, weights renormalised over the chosen
    t = rms(a, pre_ffw_norm_2); y_e = W_down,e (gelu(g_e) * u_e) * ffn_down_exps.scale[e]
    n = rms(sum w_e y_e, post_ffw_norm_2)
    x = (a + rms(m + n, post_ffw_norm)) * layer_output_scale
  logits = c tanh((W_out rms(x, output_norm)) / c), c = final_logit_softcapping

GELU: "exact" is the tanh form in float64; "ggml" (the default) is what
ggml's CPU backend computes through its FP16 table: for -10 < x < 10,
f32(fp16(gelu_f32(f32(fp16(x))))) with gelu_f32 evaluated in float32
(numpy's float32 tanh), 0 for x <= -10, x for x >= 10.
"""

import numpy as np

SQRT_2_OVER_PI = 0.79788456080286535587989211986876
GELU_COEF_A = 0.044715


def gelu_exact(x):
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)))


def gelu_ggml(x):
    """ggml's FP16-table GELU (GGML_GELU_FP16) on float64 input."""
    x32 = np.asarray(x).astype(np.float32)
    f = x32.astype(np.float16).astype(np.float32)
    half, one = np.float32(0.5), np.float32(1.0)
    c, a = np.float32(SQRT_2_OVER_PI), np.float32(GELU_COEF_A)
    g = half * f * (one + np.tanh(c * f * (one + a * f * f)))
    y = g.astype(np.float32).astype(np.float16).astype(np.float64)
    y = np.where(x32 <= -10.0, 0.0, y)
    return np.where(x32 >= 10.0, x32.astype(np.float64), y)


class Gemma4Model:
    def __init__(self, g, kv_cache, cache_fn, gelu="ggml"):
        self.g = g
        self.cache = cache_fn
        if gelu not in ("ggml", "exact"):
            raise SystemExit("ref_gemma4: gelu must be ggml or exact")
        self.gelu = gelu_ggml if gelu == "ggml" else gelu_exact
        self.min_router_margin = np.inf
        pre = "gemma4."

        def key(name, default=None, required=False):
            v = g.get(pre + name)
            if v is None:
                if required:
                    raise SystemExit("ref_gemma4: missing key gemma4.%s" % name)
                return default
            return v

        def per_layer(name, n, default=None, required=False):
            v = key(name, default, required)
            a = np.atleast_1d(np.asarray(v))
            if a.size == 1:
                a = np.repeat(a, n)
            if a.size != n:
                raise SystemExit("ref_gemma4: %s has %d entries for %d layers"
                                 % (name, a.size, n))
            return a

        L = self.n_layer = int(key("block_count", required=True))
        D = self.n_embd = int(key("embedding_length", required=True))
        self.eps = float(key("attention.layer_norm_rms_epsilon", required=True))
        self.swa = [bool(s) for s in per_layer("attention.sliding_window_pattern", L, required=True)]
        self.window = int(key("attention.sliding_window", required=True))
        n_head = per_layer("attention.head_count", L, required=True)
        n_kv = per_layer("attention.head_count_kv", L, required=True)
        hd, hd_swa = int(key("attention.key_length", required=True)), \
            int(key("attention.key_length_swa", required=True))
        if int(key("attention.value_length", hd)) != hd or \
                int(key("attention.value_length_swa", hd_swa)) != hd_swa:
            raise SystemExit("ref_gemma4: value_length must equal key_length")
        rot, rot_swa = int(key("rope.dimension_count", hd)), \
            int(key("rope.dimension_count_swa", hd_swa))
        base, base_swa = float(key("rope.freq_base", 10000.0)), \
            float(key("rope.freq_base_swa", 10000.0))
        if int(key("embedding_length_per_layer_input", required=True)) != 0:
            raise SystemExit("ref_gemma4: per-layer embeddings not covered")
        if int(key("attention.shared_kv_layers", 0)) != 0:
            raise SystemExit("ref_gemma4: shared KV layers not covered")
        self.softcap = float(key("final_logit_softcapping", 0.0))
        self.n_expert = per_layer("expert_count", L, 0)   # one per layer in a pruned file
        self.k = int(key("expert_used_count", 0))
        n_ff = per_layer("feed_forward_length", L, required=True)

        def t(name, shape=None, required=True):
            a = g.tensor(name, np.float64)
            if a is None:
                if required:
                    raise SystemExit("ref_gemma4: missing tensor %s" % name)
                return None
            if shape is not None and a.shape != tuple(shape):
                raise SystemExit("ref_gemma4: %s has shape %s, expected %s"
                                 % (name, a.shape, tuple(shape)))
            return a

        self.tok_embd = t("token_embd.weight")
        self.n_vocab = self.tok_embd.shape[0]
        self.out_norm = t("output_norm.weight", (D,))
        out = t("output.weight", required=False)
        self.output = self.tok_embd if out is None else out
        self.tied = out is None
        freqs = t("rope_freqs.weight", required=False)
        self.layers = []
        for i in range(L):
            b = "blk.%d." % i
            s = self.swa[i]
            Hq, Hkv, d = int(n_head[i]), int(n_kv[i]), hd_swa if s else hd
            if Hq % Hkv:
                raise SystemExit("ref_gemma4: layer %d heads %d vs kv %d" % (i, Hq, Hkv))
            ly = dict(swa=s, Hq=Hq, Hkv=Hkv, hd=d, n_rot=rot_swa if s else rot,
                      base=base_swa if s else base,
                      freqs=None if s else freqs,
                      attn_norm=t(b + "attn_norm.weight", (D,)),
                      wq=t(b + "attn_q.weight", (Hq * d, D)),
                      wk=t(b + "attn_k.weight", (Hkv * d, D)),
                      wv=t(b + "attn_v.weight", (Hkv * d, D), required=False),
                      wo=t(b + "attn_output.weight", (D, Hq * d)),
                      q_norm=t(b + "attn_q_norm.weight", (d,)),
                      k_norm=t(b + "attn_k_norm.weight", (d,)),
                      post_attn=t(b + "post_attention_norm.weight", (D,)),
                      ffn_norm=t(b + "ffn_norm.weight", (D,)),
                      gate=t(b + "ffn_gate.weight", (int(n_ff[i]), D)),
                      up=t(b + "ffn_up.weight", (int(n_ff[i]), D)),
                      down=t(b + "ffn_down.weight", (D, int(n_ff[i]))),
                      post_ffw=t(b + "post_ffw_norm.weight", (D,)),
                      out_scale=t(b + "layer_output_scale.weight", (1,), required=False),
                      router=t(b + "ffn_gate_inp.weight", required=False))
            if ly["freqs"] is not None and ly["freqs"].shape != (ly["n_rot"] // 2,):
                raise SystemExit("ref_gemma4: rope_freqs has shape %s" % (ly["freqs"].shape,))
            if ly["router"] is not None:
                E, Fe = int(self.n_expert[i]), int(key("expert_feed_forward_length", required=True))
                if ly["router"].shape != (E, D) or not 0 < self.k <= E:
                    raise SystemExit("ref_gemma4: layer %d router / expert counts" % i)
                gu = t(b + "ffn_gate_up_exps.weight", (E, 2 * Fe, D), required=False)
                if gu is None:
                    ly["gate_exps"] = t(b + "ffn_gate_exps.weight", (E, Fe, D))
                    ly["up_exps"] = t(b + "ffn_up_exps.weight", (E, Fe, D))
                else:
                    ly["gate_exps"], ly["up_exps"] = gu[:, :Fe], gu[:, Fe:]
                ly.update(router_scale=t(b + "ffn_gate_inp.scale", (D,)),
                          down_exps=t(b + "ffn_down_exps.weight", (E, D, Fe)),
                          down_scale=t(b + "ffn_down_exps.scale", (E,)),
                          post1=t(b + "post_ffw_norm_1.weight", (D,)),
                          pre2=t(b + "pre_ffw_norm_2.weight", (D,)),
                          post2=t(b + "post_ffw_norm_2.weight", (D,)))
            self.layers.append(ly)

    def rms(self, x, w=None):
        y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return y if w is None else y * w

    @staticmethod
    def rope(x, pos, n_rot, base, freqs):
        """NEOX pairs (p, p + n_rot/2) of each head of x (T, H, hd)."""
        half = n_rot // 2
        inv = base ** (-2.0 * np.arange(half) / n_rot)
        if freqs is not None:
            inv = inv / freqs
        th = pos[:, None].astype(np.float64) * inv[None]
        c, s = np.cos(th)[:, None, :], np.sin(th)[:, None, :]
        y = x.copy()
        a, b = x[..., :half], x[..., half:n_rot]
        y[..., :half] = a * c - b * s
        y[..., half:n_rot] = a * s + b * c
        return y

    def attention(self, ly, h, pos):
        T, Hq, Hkv, d = h.shape[0], ly["Hq"], ly["Hkv"], ly["hd"]
        q = self.rms((h @ ly["wq"].T).reshape(T, Hq, d), ly["q_norm"])
        kr = (h @ ly["wk"].T).reshape(T, Hkv, d)
        v = kr if ly["wv"] is None else (h @ ly["wv"].T).reshape(T, Hkv, d)
        k = self.rms(kr, ly["k_norm"])
        v = self.cache(self.rms(v))
        q = self.rope(q, pos, ly["n_rot"], ly["base"], ly["freqs"])
        k = self.cache(self.rope(k, pos, ly["n_rot"], ly["base"], ly["freqs"]))
        i, j = np.arange(T)[:, None], np.arange(T)[None, :]
        mask = j <= i
        if ly["swa"]:
            mask &= i - j < self.window
        group = Hq // Hkv
        o = np.zeros((T, Hq, d))
        for hh in range(Hq):
            s = np.where(mask, q[:, hh] @ k[:, hh // group].T, -np.inf)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            o[:, hh] = p @ v[:, hh // group]
        return o.reshape(T, Hq * d) @ ly["wo"].T

    def experts(self, ly, a):
        D = self.n_embd
        r = self.rms(a) / np.sqrt(np.float32(D)) * ly["router_scale"]
        z = r @ ly["router"].T
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        t = self.rms(a, ly["pre2"])
        out = np.zeros_like(a)
        for tt in range(a.shape[0]):
            order = np.argsort(-p[tt], kind="stable")
            if self.k < len(order):
                self.min_router_margin = min(self.min_router_margin,
                                             p[tt, order[self.k - 1]] - p[tt, order[self.k]])
            sel = order[:self.k]
            w = p[tt, sel] / max(p[tt, sel].sum(), 6.103515625e-5)
            for e, we in zip(sel, w):
                hid = self.gelu(ly["gate_exps"][e] @ t[tt]) * (ly["up_exps"][e] @ t[tt])
                out[tt] += we * (ly["down_exps"][e] @ hid) * ly["down_scale"][e]
        return self.rms(out, ly["post2"])

    def forward(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0 or ids.min() < 0 or ids.max() >= self.n_vocab:
            raise SystemExit("ref_gemma4: token ids empty or out of range")
        pos = np.arange(len(ids))
        x = self.tok_embd[ids] * float(np.sqrt(np.float32(self.n_embd)))
        for ly in self.layers:
            a = x + self.rms(self.attention(ly, self.rms(x, ly["attn_norm"]), pos), ly["post_attn"])
            b = self.rms(a, ly["ffn_norm"])
            f = (self.gelu(b @ ly["gate"].T) * (b @ ly["up"].T)) @ ly["down"].T
            if ly["router"] is not None:
                f = self.rms(f, ly["post1"]) + self.experts(ly, a)
            x = a + self.rms(f, ly["post_ffw"])
            if ly["out_scale"] is not None:
                x = x * ly["out_scale"][0]
        lg = self.rms(x, self.out_norm) @ self.output.T
        if self.softcap > 0:
            lg = self.softcap * np.tanh(lg / self.softcap)
        return lg
