#!/bin/sh
# train.sh — the reference job end to end on loopback, one epoch: 2
# parameter servers and 2 asynchronous workers train the Fashion-MNIST CNN
# to at least 85 % test accuracy; `hetps export` writes .npy files numpy
# reads with Keras's shapes, and `hetps eval` of them gives the chief's
# figure; restarted servers resume from their stores and serve the same
# weights live; a second chief finds the variables and keeps them.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cluster2 '{ "mode": "async" }'

"$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model $MODEL --epochs 1 > "$T/launch.log" 2>&1 &
LPID=$!
track $LPID
launcher_gone() { ! kill -0 $LPID 2>/dev/null; }
wait_for 240 launcher_gone || { tail -30 "$T/launch.log"; fail "training did not finish in 240 s"; }
wait $LPID || { tail -30 "$T/launch.log"; fail "hetps launch failed"; }
PIDS=""
grep 'Epoch' "$T/launch.log"
grep 'Final weights' "$T/launch.log"
acc=$(sed -n 's/.*\[worker:0\] Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/launch.log")
[ -n "$acc" ] || fail "the chief printed no final val_accuracy"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "one epoch reached $acc < 0.85"
ok "one epoch: final val_accuracy $acc >= 0.85"

"$BIN/hetps" export --data-dir "$T/data" --out "$T/npy" "$T/cluster.json" || fail "export"
/usr/bin/python3 - "$T/npy" <<'PY' || fail "numpy cannot read the export"
import sys, numpy as np
want = {"conv2d/kernel": (3, 3, 1, 32), "conv2d/bias": (32,),
        "dense/kernel": (5408, 10), "dense/bias": (10,)}
for name, shape in want.items():
    a = np.load(f"{sys.argv[1]}/{name}.npy")
    assert a.shape == shape and a.dtype == np.float32, (name, a.shape, a.dtype)
    assert np.isfinite(a).all() and a.std() > 0, name
print("numpy: all four variables load with Keras's shapes")
PY
"$BIN/hetps" eval --model $MODEL --weights "$T/npy" > "$T/eval.txt" 2>&1 || { cat "$T/eval.txt"; fail "eval of the export"; }
cat "$T/eval.txt"
eacc=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' "$T/eval.txt")
[ "$eacc" = "$acc" ] || fail "eval of the export gives $eacc, the chief said $acc"
ok "export: numpy reads it, eval gives the chief's accuracy"

for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/data/ps-$i" > "$T/ps-$i.log" 2>&1 &
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "restarted servers did not come up"
"$BIN/hetps" eval --model $MODEL --cluster "$T/cluster.json" > "$T/live.txt" 2>&1 || { cat "$T/live.txt"; fail "eval of live weights"; }
lacc=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' "$T/live.txt")
[ "$lacc" = "$acc" ] || fail "restarted servers serve weights of accuracy $lacc, not $acc"
ok "restarted servers resume from their stores: live eval $lacc"

"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --model $MODEL \
    --max-steps 3 --no-eval > "$T/chief2.log" 2>&1 || { cat "$T/chief2.log"; fail "second chief"; }
grep -q "variables already exist" "$T/ps-0.log" || { cat "$T/ps-0.log"; fail "the shard did not keep the trained variables"; }
ok "a second chief's create is idempotent: trained variables kept"
