/*
 * tls_relay.c — see tls_relay.h.
 *
 * Loops: a thread each (as many as the machine has cores, at most 8,
 * started as endpoints come), each with its epoll set, level-triggered.
 * A client's endpoint is dealt to one loop (in turn), a server's
 * listening socket is watched by every loop, so its connections spread
 * over them; a connection stays in the loop that took it. Every
 * connection has a network side (TLS, through our socket BIO) and a
 * loopback side (nng's plain TCP), and a buffer each way. After any event on either
 * side the connection is pumped until nothing moves: OpenSSL may hold
 * decrypted bytes epoll knows nothing of, so reading stops only on "want
 * read" or a full buffer. Interest follows from the buffers: read a side
 * while its buffer has room, wait to write a side while bytes wait for it.
 *
 * Lifetimes: a loop's endpoints and connections are under its mutex; its
 * thread takes it per batch of events. Another thread closing an endpoint
 * marks it and its connections dead and closes their sockets; only the
 * loop's thread frees,
 * at the end of a batch, so an event already taken for a dead connection
 * finds it marked, never freed.
 */
#include "tls_relay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "err.h"
#include "log.h"
#include "tls_engine.h"

#define BUF_BYTES (256u * 1024u)  /* each way, per connection */
#define WBUF_BYTES (128u * 1024u) /* TLS records gathered for one send */
#define HANDSHAKE_MS 10000        /* connect + handshake, then closed */
#define MAX_CONNS 4096            /* the relay's connections at once */
#define WAIT_MS 250               /* epoll's wait: deadlines are this late */
#define RESOLVE_MS 30000          /* a client's server looked up again */

enum side { SIDE_LISTEN, SIDE_NET, SIDE_LOC };

struct tag {
    enum side side;
    void *owner;                /* hc_relay_ep (listen) or struct conn */
};

struct hc_relay_ep {
    int server;
    int fd;                     /* the listening socket */
    struct tag tag;
    SSL_CTX *ctx;
    struct sockaddr_storage to; /* server: nng's listener; client: the server */
    socklen_t to_len;
    char name[160];
    pthread_mutex_t mu;         /* dead and fd, against close */
    bool dead;
    uint64_t refused;           /* atomic: a server's loops share it */
    uint64_t logged_at;         /* ms of the last refusal logged (atomic) */
    /* client: the server's host, looked up again now and then */
    char host[256];
    int port;
    bool numeric, failing;
    uint64_t resolved_at;
    struct loop *loop;          /* a client's loop; NULL: a server's, in all */
    struct hc_relay_ep *next;   /* every endpoint ever opened (all_eps) */
};

enum state { C_CONNECT, C_HANDSHAKE, C_RELAY };

struct conn {
    struct hc_relay_ep *ep;
    struct loop *loop;          /* the loop that accepted it */
    int net, loc;               /* -1 when not (yet) open */
    struct tag net_tag, loc_tag;
    uint32_t net_ev, loc_ev;    /* registered interest (0: not registered) */
    SSL *ssl;
    enum state state;
    bool dead, net_eof, loc_eof, loc_up;
    bool w_failed;              /* a send of wbuf failed: the peer is gone */
    bool net_want_in, net_want_out;
    /* A read that came back short or empty: the side is drained until its
     * next event (level-triggered epoll reports what is left), so a pump
     * does not ask the kernel again and again for nothing. */
    bool net_dry, loc_dry;
    uint64_t deadline;          /* ms, while not relaying */
    uint8_t *n2l, *l2n;         /* plaintext: network → loopback, and back */
    uint8_t *wbuf;              /* TLS records not sent yet (after the
                                 * handshake: OpenSSL writes a record at a
                                 * time, 16 KB; sent together) */
    size_t w_off, w_len;
    size_t n2l_off, n2l_len, l2n_off, l2n_len;
    int loc_port;               /* server: the port nng sees it from */
    char peer[64];
    struct conn *next;
};

/* A relay thread and the connections it took (a client's connections to
 * two shards are encrypted on two cores; a shard's clients on all). */
struct loop {
    pthread_mutex_t mu;
    int epfd;
    bool started;
    struct conn *conns;
    int n_conns;
    uint64_t over_cap;
};

#define MAX_LOOPS 8
static struct loop loops[MAX_LOOPS];
static int n_loops;
static unsigned next_loop;
/* Endpoints are never freed (a loop may hold an event for a closed one):
 * a closed one keeps a few hundred bytes, its TLS context freed. */
static pthread_mutex_t eps_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hc_relay_ep *all_eps;
static pthread_once_t loops_once = PTHREAD_ONCE_INIT;

static void forget_in_child(void);

static void loops_init(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int i;

    n_loops = cpus < 1 ? 1 : cpus > MAX_LOOPS ? MAX_LOOPS : (int)cpus;
    (void)pthread_atfork(NULL, NULL, forget_in_child);
    for (i = 0; i < MAX_LOOPS; i++) {
        pthread_mutex_init(&loops[i].mu, NULL);
        loops[i].epfd = -1;
    }
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void addr_text(const struct sockaddr *sa, char *buf, size_t n)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;

    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)sa;

        inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
        port = ntohs(a->sin_port);
        snprintf(buf, n, "%s:%d", host, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)sa;

        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
        port = ntohs(a->sin6_port);
        snprintf(buf, n, "[%s]:%d", host, port);
    } else {
        snprintf(buf, n, "an unknown address");
    }
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

/* ------------------------------------------------------------------ */
/* The network side's BIO: OpenSSL's socket BIO writes without
 * MSG_NOSIGNAL, and a peer gone mid-write would kill the process with
 * SIGPIPE.                                                             */

static BIO_METHOD *sock_method;
static pthread_once_t sock_once = PTHREAD_ONCE_INIT;

/* Send what wbuf holds: true once it is empty, false if the socket is full
 * (wait for EPOLLOUT) or failed (c->w_failed). */
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
        c->w_failed = true;
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
    if (c->wbuf && !c->w_failed && (size_t)len <= WBUF_BYTES) {
        /* Gathered; pump() sends them when its writing is done. */
        if (c->w_off + c->w_len + (size_t)len > WBUF_BYTES) {
            (void)wflush(c);
            if (c->w_failed)
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
    if (c->w_len && !wflush(c) && !c->w_failed) {
        BIO_set_retry_write(b);         /* what is gathered goes first */
        return -1;
    }
    if (c->w_failed)
        return -1;
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
    if (!c->w_failed)
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

/* OpenSSL reads and writes c's network socket through our BIO; 0 or -1. */
static int ssl_on(struct conn *c)
{
    BIO *b;

    pthread_once(&sock_once, sock_method_make);
    if (!sock_method || !(b = BIO_new(sock_method)))
        return -1;
    BIO_set_data(b, c);
    BIO_set_init(b, 1);
    SSL_set_bio(c->ssl, b, b);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Connections (all under their loop's mu, in its thread)             */

static void set_interest(struct conn *c, int fd, struct tag *t,
                         uint32_t *cur, uint32_t want)
{
    struct epoll_event ev = {.events = want, .data.ptr = t};

    int epfd = c->loop->epfd;

    if (fd < 0 || want == *cur)
        return;
    if (!*cur)
        epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
    else if (!want)
        epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
    else
        epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
    *cur = want;
}

static void conn_kill(struct conn *c)
{
    if (c->dead)
        return;
    c->dead = true;
    if (c->net >= 0) {
        set_interest(c, c->net, &c->net_tag, &c->net_ev, 0);
        close(c->net);
        c->net = -1;
    }
    if (c->loc >= 0) {
        set_interest(c, c->loc, &c->loc_tag, &c->loc_ev, 0);
        close(c->loc);
        c->loc = -1;
    }
    c->loop->n_conns--;
}

static void refuse(struct conn *c, const char *why)
{
    struct hc_relay_ep *ep = c->ep;
    uint64_t n = __atomic_add_fetch(&ep->refused, 1, __ATOMIC_RELAXED);
    uint64_t now = now_ms();
    /* The first 20, then at most one a second: a flood cannot fill the
     * log, and each kind of refused peer still shows. */
    bool log = n <= 20 ||
               now >= __atomic_load_n(&ep->logged_at, __ATOMIC_RELAXED) + 1000;

    if (log)
        __atomic_store_n(&ep->logged_at, now, __ATOMIC_RELAXED);
    if (ep->server) {
        if (log)
            hc_warn("rpc server %s: refused the connection from %s (%llu so "
                    "far): %s", ep->name, c->peer, (unsigned long long)n, why);
    } else if (log) {
        hc_warn("rpc client: %s (%s): TLS failed (%llu so far): %s",
                ep->name, c->peer, (unsigned long long)n, why);
    }
    conn_kill(c);
}

/* A client's connect failed (the server is down, or moved): nng dials
 * again and the rpc layer reports a peer it never reached, so this is not
 * logged; the next connect looks the host up again. */
static void unreachable(struct conn *c)
{
    c->ep->failing = true;
    conn_kill(c);
}

static int resolve(struct sockaddr_storage *to, socklen_t *len,
                   const char *host, int port, int passive);

/* A client's server by name again (a restarted container or pod may come
 * back at another address); the old address is kept when that fails. */
static void re_resolve(struct hc_relay_ep *ep)
{
    struct sockaddr_storage to;
    socklen_t len;

    ep->resolved_at = now_ms();
    if (resolve(&to, &len, ep->host, ep->port, 0) == HC_OK) {
        ep->to = to;
        ep->to_len = len;
    }
}

static struct conn *conn_new(struct hc_relay_ep *ep, struct loop *R)
{
    struct conn *c = calloc(1, sizeof *c);

    if (!c)
        return NULL;
    /* The buffers come with the handshake (handshake_done): a peer that
     * never finishes one costs no more than its SSL. */
    if (!(c->ssl = SSL_new(ep->ctx))) {
        free(c);
        ERR_clear_error();
        return NULL;
    }
    c->ep = ep;
    c->loop = R;
    c->net = c->loc = -1;
    c->net_tag = (struct tag){SIDE_NET, c};
    c->loc_tag = (struct tag){SIDE_LOC, c};
    c->deadline = now_ms() + HANDSHAKE_MS;
    c->next = R->conns;
    R->conns = c;
    R->n_conns++;
    return c;
}

/* Connect fd (non-blocking) to ep->to; 0, or -1 on failure. */
static int start_connect(int *fd, const struct hc_relay_ep *ep)
{
    int one = 1;

    *fd = socket(ep->to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                 0);
    if (*fd < 0)
        return -1;
    setsockopt(*fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(*fd, (const struct sockaddr *)&ep->to, ep->to_len) == 0 ||
        errno == EINPROGRESS)
        return 0;
    return -1;
}

/* Whether a non-blocking connect on fd has finished: 1 yes, 0 not yet,
 * -1 failed (errno set). */
static int connected(int fd)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    int err = 0;
    socklen_t el = sizeof err;

    if (getpeername(fd, (struct sockaddr *)&sa, &len) == 0)
        return 1;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err) {
        errno = err;
        return -1;
    }
    return errno == ENOTCONN ? 0 : -1;
}

/* The buffers are rings of BUF_BYTES: bytes at [off, off + len) modulo
 * BUF_BYTES, so nothing is ever moved inside one. */

/* Where the next bytes go, and how many fit there in one piece. */
static size_t tail_at(size_t off, size_t len)
{
    return (off + len) % BUF_BYTES;
}

static size_t room(size_t off, size_t len)
{
    size_t t = tail_at(off, len);

    if (len == BUF_BYTES)
        return 0;
    return t >= off ? BUF_BYTES - t : off - t;
}

/* How many bytes from off on are in one piece. */
static size_t piece(size_t off, size_t len)
{
    return len < BUF_BYTES - off ? len : BUF_BYTES - off;
}

static void consume(size_t *off, size_t *len, size_t k)
{
    *off = (*off + k) % BUF_BYTES;
    *len -= k;
    if (!*len)
        *off = 0;               /* the most room in one piece */
}

/* After an OpenSSL call on c returned r: whether it only waits for the
 * network (which way noted in c), or the connection failed or closed.
 * Leaves OpenSSL's error queue empty. */
static bool ssl_waits(struct conn *c, int r)
{
    int e = SSL_get_error(c->ssl, r);

    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ)
        c->net_want_in = true;
    else if (e == SSL_ERROR_WANT_WRITE)
        c->net_want_out = true;
    else
        return false;
    return true;
}

/* Move bytes both ways until nothing moves. */
static void pump(struct conn *c)
{
    bool moved;
    size_t got;
    ssize_t k;
    int r;

    c->net_want_in = c->net_want_out = false;
    do {
        moved = false;
        /* network → n2l */
        while (!c->net_eof && room(c->n2l_off, c->n2l_len)) {
            r = SSL_read_ex(c->ssl, c->n2l + tail_at(c->n2l_off, c->n2l_len),
                            room(c->n2l_off, c->n2l_len), &got);
            if (r == 1) {
                c->n2l_len += got;
                moved = true;
                continue;
            }
            if (!ssl_waits(c, r))
                c->net_eof = true;      /* close-notify, reset, bad record */
            break;
        }
        /* n2l → loopback */
        if (c->n2l_len && c->loc_up) {
            k = send(c->loc, c->n2l + c->n2l_off,
                     piece(c->n2l_off, c->n2l_len), MSG_NOSIGNAL);
            if (k > 0) {
                consume(&c->n2l_off, &c->n2l_len, (size_t)k);
                moved = true;
            } else if (k < 0 && errno != EAGAIN && errno != EINTR) {
                c->loc_eof = true;
                c->n2l_len = c->n2l_off = 0; /* nobody left to take it */
            }
        }
        /* loopback → l2n */
        while (c->loc_up && !c->loc_eof && !c->loc_dry &&
               room(c->l2n_off, c->l2n_len)) {
            size_t want = room(c->l2n_off, c->l2n_len);

            k = recv(c->loc, c->l2n + tail_at(c->l2n_off, c->l2n_len), want,
                     0);
            if (k > 0) {
                c->l2n_len += (size_t)k;
                c->loc_dry = (size_t)k < want;
                moved = true;
                continue;
            }
            if (k == 0 || (errno != EAGAIN && errno != EINTR))
                c->loc_eof = true;
            else
                c->loc_dry = true;
            break;
        }
        /* l2n → network: a record per SSL_write (partial writes are on),
         * gathered in wbuf until the socket takes no more. */
        while (c->l2n_len && !c->net_eof) {
            size_t put = 0;

            /* A write OpenSSL must finish is retried at the same place
             * with at least as many bytes: the piece only grows. */
            r = SSL_write_ex(c->ssl, c->l2n + c->l2n_off,
                             piece(c->l2n_off, c->l2n_len), &put);
            if (r == 1) {
                consume(&c->l2n_off, &c->l2n_len, put);
                moved = true;
                continue;
            }
            if (!ssl_waits(c, r)) {
                c->net_eof = true;
                c->l2n_len = c->l2n_off = 0;
            }
            break;
        }
        /* The records gathered, in as few sends as the socket takes. */
        if (c->w_len && !wflush(c) && !c->w_failed)
            c->net_want_out = true;
        if (c->w_failed && !c->net_eof) {
            c->net_eof = true;
            c->l2n_len = c->l2n_off = 0;
        }
    } while (moved);
}

/* Register what c waits for now. */
static void update_interest(struct conn *c)
{
    uint32_t net = 0, loc = 0;

    switch (c->state) {
    case C_CONNECT:
        net = EPOLLOUT;
        break;
    case C_HANDSHAKE:
        net = c->net_want_out ? EPOLLOUT : EPOLLIN;
        break;
    case C_RELAY:
        if (!c->net_eof && (c->net_want_in || room(c->n2l_off, c->n2l_len)))
            net |= EPOLLIN;
        if (c->net_want_out || c->w_len)
            net |= EPOLLOUT;
        if (!c->loc_up) {
            loc = EPOLLOUT;
        } else {
            if (!c->loc_eof && room(c->l2n_off, c->l2n_len))
                loc |= EPOLLIN;
            if (c->n2l_len)
                loc |= EPOLLOUT;
        }
        break;
    }
    /* A side with nothing to do is not watched at all (epoll reports a
     * hang-up even unasked, level-triggered: a busy loop); the pump finds
     * the hang-up once there is something to do. */
    set_interest(c, c->net, &c->net_tag, &c->net_ev, net);
    set_interest(c, c->loc, &c->loc_tag, &c->loc_ev, loc);
}

/* The handshake finished: a server's connection is verified and joined
 * to nng's listener; a client's (OpenSSL checked the name) relays. */
static int handshake_done(struct conn *c)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    char why[160];

    if (!(c->n2l = malloc(BUF_BYTES)) || !(c->l2n = malloc(BUF_BYTES)) ||
        !(c->wbuf = malloc(WBUF_BYTES))) {
        refuse(c, "out of memory for its buffers");
        return -1;
    }
    c->ep->failing = false;
    if (c->ep->server) {
        X509 *peer = SSL_get1_peer_certificate(c->ssl);
        bool ok = peer && SSL_get_verify_result(c->ssl) == X509_V_OK;

        X509_free(peer);
        if (!ok) {
            refuse(c, "no client certificate, or one not signed by this "
                      "cluster's CA");
            return -1;
        }
        if (start_connect(&c->loc, c->ep) != 0 ||
            getsockname(c->loc, (struct sockaddr *)&sa, &len) != 0) {
            snprintf(why, sizeof why, "joining it to the server's socket: %s",
                     strerror(errno));
            refuse(c, why);
            return -1;
        }
        c->loc_port = sa.ss_family == AF_INET
                          ? ntohs(((struct sockaddr_in *)&sa)->sin_port)
                          : 0;
    } else {
        c->loc_up = true;
    }
    c->state = C_RELAY;
    return 0;
}

/* Everything a connection can do now. */
static void step(struct conn *c)
{
    char why[200];
    int r;

    if (c->state == C_CONNECT) {
        if ((r = connected(c->net)) == 0)
            goto out;
        if (r < 0) {
            unreachable(c);
            return;
        }
        if (ssl_on(c) != 0) {
            refuse(c, "out of memory");
            return;
        }
        SSL_set_connect_state(c->ssl);
        c->state = C_HANDSHAKE;
    }
    if (c->state == C_HANDSHAKE) {
        c->net_want_in = c->net_want_out = false;
        r = SSL_do_handshake(c->ssl);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);

            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                c->net_want_out = e == SSL_ERROR_WANT_WRITE;
                ERR_clear_error();
                goto out;
            }
            if (c->ep->server && !BIO_number_read(SSL_get_rbio(c->ssl))) {
                /* Connected and closed without a byte: a TCP health check
                 * (Kubernetes' tcpSocket probe) or a port scan. Counted,
                 * not logged: nothing was refused. */
                __atomic_add_fetch(&c->ep->refused, 1, __ATOMIC_RELAXED);
                conn_kill(c);
                return;
            }
            if (c->ep->server) {
                char r2[160];

                snprintf(why, sizeof why, "no client certificate, or one not "
                         "signed by this cluster's CA, or no TLS (%s)",
                         ssl_reason(c->ssl, r2, sizeof r2));
            } else {
                ssl_reason(c->ssl, why, sizeof why);
            }
            refuse(c, why);
            return;
        }
        if (handshake_done(c) != 0)
            return;
    }
    if (!c->loc_up) {
        if ((r = connected(c->loc)) == 0)
            goto out;
        if (r < 0) {
            snprintf(why, sizeof why, "joining it to the server's socket: %s",
                     strerror(errno));
            refuse(c, why);
            return;
        }
        c->loc_up = true;
    }
    pump(c);
    /* One side gone and nothing left for the other: close both (nng sees
     * its connection close and does what it does for a lost peer). */
    if ((c->net_eof && !c->n2l_len) ||
        (c->loc_eof && !c->l2n_len && !c->w_len)) {
        if (!c->net_eof) {
            SSL_shutdown(c->ssl);       /* a close-notify, not waited for */
            (void)wflush(c);
        }
        ERR_clear_error();
        conn_kill(c);
        return;
    }
out:
    update_interest(c);
}

/* Take the connections waiting on ep into loop R. A server's listening
 * socket is in every loop's epoll (EPOLLEXCLUSIVE: one loop woken per
 * connection, as a rule), so its connections spread over the loops. */
static void accept_all(struct hc_relay_ep *ep, struct loop *R)
{
    struct sockaddr_storage sa;
    socklen_t len;
    struct conn *c;
    int fd, one = 1;

    for (;;) {
        len = sizeof sa;
        /* Under ep->mu: a close elsewhere cannot hand the fd's number to
         * another socket between the check and the accept. */
        pthread_mutex_lock(&ep->mu);
        fd = ep->dead ? -1
                      : accept4(ep->fd, (struct sockaddr *)&sa, &len,
                                SOCK_NONBLOCK | SOCK_CLOEXEC);
        pthread_mutex_unlock(&ep->mu);
        if (fd < 0)
            return;                     /* EAGAIN, or try at the next event */
        if (R->n_conns >= MAX_CONNS || !(c = conn_new(ep, R))) {
            if (++R->over_cap <= 10 || R->over_cap % 1000 == 0)
                hc_warn("rpc relay %s: closed a connection at once (%d "
                        "open, the most there may be; %llu so far)",
                        ep->name, R->n_conns, (unsigned long long)R->over_cap);
            close(fd);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (ep->server) {
            addr_text((struct sockaddr *)&sa, c->peer, sizeof c->peer);
            c->net = fd;
            if (ssl_on(c) != 0) {
                refuse(c, "out of memory");
                continue;
            }
            SSL_set_accept_state(c->ssl);
            c->state = C_HANDSHAKE;
        } else {
            addr_text((struct sockaddr *)&ep->to, c->peer, sizeof c->peer);
            c->loc = fd;
            if (!ep->numeric && (ep->failing || now_ms() >= ep->resolved_at +
                                                             RESOLVE_MS))
                re_resolve(ep);
            if (start_connect(&c->net, ep) != 0) {
                unreachable(c);
                continue;
            }
            c->state = C_CONNECT;
        }
        step(c);
    }
}

/* Free what is dead; under R->mu, by the loop's thread only. */
static void reap(struct loop *R)
{
    struct conn **pc = &R->conns, *c;

    while ((c = *pc) != NULL) {
        if (!c->dead) {
            pc = &c->next;
            continue;
        }
        *pc = c->next;
        SSL_free(c->ssl);
        free(c->n2l);
        free(c->l2n);
        free(c->wbuf);
        free(c);
    }
}

static void *relay_main(void *arg)
{
    struct loop *R = arg;
    struct epoll_event evs[64];
    uint64_t next_check = 0;
    int n, i;

    pthread_setname_np(pthread_self(), "hetps:relay");
    for (;;) {
        n = epoll_wait(R->epfd, evs, 64, WAIT_MS);
        pthread_mutex_lock(&R->mu);
        for (i = 0; i < n; i++) {
            struct tag *t = evs[i].data.ptr;

            if (t->side == SIDE_LISTEN) {
                accept_all(t->owner, R);
            } else {
                struct conn *c = t->owner;

                if (!c->dead) {
                    /* The side with an event may have bytes again. */
                    if (t->side == SIDE_NET)
                        c->net_dry = false;
                    else
                        c->loc_dry = false;
                    step(c);
                }
            }
        }
        if (now_ms() >= next_check) {
            uint64_t now = now_ms();
            struct conn *c;

            for (c = R->conns; c; c = c->next) {
                if (c->dead || (c->state == C_RELAY && c->loc_up) ||
                    now < c->deadline)
                    continue;
                if (c->state == C_CONNECT)
                    unreachable(c);
                else if (c->state == C_HANDSHAKE)
                    refuse(c, "no TLS handshake within 10 s");
                else
                    refuse(c, "the server's socket did not take it within "
                              "10 s");
            }
            next_check = now + WAIT_MS;
        }
        reap(R);
        pthread_mutex_unlock(&R->mu);
    }
    return NULL;
}

/* A child of fork() has no relay thread: it starts its own, with none of
 * the parent's endpoints. Their sockets are the parent's to serve: closed
 * here (a listening port held by a child would take connections nobody
 * accepts); their memory is kept where a leak checker sees it. */
static struct conn *parents_conns[MAX_LOOPS];

static void forget_in_child(void)
{
    struct hc_relay_ep *ep;
    struct conn *c;
    int i;

    pthread_mutex_init(&eps_mu, NULL);
    for (ep = all_eps; ep; ep = ep->next) {
        pthread_mutex_init(&ep->mu, NULL);
        if (ep->fd >= 0)
            close(ep->fd);
        ep->fd = -1;
        ep->dead = true;
    }
    for (i = 0; i < MAX_LOOPS; i++) {
        struct loop *R = &loops[i];

        pthread_mutex_init(&R->mu, NULL);
        for (c = R->conns; c; c = c->next) {
            if (c->net >= 0)
                close(c->net);
            if (c->loc >= 0)
                close(c->loc);
        }
        if (R->epfd >= 0)
            close(R->epfd);
        parents_conns[i] = R->conns;
        R->epfd = -1;
        R->started = false;
        R->conns = NULL;
        R->n_conns = 0;
    }
}

/* Start the loop's thread once; under R->mu. */
static int start(struct loop *R)
{
    pthread_t th;
    pthread_attr_t at;

    if (R->started)
        return HC_OK;
    if ((R->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return hc_err_set(HC_ERR_TRANSPORT, "TLS relay: epoll: %s",
                          strerror(errno));
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, relay_main, R) != 0) {
        pthread_attr_destroy(&at);
        close(R->epfd);
        R->epfd = -1;
        return hc_err_set(HC_ERR_NOMEM, "TLS relay: no thread");
    }
    pthread_attr_destroy(&at);
    R->started = true;
    return HC_OK;
}

/* host:port into ep->to (the first address); HC_OK or an error. */
static int resolve(struct sockaddr_storage *to, socklen_t *len,
                   const char *host, int port, int passive)
{
    struct addrinfo hints = {0}, *ai = NULL;
    char ps[16];
    int rv;

    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    snprintf(ps, sizeof ps, "%d", port);
    if (!strcmp(host, "*") || !host[0])
        host = NULL;
    if ((rv = getaddrinfo(host, ps, &hints, &ai)) != 0 || !ai)
        return hc_err_set(HC_ERR_TRANSPORT, "%s:%d: %s", host ? host : "*",
                          port, gai_strerror(rv));
    memcpy(to, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return HC_OK;
}

/* A listening socket on addr; port into *bound. */
static int listen_on(const struct sockaddr_storage *addr, socklen_t len,
                     int *bound)
{
    struct sockaddr_storage sa;
    socklen_t sl = sizeof sa;
    int fd, one = 1;

    fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (const struct sockaddr *)addr, len) != 0 ||
        listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        int e = errno;

        close(fd);
        errno = e;
        return -1;
    }
    *bound = ntohs(sa.ss_family == AF_INET6
                       ? ((struct sockaddr_in6 *)&sa)->sin6_port
                       : ((struct sockaddr_in *)&sa)->sin_port);
    return fd;
}

/* Start loop R if need be and watch ep's listening socket there. */
static int watch(struct loop *R, hc_relay_ep *ep, uint32_t events)
{
    struct epoll_event ev = {.events = events, .data.ptr = &ep->tag};
    int err;

    pthread_mutex_lock(&R->mu);
    if ((err = start(R)) == HC_OK &&
        epoll_ctl(R->epfd, EPOLL_CTL_ADD, ep->fd, &ev) != 0)
        err = hc_err_set(HC_ERR_TRANSPORT, "%s: epoll: %s", ep->name,
                         strerror(errno));
    pthread_mutex_unlock(&R->mu);
    return err;
}

static int ep_open(hc_relay_ep **out, int server, const char *lhost,
                   int lport, const char *thost, int tport,
                   const char *ca_file, const char *cert_key_file,
                   const char *server_name, const char *name, int *bound)
{
    struct sockaddr_storage la;
    socklen_t ll;
    hc_relay_ep *ep;
    int err, i;

    *out = NULL;
    if (!(ep = calloc(1, sizeof *ep)))
        return hc_err_set(HC_ERR_NOMEM, "TLS relay: out of memory");
    ep->server = server;
    ep->fd = -1;
    snprintf(ep->name, sizeof ep->name, "%s", name);
    snprintf(ep->host, sizeof ep->host, "%s", thost);
    ep->port = tport;
    {
        struct in6_addr a6;

        ep->numeric = inet_pton(AF_INET, thost, &a6) == 1 ||
                      inet_pton(AF_INET6, thost, &a6) == 1;
    }
    ep->resolved_at = now_ms();
    if (!(ep->ctx = hc_tls_ctx_open(server, ca_file, cert_key_file,
                                    server_name))) {
        free(ep);
        return hc_err_set(HC_ERR_CONFIG, "%s: %s", name, hc_err_msg());
    }
    if ((err = resolve(&ep->to, &ep->to_len, thost, tport, 0)) != HC_OK ||
        (err = resolve(&la, &ll, lhost, lport, 1)) != HC_OK)
        goto fail;
    if ((ep->fd = listen_on(&la, ll, bound)) < 0) {
        err = hc_err_set(HC_ERR_TRANSPORT, "%s: cannot listen on %s:%d: %s%s",
                         name, lhost, lport, strerror(errno),
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
    /* A server's listening socket in every loop, a client's in one. */
    if (server) {
        for (i = 0; i < n_loops && err == HC_OK; i++)
            err = watch(&loops[i], ep, EPOLLIN | EPOLLEXCLUSIVE);
    } else {
        ep->loop = &loops[__atomic_fetch_add(&next_loop, 1, __ATOMIC_RELAXED) %
                          (unsigned)n_loops];
        err = watch(ep->loop, ep, EPOLLIN);
    }
    if (err != HC_OK) {
        hc_relay_close(ep);             /* kept in all_eps: never freed */
        return err;
    }
    *out = ep;
    return HC_OK;
fail:
    if (ep->fd >= 0)
        close(ep->fd);
    hc_tls_ctx_close(ep->ctx);
    free(ep);
    return err;
}

int hc_relay_listen(hc_relay_ep **out, const char *host, int port,
                    int inner_port, const char *ca_file,
                    const char *cert_key_file, const char *name, int *bound)
{
    return ep_open(out, 1, host, port, "127.0.0.1", inner_port, ca_file,
                   cert_key_file, NULL, name, bound);
}

int hc_relay_dial(hc_relay_ep **out, const char *host, int port,
                  const char *ca_file, const char *cert_key_file,
                  const char *name, int *inner_port)
{
    return ep_open(out, 0, "127.0.0.1", 0, host, port, ca_file, cert_key_file,
                   host, name, inner_port);
}

void hc_relay_close(hc_relay_ep *ep)
{
    struct conn *c;
    int i;

    if (!ep)
        return;
    pthread_mutex_lock(&ep->mu);
    if (ep->dead) {
        pthread_mutex_unlock(&ep->mu);
        return;
    }
    ep->dead = true;
    close(ep->fd);                      /* out of every epoll set */
    ep->fd = -1;
    pthread_mutex_unlock(&ep->mu);
    /* No loop takes a connection of ep from here on; each loop's are
     * closed under its mutex, so none is in a handshake when the context
     * goes (a loop's thread holds its mutex through a batch of events). */
    for (i = 0; i < n_loops; i++) {
        struct loop *R = &loops[i];

        pthread_mutex_lock(&R->mu);
        for (c = R->conns; c; c = c->next)
            if (c->ep == ep)
                conn_kill(c);
        pthread_mutex_unlock(&R->mu);
    }
    hc_tls_ctx_close(ep->ctx);
    ep->ctx = NULL;
}

int hc_relay_peer(hc_relay_ep *ep, int from_port, char *peer, size_t n)
{
    struct conn *c;
    int found = 0, i;

    pthread_once(&loops_once, loops_init);
    for (i = 0; i < n_loops && !found; i++) {
        struct loop *R = &loops[i];

        pthread_mutex_lock(&R->mu);
        for (c = R->conns; c && !found; c = c->next)
            if ((ep ? c->ep == ep : c->ep->server) && !c->dead &&
                c->state == C_RELAY && c->loc_port == from_port) {
                snprintf(peer, n, "%s", c->peer);
                found = 1;
            }
        pthread_mutex_unlock(&R->mu);
    }
    return found;
}
