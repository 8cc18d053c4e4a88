#!/bin/sh
# t_gemma4_ref.sh - check pocket's gemma4 (Gemma-4 MoE, 26B-A4B layout:
# sliding-window and global attention layers with their own head dims, kv
# heads and rope, K = V on global layers, V normed without weight, scale 1;
# a dense GeGLU MLP and routed experts in every layer, ggml's FP16-table
# GELU, layer_output_scale, embeddings x sqrt(D), final logit soft-cap)
# against
#   0. (Python side first) the independent float64 numpy reference
#      tests/lib/ref_gemma4.py (through ref_forward.py) vs llama.cpp's outputs on
#      the fixture tiny-gemma4.gguf (tests/lib/check_fixture.py:
#      within the README's 0.1, and 2x closer than with an exact GELU);
#   A. the numpy reference on small random gemma4 models written by
#      tests/lib/gen_model.py (F32: max |pocket - ref| < 1e-2 over all logits:
#      pocket rounds GELU inputs to fp16 from float32 sums, the reference from
#      float64 ones, and an input on the other side of an fp16 step moves a
#      logit by ~1e-3), one token at a time and in batches, 1 and 2 threads;
#      with attn_v on the global layers, separate gate/up experts, a tied
#      head, no soft-cap, a window shorter than the sequence, F16 weights
#      (1e-1: pocket rounds activations to F16 for F16 weights as ggml does,
#      and the GELU table's fp16 steps magnify that);
#   B. llama.cpp's reference outputs for the fixture (greedy.json: 5 prompt +
#      32 greedy tokens; long150.json: 150 + 16), teacher-forced, through
#      tests/lib/check_fixture.py with the README's acceptance: each row's 20
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
# (default build), $PYTHON and $FIXTURES (default tests/data/fixtures/gemma4).
# $POCKET_RUN, if set, prefixes every pocket binary (tests/lib/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (ref_forward.py --stats: smallest top-k margin >= 1e-3).
REF_NAME=gemma4_ref FIXTURE=gemma4
. tests/lib/ref_lib.sh
TOL_F32=1e-2 TOL_F16=1e-1

start

BATCHES="1 5 64"
#        NAME           ARCH   TOL      THREADS IDS   REFS  generator options
ref_case gemma4          gemma4 $TOL_F32 "1 2"   short ref: --seed 5
ref_case gemma4-global-v gemma4 $TOL_F32 1       short ref: --seed 5 --global-v
ref_case gemma4-split    gemma4 $TOL_F32 1       short ref: --seed 5 --split-gate-up
ref_case gemma4-tied     gemma4 $TOL_F32 1       short ref: --seed 5 --tied --softcap 0
ref_case gemma4-window   gemma4 $TOL_F32 "1 2"   short ref: --seed 5 --window 5 --pattern 1,0,1,1
ref_case gemma4-f16      gemma4 $TOL_F16 1       short ref: --seed 5 --type f16

fixture_step "-ctk f32 -ctv f32" "--arch gemma4"

step="C:batch"
echo "== step $step (the fixture in one batch = one token at a time, bitwise, F32 and F16 caches)"
ids=$("$PYTHON" tests/lib/check_fixture.py ids "$FIXTURES/tiny-gemma4.long150.json")
for kv in f32 f16; do
    same_logits "$step" "$kv cache: 165 tokens in batches of 64 = one at a time" "$ids" \
        "-t 2 -b 1 -ctk $kv -ctv $kv $MODEL" "-t 2 -b 64 -ctk $kv -ctv $kv $MODEL"
done

step="F:expert-cache"
echo "== step $step (under an expert cache of 1, 3, 7 of 8 slots: the mapped file's logits, bitwise)"
ids=$("$PYTHON" tests/lib/check_fixture.py ids "$FIXTURES/tiny-gemma4.greedy.json")
for s in 1 3 7; do
    for b in 1 16; do
        same_logits "$step" "$s slots, -b $b = mapped" "$ids" "-t 1 -b 1 $MODEL" "-t 1 -b $b -s $s $MODEL"
    done
done

echo "== step E:info (pocket info prints the block plan: sliding and global layers)"
expect_info E:info "$MODEL" "blocks          layers 0-1, 3-4: attention(4 q / 2 kv heads, head 32, rope 32 dims, q/k norm, v norm, window 16) + dense+moe(ff 48 + top-2 of 8, ff 32, gelu), post norms; layers 2, 5: attention(4 q / 1 kv heads, head 64, rope 64 dims, q/k norm, v = k, v norm) + dense+moe(ff 48 + top-2 of 8, ff 32, gelu), post norms"

bad_files D:bad-input 22 "$MODEL" <<'PY'
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
mkbad.write_cases(SRC, OUT, cases)
PY

finish "pocket matches the numpy reference and llama.cpp"
