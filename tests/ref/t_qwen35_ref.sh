#!/bin/sh
# t_qwen35_ref.sh - check pocket's qwen35moe / qwen35 forward pass (Gated
# DeltaNet + gated attention hybrids) against
#   A. the independent float64 numpy reference tests/lib/ref_forward.py, on small
#      random models written by tests/lib/gen_model.py, with the DeltaNet computed
#      both token by token (--deltanet recurrent) and chunk-parallel
#      (--deltanet chunked:C): max |pocket - ref| over all logits < 1e-3 for
#      F32 weights, 5e-2 for F16 weights (pocket rounds matmul activations to
#      F16, as llama.cpp does; emulating just that rounding in numpy already
#      moves the qwen35moe-f16 logits by 1.8e-2 from the exact reference, vs
#      ~5e-3 for t_forward_ref's qwen3moe-f16, so 2e-2 would be too tight),
#      one token at a time and in batches of 64, the references recurrent
#      and chunked agreeing to 1e-9;
#   B. llama.cpp's reference outputs for the fixture tiny-qwen35moe.gguf
#      (tests/data/fixtures/qwen35moe; greedy.json: prompt + 32 greedy tokens; long150.json:
#      150 prompt tokens + 16 greedy tokens), teacher-forced, through
#      tests/lib/check_fixture.py: argmax equal at every row, and each row's 20
#      reference logits within 1e-3 * max(1, |ref|), compared by token id -
#      one token at a time and as one batch, on every kernel variant usable
#      here (the list `pocket --help` prints; or those $BATCH_VARIANTS names);
#   C. a model with an MTP layer gives the logits of the same model without
#      it, and pocket info shows the layer.
#   Step A runs with an F32 KV cache (-ctk f32 -ctv f32), then once per
#   cache type (F16, Q8_0) against the reference holding the same cache
#   (ref_forward.py --kv-cache). Step B uses the F32 cache llama.cpp made
#   the fixtures with, and the default F16 cache, which stays within the
#   tolerance too.
# Step 0 validates the Python side first (gguf_py selftest; the numpy
# reference, recurrent and chunked 64/16, against llama.cpp on the fixture).
# Every failure line names its step. Run from the project root; uses $BUILD
# (default build), $PYTHON and $FIXTURES (default tests/data/fixtures/qwen35moe).
# $POCKET_RUN, if set, prefixes every pocket binary (e.g. "qemu-aarch64 -L
# SYSROOT -cpu max" for a cross build: tests/lib/run_aarch64.sh).
# Seeds are chosen so that no router top-k decision on the sequences used is
# close to a tie (smallest top-k probability margin >= 1e-3).
REF_NAME=qwen35_ref FIXTURE=qwen35moe
. tests/lib/ref_lib.sh
TOL_F32=1e-3 TOL_F16=5e-2

start

# the DeltaNet reference token by token (rec) and chunk-parallel (chC:
# chunks of C), the references agreeing to 1e-9
refs() { echo "rec:--deltanet,recurrent"; for c in "$@"; do echo "ch$c:--deltanet,chunked:$c"; done; }
REF_AGREE=1e-9
#        NAME           ARCH      TOL      THREADS IDS   REFS              generator options
ref_case qwen35moe      qwen35moe $TOL_F32 "1 2"   short "$(refs 5 64)"    --seed 37
ref_case qwen35moe-tied qwen35moe $TOL_F32 1       short "$(refs 5)"       --seed 37 --tied
ref_case qwen35moe-f16  qwen35moe $TOL_F16 1       short "$(refs 5)"       --seed 37 --type f16
ref_case qwen35moe-rl   qwen35moe $TOL_F32 1       short "$(refs 3)"       --seed 16 --recurrent-layers 1,0,1,1
ref_case qwen35moe-long qwen35moe $TOL_F32 "1 2"   long  "$(refs 16 64)"   --seed 32
ref_case qwen35         qwen35    $TOL_F32 1       short "$(refs 5)"       --seed 1
ref_case qwen35-long    qwen35    $TOL_F32 1       long  "$(refs 64)"      --seed 1
# KV cache types: pocket and the reference with the same F16 / Q8_0 cache
for KV in f16 q8_0; do
    ref_case qwen35moe-kv-$KV qwen35moe $TOL_F32 "1 2" long "$(refs 64)" --seed 32
done
KV=f32

# the F32 cache llama.cpp used, and the default F16 cache (within the tolerance too)
fixture_step "-ctk f32 -ctv f32" "" f32
fixture_step "" "" f16

# an MTP (nextn) layer is loaded and shown, and does not change plain decoding
step="C:mtp"
echo "== step $step (a model with an MTP layer gives the logits of the same model without it)"
if "$PYTHON" tests/lib/gen_model.py qwen35moe "$TMP/mtp.gguf" --seed 37 --mtp >/dev/null &&
   "$PYTHON" tests/lib/gen_model.py qwen35moe "$TMP/nomtp.gguf" --seed 37 >/dev/null; then
    same_logits "$step" "an MTP layer leaves the logits unchanged" 1,17,299,42 "$TMP/mtp.gguf" "$TMP/nomtp.gguf"
else
    note_fail "$step" "gen_model.py failed"
fi
$RUN "$BUILD/pocket" info "$TMP/mtp.gguf" | grep -q "^mtp  *1 next-token-prediction layer" ||
    note_fail "$step" "pocket info does not show the MTP layer"

finish "pocket matches the numpy reference and llama.cpp"
