#!/bin/sh
# check_bad.sh CASES DIR - every model file DIR/NAME named in CASES (lines
# "NAME<TAB>expected substring", as tests/mkbad.py and the t_*_ref.sh step
# D scripts write them) must make `pocket info` print exactly one line,
# "pocket: error: ..." containing the substring, and exit with status 1.
# Prints one line per file; exit status 0 iff all of them do. Uses $BUILD
# (default build) and $POCKET_RUN (a prefix for the binary, as the tests).
BUILD=${BUILD:-build}
RUN=${POCKET_RUN:-}
cases=$1; dir=$2
bad=0
out=$(mktemp "$BUILD/tmp/check_bad.XXXXXX") || exit 1
while IFS="$(printf '\t')" read -r file expect; do
    $RUN "$BUILD/pocket" info "$dir/$file" >"$out" 2>&1
    rc=$?
    lines=$(wc -l <"$out")
    if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q "^pocket: error: .*$expect" "$out"; then
        echo "FAIL $file: exit $rc, $lines line(s), expected one error naming '$expect': $(head -c 300 "$out")"
        bad=1
    else
        echo "ok   $file: $(cat "$out")"
    fi
done <"$cases"
rm -f "$out"
exit $bad
