/*
 * layer_activation.c — the activation row of the layer table (layer.h),
 * Keras's Activation: one activation applied to its input, alone. Output
 * shape = input shape, no variables. The worker runs it in
 * worker/nn_activation.c.
 */
#include "layer.h"

#include "model_impl.h"

static const char *const keys[] = {"activation", NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    if (!md_get(lj, "activation"))
        return md_missing(where, "activation", "\"relu\"");
    return md_get_act(lj, where, HC_ACT_LINEAR, &l->act);
}

static const struct hc_keras_arg keras_args[] = {
    {"activation", HC_KA_ACT}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)m;
    cJSON_AddStringToObject(c, "activation", hc_act_name(l->act));
}

const struct hc_layer_kind hc_layer_activation = {
    .name = "activation",
    .keras_class = "Activation",
    .snake = "activation",
    .flags = HC_LAYER_ACT,
    .keys = keys,
    .parse = parse,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
