#!/bin/sh
# parts_restart.sh — a sync job whose steps move in parts, each pushed while
# backward computes it (the default: --lanes 4 --part-size 16K cut the
# reference model's 220 kB into 4 parts a shard), through a parameter
# server killed with SIGKILL twice mid-training and started again on its
# store: the workers join it again and re-send the step's parts (the same
# ids), the step is applied once whole, and the job finishes one epoch at
# the usual bar (≥ 85 %) with both shards at the same version.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cluster2 '{ "mode": "sync" }'
start_ps 0
start_ps 1
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "servers did not start"
for i in 0 1; do
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:$i \
        --model $MODEL --epochs 1 --batch-size 32 --lanes 4 --part-size 16K \
        > "$T/w$i.log" 2>&1 &
    eval "w$i=\$!"
    track $!
done
version_over() { version_at_least "$T/cluster.json" 0 "$1"; }
for at in 150 400; do
    wait_for 60 version_over $at || { cat "$T"/w*.log; fail "training did not reach step $at"; }
    kill -KILL $ps1
    wait $ps1 2>/dev/null
    sleep 0.5
    start_ps 1
    ok "ps:1 killed with SIGKILL at step >= $at and started again on its store"
done
for i in 0 1; do
    eval "pid=\$w$i"
    k=0
    while kill -0 $pid 2>/dev/null && [ $k -lt 900 ]; do sleep 0.2; k=$((k + 1)); done
    wait $pid || { tail -20 "$T/w$i.log"; tail -20 "$T/ps-1.log"; fail "worker:$i failed"; }
done
grep -q "each part is pushed as soon as backward has computed it" "$T/w0.log" ||
    { cat "$T/w0.log"; fail "the parts were not pushed during backward"; }
grep -q "joining it again and re-sending the step's parts" "$T/w0.log" "$T/w1.log" ||
    { cat "$T/w0.log"; fail "no worker re-sent its parts to the restarted shard"; }
need_version "$T/cluster.json" 0; v0=$V
need_version "$T/cluster.json" 1; v1=$V
[ "$v0" = "$v1" ] || { "$BIN/hetps" status "$T/cluster.json"; fail "the shards ended at versions $v0 and $v1"; }
acc=$(sed -n 's/.*Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/w0.log")
[ -n "$acc" ] || { tail "$T/w0.log"; fail "no final accuracy"; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "accuracy $acc < 0.85 after the restarts"
ok "the sync job in parts went on through both restarts: $v0 steps on each shard, val_accuracy $acc"
