#!/bin/sh
# t_qwen3next_ref.sh - check pocket's qwen3next (Qwen3-Next: Gated DeltaNet
# with grouped v heads and a joint beta/alpha projection, gated attention,
# MoE + sigmoid-gated shared expert) against
#   0. (Python side first) the independent float64 numpy reference
#      tests/lib/ref_forward.py vs llama.cpp's outputs on
#      the fixture tiny-qwen3next.gguf, DeltaNet recurrent and
#      chunked (tests/lib/check_fixture.py);
#   A. the numpy reference on small random qwen3next models written by
#      tests/lib/gen_model.py (F32: max |pocket - ref| < 1e-3 over all logits;
#      F16: 5e-2, as tests/ref/t_qwen35_ref.sh explains), against the recurrent
#      and the chunked reference; with a merged ffn_gate_up_exps, and with
#      the layer pattern from attention.recurrent_layers;
#   B. llama.cpp's reference outputs for the fixture (greedy.json: prompt + 32
#      greedy tokens; long150.json: 150 prompt tokens + 16 greedy tokens),
#      teacher-forced through tests/lib/check_fixture.py: argmax equal to the
#      reference at every row (so every greedy continuation is the same) and
#      each row's 20 reference logits within 1e-3 * max(1, |ref|), by token
#      id - one token at a time and as one batch (the chunked delta rule), on
#      every kernel variant usable here (the list `pocket --help` prints; or
#      those $BATCH_VARIANTS names, as for tests/cli/t_batch.sh);
#   C. a merged ffn_gate_up_exps gives the logits of the two tensors, bitwise;
#   D. a qwen3next file with a missing or misshapen tensor or key gives one
#      error line naming it, exit status 1.
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build), $PYTHON and $FIXTURES (default tests/data/fixtures/qwen3next).
# $POCKET_RUN, if set, prefixes every pocket binary (tests/lib/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest top-k probability margin >= 1e-3).
REF_NAME=qwen3next_ref FIXTURE=qwen3next
. tests/lib/ref_lib.sh
TOL_F32=1e-3 TOL_F16=5e-2

start

# the DeltaNet reference token by token (rec) and chunk-parallel (ch: chunks of C)
refs() { echo "rec:--deltanet,recurrent ch:--deltanet,chunked:$1"; }
#        NAME             ARCH      TOL      THREADS IDS   REFS         generator options
ref_case qwen3next        qwen3next $TOL_F32 "1 2"   short "$(refs 5)"  --seed 4
ref_case qwen3next-tied   qwen3next $TOL_F32 1       short "$(refs 5)"  --seed 4 --tied
ref_case qwen3next-f16    qwen3next $TOL_F16 1       short "$(refs 5)"  --seed 4 --type f16
ref_case qwen3next-rl     qwen3next $TOL_F32 1       short "$(refs 3)"  --seed 6 --recurrent-layers 1,0,1,1
ref_case qwen3next-merged qwen3next $TOL_F32 1       short "$(refs 5)"  --seed 4 --merged-gate-up
ref_case qwen3next-wide   qwen3next $TOL_F32 1       short "$(refs 5)"  --seed 4 --ssm-k-heads 2 --ssm-v-heads 8
ref_case qwen3next-long   qwen3next $TOL_F32 2       long  "$(refs 16)" --seed 18

fixture_step "" ""

step="C:merged"
echo "== step $step (ffn_gate_up_exps gives the logits of ffn_gate_exps + ffn_up_exps, bitwise)"
for b in 1 64; do
    same_logits "$step" "merged = split tensors (-b $b)" 1,17,299,42,5,256,100,7,200,11 \
        "-b $b $TMP/qwen3next-merged.gguf" "-b $b $TMP/qwen3next.gguf"
done

bad_files D:bad-input 9 "$MODEL" <<'EOF'
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
mkbad.write_cases(SRC, OUT, cases)
EOF

finish "pocket matches the numpy reference and llama.cpp"
