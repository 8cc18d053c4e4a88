#!/bin/sh
# What agents need of `pocket serve` end to end (tests/cli/serve/agents.mjs,
# through the official `openai` npm client), on loopback, with a Jinja chat
# template given by --chat-template-file, on three models:
#   - the bundled model with Qwen3's template (tool calls in the hermes
#     format), 200 constrained generations (json_schema, n = 4 a request)
#   - the qwen35moe llama.cpp fixture (tests/lib/fixtures.sh) with Qwen3.5's
#     template (tool calls in the qwen3coder format; enable_thinking false
#     through chat_template_kwargs, and the thinking budget with it on)
#   - the gemma4 llama.cpp fixture with Gemma-4's template (tool calls in
#     its own gemma4 format, its thought channel), 200 calls forced by
#     tool_choice "required" (the others: 8)
# /apply-template is compared with `pocket template` on the same
# conversation; OpenAI's Responses API (tests/cli/serve/responses.mjs) runs
# on the first server. Needs node + npm (openai goes to $BUILD/tmp/node).
set -u
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export PYTHON
. tests/lib/fixtures.sh
. tests/lib/serve_node.sh   # fail, need_npm, start_server
P="$BUILD/pocket"
tmp="$BUILD/tmp/serve-agents"; rm -rf "$tmp"; mkdir -p "$tmp"
NODE_DIR="$BUILD/tmp/node"
KEY="pocket-test-key-$$"

need_npm openai@7
deltanet=$(fixture_model qwen35moe) || fail "no qwen35moe fixture"
gemma4=$(fixture_model gemma4) || fail "no gemma4 fixture"

# the conversation of /apply-template: tool calls with object arguments, tool
# results, and the generation prompt (the server always adds it)
conv="$tmp/conv.json"
"$PYTHON" -c 'import json,sys; c=json.load(open(sys.argv[1])); c["add_generation_prompt"]=True; json.dump(c,open(sys.argv[2],"w"))' \
    tests/data/chat/tool_call_object_args.json "$conv" || fail "cannot write $conv"

fails=0
for m in kjv deltanet gemma4; do
    markers=chatml
    case $m in
    kjv) model=models/kjv-moe-f16.gguf; tmpl=tests/data/templates/Qwen-Qwen3-0.6B.jinja; format=hermes
         kwargs='{}'; think=0; nschema=200; ntools=8; quant=F16 ;;
    deltanet) model=$deltanet; tmpl=tests/data/templates/Qwen3.5-4B.jinja; format=qwen3coder
         kwargs='{"enable_thinking": false}'; think=1; nschema=8; ntools=8; quant=F32 ;;
    gemma4) model=$gemma4; tmpl=tests/data/templates/google-gemma-4-31B-it.jinja; format=gemma4; markers=gemma4
         kwargs='{}'; think=0; nschema=8; ntools=200; quant=F32 ;;
    esac
    "$P" template -m "$model" --chat-template-file "$tmpl" "$conv" >"$tmp/$m.want" 2>"$tmp/$m.template.err" ||
        { cat "$tmp/$m.template.err"; fail "pocket template $m"; }
    start_server "$tmp/$m.log" -m "$model" --parallel 2 -c 2048 -t 1 --chat-template-file "$tmpl" --api-key "$KEY"
    SERVER=$SERVER_PID PORT=$SERVER_PORT
    grep -q "Jinja; $markers markers; tool calls $format" "$tmp/$m.log" || { cat "$tmp/$m.log"; fail "$m: the template line"; }
    start=$(date +%s)
    if POCKET_URL="http://127.0.0.1:$PORT" POCKET_KEY="$KEY" POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" \
       POCKET_FORMAT=$format POCKET_KWARGS="$kwargs" POCKET_THINK=$think POCKET_N_SCHEMA=$nschema POCKET_N_TOOLS=$ntools POCKET_QUANT=$quant \
       POCKET_CONV="$conv" POCKET_EXPECTED="$tmp/$m.want" node tests/cli/serve/agents.mjs; then
        echo "ok   agents.mjs $m ($(( $(date +%s) - start ))s)"
    else
        echo "FAIL agents.mjs $m (server log: $tmp/$m.log)"; fails=$((fails + 1))
    fi
    if [ $m = kjv ]; then   # /v1/responses (tools/serve_responses.c) on the same server
        start=$(date +%s)
        if POCKET_URL="http://127.0.0.1:$PORT" POCKET_KEY="$KEY" POCKET_NODE_DIR="$(cd "$NODE_DIR" && pwd)" \
           node tests/cli/serve/responses.mjs; then
            echo "ok   responses.mjs $m ($(( $(date +%s) - start ))s)"
        else
            echo "FAIL responses.mjs $m (server log: $tmp/$m.log)"; fails=$((fails + 1))
        fi
    fi
    kill -0 "$SERVER" 2>/dev/null || { echo "FAIL the $m server died"; fails=$((fails + 1)); }
    stop_server "$SERVER"; rc=$?
    [ $rc -eq 0 ] || { echo "FAIL the $m server exited with $rc on SIGTERM"; fails=$((fails + 1)); }
done
[ $fails -eq 0 ] || exit 1
echo "t_serve_agents: all passed"
