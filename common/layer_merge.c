/*
 * layer_merge.c — the elementwise merges of the layer table (layer.h):
 * Keras's Add (the sum of its inputs), Subtract (the first minus the
 * second), Average (the mean) and Multiply (the product). Each reads 2 or more nodes of one shape
 * (Subtract exactly 2) and outputs that shape; no settings, no variables.
 * The worker runs them in worker/nn_merge.c.
 */
#include "layer.h"

#include "model_impl.h"

/* Every input of l has l->in's shape; max_in bounds how many it takes. */
static int same_shapes(struct hc_model *m, const char *where,
                       struct hc_layer_spec *l, int max_in)
{
    const char *kind = hc_layer_type_name(l->type);
    char s0[48], sk[48];

    if (l->n_in > max_in)
        return md_fail(where, "%s takes %d inputs, got %d", kind, max_in,
                       l->n_in);
    for (int k = 1; k < l->n_in; k++) {
        const struct hc_shape *s = hc_model_node_shape(m, l->in_from[k]);
        int same = s->rank == l->in.rank;

        for (int d = 0; same && d < s->rank; d++)
            same = s->dims[d] == l->in.dims[d];
        if (!same)
            return md_fail(where, "%s needs inputs of one shape, but \"%s\" "
                           "gives %s and \"%s\" gives %s", kind,
                           hc_model_node_name(m, l->in_from[0]),
                           md_fmt_shape(&l->in, s0, sizeof s0),
                           hc_model_node_name(m, l->in_from[k]),
                           md_fmt_shape(s, sk, sizeof sk));
    }
    return 0;
}

static int infer_many(struct hc_model *m, const char *where,
                      struct hc_layer_spec *l)
{
    return same_shapes(m, where, l, HC_LAYER_MAX_IN);
}

static int infer_two(struct hc_model *m, const char *where,
                     struct hc_layer_spec *l)
{
    return same_shapes(m, where, l, 2);
}

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)c;
    (void)m;
    (void)l;
}

static const struct hc_keras_arg keras_args[] = {{NULL, 0}};

const struct hc_layer_kind hc_layer_add = {
    .name = "add",
    .keras_class = "Add",
    .snake = "add",
    .flags = HC_LAYER_MERGE,
    .infer = infer_many,
    .keras_args = keras_args,
    .keras_config = keras_config,
};

const struct hc_layer_kind hc_layer_subtract = {
    .name = "subtract",
    .keras_class = "Subtract",
    .snake = "subtract",
    .flags = HC_LAYER_MERGE,
    .infer = infer_two,
    .keras_args = keras_args,
    .keras_config = keras_config,
};

const struct hc_layer_kind hc_layer_average = {
    .name = "average",
    .keras_class = "Average",
    .snake = "average",
    .flags = HC_LAYER_MERGE,
    .infer = infer_many,
    .keras_args = keras_args,
    .keras_config = keras_config,
};

const struct hc_layer_kind hc_layer_multiply = {
    .name = "multiply",
    .keras_class = "Multiply",
    .snake = "multiply",
    .flags = HC_LAYER_MERGE,
    .infer = infer_many,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
