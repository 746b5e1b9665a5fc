#!/bin/sh
# balance.sh — heterogeneity-aware balancing in sync mode (part of
# `make bench`). Two workers, worker 1 slowed SLOW× (BENCH_SLOWDOWN, 3:
# --slowdown 3, standing in for a CPU server beside GPUs), global batch GB
# (64), STEPS steps each run:
#   solo fast, solo slow   each worker alone (1-worker cluster, batch GB)
#   ideal                  the sum of the two solo speeds
#   balance off            equal GB/2 slices: every step waits for the slow one
#   balance on             slices sized to the measured speeds; a worker
#                          whose slice does not pay for its round trip
#                          gets none (ps/mode.c)
#   backup 1               balance on, and a step needs only one gradient
# BENCH_RUNS picks runs (default "fast slow off on backup"; a slow worker
# alone at --slowdown 20 takes minutes). The last line compares "balance
# on" with the fast worker alone.
# The figure of each run is the chief's "sync: … samples/s over all
# workers" (global samples per second of wall time between its first and
# last step). The five runs are repeated ROUNDS times (BENCH_ROUNDS, 3),
# interleaved, and each keeps its best: on a shared 2-core VM noise only
# ever slows a run down. Processes run on loopback ports of their own and
# are stopped by pid.
set -eu
cd "$(dirname "$0")/../.."
BIN=${HETPS_BIN:-bin}
STEPS=${BENCH_STEPS_SYNC:-200}
GB=${BENCH_GLOBAL_BATCH:-64}   # global batch; each of the 2 workers: GB/2
ROUNDS=${BENCH_ROUNDS:-3}
SLOW=${BENCH_SLOWDOWN:-3}
RUNS=${BENCH_RUNS:-fast slow off on backup}
MODEL=deploy/models/fashion_cnn.json
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-bench-XXXXXX")
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null || true; done; rm -rf "$T"' EXIT INT TERM
PORT=$(( 21000 + ( $(od -An -N2 -tu2 /dev/urandom) % 100 ) * 100 ))

# run NAME N_WORKERS HETPS_BLOCK PS_ARGS W0_ARGS W1_ARGS → $RATE
run() {
    name=$1 nw=$2 block=$3 psargs=$4 w0=$5 w1=$6
    p0=$PORT p1=$((PORT + 1)) q0=$((PORT + 2)) q1=$((PORT + 3))
    rm -rf "$T/$name-0" "$T/$name-1"   # each round trains from step 0
    PORT=$((PORT + 4))
    if [ "$nw" = 1 ]; then workers="\"127.0.0.1:$q0\""; else workers="\"127.0.0.1:$q0\", \"127.0.0.1:$q1\""; fi
    printf '{ "cluster": { "ps": ["127.0.0.1:%s", "127.0.0.1:%s"], "worker": [%s] }, "hetps": %s }\n' \
        $p0 $p1 "$workers" "$block" > "$T/$name.json"
    # Mutual TLS, as hetps runs by default: the run's own certificates
    # (not a `make run` data directory's, which a fresh checkout lacks).
    "$BIN/hetps" certs "$T/$name.json" "$T/certs-$name" > /dev/null
    export HETPS_CERTS="$T/certs-$name"
    PIDS=""
    for i in 0 1; do
        # shellcheck disable=SC2086
        "$BIN/hetps-ps" --cluster "$T/$name.json" --task ps:$i --data-dir "$T/$name-$i" $psargs \
            > "$T/$name-ps$i.log" 2>&1 &
        PIDS="$PIDS $!"
    done
    if [ "$nw" = 2 ]; then
        # shellcheck disable=SC2086
        "$BIN/hetps-worker" --cluster "$T/$name.json" --task worker:1 --model $MODEL \
            --no-eval --max-steps "$STEPS" $w1 > "$T/$name-w1.log" 2>&1 &
        PIDS="$PIDS $!"
    fi
    echo "\$ hetps-worker --task worker:0 $w0 (cluster: $block; ps: $psargs; worker:1: $w1)"
    # shellcheck disable=SC2086
    "$BIN/hetps-worker" --cluster "$T/$name.json" --task worker:0 --model $MODEL \
        --no-eval --max-steps "$STEPS" $w0 > "$T/$name-w0.log" 2>&1 || { cat "$T/$name-w0.log"; exit 1; }
    RATE=$(sed -n 's/.*sync: .*: \([0-9]*\) samples\/s over all workers.*/\1/p' "$T/$name-w0.log")
    SETTLED=$(sed -n 's/.*samples\/s over all workers (\([0-9]*\) after the first.*/\1/p' "$T/$name-w0.log")
    sed -n 's/.*INFO \(sync: .*\)/  \1/p' "$T/$name-w0.log"
    for p in $PIDS; do kill $p 2>/dev/null || true; done
    for p in $PIDS; do wait $p 2>/dev/null || true; done
    PIDS=""
}

H=$((GB / 2))
best() { [ "${RATE:-0}" -gt "$1" ] && echo "$RATE" || echo "$1"; }
best_settled() { [ "${SETTLED:-0}" -gt "$1" ] && echo "$SETTLED" || echo "$1"; }
fast=0 slow=0 off=0 on=0 backup=0 fast_s=0 on_s=0
r=1
while [ $r -le "$ROUNDS" ]; do
    echo "-- round $r of $ROUNDS"
    for k in $RUNS; do
        case $k in
        fast) run fast 1 '{"mode": "sync"}' "" "--batch-size $GB" ""; fast=$(best $fast); fast_s=$(best_settled $fast_s) ;;
        slow) run slow 1 '{"mode": "sync"}' "" "--batch-size $GB --slowdown $SLOW" ""; slow=$(best $slow) ;;
        off) run off 2 '{"mode": "sync"}' "--balance off" "--batch-size $H" "--batch-size $H --slowdown $SLOW"; off=$(best $off) ;;
        on) run on 2 '{"mode": "sync"}' "--balance on" "--batch-size $H" "--batch-size $H --slowdown $SLOW"; on=$(best $on); on_s=$(best_settled $on_s) ;;
        backup) run backup 2 '{"mode": "sync", "backup_workers": 1}' "--balance on" "--batch-size $H" "--batch-size $H --slowdown $SLOW"; backup=$(best $backup) ;;
        *) echo "balance.sh: unknown run '$k' in BENCH_RUNS" >&2; exit 2 ;;
        esac
    done
    r=$((r + 1))
done
ideal=$((fast + slow))

pct() { awk -v a="$1" -v b="$ideal" 'BEGIN { if (b > 0) printf "%.0f %%", 100 * a / b; else printf "-" }'; }
echo
echo "sync, 2 workers, worker:1 slowed ${SLOW}x, global batch $GB, $STEPS steps, best of $ROUNDS (samples/s):"
printf '  %-22s %8s\n' "solo fast" "$fast" "solo slow (${SLOW}x)" "$slow"
printf '  %-22s %8s  %s\n' "ideal (sum)" "$ideal" "100 %" \
    "balance off" "$off" "$(pct "$off")" \
    "balance on" "$on" "$(pct "$on")" \
    "backup_workers 1" "$backup" "$(pct "$backup")"
awk -v a="$on" -v f="$fast" -v a2="$on_s" -v f2="$fast_s" 'BEGIN { if (f > 0) printf "  balance on / solo fast: %.3f (after the first 20 steps: %.3f)\n", a / f, (f2 > 0 ? a2 / f2 : 0) }'
