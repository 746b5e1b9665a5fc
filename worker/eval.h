/*
 * eval.h — evaluation of a model's weights on a data set: the chief's
 * end-of-epoch check and `hetps eval`, on weights exported as .npy files
 * (`hetps export`) or pulled from live parameter servers.
 */
#ifndef WK_EVAL_H
#define WK_EVAL_H

#include <stdint.h>

#include "data.h"
#include "model.h"
#include "replica.h"

/*
 * Mean loss and accuracy of `params` on all of `d`, in batches of `batch`
 * (at most the replicas' max batch) through the scratch x (batch, H, W, C)
 * and y (batch), on every device of r. Allocates nothing.
 */
int wk_evaluate(struct wk_replicas *r, const float *params,
                const struct wk_dataset *d, int batch, float *x, int32_t *y,
                double *loss, double *acc);

/*
 * Read every variable of m from DIR/NAME.npy (float32, C order, the
 * variable's exact shape) into params (m->n_params, variables one after
 * the other). Errors name the file and what is wrong (missing, not a
 * float32 .npy, shape differs from the model's).
 */
int wk_load_npy(const struct hc_model *m, const char *dir, float *params);

#endif
