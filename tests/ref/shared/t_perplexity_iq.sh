#!/bin/sh
# pocket perplexity of the bundled model in llama.cpp's i-quants (files made
# by llama-quantize with an imatrix, $POCKET_SHARED/models/iq/) over the
# whole held-out KJV text (209 windows of 256) must agree within 0.5% with
# llama.cpp's figure for the same file, read from the table in
# $POCKET_SHARED/models/iq/README.md. PRESETS lists the files whose tensor
# types pocket computes.
set -eu
PRESETS="IQ3_S IQ3_XXS"
BUILD=${BUILD:-build}
. tests/lib/shared.sh
need_shared text/valid.txt models/iq/README.md
fail=0
for p in $PRESETS; do
    need_shared "models/iq/kjv-moe-$p.gguf"
    ref=$(sed -n "s/^| kjv-moe-$p\.gguf |.*| \([0-9][0-9.]*\) ± [0-9.]* |\$/\1/p" "$POCKET_SHARED/models/iq/README.md")
    [ -n "$ref" ] || { echo "FAIL: cannot read llama.cpp's figure for $p from $POCKET_SHARED/models/iq/README.md"; exit 1; }
    got=$("$BUILD/pocket" perplexity -m "$POCKET_SHARED/models/iq/kjv-moe-$p.gguf" -f "$POCKET_SHARED/text/valid.txt" \
          -c 256 -t 2 2>/dev/null | sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
    [ -n "$got" ] || { echo "FAIL: $p: pocket perplexity printed no estimate"; fail=1; continue; }
    echo "$p: pocket PPL $got, llama.cpp PPL $ref"
    awk -v a="$got" -v b="$ref" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
        printf "  relative difference %.5f%% (tolerance 0.50%%)\n", 100 * d; exit !(d <= 0.005) }' || fail=1
done
exit $fail
