/*
 * layer_separable_conv2d.c — the separable_conv2d row of the layer table
 * (layer.h), Keras's SeparableConv2D: a depthwise convolution (each input
 * channel c on its own with depth_multiplier kernels of kernel_size, with
 * strides and padding, as depthwise_conv2d) then a pointwise 1×1
 * convolution mixing its C·depth_multiplier channels into filters, then a
 * bias and an activation. Its variables are, in Keras's order (the
 * weights file's vars/0, 1, 2), "NAME/depthwise_kernel" (kh, kw, C,
 * depth_multiplier), "NAME/pointwise_kernel" (1, 1, C·depth_multiplier,
 * filters) and "NAME/bias" (filters); their initialisers and regularizers
 * are Keras's depthwise_*, pointwise_* and bias_* (GlorotUniform, Zeros
 * by default), with the fans Keras computes for those shapes. The worker
 * runs it in worker/nn_separable_conv2d.c.
 */
#include "layer.h"

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {
    "filters", "kernel_size", "strides", "padding", "depth_multiplier",
    "activation", "use_bias", MD_DEPTHWISE_KEYS, "pointwise_initializer",
    "pointwise_regularizer", NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    int rv;

    if (!md_get(lj, "filters"))
        return md_missing(where, "filters", "32");
    if ((rv = md_get_int(lj, "filters", where, 0, 1, MD_DIM_MAX,
                         &l->filters)) ||
        (rv = md_get_dwconv_args(lj, where, l)) ||
        (rv = md_get_init(lj, "pointwise_initializer", where,
                          HC_INIT_GLOROT_UNIFORM, &l->pointwise_init)))
        return rv;
    return md_get_reg(lj, "pointwise_regularizer", where, &l->pointwise_reg);
}

/* Append variable what of l with its initialiser and penalty. */
static int add_var(struct hc_model *m, const char *where,
                   struct hc_layer_spec *l, const char *what,
                   const int *shape, int ndim, const struct hc_initializer *in,
                   struct hc_regularizer reg, int fan_in, int fan_out,
                   int *idx)
{
    int rv;

    if ((rv = md_add_var(m, where, l, what, ndim, shape, in->kind, fan_in,
                         fan_out, idx)))
        return rv;
    m->vars[*idx].init_par = in->par;
    m->vars[*idx].reg = reg;
    return HC_OK;
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    int dw[4], pw[4], rv, C = l->in.dims[2], pv;
    uint64_t mid_c;

    if ((rv = md_window_out(where, l, "kernel_size", l->kh, l->kw)))
        return rv;
    mid_c = (uint64_t)C * (uint64_t)l->depth_multiplier;
    if (mid_c > MD_DIM_MAX)
        return md_fail(where, "depth_multiplier %d × %d input channels "
                       "gives %llu channels, more than %d; use a smaller "
                       "depth_multiplier", l->depth_multiplier, C,
                       (unsigned long long)mid_c, MD_DIM_MAX);
    l->out.dims[2] = l->filters;
    if (md_shape_elems(&l->out) > MD_ELEMS_MAX)
        return HC_OK;       /* reported by the caller, with both shapes */
    dw[0] = l->kh;
    dw[1] = l->kw;
    dw[2] = C;
    dw[3] = l->depth_multiplier;
    pw[0] = pw[1] = 1;
    pw[2] = (int)mid_c;
    pw[3] = l->filters;
    if ((rv = add_var(m, where, l, "depthwise_kernel", dw, 4,
                      &l->kernel_init, l->kernel_reg, l->kh * l->kw * C,
                      l->kh * l->kw * l->depth_multiplier, &l->var_kernel)) ||
        (rv = add_var(m, where, l, "pointwise_kernel", pw, 4,
                      &l->pointwise_init, l->pointwise_reg, (int)mid_c,
                      l->filters, &pv)))
        return rv;
    if (!l->use_bias)
        return HC_OK;
    return add_var(m, where, l, "bias", &l->filters, 1, &l->bias_init,
                   l->bias_reg, 0, 0, &l->var_bias);
}

/* tf.keras 2 writes Conv's kernel_* and groups beside the separable
 * keys; SeparableConv2D uses none of them. */
static const struct hc_keras_arg keras_args[] = {
    HC_KERAS_DEPTHWISE_ARGS, {"pointwise_initializer", HC_KA_INIT},
    {"pointwise_regularizer", HC_KA_REG},
    {"pointwise_constraint", HC_KA_NULL}, {"filters", HC_KA_COPY},
    {"kernel_size", HC_KA_COPY}, {"strides", HC_KA_COPY},
    {"padding", HC_KA_COPY}, {"depth_multiplier", HC_KA_COPY},
    {"data_format", HC_KA_LAST}, {"dilation_rate", HC_KA_ONES},
    {"groups", HC_KA_ONES}, {"activation", HC_KA_ACT},
    {"kernel_initializer", HC_KA_IGNORE},
    {"kernel_regularizer", HC_KA_NULL}, {"kernel_constraint", HC_KA_NULL},
    {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    cJSON_AddNumberToObject(c, "filters", l->filters);
    kx_dwconv_config(c, m, l);
    cJSON_AddItemToObject(c, "pointwise_initializer",
                          kx_init_json(&l->pointwise_init, m->seed));
    cJSON_AddItemToObject(c, "pointwise_regularizer",
                          kx_reg_json(&l->pointwise_reg));
    cJSON_AddNullToObject(c, "pointwise_constraint");
}

const struct hc_layer_kind hc_layer_separable_conv2d = {
    .name = "separable_conv2d",
    .spellings = (const char *const[]){"separableconv2d",
                                       "separableconvolution2d", NULL},
    .keras_class = "SeparableConv2D",
    .keras_aliases = (const char *const[]){"SeparableConvolution2D", NULL},
    .snake = "separable_conv2d",
    .flags = HC_LAYER_ACT,
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
