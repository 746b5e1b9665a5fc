/*
 * fault.h — fault points: named places in the shard where a test makes the
 * process die as `kill -9` would, to show that what a crash there leaves
 * behind is whole and that the job goes on after a restart.
 *
 * HETPS_FAULT=POINT[,POINT…] in the environment arms them; unset (as in
 * any real deployment) a point costs one getenv and does nothing. The
 * points, in the order a create passes them:
 *
 *   create:before_init   a create received and checked, nothing written
 *   create:inside_init   the init transaction written, not yet committed
 *   create:after_init    committed (store whole), not yet answered
 *
 * and in a synchronous step in parts (ps/service_step.c):
 *
 *   step:before_commit   parts of the step applied into its open store
 *                        transaction and answered (early), its last parts
 *                        in, its commit not yet made
 *
 * and in the loading of a table's initial rows (ps/shard.c):
 *
 *   init_rows:before_done  the chief's last InitRows (done) received,
 *                        the store still loading
 *
 * and in every mode (ps/service_step.c):
 *
 *   push:workerN         a push of worker N received, before it is judged
 *                        or applied (its other shards apply it, or add it
 *                        to their sync step: the worker's step reached
 *                        some shards only)
 *
 * A point waits 0.2 s before the kill: replies already handed to the
 * transport leave first, as they would on a machine that fails later.
 *
 * Compiled in always, so the binaries that are tested are the ones that
 * run. Thread-safe.
 */
#ifndef PS_FAULT_H
#define PS_FAULT_H

/* When HETPS_FAULT names `point`, log it and kill this process with
 * SIGKILL (no clean-up, no atexit); otherwise return at once. */
void ps_fault_point(const char *point);

#endif
