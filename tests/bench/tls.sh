#!/bin/sh
# tls.sh — the cost of security on the reference job: `hetps launch` of 2
# parameter servers and 2 asynchronous workers training the Fashion-MNIST
# CNN (deploy/models/fashion_cnn.json) for one epoch on loopback, over
# mutual TLS (the default) and over plain TCP ("insecure": true),
# interleaved, RUNS times each (default 2); the best (shortest) wall time
# of each is kept, as in run.sh. Prints each run's wall time and the
# chief's epoch line, then "tls: … ratio R".
#
# Environment: HETPS_BUILD (build/rel), RUNS (2), EPOCHS (1).
set -eu
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-2}
EPOCHS=${EPOCHS:-1}
T=$(mktemp -d "${TMPDIR:-/tmp}/hetps-tls-bench-XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
PORT=$(( 21000 + ( $(od -An -N2 -tu2 /dev/urandom) % 60 ) * 100 ))

cat > "$T/tls.json" <<JSON
{ "cluster": { "ps": ["127.0.0.1:$PORT", "127.0.0.1:$((PORT + 1))"],
               "worker": ["127.0.0.1:$((PORT + 2))", "127.0.0.1:$((PORT + 3))"] },
  "hetps": { "mode": "async" } }
JSON
sed 's/"mode": "async"/"mode": "async", "insecure": true/' "$T/tls.json" > "$T/plain.json"
bin/hetps certs "$T/tls.json" "$T/certs" > /dev/null
export HETPS_CERTS="$T/certs"

# one FLAVOUR: a fresh job; its wall time (s) in $WALL.
one() {
    rm -rf "$T/data"
    t0=$(date +%s.%N)
    bin/hetps launch --data-dir "$T/data" "$T/$1.json" -- \
        --model deploy/models/fashion_cnn.json --epochs "$EPOCHS" > "$T/$1.log" 2>&1 ||
        { tail -20 "$T/$1.log"; echo "tls bench: $1 job failed" >&2; exit 1; }
    WALL=$(echo "$(date +%s.%N) - $t0" | bc)
    echo "$1: $WALL s: $(grep '\[worker:0\] Epoch' "$T/$1.log" | tail -1 | sed 's/.*\] //')"
}

best_tls=999999 best_plain=999999
i=0
while [ $i -lt "$RUNS" ]; do
    one tls
    best_tls=$(echo "if ($WALL < $best_tls) $WALL else $best_tls" | bc)
    one plain
    best_plain=$(echo "if ($WALL < $best_plain) $WALL else $best_plain" | bc)
    i=$((i + 1))
done
grep -q "mutual TLS" "$T/tls.log" || { echo "tls bench: the TLS job did not run TLS" >&2; exit 1; }
grep -q "INSECURE" "$T/plain.log" || { echo "tls bench: the plain job did not run plain TCP" >&2; exit 1; }
echo "tls: reference job, 2 ps + 2 async workers, $EPOCHS epoch(s), best of $RUNS: TLS $best_tls s, plain $best_plain s, ratio $(echo "scale=3; $best_tls / $best_plain" | bc)"
