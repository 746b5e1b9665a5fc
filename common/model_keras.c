/*
 * model_keras.c — a model as Keras writes it, read into hetps's own model
 * file (model.h): what `model.to_json()` writes in Keras 2
 * ({"class_name": "Sequential", "config": {...}, "keras_version": ...})
 * and in Keras 3 (each object also carries "module", "registered_name"
 * and "build_config"; a compiled model its "compile_config"), which is
 * also the config.json of a Keras 3 `.keras` archive (keras_archive.c).
 *
 * The Keras tree is translated into the JSON of hetps's own format
 * ({"input_shape": [...], "layers": [{"type": "conv2d", ...}], "loss": ...})
 * and that is read by model.c as any model file, so shapes, variables and
 * signature are the same code. A class is found in the layer table
 * (layer.h), whose row lists its arguments. Every Keras key is either
 * translated, checked to hold the one value hetps computes
 * ("dilation_rate" (1, 1), "data_format" "channels_last", no regularizer
 * …), or refused by name; a key this file does not know is ignored only
 * when null. All the
 * problems of a file are reported together, one line each:
 *
 *   m.json: layers[1] Conv2D "conv2d": Conv2D dilation_rate (2, 2) is
 *       not supported; hetps computes (1, 1)
 *   m.json: layers[2] BatchNormalization "batch_normalization":
 *       BatchNormalization is not supported; hetps has InputLayer, ...
 *
 * What Keras files do not say. Without "compile_config" (Keras 2's
 * to_json never has one) the loss is sparse_categorical_crossentropy, the
 * optimizer Adam with Keras's defaults and the metric accuracy. The seed
 * of hetps's initial values is the first "seed" of an initializer (0
 * when none): hetps's generator is not Keras's, so the
 * values differ from Keras's but follow the same distribution. Keras has
 * no per-layer device: hetps reads an optional "device" beside a layer's
 * "class_name" and "config" (Keras's loader ignores keys there).
 *
 * The command line's --loss and --optimizer (hc_model_load_compiled)
 * replace what any model file says, as compiling a loaded model again
 * does (md_apply_compile).
 */
#include "model_impl.h"

#include "err.h"
#include "layer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PROBLEMS_MAX 8          /* lines of one error message */

/* One translation: where it reads from and what it found wrong so far. */
struct kx {
    const char *src;
    char msg[4096];             /* the problems, one line each */
    size_t used;
    int n_problems;
    double seed;                /* -1: none seen yet */
    int keras2;                 /* "keras_version" 2.x: tf.keras's
                                 * meanings where they differ */
};

static void problem(struct kx *k, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(struct kx *k, const char *where, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (k->n_problems++ >= PROBLEMS_MAX || k->used >= sizeof k->msg - 1)
        return;
    n = snprintf(k->msg + k->used, sizeof k->msg - k->used, "%s%s: %s: ",
                 k->used ? "\n" : "", k->src, where);
    if (n > 0 && (size_t)n < sizeof k->msg - k->used) {
        k->used += (size_t)n;
        va_start(ap, fmt);
        n = vsnprintf(k->msg + k->used, sizeof k->msg - k->used, fmt, ap);
        va_end(ap);
        if (n > 0)
            k->used += (size_t)n;
    }
    if (k->used > sizeof k->msg - 1)
        k->used = sizeof k->msg - 1;
}

/* A value for messages: (2, 2) for a pair, as Keras prints tuples. */
static const char *show(const cJSON *v, char *buf, size_t len)
{
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) <= 4) {
        size_t n = 0;

        n += (size_t)snprintf(buf, len, "(");
        for (const cJSON *it = v->child; it && n < len; it = it->next) {
            char one[48];

            n += (size_t)snprintf(buf + n, len - n, "%s%s",
                                  it == v->child ? "" : ", ",
                                  md_show(it, one, sizeof one));
        }
        if (n < len)
            snprintf(buf + n, len - n, ")");
        return buf;
    }
    if (cJSON_IsObject(v) && cJSON_IsString(md_get(v, "class_name"))) {
        snprintf(buf, len, "%.40s", md_get(v, "class_name")->valuestring);
        return buf;
    }
    return md_show(v, buf, len);
}

/* ---- the checks on one Keras argument ----------------------------------- */

/* Every layer's arguments (each kind's row has its own: layer.h). */
static const struct hc_keras_arg args_common[] = {
    {"name", HC_KA_IGNORE}, {"trainable", HC_KA_TRUE},
    {"dtype", HC_KA_DTYPE}, {"batch_input_shape", HC_KA_SHAPE},
    {"batch_shape", HC_KA_SHAPE}, {"input_shape", HC_KA_SHAPE},
    {"batch_size", HC_KA_NULL}, {NULL, 0}};
static const struct hc_keras_arg args_input[] = {
    {"sparse", HC_KA_FALSE}, {"ragged", HC_KA_FALSE},
    {"input_tensor", HC_KA_NULL}, {"optional", HC_KA_FALSE}, {NULL, 0}};

/* The argument named key in args (ending in {NULL}), or NULL. */
static const struct hc_keras_arg *find_arg(const struct hc_keras_arg *args,
                                           const char *key)
{
    for (; args->key; args++)
        if (!strcmp(key, args->key))
            return args;
    return NULL;
}

/* "InputLayer, Conv2D, MaxPooling2D, …": the classes hetps has. */
static const char *supported(char *buf, size_t len)
{
    const struct hc_layer_kind *kd;
    size_t n = (size_t)snprintf(buf, len, "InputLayer");

    for (int t = 0; (kd = hc_layer_kind((enum hc_layer_type)t)) && n < len;
         t++)
        n += (size_t)snprintf(buf + n, len - n, ", %s", kd->keras_class);
    return buf;
}

static int is_ones(const cJSON *v)
{
    if (md_is_int(v))
        return v->valuedouble == 1;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1)
        return 0;
    for (const cJSON *it = v->child; it; it = it->next)
        if (!md_is_int(it) || it->valuedouble != 1)
            return 0;
    return 1;
}

/* The class name of a serialised Keras object, or NULL. */
static const char *class_of(const cJSON *v)
{
    const cJSON *c = md_get(v, "class_name");

    return cJSON_IsObject(v) && cJSON_IsString(c) ? c->valuestring : NULL;
}

static int dtype_ok(const cJSON *v)
{
    const cJSON *cfg;

    if (cJSON_IsNull(v))
        return 1;
    if (cJSON_IsString(v))
        return !strcmp(v->valuestring, "float32");
    if (!class_of(v) || strcmp(class_of(v), "DTypePolicy"))
        return 0;
    cfg = md_get(v, "config");
    return cJSON_IsObject(cfg) && cJSON_IsString(md_get(cfg, "name")) &&
           !strcmp(md_get(cfg, "name")->valuestring, "float32");
}

/* An InputLayer's dtype of ids: "int64" or "int32" (Keras 2 and 3 write
 * a string), read as hetps's input "dtype": "int64". */
static int ids_dtype(const cJSON *v)
{
    return cJSON_IsString(v) && (!strcmp(v->valuestring, "int64") ||
                                 !strcmp(v->valuestring, "int32"));
}

/* An initializer of class cls (Keras 2 and 3 spell GlorotUniform the same;
 * "glorot_uniform" as a string in older files). */
static int init_is(const cJSON *v, const char *cls, const char *str)
{
    if (cJSON_IsString(v))
        return !strcmp(v->valuestring, str);
    return class_of(v) && !strcmp(class_of(v), cls);
}

static int act_ok(const cJSON *v)
{
    enum hc_act a;

    return cJSON_IsNull(v) ||
           (cJSON_IsString(v) && hc_act_named(v->valuestring, &a) == 0);
}

/* [null, 28, 28, 1] → [28, 28, 1] into *shape (a new array). */
static cJSON *drop_batch(const cJSON *v)
{
    cJSON *s;

    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 2)
        return NULL;
    if (!(s = cJSON_CreateArray()))
        return NULL;
    for (const cJSON *it = v->child->next; it; it = it->next)
        cJSON_AddItemToArray(s, cJSON_Duplicate(it, 1));
    return s;
}

/* A Keras object v of argument key from module — an initializer
 * ("he_normal", {"class_name": "HeNormal", "config": {...}}) or a
 * regularizer ("l2", {"class_name": "L2", "config": {"l2": 1e-4}}), with
 * "module" in Keras 3 — into out as hetps's {"type": class, ...config};
 * known says which classes hetps has (list, for the message), and
 * model_init.c checks their keys. */
static void keras_object(struct kx *k, const char *where, const char *cls,
                         const char *key, const cJSON *v, cJSON *out,
                         const char *module, int (*known)(const char *),
                         const char *list)
{
    const cJSON *cfg = md_get(v, "config"), *mod = md_get(v, "module");
    char buf[96];
    cJSON *o;

    if (cJSON_IsNull(v))
        return;
    if (cJSON_IsString(v) && known(v->valuestring)) {
        cJSON_AddItemToObject(out, key, cJSON_Duplicate(v, 1));
        return;
    }
    if (!class_of(v) || !known(class_of(v)) ||
        (cfg && !cJSON_IsObject(cfg)) ||
        (mod && !cJSON_IsNull(mod) &&
         !(cJSON_IsString(mod) && !strcmp(mod->valuestring, module)))) {
        problem(k, where, "%s %s %s is not supported; hetps has %s", cls,
                key, show(v, buf, sizeof buf), list);
        return;
    }
    if (!(o = cJSON_AddObjectToObject(out, key)))
        return;
    cJSON_AddStringToObject(o, "type", class_of(v));
    for (const cJSON *it = cfg ? cfg->child : NULL; it; it = it->next)
        cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
}

/* The seed of initializer v, the first met, becomes the model's. */
static void take_seed(struct kx *k, const cJSON *v)
{
    const cJSON *cfg = md_get(v, "config");
    const cJSON *seed = cJSON_IsObject(cfg) ? md_get(cfg, "seed") : NULL;

    if (k->seed < 0 && md_is_int(seed) && seed->valuedouble >= 0)
        k->seed = seed->valuedouble;
}

/* One argument of a layer: check it, copy it into out when it is. */
static void layer_arg(struct kx *k, const char *where, const char *cls,
                      const struct hc_keras_arg *a, const cJSON *v, cJSON *out,
                      int first, cJSON **input)
{
    char buf[96];

    switch (a->take) {
    case HC_KA_COPY:
        cJSON_AddItemToObject(out, a->key, cJSON_Duplicate(v, 1));
        return;
    case HC_KA_ACT:
        if (!act_ok(v))
            problem(k, where, "%s activation %s is not supported; hetps has "
                    "%s", cls, show(v, buf, sizeof buf), hc_act_list());
        else if (k->keras2 && cJSON_IsString(v) &&
                 !strcmp(md_norm(v->valuestring, buf, sizeof buf),
                         "hardsigmoid"))
            problem(k, where, "%s activation \"hard_sigmoid\" of Keras 2 "
                    "(0.2·x + 0.5, clipped) is not supported; hetps computes "
                    "Keras 3's relu6(x + 3) / 6", cls);
        else
            cJSON_AddItemToObject(out, a->key, cJSON_Duplicate(v, 1));
        return;
    case HC_KA_IGNORE:
        return;
    case HC_KA_NULL:
        if (!cJSON_IsNull(v))
            problem(k, where, "%s %s %s is not supported; hetps has none%s",
                    cls, a->key, show(v, buf, sizeof buf),
                    strstr(a->key, "regularizer")
                        ? " (it takes L1, L2 and L1L2 as kernel_regularizer "
                          "and bias_regularizer)" : "");
        return;
    case HC_KA_FALSE:
        if (!cJSON_IsNull(v) && !cJSON_IsFalse(v))
            problem(k, where, "%s %s %s is not supported; hetps computes "
                    "%s false", cls, a->key, show(v, buf, sizeof buf),
                    a->key);
        return;
    case HC_KA_TRUE:    /* trainable: a frozen layer */
        if (!cJSON_IsTrue(v))
            problem(k, where, "%s %s %s is not supported; hetps trains every "
                    "layer (Keras would keep this layer's variables "
                    "fixed%s): set it true or drop the key", cls, a->key,
                    show(v, buf, sizeof buf),
                    !strcmp(cls, "BatchNormalization")
                        ? " and normalise with its moving statistics, as "
                          "in inference" : "");
        return;
    case HC_KA_ONES:
        if (!is_ones(v))
            problem(k, where, "%s %s %s is not supported; hetps computes %s",
                    cls, a->key, show(v, buf, sizeof buf),
                    cJSON_IsArray(v) ? "(1, 1)" : "1");
        return;
    case HC_KA_LAST:
        if (!cJSON_IsNull(v) &&
            !(cJSON_IsString(v) && !strcmp(v->valuestring, "channels_last")))
            problem(k, where, "%s data_format %s is not supported; hetps "
                    "computes \"channels_last\"", cls,
                    show(v, buf, sizeof buf));
        return;
    case HC_KA_DTYPE:
        if (!dtype_ok(v))
            problem(k, where, "%s dtype %s is not supported; hetps computes "
                    "in float32", cls,
                    cJSON_IsObject(md_get(v, "config"))
                        ? show(md_get(md_get(v, "config"), "name"), buf,
                               sizeof buf)
                        : show(v, buf, sizeof buf));
        return;
    case HC_KA_GLOROT:
        if (!cJSON_IsNull(v) &&
            !init_is(v, "GlorotUniform", "glorot_uniform")) {
            problem(k, where, "%s kernel_initializer %s is not supported; "
                    "hetps initialises kernels GlorotUniform", cls,
                    show(v, buf, sizeof buf));
            return;
        }
        take_seed(k, v);
        return;
    case HC_KA_INIT:
        keras_object(k, where, cls, a->key, v, out, "keras.initializers",
                     md_init_known, md_init_list());
        take_seed(k, v);
        return;
    case HC_KA_REG:
        keras_object(k, where, cls, a->key, v, out, "keras.regularizers",
                     md_reg_known, md_reg_list());
        return;
    case HC_KA_ZEROS:
        if (!cJSON_IsNull(v) && !init_is(v, "Zeros", "zeros"))
            problem(k, where, "%s bias_initializer %s is not supported; "
                    "hetps initialises biases Zeros", cls,
                    show(v, buf, sizeof buf));
        return;
    case HC_KA_SHAPE:
        if (cJSON_IsNull(v))
            return;
        if (!first) {
            problem(k, where, "%s %s belongs on the first layer", cls,
                    a->key);
            return;
        }
        if (*input)
            return;     /* the first one given wins; Keras writes one */
        if (!strcmp(a->key, "input_shape")) {
            *input = cJSON_Duplicate(v, 1);
            return;
        }
        if (!(*input = drop_batch(v)))
            problem(k, where, "%s %s %s must be [null, ...dimensions]", cls,
                    a->key, show(v, buf, sizeof buf));
        return;
    }
}

/* ---- layers ------------------------------------------------------------- */

static const char *const keys_entry[] = {
    "class_name", "config", "module", "registered_name", "build_config",
    "name", "device", "inbound_nodes", NULL};

/* Layer i of the Keras model: its hetps form appended to layers (none for
 * an InputLayer, whose shape goes to *input). */
static void layer(struct kx *k, int i, const cJSON *lj, cJSON *layers,
                  cJSON **input)
{
    const char *cls = class_of(lj), *name = NULL;
    const struct hc_layer_kind *kind = NULL;
    const struct hc_keras_arg *own;     /* the class's own arguments */
    const cJSON *cfg = md_get(lj, "config"), *v, *reg;
    char where[160], buf[96], classes[256];
    cJSON *out;
    int is_input;

    if (cJSON_IsObject(cfg) && cJSON_IsString(md_get(cfg, "name")))
        name = md_get(cfg, "name")->valuestring;
    snprintf(where, sizeof where, "layers[%d] %.40s \"%.60s\"", i,
             cls ? cls : "?", name ? name : "");
    if (!cls || !cJSON_IsObject(cfg)) {
        problem(k, where, "a Keras layer needs \"class_name\" and a "
                "\"config\" object");
        return;
    }
    is_input = !strcmp(cls, "InputLayer");
    if (!is_input)
        kind = hc_layer_kind_keras(cls);
    reg = md_get(lj, "registered_name");
    if (!(is_input || kind) ||
        (cJSON_IsString(reg) && strcmp(reg->valuestring, cls))) {
        problem(k, where, "%s is not supported; hetps has %s",
                cJSON_IsString(reg) ? reg->valuestring : cls,
                supported(classes, sizeof classes));
        return;
    }
    own = kind ? kind->keras_args : args_input;
    for (v = lj->child; v; v = v->next) {
        int known = 0;

        for (int j = 0; keys_entry[j]; j++)
            known |= !strcmp(v->string, keys_entry[j]);
        if (!known && !cJSON_IsNull(v))
            problem(k, where, "%s key \"%.40s\" is not supported", cls,
                    v->string);
    }
    if (!(out = cJSON_CreateObject()))
        return;
    if (kind)
        cJSON_AddStringToObject(out, "type", kind->name);
    if (name)
        cJSON_AddStringToObject(out, "name", name);
    if ((v = md_get(lj, "device")) != NULL)
        cJSON_AddItemToObject(out, "device", cJSON_Duplicate(v, 1));
    for (v = cfg->child; v; v = v->next) {
        const struct hc_keras_arg *a = find_arg(args_common, v->string);

        if (is_input && !strcmp(v->string, "dtype") && ids_dtype(v))
            continue;   /* functional() gives the input its dtype */
        if (!a)
            a = find_arg(own, v->string);
        if (a)
            layer_arg(k, where, cls, a, v, out, i == 0 || is_input ||
                      !cJSON_GetArraySize(layers), input);
        else if (!cJSON_IsNull(v))
            problem(k, where, "%s %.40s %s is not supported", cls, v->string,
                    show(v, buf, sizeof buf));
    }
    if (kind)
        cJSON_AddItemToArray(layers, out);
    else
        cJSON_Delete(out);
}

/* ---- compile_config: loss, optimizer, metrics --------------------------- */

/* Whether a Keras loss's key other than its settings holds what hetps
 * computes: any name, the mean over the batch, the last axis. */
static int loss_key_ok(const char *key, const cJSON *v)
{
    if (!strcmp(key, "name") || cJSON_IsNull(v))
        return 1;
    if (!strcmp(key, "reduction"))
        return cJSON_IsString(v) &&
               (!strcmp(v->valuestring, "sum_over_batch_size") ||
                !strcmp(v->valuestring, "auto"));
    if (!strcmp(key, "axis"))
        return md_is_int(v) && v->valuedouble == -1;
    if (!strcmp(key, "dtype"))
        return dtype_ok(v);
    return 0;
}

/* Keras's loss, as a name or a serialised Loss, into hetps's "loss": the
 * name, or {"type": class, its settings}; model_loss.c checks that the
 * loss takes them. Keras's own bookkeeping (name, the default reduction,
 * axis −1) is checked here. */
static void loss(struct kx *k, const cJSON *v, cJSON *root)
{
    const char *s = cJSON_IsString(v) ? v->valuestring : class_of(v);
    const cJSON *cfg = md_get(v, "config"), *mod = md_get(v, "module");
    char buf[96];
    cJSON *o;

    if (!s || !md_loss_known(s) ||
        (mod && !cJSON_IsNull(mod) &&
         !(cJSON_IsString(mod) && !strcmp(mod->valuestring, "keras.losses")))) {
        problem(k, "compile_config", "loss %s is not supported; hetps has %s",
                show(v, buf, sizeof buf), md_loss_list());
        return;
    }
    if (cJSON_IsString(v)) {
        cJSON_AddStringToObject(root, "loss", s);
        return;
    }
    if (!(o = cJSON_AddObjectToObject(root, "loss")))
        return;
    cJSON_AddStringToObject(o, "type", s);
    for (const cJSON *it = cJSON_IsObject(cfg) ? cfg->child : NULL; it;
         it = it->next) {
        const char *key = it->string;

        if (!strcmp(key, "from_logits") || !strcmp(key, "label_smoothing") ||
            !strcmp(key, "delta"))
            cJSON_AddItemToObject(o, key, cJSON_Duplicate(it, 1));
        else if (!loss_key_ok(key, it))
            problem(k, "compile_config", "loss %s %.40s %s is not supported",
                    s, key, show(it, buf, sizeof buf));
    }
}

/* The base Optimizer's arguments, in every optimizer's config; the
 * type's own (hc_optim_key), weight_decay and the clip settings are
 * copied. */
static const struct hc_keras_arg args_optimizer[] = {
    {"name", HC_KA_IGNORE}, {"use_ema", HC_KA_FALSE},
    {"ema_momentum", HC_KA_IGNORE}, {"ema_overwrite_frequency", HC_KA_NULL},
    {"loss_scale_factor", HC_KA_NULL}, {"gradient_accumulation_steps", HC_KA_NULL},
    {"jit_compile", HC_KA_IGNORE}, {"is_legacy_optimizer", HC_KA_FALSE},
    {"decay", HC_KA_IGNORE}, {NULL, 0}};

/* "learning_rate, momentum, nesterov": the Keras keys type t takes. */
static const char *optim_keys(enum hc_optim t, char *buf, size_t cap)
{
    const char *keys[20];
    size_t n = 0;

    hc_optim_keys(t, keys, sizeof keys / sizeof keys[0]);
    buf[0] = '\0';
    for (int i = 0; keys[i] && n + 1 < cap; i++)
        if (strcmp(keys[i], "exclude_from_weight_decay"))
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "",
                                  keys[i]);
    return buf;
}

/* Keras's optimizer, as a name or a serialised Optimizer. */
static void optimizer(struct kx *k, const cJSON *v, cJSON *root)
{
    const char *s = cJSON_IsString(v) ? v->valuestring : class_of(v);
    const cJSON *cfg = md_get(v, "config");
    enum hc_optim t, kt;
    cJSON *o;
    char buf[96], where[80], keys[400];

    if (!s || hc_optim_by_name(s, &t) != HC_OK) {
        problem(k, "compile_config", "optimizer %s is not supported; hetps "
                "has SGD, RMSprop, Adagrad, Adam, AdamW, Nadam, Adamax and "
                "Ftrl", show(v, buf, sizeof buf));
        return;
    }
    if (!(o = cJSON_AddObjectToObject(root, "optimizer")))
        return;
    cJSON_AddStringToObject(o, "type", hc_optim_name(t));
    if (!cJSON_IsObject(cfg))
        return;
    /* SGD's keys are the momentum type's: momentum, nesterov */
    kt = t == HC_OPT_SGD ? HC_OPT_MOMENTUM : t;
    snprintf(where, sizeof where, "compile_config optimizer %.40s", s);
    for (const cJSON *it = cfg->child; it; it = it->next) {
        const struct hc_keras_arg *a = find_arg(args_optimizer, it->string);

        if (!strcmp(it->string, "learning_rate") && !cJSON_IsNumber(it) &&
            !cJSON_IsObject(it))    /* a schedule: read by model.c */
            problem(k, where, "learning_rate %s is not supported; hetps "
                    "takes a number or a schedule",
                    show(it, buf, sizeof buf));
        else if (a)
            layer_arg(k, where, s, a, it, o, 0, NULL);
        else if (cJSON_IsNull(it))     /* Keras writes null for unset */
            continue;
        else if (hc_optim_key(kt, it->string) != HC_OPTIM_KEY_NONE)
            cJSON_AddItemToObject(o, it->string, cJSON_Duplicate(it, 1));
        else if (!cJSON_IsNull(it))
            problem(k, where, "%.40s %s is not supported; %s takes %s",
                    it->string, show(it, buf, sizeof buf),
                    hc_optim_keras_class(t), optim_keys(kt, keys, sizeof keys));
    }
}

/* The metrics pass as they are (strings or serialized metric objects):
 * the model reader checks them (model.c). */
static void metrics(struct kx *k, const cJSON *v, cJSON *root)
{
    cJSON *ms;
    char buf[96];

    if (cJSON_IsNull(v))
        return;
    if (!cJSON_IsArray(v)) {
        problem(k, "compile_config", "metrics %s is not supported; use a "
                "list like [\"accuracy\", \"AUC\"]", show(v, buf, sizeof buf));
        return;
    }
    if (!(ms = cJSON_AddArrayToObject(root, "metrics")))
        return;
    /* Keras 3 may nest a model's one output's list: [["accuracy", "AUC"]],
     * or each metric: [["accuracy"], ["AUC"]]. */
    if (cJSON_GetArraySize(v) == 1 && cJSON_IsArray(v->child))
        v = v->child;
    for (const cJSON *it = v->child; it; it = it->next) {
        const cJSON *m = cJSON_IsArray(it) && cJSON_GetArraySize(it) == 1
                             ? it->child : it;

        cJSON_AddItemToArray(ms, cJSON_Duplicate(m, 1));
    }
}

static void compile_config(struct kx *k, const cJSON *cc, cJSON *root)
{
    static const char *const ignored[] = {
        "run_eagerly", "steps_per_execution", "jit_compile", "auto_scale_loss",
        NULL};
    const cJSON *v;
    char buf[96];

    if (!cJSON_IsObject(cc)) {
        cJSON_AddStringToObject(root, "loss",
                                "sparse_categorical_crossentropy");
        cJSON_AddStringToObject(root, "optimizer", "adam");
        cJSON_AddItemToObject(root, "metrics",
                              cJSON_CreateStringArray((const char *[]){
                                  "accuracy"}, 1));
        return;
    }
    for (v = cc->child; v; v = v->next) {
        int skip = 0;

        for (int j = 0; ignored[j]; j++)
            skip |= !strcmp(v->string, ignored[j]);
        if (!strcmp(v->string, "loss"))
            loss(k, v, root);
        else if (!strcmp(v->string, "optimizer"))
            optimizer(k, v, root);
        else if (!strcmp(v->string, "metrics"))
            metrics(k, v, root);
        else if (!skip && !cJSON_IsNull(v))
            problem(k, "compile_config", "%.40s %s is not supported",
                    v->string, show(v, buf, sizeof buf));
    }
    if (!md_get(root, "loss"))
        cJSON_AddStringToObject(root, "loss",
                                "sparse_categorical_crossentropy");
    if (!md_get(root, "optimizer"))
        cJSON_AddStringToObject(root, "optimizer", "adam");
}

/* ---- the model ---------------------------------------------------------- */

int md_keras_is(const cJSON *root)
{
    return cJSON_IsObject(root) && md_get(root, "class_name") != NULL;
}

static const char *const keys_top[] = {
    "class_name", "config", "module", "registered_name", "build_config",
    "compile_config", "keras_version", "backend", NULL};
static const char *const keys_seq[] = {
    "name", "layers", "trainable", "dtype", "build_input_shape", NULL};
static const char *const keys_functional[] = {
    "name", "layers", "trainable", "dtype", "input_layers", "output_layers",
    NULL};

/* The model's own keys (top level and its config's). */
static void model_keys(struct kx *k, const cJSON *root, const cJSON *cfg)
{
    const char *const *keys_cfg = strcmp(class_of(root), "Sequential")
                                      ? keys_functional : keys_seq;

    char buf[96];

    for (const cJSON *v = root->child; v; v = v->next) {
        int known = 0;

        for (int j = 0; keys_top[j]; j++)
            known |= !strcmp(v->string, keys_top[j]);
        if (!known && !cJSON_IsNull(v))
            problem(k, class_of(root), "key \"%.40s\" is not supported",
                    v->string);
    }
    for (const cJSON *v = cfg->child; v; v = v->next) {
        int known = 0;

        for (int j = 0; keys_cfg[j]; j++)
            known |= !strcmp(v->string, keys_cfg[j]);
        if (!known && !cJSON_IsNull(v))
            problem(k, class_of(root), "%.40s %s is not supported",
                    v->string, show(v, buf, sizeof buf));
    }
    if (md_get(cfg, "trainable") && !cJSON_IsTrue(md_get(cfg, "trainable")))
        problem(k, class_of(root), "trainable false is not supported; "
                "hetps trains every layer (Keras would train none of this "
                "model's variables): set it true or drop the key");
    if (md_get(cfg, "dtype") && !dtype_ok(md_get(cfg, "dtype")))
        problem(k, class_of(root), "dtype %s is not supported; hetps computes "
                "in float32", show(md_get(cfg, "dtype"), buf, sizeof buf));
}

/* The input shape when no layer gave one: the model's build shapes. */
static cJSON *model_input(const cJSON *root, const cJSON *cfg)
{
    const cJSON *bc = md_get(root, "build_config");
    const cJSON *s = md_get(cfg, "build_input_shape");

    if (!s && cJSON_IsObject(bc))
        s = md_get(bc, "input_shape");
    return s ? drop_batch(s) : NULL;
}

/* ---- Functional: the graph ---------------------------------------------- */

/* Whether a class's module is one of Keras's layers: "keras.layers"
 * (Keras 3, tf.keras 2.13 and later), "keras.src.layers…", or none
 * (older files). Keras writes raw operations on tensors (x + y) as
 * their op ("keras.src.ops.numpy" Add), which is no layer. */
static int layer_module(const cJSON *lj)
{
    static const char *const mods[] = {
        "keras.layers", "keras.src.layers", "tf_keras.layers",
        "tf_keras.src.layers", "keras.src.engine.input_layer",
        "keras.engine.input_layer", NULL};
    const cJSON *m = md_get(lj, "module");

    if (!m || cJSON_IsNull(m))
        return 1;
    if (!cJSON_IsString(m))
        return 0;
    for (int j = 0; mods[j]; j++) {
        size_t n = strlen(mods[j]);

        if (!strncmp(m->valuestring, mods[j], n) &&
            (m->valuestring[n] == '\0' || m->valuestring[n] == '.'))
            return 1;
    }
    return 0;
}

/* A tensor reference [layer, node_index, tensor_index] (Keras 3's
 * keras_history, tf.keras 2's node entries, input_layers): its layer's
 * name appended to names. */
static void tensor_ref(struct kx *k, const char *where, const cJSON *h,
                       cJSON *names)
{
    const cJSON *n = cJSON_IsArray(h) ? h->child : NULL;
    const cJSON *ni = n ? n->next : NULL, *ti = ni ? ni->next : NULL;
    char buf[96];

    if (!n || !cJSON_IsString(n) || !md_is_int(ni) || !md_is_int(ti)) {
        problem(k, where, "a tensor must be [layer, node_index, "
                "tensor_index], got %s", show(h, buf, sizeof buf));
        return;
    }
    if (ni->valuedouble != 0 || ti->valuedouble != 0) {
        problem(k, where, "reads tensor %.10g of call %.10g of \"%.60s\"; "
                "hetps runs each layer once, with one output",
                ti->valuedouble, ni->valuedouble, n->valuestring);
        return;
    }
    cJSON_AddItemToArray(names, cJSON_CreateString(n->valuestring));
}

/* Keras 3's call arguments: every __keras_tensor__ in v, in order. */
static void keras3_args(struct kx *k, const char *where, const cJSON *v,
                        cJSON *names)
{
    const char *cls = class_of(v);
    char buf[96];

    if (cJSON_IsArray(v)) {
        for (const cJSON *it = v->child; it; it = it->next)
            keras3_args(k, where, it, names);
    } else if (cls && !strcmp(cls, "__keras_tensor__")) {
        const cJSON *c = md_get(v, "config");

        tensor_ref(k, where, cJSON_IsObject(c) ? md_get(c, "keras_history")
                                               : NULL, names);
    } else {
        problem(k, where, "call argument %s is not a tensor; hetps takes "
                "layers called on tensors only", show(v, buf, sizeof buf));
    }
}

/* A call's keyword arguments: none but null ones or "training". */
static void call_kwargs(struct kx *k, const char *where, const cJSON *kw)
{
    char buf[96];

    if (!kw || cJSON_IsNull(kw))
        return;
    if (!cJSON_IsObject(kw)) {
        problem(k, where, "call keywords %s are not supported",
                show(kw, buf, sizeof buf));
        return;
    }
    for (const cJSON *v = kw->child; v; v = v->next)
        if (!cJSON_IsNull(v) && strcmp(v->string, "training"))
            problem(k, where, "call keyword %.40s %s is not supported",
                    v->string, show(v, buf, sizeof buf));
}

/* The names of the layers a Functional layer reads, from its
 * "inbound_nodes": Keras 3 [{"args": [...], "kwargs": {}}] or tf.keras 2
 * [[[name, node, tensor, kwargs], ...]]. NULL for an input (none). */
static cJSON *inbound(struct kx *k, const char *where, const cJSON *lj)
{
    const cJSON *nodes = md_get(lj, "inbound_nodes"), *node;
    cJSON *names;
    char buf[96];
    int n;

    if (!nodes || cJSON_IsNull(nodes))
        return NULL;
    if (!cJSON_IsArray(nodes)) {
        problem(k, where, "inbound_nodes must be a list, got %s",
                show(nodes, buf, sizeof buf));
        return NULL;
    }
    if ((n = cJSON_GetArraySize(nodes)) == 0)
        return NULL;
    if (n > 1) {
        problem(k, where, "the layer is called %d times (a shared layer); "
                "hetps runs each layer once", n);
        return NULL;
    }
    if (!(names = cJSON_CreateArray()))
        return NULL;
    node = nodes->child;
    if (cJSON_IsObject(node)) {                 /* Keras 3 */
        keras3_args(k, where, md_get(node, "args"), names);
        call_kwargs(k, where, md_get(node, "kwargs"));
    } else if (cJSON_IsArray(node)) {           /* tf.keras 2 */
        for (const cJSON *e = node->child; e; e = e->next) {
            const cJSON *kw = cJSON_GetArrayItem(e, 3);

            tensor_ref(k, where, e, names);
            call_kwargs(k, where, kw);
        }
    } else {
        problem(k, where, "inbound node %s is neither Keras 3's {\"args\": "
                "[...]} nor tf.keras 2's list", show(node, buf, sizeof buf));
    }
    return names;
}

/* input_layers / output_layers: one reference [name, 0, 0], a list of
 * them, or (Keras 3, inputs given as a dict) an object of them; their
 * names into names. */
static void model_refs(struct kx *k, const char *key, const cJSON *v,
                       cJSON *names)
{
    char buf[96];

    if (cJSON_IsArray(v) && cJSON_IsString(v->child)) {
        tensor_ref(k, key, v, names);
        return;
    }
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) {
        problem(k, key, "must be a list of [layer, node, tensor], got %s",
                show(v, buf, sizeof buf));
        return;
    }
    for (const cJSON *it = v->child; it; it = it->next)
        tensor_ref(k, key, it, names);
}

/* The entry named s among the translated inputs (objects with "name"). */
static cJSON *named(cJSON *list, const char *s)
{
    cJSON *it;

    cJSON_ArrayForEach(it, list)
        if (cJSON_IsString(md_get(it, "name")) &&
            !strcmp(md_get(it, "name")->valuestring, s))
            return it;
    return NULL;
}

/* A Functional model's layers into n: "inputs" (its InputLayers, in
 * input_layers' order), "layers" each with its "inputs", "output". */
static void functional(struct kx *k, const cJSON *cfg, cJSON *n)
{
    const cJSON *layers = md_get(cfg, "layers");
    cJSON *nl = cJSON_AddArrayToObject(n, "layers");
    cJSON *found = cJSON_CreateArray(), *order = cJSON_CreateArray();
    cJSON *outs = cJSON_CreateArray(), *ins, *it;
    char where[160];
    int i = 0;

    if (!nl || !found || !order || !outs)
        goto out;
    for (const cJSON *lj = layers->child; lj; lj = lj->next, i++) {
        const char *cls = class_of(lj);
        const cJSON *cfg_l = md_get(lj, "config"), *mod;
        const char *name = cJSON_IsObject(cfg_l) &&
                           cJSON_IsString(md_get(cfg_l, "name"))
                               ? md_get(cfg_l, "name")->valuestring : "";
        cJSON *reads, *shape = NULL;
        int before = cJSON_GetArraySize(nl);

        if (i >= HC_MODEL_MAX_LAYERS + HC_MODEL_MAX_INPUTS) {
            problem(k, "Functional", "more than %d layers",
                    HC_MODEL_MAX_LAYERS);
            break;
        }
        snprintf(where, sizeof where, "layers[%d] %.40s \"%.60s\"", i,
                 cls ? cls : "?", name);
        if (cls && (!strcmp(cls, "TFOpLambda") ||
                    !strcmp(cls, "SlicingOpLambda"))) {
            problem(k, where, "%s is a TensorFlow operation on tensors "
                    "(tf.keras writes `x + y` this way), not a layer; hetps "
                    "reads layers only: write keras.layers.Add()(...) and "
                    "the like instead", cls);
            continue;
        }
        if (!layer_module(lj)) {
            mod = md_get(lj, "module");
            problem(k, where, "%.40s from module %.60s is an operation on "
                    "tensors (Keras writes `x + y` this way), not a layer; "
                    "hetps reads layers only: write keras.layers.%.40s()"
                    "(...) instead", cls ? cls : "?",
                    cJSON_IsString(mod) ? mod->valuestring : "?",
                    cls ? cls : "Add");
            continue;
        }
        reads = inbound(k, where, lj);
        if (cls && !strcmp(cls, "InputLayer")) {
            layer(k, i, lj, nl, &shape);
            if (shape) {
                cJSON *o = cJSON_CreateObject();

                cJSON_AddStringToObject(o, "name", name);
                cJSON_AddItemToObject(o, "shape", shape);
                if (ids_dtype(md_get(cfg_l, "dtype")))
                    cJSON_AddStringToObject(o, "dtype", "int64");
                cJSON_AddItemToArray(found, o);
            } else {
                problem(k, where, "an InputLayer needs its shape "
                        "(batch_shape or batch_input_shape)");
            }
            cJSON_Delete(reads);
            continue;
        }
        layer(k, i, lj, nl, &shape);
        cJSON_Delete(shape);
        if (cJSON_GetArraySize(nl) > before && reads)
            cJSON_AddItemToObject(cJSON_GetArrayItem(nl, before), "inputs",
                                  reads);
        else
            cJSON_Delete(reads);
    }
    /* The inputs in input_layers' order (the data's), then the output. */
    if (!(ins = cJSON_AddArrayToObject(n, "inputs")))
        goto out;
    model_refs(k, "input_layers", md_get(cfg, "input_layers"), order);
    cJSON_ArrayForEach(it, order) {
        cJSON *o = named(found, it->valuestring);

        if (!o)
            problem(k, "input_layers", "\"%.60s\" is no InputLayer of the "
                    "model", it->valuestring);
        else
            cJSON_AddItemToArray(ins, cJSON_Duplicate(o, 1));
    }
    model_refs(k, "output_layers", md_get(cfg, "output_layers"), outs);
    if (cJSON_GetArraySize(outs) != 1)
        problem(k, "output_layers", "the model has %d outputs; hetps trains "
                "a model of one output", cJSON_GetArraySize(outs));
    else
        cJSON_AddStringToObject(n, "output", outs->child->valuestring);
out:
    cJSON_Delete(found);
    cJSON_Delete(order);
    cJSON_Delete(outs);
}

/* A Sequential model's layers into n: "layers", and "input_shape" when a
 * layer or the model's build config gives one. */
static void sequential(struct kx *k, const cJSON *root, const cJSON *cfg,
                       cJSON *n)
{
    const cJSON *layers = md_get(cfg, "layers");
    cJSON *nl = cJSON_AddArrayToObject(n, "layers"), *input = NULL;
    int i = 0;

    if (!nl)
        return;
    for (const cJSON *lj = layers->child; lj; lj = lj->next, i++) {
        if (i >= HC_MODEL_MAX_LAYERS + 1) {
            problem(k, "Sequential", "more than %d layers",
                    HC_MODEL_MAX_LAYERS);
            break;
        }
        layer(k, i, lj, nl, &input);
    }
    if (!input)
        input = model_input(root, cfg);
    if (input)
        cJSON_AddItemToObject(n, "input_shape", input);
}

int md_keras_translate(const cJSON *root, const char *source, cJSON **out)
{
    struct kx k = { .src = source, .seed = -1 };
    const char *cls = class_of(root);
    const cJSON *cfg = md_get(root, "config"), *layers, *name;
    const cJSON *ver = md_get(root, "keras_version");
    int seq;
    cJSON *n = NULL;

    *out = NULL;
    k.keras2 = cJSON_IsString(ver) && !strncmp(ver->valuestring, "2.", 2);
    if (!cls || (strcmp(cls, "Sequential") && strcmp(cls, "Functional") &&
                 strcmp(cls, "Model")))
        return hc_err_set(HC_ERR_CONFIG, "%s: a Keras %.40s model is not "
                          "supported; hetps trains Sequential and Functional "
                          "models", source, cls ? cls : "(no class_name)");
    seq = !strcmp(cls, "Sequential");
    layers = cJSON_IsObject(cfg) ? md_get(cfg, "layers") : NULL;
    if (!cJSON_IsArray(layers))
        return hc_err_set(HC_ERR_CONFIG, "%s: a Keras %s model needs "
                          "\"config\": {\"layers\": [...]}", source, cls);
    if (!(n = cJSON_CreateObject()))
        goto nomem;
    name = md_get(cfg, "name");
    if (cJSON_IsString(name))
        cJSON_AddStringToObject(n, "name", name->valuestring);
    model_keys(&k, root, cfg);
    if (seq)
        sequential(&k, root, cfg, n);
    else
        functional(&k, cfg, n);
    compile_config(&k, md_get(root, "compile_config"), n);
    if (k.n_problems) {
        cJSON_Delete(n);
        if (k.n_problems > PROBLEMS_MAX)
            return hc_err_set(HC_ERR_CONFIG, "%s\n%s: and %d more",
                              k.msg, source, k.n_problems - PROBLEMS_MAX);
        return hc_err_set(HC_ERR_CONFIG, "%s", k.msg);
    }
    if (k.seed >= 0)
        cJSON_AddNumberToObject(n, "seed", k.seed);
    *out = n;
    return HC_OK;
nomem:
    cJSON_Delete(n);
    return hc_err_set(HC_ERR_NOMEM, "%s: out of memory", source);
}

/* ---- the command line's compile settings -------------------------------- */

/* A command-line value, a name or a JSON object, as root's key; flag and
 * names say what it is in the message when it is neither. */
static int replace_value(cJSON *root, const char *key, const char *text,
                         const char *flag, const char *names,
                         const char *example)
{
    cJSON *o = text[0] == '{' ? cJSON_Parse(text) : cJSON_CreateString(text);

    if (!o || (!cJSON_IsObject(o) && !cJSON_IsString(o))) {
        cJSON_Delete(o);
        return hc_err_set(HC_ERR_CONFIG, "%s: '%.80s' is neither a name "
                          "(%s) nor a JSON object like %s", flag, text, names,
                          example);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    cJSON_AddItemToObject(root, key, o);
    return HC_OK;
}

int md_apply_compile(cJSON *root, const struct hc_model_compile *c)
{
    int rv;

    if (!cJSON_IsObject(root))
        return HC_OK;           /* the model's own error comes next */
    if (c->loss &&
        (rv = replace_value(root, "loss", c->loss, "--loss",
                            "binary_crossentropy, huber, …",
                            "{\"type\": \"huber\", \"delta\": 2}")))
        return rv;
    if (c->optimizer &&
        (rv = replace_value(root, "optimizer", c->optimizer, "--optimizer",
                            "adam, sgd",
                            "{\"type\": \"sgd\", \"learning_rate\": 0.05}")))
        return rv;
    return HC_OK;
}
