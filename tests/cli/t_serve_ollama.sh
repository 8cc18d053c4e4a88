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
. tests/lib/serve_node.sh   # fail, port_of, need_npm
need_npm ollama@0

"$P" serve -m models/kjv-moe-f16.gguf --host 127.0.0.1 --port 0 -c 2048 -t 1 \
    --chat-template-file tests/data/templates/Qwen3.5-4B.jinja --api-key "$KEY" >"$tmp/server.log" 2>&1 &
SERVER=$!
cleanup() { kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null; }
trap cleanup EXIT
trap 'exit 1' INT TERM
PORT=$(port_of "$tmp/server.log" "$SERVER")
[ -n "$PORT" ] || { cat "$tmp/server.log"; fail "the server did not start listening"; }

POCKET_URL="http://127.0.0.1:$PORT" POCKET_KEY="$KEY" POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" \
    node tests/cli/serve/ollama.mjs || { tail -n 40 "$tmp/server.log"; fail "ollama.mjs (server log in $tmp/server.log)"; }
kill -0 "$SERVER" 2>/dev/null || fail "the server died"
echo "t_serve_ollama: all passed"
