#!/bin/sh
# pocket bench on the bundled model: the JSON report parses, holds every
# draw (2 per test with -r 2) with finite positive tok/s, and the weight
# bytes per generated token counted by the engine match `pocket info` within
# 1%; --profile's phases account for every weight byte of a token; -d runs
# the tests after other tokens; an --ab run prints a difference line with its interval; bad input gives
# one "pocket: error:" line and exit 1. No timing assertions: speeds are only
# checked to be finite and positive.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
P="$BUILD/pocket"
M=models/kjv-moe-f16.gguf
tmp="$BUILD/tmp"; mkdir -p "$tmp"
J="$tmp/bench.json"; rm -f "$J"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# the bandwidth cache must not be touched by the tests (--no-bw everywhere)
XDG_CACHE_HOME="$tmp/bench-cache"; export XDG_CACHE_HOME

expect_error() {
    name=$1; want=$2; shift 2
    "$@" >"$tmp/bench.out" 2>"$tmp/bench.err" </dev/null; rc=$?
    if [ $rc -ne 1 ] || [ "$(wc -l <"$tmp/bench.err")" -ne 1 ] ||
       ! grep -q "^pocket: error: " "$tmp/bench.err" || ! grep -qF -- "$want" "$tmp/bench.err"; then
        fail "$name: exit $rc, stderr:"; sed 's/^/    /' "$tmp/bench.err"
    else
        echo "ok   $name: $(cat "$tmp/bench.err")"
    fi
}

if "$P" bench -m "$M" -p 16 -n 8 -r 2 -t 1 -ctk q8_0 --no-bw --json "$J" >"$tmp/bench.out" 2>"$tmp/bench.err"; then
    cat "$tmp/bench.out"
else
    fail "bench run: exit $?"; sed 's/^/    /' "$tmp/bench.err"
fi
"$P" info "$M" >"$tmp/info.txt"
info_bpt=$(sed -n 's/^bytes\/token *\([0-9.]*\) \([KMG]*i*B\).*/\1 \2/p' "$tmp/info.txt")
[ -n "$info_bpt" ] || fail "pocket info printed no bytes/token"
if "$PYTHON" - "$J" "$tmp/info.txt" $info_bpt <<'PY'
import json, math, re, sys
path, infotxt, num, unit = sys.argv[1], open(sys.argv[2]).read(), float(sys.argv[3]), sys.argv[4]
info = num * {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}[unit]
d = json.load(open(path))
c = d["configs"]
assert len(c) == 1, "one configuration"
c = c[0]
assert c["n_threads"] == 1, c["n_threads"]
assert d["settings"]["repetitions"] == 2 and d["settings"]["n_prompt"] == 16 and d["settings"]["n_gen"] == 8
names = [t["test"] for t in c["tests"]]
assert names == ["pp16", "tg8"], names
for t in c["tests"]:
    draws = t["draws_tok_s"]
    assert len(draws) == 2 and t["n"] == 2, (t["test"], draws)
    for v in draws + [t["mean"], t["min"], t["max"]]:
        assert isinstance(v, (int, float)) and math.isfinite(v) and v > 0, (t["test"], v)
    assert t["min"] <= t["mean"] <= t["max"]
bpt = c["decode"]["bytes_per_token"]
assert d["model"]["bytes_per_token_info"] > 0
rel = abs(bpt - info) / info
print("bytes/token: engine count %.0f, pocket info %.0f (%s %s), relative difference %.4f%%" % (bpt, info, num, unit, 100 * rel))
assert rel <= 0.01, "bytes/token differs from pocket info by more than 1%"
# exact: every weight read is counted once (q/k norm vectors once per batch:
# the count was 2 rows short per layer per token before)
exact = d["model"]["bytes_per_token_info"]
assert bpt == exact, "engine counts %r bytes per decoded token, the model's geometry %r" % (bpt, exact)
assert c["decode"]["bandwidth"] is None, "--no-bw measured anyway"
# state ledger: a tg draw decodes positions 0..n-1 from an empty context; at
# position p each attention layer reads p + 1 cached K and V rows and writes
# one: n_kv_heads * head_dim keys and n_kv_heads * head_dim_v values, in the
# cache's types (this run: Q8_0 keys, 34 bytes per 32; F16 values, 2 bytes)
L = int(re.search(r"^layers +(\d+)", infotxt, re.M).group(1))
m = re.search(r"(\d+) kv heads, head dim (\d+) \(v (\d+)\)", infotxt)
assert c["cache_type_k"] == "q8_0" and c["cache_type_v"] == "f16", (c["cache_type_k"], c["cache_type_v"])
per_elem = {"f32": 4.0, "f16": 2.0, "q8_0": 34 / 32}
kvrow = int(m.group(1)) * (per_elem["q8_0"] * int(m.group(2)) + per_elem["f16"] * int(m.group(3)))
n = d["settings"]["n_gen"]
want = L * kvrow * sum(p + 2 for p in range(n)) / n
got = c["decode"]["state_bytes_per_token"]
print("state bytes/token: engine %.1f, from the geometry %.1f" % (got, want))
assert abs(got - want) < 0.5, "state bytes per token off"
assert d["machine"]["cpu"] and d["machine"]["cores"] >= 1 and c["isa"]
assert "F16" in d["model"]["type_mix"]
PY
then echo "ok   JSON report"; else fail "JSON report"; fi

# A/B: -t 1 against -t 2 with an F32 key cache in child processes, with the
# difference line
if "$P" bench -m "$M" -p 8 -n 4 -r 2 --no-bw --ab "-t 1" "-t 2 -ctk f32" >"$tmp/bench.out" 2>"$tmp/bench.err"; then
    cat "$tmp/bench.out"
    grep -q "^difference B - A, tg4: .*95% interval \[" "$tmp/bench.out" || fail "--ab printed no tg difference line"
    grep -q "^difference B - A, pp8: " "$tmp/bench.out" || fail "--ab printed no pp difference line"
    grep -q '^config B: "-t 2 -ctk f32" -> kernels [a-z0-9]*, 2 threads.*kv cache f32/f16$' "$tmp/bench.out" ||
        fail "--ab config B is not 2 threads with an f32/f16 cache"
else
    fail "bench --ab: exit $?"; sed 's/^/    /' "$tmp/bench.err"
fi

# --profile: the phases of one more run of each test; every weight byte of
# a decoded token is read inside exactly one top-level phase, each phase's
# parts lie within it, and the phases' times fit in the run's
JP="$tmp/bench-profile.json"; rm -f "$JP"
if "$P" bench -m "$M" -p 16 -n 4 -r 1 -t 2 --no-bw --profile --json "$JP" >"$tmp/bench.out" 2>"$tmp/bench.err"; then
    sed -n '/^profile of/,$p' "$tmp/bench.out"
    grep -q "^profile of one tg4 run" "$tmp/bench.out" || fail "--profile printed no tg table"
    if "$PYTHON" - "$JP" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c = d["configs"][0]
exact = d["model"]["bytes_per_token_info"]
for key, test in (("pp", "pp16"), ("tg", "tg4")):
    p = c["profile"][key]
    assert p["test"] == test, p["test"]
    ph = p["phases"]
    names = [x["name"] for x in ph if x["parent"] < 0]
    for want in ("embedding", "norms, residuals", "attention", "moe", "output head"):
        assert want in names, (key, want, names)
    assert [x["name"] for x in ph if x["parent"] >= 0 and ph[x["parent"]]["name"] == "moe"] == \
        ["router", "experts"], (key, "moe's parts")
    top = 0.0
    for i, x in enumerate(ph):
        assert x["secs"] >= 0 and 0 <= x["wait_secs"] <= x["secs"] + 1e-6, x
        if x["parent"] >= 0:
            assert x["parent"] < i and ph[x["parent"]]["parent"] < 0, x
        else:
            top += x["secs"]
            kids = [y for y in ph if y["parent"] == i]
            if kids:
                assert sum(y["weight_bytes"] for y in kids) <= x["weight_bytes"], x
                assert sum(y["secs"] for y in kids) <= x["secs"] * 1.001 + 1e-6, x
    assert top <= p["secs"] * 1.001, (key, top, p["secs"])
    if key == "tg":
        w = sum(x["weight_bytes"] for x in ph if x["parent"] < 0)
        print("profile tg: top-level phases read %d weight bytes per token, the model %d" % (w / p["tokens"], exact))
        assert w == exact * p["tokens"], (w, exact)
PY
    then echo "ok   --profile"; else fail "--profile JSON"; fi
else
    fail "bench --profile: exit $?"; sed 's/^/    /' "$tmp/bench.err"
fi

# -d: both tests start after D other tokens. On the bundled model (attention
# alone: cut back to them before each run) the tg draws' state ledger is that
# of positions D..D+n-1; on the qwen35moe fixture (Gated DeltaNet: back to a
# checkpoint at D) the runs and their names.
. tests/lib/fixtures.sh
Q35=$(fixture_model qwen35moe)
JD="$tmp/bench-depth.json"; rm -f "$JD"
for model in "$M" "$Q35"; do
    if "$P" bench -m "$model" -d 24 -p 8 -n 4 -r 2 -t 2 --no-bw --json "$JD" >"$tmp/bench.out" 2>"$tmp/bench.err"; then
        grep -q "^| .* | pp8 @ d24 |" "$tmp/bench.out" || fail "-d 24: no 'pp8 @ d24' row ($model)"
        if "$PYTHON" - "$JD" "$model" "$M" "$tmp/info.txt" <<'PY'
import json, re, sys
d, model, bundled = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
infotxt = open(sys.argv[4]).read()
c = d["configs"][0]
assert d["settings"]["n_depth"] == 24, d["settings"]
assert [t["test"] for t in c["tests"]] == ["pp8 @ d24", "tg4 @ d24"], [t["test"] for t in c["tests"]]
assert c["n_ctx"] == 24 + 8 + 4, c["n_ctx"]
if model == bundled:   # the default F16 cache: position p reads p + 1 rows, writes one
    L = int(re.search(r"^layers +(\d+)", infotxt, re.M).group(1))
    m = re.search(r"(\d+) kv heads, head dim (\d+) \(v (\d+)\)", infotxt)
    kvrow = int(m.group(1)) * 2.0 * (int(m.group(2)) + int(m.group(3)))
    want = L * kvrow * sum(p + 2 for p in range(24, 28)) / 4
    got = c["decode"]["state_bytes_per_token"]
    print("-d 24: state bytes/token engine %.1f, positions 24..27 %.1f" % (got, want))
    assert abs(got - want) < 0.5, "the tg draws did not start at position 24"
PY
        then echo "ok   -d 24 ($model)"; else fail "-d 24 JSON ($model)"; fi
    else
        fail "bench -d 24 ($model): exit $?"; sed 's/^/    /' "$tmp/bench.err"
    fi
done

expect_error "--profile with --ab" "--profile" "$P" bench -m "$M" --no-bw --profile --ab "-t 1" "-t 2"
expect_error "missing model" "$tmp/nope.gguf" "$P" bench -m "$tmp/nope.gguf" --no-bw
expect_error "zero repetitions" "-r" "$P" bench -m "$M" -r 0 --no-bw
expect_error "--ab with one configuration" "--ab needs two" "$P" bench -m "$M" --no-bw --ab "-t 1"
expect_error "--ab unknown flag" "--frob" "$P" bench -m "$M" --no-bw -r 1 --ab "-t 1" "--frob 2"
expect_error "--ab bad cache type" "-ctv: unknown KV cache type 'q3'" "$P" bench -m "$M" --no-bw --ab "-ctv q3" "-t 1"
expect_error "bad cache type" "-ctk: unknown KV cache type 'bf16'" "$P" bench -m "$M" --no-bw -ctk bf16
expect_error "--ab bad kernel name" "POCKET_KERNELS" "$P" bench -m "$M" --no-bw --ab "POCKET_KERNELS=sse9" "-t 1"
expect_error "nothing to measure" "nothing to measure" "$P" bench -m "$M" -p 0 -n 0 --no-bw
expect_error "context too small" "-c 4" "$P" bench -m "$M" -p 16 -n 8 -c 4 --no-bw
expect_error "context too small for the depth" "-d 30" "$P" bench -m "$M" -d 30 -p 16 -n 8 -c 40 --no-bw
expect_error "unknown option" "--bogus" "$P" bench --bogus

[ $fails -eq 0 ] && echo "all bench checks passed"
[ $fails -eq 0 ]
