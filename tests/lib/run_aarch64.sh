#!/bin/sh
# run_aarch64.sh - the AArch64 tests under emulation (`make test-aarch64`,
# which first cross-builds into $BUILD, default build-aarch64, against the
# arm64 Debian tree $SYSROOT, default $BUILD/sysroot).
#
# Every program runs as `qemu-aarch64 -L $SYSROOT -cpu CPU PROGRAM` (no
# binfmt registration needed), for each CPU of $CPUS (default: cortex-a53 =
# ARMv8.0 NEON only, neoverse-n1 = + dotprod and fp16, max = + i8mm, bf16,
# SVE). Per CPU: the kernel tests (each iterates every kernel variant the
# emulated CPU can use, against the reference), the forward-pass references
# (numpy on the host, pocket under qemu), batch = one token at a time, the
# bundled model's greedy continuation (llama.cpp's, as on x86), and the
# perplexity of the first window(s), which must equal the host build's. Under
# -cpu max, the tokenizer and chat-template tests; per CPU, `pocket bench`
# names the emulated CPU and runs the best variant. With $POCKET_SHARED set
# (`make test-aarch64 POCKET_SHARED=../shared`, as CI does), also the checks
# against its reference files: the tokenizer on llama.cpp's vocabularies
# under -cpu max, and once the host build's perplexity over the whole text
# against llama.cpp's figure (what ties the emulated windows to it); without,
# a line says they were not run (make test-shared runs them on the host). The kernel variants each CPU ran are listed; a CPU with more
# features must list every variant of a CPU with fewer.
# Prints one line per test and "N passed, N failed"; exit status non-zero if
# any test failed. Run from the project root.
BUILD=${BUILD:-build-aarch64}
SYSROOT=${SYSROOT:-$BUILD/sysroot}
HOST_BUILD=${HOST_BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
QEMU=${QEMU:-qemu-aarch64}
CPUS=${CPUS:-cortex-a53 neoverse-n1 max}
KERNEL_TESTS="test_kernels test_kernels_quant test_gemm test_kernels_iq1 test_kv"
OTHER_TESTS="test_platform test_tokenizer test_chat"
SCRIPTS="ref/t_forward_ref.sh ref/t_qwen35_ref.sh ref/t_qwen3next_ref.sh ref/t_gptoss_ref.sh ref/t_moerows_ref.sh cli/t_batch.sh ref/t_reference_greedy.sh ref/t_perplexity.sh"
export BUILD PYTHON HOST_BUILD
pass=0; fail=0; failed=""
mkdir -p "$BUILD/logs" || exit 1

# check LABEL LOG COMMAND... : run, print PASS/FAIL with the time
check() {
    label=$1; log=$2; shift 2
    start=$(date +%s)
    "$@" >"$log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - start ))
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); echo "PASS $label (${secs}s)$note"
    else
        fail=$((fail + 1)); failed="$failed $label"
        echo "FAIL $label (${secs}s, exit $rc)$note — log follows:"
        tail -n 30 "$log" | sed 's/^/    /'
    fi
    note=""
}
note=""

# bench_check RUN NAME VARIANT: `pocket bench` runs, names the (emulated)
# CPU - NAME if not empty - and uses VARIANT, the best one test_kernels listed
bench_check() {
    out=$($1 "$BUILD/pocket" bench -p 4 -n 2 -r 1 --no-bw 2>&1) || return 1
    echo "$out"
    machine=$(echo "$out" | sed -n 's/^machine: \(.*\), [0-9]* cores, .*/\1/p')
    [ -n "$machine" ] || { echo "bench printed no machine line"; return 1; }
    [ -z "$2" ] || case "$machine" in "$2"*) ;; *) echo "machine should start with '$2'"; return 1 ;; esac
    echo "$out" | grep -q "^config:  kernels $3," || { echo "bench should use kernels $3"; return 1; }
    note=" [$machine; kernels $3]"
}

command -v "$QEMU" >/dev/null 2>&1 || { echo "FAIL: $QEMU not found (make test-aarch64 installs qemu-user)"; echo "0 passed, 1 failed"; exit 1; }
for f in "$SYSROOT/lib/ld-linux-aarch64.so.1" "$BUILD/pocket" "$HOST_BUILD/pocket"; do
    [ -e "$f" ] || { echo "FAIL: $f not found (run make test-aarch64)"; echo "0 passed, 1 failed"; exit 1; }
done

# suite CPU BEFORE: every per-CPU test, in $BUILD/cpu/CPU (links to the binaries,
# its own tmp/ and logs), so that the CPUs can run side by side; writes its
# report lines, "PASSED FAILED" counts and kernel variants there. BEFORE:
# the variants usable on the CPUs before it in $CPUS.
suite() {
    cpu=$1; dir="$BUILD/cpu/$cpu"
    rm -rf "$dir"; mkdir -p "$dir/logs" || return 1
    ln -s ../../pocket "$dir/pocket" && ln -s ../../tests "$dir/tests" || return 1
    run="$QEMU -L $SYSROOT -cpu $cpu"
    BUILD=$dir; logs="$dir/logs"; pass=0; fail=0; failed=""
    for t in $KERNEL_TESTS; do
        check "$cpu/$t" "$logs/$t.log" $run "$dir/tests/$t"
    done
    # test_kernels lists the variants it checked, best last
    v=$(sed -n 's/^kernels: //p' "$logs/test_kernels.log" | tr '\n' ' ' | sed 's/ $//')
    echo "$v" >"$dir/variants"
    echo "     kernel variants checked on $cpu: ${v:-none}"
    # t_batch runs each variant this CPU adds to the smaller CPUs before it
    # (each variant once over the CPUs: the whole of t_batch per variant under
    # emulation would take most of the time budget), but not ref: the
    # portable C that make test's t_batch runs natively (cortex-a53's t_batch
    # took 211 s without it, 667-728 s with it in busier runs;
    # bench/results/2026-12-08-epyc-zen3.md); the kernel tests above still
    # run it
    mine=$(usable "$cpu"); new=""
    for x in $mine; do
        case " $2 ref " in *" $x "*) ;; *) new="$new $x" ;; esac
    done
    [ -n "$new" ] || new=" $(echo $mine | awk '{print $NF}')"  # adds none: its best
    for s in $SCRIPTS; do
        if [ $s = cli/t_batch.sh ]; then note=" [variants:$new]"; fi
        check "$cpu/${s#*/}" "$logs/${s#*/}.log" env POCKET_RUN="$run" BATCH_VARIANTS="$new" sh "tests/$s"
    done
    case $cpu in
        cortex-a53) want_name="ARM Cortex-A53" ;;
        neoverse-n1) want_name="ARM Neoverse-N1" ;;
        *) want_name="" ;;
    esac
    check "$cpu/bench" "$logs/bench.log" bench_check "$run" "$want_name" "${v##* }"
    echo "$pass $fail$failed" >"$dir/counts"
}

# usable CPU: the kernel variants `pocket --help` marks usable under -cpu CPU
usable() {
    $QEMU -L "$SYSROOT" -cpu "$1" "$BUILD/pocket" --help |
        sed -n 's/.*usable on this CPU): //p' | tr ' ' '\n' | sed -n 's/[*]$//p' | tr '\n' ' '
}

rm -rf "$BUILD/cpu"
before=""
for cpu in $CPUS; do
    mkdir -p "$BUILD/cpu/$cpu"
    suite "$cpu" "$before" >"$BUILD/cpu/$cpu.report" 2>&1 &
    before="$before $(usable "$cpu")"
done
# meanwhile: the host build's whole-text perplexity against llama.cpp
if [ -n "${POCKET_SHARED:-}" ]; then
    check "host/t_perplexity_llama.sh" "$BUILD/logs/host-t_perplexity_llama.sh.log" \
        env BUILD="$HOST_BUILD" sh tests/ref/shared/t_perplexity_llama.sh
fi
wait
variants_all=""; prev=""; prev_cpu=""
for cpu in $CPUS; do
    echo "== -cpu $cpu"
    cat "$BUILD/cpu/$cpu.report"
    if read p f fl <"$BUILD/cpu/$cpu/counts"; then
        pass=$((pass + p)); fail=$((fail + f)); failed="$failed${fl:+ $fl}"
    else
        fail=$((fail + 1)); failed="$failed $cpu/suite"; echo "FAIL $cpu: the suite did not finish"
    fi
    v=$(cat "$BUILD/cpu/$cpu/variants" 2>/dev/null)
    if [ -z "$v" ]; then
        fail=$((fail + 1)); failed="$failed $cpu/variants"; echo "FAIL $cpu/variants: test_kernels listed none"
    fi
    for x in $prev; do   # nested: a later CPU has more features
        case " $v " in *" $x "*) ;; *)
            fail=$((fail + 1)); failed="$failed $cpu/variants"
            echo "FAIL $cpu/variants: '$x' runs on $prev_cpu but not on $cpu" ;;
        esac
    done
    for x in $v; do case " $variants_all " in *" $x "*) ;; *) variants_all="$variants_all $x" ;; esac; done
    prev=$v; prev_cpu=$cpu
done

# C tests of code that depends on the target's C library, memory model and
# char signedness rather than on its SIMD: the portability layer and thread
# pool, the tokenizer (PCRE2, UTF-8 bytes) and chat templates. (test_gguf, test_quantize and test_sampler take 5-9 s of
# CPU natively, minutes under emulation; they run natively in make test.)
for name in $OTHER_TESTS; do
    check "max/$name" "$BUILD/logs/$name.log" $QEMU -L "$SYSROOT" -cpu max "$BUILD/tests/$name"
done
if [ -n "${POCKET_SHARED:-}" ]; then
    check "max/test_tokenizer --vocabs" "$BUILD/logs/test_tokenizer-vocabs.log" \
        $QEMU -L "$SYSROOT" -cpu max "$BUILD/tests/test_tokenizer" --vocabs "$POCKET_SHARED/tokenizer"
else
    echo "not run: POCKET_SHARED is not set (llama.cpp's vocabularies under -cpu max, the host's whole-text perplexity against llama.cpp's)"
fi

echo "kernel variants run:$variants_all"
[ -n "$failed" ] && echo "failed:$failed"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
