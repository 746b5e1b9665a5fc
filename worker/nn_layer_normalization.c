/*
 * nn_layer_normalization.c — the worker's half of layer_normalization
 * (the row in common/layer_layer_normalization.c): the backend's
 * layernorm_forward over rows of the last axis (B·H·W rows of C for an
 * image, B rows of N for a flat input), keeping the normalised values
 * (cols) and each row's 1/σ (aux) for backward, which is
 * layernorm_backward: gamma's and beta's gradients and the input's. Its
 * variables: gamma as the kernel (off_w), beta as the bias (off_b), each
 * optional (scale, center).
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    const size_t n = (size_t)in->dims[in->rank - 1];
    int rv;

    (void)out;
    if (!(s->epsilon > 0))
        return hc_err_set(HC_ERR_CONFIG, "%s: epsilon = %g; must be above 0",
                          c->where, (double)s->epsilon);
    l->eps = s->epsilon;
    l->ws_size = nn_shape_size(in);
    l->aux_size = nn_shape_size(in) / n;
    if (s->var_kernel >= 0 &&
        (rv = nn_check_var(c, s->var_kernel, "gamma", n, &l->off_w,
                           &l->n_w)))
        return rv;
    if (s->var_bias >= 0) {
        if ((rv = nn_check_var(c, s->var_bias, "beta", n, &l->off_b,
                               &l->n_b)))
            return rv;
        l->reg_b = c->m->vars[s->var_bias].reg;
    }
    return HC_OK;
}

static int alloc(struct nn_layer *l, size_t B)
{
    int rv;

    if ((rv = nn_alloc_f(l->be, &l->out, B * l->out_size)) ||
        (rv = nn_alloc_f(l->be, &l->cols, B * l->ws_size)))
        return rv;
    return nn_alloc_f(l->be, &l->aux, B * l->aux_size);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    (void)net;
    (void)training;
    wk_be_layernorm_forward(l->be, B * (int)l->aux_size, l->out_c, l->eps,
                            x, l->n_w ? params + l->doff_w : NULL,
                            l->n_b ? params + l->doff_b : NULL, l->out,
                            l->cols, l->aux);
    l->w2 = l->n_w ? params + l->doff_w : NULL;
}

static void backward_params(struct nn_layer *l, float *grads, float *dy,
                            int B)
{
    /* The parameters' gradients only; the input's follows. */
    if (!l->n_w && !l->n_b)
        return;
    wk_be_layernorm_backward(l->be, B * (int)l->aux_size, l->out_c, dy,
                             l->cols, l->aux, l->w2, NULL,
                             l->n_w ? grads + l->doff_w : NULL,
                             l->n_b ? grads + l->doff_b : NULL);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    (void)params;
    wk_be_layernorm_backward(l->be, B * (int)l->aux_size, l->out_c, dy,
                             l->cols, l->aux, l->w2, dx, NULL, NULL);
    return 1;
}

const struct nn_kind nn_layer_normalization = {
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
    .backward_input = backward_input,
};
