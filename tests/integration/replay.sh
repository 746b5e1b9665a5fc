#!/bin/sh
# replay.sh — a request re-sent with the same request id is answered from
# the shard's record, not applied twice; an older id is refused as stale.
. "$(dirname "$0")/lib.inc"
pick_ports
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))"] } }
JSON
for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/ps-$i" > "$T/ps-$i.log" 2>&1 &
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || { cat "$T"/ps-*.log; fail "servers did not come up"; }
"$B/tools/poke" replay "$T/cluster.json" 0 || fail "replay"
ok "replayed request answered once"
