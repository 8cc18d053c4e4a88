#!/bin/sh
# pocket perplexity on the bundled model and the first windows of the
# held-out KJV text (tests/data/text/valid.txt, the first 355 lines of
# ../shared/text/valid.txt): the selected kernels and the scalar reference
# kernels must agree within 0.05% on 4 windows of 128. The figure over the
# whole text against llama.cpp's is tests/ref/shared/t_perplexity_llama.sh
# (make test-shared: it needs ../shared's whole text and llama.cpp's figure).
# Under emulation ($POCKET_RUN set, e.g. "qemu-aarch64 -L SYSROOT -cpu max":
# tests/lib/run_aarch64.sh) the emulated build scores the first $PPL_CHUNKS
# (default 1) windows of 256 and must agree within 0.05% with the host build
# ($HOST_BUILD, default build) on the same windows.
set -eu
BUILD=${BUILD:-build}
MODEL=models/kjv-moe-f16.gguf
TEXT=tests/data/text/valid.txt
RUN=${POCKET_RUN:-}
ppl() { $RUN "$BUILD/pocket" perplexity -m "$MODEL" -f "$TEXT" -t 2 "$@" 2>/dev/null |
        sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p'; }
within() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
           printf "  relative difference %.5f%% (tolerance %.2f%%)\n", 100 * d, 100 * tol; exit !(d <= tol) }'; }
if [ -n "$RUN" ]; then
    host=${HOST_BUILD:-build}; n=${PPL_CHUNKS:-1}
    [ -x "$host/pocket" ] || { echo "FAIL: host build $host/pocket not found (make all)"; exit 1; }
    a=$(ppl -c 256 --chunks "$n")
    b=$(RUN=; BUILD=$host; ppl -c 256 --chunks "$n")
    [ -n "$a" ] && [ -n "$b" ] || { echo "FAIL: pocket perplexity printed no estimate ($RUN: '$a', host: '$b')"; exit 1; }
    echo "first $n window(s) of 256: PPL $a ($RUN $BUILD/pocket) vs $b (host $host/pocket)"
    within "$a" "$b" 0.0005
    exit
fi
a=$(ppl -c 128 --chunks 4); b=$(POCKET_KERNELS=ref ppl -c 128 --chunks 4)
[ -n "$a" ] && [ -n "$b" ] || { echo "FAIL: pocket perplexity printed no estimate ('$a', reference kernels '$b')"; exit 1; }
echo "4 windows of 128: PPL $a (selected kernels) vs $b (reference kernels)"
within "$a" "$b" 0.0005
