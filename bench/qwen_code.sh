#!/bin/sh
# bench/qwen_code.sh - Qwen Code (the npm package @qwen-code/qwen-code, the
# agent CLI of the Qwen3.5 family, headless: -p TASK) against pocket serve
# on a POCKET-35B-geometry file with the real tokenizer: one session, its
# requests recorded on the way (bench/http_tap.mjs between the two), and
# appended to bench/results/<date>-<machine>-qwen-code.md: Qwen Code's exit
# status and result, per request its size, tools, messages, status, prompt
# and cached tokens, times, finish reason, tool calls or error; the
# server's log lines; the tokens of the first request as the file's chat
# template renders it (`pocket template --tokens`). A benchmark of the
# protocol, not a test: the weights are random, so the replies are not text.
#
#   bench/qwen_code.sh [MODEL.gguf]
# MODEL: default $BENCH_MODELS/pocket35b-4L-Q4_K_M-qwen3vocab.gguf, written
# when missing by gen_bench_model.py (--geometry pocket-35b --layers 4 --type
# Q4_K_M --vocab ../shared/tokenizer/ggml-vocab-qwen3.gguf: Qwen3's
# vocabulary, Qwen3.5's chat template, context 262,144; 2.8 GB, a few minutes).
# Environment: BENCH_MODELS (../bench-models), CTX (the server's context,
# 32768), THREADS (2), R (Qwen Code's largest reply, QWEN_CODE_MAX_OUTPUT_TOKENS,
# 64), TASK (the prompt; a small task in a scratch project of two files),
# QWEN_CODE_VERSION (0.24.4), QWEN_CODE_DIR (where it is installed by npm,
# ${XDG_CACHE_HOME:-$HOME/.cache}/pocket/qwen-code), NODE (node, >= 22 for
# Qwen Code), TIMEOUT (Qwen Code's time limit, s: 3600), POCKET_ARGS (more
# serve flags), QWEN_ARGS (more Qwen Code flags), APPROVAL (Qwen Code's --approval-mode: auto-edit, file edits
# in the scratch project allowed, shell commands refused; yolo: all), BODIES
# (a directory to keep the request bodies in, req-N.json), MACHINE, OUT (the
# results file), BUILD (build), NETNS (1:
# when unshare can, everything runs in a network namespace of its own whose
# only interface is loopback, so no request leaves the machine; 0: not).
set -eu
if [ "${NETNS:-1}" = 1 ] && [ -z "${QC_IN_NETNS:-}" ] && unshare -n true 2>/dev/null; then
    exec unshare -n sh -c 'ip link set lo up && QC_IN_NETNS=1 exec sh "$0" "$@"' "$0" "$@"
fi
BUILD=${BUILD:-build}
P="$BUILD/pocket"
CTX=${CTX:-32768}; THREADS=${THREADS:-2}; R=${R:-64}; TIMEOUT=${TIMEOUT:-3600}
POCKET_ARGS=${POCKET_ARGS:-}; QWEN_ARGS=${QWEN_ARGS:-}; NODE=${NODE:-node}; APPROVAL=${APPROVAL:-auto-edit}
QWEN_CODE_VERSION=${QWEN_CODE_VERSION:-0.24.4}
QWEN_CODE_DIR=${QWEN_CODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pocket/qwen-code}
SHARED=${POCKET_SHARED:-../shared}
BENCH_MODELS=${BENCH_MODELS:-../bench-models}
MODEL=${1:-$BENCH_MODELS/pocket35b-4L-Q4_K_M-qwen3vocab.gguf}
TASK=${TASK:-Read notes.txt and add a line to it saying which file of this directory is the largest.}
fail() { echo "qwen_code.sh: $*" >&2; exit 1; }

[ -x "$P" ] || fail "$P is missing: make -j2 all first"
command -v "$NODE" >/dev/null || fail "node is not installed (Qwen Code needs Node.js >= 22)"
if [ ! -f "$MODEL" ]; then
    [ -f "$SHARED/tokenizer/ggml-vocab-qwen3.gguf" ] || fail "$SHARED/tokenizer/ggml-vocab-qwen3.gguf not found (POCKET_SHARED=DIR)"
    mkdir -p "$(dirname "$MODEL")"
    echo "writing $MODEL"
    /usr/bin/python3 bench/gen_bench_model.py "$MODEL" --geometry pocket-35b --layers 4 --type Q4_K_M \
        --vocab "$SHARED/tokenizer/ggml-vocab-qwen3.gguf" || fail "gen_bench_model.py failed"
fi
QC="$QWEN_CODE_DIR/node_modules/@qwen-code/qwen-code"
if [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$QC/package.json" 2>/dev/null | head -1)" != "$QWEN_CODE_VERSION" ]; then
    [ -z "${QC_IN_NETNS:-}" ] || fail "Qwen Code $QWEN_CODE_VERSION is not in $QWEN_CODE_DIR, and npm cannot reach the registry from the namespace: run once with NETNS=0, or npm install it there"
    command -v npm >/dev/null || fail "npm is not installed (needed once, for @qwen-code/qwen-code)"
    mkdir -p "$QWEN_CODE_DIR"
    [ -f "$QWEN_CODE_DIR/package.json" ] || echo '{"name":"pocket-bench-qwen-code","private":true}' >"$QWEN_CODE_DIR/package.json"
    echo "installing @qwen-code/qwen-code@$QWEN_CODE_VERSION into $QWEN_CODE_DIR"
    (cd "$QWEN_CODE_DIR" && npm install --no-audit --no-fund --loglevel=error "@qwen-code/qwen-code@$QWEN_CODE_VERSION") ||
        fail "npm install @qwen-code/qwen-code@$QWEN_CODE_VERSION failed"
fi

# ---- the machine and the results file -------------------------------------------------
cpuinfo() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'; }
cpu=$(cpuinfo 'model name'); fam=$(cpuinfo 'cpu family'); mod=$(cpuinfo model)
MACHINE=${MACHINE:-$(echo "$cpu" | awk '{print tolower($1 == "AMD" ? $2 : $1)}')-f${fam}m${mod}}
mkdir -p bench/results
OUT=${OUT:-bench/results/$(date +%F)-$MACHINE-qwen-code.md}
tmp=$(mktemp -d)
PIDS=""        # the tap and the server while they run: stopped on any exit
stop_all() { for p in $PIDS; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done; PIDS=""; }
trap 'stop_all; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
if [ ! -f "$OUT" ]; then
    cat >"$OUT" <<EOF
# Qwen Code against pocket serve ($(date +%F), $MACHINE)

Written by \`bench/qwen_code.sh\` (see bench/README.md, "Qwen Code"): one
headless Qwen Code session against \`pocket serve\` on a random-weight file
of the POCKET-35B geometry with Qwen3's tokenizer and Qwen3.5's chat
template; every request as bench/http_tap.mjs recorded it between the two.

Machine: $cpu, CPUID family $fam model $mod, $(nproc) vCPUs, $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM
EOF
fi

# ---- the server and the tap ------------------------------------------------------------
port_of() {   # LOG PID WHAT: the port a process printed as "...listening on http://127.0.0.1:PORT/"
    i=0
    while [ $i -lt 1200 ]; do
        kill -0 "$2" 2>/dev/null || { cat "$1" >&2; fail "$3 exited (log above)"; }
        p=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$1" | head -1)
        [ -z "$p" ] || { echo "$p"; return 0; }
        sleep 0.5; i=$((i + 1))
    done
    fail "$3 did not print its port in 10 minutes"
}
PCMD="$P serve -m $MODEL --host 127.0.0.1 --port 0 -c $CTX -t $THREADS --timeout 3600 $POCKET_ARGS"
: >"$tmp/pocket.log"
# shellcheck disable=SC2086
$PCMD >"$tmp/pocket.log" 2>&1 &
PS=$!; PIDS=$PS
pport=$(port_of "$tmp/pocket.log" "$PS" "pocket serve")
i=0
until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$pport/health")" = 200 ]; do
    kill -0 "$PS" 2>/dev/null || { cat "$tmp/pocket.log" >&2; fail "pocket serve exited (log above)"; }
    i=$((i + 1)); [ $i -lt 1800 ] || fail "pocket serve was not healthy after 30 minutes"
    sleep 1
done
id=$(curl -s "http://127.0.0.1:$pport/v1/models" | sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' | head -1)
[ -n "$id" ] || fail "no model id in /v1/models"
: >"$tmp/tap.out"
"$NODE" bench/http_tap.mjs --target "http://127.0.0.1:$pport" --log "$tmp/requests.jsonl" \
    --bodies "$tmp/bodies" >"$tmp/tap.out" 2>&1 &
PIDS="$! $PS"
tport=$(port_of "$tmp/tap.out" "${PIDS%% *}" "bench/http_tap.mjs")

# ---- Qwen Code: a scratch project and home, settings that keep it local -------------------
mkdir -p "$tmp/project" "$tmp/home/.qwen"
printf 'Notes of the project.\n' >"$tmp/project/notes.txt"
head -c 3000 tests/data/text >"$tmp/project/story.txt" 2>/dev/null || printf 'a story\n' >"$tmp/project/story.txt"
cat >"$tmp/home/.qwen/settings.json" <<EOF
{
  "security": { "auth": { "selectedType": "openai" } },
  "model": { "name": "$id" },
  "general": { "enableAutoUpdate": false, "disableAutoUpdate": true, "disableUpdateNag": true },
  "privacy": { "usageStatisticsEnabled": false },
  "telemetry": { "enabled": false }
}
EOF
qver=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$QC/package.json" | head -1)
QCMD="qwen -p \"$TASK\" --auth-type openai --approval-mode $APPROVAL --output-format json${QWEN_ARGS:+ $QWEN_ARGS}"
start=$(date '+%F %T'); load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
rc=0
(cd "$tmp/project" && env HOME="$tmp/home" OPENAI_BASE_URL="http://127.0.0.1:$tport/v1" OPENAI_API_KEY=pocket-bench \
    OPENAI_MODEL="$id" QWEN_CODE_MAX_OUTPUT_TOKENS="$R" QWEN_STREAM_IDLE_TIMEOUT_MS="${TIMEOUT}000" NO_COLOR=1 \
    timeout "$TIMEOUT" "$NODE" "$QC/cli-entry.js" -p "$TASK" --auth-type openai --approval-mode "$APPROVAL" \
    --output-format json $QWEN_ARGS </dev/null >"$tmp/qwen.out" 2>"$tmp/qwen.err") || rc=$?
t1=$(date +%s)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
stop_all

if [ -n "${BODIES:-}" ] && [ -d "$tmp/bodies" ]; then mkdir -p "$BODIES" && cp "$tmp"/bodies/* "$BODIES"/; fi

# ---- the first request as the file's template renders it -------------------------------
first_tokens="-"
if [ -f "$tmp/bodies/req-1.json" ]; then
    first_tokens=$("$P" template -m "$MODEL" --tokens "$tmp/bodies/req-1.json" 2>&1 >/dev/null |
                   sed -n 's/^\([0-9]*\) tokens$/\1/p' | tail -1)
    first_tokens=${first_tokens:-?}
fi
node_ver=$("$NODE" --version)
pocket_rev="$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src tools include 2>/dev/null || echo '+changes')"
{
    echo
    echo "## $(basename "$MODEL" .gguf), Qwen Code $qver ($start)"
    echo
    echo "pocket $pocket_rev: \`$PCMD\`"
    echo "Qwen Code $qver on Node.js $node_ver, in a scratch project (notes.txt, story.txt), HOME with settings.json (openai auth, model \`$id\`, no update check, no usage statistics, no telemetry): \`$QCMD\` with OPENAI_BASE_URL (the tap), OPENAI_API_KEY, OPENAI_MODEL=$id, QWEN_CODE_MAX_OUTPUT_TOKENS=$R, QWEN_STREAM_IDLE_TIMEOUT_MS=${TIMEOUT}000$([ -n "${QC_IN_NETNS:-}" ] && echo '; all in a network namespace with loopback only')"
    echo "load (1, 5, 15 min) before: $load0; after: $load1"
    echo
    echo "**Qwen Code exit status $rc** after $((t1 - t0)) s; the first request renders to **$first_tokens tokens** with the file's chat template (\`pocket template -m MODEL --tokens\`)."
    echo
    echo "| # | path | bytes | tools | msgs | stream | max_tokens | status | prompt | cached | gen | headers ms | total ms | finish | tool calls | error |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    if [ -f "$tmp/requests.jsonl" ]; then
        "$NODE" -e '
            const fs = require("fs");
            for (const l of fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean)) {
                const r = JSON.parse(l), v = (x) => (x === undefined || x === null ? "-" : String(x).replace(/\|/g, "\\|").replace(/\n/g, " "));
                console.log(`| ${r.n} | ${r.method} ${v(r.path)} | ${r.req_bytes} | ${v(r.tools)} | ${v(r.messages)} | ${v(r.stream)} | ${v(r.max_tokens)} | ${v(r.status)} | ${v(r.prompt_tokens)} | ${v(r.cached_tokens)} | ${v(r.completion_tokens)} | ${v(r.headers_ms)} | ${v(r.total_ms)} | ${v(r.finish)} | ${v(r.tool_calls)} | ${v(r.error)} |`);
            }' "$tmp/requests.jsonl"
    fi
    echo
    echo "The server's log:"
    echo
    echo '```'
    cat "$tmp/pocket.log"
    echo '```'
    echo
    echo "Qwen Code's result (the last JSON message of its output, text cut at 300 characters) and standard error (last 20 lines):"
    echo
    echo '```'
    "$NODE" -e '
        const fs = require("fs");
        let out = fs.readFileSync(process.argv[1], "utf8"), msgs;
        try { msgs = JSON.parse(out); } catch { console.log(out.slice(-1500)); process.exit(0); }
        const r = Array.isArray(msgs) ? msgs.filter((m) => m.type === "result").pop() ?? msgs.pop() : msgs;
        const cut = (x) => (typeof x === "string" && x.length > 300 ? x.slice(0, 300) + "..." : x);
        console.log(JSON.stringify(r, (k, x) => cut(x), 1));' "$tmp/qwen.out"
    tail -20 "$tmp/qwen.err"
    echo '```'
} >>"$OUT"
echo "Qwen Code exit status $rc; results appended to $OUT"
exit "$rc"
