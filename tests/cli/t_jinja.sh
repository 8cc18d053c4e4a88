#!/bin/sh
# pocket's Jinja engine (pocket template) against Python's Jinja2 (Debian
# python3-jinja2, run by tests/lib/jinja_ref.py as Hugging Face's
# apply_chat_template runs it), byte for byte:
#   - every chat template of tests/data/templates/ (../shared/chat-templates/)
#     on every conversation of tests/data/chat/ (system prompts, multi-turn,
#     tools, tool calls with arguments as a string and as an object, tool
#     results, reasoning_content, multi-part content, enable_thinking,
#     reasoning_effort), with Hugging Face's environment (trim_blocks,
#     lstrip_blocks) and with Jinja2's plain one;
#   - the snippets of tests/data/jinja/snippets.txt (filters, tests, methods,
#     loops, macros, scopes, white space, printing, errors) on
#     tests/data/jinja/vars.json, both environments;
#   - random templates from tests/lib/jinja_gen.py (fixed seeds);
# where Jinja2 raises, pocket must fail too (and the other way round); a
# difference names template, conversation and the first differing byte.
# Then: bad templates (tests/data/jinja/bad/: syntax errors, unknown filter,
# runaway recursion and loops, huge output, memory) give one error line
# naming the template line, exit 1, no crash; the command's options and
# errors; a model's own tokenizer.chat_template (-m) and its BOS.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
tmp="$BUILD/tmp/jinja"; rm -rf "$tmp"; mkdir -p "$tmp"
fails=0; n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $1"; }
check() { name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# expect_error NAME SUBSTRING CMD... : exit 1, one stderr line "pocket: error: ...SUBSTRING..."
expect_error() {
    name=$1; want=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^pocket: error: " "$tmp/err" &&
       grep -qF -- "$want" "$tmp/err"; then ok "$name: $(cat "$tmp/err")"
    else bad "$name (exit $rc, wanted \"$want\"): $(head -c 300 "$tmp/err")"; fi
}

"$PYTHON" -c 'import jinja2' 2>/dev/null ||
    { echo "FAIL Python's Jinja2 is missing for $PYTHON (Debian: apt-get install python3-jinja2; make installs it as root)"; exit 1; }

NOW=1767225600          # strftime_now's time: 2026-01-01 00:00:00 UTC
FLAGS="--bos-token <s> --eos-token </s> --now $NOW"

# ---- differential runs --------------------------------------------------------------------
# job LABEL TEMPLATE CONVERSATION [FLAGS...]: render with pocket now, with Jinja2 later (one batch)
jobs="$tmp/jobs"; refs="$tmp/refs"; : >"$jobs"; : >"$refs"; k=0
job() {
    label=$1; t=$2; c=$3; shift 3
    k=$((k + 1)); b="$tmp/r$k"
    printf '%s\t%s\n' "$b" "$label" >>"$jobs"
    echo "$t $c $b.ref $*" >>"$refs"
    "$P" template --chat-template-file "$t" "$@" "$c" >"$b.pk" 2>"$b.pkerr"; echo $? >"$b.rc"
}
# excerpt FILE BYTE: 40 bytes around a position, control characters shown
excerpt() { dd if="$1" bs=1 skip=$(($2 > 20 ? $2 - 21 : 0)) count=40 2>/dev/null | od -An -c | tr -s ' ' | tr -d '\n' | head -c 160; }
# compare_jobs WHAT: compare every job since the last call; sets same / raised / differ
compare_jobs() {
    "$PYTHON" tests/lib/jinja_ref.py --batch "$refs"
    same=0; raised=0; differ=0
    while IFS="$(printf '\t')" read -r b label; do
        rc=$(cat "$b.rc")
        if [ "$rc" -ge 128 ]; then
            differ=$((differ + 1)); bad "$label: pocket crashed (exit $rc): $(head -c 300 "$b.pkerr")"; continue
        fi
        if [ -f "$b.ref.err" ]; then
            if [ "$rc" -eq 1 ] && [ "$(wc -l <"$b.pkerr")" -eq 1 ]; then raised=$((raised + 1))
            else differ=$((differ + 1)); bad "$label: Jinja2 raised ($(cat "$b.ref.err")) but pocket did not (exit $rc)"; fi
        elif [ "$rc" -ne 0 ]; then
            differ=$((differ + 1)); bad "$label: pocket failed but Jinja2 rendered: $(head -c 300 "$b.pkerr")"
        elif cmp -s "$b.pk" "$b.ref"; then
            same=$((same + 1))
        else
            at=$(cmp "$b.pk" "$b.ref" 2>&1 | sed -n 's/.*differ: \(byte\|char\) \([0-9]*\).*/\2/p')
            [ -n "$at" ] || at=$(($(wc -c <"$b.pk") < $(wc -c <"$b.ref") ? $(wc -c <"$b.pk") + 1 : $(wc -c <"$b.ref") + 1))
            differ=$((differ + 1))
            bad "$label: first difference at byte $at (pocket $(wc -c <"$b.pk") bytes, Jinja2 $(wc -c <"$b.ref")): pocket [$(excerpt "$b.pk" "$at")] Jinja2 [$(excerpt "$b.ref" "$at")]"
        fi
    done <"$jobs"
    echo "     $1: $same equal, $raised raised in both, $differ differ"
    : >"$jobs"; : >"$refs"
}

# the chat templates x the conversations
nt=0; nc=0
for t in tests/data/templates/*.jinja; do nt=$((nt + 1)); done
for c in tests/data/chat/*.json; do nc=$((nc + 1)); done
check "8 or more chat templates ($nt) and 12 or more conversations ($nc)" [ "$nt" -ge 8 ] && [ "$nc" -ge 12 ]
for t in tests/data/templates/*.jinja; do
    for c in tests/data/chat/*.json; do
        tn=$(basename "$t" .jinja); cn=$(basename "$c" .json)
        job "template $tn, conversation $cn (Hugging Face's environment)" "$t" "$c" $FLAGS
        job "template $tn, conversation $cn (--plain-blocks)" "$t" "$c" $FLAGS --plain-blocks
    done
done
compare_jobs "chat templates x conversations"
check "the chat templates render most conversations ($same of $((nt * nc * 2)) equal)" [ "$same" -ge $((nt * nc * 2 * 3 / 4)) ]
# each template renders a conversation with tool calls (not only errors): arguments as a
# string (Hermes, Qwen3, DeepSeek) or as an object (Qwen3.5 and Qwen3-Coder iterate them)
for t in tests/data/templates/*.jinja; do
    tn=$(basename "$t" .jinja)
    "$P" template --chat-template-file "$t" $FLAGS tests/data/chat/tool_loop.json >"$tmp/one" 2>/dev/null ||
        "$P" template --chat-template-file "$t" $FLAGS tests/data/chat/single_tool_call_object.json >"$tmp/one" 2>/dev/null
    check "$tn renders a conversation with tool calls ($(wc -c <"$tmp/one") bytes)" [ "$(wc -c <"$tmp/one")" -gt 100 ]
done

# the snippets
mkdir -p "$tmp/snip"
awk -v dir="$tmp/snip" '/^## / { name = $2; next } { print > (dir "/" name ".jinja") }' tests/data/jinja/snippets.txt
for t in "$tmp"/snip/*.jinja; do
    sn=$(basename "$t" .jinja)
    job "snippet $sn" "$t" tests/data/jinja/vars.json $FLAGS
    job "snippet $sn (--plain-blocks)" "$t" tests/data/jinja/vars.json $FLAGS --plain-blocks
done
# CRLF and CR line ends read as \n; a final newline is dropped
printf 'a\r\n{%% if t %%}\r\n  b\r\n{%% endif %%}\rc\r\n' >"$tmp/snip/crlf.jinja"
job "snippet crlf" "$tmp/snip/crlf.jinja" tests/data/jinja/vars.json $FLAGS
job "snippet crlf (--plain-blocks)" "$tmp/snip/crlf.jinja" tests/data/jinja/vars.json $FLAGS --plain-blocks
compare_jobs "snippets"
check "the snippets mostly render ($same equal)" [ "$same" -ge 150 ]

# random templates, fixed seeds
"$PYTHON" tests/lib/jinja_gen.py 1 100 "$tmp/gen"
"$PYTHON" tests/lib/jinja_gen.py 7 100 "$tmp/gen"
for t in "$tmp"/gen/*.jinja; do
    job "generated $(basename "$t") (see tests/lib/jinja_gen.py)" "$t" tests/data/jinja/vars.json $FLAGS
    job "generated $(basename "$t") (--plain-blocks)" "$t" tests/data/jinja/vars.json $FLAGS --plain-blocks
done
compare_jobs "generated templates"
check "the generated templates mostly render ($same equal)" [ "$same" -ge 250 ]

# ---- bad templates ----------------------------------------------------------------------------
for t in tests/data/jinja/bad/*.jinja; do
    want=$(head -n 1 "$t" | sed -n 's/^{# expect: \(.*\) #}$/\1/p')
    [ -n "$want" ] || { bad "$t: no '{# expect: ... #}' first line"; continue; }
    expect_error "bad template $(basename "$t" .jinja)" "$want" timeout 120 "$P" template --chat-template-file "$t" tests/data/chat/basic.json
done
# nesting past the parser's limit: brackets, blocks, unary operators
"$PYTHON" -c 'print("{{ " + "(" * 200 + "1" + ")" * 200 + " }}")' >"$tmp/deep1.jinja"
"$PYTHON" -c 'print("{% if true %}" * 300 + "x" + "{% endif %}" * 300)' >"$tmp/deep2.jinja"
"$PYTHON" -c 'print("{{ " + "not " * 300 + "x }}")' >"$tmp/deep3.jinja"
expect_error "brackets nested 200 deep" "brackets nested more than 128 deep" "$P" template --chat-template-file "$tmp/deep1.jinja" tests/data/chat/basic.json
expect_error "blocks nested 300 deep" "nests more than 128 levels deep" "$P" template --chat-template-file "$tmp/deep2.jinja" tests/data/chat/basic.json
expect_error "300 nots" "nests more than 128 levels deep" "$P" template --chat-template-file "$tmp/deep3.jinja" tests/data/chat/basic.json

# ---- the command ---------------------------------------------------------------------------------
T=tests/data/templates/Qwen3.5-4B.jinja
check "pocket template --help" "$P" template --help >/dev/null
"$P" --help | grep -q "^  template " && ok "template in pocket --help" || bad "template in pocket --help"
"$P" template --chat-template-file "$T" tests/data/chat/basic.json >"$tmp/a" 2>"$tmp/err"
check "renders (exit 0, nothing on stderr)" [ $? -eq 0 ] && [ ! -s "$tmp/err" ]
check "the generation prompt from the conversation" sh -c "tail -c 24 '$tmp/a' | grep -q 'assistant'"
"$P" template --chat-template-file "$T" --no-generation-prompt tests/data/chat/basic.json >"$tmp/b"
check "--no-generation-prompt overrides the conversation's" sh -c "! cmp -s '$tmp/a' '$tmp/b' && tail -c 11 '$tmp/b' | grep -q '<|im_end|>'"
"$P" template --chat-template-file "$T" - <tests/data/chat/basic.json >"$tmp/c"
check "conversation from stdin ('-')" cmp -s "$tmp/a" "$tmp/c"
printf '{{ strftime_now("%%Y-%%m-%%d %%H:%%M") }}' >"$tmp/date.jinja"
"$P" template --chat-template-file "$tmp/date.jinja" --now 2026-03-04T05:06:07 tests/data/chat/basic.json >"$tmp/d"
check "--now YYYY-MM-DDTHH:MM:SS ($(cat "$tmp/d"))" [ "$(cat "$tmp/d")" = "2026-03-04 05:06" ]
"$P" template --chat-template-file "$tmp/date.jinja" --now 86400 tests/data/chat/basic.json >"$tmp/d"
check "--now seconds ($(cat "$tmp/d"))" [ "$(cat "$tmp/d")" = "1970-01-02 00:00" ]
printf '{{ messages|length }}{{ tools is defined }}{{ add_generation_prompt }}{{ bos_token is defined }}' >"$tmp/vars.jinja"
"$P" template --chat-template-file "$tmp/vars.jinja" tests/data/chat/bare_array.json >"$tmp/v"
check "a bare message array: messages only ($(cat "$tmp/v"))" [ "$(cat "$tmp/v")" = "1FalseFalseFalse" ]
printf '[]' >"$tmp/empty.json"
expect_error "a template raising on an empty conversation" "raise_exception: No messages provided." "$P" template --chat-template-file "$T" "$tmp/empty.json"
printf '{"messages": [' >"$tmp/badjson.json"
expect_error "invalid JSON names the file" "badjson.json: invalid JSON at line 1" "$P" template --chat-template-file "$T" "$tmp/badjson.json"
printf '"text"' >"$tmp/str.json"
expect_error "a JSON string is not a conversation" "str.json: invalid JSON at line 1, column 6: '[' or '{' expected" "$P" template --chat-template-file "$T" "$tmp/str.json"
expect_error "missing conversation file" "nope.json: cannot open" "$P" template --chat-template-file "$T" "$tmp/nope.json"
expect_error "missing template file" "nope.jinja: cannot open" "$P" template --chat-template-file "$tmp/nope.jinja" tests/data/chat/basic.json
expect_error "no conversation" "no conversation file" "$P" template --chat-template-file "$T"
expect_error "unknown option" "unknown option '--bogus'" "$P" template --bogus tests/data/chat/basic.json
expect_error "bad --now" "--now yesterday: not a time" "$P" template --chat-template-file "$T" --now yesterday tests/data/chat/basic.json
expect_error "the bundled model has no template" "has no chat template (tokenizer.chat_template); give --chat-template-file" "$P" template tests/data/chat/basic.json
expect_error "a template error names the template file" "bad/unknown_tag.jinja: template line 2" "$P" template --chat-template-file tests/data/jinja/bad/unknown_tag.jinja tests/data/chat/basic.json

# ---- a model's own template and its BOS -------------------------------------------------------------
mk() { "$PYTHON" tests/lib/mk_template_model.py "$1" "@$2" "$3"; }   # mk OUT TEMPLATE_FILE ADD_BOS
L=tests/data/templates/meta-llama-Llama-3.1-8B-Instruct.jinja
if mk "$tmp/llama-nobos.gguf" "$L" 0 && mk "$tmp/llama-bos.gguf" "$L" 1; then
    "$P" template -m "$tmp/llama-nobos.gguf" --now $NOW tests/data/chat/tools.json >"$tmp/m0" 2>"$tmp/err"
    check "-m: the model's template renders" [ $? -eq 0 ] && [ -s "$tmp/m0" ]
    eos=$("$PYTHON" -c 'import sys; sys.path.insert(0, "tests/lib"); import gguf_py as G; f = G.read_gguf("'"$tmp/llama-nobos.gguf"'", load_data=False); print(f.kv["tokenizer.ggml.tokens"][f.kv["tokenizer.ggml.eos_token_id"]])' 2>/dev/null)
    "$P" template --chat-template-file "$L" --bos-token '<|begin_of_text|>' --eos-token "$eos" --now $NOW tests/data/chat/tools.json >"$tmp/f0"
    check "-m equals the template file with the model's BOS/EOS texts" cmp -s "$tmp/m0" "$tmp/f0"
    check "the BOS text leads when the tokenizer does not add BOS" sh -c "head -c 17 '$tmp/m0' | grep -q '^<|begin_of_text|>'"
    "$P" template -m "$tmp/llama-bos.gguf" --now $NOW --tokens tests/data/chat/tools.json >"$tmp/m1" 2>"$tmp/err"
    check "the BOS text is dropped when the tokenizer adds BOS (one BOS, not two)" sh -c "tail -c +18 '$tmp/m0' | cmp -s - '$tmp/m1'"
    check "--tokens counts the prompt's tokens ($(cat "$tmp/err"))" grep -q '^[0-9][0-9]* tokens$' "$tmp/err"
    printf '{{ messages[0].content | bogus }}' >"$tmp/broken.jinja"
    mk "$tmp/broken.gguf" "$tmp/broken.jinja" 0 &&
        expect_error "-m: a broken model template names the key" "broken.gguf: tokenizer.chat_template: template line 1, column 26: no filter named 'bogus'" "$P" template -m "$tmp/broken.gguf" tests/data/chat/basic.json
else
    bad "making the test models (tests/lib/gen_model.py)"
fi

echo "t_jinja: $n checks, $fails failed"
[ $fails -eq 0 ]
