#!/bin/sh
# sync.sh — the consistency modes with real processes on loopback:
#   1. sync with 2 workers × batch 32 gives the same parameters as 1 worker
#      × batch 64 after 20 steps on the same samples (relative ≤ 1e-5), and
#      so does every step in parts (--lanes 4 --part-size 4K), each part
#      pushed as soon as backward computed it, and after backward
#      (--early-push off);
#   2. sync with backup_workers 1 and one worker slowed 5×: steps go on at
#      the fast worker's pace and the late gradients are counted;
#   3. ssp:2 with one worker slowed 3×: no worker is ever served more than
#      2 steps ahead of the slowest (the shards' own account), and the fast
#      one was held back at least once;
#   4. --mode overrides the cluster file; mismatched modes are refused.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json

# cluster NAME N_WORKERS HETPS_BLOCK: write $T/NAME.json on fresh ports.
next=$PORT
cluster() {
    ps0=$next; ps1=$((next + 1)); next=$((next + 2))
    workers=""
    i=0
    while [ $i -lt "$2" ]; do
        workers="$workers${workers:+, }\"127.0.0.1:$next\""
        next=$((next + 1)); i=$((i + 1))
    done
    printf '{ "cluster": { "ps": ["127.0.0.1:%s", "127.0.0.1:%s"], "worker": [%s] },\n  "hetps": %s }\n' \
        $ps0 $ps1 "$workers" "$3" > "$T/$1.json"
}
# servers NAME [PS_ARGS]: start both shards of $T/NAME.json.
servers() {
    name=$1; shift
    for i in 0 1; do
        "$BIN/hetps-ps" --cluster "$T/$name.json" --task ps:$i \
            --data-dir "$T/$name-data/ps-$i" "$@" > "$T/$name-ps$i.log" 2>&1 &
        track $!
    done
    wait_for 10 "$BIN/hetps" status "$T/$name.json" || fail "$name: servers did not start"
}
stop_servers() {
    need_status "$T/$1.json" "$T/$1-status.txt"
    stop_within 30 $PIDS
    PIDS=""
}

# 1. Equivalence.
cluster one 1 '{ "mode": "sync" }'
cluster two 2 '{ "mode": "sync" }'
servers one
"$BIN/hetps-worker" --cluster "$T/one.json" --task worker:0 --model $MODEL \
    --batch-size 64 --max-steps 20 --no-eval > "$T/one-w0.log" 2>&1 || { cat "$T/one-w0.log"; fail "1 × 64"; }
stop_servers one
# two NAME [WORKER_FLAGS]: 2 workers × 32 for 20 steps on $T/NAME.json,
# exported to $T/NAME-npy and compared with 1 × 64 (relative <= 1e-5).
two() {
    name=$1; shift
    servers $name
    for i in 0 1; do
        "$BIN/hetps-worker" --cluster "$T/$name.json" --task worker:$i --model $MODEL \
            --batch-size 32 --max-steps 20 --no-eval "$@" > "$T/$name-w$i.log" 2>&1 &
        eval "w$i=\$!"
    done
    wait $w0 || { cat "$T/$name-w0.log"; fail "$name 2 × 32: worker 0"; }
    wait $w1 || { cat "$T/$name-w1.log"; fail "$name 2 × 32: worker 1"; }
    stop_servers $name
    "$BIN/hetps" export --data-dir "$T/$name-data" --out "$T/$name-npy" "$T/$name.json" > /dev/null 2>&1 || fail "export $name"
    # (on a difference: what the shards and workers said, to tell a step
    # applied without a worker, a late push or a slice cut differently)
    sync_evidence() {
        cat "$T/$name-status.txt"
        grep -h "WARN\|late\|takes part\|dead\|without" "$T"/$name-ps*.log "$T"/$name-w*.log | head -40
    }
    /usr/bin/python3 - "$T" "$name" <<'PY' || { sync_evidence; fail "$name: 2 × 32 differs from 1 × 64"; }
import sys, numpy as np
t, name = sys.argv[1], sys.argv[2]
worst = 0.0
for v in ["conv2d/kernel", "conv2d/bias", "dense/kernel", "dense/bias"]:
    a = np.load(f"{t}/one-npy/{v}.npy").astype(np.float64)
    b = np.load(f"{t}/{name}-npy/{v}.npy").astype(np.float64)
    rel = np.linalg.norm(a - b) / np.linalg.norm(a)
    print(f"{v}: relative difference {rel:.2e}")
    worst = max(worst, rel)
assert worst <= 1e-5, worst
print(f"largest relative difference {worst:.2e} <= 1e-5")
PY
    [ "$(grep -c '^ps:[01] .* version 20 ' "$T/$name-status.txt")" -eq 2 ] || { cat "$T/$name-status.txt"; fail "$name: the shards are not at version 20"; }
}
"$BIN/hetps" export --data-dir "$T/one-data" --out "$T/one-npy" "$T/one.json" > /dev/null 2>&1 || fail "export one"
two two
ok "sync 2 × 32 equals 1 × 64 after 20 steps"
# The same with every step in parts (4 a shard, each on its own lane: each
# part added to the step as it comes, a block applied once both workers
# gave it, the step committed with its last part), each part pushed while
# backward computes the layers before it; then each only after backward.
cluster parts 2 '{ "mode": "sync" }'
two parts --lanes 4 --part-size 4K
grep -q "each step moves in 8 parts" "$T/parts-w0.log" || { cat "$T/parts-w0.log"; fail "the workers' steps did not move in parts"; }
grep -q "each part is pushed as soon as backward has computed it" "$T/parts-w0.log" || { cat "$T/parts-w0.log"; fail "the parts were not pushed during backward"; }
ok "sync 2 × 32 in parts, pushed during backward, equals 1 × 64 after 20 steps"
cluster late 2 '{ "mode": "sync" }'
two late --lanes 4 --part-size 4K --early-push off
grep -q "each part is pushed as soon" "$T/late-w0.log" && fail "--early-push off still pushed during backward"
ok "sync 2 × 32 in parts, pushed after backward, equals 1 × 64 after 20 steps"

# 2. Backup worker: worker 1 is 5× slower; 150 steps at the fast pace.
# Equal shares (--balance off): with balancing, the slow worker may be
# seated out or given a share small enough to keep up, and then no
# gradient is late — this part checks the backup rule, not the balancer.
cluster backup 2 '{ "mode": "sync", "backup_workers": 1 }'
servers backup --balance off
"$BIN/hetps-worker" --cluster "$T/backup.json" --task worker:1 --model $MODEL \
    --batch-size 32 --no-eval --slowdown 5 > "$T/backup-w1.log" 2>&1 &
slow=$!
track $slow
"$BIN/hetps-worker" --cluster "$T/backup.json" --task worker:0 --model $MODEL \
    --batch-size 32 --max-steps 150 --no-eval > "$T/backup-w0.log" 2>&1 || { cat "$T/backup-w0.log"; fail "backup: fast worker"; }
need_status "$T/backup.json" "$T/backup-status.txt"
kill -TERM $slow; wait $slow 2>/dev/null
stop_servers backup
cat "$T/backup-status.txt"
late=$(sed -n 's/^ps:0 .* late \([0-9]*\) .*/\1/p' "$T/backup-status.txt")
ver=$(sed -n 's/^ps:0 .* version \([0-9]*\) .*/\1/p' "$T/backup-status.txt")
c1=$(sed -n 's/^worker:1 .*ps:0 [a-z]* ([^)]*clock \([0-9]*\),.*/\1/p' "$T/backup-status.txt")
[ -n "$late" ] && [ "$late" -ge 1 ] || fail "backup: no late gradient counted"
[ -n "$ver" ] && [ "$ver" -ge 150 ] || fail "backup: only $ver steps applied"
# Had steps waited for the slow worker, every version would hold one of its
# gradients. (How much faster the fast one runs depends on the load of the
# machine: the slowdown is a sleep, the fast worker's compute is not.)
[ -n "$c1" ] && [ "$c1" -lt "$ver" ] || fail "backup: $ver steps but the slow worker pushed $c1 gradients: steps waited for it"
ok "backup_workers 1: $ver steps at the fast pace, slow worker pushed $c1, $late late gradients counted"

# 3. ssp:2 with worker 1 slowed 3×.
cluster ssp 2 '{ "mode": "ssp:2" }'
servers ssp
"$BIN/hetps-worker" --cluster "$T/ssp.json" --task worker:1 --model $MODEL \
    --no-eval --slowdown 3 --max-steps 40 > "$T/ssp-w1.log" 2>&1 &
slow=$!
track $slow
"$BIN/hetps-worker" --cluster "$T/ssp.json" --task worker:0 --model $MODEL \
    --max-steps 40 --no-eval > "$T/ssp-w0.log" 2>&1 || { cat "$T/ssp-w0.log"; fail "ssp: worker 0"; }
wait $slow || { cat "$T/ssp-w1.log"; fail "ssp: worker 1"; }
stop_servers ssp
cat "$T/ssp-status.txt"
for i in 0 1; do
    ahead=$(sed -n "s/^ps:$i .* max_ahead \([0-9]*\) .*/\1/p" "$T/ssp-status.txt")
    [ -n "$ahead" ] && [ "$ahead" -le 2 ] || fail "ssp: ps:$i saw a worker $ahead steps ahead"
    [ "$ahead" -ge 1 ] || fail "ssp: ps:$i never saw a worker ahead: the bound was not exercised"
done
ok "ssp:2: no worker ever more than 2 steps ahead (max_ahead $ahead)"

# 4. --mode instead of the cluster file's mode; a worker of another mode is
#    refused with the reason.
cluster flag 1 '{ "mode": "async" }'
servers flag --mode sync
grep -q "mode sync" "$T/flag-ps0.log" || "$BIN/hetps" status "$T/flag.json" | grep -q "mode sync" \
    || { "$BIN/hetps" status "$T/flag.json"; fail "--mode sync: the shards do not run sync"; }
"$BIN/hetps-worker" --cluster "$T/flag.json" --task worker:0 --model $MODEL \
    --max-steps 5 --no-eval > "$T/flag-async.log" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "ps:0 runs mode sync but this worker runs async" "$T/flag-async.log" \
    || { cat "$T/flag-async.log"; fail "a worker of another mode was not refused (exit $rc)"; }
"$BIN/hetps-worker" --cluster "$T/flag.json" --task worker:0 --model $MODEL --mode sync \
    --max-steps 5 --no-eval > "$T/flag-sync.log" 2>&1 || { cat "$T/flag-sync.log"; fail "--mode sync worker"; }
grep -q "sync: " "$T/flag-sync.log" || { cat "$T/flag-sync.log"; fail "--mode sync worker did not train in sync mode"; }
stop_servers flag
ok "--mode sync overrides the file's async; a worker of another mode is refused"
