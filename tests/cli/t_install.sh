#!/bin/sh
# make install into a scratch prefix, then build examples/minimal.c against
# the installed library with pkg-config only (no -I/-L into the source tree)
# and run it on the bundled model: it must print the prompt and generated text,
# the same greedy text as `pocket run --temp 0`. Also checks the installed CLI
# finds the installed model (share/pocket) with no -m.
set -u
BUILD=${BUILD:-build}; PYTHON=${PYTHON:-/usr/bin/python3}
case "$BUILD" in /*) build_abs=$BUILD ;; *) build_abs=$(pwd)/$BUILD ;; esac
prefix="$build_abs/tmp/prefix"; rm -rf "$prefix"
tmp="$build_abs/tmp/install"; rm -rf "$tmp"; mkdir -p "$tmp"
fails=0; n=0
check() { name=$1; shift; n=$((n + 1)); if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi; }

command -v pkg-config >/dev/null || { echo "FAIL pkg-config is missing (make deps installs pkgconf as root)"; exit 1; }
# The sanitizer build's objects need the sanitizer runtime to link.
san=""; case "$BUILD" in *san*) san="-fsanitize=address,undefined" ;; esac

make -s install BUILD="$BUILD" PREFIX="$prefix" >"$tmp/make.log" 2>&1
check "make install" [ $? -eq 0 ] || cat "$tmp/make.log"
for f in lib/libpocket.a include/pocket.h lib/pkgconfig/pocket.pc bin/pocket share/pocket/kjv-moe-f16.gguf; do
    check "installed $f" [ -s "$prefix/$f" ]
done
check "pocket.pc Libs" grep -q '^Libs: -L${libdir} -lpocket$' "$prefix/lib/pkgconfig/pocket.pc"
check "pocket.pc Libs.private" grep -q '^Libs.private: -lpcre2-8 -ljansson -lm -lpthread$' "$prefix/lib/pkgconfig/pocket.pc"

flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs --static pocket)
check "pkg-config --cflags --libs --static pocket ($flags)" [ -n "$flags" ]
# -std=c11 -Wall -Wextra -Werror: the public header and the example are clean
cc -std=c11 -Wall -Wextra -Werror $san examples/minimal.c $flags -o "$tmp/minimal" 2>"$tmp/cc.log"
check "examples/minimal.c builds against the installed library" [ $? -eq 0 ] || cat "$tmp/cc.log"

"$tmp/minimal" "$prefix/share/pocket/kjv-moe-f16.gguf" "And God said" 16 >"$tmp/out" 2>"$tmp/err"
check "minimal runs" [ $? -eq 0 ] || cat "$tmp/err"
out=$(cat "$tmp/out")
check "minimal prints the prompt and generated text ($out)" [ "${#out}" -gt 30 ]
case "$out" in "And God said"*) ok=1 ;; *) ok=0 ;; esac
check "output starts with the prompt" [ $ok -eq 1 ]
# from elsewhere (no ./models), so the CLI must find PREFIX/share/pocket/
(cd "$tmp" && env -u POCKET_MODEL "$prefix/bin/pocket" run -p "And God said" -n 16 --temp 0 -t 2 \
    >"$tmp/run" 2>"$tmp/run.err")
check "installed pocket finds the installed model" [ $? -eq 0 ] || cat "$tmp/run.err"
check "minimal = pocket run --temp 0" [ "$out" = "$(cat "$tmp/run")" ]
check "minimal without arguments: usage, exit 2" sh -c "'$tmp/minimal' 2>/dev/null; [ \$? -eq 2 ]"

echo "$((n - fails)) of $n install checks passed"
[ $fails -eq 0 ]
