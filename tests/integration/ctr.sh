#!/bin/sh
# ctr.sh — the click-through model trained end to end (issue #40) on a
# file from tests/tools/ctrgen (20,000 training and 5,000 test rows,
# vocabularies up to 1,000, Zipf ids), with real processes on loopback:
#   1. refusals, each read by message: --data criteo: without a
#      validation file, a model with
#      no input of int64 ids for the file's categorical fields, a
#      malformed line (the file and the line named);
#   2. 2 shards and 2 async workers train one epoch of a model of the
#      categorical input alone (embedding → flatten → dense), so all it
#      learns comes through the table: the test AUC is clearly above 0.5
#      and within 0.16 of the file's Bayes AUC (0.807; PyTorch's peer
#      reaches 0.64 with the numeric fields in one epoch of this file);
#      the chief's TensorBoard events hold every step's unique rows and
#      its sparse bytes pulled and pushed (40 a row each way);
#      `hetps inspect` shows the table's rows on each shard, adding up to
#      the distinct ids of the training file (tools/ctrids), every one
#      pushed, none pulled only; TensorBoard's epoch events each shard's
#      rows; a longer run's live page (curl) each shard's rows and the
#      sparse charts;
#      `hetps eval --cluster` of the live shards on criteo:test.tsv gives
#      the chief's AUC to the digit, storing no row; --weights of the
#      .npy directory (the table's stored rows alone) is refused naming
#      the tables; `hetps predict --cluster --images criteo:test.tsv`
#      prints a probability a line whose rank AUC is eval's;
#      `hetps export --format keras` writes the table dense
#      (100,000 × 8, rows never trained at their initial values) and
#      `hetps predict --weights` of that file prints exactly the live
#      shards' lines (the test file's ids never trained among them);
#      (--initial-weights of such files: initial_rows.sh);
#      the same from libsvm files of the same ids (--data libsvm:), and
#      in mode ssp (staleness 2) and in mode sync (the shards hold each
#      worker's rows push for the step, summed by row at its commit): AUC
#      above 0.62 too;
#   3. the two-input model (numeric and categorical, the rows averaged by
#      GlobalAveragePooling1D) trains one epoch too: AUC above 0.6 (its
#      log loss, printed beside the constant predictor's, is within 0.01
#      of it after this one short epoch: not checked).
. "$(dirname "$0")/lib.inc"
pick_ports
GEN=$B/tools/ctrgen
IDS=$B/tools/ctrids
[ -x "$GEN" ] && [ -x "$IDS" ] || fail "build $GEN and $IDS first (make all)"
$GEN --seed 3 --train-rows 20000 --test-rows 5000 --vocab 1000 \
    "$T/train.tsv" "$T/test.tsv" > /dev/null || fail "ctrgen failed"
bayes=$(cat "$T/test.tsv.bayes_auc")

# model FILE NAME INPUTS LAYERS LR BATCH: an embedding of the categorical
# input, LAYERS, a sigmoid unit; Adagrad at LR, one epoch of BATCH.
model() {
    cat > "$1" <<JSON
{"name": "$2", "seed": 7, "inputs": [$3],
 "layers": [{"type": "embedding", "name": "embedding", "input_dim": 100000,
             "output_dim": 8, "inputs": "categorical"}, $4,
            {"type": "dense", "name": "out", "units": 1,
             "activation": "sigmoid"}],
 "loss": "binary_crossentropy",
 "optimizer": {"type": "adagrad", "learning_rate": $5},
 "batch_size": $6, "epochs": 1, "metrics": ["AUC"]}
JSON
}
IDS_IN='{"name": "categorical", "shape": [26], "dtype": "int64"}'
model "$T/cat.json" ctr_cat "$IDS_IN" '{"type": "flatten"},
    {"type": "dense", "units": 32, "activation": "relu"}' 0.1 128
model "$T/two.json" ctr "{\"name\": \"numeric\", \"shape\": [13]}, $IDS_IN" \
    '{"type": "GlobalAveragePooling1D", "name": "pooled"},
    {"type": "concatenate", "inputs": ["pooled", "numeric"]},
    {"type": "dense", "units": 64, "activation": "relu"},
    {"type": "dense", "units": 32, "activation": "relu"}' 0.05 256
cat > "$T/floats.json" <<'JSON'
{"name": "no_ids", "inputs": [{"name": "x", "shape": [26]}],
 "layers": [{"type": "dense", "units": 1, "activation": "sigmoid"}],
 "loss": "binary_crossentropy", "optimizer": "sgd"}
JSON
cluster() {
    cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))", "127.0.0.1:$((PORT + 3))"] },
  "hetps": { "mode": "$1" } }
JSON
}
# train NAME MODEL: a fresh job in $T/NAME on $T/cluster.json, its log
# $T/NAME.log.
train() {
    # shellcheck disable=SC2086
    "$BIN/hetps" launch --data-dir "$T/$1" "$T/cluster.json" -- \
        --model "$2" $DATA > "$T/$1.log" 2>&1 ||
        { tail -30 "$T/$1.log"; fail "training $2 ($1)"; }
}
DATA="--data criteo:$T/train.tsv --validation-data criteo:$T/test.tsv"

# 1. Refusals, read by message.
refused() {
    want=$1; shift
    "$BIN/hetps" launch --data-dir "$T/refused" "$T/cluster.json" -- "$@" \
        > "$T/refused.txt" 2>&1 && fail "trained with $*"
    grep -qF -- "$want" "$T/refused.txt" ||
        { tail -20 "$T/refused.txt"; fail "no '$want' for $*"; }
    rm -rf "$T/refused"
}
cluster async
refused "--data criteo:$T/train.tsv is a click-through file: give --validation-data criteo:TEST.tsv (or libsvm:FILE), or --no-eval" \
    --model "$T/cat.json" --data "criteo:$T/train.tsv"
# shellcheck disable=SC2086
refused "$T/train.tsv holds 26 categorical ids a line; model no_ids has no input of 26 int64 ids to take them (name it \"categorical\")" \
    --model "$T/floats.json" $DATA
{ head -50 "$T/train.tsv"; printf '0\t1\t2\n'; } > "$T/bad.tsv"
refused "$T/bad.tsv:51: 3 tab-separated field(s); a Criteo line has 40" \
    --model "$T/cat.json" --data "criteo:$T/bad.tsv" --validation-data "criteo:$T/test.tsv"
ok "no validation file, no ids input and a malformed line refused by name"

# final LOG: the chief's final val_auc and val_loss into $auc and $ll.
final() {
    auc=$(sed -n 's/.*\[worker:0\] Final weights.*val_auc: \([0-9.]*\).*/\1/p' "$1")
    ll=$(sed -n 's/.*\[worker:0\] Final weights.*val_loss: \([0-9.]*\).*/\1/p' "$1")
    [ -n "$auc" ] && [ -n "$ll" ] || { tail -20 "$1"; fail "no final val_auc and val_loss in $1"; }
}

# 2. The categorical input alone: what it learns comes through the table.
train cat "$T/cat.json"
grep 'Epoch' "$T/cat.log"
final "$T/cat.log"
awk -v a="$auc" -v b="$bayes" 'BEGIN { exit !(a > 0.62 && b - a < 0.16) }' ||
    fail "categorical alone, 1 epoch, 2 async workers: test AUC $auc, Bayes $bayes"
ok "categorical input alone, 2 ps + 2 async workers, 1 epoch: test AUC $auc (Bayes $bayes)"
# The chief's TensorBoard events: each step's unique rows (at most the
# batch's 128 × 26 ids) and its sparse bytes, an id's 8 and a row's 8
# floats a row each way.
ev=$(ls "$T"/cat/logs/events.out.tfevents.* 2>/dev/null | head -1)
[ -n "$ev" ] || fail "no event file in $T/cat/logs"
/usr/bin/python3 tests/integration/read_tfevents.py "$ev" > "$T/events.txt" ||
    fail "the event file does not read back"
sparse=$(awk '/batch\/sparse_unique_rows=/ {
        for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] + 0 }
        r = v["batch/sparse_unique_rows"]; n++; sum += r
        if (r < 1 || r > 128 * 26 || v["batch/sparse_bytes_pulled"] != 40 * r ||
            v["batch/sparse_bytes_pushed"] != 40 * r) { print "bad: " $0; exit 1 } }
    END { if (n) printf "%d %.0f", n, sum / n }' "$T/events.txt") ||
    fail "a step's sparse figures are off: $sparse"
steps=$(grep -c '^step [0-9]* batch/loss=' "$T/events.txt")
[ -n "$sparse" ] && [ "${sparse% *}" -eq "$steps" ] ||
    fail "$steps step events, ${sparse% *} with sparse figures"
ok "TensorBoard: all $steps chief steps with batch/sparse_unique_rows (${sparse#* } a step on average) and their bytes pulled and pushed, 40 a row"
distinct=$("$IDS" --input-dim 100000 "$T/train.tsv" |
           awk '{ for (i = 15; i <= 40; i++) print $i }' | sort -u | wc -l)
total=0
for j in 0 1; do
    "$BIN/hetps" inspect "$T/cat/ps-$j" > "$T/inspect$j.txt" 2>&1 ||
        { cat "$T/inspect$j.txt"; fail "hetps inspect ps-$j"; }
    n=$(sed -n 's/^  table 0: 100000 rows of 8, \([0-9]*\) stored here/\1/p' "$T/inspect$j.txt")
    [ -n "$n" ] && [ "$n" -gt 0 ] || { cat "$T/inspect$j.txt"; fail "ps-$j: no rows of the table"; }
    echo "ps-$j: $n rows of the table"
    total=$((total + n))
done
[ "$total" -eq "$distinct" ] ||
    fail "hetps inspect counts $total rows, the training file has $distinct distinct ids"
ok "hetps inspect: the table's rows on the 2 shards add up to the $distinct distinct ids trained"
# The epoch's rows on each shard in TensorBoard (the shards' status at the
# chief's epoch end, the other worker possibly still pushing).
for j in 0 1; do
    r=$(sed -n "s/.* ps_$j\/table_0_rows=\([0-9.e+]*\).*/\1/p" "$T/events.txt")
    awk -v r="$r" -v d="$distinct" 'BEGIN { exit !(r + 0 > 0 && r + 0 <= d) }' ||
        { grep '^step 1 epoch' "$T/events.txt"; fail "TensorBoard ps_$j/table_0_rows '$r', want 1..$distinct"; }
done
ok "TensorBoard: epoch ps_0/table_0_rows and ps_1/table_0_rows, the rows each shard stored"
# The live page of a longer run: its sparse charts and each shard's rows.
cat > "$T/cluster-page.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))", "127.0.0.1:$((PORT + 3))"] },
  "hetps": { "mode": "async", "metrics_port": $((PORT + 4)) } }
JSON
"$BIN/hetps" launch --data-dir "$T/page" "$T/cluster-page.json" -- --model "$T/cat.json" \
    $DATA --epochs 40 > "$T/page.log" 2>&1 &
LPID=$!
track $LPID
epoch1() { grep -q '^\[worker:0\] Epoch 1/40 - .*val_auc' "$T/page.log"; }
wait_for 60 epoch1 || { tail -20 "$T/page.log"; fail "no first epoch of the page's run within 60 s"; }
curl -sf "http://127.0.0.1:$((PORT + 6))/" > "$T/page.html" || fail "no live page on worker:0's metrics port"
kill -TERM $LPID
wait_for 30 sh -c "! kill -0 $LPID" || fail "the page's run did not stop on SIGTERM"
grep -Eq '<p id="rows">row-sparse tables.* rows stored: ps:0 variable 0: [1-9][0-9]*, ps:1 variable 0: [1-9][0-9]*</p>' "$T/page.html" ||
    { grep -o '<h2>Tasks.*</table>' "$T/page.html"; fail "the page does not show each shard's rows of the table"; }
grep -q 'sparse rows a step' "$T/page.html" && grep -q '>KiB pushed</text>' "$T/page.html" ||
    fail "the page has no sparse charts"
ok "live page: each shard's rows of the table, the steps' unique rows and sparse KiB charts"
# `hetps eval` of the live shards on the test file: their rows pulled
# batch by batch (none stored), the chief's final AUC to the digit.
want=$auc
for j in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$j \
        --data-dir "$T/cat/ps-$j" >> "$T/eval-ps-$j.log" 2>&1 &
    eval "ps$j=\$!"
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "the shards did not start again"
"$BIN/hetps" eval --model "$T/cat.json" --cluster "$T/cluster.json" \
    --data "criteo:$T/test.tsv" > "$T/eval.txt" 2>&1 || { cat "$T/eval.txt"; fail "hetps eval --cluster"; }
eauc=$(sed -n 's/.* - auc: \([0-9.]*\).*/\1/p' "$T/eval.txt")
[ "$eauc" = "$want" ] || { cat "$T/eval.txt"; fail "hetps eval: AUC '$eauc', the chief said $want"; }
"$BIN/hetps" eval --model "$T/cat.json" --weights "$T/cat" \
    --data "criteo:$T/test.tsv" > "$T/evalw.txt" 2>&1 && fail "hetps eval --weights of a model with tables"
grep -qF "model ctr_cat has embedding tables (layer embedding): a directory of .npy files holds their stored rows alone; give Keras's weights file" "$T/evalw.txt" ||
    { cat "$T/evalw.txt"; fail "hetps eval --weights DIR: no refusal naming the tables"; }
# `hetps predict` of the live shards on the test file: a line a line of
# the file, the probability of a click last; their rank AUC is eval's.
"$BIN/hetps" predict --model "$T/cat.json" --cluster "$T/cluster.json" \
    --images "criteo:$T/test.tsv" > "$T/pred.txt" 2> "$T/pred.err" ||
    { cat "$T/pred.err"; fail "hetps predict --cluster --images criteo:"; }
[ "$(wc -l < "$T/pred.txt")" -eq "$(wc -l < "$T/test.tsv")" ] ||
    fail "hetps predict: $(wc -l < "$T/pred.txt") lines for $(wc -l < "$T/test.tsv") samples"
# rank_auc: lines `LABEL INDEX CLASS P` → the exact ROC AUC of P, ties 1/2.
rank_auc() {
    sort -k4,4g | awk '
        function flush() { for (j = 0; j < nt; j++) if (tl[j]) sp += (r0 + r0 + nt - 1) / 2; r0 += nt; nt = 0 }
        BEGIN { r0 = 1 }
        { if (nt && $4 != last) flush(); tl[nt++] = $1; last = $4; np += $1 == 1; nn += $1 == 0 }
        END { flush(); printf "%.4f", (sp - np * (np + 1) / 2) / (np * nn) }'
}
pauc=$(cut -f1 "$T/test.tsv" | paste -d' ' - "$T/pred.txt" | rank_auc)
awk -v a="$pauc" -v b="$eauc" 'BEGIN { d = a - b; exit !(d < 0.0003 && d > -0.0003) }' ||
    { head -3 "$T/pred.txt"; fail "hetps predict: the AUC of its probabilities is $pauc, hetps eval's $eauc"; }
ok "hetps predict --cluster --images criteo:test.tsv: one probability a line, their AUC $pauc (eval's $eauc)"
# The table as Keras's weights file (input_dim 100,000 × 8: dense, the
# rows never trained their initial values); read back by hetps predict
# --weights, every line the live shards' (the test file's ids never
# trained included).
"$BIN/hetps" export --cluster "$T/cluster.json" --data-dir "$T/cat" --format keras \
    --model "$T/cat.json" --out "$T/cat.weights.h5" > "$T/export.txt" 2>&1 ||
    { cat "$T/export.txt"; fail "hetps export --format keras of a model with a table"; }
grep -qF "layers/embedding/vars/0 (embedding/embeddings) float32 (100000, 8): a table's $distinct stored rows" "$T/export.txt" ||
    { cat "$T/export.txt"; fail "hetps export --format keras: no line of the table's $distinct rows"; }
"$BIN/hetps" predict --model "$T/cat.json" --weights "$T/cat.weights.h5" \
    --images "criteo:$T/test.tsv" > "$T/predw.txt" 2> "$T/pred.err" ||
    { cat "$T/pred.err"; fail "hetps predict --weights cat.weights.h5"; }
cmp -s "$T/pred.txt" "$T/predw.txt" ||
    { diff "$T/pred.txt" "$T/predw.txt" | head; fail "hetps predict: the exported weights predict otherwise than the live shards"; }
# The same as a .keras archive (its model.weights.h5 the same layout).
"$BIN/hetps" export --cluster "$T/cluster.json" --data-dir "$T/cat" --format keras \
    --model "$T/cat.json" --out "$T/cat.keras" > "$T/export.txt" 2>&1 ||
    { cat "$T/export.txt"; fail "hetps export --format keras of a model with a table, as .keras"; }
"$BIN/hetps" predict --model "$T/cat.json" --weights "$T/cat.keras" \
    --images "criteo:$T/test.tsv" > "$T/predk.txt" 2> "$T/pred.err" ||
    { cat "$T/pred.err"; fail "hetps predict --weights cat.keras"; }
cmp -s "$T/pred.txt" "$T/predk.txt" || fail "hetps predict: the .keras archive predicts otherwise than the live shards"
unseen=$({ "$IDS" --input-dim 100000 "$T/train.tsv" | awk '{ for (i = 15; i <= 40; i++) print "t", $i }'
           "$IDS" --input-dim 100000 "$T/test.tsv" | awk '{ for (i = 15; i <= 40; i++) print "v", $i }'; } |
         awk '$1 == "t" { seen[$2] = 1; next } !($2 in seen) && !($2 in u) { u[$2] = 1; n++ } END { print n + 0 }')
[ "$unseen" -gt 0 ] || fail "the test file has no id the training never touched: the check of initial rows bites nothing"
ok "hetps export --format keras: the table dense in cat.weights.h5 and cat.keras, hetps predict --weights of each equals the live shards' on all 5,000 lines ($unseen ids never trained among them)"
stop_within 30 $ps0 $ps1
for j in 0 1; do
    n=$("$BIN/hetps" inspect "$T/cat/ps-$j" 2>/dev/null |
        sed -n 's/^  table 0: 100000 rows of 8, \([0-9]*\) stored here/\1/p')
    total=$((total - n))
done
[ "$total" -eq 0 ] || fail "hetps eval stored rows: $total fewer than before"
ok "hetps eval --cluster --data criteo:test.tsv: AUC $eauc, the chief's, no row stored; --weights DIR refused naming the tables"
# The same ids as libsvm lines (`label id:1 …`, the reader's ids of the
# Criteo file): --data libsvm: feeds the ids input alike.
for f in train test; do
    "$IDS" --input-dim 100000 "$T/$f.tsv" |
        awk '{ printf "%s", $1; for (i = 15; i <= 40; i++) printf " %s:1", $i; print "" }' > "$T/$f.svm"
done
# shellcheck disable=SC2086
"$BIN/hetps" launch --data-dir "$T/svm" "$T/cluster.json" -- --model "$T/cat.json" \
    --data "libsvm:$T/train.svm" --validation-data "libsvm:$T/test.svm" > "$T/svm.log" 2>&1 ||
    { tail -30 "$T/svm.log"; fail "training on libsvm files"; }
final "$T/svm.log"
awk -v a="$auc" 'BEGIN { exit !(a > 0.62) }' || fail "libsvm, 1 epoch: test AUC $auc"
ok "--data libsvm:train.svm (the same ids): test AUC $auc"
cluster ssp:2
train ssp "$T/cat.json"
final "$T/ssp.log"
awk -v a="$auc" 'BEGIN { exit !(a > 0.62) }' ||
    fail "categorical alone, 1 epoch, 2 ssp workers: test AUC $auc"
ok "the same in mode ssp (staleness 2): test AUC $auc"
cluster sync
train sync "$T/cat.json"
final "$T/sync.log"
awk -v a="$auc" 'BEGIN { exit !(a > 0.62) }' ||
    fail "categorical alone, 1 epoch, 2 sync workers: test AUC $auc"
ok "the same in mode sync (each step's rows summed across the workers): test AUC $auc"
cluster async

# 3. Numeric and categorical inputs, GlobalAveragePooling1D over the rows.
train two "$T/two.json"
final "$T/two.log"
# The constant predictor's log loss at the test file's click rate p.
base=$(awk -F'\t' '{ n++; c += $1 } END { p = c / n; printf "%.4f", -(p * log(p) + (1 - p) * log(1 - p)) }' "$T/test.tsv")
awk -v a="$auc" 'BEGIN { exit !(a > 0.6) }' ||
    fail "numeric and categorical, 1 epoch: test AUC $auc, log loss $ll (constant predictor $base)"
ok "numeric and categorical inputs, 1 epoch: test AUC $auc, log loss $ll (constant predictor $base)"
