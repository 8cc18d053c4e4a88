#!/bin/sh
# pocket perplexity --kl-divergence-base / --kl-divergence: a model compared
# with itself has KLD 0 and 100% same top token; a base file from another
# vocabulary, a corrupt file and mismatched text are refused with one line.
set -eu
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"; M=models/kjv-moe-f16.gguf; T=tests/data/text/valid.txt
tmp="$BUILD/tmp/kld"; rm -rf "$tmp"; mkdir -p "$tmp"
"$P" perplexity -m "$M" -f "$T" -c 128 --chunks 3 -t 2 --kl-divergence-base "$tmp/base.kld" >"$tmp/base.out" 2>/dev/null
"$P" perplexity -m "$M" --kl-divergence "$tmp/base.kld" -t 2 >"$tmp/self.out" 2>/dev/null
cat "$tmp/self.out"
grep -q "mean KLD         0.000000" "$tmp/self.out"
grep -q "same top token   100.000%" "$tmp/self.out"
base_ppl=$(sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p' "$tmp/base.out")
grep -q "PPL base $base_ppl, this $base_ppl, ratio 1.00000" "$tmp/self.out"
fail() { echo "FAIL: $*"; exit 1; }
# refusals: exit 1, one line
check_err() {
    want=$1; shift
    if "$@" >/dev/null 2>"$tmp/err"; then fail "accepted: $*"; fi
    [ "$(grep -c 'pocket: error:' "$tmp/err")" = 1 ] && grep -qF -- "$want" "$tmp/err" || {
        cat "$tmp/err"; fail "bad message for: $*"; }
    echo "ok refused: $(grep 'pocket: error:' "$tmp/err")"
}
"$PYTHON" tests/lib/gen_model.py qwen3moe "$tmp/other.gguf" --seed 1 >/dev/null
check_err "vocabulary" "$P" perplexity -m "$tmp/other.gguf" --kl-divergence "$tmp/base.kld"
head -c 1000 "$tmp/base.kld" >"$tmp/trunc.kld"
check_err "truncated" "$P" perplexity -m "$M" --kl-divergence "$tmp/trunc.kld"
echo "this is not a pocket base file at all" >"$tmp/junk.kld"
check_err "not a pocket KL-divergence base file" "$P" perplexity -m "$M" --kl-divergence "$tmp/junk.kld"
printf 'In the beginning God created the heaven and the earth. And the earth was without form, and void; and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God said, Let there be light: and there was light. And God saw the light, that it was good: and God divided the light from the darkness. And God called the light Day, and the darkness he called Night. And the evening and the morning were the first day. And God said, Let there be a firmament in the midst of the waters, and let it divide the waters from the waters.' >"$tmp/other.txt"
check_err "differs" "$P" perplexity -m "$M" --kl-divergence "$tmp/base.kld" -f "$tmp/other.txt"
check_err "-c 64" "$P" perplexity -m "$M" --kl-divergence "$tmp/base.kld" -c 64
echo "t_kld: ok"
