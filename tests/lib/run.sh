#!/bin/sh
# run.sh [TEST...] - run the tests named (test programs and .sh scripts), by
# default every test of `make test`: the test programs (build/tests/test_*)
# and test scripts (tests/unit/t_*.sh, tests/ref/t_*.sh, tests/cli/t_*.sh; not those of
# tests/ref/shared/, `make test-shared`'s), from the project root; print one
# line per test and a closing "N passed, N failed" line. Exit status is
# non-zero if any test failed.
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export BUILD PYTHON
pass=0; fail=0; failed=""
mkdir -p "$BUILD/logs"
[ $# -gt 0 ] || set -- "$BUILD"/tests/test_* tests/unit/t_*.sh tests/ref/t_*.sh tests/cli/t_*.sh
for t in "$@"; do
    [ -x "$t" ] || [ "${t%.sh}" != "$t" ] || continue
    name=$(basename "$t")
    log="$BUILD/logs/$name.log"
    start=$(date +%s)
    case "$t" in
        *.sh) sh "$t" >"$log" 2>&1 ;;
        *) "$t" >"$log" 2>&1 ;;
    esac
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); echo "PASS $name (${secs}s)"
    else
        fail=$((fail + 1)); failed="$failed $name"; echo "FAIL $name (${secs}s, exit $rc) — log follows:"
        tail -n 30 "$log" | sed 's/^/    /'
    fi
done
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
