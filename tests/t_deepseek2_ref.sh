#!/bin/sh
# t_deepseek2_ref.sh - check pocket's deepseek2 (DeepSeek-V2/V3 family:
# multi-head latent attention over a latent cache, YaRN with DeepSeek's score
# correction, leading dense layers, routed experts with sigmoid scores, a
# selection-only bias, renormalised and scaled weights, ungated shared
# experts) against
#   0. (Python side first) the independent float64 numpy reference
#      tests/ref_forward.py vs llama.cpp's outputs on
#      ../shared/fixtures/deepseek2/tiny-deepseek2.gguf, latent attention in
#      its decompressed and its absorbed form (tests/check_fixture.py);
#   A. the numpy reference (both forms) on small random deepseek2 models
#      written by tests/gen_model.py (F32: max |pocket - ref| < 1e-3 over all
#      logits; F16 weights: 5e-2, as tests/t_qwen35_ref.sh explains): V3
#      routing, group-limited routing, the q LoRA, V2-style softmax routing
#      without bias,
#      renormalisation or scale and no dense layer, YaRN with and without
#      mscale_all_dim, a tied head; an F16 and a Q8_0 latent cache against
#      the reference holding the same cache (5e-3 and 2e-2, as
#      tests/t_forward_ref.sh; Q8_0 needs rows of whole blocks, refused on
#      the fixture's 40);
#   B. llama.cpp's reference outputs for the fixture (greedy.json: prompt + 32
#      greedy tokens; long150.json: 150 prompt tokens + 16 greedy tokens),
#      teacher-forced through tests/check_fixture.py: argmax equal to the
#      reference at every row (so every greedy continuation is the same) and
#      each row's 20 reference logits within 1e-3 * max(1, |ref|), by token
#      id - one token at a time and as one batch, with the F32 cache
#      llama.cpp used, and with the default F16 cache within 5e-3 (a few of
#      its rounding steps: 1.03e-3 measured; llama.cpp's own F16 cache moves
#      its logits by 2.4e-3), on every kernel variant
#      usable here (the list `pocket --help` prints; or those
#      $BATCH_VARIANTS names, as for tests/t_batch.sh);
#   C. one token at a time and one batch give the same logits bitwise
#      (F32 weights) on the fixture, every variant;
#   D. a deepseek2 file with a missing or misshapen tensor or key gives one
#      error line naming it, exit status 1.
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build), $PYTHON and $FIXTURES (default ../shared/fixtures/deepseek2).
# $POCKET_RUN, if set, prefixes every pocket binary (tests/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest selection-score margin >= 4e-4, float32 noise
# ~1e-6).
REF_NAME=deepseek2_ref
. tests/ref_lib.sh
FIXTURES=${FIXTURES:-../shared/fixtures/deepseek2}
TOL_F32=1e-3
TOL_F16=5e-2
TOL_KV16=5e-3
TOL_KVQ8=2e-2
MODEL="$FIXTURES/tiny-deepseek2.gguf"

step0 deepseek2
need_tools

# check NAME TOL THREADS IDS -- generator options
#   IDS: "short" (12 ids incl. V-1, V-2, V-3) or "long" (70 ids)
check() {
    name=$1; tol=$2; threads=$3; idkind=$4; shift 4
    step="A:$name"
    model="$TMP/$name.gguf"
    if ! "$PYTHON" tests/gen_model.py deepseek2 "$model" "$@"; then
        note_fail "$step" "gen_model.py failed"; return
    fi
    v=300
    if [ "$idkind" = long ]; then
        ids=$("$PYTHON" -c 'print(",".join(str((i * 37 + 11) % 300) for i in range(70)))')
    else
        ids="1,17,$((v - 1)),255,256,42,$((v - 2)),100,7,200,$((v - 3)),5"
    fi
    echo "== step $step (deepseek2 $*; $idkind ids)"
    if ! "$PYTHON" tests/ref_forward.py --stats --mla decompressed "$model" "$ids" "$TMP/$name.dec.npy" ||
       ! "$PYTHON" tests/ref_forward.py --mla absorbed "$model" "$ids" "$TMP/$name.abs.npy"; then
        note_fail "$step" "ref_forward.py failed"; return
    fi
    for t in $threads; do
        for b in 1 64; do
            out="$TMP/$name.t$t.b$b.f32"
            # the numpy reference keeps the latent in float: an F32 cache
            if ! $RUN "$TOOL" -t "$t" -b "$b" -ctk f32 -ctv f32 "$model" "$out" "$ids"; then
                note_fail "$step" "tool_logits -t $t -b $b exited with an error"; continue
            fi
            for r in dec abs; do
                compare "$step" "$name -t $t -b $b vs $r" "$TMP/$name.$r.npy" "$out" "$tol" \
                    || note_fail "$step" "pocket -t $t -b $b differs from the numpy reference ($r)"
            done
        done
    done
}

V2="--gating softmax --no-bias --no-norm --w-scale 1 --dense-lead 0 --shared 1"
YARN="--rope-scaling yarn --rope-factor 8 --rope-orig-ctx 16"
check deepseek2        $TOL_F32 "1 2" short --seed 1
check deepseek2-tied   $TOL_F32 "1"   short --seed 1 --tied
check deepseek2-f16    $TOL_F16 "1"   short --seed 1 --type f16
check deepseek2-qlora  $TOL_F32 "1 2" short --seed 1 --q-lora 24
check deepseek2-v2     $TOL_F32 "1"   short --seed 4 $V2
check deepseek2-long   $TOL_F32 "2"   long  --seed 1 --layers 4 --dense-lead 2
check deepseek2-groups $TOL_F32 "2"   long  --seed 1 --groups 4 --groups-used 2
check deepseek2-yarn   $TOL_F32 "2"   long  --seed 1 $YARN --yarn-log-mul 0.707
check deepseek2-yarn1  $TOL_F32 "1"   long  --seed 1 $YARN

# kvcheck TYPE TOL MODEL -- a latent cache of TYPE vs the reference holding
# the same cache, one token at a time and in batches of 64
kvcheck() {
    kt=$1; ktol=$2; km=$3
    step="A:kv-$kt"
    echo "== step $step (a $kt latent cache vs the reference holding the same cache; $(basename "$km"))"
    if ! "$PYTHON" tests/ref_forward.py --kv-cache $kt "$km" "$ids" "$TMP/kv-$kt.npy"; then
        note_fail "$step" "ref_forward.py --kv-cache $kt failed"; return
    fi
    for b in 1 64; do
        if $RUN "$TOOL" -t 2 -b $b -ctk $kt "$km" "$TMP/kv-$kt.b$b.f32" "$ids"; then
            compare "$step" "$(basename "$km") -ctk $kt -b $b" "$TMP/kv-$kt.npy" "$TMP/kv-$kt.b$b.f32" $ktol \
                || note_fail "$step" "a $kt cache (-b $b) differs from the reference's"
        else
            note_fail "$step" "tool_logits -ctk $kt -b $b exited with an error"
        fi
    done
}
ids=$("$PYTHON" -c 'print(",".join(str((i * 37 + 11) % 300) for i in range(70)))')
kvcheck f16 $TOL_KV16 "$TMP/deepseek2-yarn.gguf"
# Q8_0 rows are whole blocks: a latent of 32 + 32 rope dims
if "$PYTHON" tests/gen_model.py deepseek2 "$TMP/q8kv.gguf" --seed 1 --kv-lora 32 --n-rot 32 --nope 16; then
    kvcheck q8_0 $TOL_KVQ8 "$TMP/q8kv.gguf"
else
    note_fail A:kv-q8_0 "gen_model.py failed"
fi
$RUN "$TOOL" -ctk q8_0 "$MODEL" "$TMP/q8.f32" 1,2,3 >"$TMP/q8.out" 2>&1 &&
    note_fail A:kv-q8_0 "a Q8_0 cache of 40-element rows was accepted"
grep -q "multiple of 32" "$TMP/q8.out" || note_fail A:kv-q8_0 "a Q8_0 cache of 40-element rows: $(cat "$TMP/q8.out")"

kernel_variants
for f in greedy long150; do
    step="B:fixture-$f"
    json="$FIXTURES/tiny-deepseek2.$f.json"
    echo "== step $step (pocket vs llama.cpp on tiny-deepseek2.gguf, $f.json teacher-forced)"
    ids=$("$PYTHON" tests/check_fixture.py ids "$json") || { note_fail "$step" "cannot read $json"; continue; }
    for kv in $variants; do
        for cache in f32 f16; do
            for b in 1 256; do
                out="$TMP/fixture-$f.$kv.$cache.b$b.f32"
                if ! POCKET_KERNELS=$kv $RUN "$TOOL" -t 1 -b $b -ctk $cache "$MODEL" "$out" "$ids"; then
                    note_fail "$step" "tool_logits ($kv, -ctk $cache, -b $b) exited with an error"; continue
                fi
                printf '[%s -ctk %s -b %s] ' "$kv" "$cache" "$b"
                tol=$TOL_F32; [ $cache = f16 ] && tol=$TOL_KV16
                "$PYTHON" tests/check_fixture.py --arch deepseek2 --tol $tol logits "$json" "$out" 4096 \
                    || note_fail "$step" "pocket's logits ($kv, -ctk $cache, -b $b) differ from llama.cpp's"
            done
            cmp -s "$TMP/fixture-$f.$kv.$cache.b1.f32" "$TMP/fixture-$f.$kv.$cache.b256.f32" \
                || note_fail "C:batch" "$f ($kv, -ctk $cache): one token at a time and one batch differ"
        done
    done
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
K = "deepseek2."
cases = [
    ("no_k_b", dict(drop_tensors=("blk.2.attn_k_b.weight",)), "blk.2.attn_k_b.weight"),
    ("short_v_b", dict(reshape={"blk.1.attn_v_b.weight": lambda a: a[:, :-1]}), "blk.1.attn_v_b.weight"),
    ("short_kv_a", dict(reshape={"blk.0.attn_kv_a_mqa.weight": lambda a: a[:-1]}), "blk.0.attn_kv_a_mqa.weight"),
    ("no_kv_a_norm", dict(drop_tensors=("blk.3.attn_kv_a_norm.weight",)), "blk.3.attn_kv_a_norm.weight"),
    ("no_attn_q", dict(drop_tensors=("blk.0.attn_q.weight",)), "blk.0.attn_q.weight"),
    ("q_lora_no_q_a", dict(set_keys={K + "attention.q_lora_rank": (16, G.UINT32)}), "blk.0.attn_q_a.weight"),
    ("short_bias", dict(reshape={"blk.2.exp_probs_b.bias": lambda a: a[:-1]}), "blk.2.exp_probs_b.bias"),
    ("no_dense", dict(drop_tensors=("blk.0.ffn_up.weight",)), "blk.0.ffn_up.weight"),
    ("no_shexp", dict(drop_tensors=("blk.1.ffn_down_shexp.weight",)), "blk.1.ffn_down_shexp.weight"),
    ("shexp_count", dict(set_keys={K + "expert_shared_count": (3, G.UINT32)}), "blk.1.ffn_gate_shexp.weight"),
    ("no_q_lora_key", dict(drop_keys=(K + "attention.q_lora_rank",)), K + "attention.q_lora_rank"),
    ("no_kv_lora_key", dict(drop_keys=(K + "attention.kv_lora_rank",)), K + "attention.kv_lora_rank"),
    ("legacy_kv_b", dict(drop_keys=(K + "attention.key_length_mla",)), "legacy attn_kv_b"),
    ("kv_heads", dict(set_keys={K + "attention.head_count_kv": (2, G.UINT32)}), "head_count_kv"),
    ("key_length", dict(set_keys={K + "attention.key_length": (24, G.UINT32)}), "key_length"),
    ("rope_dims", dict(set_keys={K + "rope.dimension_count": (24, G.UINT32)}), "rope.dimension_count"),
    ("dense_lead", dict(set_keys={K + "leading_dense_block_count": (9, G.UINT32)}), "leading_dense_block_count"),
    ("gating_func", dict(set_keys={K + "expert_gating_func": (4, G.UINT32)}), "expert_gating_func"),
    ("rope_type", dict(set_keys={K + "rope.scaling.type": ("longrope", G.STRING)}), "rope.scaling.type"),
    # keys the fixture does not have
    ("groups", dict(add_keys={K + "expert_group_count": (3, G.UINT32),
                              K + "expert_group_used_count": (1, G.UINT32)}), "expert_group_count"),
    ("temperature", dict(add_keys={K + "attention.temperature_scale": (0.5, G.FLOAT32)}), "temperature_scale"),
]
for name, kw, expect in cases:
    add = kw.pop("add_keys", {})
    for k, (v, vt) in add.items():
        g.kv[k], g.kv_types[k] = v, (vt, None)
        g.kv_order.append(k)
    mkbad.rewrite(g, os.path.join(out, name + ".gguf"), **kw)
    for k in add:
        del g.kv[k], g.kv_types[k]
        g.kv_order.remove(k)
    print("%s.gguf\t%s" % (name, expect))
EOF
then
    sh tests/check_bad.sh "$TMP/bad.cases" "$TMP/bad" || note_fail "$step" "a bad file was not refused with one line naming it"
else
    note_fail "$step" "could not write the bad files"
fi

finish "pocket matches the numpy reference and llama.cpp"
