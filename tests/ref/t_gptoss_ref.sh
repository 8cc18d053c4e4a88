#!/bin/sh
# t_gptoss_ref.sh - check pocket's gpt-oss (sliding-window / full attention
# with sinks and q/k/v/o biases, YaRN rope, a biased router weighted by a
# softmax of the chosen logits, biased experts with the clamped SwiGLU-OAI,
# MXFP4 experts) against
#   0. (Python side first) the independent float64 numpy reference
#      tests/lib/ref_forward.py vs llama.cpp's outputs on
#      the fixture tiny-gpt-oss.gguf (tests/lib/check_fixture.py),
#      its MXFP4 products rounding their inputs to Q8_0 as ggml's do;
#   A. the numpy reference on small random gpt-oss models written by
#      tests/lib/gen_model.py (max |pocket - ref| over all logits < 1e-3 for F32
#      weights, F32 or MXFP4 experts; 5e-2 for F16 weights, as
#      tests/ref/t_qwen35_ref.sh explains), one token at a time and in batches,
#      1 and 2 threads: windows of 4 and 6, sliding_window_pattern 3,
#      linear rope instead of YaRN, 70 tokens;
#   B. llama.cpp's reference outputs for the fixture (greedy.json: prompt + 32
#      greedy tokens; long150.json: 150 prompt tokens + 16 greedy tokens),
#      teacher-forced through tests/lib/check_fixture.py: argmax equal to the
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
# (default build), $PYTHON and $FIXTURES (default tests/data/fixtures/gpt-oss).
# $POCKET_RUN, if set, prefixes every pocket binary (tests/lib/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest top-k probability margin >= 1e-4, against
# differences of 1e-5).
REF_NAME=gptoss_ref FIXTURE=gpt-oss
. tests/lib/ref_lib.sh
TOL_F32=1e-3 TOL_F16=5e-2 TOL_FIXTURE=0.2

start --abs-tol $TOL_FIXTURE

BATCHES="1 5 64"
#        NAME           ARCH    TOL      THREADS IDS   REFS generator options
ref_case gptoss         gpt-oss $TOL_F32 "1 2"   short ref: --seed 7
ref_case gptoss-mxfp4   gpt-oss $TOL_F32 "1 2"   short ref: --seed 6 --exps-type mxfp4
ref_case gptoss-f16     gpt-oss $TOL_F16 1       short ref: --seed 7 --type f16
ref_case gptoss-pattern gpt-oss $TOL_F32 1       short ref: --seed 4 --swa-window 6 --swa-pattern 3 --rope-scaling linear --rope-factor 2
ref_case gptoss-long    gpt-oss $TOL_F32 2       long  ref: --seed 2 --exps-type mxfp4

fixture_step "-ctk f32 -ctv f32" "--abs-tol $TOL_FIXTURE"

bad_files D:bad-input 13 "$MODEL" <<'EOF'
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
mkbad.write_cases(SRC, OUT, cases)
EOF

finish "pocket matches the numpy reference and llama.cpp"
