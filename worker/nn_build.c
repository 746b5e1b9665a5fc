/*
 * nn_build.c — building a wk_net from a model: checking every layer's
 * shapes, variables and settings (each message names the model and the
 * layer), choosing the supported loss, placing each layer on its backend,
 * fusing conv2d → maxpool2d, laying out each device's parameters,
 * planning the gradient buffers of the graph by liveness and allocating
 * every buffer of the steady state once. What every layer has
 * is checked here; its kind's half (nn_impl.h, struct nn_kind) checks
 * and sizes the rest, with the helpers below.
 */
#include "nn_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "layer.h"

size_t nn_shape_size(const struct hc_shape *s)
{
    size_t n = 1;
    int i;

    for (i = 0; i < s->rank && i < 3; i++)
        n *= (size_t)(s->dims[i] > 0 ? s->dims[i] : 0);
    return n;
}

size_t nn_node_floats(const struct hc_model *m, int j)
{
    if (j < 0)
        return nn_shape_size(&m->inputs[-1 - j].shape) *
               (m->inputs[-1 - j].ids ? HC_ID_FLOATS : 1);
    return nn_shape_size(&m->layers[j].out);
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

const char *nn_shape_str(const struct hc_shape *s, char *buf, size_t len)
{
    if (s->rank == 3)
        snprintf(buf, len, "(%d, %d, %d)", s->dims[0], s->dims[1], s->dims[2]);
    else if (s->rank == 2)
        snprintf(buf, len, "(%d, %d)", s->dims[0], s->dims[1]);
    else if (s->rank == 1)
        snprintf(buf, len, "(%d)", s->dims[0]);
    else
        snprintf(buf, len, "(rank %d)", s->rank);
    return buf;
}

/* ---- building the net: checks ---- */

static const char *model_name(const struct hc_model *m)
{
    return m->name[0] ? m->name : "(unnamed)";
}

int nn_check_var(const struct nn_setup *c, int v, const char *what,
                 size_t size, size_t *off, size_t *n)
{
    const struct hc_model *m = c->m;

    if (v < 0 || v >= m->n_vars)
        return hc_err_set(HC_ERR_MISMATCH,
                          "%s: %s variable index %d is not one of the "
                          "model's %d variables", c->where, what, v,
                          m->n_vars);
    if (m->vars[v].size != size)
        return hc_err_set(HC_ERR_MISMATCH,
                          "%s: %s variable %s has %zu values; the layer "
                          "needs %zu", c->where, what, m->vars[v].name,
                          m->vars[v].size, size);
    if (c->owner[v] >= 0)
        return hc_err_set(HC_ERR_MISMATCH,
                          "%s: variable %s is already used by layer %d; "
                          "each variable belongs to one layer", c->where,
                          m->vars[v].name, c->owner[v]);
    c->owner[v] = c->li;
    *off = c->var_off[v];
    *n = size;
    return HC_OK;
}

int nn_need_image(const struct nn_setup *c, const struct hc_layer_spec *s,
                  const struct hc_shape *in)
{
    char b1[48];

    if (in->rank != 3)
        return hc_err_set(HC_ERR_CONFIG, "%s: %s needs an (H, W, C) input, "
                          "got %s", c->where, hc_layer_type_name(s->type),
                          nn_shape_str(in, b1, sizeof b1));
    return HC_OK;
}

int nn_window(const struct nn_setup *c, const struct hc_layer_spec *s,
              const struct hc_shape *in, int kh, int kw, int sh, int sw,
              struct nn_layer *l, struct hc_shape *out)
{
    char b1[48];

    if (wk_geom_init(&l->g, 1, in->dims[0], in->dims[1], in->dims[2], kh, kw,
                     sh, sw, s->same))
        return hc_err_set(HC_ERR_CONFIG,
                          "%s: window %d×%d, strides %d×%d and padding "
                          "\"%s\" do not fit the input %s", c->where, kh, kw,
                          sh, sw, s->same ? "same" : "valid",
                          nn_shape_str(in, b1, sizeof b1));
    out->rank = 3;
    out->dims[0] = l->g.OH;
    out->dims[1] = l->g.OW;
    out->dims[2] = in->dims[2];
    return HC_OK;
}

int nn_global_window(const struct nn_setup *c,
                     const struct hc_layer_spec *s, const struct hc_shape *in,
                     struct nn_layer *l, struct hc_shape *out)
{
    int rv;

    if ((rv = nn_need_image(c, s, in)) ||
        (rv = nn_window(c, s, in, in->dims[0], in->dims[1], 1, 1, l, out)))
        return rv;
    out->rank = 1;
    out->dims[0] = in->dims[2];
    out->dims[1] = out->dims[2] = 0;
    return HC_OK;
}

/* The shape of node j of the net's model: layer j's output, or (j < 0)
 * input −1 − j. */
static const struct hc_shape *node_shape(const struct hc_model *m, int j)
{
    return j < 0 ? &m->inputs[-1 - j].shape : &m->layers[j].out;
}

/* Check layer spec s (index c->li) against its inputs' shapes and fill
 * l: what every layer has here, the rest by its kind's setup. */
static int setup_layer(struct nn_setup *c, struct nn_layer *l)
{
    const struct hc_layer_spec *s = &c->m->layers[c->li];
    const struct hc_shape *in;
    struct hc_shape want;
    char b1[48], b2[48];
    int rv, merge;

    l->kind = nn_kind_of(s->type);
    snprintf(l->name, sizeof l->name, "%s", c->layer);
    l->act = s->act;
    l->off_w = l->off_b = NO_VAR;
    if ((unsigned)s->act >= HC_ACT_COUNT)
        return hc_err_set(HC_ERR_CONFIG, "%s: unknown activation %d",
                          c->where, (int)s->act);
    if (!l->kind)
        return hc_err_set(HC_ERR_CONFIG, "%s: unknown layer type %d",
                          c->where, (int)s->type);
    merge = l->kind->forward_n != NULL;
    if (s->n_in < 1 || s->n_in > HC_LAYER_MAX_IN || (merge != (s->n_in > 1)))
        return hc_err_set(HC_ERR_CONFIG, "%s: reads %d nodes; %s", c->where,
                          s->n_in, merge ? "a merge reads 2 or more"
                                         : "the layer reads one");
    l->n_in = c->n_in = s->n_in;
    for (int k = 0; k < s->n_in; k++) {
        int j = s->in_from[k];

        if (j < -c->m->n_inputs || j >= c->li)
            return hc_err_set(HC_ERR_MISMATCH, "%s: reads node %d; a layer "
                              "reads an input (-1 to -%d) or an earlier "
                              "layer", c->where, j, c->m->n_inputs);
        l->src[k] = j;
        c->ins[k] = node_shape(c->m, j);
        l->src_size[k] = (int)nn_node_floats(c->m, j);
    }
    in = c->ins[0];
    want = *in;
    if (!shape_eq(&s->in, in))
        return hc_err_set(HC_ERR_MISMATCH,
                          "%s: input shape %s does not match the %s output "
                          "%s", c->where,
                          nn_shape_str(&s->in, b1, sizeof b1),
                          l->src[0] == c->li - 1 ? "previous" : "input's",
                          nn_shape_str(in, b2, sizeof b2));
    if (l->kind->setup && (rv = l->kind->setup(c, s, in, l, &want)))
        return rv;
    if (!shape_eq(&s->out, &want))
        return hc_err_set(HC_ERR_MISMATCH,
                          "%s: output shape %s disagrees with the layer's "
                          "settings, which give %s", c->where,
                          nn_shape_str(&s->out, b1, sizeof b1),
                          nn_shape_str(&want, b2, sizeof b2));
    if ((l->kind->flags & NN_BIAS) && s->var_bias >= 0) {
        int n = want.rank == 3 ? want.dims[2] : want.dims[0];

        if ((rv = nn_check_var(c, s->var_bias, "bias", (size_t)n, &l->off_b,
                               &l->n_b)))
            return rv;
        l->reg_b = c->m->vars[s->var_bias].reg;
    }
    if (l->n_w)
        l->reg_w = c->m->vars[s->var_kernel].reg;
    l->in_size = l->src_size[0];
    l->out_size = (int)nn_shape_size(&want);
    l->out_c = want.dims[want.rank - 1];
    return HC_OK;
}

/* Check the whole model and fill net's layers; no allocation. */
static int setup_model(struct wk_net *net, const struct hc_model *m)
{
    size_t var_off[HC_MODEL_MAX_VARS], sum = 0, lim;
    int owner[HC_MODEL_MAX_VARS];
    char layer[HC_NAME_MAX + 32], where[2 * HC_NAME_MAX + 48];
    struct nn_setup c = {m, layer, where, 0, 0, {NULL}, var_off, owner};
    char b1[48];
    size_t n = 0;
    int i, rv;

    if (m->n_layers < 1 || m->n_layers > HC_MODEL_MAX_LAYERS)
        return hc_err_set(HC_ERR_CONFIG,
                          "model %s: %d layers; a model has 1 to %d",
                          model_name(m), m->n_layers, HC_MODEL_MAX_LAYERS);
    if (m->n_vars < 0 || m->n_vars > HC_MODEL_MAX_VARS)
        return hc_err_set(HC_ERR_CONFIG, "model %s: %d variables; at most %d",
                          model_name(m), m->n_vars, HC_MODEL_MAX_VARS);
    if (m->n_inputs < 1 || m->n_inputs > HC_MODEL_MAX_INPUTS)
        return hc_err_set(HC_ERR_CONFIG, "model %s: %d inputs; a model has "
                          "1 to %d", model_name(m), m->n_inputs,
                          HC_MODEL_MAX_INPUTS);
    for (i = 0; i < m->n_inputs; i++) {
        const struct hc_shape *s = &m->inputs[i].shape;

        if ((s->rank != 1 && s->rank != 3) || nn_shape_size(s) == 0 ||
            s->dims[0] < 1 ||
            (s->rank == 3 && (s->dims[1] < 1 || s->dims[2] < 1)))
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s: input \"%s\" of shape %s; use (N) or "
                              "(H, W, C) with positive sizes", model_name(m),
                              m->inputs[i].name,
                              nn_shape_str(s, b1, sizeof b1));
        /* A sample's inputs lie one after another in x (nn.h). */
        net->in_off[i] = n;
        n += nn_node_floats(m, -1 - i);
    }
    net->n_inputs = m->n_inputs;
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

        snprintf(layer, sizeof layer, "layer %d (%s)", i,
                 s->name[0] ? s->name : hc_layer_type_name(s->type));
        snprintf(where, sizeof where, "model %s, %s", model_name(m), layer);
        c.li = i;
        if ((rv = setup_layer(&c, &net->layers[i])))
            return rv;
        if (net->first_param < 0 && nn_layer_has_vars(&net->layers[i]))
            net->first_param = i;
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
    net->in_size = n;
    net->out_size = nn_shape_size(&m->layers[m->n_layers - 1].out);
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

        if ((size_t)l->out_size > lim || l->ws_size > lim ||
            l->aux_size > lim)
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

    const char *ln = hc_loss_name(m->loss);
    const int logits = m->loss_par.from_logits;

    net->loss_par = m->loss_par;
    if (s->out.rank != 1)
        return hc_err_set(HC_ERR_CONFIG,
                          "model %s: %s needs a flat output (N), but %s, the "
                          "last layer, outputs %s; end with flatten and a "
                          "dense layer", model_name(m), ln, last->name,
                          nn_shape_str(&s->out, b1, sizeof b1));
    if (logits && s->act != HC_ACT_LINEAR)
        return hc_err_set(HC_ERR_CONFIG,
                          "model %s: %s with from_logits takes logits, but "
                          "%s, the last layer, has activation \"%s\"; make "
                          "it \"linear\"", model_name(m), ln, last->name,
                          hc_act_name(s->act));
    if ((unsigned)m->loss > HC_LOSS_HUBER)
        return hc_err_set(HC_ERR_CONFIG, "model %s: unknown loss %d",
                          model_name(m), (int)m->loss);
    if (!hc_loss_takes_classes(m->loss))
        return HC_OK;
    if (!logits && !((hc_layer_kind(s->type)->flags & HC_LAYER_ACT) &&
                     s->act == HC_ACT_SOFTMAX))
        return hc_err_set(HC_ERR_CONFIG,
                          "model %s: %s needs a softmax output, but %s, the "
                          "last layer, has activation \"%s\"; set "
                          "\"activation\": \"softmax\" on a last dense "
                          "layer, or \"from_logits\": true on a linear one",
                          model_name(m), ln, last->name, hc_act_name(s->act));
    if (m->n_classes > 0 && (size_t)m->n_classes != net->out_size)
        return hc_err_set(HC_ERR_MISMATCH,
                          "model %s: n_classes = %d but the output has %zu "
                          "units", model_name(m), m->n_classes,
                          net->out_size);
    net->fused = 1;
    if (logits)
        return HC_OK;
    /* The last layer outputs logits; softmax is the loss's. */
    last->act = HC_ACT_LINEAR;
    last->act_in_loss = 1;
    return HC_OK;
}

/* How many inputs of the net's layers read node j. */
static int readers(const struct wk_net *net, int j)
{
    int i, k, n = 0;

    for (i = j + 1; i < net->n_layers; i++)
        for (k = 0; k < net->layers[i].n_in; k++)
            n += net->layers[i].src[k] == j;
    return n;
}

/*
 * conv2d → maxpool2d: max commutes with a per-channel bias and with any
 * non-decreasing activation (all but softmax, gelu and swish), so the conv
 * leaves its output raw and the pool applies bias and activation to its
 * four times smaller output: act(max(z) + b) = max(act(z + b)), bit for
 * bit in float too, since rounding is monotonic. In backward the
 * activation derivative and the bias gradient are taken on the pooled
 * gradient and the scatter to the argmax does the rest: the conv's other
 * outputs get no gradient either way. (Where relu ties a window at 0 the
 * argmax may differ from the unfused one, but its gradient is 0.) Only a
 * pair on one backend fuses, the pool being the conv's one reader. In the
 * kinds' words: an NN_EPILOGUE_OUT layer (conv2d) followed by an
 * NN_EPILOGUE_IN one (maxpool2d).
 */
static void fuse_epilogue(struct wk_net *net)
{
    int i;

    for (i = 0; i + 1 < net->n_layers; i++) {
        struct nn_layer *c = &net->layers[i], *p = &net->layers[i + 1];

        if (p->src[0] != i || readers(net, i) != 1 ||
            !(c->kind->flags & NN_EPILOGUE_OUT) ||
            !(p->kind->flags & NN_EPILOGUE_IN) ||
            c->act == HC_ACT_SOFTMAX || wk_act_reads_input(c->act) ||
            c->dev != p->dev)
            continue;
        c->pre_pool = 1;
        p->post_act = 1;
        p->act = c->act;
        p->off_b = c->off_b;    /* the pool now owns the bias */
        p->n_b = c->n_b;
        p->reg_b = c->reg_b;
        c->off_b = NO_VAR;
        c->n_b = 0;
        c->reg_b = (struct hc_regularizer){0, 0};
    }
}

/* ---- building the net: placement ---- */

struct wk_backend *nn_node_be(const struct wk_net *net, int j)
{
    return j < 0 ? net->in_be : net->layers[j].be;
}

/* Give each layer its backend and an index into net->devs; fill in_be and
 * out_be. layer_be has one entry per layer. */
static int setup_devices(struct wk_net *net, const struct hc_model *m,
                         struct wk_backend *const *layer_be)
{
    int i, k;

    for (i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];

        if (!layer_be[i])
            return hc_err_set(HC_ERR_INVAL,
                              "wk_net_new_placed: model %s, %s has no "
                              "backend (NULL)", model_name(m), l->name);
        for (k = 0; k < net->n_devs; k++)
            if (net->devs[k].be == layer_be[i])
                break;
        if (k == net->n_devs) {
            if (net->n_devs == NN_MAX_DEVS)
                return hc_err_set(HC_ERR_LIMIT,
                                  "model %s: its layers use more than %d "
                                  "backends", model_name(m), NN_MAX_DEVS);
            net->devs[net->n_devs++].be = layer_be[i];
        }
        l->dev = k;
        l->be = layer_be[i];
    }
    net->in_be = net->layers[0].be;
    net->out_be = net->layers[net->n_layers - 1].be;
    return HC_OK;
}

int nn_check_extra(const struct nn_setup *c, struct nn_layer *l, int v,
                   const char *what, size_t size)
{
    int rv, k = l->n_extra;

    if (k >= NN_MAX_EXTRA)
        return hc_err_set(HC_ERR_MISMATCH, "%s: more than %d variables "
                          "besides a kernel and a bias", c->where,
                          NN_MAX_EXTRA);
    if ((rv = nn_check_var(c, v, what, size, &l->off_x[k], &l->size_x[k])))
        return rv;
    l->reg_x[k] = c->m->vars[v].reg;
    l->n_extra++;
    return HC_OK;
}

int nn_layer_has_vars(const struct nn_layer *l)
{
    return l->n_w || l->n_b || l->n_extra || (l->kind->flags & NN_TABLE);
}

/*
 * Where each layer's parameters sit on its device (doff_*): the host
 * offsets on host memory and on a device holding every parameter layer
 * (so one transfer moves the whole vector); otherwise its layers' slices
 * packed one after the other. Also marks the inputs that come from
 * another backend by copy (cross): all but host-to-host hand-overs.
 */
static void setup_layout(struct wk_net *net)
{
    int i, k, n_owners = 0;

    for (i = 0; i < net->n_layers; i++)
        n_owners += nn_layer_has_vars(&net->layers[i]);
    for (k = 0; k < net->n_devs; k++) {
        struct nn_dev *d = &net->devs[k];
        int mine = 0;

        for (i = 0; i < net->n_layers; i++)
            mine += net->layers[i].dev == k &&
                    nn_layer_has_vars(&net->layers[i]);
        d->all_params = mine == n_owners;
        d->n_params = 0;
        for (i = 0; i < net->n_layers; i++) {
            struct nn_layer *l = &net->layers[i];

            if (l->dev != k)
                continue;
            l->doff_w = l->off_w;
            l->doff_b = l->off_b;
            for (int x = 0; x < l->n_extra; x++)
                l->doff_x[x] = l->off_x[x];
            if (d->be->host_memory || d->all_params)
                continue;
            if (l->n_w) {
                l->doff_w = d->n_params;
                d->n_params += l->n_w;
            }
            if (l->n_b) {
                l->doff_b = d->n_params;
                d->n_params += l->n_b;
            }
            for (int x = 0; x < l->n_extra; x++) {
                l->doff_x[x] = d->n_params;
                d->n_params += l->size_x[x];
            }
        }
        if (d->all_params)
            d->n_params = net->n_params;
    }
    for (i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];

        for (k = 0; k < l->n_in; k++) {
            struct wk_backend *from = nn_node_be(net, l->src[k]);

            l->cross[k] = from != l->be &&
                          !(l->be->host_memory && from->host_memory);
        }
    }
}

/* ---- building the net: the gradients' plan ---- */

/* A free gradient buffer of device d: one given back, or a new one. */
static int take_gbuf(struct nn_dev *d, int *free_list, int *n_free)
{
    return *n_free ? free_list[--*n_free] : d->n_gbuf++;
}

/*
 * Which buffer holds each node's output gradient, fixed before the first
 * step (see nn_impl.h). Backward visits the layers in reverse order; the
 * output's buffer is taken first, for the loss's gradient. Visiting layer
 * i, whose gradient is complete, each node it reads that needs one gets
 * its buffer when i is its first reader so visited (gacc 0: written), or
 * else adds to it (gacc 1). A layer of NN_IN_PLACE (or with no
 * backward_input: flatten) leaves its input's gradient in its own buffer:
 * when it is that node's one reader on the same device, the buffer passes
 * to the node (alias) and nothing moves; otherwise it is copied or added.
 * Then i's buffer is free. In a chain this is two buffers taking turns.
 * Also marks the devices that need a scratch buffer: a term of a sum
 * that a layer's backward_input cannot add itself, a gradient crossing
 * to another backend.
 */
static void plan_grads(struct wk_net *net)
{
    int free_list[NN_MAX_DEVS][NN_MAX_GBUF], n_free[NN_MAX_DEVS] = {0};
    int i, k, last = net->n_layers - 1;
    size_t live;                /* floats per sample of those live now */

    for (i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];

        l->gbuf = -1;
        l->need_grad = nn_layer_has_vars(l);
        for (k = 0; k < l->n_in; k++)
            if (l->src[k] >= 0 && net->layers[l->src[k]].need_grad)
                l->need_grad = 1;
    }
    net->layers[last].gbuf = take_gbuf(&net->devs[net->layers[last].dev],
                                       free_list[net->layers[last].dev],
                                       &n_free[net->layers[last].dev]);
    live = net->grad_peak = (size_t)net->layers[last].out_size;
    for (i = last; i >= 0; i--) {
        struct nn_layer *l = &net->layers[i];
        int in_place = (l->kind->flags & NN_IN_PLACE) ||
                       (!l->kind->backward_input && !l->kind->backward_in);

        l->alias = 0;
        if (!l->need_grad)
            continue;
        for (k = 0; k < l->n_in; k++) {
            struct nn_layer *p;

            l->gacc[k] = l->galias[k] = 0;
            if (l->src[k] < 0 || !(p = &net->layers[l->src[k]])->need_grad)
                continue;
            if (p->gbuf >= 0) {
                l->gacc[k] = 1;
            } else if ((l->kind->flags & NN_SUM_GRAD) && !l->alias &&
                       l->coef[k] == 1.0f && p->dev == l->dev &&
                       !l->cross[k] && readers(net, l->src[k]) == 1) {
                /* dy is input k's gradient: its node takes the buffer. */
                p->gbuf = l->gbuf;
                l->alias = l->galias[k] = 1;
                live += (size_t)p->out_size;
                continue;
            } else if (in_place && l->n_in == 1 && p->dev == l->dev &&
                       readers(net, l->src[k]) == 1) {
                p->gbuf = l->gbuf;
                l->alias = 1;
                live += (size_t)p->out_size;
                continue;
            } else {
                p->gbuf = take_gbuf(&net->devs[p->dev], free_list[p->dev],
                                    &n_free[p->dev]);
                live += (size_t)p->out_size;
            }
            if (l->cross[k] ||
                (l->gacc[k] && !in_place && !l->kind->backward_in &&
                 !(l->kind->flags & NN_ADDS)))
                net->devs[l->dev].need_scratch = 1;
            if (l->gacc[k] && l->cross[k])
                net->devs[p->dev].need_scratch = 1;
        }
        if (live > net->grad_peak)
            net->grad_peak = live;
        live -= (size_t)l->out_size;    /* its gradient is spent */
        if (!l->alias)
            free_list[l->dev][n_free[l->dev]++] = l->gbuf;
    }
}

/* Each layer's dx_lo, dx_hi: where its input's node is read by it alone,
 * on its device, and that node's kind says which columns of its gradient
 * its backward reads (grad_cols), those; else all. */
static void plan_dx_cols(struct wk_net *net)
{
    for (int i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];
        const struct nn_layer *p;
        int lo, hi;

        l->dx_lo = 0;
        l->dx_hi = l->in_size;
        if (l->n_in != 1 || l->src[0] < 0 || l->cross[0])
            continue;
        p = &net->layers[l->src[0]];
        if (!p->kind->grad_cols || p->dev != l->dev ||
            readers(net, l->src[0]) != 1)
            continue;
        p->kind->grad_cols(net, p, &lo, &hi);
        if (lo < hi && lo >= 0 && hi <= l->in_size) {
            l->dx_lo = lo;
            l->dx_hi = hi;
        }
    }
}

/* ---- building the net: buffers ---- */

int nn_alloc_f(struct wk_backend *be, float **p, size_t n)
{
    return wk_be_alloc(be, n * sizeof **p, (void **)p);
}

int nn_alloc_out(struct nn_layer *l, size_t B)
{
    return nn_alloc_f(l->be, &l->out, B * l->out_size);
}

static int setup_buffers(struct wk_net *net)
{
    const size_t B = (size_t)net->max_batch;
    struct wk_backend *ob = net->out_be;
    size_t stage = 0;
    int i, k, rv;

    for (i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];
        struct nn_dev *d = &net->devs[l->dev];

        for (k = 0; k < l->n_in; k++)
            if ((size_t)l->src_size[k] > d->max_act)
                d->max_act = (size_t)l->src_size[k];
        if ((size_t)l->out_size > d->max_act)
            d->max_act = (size_t)l->out_size;
        if (l->kind->alloc && (rv = l->kind->alloc(l, B)))
            return rv;
        for (k = 0; k < l->n_in; k++) {
            if (!l->cross[k])
                continue;
            if ((rv = nn_alloc_f(l->be, &l->xin[k], B * l->src_size[k])))
                return rv;
            if (!nn_node_be(net, l->src[k])->host_memory &&
                !l->be->host_memory && (size_t)l->src_size[k] > stage)
                stage = (size_t)l->src_size[k];
        }
    }
    for (k = 0; k < net->n_devs; k++) {
        struct nn_dev *d = &net->devs[k];
        size_t cap;

        for (i = 0; i < d->n_gbuf; i++)
            if ((rv = nn_alloc_f(d->be, &d->gbuf[i], B * d->max_act)))
                return rv;
        if (d->need_scratch &&
            (rv = nn_alloc_f(d->be, &d->scratch, B * d->max_act)))
            return rv;
        /* Within the backend's cache bound where it has one (the CPU):
         * the GEMM packs each chunk's cols while they are still in cache. */
        cap = B * d->max_act;
        if (d->be->ws_cache && cap > d->be->ws_cache)
            cap = d->be->ws_cache;
        for (i = 0; i < net->n_layers; i++) {
            struct nn_layer *l = &net->layers[i];
            size_t need;

            if (l->dev != k || !(l->kind->flags & NN_SHARED_WS) ||
                !l->ws_size)
                continue;
            need = B * l->ws_size;
            if (need > cap)
                need = cap > l->ws_size ? cap : l->ws_size;
            if (need > d->ws_floats)
                d->ws_floats = need;
        }
        if (d->ws_floats && (rv = nn_alloc_f(d->be, &d->ws, d->ws_floats)))
            return rv;
        if (!d->be->host_memory && d->n_params &&
            ((rv = nn_alloc_f(d->be, &d->params_d, d->n_params)) ||
             (rv = nn_alloc_f(d->be, &d->grads_d, d->n_params))))
            return rv;
    }
    for (i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];

        if ((l->kind->flags & NN_SHARED_WS) && l->ws_size) {
            size_t chunk = net->devs[l->dev].ws_floats / l->ws_size;

            l->cols = net->devs[l->dev].ws;
            l->ws_holder = &net->devs[l->dev].ws_holder;
            l->ws_chunk = chunk < B ? (int)chunk : (int)B;
        }
    }
    if (stage && !(net->stage_h = malloc(B * stage * sizeof *net->stage_h)))
        return hc_err_set(HC_ERR_NOMEM, "net: out of host memory");
    if (net->fused && (rv = nn_alloc_f(ob, &net->probs, B * net->out_size)))
        return rv;
    if ((rv = nn_alloc_f(ob, &net->loss_d, B)) ||
        (rv = nn_alloc_f(ob, &net->hit_d, B)))
        return rv;
    if (net->loss != HC_LOSS_SPARSE_CCE &&
        !(net->targets_h = malloc(B * net->out_size * sizeof *net->targets_h)))
        return hc_err_set(HC_ERR_NOMEM, "net: out of host memory");
    if (!net->in_be->host_memory &&
        (rv = nn_alloc_f(net->in_be, &net->x_d, B * net->in_size)))
        return rv;
    if (net->n_inputs > 1 &&
        !(net->x_split = malloc(B * net->in_size * sizeof *net->x_split)))
        return hc_err_set(HC_ERR_NOMEM, "net: out of host memory");
    if (ob->host_memory) {
        net->loss_h = net->loss_d;
        net->hit_h = net->hit_d;
        return HC_OK;
    }
    net->loss_h = malloc(B * sizeof *net->loss_h);
    net->hit_h = malloc(B * sizeof *net->hit_h);
    if (!net->loss_h || !net->hit_h)
        return hc_err_set(HC_ERR_NOMEM, "net: out of host memory");
    if (net->loss != HC_LOSS_SPARSE_CCE)
        return nn_alloc_f(ob, &net->targets_d, B * net->out_size);
    return wk_be_alloc(ob, B * sizeof *net->labels_d,
                       (void **)&net->labels_d);
}

size_t wk_net_grad_peak(const struct wk_net *net)
{
    return net->grad_peak;
}

size_t wk_net_kept_size(const struct wk_net *net)
{
    size_t n = net->in_size;

    for (int i = 0; i < net->n_layers; i++)
        n += (size_t)net->layers[i].out_size;
    return n;
}

int wk_net_new_placed(const struct hc_model *m,
                      struct wk_backend *const *layer_be, int max_batch,
                      struct wk_net **out)
{
    struct wk_net *net = NULL;
    int rv;

    if (!out || !m || !layer_be)
        return hc_err_set(HC_ERR_INVAL, "wk_net_new: NULL argument");
    *out = NULL;
    if (max_batch < 1)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_net_new: max_batch = %d; must be at least 1",
                          max_batch);
    net = calloc(1, sizeof *net);
    if (!net)
        return hc_err_set(HC_ERR_NOMEM, "wk_net_new: out of memory");
    net->max_batch = max_batch;
    net->seed = m->seed;
    if ((rv = setup_model(net, m)) || (rv = setup_loss(net, m)) ||
        (rv = setup_devices(net, m, layer_be)))
        goto fail;
    fuse_epilogue(net);
    setup_layout(net);
    plan_grads(net);
    plan_dx_cols(net);
    if ((rv = setup_buffers(net)))
        goto fail;
    *out = net;
    return HC_OK;
fail:
    wk_net_free(net);
    return rv;
}

int wk_net_new(const struct hc_model *m, struct wk_backend *be, int max_batch,
               struct wk_net **out)
{
    struct wk_backend *layer_be[HC_MODEL_MAX_LAYERS];
    int i;

    if (!out || !m || !be)
        return hc_err_set(HC_ERR_INVAL, "wk_net_new: NULL argument");
    for (i = 0; i < HC_MODEL_MAX_LAYERS; i++)
        layer_be[i] = be;
    return wk_net_new_placed(m, layer_be, max_batch, out);
}

void wk_net_free(struct wk_net *net)
{
    int i, k;

    if (!net)
        return;
    for (i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];

        if (!l->be)
            continue;
        wk_be_free(l->be, l->out);
        if (!(l->kind->flags & NN_SHARED_WS))
            wk_be_free(l->be, l->cols);
        wk_be_free(l->be, l->idx);
        wk_be_free(l->be, l->pre);
        wk_be_free(l->be, l->aux);
        wk_be_free(l->be, l->rgrad);
        for (k = 0; k < l->n_in; k++)
            wk_be_free(l->be, l->xin[k]);
    }
    for (k = 0; k < net->n_devs; k++) {
        struct nn_dev *d = &net->devs[k];

        for (i = 0; i < d->n_gbuf; i++)
            wk_be_free(d->be, d->gbuf[i]);
        wk_be_free(d->be, d->scratch);
        wk_be_free(d->be, d->ws);
        wk_be_free(d->be, d->params_d);
        wk_be_free(d->be, d->grads_d);
    }
    free(net->stage_h);
    free(net->x_split);
    free(net->targets_h);
    if (net->out_be) {
        wk_be_free(net->out_be, net->probs);
        wk_be_free(net->out_be, net->loss_d);
        wk_be_free(net->out_be, net->hit_d);
        wk_be_free(net->out_be, net->targets_d);
        wk_be_free(net->out_be, net->labels_d);
        if (!net->out_be->host_memory) {
            free(net->loss_h);
            free(net->hit_h);
        }
    }
    if (net->in_be)
        wk_be_free(net->in_be, net->x_d);
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
    wk_net_set_dropout_pos(net, seed, 0, 0);
}

void wk_net_set_dropout_pos(struct wk_net *net, uint64_t seed,
                            uint64_t forwards, size_t first_sample)
{
    net->seed = seed;
    net->counter = forwards;
    net->first_sample = first_sample;
}

uint64_t wk_net_dropout_seed(const struct wk_net *net, int layer)
{
    if (layer < 0 || layer >= net->n_layers)
        return 0;
    return net->layers[layer].seed;
}
