#!/bin/sh
# ctr.sh — issue #40's accuracy figure in one command: a click-through
# file from tests/tools/ctrgen (ROWS training rows, ROWS / 10 test rows,
# vocabularies up to VOCAB, Zipf ids, seed 1), the same model trained one
# epoch by hetps and by tests/bench/torch_ctr.py — embeddings of 16 over
# the 26 categorical ids (one table, input_dim DIM, RandomUniform ±0.05),
# flattened and concatenated with the 13 numeric fields, Dense 256 relu,
# 128 relu, 1 sigmoid; binary cross-entropy; Keras's Adagrad at LR
# (accumulator 0.1, epsilon 1e-7); batch 512, file order, one thread each.
# hetps runs 1 shard and 1 async worker (one worker: the same sequence of
# steps as PyTorch's, the table's rows updated lazily by row as
# nn.Embedding(sparse=True) with Adagrad does). Prints each side's test
# AUC and log loss and one line:
#   "ctr: ROWS rows, 1 epoch: hetps AUC A, PyTorch AUC P (|A − P| D),
#    Bayes AUC B (B − A G)"
# Environment: ROWS (2000000, the issue's), VOCAB (1000000), DIM (2^23),
# LR (0.1), PYTHON (/usr/bin/python3, Debian's python3-torch), HETPS_BIN
# (bin), CTRGEN (build/rel/tools/ctrgen), WORKER_FLAGS (more flags for
# hetps's worker, such as --overlap).
set -eu
cd "$(dirname "$0")/../.."
ROWS=${ROWS:-2000000}
VOCAB=${VOCAB:-1000000}
. tests/bench/ctr.inc
bayes=$(cat "$T/test.tsv.bayes_auc")

cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] },
  "hetps": { "mode": "async" } }
JSON
# file order, as the PyTorch peer reads it (hetps shuffles by default)
ctr_model ', "metrics": ["AUC"], "shuffle": false'
# shellcheck disable=SC2086
"$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model "$T/ctr.json" --data "criteo:$T/train.tsv" \
    --validation-data "criteo:$T/test.tsv" ${WORKER_FLAGS:-} > "$T/hetps.log" 2>&1 ||
    { tail -20 "$T/hetps.log"; echo "ctr bench: the hetps job failed" >&2; exit 1; }
grep -E '\[worker:0\] (Epoch|Final)|samples/s, per step' "$T/hetps.log"
auc=$(sed -n 's/.*Final weights.*val_auc: \([0-9.]*\).*/\1/p' "$T/hetps.log")
[ -n "$auc" ] || { tail -5 "$T/hetps.log"; echo "ctr bench: no final val_auc" >&2; exit 1; }

"$PY" tests/bench/torch_ctr.py --input-dim "$DIM" --batch 512 --lr "$LR" \
    --threads 1 --seed 42 "$T/train.tsv" "$T/test.tsv" | tee "$T/torch.log"
tauc=$(sed -n 's/^torch_ctr: test AUC \([0-9.]*\),.*/\1/p' "$T/torch.log")
[ -n "$tauc" ] || { echo "ctr bench: no PyTorch AUC" >&2; exit 1; }
awk -v a="$auc" -v p="$tauc" -v b="$bayes" -v n="$ROWS" 'BEGIN {
    d = a - p; if (d < 0) d = -d
    printf "ctr: %d rows, 1 epoch: hetps AUC %.4f, PyTorch AUC %.4f (|A - P| %.4f), Bayes AUC %.4f (B - A %.4f)\n", n, a, p, d, b, b - a }'
