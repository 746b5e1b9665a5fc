#!/bin/sh
# sepnorm.sh — SeparableConv2D and LayerNormalization trained with real
# processes on loopback (1 shard, 1 worker, Fashion-MNIST):
#   1. tests/unit/keras/xception_block (separable convolutions, a strided
#      max-pool, a 1×1 strided projection added) trains 150 steps: the
#      loss falls well below ln 10 and the test accuracy passes 70 %;
#      its .weights.h5 holds each separable layer's depthwise_kernel,
#      pointwise_kernel and bias at vars/0, 1, 2 (Keras's order and
#      shapes) with the .npy values;
#   2. tests/unit/keras/convnext_block (a patchify stem, layer norms, a
#      7×7 depthwise conv, a gelu bottleneck, global average pooling)
#      trains 400 steps (loss below 1.5, accuracy past 65 %); its layer
#      norms' gamma and beta at vars/0, 1;
#   3. each block from hetps's file, Keras 3's and tf.keras 2's JSON
#      trains 20 steps to the same loss.
. "$(dirname "$0")/lib.inc"
need_data
/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: /usr/bin/python3 lacks h5py (python3-h5py)"; exit 77; }
pick_ports
PY=/usr/bin/python3
K=tests/unit/keras
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] },
  "hetps": { "mode": "async" } }
JSON

# export NAME: the run in $T/NAME as .npy and .weights.h5.
export_both() {
    "$BIN/hetps" export --data-dir "$T/$1" --out "$T/$1-npy" "$T/cluster.json" > /dev/null ||
        fail "export $1 .npy"
    "$BIN/hetps" export --format keras --model "$K/$1.json" --data-dir "$T/$1" \
        --out "$T/$1.weights.h5" "$T/cluster.json" > /dev/null || fail "export $1 .weights.h5"
}

# 1. Xception-like.
train_check $K/xception_block.json xception_block 150 1.5 0.7
ok "Xception-like block, 150 steps: mean training loss $loss (from 2.30), test accuracy $acc"
export_both xception_block
$PY - "$T" <<'PY' || fail "the separable layers' export is not Keras's layout"
import h5py, sys, numpy as np
t = sys.argv[1]
f = h5py.File(f"{t}/xception_block.weights.h5", "r")
for group, name, shapes in (
        ("separable_conv2d", "sep1", [(3, 3, 8, 1), (1, 1, 8, 16), (16,)]),
        ("separable_conv2d_1", "sep2", [(3, 3, 16, 2), (1, 1, 32, 16)])):
    names = ["depthwise_kernel", "pointwise_kernel", "bias"][:len(shapes)]
    assert len(f[f"layers/{group}/vars"]) == len(shapes), group
    for k, (var, shape) in enumerate(zip(names, shapes)):
        v = f[f"layers/{group}/vars/{k}"][()]
        assert v.shape == shape, (group, k, v.shape)
        assert np.array_equal(v, np.load(f"{t}/xception_block-npy/{name}/{var}.npy")), (name, var)
print("h5py: depthwise_kernel, pointwise_kernel, bias of both separable layers at vars/0, 1, 2")
PY

# 2. ConvNeXt-like.
train_check $K/convnext_block.json convnext_block 400 1.5 0.65
ok "ConvNeXt-like block, 400 steps: mean training loss $loss (from 2.30), test accuracy $acc"
export_both convnext_block
$PY - "$T" <<'PY' || fail "the layer norms' export is not Keras's layout"
import h5py, sys, numpy as np
t = sys.argv[1]
f = h5py.File(f"{t}/convnext_block.weights.h5", "r")
for group, name, n in (("layer_normalization", "stem_ln", 16),
                       ("layer_normalization_1", "ln", 16),
                       ("layer_normalization_2", "head_ln", 16)):
    for k, var in enumerate(("gamma", "beta")):
        v = f[f"layers/{group}/vars/{k}"][()]
        assert v.shape == (n,), (group, k, v.shape)
        assert np.array_equal(v, np.load(f"{t}/convnext_block-npy/{name}/{var}.npy")), (name, var)
g = np.load(f"{t}/convnext_block-npy/ln/gamma.npy")
assert not np.all(g == 1), "gamma never trained"
print("h5py: gamma, beta of the three layer norms at vars/0, 1")
PY

# 3. The same blocks from the three files.
for b in xception_block convnext_block; do
    twenty_steps $K/$b.json $K/$b.keras3.json $K/$b.keras2.json
    set -- $losses
    [ $# -eq 3 ] && [ "$1" = "$2" ] && [ "$1" = "$3" ] || fail "20 steps of $b's three files: losses$losses"
    ok "$b from hetps's file, Keras 3's and tf.keras 2's JSON: the same 20 steps, loss $1"
done
