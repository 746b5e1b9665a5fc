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
    CU_ASSERT_EQUAL_FATAL(a->n_metrics, b->n_metrics);
    for (int i = 0; i < a->n_metrics; i++) {
        CU_ASSERT_EQUAL(a->metrics[i].kind, b->metrics[i].kind);
        CU_ASSERT_STRING_EQUAL(a->metrics[i].name, b->metrics[i].name);
        CU_ASSERT_EQUAL(a->metrics[i].k, b->metrics[i].k);
        CU_ASSERT_EQUAL(a->metrics[i].threshold, b->metrics[i].threshold);
    }
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
        {"deploy/models/fashion_math.json", K "fashion_math.keras3.json"},
    };

    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        load_or_fail(pairs[i].native, ma);
        load_or_fail(pairs[i].keras, mb);
        expect_same(ma, mb);
        CU_ASSERT_EQUAL(mb->optim.type, HC_OPT_ADAM);
        CU_ASSERT_STRING_EQUAL(mb->name, ma->name);
    }
    /* The placed model keeps its devices. */
    load_or_fail(K "fashion_cnn_placed.keras3.json", mb);
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
                                  "BatchNormalization gamma_constraint "
                                  "NonNeg is not supported; hetps has "
                                  "none"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Dense activation \"selu\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Dense activity_regularizer L2 is not supported; hetps has none"));
    CU_ASSERT_PTR_NOT_NULL(strstr(msg, "Adam use_ema true"));
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
        {"{'class_name': 'Sequential', 'config': {'name': 'seq', "
         "'trainable': false, 'layers': [{'class_name': 'InputLayer', "
         "'config': {'batch_shape': [null, 28, 28, 1], 'name': 'in'}}, "
         FLAT ", " OUT "]}}",
         "Sequential: trainable false is not supported; hetps trains every "
         "layer (Keras would train none of this model's variables)"},
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
             "{'class_name': 'Orthogonal', 'config': {'gain': 1.0}}}}", ""),
         "layers[2] Dense \"dense\": Dense kernel_initializer Orthogonal "
         "is not supported; hetps has GlorotUniform, GlorotNormal, HeNormal, "
         "HeUniform, LecunNormal, LecunUniform, RandomNormal, RandomUniform, "
         "TruncatedNormal, VarianceScaling, Zeros, Ones, Constant"},
        {SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
             "'units': 10, 'activation': 'softmax', 'bias_initializer': "
             "'identity'}}", ""),
         "Dense bias_initializer \"identity\" is not supported; hetps has "
         "GlorotUniform"},
        {SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
             "'units': 10, 'activation': 'softmax', 'kernel_initializer': "
             "{'class_name': 'VarianceScaling', 'config': {'scale': 2.0, "
             "'mode': 'fan_sum', 'distribution': 'uniform'}}}}", ""),
         "layers[1] (dense \"dense\"): kernel_initializer (VarianceScaling): "
         "\"mode\" \"fan_sum\" is not supported; use \"fan_in\", "
         "\"fan_out\" or \"fan_avg\""},
        {SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
             "'units': 10, 'activation': 'softmax', 'kernel_initializer': "
             "{'class_name': 'HeNormal', 'config': {'seed': 1, 'scale': 3}}}}",
             ""),
         "kernel_initializer (HeNormal): unknown key \"scale\""},
        {SEQ(FLAT ", {'class_name': 'Dropout', 'config': {'name': 'x', "
             "'rate': 0.5, 'noise_shape': [1, 5]}}, " OUT, ""),
         "Dropout noise_shape (1, 5) is not supported"},
#define BN(CFG) "{'class_name': 'BatchNormalization', 'config': " \
                "{'name': 'bn', " CFG "}}, "
        {SEQ(BN("'synchronized': true") FLAT ", " OUT, ""),
         "layers[0] (batchnorm \"bn\"): \"synchronized\" true is not "
         "supported yet: hetps normalises each replica by its own batch's "
         "moments (synchronized false)"},
        {SEQ(BN("'renorm': true") FLAT ", " OUT, ""),
         "\"renorm\" true is not supported; hetps's batchnorm computes "
         "Keras's default (false)"},
        {SEQ(BN("'virtual_batch_size': 8") FLAT ", " OUT, ""),
         "\"virtual_batch_size\" 8 is not supported; hetps's batchnorm "
         "computes Keras's default (null)"},
        {SEQ(BN("'adjustment': 'f'") FLAT ", " OUT, ""),
         "\"adjustment\" \"f\" is not supported"},
        {SEQ(BN("'axis': 1") FLAT ", " OUT, ""),
         "\"axis\" 1 is not the last axis of its input (28, 28, 1); "
         "batchnorm normalises the last axis only (-1)"},
        {SEQ(BN("'axis': [1, 2]") FLAT ", " OUT, ""),
         "\"axis\" an array is not supported; batchnorm normalises the last "
         "axis only"},
        {SEQ(BN("'gamma_constraint': {'class_name': 'NonNeg', 'config': {}}")
             FLAT ", " OUT, ""),
         "BatchNormalization gamma_constraint"},
        {SEQ(BN("'beta_initializer': 'orthogonal'") FLAT ", " OUT, ""),
         "BatchNormalization beta_initializer \"orthogonal\" is not "
         "supported"},
        {SEQ(BN("'momentum': 1.5") FLAT ", " OUT, ""), "\"momentum\""},
        {SEQ(BN("'trainable': false") FLAT ", " OUT, ""),
         "layers[1] BatchNormalization \"bn\": BatchNormalization trainable "
         "false is not supported; hetps trains every layer (Keras would keep "
         "this layer's variables fixed and normalise with its moving "
         "statistics, as in inference): set it true or drop the key"},
        {SEQ("{'class_name': 'Conv2D', 'config': {'name': 'c', 'filters': "
             "4, 'kernel_size': [3, 3], 'trainable': false}}, " FLAT ", " OUT,
             ""),
         "layers[1] Conv2D \"c\": Conv2D trainable false is not supported; "
         "hetps trains every layer (Keras would keep this layer's variables "
         "fixed): set it true"},
#undef BN
        {SEQ(FLAT ", " OUT, ADAM("'learning_rate': {'class_name': "
                                 "'CosineDecayRestarts', 'config': {}}")),
         "schedule \"CosineDecayRestarts\" is not supported"},
        {SEQ(FLAT ", " OUT, ADAM("'learning_rate': {'class_name': "
                                 "'ExponentialDecay', 'config': {}}")),
         "learning_rate ExponentialDecay: needs initial_learning_rate, "
         "decay_steps and decay_rate"},
        {SEQ(FLAT ", " OUT, ADAM("'gradient_accumulation_steps': 4")),
         "Adam gradient_accumulation_steps 4 is not supported"},
        {SEQ(FLAT ", " OUT, ADAM("'clipnorm': 1.0, 'clipvalue': 0.5")),
         "only one of them can be set, as in Keras"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'optimizer': 'lion'}"),
         "optimizer \"lion\" is not supported"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'loss': "
             "'kl_divergence'}"),
         "compile_config: loss \"kl_divergence\" is not supported; hetps "
         "has sparse_categorical_crossentropy, categorical_crossentropy, "
         "binary_crossentropy, mean_squared_error (mse), mean_absolute_error "
         "(mae), huber"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'loss': {'module': "
             "'keras.losses', 'class_name': 'CategoricalCrossentropy', "
             "'config': {'name': 'cce', 'reduction': 'sum', "
             "'from_logits': false, 'label_smoothing': 0.0, 'axis': -1}}}"),
         "loss CategoricalCrossentropy reduction \"sum\" is not supported"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'loss': {'class_name': "
             "'MeanSquaredError', 'config': {'from_logits': true}}}"),
         "loss (mean_squared_error): unknown key \"from_logits\""},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'metrics': ['precision']}"),
         "unsupported metric \"precision\"; supported: accuracy"},
        {SEQ(FLAT ", " OUT, ", 'compile_config': {'metrics': [{'module': "
             "'keras.metrics', 'class_name': 'AUC', 'config': {'name': "
             "'auc', 'curve': 'PR'}, 'registered_name': null}]}"),
         "curve \"PR\" is not supported; hetps computes the ROC AUC"},
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

#define OPT(CLS, CFG) ", 'compile_config': {'optimizer': {'class_name': " \
                       "'" CLS "', 'config': {" CFG "}}, 'loss': " \
                       "'sparse_categorical_crossentropy'}"

/* Keras 3's optimizers as get_config writes them (every key, nulls
 * included): read into the settings; unknown keys and values refused by
 * name with what the class takes. */
static void test_config_optimizers(void)
{
#define BASE "'name': 'o', 'learning_rate': 0.002, 'weight_decay': null, " \
             "'clipnorm': null, 'global_clipnorm': null, 'clipvalue': null, " \
             "'use_ema': false, 'ema_momentum': 0.99, " \
             "'ema_overwrite_frequency': null, 'loss_scale_factor': null, " \
             "'gradient_accumulation_steps': null, "
    static const struct {
        const char *json;
        enum hc_optim type;
        const char *describe;   /* or the refusal */
    } cases[] = {
        {SEQ(FLAT ", " OUT, OPT("RMSprop", BASE "'rho': 0.8, 'momentum': "
                                "0.5, 'epsilon': 1e-07, 'centered': true")),
         HC_OPT_RMSPROP, "rmsprop (learning_rate 0.00200000009, momentum 0.5, "
         "rho 0.800000012, epsilon 1.00000001e-07, centered true)"},
        {SEQ(FLAT ", " OUT, OPT("Adagrad", BASE "'initial_accumulator_value':"
                                " 0.25, 'epsilon': 1e-07")),
         HC_OPT_ADAGRAD, "adagrad (learning_rate 0.00200000009, epsilon "
         "1.00000001e-07, initial_accumulator_value 0.25)"},
        {SEQ(FLAT ", " OUT, OPT("AdamW", "'name': 'adamw', 'learning_rate': "
                                "0.001, 'weight_decay': 0.004, 'beta_1': 0.9, "
                                "'beta_2': 0.999, 'epsilon': 1e-07, "
                                "'amsgrad': true, 'clipnorm': null")),
         HC_OPT_ADAMW, "adamw (learning_rate 0.00100000005, beta_1 "
         "0.899999976, beta_2 0.999000013, epsilon 1.00000001e-07, "
         "weight_decay 0.00400000019, amsgrad true)"},
        {SEQ(FLAT ", " OUT, OPT("Nadam", BASE "'beta_1': 0.9, 'beta_2': "
                                "0.999, 'epsilon': 1e-07")), HC_OPT_NADAM,
         "nadam (learning_rate 0.00200000009, beta_1 0.899999976, beta_2 "
         "0.999000013, epsilon 1.00000001e-07)"},
        {SEQ(FLAT ", " OUT, OPT("Adamax", BASE "'beta_1': 0.9, 'beta_2': "
                                "0.999, 'epsilon': 1e-07")), HC_OPT_ADAMAX,
         "adamax (learning_rate 0.00200000009"},
        {SEQ(FLAT ", " OUT, OPT("Ftrl", BASE "'learning_rate_power': -0.5, "
                                "'initial_accumulator_value': 0.1, "
                                "'l1_regularization_strength': 0.01, "
                                "'l2_regularization_strength': 0.0, "
                                "'l2_shrinkage_regularization_strength': 0.0, "
                                "'beta': 0.0")), HC_OPT_FTRL,
         "ftrl (learning_rate 0.00200000009, initial_accumulator_value "
         "0.100000001, learning_rate_power -0.5, l1_regularization_strength "
         "0.00999999978, l2_regularization_strength 0, "
         "l2_shrinkage_regularization_strength 0, beta 0)"},
        {SEQ(FLAT ", " OUT, OPT("SGD", BASE "'momentum': 0.0, 'nesterov': "
                                "false")), HC_OPT_SGD,
         "sgd (learning_rate 0.00200000009)"},
        {SEQ(FLAT ", " OUT, OPT("Adam", "'weight_decay': 0.01, 'clipvalue': "
                                "0.5")), HC_OPT_ADAM,
         "adam (learning_rate 0.00100000005, beta_1 0.899999976, beta_2 "
         "0.999000013, epsilon 1.00000001e-07, weight_decay 0.00999999978, "
         "clipvalue 0.5, amsgrad false)"},
        {SEQ(FLAT ", " OUT, OPT("Adam", "'learning_rate': {'module': "
                                "'keras.optimizers.schedules', 'class_name': "
                                "'CosineDecay', 'config': "
                                "{'initial_learning_rate': 0.0, "
                                "'decay_steps': 1000, 'alpha': 0.0, 'name': "
                                "'CosineDecay', 'warmup_target': 0.001, "
                                "'warmup_steps': 100}, 'registered_name': "
                                "null}")), HC_OPT_ADAM,
         "adam (learning_rate CosineDecay(initial_learning_rate 0, "
         "decay_steps 1000, alpha 0, warmup_steps 100, warmup_target "
         "0.00100000005), beta_1"},
        /* refused, by name, with what the class takes */
        {SEQ(FLAT ", " OUT, OPT("Adagrad", "'rho': 0.9")), HC_OPT_SGD,
         "compile_config optimizer Adagrad: rho 0.9 is not supported; Adagrad "
         "takes learning_rate, epsilon, initial_accumulator_value, "
         "weight_decay"},
        {SEQ(FLAT ", " OUT, OPT("RMSprop", "'rho': 1.5")), HC_OPT_SGD,
         "rho 1.5 is out of range: it must be in [0, 1)"},
        {SEQ(FLAT ", " OUT, OPT("Ftrl", "'beta': 'big'")), HC_OPT_SGD,
         "\"beta\" must be a number, got \"big\""},
        {SEQ(FLAT ", " OUT, OPT("Lion", "")), HC_OPT_SGD,
         "optimizer Lion is not supported; hetps has SGD, RMSprop, Adagrad, "
         "Adam, AdamW, Nadam, Adamax and Ftrl"},
        {SEQ(FLAT ", " OUT, OPT("Nadam", "'use_ema': true")), HC_OPT_SGD,
         "Nadam use_ema true is not supported"},
        {SEQ(FLAT ", " OUT, OPT("Nadam", BASE "'clipnorm': 0.5")), HC_OPT_NADAM,
         "nadam (learning_rate 0.00200000009, beta_1 0.899999976, beta_2 "
         "0.999000013, epsilon 1.00000001e-07, clipnorm 0.5)"},
        {SEQ(FLAT ", " OUT, OPT("Nadam", "'clipvalue': -1")), HC_OPT_SGD,
         "clipvalue -1 is out of range: it must be in [0, 1e+06]"},
    };
    char buf[4096], d[HC_OPTIM_DESCRIBE_MAX];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rv, refused = cases[i].type == HC_OPT_SGD &&
                          strncmp(cases[i].describe, "sgd", 3) != 0;

        dq(cases[i].json, buf, sizeof buf);
        rv = hc_model_parse(buf, strlen(buf), "k.json", ma);
        if (refused) {
            CU_ASSERT_EQUAL(rv, HC_ERR_CONFIG);
            if (rv != HC_ERR_CONFIG || !strstr(hc_err_msg(),
                                               cases[i].describe))
                printf("\n  case %zu: rv %d \"%s\", wanted \"%s\"\n", i, rv,
                       rv ? hc_err_msg() : "", cases[i].describe);
            CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), cases[i].describe));
            continue;
        }
        CU_ASSERT_EQUAL(rv, HC_OK);
        if (rv != HC_OK) {
            printf("\n  case %zu: %s\n", i, hc_err_msg());
            continue;
        }
        CU_ASSERT_EQUAL(ma->optim.type, cases[i].type);
        hc_optim_describe(&ma->optim, d, sizeof d);
        if (strncmp(d, cases[i].describe, strlen(cases[i].describe)))
            printf("\n  case %zu: \"%s\"\n", i, d);
        CU_ASSERT(strncmp(d, cases[i].describe,
                          strlen(cases[i].describe)) == 0);
        /* what hetps writes for Keras reads back as the same settings */
        {
            char *json = NULL;

            CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
            rv = hc_model_parse(json, strlen(json), "written", mb);
            CU_ASSERT_EQUAL(rv, HC_OK);
            if (rv != HC_OK)
                printf("\n  case %zu written: %s\n", i, hc_err_msg());
            else
                CU_ASSERT(hc_optim_equal(&ma->optim, &mb->optim));
            free(json);
        }
    }
#undef BASE
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
    CU_ASSERT_EQUAL(ma->n_metrics, 1);
    CU_ASSERT_EQUAL(ma->metrics[0].kind, HC_EM_SPARSE_CATEGORICAL_ACCURACY);
    CU_ASSERT_STRING_EQUAL(ma->metrics[0].name,
                           "sparse_categorical_accuracy");
    /* Keras 2: the input from the first layer's batch_input_shape. */
    dq("{'class_name': 'Sequential', 'config': {'layers': [{'class_name': "
       "'Dense', 'config': {'name': 'dense', 'units': 3, 'activation': "
       "'softmax', 'batch_input_shape': [null, 5]}}]}, 'keras_version': "
       "'2.15.0', 'backend': 'tensorflow'}", buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(ma->input.rank, 1);
    CU_ASSERT_EQUAL(ma->input.dims[0], 5);
}

/* Initializers as Keras 3 and tf.keras 2 write them; the first seed is
 * the model's; written back out as Keras reads them, the same model. */
static void test_initializers(void)
{
    char buf[4096], *json = NULL;
    uint64_t sig;

    dq(SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'd', "
           "'units': 8, 'kernel_initializer': {'module': "
           "'keras.initializers', 'class_name': 'HeNormal', 'config': "
           "{'seed': 11}, 'registered_name': null}, 'bias_initializer': "
           "{'module': 'keras.initializers', 'class_name': 'Constant', "
           "'config': {'value': 0.5}, 'registered_name': null}}}, "
           "{'class_name': 'Dense', 'config': {'name': 'dense', 'units': 10, "
           "'activation': 'softmax', 'kernel_initializer': {'class_name': "
           "'VarianceScaling', 'config': {'scale': 2.0, 'mode': 'fan_out', "
           "'distribution': 'uniform', 'seed': null}}, 'bias_initializer': "
           "'ones'}}", ""), buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(ma->seed, 11);
    CU_ASSERT_EQUAL(ma->vars[0].init, HC_INIT_VARIANCE_SCALING);
    CU_ASSERT(ma->vars[0].init_par.a == 2 &&
              ma->vars[0].init_par.mode == HC_FAN_IN &&
              ma->vars[0].init_par.dist == HC_DIST_TRUNCATED);
    CU_ASSERT(ma->vars[1].init == HC_INIT_CONSTANT &&
              ma->vars[1].init_par.a == 0.5f);
    CU_ASSERT(ma->vars[2].init_par.mode == HC_FAN_OUT &&
              ma->vars[2].init_par.dist == HC_DIST_UNIFORM);
    CU_ASSERT(ma->vars[3].init == HC_INIT_CONSTANT &&
              ma->vars[3].init_par.a == 1);
    sig = ma->signature;
    CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"class_name\":\"HeNormal\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"class_name\":\"Ones\""));
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "k2", mb),
                          HC_OK);
    CU_ASSERT_EQUAL(mb->signature, sig);
    free(json);
    /* tf.keras 2: no module, {"seed": null}. */
    dq("{'class_name': 'Sequential', 'config': {'layers': [{'class_name': "
       "'Dense', 'config': {'name': 'dense', 'units': 3, 'activation': "
       "'softmax', 'batch_input_shape': [null, 5], 'kernel_initializer': "
       "{'class_name': 'LecunUniform', 'config': {'seed': null}}, "
       "'bias_initializer': {'class_name': 'Zeros', 'config': {}}}}]}, "
       "'keras_version': '2.15.0', 'backend': 'tensorflow'}", buf,
       sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT(ma->vars[0].init == HC_INIT_VARIANCE_SCALING &&
              ma->vars[0].init_par.dist == HC_DIST_UNIFORM);
    CU_ASSERT_EQUAL(ma->vars[1].init, HC_INIT_ZEROS);
}

/* ReLU (MobileNetV2's ReLU(6.0)) and LeakyReLU of Keras 3, LeakyReLU's
 * alpha of tf.keras 2; written back out, the same model. */
static void test_relu_layers(void)
{
    char buf[4096], *json = NULL;

    dq(SEQ(FLAT ", {'module': 'keras.layers', 'class_name': 'Dense', "
           "'config': {'name': 'd', 'units': 8}}, {'module': "
           "'keras.layers', 'class_name': 'ReLU', 'config': {'name': 're_lu', "
           "'trainable': true, 'dtype': 'float32', 'max_value': 6.0, "
           "'negative_slope': 0.0, 'threshold': 0.0}, 'registered_name': "
           "null}, {'module': 'keras.layers', 'class_name': 'LeakyReLU', "
           "'config': {'name': 'leaky_re_lu', 'negative_slope': 0.2}}, "
           "{'class_name': 'ReLU', 'config': {'name': 'r2', 'max_value': "
           "null, 'negative_slope': 0.1, 'threshold': -0.5}}, " OUT, ""),
       buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(ma->layers[2].type, HC_LAYER_RELU);
    CU_ASSERT(ma->layers[2].max_value == 6 &&
              ma->layers[2].negative_slope == 0 &&
              ma->layers[2].threshold == 0);
    CU_ASSERT_EQUAL(ma->layers[3].type, HC_LAYER_LEAKY_RELU);
    CU_ASSERT(ma->layers[3].negative_slope == 0.2f);
    CU_ASSERT(ma->layers[4].max_value < 0 &&
              ma->layers[4].negative_slope == 0.1f &&
              ma->layers[4].threshold == -0.5f);
    CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"class_name\":\"LeakyReLU\""));
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "k2", mb),
                          HC_OK);
    CU_ASSERT_EQUAL(mb->signature, ma->signature);
    free(json);
    dq("{'class_name': 'Sequential', 'config': {'layers': [{'class_name': "
       "'Dense', 'config': {'name': 'dense', 'units': 3, "
       "'batch_input_shape': [null, 5]}}, {'class_name': 'LeakyReLU', "
       "'config': {'name': 'leaky_re_lu', 'alpha': 0.1}}, {'class_name': "
       "'Dense', 'config': {'name': 'dense_1', 'units': 3, 'activation': "
       "'softmax'}}]}, 'keras_version': '2.15.0', 'backend': 'tensorflow'}",
       buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT(ma->layers[1].type == HC_LAYER_LEAKY_RELU &&
              ma->layers[1].negative_slope == 0.1f);
    dq(SEQ(FLAT ", {'class_name': 'ReLU', 'config': {'name': 'r', "
           "'max_value': -1}}, " OUT, ""), buf, sizeof buf);
    CU_ASSERT_EQUAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "layers[1] (relu \"r\"): "
                                  "\"max_value\" must be in [0, "));
}

/* Regularizers as Keras 3 and tf.keras 2 write them, with Keras 3's
 * defaults; written back out, the same model; on activity, refused. */
static void test_regularizers(void)
{
    char buf[4096], *json = NULL;

    dq(SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'd', "
           "'units': 8, 'kernel_regularizer': {'module': "
           "'keras.regularizers', 'class_name': 'L2', 'config': {'l2': "
           "0.0001}, 'registered_name': null}, 'bias_regularizer': "
           "{'module': 'keras.regularizers', 'class_name': 'L1', 'config': "
           "{}, 'registered_name': null}}}, {'class_name': 'Dense', "
           "'config': {'name': 'dense', 'units': 10, 'activation': "
           "'softmax', 'kernel_regularizer': {'class_name': 'L1L2', "
           "'config': {'l1': 0.001, 'l2': 0.002}}, 'bias_regularizer': "
           "'l2'}}", ""), buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT(ma->vars[0].reg.l1 == 0 && ma->vars[0].reg.l2 == 0.0001f);
    CU_ASSERT(ma->vars[1].reg.l1 == 0.01f && ma->vars[1].reg.l2 == 0);
    CU_ASSERT(ma->vars[2].reg.l1 == 0.001f && ma->vars[2].reg.l2 == 0.002f);
    CU_ASSERT(ma->vars[3].reg.l1 == 0 && ma->vars[3].reg.l2 == 0.01f);
    CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"class_name\":\"L1L2\""));
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "k2", mb),
                          HC_OK);
    CU_ASSERT_EQUAL(mb->signature, ma->signature);
    free(json);
    /* tf.keras 2: {"l2": ...} with no module. */
    dq("{'class_name': 'Sequential', 'config': {'layers': [{'class_name': "
       "'Dense', 'config': {'name': 'dense', 'units': 3, 'activation': "
       "'softmax', 'batch_input_shape': [null, 5], 'kernel_regularizer': "
       "{'class_name': 'L2', 'config': {'l2': 0.0005}}}}]}, "
       "'keras_version': '2.15.0', 'backend': 'tensorflow'}", buf,
       sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT(ma->vars[0].reg.l2 == 0.0005f);
    dq(SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
           "'units': 10, 'activation': 'softmax', 'kernel_regularizer': "
           "{'module': 'keras.regularizers', 'class_name': "
           "'OrthogonalRegularizer', 'config': {'factor': 0.01}}}}", ""),
       buf, sizeof buf);
    CU_ASSERT_EQUAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "layers[2] Dense \"dense\": "
                                  "Dense kernel_regularizer "
                                  "OrthogonalRegularizer is not supported; "
                                  "hetps has L1, L2, L1L2"));
    dq(SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
           "'units': 10, 'activation': 'softmax', 'activity_regularizer': "
           "{'class_name': 'L2', 'config': {'l2': 0.01}}}}", ""), buf,
       sizeof buf);
    CU_ASSERT_EQUAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "layers[2] Dense \"dense\": "
                                  "Dense activity_regularizer L2 is not "
                                  "supported; hetps has none (it takes L1, L2 "
                                  "and L1L2 as kernel_regularizer and "
                                  "bias_regularizer)"));
    dq(SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'dense', "
           "'units': 10, 'activation': 'softmax', 'kernel_regularizer': "
           "{'class_name': 'L2', 'config': {'l2': -1}}}}", ""), buf,
       sizeof buf);
    CU_ASSERT_EQUAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "kernel_regularizer (L2): "
                                  "\"l2\" must be in [0, "));
}

/* Losses as Keras 3 and tf.keras 2 serialise them; written back out as
 * Keras reads them, the same model. */
static void test_losses(void)
{
    static const struct {
        const char *out_act, *loss;     /* quoted ' */
        enum hc_loss want;
        int logits;
        float smooth, delta;
    } t[] = {
        {"softmax", "'categorical_crossentropy'", HC_LOSS_CCE, 0, 0, 1},
        {"linear", "{'module': 'keras.losses', 'class_name': "
         "'CategoricalCrossentropy', 'config': {'name': "
         "'categorical_crossentropy', 'reduction': 'sum_over_batch_size', "
         "'from_logits': true, 'label_smoothing': 0.1, 'axis': -1}, "
         "'registered_name': null}", HC_LOSS_CCE, 1, 0.1f, 1},
        {"sigmoid", "{'class_name': 'BinaryCrossentropy', 'config': "
         "{'reduction': 'auto', 'name': 'binary_crossentropy', "
         "'from_logits': false, 'label_smoothing': 0.05, 'axis': -1}}",
         HC_LOSS_BCE, 0, 0.05f, 1},
        {"linear", "{'module': 'keras.losses', 'class_name': 'Huber', "
         "'config': {'name': 'huber_loss', 'reduction': "
         "'sum_over_batch_size', 'delta': 0.5}, 'registered_name': null}",
         HC_LOSS_HUBER, 0, 0, 0.5f},
        {"linear", "'mae'", HC_LOSS_MAE, 0, 0, 1},
        {"linear", "{'module': 'keras.losses', 'class_name': "
         "'SparseCategoricalCrossentropy', 'config': {'name': 'scce', "
         "'reduction': 'sum_over_batch_size', 'from_logits': true, "
         "'ignore_class': null}, 'registered_name': null}",
         HC_LOSS_SPARSE_CCE, 1, 0, 1},
    };
    char q[2048], buf[4096], *json = NULL;

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        int rv;

        snprintf(q, sizeof q, SEQ(FLAT ", {'class_name': 'Dense', 'config': "
                                  "{'name': 'dense', 'units': 10, "
                                  "'activation': '%s'}}",
                                  ", 'compile_config': {'loss': %s}"),
                 t[i].out_act, t[i].loss);
        dq(q, buf, sizeof buf);
        rv = hc_model_parse(buf, strlen(buf), "k", ma);
        if (rv)
            printf("\n  case %zu: %s\n", i, hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        CU_ASSERT_EQUAL(ma->loss, t[i].want);
        CU_ASSERT_EQUAL(ma->loss_par.from_logits, t[i].logits);
        CU_ASSERT_EQUAL(ma->loss_par.label_smoothing, t[i].smooth);
        CU_ASSERT_EQUAL(ma->loss_par.delta, t[i].delta);
        CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
        rv = hc_model_parse(json, strlen(json), "k2", mb);
        if (rv)
            printf("\n  case %zu written: %s\n", i, hc_err_msg());
        CU_ASSERT_EQUAL(rv, HC_OK);
        CU_ASSERT_EQUAL(mb->signature, ma->signature);
        free(json);
    }
}

/* Keras's activations by their names in both versions; Keras 2's
 * hard_sigmoid is another function and is refused by name. */
static void test_activations(void)
{
    char buf[4096];

    dq(SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'd', "
           "'units': 8, 'activation': 'silu'}}, {'class_name': 'Dense', "
           "'config': {'name': 'd1', 'units': 8, 'activation': 'gelu'}}, "
           "{'class_name': 'Activation', 'config': {'name': 'a', "
           "'activation': 'hard_sigmoid'}}, {'class_name': 'Dense', "
           "'config': {'name': 'd2', 'units': 8, 'activation': 'relu6'}}, "
           "{'class_name': 'Dense', 'config': {'name': 'd3', 'units': 8, "
           "'activation': 'elu'}}, {'class_name': 'Activation', 'config': "
           "{'name': 'a1', 'activation': 'softplus'}}, " OUT, ""),
       buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(ma->layers[1].act, HC_ACT_SWISH);
    CU_ASSERT_EQUAL(ma->layers[2].act, HC_ACT_GELU);
    CU_ASSERT_EQUAL(ma->layers[3].act, HC_ACT_HARD_SIGMOID);
    CU_ASSERT_EQUAL(ma->layers[4].act, HC_ACT_RELU6);
    CU_ASSERT_EQUAL(ma->layers[5].act, HC_ACT_ELU);
    CU_ASSERT_EQUAL(ma->layers[6].act, HC_ACT_SOFTPLUS);
    dq("{'class_name': 'Sequential', 'config': {'layers': [{'class_name': "
       "'Dense', 'config': {'name': 'dense', 'units': 3, 'activation': "
       "'hard_sigmoid', 'batch_input_shape': [null, 5]}}]}, "
       "'keras_version': '2.15.0', 'backend': 'tensorflow'}", buf,
       sizeof buf);
    CU_ASSERT_EQUAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "layers[0] Dense \"dense\": "
                                  "Dense activation \"hard_sigmoid\" of "
                                  "Keras 2"));
    dq(SEQ(FLAT ", {'class_name': 'Dense', 'config': {'name': 'd', "
           "'units': 8, 'activation': 'selu'}}, " OUT, ""), buf, sizeof buf);
    CU_ASSERT_EQUAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "Dense \"d\": Dense "
                                  "activation \"selu\" is not supported; "
                                  "hetps has linear, relu, sigmoid"));
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

/* compile_config's metrics, as strings and Keras 3 objects, are read and
 * written back so that reading the export gives the same metrics. */
static void test_metrics_round_trip(void)
{
    char buf[4096], *json = NULL;

    dq(SEQ(FLAT ", " OUT, ", 'compile_config': {'metrics': [['accuracy', "
           "{'module': 'keras.metrics', 'class_name': 'AUC', 'config': "
           "{'name': 'auc', 'dtype': 'float32', 'num_thresholds': 200, "
           "'curve': 'ROC'}, 'registered_name': null}, {'class_name': "
           "'SparseTopKCategoricalAccuracy', 'config': {'name': 'top3', "
           "'k': 3}}, 'binary_accuracy']]}"), buf, sizeof buf);
    if (hc_model_parse(buf, strlen(buf), "k", ma) != HC_OK)
        printf("\n  %s\n", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(ma->n_metrics, 4);
    CU_ASSERT_STRING_EQUAL(ma->metrics[1].name, "auc");
    CU_ASSERT_EQUAL(ma->metrics[2].k, 3);
    CU_ASSERT_EQUAL(ma->metrics[3].kind, HC_EM_BINARY_ACCURACY);
    CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
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
    struct hc_model_compile rms = {.optimizer = "lion"};
    struct hc_model_compile cce = {
        .loss = "{\"type\": \"categorical_crossentropy\", "
                "\"label_smoothing\": 0.1}"};
    struct hc_model_compile badloss = {.loss = "{\"type\": "};

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
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "\"lion\""));
    CU_ASSERT_EQUAL_FATAL(hc_model_load_compiled(K "fashion_cnn.keras2.json",
                                                 NULL, ma), HC_OK);
    CU_ASSERT_EQUAL(ma->optim.type, HC_OPT_ADAM);
    CU_ASSERT_EQUAL_FATAL(hc_model_load_compiled(K "fashion_cnn.keras3.json",
                                                 &cce, ma), HC_OK);
    CU_ASSERT(ma->loss == HC_LOSS_CCE &&
              ma->loss_par.label_smoothing == 0.1f);
    CU_ASSERT_EQUAL(hc_model_load_compiled(K "fashion_cnn.keras2.json",
                                           &badloss, ma), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "--loss: '{\"type\": ' is "
                                  "neither a name"));
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

    CU_ASSERT_EQUAL_FATAL(hc_keras_write_weights(h5, ma, p, NULL), HC_OK);
    memset(q, 0, ma->n_params * sizeof *q);
    CU_ASSERT_EQUAL(hc_keras_read_weights(h5, ma, q), HC_OK);
    CU_ASSERT(memcmp(p, q, ma->n_params * sizeof *p) == 0);
    CU_ASSERT_EQUAL(hc_keras_is_archive(h5), 0);

    /* An archive: the model from its config.json, the same weights. */
    CU_ASSERT_EQUAL_FATAL(hc_keras_write_archive(ar, ma, p, NULL), HC_OK);
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
    CU_ASSERT_EQUAL(hc_keras_write_weights(cut, ma, p, NULL), HC_OK);
    CU_ASSERT_EQUAL(hc_model_load(cut, mb), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "is an HDF5 file"));
    free(p);
    free(q);
    hp_rmtree(dir);
}

/* A model's tables as Keras's files hold them (hc_keras_dense_tables):
 * dense (input_dim, dim), counted in n_params, written and read back at
 * layers/embedding/vars/0; a table over the limit refused naming it, its
 * input_dim and the limit. */
static void test_dense_tables(void)
{
    static const char *const fmt =
        "{\"name\": \"t\", \"inputs\": [{\"name\": \"categorical\", "
        "\"shape\": [3], \"dtype\": \"int64\"}], \"layers\": ["
        "{\"type\": \"embedding\", \"input_dim\": %s, \"output_dim\": 4},"
        "{\"type\": \"flatten\"}, {\"type\": \"dense\", \"units\": 1, "
        "\"activation\": \"sigmoid\"}], \"loss\": \"binary_crossentropy\", "
        "\"optimizer\": \"adagrad\"}";
    struct hc_model *md = calloc(1, sizeof *md);
    char buf[1024], dir[256], h5[320], path[64];
    float *p = NULL, *q = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(md);
    snprintf(buf, sizeof buf, fmt, "50");
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(ma->vars[0].size, 0);
    CU_ASSERT_EQUAL_FATAL(hc_keras_dense_tables(ma, md), HC_OK);
    CU_ASSERT_EQUAL(md->vars[0].table_rows, 0);
    CU_ASSERT_EQUAL(md->vars[0].shape[0], 50);
    CU_ASSERT_EQUAL(md->vars[0].size, 200);
    CU_ASSERT_EQUAL(md->n_params, ma->n_params + 200);
    CU_ASSERT_EQUAL(hc_model_var_offset(md, 1), 200);
    CU_ASSERT_EQUAL(hc_keras_var_path(md, 0, path, sizeof path), HC_OK);
    CU_ASSERT_STRING_EQUAL(path, "layers/embedding/vars/0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(hp_tmpdir(dir, sizeof dir));
    snprintf(h5, sizeof h5, "%s/t.weights.h5", dir);
    p = malloc(md->n_params * sizeof *p);
    q = calloc(md->n_params, sizeof *q);
    CU_ASSERT_FATAL(p && q);
    for (size_t i = 0; i < md->n_params; i++)
        p[i] = (float)i * 0.25f - 3;
    CU_ASSERT_EQUAL(hc_keras_write_weights(h5, md, p, NULL), HC_OK);
    CU_ASSERT_EQUAL(hc_keras_read_weights(h5, md, q), HC_OK);
    CU_ASSERT(memcmp(p, q, md->n_params * sizeof *p) == 0);
    /* 2^26 rows of 4 floats is 1 GiB, the limit; one more row is over. */
    snprintf(buf, sizeof buf, fmt, "67108864");
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(hc_keras_dense_tables(ma, md), HC_OK);
    snprintf(buf, sizeof buf, fmt, "67108865");
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "k", ma), HC_OK);
    CU_ASSERT_EQUAL(hc_keras_dense_tables(ma, md), HC_ERR_UNSUPPORTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "table embedding/embeddings "
                                  "has input_dim 67108865"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "limit of 1073741824 bytes"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(),
                                  "embedding/embeddings.ids.npy"));
    free(p);
    free(q);
    free(md);
    hp_rmtree(dir);
}

/* The optimizer's state (keras.h) written with the weights and read back:
 * each optimizer's count of Keras variables, slots, iteration and Nadam's
 * u_product the same; a file without it, or read for another optimizer,
 * refused. */
static void test_optim_state(void)
{
    static const struct {
        const char *json;
        int n_slots, count;     /* fashion_cnn: 4 variables */
    } cases[] = {
        {"{\"type\": \"adam\", \"amsgrad\": true}", 3, 2 + 3 * 4},
        {"{\"type\": \"rmsprop\", \"momentum\": 0.5, \"centered\": true}",
         3, 2 + 3 * 4},
        {"{\"type\": \"nadam\", \"learning_rate\": {\"class_name\": "
         "\"ExponentialDecay\", \"config\": {\"initial_learning_rate\": "
         "0.01, \"decay_steps\": 10, \"decay_rate\": 0.9}}}", 2, 2 + 2 * 4},
        {"{\"type\": \"ftrl\"}", 2, 2 + 2 * 4},
        {"{\"type\": \"sgd\"}", 0, 2},
    };
    char dir[256], ar[320], h5[320];
    float *p, *all, *back;

    CU_ASSERT_PTR_NOT_NULL_FATAL(hp_tmpdir(dir, sizeof dir));
    snprintf(ar, sizeof ar, "%s/o.keras", dir);
    snprintf(h5, sizeof h5, "%s/o.weights.h5", dir);
    load_or_fail("deploy/models/fashion_cnn.json", ma);
    p = malloc(ma->n_params * sizeof *p);
    all = malloc(3 * ma->n_params * sizeof *all);
    back = malloc(3 * ma->n_params * sizeof *back);
    CU_ASSERT_FATAL(p && all && back);
    fill(ma, p);
    for (size_t i = 0; i < 3 * ma->n_params; i++)
        all[i] = (float)(i % 7919) * 0.5f - 17.0f;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct hc_keras_optim o = {.iterations = 1234 + c, .u_product = 0.25f,
                                   .n_slots = cases[c].n_slots};
        struct hc_keras_optim r = {.n_slots = cases[c].n_slots};

        CU_ASSERT_EQUAL_FATAL(hc_model_optim_from_json(cases[c].json,
                              strlen(cases[c].json), "test", &ma->optim),
                              HC_OK);
        CU_ASSERT_EQUAL(hc_keras_optim_count(ma, o.n_slots), cases[c].count);
        for (int k = 0; k < o.n_slots; k++) {
            o.slots[k] = all + (size_t)k * ma->n_params;
            r.slots[k] = back + (size_t)k * ma->n_params;
        }
        memset(back, 0, 3 * ma->n_params * sizeof *back);
        CU_ASSERT_EQUAL_FATAL(hc_keras_write_archive(ar, ma, p, &o), HC_OK);
        CU_ASSERT_EQUAL(hc_keras_read_optim(ar, ma, &r), HC_OK);
        CU_ASSERT_EQUAL(r.iterations, o.iterations);
        CU_ASSERT(memcmp(all, back, (size_t)o.n_slots * ma->n_params *
                         sizeof *all) == 0);
        if (ma->optim.type == HC_OPT_NADAM)
            CU_ASSERT_EQUAL(r.u_product, 0.25f);
        /* the weights beside it are as before */
        CU_ASSERT_EQUAL(hc_keras_read_weights(ar, ma, back), HC_OK);
        CU_ASSERT(memcmp(p, back, ma->n_params * sizeof *p) == 0);
        /* read for an optimizer with another slot count */
        r.n_slots = o.n_slots ? o.n_slots - 1 : 1;
        r.slots[0] = back;
        CU_ASSERT_EQUAL(hc_keras_read_optim(ar, ma, &r), HC_ERR_MISMATCH);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "optimizer/vars holds"));
    }
    /* a weights file too; and one written without the optimizer */
    {
        struct hc_keras_optim o = {.iterations = 7, .n_slots = 0};
        struct hc_keras_optim r = {.n_slots = 0};

        CU_ASSERT_EQUAL(hc_keras_write_weights(h5, ma, p, &o), HC_OK);
        CU_ASSERT_EQUAL(hc_keras_read_optim(h5, ma, &r), HC_OK);
        CU_ASSERT_EQUAL(r.iterations, 7);
        CU_ASSERT_EQUAL(hc_keras_write_weights(h5, ma, p, NULL), HC_OK);
        CU_ASSERT_EQUAL(hc_keras_read_optim(h5, ma, &r), HC_ERR_NOTFOUND);
    }
    free(p);
    free(all);
    free(back);
    hp_rmtree(dir);
}

/* Separable convolutions and layer norms: their variables at Keras's
 * paths in Keras's order (vars/0, 1, 2), and a .keras archive of each
 * block read back as the same model and values. */
static void test_new_layers_weights(void)
{
    static const char *const sep[] = {
        "layers/separable_conv2d/vars/0", "layers/separable_conv2d/vars/1",
        "layers/separable_conv2d/vars/2", "layers/separable_conv2d_1/vars/0",
        "layers/separable_conv2d_1/vars/1"};
    static const char *const files[] = {
        "tests/unit/keras/xception_block.keras3.json",
        "tests/unit/keras/convnext_block.keras2.json"};
    char dir[256], ar[320], path[96];
    float *p, *q;

    load_or_fail("tests/unit/keras/xception_block.json", ma);
    for (int v = 2; v < 7; v++) {
        CU_ASSERT_EQUAL(hc_keras_var_path(ma, v, path, sizeof path), HC_OK);
        CU_ASSERT_STRING_EQUAL(path, sep[v - 2]);
    }
    load_or_fail("tests/unit/keras/convnext_block.json", ma);
    CU_ASSERT_EQUAL(hc_keras_var_path(ma, 3, path, sizeof path), HC_OK);
    CU_ASSERT_STRING_EQUAL(path, "layers/layer_normalization/vars/1");
    CU_ASSERT_PTR_NOT_NULL_FATAL(hp_tmpdir(dir, sizeof dir));
    snprintf(ar, sizeof ar, "%s/m.keras", dir);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        load_or_fail(files[i], ma);
        p = malloc(ma->n_params * sizeof *p);
        q = calloc(ma->n_params, sizeof *q);
        CU_ASSERT_FATAL(p && q);
        fill(ma, p);
        CU_ASSERT_EQUAL_FATAL(hc_keras_write_archive(ar, ma, p, NULL), HC_OK);
        load_or_fail(ar, mb);
        expect_same(ma, mb);
        CU_ASSERT_EQUAL(hc_keras_read_weights(ar, mb, q), HC_OK);
        CU_ASSERT(memcmp(p, q, ma->n_params * sizeof *p) == 0);
        free(p);
        free(q);
    }
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
    CU_add_test(s, "metrics round trip", test_metrics_round_trip);
    CU_add_test(s, "activations", test_activations);
    CU_add_test(s, "initializers", test_initializers);
    CU_add_test(s, "losses", test_losses);
    CU_add_test(s, "regularizers", test_regularizers);
    CU_add_test(s, "ReLU and LeakyReLU layers", test_relu_layers);
    CU_add_test(s, "pools, zero padding, reshape: read and written",
                test_pool_pad_reshape);
    CU_add_test(s, "--loss and --optimizer", test_compile_flags);
    CU_add_test(s, "compile_config optimizers", test_config_optimizers);
    CU_add_test(s, "weights paths", test_paths);
    CU_add_test(s, "separable and layer norm weights, archives",
                test_new_layers_weights);
    CU_add_test(s, "weights and archives written and read", test_write_read);
    CU_add_test(s, "the optimizer's state written and read", test_optim_state);
    CU_add_test(s, "tables written dense, up to the limit", test_dense_tables);
    CU_add_test(s, "bad archives", test_bad_archives);
}
