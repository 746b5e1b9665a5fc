#!/bin/sh
# reshard.sh — from 2 to 3 parameter servers mid-job: train 100 steps on 2
# shards, stop, `hetps reshard` to 3, and the exported parameters are
# bitwise the same before and after; training then goes on with the 3
# shards from those values, and the worker resumes at its place in its data
# (moved with the blocks).
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cat > "$T/two.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 5))"] } }
JSON
cat > "$T/three.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$((PORT + 2))", "127.0.0.1:$((PORT + 3))", "127.0.0.1:$((PORT + 4))"],
               "worker": ["127.0.0.1:$((PORT + 5))"] } }
JSON
# run CLUSTER DIR N_PS STEPS: servers, one worker for STEPS steps, stop.
run() {
    pids=""
    i=0
    while [ $i -lt "$3" ]; do
        "$BIN/hetps-ps" --cluster "$T/$1.json" --task ps:$i --data-dir "$T/$2/ps-$i" \
            >> "$T/$1-ps$i.log" 2>&1 &
        pids="$pids $!"
        track $!
        i=$((i + 1))
    done
    wait_for 10 "$BIN/hetps" status "$T/$1.json" || fail "$1: servers did not start"
    "$BIN/hetps-worker" --cluster "$T/$1.json" --task worker:0 --model $MODEL \
        --max-steps "$4" --no-eval > "$T/$1-w.log" 2>&1 || { cat "$T/$1-w.log"; fail "$1: worker"; }
    for p in $pids; do kill -TERM $p; wait $p 2>/dev/null; done
}
run two old 2 100
"$BIN/hetps" export --data-dir "$T/old" --out "$T/before" "$T/two.json" > /dev/null 2>&1 || fail "export before"
"$BIN/hetps" reshard --from "$T/two.json" --to "$T/three.json" --data-dir "$T/old" \
    --out-dir "$T/new" > "$T/reshard.txt" 2>&1 || { cat "$T/reshard.txt"; fail "reshard"; }
cat "$T/reshard.txt"
"$BIN/hetps" export --data-dir "$T/new" --out "$T/after" "$T/three.json" > /dev/null 2>&1 || fail "export after"
for f in conv2d/kernel conv2d/bias dense/kernel dense/bias; do
    cmp "$T/before/$f.npy" "$T/after/$f.npy" || fail "$f differs after resharding"
done
ok "2 → 3 shards: every parameter bitwise identical"
"$BIN/hetps" reshard --from "$T/two.json" --to "$T/three.json" --data-dir "$T/old" \
    --out-dir "$T/new" > "$T/again.txt" 2>&1 && fail "reshard over existing stores succeeded"
grep -q "already holds variables" "$T/again.txt" || { cat "$T/again.txt"; fail "no clear message for a used --out-dir"; }
run three new 3 20
grep -q "variables already exist (step 100)" "$T/three-ps0.log" || { cat "$T/three-ps0.log"; fail "the 3-shard job did not continue from step 100"; }
grep -q "resuming where worker:0 left off .* from batch 101 of" "$T/three-w.log" ||
    { cat "$T/three-w.log"; fail "the worker did not resume at batch 101 after the move"; }
ok "training went on with 3 shards from the moved values, the worker from batch 101"
