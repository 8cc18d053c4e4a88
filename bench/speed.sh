#!/bin/sh
# bench/speed.sh - decode and prompt speed of `pocket run`, every draw shown.
#
#   bench/speed.sh [MODEL] [DRAWS] [THREADS...]
#
# For each thread count, runs DRAWS (default 5) greedy generations of 128
# tokens after a 3-token prompt and prints each draw's generation tok/s, then
# n, mean, sd, min and max. A stopgap until `pocket bench` (issue 4).
set -eu
BUILD=${BUILD:-build}
MODEL=${1:-models/kjv-moe-f16.gguf}
DRAWS=${2:-5}
shift 2 2>/dev/null || shift $#
THREADS=${*:-1 2}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "model: $MODEL"
for t in $THREADS; do
    draws=""
    for i in $(seq "$DRAWS"); do
        r=$("$BUILD/pocket" run -m "$MODEL" -p "And God said" -n 128 --temp 0 --ignore-eos -t "$t" 2>&1 >/dev/null |
            sed -n 's/.*generated [0-9]* tokens ([^)]*), [0-9.]* s, \([0-9.]*\) tok\/s.*/\1/p')
        draws="$draws $r"
    done
    echo "$draws" | awk -v t="$t" '{ n = NF; s = 0; ss = 0; mn = $1; mx = $1
        for (i = 1; i <= n; i++) { s += $i; ss += $i * $i; if ($i < mn) mn = $i; if ($i > mx) mx = $i }
        m = s / n; sd = n > 1 ? sqrt((ss - n * m * m) / (n - 1)) : 0
        printf "threads %s: tg128 tok/s draws:%s\n  n=%d mean=%.1f sd=%.1f min=%.1f max=%.1f\n", t, $0, n, m, sd, mn, mx }'
done
