#!/bin/sh
# restart.sh — training through faults. A parameter server killed with
# SIGKILL twice mid-training and started again on its store each time: it
# resumes from its last commit with a new incarnation, the workers join it
# again and re-send their in-flight requests (the same ids: nothing
# applied twice); a worker killed with SIGKILL and started again joins
# with a new incarnation and resumes where the shards recorded it left off
# in its data, not from the start; the job finishes with the one-epoch
# accuracy bar (≥ 85 %), and the same job started again on the finished
# stores trains nothing. Then a worker killed in sync mode.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cluster2 '{ "mode": "async" }'
start_ps 0
start_ps 1
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "servers did not start"
# start_workers NAME: workers 0 and 1 for one epoch, logs $T/NAME0.log, …
start_workers() {
    for i in 0 1; do
        "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:$i \
            --model $MODEL --epochs 1 > "$T/$1$i.log" 2>&1 &
        eval "w$i=\$!"
        track $!
    done
}
start_workers w
version_over() { version_at_least "$T/cluster.json" 1 "$1"; }
wait_for 60 version_over 150 || { cat "$T"/w*.log; fail "training did not start"; }
need_status "$T/cluster.json" "$T/status.txt"
grep -q "worker:1 .* at epoch 1 batch [1-9]" "$T/status.txt" ||
    { cat "$T/status.txt"; fail "hetps status does not show where worker:1 is in its data"; }
kill -KILL $ps1
wait $ps1 2>/dev/null
ok "ps:1 killed with SIGKILL at version >= 150"
sleep 1
start_ps 1
wait_for 60 version_over 300 || { cat "$T"/w*.log; fail "training did not go on after the first restart"; }
kill -KILL $ps1
wait $ps1 2>/dev/null
sleep 0.5
start_ps 1
ok "ps:1 killed with SIGKILL again at version >= 300 and restarted"
wait_for 60 version_over 420 || { cat "$T"/w*.log; fail "training did not go on after the second restart"; }
kill -KILL $w1
wait $w1 2>/dev/null
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:1 \
    --model $MODEL --epochs 1 > "$T/w1b.log" 2>&1 &
w1=$!
track $w1
ok "worker:1 killed with SIGKILL at version >= 420 and restarted"
wait $w0 || { tail -20 "$T/w0.log"; fail "worker 0 failed after the restarts"; }
wait $w1 || { tail -20 "$T/w1b.log"; fail "the restarted worker 1 failed"; }
grep -q "worker:1 restarted" "$T/ps-0.log" || { cat "$T/ps-0.log"; fail "ps:0 did not see worker:1's new incarnation"; }
grep -q "joining it again" "$T/w0.log" "$T/w1.log" || { cat "$T/w0.log"; fail "no worker re-joined the restarted shard"; }
grep -q "store .*initialised, step [1-9]" "$T/ps-1.log" || { cat "$T/ps-1.log"; fail "the restarted shard did not resume from its store"; }
grep Final "$T/w0.log"
acc=$(sed -n 's/.*Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/w0.log")
[ -n "$acc" ] || { tail "$T/w0.log"; fail "no final accuracy"; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "accuracy $acc < 0.85 after the restart"
ok "workers re-joined the restarted shard; one epoch reached $acc"
from=$(sed -n 's/.*resuming where worker:1 left off.* from batch \([0-9]*\) of.*/\1/p' "$T/w1b.log")
[ -n "$from" ] && [ "$from" -ge 100 ] || { cat "$T/w1b.log"; fail "the restarted worker:1 did not resume its epoch (from batch '$from')"; }
ok "the restarted worker:1 resumed its epoch at batch $from (as the shards recorded)"

# The finished job started again on the same stores: nothing to train.
need_version "$T/cluster.json" 0
v_end=$V
start_workers again
wait $w0 && wait $w1 || { cat "$T"/again*.log; fail "a worker of the finished job failed"; }
grep -q "worker:1 has done all 1 epoch(s) of this job .*nothing to train" "$T/again1.log" ||
    { cat "$T/again1.log"; fail "worker:1 did not say the job was done"; }
need_version "$T/cluster.json" 0
[ "$V" = "$v_end" ] || fail "the finished job trained again (version $v_end, now $V)"
ok "the finished job started again: nothing trained ($v_end steps), as the workers said"
"$BIN/hetps" inspect "$T/data/ps-0" > "$T/inspect.txt" 2>&1 || { cat "$T/inspect.txt"; fail "hetps inspect failed"; }
grep -q "worker:1 last request [0-9]* (incarnation [0-9a-f]*), at epoch 1 batch 469 of its data" "$T/inspect.txt" ||
    { cat "$T/inspect.txt"; fail "hetps inspect does not show where worker:1 ended in its data"; }
ok "hetps inspect shows each worker's last request and place: $(grep -c '^  worker:' "$T/inspect.txt") workers"

# A worker killed with SIGKILL in sync mode: after the heartbeat timeout the
# shards stop waiting for it and the steps go on; started again, it joins
# at the current version and the job finishes.
cat > "$T/sync.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$((PORT + 4))", "127.0.0.1:$((PORT + 5))"],
               "worker": ["127.0.0.1:$((PORT + 6))", "127.0.0.1:$((PORT + 7))"] },
  "hetps": { "mode": "sync" } }
JSON
for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/sync.json" --task ps:$i --heartbeat-timeout 1500 \
        --data-dir "$T/sdata/ps-$i" > "$T/sps-$i.log" 2>&1 &
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/sync.json" || fail "sync servers did not start"
for i in 0 1; do
    "$BIN/hetps-worker" --cluster "$T/sync.json" --task worker:$i \
        --model $MODEL --epochs 1 --batch-size 32 > "$T/sw$i.log" 2>&1 &
    eval "sw$i=\$!"
    track $!
done
sync_over() { version_at_least "$T/sync.json" 0 "$1"; }
wait_for 60 sync_over 100 || { cat "$T"/sw*.log; fail "sync training did not start"; }
kill -KILL $sw1
wait $sw1 2>/dev/null
need_version "$T/sync.json" 0
v0=$V
wait_for 20 sync_over $((v0 + 50)) || { cat "$T/sps-0.log"; fail "steps stopped after worker:1 died"; }
grep -q "worker:1 silent .* marked dead" "$T/sps-0.log" || { cat "$T/sps-0.log"; fail "worker:1 was not marked dead"; }
ok "worker:1 killed: marked dead after the heartbeat timeout, steps went on"
"$BIN/hetps-worker" --cluster "$T/sync.json" --task worker:1 \
    --model $MODEL --epochs 1 --batch-size 32 > "$T/sw1b.log" 2>&1 &
sw1=$!
track $sw1
wait $sw0 || { tail -20 "$T/sw0.log"; fail "worker:0 failed"; }
wait $sw1 || { tail -20 "$T/sw1b.log"; tail -n 25 "$T/sps-0.log" "$T/sps-1.log"; fail "the restarted worker:1 failed"; }
grep -q "worker:1 joined\|worker:1 restarted" "$T/sps-0.log" || fail "worker:1 did not rejoin"
awk '/INFO training/ {seen=1} END {exit !seen}' "$T/sw1b.log" || fail "the restarted worker did not train"
acc=$(sed -n 's/.*Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/sw0.log")
[ -n "$acc" ] || { tail "$T/sw0.log"; fail "no final accuracy"; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "accuracy $acc < 0.85"
ok "worker:1 restarted, rejoined at the current version; job finished at $acc"
