#!/bin/sh
# npdata.sh — training on NumPy arrays (--data): arrays made from the
# Fashion-MNIST IDX files with numpy — an .npz of uint8 images (np.savez,
# stored), the same compressed (np.savez_compressed, deflated), and float32
# x.npy + y.npy with --validation-data — train one synchronous epoch on one
# worker to exactly the val_accuracy of the IDX files; `hetps predict`
# reads .npy images and `hetps eval --data` .npy arrays; bad arrays (float64 images, a shape the model does not
# take, a label out of range, a negative label, a truncated file, an .npz
# without x_test) are refused with a message naming the file. The
# one-worker job ends with the "Final weights" line, as a job of two does.
. "$(dirname "$0")/lib.inc"
need_data
/usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "skipped: no python3-numpy"; exit 77; }
pick_ports
MODEL=deploy/models/fashion_cnn.json
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 2))"] },
  "hetps": { "mode": "sync" } }
JSON
/usr/bin/python3 - "$DATA" "$T" <<'PY' || fail "numpy could not write the arrays"
import gzip, sys, numpy as np
d, t = sys.argv[1], sys.argv[2]
def idx(name, off):
    return np.frombuffer(gzip.open(f"{d}/{name}").read()[off:], np.uint8)
xtr = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
ytr = idx("train-labels-idx1-ubyte.gz", 8).astype(np.int64)
xte = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
yte = idx("t10k-labels-idx1-ubyte.gz", 8).astype(np.int64)
np.savez(f"{t}/fm.npz", x_train=xtr, y_train=ytr, x_test=xte, y_test=yte)
np.savez_compressed(f"{t}/fmz.npz", x_train=xtr, y_train=ytr.astype(np.uint8), x_test=xte, y_test=yte)
np.save(f"{t}/x.npy", (xtr / 255.0).astype(np.float32).reshape(-1, 28, 28, 1))
np.save(f"{t}/y.npy", ytr.astype(np.int32))
np.save(f"{t}/xt.npy", (xte / 255.0).astype(np.float32))
np.save(f"{t}/yt.npy", yte)
np.save(f"{t}/x64.npy", xtr[:100] / 255.0)                     # float64
np.save(f"{t}/xflat.npy", xtr[:100].reshape(100, 784))         # (N, 784)
np.save(f"{t}/y100.npy", ytr[:100])
yb = ytr[:100].copy(); yb[7] = 10; np.save(f"{t}/ybig.npy", yb)
yn = ytr[:100].copy(); yn[3] = -1; np.save(f"{t}/yneg.npy", yn)
np.save(f"{t}/x100.npy", xtr[:100])
np.savez(f"{t}/notest.npz", x_train=xtr[:100], y_train=ytr[:100])
PY
head -c 100000 "$T/x.npy" > "$T/xcut.npy"

# train NAME ARGS...: one sync epoch on one worker; prints its val_accuracy
train() {
    name=$1; shift
    rm -rf "$T/ps"
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:0 --data-dir "$T/ps" > "$T/ps-$name.log" 2>&1 &
    pspid=$!
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --model $MODEL \
        --epochs 1 --verbose 2 "$@" > "$T/w-$name.log" 2>&1 || { tail "$T/w-$name.log" >&2; kill $pspid; fail "training on $name" >&2; }
    kill $pspid; wait $pspid 2>/dev/null
    sed -n 's/^Epoch 1\/1 .*val_accuracy: \([0-9.]*\) .*/\1/p' "$T/w-$name.log"
}
idx=$(train idx --export-every-epoch "$T/ck")
npz=$(train npz --data "$T/fm.npz")
npzc=$(train npzc --data "$T/fmz.npz")
npy=$(train npy --data "$T/x.npy,$T/y.npy" --validation-data "$T/xt.npy,$T/yt.npy")
echo "val_accuracy: IDX $idx, .npz (stored uint8) $npz, .npz (deflated) $npzc, .npy float32 $npy"
[ -n "$idx" ] && awk -v a="$idx" 'BEGIN { exit !(a >= 0.8) }' || fail "the IDX run reached '$idx'"
[ "$npz" = "$idx" ] && [ "$npzc" = "$idx" ] && [ "$npy" = "$idx" ] || fail "the arrays' accuracy differs from IDX's"
ok "one epoch on .npz (stored, deflated) and .npy arrays: val_accuracy $idx, as on the IDX files"
# A job of one worker ends with the line a job of two ends with, on the
# same weights as its last epoch's figures.
last=$(grep -v ' INFO \| WARN ' "$T/w-idx.log" | tail -1)
case $last in
"Final weights (all workers done): "*"val_accuracy: $idx") ;;
*) fail "the one-worker job's last line is not its final weights at $idx: '$last'" ;;
esac
ok "a one-worker job's last line: $last"

"$BIN/hetps" predict --model $MODEL --weights "$T/ck/epoch-001" --images "$T/xt.npy" --out "$T/p-npy.npy" > "$T/pred.txt" 2>&1 || { cat "$T/pred.txt"; fail "predict --images .npy"; }
"$BIN/hetps" predict --model $MODEL --weights "$T/ck/epoch-001" --out "$T/p-idx.npy" > "$T/pred.txt" 2>&1 || { cat "$T/pred.txt"; fail "predict on IDX"; }
/usr/bin/python3 -c "
import numpy as np
a, b = np.load('$T/p-npy.npy'), np.load('$T/p-idx.npy')
assert a.shape == b.shape == (10000, 10) and np.array_equal(a, b), 'outputs differ'
" || fail "predict on .npy images differs from predict on the IDX images"
ok "hetps predict --images xt.npy: the outputs of the IDX images, to the bit"
"$BIN/hetps" eval --model $MODEL --weights "$T/ck/epoch-001" --data "$T/xt.npy,$T/yt.npy" > "$T/eval.txt" 2>&1 ||
    { cat "$T/eval.txt"; fail "eval --data xt.npy,yt.npy"; }
eacc=$(sed -n 's/.* - accuracy \([0-9.]*\).*/\1/p' "$T/eval.txt")
[ "$eacc" = "$idx" ] || fail "eval --data xt.npy,yt.npy gives '$eacc', the IDX run $idx"
ok "hetps eval --data xt.npy,yt.npy: accuracy $eacc, the IDX run's"
bad() { # bad WANT ARGS...: the worker exits 1 naming WANT
    want=$1; shift
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --model $MODEL --epochs 1 "$@" > "$T/bad.txt" 2>&1
    rc=$?
    [ $rc -eq 1 ] && grep -qF -- "$want" "$T/bad.txt" || { cat "$T/bad.txt"; fail "$*: exit $rc, want 1 and '$want'"; }
}
bad "$T/x64.npy: images are f64; use float32" --data "$T/x64.npy,$T/y100.npy" --no-eval
bad "$T/xflat.npy" --data "$T/xflat.npy,$T/y100.npy" --no-eval
bad "$T/ybig.npy" --data "$T/x100.npy,$T/ybig.npy" --no-eval
bad "$T/yneg.npy: label -1 of sample 3 is not a class index" --data "$T/x100.npy,$T/yneg.npy" --no-eval
bad "$T/xcut.npy: truncated" --data "$T/xcut.npy,$T/y.npy" --no-eval
bad "$T/notest.npz has no array x_test" --data "$T/notest.npz"
bad "$T/y.npy: 60000 labels for 100 images" --data "$T/x100.npy,$T/y.npy" --no-eval
bad "has no test set: give --validation-data" --data "$T/x100.npy,$T/y100.npy"
ok "bad arrays refused by name: float64, shape, label range, negative label, truncated, missing x_test, counts, no test set"
