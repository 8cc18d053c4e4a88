# variants.sh - sourced, not run. kernel_variants prints the kernel variants
# to test, one a line: those `pocket --help` lists as usable on this CPU, or
# $BATCH_VARIANTS when set (each must be usable: tests/lib/run_aarch64.sh
# gives each emulated CPU the variants the smaller CPUs lack). Returns
# non-zero, after one FAIL line, if there are none or one named is not
# usable. Uses $BUILD and $POCKET_RUN (a prefix for the binary, e.g. qemu).
kernel_variants() {
    kv_all=$(${POCKET_RUN:-} "${BUILD:-build}/pocket" --help | sed -n 's/.*usable on this CPU): //p' |
             tr ' ' '\n' | sed -n 's/[*]$//p')
    [ -n "$kv_all" ] || { echo "FAIL: no usable kernel variant in pocket --help"; return 1; }
    [ -n "${BATCH_VARIANTS:-}" ] || { echo "$kv_all"; return 0; }
    for kv_v in $BATCH_VARIANTS; do
        echo "$kv_all" | grep -qx "$kv_v" ||
            { echo "FAIL: BATCH_VARIANTS names '$kv_v', not usable here (usable:" $kv_all")"; return 1; }
    done
    echo "$BATCH_VARIANTS" | tr ' ' '\n'
}
