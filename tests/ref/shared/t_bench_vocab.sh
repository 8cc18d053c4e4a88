#!/bin/sh
# bench/gen_bench_model.py --vocab: the Qwen3 vocabulary of
# ../shared/tokenizer/ggml-vocab-qwen3.gguf written into a pocket-35b file
# (--vocab-only: the metadata alone) tokenizes as the vocabulary file does.
# The written file stands in for ggml-vocab-qwen3.gguf beside the other
# vocabularies and build/tests/test_tokenizer --vocabs runs on them: every
# llama.cpp vector of the Qwen3 vocabulary, byte round trips, its special
# tokens, concurrent use. The keys: 248,320 tokens (the padding unused
# "[PAD<id>]"), merges, ids and pre-tokenizer as the vocabulary's, context
# 262,144, Qwen3.5's chat template; --ctx and --chat-template override them;
# a vocabulary larger than the geometry's is refused.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
. tests/lib/shared.sh
need_shared tokenizer/ggml-vocab-qwen3.gguf tokenizer/ggml-vocab-qwen3.gguf.inp \
    chat-templates/Qwen3.5-4B.jinja chat-templates/Qwen-Qwen3-0.6B.jinja
[ -x "$BUILD/tests/test_tokenizer" ] || { echo "FAIL: $BUILD/tests/test_tokenizer not built (make)"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
S=$(cd "$POCKET_SHARED" && pwd)
GEN="$PYTHON bench/gen_bench_model.py"

$GEN "$T/v35.gguf" --geometry pocket-35b --layers 4 --vocab "$S/tokenizer/ggml-vocab-qwen3.gguf" \
    --vocab-only > "$T/gen.log" 2>&1 || { echo "FAIL: gen_bench_model.py --vocab-only"; cat "$T/gen.log"; exit 1; }
mkdir "$T/vocabs"
for f in "$S"/tokenizer/ggml-vocab-*; do
    case $f in */ggml-vocab-qwen3.gguf) ;; *) ln -s "$f" "$T/vocabs/" ;; esac
done
ln -s "$T/v35.gguf" "$T/vocabs/ggml-vocab-qwen3.gguf"
if "$BUILD/tests/test_tokenizer" --vocabs "$T/vocabs" > "$T/tok.log" 2>&1; then
    echo "ok: the pocket-35b file's tokenizer: $(grep '^ggml-vocab-qwen3' "$T/tok.log")"
else
    echo "FAIL: the pocket-35b file's tokenizer differs from the Qwen3 vocabulary"
    tail -20 "$T/tok.log"
    fail=1
fi

# the keys, against the vocabulary file and the template files
"$PYTHON" - "$T/v35.gguf" "$S/tokenizer/ggml-vocab-qwen3.gguf" "$S/chat-templates/Qwen3.5-4B.jinja" <<'EOF' || fail=1
import sys
sys.path.insert(0, "tests/lib")
import gguf_py as G
g, v = G.read_gguf(sys.argv[1]), G.read_gguf(sys.argv[2])
tpl = open(sys.argv[3], encoding="utf-8").read()
toks, vt = g.kv["tokenizer.ggml.tokens"], v.kv["tokenizer.ggml.tokens"]
types = g.kv["tokenizer.ggml.token_type"]
n = len(vt)
bad = []
if len(toks) != 248320 or len(types) != 248320:
    bad.append("%d tokens, %d types (want 248320)" % (len(toks), len(types)))
if toks[:n] != vt or list(types[:n]) != list(v.kv["tokenizer.ggml.token_type"]):
    bad.append("the first %d tokens or types differ from the vocabulary's" % n)
if toks[n:] != ["[PAD%d]" % i for i in range(n, len(toks))] or any(types[n:] != 5):
    bad.append("the padding is not [PAD<id>] of type UNUSED (5)")
for k in ("merges", "pre", "model", "bos_token_id", "eos_token_id", "padding_token_id"):
    if g.kv.get("tokenizer.ggml." + k) != v.kv.get("tokenizer.ggml." + k):
        bad.append("tokenizer.ggml.%s differs from the vocabulary's" % k)
if g.kv.get("qwen35moe.context_length") != 262144:
    bad.append("context %s (want 262144)" % g.kv.get("qwen35moe.context_length"))
if g.kv.get("tokenizer.chat_template") != tpl:
    bad.append("tokenizer.chat_template is not Qwen3.5-4B.jinja")
for b in bad:
    print("FAIL: " + b)
if not bad:
    print("ok: 248,320 tokens (%d + [PAD<id>] unused), merges and ids as the vocabulary's, "
          "context 262144, Qwen3.5's template" % n)
sys.exit(1 if bad else 0)
EOF

# the overrides; the Qwen3 geometry takes the vocabulary's own template; a
# vocabulary larger than the geometry's is refused with one line
$GEN "$T/q3.gguf" --geometry qwen3-30b-a3b --layers 1 --vocab "$S/tokenizer/ggml-vocab-qwen3.gguf" \
    --vocab-only > "$T/gen.log" 2>&1 &&
$GEN "$T/o35.gguf" --geometry pocket-35b --layers 1 --vocab "$S/tokenizer/ggml-vocab-qwen3.gguf" \
    --vocab-only --ctx 32768 --chat-template "$S/chat-templates/Qwen-Qwen3-0.6B.jinja" >> "$T/gen.log" 2>&1 ||
    { echo "FAIL: gen_bench_model.py --ctx / --chat-template"; cat "$T/gen.log"; fail=1; }
"$PYTHON" - "$T/q3.gguf" "$T/o35.gguf" "$S/chat-templates/Qwen-Qwen3-0.6B.jinja" <<'EOF' || fail=1
import sys
sys.path.insert(0, "tests/lib")
import gguf_py as G
q3, o35 = G.read_gguf(sys.argv[1]), G.read_gguf(sys.argv[2])
tpl = open(sys.argv[3], encoding="utf-8").read()
checks = [
    (len(q3.kv["tokenizer.ggml.tokens"]) == 151936, "qwen3-30b-a3b: 151936 tokens, no padding"),
    (q3.kv.get("qwen3moe.context_length") == 40960, "qwen3-30b-a3b: context 40960"),
    (q3.kv.get("tokenizer.chat_template") == tpl, "qwen3-30b-a3b: the vocabulary's template (Qwen3's)"),
    (o35.kv.get("qwen35moe.context_length") == 32768, "--ctx 32768"),
    (o35.kv.get("tokenizer.chat_template") == tpl, "--chat-template FILE"),
]
for ok, what in checks:
    print(("ok: " if ok else "FAIL: ") + what)
sys.exit(0 if all(c[0] for c in checks) else 1)
EOF
if $GEN "$T/ds.gguf" --geometry deepseek-v2-lite --layers 1 --vocab "$S/tokenizer/ggml-vocab-qwen3.gguf" \
        --vocab-only > "$T/ds.log" 2>&1; then
    echo "FAIL: deepseek-v2-lite (102,400 tokens) took the 151,936-token vocabulary"; fail=1
elif [ "$(wc -l < "$T/ds.log")" -eq 1 ] && grep -q "151936 tokens, more than the geometry's vocabulary of 102400" "$T/ds.log"; then
    echo "ok: refused: $(cat "$T/ds.log")"
else
    echo "FAIL: deepseek-v2-lite: not the one-line refusal:"; cat "$T/ds.log"; fail=1
fi
exit $fail
