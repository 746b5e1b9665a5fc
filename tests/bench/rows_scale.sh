#!/bin/sh
# rows_scale.sh [FILL] [BATCH] [ROUNDS] — the row-sparse scale check (not
# part of `make test` or `make bench`: 50 M ids take long on a small
# machine). Two parameter servers on loopback (plain TCP, async), and
# tests/bench/rows_scale.c as worker 0: a table of 2^40 rows of 16 floats
# (Adagrad) fed FILL distinct random ids (default 50,000,000) in pushes
# of 50,000, a table of 10^5 rows fed whole, then ROUNDS (20) rounds of
# pull + push of BATCH (10,000) random rows from each, the large table's
# rate over the small one's printed. While it runs, each shard's
# anonymous resident memory (RssAnon in /proc/PID/status: the process's
# own; the stores' LMDB pages are file-backed) is read every 2 s (printed
# every minute); its peak and last value are printed per shard with the
# store's size.
# Processes are stopped by pid, the stores removed.
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
anon() { sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null || echo 0; }
for p in $SHARDS; do echo 0 > "$T/peak-$p"; done
(
    k=0
    while :; do
        line=""
        for p in $SHARDS; do
            a=$(anon "$p")
            [ -n "$a" ] && [ "$a" -gt "$(cat "$T/peak-$p")" ] && echo "$a" > "$T/peak-$p"
            line="$line $(( ${a:-0} / 1024 ))"
        done
        k=$((k + 1))
        [ $((k % 30)) -ne 0 ] || echo "  [$((k * 2)) s] shards' RssAnon (MiB):$line"
        sleep 2
    done
) &
SAMPLER=$!
PIDS="$PIDS $SAMPLER"
echo "\$ rows_scale $FILL $BATCH $ROUNDS (2 shards, async, plain TCP) — $(date -u +%FT%TZ)"
start=$(date +%s)
"$B/bench/rows_scale" "$T/cluster.json" "$FILL" "$BATCH" "$ROUNDS" 2>&1 | tee "$T/client.log"
grep -q 'large / small' "$T/client.log" || { tail -5 "$T/ps-0.log"; exit 1; }
echo "  wall: $(( $(date +%s) - start )) s"
kill "$SAMPLER" 2>/dev/null || true
j=0
for p in $SHARDS; do
    echo "  ps:$j RssAnon peak $(( $(cat "$T/peak-$p") / 1024 )) MiB, now $(( $(anon "$p") / 1024 )) MiB; store $(( $(du -k "$T/ps-$j/data.mdb" | cut -f1) / 1024 )) MiB"
    j=$((j + 1))
done
