/*
 * clip.h — the gradient clipping that needs a whole variable or the whole
 * gradient, which no shard sees: Keras's clipnorm (each variable's
 * gradient scaled to an L2 norm of at most clipnorm) and global_clipnorm
 * (the whole gradient scaled to a global L2 norm of at most
 * global_clipnorm), done by the worker on its mean gradient before the
 * push. In sync this clips each worker's contribution before the shards
 * average them, as Keras clips per replica. clipvalue is elementwise and
 * done by the shards (ps/optimizer.h).
 *
 * Thread safety: every function is reentrant.
 */
#ifndef WK_CLIP_H
#define WK_CLIP_H

#include "model.h"

/* 1 when c clips by a norm (clipnorm or global_clipnorm set). */
int wk_clip_by_norm(const struct hc_optim_conf *c);

/*
 * Clip grads, the model's mean gradient laid out as hc_model_var_offset
 * says (m->n_params floats), in place, as Keras's base optimizer does
 * (over the trained variables only: a batch norm's moving statistics
 * carry the batch's moments, not a gradient, and are left as they are):
 *   clipnorm:        per variable, with s² = Σ g² and n = sqrt(s²):
 *                    when s² > 0, g ← (g·clipnorm) / max(n, clipnorm)
 *   global_clipnorm: n = sqrt(Σ over all variables of Σ g²),
 *                    g ← g·(global_clipnorm · min(1/n, 1/global_clipnorm))
 * in float32 as Keras's ops, but for the sums of squares, taken in double
 * (Keras's float32 reduction has no fixed order). Nothing when neither is
 * set. A NaN or infinite norm makes the whole gradient NaN under
 * global_clipnorm, as in Keras.
 */
void wk_clip_grads(const struct hc_model *m, float *grads);

#endif
