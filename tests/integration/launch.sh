#!/bin/sh
# launch.sh — `hetps launch` of 2 parameter servers and 2 workers on
# loopback: every worker joins every shard, `hetps status` lists all four
# tasks, garbage sent to both live shards is refused while the workers stay
# joined, and the job ends cleanly with prefixed output.
. "$(dirname "$0")/lib.inc"
pick_ports
cluster2 '{ "workers": [ {"devices": "cpu"}, {"devices": "cpu"} ] }'

"$BIN/hetps" launch --data-dir "$T/data" --ps-arg=--max-message=1048576 \
    "$T/cluster.json" -- --linger 15 --print-view > "$T/launch.log" 2>&1 &
LPID=$!
track $LPID

both_joined() {
    "$BIN/hetps" status "$T/cluster.json" > "$T/status.txt" 2>&1 || return 1
    joined_in_status
}
joined_in_status() { [ "$(grep -c '^worker:.*ps:0 joined.*ps:1 joined' "$T/status.txt")" -eq 2 ]; }
wait_for 15 both_joined || { cat "$T/status.txt" "$T/launch.log"; fail "workers did not join both shards"; }
cat "$T/status.txt"
for task in ps:0 ps:1 worker:0 worker:1; do
    grep -q "^$task " "$T/status.txt" || fail "status does not list $task"
done
grep -q '^ps:0 .* up ' "$T/status.txt" || fail "ps:0 not up"
ok "status lists all four tasks, both workers joined on both shards"

"$B/tools/poke" garbage "$T/cluster.json" 0 || fail "garbage to ps:0"
"$B/tools/poke" garbage "$T/cluster.json" 1 || fail "garbage to ps:1"
need_status "$T/cluster.json" "$T/status.txt"
joined_in_status || { cat "$T/status.txt"; fail "workers lost after garbage"; }
grep -q 'ps:0 .*rejected [1-9]' "$T/status.txt" || fail "ps:0 counted no rejected message"
ok "servers refused garbage and kept serving the workers"

launcher_gone() { ! kill -0 $LPID 2>/dev/null; }
wait_for 30 launcher_gone || { cat "$T/launch.log"; "$BIN/hetps" status "$T/cluster.json"; fail "hetps launch still running 30 s after the workers' linger"; }
wait $LPID
rc=$?
PIDS=""
tail -20 "$T/launch.log"
[ $rc -eq 0 ] || fail "hetps launch exited $rc"
grep -q '^\[ps:0\] ' "$T/launch.log" || fail "no [ps:0] prefixed output"
grep -q '^\[worker:1\] ' "$T/launch.log" || fail "no [worker:1] prefixed output"
grep -q '^\[worker:0\]   ps:1 ' "$T/launch.log" || fail "worker:0 printed no view of ps:1"
grep -q 'parameter servers told to shut down' "$T/launch.log" || fail "no shutdown"
ok "launch exited 0 after the workers left and the servers shut down"

# Ctrl-C: the launcher forwards it, every task stops, exit 130.
"$BIN/hetps" launch --data-dir "$T/data2" "$T/cluster.json" -- --linger 120 \
    > "$T/launch2.log" 2>&1 &
LPID=$!
track $LPID
wait_for 15 both_joined || { cat "$T/launch2.log"; fail "second launch did not come up"; }
kill -INT $LPID
wait_for 15 launcher_gone || { cat "$T/launch2.log"; fail "launcher still running 15 s after SIGINT"; }
wait $LPID
rc=$?
PIDS=""
[ $rc -eq 130 ] || { cat "$T/launch2.log"; fail "launcher exited $rc after SIGINT, not 130"; }
left=$(pgrep -f "$T/cluster.json" | wc -l)
[ "$left" -eq 0 ] || { pgrep -af "$T/cluster.json"; fail "$left task(s) still running after Ctrl-C"; }
grep -q 'worker:1\] .*left the cluster' "$T/launch2.log" || { cat "$T/launch2.log"; fail "worker:1 did not leave cleanly"; }
ok "Ctrl-C stops every task (workers leave), exit 130"
