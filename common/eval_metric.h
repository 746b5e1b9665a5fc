/*
 * eval_metric.h — the metrics a model is compiled with, as Keras names them
 * (accuracy, binary / categorical / sparse categorical accuracy, top-k
 * categorical accuracy, AUC), and their values over a whole evaluation set
 * from the model's outputs and integer labels. The model reader fills
 * hc_model.metrics (model.h); the worker's evaluation computes them.
 *
 * Values follow Keras's definitions, with two choices of ours:
 *  - outputs that are logits (the loss's from_logits) are turned into
 *    probabilities first: sigmoid for one output, softmax otherwise;
 *  - AUC is the exact rank AUC (ROC) of the whole set, ties counting 1/2;
 *    Keras approximates it with num_thresholds buckets (200 by default),
 *    so its figures differ slightly. With several outputs, the labels are
 *    one-hot and all classes are flattened into one list of (score, 0/1)
 *    pairs, as Keras's AUC does with multi_label=False.
 * Pure functions: any thread may call them.
 */
#ifndef HC_EVAL_METRIC_H
#define HC_EVAL_METRIC_H

#include <stdint.h>

#define HC_MODEL_MAX_METRICS 8

enum hc_eval_metric_kind {
    HC_EM_ACCURACY,             /* "accuracy": binary or categorical by loss */
    HC_EM_BINARY_ACCURACY,      /* threshold */
    HC_EM_CATEGORICAL_ACCURACY,
    HC_EM_SPARSE_CATEGORICAL_ACCURACY,
    HC_EM_TOP_K,                /* top_k_categorical_accuracy, k */
    HC_EM_SPARSE_TOP_K,         /* sparse_top_k_categorical_accuracy, k */
    HC_EM_AUC,                  /* ROC, exact */
};

/* One metric of a model, as read from its file. */
struct hc_eval_metric {
    enum hc_eval_metric_kind kind;
    char name[48];              /* Keras's name: "auc", "accuracy" … (the
                                   config's "name" when given); printed as
                                   val_<name> */
    float threshold;            /* binary accuracy (0.5) */
    int k;                      /* top-k (5) */
};

/* Whether "accuracy" is binary for this loss and output width: Keras's rule,
 * binary_crossentropy with one output. loss_is_bce: the loss is
 * HC_LOSS_BCE. */
int hc_eval_metric_binary(int loss_is_bce, int n_out);

/*
 * The value of metric mt over n samples: out (n, c) the model's outputs,
 * labels (n) the integer labels (class index; with one output 0 or 1),
 * from_logits whether out holds logits, loss_is_bce as above. Into
 * *value; returns HC_OK, HC_ERR_NOMEM (AUC's sort buffer) or HC_ERR_INVAL
 * (n < 1 or c < 1). AUC with no positive or no negative pair is 0, as
 * Keras's. A NaN output (a model gone wrong) ties with nothing: the AUC
 * is then some value in [0, 1], and the call still returns.
 */
int hc_eval_metric_value(const struct hc_eval_metric *mt, int loss_is_bce,
                         int from_logits, const float *out,
                         const int32_t *labels, int n, int c, double *value);

#endif
