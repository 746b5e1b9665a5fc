#!/bin/sh
# ctr_stream.sh — click-through files are streamed, never loaded whole
# (issue #40): a generated Criteo file of ROWS lines (1,000,000 by
# default, about 260 MB) trains 40 steps of a worker against one shard.
# The worker's peak resident memory (VmHWM, as /usr/bin/time's %M reads
# it) must stay below an eighth of the file's size — a worker that held
# the file's samples (65 floats a line, 260 bytes) would peak above the
# file's size —, and a second worker on the first 10 % of the file peaks
# within 16 MiB of it: memory does not grow with the file.
. "$(dirname "$0")/lib.inc"
# ASan's shadow memory and quarantine are part of a sanitized worker's
# resident memory: the bound below measures our own.
[ "$B" = build/san ] && { echo "skipped: peak memory is not ours under the sanitizers (build/san)"; exit 77; }
pick_ports
GEN=$B/tools/ctrgen
[ -x "$GEN" ] || fail "build $GEN first (make all)"
ROWS=${CTR_STREAM_ROWS:-1000000}
$GEN --seed 11 --train-rows "$ROWS" --test-rows 10 --vocab 1000 \
    "$T/train.tsv" "$T/test.tsv" > /dev/null || fail "ctrgen failed"
head -n $((ROWS / 10)) "$T/train.tsv" > "$T/tenth.tsv"
ctr_cat_model "$T/cat.json" 256
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] },
  "hetps": { "mode": "async" } }
JSON
start_ps 0
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "the shard did not start"

# peak FILE NAME: 40 steps on criteo:FILE; the worker's peak RSS (kB)
# into $peak, its log $T/NAME.log.
peak() {
    /usr/bin/time -f 'peak %M' -o "$T/$2.time" \
        "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 \
        --model "$T/cat.json" --data "criteo:$1" --no-eval --max-steps 40 \
        > "$T/$2.log" 2>&1 || { tail -20 "$T/$2.log"; fail "training on $1"; }
    peak=$(sed -n 's/^peak \([0-9]*\)$/\1/p' "$T/$2.time")
    [ -n "$peak" ] || { cat "$T/$2.time"; fail "no peak RSS for $2"; }
}
t0=$(date +%s)
peak "$T/train.tsv" whole
t1=$(date +%s)
grep -q "$ROWS samples" "$T/whole.log" || { tail "$T/whole.log"; fail "the worker did not see the file's $ROWS lines"; }
size_kb=$(( $(stat -c %s "$T/train.tsv") / 1024 ))
[ "$peak" -lt $((size_kb / 8)) ] ||
    fail "worker on a $size_kb kB file peaked at $peak kB (want below an eighth of the file)"
ok "worker on $ROWS lines ($size_kb kB): peak RSS $peak kB ($(awk -v p="$peak" -v s="$size_kb" 'BEGIN { printf "%.3f", p / s }') of the file), $((t1 - t0)) s"
whole=$peak
# A new job on a tenth of the file (its store reset): the same peak.
stop_within 30 $ps0
rm -rf "$T/data"
start_ps 0
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "the shard did not start again"
peak "$T/tenth.tsv" tenth
[ $((whole - peak)) -lt 16384 ] ||
    fail "worker peaked at $whole kB on the whole file, $peak kB on a tenth of it: memory grows with the file"
ok "on a tenth of the file: peak RSS $peak kB; the whole file's is within 16 MiB of it"
stop_within 30 $ps0
