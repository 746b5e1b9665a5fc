#!/bin/sh
# tls_engine.sh — the opt-in TLS engine on OpenSSL (common/tls_engine.c,
# HETPS_TLS_ENGINE=openssl): the rpc layer's unit tests pass over it
# (mutual TLS, refused CAs and names, a server restarted under a client),
# the shards say they use it, and a 2 + 2 job trains over it.
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
HETPS_TLS_ENGINE=openssl; export HETPS_TLS_ENGINE

"$B/tests/test_rpc" > "$T/test_rpc.log" 2>&1 || { cat "$T/test_rpc.log"; fail "test_rpc over the OpenSSL engine"; }
grep 'cunit-counts' "$T/test_rpc.log"
ok "test_rpc passes over the OpenSSL engine"

cluster2 '{ "mode": "async" }'
"$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model deploy/models/fashion_cnn.json --max-steps 60 --no-eval > "$T/launch.log" 2>&1 ||
    { tail -30 "$T/launch.log"; fail "hetps launch over the OpenSSL engine"; }
grep -q "mutual TLS, engine openssl" "$T/launch.log" || { grep serving "$T/launch.log"; fail "the shards do not say they use the OpenSSL engine"; }
ok "2 ps + 2 workers trained 60 steps each over mutual TLS on the OpenSSL engine"
