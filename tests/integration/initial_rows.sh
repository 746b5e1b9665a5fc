#!/bin/sh
# initial_rows.sh — --initial-weights of a model with an embedding table
# (issue #40): a job's table rows as another job's first values.
#   1. job A (2 shards, 1 worker) trains a click-through model of the
#      categorical input (tests/tools/ctrgen's file) for 20 steps and is
#      exported as .npy (the table's NAME.ids.npy + NAME.rows.npy) and as
#      Keras's .weights.h5 (the table dense, 100,000 × 8);
#   2. job B starts from the .npy directory, job C from the .weights.h5,
#      each for one step at a learning rate of 1e-30 (a step that moves
#      no float32 value): B's export as .weights.h5 equals A's variable
#      for variable, bit for bit (A's trained rows stored, every other
#      row its initializer's value, the dense layers A's); B's shards
#      store A's rows (ids and values equal, hetps inspect counts them
#      and the step's new rows); C's shards store every one of the
#      100,000 rows (each row of the dense array), equal to A's;
#      B's Adagrad accumulators of A's rows that the step did not touch
#      are the initial 0.1 (slots start fresh);
#   2b. job D from the .npy directory, its shards killed as the chief's
#      last InitRows comes (HETPS_FAULT=init_rows:before_done): the
#      stores stay loading (hetps inspect says so, hetps export refuses
#      them); started again, the chief sends every row again: D's rows
#      are A's;
#   2c. a sync job of 2 workers from the .npy directory (worker:1 waits
#      while the chief loads): its rows are A's, byte for byte; a job from
#      A's .keras archive: every variable A's;
#   3. job B started again with the .weights.h5 as --initial-weights
#      (which would store all 100,000 rows): the chief says the job
#      already has its rows and sends none; the shards keep their rows
#      count, and train on;
#   4. refusals, each naming the file and the array: ids not below
#      input_dim, a repeated id, ids out of order, rows of float64, rows
#      of another width, a missing rows file, a .weights.h5 whose table
#      is of another width; nothing reaches the shards (their data
#      directories stay empty of variables).
. "$(dirname "$0")/lib.inc"
pick_ports
GEN=$B/tools/ctrgen
[ -x "$GEN" ] || fail "build $GEN first (make all)"
$GEN --seed 5 --train-rows 6000 --test-rows 1000 --vocab 1000 \
    "$T/train.tsv" "$T/test.tsv" > /dev/null || fail "ctrgen failed"
DATA="--data criteo:$T/train.tsv --validation-data criteo:$T/test.tsv --no-eval"

# model FILE OPTIMIZER DIM: the categorical input's embedding (10^5 rows of
# DIM), flatten, dense 16, a sigmoid unit.
model() {
    cat > "$1" <<JSON
{"name": "ctr_init", "seed": 7,
 "inputs": [{"name": "categorical", "shape": [26], "dtype": "int64"}],
 "layers": [{"type": "embedding", "name": "embedding", "input_dim": 100000,
             "output_dim": ${3:-8}, "inputs": "categorical"},
            {"type": "flatten"},
            {"type": "dense", "name": "hidden", "units": 16, "activation": "relu"},
            {"type": "dense", "name": "out", "units": 1,
             "activation": "sigmoid"}],
 "loss": "binary_crossentropy",
 "optimizer": $2,
 "batch_size": 128, "epochs": 1}
JSON
}
model "$T/a.json" '{"type": "adagrad", "learning_rate": 0.1}'
model "$T/still.json" '{"type": "adagrad", "learning_rate": 1e-30}'
model "$T/wide.json" '{"type": "adam", "learning_rate": 0.01}' 4
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))"] },
  "hetps": { "mode": "async" } }
JSON
# job NAME MODEL STEPS ARGS...: a job in $T/NAME (kept), its log $T/NAME.log.
job() {
    n=$1 m=$2 s=$3; shift 3
    # shellcheck disable=SC2086
    "$BIN/hetps" launch --data-dir "$T/$n" "${CLUSTER:-$T/cluster.json}" -- \
        --model "$m" $DATA --max-steps "$s" "$@" > "$T/$n.log" 2>&1 ||
        { tail -30 "$T/$n.log"; fail "job $n ($*)"; }
}
# stored NAME: the table's rows stored on job NAME's two shards.
stored() {
    _t=0
    for j in 0 1; do
        _n=$("$BIN/hetps" inspect "$T/$1/ps-$j" 2>&1 |
             sed -n 's/^  table 0: 100000 rows of 8, \([0-9]*\) stored here/\1/p')
        [ -n "$_n" ] || fail "hetps inspect $T/$1/ps-$j shows no table"
        _t=$((_t + _n))
    done
    echo "$_t"
}
export_npy() {
    "$BIN/hetps" export --data-dir "$T/$1" --out "$T/$1.npy" "$T/cluster.json" \
        > "$T/$1.export" 2>&1 || { cat "$T/$1.export"; fail "hetps export of $1"; }
}
export_h5() {
    "$BIN/hetps" export --data-dir "$T/$1" --format keras --model "$2" \
        --out "$T/$1.weights.h5" "$T/cluster.json" > "$T/$1.export" 2>&1 ||
        { cat "$T/$1.export"; fail "hetps export --format keras of $1"; }
}

# like_a NAME: job NAME's .weights.h5 holds A's every variable, bit for bit.
like_a() {
    /usr/bin/python3 - "$T/a.weights.h5" "$T/$1.weights.h5" <<'PY' || fail "job $1's variables are not job A's"
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], 'r'), h5py.File(sys.argv[2], 'r')
names = []
a['layers'].visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
assert any('embedding' in n for n in names), names
for n in names:
    x, y = a['layers'][n][()], b['layers'][n][()]
    assert x.shape == y.shape and np.array_equal(x, y), n
PY
}

# 1. Job A, exported both ways.
job a "$T/a.json" 20
export_npy a
export_h5 a "$T/a.json"
na=$(stored a)
[ "$na" -gt 0 ] || fail "job A stored no rows"
ok "job A: 20 steps, $na rows stored, exported as .npy and .weights.h5"
# The optimizer's state of a model with a table: in the .weights.h5 the
# table's accumulator is Keras's dense (100000, 8) optimizer variable (A's
# rows' accumulators, every other row's the initial 0.1), in Keras's order
# (iteration, learning_rate, one accumulator a variable); in the .npy
# export NAME.accumulator.npy and NAME.updates.npy beside NAME.ids.npy.
grep -q "optimizer/vars: adagrad's 7 variables (iteration 20, 1 slot(s) a variable; a table's dense, its rows never stored at the slot's initial value)" "$T/a.export" ||
    { cat "$T/a.export"; fail "the Keras export does not say it wrote Adagrad's 7 variables"; }
/usr/bin/python3 - "$T" <<'PY' || fail "job A's optimizer state is not where Keras and the .npy export keep it"
import sys, h5py, numpy as np
t = sys.argv[1]
v = h5py.File(t + '/a.weights.h5', 'r')['optimizer/vars']
assert len(v) == 7 and v['0'][()] == 20 and v['0'].dtype == np.int64, (len(v), v['0'][()])
assert abs(v['1'][()] - 0.1) < 1e-7
shapes = [(100000, 8), (208, 16), (16,), (16, 1), (1,)]
assert [v[str(2 + i)].shape for i in range(5)] == shapes, [v[str(2 + i)].shape for i in range(5)]
acc = v['2'][()]
e = t + '/a.npy/embedding/embeddings'
ids, rows = np.load(e + '.ids.npy'), np.load(e + '.rows.npy')
nacc, ups = np.load(e + '.accumulator.npy'), np.load(e + '.updates.npy')
assert nacc.shape == rows.shape and nacc.dtype == np.float32, nacc.shape
assert ups.shape == ids.shape and ups.dtype == np.uint64 and (ups >= 1).all() and ups.max() <= 20
assert np.array_equal(acc[ids.astype(np.int64)], nacc), 'the dense accumulator is not the rows\''
assert (nacc > np.float32(0.1)).any(axis=1).all(), 'a trained row with its accumulator at 0.1'
rest = np.ones(100000, bool); rest[ids.astype(np.int64)] = False
assert (acc[rest] == np.float32(0.1)).all(), 'a row never stored not at 0.1'
for i in range(3, 7):
    assert (v[str(i)][()] > np.float32(0.1)).any(), i
print('A: optimizer/vars iteration 20, 5 accumulators; the table\'s %d rows\' in .accumulator.npy, counts 1..%d' % (len(ids), ups.max()))
PY
ok "hetps export of a model with a table: Adagrad's accumulators in Keras's optimizer/vars (the table's dense, 0.1 where no row is stored) and as NAME.accumulator.npy + NAME.updates.npy"

# 2. Jobs B (from the .npy directory) and C (from the .weights.h5).
job b "$T/still.json" 1 --initial-weights "$T/a.npy"
grep -q "table embedding/embeddings: $na stored rows sent to 2 shard(s) loading" "$T/b.log" ||
    { grep -i initial "$T/b.log"; fail "job B: no line of the $na rows sent"; }
export_npy b
export_h5 b "$T/still.json"
nb=$(stored b)
[ "$nb" -ge "$na" ] && [ "$nb" -le $((na + 128 * 26)) ] ||
    fail "job B stores $nb rows: A's $na and at most the step's new ones"
like_a b
/usr/bin/python3 - "$T" <<'PY' || fail "job B's rows are not job A's"
import sys, numpy as np
t = sys.argv[1]
ai, ar = np.load(t + '/a.npy/embedding/embeddings.ids.npy'), np.load(t + '/a.npy/embedding/embeddings.rows.npy')
bi, br = np.load(t + '/b.npy/embedding/embeddings.ids.npy'), np.load(t + '/b.npy/embedding/embeddings.rows.npy')
at = np.searchsorted(bi, ai)
assert (at < len(bi)).all() and (bi[at] == ai).all(), 'B lacks rows of A'
assert np.array_equal(br[at], ar), "B's rows differ from A's"
print('B: %d of its %d rows A\'s' % (len(ai), len(bi)))
PY
ok "job B from A's .npy: every variable equal to A's (Keras export), A's $na rows stored among its $nb"
# --initial-weights takes values, not slots: B's rows its one step did not
# touch have their accumulator at the initial 0.1 and 0 updates.
/usr/bin/python3 - "$T" <<'PY' || fail "job B's loaded rows do not start with fresh slots"
import sys, numpy as np
e = sys.argv[1] + '/b.npy/embedding/embeddings'
acc, ups = np.load(e + '.accumulator.npy'), np.load(e + '.updates.npy')
assert set(np.unique(ups)) <= {0, 1}, np.unique(ups)
assert (ups == 0).sum() > 0 and (acc[ups == 0] == np.float32(0.1)).all()
assert (acc[ups == 1] > np.float32(0.1)).any(axis=1).all()
print('B: %d loaded rows untouched at accumulator 0.1, %d touched by its step' % ((ups == 0).sum(), (ups == 1).sum()))
PY
job c "$T/still.json" 1 --initial-weights "$T/a.weights.h5"
grep -q "table embedding/embeddings: 100000 stored rows sent to 2 shard(s) loading (every row of its dense array)" "$T/c.log" ||
    { grep -i initial "$T/c.log"; fail "job C: no line of the 100,000 rows sent"; }
nc=$(stored c)
[ "$nc" -eq 100000 ] || fail "job C stores $nc rows, not the dense array's 100000"
export_h5 c "$T/still.json"
export_npy c
like_a c
/usr/bin/python3 -c "
import sys, numpy as np
assert np.array_equal(np.load(sys.argv[1]), np.arange(100000, dtype=np.uint64))
" "$T/c.npy/embedding/embeddings.ids.npy" || fail "job C does not store every row"
ok "job C from A's .weights.h5: all 100000 rows stored, every variable equal to A's"

# 2b. Job D from the .npy directory, its shards killed when the chief's
# last word comes (HETPS_FAULT=init_rows:before_done): the stores stay
# loading — hetps inspect says so, hetps export refuses them — and the job
# started again sends every row again, then trains: D's rows are A's.
HETPS_FAULT=init_rows:before_done "$BIN/hetps" launch --data-dir "$T/d" "$T/cluster.json" -- \
    --model "$T/still.json" $DATA --max-steps 1 --initial-weights "$T/a.npy" > "$T/d.log" 2>&1 &&
    fail "job D ran through its fault point"
grep -q "init_rows:before_done" "$T/d.log" || { tail "$T/d.log"; fail "job D: no shard died at init_rows:before_done"; }
"$BIN/hetps" inspect "$T/d/ps-0" > "$T/d.inspect" 2>&1
grep -q "tables' initial rows: loading" "$T/d.inspect" || { cat "$T/d.inspect"; fail "hetps inspect: ps-0 not loading"; }
"$BIN/hetps" export --data-dir "$T/d" --out "$T/d.npy" "$T/cluster.json" > "$T/d.export" 2>&1 &&
    fail "hetps export of stores still loading"
grep -q "is still loading its tables' initial rows" "$T/d.export" || { cat "$T/d.export"; fail "hetps export: no refusal of the loading store"; }
rm -rf "$T/d.npy"
job d "$T/still.json" 1 --initial-weights "$T/a.npy"
grep -q "table embedding/embeddings: $na stored rows sent to 2 shard(s) loading" "$T/d.log" ||
    { grep -i initial "$T/d.log"; fail "job D started again: its rows not sent again"; }
export_npy d
/usr/bin/python3 - "$T" <<'PY' || fail "job D's rows are not job A's"
import sys, numpy as np
t = sys.argv[1]
e = '/embedding/embeddings'
ai, ar = np.load(t + '/a.npy' + e + '.ids.npy'), np.load(t + '/a.npy' + e + '.rows.npy')
di, dr = np.load(t + '/d.npy' + e + '.ids.npy'), np.load(t + '/d.npy' + e + '.rows.npy')
assert np.array_equal(ai, di) and np.array_equal(ar, dr)
PY
ok "job D: shards killed at the loading's end stay loading (inspect says so, export refuses them); started again, every row sent again and A's"

# 2c. The same rows into a sync job of 2 workers (worker:1 waits while the
# chief loads), and from the .keras archive of A.
cat > "$T/sync.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))", "127.0.0.1:$((PORT + 3))"] },
  "hetps": { "mode": "sync" } }
JSON
CLUSTER=$T/sync.json
job s "$T/still.json" 2 --initial-weights "$T/a.npy"
unset CLUSTER
grep -q "table embedding/embeddings: $na stored rows sent" "$T/s.log" ||
    { grep -i initial "$T/s.log"; fail "sync job: no line of the rows sent"; }
export_npy s
cmp -s "$T/a.npy/embedding/embeddings.ids.npy" "$T/s.npy/embedding/embeddings.ids.npy" &&
    cmp -s "$T/a.npy/embedding/embeddings.rows.npy" "$T/s.npy/embedding/embeddings.rows.npy" ||
    fail "the sync job's rows are not A's"
"$BIN/hetps" export --data-dir "$T/a" --format keras --model "$T/a.json" \
    --out "$T/a.keras" "$T/cluster.json" > "$T/a.export" 2>&1 || { cat "$T/a.export"; fail "export of A as .keras"; }
job k "$T/still.json" 1 --initial-weights "$T/a.keras"
[ "$(stored k)" -eq 100000 ] || fail "the job from A's .keras stores $(stored k) rows, not 100000"
export_h5 k "$T/still.json"
like_a k
ok "a sync job of 2 workers from A's .npy stores A's rows as they are; a job from A's .keras archive equals A"

# 3. B again, from the .weights.h5 this time: its shards hold their rows
# (and trained a step), so nothing is sent and its rows stay.
job b "$T/still.json" 3 --initial-weights "$T/a.weights.h5"
grep -q "the job already has its tables' rows (loaded before, or trained): kept, none sent" "$T/b.log" ||
    { grep -i initial "$T/b.log"; fail "job B started again: no line of its rows kept"; }
nb2=$(stored b)
[ "$nb2" -ge "$nb" ] && [ "$nb2" -lt 100000 ] ||
    fail "job B started again stores $nb2 rows (before $nb): overwritten from the .weights.h5"
ok "job B started again with another --initial-weights: rows kept ($nb → $nb2 after 3 more steps), none sent"

# 4. Refusals, before any shard is touched.
refused() {
    want=$1; shift
    rm -rf "$T/refused"
    # shellcheck disable=SC2086
    "$BIN/hetps" launch --data-dir "$T/refused" "$T/cluster.json" -- \
        --model "$T/a.json" $DATA --max-steps 1 --initial-weights "$@" > "$T/refused.txt" 2>&1 &&
        fail "trained from $*"
    grep -qF -- "$want" "$T/refused.txt" || { tail -20 "$T/refused.txt"; fail "no '$want' for $*"; }
    for j in 0 1; do
        "$BIN/hetps" inspect "$T/refused/ps-$j" 2>/dev/null | grep -q "table 0" &&
            fail "$*: the shards were created all the same"
    done
    :
}
bad() {   # bad NAME PYTHON: a copy of A's .npy directory, changed
    rm -rf "$T/$1"
    cp -r "$T/a.npy" "$T/$1"
    /usr/bin/python3 -c "
import numpy as np, sys
d = sys.argv[1] + '/embedding/embeddings'
ids = np.load(d + '.ids.npy'); rows = np.load(d + '.rows.npy')
$2
" "$T/$1" || fail "making $1"
}
E=embedding/embeddings
bad big "ids[-1] = 100000; np.save(d + '.ids.npy', ids)"
refused "$T/big/$E.ids.npy: id 100000 at position $((na - 1)) is not below table $E's input_dim 100000" "$T/big"
bad twice "ids[1] = ids[0]; np.save(d + '.ids.npy', ids)"
refused "$T/twice/$E.ids.npy: id" "$T/twice"
grep -q "at position 1 is repeated" "$T/refused.txt" || fail "a repeated id not named"
bad order "ids[0], ids[1] = ids[1], ids[0]; np.save(d + '.ids.npy', ids)"
refused "at position 1 is below the one before" "$T/order"
bad f64 "np.save(d + '.rows.npy', rows.astype(np.float64))"
refused "$T/f64/$E.rows.npy: array of dtype <f8; the rows of table $E are float32" "$T/f64"
bad narrow "np.save(d + '.rows.npy', rows[:, :4].copy())"
refused "$T/narrow/$E.rows.npy has shape ($na, 4); the rows of table $E are (n, 8)" "$T/narrow"
bad gone "import os; os.remove(d + '.rows.npy')"
refused "$T/gone/$E.rows.npy: No such file or directory (the rows of table $E" "$T/gone"
bad short "np.save(d + '.rows.npy', rows[:-1].copy())"
refused "holds $((na - 1)) rows but $T/short/$E.ids.npy $na ids: one row per id" "$T/short"
"$BIN/hetps" launch --data-dir "$T/w" "$T/cluster.json" -- --model "$T/wide.json" $DATA \
    --max-steps 1 > "$T/w.log" 2>&1 || { tail "$T/w.log"; fail "the 4-wide job"; }
export_h5 w "$T/wide.json"
# Lazy Adam: moments as Keras's dense variables, interleaved; the log says
# the per-row step counts are not in the file.
grep -q "optimizer/vars: adam's 12 variables (iteration 1, 2 slot(s) a variable; a table's dense" "$T/w.export" &&
    grep -q "a table's rows were updated lazily, each at its own step count; Keras's adam corrects every row's bias by the one iteration count (1, the shards' step)" "$T/w.export" ||
    { cat "$T/w.export"; fail "the Adam export does not say what it wrote"; }
/usr/bin/python3 - "$T/w.weights.h5" <<'PY' || fail "the Adam export's optimizer/vars are not Keras's"
import sys, h5py, numpy as np
v = h5py.File(sys.argv[1], 'r')['optimizer/vars']
assert len(v) == 12 and v['0'][()] == 1
assert v['2'].shape == v['3'].shape == (100000, 4), (v['2'].shape, v['3'].shape)
m, vel = v['2'][()], v['3'][()]
assert (vel >= 0).all() and (vel > 0).any() and (m != 0).any() and (m == 0).sum() > 0
assert v['4'].shape == v['5'].shape == (104, 16)
PY
ok "lazy Adam's export: momentum and velocity of the table as Keras's dense variables, interleaved; its per-row counts said to be left out"
refused "$T/w.weights.h5" "$T/w.weights.h5"
grep -i "embedding" "$T/refused.txt" | grep -q "shape" ||
    { tail -5 "$T/refused.txt"; fail "a table of width 4 for 8: no message naming its shape"; }
ok "refused by file and array: an id ≥ input_dim, a repeated id, ids out of order, float64 rows, rows of 4 for 8, no rows file, a row short, a .weights.h5 table of width 4; no shard created"
