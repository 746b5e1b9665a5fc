/*
 * nn.h — a model's network on one backend: forward, loss and backward.
 *
 * A wk_net is built once from a model (common/model.h: a graph of layers
 * in topological order, one input) for one backend and a maximum batch
 * size; it allocates every buffer it will need then — activations (B, H,
 * W, C) per layer, the im2col workspace of each convolution, max-pool
 * argmax indices, the activation-gradient buffers its plan needs (reused
 * by liveness: two for a chain) — so the training loop allocates
 * nothing. Where a layer's output has several readers their gradients are
 * summed. Layers call the backend's ops (backend.h) only.
 *
 * Several inputs: a sample is one row of x holding the model's inputs
 * one after another in the model's order (inputs[0]'s floats, then
 * inputs[1]'s, …; each NHWC or flat as its shape), so whatever moves
 * whole samples (batches, shards, replicas' slices) keeps a sample's
 * inputs together; the net regroups a batch input by input before its
 * first layer. wk_net_input_size is the row's length, the sum of the
 * inputs' sizes.
 *
 * Parameters and gradients are flat float arrays of model->n_params, the
 * variables one after the other in definition order (the order of
 * hc_model_var_offset), each in Keras layout: conv kernel (kh, kw, in, out),
 * dense kernel (in, out), biases (out). All pointers in this API are HOST
 * pointers; on a backend whose memory is not host memory the net copies
 * them in and out (on the CPU backend it uses them in place).
 *
 * Supported losses (model.h, enum hc_loss; anything else is rejected by
 * wk_net_new), the output always flat (N):
 *   - sparse and categorical cross-entropy: the last layer a dense or
 *     activation layer with softmax activation, fused with the loss
 *     (logsumexp(z) − Σ t·z, stable for any logits), or with from_logits
 *     a linear one (the output is then the logits). Sparse takes labels,
 *     ints in [0, N); categorical one-hot targets, made from the labels
 *     when none are given, then label smoothing.
 *   - binary cross-entropy (probabilities clipped as Keras, or logits),
 *     mean squared and absolute error, Huber: any output activation,
 *     float targets (B, N) — or, given labels only, targets made from
 *     them: one-hot over N > 1 outputs, the label itself for one output
 *     (0 or 1 for binary cross-entropy) — then label smoothing (binary).
 *     Per-sample loss is the mean over the N outputs, as Keras.
 * Gradients are those of the MEAN loss over the batch (Keras semantics).
 * "correct" counts accuracy as Keras's "accuracy" metric resolves for the
 * loss: argmax(output) == label for sparse CCE; for the others
 * argmax(output) == argmax(target) when N > 1, (output > 0.5) ==
 * (target > 0.5) when N = 1 (output > 0 from logits).
 *
 * Dropout is active only in training forwards; its mask comes from the
 * backend's counter-based hash with a seed derived from the net's seed
 * (wk_net_set_seed, default model->seed), the layer index and a counter of
 * training forwards, so a run is reproducible and backward re-derives the
 * mask instead of storing it.
 *
 * Explicit placement (wk_net_new_placed): each layer may run on its own
 * backend, with its parameters and gradients there (the net copies each
 * layer's slice of params in and of grads out). Where a layer reads a
 * node on a different backend, the activation crosses forward and its
 * gradient backward: by pointer when both are host memory, else by the
 * backends' upload/download (through a host staging buffer when neither
 * is host memory). Results equal those of one backend.
 *
 * A net is used by one thread at a time. The model may be freed after
 * wk_net_new; the backends must outlive the net.
 */
#ifndef WK_NN_H
#define WK_NN_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "model.h"

struct wk_net;

/*
 * Build the net of model m on backend be for batches of up to max_batch
 * samples. Checks the model: every layer reads 1 node (a merge 2 or more)
 * that comes before it, its input shape matches that node's output,
 * output shapes agree with the layer settings, each variable has
 * the size its layer needs and belongs to exactly one layer, and the loss
 * and output activation are a supported pair. Errors: HC_ERR_INVAL (NULL
 * argument, max_batch < 1), HC_ERR_CONFIG (unsupported model; the message
 * names the model and layer and says what to change), HC_ERR_MISMATCH
 * (inconsistent shapes or variable sizes), HC_ERR_LIMIT (a batch tensor
 * over 2^31 − 1 elements), HC_ERR_NOMEM.
 */
int wk_net_new(const struct hc_model *m, struct wk_backend *be, int max_batch,
               struct wk_net **out);

/*
 * The same with layer i of m run on layer_be[i] (m->n_layers entries, none
 * NULL; equal pointers are one backend). Layers on different backends run
 * one after the other on the calling thread. Errors as wk_net_new, and
 * HC_ERR_INVAL for a NULL entry (the message names the layer),
 * HC_ERR_LIMIT for more than 16 distinct backends.
 */
int wk_net_new_placed(const struct hc_model *m,
                      struct wk_backend *const *layer_be, int max_batch,
                      struct wk_net **out);
void wk_net_free(struct wk_net *net);              /* NULL allowed */

/* Floats per sample of the input (H·W·C; several inputs: the sum of
 * theirs) and of the output (N). */
size_t wk_net_input_size(const struct wk_net *net);
/* Floats per sample that a training step must hold from forward to
 * backward: the input and every layer's output (the least a net can keep
 * without recomputing; what its memory is measured against). */
size_t wk_net_kept_size(const struct wk_net *net);
/* Floats per sample of the output gradients a training step's backward
 * must hold at once at its widest point, each at its own size (the plan's
 * buffers are each the device's largest activation). */
size_t wk_net_grad_peak(const struct wk_net *net);
size_t wk_net_output_size(const struct wk_net *net);

/* Seed of dropout masks; also restarts the counter of training forwards,
 * so the same seed reproduces the same masks. */
void wk_net_set_seed(struct wk_net *net, uint64_t seed);

/*
 * For a net that computes a slice of a larger batch (replica.h): the next
 * training forward draws the dropout masks that training forward number
 * forwards + 1 after wk_net_set_seed(net, seed) would draw for samples
 * first_sample, first_sample + 1, … of its batch, so splitting a batch
 * across nets changes no mask. first_sample holds until the next call
 * (wk_net_set_seed sets it to 0).
 */
void wk_net_set_dropout_pos(struct wk_net *net, uint64_t seed,
                            uint64_t forwards, size_t first_sample);

/*
 * Forward pass of B samples x (B, H, W, C) (row-major, NHWC, like the
 * model's input_shape; several inputs: (B, in_size) rows as above)
 * with parameters params (n_params). training = 1 applies dropout. The parameters must stay unchanged until the matching
 * wk_net_backward. Errors: HC_ERR_INVAL (B outside [1, max_batch], NULL),
 * or a device error.
 */
int wk_net_forward(struct wk_net *net, const float *params, const float *x,
                   int B, int training);

/* Copy the output (B, N) of the last forward — probabilities when the
 * output is softmax — into out. HC_ERR_INVAL before any forward. */
int wk_net_output(struct wk_net *net, float *out);

/*
 * Loss of the last forward: labels (B) for sparse CCE; targets (B, N) for
 * the others, or labels to make them from (see the top of this file; the
 * other may be NULL). Sets *loss_sum to the sum over the batch of the
 * per-sample losses, each with the regularizers' penalty at the forward's
 * parameters added (so the mean is Keras's reported loss: the batch's
 * mean plus the penalty), and *correct to the number of correct samples
 * (either pointer may be NULL). Errors: HC_ERR_INVAL (no forward yet, the
 * needed array missing), HC_ERR_DATA (a label that does not fit: the
 * message gives the sample and the value).
 */
int wk_net_loss(struct wk_net *net, const int *labels, const float *targets,
                double *loss_sum, int *correct);

/*
 * Gradient of the mean loss of the last wk_net_loss, the regularizers'
 * penalty included (l1·sign(w) + 2·l2·w on each regularized variable),
 * with respect to every parameter, written to grads (n_params;
 * overwritten, not accumulated).
 * params must be the vector given to the forward. Errors: HC_ERR_INVAL
 * when wk_net_loss did not follow the last forward, or a device error.
 */
int wk_net_backward(struct wk_net *net, const float *params, float *grads);

/*
 * Have every later wk_net_backward call fn(arg, from) on its own thread as
 * soon as the gradient's elements [from, n_params) are final: after each
 * layer's parameter gradients (before its input gradient), the last layers
 * first — so a push can send them while backward computes the rest. The
 * parameters are read until backward returns. Only when every device of the
 * net works in host memory and the layers' parameters lie in layer order;
 * otherwise (a GPU's gradients arrive in one download at the end) fn is
 * never called and 0 is returned. 1 when it will be called. fn NULL: no
 * more calls.
 */
int wk_net_on_grads(struct wk_net *net, void (*fn)(void *arg, size_t from),
                    void *arg);

/* One training step: forward (training), loss, backward. *loss_mean is the
 * mean loss over the batch, *correct the number of correct samples (either
 * may be NULL). Errors as the three calls. */
int wk_net_step(struct wk_net *net, const float *params, const float *x,
                const int *labels, const float *targets, int B, float *grads,
                double *loss_mean, int *correct);

/* Evaluation: forward without dropout and the loss; *loss_sum is the SUM
 * over the B samples so batches can be added up. */
int wk_net_predict(struct wk_net *net, const float *params, const float *x,
                   const int *labels, const float *targets, int B,
                   double *loss_sum, int *correct);

/*
 * Row-sparse tables (nn_embedding.c). An embedding layer reads a model
 * input of int64 ids (N a sample; in x each id's 8 bytes as HC_ID_FLOATS
 * floats, model.h) and looks them up in a table the net does not hold:
 * before each forward the caller sets the step's rows of every table —
 * the batch's unique ids' rows (pulled from the shards) and each
 * position's row among them — and after backward reads their gradients,
 * summed by row here (repeated ids' gradients added in one place).
 *
 * wk_net_tables: the number of embedding layers, their descriptions in
 * t[0 .. min(n, max)) in layer order.
 */
struct wk_net_table {
    int layer;              /* the embedding's layer index */
    int var;                /* its table: the model's variable */
    int input;              /* the model input of ids it reads */
    int n_ids;              /* ids a sample (N) */
    int dim;                /* floats a row (output_dim) */
};
int wk_net_tables(const struct wk_net *net, struct wk_net_table *t, int max);

/*
 * The rows of table k (k-th of wk_net_tables) for the next forward of B
 * samples: rows (n_rows, dim) host memory, inv (B·N) each position's row
 * in [0, n_rows) (hc_rowmap's inv). Copied: the arrays may be reused at
 * once. Errors: HC_ERR_INVAL (no table k, B outside [1, max_batch],
 * n_rows 0 or over B·N, an inv out of range: named), a device error.
 */
int wk_net_set_rows(struct wk_net *net, int k, const float *rows,
                    size_t n_rows, const int32_t *inv, int B);

/*
 * After wk_net_backward: the gradient of the batch's mean loss (the
 * dense gradients' scale) with respect to each of table k's rows set for
 * the step, grad (n_rows, dim) host memory, overwritten. Errors:
 * HC_ERR_INVAL (no table k, no backward since its rows were set), a
 * device error.
 */
int wk_net_rows_grad(struct wk_net *net, int k, float *grad);

/* The dropout seed layer `layer` used in the last forward (0 when it did
 * not drop; with wk_net_set_dropout_pos already moved to first_sample);
 * for tests and debugging, with wk_dropout_hash. */
uint64_t wk_net_dropout_seed(const struct wk_net *net, int layer);

#endif
