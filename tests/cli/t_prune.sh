#!/bin/sh
# t_prune.sh - pocket prune (expert pruning) on the bundled model (qwen3moe,
# 16 experts, top-4).
#  1. K = 12 (reap) and K = 8 (freq) over 24 windows of 256 of calib.txt:
#     tests/lib/check_prune.py (gguf_py, no pocket code) finds expert_count K,
#     K experts in the router and every expert tensor, their bytes the
#     source's slices of the experts pocket.prune.experts names, every other
#     tensor and key the source's; the files load and run (pocket info,
#     pocket run).
#  2. Deterministic: -t 1 and -t 2 write the same file, and so do the
#     selected and the reference kernels.
#  3. The saliency against a float64 numpy forward pass
#     (tests/lib/ref_forward.py, its expert hook): tokens per expert exact,
#     REAP within 2e-3 relative - batched, and one token at a time under an
#     expert cache of 4 slots (the streamed path).
#  4. Per-layer counts (expert_count as an array), a lower top-k, keeping
#     all 16, and a Q8_0 file: checked as in 1; the per-layer file's logits
#     against the numpy reference on the same file.
#  5. Every MoE architecture gen_model.py writes (expert biases, scales,
#     selection bias, shared experts, dense layers, hybrids): pruned to
#     other counts per layer, checked as in 1, and pocket's logits on the
#     pruned file against the numpy reference on the same file.
#  6. Bad input (K out of range, below the top-k, bad per-layer specs, a
#     dense model, MTP blocks, expert groups): one-line errors, exit 1.
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"; M=models/kjv-moe-f16.gguf; CAL=tests/data/text/calib.txt
tmp="$BUILD/tmp/prune"; rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
check() { "$PYTHON" tests/lib/check_prune.py "$@" || exit 1; }
prune() {   # OUT ARGS...: pocket prune of the bundled model over 24 windows of 256
    out=$1; shift
    "$P" prune "$M" "$out" -f "$CAL" -c 256 --chunks 24 "$@" >"$out.log" 2>"$out.err" ||
        { cat "$out.err"; fail "pocket prune $*"; }
}

echo "== 1. K = 12 (reap), K = 8 (freq)"
prune "$tmp/k12.gguf" --keep 12 -t 2
cat "$tmp/k12.gguf.log"
grep -q "^layer   5: keep 12 of 16; dropped" "$tmp/k12.gguf.log" || fail "no per-layer report"
check "$M" "$tmp/k12.gguf" 12
prune "$tmp/k8f.gguf" --keep 8 --saliency freq -t 2
check "$M" "$tmp/k8f.gguf" 8
for k in 12 8f; do
    "$P" info -m "$tmp/k$k.gguf" >"$tmp/info" 2>&1 || { cat "$tmp/info"; fail "pocket info k$k"; }
    want="moe(top-4 of $(echo $k | tr -d f), ff 256)"
    grep -qF "layers 0-5: attention(4 q / 2 kv heads, head 64, rope 64 dims, q/k norm) + $want" "$tmp/info" ||
        { cat "$tmp/info"; fail "pocket info k$k: no '$want'"; }
    "$P" run -m "$tmp/k$k.gguf" -p "And God said" -n 8 --temp 0 -t 2 >"$tmp/run" 2>&1 || { cat "$tmp/run"; fail "run k$k"; }
done
"$PYTHON" - "$tmp/k12.gguf" "$tmp/k8f.gguf" <<'EOF'
import sys
sys.path.insert(0, "tests/lib")
import gguf_py as G
a, b = (G.read_gguf(p, load_data=False) for p in sys.argv[1:])
assert a.get("pocket.prune.saliency") == "reap" and b.get("pocket.prune.saliency") == "freq"
assert a.get("pocket.prune.calibration") == "tests/data/text/calib.txt"
print("recorded: saliency reap / freq, calibration %s" % a.get("pocket.prune.calibration"))
EOF

echo "== 2. the same file at -t 1 and with the reference kernels"
prune "$tmp/k12-t1.gguf" --keep 12 -t 1
cmp "$tmp/k12.gguf" "$tmp/k12-t1.gguf" || fail "-t 1 and -t 2 chose differently"
# the scalar reference kernels are slow: 2 windows of 128
prune "$tmp/short.gguf" --keep 12 --chunks 2 -c 128 -t 2
POCKET_KERNELS=ref prune "$tmp/short-ref.gguf" --keep 12 --chunks 2 -c 128 -t 2
cmp "$tmp/short.gguf" "$tmp/short-ref.gguf" || fail "the reference kernels chose differently"
echo "identical files (-t 1 and -t 2; selected and reference kernels)"

echo "== 3. saliency against the numpy reference"
"$PYTHON" -c 'print(" ".join(str((i * 797 + 13) % 4096) for i in range(40)))' >"$tmp/ids.txt"
"$BUILD/tests/tool_prune" scores "$M" "$tmp/ids.txt" 2 >"$tmp/batch.txt"
"$BUILD/tests/tool_prune" scores "$M" "$tmp/ids.txt" 1 4 >"$tmp/one.txt"
"$PYTHON" - "$M" "$tmp/ids.txt" "$tmp/batch.txt" "$tmp/one.txt" <<'EOF'
import sys
sys.path.insert(0, "tests/lib")
import numpy as np, ref_forward as R
m = R.Model(sys.argv[1])
acc = {}
def on(layer, t, e, w, y):
    a = acc.setdefault((layer, int(e)), [0, 0.0])
    a[0] += 1
    a[1] += abs(w) * np.linalg.norm(y)
m.on_expert = on
m.forward([int(v) for v in open(sys.argv[2]).read().split()])
for path, label in ((sys.argv[3], "batched"), (sys.argv[4], "one token at a time, 4 slots")):
    worst, rows = 0.0, 0
    for line in open(path):
        il, e, n, r = line.split()
        want_n, s = acc.get((int(il), int(e)), [0, 0.0])
        assert int(n) == want_n, (path, il, e, n, want_n)
        if want_n:
            worst = max(worst, abs(float(r) - s / want_n) / (s / want_n))
        else:
            assert float(r) == 0.0
        rows += 1
    assert rows == 6 * 16 and worst < 2e-3, (path, rows, worst)
    print("%s: tokens per expert exact, REAP within %.1e of float64 (router top-k margin %.1e)"
          % (label, worst, m.min_router_margin))
EOF

echo "== 4. per-layer counts, a lower top-k, all kept, a quantized file"
prune "$tmp/layers.gguf" --keep 12 --keep-layers 0-1:8,4:6 -t 2
grep -q "expert_count is an array" "$tmp/layers.gguf.log" || fail "no note on the per-layer array"
check "$M" "$tmp/layers.gguf" 8,8,12,12,6,12
IDS=$("$PYTHON" -c 'print(",".join(str((i * 389 + 5) % 4096) for i in range(24)))')
"$BUILD/tests/tool_logits" -t 2 "$tmp/layers.gguf" "$tmp/layers.f32" "$IDS"
"$PYTHON" tests/lib/ref_forward.py --stats --kv-cache f16 "$tmp/layers.gguf" "$IDS" "$tmp/layers.npy"
"$PYTHON" tests/lib/compare_logits.py 4 "per-layer counts 8,8,12,12,6,12" "$tmp/layers.npy" "$tmp/layers.f32" 2e-2
prune "$tmp/k4.gguf" --keep 4 --experts-used 2 -t 2
check "$M" "$tmp/k4.gguf" 4 2
prune "$tmp/k16.gguf" --keep 16 -t 2
check "$M" "$tmp/k16.gguf" 16
"$P" quantize "$M" "$tmp/q8.gguf" Q8_0 -t 2 >/dev/null 2>&1 || fail "pocket quantize Q8_0"
"$P" prune "$tmp/q8.gguf" "$tmp/q8-k8.gguf" -f "$CAL" -c 256 --chunks 8 --keep 8 -t 2 >/dev/null 2>"$tmp/q8.err" ||
    { cat "$tmp/q8.err"; fail "prune the Q8_0 file"; }
check "$tmp/q8.gguf" "$tmp/q8-k8.gguf" 8
"$P" run -m "$tmp/q8-k8.gguf" -p "And God said" -n 8 --temp 0 -t 2 >"$tmp/run" 2>&1 || { cat "$tmp/run"; fail "run q8-k8"; }

echo "== 5. every MoE architecture: the tensors that hold experts are cut, the pruned model computes"
# a random model of each (tests/lib/gen_model.py), its layer 1 pruned to 4 and the others to 5 of 8 (mixtral:
# 3 of 4): check_prune.py, and pocket's logits on the pruned file against ref_forward.py's on the same file
# (gpt-oss: expert biases; deepseek2: a dense first layer, exp_probs_b; gemma4: per-expert output scales;
# qwen2moe, qwen35moe, qwen3next: shared experts)
IDS=$("$PYTHON" -c 'print(",".join(str((i * 37 + 11) % 200) for i in range(12)))')
for a in qwen3moe:1e-3 mixtral:1e-3 qwen2moe:1e-3 olmoe:1e-3 granitemoe:1e-3 gpt-oss:1e-3 deepseek2:1e-3 \
         gemma4:1e-2 qwen35moe:1e-3 qwen3next:1e-3; do
    tol=${a#*:}; a=${a%:*}; k=5; [ "$a" = mixtral ] && k=3
    "$PYTHON" tests/lib/gen_model.py "$a" "$tmp/$a.gguf" --seed 1 >/dev/null
    "$P" prune "$tmp/$a.gguf" "$tmp/$a-p.gguf" -f "$CAL" -c 64 --chunks 4 --keep $k --keep-layers 1:4 -t 2 \
        >"$tmp/$a.log" 2>&1 || { cat "$tmp/$a.log"; fail "prune $a"; }
    check "$tmp/$a.gguf" "$tmp/$a-p.gguf"
    "$BUILD/tests/tool_logits" -t 2 "$tmp/$a-p.gguf" "$tmp/$a.f32" "$IDS"
    "$PYTHON" tests/lib/ref_forward.py --kv-cache f16 "$tmp/$a-p.gguf" "$IDS" "$tmp/$a.npy" >/dev/null
    "$PYTHON" tests/lib/compare_logits.py 5 "$a pruned" "$tmp/$a.npy" "$tmp/$a.f32" "$tol"
done

echo "== 6. help; bad input"
"$P" prune --help | grep -q "^usage: pocket prune IN.gguf OUT.gguf -f CALIB.txt" || fail "pocket prune --help"
"$P" --help | grep -q "^  prune  " || fail "pocket --help does not list prune"
check_err() {   # MESSAGE ARGS...: pocket prune ARGS fails with one error line containing MESSAGE
    want=$1; shift
    if "$P" prune "$@" >/dev/null 2>"$tmp/err"; then fail "accepted: prune $*"; fi
    [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q '^pocket: error: ' "$tmp/err" && grep -qF -- "$want" "$tmp/err" ||
        { cat "$tmp/err"; fail "bad message for: prune $*"; }
    echo "ok refused: $(cat "$tmp/err")"
}
O="$tmp/bad.gguf"
check_err "--keep 20: layer 0 has 16 experts" "$M" "$O" -f "$CAL" --keep 20
check_err "layer 0 would keep 2 experts, fewer than the 4 each token uses" "$M" "$O" -f "$CAL" --keep 2
check_err "--experts-used 9: layer 0 keeps only 8 experts" "$M" "$O" -f "$CAL" --keep 8 --experts-used 9
check_err "--keep: '0' is not an integer" "$M" "$O" -f "$CAL" --keep 0
check_err "item 'x' is not LAYERS:K" "$M" "$O" -f "$CAL" --keep-layers 0-3:12,x
check_err "item '0-3' is not LAYERS:K" "$M" "$O" -f "$CAL" --keep-layers 0-3
check_err "item '' is not LAYERS:K" "$M" "$O" -f "$CAL" --keep-layers 1:8,
check_err "layer range 3-1 runs backwards" "$M" "$O" -f "$CAL" --keep-layers 3-1:8
check_err "layer 9 is out of range (layers 0-5)" "$M" "$O" -f "$CAL" --keep-layers 0-9:8
check_err "item '2:0': keep at least 1 expert" "$M" "$O" -f "$CAL" --keep-layers 2:0
check_err "item '2:8': layer 2 is named twice" "$M" "$O" -f "$CAL" --keep-layers 0-3:12,2:8
check_err "--keep-layers '4:17': layer 4 has 16 experts, not 17" "$M" "$O" -f "$CAL" --keep-layers 4:17
check_err "--saliency 'size': expected reap or freq" "$M" "$O" -f "$CAL" --keep 8 --saliency size
check_err "say how many experts to keep" "$M" "$O" -f "$CAL"
check_err "no calibration text" "$M" "$O" --keep 8
check_err "input and output are the same file" "$M" "$M" -f "$CAL" --keep 8
printf 'And God said, Let there be light' >"$tmp/short.txt"
check_err "has 8 tokens, fewer than one window of 256" "$M" "$O" -f "$tmp/short.txt" -c 256 --keep 8
"$PYTHON" tests/lib/gen_model.py llama "$tmp/dense.gguf" --seed 3 >/dev/null
check_err "has no routed experts (a dense model): nothing to prune" "$tmp/dense.gguf" "$O" -f "$CAL" --keep 8
"$PYTHON" tests/lib/gen_model.py qwen35moe "$tmp/mtp.gguf" --seed 1 --mtp >/dev/null
check_err "1 MTP block(s) (nextn_predict_layers): their experts never run" "$tmp/mtp.gguf" "$O" -f "$CAL" --keep 4
"$PYTHON" tests/lib/gen_model.py deepseek2 "$tmp/groups.gguf" --seed 1 --groups 2 --groups-used 1 >/dev/null
check_err "experts in 2 groups (expert_group_count)" "$tmp/groups.gguf" "$O" -f "$CAL" --keep 4
[ ! -e "$O" ] && [ ! -e "$O.tmp" ] || fail "a refused prune left $O"
# a per-layer expert_count that the file contradicts: one line at load
"$PYTHON" - "$tmp/layers.gguf" "$tmp/low.gguf" <<'EOF'
import struct, sys
data = open(sys.argv[1], "rb").read()
key = b"qwen3moe.expert_count"
at = data.index(struct.pack("<Q", len(key)) + key) + 8 + len(key)
assert struct.unpack_from("<IIQ", data, at) == (9, 4, 6)          # an array of 6 u32
v4 = at + 16 + 4 * 4
open(sys.argv[2], "wb").write(data[:v4] + struct.pack("<I", 3) + data[v4 + 4:])   # layer 4: 3, below top-4
EOF
if "$P" info -m "$tmp/low.gguf" >/dev/null 2>"$tmp/err"; then fail "loaded a layer of 3 experts with top-4"; fi
[ "$(wc -l <"$tmp/err")" = 1 ] && grep -qF "layer 4 has 3 experts, fewer than expert_used_count 4" "$tmp/err" ||
    { cat "$tmp/err"; fail "bad message for a layer's count below the top-k"; }
echo "ok refused: $(cat "$tmp/err")"
echo "t_prune: ok"
