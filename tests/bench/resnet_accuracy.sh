#!/bin/sh
# resnet_accuracy.sh — the small ResNet with batch norm on Fashion-MNIST,
# hetps beside PyTorch for each seed of SEEDS, both printed by this one
# command (not part of `make bench`: about 13 minutes a seed on a quiet
# 2-core VM, the two sides one after the other):
#   hetps   deploy/models/fashion_resnet_bn.json with its seed set to the
#           seed, 2 parameter servers and 2 sync workers × 32 (global batch
#           64), EPOCHS epochs; the chief's val_accuracy of the final
#           weights (the shards' moving statistics);
#   torch   tests/bench/torch_resnet.py, the same model, initialisation
#           family, batch norm (each half of a batch of 64 normalised by its
#           own moments, as the two workers do), Keras's Adam and the
#           model's CosineDecay, the same seed's batches in hetps's order
#           (--order hetps), on THREADS threads.
# Then the mean of each side over the seeds, their difference, and whether
# it is within 0.5 points. The model's decay_steps must be EPOCHS × the
# steps of an epoch (938 at batch 64), or the schedules would not end
# together: the script refuses otherwise.
#   SEEDS="42 43 44" sh tests/bench/resnet_accuracy.sh
# LOG_DIR keeps every run's log (default: a temporary folder, removed).
# Processes run on loopback ports of their own and are stopped by pid.
set -eu
cd "$(dirname "$0")/../.."
BIN=${HETPS_BIN:-bin}
EPOCHS=${BENCH_EPOCHS:-3}
THREADS=${BENCH_TORCH_THREADS:-1}
SEEDS=${SEEDS:-42 43 44}
MODEL=deploy/models/fashion_resnet_bn.json
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-bench-XXXXXX")
LOGS=${LOG_DIR:-$T}
mkdir -p "$LOGS"
PIDS=""
. tests/bench/resnet_job.inc
trap 'for p in $PIDS; do kill $p 2>/dev/null || true; done; rm -rf "$T"' EXIT INT TERM

decay=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["optimizer"]["learning_rate"]["config"]["decay_steps"])' $MODEL)
want=$((EPOCHS * 938))
[ "$decay" = "$want" ] || { echo "$MODEL: CosineDecay decay_steps $decay, but $EPOCHS epochs of 938 steps are $want"; exit 1; }

# hetps SEED: the final val_accuracy of 2 ps + 2 sync workers.
hetps() {
    mkdir -p "$LOGS/hetps-$1"
    sed "s/\"seed\": [0-9]*/\"seed\": $1/" $MODEL > "$LOGS/hetps-$1/model.json"
    resnet_job "$LOGS/hetps-$1" "$LOGS/hetps-$1/model.json" --epochs "$EPOCHS"
    rm -rf "$LOGS/hetps-$1/data"
    grep "val_accuracy" "$LOGS/hetps-$1/w0.log" | sed "s/^/hetps seed $1: /"
    a=$(sed -n 's/.*Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$LOGS/hetps-$1/w0.log" | tail -1)
    [ -n "$a" ] || { tail -5 "$LOGS/hetps-$1/w0.log"; echo "hetps: no final val_accuracy"; exit 1; }
    H="$H $a"
}

# torch SEED: the final val_accuracy of torch_resnet.py.
torch() {
    nice /usr/bin/python3 tests/bench/torch_resnet.py --seeds "$1" \
        --epochs "$EPOCHS" --replicas 2 --threads "$THREADS" --order hetps \
        --decay-steps "$decay" > "$LOGS/torch-$1.txt" 2>&1 || { cat "$LOGS/torch-$1.txt"; exit 1; }
    grep "Epoch" "$LOGS/torch-$1.txt"
    a=$(sed -n 's/.*: val_accuracy \([0-9.]*\).*/\1/p' "$LOGS/torch-$1.txt" | tail -1)
    [ -n "$a" ] || { cat "$LOGS/torch-$1.txt"; echo "torch: no final val_accuracy"; exit 1; }
    P="$P $a"
}

H=""
P=""
for s in $SEEDS; do
    hetps "$s"
    torch "$s"
    echo "seed $s: hetps val_accuracy $(echo $H | awk '{print $NF}'), torch $(echo $P | awk '{print $NF}')"
done
/usr/bin/python3 - "$EPOCHS" "$SEEDS" "$H" "$P" <<'PY'
import sys
epochs, seeds = sys.argv[1], sys.argv[2].split()
h = [100 * float(a) for a in sys.argv[3].split()]
p = [100 * float(a) for a in sys.argv[4].split()]
for s, a, b in zip(seeds, h, p):
    print("resnet (batch norm), %s epochs, seed %s: hetps %.2f %%, torch %.2f %%, "
          "difference %+.2f" % (epochs, s, a, b, a - b))
mh, mp = sum(h) / len(h), sum(p) / len(p)
print("resnet (batch norm), %s epochs, %d seeds: hetps mean %.2f %% (2 ps + 2 "
      "sync workers x 32), torch mean %.2f %%, difference %+.2f points; within "
      "0.5: %s" % (epochs, len(h), mh, mp, mh - mp,
                   "yes" if abs(mh - mp) <= 0.5 else "no"))
PY
