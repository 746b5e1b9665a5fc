/*
 * test_model.c — the model file: the two shipped models, shape inference,
 * Keras defaults and spellings, initial values, the signature, and the
 * message of every kind of bad model file.
 *
 * JSON in the tables is written with ' for " and converted before use, to
 * keep it readable; expected messages are written as they are.
 */
#include "cu.h"
#include "err.h"
#include "layer.h"
#include "model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CNN_PATH "deploy/models/fashion_cnn.json"
#define MLP_PATH "deploy/models/fashion_mlp.json"

static struct hc_model *model;      /* one scratch model (35 KiB) */
static struct hc_model *model2;

/* s with every ' replaced by ", into a static buffer. */
static const char *dq(const char *s, char *buf, size_t len)
{
    size_t i = 0;

    for (; s[i] && i + 1 < len; i++)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    buf[i] = '\0';
    return buf;
}

static int parse_q(const char *json_q, struct hc_model *m)
{
    static char buf[8192];

    dq(json_q, buf, sizeof buf);
    return hc_model_parse(buf, strlen(buf), "test.json", m);
}

static void expect_shape(const struct hc_shape *s, int rank, int d0, int d1,
                         int d2)
{
    CU_ASSERT_EQUAL(s->rank, rank);
    CU_ASSERT_EQUAL(s->dims[0], d0);
    if (rank == 3) {
        CU_ASSERT_EQUAL(s->dims[1], d1);
        CU_ASSERT_EQUAL(s->dims[2], d2);
    }
}

static int load_or_fail(const char *path, struct hc_model *m)
{
    int rv = hc_model_load(path, m);

    if (rv != HC_OK)
        printf("\n  %s: %s (run from the repository root)\n", path,
               hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
    return rv;
}

/* ---- the shipped models ---------------------------------------------------- */

static void test_cnn_file(void)
{
    struct hc_model *m = model;
    static const struct {
        const char *name;
        int ndim, shape[4];
        size_t size;
        int fan_in, fan_out;
        enum hc_init init;
    } want[] = {
        {"conv2d/kernel", 4, {3, 3, 1, 32}, 288, 9, 288,
         HC_INIT_GLOROT_UNIFORM},
        {"conv2d/bias", 1, {32}, 32, 0, 0, HC_INIT_ZEROS},
        {"dense/kernel", 2, {5408, 10}, 54080, 5408, 10,
         HC_INIT_GLOROT_UNIFORM},
        {"dense/bias", 1, {10}, 10, 0, 0, HC_INIT_ZEROS},
    };

    load_or_fail(CNN_PATH, m);
    CU_ASSERT_STRING_EQUAL(m->name, "fashion_cnn");
    CU_ASSERT_STRING_EQUAL(m->source, CNN_PATH);
    expect_shape(&m->input, 3, 28, 28, 1);
    CU_ASSERT_EQUAL_FATAL(m->n_layers, 4);
    CU_ASSERT_EQUAL(m->layers[0].type, HC_LAYER_CONV2D);
    CU_ASSERT_STRING_EQUAL(m->layers[0].name, "conv2d");
    CU_ASSERT_EQUAL(m->layers[0].act, HC_ACT_RELU);
    CU_ASSERT_EQUAL(m->layers[0].filters, 32);
    CU_ASSERT_EQUAL(m->layers[0].kh, 3);
    CU_ASSERT_EQUAL(m->layers[0].kw, 3);
    CU_ASSERT_EQUAL(m->layers[0].sh, 1);
    CU_ASSERT_EQUAL(m->layers[0].same, 0);
    CU_ASSERT_EQUAL(m->layers[0].use_bias, 1);
    expect_shape(&m->layers[0].out, 3, 26, 26, 32);
    CU_ASSERT_STRING_EQUAL(m->layers[1].name, "max_pooling2d");
    CU_ASSERT_EQUAL(m->layers[1].ph, 2);
    CU_ASSERT_EQUAL(m->layers[1].sh, 2);
    expect_shape(&m->layers[1].in, 3, 26, 26, 32);
    expect_shape(&m->layers[1].out, 3, 13, 13, 32);
    CU_ASSERT_STRING_EQUAL(m->layers[2].name, "flatten");
    expect_shape(&m->layers[2].out, 1, 5408, 0, 0);
    CU_ASSERT_STRING_EQUAL(m->layers[3].name, "dense");
    CU_ASSERT_EQUAL(m->layers[3].act, HC_ACT_SOFTMAX);
    expect_shape(&m->layers[3].out, 1, 10, 0, 0);
    CU_ASSERT_EQUAL(m->layers[0].var_kernel, 0);
    CU_ASSERT_EQUAL(m->layers[0].var_bias, 1);
    CU_ASSERT_EQUAL(m->layers[1].var_kernel, -1);
    CU_ASSERT_EQUAL(m->layers[2].var_bias, -1);
    CU_ASSERT_EQUAL(m->layers[3].var_kernel, 2);
    CU_ASSERT_EQUAL(m->layers[3].var_bias, 3);

    CU_ASSERT_EQUAL_FATAL(m->n_vars, 4);
    for (int v = 0; v < 4; v++) {
        CU_ASSERT_STRING_EQUAL(m->vars[v].name, want[v].name);
        CU_ASSERT_EQUAL(m->vars[v].ndim, want[v].ndim);
        for (int k = 0; k < want[v].ndim; k++)
            CU_ASSERT_EQUAL(m->vars[v].shape[k], want[v].shape[k]);
        CU_ASSERT_EQUAL(m->vars[v].size, want[v].size);
        CU_ASSERT_EQUAL(m->vars[v].init, want[v].init);
        CU_ASSERT_EQUAL(m->vars[v].fan_in, want[v].fan_in);
        CU_ASSERT_EQUAL(m->vars[v].fan_out, want[v].fan_out);
    }
    CU_ASSERT_EQUAL(m->n_params, 54410);
    CU_ASSERT_EQUAL(hc_model_var_offset(m, 0), 0);
    CU_ASSERT_EQUAL(hc_model_var_offset(m, 1), 288);
    CU_ASSERT_EQUAL(hc_model_var_offset(m, 2), 320);
    CU_ASSERT_EQUAL(hc_model_var_offset(m, 3), 54400);
    CU_ASSERT_EQUAL(hc_model_var_offset(m, 4), 54410);
    CU_ASSERT_EQUAL(hc_model_var_offset(m, 5), (size_t)-1);
    CU_ASSERT_EQUAL(hc_model_var_offset(m, -1), (size_t)-1);

    CU_ASSERT_EQUAL(m->loss, HC_LOSS_SPARSE_CCE);
    CU_ASSERT_EQUAL(m->n_classes, 10);
    CU_ASSERT_EQUAL(m->optim.type, HC_OPT_ADAM);
    CU_ASSERT_EQUAL(m->optim.lr, 1e-3f);
    CU_ASSERT_EQUAL(m->optim.beta1, 0.9f);
    CU_ASSERT_EQUAL(m->optim.beta2, 0.999f);
    CU_ASSERT_EQUAL(m->optim.eps, 1e-7f);
    CU_ASSERT_EQUAL(m->metric_accuracy, 1);
    CU_ASSERT_EQUAL(m->batch_size, 64);
    CU_ASSERT_EQUAL(m->epochs, 10);
    CU_ASSERT_EQUAL(m->seed, 42);
    CU_ASSERT_NOT_EQUAL(m->signature, 0);
}

static void test_mlp_file(void)
{
    struct hc_model *m = model;
    static const char *const names[] = {"flatten", "dense", "dropout",
                                        "dense_1"};
    static const size_t sizes[] = {100352, 128, 1280, 10};

    load_or_fail(MLP_PATH, m);
    CU_ASSERT_STRING_EQUAL(m->name, "fashion_mlp");
    CU_ASSERT_EQUAL_FATAL(m->n_layers, 4);
    for (int i = 0; i < 4; i++)
        CU_ASSERT_STRING_EQUAL(m->layers[i].name, names[i]);
    expect_shape(&m->layers[0].out, 1, 784, 0, 0);
    expect_shape(&m->layers[1].out, 1, 128, 0, 0);
    CU_ASSERT_EQUAL(m->layers[1].act, HC_ACT_RELU);
    CU_ASSERT_EQUAL(m->layers[2].type, HC_LAYER_DROPOUT);
    CU_ASSERT_EQUAL(m->layers[2].rate, 0.2f);
    expect_shape(&m->layers[2].out, 1, 128, 0, 0);
    expect_shape(&m->layers[3].out, 1, 10, 0, 0);
    CU_ASSERT_EQUAL_FATAL(m->n_vars, 4);
    CU_ASSERT_STRING_EQUAL(m->vars[0].name, "dense/kernel");
    CU_ASSERT_STRING_EQUAL(m->vars[2].name, "dense_1/kernel");
    CU_ASSERT_STRING_EQUAL(m->vars[3].name, "dense_1/bias");
    for (int v = 0; v < 4; v++)
        CU_ASSERT_EQUAL(m->vars[v].size, sizes[v]);
    CU_ASSERT_EQUAL(m->n_params, 101770);
    CU_ASSERT_EQUAL(m->n_classes, 10);
    CU_ASSERT_EQUAL(m->batch_size, 64);
    CU_ASSERT_EQUAL(m->epochs, 10);
    CU_ASSERT_EQUAL(m->optim.type, HC_OPT_ADAM);
}

/* ---- shape inference -------------------------------------------------------- */

static void test_shape_table(void)
{
    static const struct {
        const char *type;       /* "conv2d" or "maxpool2d" */
        int h, w, c;            /* input */
        int kh, kw, sh, sw;     /* kernel/pool; strides (0: key absent) */
        const char *padding;
        int oh, ow, oc;         /* expected output */
    } t[] = {
        {"conv2d", 28, 28, 1, 3, 3, 1, 1, "valid", 26, 26, 4},
        {"conv2d", 28, 28, 1, 3, 3, 1, 1, "same", 28, 28, 4},
        {"conv2d", 28, 28, 1, 3, 3, 2, 2, "valid", 13, 13, 4},
        {"conv2d", 28, 28, 1, 3, 3, 2, 2, "same", 14, 14, 4},
        {"conv2d", 28, 28, 3, 4, 4, 3, 3, "valid", 9, 9, 4},
        {"conv2d", 28, 28, 3, 4, 4, 3, 3, "same", 10, 10, 4},
        {"conv2d", 7, 5, 2, 3, 2, 2, 3, "valid", 3, 2, 4},
        {"conv2d", 7, 5, 2, 3, 2, 2, 3, "same", 4, 2, 4},
        {"conv2d", 5, 5, 1, 5, 5, 0, 0, "valid", 1, 1, 4},
        {"conv2d", 3, 3, 1, 5, 5, 0, 0, "same", 3, 3, 4},
        {"conv2d", 1, 1, 8, 1, 1, 1, 1, "valid", 1, 1, 4},
        {"maxpool2d", 28, 28, 32, 2, 2, 0, 0, "valid", 14, 14, 32},
        {"maxpool2d", 27, 27, 1, 2, 2, 0, 0, "valid", 13, 13, 1},
        {"maxpool2d", 27, 27, 1, 2, 2, 0, 0, "same", 14, 14, 1},
        {"maxpool2d", 28, 28, 1, 3, 3, 1, 1, "valid", 26, 26, 1},
        {"maxpool2d", 28, 28, 1, 3, 3, 0, 0, "valid", 9, 9, 1},
        {"maxpool2d", 28, 28, 1, 3, 3, 0, 0, "same", 10, 10, 1},
        {"maxpool2d", 6, 9, 2, 2, 3, 0, 0, "valid", 3, 3, 2},
    };
    char json[1024], strides[64];

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (t[i].sh)
            snprintf(strides, sizeof strides, ", 'strides': [%d, %d]",
                     t[i].sh, t[i].sw);
        else
            strides[0] = '\0';
        snprintf(json, sizeof json,
                 "{'input_shape': [%d, %d, %d], 'loss': 'mse', "
                 "'optimizer': 'sgd', 'layers': [{'type': '%s', %s "
                 "'%s': [%d, %d]%s, 'padding': '%s'}, {'type': 'flatten'}]}",
                 t[i].h, t[i].w, t[i].c, t[i].type,
                 t[i].type[0] == 'c' ? "'filters': 4," : "",
                 t[i].type[0] == 'c' ? "kernel_size" : "pool_size",
                 t[i].kh, t[i].kw, strides, t[i].padding);
        int rv = parse_q(json, model);
        if (rv != HC_OK)
            printf("\n  row %zu: %s\n", i, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        expect_shape(&model->layers[0].out, 3, t[i].oh, t[i].ow, t[i].oc);
        expect_shape(&model->layers[1].out, 1, t[i].oh * t[i].ow * t[i].oc,
                     0, 0);
        CU_ASSERT_EQUAL(model->n_classes, t[i].oh * t[i].ow * t[i].oc);
        if (t[i].type[0] == 'c') {
            CU_ASSERT_EQUAL(model->vars[0].size,
                            (size_t)(t[i].kh * t[i].kw * t[i].c * 4));
            CU_ASSERT_EQUAL(model->n_params,
                            (size_t)(t[i].kh * t[i].kw * t[i].c * 4 + 4));
        } else {
            CU_ASSERT_EQUAL(model->n_vars, 0);
        }
    }
}

/* The layers that pool or move values: each written as hetps reads it,
 * with its output shape; then its refusals, each message read. */
static void test_pool_pad_reshape(void)
{
    static const struct {
        const char *input, *layer;
        int rank, d0, d1, d2;
    } t[] = {
        {"[7, 5, 3]", "{'type': 'avgpool2d'}", 3, 3, 2, 3},
        {"[7, 5, 3]", "{'type': 'average_pooling2d', 'pool_size': 3, "
                      "'strides': 2, 'padding': 'same'}", 3, 4, 3, 3},
        {"[7, 5, 3]", "{'type': 'AveragePooling2D', 'pool_size': [2, 3], "
                      "'strides': [1, 1]}", 3, 6, 3, 3},
        {"[7, 5, 3]", "{'type': 'globalavgpool2d'}", 1, 3, 0, 0},
        {"[7, 5, 3]", "{'type': 'GlobalAveragePooling2D', "
                      "'keepdims': false}", 1, 3, 0, 0},
        {"[7, 5, 3]", "{'type': 'global_max_pooling2d'}", 1, 3, 0, 0},
        {"[7, 5, 3]", "{'type': 'maxpool2d', 'padding': 'same'}", 3, 4, 3, 3},
        {"[7, 5, 3]", "{'type': 'zeropadding2d'}", 3, 9, 7, 3},
        {"[7, 5, 3]", "{'type': 'zero_padding2d', 'padding': 2}", 3, 11, 9, 3},
        {"[7, 5, 3]", "{'type': 'ZeroPadding2D', 'padding': [1, 3]}",
         3, 9, 11, 3},
        {"[7, 5, 3]", "{'type': 'zeropadding2d', 'padding': [[0, 2], "
                      "[3, 1]]}", 3, 9, 9, 3},
        {"[7, 5, 3]", "{'type': 'reshape', 'target_shape': [105]}",
         1, 105, 0, 0},
        {"[7, 5, 3]", "{'type': 'reshape', 'target_shape': [-1]}",
         1, 105, 0, 0},
        {"[7, 5, 3]", "{'type': 'Reshape', 'target_shape': [5, -1, 7]}",
         3, 5, 3, 7},
        {"[12]", "{'type': 'reshape', 'target_shape': [2, 3, 2]}",
         3, 2, 3, 2},
    };
    static const struct {
        const char *input, *layer, *want;
    } bad[] = {
        {"[7, 5, 3]", "{'type': 'globalavgpool2d', 'keepdims': true}",
         "(globalavgpool2d \"global_average_pooling2d\"): globalavgpool2d "
         "keepdims true is not supported; hetps computes keepdims false, "
         "(H, W, C) → (C)"},
        {"[12]", "{'type': 'globalmaxpool2d'}",
         "globalmaxpool2d needs an image input (H, W, C) but its input has "
         "shape (12)"},
        {"[12]", "{'type': 'avgpool2d'}",
         "avgpool2d needs an image input (H, W, C) but its input has shape "
         "(12)"},
        {"[1, 5, 3]", "{'type': 'avgpool2d'}",
         "pool_size (2, 2) is larger than the input (1, 5, 3)"},
        {"[7, 5, 3]", "{'type': 'zeropadding2d', 'padding': [1, 2, 3]}",
         "\"padding\" must be an integer or [height, width], got an array "
         "of 3"},
        {"[7, 5, 3]", "{'type': 'zeropadding2d', 'padding': [[1, 2], 3]}",
         "\"padding\" must be an integer, [h, w] or [[top, bottom], "
         "[left, right]] of integers"},
        {"[7, 5, 3]", "{'type': 'zeropadding2d', 'padding': -1}",
         "\"padding\" must be from 0 to 65536, got -1"},
        {"[12]", "{'type': 'zeropadding2d'}",
         "zeropadding2d needs an image input (H, W, C) but its input has "
         "shape (12)"},
        {"[7, 5, 3]", "{'type': 'reshape'}",
         "missing required key \"target_shape\""},
        {"[7, 5, 3]", "{'type': 'reshape', 'target_shape': [5, 21]}",
         "reshape target_shape must be [N] or [H, W, C] (one of them may be "
         "-1); hetps has shapes of 1 or 3 dimensions"},
        {"[7, 5, 3]", "{'type': 'reshape', 'target_shape': [-1, 5, -1]}",
         "reshape target_shape may have one -1 (the dimension the others "
         "leave), not two"},
        {"[7, 5, 3]", "{'type': 'reshape', 'target_shape': [0, 5, 21]}",
         "\"target_shape\" must be from 1 to 65536, got 0"},
        {"[7, 5, 3]", "{'type': 'reshape', 'target_shape': [4, -1, 1]}",
         "reshape target_shape (4, -1, 1) does not hold the 105 values of "
         "its input (7, 5, 3)"},
        {"[7, 5, 3]", "{'type': 'reshape', 'target_shape': [104]}",
         "reshape target_shape (104) does not hold the 105 values of its "
         "input (7, 5, 3)"},
    };
    char json[1024];

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        snprintf(json, sizeof json, "{'input_shape': %s, 'loss': 'mse', "
                 "'optimizer': 'sgd', 'layers': [%s%s]}", t[i].input,
                 t[i].layer, t[i].rank == 3 ? ", {'type': 'flatten'}" : "");
        int rv = parse_q(json, model);
        if (rv != HC_OK)
            printf("\n  row %zu: %s\n", i, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        expect_shape(&model->layers[0].out, t[i].rank, t[i].d0, t[i].d1,
                     t[i].d2);
        CU_ASSERT_EQUAL(model->n_vars, 0);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(json, sizeof json, "{'input_shape': %s, 'loss': 'mse', "
                 "'optimizer': 'sgd', 'layers': [%s, {'type': 'flatten'}]}",
                 bad[i].input, bad[i].layer);
        hc_err_clear();
        int rv = parse_q(json, model);
        const char *msg = hc_err_msg();
        if (rv != HC_ERR_CONFIG || !strstr(msg, bad[i].want))
            printf("\n  row %zu: rv %d, message: %s\n  wanted: %s\n", i,
                   rv, msg, bad[i].want);
        CU_ASSERT_EQUAL(rv, HC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, bad[i].want));
    }
}

/* ---- Keras defaults and spellings -------------------------------------------- */

static void test_defaults_and_names(void)
{
    struct hc_model *m = model;
    static const char *const names[] = {
        "conv2d", "conv2d_1", "max_pooling2d", "mine", "conv2d_2",
        "max_pooling2d_1", "flatten", "dropout", "dense", "activation",
        "dense_1"};
    int rv = parse_q(
        "{'input_shape': [28, 28, 1], 'loss': 'sparse_categorical_crossentropy',"
        " 'optimizer': 'sgd', 'layers': ["
        " {'type': 'Conv2D', 'filters': 8, 'kernel_size': 3},"
        " {'type': 'conv2d', 'filters': 8, 'kernel_size': 3, 'use_bias': false,"
        "  'padding': 'SAME', 'device': 'CPU:1'},"
        " {'type': 'MaxPooling2D'},"
        " {'type': 'Conv2D', 'name': 'mine', 'filters': 4, 'kernel_size': [1, 1]},"
        " {'type': 'conv2d', 'filters': 4, 'kernel_size': 1, 'strides': 1},"
        " {'type': 'max_pooling2d', 'pool_size': 2, 'strides': null},"
        " {'type': 'Flatten'}, {'type': 'Dropout', 'rate': 0},"
        " {'type': 'Dense', 'units': 5, 'activation': 'TanH'},"
        " {'type': 'Activation', 'activation': 'sigmoid'},"
        " {'type': 'dense', 'units': 3, 'activation': null}]}", m);

    if (rv != HC_OK)
        printf("\n  %s\n", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
    CU_ASSERT_STRING_EQUAL(m->name, "sequential");
    CU_ASSERT_EQUAL_FATAL(m->n_layers, 11);
    for (int i = 0; i < 11; i++)
        CU_ASSERT_STRING_EQUAL(m->layers[i].name, names[i]);
    CU_ASSERT_EQUAL(m->layers[0].act, HC_ACT_LINEAR);
    CU_ASSERT_EQUAL(m->layers[1].same, 1);
    CU_ASSERT_EQUAL(m->layers[1].use_bias, 0);
    CU_ASSERT_EQUAL(m->layers[1].var_bias, -1);
    CU_ASSERT_STRING_EQUAL(m->layers[1].device, "cpu:1");
    CU_ASSERT_STRING_EQUAL(m->layers[0].device, "");
    expect_shape(&m->layers[1].out, 3, 26, 26, 8);
    expect_shape(&m->layers[2].out, 3, 13, 13, 8);
    expect_shape(&m->layers[5].out, 3, 6, 6, 4);
    CU_ASSERT_EQUAL(m->layers[8].act, HC_ACT_TANH);
    CU_ASSERT_EQUAL(m->layers[9].act, HC_ACT_SIGMOID);
    CU_ASSERT_EQUAL(m->layers[10].act, HC_ACT_LINEAR);
    /* vars: conv2d k+b, conv2d_1 k, mine k+b, conv2d_2 k+b, dense k+b,
     * dense_1 k+b */
    CU_ASSERT_EQUAL(m->n_vars, 11);
    CU_ASSERT_STRING_EQUAL(m->vars[2].name, "conv2d_1/kernel");
    CU_ASSERT_STRING_EQUAL(m->vars[3].name, "mine/kernel");
    CU_ASSERT_EQUAL(m->n_classes, 3);       /* linear logits accepted */
    CU_ASSERT_EQUAL(m->optim.type, HC_OPT_SGD);
    CU_ASSERT_EQUAL(m->optim.lr, 0.01f);
    CU_ASSERT_EQUAL(m->optim.momentum, 0.0f);
    CU_ASSERT_EQUAL(m->metric_accuracy, 0);
    CU_ASSERT_EQUAL(m->batch_size, 32);
    CU_ASSERT_EQUAL(m->epochs, 1);
    CU_ASSERT_EQUAL(m->seed, 0);
}

static void test_optimizers_and_outputs(void)
{
    static const struct {
        const char *optim;          /* JSON of the optimizer value */
        enum hc_optim type;
        float lr, momentum;
        int nesterov;
        float b1, b2, eps;
    } t[] = {
        {"'adam'", HC_OPT_ADAM, 1e-3f, 0, 0, 0.9f, 0.999f, 1e-7f},
        {"'Adam'", HC_OPT_ADAM, 1e-3f, 0, 0, 0.9f, 0.999f, 1e-7f},
        {"{'type': 'adam', 'learning_rate': 0.01, 'beta_1': 0.8}",
         HC_OPT_ADAM, 0.01f, 0, 0, 0.8f, 0.999f, 1e-7f},
        {"{'type': 'adam', 'beta_2': 0.99, 'epsilon': 1e-8}", HC_OPT_ADAM,
         1e-3f, 0, 0, 0.9f, 0.99f, 1e-8f},
        {"'sgd'", HC_OPT_SGD, 0.01f, 0, 0, 0, 0, 0},
        {"{'type': 'SGD', 'learning_rate': 0.1}", HC_OPT_SGD, 0.1f, 0, 0, 0,
         0, 0},
        {"{'type': 'sgd', 'momentum': 0.9}", HC_OPT_MOMENTUM, 0.01f, 0.9f, 0,
         0, 0, 0},
        {"{'type': 'sgd', 'momentum': 0.5, 'nesterov': true}",
         HC_OPT_MOMENTUM, 0.01f, 0.5f, 1, 0, 0, 0},
    };
    /* Output layers that suit sparse CCE, with the class count. */
    static const struct {
        const char *layers;
        int n_classes;
    } outs[] = {
        {"{'type': 'dense', 'units': 10, 'activation': 'softmax'}", 10},
        {"{'type': 'dense', 'units': 7}", 7},
        {"{'type': 'dense', 'units': 4}, {'type': 'activation', "
         "'activation': 'softmax'}", 4},
        {"{'type': 'dense', 'units': 2, 'activation': 'linear'}", 2},
    };
    char json[1024];

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        snprintf(json, sizeof json,
                 "{'input_shape': [4], 'loss': 'mse', 'optimizer': %s, "
                 "'layers': [{'type': 'dense', 'units': 2}]}", t[i].optim);
        int rv = parse_q(json, model);
        if (rv != HC_OK)
            printf("\n  row %zu: %s\n", i, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        CU_ASSERT_EQUAL(model->loss, HC_LOSS_MSE);
        CU_ASSERT_EQUAL(model->optim.type, t[i].type);
        CU_ASSERT_EQUAL(model->optim.lr, t[i].lr);
        CU_ASSERT_EQUAL(model->optim.momentum, t[i].momentum);
        CU_ASSERT_EQUAL(model->optim.nesterov, t[i].nesterov);
        CU_ASSERT_EQUAL(model->optim.beta1, t[i].b1);
        CU_ASSERT_EQUAL(model->optim.beta2, t[i].b2);
        CU_ASSERT_EQUAL(model->optim.eps, t[i].eps);
    }
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        snprintf(json, sizeof json,
                 "{'input_shape': [4], 'loss': 'SparseCategoricalCrossentropy',"
                 " 'optimizer': 'adam', 'metrics': ['acc'], 'layers': [%s]}",
                 outs[i].layers);
        int rv = parse_q(json, model);
        if (rv != HC_OK)
            printf("\n  output row %zu: %s\n", i, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        CU_ASSERT_EQUAL(model->loss, HC_LOSS_SPARSE_CCE);
        CU_ASSERT_EQUAL(model->n_classes, outs[i].n_classes);
        CU_ASSERT_EQUAL(model->metric_accuracy, 1);
    }
    /* input_shape on the first layer, Keras style. */
    CU_ASSERT_EQUAL_FATAL(parse_q(
        "{'loss': 'mean_squared_error', 'optimizer': 'sgd', 'layers': ["
        "{'type': 'flatten', 'input_shape': [2, 3, 1]},"
        "{'type': 'dense', 'units': 1}]}", model), HC_OK);
    expect_shape(&model->input, 3, 2, 3, 1);
    expect_shape(&model->layers[0].out, 1, 6, 0, 0);
}

/* ---- bad model files ------------------------------------------------------------ */

/* The metrics in each form: names, Keras 3 and tf.keras 2 objects, their
 * settings and names; the refusals are rows of test_bad_models. */
static void test_metrics(void)
{
    static const char q[] =
        "{'input_shape': [4], 'loss': 'sparse_categorical_crossentropy', "
        "'optimizer': 'sgd', 'layers': [{'type': 'dense', 'units': 3, "
        "'activation': 'softmax'}], 'metrics': ['acc', 'AUC', "
        "{'class_name': 'SparseTopKCategoricalAccuracy', 'config': "
        "{'name': 'top2', 'dtype': 'float32', 'k': 2}}, "
        "{'module': 'keras.metrics', 'class_name': 'BinaryAccuracy', "
        "'config': {'name': 'binary_accuracy', 'dtype': 'float32', "
        "'threshold': 0.7}, 'registered_name': null}, "
        "'sparse_top_k_categorical_accuracy', "
        "{'module': 'keras.metrics', 'class_name': 'AUC', 'config': "
        "{'name': 'auc_1', 'dtype': 'float32', 'num_thresholds': 200, "
        "'curve': 'ROC', 'summation_method': 'interpolation', "
        "'multi_label': false, 'num_labels': null, 'label_weights': null, "
        "'from_logits': false, 'thresholds': null}, "
        "'registered_name': null}]}";
    struct hc_model *m = model;

    if (parse_q(q, m) != HC_OK) {
        printf("\n  %s\n", hc_err_msg());
        CU_FAIL_FATAL("parse");
    }
    CU_ASSERT_EQUAL(m->n_metrics, 6);
    CU_ASSERT_EQUAL(m->metric_accuracy, 1);
    CU_ASSERT_EQUAL(m->metrics[0].kind, HC_EM_ACCURACY);
    CU_ASSERT_STRING_EQUAL(m->metrics[0].name, "accuracy");
    CU_ASSERT_EQUAL(m->metrics[1].kind, HC_EM_AUC);
    CU_ASSERT_STRING_EQUAL(m->metrics[1].name, "auc");
    CU_ASSERT_EQUAL(m->metrics[2].kind, HC_EM_SPARSE_TOP_K);
    CU_ASSERT_STRING_EQUAL(m->metrics[2].name, "top2");
    CU_ASSERT_EQUAL(m->metrics[2].k, 2);
    CU_ASSERT_EQUAL(m->metrics[3].kind, HC_EM_BINARY_ACCURACY);
    CU_ASSERT_DOUBLE_EQUAL(m->metrics[3].threshold, 0.7, 1e-6);
    CU_ASSERT_STRING_EQUAL(m->metrics[4].name,
                           "sparse_top_k_categorical_accuracy");
    CU_ASSERT_EQUAL(m->metrics[4].k, 5);
    CU_ASSERT_STRING_EQUAL(m->metrics[5].name, "auc_1");
}


#define HEAD "{'input_shape': [28, 28, 1], 'loss': " \
             "'sparse_categorical_crossentropy', 'optimizer': 'adam', "
#define OUT  "{'type': 'flatten'}, {'type': 'dense', 'units': 10, " \
             "'activation': 'softmax'}"

static void test_bad_models(void)
{
    static const struct {
        const char *json;
        const char *want;       /* substring of the message */
    } t[] = {
        {"{\n  'name': 'x',\n  'layers': [,]\n}",
         "test.json: line 3, column 14: JSON syntax error near ',]'"},
        {"{'a': 1,}", "line 1, column 9: JSON syntax error near '}'"},
        {"", "line 1, column 1: JSON syntax error at the end of the input"},
        {HEAD "'layers': [" OUT "]} x",
         "unexpected text after the JSON value near 'x'"},
        {"[1, 2]", "test.json: a model must be a JSON object"},
        {HEAD "'epoch': 3, 'layers': [" OUT "]}",
         "test.json: unknown key \"epoch\" (did you mean \"epochs\"?)"},
        {HEAD "'colour': 3, 'layers': [" OUT "]}",
         "unknown key \"colour\"; allowed here: name, input_shape, inputs, layers"},
        {HEAD "'layers': [{'type': 'conv2d', 'filter': 32, 'kernel_size': 3},"
              OUT "]}",
         "layers[0] (conv2d \"conv2d\"): unknown key \"filter\" (did you "
         "mean \"filters\"?)"},
        /* a frozen layer: hetps's format has no "trainable" */
        {HEAD "'layers': [{'type': 'batchnorm', 'trainable': false}, "
              "{'type': 'flatten'}," OUT "]}",
         "layers[0] (batchnorm \"batch_normalization\"): unknown key "
         "\"trainable\"; "
         "allowed here: type, name"},
        {HEAD "'layers': [{'type': 'flatten', 'units': 3}," OUT "]}",
         "layers[0] (flatten \"flatten\"): unknown key \"units\"; allowed "
         "here: type, name, device, input_shape"},
        {HEAD "'layers': [{'type': 'Conv3D'}]}",
         "layers[0]: unknown layer type \"Conv3D\"; supported: conv2d"},
        {HEAD "'layers': [{'units': 3}]}",
         "layers[0]: missing required key \"type\""},
        {HEAD "'layers': [{'type': 'conv2d', 'kernel_size': 3}," OUT "]}",
         "layers[0] (conv2d \"conv2d\"): missing required key \"filters\""},
        {"{'loss': 'mse', 'optimizer': 'adam', 'layers': [{'type': 'flatten'},"
         " {'type': 'dense', 'units': 1}]}",
         "test.json: missing required key \"input_shape\" (e.g. [28, 28, 1])"},
        {"{'input_shape': [28, 28], 'layers': []}",
         "\"input_shape\" has 2 dimensions; images need a channel count: "
         "write [H, W, 1]"},
        {HEAD "'layers': []}", "\"layers\" must be a non-empty array"},
        {HEAD "'layers': [{'type': 'batchnorm', 'synchronized': true}, "
              OUT "]}",
         "layers[0] (batchnorm \"batch_normalization\"): \"synchronized\" "
         "true is not supported yet"},
        {HEAD "'layers': [{'type': 'batch_normalization', 'axis': 2}, "
              OUT "]}",
         "\"axis\" 2 is not the last axis of its input (28, 28, 1)"},
        {HEAD "'layers': [{'type': 'batchnorm', 'epsilon': 0}, " OUT "]}",
         "\"epsilon\""},
        {HEAD "'layers': [{'type': 'batchnorm', 'gamma_regularizer': "
              "'l3'}, " OUT "]}", "gamma_regularizer"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 4, 'kernel_size': 3},"
              "{'type': 'dense', 'units': 10, 'activation': 'softmax'}]}",
         "layers[1] (dense \"dense\"): dense needs a flat input (N) but its "
         "input has shape (26, 26, 4); add {\"type\": \"flatten\"} before it"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'conv2d', "
              "'filters': 4, 'kernel_size': 3}]}",
         "layers[1] (conv2d \"conv2d\"): conv2d needs an image input "
         "(H, W, C) but its input has shape (784)"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 4, "
              "'kernel_size': [30, 3]}," OUT "]}",
         "kernel_size (30, 3) is larger than the input (28, 28, 1) with "
         "padding \"valid\""},
        {HEAD "'layers': [{'type': 'maxpool2d', 'pool_size': 29}," OUT "]}",
         "layers[0] (maxpool2d \"max_pooling2d\"): pool_size (29, 29) is "
         "larger than the input (28, 28, 1)"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 0, 'kernel_size': 3},"
              OUT "]}", "\"filters\" must be from 1 to 65536, got 0"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 2.5, "
              "'kernel_size': 3}," OUT "]}",
         "\"filters\" must be an integer, got 2.5"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 2, "
              "'kernel_size': '3'}," OUT "]}",
         "\"kernel_size\" must be an integer or [height, width] of integers, "
         "got \"3\""},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 2, "
              "'kernel_size': [3, 3, 3]}," OUT "]}",
         "\"kernel_size\" must be an integer or [height, width], got an "
         "array of 3"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 2, 'kernel_size': 3,"
              " 'strides': 0}," OUT "]}",
         "\"strides\" must be from 1 to 65536, got 0"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 2, 'kernel_size': 3,"
              " 'padding': 'full'}," OUT "]}",
         "\"padding\" must be \"valid\" or \"same\", got \"full\""},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dropout', "
              "'rate': 1}, {'type': 'dense', 'units': 2}]}",
         "layers[1] (dropout \"dropout\"): \"rate\" must be in [0, 1), got 1"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dropout'}]}",
         "missing required key \"rate\" (e.g. 0.2)"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'activation': 'selu'}]}",
         "unsupported activation \"selu\"; use one of linear, relu, "
         "sigmoid, tanh, softmax, relu6, elu, gelu, swish (silu), softplus, "
         "hard_sigmoid"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'kernel_initializer': 'orthogonal'}]}",
         "layers[1] (dense \"dense\"): \"kernel_initializer\" "
         "\"orthogonal\" is not supported; use one of GlorotUniform, "
         "GlorotNormal, HeNormal, HeUniform, LecunNormal, LecunUniform, "
         "RandomNormal, RandomUniform, TruncatedNormal, VarianceScaling, "
         "Zeros, Ones, Constant"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'bias_initializer': {'type': 'RandomUniform', 'minval': 1,"
              " 'maxval': 1}}]}",
         "bias_initializer (RandomUniform): \"minval\" 1 must be below "
         "\"maxval\" 1"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'kernel_initializer': {'type': 'VarianceScaling', "
              "'distribution': 'cauchy'}}]}",
         "\"distribution\" \"cauchy\" is not supported; use "
         "\"truncated_normal\", \"untruncated_normal\" or \"uniform\""},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'kernel_initializer': {'type': 'Zeros', 'value': 2}}]}",
         "kernel_initializer (Zeros): unknown key \"value\""},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'leaky_relu', "
              "'alpha': 0.1, 'negative_slope': 0.1}, {'type': 'dense', "
              "'units': 3}]}",
         "layers[1] (leaky_relu \"leaky_re_lu\"): give \"negative_slope\" "
         "(Keras 3) or \"alpha\" (tf.keras 2), not both"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'relu', "
              "'negative_slope': -0.1}, {'type': 'dense', 'units': 3}]}",
         "layers[1] (relu \"re_lu\"): \"negative_slope\" must be in [0, "},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'relu', "
              "'max': 6}, {'type': 'dense', 'units': 3}]}",
         "unknown key \"max\"; allowed here: type, name, device, "
         "input_shape, inputs, max_value, negative_slope, threshold"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'kernel_regularizer': 'l3'}]}",
         "layers[1] (dense \"dense\"): \"kernel_regularizer\" \"l3\" is not "
         "supported; use one of L1, L2, L1L2"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'bias_regularizer': {'type': 'L1', 'l2': 0.1}}]}",
         "bias_regularizer (L1): unknown key \"l2\""},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'activity_regularizer': 'l2'}]}",
         "unknown key \"activity_regularizer\""},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'kernel_initializer': {'stddev': 2}}]}",
         "missing required key \"type\""},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'use_bias': 1}]}",
         "\"use_bias\" must be true or false, got 1"},
        {HEAD "'layers': [{'type': 'flatten', 'name': 'a'}, {'type': 'dense',"
              " 'name': 'a', 'units': 3}]}",
         "layers[1] (dense \"a\"): name \"a\" is already used by layers[0]"},
        {HEAD "'layers': [{'type': 'flatten', 'name': 'x/y'}]}",
         "\"name\" must be 1 to 63 letters, digits"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', "
              "'units': 3, 'units': 4}]}",
         "layers[1] (dense \"dense\"): key \"units\" appears twice"},
        {HEAD "'layers': [{'type': 'flatten', 'device': 'tpu:0'}]}",
         "\"device\" must be like \"cpu\", \"cpu:1\" or \"gpu:0\", got "
         "\"tpu:0\""},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 3,"
              " 'input_shape': [4]}]}",
         "\"input_shape\" belongs on the first layer"},
        {HEAD "'layers': [{'type': 'flatten', 'input_shape': [4]}]}",
         "\"input_shape\" is given both here and on the model"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 2, 'kernel_size': 3,"
              " 'activation': 'softmax'}, {'type': 'flatten'}]}",
         "activation \"softmax\" needs a flat output but this layer's output "
         "has shape (26, 26, 2)"},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 10,"
              " 'activation': 'relu'}]}",
         "test.json: loss \"sparse_categorical_crossentropy\" needs the last "
         "layer to be dense with activation \"softmax\" (or \"linear\" "
         "logits), but layers[1] is dense \"dense\" with activation \"relu\""},
        {HEAD "'layers': [{'type': 'flatten'}, {'type': 'dense', 'units': 1,"
              " 'activation': 'softmax'}]}", "needs at least 2 classes"},
        {HEAD "'layers': [{'type': 'conv2d', 'filters': 2, 'kernel_size': 3}]}",
         "the last layer (layers[0] \"conv2d\") must have a flat output for "
         "the loss, but its shape is (26, 26, 2)"},
        {"{'input_shape': [4], 'optimizer': 'adam', 'layers': ["
         "{'type': 'dense', 'units': 2}]}",
         "missing required key \"loss\""},
        {"{'input_shape': [4], 'loss': 'kl_divergence', "
         "'optimizer': 'adam', 'layers': [{'type': 'dense', 'units': 2}]}",
         "test.json: unsupported loss \"kl_divergence\"; use one of "
         "sparse_categorical_crossentropy, categorical_crossentropy, "
         "binary_crossentropy, mean_squared_error (mse), mean_absolute_error "
         "(mae), huber"},
        {"{'input_shape': [4], 'loss': {'type': "
         "'sparse_categorical_crossentropy', 'label_smoothing': 0.1}, "
         "'optimizer': 'adam', 'layers': [{'type': 'dense', 'units': 2, "
         "'activation': 'softmax'}]}",
         "loss (sparse_categorical_crossentropy): unknown key "
         "\"label_smoothing\""},
        {"{'input_shape': [4], 'loss': {'type': 'huber', 'delta': 0}, "
         "'optimizer': 'adam', 'layers': [{'type': 'dense', 'units': 2}]}",
         "loss (huber): \"delta\" must be in (0, "},
        {"{'input_shape': [4], 'loss': {'type': 'binary_crossentropy', "
         "'label_smoothing': 1.5}, 'optimizer': 'adam', 'layers': "
         "[{'type': 'dense', 'units': 1}]}",
         "loss (binary_crossentropy): \"label_smoothing\" must be in [0, 1]"},
        {"{'input_shape': [4], 'loss': {'type': 'categorical_crossentropy', "
         "'from_logits': true}, 'optimizer': 'adam', 'layers': "
         "[{'type': 'dense', 'units': 3, 'activation': 'softmax'}]}",
         "loss \"categorical_crossentropy\" with \"from_logits\": true takes "
         "logits, but the last layer (layers[0] \"dense\") has activation "
         "\"softmax\"; make it \"linear\""},
        {"{'input_shape': [4], 'loss': {'from_logits': true}, "
         "'optimizer': 'adam', 'layers': [{'type': 'dense', 'units': 2}]}",
         "missing required key \"type\""},
        {"{'input_shape': [4], 'loss': 'categorical_crossentropy', "
         "'optimizer': 'adam', 'layers': [{'type': 'dense', 'units': 3, "
         "'activation': 'sigmoid'}]}",
         "loss \"categorical_crossentropy\" needs the last layer to be dense "
         "with activation \"softmax\""},
        {"{'input_shape': [4], 'loss': 'mse', 'layers': ["
         "{'type': 'dense', 'units': 2}]}",
         "missing required key \"optimizer\" (e.g. \"adam\")"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'lion', "
         "'layers': [{'type': 'dense', 'units': 2}]}",
         "test.json: optimizer: unsupported optimizer \"lion\"; use one of "
         "sgd, rmsprop, adagrad, adam, adamw, nadam, adamax, ftrl"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'type': 'adam', "
         "'lr': 0.1}, 'layers': [{'type': 'dense', 'units': 2}]}",
         "optimizer (adam): unknown key \"lr\" (did you mean "
         "\"learning_rate\"?)"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'type': 'adam', "
         "'momentum': 0.9}, 'layers': [{'type': 'dense', 'units': 2}]}",
         "optimizer (adam): unknown key \"momentum\""},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'type': 'sgd', "
         "'learning_rate': 0}, 'layers': [{'type': 'dense', 'units': 2}]}",
         "optimizer (sgd): learning_rate 0 is out of range: it must be in "
         "(0, 10]"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'type': 'sgd', "
         "'learning_rate': 0.1, 'momentum': 1}, 'layers': [{'type': 'dense',"
         " 'units': 2}]}",
         "optimizer (sgd): momentum 1 is out of range: it must be in (0, 1)"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'type': 'adam', "
         "'epsilon': 2}, 'layers': [{'type': 'dense', 'units': 2}]}",
         "optimizer (adam): epsilon 2 is out of range: it must be in (0, 1]"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'type': 'adam', "
         "'learning_rate': '0.1'}, 'layers': [{'type': 'dense', 'units': 2}]}",
         "optimizer (adam): \"learning_rate\" must be a number"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'type': 'adam', "
         "'beta_2': 0.9999999999}, 'layers': [{'type': 'dense', 'units': 2}]}",
         "beta_2 1 is out of range: it must be in [0, 1)"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'type': 'sgd', "
         "'nesterov': true}, 'layers': [{'type': 'dense', 'units': 2}]}",
         "\"nesterov\": true needs \"momentum\" > 0"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': {'learning_rate':"
         " 0.1}, 'layers': [{'type': 'dense', 'units': 2}]}",
         "optimizer: missing required key \"type\""},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'metrics': ['precision'], 'layers': [{'type': 'dense', 'units': 2}]}",
         "test.json: metrics: unsupported metric \"precision\"; supported: "
         "accuracy, binary_accuracy (threshold), categorical_accuracy, "
         "sparse_categorical_accuracy, top_k_categorical_accuracy (k), "
         "sparse_top_k_categorical_accuracy (k), AUC (curve \"ROC\", exact)"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'metrics': [{'class_name': 'AUC', 'config': {'curve': 'PR'}}], "
         "'layers': [{'type': 'dense', 'units': 2}]}",
         "test.json: metrics: curve \"PR\" is not supported; hetps "
         "computes the ROC AUC (curve \"ROC\")"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'metrics': [{'class_name': 'AUC', 'config': {'multi_label': "
         "true}}], 'layers': [{'type': 'dense', 'units': 2}]}",
         "metrics: multi_label true is not supported; AUC takes "
         "num_thresholds"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'metrics': [{'class_name': 'AUC', 'config': {'summation_method': "
         "'minoring'}}], 'layers': [{'type': 'dense', 'units': 2}]}",
         "summation_method \"minoring\" is not supported"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'metrics': [{'class_name': 'Precision', 'config': {}}], "
         "'layers': [{'type': 'dense', 'units': 2}]}",
         "metrics: unsupported metric class \"Precision\"; supported: "
         "accuracy"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'metrics': [{'class_name': 'TopKCategoricalAccuracy', 'config': "
         "{'k': 0}}], 'layers': [{'type': 'dense', 'units': 2}]}",
         "metrics: k 0 must be a whole number >= 1"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'metrics': [{'class_name': 'BinaryAccuracy', 'config': "
         "{'k': 3}}], 'layers': [{'type': 'dense', 'units': 2}]}",
         "metrics: k 3 is not supported; binary_accuracy takes name, dtype "
         "and threshold"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'metrics': ['accuracy', 'acc'], 'layers': [{'type': 'dense', "
         "'units': 2}]}",
         "metrics: metric accuracy is listed twice"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'batch_size': 0, 'layers': [{'type': 'dense', 'units': 2}]}",
         "\"batch_size\" must be from 1 to 1048576, got 0"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'seed': -1, 'layers': [{'type': 'dense', 'units': 2}]}",
         "\"seed\" must be an integer from 0 to 2^53, got -1"},
        {"{'input_shape': [65536, 65536, 1], 'loss': 'mse', 'optimizer': "
         "'sgd', 'layers': [{'type': 'flatten'}]}",
         "\"input_shape\" has more than 2147483647 elements"},
        {"{'input_shape': [4], 'loss': 'mse', 'optimizer': 'sgd', "
         "'layers': [{'type': 'dense', 'units': 16777216}, {'type': 'dense',"
         " 'units': 200}]}",
         "layers[1] (dense \"dense_1\"): variable \"dense_1/kernel\" would "
         "have 3355443200 elements"},
    };
    char json[2048];

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        hc_err_clear();
        int rv = parse_q(t[i].json, model);
        const char *msg = hc_err_msg(), *want = t[i].want;
        if (rv != HC_ERR_CONFIG || !strstr(msg, want))
            printf("\n  row %zu: rv %d, message: %s\n  wanted: %s\n", i, rv,
                   msg, want);
        CU_ASSERT_EQUAL(rv, HC_ERR_CONFIG);
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, want));
        CU_ASSERT_PTR_NOT_NULL(strstr(msg, "test.json"));
    }
    /* A failed parse leaves *out untouched. */
    CU_ASSERT_EQUAL_FATAL(hc_model_load(CNN_PATH, model), HC_OK);
    dq(HEAD "'layers': [{'type': 'Conv3D'}]}", json, sizeof json);
    CU_ASSERT_EQUAL(hc_model_parse(json, strlen(json), "x", model),
                    HC_ERR_CONFIG);
    CU_ASSERT_EQUAL(model->n_params, 54410);
}

static void test_load_errors(void)
{
    char dir[256], path[512];
    FILE *f;

    CU_ASSERT_EQUAL(hc_model_load("/nonexistent/m.json", model),
                    HC_ERR_NOTFOUND);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "model file "
                                  "/nonexistent/m.json: cannot open"));
    CU_ASSERT_EQUAL(hc_model_parse(NULL, 0, "x", model), HC_ERR_INVAL);

    hp_tmpdir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/bad.json", dir);
    f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs("{\n  \"layers\": [\n    {\"type\": \"dense\" \"units\": 3}\n  ]\n}\n",
          f);
    fclose(f);
    CU_ASSERT_EQUAL(hc_model_load(path, model), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "bad.json: line 3, column 22:"
                                  " JSON syntax error near '\"units\": 3}'"));
    if (!strstr(hc_err_msg(), "line 3, column 22"))
        printf("\n  message: %s\n", hc_err_msg());
    hp_rmtree(dir);
}

/* ---- losses ---------------------------------------------------------------------- */

/* Every loss by name and as an object with its settings; settings change
 * the signature, the defaults written out do not. */
static void test_losses(void)
{
    static const struct {
        const char *loss, *last;    /* quoted ' */
        enum hc_loss want;
        int logits;
        float smooth, delta;
    } t[] = {
        {"'sparse_categorical_crossentropy'", "'softmax'", HC_LOSS_SPARSE_CCE,
         0, 0, 1},
        {"{'type': 'SparseCategoricalCrossentropy', 'from_logits': true}",
         "'linear'", HC_LOSS_SPARSE_CCE, 1, 0, 1},
        {"'categorical_crossentropy'", "'softmax'", HC_LOSS_CCE, 0, 0, 1},
        {"{'type': 'categorical_crossentropy', 'from_logits': true, "
         "'label_smoothing': 0.1}", "null", HC_LOSS_CCE, 1, 0.1f, 1},
        {"'BinaryCrossentropy'", "'sigmoid'", HC_LOSS_BCE, 0, 0, 1},
        {"{'type': 'binary_crossentropy', 'label_smoothing': 0.2}",
         "'sigmoid'", HC_LOSS_BCE, 0, 0.2f, 1},
        {"'mse'", "'linear'", HC_LOSS_MSE, 0, 0, 1},
        {"'mean_absolute_error'", "'linear'", HC_LOSS_MAE, 0, 0, 1},
        {"'mae'", "'relu'", HC_LOSS_MAE, 0, 0, 1},
        {"'huber_loss'", "'linear'", HC_LOSS_HUBER, 0, 0, 1},
        {"{'type': 'Huber', 'delta': 2.5}", "'linear'", HC_LOSS_HUBER, 0, 0,
         2.5f},
    };
    uint64_t sig[sizeof t / sizeof t[0]];
    char q[512];

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int rv;

        snprintf(q, sizeof q, "{'input_shape': [4], 'loss': %s, "
                 "'optimizer': 'adam', 'layers': [{'type': 'dense', "
                 "'units': 3, 'activation': %s}]}", t[i].loss, t[i].last);
        rv = parse_q(q, model);
        if (rv)
            printf("\n  %s: %s\n", t[i].loss, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        CU_ASSERT_EQUAL(model->loss, t[i].want);
        CU_ASSERT_EQUAL(model->loss_par.from_logits, t[i].logits);
        CU_ASSERT_EQUAL(model->loss_par.label_smoothing, t[i].smooth);
        CU_ASSERT_EQUAL(model->loss_par.delta, t[i].delta);
        sig[i] = model->signature;
        for (size_t j = 0; j < i; j++)      /* every pair differs but the
                                             * two spellings of mae */
            if (!(i == 8 && j == 7))
                CU_ASSERT_NOT_EQUAL(sig[i], sig[j]);
    }
    /* ReLU layers: Keras's defaults, Keras's class names and settings. */
    CU_ASSERT_EQUAL_FATAL(parse_q("{'input_shape': [4], 'loss': 'mse', "
                                  "'optimizer': 'adam', 'layers': [{'type': "
                                  "'dense', 'units': 3}, {'type': 'ReLU', "
                                  "'max_value': 6}, {'type': 'LeakyReLU'}, "
                                  "{'type': 'leaky_relu', 'alpha': 0.1}, "
                                  "{'type': 'relu'}]}", model), HC_OK);
    CU_ASSERT(model->layers[1].type == HC_LAYER_RELU &&
              model->layers[1].max_value == 6);
    CU_ASSERT_STRING_EQUAL(model->layers[1].name, "re_lu");
    CU_ASSERT(model->layers[2].type == HC_LAYER_LEAKY_RELU &&
              model->layers[2].negative_slope == 0.3f);
    CU_ASSERT_STRING_EQUAL(model->layers[3].name, "leaky_re_lu_1");
    CU_ASSERT(model->layers[3].negative_slope == 0.1f);
    CU_ASSERT(model->layers[4].max_value < 0 &&
              model->layers[4].negative_slope == 0);
    /* Regularizers: Keras 3's defaults by name; settings change the
     * signature, none written out does not. */
    CU_ASSERT_EQUAL_FATAL(parse_q("{'input_shape': [3, 3, 4], 'loss': "
                                  "'mse', 'optimizer': 'adam', 'layers': "
                                  "[{'type': 'conv2d' , 'filters': 2, "
                                  "'kernel_size': 1, "
                                  "'kernel_regularizer': 'L2', "
                                  "'bias_regularizer': {'type': 'l1_l2', "
                                  "'l1': 0.5}}, {'type': 'flatten'}]}", model),
                          HC_OK);
    CU_ASSERT(model->vars[0].reg.l1 == 0 && model->vars[0].reg.l2 == 0.01f);
    CU_ASSERT(model->vars[1].reg.l1 == 0.5f && model->vars[1].reg.l2 == 0);
    {
        uint64_t with = model->signature;

        CU_ASSERT_EQUAL_FATAL(parse_q("{'input_shape': [3, 3, 4], 'loss': "
                                      "'mse', 'optimizer': 'adam', 'layers': "
                                      "[{'type': 'conv2d' , 'filters': 2, "
                                      "'kernel_size': 1, "
                                      "'kernel_regularizer': null, "
                                      "'bias_regularizer': {'type': 'L1L2'}},"
                                      " {'type': 'flatten'}]}", model), HC_OK);
        CU_ASSERT_NOT_EQUAL(model->signature, with);
        CU_ASSERT_EQUAL_FATAL(parse_q("{'input_shape': [3, 3, 4], 'loss': "
                                      "'mse', 'optimizer': 'adam', 'layers': "
                                      "[{'type': 'conv2d' , 'filters': 2, "
                                      "'kernel_size': 1}, {'type': "
                                      "'flatten'}]}", model2), HC_OK);
        CU_ASSERT_EQUAL(model->signature, model2->signature);
    }
    /* A default written out is the same model. */
    CU_ASSERT_EQUAL(parse_q("{'input_shape': [4], 'loss': {'type': 'huber', "
                            "'delta': 1}, 'optimizer': 'adam', 'layers': "
                            "[{'type': 'dense', 'units': 3}]}", model),
                    HC_OK);
    CU_ASSERT_EQUAL(model->signature, sig[9]);
}

/* ---- initial values and signature ------------------------------------------------ */

/* Each initialiser on a dense kernel (400, 500) and its bias (500): the
 * mean, variance and bounds of Keras's distribution, on 200000 values. */
static void test_initializers(void)
{
    static const double tn = 0.87962566103423978;  /* truncated ±2 stddev */
    static const struct {
        const char *init;           /* kernel_initializer, quoted ' */
        double mean, var, bound;    /* bound 0: none */
    } t[] = {
        {"'GlorotUniform'", 0, 2.0 / 900, 0.08164966},
        {"'glorot_normal'", 0, 1.0 / 450, 2 * 0.04714045 / tn},
        {"{'type': 'HeNormal', 'seed': 3}", 0, 2.0 / 400, 2 * 0.07071068 / tn},
        {"'he_uniform'", 0, 2.0 / 400, 0.12247449},
        {"'LecunNormal'", 0, 1.0 / 400, 2 * 0.05 / tn},
        {"'lecun_uniform'", 0, 1.0 / 400, 0.08660254},
        {"{'type': 'RandomNormal', 'mean': 0.1, 'stddev': 0.2}", 0.1, 0.04,
         0},
        {"'random_normal'", 0, 0.0025, 0},
        {"{'type': 'RandomUniform', 'minval': -0.2, 'maxval': 0.6}", 0.2,
         0.64 / 12, 0.6},
        {"'RandomUniform'", 0, 0.01 / 12, 0.05},
        {"'TruncatedNormal'", 0, 0.0025 * tn * tn, 0.1},
        {"{'type': 'VarianceScaling', 'scale': 3, 'mode': 'fan_out', "
         "'distribution': 'untruncated_normal'}", 0, 3.0 / 500, 0},
        {"{'type': 'variance_scaling', 'scale': 0.5, 'mode': 'fan_avg', "
         "'distribution': 'uniform'}", 0, 0.5 / 450, 0.05773503},
        {"{'type': 'VarianceScaling'}", 0, 1.0 / 400, 2 * 0.05 / tn},
        {"'zeros'", 0, 0, 0},
        {"'Ones'", 1, 0, 0},
        {"{'type': 'Constant', 'value': 0.25}", 0.25, 0, 0},
    };
    char json[1024], q[512];
    float *p = NULL;

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        double sum = 0, sq = 0, amax = 0, mean, var, sd;
        size_t n = 400 * 500, out = 0;
        int rv;

        snprintf(q, sizeof q, "{'input_shape': [400], 'seed': 9, 'loss': "
                 "'mse', 'optimizer': 'adam', 'layers': [{'type': 'dense', "
                 "'units': 500, 'kernel_initializer': %s, "
                 "'bias_initializer': 'he_normal'}]}", t[i].init);
        dq(q, json, sizeof json);
        rv = hc_model_parse(json, strlen(json), "init", model2);
        if (rv)
            printf("\n  %s: %s\n", t[i].init, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        p = realloc(p, model2->n_params * sizeof *p);
        CU_ASSERT_PTR_NOT_NULL_FATAL(p);
        hc_model_init_params(model2, p);
        for (size_t j = 0; j < n; j++) {
            double d = p[j] - t[i].mean;

            sum += p[j];
            sq += d * d;
            amax = fabs(p[j]) > amax ? fabs(p[j]) : amax;
            out += t[i].bound && fabs(p[j]) > t[i].bound * (1 + 1e-6);
        }
        mean = sum / n;
        var = sq / n;
        sd = sqrt(t[i].var);
        printf("\n    %-40.40s mean %9.6f (%g) var %.6g (%g) max %.5g", t[i].init,
               mean, t[i].mean, var, t[i].var, amax);
        CU_ASSERT(fabs(mean - t[i].mean) <= 5 * sd / sqrt((double)n) + 1e-7);
        CU_ASSERT(fabs(var - t[i].var) <= 0.015 * t[i].var + 1e-12);
        CU_ASSERT_EQUAL(out, 0);
        if (t[i].bound)             /* the values reach near the bound */
            CU_ASSERT(amax > 0.97 * t[i].bound);
        /* The bias: HeNormal over Keras's fans of a vector (its length). */
        sq = 0;
        for (size_t j = n; j < n + 500; j++)
            sq += (double)p[j] * p[j];
        CU_ASSERT(fabs(sq / 500 / (2.0 / 500) - 1) < 0.2);
    }
    /* GlorotUniform on a bias: Keras's fans of a vector, its length. */
    dq("{'input_shape': [400], 'loss': 'mse', 'optimizer': 'adam', 'layers': "
       "[{'type': 'dense', 'units': 500, 'bias_initializer': "
       "'glorot_uniform'}]}", json, sizeof json);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "g", model2),
                          HC_OK);
    p = realloc(p, model2->n_params * sizeof *p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    hc_model_init_params(model2, p);
    {
        double lim = sqrt(6.0 / 1000), sq = 0, mx = 0;

        for (size_t j = 400 * 500; j < 400 * 500 + 500; j++) {
            sq += (double)p[j] * p[j];
            mx = fabs(p[j]) > mx ? fabs(p[j]) : mx;
        }
        CU_ASSERT(mx <= lim && mx > 0.9 * lim);
        CU_ASSERT(fabs(sq / 500 / (lim * lim / 3) - 1) < 0.2);
    }
    /* GlorotUniform named or defaulted: today's values and signature. */
    dq("{'input_shape': [4], 'loss': 'mse', 'optimizer': 'adam', 'layers': "
       "[{'type': 'dense', 'units': 3}]}", json, sizeof json);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "a", model),
                          HC_OK);
    dq("{'input_shape': [4], 'loss': 'mse', 'optimizer': 'adam', 'layers': "
       "[{'type': 'dense', 'units': 3, 'kernel_initializer': "
       "{'type': 'GlorotUniform', 'seed': 5}, 'bias_initializer': 'zeros'}]}",
       json, sizeof json);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "b", model2),
                          HC_OK);
    CU_ASSERT_EQUAL(model->signature, model2->signature);
    free(p);
}

static void test_init_params(void)
{
    float *p = NULL, *q = NULL;
    size_t n;

    if (load_or_fail(CNN_PATH, model) != HC_OK)
        return;
    n = model->n_params;
    p = malloc(n * sizeof *p);
    q = malloc(n * sizeof *q);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    CU_ASSERT_PTR_NOT_NULL_FATAL(q);
    for (size_t i = 0; i < n; i++)
        p[i] = q[i] = 7.0f;
    hc_model_init_params(model, p);
    hc_model_init_params(model, q);
    CU_ASSERT_EQUAL(memcmp(p, q, n * sizeof *p), 0);    /* deterministic */

    for (int v = 0; v < model->n_vars; v++) {
        const struct hc_var_def *d = &model->vars[v];
        const float *x = p + hc_model_var_offset(model, v);
        double sum = 0, sq = 0, amax = 0;
        size_t bad = 0;
        if (d->init == HC_INIT_ZEROS) {
            for (size_t i = 0; i < d->size; i++)
                bad += x[i] != 0.0f;
            CU_ASSERT_EQUAL(bad, 0);
            continue;
        }
        double limit = sqrt(6.0 / (d->fan_in + d->fan_out));
        for (size_t i = 0; i < d->size; i++) {
            bad += !(fabs(x[i]) <= limit);
            sum += x[i];
            sq += (double)x[i] * x[i];
            amax = fabs(x[i]) > amax ? fabs(x[i]) : amax;
        }
        /* Uniform(−a, a): mean 0, variance a²/3, extremes near ±a. */
        double mean = sum / d->size, var = sq / d->size;
        CU_ASSERT_EQUAL(bad, 0);
        CU_ASSERT(fabs(mean) < 4 * limit / sqrt(3.0 * d->size));
        CU_ASSERT(fabs(var / (limit * limit / 3) - 1) < 0.2);
        CU_ASSERT(amax > 0.95 * limit);
    }

    /* The documented generator (model.c), recomputed independently for
     * seed 42: the first values of conv2d/kernel and dense/kernel. */
    CU_ASSERT_EQUAL(p[0], 0.0826237127f);
    CU_ASSERT_EQUAL(p[1], -0.127287254f);
    CU_ASSERT_EQUAL(p[2], -0.0645935759f);
    CU_ASSERT_EQUAL(p[320], 0.0170109421f);
    CU_ASSERT_EQUAL(p[321], 0.0256342515f);
    CU_ASSERT_EQUAL(p[322], -0.00765585434f);

    /* Another seed gives other values; a variable's values do not depend
     * on the others (dense with 20 units keeps conv2d/kernel's values). */
    model->seed = 43;
    hc_model_init_params(model, q);
    CU_ASSERT_NOT_EQUAL(memcmp(p, q, 288 * sizeof *p), 0);
    {
        char json[1024];
        float *r = NULL;
        dq("{'input_shape': [28, 28, 1], 'seed': 42, 'loss': 'mse', "
           "'optimizer': 'adam', 'layers': [{'type': 'conv2d', 'filters': 32,"
           " 'kernel_size': 3}, {'type': 'flatten'}, {'type': 'dense', "
           "'units': 20}]}", json, sizeof json);
        CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "m2", model2),
                              HC_OK);
        r = malloc(model2->n_params * sizeof *r);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        hc_model_init_params(model2, r);
        CU_ASSERT_EQUAL(memcmp(p, r, 288 * sizeof *p), 0);
        free(r);
    }
    free(p);
    free(q);
}

static void test_signature(void)
{
    /* Edits of the CNN file: those that change the meaning of the
     * variables change the signature, the others keep it. */
    static const struct {
        const char *from, *to;
        int changes;
    } t[] = {
        {"'filters': 32", "'filters': 16", 1},
        {"'units': 10, 'activation': 'softmax'",
         "'units': 10, 'activation': 'linear'", 1},
        {"'learning_rate': 0.001", "'learning_rate': 0.002", 1},
        {"'kernel_size': [3, 3]", "'kernel_size': [3, 3], 'padding': 'same'",
         1},
        {"'type': 'flatten'", "'type': 'flatten', 'name': 'flat'", 1},
        {"'batch_size': 64", "'batch_size': 128", 0},
        {"'epochs': 10", "'epochs': 3", 0},
        {"'seed': 42", "'seed': 7", 0},
        {"'name': 'fashion_cnn'", "'name': 'other'", 0},
        {"'type': 'flatten'", "'type': 'flatten', 'device': 'cpu:1'", 0},
        {"'kernel_size': [3, 3]", "'kernel_size': 3", 0},
        {"'type': 'conv2d'", "'type': 'Conv2D'", 0},
    };
    static const char cnn[] =
        "{'name': 'fashion_cnn', 'input_shape': [28, 28, 1], 'layers': ["
        "{'type': 'conv2d', 'filters': 32, 'kernel_size': [3, 3], "
        "'activation': 'relu'}, {'type': 'maxpool2d', 'pool_size': [2, 2]}, "
        "{'type': 'flatten'}, {'type': 'dense', 'units': 10, 'activation': "
        "'softmax'}], 'loss': 'sparse_categorical_crossentropy', "
        "'optimizer': {'type': 'adam', 'learning_rate': 0.001, 'beta_1': 0.9,"
        " 'beta_2': 0.999, 'epsilon': 1e-7}, 'metrics': ['accuracy'], "
        "'batch_size': 64, 'epochs': 10, 'seed': 42}";
    char edited[2048];
    uint64_t base;

    CU_ASSERT_EQUAL_FATAL(parse_q(cnn, model), HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_model_load(CNN_PATH, model2), HC_OK);
    base = model->signature;
    CU_ASSERT_EQUAL(base, model2->signature);   /* the file says the same */
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *at = strstr(cnn, t[i].from);
        CU_ASSERT_PTR_NOT_NULL_FATAL(at);
        snprintf(edited, sizeof edited, "%.*s%s%s", (int)(at - cnn), cnn,
                 t[i].to, at + strlen(t[i].from));
        int rv = parse_q(edited, model);
        if (rv != HC_OK)
            printf("\n  row %zu: %s\n", i, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        CU_ASSERT_EQUAL(model->signature != base, t[i].changes);
    }
}

static void test_names(void)
{
    static const struct { enum hc_act a; const char *name; } acts[] = {
        {HC_ACT_LINEAR, "linear"}, {HC_ACT_RELU, "relu"},
        {HC_ACT_SIGMOID, "sigmoid"}, {HC_ACT_TANH, "tanh"},
        {HC_ACT_SOFTMAX, "softmax"}, {HC_ACT_RELU6, "relu6"},
        {HC_ACT_ELU, "elu"}, {HC_ACT_GELU, "gelu"}, {HC_ACT_SWISH, "swish"},
        {HC_ACT_SOFTPLUS, "softplus"},
        {HC_ACT_HARD_SIGMOID, "hard_sigmoid"}, {(enum hc_act)99, "unknown"},
    };
    /* Spellings read: Keras's names, any case, with or without '_'. */
    static const struct { const char *s; enum hc_act a; } spelled[] = {
        {"silu", HC_ACT_SWISH}, {"Swish", HC_ACT_SWISH},
        {"hard_sigmoid", HC_ACT_HARD_SIGMOID},
        {"HardSigmoid", HC_ACT_HARD_SIGMOID}, {"RELU6", HC_ACT_RELU6},
        {"gelu", HC_ACT_GELU}, {"elu", HC_ACT_ELU},
        {"softplus", HC_ACT_SOFTPLUS},
    };
    enum hc_act a;
    static const struct { enum hc_layer_type t; const char *name; } types[] = {
        {HC_LAYER_CONV2D, "conv2d"}, {HC_LAYER_MAXPOOL2D, "maxpool2d"},
        {HC_LAYER_FLATTEN, "flatten"}, {HC_LAYER_DENSE, "dense"},
        {HC_LAYER_DROPOUT, "dropout"}, {HC_LAYER_ACTIVATION, "activation"},
        {(enum hc_layer_type)99, "unknown"},
    };

    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        CU_ASSERT_STRING_EQUAL(hc_act_name(acts[i].a), acts[i].name);
    for (size_t i = 0; i < sizeof spelled / sizeof spelled[0]; i++) {
        CU_ASSERT_EQUAL(hc_act_named(spelled[i].s, &a), 0);
        CU_ASSERT_EQUAL(a, spelled[i].a);
    }
    CU_ASSERT_EQUAL(hc_act_named("selu", &a), -1);
    CU_ASSERT_EQUAL(hc_act_named("leaky_relu", &a), -1);
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        CU_ASSERT_STRING_EQUAL(hc_layer_type_name(types[i].t), types[i].name);
}

/* Every kind id has its row, and each row is found by its own names. */
static void test_layer_table(void)
{
    for (int t = 0; t < HC_LAYER_COUNT; t++) {
        const struct hc_layer_kind *k = hc_layer_kind((enum hc_layer_type)t);
        enum hc_layer_type found = HC_LAYER_COUNT;

        CU_ASSERT_PTR_NOT_NULL_FATAL(k);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k->name);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k->keras_class);
        CU_ASSERT_PTR_NOT_NULL_FATAL(k->snake);
        CU_ASSERT_PTR_NOT_NULL(k->keras_args);
        CU_ASSERT_PTR_NOT_NULL(k->keras_config);
        CU_ASSERT_EQUAL(hc_layer_kind_named(k->name, &found), 0);
        CU_ASSERT_EQUAL(found, t);
        CU_ASSERT_PTR_EQUAL(hc_layer_kind_keras(k->keras_class), k);
        CU_ASSERT_STRING_EQUAL(hc_layer_type_name((enum hc_layer_type)t),
                               k->name);
    }
    CU_ASSERT_PTR_NULL(hc_layer_kind(HC_LAYER_COUNT));
    CU_ASSERT_PTR_NULL(hc_layer_kind_keras("LayerNormalizationX"));
}

static int suite_init(void)
{
    model = calloc(1, sizeof *model);
    model2 = calloc(1, sizeof *model2);
    return model && model2 ? 0 : -1;
}

static int suite_clean(void)
{
    free(model);
    free(model2);
    return 0;
}

/* ---- initial rows of row-sparse tables (hc_init_row) ---- */

/* Mean, standard deviation and largest |value| of `rows` rows of 16 of
 * initialiser `in` for a (input_dim, 16) table. */
static void row_stats(const struct hc_initializer *in, uint64_t input_dim,
                      int rows, double *mean, double *sd, double *amax)
{
    double s = 0, s2 = 0;
    float p[16];

    *amax = 0;
    for (int r = 0; r < rows; r++) {
        hc_init_row(in, input_dim, 16, 42, 5, (uint64_t)r * 7919 + (1ull << 40),
                    p);
        for (int j = 0; j < 16; j++) {
            s += p[j];
            s2 += (double)p[j] * p[j];
            *amax = fabs(p[j]) > *amax ? fabs(p[j]) : *amax;
        }
    }
    *mean = s / (rows * 16.0);
    *sd = sqrt(s2 / (rows * 16.0) - *mean * *mean);
}

static void test_init_row(void)
{
    const struct hc_initializer uni = {HC_INIT_RANDOM_UNIFORM,
                                       {-0.05f, 0.05f, 0, 0}};
    const struct hc_initializer zeros = {HC_INIT_ZEROS, {0, 0, 0, 0}};
    const struct hc_initializer normal = {HC_INIT_RANDOM_NORMAL,
                                          {0, 0.05f, 0, 0}};
    const struct hc_initializer trunc = {HC_INIT_TRUNCATED_NORMAL,
                                         {0, 0.05f, 0, 0}};
    const struct hc_initializer glorot = {HC_INIT_GLOROT_UNIFORM,
                                          {0, 0, 0, 0}};
    float a[16], b[16], c[16];
    double mean, sd, amax, limit = sqrt(6.0 / (1000 + 16));

    /* The same row from any process, in any order; rows and variables
     * differ. */
    hc_init_row(&uni, 1ull << 40, 16, 42, 5, 123456789, a);
    hc_init_row(&uni, 1ull << 40, 16, 42, 5, 7, c);
    hc_init_row(&uni, 1ull << 40, 16, 42, 5, 123456789, b);
    CU_ASSERT_EQUAL(memcmp(a, b, sizeof a), 0);
    CU_ASSERT_NOT_EQUAL(memcmp(a, c, sizeof a), 0);
    hc_init_row(&uni, 1ull << 40, 16, 42, 6, 123456789, b);
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
    hc_init_row(&uni, 1ull << 40, 16, 43, 5, 123456789, b);
    CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof a), 0);
    /* Keras's Embedding default: U(-0.05, 0.05), variance 0.1²/12. */
    row_stats(&uni, 1ull << 40, 4000, &mean, &sd, &amax);
    CU_ASSERT(fabs(mean) < 0.002 && amax <= 0.05 && amax > 0.049);
    CU_ASSERT(fabs(sd - 0.1 / sqrt(12.0)) < 0.001);
    row_stats(&zeros, 1ull << 40, 100, &mean, &sd, &amax);
    CU_ASSERT_EQUAL(amax, 0);
    row_stats(&normal, 1ull << 40, 4000, &mean, &sd, &amax);
    CU_ASSERT(fabs(mean) < 0.002 && fabs(sd - 0.05) < 0.0015 && amax > 0.1);
    /* Truncated at 2 stddev: narrower than the normal, nothing past 0.1. */
    row_stats(&trunc, 1ull << 40, 4000, &mean, &sd, &amax);
    CU_ASSERT(fabs(mean) < 0.002 && amax <= 0.1f);
    CU_ASSERT(fabs(sd - 0.05 * 0.87962566103423978) < 0.0015);
    /* Glorot over the table's fans (input_dim 1000, output_dim 16). */
    row_stats(&glorot, 1000, 4000, &mean, &sd, &amax);
    CU_ASSERT(amax <= limit && amax > 0.99 * limit);
    CU_ASSERT(fabs(sd - limit / sqrt(3.0)) < 0.002);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("model", suite_init, suite_clean);

    CU_add_test(s, "fashion_cnn.json", test_cnn_file);
    CU_add_test(s, "initial rows of row-sparse tables", test_init_row);
    CU_add_test(s, "fashion_mlp.json", test_mlp_file);
    CU_add_test(s, "shape inference table", test_shape_table);
    CU_add_test(s, "pools, zero padding, reshape", test_pool_pad_reshape);
    CU_add_test(s, "Keras defaults and names", test_defaults_and_names);
    CU_add_test(s, "optimizers and output layers",
                test_optimizers_and_outputs);
    CU_add_test(s, "metrics", test_metrics);
    CU_add_test(s, "bad model files", test_bad_models);
    CU_add_test(s, "load errors", test_load_errors);
    CU_add_test(s, "losses", test_losses);
    CU_add_test(s, "initial values", test_init_params);
    CU_add_test(s, "initialisers: Keras's distributions", test_initializers);
    CU_add_test(s, "signature", test_signature);
    CU_add_test(s, "names", test_names);
    CU_add_test(s, "layer table", test_layer_table);
}
