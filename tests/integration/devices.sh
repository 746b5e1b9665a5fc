#!/bin/sh
# devices.sh — several devices in one worker, with real processes:
#   mirrored  --devices cpu:0,cpu:1 (batch split by speed, gradients
#             reduced in the worker, one push per step) and
#   placed    deploy/models/fashion_cnn_placed.json (conv+pool on cpu:0,
#             flatten+dense on cpu:1, like tf.device)
# both give the same parameters as one device after 20 synchronous steps
# (relative difference ≤ 1e-5).
. "$(dirname "$0")/lib.inc"
need_data
pick_ports

# train NAME MODEL DEVICES: 20 sync steps of one worker on its own cluster,
# then export to $T/NAME-npy.
next=$PORT
train() {
    name=$1 model=$2 devices=$3
    printf '{ "cluster": { "ps": ["127.0.0.1:%s", "127.0.0.1:%s"], "worker": ["127.0.0.1:%s"] }, "hetps": { "mode": "sync" } }\n' \
        $next $((next + 1)) $((next + 2)) > "$T/$name.json"
    next=$((next + 3))
    pids=""
    for i in 0 1; do
        "$BIN/hetps-ps" --cluster "$T/$name.json" --task ps:$i \
            --data-dir "$T/$name-data/ps-$i" > "$T/$name-ps$i.log" 2>&1 &
        pids="$pids $!"
        track $!
    done
    wait_for 10 "$BIN/hetps" status "$T/$name.json" || fail "$name: servers did not start"
    "$BIN/hetps-worker" --cluster "$T/$name.json" --task worker:0 --model "$model" \
        --devices "$devices" --batch-size 64 --max-steps 20 --no-eval \
        > "$T/$name-w.log" 2>&1 || { cat "$T/$name-w.log"; fail "$name: worker"; }
    stop_within 30 $pids
    "$BIN/hetps" export --data-dir "$T/$name-data" --out "$T/$name-npy" \
        "$T/$name.json" > /dev/null 2>&1 || fail "$name: export"
}

compare() {
    /usr/bin/python3 - "$T/$1-npy" "$T/$2-npy" <<'PY'
import sys, numpy as np
worst = 0.0
for name in ["conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias"]:
    a = np.load(f"{sys.argv[1]}/{name}.npy").astype(np.float64)
    b = np.load(f"{sys.argv[2]}/{name}.npy").astype(np.float64)
    worst = max(worst, np.linalg.norm(a - b) / np.linalg.norm(a))
print(f"largest relative difference {worst:.2e}")
assert worst <= 1e-5
PY
}

train one deploy/models/fashion_cnn.json cpu
train mirrored deploy/models/fashion_cnn.json cpu:0,cpu:1
grep -q "mirrored" "$T/mirrored-w.log" || { cat "$T/mirrored-w.log"; fail "the worker did not mirror over two devices"; }
compare one mirrored || fail "mirrored cpu:0,cpu:1 differs from one device"
ok "mirrored cpu:0,cpu:1 equals one device"

train placed deploy/models/fashion_cnn_placed.json cpu:0,cpu:1
grep -q "placed" "$T/placed-w.log" || { cat "$T/placed-w.log"; fail "the worker did not place layers"; }
compare one placed || fail "placed layers differ from one device"
ok "explicit placement (conv on cpu:0, dense on cpu:1) equals one device"

"$BIN/hetps-worker" --cluster "$T/one.json" --task worker:0 \
    --model deploy/models/fashion_cnn_placed.json --devices cpu > "$T/bad.txt" 2>&1
[ $? -ne 0 ] && grep -q 'cpu:1' "$T/bad.txt" || { cat "$T/bad.txt"; fail "a layer on a device the worker lacks was not refused"; }
ok "a layer placed on a device the worker lacks is refused, naming both"
