# ref_lib.sh - the outline the reference tests (t_*_ref.sh) share; sourced,
# not run, after the script sets REF_NAME (its name without t_, e.g.
# gemma4_ref) and, where it has a llama.cpp fixture, FIXTURE (its
# architecture: llama.cpp's outputs are $FIXTURES/tiny-$FIXTURE.*.json,
# FIXTURES by default tests/data/fixtures/$FIXTURE; the model, in $MODEL, is
# rebuilt from its spec there by tests/lib/fixtures.sh into $BUILD/fixtures).
# It sets BUILD (default build), PYTHON, TOOL (tool_logits), RUN
# ($POCKET_RUN: a prefix for every pocket binary, tests/lib/run_aarch64.sh),
# TMP (a fresh directory under $BUILD/tmp), and these settings of
# ref_case, which a script may change between cases:
#   KV=f32        the KV cache of pocket and of the reference
#   BATCHES="1 64"  the batch sizes (-b) pocket runs with
#   EACH_VARIANT=0  1: every case on each of $variants (POCKET_KERNELS)
#   MIN_MARGIN=   a number: the reference's smallest router top-k margin
#                 must be at least that (a near-tie would make a flipped
#                 expert a legitimate difference)
#   REF_AGREE=    a number: every reference of a case within that of its first
# The steps, each failure line naming its step:
#   note_fail STEP MESSAGE   a failure line, remembered for finish
#   compare STEP LABEL REF.npy POCKET.f32 TOL   tests/lib/compare_logits.py
#   start [OPTIONS]          the gguf_py self-test; step 0: the numpy
#                            reference vs llama.cpp on $MODEL
#                            (tests/lib/check_fixture.py --arch $FIXTURE OPTIONS);
#                            stop (exit 1) if tool_logits or pocket is missing
#   kernel_variants          $variants: the kernel variants usable here
#                            (pocket --help), or those $BATCH_VARIANTS names
#   ids KIND [V]             short: 12 ids incl. V-1, V-2, V-3; long[:N]: N
#                            (default 70) ids below V (default 300)
#   ref_case NAME ARCH TOL THREADS IDS REFS GEN_OPTIONS...   step A:NAME
#   fixture_step TOOL_OPTS CHECK_OPTS [TAG] [BITWISE]   steps B:fixture-*
#   same_logits STEP LABEL IDS "TOOL ARGS A" "TOOL ARGS B"   bitwise equal
#   expect_error STEP TEXT COMMAND...   fails, printing TEXT
#   expect_info STEP MODEL LINE   `pocket info MODEL` prints LINE
#   bad_files STEP COUNT SOURCE < PYTHON   step D: one error line per file
#   finish MESSAGE           the closing line; exit 0, or 1 naming the failed steps
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
TOOL="$BUILD/tests/tool_logits"
RUN=${POCKET_RUN:-}
mkdir -p "$BUILD/tmp" || exit 1
TMP=$(mktemp -d "$BUILD/tmp/$REF_NAME.XXXXXX") || exit 1
. tests/lib/fixtures.sh
if [ -n "${FIXTURE:-}" ]; then
    FIXTURES=${FIXTURES:-tests/data/fixtures/$FIXTURE}
    MODEL=$(fixture_model "$FIXTURE") || MODEL="$BUILD/fixtures/tiny-$FIXTURE.gguf"
fi
KV=f32
BATCHES="1 64"
EACH_VARIANT=0
MIN_MARGIN=
REF_AGREE=
variants=
fail=0
failed_steps=""

note_fail() {   # note_fail STEP MESSAGE
    echo "FAIL [$1] $2"
    fail=1
    case " $failed_steps " in *" $1 "*) ;; *) failed_steps="$failed_steps $1" ;; esac
}
compare() { "$PYTHON" tests/lib/compare_logits.py "$@"; }

start() {   # start [CHECK_FIXTURE OPTIONS]
    "$PYTHON" tests/lib/gguf_py.py --selftest >/dev/null || note_fail step0 "gguf_py.py --selftest"
    if [ -z "${FIXTURE:-}" ]; then
        :
    elif [ -f "$MODEL" ]; then
        echo "== step 0: the numpy reference vs llama.cpp on the fixture"
        "$PYTHON" tests/lib/check_fixture.py --arch "$FIXTURE" --fixture-dir "$FIXTURES" --model "$MODEL" "$@" \
            || note_fail step0 "check_fixture.py: the numpy reference disagrees with llama.cpp"
    else
        note_fail step0 "fixture $MODEL not found"
    fi
    need_tools
}
need_tools() {
    if [ ! -x "$TOOL" ] || [ ! -x "$BUILD/pocket" ]; then
        note_fail setup "$TOOL or $BUILD/pocket not found (build them with make)"
        echo "t_$REF_NAME: FAILED in step(s):$failed_steps"
        exit 1
    fi
}
kernel_variants() {
    variants=$($RUN "$BUILD/pocket" --help | sed -n 's/.*usable on this CPU): //p' | tr ' ' '\n' | sed -n 's/[*]$//p')
    [ -n "$variants" ] || note_fail setup "no usable kernel variant in pocket --help"
    # under emulation tests/lib/run_aarch64.sh names the variants each CPU adds
    [ -n "${BATCH_VARIANTS:-}" ] && variants=$BATCH_VARIANTS
}

ids() {   # ids short|long[:N] [V]
    id_v=${2:-300}
    case $1 in
        short) echo "1,17,$((id_v - 1)),255,256,42,$((id_v - 2)),100,7,200,$((id_v - 3)),5" ;;
        long*) id_n=70; [ "$1" = long ] || id_n=${1#long:}
               "$PYTHON" -c 'import sys; n, v = int(sys.argv[1]), int(sys.argv[2])
print(",".join(str((i * 37 + 11) % v) for i in range(n)))' "$id_n" "$id_v" ;;
    esac
}

# ref_case NAME ARCH TOL THREADS IDS REFS GEN_OPTIONS... - step A:NAME: a
# random ARCH model by tests/lib/gen_model.py GEN_OPTIONS ($TMP/NAME.gguf), its
# float64 reference(s) by tests/lib/ref_forward.py with the cache $KV, and
# pocket (cache $KV) on the ids IDS (ids KIND, with the model's vocabulary)
# with each of THREADS x $BATCHES [x $variants] against each reference:
# max |pocket - ref| < TOL. REFS: words LABEL:OPTIONS, OPTIONS the
# reference's options with commas for spaces ("rec:--deltanet,recurrent").
# Pocket's logits stay in $TMP/NAME.VARIANT.tT.bB.f32 (VARIANT: sel where
# the kernels are not chosen).
ref_case() {
    rc_name=$1; rc_arch=$2; rc_tol=$3; rc_threads=$4; rc_ids=$5; rc_refs=$6; shift 6
    step="A:$rc_name"
    rc_model="$TMP/$rc_name.gguf"
    if ! "$PYTHON" tests/lib/gen_model.py "$rc_arch" "$rc_model" "$@"; then
        note_fail "$step" "gen_model.py failed"; return
    fi
    rc_v=$("$PYTHON" -c 'import sys; sys.path.insert(0, "tests/lib"); import gguf_py as G
print(G.read_gguf(sys.argv[1], False).tinfo["token_embd.weight"]["ne"][1])' "$rc_model")
    rc_ids=$(ids "$rc_ids" "$rc_v")
    echo "== step $step ($rc_arch $*; n_vocab $rc_v; kv cache $KV; ids $rc_ids)"
    rc_first=""; rc_done=""; rc_stats=--stats
    for rc_r in $rc_refs; do
        rc_l=${rc_r%%:*}
        # shellcheck disable=SC2046 # the options are words
        if ! "$PYTHON" tests/lib/ref_forward.py $rc_stats --kv-cache "$KV" $(echo "${rc_r#*:}" | tr , ' ') \
            "$rc_model" "$rc_ids" "$TMP/$rc_name.$rc_l.npy" >"$TMP/stats"; then
            note_fail "$step" "ref_forward.py ${rc_r#*:} failed"; continue
        fi
        cat "$TMP/stats"; rc_stats=
        if [ -z "$rc_first" ]; then
            rc_first=$rc_l
            [ -z "$MIN_MARGIN" ] || "$PYTHON" -c 'import sys; sys.exit(not float(sys.argv[1].split()[-1]) >= float(sys.argv[2]))' \
                "$(cat "$TMP/stats")" "$MIN_MARGIN" ||
                note_fail "$step" "router top-k margin below $MIN_MARGIN: choose another seed"
        elif [ -n "$REF_AGREE" ]; then
            "$PYTHON" -c 'import sys, numpy as np
d = float(np.max(np.abs(np.load(sys.argv[1]) - np.load(sys.argv[2]))))
ok = d < float(sys.argv[3])
print("%s %-28s max|%s - %s| = %.2e" % ("ok  " if ok else "FAIL", sys.argv[4], sys.argv[5], sys.argv[6], d))
sys.exit(0 if ok else 1)' "$TMP/$rc_name.$rc_l.npy" "$TMP/$rc_name.$rc_first.npy" "$REF_AGREE" "$rc_name ref" "$rc_l" "$rc_first" ||
                note_fail "$step" "the references $rc_l and $rc_first differ"
        fi
        rc_done="$rc_done $rc_l"
    done
    [ -n "$rc_first" ] || return
    rc_vs=sel; [ "$EACH_VARIANT" = 1 ] && rc_vs=$variants
    for rc_k in $rc_vs; do
        rc_sel=$rc_k; [ $rc_k = sel ] && rc_sel=${POCKET_KERNELS:-}
        for rc_t in $rc_threads; do
            for rc_b in $BATCHES; do
                rc_out="$TMP/$rc_name.$rc_k.t$rc_t.b$rc_b.f32"
                rc_what="[$rc_k] -t $rc_t -b $rc_b"
                if ! POCKET_KERNELS=$rc_sel $RUN "$TOOL" -t "$rc_t" -b "$rc_b" -ctk "$KV" -ctv "$KV" "$rc_model" \
                    "$rc_out" "$rc_ids"; then
                    note_fail "$step" "tool_logits $rc_what exited with an error"; continue
                fi
                for rc_l in $rc_done; do
                    compare "$step" "$rc_name $rc_what vs $rc_l" "$TMP/$rc_name.$rc_l.npy" "$rc_out" "$rc_tol" \
                        || note_fail "$step" "pocket $rc_what differs from the numpy reference ($rc_l)"
                done
            done
        done
    done
}

# fixture_step TOOL_OPTS CHECK_OPTS [TAG] [BITWISE] - steps B:fixture-greedy
# and B:fixture-long150: llama.cpp's outputs $FIXTURES/tiny-$FIXTURE.F.json
# teacher-forced, pocket (tool_logits TOOL_OPTS, one thread) one token at a
# time and as one batch on each of $variants, through tests/lib/check_fixture.py
# CHECK_OPTS; BITWISE=1: the two are equal bitwise (step C:batch).
fixture_step() {
    fs_topt=$1; fs_copt=$2; fs_tag=${3:-}; fs_bitwise=${4:-0}
    [ -n "$variants" ] || kernel_variants
    for fs_f in greedy long150; do
        fs_step="B:fixture-$fs_f"
        fs_json="$FIXTURES/tiny-$FIXTURE.$fs_f.json"
        echo "== step $fs_step (pocket vs llama.cpp on $(basename "$MODEL"), $fs_f.json teacher-forced${fs_tag:+, $fs_tag})"
        fs_ids=$("$PYTHON" tests/lib/check_fixture.py ids "$fs_json") || { note_fail "$fs_step" "cannot read $fs_json"; continue; }
        for fs_k in $variants; do
            for fs_b in 1 256; do
                fs_out="$TMP/fixture-$fs_f.$fs_k$fs_tag.b$fs_b.f32"
                # shellcheck disable=SC2086 # the options are words
                if ! POCKET_KERNELS=$fs_k $RUN "$TOOL" -t 1 -b $fs_b $fs_topt "$MODEL" "$fs_out" "$fs_ids"; then
                    note_fail "$fs_step" "tool_logits ($fs_k${fs_tag:+ $fs_tag}, -b $fs_b) exited with an error"; continue
                fi
                printf '[%s %s-b %s] ' "$fs_k" "${fs_tag:+$fs_tag }" "$fs_b"
                # shellcheck disable=SC2086
                "$PYTHON" tests/lib/check_fixture.py $fs_copt logits "$fs_json" "$fs_out" 4096 \
                    || note_fail "$fs_step" "pocket's logits ($fs_k${fs_tag:+ $fs_tag}, -b $fs_b) differ from llama.cpp's"
            done
            [ "$fs_bitwise" = 1 ] || continue
            if cmp -s "$TMP/fixture-$fs_f.$fs_k$fs_tag.b1.f32" "$TMP/fixture-$fs_f.$fs_k$fs_tag.b256.f32"; then
                echo "ok   $fs_f ($fs_k${fs_tag:+ $fs_tag}): one batch = one token at a time, bitwise"
            else
                note_fail "C:batch" "$fs_f ($fs_k${fs_tag:+ $fs_tag}): one token at a time and one batch differ"
            fi
        done
    done
}

# same_logits STEP LABEL IDS "ARGS A" "ARGS B" - tool_logits ARGS A and
# ARGS B (options and the model) give the same logits for IDS, bitwise
same_logits() {
    # shellcheck disable=SC2086 # the arguments are words
    if $RUN "$TOOL" $4 "$TMP/same.a.f32" "$3" && $RUN "$TOOL" $5 "$TMP/same.b.f32" "$3" &&
        cmp -s "$TMP/same.a.f32" "$TMP/same.b.f32"; then
        echo "ok   $2"
    else
        note_fail "$1" "$2: the logits differ"
    fi
}

# expect_error STEP TEXT COMMAND... - COMMAND fails and prints TEXT
expect_error() {
    ee_step=$1; ee_text=$2; shift 2
    if "$@" >"$TMP/err.out" 2>&1; then
        note_fail "$ee_step" "accepted: $*"
    elif grep -q -- "$ee_text" "$TMP/err.out"; then
        echo "ok   refused: $(cat "$TMP/err.out")"
    else
        note_fail "$ee_step" "refused without '$ee_text': $(head -c 300 "$TMP/err.out")"
    fi
}

# expect_info STEP MODEL LINE - `pocket info MODEL` prints LINE
expect_info() {
    if ! $RUN "$BUILD/pocket" info "$2" >"$TMP/info.out" 2>&1; then
        note_fail "$1" "pocket info $2 failed: $(head -c 300 "$TMP/info.out")"
    elif grep -qxF "$3" "$TMP/info.out"; then
        echo "ok   $(basename "$2"): $3"
    else
        note_fail "$1" "$(basename "$2"): expected the line '$3' in: $(grep -E '^(blocks|multipliers)' "$TMP/info.out")"
    fi
}

# bad_files STEP COUNT SOURCE < PYTHON - step D: the Python program read
# from stdin (with sys, os, np, G = gguf_py, mkbad imported and SRC = SOURCE,
# OUT = the directory to write to) writes bad copies of SOURCE and prints a
# line "FILE<TAB>TEXT" for each, COUNT in all (tests/lib/mkbad.py write_cases);
# `pocket info OUT/FILE` must print one line "pocket: error: ...TEXT..." and
# exit with status 1
bad_files() {
    bf_step=$1; bf_n=$2
    echo "== step $bf_step (missing / misshapen tensors and keys, unsupported features: one error line naming them)"
    mkdir -p "$TMP/bad" || return
    if ! { printf '%s\n' "import os, sys" "sys.path.insert(0, 'tests/lib')" "import numpy as np" \
               "import gguf_py as G" "import mkbad" "SRC, OUT = sys.argv[1], sys.argv[2]"; cat; } |
         "$PYTHON" - "$3" "$TMP/bad" >"$TMP/bad.cases"; then
        note_fail "$bf_step" "could not write the bad files"; return
    fi
    bf_got=$(wc -l <"$TMP/bad.cases")
    [ "$bf_got" -eq "$bf_n" ] || note_fail "$bf_step" "expected $bf_n bad files, wrote $bf_got"
    while IFS="$(printf '\t')" read -r bf_file bf_expect; do
        $RUN "$BUILD/pocket" info "$TMP/bad/$bf_file" >"$TMP/bad.out" 2>&1
        bf_rc=$?
        bf_lines=$(wc -l <"$TMP/bad.out")
        if [ $bf_rc -ne 1 ] || [ "$bf_lines" -ne 1 ] || ! grep -q "^pocket: error: .*$bf_expect" "$TMP/bad.out"; then
            note_fail "$bf_step" "$bf_file: exit $bf_rc, $bf_lines line(s), expected one error naming '$bf_expect': $(head -c 300 "$TMP/bad.out")"
        else
            echo "ok   $bf_file: $(cat "$TMP/bad.out")"
        fi
    done <"$TMP/bad.cases"
}

finish() {
    if [ $fail -ne 0 ]; then
        echo "t_$REF_NAME: FAILED in step(s):$failed_steps (files kept in $TMP)"
        exit 1
    fi
    rm -rf "$TMP"
    echo "t_$REF_NAME: $1"
    exit 0
}
