#!/bin/sh
# bench/constrained.sh - what grammar-constrained decoding costs end to end:
# one `pocket serve` on MODEL, the same chat request sent R times in each of
# three forms, alternated (free text; response_format json_schema; a
# required tool call, tool_choice "required"), each generating up to N
# tokens; per request the server's own timings (predicted_per_token_ms:
# decode, sampling and the grammar) and the tokens generated are printed,
# then per form the mean ms per token and its ratio to the free text's.
# Issue 38's target: at most 5% on POCKET-35B's 40 layers with its 248k
# vocabulary (a bench file of bench/gen_bench_model.py --vocab ...).
#
#   bench/constrained.sh MODEL.gguf
# Environment: R (rounds, 5), N (max tokens per request, 96), THREADS (2),
# CTX (2048), PORT (8093), BUILD (build). Needs curl and python3.
set -eu
BUILD=${BUILD:-build}
P="$BUILD/pocket"
R=${R:-5}; N=${N:-96}; THREADS=${THREADS:-2}; CTX=${CTX:-2048}; PORT=${PORT:-8093}
fail() { echo "constrained.sh: $*" >&2; exit 1; }
[ $# -eq 1 ] || fail "usage: bench/constrained.sh MODEL.gguf (settings in the environment; see the header)"
[ -f "$1" ] || fail "$1: no such file"
[ -x "$P" ] || fail "$P is missing: make -j2 all first"
command -v curl >/dev/null || fail "curl is not installed"
tmp=$(mktemp -d)
"$P" serve -m "$1" -c "$CTX" -t "$THREADS" --port "$PORT" >"$tmp/serve.log" 2>&1 &
PS=$!
trap 'kill $PS 2>/dev/null; wait $PS 2>/dev/null; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
i=0
until curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 600 ] || fail "the server did not come up: $(tail -n 3 "$tmp/serve.log")"
    kill -0 $PS 2>/dev/null || fail "the server exited: $(tail -n 3 "$tmp/serve.log")"
    sleep 0.5
done

msg='"messages":[{"role":"user","content":"Describe the weather in three cities as a report."}]'
common="\"model\":\"m\",\"max_tokens\":$N,\"temperature\":0.7,\"seed\":7"
schema='{"type":"object","properties":{"report":{"type":"string"},"cities":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"summary":{"type":"string"}},"required":["name","summary"]}}},"required":["report","cities"]}'
tool='[{"type":"function","function":{"name":"weather_report","parameters":{"type":"object","properties":{"city":{"type":"string"},"text":{"type":"string"}},"required":["city","text"]}}}]'
body() {
    case $1 in
    free) echo "{$common,$msg}" ;;
    schema) echo "{$common,$msg,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"r\",\"schema\":$schema}}}" ;;
    tool) echo "{$common,$msg,\"tools\":$tool,\"tool_choice\":\"required\"}" ;;
    esac
}
echo "constrained.sh: $(basename "$1"), pocket $(git rev-parse --short HEAD 2>/dev/null || echo ?), $R rounds, up to $N tokens, $THREADS threads"
for r in $(seq 1 "$R"); do
    for f in free schema tool; do
        body "$f" | curl -sf -H 'Content-Type: application/json' --data-binary @- \
            "http://127.0.0.1:$PORT/v1/chat/completions" >"$tmp/out.json" || fail "request ($f) failed: $(tail -n 2 "$tmp/serve.log")"
        python3 - "$f" "$r" "$tmp/out.json" >>"$tmp/rows" <<'EOF'
import json, sys
f, r, path = sys.argv[1], sys.argv[2], sys.argv[3]
o = json.load(open(path))
t = o["timings"]
print(f, r, t["predicted_n"], "%.3f" % t["predicted_per_token_ms"], o["choices"][0]["finish_reason"])
EOF
        tail -n 1 "$tmp/rows"
    done
done
python3 - "$tmp/rows" <<'EOF'
import sys
rows = [l.split() for l in open(sys.argv[1])]
mean = {}
for f in ("free", "schema", "tool"):
    ms = [float(x[3]) for x in rows if x[0] == f]
    toks = [int(x[2]) for x in rows if x[0] == f]
    mean[f] = sum(ms) / len(ms)
    print("%-6s ms/token %s  mean %.3f  tokens %s" % (f, " ".join("%.2f" % m for m in ms), mean[f], " ".join(map(str, toks))))
for f in ("schema", "tool"):
    print("%s / free: %.3f (cost %+.1f%%)" % (f, mean[f] / mean["free"], 100 * (mean[f] / mean["free"] - 1)))
EOF
