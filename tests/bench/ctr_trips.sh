#!/bin/sh
# ctr_trips.sh — what a click-through step's round trips cost, where they
# are most of the step: a small model (an embedding of 8 over the 26
# categorical ids of a tests/tools/ctrgen file, input_dim 10^5, Dense 16
# relu, a sigmoid unit; Keras's Adagrad 0.05; batch 64, one epoch of
# ROWS rows, vocabularies to 1,000), 1 ps + 1 async worker on plain TCP,
# whose compute is a few hundredths of a millisecond a step. In RUNS
# rounds, each running $HETPS_BIN's build and, when BASE_BIN is set
# (another build's bin/), that one after it; prints each run's samples/s
# and the worker's "ms in push-and-pull" a step, then the medians and
# BIN's against BASE_BIN's.
# Environment: ROWS (32000), RUNS (4), HETPS_BIN (bin), BASE_BIN (unset),
# CTRGEN (build/rel/tools/ctrgen).
set -eu
cd "$(dirname "$0")/../.."
ROWS=${ROWS:-32000}
RUNS=${RUNS:-4}
BIN=${HETPS_BIN:-bin}
GEN=${CTRGEN:-build/rel/tools/ctrgen}
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-ctr-trips-XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
PORT=$(( 21000 + ( $(od -An -N2 -tu2 /dev/urandom) % 60 ) * 100 ))
"$GEN" --seed 5 --train-rows "$ROWS" --test-rows 10 --vocab 1000 \
    "$T/train.tsv" "$T/test.tsv" > /dev/null
cat > "$T/cat.json" <<JSON
{"name": "ctr_cat", "seed": 7,
 "inputs": [{"name": "categorical", "shape": [26], "dtype": "int64"}],
 "layers": [{"type": "embedding", "input_dim": 100000, "output_dim": 8,
             "inputs": "categorical"},
            {"type": "flatten"},
            {"type": "dense", "units": 16, "activation": "relu"},
            {"type": "dense", "units": 1, "activation": "sigmoid"}],
 "loss": "binary_crossentropy",
 "optimizer": {"type": "adagrad", "learning_rate": 0.05},
 "batch_size": 64, "epochs": 1}
JSON
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] },
  "hetps": { "mode": "async", "insecure": true } }
JSON

# run BIN — one epoch: $RATE samples/s, $MS ms in push-and-pull a step.
run() {
    rm -rf "$T/data"
    "$1/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
        --model "$T/cat.json" --data "criteo:$T/train.tsv" --no-eval \
        > "$T/log" 2>&1 ||
        { tail -20 "$T/log"; echo "ctr trips: the job of $1 failed" >&2; exit 1; }
    RATE=$(sed -n 's/.*this worker \([0-9.]*\) samples\/s.*/\1/p' "$T/log")
    MS=$(sed -n 's/.* \([0-9.]*\) ms in push-and-pull.*/\1/p' "$T/log")
    [ -n "$RATE" ] && [ -n "$MS" ] ||
        { tail -5 "$T/log"; echo "ctr trips: no summary line from $1" >&2; exit 1; }
    echo "  $1: $RATE samples/s, $MS ms in push-and-pull a step"
}

median() {
    echo "$@" | tr ' ' '\n' | grep . | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
rates="" ms="" brates="" bms=""
r=1
while [ "$r" -le "$RUNS" ]; do
    echo "ctr trips: round $r of $RUNS"
    run "$BIN"
    rates="$rates $RATE" ms="$ms $MS"
    if [ -n "${BASE_BIN:-}" ]; then
        run "$BASE_BIN"
        brates="$brates $RATE" bms="$bms $MS"
    fi
    r=$((r + 1))
done
echo "ctr trips ($ROWS rows, batch 64, 1 ps + 1 async worker, median of $RUNS): $BIN $(median "$rates") samples/s, $(median "$ms") ms in push-and-pull a step"
if [ -n "${BASE_BIN:-}" ]; then
    echo "ctr trips: $BASE_BIN $(median "$brates") samples/s, $(median "$bms") ms in push-and-pull a step"
    awk -v a="$(median "$rates")" -v b="$(median "$brates")" -v x="$(median "$ms")" -v y="$(median "$bms")" 'BEGIN {
        printf "ctr trips: %.2fx the samples/s, %.2fx the ms in push-and-pull of the base\n", a / b, x / y }'
fi
