/*
 * export.h — read the shards' stores offline: `hetps export` writes every
 * variable as a NumPy .npy file (or all of them as Keras's files),
 * `hetps inspect` prints what a store holds.
 *
 * The stores are opened read-only, so both run beside live servers.
 */
#ifndef PS_EXPORT_H
#define PS_EXPORT_H

#include <stdio.h>

#include "cluster.h"
#include "model.h"

/*
 * Assemble every variable from the stores of all shards of `cl` — shard J
 * in DATA_DIR/ps-J, as `hetps launch` lays them out — and write each as
 * OUT_DIR/NAME.npy (NAME as the model names it, e.g. conv2d/kernel.npy),
 * float32, little-endian, in Keras's layout and shape. Every element must
 * come from exactly one block, and every store must be of the same model
 * and step-consistent; errors name the store and what is wrong (a store
 * still loading the chief's initial rows is refused). A row-sparse table
 * becomes arrays aligned by row: NAME.ids.npy (n,) uint64, its stored
 * rows' ids ascending over every shard, NAME.rows.npy (n, dim) float32
 * (rows never written are not stored: their values are hc_init_row's),
 * NAME.<slot>.npy (n, dim) float32 for each optimizer slot by Keras's name
 * of it (ps_optim_slot_name), and NAME.updates.npy (n,) uint64, each
 * row's update count.
 * Prints one line per file to `log`.
 */
int ps_export(const struct hc_cluster *cl, const char *data_dir,
              const char *out_dir, FILE *log);

/*
 * The same variables as Keras 3's files of model m (the job's model file,
 * whose variables and signature the stores must hold): out ending in
 * ".keras" a whole archive (config.json, metadata.json, model.weights.h5;
 * keras.models.load_model), else a weights file (model.load_weights).
 * common/keras.h has the layout; the optimizer's iteration count and
 * slots go to optimizer/vars. A row-sparse table is written as one dense
 * (input_dim, dim) array (rows never stored: hc_init_row's values), its
 * slots likewise (rows never stored: the slot's initial value), a table
 * over HC_KERAS_TABLE_MAX_BYTES refused naming it and its .npy form
 * (ps_export); per-row update counts have no place there (the log says
 * so for the optimizers whose step enters the update). Prints one line
 * per variable to `log`.
 */
int ps_export_keras(const struct hc_cluster *cl, const char *data_dir,
                    const struct hc_model *m, const char *out, FILE *log);

/* Print what the store in `dir` holds: meta, variables, blocks, records. */
int ps_inspect(const char *dir, FILE *out);

#endif
