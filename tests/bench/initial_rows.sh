#!/bin/sh
# initial_rows.sh — what --initial-weights of a large table costs: a model
# of one embedding (input_dim 10^7, output_dim 16, Adagrad) started from a
# .npy directory of N stored rows (random ids, ascending) on 2 shards and 1
# worker (one step after). Twice, at N/10 and N rows, and prints for each
# the loading's time (from the first shard's create to the last shard's
# "initial rows are in", their logs' clocks) and the chief's peak RSS
# (/usr/bin/time): the chief reads the files in chunks, so its memory must
# not grow with N.
#
#     sh tests/bench/initial_rows.sh [N]          (2000000)
#
# Prints "N rows: S s (R rows/s), chief peak RSS M MiB" for each, then
# "chief's peak RSS at N against N/10: X.XXx". The integration tests'
# lib.inc gives the ports, the directory and the certificates, and stops
# the processes by pid.
cd "$(dirname "$0")/../.."
. tests/integration/lib.inc
set -e
pick_ports
N=${1:-2000000}
printf '{ "cluster": { "ps": ["127.0.0.1:%d", "127.0.0.1:%d"], "worker": ["127.0.0.1:%d"] } }\n' \
    "$PORT" $((PORT + 1)) $((PORT + 2)) > "$T/cluster.json"
cat > "$T/model.json" <<'JSON'
{"name": "initial_rows", "seed": 7,
 "inputs": [{"name": "categorical", "shape": [26], "dtype": "int64"}],
 "layers": [{"type": "embedding", "name": "embedding", "input_dim": 10000000,
             "output_dim": 16, "inputs": "categorical"},
            {"type": "flatten"},
            {"type": "dense", "name": "out", "units": 1, "activation": "sigmoid"}],
 "loss": "binary_crossentropy",
 "optimizer": {"type": "adagrad", "learning_rate": 0.05},
 "batch_size": 128, "epochs": 1}
JSON
"$B/tools/ctrgen" --seed 2 --train-rows 2000 --test-rows 200 --vocab 1000 \
    "$T/train.tsv" "$T/test.tsv" > /dev/null

# load K: a fresh job from K stored rows; prints its line, sets $rss (KiB).
load() {
    d="$T/n$1"
    mkdir -p "$d/w/embedding" "$d/w/out"
    /usr/bin/python3 -c "
import numpy as np, sys
n, d = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(1)
ids = np.unique(rng.integers(0, 10**7, size=int(n * 1.3), dtype=np.uint64))[:n]
assert len(ids) == n
np.save(d + '/embedding/embeddings.ids.npy', ids)
np.save(d + '/embedding/embeddings.rows.npy', rng.standard_normal((n, 16), dtype=np.float32) * 0.01)
np.save(d + '/out/kernel.npy', np.zeros((416, 1), np.float32))
np.save(d + '/out/bias.npy', np.zeros((1,), np.float32))
" "$1" "$d/w"
    shards=""
    for j in 0 1; do
        "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$j --data-dir "$d/ps-$j" \
            > "$d/ps-$j.log" 2>&1 &
        track $! && shards="$shards $!"
    done
    sleep 1
    /usr/bin/time -v "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 \
        --model "$T/model.json" --data "criteo:$T/train.tsv" --no-eval --max-steps 1 \
        --initial-weights "$d/w" > "$d/w0.log" 2> "$d/w0.time" ||
        { tail "$d/w0.log"; exit 1; }
    for p in $shards; do kill -TERM "$p"; done
    for p in $shards; do wait "$p" || :; done
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): \([0-9]*\)/\1/p' "$d/w0.time")
    cat "$d"/ps-*.log | awk -v n="$1" -v rss="$rss" '
        function s(t) { split(substr(t, 12, 12), a, ":"); return a[1] * 3600 + a[2] * 60 + a[3] }
        /variables created/ { t = s($1); if (!t0 || t < t0) t0 = t }
        /initial rows are in/ { t = s($1); if (t > t1) t1 = t }
        END { printf "%d rows: %.2f s (%.0f rows/s), chief peak RSS %.1f MiB\n",
                     n, t1 - t0, n / (t1 - t0), rss / 1024 }'
    rm -rf "$d"
}
load $((N / 10))
small=$rss
load "$N"
echo "chief's peak RSS at $N against $((N / 10)): $(awk -v a="$rss" -v b="$small" 'BEGIN { printf "%.2fx", a / b }')"
