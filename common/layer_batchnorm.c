/*
 * layer_batchnorm.c — the batchnorm row of the layer table (layer.h),
 * Keras's BatchNormalization over the last axis: in training each channel
 * normalised by the batch's own mean and (biased) variance, in inference
 * by the moving statistics, then scaled by gamma and shifted by beta:
 * y = gamma·(x − mean) / sqrt(var + epsilon) + beta. Its variables, in
 * Keras's order: "NAME/gamma" (C, with scale), "NAME/beta" (C, with
 * center), "NAME/moving_mean" and "NAME/moving_variance" (C each, not
 * trainable: the shards move them by the batch moments each push carries,
 * with momentum). Keras's arguments that change the computation and that
 * hetps does not have (another axis, synchronized, renorm,
 * virtual_batch_size, adjustment, constraints) are refused by name. The
 * worker runs it in worker/nn_batchnorm.c.
 */
#include "layer.h"

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {
    "axis", "momentum", "epsilon", "center", "scale", "beta_initializer",
    "gamma_initializer", "moving_mean_initializer",
    "moving_variance_initializer", "beta_regularizer", "gamma_regularizer",
    "synchronized", "renorm", "renorm_clipping", "virtual_batch_size",
    "adjustment", NULL};

/* Keys whose only value hetps computes is false or null: any other is
 * refused by name. */
static int refuse_set(const cJSON *lj, const char *where)
{
    static const char *const off[] = {"renorm", "renorm_clipping",
                                      "virtual_batch_size", "adjustment"};
    const cJSON *it = md_get(lj, "synchronized");
    char buf[64];

    if (it && !cJSON_IsNull(it) && !cJSON_IsFalse(it))
        return md_fail(where, "\"synchronized\" %s is not supported yet: "
                       "hetps normalises each replica by its own batch's "
                       "moments (synchronized false)",
                       md_show(it, buf, sizeof buf));
    for (size_t k = 0; k < sizeof off / sizeof *off; k++) {
        it = md_get(lj, off[k]);
        if (it && !cJSON_IsNull(it) && !cJSON_IsFalse(it))
            return md_fail(where, "\"%s\" %s is not supported; hetps's "
                           "batchnorm computes Keras's default (%s)", off[k],
                           md_show(it, buf, sizeof buf),
                           k == 0 ? "false" : "null");
    }
    return HC_OK;
}

/* "axis": −1, or a one-element list of it (tf.keras 2 writes [3]); a
 * positive axis is checked against the input in infer. */
static int get_axis(const cJSON *lj, const char *where, int *axis)
{
    const cJSON *it = md_get(lj, "axis");
    char buf[64];

    *axis = -1;
    if (!it)
        return HC_OK;
    if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 1)
        it = cJSON_GetArrayItem(it, 0);
    if (!md_is_int(it) || it->valuedouble < -1 || it->valuedouble > 3 ||
        it->valuedouble == 0)
        return md_fail(where, "\"axis\" %s is not supported; batchnorm "
                       "normalises the last axis only (-1, or 3 for an "
                       "image, 1 for a vector)",
                       md_show(md_get(lj, "axis"), buf, sizeof buf));
    *axis = (int)it->valuedouble;
    return HC_OK;
}

/* An initialiser key whose Keras default is Ones: a Constant of 1. */
static int get_ones(const cJSON *lj, const char *key, const char *where,
                    struct hc_initializer *in)
{
    const cJSON *it = md_get(lj, key);
    int rv = md_get_init(lj, key, where, HC_INIT_CONSTANT, in);

    if (rv == HC_OK && (!it || cJSON_IsNull(it)))
        in->par.a = 1.0f;
    return rv;
}

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    static const struct md_range mom_r = {0, 1, 0, 1};     /* [0, 1) */
    static const struct md_range eps_r = {0, 1, 1, 0};     /* (0, 1] */
    int rv;

    if ((rv = refuse_set(lj, where)) || (rv = get_axis(lj, where, &l->axis)) ||
        (rv = md_get_float(lj, "momentum", where, 0.99, mom_r,
                           &l->momentum)) ||
        (rv = md_get_float(lj, "epsilon", where, 1e-3, eps_r,
                           &l->epsilon)) ||
        (rv = md_get_bool(lj, "center", where, 1, &l->center)) ||
        (rv = md_get_bool(lj, "scale", where, 1, &l->scale)) ||
        (rv = get_ones(lj, "gamma_initializer", where, &l->kernel_init)) ||
        (rv = md_get_init(lj, "beta_initializer", where, HC_INIT_ZEROS,
                          &l->bias_init)) ||
        (rv = md_get_init(lj, "moving_mean_initializer", where,
                          HC_INIT_ZEROS, &l->mm_init)) ||
        (rv = get_ones(lj, "moving_variance_initializer", where,
                       &l->mv_init)) ||
        (rv = md_get_reg(lj, "gamma_regularizer", where, &l->kernel_reg)))
        return rv;
    return md_get_reg(lj, "beta_regularizer", where, &l->bias_reg);
}

/* One (C) variable of l: "L/what", initialiser in, penalty reg. */
static int add_c(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l, const char *what,
                 const struct hc_initializer *in,
                 const struct hc_regularizer *reg, int *idx)
{
    int c = l->in.dims[l->in.rank - 1], rv;

    if ((rv = md_add_var(m, where, l, what, 1, &c, in->kind, c, c, idx)))
        return rv;
    m->vars[*idx].init_par = in->par;
    if (reg)
        m->vars[*idx].reg = *reg;
    return HC_OK;
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    int mm, mv, rv;
    char s[48];

    if (l->axis != -1 && l->axis != l->in.rank)
        return md_fail(where, "\"axis\" %d is not the last axis of its input "
                       "%s; batchnorm normalises the last axis only (-1)",
                       l->axis, md_fmt_shape(&l->in, s, sizeof s));
    l->axis = -1;       /* 3 of an image is its last: the same layer */
    if ((l->scale && (rv = add_c(m, where, l, "gamma", &l->kernel_init,
                                 &l->kernel_reg, &l->var_kernel))) ||
        (l->center && (rv = add_c(m, where, l, "beta", &l->bias_init,
                                  &l->bias_reg, &l->var_bias))) ||
        (rv = add_c(m, where, l, "moving_mean", &l->mm_init, NULL, &mm)) ||
        (rv = add_c(m, where, l, "moving_variance", &l->mv_init, NULL, &mv)))
        return rv;
    m->vars[mm].moving = m->vars[mv].moving = 1;
    m->vars[mm].momentum = m->vars[mv].momentum = l->momentum;
    m->vars[mv].moments_of = mm;
    return HC_OK;
}

static const struct hc_keras_arg keras_args[] = {
    {"axis", HC_KA_COPY}, {"momentum", HC_KA_COPY}, {"epsilon", HC_KA_COPY},
    {"center", HC_KA_COPY}, {"scale", HC_KA_COPY},
    {"beta_initializer", HC_KA_INIT}, {"gamma_initializer", HC_KA_INIT},
    {"moving_mean_initializer", HC_KA_INIT},
    {"moving_variance_initializer", HC_KA_INIT},
    {"beta_regularizer", HC_KA_REG}, {"gamma_regularizer", HC_KA_REG},
    {"beta_constraint", HC_KA_NULL}, {"gamma_constraint", HC_KA_NULL},
    {"synchronized", HC_KA_COPY}, {"renorm", HC_KA_COPY},
    {"renorm_clipping", HC_KA_COPY}, {"renorm_momentum", HC_KA_IGNORE},
    {"virtual_batch_size", HC_KA_COPY}, {"adjustment", HC_KA_COPY},
    {"fused", HC_KA_IGNORE}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    cJSON_AddNumberToObject(c, "axis", -1);
    cJSON_AddNumberToObject(c, "momentum", kx_tidy(l->momentum));
    cJSON_AddNumberToObject(c, "epsilon", kx_tidy(l->epsilon));
    cJSON_AddBoolToObject(c, "center", l->center);
    cJSON_AddBoolToObject(c, "scale", l->scale);
    cJSON_AddItemToObject(c, "beta_initializer",
                          kx_init_json(&l->bias_init, m->seed));
    cJSON_AddItemToObject(c, "gamma_initializer",
                          kx_init_json(&l->kernel_init, m->seed));
    cJSON_AddItemToObject(c, "moving_mean_initializer",
                          kx_init_json(&l->mm_init, m->seed));
    cJSON_AddItemToObject(c, "moving_variance_initializer",
                          kx_init_json(&l->mv_init, m->seed));
    cJSON_AddItemToObject(c, "beta_regularizer", kx_reg_json(&l->bias_reg));
    cJSON_AddItemToObject(c, "gamma_regularizer",
                          kx_reg_json(&l->kernel_reg));
    cJSON_AddNullToObject(c, "beta_constraint");
    cJSON_AddNullToObject(c, "gamma_constraint");
    cJSON_AddBoolToObject(c, "synchronized", 0);
}

const struct hc_layer_kind hc_layer_batchnorm = {
    .name = "batchnorm",
    .spellings = (const char *const[]){"batchnormalization",
                                        "batch_normalization", NULL},
    .keras_class = "BatchNormalization",
    .snake = "batch_normalization",
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
