#!/bin/sh
# t_imatrix.sh - pocket imatrix and importance-weighted quantization.
#  1. pocket imatrix over 60 windows of 256 tokens of calib.txt: the GGUF file
#     (read with tests/lib/gguf_py.py) has the llama.cpp keys, an in_sum2 / counts /
#     in_sum triple for every attention, router and expert matrix of every
#     layer and none for output.weight; dense counts = tokens, expert counts
#     sum to tokens x top-k per layer; in_sum2 >= 0.
#  2. Values, independently: build/tests/tool_imatrix collects over a fixed
#     id sequence; a float64 numpy forward pass (tests/lib/ref_forward.py's
#     Model, recording each matrix's inputs) must give the same in_sum2 and
#     counts (layer 0: 1e-5 relative for attention inputs, 2e-2 elsewhere,
#     expert counts exact).
#  3. The lookup (what quantize uses) is in_sum2 / count, 1 for experts no
#     token reached.
#  4. Acceptance: Q2_K with the imatrix has a lower mean KL divergence from
#     the F16 model on valid.txt (disjoint from calib.txt) than Q2_K without.
#  5. Bad input: one-line errors, exit 1.
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"; TOOL="$BUILD/tests/tool_imatrix"; M=models/kjv-moe-f16.gguf
CAL=tests/data/text/calib.txt; VAL=tests/data/text/valid.txt
tmp="$BUILD/tmp/imatrix"; rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }

echo "== 1. pocket imatrix"
"$P" imatrix -m "$M" -f "$CAL" -o "$tmp/im.gguf" -c 256 --chunks 60 -t 2 >"$tmp/im.out" 2>"$tmp/im.err" ||
    { cat "$tmp/im.err"; fail "pocket imatrix"; }
cat "$tmp/im.out"
grep -q "chunk 60/60" "$tmp/im.err" || fail "no progress on stderr"
"$PYTHON" - "$tmp/im.gguf" "$M" <<'EOF'
import sys, os
sys.path.insert(0, "tests/lib")
import numpy as np, gguf_py as G
im, mg = G.read_gguf(sys.argv[1]), G.read_gguf(sys.argv[2], load_data=False)
assert im.get("general.type") == "imatrix", im.get("general.type")
assert im.get("imatrix.chunk_count") == 60 and im.get("imatrix.chunk_size") == 256
assert [os.path.basename(d) for d in im.get("imatrix.datasets")] == ["calib.txt"], im.get("imatrix.datasets")
L, K = mg.get("qwen3moe.block_count"), mg.get("qwen3moe.expert_used_count")
E, T = mg.get("qwen3moe.expert_count"), 60 * 256
names = {n.rsplit(".", 1)[0] for n in im.tensors}
want = {"blk.%d.%s.weight" % (l, t) for l in range(L) for t in
        ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate_inp",
         "ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")}
assert names == want, sorted(names ^ want)
for n in sorted(want):
    s2, c, s = (im.tensor(n + x) for x in (".in_sum2", ".counts", ".in_sum"))
    ne0 = mg.tinfo[n]["ne"][0]
    assert np.all(np.isfinite(s2)) and s2.min() >= 0, n
    if "_exps" in n:
        assert s2.shape == (E, ne0) and c.shape == (E, 1) and s.shape == s2.shape, (n, s2.shape, c.shape)
        assert c.sum() == T * K, (n, c.sum(), T * K)
    else:
        assert s2.shape == (ne0,) and c.shape == (1,) and c[0] == T, (n, s2.shape, c)
    cc = c.reshape(-1, 1) if s2.ndim == 2 else c
    assert np.all(s * s <= s2 * cc * (1 + 1e-4) + 1e-6), n       # Cauchy-Schwarz
print("structure ok: %d entries, dense counts %d, expert counts sum to %d x top-%d" % (len(names), T, T, K))
EOF

echo "== 2. values against a numpy forward pass"
IDS="1,318,52,1022,7,1500,44,900,3,77,2048,15,640,211,9,3999,128,64,700,33,1200,5,88,401"
"$TOOL" collect "$M" "$tmp/ids.gguf" "$IDS"
"$PYTHON" - "$tmp/ids.gguf" "$M" "$IDS" <<'EOF'
import sys
sys.path.insert(0, "tests/lib")
import numpy as np, gguf_py as G, ref_forward as R
im, ids = G.read_gguf(sys.argv[1]), [int(v) for v in sys.argv[3].split(",")]
m = R.Model(sys.argv[2])
acc = {}                                   # name -> [sum2 (n_mat, ne0), counts]
def rec(name, x, mat=0, n_mat=1):
    a = acc.setdefault(name, [np.zeros((n_mat, x.shape[-1])), np.zeros(n_mat)])
    a[0][mat] += x * x; a[1][mat] += 1
# the forward pass of ref_forward.Model, recording the input of every matrix
pos = np.arange(len(ids)); x = m.tok_embd[ids].copy(); E = m.n_expert
for li, ly in enumerate(m.layers):
    b = "blk.%d." % li
    h = m.rms(x, ly["attn_norm"])
    for t in h:
        for n in ("attn_q", "attn_k", "attn_v"): rec(b + n + ".weight", t)
    T_, Hq, Hkv, hd = len(ids), m.n_head, m.n_head_kv, m.head_dim
    q = (h @ ly["wq"].T).reshape(T_, Hq, hd); k = (h @ ly["wk"].T).reshape(T_, Hkv, hd)
    v = (h @ ly["wv"].T).reshape(T_, Hkv, m.head_dim_v)
    if ly["q_norm"] is not None: q = m.rms(q, ly["q_norm"])
    if ly["k_norm"] is not None: k = m.rms(k, ly["k_norm"])
    q, k = m.rope(q, pos), m.rope(k, pos)
    att = np.zeros((T_, Hq, m.head_dim_v)); mask = np.tril(np.ones((T_, T_), bool))
    for hh in range(Hq):
        s = np.where(mask, q[:, hh] @ k[:, hh // (Hq // Hkv)].T / np.sqrt(hd), -np.inf)
        p = np.exp(s - s.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
        att[:, hh] = p @ v[:, hh // (Hq // Hkv)]
    att = att.reshape(T_, -1)
    for t in att: rec(b + "attn_output.weight", t)
    x = x + att @ ly["wo"].T
    h = m.rms(x, ly["ffn_norm"]); out = np.zeros_like(h)
    for t in range(T_):
        rec(b + "ffn_gate_inp.weight", h[t])
        lg = ly["router"] @ h[t]; p = np.exp(lg - lg.max()); p /= p.sum()
        sel = np.argsort(-p, kind="stable")[:m.n_expert_used]; wts = p[sel] / p[sel].sum()
        for e, we in zip(sel, wts):
            rec(b + "ffn_gate_exps.weight", h[t], e, E); rec(b + "ffn_up_exps.weight", h[t], e, E)
            a = m.silu(ly["gate_exps"][e] @ h[t]) * (ly["up_exps"][e] @ h[t])
            rec(b + "ffn_down_exps.weight", a, e, E)
            out[t] += we * (ly["down_exps"][e] @ a)
    x = x + out
worst = {}
for n, (s2, c) in sorted(acc.items()):
    got = im.tensor(n + ".in_sum2").reshape(s2.shape); gc = im.tensor(n + ".counts").reshape(-1)
    layer0 = n.startswith("blk.0.")
    if layer0 or np.array_equal(gc, c):
        rel = np.abs(got - s2).max() / s2.max()
        tol = 1e-5 if layer0 and ("attn_q" in n or "attn_k" in n or "attn_v" in n) else 2e-2
        assert rel < tol, (n, rel, tol)
        worst[n.split(".")[2]] = max(worst.get(n.split(".")[2], 0), rel)
    if layer0: assert np.array_equal(gc, c), (n, gc, c)
    elif not np.array_equal(gc, c): print("note: %s: routing differs from the reference (near tie)" % n)
print("values ok; worst relative difference per matrix kind:",
      ", ".join("%s %.1e" % kv for kv in sorted(worst.items())))
EOF

echo "== 3. lookup = in_sum2 / counts (1 where count is 0)"
"$TOOL" lookup "$tmp/im.gguf" blk.2.ffn_down_exps.weight >"$tmp/lk.txt"
"$PYTHON" - "$tmp/im.gguf" "$tmp/lk.txt" <<'EOF'
import sys
sys.path.insert(0, "tests/lib")
import numpy as np, gguf_py as G
im = G.read_gguf(sys.argv[1]); n = "blk.2.ffn_down_exps.weight"
s2, c = im.tensor(n + ".in_sum2"), im.tensor(n + ".counts")
want = np.where(c > 0, s2 / np.maximum(c, 1), 1.0).reshape(-1)
got = np.loadtxt(sys.argv[2])
assert got.shape == want.shape and np.allclose(got, want, rtol=1e-6), np.abs(got - want).max()
print("lookup ok (%d values)" % got.size)
EOF

echo "== 4. Q2_K with and without the imatrix: KL divergence on valid.txt"
quant() {   # IN OUT TYPE [IMATRIX]
    if [ $# = 4 ]; then
        "$P" quantize "$1" "$2" "$3" --imatrix "$4" -t 2 >/dev/null 2>"$tmp/q.err" ||
            { cat "$tmp/q.err"; fail "pocket quantize --imatrix"; }
    else
        "$P" quantize "$1" "$2" "$3" -t 2 >/dev/null 2>"$tmp/q.err" || { cat "$tmp/q.err"; fail "pocket quantize"; }
    fi
}
quant "$M" "$tmp/q2.gguf" Q2_K
quant "$M" "$tmp/q2i.gguf" Q2_K "$tmp/im.gguf"
"$P" perplexity -m "$M" -f "$VAL" -c 256 --chunks 16 -t 2 --kl-divergence-base "$tmp/base.kld" >/dev/null 2>&1
k0=$("$P" perplexity -m "$tmp/q2.gguf" --kl-divergence "$tmp/base.kld" -t 2 2>/dev/null | sed -n 's/^  mean KLD *\([0-9.]*\).*/\1/p')
k1=$("$P" perplexity -m "$tmp/q2i.gguf" --kl-divergence "$tmp/base.kld" -t 2 2>/dev/null | sed -n 's/^  mean KLD *\([0-9.]*\).*/\1/p')
echo "Q2_K mean KLD: without imatrix $k0, with imatrix $k1"
[ -n "$k0" ] && [ -n "$k1" ] || fail "no KLD"
"$PYTHON" -c "import sys; sys.exit(0 if $k1 < $k0 else 1)" || fail "imatrix did not lower the KLD ($k1 >= $k0)"

echo "== 5. refusals"
check_err() {
    want=$1; shift
    if "$@" >/dev/null 2>"$tmp/err"; then fail "accepted: $*"; fi
    [ "$(grep -c 'error' "$tmp/err")" = 1 ] && grep -qF -- "$want" "$tmp/err" || {
        cat "$tmp/err"; fail "bad message for: $*"; }
    echo "ok refused: $(cat "$tmp/err")"
}
check_err "no calibration text" "$P" imatrix -m "$M" -o "$tmp/x.gguf"
echo "In the beginning God created the heaven and the earth." >"$tmp/short.txt"
check_err "fewer than one window" "$P" imatrix -m "$M" -f "$tmp/short.txt" -c 256 -o "$tmp/x.gguf"
check_err "unknown option" "$P" imatrix -m "$M" -f "$CAL" --bogus
check_err "no imatrix entries" "$TOOL" lookup "$M" blk.0.attn_q.weight
echo "t_imatrix: ok"
