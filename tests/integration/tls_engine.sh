#!/bin/sh
# tls_engine.sh — the opt-in TLS engine on OpenSSL (common/tls_engine.c,
# HETPS_TLS_ENGINE=openssl): the shards say they use it and a 2 + 2 job
# trains over it; servers on the default (the relay) refuse a client on
# nng's transport and say why; a name that is no engine is refused by
# name. (Every other TLS test runs on the relay, the default. test_rpc passes
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

# A clumsy operator: servers on the default (the relay), the front door
# on nng's transport. Refused, and the servers' log says why.
for i in 0 1; do
    "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:$i \
        --data-dir "$T/mix-$i" > "$T/mix-$i.log" 2>&1 &
    track $!
done
wait_for 10 "$BIN/hetps" status "$T/cluster.json" || fail "servers on the relay did not come up"
HETPS_TLS_ENGINE=openssl "$BIN/hetps" status "$T/cluster.json" > "$T/mix.txt" 2>&1 &&
    { cat "$T/mix.txt"; fail "a front door on nng's TLS transport was answered by relay servers"; }
grep -q "speaks nng's own TLS transport.*same HETPS_TLS_ENGINE" "$T/mix-0.log" ||
    { tail -5 "$T/mix-0.log"; fail "the server does not name the engine mismatch"; }
"$BIN/hetps" status "$T/cluster.json" > /dev/null || fail "the servers stopped answering their own cluster"
ok "a front door on nng's TLS transport is refused by relay servers, which name the mismatch and go on serving"

HETPS_TLS_ENGINE=gnutls "$BIN/hetps-ps" --cluster "$T/cluster.json" --task ps:0 \
    --data-dir "$T/ps-x" > "$T/bad.log" 2>&1 && { cat "$T/bad.log"; fail "an unknown engine was accepted"; }
grep -q "HETPS_TLS_ENGINE=gnutls names no engine" "$T/bad.log" || { cat "$T/bad.log"; fail "the unknown engine is not named"; }
ok "HETPS_TLS_ENGINE=gnutls: the server refuses to start and says which engines there are"
