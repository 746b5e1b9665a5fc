/*
 * export.h — read the shards' stores offline: `hetps export` writes every
 * variable as a NumPy .npy file, `hetps inspect` prints what a store holds.
 *
 * The stores are opened read-only, so both run beside live servers.
 */
#ifndef PS_EXPORT_H
#define PS_EXPORT_H

#include <stdio.h>

#include "cluster.h"

/*
 * Assemble every variable from the stores of all shards of `cl` — shard J
 * in DATA_DIR/ps-J, as `hetps launch` lays them out — and write each as
 * OUT_DIR/NAME.npy (NAME as the model names it, e.g. conv2d/kernel.npy),
 * float32, little-endian, in Keras's layout and shape. Every element must
 * come from exactly one block, and every store must be of the same model
 * and step-consistent; errors name the store and what is wrong.
 * Prints one line per file to `log`.
 */
int ps_export(const struct hc_cluster *cl, const char *data_dir,
              const char *out_dir, FILE *log);

/* Print what the store in `dir` holds: meta, variables, blocks, records. */
int ps_inspect(const char *dir, FILE *out);

#endif
