#!/bin/sh
# optim.sh — every optimizer of a shard equals Keras's formulas: 100 steps
# of seeded random gradients through a real shard store (tools/optim_check:
# ps_store_apply, closed and reopened half-way) for each optimizer and
# setting, against the NumPy transcription of keras/src/optimizers in
# tests/optim_ref.py (its top says what "equal" means).
. "$(dirname "$0")/lib.inc"
PY=/usr/bin/python3
$PY -c 'import numpy' 2>/dev/null || { echo "skip: no NumPy for $PY"; exit 77; }

$PY "$(dirname "$0")/../optim_ref.py" "$B" > "$T/ref.txt" 2>&1 || { cat "$T/ref.txt"; fail "a shard's optimizer differs from Keras's formulas"; }
ok "$(tail -1 "$T/ref.txt") (100 steps each, through a shard store)"
