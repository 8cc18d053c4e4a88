#!/bin/sh
# pocket chat: a piped conversation on the bundled model with
# --chat-template chatml (prompt markers, streamed answers, KV reuse across
# turns, /reset, /exit, end of input); a conversation longer than the
# context goes on (the oldest turns dropped, the system text kept, one line
# saying so); a message too long for the context; Ctrl-C (stops an answer,
# not the program; once at the prompt quits); the terminal (a pseudo-terminal
# driven by tests/lib/pty_chat.py: line editing, history, Ctrl-C); template
# detection from a GGUF's tokenizer.chat_template, and the one-line errors
# for a bad template name, a model without a template and an unknown template.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
M=models/kjv-moe-f16.gguf
tmp="$BUILD/tmp/chat"; rm -rf "$tmp"; mkdir -p "$tmp"
fails=0; n=0
ok() { n=$((n + 1)); echo "ok   $1"; }
bad() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $1"; [ -f "$tmp/err" ] && sed 's/^/    /' "$tmp/err" | head -20; }
check() { name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }
# expect_error NAME SUBSTRING CMD... : exit 1, one stderr line with SUBSTRING
expect_error() {
    name=$1; want=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?
    if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^pocket: error: " "$tmp/err" &&
       grep -qF -- "$want" "$tmp/err"; then ok "$name: $(cat "$tmp/err")"; else bad "$name (exit $rc)"; fi
}

check "pocket chat --help" "$P" chat --help >/dev/null
"$P" --help | grep -q "^  chat " && ok "chat in pocket --help" || bad "chat in pocket --help"

# ---- a piped conversation ---------------------------------------------------------
printf 'hello\nAnd God said\n/reset\nAnd God said\n/exit\nnot read\n' |
    "$P" chat -m "$M" --chat-template chatml -n 16 --temp 0 -t 2 --show-prompt >"$tmp/out" 2>"$tmp/err"
rc=$?
check "conversation exits 0" [ $rc -eq 0 ]
check "prompt markers and echoed input" grep -q "^> hello$" "$tmp/out"
check "four prompts (3 messages, /reset, /exit)" [ "$(grep -c '^> ' "$tmp/out")" -eq 5 ]
# an answer line follows each message
answers=$(awk '/^> (hello|And God said)$/ { getline a; if (length(a) > 5 && a !~ /^> /) k++ } END { print k + 0 }' "$tmp/out")
check "three answers streamed ($answers)" [ "$answers" -eq 3 ]
check "input after /exit is not read" sh -c "! grep -q 'not read' '$tmp/out'"
check "ChatML prompt markers" grep -q '^<|im_start|>user$' "$tmp/err"
check "generation prompt" grep -q '^<|im_start|>assistant$' "$tmp/err"
check "the answer is in the history" grep -q '<|im_end|>$' "$tmp/err"
# token counts per turn: turn 2 reuses turn 1's tokens, turn 3 (after /reset) starts over
grep '^\[prompt: ' "$tmp/err" | sed 's/\[prompt: \([0-9]*\) tokens, \([0-9]*\) new\]/\1 \2/' >"$tmp/counts"
set -- $(cat "$tmp/counts")
check "3 prompts formatted" [ $# -eq 6 ]
if [ $# -eq 6 ]; then
    check "turn 1 decodes everything ($1/$2)" [ "$1" -eq "$2" ]
    check "turn 2 decodes only the new tokens ($3/$4)" [ "$4" -lt "$3" ] && [ "$4" -gt 0 ]
    check "turn 3 after /reset starts over ($5/$6)" [ "$5" -eq "$6" ] && [ "$5" -lt "$3" ]
    check "turn 3 equals turn 1 in length ($5 vs $1, same shape of prompt)" [ "$5" -eq "$1" ]
fi
check "/reset acknowledged" grep -q '^\[conversation reset\]$' "$tmp/err"
# after /reset the history is gone: the last prompt does not mention hello
awk '/^\[conversation reset\]/ { r = 1 } r' "$tmp/err" >"$tmp/after"
check "/reset forgets the history" sh -c "! grep -q '^hello' '$tmp/after'"

# greedy answers are reproducible, and the same after /reset as in a fresh chat
printf 'And God said\n' | "$P" chat -m "$M" --chat-template chatml -n 16 --temp 0 -t 2 >"$tmp/fresh" 2>/dev/null
a1=$(sed -n 2p "$tmp/fresh"); a3=$(awk '/^> And God said$/ { getline a; last = a } END { print last }' "$tmp/out")
check "after /reset the answer equals a fresh chat's" [ -n "$a1" ] && [ "$a1" = "$a3" ]

# end of input exits 0
printf 'In the beginning' | "$P" chat -m "$M" --chat-template chatml -n 4 --temp 0 >"$tmp/out" 2>"$tmp/err"
check "end of input exits 0 (no trailing newline)" [ $? -eq 0 ] && [ "$(grep -c '^> ' "$tmp/out")" -eq 2 ]

# a conversation longer than the context, default flags (the bundled model's
# 256 tokens, -n 256): every turn is answered, the oldest turns are dropped
# with one line each time, the system text stays
printf 'hello\nAnd God said\nWho made the light?\nTell me more\nAnd then?\nWhat came next?\n' |
    "$P" chat -m "$M" --chat-template chatml --system "You are a scribe." --temp 0 -t 2 --show-prompt \
    >"$tmp/out" 2>"$tmp/err"
check "long conversation exits 0" [ $? -eq 0 ]
answers=$(awk '/^> ./ { getline a; if (length(a) > 5 && a !~ /^> /) k++ } END { print k + 0 }' "$tmp/out")
check "long conversation: six answers ($answers)" [ "$answers" -eq 6 ]
drops=$(grep -c '^\[dropped the \(oldest turn\|[0-9]* oldest turns\) to fit the 256-token context\]$' "$tmp/err")
check "long conversation: turns dropped, one line each time ($drops)" [ "$drops" -ge 4 ]
check "long conversation: no error, no refusal" sh -c "! grep -q 'too long\|context full\|error' '$tmp/err'"
# the last prompt: the system text, then the last message only
awk '/^\[prompt: / { p = "" } { p = p $0 "\n" } END { printf "%s", p }' "$tmp/err" >"$tmp/last"
check "long conversation: the system text is kept" grep -q '^You are a scribe\.<|im_end|>$' "$tmp/last"
check "long conversation: the oldest turns are gone" sh -c "! grep -q '^hello<' '$tmp/last'"
check "long conversation: the last message is there" grep -q '^What came next?<|im_end|>$' "$tmp/last"
set -- $(sed -n 's/^\[prompt: \([0-9]*\) tokens.*/\1/p' "$tmp/err")
over=0; for t in "$@"; do [ "$t" -le 192 ] || over=1; done
check "long conversation: every prompt leaves a quarter of the context ($*)" [ $over -eq 0 ] && [ $# -eq 6 ]
# after a drop the context is cut back to what the prompts share (the system
# text), not decoded again from the start
reused=$(sed -n 's/^\[prompt: \([0-9]*\) tokens, \([0-9]*\) new\]$/\1 \2/p' "$tmp/err" |
         awk 'NR > 1 && $2 < $1 - 10 { k++ } END { print k + 0 }')
check "long conversation: turns 2-6 reuse the system text's tokens ($reused of 5)" [ "$reused" -eq 5 ]

# a message too long for the context even alone is refused; the chat goes on
long="And God said, Let there be light: and there was light. And God saw the light, that it was good."
printf '%s\nhi\n' "$long" | "$P" chat -m "$M" --chat-template chatml -c 48 -n 4 --temp 0 >"$tmp/out" 2>"$tmp/err"
check "message too long exits 0" [ $? -eq 0 ]
check "message too long: one line" [ "$(grep -c '^\[message too long: the prompt would be [0-9]* tokens, the context holds 48' "$tmp/err")" -eq 1 ]
check "message too long: the next message is answered" [ "$(grep -c '^> ' "$tmp/out")" -eq 3 ] &&
    [ "$(awk '/^> hi$/ { getline a; print length(a) }' "$tmp/out")" -gt 0 ]
# an answer that fills the window stops with a line
printf 'hi\n' | "$P" chat -m "$M" --chat-template chatml -c 40 -n -1 --temp 0 >"$tmp/out" 2>"$tmp/err"
check "answer cut at context full" grep -q '^\[answer cut: the context is full' "$tmp/err"

# wait_for FILE PATTERN: up to 10 s for a line matching PATTERN
wait_for() {
    j=0; while [ $j -lt 100 ]; do grep -q "$2" "$1" && return 0; sleep 0.1; j=$((j + 1)); done
    return 1
}
# ---- Ctrl-C ------------------------------------------------------------------------------
fifo="$tmp/fifo"; mkfifo "$fifo"
"$P" chat -m "$M" --chat-template chatml -c 2048 -n -1 --temp 0 -t 2 <"$fifo" >"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3>"$fifo"
echo "And God said" >&3
i=0; while [ $i -lt 100 ] && [ "$(wc -c <"$tmp/out")" -lt 40 ]; do sleep 0.1; i=$((i + 1)); done
kill -INT $pid
check "Ctrl-C stops the answer" wait_for "$tmp/err" '^\[answer stopped\]$'
check "the program is still running" kill -0 $pid
echo "/reset" >&3
wait_for "$tmp/err" '^\[conversation reset\]$'; sleep 0.3
kill -INT $pid
i=0; while [ $i -lt 100 ] && kill -0 $pid 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
if kill -0 $pid 2>/dev/null; then bad "one Ctrl-C at the prompt exits"; kill $pid
else wait $pid; rc=$?; check "one Ctrl-C at the prompt exits 0 ($rc)" [ $rc -eq 0 ]; fi
exec 3>&-

# ---- a terminal: line editing, history, Ctrl-C (tests/lib/pty_chat.py) --------------
"$PYTHON" tests/lib/pty_chat.py "$P" "$M" "$tmp" >"$tmp/pty" 2>&1
sed 's/^/  /' "$tmp/pty"
k=$(grep -c '^\(ok  \|FAIL\) ' "$tmp/pty"); f=$(grep -c '^FAIL ' "$tmp/pty")
n=$((n + k)); fails=$((fails + f))
check "pty_chat.py ran every check ($k)" [ "$k" -ge 20 ]

# ---- templates: errors and detection ----------------------------------------------------
expect_error "bad template name" "'vicuna'" "$P" chat -m "$M" --chat-template vicuna
expect_error "model without a template" "no chat template" "$P" chat -m "$M"
expect_error "unknown option" "--bogus" "$P" chat -m "$M" --bogus
# models whose GGUF carries a template
mk() { "$PYTHON" tests/lib/mk_template_model.py "$@"; }   # mk OUT TEMPLATE [ADD_BOS]
mk "$tmp/chatml.gguf" "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
mk "$tmp/gemma.gguf" "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
mk "$tmp/mistral.gguf" "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% endif %}{% endfor %}"
printf 'hi\n' | "$P" chat -m "$tmp/chatml.gguf" -n 2 --temp 0 --show-prompt >"$tmp/out" 2>"$tmp/err"
check "detected ChatML template runs" [ $? -eq 0 ]
check "detected ChatML template named" grep -q 'template chatml (from the model)' "$tmp/err"
check "detected ChatML prompt" grep -q '^<|im_start|>user$' "$tmp/err"
printf 'hi\n' | "$P" chat -m "$tmp/gemma.gguf" -n 2 --temp 0 --show-prompt >"$tmp/out" 2>"$tmp/err"
check "detected Gemma template" grep -q '^<start_of_turn>model$' "$tmp/err"
expect_error "unknown template quoted" '"{{ bos_token }}{% for message in message..."' "$P" chat -m "$tmp/mistral.gguf"
printf 'hi\n' | "$P" chat -m "$tmp/mistral.gguf" --chat-template llama3 -n 2 --temp 0 --show-prompt >"$tmp/out" 2>"$tmp/err"
check "override of an unknown template" grep -q '<|start_header_id|>assistant<|end_header_id|>$' "$tmp/err"
check "no BOS text (the test vocab's BOS is not a special token)" grep -q '^<|start_header_id|>user<|end_header_id|>$' "$tmp/err"

# Llama-3 BOS: written as text when the tokenizer does not add it, never twice
llama3="{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
mk "$tmp/llama3-nobos.gguf" "$llama3" 0
mk "$tmp/llama3-bos.gguf" "$llama3" 1
printf 'hi\n' | "$P" chat -m "$tmp/llama3-nobos.gguf" -n 2 --temp 0 --show-prompt >"$tmp/out" 2>"$tmp/err"
check "llama3 detected" grep -q 'template llama3 (from the model)' "$tmp/err"
check "llama3: BOS text when the tokenizer adds none" grep -q '^<|begin_of_text|><|start_header_id|>user<|end_header_id|>$' "$tmp/err"
c1=$(sed -n 's/^\[prompt: \([0-9]*\) tokens.*/\1/p' "$tmp/err")
printf 'hi\n' | "$P" chat -m "$tmp/llama3-bos.gguf" -n 2 --temp 0 --show-prompt >"$tmp/out" 2>"$tmp/err"
check "llama3: no BOS text when the tokenizer adds it" grep -q '^<|start_header_id|>user<|end_header_id|>$' "$tmp/err"
c2=$(sed -n 's/^\[prompt: \([0-9]*\) tokens.*/\1/p' "$tmp/err")
check "llama3: one BOS token either way ($c1 = $c2 tokens)" [ -n "$c1" ] && [ "$c1" = "$c2" ]

# ---- reasoning models: the answer on stdout, the reasoning on stderr ------------------
# the chain model (tests/lib/mk_chain_model.py) answers each template's generation
# prompt with a known text, reasoning and markers cut across tokens
"$PYTHON" tests/lib/mk_chain_model.py "$tmp/chain.gguf" >/dev/null || bad "mk_chain_model.py"
chat2() {  # chat2 TEMPLATE [OPTIONS]: two turns, greedy
    t=$1; shift
    printf 'hi\nagain\n' | "$P" chat -m "$tmp/chain.gguf" --chat-template "$t" -n 64 --temp 0 --show-prompt "$@" \
        >"$tmp/out" 2>"$tmp/err"
}
chat2 harmony
check "harmony: exits 0" [ $? -eq 0 ]
check "harmony: the answer on stdout" [ "$(grep -c '^Two\.$' "$tmp/out")" -eq 2 ]
check "harmony: no marker on stdout" sh -c "! grep -q '<|' '$tmp/out'"
check "harmony: the reasoning on stderr" grep -q '^Weigh it: 1 + 1\.$' "$tmp/err"
check "harmony: reasoning framed" [ "$(grep -c '^\[reasoning\]$' "$tmp/err")" -eq 2 ] &&
    [ "$(grep -c '^\[end of reasoning\]$' "$tmp/err")" -eq 2 ]
check "harmony: the history keeps the answer, not the reasoning" \
    grep -qF '<|start|>assistant<|message|>Two.<|return|><|start|>user<|message|>again' "$tmp/err"
check "harmony: no channel markers in the history" sh -c "! grep -q 'analysis' '$tmp/err'"
chat2 chatml
check "<think>: the answer on stdout" [ "$(grep -c '^It is two\.$' "$tmp/out")" -eq 2 ]
check "<think>: no marker on stdout" sh -c "! grep -q 'think>' '$tmp/out'"
check "<think>: the reasoning on stderr" grep -q '^Pondering the sum\.$' "$tmp/err"
chat2 gemma4
check "gemma4: no channel marker on stdout" sh -c "! grep -q 'channel' '$tmp/out'"
check "gemma4: the reasoning on stderr" grep -q '^hm$' "$tmp/err"
chat2 harmony --hide-reasoning
check "--hide-reasoning: the answer" [ "$(grep -c '^Two\.$' "$tmp/out")" -eq 2 ]
check "--hide-reasoning: no reasoning" sh -c "! grep -q 'Weigh\|reasoning\]' '$tmp/err'"
chat2 harmony --reasoning-format none
check "--reasoning-format none: the raw text" grep -qF '<|channel|>analysis<|message|>Weigh it: 1 + 1.<|end|>' "$tmp/out"
check "--reasoning-format none: nothing framed" sh -c "! grep -q '^\[reasoning\]' '$tmp/err'"
expect_error "bad --reasoning-format" "'deepseek' is not auto or none" "$P" chat -m "$tmp/chain.gguf" --reasoning-format deepseek
expect_error "--hide-reasoning with none" "--hide-reasoning needs" \
    "$P" chat -m "$tmp/chain.gguf" --chat-template harmony --reasoning-format none --hide-reasoning

echo "$((n - fails)) of $n chat checks passed"
[ $fails -eq 0 ]
