#!/bin/sh
# rows_scale.sh [FILL] [BATCH] [ROUNDS] — the row-sparse scale check of
# issue #40 (not part of `make test` or `make bench`: 50 M ids take
# minutes). Two parameter servers on loopback (plain TCP, async), and
# tests/bench/rows_scale.c as worker 0: a table of 2^40 rows of 16 floats
# (Adagrad) fed FILL distinct ids (default 50,000,000, ascending) in
# pushes of 100,000, a table of 10^5 rows fed whole, the stores fsync'd,
# then ROUNDS (20) rounds of pull + push of BATCH (10,000) random stored
# rows from each; the large table's rate over the small one's is the
# ratio. While it runs, each shard's anonymous resident memory (RssAnon in
# /proc/PID/status: the process's own; the stores' LMDB pages are
# file-backed) is read every 2 s (printed every minute), and after the
# rounds its page tables (VmPTE: the store's pages mapped into it). Printed after
# the rounds: the milliseconds a round's pull and push took for each
# table, and each shard's page faults, disk reads and bytes dirtied during
# the rounds (/proc/PID/stat and /proc/PID/io). The last line:
#
#   rows_scale: FILL ids filled in S s, 2^40 table X rows/s, 10^5 table Y
#   rows/s, ratio R; RssAnon peak ps:0 A MiB ps:1 B MiB, after … (page
#   tables …); stores (in use/on disk) …; PASS or FAIL (why)
#
# PASS when the ratio is at least 0.5 and every shard's peak RssAnon is
# under 1 GiB. Exit status 0 on PASS, 1 on FAIL or error. Processes are
# stopped by pid, the stores removed (8 GiB of disk each at 50 M ids, half
# of it in use: the script refuses to start with less than 400 bytes an id
# free in TMPDIR).
set -eu
cd "$(dirname "$0")/../.."
BIN=${HETPS_BIN:-bin}
B=${HETPS_BUILD:-build/rel}
FILL=${1:-50000000}
BATCH=${2:-10000}
ROUNDS=${3:-20}
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-rows-scale-XXXXXX")
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null || true; done; rm -rf "$T"' EXIT INT TERM
need=$(( FILL / 2621 + 1024 ))      # MiB: 400 B an id (a row's ~170 B, reserved twice)
free=$(( $(df -Pk "$T" | awk 'NR == 2 {print $4}') / 1024 ))
if [ "$free" -lt "$need" ]; then
    echo "rows_scale.sh: $T has $free MiB free; $FILL ids need about $need MiB: set TMPDIR to a larger disk" >&2
    exit 1
fi
PORT=$(( 27000 + ( $(od -An -N2 -tu2 /dev/urandom) % 100 ) * 10 ))
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))"] },
  "hetps": { "mode": "async", "insecure": true } }
JSON
SHARDS=""
for j in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$j --data-dir "$T/ps-$j" \
        > "$T/ps-$j.log" 2>&1 &
    PIDS="$PIDS $!" SHARDS="$SHARDS $!"
done
anon() { a=$(sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null); echo "${a:-0}"; }
pte() { a=$(sed -n 's/^VmPTE:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null); echo "${a:-0}"; }
for p in $SHARDS; do echo 0 > "$T/peak-$p"; done
(
    k=0
    while :; do
        line=""
        for p in $SHARDS; do
            a=$(anon "$p")
            [ "$a" -gt "$(cat "$T/peak-$p")" ] && echo "$a" > "$T/peak-$p"
            line="$line $(( a / 1024 ))"
        done
        k=$((k + 1))
        [ $((k % 30)) -ne 0 ] || echo "  [$((k * 2)) s] shards' RssAnon (MiB):$line"
        sleep 2
    done
) &
SAMPLER=$!
PIDS="$PIDS $SAMPLER"
echo "\$ rows_scale $FILL $BATCH $ROUNDS (2 shards, async, plain TCP) — $(date -u +%FT%TZ)"
for j in 0 1; do                # the stores exist once the shards are up
    k=0
    while [ ! -f "$T/ps-$j/data.mdb" ] && [ $k -lt 100 ]; do sleep 0.1; k=$((k + 1)); done
done
# A shard's major page faults (reads of the store from disk), and bytes
# it made the kernel read and write (pages dirtied, counted by the folio).
faults() { awk '{print $12}' "/proc/$1/stat" 2>/dev/null || echo 0; }
minflt() { awk '{print $10}' "/proc/$1/stat" 2>/dev/null || echo 0; }
rbytes() { sed -n 's/^read_bytes: //p' "/proc/$1/io" 2>/dev/null || echo 0; }
wbytes() { sed -n 's/^write_bytes: //p' "/proc/$1/io" 2>/dev/null || echo 0; }
: > "$T/client.log"
"$B/bench/rows_scale" "$T/cluster.json" "$FILL" "$BATCH" "$ROUNDS" \
    "$T/ps-0/data.mdb" "$T/ps-1/data.mdb" >> "$T/client.log" 2>&1 &
CLIENT=$!
PIDS="$PIDS $CLIENT"
tail -f "$T/client.log" --pid=$CLIENT &
until grep -q '^rows_scale: fed .* table' "$T/client.log" || ! kill -0 $CLIENT 2>/dev/null; do
    sleep 0.2
done
for p in $SHARDS; do echo "$(faults $p) $(minflt $p) $(rbytes $p) $(wbytes $p)" > "$T/io0-$p"; done
wait $CLIENT || true
res=$(grep '^rows_scale: fill ' "$T/client.log") || { tail -5 "$T/ps-0.log"; exit 1; }
sleep 0.3
j=0
for p in $SHARDS; do
    read f0 m0 r0 w0 < "$T/io0-$p"
    echo "  ps:$j during the rounds: $(( $(faults $p) - f0 )) major and $(( $(minflt $p) - m0 )) minor page faults, $(( ($(rbytes $p) - r0) >> 20 )) MiB read from disk, $(( ($(wbytes $p) - w0) >> 20 )) MiB dirtied"
    j=$((j + 1))
done
sleep 2                         # one more sample after the rounds
kill "$SAMPLER" 2>/dev/null || true
j=0 peaks="" after="" stores="" over=0
for p in $SHARDS; do
    pk=$(( $(cat "$T/peak-$p") / 1024 ))
    [ "$pk" -lt 1024 ] || over=1
    peaks="$peaks ps:$j $pk MiB"
    after="$after ps:$j $(( $(anon "$p") / 1024 )) MiB (page tables $(( $(pte "$p") / 1024 )) MiB)"
    used=$(mdb_stat -e "$T/ps-$j" 2>/dev/null | awk '/Number of pages used/ {print int($5 * 4096 / 1048576)}')
    stores="$stores ps:$j ${used:-?}/$(( $(du -k "$T/ps-$j/data.mdb" | cut -f1) / 1024 )) MiB"
    j=$((j + 1))
done
ratio=$(echo "$res" | sed 's/.*ratio \([0-9.]*\).*/\1/')
verdict=PASS
awk -v r="$ratio" 'BEGIN { exit !(r >= 0.5) }' || verdict="FAIL (ratio below 0.5)"
[ $over -eq 0 ] || verdict="FAIL (RssAnon 1 GiB or more)"
echo "$res" | sed 's/^rows_scale: fill \([0-9]*\) ids \([0-9]*\) s; .*: 2^40 table \([0-9]*\) rows\/s, 10^5 table \([0-9]*\) rows\/s, ratio \([0-9.]*\)$/rows_scale: \1 ids filled in \2 s, 2^40 table \3 rows\/s, 10^5 table \4 rows\/s, ratio \5;/' |
    tr -d '\n'
echo " RssAnon peak$peaks, after$after; stores (in use/on disk)$stores; $verdict"
[ "$verdict" = PASS ]
