/*
 * test_keras.c — Keras's files: the fixtures of deploy/models/keras/ read
 * as the same models as hetps's own files (signature, variables, initial
 * values, devices); a table of Keras configs, each refused naming its
 * layer and key or read into the expected settings; --loss and
 * --optimizer over any file; the weights file and
 * the .keras archive written and read back, and damaged or foreign ones
 * refused naming the file and the dataset.
 *
 * JSON in the tables is written with ' for " and converted before use.
 */
#include "cu.h"
#include "err.h"
#include "keras.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define K "deploy/models/keras/"

static struct hc_model *ma, *mb;    /* scratch models (35 KiB each) */

static int load_or_fail(const char *path, struct hc_model *m)
{
    int rv = hc_model_load(path, m);

    if (rv != HC_OK)
        printf("\n  %s: %s (run from the repository root)\n", path,
               hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
    return rv;
}

/* a and b are the same model: layers, variables, optimizer, initial
 * values, devices (the names of the models may differ). */
static void expect_same(const struct hc_model *a, const struct hc_model *b)
{
    float *pa, *pb;

    CU_ASSERT_EQUAL(a->signature, b->signature);
    CU_ASSERT_EQUAL(a->seed, b->seed);
    CU_ASSERT_EQUAL(a->n_layers, b->n_layers);
    CU_ASSERT_EQUAL(a->metric_accuracy, b->metric_accuracy);
    CU_ASSERT_EQUAL_FATAL(a->n_params, b->n_params);
    for (int i = 0; i < a->n_layers && i < b->n_layers; i++)
        CU_ASSERT_STRING_EQUAL(a->layers[i].device, b->layers[i].device);
    pa = malloc(a->n_params * sizeof *pa);
    pb = malloc(b->n_params * sizeof *pb);
    CU_ASSERT_FATAL(pa && pb);
    hc_model_init_params(a, pa);
    hc_model_init_params(b, pb);
    CU_ASSERT(memcmp(pa, pb, a->n_params * sizeof *pa) == 0);
    free(pa);
    free(pb);
}

/* ---- the fixtures -------------------------------------------------------- */

static void test_fixtures(void)
{
    static const struct { const char *native, *keras; } pairs[] = {
        {"deploy/models/fashion_cnn.json", K "fashion_cnn.keras2.json"},
        {"deploy/models/fashion_cnn.json", K "fashion_cnn.keras3.json"},
        {"deploy/models/fashion_mlp.json", K "fashion_mlp.keras3.json"},
        {"deploy/models/fashion_gap.json", K "fashion_gap.keras3.json"},
        {"deploy/models/fashion_gap.json", K "fashion_gap.keras2.json"},
        {"deploy/models/fashion_cnn_placed.json",
         K "fashion_cnn_placed.keras3.json"},
    };

    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        load_or_fail(pairs[i].native, ma);
        load_or_fail(pairs[i].keras, mb);
        expect_same(ma, mb);
        CU_ASSERT_EQUAL(mb->optim.type, HC_OPT_ADAM);
        CU_ASSERT_STRING_EQUAL(mb->name, ma->name);
    }
    /* The placed model keeps its devices. */
    CU_ASSERT_STRING_EQUAL(mb->layers[0].device, "cpu:0");
    CU_ASSERT_STRING_EQUAL(mb->layers[3].device, "cpu:1");
}

static void test_unsupported_fixture(void)
{
    const char *msg, *p;
    int lines = 1;

    CU_ASSERT_EQUAL(hc_model_load(K "unsupported.keras3.json", ma),
                    HC_ERR_CONFIG);
    msg = hc_err_msg();
    for (p = msg; (p = strchr(p, '\n')) != NULL; p++)
        lines++;
    CU_ASSERT_EQUAL(lines, 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "layers[1] Conv2D \"conv2d\": Conv2D "
                                  "dilation_rate (2, 2) is not supported"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "layers[2] BatchNormalization "
                                  "\"batch_normalization\": "
                                  "BatchNormalization is not supported"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Dense activation \"gelu\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Dense kernel_regularizer L2"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Adam amsgrad true"));
}

/* ---- a table of Keras configs -------------------------------------------- */

static const char *dq(const char *s, char *buf, size_t len)
{
    size_t i = 0;

    for (; s[i] && i + 1 < len; i++)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    buf[i] = '\0';
    return buf;
}

/* A Keras 3 Sequential: InputLayer (28, 28, 1), then LAYERS, then COMPILE
 * (a "compile_config" member or nothing). */
#define SEQ(LAYERS, COMPILE) \
    "{'class_name': 'Sequential', 'config': {'name': 'seq', 'layers': [" \
    "{'class_name': 'InputLayer', 'config': {'batch_shape': " \
    "[null, 28, 28, 1], 'dtype': 'float32', 'name': 'input_layer'}}, " \
    LAYERS "]}" COMPILE "}"
#define FLAT "{'class_name': 'Flatten', 'config': {'name': 'flatten'}}"
#define OUT "{'class_name': 'Dense', 'config': {'name': 'dense', " \
            "'units': 10, 'activation': 'softmax'}}"
#define ADAM(CFG) ", 'compile_config': {'optimizer': {'class_name': " \
                  "'Adam', 'config': {" CFG "}}, 'loss': " \
                  "'sparse_categorical_crossentropy'}"

static void test_config_table(void)
{
    static const struct { const char *json, *want; } bad[] = {
        {"{'class_name': 'MyModel', 'config': {'layers': []}}",
         "a Keras MyModel model is not supported; hetps trains Sequential "
         "and Functional models"},
        {SEQ(FLAT ", {'class_name': 'LSTM', 'config': {'name': 'lstm', "
             "'units': 4}}", ""),
         "layers[2] LSTM \"lstm\": LSTM is not supported"},
        {SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'd', "
             "'units': 10, 'activation': 'softmax'}, 'registered_name': "
             "'my>Dense'}", ""), "my>Dense is not supported"},
        {SEQ("{'class_name': 'Flatten', 'config': {'name': 'f', "
             "'frobnicate': 3}}, " OUT, ""), "Flatten frobnicate 3 is not "
             "supported"},
        {SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
             "'units': 10, 'activation': 'softmax', 'trainable': false}}",
             ""), "Dense trainable false is not supported"},
        {SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
             "'units': 10, 'activation': 'softmax', 'dtype': {'class_name': "
             "'DTypePolicy', 'config': {'name': 'mixed_float16'}}}}", ""),
         "Dense dtype \"mixed_float16\" is not supported"},
        {SEQ("{'class_name': 'Conv2D', 'config': {'name': 'c', 'filters': "
             "4, 'kernel_size': [3, 3], 'data_format': 'channels_first'}}, "
             FLAT ", " OUT, ""),
         "Conv2D data_format \"channels_first\" is not supported"},
        {SEQ("{'class_name': 'Conv2D', 'config': {'name': 'c', 'filters': "
             "4, 'kernel_size': [3, 3], 'groups': 2}}, " FLAT ", " OUT, ""),
         "Conv2D groups 2 is not supported"},
        {SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
             "'units': 10, 'activation': 'softmax', 'kernel_initializer': "
             "{'class_name': 'HeNormal', 'config': {}}}}", ""),
         "Dense kernel_initializer HeNormal is not supported"},
        {SEQ(FLAT ", {'class_name': 'Dropout', 'config': {'name': 'x', "
             "'rate': 0.5, 'noise_shape': [1, 5]}}, " OUT, ""),
         "Dropout noise_shape (1, 5) is not supported"},
        {SEQ(FLAT ", " OUT, ADAM("'learning_rate': {'class_name': "
                                 "'ExponentialDecay', 'config': {}}")),
         "learning_rate ExponentialDecay is not supported"},
        {SEQ(FLAT ", " OUT, ADAM("'clipnorm': 1.0")),
         "Adam clipnorm 1 is not supported"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'optimizer': 'rmsprop'}"),
         "optimizer \"rmsprop\" is not supported"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'loss': "
             "'categorical_crossentropy'}"),
         "loss \"categorical_crossentropy\" is not supported"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'metrics': ['auc']}"),
         "metric \"auc\" is not supported"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'loss_weights': [2]}"),
         "compile_config: loss_weights (2) is not supported"},
        {SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
             "'units': 10, 'activation': 'softmax', 'input_shape': [784]}}",
             ""), "Dense input_shape belongs on the first layer"},
        {"{'class_name': 'Sequential', 'config': {'layers': 3}}",
         "needs \"config\": {\"layers\": [...]}"},
        {SEQ("{'class_name': 'GlobalAveragePooling2D', 'config': {'name': "
             "'g', 'keepdims': true}}, " OUT, ""),
         "layers[1] GlobalAveragePooling2D \"g\": GlobalAveragePooling2D "
         "keepdims true is not supported; hetps computes keepdims false"},
        {SEQ("{'class_name': 'GlobalMaxPooling2D', 'config': {'name': 'g', "
             "'data_format': 'channels_first'}}, " OUT, ""),
         "GlobalMaxPooling2D data_format \"channels_first\" is not "
         "supported; hetps computes \"channels_last\""},
        {SEQ("{'class_name': 'AveragePooling2D', 'config': {'name': 'a', "
             "'pool_size': [2, 2], 'data_format': 'channels_first'}}, "
             FLAT ", " OUT, ""),
         "AveragePooling2D data_format \"channels_first\" is not supported"},
        {SEQ("{'class_name': 'ZeroPadding2D', 'config': {'name': 'z', "
             "'padding': [[1, 1], [1, 1]], 'data_format': "
             "'channels_first'}}, " FLAT ", " OUT, ""),
         "ZeroPadding2D data_format \"channels_first\" is not supported"},
        {SEQ("{'class_name': 'Reshape', 'config': {'name': 'r', "
             "'target_shape': [28, 28]}}, " FLAT ", " OUT, ""),
         "reshape target_shape must be [N] or [H, W, C] (one of them may be "
         "-1); hetps has shapes of 1 or 3 dimensions"},
    };
    char buf[4096];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rv;

        dq(bad[i].json, buf, sizeof buf);
        rv = hc_model_parse(buf, strlen(buf), "k.json", ma);
        CU_ASSERT_EQUAL(rv, HC_ERR_CONFIG);
        if (rv != HC_ERR_CONFIG || !strstr(hc_err_msg(), bad[i].want))
            printf("\n  case %zu: rv %d, message \"%s\", wanted \"%s\"\n", i,
                   rv, rv ? hc_err_msg() : "", bad[i].want);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), bad[i].want));
    }
}

static void test_config_values(void)
{
    char buf[4096];

    /* No compile_config: Adam, sparse CCE, accuracy; an unknown key that
     * is null is ignored; the first GlorotUniform seed seeds the model. */
    dq(SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
           "'units': 10, 'activation': 'softmax', 'quantization_config': "
           "null, 'kernel_initializer': {'class_name': 'GlorotUniform', "
           "'config': {'seed': 7}}}}", ""), buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(ma->optim.type, HC_OPT_ADAM);
    CU_ASSERT_EQUAL(ma->loss, HC_LOSS_SPARSE_CCE);
    CU_ASSERT_EQUAL(ma->metric_accuracy, 1);
    CU_ASSERT_EQUAL(ma->seed, 7);
    CU_ASSERT_EQUAL(ma->n_vars, 2);
    CU_ASSERT_EQUAL(ma->vars[0].shape[0], 784);
    /* SGD with momentum and a serialised loss and metric. */
    dq(SEQ(FLAT ", " OUT, ", 'compile_config': {'optimizer': {'module': "
           "'keras.optimizers', 'class_name': 'SGD', 'config': {'name': "
           "'SGD', 'learning_rate': 0.05, 'momentum': 0.9, 'nesterov': "
           "true}, 'registered_name': null}, 'loss': {'class_name': "
           "'SparseCategoricalCrossentropy', 'config': {'from_logits': "
           "false}}, 'metrics': [['sparse_categorical_accuracy']], "
           "'run_eagerly': false}"), buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(ma->optim.type, HC_OPT_MOMENTUM);
    CU_ASSERT(ma->optim.lr == 0.05f && ma->optim.momentum == 0.9f);
    CU_ASSERT_EQUAL(ma->optim.nesterov, 1);
    CU_ASSERT_EQUAL(ma->metric_accuracy, 1);
    /* Keras 2: the input from the first layer's batch_input_shape. */
    dq("{'class_name': 'Sequential', 'config': {'layers': [{'class_name': "
       "'Dense', 'config': {'name': 'dense', 'units': 3, 'activation': "
       "'softmax', 'batch_input_shape': [null, 5]}}]}, 'keras_version': "
       "'2.15.0', 'backend': 'tensorflow'}", buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(ma->input.rank, 1);
    CU_ASSERT_EQUAL(ma->input.dims[0], 5);
}

/* Reshape, ZeroPadding2D, AveragePooling2D and GlobalMaxPooling2D read
 * from Keras 3's config, then written back as Keras's config and read
 * again as the same model. */
static void test_pool_pad_reshape(void)
{
    char buf[4096], *json = NULL;

    dq(SEQ("{'class_name': 'Reshape', 'config': {'name': 'r', "
           "'target_shape': [14, -1, 1]}}, "
           "{'class_name': 'ZeroPadding2D', 'config': {'name': 'z', "
           "'padding': [[0, 1], [2, 3]], 'data_format': 'channels_last'}}, "
           "{'class_name': 'AvgPool2D', 'config': {'name': 'a', "
           "'pool_size': [2, 2], 'padding': 'same', 'strides': null}}, "
           "{'class_name': 'GlobalMaxPool2D', 'config': {'name': 'g', "
           "'keepdims': false, 'data_format': null}}, "
           "{'class_name': 'Reshape', 'config': {'name': 'r2', "
           "'target_shape': [1, 1, -1]}}, "
           "{'class_name': 'GlobalAveragePooling2D', 'config': {'name': "
           "'g2'}}, " OUT, ""), buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL_FATAL(ma->n_layers, 7);
    CU_ASSERT_EQUAL(ma->layers[0].type, HC_LAYER_RESHAPE);
    CU_ASSERT(ma->layers[0].out.rank == 3 && ma->layers[0].out.dims[1] == 56);
    CU_ASSERT(ma->layers[1].out.dims[0] == 15 &&
              ma->layers[1].out.dims[1] == 61);
    CU_ASSERT_EQUAL(ma->layers[1].pad[2], 2);
    CU_ASSERT(ma->layers[2].type == HC_LAYER_AVGPOOL2D &&
              ma->layers[2].out.dims[0] == 8 &&
              ma->layers[2].out.dims[1] == 31);
    CU_ASSERT(ma->layers[3].type == HC_LAYER_GLOBALMAXPOOL2D &&
              ma->layers[3].out.rank == 1 && ma->layers[3].out.dims[0] == 1);
    CU_ASSERT(ma->layers[5].type == HC_LAYER_GLOBALAVGPOOL2D);
    CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"padding\": [[0, 1], [2, 3]]") ||
                           strstr(json, "\"padding\":[[0,1],[2,3]]"));
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "k2", mb),
                          HC_OK);
    expect_same(ma, mb);
    free(json);
}

/* --loss and --optimizer replace what a file says, Keras's or hetps's. */
static void test_compile_flags(void)
{
    struct hc_model_compile sgd = {
        .optimizer = "{\"type\": \"sgd\", \"learning_rate\": 0.05}"};
    struct hc_model_compile mse = {.loss = "mse", .optimizer = "sgd"};
    struct hc_model_compile bad = {.optimizer = "{\"type\": "};
    struct hc_model_compile rms = {.optimizer = "rmsprop"};

    CU_ASSERT_EQUAL_FATAL(hc_model_load_compiled(K "fashion_cnn.keras2.json",
                                                 &sgd, ma), HC_OK);
    CU_ASSERT_EQUAL(ma->optim.type, HC_OPT_SGD);
    CU_ASSERT(ma->optim.lr == 0.05f);
    CU_ASSERT_EQUAL_FATAL(hc_model_load_compiled(K "fashion_cnn.keras3.json",
                                                 &sgd, mb), HC_OK);
    CU_ASSERT_EQUAL(ma->signature, mb->signature);
    CU_ASSERT_EQUAL_FATAL(hc_model_load_compiled(
                              "deploy/models/fashion_mlp.json", &mse, ma),
                          HC_OK);
    CU_ASSERT_EQUAL(ma->loss, HC_LOSS_MSE);
    CU_ASSERT(ma->optim.type == HC_OPT_SGD && ma->optim.lr == 0.01f);
    CU_ASSERT_EQUAL(hc_model_load_compiled(K "fashion_cnn.keras2.json", &bad,
                                           ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "--optimizer"));
    CU_ASSERT_EQUAL(hc_model_load_compiled(K "fashion_cnn.keras2.json", &rms,
                                           ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "\"rmsprop\""));
    CU_ASSERT_EQUAL_FATAL(hc_model_load_compiled(K "fashion_cnn.keras2.json",
                                                 NULL, ma), HC_OK);
    CU_ASSERT_EQUAL(ma->optim.type, HC_OPT_ADAM);
}

/* ---- weights files and archives ------------------------------------------ */

static void fill(const struct hc_model *m, float *p)
{
    for (size_t i = 0; i < m->n_params; i++)
        p[i] = (float)i * 0.25f - 3.0f;
}

static void test_paths(void)
{
    static const char *const want[] = {
        "layers/dense/vars/0", "layers/dense/vars/1",
        "layers/dense_1/vars/0", "layers/dense_1/vars/1"};
    char path[96];

    load_or_fail("deploy/models/fashion_mlp.json", ma);
    CU_ASSERT_EQUAL_FATAL(ma->n_vars, 4);
    for (int v = 0; v < 4; v++) {
        CU_ASSERT_EQUAL(hc_keras_var_path(ma, v, path, sizeof path), HC_OK);
        CU_ASSERT_STRING_EQUAL(path, want[v]);
    }
    CU_ASSERT_EQUAL(hc_keras_var_path(ma, 4, path, sizeof path),
                    HC_ERR_INVAL);
    CU_ASSERT_STRING_EQUAL(hc_keras_class(HC_LAYER_MAXPOOL2D),
                           "MaxPooling2D");
}

static void test_write_read(void)
{
    char dir[256], h5[320], ar[320], cut[320], *json = NULL;
    float *p, *q;
    FILE *f;
    long size;

    CU_ASSERT_PTR_NOT_NULL_FATAL(hp_tmpdir(dir, sizeof dir));
    snprintf(h5, sizeof h5, "%s/m.weights.h5", dir);
    snprintf(ar, sizeof ar, "%s/m.keras", dir);
    snprintf(cut, sizeof cut, "%s/cut.weights.h5", dir);
    load_or_fail("deploy/models/fashion_cnn.json", ma);
    p = malloc(ma->n_params * sizeof *p);
    q = malloc(ma->n_params * sizeof *q);
    CU_ASSERT_FATAL(p && q);
    fill(ma, p);

    CU_ASSERT_EQUAL_FATAL(hc_keras_write_weights(h5, ma, p), HC_OK);
    memset(q, 0, ma->n_params * sizeof *q);
    CU_ASSERT_EQUAL(hc_keras_read_weights(h5, ma, q), HC_OK);
    CU_ASSERT(memcmp(p, q, ma->n_params * sizeof *p) == 0);
    CU_ASSERT_EQUAL(hc_keras_is_archive(h5), 0);

    /* An archive: the model from its config.json, the same weights. */
    CU_ASSERT_EQUAL_FATAL(hc_keras_write_archive(ar, ma, p), HC_OK);
    CU_ASSERT_EQUAL(hc_keras_is_archive(ar), 1);
    load_or_fail(ar, mb);
    expect_same(ma, mb);
    memset(q, 0, ma->n_params * sizeof *q);
    CU_ASSERT_EQUAL(hc_keras_read_weights(ar, mb, q), HC_OK);
    CU_ASSERT(memcmp(p, q, ma->n_params * sizeof *p) == 0);
    CU_ASSERT_EQUAL(hc_keras_config_json(ma, &json), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(json && strstr(json, "\"compile_config\""));
    free(json);

    /* Another model's weights; a truncated file; no file. */
    load_or_fail("deploy/models/fashion_mlp.json", mb);
    CU_ASSERT_EQUAL(hc_keras_read_weights(h5, mb, q), HC_ERR_MISMATCH);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "no group layers/dense_1"));
    f = fopen(h5, "rb");
    CU_ASSERT_FATAL(f != NULL);
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fclose(f);
    CU_ASSERT_EQUAL(truncate(h5, size / 2), 0);
    CU_ASSERT_NOT_EQUAL(hc_keras_read_weights(h5, ma, q), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), h5));
    CU_ASSERT_EQUAL(hc_keras_read_weights(cut, ma, q), HC_ERR_NOTFOUND);
    /* A weights file given as the model. */
    CU_ASSERT_EQUAL(hc_keras_write_weights(cut, ma, p), HC_OK);
    CU_ASSERT_EQUAL(hc_model_load(cut, mb), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "is an HDF5 file"));
    free(p);
    free(q);
    hp_rmtree(dir);
}

/* A .keras made bad in each way a clumsy operator or an attacker might. */
static void test_bad_archives(void)
{
    static const unsigned char junk[] = "PK\003\004 this is not a zip";
    char dir[256], path[320];
    FILE *f;

    CU_ASSERT_PTR_NOT_NULL_FATAL(hp_tmpdir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/junk.keras", dir);
    f = fopen(path, "wb");
    CU_ASSERT_FATAL(f != NULL);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
    CU_ASSERT_EQUAL(hc_model_load(path, ma), HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "not a readable .keras"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), path));
    hp_rmtree(dir);
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
    CU_pSuite s = CU_add_suite("keras", suite_init, suite_clean);

    CU_add_test(s, "fixtures read as hetps's own files", test_fixtures);
    CU_add_test(s, "the unsupported fixture", test_unsupported_fixture);
    CU_add_test(s, "refused configs", test_config_table);
    CU_add_test(s, "config values", test_config_values);
    CU_add_test(s, "pools, zero padding, reshape: read and written",
                test_pool_pad_reshape);
    CU_add_test(s, "--loss and --optimizer", test_compile_flags);
    CU_add_test(s, "weights paths", test_paths);
    CU_add_test(s, "weights and archives written and read", test_write_read);
    CU_add_test(s, "bad archives", test_bad_archives);
}
