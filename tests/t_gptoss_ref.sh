#!/bin/sh
# t_gptoss_ref.sh - check pocket's gpt-oss (sliding-window / full attention
# with sinks and q/k/v/o biases, YaRN rope, a biased router weighted by a
# softmax of the chosen logits, biased experts with the clamped SwiGLU-OAI,
# MXFP4 experts) against
#   0. (Python side first) the independent float64 numpy reference
#      tests/ref_forward.py vs llama.cpp's outputs on
#      ../shared/fixtures/gpt-oss/tiny-gpt-oss.gguf (tests/check_fixture.py),
#      its MXFP4 products rounding their inputs to Q8_0 as ggml's do;
#   A. the numpy reference on small random gpt-oss models written by
#      tests/gen_model.py (max |pocket - ref| over all logits < 1e-3 for F32
#      weights, F32 or MXFP4 experts; 5e-2 for F16 weights, as
#      tests/t_qwen35_ref.sh explains), one token at a time and in batches,
#      1 and 2 threads: windows of 4 and 6, sliding_window_pattern 3,
#      linear rope instead of YaRN, 70 tokens;
#   B. llama.cpp's reference outputs for the fixture (greedy.json: prompt + 32
#      greedy tokens; long150.json: 150 prompt tokens + 16 greedy tokens),
#      teacher-forced through tests/check_fixture.py: argmax equal to the
#      reference at every row (so every greedy continuation is the same) and
#      each row's 20 reference logits within 0.2 absolute, by token id (the
#      fixture README's tolerance: Q8_0 rounding of the MXFP4 products'
#      inputs is a step function, and a few long150 values sit on its
#      boundaries) - with an F32 KV cache as llama.cpp's, one token at a
#      time and as one batch, on every kernel variant usable here (the list
#      `pocket --help` prints; or those $BATCH_VARIANTS names);
#   D. a gpt-oss file with a missing or misshapen tensor or key gives one
#      error line naming it, exit status 1.
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build), $PYTHON and $FIXTURES (default ../shared/fixtures/gpt-oss).
# $POCKET_RUN, if set, prefixes every pocket binary (tests/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest top-k probability margin >= 1e-4, against
# differences of 1e-5).
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
FIXTURES=${FIXTURES:-../shared/fixtures/gpt-oss}
TOOL="$BUILD/tests/tool_logits"
RUN=${POCKET_RUN:-}
TOL_F32=1e-3
TOL_F16=5e-2
TOL_FIXTURE=0.2
MODEL="$FIXTURES/tiny-gpt-oss.gguf"

. tests/fixture_lib.sh
mkdir -p "$BUILD/tmp" || exit 1
TMP=$(mktemp -d "$BUILD/tmp/gptoss_ref.XXXXXX") || exit 1

echo "== step 0: the numpy reference vs llama.cpp on the fixture"
if [ -f "$MODEL" ]; then
    "$PYTHON" tests/check_fixture.py --arch gpt-oss --fixture-dir "$FIXTURES" --abs-tol $TOL_FIXTURE \
        || note_fail step0 "check_fixture.py: the numpy reference disagrees with llama.cpp"
else
    note_fail step0 "fixture $MODEL not found"
fi
if [ ! -x "$TOOL" ] || [ ! -x "$BUILD/pocket" ]; then
    note_fail setup "$TOOL or $BUILD/pocket not found (build them with make)"
    echo "t_gptoss_ref: FAILED in step(s):$failed_steps"
    exit 1
fi

# compare STEP LABEL REF.npy POCKET.f32 TOL -> 0 if max |pocket - ref| < TOL
compare() { "$PYTHON" tests/compare_logits.py "$@"; }

# check NAME TOL THREADS IDS -- generator options
#   IDS: "short" (12 ids incl. V-1, V-2, V-3) or "long" (70 ids)
check() {
    name=$1; tol=$2; threads=$3; idkind=$4; shift 4
    step="A:$name"
    model="$TMP/$name.gguf"
    if ! "$PYTHON" tests/gen_model.py gpt-oss "$model" "$@"; then
        note_fail "$step" "gen_model.py failed"; return
    fi
    v=300
    if [ "$idkind" = long ]; then
        ids=$("$PYTHON" -c 'print(",".join(str((i * 37 + 11) % 300) for i in range(70)))')
    else
        ids="1,17,$((v - 1)),255,256,42,$((v - 2)),100,7,200,$((v - 3)),5"
    fi
    echo "== step $step (gpt-oss $*; $idkind ids)"
    if ! "$PYTHON" tests/ref_forward.py --stats "$model" "$ids" "$TMP/$name.npy"; then
        note_fail "$step" "ref_forward.py failed"; return
    fi
    for t in $threads; do
        for b in 1 5 64; do
            out="$TMP/$name.t$t.b$b.f32"
            # the numpy reference keeps keys and values in float: an F32 cache
            if ! $RUN "$TOOL" -t "$t" -b "$b" -ctk f32 -ctv f32 "$model" "$out" "$ids"; then
                note_fail "$step" "tool_logits -t $t -b $b exited with an error"; continue
            fi
            compare "$step" "$name -t $t -b $b" "$TMP/$name.npy" "$out" "$tol" \
                || note_fail "$step" "pocket -t $t -b $b differs from the numpy reference"
        done
    done
}

check gptoss         $TOL_F32 "1 2" short --seed 7
check gptoss-mxfp4   $TOL_F32 "1 2" short --seed 6 --exps-type mxfp4
check gptoss-f16     $TOL_F16 "1"   short --seed 7 --type f16
check gptoss-pattern $TOL_F32 "1"   short --seed 4 --swa-window 6 --swa-pattern 3 --rope-scaling linear --rope-factor 2
check gptoss-long    $TOL_F32 "2"   long  --seed 2 --exps-type mxfp4

variants=$(usable_variants)
for f in greedy long150; do
    echo "== step B:fixture-$f (pocket vs llama.cpp on tiny-gpt-oss.gguf, $f.json teacher-forced)"
    fixture_logits "B:fixture-$f" "$FIXTURES/tiny-gpt-oss.$f.json" "$MODEL" "-ctk f32 -ctv f32" "--abs-tol $TOL_FIXTURE"
done

step="D:bad-input"
echo "== step $step (missing / misshapen tensors and keys: one error line naming them)"
if "$PYTHON" - "$MODEL" "$TMP/bad" >"$TMP/bad.cases" <<'EOF'
import sys
sys.path.insert(0, "tests")
import numpy as np
import gguf_py as G
import mkbad
cases = [
    ("no_sinks", dict(drop_tensors=("blk.1.attn_sinks.weight",)), "blk.1.attn_sinks.weight"),
    ("short_sinks", dict(reshape={"blk.0.attn_sinks.weight": lambda a: a[:-1]}), "blk.0.attn_sinks.weight"),
    ("no_o_bias", dict(drop_tensors=("blk.2.attn_output.bias",)), "blk.2.attn_output.bias"),
    ("no_k_bias", dict(drop_tensors=("blk.3.attn_k.bias",)), "blk.3.attn_k.bias"),
    ("no_router_bias", dict(drop_tensors=("blk.0.ffn_gate_inp.bias",)), "blk.0.ffn_gate_inp.bias"),
    ("no_gate_bias", dict(drop_tensors=("blk.1.ffn_gate_exps.bias",)), "blk.1.ffn_gate_exps.bias"),
    ("short_down_bias", dict(reshape={"blk.2.ffn_down_exps.bias": lambda a: a[:-1]}), "blk.2.ffn_down_exps.bias"),
    ("short_up_bias", dict(reshape={"blk.3.ffn_up_exps.bias": lambda a: a[:, :-1]}), "blk.3.ffn_up_exps.bias"),
    ("no_window", dict(drop_keys=("gpt-oss.attention.sliding_window",)), "gpt-oss.attention.sliding_window"),
    ("zero_window", dict(set_keys={"gpt-oss.attention.sliding_window": (0, G.UINT32)}),
     "gpt-oss.attention.sliding_window"),
    ("no_expert_ff", dict(drop_keys=("gpt-oss.expert_feed_forward_length", "gpt-oss.feed_forward_length")),
     "expert_feed_forward_length"),
    ("bad_scaling", dict(set_keys={"gpt-oss.rope.scaling.type": ("longrope", G.STRING)}), "rope.scaling.type"),
    # a per-layer pattern array (llama.cpp ignores it: refused)
    ("pattern_array", dict(extra_keys={"gpt-oss.attention.sliding_window_pattern":
                                       (np.array([1, 0, 1, 0], dtype=np.int32), G.ARRAY, G.INT32)}),
     "gpt-oss.attention.sliding_window_pattern"),
]
mkbad.write_cases(sys.argv[1], sys.argv[2], cases)
EOF
then
    expect_errors "$step" "$TMP/bad.cases" "$TMP/bad"
    n=$(wc -l <"$TMP/bad.cases")
    [ "$n" -eq 13 ] || note_fail "$step" "expected 13 bad files, wrote $n"
else
    note_fail "$step" "could not write the bad files"
fi

if [ $fail -ne 0 ]; then
    echo "t_gptoss_ref: FAILED in step(s):$failed_steps (files kept in $TMP)"
    exit 1
fi
rm -rf "$TMP"
echo "t_gptoss_ref: pocket matches the numpy reference and llama.cpp"
exit 0
