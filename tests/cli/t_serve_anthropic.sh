#!/bin/sh
# `pocket serve`'s Anthropic Messages API (POST /v1/messages,
# /v1/messages/count_tokens) end to end through the official
# `@anthropic-ai/sdk` npm client (tests/cli/serve/anthropic.mjs), on loopback:
#   1. the bundled model with Qwen3's template (tool calls in its hermes format)
#      and --api-key (sent as x-api-key): create, stream,
#      stop reasons, countTokens, a tool_use -> tool_result round trip, errors
#   2. tests/lib/mk_chain_model.py's model under the chatml template, whose
#      greedy answer has a <think> reasoning: thinking blocks, streamed and not
# Needs node + npm (the package goes to $BUILD/tmp/node); when they cannot be
# had, the test says why and fails.
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
tmp="$BUILD/tmp/serve-anthropic"; rm -rf "$tmp"; mkdir -p "$tmp"
NODE_DIR="$BUILD/tmp/node"
KEY="pocket-test-key-$$"
. tests/lib/serve_node.sh   # fail, need_npm, start_server
need_npm @anthropic-ai/sdk@0
export POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" POCKET_KEY="$KEY"

fails=0
# run NAME LOG EXPECT ARGS...: a server with ARGS, anthropic.mjs against it
# (POCKET_EXPECT=EXPECT), stopped with SIGTERM, exit status 0
run() {
    name=$1; log=$2; expect=$3; shift 3
    start_server "$log" -t 1 --api-key "$KEY" "$@"
    if POCKET_URL="http://127.0.0.1:$SERVER_PORT" POCKET_EXPECT="$expect" node tests/cli/serve/anthropic.mjs; then echo "ok   anthropic.mjs ($name)"
    else echo "FAIL anthropic.mjs ($name)"; tail -n 30 "$log"; fails=$((fails + 1)); fi
    stop_server $SERVER_PID; rc=$?
    [ $rc -eq 0 ] || { echo "FAIL $name: server exit status $rc after SIGTERM"; tail -n 20 "$log"; fails=$((fails + 1)); }
}

run bundled "$tmp/server.log" "" -m models/kjv-moe-f16.gguf -c 1024 --parallel 2 \
    --chat-template-file tests/data/templates/Qwen-Qwen3-0.6B.jinja
"$PYTHON" tests/lib/mk_chain_model.py "$tmp/chain.gguf" || fail "mk_chain_model.py failed"
run thinking "$tmp/server-chain.log" '{"content": "It is two.", "reasoning": "Pondering the sum."}' \
    -m "$tmp/chain.gguf" -c 256 --chat-template chatml
[ $fails -eq 0 ] || exit 1
echo "t_serve_anthropic: all passed"
