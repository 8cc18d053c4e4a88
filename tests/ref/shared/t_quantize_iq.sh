#!/bin/sh
# pocket quantize of the bundled F16 model with llama-imatrix's matrix
# ($POCKET_SHARED/models/iq/kjv-moe.imatrix.gguf) to each i-quant preset
# below, against llama-quantize's file of the same preset
# ($POCKET_SHARED/models/iq/kjv-moe-PRESET.gguf, same model and matrix):
# every tensor gets llama-quantize's type, the tensors in an i-quant type
# (the preset's own; IQ1's attn_output IQ2_XXS) hold llama-quantize's bytes
# exactly (pocket's K-quant
# importance quantizers, used for the rest, are not ggml's), and pocket's
# perplexity of its file over the whole held-out text is within 0.5% of
# llama.cpp's figure for llama-quantize's file (models/iq/README.md).
PRESETS="IQ2_XXS IQ2_XS IQ1_S IQ1_M"
set -eu
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
. tests/lib/shared.sh
need_shared models/kjv-moe-f16.gguf models/iq/kjv-moe.imatrix.gguf models/iq/README.md text/valid.txt
mkdir -p "$BUILD/tmp"
TMP=$(mktemp -d "$BUILD/tmp/quantize_iq.XXXXXX")
fail=0
for p in $PRESETS; do
    ref=$POCKET_SHARED/models/iq/kjv-moe-$p.gguf
    need_shared "models/iq/kjv-moe-$p.gguf"
    out=$TMP/kjv-moe-$p.gguf
    if ! nice -n 10 "$BUILD/pocket" quantize "$POCKET_SHARED/models/kjv-moe-f16.gguf" "$out" "$p" \
            --imatrix "$POCKET_SHARED/models/iq/kjv-moe.imatrix.gguf" -t 2 >"$TMP/q.log" 2>&1; then
        echo "FAIL: $p: pocket quantize failed: $(tail -n 1 "$TMP/q.log")"; fail=1; continue
    fi
    if ! "$PYTHON" - "$out" "$ref" "$p" <<'EOF'
import sys
sys.path.insert(0, "tests/lib")
import gguf_py as G
# ggml type ids and (block elements, block bytes) of the types these presets write
BLOCK = {0: (1, 4), 1: (1, 2), 10: (256, 84), 12: (256, 144), 13: (256, 176), 14: (256, 210),
         16: (256, 66), 17: (256, 74), 19: (256, 50), 29: (256, 56)}
NAME = {16: "IQ2_XXS", 17: "IQ2_XS", 19: "IQ1_S", 29: "IQ1_M"}
mine, theirs, preset = G.read_gguf(sys.argv[1], load_data=False), G.read_gguf(sys.argv[2], load_data=False), sys.argv[3]
bad, same = [], 0
if mine.tensor_order != theirs.tensor_order:
    bad.append("tensor order or names differ")
fm, ft = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
def data(g, f, name):
    ti = g.tinfo[name]
    bl, bb = BLOCK[ti["type"]]
    start = g.data_offset + ti["offset"]
    return f[start:start + ti["n"] // bl * bb]
for name in theirs.tensor_order:
    if name not in mine.tinfo:
        continue
    a, b = mine.tinfo[name], theirs.tinfo[name]
    if a["type"] != b["type"] or a["ne"] != b["ne"]:
        bad.append("%s: type %d %s, llama-quantize's %d %s" % (name, a["type"], a["ne"], b["type"], b["ne"]))
    elif a["type"] in NAME:
        if data(mine, fm, name) != data(theirs, ft, name):
            bad.append("%s: %s bytes differ from llama-quantize's" % (name, NAME[a["type"]]))
        else:
            same += 1
for line in bad[:10]:
    print("  " + line)
print("  %d i-quant tensors byte for byte llama-quantize's" % same)
sys.exit(1 if bad or same == 0 else 0)
EOF
    then
        echo "FAIL: $p: pocket's file differs from llama-quantize's"; fail=1
    fi
    want=$(sed -n "s/^| kjv-moe-$p\\.gguf |.*| \\([0-9][0-9.]*\\) ± [0-9.]* |\$/\\1/p" "$POCKET_SHARED/models/iq/README.md")
    got=$(nice -n 10 "$BUILD/pocket" perplexity -m "$out" -f "$POCKET_SHARED/text/valid.txt" -c 256 -t 2 2>/dev/null |
          sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
    if [ -z "$want" ] || [ -z "$got" ]; then
        echo "FAIL: $p: no perplexity (pocket '$got', llama.cpp's figure '$want')"; fail=1; continue
    fi
    echo "$p: pocket's file PPL $got, llama.cpp on llama-quantize's file $want"
    awk -v a="$got" -v b="$want" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
        printf "  relative difference %.5f%% (tolerance 0.50%%)\n", 100 * d; exit !(d <= 0.005) }' ||
        { echo "FAIL: $p: more than 0.5% from llama.cpp's figure"; fail=1; }
done
[ $fail -eq 0 ] && rm -rf "$TMP"
exit $fail
