#!/bin/sh
# ctr_speed.sh — issue #40's speed figures in one run: the click-through
# model of ctr.sh (embeddings 16 over 26 ids, one table of input_dim DIM,
# concatenated with 13 numeric fields, Dense 256/128/1, BCE, Keras's
# Adagrad, batch 512) trained one epoch of a tests/tools/ctrgen file
# (ROWS rows, vocabularies to VOCAB, Zipf ids, seed 1) by
#   torch  tests/bench/torch_ctr.py, 1 thread (its fastest single process
#          on this machine; parsing not counted, as it reads the file first)
#   1+1    hetps, 1 shard and 1 async worker
#   2+2    hetps, 2 shards and 2 async workers (each half the file)
#   1+1 and 2+2 --overlap, the same with each worker's exchange (one
#          request per shard: the rows' gradients, the dense
#          push-and-pull and the rows two batches ahead) on a thread
#          while it computes the next step (worker/README.md)
#   torch  again with OPENBLAS_NUM_THREADS=1: Debian's torch at 1 thread
#          still runs OpenBLAS's 2 threads unless told; the ratios are
#          against the faster of the two
# in rounds, each round running all of them one after the other (RUNS
# rounds), and prints each one's median samples/s (hetps: the sum of its
# workers' "this worker N samples/s", which count every step from the
# first pull to the last push, reading and parsing the file included) and
# the ratios, then the sparse bytes a step against the issue's formula
# unique ids × output_dim × 4 × 2 + ids × 8: worker:0's rows pulled and
# pushed, both ways (their share of the step's messages: ids, rows or
# gradients, their RowsRefs and TensorRefs in the protobuf header; a
# forward's own PullRows whole; not TCP's or TLS's framing), a pull's and
# a push's, from its "tables:" line.
# Beside the speeds, the CPU time a batch of 512 (median): torch's epoch
# loop (time.process_time), hetps's whole job (every process of `hetps
# launch`, start-up included, by /usr/bin/time): on a machine shared with
# other work, CPU time says what each would make of a core of its own,
# and a job of several processes is given more of a loaded machine's
# cores than one process is.
# Environment: ROWS (200000), VOCAB (100000), DIM (2^23), LR (0.1), RUNS
# (3), PLAIN (1: plain TCP, "insecure": true; 0: mutual TLS, hetps's
# default),
# PYTHON (/usr/bin/python3), HETPS_BIN (bin), BASE_BIN (unset: a copy of
# another build's bin/ to run in each round as well, its 1+1 and 2+2
# printed beside: before and after a change in one run), CTRGEN
# (build/rel/tools/ctrgen).
set -eu
cd "$(dirname "$0")/../.."
ROWS=${ROWS:-200000}
VOCAB=${VOCAB:-100000}
RUNS=${RUNS:-3}
PLAIN=${PLAIN:-1}
[ -x /usr/bin/time ] ||
    { echo "ctr speed: needs /usr/bin/time (Debian: apt-get install time)" >&2; exit 1; }
. tests/bench/ctr.inc
[ "$PLAIN" = 1 ] && extra=', "insecure": true' || extra=''

ctr_model ''

# cluster N — a cluster file of N shards and N async workers.
cluster() {
    ps="" wk="" i=0
    while [ "$i" -lt "$1" ]; do
        ps="$ps${ps:+, }\"127.0.0.1:$((PORT + i))\""
        wk="$wk${wk:+, }\"127.0.0.1:$((PORT + 50 + i))\""
        i=$((i + 1))
    done
    printf '{ "cluster": { "ps": [%s], "worker": [%s] },\n  "hetps": { "mode": "async"%s } }\n' \
        "$ps" "$wk" "$extra" > "$T/cluster$1.json"
}

# hetps N [BIN] [WORKER FLAGS] — one epoch on N shards and N workers:
# $RATE the workers'
# samples/s summed; $UNIQ, $PULLED, $PUSHED (KiB, whole messages a pull
# and a push) from worker:0's tables line.
hetps() {
    rm -rf "$T/data"
    # shellcheck disable=SC2086
    /usr/bin/time -f '%U %S' -o "$T/cpu" \
        "${2:-$BIN}/hetps" launch --data-dir "$T/data" "$T/cluster$1.json" -- \
        --model "$T/ctr.json" --data "criteo:$T/train.tsv" --no-eval ${3:-} \
        > "$T/hetps$1.log" 2>&1 ||
        { tail -20 "$T/hetps$1.log"; echo "ctr speed: the hetps job ($1+$1) failed" >&2; exit 1; }
    grep -E 'samples/s, per step|tables:' "$T/hetps$1.log" | sed 's/^/  /'
    CPU=$(awk -v n="$ROWS" '{ printf "%.2f", 1e3 * ($1 + $2) * 512 / n }' "$T/cpu")
    echo "  hetps $1+$1${3:+ $3}: $CPU ms CPU a batch (every process)"
    RATE=$(sed -n 's/.*this worker \([0-9.]*\) samples\/s.*/\1/p' "$T/hetps$1.log" |
           awk '{ s += $1 } END { print s + 0 }')
    line=$(grep '\[worker:0\].*tables:' "$T/hetps$1.log")
    UNIQ=$(echo "$line" | sed -n 's/.*tables: \([0-9.]*\) unique rows.*/\1/p')
    PULLED=$(echo "$line" | sed -n 's/.*both ways: \([0-9.]*\) KiB a pull.*/\1/p')
    PUSHED=$(echo "$line" | sed -n 's/.* \([0-9.]*\) KiB a push.*/\1/p')
    [ -n "$UNIQ" ] && [ -n "$PULLED" ] && [ -n "$PUSHED" ] ||
        { echo "ctr speed: no tables line in the $1+$1 log" >&2; exit 1; }
}

# torch_rate [ENV] — torch_ctr.py's epoch, run under env ENV (such as
# OPENBLAS_NUM_THREADS=1): $RATE, $CPU (ms a batch).
torch_rate() {
    # shellcheck disable=SC2086
    env ${1:-} "$PY" tests/bench/torch_ctr.py --input-dim "$DIM" --batch 512 --lr 0.1 \
        --threads 1 --seed 42 "$T/train.tsv" "$T/test.tsv" > "$T/torch.log"
    grep 'epoch 1' "$T/torch.log" | sed "s/^/  ${1:+$1 }/"
    RATE=$(sed -n 's/.*: \([0-9.]*\) samples\/s.*/\1/p' "$T/torch.log")
    CPU=$(sed -n 's/.*; \([0-9.]*\) ms CPU a batch.*/\1/p' "$T/torch.log")
    [ -n "$RATE" ] || { echo "ctr speed: no samples/s from torch_ctr.py" >&2; exit 1; }
}

cluster 1
cluster 2
torch_all="" torch1_all="" one_all="" two_all="" base1_all="" base2_all=""
ov1_all="" ov2_all=""
tcpu="" tcpu1="" cpu1="" cpu2="" bcpu1="" bcpu2="" ocpu1="" ocpu2=""
r=1
while [ "$r" -le "$RUNS" ]; do
    echo "ctr speed: round $r of $RUNS"
    torch_rate
    torch_all="$torch_all $RATE"
    tcpu="$tcpu $CPU"
    torch_rate OPENBLAS_NUM_THREADS=1
    torch1_all="$torch1_all $RATE"
    tcpu1="$tcpu1 $CPU"
    hetps 1
    one_all="$one_all $RATE"
    cpu1="$cpu1 $CPU"
    bytes1="$UNIQ $PULLED $PUSHED"
    hetps 2
    two_all="$two_all $RATE"
    cpu2="$cpu2 $CPU"
    bytes2="$UNIQ $PULLED $PUSHED"
    hetps 1 "$BIN" --overlap
    ov1_all="$ov1_all $RATE"
    ocpu1="$ocpu1 $CPU"
    hetps 2 "$BIN" --overlap
    ov2_all="$ov2_all $RATE"
    ocpu2="$ocpu2 $CPU"
    if [ -n "${BASE_BIN:-}" ]; then
        hetps 1 "$BASE_BIN"
        base1_all="$base1_all $RATE"
        bcpu1="$bcpu1 $CPU"
        hetps 2 "$BASE_BIN"
        base2_all="$base2_all $RATE"
        bcpu2="$bcpu2 $CPU"
    fi
    r=$((r + 1))
done

median() {
    echo "$@" | tr ' ' '\n' | grep . | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
t0=$(median "$torch_all")
t1=$(median "$torch1_all")
t=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print (a > b) ? a : b }')
o=$(median "$one_all")
w=$(median "$two_all")
v1=$(median "$ov1_all")
v2=$(median "$ov2_all")
echo
echo "== click-through speed ($ROWS rows, batch 512, $([ "$PLAIN" = 1 ] && echo "plain TCP" || echo "mutual TLS"), median of $RUNS rounds)"
echo "samples/s each round: torch$torch_all; torch OPENBLAS_NUM_THREADS=1$torch1_all; hetps 1+1$one_all; hetps 2+2$two_all; --overlap 1+1$ov1_all; --overlap 2+2$ov2_all"
awk -v a="$t0" -v b="$t1" -v ca="$(median "$tcpu")" -v cb="$(median "$tcpu1")" 'BEGIN {
    printf "ctr torch, --threads 1: %.0f samples/s at %s ms CPU a batch as Debian runs it (OpenBLAS on its own threads), %.0f at %s ms with OPENBLAS_NUM_THREADS=1; the ratios are against the faster, %.0f\n", a, ca, b, cb, (a > b) ? a : b }'
awk -v t="$t" -v o="$o" -v w="$w" 'BEGIN {
    printf "ctr speed: torch fastest 1-thread process %.0f samples/s; hetps 1 ps + 1 worker %.0f (%.2fx); 2 ps + 2 workers async %.0f (%.2fx)\n", t, o, o / t, w, w / t }'
awk -v t="$t" -v o="$v1" -v w="$v2" 'BEGIN {
    printf "ctr speed --overlap: hetps 1 ps + 1 worker %.0f (%.2fx); 2 ps + 2 workers async %.0f (%.2fx)\n", o, o / t, w, w / t }'
echo "ctr CPU a batch of 512 (median): torch $(median "$tcpu") ms (OPENBLAS_NUM_THREADS=1: $(median "$tcpu1") ms); hetps 1+1 $(median "$cpu1") ms, 2+2 $(median "$cpu2") ms; --overlap 1+1 $(median "$ocpu1") ms, 2+2 $(median "$ocpu2") ms"
if [ -n "${BASE_BIN:-}" ]; then
    b1=$(median "$base1_all")
    b2=$(median "$base2_all")
    echo "samples/s each round, $BASE_BIN: hetps 1+1$base1_all; hetps 2+2$base2_all"
    awk -v t="$t" -v o="$b1" -v w="$b2" -v b="$BASE_BIN" 'BEGIN {
        printf "ctr speed (%s): hetps 1 ps + 1 worker %.0f (%.2fx); 2 ps + 2 workers async %.0f (%.2fx)\n", b, o, o / t, w, w / t }'
    echo "ctr CPU a batch of 512 ($BASE_BIN, median): hetps 1+1 $(median "$bcpu1") ms, 2+2 $(median "$bcpu2") ms"
fi
for b in "1+1 $bytes1" "2+2 $bytes2"; do
    # shellcheck disable=SC2086
    set -- $b
    awk -v c="$1" -v u="$2" -v pl="$3" -v pu="$4" 'BEGIN {
        got = (pl + pu) * 1024; want = u * 16 * 4 * 2 + u * 8
        printf "ctr sparse bytes a step (%s, worker:0): %.0f unique ids, %.0f bytes in its rows messages against the formula %.0f: %.3fx\n", c, u, got, want, got / want }'
done
