/*
 * nn_build.c — building a wk_net from a model: checking every layer's
 * shapes, variables and settings (each message names the model and the
 * layer), choosing the supported loss, fusing conv2d → maxpool2d, and
 * allocating every buffer of the steady state once.
 */
#include "nn_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

static const char *type_name(enum hc_layer_type t)
{
    switch (t) {
    case HC_LAYER_CONV2D: return "conv2d";
    case HC_LAYER_MAXPOOL2D: return "maxpool2d";
    case HC_LAYER_FLATTEN: return "flatten";
    case HC_LAYER_DENSE: return "dense";
    case HC_LAYER_DROPOUT: return "dropout";
    case HC_LAYER_ACTIVATION: return "activation";
    }
    return "unknown";
}

static const char *act_name(enum hc_act a)
{
    switch (a) {
    case HC_ACT_LINEAR: return "linear";
    case HC_ACT_RELU: return "relu";
    case HC_ACT_SIGMOID: return "sigmoid";
    case HC_ACT_TANH: return "tanh";
    case HC_ACT_SOFTMAX: return "softmax";
    }
    return "unknown";
}

static size_t shape_size(const struct hc_shape *s)
{
    size_t n = 1;
    int i;

    for (i = 0; i < s->rank && i < 3; i++)
        n *= (size_t)(s->dims[i] > 0 ? s->dims[i] : 0);
    return n;
}

static int shape_eq(const struct hc_shape *a, const struct hc_shape *b)
{
    int i;

    if (a->rank != b->rank)
        return 0;
    for (i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i])
            return 0;
    return 1;
}

static const char *shape_str(const struct hc_shape *s, char *buf, size_t len)
{
    if (s->rank == 3)
        snprintf(buf, len, "(%d, %d, %d)", s->dims[0], s->dims[1], s->dims[2]);
    else if (s->rank == 1)
        snprintf(buf, len, "(%d)", s->dims[0]);
    else
        snprintf(buf, len, "(rank %d)", s->rank);
    return buf;
}

/* ---- building the net: checks ---- */

/* Where the messages of wk_net_new point: "model NAME, layer NAME". */
struct ctx_names {
    char layer[HC_NAME_MAX + 32];
};

static const char *model_name(const struct hc_model *m)
{
    return m->name[0] ? m->name : "(unnamed)";
}

/* Check variable v of the layer: in range, `size` floats; record it as
 * used (owner[v]) and return its offset in *off. */
static int check_var(const struct hc_model *m, const struct ctx_names *cn,
                     const size_t *var_off, int *owner, int li, int v,
                     const char *what, size_t size, size_t *off)
{
    if (v < 0 || v >= m->n_vars)
        return hc_err_set(HC_ERR_MISMATCH,
                          "model %s, %s: %s variable index %d is not one of "
                          "the model's %d variables", model_name(m), cn->layer,
                          what, v, m->n_vars);
    if (m->vars[v].size != size)
        return hc_err_set(HC_ERR_MISMATCH,
                          "model %s, %s: %s variable %s has %zu values; the "
                          "layer needs %zu", model_name(m), cn->layer, what,
                          m->vars[v].name, m->vars[v].size, size);
    if (owner[v] >= 0)
        return hc_err_set(HC_ERR_MISMATCH,
                          "model %s, %s: variable %s is already used by layer "
                          "%d; each variable belongs to one layer",
                          model_name(m), cn->layer, m->vars[v].name, owner[v]);
    owner[v] = li;
    *off = var_off[v];
    return HC_OK;
}

/* Check layer spec s (index li) against its input shape and fill l. */
static int setup_layer(const struct hc_model *m, const struct ctx_names *cn,
                       const size_t *var_off, int *owner, int li,
                       const struct hc_shape *in, struct nn_layer *l)
{
    const struct hc_layer_spec *s = &m->layers[li];
    struct hc_shape want = *in;
    char b1[48], b2[48];
    int rv, C;

    l->type = s->type;
    snprintf(l->name, sizeof l->name, "%s", cn->layer);
    l->act = s->act;
    l->off_w = l->off_b = NO_VAR;
    if ((unsigned)s->act > HC_ACT_SOFTMAX)
        return hc_err_set(HC_ERR_CONFIG, "model %s, %s: unknown activation %d",
                          model_name(m), cn->layer, (int)s->act);
    if (!shape_eq(&s->in, in))
        return hc_err_set(HC_ERR_MISMATCH,
                          "model %s, %s: input shape %s does not match the "
                          "previous output %s", model_name(m), cn->layer,
                          shape_str(&s->in, b1, sizeof b1),
                          shape_str(in, b2, sizeof b2));
    C = in->rank == 3 ? in->dims[2] : in->dims[0];
    switch (s->type) {
    case HC_LAYER_CONV2D:
    case HC_LAYER_MAXPOOL2D: {
        int conv = s->type == HC_LAYER_CONV2D;
        int kh = conv ? s->kh : s->ph, kw = conv ? s->kw : s->pw;
        int sh = s->sh ? s->sh : (conv ? 1 : kh);
        int sw = s->sw ? s->sw : (conv ? 1 : kw);

        if (in->rank != 3)
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s, %s: %s needs an (H, W, C) input, "
                              "got %s", model_name(m), cn->layer,
                              type_name(s->type), shape_str(in, b1, sizeof b1));
        if (conv && s->filters < 1)
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s, %s: filters = %d; must be at least 1",
                              model_name(m), cn->layer, s->filters);
        if (wk_geom_init(&l->g, 1, in->dims[0], in->dims[1], C, kh, kw, sh, sw,
                         s->same))
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s, %s: window %d×%d, strides %d×%d and "
                              "padding \"%s\" do not fit the input %s",
                              model_name(m), cn->layer, kh, kw, sh, sw,
                              s->same ? "same" : "valid",
                              shape_str(in, b1, sizeof b1));
        want.rank = 3;
        want.dims[0] = l->g.OH;
        want.dims[1] = l->g.OW;
        want.dims[2] = conv ? s->filters : C;
        if (conv) {
            size_t ksize = (size_t)kh * kw * C * s->filters;

            l->direct = kh == 1 && kw == 1 && sh == 1 && sw == 1;
            if ((rv = check_var(m, cn, var_off, owner, li, s->var_kernel,
                                "kernel", ksize, &l->off_w)))
                return rv;
        }
        break;
    }
    case HC_LAYER_FLATTEN:
        want.rank = 1;
        want.dims[0] = (int)shape_size(in);
        break;
    case HC_LAYER_DENSE:
        if (in->rank != 1)
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s, %s: dense needs a flat input, got %s; "
                              "add a flatten layer before it", model_name(m),
                              cn->layer, shape_str(in, b1, sizeof b1));
        if (s->units < 1)
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s, %s: units = %d; must be at least 1",
                              model_name(m), cn->layer, s->units);
        want.rank = 1;
        want.dims[0] = s->units;
        l->units = s->units;
        if ((rv = check_var(m, cn, var_off, owner, li, s->var_kernel, "kernel",
                            (size_t)C * s->units, &l->off_w)))
            return rv;
        break;
    case HC_LAYER_DROPOUT:
        if (!(s->rate >= 0.0f && s->rate < 1.0f))
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s, %s: rate = %g; must be in [0, 1)",
                              model_name(m), cn->layer, (double)s->rate);
        l->rate = s->rate;
        break;
    case HC_LAYER_ACTIVATION:
        break;
    default:
        return hc_err_set(HC_ERR_CONFIG, "model %s, %s: unknown layer type %d",
                          model_name(m), cn->layer, (int)s->type);
    }
    if (!shape_eq(&s->out, &want))
        return hc_err_set(HC_ERR_MISMATCH,
                          "model %s, %s: output shape %s disagrees with the "
                          "layer's settings, which give %s", model_name(m),
                          cn->layer, shape_str(&s->out, b1, sizeof b1),
                          shape_str(&want, b2, sizeof b2));
    if ((s->type == HC_LAYER_CONV2D || s->type == HC_LAYER_DENSE) &&
        s->var_bias >= 0) {
        int n = want.rank == 3 ? want.dims[2] : want.dims[0];

        if ((rv = check_var(m, cn, var_off, owner, li, s->var_bias, "bias",
                            (size_t)n, &l->off_b)))
            return rv;
    }
    l->in_size = (int)shape_size(in);
    l->out_size = (int)shape_size(&want);
    l->out_c = want.rank == 3 ? want.dims[2] : want.dims[0];
    return HC_OK;
}

/* Check the whole model and fill net's layers; no allocation. */
static int setup_model(struct wk_net *net, const struct hc_model *m)
{
    size_t var_off[HC_MODEL_MAX_VARS], sum = 0, lim;
    int owner[HC_MODEL_MAX_VARS];
    struct ctx_names cn;
    struct hc_shape cur = m->input;
    char b1[48];
    int i, rv;

    if (m->n_layers < 1 || m->n_layers > HC_MODEL_MAX_LAYERS)
        return hc_err_set(HC_ERR_CONFIG,
                          "model %s: %d layers; a model has 1 to %d",
                          model_name(m), m->n_layers, HC_MODEL_MAX_LAYERS);
    if (m->n_vars < 0 || m->n_vars > HC_MODEL_MAX_VARS)
        return hc_err_set(HC_ERR_CONFIG, "model %s: %d variables; at most %d",
                          model_name(m), m->n_vars, HC_MODEL_MAX_VARS);
    if ((m->input.rank != 1 && m->input.rank != 3) ||
        shape_size(&m->input) == 0 || m->input.dims[0] < 1 ||
        (m->input.rank == 3 && (m->input.dims[1] < 1 || m->input.dims[2] < 1)))
        return hc_err_set(HC_ERR_CONFIG,
                          "model %s: input shape %s; use (N) or (H, W, C) "
                          "with positive sizes", model_name(m),
                          shape_str(&m->input, b1, sizeof b1));
    for (i = 0; i < m->n_vars; i++) {
        var_off[i] = sum;
        sum += m->vars[i].size;
        owner[i] = -1;
    }
    if (sum != m->n_params)
        return hc_err_set(HC_ERR_MISMATCH,
                          "model %s: n_params = %zu but its variables hold "
                          "%zu values", model_name(m), m->n_params, sum);
    net->n_layers = m->n_layers;
    net->first_param = -1;
    for (i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *s = &m->layers[i];

        snprintf(cn.layer, sizeof cn.layer, "layer %d (%s)", i,
                 s->name[0] ? s->name : type_name(s->type));
        if ((rv = setup_layer(m, &cn, var_off, owner, i, &cur,
                              &net->layers[i])))
            return rv;
        if (net->first_param < 0 && net->layers[i].off_w != NO_VAR)
            net->first_param = i;
        cur = s->out;
    }
    for (i = 0; i < m->n_vars; i++)
        if (owner[i] < 0)
            return hc_err_set(HC_ERR_MISMATCH,
                              "model %s: variable %s belongs to no layer",
                              model_name(m), m->vars[i].name);
    if (net->first_param < 0)
        return hc_err_set(HC_ERR_CONFIG,
                          "model %s has no layer with parameters; add a dense "
                          "or conv2d layer", model_name(m));
    net->in_size = shape_size(&m->input);
    net->out_size = shape_size(&cur);
    net->n_params = m->n_params;
    net->loss = m->loss;
    /* Batch tensors are indexed with int (GEMM sizes, argmax indices). */
    lim = (size_t)INT32_MAX / (size_t)net->max_batch;
    if (net->in_size > lim)
        return hc_err_set(HC_ERR_LIMIT, "model %s: input of %zu floats × batch "
                          "%d exceeds 2^31 − 1", model_name(m), net->in_size,
                          net->max_batch);
    for (i = 0; i < m->n_layers; i++) {
        const struct nn_layer *l = &net->layers[i];
        size_t k = l->type == HC_LAYER_CONV2D ? (size_t)l->g.kh * l->g.kw * l->g.C
                                              : 1;

        if ((size_t)l->out_size > lim ||
            (size_t)l->g.OH * l->g.OW * k > lim)
            return hc_err_set(HC_ERR_LIMIT,
                              "model %s, %s: its batch tensors exceed "
                              "2^31 − 1 floats at batch %d; use a smaller "
                              "batch", model_name(m), l->name,
                              net->max_batch);
    }
    return HC_OK;
}

/* The supported loss / output pairs (see nn.h). */
static int setup_loss(struct wk_net *net, const struct hc_model *m)
{
    struct nn_layer *last = &net->layers[net->n_layers - 1];
    const struct hc_layer_spec *s = &m->layers[net->n_layers - 1];
    char b1[48];

    switch (m->loss) {
    case HC_LOSS_SPARSE_CCE:
        if (s->out.rank != 1)
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s: sparse_categorical_crossentropy needs "
                              "a flat output (N), but %s, the last layer, "
                              "outputs %s; end with flatten and a dense "
                              "softmax layer",
                              model_name(m), last->name,
                              shape_str(&s->out, b1, sizeof b1));
        if (!((s->type == HC_LAYER_DENSE || s->type == HC_LAYER_ACTIVATION) &&
              s->act == HC_ACT_SOFTMAX))
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s: sparse_categorical_crossentropy needs "
                              "a softmax output, but %s, the last layer, has "
                              "activation \"%s\"; set \"activation\": "
                              "\"softmax\" on a last dense layer, or use loss "
                              "\"mse\"", model_name(m), last->name,
                              act_name(s->act));
        if (m->n_classes > 0 && (size_t)m->n_classes != net->out_size)
            return hc_err_set(HC_ERR_MISMATCH,
                              "model %s: n_classes = %d but the output has %zu "
                              "units", model_name(m), m->n_classes,
                              net->out_size);
        net->fused = 1;
        /* The dense layer outputs logits; softmax is the loss's. */
        last->act = HC_ACT_LINEAR;
        return HC_OK;
    case HC_LOSS_MSE:
        return HC_OK;
    }
    return hc_err_set(HC_ERR_CONFIG, "model %s: unknown loss %d",
                      model_name(m), (int)m->loss);
}

/*
 * conv2d → maxpool2d: max commutes with a per-channel bias and with any
 * non-decreasing activation (linear, relu, sigmoid, tanh), so the conv
 * leaves its output raw and the pool applies bias and activation to its
 * four times smaller output: act(max(z) + b) = max(act(z + b)), bit for
 * bit in float too, since rounding is monotonic. In backward the
 * activation derivative and the bias gradient are taken on the pooled
 * gradient and the scatter to the argmax does the rest: the conv's other
 * outputs get no gradient either way. (Where relu ties a window at 0 the
 * argmax may differ from the unfused one, but its gradient is 0.)
 */
static void fuse_conv_pool(struct wk_net *net)
{
    int i;

    for (i = 0; i + 1 < net->n_layers; i++) {
        struct nn_layer *c = &net->layers[i], *p = &net->layers[i + 1];

        if (c->type != HC_LAYER_CONV2D || p->type != HC_LAYER_MAXPOOL2D ||
            c->act == HC_ACT_SOFTMAX)
            continue;
        c->pre_pool = 1;
        p->post_act = 1;
        p->act = c->act;
        p->off_b = c->off_b;
    }
}

/* ---- building the net: buffers ---- */

static int alloc_f(struct wk_net *net, float **p, size_t n)
{
    return wk_be_alloc(net->be, n * sizeof **p, (void **)p);
}

static int setup_buffers(struct wk_net *net)
{
    const size_t B = (size_t)net->max_batch;
    size_t max_act = net->in_size;
    int i, rv;

    for (i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];
        int own = l->type != HC_LAYER_FLATTEN;

        if ((size_t)l->out_size > max_act)
            max_act = (size_t)l->out_size;
        if (l->type == HC_LAYER_DROPOUT && l->rate == 0.0f)
            own = 0;
        if (own && (rv = alloc_f(net, &l->out, B * l->out_size)))
            return rv;
        if (l->type == HC_LAYER_CONV2D && !l->direct &&
            (rv = alloc_f(net, &l->cols, B * l->g.OH * l->g.OW * l->g.kh *
                                             l->g.kw * l->g.C)))
            return rv;
        if (l->type == HC_LAYER_MAXPOOL2D &&
            (rv = wk_be_alloc(net->be, B * l->out_size * sizeof *l->idx,
                              (void **)&l->idx)))
            return rv;
    }
    for (i = 0; i < 2; i++)
        if ((rv = alloc_f(net, &net->dbuf[i], B * max_act)))
            return rv;
    if (net->fused &&
        net->layers[net->n_layers - 1].type == HC_LAYER_DENSE &&
        (rv = alloc_f(net, &net->probs, B * net->out_size)))
        return rv;
    if ((rv = alloc_f(net, &net->loss_d, B)) ||
        (rv = alloc_f(net, &net->hit_d, B)))
        return rv;
    if (net->be->host_memory) {
        net->loss_h = net->loss_d;
        net->hit_h = net->hit_d;
        return HC_OK;
    }
    net->loss_h = malloc(B * sizeof *net->loss_h);
    net->hit_h = malloc(B * sizeof *net->hit_h);
    if (!net->loss_h || !net->hit_h)
        return hc_err_set(HC_ERR_NOMEM, "net: out of host memory");
    if ((rv = alloc_f(net, &net->x_d, B * net->in_size)) ||
        (rv = alloc_f(net, &net->params_d, net->n_params)) ||
        (rv = alloc_f(net, &net->grads_d, net->n_params)))
        return rv;
    if (net->loss == HC_LOSS_MSE)
        return alloc_f(net, &net->targets_d, B * net->out_size);
    return wk_be_alloc(net->be, B * sizeof *net->labels_d,
                       (void **)&net->labels_d);
}

int wk_net_new(const struct hc_model *m, struct wk_backend *be, int max_batch,
               struct wk_net **out)
{
    struct wk_net *net = NULL;
    int rv;

    if (!out || !m || !be)
        return hc_err_set(HC_ERR_INVAL, "wk_net_new: NULL argument");
    *out = NULL;
    if (max_batch < 1)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_net_new: max_batch = %d; must be at least 1",
                          max_batch);
    net = calloc(1, sizeof *net);
    if (!net)
        return hc_err_set(HC_ERR_NOMEM, "wk_net_new: out of memory");
    net->be = be;
    net->max_batch = max_batch;
    net->seed = m->seed;
    if ((rv = setup_model(net, m)) || (rv = setup_loss(net, m)))
        goto fail;
    fuse_conv_pool(net);
    if ((rv = setup_buffers(net)))
        goto fail;
    *out = net;
    return HC_OK;
fail:
    wk_net_free(net);
    return rv;
}

void wk_net_free(struct wk_net *net)
{
    struct wk_backend *be;
    int i;

    if (!net)
        return;
    be = net->be;
    for (i = 0; i < net->n_layers; i++) {
        wk_be_free(be, net->layers[i].out);
        wk_be_free(be, net->layers[i].cols);
        wk_be_free(be, net->layers[i].idx);
    }
    wk_be_free(be, net->dbuf[0]);
    wk_be_free(be, net->dbuf[1]);
    wk_be_free(be, net->probs);
    wk_be_free(be, net->loss_d);
    wk_be_free(be, net->hit_d);
    if (!be->host_memory) {
        free(net->loss_h);
        free(net->hit_h);
    }
    wk_be_free(be, net->x_d);
    wk_be_free(be, net->params_d);
    wk_be_free(be, net->grads_d);
    wk_be_free(be, net->targets_d);
    wk_be_free(be, net->labels_d);
    free(net);
}

size_t wk_net_input_size(const struct wk_net *net)
{
    return net->in_size;
}

size_t wk_net_output_size(const struct wk_net *net)
{
    return net->out_size;
}

void wk_net_set_seed(struct wk_net *net, uint64_t seed)
{
    net->seed = seed;
    net->counter = 0;
}

uint64_t wk_net_dropout_seed(const struct wk_net *net, int layer)
{
    if (layer < 0 || layer >= net->n_layers)
        return 0;
    return net->layers[layer].seed;
}
