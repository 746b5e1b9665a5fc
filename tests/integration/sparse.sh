#!/bin/sh
# sparse.sh — row-sparse tables end to end (tests/tools/rows.c): a model
# with two tables of 2^40 rows on 2 shards, 150 steps of pull rows, check
# against a mirror, push summed gradients of Zipf ids (async). Run once
# without faults, then again while ps:1 is killed with SIGKILL and
# restarted twice and ps:0 once: every row must equal the fault-free
# run's (the rows files are compared byte for byte), each shard's version
# must be exactly the pushes that reached it (nothing applied twice,
# nothing acknowledged lost), and `hetps inspect` must show each table's
# rows on each shard, adding up to the rows touched, as /metrics does;
# `hetps export` refuses the stores, naming the table (not built yet). In
# sync mode a rows push is refused with a sentence, the shards serving on.
. "$(dirname "$0")/lib.inc"
pick_ports

# cluster MODE: $D/cluster.json, 2 shards and a worker in MODE.
cluster() {
    mkdir -p "$D"
    cat > "$D/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))"] },
  "hetps": { "mode": "$1", "metrics_port": $((PORT + 5)) } }
JSON
}

start_ps() {
    "$BIN/hetps-ps" --cluster "$D/cluster.json" --task ps:$1 \
        --data-dir "$D/ps-$1" >> "$D/ps-$1.log" 2>&1 &
    eval "ps$1=\$!"
    track $!
}

# run NAME KILLS: the tool's 150 steps in $T/NAME, with KILLS (yes/no)
# shard kills meanwhile; the rows file $T/NAME/rows.txt.
run() {
    D="$T/$1"
    cluster async
    start_ps 0
    start_ps 1
    wait_for 10 "$BIN/hetps" status "$D/cluster.json" || fail "$1: servers did not start"
    "$B/tools/rows" "$D/cluster.json" 150 "$D/rows.txt" ${3:-0} > "$D/rows.log" 2>&1 &
    rpid=$!
    track $rpid
    if [ "$2" = yes ]; then
        acked() { echo $(( $(grep -c 'steps acknowledged' "$D/rows.log") * 10 )); }
        at_least() { [ "$(acked)" -ge "$1" ]; }
        for k in 1 2 3; do
            wait_for 60 at_least $((k * 30)) || { cat "$D/rows.log"; fail "$1: the tool stalled"; }
            j=$((k % 2))
            eval "kill -KILL \$ps$j; wait \$ps$j 2>/dev/null"
            sleep 0.3
            start_ps $j
            ok "$1: ps:$j killed after $(acked)+ steps and restarted"
        done
    fi
    wait $rpid || { cat "$D/rows.log"; tail -20 "$D/ps-1.log"; fail "$1: the rows tool failed"; }
    tail -4 "$D/rows.log"
    for j in 0 1; do
        want=$(sed -n "s/^rows: ps:$j expects version //p" "$D/rows.log")
        need_version "$D/cluster.json" $j
        [ "$V" = "$want" ] || fail "$1: ps:$j is at version $V, the pushes that reached it $want"
    done
    ok "$1: each shard's version is exactly the pushes that reached it"
    # /metrics: each shard's stored rows of each table, adding up to the
    # rows the tool touched; the pulled-only table none.
    sum=0
    for j in 0 1; do
        /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
            "http://127.0.0.1:$((PORT + 5 + j))/metrics" > "$D/metrics$j.txt" ||
            fail "$1: no /metrics from ps:$j"
        grep -q '^hetps_table_rows{shard="'$j'",variable="3"} 0$' "$D/metrics$j.txt" ||
            { grep hetps_table "$D/metrics$j.txt"; fail "$1: ps:$j's /metrics lacks table 3 at 0 rows"; }
        r=$(sed -n 's/^hetps_table_rows{shard="'$j'",variable="2"} \([0-9]*\)$/\1/p' "$D/metrics$j.txt")
        [ -n "$r" ] || { grep hetps_table "$D/metrics$j.txt"; fail "$1: ps:$j's /metrics lacks table 2"; }
        sum=$((sum + r))
    done
    [ "$sum" -eq "$(wc -l < "$D/rows.txt")" ] ||
        fail "$1: /metrics counts $sum rows of table 2, the tool touched $(wc -l < "$D/rows.txt")"
    ok "$1: /metrics: table 2's rows per shard add up to the $sum touched"
    stop_within 30 $ps0 $ps1
}

run clean no
run faults yes 10
cmp "$T/clean/rows.txt" "$T/faults/rows.txt" ||
    fail "rows after shard kills differ from the fault-free run's"
ok "rows after 3 shard kills equal the fault-free run's ($(wc -l < "$T/clean/rows.txt") rows)"

total=0
for j in 0 1; do
    "$BIN/hetps" inspect "$T/faults/ps-$j" > "$T/inspect$j.txt" 2>&1 ||
        { cat "$T/inspect$j.txt"; fail "hetps inspect ps-$j"; }
    grep -q '^  table 3: 1099511627776 rows of 4, 0 stored here' "$T/inspect$j.txt" ||
        { cat "$T/inspect$j.txt"; fail "ps-$j: table 3 (pulled only) shows stored rows"; }
    n=$(sed -n 's/^  table 2: 1099511627776 rows of 4, \([0-9]*\) stored here/\1/p' "$T/inspect$j.txt")
    [ -n "$n" ] && [ "$n" -gt 0 ] || { cat "$T/inspect$j.txt"; fail "ps-$j: no rows of table 2"; }
    total=$((total + n))
done
[ "$total" -eq "$(wc -l < "$T/clean/rows.txt")" ] ||
    fail "hetps inspect counts $total rows of table 2, the tool touched $(wc -l < "$T/clean/rows.txt")"
ok "hetps inspect: table 2's rows per shard add up to the $total touched"

if "$BIN/hetps" export --data-dir "$T/faults" --out "$T/npy" "$T/faults/cluster.json" > "$T/export.txt" 2>&1; then
    fail "hetps export of a store with tables did not say tables are not exported"
fi
grep -q "embedding/embeddings is a row-sparse table: exporting" "$T/export.txt" ||
    { cat "$T/export.txt"; fail "hetps export's refusal does not name the table"; }
ok "hetps export refuses a model with tables, naming the table"

D="$T/sync"
cluster sync
start_ps 0
start_ps 1
wait_for 10 "$BIN/hetps" status "$D/cluster.json" || fail "sync: servers did not start"
"$B/tools/rows" "$D/cluster.json" 5 "$D/rows.txt" refused > "$D/rows.log" 2>&1 ||
    { cat "$D/rows.log"; fail "sync: a rows push was not refused"; }
grep -q 'not built yet' "$D/rows.log" || { cat "$D/rows.log"; fail "sync: the refusal does not say why"; }
"$BIN/hetps" status "$D/cluster.json" > /dev/null || fail "sync: the shards stopped serving after the refusal"
ok "sync: a rows push is refused with a sentence; the shards serve on"
stop_within 30 $ps0 $ps1
echo "sparse: all passed"
