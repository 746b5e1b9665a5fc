#!/bin/sh
# checkpoint.sh — --export-every-epoch: after each epoch the chief writes
# DIR/epoch-NNN/ (.npy weights numpy reads with Keras's shapes, epoch.txt)
# and `hetps eval --weights` of the last gives the val_accuracy the chief
# printed; no temporary directory is left. --export-best-only keeps DIR/best
# only, holding the epoch of the highest printed val_accuracy; alone it is
# refused by name.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cluster2 '{ "mode": "async" }'

"$BIN/hetps" launch --data-dir "$T/d1" "$T/cluster.json" -- --model $MODEL \
    --epochs 2 --export-every-epoch "$T/ck" > "$T/l1.log" 2>&1 || { tail -20 "$T/l1.log"; fail "launch with --export-every-epoch"; }
for e in 001 002; do
    [ -f "$T/ck/epoch-$e/conv2d/kernel.npy" ] && [ -f "$T/ck/epoch-$e/dense/bias.npy" ] || fail "no epoch-$e weights"
    grep -q "^epoch $((1${e} - 1000)) val_accuracy 0\.[0-9]*$" "$T/ck/epoch-$e/epoch.txt" || fail "epoch-$e/epoch.txt"
done
[ -z "$(ls -A "$T/ck" | grep -v '^epoch-00[12]$')" ] || { ls -la "$T/ck"; fail "something besides epoch-001 and epoch-002 left in DIR"; }
/usr/bin/python3 -c "
import numpy as np, sys
a = np.load('$T/ck/epoch-002/dense/kernel.npy'); assert a.shape == (5408, 10) and a.dtype == np.float32, a.shape
" || fail "numpy cannot read the epoch's weights"
want=$(sed -n 's/^\[worker:0\] Epoch 2\/2 .*val_accuracy: \([0-9.]*\) .*/\1/p' "$T/l1.log")
"$BIN/hetps" eval --model $MODEL --weights "$T/ck/epoch-002" > "$T/eval.txt" 2>&1 || { cat "$T/eval.txt"; fail "eval of epoch-002"; }
got=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' "$T/eval.txt")
[ -n "$want" ] && [ "$got" = "$want" ] || fail "eval of epoch-002 gives $got, the chief printed $want"
ok "epoch-001, epoch-002 written whole; eval of epoch-002 = the printed $want"

"$BIN/hetps" launch --data-dir "$T/d2" "$T/cluster.json" -- --model $MODEL \
    --epochs 3 --export-every-epoch "$T/best" --export-best-only > "$T/l2.log" 2>&1 || { tail -20 "$T/l2.log"; fail "launch with --export-best-only"; }
[ "$(ls -A "$T/best")" = "best" ] || { ls -la "$T/best"; fail "best-only left more than best/"; }
top=$(sed -n 's/^\[worker:0\] Epoch \([0-9]\)\/3 .*val_accuracy: \([0-9.]*\) .*/\2 \1/p' "$T/l2.log" | sort -k1,1r -k2,2n | head -1)
set -- $top
grep -qx "epoch $2 val_accuracy $1" "$T/best/best/epoch.txt" || { cat "$T/best/best/epoch.txt"; fail "best/ is not epoch $2 ($1)"; }
ok "--export-best-only: best/ holds epoch $2 of val_accuracy $1"
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --export-best-only > "$T/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q -- "--export-best-only needs --export-every-epoch DIR" "$T/bad.txt" || fail "--export-best-only alone not refused"
ok "--export-best-only alone is refused by name"
