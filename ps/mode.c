/*
 * mode.c — the consistency modes (see mode.h).
 *
 * Shares of a synchronous step are fixed when the step starts, from what
 * is known so far of each worker k: its speed v_k (samples/s of its own
 * compute, reported with every push) and its fixed time per step lag_k
 * (measured here: from answering its pull to its push arriving, less its
 * slice at its speed — the round trip, slicing, encoding). Worker k gets
 * n_k = v_k (T − lag_k) samples, T chosen so that Σ n_k = G — every worker
 * then finishes at T — rounded by the largest-remainder rule (each at least
 * one when G allows), laid out in worker order, so every worker computes
 * the same slice boundaries for the same G. With equal lags this is
 * n_k = G · v_k / Σv. A step's assignment is recomputed lazily for each new
 * G (the last step of an epoch is shorter).
 */
#include "mode.h"

#include <math.h>
#include <stdio.h>
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
    /* sync: the worker's fixed time per step (s) — its round trip and
     * whatever it does besides computing its slice — measured here as the
     * time from answering its pull to its push arriving, less share/speed. */
    double answered_at;         /* when its current slice went out, 0: none */
    uint32_t answered_share;    /* that slice's samples */
    double lag;                 /* moving average; valid when lag_n > 0 */
    uint32_t lag_n;
};

struct ps_mode {
    struct ps_mode_conf c;
    int n;                      /* entries in w */
    struct wstate *w;
    uint64_t step_samples;      /* sync: samples accumulated this step */
    int step_pushes;
    double step_opened;         /* sync: when its first push arrived */
    uint32_t assigned_for;      /* G of the current assignment, 0 = none */
    uint32_t job_batch;         /* sync: the job's full global batch */
    struct ps_mode_stats st;
};

static int grow(struct ps_mode *s, int worker)
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

int ps_mode_new(struct ps_mode **out, const struct ps_mode_conf *c)
{
    struct ps_mode *s = calloc(1, sizeof *s);

    *out = NULL;
    if (!s || (c->n_workers > 0 && grow(s, c->n_workers - 1))) {
        free(s);
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    }
    s->c = *c;
    *out = s;
    return HC_OK;
}

void ps_mode_free(struct ps_mode *s)
{
    if (!s)
        return;
    free(s->w);
    free(s);
}

int ps_mode_holds_pulls(const struct ps_mode *s)
{
    return s->c.mode != HC_MODE_ASYNC;
}

int ps_mode_in_steps(const struct ps_mode *s)
{
    return s->c.mode == HC_MODE_SYNC;
}

int ps_mode_lends_messages(const struct ps_mode *s)
{
    return s->c.mode == HC_MODE_SYNC;
}

void ps_mode_member(struct ps_mode *s, int worker, int live)
{
    if (worker < 0 || grow(s, worker))
        return;
    /* A gradient already pushed stays in the step: it was computed for it. */
    s->w[worker].live = live;
    if (live)
        s->w[worker].from = 0;
}

static uint64_t min_live_clock(const struct ps_mode *s);

uint64_t ps_mode_join(struct ps_mode *s, int worker, uint64_t version)
{
    uint64_t lo;

    if (worker < 0 || grow(s, worker))
        return version + 1;
    if (s->w[worker].live)
        return s->w[worker].from;
    /* ssp: a newcomer starts level with the slowest, not at 0, or it would
     * hold everyone back until it caught up. */
    lo = min_live_clock(s);
    if (s->c.mode == HC_MODE_SSP && lo != UINT64_MAX && s->w[worker].clock < lo)
        s->w[worker].clock = lo;
    s->w[worker].live = 1;
    /* In sync, a step nobody has pushed to nor been given a slice of can
     * still take it in; otherwise it joins at the next step boundary. (A
     * lone worker coming back must not wait for a step no one else will
     * finish.) */
    s->w[worker].from = s->c.mode == HC_MODE_SYNC && s->step_pushes == 0 &&
                                s->assigned_for == 0
                            ? version : version + 1;
    s->w[worker].pushed = 0;
    return s->w[worker].from;
}

uint64_t ps_mode_from(const struct ps_mode *s, int worker)
{
    if (worker < 0 || worker >= s->n || !s->w[worker].live)
        return UINT64_MAX;
    return s->w[worker].from;
}

void ps_mode_start_at(struct ps_mode *s, int worker, uint64_t version)
{
    if (worker < 0 || worker >= s->n || !s->w[worker].live ||
        s->w[worker].pushed || version <= s->w[worker].from)
        return;
    s->w[worker].from = version;
}

uint32_t ps_mode_job_batch(struct ps_mode *s, uint32_t proposed)
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

static int live_count(const struct ps_mode *s, uint64_t version)
{
    int i, n = 0;

    for (i = 0; i < s->n; i++)
        n += takes_part(&s->w[i], version);
    return n;
}

/* A push of the current step arrived at `now`: learn the worker's lag. */
static void learn_lag(struct wstate *w, double now)
{
    double cycle, lag;

    if (w->answered_at <= 0 || !w->answered_share || !(w->speed > 0) ||
        now < w->answered_at)
        return;
    cycle = now - w->answered_at;
    lag = cycle - (double)w->answered_share / w->speed;
    if (lag < 0)
        lag = 0;
    w->lag = w->lag_n ? 0.8 * w->lag + 0.2 * lag : lag;
    w->lag_n++;
    w->answered_at = 0;
}

enum ps_push_verdict ps_mode_push(struct ps_mode *s, int worker,
                                  uint64_t base_version, uint64_t version,
                                  uint32_t samples, float samples_per_s,
                                  double now)
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
        learn_lag(w, now);
        if (s->step_pushes == 0)
            s->step_opened = now;
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

int ps_mode_step_ready(const struct ps_mode *s, uint64_t version,
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

int ps_mode_missing(const struct ps_mode *s, uint64_t version, int *workers,
                    int cap)
{
    int i, n = 0;

    if (s->step_pushes == 0)
        return 0;
    for (i = 0; i < s->n; i++)
        if (takes_part(&s->w[i], version) && !s->w[i].pushed) {
            if (n < cap)
                workers[n] = i;
            n++;
        }
    return n;
}

void ps_mode_step_done(struct ps_mode *s)
{
    int i;

    for (i = 0; i < s->n; i++)
        s->w[i].pushed = 0;
    s->step_pushes = 0;
    s->step_samples = 0;
    s->assigned_for = 0;
}

static uint64_t min_live_clock(const struct ps_mode *s)
{
    uint64_t m = UINT64_MAX;
    int i;

    for (i = 0; i < s->n; i++)
        if (s->w[i].live && s->w[i].clock < m)
            m = s->w[i].clock;
    return m;
}

int ps_mode_pull_ready(struct ps_mode *s, int worker, uint64_t min_version,
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

/*
 * What each worker of the step should compute, in samples, before rounding:
 * the split that makes every worker finish at the same moment T, each
 * taking lag_k + n_k / v_k (its fixed time per step, then its slice at its
 * speed). Σ n_k = G gives T = (G + Σ v_k lag_k) / Σ v_k over the workers
 * with lag_k < T; one whose fixed time alone is past T gets nothing here
 * (the minimum of one sample comes later). Equal shares with balance off,
 * or until every worker has reported a speed.
 */
static void ideal_shares(const struct ps_mode *s, uint32_t G, uint64_t version,
                         double *want)
{
    int i, n = 0, known = 0, changed;
    double sv, svl, T = 0;

    for (i = 0; i < s->n; i++) {
        want[i] = -1;           /* not taking part */
        if (!takes_part(&s->w[i], version))
            continue;
        n++;
        known += s->w[i].speed > 0;
        want[i] = 0;
    }
    if (!n)
        return;
    if (!s->c.balance || known < n) {
        for (i = 0; i < s->n; i++)
            if (want[i] >= 0)
                want[i] = (double)G / n;
        return;
    }
    for (i = 0; i < s->n; i++)
        if (want[i] >= 0)
            want[i] = 1;        /* 1: in the active set */
    do {
        sv = svl = 0;
        for (i = 0; i < s->n; i++) {
            if (want[i] == 1) {
                double lag = s->w[i].lag_n ? s->w[i].lag : 0;

                sv += s->w[i].speed;
                svl += s->w[i].speed * lag;
            }
        }
        T = (G + svl) / sv;
        changed = 0;
        for (i = 0; i < s->n; i++) {
            if (want[i] == 1 && s->w[i].lag_n && s->w[i].lag >= T) {
                want[i] = 0;    /* too slow to help this step */
                changed = 1;
            }
        }
    } while (changed);
    for (i = 0; i < s->n; i++)
        if (want[i] == 1)
            want[i] = s->w[i].speed * (T - (s->w[i].lag_n ? s->w[i].lag : 0));
}

/* Shares of G among the workers of the step at `version` (ideal_shares,
 * rounded by largest remainder; each at least one sample when G allows). */
static void assign(struct ps_mode *s, uint32_t G, uint64_t version)
{
    double want[64], *wp = want;
    uint32_t given = 0, off = 0;
    int i, n = live_count(s, version);

    if (s->n > 64 && !(wp = calloc((size_t)s->n, sizeof *wp)))
        return;
    ideal_shares(s, G, version, wp);
    for (i = 0; i < s->n; i++) {
        s->w[i].share = 0;
        if (wp[i] < 0)
            continue;
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

            if (wp[i] < 0)
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

void ps_mode_assign(struct ps_mode *s, int worker, uint32_t global_batch,
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

void ps_mode_answered(struct ps_mode *s, int worker, uint32_t count,
                      double now)
{
    if (worker < 0 || worker >= s->n)
        return;
    s->w[worker].answered_at = count ? now : 0;
    s->w[worker].answered_share = count;
}

int ps_mode_waiting_for(const struct ps_mode *s, uint64_t version, char *buf,
                        size_t len, double *since)
{
    size_t at = 0;
    int i, n = 0;

    if (len)
        buf[0] = '\0';
    *since = s->step_opened;
    if (s->c.mode != HC_MODE_SYNC || s->step_pushes == 0)
        return 0;
    for (i = 0; i < s->n; i++) {
        if (!takes_part(&s->w[i], version) || s->w[i].pushed)
            continue;
        if (at < len) {
            int k = snprintf(buf + at, len - at, "%sworker:%d", n ? ", " : "",
                             i);

            at += k > 0 ? (size_t)k : 0;
        }
        n++;
    }
    return n;
}

void ps_mode_stats(const struct ps_mode *s, struct ps_mode_stats *st)
{
    *st = s->st;
}

void ps_mode_worker(const struct ps_mode *s, int worker, uint64_t *clock,
                    float *samples_per_s, uint32_t *share, uint64_t *late,
                    float *lag_ms)
{
    if (worker < 0 || worker >= s->n) {
        *clock = 0;
        *samples_per_s = 0;
        *share = 0;
        *late = 0;
        *lag_ms = 0;
        return;
    }
    *lag_ms = s->w[worker].lag_n ? (float)(1e3 * s->w[worker].lag) : 0.0f;
    *clock = s->w[worker].clock;
    *samples_per_s = s->w[worker].speed;
    *share = s->w[worker].share;
    *late = s->w[worker].late;
}

int ps_mode_expected(const struct ps_mode *s, uint64_t version)
{
    if (s->c.mode != HC_MODE_SYNC || s->c.backup > 0)
        return 0;
    return live_count(s, version);
}
