/*
 * sync.c — the consistency modes (see sync.h).
 *
 * Shares of a synchronous step are fixed when the step starts, from the
 * speeds reported so far: worker k gets round(G · v_k / Σv) samples by the
 * largest-remainder rule (each at least one when G allows), laid out in
 * worker order, so every worker computes the same slice boundaries for the
 * same G. A step's assignment is recomputed lazily for each new G (the last
 * step of an epoch is shorter).
 */
#include "sync.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

struct wstate {
    int live;
    uint64_t from;              /* first version it takes part in */
    int pushed;                 /* sync: contributed to the current step */
    uint64_t clock;             /* pushes accepted */
    float speed;                /* samples/s, last reported */
    uint64_t late;
    uint32_t share, offset;     /* sync: of the current assignment */
};

struct ps_sync {
    struct ps_sync_conf c;
    int n;                      /* entries in w */
    struct wstate *w;
    uint64_t step_samples;      /* sync: samples accumulated this step */
    int step_pushes;
    uint32_t assigned_for;      /* G of the current assignment, 0 = none */
    uint32_t job_batch;         /* sync: the job's full global batch */
    struct ps_sync_stats st;
};

static int grow(struct ps_sync *s, int worker)
{
    struct wstate *w;

    if (worker < s->n)
        return 0;
    w = realloc(s->w, (size_t)(worker + 1) * sizeof *w);
    if (!w)
        return -1;
    memset(w + s->n, 0, (size_t)(worker + 1 - s->n) * sizeof *w);
    s->w = w;
    s->n = worker + 1;
    return 0;
}

int ps_sync_new(struct ps_sync **out, const struct ps_sync_conf *c)
{
    struct ps_sync *s = calloc(1, sizeof *s);

    *out = NULL;
    if (!s || (c->n_workers > 0 && grow(s, c->n_workers - 1))) {
        free(s);
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    }
    s->c = *c;
    *out = s;
    return HC_OK;
}

void ps_sync_free(struct ps_sync *s)
{
    if (!s)
        return;
    free(s->w);
    free(s);
}

void ps_sync_member(struct ps_sync *s, int worker, int live)
{
    if (worker < 0 || grow(s, worker))
        return;
    /* A gradient already pushed stays in the step: it was computed for it. */
    s->w[worker].live = live;
    if (live)
        s->w[worker].from = 0;
}

static uint64_t min_live_clock(const struct ps_sync *s);

void ps_sync_join(struct ps_sync *s, int worker, uint64_t version)
{
    uint64_t lo;

    if (worker < 0 || grow(s, worker) || s->w[worker].live)
        return;
    /* ssp: a newcomer starts level with the slowest, not at 0, or it would
     * hold everyone back until it caught up. */
    lo = min_live_clock(s);
    if (s->c.mode == HC_MODE_SSP && lo != UINT64_MAX && s->w[worker].clock < lo)
        s->w[worker].clock = lo;
    s->w[worker].live = 1;
    s->w[worker].from = version + 1;
    s->w[worker].pushed = 0;
}

uint32_t ps_sync_job_batch(struct ps_sync *s, uint32_t proposed)
{
    if (!s->job_batch)
        s->job_batch = proposed;
    return s->job_batch;
}

/* Takes part in the step at `version`. */
static int takes_part(const struct wstate *w, uint64_t version)
{
    return w->live && w->from <= version;
}

static int live_count(const struct ps_sync *s, uint64_t version)
{
    int i, n = 0;

    for (i = 0; i < s->n; i++)
        n += takes_part(&s->w[i], version);
    return n;
}

enum ps_push_verdict ps_sync_push(struct ps_sync *s, int worker,
                                  uint64_t base_version, uint64_t version,
                                  uint32_t samples, float samples_per_s)
{
    struct wstate *w;

    if (worker < 0 || grow(s, worker)) {
        hc_err_set(HC_ERR_NOMEM, "out of memory");
        return PS_PUSH_REFUSE;
    }
    w = &s->w[worker];
    if (samples_per_s > 0 && isfinite(samples_per_s))
        w->speed = samples_per_s;
    switch (s->c.mode) {
    case HC_MODE_SYNC:
        if (base_version < version) {
            w->late++;
            s->st.late++;
            return PS_PUSH_LATE;
        }
        if (base_version > version) {
            hc_err_set(HC_ERR_STALE, "gradient computed at version %llu but "
                       "this shard is at %llu: pull first",
                       (unsigned long long)base_version,
                       (unsigned long long)version);
            return PS_PUSH_REFUSE;
        }
        if (w->pushed) {
            hc_err_set(HC_ERR_STALE, "worker:%d already pushed for step %llu",
                       worker, (unsigned long long)version);
            return PS_PUSH_REFUSE;
        }
        w->pushed = 1;
        w->clock++;
        s->step_pushes++;
        s->step_samples += samples;
        return PS_PUSH_ACCUMULATE;
    case HC_MODE_ASYNC:
        if (s->c.max_staleness && base_version + s->c.max_staleness < version) {
            s->st.stale++;
            hc_err_set(HC_ERR_STALE, "gradient computed at version %llu is %llu "
                       "versions old; the bound is %llu (--max-staleness)",
                       (unsigned long long)base_version,
                       (unsigned long long)(version - base_version),
                       (unsigned long long)s->c.max_staleness);
            return PS_PUSH_REFUSE;
        }
        w->clock++;
        return PS_PUSH_APPLY;
    default:
        w->clock++;
        return PS_PUSH_APPLY;
    }
}

int ps_sync_step_ready(const struct ps_sync *s, uint64_t version,
                       uint64_t *total)
{
    int i, need = 0, missing = 0;

    for (i = 0; i < s->n; i++) {
        if (takes_part(&s->w[i], version)) {
            need++;
            missing += !s->w[i].pushed;
        }
    }
    *total = s->step_samples;
    if (s->step_pushes == 0)
        return 0;
    /* Every live worker, less the backups, must have pushed. */
    return missing <= s->c.backup || need == 0;
}

void ps_sync_step_done(struct ps_sync *s)
{
    int i;

    for (i = 0; i < s->n; i++)
        s->w[i].pushed = 0;
    s->step_pushes = 0;
    s->step_samples = 0;
    s->assigned_for = 0;
}

static uint64_t min_live_clock(const struct ps_sync *s)
{
    uint64_t m = UINT64_MAX;
    int i;

    for (i = 0; i < s->n; i++)
        if (s->w[i].live && s->w[i].clock < m)
            m = s->w[i].clock;
    return m;
}

int ps_sync_pull_ready(struct ps_sync *s, int worker, uint64_t min_version,
                       uint64_t clock, uint64_t version)
{
    uint64_t lo;

    switch (s->c.mode) {
    case HC_MODE_SYNC:
        return version >= min_version &&
               (worker < 0 || worker >= s->n || version >= s->w[worker].from);
    case HC_MODE_SSP:
        lo = min_live_clock(s);
        if (lo == UINT64_MAX || clock <= lo)
            return 1;
        if (clock - lo > (uint64_t)s->c.staleness)
            return 0;
        if (clock - lo > s->st.max_ahead)
            s->st.max_ahead = (uint32_t)(clock - lo);
        (void)worker;
        return 1;
    default:
        return 1;
    }
}

/* Shares of G among the workers of the step at `version`, by speed
 * (largest remainder). */
static void assign(struct ps_sync *s, uint32_t G, uint64_t version)
{
    double sum = 0, want[64], *wp = want;
    uint32_t given = 0, off = 0;
    int i, n = live_count(s, version), known = 0;

    if (s->n > 64 && !(wp = calloc((size_t)s->n, sizeof *wp)))
        return;
    for (i = 0; i < s->n; i++) {
        s->w[i].share = 0;
        if (takes_part(&s->w[i], version) && s->w[i].speed > 0)
            known++;
    }
    for (i = 0; i < s->n; i++) {
        double v = 1.0;

        if (!takes_part(&s->w[i], version))
            continue;
        /* Until every live worker has reported, split equally. */
        if (s->c.balance && known == n)
            v = s->w[i].speed;
        wp[i] = v;
        sum += v;
    }
    for (i = 0; i < s->n && n; i++) {
        if (!takes_part(&s->w[i], version))
            continue;
        wp[i] = G * wp[i] / sum;
        s->w[i].share = (uint32_t)wp[i];
        if (s->w[i].share == 0 && G >= (uint32_t)n)
            s->w[i].share = 1;
        given += s->w[i].share;
    }
    while (given < G && n) {      /* largest remainder first, ties by index */
        int best = -1;
        double br = -1e300;

        for (i = 0; i < s->n; i++) {
            double r;

            if (!takes_part(&s->w[i], version))
                continue;
            r = wp[i] - s->w[i].share;
            if (r > br) {
                br = r;
                best = i;
            }
        }
        s->w[best].share++;
        wp[best] -= 1.0;          /* do not pick it again first */
        given++;
    }
    while (given > G) {           /* minimums overshot: take from the largest */
        int best = -1;

        for (i = 0; i < s->n; i++)
            if (takes_part(&s->w[i], version) && s->w[i].share > 1 &&
                (best < 0 || s->w[i].share > s->w[best].share))
                best = i;
        if (best < 0)
            break;
        s->w[best].share--;
        given--;
    }
    for (i = 0; i < s->n; i++) {
        s->w[i].offset = off;
        off += s->w[i].share;
    }
    s->assigned_for = G;
    if (wp != want)
        free(wp);
}

void ps_sync_assign(struct ps_sync *s, int worker, uint32_t global_batch,
                    uint64_t version, uint32_t *offset, uint32_t *count)
{
    if (worker < 0 || worker >= s->n || !takes_part(&s->w[worker], version)) {
        *offset = *count = 0;
        return;
    }
    if (s->assigned_for != global_batch)
        assign(s, global_batch, version);
    *offset = s->w[worker].offset;
    *count = s->w[worker].share;
}

void ps_sync_stats(const struct ps_sync *s, struct ps_sync_stats *st)
{
    *st = s->st;
}

void ps_sync_worker(const struct ps_sync *s, int worker, uint64_t *clock,
                    float *samples_per_s, uint32_t *share, uint64_t *late)
{
    if (worker < 0 || worker >= s->n) {
        *clock = 0;
        *samples_per_s = 0;
        *share = 0;
        *late = 0;
        return;
    }
    *clock = s->w[worker].clock;
    *samples_per_s = s->w[worker].speed;
    *share = s->w[worker].share;
    *late = s->w[worker].late;
}
