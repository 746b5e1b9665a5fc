#!/bin/sh
# overlap.sh — a step's push-and-pull overlapping computing, in async:
#   1. `hetps-worker --overlap`: each step's push-and-pull runs on its own
#      thread while the next step computes; in a sync job the flag is
#      refused by name before anything starts;
#   2. a step in parts (--lanes 4 --part-size 16K) pushed while backward
#      computes it (each part as soon as its layers' gradients are final,
#      the last layers first: on by default).
# Each time two workers train the reference model for one epoch and reach
# the usual accuracy bar, and every step's gradient is applied once (the
# shards' clocks equal the steps the workers report); --overlap's summary
# says how much of the push-and-pull computing did not hide.
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

# pair NAME FLAGS...: two servers and two workers of one epoch; their
# logs in $T/NAME-*.log, the servers' status in $T/NAME-status.txt
pair() {
    name=$1; shift
    # ports of its own: the first four of the block, then the next four
    sed "s/:$PORT\"/:$((PORT + OFF))\"/; s/:$((PORT + 1))\"/:$((PORT + OFF + 1))\"/; s/:$((PORT + 2))\"/:$((PORT + OFF + 2))\"/; s/:$((PORT + 3))\"/:$((PORT + OFF + 3))\"/" \
        "$T/cluster.json" > "$T/$name.json"
    OFF=$((OFF + 4))
    SRV=""
    for i in 0 1; do
        "$BIN/hetps-ps" --cluster "$T/$name.json" --task ps:$i \
            --data-dir "$T/$name-ps-$i" > "$T/$name-ps-$i.log" 2>&1 &
        track $!
        SRV="$SRV $!"
    done
    wait_for 20 "$BIN/hetps" status "$T/$name.json" || fail "$name: servers did not start"
    for i in 0 1; do
        "$BIN/hetps-worker" --cluster "$T/$name.json" --task worker:$i \
            --model $MODEL --epochs 1 "$@" > "$T/$name-w$i.log" 2>&1 &
        eval "W$i=\$!"
        track $!
    done
    for i in 0 1; do
        eval "pid=\$W$i"
        k=0
        while kill -0 $pid 2>/dev/null && [ $k -lt 1500 ]; do sleep 0.2; k=$((k + 1)); done
        wait $pid || { tail -20 "$T/$name-w$i.log"; fail "worker:$i failed ($name)"; }
    done
    acc=$(sed -n 's/.*Final weights (all workers done).*val_accuracy: \([0-9.]*\).*/\1/p' "$T/$name-w0.log")
    [ -n "$acc" ] || { cat "$T/$name-w0.log"; fail "$name: no final accuracy"; }
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "one epoch ($name) reached only $acc"
    # Every step pushed once: each shard counted as many pushes from each
    # worker as the worker computed steps (469 a worker: 60000 / 2 / 64).
    need_status "$T/$name.json" "$T/$name-status.txt"
    for i in 0 1; do
        steps=$(sed -n 's/.*async: \([0-9]*\) steps in.*/\1/p' "$T/$name-w$i.log")
        [ -n "$steps" ] || { cat "$T/$name-w$i.log"; fail "$name: worker:$i reported no steps"; }
        grep -q "^worker:$i .*ps:0 [a-z]* (seen [0-9]*ms ago, [0-9]* requests" "$T/$name-status.txt" ||
            { cat "$T/$name-status.txt"; fail "$name: hetps status has no line for worker:$i"; }
        clock=$(sed -n "s/^worker:$i .*ps:0 [a-z]* (.*clock \([0-9]*\),.*/\1/p" "$T/$name-status.txt")
        [ "$clock" = "$steps" ] || { cat "$T/$name-status.txt"; fail "$name: worker:$i computed $steps steps, ps:0 saw clock $clock"; }
    done
    for p in $SRV; do kill $p 2>/dev/null || true; done
}

OFF=0
pair overlap --overlap
grep -q "push-and-pull not hidden by computing (--overlap)" "$T/overlap-w0.log" ||
    { cat "$T/overlap-w0.log"; fail "the summary does not say what --overlap left"; }
grep "not hidden" "$T/overlap-w0.log" | sed 's/.*INFO //'
ok "2 async workers with --overlap, one epoch: val_accuracy $acc; each push counted once"

pair early --lanes 4 --part-size 16K
grep -q "each step moves in [0-9]* parts" "$T/early-w0.log" || { cat "$T/early-w0.log"; fail "the steps did not move in parts"; }
grep -q "each part is pushed as soon as backward has computed it" "$T/early-w0.log" ||
    { cat "$T/early-w0.log"; fail "the parts were not pushed during backward"; }
ok "2 async workers, each step in parts pushed during backward, one epoch: val_accuracy $acc; each push counted once"
