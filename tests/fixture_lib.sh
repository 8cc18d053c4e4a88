# fixture_lib.sh - shell functions the fixture tests (t_*_ref.sh) share;
# sourced, not run. The caller sets BUILD, PYTHON, TOOL, RUN, TMP and, for
# fixture_logits, variants (usable_variants).

fail=0
failed_steps=""
# note_fail STEP MESSAGE: print a failure, remember its step
note_fail() {
    echo "FAIL [$1] $2"
    fail=1
    case " $failed_steps " in *" $1 "*) ;; *) failed_steps="$failed_steps $1" ;; esac
}

# usable_variants: the kernel variants usable here (the list `pocket --help`
# prints), or those $BATCH_VARIANTS names (tests/run_aarch64.sh: the
# variants each emulated CPU adds)
usable_variants() {
    if [ -n "${BATCH_VARIANTS:-}" ]; then echo "$BATCH_VARIANTS"; return; fi
    $RUN "$BUILD/pocket" --help | sed -n 's/.*usable on this CPU): //p' | tr ' ' '\n' | sed -n 's/[*]$//p'
}

# fixture_logits STEP JSON MODEL "TOOL OPTIONS" "CHECK OPTIONS": pocket
# (tool_logits, one thread) fed the teacher-forced ids of JSON, one token at
# a time and as one batch, on each of $variants, against the llama.cpp
# reference by tests/check_fixture.py
fixture_logits() {
    fl_step=$1; fl_json=$2; fl_model=$3; fl_topt=$4; fl_copt=$5
    [ -n "$variants" ] || { note_fail setup "no usable kernel variant in pocket --help"; return; }
    fl_ids=$("$PYTHON" tests/check_fixture.py ids "$fl_json") ||
        { note_fail "$fl_step" "cannot read $fl_json"; return; }
    for fl_kv in $variants; do
        for fl_b in 1 256; do
            fl_out="$TMP/fixture.$fl_kv.b$fl_b.f32"
            # shellcheck disable=SC2086 # the options are words
            if ! POCKET_KERNELS=$fl_kv $RUN "$TOOL" -t 1 -b $fl_b $fl_topt "$fl_model" "$fl_out" "$fl_ids"; then
                note_fail "$fl_step" "tool_logits ($fl_kv, -b $fl_b) exited with an error"; continue
            fi
            printf '[%s -b %s] ' "$fl_kv" "$fl_b"
            # shellcheck disable=SC2086
            "$PYTHON" tests/check_fixture.py $fl_copt logits "$fl_json" "$fl_out" 4096 \
                || note_fail "$fl_step" "pocket's logits ($fl_kv, -b $fl_b) differ from llama.cpp's"
        done
    done
}

# expect_errors STEP CASES DIR: each line of CASES is "FILE<TAB>TEXT";
# `pocket info DIR/FILE` must exit 1 with one line "pocket: error: ...TEXT"
expect_errors() {
    while IFS="$(printf '\t')" read -r ee_file ee_expect; do
        $RUN "$BUILD/pocket" info "$3/$ee_file" >"$TMP/bad.out" 2>&1
        ee_rc=$?
        ee_lines=$(wc -l <"$TMP/bad.out")
        if [ $ee_rc -ne 1 ] || [ "$ee_lines" -ne 1 ] || ! grep -q "^pocket: error: .*$ee_expect" "$TMP/bad.out"; then
            note_fail "$1" "$ee_file: exit $ee_rc, $ee_lines line(s), expected one error naming '$ee_expect': $(head -c 300 "$TMP/bad.out")"
        else
            echo "ok   $ee_file: $(cat "$TMP/bad.out")"
        fi
    done <"$2"
}
