#!/bin/sh
# keras.sh — Keras in, Keras out, with real processes on loopback:
#   1. the unsupported fixture is refused before any socket opens, every
#      layer and argument named on its own line; a damaged zip, a .keras
#      without config.json, a truncated .weights.h5 and the weights of
#      another model are each refused naming the file;
#   2. the reference job (1 shard, 1 worker, sync, 1 epoch, batch 64)
#      trained from deploy/models/fashion_cnn.json, from the Keras 3
#      to_json() fixture and from a .keras archive (made here with h5py and
#      zipfile, as Keras writes it) ends its first epoch at the same loss
#      (training.csv, 6 decimals);
#   3. `hetps export --format keras` writes a .weights.h5 that h5py reads at
#      Keras's paths with Keras's shapes and the .npy export's values (and
#      Adam's state under optimizer/vars), and a
#      .keras archive whose config.json names the same layers;
#   4. round trip: `hetps eval` of the .keras archive gives the job's final
#      accuracy, and a new job started from it (--initial-weights) is
#      trained already after one step;
#   5. a Keras 3 model of the newer mathematics (HeNormal with L2,
#      ReLU(6.0), swish, gelu with L1L2, LeakyReLU, categorical
#      cross-entropy with label smoothing, the labels made one-hot on the
#      worker) trains: one epoch reaches 0.8 validation accuracy; compiled
#      with metrics ["accuracy", AUC], val_auc is in the epoch line and
#      training.csv;
#   6. --optimizer replaces what a file says (Keras 2's to_json has no
#      compile_config): the shards apply SGD at 0.05.
. "$(dirname "$0")/lib.inc"
need_data
/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: /usr/bin/python3 lacks h5py (python3-h5py)"; exit 77; }
pick_ports
K=deploy/models/keras
PY=/usr/bin/python3

cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] },
  "hetps": { "mode": "sync" } }
JSON

# 1. Refusals, before any socket: no server runs yet.
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 \
    --model $K/unsupported.keras3.json > "$T/bad.txt" 2>&1
rc=$?
cat "$T/bad.txt"
[ $rc -eq 2 ] || fail "the unsupported fixture: exit $rc, not 2"
for want in 'layers\[1\] Conv2D "conv2d": Conv2D dilation_rate (2, 2) is not supported' \
            'layers\[2\] BatchNormalization "batch_normalization": BatchNormalization gamma_constraint NonNeg is not supported' \
            'layers\[4\] Dense "dense_1": Dense activation "selu" is not supported' \
            'layers\[5\] Dense "dense": Dense activity_regularizer L2 is not supported' \
            'compile_config optimizer Adam: Adam use_ema true is not supported'; do
    grep -q "^.*$K/unsupported.keras3.json: $want" "$T/bad.txt" || fail "no line: $want"
done
[ "$(grep -c 'is not supported' "$T/bad.txt")" -eq 5 ] || fail "not one line per problem"
ok "unsupported fixture: 5 problems, one line each, exit 2 before any socket"

# A .keras archive as Keras 3 writes one (zipfile, h5py; values from numpy),
# and damaged ones.
$PY - "$T" $K/fashion_cnn.keras3.json <<'PY' || fail "cannot make the .keras fixtures"
import h5py, io, json, sys, zipfile, numpy as np
t, cfg = sys.argv[1], open(sys.argv[2]).read()
rng = np.random.default_rng(1)
def weights(path, shapes):
    with h5py.File(path, "w") as f:
        f.create_group("vars")
        for layer, arrays in shapes.items():
            g = f.create_group(layer).create_group("vars")
            for i, s in enumerate(arrays):
                g[str(i)] = rng.standard_normal(s).astype(np.float32) * 0.05
cnn = {"layers/conv2d": [(3, 3, 1, 32), (32,)], "layers/max_pooling2d": [],
       "layers/flatten": [], "layers/dense": [(5408, 10), (10,)]}
weights(f"{t}/cnn.weights.h5", cnn)
weights(f"{t}/wide.weights.h5", dict(cnn, **{"layers/dense": [(5408, 12), (12,)]}))
weights(f"{t}/mlp.weights.h5", {"layers/flatten": [], "layers/dense": [(784, 128), (128,)],
                                 "layers/dropout": [], "layers/dense_1": [(128, 10), (10,)]})
meta = json.dumps({"keras_version": "3.5.0", "date_saved": "2026-12-04@17:00:00"})
with zipfile.ZipFile(f"{t}/cnn.keras", "w") as z:
    z.writestr("metadata.json", meta)
    z.writestr("config.json", cfg)
    z.write(f"{t}/cnn.weights.h5", "model.weights.h5")
with zipfile.ZipFile(f"{t}/noconfig.keras", "w") as z:
    z.writestr("metadata.json", meta)
data = open(f"{t}/cnn.keras", "rb").read()
open(f"{t}/corrupt.keras", "wb").write(data[:200] + b"\0" * 300)
h5 = open(f"{t}/cnn.weights.h5", "rb").read()
open(f"{t}/trunc.weights.h5", "wb").write(h5[:len(h5) // 2])
PY
refused() {     # refused WHAT WANT CMD...: CMD fails, naming WANT
    what=$1 want=$2; shift 2
    "$@" > "$T/out.txt" 2>&1 && { cat "$T/out.txt"; fail "$what: accepted"; }
    grep -q -- "$want" "$T/out.txt" || { cat "$T/out.txt"; fail "$what: no \"$want\""; }
    echo "  $what: $(tail -1 "$T/out.txt")"
}
refused "a damaged zip" "$T/corrupt.keras: not a readable .keras archive" \
    "$BIN/hetps" eval --model "$T/corrupt.keras" --weights "$T/cnn.weights.h5"
refused "no config.json" "$T/noconfig.keras: no config.json in the archive" \
    "$BIN/hetps" eval --model "$T/noconfig.keras" --weights "$T/cnn.weights.h5"
refused "a truncated .weights.h5" "$T/trunc.weights.h5: not a readable HDF5 file" \
    "$BIN/hetps" eval --model $K/fashion_cnn.keras3.json --weights "$T/trunc.weights.h5"
refused "another model's weights" "$T/mlp.weights.h5: no group layers/conv2d/vars" \
    "$BIN/hetps" eval --model $K/fashion_cnn.keras3.json --weights "$T/mlp.weights.h5"
refused "weights of a wider layer" "layers/dense/vars/0 has shape (5408, 12); the model's dense/kernel is (5408, 10)" \
    "$BIN/hetps" eval --model $K/fashion_cnn.keras3.json --weights "$T/wide.weights.h5"
ok "damaged, incomplete and foreign files refused, each named"

# 2. The same first epoch from three model files.
train() {       # train NAME MODEL [WORKER_ARG...]: one epoch in $T/NAME
    name=$1 model=$2; shift 2
    "$BIN/hetps" launch --data-dir "$T/$name" "$T/cluster.json" -- \
        --model "$model" --epochs 1 --batch-size 64 "$@" > "$T/$name.log" 2>&1 ||
        { tail -30 "$T/$name.log"; fail "$name: hetps launch failed"; }
    sed -n 2p "$T/$name/logs/training.csv" | cut -d, -f2
}
l0=$(train native deploy/models/fashion_cnn.json)
l1=$(train tojson $K/fashion_cnn.keras3.json)
l2=$(train archive "$T/cnn.keras")
echo "  first-epoch loss: fashion_cnn.json $l0, to_json $l1, .keras $l2"
[ -n "$l0" ] && [ "$l0" = "$l1" ] && [ "$l0" = "$l2" ] || fail "the three first epochs differ: $l0 $l1 $l2"
ok "the same first-epoch loss from hetps's file, to_json() and .keras: $l0"

# 3. Keras's files out.
"$BIN/hetps" export --data-dir "$T/tojson" --out "$T/npy" "$T/cluster.json" > /dev/null || fail "export .npy"
"$BIN/hetps" export --format keras --model $K/fashion_cnn.keras3.json \
    --data-dir "$T/tojson" --out "$T/out.weights.h5" "$T/cluster.json" || fail "export .weights.h5"
"$BIN/hetps" export --format keras --model $K/fashion_cnn.keras3.json \
    --data-dir "$T/tojson" --out "$T/out.keras" "$T/cluster.json" > /dev/null || fail "export .keras"
$PY - "$T" <<'PY' || fail "h5py: the export is not Keras's layout"
import h5py, io, json, sys, zipfile, numpy as np
t = sys.argv[1]
want = {"layers/conv2d/vars/0": ("conv2d/kernel", (3, 3, 1, 32)),
        "layers/conv2d/vars/1": ("conv2d/bias", (32,)),
        "layers/dense/vars/0": ("dense/kernel", (5408, 10)),
        "layers/dense/vars/1": ("dense/bias", (10,))}
def check(f):
    found = []
    f.visititems(lambda n, o: found.append(n) if isinstance(o, h5py.Dataset) else None)
    # the model's variables, and Adam's state (optim.sh checks its order):
    # iteration, learning_rate, momentum and velocity of each variable
    opt = [n for n in found if n.startswith("optimizer/vars/")]
    assert sorted(set(found) - set(opt)) == sorted(want), found
    assert len(opt) == 2 + 2 * len(want), opt
    assert "vars" in f and len(f["vars"]) == 0
    for g in ("layers/max_pooling2d/vars", "layers/flatten/vars"):
        assert g in f and len(f[g]) == 0, g
    for path, (name, shape) in want.items():
        d = f[path]
        assert d.shape == shape and d.dtype == np.dtype("<f4"), (path, d.shape, d.dtype)
        assert np.array_equal(d[()], np.load(f"{t}/npy/{name}.npy")), path
check(h5py.File(f"{t}/out.weights.h5", "r"))
z = zipfile.ZipFile(f"{t}/out.keras")
assert sorted(z.namelist()) == ["config.json", "metadata.json", "model.weights.h5"]
cfg = json.loads(z.read("config.json"))
assert cfg["class_name"] == "Sequential" and "compile_config" in cfg
layers = [(l["class_name"], l["config"]["name"]) for l in cfg["config"]["layers"]]
assert layers == [("InputLayer", "input_layer"), ("Conv2D", "conv2d"),
                  ("MaxPooling2D", "max_pooling2d"), ("Flatten", "flatten"),
                  ("Dense", "dense")], layers
assert json.loads(z.read("metadata.json"))["keras_version"].startswith("3.")
check(h5py.File(io.BytesIO(z.read("model.weights.h5")), "r"))
print("h5py: 4 datasets at Keras's paths, shapes and the .npy values; .keras:", layers)
PY
ok "export --format keras: .weights.h5 and .keras as Keras 3 writes them"

# 4. Round trip.
acc=$(sed -n 's/.*\[worker:0\] Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/tojson.log")
"$BIN/hetps" eval --model "$T/out.keras" --weights "$T/out.keras" > "$T/eval.txt" 2>&1 || { cat "$T/eval.txt"; fail "eval of the .keras"; }
cat "$T/eval.txt"
eacc=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' "$T/eval.txt")
[ -n "$acc" ] && [ "$eacc" = "$acc" ] || fail "eval of the exported .keras gives $eacc, the job's final weights $acc"
"$BIN/hetps" launch --data-dir "$T/again" "$T/cluster.json" -- --model "$T/out.keras" \
    --initial-weights "$T/out.keras" --max-steps 1 > "$T/again.log" 2>&1 || { tail -20 "$T/again.log"; fail "a job from the .keras"; }
aacc=$(sed -n 's/.*\[worker:0\] Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/again.log")
awk -v a="$aacc" 'BEGIN { exit !(a >= 0.8) }' || fail "a job started from the .keras is at $aacc after one step"
ok "round trip: eval of the .keras $eacc = the job's $acc; a job started from it: $aacc after one step"

# 5. The newer mathematics, from Keras 3's file, trains; compiled with
#    metrics ["accuracy", AUC] it prints val_auc and writes it to
#    training.csv.
$PY - $K/fashion_math.keras3.json "$T/math.json" <<'PY' || fail "cannot add AUC to fashion_math"
import json, sys
d = json.load(open(sys.argv[1]))
d["compile_config"]["metrics"] = ["accuracy", {"module": "keras.metrics",
    "class_name": "AUC", "config": {"name": "auc", "dtype": "float32",
    "num_thresholds": 200, "curve": "ROC", "summation_method": "interpolation",
    "multi_label": False, "num_labels": None, "label_weights": None,
    "from_logits": False, "thresholds": None}, "registered_name": None}]
json.dump(d, open(sys.argv[2], "w"))
PY
mout=$(train math "$T/math.json")
macc=$(sed -n 2p "$T/math/logs/training.csv" 2>/dev/null | cut -d, -f5)
awk -v a="$macc" 'BEGIN { exit !(a >= 0.8) }' ||
    fail "fashion_math.keras3.json: val_accuracy '$macc' after one epoch ($mout)"
ok "HeNormal + L2, ReLU(6.0), swish, gelu + L1L2, LeakyReLU, categorical CE with label smoothing: val_accuracy $macc after one epoch"
head -1 "$T/math/logs/training.csv" | grep -q ',val_auc$' || fail "training.csv has no val_auc column: $(head -1 "$T/math/logs/training.csv")"
mauc=$(sed -n 2p "$T/math/logs/training.csv" | awk -F, '{ print $NF }')
lauc=$(sed -n 's/.*\[worker:0\] Epoch 1\/1 .* - val_auc: \([0-9.]*\) .*/\1/p' "$T/math.log")
awk -v a="$mauc" 'BEGIN { exit !(a >= 0.9 && a <= 1) }' || fail "val_auc '$mauc' after one epoch"
[ -n "$lauc" ] && [ "$lauc" = "$(printf '%.4f' "$mauc")" ] || { grep 'Epoch 1/1' "$T/math.log"; fail "the epoch line's val_auc '$lauc' is not training.csv's $mauc"; }
ok "metrics [accuracy, AUC]: val_auc $lauc in the epoch line and training.csv"

# 6. The command line's optimizer, to the shards.
"$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:0 --data-dir "$T/sgd/ps-0" > "$T/sgd-ps.log" 2>&1 &
track $!
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "the shard did not start"
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --model $K/fashion_cnn.keras2.json \
    --optimizer '{"type": "sgd", "learning_rate": 0.05}' --max-steps 2 --no-eval > "$T/sgd.log" 2>&1 ||
    { cat "$T/sgd.log"; fail "--optimizer sgd"; }
"$BIN/hetps" inspect "$T/sgd/ps-0" > "$T/inspect.txt" 2>&1
grep -q "optimizer sgd (learning_rate 0.05" "$T/inspect.txt" || { cat "$T/inspect.txt"; fail "the shard does not apply --optimizer"; }
"$BIN/hetps" eval --model $K/fashion_cnn.keras2.json --optimizer lion --weights "$T/npy" > "$T/out.txt" 2>&1
[ $? -eq 2 ] && grep -q 'unsupported optimizer "lion"' "$T/out.txt" || { cat "$T/out.txt"; fail "--optimizer lion not refused"; }
ok "--optimizer: the shard applies sgd lr 0.05 to a to_json() model; lion refused"
