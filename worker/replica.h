/*
 * replica.h — one worker's gradient computation over all its devices.
 *
 * Two modes, one step call:
 *
 *   mirrored (data parallel, wk_replicas_new): every device holds a whole
 *     net (a replica). A step cuts the batch into contiguous slices, one per
 *     device, in proportion to each device's measured speed, runs forward
 *     and backward on all devices at once, and reduces the per-device
 *     gradients into one host vector weighted by samples:
 *         grads = Σ n_i · g_i / Σ n_i    (g_i: mean gradient of slice i)
 *     which is, to float rounding, the mean gradient one device computes
 *     over the whole batch. Loss and accuracy are combined the same way.
 *     Dropout draws the same masks as one device would (each replica's
 *     masks are positioned at its slice, wk_net_set_dropout_pos).
 *
 *   placed (model parallel, wk_replicas_new_placed): one net whose layers
 *     run on the devices the model file names ("device": "cpu:1"; "" = the
 *     worker's first device), activations and their gradients crossing
 *     between devices (nn.h, wk_net_new_placed). Same numbers as one device.
 *
 * Splitting. Each device's speed is an exponential moving average of its
 * own samples/s over training steps (weight 0.3 for the newest). Until
 * every device has been measured the split is equal. When the fastest
 * device alone is faster than all of them together (a device with a fixed
 * cost its share does not pay for: a CPU beside a GPU), it takes the whole
 * batch and the others none until a later try shows they pay again
 * (worker/share.h, wk_replicas_set_share). Slice sizes are the
 * largest-remainder rounding of B · w_i / Σ w (ties to the lower device
 * index), every device with w_i > 0 getting at least one sample when B is
 * at least their number — deterministic for given weights.
 *
 * Threads. A mirrored set over n ≥ 2 devices starts n − 1 threads once (at
 * creation) for devices 1 … n − 1; the calling thread computes device 0's
 * slice itself, hands the others their slices through a mutex and condition
 * variables, and waits for them. With one device (and in placed mode) a
 * step runs inline: it costs what wk_net_step costs. Steps allocate
 * nothing.
 *
 * A wk_replicas is used by one thread at a time. The devices must outlive
 * it; the model may be freed after creation. Parameters, inputs, labels,
 * targets and gradients are host pointers, as in nn.h.
 */
#ifndef WK_REPLICA_H
#define WK_REPLICA_H

#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "model.h"

struct wk_replicas;

/*
 * Mirrored replicas of model m, one per device of devs (opened), each for
 * batches of up to max_batch samples (any split fits). Layers' "device"
 * entries are ignored. Errors: HC_ERR_INVAL (NULL, no devices, a device
 * not opened, max_batch < 1), wk_net_new's errors (the message names the
 * device), HC_ERR_NOMEM, HC_ERR_IO (a thread could not be started).
 */
int wk_replicas_new(const struct hc_model *m, const struct wk_devices *devs,
                    int max_batch, struct wk_replicas **out);

/*
 * Explicit placement: layer i runs on the device m->layers[i].device names
 * ("" = devs' first device). HC_ERR_CONFIG when a layer names a device devs
 * lacks (the message names the layer, the device and the worker's
 * devices); otherwise as wk_replicas_new.
 */
int wk_replicas_new_placed(const struct hc_model *m,
                           const struct wk_devices *devs, int max_batch,
                           struct wk_replicas **out);

/* Placed when any layer of m names a device, else mirrored. */
int wk_replicas_open(const struct hc_model *m, const struct wk_devices *devs,
                     int max_batch, struct wk_replicas **out);

/* Stop the threads and free everything (NULL allowed). */
void wk_replicas_free(struct wk_replicas *r);

int wk_replicas_n(const struct wk_replicas *r);        /* devices */
int wk_replicas_is_placed(const struct wk_replicas *r);
size_t wk_replicas_input_size(const struct wk_replicas *r);   /* H·W·C */
size_t wk_replicas_output_size(const struct wk_replicas *r);  /* N */

/* Dropout seed (default m->seed) and restart of the step count: the masks
 * of step k are those of the k-th wk_net_step of one net after
 * wk_net_set_seed(seed). */
void wk_replicas_set_seed(struct wk_replicas *r, uint64_t seed);

/*
 * One training step over B samples (1 ≤ B ≤ max_batch): x (B, H, W, C),
 * labels (B) for sparse CCE or targets (B, N) for MSE, params (n_params).
 * Writes the mean gradient to grads (n_params), the mean loss to
 * *loss_mean and the number of correct samples to *correct (either may be
 * NULL). Errors: HC_ERR_INVAL (NULL, B out of range), or the first error
 * of a device in device order, its message prefixed by the device name.
 * grads is undefined after an error.
 */
int wk_replicas_step(struct wk_replicas *r, const float *params,
                     const float *x, const int *labels, const float *targets,
                     int B, float *grads, double *loss_mean, int *correct);

/* Evaluation over B samples, split like a step (no dropout; speeds are
 * not updated): *loss_sum is the SUM of the per-sample losses. */
int wk_replicas_predict(struct wk_replicas *r, const float *params,
                        const float *x, const int *labels,
                        const float *targets, int B, double *loss_sum,
                        int *correct);

/*
 * The model's output for each of B samples x (B, H, W, C) — softmax
 * probabilities when the output is softmax — into out (B, N) (host; N =
 * wk_replicas_output_size), row i for sample i: split like a step, each
 * device writing its slice's rows (placed: the one net, all B rows). No
 * dropout, no labels, speeds not updated. Errors as wk_replicas_predict;
 * out is undefined after an error.
 */
int wk_replicas_outputs(struct wk_replicas *r, const float *params,
                        const float *x, int B, float *out);

/* Measured samples/s of each device (wk_replicas_n entries), 0 where not
 * yet measured. Placed: every entry is the whole net's speed. */
void wk_replicas_speeds(const struct wk_replicas *r, double *out);

/* The slice sizes of the last step or predict (wk_replicas_n entries;
 * placed: B for every device). */
void wk_replicas_last_split(const struct wk_replicas *r, int *counts);

/* The slice sizes the next call with B samples would use. HC_ERR_INVAL for
 * B < 1. */
int wk_replicas_split(const struct wk_replicas *r, int B, int *counts);

/*
 * Fix the split: counts (wk_replicas_n entries, ≥ 0, not all 0) are
 * weights — a batch of Σ counts samples is cut exactly so, other sizes in
 * proportion; a device with weight 0 gets nothing. All 1: equal split.
 * counts = NULL returns to measured balancing. HC_ERR_INVAL for bad
 * counts. No effect in placed mode.
 */
int wk_replicas_set_split(struct wk_replicas *r, const int *counts);

/* 1 when the split is fixed (wk_replicas_set_split, or a model with batch
 * norm: its replicas always get equal slices, as Keras's
 * MirroredStrategy gives them, each normalised by its own moments). */
int wk_replicas_fixed(const struct wk_replicas *r);

/*
 * Measured balancing (no fixed split) also asks whether the devices are
 * faster together than the fastest alone, timing whole steps and trying
 * the other arrangement now and then (worker/share.h): a device whose
 * share does not pay for its fixed cost gets none until it would. on = 0
 * turns that off — every device always gets its share by speed (tests of
 * the proportional split); 1 (the default) turns it on again.
 */
void wk_replicas_set_share(struct wk_replicas *r, int on);

/*
 * Have each later wk_replicas_step call fn(arg, from) as soon as the
 * gradient's elements [from, n_params) are final (wk_net_on_grads), while
 * backward still computes the rest. Only a single net in host memory
 * (one CPU device, or layers placed on CPUs) and no test slowdown; 0 when
 * fn will not be called (mirrored devices are reduced at the end, a GPU's
 * gradients downloaded at the end), 1 when it will. fn NULL: no more.
 */
int wk_replicas_on_grads(struct wk_replicas *r,
                         void (*fn)(void *arg, size_t from), void *arg);

/*
 * Have every later step, predict and outputs call fn(arg, net, x, B)
 * before the forward of each net: the net, its slice's rows x (B, in_size)
 * and B. Its error fails the call. The trainer sets a batch's rows of the
 * model's row-sparse tables this way (tables.h). Only a single net (one
 * device, or placed): HC_ERR_CONFIG naming the devices otherwise. fn
 * NULL: none.
 */
struct wk_net;
int wk_replicas_before_forward(struct wk_replicas *r,
                               int (*fn)(void *arg, struct wk_net *net,
                                         const float *x, int B),
                               void *arg);

/* For tests: device dev sleeps (factor − 1) × its compute time after each
 * slice, so it looks factor times slower. factor ≥ 1 (1 = off).
 * HC_ERR_INVAL for a bad device or factor. No effect in placed mode. */
int wk_replicas_set_slowdown(struct wk_replicas *r, int dev, double factor);

#endif
