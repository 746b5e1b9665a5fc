#!/bin/sh
# tls_engine.sh — the opt-in TLS engine on OpenSSL (common/tls_engine.c,
# HETPS_TLS_ENGINE=openssl): the shards say they use it and a 2 + 2 job
# trains over it; a name that is no engine is refused by name. (Every
# other TLS test runs on nng's own engine, the default. test_rpc passes
# with this engine in a plain build — HETPS_TLS_ENGINE=openssl
# build/rel/tests/test_rpc — but its TLS server-restart case fails under
# ASan: tests/README.md, *Flaky tests*.)
. "$(dirname "$0")/lib.inc"
need_data
pick_ports

cluster2 '{ "mode": "async" }'
HETPS_TLS_ENGINE=openssl "$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model deploy/models/fashion_cnn.json --max-steps 60 --no-eval > "$T/launch.log" 2>&1 ||
    { tail -30 "$T/launch.log"; fail "hetps launch over the OpenSSL engine"; }
grep -q "mutual TLS, engine openssl" "$T/launch.log" || { grep serving "$T/launch.log"; fail "the shards do not say they use the OpenSSL engine"; }
ok "2 ps + 2 workers trained 60 steps each over mutual TLS on the OpenSSL engine"

HETPS_TLS_ENGINE=gnutls "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:0 \
    --data-dir "$T/ps-x" > "$T/bad.log" 2>&1 && { cat "$T/bad.log"; fail "an unknown engine was accepted"; }
grep -q "HETPS_TLS_ENGINE=gnutls names no engine" "$T/bad.log" || { cat "$T/bad.log"; fail "the unknown engine is not named"; }
ok "HETPS_TLS_ENGINE=gnutls: the server refuses to start and says which engines there are"
