#!/bin/sh
# ctr_pipe.sh — a click-through step's exchanges in flight at once (issue
# #40): 2 shards and 2 workers train one epoch of an embedding model on a
# generated Criteo file (16,000 lines, tests/tools/ctrgen), in async, in
# ssp (staleness 2), in async with --overlap and in async with each
# step's dense push in parts (--part-size 4K). In each:
#   - every batch's rows but the epoch's first are pulled ahead, beside
#     the step before's dense push-and-pull (--overlap: two steps before,
#     on the exchange thread): each worker's "tables:" line counts
#     exactly steps − 1 pulls ahead — a worker that pulled its rows in a
#     round trip of their own after the dense exchange counts 0;
#   - every step is applied once: each shard's step count is exactly the
#     job's steps (2 × 8,000 / 64 = 250), each worker's exactly 125;
#   - a step is one request per shard: each shard's /metrics counts
#     exactly 250 pushes (its rows pushed and pulled ride on them), no
#     push_rows, and exactly as many pull_rows as the workers' forwards
#     pulled for themselves (the "tables:" lines' pulls less those pulled
#     ahead: each epoch's first batch and the evaluation's; and the
#     chief's final evaluation after that line, as many as its epoch's)
#     plus, with --overlap, each worker's second batch of the epoch
#     (pulled before its first exchange): a step that sent its rows push
#     or its rows pull as a request of its own counts 250 more of one or
#     the other. A step in parts sends them so (its rows pushed before
#     the parts, held for them, and pulled after them): there each shard
#     counts more pushes than steps (the parts), 250 push_rows and the
#     forwards' pull_rows plus 248 (every step's but each worker's
#     last);
#   - the chief's final test AUC and loss are finite and the AUC above
#     0.6; --overlap's (its rows and dense values one step staler) within
#     0.02 of async's.
. "$(dirname "$0")/lib.inc"
pick_ports
GEN=$B/tools/ctrgen
[ -x "$GEN" ] || fail "build $GEN first (make all)"
$GEN --seed 5 --train-rows 16000 --test-rows 4000 --vocab 1000 \
    "$T/train.tsv" "$T/test.tsv" > /dev/null || fail "ctrgen failed"
ctr_cat_model "$T/cat.json" 64
sed -i 's/"epochs": 1}/"epochs": 1, "metrics": ["AUC"]}/' "$T/cat.json"
# The same with a Dense 64 before the Dense 16: a shard holds the two
# kernels' smaller with the biases, over 4 KiB in more than one block,
# so --part-size 4K cuts its step in parts.
sed 's/{"type": "dense", "units": 16/{"type": "dense", "units": 64, "activation": "relu"}, &/' \
    "$T/cat.json" > "$T/cat64.json"

# job NAME MODE [WORKER FLAGS]: one epoch in $T/NAME on ports from
# PORT + OFF (0 and 4 in turn; the shards' /metrics on PORT + 8 and 9);
# the chief's final AUC into $auc. $EARLY: rows pulls each worker makes
# outside its forwards and its steps (--overlap: 1); $PARTS 1: a step in
# parts (its rows as requests of their own); $MODEL: $T/MODEL.json (cat).
OFF=0
job() {
    name=$1 mode=$2 D="$T/$1" MP=$((PORT + 8))
    shift 2
    mkdir -p "$D"
    cat > "$D/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$((PORT + OFF))", "127.0.0.1:$((PORT + OFF + 1))"],
               "worker": ["127.0.0.1:$((PORT + OFF + 2))", "127.0.0.1:$((PORT + OFF + 3))"] },
  "hetps": { "mode": "$mode" } }
JSON
    OFF=$((4 - OFF))
    for j in 0 1; do
        "$BIN/hetps-ps" --cluster "$D/cluster.json" --task ps:$j \
            --metrics-addr 127.0.0.1:$((MP + j)) \
            --data-dir "$D/ps-$j" > "$D/ps-$j.log" 2>&1 &
        eval "ps$j=\$!"
        track $!
    done
    wait_for 10 "$BIN/hetps" status "$D/cluster.json" || fail "$name: the shards did not start"
    for i in 0 1; do
        "$BIN/hetps-worker" --cluster "$D/cluster.json" --task worker:$i \
            --model "$T/${MODEL:-cat}.json" --data "criteo:$T/train.tsv" \
            --validation-data "criteo:$T/test.tsv" "$@" > "$D/w$i.log" 2>&1 &
        eval "w$i=\$!"
        track $!
    done
    wait $w0 || { tail -20 "$D/w0.log"; fail "$name: worker:0 failed"; }
    wait $w1 || { tail -20 "$D/w1.log"; fail "$name: worker:1 failed"; }
    for j in 0 1; do
        need_version "$D/cluster.json" $j
        [ "$V" = 250 ] || { tail -5 "$D/ps-$j.log"; fail "$name: ps:$j counted $V steps, the job has 250"; }
        get_metrics "http://127.0.0.1:$((MP + j))/metrics" > "$D/m-$j.txt" ||
            fail "$name: no /metrics from ps:$j"
    done
    stop_within 30 $ps0 $ps1
    own=0
    for i in 0 1; do
        steps=$(sed -n "s/.*INFO ${mode%%:*}: \([0-9]*\) steps in.*/\1/p" "$D/w$i.log")
        pulls=$(sed -n 's/.*tables: .*(\([0-9]*\) pulls, evaluation.s included.*/\1/p' "$D/w$i.log")
        ahead=$(sed -n 's/.*tables: .* pulls, evaluation.s included, \([0-9]*\) of them pulled ahead.*/\1/p' "$D/w$i.log")
        [ "$steps" = 125 ] || { tail -5 "$D/w$i.log"; fail "$name: worker:$i computed '$steps' steps, not 125"; }
        [ "$ahead" = 124 ] || { grep tables: "$D/w$i.log"; fail "$name: worker:$i pulled '$ahead' batches' rows ahead, not 124 (all but the first)"; }
        own=$((own + pulls - ahead + ${EARLY:-0}))
        # The chief's final evaluation, after its "tables:" line: the
        # same test file as its epoch's evaluation (its pulls less the
        # steps').
        [ "$i" = 0 ] && own=$((own + pulls - steps))
    done
    # One request per shard a step: its pushes, and rows requests only
    # where a forward pulled for itself; in parts, the rows apart.
    for j in 0 1; do
        m="$D/m-$j.txt"
        pushes=$(requests push "$m") prows=$(requests push_rows "$m") lrows=$(requests pull_rows "$m")
        if [ "${PARTS:-0}" = 1 ]; then
            [ "$pushes" -gt 250 ] && [ "$prows" = 250 ] && [ "$lrows" = $((own + 248)) ] ||
                fail "$name: ps:$j served $pushes pushes, $prows push_rows, $lrows pull_rows; steps in parts: over 250, 250 and $((own + 248))"
        else
            [ "$pushes" = 250 ] && [ "$prows" = 0 ] && [ "$lrows" = "$own" ] ||
                fail "$name: ps:$j served $pushes pushes, $prows push_rows, $lrows pull_rows; a step of one request each: 250, 0 and the forwards' own $own"
        fi
    done
    auc=$(sed -n 's/.*Final weights.*val_auc: \([0-9.]*\).*/\1/p' "$D/w0.log")
    loss=$(sed -n 's/.*Final weights.*val_loss: \([0-9.]*\).*/\1/p' "$D/w0.log")
    [ -n "$auc" ] && [ -n "$loss" ] || { tail -5 "$D/w0.log"; fail "$name: no finite final AUC and loss"; }
    awk -v a="$auc" 'BEGIN { exit !(a > 0.6) }' || fail "$name: final AUC $auc"
    ok "$name: 250 steps on each shard, $([ "${PARTS:-0}" = 1 ] && echo "in parts, the rows apart" || echo "one request each"); 124 of each worker's 125 batches' rows pulled ahead; AUC $auc, loss $loss"
}

# get_metrics URL: its body; requests TYPE FILE: the shard's requests of
# that type served, from its /metrics text.
get_metrics() { /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }
requests() { awk -v t="type=\"$1\"" '$1 ~ /^hetps_requests_total\{/ && index($1, t) { print $2 + 0 }' "$2"; }

job async async
base=$auc
job ssp ssp:2
EARLY=1 job overlap async --overlap
grep -q "push-and-pull not hidden by computing (--overlap)" "$T/overlap/w0.log" ||
    fail "overlap: the summary does not say what --overlap left"
awk -v a="$auc" -v b="$base" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02) }' ||
    fail "--overlap's AUC $auc is not within 0.02 of async's $base"
ok "--overlap with tables: AUC $auc against $base without"
EARLY=0 PARTS=1 MODEL=cat64 job parts async --part-size 4K
grep -q "each step moves in [0-9]* parts" "$T/parts/w0.log" ||
    { grep -i part "$T/parts/w0.log"; fail "parts: the worker did not step in parts"; }
