#!/bin/sh
# t_deepseek2_ref.sh - check pocket's deepseek2 (DeepSeek-V2/V3 family:
# multi-head latent attention over a latent cache, YaRN with DeepSeek's score
# correction, leading dense layers, routed experts with sigmoid scores, a
# selection-only bias, renormalised and scaled weights, ungated shared
# experts) against
#   0. (Python side first) the independent float64 numpy reference
#      tests/lib/ref_forward.py vs llama.cpp's outputs on
#      the fixture tiny-deepseek2.gguf (tests/data/fixtures/deepseek2), latent attention in
#      its decompressed and its absorbed form (tests/lib/check_fixture.py);
#   A. the numpy reference (both forms) on small random deepseek2 models
#      written by tests/lib/gen_model.py (F32: max |pocket - ref| < 1e-3 over all
#      logits; F16 weights: 5e-2, as tests/ref/t_qwen35_ref.sh explains): V3
#      routing, group-limited routing, the q LoRA, V2-style softmax routing
#      without bias,
#      renormalisation or scale and no dense layer, YaRN with and without
#      mscale_all_dim, a tied head; an F16 and a Q8_0 latent cache against
#      the reference holding the same cache (5e-3 and 2e-2, as
#      tests/ref/t_forward_ref.sh; Q8_0 needs rows of whole blocks, refused on
#      the fixture's 40);
#   B. llama.cpp's reference outputs for the fixture (greedy.json: prompt + 32
#      greedy tokens; long150.json: 150 prompt tokens + 16 greedy tokens),
#      teacher-forced through tests/lib/check_fixture.py: argmax equal to the
#      reference at every row (so every greedy continuation is the same) and
#      each row's 20 reference logits within 1e-3 * max(1, |ref|), by token
#      id - one token at a time and as one batch, with the F32 cache
#      llama.cpp used, and with the default F16 cache within 5e-3 (a few of
#      its rounding steps: 1.03e-3 measured; llama.cpp's own F16 cache moves
#      its logits by 2.4e-3), on every kernel variant
#      usable here (the list `pocket --help` prints; or those
#      $BATCH_VARIANTS names, as for tests/cli/t_batch.sh);
#   C. one token at a time and one batch give the same logits bitwise
#      (F32 weights) on the fixture, every variant;
#   D. a deepseek2 file with a missing or misshapen tensor or key gives one
#      error line naming it, exit status 1.
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build), $PYTHON and $FIXTURES (default tests/data/fixtures/deepseek2).
# $POCKET_RUN, if set, prefixes every pocket binary (tests/lib/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest selection-score margin >= 4e-4, float32 noise
# ~1e-6).
REF_NAME=deepseek2_ref FIXTURE=deepseek2
. tests/lib/ref_lib.sh
TOL_F32=1e-3 TOL_F16=5e-2 TOL_KV16=5e-3 TOL_KVQ8=2e-2

start

# latent attention decompressed (dec) and absorbed (abs), the two agreeing
MLA="dec:--mla,decompressed abs:--mla,absorbed"
REF_AGREE=1e-9
V2="--gating softmax --no-bias --no-norm --w-scale 1 --dense-lead 0 --shared 1"
YARN="--rope-scaling yarn --rope-factor 8 --rope-orig-ctx 16"
#        NAME             ARCH      TOL      THREADS IDS   REFS   generator options
ref_case deepseek2        deepseek2 $TOL_F32 "1 2"   short "$MLA" --seed 1
ref_case deepseek2-tied   deepseek2 $TOL_F32 1       short "$MLA" --seed 1 --tied
ref_case deepseek2-f16    deepseek2 $TOL_F16 1       short "$MLA" --seed 1 --type f16
ref_case deepseek2-qlora  deepseek2 $TOL_F32 "1 2"   short "$MLA" --seed 1 --q-lora 24
ref_case deepseek2-v2     deepseek2 $TOL_F32 1       short "$MLA" --seed 4 $V2
ref_case deepseek2-long   deepseek2 $TOL_F32 2       long  "$MLA" --seed 1 --layers 4 --dense-lead 2
ref_case deepseek2-groups deepseek2 $TOL_F32 2       long  "$MLA" --seed 1 --groups 4 --groups-used 2
ref_case deepseek2-yarn   deepseek2 $TOL_F32 2       long  "$MLA" --seed 1 $YARN --yarn-log-mul 0.707
ref_case deepseek2-yarn1  deepseek2 $TOL_F32 1       long  "$MLA" --seed 1 $YARN
# a latent cache of F16 / Q8_0 against the reference holding the same cache
# (Q8_0 rows are whole blocks: a latent of 32 + 32 rope dims)
KV=f16
ref_case kv-f16           deepseek2 $TOL_KV16 2      long  "$MLA" --seed 1 $YARN --yarn-log-mul 0.707
KV=q8_0
ref_case kv-q8_0          deepseek2 $TOL_KVQ8 2      long  "$MLA" --seed 1 --kv-lora 32 --n-rot 32 --nope 16
KV=f32
expect_error A:kv-q8_0 "multiple of 32" $RUN "$TOOL" -ctk q8_0 "$MODEL" "$TMP/q8.f32" 1,2,3

# the F32 cache llama.cpp used, and the default F16 cache within 5e-3 (a few
# of its rounding steps); one batch = one token at a time, bitwise
fixture_step "-ctk f32" "--arch deepseek2 --tol $TOL_F32" f32 1
fixture_step "-ctk f16" "--arch deepseek2 --tol $TOL_KV16" f16 1

bad_files D:bad-input 21 "$MODEL" <<'EOF'
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
    ("groups", dict(extra_keys={K + "expert_group_count": (3, G.UINT32, None),
                                K + "expert_group_used_count": (1, G.UINT32, None)}), "expert_group_count"),
    ("temperature", dict(extra_keys={K + "attention.temperature_scale": (0.5, G.FLOAT32, None)}), "temperature_scale"),
]
mkbad.write_cases(SRC, OUT, cases)
EOF

finish "pocket matches the numpy reference and llama.cpp"
