/*
 * poke.c — an adversarial client for the integration tests.
 *
 *   poke garbage CLUSTER_FILE SHARD   random bytes, truncated, oversized,
 *                                     corrupted and foreign messages; every
 *                                     one must get an Error reply or a
 *                                     closed pipe, and a Status afterwards
 *                                     must still be answered
 *   poke replay CLUSTER_FILE WORKER   join as WORKER, send the same request
 *                                     id again, check it was answered from
 *                                     the record and not applied twice
 *   poke as CLUSTER_FILE TASK KIND    send one KIND request (join, pull,
 *                                     push, create, shutdown, status) to
 *                                     ps:0 claiming TASK ("worker:1", "ps:1",
 *                                     "client"); prints "poke: accepted"
 *                                     (exit 0) or "poke: refused: why"
 *                                     (exit 1)
 *
 * TLS: with a secure cluster each connection presents the front door's
 * certificate (tls.h), or POKE_CA / POKE_CERT when set (POKE_CERT=none:
 * no certificate at all) — to play a client from outside the cluster.
 * POKE_NNG_TLS=1: nng's own TLS transport (tls+tcp://) instead of the
 * relay's protocol, which a server must refuse by name.
 *
 * Prints one line per check and "poke: N passed, M failed"; exits 1 on any
 * failure.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "worker/client.h"
#include "cluster.h"
#include "err.h"
#include "tls_cert.h"
#include "wire.h"

static int passed, failed;
static const struct hc_cluster *the_cluster;
static char as_name[32] = "admin"; /* whose certificate, by default */

static int timeout_ms = 1500; /* per send and per reply */

/* The TLS files to present (see the top) into t; NULL for plain TCP, or
 * when they cannot be found (said on stderr: the call then fails). */
static const struct hc_rpc_tls *tls_files(struct hc_rpc_tls *t,
                                          struct hc_tls *found)
{
    const char *ca = getenv("POKE_CA"), *cert = getenv("POKE_CERT");

    if (the_cluster->insecure)
        return NULL;
    if (!ca || !cert) {
        if (hc_tls_resolve(the_cluster, as_name, found) != HC_OK) {
            fprintf(stderr, "poke: %s\n", hc_err_msg());
            return NULL;
        }
        ca = ca ? ca : found->ca;
        cert = cert ? cert : found->cert_key;
    }
    t->ca_file = ca;
    t->cert_key_file = strcmp(cert, "none") ? cert : NULL;
    return t;
}

/* A request of raw bytes to url on nng's own TLS transport, as a client
 * that is not hetps would: 0 with *reply, or -1 with why. */
static int ask_nng_tls(const char *url, nng_msg *m, nng_msg **reply,
                       char *why, size_t why_len)
{
    struct hc_rpc_tls tb;
    struct hc_tls found;
    const struct hc_rpc_tls *t = tls_files(&tb, &found);
    char turl[600], host[300];
    const char *h = strstr(url, "://") + 3, *e = strrchr(h, ':');
    nng_socket s;
    nng_dialer d;
    int rv;

    snprintf(turl, sizeof turl, "tls+%s", url);
    snprintf(host, sizeof host, "%.*s", (int)(e - h), h);
    if (!t || (rv = nng_req0_open(&s)) != 0) {
        nng_msg_free(m);
        snprintf(why, why_len, "no TLS files, or no socket");
        return -1;
    }
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, timeout_ms);
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, timeout_ms);
    if ((rv = nng_dialer_create(&d, s, turl)) != 0 ||
        (rv = nng_dialer_set_string(d, NNG_OPT_TLS_CA_FILE, t->ca_file)) ||
        (t->cert_key_file && (rv = nng_dialer_set_string(
                                  d, NNG_OPT_TLS_CERT_KEY_FILE,
                                  t->cert_key_file))) ||
        (rv = nng_dialer_set_string(d, NNG_OPT_TLS_SERVER_NAME, host)) ||
        (rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK)) ||
        (rv = nng_sendmsg(s, m, 0)) != 0) {
        nng_msg_free(m);
        snprintf(why, why_len, "no reply (%s)", nng_strerror(rv));
        return -1;
    }
    rv = nng_recvmsg(s, reply, 0);
    snprintf(why, why_len, "no reply (%s)", nng_strerror(rv));
    /* The socket is left open: nng 1.5.2's TLS transport can hang a close
     * on a connection its peer refused, and poke exits next. */
    return rv ? -1 : 0;
}

/* A request of raw bytes to url, as hetps's programs send one (rpc.h:
 * over the relay's TLS unless the cluster is insecure), on a fresh
 * connection with one attempt's time: 0 with *reply, or -1 with why. */
static int ask(const char *url, const void *buf, size_t len, nng_msg **reply,
               char *why, size_t why_len)
{
    struct hc_rpc_tls tb;
    struct hc_tls found;
    struct hc_rpc_client_opts o = { .timeout_ms = timeout_ms,
                                    .retry_ms = timeout_ms,
                                    .backoff_min_ms = 20,
                                    .backoff_max_ms = 200,
                                    .recv_max = (size_t)64 << 20 };
    const char *urls[1] = { url }, *names[1] = { "ps" };
    hc_rpc_client *c = NULL;
    nng_msg *m = NULL;
    int rv;

    *reply = NULL;
    if (nng_msg_alloc(&m, len) != 0) {
        snprintf(why, why_len, "out of memory");
        return -1;
    }
    if (len)
        memcpy(nng_msg_body(m), buf, len);
    if (getenv("POKE_NNG_TLS"))
        return ask_nng_tls(url, m, reply, why, why_len);
    o.tls = tls_files(&tb, &found);
    if (!the_cluster->insecure && !o.tls) {
        nng_msg_free(m);
        snprintf(why, why_len, "no TLS files");
        return -1;
    }
    if ((rv = hc_rpc_client_open(&c, 1, urls, names, &o)) == HC_OK)
        rv = hc_rpc_call(c, 0, m, reply, 0);
    else
        nng_msg_free(m);
    if (rv != HC_OK)
        snprintf(why, why_len, "no reply: %s", hc_err_msg());
    hc_rpc_client_close(c);
    return rv == HC_OK ? 0 : -1;
}

static void check(int ok, const char *what, const char *detail)
{
    printf("poke: %s: %s%s%s\n", ok ? "ok" : "FAIL", what, detail ? ": " : "",
           detail ? detail : "");
    if (ok)
        passed++;
    else
        failed++;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Send raw bytes on a fresh connection; classify the outcome. 1 = error
 * reply, 2 = no reply (connection closed / timeout), 0 = an unexpected
 * non-error reply. */
static int send_raw(const char *url, const void *buf, size_t len,
                    char *why, size_t why_len)
{
    nng_msg *m = NULL;
    struct hc_wire_msg d;
    int out;

    if (ask(url, buf, len, &m, why, why_len) != 0)
        return 2;
    if (hc_wire_decode(nng_msg_body(m), nng_msg_len(m), 0, &d) == HC_OK) {
        if (d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR) {
            snprintf(why, why_len, "error reply: %s", d.env->error->message);
            out = 1;
        } else {
            snprintf(why, why_len, "unexpected %s reply",
                     hc_wire_payload_name(d.env->payload_case));
            out = 0;
        }
        hc_wire_msg_free(&d);
    } else {
        snprintf(why, why_len, "undecodable reply: %s", hc_err_msg());
        out = 0;
    }
    nng_msg_free(m);
    return out;
}

/* A valid Status request of this cluster, as bytes. */
static size_t status_bytes(const struct hc_cluster *cl, unsigned char *buf,
                           size_t cap, uint64_t cluster_id)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Status st = HETPS__STATUS__INIT;
    struct hc_sender me = { HETPS__JOB__JOB_CLIENT, 0, 1, cluster_id, 0 };
    nng_msg *m;
    size_t len;

    (void)cl;
    hc_wire_init_env(&env, &me, 7);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS;
    env.status = &st;
    if (hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        return 0;
    len = nng_msg_len(m);
    if (len > cap)
        len = cap;
    memcpy(buf, nng_msg_body(m), len);
    nng_msg_free(m);
    return len;
}

static int garbage(const struct hc_cluster *cl, int shard)
{
    const char *url = cl->ps[shard].url;
    unsigned char buf[4096], good[512];
    size_t glen = status_bytes(cl, good, sizeof good, cl->id);
    char why[600], what[128];
    size_t big = 2u << 20;
    unsigned char *huge;
    int i, r;

    for (i = 0; i < 20; i++) {
        size_t len = (size_t)(next_rand() % sizeof buf), k;

        for (k = 0; k < len; k++)
            buf[k] = (unsigned char)next_rand();
        r = send_raw(url, buf, len, why, sizeof why);
        snprintf(what, sizeof what, "%zu random bytes", len);
        check(r != 0, what, why);
    }
    for (i = 0; i < (int)glen; i += (int)glen / 5 + 1) {
        r = send_raw(url, good, (size_t)i, why, sizeof why);
        snprintf(what, sizeof what, "status truncated to %d of %zu bytes", i, glen);
        check(r != 0, what, why);
    }
    memcpy(buf, good, glen);
    buf[0] = buf[1] = buf[2] = buf[3] = 0xFF;
    r = send_raw(url, buf, glen, why, sizeof why);
    check(r == 1, "header length 0xFFFFFFFF", why);

    glen = status_bytes(cl, good, sizeof good, cl->id ^ 1);
    r = send_raw(url, good, glen, why, sizeof why);
    check(r == 1 && strstr(why, "cluster"), "envelope of another cluster", why);

    huge = calloc(1, big);
    if (huge) {
        glen = status_bytes(cl, good, sizeof good, cl->id);
        memcpy(huge, good, glen);
        r = send_raw(url, huge, big, why, sizeof why);
        check(r != 0, "2 MiB message over the server's limit", why);
        free(huge);
    }

    glen = status_bytes(cl, good, sizeof good, cl->id);
    r = send_raw(url, good, glen, why, sizeof why);
    check(r == 0 && strstr(why, "status_reply"),
          "a valid status is still answered", why);
    return failed ? 1 : 0;
}

/* Join as worker w with a fixed incarnation and request id, twice. */
static int join_raw(const struct hc_cluster *cl, int w, uint64_t id,
                    nng_msg **reply)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    struct hc_sender me = { HETPS__JOB__JOB_WORKER, (uint32_t)w,
                            0x1234567890ABCDEFull, cl->id, 0 };
    nng_msg *m;
    char why[256] = "";
    int rv;

    snprintf(as_name, sizeof as_name, "worker:%d", w);
    hc_wire_init_env(&env, &me, id);
    join.devices = "poke";
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN;
    env.join = &join;
    if (hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        return -1;
    timeout_ms = 3000;
    rv = ask(cl->ps[0].url, nng_msg_body(m), nng_msg_len(m), reply, why,
             sizeof why);
    nng_msg_free(m);
    if (rv != 0)
        fprintf(stderr, "poke: join: %s\n", why);
    return rv;
}

static int member_counts(const struct hc_cluster *cl, int w, uint64_t *req,
                         uint64_t *dup)
{
    struct pc_shard_status *st = calloc((size_t)cl->n_ps, sizeof *st);
    struct pc_client *pc = NULL;
    int k, found = 0;

    if (!st || pc_open(&pc, cl, -1, 0, NULL) != HC_OK || pc_status(pc, st)) {
        free(st);
        pc_close(pc);
        return -1;
    }
    for (k = 0; k < st[0].n_members; k++)
        if (st[0].members[k].worker == w) {
            *req = st[0].members[k].requests;
            *dup = st[0].members[k].duplicates;
            found = 1;
        }
    pc_status_free(st, cl->n_ps);
    free(st);
    pc_close(pc);
    return found ? 0 : -1;
}

static int replay(const struct hc_cluster *cl, int w)
{
    nng_msg *a = NULL, *b = NULL, *c = NULL;
    uint64_t req = 0, dup = 0;
    struct hc_wire_msg d;
    char detail[256];

    if (join_raw(cl, w, 41, &a) || join_raw(cl, w, 41, &b)) {
        check(0, "join twice with request id 41", "no reply");
        return 1;
    }
    {
        /* Answered again from the record: a join reply of the same shard
         * (its members' figures are today's, so not the same bytes). */
        struct hc_wire_msg da = { 0 }, db = { 0 };
        int ok = hc_wire_decode(nng_msg_body(a), nng_msg_len(a), cl->id,
                                &da) == HC_OK;

        if (ok && hc_wire_decode(nng_msg_body(b), nng_msg_len(b), cl->id,
                                 &db) == HC_OK) {
            ok = da.env->payload_case == HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY &&
                 db.env->payload_case == HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY &&
                 da.env->request_id == 41 && db.env->request_id == 41 &&
                 da.env->join_reply->shard_incarnation ==
                     db.env->join_reply->shard_incarnation;
            hc_wire_msg_free(&db);
        } else {
            ok = 0;
        }
        hc_wire_msg_free(&da);
        check(ok, "the repeat is answered with a join reply again", NULL);
    }
    if (member_counts(cl, w, &req, &dup) == 0) {
        snprintf(detail, sizeof detail, "requests %llu duplicates %llu",
                 (unsigned long long)req, (unsigned long long)dup);
        check(req == 1 && dup == 1, "applied once, one duplicate", detail);
    } else {
        check(0, "status lists the member", NULL);
    }
    if (join_raw(cl, w, 40, &c) == 0 &&
        hc_wire_decode(nng_msg_body(c), nng_msg_len(c), cl->id, &d) == HC_OK) {
        check(d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR &&
                  d.env->error->code == HETPS__ERROR_CODE__E_STALE,
              "an older request id is refused as stale",
              d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR
                  ? d.env->error->message : NULL);
        hc_wire_msg_free(&d);
    } else {
        check(0, "an older request id is refused as stale", "no reply");
    }
    nng_msg_free(a);
    nng_msg_free(b);
    if (c)
        nng_msg_free(c);
    return failed ? 1 : 0;
}

/* One request of `kind` claiming `task`, to ps:0. */
static int as(const struct hc_cluster *cl, const char *task, const char *kind)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    Hetps__Pull pull = HETPS__PULL__INIT;
    Hetps__Push push = HETPS__PUSH__INIT;
    Hetps__CreateVariables create = HETPS__CREATE_VARIABLES__INIT;
    Hetps__Status status = HETPS__STATUS__INIT;
    Hetps__Shutdown shut = HETPS__SHUTDOWN__INIT;
    Hetps__Range range = HETPS__RANGE__INIT, *ranges[1] = { &range };
    struct hc_sender me = { HETPS__JOB__JOB_CLIENT, 0, 0x5eed, cl->id, 0 };
    char why[512];
    nng_msg *m;
    int r;

    if (!strncmp(task, "worker:", 7)) {
        me.job = HETPS__JOB__JOB_WORKER;
        me.index = (uint32_t)atoi(task + 7);
        snprintf(as_name, sizeof as_name, "%s", task);
    } else if (!strncmp(task, "ps:", 3)) {
        me.job = HETPS__JOB__JOB_PS;
        me.index = (uint32_t)atoi(task + 3);
        snprintf(as_name, sizeof as_name, "%s", task);
    }
    /* Request ids grow from one run to the next (one sender incarnation),
     * so no request is taken for a repeat of an earlier one. */
    hc_wire_init_env(&env, &me, (uint64_t)nng_clock());
    if (!strcmp(kind, "join")) {
        join.devices = "poke";
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN;
        env.join = &join;
    } else if (!strcmp(kind, "pull")) {
        range.length = 1;
        pull.n_ranges = 1;
        pull.ranges = ranges;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL;
        env.pull = &pull;
    } else if (!strcmp(kind, "push")) {
        push.samples = 1;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
        env.push = &push;
    } else if (!strcmp(kind, "create")) {
        create.block_elems = 1;
        create.signature = 1;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_CREATE;
        env.create = &create;
    } else if (!strcmp(kind, "status")) {
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS;
        env.status = &status;
    } else if (!strcmp(kind, "shutdown")) {
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_SHUTDOWN;
        env.shutdown = &shut;
    } else {
        fprintf(stderr, "poke: unknown request kind '%s'\n", kind);
        return 2;
    }
    if (hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        return 2;
    timeout_ms = 5000;
    r = send_raw(cl->ps[0].url, nng_msg_body(m), nng_msg_len(m), why,
                 sizeof why);
    nng_msg_free(m);
    if (r == 0 && strncmp(why, "unexpected ", 11) == 0) {
        printf("poke: accepted: %s as %s: %s\n", kind, task, why + 11);
        return 0;
    }
    printf("poke: refused: %s as %s: %s\n", kind, task, why);
    return 1;
}

/* Every call has its own timeouts and dials without blocking (a blocking
 * dial to a server that was shutting down once never returned); this
 * bounds the whole run besides, so a test never waits on poke for ever.
 * `garbage` makes some 30 TLS connections, each with a handshake, and a
 * call that gets no answer waits out its timeout: on a
 * loaded 2-core machine that took over 60 s once, so the bound is 180 s. */
static void on_alarm(int sig)
{
    static const char msg[] = "poke: no end after 180 s: giving up\n";

    (void)sig;
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(3);
    _exit(3);
}

int main(int argc, char **argv)
{
    struct hc_cluster cl;
    struct hc_diag diag;
    int rv = 2, idx;

    signal(SIGALRM, on_alarm);
    alarm(180);

    if (argc != 4 && !(argc == 5 && !strcmp(argv[1], "as"))) {
        fprintf(stderr, "usage: poke garbage|replay CLUSTER_FILE INDEX\n"
                "       poke as CLUSTER_FILE TASK KIND\n");
        return 2;
    }
    if (hc_cluster_load_file(argv[2], &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    the_cluster = &cl;
    if (!strcmp(argv[1], "as")) {
        rv = argc == 5 ? as(&cl, argv[3], argv[4]) : 2;
        hc_cluster_free(&cl);
        return rv;
    }
    idx = atoi(argv[3]);
    if (!strcmp(argv[1], "garbage") && idx >= 0 && idx < cl.n_ps)
        rv = garbage(&cl, idx);
    else if (!strcmp(argv[1], "replay") && idx >= 0 && idx < cl.n_worker)
        rv = replay(&cl, idx);
    else
        fprintf(stderr, "poke: bad command or index\n");
    printf("poke: %d passed, %d failed\n", passed, failed);
    hc_cluster_free(&cl);
    return rv;
}
