#!/bin/sh
# Batched prompt processing must give the logits of one-token-at-a-time
# decoding: the batch changes how often weights are read, not the maths. Each
# row is computed by the same kernels in the same order, so the outputs must
# be bitwise identical, for every architecture family, thread count and a
# batch size that does not divide the prompt.
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
T="$BUILD/tests/tool_logits"
tmp="$BUILD/tmp/batch"; rm -rf "$tmp"; mkdir -p "$tmp"
ids=$("$PYTHON" -c "print(','.join(str((i * 37 + 11) % 290) for i in range(45)))")
"$PYTHON" tests/gen_model.py mixtral "$tmp/mixtral.gguf" --seed 1 >/dev/null
"$PYTHON" tests/gen_model.py qwen3 "$tmp/qwen3.gguf" --seed 2 >/dev/null
for m in models/kjv-moe-f16.gguf ../shared/fixtures/qwen35moe/tiny-qwen35moe.gguf "$tmp/mixtral.gguf" "$tmp/qwen3.gguf"; do
    "$T" -t 1 -b 1 "$m" "$tmp/one.f32" "$ids"
    for cfg in "-t 1 -b 16" "-t 2 -b 64" "-t 2 -b 7"; do
        "$T" $cfg "$m" "$tmp/batch.f32" "$ids"
        if ! cmp -s "$tmp/one.f32" "$tmp/batch.f32"; then
            echo "FAIL: $m: logits with $cfg differ from one token at a time"; exit 1
        fi
    done
    echo "ok   $(basename "$m"): 45 tokens in batches of 16, 64 and 7 (1 and 2 threads) = one at a time, bitwise"
done
