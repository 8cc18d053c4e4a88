#!/bin/sh
# `pocket serve`'s small things end to end, on loopback (tests/cli/serve/misc.mjs):
# --alias and any model name, GET /v1/models/{id} through the official `openai`
# client (models.retrieve), x-api-key, llama-server's /tokenize, /detokenize,
# /props, /slots, CORS (headers and preflights with --cors ORIGIN, with
# --cors '*' and without --cors, and a real cross-origin page in headless
# Chromium), and the access log lines (a 200, a streamed 200, a 400, a 404, a
# 401; --quiet keeps only the refusals), keep-alive bytes on a silent stream
# (OpenAI's SSE comment, Anthropic's ping). Three servers on the bundled model:
#   A  --api-key --alias pocket-test --cors <the page's origin>,https://app.example.org --parallel 2
#   B  --quiet, no --cors, no key
#   C  --cors '*', keep-alive bytes after 20 ms of silence (POCKET_SERVE_KEEPALIVE_MS)
# plus a small node server for the page (another origin). Needs node + npm
# (openai, playwright-core, ollama in $BUILD/tmp/node) and Debian's chromium, as
# t_serve.sh: when they cannot be had, the test says why and fails.
set -u
. tests/lib/serve_node.sh   # fail, need_npm, start_server
BUILD=${BUILD:-build}
tmp="$BUILD/tmp/serve-misc"; rm -rf "$tmp"; mkdir -p "$tmp"
NODE_DIR="$BUILD/tmp/node"
need_npm openai@7 playwright-core@1 ollama@0
P="$BUILD/pocket" KEY="pocket-misc-key-$$"
CHROMIUM=/usr/bin/chromium
[ -x "$CHROMIUM" ] || fail "$CHROMIUM is missing: run 'sudo apt-get install chromium' (t_serve.sh installs it as root)"

# the page's origin: a node server on a free port, serving one empty page
node -e "const s = require('http').createServer((q, r) => { r.writeHead(200, {'Content-Type': 'text/html'}); r.end('<!doctype html><title>other origin</title>'); });
s.listen(0, '127.0.0.1', () => console.log('page port ' + s.address().port));" >"$tmp/page.log" 2>&1 &
PAGE=$!
AT_EXIT='kill $PAGE 2>/dev/null; wait $PAGE 2>/dev/null'
j=0; PAGE_PORT=""
while [ $j -lt 100 ] && [ -z "$PAGE_PORT" ]; do PAGE_PORT=$(sed -n 's/^page port //p' "$tmp/page.log"); sleep 0.1; j=$((j + 1)); done
[ -n "$PAGE_PORT" ] || fail "the page server did not start"

common="-m models/kjv-moe-f16.gguf -c 512 -t 1 --chat-template chatml"
start_server "$tmp/a.log" $common --parallel 2 --api-key "$KEY" --alias pocket-test \
    --cors "http://127.0.0.1:$PAGE_PORT/" --cors https://app.example.org
SA=$SERVER_PID PA=$SERVER_PORT
start_server "$tmp/b.log" $common --quiet
SB=$SERVER_PID PB=$SERVER_PORT
export POCKET_SERVE_KEEPALIVE_MS=20   # C: keep-alive bytes after 20 ms of silence (misc.mjs)
start_server "$tmp/c.log" $common --cors '*'
unset POCKET_SERVE_KEEPALIVE_MS
SC=$SERVER_PID PC=$SERVER_PORT

fails=0
# bad --cors / --alias values: one line naming the value, exit 1, before the model loads
for bad in "--cors localhost:3000" "--cors http://a.example/path" "--cors null" "--alias ''"; do
    eval "\"$P\" serve $common --host 127.0.0.1 --port 0 $bad" >"$tmp/bad.log" 2>&1; rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/bad.log")" -eq 1 ] && grep -q "^pocket: error: serve: --" "$tmp/bad.log"; then
        echo "ok   $bad refused: $(cat "$tmp/bad.log")"
    else echo "FAIL $bad: exit $rc: $(cat "$tmp/bad.log")"; fails=$((fails + 1)); fi
done
grep -q "CORS: pages of http://127.0.0.1:$PAGE_PORT, https://app.example.org may call the API" "$tmp/a.log" &&
    echo "ok   start-up line names the --cors origins" || { echo "FAIL start-up CORS line"; fails=$((fails + 1)); }

export POCKET_URL="http://127.0.0.1:$PA" POCKET_KEY="$KEY" POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" \
       POCKET_URL_B="http://127.0.0.1:$PB" POCKET_URL_C="http://127.0.0.1:$PC" POCKET_PAGE="http://127.0.0.1:$PAGE_PORT" \
       POCKET_LOG_A="$tmp/a.log" POCKET_LOG_B="$tmp/b.log" POCKET_CHROMIUM="$CHROMIUM" POCKET_PROFILE="$tmp/chromium-profile"
if node tests/cli/serve/misc.mjs; then echo "ok   misc.mjs"
else echo "FAIL misc.mjs"; fails=$((fails + 1)); echo "--- server A log (tail)"; tail -n 30 "$tmp/a.log"; fi
for s in $SA $SB $SC; do
    kill -0 $s 2>/dev/null || { echo "FAIL a server died"; fails=$((fails + 1)); }
done
[ $fails -eq 0 ] || exit 1
echo "t_serve_misc: all passed"
