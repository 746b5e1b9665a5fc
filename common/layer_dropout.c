/*
 * layer_dropout.c — the dropout row of the layer table (layer.h), Keras's
 * Dropout: in training, each value zeroed with probability `rate` and the
 * rest scaled by 1 / (1 − rate); the identity otherwise. Output shape =
 * input shape, no variables. The worker runs it in worker/nn_dropout.c.
 */
#include "layer.h"

#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {"rate", NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    static const struct md_range rate_r = {0, 1, 0, 1};

    if (!md_get(lj, "rate"))
        return md_missing(where, "rate", "0.2");
    return md_get_float(lj, "rate", where, 0, rate_r, &l->rate);
}

static const struct hc_keras_arg keras_args[] = {
    {"rate", HC_KA_COPY}, {"noise_shape", HC_KA_NULL},
    {"seed", HC_KA_IGNORE}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)m;
    cJSON_AddNumberToObject(c, "rate", kx_tidy(l->rate));
    cJSON_AddNullToObject(c, "seed");
    cJSON_AddNullToObject(c, "noise_shape");
}

const struct hc_layer_kind hc_layer_dropout = {
    .name = "dropout",
    .keras_class = "Dropout",
    .snake = "dropout",
    .keys = keys,
    .parse = parse,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
