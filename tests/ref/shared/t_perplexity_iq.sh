#!/bin/sh
# pocket perplexity of the bundled model quantized by llama-quantize to the
# i-quant presets below ($POCKET_SHARED/models/iq/kjv-moe-PRESET.gguf) over
# the whole held-out KJV text (209 windows of 256) must agree within 0.5%
# with llama.cpp's figure for the same file and settings, read from the
# file's row of $POCKET_SHARED/models/iq/README.md. A preset is listed once
# every tensor type in its file loads (IQ2_S's file needs IQ3_S too).
PRESETS="IQ2_XXS IQ2_XS IQ1_S IQ1_M"
set -eu
BUILD=${BUILD:-build}
. tests/lib/shared.sh
need_shared text/valid.txt models/iq/README.md
fail=0
for p in $PRESETS; do
    f=models/iq/kjv-moe-$p.gguf
    need_shared "$f"
    ref=$(sed -n "s/^| kjv-moe-$p\\.gguf |.*| \\([0-9][0-9.]*\\) ± [0-9.]* |\$/\\1/p" "$POCKET_SHARED/models/iq/README.md")
    [ -n "$ref" ] || { echo "FAIL: cannot read llama.cpp's figure for $p from $POCKET_SHARED/models/iq/README.md"; exit 1; }
    got=$(nice -n 10 "$BUILD/pocket" perplexity -m "$POCKET_SHARED/$f" -f "$POCKET_SHARED/text/valid.txt" -c 256 -t 2 \
          2>/dev/null | sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
    [ -n "$got" ] || { echo "FAIL: $p: pocket perplexity printed no estimate"; fail=1; continue; }
    echo "$p: pocket PPL $got, llama.cpp PPL $ref"
    awk -v a="$got" -v b="$ref" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
        printf "  relative difference %.5f%% (tolerance 0.50%%)\n", 100 * d; exit !(d <= 0.005) }' ||
        { echo "FAIL: $p differs from llama.cpp by more than 0.5%"; fail=1; }
done
exit $fail
