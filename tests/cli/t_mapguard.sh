#!/bin/sh
# A model file truncated while `pocket run` decodes from it (as an in-place
# `cp` over it would): the run must stop with exit status 1 and one line
# naming the file (the SIGBUS guard), not die from the signal. The C side
# (pk_model_check_file, rename is harmless) is tests/unit/test_mapguard.c; the
# server's reaction is in tests/cli/t_serve.sh.
set -u
BUILD=${BUILD:-build}
P="$BUILD/pocket"
tmp="$BUILD/tmp/mapguard-run"; rm -rf "$tmp"; mkdir -p "$tmp"
cp models/kjv-moe-f16.gguf "$tmp/copy.gguf"
"$P" run -m "$tmp/copy.gguf" -p "And God said" -n -1 -c 4096 -t 1 --temp 0.8 --seed 3 --ignore-eos >"$tmp/out" 2>"$tmp/err" &
pid=$!
# truncate once generation has started (some text on stdout)
i=0
while [ ! -s "$tmp/out" ] && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do sleep 0.05; i=$((i + 1)); done
truncate -s 200000 "$tmp/copy.gguf"
wait $pid; rc=$?
if [ $rc -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^pocket: error: .*copy.gguf: the model file changed while in use" "$tmp/err"; then
    echo "ok   truncated during run: $(cat "$tmp/err") (after $(wc -c <"$tmp/out") bytes of text)"
else
    echo "FAIL truncated during run: exit $rc, stderr:"; sed 's/^/    /' "$tmp/err"; exit 1
fi
echo "t_mapguard: all passed"
