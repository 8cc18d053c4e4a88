#!/bin/sh
# A memory budget changes where the routed experts' bytes come from (the
# expert cache, reading the file on a miss), not the maths: logits under an
# expert cache of 1, 3 and n_expert - 1 slots per layer must equal the
# logits of the whole mapped file, bitwise, for every MoE family, kernel
# variant usable on this CPU (or $BATCH_VARIANTS), thread count, and for
# prompt batches (experts run in rounds of at most the slots) as for one
# token at a time. Then the CLI: the plan `pocket info --mem` prints, a
# budget too small for the resident part (pocket run: a one-line error), and a bad size.
# $POCKET_RUN, if set, prefixes every binary (qemu for a cross build).
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
T="$BUILD/tests/tool_logits"
RUN=${POCKET_RUN:-}
tmp="$BUILD/tmp/xcache"; rm -rf "$tmp"; mkdir -p "$tmp"
# the llama.cpp fixture models (tests/data/fixtures, rebuilt into $BUILD/fixtures)
. tests/lib/fixtures.sh
Q35=$(fixture_model qwen35moe); Q3N=$(fixture_model qwen3next); GPTOSS=$(fixture_model gpt-oss)
"$PYTHON" tests/lib/gen_model.py mixtral "$tmp/mixtral.gguf" --seed 3 >/dev/null
"$PYTHON" tests/lib/gen_model.py qwen3next "$tmp/q3n-merged.gguf" --seed 4 --merged-gate-up >/dev/null
$RUN "$BUILD/pocket" quantize models/kjv-moe-f16.gguf "$tmp/q4km.gguf" Q4_K_M >/dev/null 2>&1 ||
    { echo "FAIL: pocket quantize Q4_K_M"; exit 1; }
. tests/lib/variants.sh
variants=$(kernel_variants) || { echo "$variants"; exit 1; }
ids=$("$PYTHON" -c "print(','.join(str((i * 37 + 11) % 250) for i in range(40)))")
n_exp() { $RUN "$BUILD/pocket" info "$1" | sed -n 's/.*MoE: \([0-9]*\) experts.*/\1/p'; }
for v in $variants; do
    POCKET_KERNELS=$v; export POCKET_KERNELS
    for m in models/kjv-moe-f16.gguf "$tmp/q4km.gguf" "$Q35" "$Q3N" "$tmp/q3n-merged.gguf" "$tmp/mixtral.gguf" \
             "$GPTOSS"; do
        E=$(n_exp "$m")
        [ -n "$E" ] || { echo "FAIL: $m: no expert count in pocket info"; exit 1; }
        for cfg in "-t 1 -b 1" "-t 2 -b 16" "-t 2 -b 40"; do
            $RUN "$T" $cfg "$m" "$tmp/mapped.f32" "$ids"
            for s in 1 3 $((E - 1)); do
                $RUN "$T" $cfg -s $s "$m" "$tmp/cached.f32" "$ids"
                cmp -s "$tmp/mapped.f32" "$tmp/cached.f32" ||
                    { echo "FAIL: [$v] $m: logits with $cfg and $s cached experts per layer differ from the mapped file"; exit 1; }
            done
        done
        echo "ok   [$v] $(basename "$m"): 40 tokens (batches of 1, 16, 40; 1 and 2 threads) with 1, 3, $((E - 1)) of $E experts cached = mapped, bitwise"
    done
done
# the plan, and bad budgets
M=models/kjv-moe-f16.gguf
out=$($RUN "$BUILD/pocket" info "$M" --mem 80M)
echo "$out" | grep -q "memory plan     budget 80.0 MiB" || { echo "FAIL: pocket info --mem 80M prints no budget"; echo "$out"; exit 1; }
echo "$out" | grep -q "cache of [0-9]* of 16 experts per layer" || { echo "FAIL: pocket info --mem 80M shows no expert cache"; echo "$out"; exit 1; }
out=$($RUN "$BUILD/pocket" info "$M" --mem 1G)
echo "$out" | grep -q "all mapped (16 per layer)" || { echo "FAIL: pocket info --mem 1G should map every expert"; echo "$out"; exit 1; }
# (pocket run refuses such a budget; pocket info reports it and lists builds that fit: t_info_fit.sh)
if out=$($RUN "$BUILD/pocket" run -m "$M" -p "And" -n 1 --mem 20M 2>&1); then echo "FAIL: --mem 20M accepted"; exit 1; fi
echo "$out" | grep -q "memory budget 20.0 MiB is too small: resident weights" || { echo "FAIL: --mem 20M: $out"; exit 1; }
[ "$(echo "$out" | wc -l)" -eq 1 ] || { echo "FAIL: --mem 20M: not one line: $out"; exit 1; }
for bad in 6X -1G abc 1e30G; do
    if out=$($RUN "$BUILD/pocket" info "$M" --mem "$bad" 2>&1); then echo "FAIL: --mem $bad accepted"; exit 1; fi
    echo "$out" | grep -q "is not a size" || { echo "FAIL: --mem $bad: $out"; exit 1; }
done
# a run under a budget says what the cache did
$RUN "$BUILD/pocket" run -m "$M" -p "And God said" -n 8 --temp 0 --expert-slots 2 >/dev/null 2>"$tmp/run.err" ||
    { echo "FAIL: pocket run --expert-slots 2"; cat "$tmp/run.err"; exit 1; }
grep -q "expert cache: [0-9]* lookups, hit rate" "$tmp/run.err" || { echo "FAIL: no expert cache line in the run summary"; cat "$tmp/run.err"; exit 1; }
# pocket bench under a budget: the cache's line, and the device's busy share
# where the kernel counts for the file's block device (not on tmpfs or an
# overlay: then no line)
$RUN "$BUILD/pocket" bench -m "$M" -p 0 -n 4 -r 1 -t 1 --no-bw --expert-slots 2 >"$tmp/bench.out" 2>&1 ||
    { echo "FAIL: pocket bench --expert-slots 2"; cat "$tmp/bench.out"; exit 1; }
grep -q "experts: cache of 2 of 16 per layer" "$tmp/bench.out" || { echo "FAIL: no experts line in pocket bench"; cat "$tmp/bench.out"; exit 1; }
stat_file=$("$PYTHON" -c "import os,sys; d=os.stat(sys.argv[1]).st_dev; print('/sys/dev/block/%d:%d/stat' % (os.major(d), os.minor(d)))" "$M")
dev=$(sed -n 's/.*device: busy (a read in flight) \([0-9.]*\)% .*, \([0-9.]*\) MB per token read from it.*/\1 \2/p' "$tmp/bench.out")
if [ -r "$stat_file" ]; then
    [ -n "$dev" ] || { echo "FAIL: $stat_file exists, but pocket bench printed no device line"; cat "$tmp/bench.out"; exit 1; }
    echo "$dev" | awk '{ exit !($1 > 0 && $1 <= 100.5 && $2 > 0) }' ||
        { echo "FAIL: device line out of range: $dev"; cat "$tmp/bench.out"; exit 1; }
    echo "ok   pocket bench --expert-slots 2: the device ($stat_file) busy $(echo "$dev" | cut -d' ' -f1)% of the draws, reads counted"
else
    [ -z "$dev" ] || { echo "FAIL: no $stat_file, yet a device line: $dev"; exit 1; }
    echo "ok   pocket bench --expert-slots 2: the file's device has no block counters ($stat_file), no device line"
fi
# --ab: each child runs under the same budget and reports its cache
$RUN "$BUILD/pocket" bench -m "$M" -p 0 -n 4 -r 1 -t 1 --no-bw --expert-slots 2 --ab "-t 1" "-t 2" >"$tmp/ab.out" 2>&1 ||
    { echo "FAIL: pocket bench --expert-slots 2 --ab"; cat "$tmp/ab.out"; exit 1; }
for k in A B; do
    grep -q "^$k   experts: cache of 2 of 16 per layer" "$tmp/ab.out" ||
        { echo "FAIL: pocket bench --ab under a budget: no experts line for $k (did the child run without it?)"; cat "$tmp/ab.out"; exit 1; }
done
echo "ok   pocket bench --expert-slots 2 --ab: both configurations ran under the budget and report the cache"
echo "ok   pocket info --mem plans (80M: cache, 1G: all mapped), --mem 20M (run) and malformed sizes refused in one line, run summary shows the cache"
