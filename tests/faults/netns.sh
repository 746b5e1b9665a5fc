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
#   - holds every packet into ps:0 for 100 ms (tests/tools/nfdelay on an
#     NFQUEUE rule: this kernel has no netem) and checks that pushes slowed,
# and at the end every parameter must equal the number of pushes: nothing
# applied twice, nothing acknowledged lost. Then the worker is killed with
# SIGKILL mid-run and started again: it must find every acknowledged push
# applied and at most its in-flight ones more. The network and the faults
# come from netns.inc (shared with netns_train.sh, which trains through
# them). Every loop is bounded; the namespaces and processes are removed
# at exit, also on failure. Needs root, ip and iptables; otherwise it
# is skipped.
. "$(dirname "$0")/netns.inc"
netns_up hf 10.211.0 ps0 ps1 w0
netns_cluster
start_ps 0
start_ps 1
wait_servers
ok "3 hosts on a bridge, each in its own network namespace"
PUSHES=3000
# First, every packet into ps:0 held 100 ms: each push's round trip takes
# at least that, so 20 whole pushes take 2 s (~10 ms without the delay).
# (It comes first because the counter, undelayed, is done in seconds.)
delay_into ps0 100
in_ns_bg w0 "$B/tools/counter" "$T/cluster.json" $PUSHES > "$T/counter.log" 2>&1
cpid=$!
track $cpid
tens() { grep -c 'pushes acknowledged' "$T/counter.log"; }
i=0
while [ "$(tens)" -lt 1 ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
t0=$(date +%s%N)
while [ "$(tens)" -lt 3 ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
delay_off ps0
[ "$(tens)" -ge 3 ] || { cat "$T/counter.log"; fail "the counter stalled with ps:0's packets delayed"; }
[ $ms -ge 1800 ] || fail "20 pushes took $ms ms with 100 ms of delay into ps:0: the delay did not apply"
ok "every packet into ps:0 held 100 ms (nfdelay): 20 pushes took $ms ms"
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
link_down ps1; sleep 5
link_up ps1
ok "ps:1's link cut for 5 s"
wait_acked 16
drop_into ps0 0.05
wait_acked 22
drop_off ps0
ok "5 % of the packets into ps:0 dropped for 600 pushes"

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
in_ns_bg w0 "$B/tools/counter" "$T/cluster.json" 2000 > "$T/counter2.log" 2>&1
cpid=$!
track $cpid
i=0
while [ "$(grep -c 'pushes acknowledged' "$T/counter2.log")" -lt 30 ] && [ $i -lt 300 ]; do
    sleep 0.1; i=$((i + 1))
done
kill -KILL $cpid; wait $cpid 2>/dev/null
lo=$(( PUSHES + 10 * $(grep -c 'pushes acknowledged' "$T/counter2.log") ))
in_ns w0 "$B/tools/counter" "$T/cluster.json" 200 > "$T/counter3.log" 2>&1 ||
    { cat "$T/counter3.log"; fail "the restarted counter failed"; }
start=$(sed -n 's/^counter: starting at \([0-9]*\)\..*/\1/p' "$T/counter3.log")
end=$(sed -n 's/^counter: starting at .* to \([0-9]*\)\..*/\1/p' "$T/counter3.log")
[ -n "$start" ] && [ -n "$end" ] && [ "$start" -ge "$lo" ] && [ "$end" -le $((lo + 10)) ] ||
    fail "after the kill the values were $start..$end; acknowledged pushes put them in [$lo, $((lo + 10))]"
ok "worker killed with SIGKILL and restarted: it found $start..$end (acknowledged at least $lo, at most 10 more in flight or unreported: each applied at most once), then 200 more exactly"
