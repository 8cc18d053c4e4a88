#!/bin/sh
# The bundled model against llama.cpp's reference run
# (tests/data/models/kjv-moe-f16.greedy.json, a copy of ../shared/models'):
# pocket's argmax must equal llama.cpp's greedy token at all 32 steps and
# the reference top-5 logits must agree within 1e-3 relative - with the
# selected kernels and with the scalar reference kernels.
# Then `pocket run --temp 0` must print the same continuation.
# $POCKET_RUN, if set, prefixes every pocket binary (e.g. "qemu-aarch64 -L
# SYSROOT -cpu max" for a cross build: tests/lib/run_aarch64.sh).
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
REF=tests/data/models/kjv-moe-f16.greedy.json
MODEL=models/kjv-moe-f16.gguf
RUN=${POCKET_RUN:-}
tmp="$BUILD/tmp/reference_greedy"; mkdir -p "$tmp"
. tests/lib/fixtures.sh
greedy_vs_llama "$MODEL" "$REF" "$tmp"
# the CLI, end to end: tokenizer + greedy sampling + detokenizer
want=$("$PYTHON" -c "import json,sys; d = json.load(open('$REF'));
sys.stdout.buffer.write(d['prompt'].encode() + bytes(d['text_bytes']))")
got=$($RUN "$BUILD/pocket" run -m "$MODEL" -p "And God said" -n 32 --temp 0 -t 2 2>"$tmp/run.err")
if [ "$got" != "$want" ]; then
    echo "FAIL: pocket run --temp 0 printed:"; echo "$got"; echo "expected:"; echo "$want"; exit 1
fi
echo "pocket run --temp 0 reproduces: $got"
