/*
 * layer_concatenate.c — the concatenate row of the layer table (layer.h),
 * Keras's Concatenate: its inputs side by side along "axis" (Keras's
 * count, the batch being axis 0; −1, the default, is the channels of an
 * image and the values of a vector). The inputs agree on every other
 * dimension. No variables. The worker runs it in worker/nn_merge.c.
 */
#include "layer.h"

#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {"axis", NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    int rv = md_get_int(lj, "axis", where, -1, -3, 3, &l->axis);

    if (rv == 0 && l->axis == 0)
        return md_fail(where, "\"axis\" 0 is the batch; concatenate along "
                       "1 to 3, or −1 (the last)");
    return rv;
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    int ax = l->axis < 0 ? l->in.rank + l->axis : l->axis - 1, sum = 0;
    char s0[48], sk[48];

    if (ax < 0 || ax >= l->in.rank)
        return md_fail(where, "\"axis\" %d does not fit its input %s",
                       l->axis, md_fmt_shape(&l->in, s0, sizeof s0));
    for (int k = 0; k < l->n_in; k++) {
        const struct hc_shape *s = hc_model_node_shape(m, l->in_from[k]);
        int fit = s->rank == l->in.rank;

        for (int d = 0; fit && d < s->rank; d++)
            fit = d == ax || s->dims[d] == l->in.dims[d];
        if (!fit)
            return md_fail(where, "concatenate along axis %d needs inputs "
                           "that agree on the other dimensions, but \"%s\" "
                           "gives %s and \"%s\" gives %s", l->axis,
                           hc_model_node_name(m, l->in_from[0]),
                           md_fmt_shape(&l->in, s0, sizeof s0),
                           hc_model_node_name(m, l->in_from[k]),
                           md_fmt_shape(s, sk, sizeof sk));
        sum += s->dims[ax];
    }
    if (sum > MD_DIM_MAX)
        return md_fail(where, "the output would be %d long on axis %d, more "
                       "than %d", sum, l->axis, MD_DIM_MAX);
    l->out.dims[ax] = sum;
    return 0;
}

static const struct hc_keras_arg keras_args[] = {
    {"axis", HC_KA_COPY}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)m;
    cJSON_AddNumberToObject(c, "axis", l->axis);
}

const struct hc_layer_kind hc_layer_concatenate = {
    .name = "concatenate",
    .keras_class = "Concatenate",
    .snake = "concatenate",
    .flags = HC_LAYER_MERGE,
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
