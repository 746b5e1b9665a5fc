#!/bin/sh
# inputs.sh — a model of two inputs trained end to end, with real
# processes on loopback: an image branch (conv, pool, dense) and a vector
# branch (dense) concatenated. The label needs both: a bright blob's
# quadrant in the 8×8 image, shifted by one when the vector's first value
# is set, so a model reading one input alone is right about half the time.
#   1. refusals before any connection, each naming the input and the file:
#      an input with no array, one array as for a model of one input, a
#      name that is not an input, a vector array
#      of the wrong width, arrays of different lengths, no labels;
#   2. two async workers (each a strided shard of whole rows, so an
#      image keeps its vector) train 6 epochs with --data
#      image=…,vector=…,y.npy: the test accuracy passes 90 %;
#   3. `hetps export` (.npy and .keras, whose config has both input
#      layers) then `hetps predict --images image=…,vector=…` gives
#      outputs whose accuracy on the test set is the final one, and
#      `hetps eval --data image=…,vector=…,yt.npy` that accuracy.
. "$(dirname "$0")/lib.inc"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "skipped: no python3-numpy"; exit 77; }
pick_ports
PY=/usr/bin/python3
M=$T/two.json
cat > "$M" <<'JSON'
{"name": "two_branches", "seed": 7,
 "inputs": [{"name": "image", "shape": [8, 8, 1]},
            {"name": "vector", "shape": [4]}],
 "layers": [
  {"type": "conv2d", "name": "conv", "filters": 8, "kernel_size": 3,
   "padding": "same", "activation": "relu", "inputs": "image"},
  {"type": "maxpool2d", "name": "pool", "pool_size": 2},
  {"type": "flatten", "name": "flat"},
  {"type": "dense", "name": "img", "units": 16, "activation": "relu"},
  {"type": "dense", "name": "vec", "units": 8, "activation": "relu",
   "inputs": "vector"},
  {"type": "concatenate", "name": "cat", "inputs": ["img", "vec"]},
  {"type": "dense", "name": "hidden", "units": 32, "activation": "relu"},
  {"type": "dense", "name": "out", "units": 4, "activation": "softmax"}],
 "loss": "sparse_categorical_crossentropy",
 "optimizer": {"type": "adam", "learning_rate": 0.003},
 "batch_size": 32, "epochs": 6, "metrics": ["accuracy"]}
JSON
$PY - "$T" <<'PY' || fail "numpy could not write the arrays"
import sys, numpy as np
t = sys.argv[1]
rng = np.random.default_rng(5)
def make(n):
    q = rng.integers(0, 4, n)
    flip = rng.integers(0, 2, n)
    img = rng.uniform(0, 0.3, (n, 8, 8, 1)).astype(np.float32)
    for i in range(n):
        r, c = (q[i] // 2) * 4 + rng.integers(0, 2), (q[i] % 2) * 4 + rng.integers(0, 2)
        img[i, r:r + 3, c:c + 3, 0] += 0.7
    vec = rng.normal(0, 0.3, (n, 4)).astype(np.float32)
    vec[:, 0] = flip + rng.normal(0, 0.1, n)
    return img, vec, ((q + flip) % 4).astype(np.int64)
for name, n in (("", 2000), ("t", 500)):
    img, vec, y = make(n)
    np.save(f"{t}/img{name}.npy", img)
    np.save(f"{t}/vec{name}.npy", vec)
    np.save(f"{t}/y{name}.npy", y)
np.save(f"{t}/vec5.npy", rng.normal(0, 1, (2000, 5)).astype(np.float32))
np.save(f"{t}/vecshort.npy", rng.normal(0, 1, (1999, 4)).astype(np.float32))
PY
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"],
               "worker": ["127.0.0.1:$((PORT + 1))", "127.0.0.1:$((PORT + 2))"] },
  "hetps": { "mode": "async" } }
JSON

# 1. Refusals, read by message.
refused() {
    want=$1; shift
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 \
        --model "$M" "$@" > "$T/refused.txt" 2>&1 &&
        fail "trained with $*"
    grep -qF -- "$want" "$T/refused.txt" ||
        { cat "$T/refused.txt"; fail "no '$want' for $*"; }
}
refused "--data image=$T/img.npy,$T/y.npy: no array for input vector; the model's inputs are image, vector: give image=X_image.npy,vector=X_vector.npy,Y.npy" \
    --data "image=$T/img.npy,$T/y.npy"
refused "\"$T/img.npy\" names no input; the model's inputs are image, vector: give image=X_image.npy,vector=X_vector.npy,Y.npy" \
    --data "$T/img.npy,$T/y.npy"
refused "--data: \"meta\" is not an input of the model; its inputs are image, vector" \
    --data "image=$T/img.npy,meta=$T/vec.npy,$T/y.npy"
refused "input vector: $T/vec5.npy holds samples of shape (1, 5, 1), but model two_branches ($M) takes input vector of shape (4,)" \
    --data "image=$T/img.npy,vector=$T/vec5.npy,$T/y.npy" --no-eval
refused "--data: input vector ($T/vecshort.npy) has 1999 samples but input image ($T/img.npy) has 2000" \
    --data "image=$T/img.npy,vector=$T/vecshort.npy,$T/y.npy"
refused "no labels file; give it last, without a name" \
    --data "vector=$T/vec.npy,image=$T/img.npy"
refused "the model has 2 inputs (image, vector): give --data image=X_image.npy,vector=X_vector.npy,Y.npy" \
    --no-eval
ok "missing, unknown, misshaped and short inputs and missing labels refused by name"

# 2. Two async workers, 6 epochs.
DATA_ARGS="--data image=$T/img.npy,vector=$T/vec.npy,$T/y.npy --validation-data vector=$T/vect.npy,image=$T/imgt.npy,$T/yt.npy"
# shellcheck disable=SC2086
"$BIN/hetps" launch --data-dir "$T/run" "$T/cluster.json" -- \
    --model "$M" $DATA_ARGS > "$T/launch.log" 2>&1 ||
    { tail -30 "$T/launch.log"; fail "hetps launch failed"; }
grep 'Epoch' "$T/launch.log" | tail -4
acc=$(sed -n 's/.*\[worker:0\] Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/launch.log")
[ -n "$acc" ] || fail "no final accuracy"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.9) }' ||
    fail "two inputs, 6 epochs on 2 workers: test accuracy $acc (one input alone gives about 0.5)"
ok "two inputs, two async workers, 6 epochs: test accuracy $acc"

# 3. Export and predict.
"$BIN/hetps" export --data-dir "$T/run" --out "$T/npy" "$T/cluster.json" > /dev/null ||
    fail "export .npy"
"$BIN/hetps" export --format keras --model "$M" --data-dir "$T/run" \
    --out "$T/two.keras" "$T/cluster.json" > /dev/null || fail "export .keras"
"$BIN/hetps" predict --model "$M" --weights "$T/npy" \
    --images "vector=$T/vect.npy,image=$T/imgt.npy" --out "$T/p.npy" > "$T/pred.txt" 2>&1 ||
    { cat "$T/pred.txt"; fail "predict with two inputs"; }
"$BIN/hetps" predict --model "$T/two.keras" --weights "$T/two.keras" \
    --images "image=$T/imgt.npy,vector=$T/vect.npy" --out "$T/pk.npy" > "$T/predk.txt" 2>&1 ||
    { cat "$T/predk.txt"; fail "predict with the .keras"; }
$PY - "$T" "$acc" <<'PY' || fail "predict's outputs are not the trained model's"
import json, sys, zipfile, numpy as np
t, acc = sys.argv[1], float(sys.argv[2])
p, pk, y = np.load(f"{t}/p.npy"), np.load(f"{t}/pk.npy"), np.load(f"{t}/yt.npy")
assert p.shape == (500, 4), p.shape
assert np.array_equal(p, pk), "the .keras predicts otherwise than the .npy"
got = float((p.argmax(1) == y).mean())
assert abs(got - acc) < 0.0025, (got, acc)
cfg = json.loads(zipfile.ZipFile(f"{t}/two.keras").read("config.json"))
ins = [l[0] for l in cfg["config"]["input_layers"]]
assert ins == ["image", "vector"], ins
print(f"predict: accuracy {got:.4f}; .keras inputs {ins}")
PY
ok "export (.npy, .keras with inputs image and vector) and predict --images image=…,vector=…: accuracy $acc"
"$BIN/hetps" eval --model "$M" --weights "$T/npy" \
    --data "image=$T/imgt.npy,vector=$T/vect.npy,$T/yt.npy" > "$T/eval.txt" 2>&1 ||
    { cat "$T/eval.txt"; fail "eval with two inputs"; }
cat "$T/eval.txt"
eacc=$(sed -n 's/.* - accuracy \([0-9.]*\).*/\1/p' "$T/eval.txt")
[ "$eacc" = "$acc" ] || fail "eval --data gives '$eacc', the chief said $acc"
ok "hetps eval --data image=…,vector=…,yt.npy: accuracy $eacc, the chief's"
