#!/bin/sh
# tls_engine.sh — the opt-in TLS engine on OpenSSL (common/tls_engine.c,
# HETPS_TLS_ENGINE=openssl): the shards say they use it and a 2 + 2 job
# trains over it. (test_rpc's TLS server-restart case fails with it more
# often than with nng's engine — tests/README.md, *Flaky tests* — so it is
# not run here; by hand: HETPS_TLS_ENGINE=openssl build/rel/tests/test_rpc.)
. "$(dirname "$0")/lib.inc"
need_data
pick_ports
HETPS_TLS_ENGINE=openssl; export HETPS_TLS_ENGINE

cluster2 '{ "mode": "async" }'
"$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model deploy/models/fashion_cnn.json --max-steps 60 --no-eval > "$T/launch.log" 2>&1 ||
    { tail -30 "$T/launch.log"; fail "hetps launch over the OpenSSL engine"; }
grep -q "mutual TLS, engine openssl" "$T/launch.log" || { grep serving "$T/launch.log"; fail "the shards do not say they use the OpenSSL engine"; }
ok "2 ps + 2 workers trained 60 steps each over mutual TLS on the OpenSSL engine"
