#!/bin/sh
# t_qwen35_ref.sh - check pocket's qwen35moe / qwen35 forward pass (Gated
# DeltaNet + gated attention hybrids) against
#   A. the independent float64 numpy reference tests/ref_forward.py, on small
#      random models written by tests/gen_model.py, with the DeltaNet computed
#      both token by token (--deltanet recurrent) and chunk-parallel
#      (--deltanet chunked:C): max |pocket - ref| over all logits < 1e-3 for
#      F32 weights, 5e-2 for F16 weights (pocket rounds matmul activations to
#      F16, as llama.cpp does; emulating just that rounding in numpy already
#      moves the qwen35moe-f16 logits by 1.8e-2 from the exact reference, vs
#      ~5e-3 for t_forward_ref's qwen3moe-f16, so 2e-2 would be too tight);
#   B. llama.cpp's reference outputs for ../shared/fixtures/qwen35moe/
#      tiny-qwen35moe.gguf (greedy.json: prompt + 32 greedy tokens; long150.json:
#      150 prompt tokens + 16 greedy tokens), teacher-forced, through
#      tests/check_fixture.py: argmax equal at every row, and each row's 20
#      reference logits within 1e-3 * max(1, |ref|), compared by token id.
#   Step A runs with an F32 KV cache (-ctk f32 -ctv f32), then once per
#   cache type (F16, Q8_0) against the reference holding the same cache
#   (ref_forward.py --kv-cache). Step B uses the default F16 cache: llama.cpp
#   made the fixtures with an F32 cache, and F16 stays within the tolerance.
# Step 0 validates the Python side first (gguf_py selftest; the numpy
# reference, recurrent and chunked 64/16, against llama.cpp on the fixture);
# with REF_ONLY=1 only the Python parts run (no build/tests/tool_logits needed).
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build), $PYTHON and $FIXTURES (default ../shared/fixtures/qwen35moe).
# $POCKET_RUN, if set, prefixes every pocket binary (e.g. "qemu-aarch64 -L
# SYSROOT -cpu max" for a cross build: tests/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest top-k probability margin >= 1e-3).
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
FIXTURES=${FIXTURES:-../shared/fixtures/qwen35moe}
REF_ONLY=${REF_ONLY:-0}
TOOL="$BUILD/tests/tool_logits"
RUN=${POCKET_RUN:-}
TOL_F32=1e-3
TOL_F16=5e-2

mkdir -p "$BUILD/tmp" || exit 1
TMP=$(mktemp -d "$BUILD/tmp/qwen35_ref.XXXXXX") || exit 1
fail=0
failed_steps=""
note_fail() {   # note_fail STEP MESSAGE
    echo "FAIL [$1] $2"
    fail=1
    case " $failed_steps " in *" $1 "*) ;; *) failed_steps="$failed_steps $1" ;; esac
}

echo "== step 0: Python side (gguf_py selftest, numpy reference vs llama.cpp fixture)"
"$PYTHON" tests/gguf_py.py --selftest >/dev/null || note_fail step0 "gguf_py.py --selftest"
if [ -f "$FIXTURES/tiny-qwen35moe.gguf" ]; then
    "$PYTHON" tests/check_fixture.py --fixture-dir "$FIXTURES" \
        || note_fail step0 "check_fixture.py: the numpy reference disagrees with llama.cpp"
else
    note_fail step0 "fixture $FIXTURES/tiny-qwen35moe.gguf not found"
fi

if [ "$REF_ONLY" != 1 ] && [ ! -x "$TOOL" ]; then
    note_fail setup "$TOOL not found (build it with make), pocket steps skipped"
    REF_ONLY=1
fi

# compare STEP LABEL REF.npy POCKET.f32 TOL -> 0 if max |pocket - ref| < TOL
compare() { "$PYTHON" tests/compare_logits.py "$@"; }

# same_ref STEP LABEL A.npy B.npy -> the two references agree to 1e-9
same_ref() {
    "$PYTHON" - "$@" <<'EOF'
import sys
import numpy as np
step, label, a, b = sys.argv[1:5]
d = float(np.max(np.abs(np.load(a) - np.load(b))))
ok = d < 1e-9
print("%s %-28s max|chunked - recurrent| = %.2e"
      % ("ok  " if ok else "FAIL [%s]" % step, label, d))
sys.exit(0 if ok else 1)
EOF
}

# check NAME ARCH TOL THREADS IDS CHUNKS -- generator options
#   IDS: "short" (12 ids incl. V-1, V-2, V-3) or "long" (70 ids, > 1 chunk of 64)
#   CHUNKS: chunk sizes for the chunked references, e.g. "5 64"
check() {
    name=$1; arch=$2; tol=$3; threads=$4; idkind=$5; chunks=$6; shift 6
    step="A:$name"
    model="$TMP/$name.gguf"
    if ! "$PYTHON" tests/gen_model.py "$arch" "$model" "$@"; then
        note_fail "$step" "gen_model.py failed"; return
    fi
    v=$("$PYTHON" -c 'import sys; sys.path.insert(0, "tests"); import gguf_py as G; print(G.read_gguf(sys.argv[1], False).tinfo["token_embd.weight"]["ne"][1])' "$model")
    if [ "$idkind" = long ]; then
        ids=$("$PYTHON" -c 'import sys; v = int(sys.argv[1]); print(",".join(str((i * 37 + 11) % v) for i in range(70)))' "$v")
    else
        ids="1,17,$((v - 1)),255,256,42,$((v - 2)),100,7,200,$((v - 3)),5"
    fi
    echo "== step $step ($arch $*; n_vocab $v; $idkind ids)"
    if ! "$PYTHON" tests/ref_forward.py --stats --kv-cache "$KV" --deltanet recurrent "$model" "$ids" "$TMP/$name.rec.npy"; then
        note_fail "$step" "ref_forward.py --deltanet recurrent failed"; return
    fi
    refs="rec"
    for c in $chunks; do
        if ! "$PYTHON" tests/ref_forward.py --kv-cache "$KV" --deltanet "chunked:$c" "$model" "$ids" "$TMP/$name.ch$c.npy"; then
            note_fail "$step" "ref_forward.py --deltanet chunked:$c failed"; continue
        fi
        same_ref "$step" "$name ref chunked:$c" "$TMP/$name.ch$c.npy" "$TMP/$name.rec.npy" || note_fail "$step" "numpy chunked:$c != recurrent"
        refs="$refs ch$c"
    done
    [ "$REF_ONLY" = 1 ] && return
    for t in $threads; do
        out="$TMP/$name.t$t.f32"
        if ! $RUN "$TOOL" -t "$t" -ctk "$KV" -ctv "$KV" "$model" "$out" "$ids"; then
            note_fail "$step" "tool_logits -t $t exited with an error (pocket cannot run $arch?)"; continue
        fi
        for r in $refs; do
            compare "$step" "$name -t $t vs $r" "$TMP/$name.$r.npy" "$out" "$tol" \
                || note_fail "$step" "pocket -t $t differs from the numpy reference ($r)"
        done
    done
}

KV=f32   # the KV cache type of pocket and of the reference in step A
check qwen35moe       qwen35moe $TOL_F32 "1 2" short "5 64" --seed 37
check qwen35moe-tied  qwen35moe $TOL_F32 "1"   short "5"    --seed 37 --tied
check qwen35moe-f16   qwen35moe $TOL_F16 "1"   short "5"    --seed 37 --type f16
check qwen35moe-rl    qwen35moe $TOL_F32 "1"   short "3"    --seed 16 --recurrent-layers 1,0,1,1
check qwen35moe-long  qwen35moe $TOL_F32 "1 2" long  "16 64" --seed 32
check qwen35          qwen35    $TOL_F32 "1"   short "5"    --seed 1
check qwen35-long     qwen35    $TOL_F32 "1"   long  "64"   --seed 1
# KV cache types: pocket and the reference with the same F16 / Q8_0 cache
for KV in f16 q8_0; do
    check qwen35moe-kv-$KV  qwen35moe $TOL_F32 "1 2" long "64" --seed 32
done
KV=f32

if [ "$REF_ONLY" != 1 ]; then
    for f in greedy long150; do
        step="B:fixture-$f"
        json="$FIXTURES/tiny-qwen35moe.$f.json"
        echo "== step $step (pocket vs llama.cpp on tiny-qwen35moe.gguf, $f.json teacher-forced)"
        ids=$("$PYTHON" tests/check_fixture.py ids "$json") || { note_fail "$step" "cannot read $json"; continue; }
        out="$TMP/fixture-$f.f32"
        if ! $RUN "$TOOL" -t 1 "$FIXTURES/tiny-qwen35moe.gguf" "$out" "$ids"; then
            note_fail "$step" "tool_logits exited with an error on tiny-qwen35moe.gguf"; continue
        fi
        "$PYTHON" tests/check_fixture.py logits "$json" "$out" 4096 \
            || note_fail "$step" "pocket's logits differ from llama.cpp's"
    done
fi

if [ "$REF_ONLY" != 1 ]; then
    # an MTP (nextn) layer is loaded and shown, and does not change plain decoding
    step="C:mtp"
    echo "== step $step (a model with an MTP layer gives the logits of the same model without it)"
    "$PYTHON" tests/gen_model.py qwen35moe "$TMP/mtp.gguf" --seed 37 --mtp >/dev/null &&
    "$PYTHON" tests/gen_model.py qwen35moe "$TMP/nomtp.gguf" --seed 37 >/dev/null &&
    $RUN "$TOOL" "$TMP/mtp.gguf" "$TMP/mtp.f32" 1,17,299,42 && $RUN "$TOOL" "$TMP/nomtp.gguf" "$TMP/nomtp.f32" 1,17,299,42 &&
    cmp -s "$TMP/mtp.f32" "$TMP/nomtp.f32" || note_fail "$step" "logits differ with the MTP layer"
    $RUN "$BUILD/pocket" info "$TMP/mtp.gguf" | grep -q "^mtp  *1 next-token-prediction layer" ||
        note_fail "$step" "pocket info does not show the MTP layer"
fi

if [ $fail -ne 0 ]; then
    echo "t_qwen35_ref: FAILED in step(s):$failed_steps (files kept in $TMP)"
    exit 1
fi
rm -rf "$TMP"
if [ "$REF_ONLY" = 1 ]; then
    echo "t_qwen35_ref: Python reference checks pass (REF_ONLY=1: pocket not run)"
else
    echo "t_qwen35_ref: pocket matches the numpy reference and llama.cpp"
fi
exit 0
