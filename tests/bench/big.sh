#!/bin/sh
# big.sh — the 20 M-parameter MLP (deploy/models/fashion_mlp_20m.json:
# flatten → dense 4096 relu → dense 4096 relu → dense 10, Adam, batch 64;
# 80 MB of parameters) trained by real processes on loopback (part of
# `make bench`): 2 parameter servers, 1 worker in sync mode, then 2
# workers in async mode, STEPS steps each (BENCH_BIG_STEPS, 30), over
# mutual TLS (the default; certificates made in a temporary directory);
# then the sync run again over plain TCP ("insecure": true), for the cost
# of security at this size. Prints the chief's step split ("per step X ms
# computing, Y ms in push-and-pull"), its samples/s, and each shard's peak
# RSS (VmHWM) and store file size; last, the async run with each step's
# push-and-pull overlapping the next step's computing (--overlap).
# BENCH_BIG_RUNS ("sync async sync-plain sync-plain-late async-overlap")
# picks the runs — sync-plain-late: each part pushed after backward, not
# during it (--early-push off) — (also async-plain and
# async-overlap-plain); BENCH_BIG_SHARDS (2) the
# number of parameter servers; BENCH_BIG_WORKER_ARGS flags added to every
# worker (tests/gpu/run.sh: --devices gpu:0 --data-dir DIR).
# Processes run on loopback ports of
# their own and are stopped by pid.
set -eu
cd "$(dirname "$0")/../.."
BIN=${HETPS_BIN:-bin}
STEPS=${BENCH_BIG_STEPS:-30}
NS=${BENCH_BIG_SHARDS:-2}
WARGS=${BENCH_BIG_WORKER_ARGS:-}
MODEL=deploy/models/fashion_mlp_20m.json
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-bench-big-XXXXXX")
PIDS=""
trap 'for p in $PIDS; do kill $p 2>/dev/null || true; done; rm -rf "$T"' EXIT INT TERM
# Both shards on this machine: each its share of the cores for a large
# optimizer step, as `hetps launch` gives them.
APPLY_THREADS=$(( $(nproc) > NS ? $(nproc) / NS : 1 ))
PORT=$(( 26000 + ( $(od -An -N2 -tu2 /dev/urandom) % 100 ) * 20 ))

# run NAME MODE N_WORKERS [tls|plain [WORKER_FLAG]]
run() {
    name=$1 mode=$2 nw=$3 extra="" wflag=${5:-}
    [ "${4:-}" = plain ] && extra=', "insecure": true'

    ps="" i=0
    while [ $i -lt "$NS" ]; do
        ps="$ps${ps:+, }\"127.0.0.1:$((PORT + i))\""; i=$((i + 1))
    done
    q0=$((PORT + NS)) q1=$((PORT + NS + 1))
    PORT=$((PORT + NS + 2))
    if [ "$nw" = 1 ]; then workers="\"127.0.0.1:$q0\""; else workers="\"127.0.0.1:$q0\", \"127.0.0.1:$q1\""; fi
    printf '{ "cluster": { "ps": [%s], "worker": [%s] }, "hetps": { "mode": "%s"%s } }\n' \
        "$ps" "$workers" "$mode" "$extra" > "$T/$name.json"
    [ -n "$extra" ] || "$BIN/hetps" certs "$T/$name.json" "$T/certs-$name" > /dev/null
    export HETPS_CERTS="$T/certs-$name"
    PIDS="" SHARDS=""
    i=0
    while [ $i -lt "$NS" ]; do
        "$BIN/hetps-ps" --cluster "$T/$name.json" --task ps:$i --data-dir "$T/$name-$i" \
            --apply-threads "$APPLY_THREADS" > "$T/$name-ps$i.log" 2>&1 &
        PIDS="$PIDS $!" SHARDS="$SHARDS $!" i=$((i + 1))
    done
    if [ "$nw" = 2 ]; then
        "$BIN/hetps-worker" --cluster "$T/$name.json" --task worker:1 --model $MODEL \
            --no-eval --max-steps "$STEPS" $wflag $WARGS > "$T/$name-w1.log" 2>&1 &
        PIDS="$PIDS $!"
    fi
    echo "\$ hetps-worker --task worker:0 --model $MODEL --no-eval --max-steps $STEPS${wflag:+ $wflag}${WARGS:+ $WARGS} ($mode, $nw worker(s), $NS shards, $([ -n "$extra" ] && echo "plain TCP" || echo "mutual TLS"))"
    "$BIN/hetps-worker" --cluster "$T/$name.json" --task worker:0 --model $MODEL \
        --no-eval --max-steps "$STEPS" $wflag $WARGS > "$T/$name-w0.log" 2>&1 || { cat "$T/$name-w0.log"; exit 1; }
    [ "$nw" = 1 ] || wait "${PIDS##* }" 2>/dev/null || true
    sed -n 's/.*INFO \(sync: .*\)/  \1/p; s/.*INFO \(async: .*\)/  \1/p; s/.*INFO \(.*per step.*\)/  \1/p' "$T/$name-w0.log" | sort -u
    i=0
    for p in $SHARDS; do
        rss=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$p/status 2>/dev/null || echo 0)
        size=$(du -k "$T/$name-$i/data.mdb" 2>/dev/null | cut -f1)
        # CPU time (user + system, clock ticks) over the whole run: less
        # moved by other load on the machine than wall time.
        cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.1f", ($14 + $15) / hz }' /proc/$p/stat 2>/dev/null || echo "?")
        # Where the resident memory is at the end: the process's own
        # (anonymous: messages, sums, LMDB's dirty pages) and the store's
        # mapped file pages (read by pulls and applies; the page cache's,
        # counted in RSS while mapped).
        anon=$(sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$p/status 2>/dev/null || echo 0)
        file=$(sed -n 's/^RssFile:[[:space:]]*\([0-9]*\) kB/\1/p' /proc/$p/status 2>/dev/null || echo 0)
        echo "  ps:$i peak RSS $((rss / 1024)) MiB (at the end: $((${anon:-0} / 1024)) MiB own, $((${file:-0} / 1024)) MiB of the mapped store), store file ${size:-0} KiB on disk, CPU ${cpu} s"
        i=$((i + 1))
    done
    for p in $PIDS; do kill $p 2>/dev/null || true; done
    for p in $PIDS; do wait $p 2>/dev/null || true; done
    PIDS=""
}

# Whole words: "async" alone must not run the sync case too.
RUNS=" ${BENCH_BIG_RUNS:-sync async sync-plain sync-plain-late async-overlap} "
case "$RUNS" in *" sync "*) run sync1 sync 1 ;; esac
case "$RUNS" in *" async "*) run async2 async 2 ;; esac
case "$RUNS" in *" sync-plain "*) run plain1 sync 1 plain ;; esac
case "$RUNS" in *" sync-plain-late "*) run late1 sync 1 plain "--early-push off" ;; esac
case "$RUNS" in *" async-overlap "*) run overlap2 async 2 tls --overlap ;; esac
case "$RUNS" in *" async-plain "*) run aplain2 async 2 plain ;; esac
case "$RUNS" in *" async-overlap-plain "*) run oplain2 async 2 plain --overlap ;; esac
