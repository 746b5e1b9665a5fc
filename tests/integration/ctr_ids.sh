#!/bin/sh
# ctr_ids.sh — the C click-through reader (worker/data_ctr.h, through
# tests/tools/ctrids) and the PyTorch peer's reader (tests/bench/torch_ctr.py
# --dump) make the same samples of one file: labels, numeric floats to the
# last digit and row ids, hashed (two table sizes) and collision-free. The
# file comes from tests/tools/ctrgen (empty fields, negative I2, Zipf ids),
# with a line of upper-case hex and a CRLF line added; the C side reads it
# as 3 workers' parts in batches of 7, so the parts in worker order must
# also be the file. ctrgen's output is deterministic from its seed, and
# its Bayes AUC file is written.
. "$(dirname "$0")/lib.inc"
/usr/bin/python3 -c 'import numpy' 2>/dev/null || { echo "skipped: no python3-numpy"; exit 77; }
GEN=$B/tools/ctrgen
IDS=$B/tools/ctrids
PEER=tests/bench/torch_ctr.py
[ -x "$GEN" ] && [ -x "$IDS" ] || fail "build $GEN and $IDS first (make all)"

$GEN --seed 7 --train-rows 2000 --test-rows 1000 --vocab 100000 \
    "$T/train.tsv" "$T/test.tsv" || fail "ctrgen failed"
[ "$(wc -l < "$T/train.tsv")" -eq 2000 ] || fail "train.tsv: not 2000 lines"
grep -Eq '^0\.[0-9]{6}$' "$T/test.tsv.bayes_auc" || fail "no Bayes AUC: $(cat "$T/test.tsv.bayes_auc")"
$GEN --seed 7 --train-rows 2000 --test-rows 1000 --vocab 100000 \
    "$T/again.tsv" "$T/again_test.tsv" > /dev/null || fail "ctrgen failed"
cmp -s "$T/train.tsv" "$T/again.tsv" || fail "ctrgen: same seed, other rows"
$GEN --seed 8 --train-rows 2000 --test-rows 1000 --vocab 100000 \
    "$T/other.tsv" "$T/other_test.tsv" > /dev/null || fail "ctrgen failed"
cmp -s "$T/train.tsv" "$T/other.tsv" && fail "ctrgen: another seed, same rows"
grep -q '	-[12]	' "$T/train.tsv" || fail "ctrgen wrote no negative I2"
grep -q '		' "$T/train.tsv" || fail "ctrgen wrote no empty field"

# upper-case hex and CRLF
sed -n '5p' "$T/train.tsv" | tr 'a-f' 'A-F' >> "$T/train.tsv"
sed -n '6p' "$T/train.tsv" | sed 's/$/\r/' >> "$T/train.tsv"

for dim in 1000003 1048576 $((26 << 33)); do
    $IDS --input-dim $dim --workers 3 --batch 7 "$T/train.tsv" > "$T/c.txt" \
        || fail "ctrids failed (input_dim $dim)"
    /usr/bin/python3 $PEER --dump --input-dim $dim "$T/train.tsv" > "$T/p.txt" \
        || fail "torch_ctr.py --dump failed (input_dim $dim)"
    [ "$(wc -l < "$T/c.txt")" -eq 2002 ] || fail "ctrids: $(wc -l < "$T/c.txt") samples, not 2002"
    if ! cmp -s "$T/c.txt" "$T/p.txt"; then
        diff "$T/c.txt" "$T/p.txt" | head -6
        fail "the C reader and torch_ctr.py differ (input_dim $dim)"
    fi
    echo "input_dim $dim: 2002 samples the same in C and Python"
done
# the upper-case line reads as the line it came from
[ "$(sed -n 5p "$T/c.txt")" = "$(sed -n 2001p "$T/c.txt")" ] || fail "upper-case hex read differently"
[ "$(sed -n 6p "$T/c.txt")" = "$(sed -n 2002p "$T/c.txt")" ] || fail "CRLF line read differently"

# a malformed line: both readers name the file and line
printf '1\t2\n' >> "$T/train.tsv"
$IDS "$T/train.tsv" > /dev/null 2> "$T/err" && fail "ctrids read a bad line"
grep -q 'train.tsv:2003: 2 tab-separated field(s)' "$T/err" || fail "ctrids: $(cat "$T/err")"
/usr/bin/python3 $PEER --dump "$T/train.tsv" > /dev/null 2> "$T/err" && fail "torch_ctr.py read a bad line"
grep -q 'train.tsv:2003: 2 tab-separated field(s)' "$T/err" || fail "torch_ctr.py: $(cat "$T/err")"
echo "ctr_ids: C and Python readers agree"
