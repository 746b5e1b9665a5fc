#!/bin/sh
# security.sh — a cluster admits only its own tasks (mutual TLS, roles).
# Two parameter servers on loopback with the cluster's certificates; then
#  - a client on nng's own TLS transport is refused by name;
#  - a client with no certificate, with one from another CA, with another
#    task's certificate, or from another cluster (another cluster id) can
#    neither join, pull, push, create nor shut down, and the shard's log
#    names the refused peer;
#  - a worker's certificate cannot shut the cluster down, nor a worker
#    other than the chief create the variables, nor read the members;
#  - a second live worker:1 is refused while the first keeps training, and
#    neither its join nor its pushes touch the first one's record;
#  - a worker:1 killed with -9 and started again rejoins at once;
#  - a worker with another model file is refused at its first pull.
# Controls: the front door's certificate reads the status, a worker's
# certificate joins, so every refusal above is the credentials' doing.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
MODEL=deploy/models/fashion_cnn.json
cluster2 '{ "mode": "async" }'
"$BIN/hetps" certs "$T/cluster.json" "$T/other" > /dev/null || fail "certs of another CA"
# Another cluster: a second ps list (so another cluster id), same ps:0.
sed "s/\"127.0.0.1:$((PORT + 1))\"/\"127.0.0.1:$((PORT + 7))\"/" "$T/cluster.json" > "$T/other.json"
# Another definition on the same servers: the same ps list, another mode.
sed 's/"mode": "async"/"mode": "sync"/' "$T/cluster.json" > "$T/other-mode.json"
cmp -s "$T/cluster.json" "$T/other-mode.json" && fail "other-mode.json is not another definition"

for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/ps-$i" > "$T/ps-$i.log" 2>&1 &
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "servers did not come up over TLS"
grep -q "mutual TLS" "$T/ps-0.log" || fail "ps:0 does not say it serves mutual TLS"

poke() { "$B/tools/poke" as "$@"; }

# Controls: the right certificates are let in.
poke "$T/cluster.json" client status > "$T/p.txt" || { cat "$T/p.txt"; fail "control: the front door cannot read the status"; }
POKE_CERT=$T/certs/worker-1.pem poke "$T/cluster.json" worker:1 join > "$T/p.txt" ||
    { cat "$T/p.txt"; fail "control: worker:1's certificate cannot join"; }
ok "controls: the admin certificate reads the status, worker:1's joins"

# A client on nng's own TLS transport (tls+tcp://, not the relay's
# protocol inside TLS): refused, and the server says why by name.
POKE_NNG_TLS=1 poke "$T/cluster.json" client status > "$T/p.txt" 2>&1 &&
    { cat "$T/p.txt"; fail "a client on nng's TLS transport was answered"; }
grep -q "speaks nng's own TLS transport" "$T/ps-0.log" ||
    { tail -5 "$T/ps-0.log"; fail "ps:0 does not name nng's TLS transport"; }
ok "a client on nng's own TLS transport is refused; ps:0 names the transport"

refused_all() { # WHAT CLUSTER_FILE TASK: every kind refused
    what=$1 file=$2 task=$3
    for kind in join pull push create shutdown; do
        poke "$file" "$task" $kind > "$T/p.txt" 2>&1 && { cat "$T/p.txt"; fail "$what: $kind accepted"; }
        grep -q "poke: refused" "$T/p.txt" || { cat "$T/p.txt"; fail "$what: $kind: no refusal"; }
    done
    # (the refused peers hang up mid-handshake: the servers must go on
    # taking connections)
    wait_for 20 "$BIN/hetps" status "$T/cluster.json" ||
        { tail -5 "$T/ps-0.log"; fail "$what: the servers stopped serving"; }
}

POKE_CERT=none; export POKE_CERT
refused_all "no certificate" "$T/cluster.json" worker:0
grep -q "refused the connection from 127.0.0.1:[0-9]*.*no client certificate" "$T/ps-0.log" ||
    { cat "$T/ps-0.log"; fail "ps:0's log does not name the peer without a certificate"; }
ok "no certificate: join, pull, push, create, shutdown all refused; ps:0 names the peer"

POKE_CERT=$T/other/worker-0.pem
n0=$(grep -c "refused the connection" "$T/ps-0.log")
refused_all "another CA" "$T/cluster.json" worker:0
n1=$(grep -c "refused the connection" "$T/ps-0.log")
[ "$n1" -gt "$n0" ] || { cat "$T/ps-0.log"; fail "ps:0's log does not name the peer with another CA's certificate"; }
ok "another CA's certificate: all refused; ps:0 logged $((n1 - n0)) refused connections"

POKE_CERT=$T/certs/worker-0.pem
refused_all "another cluster" "$T/other.json" worker:0
grep -q "rejected a message from 127.0.0.1:[0-9]* .*cluster" "$T/ps-0.log" ||
    { cat "$T/ps-0.log"; fail "ps:0's log does not name the peer of another cluster"; }
ok "another cluster id: all refused; ps:0 names the peer and the cluster"

n0=$(grep -c "rejected a message from 127.0.0.1:[0-9]* .*cluster" "$T/ps-0.log")
refused_all "the same servers, another mode" "$T/other-mode.json" worker:0
n1=$(grep -c "rejected a message from 127.0.0.1:[0-9]* .*cluster" "$T/ps-0.log")
[ "$n1" -gt "$n0" ] || { cat "$T/ps-0.log"; fail "ps:0's log does not name the peer of another definition"; }
ok "the same servers in another definition (mode sync): all refused as another cluster"

POKE_CERT=$T/certs/worker-1.pem
refused_all "another task's certificate" "$T/cluster.json" worker:0
grep -q "from 127.0.0.1:[0-9]* (.*): it claims worker:0 but its certificate is worker:1" "$T/ps-0.log" ||
    { cat "$T/ps-0.log"; fail "ps:0's log does not name the peer posing as worker:0"; }
poke "$T/cluster.json" client shutdown > "$T/p.txt" && { cat "$T/p.txt"; fail "worker:1's certificate shut down as the front door"; }
grep -q "certificate is worker:1's" "$T/p.txt" || { cat "$T/p.txt"; fail "the refusal does not name the certificate"; }
ok "worker:1's certificate claiming worker:0 or the front door: all refused; ps:0 names the peer and both tasks"

# A certificate the cluster's CA signed for a task this cluster file does
# not have (the loopback set has 16 workers, this cluster 2): refused at
# the handshake, whatever it asks; ps:0 names its CN and the cluster file.
POKE_CERT=$T/certs/worker-7.pem
for kind in join status; do
    poke "$T/cluster.json" worker:1 $kind > "$T/p.txt" 2>&1 && { cat "$T/p.txt"; fail "worker:7's certificate: $kind accepted"; }
done
grep -q "refused the connection from 127.0.0.1:[0-9]* .*its certificate names worker:7: no task of $T/cluster.json (2 parameter servers, 2 workers)" "$T/ps-0.log" ||
    { tail -5 "$T/ps-0.log"; fail "ps:0 does not name worker:7's certificate and the cluster file"; }
ok "a CA-signed certificate of worker:7, no task of the cluster: refused at the handshake, named in ps:0's log"

# A parameter server's certificate, as itself, asking to join: refused,
# and logged with the peer.
POKE_CERT=$T/certs/ps-1.pem
poke "$T/cluster.json" ps:1 join > "$T/p.txt" 2>&1 && { cat "$T/p.txt"; fail "ps:1's certificate joined as a worker"; }
grep -q "only workers" "$T/p.txt" || { cat "$T/p.txt"; fail "ps:1's join refusal does not say who may"; }
grep -q "refused a request from 127.0.0.1:[0-9]* .*: a join from ps:1: only workers may send it" "$T/ps-0.log" ||
    { tail -5 "$T/ps-0.log"; fail "ps:0 does not log ps:1's join"; }
ok "ps:1's certificate sending a join: refused, and logged with the peer"

POKE_CERT=$T/certs/worker-1.pem
poke "$T/cluster.json" worker:1 shutdown > "$T/p.txt" && { cat "$T/p.txt"; fail "a worker shut the cluster down"; }
grep -q "only the chief" "$T/p.txt" || { cat "$T/p.txt"; tail -5 "$T/ps-0.log"; fail "the shutdown refusal does not say who may"; }
grep -q "refused a request from 127.0.0.1:[0-9]* .*: a shutdown from worker:1" "$T/ps-0.log" || fail "ps:0 does not log the refused shutdown"
poke "$T/cluster.json" worker:1 create > "$T/p.txt" && { cat "$T/p.txt"; fail "worker:1 created the variables"; }
grep -q "only the chief" "$T/p.txt" || { cat "$T/p.txt"; fail "the create refusal does not say who may"; }
"$B/tools/poke" as "$T/cluster.json" worker:1 status > "$T/p.txt" || fail "a worker's status (its mode) refused"
wait_for 20 "$BIN/hetps" status "$T/cluster.json" || fail "a worker's shutdown stopped the servers"
unset POKE_CERT
ok "worker:1's certificate can neither shut down nor create; the servers keep serving"

# Two live processes claiming worker:1.
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:0 --model $MODEL \
    --max-steps 400 --no-eval > "$T/w0.log" 2>&1 &
W0=$!; track $W0
# (long enough to be still training when the second one comes: it is
# killed below)
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:1 --model $MODEL \
    --max-steps 20000 --no-eval > "$T/w1.log" 2>&1 &
W1=$!; track $W1
# (poke's join above already logged "worker:1 joined": wait for this
# process's own training line, which follows its join and first pull)
wait_for 60 grep -q "training " "$T/w1.log" || { cat "$T/w1.log"; fail "worker:1 did not start training"; }
sleep 1
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:1 --model $MODEL \
    --max-steps 5 --no-eval > "$T/w1b.log" 2>&1
rc=$?
[ $rc -ne 0 ] || { cat "$T/w1b.log"; fail "a second live worker:1 was let in"; }
grep -q "already joined .* by a live process" "$T/w1b.log" || { cat "$T/w1b.log"; fail "the second worker:1 does not say why"; }
grep -q "refused worker:1 .*already joined by a live process" "$T/ps-0.log" || fail "ps:0 does not log the second worker:1"
kill -0 $W1 2>/dev/null || { cat "$T/w1.log"; fail "the first worker:1 stopped"; }
ok "a second live worker:1 is refused (exit $rc) while the first trains"

# A crash: the first worker:1 killed, a new one rejoins at once.
kill -KILL $W1
wait $W1 2>/dev/null
t0=$(date +%s)
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:1 --model $MODEL \
    --max-steps 20 --no-eval > "$T/w1c.log" 2>&1 || { cat "$T/w1c.log"; fail "worker:1 restarted after a crash was refused"; }
dt=$(( $(date +%s) - t0 ))
[ $dt -lt 60 ] || fail "the restarted worker:1 took $dt s"
grep -q "worker:1 restarted" "$T/ps-0.log" || fail "ps:0 did not see worker:1 restart"
ok "worker:1 killed with -9 and started again rejoins at once and trains ($dt s)"
wait $W0 || { tail -5 "$T/w0.log"; fail "the chief failed"; }
ok "the chief trained to its end alongside"

# Another model: its pulls and pushes are refused, both signatures named.
"$BIN/hetps-worker" --cluster "$T/cluster.json" --task worker:1 --model deploy/models/fashion_mlp.json \
    --max-steps 5 --no-eval > "$T/w1m.log" 2>&1 && { cat "$T/w1m.log"; fail "a worker with another model was let in"; }
grep -q "model (signature [0-9a-f]*) is not the one ps:[01]'s variables were created with ([0-9a-f]*)" "$T/w1m.log" ||
    { cat "$T/w1m.log"; fail "the worker with another model is not told why"; }
grep -q "refused a request from 127.0.0.1:[0-9]* .*: a pull: worker:1's model" "$T/ps-0.log" || fail "ps:0 does not log the other model"
ok "a worker of another model is refused at its first pull, both signatures named"
