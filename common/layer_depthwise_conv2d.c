/*
 * layer_depthwise_conv2d.c — the depthwise_conv2d row of the layer table
 * (layer.h), Keras's DepthwiseConv2D: each input channel c convolved on
 * its own with depth_multiplier kernels of kernel_size, with strides and
 * padding, output channel c·depth_multiplier + m, then a bias and an
 * activation. Its variables are "NAME/depthwise_kernel" (kh, kw, C,
 * depth_multiplier) and "NAME/bias" (C·depth_multiplier), in that order
 * as Keras builds them; their initialisers and regularizers are Keras's
 * depthwise_* and bias_* (GlorotUniform and Zeros by default), the
 * kernel's fans Keras's for that shape: kh·kw·C in, kh·kw·depth_multiplier
 * out. The worker runs it in worker/nn_depthwise_conv2d.c.
 */
#include "layer.h"

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {
    "kernel_size", "strides", "padding", "depth_multiplier", "activation",
    "use_bias", MD_DEPTHWISE_KEYS, NULL};

int md_get_dwconv_args(const cJSON *lj, const char *where,
                       struct hc_layer_spec *l)
{
    int rv;

    if (!md_get(lj, "kernel_size"))
        return md_missing(where, "kernel_size", "[3, 3]");
    l->depth_multiplier = 1;
    if ((rv = md_get_pair(lj, "kernel_size", where, 1, MD_DIM_MAX, &l->kh,
                          &l->kw)) ||
        (md_get(lj, "strides") &&
         (rv = md_get_pair(lj, "strides", where, 1, MD_DIM_MAX, &l->sh,
                           &l->sw))) ||
        (md_get(lj, "depth_multiplier") &&
         (rv = md_get_int(lj, "depth_multiplier", where, 0, 1, MD_DIM_MAX,
                          &l->depth_multiplier))) ||
        (rv = md_get_padding(lj, where, &l->same)) ||
        (rv = md_get_act(lj, where, HC_ACT_LINEAR, &l->act)) ||
        (rv = md_get_bool(lj, "use_bias", where, 1, &l->use_bias)))
        return rv;
    return md_get_weights_args_as(lj, where, "depthwise", l);
}

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    return md_get_dwconv_args(lj, where, l);
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    int shape[4], rv;
    uint64_t out_c;

    if ((rv = md_window_out(where, l, "kernel_size", l->kh, l->kw)))
        return rv;
    out_c = (uint64_t)l->in.dims[2] * (uint64_t)l->depth_multiplier;
    if (out_c > MD_DIM_MAX)
        return md_fail(where, "depth_multiplier %d × %d input channels "
                       "gives %llu channels, more than %d; use a smaller "
                       "depth_multiplier", l->depth_multiplier,
                       l->in.dims[2], (unsigned long long)out_c, MD_DIM_MAX);
    l->out.dims[2] = (int)out_c;
    if (md_shape_elems(&l->out) > MD_ELEMS_MAX)
        return HC_OK;       /* reported by the caller, with both shapes */
    shape[0] = l->kh;
    shape[1] = l->kw;
    shape[2] = l->in.dims[2];
    shape[3] = l->depth_multiplier;
    if ((rv = md_add_var(m, where, l, "depthwise_kernel", 4, shape,
                         l->kernel_init.kind, l->kh * l->kw * shape[2],
                         l->kh * l->kw * shape[3], &l->var_kernel)))
        return rv;
    m->vars[l->var_kernel].init_par = l->kernel_init.par;
    m->vars[l->var_kernel].reg = l->kernel_reg;
    if (!l->use_bias)
        return HC_OK;
    if ((rv = md_add_var(m, where, l, "bias", 1, &l->out.dims[2],
                         l->bias_init.kind, 0, 0, &l->var_bias)))
        return rv;
    m->vars[l->var_bias].init_par = l->bias_init.par;
    m->vars[l->var_bias].reg = l->bias_reg;
    return HC_OK;
}

static const struct hc_keras_arg keras_args[] = {
    HC_KERAS_DEPTHWISE_ARGS, {"kernel_size", HC_KA_COPY},
    {"strides", HC_KA_COPY}, {"padding", HC_KA_COPY},
    {"depth_multiplier", HC_KA_COPY}, {"data_format", HC_KA_LAST},
    {"dilation_rate", HC_KA_ONES}, {"groups", HC_KA_ONES},
    {"activation", HC_KA_ACT}, {NULL, 0}};

void kx_dwconv_config(cJSON *c, const struct hc_model *m,
                      const struct hc_layer_spec *l)
{
    cJSON_AddItemToObject(c, "kernel_size", kx_pair(l->kh, l->kw));
    cJSON_AddItemToObject(c, "strides", kx_pair(l->sh, l->sw));
    cJSON_AddStringToObject(c, "padding", l->same ? "same" : "valid");
    cJSON_AddNumberToObject(c, "depth_multiplier", l->depth_multiplier);
    cJSON_AddStringToObject(c, "data_format", "channels_last");
    cJSON_AddItemToObject(c, "dilation_rate", kx_pair(1, 1));
    cJSON_AddStringToObject(c, "activation", hc_act_name(l->act));
    kx_weights_args_as(c, m, l, "depthwise");
}

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    kx_dwconv_config(c, m, l);
}

const struct hc_layer_kind hc_layer_depthwise_conv2d = {
    .name = "depthwise_conv2d",
    .spellings = (const char *const[]){"depthwiseconv2d", NULL},
    .keras_class = "DepthwiseConv2D",
    .snake = "depthwise_conv2d",
    .flags = HC_LAYER_ACT,
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
