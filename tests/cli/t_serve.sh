#!/bin/sh
# `pocket serve` end to end, on loopback only: start the server on a free port
# (--port 0; the port is read from its log) with the bundled model, then
#   1. tests/cli/serve/openai.mjs    the official `openai` npm client: models, chat
#      (plain and streamed, same text for the same seed), stop strings,
#      completions, usage counts, errors as exceptions
#   2. tests/cli/serve/malformed.mjs plain HTTP: bad JSON, wrong types, huge bodies,
#      unknown model, bad max_tokens, over-long prompt, API key, clients that
#      disconnect (generation cancelled), 32 concurrent streams against
#      --parallel 2 --queue 8 (each answered in full or 503), /metrics
#   3. tests/cli/serve/webui.mjs     headless Chromium (playwright-core) drives the
#      chat page at /: send, streamed answer, a failed request not kept, Stop;
#      screenshot in $BUILD/tmp/serve/chat.png
# then a server with the bundled model's own 256-token context
# (tests/cli/serve/webui_context.mjs: the page through a conversation longer
# than the context), a second server (--timeout, its model file truncated
# under it) and three more on tests/lib/mk_chain_model.py's model
# (tests/cli/serve/reasoning.mjs: the answer / reasoning split for harmony,
# <think> and gemma4; webui_reasoning.mjs: the page's thinking block).
# The server must still be alive at the end. Needs node + npm (the packages
# go to $BUILD/tmp/node) and Debian's chromium (installed here when root);
# when they cannot be had, the test says why and fails.
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
tmp="$BUILD/tmp/serve"; rm -rf "$tmp"; mkdir -p "$tmp"
NODE_DIR="$BUILD/tmp/node"
KEY="pocket-test-key-$$"
. tests/lib/serve_node.sh

# ---- tools: node, npm packages, chromium ----------------------------------------
need_npm openai@7 playwright-core@1
CHROMIUM=/usr/bin/chromium
if [ ! -x "$CHROMIUM" ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "installing Debian's chromium"
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ||
            fail "apt-get install chromium failed"
    else
        fail "$CHROMIUM is missing and this is not root: run 'sudo apt-get install chromium'"
    fi
fi
[ -x "$CHROMIUM" ] || fail "$CHROMIUM is missing after installing chromium"

# ---- the server -------------------------------------------------------------------
start_server "$tmp/server.log" -m models/kjv-moe-f16.gguf --parallel 2 --queue 8 -c 1024 -t 1 \
    --chat-template chatml --max-body 65536 --api-key "$KEY"
SERVER=$SERVER_PID PORT=$SERVER_PORT
echo "server pid $SERVER on port $PORT"
export POCKET_URL="http://127.0.0.1:$PORT" POCKET_KEY="$KEY" POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" \
       POCKET_SHOT="$tmp/chat.png" POCKET_PROFILE="$tmp/chromium-profile" POCKET_CHROMIUM="$CHROMIUM"

fails=0
for t in openai malformed webui; do
    start=$(date +%s)
    if node "tests/cli/serve/$t.mjs"; then echo "ok   $t.mjs ($(( $(date +%s) - start ))s)"
    else echo "FAIL $t.mjs"; fails=$((fails + 1)); fi
done
if kill -0 "$SERVER" 2>/dev/null; then echo "ok   server alive at the end"
else echo "FAIL the server died"; fails=$((fails + 1)); fi
if [ $fails -ne 0 ]; then echo "--- server log (tail)"; tail -n 40 "$tmp/server.log"; fi
# Stop it and check it shuts down cleanly (sanitizer reports surface here).
stop_server "$SERVER"; rc=$?
if [ $rc -ne 0 ]; then echo "FAIL server exit status $rc after SIGTERM"; tail -n 40 "$tmp/server.log"; fails=$((fails + 1)); fi

# ---- the page past the context: the bundled model's own 256 tokens ----------------------
start_server "$tmp/server-ctx.log" -m models/kjv-moe-f16.gguf -t 1 --chat-template chatml --api-key "$KEY"
if POCKET_URL="http://127.0.0.1:$SERVER_PORT" node tests/cli/serve/webui_context.mjs; then echo "ok   webui_context.mjs"
else echo "FAIL webui_context.mjs"; tail -n 20 "$tmp/server-ctx.log"; fails=$((fails + 1)); fi
stop_server $SERVER_PID

# ---- a second server: --timeout, then its model file truncated under it -----------------------
# A request before: 200. After: /health says 503 model_file_changed, the next
# completion gets a 503 naming the change, and the server stops by itself
# with exit status 1 and a "pocket: error:" line (rather than a SIGBUS).
cp models/kjv-moe-f16.gguf "$tmp/copy.gguf"
start_server "$tmp/server2.log" -m "$tmp/copy.gguf" -c 256 -t 1 --chat-template chatml --timeout 1
S2=$SERVER_PID PORT2=$SERVER_PORT
req() {  # req PATH BODY -> "STATUS JSON" on stdout (BODY empty: GET)
    node -e "const [p, b] = process.argv.slice(1);
fetch('http://127.0.0.1:$PORT2' + p, b ? {method: 'POST', headers: {'Content-Type': 'application/json'}, body: b} : {})
  .then(async r => console.log(r.status, await r.text()), e => { console.log('0', String(e)); })" "$1" "$2"
}
# --timeout 1: a client that trickles half a request line is cut off after about a second
slow=$(node -e "const s = require('net').connect($PORT2, '127.0.0.1', () => s.write('GET /health HTTP/1.1\\r\\nHost: x\\r\\nX-Slow: '));
const t0 = Date.now(); s.on('data', () => {}); s.on('error', () => {});
s.on('close', () => { console.log(Date.now() - t0); process.exit(0); }); setTimeout(() => { console.log('open'); process.exit(0); }, 6000);")
if [ "$slow" != open ] && [ "$slow" -ge 500 ] && [ "$slow" -le 4000 ]; then echo "ok   --timeout 1: a trickling client is closed after $slow ms"
else echo "FAIL --timeout 1: trickling client: $slow"; fails=$((fails + 1)); fi
body='{"prompt": "And God said", "max_tokens": 2}'
r1=$(req /v1/completions "$body")
truncate -s 200000 "$tmp/copy.gguf"
r2=$(req /health "")
r3=$(req /v1/completions "$body")
i=0; while kill -0 $S2 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
stop_server $S2; rc2=$?
case "$r1" in "200 "*) echo "ok   completion before the change";; *) echo "FAIL completion before the change: $r1"; fails=$((fails + 1));; esac
case "$r2" in "503 "*model_file_changed*) echo "ok   /health after truncation: $r2";; *) echo "FAIL /health after truncation: $r2"; fails=$((fails + 1));; esac
case "$r3" in "503 "*"changed while in use"*) echo "ok   completion after truncation: $r3";; *) echo "FAIL completion after truncation: $r3"; fails=$((fails + 1));; esac
if [ $rc2 -eq 1 ] && grep -q "^pocket: error: .*copy.gguf: the model file changed while in use.*the server stops" "$tmp/server2.log"; then
    echo "ok   server stopped by itself: $(grep '^pocket: error' "$tmp/server2.log")"
else echo "FAIL server after truncation: exit $rc2"; tail -n 5 "$tmp/server2.log"; fails=$((fails + 1)); fi
# ---- the answer / reasoning split: a model whose greedy answer is known ------------------
# tests/lib/mk_chain_model.py: with the harmony, chatml (<think>) and gemma4
# templates it answers with reasoning and markers cut across tokens;
# tests/cli/serve/reasoning.mjs checks message.content / reasoning_content,
# streamed and not, and the reasoning_format option.
"$PYTHON" tests/lib/mk_chain_model.py "$tmp/chain.gguf" || fail "mk_chain_model.py failed"
for case in harmony chatml gemma4; do
    case $case in
    harmony) expect='{"raw": "<|channel|>analysis<|message|>Weigh it: 1 + 1.<|end|><|start|>assistant<|channel|>final<|message|>Two.",
                      "content": "Two.", "reasoning": "Weigh it: 1 + 1.",
                      "markers": ["<|channel|>", "<|message|>", "<|end|>", "<|start|>"]}';;
    chatml) expect='{"raw": "<think>\nPondering the sum.\n</think>\n\nIt is two.", "content": "It is two.",
                     "reasoning": "Pondering the sum.", "markers": ["<think>", "</think>"]}';;
    gemma4) expect='{"raw": "Sure<|channel>thought\nhmm<channel|> done", "content": "Sure done", "reasoning": "hmm",
                     "markers": ["<|channel>", "<channel|>"]}';;
    esac
    start_server "$tmp/server-$case.log" -m "$tmp/chain.gguf" -c 256 -t 1 --chat-template $case --api-key "$KEY"
    for t in reasoning webui_reasoning; do
        if POCKET_URL="http://127.0.0.1:$SERVER_PORT" POCKET_EXPECT="$expect" node tests/cli/serve/$t.mjs; then
            echo "ok   $t.mjs ($case)"
        else echo "FAIL $t.mjs ($case)"; tail -n 20 "$tmp/server-$case.log"; fails=$((fails + 1)); fi
    done
    stop_server $SERVER_PID; rc3=$?
    [ $rc3 -eq 0 ] || { echo "FAIL $case server exit status $rc3 after SIGTERM"; fails=$((fails + 1)); }
done
[ $fails -eq 0 ] || exit 1
echo "t_serve: all passed"
