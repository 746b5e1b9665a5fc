/*
 * layer_embedding.c — the embedding row of the layer table (layer.h),
 * Keras's Embedding: each of a sample's N int64 ids (a model input with
 * "dtype": "int64", shape (N)) looked up as a row of a table, (N) →
 * (N, output_dim). Its one variable "NAME/embeddings" is a row-sparse
 * table (model.h, table_rows = input_dim, up to 2^62): split by row over
 * the shards, never pulled whole; a row never written is its
 * initialiser's (RandomUniform(−0.05, 0.05) by default, hc_init_row).
 * mask_zero is refused (hetps has no masks), as is a regularizer (the
 * shards apply a table's rows without one). The worker runs it in
 * worker/nn_embedding.c.
 */
#include "layer.h"

#include <stdint.h>

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"
#include "rowmap.h"

static const char *const keys[] = {"input_dim", "output_dim",
                                   "embeddings_initializer",
                                   "embeddings_regularizer", "mask_zero",
                                   "input_length", NULL};

static int parse_input_dim(const cJSON *lj, const char *where,
                           struct hc_layer_spec *l)
{
    const cJSON *it = md_get(lj, "input_dim");
    char buf[64];

    if (!it)
        return md_missing(where, "input_dim", "1000000");
    if (!md_is_int(it) || it->valuedouble < 1 ||
        it->valuedouble > (double)HC_ROW_ID_LIMIT)
        return md_fail(where, "\"input_dim\" must be a whole number of rows "
                       "from 1 to 2^62, got %s", md_show(it, buf, sizeof buf));
    l->input_dim = (uint64_t)it->valuedouble;
    return HC_OK;
}

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    struct hc_regularizer reg;
    int mask, rv;

    if ((rv = parse_input_dim(lj, where, l)))
        return rv;
    if (!md_get(lj, "output_dim"))
        return md_missing(where, "output_dim", "16");
    if ((rv = md_get_int(lj, "output_dim", where, 0, 1, MD_DIM_MAX,
                         &l->units)) ||
        (rv = md_get_init(lj, "embeddings_initializer", where,
                          HC_INIT_RANDOM_UNIFORM, &l->kernel_init)) ||
        (rv = md_get_reg(lj, "embeddings_regularizer", where, &reg)) ||
        (rv = md_get_bool(lj, "mask_zero", where, 0, &mask)))
        return rv;
    if (!md_get(lj, "embeddings_initializer") ||
        cJSON_IsNull(md_get(lj, "embeddings_initializer")))
        l->kernel_init.par = (struct hc_init_par){-0.05f, 0.05f, 0, 0};
    if (reg.l1 || reg.l2)
        return md_fail(where, "embedding \"embeddings_regularizer\" is not "
                       "supported: the shards apply a table's rows without "
                       "a penalty; leave it null");
    if (mask)
        return md_fail(where, "embedding \"mask_zero\" true is not "
                       "supported: hetps has no masks, id 0 is a row like "
                       "any other; leave it false");
    if (cJSON_IsNull(md_get(lj, "input_length")))
        return HC_OK;
    return md_get_int(lj, "input_length", where, 0, 0, MD_DIM_MAX,
                      &l->filters);  /* checked in infer, then dropped */
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    /* Added as a variable of one row, then made a table: its elements are
     * none of the model's parameters. */
    int one_row[2] = {1, l->units}, rows, rv;
    struct hc_var_def *v;
    char si[48];

    if (l->in.rank != 1)
        return md_fail(where, "embedding needs a flat input of ids (N) but "
                       "its input has shape %s",
                       md_fmt_shape(&l->in, si, sizeof si));
    if (l->filters && l->filters != l->in.dims[0])
        return md_fail(where, "embedding \"input_length\" %d differs from "
                       "its input's %d ids", l->filters, l->in.dims[0]);
    l->filters = 0;
    l->out.rank = 2;
    l->out.dims[0] = l->in.dims[0];
    l->out.dims[1] = l->units;
    l->out.dims[2] = 0;
    if ((rv = md_add_var(m, where, l, "embeddings", 2, one_row,
                         l->kernel_init.kind, 0, 0, &l->var_kernel)))
        return rv;
    rows = l->input_dim <= INT32_MAX ? (int)l->input_dim : 0;
    v = &m->vars[l->var_kernel];
    m->n_params -= v->size;
    v->size = 0;
    v->shape[0] = rows;             /* model.h: 0 when over an int */
    v->table_rows = l->input_dim;
    v->init_par = l->kernel_init.par;
    v->fan_in = rows;
    v->fan_out = l->units;
    return HC_OK;
}

static const struct hc_keras_arg keras_args[] = {
    {"input_dim", HC_KA_COPY}, {"output_dim", HC_KA_COPY},
    {"embeddings_initializer", HC_KA_INIT},
    {"embeddings_regularizer", HC_KA_NULL},
    {"activity_regularizer", HC_KA_NULL},
    {"embeddings_constraint", HC_KA_NULL}, {"mask_zero", HC_KA_FALSE},
    {"input_length", HC_KA_COPY}, {"sparse", HC_KA_FALSE},
    {"lora_rank", HC_KA_NULL}, {"lora_alpha", HC_KA_IGNORE}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    cJSON_AddNumberToObject(c, "input_dim", (double)l->input_dim);
    cJSON_AddNumberToObject(c, "output_dim", l->units);
    cJSON_AddItemToObject(c, "embeddings_initializer",
                          kx_init_json(&l->kernel_init, m->seed));
    cJSON_AddNullToObject(c, "embeddings_regularizer");
    cJSON_AddNullToObject(c, "activity_regularizer");
    cJSON_AddNullToObject(c, "embeddings_constraint");
    cJSON_AddFalseToObject(c, "mask_zero");
}

const struct hc_layer_kind hc_layer_embedding = {
    .name = "embedding",
    .keras_class = "Embedding",
    .snake = "embedding",
    .flags = HC_LAYER_IDS,
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
