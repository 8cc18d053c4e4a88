#!/bin/sh
# t_info_fit.sh - pocket info --mem SIZE: whether the model fits, and which
# builds of it would (tools/info_fit.c, pk_build_estimate), on the bundled
# model (16 experts, top-4).
#  1. The quality table (tools/fit_quality.tsv, embedded in the CLI) holds
#     the docs' figures: every row is found in docs/quantization.md or
#     docs/pruning.md (tests/lib/check_fit.py tsv); a changed figure fails.
#  2. Fits: --mem 1G says so, lists nothing; with --fit it lists builds.
#  3. Does not fit (a budget one byte below the model's need): the advice
#     lists builds, each with its commands; the JSON's figures, order and
#     fit decisions checked against the table and the budget (check_fit.py
#     advice); the text shows the same builds first.
#  4. Nothing fits (64M): says so, and the model's own plan error; exit 0.
#  5. The estimates against real files: the commands of four builds (Q4_K_M;
#     IQ2_XXS, with its importance matrix; 8 of 16 experts kept; 8 kept then
#     Q4_K_M) run as printed (calibration cut short), and each file's tensor
#     data, bytes per token, resident and expert bytes (read with gguf_py)
#     and its loaded plan's context equal the estimate (check_fit.py sizes).
#  6. Bad input: --mem values that are not sizes, --fit without a budget:
#     one-line errors, exit 1.
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"; M=models/kjv-moe-f16.gguf; T=tools/fit_quality.tsv
tmp="$BUILD/tmp/info_fit"; rm -rf "$tmp"; mkdir -p "$tmp"
fail() { echo "FAIL: $*"; exit 1; }
chk() { "$PYTHON" tests/lib/check_fit.py "$@" || exit 1; }

echo "== 1. the quality table against the docs"
chk tsv "$T" docs/quantization.md docs/pruning.md
sed 's/0\.003986/0.003987/' "$T" >"$tmp/bad.tsv"
"$PYTHON" tests/lib/check_fit.py tsv "$tmp/bad.tsv" docs/quantization.md docs/pruning.md >"$tmp/bad.out" &&
    fail "a changed KLD passed the table check"
grep -q "Q4_K_M" "$tmp/bad.out" || fail "the table check did not name Q4_K_M: $(cat "$tmp/bad.out")"

echo "== 2. fits"
"$P" info "$M" --mem 1G >"$tmp/fits.txt"
grep -q "^fit             fits in 1.00 GiB: held whole it needs " "$tmp/fits.txt" || fail "no fit line: $(grep ^fit "$tmp/fits.txt")"
grep -q "^builds" "$tmp/fits.txt" && fail "builds listed for a model that fits"
"$P" info "$M" --mem 1G --fit >"$tmp/fits-all.txt"
grep -q "^builds          [0-9]* that fit in 1.00 GiB" "$tmp/fits-all.txt" || fail "--fit listed nothing"
"$P" info "$M" --mem 1G --json >"$tmp/fit1g.json"
chk advice "$tmp/fit1g.json" "$T" 1073741824
[ "$(grep -c "pocket quantize" "$tmp/fits-all.txt")" -eq "$("$PYTHON" -c "
import json; a = json.load(open('$tmp/fit1g.json')); print(sum(b['fits'] and b['preset'] is not None for b in a['builds']))")" ] ||
    fail "--fit's text lists other builds than the JSON's fitting ones"

echo "== 3. does not fit"
need=$("$PYTHON" -c "import json; print(json.load(open('$tmp/fit1g.json'))['model']['need_bytes'])")
mem=$((need - 1))
"$P" info "$M" --mem "$mem" >"$tmp/short.txt"
grep "^fit\|^builds" "$tmp/short.txt"
grep -q "^fit             does not fit in " "$tmp/short.txt" || fail "no 'does not fit'"
grep -q "^builds          [0-9]* that fit in .*, best first; the quality measured on the bundled 16-expert model, not on this one" \
    "$tmp/short.txt" || fail "no builds header"
grep -q "^      pocket quantize $M models/kjv-moe-f16-Q8_0.gguf Q8_0$" "$tmp/short.txt" || fail "no Q8_0 command"
"$P" info "$M" --mem "$mem" --json >"$tmp/short.json"
chk advice "$tmp/short.json" "$T" "$mem"
# the text's first build is the JSON's first fitting one
first=$(sed -n 's/^  \([^ ].*\) *file .*/\1/p' "$tmp/short.txt" | head -1 | sed 's/ *$//')
want=$("$PYTHON" -c "
import json; b = [b for b in json.load(open('$tmp/short.json'))['builds'] if b['fits']][0]
print(((b['preset'] or '') + (' + ' if b['preset'] and b['keep'] else '') + ('keep %d/16' % b['keep'] if b['keep'] else '')))")
[ "$first" = "$want" ] || fail "the text's first build '$first', the JSON's '$want'"
grep -q "^  Q8_0  *file .*KLD 0.0004, PPL x1.000$" "$tmp/short.txt" || fail "Q8_0's figures: $(grep '^  Q8_0 ' "$tmp/short.txt")"
grep -q "^  Q6_K + keep 12/16 .*KLD ~0.1720, PPL x~1.151$" "$tmp/fits-all.txt" || fail "Q6_K + keep 12's estimate"

echo "== 4. nothing fits"
"$P" info "$M" --mem 64M >"$tmp/none.txt" || fail "exit $? with a budget that nothing fits"
grep -q "^memory plan     does not run: .*memory budget 64.0 MiB is too small" "$tmp/none.txt" || fail "no plan error"
grep -q "^builds          none fits in 64.00 MiB" "$tmp/none.txt" || fail "no 'none fits': $(grep ^builds "$tmp/none.txt")"
"$P" info "$M" --mem 64M --json >"$tmp/none.json"
chk advice "$tmp/none.json" "$T" 67108864
grep -q '"plan_error": ".*too small' "$tmp/none.json" || fail "no plan_error in the JSON"

echo "== 5. the estimates against the files the commands make"
cp "$M" "$tmp/m.gguf"
"$P" info "$tmp/m.gguf" --mem 1G --json >"$tmp/m.json"
# build PRESET KEEP: run its commands (calibration shortened), check the file
build() {
    "$PYTHON" - "$tmp/m.json" "$1" "$2" "$tmp/build.json" >"$tmp/cmds.sh" <<'EOF'
import json, sys
a = json.load(open(sys.argv[1]))
preset = None if sys.argv[2] == "-" else sys.argv[2]
keep = None if sys.argv[3] == "0" else int(sys.argv[3])
b = [b for b in a["builds"] if b["preset"] == preset and b["keep"] == keep][0]
json.dump(b, open(sys.argv[4], "w"))
for c in b["commands"]:
    c = c.replace("CALIB.txt", "tests/data/text/calib.txt -c 256 --chunks 6")
    print('"$P" ' + c[len("pocket "):] + ' >"$tmp/cmd.log" 2>&1 || { cat "$tmp/cmd.log"; exit 1; }')
print(b["commands"][-1].split()[3])   # the file the last command writes
EOF
    out=$(tail -1 "$tmp/cmds.sh")
    sed '$d' "$tmp/cmds.sh" >"$tmp/run.sh"
    P="$P" tmp="$tmp" sh -e "$tmp/run.sh" || fail "the commands of $1 keep $2"
    "$P" info "$out" --mem 1G --json >"$tmp/built.json"
    chk sizes "$tmp/m.gguf" "$out" "$tmp/build.json" "$tmp/built.json" $([ "$2" = 0 ] || echo pruned)
}
build Q4_K_M 0
build IQ2_XXS 0
grep -q '"imatrix": true' "$tmp/build.json" || fail "IQ2_XXS planned without an importance matrix"
build - 8
build Q4_K_M 8

echo "== 6. bad input"
for v in abc -1G nan 8Q 1e30 ""; do
    if "$P" info "$M" --mem "$v" >"$tmp/bad.out" 2>"$tmp/bad.err"; then fail "--mem '$v' accepted"; fi
    [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] || fail "--mem '$v': not one line: $(cat "$tmp/bad.err")"
    grep -q "^pocket: error: --mem: '$v' is not a size" "$tmp/bad.err" || fail "--mem '$v': $(cat "$tmp/bad.err")"
done
if "$P" info "$M" --mem 0 --fit >"$tmp/bad.out" 2>"$tmp/bad.err"; then fail "--fit with --mem 0 accepted"; fi
grep -q "^pocket: error: info: --fit and --json need a memory budget" "$tmp/bad.err" || fail "--fit --mem 0: $(cat "$tmp/bad.err")"
if "$P" info "$M" --mem >"$tmp/bad.out" 2>"$tmp/bad.err"; then fail "--mem without a value accepted"; fi
grep -q "^pocket: error: --mem needs a value" "$tmp/bad.err" || fail "--mem alone: $(cat "$tmp/bad.err")"

rm -rf "$tmp"
echo "t_info_fit: OK"
