# fixtures.sh - sourced, not run. fixture_model ARCH prints the path of the
# llama.cpp fixture model tiny-ARCH.gguf ($BUILD/fixtures/tiny-ARCH.gguf),
# first rebuilding it from tests/data/fixtures/ARCH/spec.json with
# tests/lib/mk_fixture.py when it is missing or older than the spec (the
# rebuilt file is byte for byte ../shared/fixtures/ARCH/tiny-ARCH.gguf:
# mk_fixture.py checks the spec's sha256). Returns non-zero, after one line on
# stderr, if it cannot. Uses $BUILD (default build) and $PYTHON.
fixture_model() {
    fm_spec="tests/data/fixtures/$1/spec.json"
    fm_out="${BUILD:-build}/fixtures/tiny-$1.gguf"
    if [ ! -f "$fm_spec" ]; then
        echo "fixture_model: no fixture $1 ($fm_spec not found)" >&2
        return 1
    fi
    if [ ! -f "$fm_out" ] || [ "$fm_spec" -nt "$fm_out" ]; then
        mkdir -p "${BUILD:-build}/fixtures" &&
            "${PYTHON:-/usr/bin/python3}" tests/lib/mk_fixture.py "$fm_spec" "$fm_out" >&2 || return 1
    fi
    echo "$fm_out"
}
