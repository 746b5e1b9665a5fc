#!/bin/sh
# restart.sh — a parameter server killed with SIGKILL mid-training and
# started again on its store: it resumes from its last commit with a new
# incarnation, the workers join it again and re-send their in-flight
# requests (the same ids: nothing applied twice), and the job finishes with
# the one-epoch accuracy bar (≥ 85 %).
. "$(dirname "$0")/lib.inc"
DATA=/usr/share/datasets/fashion-mnist
[ -f "$DATA/train-images-idx3-ubyte.gz" ] || { echo "skipped: no Fashion-MNIST at $DATA"; exit 77; }
pick_ports
MODEL=deploy/models/fashion_cnn.json
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))", "127.0.0.1:$((PORT + 3))"] },
  "hetps": { "mode": "async" } }
JSON
start_ps() {
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$1 \
        --data-dir "$T/data/ps-$1" >> "$T/ps-$1.log" 2>&1 &
    eval "ps$1=\$!"
    track $!
}
start_ps 0
start_ps 1
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "servers did not start"
for i in 0 1; do
    "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:$i \
        --model $MODEL --epochs 1 > "$T/w$i.log" 2>&1 &
    eval "w$i=\$!"
    track $!
done
version_over() {
    v=$("$BIN/hetps" status "$T/cluster.json" 2>/dev/null | sed -n 's/^ps:1 .* version \([0-9]*\) .*/\1/p')
    [ -n "$v" ] && [ "$v" -ge "$1" ]
}
wait_for 60 version_over 150 || { cat "$T"/w*.log; fail "training did not start"; }
kill -KILL $ps1
wait $ps1 2>/dev/null
ok "ps:1 killed with SIGKILL at version >= 150"
sleep 1
start_ps 1
wait $w0 || { tail -20 "$T/w0.log"; fail "worker 0 failed after the restart"; }
wait $w1 || { tail -20 "$T/w1.log"; fail "worker 1 failed after the restart"; }
grep -q "joining it again" "$T/w0.log" "$T/w1.log" || { cat "$T/w0.log"; fail "no worker re-joined the restarted shard"; }
grep -q "store .*initialised, step [1-9]" "$T/ps-1.log" || { cat "$T/ps-1.log"; fail "the restarted shard did not resume from its store"; }
grep Final "$T/w0.log"
acc=$(sed -n 's/.*Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$T/w0.log")
[ -n "$acc" ] || { tail "$T/w0.log"; fail "no final accuracy"; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || fail "accuracy $acc < 0.85 after the restart"
ok "workers re-joined the restarted shard; one epoch reached $acc"
