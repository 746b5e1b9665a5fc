/*
 * optimizer.h — the parameter server's optimizers, with the semantics of
 * tf.keras.optimizers (Keras 2.11+), as pure functions over float arrays,
 * and the JSON form of their settings (the wire's CreateVariables.optimizer
 * and the store's meta record).
 *
 * Update rules, for one element, with g the (scaled) gradient and every
 * vector operation elementwise. `step` counts the updates applied before
 * this one (Keras's optimizer.iterations), so t = step + 1.
 *
 *   SGD       p ← p + (−g·lr)                      (Keras SGD, momentum 0)
 *   Momentum  v ← (−g·lr) + v·μ                    (slot 0 = v)
 *             p ← p + v                             (nesterov false)
 *             p ← p + ((−g·lr) + v·μ)   with the new v  (nesterov true)
 *   Adam      lr_t = lr·sqrt(1 − β2^t) / (1 − β1^t)   (in double, then
 *                                                       rounded to float)
 *             m ← m + (g − m)·(1 − β1)             (slot 0 = m)
 *             v ← v + (g² − v)·(1 − β2)            (slot 1 = v)
 *             p ← p − (m·lr_t) / (sqrt(v) + ε)
 *
 * The Adam form is Keras's `Adam` (and TF's ApplyAdam): ε is added outside
 * the square root of the *uncorrected* v with the bias corrections folded
 * into lr_t — the "ε̂" form of Kingma & Ba, section 2 — not the textbook
 * p ← p − lr·m̂/(sqrt(v̂) + ε). The m and v updates are written as Keras
 * writes them; m + (g − m)(1 − β1) equals β1·m + (1 − β1)·g in exact
 * arithmetic. As in Keras, (1 − β) is computed in double from the decimal
 * value of β and then rounded to float32 (for β2 = 0.999 that is 0.001f,
 * not 1.0f − 0.999f); lr, μ, ε and the β in lr_t are float32 like Keras's
 * casts. lr_t is computed in double where Keras uses float32 pow/sqrt, so
 * results agree with Keras to float rounding (an ulp or two of the
 * update), not always bit for bit. Arithmetic is float32,
 * without fused multiply-add; vectorised and scalar code give identical
 * bits, so results do not depend on n, alignment or in-place use.
 *
 * Thread safety: every function is reentrant, except that cJSON's parser
 * (used by ps_optim_from_json) records its last error position in a
 * process-wide variable — harmless to the result, but a data race if two
 * threads parse at once.
 */
#ifndef PS_OPTIMIZER_H
#define PS_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "optim_conf.h"

/* Longest JSON text ps_optim_to_json writes, with its NUL. */
#define PS_OPTIM_JSON_MAX 256

/*
 * Number of slot arrays (each as long as the parameters) the optimizer
 * keeps per parameter: 0 for SGD, 1 for momentum (v), 2 for Adam (m, v).
 */
int ps_optim_slots(const struct hc_optim_conf *c);

/* "sgd", "momentum" or "adam"; "?" for a value out of range. */
const char *ps_optim_name(enum hc_optim type);

/*
 * Check the settings: a known type; learning_rate finite and >= 0;
 * momentum in [0, 1]; beta_1, beta_2 in [0, 1); epsilon finite and > 0
 * (Adam). `source` names the settings in the message ("CreateVariables").
 * Returns HC_OK or HC_ERR_CONFIG with a message naming the key.
 */
int ps_optim_validate(const struct hc_optim_conf *c, const char *source);

/* 1 when a and b describe the same optimizer (fields that the type does
 * not use are ignored), else 0. */
int ps_optim_equal(const struct hc_optim_conf *a, const struct hc_optim_conf *b);

/*
 * Apply one update to n elements: read p_in, g and the slots s0_in, s1_in,
 * write p_out, s0_out, s1_out. The gradient used is g·gscale (gscale = 1
 * for the plain gradient; the server passes 1/samples to average a sum).
 *
 * Each output may be the same array as its input (in place) or an array
 * that does not overlap any other argument; partial overlap is not
 * allowed. Slots the optimizer does not use (see ps_optim_slots) are
 * ignored and may be NULL; pass the used ones for every call. The first
 * update of fresh slots expects them zeroed. `c` must have passed
 * ps_optim_validate. Allocates nothing; never fails.
 */
void ps_optim_apply(const struct hc_optim_conf *c, uint64_t step, size_t n,
                    const float *p_in, const float *g, float gscale,
                    const float *s0_in, const float *s1_in,
                    float *p_out, float *s0_out, float *s1_out);

/*
 * Write the settings as one line of JSON text with Keras's names, e.g.
 *   {"type":"adam","learning_rate":0.001,"beta_1":0.9,"beta_2":0.999,
 *    "epsilon":1e-07}
 *   {"type":"sgd","learning_rate":0.01,"momentum":0.9,"nesterov":true}
 * Each number is the shortest decimal that reads back as the same float,
 * so ps_optim_from_json(ps_optim_to_json(c)) == c. `buf` receives at most
 * `cap` bytes including the NUL (PS_OPTIM_JSON_MAX always suffices).
 * Returns HC_OK, HC_ERR_LIMIT when cap is too small, or the code of
 * ps_optim_validate when c is not valid.
 */
int ps_optim_to_json(const struct hc_optim_conf *c, char *buf, size_t cap);

/*
 * Parse `len` bytes of JSON text (no NUL needed) into *out, with Keras's
 * names and defaults: "type" (required: "sgd", "momentum" or "adam"),
 * "learning_rate" (0.01 for SGD, 0.001 for Adam), "momentum" (0.0),
 * "nesterov" (false), "beta_1" (0.9), "beta_2" (0.999), "epsilon" (1e-7);
 * "name" is accepted and ignored. "sgd" with momentum > 0 becomes
 * HC_OPT_MOMENTUM, as Keras's SGD does; "momentum" requires momentum > 0.
 * Unknown keys, wrong types and values ps_optim_validate refuses are
 * errors. `source` names the text in messages ("store /data/ps0 meta").
 * Returns HC_OK or HC_ERR_CONFIG (message: source, key, what is wrong);
 * *out is unchanged on error.
 */
int ps_optim_from_json(const char *json, size_t len, const char *source,
                       struct hc_optim_conf *out);

#endif
