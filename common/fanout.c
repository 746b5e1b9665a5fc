/*
 * fanout.c — see fanout.h.
 *
 * The run in progress is a struct on the caller's stack, reachable through
 * f->job while it has pieces not yet taken. Pieces are taken and counted
 * done under f->mu (a handful per step: the lock costs nothing next to a
 * piece), so a helper never takes a piece of a run that has returned.
 */
#include "fanout.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_HELPERS 7

struct job {
    void (*fn)(void *, int);
    void *arg;
    int n, next, done;
};

struct hc_fanout {
    pthread_mutex_t mu;
    pthread_cond_t work;        /* helpers: a job, or stop */
    pthread_cond_t idle;        /* the caller: the job's last piece done */
    struct job *job;
    bool stop;
    int n_threads;
    pthread_t threads[MAX_HELPERS];
};

/* Take and run the job's pieces until none is left; under f->mu. */
static void drain(struct hc_fanout *f, struct job *j)
{
    while (j->next < j->n) {
        int i = j->next++;

        pthread_mutex_unlock(&f->mu);
        j->fn(j->arg, i);
        pthread_mutex_lock(&f->mu);
        if (++j->done == j->n)
            pthread_cond_broadcast(&f->idle);
    }
}

static void *helper(void *arg)
{
    struct hc_fanout *f = arg;

    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        if (f->job && f->job->next < f->job->n)
            drain(f, f->job);
        else
            pthread_cond_wait(&f->work, &f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

struct hc_fanout *hc_fanout_open(int n)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = n < (int)cores ? n : (int)cores;
    struct hc_fanout *f;

    want = (want > MAX_HELPERS + 1 ? MAX_HELPERS + 1 : want) - 1;
    if (want < 1 || !(f = calloc(1, sizeof *f)))
        return NULL;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->work, NULL);
    pthread_cond_init(&f->idle, NULL);
    while (f->n_threads < want &&
           pthread_create(&f->threads[f->n_threads], NULL, helper, f) == 0)
        f->n_threads++;
    if (f->n_threads == 0) {
        hc_fanout_close(f);
        return NULL;
    }
    return f;
}

void hc_fanout_close(struct hc_fanout *f)
{
    int i;

    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_broadcast(&f->work);
    pthread_mutex_unlock(&f->mu);
    for (i = 0; i < f->n_threads; i++)
        pthread_join(f->threads[i], NULL);
    pthread_cond_destroy(&f->work);
    pthread_cond_destroy(&f->idle);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

void hc_fanout_run(struct hc_fanout *f, int n, void (*fn)(void *arg, int i),
                   void *arg)
{
    struct job j = {.fn = fn, .arg = arg, .n = n};
    int i;

    if (!f || n < 2) {
        for (i = 0; i < n; i++)
            fn(arg, i);
        return;
    }
    pthread_mutex_lock(&f->mu);
    f->job = &j;
    pthread_cond_broadcast(&f->work);
    drain(f, &j);
    while (j.done < j.n)
        pthread_cond_wait(&f->idle, &f->mu);
    f->job = NULL;
    pthread_mutex_unlock(&f->mu);
}
