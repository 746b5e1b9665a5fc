/*
 * layer_layer_normalization.c — the layer_normalization row of the layer
 * table (layer.h), Keras's LayerNormalization over the last axis: each
 * sample's vector along it (a pixel's C channels, or a flat input) less
 * its mean, over sqrt(variance + epsilon) (the biased variance, epsilon
 * 1e-3 by default), times gamma and plus beta. Its variables are, in
 * Keras's order, "NAME/gamma" (with scale, Ones) then "NAME/beta" (with
 * center, Zeros), each the last axis long, with Keras's
 * gamma_/beta_initializer and _regularizer. Only the last axis: "axis"
 * −1, [−1] or the last axis by number (tf.keras 2 writes [3] for an image
 * once built); any other is refused by name, as is Keras 3's
 * rms_scaling true. The worker runs it in worker/nn_layer_normalization.c.
 */
#include "layer.h"

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {
    "axis", "epsilon", "center", "scale", "gamma_initializer",
    "beta_initializer", "gamma_regularizer", "beta_regularizer", NULL};

/* "axis": an int, or a list of one. */
static int get_axis(const cJSON *lj, const char *where, int *axis)
{
    const cJSON *a = md_get(lj, "axis");

    *axis = -1;
    if (!a)
        return HC_OK;
    if (cJSON_IsArray(a) && cJSON_GetArraySize(a) == 1 &&
        md_is_int(a->child) && a->child->valuedouble >= -4 &&
        a->child->valuedouble <= 4) {
        *axis = (int)a->child->valuedouble;
        return HC_OK;
    }
    if (md_is_int(a) && a->valuedouble >= -4 && a->valuedouble <= 4) {
        *axis = (int)a->valuedouble;
        return HC_OK;
    }
    {
        char *s = cJSON_PrintUnformatted(a);
        int rv = md_fail(where, "\"axis\" %s is not supported; "
                         "layer_normalization normalises over the last axis "
                         "only: -1, [-1] or its number", s ? s : "?");

        cJSON_free(s);
        return rv;
    }
}

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    static const struct md_range eps_r = {0, 1, 1, 0};
    int rv;

    if ((rv = get_axis(lj, where, &l->axis)) ||
        (rv = md_get_float(lj, "epsilon", where, 1e-3, eps_r,
                           &l->epsilon)) ||
        (rv = md_get_bool(lj, "center", where, 1, &l->center)) ||
        (rv = md_get_bool(lj, "scale", where, 1, &l->scale)) ||
        (rv = md_get_init(lj, "gamma_initializer", where, HC_INIT_CONSTANT,
                          &l->kernel_init)) ||
        (rv = md_get_init(lj, "beta_initializer", where, HC_INIT_ZEROS,
                          &l->bias_init)) ||
        (rv = md_get_reg(lj, "gamma_regularizer", where, &l->kernel_reg)))
        return rv;
    if (!md_get(lj, "gamma_initializer") ||
        cJSON_IsNull(md_get(lj, "gamma_initializer")))
        l->kernel_init.par.a = 1;           /* Keras's Ones */
    return md_get_reg(lj, "beta_regularizer", where, &l->bias_reg);
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    int n = l->in.dims[l->in.rank - 1], rv;
    char s[48];

    if (l->axis != -1 && l->axis != l->in.rank)
        return md_fail(where, "\"axis\" %d is not supported for its input "
                       "%s; layer_normalization normalises over the last "
                       "axis only (-1, or %d)", l->axis,
                       md_fmt_shape(&l->in, s, sizeof s), l->in.rank);
    l->axis = -1;           /* one axis, however it was written */
    if (l->scale) {
        if ((rv = md_add_var(m, where, l, "gamma", 1, &n, l->kernel_init.kind,
                             0, 0, &l->var_kernel)))
            return rv;
        m->vars[l->var_kernel].init_par = l->kernel_init.par;
        m->vars[l->var_kernel].reg = l->kernel_reg;
    }
    if (l->center) {
        if ((rv = md_add_var(m, where, l, "beta", 1, &n, l->bias_init.kind,
                             0, 0, &l->var_bias)))
            return rv;
        m->vars[l->var_bias].init_par = l->bias_init.par;
        m->vars[l->var_bias].reg = l->bias_reg;
    }
    return HC_OK;
}

static const struct hc_keras_arg keras_args[] = {
    {"axis", HC_KA_COPY}, {"epsilon", HC_KA_COPY}, {"center", HC_KA_COPY},
    {"scale", HC_KA_COPY}, {"rms_scaling", HC_KA_FALSE},
    {"gamma_initializer", HC_KA_INIT}, {"beta_initializer", HC_KA_INIT},
    {"gamma_regularizer", HC_KA_REG}, {"beta_regularizer", HC_KA_REG},
    {"gamma_constraint", HC_KA_NULL}, {"beta_constraint", HC_KA_NULL},
    {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    cJSON_AddNumberToObject(c, "axis", -1);
    cJSON_AddNumberToObject(c, "epsilon", kx_tidy(l->epsilon));
    cJSON_AddBoolToObject(c, "center", l->center);
    cJSON_AddBoolToObject(c, "scale", l->scale);
    cJSON_AddFalseToObject(c, "rms_scaling");
    cJSON_AddItemToObject(c, "beta_initializer",
                          kx_init_json(&l->bias_init, m->seed));
    cJSON_AddItemToObject(c, "gamma_initializer",
                          kx_init_json(&l->kernel_init, m->seed));
    cJSON_AddItemToObject(c, "beta_regularizer", kx_reg_json(&l->bias_reg));
    cJSON_AddItemToObject(c, "gamma_regularizer",
                          kx_reg_json(&l->kernel_reg));
    cJSON_AddNullToObject(c, "beta_constraint");
    cJSON_AddNullToObject(c, "gamma_constraint");
}

const struct hc_layer_kind hc_layer_layer_normalization = {
    .name = "layer_normalization",
    .spellings = (const char *const[]){"layernormalization", "layernorm",
                                       NULL},
    .keras_class = "LayerNormalization",
    .snake = "layer_normalization",
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
