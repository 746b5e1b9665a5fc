/*
 * fanout.h — run n independent pieces of work on several cores at once.
 *
 * Used where one thread would otherwise do tens of ms of memory-bound
 * work while the other cores wait: a worker's exchange with its shards
 * (each push encoded and copied, each answer checked and copied out — a
 * piece per shard) and a shard's optimizer step over a large update (a
 * piece per range of blocks). The caller works too; small jobs stay on
 * the caller (threads cost more than they save there).
 */
#ifndef HC_FANOUT_H
#define HC_FANOUT_H

struct hc_fanout;

/* A fan-out for up to n pieces at once: min(n, cores, 8) - 1 helper
 * threads, started here; they sleep until a run. NULL when that is none
 * or they cannot start: hc_fanout_run then runs every piece on the
 * caller. */
struct hc_fanout *hc_fanout_open(int n);

/* Stop and join the helpers. NULL is fine. */
void hc_fanout_close(struct hc_fanout *f);

/* fn(arg, i) for every i in [0, n), on the caller and the helpers; returns
 * once every call has returned. One run at a time per fan-out (the caller
 * that owns it). fn must not use hc_err_set's message across threads: keep
 * each piece's result in arg. */
void hc_fanout_run(struct hc_fanout *f, int n, void (*fn)(void *arg, int i),
                   void *arg);

#endif
