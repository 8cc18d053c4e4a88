#!/bin/sh
# t_moerows_ref.sh - check pocket's qwen2moe (q/k/v biases, experts not
# renormalised, a shared expert scaled by sigmoid(ffn_gate_inp_shexp . x)),
# olmoe (q/k RMS norms over the whole q and k width, experts not
# renormalised) and granitemoe (llama's blocks with Granite's embedding,
# residual, attention and logit multipliers; optionally an ungated shared
# expert) against the independent float64 numpy reference
# tests/lib/ref_forward.py, which follows llama.cpp's models/qwen2moe.cpp,
# olmoe.cpp and granite.cpp. llama.cpp has no fixtures of these, so:
#   A. small random models written by tests/lib/gen_model.py (F32: max |pocket -
#      ref| < 1e-3 over all logits; F16 weights: 5e-2, as tests/ref/t_qwen35_ref.sh
#      explains; an F16 KV cache against the reference holding the same cache:
#      5e-3, as tests/ref/t_forward_ref.sh explains), one token at a time (-b 1)
#      and as one batch (-b 64), 1 and 2 threads, on every kernel variant
#      usable here (the list `pocket --help` prints; or those
#      $BATCH_VARIANTS names, as for tests/cli/t_batch.sh);
#   B. each feature matters: the reference with it switched off (qwen2moe's
#      biases, shared-expert gate, no renormalisation; olmoe's full-width
#      norms; each of Granite's multipliers) is far from pocket's logits, so
#      step A could not pass with the feature ignored;
#   C. `pocket info` names each one's block plan;
#   D. files with a missing or misshapen tensor or key (or a feature pocket
#      does not compute) give one error line naming it, exit status 1.
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build) and $PYTHON. $POCKET_RUN, if set, prefixes every pocket
# binary (tests/lib/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest top-k probability margin >= 1e-3, printed).
REF_NAME=moerows_ref
. tests/lib/ref_lib.sh
TOL_F32=1e-3 TOL_F16=5e-2 TOL_KV_F16=5e-3

start
kernel_variants
EACH_VARIANT=1
MIN_MARGIN=1e-3
for arch in qwen2moe olmoe granitemoe; do
    ref_case $arch          $arch $TOL_F32 "1 2" short ref: --seed 1
    ref_case $arch-tied     $arch $TOL_F32 "1 2" short ref: --seed 1 --tied
    ref_case $arch-f16      $arch $TOL_F16 "1 2" short ref: --seed 1 --type f16
    KV=f16
    ref_case $arch-kv-f16   $arch $TOL_KV_F16 "1 2" short ref: --seed 1
    KV=f32
done
# 40 tokens: more than one 16-token attention tile
ref_case qwen2moe-long      qwen2moe   $TOL_F32 "1 2" long:40 ref: --seed 9
ref_case olmoe-long         olmoe      $TOL_F32 "1 2" long:40 ref: --seed 7
ref_case granitemoe-long    granitemoe $TOL_F32 "1 2" long:40 ref: --seed 11
ref_case granitemoe-shared  granitemoe $TOL_F32 "1 2" short   ref: --seed 1 --shared-ff 24
ref_case granitemoe-shared-long granitemoe $TOL_F32 "1 2" long:40 ref: --seed 18 --shared-ff 24
ref_case qwen2moe-heads     qwen2moe   $TOL_F32 "1 2" short   ref: --seed 4 --embd 128 --heads 4 --heads-kv 2
ref_case granitemoe-scales  granitemoe $TOL_F32 "1 2" short   ref: --seed 5 --embd-scale 12 --residual-scale 0.5 \
    --attn-scale 0.1 --logit-scale 8

step="B:features"
echo "== step $step (the reference without each feature is far from pocket)"
"$PYTHON" - "$TMP" "$(ids short)" $variants <<'EOF' || note_fail "$step" "a feature switched off in the reference still matched pocket"
import sys
sys.path.insert(0, "tests/lib")
import numpy as np
import ref_forward as R
tmp, ids = sys.argv[1], [int(s) for s in sys.argv[2].split(",")]
v = sys.argv[3]
def perhead(m):
    m.full_qk_norm = False
    for ly in m.layers:
        ly["q_norm"], ly["k_norm"] = ly["q_norm"][:m.head_dim], ly["k_norm"][:m.head_dim]
cases = [
    ("qwen2moe", "renormalised experts", lambda m: setattr(m, "renorm", True)),
    ("qwen2moe", "no q/k/v biases", lambda m: [ly.update(bq=None, bk=None, bv=None) for ly in m.layers]),
    ("qwen2moe", "ungated shared expert", lambda m: [ly.pop("shexp_gate_inp") for ly in m.layers]),
    ("qwen2moe", "no shared expert", lambda m: [ly.pop("gate_shexp") for ly in m.layers]),
    ("olmoe", "renormalised experts", lambda m: setattr(m, "renorm", True)),
    ("olmoe", "per-head q/k norms", perhead),
    ("granitemoe", "no embedding scale", lambda m: setattr(m, "embd_scale", 1.0)),
    ("granitemoe", "no residual scale", lambda m: setattr(m, "residual_scale", 1.0)),
    ("granitemoe", "default attention scale", lambda m: setattr(m, "attn_scale", 1 / np.sqrt(m.head_dim))),
    ("granitemoe", "no logit scale", lambda m: setattr(m, "logit_scale", 1.0)),
    ("granitemoe", "experts not renormalised", lambda m: setattr(m, "renorm", False)),
    ("granitemoe-shared", "no shared expert", lambda m: [ly.pop("gate_shexp") for ly in m.layers]),
]
bad = 0
for name, what, mut in cases:
    m = R.Model("%s/%s.gguf" % (tmp, name))
    mut(m)
    ref = m.forward(ids)
    got = np.fromfile("%s/%s.%s.t1.b1.f32" % (tmp, name, v), dtype="<f4").reshape(ref.shape)
    d = np.abs(got - ref).max()
    ok = d > 1e-2     # 10x step A's F32 tolerance
    bad += not ok
    print("%s %-18s reference with %-26s: max|pocket-ref| = %.3e (must be > 1e-2)"
          % ("ok  " if ok else "FAIL [B:features]", name, what, d))
sys.exit(1 if bad else 0)
EOF

step="C:info"
echo "== step $step (pocket info names the block plan)"
expect_info "$step" "$TMP/qwen2moe.gguf" "blocks          layers 0-1: attention(2 q / 1 kv heads, head 32, rope 32 dims, biases) + moe(top-3 of 8, ff 32, shared ff 48)"
expect_info "$step" "$TMP/olmoe.gguf" "blocks          layers 0-1: attention(2 q / 2 kv heads, head 32, rope 32 dims, full-width q/k norm) + moe(top-3 of 8, ff 32)"
expect_info "$step" "$TMP/granitemoe.gguf" "blocks          layers 0-1: attention(2 q / 1 kv heads, head 32, rope 32 dims, scale 0.05) + moe(top-3 of 8, ff 32)"
expect_info "$step" "$TMP/granitemoe.gguf" "multipliers     embeddings x 6, block outputs x 0.22, attention scores x 0.05, logits / 3.5"
expect_info "$step" "$TMP/granitemoe-shared.gguf" "blocks          layers 0-1: attention(2 q / 1 kv heads, head 32, rope 32 dims, scale 0.05) + moe(top-3 of 8, ff 32, shared ff 24)"

# SOURCE: the directory of the models of step A
bad_files D:bad-input 21 "$TMP" <<'EOF'
cases = {
    "qwen2moe": [
        ("q2_no_q_bias", dict(drop_tensors=("blk.1.attn_q.bias",)), "blk.1.attn_q.bias"),
        ("q2_short_v_bias", dict(reshape={"blk.0.attn_v.bias": lambda a: a[:-1]}), "blk.0.attn_v.bias"),
        ("q2_no_shexp_gate", dict(drop_tensors=("blk.0.ffn_gate_inp_shexp.weight",)), "blk.0.ffn_gate_inp_shexp.weight"),
        ("q2_short_shexp_gate", dict(reshape={"blk.1.ffn_gate_inp_shexp.weight": lambda a: a[:-1]}),
         "blk.1.ffn_gate_inp_shexp.weight"),
        ("q2_no_shexp_down", dict(drop_tensors=("blk.1.ffn_down_shexp.weight",)), "blk.1.ffn_down_shexp.weight"),
        ("q2_no_shexp_ff", dict(drop_keys=("qwen2moe.expert_shared_feed_forward_length",)),
         "qwen2moe.expert_shared_feed_forward_length"),
        ("q2_no_experts", dict(set_keys={"qwen2moe.expert_count": (0, G.UINT32)}), "expert_used_count"),
        ("q2_short_out_bias", dict(extra={"blk.0.attn_output.bias": np.zeros(63)}), "blk.0.attn_output.bias"),
    ],
    "olmoe": [
        ("ol_no_k_norm", dict(drop_tensors=("blk.1.attn_k_norm.weight",)), "blk.1.attn_k_norm.weight"),
        ("ol_head_q_norm", dict(reshape={"blk.0.attn_q_norm.weight": lambda a: a[:32]}), "blk.0.attn_q_norm.weight"),
        ("ol_k_bias", dict(extra={"blk.1.attn_k.bias": np.zeros(64)}), "blk.1.attn_k.bias"),
        ("ol_out_bias", dict(extra={"blk.0.attn_output.bias": np.zeros(64)}), "blk.0.attn_output.bias"),
        ("ol_short_router", dict(reshape={"blk.0.ffn_gate_inp.weight": lambda a: a[:-1]}), "blk.0.ffn_gate_inp.weight"),
    ],
    "granitemoe": [
        ("gr_no_logit_scale", dict(drop_keys=("granitemoe.logit_scale",)), "granitemoe.logit_scale"),
        ("gr_zero_logit_scale", dict(set_keys={"granitemoe.logit_scale": (0.0, G.FLOAT32)}), "granitemoe.logit_scale"),
        ("gr_neg_residual", dict(set_keys={"granitemoe.residual_scale": (-1.0, G.FLOAT32)}), "granitemoe.residual_scale"),
        ("gr_str_embd_scale", dict(set_keys={"granitemoe.embedding_scale": ("6", G.STRING)}), "granitemoe.embedding_scale"),
        ("gr_no_rope", dict(extra_keys={"granitemoe.rope.scaling.finetuned": (False, G.BOOL, None)}),
         "granitemoe.rope.scaling.finetuned"),
        ("gr_no_up_exps", dict(drop_tensors=("blk.1.ffn_up_exps.weight",)), "blk.1.ffn_up_exps.weight"),
    ],
    "granitemoe-shared": [
        ("gr_no_shexp_up", dict(drop_tensors=("blk.0.ffn_up_shexp.weight",)), "blk.0.ffn_up_shexp.weight"),
        ("gr_shexp_gate", dict(extra={"blk.1.ffn_gate_inp_shexp.weight": np.zeros(64)}), "blk.1.ffn_gate_inp_shexp.weight"),
    ],
}
for src, lst in cases.items():
    mkbad.write_cases(os.path.join(SRC, src + ".gguf"), OUT, lst)
EOF

finish "qwen2moe, olmoe and granitemoe match the numpy reference on every variant: $(echo $variants)"
