#!/bin/sh
# t_gemma4_ref.sh - check pocket's gemma4 (Gemma-4 MoE, 26B-A4B layout:
# sliding-window and global attention layers with their own head dims, kv
# heads and rope, K = V on global layers, V normed without weight, scale 1;
# a dense GeGLU MLP and routed experts in every layer, ggml's FP16-table
# GELU, layer_output_scale, embeddings x sqrt(D), final logit soft-cap)
# against
#   0. (Python side first) the independent float64 numpy reference
#      tests/ref_gemma4.py (through ref_forward.py) vs llama.cpp's outputs on
#      ../shared/fixtures/gemma4/tiny-gemma4.gguf (tests/check_fixture.py:
#      within the README's 0.1, and 2x closer than with an exact GELU);
#   A. the numpy reference on small random gemma4 models written by
#      tests/gen_model.py (F32: max |pocket - ref| < 1e-2 over all logits:
#      pocket rounds GELU inputs to fp16 from float32 sums, the reference from
#      float64 ones, and an input on the other side of an fp16 step moves a
#      logit by ~1e-3), one token at a time and in batches, 1 and 2 threads;
#      with attn_v on the global layers, separate gate/up experts, a tied
#      head, no soft-cap, a window shorter than the sequence, F16 weights
#      (1e-1: pocket rounds activations to F16 for F16 weights as ggml does,
#      and the GELU table's fp16 steps magnify that);
#   B. llama.cpp's reference outputs for the fixture (greedy.json: 5 prompt +
#      32 greedy tokens; long150.json: 150 + 16), teacher-forced, through
#      tests/check_fixture.py with the README's acceptance: each row's 20
#      reference logits within 0.1 absolute (by token id), the argmax equal
#      to the reference wherever the reference top-1 - top-2 margin is 0.2 or
#      more - one token at a time and as one batch, on every kernel variant
#      usable here (or those $BATCH_VARIANTS names), with the reference's F32
#      KV cache;
#   C. the fixture in batches of 64 gives the logits of one token at a time,
#      bitwise (F32 weights), with F32 and F16 caches (llama.cpp's references
#      use an F32 cache; its own F16 cache moves long150 by up to 8.1, so an
#      F16 cache is not held to the 0.1);
#   D. a gemma4 file with a missing or misshapen tensor or key, or a feature
#      pocket does not compute yet, gives one error line naming it, exit 1;
#   E. pocket info prints the fixture's block plan (sliding / global layers);
#   F. under an expert cache (1, 3, 7 of 8 slots per layer) the fixture's
#      logits are the mapped file's, bitwise, one token at a time and in
#      batches.
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build), $PYTHON and $FIXTURES (default ../shared/fixtures/gemma4).
# $POCKET_RUN, if set, prefixes every pocket binary (tests/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (ref_forward.py --stats: smallest top-k margin >= 1e-3).
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
FIXTURES=${FIXTURES:-../shared/fixtures/gemma4}
TOOL="$BUILD/tests/tool_logits"
RUN=${POCKET_RUN:-}
TOL_F32=1e-2
TOL_F16=1e-1
MODEL="$FIXTURES/tiny-gemma4.gguf"

. tests/fixture_lib.sh
mkdir -p "$BUILD/tmp" || exit 1
TMP=$(mktemp -d "$BUILD/tmp/gemma4_ref.XXXXXX") || exit 1

echo "== step 0: the numpy reference vs llama.cpp on the fixture"
if [ -f "$MODEL" ]; then
    "$PYTHON" tests/check_fixture.py --arch gemma4 --fixture-dir "$FIXTURES" \
        || note_fail step0 "check_fixture.py: the numpy reference disagrees with llama.cpp"
else
    note_fail step0 "fixture $MODEL not found"
fi
if [ ! -x "$TOOL" ] || [ ! -x "$BUILD/pocket" ]; then
    note_fail setup "$TOOL or $BUILD/pocket not found (build them with make)"
    echo "t_gemma4_ref: FAILED in step(s):$failed_steps"
    exit 1
fi

# check NAME TOL THREADS -- generator options (12 ids incl. V-1, V-2, V-3)
check() {
    name=$1; tol=$2; threads=$3; shift 3
    step="A:$name"
    model="$TMP/$name.gguf"
    if ! "$PYTHON" tests/gen_model.py gemma4 "$model" "$@"; then
        note_fail "$step" "gen_model.py failed"; return
    fi
    ids="1,17,299,255,256,42,298,100,7,200,297,5"
    echo "== step $step (gemma4 $*)"
    if ! "$PYTHON" tests/ref_forward.py --stats "$model" "$ids" "$TMP/$name.npy"; then
        note_fail "$step" "ref_forward.py failed"; return
    fi
    for t in $threads; do
        for b in 1 5 64; do
            out="$TMP/$name.t$t.b$b.f32"
            if ! $RUN "$TOOL" -t "$t" -b "$b" -ctk f32 -ctv f32 "$model" "$out" "$ids"; then
                note_fail "$step" "tool_logits -t $t -b $b exited with an error"; continue
            fi
            "$PYTHON" tests/compare_logits.py "$step" "$name -t $t -b $b" "$TMP/$name.npy" "$out" "$tol" \
                || note_fail "$step" "pocket -t $t -b $b differs from the numpy reference"
        done
    done
}

check gemma4          $TOL_F32 "1 2" --seed 5
check gemma4-global-v $TOL_F32 "1"   --seed 5 --global-v
check gemma4-split    $TOL_F32 "1"   --seed 5 --split-gate-up
check gemma4-tied     $TOL_F32 "1"   --seed 5 --tied --softcap 0
check gemma4-window   $TOL_F32 "1 2" --seed 5 --window 5 --pattern 1,0,1,1
check gemma4-f16      $TOL_F16 "1"   --seed 5 --type f16

variants=$(usable_variants)
for f in greedy long150; do
    echo "== step B:fixture-$f (pocket vs llama.cpp on tiny-gemma4.gguf, $f.json teacher-forced, F32 KV cache)"
    fixture_logits "B:fixture-$f" "$FIXTURES/tiny-gemma4.$f.json" "$MODEL" "-ctk f32 -ctv f32" "--arch gemma4"
done

step="C:batch"
echo "== step $step (the fixture in one batch = one token at a time, bitwise, F32 and F16 caches)"
json="$FIXTURES/tiny-gemma4.long150.json"
ids=$("$PYTHON" tests/check_fixture.py ids "$json")
for kv in f32 f16; do
    $RUN "$TOOL" -t 2 -b 1 -ctk $kv -ctv $kv "$MODEL" "$TMP/one.$kv.f32" "$ids" &&
    $RUN "$TOOL" -t 2 -b 64 -ctk $kv -ctv $kv "$MODEL" "$TMP/batch.$kv.f32" "$ids" &&
    cmp -s "$TMP/one.$kv.f32" "$TMP/batch.$kv.f32" && echo "ok   $kv cache: 165 tokens in batches of 64 = one at a time" \
        || note_fail "$step" "logits in batches of 64 differ from one token at a time ($kv cache)"
done

step="F:expert-cache"
echo "== step $step (under an expert cache of 1, 3, 7 of 8 slots: the mapped file's logits, bitwise)"
ids=$("$PYTHON" tests/check_fixture.py ids "$FIXTURES/tiny-gemma4.greedy.json")
$RUN "$TOOL" -t 1 -b 1 "$MODEL" "$TMP/mapped.f32" "$ids" || note_fail "$step" "tool_logits (mapped) exited with an error"
for s in 1 3 7; do
    for b in 1 16; do
        $RUN "$TOOL" -t 1 -b $b -s $s "$MODEL" "$TMP/xc.f32" "$ids" && cmp -s "$TMP/mapped.f32" "$TMP/xc.f32" \
            && echo "ok   $s slots, -b $b = mapped" || note_fail "$step" "$s slots, -b $b: logits differ from the mapped file's"
    done
done

step="E:info"
echo "== step $step (pocket info prints the block plan: sliding and global layers)"
want="layers 0-1, 3-4: attention(4 q / 2 kv heads, head 32, rope 32 dims, q/k norm, v norm, window 16) + dense+moe(ff 48 + top-2 of 8, ff 32, gelu), post norms; layers 2, 5: attention(4 q / 1 kv heads, head 64, rope 64 dims, q/k norm, v = k, v norm) + dense+moe(ff 48 + top-2 of 8, ff 32, gelu), post norms"
got=$($RUN "$BUILD/pocket" info "$MODEL" 2>&1 | sed -n 's/^blocks *//p')
if [ "$got" = "$want" ]; then echo "ok   blocks $got"; else note_fail "$step" "pocket info blocks: '$got', expected '$want'"; fi

step="D:bad-input"
echo "== step $step (missing / misshapen tensors and keys, unsupported features: one error line naming them)"
if "$PYTHON" - "$MODEL" "$TMP/bad" >"$TMP/bad.cases" <<'PY'
import os
import sys
sys.path.insert(0, "tests")
import numpy as np
import gguf_py as G
import mkbad
P = "gemma4."
cases = [
    ("no_router_scale", dict(drop_tensors=("blk.0.ffn_gate_inp.scale",)), "blk.0.ffn_gate_inp.scale"),
    ("no_expert_scale", dict(drop_tensors=("blk.1.ffn_down_exps.scale",)), "blk.1.ffn_down_exps.scale"),
    ("short_expert_scale", dict(reshape={"blk.4.ffn_down_exps.scale": lambda a: a[:-1]}), "blk.4.ffn_down_exps.scale"),
    ("no_post_norm_2", dict(drop_tensors=("blk.3.post_ffw_norm_2.weight",)), "blk.3.post_ffw_norm_2.weight"),
    ("no_pre_norm_2", dict(drop_tensors=("blk.5.pre_ffw_norm_2.weight",)), "blk.5.pre_ffw_norm_2.weight"),
    ("no_post_norm_1", dict(drop_tensors=("blk.0.post_ffw_norm_1.weight",)), "blk.0.post_ffw_norm_1.weight"),
    ("no_dense_up", dict(drop_tensors=("blk.2.ffn_up.weight",)), "blk.2.ffn_up.weight"),
    ("global_q_as_sliding", dict(reshape={"blk.2.attn_q.weight": lambda a: a[:128]}), "blk.2.attn_q.weight"),
    ("global_k_norm_short", dict(reshape={"blk.5.attn_k_norm.weight": lambda a: a[:32]}), "blk.5.attn_k_norm.weight"),
    ("sliding_k_wide", dict(reshape={"blk.1.attn_k.weight": lambda a: np.concatenate([a, a])}), "blk.1.attn_k.weight"),
    ("layer_scale_2", dict(reshape={"blk.3.layer_output_scale.weight": lambda a: np.concatenate([a, a])}),
     "blk.3.layer_output_scale.weight"),
    ("rope_freqs_short", dict(reshape={"rope_freqs.weight": lambda a: a[:16]}), "rope_freqs.weight"),
    ("no_pattern", dict(drop_keys=(P + "attention.sliding_window_pattern",)), "sliding_window_pattern"),
    ("short_pattern", dict(set_keys={P + "attention.sliding_window_pattern":
                                     (np.array([1, 1, 0], dtype=bool), G.ARRAY)}), "sliding_window_pattern"),
    ("no_window", dict(drop_keys=(P + "attention.sliding_window",)), P + "attention.sliding_window"),
    ("no_key_length_swa", dict(drop_keys=(P + "attention.key_length_swa",)), P + "attention.key_length_swa"),
    ("kv_heads_3", dict(set_keys={P + "attention.head_count_kv":
                                  (np.array([2, 2, 3, 2, 2, 1], dtype=np.int32), G.ARRAY)}), "head_count_kv 3"),
    ("kv_heads_short", dict(set_keys={P + "attention.head_count_kv":
                                      (np.array([2, 2, 1], dtype=np.int32), G.ARRAY)}), "head_count_kv"),
    ("no_per_layer_key", dict(drop_keys=(P + "embedding_length_per_layer_input",)),
     P + "embedding_length_per_layer_input"),
    ("per_layer_embd", dict(set_keys={P + "embedding_length_per_layer_input": (16, G.UINT32)}),
     "per-layer embeddings are not supported"),
    ("shared_kv", dict(set_keys={P + "attention.shared_kv_layers": (2, G.UINT32)}), "shared_kv_layers = 2"),
    ("no_ff_key", dict(drop_keys=(P + "feed_forward_length",)), P + "feed_forward_length"),
]
mkbad.write_cases(sys.argv[1], sys.argv[2], cases)
PY
then
    expect_errors "$step" "$TMP/bad.cases" "$TMP/bad"
else
    note_fail "$step" "could not write the bad files"
fi

if [ $fail -ne 0 ]; then
    echo "t_gemma4_ref: FAILED in step(s):$failed_steps (files kept in $TMP)"
    exit 1
fi
rm -rf "$TMP"
echo "t_gemma4_ref: pocket matches the numpy reference and llama.cpp"
exit 0
