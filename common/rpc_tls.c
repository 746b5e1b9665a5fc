/*
 * rpc_tls.c — rpc's mutual-TLS backend (rpc_backend.h): the relay
 * (tls_relay.h) carries whole messages with their request ids, so this
 * file only keeps a client's attempt until a connection is up and says
 * when the connection it went on is lost.
 */
#include "rpc_backend.h"

#include <pthread.h>
#include <stdlib.h>

#include "err.h"
#include "tls_relay.h"

/* ---- client ---------------------------------------------------------- */

struct dial {
    hc_rpc_link *l;
    hc_relay_ep *ep;
    pthread_mutex_t mu;
    uint32_t conn;              /* the connection up now (0: none) */
    nng_msg *out;               /* an attempt waiting for a connection */
    uint32_t out_id;
    uint32_t sent_id, sent_conn; /* the attempt out, and where it went */
};

/* Send attempt id on the connection up now, or keep it for the next. */
static int dial_send(void *be, uint32_t id, nng_msg *m)
{
    struct dial *d = be;
    uint32_t conn;
    int err;

    for (;;) {
        pthread_mutex_lock(&d->mu);
        if (!(conn = d->conn)) {
            if (d->out)
                nng_msg_free(d->out);
            d->out = m;
            d->out_id = id;
            pthread_mutex_unlock(&d->mu);
            return HC_OK;
        }
        d->sent_id = id;        /* before the send: a reply may come first */
        d->sent_conn = conn;
        pthread_mutex_unlock(&d->mu);
        if ((err = hc_relay_send(d->ep, conn, id, m)) != HC_ERR_CLOSED)
            break;
        pthread_mutex_lock(&d->mu);  /* gone meanwhile: the next one */
        if (d->conn == conn)
            d->conn = 0;
        pthread_mutex_unlock(&d->mu);
    }
    if (err != HC_OK)
        nng_msg_free(m);
    return err;
}

static int dial_conn(void *arg, uint32_t conn, int up, const char *peer,
                     const char *who)
{
    struct dial *d = arg;
    nng_msg *out = NULL;
    uint32_t out_id = 0, lost = 0;

    (void)peer;
    (void)who;
    pthread_mutex_lock(&d->mu);
    if (up) {
        d->conn = conn;
        out = d->out;
        out_id = d->out_id;
        d->out = NULL;
    } else {
        if (d->conn == conn)
            d->conn = 0;
        if (d->sent_id && d->sent_conn == conn)
            lost = d->sent_id;
        d->sent_id = 0;
    }
    pthread_mutex_unlock(&d->mu);
    hc_rpc_link_conn(d->l, up ? 1 : -1);
    if (lost)
        hc_rpc_link_done(d->l, lost, NULL, HC_ERR_CLOSED, "connection lost");
    if (out && dial_send(d, out_id, out) != HC_OK)
        hc_rpc_link_done(d->l, out_id, NULL, HC_ERR_LIMIT, "send failed");
    return 0;
}

static void dial_msg(void *arg, uint32_t conn, uint32_t id, nng_msg *m)
{
    struct dial *d = arg;

    (void)conn;
    hc_rpc_link_done(d->l, id, m, 0, "");
}

static void dial_close(void *be)
{
    struct dial *d = be;

    hc_relay_close(d->ep);      /* no relay callback reaches d from here */
    if (d->out)
        nng_msg_free(d->out);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static int dial_open(void **be, hc_rpc_link *l, const char *url,
                     const char *name, const struct hc_rpc_client_opts *o)
{
    struct dial *d = calloc(1, sizeof *d);
    struct hc_relay_cb cb = {dial_conn, dial_msg, d, 0};
    int err;

    *be = NULL;
    if (!d)
        return hc_err_set(HC_ERR_NOMEM, "rpc client: out of memory for %s",
                          name);
    d->l = l;
    pthread_mutex_init(&d->mu, NULL);
    if ((err = hc_relay_open(&d->ep, 0, url, o->recv_max, o->tls->ca_file,
                             o->tls->cert_key_file, name, &cb)) != HC_OK)
        dial_close(d);
    else
        *be = d;
    return err;
}

static void dial_cancel(void *be, uint32_t id)
{
    struct dial *d = be;

    pthread_mutex_lock(&d->mu);
    if (d->out && d->out_id == id) {
        nng_msg_free(d->out);
        d->out = NULL;
    }
    if (d->sent_id == id)
        d->sent_id = 0;
    pthread_mutex_unlock(&d->mu);
}

const struct hc_rpc_dial_ops hc_rpc_tls_dial = {
    dial_open, dial_send, dial_cancel, dial_close,
};

/* ---- server ---------------------------------------------------------- */

/* A server's backend is its relay endpoint; the callbacks' arg the server. */

static int listen_conn(void *arg, uint32_t conn, int up, const char *peer,
                       const char *who)
{
    return hc_rpc_serve_conn(arg, conn, up, peer, who);
}

static void listen_msg(void *arg, uint32_t conn, uint32_t id, nng_msg *m)
{
    nng_pipe pipe = NNG_PIPE_INITIALIZER;

    pipe.id = conn;
    nng_msg_set_pipe(m, pipe);
    hc_rpc_serve_msg(arg, conn, id, m);
}

/* A reply the relay cannot take is dropped (a peer with eight waiting
 * already is closed by the relay, with a warning). */
static void listen_reply(void *be, uint32_t conn, uint32_t id, nng_msg *m)
{
    if (m && hc_relay_send(be, conn, id, m) != HC_OK)
        nng_msg_free(m);
}

static void listen_drop(void *be, uint32_t conn)
{
    hc_relay_drop(be, conn);
}

static void listen_stop(void *be)
{
    hc_relay_close(be);
}

static int listen_start(void **be, hc_rpc_server *s, const char *url,
                        const struct hc_rpc_server_opts *o)
{
    struct hc_relay_cb cb = {listen_conn, listen_msg, s, o->send_timeout_ms};
    hc_relay_ep *ep;
    int err = hc_relay_open(&ep, 1, url, o->recv_max, o->tls->ca_file,
                            o->tls->cert_key_file, url, &cb);

    *be = ep;
    return err;
}

const struct hc_rpc_listen_ops hc_rpc_tls_listen = {
    0, listen_start, listen_reply, listen_drop, listen_stop, NULL,
};
