#!/bin/sh
# MXFP4 (ggml type 39, the gpt-oss experts) against the independent numpy
# reference tests/lib/mxfp4_ref.py, through `pocket quantize`:
#  1. dequantize: the MXFP4 experts of the gpt-oss fixture (those of
#     ../shared/fixtures/gpt-oss, made by gguf-py; rebuilt byte for byte by
#     tests/lib/fixtures.sh) converted to F32 equal the numpy decoding bit for bit;
#  2. quantize: floats on every rounding case (ties between levels, block
#     maxima at and around powers of two, subnormal and huge blocks, zeros)
#     quantized to MXFP4 equal the numpy rendering of ggml's
#     quantize_row_mxfp4_ref byte for byte;
#  3. re-quantizing keeps MXFP4 tensors: the fixture to Q4_K_M copies its
#     MXFP4 tensors unchanged while the F32 matrices are converted;
#  4. a model with MXFP4 experts (the bundled model, experts quantized by
#     pocket) loads and runs everywhere a type is read: info, perplexity
#     (scalar reference kernels = the selected ones, and within 2% of the
#     F16 model's), bench.
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
RUN=${POCKET_RUN:-}
P="$BUILD/pocket"
. tests/lib/fixtures.sh
FX=$(fixture_model gpt-oss) || { echo "FAIL: cannot rebuild the gpt-oss fixture"; exit 1; }
tmp="$BUILD/tmp/mxfp4"; rm -rf "$tmp"; mkdir -p "$tmp"

echo "== 1. dequantize: fixture MXFP4 tensors -> F32 = numpy"
q() { $RUN "$P" quantize "$@" >"$tmp/quantize.log" 2>&1 || { echo "FAIL: pocket quantize $*"; cat "$tmp/quantize.log"; exit 1; }; }
q "$FX" "$tmp/deq.gguf" F32 --tensor-type "_exps.weight=F32"
"$PYTHON" - "$FX" "$tmp/deq.gguf" <<'PY'
import sys
sys.path.insert(0, "tests/lib")
import numpy as np
import gguf_py as G
import mxfp4_ref as M
src, deq = G.read_gguf(sys.argv[1]), G.read_gguf(sys.argv[2])
names = [n for n in src.tensor_order if src.tinfo[n]["type"] == M.T_MXFP4]
assert len(names) == 12, names
nw = 0
for n in names:
    assert deq.tinfo[n]["type"] == G.T_F32, (n, deq.tinfo[n]["type"])
    want = M.dequantize(src.raw[n], src.tinfo[n]["n"]).view("<u4")
    got = np.frombuffer(deq.raw[n], dtype="<u4")
    bad = int((want != got).sum())
    assert bad == 0, "%s: %d of %d weights differ" % (n, bad, want.size)
    nw += want.size
e = np.concatenate([np.frombuffer(src.raw[n], dtype=M.BLOCK_DTYPE)["e"] for n in names])
print("ok   %d MXFP4 tensors, %d weights, bitwise equal to numpy (exponents %d..%d)"
      % (len(names), nw, e.min(), e.max()))
PY

echo "== 2. quantize: edge-case floats -> MXFP4 = numpy (ggml's algorithm)"
"$PYTHON" - "$tmp/edge.gguf" <<'PY'
import sys
sys.path.insert(0, "tests/lib")
import numpy as np
import gguf_py as G
import mxfp4_ref as M
rng = np.random.default_rng(39)
rows = []
for s in [1e-30, 1e-12, 1e-3, 0.05, 1, 7, 300, 1e5, 1e15, 1e30]:    # normal data, many scales
    rows.append(rng.standard_normal((16, 32)) * s)
for E in [2, 60, 127, 128, 129, 200, 251]:                            # ties between levels, +-1 ulp
    d = M.e8m0_half(np.array([E]))[0]
    lv = np.array([0, 1, 2, 3, 4, 6, 8, 12], np.float32)
    mid = ((lv[:-1] + lv[1:]) / 2 * d).astype(np.float32)
    for sign in (1, -1):
        v = np.concatenate([mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf))])
        b = np.zeros(64, np.float32)
        b[0], b[32] = 12 * d, -12 * d
        b[1:1 + len(v)] = sign * v
        rows.append(b.reshape(2, 32))
for k in range(-126, 128, 5):                                         # amax at, below, above 2^k
    for f in (1.0, 1 - 2.0**-24, 1 - 3 * 2.0**-24, 1 + 2.0**-23, 1 - 2.0**-20):
        a = np.float32(np.float32(2.0**k) * np.float32(f))
        if np.isfinite(a):
            b = (rng.uniform(-1, 1, 32) * a).astype(np.float32)
            b[7] = -a if k % 2 else a
            rows.append(b.reshape(1, 32))
for a in (2.0**-125, 2.0**-126, 2.0**-127, 2.0**-133, 2.0**-149, 1e-44):  # the exponent wraps
    b = (rng.uniform(-1, 1, 32) * a).astype(np.float32)
    b[3] = a
    rows.append(b.reshape(1, 32))
z = np.zeros((2, 32), np.float32); z[1] = -0.0; z[1, 20] = 2.5      # zeros, -0, one value
rows += [z, np.where(np.arange(32) % 2, -3.4e38, 3.4e38).astype(np.float32).reshape(1, 32)]
x = np.concatenate([np.asarray(r, np.float32).reshape(-1, 32) for r in rows])
x = np.concatenate([x, np.zeros((-len(x) % 4, 32), np.float32)]).reshape(-1, 128)
w = G.GGUFWriter()
w.add_str("general.architecture", "llama")
w.add_u32("llama.block_count", 1)
w.add_tensor("blk.0.ffn_up.weight", x, G.T_F32)
w.write(sys.argv[1])
np.save(sys.argv[1] + ".npy", x)
PY
q "$tmp/edge.gguf" "$tmp/edge-mx.gguf" F32 --tensor-type "ffn_up=MXFP4"
"$PYTHON" - "$tmp/edge.gguf" "$tmp/edge-mx.gguf" <<'PY'
import sys
sys.path.insert(0, "tests/lib")
import numpy as np
import gguf_py as G
import mxfp4_ref as M
x = np.load(sys.argv[1] + ".npy")
g = G.read_gguf(sys.argv[2])
n = "blk.0.ffn_up.weight"
assert g.tinfo[n]["type"] == M.T_MXFP4
got = np.frombuffer(g.raw[n], dtype=M.BLOCK_DTYPE)
want = np.frombuffer(M.quantize(x), dtype=M.BLOCK_DTYPE)
bad = np.nonzero(got != want)[0]
assert len(bad) == 0, "%d of %d blocks differ, first %d: %s vs %s (input %s)" % (
    len(bad), len(got), bad[0], got[bad[0]], want[bad[0]], x.reshape(-1, 32)[bad[0]])
print("ok   %d blocks quantized byte for byte as numpy's quantize_row_mxfp4_ref (exponents %d..%d)"
      % (len(got), got["e"].min(), got["e"].max()))
PY

echo "== 3. re-quantizing keeps MXFP4 tensors"
q "$FX" "$tmp/q4km.gguf" Q4_K_M
"$PYTHON" - "$FX" "$tmp/q4km.gguf" <<'PY'
import sys
sys.path.insert(0, "tests/lib")
import gguf_py as G
src, out = G.read_gguf(sys.argv[1]), G.read_gguf(sys.argv[2], load_data=False)
data = open(sys.argv[2], "rb").read()      # the output has types gguf_py does not decode
kept = changed = 0
for n in src.tensor_order:
    a, b = src.tinfo[n]["type"], out.tinfo[n]["type"]
    if a == 39:
        start = out.data_offset + out.tinfo[n]["offset"]
        assert b == 39 and data[start:start + len(src.raw[n])] == src.raw[n], n
        kept += 1
    elif len(src.tinfo[n]["ne"]) >= 2 and n.endswith(".weight") and b != a:
        changed += 1
assert kept == 12 and changed > 0, (kept, changed)
print("ok   Q4_K_M: %d MXFP4 tensors copied unchanged, %d other matrices converted" % (kept, changed))
PY

echo "== 4. a model with MXFP4 experts: info, perplexity, bench"
q models/kjv-moe-f16.gguf "$tmp/kjv-mx.gguf" Q8_0 --tensor-type "_exps=MXFP4"
$RUN "$P" info "$tmp/kjv-mx.gguf" >"$tmp/info.txt"
grep -q "MXFP4: 18" "$tmp/info.txt" || { echo "FAIL: pocket info does not list 18 MXFP4 tensors"; cat "$tmp/info.txt"; exit 1; }
ppl() { $RUN "$P" perplexity -m "$1" -f tests/data/text/valid.txt -c 128 --chunks 6 -t 2 2>/dev/null |
        sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p'; }
a=$(ppl "$tmp/kjv-mx.gguf"); r=$(POCKET_KERNELS=ref ppl "$tmp/kjv-mx.gguf"); f=$(ppl models/kjv-moe-f16.gguf)
echo "     PPL, 6 windows of 128: MXFP4 experts $a (reference kernels $r), F16 $f"
awk -v a="$a" -v r="$r" -v f="$f" 'BEGIN { exit !(a > 0 && (a - r) / r < 5e-4 && (r - a) / r < 5e-4 &&
                                           a < 1.02 * f && a > f / 1.02) }' ||
    { echo "FAIL: MXFP4 perplexity $a: reference $r, F16 $f"; exit 1; }
$RUN "$P" bench -m "$tmp/kjv-mx.gguf" -p 8 -n 4 -r 1 --no-bw >"$tmp/bench.txt" 2>&1 ||
    { echo "FAIL: pocket bench"; cat "$tmp/bench.txt"; exit 1; }
grep -q "MXFP4" "$tmp/bench.txt" || { echo "FAIL: pocket bench does not name MXFP4"; cat "$tmp/bench.txt"; exit 1; }
echo "ok   info lists 18 MXFP4 tensors; perplexity as the reference kernels and within 2% of F16; bench runs"
