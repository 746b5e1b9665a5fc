/*
 * layer_relu.c — the relu and leaky_relu rows of the layer table
 * (layer.h), Keras's ReLU and LeakyReLU layers, as Keras computes them:
 *
 *   f(x) = min(x, max_value)          x > threshold (and ≥ 0 with a
 *                                     max_value)
 *          negative_slope·(x − threshold)   x ≤ threshold
 *
 * ReLU takes max_value (none by default), negative_slope (0) and
 * threshold (0); LeakyReLU is the same with negative_slope 0.3 (Keras 3's
 * name; tf.keras 2 calls it alpha) and nothing else. Output shape = input
 * shape, no variables. The worker runs both in worker/nn_relu.c.
 */
#include "layer.h"

#include "keras_impl.h"
#include "model_impl.h"

static const struct md_range nonneg = {0, 3.4e38, 0, 0};
static const struct md_range any = {-3.4e38, 3.4e38, 0, 0};

static const char *const keys_relu[] = {"max_value", "negative_slope",
                                        "threshold", NULL};
static const char *const keys_leaky[] = {"negative_slope", "alpha", NULL};

static int parse_relu(const cJSON *lj, const char *where,
                      struct hc_layer_spec *l)
{
    const cJSON *mv = md_get(lj, "max_value");
    int rv;

    l->max_value = -1;
    if (mv && !cJSON_IsNull(mv) &&
        (rv = md_get_float(lj, "max_value", where, 0, nonneg,
                           &l->max_value)))
        return rv;
    if ((rv = md_get_float(lj, "negative_slope", where, 0, nonneg,
                           &l->negative_slope)))
        return rv;
    return md_get_float(lj, "threshold", where, 0, any, &l->threshold);
}

static int parse_leaky(const cJSON *lj, const char *where,
                       struct hc_layer_spec *l)
{
    const char *key = md_get(lj, "alpha") ? "alpha" : "negative_slope";

    l->max_value = -1;
    if (md_get(lj, "alpha") && md_get(lj, "negative_slope"))
        return md_fail(where, "give \"negative_slope\" (Keras 3) or "
                       "\"alpha\" (tf.keras 2), not both");
    return md_get_float(lj, key, where, 0.3, nonneg, &l->negative_slope);
}

static const struct hc_keras_arg keras_relu[] = {
    {"max_value", HC_KA_COPY}, {"negative_slope", HC_KA_COPY},
    {"threshold", HC_KA_COPY}, {NULL, 0}};
static const struct hc_keras_arg keras_leaky[] = {
    {"negative_slope", HC_KA_COPY}, {"alpha", HC_KA_COPY}, {NULL, 0}};

static void config_relu(cJSON *c, const struct hc_model *m,
                        const struct hc_layer_spec *l)
{
    (void)m;
    if (l->max_value < 0)
        cJSON_AddNullToObject(c, "max_value");
    else
        cJSON_AddNumberToObject(c, "max_value", kx_tidy(l->max_value));
    cJSON_AddNumberToObject(c, "negative_slope", kx_tidy(l->negative_slope));
    cJSON_AddNumberToObject(c, "threshold", kx_tidy(l->threshold));
}

static void config_leaky(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)m;
    cJSON_AddNumberToObject(c, "negative_slope", kx_tidy(l->negative_slope));
}

const struct hc_layer_kind hc_layer_relu = {
    .name = "relu",
    .keras_class = "ReLU",
    .snake = "re_lu",
    .keys = keys_relu,
    .parse = parse_relu,
    .keras_args = keras_relu,
    .keras_config = config_relu,
};

static const char *const leaky_spellings[] = {"leakyrelu", NULL};

const struct hc_layer_kind hc_layer_leaky_relu = {
    .name = "leaky_relu",
    .spellings = leaky_spellings,
    .keras_class = "LeakyReLU",
    .snake = "leaky_re_lu",
    .keys = keys_leaky,
    .parse = parse_leaky,
    .keras_args = keras_leaky,
    .keras_config = config_leaky,
};
