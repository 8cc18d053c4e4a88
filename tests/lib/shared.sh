# shared.sh - sourced, not run, by the tests of `make test-shared`
# (tests/ref/shared/t_*.sh): POCKET_SHARED (default ../shared) is the
# directory of reference files they read, and need_shared FILE... stops the
# test (exit 1) with one line naming the first of FILE (relative to it) that
# is missing, and how to point at another directory.
POCKET_SHARED=${POCKET_SHARED:-../shared}
need_shared() {
    for ns_f in "$@"; do
        if [ ! -e "$POCKET_SHARED/$ns_f" ]; then
            echo "FAIL: $POCKET_SHARED/$ns_f not found (make test-shared reads ../shared's reference files; POCKET_SHARED=DIR names another directory)"
            exit 1
        fi
    done
}
