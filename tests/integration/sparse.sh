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
# `hetps export` writes each table as NAME.ids.npy + NAME.rows.npy. In
# sync mode (tests/tools/rows_sync.c) 50 steps of 2 workers each pushing
# half of every batch give every row, Adam slot and count of 1 worker
# pushing the whole batch (1e-5 relative), and bit for bit the same again
# while ps:1 is killed mid-run and restarted. `hetps reshard` 2 → 3 moves
# every row by hc_row_shard: each reads the same after, slots included.
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
        # Sparse traffic: unique rows and bytes each way, 8 + 4·4 bytes a row.
        for dir in pull push; do
            rows=$(sed -n 's/^hetps_sparse_rows_total{shard="'$j'",direction="'$dir'"} \([0-9]*\)$/\1/p' "$D/metrics$j.txt")
            bytes=$(sed -n 's/^hetps_sparse_bytes_total{shard="'$j'",direction="'$dir'"} \([0-9]*\)$/\1/p' "$D/metrics$j.txt")
            [ -n "$rows" ] && [ "$rows" -gt 0 ] && [ "$bytes" = $((rows * 24)) ] ||
                { grep hetps_sparse "$D/metrics$j.txt"; fail "$1: ps:$j's /metrics: $dir rows $rows, bytes $bytes (24 a row expected)"; }
            grep -q '^hetps_sparse_rows_per_step_count{shard="'$j'",direction="'$dir'"} [1-9]' "$D/metrics$j.txt" ||
                { grep hetps_sparse "$D/metrics$j.txt"; fail "$1: ps:$j's /metrics lacks rows per step ($dir)"; }
        done
    done
    [ "$sum" -eq "$(wc -l < "$D/rows.txt")" ] ||
        fail "$1: /metrics counts $sum rows of table 2, the tool touched $(wc -l < "$D/rows.txt")"
    ok "$1: /metrics: table 2's rows per shard add up to the $sum touched; sparse rows and bytes each way, 24 bytes a row"
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

# hetps export: each table as NAME.ids.npy (sorted, uint64) and
# NAME.rows.npy, gathered from both shards: table 2's pairs must be the
# rows the tool pulled last (rows.txt), table 3 (never pushed) none.
"$BIN/hetps" export --data-dir "$T/faults" --out "$T/npy" "$T/faults/cluster.json" > "$T/export.txt" 2>&1 ||
    { cat "$T/export.txt"; fail "hetps export of a store with tables"; }
/usr/bin/python3 -c "
import numpy as np, sys
d = sys.argv[1]
ids = np.load(d + '/embedding/embeddings.ids.npy'); rows = np.load(d + '/embedding/embeddings.rows.npy')
assert ids.dtype == np.uint64 and rows.dtype == np.float32 and rows.shape == (len(ids), 4), (ids.dtype, rows.shape)
assert (np.diff(ids.astype(np.float64)) > 0).all() or len(ids) < 2, 'ids not ascending'
want = np.loadtxt(sys.argv[2], dtype=np.float64, ndmin=2)
assert len(ids) == len(want), (len(ids), len(want))
assert (ids == want[:, 0].astype(np.uint64)).all(), 'ids differ'  # below 2^40: exact in float64
assert np.array_equal(rows, want[:, 1:].astype(np.float32)), 'rows differ'
e = np.load(d + '/embedding_1/embeddings.ids.npy'); r = np.load(d + '/embedding_1/embeddings.rows.npy')
assert e.shape == (0,) and r.shape == (0, 4), (e.shape, r.shape)
" "$T/npy" "$T/faults/rows.txt" || { cat "$T/export.txt"; fail "the exported tables are not the rows the tool holds"; }
ok "hetps export: table 2 as ids.npy + rows.npy equal to the $(wc -l < "$T/faults/rows.txt") rows pulled; table 3 empty"

# sync_run NAME WORKERS KILL: 50 sync steps of the same batches by WORKERS
# workers (tests/tools/rows_sync.c), each pushing its share of every
# batch's per-position gradients; with KILL=yes ps:1 is killed mid-run and
# restarted. Worker 0's rows in $T/NAME/rows.txt; then the shards are
# stopped and each row's values, Adam slots and count dumped to dump.txt.
sync_run() {
    D="$T/$1"
    mkdir -p "$D"
    workers=
    for w in $(seq 1 $2); do
        workers="$workers${workers:+, }\"127.0.0.1:$((PORT + 1 + w))\""
    done
    cat > "$D/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": [$workers] },
  "hetps": { "mode": "sync", "metrics_port": $((PORT + 5)) } }
JSON
    start_ps 0
    start_ps 1
    wait_for 10 "$BIN/hetps" status "$D/cluster.json" || fail "$1: servers did not start"
    wpids=
    for w in $(seq 0 $(( $2 - 1 ))); do
        "$B/tools/rows_sync" "$D/cluster.json" $w $2 50 "$D/rows.txt" ${4:-0} > "$D/w$w.log" 2>&1 &
        wpids="$wpids $!"
        track $!
    done
    if [ "$3" = yes ]; then
        steps() { echo $(( $(grep -c 'steps$' "$D/w0.log") * 10 )); }
        at_least() { [ "$(steps)" -ge "$1" ]; }
        wait_for 60 at_least 20 || { cat "$D/w0.log"; fail "$1: the workers stalled"; }
        kill -KILL $ps1; wait $ps1 2>/dev/null
        sleep 0.3
        start_ps 1
        ok "$1: ps:1 killed after $(steps)+ sync steps and restarted"
    fi
    for p in $wpids; do
        wait $p || { cat "$D"/w*.log; tail -20 "$D/ps-1.log"; fail "$1: a rows_sync worker failed"; }
    done
    grep -q 'version 50$' "$D/w0.log" || { cat "$D/w0.log"; fail "$1: worker 0 did not end at version 50"; }
    for j in 0 1; do
        need_version "$D/cluster.json" $j
        [ "$V" = 50 ] || fail "$1: ps:$j is at version $V after 50 sync steps"
    done
    stop_within 30 $ps0 $ps1
    "$B/tools/rows_sync" dump "$D/rows.txt" "$D/ps-0" "$D/ps-1" > "$D/dump.txt" ||
        fail "$1: cannot dump the stores' rows"
    ok "$1: 50 sync steps of $2 worker(s), each shard at version 50, $(wc -l < "$D/rows.txt") rows"
}

# same_to A B: every number of files A and B equal to 1e-5 relative.
same_to() {
    awk 'NR == FNR { a[FNR] = $0; n = FNR; next }
         { split(a[FNR], x); if (NF != split(a[FNR], x)) { print "line " FNR ": fields differ"; bad = 1; exit }
           for (i = 1; i <= NF; i++) { d = x[i] - $i; d = d < 0 ? -d : d
             m = x[i] < 0 ? -x[i] : x[i]; m2 = $i < 0 ? -$i : $i; if (m2 > m) m = m2
             if (d > 1e-5 * m + 1e-12) { print "line " FNR " field " i ": " x[i] " vs " $i; bad = 1; exit } } }
         END { if (!bad && FNR != n) { print "lines: " n " vs " FNR; bad = 1 } exit bad }' "$1" "$2"
}

sync_run sync1 1 no
sync_run sync2 2 no
same_to "$T/sync1/dump.txt" "$T/sync2/dump.txt" ||
    fail "sync: 2 workers × 32 positions differ from 1 worker × 64 (values, slots or counts)"
ok "sync: 2 × 32 equals 1 × 64 to 1e-5 relative after 50 steps, $(wc -l < "$T/sync1/dump.txt") rows with Adam's slots and counts"
sync_run syncfault 2 yes 100
cmp "$T/sync2/dump.txt" "$T/syncfault/dump.txt" ||
    fail "sync: rows after ps:1 was killed mid-step differ from the fault-free run's"
ok "sync: every touched row, slot and count after ps:1 was killed equals the fault-free run's"

# hetps reshard 2 → 3 shards: every row moves to hc_row_shard of 3 with its
# slots and count; 3 shards started on the new stores serve every row as
# before (pulled live), and the stopped stores dump the same rows, slots
# and counts.
D="$T/re3"
mkdir -p "$D"
cat > "$D/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))", "127.0.0.1:$((PORT + 4))"],
               "worker": ["127.0.0.1:$((PORT + 2))", "127.0.0.1:$((PORT + 3))"] },
  "hetps": { "mode": "sync", "metrics_port": $((PORT + 5)) } }
JSON
"$BIN/hetps" reshard --from "$T/syncfault/cluster.json" --data-dir "$T/syncfault" \
    --to "$D/cluster.json" --out-dir "$D" > "$D/reshard.log" 2>&1 ||
    { cat "$D/reshard.log"; fail "hetps reshard 2 → 3 of a store with a table"; }
start_ps 0
start_ps 1
start_ps 2
wait_for 10 "$BIN/hetps" status "$D/cluster.json" || fail "re3: servers did not start"
"$B/tools/rows_sync" check "$D/cluster.json" "$T/syncfault/rows.txt" > "$D/check.log" 2>&1 ||
    { cat "$D/check.log"; fail "re3: rows read differently after the reshard"; }
stop_within 30 $ps0 $ps1 $ps2
for j in 0 1 2; do
    "$BIN/hetps" inspect "$D/ps-$j" > "$D/inspect$j.txt" 2>&1 || { cat "$D/inspect$j.txt"; fail "hetps inspect re3/ps-$j"; }
    grep -q '^  table 2: 1099511627776 rows of 4, [1-9][0-9]* stored here' "$D/inspect$j.txt" ||
        { cat "$D/inspect$j.txt"; fail "re3: ps-$j holds no rows of table 2"; }
done
"$B/tools/rows_sync" dump "$T/syncfault/rows.txt" "$D/ps-0" "$D/ps-1" "$D/ps-2" > "$D/dump.txt" ||
    fail "re3: cannot dump the new stores' rows"
cmp "$T/syncfault/dump.txt" "$D/dump.txt" || fail "re3: rows, slots or counts changed in the reshard"
ok "hetps reshard 2 → 3: $(wc -l < "$T/syncfault/rows.txt") rows pulled live as before, spread over 3 shards, slots and counts bitwise"
echo "sparse: all passed"
