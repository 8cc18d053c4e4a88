#!/bin/sh
# check_bad_files.sh CASES DIR - each line of CASES is "FILE<TAB>EXPECTED":
# `pocket info DIR/FILE` must exit with status 1 and print exactly one line,
# "pocket: error: ..." containing EXPECTED (the tensor or key at fault).
# Prints one ok / FAIL line per file; exits 1 if any failed or CASES is
# empty. Uses $BUILD (default build) and $POCKET_RUN as the tests do.
BUILD=${BUILD:-build}
RUN=${POCKET_RUN:-}
cases=$1; dir=$2
[ -s "$cases" ] || { echo "FAIL no bad files listed in $cases"; exit 1; }
out=$(mktemp "$BUILD/tmp/bad.XXXXXX") || exit 1
fail=0
while IFS="$(printf '\t')" read -r file expect; do
    $RUN "$BUILD/pocket" info "$dir/$file" >"$out" 2>&1
    rc=$?
    lines=$(wc -l <"$out")
    if [ $rc -ne 1 ] || [ "$lines" -ne 1 ] || ! grep -q "^pocket: error: .*$expect" "$out"; then
        echo "FAIL $file: exit $rc, $lines line(s), expected one error naming '$expect': $(head -c 300 "$out")"
        fail=1
    else
        echo "ok   $file: $(cat "$out")"
    fi
done <"$cases"
rm -f "$out"
exit $fail
