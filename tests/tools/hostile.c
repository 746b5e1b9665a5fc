/*
 * hostile.c — a hostile or broken peer, for tests/integration/limits.sh.
 *
 *   hostile nan CLUSTER_FILE MODEL       as worker:0: create, pull, push a
 *                                        gradient holding a NaN (must be
 *                                        refused, the store unchanged), then
 *                                        a finite one (must be applied)
 *   hostile layout CLUSTER_FILE SHARD    as worker:0: join, then a ~100-byte
 *                                        CreateVariables whose layout has 12
 *                                        million blocks (must be refused)
 *   hostile badname STORE_DIR NAME       rename the first variable of a
 *                                        stopped shard's store to NAME (as
 *                                        a store written before names were
 *                                        checked could hold)
 *   hostile stall CLUSTER_FILE WORKER MODEL SECONDS
 *                                        join as WORKER and heartbeat for
 *                                        SECONDS, never pushing
 *   hostile noread CLUSTER_FILE SHARD MODEL N SECONDS
 *                                        over a raw TCP connection: N pulls
 *                                        of every block of the shard, then
 *                                        never read a reply for SECONDS
 *   hostile announce CLUSTER_FILE SHARD N MIB KIB SECONDS
 *                                        over the relay's mutual TLS with
 *                                        worker:0's certificate: N
 *                                        connections, each announcing a
 *                                        body of MIB MiB and sending KIB
 *                                        KiB of it, then 1 KiB a second
 *                                        for SECONDS; checks that the
 *                                        shard kept every one open
 *   hostile flood CLUSTER_FILE SHARD N SECONDS [byte]
 *                                        one wave of N bare TCP connections
 *                                        (connect, send nothing, or with
 *                                        `byte` the first byte of a TLS
 *                                        record and no more), each held
 *                                        until the shard closes it or
 *                                        SECONDS pass; checks that the
 *                                        shard closed every one
 *   hostile chatter CLUSTER_FILE SHARD N SECONDS
 *                                        over the relay's mutual TLS with
 *                                        worker:0's certificate: N status
 *                                        requests, never reading a reply,
 *                                        then held for SECONDS; checks that
 *                                        the shard closed the connection
 *
 * Prints one line per check and "hostile: N passed, M failed"; exits 1 on
 * any failure, 2 on bad arguments.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/req.h>
#include <openssl/ssl.h>

#include "worker/client.h"
#include "cluster.h"
#include "err.h"
#include "layout.h"
#include "model.h"
#include "ps/store.h"
#include "tls_cert.h"
#include "tls_ctx.h"
#include "tls_frame.h"
#include "wire.h"

static int passed, failed;

static void check(int ok, const char *what, const char *detail)
{
    printf("hostile: %s: %s%s%s\n", ok ? "ok" : "FAIL", what,
           detail ? ": " : "", detail ? detail : "");
    if (ok)
        passed++;
    else
        failed++;
}

static int nan_push(const struct hc_cluster *cl, const char *model_path)
{
    static struct hc_model m;
    struct pc_client *c = NULL;
    float *init = NULL, *before = NULL, *after = NULL, *grad = NULL;
    uint64_t version = 0;
    int late = 0, rv;
    size_t n, diff = 0;

    if (hc_model_load(model_path, &m) != HC_OK) {
        check(0, "load the model", hc_err_msg());
        return 1;
    }
    n = m.n_params;
    init = calloc(n, sizeof *init);
    before = calloc(n, sizeof *before);
    after = calloc(n, sizeof *after);
    grad = calloc(n, sizeof *grad);
    if (!init || !before || !after || !grad)
        goto out;
    hc_model_init_params(&m, init);
    rv = pc_open(&c, cl, HC_JOB_WORKER, 0, NULL);
    if (rv == HC_OK)
        rv = pc_set_model(c, &m, 0);
    if (rv == HC_OK)
        rv = pc_join(c, "cpu");
    if (rv == HC_OK)
        rv = pc_create(c, init);
    if (rv == HC_OK)
        rv = pc_pull(c, before, &version);
    check(rv == HC_OK, "join, create and pull", rv ? hc_err_msg() : NULL);
    if (rv != HC_OK)
        goto out;
    /* Every shard's part holds one: each shard must refuse its part. */
    for (size_t i = 0; i < n; i++)
        grad[i] = i % 4096 == 7 ? NAN : 0.01f;
    rv = pc_push_step(c, grad, 64, version, 0, 0, &late);
    check(rv != HC_OK && strstr(hc_err_msg(), "NaN"),
          "a push holding a NaN is refused", rv ? hc_err_msg() : "applied");
    for (size_t i = 0; i < n; i++)
        grad[i] = i % 4096 == 7 ? -INFINITY : 0.01f;
    rv = pc_push_step(c, grad, 64, version, 0, 0, &late);
    check(rv != HC_OK && strstr(hc_err_msg(), "infinite"),
          "a push holding an Inf is refused", rv ? hc_err_msg() : "applied");
    rv = pc_pull(c, after, NULL);
    check(rv == HC_OK && memcmp(before, after, n * sizeof *after) == 0,
          "every value is as before, bit for bit", rv ? hc_err_msg() : NULL);
    for (size_t i = 0; i < n; i++)
        grad[i] = 0.01f;
    rv = pc_push_step(c, grad, 64, version, 0, 0, &late);
    check(rv == HC_OK, "a finite push is applied", rv ? hc_err_msg() : NULL);
    rv = pc_pull(c, after, NULL);
    for (size_t i = 0; rv == HC_OK && i < n; i++)
        diff += !(isfinite(after[i]) && after[i] != before[i]);
    check(rv == HC_OK && diff == 0, "then every value moved and is finite",
          rv ? hc_err_msg() : NULL);
out:
    pc_close(c);
    free(init);
    free(before);
    free(after);
    free(grad);
    return failed ? 1 : 0;
}

/* Send one request on s and return its decoded reply (caller frees). */
static int call(nng_socket s, uint64_t cluster_id, Hetps__Envelope *env,
                struct hc_wire_msg *d, nng_msg **keep)
{
    nng_msg *m;
    int rv;

    if ((rv = hc_wire_encode(&m, env, NULL, 0)) != HC_OK)
        return rv;
    if (nng_sendmsg(s, m, 0) != 0) {
        nng_msg_free(m);
        return hc_err_set(HC_ERR_TRANSPORT, "send failed");
    }
    if (nng_recvmsg(s, keep, 0) != 0)
        return hc_err_set(HC_ERR_TIMEOUT, "no reply");
    return hc_wire_decode(nng_msg_body(*keep), nng_msg_len(*keep), cluster_id,
                          d);
}

static int absurd_layout(const struct hc_cluster *cl, int shard)
{
    struct hc_sender me = { HETPS__JOB__JOB_WORKER, 0, 0x4151, cl->id, 0 };
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    Hetps__CreateVariables cv = HETPS__CREATE_VARIABLES__INIT;
    Hetps__VariableDef def = HETPS__VARIABLE_DEF__INIT, *defs[1] = { &def };
    uint32_t shape[1] = { 12000000 };
    Hetps__OptimizerSettings optim = HETPS__OPTIMIZER_SETTINGS__INIT;
    struct hc_wire_msg d;
    nng_msg *reply = NULL, *probe;
    nng_socket s;
    int rv;

    if (nng_req0_open(&s) != 0)
        return 1;
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 20000);
    nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    if (nng_dial(s, cl->ps[shard].url, NULL, 0) != 0) {
        check(0, "connect", cl->ps[shard].url);
        return 1;
    }
    hc_wire_init_env(&env, &me, 1);
    join.devices = "cpu";
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN;
    env.join = &join;
    rv = call(s, cl->id, &env, &d, &reply);
    check(rv == HC_OK &&
              d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY,
          "join", rv ? hc_err_msg() : NULL);
    if (rv == HC_OK)
        hc_wire_msg_free(&d);
    nng_msg_free(reply);
    hc_wire_init_env(&env, &me, 2);
    def.name = "big/kernel";
    def.n_shape = 1;
    def.shape = shape;
    cv.n_vars = 1;
    cv.vars = defs;
    cv.block_elems = 1;
    cv.signature = 1;
    optim.type = HETPS__OPTIMIZER_TYPE__OPTIMIZER_SGD;
    optim.learning_rate = 0.1f;
    cv.optimizer = &optim;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_CREATE;
    env.create = &cv;
    if (hc_wire_encode(&probe, &env, NULL, 0) == HC_OK) {
        char size[32];

        snprintf(size, sizeof size, "%zu bytes", nng_msg_len(probe));
        check(nng_msg_len(probe) < 200, "the create message is small", size);
        nng_msg_free(probe);
    }
    hc_wire_init_env(&env, &me, 2);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_CREATE;
    env.create = &cv;
    rv = call(s, cl->id, &env, &d, &reply);
    check(rv == HC_OK && d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR &&
              d.env->error->code == HETPS__ERROR_CODE__E_LIMIT,
          "a create of 12 million blocks is refused as over a limit",
          rv ? hc_err_msg()
             : d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR
                   ? d.env->error->message : "accepted");
    if (rv == HC_OK)
        hc_wire_msg_free(&d);
    if (reply)
        nng_msg_free(reply);
    nng_close(s);
    return failed ? 1 : 0;
}

/* A raw TCP connection speaking SP (REQ) that sends n pulls of every block
 * of `shard` and then never reads. */
static int no_read(const struct hc_cluster *cl, int shard, const char *model_path,
                   int n, int seconds)
{
    static struct hc_model m;
    struct hc_sender me = { HETPS__JOB__JOB_CLIENT, 0, 0x6262, cl->id, 0 };
    static const unsigned char sp_req[8] = { 0, 'S', 'P', 0, 0, 0x30, 0, 0 };
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Pull pull = HETPS__PULL__INIT;
    Hetps__Range *ranges = NULL, **rp = NULL;
    size_t sizes[HC_MODEL_MAX_VARS], k = 0;
    struct hc_layout l = { 0 };
    struct addrinfo *ai = NULL;
    char port[16];
    nng_msg *msg = NULL;
    int fd = -1, i, sent = 0;

    if (hc_model_load(model_path, &m) != HC_OK) {
        check(0, "load the model", hc_err_msg());
        return 1;
    }
    for (i = 0; i < m.n_vars; i++)
        sizes[i] = m.vars[i].size;
    if (hc_layout_build(sizes, m.n_vars, cl->n_ps, HC_LAYOUT_DEFAULT_BLOCK,
                        &l) != HC_OK)
        return 1;
    ranges = calloc(l.n_blocks, sizeof *ranges);
    rp = calloc(l.n_blocks, sizeof *rp);
    if (!ranges || !rp)
        return 1;
    for (size_t b = 0; b < l.n_blocks; b++) {
        if (l.blocks[b].shard != (uint32_t)shard)
            continue;
        hetps__range__init(&ranges[k]);
        ranges[k].key = l.blocks[b].var;
        ranges[k].offset = l.blocks[b].offset;
        ranges[k].length = l.blocks[b].length;
        rp[k] = &ranges[k];
        k++;
    }
    pull.n_ranges = k;
    pull.ranges = rp;
    snprintf(port, sizeof port, "%d", cl->ps[shard].port);
    if (getaddrinfo(cl->ps[shard].host, port,
                    &(struct addrinfo){ .ai_socktype = SOCK_STREAM }, &ai) != 0 ||
        (fd = socket(ai->ai_family, SOCK_STREAM, 0)) < 0 ||
        connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        write(fd, sp_req, sizeof sp_req) != (ssize_t)sizeof sp_req) {
        check(0, "connect over raw TCP", cl->ps[shard].url);
        return 1;
    }
    for (i = 0; i < n; i++) {
        unsigned char hdr[12];
        uint64_t len;
        uint32_t id = 0x80000000u | (uint32_t)(i + 1);

        hc_wire_init_env(&env, &me, (uint64_t)i + 1);
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL;
        env.pull = &pull;
        if (hc_wire_encode(&msg, &env, NULL, 0) != HC_OK)
            break;
        len = 4 + nng_msg_len(msg);
        for (int b = 0; b < 8; b++)
            hdr[b] = (unsigned char)(len >> (56 - 8 * b));
        for (int b = 0; b < 4; b++)
            hdr[8 + b] = (unsigned char)(id >> (24 - 8 * b));
        if (write(fd, hdr, sizeof hdr) != (ssize_t)sizeof hdr ||
            write(fd, nng_msg_body(msg), nng_msg_len(msg)) !=
                (ssize_t)nng_msg_len(msg)) {
            nng_msg_free(msg);
            break;      /* the server closed us: that is allowed */
        }
        nng_msg_free(msg);
        sent++;
    }
    printf("hostile: sent %d pulls of %zu blocks each, reading nothing\n", sent,
           k);
    fflush(stdout);
    sleep((unsigned)seconds);
    close(fd);
    freeaddrinfo(ai);
    free(ranges);
    free(rp);
    hc_layout_free(&l);
    return 0;
}

/* All n bytes of p into ssl (partial writes are on: tls_ctx.c); 0 or -1. */
static int ssl_put(SSL *ssl, const void *p, size_t n)
{
    size_t put;

    while (n) {
        if (SSL_write_ex(ssl, p, n, &put) != 1)
            return -1;
        p = (const char *)p + put;
        n -= put;
    }
    return 0;
}

/* A connection to the shard speaking the relay's protocol inside mutual
 * TLS, the preambles exchanged, and a head announcing mib MiB with kib
 * KiB of its body sent: the SSL, or NULL. */
static SSL *announce_one(SSL_CTX *ctx, const struct addrinfo *ai, int mib,
                         int kib, uint32_t id)
{
    static const unsigned char body[1024];
    uint8_t head[HC_FRAME_HEAD_BYTES], pre[8];
    size_t got = 0;
    SSL *ssl = NULL;
    int fd, k, ok = 0;

    if ((fd = socket(ai->ai_family, SOCK_STREAM, 0)) < 0)
        return NULL;
    hc_frame_head(head, (uint64_t)mib << 20, id);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        (ssl = SSL_new(ctx)) && SSL_set_fd(ssl, fd) == 1 &&
        SSL_connect(ssl) == 1 &&
        ssl_put(ssl, HC_FRAME_PREAMBLE, sizeof pre) == 0 &&
        SSL_read_ex(ssl, pre, sizeof pre, &got) == 1 && got == sizeof pre &&
        !memcmp(pre, HC_FRAME_PREAMBLE, sizeof pre) &&
        ssl_put(ssl, head, sizeof head) == 0) {
        for (ok = 1, k = 0; ok && k < kib; k++)
            ok = ssl_put(ssl, body, sizeof body) == 0;
    }
    if (!ok) {
        SSL_free(ssl);
        close(fd);
        return NULL;
    }
    return ssl;
}

/* Whether the shard closed ssl's connection (it sends nothing unasked). */
static int closed(SSL *ssl)
{
    char c;
    ssize_t k = recv(SSL_get_fd(ssl), &c, 1, MSG_PEEK | MSG_DONTWAIT);

    return k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static int announce(const struct hc_cluster *cl, int shard, int n, int mib,
                    int kib, int seconds)
{
    static const unsigned char more[1024];
    struct hc_tls tls;
    struct addrinfo *ai = NULL;
    SSL_CTX *ctx = NULL;
    SSL *ssl[64] = { 0 };
    char port[16], detail[160];
    int i, t, up = 0, kept = 0;

    n = n < 64 ? n : 64;
    snprintf(port, sizeof port, "%d", cl->ps[shard].port);
    if (hc_tls_resolve(cl, "worker:0", &tls) != HC_OK || !tls.rpc ||
        !(ctx = hc_tls_ctx_open(0, tls.ca, tls.cert_key,
                                cl->ps[shard].host)) ||
        getaddrinfo(cl->ps[shard].host, port,
                    &(struct addrinfo){ .ai_socktype = SOCK_STREAM }, &ai)) {
        check(0, "worker:0's certificate and the shard's address",
              hc_err_msg());
        SSL_CTX_free(ctx);
        return 1;
    }
    for (i = 0; i < n; i++)
        up += (ssl[i] = announce_one(ctx, ai, mib, kib,
                                     0x80000001u + (uint32_t)i)) != NULL;
    snprintf(detail, sizeof detail, "%d of %d, each announcing %d MiB and "
             "sending %d KiB", up, n, mib, kib);
    check(up == n, "connections over mutual TLS as worker:0", detail);
    printf("hostile: holding\n");
    fflush(stdout);
    for (t = 0; t < seconds; t++) {
        sleep(1);
        for (i = 0; i < n; i++)
            if (ssl[i] && !closed(ssl[i]))
                (void)ssl_put(ssl[i], more, sizeof more);
    }
    for (i = 0; i < n; i++) {
        kept += ssl[i] && !closed(ssl[i]);
        if (ssl[i]) {
            close(SSL_get_fd(ssl[i]));
            SSL_free(ssl[i]);
        }
    }
    snprintf(detail, sizeof detail, "%d of %d after %d s", kept, n, seconds);
    check(kept == n, "the shard kept every connection open", detail);
    freeaddrinfo(ai);
    SSL_CTX_free(ctx);
    return failed ? 1 : 0;
}

/* One wave of n bare TCP connections to the shard, nothing sent on them:
 * each is held until the shard closes it (its handshake deadline) or
 * seconds pass (by the clock). All n are started at once, non-blocking;
 * one the listen backlog drops is retried by the kernel's SYN resends. */
static int flood(const struct hc_cluster *cl, int shard, int n, int seconds,
                 int byte)
{
    struct addrinfo *ai = NULL;
    struct pollfd *pf = calloc((size_t)n, sizeof *pf);
    struct rlimit rl;
    char port[16], detail[160];
    struct timespec now;
    time_t end;
    int made = 0, open_n = 0, closed_n = 0, i;

    snprintf(port, sizeof port, "%d", cl->ps[shard].port);
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n + 64) {
        rl.rlim_cur = rl.rlim_max < (rlim_t)n + 64 ? rl.rlim_max
                                                   : (rlim_t)n + 64;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (!pf || getaddrinfo(cl->ps[shard].host, port,
                           &(struct addrinfo){ .ai_socktype = SOCK_STREAM },
                           &ai)) {
        check(0, "the shard's address", port);
        free(pf);
        return 1;
    }
    for (i = 0; i < n; i++) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK, 0);

        pf[i].fd = -1;
        if (fd < 0)
            break;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 &&
            errno != EINPROGRESS) {
            close(fd);
            continue;
        }
        pf[i].fd = fd;
        pf[i].events = POLLIN | (byte ? POLLOUT : 0);
        made++;
    }
    open_n = made;
    /* Bounded by the clock, not by poll's wake-ups: under load most
     * polls return at once, with one more connection closed. */
    clock_gettime(CLOCK_MONOTONIC, &now);
    end = now.tv_sec + seconds;
    while (open_n > 0 && now.tv_sec < end) {
        int ready = poll(pf, (nfds_t)n, 100);

        clock_gettime(CLOCK_MONOTONIC, &now);
        if (ready <= 0)
            continue;
        for (i = 0; i < n; i++) {
            char b;

            if (pf[i].fd < 0 || !pf[i].revents)
                continue;
            if ((pf[i].revents & POLLOUT) && (pf[i].events & POLLOUT)) {
                (void)!send(pf[i].fd, "\x16", 1, MSG_NOSIGNAL);
                pf[i].events = POLLIN;          /* and nothing more */
                if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
            }
            if (recv(pf[i].fd, &b, 1, MSG_DONTWAIT) > 0)
                continue;               /* the shard never sends unasked */
            if (errno == EAGAIN && !(pf[i].revents & (POLLHUP | POLLERR)))
                continue;
            close(pf[i].fd);
            pf[i].fd = -1;
            open_n--;
            closed_n++;
        }
    }
    for (i = 0; i < n; i++)
        if (pf[i].fd >= 0)
            close(pf[i].fd);
    snprintf(detail, sizeof detail, "%d made, %d closed by the shard within "
             "%d s", made, closed_n, seconds);
    check(made == n && closed_n == made, "bare TCP connections", detail);
    freeaddrinfo(ai);
    free(pf);
    return failed ? 1 : 0;
}

/* One connection over the relay's mutual TLS as worker:0, preambles
 * exchanged: n status requests sent and no reply read, then held for
 * seconds. The shard must close it (its replies pile up unread). */
static int chatter(const struct hc_cluster *cl, int shard, int n, int seconds)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Status st = HETPS__STATUS__INIT;
    struct hc_sender me = { HETPS__JOB__JOB_WORKER, 0, 0x5eed, cl->id, 0 };
    uint8_t head[HC_FRAME_HEAD_BYTES], pre[8];
    struct hc_tls tls;
    struct addrinfo *ai = NULL;
    SSL_CTX *ctx = NULL;
    SSL *ssl = NULL;
    nng_msg *m = NULL;
    char port[16], detail[160];
    size_t got = 0;
    int fd = -1, i, sent = 0, t, shut = 0;

    snprintf(port, sizeof port, "%d", cl->ps[shard].port);
    hc_wire_init_env(&env, &me, 1);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS;
    env.status = &st;
    if (hc_tls_resolve(cl, "worker:0", &tls) != HC_OK || !tls.rpc ||
        !(ctx = hc_tls_ctx_open(0, tls.ca, tls.cert_key,
                                cl->ps[shard].host)) ||
        getaddrinfo(cl->ps[shard].host, port,
                    &(struct addrinfo){ .ai_socktype = SOCK_STREAM }, &ai) ||
        hc_wire_encode(&m, &env, NULL, 0) != HC_OK ||
        (fd = socket(ai->ai_family, SOCK_STREAM, 0)) < 0 ||
        connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        !(ssl = SSL_new(ctx)) || SSL_set_fd(ssl, fd) != 1 ||
        SSL_connect(ssl) != 1 ||
        ssl_put(ssl, HC_FRAME_PREAMBLE, sizeof pre) != 0 ||
        SSL_read_ex(ssl, pre, sizeof pre, &got) != 1 || got != sizeof pre) {
        check(0, "a connection over mutual TLS as worker:0", hc_err_msg());
        goto out;
    }
    /* A send that blocks for a second: the shard stopped reading us. */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO,
               &(struct timeval){ .tv_sec = 1 }, sizeof(struct timeval));
    for (i = 0; i < n; i++) {
        hc_frame_head(head, nng_msg_len(m), 0x80000001u + (uint32_t)i);
        if (ssl_put(ssl, head, sizeof head) != 0 ||
            ssl_put(ssl, nng_msg_body(m), nng_msg_len(m)) != 0)
            break;
        sent++;
    }
    printf("hostile: sent %d of %d status requests, reading nothing\n", sent,
           n);
    fflush(stdout);
    /* Closed: the replies it did send, then the end of the stream (read
     * raw, past TLS: only now, once the shard had its chance to close). */
    for (t = 0; t < seconds * 10 && !shut; t++) {
        char junk[65536];
        ssize_t k;

        while ((k = recv(fd, junk, sizeof junk, MSG_DONTWAIT)) > 0)
            ;
        if (k == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            shut = 1;
        else
            usleep(100000);
    }
    snprintf(detail, sizeof detail, "after %d requests, within %d s", sent,
             seconds);
    check(shut, "the shard closed the connection that reads nothing",
          detail);
out:
    if (m)
        nng_msg_free(m);
    SSL_free(ssl);
    if (fd >= 0)
        close(fd);
    if (ai)
        freeaddrinfo(ai);
    SSL_CTX_free(ctx);
    return failed ? 1 : 0;
}

static int bad_name(const char *dir, const char *name)
{
    struct ps_store *st = NULL;
    char json[65536], out[65536 + 256];
    size_t len = 0;
    const char *p;
    int rv;

    rv = ps_store_open(dir, NULL, &st);
    if (rv == HC_OK)
        rv = ps_store_meta_get(st, "vars", json, sizeof json - 1, &len);
    if (rv == HC_OK) {
        json[len] = '\0';
        /* [{"name":"conv2d/kernel",... : replace the first name. */
        p = strstr(json, "\"name\":\"");
        rv = p ? HC_OK : hc_err_set(HC_ERR_STORE, "no name in vars");
    }
    if (rv == HC_OK) {
        const char *end = strchr(p + 8, '"');

        snprintf(out, sizeof out, "%.*s\"name\":\"%s%s", (int)(p - json), json,
                 name, end);
        rv = ps_store_meta_put(st, "vars", out, strlen(out));
    }
    check(rv == HC_OK, "rename the first variable", rv ? hc_err_msg() : name);
    ps_store_close(st);
    return failed ? 1 : 0;
}

static int stall(const struct hc_cluster *cl, int w, const char *model_path,
                 int seconds)
{
    static struct hc_model m;
    struct pc_client *c = NULL;
    int rv;

    if ((rv = hc_model_load(model_path, &m)) == HC_OK &&
        (rv = pc_open(&c, cl, HC_JOB_WORKER, w, NULL)) == HC_OK &&
        (rv = pc_set_model(c, &m, 0)) == HC_OK &&
        (rv = pc_join(c, "cpu")) == HC_OK)
        rv = pc_heartbeat_start(c, 500);
    check(rv == HC_OK, "join and heartbeat, never pushing",
          rv ? hc_err_msg() : NULL);
    fflush(stdout);
    if (rv == HC_OK)
        sleep((unsigned)seconds);
    pc_close(c);
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct hc_cluster cl;
    struct hc_diag diag;
    int rv = 2;

    signal(SIGPIPE, SIG_IGN);
    if (argc < 4) {
        fprintf(stderr, "usage: hostile nan|layout|stall|noread|announce|flood|chatter CLUSTER_FILE ... or hostile badname STORE_DIR NAME\n");
        return 2;
    }
    if (!strcmp(argv[1], "badname") && argc == 4) {
        rv = bad_name(argv[2], argv[3]);
        printf("hostile: %d passed, %d failed\n", passed, failed);
        return rv;
    }
    if (hc_cluster_load_file(argv[2], &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "nan") && argc == 4)
        rv = nan_push(&cl, argv[3]);
    else if (!strcmp(argv[1], "layout") && argc == 4 && atoi(argv[3]) < cl.n_ps)
        rv = absurd_layout(&cl, atoi(argv[3]));
    else if (!strcmp(argv[1], "stall") && argc == 6 && atoi(argv[3]) < cl.n_worker)
        rv = stall(&cl, atoi(argv[3]), argv[4], atoi(argv[5]));
    else if (!strcmp(argv[1], "announce") && argc == 8 && atoi(argv[3]) < cl.n_ps)
        rv = announce(&cl, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                      atoi(argv[6]), atoi(argv[7]));
    else if (!strcmp(argv[1], "flood") && (argc == 6 || argc == 7) &&
             atoi(argv[3]) < cl.n_ps)
        rv = flood(&cl, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]),
                   argc == 7 && !strcmp(argv[6], "byte"));
    else if (!strcmp(argv[1], "chatter") && argc == 6 && atoi(argv[3]) < cl.n_ps)
        rv = chatter(&cl, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
    else if (!strcmp(argv[1], "noread") && argc == 7 && atoi(argv[3]) < cl.n_ps)
        return no_read(&cl, atoi(argv[3]), argv[4], atoi(argv[5]),
                       atoi(argv[6]));
    else
        fprintf(stderr, "hostile: bad command or arguments\n");
    printf("hostile: %d passed, %d failed\n", passed, failed);
    hc_cluster_free(&cl);
    return rv;
}
