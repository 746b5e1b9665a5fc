/*
 * store_step.c — a synchronous step applied in parts (store.h:
 * ps_store_step_add, ps_store_step_commit): as a part of the step becomes
 * ready its blocks are run through the optimizer into ONE write
 * transaction, kept open until the step's last blocks, its records and
 * its count go in and it commits — the same bits and the same
 * all-or-nothing as one ps_store_apply of the whole step, while the apply
 * of the first parts overlaps the arrival of the last. The values a part
 * made can be read before the commit (ps_store_step_read), for an answer
 * that need not wait for the step's last part.
 *
 * LMDB's write transaction belongs to the thread that began it, so the
 * open step lives on a thread of the store's own (started at the first
 * add, stopped by ps_store_close): callers queue work and return (an add)
 * or wait (the commit, a drain). The thread holds the store's writer lock
 * from the step's first add to its commit. An add that fails (a full map)
 * aborts the open transaction; the commit then applies every block of the
 * step anew with ps_store_apply, which grows the map.
 */
#include "store_impl.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "optimizer.h"

/* What the thread is asked: a part's blocks to add, the commit, or a read
 * of applied values (the caller's, on its stack: answered, not freed). */
struct step_job {
    const struct hc_optim_conf *c;
    struct ps_update *u;        /* (n) a copy of the caller's */
    size_t n;
    int commit;
    const struct ps_record *recs;   /* commit: (n_recs) */
    size_t n_recs;
    struct ps_read *reads;      /* a read: (n) */
    int done, rv;               /* a read's outcome */
    uint64_t at;
    char err[256];
    struct step_job *next;
};

struct store_step {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* work queued, or the thread went idle */
    struct step_job *head, **tail;
    int busy, stop;
    /* The open step, the thread's: */
    MDB_txn *txn;
    uint64_t step;              /* the step it applies at */
    uint64_t pages;             /* pages its applies may dirty, estimated */
    int failed;                 /* an add failed: the commit redoes it all */
    struct ps_update *all;      /* (n_all) every block given this step */
    size_t n_all, cap_all;
    /* The commit's outcome, for the caller waiting on it: */
    int done, rv;
    char err[512];
    uint64_t new_step;
};

/* Begin the step's write transaction; HC_OK leaves wmu and maplock held. */
static int step_open(struct ps_store *s, struct store_step *st)
{
    int rv;

    pthread_mutex_lock(&s->wmu);
    if ((rv = store_reserve_disk(s, "applying a step")) == HC_OK &&
        (rv = store_txn_begin(s, 0, &st->txn)) == HC_OK &&
        (rv = store_meta_fixed(s, st->txn, "step", &st->step,
                               sizeof st->step)) != HC_OK) {
        mdb_txn_abort(st->txn);
        st->txn = NULL;
        pthread_rwlock_unlock(&s->maplock);
    }
    st->pages = 16;
    if (rv != HC_OK)
        pthread_mutex_unlock(&s->wmu);
    return rv;
}

static void step_abort(struct ps_store *s, struct store_step *st)
{
    if (!st->txn)
        return;
    mdb_txn_abort(st->txn);
    st->txn = NULL;
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_unlock(&s->wmu);
}

/* A part's blocks into the open step (opened now if need be). */
static int step_add(struct ps_store *s, struct store_step *st,
                    const struct hc_optim_conf *c, const struct ps_update *u,
                    size_t n)
{
    struct ps_apply g = {.u = u, .n = n, .uncounted = 1};
    int rv;

    if (!st->txn && (rv = step_open(s, st)) != HC_OK)
        return rv;
    if ((rv = store_apply_check(s, c, u, n, NULL, 0)) == HC_OK) {
        for (size_t i = 0; i < n; i++) {
            uint64_t bytes = HDR_SIZE + (uint64_t)u[i].length * 4 + 16;

            st->pages += (uint64_t)(1 + ps_optim_slots(c)) *
                         ((bytes + s->psize - 1) / s->psize + 8);
        }
        rv = store_apply_blocks(s, st->txn, c, st->step, &g,
                                st->pages <= s->direct_max_pages);
    }
    if (rv != HC_OK)
        step_abort(s, st);
    return rv;
}

/* The last blocks, the records and the count; commit. */
static int step_commit(struct ps_store *s, struct store_step *st,
                       const struct step_job *j)
{
    uint64_t step;
    int rv, rc;

    if (st->failed) {
        /* An add failed: every block of the step again, in one apply. */
        return ps_store_apply(s, j->c, st->all, st->n_all, j->recs,
                              j->n_recs, &st->new_step);
    }
    if ((rv = step_add(s, st, j->c, j->u, j->n)) != HC_OK)
        return rv == HC_ERR_MAPFULL
                   ? ps_store_apply(s, j->c, st->all, st->n_all, j->recs,
                                    j->n_recs, &st->new_step)
                   : rv;
    if ((rv = store_apply_check(s, j->c, NULL, 0, j->recs, j->n_recs)) !=
        HC_OK) {
        step_abort(s, st);
        return rv;
    }
    step = st->step + 1;
    {
        int held;   /* the step counts anyway: its blocks were added */

        rv = store_rows_apply_held(s, st->txn, j->c, st->step, -1,
                                   &held);
        if (rv == HC_ERR_MAPFULL) {     /* the whole step in one apply */
            step_abort(s, st);
            return ps_store_apply(s, j->c, st->all, st->n_all, j->recs,
                                  j->n_recs, &st->new_step);
        }
    }
    for (size_t i = 0; i < j->n_recs && rv == HC_OK; i++)
        rv = store_record_put(s, st->txn, &j->recs[i], step);
    if (rv == HC_OK)
        rv = store_meta_put_u64(s, st->txn, "step", step);
    if (rv != HC_OK) {
        step_abort(s, st);
        return rv;
    }
    rc = mdb_txn_commit(st->txn);
    st->txn = NULL;
    pthread_rwlock_unlock(&s->maplock);
    if (rc != 0) {
        rv = store_lmdb_err(s, rc, "committing a step");
        pthread_mutex_unlock(&s->wmu);
        return rv;
    }
    atomic_store(&s->step, step);
    st->new_step = step;
    rv = store_maybe_sync(s);
    pthread_mutex_unlock(&s->wmu);
    return rv;
}

/* A read of the open step's values (or, with none open, the committed
 * ones), its outcome into j. */
static void step_read(struct ps_store *s, struct store_step *st,
                      struct step_job *j)
{
    if (st->txn && !st->failed) {
        j->rv = store_read_in(s, st->txn, j->reads, j->n);
        j->at = st->step + 1;
    } else {
        j->rv = ps_store_read(s, j->reads, j->n, &j->at);
    }
    if (j->rv != HC_OK)
        snprintf(j->err, sizeof j->err, "%s", hc_err_msg());
}

static void *step_main(void *arg)
{
    struct ps_store *s = arg;
    struct store_step *st = s->stepper;

    pthread_mutex_lock(&st->mu);
    for (;;) {
        struct step_job *j;

        while (!st->head && !st->stop)
            pthread_cond_wait(&st->cv, &st->mu);
        if (!st->head)
            break;
        j = st->head;
        st->head = j->next;
        if (!st->head)
            st->tail = &st->head;
        st->busy = 1;
        pthread_mutex_unlock(&st->mu);
        if (j->reads) {
            step_read(s, st, j);
            pthread_mutex_lock(&st->mu);
            j->done = 1;
            st->busy = 0;
            pthread_cond_broadcast(&st->cv);
            continue;
        }
        if (!j->commit) {
            if (!st->failed && step_add(s, st, j->c, j->u, j->n) != HC_OK)
                st->failed = 1;
        } else {
            int rv = step_commit(s, st, j);

            pthread_mutex_lock(&st->mu);
            st->rv = rv;
            snprintf(st->err, sizeof st->err, "%s",
                     rv == HC_OK ? "" : hc_err_msg());
            st->done = 1;
            st->failed = 0;
            st->n_all = 0;
            pthread_mutex_unlock(&st->mu);
        }
        free(j->u);
        free(j);
        pthread_mutex_lock(&st->mu);
        st->busy = 0;
        pthread_cond_broadcast(&st->cv);
    }
    step_abort(s, st);      /* stopped with a step open: nothing applied */
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* The thread, started at the first use. */
static int stepper(struct ps_store *s, struct store_step **out)
{
    struct store_step *st = s->stepper;

    if (!st) {
        if (!(st = calloc(1, sizeof *st)))
            return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for the "
                              "step thread", s->dir);
        pthread_mutex_init(&st->mu, NULL);
        pthread_cond_init(&st->cv, NULL);
        st->tail = &st->head;
        s->stepper = st;
        if (pthread_create(&st->th, NULL, step_main, s) != 0) {
            s->stepper = NULL;
            pthread_mutex_destroy(&st->mu);
            pthread_cond_destroy(&st->cv);
            free(st);
            return hc_err_set(HC_ERR_NOMEM, "store %s: cannot start the step "
                              "thread", s->dir);
        }
    }
    *out = st;
    return HC_OK;
}

/* Queue a job for u[0 .. n) (copied; the commit's with its records), with
 * st->mu held; its blocks are also kept for a commit that redoes it all.
 * HC_OK, or HC_ERR_NOMEM with nothing queued. */
static int enqueue(struct ps_store *s, struct store_step *st,
                   const struct hc_optim_conf *c, const struct ps_update *u,
                   size_t n, const struct ps_record *recs, size_t n_recs,
                   int commit)
{
    struct step_job *j = calloc(1, sizeof *j);

    if (j)
        j->u = malloc((n + 1) * sizeof *u);
    if (j && j->u && st->n_all + n > st->cap_all) {
        size_t cap = st->cap_all ? 2 * st->cap_all : 64;
        struct ps_update *a;

        while (cap < st->n_all + n)
            cap *= 2;
        if ((a = realloc(st->all, cap * sizeof *a)) != NULL) {
            st->all = a;
            st->cap_all = cap;
        }
    }
    if (!j || !j->u || st->n_all + n > st->cap_all) {
        if (j)
            free(j->u);
        free(j);
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for a "
                          "step's blocks", s->dir);
    }
    if (n) {
        memcpy(j->u, u, n * sizeof *u);
        memcpy(st->all + st->n_all, u, n * sizeof *u);
    }
    j->c = c;
    j->n = n;
    st->n_all += n;
    j->commit = commit;
    j->recs = recs;
    j->n_recs = n_recs;
    *st->tail = j;
    st->tail = &j->next;
    pthread_cond_broadcast(&st->cv);
    return HC_OK;
}

int ps_store_step_add(struct ps_store *s, const struct hc_optim_conf *c,
                      const struct ps_update *u, size_t n)
{
    struct store_step *st = NULL;
    int rv;

    if (s->read_only || !atomic_load(&s->initialised))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: no variables to apply "
                          "a step to", s->dir);
    if (n == 0)
        return HC_OK;
    if ((rv = stepper(s, &st)) != HC_OK)
        return rv;
    pthread_mutex_lock(&st->mu);
    rv = enqueue(s, st, c, u, n, NULL, 0, 0);
    pthread_mutex_unlock(&st->mu);
    return rv;
}

void ps_store_step_drain(struct ps_store *s)
{
    struct store_step *st = s->stepper;

    if (!st)
        return;
    pthread_mutex_lock(&st->mu);
    while (st->head || st->busy)
        pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
}

int ps_store_step_commit(struct ps_store *s, const struct hc_optim_conf *c,
                         const struct ps_update *u, size_t n,
                         const struct ps_record *recs, size_t n_recs,
                         uint64_t *new_step)
{
    struct store_step *st = s->stepper;
    int rv;

    if (!st)
        return ps_store_apply(s, c, u, n, recs, n_recs, new_step);
    pthread_mutex_lock(&st->mu);
    if (st->n_all == 0) {       /* no part added: one apply, here */
        pthread_mutex_unlock(&st->mu);
        return ps_store_apply(s, c, u, n, recs, n_recs, new_step);
    }
    /* Parts were added: the rest and the commit on the step's thread. */
    st->done = 0;
    if ((rv = enqueue(s, st, c, u, n, recs, n_recs, 1)) != HC_OK) {
        pthread_mutex_unlock(&st->mu);
        return rv;
    }
    while (!st->done)
        pthread_cond_wait(&st->cv, &st->mu);
    rv = st->rv;
    if (rv != HC_OK)
        hc_err_set(rv, "%s", st->err);
    else if (new_step)
        *new_step = st->new_step;
    pthread_mutex_unlock(&st->mu);
    return rv;
}

int ps_store_step_read(struct ps_store *s, struct ps_read *r, size_t n,
                       uint64_t *step)
{
    struct store_step *st = s->stepper;
    struct step_job j = { .reads = r, .n = n };

    if (!st)
        return ps_store_read(s, r, n, step);
    pthread_mutex_lock(&st->mu);
    if (st->stop) {             /* closing: no step to read from */
        pthread_mutex_unlock(&st->mu);
        return ps_store_read(s, r, n, step);
    }
    *st->tail = &j;
    st->tail = &j.next;
    pthread_cond_broadcast(&st->cv);
    while (!j.done)
        pthread_cond_wait(&st->cv, &st->mu);
    pthread_mutex_unlock(&st->mu);
    if (j.rv != HC_OK)
        return hc_err_set(j.rv, "%s", j.err);
    *step = j.at;
    return HC_OK;
}

void store_step_stop(struct ps_store *s)
{
    struct store_step *st = s->stepper;

    if (!st)
        return;
    pthread_mutex_lock(&st->mu);
    st->stop = 1;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->th, NULL);
    while (st->head) {
        struct step_job *j = st->head;

        st->head = j->next;
        free(j->u);
        free(j);
    }
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->cv);
    free(st->all);
    free(st);
    s->stepper = NULL;
}
