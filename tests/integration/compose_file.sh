#!/bin/sh
# compose_file.sh — `hetps compose` without Docker: its output parsed back
# (python3-yaml) and checked field by field, one host and --host; and each
# bad input refused with a message that names it. The Compose files run
# for real in tests/deploy/deploy_compose.sh.
. "$(dirname "$0")/lib.inc"
python3 -c 'import yaml' 2>/dev/null || { echo "skipped: no python3-yaml"; exit 77; }
H=$BIN/hetps
mkdir -p "$T/c"
cat > "$T/c/cluster.json" <<'EOF'
{ "cluster": { "ps": ["ps0:2222", "ps1:2223"],
               "worker": ["gpu-server:2222", "cpu-server:2222"] },
  "hetps": { "mode": "sync",
             "workers": [ {"devices": "gpu:1,gpu:3"}, {"devices": "cpu"} ] } }
EOF
"$H" compose "$T/c/cluster.json" -o "$T/one.yml" --image img:1 --gpu-image img:gpu \
    --data /srv/fmnist -- --model deploy/models/fashion_cnn.json --epochs 2 ||
    fail "hetps compose failed"

# check.py FILE MODE: the structure every service must have.
cat > "$T/check.py" <<'EOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
mode, d, certs = sys.argv[2], sys.argv[3], sys.argv[4]
import os
s = doc["services"]
def eq(a, b, what):
    if a != b:
        sys.exit("%s: %r, expected %r" % (what, a, b))
assert "version" not in doc, "a version key (Compose v2 calls it obsolete)"
if mode == "one":
    eq(sorted(s), ["ps-0", "ps-1", "worker-0", "worker-1"], "services")
    eq(sorted(doc["volumes"]), ["ps-0", "ps-1"], "named volumes")
    for name, alias, port in (("ps-0", "ps0", 2222), ("ps-1", "ps1", 2223),
                              ("worker-0", "gpu-server", 0), ("worker-1", "cpu-server", 0)):
        eq(s[name]["networks"]["default"]["aliases"], [alias], name + " alias")
        assert "network_mode" not in s[name], name
        if port:
            eq(s[name]["command"][-2:], ["--listen", "tcp://0.0.0.0:%d" % port], name + " listen")
    for w in ("worker-0", "worker-1"):
        eq(s[w]["depends_on"], {"ps-0": {"condition": "service_healthy"},
                                "ps-1": {"condition": "service_healthy"}}, w + " depends_on")
        eq(s[w]["volumes"], [d + ":/etc/hetps:ro", "/srv/fmnist:/usr/share/datasets/fashion-mnist:ro",
                             certs + "/tasks/" + w + ":/run/secrets/hetps:ro"], w + " volumes")
        eq(s[w]["command"][-4:], ["--model", "deploy/models/fashion_cnn.json", "--epochs", "2"],
           w + " worker arguments")
    eq(s["worker-0"]["image"], "img:gpu", "GPU worker image")
    eq(s["worker-1"]["image"], "img:1", "CPU worker image")
    dev = s["worker-0"]["deploy"]["resources"]["reservations"]["devices"]
    eq(dev, [{"driver": "nvidia", "capabilities": ["gpu"], "device_ids": ["1", "3"]}], "GPU reservation")
    eq(s["worker-0"]["command"][:7], ["hetps-worker", "--cluster", "/etc/hetps/cluster.json",
                                      "--task", "worker:0", "--devices", "gpu:0,gpu:1"],
       "GPU worker command (its GPUs as the container numbers them)")
    assert "deploy" not in s["worker-1"], "a CPU worker with a GPU reservation"
    for p, i in (("ps-0", 0), ("ps-1", 1)):
        eq(s[p]["command"][:7], ["hetps-ps", "--cluster", "/etc/hetps/cluster.json",
                                 "--task", "ps:%d" % i, "--data-dir", "/var/lib/hetps"], p + " command")
        eq(s[p]["volumes"], [d + ":/etc/hetps:ro", p + ":/var/lib/hetps",
                             certs + "/tasks/" + p + ":/run/secrets/hetps:ro"], p + " volumes")
else:
    eq(sorted(s), ["ps-1", "worker-1"], "services of host 127.0.0.3")
    eq(sorted(doc["volumes"]), ["ps-1"], "named volumes")
    for name in s:
        eq(s[name]["network_mode"], "host", name + " network")
        assert "networks" not in s[name], name
    eq(s["ps-1"]["command"], ["hetps-ps", "--cluster", "/etc/hetps/cluster.json", "--task",
                              "ps:1", "--data-dir", "/var/lib/hetps"], "ps-1 command (no --listen)")
    eq(s["worker-1"]["depends_on"], {"ps-1": {"condition": "service_healthy"}},
       "worker-1 waits for the servers of its own host only")
for name, v in s.items():
    eq(v["restart"], "unless-stopped" if name.startswith("ps") else "on-failure", name + " restart")
    eq(v["healthcheck"]["test"], ["CMD", "hetps", "health"], name + " healthcheck")
    # Mutual TLS: each container sees the CA, its own certificate and the
    # front door's (its HEALTHCHECK), never the CA's key.
    eq(v["environment"], {"HETPS_CERTS": "/run/secrets/hetps"}, name + " environment")
    own = name.replace("-", "-") + ".pem"
    eq(sorted(os.listdir(certs + "/tasks/" + name)), sorted(["admin.pem", "ca.crt", own]),
       name + " certificates")
print("ok:", sys.argv[1])
EOF
d=$(cd "$T/c" && pwd -P)
python3 "$T/check.py" "$T/one.yml" one "$d" "$(cd "$T" && pwd -P)/certs" || fail "one-host Compose file"
ok "one host: services, aliases, volumes, depends_on, GPU reservation parsed back"

cat > "$T/c/two.json" <<'EOF'
{ "cluster": { "ps": ["127.0.0.2:7000", "127.0.0.3:7001"],
               "worker": ["127.0.0.2:7002", "127.0.0.3:7003"] } }
EOF
[ "$("$H" compose "$T/c/two.json" --list-hosts | cut -d' ' -f1 | tr '\n' ' ')" = "127.0.0.2 127.0.0.3 " ] ||
    fail "--list-hosts"
"$H" compose "$T/c/two.json" --host 127.0.0.3 --certs "$(cd "$T" && pwd -P)/certs2" | sed 's#/etc/hetps/two.json#/etc/hetps/cluster.json#g' > "$T/b.yml" ||
    fail "hetps compose --host failed"
python3 "$T/check.py" "$T/b.yml" host "$d" "$(cd "$T" && pwd -P)/certs2" || fail "per-host Compose file"
ok "--host: host networking, the host's tasks only, its own servers in depends_on"

# Bad input: each refused (exit 2) with a message naming it.
refused() {
    want=$1; shift
    "$H" compose "$@" > "$T/out" 2> "$T/err" && fail "accepted: hetps compose $*"
    grep -q -- "$want" "$T/err" || { cat "$T/err"; fail "message for '$*' does not name '$want'"; }
    [ -s "$T/out" ] && fail "wrote a file for a refused input: $*"
    return 0
}
refused "cluster.ps\[0\] '127.0.0.2:7000'" "$T/c/two.json"
refused "no task of .* is on it; its hosts: 127.0.0.2 127.0.0.3" "$T/c/two.json" --host 10.0.0.9
refused "docker-compose 1.25.0 lacks" "$T/c/cluster.json" --compose-version 1.25.0
refused "reservations.devices" "$T/c/cluster.json" --compose-version 1.27.4
"$H" compose "$T/c/cluster.json" --compose-version 2.20.2 --certs "$(cd "$T" && pwd -P)/certs" > /dev/null || fail "Compose v2 refused"
cat > "$T/c/same.json" <<'EOF'
{ "cluster": { "ps": ["node1:2222"], "worker": ["node1:2223"] } }
EOF
refused "ps:0 and worker:0 are both on host 'node1'" "$T/c/same.json"
cat > "$T/c/gpu.json" <<'EOF'
{ "cluster": { "ps": ["p:1"], "worker": ["w:1"] }, "hetps": { "workers": [ {"devices": "gpu"} ] } }
EOF
refused 'hetps.workers\[0\].devices: "gpu"' "$T/c/gpu.json"
# --check-gpu with a Docker that has no nvidia runtime (a stand-in docker
# on PATH answers as a host without the toolkit does).
mkdir -p "$T/fake"
printf '#!/bin/sh\necho '"'"'{"io.containerd.runc.v2":{"path":"runc"},"runc":{"path":"runc"}}'"'"'\n' > "$T/fake/docker"
chmod +x "$T/fake/docker"
OLDPATH=$PATH
PATH="$T/fake:$PATH"
refused "worker-0 (gpu-server:2222) asks for GPUs, but this host's Docker has no nvidia runtime" \
    "$T/c/cluster.json" --check-gpu
PATH=$OLDPATH
refused "unexpected argument" "$T/c/cluster.json" extra
ok "bad input refused with a message naming it"
