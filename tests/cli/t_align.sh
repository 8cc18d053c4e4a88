#!/bin/sh
# general.alignment = 1 (legal GGUF): a file whose first tensor lands at an
# odd offset is refused with one line naming that tensor (it used to be read
# through misaligned uint16_t pointers: undefined behaviour, caught by UBSan
# under `make sanitize`, a fault on strict-alignment CPUs); a file that
# declares 1 but has every tensor aligned loads and generates exactly what
# the original does. Files from tests/lib/mkalign.py.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
tmp="$BUILD/tmp/align"; rm -rf "$tmp"; mkdir -p "$tmp"
M=models/kjv-moe-f16.gguf
fails=0
first=$("$PYTHON" tests/lib/mkalign.py "$M" "$tmp") || { echo "FAIL mkalign.py"; exit 1; }

"$P" run -m "$tmp/odd.gguf" -p "And God said" -n 4 -t 1 >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "tensor '$first'" "$tmp/err" &&
   grep -q "not a multiple of [24]" "$tmp/err" && grep -q "general.alignment is 1" "$tmp/err"; then
    echo "ok   odd.gguf refused: $(cat "$tmp/err")"
else
    echo "FAIL odd.gguf: exit $rc, stderr:"; sed 's/^/    /' "$tmp/err"; fails=$((fails + 1))
fi

"$P" info "$tmp/packed.gguf" >"$tmp/info" 2>&1 || { echo "FAIL info packed.gguf"; cat "$tmp/info"; fails=$((fails + 1)); }
"$P" run -m "$M" -p "And God said" -n 16 -t 1 --temp 0 >"$tmp/want" 2>"$tmp/err0" ||
    { echo "FAIL run on $M"; cat "$tmp/err0"; fails=$((fails + 1)); }
"$P" run -m "$tmp/packed.gguf" -p "And God said" -n 16 -t 1 --temp 0 >"$tmp/got" 2>"$tmp/err1" ||
    { echo "FAIL run on packed.gguf"; cat "$tmp/err1"; fails=$((fails + 1)); }
if [ -s "$tmp/want" ] && cmp -s "$tmp/want" "$tmp/got"; then echo "ok   packed.gguf (alignment 1, tensors aligned) generates the same text"
else echo "FAIL packed.gguf output differs: '$(cat "$tmp/got")' vs '$(cat "$tmp/want")'"; fails=$((fails + 1)); fi
[ $fails -eq 0 ] || exit 1
echo "t_align: all passed"
