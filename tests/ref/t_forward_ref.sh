#!/bin/sh
# t_forward_ref.sh - compare pocket's logits with an independent float64 numpy
# reference (tests/lib/ref_forward.py) on small random models written by
# tests/lib/gen_model.py: qwen3moe (untied, tied, F16), qwen3 dense, llama dense,
# mixtral (llama with experts), and qwen3moe with YaRN and llama with linear
# rope scaling. For each model, build/tests/tool_logits feeds
# a fixed 12-token sequence (including ids V-1, V-2, V-3) one token at a time
# and the max |pocket - ref| over all logits must stay under the tolerance:
# 1e-3 for F32 weights, 2e-2 for F16 weights (pocket rounds activations to
# F16 for F16 matmuls, as llama.cpp does), one token at a time and in
# batches of 64. Some models also run with -t 2.
# These run with an F32 KV cache (-ctk f32 -ctv f32). Then the KV cache
# types: pocket with an F16 or Q8_0 cache against the reference holding the
# same cache type (ref_forward.py --kv-cache: K and V rounded as the cache
# rounds them). What differs is the order of float operations - and, when
# a key or value lands next to a rounding boundary of the cache type, that
# element rounded the other way: one F16 step (2^-10 relative) moved a logit
# by 1.19e-3 on qwen3-kv-f16 with the reference kernels (POCKET_KERNELS=ref;
# the same model and ids: ref vs avx2 kernels differ by 4.3e-6 with an F32
# cache, 1.19e-3 with an F16 one). So the typed caches get a tolerance of a
# few of their own steps: 5e-3 for F16, 2e-2 for Q8_0 (a level is 1/127 of
# the block's largest magnitude); the kernels themselves are held to tight
# bounds by test_kv. With head dims of 16 (llama, mixtral) a Q8_0 cache must
# be refused.
# Run from the project root; uses $BUILD (default build) and $PYTHON.
# $POCKET_RUN, if set, prefixes every pocket binary (e.g. "qemu-aarch64 -L
# SYSROOT -cpu max" for a cross build: tests/lib/run_aarch64.sh).
# The seeds are chosen so that no router decision on this sequence is close
# to a tie (a flipped expert choice would be a legitimate, large difference).
REF_NAME=forward_ref
. tests/lib/ref_lib.sh
TOL_F32=1e-3 TOL_F16=2e-2 TOL_KV_f16=5e-3 TOL_KV_q8_0=2e-2

start

#        NAME          ARCH     TOL      THREADS IDS   REFS generator options
ref_case qwen3moe      qwen3moe $TOL_F32 "1 2"   short ref: --seed 6
ref_case qwen3moe-tied qwen3moe $TOL_F32 1       short ref: --seed 6 --tied
ref_case qwen3moe-f16  qwen3moe $TOL_F16 1       short ref: --seed 6 --type f16
ref_case qwen3         qwen3    $TOL_F32 1       short ref: --seed 2
ref_case llama         llama    $TOL_F32 1       short ref: --seed 3
ref_case mixtral       mixtral  $TOL_F32 1       short ref: --seed 1
# rope scaling: YaRN (NEOX, correction dims 0..5 of 16 pairs, cos/sin x
# 1 + 0.1 ln 4) and linear (NORM); the same seeds as above, so the weights
# are those of qwen3moe and llama, and the logits must differ from theirs
ref_case qwen3moe-yarn qwen3moe $TOL_F32 "1 2"   short ref: --seed 6 --rope-scaling yarn --rope-factor 4 --rope-orig-ctx 64
ref_case llama-linear  llama    $TOL_F32 1       short ref: --seed 3 --rope-scaling linear --rope-factor 2
for p in qwen3moe:qwen3moe-yarn llama:llama-linear; do
    "$PYTHON" -c 'import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
d = np.abs(a - b).max()
print("%s %s: max |scaled - unscaled| reference logits = %.3f (must be > 0.01)" % ("ok  " if d > 0.01 else "FAIL", sys.argv[3], d))
sys.exit(0 if d > 0.01 else 1)' "$TMP/${p%%:*}.ref.npy" "$TMP/${p#*:}.ref.npy" "${p#*:}" ||
        note_fail A:rope-scaling "${p#*:}: the scaling does not change the reference"
done
# another scaling type is refused with one line naming the key
bad_files D:rope-scaling 1 "$TMP/qwen3moe-yarn.gguf" <<'EOF'
mkbad.write_cases(SRC, OUT, [("longrope", dict(set_keys={"qwen3moe.rope.scaling.type": ("longrope", G.STRING)}),
                              "rope.scaling.type 'longrope' is not supported")])
EOF
# KV cache types (head dim 32 for qwen3moe, qwen3; 16 for llama, mixtral)
for KV in f16 q8_0; do
    eval "tol=\$TOL_KV_$KV"
    ref_case qwen3moe-kv-$KV qwen3moe $tol "1 2" short ref: --seed 6
    ref_case qwen3-kv-$KV    qwen3    $tol 1     short ref: --seed 2
done
KV=f16
ref_case llama-kv-f16      llama    $TOL_KV_f16 1 short ref: --seed 3
ref_case mixtral-kv-f16    mixtral  $TOL_KV_f16 1 short ref: --seed 1
KV=f32
expect_error A:kv-q8_0 "multiple of 32" $RUN "$TOOL" -ctk q8_0 "$TMP/llama.gguf" "$TMP/q8.f32" 1,2,3

finish "all models match the reference"
