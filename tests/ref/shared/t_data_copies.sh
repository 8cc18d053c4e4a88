#!/bin/sh
# The repository's copies of ../shared's reference files (what `make test`
# reads instead of them, tests/README.md) are those files: llama.cpp's
# fixture outputs and the bundled model's greedy run byte for byte, the
# fixture models rebuilt by tests/lib/mk_fixture.py byte for byte,
# tests/data/text/calib.txt whole and tests/data/text/valid.txt the first
# lines of the held-out text; models/kjv-moe-f16.gguf is the bundled
# model of ../shared/models; tests/data/templates/ holds every chat template
# of ../shared/chat-templates/, unchanged.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
. tests/lib/shared.sh
. tests/lib/fixtures.sh
need_shared fixtures models/kjv-moe-f16.gguf models/kjv-moe-f16.greedy.json text/calib.txt text/valid.txt chat-templates
fails=0; n=0
same() {   # same COPY ORIGINAL
    n=$((n + 1))
    if cmp -s "$1" "$2"; then echo "ok   $1 = $2"
    else echo "FAIL $1 differs from $2"; fails=$((fails + 1)); fi
}
for spec in tests/data/fixtures/*/spec.json; do
    dir=${spec%/spec.json}; arch=${dir##*/}
    for f in "$dir"/tiny-"$arch".*.json; do
        same "$f" "$POCKET_SHARED/fixtures/$arch/${f##*/}"
    done
    m=$(fixture_model "$arch") || { echo "FAIL cannot rebuild the $arch fixture"; fails=$((fails + 1)); continue; }
    same "$m" "$POCKET_SHARED/fixtures/$arch/tiny-$arch.gguf"
done
same tests/data/models/kjv-moe-f16.greedy.json "$POCKET_SHARED/models/kjv-moe-f16.greedy.json"
same models/kjv-moe-f16.gguf "$POCKET_SHARED/models/kjv-moe-f16.gguf"
same tests/data/text/calib.txt "$POCKET_SHARED/text/calib.txt"
for t in "$POCKET_SHARED"/chat-templates/*.jinja; do
    same "tests/data/templates/${t##*/}" "$t"
done
lines=$(wc -l <tests/data/text/valid.txt)
tmp="$BUILD/tmp/data_copies"; mkdir -p "$tmp"
head -n "$lines" "$POCKET_SHARED/text/valid.txt" >"$tmp/valid-head.txt"
same tests/data/text/valid.txt "$tmp/valid-head.txt"
[ $fails -eq 0 ] || { echo "t_data_copies: $fails of $n copies differ"; exit 1; }
echo "t_data_copies: $n copies equal ../shared's files"
