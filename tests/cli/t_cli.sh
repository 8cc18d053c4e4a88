#!/bin/sh
# The CLI on bad input: every case must exit with status 1 (not a crash, not
# success) and print exactly one line, "pocket: error: ...", naming the
# file/field/value at fault. Also: --help for each command, the happy
# paths of info and run on the bundled model, and the block plan info prints.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
tmp="$BUILD/tmp/cli"; rm -rf "$tmp"; mkdir -p "$tmp"
fails=0; n=0
# expect_error NAME SUBSTRING CMD... : exit 1, one stderr line with SUBSTRING
expect_error() {
    name=$1; want=$2; shift 2
    n=$((n + 1))
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q "^pocket: error: " "$tmp/err" ||
       ! grep -qF -- "$want" "$tmp/err"; then
        echo "FAIL $name: exit $rc, stderr:"; sed 's/^/    /' "$tmp/err"; fails=$((fails + 1))
    else
        echo "ok   $name: $(cat "$tmp/err")"
    fi
}
expect_ok() {
    name=$1; shift
    n=$((n + 1))
    if "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; then echo "ok   $name"
    else echo "FAIL $name: exit $?"; sed 's/^/    /' "$tmp/err"; fails=$((fails + 1)); fi
}

M=models/kjv-moe-f16.gguf
expect_ok "pocket --help" "$P" --help
for c in run info perplexity; do expect_ok "pocket $c --help" "$P" $c --help; done
expect_ok "pocket info" "$P" info "$M"
grep -q "8.02 M active" "$tmp/out" || { echo "FAIL info: active parameters not shown"; fails=$((fails + 1)); }
# the block plan: one group per distinct layer, its layers run-length grouped
# (and elided when periodic)
expect_blocks() {
    n=$((n + 1))
    got=$(grep '^blocks ' "$tmp/out")
    if [ "$got" = "blocks          $1" ]; then echo "ok   info block plan: $1"
    else echo "FAIL info block plan: got '$got', expected '$1'"; fails=$((fails + 1)); fi
}
expect_blocks "layers 0-5: attention(4 q / 2 kv heads, head 64, rope 64 dims, q/k norm) + moe(top-4 of 16, ff 256)"
"$PYTHON" tests/lib/gen_model.py qwen35moe "$tmp/hybrid.gguf" --layers 16 --interval 4 >/dev/null
expect_ok "pocket info (hybrid)" "$P" info "$tmp/hybrid.gguf"
expect_blocks "layers 0-2, 4-6, ..., 12-14: deltanet(2 k / 4 v heads, head 16, conv 4) + moe(top-2 of 8, ff 32, shared ff 32); layers 3, 7, ..., 15: attention(gated, 4 q / 2 kv heads, head 32, rope 8 dims, q/k norm) + moe(top-2 of 8, ff 32, shared ff 32)"
"$PYTHON" tests/lib/gen_model.py qwen35 "$tmp/hybrid.gguf" --layers 5 --recurrent-layers 1,0,0,1,1 >/dev/null
expect_ok "pocket info (hybrid, listed layers)" "$P" info "$tmp/hybrid.gguf"
expect_blocks "layers 0, 3-4: deltanet(2 k / 4 v heads, head 16, conv 4) + dense(ff 96); layers 1-2: attention(gated, 4 q / 2 kv heads, head 32, rope 8 dims, q/k norm) + dense(ff 96)"
# gpt-oss: sliding-window layers (pattern 3: two of every three), sinks,
# biases, YaRN, the clamped experts
"$PYTHON" tests/lib/gen_model.py gpt-oss "$tmp/gptoss.gguf" --layers 6 --swa-pattern 3 >/dev/null
expect_ok "pocket info (gpt-oss)" "$P" info "$tmp/gptoss.gguf"
expect_blocks "layers 0-1, 3-4: attention(4 q / 2 kv heads, head 32, rope 32 dims yarn x8, window 4, sinks, biases) + moe(top-3 of 8, ff 32, softmax of top-k, biases, swiglu-oai limit 7); layers 2, 5: attention(4 q / 2 kv heads, head 32, rope 32 dims yarn x8, sinks, biases) + moe(top-3 of 8, ff 32, softmax of top-k, biases, swiglu-oai limit 7)"
# latent attention with a dense first layer; the q LoRA
. tests/lib/fixtures.sh
DS2=$(fixture_model deepseek2) || { echo "FAIL: cannot rebuild the deepseek2 fixture"; exit 1; }
expect_ok "pocket info (deepseek2 fixture)" "$P" info "$DS2"
expect_blocks "layers 0: mla(4 heads, q/k 16 + rope 8, latent 32, v 20) + dense(ff 96); layers 1-3: mla(4 heads, q/k 16 + rope 8, latent 32, v 20) + moe(top-3 of 8, ff 24, sigmoid, selection bias, weights x 2.5, shared ff 48)"
"$PYTHON" tests/lib/gen_model.py deepseek2 "$tmp/ds2.gguf" --q-lora 24 --dense-lead 0 --gating softmax --no-bias --w-scale 1 >/dev/null
expect_ok "pocket info (deepseek2, q LoRA)" "$P" info "$tmp/ds2.gguf"
expect_blocks "layers 0-2: mla(4 heads, q/k 16 + rope 8, latent 32, v 20, q lora 24) + moe(top-3 of 8, ff 24, shared ff 48)"
expect_ok "pocket run (default model)" "$P" run -p "In the beginning" -n 8 --seed 1 -t 1

expect_error "unknown command" "frobnicate" "$P" frobnicate
expect_error "unknown kernel variant" "POCKET_KERNELS=sse9" env POCKET_KERNELS=sse9 "$P" run -p x -n 1
expect_error "unknown option" "--bogus" "$P" run -p x --bogus
expect_error "bad thread count" "-t" "$P" run -p x -t abc
expect_error "negative temperature" "--temp" "$P" run -p x --temp -1
expect_error "no prompt" "no prompt" "$P" run -m "$M"
expect_error "missing model" "$tmp/nope.gguf" "$P" run -m "$tmp/nope.gguf" -p x
expect_error "directory as model" "not a regular file" "$P" info "$tmp"
echo "hello, world" >"$tmp/text.gguf"
expect_error "not a GGUF file" "magic" "$P" info "$tmp/text.gguf"
head -c 100000 "$M" >"$tmp/trunc.gguf"
expect_error "truncated model" "$tmp/trunc.gguf" "$P" info "$tmp/trunc.gguf"
head -c 30 "$M" >"$tmp/short.gguf"
expect_error "truncated header" "short.gguf" "$P" info "$tmp/short.gguf"
expect_error "prompt longer than the context" "does not fit the context" "$P" run -m "$M" -c 4 -p "And God said unto Moses, I AM THAT I AM"
expect_error "missing perplexity text" "$tmp/none.txt" "$P" perplexity -m "$M" -f "$tmp/none.txt"
printf 'And God' >"$tmp/short.txt"
expect_error "text shorter than a window" "fewer than one window" "$P" perplexity -m "$M" -f "$tmp/short.txt" -c 64

# well-formed files that are wrong as models
"$PYTHON" tests/lib/gen_model.py qwen3moe "$tmp/good.gguf" --seed 1 >/dev/null
"$PYTHON" tests/lib/mkbad.py "$tmp/good.gguf" "$tmp/bad" >"$tmp/cases" || { echo "FAIL mkbad.py"; exit 1; }
expect_ok "generated model loads" "$P" info "$tmp/good.gguf"
while IFS="$(printf '\t')" read -r file want; do
    expect_error "bad model $file" "$want" "$P" info "$tmp/bad/$file"
done <"$tmp/cases"

echo "$((n - fails)) of $n CLI checks passed"
[ $fails -eq 0 ]
