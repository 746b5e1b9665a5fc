/*
 * mode.h — the consistency modes of a shard: when a push is applied and
 * when a pull may be answered.
 *
 *   async   every push is applied at once; a push computed at a version
 *           more than max_staleness versions old is refused (0: no bound).
 *   sync    the pushes of one step are added up (weighted by samples) until
 *           every live worker but `backup` has pushed; then the optimizer
 *           runs once on the sample-weighted mean and the version moves on.
 *           A pull for version v waits until the shard reaches v. Pushes
 *           for an older step are late: counted, not applied. The step's
 *           global batch is split among the live workers by their measured
 *           speeds and fixed times per step, so that all finish together
 *           (or equally with balance off); a worker whose share does not
 *           pay for its round trip gets none and is not waited for (tried
 *           again now and then; mode.c, "Sitting out").
 *   ssp:S   pushes are applied at once; a pull from a worker that has
 *           pushed c steps waits while c − (fewest steps of a live worker)
 *           > S, so no worker runs more than S steps ahead.
 *
 * Knows nothing of the network or the store: the service feeds it events
 * and asks it questions, under the service's mutex.
 */
#ifndef PS_MODE_H
#define PS_MODE_H

#include <stddef.h>
#include <stdint.h>

#include "cluster.h"

struct ps_mode;

struct ps_mode_conf {
    enum hc_mode mode;
    int staleness;              /* ssp: S */
    int backup;                 /* sync: backup workers */
    int balance;                /* sync: split batches by speed (1) or equally */
    uint64_t max_staleness;     /* async: refuse older gradients (0: off) */
    int n_workers;              /* in the cluster definition */
};

enum ps_push_verdict {
    PS_PUSH_APPLY,              /* apply now (async, ssp) */
    PS_PUSH_ACCUMULATE,         /* add to the step (sync) */
    PS_PUSH_LATE,               /* sync: for an older step; counted, dropped */
    PS_PUSH_REFUSE,             /* message in hc_err_msg() */
};

int ps_mode_new(struct ps_mode **out, const struct ps_mode_conf *c);
void ps_mode_free(struct ps_mode *s);

/*
 * What the mode asks of the service — its rules as questions, so the
 * service never names a mode:
 *
 * ps_mode_holds_pulls: a pull may wait for other workers' pushes (sync,
 * ssp). Such a mode expects every worker of the cluster from the start
 * (one that never joins is given up after the join timeout), and a push
 * it applies must be judged and applied under the service's lock, so no
 * pull sees a worker's clock before its values. Without it (async) a push
 * is applied outside that lock.
 *
 * ps_mode_in_steps: the workers move through common steps (sync): pushes
 * add up to a step applied once complete, a push-and-pull answers the
 * version after its step, a pull's answer carries the worker's slice of
 * the step's global batch (so it is built under the service's lock), a
 * worker joins from a step every shard agreed on, and a started step has
 * a deadline.
 *
 * ps_mode_lends_messages: a step reads a gradient where it lies, in a
 * message the service keeps until its answer (sync, ps_shard_accumulate's
 * lend); a kept message that goes early must be given back first.
 */
int ps_mode_holds_pulls(const struct ps_mode *s);
int ps_mode_in_steps(const struct ps_mode *s);
int ps_mode_lends_messages(const struct ps_mode *s);

/* A worker is expected from the start (live = 1), or left or died
 * (live = 0). Worker indices beyond n_workers grow the table (elastic
 * clusters). Shares of a step already handed out do not change unless
 * nobody left can push the step (sync, nothing pushed yet): those that
 * sat it out are recalled (ps_mode_sits_out), or, when those still in it
 * were all handed nothing, it is cut again for their next pull. */
void ps_mode_member(struct ps_mode *s, int worker, int live);

/*
 * sync: a worker's process restarted (a new incarnation joins) while the
 * open step at `version` awaits its slice — cut, with a share for it, not
 * pushed here, not sat out. Returns 1: the new process takes its place in
 * that step (it stays live, ps_mode_join returns this version, and its
 * pull is answered with the same slice), so the step still sums the
 * whole global batch; 0 in every other case and mode (the caller takes
 * the old process out: ps_mode_member(worker, 0)).
 */
int ps_mode_takes_over(const struct ps_mode *s, int worker, uint64_t version);

/* sync: split batches by speed (on, as the conf's balance) or equally
 * (off) from the next assignment on. */
void ps_mode_set_balance(struct ps_mode *s, int on);

/* A worker joined at `version`: one expected from the start takes part
 * from where it is; any other (added to the cluster file, or back after
 * dying or leaving) from the next step boundary, version + 1 — or in sync
 * from `version` itself while no worker has pushed to that step or been
 * given a slice of it. Returns the first version it takes part in (its
 * old one when it was live already). */
uint64_t ps_mode_join(struct ps_mode *s, int worker, uint64_t version);

/* The first version `worker` takes part in (UINT64_MAX: not live). */
uint64_t ps_mode_from(const struct ps_mode *s, int worker);

/* sync: a live worker takes part from `version` on at the earliest (the
 * step every shard agreed on, Join.start_version); a later `from` stays. */
void ps_mode_start_at(struct ps_mode *s, int worker, uint64_t version);

/* sync: the job's full global batch — the first proposal wins, so workers
 * started later (elastic) cut the same batches. */
uint32_t ps_mode_job_batch(struct ps_mode *s, uint32_t proposed);

/* Judge a push of `samples` from worker computed at base_version when the
 * shard is at `version`, arriving at `now` (seconds, monotonic); records
 * its speed and clock, and in sync its fixed time per step (see
 * ps_mode_answered). */
enum ps_push_verdict ps_mode_push(struct ps_mode *s, int worker,
                                  uint64_t base_version, uint64_t version,
                                  uint32_t samples, float samples_per_s,
                                  double now);

/* sync: 1 when the step's pushes are complete; *total receives the samples
 * behind them. */
int ps_mode_step_ready(const struct ps_mode *s, uint64_t version,
                       uint64_t *total);

/* sync: the live workers (up to cap, into workers[]) that have not pushed
 * to the step at `version` although it has started (someone pushed or sat
 * it out) and did not sit it out; returns how many. 0 when the step has
 * not started. */
int ps_mode_missing(const struct ps_mode *s, uint64_t version, int *workers,
                    int cap);

/* sync: a pull from `worker` for min_version, the shard at `version`.
 * When the worker takes part in the open step, has not pushed to it and
 * asks for a later version, it sat the step out (given no share, or a
 * slice it skipped): the step no longer waits for its push. Returns 1 when
 * that is news (the service should see whether the step is complete), 0
 * otherwise and in the other modes. Should nobody be left to push the step
 * (the worker with a share left or died, here or in ps_mode_member), the
 * workers that sat it out are recalled: their pulls are ready at this
 * version (ps_mode_pull_ready) and get shares of the step. */
int ps_mode_sits_out(struct ps_mode *s, int worker, uint64_t min_version,
                     uint64_t version, double now);

/* sync: the step was applied; start the next (new assignment of shares). */
void ps_mode_step_done(struct ps_mode *s);

/* May a pull from worker (min_version, clock) be answered now at version? */
int ps_mode_pull_ready(struct ps_mode *s, int worker, uint64_t min_version,
                       uint64_t clock, uint64_t version);

/* sync: this worker's slice [*offset, *offset + *count) of a global batch
 * of `global_batch` samples for the current step. A count of 0: the worker
 * sits this step out; it should pull the next version (ps_mode_sits_out). */
void ps_mode_assign(struct ps_mode *s, int worker, uint32_t global_batch,
                    uint64_t version, uint32_t *offset, uint32_t *count);

/* sync: worker's slice of `count` samples was sent at `now`. The time until
 * its push arrives, less count / speed, is the worker's fixed time per step
 * (round trip, slicing, encoding); shares are sized so that every worker's
 * fixed time plus its slice at its speed ends together. The first answer
 * of a step also ends the step before: its time per sample is what decides
 * who sits out. */
void ps_mode_answered(struct ps_mode *s, int worker, uint32_t count,
                      double now);

/* sync: the workers the open step still waits for — taking part, not yet
 * pushed — as "worker:1, worker:3" into buf (cut to len); returns how
 * many. 0 (buf "") when no push of the step has arrived yet nor a worker
 * sat it out (nobody is kept waiting) or the mode is not sync. *since:
 * when the step's first push or sitting out arrived (the time base of
 * ps_mode_push). */
int ps_mode_waiting_for(const struct ps_mode *s, uint64_t version, char *buf,
                        size_t len, double *since);

/* Counters for status. */
struct ps_mode_stats {
    uint64_t late, stale;
    uint32_t max_ahead;
};
void ps_mode_stats(const struct ps_mode *s, struct ps_mode_stats *st);

/* Per-worker figures for status: steps pushed, speed, current share,
 * late gradients, and (sync) the fixed time per step in ms (0: not yet
 * measured). */
void ps_mode_worker(const struct ps_mode *s, int worker, uint64_t *clock,
                    float *samples_per_s, uint32_t *share, uint64_t *late,
                    float *lag_ms);

/* sync: how many workers' pushes the step at `version` waits for (live,
 * taking part, not sitting it out), when it waits for every one of them (then a block all of them gave is final
 * before the step is: ps_shard_apply_ready); 0 with backup workers (which
 * ones count is known only at the end) and outside sync. */
int ps_mode_expected(const struct ps_mode *s, uint64_t version);

#endif
