/*
 * tls_relay.c — see tls_relay.h.
 *
 * Loops: a thread each (one a core, at most 8, started as endpoints
 * come), with a level-triggered epoll set and an eventfd senders ring. A
 * client's endpoint is dealt to one loop in turn; a server's listening
 * socket is in every loop's set, so its connections spread over them; a
 * connection stays in the loop that took it. After any event it is pumped
 * until nothing moves: OpenSSL may hold decrypted bytes epoll knows
 * nothing of, so reading stops only on "want read".
 *
 * Output: up to OUTQ messages queue per connection (under the loop's
 * kmu); the giver writes one into TLS at once if it can take the
 * connection's smu (trylock), else rings the loop (kick).
 *
 * Strangers: a server's connection costs its struct alone until its first
 * byte; only then does it get an SSL (with its buffers), and only
 * HANDSHAKES of a loop's connections at once: the others wait, unread,
 * and a handshake that has stalled for STALL_MS is closed for them. At
 * MAX_CONNS the oldest connection still silent makes room for a new one.
 * Once a flood of strangers has left, the memory they took is given back
 * to the system (malloc_trim: common/tune.c keeps freed memory otherwise).
 *
 * Lifetimes: a loop's endpoints and connections are under its mu, which
 * its thread holds through a batch of events. Closing an endpoint marks it
 * and its connections dead and closes their sockets; only the loop's
 * thread frees, at the end of a batch (reap), once no sender holds the
 * connection (counted under reg_mu): an event or a sender for a dead one
 * finds it marked, never freed.
 *
 * Lock order: mu, smu, reg_mu, kmu. The callbacks run with mu and smu held
 * (so must not close an endpoint); hc_relay_send and hc_relay_drop take
 * only reg_mu, kmu and smu by trylock: any thread may call them.
 */
#include "tls_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <nng/supplemental/util/platform.h>

#include "err.h"
#include "log.h"
#include "tls_ctx.h"
#include "tls_frame.h"

#define WBUF_BYTES (128u * 1024u) /* TLS records gathered for one send */
#define STAGE_BYTES 16384u        /* one record: a frame's head + body */
#define HEAD_BYTES HC_FRAME_HEAD_BYTES
#define OUTQ 8                    /* messages waiting to go, per conn */
#define HANDSHAKE_MS 10000        /* connect + handshake, then closed */
#define MAX_CONNS 4096            /* a loop's connections at once */
#define HANDSHAKES 32             /* a loop's server handshakes at once */
#define STALL_MS 250              /* a handshake idle so long, others
                                   * waiting: closed (ours take a round
                                   * trip between flights) */
#define TRIM_STRANGERS 64         /* strangers freed: memory trimmed */
#define WAIT_MS 250               /* epoll's wait: deadlines are this late */
#define CLOSE_WAIT_MS 2000        /* hc_relay_close: for the loops to free
                                   * its connections */
#define RESOLVE_MS 30000          /* a client's server looked up again */
#define RETRY_MIN_MS 20           /* a client connects again after … */
#define RETRY_MAX_MS 1000         /* … doubling up to this */
#define TRIM_BYTES ((uint64_t)8 << 20) /* a dropped body: memory trimmed */
#define BUDGET_MAX ((uint64_t)4 << 30) /* or a quarter of memory if less */

enum side { SIDE_LISTEN, SIDE_NET, SIDE_WAKE };

struct tag {
    enum side side;
    void *owner;                /* hc_relay_ep, struct conn, struct loop */
};

struct hc_relay_ep {
    int server;
    int fd;                     /* a server's listening socket (else -1) */
    struct tag tag;
    SSL_CTX *ctx;
    size_t recv_max;
    struct sockaddr_storage to; /* the server's address (a server's own) */
    socklen_t to_len;
    char name[160];
    pthread_mutex_t mu;         /* dead (atomic) and fd, against close */
    bool dead;
    uint64_t refused;           /* atomic: a server's loops share it */
    uint64_t logged_at;         /* ms of the last refusal logged (atomic) */
    char host[256];             /* client: looked up again now and then */
    char port[16];
    bool failing;
    uint64_t resolved_at;
    /* client, under its loop's mu: the connection now, and the next try */
    struct conn *conn;
    uint64_t retry_at;
    int backoff_ms;
    struct hc_relay_ep *loop_next; /* client: its loop's endpoints */
    struct hc_relay_cb cb;      /* who gets what is read */
    int live;                   /* its connections not yet freed (atomic) */
    struct hc_relay_ep *next;   /* every endpoint ever opened (all_eps) */
};

/* A connection's: a server's starts in C_WAIT (no SSL until its first
 * byte, a handshake slot free); a client's in C_HANDSHAKE, its connect
 * completing under the handshake's first write (a connecting socket says
 * EAGAIN). */
enum state { C_WAIT, C_HANDSHAKE, C_RELAY };

struct conn {
    pthread_mutex_t smu;        /* the SSL, socket and fields below: the
                                 * loop stepping it, or a sender writing */
    struct hc_relay_ep *ep;
    struct loop *loop;          /* the loop that took it */
    int net;                    /* -1 when not (yet) open */
    struct tag net_tag;
    uint32_t net_ev;            /* registered interest (0: not registered) */
    SSL *ssl;
    enum state state;
    bool dead;
    bool net_eof;               /* the peer closed, or a send failed */
    bool net_want_out;          /* OpenSSL or wbuf waits for EPOLLOUT */
    bool net_dry;               /* drained until its next event */
    bool slot;                  /* holds one of its loop's HANDSHAKES */
    bool queued;                /* C_WAIT: has bytes, waits for a slot */
    uint64_t deadline;          /* ms, while not relaying */
    uint64_t moved_at;          /* ms the handshake last read a byte */
    uint64_t rd_seen;           /* its bytes read then */
    uint8_t *wbuf;              /* TLS records gathered, sent together */
    size_t w_off, w_len;
    char peer[64];
    char who[32];               /* a server's: the client's task */
    uint32_t id;                /* in this process, never 0 */
    int senders;                /* reg_mu: callers holding it (get_conn) */
    uint64_t out_at;            /* ms output last moved (atomic; 0: none
                                 * waits) */
    /* network → rpc */
    struct hc_frame_in in;      /* the frames being read */
    uint64_t rx_charged;        /* what the message holds, in `inflight` */
    /* rpc → network */
    nng_msg *tx_msg;            /* the message being written */
    uint8_t *stage;             /* its head and first bytes: one record */
    size_t tx_staged, tx_off;   /* its bytes in stage; head + body sent */
    /* Under the loop's kmu: shared with senders. */
    nng_msg *outq[OUTQ];
    uint32_t outq_id[OUTQ];     /* their request ids */
    int oq_head, oq_len;
    bool dropped, kicked;       /* hc_relay_drop; on the kicks list */
    uint32_t refused_out;       /* replies refused: its outq was full */
    struct conn *kick_next;
    struct conn *reg_next;      /* reg_mu: the conns up (the registry) */
    bool registered;            /* announced (on_conn said it is up) */
    struct conn *next;
};

/* A relay thread and the connections it took (a client's connections to
 * two shards are encrypted on two cores; a shard's clients on all). */
struct loop {
    pthread_mutex_t mu;
    int epfd, wakefd;           /* -1: its thread not started */
    struct tag wake_tag;
    struct conn *conns;
    int n_conns;
    int n_strangers;            /* server conns not yet relaying */
    int n_shaking, n_queued;    /* slots taken; conns waiting for one */
    int freed_strangers;        /* since the last trim */
    uint64_t trimmed_at;        /* ms */
    uint64_t over_cap;
    struct hc_relay_ep *clients; /* client endpoints dealt here */
    pthread_t th;                /* its thread, once started */
    pthread_mutex_t kmu;         /* the conns' sender-shared fields, kicks */
    struct conn *kicks;          /* conns senders woke */
};

#define MAX_LOOPS 8
static struct loop loops[MAX_LOOPS];
static int n_loops;
static unsigned next_loop;
static uint64_t next_conn_id;
/* Endpoints are never freed (a loop may hold an event for a closed one;
 * it keeps a few hundred bytes, its TLS context freed). */
static pthread_mutex_t eps_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hc_relay_ep *all_eps;
static pthread_once_t loops_once = PTHREAD_ONCE_INIT;
/* The bytes messages being read hold, and their budget (atomic both). */
static uint64_t inflight, budget;
/* Connections up, found by their number (hc_relay_send). */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct conn *reg_list;

static void forget_in_child(void);

/* HETPS_RECV_BUDGET (bytes), else a quarter of the memory, at most
 * BUDGET_MAX. */
static uint64_t budget_default(void)
{
    const char *e = getenv("HETPS_RECV_BUDGET");
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t q = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 4
                                      : BUDGET_MAX;
    char *end;
    unsigned long long v;

    if (e && *e && (v = strtoull(e, &end, 10)) > 0 && !*end)
        return v;
    return q < BUDGET_MAX ? q : BUDGET_MAX;
}

/* Loop R as new: no thread, no endpoints, no connections. */
static void loop_init(struct loop *R)
{
    *R = (struct loop){.epfd = -1, .wakefd = -1, .wake_tag = {SIDE_WAKE, R}};
    pthread_mutex_init(&R->mu, NULL);
    pthread_mutex_init(&R->kmu, NULL);
}

static void loops_init(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int i;

    budget = budget_default();
    n_loops = cpus < 1 ? 1 : cpus > MAX_LOOPS ? MAX_LOOPS : (int)cpus;
    (void)pthread_atfork(NULL, NULL, forget_in_child);
    for (i = 0; i < MAX_LOOPS; i++)
        loop_init(&loops[i]);
}

/* "127.0.0.1:54321" or "[::1]:54321". */
static void addr_text(const struct sockaddr_storage *sa, char *buf, size_t n)
{
    char host[NI_MAXHOST], port[NI_MAXSERV];

    if (getnameinfo((const struct sockaddr *)sa, sizeof *sa, host,
                    sizeof host, port, sizeof port,
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(buf, n, "an unknown address");
    else
        snprintf(buf, n, sa->ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s",
                 host, port);
}

/* OpenSSL's reason for the last failure on this thread, then cleared. */
static const char *ssl_reason(SSL *ssl, char *buf, size_t n)
{
    unsigned long e = ERR_peek_last_error();
    long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

    if (v != X509_V_OK)
        snprintf(buf, n, "certificate: %s", X509_verify_cert_error_string(v));
    else if (e)
        ERR_error_string_n(e, buf, n);
    else
        snprintf(buf, n, "the connection closed during the handshake");
    ERR_clear_error();
    return buf;
}

/* ---- the network's BIO: OpenSSL's socket BIO writes without
 * MSG_NOSIGNAL (a peer gone mid-write would SIGPIPE the process) ---- */

static BIO_METHOD *sock_method;
static pthread_once_t sock_once = PTHREAD_ONCE_INIT;

/* Send what wbuf holds: true once it is empty, false if the socket is full
 * (wait for EPOLLOUT) or failed (c->net_eof). */
static bool wflush(struct conn *c)
{
    while (c->w_len) {
        ssize_t k = send(c->net, c->wbuf + c->w_off, c->w_len, MSG_NOSIGNAL);

        if (k > 0) {
            c->w_off += (size_t)k;
            c->w_len -= (size_t)k;
            continue;
        }
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
            return false;
        c->net_eof = true;
        c->w_len = 0;
        return false;
    }
    c->w_off = 0;
    return true;
}

static int sock_write(BIO *b, const char *buf, int len)
{
    struct conn *c = BIO_get_data(b);
    ssize_t k;

    BIO_clear_retry_flags(b);
    if (c->net_eof)
        return -1;
    if (c->wbuf && (size_t)len <= WBUF_BYTES) {
        /* Gathered; pump() sends them when its writing is done. */
        if (c->w_off + c->w_len + (size_t)len > WBUF_BYTES) {
            (void)wflush(c);
            if (c->net_eof)
                return -1;
            if (c->w_len + (size_t)len > WBUF_BYTES) {
                BIO_set_retry_write(b);
                return -1;
            }
            memmove(c->wbuf, c->wbuf + c->w_off, c->w_len);
            c->w_off = 0;
        }
        memcpy(c->wbuf + c->w_off + c->w_len, buf, (size_t)len);
        c->w_len += (size_t)len;
        return len;
    }
    if (c->w_len && !wflush(c)) {
        if (!c->net_eof)
            BIO_set_retry_write(b);     /* what is gathered goes first */
        return -1;
    }
    k = send(c->net, buf, (size_t)len, MSG_NOSIGNAL);
    if (k < 0 && (errno == EAGAIN || errno == EINTR))
        BIO_set_retry_write(b);
    return (int)k;
}

static int sock_read(BIO *b, char *buf, int len)
{
    struct conn *c = BIO_get_data(b);
    ssize_t k;

    BIO_clear_retry_flags(b);
    if (c->net_dry) {
        BIO_set_retry_read(b);
        return -1;
    }
    k = recv(c->net, buf, (size_t)len, 0);
    if (k < 0 && (errno == EAGAIN || errno == EINTR)) {
        c->net_dry = true;
        BIO_set_retry_read(b);
    } else if (k > 0 && k < len) {
        c->net_dry = true;      /* what the socket held; more is an event */
    }
    return (int)k;
}

static long sock_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    struct conn *c = BIO_get_data(b);

    (void)num;
    (void)ptr;
    if (cmd != BIO_CTRL_FLUSH)
        return 0;
    BIO_clear_retry_flags(b);
    if (!c->wbuf || wflush(c))
        return 1;
    if (!c->net_eof)
        BIO_set_retry_write(b);
    return -1;
}

static void sock_method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK,
                                 "hetps-relay");

    if (m && BIO_meth_set_write(m, sock_write) &&
        BIO_meth_set_read(m, sock_read) && BIO_meth_set_ctrl(m, sock_ctrl))
        sock_method = m;
    else
        BIO_meth_free(m);
}

/* ---- waking a loop ---- */

static void ring(struct loop *R)
{
    uint64_t one = 1;

    if (R->wakefd >= 0)
        (void)!write(R->wakefd, &one, sizeof one);
}

/* c has something for its loop to do: output, or (drop) to be closed. */
static void kick(struct conn *c, bool drop)
{
    struct loop *R = c->loop;

    pthread_mutex_lock(&R->kmu);
    c->dropped |= drop;
    if (!c->kicked) {
        c->kicked = true;
        c->kick_next = R->kicks;
        R->kicks = c;
        ring(R);
    }
    pthread_mutex_unlock(&R->kmu);
}

/* ---- connections (under their loop's mu, in its thread) ---- */

/* Watch c's socket for want (0: not at all — epoll reports a hang-up even
 * unasked: a connection with nothing to do would busy the loop). */
static void set_interest(struct conn *c, uint32_t want)
{
    struct epoll_event ev = {.events = want, .data.ptr = &c->net_tag};

    if (c->net < 0 || want == c->net_ev)
        return;
    epoll_ctl(c->loop->epfd, !c->net_ev ? EPOLL_CTL_ADD
                             : !want   ? EPOLL_CTL_DEL
                                       : EPOLL_CTL_MOD, c->net, &ev);
    c->net_ev = want;
}

/* Dead from here on: its socket closed now, its nng side and memory in
 * reap. A client's endpoint connects again after its back-off. */
static void conn_kill(struct conn *c)
{
    struct hc_relay_ep *ep = c->ep;

    if (c->dead)
        return;
    __atomic_store_n(&c->dead, true, __ATOMIC_RELEASE);
    if (c->net >= 0) {
        set_interest(c, 0);
        close(c->net);
        c->net = -1;
    }
    c->loop->n_conns--;
    if (ep->server && c->state != C_RELAY)
        c->loop->n_strangers--;
    if (c->slot)
        c->loop->n_shaking--;
    if (c->queued)
        c->loop->n_queued--;
    c->slot = c->queued = false;
    if (c->registered)
        ep->cb.on_conn(ep->cb.arg, c->id, 0, c->peer, c->who);
    if (!ep->server && ep->conn == c) {
        ep->conn = NULL;
        ep->retry_at = nng_clock() + (uint64_t)ep->backoff_ms;
        ep->backoff_ms = ep->backoff_ms * 2 > RETRY_MAX_MS
                             ? RETRY_MAX_MS
                             : ep->backoff_ms * 2;
    }
    ring(c->loop);              /* reaped at the end of this batch */
}

static void refuse(struct conn *c, const char *why)
{
    struct hc_relay_ep *ep = c->ep;
    uint64_t n = __atomic_add_fetch(&ep->refused, 1, __ATOMIC_RELAXED);
    uint64_t now = nng_clock();
    /* The first 20, then at most one a second: a flood cannot fill the
     * log, and each kind of refused peer still shows. */
    bool log = n <= 20 ||
               now >= __atomic_load_n(&ep->logged_at, __ATOMIC_RELAXED) + 1000;

    if (log) {
        __atomic_store_n(&ep->logged_at, now, __ATOMIC_RELAXED);
        hc_warn(ep->server ? "rpc server %s: refused the connection from %s "
                             "(%llu so far): %s"
                           : "rpc client: %s (%s): TLS failed (%llu so far): "
                             "%s", ep->name, c->peer, (unsigned long long)n,
                why);
    }
    conn_kill(c);
}

/* A client's connection that failed before a byte went out: its connect
 * failed or never finished (the server is down, or moved). The rpc layer
 * reports a peer it never reached, so this is not logged; the next
 * connect looks the host up again. Else false: c is left as it is. */
static bool unreachable(struct conn *c)
{
    if (c->ep->server || BIO_number_written(SSL_get_wbio(c->ssl)))
        return false;
    c->ep->failing = true;
    conn_kill(c);
    return true;
}

/* host:port into *to (the first address; host "": any, nng's URL of
 * "*"); HC_OK or an error. */
static int resolve(struct sockaddr_storage *to, socklen_t *len,
                   const char *host, const char *port, int passive)
{
    struct addrinfo hints = {0}, *ai = NULL;
    int rv;

    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    if ((rv = getaddrinfo(host[0] ? host : NULL, port, &hints, &ai)) != 0 ||
        !ai)
        return hc_err_set(HC_ERR_TRANSPORT, "%s:%s: %s", host[0] ? host : "*",
                          port, gai_strerror(rv));
    memcpy(to, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return HC_OK;
}

/* c's SSL, reading and writing its socket through our BIO: 0, or -1 when
 * out of memory. */
static int ssl_attach(struct conn *c)
{
    BIO *b = NULL;

    pthread_once(&sock_once, sock_method_make);
    if (!sock_method || !(c->ssl = SSL_new(c->ep->ctx)) ||
        !(b = BIO_new(sock_method))) {
        SSL_free(c->ssl);
        c->ssl = NULL;
        ERR_clear_error();
        return -1;
    }
    BIO_set_data(b, c);
    BIO_set_init(b, 1);
    SSL_set_bio(c->ssl, b, b);
    if (c->ep->server)
        SSL_set_accept_state(c->ssl);
    else
        SSL_set_connect_state(c->ssl);
    return 0;
}

/* A connection of ep in loop R on socket fd (closed on failure), to or
 * from sa; NULL when out of memory or at MAX_CONNS. A client's has its SSL
 * at once; a server's gets one with its first byte (wake): a peer that
 * sends nothing costs this struct alone. The buffers come with the
 * handshake (handshake_done). */
static struct conn *conn_new(struct hc_relay_ep *ep, struct loop *R, int fd,
                             const struct sockaddr_storage *sa)
{
    struct conn *c = R->n_conns < MAX_CONNS ? calloc(1, sizeof *c) : NULL;
    int one = 1;

    if (c)
        c->ep = ep;
    if (!c || (!ep->server && ssl_attach(c) != 0)) {
        free(c);
        close(fd);
        return NULL;
    }
    c->state = ep->server ? C_WAIT : C_HANDSHAKE;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    addr_text(sa, c->peer, sizeof c->peer);
    pthread_mutex_init(&c->smu, NULL);
    c->loop = R;
    /* Above nng's pipe ids (1 to 2^31 - 1): one space for both. */
    c->id = 0x80000000u | ((uint32_t)__atomic_add_fetch(&next_conn_id, 1,
                                                        __ATOMIC_RELAXED) &
                           0x7fffffffu);
    c->net = fd;
    c->net_tag = (struct tag){SIDE_NET, c};
    c->deadline = nng_clock() + HANDSHAKE_MS;
    c->next = R->conns;
    R->conns = c;
    R->n_conns++;
    __atomic_add_fetch(&ep->live, 1, __ATOMIC_RELAXED);
    R->n_strangers += ep->server;
    return c;
}

/* A server's silent connection (C_WAIT): its first byte come, it takes a
 * handshake slot and an SSL (true: go on with the handshake), or queues
 * for a slot. A peer that closes without a byte (a TCP health check, a
 * port scan) is counted, not logged: nothing was refused. */
static bool wake(struct conn *c)
{
    struct loop *R = c->loop;
    char b;
    ssize_t k = recv(c->net, &b, 1, MSG_PEEK);

    if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
        __atomic_add_fetch(&c->ep->refused, 1, __ATOMIC_RELAXED);
        conn_kill(c);
        return false;
    }
    if (k < 0)
        return false;
    if (R->n_shaking >= HANDSHAKES) {
        if (!c->queued)
            R->n_queued++;
        c->queued = true;               /* not watched until a slot frees */
        return false;
    }
    if (c->queued)
        R->n_queued--;
    c->queued = false;
    if (ssl_attach(c) != 0) {
        refuse(c, "out of memory for its TLS state");
        return false;
    }
    R->n_shaking++;
    c->slot = true;
    c->state = C_HANDSHAKE;
    c->moved_at = nng_clock();
    return true;
}

/* After an OpenSSL call on c returned r: whether it only waits for the
 * network (EPOLLOUT noted in c; the error queue emptied), or the
 * connection failed or closed (the queue kept for ssl_reason). */
static bool ssl_waits(struct conn *c, int r)
{
    int e = SSL_get_error(c->ssl, r);

    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
        return false;
    c->net_want_out |= e == SSL_ERROR_WANT_WRITE;
    ERR_clear_error();
    return true;
}

/* ---- network → rpc ---- */

/* A connection is up: findable by its id (hc_relay_send). A
 * client's callee hears of it here; a server's said yes before. */
static void announce(struct conn *c)
{
    pthread_mutex_lock(&reg_mu);
    c->reg_next = reg_list;
    reg_list = c;
    c->registered = true;
    pthread_mutex_unlock(&reg_mu);
    if (!c->ep->server)
        c->ep->cb.on_conn(c->ep->cb.arg, c->id, 1, c->peer, NULL);
}

/* The message being read holds len more bytes, if the budget has room. */
static bool charge(struct conn *c, uint64_t len)
{
    uint64_t cur = __atomic_load_n(&inflight, __ATOMIC_RELAXED);
    uint64_t lim = __atomic_load_n(&budget, __ATOMIC_RELAXED);

    do {
        if (len > lim || cur > lim - len)
            return false;
    } while (!__atomic_compare_exchange_n(&inflight, &cur, cur + len, false,
                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    c->rx_charged += len;
    return true;
}

static void uncharge(struct conn *c)
{
    __atomic_sub_fetch(&inflight, c->rx_charged, __ATOMIC_RELAXED);
    c->rx_charged = 0;
}

/* A head is in, or its body's buffer is full: the buffer grown, unless
 * the message is over the endpoint's limit or the growth would take the
 * process over its budget (the connection closed). */
static int body_grow(struct conn *c)
{
    unsigned long long len = c->in.len, more = hc_frame_room(&c->in);
    char why[240];

    if (len > c->ep->recv_max)
        snprintf(why, sizeof why, "a message of %llu bytes, over the limit "
                 "of %zu", len, c->ep->recv_max);
    else if (!charge(c, more))
        snprintf(why, sizeof why, "%llu more bytes of a message of %llu "
                 "would take the messages being received over this "
                 "process's budget of %llu bytes (HETPS_RECV_BUDGET)", more,
                 len, (unsigned long long)__atomic_load_n(&budget,
                                                          __ATOMIC_RELAXED));
    else if (hc_frame_grow(&c->in) == 0)
        return 0;
    else
        snprintf(why, sizeof why, "out of memory for a message");
    refuse(c, why);
    return -1;
}

/* Read from TLS; whether anything moved. */
static bool net_in(struct conn *c)
{
    bool moved = false;
    uint8_t *to;
    size_t want, got;
    uint32_t id;
    char why[200];
    int r;

    while (!c->net_eof && !c->dead) {
        to = hc_frame_want(&c->in, &want);
        got = 0;                        /* want 0: a message with no body */
        if (want) {
            r = SSL_read_ex(c->ssl, to, want, &got);
            if (r != 1) {
                /* close-notify, reset, bad record: the connection ends */
                c->net_eof |= !ssl_waits(c, r);
                ERR_clear_error();
                break;
            }
            moved = true;
        }
        switch (hc_frame_got(&c->in, got, why, sizeof why)) {
        case HC_FRAME_ERROR:
            refuse(c, why);
            return moved;
        case HC_FRAME_HELLO:    /* a server sends it once it took our
                                 * certificate: only now does a client's
                                 * callee hear of the connection */
            if (!c->ep->server) {
                c->ep->backoff_ms = RETRY_MIN_MS;
                announce(c);
            }
            break;
        case HC_FRAME_HEAD:
        case HC_FRAME_ROOM:
            if (body_grow(c) != 0)
                return moved;
            break;
        case HC_FRAME_MSG: {
            nng_msg *m = hc_frame_take(&c->in, &id);

            uncharge(c);
            c->ep->cb.on_msg(c->ep->cb.arg, c->id, id, m);
            break;
        }
        }
    }
    return moved;
}

/* ---- rpc → network ---- */

/* The next message given to send, staged: false when there is none. */
static bool tx_take(struct conn *c)
{
    struct loop *R = c->loop;
    nng_msg *m = NULL;
    uint32_t id = 0;
    size_t len;

    pthread_mutex_lock(&R->kmu);
    if (c->oq_len) {
        m = c->outq[c->oq_head];
        id = c->outq_id[c->oq_head];
        c->oq_head = (c->oq_head + 1) % OUTQ;
        c->oq_len--;
    }
    pthread_mutex_unlock(&R->kmu);
    if (!m)
        return false;
    len = nng_msg_len(m);
    hc_frame_head(c->stage, len, id);
    c->tx_staged = len < STAGE_BYTES - HEAD_BYTES ? len
                                                  : STAGE_BYTES - HEAD_BYTES;
    memcpy(c->stage + HEAD_BYTES, nng_msg_body(m), c->tx_staged);
    c->tx_off = 0;
    c->tx_msg = m;
    return true;
}

/* Write what was given into TLS; whether anything moved. */
static bool net_out(struct conn *c)
{
    bool moved = false;
    const uint8_t *from;
    size_t n, put, staged, total;
    int r;

    while (!c->net_eof && !c->dead) {
        if (!c->tx_msg && !tx_take(c))
            break;
        /* The head and first bytes from stage, the rest from the body. */
        staged = HEAD_BYTES + c->tx_staged;
        total = HEAD_BYTES + nng_msg_len(c->tx_msg);
        if (c->tx_off < staged) {
            from = c->stage + c->tx_off;
            n = staged - c->tx_off;
        } else {
            from = (const uint8_t *)nng_msg_body(c->tx_msg) + c->tx_off -
                   HEAD_BYTES;
            n = total - c->tx_off;
        }
        /* A write OpenSSL must finish is retried at the same place with
         * as many bytes (partial writes are on: a record at a time). */
        r = SSL_write_ex(c->ssl, from, n, &put);
        if (r != 1) {
            c->net_eof |= !ssl_waits(c, r);
            ERR_clear_error();
            break;
        }
        moved = true;
        __atomic_store_n(&c->out_at, nng_clock(), __ATOMIC_RELAXED);
        if ((c->tx_off += put) == total) {
            nng_msg_free(c->tx_msg);
            c->tx_msg = NULL;
        }
    }
    return moved;
}

/* A sender's thread writes what it gave, if no one else is using the
 * connection: true when nothing is left for the loop. */
static bool send_inline(struct conn *c)
{
    bool done = false;

    if (pthread_mutex_trylock(&c->smu) != 0)
        return false;
    if (!c->dead && c->state == C_RELAY && !c->net_eof) {
        /* Anything OpenSSL waits for leaves tx_msg or wbuf unsent. */
        (void)net_out(c);
        done = (!c->w_len || wflush(c)) && !c->tx_msg && !c->net_eof;
    }
    pthread_mutex_unlock(&c->smu);
    return done;
}

/* Move messages both ways until nothing moves. */
static void pump(struct conn *c)
{
    bool moved;

    c->net_want_out = false;
    do {
        moved = net_in(c);
        if (c->dead)
            return;
        moved |= net_out(c);
        /* The records gathered, in as few sends as the socket takes. */
        if (c->w_len && !wflush(c) && !c->net_eof)
            c->net_want_out = true;
    } while (moved && !c->net_eof);
}

/* Register what c waits for now. */
static void update_interest(struct conn *c)
{
    uint32_t net = 0;

    switch (c->state) {
    case C_WAIT:
        net = c->queued ? 0 : EPOLLIN;
        break;
    case C_HANDSHAKE:
        net = c->net_want_out ? EPOLLOUT : EPOLLIN;
        break;
    case C_RELAY:
        if (!c->net_eof)
            net |= EPOLLIN;
        if (c->net_want_out || c->w_len)
            net |= EPOLLOUT;
        break;
    }
    set_interest(c, net);
}

/* The handshake finished: a server's connection is verified and handed
 * to its callee; either side sends its preamble. */
static int handshake_done(struct conn *c)
{
    size_t put;

    if (!(c->wbuf = malloc(WBUF_BYTES)) || !(c->stage = malloc(STAGE_BYTES))) {
        refuse(c, "out of memory for its buffers");
        return -1;
    }
    if (c->ep->server) {
        /* The identity is the certificate just verified: its CN. */
        if (hc_tls_peer_task(c->ssl, c->who, sizeof c->who) != 0) {
            refuse(c, "no client certificate, or one not signed by this "
                      "cluster's CA, or one that names no task (no CN)");
            return -1;
        }
        if (c->ep->cb.on_conn(c->ep->cb.arg, c->id, 1, c->peer, c->who)) {
            conn_kill(c);               /* the callee said why */
            return -1;
        }
        announce(c);
    } else {
        c->ep->failing = false; /* a client's: in its one loop */
    }
    if (c->ep->server)
        c->loop->n_strangers--;
    if (c->slot)
        c->loop->n_shaking--;
    c->slot = false;
    c->state = C_RELAY;
    if (SSL_write_ex(c->ssl, HC_FRAME_PREAMBLE, sizeof c->in.pre, &put) != 1 ||
        put != sizeof c->in.pre) {
        ERR_clear_error();
        conn_kill(c);
        return -1;
    }
    return 0;
}

/* Everything a connection can do now. */
static void step(struct conn *c)
{
    char why[200], ssl_why[160];
    bool gone;
    int r;

    pthread_mutex_lock(&c->smu);
    if (c->state == C_WAIT && !wake(c))
        goto out;
    if (c->state == C_HANDSHAKE) {
        c->net_want_out = false;
        r = SSL_do_handshake(c->ssl);
        if (BIO_number_read(SSL_get_rbio(c->ssl)) != c->rd_seen) {
            c->rd_seen = BIO_number_read(SSL_get_rbio(c->ssl));
            c->moved_at = nng_clock();
        }
        if (r != 1) {
            if (ssl_waits(c, r) || unreachable(c))
                goto out;
            if (c->ep->server && !BIO_number_read(SSL_get_rbio(c->ssl))) {
                /* Connected and closed without a byte: a TCP health check
                 * (Kubernetes' tcpSocket probe) or a port scan. Counted,
                 * not logged: nothing was refused. */
                __atomic_add_fetch(&c->ep->refused, 1, __ATOMIC_RELAXED);
                conn_kill(c);
                goto out;
            }
            ssl_reason(c->ssl, ssl_why, sizeof ssl_why);
            snprintf(why, sizeof why, c->ep->server
                     ? "no client certificate, or one not signed by this "
                       "cluster's CA, or no TLS (%s)" : "%s", ssl_why);
            refuse(c, why);
            goto out;
        }
        if (handshake_done(c) != 0)
            goto out;
    }
    pump(c);
    if (c->dead)
        goto out;
    pthread_mutex_lock(&c->loop->kmu);
    gone = c->dropped;
    pthread_mutex_unlock(&c->loop->kmu);
    /* The peer gone, or dropped by the rpc side: closed (its callee hears
     * it is gone). */
    if (c->net_eof || gone) {
        if (!c->net_eof) {
            SSL_shutdown(c->ssl);       /* a close-notify, not waited for */
            (void)wflush(c);
        }
        ERR_clear_error();
        conn_kill(c);
        goto out;
    }
out:
    update_interest(c);         /* none for a dead one: its socket closed */
    pthread_mutex_unlock(&c->smu);
}

/* A client endpoint's connection to its server, made (again). */
static void client_connect(struct hc_relay_ep *ep, struct loop *R)
{
    struct conn *c;
    int fd;

    /* The host looked up again (a restarted container or pod may come back
     * at another address); the old address is kept when that fails. */
    if (ep->failing || nng_clock() >= ep->resolved_at + RESOLVE_MS) {
        ep->resolved_at = nng_clock();
        (void)resolve(&ep->to, &ep->to_len, ep->host, ep->port, 0);
    }
    fd = socket(ep->to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0 || !(c = conn_new(ep, R, fd, &ep->to))) {
        ep->retry_at = nng_clock() + RETRY_MAX_MS;
        return;
    }
    ep->conn = c;
    if (connect(fd, (const struct sockaddr *)&ep->to, ep->to_len) != 0 &&
        errno != EINPROGRESS)
        unreachable(c);
    else
        step(c);
}

/* R at MAX_CONNS: its oldest connection that has sent nothing is closed
 * (counted with the refused) to make room; false if none has. */
static bool make_room(struct loop *R)
{
    struct conn *c, *oldest = NULL;

    for (c = R->conns; c; c = c->next)  /* newest first */
        if (!c->dead && c->state == C_WAIT && !c->queued)
            oldest = c;
    if (!oldest)
        return false;
    pthread_mutex_lock(&oldest->smu);
    __atomic_add_fetch(&oldest->ep->refused, 1, __ATOMIC_RELAXED);
    conn_kill(oldest);
    pthread_mutex_unlock(&oldest->smu);
    return true;
}

/* Take the connections waiting on server endpoint ep into loop R (its
 * listening socket is in every loop's epoll, EPOLLEXCLUSIVE). */
static void accept_all(struct hc_relay_ep *ep, struct loop *R)
{
    struct sockaddr_storage sa;
    socklen_t len;
    struct conn *c;
    int fd;

    for (;;) {
        len = sizeof sa;
        /* Under ep->mu: a close elsewhere cannot hand the fd's number to
         * another socket between the check and the accept. */
        pthread_mutex_lock(&ep->mu);
        fd = ep->dead ? -1
                      : accept4(ep->fd, (struct sockaddr *)&sa, &len,
                                SOCK_NONBLOCK | SOCK_CLOEXEC);
        pthread_mutex_unlock(&ep->mu);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && make_room(R))
            continue;                   /* out of descriptors: a silent one
                                         * closed, the next accept takes it */
        if (fd < 0)
            return;                     /* EAGAIN, or try at the next event */
        if (R->n_conns >= MAX_CONNS && make_room(R) &&
            (++R->over_cap <= 10 || R->over_cap % 1000 == 0))
            hc_warn("rpc relay %s: at its cap of %d connections: closed the "
                    "oldest that had sent nothing, to make room (%llu so "
                    "far)", ep->name, MAX_CONNS,
                    (unsigned long long)R->over_cap);
        if (!(c = conn_new(ep, R, fd, &sa))) {
            if (++R->over_cap <= 10 || R->over_cap % 1000 == 0)
                hc_warn("rpc relay %s: closed a connection at once (%d "
                        "open, the most there may be, none of them silent; "
                        "%llu so far)", ep->name, R->n_conns,
                        (unsigned long long)R->over_cap);
            continue;
        }
        step(c);
    }
}

/* Free a dead connection (out of the registry), outside any loop's mu.
 * A large message it was still receiving (a peer that left, or was
 * closed, mid-body) gives its memory back to the system: common/tune.c
 * keeps freed memory for the next message of a model's size, which such a
 * body will not be. */
static void conn_free(struct conn *c)
{
    struct loop *R = c->loop;
    struct hc_relay_ep *ep = c->ep;
    struct conn **pc;
    bool trim = c->rx_charged >= TRIM_BYTES;
    uint32_t refused_out;

    pthread_mutex_lock(&R->kmu);
    refused_out = c->refused_out;
    for (pc = &R->kicks; *pc; pc = &(*pc)->kick_next)
        if (*pc == c) {
            *pc = c->kick_next;
            break;
        }
    while (c->oq_len) {
        nng_msg_free(c->outq[c->oq_head]);
        c->oq_head = (c->oq_head + 1) % OUTQ;
        c->oq_len--;
    }
    pthread_mutex_unlock(&R->kmu);
    /* One line a connection, however many replies it refused. */
    if (refused_out)
        hc_warn("rpc server %s: closed the connection of the peer at %s "
                "(%s): it did not take its replies (%u refused)", c->ep->name,
                c->peer, c->who[0] ? c->who : "?", refused_out);
    hc_frame_reset(&c->in);
    uncharge(c);
    if (c->tx_msg)
        nng_msg_free(c->tx_msg);
    SSL_free(c->ssl);
    free(c->wbuf);
    free(c->stage);
    pthread_mutex_destroy(&c->smu);
    free(c);
    if (trim)
        malloc_trim(0);
    __atomic_sub_fetch(&ep->live, 1, __ATOMIC_RELEASE);
}

/* Free what is dead; by the loop's thread only, called with R->mu held
 * (released while freeing). */
static void reap(struct loop *R)
{
    struct conn **pc = &R->conns, **pr, *c, *dead = NULL;

    while ((c = *pc) != NULL) {
        bool busy = false;

        if (c->dead && c->registered) {
            /* A caller still writing into it: at a later batch (it rings
             * the loop when it is done); else out of the registry. */
            pthread_mutex_lock(&reg_mu);
            busy = c->senders > 0;
            for (pr = &reg_list; !busy && *pr; pr = &(*pr)->reg_next)
                if (*pr == c) {
                    *pr = c->reg_next;
                    break;
                }
            c->registered = busy;
            pthread_mutex_unlock(&reg_mu);
        }
        if (!c->dead || busy) {
            pc = &c->next;
            continue;
        }
        *pc = c->next;
        c->next = dead;
        dead = c;
    }
    if (!dead)
        return;
    pthread_mutex_unlock(&R->mu);
    while ((c = dead) != NULL) {
        dead = c->next;
        R->freed_strangers += c->ep->server && c->state != C_RELAY;
        conn_free(c);
    }
    pthread_mutex_lock(&R->mu);
    /* A flood of strangers gone (or going on for a second more): what they
     * took back to the system. Training's steady path never gets here. */
    if (R->freed_strangers >= TRIM_STRANGERS &&
        (R->n_strangers == 0 || nng_clock() >= R->trimmed_at + 1000)) {
        R->freed_strangers = 0;
        R->trimmed_at = nng_clock();
        malloc_trim(0);
    }
}

/* Handshake slots freed: the connections waiting for one, newest first
 * (under a flood of peers that send a byte and stall, the one that came
 * last is most likely a real client: it is not left behind them all). */
static void admit_queued(struct loop *R)
{
    struct conn *c;

    for (c = R->conns; c && R->n_queued > 0 && R->n_shaking < HANDSHAKES;
         c = c->next)
        if (!c->dead && c->queued)
            step(c);            /* a slot, or closed: no longer queued */
}

/* Handshakes others wait for, idle for STALL_MS: closed (a peer that sends
 * a byte and no more would hold a slot to the deadline). */
static void close_stalled(struct loop *R, uint64_t now)
{
    struct conn *c;
    char why[160];

    for (c = R->conns; c && R->n_queued > 0; c = c->next) {
        if (c->dead || !c->slot || now < c->moved_at + STALL_MS)
            continue;
        snprintf(why, sizeof why, "its TLS handshake stalled for %d ms "
                 "while %d other connections waited", STALL_MS, R->n_queued);
        pthread_mutex_lock(&c->smu);
        refuse(c, why);
        pthread_mutex_unlock(&c->smu);
    }
}

/* The conns senders woke, each stepped once. */
static void run_kicks(struct loop *R)
{
    struct conn *list, *c;
    uint64_t v;

    (void)!read(R->wakefd, &v, sizeof v);
    pthread_mutex_lock(&R->kmu);
    list = R->kicks;
    R->kicks = NULL;
    for (c = list; c; c = c->kick_next)
        c->kicked = false;
    pthread_mutex_unlock(&R->kmu);
    /* Nothing frees a conn before this batch's reap; a kick after this
     * point puts it on R->kicks again, not on list. */
    while ((c = list) != NULL) {
        list = c->kick_next;
        if (!c->dead)
            step(c);
    }
}

/* Client endpoints of R without a connection, connected again when their
 * time comes; how long epoll may wait. */
static int clients_due(struct loop *R)
{
    struct hc_relay_ep *ep;
    uint64_t now = nng_clock();
    int wait = WAIT_MS;

    for (ep = R->clients; ep; ep = ep->loop_next) {
        if (__atomic_load_n(&ep->dead, __ATOMIC_RELAXED) || ep->conn)
            continue;
        if (now >= ep->retry_at)        /* if it fails, retry_at moves on */
            client_connect(ep, R);
        if (ep->retry_at > now && ep->retry_at - now < (uint64_t)wait)
            wait = (int)(ep->retry_at - now);
    }
    return wait;
}

/* A server's peer that has not taken its output for the send timeout:
 * closed, and true. Under R->mu. */
static bool slow_reader(struct conn *c, uint64_t now)
{
    int t = c->ep->cb.send_timeout_ms;
    uint64_t at = __atomic_load_n(&c->out_at, __ATOMIC_RELAXED);
    bool waits;

    if (!c->ep->server || t <= 0 || !at ||
        now < at + (uint64_t)t)
        return false;
    pthread_mutex_lock(&c->smu);
    pthread_mutex_lock(&c->loop->kmu);
    waits = c->tx_msg || c->w_len || c->oq_len;
    pthread_mutex_unlock(&c->loop->kmu);
    if (waits) {
        hc_warn("rpc server %s: the peer at %s did not take its reply within "
                "%d ms: closing its connection", c->ep->name, c->peer, t);
        conn_kill(c);
    } else {
        __atomic_store_n(&c->out_at, 0, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&c->smu);
    return waits;
}

static void *relay_main(void *arg)
{
    struct loop *R = arg;
    struct epoll_event evs[64];
    uint64_t next_check = 0, now;
    int n, i, wait = WAIT_MS;

    pthread_setname_np(pthread_self(), "hetps:relay");
    R->th = pthread_self();
    for (;;) {
        n = epoll_wait(R->epfd, evs, 64, wait);
        pthread_mutex_lock(&R->mu);
        for (i = 0; i < n; i++) {
            struct tag *t = evs[i].data.ptr;

            if (t->side == SIDE_LISTEN) {
                accept_all(t->owner, R);
            } else if (t->side == SIDE_WAKE) {
                run_kicks(R);
            } else {
                struct conn *c = t->owner;

                if (!c->dead) {
                    c->net_dry = false; /* it may have bytes again */
                    step(c);
                }
            }
        }
        if ((now = nng_clock()) >= next_check) {
            struct conn *c;

            for (c = R->conns; c; c = c->next) {
                if (!c->dead && c->state == C_RELAY && slow_reader(c, now))
                    continue;
                /* Until the peer's preamble is in (hc_frame_got's HELLO). */
                if (c->dead || now < c->deadline ||
                    (c->state == C_RELAY && c->in.pre_got == sizeof c->in.pre))
                    continue;
                pthread_mutex_lock(&c->smu);
                if (c->state == C_RELAY)
                    refuse(c, "nothing of hetps's relay protocol within "
                              "10 s of the TLS handshake");
                else if (c->state == C_WAIT)
                    refuse(c, c->queued ? "no TLS handshake within 10 s "
                                          "(it waited for a free slot)"
                                        : "not a byte within 10 s");
                else if (!unreachable(c))
                    refuse(c, "no TLS handshake within 10 s");
                pthread_mutex_unlock(&c->smu);
            }
            next_check = now + WAIT_MS;
        }
        if (R->n_queued)
            close_stalled(R, now);
        reap(R);
        admit_queued(R);
        wait = clients_due(R);
        pthread_mutex_unlock(&R->mu);
    }
    return NULL;
}

/* A child of fork() has no relay thread: it starts its own, with none of
 * the parent's endpoints. Their sockets are closed here (a listening port
 * held by a child would take connections nobody accepts); their memory is
 * kept where a leak checker sees it. */
static struct conn *parents_conns[MAX_LOOPS];

static void forget_in_child(void)
{
    struct hc_relay_ep *ep;
    struct conn *c;
    int i;

    pthread_mutex_init(&eps_mu, NULL);
    pthread_mutex_init(&reg_mu, NULL);
    reg_list = NULL;
    for (ep = all_eps; ep; ep = ep->next) {
        pthread_mutex_init(&ep->mu, NULL);
        if (ep->fd >= 0)
            close(ep->fd);
        ep->fd = -1;
        ep->dead = true;
    }
    for (i = 0; i < MAX_LOOPS; i++) {
        struct loop *R = &loops[i];

        for (c = R->conns; c; c = c->next)
            if (c->net >= 0)
                close(c->net);
        if (R->epfd >= 0)
            close(R->epfd);
        if (R->wakefd >= 0)
            close(R->wakefd);
        parents_conns[i] = R->conns;
        loop_init(R);
    }
}

/* Start the loop's thread once; under R->mu. */
static int start(struct loop *R)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &R->wake_tag};
    pthread_t th;
    int rv;

    if (R->epfd >= 0)
        return HC_OK;
    if ((R->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
        (R->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        epoll_ctl(R->epfd, EPOLL_CTL_ADD, R->wakefd, &ev) != 0) {
        rv = hc_err_set(HC_ERR_TRANSPORT, "TLS relay: epoll: %s",
                        strerror(errno));
        goto fail;
    }
    if (pthread_create(&th, NULL, relay_main, R) == 0) {
        pthread_detach(th);
        return HC_OK;
    }
    rv = hc_err_set(HC_ERR_NOMEM, "TLS relay: no thread");
fail:
    if (R->wakefd >= 0)
        close(R->wakefd);
    if (R->epfd >= 0)
        close(R->epfd);
    R->epfd = R->wakefd = -1;
    return rv;
}

/* Start loop R if need be and give it ep: a server's listening socket
 * watched there, a client dealt to it (which connects it at once). */
static int attach(struct loop *R, hc_relay_ep *ep)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE,
                             .data.ptr = &ep->tag};
    int err;

    pthread_mutex_lock(&R->mu);
    err = start(R);
    if (err == HC_OK && ep->server &&
        epoll_ctl(R->epfd, EPOLL_CTL_ADD, ep->fd, &ev) != 0) {
        err = hc_err_set(HC_ERR_TRANSPORT, "%s: epoll: %s", ep->name,
                         strerror(errno));
    } else if (err == HC_OK && !ep->server) {
        ep->backoff_ms = RETRY_MIN_MS;
        ep->loop_next = R->clients;
        R->clients = ep;
        ring(R);
    }
    pthread_mutex_unlock(&R->mu);
    return err;
}

int hc_relay_open(hc_relay_ep **out, int server, const char *url,
                  size_t recv_max, const char *ca_file,
                  const char *cert_key_file, const char *name,
                  const struct hc_relay_cb *cb)
{
    hc_relay_ep *ep;
    nng_url *u = NULL;
    int err = HC_OK, i, one = 1;

    *out = NULL;
    if (!cb || !cb->on_msg || !cb->on_conn)
        return hc_err_set(HC_ERR_INVAL, "%s: the TLS relay needs callbacks",
                          name);
    if (!(ep = calloc(1, sizeof *ep)))
        return hc_err_set(HC_ERR_NOMEM, "TLS relay: out of memory");
    ep->server = server;
    ep->fd = -1;
    ep->recv_max = recv_max;
    ep->cb = *cb;
    snprintf(ep->name, sizeof ep->name, "%s", name);
    if (nng_url_parse(&u, url) != 0) {
        err = hc_err_set(HC_ERR_TRANSPORT, "%s: not a URL: %s", name, url);
        goto fail;
    }
    snprintf(ep->host, sizeof ep->host, "%s", u->u_hostname);
    snprintf(ep->port, sizeof ep->port, "%s", u->u_port);
    nng_url_free(u);
    ep->resolved_at = nng_clock();
    if (!(ep->ctx = hc_tls_ctx_open(server, ca_file, cert_key_file,
                                    server ? NULL : ep->host))) {
        err = hc_err_set(HC_ERR_CONFIG, "%s: %s", name, hc_err_msg());
        goto fail;
    }
    if ((err = resolve(&ep->to, &ep->to_len, ep->host, ep->port, server)) !=
        HC_OK)
        goto fail;
    /* A server listens (a socket made is closed at fail). */
    if (server &&
        ((ep->fd = socket(ep->to.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
                          SOCK_CLOEXEC, 0)) < 0 ||
         setsockopt(ep->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
         bind(ep->fd, (const struct sockaddr *)&ep->to, ep->to_len) != 0 ||
         listen(ep->fd, SOMAXCONN) != 0)) {
        err = hc_err_set(HC_ERR_TRANSPORT, "%s: cannot listen on %s:%s: %s%s",
                         name, ep->host[0] ? ep->host : "*", ep->port,
                         strerror(errno),
                         errno == EADDRINUSE
                             ? " (another process holds the port; stop it "
                               "or pick another port)"
                             : "");
        goto fail;
    }
    ep->tag = (struct tag){SIDE_LISTEN, ep};
    pthread_mutex_init(&ep->mu, NULL);
    pthread_once(&loops_once, loops_init);
    pthread_mutex_lock(&eps_mu);
    ep->next = all_eps;
    all_eps = ep;
    pthread_mutex_unlock(&eps_mu);
    /* A server's listening socket in every loop; a client in one. */
    if (server)
        for (i = 0; i < n_loops && err == HC_OK; i++)
            err = attach(&loops[i], ep);
    else
        err = attach(&loops[__atomic_fetch_add(&next_loop, 1,
                                               __ATOMIC_RELAXED) %
                           (unsigned)n_loops], ep);
    if (err != HC_OK) {
        hc_relay_close(ep);             /* kept in all_eps: never freed */
        return err;
    }
    *out = ep;
    return HC_OK;
fail:
    if (ep->fd >= 0)
        close(ep->fd);
    SSL_CTX_free(ep->ctx);
    free(ep);
    return err;
}

/* Connection conn of ep, if up, with a sender counted (a caller puts it
 * back with put_conn); else NULL. */
static struct conn *get_conn(hc_relay_ep *ep, uint32_t conn)
{
    struct conn *c;

    pthread_mutex_lock(&reg_mu);
    for (c = reg_list; c; c = c->reg_next)
        if (c->id == conn && c->ep == ep &&
            !__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE))
            break;
    if (c)
        c->senders++;
    pthread_mutex_unlock(&reg_mu);
    return c;
}

static void put_conn(struct conn *c)
{
    int left;

    pthread_mutex_lock(&reg_mu);
    left = --c->senders;
    pthread_mutex_unlock(&reg_mu);
    if (left == 0 && __atomic_load_n(&c->dead, __ATOMIC_ACQUIRE))
        ring(c->loop);                  /* to be reaped */
}

int hc_relay_send(hc_relay_ep *ep, uint32_t conn, uint32_t id, nng_msg *m)
{
    struct conn *c = get_conn(ep, conn);
    struct loop *R;
    int err = HC_OK, at;

    if (!c)
        return HC_ERR_CLOSED;
    R = c->loop;
    pthread_mutex_lock(&R->kmu);
    if (c->oq_len < OUTQ) {
        if (c->oq_len == 0)     /* the send timeout counts from here */
            __atomic_store_n(&c->out_at, nng_clock(), __ATOMIC_RELAXED);
        at = (c->oq_head + c->oq_len++) % OUTQ;
        c->outq[at] = m;
        c->outq_id[at] = id;
    } else {
        err = HC_ERR_LIMIT;     /* a server's peer that does not read: */
        c->refused_out++;       /* said when it is freed (conn_free) */
    }
    pthread_mutex_unlock(&R->kmu);
    /* Written here, in the caller's thread, when the connection is free;
     * else (or to close a server's) its loop does. */
    if (err != HC_OK ? ep->server : !send_inline(c))
        kick(c, err != HC_OK);
    put_conn(c);
    return err;
}

void hc_relay_drop(hc_relay_ep *ep, uint32_t conn)
{
    struct conn *c = ep ? get_conn(ep, conn) : NULL;

    if (!c)
        return;
    kick(c, true);              /* its loop closes it */
    put_conn(c);
}

/* Until the loops have freed every connection of ep (killed by
 * hc_relay_close), at most CLOSE_WAIT_MS: so that no relay thread is still
 * freeing one of its SSLs when the caller goes on — to exit(), say, whose
 * handlers take OpenSSL down under it. Not on a loop's own thread, which
 * is the one that frees them. */
static void wait_freed(hc_relay_ep *ep)
{
    int i, k;

    for (k = 0; k < n_loops; k++)
        if (loops[k].epfd >= 0 && pthread_equal(pthread_self(), loops[k].th))
            return;
    for (i = 0; i < CLOSE_WAIT_MS &&
                __atomic_load_n(&ep->live, __ATOMIC_ACQUIRE) > 0; i++) {
        for (k = 0; k < n_loops; k++)
            ring(&loops[k]);
        nng_msleep(1);
    }
    if (i == CLOSE_WAIT_MS)
        hc_warn("TLS relay %s: %d connections not freed %d ms after its "
                "close; going on", ep->name,
                __atomic_load_n(&ep->live, __ATOMIC_ACQUIRE), CLOSE_WAIT_MS);
}

void hc_relay_close(hc_relay_ep *ep)
{
    struct hc_relay_ep **pe;
    struct conn *c;
    int i;

    if (!ep)
        return;
    pthread_mutex_lock(&ep->mu);
    if (ep->dead) {
        pthread_mutex_unlock(&ep->mu);
        return;
    }
    __atomic_store_n(&ep->dead, true, __ATOMIC_RELAXED);
    if (ep->fd >= 0)
        close(ep->fd);                  /* out of every epoll set */
    ep->fd = -1;
    pthread_mutex_unlock(&ep->mu);
    /* No loop takes a connection of ep from here on; each loop's are
     * closed under its mutex, so none is in a handshake when the context
     * goes (a loop's thread holds its mutex through a batch of events). */
    for (i = 0; i < n_loops; i++) {
        struct loop *R = &loops[i];

        pthread_mutex_lock(&R->mu);
        for (pe = &R->clients; *pe; pe = &(*pe)->loop_next)
            if (*pe == ep) {
                *pe = ep->loop_next;
                break;
            }
        for (c = R->conns; c; c = c->next)
            if (c->ep == ep) {
                pthread_mutex_lock(&c->smu);
                conn_kill(c);
                pthread_mutex_unlock(&c->smu);
            }
        pthread_mutex_unlock(&R->mu);
    }
    wait_freed(ep);
    SSL_CTX_free(ep->ctx);
    ep->ctx = NULL;
}

void hc_relay_set_budget(uint64_t bytes)
{
    pthread_once(&loops_once, loops_init);
    __atomic_store_n(&budget, bytes ? bytes : budget_default(),
                     __ATOMIC_RELAXED);
}
