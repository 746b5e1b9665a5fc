#!/bin/sh
# netns.sh — faults on a real (virtual) network. Each parameter server and
# the worker run in a network namespace of their own, joined by a bridge
# that lives in a namespace of its own too (so the host's firewall never
# sees it). While a counter worker (tests/tools/counter: SGD with learning
# rate 1, every push adds exactly 1.0) makes 3000 pushes, the harness
#   - kills ps:0 with SIGKILL at random moments and restarts it (10 trials),
#   - pauses ps:1 with SIGSTOP for 3 s (past the client's 1 s timeout),
#   - cuts ps:1's link for 5 s,
#   - drops 5 % of the packets into ps:0 (iptables statistic),
#   - delays ps:0's traffic through a tbf shaper (~100 ms of queue),
# and at the end every parameter must equal the number of pushes: nothing
# applied twice, nothing acknowledged lost. Then the worker is killed with
# SIGKILL mid-run and started again: it must find every acknowledged push
# applied and at most its in-flight ones more. Every loop is bounded; the
# namespaces and processes are removed at exit, also on failure.
# Needs root (network namespaces); otherwise it is skipped.
set -u
B=${HETPS_BUILD:-build/rel}
BIN=${HETPS_BIN:-bin}
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v iptables >/dev/null; then
    echo "skipped: needs root, ip and iptables for network namespaces"
    exit 77
fi
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-faults-XXXXXX")
P="hf$$"            # namespace prefix, unique per run
NETS="b ps0 ps1 w0"
PIDS=""
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }
cleanup() {
    for p in $PIDS; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    for n in $NETS; do ip netns del "$P$n" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT INT TERM

# The bridge namespace and one namespace per host, 10.211.0.0/24 inside.
ip netns add "${P}b" || fail "cannot create network namespaces"
ip netns exec "${P}b" ip link add br0 type bridge
ip netns exec "${P}b" ip link set br0 up
host=10
for n in ps0 ps1 w0; do
    ip netns add "$P$n"
    ip link add "$P$n-a" type veth peer name "$P$n-b"
    ip link set "$P$n-a" netns "$P$n"
    ip link set "$P$n-b" netns "${P}b"
    ip netns exec "$P$n" ip link set "$P$n-a" name eth0
    ip netns exec "$P$n" ip addr add "10.211.0.$host/24" dev eth0
    ip netns exec "$P$n" ip link set eth0 up
    ip netns exec "$P$n" ip link set lo up
    ip netns exec "${P}b" ip link set "$P$n-b" master br0
    ip netns exec "${P}b" ip link set "$P$n-b" up
    host=$((host + 1))
done

cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["10.211.0.10:2222", "10.211.0.11:2222"],
               "worker": ["10.211.0.12:2222"] } }
JSON
start_ps() {
    ip netns exec "${P}ps$1" "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$1 \
        --data-dir "$T/ps-$1" >> "$T/ps-$1.log" 2>&1 &
    eval "ps$1=\$!"
    PIDS="$PIDS $!"
}
start_ps 0
start_ps 1
i=0
until ip netns exec "${P}w0" "$BIN/hetps" status "$T/cluster.json" >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -lt 50 ] || fail "the worker's namespace does not reach the servers"
    sleep 0.2
done
ok "3 hosts on a bridge, each in its own network namespace"
PUSHES=3000
ip netns exec "${P}w0" "$B/tools/counter" "$T/cluster.json" $PUSHES > "$T/counter.log" 2>&1 &
cpid=$!
PIDS="$PIDS $cpid"
acked() { echo $(( $(grep -c 'pushes acknowledged' "$T/counter.log") / 10 )); }
# wait_acked N: until N hundred pushes are acknowledged (bounded: 60 s).
wait_acked() {
    i=0
    while [ "$(acked)" -lt "$1" ] && [ $i -lt 300 ]; do
        kill -0 $cpid 2>/dev/null || { cat "$T/counter.log"; fail "the counter exited early"; }
        sleep 0.2; i=$((i + 1))
    done
    [ "$(acked)" -ge "$1" ] || { cat "$T/counter.log"; fail "the counter stalled"; }
}

wait_acked 1
trial=1
while [ $trial -le 10 ]; do
    sleep "0.$(od -An -N1 -tu1 /dev/urandom | tr -d ' ' | cut -c1)"
    kill -KILL $ps0; wait $ps0 2>/dev/null
    start_ps 0
    trial=$((trial + 1))
done
ok "ps:0 killed with SIGKILL at 10 random moments and restarted"
wait_acked 8
kill -STOP $ps1; sleep 3; kill -CONT $ps1
ok "ps:1 paused for 3 s"
wait_acked 12
ip netns exec "${P}b" ip link set "${P}ps1-b" down; sleep 5
ip netns exec "${P}b" ip link set "${P}ps1-b" up
ok "ps:1's link cut for 5 s"
wait_acked 16
ip netns exec "${P}ps0" iptables -A INPUT -m statistic --mode random --probability 0.05 -j DROP
wait_acked 22
ip netns exec "${P}ps0" iptables -F INPUT
ok "5 % of the packets into ps:0 dropped for 600 pushes"
ip netns exec "${P}ps0" tc qdisc add dev eth0 root tbf rate 20mbit burst 32kbit latency 100ms
wait_acked 26
ip netns exec "${P}ps0" tc qdisc del dev eth0 root
ok "ps:0's traffic shaped (tbf, 100 ms of queue) for 400 pushes"

i=0
while kill -0 $cpid 2>/dev/null && [ $i -lt 600 ]; do sleep 0.2; i=$((i + 1)); done
wait $cpid
rc=$?
tail -2 "$T/counter.log"
[ $rc -eq 0 ] || { tail -20 "$T/ps-0.log"; fail "values differ from the acknowledged pushes"; }
grep -q "counter: $PUSHES acknowledged, every value $PUSHES.0" "$T/counter.log" || fail "the counter did not finish"
ok "$PUSHES pushes through kills, a pause, a link cut, loss and delay: every value exactly $PUSHES"

# The worker killed with SIGKILL mid-run and started again: the new one
# finds every acknowledged push of the old one applied, plus at most its
# one push in flight, applied at most once.
ip netns exec "${P}w0" "$B/tools/counter" "$T/cluster.json" 2000 > "$T/counter2.log" 2>&1 &
cpid=$!
PIDS="$PIDS $cpid"
i=0
while [ "$(grep -c 'pushes acknowledged' "$T/counter2.log")" -lt 30 ] && [ $i -lt 300 ]; do
    sleep 0.1; i=$((i + 1))
done
kill -KILL $cpid; wait $cpid 2>/dev/null
lo=$(( PUSHES + 10 * $(grep -c 'pushes acknowledged' "$T/counter2.log") ))
ip netns exec "${P}w0" "$B/tools/counter" "$T/cluster.json" 200 > "$T/counter3.log" 2>&1 ||
    { cat "$T/counter3.log"; fail "the restarted counter failed"; }
start=$(sed -n 's/^counter: starting at \([0-9]*\)\..*/\1/p' "$T/counter3.log")
end=$(sed -n 's/^counter: starting at .* to \([0-9]*\)\..*/\1/p' "$T/counter3.log")
[ -n "$start" ] && [ -n "$end" ] && [ "$start" -ge "$lo" ] && [ "$end" -le $((lo + 10)) ] ||
    fail "after the kill the values were $start..$end; acknowledged pushes put them in [$lo, $((lo + 10))]"
ok "worker killed with SIGKILL and restarted: it found $start..$end (acknowledged at least $lo, at most 10 more in flight or unreported: each applied at most once), then 200 more exactly"
