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
