#!/bin/sh
# bench/compare_llama.sh - pocket vs a llama.cpp-family llama-bench on the
# same files and machine, draws interleaved (pocket, peer, pocket, peer, ...)
# so both see the same machine conditions. Prints every draw and a Markdown
# table with mean ± sd and the pocket/peer ratio.
#
#   bench/compare_llama.sh /path/to/llama-bench MODEL.gguf [MODEL.gguf ...]
# Environment: P (prompt tokens, 512), N (generated tokens, 64), R (draws, 3),
# T (threads, 2). The peer binary is built by you, outside this repository.
set -eu
BUILD=${BUILD:-build}
LB=$1; shift
P=${P:-512}; N=${N:-64}; R=${R:-3}; T=${T:-2}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pocket: $(git rev-parse --short HEAD 2>/dev/null || echo '?'); peer: $LB"
printf '| model | test | pocket tok/s | peer tok/s | pocket / peer |\n|---|---|---|---|---|\n' > /tmp/compare_table.$$
for m in "$@"; do
    for test in pp tg; do
        if [ $test = pp ]; then pa="-p $P -n 0"; la="-p $P -n 0"; name="pp$P"
        else pa="-p 0 -n $N"; la="-p 0 -n $N"; name="tg$N"; fi
        pd=""; ld=""
        for i in $(seq "$R"); do
            x=$("$BUILD/pocket" bench -m "$m" $pa -r 1 -t "$T" --no-bw 2>/dev/null |
                awk -v t="$name" '$1 == t && NF >= 2 && $2 ~ /^[0-9.]+$/ { print $2; exit }')
            y=$("$LB" -m "$m" $la -r 1 -t "$T" -o csv 2>/dev/null |
                python3 -c 'import csv, sys; print(list(csv.DictReader(sys.stdin))[-1]["avg_ts"])' 2>/dev/null || true)
            pd="$pd ${x:-nan}"; ld="$ld ${y:-nan}"
        done
        echo "$(basename "$m") $name pocket draws:$pd | peer draws:$ld"
        printf '%s\n%s\n' "$pd" "$ld" | awk -v m="$(basename "$m")" -v t="$name" '
            { n = NF; s = 0; ss = 0; for (i = 1; i <= n; i++) { s += $i; ss += $i * $i }
              mean[NR] = s / n; sd[NR] = n > 1 ? sqrt((ss - n * mean[NR] * mean[NR]) / (n - 1)) : 0 }
            END { printf "| %s | %s | %.2f ± %.2f | %.2f ± %.2f | %.2fx |\n", m, t, mean[1], sd[1], mean[2], sd[2], mean[1] / mean[2] }' \
            >>/tmp/compare_table.$$
    done
done
cat /tmp/compare_table.$$; rm -f /tmp/compare_table.$$
