/*
 * optimizer.h — the parameter server's optimizers, with the update rules
 * of Keras 3 (keras/src/optimizers/, a file per class), as pure functions
 * over float arrays. Their settings — defaults, limits, the wire's and the
 * store's forms — are common/optim_conf.h's.
 *
 * Update rules, for one element, with g the (scaled) gradient and every
 * vector operation elementwise. `step` counts the updates applied before
 * this one (Keras's optimizer.iterations), so t = step + 1. Slots, in
 * their store order, are named as Keras names its optimizer variables.
 *
 *   weight decay (any type, weight_decay > 0, the variable not excluded;
 *             before the step, as Keras's _apply_weight_decay)
 *             p ← p − p·wd·lr
 *   SGD       p ← p + (−g·lr)                      (Keras SGD, momentum 0)
 *   Momentum  m ← (−g·lr) + m·μ                    [momentum]
 *             p ← p + m                             (nesterov false)
 *             p ← p + ((−g·lr) + m·μ)   with the new m  (nesterov true)
 *   Adam      lr_t = lr·sqrt(1 − β2^t) / (1 − β1^t)   (in double, then
 *                                                       rounded to float)
 *             m ← m + (g − m)·(1 − β1)             [momentum, velocity,
 *             v ← v + (g² − v)·(1 − β2)             velocity_hat if amsgrad]
 *             amsgrad: v̂ ← max(v̂, v), used for v below
 *             p ← p − (m·lr_t) / (sqrt(v) + ε)
 *   AdamW     Adam with weight decay 0.004 by default (Keras's AdamW)
 *   RMSprop   s ← ρ·s + (1 − ρ)·g²                 [velocity, momentum if
 *             centered: a ← ρ·a + (1 − ρ)·g,        μ > 0, average_gradient
 *                       d = (s − a²) + ε            if centered]
 *             else      d = s + ε
 *             inc = (lr·g) / sqrt(d)
 *             μ > 0: m ← μ·m + inc, p ← p − m;  else p ← p − inc
 *   Adagrad   A ← A + g²                            [accumulator, starting
 *             p ← p − (lr·g) / sqrt(A + ε)           at initial_accumulator_value]
 *   Nadam     u_t = β1·(1 − 0.5·0.96^t), u_t1 = β1·(1 − 0.5·0.96^(t+1))
 *             U_t = Π_{i=1..t} β1·(1 − 0.5·0.96^i)  (Keras's _u_product, a
 *             U_t1 = U_t·u_t1                        scalar variable; here a
 *             m, v as Adam but with 1 − β in float   function of t, see below)
 *             m̂ = (u_t1·m)/(1 − U_t1) + ((1 − u_t)·g)/(1 − U_t)
 *             v̂ = v / (1 − β2^t)                    [momentum, velocity]
 *             p ← p − (m̂·lr) / (sqrt(v̂) + ε)
 *   Adamax    m ← m + (g − m)·(1 − β1)             [momentum, norm]
 *             u ← max(β2·u, |g|)
 *             p ← p − (lr·m) / ((1 − β1^t)·(u + ε))
 *   Ftrl      with P = −learning_rate_power, l2' = l2 + β/(2·lr):
 *             [accumulator, starting at initial_accumulator_value; linear]
 *             gs = g + (2·l2_shrinkage)·p
 *             A' = A + g²
 *             L ← L + (gs − ((A'^P − A^P)/lr)·p)
 *             q = A'^P/lr + 2·l2'
 *             p ← (clip(L, −l1, l1) − L) / q;  A ← A'
 *
 * Rounding follows Keras's casts: the arithmetic is float32 without fused
 * multiply-add, Python-float constants (1 − β where Keras subtracts from
 * the Python value; 2·l2_shrinkage) are computed in double from the
 * decimal the user wrote and rounded once, as Keras does when they meet a
 * float32 tensor (for β2 = 0.999 that is 0.001f, not 1.0f − 0.999f; Nadam
 * casts β first, so there it is 1.0f − β). Powers of β and 0.96 are
 * float32 powf as Keras's ops.power; Adam's lr_t keeps its double form
 * (results agree with Keras to an ulp or two of the update). Every rule
 * runs four floats at a time (Ftrl at a learning_rate_power other than
 * −0.5 aside: powf per element); vector and scalar paths give the same
 * bits, so results do not depend on n, alignment or in-place use.
 *
 * Nadam's U_t is a product over every step so far in Keras's variable; with
 * β1 fixed it is a pure function of t, computed here as Keras accumulates
 * it (float32, one factor per step) and cached per thread, so a shard keeps
 * no scalar state beyond its step count. Once the product underflows to 0
 * it stays 0 (within a few hundred steps for β1 = 0.9).
 *
 * The Adam form is Keras's (and TF's ApplyAdam): ε outside the square root
 * of the *uncorrected* v with the bias corrections folded into lr_t — the
 * "ε̂" form of Kingma & Ba, section 2.
 *
 * Thread safety: every function is reentrant.
 */
#ifndef PS_OPTIMIZER_H
#define PS_OPTIMIZER_H

#include <stddef.h>
#include <stdint.h>

#include "optim_conf.h"

/* The most slot arrays any optimizer keeps (Adam with amsgrad, RMSprop
 * centered with momentum). */
#define PS_OPTIM_MAX_SLOTS 3

/* What one update needs besides the settings and the arrays. */
struct ps_optim_step {
    uint64_t step;      /* updates applied before this one */
    float gscale;       /* the gradient used is g·gscale (1: as given;
                           the server passes 1/samples to average a sum) */
    int decay;          /* 1: this variable takes weight decay
                           (hc_optim_decays), 0: it does not */
};

/*
 * Number of slot arrays (each as long as the parameters) the optimizer
 * keeps per parameter, 0..PS_OPTIM_MAX_SLOTS (see the list above).
 */
int ps_optim_slots(const struct hc_optim_conf *c);

/* Keras's name of slot `k` ("momentum", "velocity", "accumulator", …);
 * "?" for a slot the optimizer does not have. */
const char *ps_optim_slot_name(const struct hc_optim_conf *c, int k);

/* The value every element of slot `k` starts at: 0, or Adagrad's and
 * Ftrl's initial_accumulator_value for their accumulator. */
float ps_optim_slot_init(const struct hc_optim_conf *c, int k);

/*
 * Apply one update to n elements: read p_in, g and the slots s_in[k],
 * write p_out and s_out[k], for k below ps_optim_slots(c) (the other
 * entries are not read and may be NULL).
 *
 * Each output may be the same array as its input (in place) or an array
 * that does not overlap any other argument; partial overlap is not
 * allowed. Fresh slots must hold ps_optim_slot_init's values. `c` must
 * have passed hc_optim_validate. Allocates nothing; never fails.
 */
void ps_optim_apply(const struct hc_optim_conf *c,
                    const struct ps_optim_step *at, size_t n,
                    const float *p_in, const float *g,
                    const float *const *s_in, float *p_out,
                    float *const *s_out);

/* Nadam's u_product after `step` updates, as Keras's scalar variable
 * holds it (the factor of the list above, one a step, in float32); what
 * `hetps export --format keras` writes as that variable. */
float ps_optim_nadam_u_product(const struct hc_optim_conf *c, uint64_t step);

#endif
