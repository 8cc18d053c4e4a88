#!/bin/sh
# pocket perplexity on the bundled model and the held-out KJV text must agree
# with llama.cpp's figure in ../shared/models/README.md within 0.5%.
# With POCKET_TEST_QUICK=1 (the sanitizer run) only 4 windows of 128 are
# scored, and the check is that the selected kernels and the scalar reference
# agree.
# Under emulation ($POCKET_RUN set, e.g. "qemu-aarch64 -L SYSROOT -cpu max":
# tests/lib/run_aarch64.sh) all 209 windows would take hours, so the emulated
# build scores the first $PPL_CHUNKS (default 1) windows of 256 and must
# agree within 0.05% with the host build ($HOST_BUILD, default build) on the
# same windows; the host build's full figure is held to llama.cpp's by this
# script without POCKET_RUN (run once by tests/lib/run_aarch64.sh, and by make
# test).
set -eu
BUILD=${BUILD:-build}
MODEL=models/kjv-moe-f16.gguf
TEXT=../shared/text/valid.txt
RUN=${POCKET_RUN:-}
ppl() { $RUN "$BUILD/pocket" perplexity -m "$MODEL" -f "$TEXT" -t 2 "$@" 2>/dev/null |
        sed -n 's/^Final estimate: PPL = \([0-9.]*\).*/\1/p'; }
within() { awk -v a="$1" -v b="$2" -v tol="$3" 'BEGIN { d = (a - b) / b; if (d < 0) d = -d;
           printf "  relative difference %.5f%% (tolerance %.2f%%)\n", 100 * d, 100 * tol; exit !(d <= tol) }'; }
if [ "${POCKET_TEST_QUICK:-0}" = 1 ]; then
    a=$(ppl -c 128 --chunks 4); b=$(POCKET_KERNELS=ref ppl -c 128 --chunks 4)
    echo "4 windows of 128: PPL $a (selected kernels) vs $b (reference kernels)"
    within "$a" "$b" 0.0005
    exit
fi
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
ref=$(sed -n 's/.*F16 (this file).*\*\*\([0-9][0-9.]*\) ±.*/\1/p' ../shared/models/README.md)
[ -n "$ref" ] || { echo "cannot read the reference figure from ../shared/models/README.md"; exit 1; }
got=$(ppl -c 256)
[ -n "$got" ] || { echo "pocket perplexity printed no estimate"; exit 1; }
echo "pocket PPL $got, llama.cpp PPL $ref"
within "$got" "$ref" 0.005
