#!/bin/sh
# tls_engine.sh — the TLS engines (common/tls_engine.c): by default the
# shards say they run hetps's engine on OpenSSL; HETPS_TLS_ENGINE=mbed
# keeps nng's own mbedTLS engine, and a 2 + 2 job trains over it too; a
# name that is no engine is refused by name. (Every other TLS test runs on
# the default engine.)
. "$(dirname "$0")/lib.inc"
need_data
pick_ports

cluster2 '{ "mode": "async" }'
"$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model deploy/models/fashion_cnn.json --max-steps 60 --no-eval > "$T/launch.log" 2>&1 ||
    { tail -30 "$T/launch.log"; fail "hetps launch over the default engine"; }
grep -q "mutual TLS, engine openssl" "$T/launch.log" || { grep serving "$T/launch.log"; fail "the shards do not say they use the OpenSSL engine by default"; }
ok "2 ps + 2 workers trained 60 steps each over mutual TLS on the OpenSSL engine (the default)"

rm -rf "$T/data"
HETPS_TLS_ENGINE=mbed "$BIN/hetps" launch --data-dir "$T/data" "$T/cluster.json" -- \
    --model deploy/models/fashion_cnn.json --max-steps 60 --no-eval > "$T/mbed.log" 2>&1 ||
    { tail -30 "$T/mbed.log"; fail "hetps launch over nng's mbedTLS engine"; }
grep -q "mutual TLS, engine mbed" "$T/mbed.log" || { grep serving "$T/mbed.log"; fail "HETPS_TLS_ENGINE=mbed: the shards do not say they use nng's engine"; }
ok "HETPS_TLS_ENGINE=mbed: 2 ps + 2 workers trained 60 steps each on nng's mbedTLS engine"

HETPS_TLS_ENGINE=gnutls "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:0 \
    --data-dir "$T/ps-x" > "$T/bad.log" 2>&1 && { cat "$T/bad.log"; fail "an unknown engine was accepted"; }
grep -q "HETPS_TLS_ENGINE=gnutls names no engine" "$T/bad.log" || { cat "$T/bad.log"; fail "the unknown engine is not named"; }
ok "HETPS_TLS_ENGINE=gnutls: the server refuses to start and says which engines there are"
