#!/bin/sh
# `pocket serve`'s prompt cache end to end (tests/cli/serve/cache.mjs, through
# the official `openai` npm client), on loopback, for an attention model (the
# bundled one) and a Gated DeltaNet one (the qwen35moe llama.cpp fixture,
# tests/lib/fixtures.sh): cached_tokens per turn, the same greedy text as a
# prompt processed whole, checkpoints, slot choice with --parallel 2,
# --cache-ram, --cache-dir across a restart, and state files that must not be
# used (corrupt, truncated, junk, another model's, other cache types).
# The DeltaNet run goes first: one of its state files is the "other model's"
# file of the second. Needs node + npm (openai goes to $BUILD/tmp/node).
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
. tests/lib/fixtures.sh
. tests/lib/serve_node.sh   # need_npm
tmp="$BUILD/tmp/serve-cache"; rm -rf "$tmp"; mkdir -p "$tmp"
NODE_DIR="$BUILD/tmp/node"
fail() { echo "FAIL: $*"; exit 1; }

need_npm openai@7
deltanet=$(fixture_model qwen35moe) || fail "no qwen35moe fixture"

fails=0
foreign=""
for m in deltanet kjv; do
    case $m in
    deltanet) model=$deltanet; rec=1 ;;
    kjv) model=models/kjv-moe-f16.gguf; rec=0 ;;
    esac
    start=$(date +%s)
    if POCKET_BIN="$BUILD/pocket" POCKET_MODEL="$model" POCKET_TMP="$tmp/$m" POCKET_RECURRENT=$rec \
       POCKET_FOREIGN="$foreign" POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" node tests/cli/serve/cache.mjs; then
        echo "ok   cache.mjs $m ($(( $(date +%s) - start ))s)"
    else
        echo "FAIL cache.mjs $m (server logs in $tmp/$m)"; fails=$((fails + 1))
    fi
    foreign=$(ls "$tmp/$m/states/"*.pkstate 2>/dev/null | head -n 1)
done
[ $fails -eq 0 ] || exit 1
echo "t_serve_cache: all passed"
