#!/bin/sh
# watch.sh — what watching a run costs: the reference job of `make run`
# (2 parameter servers, 2 async workers, fashion_cnn) with every report on
# (each task serving /metrics, the chief writing TensorBoard events every
# step and training.csv every epoch) against all off (--logdir off, no
# metrics), alternating on/off RUNS times each, in one invocation. The
# figure of a run is the job's samples/s: both workers' epoch rates added,
# averaged over the epochs; the best run of each side is kept (noise on a
# shared VM only slows runs down). The progress lines are printed in both.
#
# Environment: HETPS_BIN (bin), BENCH_WATCH_EPOCHS (2), BENCH_RUNS (3),
# BENCH_PORT (29400: ps 29400-1, workers 29410-1, metrics 29420-3).
set -eu
cd "$(dirname "$0")/../.."
BIN=${HETPS_BIN:-bin}
EPOCHS=${BENCH_WATCH_EPOCHS:-2}
RUNS=${BENCH_RUNS:-3}
P=${BENCH_PORT:-29400}
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-bench-watch-XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
for side in on off; do
    m=""; [ $side = on ] && m=", \"metrics_port\": $((P + 20))"
    cat > "$T/$side.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$P", "127.0.0.1:$((P + 1))"],
               "worker": ["127.0.0.1:$((P + 10))", "127.0.0.1:$((P + 11))"] },
  "hetps": { "mode": "async", "workers": [ { "devices": "cpu" }, { "devices": "cpu" } ]$m } }
JSON
done

# one SIDE: run the job; prints its samples/s
one() {
    rm -rf "$T/data"
    logdir=""; [ "$1" = off ] && logdir="--logdir off"
    # shellcheck disable=SC2086
    "$BIN/hetps" launch --data-dir "$T/data" "$T/$1.json" -- \
        --model deploy/models/fashion_cnn.json --epochs "$EPOCHS" $logdir > "$T/$1.log" 2>&1 ||
        { tail -20 "$T/$1.log" >&2; echo "bench watch: the job ($1) failed" >&2; exit 1; }
    if [ "$1" = on ]; then
        ls "$T"/data/logs/events.out.tfevents.* > /dev/null || { echo "bench watch: no events written" >&2; exit 1; }
    fi
    sed -n 's/^\[worker:\([01]\)\] Epoch \([0-9]*\)\/[0-9]* - [0-9]*\/[0-9]* - .* - \([0-9]*\) samples\/s$/\2 \3/p' "$T/$1.log" |
        awk '{ s[$1] += $2 } END { for (e in s) { t += s[e]; n++ } printf "%.0f\n", n ? t / n : 0 }'
}

best_on=0 best_off=0 all_on="" all_off=""
i=0
while [ $i -lt "$RUNS" ]; do
    for side in on off; do
        r=$(one $side)
        eval "all_$side=\"\$all_$side $r\""
        eval "b=\$best_$side"
        [ "$r" -gt "$b" ] && eval "best_$side=$r"
    done
    i=$((i + 1))
done
echo "watch: reference job, $EPOCHS epoch(s), 2 async workers: reports on:$all_on samples/s; off:$all_off samples/s"
awk -v a="$best_on" -v b="$best_off" 'BEGIN { printf "watch: best on %d, best off %d samples/s: overhead %.1f %%\n", a, b, 100 * (b - a) / b }'
