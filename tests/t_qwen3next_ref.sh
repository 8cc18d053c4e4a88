#!/bin/sh
# t_qwen3next_ref.sh - check pocket's qwen3next (Qwen3-Next: Gated DeltaNet
# with grouped v heads and a joint beta/alpha projection, gated attention,
# MoE + sigmoid-gated shared expert) against
#   0. (Python side first) the independent float64 numpy reference
#      tests/ref_forward.py vs llama.cpp's outputs on
#      ../shared/fixtures/qwen3next/tiny-qwen3next.gguf, DeltaNet recurrent and
#      chunked (tests/check_fixture.py);
#   A. the numpy reference on small random qwen3next models written by
#      tests/gen_model.py (F32: max |pocket - ref| < 1e-3 over all logits;
#      F16: 5e-2, as tests/t_qwen35_ref.sh explains), against the recurrent
#      and the chunked reference; with a merged ffn_gate_up_exps, and with
#      the layer pattern from attention.recurrent_layers;
#   B. llama.cpp's reference outputs for the fixture (greedy.json: prompt + 32
#      greedy tokens; long150.json: 150 prompt tokens + 16 greedy tokens),
#      teacher-forced through tests/check_fixture.py: argmax equal to the
#      reference at every row (so every greedy continuation is the same) and
#      each row's 20 reference logits within 1e-3 * max(1, |ref|), by token
#      id - one token at a time and as one batch (the chunked delta rule), on
#      every kernel variant usable here (the list `pocket --help` prints; or
#      those $BATCH_VARIANTS names, as for tests/t_batch.sh);
#   C. a merged ffn_gate_up_exps gives the logits of the two tensors, bitwise;
#   D. a qwen3next file with a missing or misshapen tensor or key gives one
#      error line naming it, exit status 1.
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build), $PYTHON and $FIXTURES (default ../shared/fixtures/qwen3next).
# $POCKET_RUN, if set, prefixes every pocket binary (tests/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest top-k probability margin >= 1e-3).
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
FIXTURES=${FIXTURES:-../shared/fixtures/qwen3next}
TOOL="$BUILD/tests/tool_logits"
RUN=${POCKET_RUN:-}
TOL_F32=1e-3
TOL_F16=5e-2
MODEL="$FIXTURES/tiny-qwen3next.gguf"

mkdir -p "$BUILD/tmp" || exit 1
TMP=$(mktemp -d "$BUILD/tmp/qwen3next_ref.XXXXXX") || exit 1
fail=0
failed_steps=""
note_fail() {   # note_fail STEP MESSAGE
    echo "FAIL [$1] $2"
    fail=1
    case " $failed_steps " in *" $1 "*) ;; *) failed_steps="$failed_steps $1" ;; esac
}

echo "== step 0: the numpy reference vs llama.cpp on the fixture"
if [ -f "$MODEL" ]; then
    "$PYTHON" tests/check_fixture.py --arch qwen3next --fixture-dir "$FIXTURES" \
        || note_fail step0 "check_fixture.py: the numpy reference disagrees with llama.cpp"
else
    note_fail step0 "fixture $MODEL not found"
fi
if [ ! -x "$TOOL" ] || [ ! -x "$BUILD/pocket" ]; then
    note_fail setup "$TOOL or $BUILD/pocket not found (build them with make)"
    echo "t_qwen3next_ref: FAILED in step(s):$failed_steps"
    exit 1
fi

# compare STEP LABEL REF.npy POCKET.f32 TOL -> 0 if max |pocket - ref| < TOL
compare() { "$PYTHON" tests/cmp_logits.py "$@"; }

# check NAME TOL THREADS IDS CHUNK -- generator options
#   IDS: "short" (12 ids incl. V-1, V-2, V-3) or "long" (70 ids, > 1 chunk of 64)
check() {
    name=$1; tol=$2; threads=$3; idkind=$4; chunk=$5; shift 5
    step="A:$name"
    model="$TMP/$name.gguf"
    if ! "$PYTHON" tests/gen_model.py qwen3next "$model" "$@"; then
        note_fail "$step" "gen_model.py failed"; return
    fi
    v=300
    if [ "$idkind" = long ]; then
        ids=$("$PYTHON" -c 'print(",".join(str((i * 37 + 11) % 300) for i in range(70)))')
    else
        ids="1,17,$((v - 1)),255,256,42,$((v - 2)),100,7,200,$((v - 3)),5"
    fi
    echo "== step $step (qwen3next $*; $idkind ids)"
    if ! "$PYTHON" tests/ref_forward.py --stats --deltanet recurrent "$model" "$ids" "$TMP/$name.rec.npy" ||
       ! "$PYTHON" tests/ref_forward.py --deltanet "chunked:$chunk" "$model" "$ids" "$TMP/$name.ch.npy"; then
        note_fail "$step" "ref_forward.py failed"; return
    fi
    for t in $threads; do
        for b in 1 64; do
            out="$TMP/$name.t$t.b$b.f32"
            # the numpy reference keeps keys and values in float: an F32 cache
            if ! $RUN "$TOOL" -t "$t" -b "$b" -ctk f32 -ctv f32 "$model" "$out" "$ids"; then
                note_fail "$step" "tool_logits -t $t -b $b exited with an error"; continue
            fi
            for r in rec ch; do
                compare "$step" "$name -t $t -b $b vs $r" "$TMP/$name.$r.npy" "$out" "$tol" \
                    || note_fail "$step" "pocket -t $t -b $b differs from the numpy reference ($r)"
            done
        done
    done
}

check qwen3next        $TOL_F32 "1 2" short 5  --seed 4
check qwen3next-tied   $TOL_F32 "1"   short 5  --seed 4 --tied
check qwen3next-f16    $TOL_F16 "1"   short 5  --seed 4 --type f16
check qwen3next-rl     $TOL_F32 "1"   short 3  --seed 6 --recurrent-layers 1,0,1,1
check qwen3next-merged $TOL_F32 "1"   short 5  --seed 4 --merged-gate-up
check qwen3next-wide   $TOL_F32 "1"   short 5  --seed 4 --ssm-k-heads 2 --ssm-v-heads 8
check qwen3next-long   $TOL_F32 "2"   long  16 --seed 18

variants=$($RUN "$BUILD/pocket" --help | sed -n 's/.*usable on this CPU): //p' | tr ' ' '\n' | sed -n 's/[*]$//p')
[ -n "$variants" ] || note_fail setup "no usable kernel variant in pocket --help"
# under emulation tests/run_aarch64.sh names the variants each CPU adds
[ -n "${BATCH_VARIANTS:-}" ] && variants=$BATCH_VARIANTS
for f in greedy long150; do
    step="B:fixture-$f"
    json="$FIXTURES/tiny-qwen3next.$f.json"
    echo "== step $step (pocket vs llama.cpp on tiny-qwen3next.gguf, $f.json teacher-forced)"
    ids=$("$PYTHON" tests/check_fixture.py ids "$json") || { note_fail "$step" "cannot read $json"; continue; }
    for kv in $variants; do
        for b in 1 256; do
            out="$TMP/fixture-$f.$kv.b$b.f32"
            if ! POCKET_KERNELS=$kv $RUN "$TOOL" -t 1 -b $b "$MODEL" "$out" "$ids"; then
                note_fail "$step" "tool_logits ($kv, -b $b) exited with an error"; continue
            fi
            printf '[%s -b %s] ' "$kv" "$b"
            "$PYTHON" tests/check_fixture.py logits "$json" "$out" 4096 \
                || note_fail "$step" "pocket's logits ($kv, -b $b) differ from llama.cpp's"
        done
    done
done

step="C:merged"
echo "== step $step (ffn_gate_up_exps gives the logits of ffn_gate_exps + ffn_up_exps, bitwise)"
ids=1,17,299,42,5,256,100,7,200,11
for b in 1 64; do
    $RUN "$TOOL" -b $b "$TMP/qwen3next-merged.gguf" "$TMP/merged.f32" $ids &&
    $RUN "$TOOL" -b $b "$TMP/qwen3next.gguf" "$TMP/split.f32" $ids &&
    cmp -s "$TMP/merged.f32" "$TMP/split.f32" || note_fail "$step" "logits differ with the merged tensor (-b $b)"
done

step="D:bad-input"
echo "== step $step (missing / misshapen tensors and keys: one error line naming them)"
if "$PYTHON" - "$MODEL" "$TMP/bad" >"$TMP/bad.cases" <<'EOF'
import os
import sys
sys.path.insert(0, "tests")
import numpy as np
import gguf_py as G
import mkbad
g = G.read_gguf(sys.argv[1])
out = sys.argv[2]
os.makedirs(out, exist_ok=True)
cases = [
    ("no_ssm_ba", dict(drop_tensors=("blk.1.ssm_ba.weight",)), "blk.1.ssm_ba.weight"),
    ("short_ssm_ba", dict(reshape={"blk.0.ssm_ba.weight": lambda a: a[:-1]}), "blk.0.ssm_ba.weight"),
    ("no_gate_q", dict(reshape={"blk.3.attn_q.weight": lambda a: a[:a.shape[0] // 2]}), "blk.3.attn_q.weight"),
    ("no_shexp_gate", dict(drop_tensors=("blk.2.ffn_up_shexp.weight",)), "blk.2.ffn_up_shexp.weight"),
    ("no_group_count", dict(drop_keys=("qwen3next.ssm.group_count",)), "qwen3next.ssm.group_count"),
    ("v_not_multiple", dict(set_keys={"qwen3next.ssm.group_count": (3, G.UINT32)}), "group_count"),
    ("no_experts", dict(set_keys={"qwen3next.expert_count": (0, G.UINT32)}), "expert_used_count"),
    ("merged_short", dict(drop_tensors=("blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight"),
                          extra={"blk.0.ffn_gate_up_exps.weight": np.zeros((8, 60, 80))}),
     "blk.0.ffn_gate_up_exps.weight"),
    ("legacy_ssm_in", dict(drop_tensors=("blk.2.attn_qkv.weight", "blk.2.attn_gate.weight"),
                           extra={"blk.2.ssm_in.weight": np.zeros((256, 80))}), "blk.2.ssm_in.weight"),
]
for name, kw, expect in cases:
    extra = kw.pop("extra", {})
    for t, a in extra.items():   # tensors added to the file
        g.tensors[t] = a
        g.tensor_order.append(t)
    mkbad.rewrite(g, os.path.join(out, name + ".gguf"), **kw)
    for t in extra:
        del g.tensors[t]
        g.tensor_order.remove(t)
    print("%s.gguf\t%s" % (name, expect))
EOF
then
    sh tests/check_bad_files.sh "$TMP/bad.cases" "$TMP/bad" || note_fail "$step" "a bad file was not refused as expected"
else
    note_fail "$step" "could not write the bad files"
fi

if [ $fail -ne 0 ]; then
    echo "t_qwen3next_ref: FAILED in step(s):$failed_steps (files kept in $TMP)"
    exit 1
fi
rm -rf "$TMP"
echo "t_qwen3next_ref: pocket matches the numpy reference and llama.cpp"
exit 0
