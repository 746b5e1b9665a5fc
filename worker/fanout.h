/*
 * fanout.h — run one piece of work per shard on several cores at once.
 *
 * A worker's exchange with its shards has parts done once per shard on the
 * calling thread: encoding each push (copying the gradients, checksumming
 * them), copying each request for re-sends, checking each reply and copying
 * its values out. For a model of tens of MB these are tens of ms a step
 * while every other core waits; a fan-out runs them on helper threads and
 * the caller together. Small exchanges stay on the caller (threads cost
 * more than they save there).
 */
#ifndef PC_FANOUT_H
#define PC_FANOUT_H

struct pc_fanout;

/* A fan-out for up to n pieces at once: min(n, cores, 8) - 1 helper
 * threads, started here. NULL when that is none or they cannot start:
 * pc_fanout_run then runs every piece on the caller. */
struct pc_fanout *pc_fanout_open(int n);

/* Stop and join the helpers. NULL is fine. */
void pc_fanout_close(struct pc_fanout *f);

/* fn(arg, i) for every i in [0, n), on the caller and the helpers; returns
 * once every call has returned. One run at a time per fan-out (the caller
 * that owns it). fn must not use hc_err_set's message across threads: keep
 * each piece's result in arg. */
void pc_fanout_run(struct pc_fanout *f, int n, void (*fn)(void *arg, int i),
                   void *arg);

#endif
