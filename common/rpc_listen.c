/*
 * rpc_listen.c — the listener guard (why: rpc_listen.h). One thread per
 * server wakes every TICK_MS; after IDLE_MS without a connection taken it
 * probes (probe: alive, stopped, or no verdict when the probe's own side
 * never came up), and after STOPPED_PROBES stopped ones listens again.
 * Also hc_nng_close: nng_close on a thread of its own, waited for only so
 * long (rpc_listen.h).
 */
#include "rpc_listen.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "log.h"

#define TICK_MS 500
#define IDLE_MS 2000        /* no connection taken for this long: probe */
#define PROBE_MS 2000       /* the server's take waited for, once up */
#define PROBE_UP_MS 3000    /* the probe's own side waited for */
#define STOPPED_PROBES 2    /* stopped probes in a row before a restart */
#define RELISTEN_TRIES 50   /* 100 ms apart, while the old port is held */
#define URL_LEN 600
#define CLOSE_MS 3000       /* a probe's socket's close waited for */

struct hc_listen {
    nng_socket sock;
    nng_listener lst;
    int listening;
    char url[URL_LEN];          /* what the listener listens on */
    char probe_url[URL_LEN];    /* what the probe dials */
    atomic_uint_least64_t *took;
    atomic_int probe_up;        /* the probe's connection came up */
    atomic_uint_least64_t restarts;
    int unreachable_told;
    nng_mtx *mu;
    nng_cv *cv;
    int stop;                   /* under mu */
    nng_thread *thread;         /* NULL: not watched */
};

/* nng_listen: created and started, or closed again on failure. */
static int listen_now(hc_listen *l)
{
    int rv = nng_listen(l->sock, l->url, &l->lst, 0);

    l->listening = rv == 0;
    return rv;
}

/* "tcp://0.0.0.0:0" → url as the listener has it (the bound port: nng's
 * NNG_OPT_URL), probe_url that port on loopback. */
static void set_urls(hc_listen *l)
{
    const char *h;
    nng_url *u;
    char *s;

    if (nng_listener_get_string(l->lst, NNG_OPT_URL, &s) == 0) {
        snprintf(l->url, sizeof l->url, "%s", s);
        nng_strfree(s);
    }
    snprintf(l->probe_url, sizeof l->probe_url, "%s", l->url);
    if (nng_url_parse(&u, l->url) != 0)
        return;
    h = u->u_hostname;              /* "*" is "" */
    h = !h[0] || !strcmp(h, "0.0.0.0") ? "127.0.0.1"
        : !strcmp(h, "::")             ? "::1"
                                       : h;
    snprintf(l->probe_url, sizeof l->probe_url,
             strchr(h, ':') ? "%s://[%s]:%s" : "%s://%s:%s", u->u_scheme, h,
             u->u_port);
    nng_url_free(u);
}

/* Sleep ms unless stopped; 1 when stopped. */
static int wait_stop(hc_listen *l, int ms)
{
    nng_time until = nng_clock() + (nng_time)ms;
    int stop;

    nng_mtx_lock(l->mu);
    while (!l->stop && nng_cv_until(l->cv, until) != NNG_ETIMEDOUT)
        ;
    stop = l->stop;
    nng_mtx_unlock(l->mu);
    return stop;
}

static void probe_cb(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    hc_listen *l = arg;

    (void)p;
    (void)ev;
    atomic_store(&l->probe_up, 1);
}

/* 1 alive, 0 stopped, -1 no verdict. */
static int probe(hc_listen *l)
{
    uint64_t before = atomic_load(l->took);
    nng_socket ps;
    nng_dialer d;
    nng_time up_at = 0, start = nng_clock();
    int verdict = -1, rv;

    atomic_store(&l->probe_up, 0);
    if (nng_req0_open(&ps) != 0)
        return -1;
    nng_pipe_notify(ps, NNG_PIPE_EV_ADD_POST, probe_cb, l);
    if ((rv = nng_dialer_create(&d, ps, l->probe_url)) == 0)
        rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK);
    while (rv == 0 && !wait_stop(l, 20)) {
        nng_time now = nng_clock();

        if (atomic_load(l->took) != before) {
            verdict = 1;
            break;
        }
        if (!up_at && atomic_load(&l->probe_up))
            up_at = now;
        /* Up but not taken: stopped; never up: no verdict. */
        if (up_at ? now - up_at >= PROBE_MS : now - start >= PROBE_UP_MS) {
            verdict = up_at ? 0 : -1;
            break;
        }
    }
    nng_pipe_notify(ps, NNG_PIPE_EV_ADD_POST, NULL, NULL);
    hc_nng_close(ps, CLOSE_MS, "the listener's probe");
    if (verdict < 0 && !l->unreachable_told) {
        l->unreachable_told = 1;
        hc_debug("rpc server %s: the listener's probe could not connect to "
                 "%s (%s)", l->url, l->probe_url,
                 rv ? nng_strerror(rv) : "no connection within the wait");
    }
    return verdict;
}

static void relisten(hc_listen *l)
{
    int rv = 0, k;

    if (l->listening) {
        hc_warn("rpc server %s: new connections are no longer taken (a "
                "probe's connection came up and was not taken within %d ms, "
                "%d times in a row: nng 1.5.2 stops accepting after a client "
                "drops its connection during the handshake, "
                "nanomsg/nng#1518); listening again — open connections are "
                "closed, their clients reconnect", l->url, PROBE_MS,
                STOPPED_PROBES);
        nng_listener_close(l->lst);
        l->listening = 0;
        atomic_fetch_add(&l->restarts, 1);
    }
    for (k = 0; k < RELISTEN_TRIES; k++) {
        if ((rv = listen_now(l)) != NNG_EADDRINUSE || wait_stop(l, 100))
            break;
    }
    if (rv == 0)
        hc_info("rpc server %s: listening again", l->url);
    else
        hc_warn("rpc server %s: cannot listen again: %s (trying again in "
                "%d ms)", l->url, nng_strerror(rv), TICK_MS);
}

static void guard_run(void *arg)
{
    hc_listen *l = arg;
    uint64_t seen = atomic_load(l->took);
    nng_time changed = nng_clock();
    int stopped = 0;

    while (!wait_stop(l, TICK_MS)) {
        uint64_t now_took = atomic_load(l->took);
        int verdict;

        if (!l->listening) {
            relisten(l);
            continue;
        }
        if (now_took != seen) {
            seen = now_took;
            changed = nng_clock();
            stopped = 0;
            continue;
        }
        if (nng_clock() - changed < IDLE_MS)
            continue;
        verdict = probe(l);
        if (verdict == 0 && ++stopped < STOPPED_PROBES)
            continue;           /* probe again at the next tick */
        if (verdict == 0)
            relisten(l);
        stopped = 0;
        seen = atomic_load(l->took);
        changed = nng_clock();
    }
}

int hc_listen_start(hc_listen **out, nng_socket sock, const char *turl,
                    atomic_uint_least64_t *took)
{
    hc_listen *l;
    nng_thread *t;
    int rv;

    *out = NULL;
    if (!(l = calloc(1, sizeof *l)))
        return NNG_ENOMEM;
    l->sock = sock;
    l->took = took;
    atomic_init(&l->probe_up, 0);
    atomic_init(&l->restarts, 0);
    snprintf(l->url, sizeof l->url, "%s", turl);
    if ((rv = listen_now(l)) != 0) {
        hc_listen_stop(l);
        return rv;
    }
    set_urls(l);
    if (nng_mtx_alloc(&l->mu) == 0 && nng_cv_alloc(&l->cv, l->mu) == 0 &&
        nng_thread_create(&t, guard_run, l) == 0)
        l->thread = t;
    else
        hc_warn("rpc server %s: no thread for the listener's guard: the "
                "listener is not watched", l->url);
    *out = l;
    return 0;
}

uint64_t hc_listen_restarts(hc_listen *l)
{
    return l ? atomic_load(&l->restarts) : 0;
}

void hc_listen_stop(hc_listen *l)
{
    if (!l)
        return;
    if (l->thread) {
        nng_mtx_lock(l->mu);
        l->stop = 1;
        nng_cv_wake(l->cv);
        nng_mtx_unlock(l->mu);
        nng_thread_destroy(l->thread);
    }
    if (l->cv)
        nng_cv_free(l->cv);
    if (l->mu)
        nng_mtx_free(l->mu);
    free(l);
}

struct closing {
    nng_socket s;
    atomic_int state;           /* 0 closing, 1 closed, 2 left by the waiter */
};

static void *close_main(void *arg)
{
    struct closing *c = arg;

    nng_close(c->s);
    if (atomic_exchange(&c->state, 1) == 2)
        free(c);                /* the waiter is gone: ours to free */
    return NULL;
}

int hc_nng_close(nng_socket s, int ms, const char *what)
{
    struct closing *c = malloc(sizeof *c);
    nng_time until = nng_clock() + (nng_time)ms;
    pthread_t th;

    if (c) {
        c->s = s;
        atomic_init(&c->state, 0);
    }
    if (!c || pthread_create(&th, NULL, close_main, c) != 0) {
        free(c);
        nng_close(s);           /* no thread: wait as nng does */
        return 0;
    }
    pthread_detach(th);
    while (atomic_load(&c->state) == 0 && nng_clock() < until)
        nng_msleep(1);
    if (atomic_exchange(&c->state, 2) == 1) {
        free(c);
        return 0;
    }
    hc_warn("%s: nng did not close its socket within %d ms (nng 1.5.2 lost "
            "a pipe closed as its receive completed); leaving it", what, ms);
    return -1;
}
