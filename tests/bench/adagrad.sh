#!/bin/sh
# adagrad.sh — Adagrad and Ftrl on the reference job against PyTorch's
# Adagrad: the Fashion-MNIST CNN (deploy/models/fashion_cnn.json, its seed
# 42) trained EPOCHS epochs by hetps — `hetps launch` of 2 shards and one
# worker in sync, batch 64, --optimizer replacing the model's Adam — with
# Keras's Adagrad (initial_accumulator_value 0.1, epsilon 1e-7) at LR and
# with Ftrl (learning_rate_power −0.5, no regularization) at FTRL_LR,
# initial_accumulator_value FTRL_ACCUM; then by tests/bench/torch_train.py
# with torch.optim.Adagrad at LR, initial_accumulator_value 0.1 (Keras's;
# PyTorch's default is 0) and eps 1e-7, seed 42. Prints each run's epoch
# lines' accuracies, one line "adagrad: EPOCHS epochs: hetps Adagrad A (lr
# LR), hetps Ftrl F (lr FTRL_LR, initial_accumulator_value FTRL_ACCUM),
# PyTorch Adagrad P (lr LR) (test accuracy)" and the verdict "Adagrad >=
# PyTorch Adagrad: yes|no, Ftrl >= PyTorch Adagrad: yes|no". One BLAS
# thread each; exit 0 either way (a measurement), 1 if a run fails.
#
# Ftrl's accumulator starts at 1e-8, not Keras's 0.1: Keras's Ftrl starts
# its linear slot at 0, so its first step keeps only the fraction
# 1 − sqrt(A/(A + g²)) of each initial weight, and with A = 0.1 and a
# CNN's gradients (g² far below 0.1) it throws the Glorot initialisation
# away; with A small against g² it keeps it and is Adagrad from then on
# (ps/README.md, Ftrl; tests/bench/README.md for the figures).
#
# Environment: EPOCHS (10), LR (0.05), FTRL_LR (LR), FTRL_ACCUM (1e-8),
# PYTHON (/usr/bin/python3, the interpreter of Debian's python3-torch),
# HETPS_BIN (bin).
set -eu
cd "$(dirname "$0")/../.."
EPOCHS=${EPOCHS:-10}
LR=${LR:-0.05}
FTRL_LR=${FTRL_LR:-$LR}
FTRL_ACCUM=${FTRL_ACCUM:-1e-8}
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
hetps Ftrl "{\"type\": \"ftrl\", \"learning_rate\": $FTRL_LR, \"initial_accumulator_value\": $FTRL_ACCUM}"
ftrl=$ACC
"$PY" -c 'import torch' 2>/dev/null || { echo "adagrad bench: no PyTorch for $PY (Debian: python3-torch)" >&2; exit 1; }
"$PY" tests/bench/torch_train.py --seeds 42 --epochs "$EPOCHS" --threads 1 \
    --optimizer adagrad --lr "$LR" | tee "$T/torch.log"
torch=$(sed -n 's/^torch seed 42: val_accuracy \([0-9.]*\).*/\1/p' "$T/torch.log")
[ -n "$torch" ] || { echo "adagrad bench: torch_train.py printed no accuracy" >&2; exit 1; }
echo "adagrad: $EPOCHS epochs: hetps Adagrad $adagrad (lr $LR), hetps Ftrl $ftrl (lr $FTRL_LR, initial_accumulator_value $FTRL_ACCUM), PyTorch Adagrad $torch (lr $LR) (test accuracy)"
# at_least A B: "yes" if A >= B (decimal accuracies), else "no".
at_least() {
    awk -v a="$1" -v b="$2" 'BEGIN { print (a + 0 >= b + 0) ? "yes" : "no" }'
}
echo "Adagrad >= PyTorch Adagrad: $(at_least "$adagrad" "$torch"), Ftrl >= PyTorch Adagrad: $(at_least "$ftrl" "$torch")"
