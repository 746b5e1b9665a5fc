/*
 * test_embedding.c — the embedding layer and globalavgpool1d: the
 * click-through model (tests/unit/keras/ctr*.json) read from hetps's
 * file, Keras 3's and tf.keras 2's Functional JSON as one model (its
 * table a row-sparse variable outside the dense parameters) and written
 * back; every refusal by its message; and the worker's half on the CPU:
 * the forward a lookup of the step's rows, the rows' gradients summed by
 * row (ids repeated within the batch) against finite differences of the
 * loss, with flatten and with globalavgpool1d, beside a numeric input.
 */
#include "cu.h"
#include "err.h"
#include "keras.h"
#include "model.h"
#include "nn_ref.h"
#include "worker/backend.h"
#include "worker/nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define G "tests/unit/keras/"

static struct hc_model *ma, *mb;

/* JSON with ' for ". */
static const char *dq(const char *s, char *buf, size_t len)
{
    size_t i = 0;

    for (; s[i] && i + 1 < len; i++)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    buf[i] = '\0';
    return buf;
}

static void load_or_fail(const char *path, const struct hc_model_compile *c,
                         struct hc_model *m)
{
    int rv = hc_model_load_compiled(path, c, m);

    if (rv != HC_OK)
        printf("\n  %s: %s (run from the repository root)\n", path,
               hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
}

/* ---- the layer row --------------------------------------------------- */

static void test_ctr_model(void)
{
    /* tf.keras 2's to_json() carries no compile settings. */
    static const struct hc_model_compile k2 = {
        "binary_crossentropy", "{\"type\": \"adagrad\", \"learning_rate\": "
        "0.01}"};
    const struct hc_var_def *t;
    char *json = NULL;

    load_or_fail(G "ctr.json", NULL, ma);
    CU_ASSERT_EQUAL(ma->n_inputs, 2);
    CU_ASSERT_FALSE(ma->inputs[0].ids);
    CU_ASSERT_TRUE(ma->inputs[1].ids);
    CU_ASSERT_EQUAL(ma->layers[0].type, HC_LAYER_EMBEDDING);
    CU_ASSERT_EQUAL(ma->layers[0].out.rank, 2);
    CU_ASSERT_EQUAL(ma->layers[0].out.dims[0], 26);
    CU_ASSERT_EQUAL(ma->layers[0].out.dims[1], 8);
    CU_ASSERT_EQUAL(ma->layers[2].out.dims[0], 26 * 8 + 13);
    t = &ma->vars[ma->layers[0].var_kernel];
    CU_ASSERT_STRING_EQUAL(t->name, "embedding/embeddings");
    CU_ASSERT_EQUAL(t->table_rows, 100000);
    CU_ASSERT_EQUAL(t->size, 0);
    CU_ASSERT_EQUAL(t->shape[0], 100000);
    CU_ASSERT_EQUAL(t->shape[1], 8);
    CU_ASSERT_EQUAL(t->init, HC_INIT_RANDOM_UNIFORM);
    CU_ASSERT_DOUBLE_EQUAL(t->init_par.a, -0.05, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(t->init_par.b, 0.05, 1e-9);
    /* The dense layers' parameters only: the table is not among them. */
    CU_ASSERT_EQUAL(ma->n_params, (size_t)(221 * 256 + 256 + 256 * 128 +
                                           128 + 128 + 1));

    load_or_fail(G "ctr.keras3.json", NULL, mb);
    CU_ASSERT_EQUAL(ma->signature, mb->signature);
    CU_ASSERT_TRUE(mb->inputs[1].ids);
    CU_ASSERT_EQUAL(mb->vars[0].table_rows, 100000);
    load_or_fail(G "ctr.keras2.json", &k2, mb);
    CU_ASSERT_EQUAL(ma->signature, mb->signature);
    CU_ASSERT_EQUAL(ma->n_params, mb->n_params);

    /* Written as Keras's config.json and read back: the same model. */
    CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"dtype\":\"int64\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"class_name\":\"Embedding\""));
    if (hc_model_parse(json, strlen(json), "config.json", mb) != HC_OK)
        printf("\n  %s\n", hc_err_msg());
    CU_ASSERT_EQUAL(ma->signature, mb->signature);
    free(json);
}

/* The fixture `path` (G …) with its first `from` replaced by `to`: a
 * malloc'd string (the test fails when `from` is not in it). */
static char *replaced(const char *path, const char *from, const char *to)
{
    FILE *f = fopen(path, "rb");
    char *text = malloc(1 << 16), *out, *at;
    size_t n;

    CU_ASSERT_FATAL(f && text);
    n = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    text[n] = '\0';
    at = strstr(text, from);
    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    out = malloc(n + strlen(to) + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    memcpy(out, text, (size_t)(at - text));
    strcpy(out + (at - text), to);
    strcat(out, at + strlen(from));
    free(text);
    return out;
}

/* tf.keras 2's GlobalAveragePooling1D over the rows instead of Flatten:
 * (26, 8) → (8), the first dense then (8 + 13, 256). */
static void test_keras_pooled(void)
{
    static const struct hc_model_compile k2 = {"binary_crossentropy",
                                               "sgd"};
    char path[512], dir[256];
    char *text = replaced(G "ctr.keras2.json", "\"class_name\": \"Flatten\"",
                          "\"class_name\": \"GlobalAveragePooling1D\"");
    FILE *o;

    hp_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/pooled.json", dir);
    CU_ASSERT_PTR_NOT_NULL_FATAL(o = fopen(path, "wb"));
    fputs(text, o);
    fclose(o);
    load_or_fail(path, &k2, ma);
    CU_ASSERT_EQUAL(ma->layers[1].type, HC_LAYER_GLOBALAVGPOOL1D);
    CU_ASSERT_EQUAL(ma->layers[1].out.dims[0], 8);
    CU_ASSERT_EQUAL(ma->vars[1].shape[0], 8 + 13);
    CU_ASSERT_EQUAL(ma->vars[1].shape[1], 256);
    hp_rmtree(dir);
    free(text);
}

/* An input_dim of 2^62 and GlobalAveragePooling1D over the rows. */
static void test_big_table_pooled(void)
{
    char buf[1024];

    dq("{'seed': 3, 'inputs': [{'name': 'ids', 'shape': [5], 'dtype': "
       "'int64'}], 'layers': [{'type': 'embedding', 'input_dim': "
       "4611686018427387904, 'output_dim': 4, 'inputs': 'ids'}, {'type': "
       "'GlobalAveragePooling1D'}, {'type': 'dense', 'units': 1, "
       "'activation': 'sigmoid'}], 'loss': 'binary_crossentropy', "
       "'optimizer': 'sgd'}", buf, sizeof buf);
    if (hc_model_parse(buf, strlen(buf), "pooled", ma) != HC_OK)
        printf("\n  %s\n", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(ma->n_layers, 3);
    CU_ASSERT_EQUAL(ma->vars[0].table_rows, 1ull << 62);
    CU_ASSERT_EQUAL(ma->vars[0].shape[0], 0);   /* too large for an int */
    CU_ASSERT_EQUAL(ma->layers[1].type, HC_LAYER_GLOBALAVGPOOL1D);
    CU_ASSERT_EQUAL(ma->layers[1].out.rank, 1);
    CU_ASSERT_EQUAL(ma->layers[1].out.dims[0], 4);
    CU_ASSERT_EQUAL(ma->n_params, 5);
}

#define IDS "{'inputs': [{'name': 'ids', 'shape': [3], 'dtype': 'int64'}, " \
            "{'name': 'x', 'shape': [2]}], 'layers': ["
#define TAIL ", {'type': 'dense', 'units': 1, 'activation': 'sigmoid'}], " \
             "'loss': 'binary_crossentropy', 'optimizer': 'sgd'}"
#define EMB(more) "{'type': 'embedding', 'input_dim': 10, 'output_dim': 2, " \
                  "'inputs': 'ids'" more "}, {'type': 'flatten'}"

static void test_refused(void)
{
    static const struct { const char *json, *want; } bad[] = {
        {IDS EMB(", 'mask_zero': true") TAIL,
         "embedding \"mask_zero\" true is not supported: hetps has no masks"},
        {IDS EMB(", 'embeddings_regularizer': 'l2'") TAIL,
         "\"embeddings_regularizer\" is not supported: the shards apply a "
         "table's rows without a penalty"},
        {IDS EMB(", 'input_length': 4") TAIL,
         "embedding \"input_length\" 4 differs from its input's 3 ids"},
        {"{'inputs': [{'name': 'ids', 'shape': [3], 'dtype': 'int64'}], "
         "'layers': [{'type': 'embedding', 'input_dim': 0, 'output_dim': 2}, "
         "{'type': 'flatten'}" TAIL,
         "\"input_dim\" must be a whole number of rows from 1 to 2^62, got 0"},
        {"{'inputs': [{'name': 'ids', 'shape': [3], 'dtype': 'int64'}], "
         "'layers': [{'type': 'embedding', 'input_dim': 9.3e18, "
         "'output_dim': 2}, {'type': 'flatten'}" TAIL,
         "\"input_dim\" must be a whole number of rows from 1 to 2^62"},
        {"{'inputs': [{'name': 'ids', 'shape': [3], 'dtype': 'int64'}], "
         "'layers': [{'type': 'embedding', 'output_dim': 2}, "
         "{'type': 'flatten'}" TAIL, "missing required key \"input_dim\""},
        {"{'inputs': [{'name': 'x', 'shape': [3]}], 'layers': [{'type': "
         "'embedding', 'input_dim': 10, 'output_dim': 2}, {'type': "
         "'flatten'}" TAIL, "embedding reads \"x\", which is no model input "
         "of ids; it reads an input with \"dtype\": \"int64\""},
        {IDS "{'type': 'dense', 'units': 2, 'inputs': 'ids'}" TAIL,
         "dense reads input \"ids\" of int64 ids; only an embedding reads "
         "ids"},
        {"{'inputs': [{'name': 'ids', 'shape': [3], 'dtype': 'int32'}], "
         "'layers': [{'type': 'dense', 'units': 1}], 'loss': 'mse', "
         "'optimizer': 'sgd'}", "\"dtype\" must be \"float32\" or \"int64\" "
         "(row ids for an embedding), got \"int32\""},
        {"{'inputs': [{'name': 'ids', 'shape': [2, 2, 1], 'dtype': "
         "'int64'}], 'layers': [{'type': 'dense', 'units': 1}], 'loss': "
         "'mse', 'optimizer': 'sgd'}", "an input of int64 ids has shape [N]"},
        {"{'input_shape': [4, 4, 2], 'layers': [{'type': "
         "'globalavgpool1d'}" TAIL, "globalavgpool1d needs a sequence input "
         "(steps, C), an embedding's, but its input has shape (4, 4, 2)"},
        {IDS "{'type': 'embedding', 'input_dim': 10, 'output_dim': 2, "
         "'inputs': 'ids'}, {'type': 'globalavgpool1d', 'keepdims': true}"
         TAIL, "globalavgpool1d keepdims true is not supported"},
    };
    char buf[1024];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rv;

        dq(bad[i].json, buf, sizeof buf);
        rv = hc_model_parse(buf, strlen(buf), "m", ma);
        CU_ASSERT_NOT_EQUAL(rv, HC_OK);
        if (rv == HC_OK || !strstr(hc_err_msg(), bad[i].want)) {
            printf("\n  case %zu: got \"%s\"\n  want \"%s\"\n", i,
                   rv ? hc_err_msg() : "(accepted)", bad[i].want);
            CU_FAIL("refusal message");
        }
    }
}

/* Keras files: the arguments hetps cannot honour are named. */
static void test_keras_refused(void)
{
    static const struct { const char *from, *to, *want; } bad[] = {
        {"\"mask_zero\": false", "\"mask_zero\": true",
         "Embedding mask_zero true is not supported"},
        {"\"embeddings_constraint\": null",
         "\"embeddings_constraint\": {\"class_name\": \"NonNeg\", "
         "\"config\": {}}", "Embedding embeddings_constraint NonNeg is not "
         "supported"},
        {"\"dtype\": \"int64\"", "\"dtype\": \"string\"",
         "dtype \"string\" is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *e = replaced(G "ctr.keras3.json", bad[i].from, bad[i].to);
        int rv;

        rv = hc_model_parse(e, strlen(e), "k3", ma);
        CU_ASSERT_NOT_EQUAL(rv, HC_OK);
        if (rv == HC_OK || !strstr(hc_err_msg(), bad[i].want)) {
            printf("\n  case %zu: got \"%s\"\n  want \"%s\"\n", i,
                   rv ? hc_err_msg() : "(accepted)", bad[i].want);
            CU_FAIL("refusal message");
        }
        free(e);
    }
}

/* ---- the worker's half ---------------------------------------------- */

#define NF 3        /* ids a sample */
#define NX 2        /* numeric values a sample */
#define DIM 4
#define B 5

/* A sample's row of x: its ids' bytes (HC_ID_FLOATS floats each), then
 * its numeric values. */
static void pack(float *row, const int64_t *ids, const float *num)
{
    memcpy(row, ids, NF * sizeof *ids);
    memcpy(row + NF * HC_ID_FLOATS, num, NX * sizeof *num);
}

/* The batch's ids: repeats within and across samples. */
static const int64_t batch_ids[B][NF] = {
    {7, 3, 7}, {3, 3, 9}, {1ll << 40, 7, 0}, {0, 9, 3}, {7, 7, 7}};

/* The unique ids' positions: 7, 3, 9, 2^40, 0 → 0 … 4. */
static int32_t row_of(int64_t id)
{
    static const int64_t u[] = {7, 3, 9, 1ll << 40, 0};

    for (int32_t k = 0; k < 5; k++)
        if (u[k] == id)
            return k;
    return -1;
}

/* Mean loss of the batch at rows. */
static double mean_loss(struct wk_net *net, const float *params,
                        const float *x, const float *rows,
                        const int32_t *inv, const float *tg)
{
    double sum = 0;

    CU_ASSERT_EQUAL_FATAL(wk_net_set_rows(net, 0, rows, 5, inv, B), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_predict(net, params, x, NULL, tg, B, &sum,
                                         NULL), HC_OK);
    return sum / B;
}

/* The rows' gradients against central differences, pooled one way, the
 * numeric input concatenated after the pooled rows or (numeric_first)
 * before them: the first dense layer then computes only the columns of
 * its input's gradient past the numeric ones (nn_dense.c). */
static void check_grad(const char *pool, int numeric_first)
{
    char text[1024], buf[1024];
    struct wk_backend *be = nr_cpu();
    struct wk_net *net = NULL;
    struct wk_net_table tab;
    float x[B * (NF * HC_ID_FLOATS + NX)], rows[5 * DIM], grad[5 * DIM];
    float tg[B], *params, *dparams;
    int32_t inv[B * NF];
    uint64_t s = 11;
    double worst = 0;

    snprintf(text, sizeof text,
             "{'seed': 5, 'inputs': [{'name': 'categorical', 'shape': [%d], "
             "'dtype': 'int64'}, {'name': 'numeric', 'shape': [%d]}], "
             "'layers': [{'type': 'embedding', 'input_dim': 1099511627777, "
             "'output_dim': %d, 'inputs': 'categorical'}, {'type': '%s'}, "
             "{'type': 'concatenate', 'inputs': [%s%s%s]}, "
             "{'type': 'dense', 'units': 6, 'activation': 'tanh'}, "
             "{'type': 'dense', 'units': 1}], 'loss': 'mse', "
             "'optimizer': 'sgd'}", NF, NX, DIM, pool,
             numeric_first ? "'numeric', '" : "'",
             !strcmp(pool, "flatten") ? "flatten" : "global_average_"
                                                    "pooling1d",
             numeric_first ? "'" : "', 'numeric'");
    dq(text, buf, sizeof buf);
    if (hc_model_parse(buf, strlen(buf), pool, ma) != HC_OK)
        printf("\n  %s\n", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(ma->n_layers, 5);
    CU_ASSERT_EQUAL_FATAL(wk_net_new(ma, be, B, &net), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_tables(net, &tab, 1), 1);
    CU_ASSERT_EQUAL(tab.var, 0);
    CU_ASSERT_EQUAL(tab.input, 0);
    CU_ASSERT_EQUAL(tab.n_ids, NF);
    CU_ASSERT_EQUAL(tab.dim, DIM);
    CU_ASSERT_EQUAL(wk_net_input_size(net), NF * HC_ID_FLOATS + NX);
    params = malloc(ma->n_params * sizeof *params);
    dparams = malloc(ma->n_params * sizeof *dparams);
    CU_ASSERT_FATAL(params && dparams);
    hc_model_init_params(ma, params);
    for (int b = 0; b < B; b++) {
        float num[NX];

        nr_fill_rand(num, NX, &s, -1, 1);
        pack(x + b * (NF * HC_ID_FLOATS + NX), batch_ids[b], num);
        for (int f = 0; f < NF; f++)
            inv[b * NF + f] = row_of(batch_ids[b][f]);
    }
    nr_fill_rand(rows, 5 * DIM, &s, -0.5f, 0.5f);
    nr_fill_rand(tg, B, &s, -1, 1);

    /* Without rows set for the batch, no forward. */
    CU_ASSERT_EQUAL(wk_net_forward(net, params, x, B, 1), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_net_set_rows(net, 0, rows, 2, inv, B), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_net_set_rows(net, 1, rows, 5, inv, B), HC_ERR_INVAL);

    CU_ASSERT_EQUAL_FATAL(wk_net_set_rows(net, 0, rows, 5, inv, B), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(net, params, x, NULL, tg, B, dparams,
                                      NULL, NULL), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_rows_grad(net, 0, grad), HC_OK);
    for (int k = 0; k < 5 * DIM; k++) {
        const float h = 1e-2f, keep = rows[k];
        double up, dn, fd, d;

        rows[k] = keep + h;
        up = mean_loss(net, params, x, rows, inv, tg);
        rows[k] = keep - h;
        dn = mean_loss(net, params, x, rows, inv, tg);
        rows[k] = keep;
        fd = (up - dn) / (2.0 * h);
        d = fabs(fd - grad[k]);
        if (d > worst)
            worst = d;
        if (!(d <= 2e-3 + 2e-2 * fabs(fd)))
            printf("\n  %s row %d col %d: backward %g, differences %g", pool,
                   k / DIM, k % DIM, (double)grad[k], fd);
        CU_ASSERT(d <= 2e-3 + 2e-2 * fabs(fd));
    }
    printf("\n    %s: rows' gradients vs differences, max diff %.3g", pool,
           worst);
    /* Row 0 (id 7) is read 7 times: its gradient is not one position's. */
    CU_ASSERT(fabsf(grad[0]) + fabsf(grad[1]) > 0);
    free(params);
    free(dparams);
    wk_net_free(net);
    wk_backend_free(be);
}

static void test_grad_flatten(void)
{
    check_grad("flatten", 0);
    check_grad("flatten", 1);
}

static void test_grad_pooled(void)
{
    check_grad("globalavgpool1d", 0);
    check_grad("globalavgpool1d", 1);
}

/* Forward: the output is each position's row, exactly, in the batch's
 * order (embedding → flatten → a 1-unit linear dense of known weights). */
static void test_lookup(void)
{
    char buf[1024];
    struct wk_backend *be = nr_cpu();
    struct wk_net *net = NULL;
    float x[B * NF * HC_ID_FLOATS], rows[5 * DIM], out[B], *params;
    int32_t inv[B * NF];
    uint64_t s = 4;

    dq("{'inputs': [{'name': 'c', 'shape': [3], 'dtype': 'int64'}], "
       "'layers': [{'type': 'embedding', 'input_dim': 1099511627777, "
       "'output_dim': 4, 'inputs': 'c'}, {'type': 'flatten'}, {'type': "
       "'dense', 'units': 1}], 'loss': 'mse', 'optimizer': 'sgd'}", buf,
       sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "lookup", ma),
                          HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_new(ma, be, B, &net), HC_OK);
    params = malloc(ma->n_params * sizeof *params);
    CU_ASSERT_FATAL(params != NULL);
    /* kernel (12, 1): position p, column c weighs 10^-c · (p + 1); bias 0 */
    for (int p = 0; p < NF; p++)
        for (int c = 0; c < DIM; c++)
            params[p * DIM + c] = (float)((p + 1) * pow(10, -c));
    params[NF * DIM] = 0;
    for (int b = 0; b < B; b++) {
        memcpy(x + b * NF * HC_ID_FLOATS, batch_ids[b], sizeof batch_ids[b]);
        for (int f = 0; f < NF; f++)
            inv[b * NF + f] = row_of(batch_ids[b][f]);
    }
    nr_fill_rand(rows, 5 * DIM, &s, -1, 1);
    CU_ASSERT_EQUAL_FATAL(wk_net_set_rows(net, 0, rows, 5, inv, B), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(net, params, x, B, 0), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_output(net, out), HC_OK);
    for (int b = 0; b < B; b++) {
        double want = 0;

        for (int p = 0; p < NF; p++)
            for (int c = 0; c < DIM; c++)
                want += (double)rows[row_of(batch_ids[b][p]) * DIM + c] *
                        params[p * DIM + c];
        CU_ASSERT_DOUBLE_EQUAL(out[b], want, 1e-5 * (1 + fabs(want)));
    }
    free(params);
    wk_net_free(net);
    wk_backend_free(be);
}

static int suite_init(void)
{
    ma = calloc(1, sizeof *ma);
    mb = calloc(1, sizeof *mb);
    return ma && mb ? 0 : -1;
}

static int suite_clean(void)
{
    free(ma);
    free(mb);
    return 0;
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("embedding", suite_init, suite_clean);

    CU_add_test(s, "the click-through model in three formats",
                test_ctr_model);
    CU_add_test(s, "input_dim 2^62, GlobalAveragePooling1D",
                test_big_table_pooled);
    CU_add_test(s, "tf.keras 2's GlobalAveragePooling1D", test_keras_pooled);
    CU_add_test(s, "refused in hetps's format", test_refused);
    CU_add_test(s, "refused in Keras's", test_keras_refused);
    CU_add_test(s, "forward looks rows up by position", test_lookup);
    CU_add_test(s, "rows' gradients (flatten) vs differences",
                test_grad_flatten);
    CU_add_test(s, "rows' gradients (globalavgpool1d) vs differences",
                test_grad_pooled);
}
