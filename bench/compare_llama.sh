#!/bin/sh
# bench/compare_llama.sh - pocket vs llama.cpp-family llama-bench binaries
# on the same files and machine, draws interleaved (pocket, peer 1, peer 2,
# pocket, ...) so all see the same machine conditions. Prints every draw and
# a Markdown table with mean ± sd of each engine and pocket / the faster
# peer.
#
#   bench/compare_llama.sh LLAMA_BENCH[,LLAMA_BENCH...] MODEL.gguf [MODEL.gguf ...]
# Environment: P (prompt tokens, 512; 0: no prompt test), N (generated
# tokens, 64; 0: no decode test), R (draws, 3),
# T (threads, 2), BUILD (build). POCKET_KERNELS is passed through to pocket.
# The peer binaries are built by you, outside this repository.
set -eu
BUILD=${BUILD:-build}
PEERS=$(echo "$1" | tr ',' ' '); shift
P=${P:-512}; N=${N:-64}; R=${R:-3}; T=${T:-2}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores; load at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pocket: $(git rev-parse --short HEAD 2>/dev/null || echo '?') kernels ${POCKET_KERNELS:-default}"
i=1; for lb in $PEERS; do echo "peer $i: $lb"; i=$((i + 1)); done
hdr="| model | test | pocket tok/s"; sep="|---|---|---"
i=1; for lb in $PEERS; do hdr="$hdr | peer $i tok/s"; sep="$sep|---"; i=$((i + 1)); done
table=$(mktemp); trap 'rm -f "$table"' EXIT
printf '%s | pocket / best |\n%s|---|\n' "$hdr" "$sep" > "$table"
for m in "$@"; do
    # the file read into the page cache before the first draw: pocket's draw
    # comes first and would pay alone for reading it from disk (a cold 4L
    # file's pp512 drew 230 tok/s against 310 warm), the peers after it not
    avail=$(awk '/^MemAvailable:/ { printf "%.0f", $2 * 1024 }' /proc/meminfo)
    if [ "$(wc -c < "$m")" -lt "${avail:-0}" ]; then cat "$m" > /dev/null
    else echo "note: $(basename "$m") is larger than the available memory: draws may read it from disk" >&2; fi
    for test in pp tg; do
        # P=0 or N=0: that test is not run (not a row of nan)
        if [ $test = pp ] && [ "$P" -eq 0 ]; then continue; fi
        if [ $test = tg ] && [ "$N" -eq 0 ]; then continue; fi
        if [ $test = pp ]; then a="-p $P -n 0"; name="pp$P"
        else a="-p 0 -n $N"; name="tg$N"; fi
        draws=$(mktemp)
        for d in $(seq "$R"); do
            x=$("$BUILD/pocket" bench -m "$m" $a -r 1 -t "$T" --no-bw 2>/dev/null |
                awk -v t="$name" '$1 == t && NF >= 2 && $2 ~ /^[0-9.]+$/ { print $2; exit }')
            line="${x:-nan}"
            for lb in $PEERS; do
                y=$("$lb" -m "$m" $a -r 1 -t "$T" -o csv 2>/dev/null |
                    python3 -c 'import csv, sys; print(list(csv.DictReader(sys.stdin))[-1]["avg_ts"])' 2>/dev/null || true)
                line="$line ${y:-nan}"
            done
            echo "$line" >> "$draws"
        done
        echo "$(basename "$m") $name draws (pocket, peers...): $(tr '\n' ';' < "$draws")"
        awk -v m="$(basename "$m")" -v t="$name" '
            { for (i = 1; i <= NF; i++) { s[i] += $i; ss[i] += $i * $i }; n = NR; k = NF }
            END { printf "| %s | %s", m, t; best = 0
                  for (i = 1; i <= k; i++) { mu = s[i] / n; sd = n > 1 ? sqrt((ss[i] - n * mu * mu) / (n - 1)) : 0
                      if (sd != sd) sd = 0
                      printf " | %.2f ± %.2f", mu, sd; if (i == 1) p = mu; else if (mu > best) best = mu }
                  printf " | %.2fx |\n", (best > 0 ? p / best : 0) }' "$draws" >> "$table"
        rm -f "$draws"
    done
done
cat "$table"
