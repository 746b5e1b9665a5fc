/*
 * clip.c — clipnorm and global_clipnorm on the worker's gradient before
 * the push (see clip.h for the formulas).
 */
#include "clip.h"

#include <math.h>

int wk_clip_by_norm(const struct hc_optim_conf *c)
{
    return c->clipnorm > 0.0f || c->global_clipnorm > 0.0f;
}

static double sum_squares(const float *g, size_t n)
{
    double s = 0;

    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * g[i];
    return s;
}

void wk_clip_grads(const struct hc_model *m, float *grads)
{
    const struct hc_optim_conf *c = &m->optim;

    if (c->clipnorm > 0.0f) {
        float cn = c->clipnorm;

        for (int v = 0; v < m->n_vars; v++) {
            float *g = grads + hc_model_var_offset(m, v);
            size_t n = m->vars[v].size;
            float s2, norm, d;

            if (m->vars[v].moving)
                continue;       /* batch moments, not a gradient */
            s2 = (float)sum_squares(g, n);
            norm = s2 > 0.0f ? sqrtf(s2) : s2;    /* as Keras's where */
            d = norm > cn ? norm : cn;
            for (size_t i = 0; i < n; i++)
                g[i] = (g[i] * cn) / d;
        }
    } else if (c->global_clipnorm > 0.0f) {
        float gc = c->global_clipnorm;
        double s2 = 0.0;
        float norm, inv_n, inv_c, scale;

        for (int v = 0; v < m->n_vars; v++)
            if (!m->vars[v].moving)
                s2 += sum_squares(grads + hc_model_var_offset(m, v),
                                  m->vars[v].size);
        norm = sqrtf((float)s2);
        inv_n = 1.0f / norm;
        inv_c = 1.0f / gc;
        scale = gc * (inv_n < inv_c ? inv_n : inv_c) + (norm - norm);
        for (int v = 0; v < m->n_vars; v++) {
            float *g = grads + hc_model_var_offset(m, v);

            if (m->vars[v].moving)
                continue;
            for (size_t i = 0; i < m->vars[v].size; i++)
                g[i] = g[i] * scale;
        }
    }
}
