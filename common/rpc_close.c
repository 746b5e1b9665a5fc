/*
 * rpc_close.c — closing an nng socket without hanging (see rpc_close.h).
 */
#include "rpc_close.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "log.h"

#define CLOSE_WAIT_MS 3000   /* a socket's close waited for at most */

/*
 * Where nng 1.5.2's close waits for ever, found with a debug build of it:
 * a send queued on a TLS connection that cannot move (its TCP stream has
 * already failed, or its handshake never finished) is cancelled by
 * aborting the connection's TCP send — which is idle — so it never ends;
 * the REQ pipe's stop (req0_pipe_stop) then waits for it on nng's single
 * reaper thread, and every later socket close and redial in the process
 * waits behind it. tests/unit/test_rpc.c's client with another CA's
 * certificate (refused by the server right after the handshake) did it
 * about one run in three. A process must not hang on its way out for
 * that: the close runs on a thread of its own and is waited for
 * CLOSE_WAIT_MS. The caller removes its pipe callbacks first, so nothing
 * of its own is touched after we return.
 */
struct closer {
    nng_socket sock;
    sem_t done;
    atomic_int refs;            /* the closing thread and the waiter */
};

static void closer_rele(struct closer *k)
{
    if (atomic_fetch_sub(&k->refs, 1) == 1) {
        sem_destroy(&k->done);
        free(k);
    }
}

static void *closer_run(void *arg)
{
    struct closer *k = arg;

    nng_close(k->sock);
    sem_post(&k->done);
    closer_rele(k);
    return NULL;
}

int hc_rpc_close_socket(nng_socket sock, const char *name)
{
    struct closer *k = calloc(1, sizeof *k);
    pthread_attr_t attr;
    pthread_t t;
    struct timespec until;
    int rv = -1;

    if (k && sem_init(&k->done, 0, 0) == 0) {
        k->sock = sock;
        atomic_init(&k->refs, 2);
        if (pthread_attr_init(&attr) == 0) {
            pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
            rv = pthread_create(&t, &attr, closer_run, k);
            pthread_attr_destroy(&attr);
        }
        if (rv != 0)
            sem_destroy(&k->done);
    }
    if (rv != 0) {              /* no thread: close here, unbounded */
        free(k);
        nng_close(sock);
        return 0;
    }
    until = hc_time_in(CLOCK_REALTIME, CLOSE_WAIT_MS);
    while ((rv = sem_timedwait(&k->done, &until)) != 0 && errno == EINTR)
        ;
    if (rv != 0)
        hc_warn("rpc: closing the connection to %s took over %d ms (an nng "
                "close that waits forever): left to finish in the background",
                name ? name : "?", CLOSE_WAIT_MS);
    closer_rele(k);
    return rv == 0 ? 0 : -1;
}
