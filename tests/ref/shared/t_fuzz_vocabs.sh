#!/bin/sh
# The tokenizer fuzz harness's seeds (fuzz/corpus/tokenizer) and past
# findings (fuzz/regress/tokenizer) replayed over llama.cpp's test
# vocabularies too ($POCKET_SHARED/tokenizer, POCKET_FUZZ_VOCABS), as `make
# fuzz` runs it; tests/cli/t_fuzz_regress.sh replays them on the
# repository's vocabularies only.
set -eu
BUILD=${BUILD:-build}
. tests/lib/shared.sh
need_shared tokenizer
dirs=fuzz/corpus/tokenizer
[ -d fuzz/regress/tokenizer ] && dirs="$dirs fuzz/regress/tokenizer"
# shellcheck disable=SC2086 # the directories are words
POCKET_FUZZ_VOCABS="$POCKET_SHARED/tokenizer" "$BUILD/fuzz/fuzz_tokenizer" $dirs
set -- "$POCKET_SHARED"/tokenizer/*.gguf
echo "t_fuzz_vocabs: replayed over the $# vocabularies of $POCKET_SHARED/tokenizer and the repository's"
