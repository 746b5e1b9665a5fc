#!/bin/sh
# limits.sh — a hostile or broken peer cannot poison, exhaust or jam a
# shard: a push holding NaN or Inf is refused and the store left as it was
# (counted in `hetps status`); a ~100-byte CreateVariables announcing 12
# million blocks is refused without the shard's memory growing; a client
# that sends pulls and never reads the replies is disconnected, and the
# others are still served; a data directory in use is locked; export
# follows no symlink and refuses a name that climbs out; a sync step waits
# for a worker that never pushes only until --step-timeout.
. "$(dirname "$0")/lib.inc"
MODEL=deploy/models/fashion_cnn.json
pick_ports
# Plain TCP here: hostile speaks raw nng and raw TCP to the shards, the
# message-level attacks a member gone bad could make. Over TLS a peer
# without the cluster's certificate cannot connect at all (security.sh).
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))"] },
  "hetps": { "insecure": true } }
JSON
for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/ps-$i" > "$T/ps-$i.log" 2>&1 &
    track $!
    eval "PS$i=$!"
done
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || { cat "$T"/ps-*.log; fail "servers did not come up"; }

# 1. An absurd layout, refused in bounded memory (peak RSS of the shard).
"$B/tools/hostile" layout "$T/cluster.json" 0 || { cat "$T/ps-0.log"; fail "absurd layout"; }
peak=$(awk '/^VmHWM:/ {print $2}' /proc/"$PS0"/status)
echo "ps:0 peak RSS after the absurd create: $peak kB"
[ -n "$peak" ] && [ "$peak" -lt 150000 ] || fail "ps:0 grew to $peak kB on a refused create"
ok "absurd layout refused, ps:0 peak RSS $peak kB"

# 2. NaN and Inf pushes refused, the store unchanged, counted.
"$B/tools/hostile" nan "$T/cluster.json" "$MODEL" || { cat "$T"/ps-*.log; fail "non-finite push"; }
need_status "$T/cluster.json" "$T/status.txt"
cat "$T/status.txt"
for i in 0 1; do
    grep -q "^ps:$i .* nonfinite 2 " "$T/status.txt" || fail "ps:$i does not count 2 non-finite pushes"
done
grep -q "refused a push from worker:0 .* is NaN" "$T/ps-0.log" || fail "ps:0's log does not name the NaN push"
ok "NaN and Inf pushes refused and counted; the store unchanged"

# 3. A client that never reads: pulls of every block of ps:1 (over 100 KB
# each) until its socket buffers fill. The shard drops it after the reply
# send timeout (10 s); `hetps status` is answered meanwhile or just after.
"$B/tools/hostile" noread "$T/cluster.json" 1 "$MODEL" 400 40 > "$T/noread.log" 2>&1 &
track $!
sleep 3
# ps:1 must answer again within 20 s (the attacker stays connected for 40;
# without the send timeout ps:1 answers nobody until it leaves).
start=$(date +%s) took=""
while [ $(( $(date +%s) - start )) -lt 20 ]; do
    if "$BIN/hetps" status "$T/cluster.json" 2>/dev/null | grep -q '^ps:1 .* up '; then
        took=$(( $(date +%s) - start )); break
    fi
    sleep 0.5
done
[ -n "$took" ] || { cat "$T/noread.log" "$T/ps-1.log"; fail "ps:1 answered nobody for 20 s while a client did not read"; }
cat "$T/noread.log"
grep "did not take its reply" "$T/ps-1.log" | head -2
grep -q "did not take its reply" "$T/ps-1.log" || fail "ps:1's log does not name the closed connection"
ok "ps:1 answered others within ${took} s of a client that never reads"

# 4. The data-directory lock: a second server on ps:0's directory, and a
# reshard of the stores the running shards write to, are refused.
"$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:0 --listen "tcp://127.0.0.1:$((PORT + 5))" \
    --data-dir "$T/ps-0" > "$T/second.log" 2>&1 &
second=$!
track $second
i=0; while ours $second && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
ours $second && fail "a second hetps-ps opened ps:0's data directory"
grep -q "is in use by another process" "$T/second.log" || { cat "$T/second.log"; fail "the second server does not say the directory is in use"; }
sed "s/\"127.0.0.1:$((PORT + 1))\"/\"127.0.0.1:$((PORT + 1))\", \"127.0.0.1:$((PORT + 6))\"/" \
    "$T/cluster.json" > "$T/three.json"
"$BIN/hetps" reshard --from "$T/cluster.json" --to "$T/three.json" --data-dir "$T" \
    --out-dir "$T/new" > "$T/reshard.log" 2>&1 && fail "reshard of stores in use succeeded"
grep -q "is in use by another process" "$T/reshard.log" || { cat "$T/reshard.log"; fail "reshard does not say the stores are in use"; }
ok "data directories in use are locked against a second server and a reshard"

# 5. Export's files: it follows no symlink inside its output directory, and
# refuses a store whose variable name would climb out of it.
# (ps:1 dropped the peer that never reads; nng 1.5.2 may have lost that
# pipe, and its close is then left after 5 s: hc_nng_close.)
stop_within 20 "$PS0" "$PS1"
mkdir -p "$T/out" "$T/elsewhere"
ln -s "$T/elsewhere" "$T/out/conv2d"
"$BIN/hetps" export --data-dir "$T" --out "$T/out" "$T/cluster.json" > "$T/export1.log" 2>&1 &&
    fail "export wrote through a symlink in its output directory"
grep -q "does not follow links" "$T/export1.log" || { cat "$T/export1.log"; fail "export does not say why"; }
[ -z "$(ls "$T/elsewhere")" ] || fail "export wrote into the symlink's target"
"$B/tools/hostile" badname "$T/ps-0" "../../escaped" || fail "could not plant a bad name"
"$BIN/hetps" export --data-dir "$T" --out "$T/out2/a/b" "$T/cluster.json" > "$T/export2.log" 2>&1 &&
    fail "export of a variable named ../../escaped succeeded"
cat "$T/export2.log"
grep -q 'has a part ".."' "$T/export2.log" || fail "export does not name the bad variable"
[ -z "$(find "$T" -name 'escaped*')" ] || fail "export wrote outside its output directory"
ok "export follows no symlink and refuses a name that climbs out"

# 6. sync: a worker that joins and heartbeats but never pushes holds a step
# only until --step-timeout; the shard names it, and the others train on.
need_data
cat > "$T/sync.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$((PORT + 7))"],
               "worker": ["127.0.0.1:$((PORT + 8))", "127.0.0.1:$((PORT + 9))"] },
  "hetps": { "mode": "sync" } }
JSON
"$BIN/hetps-ps" --cluster "$T/sync.json" --task ps:0 --data-dir "$T/sync-ps" \
    --step-timeout 3000 > "$T/sync-ps.log" 2>&1 &
track $!
wait_for 10 "$BIN/hetps" status "$T/sync.json" || { cat "$T/sync-ps.log"; fail "sync server did not come up"; }
"$B/tools/hostile" stall "$T/sync.json" 1 "$MODEL" 60 > "$T/stall.log" 2>&1 &
track $!
sleep 1
timeout 90 "$BIN/hetps-worker" --cluster "$T/sync.json" --task worker:0 --model "$MODEL" \
    --max-steps 5 --no-eval > "$T/sync-w0.log" 2>&1 ||
    { cat "$T/sync-w0.log" "$T/sync-ps.log"; fail "worker:0 did not finish while worker:1 stalled"; }
grep "waited .* for worker:1" "$T/sync-ps.log" | head -2
grep -q "waited .* for worker:1: marked dead" "$T/sync-ps.log" || fail "the shard does not name the worker its step waited for"
ok "a sync step waited for a silent worker:1 only until --step-timeout"
