#!/bin/sh
# Sequence state (pk_context_truncate, checkpoints, pk_state_save / load):
#  A. on every architecture's test model (the bundled one, the llama.cpp
#     fixtures, gen_model.py's as t_batch.sh), random sequences of decode /
#     checkpoint / truncate / save and load (memory, file, another context)
#     give after every decode the logits of a fresh context fed the same
#     batches, bitwise (tests/lib/tool_state.c says what else it checks),
#     for each KV cache type the model allows (f16 on all; f32; q8_0 where
#     head dims are multiples of 32) and each kernel variant usable here
#     (the list `pocket --help` prints, as t_batch.sh; $BATCH_VARIANTS
#     overrides it). A failure prints its seed and steps.
#  B. refusals: a state loaded into another model's context, another cache
#     type's, a shorter one, cut, flipped, files that are not states; the
#     context unchanged after each (tool_state -refuse).
#  C. `pocket run --prompt-cache FILE` (and --prompt-cache-ro): the second
#     run with the same prompt and more text takes the saved tokens from the
#     file and prints the greedy continuation of a run without it; a foreign
#     or corrupt file is one warning line, processed from scratch.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
T="$BUILD/tests/tool_state"; P="$BUILD/pocket"
RUN=${POCKET_RUN:-}
tmp="$BUILD/tmp/state"; rm -rf "$tmp"; mkdir -p "$tmp"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
. tests/lib/fixtures.sh
Q35=$(fixture_model qwen35moe) && Q3N=$(fixture_model qwen3next) && G4=$(fixture_model gemma4) &&
    GPTOSS=$(fixture_model gpt-oss) && DS2=$(fixture_model deepseek2) ||
    { echo "FAIL: cannot rebuild the llama.cpp fixture models"; exit 1; }
gen() { "$PYTHON" tests/lib/gen_model.py "$@" >/dev/null || { echo "FAIL: gen_model.py $*"; exit 1; }; }
gen mixtral "$tmp/mixtral.gguf" --seed 1
gen mixtral "$tmp/mixtral-seed3.gguf" --seed 3
gen qwen3 "$tmp/qwen3.gguf" --seed 2
gen gpt-oss "$tmp/gptoss-f32.gguf" --seed 7
gen deepseek2 "$tmp/ds2-qlora.gguf" --seed 1 --q-lora 24 --vocab 300
gen qwen2moe "$tmp/qwen2moe.gguf" --seed 1
gen olmoe "$tmp/olmoe.gguf" --seed 1
gen granitemoe "$tmp/granitemoe.gguf" --seed 1 --shared-ff 24
KJV=models/kjv-moe-f16.gguf

. tests/lib/variants.sh
variants=$(kernel_variants) || { echo "$variants"; exit 1; }

# ---- A. random sequences against fresh contexts
# MODEL:TYPES[:FLAGS] - the cache types each model runs with (q8_0 where its
# head dims are multiples of 32, as in t_batch.sh). The gpt-oss fixture's
# MXFP4 experts go through prompt kernels whose rows depend on the batch
# (t_batch.sh): it is cut only where a batch ended (-aligned). The bundled
# model (44 MB) runs shorter sequences.
runs="$KJV:f16,f32,q8_0:-c,48,-runs,2,-steps,24
$Q35:f16,f32,q8_0
$Q3N:f16,f32
$G4:f16,f32
$GPTOSS:f16:-aligned
$tmp/gptoss-f32.gguf:f16,f32,q8_0
$DS2:f16,f32
$tmp/ds2-qlora.gguf:f16
$tmp/mixtral.gguf:f16,f32
$tmp/qwen3.gguf:f16,q8_0
$tmp/qwen2moe.gguf:f16
$tmp/olmoe.gguf:f16,q8_0
$tmp/granitemoe.gguf:f16"
for v in $variants; do
    POCKET_KERNELS=$v; export POCKET_KERNELS
    for line in $runs; do
        m=$(echo "$line" | cut -d: -f1); types=$(echo "$line" | cut -d: -f2)
        flags=$(echo "$line" | cut -d: -f3 | tr , ' ')
        for kv in $(echo "$types" | tr , ' '); do
            # seeds differ per model, type and variant, the same every run
            seed=$(printf '%s' "$m $kv $v" | cksum | cut -d' ' -f1)
            if out=$($RUN "$T" -seed "$seed" -ctk "$kv" -ctv "$kv" $flags "$m" "$tmp" 2>&1); then
                echo "$out" | sed "s/^ok   /ok   [$v] /"
            else
                fail "[$v] $(basename "$m") kv $kv:"; echo "$out" | tail -n 40
            fi
        done
    done
done
# the ring of checkpoints with one slot, and none (DeltaNet: back to 0 only);
# two threads
for k in 1 0; do
    out=$($RUN "$T" -k $k -seed 7 "$Q35" "$tmp" 2>&1) && echo "$out (-k $k)" || { fail "$Q35 -k $k:"; echo "$out" | tail -n 40; }
done
out=$($RUN "$T" -t 2 -seed 9 "$Q3N" "$tmp" 2>&1) && echo "$out (2 threads)" || { fail "$Q3N 2 threads:"; echo "$out" | tail -n 40; }

# ---- B. refusals
unset POCKET_KERNELS
for mo in "$KJV:$Q35" "$Q35:$KJV $Q3N" "$Q3N:$Q35" "$G4:$GPTOSS" "$GPTOSS:$tmp/gptoss-f32.gguf" \
          "$DS2:$tmp/ds2-qlora.gguf" "$tmp/mixtral.gguf:$tmp/mixtral-seed3.gguf $tmp/qwen3.gguf"; do
    m=${mo%%:*}; others=${mo#*:}
    for kv in f16 q8_0; do
        case "$m:$kv" in "$Q3N:q8_0"|"$G4:q8_0"|"$DS2:q8_0"|"$tmp/mixtral.gguf:q8_0") continue ;; esac
        if out=$($RUN "$T" -refuse -ctk $kv -ctv $kv "$m" "$tmp" $others 2>&1); then echo "$out"
        else fail "refusals of $(basename "$m") kv $kv:"; echo "$out" | tail -n 40; fi
    done
done

# ---- C. pocket run --prompt-cache
PC="$tmp/prompt.state"
p1="In the beginning God created the heaven and the earth. And the earth was without form, and void;"
p2="$p1 and darkness was upon the face of the deep. And the Spirit of God moved"
# run OUT ERR ARGS...: pocket run, greedy, 24 tokens
prun() { o=$1; e=$2; shift 2; $RUN "$P" run -m "$KJV" -n 24 --temp 0 -t 1 -c 128 "$@" >"$o" 2>"$e"; }
cached() { sed -n 's/^prompt cache: \([0-9]*\) of [0-9]* prompt tokens from .*/\1/p' "$1"; }
n1=$(printf '%s' "$p1" | wc -c)
prun "$tmp/plain1.txt" "$tmp/plain1.err" -p "$p1" || fail "run without a cache: $(tail -n 2 "$tmp/plain1.err")"
prun "$tmp/plain2.txt" "$tmp/plain2.err" -p "$p2" || fail "run without a cache: $(tail -n 2 "$tmp/plain2.err")"
prun "$tmp/c1.txt" "$tmp/c1.err" -p "$p1" --prompt-cache "$PC" || fail "first run with --prompt-cache: $(tail -n 2 "$tmp/c1.err")"
[ -s "$PC" ] || fail "--prompt-cache: $PC was not written"
[ "$(cached "$tmp/c1.err")" = 0 ] || fail "first run: expected 'prompt cache: 0 of N prompt tokens', got: $(grep 'prompt cache' "$tmp/c1.err")"
cmp -s "$tmp/plain1.txt" "$tmp/c1.txt" || fail "first run with --prompt-cache printed another text than without"
prun "$tmp/c2.txt" "$tmp/c2.err" -p "$p2" --prompt-cache "$PC" || fail "second run with --prompt-cache: $(tail -n 2 "$tmp/c2.err")"
k2=$(cached "$tmp/c2.err")
# the first prompt's tokens from the cache (those at the join may
# tokenize otherwise: up to 2 fewer)
np1=$($RUN "$P" run -m "$KJV" -n 0 --temp 0 -p "$p1" 2>&1 | sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p')
if [ -n "$k2" ] && [ -n "$np1" ] && [ "$k2" -ge $((np1 - 2)) ] && [ "$k2" -le "$np1" ]; then
    echo "ok   run --prompt-cache: the longer prompt took $k2 tokens from the cache (the first prompt had $np1)"
else
    fail "second run: $k2 cached tokens, expected about the first prompt's $np1: $(grep 'prompt cache' "$tmp/c2.err")"
fi
cmp -s "$tmp/plain2.txt" "$tmp/c2.txt" && echo "ok   run --prompt-cache: the same greedy continuation as without the cache" ||
    fail "second run with --prompt-cache printed another text than without: $(tail -c 120 "$tmp/c2.txt") vs $(tail -c 120 "$tmp/plain2.txt")"
# the same prompt again: all but one token from the cache, the same text
prun "$tmp/c3.txt" "$tmp/c3.err" -p "$p2" --prompt-cache "$PC" --prompt-cache-ro || fail "run --prompt-cache-ro: $(tail -n 2 "$tmp/c3.err")"
np2=$($RUN "$P" run -m "$KJV" -n 0 --temp 0 -p "$p2" 2>&1 | sed -n 's/.*prompt \([0-9]*\) tokens.*/\1/p')
[ "$(cached "$tmp/c3.err")" = $((np2 - 1)) ] || fail "the same prompt again: expected $((np2 - 1)) cached tokens: $(grep 'prompt cache' "$tmp/c3.err")"
cmp -s "$tmp/plain2.txt" "$tmp/c3.txt" || fail "--prompt-cache-ro: another text than without the cache"
# -ro does not write: the file keeps the second run's state
cp "$PC" "$tmp/before-ro"
prun "$tmp/c4.txt" "$tmp/c4.err" -p "$p1 Something else entirely." --prompt-cache "$PC" --prompt-cache-ro ||
    fail "run --prompt-cache-ro: $(tail -n 2 "$tmp/c4.err")"
cmp -s "$PC" "$tmp/before-ro" && echo "ok   run --prompt-cache-ro: reads the cache ($(cached "$tmp/c4.err") tokens), leaves the file" ||
    fail "--prompt-cache-ro changed $PC"
# a file of another model, a corrupt one: one warning, from scratch, rewritten
"$P" run -m "$Q35" -n 1 --temp 0 -p "hello" --prompt-cache "$tmp/q35.state" >/dev/null 2>&1 ||
    fail "run --prompt-cache on $Q35"
head -c 100 "$PC" > "$tmp/cut.state"
printf 'not a state at all\n' > "$tmp/text.state"
for bad in q35 cut text; do
    cp "$tmp/$bad.state" "$tmp/bad.state"
    prun "$tmp/b.txt" "$tmp/b.err" -p "$p1" --prompt-cache "$tmp/bad.state" || fail "run with a $bad prompt cache: $(tail -n 2 "$tmp/b.err")"
    warn=$(grep -c "warning" "$tmp/b.err")
    if [ "$warn" = 1 ] && grep "warning" "$tmp/b.err" | grep -q "$tmp/bad.state" && [ "$(cached "$tmp/b.err")" = 0 ] &&
       cmp -s "$tmp/plain1.txt" "$tmp/b.txt" && ! cmp -s "$tmp/bad.state" "$tmp/$bad.state"; then
        echo "ok   run --prompt-cache with a $bad file: $(grep warning "$tmp/b.err")"
    else
        fail "run --prompt-cache with a $bad file: $warn warnings, $(grep 'prompt cache' "$tmp/b.err"), text same: $(cmp -s "$tmp/plain1.txt" "$tmp/b.txt" && echo yes || echo no)"
        sed 's/^/    /' "$tmp/b.err"
    fi
done
# and the rewritten file serves the next run
prun "$tmp/b2.txt" "$tmp/b2.err" -p "$p1" --prompt-cache "$tmp/bad.state" || fail "run after a rewritten cache"
[ "$(cached "$tmp/b2.err")" = $((np1 - 1)) ] || fail "the rewritten cache: $(grep 'prompt cache' "$tmp/b2.err")"
# -ro with a bad file: the warning, and the file left as it was
prun "$tmp/b3.txt" "$tmp/b3.err" -p "$p1" --prompt-cache "$tmp/text.state" --prompt-cache-ro || fail "-ro with a bad file"
printf 'not a state at all\n' | cmp -s - "$tmp/text.state" || fail "--prompt-cache-ro rewrote a bad file"
grep -q warning "$tmp/b3.err" || fail "--prompt-cache-ro with a bad file: no warning"
# a hybrid (DeltaNet) model: back to the checkpoint at the end of the first
# prompt (its text may differ from a run without the cache in the last
# digits: the chunked delta rule sees other batches)
"$P" run -m "$Q35" -n 4 --temp 0 -t 1 -p "$p1" --prompt-cache "$tmp/q35b.state" >/dev/null 2>"$tmp/h1.err" &&
    "$P" run -m "$Q35" -n 4 --temp 0 -t 1 -p "$p2" --prompt-cache "$tmp/q35b.state" >/dev/null 2>"$tmp/h2.err" ||
    fail "run --prompt-cache on $Q35: $(tail -n 2 "$tmp/h2.err")"
hn1=$(sed -n 's/^prompt cache: 0 of \([0-9]*\) prompt tokens.*/\1/p' "$tmp/h1.err"); hk2=$(cached "$tmp/h2.err")
if [ -n "$hn1" ] && [ -n "$hk2" ] && [ "$hk2" -ge $((hn1 - 1)) ] && [ "$hk2" -le "$hn1" ]; then
    echo "ok   run --prompt-cache, hybrid model: $hk2 tokens from the cache (the first prompt had $hn1: a checkpoint at its end)"
else
    fail "run --prompt-cache, hybrid model: $(grep 'prompt cache' "$tmp/h1.err" "$tmp/h2.err")"
fi
# a directory that cannot be written: an error naming it, before any work
"$P" run -m "$KJV" -n 1 -p x --prompt-cache "$tmp/no/such/dir/x.state" >/dev/null 2>"$tmp/e.err" &&
    fail "--prompt-cache in a missing directory succeeded"
grep -q "$tmp/no/such/dir" "$tmp/e.err" || fail "--prompt-cache in a missing directory: $(cat "$tmp/e.err")"

[ $fails -eq 0 ] || { echo "t_state: $fails failed"; exit 1; }
echo "variants tested:" $variants
echo "t_state: all passed"
