/*
 * eval.h — evaluation of a model's weights on a data set: the chief's
 * end-of-epoch check, `hetps eval` and `hetps predict`, on weights exported
 * as .npy files (`hetps export`) or pulled from live parameter servers.
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
 * Metrics other than accuracy (AUC) and predictions hold every sample's
 * outputs and label at once — 8 bytes a sample for one output — so a data
 * set of more than WK_EVAL_HELD_MAX samples (a click-through validation
 * file may hold billions of lines) is refused for them rather than
 * exhausting memory: 2^28 samples (2 GiB for one output), loaded or
 * streamed alike. Loss and accuracy stream, with no bound.
 *
 * wk_eval_held_fits: HC_ERR_LIMIT naming d's file, its samples, the bound
 * and `what` (the metric, or "predict") when d->n > WK_EVAL_HELD_MAX.
 * wk_evaluate_metrics_fit: wk_eval_held_fits when m has a metric other
 * than accuracy, else HC_OK; callers check it before training or
 * evaluating, wk_evaluate_metrics again.
 */
#define WK_EVAL_HELD_MAX (1LL << 28)

int wk_eval_held_fits(const struct wk_dataset *d, const char *what);
int wk_evaluate_metrics_fit(const struct hc_model *m,
                            const struct wk_dataset *d);

/*
 * The model's metrics other than "accuracy" (which wk_evaluate gives, as
 * training does) on all of d (labelled): vals[i] for each m->metrics[i] of
 * another kind, the others untouched; nothing to do when there are none.
 * Predicts every sample once more (wk_predict_all) and holds all outputs:
 * allocates d->n × wk_replicas_output_size(r) floats for the call (and,
 * for a streamed set, whose labels are not held, d->n labels).
 * HC_ERR_LIMIT above WK_EVAL_HELD_MAX samples (wk_evaluate_metrics_fit),
 * HC_ERR_NOMEM, or errors as wk_predict_all.
 */
int wk_evaluate_metrics(struct wk_replicas *r, const struct hc_model *m,
                        const float *params, const struct wk_dataset *d,
                        int batch, float *x, double *vals);

/*
 * HC_ERR_MISMATCH, naming the images file, its image shape (H, W, C) and
 * the model's input shape, when d's images are not the model's input: an
 * input (H, W, C) takes images of exactly that shape, a flat input (N)
 * images of N values (flattened in NHWC order). A model of several inputs
 * takes a data set of as many arrays (wk_data_load_inputs), each checked
 * so against its input (the message names the input and its file); one
 * array for several inputs, or several for one, fails naming the inputs.
 */
int wk_check_input(const struct hc_model *m, const struct wk_dataset *d);

/*
 * The model's output (B, N) for every sample of d — softmax probabilities
 * for a softmax output — into out (d->n rows of wk_replicas_output_size(r),
 * file order), in batches of `batch` (at most the replicas' max batch)
 * through the scratch x (batch, H, W, C). Labels are not needed. Errors as
 * wk_replicas_outputs.
 */
int wk_predict_all(struct wk_replicas *r, const float *params,
                   const struct wk_dataset *d, int batch, float *x,
                   float *out);

/*
 * Read every variable of m from DIR/NAME.npy (float32, C order, the
 * variable's exact shape) into params (m->n_params, variables one after
 * the other); a row-sparse table is not in params and not read here
 * (init_tables.h reads its NAME.ids.npy and NAME.rows.npy). Errors name the file and what is wrong (missing, not a
 * float32 .npy, shape differs from the model's).
 */
int wk_load_npy(const struct hc_model *m, const char *dir, float *params);

/*
 * The weights of m from `path`: a directory of .npy files (wk_load_npy,
 * as hetps export writes them), or Keras's files — a .weights.h5 file or
 * a .keras archive (common/keras.h). Errors name the file.
 */
int wk_load_weights(const struct hc_model *m, const char *path,
                    float *params);

#endif
