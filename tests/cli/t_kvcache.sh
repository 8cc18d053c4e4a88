#!/bin/sh
# KV cache types (-ctk / -ctv: f32, f16, q8_0):
#  A. `pocket info` prints the KV cache bytes per token of the geometry for
#     each type (attention layers x kv heads x (head dim x key bytes + head
#     dim v x value bytes); f16 half of f32, q8_0 34/128 of it), the context
#     it would use (the trained length, also above 4096 when the cache fits
#     the free memory) and a hybrid model's fixed DeltaNet state;
#  B. a bad type is one error line naming the option and the value, exit 1,
#     on every command that takes it; q8_0 with a head dim of 16 is refused
#     with the reason;
#  C. quality against the F32 cache on real text (the bundled model, 8
#     windows of valid.txt): mean KL divergence, same top token and the
#     perplexity ratio within stated bounds (F16: KLD < 2e-4, top >= 99.5%,
#     |PPL ratio - 1| < 0.1%; Q8_0: KLD < 1e-3, top >= 98.5%, < 0.5%; the
#     whole text measures F16 1.4e-5 / 99.98% / +0.007% and Q8_0 1.1e-4 /
#     99.62% / +0.005%, see README).
# Forward-level agreement with the numpy reference holding the same cache
# is in t_forward_ref.sh and t_qwen35_ref.sh, batched = one token per type in
# t_batch.sh, the kernels in test_kv.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"; M=models/kjv-moe-f16.gguf; T=tests/data/text/valid.txt
. tests/lib/fixtures.sh
FIX=$(fixture_model qwen35moe) || { echo "FAIL: cannot rebuild the qwen35moe fixture"; exit 1; }
tmp="$BUILD/tmp/kvcache"; rm -rf "$tmp"; mkdir -p "$tmp"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

# ---- A. pocket info
# kv_line MODEL FLAGS... -> the "kv cache" line
kv_line() { m=$1; shift; "$P" info "$@" "$m" | grep '^kv cache'; }
# geometry MODEL -> "attention_layers kv_heads head_dim head_dim_v"
geometry() {
    "$P" info "$1" >"$tmp/info.txt" || return 1
    "$PYTHON" - "$tmp/info.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"^layers +(\d+)(?:: (\d+) Gated DeltaNet)?", t, re.M)
att = int(m.group(1)) - int(m.group(2) or 0)
g = re.search(r"(\d+) kv heads, head dim (\d+) \(v (\d+)\)", t)
print(att, g.group(1), g.group(2), g.group(3))
PY
}
for m in "$M" "$FIX"; do
    geo=$(geometry "$m") || { fail "info $m"; continue; }
    set -- $geo; att=$1; hkv=$2; hd=$3; hdv=$4
    for kv in "f32 f32" "f16 f16" "q8_0 q8_0" "q8_0 f16" "f32 q8_0" "default default"; do
        set -- $kv; k=$1; v=$2
        if [ "$k" = default ]; then line=$(kv_line "$m"); k=f16; v=f16
        else line=$(kv_line "$m" -ctk "$k" -ctv "$v"); fi
        got=$(echo "$line" | sed -n 's/.* per token (\([0-9]*\) bytes).*/\1/p')
        want=$("$PYTHON" -c "
e = {'f32': 4.0, 'f16': 2.0, 'q8_0': 34 / 32}
print(int($att * $hkv * (e['$k'] * $hd + e['$v'] * $hdv)))")
        if [ "$got" = "$want" ] && echo "$line" | grep -q "^kv cache  *$k keys, $v values: "; then
            echo "ok   $(basename "$m") $k/$v: $line"
        else
            fail "$(basename "$m") $k/$v: want $want bytes per token, info says: $line"
        fi
    done
done
f32=$(kv_line "$M" -ctk f32 -ctv f32 | sed -n 's/.*(\([0-9]*\) bytes).*/\1/p')
f16=$(kv_line "$M" | sed -n 's/.*(\([0-9]*\) bytes).*/\1/p')
q8=$(kv_line "$M" -ctk q8_0 -ctv q8_0 | sed -n 's/.*(\([0-9]*\) bytes).*/\1/p')
[ $((f16 * 2)) -eq "$f32" ] && [ $((q8 * 128)) -eq $((f32 * 34)) ] &&
    echo "ok   bundled model: f16 halves f32's $f32 bytes per token ($f16), q8_0 takes 34/128 ($q8)" ||
    fail "bundled model: f32 $f32, f16 $f16, q8_0 $q8 bytes per token"
kv_line "$M" | grep -q "at context 256 (the trained length)$" &&
    echo "ok   default context: the trained length (256)" || fail "default context: $(kv_line "$M")"
# -c 1000, q8_0 keys + f16 values: (q8 + f16) / 2 bytes per token x 1000
line=$(kv_line "$M" -c 1000 -ctk q8_0)
want=$("$PYTHON" -c "print('%.2f MiB at context 1000' % (1000 * ($q8 + $f16) / 2 / 1024 ** 2))")
echo "$line" | grep -qF "$want" && echo "ok   -c 1000: $line" || fail "-c 1000: want '$want': $line"
# a trained length above 4096 is used when its cache fits a quarter of the free memory
"$PYTHON" tests/lib/gen_model.py qwen3 "$tmp/long.gguf" --seed 2 --ctx 32768 >/dev/null
kv_line "$tmp/long.gguf" | grep -q "at context 32768 (the trained length)$" &&
    echo "ok   trained length 32768 used: $(kv_line "$tmp/long.gguf")" ||
    fail "trained length 32768: $(kv_line "$tmp/long.gguf")"
"$P" info "$FIX" | grep -q "^deltanet state  16.50 KiB (conv + recurrent, F32" &&
    echo "ok   hybrid: $("$P" info "$FIX" | grep '^deltanet state')" || fail "hybrid: no deltanet state line"

# ---- B. errors
# expect_error NAME SUBSTRING CMD... : exit 1, one stderr line with SUBSTRING
expect_error() {
    name=$1; want=$2; shift 2
    "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?
    if [ $rc -ne 1 ] || [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -q "^pocket: error: " "$tmp/err" ||
       ! grep -qF -- "$want" "$tmp/err"; then
        fail "$name: exit $rc, stderr:"; sed 's/^/    /' "$tmp/err"
    else
        echo "ok   $name: $(cat "$tmp/err")"
    fi
}
expect_error "run -ctk" "-ctk: unknown KV cache type 'q4_k'" "$P" run -p x -n 1 -ctk q4_k
expect_error "run --cache-type-v" "--cache-type-v: unknown KV cache type 'fp8'" "$P" run -p x -n 1 --cache-type-v fp8
expect_error "chat -ctv" "-ctv: unknown KV cache type 'F15'" "$P" chat --chat-template chatml -ctv F15
expect_error "serve -ctk" "-ctk: unknown KV cache type 'int8'" "$P" serve --port 0 -ctk int8
expect_error "perplexity -ctv" "-ctv: unknown KV cache type ''" "$P" perplexity -f "$T" -ctv ""
expect_error "info -ctk" "-ctk: unknown KV cache type 'q8'" "$P" info -ctk q8
expect_error "bench -ctk" "-ctk: unknown KV cache type 'f64'" "$P" bench --no-bw -ctk f64
expect_error "-ctk without a value" "-ctk needs a value" "$P" run -p x -ctk
"$PYTHON" tests/lib/gen_model.py llama "$tmp/hd16.gguf" --seed 3 >/dev/null
expect_error "q8_0 keys, head dim 16" "needs a head dimension that is a multiple of 32; this model's is 16" \
    "$P" run -m "$tmp/hd16.gguf" -p x -n 1 -ctk q8_0
expect_error "q8_0 values, head dim 16 (info)" "for the values needs a head dimension" \
    "$P" info -ctv q8_0 "$tmp/hd16.gguf"
if "$P" run -m "$tmp/hd16.gguf" -p x -n 2 -ctk f16 -ctv f32 >/dev/null 2>"$tmp/err" &&
   grep -q "^kv cache f16 keys, f32 values: $("$PYTHON" -c "print(2 * 2 * 16 * (2 + 4))") bytes per token" "$tmp/err"; then
    echo "ok   head dim 16 runs with f16 keys and f32 values: $(grep '^kv cache' "$tmp/err")"
else
    fail "head dim 16 with f16/f32: $(cat "$tmp/err")"
fi

# ---- C. quality against the F32 cache on real text
"$P" perplexity -m "$M" -f "$T" -c 256 --chunks 8 -t 2 -ctk f32 -ctv f32 --kl-divergence-base "$tmp/f32.kld" \
    >"$tmp/f32.out" 2>/dev/null || fail "perplexity with an f32 cache"
for spec in "f16 f16 2e-4 99.5 0.001" "q8_0 q8_0 1e-3 98.5 0.005" "q8_0 f16 1e-3 98.5 0.005"; do
    set -- $spec
    "$P" perplexity -m "$M" --kl-divergence "$tmp/f32.kld" -t 2 -ctk "$1" -ctv "$2" >"$tmp/$1-$2.out" 2>/dev/null ||
        { fail "perplexity -ctk $1 -ctv $2"; continue; }
    if "$PYTHON" - "$tmp/$1-$2.out" "$@" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
k, v, kld_max, top_min, ratio_max = sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
kld = float(re.search(r"mean KLD +([0-9.e-]+)", t).group(1))
top = float(re.search(r"same top token +([0-9.]+)%", t).group(1))
ratio = float(re.search(r"ratio ([0-9.]+)", t).group(1))
ok = kld < kld_max and top >= top_min and abs(ratio - 1) < ratio_max
print("%s %s keys, %s values vs f32 (8 windows): mean KLD %.6f (< %g), same top %.3f%% (>= %g%%), PPL ratio %.5f (within %g)"
      % ("ok  " if ok else "FAIL", k, v, kld, kld_max, top, top_min, ratio, ratio_max))
sys.exit(0 if ok else 1)
PY
    then :; else fails=$((fails + 1)); fi
done

[ $fails -eq 0 ] && echo "t_kvcache: all checks passed"
[ $fails -eq 0 ]
