#!/bin/sh
# adagrad.sh — Adagrad and Ftrl on the reference job against PyTorch's
# Adagrad: the Fashion-MNIST CNN (deploy/models/fashion_cnn.json, its seed
# 42) trained EPOCHS epochs by hetps — `hetps launch` of 2 shards and one
# worker in sync, batch 64, --optimizer replacing the model's Adam — with
# Keras's Adagrad (initial_accumulator_value 0.1, epsilon 1e-7) and with
# Ftrl (learning_rate_power −0.5, initial_accumulator_value 0.1, no
# regularization), each at learning rate LR; then by
# tests/bench/torch_train.py with torch.optim.Adagrad at the same LR,
# initial_accumulator_value 0.1 (Keras's; PyTorch's default is 0) and eps
# 1e-7, seed 42. Prints each run's epoch lines' accuracies and one line:
# "adagrad: EPOCHS epochs, lr LR: hetps Adagrad A, hetps Ftrl F, PyTorch
# Adagrad P (test accuracy)". One BLAS thread each.
#
# Environment: EPOCHS (10), LR (0.05), PYTHON (/usr/bin/python3, the
# interpreter of Debian's python3-torch), HETPS_BIN (bin).
set -eu
cd "$(dirname "$0")/../.."
EPOCHS=${EPOCHS:-10}
LR=${LR:-0.05}
PY=${PYTHON:-/usr/bin/python3}
BIN=${HETPS_BIN:-bin}
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-adagrad-bench-XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
PORT=$(( 21000 + ( $(od -An -N2 -tu2 /dev/urandom) % 60 ) * 100 ))

cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))"] },
  "hetps": { "mode": "sync" } }
JSON
"$BIN/hetps" certs "$T/cluster.json" "$T/certs" > /dev/null
export HETPS_CERTS="$T/certs"

# hetps NAME OPTIMIZER_JSON: a fresh job; its final test accuracy in $ACC.
hetps() {
    rm -rf "$T/data"
    "$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
        --model deploy/models/fashion_cnn.json --epochs "$EPOCHS" \
        --optimizer "$2" > "$T/$1.log" 2>&1 ||
        { tail -20 "$T/$1.log"; echo "adagrad bench: the $1 job failed" >&2; exit 1; }
    grep '\[worker:0\] Epoch.*val_loss' "$T/$1.log" | sed "s/.*Epoch/hetps $1: Epoch/; s/ - [0-9]*\/[0-9]* - .* - val_loss/ - val_loss/"
    ACC=$(sed -n 's/.*Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/$1.log" | tail -1)
    [ -n "$ACC" ] || { tail -5 "$T/$1.log"; echo "adagrad bench: $1: no final accuracy" >&2; exit 1; }
}

hetps Adagrad "{\"type\": \"adagrad\", \"learning_rate\": $LR}"
adagrad=$ACC
hetps Ftrl "{\"type\": \"ftrl\", \"learning_rate\": $LR}"
ftrl=$ACC
"$PY" -c 'import torch' 2>/dev/null || { echo "adagrad bench: no PyTorch for $PY (Debian: python3-torch)" >&2; exit 1; }
"$PY" tests/bench/torch_train.py --seeds 42 --epochs "$EPOCHS" --threads 1 \
    --optimizer adagrad --lr "$LR" | tee "$T/torch.log"
torch=$(sed -n 's/^torch seed 42: val_accuracy \([0-9.]*\).*/\1/p' "$T/torch.log")
echo "adagrad: $EPOCHS epochs, lr $LR: hetps Adagrad $adagrad, hetps Ftrl $ftrl, PyTorch Adagrad $torch (test accuracy)"
