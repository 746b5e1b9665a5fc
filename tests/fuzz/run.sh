#!/bin/sh
# run.sh — run the libFuzzer targets of tests/fuzz/ (built by `make fuzz`
# under build/fuzz/fuzz/), each for FUZZ_SECONDS (default 60) on a copy of
# its committed corpus tests/fuzz/corpus/NAME, so what a run finds never
# changes the repository by itself. A crash, leak or sanitizer report fails
# the target; its input is left as build/fuzz/findings/NAME-crash-… (keep it
# in the corpus once the bug is fixed). Prints each target's last status
# line (exec/s, cov:, ft:) and "fuzz: NAME passed|FAILED"; exits 1 when any
# target failed. Usage: tests/fuzz/run.sh [NAME ...] (default: all).
set -u
cd "$(dirname "$0")/../.."
FB=${FUZZ_BUILD:-build/fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-60}
names=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_\(.*\)\.c|\1|')}
work=$(mktemp -d "${TMPDIR:-/tmp}/hetps-fuzz-run-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
mkdir -p "$FB/findings"
failed=""
for n in $names; do
    bin="$FB/fuzz/fuzz_$n"
    [ -x "$bin" ] || { echo "fuzz: $bin is not built (make fuzz)"; failed="$failed $n"; continue; }
    mkdir -p "$work/$n"
    cp tests/fuzz/corpus/"$n"/* "$work/$n/" 2>/dev/null
    # -rss_limit_mb: a parser that allocates more than this for a small
    # input is a finding too.
    "$bin" -max_total_time="$SECONDS_EACH" -rss_limit_mb=1024 -timeout=10 \
        -print_final_stats=1 -artifact_prefix="$FB/findings/$n-" \
        "$work/$n" > "$work/$n.log" 2>&1
    rc=$?
    grep -E '^#[0-9]+.*(pulse|DONE)' "$work/$n.log" | tail -1
    grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec' "$work/$n.log"
    if [ $rc -eq 0 ]; then
        echo "fuzz: $n passed"
    else
        tail -40 "$work/$n.log"
        echo "fuzz: $n FAILED (exit $rc)"
        failed="$failed $n"
    fi
done
[ -z "$failed" ] || { echo "fuzz: failed:$failed"; exit 1; }
