#!/bin/sh
# `pocket serve`'s Ollama API end to end (tests/cli/serve/ollama.mjs, through
# the official `ollama` npm client), on loopback: the bundled model with
# Qwen3.5's chat template (tests/data/templates/Qwen3.5-4B.jinja: tools and
# thinking), a 2048-token context, an API key. Needs node + npm (ollama goes to
# $BUILD/tmp/node); when they cannot be had, the test says why and fails.
set -u
BUILD=${BUILD:-build}
P="$BUILD/pocket"
tmp="$BUILD/tmp/serve-ollama"; rm -rf "$tmp"; mkdir -p "$tmp"
NODE_DIR="$BUILD/tmp/node"
KEY="pocket-test-key-$$"
. tests/lib/serve_node.sh   # fail, need_npm, start_server
need_npm ollama@0

start_server "$tmp/server.log" -m models/kjv-moe-f16.gguf -c 2048 -t 1 \
    --chat-template-file tests/data/templates/Qwen3.5-4B.jinja --api-key "$KEY"

POCKET_URL="http://127.0.0.1:$SERVER_PORT" POCKET_KEY="$KEY" POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" \
    node tests/cli/serve/ollama.mjs || { tail -n 40 "$tmp/server.log"; fail "ollama.mjs (server log in $tmp/server.log)"; }
kill -0 "$SERVER_PID" 2>/dev/null || fail "the server died"
echo "t_serve_ollama: all passed"
