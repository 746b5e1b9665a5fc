#!/bin/sh
# batchnorm.sh — batch norm on the parameter servers, with real processes:
#   1. the small ResNet (deploy/models/fashion_resnet_bn.json: batch norm,
#      HeNormal, L2, projection shortcuts) trained 50 sync steps by 2
#      workers × 32 on 2 shards equals 1 worker with two mirrored devices
#      (cpu:0,cpu:1) × 32 each — every variable, the moving statistics
#      included, to 1e-5 relative: each replica normalises by its own
#      slice's moments, and the shards move the statistics once a step by
#      the pooled moments of all 64 samples. The shards split the sync
#      batches equally for such a model (by speed, the slices would change
#      what is computed), and so does the mirrored worker;
#   2. the moving statistics moved (not their initial zeros and ones), and
#      `hetps eval` reads them: the exported weights give another loss
#      once the moving means are shifted;
#   3. `hetps export --format keras` writes each batch norm's variables in
#      Keras's order (gamma, beta, moving_mean, moving_variance) and
#      values, as the .npy export has them, and eval reads them back;
#   4. resharded 2 → 3, the variables are kept and a step still moves the
#      statistics (each variance kept with its mean).
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
/usr/bin/python3 -c 'import h5py, numpy' 2>/dev/null || { echo "skipped: /usr/bin/python3 lacks h5py (python3-h5py)"; exit 77; }
MODEL=deploy/models/fashion_resnet_bn.json
STEPS=50

# cluster NAME N_WORKERS: $T/NAME.json, 2 shards, sync, on fresh ports.
next=$PORT
cluster() {
    ps0=$next; ps1=$((next + 1)); next=$((next + 2))
    workers=""
    i=0
    while [ $i -lt "$2" ]; do
        workers="$workers${workers:+, }\"127.0.0.1:$next\""
        next=$((next + 1)); i=$((i + 1))
    done
    printf '{ "cluster": { "ps": ["127.0.0.1:%s", "127.0.0.1:%s"], "worker": [%s] },\n  "hetps": { "mode": "sync" } }\n' \
        $ps0 $ps1 "$workers" > "$T/$1.json"
}
servers() {
    for i in 0 1; do
        "$BIN/hetps-ps" --cluster "$T/$1.json" --task ps:$i \
            --data-dir "$T/$1-data/ps-$i" > "$T/$1-ps$i.log" 2>&1 &
        track $!
    done
    wait_for 10 "$BIN/hetps" status "$T/$1.json" || fail "$1: servers did not start"
}
finish() {
    stop_within 30 $PIDS
    PIDS=""
    "$BIN/hetps" export --data-dir "$T/$1-data" --out "$T/$1-npy" \
        "$T/$1.json" > /dev/null 2>&1 || fail "$1: export"
}

# 1. 2 sync workers × 32 against 1 worker × 2 mirrored devices × 32.
cluster two 2
servers two
for i in 0 1; do
    "$BIN/hetps-worker" --cluster "$T/two.json" --task worker:$i --model $MODEL \
        --batch-size 32 --max-steps $STEPS --no-eval > "$T/two-w$i.log" 2>&1 &
    eval "w$i=\$!"
done
wait $w0 || { cat "$T/two-w0.log"; fail "2 × 32: worker 0"; }
wait $w1 || { cat "$T/two-w1.log"; fail "2 × 32: worker 1"; }
grep -q "batch norm: sync batches are split equally" "$T/two-ps0.log" || { cat "$T/two-ps0.log"; fail "ps:0 did not split the batches equally for batch norm"; }
finish two

cluster mirrored 1
servers mirrored
"$BIN/hetps-worker" --cluster "$T/mirrored.json" --task worker:0 --model $MODEL \
    --devices cpu:0,cpu:1 --batch-size 64 --max-steps $STEPS --no-eval \
    > "$T/mirrored-w.log" 2>&1 || { cat "$T/mirrored-w.log"; fail "1 × (2 × 32)"; }
grep -q "mirrored, batch split equally" "$T/mirrored-w.log" || { cat "$T/mirrored-w.log"; fail "the worker did not mirror over two devices in equal slices"; }
finish mirrored

/usr/bin/python3 - "$T" "$MODEL" <<'PY' || fail "2 sync workers × 32 differ from 1 worker × 2 mirrored devices × 32"
import json, sys, numpy as np
t, model = sys.argv[1], sys.argv[2]
m = json.load(open(model))
names = []
for l in m["layers"]:
    if l["type"] == "conv2d":
        names.append(l["name"] + "/kernel")
    elif l["type"] == "batchnorm":
        names += [l["name"] + "/" + v for v in
                  ("gamma", "beta", "moving_mean", "moving_variance")]
    elif l["type"] == "dense":
        names += [l["name"] + "/kernel", l["name"] + "/bias"]
worst, at = 0.0, ""
for v in names:
    a = np.load(f"{t}/two-npy/{v}.npy").astype(np.float64)
    b = np.load(f"{t}/mirrored-npy/{v}.npy").astype(np.float64)
    d = np.linalg.norm(a - b) / np.linalg.norm(a)
    if d > worst:
        worst, at = d, v
print(f"{len(names)} variables, largest relative difference {worst:.2e} ({at})")
assert worst <= 1e-5
# 2. moved, and positive variances
mm = np.load(f"{t}/two-npy/stem_bn/moving_mean.npy")
mv = np.load(f"{t}/two-npy/stem_bn/moving_variance.npy")
assert np.abs(mm).max() > 1e-3, "moving_mean did not move"
assert np.abs(mv - 1).max() > 1e-3 and mv.min() > 0, "moving_variance did not move"
PY
ok "2 sync workers × 32 equal 1 worker × 2 mirrored devices × 32 after $STEPS steps, moving statistics included"

# 2. eval reads the moving statistics.
cp -r "$T/two-npy" "$T/shifted-npy"
/usr/bin/python3 - "$T/shifted-npy" <<'PY'
import sys, glob, numpy as np
for f in glob.glob(f"{sys.argv[1]}/*/moving_mean.npy"):
    a = np.load(f)
    np.save(f, a + 1.0)
PY
"$BIN/hetps" eval --model $MODEL --weights "$T/two-npy" > "$T/eval.txt" 2>&1 || { cat "$T/eval.txt"; fail "eval"; }
"$BIN/hetps" eval --model $MODEL --weights "$T/shifted-npy" > "$T/eval-shifted.txt" 2>&1 || { cat "$T/eval-shifted.txt"; fail "eval (shifted)"; }
loss=$(grep -o 'loss [0-9.e+-]*' "$T/eval.txt" | head -1)
shifted=$(grep -o 'loss [0-9.e+-]*' "$T/eval-shifted.txt" | head -1)
[ -n "$loss" ] && [ -n "$shifted" ] && [ "$loss" != "$shifted" ] || { cat "$T/eval.txt" "$T/eval-shifted.txt"; fail "eval did not read the moving statistics"; }
ok "eval uses the moving statistics ($loss; moving means + 1: $shifted)"

# 3. Keras's order in the .weights.h5.
"$BIN/hetps" export --data-dir "$T/two-data" --format keras --model $MODEL \
    --out "$T/two.weights.h5" "$T/two.json" > "$T/export-h5.txt" 2>&1 || { cat "$T/export-h5.txt"; fail "export --format keras"; }
/usr/bin/python3 - "$T" <<'PY' || fail "the .weights.h5 does not hold batch norm in Keras's order"
import sys, h5py, numpy as np
t = sys.argv[1]
with h5py.File(f"{t}/two.weights.h5", "r") as f:
    # Keras 3 names a layer's group by its class: the first batch norm
    # (stem_bn) is batch_normalization, the second batch_normalization_1.
    g = f["layers/batch_normalization/vars"]
    assert sorted(g.keys()) == ["0", "1", "2", "3"], list(g.keys())
    for k, v in enumerate(("gamma", "beta", "moving_mean", "moving_variance")):
        a = np.asarray(g[str(k)])
        b = np.load(f"{t}/two-npy/stem_bn/{v}.npy")
        assert a.shape == b.shape and np.array_equal(a, b), (k, v)
    a = np.asarray(f["layers/batch_normalization_1/vars/2"])
    assert np.array_equal(a, np.load(f"{t}/two-npy/res1_a_bn/moving_mean.npy"))
print("ok")
PY
ok "export --format keras writes gamma, beta, moving_mean, moving_variance in Keras's order"
"$BIN/hetps" eval --model $MODEL --weights "$T/two.weights.h5" > "$T/eval-h5.txt" 2>&1 || { cat "$T/eval-h5.txt"; fail "eval from the .weights.h5"; }
h5loss=$(grep -o 'loss [0-9.e+-]*' "$T/eval-h5.txt" | head -1)
[ "$h5loss" = "$loss" ] || { cat "$T/eval.txt" "$T/eval-h5.txt"; fail "the .weights.h5 read back evaluates otherwise"; }
ok "the .weights.h5 read back gives the same eval ($h5loss)"

# 4. Resharded 2 → 3: every variable kept, the moving statistics still
#    outside the optimizer and each variance with its mean — one more
#    sync step moves them by that step's moments only.
ps0=$next; next=$((next + 3))
printf '{ "cluster": { "ps": ["127.0.0.1:%s", "127.0.0.1:%s", "127.0.0.1:%s"], "worker": ["127.0.0.1:%s"] },\n  "hetps": { "mode": "sync" } }\n' \
    $ps0 $((ps0 + 1)) $((ps0 + 2)) $((ps0 + 3)) > "$T/three.json"
next=$((next + 1))
"$BIN/hetps" reshard --from "$T/two.json" --to "$T/three.json" --data-dir "$T/two-data" \
    --out-dir "$T/three-data" > "$T/reshard.txt" 2>&1 || { cat "$T/reshard.txt"; fail "reshard"; }
"$BIN/hetps" export --data-dir "$T/three-data" --out "$T/three-npy" "$T/three.json" \
    > /dev/null 2>&1 || fail "export after resharding"
for f in stem_bn/gamma stem_bn/moving_mean stem_bn/moving_variance res3_proj_bn/moving_variance dense/kernel; do
    cmp "$T/two-npy/$f.npy" "$T/three-npy/$f.npy" || fail "$f differs after resharding"
done
for i in 0 1 2; do
    "$BIN/hetps-ps" --cluster "$T/three.json" --task ps:$i \
        --data-dir "$T/three-data/ps-$i" > "$T/three-ps$i.log" 2>&1 &
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/three.json" || fail "three: servers did not start"
"$BIN/hetps-worker" --cluster "$T/three.json" --task worker:0 --model $MODEL \
    --batch-size 64 --max-steps 1 --no-eval > "$T/three-w.log" 2>&1 ||
    { cat "$T/three-w.log"; fail "a step after resharding"; }
stop_within 30 $PIDS
PIDS=""
"$BIN/hetps" export --data-dir "$T/three-data" --out "$T/three2-npy" "$T/three.json" \
    > /dev/null 2>&1 || fail "export after a step"
/usr/bin/python3 - "$T" <<'PY' || fail "the moving statistics after resharding did not move as one step's moments move them"
import sys, numpy as np
t = sys.argv[1]
for v in ("moving_mean", "moving_variance"):
    a = np.load(f"{t}/three-npy/stem_bn/{v}.npy").astype(np.float64)
    b = np.load(f"{t}/three2-npy/stem_bn/{v}.npy").astype(np.float64)
    assert np.abs(b - a).max() > 0, v + " did not move"
# moving = 0.99·moving + 0.01·(a variance ≥ 0): never below 0.99 of before
assert np.all(b >= 0.99 * a - 1e-6), "moving_variance fell faster than its momentum allows"
print("ok")
PY
ok "resharded 2 → 3: batch norm's variables kept bitwise, one more step moves the statistics"
