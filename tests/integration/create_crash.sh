#!/bin/sh
# create_crash.sh — a shard killed (SIGKILL) at every point of the chief's
# "create variables", in async and in sync mode, then started again on its
# store. The fault points (ps/fault.h, HETPS_FAULT) kill ps:0 before the
# init transaction, inside it (all written, not committed) and after it
# (committed, not yet answered), while ps:1 creates normally. Each time the
# chief re-joins the restarted shard and re-sends its create with the same
# request id — applied or answered as that create, never refused as older
# than the re-join — the job finishes (one point per mode trains a whole
# epoch and reaches the usual accuracy), the restarted store holds its
# variables and their definitions, and `hetps inspect` and `hetps export`
# work on every store.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_mlp.json
STEPS=${CRASH_STEPS:-30}

# start_ps J DIR [FAULT]: shard J on DIR/ps-J, log DIR/ps-J.log.
start_ps() {
    HETPS_FAULT=${3:-} "$BIN/hetps-ps" --cluster "$T/cluster.json" \
        --task ps:$1 --data-dir "$2/ps-$1" >> "$2/ps-$1.log" 2>&1 &
    eval "ps$1=\$!"
    track $!
}

# crash MODE POINT: one job, ps:0 killed at create:POINT and restarted.
crash() {
    D=$T/$1-$2
    mkdir -p "$D"
    cluster2 "{ \"mode\": \"$1\" }"
    start_ps 0 "$D" "create:$2"
    start_ps 1 "$D"
    wait_for 10 "$BIN/hetps" status "$T/cluster.json" ||
        fail "$1 $2: the servers did not start"
    # One point per mode trains a whole epoch and is held to the usual
    # accuracy; the others stop after $STEPS steps of each worker.
    case $2 in
    inside_init) run="--epochs 1" ;;
    *) run="--max-steps $STEPS --no-eval" ;;
    esac
    for i in 0 1; do
        "$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:$i \
            --model $MODEL $run --batch-size 64 > "$D/w$i.log" 2>&1 &
        eval "w$i=\$!"
        track $!
    done
    wait $ps0 2>/dev/null
    rc=$?
    [ $rc -eq 137 ] && grep -q "fault point create:$2" "$D/ps-0.log" ||
        { cat "$D/ps-0.log"; fail "$1 $2: ps:0 was not killed at its fault point (exit $rc)"; }
    # What the crash left: nothing before the commit, the whole store after.
    case $2 in after_init) left="initialised, step 0" ;; *) left="empty" ;; esac
    start_ps 0 "$D"
    wait_for 10 grep -q "ps-0: opened (incarnation 2, $left" "$D/ps-0.log" ||
        { cat "$D/ps-0.log"; fail "$1 $2: the restarted ps:0 did not open a store '$left'"; }
    wait $w0 || { cat "$D/w0.log"; tail -n 20 "$D/ps-0.log"; fail "$1 $2: the chief failed after ps:0 restarted"; }
    wait $w1 || { cat "$D/w1.log"; fail "$1 $2: worker:1 failed after ps:0 restarted"; }
    grep -q "joining it again and re-sending create variables" "$D/w0.log" ||
        { cat "$D/w0.log"; fail "$1 $2: the chief did not re-send its create to the restarted shard"; }
    for j in 0 1; do
        need_version "$T/cluster.json" $j
        v=$V
        [ "$v" -ge "$STEPS" ] ||
            fail "$1 $2: ps:$j is at version '$v' after $STEPS steps of each worker"
    done
    acc=""
    if [ "$2" = inside_init ]; then
        acc=$(sed -n 's/.*Final weights.*val_accuracy: \([0-9.]*\).*/\1/p' "$D/w0.log")
        [ -n "$acc" ] || { tail "$D/w0.log"; fail "$1 $2: no final accuracy"; }
        awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' ||
            fail "$1 $2: one epoch reached accuracy $acc < 0.80"
        acc=", one epoch: accuracy $acc"
    fi
    stop_within 30 $ps0 $ps1
    for j in 0 1; do
        "$BIN/hetps" inspect "$D/ps-$j" > "$D/inspect$j.txt" 2>&1 ||
            { cat "$D/inspect$j.txt"; fail "$1 $2: hetps inspect ps-$j failed"; }
        grep -q 'variables \[{"name":"dense/kernel","shape":\[784,128\]}' "$D/inspect$j.txt" ||
            { cat "$D/inspect$j.txt"; fail "$1 $2: store ps-$j lacks its variable definitions"; }
    done
    "$BIN/hetps" export --data-dir "$D" --out "$D/npy" "$T/cluster.json" \
        > "$D/export.log" 2>&1 || { cat "$D/export.log"; fail "$1 $2: hetps export failed"; }
    n=$(find "$D/npy" -name "*.npy" | wc -l)
    [ "$n" -eq 4 ] || fail "$1 $2: export wrote $n .npy files, not 4"
    ok "$1, ps:0 killed at create:$2 (restarted on a store $left): trained to version $v$acc; definitions kept, inspect and export work"
}

for mode in async sync; do
    for point in before_init inside_init after_init; do
        crash $mode $point
    done
done
