/*
 * test_graph.c — a model as a graph: hetps's own file naming each layer's
 * inputs, the fixtures of tests/unit/keras/ (a residual block with a
 * projection shortcut and Add, a DenseNet-style block of Concatenates, a
 * model of two inputs, a MobileNetV2-style block of DepthwiseConv2D,
 * ReLU(6.0) and Add) read from Keras 3's and tf.keras 2's Functional
 * JSON as the same models as hetps's files, a chain keeping the
 * signature it had before graphs, and every refusal's message.
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

#define G "tests/unit/keras/"

static struct hc_model *ma, *mb;

static const char *dq(const char *s, char *buf, size_t len)
{
    size_t i = 0;

    for (; s[i] && i + 1 < len; i++)
        buf[i] = s[i] == '\'' ? '"' : s[i];
    buf[i] = '\0';
    return buf;
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

/* The node layer `name` reads at k, by name. */
static const char *reads(const struct hc_model *m, const char *name, int k)
{
    for (int i = 0; i < m->n_layers; i++)
        if (!strcmp(m->layers[i].name, name))
            return k < m->layers[i].n_in
                       ? hc_model_node_name(m, m->layers[i].in_from[k])
                       : "";
    return "";
}

static void test_native(void)
{
    load_or_fail(G "resnet_block.json", ma);
    CU_ASSERT_EQUAL(ma->n_layers, 9);
    CU_ASSERT_EQUAL(ma->n_inputs, 1);
    CU_ASSERT_FALSE(hc_model_is_chain(ma));
    CU_ASSERT_STRING_EQUAL(reads(ma, "add", 0), "res_b");
    CU_ASSERT_STRING_EQUAL(reads(ma, "add", 1), "proj");
    CU_ASSERT_STRING_EQUAL(reads(ma, "proj", 0), "stem");
    CU_ASSERT_STRING_EQUAL(reads(ma, "stem", 0), "input_layer");
    CU_ASSERT_EQUAL(ma->n_vars, 10);
    CU_ASSERT_EQUAL(ma->layers[4].out.dims[2], 16);
    CU_ASSERT_EQUAL(ma->n_classes, 10);

    load_or_fail(G "dense_block.json", ma);
    CU_ASSERT_STRING_EQUAL(reads(ma, "cat2", 2), "c3");
    CU_ASSERT_EQUAL(ma->layers[4].n_in, 3);
    CU_ASSERT_EQUAL(ma->layers[4].out.dims[2], 12);     /* 4 + 4 + 4 */
    CU_ASSERT_EQUAL(ma->layers[2].out.dims[2], 8);

    load_or_fail(G "two_inputs.json", ma);
    CU_ASSERT_EQUAL(ma->n_inputs, 2);
    CU_ASSERT_STRING_EQUAL(ma->inputs[1].name, "meta");
    CU_ASSERT_EQUAL(ma->inputs[1].shape.dims[0], 8);
    CU_ASSERT_STRING_EQUAL(reads(ma, "meta_dense", 0), "meta");
    CU_ASSERT_EQUAL(ma->layers[3].out.dims[0], 32);

    /* Depthwise: Keras's variable names, shapes, order and fans. */
    load_or_fail(G "mobile_block.json", ma);
    CU_ASSERT_EQUAL(ma->layers[3].type, HC_LAYER_DEPTHWISE_CONV2D);
    CU_ASSERT_EQUAL(ma->layers[7].depth_multiplier, 2);
    CU_ASSERT_EQUAL(ma->layers[7].out.dims[0], 14);
    CU_ASSERT_EQUAL(ma->layers[7].out.dims[2], 16);     /* 8 · 2 */
    CU_ASSERT_STRING_EQUAL(ma->vars[4].name, "dw/depthwise_kernel");
    CU_ASSERT_EQUAL(ma->vars[4].shape[2], 16);
    CU_ASSERT_EQUAL(ma->vars[4].shape[3], 1);
    CU_ASSERT_EQUAL(ma->vars[4].fan_in, 9 * 16);        /* kh·kw·in */
    CU_ASSERT_EQUAL(ma->vars[4].fan_out, 9 * 1);        /* kh·kw·dm */
    CU_ASSERT_EQUAL(ma->vars[4].init, HC_INIT_VARIANCE_SCALING); /* He */
    CU_ASSERT_EQUAL(ma->vars[4].init_par.mode, HC_FAN_IN);
    CU_ASSERT(ma->vars[4].reg.l2 > 0.99e-4f && ma->vars[4].reg.l2 < 1.01e-4f);
    CU_ASSERT_STRING_EQUAL(ma->vars[5].name, "dw/bias");
    CU_ASSERT_EQUAL(ma->vars[5].size, 16);
    CU_ASSERT_STRING_EQUAL(ma->vars[8].name, "down/depthwise_kernel");
    CU_ASSERT_EQUAL(ma->vars[8].size, 3 * 3 * 8 * 2);
    CU_ASSERT_STRING_EQUAL(ma->vars[9].name, "dense/kernel");  /* no bias */

    /* Separable: depthwise, pointwise, bias in Keras's order, fans. */
    load_or_fail(G "xception_block.json", ma);
    CU_ASSERT_EQUAL(ma->layers[1].type, HC_LAYER_SEPARABLE_CONV2D);
    CU_ASSERT_EQUAL(ma->layers[1].var_first, 2);
    CU_ASSERT_EQUAL(ma->layers[1].n_var, 3);
    CU_ASSERT_STRING_EQUAL(ma->vars[2].name, "sep1/depthwise_kernel");
    CU_ASSERT_EQUAL(ma->vars[2].size, 3 * 3 * 8 * 1);
    CU_ASSERT_EQUAL(ma->vars[2].fan_in, 9 * 8);         /* kh·kw·in */
    CU_ASSERT_EQUAL(ma->vars[2].fan_out, 9 * 1);        /* kh·kw·dm */
    CU_ASSERT_EQUAL(ma->vars[2].init, HC_INIT_VARIANCE_SCALING); /* He */
    CU_ASSERT_STRING_EQUAL(ma->vars[3].name, "sep1/pointwise_kernel");
    CU_ASSERT_EQUAL(ma->vars[3].ndim, 4);
    CU_ASSERT_EQUAL(ma->vars[3].shape[0], 1);
    CU_ASSERT_EQUAL(ma->vars[3].shape[2], 8);
    CU_ASSERT_EQUAL(ma->vars[3].shape[3], 16);
    CU_ASSERT_EQUAL(ma->vars[3].fan_in, 8);
    CU_ASSERT_EQUAL(ma->vars[3].fan_out, 16);
    CU_ASSERT_EQUAL(ma->vars[3].init, HC_INIT_GLOROT_UNIFORM);
    CU_ASSERT(ma->vars[3].reg.l2 > 0.99e-4f && ma->vars[3].reg.l2 < 1.01e-4f);
    CU_ASSERT_EQUAL(ma->vars[2].reg.l2, 0);
    CU_ASSERT_STRING_EQUAL(ma->vars[4].name, "sep1/bias");
    CU_ASSERT_STRING_EQUAL(ma->vars[5].name, "sep2/depthwise_kernel");
    CU_ASSERT_EQUAL(ma->vars[5].shape[3], 2);
    CU_ASSERT_STRING_EQUAL(ma->vars[6].name, "sep2/pointwise_kernel");
    CU_ASSERT_EQUAL(ma->vars[6].shape[2], 32);          /* 16 · 2 */
    CU_ASSERT_EQUAL(ma->layers[2].n_var, 2);            /* no bias */
    CU_ASSERT_STRING_EQUAL(ma->vars[7].name, "shortcut/kernel");

    /* Layer norm: gamma (Ones) then beta, the last axis long. */
    load_or_fail(G "convnext_block.json", ma);
    CU_ASSERT_EQUAL(ma->layers[1].type, HC_LAYER_LAYER_NORMALIZATION);
    CU_ASSERT(ma->layers[1].epsilon > 0.99e-6f &&
              ma->layers[1].epsilon < 1.01e-6f);
    CU_ASSERT_STRING_EQUAL(ma->vars[2].name, "stem_ln/gamma");
    CU_ASSERT_EQUAL(ma->vars[2].size, 16);
    CU_ASSERT_EQUAL(ma->vars[2].init, HC_INIT_CONSTANT);
    CU_ASSERT_EQUAL(ma->vars[2].init_par.a, 1.0f);
    CU_ASSERT_STRING_EQUAL(ma->vars[3].name, "stem_ln/beta");
    CU_ASSERT_EQUAL(ma->vars[3].init, HC_INIT_ZEROS);
    CU_ASSERT_STRING_EQUAL(ma->vars[6].name, "ln/gamma");
    CU_ASSERT(ma->vars[6].reg.l2 > 0.99e-4f && ma->vars[6].reg.l2 < 1.01e-4f);
    CU_ASSERT_EQUAL(ma->layers[8].out.rank, 1);         /* head_ln, flat */
}

/* Layers listed out of order are put after what they read; the order of
 * the file stays where the graph allows. */
static void test_order(void)
{
    char buf[2048];

    dq("{'input_shape': [4], 'layers': ["
       "{'type': 'dense', 'name': 'a', 'units': 3},"
       "{'type': 'add', 'name': 's', 'inputs': ['b', 'c']},"
       "{'type': 'dense', 'name': 'b', 'units': 3, 'inputs': 'a'},"
       "{'type': 'dense', 'name': 'c', 'units': 3, 'inputs': 'a'},"
       "{'type': 'dense', 'name': 'out', 'units': 2, 'inputs': 's', "
       "'activation': 'softmax'}],"
       "'loss': 'sparse_categorical_crossentropy', 'optimizer': 'sgd'}",
       buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "o.json", ma),
                          HC_OK);
    CU_ASSERT_STRING_EQUAL(ma->layers[0].name, "a");
    CU_ASSERT_STRING_EQUAL(ma->layers[1].name, "b");
    CU_ASSERT_STRING_EQUAL(ma->layers[2].name, "c");
    CU_ASSERT_STRING_EQUAL(ma->layers[3].name, "s");
    CU_ASSERT_EQUAL(ma->layers[3].in_from[0], 1);
    CU_ASSERT_EQUAL(ma->layers[3].in_from[1], 2);
    /* Variables follow the graph's order. */
    CU_ASSERT_STRING_EQUAL(ma->vars[2].name, "b/kernel");
}

/* A chain written with explicit inputs is the chain: same signature,
 * variables and initial values as the file without them, and the
 * signatures of the shipped models are those of every earlier hetps. */
static void test_chain(void)
{
    char buf[2048];

    load_or_fail("deploy/models/fashion_cnn.json", ma);
    CU_ASSERT(hc_model_is_chain(ma));
    CU_ASSERT_EQUAL(ma->signature, 0x536bf929d76e8efdull);
    load_or_fail("deploy/models/fashion_mlp.json", ma);
    CU_ASSERT_EQUAL(ma->signature, 0x4883fb5f7001c39cull);
    load_or_fail("deploy/models/keras/fashion_cnn.keras3.json", ma);
    CU_ASSERT_EQUAL(ma->signature, 0x536bf929d76e8efdull);

    dq("{'input_shape': [4], 'layers': [{'type': 'dense', 'units': 3},"
       "{'type': 'dense', 'units': 2, 'activation': 'softmax'}],"
       "'loss': 'sparse_categorical_crossentropy', 'optimizer': 'sgd'}",
       buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "a", ma), HC_OK);
    dq("{'inputs': [{'name': 'input', 'shape': [4]}], 'layers': ["
       "{'type': 'dense', 'units': 3, 'inputs': ['input']},"
       "{'type': 'dense', 'units': 2, 'activation': 'softmax', "
       "'inputs': 'dense'}], 'output': 'dense_1',"
       "'loss': 'sparse_categorical_crossentropy', 'optimizer': 'sgd'}",
       buf, sizeof buf);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "b", mb), HC_OK);
    CU_ASSERT(hc_model_is_chain(mb));
    CU_ASSERT_EQUAL(ma->signature, mb->signature);
    CU_ASSERT_EQUAL(ma->n_vars, mb->n_vars);
}

/* Each Keras fixture is the same model as hetps's own file. */
static void test_keras_fixtures(void)
{
    static const char *const names[] = {
        "resnet_block", "dense_block", "two_inputs", "mobile_block",
        "xception_block", "convnext_block", "resnet_bn"};
    char p[256];

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        for (int v = 0; v < 2; v++) {
            float *pa, *pb;

            snprintf(p, sizeof p, G "%s.json", names[i]);
            load_or_fail(p, ma);
            snprintf(p, sizeof p, G "%s.keras%d.json", names[i],
                     v ? 3 : 2);
            load_or_fail(p, mb);
            CU_ASSERT_EQUAL(ma->signature, mb->signature);
            CU_ASSERT_EQUAL(ma->n_layers, mb->n_layers);
            CU_ASSERT_EQUAL(ma->n_inputs, mb->n_inputs);
            CU_ASSERT_EQUAL_FATAL(ma->n_params, mb->n_params);
            pa = malloc(ma->n_params * sizeof *pa);
            pb = malloc(mb->n_params * sizeof *pb);
            CU_ASSERT_FATAL(pa && pb);
            hc_model_init_params(ma, pa);
            hc_model_init_params(mb, pb);
            CU_ASSERT(memcmp(pa, pb, ma->n_params * sizeof *pa) == 0);
            free(pa);
            free(pb);
        }
    }
}

/* hetps's format: graphs it refuses, and what each message says. */
#define TAIL "'loss': 'sparse_categorical_crossentropy', 'optimizer': 'sgd'}"
#define OUT "{'type': 'dense', 'name': 'out', 'units': 2, " \
            "'activation': 'softmax'}"

static void test_refused(void)
{
    static const struct { const char *json, *want; } bad[] = {
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'depthwise_conv2d', 'kernel_size': 3, 'depth_multiplier': 0}, "
         "{'type': 'flatten'}, " OUT "], " TAIL,
         "layers[0] (depthwise_conv2d \"depthwise_conv2d\"): "
         "\"depth_multiplier\" must be from 1 to 65536, got 0"},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'depthwise_conv2d', 'kernel_size': 3, 'kernel_initializer': "
         "'he_normal'}, {'type': 'flatten'}, " OUT "], " TAIL,
         "unknown key \"kernel_initializer\"; allowed here: type, name, "
         "device, input_shape, inputs, kernel_size, strides, padding, "
         "depth_multiplier, activation, use_bias, depthwise_initializer, "
         "bias_initializer, depthwise_regularizer, bias_regularizer"},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'depthwise_conv2d', 'kernel_size': 3, 'dilation_rate': 2}, "
         "{'type': 'flatten'}, " OUT "], " TAIL,
         "unknown key \"dilation_rate\""},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'depthwise_conv2d', 'kernel_size': 7}, "
         "{'type': 'flatten'}, " OUT "], " TAIL,
         "kernel_size (7, 7) is larger than the input (6, 6, 2) with padding "
         "\"valid\""},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'depthwise_conv2d'}, {'type': 'flatten'}, " OUT "], " TAIL,
         "missing required key \"kernel_size\" (e.g. [3, 3])"},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'separable_conv2d', 'kernel_size': 3}, {'type': 'flatten'}, "
         OUT "], " TAIL, "layers[0] (separable_conv2d "
         "\"separable_conv2d\"): missing required key \"filters\""},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'separable_conv2d', 'filters': 4, 'kernel_size': 3, "
         "'kernel_regularizer': 'l2'}, {'type': 'flatten'}, " OUT "], " TAIL,
         "unknown key \"kernel_regularizer\"; allowed here: type, name, "
         "device, input_shape, inputs, filters, kernel_size, strides, "
         "padding, depth_multiplier, activation, use_bias, "
         "depthwise_initializer, bias_initializer, depthwise_regularizer, "
         "bias_regularizer, pointwise_initializer, pointwise_regularizer"},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'layer_normalization', 'axis': [1, 2]}, {'type': 'flatten'}, "
         OUT "], " TAIL, "layers[0] (layer_normalization "
         "\"layer_normalization\"): \"axis\" [1,2] is not supported; "
         "layer_normalization normalises over the last axis only"},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'layer_normalization', 'axis': 1}, {'type': 'flatten'}, "
         OUT "], " TAIL, "\"axis\" 1 is not supported for its input "
         "(6, 6, 2); layer_normalization normalises over the last axis only "
         "(-1, or 3)"},
        {"{'input_shape': [6, 6, 2], 'layers': [{'type': "
         "'layer_normalization', 'epsilon': 0}, {'type': 'flatten'}, "
         OUT "], " TAIL, "\"epsilon\" must be in (0, 1], got 0"},
        {"{'input_shape': [4], 'layers': [{'type': 'dense', 'units': 3},"
         "{'type': 'add', 'inputs': ['dense', 'nope']}, " OUT "], " TAIL,
         "layers[1] (add \"add\"): \"inputs\" names \"nope\", which is no "
         "layer or input of the model (those are: input, dense, add, out)"},
        {"{'input_shape': [4], 'layers': ["
         "{'type': 'dense', 'name': 'a', 'units': 3, 'inputs': 'b'},"
         "{'type': 'dense', 'name': 'b', 'units': 3, 'inputs': 'a'},"
         OUT "], " TAIL,
         "the layers \"a\", \"b\", \"out\" read each other in a cycle"},
        {"{'input_shape': [4], 'layers': [{'type': 'dense', 'units': 3, "
         "'inputs': 'dense'}, " OUT "], " TAIL, "the layer reads itself"},
        {"{'input_shape': [6, 6, 1], 'layers': ["
         "{'type': 'conv2d', 'name': 'a', 'filters': 4, 'kernel_size': 3},"
         "{'type': 'conv2d', 'name': 'b', 'filters': 4, 'kernel_size': 3, "
         "'padding': 'same', 'inputs': 'input'},"
         "{'type': 'add', 'inputs': ['a', 'b']}, {'type': 'flatten'}, "
         OUT "], " TAIL,
         "layers[2] (add \"add\"): add needs inputs of one shape, but \"a\" "
         "gives (4, 4, 4) and \"b\" gives (6, 6, 4)"},
        {"{'input_shape': [6, 6, 1], 'layers': ["
         "{'type': 'conv2d', 'name': 'a', 'filters': 4, 'kernel_size': 3},"
         "{'type': 'conv2d', 'name': 'b', 'filters': 4, 'kernel_size': 3, "
         "'padding': 'same', 'inputs': 'input'},"
         "{'type': 'concatenate', 'inputs': ['a', 'b']}, "
         "{'type': 'flatten'}, " OUT "], " TAIL,
         "concatenate along axis -1 needs inputs that agree on the other "
         "dimensions, but \"a\" gives (4, 4, 4) and \"b\" gives (6, 6, 4)"},
        {"{'input_shape': [4], 'layers': [{'type': 'dense', 'units': 3},"
         "{'type': 'add', 'inputs': ['dense']}, " OUT "], " TAIL,
         "add merges 2 or more inputs, got 1"},
        {"{'input_shape': [4], 'layers': [{'type': 'dense', 'units': 3},"
         "{'type': 'add'}, " OUT "], " TAIL,
         "a merge layer names the layers it reads"},
        {"{'input_shape': [4], 'layers': [{'type': 'dense', 'units': 3},"
         "{'type': 'dense', 'units': 3, 'inputs': ['input', 'dense']}, "
         OUT "], " TAIL, "dense reads one input, got 2"},
        {"{'input_shape': [4], 'layers': [{'type': 'dense', 'units': 3},"
         "{'type': 'dense', 'units': 3, 'inputs': 'input'}, "
         "{'type': 'dense', 'name': 'out', 'units': 2, 'inputs': 'dense', "
         "'activation': 'softmax'}], " TAIL,
         "layers[1] (dense \"dense_1\"): no layer reads this layer's output"},
        {"{'inputs': [{'name': 'x', 'shape': [4]}, {'name': 'y', "
         "'shape': [2]}], 'layers': [{'type': 'dense', 'units': 3}, "
         OUT "], " TAIL, "the model has 2 inputs; name the one this layer "
         "reads in \"inputs\""},
        {"{'inputs': [{'name': 'x', 'shape': [4]}], 'input_shape': [4], "
         "'layers': [" OUT "], " TAIL, "\"inputs\" and \"input_shape\" are "
         "both given"},
        {"{'inputs': [{'name': 'x', 'shape': [4]}], 'layers': ["
         "{'type': 'dense', 'name': 'x', 'units': 3}, " OUT "], " TAIL,
         "name \"x\" is already the model's input's"},
        {"{'input_shape': [4], 'output': 'nah', 'layers': [" OUT "], " TAIL,
         "\"output\" names \"nah\", which is no layer of the model"},
    };
    char buf[4096];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rv;

        dq(bad[i].json, buf, sizeof buf);
        rv = hc_model_parse(buf, strlen(buf), "g.json", ma);
        CU_ASSERT_EQUAL(rv, HC_ERR_CONFIG);
        if (rv != HC_ERR_CONFIG || !strstr(hc_err_msg(), bad[i].want))
            printf("\n  case %zu: rv %d, message \"%s\", wanted \"%s\"\n", i,
                   rv, rv ? hc_err_msg() : "", bad[i].want);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), bad[i].want));
    }
}

/* Keras's Functional files: what is refused, named. The fixtures are
 * edited in place to make each case. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *s = malloc(1 << 16);
    size_t n;

    CU_ASSERT_FATAL(f && s);
    n = fread(s, 1, (1 << 16) - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* s with the first `from` replaced by `to`, in a new string. */
static char *edit(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    size_t n = strlen(s) + strlen(to) + 1;
    char *r = malloc(n);

    CU_ASSERT_PTR_NOT_NULL_FATAL(at);
    snprintf(r, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return r;
}

static void test_keras_refused(void)
{
    static const struct { const char *file, *from, *to, *want; } bad[] = {
        /* x + y in Keras code: the op, not the layer */
        {"resnet_block.keras3.json",
         "{\"module\": \"keras.layers\", \"class_name\": \"Add\"",
         "{\"module\": \"keras.src.ops.numpy\", \"class_name\": \"Add\"",
         "layers[5] Add \"add\": Add from module keras.src.ops.numpy is an "
         "operation on tensors (Keras writes `x + y` this way), not a layer"},
        {"resnet_block.keras2.json", "{\"class_name\": \"Add\"",
         "{\"class_name\": \"TFOpLambda\"",
         "layers[5] TFOpLambda \"add\": TFOpLambda is a TensorFlow operation "
         "on tensors (tf.keras writes `x + y` this way), not a layer"},
        {"resnet_block.keras3.json", "\"keras_history\": [\"proj\", 0, 0]",
         "\"keras_history\": [\"projection\", 0, 0]",
         "\"inputs\" names \"projection\", which is no layer or input of "
         "the model"},
        {"resnet_block.keras2.json", "[\"proj\", 0, 0, {}]",
         "[\"projection\", 0, 0, {}]",
         "\"inputs\" names \"projection\", which is no layer or input"},
        {"resnet_block.keras2.json", "[\"stem\", 0, 0, {}]",
         "[\"dense\", 0, 0, {}]", "read each other in a cycle"},
        {"resnet_block.keras3.json", "\"keras_history\": [\"proj\", 0, 0]",
         "\"keras_history\": [\"proj\", 1, 0]",
         "reads tensor 0 of call 1 of \"proj\"; hetps runs each layer once"},
        {"resnet_block.keras3.json", "\"keras_history\": [\"proj\", 0, 0]",
         "\"keras_history\": [\"proj\", 0, 1e122]",
         "reads tensor 1e+122 of call 0 of \"proj\""},
        {"resnet_block.keras2.json",
         "\"name\": \"proj\", \"inbound_nodes\": [[[\"stem\", 0, 0, {}]]]",
         "\"name\": \"proj\", \"inbound_nodes\": [[[\"stem\", 0, 0, {}]], "
         "[[\"stem\", 0, 0, {}]]]", "is called 2 times (a shared layer)"},
        {"two_inputs.keras2.json", "\"output_layers\": [[\"dense\", 0, 0]]",
         "\"output_layers\": [[\"dense\", 0, 0], [\"cat\", 0, 0]]",
         "the model has 2 outputs; hetps trains a model of one output"},
        {"resnet_block.keras3.json",
         "\"kernel_size\": [1, 1], \"strides\": [1, 1], \"padding\": \"same\"",
         "\"kernel_size\": [3, 3], \"strides\": [1, 1], \"padding\": "
         "\"valid\"", "(add \"add\"): add needs inputs of one shape, but "
         "\"res_b\" gives (28, 28, 16) and \"proj\" gives (26, 26, 16)"},
        /* DepthwiseConv2D: what hetps does not compute, by name */
        {"mobile_block.keras3.json",
         "\"depth_multiplier\": 1, \"kernel_size\": [3, 3], \"strides\": [1, "
         "1], \"padding\": \"same\", \"data_format\": \"channels_last\", "
         "\"dilation_rate\": [1, 1]",
         "\"depth_multiplier\": 1, \"kernel_size\": [3, 3], \"strides\": [1, "
         "1], \"padding\": \"same\", \"data_format\": \"channels_last\", "
         "\"dilation_rate\": [2, 2]", "layers[4] DepthwiseConv2D \"dw\": "
         "DepthwiseConv2D dilation_rate (2, 2) is not supported; hetps "
         "computes (1, 1)"},
        {"mobile_block.keras2.json", "\"depthwise_constraint\": null",
         "\"depthwise_constraint\": {\"class_name\": \"NonNeg\", "
         "\"config\": {}}", "DepthwiseConv2D depthwise_constraint NonNeg is "
         "not supported; hetps has none"},
        /* SeparableConv2D and LayerNormalization, by name */
        {"xception_block.keras3.json",
         "\"padding\": \"same\", \"data_format\": \"channels_last\", "
         "\"dilation_rate\": [1, 1], \"depth_multiplier\": 2",
         "\"padding\": \"same\", \"data_format\": \"channels_last\", "
         "\"dilation_rate\": [2, 2], \"depth_multiplier\": 2",
         "layers[3] SeparableConv2D \"sep2\": SeparableConv2D "
         "dilation_rate (2, 2) is not supported; hetps computes (1, 1)"},
        {"xception_block.keras2.json", "\"pointwise_constraint\": null",
         "\"pointwise_constraint\": {\"class_name\": \"MaxNorm\", "
         "\"config\": {}}", "SeparableConv2D pointwise_constraint MaxNorm "
         "is not supported; hetps has none"},
        {"xception_block.keras3.json", "\"padding\": \"same\", "
         "\"data_format\": \"channels_last\", \"dilation_rate\": [1, 1], "
         "\"depth_multiplier\": 1",
         "\"padding\": \"same\", \"data_format\": \"channels_first\", "
         "\"dilation_rate\": [1, 1], \"depth_multiplier\": 1",
         "SeparableConv2D data_format \"channels_first\" is not supported"},
        {"convnext_block.keras3.json", "\"rms_scaling\": false",
         "\"rms_scaling\": true", "layers[2] LayerNormalization "
         "\"stem_ln\": LayerNormalization rms_scaling true is not "
         "supported; hetps computes rms_scaling false"},
        {"convnext_block.keras2.json", "\"axis\": [3]",
         "\"axis\": [1, 2, 3]", "(layer_normalization \"stem_ln\"): "
         "\"axis\" [1,2,3] is not supported; layer_normalization "
         "normalises over the last axis only: -1, [-1] or its number"},
        {"convnext_block.keras2.json", "\"axis\": [3]", "\"axis\": [2]",
         "(layer_normalization \"stem_ln\"): \"axis\" 2 is not supported "
         "for its input (7, 7, 16); layer_normalization normalises over the "
         "last axis only (-1, or 3)"},
        {"convnext_block.keras3.json", "\"gamma_constraint\": null",
         "\"gamma_constraint\": \"non_neg\"", "LayerNormalization "
         "gamma_constraint \"non_neg\" is not supported"},
        /* its kernel's arguments are depthwise_*: kernel_* is no key */
        {"mobile_block.keras3.json", "\"depthwise_regularizer\": {",
         "\"kernel_regularizer\": \"l2\", \"depthwise_regularizer\": {",
         "DepthwiseConv2D kernel_regularizer \"l2\" is not supported"},
    };
    char p[256];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *s, *e;
        int rv;

        snprintf(p, sizeof p, G "%s", bad[i].file);
        s = slurp(p);
        e = edit(s, bad[i].from, bad[i].to);
        rv = hc_model_parse(e, strlen(e), bad[i].file, ma);
        CU_ASSERT_EQUAL(rv, HC_ERR_CONFIG);
        if (rv != HC_ERR_CONFIG || !strstr(hc_err_msg(), bad[i].want))
            printf("\n  case %zu: rv %d, message \"%s\", wanted \"%s\"\n", i,
                   rv, rv ? hc_err_msg() : "", bad[i].want);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), bad[i].want));
        free(e);
        free(s);
    }
}

/* A graph's .keras config.json (Functional) reads back as the model. */
static void test_keras_written(void)
{
    static const char *const names[] = {
        "resnet_block", "dense_block", "two_inputs", "mobile_block",
        "xception_block", "convnext_block", "resnet_bn"};
    char p[256], *json = NULL;

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(p, sizeof p, G "%s.json", names[i]);
        load_or_fail(p, ma);
        CU_ASSERT_EQUAL_FATAL(hc_keras_config_json(ma, &json), HC_OK);
        CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"class_name\":\"Functional\""));
        if (hc_model_parse(json, strlen(json), "config.json", mb) != HC_OK)
            printf("\n  %s: %s\n", names[i], hc_err_msg());
        CU_ASSERT_EQUAL(ma->signature, mb->signature);
        CU_ASSERT_EQUAL(ma->n_params, mb->n_params);
        free(json);
        json = NULL;
    }
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
    CU_pSuite s = CU_add_suite("graph", suite_init, suite_clean);

    CU_add_test(s, "graphs in hetps's file", test_native);
    CU_add_test(s, "layers put in graph order", test_order);
    CU_add_test(s, "a chain is the Sequential model", test_chain);
    CU_add_test(s, "Keras 3 and tf.keras 2 Functional fixtures",
                test_keras_fixtures);
    CU_add_test(s, "refused graphs", test_refused);
    CU_add_test(s, "refused Keras Functional files", test_keras_refused);
    CU_add_test(s, "a graph's .keras config read back", test_keras_written);
}
