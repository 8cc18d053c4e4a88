# ref_lib.sh - what the t_*_ref.sh scripts share; sourced after setting
# REF_NAME (the script's name, e.g. deepseek2_ref):
#   BUILD (default build), PYTHON, TOOL (tool_logits), RUN ($POCKET_RUN: a
#   prefix for every pocket binary), TMP (a fresh directory under
#   $BUILD/tmp), fail / failed_steps;
#   note_fail STEP MESSAGE   a failure line naming its step, remembered
#   compare STEP LABEL REF.npy POCKET.f32 TOL   tests/compare_logits.py
#   step0 ARCH               the numpy reference vs llama.cpp on $MODEL
#                            (tests/check_fixture.py --arch ARCH)
#   need_tools               stop (exit 1) if tool_logits or pocket is missing
#   kernel_variants          sets $variants: the kernel variants usable here
#                            (pocket --help), or those $BATCH_VARIANTS names
#                            (as t_batch.sh)
#   finish MESSAGE           the closing line; exit 0, or 1 naming the failed steps
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
TOOL="$BUILD/tests/tool_logits"
RUN=${POCKET_RUN:-}
mkdir -p "$BUILD/tmp" || exit 1
TMP=$(mktemp -d "$BUILD/tmp/$REF_NAME.XXXXXX") || exit 1
fail=0
failed_steps=""
note_fail() {   # note_fail STEP MESSAGE
    echo "FAIL [$1] $2"
    fail=1
    case " $failed_steps " in *" $1 "*) ;; *) failed_steps="$failed_steps $1" ;; esac
}
compare() { "$PYTHON" tests/compare_logits.py "$@"; }
step0() {
    echo "== step 0: the numpy reference vs llama.cpp on the fixture"
    if [ -f "$MODEL" ]; then
        "$PYTHON" tests/check_fixture.py --arch "$1" --fixture-dir "$FIXTURES" \
            || note_fail step0 "check_fixture.py: the numpy reference disagrees with llama.cpp"
    else
        note_fail step0 "fixture $MODEL not found"
    fi
}
kernel_variants() {
    variants=$($RUN "$BUILD/pocket" --help | sed -n 's/.*usable on this CPU): //p' | tr ' ' '\n' | sed -n 's/[*]$//p')
    [ -n "$variants" ] || note_fail setup "no usable kernel variant in pocket --help"
    # under emulation tests/run_aarch64.sh names the variants each CPU adds
    [ -n "${BATCH_VARIANTS:-}" ] && variants=$BATCH_VARIANTS
}
need_tools() {
    if [ ! -x "$TOOL" ] || [ ! -x "$BUILD/pocket" ]; then
        note_fail setup "$TOOL or $BUILD/pocket not found (build them with make)"
        echo "t_$REF_NAME: FAILED in step(s):$failed_steps"
        exit 1
    fi
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
