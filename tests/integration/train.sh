#!/bin/sh
# train.sh — the reference job end to end on loopback, one epoch: 2
# parameter servers and 2 asynchronous workers train the Fashion-MNIST CNN
# to at least 85 % test accuracy; `hetps export` writes .npy files numpy
# reads with Keras's shapes, and `hetps eval` of them gives the chief's
# figure; `hetps predict` of them gives every image's probabilities
# (argmax accuracy = eval's) or one line per image, and names a truncated
# images file; restarted servers resume from their stores and serve the same
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

"$BIN/hetps" predict --model $MODEL --weights "$T/npy" --devices cpu:0,cpu:1 \
    --out "$T/pred.npy" > "$T/predict.txt" 2>&1 || { cat "$T/predict.txt"; fail "predict --out"; }
cat "$T/predict.txt"
grep -q "outputs (10000, 10) float32 written to $T/pred.npy" "$T/predict.txt" || fail "predict printed no summary line"
pacc=$(/usr/bin/python3 - "$T/pred.npy" "$DATA/t10k-labels-idx1-ubyte.gz" <<'PY'
import gzip, sys, numpy as np
p = np.load(sys.argv[1])
assert p.shape == (10000, 10) and p.dtype == np.float32, (p.shape, p.dtype)
assert np.allclose(p.sum(axis=1), 1, atol=1e-5), "rows are not probabilities"
y = np.frombuffer(gzip.open(sys.argv[2]).read()[8:], np.uint8)
print("%.4f" % (p.argmax(axis=1) == y).mean())
PY
) || fail "numpy cannot read predict's outputs"
[ "$pacc" = "$eacc" ] || fail "predict's argmax accuracy $pacc, eval's $eacc"
ok "predict --out: (10000, 10) float32, argmax accuracy $pacc = eval's"

"$BIN/hetps" predict --model $MODEL --weights "$T/npy" > "$T/lines.txt" 2> "$T/err.txt" || { cat "$T/err.txt"; fail "predict to lines"; }
[ "$(wc -l < "$T/lines.txt")" -eq 10000 ] || fail "predict printed $(wc -l < "$T/lines.txt") lines, not 10000"
head -1 "$T/lines.txt" | grep -Eq '^0 [0-9] (0|1)\.[0-9]{6}$' || { head -1 "$T/lines.txt"; fail "first line is not INDEX CLASS PROBABILITY"; }
first=$(/usr/bin/python3 -c "import numpy as np; p = np.load('$T/pred.npy')[0]; print('0 %d %.6f' % (p.argmax(), p.max()))")
[ "$(head -1 "$T/lines.txt")" = "$first" ] || fail "first line $(head -1 "$T/lines.txt"), the .npy says $first"
zcat "$DATA/t10k-images-idx3-ubyte.gz" | head -c 100000 > "$T/cut-images"
"$BIN/hetps" predict --model $MODEL --weights "$T/npy" --images "$T/cut-images" > "$T/out.txt" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "images file $T/cut-images is truncated" "$T/out.txt" || { cat "$T/out.txt"; fail "truncated images: exit $rc without the reason"; }
ok "predict: one INDEX CLASS PROBABILITY line per image ($(head -1 "$T/lines.txt")); a truncated images file named, exit $rc"

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
