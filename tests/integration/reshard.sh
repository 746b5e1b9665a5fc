#!/bin/sh
# reshard.sh — from 2 to 3 parameter servers mid-job: train 100 steps on 2
# shards, stop, `hetps reshard` to 3, and the exported parameters are
# bitwise the same before and after; training then goes on with the 3
# shards from those values, and the worker resumes at its place in its data
# (moved with the blocks).
#
# Then the same by itself: `hetps launch` of the 3-server file on the 2
# servers' data directory reshards it before starting any task (keeping the
# old stores in before-reshard-2, clearing what an interrupted earlier try
# left), a move interrupted half-way is finished by the next try, and
# training goes on from the moved step; a missing shard directory or an
# existing before-reshard-2 or a damaged store stops launch with exit 1 and
# the path, the data directory as it was; --no-reshard leaves the shards to refuse as before.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cat > "$T/two.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 5))"] } }
JSON
cat > "$T/three.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$((PORT + 2))", "127.0.0.1:$((PORT + 3))", "127.0.0.1:$((PORT + 4))"],
               "worker": ["127.0.0.1:$((PORT + 5))"] } }
JSON
# run CLUSTER DIR N_PS STEPS: servers, one worker for STEPS steps, stop.
run() {
    pids=""
    i=0
    while [ $i -lt "$3" ]; do
        "$BIN/hetps-ps" --cluster "$T/$1.json" --task ps:$i --data-dir "$T/$2/ps-$i" \
            >> "$T/$1-ps$i.log" 2>&1 &
        pids="$pids $!"
        track $!
        i=$((i + 1))
    done
    wait_for 10 "$BIN/hetps" status "$T/$1.json" || fail "$1: servers did not start"
    "$BIN/hetps-worker" --cluster "$T/$1.json" --task worker:0 --model $MODEL \
        --max-steps "$4" --no-eval > "$T/$1-w.log" 2>&1 || { cat "$T/$1-w.log"; fail "$1: worker"; }
    stop_within 30 $pids
}
run two old 2 100
"$BIN/hetps" export --data-dir "$T/old" --out "$T/before" "$T/two.json" > /dev/null 2>&1 || fail "export before"
"$BIN/hetps" reshard --from "$T/two.json" --to "$T/three.json" --data-dir "$T/old" \
    --out-dir "$T/new" > "$T/reshard.txt" 2>&1 || { cat "$T/reshard.txt"; fail "reshard"; }
cat "$T/reshard.txt"
"$BIN/hetps" export --data-dir "$T/new" --out "$T/after" "$T/three.json" > /dev/null 2>&1 || fail "export after"
for f in conv2d/kernel conv2d/bias dense/kernel dense/bias; do
    cmp "$T/before/$f.npy" "$T/after/$f.npy" || fail "$f differs after resharding"
done
ok "2 → 3 shards: every parameter bitwise identical"
"$BIN/hetps" reshard --from "$T/two.json" --to "$T/three.json" --data-dir "$T/old" \
    --out-dir "$T/new" > "$T/again.txt" 2>&1 && fail "reshard over existing stores succeeded"
grep -q "already holds variables" "$T/again.txt" || { cat "$T/again.txt"; fail "no clear message for a used --out-dir"; }
run three new 3 20
grep -q "variables already exist (step 100)" "$T/three-ps0.log" || { cat "$T/three-ps0.log"; fail "the 3-shard job did not continue from step 100"; }
grep -q "resuming where worker:0 left off .* from batch 101 of" "$T/three-w.log" ||
    { cat "$T/three-w.log"; fail "the worker did not resume at batch 101 after the move"; }
ok "training went on with 3 shards from the moved values, the worker from batch 101"

# same_as_before CLUSTER DIR WHAT: DIR's stores export bitwise to $T/before.
same_as_before() {
    rm -rf "$T/check"
    "$BIN/hetps" export --data-dir "$2" --out "$T/check" "$T/$1.json" > "$T/check.txt" 2>&1 ||
        { cat "$T/check.txt"; fail "export of $3"; }
    for f in conv2d/kernel conv2d/bias dense/kernel dense/bias; do
        cmp "$T/before/$f.npy" "$T/check/$f.npy" || fail "$f of $3 differs from before the move"
    done
}
# store_sums DIR: everything under DIR, with the size and time of last
# change of each store (data.mdb; lock.mdb changes with every reader).
store_sums() {
    (cd "$1" && find . \( -name data.mdb -printf '%p %s %T@\n' \) -o -printf '%p\n' | sort)
}

# An earlier try that died while writing the new stores left this behind.
cp -a "$T/old" "$T/auto"
mkdir -p "$T/auto/resharding-2-to-3/ps-0"
echo "half-written" > "$T/auto/resharding-2-to-3/ps-0/data.mdb"
# The worker only prints its help: the move happens, nothing trains.
timeout 60 "$BIN/hetps" launch -d "$T/auto" "$T/three.json" -- --help > "$T/auto.log" 2>&1 ||
    { cat "$T/auto.log"; fail "launch on the 2 servers' stores"; }
grep -qF "hetps reshard: $T/auto holds 2 parameter servers' stores, $T/three.json has 3: resharded 2 → 3 (the old stores are kept in $T/auto/before-reshard-2)" "$T/auto.log" ||
    { cat "$T/auto.log"; fail "launch did not say it resharded 2 → 3"; }
grep -q "removed the incomplete output of an interrupted reshard" "$T/auto.log" ||
    { cat "$T/auto.log"; fail "launch did not clear the interrupted try"; }
[ -d "$T/auto/ps-2" ] && [ -d "$T/auto/before-reshard-2/ps-0" ] && [ -d "$T/auto/before-reshard-2/ps-1" ] &&
    [ ! -e "$T/auto/resharding-2-to-3" ] || { ls -R "$T/auto"; fail "the stores are not where the move puts them"; }
same_as_before three "$T/auto" "the moved stores"
same_as_before two "$T/auto/before-reshard-2" "the kept old stores"
ok "launch resharded 2 → 3 by itself: every parameter bitwise identical, the old stores kept"

# A move interrupted half-way is finished by the next try. Crash 1: ps-0's
# old store moved aside, ps-1's not yet, no new one in place; crash 2:
# every old store aside, ps-0's new one in place, ps-1's and ps-2's not.
for at in 1 2; do
    mkdir "$T/auto/resharding-2-to-3"
    if [ $at -eq 1 ]; then
        for j in 0 1 2; do mv "$T/auto/ps-$j" "$T/auto/resharding-2-to-3/"; done
        mv "$T/auto/before-reshard-2/ps-1" "$T/auto/ps-1"
    else
        for j in 1 2; do mv "$T/auto/ps-$j" "$T/auto/resharding-2-to-3/"; done
    fi
    echo "written" > "$T/auto/resharding-2-to-3/complete"
    "$BIN/hetps" reshard --in-place --to "$T/three.json" --data-dir "$T/auto" > "$T/finish.txt" 2>&1 ||
        { cat "$T/finish.txt"; fail "finishing the move interrupted at crash $at"; }
    grep -q "finished moving the stores in .* from 2 to 3 parameter servers" "$T/finish.txt" ||
        { cat "$T/finish.txt"; fail "no word of finishing the move interrupted at crash $at"; }
    [ ! -e "$T/auto/resharding-2-to-3" ] || fail "resharding-2-to-3 left after finishing crash $at"
    same_as_before three "$T/auto" "the stores after finishing crash $at"
    same_as_before two "$T/auto/before-reshard-2" "the kept old stores after finishing crash $at"
done
ok "a move interrupted half-way is finished by the next try"

timeout 60 "$BIN/hetps" launch -d "$T/auto" "$T/three.json" -- --model $MODEL \
    --max-steps 20 --no-eval > "$T/auto2.log" 2>&1 || { cat "$T/auto2.log"; fail "training after the move"; }
! grep -q "resharded\\|hetps reshard" "$T/auto2.log" || { cat "$T/auto2.log"; fail "stores that fit were resharded again"; }
grep -q "^\[ps:0\] .*variables already exist (step 100)" "$T/auto2.log" ||
    { cat "$T/auto2.log"; fail "launch did not continue from step 100"; }
grep -q "^\[worker:0\] .*resuming where worker:0 left off .* from batch 101 of" "$T/auto2.log" ||
    { cat "$T/auto2.log"; fail "the worker did not resume at batch 101 after launch's move"; }
ok "training went on under launch from step 100, the worker from batch 101"

# A shard's directory missing: nothing moves, no task starts.
cp -a "$T/old" "$T/miss"
rm -rf "$T/miss/ps-1"
store_sums "$T/miss" > "$T/miss.sums"
timeout 60 "$BIN/hetps" launch -d "$T/miss" "$T/three.json" -- --help > "$T/miss.log" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$T/miss.log"; fail "launch with ps-1 missing exited $rc, not 1"; }
grep -qF "$T/miss/ps-1 is missing" "$T/miss.log" || { cat "$T/miss.log"; fail "the missing ps-1 was not named"; }
! grep -q '^\[' "$T/miss.log" || { cat "$T/miss.log"; fail "a task started"; }
store_sums "$T/miss" | cmp -s - "$T/miss.sums" || fail "the data directory changed"
mkdir "$T/old/before-reshard-2"
timeout 60 "$BIN/hetps" launch -d "$T/old" "$T/three.json" -- --help > "$T/kept.log" 2>&1
rc=$?
rmdir "$T/old/before-reshard-2"
[ $rc -eq 1 ] && grep -qF "$T/old/before-reshard-2 already exists" "$T/kept.log" ||
    { cat "$T/kept.log"; fail "launch over an existing before-reshard-2 (exit $rc)"; }
# A damaged store: one byte of conv2d/bias flipped in whichever shard has it.
cp -a "$T/old" "$T/damaged"
/usr/bin/python3 - "$T" <<'PY' || fail "cannot damage a store"
import mmap, sys
t = sys.argv[1]
bias = open(t + "/before/conv2d/bias.npy", "rb").read()[128:]
for j in (0, 1):
    with open("%s/damaged/ps-%d/data.mdb" % (t, j), "r+b") as f:
        m = mmap.mmap(f.fileno(), 0)
        at = m.find(bias)
        if at >= 0:
            m[at + 5] ^= 0x40
            m.flush()
            sys.exit(0)
sys.exit(1)
PY
store_sums "$T/damaged" > "$T/damaged.sums"
timeout 60 "$BIN/hetps" launch -d "$T/damaged" "$T/three.json" -- --help > "$T/damaged.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "store $T/damaged/ps-[01]: .*CRC32C.*not moving a damaged store ($T/damaged is as it was)" "$T/damaged.log" ||
    { cat "$T/damaged.log"; fail "launch on a damaged store (exit $rc)"; }
store_sums "$T/damaged" | cmp -s - "$T/damaged.sums" || { ls -R "$T/damaged"; fail "the damaged data directory changed"; }
ok "a missing shard directory, an existing before-reshard-2, a damaged store: exit 1 naming it, nothing changed"

cp -a "$T/old" "$T/as-is"
timeout 60 "$BIN/hetps" launch --no-reshard -d "$T/as-is" "$T/three.json" -- --help > "$T/as-is.log" 2>&1 &&
    { cat "$T/as-is.log"; fail "--no-reshard: launch on another shard count succeeded"; }
grep -q "^\[ps:[01]\] .*holds shard [01] of 2.*hetps reshard" "$T/as-is.log" ||
    { cat "$T/as-is.log"; fail "--no-reshard: ps:0 did not refuse the 2-shard store"; }
[ ! -e "$T/as-is/before-reshard-2" ] || fail "--no-reshard moved the stores"
ok "--no-reshard: the shards refuse a store of another count, as before"
