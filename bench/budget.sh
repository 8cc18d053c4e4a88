#!/bin/sh
# Decode speed on a "device" with less memory than the model file: pocket
# under a memory budget (--mem) against llama.cpp-family peers (mmap, page
# cache), in the same machine state, draws interleaved.
#
#   sh bench/budget.sh MODEL LEAVE MEM [PEER/llama-bench ...]
#   e.g. sh bench/budget.sh pocket-35b-40L-Q2_K.gguf 8G 6G ~/llama.cpp/build/bin/llama-bench
#
# LEAVE: memory left available to everything (a balloon, bench/balloon.c,
# holds the rest of RAM, locked); MEM: pocket's --mem. Before every draw the
# file is dropped from the page cache (posix_fadvise DONTNEED, and
# /proc/sys/vm/drop_caches as root). Each draw is one process: pocket bench
# -p 0 -n N -r 1 (one untimed warm-up decode of N tokens, then N timed), or
# llama-bench -p 0 -n N -r 1 (also with its warm-up). Env: N (16), R (draws,
# 2), T (threads, 2), BUILD (build), POCKET_KERNELS is passed through.
# For pocket each draw also prints its peak resident memory: RssAnon of the
# process plus the file's pages in the page cache (fincore), sampled every
# 0.2 s - what the budget bounds - and pocket's storage probe and budget
# ceiling (RAM + storage time per token, and the overlapped bound), and
# the share of the draw the device was busy (its kernel counters); both
# probes measured again after each draw (--bw-refresh: a virtual disk's
# rate drifts from minute to minute, a cached figure would not describe
# the draw; pocket frees the model before probing, within the budget). Prints
# every draw, then mean and sd per engine. Not a test.
set -eu
[ $# -ge 3 ] || { echo "usage: sh bench/budget.sh MODEL LEAVE MEM [PEER/llama-bench ...]" >&2; exit 2; }
MODEL=$1; LEAVE=$2; MEM=$3; shift 3
N=${N:-16}; R=${R:-2}; T=${T:-2}; BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
[ -x "$BUILD/pocket" ] || { echo "budget.sh: $BUILD/pocket not built (make)" >&2; exit 1; }
[ -x "$BUILD/balloon" ] || cc -O2 bench/balloon.c -o "$BUILD/balloon"
out=$(mktemp -d)
"$BUILD/balloon" --leave "$LEAVE" >"$out/balloon.log" 2>&1 &
bpid=$!
trap 'kill $bpid 2>/dev/null; rm -rf "$out"' EXIT INT TERM
while ! grep -q holding "$out/balloon.log" 2>/dev/null; do
    kill -0 $bpid 2>/dev/null || { cat "$out/balloon.log"; exit 1; }
    sleep 1
done
cat "$out/balloon.log"
drop() {
    "$PYTHON" -c "import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)" "$MODEL"
    [ "$(id -u)" = 0 ] && { sync; echo 1 > /proc/sys/vm/drop_caches; } || true
}
echo "model $MODEL, memory left $LEAVE, pocket --mem $MEM, tg$N, $T threads, $R draws interleaved"
for r in $(seq 1 "$R"); do
    drop
    "$BUILD/pocket" bench -m "$MODEL" -p 0 -n "$N" -r 1 -t "$T" --mem "$MEM" --bw-refresh >"$out/pocket.$r.log" 2>&1 &
    ppid=$!
    # resident on pocket's behalf, sampled every 0.2 s: its anonymous memory
    # (expert cache, KV, buffers) + the file's pages in the page cache
    # (the mapped resident tensors; expert reads bypass it)
    peak=0
    while kill -0 $ppid 2>/dev/null; do
        anon=$(sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$ppid/status 2>/dev/null || echo 0)
        file=$(fincore -b -n -o RES "$MODEL" 2>/dev/null || echo 0)
        now=$(( ${anon:-0} * 1024 + ${file:-0} ))
        [ "$now" -gt "$peak" ] && peak=$now
        sleep 0.2
    done
    wait $ppid || { cat "$out/pocket.$r.log"; exit 1; }
    tps=$(sed -n 's/^ *tg[0-9]* *\([0-9.]*\) .*/\1/p' "$out/pocket.$r.log" | head -1)
    echo "draw $r pocket --mem $MEM: $tps tok/s | peak resident $(echo "$peak" | awk '{printf "%.2f GiB", $1 / 1073741824}') (anon + the file's cached pages) | $(grep 'experts:' "$out/pocket.$r.log" | sed 's/^ *//')"
    grep -E '^ *(storage|budget ceiling|device):' "$out/pocket.$r.log" | sed 's/^ */    /'
    echo "$tps" >>"$out/pocket.tps"
    i=0
    for peer in "$@"; do
        i=$((i + 1))
        drop
        tps=$("$peer" -m "$MODEL" -p 0 -n "$N" -r 1 -t "$T" -o csv 2>/dev/null |
              "$PYTHON" -c "import csv,sys; r=list(csv.reader(l for l in sys.stdin if l.startswith('\"') or l.startswith('build'))); print(r[-1][r[0].index('avg_ts')])" 2>/dev/null || echo fail)
        echo "draw $r $peer (mmap): $tps tok/s"
        echo "$tps" >>"$out/peer$i.tps"
    done
done
stats() { "$PYTHON" -c "import sys,statistics as s; v=[float(x) for x in open(sys.argv[1]) if x.strip() not in ('','fail')]; print(f'n={len(v)} mean={s.mean(v):.3f} sd={(s.stdev(v) if len(v) > 1 else 0):.3f}' if v else 'no draws')" "$1"; }
echo "pocket --mem $MEM: $(stats "$out/pocket.tps")"
i=0
for peer in "$@"; do i=$((i + 1)); echo "$peer: $(stats "$out/peer$i.tps")"; done
