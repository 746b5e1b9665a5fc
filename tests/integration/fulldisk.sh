#!/bin/sh
# fulldisk.sh — a full disk is an error reply and a log line, never a crash:
# a shard whose data directory is a 100 MiB file system (a tmpfs mounted in
# a mount namespace of its own, so the machine's mounts are untouched) is
# asked to create the 20 M-parameter model (240 MB of state). The create is
# refused naming the store and "No space left on device", the shard logs it
# and keeps serving, its store as it was; the reference model then trains
# on the same shard. (Before, the store wrote the create through its memory
# map past the reserved disk and the shard died of SIGBUS.)
. "$(dirname "$0")/lib.inc"
[ "$(id -u)" = 0 ] || { echo "skipped: needs root (a tmpfs in a mount namespace)"; exit 77; }
command -v unshare > /dev/null || { echo "skipped: no unshare"; exit 77; }
need_data
pick_ports
mkdir -p "$T/small"
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] } }
JSON
# The shard sees a 100 MiB tmpfs at $T/small; the mount leaves with it.
unshare -m sh -c "mount -t tmpfs -o size=100m hetps-full '$T/small' &&
    exec '$BIN/hetps-ps' --cluster '$T/cluster.json' --task ps:0 --data-dir '$T/small/ps-0'" \
    > "$T/ps.log" 2>&1 &
PS_PID=$!
track $PS_PID
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || { cat "$T/ps.log"; fail "the shard did not come up"; }

timeout 120 "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 \
    --model deploy/models/fashion_mlp_20m.json --max-steps 2 --no-eval > "$T/big.log" 2>&1 &&
    { cat "$T/big.log"; fail "a 240 MB create on a 100 MiB disk was accepted"; }
grep -q "refused: store .*: initialising the store: cannot reserve .* No space left on device" "$T/big.log" ||
    { cat "$T/big.log" "$T/ps.log"; fail "the worker was not told the disk is full"; }
grep -q "WARN create refused: .*No space left on device" "$T/ps.log" ||
    { cat "$T/ps.log"; fail "the shard did not log the full disk"; }
kill -0 $PS_PID 2> /dev/null || { cat "$T/ps.log"; fail "the shard died"; }
need_version "$T/cluster.json" 0
[ "$V" = 0 ] || fail "the shard's store changed: version $V"
ok "a create larger than the disk: refused, logged, the shard serving, its store as it was"

timeout 120 "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 \
    --model deploy/models/fashion_cnn.json --max-steps 30 --no-eval > "$T/small.log" 2>&1 ||
    { cat "$T/small.log" "$T/ps.log"; fail "the reference model did not train on the same shard"; }
need_version "$T/cluster.json" 0
[ "$V" -ge 30 ] || fail "the shard did not apply the 30 steps (version $V)"
ok "then the reference model trains on the same shard (version $V)"
