#!/bin/sh
# progress.sh — what a user sees while a job trains (worker/progress.c):
# with the launcher's output in a file, the chief prints a plain progress
# line every --progress-every seconds and one summary line per epoch, never
# a '\r', and the other worker its summaries; under a pseudo-terminal
# (script(1)) the chief draws Keras's bar, redrawn in place, ending with the
# epoch's val_accuracy; --verbose 0 silences it and a bad --verbose is named.
. "$(dirname "$0")/lib.inc"
need_data
command -v script >/dev/null || { echo "skipped: no script(1) (bsdutils)"; exit 77; }
pick_ports
MODEL=deploy/models/fashion_cnn.json
cluster2 '{ "mode": "async" }'

timeout 240 "$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model $MODEL --epochs 1 --progress-every 0.5 > "$T/plain.log" 2>&1 ||
    { tail -30 "$T/plain.log"; fail "hetps launch (output in a file) failed"; }
grep 'Epoch' "$T/plain.log"
! grep -q "$(printf '\r')" "$T/plain.log" || fail "a carriage return in output that is not a terminal"
n=$(grep -c '^\[worker:0\] Epoch 1/1 - [0-9]*/469 - ETA: [0-9:]*s* - loss: [0-9.]* - accuracy: [0-9.]* - [0-9]* samples/s$' "$T/plain.log")
[ "$n" -ge 2 ] || fail "the chief printed $n progress lines, want >= 2"
grep -Eq '^\[worker:0\] Epoch 1/1 - 469/469 - [0-9.]+s [0-9]+ms/step - loss: [0-9.]+ - accuracy: [0-9.]+ - val_loss: [0-9.]+ - val_accuracy: 0\.[89][0-9]* - [0-9]+ samples/s$' "$T/plain.log" ||
    fail "no Keras summary line with val_accuracy from the chief"
grep -Eq '^\[worker:1\] Epoch 1/1 - 469/469 - .* - accuracy: [0-9.]+ - [0-9]+ samples/s$' "$T/plain.log" ||
    fail "worker:1 printed no epoch summary"
! grep -q '^\[worker:1\] Epoch 1/1 - [0-9]*/469 - ETA' "$T/plain.log" || fail "worker:1 printed progress lines"
ok "not a terminal: $n progress lines, the summaries, no carriage return"

rm -rf "$T/data"
timeout 240 script -qfec "'$BIN/hetps' launch --data-dir '$T/data' '$T/cluster.json' -- --model $MODEL --epochs 1" \
    /dev/null > "$T/tty.log" 2>&1 < /dev/null || { tail -c 3000 "$T/tty.log"; fail "hetps launch under script(1) failed"; }
tr '\r' '\n' < "$T/tty.log" > "$T/tty.lines"
grep -q '^\[worker:0\] Epoch 1/1$' "$T/tty.lines" || fail "no 'Epoch 1/1' header on the terminal"
bars=$(grep -Ec '^\[worker:0\] +[0-9]+/469 \[=*>?\.*\] - ETA: [0-9:]+s? - loss: [0-9.]+ - accuracy: [0-9.]+ - [0-9]+ samples/s *$' "$T/tty.lines")
[ "$bars" -ge 5 ] || { head -c 2000 "$T/tty.log"; fail "$bars bar redraws on the terminal, want >= 5"; }
grep -Eq '^\[worker:0\] 469/469 \[={30}\] - [0-9]+s [0-9]+ms/step - loss: [0-9.]+ - accuracy: [0-9.]+ - val_loss: [0-9.]+ - val_accuracy: [0-9.]+ - [0-9]+ samples/s' "$T/tty.lines" ||
    fail "no final bar with val_accuracy on the terminal"
ok "terminal: $bars bar redraws in place and the final bar"

rm -rf "$T/data"
timeout 240 "$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model $MODEL --max-steps 20 --verbose 0 > "$T/quiet.log" 2>&1 || fail "--verbose 0 run failed"
! grep -q 'Epoch' "$T/quiet.log" || fail "--verbose 0 printed progress"
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --verbose 3 > "$T/bad.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "\-\-verbose: '3' is not 0, 1 or 2" "$T/bad.log" || { cat "$T/bad.log"; fail "--verbose 3: exit $rc"; }
ok "--verbose 0 is silent; --verbose 3 is refused by name"
