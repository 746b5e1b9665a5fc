#!/bin/sh
# overlap.sh — `hetps-worker --overlap` (async): each step's push-and-pull
# runs on its own thread while the next step computes. Two workers train
# the reference model for one epoch that way and reach the usual accuracy
# bar; every step's gradient is applied once (the shards' request counts
# equal the steps the workers report); the summary line says how much of
# the push-and-pull computing did not hide; in a sync job the flag is
# refused by name before anything starts.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cluster2 '{ "mode": "async" }'
sed 's/"mode": "async"/"mode": "sync"/' "$T/cluster.json" > "$T/sync.json"

"$BIN/hetps-worker" --cluster "$T/sync.json" --task worker:0 --model $MODEL \
    --overlap > "$T/sync.log" 2>&1 && { cat "$T/sync.log"; fail "--overlap was taken in a sync job"; }
grep -q -- "--overlap .*needs mode async, and this job runs sync" "$T/sync.log" ||
    { cat "$T/sync.log"; fail "the refusal of --overlap in sync does not say why"; }
ok "--overlap in a sync job: refused, naming the mode"

for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/ps-$i" > "$T/ps-$i.log" 2>&1 &
    track $!
done
wait_for 20 "$BIN/hetps" status "$T/cluster.json" || fail "servers did not start"
for i in 0 1; do
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:$i \
        --model $MODEL --epochs 1 --overlap > "$T/w$i.log" 2>&1 &
    eval "W$i=\$!"
    track $!
done
for i in 0 1; do
    eval "pid=\$W$i"
    k=0
    while kill -0 $pid 2>/dev/null && [ $k -lt 1500 ]; do sleep 0.2; k=$((k + 1)); done
    wait $pid || { tail -20 "$T/w$i.log"; fail "worker:$i failed with --overlap"; }
done
grep -q "push-and-pull not hidden by computing (--overlap)" "$T/w0.log" ||
    { cat "$T/w0.log"; fail "the summary does not say what --overlap left"; }
grep "not hidden" "$T/w0.log" | sed 's/.*INFO //'
acc=$(sed -n 's/.*Final weights (all workers done).*val_accuracy: \([0-9.]*\).*/\1/p' "$T/w0.log")
[ -n "$acc" ] || { cat "$T/w0.log"; fail "no final accuracy"; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "one epoch with --overlap reached only $acc"
ok "2 async workers with --overlap, one epoch: val_accuracy $acc"

# Every step pushed once: each shard counted as many pushes from each
# worker as the worker computed steps (469 a worker: 60000 / 2 / 64).
"$BIN/hetps" status "$T/cluster.json" > "$T/status.txt" 2>&1 || true
for i in 0 1; do
    steps=$(sed -n 's/.*async: \([0-9]*\) steps in.*/\1/p' "$T/w$i.log")
    [ -n "$steps" ] || { cat "$T/w$i.log"; fail "worker:$i reported no steps"; }
    grep -q "^worker:$i .*ps:0 [a-z]* (seen [0-9]*ms ago, [0-9]* requests" "$T/status.txt" ||
        { cat "$T/status.txt"; fail "hetps status has no line for worker:$i"; }
    clock=$(sed -n "s/^worker:$i .*ps:0 [a-z]* (.*clock \([0-9]*\),.*/\1/p" "$T/status.txt")
    [ "$clock" = "$steps" ] || { cat "$T/status.txt"; fail "worker:$i computed $steps steps, ps:0 saw clock $clock"; }
done
ok "each worker's pushes counted once per step it computed"
