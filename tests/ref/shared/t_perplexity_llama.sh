#!/bin/sh
# pocket perplexity of the bundled model over the whole held-out KJV text
# ($POCKET_SHARED/text/valid.txt, 209 windows of 256) must agree within 0.5%
# with llama.cpp's figure for the same file and settings, read from
# $POCKET_SHARED/models/README.md (the "F16 (this file)" row).
set -eu
BUILD=${BUILD:-build}
. tests/lib/shared.sh
need_shared text/valid.txt models/README.md
ref=$(sed -n 's/.*F16 (this file).*\*\*\([0-9][0-9.]*\) ±.*/\1/p' "$POCKET_SHARED/models/README.md")
[ -n "$ref" ] || { echo "FAIL: cannot read llama.cpp's figure from $POCKET_SHARED/models/README.md"; exit 1; }
got=$("$BUILD/pocket" perplexity -m models/kjv-moe-f16.gguf -f "$POCKET_SHARED/text/valid.txt" -c 256 -t 2 2>/dev/null |
      sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p')
[ -n "$got" ] || { echo "FAIL: pocket perplexity printed no estimate"; exit 1; }
echo "pocket PPL $got, llama.cpp PPL $ref"
awk -v a="$got" -v b="$ref" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
    printf "  relative difference %.5f%% (tolerance 0.50%%)\n", 100 * d; exit !(d <= 0.005) }'
