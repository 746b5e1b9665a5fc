/*
 * init_tables.h — the chief's first values of a model with embedding
 * tables (--initial-weights F): the dense variables as the job's created
 * values, and each table's rows sent to the shards as stored rows before
 * anyone trains (client.h, pc_create_loading and pc_init_rows).
 *
 * Two sources, both as `hetps export` writes them:
 *   - Keras's .weights.h5 or .keras: each table one dense (input_dim,
 *     output_dim) float32 array (a table small enough: keras.h,
 *     HC_KERAS_TABLE_MAX_BYTES); every one of its rows is stored.
 *   - a directory of .npy files: NAME.npy per dense variable, and per
 *     table NAME.ids.npy ((n,) uint64, ascending, each below input_dim)
 *     beside NAME.rows.npy ((n, output_dim) float32): those n rows are
 *     stored, the others start from the initializer as in a fresh job.
 *     Read in chunks: memory does not grow with the table.
 * Rows equal to the initializer's value are stored like any other. Only
 * values are read: the optimizer's slots start at their initial values
 * (a .npy export's NAME.<slot>.npy and Keras's optimizer/vars are not
 * read), each row's update count at 0.
 *
 * Exactly once: a store created for these rows serves nothing until the
 * last is in; a chief started again finds the stores loaded (or trained)
 * and sends nothing, or still loading and sends them all again (the same
 * rows replace themselves).
 */
#ifndef WK_INIT_TABLES_H
#define WK_INIT_TABLES_H

#include "client.h"
#include "model.h"

struct wk_init_tables;

/* Whether m has a row-sparse table (then --initial-weights goes here). */
int wk_model_has_tables(const struct hc_model *m);

/*
 * Read `path` for m (a model with tables): the dense variables into params
 * (m->n_params), and every table checked in full before anything is sent
 * — its files present, dtype and shape right, ids ascending (a repeat
 * named), each below input_dim. *out (free with wk_init_tables_close)
 * holds what is sent. Errors name the file and the array: HC_ERR_NOTFOUND,
 * HC_ERR_DATA (dtype, order, truncated, ids), HC_ERR_MISMATCH (shape),
 * HC_ERR_UNSUPPORTED (a table too large for Keras's dense array),
 * HC_ERR_NOMEM, HC_ERR_IO.
 */
int wk_init_tables_open(const struct hc_model *m, const char *path,
                        float *params, struct wk_init_tables **out);

/*
 * On the chief, after pc_create_loading: every table's rows to the shards
 * still loading, then the end of the loading. Says on the log how many
 * rows of which table went, or that the job already had values (nothing
 * sent). Errors: pc_init_rows's, the files' (as above) when they changed
 * since wk_init_tables_open.
 */
int wk_init_tables_send(struct wk_init_tables *t, struct pc_client *pc);

void wk_init_tables_close(struct wk_init_tables *t);

#endif
