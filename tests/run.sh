#!/bin/sh
# run.sh — run every test of hetps and add up the results.
#
# Unit tests: each $HETPS_BUILD/tests/test_* program (CUnit) prints
# "cunit-counts: run R failed F skipped S". Integration tests: each
# tests/integration/*.sh is one test; exit 0 passes, 77 is skipped, anything
# else fails. tests/faults/*.sh (network faults in namespaces; need root)
# run the same way, and so do tests/deploy/*.sh (images and Compose with a
# real Docker daemon; skipped without one). Fuzz smoke runs: each libFuzzer target of tests/fuzz/
# (built under $FUZZ_BUILD, default build/fuzz, by `make fuzz` or `make
# test`) runs FUZZ_SMOKE seconds (default 5) on its corpus, one test each,
# skipped when not built. The last line is "tests: P passed, F failed, S
# skipped". Set TESTS=pattern to run only the matching ones.
set -u
cd "$(dirname "$0")/.."
B=${HETPS_BUILD:-build/rel}
PATTERN=${TESTS:-}
pass=0 fail=0 skip=0 failed_names="" flaky_names=""
log_dir=$(mktemp -d "${TMPDIR:-/tmp}/hetps-tests-XXXXXX")

for t in "$B"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    case "$name" in *"$PATTERN"*) ;; *) continue ;; esac
    echo "=== unit: $name"
    # Bounded: a unit program that hangs fails (exit 124) instead of
    # holding the run (nng 1.5.2 could hang a close: common/README.md).
    timeout "${UNIT_TIMEOUT:-900}" "$t" > "$log_dir/$name.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ "${HETPS_RETRY:-1}" = 1 ]; then
        # One more try, as for the integration tests below.
        cat "$log_dir/$name.log"
        echo "$name: FAILED (exit $rc) on the first try; trying once more"
        timeout "${UNIT_TIMEOUT:-900}" "$t" > "$log_dir/$name.log" 2>&1
        rc=$?
        [ $rc -eq 0 ] && flaky_names="$flaky_names $name"
    fi
    line=$(grep '^cunit-counts:' "$log_dir/$name.log" | tail -1)
    if [ -z "$line" ]; then
        cat "$log_dir/$name.log"
        echo "$name: crashed or printed no counts (exit $rc)"
        fail=$((fail + 1)); failed_names="$failed_names $name"
        continue
    fi
    set -- $line
    r=$3 f=$5 s=$7
    # Show the CUnit summary, and the whole log when something failed.
    if [ "$rc" -ne 0 ] || [ "$f" -ne 0 ]; then
        cat "$log_dir/$name.log"
        failed_names="$failed_names $name"
        [ "$f" -eq 0 ] && f=1
    else
        sed -n '/Run Summary/,$p' "$log_dir/$name.log"
        grep -h 'skipped:' "$log_dir/$name.log" || true
    fi
    pass=$((pass + r - f - s)); fail=$((fail + f)); skip=$((skip + s))
done

for t in tests/integration/*.sh tests/faults/*.sh tests/deploy/*.sh; do
    [ -f "$t" ] || continue
    name=$(basename "$t" .sh)
    case "$name" in *"$PATTERN"*) ;; *) continue ;; esac
    echo "=== integration: $name"
    HETPS_BUILD="$B" sh "$t" > "$log_dir/$name.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 77 ] && [ "${HETPS_RETRY:-1}" = 1 ]; then
        # One more try for a test that failed: some of these tests still
        # fail now and then from timing on a loaded 2-core machine
        # (tests/README.md, *Flaky tests*). The first failure is shown in full
        # and the test is named at the end as flaky, never silently passed.
        # HETPS_RETRY=0 turns this off.
        tail -60 "$log_dir/$name.log"
        echo "$name: FAILED (exit $rc) on the first try; trying once more"
        HETPS_BUILD="$B" sh "$t" > "$log_dir/$name.log" 2>&1
        rc=$?
        [ $rc -eq 0 ] && flaky_names="$flaky_names $name"
    fi
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1)); tail -3 "$log_dir/$name.log"; echo "$name: passed"
    elif [ $rc -eq 77 ]; then
        skip=$((skip + 1)); tail -1 "$log_dir/$name.log"; echo "$name: skipped"
    else
        fail=$((fail + 1)); failed_names="$failed_names $name"
        tail -60 "$log_dir/$name.log"; echo "$name: FAILED (exit $rc)"
    fi
done

FB=${FUZZ_BUILD:-build/fuzz}
for src in tests/fuzz/fuzz_*.c; do
    [ -f "$src" ] || continue
    name=$(basename "$src" .c)
    case "$name" in *"$PATTERN"*) ;; *) continue ;; esac
    echo "=== fuzz smoke: $name"
    if [ ! -x "$FB/fuzz/$name" ]; then
        skip=$((skip + 1)); echo "skipped: $FB/fuzz/$name not built (clang with libFuzzer missing?)"
        continue
    fi
    FUZZ_BUILD="$FB" FUZZ_SECONDS="${FUZZ_SMOKE:-5}" ./tests/fuzz/run.sh "${name#fuzz_}" \
        > "$log_dir/$name.log" 2>&1
    if [ $? -eq 0 ]; then
        pass=$((pass + 1)); tail -2 "$log_dir/$name.log"
    else
        fail=$((fail + 1)); failed_names="$failed_names $name"
        tail -40 "$log_dir/$name.log"
    fi
done

rm -rf "$log_dir"
[ -n "$failed_names" ] && echo "failed:$failed_names"
[ -n "$flaky_names" ] && echo "flaky (failed once, passed on the second try):$flaky_names"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
