#!/bin/sh
# cli.sh — flags and configuration mistakes: clear messages, exit code 2,
# before any socket opens; --help everywhere.
. "$(dirname "$0")/lib.inc"
pick_ports
for p in hetps hetps-ps hetps-worker; do
    "$BIN/$p" --help > "$T/help.txt" 2>&1 || fail "$p --help exited non-zero"
    grep -q "Usage: $p" "$T/help.txt" || fail "$p --help prints no usage"
    "$BIN/$p" --no-such-flag > "$T/err.txt" 2>&1
    [ $? -eq 2 ] || fail "$p with a bad flag did not exit 2"
done
ok "--help and bad flags"

cat > "$T/good.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] },
  "task": { "type": "worker", "index": 0 } }
JSON
"$BIN/hetps" check-config "$T/good.json" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "check-config of a good file"; }
grep -q "127.0.0.1:$PORT" "$T/out.txt" || fail "check-config does not print the ps address"

TF_CONFIG="{\"cluster\": {\"chief\": [\"127.0.0.1:$((PORT + 2))\"], \"worker\": [\"127.0.0.1:$((PORT + 3))\"], \"ps\": [\"127.0.0.1:$((PORT + 4))\"]}, \"task\": {\"type\": \"worker\", \"index\": \"0\"}}" \
    "$BIN/hetps" check-config > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "check-config of TF_CONFIG"; }
grep -qi "chief" "$T/out.txt" || fail "no note on the chief mapping"
ok "check-config of a file and of TF_CONFIG"

printf '{ "cluster": { "ps": ["127.0.0.1:%s"], \n "worker": [] ' "$PORT" > "$T/bad.json"
"$BIN/hetps" check-config "$T/bad.json" > "$T/out.txt" 2>&1
[ $? -eq 2 ] || fail "bad JSON did not exit 2"
grep -q "line 2" "$T/out.txt" || { cat "$T/out.txt"; fail "bad JSON message has no line"; }

echo '{ "cluster": { "ps": ["127.0.0.1:99999"], "worker": ["127.0.0.1:1"] } }' > "$T/bad.json"
"$BIN/hetps-ps" --cluster "$T/bad.json" --task ps:0 --data-dir "$T/d" > "$T/out.txt" 2>&1
[ $? -eq 2 ] || fail "bad port did not exit 2"
grep -q "port" "$T/out.txt" || { cat "$T/out.txt"; fail "no message on the port"; }
[ ! -e "$T/d" ] || fail "a store was created despite the bad configuration"

"$BIN/hetps-ps" --cluster "$T/good.json" --task ps:3 > "$T/out.txt" 2>&1
[ $? -eq 2 ] || fail "out-of-range task did not exit 2"
grep -q "ps:3\|index" "$T/out.txt" || { cat "$T/out.txt"; fail "no message on the task index"; }
for p in hetps-ps hetps-worker; do
    "$BIN/$p" --cluster "$T/good.json" --task ${p#hetps-}:0 --mode ssp > "$T/out.txt" 2>&1
    [ $? -eq 2 ] && grep -q -- '--mode: "ssp" is not a mode' "$T/out.txt" || { cat "$T/out.txt"; fail "$p --mode ssp: no exit 2 with the reason"; }
done
"$BIN/hetps-worker" --cluster "$T/good.json" --task worker:0 --early-push maybe > "$T/out.txt" 2>&1
[ $? -eq 2 ] && grep -q -- "--early-push: 'maybe'; use on or off" "$T/out.txt" || { cat "$T/out.txt"; fail "hetps-worker --early-push maybe: no exit 2 with the reason"; }
"$BIN/hetps" launch --mode fast "$T/good.json" > "$T/out.txt" 2>&1
[ $? -eq 2 ] && grep -q -- '--mode: "fast" is not a mode' "$T/out.txt" || { cat "$T/out.txt"; fail "hetps launch --mode fast: no exit 2 with the reason"; }
ok "configuration mistakes exit 2 with a message"

echo "{ \"cluster\": { \"ps\": [\"127.0.0.1:$((PORT + 5))\"], \"worker\": [\"127.0.0.1:1\"] } }" > "$T/down.json"
start=$(date +%s)
"$BIN/hetps-worker" --cluster "$T/down.json" --task worker:0 --timeout 200 --retry 1500 > "$T/out.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || { cat "$T/out.txt"; fail "worker with no server exited $rc, not 1"; }
grep -q "ps:0" "$T/out.txt" && grep -q "127.0.0.1:$((PORT + 5))" "$T/out.txt" || { cat "$T/out.txt"; fail "unreachable shard not named"; }
[ $(( $(date +%s) - start )) -lt 15 ] || fail "worker took too long to give up"
ok "unreachable shard: named, exit 1"

# hetps predict: help, flags and images it cannot take (checked before any
# weights are read, so none are needed here).
"$BIN/hetps" predict --help > "$T/help.txt" 2>&1 && grep -q "Usage: hetps predict" "$T/help.txt" || fail "hetps predict --help"
"$BIN/hetps" --help | grep -q "predict --model" || fail "hetps --help does not list predict"
M=deploy/models/fashion_cnn.json
for args in "--weights $T" "--model $M" "--model $M --weights $T --cluster $T/good.json" \
            "--model $M --weights $T --batch-size 0" "--model $M --weights $T --set valid" \
            "--model $M --weights $T --images x --set train" "--model $M --weights $T --no-such-flag"; do
    "$BIN/hetps" predict $args > "$T/out.txt" 2>&1
    rc=$?
    [ $rc -eq 2 ] && grep -q -- '--' "$T/out.txt" || { cat "$T/out.txt"; fail "hetps predict $args: exit $rc, not 2 with the flag"; }
done
"$BIN/hetps" predict --model $M --weights "$T" --images "$T/none" > "$T/out.txt" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "images file $T/none: cannot open" "$T/out.txt" || { cat "$T/out.txt"; fail "missing images file: exit $rc"; }
/usr/bin/python3 -c "import struct, sys; open(sys.argv[1], 'wb').write(struct.pack('>IIII', 0x803, 3, 14, 56) + bytes(3 * 784))" "$T/wide"
"$BIN/hetps" predict --model $M --weights "$T" --images "$T/wide" > "$T/out.txt" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "images file $T/wide holds images of shape (14, 56, 1), but model fashion_cnn ($M) takes input of shape (28, 28, 1)" "$T/out.txt" || { cat "$T/out.txt"; fail "images of another shape: exit $rc"; }
ok "hetps predict: --help, bad flags exit 2, a missing file and images of another shape named"
