#!/bin/sh
# deploy_compose.sh — the images and Compose files, end to end with a real
# Docker daemon (tests/deploy/docker.inc starts one if none runs, and puts
# the host back). Builds the image (the local minbase base is cached by its
# tag), then twice — one Compose network, and two per-host files (host
# networking, 127.0.0.2 and 127.0.0.3 standing for two machines) run side
# by side — trains the reference model with 2 parameter servers + 2
# workers and:
#   kills a parameter server's process: the restart policy brings it back
#   on its volume, and the job goes on;
#   adds a third worker to the cluster file, regenerates, `up -d`: only the
#   new worker starts (the others' start times unchanged), it joins the
#   running job;
#   removes it again: its container stops, the job goes on;
#   the chief ends as any job does: final weights, test accuracy >= 0.85.
# Each step's time is printed ("time: ...").
. "$(dirname "$0")/../integration/lib.inc"
. "$(dirname "$0")/docker.inc"
# The image carries bin/ as built; a sanitizer build's programs need the
# compiler's runtime, which the runtime image does not hold.
if [ "$(cat build/flavour 2>/dev/null)" = san ]; then
    echo "skipped: bin/ is an ASan/UBSan build (make test SANITIZE=1); the image is tested by make test"
    exit 77
fi
need_data
PROJECTS=""
down_all() {
    for p in $PROJECTS; do
        docker-compose -p "${p%%:*}" -f "${p#*:}" down -v --remove-orphans -t 5 >/dev/null 2>&1
    done
}
trap 'down_all; docker_restore; cleanup' EXIT INT TERM
docker_up
HETPS=$BIN/hetps
DC="docker-compose --ansi never"
EPOCHS=2
SLOW=4          # worker steps 4x slower: the job lasts long enough to edit
t_all=$(date +%s)
t0=$t_all
step() { t1=$(date +%s); echo "time: $1: $((t1 - t0)) s"; t0=$t1; }

./deploy/image.sh || fail "the image did not build"
size=$(docker image inspect -f '{{.Size}}' hetps:latest)
step "image build (base cached by tag), $((size / 1000000)) MB"
[ "$size" -lt 200000000 ] || fail "the image is $((size / 1000000)) MB, over 200 MB"

# A GPU worker on this host, whose Docker has no nvidia runtime (if it has
# one, there is nothing to refuse).
mkdir -p "$T/gpu"
echo '{ "cluster": { "ps": ["p0:1"], "worker": ["g0:1"] }, "hetps": { "workers": [ {"devices": "gpu:0"} ] } }' > "$T/gpu/c.json"
if ! docker info --format '{{json .Runtimes}}' | grep -q nvidia; then
    "$HETPS" compose "$T/gpu/c.json" --check-gpu > /dev/null 2> "$T/gpu/err" &&
        fail "--check-gpu accepted a GPU worker on a Docker without the nvidia runtime"
    grep -q "worker-0 (g0:1) asks for GPUs, but this host's Docker has no nvidia runtime" "$T/gpu/err" ||
        { cat "$T/gpu/err"; fail "--check-gpu: no clear message"; }
    ok "--check-gpu: $(cat "$T/gpu/err")"
fi

# cid PROJECT FILE SERVICE: the service's container (by Compose's labels:
# docker is much quicker to ask than docker-compose); started …: its start.
cid() {
    docker ps -aq --filter "label=com.docker.compose.project=$1" \
        --filter "label=com.docker.compose.service=$3"
}
started() { docker inspect -f '{{.State.StartedAt}}' "$(cid "$@")"; }
health() { docker inspect -f '{{.State.Health.Status}}' "$(cid "$@")"; }
healthy() { [ "$(health "$@" 2>/dev/null)" = healthy ]; }
restarted() { [ "$(docker inspect -f '{{.RestartCount}}' "$(cid "$@")")" -ge 1 ]; }
# start_to_healthy CONTAINER: seconds from its start to the end of its
# first passing health check.
start_to_healthy() {
    docker inspect "$1" | python3 -c '
import json, re, sys
from datetime import datetime
def t(s):
    s = re.sub(r"(\.\d{6})\d*", r"\1", s).replace("Z", "+00:00")
    return datetime.fromisoformat(s)
st = json.load(sys.stdin)[0]["State"]
ok = [h for h in st["Health"]["Log"] if h["ExitCode"] == 0]
print("%.1f" % (t(ok[0]["End"]) - t(st["StartedAt"])).total_seconds() if ok else "?")'
}
# status PROJECT FILE: `hetps status` asked from inside ps-0's container
# (host networking: from its own file's ps).
status() { docker exec "$(cid "$1" "$2" "$3")" hetps status "$4" 2>/dev/null; }
logs() { $DC -p "$1" -f "$2" logs --no-color --tail 40; }

# job NAME: the whole scenario, on files set up by the caller:
#   PA FA    project and Compose file with ps-0 and worker-0
#   PB FB    project and Compose file with ps-1, worker-1 and then worker-2
#            (the same as PA FA on one network)
#   CF       the cluster file; write3 makes it list 3 workers; gen
#            regenerates the Compose file(s)
#   INSIDE   the cluster file's path inside the containers
job() {
    gen
    t0=$(date +%s)
    $DC -p "$PA" -f "$FA" up -d >"$T/up.log" 2>&1 || { cat "$T/up.log"; fail "$1: up failed"; }
    [ "$PB" = "$PA" ] || $DC -p "$PB" -f "$FB" up -d >>"$T/up.log" 2>&1 ||
        { cat "$T/up.log"; fail "$1: up of the second host failed"; }
    wait_for 60 healthy "$PA" "$FA" ps-0 || { logs "$PA" "$FA"; fail "$1: ps-0 not healthy"; }
    step "$1: up -d to ps-0 healthy and the workers started"
    echo "time: $1: ps-0 from container start to its first healthy check: $(start_to_healthy "$(cid "$PA" "$FA" ps-0)") s"
    wait_for 60 healthy "$PA" "$FA" worker-0 || { logs "$PA" "$FA"; fail "$1: worker-0 never healthy (joined)"; }
    step "$1: worker-0 healthy (joined)"
    trained() { status "$PA" "$FA" ps-0 "$INSIDE" | grep -q '^ps:1 .* version [1-9][0-9][0-9]'; }
    wait_for 120 trained || { logs "$PB" "$FB"; fail "$1: training did not start"; }

    # A parameter server's process killed: the restart policy brings it
    # back on its store, and training goes on.
    pid=$(docker inspect -f '{{.State.Pid}}' "$(cid "$PB" "$FB" ps-1)")
    kill -KILL "$pid"
    wait_for 60 restarted "$PB" "$FB" ps-1 || fail "$1: ps-1 was not restarted"
    wait_for 60 healthy "$PB" "$FB" ps-1 || { logs "$PB" "$FB"; fail "$1: ps-1 not healthy after its restart"; }
    step "$1: ps-1 killed, restarted by the policy, healthy"

    # Scale by editing the cluster file: only worker-2 starts.
    for s in worker-0 worker-1; do
        for x in $(cid "$PA" "$FA" $s; [ "$PB" = "$PA" ] || cid "$PB" "$FB" $s); do
            [ "$(docker inspect -f '{{.State.Running}}' "$x")" = true ] ||
                fail "$1: $s ended before the edit (the job was too short to scale it: raise SLOW)"
        done
    done
    before=""
    for s in ps-0 worker-0; do before="$before $s=$(started "$PA" "$FA" $s)"; done
    for s in ps-1 worker-1; do before="$before $s=$(started "$PB" "$FB" $s)"; done
    # (a container not found has no start time: "s=" before and after
    # would compare equal)
    case "$before " in *"= "*) fail "$1: a container's start time is missing:$before" ;; esac
    cp "$CF" "$T/cluster.orig"
    write3
    gen
    $DC -p "$PB" -f "$FB" up -d --remove-orphans >"$T/up2.log" 2>&1 || { cat "$T/up2.log"; fail "$1: up after the edit failed"; }
    [ "$PB" = "$PA" ] || $DC -p "$PA" -f "$FA" up -d --remove-orphans >>"$T/up2.log" 2>&1 ||
        { cat "$T/up2.log"; fail "$1: up of the first host after the edit failed"; }
    grep -qi "recreat" "$T/up2.log" && { cat "$T/up2.log"; fail "$1: up -d recreated a running service"; }
    after=""
    for s in ps-0 worker-0; do after="$after $s=$(started "$PA" "$FA" $s)"; done
    for s in ps-1 worker-1; do after="$after $s=$(started "$PB" "$FB" $s)"; done
    [ "$before" = "$after" ] || cat "$T/up2.log"
    [ "$before" = "$after" ] || fail "$1: a running container restarted: before$before, after$after"
    step "$1: cluster file edited, regenerated, up -d: only worker-2 created"
    joined3() { status "$PA" "$FA" ps-0 "$INSIDE" | grep -q '^worker:2 .*joined.*clock [1-9]'; }
    wait_for 90 joined3 || { status "$PA" "$FA" ps-0 "$INSIDE"; logs "$PB" "$FB"; fail "$1: worker-2 did not join the running job"; }
    docker logs "$(cid "$PA" "$FA" ps-0)" 2>&1 | grep -q "worker:2 added by the cluster file" ||
        fail "$1: ps-0 did not see the edit through the directory mount"
    step "$1: worker-2 joined the running job and pushes"

    # And removed again: its container stops, the job goes on.
    cp "$T/cluster.orig" "$CF.tmp" && mv "$CF.tmp" "$CF"
    gen
    $DC -p "$PB" -f "$FB" up -d --remove-orphans >"$T/up3.log" 2>&1 || { cat "$T/up3.log"; fail "$1: up after the removal failed"; }
    [ -z "$(cid "$PB" "$FB" worker-2)" ] || { cat "$T/up3.log"; fail "$1: worker-2's container still there"; }
    removed() { docker logs "$(cid "$PA" "$FA" ps-0)" 2>&1 | grep -q "worker:2 removed by the cluster file"; }
    wait_for 20 removed || fail "$1: ps-0 did not take the removal"
    step "$1: worker-2's line removed: its container stopped and removed"

    # The job ends as any job does: the chief waits for all three.
    c0=$(cid "$PA" "$FA" worker-0)
    i=0
    while [ "$(docker inspect -f '{{.State.Running}}' "$c0")" = true ] && [ $i -lt 1500 ]; do
        sleep 0.2; i=$((i + 1))
    done
    code=$(docker inspect -f '{{.State.ExitCode}}' "$c0")
    docker logs "$c0" > "$T/chief.log" 2>&1
    [ "$code" = 0 ] || { tail -30 "$T/chief.log"; fail "$1: the chief exited $code"; }
    acc=$(sed -n 's/.*Final weights (all workers done).*val_accuracy: \([0-9.]*\).*/\1/p' "$T/chief.log")
    [ -n "$acc" ] || { tail -30 "$T/chief.log"; fail "$1: no 'Final weights (all workers done)' line"; }
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.85) }' || { tail "$T/chief.log"; fail "$1: accuracy $acc < 0.85"; }
    step "$1: job done, final test accuracy $acc"
    ok "$1: trained to $acc; ps-1 restarted by its policy; worker-2 joined and left by edits"
}

# --- One host: a Compose network, the cluster file's host names as aliases.
mkdir -p "$T/one"
cat > "$T/one/cluster.json" <<EOF
{ "cluster": { "ps": ["ps0:2222", "ps1:2222"], "worker": ["w0:2222", "w1:2222"] },
  "hetps": { "mode": "async", "workers": [ {"devices": "cpu"}, {"devices": "cpu"} ] } }
EOF
PA=hetpsone$$ PB=$PA FA=$T/one/docker-compose.yml FB=$FA CF=$T/one/cluster.json
INSIDE=/etc/hetps/cluster.json
PROJECTS="$PA:$FA"
WARGS="--model deploy/models/fashion_cnn.json --epochs $EPOCHS --slowdown $SLOW"
gen() {
    # shellcheck disable=SC2086
    "$HETPS" compose "$CF" -o "$FA" --data /usr/share/datasets/fashion-mnist \
        --compose-version "$(docker-compose version --short)" -- $WARGS ||
        fail "hetps compose failed"
}
write3() {
    sed 's/"w1:2222"/"w1:2222", "w2:2222"/; s/{"devices": "cpu"} \]/{"devices": "cpu"}, {"devices": "cpu"} ]/' \
        "$CF" > "$CF.tmp" && mv "$CF.tmp" "$CF"
}
job "one host"
down_all

# --- Two hosts: one file per host, host networking, the addresses as
# written; 127.0.0.2 and 127.0.0.3 stand for the two machines.
pick_ports
mkdir -p "$T/two"
cat > "$T/two/cluster.json" <<EOF
{ "cluster": { "ps": ["127.0.0.2:$PORT", "127.0.0.3:$((PORT + 1))"],
               "worker": ["127.0.0.2:$((PORT + 2))", "127.0.0.3:$((PORT + 3))"] },
  "hetps": { "mode": "async" } }
EOF
CF=$T/two/cluster.json FA=$T/two/host-a.yml FB=$T/two/host-b.yml
PA=hetpsa$$ PB=hetpsb$$
PROJECTS="$PA:$FA $PB:$FB"
hosts=$("$HETPS" compose "$CF" --list-hosts | cut -d' ' -f1 | tr '\n' ' ')
[ "$hosts" = "127.0.0.2 127.0.0.3 " ] || fail "--list-hosts gave '$hosts'"
gen() {
    for h in a:127.0.0.2 b:127.0.0.3; do
        # shellcheck disable=SC2086
        "$HETPS" compose "$CF" --host "${h#*:}" -o "$T/two/host-${h%%:*}.yml" \
            --data /usr/share/datasets/fashion-mnist -- $WARGS || fail "hetps compose --host ${h#*:} failed"
    done
}
write3() {
    sed "s/\"127.0.0.3:$((PORT + 3))\"/\"127.0.0.3:$((PORT + 3))\", \"127.0.0.3:$((PORT + 4))\"/" \
        "$CF" > "$CF.tmp" && mv "$CF.tmp" "$CF"
}
job "two hosts"
t0=$t_all
step "the whole test"
