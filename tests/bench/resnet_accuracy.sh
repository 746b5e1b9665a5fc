#!/bin/sh
# resnet_accuracy.sh — the small ResNet with batch norm on Fashion-MNIST,
# hetps beside PyTorch, both printed by this one command (not part of
# `make bench`: about 15 minutes on a 2-core VM):
#   hetps   deploy/models/fashion_resnet_bn.json, 2 parameter servers and 2
#           sync workers × 32 (global batch 64), EPOCHS epochs; the chief's
#           val_accuracy of the final weights (the shards' moving
#           statistics);
#   torch   tests/bench/torch_resnet.py, the same model, initialisation
#           family, batch norm (each half of a batch of 64 normalised by its
#           own moments, as the two workers do) and Adam, on THREADS threads.
# Processes run on loopback ports of their own and are stopped by pid.
set -eu
cd "$(dirname "$0")/../.."
BIN=${HETPS_BIN:-bin}
EPOCHS=${BENCH_EPOCHS:-3}
THREADS=${BENCH_TORCH_THREADS:-1}
MODEL=deploy/models/fashion_resnet_bn.json
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-bench-XXXXXX")
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null || true; done; rm -rf "$T"' EXIT INT TERM
PORT=$(( 21000 + ( $(od -An -N2 -tu2 /dev/urandom) % 100 ) * 100 ))

printf '{ "cluster": { "ps": ["127.0.0.1:%s", "127.0.0.1:%s"], "worker": ["127.0.0.1:%s", "127.0.0.1:%s"] },\n  "hetps": { "mode": "sync", "insecure": true } }\n' \
    $PORT $((PORT + 1)) $((PORT + 2)) $((PORT + 3)) > "$T/cluster.json"
for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/ps-$i" > "$T/ps$i.log" 2>&1 &
    PIDS="$PIDS $!"
done
for i in 0 1; do
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:$i \
        --model $MODEL --batch-size 32 --epochs "$EPOCHS" > "$T/w$i.log" 2>&1 &
    eval "w$i=\$!"
done
wait $w0 || { tail -20 "$T/w0.log"; echo "hetps: worker 0 failed"; exit 1; }
wait $w1 || { tail -20 "$T/w1.log"; echo "hetps: worker 1 failed"; exit 1; }
hetps=$(sed -n 's/.*Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/w0.log" | tail -1)
[ -n "$hetps" ] || { tail -5 "$T/w0.log"; echo "hetps: no final val_accuracy"; exit 1; }
"$BIN/hetps" shutdown "$T/cluster.json" > /dev/null 2>&1 || true
/usr/bin/python3 tests/bench/torch_resnet.py --epochs "$EPOCHS" --replicas 2 \
    --threads "$THREADS" > "$T/torch.txt" 2>&1 || { cat "$T/torch.txt"; exit 1; }
torch=$(sed -n 's/.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/torch.txt" | tail -1)
grep "val_accuracy" "$T/w0.log" | sed 's/^/hetps /'
sed 's/^/torch /' "$T/torch.txt"
echo "resnet (batch norm), $EPOCHS epochs: hetps val_accuracy $hetps (2 ps + 2 sync workers x 32), torch $torch"
