/*
 * test_mode.c — the consistency modes' bookkeeping (ps/mode.c) without a
 * network: how a synchronous step's global batch is shared (equal until
 * every worker has reported a speed or with balance off; by speed; by
 * speed and each worker's measured fixed time per step), that shares
 * always tile the batch, when a step is complete (with and without backup
 * workers), late and refused pushes, ssp's bound, which step a worker
 * that comes back takes part in, and who sits a step out (a share that does
 * not pay for its round trip: none, not waited for, tried again).
 */
#include "cu.h"
#include "ps/mode.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static struct ps_mode *make(int n_workers, enum hc_mode mode, int balance,
                            int backup)
{
    struct ps_mode_conf c = { 0 };
    struct ps_mode *s = NULL;
    int i;

    c.mode = mode;
    c.balance = balance;
    c.backup = backup;
    c.staleness = 2;
    c.n_workers = n_workers;
    CU_ASSERT_FATAL(ps_mode_new(&s, &c) == 0);
    for (i = 0; i < n_workers; i++) {
        ps_mode_member(s, i, 1);
        ps_mode_join(s, i, 0);
    }
    return s;
}

/* Shares of G at version for n workers; checks they tile [0, G). */
static void shares(struct ps_mode *s, int n, uint32_t G, uint64_t version,
                   uint32_t *count)
{
    uint32_t off, expect = 0;
    int i;

    for (i = 0; i < n; i++) {
        ps_mode_assign(s, i, G, version, &off, &count[i]);
        CU_ASSERT_EQUAL(off, expect);
        expect += count[i];
    }
    CU_ASSERT_EQUAL(expect, G);
}

/* One synchronous step: every worker is answered its slice at t, pushes
 * after its fixed time lag[i] plus its slice at speed[i]; the step is
 * applied. Returns the step's end (the last push). */
static double step(struct ps_mode *s, int n, uint64_t version, uint32_t G,
                   double t, const float *speed, const double *lag)
{
    uint32_t count[8], off;
    uint64_t total;
    double end = t;
    int i;

    for (i = 0; i < n; i++) {
        ps_mode_assign(s, i, G, version, &off, &count[i]);
        ps_mode_answered(s, i, count[i], t);
    }
    for (i = 0; i < n; i++) {
        double at = t + lag[i] + count[i] / speed[i];

        CU_ASSERT_EQUAL(ps_mode_push(s, i, version, version, count[i],
                                     speed[i], at),
                        PS_PUSH_ACCUMULATE);
        if (at > end)
            end = at;
    }
    CU_ASSERT(ps_mode_step_ready(s, version, &total));
    CU_ASSERT_EQUAL(total, G);
    ps_mode_step_done(s);
    return end;
}

/* Shares of 64 for 2 workers at step 20, after 20 steps with these speeds
 * and fixed times (the lag average settles). */
static void settled_shares(const float *speed, const double *lag, uint32_t *c)
{
    struct ps_mode *s = make(2, HC_MODE_SYNC, 1, 0);
    double t = 1.0;
    int i;

    for (i = 0; i < 20; i++)
        t = step(s, 2, (uint64_t)i, 64, t, speed, lag) + 0.001;
    shares(s, 2, 64, 20, c);
    ps_mode_free(s);
}

static void test_equal_until_known(void)
{
    struct ps_mode *s = make(3, HC_MODE_SYNC, 1, 0);
    uint32_t c[3];

    shares(s, 3, 64, 0, c);
    CU_ASSERT(c[0] >= 21 && c[0] <= 22 && c[1] >= 21 && c[1] <= 22 &&
              c[2] >= 21 && c[2] <= 22);
    ps_mode_free(s);
}

static void test_by_speed(void)
{
    struct ps_mode *s = make(2, HC_MODE_SYNC, 1, 0);
    const float speed[2] = { 3000, 1000 };
    const double lag[2] = { 0, 0 };
    uint32_t c[2];

    step(s, 2, 0, 64, 1.0, speed, lag);   /* learns the speeds */
    shares(s, 2, 64, 1, c);
    CU_ASSERT_EQUAL(c[0], 48);            /* 64 · 3/4 */
    CU_ASSERT_EQUAL(c[1], 16);
    ps_mode_free(s);

    s = make(2, HC_MODE_SYNC, 0, 0);      /* --balance off */
    step(s, 2, 0, 64, 1.0, speed, lag);
    shares(s, 2, 64, 1, c);
    CU_ASSERT_EQUAL(c[0], 32);
    CU_ASSERT_EQUAL(c[1], 32);
    ps_mode_free(s);
}

/* A worker with a longer fixed time per step (a farther machine, a later
 * answer) gets less, so that both finish together: with speeds 3000 and
 * 1000 samples/s and lags 0 and 4 ms, T = (64 + 1000 · 0.004) / 4000 =
 * 17 ms: 51 and 13 samples, where speed alone gives 48 and 16. */
static void test_by_speed_and_lag(void)
{
    const float speed[2] = { 3000, 1000 };
    const double lag[2] = { 0, 0.004 };
    uint32_t c[2];
    double spread;

    settled_shares(speed, lag, c);
    CU_ASSERT_EQUAL(c[0], 51);
    CU_ASSERT_EQUAL(c[1], 13);
    /* Both finish within one sample of the slow worker of each other. */
    spread = (lag[1] + c[1] / speed[1]) - (lag[0] + c[0] / speed[0]);
    CU_ASSERT(spread < 1.0 / speed[1] && spread > -1.0 / speed[1]);
}

/* A worker whose fixed time alone is past the others' finish would make
 * every step longer: it gets nothing, not even one sample (it sits out);
 * the batch is still tiled. */
static void test_lag_beyond_step(void)
{
    const float speed[2] = { 10000, 10000 };
    const double lag[2] = { 0, 0.1 };
    uint32_t c[2];

    settled_shares(speed, lag, c);
    CU_ASSERT_EQUAL(c[0], 64);
    CU_ASSERT_EQUAL(c[1], 0);
}

/*
 * Steps as a shard sees them, with what the prediction leaves out: every
 * push after the first costs `extra` seconds more of the step (adding it
 * up, one more reply, two processes on the same cores) — seen only in the
 * step's time, answer to answer. A worker given no share does not push: it
 * pulls the next version (ps_mode_sits_out), and the step is complete
 * without it. Fills got[i]: steps in which worker i had a share; returns
 * the share of worker 1 in the last step.
 */
static uint32_t run_steps(struct ps_mode *s, int n, uint64_t *v, int steps,
                          uint32_t G, double *t, const float *speed,
                          const double *lag, double extra, int *got)
{
    uint32_t count[8], off;
    uint64_t total;
    int i, k;

    for (k = 0; k < steps; k++, (*v)++) {
        double end = *t;
        int pushes = 0;

        for (i = 0; i < n; i++) {
            ps_mode_assign(s, i, G, *v, &off, &count[i]);
            ps_mode_answered(s, i, count[i], *t);
        }
        for (i = 0; i < n; i++) {
            double at = *t + lag[i] + count[i] / speed[i];

            if (!count[i]) {
                CU_ASSERT(ps_mode_sits_out(s, i, *v + 1, *v, 1.0));
                continue;
            }
            got[i]++;
            CU_ASSERT_EQUAL(ps_mode_push(s, i, *v, *v, count[i], speed[i],
                                         at), PS_PUSH_ACCUMULATE);
            end = at > end ? at : end;
            pushes++;
        }
        CU_ASSERT(ps_mode_step_ready(s, *v, &total));
        CU_ASSERT_EQUAL(total, G);
        ps_mode_step_done(s);
        *t = end + 0.0005 + extra * (pushes - 1);
    }
    return count[1];
}

/*
 * Who gets a share, as a table: worker 1 beside worker 0 (10 000
 * samples/s, 1 ms fixed time), global batch 1024, 2 000 steps. The
 * prediction alone keeps a worker 20x slower in (it would save ~5 % of a
 * step) but the step pays 10 % more for its push: measured, it sits out,
 * and tries (12 steps, 6 of them with the flip, waits doubling to 3 200
 * steps) cost under 1 %.
 * 2x slower, the same cost is far outweighed: it keeps its share. A fixed
 * time past the step is never worth a share; equal workers without the
 * extra cost both work; a share that would save under 3 % (MARGIN) is not
 * given.
 */
static void test_sit_out_table(void)
{
    static const struct {
        const char *what;
        float speed1;
        double lag1, extra;
        int in_at_end;          /* worker 1 has a share at the end */
        int max_with;           /* at most this many steps with a share */
        int min_with;           /* at least this many */
    } t[] = {
        {"20x slower, costs more than it saves", 500, 0.001, 0.010, 0, 60, 5},
        {"2x slower, pays", 5000, 0.001, 0.010, 1, 2000, 1900},
        {"fixed time past the step", 10000, 0.5, 0, 0, 20, 0},
        {"equal, nothing unmodelled", 10000, 0.001, 0, 1, 2000, 1950},
        {"50x slower, saves under 3 %: no share", 200, 0.001, 0, 0, 60, 1},
    };
    size_t k;

    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct ps_mode *s = make(2, HC_MODE_SYNC, 1, 0);
        const float speed[2] = { 10000, t[k].speed1 };
        const double lag[2] = { 0.001, t[k].lag1 };
        int got[2] = { 0, 0 };
        uint64_t v = 0;
        double t0 = 1.0;
        uint32_t last;

        last = run_steps(s, 2, &v, 2000, 1024, &t0, speed, lag, t[k].extra,
                         got);
        if ((last > 0) != t[k].in_at_end || got[1] > t[k].max_with ||
            got[1] < t[k].min_with)
            fprintf(stderr, "\n%s: worker 1 had a share in %d steps, "
                    "%u at the end\n", t[k].what, got[1], last);
        CU_ASSERT_EQUAL(last > 0, t[k].in_at_end);
        CU_ASSERT(got[1] <= t[k].max_with);
        CU_ASSERT(got[1] >= t[k].min_with);
        CU_ASSERT_EQUAL(got[0], 2000);  /* the fastest never sits out */
        ps_mode_free(s);
    }
}

/* A worker sitting out is given a share again once it would pay: worker
 * 1 (20x slower, sitting out) becomes as fast as worker 0; a later try
 * brings it back and it stays. */
static void test_sit_out_comes_back(void)
{
    struct ps_mode *s = make(2, HC_MODE_SYNC, 1, 0);
    float speed[2] = { 10000, 500 };
    const double lag[2] = { 0.001, 0.001 };
    int got[2] = { 0, 0 };
    uint64_t v = 0;
    double t = 1.0;

    CU_ASSERT_EQUAL(run_steps(s, 2, &v, 300, 1024, &t, speed, lag, 0.010,
                              got), 0);
    speed[1] = 10000;           /* reported with its next push: a try's */
    got[1] = 0;
    CU_ASSERT(run_steps(s, 2, &v, 3500, 1024, &t, speed, lag, 0.002,
                        got) > 0);
    CU_ASSERT(got[1] > 1000);
    ps_mode_free(s);
}

/* ps_mode_sits_out: only a pull past the open step, from a worker taking
 * part in it that has not pushed to it, in sync, is news; such a worker is
 * then neither waited for nor named. */
static void test_sits_out_rules(void)
{
    static const struct {
        const char *what;
        enum hc_mode mode;
        int worker;
        uint64_t min_version, version;
        int pushed_first;
        int expect;
    } t[] = {
        {"past the open step", HC_MODE_SYNC, 1, 1, 0, 0, 1},
        {"two steps past", HC_MODE_SYNC, 1, 2, 0, 0, 1},
        {"the open step itself", HC_MODE_SYNC, 1, 0, 0, 0, 0},
        {"an older step", HC_MODE_SYNC, 1, 3, 5, 0, 0},
        {"already pushed to it", HC_MODE_SYNC, 1, 1, 0, 1, 0},
        {"no such worker", HC_MODE_SYNC, 7, 1, 0, 0, 0},
        {"negative worker", HC_MODE_SYNC, -1, 1, 0, 0, 0},
        {"async", HC_MODE_ASYNC, 1, 1, 0, 0, 0},
        {"ssp", HC_MODE_SSP, 1, 1, 0, 0, 0},
    };
    size_t k;

    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct ps_mode *s = make(2, t[k].mode, 1, 0);
        int got;

        if (t[k].pushed_first)
            ps_mode_push(s, t[k].worker, t[k].version, t[k].version, 8,
                         100, 1.0);
        got = ps_mode_sits_out(s, t[k].worker, t[k].min_version,
                               t[k].version, 1.0);
        if (got != t[k].expect)
            fprintf(stderr, "\nsits_out: %s: %d\n", t[k].what, got);
        CU_ASSERT_EQUAL(got, t[k].expect);
        /* a repeat is no news */
        CU_ASSERT_EQUAL(ps_mode_sits_out(s, t[k].worker, t[k].min_version,
                                         t[k].version, 2.0), 0);
        ps_mode_free(s);
    }
}

/* A step with one worker sitting out: complete on the others' pushes, the
 * total theirs, nobody named as missing but the others; the next step
 * waits for it again. With a backup worker, the backup is one of those
 * awaited. */
static void test_sit_out_step(void)
{
    struct ps_mode *s = make(3, HC_MODE_SYNC, 1, 0);
    uint64_t total;
    int who[4];
    char buf[64];
    double since;

    CU_ASSERT(ps_mode_sits_out(s, 2, 1, 0, 1.0));
    CU_ASSERT_EQUAL(ps_mode_push(s, 0, 0, 0, 40, 100, 1.0),
                    PS_PUSH_ACCUMULATE);
    CU_ASSERT(!ps_mode_step_ready(s, 0, &total));
    CU_ASSERT_EQUAL(ps_mode_missing(s, 0, who, 4), 1);
    CU_ASSERT_EQUAL(who[0], 1);
    CU_ASSERT_EQUAL(ps_mode_waiting_for(s, 0, buf, sizeof buf, &since), 1);
    CU_ASSERT_STRING_EQUAL(buf, "worker:1");
    CU_ASSERT_EQUAL(ps_mode_push(s, 1, 0, 0, 24, 100, 1.0),
                    PS_PUSH_ACCUMULATE);
    CU_ASSERT(ps_mode_step_ready(s, 0, &total));
    CU_ASSERT_EQUAL(total, 64);
    ps_mode_step_done(s);
    /* step 1: worker 2 is waited for again */
    CU_ASSERT_EQUAL(ps_mode_push(s, 0, 1, 1, 32, 100, 2.0),
                    PS_PUSH_ACCUMULATE);
    CU_ASSERT_EQUAL(ps_mode_push(s, 1, 1, 1, 32, 100, 2.0),
                    PS_PUSH_ACCUMULATE);
    CU_ASSERT(!ps_mode_step_ready(s, 1, &total));
    CU_ASSERT_EQUAL(ps_mode_missing(s, 1, who, 4), 1);
    CU_ASSERT_EQUAL(who[0], 2);
    ps_mode_free(s);

    /* Nobody pushed, the others sat out: the step has started for them,
     * and the one with the share is named (a paused worker must not hold
     * the job unnamed and without a deadline). */
    s = make(3, HC_MODE_SYNC, 1, 0);
    CU_ASSERT_EQUAL(ps_mode_missing(s, 0, who, 4), 0);
    CU_ASSERT(ps_mode_sits_out(s, 1, 1, 0, 5.0));
    CU_ASSERT(ps_mode_sits_out(s, 2, 1, 0, 6.0));
    CU_ASSERT(!ps_mode_step_ready(s, 0, &total));
    CU_ASSERT_EQUAL(ps_mode_missing(s, 0, who, 4), 1);
    CU_ASSERT_EQUAL(who[0], 0);
    CU_ASSERT_EQUAL(ps_mode_waiting_for(s, 0, buf, sizeof buf, &since), 1);
    CU_ASSERT_STRING_EQUAL(buf, "worker:0");
    CU_ASSERT_DOUBLE_EQUAL(since, 5.0, 1e-9);
    ps_mode_free(s);

    s = make(3, HC_MODE_SYNC, 1, 1);            /* backup_workers 1 */
    CU_ASSERT(ps_mode_sits_out(s, 2, 1, 0, 1.0));
    CU_ASSERT_EQUAL(ps_mode_push(s, 0, 0, 0, 40, 100, 1.0),
                    PS_PUSH_ACCUMULATE);
    CU_ASSERT(ps_mode_step_ready(s, 0, &total)); /* 2 awaited − 1 backup */
    CU_ASSERT_EQUAL(total, 40);
    ps_mode_free(s);
}

static void test_step_complete_backup_late(void)
{
    struct ps_mode *s = make(3, HC_MODE_SYNC, 1, 1);
    struct ps_mode_stats st;
    uint64_t total;

    CU_ASSERT_EQUAL(ps_mode_push(s, 0, 0, 0, 10, 100, 1.0), PS_PUSH_ACCUMULATE);
    CU_ASSERT(!ps_mode_step_ready(s, 0, &total));
    CU_ASSERT_EQUAL(ps_mode_push(s, 0, 0, 0, 10, 100, 1.0), PS_PUSH_REFUSE);
    CU_ASSERT_EQUAL(ps_mode_push(s, 1, 1, 0, 10, 100, 1.0), PS_PUSH_REFUSE);
    CU_ASSERT_EQUAL(ps_mode_push(s, 1, 0, 0, 10, 100, 1.0), PS_PUSH_ACCUMULATE);
    CU_ASSERT(ps_mode_step_ready(s, 0, &total));      /* 3 − 1 backup */
    CU_ASSERT_EQUAL(total, 20);
    ps_mode_step_done(s);
    CU_ASSERT_EQUAL(ps_mode_push(s, 2, 0, 1, 10, 100, 1.0), PS_PUSH_LATE);
    ps_mode_stats(s, &st);
    CU_ASSERT_EQUAL(st.late, 1);
    CU_ASSERT(!ps_mode_pull_ready(s, 2, 2, 0, 1));    /* wants version 2 */
    CU_ASSERT(ps_mode_pull_ready(s, 2, 1, 0, 1));
    ps_mode_free(s);
}

static void test_ssp_bound(void)
{
    struct ps_mode *s = make(2, HC_MODE_SSP, 1, 0);
    struct ps_mode_stats st;
    int i;

    for (i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(ps_mode_push(s, 0, 0, 0, 1, 0, 1.0), PS_PUSH_APPLY);
    /* worker 0 has pushed 3, worker 1 none: a pull at clock 3 is 3 ahead. */
    CU_ASSERT(!ps_mode_pull_ready(s, 0, 0, 3, 0));
    CU_ASSERT(ps_mode_pull_ready(s, 0, 0, 2, 0));
    CU_ASSERT_EQUAL(ps_mode_push(s, 1, 0, 0, 1, 0, 1.0), PS_PUSH_APPLY);
    CU_ASSERT(ps_mode_pull_ready(s, 0, 0, 3, 0));
    ps_mode_stats(s, &st);
    CU_ASSERT(st.max_ahead <= 2);
    ps_mode_free(s);
}

/* A worker back after leaving takes part in a step nobody has started
 * (a lone worker must not wait for a step no one will finish), and only
 * in the next one when the step is under way. */
static void test_rejoin(void)
{
    struct ps_mode *s = make(2, HC_MODE_SYNC, 1, 0);
    uint32_t off, count;
    uint64_t total;

    ps_mode_member(s, 0, 0);
    ps_mode_member(s, 1, 0);
    ps_mode_join(s, 0, 0);                    /* nobody started step 0 */
    CU_ASSERT(ps_mode_pull_ready(s, 0, 0, 0, 0));
    ps_mode_assign(s, 0, 64, 0, &off, &count);
    CU_ASSERT_EQUAL(count, 64);
    ps_mode_join(s, 1, 0);                    /* step 0 handed out */
    CU_ASSERT(!ps_mode_pull_ready(s, 1, 0, 0, 0));
    CU_ASSERT_EQUAL(ps_mode_push(s, 0, 0, 0, 64, 100, 1.0), PS_PUSH_ACCUMULATE);
    CU_ASSERT(ps_mode_step_ready(s, 0, &total));  /* not waiting for 1 */
    ps_mode_step_done(s);
    CU_ASSERT(ps_mode_pull_ready(s, 1, 1, 0, 1));
    ps_mode_free(s);
}

/*
 * Two shards of a running job (the chief alone, worker 0) see worker 1's
 * join at different steps: A at step 4 already under way (from 5), B two
 * steps behind at 2 (from 3). Counted in so, B's step 3 would wait for a
 * push worker 1 cannot make while its pull waits on A for step 5 (the
 * elastic.sh / restart.sh hang). With the agreed start (the later one,
 * Join.start_version) B goes through steps 3 and 4 on the chief alone and
 * both count worker 1 in from step 5.
 */
static void test_join_agreed_start(void)
{
    struct ps_mode *a = make(2, HC_MODE_SYNC, 1, 0),
                   *b = make(2, HC_MODE_SYNC, 1, 0);
    uint32_t off, count;
    uint64_t total, fa, fb, v;

    ps_mode_member(a, 1, 0);
    ps_mode_member(b, 1, 0);
    ps_mode_assign(a, 0, 64, 4, &off, &count);  /* A's step 4 handed out */
    ps_mode_assign(b, 0, 64, 2, &off, &count);  /* B's step 2 handed out */
    fa = ps_mode_join(a, 1, 4);
    fb = ps_mode_join(b, 1, 2);
    CU_ASSERT_EQUAL(fa, 5);
    CU_ASSERT_EQUAL(fb, 3);
    ps_mode_start_at(a, 1, fa > fb ? fa : fb);
    ps_mode_start_at(b, 1, fa > fb ? fa : fb);
    CU_ASSERT_EQUAL(ps_mode_from(a, 1), 5);
    CU_ASSERT_EQUAL(ps_mode_from(b, 1), 5);
    /* an earlier start never moves a later one back */
    ps_mode_start_at(b, 1, 4);
    CU_ASSERT_EQUAL(ps_mode_from(b, 1), 5);
    for (v = 2; v < 5; v++) {                   /* B: the chief alone */
        CU_ASSERT(!ps_mode_pull_ready(b, 1, 0, 0, v));
        CU_ASSERT_EQUAL(ps_mode_push(b, 0, v, v, 64, 100, 1.0),
                        PS_PUSH_ACCUMULATE);
        CU_ASSERT(ps_mode_step_ready(b, v, &total));
        ps_mode_step_done(b);
    }
    CU_ASSERT(ps_mode_pull_ready(b, 1, 0, 0, 5));
    ps_mode_assign(b, 1, 64, 5, &off, &count);
    CU_ASSERT_EQUAL(count, 32);                 /* in from step 5 */
    CU_ASSERT_EQUAL(ps_mode_from(b, 7), UINT64_MAX);
    ps_mode_free(a);
    ps_mode_free(b);
}

/* Nobody left to push a step but workers that sat it out (the one with a
 * share left, before or after they pulled, or moved to the next step by
 * the shards' agreed start, as a restarted worker's second join does):
 * they are recalled — their pulls are ready at this version, with the
 * whole batch — instead of waiting for ever. */
static void leave_or_move(struct ps_mode *s, int move)
{
    if (move)
        ps_mode_start_at(s, 0, 1);
    else
        ps_mode_member(s, 0, 0);
}

static void test_sit_out_recalled(void)
{
    static const struct {
        const char *what;
        int leave_first;        /* worker 0 leaves before 1's pull */
        int move;               /* worker 0's first step moved to 1 */
    } t[] = {
        {"left after the pull", 0, 0},
        {"left before the pull", 1, 0},
        {"moved to the next step after the pull", 0, 1},
    };
    size_t k;

    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct ps_mode *s = make(2, HC_MODE_SYNC, 1, 0);
        uint32_t off, count;
        uint64_t total;

        ps_mode_assign(s, 0, 64, 0, &off, &count);  /* the step is cut */
        if (t[k].leave_first)
            leave_or_move(s, t[k].move);
        CU_ASSERT(ps_mode_sits_out(s, 1, 1, 0, 1.0));
        if (!t[k].leave_first) {
            CU_ASSERT(!ps_mode_pull_ready(s, 1, 1, 0, 0));
            leave_or_move(s, t[k].move);
        }
        if (!ps_mode_pull_ready(s, 1, 1, 0, 0))
            printf("\n  %s: worker 1 not recalled\n", t[k].what);
        CU_ASSERT(ps_mode_pull_ready(s, 1, 1, 0, 0));
        ps_mode_assign(s, 1, 64, 0, &off, &count);
        ps_mode_answered(s, 1, count, 1.0);
        CU_ASSERT_EQUAL(count, 64);
        CU_ASSERT(!ps_mode_pull_ready(s, 1, 1, 0, 0)); /* answered once */
        CU_ASSERT_EQUAL(ps_mode_push(s, 1, 0, 0, 64, 100, 1.5),
                        PS_PUSH_ACCUMULATE);
        CU_ASSERT(ps_mode_step_ready(s, 0, &total));
        CU_ASSERT_EQUAL(total, 64);
        ps_mode_free(s);
    }
}

/*
 * The worker with the whole batch of ps:0's step leaves it before pushing
 * (dies, or is moved to the next step), and the one left was handed
 * nothing of it and has not pulled past it: its other shard, a step
 * behind (the push that ended the step before there was lost with the
 * dead worker), keeps answering its pulls of this step's version
 * (restart.sh's livelock: 44 000 pulls answered at once with no share).
 * The step is cut again: its next pull of the step gets the whole batch.
 */
static void test_unshared_recut(void)
{
    static const struct {
        const char *what;
        int answered_first;     /* worker 0 answered its 0 before 1 left */
        int move;               /* worker 1's first step moved to the next */
    } t[] = {
        {"died after the other was answered nothing", 1, 0},
        {"died before the other's pull", 0, 0},
        {"moved to the next step", 1, 1},
    };
    const float speed[2] = { 10000, 10000 };
    const double lag[2] = { 0.5, 0.001 };   /* worker 0's is past the step */
    size_t k;

    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct ps_mode *s = make(2, HC_MODE_SYNC, 1, 0);
        int got[2] = { 0, 0 };
        uint64_t v = 0, total;
        double now = 1.0;
        uint32_t off, count;

        run_steps(s, 2, &v, 40, 64, &now, speed, lag, 0, got);
        ps_mode_assign(s, 1, 64, v, &off, &count);  /* the step is cut */
        CU_ASSERT_EQUAL(count, 64);
        if (t[k].answered_first) {
            ps_mode_assign(s, 0, 64, v, &off, &count);
            ps_mode_answered(s, 0, count, now);
            CU_ASSERT_EQUAL(count, 0);
        }
        if (t[k].move)
            ps_mode_start_at(s, 1, v + 1);
        else
            ps_mode_member(s, 1, 0);
        /* worker 0 pulls this step's version again: not past it */
        CU_ASSERT(!ps_mode_sits_out(s, 0, v, v, now));
        CU_ASSERT(ps_mode_pull_ready(s, 0, v, 0, v));
        ps_mode_assign(s, 0, 64, v, &off, &count);
        ps_mode_answered(s, 0, count, now);
        if (count != 64)
            printf("\n  %s: worker 0 given %u of 64\n", t[k].what, count);
        CU_ASSERT_EQUAL(count, 64);
        CU_ASSERT_EQUAL(ps_mode_push(s, 0, v, v, count, speed[0], now + 0.5),
                        PS_PUSH_ACCUMULATE);
        CU_ASSERT(ps_mode_step_ready(s, v, &total));
        CU_ASSERT_EQUAL(total, 64);
        ps_mode_free(s);
    }
}

/* What each mode asks of the service, as a table: whether a pull may
 * wait for other workers, whether pushes make common steps, whether a step
 * reads gradients from kept messages. */
static void test_rules(void)
{
    static const struct {
        enum hc_mode mode;
        int holds_pulls, in_steps, lends;
    } t[] = {
        {HC_MODE_ASYNC, 0, 0, 0},
        {HC_MODE_SSP, 1, 0, 0},
        {HC_MODE_SYNC, 1, 1, 1},
    };
    size_t k;

    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct ps_mode *s = make(2, t[k].mode, 1, 0);

        CU_ASSERT_EQUAL(ps_mode_holds_pulls(s), t[k].holds_pulls);
        CU_ASSERT_EQUAL(ps_mode_in_steps(s), t[k].in_steps);
        CU_ASSERT_EQUAL(ps_mode_lends_messages(s), t[k].lends);
        ps_mode_free(s);
    }
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("sync", NULL, NULL);

    CU_add_test(s, "equal shares until speeds are known", test_equal_until_known);
    CU_add_test(s, "shares by speed; balance off", test_by_speed);
    CU_add_test(s, "shares by speed and fixed time per step", test_by_speed_and_lag);
    CU_add_test(s, "fixed time past the step: no share", test_lag_beyond_step);
    CU_add_test(s, "who sits out: a table", test_sit_out_table);
    CU_add_test(s, "a worker sitting out comes back", test_sit_out_comes_back);
    CU_add_test(s, "sits out: the rules", test_sits_out_rules);
    CU_add_test(s, "a step without the worker sitting out", test_sit_out_step);
    CU_add_test(s, "sat out, nobody else left: recalled", test_sit_out_recalled);
    CU_add_test(s, "handed nothing, the share left: cut again",
                test_unshared_recut);
    CU_add_test(s, "step completion, backup workers, late pushes",
                test_step_complete_backup_late);
    CU_add_test(s, "ssp bound", test_ssp_bound);
    CU_add_test(s, "re-join: this step or the next", test_rejoin);
    CU_add_test(s, "a join agreed by the shards", test_join_agreed_start);
    CU_add_test(s, "what each mode asks of the service", test_rules);
}
