#!/bin/sh
# k8s.sh — `hetps k8s` and the Kubernetes resolver, offline: the committed
# example deploy/k8s/ is what `hetps k8s` writes today; the manifests pass
# deploy/k8s/validate.py (the Kubernetes API's fields, and across objects);
# the validator refuses broken copies, each with its message; bad flags and
# files are named; a parameter server started as pod NAME-ps-0 with
# --cluster k8s:FILE finds its task and serves, a worker started as index 0
# of an Indexed Job trains against it, and `hetps shutdown` stops it.
. "$(dirname "$0")/lib.inc"
PY=/usr/bin/python3
V=deploy/k8s/validate.py
$PY -c 'import yaml, jsonschema' 2>/dev/null ||
    { echo "skipped: /usr/bin/python3 lacks yaml or jsonschema (python3-yaml, python3-jsonschema)"; exit 77; }

# 1. the committed example is current, and valid
"$BIN/hetps" k8s deploy/cluster.local.json -o "$T/gen" -- --epochs 10 2> "$T/err.txt" ||
    { cat "$T/err.txt"; fail "hetps k8s failed"; }
for f in configmap ps worker; do
    diff -u "deploy/k8s/$f.yaml" "$T/gen/$f.yaml" ||
        fail "deploy/k8s/$f.yaml is stale: regenerate with: bin/hetps k8s deploy/cluster.local.json -o deploy/k8s -- --epochs 10"
done
$PY $V deploy/k8s > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "the example does not validate"; }
grep -q "^ok: 5 objects in 3 files" "$T/out.txt" || { cat "$T/out.txt"; fail "validate.py counted wrong"; }
ok "deploy/k8s is current and valid"

# 2. a namespace, a name, GPU workers, to stdout; a token file is refused by name
cat > "$T/gpu.json" <<'JSON'
{ "cluster": { "ps": ["a:1", "b:1", "c:1"], "worker": ["g:1", "h:1"] },
  "task": { "type": "ps", "index": 0 },
  "hetps": { "mode": "sync", "workers": [ {"devices": "gpu:0,gpu:1"}, {"devices": "gpu:0,gpu:1"} ] } }
JSON
"$BIN/hetps" k8s --name mnist --namespace team-a --storage 20Gi --port 2300 \
    "$T/gpu.json" > "$T/all.yaml" 2> "$T/err.txt" || { cat "$T/err.txt"; fail "hetps k8s to stdout"; }
$PY $V "$T/all.yaml" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "the GPU manifests do not validate"; }
grep -q "nvidia.com/gpu: 2" "$T/all.yaml" || fail "GPU workers ask for no GPUs"
grep -q '"mnist-ps-2.mnist-ps.team-a.svc:2300"' "$T/all.yaml" || fail "no namespaced ps address"
grep -q '"mode": "sync"' "$T/all.yaml" || fail "the hetps block was not kept"
grep -q '"task"' "$T/all.yaml" && fail "the file's task was kept in the ConfigMap"
grep -q "storage: 20Gi" "$T/all.yaml" || fail "--storage not used"
grep -q 'token' "$T/all.yaml" && fail "a token is mounted though none exists"
sed 's|"mode": "sync",|"mode": "sync", "token_file": "/run/secrets/hetps.token",|' "$T/gpu.json" > "$T/token.json"
"$BIN/hetps" k8s --name mnist "$T/token.json" > "$T/tok.yaml" 2> "$T/err.txt" && fail "a cluster file with a token_file was taken"
grep -q 'hetps.token_file.*is not supported' "$T/err.txt" || { cat "$T/err.txt"; fail "the token_file refusal does not name the key"; }
ok "namespace, name, GPUs, port, storage; token_file refused by name"

# 2b. a GPU server beside CPU workers: an Indexed Job per kind of worker
cat > "$T/mixed.json" <<'JSON'
{ "cluster": { "ps": ["a:1"], "worker": ["g:1", "c:1", "d:1", "h:1"] },
  "hetps": { "workers": [ {"devices": "gpu:0,gpu:1"}, {"devices": "cpu"},
                          {"devices": "auto"}, {"devices": "gpu:0,gpu:1"} ] } }
JSON
"$BIN/hetps" k8s "$T/mixed.json" -o "$T/mixed" 2> "$T/err.txt" || { cat "$T/err.txt"; fail "hetps k8s, mixed workers"; }
$PY $V "$T/mixed" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "the mixed manifests do not validate"; }
[ "$(grep -c '^kind: Job' "$T/mixed/worker.yaml")" = 3 ] || fail "not one Job per run of alike workers"
grep -A1 "name: HETPS_INDEX_OFFSET" "$T/mixed/worker.yaml" | grep -q 'value: "3"' || fail "the last Job does not start at worker 3"
[ "$(grep -c 'nvidia.com/gpu: 2' "$T/mixed/worker.yaml")" = 2 ] || fail "CPU workers ask for GPUs (or GPU workers do not)"
[ "$(grep -c 'image: "hetps:gpu"' "$T/mixed/worker.yaml")" = 2 ] || fail "GPU workers do not run the GPU image"
[ "$(grep -c 'image: "hetps:latest"' "$T/mixed/worker.yaml")" = 1 ] || fail "CPU workers do not run the CPU image"

# Mutual TLS: every pod mounts the Secret NAME-certs and is pointed at it;
# --certs makes the certificates for the pods' DNS names, and the folder the
# Secret is made from holds no CA key.
grep -q "secretName: hetps-certs" "$T/gen/ps.yaml" && grep -q "secretName: hetps-certs" "$T/gen/worker.yaml" ||
    fail "the pods do not mount the Secret hetps-certs"
[ "$(grep -c 'name: HETPS_CERTS' "$T/gen/ps.yaml" "$T/gen/worker.yaml" | awk -F: '{s += $2} END {print s}')" = 2 ] ||
    fail "HETPS_CERTS is not set in every pod template"
"$BIN/hetps" k8s deploy/cluster.local.json -o "$T/tls" --certs "$T/kc" 2> "$T/err.txt" ||
    { cat "$T/err.txt"; fail "hetps k8s --certs"; }
grep -q "kubectl create secret generic hetps-certs --from-file=$T/kc/tasks" "$T/err.txt" ||
    { cat "$T/err.txt"; fail "hetps k8s --certs does not say how to make the Secret"; }
[ "$(cd "$T/kc/tasks" && ls | tr '\n' ' ')" = "admin.pem ca.crt ps-0.pem ps-1.pem worker-0.pem worker-1.pem " ] ||
    { ls "$T/kc/tasks"; fail "the Secret's folder holds other files than the CA and the tasks' certificates"; }
openssl x509 -noout -text -in "$T/kc/ps-1.pem" | grep -q "DNS:hetps-ps-1.hetps-ps" ||
    fail "ps:1's certificate does not name its pod"
ok "TLS: the Secret hetps-certs mounted in every pod; --certs names the pods"
grep -q '"hetps-worker-cpu-1.hetps-worker:2222"' "$T/mixed/configmap.yaml" || fail "worker 2's address is not its pod's"
sed -i 's/value: "3"/value: "2"/' "$T/mixed/worker.yaml"
$PY $V "$T/mixed" > "$T/out.txt" 2>&1 && fail "validate.py accepted a Job at the wrong offset"
grep -q "worker 2 is also run by" "$T/out.txt" && grep -q "worker(s) 3 are run by no Job" "$T/out.txt" ||
    { cat "$T/out.txt"; fail "validate.py's message for a wrong offset"; }
ok "a Job per kind of worker (GPU, CPU), with its offset"

# 3. the validator refuses what the API server or the pods would
bad() { # bad FILE SED-EXPR EXPECTED-TEXT
    rm -rf "$T/bad"; cp -r "$T/gen" "$T/bad"
    sed -i "$2" "$T/bad/$1"
    cmp -s "$T/gen/$1" "$T/bad/$1" && fail "sed '$2' changed nothing"
    $PY $V "$T/bad" > "$T/out.txt" 2>&1 && { cat "$T/out.txt"; fail "validate.py accepted: $2"; }
    grep -q -- "$3" "$T/out.txt" || { cat "$T/out.txt"; fail "validate.py's message for '$2' lacks '$3'"; }
}
bad worker.yaml 's/completionMode: Indexed/completionMode: Index/' "spec.completionMode: 'Index' is not one of"
bad ps.yaml 's/  mountPath: \/var/  mountpath: \/var/' "'mountpath' was unexpected"
bad ps.yaml 's/storage: 1Gi/storage: 1GB/' "storage: '1GB' does not match"
bad ps.yaml 's/replicas: 2/replicas: 3/' "3 pod(s), but cluster.json lists 2 ps"
bad ps.yaml 's/serviceName: hetps-ps/serviceName: hetps-px/' "headless Service hetps-px is missing"
bad worker.yaml 's/name: hetps-cluster/name: other/' "names ConfigMap other, which is not"
bad configmap.yaml 's/hetps-worker-1.hetps-worker/hetps-worker-9.hetps-worker/' "worker\[1\] is hetps-worker-9.hetps-worker"
bad ps.yaml '/clusterIP: None/,/ports:/s/component: ps/component: px/' "selector does not select these pods"
bad ps.yaml '/matchLabels:/,/template:/s/component: ps/component: px/' "matchLabels does not match"
bad worker.yaml 's/restartPolicy: OnFailure/restartPolicy: Always/' "restartPolicy"
ok "broken manifests refused with their messages"

# 4. bad input to hetps k8s: named, exit 2, nothing written
"$BIN/hetps" k8s --name Bad_Name deploy/cluster.local.json -o "$T/x" > "$T/out.txt" 2>&1
[ $? -eq 2 ] && grep -q -- '--name "Bad_Name"' "$T/out.txt" || { cat "$T/out.txt"; fail "bad --name"; }
"$BIN/hetps" k8s --storage lots deploy/cluster.local.json > "$T/out.txt" 2>&1
[ $? -eq 2 ] && grep -q -- '--storage "lots"' "$T/out.txt" || { cat "$T/out.txt"; fail "bad --storage"; }
echo '{ "cluster": { "ps": [], "worker": ["w:1"] } }' > "$T/empty.json"
"$BIN/hetps" k8s "$T/empty.json" -o "$T/x" > "$T/out.txt" 2>&1
[ $? -eq 2 ] && grep -q "cluster file $T/empty.json: cluster.ps: is empty" "$T/out.txt" ||
    { cat "$T/out.txt"; fail "bad cluster file"; }
"$BIN/hetps" k8s > "$T/out.txt" 2>&1
[ $? -eq 2 ] && grep -q "give one CLUSTER_FILE" "$T/out.txt" || { cat "$T/out.txt"; fail "no file"; }
[ ! -e "$T/x" ] || fail "output written despite bad input"
ok "bad flags and files"

# 5. a pod: ps:0 from its StatefulSet name, serving on loopback
pick_ports
cat > "$T/pod.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT"], "worker": ["127.0.0.1:$((PORT + 1))"] } }
JSON
HOSTNAME=hetps-ps-7 "$BIN/hetps-ps" --cluster "k8s:$T/pod.json" --data-dir "$T/d" > "$T/pod.txt" 2>&1
[ $? -eq 2 ] && grep -q "Kubernetes pod (task ps:7): \"ps:7\": 7 is out of range" "$T/pod.txt" ||
    { cat "$T/pod.txt"; fail "ordinal 7 of 1 server not refused"; }
HOSTNAME=hetps-ps-0 "$BIN/hetps-ps" --cluster "k8s:$T/pod.json" --data-dir "$T/d" > "$T/pod.txt" 2>&1 &
track $!
wait_for 10 "$BIN/hetps" status "$T/pod.json" || { cat "$T/pod.txt"; fail "pod hetps-ps-0 does not serve"; }
"$BIN/hetps" status "k8s:$T/pod.json" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "status with k8s:FILE"; }
ok "a StatefulSet pod finds its task"

# 6. an Indexed Job's pod: worker 0 from JOB_COMPLETION_INDEX trains (a few
# steps of the MLP), then `hetps shutdown k8s:FILE` stops the server
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    HOSTNAME=hetps-worker-0-x7k2p HETPS_JOB=worker JOB_COMPLETION_INDEX=0 \
        "$BIN/hetps-worker" --cluster "k8s:$T/pod.json" --model deploy/models/fashion_mlp.json \
        --epochs 1 --max-steps 20 > "$T/worker.txt" 2>&1 ||
        { cat "$T/worker.txt"; fail "the Job's worker 0 did not train"; }
    grep -q "worker:0 joined" "$T/pod.txt" || { cat "$T/pod.txt"; fail "the server saw no worker:0"; }
    "$BIN/hetps" shutdown "k8s:$T/pod.json" > "$T/out.txt" 2>&1 || { cat "$T/out.txt"; fail "hetps shutdown k8s:FILE"; }
    ps_gone() { ! kill -0 "$1" 2>/dev/null; }
    PS=${PIDS##* }
    wait_for 15 ps_gone "$PS" || fail "the server did not stop"
    wait "$PS" || { cat "$T/pod.txt"; fail "the server exited non-zero"; }
    PIDS=""
    ok "an Indexed Job's pod trains as worker 0; hetps shutdown stops the server"
else
    echo "note: no Fashion-MNIST: the Indexed Job's worker was not run"
fi
