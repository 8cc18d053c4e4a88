#!/bin/sh
# Replay every fuzz harness (fuzz/fuzz_*.c, linked with fuzz/driver.c into
# $BUILD/fuzz/ by make) over its committed seeds (fuzz/corpus/NAME) and the
# inputs of past findings (fuzz/regress/NAME): each must run to the end.
# Under `make sanitize` this is ASan + UBSan + PK_ASSERT on those inputs, so
# the bugs the fuzzers found stay fixed without clang or libFuzzer.
# fuzz_tokenizer runs on the repository's vocabularies only
# (POCKET_FUZZ_VOCABS empty), the same wherever it runs; on llama.cpp's in
# ../shared too: tests/ref/shared/t_fuzz_vocabs.sh (make test-shared).
set -u
BUILD=${BUILD:-build}
POCKET_FUZZ_VOCABS=; export POCKET_FUZZ_VOCABS
fails=0; n=0
for h in "$BUILD"/fuzz/fuzz_*; do
    [ -x "$h" ] || continue
    name=$(basename "$h"); name=${name#fuzz_}
    dirs="fuzz/corpus/$name"
    [ -d "fuzz/regress/$name" ] && dirs="$dirs fuzz/regress/$name"
    n=$((n + 1))
    if out=$("$h" $dirs 2>&1); then echo "ok   $name: $(echo "$out" | tail -n 1)"
    else echo "FAIL $name:"; echo "$out" | tail -n 30 | sed 's/^/    /'; fails=$((fails + 1)); fi
done
[ $n -gt 0 ] || { echo "FAIL no harness built in $BUILD/fuzz"; exit 1; }
[ $fails -eq 0 ] || exit 1
echo "t_fuzz_regress: $n harnesses, all passed"
