/*
 * layer_reshape.c — the reshape row of the layer table (layer.h), Keras's
 * Reshape: the same values, in the same (NHWC) order, as target_shape,
 * (N) or (H, W, C); one dimension may be −1, the one the others leave.
 * No variables. The worker runs it in worker/nn_reshape.c.
 */
#include "layer.h"

#include "err.h"
#include "model_impl.h"

static const char *const keys[] = {"target_shape", NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    const cJSON *t = md_get(lj, "target_shape"), *d;
    int n, k = 0, rv, free_dim = 0;

    if (!t)
        return md_missing(where, "target_shape", "[7, 7, 64] or [-1]");
    n = cJSON_IsArray(t) ? cJSON_GetArraySize(t) : 0;
    if (n != 1 && n != 3)
        return md_fail(where, "reshape target_shape must be [N] or "
                       "[H, W, C] (one of them may be -1); hetps has "
                       "shapes of 1 or 3 dimensions, got %s",
                       cJSON_IsArray(t) ? "another length" : "no array");
    l->target.rank = n;
    cJSON_ArrayForEach(d, t) {
        if (md_is_int(d) && d->valuedouble == -1) {
            if (free_dim++)
                return md_fail(where, "reshape target_shape may have one "
                               "-1 (the dimension the others leave), "
                               "not two");
            l->target.dims[k++] = -1;
            continue;
        }
        if ((rv = md_int_value(d, "target_shape", where, 1,
                               n == 1 ? (int)MD_ELEMS_MAX : MD_DIM_MAX,
                               &l->target.dims[k++])))
            return rv;
    }
    return HC_OK;
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    uint64_t total = md_shape_elems(&l->in), known = 1;
    uint64_t most = l->target.rank == 1 ? MD_ELEMS_MAX : MD_DIM_MAX;
    int k, free_at = -1;
    char si[48], st[48];

    (void)m;
    for (k = 0; k < l->target.rank; k++) {
        if (l->target.dims[k] < 0)
            free_at = k;
        else
            known *= (uint64_t)l->target.dims[k];
    }
    l->out = l->target;
    l->out.dims[1] = l->target.rank == 3 ? l->target.dims[1] : 0;
    l->out.dims[2] = l->target.rank == 3 ? l->target.dims[2] : 0;
    if (free_at >= 0 && total % known == 0 && total / known <= most)
        l->out.dims[free_at] = (int)(total / known);
    else if (free_at >= 0 || known != total)
        return md_fail(where, "reshape target_shape %s does not hold the "
                       "%llu values of its input %s",
                       md_fmt_shape(&l->target, st, sizeof st),
                       (unsigned long long)total,
                       md_fmt_shape(&l->in, si, sizeof si));
    return HC_OK;
}

static const struct hc_keras_arg keras_args[] = {
    {"target_shape", HC_KA_COPY}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)m;
    cJSON_AddItemToObject(c, "target_shape",
                          cJSON_CreateIntArray(l->target.dims,
                                               l->target.rank));
}

const struct hc_layer_kind hc_layer_reshape = {
    .name = "reshape",
    .keras_class = "Reshape",
    .snake = "reshape",
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
