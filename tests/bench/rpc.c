/*
 * rpc.c — round trip of hetps's request/reply layer (common/rpc) against
 * raw nng REQ/REP with the same bytes, in the same run (part of
 * `make bench`).
 *
 *   rpc ITERS REQ_BYTES REPLY_BYTES SERVERS [GAP_US]
 *
 * Forks SERVERS server processes per flavour (raw nng: one REP socket, a
 * recv/send loop; hetps: hc_rpc_server with its contexts), each on its own
 * loopback port, then times ITERS calls that send REQ_BYTES to every server
 * at once and wait for every REPLY_BYTES answer — the shape of a worker's
 * push-and-pull to its shards. With GAP_US, the client computes (spins)
 * that long before each call, as a worker does between steps, so the
 * servers' CPUs go idle in between: the call's time then includes waking
 * them (the gap itself is not counted). Prints µs per call for each
 * flavour, best of three passes, and the ratio hetps/raw; then hetps's
 * layer over mutual TLS (a throw-away cluster CA and certificates made in
 * a temporary directory, as `hetps certs` does) and the ratio TLS/plain.
 * The servers are stopped by pid.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>

#include "clock.h"
#include "cluster.h"
#include "rpc.h"
#include "tls_cert.h"
#include "tune.h"

#define MAX_SERVERS 16

static size_t reply_bytes;
static double gap_s; /* busy time between calls */
static struct hc_rpc_tls server_tls, client_tls, *tls_on; /* NULL: plain */

static void busy(void)
{
    double end = hc_now_s() + gap_s;

    while (gap_s > 0 && hc_now_s() < end)
        ;
}

static void die(const char *what, int rv)
{
    fprintf(stderr, "rpc bench: %s: %s\n", what, rv ? nng_strerror(rv) : "failed");
    exit(1);
}

/* Raw nng: answer every request with reply_bytes of zeros. */
static void raw_server(const char *url)
{
    nng_socket s;
    int rv;

    if ((rv = nng_rep0_open(&s)) || (rv = nng_setopt_size(s, NNG_OPT_RECVMAXSZ, 0)) ||
        (rv = nng_listen(s, url, NULL, 0)))
        die(url, rv);
    for (;;) {
        nng_msg *m;

        if ((rv = nng_recvmsg(s, &m, 0)))
            die("raw recv", rv);
        nng_msg_clear(m);
        if ((rv = nng_msg_realloc(m, reply_bytes)))
            die("raw realloc", rv);
        if ((rv = nng_sendmsg(s, m, 0))) {
            nng_msg_free(m);
            die("raw send", rv);
        }
    }
}

static void hetps_handler(void *arg, hc_rpc_req *req, nng_msg *msg)
{
    nng_msg *reply;

    (void)arg;
    nng_msg_free(msg);
    if (nng_msg_alloc(&reply, reply_bytes))
        reply = NULL;
    hc_rpc_reply(req, reply);
}

static void hetps_server(const char *url)
{
    struct hc_rpc_server_opts o = { .tls = tls_on ? &server_tls : NULL };
    hc_rpc_server *s;

    if (hc_rpc_server_start(&s, url, &o, hetps_handler, NULL) != 0)
        die(url, 0);
    for (;;)
        pause();
}

static pid_t spawn(void (*serve)(const char *), const char *url)
{
    pid_t pid = fork();

    if (pid < 0)
        die("fork", 0);
    if (pid == 0) {
        serve(url);
        _exit(0);
    }
    return pid;
}

/* Time per call, best of 3 timed passes after a warm-up pass, less the
 * computing gap before each call. */
static double time_calls(void (*call)(void *), void *ctx, int iters)
{
    double best = 1e30;
    int pass, i;

    for (pass = 0; pass < 4; pass++) {
        double t0 = hc_now_s(), per;

        for (i = 0; i < iters; i++) {
            busy();
            call(ctx);
        }
        per = (hc_now_s() - t0) / iters - gap_s;
        if (pass && per < best)
            best = per;
    }
    return best;
}

struct raw {
    int n;
    size_t req_bytes;
    nng_socket s[MAX_SERVERS];
};

/* One call with raw nng: send to every server, then take every reply. */
static void raw_call(void *arg)
{
    struct raw *r = arg;
    int k, rv;

    for (k = 0; k < r->n; k++) {
        nng_msg *m;

        if ((rv = nng_msg_alloc(&m, r->req_bytes)))
            die("alloc", rv);
        memset(nng_msg_body(m), 0, r->req_bytes);
        if ((rv = nng_sendmsg(r->s[k], m, 0)))
            die("raw client send", rv);
    }
    for (k = 0; k < r->n; k++) {
        nng_msg *m;

        if ((rv = nng_recvmsg(r->s[k], &m, 0)))
            die("raw client recv", rv);
        nng_msg_free(m);
    }
}

static double time_raw(int n, const char urls[][64], int iters, size_t req_bytes)
{
    struct raw r = { .n = n, .req_bytes = req_bytes };
    double t;
    int k, rv;

    for (k = 0; k < n; k++)
        if ((rv = nng_req0_open(&r.s[k])) ||
            (rv = nng_setopt_ms(r.s[k], NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE)) ||
            (rv = nng_dial(r.s[k], urls[k], NULL, 0)))
            die(urls[k], rv);
    t = time_calls(raw_call, &r, iters);
    for (k = 0; k < n; k++)
        nng_close(r.s[k]);
    return t;
}

struct hp {
    int n;
    size_t req_bytes;
    hc_rpc_client *c;
    int peers[MAX_SERVERS], errs[MAX_SERVERS];
    nng_msg *reqs[MAX_SERVERS], *replies[MAX_SERVERS];
};

/* One call through hetps's layer to every server at once. */
static void hetps_call(void *arg)
{
    struct hp *h = arg;
    int k;

    for (k = 0; k < h->n; k++) {
        if (nng_msg_alloc(&h->reqs[k], h->req_bytes))
            die("alloc", 0);
        memset(nng_msg_body(h->reqs[k]), 0, h->req_bytes);
    }
    if (hc_rpc_call_all(h->c, h->n, h->peers, h->reqs, h->replies, h->errs, 0) != 0)
        die("hc_rpc_call_all", 0);
    for (k = 0; k < h->n; k++)
        nng_msg_free(h->replies[k]);
}

static double time_hetps(int n, const char urls[][64], int iters, size_t req_bytes)
{
    const char *u[MAX_SERVERS], *names[MAX_SERVERS];
    struct hc_rpc_client_opts o = { .tls = tls_on ? &client_tls : NULL };
    struct hp h = { .n = n, .req_bytes = req_bytes };
    double t;
    int k;

    for (k = 0; k < n; k++) {
        u[k] = urls[k];
        names[k] = "bench";
        h.peers[k] = k;
    }
    if (hc_rpc_client_open(&h.c, n, u, names, &o) != 0)
        die("hc_rpc_client_open", 0);
    t = time_calls(hetps_call, &h, iters);
    hc_rpc_client_close(h.c);
    return t;
}

/* Certificates for a loopback cluster in a fresh temporary directory. */
static void make_certs(char dir[64])
{
    static const char json[] = "{ \"cluster\": { \"ps\": [\"127.0.0.1:1\"], "
                               "\"worker\": [\"127.0.0.1:2\"] } }";
    static char ca[128], ps[128], wk[128];
    struct hc_cluster cl;
    struct hc_diag d;

    snprintf(dir, 64, "/tmp/hetps-bench-certs-XXXXXX");
    if (!mkdtemp(dir) || hc_cluster_parse(json, sizeof json - 1, "bench", &cl, &d) ||
        hc_tls_make(&cl, dir, NULL))
        die("making certificates", 0);
    hc_cluster_free(&cl);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(ps, sizeof ps, "%s/ps-0.pem", dir);
    snprintf(wk, sizeof wk, "%s/worker-0.pem", dir);
    server_tls = (struct hc_rpc_tls){ ca, ps };
    client_tls = (struct hc_rpc_tls){ ca, wk };
}

static void remove_certs(const char *dir)
{
    static const char *const files[] = { "ca.crt", "ca.key", "ps-0.pem",
                                         "worker-0.pem", "admin.pem" };
    char path[400];
    size_t i;

    for (i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

int main(int argc, char **argv)
{
    char raw_urls[MAX_SERVERS][64], hp_urls[MAX_SERVERS][64];
    char tls_urls[MAX_SERVERS][64], certs[64];
    pid_t pids[3 * MAX_SERVERS];
    int iters, n, k, port;
    size_t req_bytes;
    double raw, hp, tls;

    if (argc == 6) {
        char *end;

        gap_s = strtod(argv[5], &end) / 1e6;
        if (end == argv[5] || *end || gap_s < 0 || gap_s > 1) {
            fprintf(stderr, "rpc: GAP_US '%s' is not a number of microseconds "
                    "in 0..1000000\n", argv[5]);
            return 2;
        }
    }
    if ((argc != 5 && argc != 6) || (iters = atoi(argv[1])) <= 0 || (n = atoi(argv[4])) <= 0 ||
        n > MAX_SERVERS) {
        fprintf(stderr, "usage: rpc ITERS REQ_BYTES REPLY_BYTES SERVERS (1..%d) [GAP_US]\n",
                MAX_SERVERS);
        return 2;
    }
    hc_tune_process();          /* as hetps-ps and hetps-worker do */
    req_bytes = (size_t)strtoull(argv[2], NULL, 10);
    reply_bytes = (size_t)strtoull(argv[3], NULL, 10);
    port = 23000 + (int)(getpid() % 200) * 60;
    make_certs(certs);
    for (k = 0; k < n; k++) {
        snprintf(raw_urls[k], sizeof raw_urls[k], "tcp://127.0.0.1:%d", port + k);
        snprintf(hp_urls[k], sizeof hp_urls[k], "tcp://127.0.0.1:%d", port + 20 + k);
        snprintf(tls_urls[k], sizeof tls_urls[k], "tcp://127.0.0.1:%d", port + 40 + k);
        pids[k] = spawn(raw_server, raw_urls[k]);
        pids[n + k] = spawn(hetps_server, hp_urls[k]);
        tls_on = &server_tls;
        pids[2 * n + k] = spawn(hetps_server, tls_urls[k]);
        tls_on = NULL;
    }
    hc_sleep_s(0.3);            /* let the servers listen */
    for (k = 0; k < 3 * n; k++)
        if (waitpid(pids[k], NULL, WNOHANG) == pids[k]) {
            /* It could not listen (its port taken): no call would end. */
            fprintf(stderr, "rpc bench: a server exited at start (its port "
                    "%d..%d in use?): run it again\n", port, port + 59);
            for (k = 0; k < 3 * n; k++) {
                kill(pids[k], SIGTERM);
                waitpid(pids[k], NULL, 0);
            }
            remove_certs(certs);
            return 1;
        }
    raw = time_raw(n, raw_urls, iters, req_bytes);
    hp = time_hetps(n, hp_urls, iters, req_bytes);
    tls_on = &client_tls;
    tls = time_hetps(n, tls_urls, iters, req_bytes);
    for (k = 0; k < 3 * n; k++) {
        kill(pids[k], SIGTERM);
        waitpid(pids[k], NULL, 0);
    }
    remove_certs(certs);
    printf("rpc: %d servers, request %zu B, reply %zu B each, %.0f us computing "
           "between calls: raw nng %.1f us, hetps rpc %.1f us per call (%.2fx); "
           "over mutual TLS %.1f us (%.2fx plain)\n",
           n, req_bytes, reply_bytes, gap_s * 1e6, raw * 1e6, hp * 1e6, hp / raw,
           tls * 1e6, tls / hp);
    return 0;
}
