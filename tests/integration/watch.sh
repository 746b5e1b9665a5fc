#!/bin/sh
# watch.sh — watching a run from outside: a 2-epoch synchronous job under
# hetps launch with hetps.metrics_port set. While it trains, every task's
# GET /metrics passes `promtool check metrics` and holds the named series
# with plausible values. After it, the chief's TensorBoard event file reads
# back with an independent reader (read_tfevents.py: framing, both masked
# CRC32Cs, the Event fields) and training.csv has the same epochs;
# `hetps plot` draws them into a PNG; the launcher's last line says where
# they are.
. "$(dirname "$0")/lib.inc"
need_data
command -v promtool >/dev/null || { echo "skipped: no promtool (Debian package prometheus)"; exit 77; }
/usr/bin/python3 -c 'import crc32c, google.protobuf' 2>/dev/null ||
    { echo "skipped: no python3-crc32c / python3-protobuf"; exit 77; }
pick_ports
MODEL=deploy/models/fashion_cnn.json
MP=$((PORT + 5))            # ps:0 $MP, ps:1 $MP+1, worker:0 $MP+2, worker:1 $MP+3
cluster2 "{ \"mode\": \"sync\", \"metrics_port\": $MP }"

# Equal shares (--balance off): with balancing, a loaded machine can make
# the shards seat the chief out of steps (its share would not pay), and
# the counts below assume both workers compute every step.
"$BIN/hetps" launch --ps-arg --balance=off --data-dir "$T/data" \
    "$T/cluster.json" -- --model $MODEL --epochs 2 > "$T/launch.log" 2>&1 &
LPID=$!
track $LPID
get() { /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }
epoch1() { grep -q '^\[worker:0\] Epoch 1/2 - .*val_accuracy' "$T/launch.log"; }
wait_for 120 epoch1 || { tail -20 "$T/launch.log"; fail "no first epoch within 120 s"; }
for t in "ps:0 $MP" "ps:1 $((MP + 1))" "worker:0 $((MP + 2))" "worker:1 $((MP + 3))"; do
    set -- $t
    get "http://127.0.0.1:$2/metrics" > "$T/m-$1.txt" || fail "$1: no /metrics on port $2"
    promtool check metrics < "$T/m-$1.txt" > "$T/promtool-$1.txt" 2>&1 || { cat "$T/promtool-$1.txt"; fail "$1: promtool check metrics"; }
done
# value NAME{LABELS} FILE: the sample's value
value() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && a + 0 >= b + 0) }'; }
M0="$T/m-ps:0.txt" W0="$T/m-worker:0.txt" W1="$T/m-worker:1.txt"
at_least "$(value 'hetps_shard_version{shard="0"}' "$M0")" 400 || fail "ps:0 version below one epoch (469 steps)"
at_least "$(value 'hetps_requests_total{shard="0",type="push"}' "$M0")" 800 || fail "ps:0 push count"
at_least "$(value 'hetps_request_seconds_count{shard="0",type="push"}' "$M0")" 800 || fail "ps:0 push latency histogram"
at_least "$(value 'hetps_received_bytes_total{shard="0"}' "$M0")" 10000000 || fail "ps:0 bytes in"
at_least "$(value 'hetps_commit_seconds_count{shard="1"}' "$T/m-ps:1.txt")" 400 || fail "ps:1 commits"
at_least "$(value 'hetps_members{shard="0",state="joined"}' "$M0")" 2 || fail "ps:0 does not count 2 joined workers"
at_least "$(value 'hetps_worker_samples_per_second{shard="0",worker="1"}' "$M0")" 100 || fail "worker:1 speed on ps:0"
at_least "$(value 'hetps_worker_batch_share_samples{shard="0",worker="0"}' "$M0")" 1 || fail "worker:0 share on ps:0"
at_least "$(value 'hetps_store_bytes{shard="0"}' "$M0")" 100000 || fail "ps:0 store size"
grep -q '^hetps_push_staleness_count{shard="0"}' "$M0" || fail "no staleness histogram"
[ -n "$(value 'hetps_listener_restarts_total{shard="0"}' "$M0")" ] || fail "no listener restart counter"
at_least "$(value 'hetps_steps_total{worker="0"}' "$W0")" 400 || fail "worker:0 steps"
at_least "$(value 'hetps_samples_total{worker="1"}' "$W1")" 10000 || fail "worker:1 samples"
at_least "$(value 'hetps_push_pull_seconds_count{worker="0"}' "$W0")" 400 || fail "worker:0 push-pull histogram"
at_least "$(value 'hetps_val_accuracy{worker="0"}' "$W0")" 0.8 || fail "worker:0 val_accuracy gauge"
ok "/metrics of 4 tasks pass promtool; steps, latency, bytes, commits, members, speeds, shares, store size plausible; listener restarts counted"

wait_for 120 sh -c "! kill -0 $LPID" || fail "the job did not finish"
wait $LPID || { tail -20 "$T/launch.log"; fail "hetps launch failed"; }
PIDS=""
tail -1 "$T/launch.log" | grep -q "^hetps launch: done. Summaries: $T/data/logs (TensorBoard: tensorboard --logdir $T/data/logs; training.csv); plot: hetps plot $T/data/logs -o $T/data/logs/run.png$" ||
    { tail -2 "$T/launch.log"; fail "the last line does not say where the summaries are"; }
ev=$(ls "$T"/data/logs/events.out.tfevents.* 2>/dev/null | head -1)
[ -n "$ev" ] || fail "no event file in $T/data/logs"
/usr/bin/python3 tests/integration/read_tfevents.py "$ev" > "$T/events.txt" || fail "the event file does not read back"
head -1 "$T/events.txt" | grep -qx 'file_version brain.Event:2' || fail "file_version is not first"
nb=$(grep -c '^step [0-9]* batch/loss=[0-9.e+-]* batch/accuracy=[0-9.e+-]* batch/samples_per_s=' "$T/events.txt")
[ "$nb" -ge 900 ] || fail "$nb step events, want >= 900 (2 epochs of 469 steps)"
for e in 1 2; do
    line=$(grep "^step $e epoch/loss=" "$T/events.txt") || fail "no epoch $e event"
    acc=$(echo "$line" | sed 's/.*epoch\/val_accuracy=\([0-9.]*\).*/\1/')
    csv=$(awk -F, -v e=$e '$1 == e { printf "%.4f", $5 }' "$T/data/logs/training.csv")
    want=$(grep "^\[worker:0\] Epoch $e/2 .*val_accuracy" "$T/launch.log" | sed 's/.*val_accuracy: \([0-9.]*\).*/\1/')
    [ "$(printf '%.4f' "$acc")" = "$want" ] && [ "$csv" = "$want" ] || fail "epoch $e: event $acc, csv $csv, printed $want"
    echo "$line" | grep -q 'worker_1/compute_samples_per_s=[1-9]' || fail "epoch $e: no speed of worker:1"
done
ok "event file: framing, masked CRCs, file_version first, $nb step events, epoch val_accuracy = CSV = printed"

"$BIN/hetps" plot "$T/data/logs" -o "$T/run.png" > "$T/plot.txt" 2>&1 || { cat "$T/plot.txt"; fail "hetps plot"; }
grep -q "hetps plot: 2 epoch(s) of $T/data/logs/training.csv drawn in $T/run.png" "$T/plot.txt" || fail "hetps plot did not say what it drew"
[ "$(head -c 8 "$T/run.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "run.png is not a PNG"
[ "$(wc -c < "$T/run.png")" -gt 20000 ] || fail "run.png is too small to hold three panels of curves"
printf 'epoch,loss\n' > "$T/bad.csv"; mkdir "$T/bad"; mv "$T/bad.csv" "$T/bad/training.csv"
"$BIN/hetps" plot "$T/bad" > "$T/plotbad.txt" 2>&1 && fail "hetps plot accepted a foreign CSV"
grep -q "not a training.csv written by hetps" "$T/plotbad.txt" || { cat "$T/plotbad.txt"; fail "foreign CSV not named"; }
ok "hetps plot: a PNG of the 2 epochs ($(wc -c < "$T/run.png") bytes); a foreign CSV is refused by name"
