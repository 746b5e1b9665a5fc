#!/bin/sh
# waiting.sh — naming whom a task waits for: in a synchronous job, worker:1
# is paused (SIGSTOP) mid-step; within seconds ps:0 logs "waiting for
# worker:1 for N s" and `hetps status` shows the step and the worker; after
# SIGCONT the job goes on and finishes. Which shard waits depends on where
# the pause caught worker:1: between its pushes to the two shards, ps:1
# waits for it and ps:0 for worker:0's next push (which waits on ps:1), so
# either shard may be the one that names it.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cluster2 '{ "mode": "sync" }'

for i in 0 1; do
    # A paused worker still holds its connections; the heartbeat timeout
    # (10 s by default) would end the wait before a slow (sanitizer) build
    # has logged it, so it is a minute here.
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/ps-$i" --heartbeat-timeout 60000 > "$T/ps-$i.log" 2>&1 &
    track $!
done
for i in 0 1; do
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:$i \
        --model $MODEL --epochs 3 --no-eval > "$T/w$i.log" 2>&1 &
    eval "W$i=\$!"
    track $!
done
wait_for 60 version_at_least "$T/cluster.json" 0 20 || { tail "$T"/*.log; fail "the job did not reach step 20"; }
kill -STOP $W1
waited() { grep -q 'sync step [0-9]*: waiting for worker:1 for [0-9.]* s' "$T/ps-0.log" "$T/ps-1.log"; }
wait_for 15 waited || { kill -CONT $W1; tail "$T/ps-0.log" "$T/ps-1.log"; fail "no shard named worker:1 within 15 s"; }
grep 'waiting for worker:1' "$T/ps-0.log" "$T/ps-1.log"
need_status "$T/cluster.json" "$T/status.txt"
kill -CONT $W1
cat "$T/status.txt"
grep -Eq '^ps:[01] +waits +step [0-9]+ waiting for worker:1 for [0-9.]+ s$' "$T/status.txt" || fail "hetps status does not say a shard waits for worker:1"
! grep -q 'waiting for worker:0' "$T/ps-0.log" "$T/ps-1.log" "$T/status.txt" || fail "worker:0 (not paused) named as waited for"
ok "paused worker:1 named in a shard's log and in hetps status"
for i in 0 1; do
    eval "pid=\$W$i"
    k=0
    while kill -0 $pid 2>/dev/null && [ $k -lt 600 ]; do sleep 0.2; k=$((k + 1)); done
    wait $pid || { tail "$T/w$i.log"; fail "worker:$i failed after SIGCONT"; }
done
grep -q 'Epoch 3/3' "$T/w0.log" || fail "the job did not finish its 3 epochs"
ok "after SIGCONT the job finished"
