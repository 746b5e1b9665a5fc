#!/bin/sh
# optim.sh — every optimizer of a shard equals Keras's formulas: 100 steps
# of seeded random gradients through a real shard store (tools/optim_check:
# ps_store_apply, closed and reopened half-way) for each optimizer and
# setting, then through live hetps-ps processes in sync and async
# (tools/optim_check shard, every optimizer × rate schedule × clipping), against
# the NumPy transcription of keras/src/optimizers in tests/optim_ref.py
# (its top says what "equal" means). Then real processes: each optimizer
# trains the reference model for 150 steps and its loss falls (below).
. "$(dirname "$0")/lib.inc"
PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || { echo "skipped: no NumPy for $PY (Debian: python3-numpy)"; exit 77; }

$PY "$(dirname "$0")/../optim_ref.py" "$B" > "$T/ref.txt" 2>&1 || { cat "$T/ref.txt"; fail "a shard's optimizer differs from Keras's formulas"; }
ok "$(tail -1 "$T/ref.txt")"

# The same through live shards: every optimizer × (a constant rate, each
# schedule) × (no clipping, clipvalue, clipnorm, global_clipnorm), 100
# steps each on two fresh hetps-ps and one worker (tools/optim_check shard), in
# sync and in async at once, each mode on its own port block.
pick_ports
p_sync=$PORT
while [ "$PORT" = "$p_sync" ]; do pick_ports; done
$PY "$(dirname "$0")/../optim_ref.py" --shard sync "$B" "$BIN" "$p_sync" > "$T/sync.txt" 2>&1 &
sync_pid=$!
track $sync_pid
$PY "$(dirname "$0")/../optim_ref.py" --shard async "$B" "$BIN" "$PORT" > "$T/async.txt" 2>&1 ||
    { grep -v '^ok' "$T/async.txt" | head -20; fail "through live shards in async, an optimizer differs from Keras's formulas"; }
wait $sync_pid ||
    { grep -v '^ok' "$T/sync.txt" | head -20; fail "through live shards in sync, an optimizer differs from Keras's formulas"; }
ok "$(tail -1 "$T/sync.txt")"
ok "$(tail -1 "$T/async.txt")"

# Each optimizer trains the reference model (deploy/models/fashion_cnn.json,
# --optimizer replacing its Adam; with each of the three clip settings
# somewhere, clipnorm and global_clipnorm done by the worker) for 150
# steps of batch 64 on one shard:
# the mean loss of those steps (the progress line's, over every sample
# seen) must be below 2.0, where a model that learns nothing stays at
# ln 10 = 2.30; and the shard's store names the optimizer.
need_data
pick_ports
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] },
  "hetps": { "mode": "sync" } }
JSON
n=0
for o in '{"type": "sgd", "learning_rate": 0.05, "momentum": 0.9, "nesterov": true}' \
         '{"type": "rmsprop", "learning_rate": 0.001, "clipnorm": 1.0}' \
         '{"type": "adagrad", "learning_rate": 0.05}' \
         '{"type": "adam", "amsgrad": true, "global_clipnorm": 5.0}' \
         '{"type": "adamw", "exclude_from_weight_decay": ["bias"], "learning_rate": {"class_name": "CosineDecay", "config": {"initial_learning_rate": 0.0, "decay_steps": 1000, "warmup_target": 0.002, "warmup_steps": 20}}}' \
         '{"type": "nadam", "clipvalue": 1.0}' \
         '{"type": "adamax", "learning_rate": 0.002}' \
         '{"type": "ftrl", "learning_rate": 0.05}'; do
    n=$((n + 1))
    type=$(echo "$o" | sed 's/^{"type": "\([a-z]*\)".*/\1/')
    want=$type      # what the store calls it: sgd with momentum is "momentum"
    case "$o" in *'"sgd", "learning_rate": 0.05, "momentum"'*) want=momentum ;; esac
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:0 --data-dir "$T/d$n/ps-0" > "$T/ps$n.log" 2>&1 &
    ps_pid=$!
    track $ps_pid
    wait_for 10 "$BIN/hetps" status "$T/cluster.json" || { cat "$T/ps$n.log"; fail "$type: the shard did not start"; }
    logs=""     # the warm-up's rate, as the chief reports it (below)
    case "$o" in *CosineDecay*) logs="--logdir $T/logs" ;; esac
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --model deploy/models/fashion_cnn.json \
        --optimizer "$o" --max-steps 150 --no-eval --verbose 1 --progress-every 0.5 $logs > "$T/w$n.log" 2>&1 ||
        { tail -5 "$T/w$n.log"; fail "$type: the worker failed"; }
    loss=$(sed -n 's/.* - loss: \([0-9.]*\) - .*/\1/p' "$T/w$n.log" | tail -1)
    [ -n "$loss" ] || { cat "$T/w$n.log"; fail "$type: no loss printed"; }
    awk -v l="$loss" 'BEGIN { exit !(l < 2.0) }' || { tail -3 "$T/w$n.log"; fail "$type: mean loss $loss after 150 steps, not below 2.0"; }
    stop_within 10 $ps_pid
    "$BIN/hetps" inspect "$T/d$n/ps-0" > "$T/inspect$n.txt" 2>&1
    grep -q "optimizer $want (" "$T/inspect$n.txt" || { cat "$T/inspect$n.txt"; fail "$type: the store does not name it"; }
    echo "$type: mean loss $loss over 150 steps"
    [ -z "$logs" ] && continue
    # The rate of step 10 (9 updates before it) under the warm-up from 0
    # to 0.002 over 20 steps: 0.002 * 9 / 20 = 0.0009; after the warm-up,
    # step 121 is CosineDecay's 100th of 1000 steps from 0.002.
    ev=$(ls "$T"/logs/events.out.tfevents.* 2>/dev/null | head -1)
    [ -n "$ev" ] || fail "no TensorBoard events in $T/logs"
    $PY tests/integration/read_tfevents.py "$ev" > "$T/events.txt" || fail "the event file does not read back"
    lr10=$(sed -n 's/^step 10 .*batch\/learning_rate=\([0-9.e+-]*\).*/\1/p' "$T/events.txt")
    lr121=$(sed -n 's/^step 121 .*batch\/learning_rate=\([0-9.e+-]*\).*/\1/p' "$T/events.txt")
    awk -v a="$lr10" -v b="$lr121" 'BEGIN { c = 0.002 * 0.5 * (1 + cos(3.14159265358979 * 100 / 1000));
        exit !(a != "" && b != "" && (a - 0.0009) ^ 2 < 1e-16 && (b - c) ^ 2 < 1e-14) }' ||
        { grep '^step 1[02]1\? ' "$T/events.txt" | head -3; fail "batch/learning_rate: step 10 $lr10 (want 0.0009), step 121 $lr121"; }
    echo "$type: TensorBoard's batch/learning_rate follows the schedule: $lr10 at step 10, $lr121 at step 121"
done
ok "each optimizer trains the reference model: mean loss of 150 steps below 2.0"

# `hetps export --format keras` carries the optimizer's state: the Adam
# (amsgrad) store above as a .keras archive, whose model.weights.h5 holds
# Keras 3.3's optimizer.variables in its order (common/keras.h):
# iteration 150, learning_rate 0.001, then momentum and velocity of each
# variable in turn, then velocity_hat of each — told apart by their values
# (a velocity is never negative, a momentum is; velocity_hat >= velocity).
# Another optimizer than the store's is refused (the model's signature
# covers its optimizer; settings it does not cover, by both names).
adam='{"type": "adam", "amsgrad": true, "global_clipnorm": 5.0}'
"$BIN/hetps" export --format keras --model deploy/models/fashion_cnn.json --optimizer "$adam" \
    --data-dir "$T/d4" --out "$T/adam.keras" "$T/cluster.json" > "$T/export.txt" 2>&1 ||
    { cat "$T/export.txt"; fail "export --format keras of the Adam store"; }
grep -q "optimizer/vars: adam's 14 variables (iteration 150, 3 slot(s) a variable)" "$T/export.txt" ||
    { cat "$T/export.txt"; fail "the export does not say it wrote Adam's 14 variables"; }
$PY - "$T/adam.keras" <<'PY' || fail "the .keras archive's optimizer/vars are not Keras's"
import io, sys, zipfile
import h5py, numpy as np
z = zipfile.ZipFile(sys.argv[1])
f = h5py.File(io.BytesIO(z.read("model.weights.h5")), "r")
v = f["optimizer/vars"]
assert len(v) == 14, len(v)
assert v["0"][()] == 150 and v["0"].dtype == np.int64, v["0"][()]
assert abs(v["1"][()] - 0.001) < 1e-9 and v["1"].dtype == np.float32
shapes = [(3, 3, 1, 32), (32,), (5408, 10), (10,)]
for i, s in enumerate(shapes):
    m, vel, vh = v[str(2 + 2 * i)][()], v[str(3 + 2 * i)][()], v[str(10 + i)][()]
    assert m.shape == vel.shape == vh.shape == s, (i, m.shape, vel.shape, vh.shape)
    assert (m < 0).any() and (vel >= 0).all() and (vel > 0).any(), i
    assert (vh >= vel).all(), i
print("optimizer/vars: iteration, learning_rate, (momentum, velocity) x 4, velocity_hat x 4")
PY
"$BIN/hetps" export --format keras --model deploy/models/fashion_cnn.json \
    --data-dir "$T/d4" --out "$T/plain.keras" "$T/cluster.json" > "$T/export2.txt" 2>&1 &&
    fail "an export with another optimizer than the store's was not refused"
grep -q "signature .* has .*give the job's own model file\|trained with optimizer adam.*says adam" "$T/export2.txt" ||
    { cat "$T/export2.txt"; fail "the refusal does not say what differs"; }
ok "hetps export --format keras writes the Adam store's iteration, learning rate and slots in Keras's optimizer/vars order"
