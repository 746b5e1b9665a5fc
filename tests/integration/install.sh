#!/bin/sh
# install.sh — bare metal: `make install PREFIX=…` puts the three programs,
# the models and the deploy files under PREFIX, the systemd unit and the
# sbatch script pointing at PREFIX/bin; the installed hetps finds hetps-ps
# beside it; a server started as the unit starts it serves, and
# `hetps shutdown` stops it cleanly (exit 0); systemd-analyze accepts the
# unit; `make uninstall` removes everything it installed.
. "$(dirname "$0")/lib.inc"
P=$T/prefix
SAN=""; [ "$B" = build/san ] && SAN="SANITIZE=1"
make --no-print-directory install PREFIX="$P" $SAN > "$T/make.txt" 2>&1 ||
    { cat "$T/make.txt"; fail "make install"; }
for f in bin/hetps bin/hetps-ps bin/hetps-worker share/hetps/models/fashion_cnn.json \
         share/hetps/models/fashion_mlp.json share/hetps/examples/cluster.local.json \
         share/hetps/systemd/hetps-ps@.service share/hetps/slurm/train.sbatch \
         share/hetps/k8s/ps.yaml share/hetps/k8s/validate.py; do
    [ -f "$P/$f" ] || fail "make install did not install $f"
done
[ -x "$P/bin/hetps-ps" ] || fail "hetps-ps is not executable"
grep -q "^ExecStart=$P/bin/hetps-ps " "$P/share/hetps/systemd/hetps-ps@.service" ||
    fail "the unit's ExecStart does not point at PREFIX/bin"
grep -q "HETPS_BIN:-$P/bin}" "$P/share/hetps/slurm/train.sbatch" ||
    fail "the sbatch script does not default to PREFIX/bin"
grep -rq /usr/local "$P/share/hetps/systemd" "$P/share/hetps/slurm" &&
    fail "an installed file still names /usr/local"
ok "make install PREFIX=$P"

if command -v systemd-analyze >/dev/null 2>&1; then
    cp "$P/share/hetps/systemd/hetps-ps@.service" "$T/"
    ln -s hetps-ps@.service "$T/hetps-ps@0.service"
    systemd-analyze verify "$T/hetps-ps@0.service" > "$T/verify.txt" 2>&1 ||
        { cat "$T/verify.txt"; fail "systemd-analyze verify refused the unit"; }
    [ ! -s "$T/verify.txt" ] || { cat "$T/verify.txt"; fail "systemd-analyze verify warns"; }
    ok "systemd-analyze verify hetps-ps@0.service"
else
    echo "note: no systemd-analyze: the unit file was not verified"
fi

# The unit's command line, from the installed programs, on loopback.
pick_ports
cat > "$T/cluster.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] } }
JSON
"$P/bin/hetps-ps" --cluster "$T/cluster.json" --task ps:0 --data-dir "$T/ps-0" > "$T/ps.txt" 2>&1 &
PS=$!
track $PS
wait_for 10 "$P/bin/hetps" status "$T/cluster.json" || { cat "$T/ps.txt"; fail "the installed hetps-ps does not serve"; }
"$P/bin/hetps" shutdown "$T/cluster.json" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "hetps shutdown"; }
grep -q "1 parameter server(s) told to shut down" "$T/out.txt" || { cat "$T/out.txt"; fail "hetps shutdown said nothing"; }
ps_gone() { ! kill -0 $PS 2>/dev/null; }
wait_for 15 ps_gone || fail "the server did not exit after hetps shutdown"
wait $PS || { cat "$T/ps.txt"; fail "the server exited non-zero after hetps shutdown"; }
PIDS=""
[ -f "$T/ps-0/data.mdb" ] || fail "no store left behind"
"$P/bin/hetps" shutdown "$T/cluster.json" > "$T/out.txt" 2>&1 && fail "hetps shutdown of a stopped cluster succeeded"
ok "installed hetps-ps serves; hetps shutdown stops it with exit 0"

make --no-print-directory uninstall PREFIX="$P" $SAN > "$T/make.txt" 2>&1 || { cat "$T/make.txt"; fail "make uninstall"; }
left=$(find "$P" -type f | head -3)
[ -z "$left" ] || fail "make uninstall left $left"
ok "make uninstall"
