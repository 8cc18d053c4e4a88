#!/bin/sh
# bench/quant_table.sh - quality of each quantization preset on the bundled
# model: file size, bits per weight, perplexity on ../shared/text/valid.txt
# (-c 256, all windows, as in ../shared/models/README.md) and KL divergence
# against the F16 model. Prints a Markdown table. Takes ~10 minutes on 2 cores.
#
#   bench/quant_table.sh [PRESET...]      (default: a representative set)
# With IMATRIX=FILE, presets named NAME+imatrix are quantized with FILE.
set -eu
BUILD=${BUILD:-build}
P="$BUILD/pocket"; M=models/kjv-moe-f16.gguf; T=../shared/text/valid.txt
tmp="$BUILD/tmp/quant_table"; mkdir -p "$tmp"
PRESETS=${*:-Q8_0 Q6_K Q5_K_M Q4_K_M Q4_K_S IQ4_XS Q3_K_M Q2_K MOE_Q2_K}
"$P" perplexity -m "$M" -f "$T" -c 256 -t 2 --kl-divergence-base "$tmp/base.kld" >"$tmp/f16.out" 2>/dev/null
nparams=$("$P" info "$M" | sed -n 's/^parameters *\([0-9.]*\) M total.*/\1/p')
row() { # name file out
    size=$(stat -c %s "$2")
    ppl=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 ± \2/p' "$3")
    kld=$(sed -n 's/^  mean KLD *\([0-9.]*\) +\/- \([0-9.]*\)/\1 ± \2/p' "$3")
    top=$(sed -n 's/^  same top token *\([0-9.]*%\) +\/- \([0-9.]*%\)/\1 ± \2/p' "$3")
    awk -v n="$1" -v s="$size" -v p="$nparams" -v ppl="$ppl" -v kld="${kld:--}" -v top="${top:--}" \
        'BEGIN { printf "| %s | %.2f MiB | %.2f | %s | %s | %s |\n", n, s / 1048576, s * 8 / (p * 1e6), ppl, kld, top }'
}
echo "| type | file size | bits/weight | PPL | mean KLD vs F16 | same top token |"
echo "|---|---|---|---|---|---|"
row F16 "$M" "$tmp/f16.out"
for q in $PRESETS; do
    preset=${q%+imatrix}; extra=""
    [ "$preset" != "$q" ] && extra="--imatrix ${IMATRIX:?set IMATRIX=FILE}"
    "$P" quantize "$M" "$tmp/$q.gguf" "$preset" $extra 2>/dev/null
    "$P" perplexity -m "$tmp/$q.gguf" --kl-divergence "$tmp/base.kld" -t 2 >"$tmp/$q.out" 2>/dev/null
    row "$q" "$tmp/$q.gguf" "$tmp/$q.out"
done
