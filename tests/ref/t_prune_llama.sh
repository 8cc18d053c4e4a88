#!/bin/sh
# A file made by pocket prune against llama.cpp on the same file
# (tests/data/models/kjv-moe-prune-k8.llama.json: llama.cpp 34af94c's
# greedy continuation with top-5 logits, one token at a time, and its
# llama-perplexity over tests/data/text/valid.txt -c 256, on the file
# pruned by the fixture's "pruned_with" command).
#  1. The same command prunes the bundled model again: it must keep the
#     experts the fixture records (the file llama.cpp ran).
#  2. pocket's argmax equals llama.cpp's greedy token at all 32 steps and its
#     top-5 logits agree within 1e-3 relative, with the selected kernels and
#     with the reference kernels.
#  3. pocket perplexity agrees with llama.cpp's within 0.5%.
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
REF=tests/data/models/kjv-moe-prune-k8.llama.json
RUN=${POCKET_RUN:-}
tmp="$BUILD/tmp/prune_llama"; rm -rf "$tmp"; mkdir -p "$tmp"
F="$tmp/k8.gguf"
fail() { echo "FAIL: $*"; exit 1; }
field() { "$PYTHON" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$REF" "$1"; }

cmd=$(field 'd["pruned_with"]')
echo "== 1. $cmd"
# shellcheck disable=SC2046 # the recorded command's words, OUT replaced by the file
$RUN "$BUILD/pocket" $(echo "${cmd#pocket }" | sed "s|OUT|$F|") -t 2 >"$tmp/prune.out" 2>"$tmp/prune.err" ||
    { cat "$tmp/prune.err"; fail "pocket prune"; }
"$PYTHON" - "$F" "$REF" <<'EOF'
import json, sys
sys.path.insert(0, "tests/lib")
import gguf_py as G
got = [int(v) for v in G.read_gguf(sys.argv[1], load_data=False).get("pocket.prune.experts")]
want = json.load(open(sys.argv[2]))["experts"]
if got != want:
    print("FAIL: the saliency kept other experts than the fixture's file:\n  got  %s\n  want %s" % (got, want))
    sys.exit(1)
print("kept experts as in the fixture (%d over 6 layers)" % len(got))
EOF

echo "== 2. greedy steps against llama.cpp"
. tests/lib/fixtures.sh
greedy_vs_llama "$F" "$REF" "$tmp"

echo "== 3. perplexity against llama.cpp"
want=$(field 'd["perplexity"]["ppl"]')
got=$($RUN "$BUILD/pocket" perplexity -m "$F" -f "$(field 'd["perplexity"]["text"]')" -c "$(field 'd["perplexity"]["ctx"]')" \
      -t 2 2>/dev/null | sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
[ -n "$got" ] || fail "pocket perplexity printed no estimate"
echo "pocket PPL $got, llama.cpp PPL $want"
awk -v a="$got" -v b="$want" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
    printf "  relative difference %.5f%% (tolerance 0.50%%)\n", 100 * d; exit !(d <= 0.005) }'
