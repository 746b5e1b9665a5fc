/*
 * reshard.h — move a job's stores to another number of parameter servers
 * (`hetps reshard`), and fit a data directory's stores to the cluster in
 * place: what `hetps launch` does before it starts any task (`hetps
 * reshard --in-place`).
 */
#ifndef PS_RESHARD_H
#define PS_RESHARD_H

#include <stdio.h>

#include "cluster.h"

/*
 * Move a job's state to another number of parameter servers: read every
 * block, every optimizer slot and the step from the stores of `from`
 * (shard J in FROM_DIR/ps-J, read-only, checksums verified), lay the
 * variables out for the shards of `to`, and write fresh stores in
 * TO_DIR/ps-J (which must not hold variables yet); then read them back and
 * check every parameter is bitwise the value it had. Row-sparse tables'
 * stored rows move whole (values, slots, update count) to hc_row_shard of
 * the new count, and are read back the same way. The new step is the
 * largest old one (shards of a sync job agree; async shards differ by the
 * pushes in flight). Workers then start with the `to` cluster file.
 */
int ps_reshard(const struct hc_cluster *from, const char *from_dir,
               const struct hc_cluster *to, const char *to_dir, FILE *log);

/* What ps_reshard_recover did (zeros: nothing). */
struct ps_reshard_done {
    int finished_from;      /* an interrupted move finished_from → */
    int finished_to;        /*   finished_to was completed */
    int cleared;            /* the incomplete output of an interrupted
                               reshard (old stores untouched) was removed */
};

/*
 * A reshard of DATA_DIR interrupted by a crash or kill -9 (it leaves
 * DATA_DIR/resharding-m-to-n): when it had written and synced every new
 * store, finish moving them into place; otherwise the old stores were never
 * touched, and its incomplete output is removed. Nothing to do: HC_OK with
 * *done zeroed. Errors name the path and what to do.
 */
int ps_reshard_recover(const char *data_dir, struct ps_reshard_done *done);

/*
 * DATA_DIR holds shard J's store in DATA_DIR/ps-J, as `hetps launch` lays
 * them out. When DATA_DIR/ps-0 is an initialised store of m shards and `to`
 * has n != m parameter servers, move every store's state to n fresh stores
 * (ps_reshard, reading DATA_DIR/ps-0 … ps-(m-1); the workers' places are
 * moved for `to`'s workers), keep the old stores in
 * DATA_DIR/before-reshard-m/ps-J (never deleted) and put the new ones at
 * DATA_DIR/ps-J; *from = m. The new stores are written, read back and
 * synced inside DATA_DIR/resharding-m-to-n first; only then are the
 * directories renamed (a crash after that: ps_reshard_recover finishes
 * it). No stores, an uninitialised ps-0, or stores that already fit:
 * nothing happens, *from = 0.
 *
 * Per-store lines go to `log` (may be NULL). Errors name the path and what
 * to do; an error before the renames leaves DATA_DIR as it was. Refused
 * while an interrupted reshard is there (recover it first). The stores
 * must not be in use: stop the job.
 */
int ps_reshard_in_place(const struct hc_cluster *to, const char *data_dir,
                        int *from, FILE *log);

#endif
