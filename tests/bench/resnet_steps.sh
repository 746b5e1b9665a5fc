#!/bin/sh
# resnet_steps.sh — the small ResNet's first STEPS steps in hetps and in
# PyTorch from the same initial weights on the same batches: the two sides
# of resnet_accuracy.sh compared as computations, not as accuracies.
#   1. torch_resnet.py writes its initial weights for SEED (Keras's layout,
#      .npy);
#   2. hetps trains deploy/models/fashion_resnet_bn.json (its seed set to
#      SEED, which fixes the batches' order) from them, 2 ps + 2 sync
#      workers × 32, STEPS steps, and exports the weights;
#   3. torch_resnet.py trains the same STEPS steps from the same weights in
#      hetps's order (--order hetps), in float32 and in float64;
#   4. for each pair of (hetps, PyTorch float32, PyTorch float64) the
#      largest difference of a variable, relative to the largest change the
#      training made to it, and the verdict: hetps is as near float64 as
#      PyTorch's float32 is (within 3 times its distance, or 1e-4) — a
#      batch-norm net under Adam turns float32 rounding into differences of
#      a few percent within tens of steps, so float32 against float32 alone
#      cannot tell rounding from a mistake;
#   5. hetps eval and PyTorch's eval mode on hetps's weights: the same
#      loss (with the L2 penalty) and accuracy.
#   sh tests/bench/resnet_steps.sh      (STEPS 20, SEED 42; a minute alone)
set -eu
cd "$(dirname "$0")/../.."
BIN=${HETPS_BIN:-bin}
STEPS=${STEPS:-20}
SEED=${SEED:-42}
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-steps-XXXXXX")
PIDS=""
. tests/bench/resnet_job.inc
trap 'for p in $PIDS; do kill $p 2>/dev/null || true; done; rm -rf "$T"' EXIT INT TERM

OPT=${OPT:-adam}
# OPT=sgd: plain SGD at the model's schedule from 1.0 instead of Adam, so
# that the weights' change is the gradient itself (Adam's first step is
# its sign), large enough beside the weights for float32 to show it.
LR=1e-3
[ "$OPT" = sgd ] && LR=1.0
# DECAY=N: CosineDecay over N steps instead of the model's, so that a few
# steps show whether both sides take step t's rate at the same t.
DECAY=${DECAY:-0}
/usr/bin/python3 - "$SEED" "$OPT" "$DECAY" deploy/models/fashion_resnet_bn.json "$T/model.json" <<'PY'
import json, sys
seed, opt, decay, src, dst = sys.argv[1:]
m = json.load(open(src))
m["seed"] = int(seed)
if int(decay):
    m["optimizer"]["learning_rate"]["config"]["decay_steps"] = int(decay)
if opt == "sgd":
    lr = m["optimizer"]["learning_rate"]
    lr["config"]["initial_learning_rate"] = 1.0
    m["optimizer"] = {"type": "sgd", "learning_rate": lr}
json.dump(m, open(dst, "w"))
PY
/usr/bin/python3 tests/bench/torch_resnet.py --seeds "$SEED" --threads 1 \
    --init-out "$T/init"
resnet_job "$T" "$T/model.json" --max-steps "$STEPS" --no-eval \
    --initial-weights "$T/init"
"$BIN/hetps" export --data-dir "$T/data" --out "$T/hetps" "$T/cluster.json" \
    > "$T/export.log" 2>&1 || { cat "$T/export.log"; exit 1; }
run_torch() {
    /usr/bin/python3 tests/bench/torch_resnet.py --seeds "$SEED" --threads 1 \
        --init-from "$T/init" --order hetps --optimizer "$OPT" --lr "$LR" \
        --steps "$STEPS" --decay-steps "$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["optimizer"]["learning_rate"]["config"]["decay_steps"])' "$T/model.json")" "$@"
}
run_torch --weights-out "$T/torch32" > "$T/torch32.txt"
run_torch --double --weights-out "$T/torch64" > "$T/torch64.txt"
grep 'step ' "$T/torch32.txt" | tail -3
rc=0
/usr/bin/python3 - "$T" <<'PY' || rc=1
import os, sys
import numpy as np
t = sys.argv[1]
names = sorted(os.path.join(d, f)[len(t) + 6:-4]
               for d, _, fs in os.walk(os.path.join(t, "init")) for f in fs)

def diff(a, b):
    """Largest |a - b| over the variable's largest change from init in b,
    the worst variable and its figure."""
    worst = (0.0, "")
    for n in names:
        x = np.load(os.path.join(t, a, n + ".npy")).astype(np.float64)
        y = np.load(os.path.join(t, b, n + ".npy")).astype(np.float64)
        y0 = np.load(os.path.join(t, "init", n + ".npy")).astype(np.float64)
        r = np.abs(x - y).max() / max(np.abs(y - y0).max(), 1e-30)
        worst = max(worst, (r, n))
    return worst
r = {}
for a, b in (("hetps", "torch64"), ("torch32", "torch64"), ("hetps", "torch32")):
    r[a, b], n = diff(a, b)
    print("%-8s against %-8s largest |difference| / largest change: %.3g (%s)"
          % (a, b, r[a, b], n))
near = r["hetps", "torch64"] <= max(3 * r["torch32", "torch64"], 1e-4)
print("hetps as near float64 as PyTorch's float32: %s" % ("yes" if near else "no"))
sys.exit(0 if near else 1)
PY
# The evaluation: hetps eval and PyTorch's eval mode (the moving
# statistics) on the test set, from the same weights (hetps's after STEPS):
# the same loss (with the L2 penalty) and accuracy.
"$BIN/hetps" eval --model "$T/model.json" --weights "$T/hetps" 2>&1 | sed 's/^/hetps eval: /'
/usr/bin/python3 - "$T/hetps" <<'PY'
import sys
sys.path.insert(0, "tests/bench")
import torch, torch.nn as nn
from torch_resnet import build, load_npy
from torch_train import load
torch.set_num_threads(1)
model = build(torch, nn, torch.Generator().manual_seed(0), 2)
load_npy(torch, model, sys.argv[1])
model.eval()
x, y = load(torch, "/usr/share/datasets/fashion-mnist", "t10k")
with torch.no_grad():
    logits = torch.cat([model(x[i:i + 1000]) for i in range(0, x.shape[0], 1000)])
# the loss with the L2 penalty, as Keras's evaluate and hetps eval report it
print("torch eval: loss %.4f - accuracy %.4f"
      % (nn.CrossEntropyLoss()(logits, y).item() + model.l2().item(),
         (logits.argmax(1) == y).float().mean().item()))
PY
exit $rc
