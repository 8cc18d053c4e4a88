#!/bin/sh
# The tokenizer against llama.cpp's test vocabularies and vectors
# ($POCKET_SHARED/tokenizer/ggml-vocab-*.gguf with .inp/.out, 11 of them, 1-6
# MB each): build/tests/test_tokenizer --vocabs (tests/unit/test_tokenizer.c):
# every vector, byte round trips, special tokens, concurrent use.
set -eu
BUILD=${BUILD:-build}
. tests/lib/shared.sh
need_shared tokenizer/ggml-vocab-qwen3.gguf tokenizer/ggml-vocab-gpt-2.gguf \
    tokenizer/ggml-vocab-llama-spm.gguf tokenizer/ggml-vocab-bert-bge.gguf
"$BUILD/tests/test_tokenizer" --vocabs "$POCKET_SHARED/tokenizer"
