#!/bin/sh
# bench/gen_bench_model.py --type IQ1_M / IQ2_M: the bench files in
# llama-quantize's i-quant presets.
# 1. The mix: gen_bench_model.py's iq_mix, given the tensors and
#    hyperparameters of llama-quantize's files of the bundled model
#    ($POCKET_SHARED/models/iq/kjv-moe-PRESET.gguf), gives every quantized
#    tensor the file's type (the rules of the presets below 3 bits).
# 2. The formats: --verify's dequantizer of each block type the presets
#    write equals pocket's (pocket quantize to F32) on llama-quantize's files.
# 3. A pocket-35b file of 4 layers (one of full attention) of each type
#    passes --verify (every tensor's weights finite, mean ~ 0, std ~
#    1/sqrt(fan_in)) and `pocket run` loads and runs it.
MIX_PRESETS="IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S"
# files holding the block types of the IQ1_M and IQ2_M presets, and the
# types generated. IQ2_S and IQ3_S (in the IQ3_XXS file) and IQ2_M join
# when pocket has them (branch iq3: its grids in src/quant/iq3.c, which the
# generator reads); on iq3's tree this test passed with DEQUANT_FILES=IQ3_XXS
# GEN_TYPES=IQ2_M.
DEQUANT_FILES="IQ1_M"
GEN_TYPES="IQ1_M"
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
. tests/lib/shared.sh
for p in $MIX_PRESETS; do need_shared "models/iq/kjv-moe-$p.gguf"; done
[ -x "$BUILD/pocket" ] || { echo "FAIL: $BUILD/pocket not built (make)"; exit 1; }
mkdir -p "$BUILD/tmp"
T=$(mktemp -d "$BUILD/tmp/bench_iq.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0

# the checks of 1. and 2.: check.py mix FILE PRESET / dequant FILE F32FILE
cat > "$T/check.py" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "tests/lib")
sys.path.insert(0, "bench")
import gguf_py as G
import gen_bench_model as B


def mix(path, preset):
    g = G.read_gguf(path, load_data=False)
    arch = g.kv["general.architecture"]
    hp = lambda k, d=0: int(g.kv.get(arch + "." + k, d))
    n_head = hp("attention.head_count")
    tensors = [(n, g.tinfo[n]["ne"], g.tinfo[n]["type"] != B.F32) for n in g.tensor_order]
    m = B.iq_mix(tensors, preset, hp("block_count"),
                 n_head // hp("attention.head_count_kv", n_head), hp("expert_count"))
    name = lambda t: B.TNAME.get(t, "type %d" % t)
    bad = ["%s: %s, llama-quantize %s" % (n, name(m[n]), name(g.tinfo[n]["type"]))
           for n, _, q in tensors if q and m[n] != g.tinfo[n]["type"]]
    return "%d tensors" % len(m), bad, not m


def dequant(path, f32path):
    q, f = G.read_gguf(path, load_data=False), G.read_gguf(f32path)
    data = open(path, "rb").read()
    seen, bad, other = {}, [], {}
    for n in q.tensor_order:
        t, ne = q.tinfo[n]["type"], q.tinfo[n]["ne"]
        if t not in B.MAKERS:       # F32, or a type the generator does not write
            other[t] = other.get(t, 0) + 1
            continue
        nb = B.nbytes_of(ne, t)
        start = q.data_offset + q.tinfo[n]["offset"]
        x = B.dequant(data[start:start + nb], t, nb // B.BLOCK[t][1])
        x = x.astype(np.float64).reshape(-1)
        y = np.asarray(f.tensors[n], dtype=np.float64).reshape(-1)
        err = np.abs(x - y).max() / max(np.abs(y).max(), 1e-30)
        seen[B.TNAME[t]] = seen.get(B.TNAME[t], 0) + 1
        if err > 1e-6:
            bad.append("%s (%s): relative difference %.3g" % (n, B.TNAME[t], err))
    skip = ", ".join("%s %d" % (B.TNAME.get(t, "type %d" % t), c) for t, c in sorted(other.items()))
    return ", ".join("%s %d" % kv for kv in sorted(seen.items())) + "; not written: " + skip, bad, not seen


what, bad, empty = {"mix": mix, "dequant": dequant}[sys.argv[1]](*sys.argv[2:])
print(what + ("; " + "; ".join(bad[:5]) if bad else ""))
sys.exit(1 if bad or empty else 0)
EOF

# check LABEL OK FAILED MODE ARGS...: check.py MODE ARGS, one line either way
check() {
    c_label=$1 c_ok=$2 c_bad=$3
    shift 3
    if c_out=$("$PYTHON" "$T/check.py" "$@" 2>&1); then
        echo "ok: $c_label: $c_ok ($c_out)"
    else
        echo "FAIL: $c_label: $c_bad: $c_out"; fail=1
    fi
}

# 1. the mix
for p in $MIX_PRESETS; do
    check "$p" "iq_mix gives llama-quantize's types" "iq_mix differs from llama-quantize's file" \
        mix "$POCKET_SHARED/models/iq/kjv-moe-$p.gguf" "$p"
done

# 2. the formats
for p in $DEQUANT_FILES; do
    src=$POCKET_SHARED/models/iq/kjv-moe-$p.gguf
    need_shared "models/iq/kjv-moe-$p.gguf"
    if ! "$BUILD/pocket" quantize "$src" "$T/f32.gguf" F32 > "$T/q.log" 2>&1; then
        echo "FAIL: $p: pocket quantize to F32: $(tail -n 1 "$T/q.log")"; fail=1; continue
    fi
    check "$p" "--verify's dequantizer equals pocket's on every tensor" \
        "--verify's dequantizer differs from pocket's" dequant "$src" "$T/f32.gguf"
done

# 3. pocket-35b files
for ty in $GEN_TYPES; do
    f=$T/p35-4L-$ty.gguf
    if ! nice -n 10 "$PYTHON" bench/gen_bench_model.py "$f" --geometry pocket-35b --layers 4 --type "$ty" \
            > "$T/gen.log" 2>&1; then
        echo "FAIL: $ty: gen_bench_model.py: $(tail -n 1 "$T/gen.log")"; fail=1; continue
    fi
    if ! "$PYTHON" bench/gen_bench_model.py --verify "$f" > "$T/verify.log" 2>&1 ||
            ! tail -n 1 "$T/verify.log" | grep -q "; OK$"; then
        echo "FAIL: $ty: --verify:"; cat "$T/verify.log"; fail=1
    else
        echo "ok: $ty: --verify: $(tail -n 1 "$T/verify.log" | sed 's/^ *//')"
    fi
    if nice -n 10 "$BUILD/pocket" run -m "$f" -p hi -n 4 -t 2 > "$T/run.log" 2>&1; then
        echo "ok: $ty: pocket run loads and runs the file"
    else
        echo "FAIL: $ty: pocket run: $(tail -n 1 "$T/run.log")"; fail=1
    fi
    rm -f "$f"
done
exit $fail
