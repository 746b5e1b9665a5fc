#!/bin/sh
# elastic.sh — scaling by editing the cluster file while training runs
# (async): the job starts with 1 worker, grows to 3 (entries added, the new
# processes started), shrinks to 2 (an entry removed, its process stopped).
# The shards re-read the file on change, the chief's data shard follows the
# membership at its next epoch, and the job finishes with the accuracy bar.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
# write_cluster FILE BASE_PORT N MODE: a cluster file with 2 shards and N
# workers on ports from BASE_PORT, replaced atomically.
write_cluster() {
    w="\"127.0.0.1:$(($2 + 2))\""
    [ "$3" -ge 2 ] && w="$w, \"127.0.0.1:$(($2 + 3))\""
    [ "$3" -ge 3 ] && w="$w, \"127.0.0.1:$(($2 + 4))\""
    printf '{ "cluster": { "ps": ["127.0.0.1:%s", "127.0.0.1:%s"], "worker": [%s] },\n  "hetps": { "mode": "%s" } }\n' \
        "$2" $(($2 + 1)) "$w" "$4" > "$1.tmp"
    mv "$1.tmp" "$1"
}
write_cluster "$T/cluster.json" $PORT 1 async
for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/data/ps-$i" > "$T/ps-$i.log" 2>&1 &
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "servers did not start"
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --model $MODEL \
    --epochs 3 > "$T/w0.log" 2>&1 &
w0=$!
track $w0
version_over() { version_at_least "$T/cluster.json" 0 "$1"; }
wait_for 60 version_over 200 || { cat "$T/w0.log"; fail "training did not start"; }

write_cluster "$T/cluster.json" $PORT 3 async
added() { grep -q "worker:2 added by the cluster file" "$T/ps-0.log"; }
wait_for 10 added || { cat "$T/ps-0.log"; fail "the shards did not take the added workers"; }
for i in 1 2; do
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:$i --model $MODEL \
        --epochs 1 > "$T/w$i.log" 2>&1 &
    eval "w$i=\$!"
    track $!
done
joined2() { grep -q "worker:2 joined" "$T/ps-0.log" && grep -q "worker:1 joined" "$T/ps-0.log"; }
wait_for 30 joined2 || { cat "$T/ps-0.log" "$T/w2.log"; fail "the new workers did not join"; }
pushed() { "$BIN/hetps" status "$T/cluster.json" 2>/dev/null | grep -q '^worker:2 .*clock [1-9][0-9]'; }
wait_for 30 pushed || { cat "$T/w2.log"; fail "worker:2 did not train"; }
ok "grown from 1 to 3 workers by editing the cluster file"

write_cluster "$T/cluster.json" $PORT 2 async
kill -TERM $w2
wait $w2
removed() { grep -q "worker:2 removed by the cluster file" "$T/ps-0.log"; }
wait_for 10 removed || { cat "$T/ps-0.log"; fail "the shards did not take the removal"; }
ok "shrunk to 2 workers: worker:2's entry removed and its process stopped"

wait $w0 || { tail -20 "$T/w0.log"; fail "the chief failed"; }
wait $w1 || { tail -20 "$T/w1.log"; fail "worker:1 failed"; }
grep "cluster file:" "$T/w0.log" || true
grep -q "cluster file: [23] worker(s), was 1" "$T/w0.log" || { cat "$T/w0.log"; fail "the chief's data shard did not follow the membership"; }
# The chief started alone: the workers that joined mid-job count, and it
# ends as any job does, with the final weights once all are done.
acc=$(sed -n 's/.*Final weights (all workers done).*val_accuracy: \([0-9.]*\).*/\1/p' "$T/w0.log")
[ -n "$acc" ] || { tail "$T/w0.log"; fail "the chief printed no 'Final weights (all workers done)' line"; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "accuracy $acc < 0.85"
ok "the elastic job finished at $acc"

# The same in sync mode: the job's global batch stays what it was (64); a
# worker added to the file takes a share of it from the step after it
# joins, and leaving takes effect at the next step.
# Equal shares (--balance off): balancing on a loaded machine may seat the
# added worker out of steps (its share would not pay), and this checks
# membership, not the balancer (test_mode, balance.sh do).
SP=$((PORT + 10))
write_cluster "$T/sync.json" $SP 1 sync
for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/sync.json" --task ps:$i --balance off \
        --data-dir "$T/sdata/ps-$i" > "$T/sps-$i.log" 2>&1 &
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/sync.json" || fail "sync servers did not start"
# (every step in parts, 4 a shard: a worker joining and leaving while
# parts are added to the open step as they come)
"$BIN/hetps-worker" --cluster "$T/sync.json" --task worker:0 --model $MODEL \
    --epochs 1 --batch-size 64 --lanes 4 --part-size 4K > "$T/sw0.log" 2>&1 &
sw0=$!
track $sw0
sync_over() { version_at_least "$T/sync.json" 0 "$1"; }
wait_for 60 sync_over 100 || { cat "$T/sw0.log"; fail "sync training did not start"; }
write_cluster "$T/sync.json" $SP 2 sync
sadded() { grep -q "worker:1 added by the cluster file" "$T/sps-0.log"; }
wait_for 10 sadded || { cat "$T/sps-0.log"; fail "sync shards did not take the added worker"; }
"$BIN/hetps-worker" --cluster "$T/sync.json" --task worker:1 --model $MODEL \
    --epochs 1 --batch-size 64 --lanes 4 --part-size 4K > "$T/sw1.log" 2>&1 &
sw1=$!
track $sw1
sshare() { "$BIN/hetps" status "$T/sync.json" 2>/dev/null | grep -q '^worker:1 .*ps:0 joined.*clock [1-9][0-9]'; }
wait_for 30 sshare || { cat "$T/sw1.log"; tail -n 25 "$T/sps-0.log" "$T/sps-1.log"; fail "the added sync worker did not take part"; }
grep -q "the job's global batch is 64" "$T/sw1.log" || { cat "$T/sw1.log"; fail "the added worker did not take the job's global batch"; }
ok "sync: worker:1 added, takes a share of the job's global batch 64"
write_cluster "$T/sync.json" $SP 1 sync
kill -TERM $sw1
wait $sw1
wait $sw0 || { tail -20 "$T/sw0.log"; fail "the sync chief failed"; }
sacc=$(sed -n 's/.*Final weights (all workers done).*val_accuracy: \([0-9.]*\).*/\1/p' "$T/sw0.log")
[ -n "$sacc" ] || { tail "$T/sw0.log"; fail "the sync chief (started alone, joined by worker:1) printed no final weights"; }
awk -v a="$sacc" 'BEGIN { exit !(a >= 0.85) }' || fail "sync accuracy $sacc < 0.85"
need_version "$T/sync.json" 0
sv=$V
[ "$sv" = 938 ] || fail "sync job ended at version $sv, not 938 steps of 64"
ok "sync: grown to 2 and back to 1; 938 steps of the global batch 64, accuracy $sacc"
