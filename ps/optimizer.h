/*
 * optimizer.h — the parameter server's optimizers, with the semantics of
 * tf.keras.optimizers (Keras 2.11+), as pure functions over float arrays.
 * Their settings — defaults, limits, the wire's and the store's forms — are
 * common/optim_conf.h's.
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
 * Thread safety: every function is reentrant.
 */
#ifndef PS_OPTIMIZER_H
#define PS_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "optim_conf.h"

/*
 * Number of slot arrays (each as long as the parameters) the optimizer
 * keeps per parameter: 0 for SGD, 1 for momentum (v), 2 for Adam (m, v).
 */
int ps_optim_slots(const struct hc_optim_conf *c);

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
 * hc_optim_validate. Allocates nothing; never fails.
 */
void ps_optim_apply(const struct hc_optim_conf *c, uint64_t step, size_t n,
                    const float *p_in, const float *g, float gscale,
                    const float *s0_in, const float *s1_in,
                    float *p_out, float *s0_out, float *s1_out);

#endif
