#!/bin/sh
# hostile.sh — peers holding a worker's certificate cannot make a shard
# hold the memory they announce. A real hetps-ps over mutual TLS, its
# receive budget 1 GiB (HETPS_RECV_BUDGET); six connections with
# worker:0's certificate each announce a 400 MiB message (2.4 GiB in all)
# and send 64 KiB of it, then 1 KiB a second for 15 s (tools/hostile
# announce). Meanwhile `hetps status` is answered, each call within 2 s;
# the shard's resident memory stays within 200 MiB of where it started
# (a body's memory grows with its bytes, common/tls_frame.h), the shard
# keeps all six connections (the budget counts bytes held, not
# announced), and after they leave its memory is within 64 MiB of the
# start.
. "$(dirname "$0")/lib.inc"
pick_ports
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] } }
JSON
HETPS_RECV_BUDGET=$((1 << 30)) "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:0 \
    --data-dir "$T/ps-0" > "$T/ps-0.log" 2>&1 &
PS0=$!
track $PS0
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || { cat "$T/ps-0.log"; fail "ps:0 did not come up over TLS"; }
grep -q "mutual TLS" "$T/ps-0.log" || fail "ps:0 does not say it serves mutual TLS"

rss() { awk '/^VmRSS:/ {print $2}' /proc/"$PS0"/status; }  # kB
ms() { echo $(( $(date +%s%N) / 1000000 )); }
start=$(rss)

"$B/tools/hostile" announce "$T/cluster.json" 0 6 400 64 15 > "$T/hostile.log" 2>&1 &
H=$!
track $H
wait_for 30 grep -q "^hostile: holding" "$T/hostile.log" || { cat "$T/hostile.log" "$T/ps-0.log"; fail "the six peers did not connect"; }

# `hetps status` while they hold their connections: each call timed.
worst=0 times=""
for i in 1 2 3 4 5; do
    t0=$(ms)
    "$BIN/hetps" status "$T/cluster.json" > "$T/status.txt" 2>&1 || { cat "$T/status.txt"; fail "hetps status failed while six peers held 400 MiB announcements"; }
    dt=$(( $(ms) - t0 ))
    times="$times $dt"
    [ $dt -gt $worst ] && worst=$dt
    grep -q "^ps:0 .* up " "$T/status.txt" || { cat "$T/status.txt"; fail "ps:0 is not up in the status"; }
    sleep 1
done
echo "hetps status took (ms):$times"
[ $worst -lt 2000 ] || fail "hetps status took $worst ms while six peers held their connections"
ok "hetps status answered in $worst ms at worst while six peers held 400 MiB announcements"

during=$(rss)
echo "ps:0 resident: $((start / 1024)) MiB at the start, $((during / 1024)) MiB while six peers held 6 x 400 MiB announced"
[ $((during - start)) -lt $((200 * 1024)) ] || fail "ps:0 grew by $(((during - start) / 1024)) MiB on announcements"
ok "ps:0 grew by $(((during - start) / 1024)) MiB, not 2400"

wait $H || { cat "$T/hostile.log"; tail -5 "$T/ps-0.log"; fail "hostile announce"; }
cat "$T/hostile.log"
grep -q "HETPS_RECV_BUDGET" "$T/ps-0.log" && { grep "HETPS_RECV_BUDGET" "$T/ps-0.log" | head -2; fail "ps:0 refused a peer on its budget"; }
ok "ps:0 kept all six connections under a 1 GiB budget"

settle_rss $PS0 $start $((64 * 1024))
echo "ps:0 resident after they left: $((after / 1024)) MiB"
[ $((after - start)) -lt $((64 * 1024)) ] || fail "ps:0 stayed $(((after - start) / 1024)) MiB above its start after the peers left"
"$BIN/hetps" status "$T/cluster.json" > /dev/null 2>&1 || fail "ps:0 does not answer after the peers left"
ok "ps:0 back to $((after / 1024)) MiB (started at $((start / 1024))) and serving"
