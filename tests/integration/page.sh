#!/bin/sh
# page.sh — the chief's live page (GET / on its metrics address) in a real
# browser: while a job trains, headless Chromium renders it (screenshot
# taken, a PNG of the window's size) and its DOM holds the tasks' table
# (both shards up, the chief and the worker joined, with speeds), the
# charts (SVG polylines) and the self-refresh, and loads nothing else.
. "$(dirname "$0")/lib.inc"
need_data
CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
    { echo "skipped: no chromium (Debian package chromium)"; exit 77; }
pick_ports
MODEL=deploy/models/fashion_cnn.json
MP=$((PORT + 5))
cluster2 "{ \"mode\": \"async\", \"metrics_port\": $MP }"
URL="http://127.0.0.1:$((MP + 2))/"      # worker:0, after 2 parameter servers

"$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model $MODEL --epochs 5 > "$T/launch.log" 2>&1 &
LPID=$!
track $LPID
epoch1() { grep -q '^\[worker:0\] Epoch 1/5 - .*val_accuracy' "$T/launch.log"; }
wait_for 120 epoch1 || { tail -20 "$T/launch.log"; fail "no first epoch within 120 s"; }
grep -q "live page on $URL" "$T/launch.log" || fail "the chief did not say where its page is"
# Chromium as root needs --no-sandbox; its profile goes to our temp dir.
chrome() { HOME="$T" timeout 90 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --hide-scrollbars --user-data-dir="$T/chromium" "$@" 2>> "$T/chromium.log"; }
chrome --window-size=1400,1100 --screenshot="$T/page.png" "$URL" > /dev/null || { tail "$T/chromium.log"; fail "chromium --screenshot"; }
[ "$(head -c 8 "$T/page.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "no PNG screenshot"
[ "$(wc -c < "$T/page.png")" -gt 30000 ] || fail "the screenshot is nearly empty ($(wc -c < "$T/page.png") bytes)"
chrome --dump-dom "$URL" > "$T/dom.html" || fail "chromium --dump-dom"
grep -q '<title>hetps: fashion_cnn</title>' "$T/dom.html" || fail "no title"
grep -q '<meta http-equiv="refresh" content="2">' "$T/dom.html" || fail "the page does not refresh itself"
for row in '<td>ps:0</td><td>parameter server</td><td></td><td>up</td>' \
           '<td>ps:1</td><td>parameter server</td><td></td><td>up</td>' \
           '<td>worker:0</td><td>chief</td><td>cpu[^<]*</td><td>joined</td>' \
           '<td>worker:1</td><td>worker</td><td>cpu[^<]*</td><td>joined</td>'; do
    grep -Eq "$row" "$T/dom.html" || fail "the tasks' table lacks: $row"
done
grep -Eq '<td>worker:1</td><td>worker</td><td>cpu[^<]*</td><td>joined</td><td>[0-9]+</td><td>[1-9][0-9]*</td>' "$T/dom.html" ||
    fail "worker:1's step and speed are not shown"
n=$(grep -o '<polyline' "$T/dom.html" | wc -l)
[ "$n" -ge 5 ] || fail "$n charts' lines, want >= 5"
grep -q 'last val_accuracy 0\.[0-9]*' "$T/dom.html" || fail "no val_accuracy on the page"
! grep -Eiq '<(script|link|img)[ >]|src=' "$T/dom.html" || fail "the page loads something else"
ok "live page: screenshot $(wc -c < "$T/page.png") bytes; tasks' table, $n lines in SVG charts, self-refresh, no external assets"
kill -TERM $LPID
wait_for 30 sh -c "! kill -0 $LPID" || fail "the job did not stop on SIGTERM"
PIDS=""
