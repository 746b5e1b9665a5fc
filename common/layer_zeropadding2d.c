/*
 * layer_zeropadding2d.c — the zeropadding2d row of the layer table
 * (layer.h), Keras's ZeroPadding2D: an (H, W, C) image with rows of zeros
 * added on top and bottom and columns on the left and right, (H + top +
 * bottom, W + left + right, C). "padding" is one number for all four, [h,
 * w] (h rows on top and bottom, w columns each side) or [[top, bottom],
 * [left, right]], Keras's three forms; default 1. No variables. The
 * worker runs it in worker/nn_zeropadding2d.c.
 */
#include "layer.h"

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {"padding", NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    const cJSON *p = md_get(lj, "padding"), *a, *b;
    int rv;

    l->pad[0] = l->pad[1] = l->pad[2] = l->pad[3] = 1;
    if (!p)
        return HC_OK;
    a = cJSON_IsArray(p) && cJSON_GetArraySize(p) == 2 ? p->child : NULL;
    b = a ? a->next : NULL;
    if (a && cJSON_IsArray(a) && cJSON_IsArray(b) &&
        cJSON_GetArraySize(a) == 2 && cJSON_GetArraySize(b) == 2) {
        if ((rv = md_int_value(a->child, "padding", where, 0, MD_DIM_MAX,
                               &l->pad[0])) ||
            (rv = md_int_value(a->child->next, "padding", where, 0,
                               MD_DIM_MAX, &l->pad[1])) ||
            (rv = md_int_value(b->child, "padding", where, 0, MD_DIM_MAX,
                               &l->pad[2])))
            return rv;
        return md_int_value(b->child->next, "padding", where, 0, MD_DIM_MAX,
                            &l->pad[3]);
    }
    if (a && (cJSON_IsArray(a) || cJSON_IsArray(b)))
        return md_fail(where, "\"padding\" must be an integer, [h, w] or "
                       "[[top, bottom], [left, right]] of integers");
    if ((rv = md_get_pair(lj, "padding", where, 0, MD_DIM_MAX, &l->pad[0],
                          &l->pad[2])))
        return rv;
    l->pad[1] = l->pad[0];
    l->pad[3] = l->pad[2];
    return HC_OK;
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    char si[48];

    (void)m;
    if (l->in.rank != 3)
        return md_fail(where, "zeropadding2d needs an image input (H, W, C) "
                       "but its input has shape %s",
                       md_fmt_shape(&l->in, si, sizeof si));
    l->out.dims[0] = l->in.dims[0] + l->pad[0] + l->pad[1];
    l->out.dims[1] = l->in.dims[1] + l->pad[2] + l->pad[3];
    if (l->out.dims[0] > MD_DIM_MAX || l->out.dims[1] > MD_DIM_MAX)
        return md_fail(where, "padding gives (%d, %d, %d), over %d a "
                       "dimension", l->out.dims[0], l->out.dims[1],
                       l->out.dims[2], MD_DIM_MAX);
    return HC_OK;
}

static const struct hc_keras_arg keras_args[] = {
    {"padding", HC_KA_COPY}, {"data_format", HC_KA_LAST}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    cJSON *p = cJSON_CreateArray();

    (void)m;
    cJSON_AddItemToArray(p, kx_pair(l->pad[0], l->pad[1]));
    cJSON_AddItemToArray(p, kx_pair(l->pad[2], l->pad[3]));
    cJSON_AddItemToObject(c, "padding", p);
    cJSON_AddStringToObject(c, "data_format", "channels_last");
}

const struct hc_layer_kind hc_layer_zeropadding2d = {
    .name = "zeropadding2d",
    .keras_class = "ZeroPadding2D",
    .snake = "zero_padding2d",
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
