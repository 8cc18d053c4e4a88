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

# greedy_vs_llama MODEL REF.json DIR: pocket's logits on MODEL for REF's
# prompt and greedy tokens (tests/lib/tool_logits.c, one token at a time,
# $POCKET_RUN prefixing it) against llama.cpp's greedy run REF (in the form
# of ../shared/models/*.greedy.json), with the selected and the reference
# kernels: tests/lib/check_greedy.py (every argmax, top logits within 1e-3
# relative). Logits go to DIR/logits.f32. Returns non-zero on a mismatch.
greedy_vs_llama() {
    gv_ids=$("${PYTHON:-/usr/bin/python3}" -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(",".join(str(x) for x in d["prompt_ids"] + [s["id"] for s in d["steps"][:-1]]))' "$2") || return 1
    for gv_kern in default ref; do
        echo "kernels: $gv_kern"
        (if [ $gv_kern = ref ]; then export POCKET_KERNELS=ref; fi
         exec ${POCKET_RUN:-} "${BUILD:-build}/tests/tool_logits" -t 2 "$1" "$3/logits.f32" "$gv_ids") &&
            "${PYTHON:-/usr/bin/python3}" tests/lib/check_greedy.py "$2" "$3/logits.f32" 4096 || return 1
    done
}
