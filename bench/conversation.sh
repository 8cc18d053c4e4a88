#!/bin/sh
# bench/conversation.sh - pocket serve and llama.cpp's llama-server on the
# same GGUF file, the same context and threads, replaying the same scripted
# conversation alternated turn by turn (bench/conversation.mjs), then the
# agent-shaped replay; every turn of every server is appended to
# bench/results/<date>-<machine>-conversation.md with the machine, the
# commits, the commands and the load.
#
#   bench/conversation.sh MODEL.gguf [MODEL.gguf ...]
# Environment: LLAMA_SERVER (the llama-server binary, built by you outside
# this repository; empty: pocket alone), S (system prompt tokens, 2000), T
# (turns, 8), R (reply tokens, 64), U (user message tokens, 32), K (tool
# result tokens of the agent replay, 150), AGENT (1: the agent replay after
# the chat one; 0: chat only), ROUNDS (1), ALTERNATE (turn | conversation),
# CPT (characters per token, 1: gen_bench_model.py's byte vocabulary),
# REPLIES (scripted: R tokens of corpus text go back in place of each reply,
# as a random-weight file's reply would take about 9 R tokens; received:
# the reply as it came, for real models), CTX
# (context of both servers, 4096), THREADS (2), POCKET_ARGS / LLAMA_ARGS
# (more flags for either server), RESTART (1: pocket gets --cache-dir, and
# after the chat replay it is stopped, started again with the same command
# and the conversation resumed with turn T+1: the restart row shows what the
# saved state served), MACHINE (the results file's machine name;
# default from the CPU), OUT (the results file), BUILD (build).
# The servers run one request at a time (--parallel 1 / -np 1); both stay up
# for the whole replay of a model, each with its own conversation. pocket
# gets --timeout 3600, llama-server's default: with pocket's 120 s a
# streamed request whose prompt takes longer is cut (no byte flows while the
# prompt is processed).
set -eu
BUILD=${BUILD:-build}
P="$BUILD/pocket"
S=${S:-2000}; T=${T:-8}; R=${R:-64}; U=${U:-32}; K=${K:-150}; AGENT=${AGENT:-1}; ROUNDS=${ROUNDS:-1}
ALTERNATE=${ALTERNATE:-turn}; REPLIES=${REPLIES:-scripted}; CPT=${CPT:-1}; CTX=${CTX:-4096}; THREADS=${THREADS:-2}
RESTART=${RESTART:-0}; POCKET_ARGS=${POCKET_ARGS:-}; LLAMA_ARGS=${LLAMA_ARGS:-}; LLAMA_SERVER=${LLAMA_SERVER:-}
NODE_DIR=${POCKET_NODE_DIR:-$BUILD/tmp/node}
fail() { echo "conversation.sh: $*" >&2; exit 1; }

[ $# -ge 1 ] || fail "usage: bench/conversation.sh MODEL.gguf [MODEL.gguf ...] (settings in the environment; see the header)"
for m in "$@"; do [ -f "$m" ] || fail "$m: no such file"; done
[ -x "$P" ] || fail "$P is missing: make -j2 all first"
[ -z "$LLAMA_SERVER" ] || [ -x "$LLAMA_SERVER" ] || fail "LLAMA_SERVER=$LLAMA_SERVER is not an executable"
command -v node >/dev/null || fail "node is not installed (Node.js 20 is needed)"
if [ ! -f "$NODE_DIR/node_modules/openai/package.json" ]; then
    command -v npm >/dev/null || fail "npm is not installed (needed once, for the openai package)"
    mkdir -p "$NODE_DIR"
    [ -f "$NODE_DIR/package.json" ] || echo '{"name":"pocket-serve-tests","private":true}' >"$NODE_DIR/package.json"
    echo "installing openai into $NODE_DIR"
    (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error openai@7) || fail "npm install openai failed"
fi
export POCKET_NODE_DIR="$NODE_DIR"

# ---- the machine and the results file -------------------------------------------------
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')
fam=$(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
mod=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
isa=$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx512_bf16|avx_vnni|amx_int8)$' | tr '\n' ' ')
MACHINE=${MACHINE:-$(echo "$cpu" | awk '{print tolower($1 == "AMD" ? $2 : $1)}')-f${fam}m${mod}}
mkdir -p bench/results
OUT=${OUT:-bench/results/$(date +%F)-$MACHINE-conversation.md}
tmp=$(mktemp -d)
PS=""; LS=""
stop() {   # PID: SIGTERM, then SIGKILL after 10 s (llama-server finishes a prompt before it obeys)
    kill "$1" 2>/dev/null || return 0
    i=0
    while [ $i -lt 20 ] && kill -0 "$1" 2>/dev/null; do sleep 0.5; i=$((i + 1)); done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
cleanup() {
    [ -z "$PS" ] || stop "$PS"
    [ -z "$LS" ] || stop "$LS"
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if [ ! -f "$OUT" ]; then
    cat >"$OUT" <<EOF
# Conversation replays ($(date +%F), $MACHINE)

Written by \`bench/conversation.sh\` (see bench/README.md, "Conversation
replay"): pocket serve and llama-server on the same file, context and
threads, one scripted conversation each, turns alternated; every turn of
every server below, as bench/conversation.mjs printed it.

Machine: $cpu, CPUID family $fam model $mod, $(nproc) vCPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM; ISA: $isa
EOF
fi

free_port() { node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => { console.log(s.address().port); s.close(); })"; }
wait_health() {   # URL PID LOG: until /health answers 200, or the server died
    i=0
    while [ $i -lt 1800 ]; do
        kill -0 "$2" 2>/dev/null || { cat "$3" >&2; fail "the server on $1 exited while loading (log above)"; }
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$1/health")" = 200 ] && return 0
        sleep 1; i=$((i + 1))
    done
    fail "$1 was not healthy after 30 minutes"
}

pocket_rev="$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src tools include 2>/dev/null || echo '+changes')"
if [ -n "$LLAMA_SERVER" ]; then
    lver=$("$LLAMA_SERVER" --version 2>&1 | grep -m1 -i 'version' || echo '?')
    cache=$(dirname "$LLAMA_SERVER")/../CMakeCache.txt
    lflags=$(grep -E '^(CMAKE_BUILD_TYPE|GGML_NATIVE|LLAMA_CURL|GGML_AVX512|GGML_BLAS)[:=]' "$cache" 2>/dev/null | tr '\n' ' ' || true)
fi

start_pocket() {   # PCMD -> PS, pport
    : >"$tmp/pocket.log"      # before the server opens it: read at once below
    # shellcheck disable=SC2086
    $PCMD >>"$tmp/pocket.log" 2>&1 &
    PS=$!
    i=0; pport=""
    while [ $i -lt 600 ] && [ -z "$pport" ]; do
        kill -0 "$PS" 2>/dev/null || { cat "$tmp/pocket.log" >&2; fail "pocket serve exited (log above)"; }
        pport=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$tmp/pocket.log")
        [ -n "$pport" ] || sleep 1; i=$((i + 1))
    done
    [ -n "$pport" ] || fail "pocket serve did not print its port in 10 minutes"
    wait_health "http://127.0.0.1:$pport" "$PS" "$tmp/pocket.log"
}
peak_rss() {   # PID: its peak resident set (VmHWM), or ?
    sed -n 's/^VmHWM:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null || echo '?'
}

for m in "$@"; do
    name=$(basename "$m" .gguf)
    PCMD="$P serve -m $m --host 127.0.0.1 --port 0 -c $CTX -t $THREADS --parallel 1 --timeout 3600 $POCKET_ARGS"
    if [ "$RESTART" = 1 ]; then rm -rf "$tmp/cache"; mkdir -p "$tmp/cache"; PCMD="$PCMD --cache-dir $tmp/cache"; fi
    start_pocket
    urls="--url http://127.0.0.1:$pport --label pocket"
    LCMD=""
    if [ -n "$LLAMA_SERVER" ]; then
        lport=$(free_port)
        LCMD="$LLAMA_SERVER -m $m --host 127.0.0.1 --port $lport -c $CTX -t $THREADS -tb $THREADS -np 1 $LLAMA_ARGS"
        # shellcheck disable=SC2086
        $LCMD >"$tmp/llama.log" 2>&1 &
        LS=$!
        wait_health "http://127.0.0.1:$lport" "$LS" "$tmp/llama.log"
        urls="$urls --url http://127.0.0.1:$lport --label llama-server"
    fi
    modes="chat"; [ "$AGENT" = 1 ] && modes="chat agent"
    for mode in $modes; do
        flags="--S $S --T $T --R $R --U $U --rounds $ROUNDS --alternate $ALTERNATE --replies $REPLIES --cpt $CPT"
        [ "$mode" = agent ] && flags="$flags --agent --K $K"
        save=""; [ "$mode" = chat ] && [ "$RESTART" = 1 ] && save="--save $tmp/conv.json"
        load0=$(cut -d' ' -f1-3 /proc/loadavg)
        start=$(date '+%F %T')
        # shellcheck disable=SC2086
        { rc=0; node bench/conversation.mjs $urls $flags $save || rc=$?; echo $rc >"$tmp/rc"; } | tee "$tmp/run.txt"
        [ "$(cat "$tmp/rc")" = 0 ] || fail "the $mode replay of $name failed (above); nothing was recorded for it"
        load1=$(cut -d' ' -f1-3 /proc/loadavg)
        maxload=$(sed -n 's/.*"load1":\([0-9.]*\).*/\1/p' "$tmp/run.txt" | sort -g | tail -1)
        {
            echo
            echo "## $name, $mode replay, S=$S T=$T R=$R ($start)"
            echo
            echo "pocket $pocket_rev: \`$PCMD\`"
            [ -z "$LCMD" ] || echo "llama-server ($lver; $lflags): \`$LCMD\`"
            echo "replay: \`node bench/conversation.mjs $flags\` (URLs as above)"
            echo "load (1, 5, 15 min) before: $load0; after: $load1; highest 1-min load after a turn: ${maxload:-?}"
            echo "peak RSS so far: pocket $(peak_rss "$PS")${LS:+, llama-server $(peak_rss "$LS")}"
            if awk -v x="${maxload:-0}" 'BEGIN { exit !(x > 2.5) }'; then
                echo
                echo "The 1-minute load exceeded 2.5 during this run: other processes shared the 2 cores, so the times include their work."
            fi
            echo
            echo '```'
            grep '^{' "$tmp/run.txt"
            echo '```'
            echo
            grep '^|' "$tmp/run.txt"
        } >>"$OUT"
    done
    if [ -n "$LS" ]; then stop "$LS"; LS=""; fi
    if [ "$RESTART" = 1 ]; then
        rss=$(peak_rss "$PS")
        stop "$PS"; PS=""
        saved=$(ls "$tmp/cache" | wc -l)
        start_pocket
        start=$(date '+%F %T')
        flags="--T $((T + 1)) --resume $tmp/conv.json"
        # shellcheck disable=SC2086
        { rc=0; node bench/conversation.mjs --url "http://127.0.0.1:$pport" --label pocket $flags || rc=$?; echo $rc >"$tmp/rc"; } | tee "$tmp/run.txt"
        [ "$(cat "$tmp/rc")" = 0 ] || fail "the restart turn of $name failed (above); nothing was recorded for it"
        {
            echo
            echo "## $name, chat replay turn $((T + 1)) after a restart of pocket serve ($start)"
            echo
            echo "pocket $pocket_rev: \`$PCMD\` (stopped after turn $T with SIGTERM: $saved file(s) in the cache directory; peak RSS before the stop $rss; started again with the same command)"
            echo "replay: \`node bench/conversation.mjs $flags\`; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
            echo "pocket's log after the restart:"
            echo
            echo '```'
            sed -n '/cache:/p;/prompt [0-9]* tokens/p' "$tmp/pocket.log" | tail -5
            grep '^{' "$tmp/run.txt"
            echo '```'
            echo
            grep '^|' "$tmp/run.txt"
        } >>"$OUT"
    fi
    stop "$PS"; PS=""
done
echo "results appended to $OUT"
