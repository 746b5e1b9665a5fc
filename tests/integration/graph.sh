#!/bin/sh
# graph.sh — a model that is a graph, with real processes on loopback:
#   1. a model of two inputs (tests/unit/keras/two_inputs.keras3.json) is
#      read and checked, and without --data asks for one .npy per input,
#      naming them (inputs.sh trains one);
#   2. deploy/models/fashion_resnet.json (two residual blocks: an identity
#      skip and a 1×1 projection, each joined by Add) trains 300 steps on
#      Fashion-MNIST with 1 shard and 1 worker: the loss falls from
#      ln 10 ≈ 2.30 well below 1 and the test accuracy passes 75 %;
#   3. `hetps export` writes its seven kernels and biases as .npy, whose
#      eval gives the chief's accuracy; `--format keras` writes a
#      .weights.h5 that h5py reads at Keras's paths with the .npy values,
#      and a .keras whose config.json is a Functional model with its Add
#      layers' inbound nodes, evaluated to the same accuracy;
#   4. tests/unit/keras/resnet_block (a projection shortcut) from hetps's
#      file, Keras 3's and tf.keras 2's Functional JSON trains 20 steps to
#      the same loss;
#   5. deploy/models/fashion_gap.json (ZeroPadding2D, convolutions, max
#      and "same" average pooling, GlobalAveragePooling2D) trains 500 steps:
#      the loss falls well below ln 10 and the test accuracy passes 60 %;
#      its Keras 3 and tf.keras 2 twins train 20 steps to the same loss;
#   6. deploy/models/fashion_mobile.json (MobileNetV2-style: DepthwiseConv2D,
#      ReLU(6.0), Add) trains 300 steps: the loss falls below 1 and the test
#      accuracy passes 75 %; its .weights.h5 holds each depthwise layer's
#      depthwise_kernel (kh, kw, C, depth_multiplier) and bias at vars/0
#      and vars/1 with the .npy values; tests/unit/keras/mobile_block from
#      hetps's file, Keras 3's and tf.keras 2's JSON trains 20 steps to the
#      same loss.
. "$(dirname "$0")/lib.inc"
need_data
/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: /usr/bin/python3 lacks h5py (python3-h5py)"; exit 77; }
pick_ports
MODEL=deploy/models/fashion_resnet.json
PY=/usr/bin/python3

cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] },
  "hetps": { "mode": "async" } }
JSON

# 1. Two inputs: read, then asked for their arrays by name.
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 \
    --model tests/unit/keras/two_inputs.keras3.json > "$T/two.txt" 2>&1
rc=$?
cat "$T/two.txt"
[ $rc -ne 0 ] || fail "a model of two inputs was trained without its arrays"
grep -q "the model has 2 inputs (image, meta): give --data image=X_image.npy,meta=X_meta.npy,Y.npy" "$T/two.txt" ||
    fail "the two-input model's data is not asked for by input name"
ok "two inputs: read and checked, their arrays asked for by name (exit $rc)"

# 2. The residual model, 300 steps.
"$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model $MODEL --max-steps 300 > "$T/launch.log" 2>&1 ||
    { tail -30 "$T/launch.log"; fail "hetps launch failed"; }
grep 'Epoch' "$T/launch.log"
loss=$(sed -n 2p "$T/data/logs/training.csv" | cut -d, -f2)
acc=$(sed -n 's/.*\[worker:0\] Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/launch.log")
[ -n "$loss" ] && [ -n "$acc" ] || fail "no training loss or final accuracy"
awk -v l="$loss" -v a="$acc" 'BEGIN { exit !(l < 1.0 && a >= 0.75) }' ||
    fail "300 steps: mean loss $loss (from ln 10 = 2.30), accuracy $acc"
ok "residual model, 300 steps: mean training loss $loss (from 2.30), test accuracy $acc"

# 3. Export.
"$BIN/hetps" export --data-dir "$T/data" --out "$T/npy" "$T/cluster.json" > /dev/null || fail "export .npy"
"$BIN/hetps" export --format keras --model $MODEL --data-dir "$T/data" \
    --out "$T/out.weights.h5" "$T/cluster.json" > /dev/null || fail "export .weights.h5"
"$BIN/hetps" export --format keras --model $MODEL --data-dir "$T/data" \
    --out "$T/out.keras" "$T/cluster.json" > /dev/null || fail "export .keras"
$PY - "$T" <<'PY' || fail "the export is not Keras's layout"
import h5py, io, json, sys, zipfile, numpy as np
t = sys.argv[1]
layers = [("conv2d", "stem", (3, 3, 1, 8)), ("conv2d_1", "res1_a", (3, 3, 8, 8)),
          ("conv2d_2", "res1_b", (3, 3, 8, 8)), ("conv2d_3", "res2_a", (3, 3, 8, 16)),
          ("conv2d_4", "res2_b", (3, 3, 16, 16)), ("conv2d_5", "res2_proj", (1, 1, 8, 16)),
          ("dense", "dense", (784, 10))]
def check(f):
    for group, name, shape in layers:
        k, b = f[f"layers/{group}/vars/0"], f[f"layers/{group}/vars/1"]
        assert k.shape == shape and b.shape == (shape[-1],), (group, k.shape)
        assert np.array_equal(k[()], np.load(f"{t}/npy/{name}/kernel.npy")), name
        assert np.array_equal(b[()], np.load(f"{t}/npy/{name}/bias.npy")), name
    for g in ("input_layer", "add", "add_1", "activation", "activation_1",
              "max_pooling2d", "flatten"):
        assert len(f[f"layers/{g}/vars"]) == 0, g
check(h5py.File(f"{t}/out.weights.h5", "r"))
z = zipfile.ZipFile(f"{t}/out.keras")
cfg = json.loads(z.read("config.json"))
assert cfg["class_name"] == "Functional", cfg["class_name"]
by = {l["name"]: l for l in cfg["config"]["layers"]}
reads = [a["config"]["keras_history"][0] for a in by["res2"]["inbound_nodes"][0]["args"][0]]
assert by["res2"]["class_name"] == "Add" and reads == ["res2_b", "res2_proj"], reads
assert cfg["config"]["output_layers"] == [["dense", 0, 0]]
check(h5py.File(io.BytesIO(z.read("model.weights.h5")), "r"))
print("h5py: 7 layers' kernels and biases at Keras's paths with the .npy values; .keras: Functional, res2 = Add(res2_b, res2_proj)")
PY
for w in "$T/npy" "$T/out.keras"; do
    m=$MODEL; [ "$w" = "$T/out.keras" ] && m=$w
    "$BIN/hetps" eval --model "$m" --weights "$w" > "$T/eval.txt" 2>&1 || { cat "$T/eval.txt"; fail "eval of $w"; }
    eacc=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' "$T/eval.txt")
    [ "$eacc" = "$acc" ] || fail "eval of $w gives $eacc, the chief said $acc"
done
ok "export: .npy, .weights.h5 and a Functional .keras; eval of the .npy and the .keras gives the chief's $acc"

# 4. The same graph from hetps's file, Keras 3's and tf.keras 2's JSON.
twenty_steps tests/unit/keras/resnet_block.json tests/unit/keras/resnet_block.keras3.json \
    tests/unit/keras/resnet_block.keras2.json
set -- $losses
[ $# -eq 3 ] && [ "$1" = "$2" ] && [ "$1" = "$3" ] || fail "20 steps of the three files: losses$losses"
ok "the residual block from hetps's file, Keras 3's and tf.keras 2's Functional JSON: the same 20 steps, loss $1"

# 5. Global average pooling after convolutions, 500 steps; its Keras twins.
train_check deploy/models/fashion_gap.json gap 500 1.5 0.6
ok "global average pooling model, 500 steps: mean training loss $loss (from 2.30), test accuracy $acc"
twenty_steps deploy/models/fashion_gap.json deploy/models/keras/fashion_gap.keras3.json \
    deploy/models/keras/fashion_gap.keras2.json
set -- $losses
[ $# -eq 3 ] && [ "$1" = "$2" ] && [ "$1" = "$3" ] || fail "20 steps of fashion_gap's three files: losses$losses"
ok "fashion_gap from hetps's file, Keras 3's and tf.keras 2's JSON: the same 20 steps, loss $1"

# 6. MobileNetV2-style: depthwise convolutions, ReLU(6.0), Add; 300 steps.
train_check deploy/models/fashion_mobile.json mobile 300 1.0 0.75
ok "MobileNetV2-style model, 300 steps: mean training loss $loss (from 2.30), test accuracy $acc"
"$BIN/hetps" export --data-dir "$T/mobile" --out "$T/mobile-npy" "$T/cluster.json" > /dev/null ||
    fail "export fashion_mobile .npy"
"$BIN/hetps" export --format keras --model deploy/models/fashion_mobile.json \
    --data-dir "$T/mobile" --out "$T/mobile.weights.h5" "$T/cluster.json" > /dev/null ||
    fail "export fashion_mobile .weights.h5"
$PY - "$T" <<'PY' || fail "fashion_mobile's export is not Keras's layout"
import h5py, sys, numpy as np
t = sys.argv[1]
f = h5py.File(f"{t}/mobile.weights.h5", "r")
for group, name, shape in (("depthwise_conv2d", "block1_dw", (3, 3, 32, 1)),
                           ("depthwise_conv2d_1", "down_dw", (3, 3, 16, 2))):
    k, b = f[f"layers/{group}/vars/0"], f[f"layers/{group}/vars/1"]
    assert k.shape == shape and b.shape == (shape[2] * shape[3],), (group, k.shape, b.shape)
    assert np.array_equal(k[()], np.load(f"{t}/mobile-npy/{name}/depthwise_kernel.npy")), name
    assert np.array_equal(b[()], np.load(f"{t}/mobile-npy/{name}/bias.npy")), name
print("h5py: both depthwise layers' depthwise_kernel and bias at vars/0, vars/1 with the .npy values")
PY
twenty_steps tests/unit/keras/mobile_block.json tests/unit/keras/mobile_block.keras3.json \
    tests/unit/keras/mobile_block.keras2.json
set -- $losses
[ $# -eq 3 ] && [ "$1" = "$2" ] && [ "$1" = "$3" ] || fail "20 steps of mobile_block's three files: losses$losses"
ok "mobile_block from hetps's file, Keras 3's and tf.keras 2's JSON: the same 20 steps, loss $1"
