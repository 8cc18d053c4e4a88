#!/bin/sh
# Batched prompt processing must give the logits of one-token-at-a-time
# decoding: the batch changes how often weights are read, not the maths.
# That holds for every row's logits (pk_decode_all) and for the last row's
# alone (pk_decode: the last layer's FFN computed for that row only). Each
# row is computed by the same kernels in the same order, so the outputs must
# be bitwise identical, for every architecture family, thread count and a
# batch size that does not divide the prompt, and KV cache type (F16, the
# default, on every model; F32 and Q8_0 on some: Q8_0 needs head dims that
# are multiples of 32) - except the Gated DeltaNet's chunked delta rule
# (prompt batches of 8+ tokens), equal up to rounding.
# Run once per kernel variant usable on this CPU (the list `pocket --help`
# prints), each forced with POCKET_KERNELS; $BATCH_VARIANTS, if set, names
# the variants to run instead (each must be usable: tests/lib/run_aarch64.sh
# gives each emulated CPU the variants the smaller CPUs lack).
# $POCKET_RUN, if set, prefixes every pocket binary (e.g. "qemu-aarch64 -L
# SYSROOT -cpu max" for a cross build: tests/lib/run_aarch64.sh).
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
T="$BUILD/tests/tool_logits"
RUN=${POCKET_RUN:-}
tmp="$BUILD/tmp/batch"; rm -rf "$tmp"; mkdir -p "$tmp"
# the llama.cpp fixture models (tests/data/fixtures, rebuilt into $BUILD/fixtures)
. tests/lib/fixtures.sh
Q35=$(fixture_model qwen35moe); Q3N=$(fixture_model qwen3next); G4=$(fixture_model gemma4)
GPTOSS=$(fixture_model gpt-oss); DS2=$(fixture_model deepseek2)
"$PYTHON" tests/lib/gen_model.py mixtral "$tmp/mixtral.gguf" --seed 1 >/dev/null
"$PYTHON" tests/lib/gen_model.py qwen3 "$tmp/qwen3.gguf" --seed 2 >/dev/null
# gpt-oss: sliding windows of 4 (45 tokens cross them), sinks, biases, YaRN
"$PYTHON" tests/lib/gen_model.py gpt-oss "$tmp/gptoss-f32.gguf" --seed 7 >/dev/null
cp "$GPTOSS" "$tmp/gptoss.gguf"
"$PYTHON" tests/lib/gen_model.py gpt-oss "$tmp/gptoss-w300.gguf" --seed 8 --swa-window 300 >/dev/null
"$PYTHON" tests/lib/gen_model.py deepseek2 "$tmp/ds2-qlora.gguf" --seed 1 --q-lora 24 --vocab 300 >/dev/null
"$PYTHON" tests/lib/gen_model.py qwen2moe "$tmp/qwen2moe.gguf" --seed 1 >/dev/null
"$PYTHON" tests/lib/gen_model.py olmoe "$tmp/olmoe.gguf" --seed 1 >/dev/null
"$PYTHON" tests/lib/gen_model.py granitemoe "$tmp/granitemoe.gguf" --seed 1 --shared-ff 24 >/dev/null
$RUN "$BUILD/pocket" quantize models/kjv-moe-f16.gguf "$tmp/q4km.gguf" Q4_K_M >/dev/null 2>&1 ||
    { echo "FAIL: pocket quantize Q4_K_M"; exit 1; }
$RUN "$BUILD/pocket" quantize models/kjv-moe-f16.gguf "$tmp/mxfp4.gguf" Q8_0 --tensor-type "_exps=MXFP4" \
    >/dev/null 2>&1 || { echo "FAIL: pocket quantize Q8_0 with MXFP4 experts"; exit 1; }
. tests/lib/variants.sh
variants=$(kernel_variants) || { echo "$variants"; exit 1; }
run_variant() {
ids=$("$PYTHON" -c "print(','.join(str((i * 37 + 11) % 290) for i in range(45)))")
for mkv in models/kjv-moe-f16.gguf:f16 models/kjv-moe-f16.gguf:f32 models/kjv-moe-f16.gguf:q8_0 \
           "$Q35:f16" "$Q35:q8_0" "$Q3N:f16" "$G4:f16" "$G4:f32" "$tmp/mixtral.gguf:f16" "$tmp/mixtral.gguf:f32" "$tmp/qwen3.gguf:f16" "$tmp/qwen3.gguf:q8_0" \
           "$tmp/gptoss-f32.gguf:f16" "$tmp/gptoss-f32.gguf:f32" "$tmp/gptoss-f32.gguf:q8_0" \
           "$DS2:f16" "$DS2:f32" \
           "$tmp/ds2-qlora.gguf:f16" \
           "$tmp/qwen2moe.gguf:f16" "$tmp/olmoe.gguf:f16" "$tmp/olmoe.gguf:q8_0" "$tmp/granitemoe.gguf:f16"; do
    m=${mkv%:*}; kv=${mkv##*:}
    $RUN "$T" -t 1 -b 1 -ctk $kv -ctv $kv "$m" "$tmp/one.f32" "$ids"
    IFS=,
    for cfg in $batch_cfgs; do
        IFS=$ifs0
        $RUN "$T" $cfg -ctk $kv -ctv $kv "$m" "$tmp/batch.f32" "$ids"
        if cmp -s "$tmp/one.f32" "$tmp/batch.f32"; then continue; fi
        # Gated DeltaNet prompt batches (>= 8 tokens) use the chunked form of
        # the delta rule: equal to the recurrence up to float rounding
        case "$m:$cfg" in
        *qwen35*:*-b\ 16|*qwen35*:*-b\ 64|*qwen3next*:*-b\ 16|*qwen3next*:*-b\ 64)
            "$PYTHON" - "$tmp/one.f32" "$tmp/batch.f32" "$cfg" <<'PY' || exit 1
import sys
import numpy as np
a, b = (np.fromfile(f, dtype="<f4").reshape(45, -1) for f in sys.argv[1:3])
d = float(np.abs(a - b).max())
print(f"     chunked delta rule ({sys.argv[3]}): max |diff| {d:.2e} vs one token at a time")
sys.exit(0 if d < 1e-4 * max(1.0, float(np.abs(a).max())) and (a.argmax(1) == b.argmax(1)).all() else 1)
PY
            ;;
        *) echo "FAIL: $m: logits with $cfg differ from one token at a time"; exit 1 ;;
        esac
    done
    # The last token's logits alone (pk_decode): the last layer's FFN for
    # that row only, and none in the batches before the last (-b 7)
    IFS=,
    for cfg in $last_cfgs; do
        IFS=$ifs0
        $RUN "$T" -last $cfg -ctk $kv -ctv $kv "$m" "$tmp/last.f32" "$ids"
        tail -c "$(wc -c < "$tmp/last.f32")" "$tmp/one.f32" > "$tmp/one_last.f32"
        [ -s "$tmp/last.f32" ] && cmp -s "$tmp/one_last.f32" "$tmp/last.f32" && continue
        case "$m:$cfg" in
        *qwen35*:*-b\ 64|*qwen3next*:*-b\ 64)
            "$PYTHON" - "$tmp/one_last.f32" "$tmp/last.f32" "$cfg" <<'PY' || exit 1
import sys
import numpy as np
a, b = (np.fromfile(f, dtype="<f4") for f in sys.argv[1:3])
d = float(np.abs(a - b).max()) if a.shape == b.shape else float("inf")
print(f"     last token only, chunked delta rule ({sys.argv[3]}): max |diff| {d:.2e} vs one token at a time")
sys.exit(0 if d < 1e-4 * max(1.0, float(np.abs(a).max())) and a.argmax() == b.argmax() else 1)
PY
            ;;
        *) echo "FAIL: $m: the last token's logits (pk_decode) with $cfg differ from one token at a time"; exit 1 ;;
        esac
    done
    IFS=$ifs0
    echo "ok   [$POCKET_KERNELS] $(basename "$m") (kv cache $kv): 45 tokens in batches ($batch_cfgs) = one at a time (bitwise, or within 1e-4 for chunked DeltaNet); the last token's alone likewise ($last_cfgs)"
done
# A prompt longer than a block of attention's online softmax (ATT_BLOCK,
# 1024 positions, engine/kinds/attention.c): 2100 tokens cross two block
# boundaries, in batches that do and do not line up with them; under a
# 300-token sliding window (gpt-oss, with sinks) the rows skip the blocks
# and positions before their window. Bitwise as above. Run on one variant
# ($long_v: the block walk and the windows are the engine's, the same for
# every variant, and each variant's att_kq / att_pv are checked against the
# reference by test_kernels): 2100 one-token passes take minutes on the
# scalar reference and under an emulator.
if [ "$POCKET_KERNELS" = "$long_v" ]; then
ids=$("$PYTHON" -c "print(','.join(str((i * 37 + 11) % 290) for i in range(2100)))")
for mkv in models/kjv-moe-f16.gguf:f16 models/kjv-moe-f16.gguf:f32 models/kjv-moe-f16.gguf:q8_0 \
           "$tmp/gptoss-w300.gguf:f16" "$tmp/gptoss-w300.gguf:f32" "$tmp/gptoss-w300.gguf:q8_0"; do
    m=${mkv%:*}; kv=${mkv##*:}
    $RUN "$T" -t 1 -b 1 -ctk $kv -ctv $kv "$m" "$tmp/one.f32" "$ids"
    for cfg in "-t 2 -b 512" "-t 2 -b 300"; do
        $RUN "$T" $cfg -ctk $kv -ctv $kv "$m" "$tmp/batch.f32" "$ids"
        cmp -s "$tmp/one.f32" "$tmp/batch.f32" ||
            { echo "FAIL: $m: 2100 tokens' logits with $cfg differ from one token at a time"; exit 1; }
    done
    echo "ok   [$POCKET_KERNELS] $(basename "$m") (kv cache $kv): 2100 tokens (3 attention blocks) in batches of 512 and 300 = one at a time (bitwise)"
done
fi
# Quantized weights: prompt batches go through the multi-token (gemm)
# kernels, whose float summation order differs from gemv's, so batched and
# one-at-a-time logits agree to float tolerance rather than bitwise (the same
# size of difference as between the AVX2 and AVX-512 gemv kernels). A
# rounding difference can also flip a near-tie in a router's top-k, and
# that token's logits then differ by more (on the Q4_K_M model, 6-7% of the
# largest logit for one token, with any summation order, the reference's
# included; avx2, avxvnni and avx512 each have 2-4 such tokens at 1-7%,
# the rest at 0.1-0.6%): so the bound is per token - the median within
# 0.5% of the largest logit, at least 90 of the 100 within 1%, every token
# within 15%, the argmax the same on at least 95.
for q in "q4km:Q4_K_M kjv" "mxfp4:Q8_0+MXFP4 kjv" "gptoss:tiny-gpt-oss (MXFP4 experts)"; do
    ids=$("$PYTHON" -c "print(','.join(str((i * 37 + 11) % 4000) for i in range(100)))")
    $RUN "$T" -t 2 -b 1 "$tmp/${q%%:*}.gguf" "$tmp/one.f32" "$ids"
    $RUN "$T" -t 2 -b 64 "$tmp/${q%%:*}.gguf" "$tmp/batch.f32" "$ids"
    "$PYTHON" - "$tmp/one.f32" "$tmp/batch.f32" "${q#*:}" <<'PY'
import sys
import numpy as np
a, b = (np.fromfile(f, dtype="<f4").reshape(-1, 4096) for f in sys.argv[1:3])
per = np.abs(a - b).max(1) / np.abs(a).max()     # per token, of the largest logit
d, med, within = float(per.max()), float(np.median(per)), int((per < 0.01).sum())
agree = (a.argmax(1) == b.argmax(1)).mean()
ok = med < 0.005 and within >= 90 and d < 0.15 and agree >= 0.95
print(f"{'ok  ' if ok else 'FAIL'} [{__import__('os').environ['POCKET_KERNELS']}] {sys.argv[3]}: 100 tokens batched vs one at a time: "
      f"median |diff| {100 * med:.2f}% of max |logit|, {within} within 1%, max {100 * d:.2f}%, argmax agree {100 * agree:.0f}%")
sys.exit(0 if ok else 1)
PY
done
}
# The batchings (comma-separated tool_logits options): natively 1 and 2
# threads, batches of 16, 64 and 7; under an emulator ($POCKET_RUN) two,
# 2 threads in batches of 64 and 7 (the batch walk is the engine's, the same
# on every CPU and checked natively; what an emulated CPU changes is its
# kernels, which both exercise on every model and cache type): the three
# emulated CPUs' runs were ~20 of the CI's minutes.
ifs0=$IFS
if [ -n "$RUN" ]; then batch_cfgs="-t 2 -b 64,-t 2 -b 7"; last_cfgs="-t 2 -b 7"
else batch_cfgs="-t 1 -b 16,-t 2 -b 64,-t 2 -b 7"; last_cfgs="-t 1 -b 64,-t 2 -b 7"; fi
long_v=""   # the 2100-token check's variant: the last listed, natively only
[ -n "$RUN" ] || for v in $variants; do long_v=$v; done
for v in $variants; do
    POCKET_KERNELS=$v; export POCKET_KERNELS
    run_variant
done
echo "variants tested:" $variants "(2100 tokens: ${long_v:-none, emulated})"
