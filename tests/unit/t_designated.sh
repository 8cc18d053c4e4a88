#!/bin/sh
# Struct literals of more than three fields name their fields (`.name = ...`):
# tests/lib/check_designated.py parses every .c of src, tools, tests, fuzz,
# bench and examples with libclang (python3-clang, which `make test` installs
# as root) and names each literal without them. First it must find exactly
# the ones planted in a sample, so a checker that sees nothing fails too.
PYTHON=${PYTHON:-/usr/bin/python3}
BUILD=${BUILD:-build}
root=$(pwd)
check="$root/tests/lib/check_designated.py"
[ -f "$check" ] || { echo "FAIL: run from the project root"; exit 1; }
"$PYTHON" -c 'import clang.cindex' 2>/dev/null ||
    { echo "FAIL: t_designated needs libclang's Python bindings (Debian: apt-get install python3-clang)"; exit 1; }

tmp="$BUILD/tmp/t_designated"
rm -rf "$tmp"; mkdir -p "$tmp/tests"
cat >"$tmp/tests/sample.c" <<'EOF'
#include <pthread.h>
typedef struct four { int a, b, c, d; } four;
typedef struct three { int a, b, c; } three;
typedef struct outer { four f; int x, y, z; } outer;
#define FOUR(v) {v, 0, 0, v}
static const four rows[] = {
    {1, 2, 3, 4},
    {.a = 1, .d = 4},
};
static const four elided[] = { 1, 2, 3, 4, 5, 6, 7, 8 };
static const three small = {1, 2, 3};
static const four zero = {0};
static const four mixed = {.a = 1, 2};
static const four by_macro = FOUR(7);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
int use(void) {
    outer o = {.f = {1, 2, 3, 4}, .x = 1};
    four c = (four){5, 6, 7, 8};
    outer ok = {.f = {.a = 1}, .y = 2};
    return rows[0].a + elided[0].a + small.a + zero.a + mixed.a + by_macro.a + o.x + c.a + ok.y + (lock.__size[0] != 0);
}
EOF
cat >"$tmp/want" <<'EOF'
tests/sample.c:7:5: struct four (4 fields): 4 of 4 elements without a field name
tests/sample.c:10:30: an array of struct four whose rows lose their braces
tests/sample.c:13:27: struct four (4 fields): 1 of 2 elements without a field name
tests/sample.c:14:30: (the macro FOUR, tests/sample.c:5): struct four (4 fields): 4 of 4 elements without a field name
tests/sample.c:17:21: struct four (4 fields): 4 of 4 elements without a field name
tests/sample.c:18:20: struct four (4 fields): 4 of 4 elements without a field name
EOF
(cd "$tmp" && "$PYTHON" "$check" tests/sample.c) >"$tmp/got"
if ! grep '^tests/sample.c' "$tmp/got" | diff "$tmp/want" - >"$tmp/diff"; then
    echo "FAIL: the checker on its sample (want < > got):"; cat "$tmp/diff"; exit 1
fi
echo "sample: the $(wc -l <"$tmp/want") planted literals found, nothing else"

out="$tmp/tree"
"$PYTHON" "$check" >"$out"; rc=$?
cat "$out"
n=$(sed -n 's/^check_designated: \([0-9]*\) files, \([0-9]*\) literals.*/\1 \2/p' "$out")
set -- $n
[ "${1:-0}" -gt 100 ] && [ "${2:-0}" -gt 100 ] ||
    { echo "FAIL: too few files or literals seen (${1:-?} files, ${2:-?} literals): is this the project root?"; exit 1; }
[ $rc -eq 0 ] || { echo "FAIL: struct literals above without field names (or files clang cannot parse)"; exit 1; }
echo "t_designated: PASS"
