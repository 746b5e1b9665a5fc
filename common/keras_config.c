/*
 * keras_config.c — a model as Keras 3 serialises a compiled Sequential
 * or, for a graph, a Functional model (keras.h: hc_keras_config_json):
 * the config.json of the .keras archives hetps writes. Every layer with Keras's class, module and arguments (its
 * row of the layer table, layer.h, writes its own: the values hetps
 * computes, dilation (1, 1), channels_last, GlorotUniform kernels seeded
 * by the model's seed, Zeros biases), its build_config
 * and, for a placed layer, hetps's "device" beside them; then the
 * compile_config (optimizer, loss, metrics). Written so that every Keras
 * 3 reads it: a layer's dtype is "float32" (Keras 3.4 on writes a
 * DTypePolicy object, which 3.0 to 3.3 may not take), and no optimizer key
 * newer than Keras 3.0. Read back by model_keras.c, it gives the same
 * model (signature and all).
 */
#include "keras.h"
#include "keras_impl.h"

#include "err.h"
#include "layer.h"
#include "model_impl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* {"module": MODULE, "class_name": CLS, "config": CONFIG,
 *  "registered_name": null}; takes config. */
static cJSON *object(const char *module, const char *cls, cJSON *config)
{
    cJSON *o = cJSON_CreateObject();

    if (!o) {
        cJSON_Delete(config);
        return NULL;
    }
    cJSON_AddStringToObject(o, "module", module);
    cJSON_AddStringToObject(o, "class_name", cls);
    cJSON_AddItemToObject(o, "config", config ? config : cJSON_CreateObject());
    cJSON_AddNullToObject(o, "registered_name");
    return o;
}

/* A layer's dtype (see the top of this file). */
static cJSON *dtype_policy(void)
{
    return cJSON_CreateString("float32");
}

double kx_tidy(float f)
{
    char b[32];

    for (int prec = 6; prec < 9; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)f);
        if ((float)strtod(b, NULL) == f)
            return strtod(b, NULL);
    }
    return (double)f;
}

/* [null, dims...] of a shape. */
static cJSON *batch_shape(const struct hc_shape *s)
{
    cJSON *a = cJSON_CreateArray();

    cJSON_AddItemToArray(a, cJSON_CreateNull());
    for (int i = 0; i < s->rank; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(s->dims[i]));
    return a;
}

cJSON *kx_pair(int a, int b)
{
    const int v[2] = {a, b};

    return cJSON_CreateIntArray(v, 2);
}

/* Initialiser in as Keras serialises it. */
cJSON *kx_init_json(const struct hc_initializer *in, uint64_t seed)
{
    cJSON *cfg = cJSON_CreateObject();
    const char *cls;

    if (!cfg)
        return NULL;
    cls = md_init_keras(in, (double)seed, cfg);
    for (cJSON *v = cfg->child; v; v = v->next)
        if (cJSON_IsNumber(v) && strcmp(v->string, "seed"))
            cJSON_SetNumberValue(v, kx_tidy((float)v->valuedouble));
    return object("keras.initializers", cls, cfg);
}

/* A regularizer as Keras serialises it, null for none. */
cJSON *kx_reg_json(const struct hc_regularizer *r)
{
    cJSON *cfg;
    const char *cls;

    if (!r->l1 && !r->l2)
        return cJSON_CreateNull();
    if (!(cfg = cJSON_CreateObject()))
        return NULL;
    cls = md_reg_keras(r, cfg);
    for (cJSON *v = cfg->child; v; v = v->next)
        cJSON_SetNumberValue(v, kx_tidy((float)v->valuedouble));
    return object("keras.regularizers", cls, cfg);
}

void kx_weights_args(cJSON *c, const struct hc_model *m,
                     const struct hc_layer_spec *l)
{
    kx_weights_args_as(c, m, l, "kernel");
}

void kx_weights_args_as(cJSON *c, const struct hc_model *m,
                        const struct hc_layer_spec *l, const char *kernel)
{
    char key[48];

    cJSON_AddBoolToObject(c, "use_bias", l->use_bias);
    snprintf(key, sizeof key, "%s_initializer", kernel);
    cJSON_AddItemToObject(c, key, kx_init_json(&l->kernel_init, m->seed));
    cJSON_AddItemToObject(c, "bias_initializer",
                          kx_init_json(&l->bias_init, m->seed));
    snprintf(key, sizeof key, "%s_regularizer", kernel);
    cJSON_AddItemToObject(c, key, kx_reg_json(&l->kernel_reg));
    cJSON_AddItemToObject(c, "bias_regularizer", kx_reg_json(&l->bias_reg));
    cJSON_AddNullToObject(c, "activity_regularizer");
    snprintf(key, sizeof key, "%s_constraint", kernel);
    cJSON_AddNullToObject(c, key);
    cJSON_AddNullToObject(c, "bias_constraint");
}

/* Layer l as Keras serialises it: what every layer has, its kind's
 * arguments (its row's keras_config), its build_config. */
static cJSON *layer_json(const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    const struct hc_layer_kind *k = hc_layer_kind(l->type);
    cJSON *c = cJSON_CreateObject(), *o, *bc;

    cJSON_AddStringToObject(c, "name", l->name);
    cJSON_AddBoolToObject(c, "trainable", 1);
    cJSON_AddItemToObject(c, "dtype", dtype_policy());
    k->keras_config(c, m, l);
    if (!(o = object("keras.layers", k->keras_class, c)))
        return NULL;
    bc = cJSON_AddObjectToObject(o, "build_config");
    cJSON_AddItemToObject(bc, "input_shape", batch_shape(&l->in));
    if (l->device[0])
        cJSON_AddStringToObject(o, "device", l->device);
    return o;
}

/* learning_rate: a number, or the schedule as Keras serialises it. */
static cJSON *learning_rate_json(const struct hc_optim_conf *o)
{
    const struct hc_lr_schedule *s = &o->sched;
    const char *keys[16];
    cJSON *c;

    if (s->kind == HC_LR_CONSTANT)
        return cJSON_CreateNumber(kx_tidy(o->lr));
    c = cJSON_CreateObject();
    hc_lr_keys(s->kind, keys, sizeof keys / sizeof keys[0]);
    for (int i = 0; keys[i]; i++) {
        int kind = hc_lr_key(s->kind, keys[i]);

        if (!strcmp(keys[i], "initial_learning_rate"))
            cJSON_AddNumberToObject(c, keys[i], kx_tidy(o->lr));
        else if (!strcmp(keys[i], "warmup_target") && !s->warmup)
            cJSON_AddNullToObject(c, keys[i]);
        else if (!strcmp(keys[i], "boundaries"))
            cJSON_AddItemToObject(c, keys[i], cJSON_CreateIntArray(
                                      (const int *)s->boundaries,
                                      (int)s->n_values - 1));
        else if (!strcmp(keys[i], "values")) {
            cJSON *v = cJSON_AddArrayToObject(c, keys[i]);

            for (uint32_t k = 0; v && k < s->n_values; k++)
                cJSON_AddItemToArray(v, cJSON_CreateNumber(
                                            kx_tidy(s->values[k])));
        } else if (kind == HC_OPTIM_KEY_BOOL)
            cJSON_AddBoolToObject(c, keys[i], s->kind == HC_LR_POLYNOMIAL
                                                  ? s->cycle : s->staircase);
        else
            cJSON_AddNumberToObject(c, keys[i], kx_tidy(
                !strcmp(keys[i], "decay_steps") ? s->decay_steps
                : !strcmp(keys[i], "decay_rate") ? s->decay_rate
                : !strcmp(keys[i], "end_learning_rate") ? s->end_lr
                : !strcmp(keys[i], "power") ? s->power
                : !strcmp(keys[i], "alpha") ? s->alpha
                : !strcmp(keys[i], "warmup_target") ? s->warmup_target
                : s->warmup_steps));
    }
    cJSON_AddStringToObject(c, "name", hc_lr_kind_name(s->kind));
    return object("keras.optimizers.schedules", hc_lr_kind_name(s->kind), c);
}

static cJSON *optimizer_json(const struct hc_optim_conf *o)
{
    cJSON *c = cJSON_CreateObject();
    const char *cls = hc_optim_keras_class(o->type), *keys[20];
    /* sgd writes momentum 0 and nesterov false, as Keras's SGD does */
    struct hc_optim_conf k = *o;
    char name[16];
    size_t i;

    if (k.type == HC_OPT_SGD)
        k.type = HC_OPT_MOMENTUM;
    for (i = 0; cls[i] && i + 1 < sizeof name; i++)
        name[i] = (char)tolower((unsigned char)cls[i]);
    name[i] = '\0';
    cJSON_AddStringToObject(c, "name", k.type == HC_OPT_MOMENTUM ? "SGD"
                                                                 : name);
    cJSON_AddItemToObject(c, "learning_rate", learning_rate_json(o));
    if (o->weight_decay > 0.0f)
        cJSON_AddNumberToObject(c, "weight_decay", kx_tidy(o->weight_decay));
    else
        cJSON_AddNullToObject(c, "weight_decay");
    if (o->clipnorm > 0.0f)
        cJSON_AddNumberToObject(c, "clipnorm", kx_tidy(o->clipnorm));
    else
        cJSON_AddNullToObject(c, "clipnorm");
    if (o->global_clipnorm > 0.0f)
        cJSON_AddNumberToObject(c, "global_clipnorm",
                                kx_tidy(o->global_clipnorm));
    else
        cJSON_AddNullToObject(c, "global_clipnorm");
    if (o->clipvalue > 0.0f)
        cJSON_AddNumberToObject(c, "clipvalue", kx_tidy(o->clipvalue));
    else
        cJSON_AddNullToObject(c, "clipvalue");
    cJSON_AddBoolToObject(c, "use_ema", 0);
    cJSON_AddNumberToObject(c, "ema_momentum", 0.99);
    cJSON_AddNullToObject(c, "ema_overwrite_frequency");
    /* Later Keras adds loss_scale_factor and gradient_accumulation_steps,
     * both off by default: left out, so that Keras 3.0 takes the file. */
    hc_optim_keys(k.type, keys, sizeof keys / sizeof keys[0]);
    for (i = 1; keys[i]; i++) {         /* keys[0] is learning_rate */
        enum hc_optim_key kind = hc_optim_key(k.type, keys[i]);

        if (kind == HC_OPTIM_KEY_FLOAT && strcmp(keys[i], "weight_decay") &&
            strncmp(keys[i], "clip", 4) && strcmp(keys[i], "global_clipnorm"))
            cJSON_AddNumberToObject(c, keys[i],
                                    kx_tidy((float)hc_optim_get(&k, keys[i])));
        else if (kind == HC_OPTIM_KEY_BOOL)
            cJSON_AddBoolToObject(c, keys[i], hc_optim_get(&k, keys[i]) != 0);
    }
    return object("keras.optimizers", cls, c);
}

/* The loss: Keras's name, or its class with the settings that are not
 * the defaults. */
static cJSON *loss_json(const struct hc_model *m)
{
    const struct hc_loss_par *p = &m->loss_par;
    cJSON *c;

    if (m->loss == HC_LOSS_MSE)
        return cJSON_CreateString("mean_squared_error");
    if (!p->from_logits && p->label_smoothing == 0 && p->delta == 1)
        return cJSON_CreateString(m->loss == HC_LOSS_MAE
                                  ? "mean_absolute_error"
                                  : hc_loss_name(m->loss));
    if (!(c = cJSON_CreateObject()))
        return NULL;
    if (m->loss == HC_LOSS_HUBER)
        cJSON_AddNumberToObject(c, "delta", kx_tidy(p->delta));
    else
        cJSON_AddBoolToObject(c, "from_logits", p->from_logits);
    if (m->loss == HC_LOSS_CCE || m->loss == HC_LOSS_BCE)
        cJSON_AddNumberToObject(c, "label_smoothing",
                                kx_tidy(p->label_smoothing));
    return object("keras.losses", md_loss_class(m->loss), c);
}

/* Keras's class of each metric kind (enum hc_eval_metric_kind order). */
static const char *const metric_class[] = {
    "Accuracy", "BinaryAccuracy", "CategoricalAccuracy",
    "SparseCategoricalAccuracy", "TopKCategoricalAccuracy",
    "SparseTopKCategoricalAccuracy", "AUC" };

/* The model's metrics: "accuracy" as the string (Keras resolves it by the
 * loss), the others as Keras 3 metric objects with their settings. */
static cJSON *metrics_json(const struct hc_model *m)
{
    cJSON *a = cJSON_CreateArray();
    int i;

    for (i = 0; i < m->n_metrics; i++) {
        const struct hc_eval_metric *e = &m->metrics[i];
        cJSON *c;

        if (e->kind == HC_EM_ACCURACY) {
            cJSON_AddItemToArray(a, cJSON_CreateString("accuracy"));
            continue;
        }
        c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "name", e->name);
        cJSON_AddStringToObject(c, "dtype", "float32");
        if (e->kind == HC_EM_BINARY_ACCURACY)
            cJSON_AddNumberToObject(c, "threshold", kx_tidy(e->threshold));
        if (e->kind == HC_EM_TOP_K || e->kind == HC_EM_SPARSE_TOP_K)
            cJSON_AddNumberToObject(c, "k", e->k);
        if (e->kind == HC_EM_AUC)
            cJSON_AddStringToObject(c, "curve", "ROC");
        cJSON_AddItemToArray(a, object("keras.metrics",
                                       metric_class[e->kind], c));
    }
    return a;
}

static cJSON *compile_json(const struct hc_model *m)
{
    cJSON *c = cJSON_CreateObject();

    cJSON_AddItemToObject(c, "optimizer", optimizer_json(&m->optim));
    cJSON_AddItemToObject(c, "loss", loss_json(m));
    cJSON_AddNullToObject(c, "loss_weights");
    if (m->n_metrics)
        cJSON_AddItemToObject(c, "metrics", metrics_json(m));
    else
        cJSON_AddNullToObject(c, "metrics");
    cJSON_AddNullToObject(c, "weighted_metrics");
    cJSON_AddBoolToObject(c, "run_eagerly", 0);
    cJSON_AddNumberToObject(c, "steps_per_execution", 1);
    cJSON_AddBoolToObject(c, "jit_compile", 0);
    return c;
}

/* A Keras 3 tensor of node j of m: {"class_name": "__keras_tensor__",
 * "config": {"shape", "dtype", "keras_history": [name, 0, 0]}}. */
static cJSON *tensor_json(const struct hc_model *m, int j)
{
    cJSON *c = cJSON_CreateObject(), *h = cJSON_CreateArray(), *t;

    cJSON_AddItemToObject(c, "shape",
                          batch_shape(hc_model_node_shape(m, j)));
    cJSON_AddStringToObject(c, "dtype", "float32");
    cJSON_AddItemToArray(h, cJSON_CreateString(hc_model_node_name(m, j)));
    cJSON_AddItemToArray(h, cJSON_CreateNumber(0));
    cJSON_AddItemToArray(h, cJSON_CreateNumber(0));
    cJSON_AddItemToObject(c, "keras_history", h);
    t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "class_name", "__keras_tensor__");
    cJSON_AddItemToObject(t, "config", c);
    return t;
}

/* [name, 0, 0]: the one output of a layer's one call. */
static cJSON *ref_json(const char *name)
{
    cJSON *a = cJSON_CreateArray();

    cJSON_AddItemToArray(a, cJSON_CreateString(name));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(0));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(0));
    return a;
}

/* Layer i of a graph: as a Sequential's, with its "name" and the one call
 * that reads its inputs (a merge takes them as one list). */
static cJSON *graph_layer_json(const struct hc_model *m, int i)
{
    const struct hc_layer_spec *l = &m->layers[i];
    cJSON *o = layer_json(m, l), *node, *args, *list;

    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "name", l->name);
    node = cJSON_CreateObject();
    args = cJSON_AddArrayToObject(node, "args");
    list = l->n_in > 1 ? cJSON_CreateArray() : args;
    for (int k = 0; k < l->n_in; k++)
        cJSON_AddItemToArray(list, tensor_json(m, l->in_from[k]));
    if (list != args)
        cJSON_AddItemToArray(args, list);
    cJSON_AddObjectToObject(node, "kwargs");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "inbound_nodes"), node);
    return o;
}

/* An InputLayer of config ic named name, with its empty inbound_nodes. */
static cJSON *input_json(const char *name, const struct hc_shape *shape,
                         int graph, int ids)
{
    cJSON *ic = cJSON_CreateObject(), *in;

    cJSON_AddItemToObject(ic, "batch_shape", batch_shape(shape));
    cJSON_AddStringToObject(ic, "dtype", ids ? "int64" : "float32");
    cJSON_AddBoolToObject(ic, "sparse", 0);
    cJSON_AddStringToObject(ic, "name", name);
    in = object("keras.layers", "InputLayer", ic);
    if (in && graph) {
        cJSON_AddStringToObject(in, "name", name);
        cJSON_AddArrayToObject(in, "inbound_nodes");
    }
    return in;
}

int hc_keras_config_json(const struct hc_model *m, char **json)
{
    cJSON *cfg = cJSON_CreateObject(), *layers, *root, *bc, *ins;
    int graph = !hc_model_is_chain(m);

    *json = NULL;
    if (!cfg)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(cfg, "name", m->name);
    cJSON_AddBoolToObject(cfg, "trainable", 1);
    if (!graph)
        cJSON_AddItemToObject(cfg, "dtype", dtype_policy());
    layers = cJSON_AddArrayToObject(cfg, "layers");
    if (!graph) {
        cJSON_AddItemToArray(layers, input_json("input_layer", &m->input, 0, 0));
        for (int i = 0; i < m->n_layers; i++)
            cJSON_AddItemToArray(layers, layer_json(m, &m->layers[i]));
        cJSON_AddItemToObject(cfg, "build_input_shape",
                              batch_shape(&m->input));
        root = object("keras", "Sequential", cfg);
    } else {
        /* A Functional model (keras/src/models/functional.py): the
         * inputs, every layer with its call, input_layers, output_layers. */
        ins = cJSON_CreateArray();
        for (int q = 0; q < m->n_inputs; q++) {
            cJSON_AddItemToArray(layers, input_json(m->inputs[q].name,
                                                    &m->inputs[q].shape, 1,
                                                    m->inputs[q].ids));
            cJSON_AddItemToArray(ins, ref_json(m->inputs[q].name));
        }
        for (int i = 0; i < m->n_layers; i++)
            cJSON_AddItemToArray(layers, graph_layer_json(m, i));
        cJSON_AddItemToObject(cfg, "input_layers", ins);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(cfg, "output_layers"),
                             ref_json(m->layers[m->n_layers - 1].name));
        root = object("keras.src.models.functional", "Functional", cfg);
    }
    if (root) {
        if (!graph) {
            bc = cJSON_AddObjectToObject(root, "build_config");
            cJSON_AddItemToObject(bc, "input_shape", batch_shape(&m->input));
        }
        cJSON_AddItemToObject(root, "compile_config", compile_json(m));
        *json = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(root);
    if (!*json)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for config.json");
    return HC_OK;
}
