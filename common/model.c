/*
 * model.c — read a model file (Keras-Sequential-like JSON, see model.h) into
 * an hc_model: check every key and value, infer each layer's output shape,
 * derive the variables in Keras's layout and names, and fingerprint it all.
 *
 * The layers (their keys, output shapes and variables) are read in
 * model_layer.c, each by its kind's row of the layer table (layer.h,
 * layer_*.c), and the typed JSON values, with the key check, in
 * model_json.c (shared through model_impl.h). This file reads the rest:
 * the JSON text, the top-level keys, the loss (and whether the output
 * layer suits it), the optimizer and metrics; it computes the signature,
 * loads files and writes the initial values.
 *
 * Spellings. Layer types, activations, losses and optimizers are matched
 * case-insensitively with underscores ignored, so both "maxpool2d" and
 * Keras's class names ("MaxPooling2D", "MaxPool2D") work. Keys are exact.
 * An unknown key is an error (a typo guard) naming the key and the layer
 * and, where one is close, the key that was probably meant.
 *
 * Output layer. With "sparse_categorical_crossentropy" or
 * "categorical_crossentropy" the model must end in a dense layer with
 * activation "softmax" (probabilities, Keras's default from_logits=False)
 * or "linear" (logits), or in a standalone "softmax"/"linear" activation
 * layer right after a linear dense layer — in the layer table's words, a
 * kind flagged HC_LAYER_LOGITS (conv2d is too, but its output is never
 * flat), or an HC_LAYER_ACT kind without that flag right after a linear
 * one. The worker fuses softmax with the cross-entropy; n_classes is the
 * output width (≥ 2). With "from_logits": true (any cross-entropy) the
 * last activation must be linear. With the other losses the output must
 * be flat and n_classes is its width. The loss itself is read in
 * model_loss.c.
 *
 * Initial values (hc_model_init_params). Each variable v has its own stream
 * of the splitmix64 generator (Steele, Lea & Flood 2014) started from
 * state = hc_mix64(seed ^ hc_mix64(v + 0x9E3779B97F4A7C15)), mix64 being
 * splitmix64's output function; so a variable's values depend only on
 * (seed, v). A Glorot-uniform element is (2u − 1)·limit with u the top
 * 53 bits of the next output over 2^53 and limit = sqrt(6 / (fan_in +
 * fan_out)); Zeros are zero. The other initialisers draw from the same
 * stream (model_init.c).
 *
 * Signature. FNV-1a 64 over a canonical text: one line per layer (type,
 * name, activation, every hyper-parameter, in and out shapes), one per
 * variable (name, shape, initialiser, fans), then the loss and the
 * optimizer with its settings; a graph that is not a chain adds its named
 * inputs and each layer's edges. The model name, devices, batch size, epochs,
 * seed and metrics are not part of it: changing them does not change what a
 * store of trained variables means.
 *
 * Keras's own files — to_json's JSON (an object with "class_name") and a
 * .keras archive (a zip: its config.json) — are translated into this
 * format by model_keras.c and keras_archive.c, then read as any other.
 */
#include "model_impl.h"

#include "err.h"
#include "keras.h"
#include "layer.h"
#include "rng.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_FILE_MAX  (1u << 20)          /* bytes of a model file */
#define SEED_MAX        9007199254740992.0  /* 2^53: exact in a JSON number */

/* ---- loss, optimizer, metrics ------------------------------------------- */

/* Whether l computes logits: its activation applies to values it
 * computes from its weights (a dense layer). */
static int logits_of(const struct hc_layer_spec *l)
{
    return (hc_layer_kind(l->type)->flags & HC_LAYER_LOGITS) != 0;
}

/* Whether l is an activation alone, which may take the logits of the
 * layer before it. */
static int takes_logits(const struct hc_layer_spec *l)
{
    unsigned f = hc_layer_kind(l->type)->flags;

    return (f & HC_LAYER_ACT) && !(f & HC_LAYER_LOGITS);
}

/* The output layer must suit the loss (see the top of this file). */
static int check_output(struct hc_model *m)
{
    const struct hc_layer_spec *last = &m->layers[m->n_layers - 1];
    const struct hc_layer_spec *prev =
        last->in_from[0] >= 0 ? &m->layers[last->in_from[0]] : NULL;
    int probs = last->act == HC_ACT_SOFTMAX || last->act == HC_ACT_LINEAR;
    const char *ln = hc_loss_name(m->loss);
    char so[48];

    if (last->out.rank != 1)
        return md_fail(m->source, "the last layer (layers[%d] \"%s\") must "
                       "have a flat output for the loss, but its shape is %s",
                       m->n_layers - 1, last->name,
                       md_fmt_shape(&last->out, so, sizeof so));
    m->n_classes = last->out.dims[0];
    if (m->loss_par.from_logits && last->act != HC_ACT_LINEAR)
        return md_fail(m->source, "loss \"%s\" with \"from_logits\": true "
                       "takes logits, but the last layer (layers[%d] \"%s\") "
                       "has activation \"%s\"; make it \"linear\"", ln,
                       m->n_layers - 1, last->name, hc_act_name(last->act));
    if (!hc_loss_takes_classes(m->loss))
        return HC_OK;
    if (!(probs && (logits_of(last) ||
                    (takes_logits(last) && prev && logits_of(prev) &&
                     prev->act == HC_ACT_LINEAR))))
        return md_fail(m->source, "loss \"%s\" needs the last layer to be "
                       "dense with activation \"softmax\" (or \"linear\" "
                       "logits), but layers[%d] is %s \"%s\" with activation "
                       "\"%s\"", ln, m->n_layers - 1,
                       hc_layer_type_name(last->type), last->name,
                       hc_act_name(last->act));
    if (m->n_classes < 2)
        return md_fail(m->source, "loss \"%s\" needs at least 2 classes, "
                       "but the last layer has %d unit", ln, m->n_classes);
    return HC_OK;
}

static int optim_type(const char *s, const char *where, enum hc_optim *t)
{
    if (hc_optim_by_name(s, t) == HC_OK)
        return HC_OK;
    return md_fail(where, "unsupported optimizer \"%.40s\"; use one of %s", s,
                   hc_optim_names());
}

/* A list of numbers (a schedule's boundaries or values) into dst, at most
 * cap; *n their count. Boundaries must be whole steps. */
static int read_numbers(const cJSON *it, const char *where, int whole,
                        void *dst, uint32_t cap, uint32_t *n)
{
    char buf[64];

    *n = 0;
    if (!cJSON_IsArray(it))
        return md_fail(where, "\"%s\" must be a list of numbers, got %s",
                       it->string, md_show(it, buf, sizeof buf));
    for (const cJSON *x = it->child; x; x = x->next) {
        if (*n == cap)
            return md_fail(where, "\"%s\" has more than %u numbers",
                           it->string, cap);
        if (!cJSON_IsNumber(x) || (whole && (x->valuedouble < 0 ||
                                             x->valuedouble > 2147483647.0 ||
                                             x->valuedouble !=
                                                 floor(x->valuedouble))))
            return md_fail(where, "\"%s\" must hold %s, got %s", it->string,
                           whole ? "step counts (whole numbers)" : "numbers",
                           md_show(x, buf, sizeof buf));
        if (whole)
            ((uint32_t *)dst)[(*n)++] = (uint32_t)x->valuedouble;
        else
            ((float *)dst)[(*n)++] = (float)x->valuedouble;
    }
    return HC_OK;
}

/* learning_rate as Keras serialises a schedule: {"class_name":
 * "ExponentialDecay", "config": {…}} (and "module", "registered_name"). */
static int read_schedule(const cJSON *o, const char *source,
                         struct hc_optim_conf *c)
{
    static const char *const outer[] = {"class_name", "config", "module",
                                        "registered_name", NULL};
    const char *keys[16];
    const cJSON *cls = md_get(o, "class_name"), *cfg = md_get(o, "config");
    struct hc_lr_schedule *s = &c->sched;
    char where[WHERE_MAX], buf[64];
    uint32_t nb = 0;
    int rv, k;

    snprintf(where, sizeof where, "%.500s: learning_rate", source);
    if ((rv = md_check_keys(o, outer, where)))
        return rv;
    if (!cJSON_IsString(cls) || hc_lr_by_name(cls->valuestring, &s->kind))
        return md_fail(where, "schedule %s is not supported; use a number or "
                       "one of ExponentialDecay, InverseTimeDecay, "
                       "PolynomialDecay, CosineDecay, PiecewiseConstantDecay",
                       md_show(cls ? cls : o, buf, sizeof buf));
    snprintf(where, sizeof where, "%.500s: learning_rate %s", source,
             cls->valuestring);
    if (!cJSON_IsObject(cfg))
        return md_fail(where, "needs \"config\": {…}");
    /* Keras's defaults */
    s->end_lr = s->kind == HC_LR_POLYNOMIAL ? 1e-4f : 0.0f;
    s->power = s->kind == HC_LR_POLYNOMIAL ? 1.0f : 0.0f;
    keys[0] = "name";
    hc_lr_keys(s->kind, keys + 1, sizeof keys / sizeof keys[0] - 1);
    if ((rv = md_check_keys(cfg, keys, where)))
        return rv;
    for (const cJSON *it = cfg->child; it; it = it->next) {
        if (!strcmp(it->string, "name"))
            continue;
        k = hc_lr_key(s->kind, it->string);
        if (k == HC_OPTIM_KEY_WORDS)
            rv = read_numbers(it, where, !strcmp(it->string, "boundaries"),
                              !strcmp(it->string, "boundaries")
                                  ? (void *)s->boundaries : (void *)s->values,
                              !strcmp(it->string, "boundaries")
                                  ? HC_LR_MAX_VALUES - 1 : HC_LR_MAX_VALUES,
                              !strcmp(it->string, "boundaries") ? &nb
                                                                : &s->n_values);
        else if (k == HC_OPTIM_KEY_BOOL && !cJSON_IsBool(it))
            rv = md_fail(where, "\"%s\" must be true or false, got %s",
                         it->string, md_show(it, buf, sizeof buf));
        else if (k == HC_OPTIM_KEY_BOOL)
            hc_lr_set(c, it->string, cJSON_IsTrue(it));
        else if (cJSON_IsNull(it) && !strcmp(it->string, "warmup_target"))
            continue;
        else if (!cJSON_IsNumber(it))
            rv = md_fail(where, "\"%s\" must be a number, got %s",
                         it->string, md_show(it, buf, sizeof buf));
        else
            hc_lr_set(c, it->string, it->valuedouble);
        if (rv)
            return rv;
    }
    if (s->kind == HC_LR_PIECEWISE) {
        if (nb + 1 != s->n_values)
            return md_fail(where, "has %u boundaries and %u values; it needs "
                           "one value more than boundaries", nb, s->n_values);
        c->lr = s->values[0];
    } else if (!md_get(cfg, "initial_learning_rate") ||
               !md_get(cfg, "decay_steps") ||
               ((s->kind == HC_LR_EXPONENTIAL ||
                 s->kind == HC_LR_INVERSE_TIME) && !md_get(cfg, "decay_rate")))
        return md_fail(where, "needs initial_learning_rate, decay_steps%s",
                       s->kind == HC_LR_EXPONENTIAL ||
                       s->kind == HC_LR_INVERSE_TIME ? " and decay_rate" : "");
    return HC_OK;
}

/* One key of an optimizer object: a number, true/false, or the words of
 * exclude_from_weight_decay. */
static int read_optim_key(const cJSON *it, const char *where,
                          struct hc_optim_conf *c)
{
    char buf[64];

    switch (hc_optim_key(c->type, it->string)) {
    case HC_OPTIM_KEY_FLOAT:
        if (cJSON_IsObject(it) && !strcmp(it->string, "learning_rate"))
            return read_schedule(it, where, c);
        if (!cJSON_IsNumber(it))
            return md_fail(where, "\"%s\" must be a number, got %s",
                           it->string, md_show(it, buf, sizeof buf));
        hc_optim_set(c, it->string, it->valuedouble);
        return HC_OK;
    case HC_OPTIM_KEY_BOOL:
        if (!cJSON_IsBool(it))
            return md_fail(where, "\"%s\" must be true or false, got %s",
                           it->string, md_show(it, buf, sizeof buf));
        hc_optim_set(c, it->string, cJSON_IsTrue(it));
        return HC_OK;
    case HC_OPTIM_KEY_WORDS:
        if (!cJSON_IsArray(it))
            return md_fail(where, "\"%s\" must be a list of words like "
                           "[\"bias\"], got %s", it->string,
                           md_show(it, buf, sizeof buf));
        for (const cJSON *w = it->child; w; w = w->next) {
            int rv;

            if (!cJSON_IsString(w))
                return md_fail(where, "\"%s\" must be a list of words, got "
                               "%s in it", it->string,
                               md_show(w, buf, sizeof buf));
            if ((rv = hc_optim_exclude_add(c, w->valuestring, where)))
                return rv;
        }
        return HC_OK;
    case HC_OPTIM_KEY_NONE:
        break;
    }
    return HC_OK;       /* "type": md_check_keys let nothing else through */
}

/* An optimizer value, "adam" or {"type": "adam", …}, into *c: Keras's
 * names and defaults (hc_optim_defaults), then hc_optim_validate — the
 * limits the shards apply too. "sgd" with a momentum other than 0 is the
 * momentum type. `source` names the file. */
static int read_optim(const cJSON *o, const char *source,
                      struct hc_optim_conf *c)
{
    const char *keys[20];
    enum hc_optim t;
    const char *s;
    char where[WHERE_MAX], buf[64];
    int rv;

    snprintf(where, sizeof where, "%.500s: optimizer", source);
    if (cJSON_IsString(o)) {
        if ((rv = optim_type(o->valuestring, where, &t)))
            return rv;
        hc_optim_defaults(t, c);
        return HC_OK;
    }
    if (!cJSON_IsObject(o))
        return md_fail(where, "must be a name (\"adam\") or an object "
                       "{\"type\": \"adam\", \"learning_rate\": 0.001}, got "
                       "%s", md_show(o, buf, sizeof buf));
    if ((rv = md_get_str(o, "type", where, &s)))
        return rv;
    if (!s)
        return md_missing(where, "type", "\"adam\"");
    if ((rv = optim_type(s, where, &t)))
        return rv;
    /* sgd's keys are the momentum type's; momentum 0 makes it sgd again */
    hc_optim_defaults(t == HC_OPT_SGD ? HC_OPT_MOMENTUM : t, c);
    snprintf(where, sizeof where, "%.500s: optimizer (%s)", source,
             hc_optim_name(t));
    keys[0] = "type";
    hc_optim_keys(c->type, keys + 1, sizeof keys / sizeof keys[0] - 1);
    if ((rv = md_check_keys(o, keys, where)))
        return rv;
    for (const cJSON *it = o->child; it; it = it->next)
        if ((rv = read_optim_key(it, where, c)))
            return rv;
    if (c->type == HC_OPT_MOMENTUM && c->momentum == 0.0f) {
        if (c->nesterov)
            return md_fail(where, "\"nesterov\": true needs \"momentum\" > 0");
        c->type = HC_OPT_SGD;
    }
    return hc_optim_validate(c, where);
}

static int parse_optim(const cJSON *root, struct hc_model *m)
{
    const cJSON *o = md_get(root, "optimizer");

    if (!o)
        return md_missing(m->source, "optimizer", "\"adam\"");
    return read_optim(o, m->source, &m->optim);
}

int hc_model_optim_from_json(const char *text, size_t len, const char *source,
                             struct hc_optim_conf *out)
{
    cJSON *o = cJSON_ParseWithLength(text, len);
    struct hc_optim_conf c;
    int rv;

    if (!o)
        return md_fail(source, "the optimizer settings are not valid JSON");
    rv = read_optim(o, source, &c);
    cJSON_Delete(o);
    if (rv == HC_OK)
        *out = c;
    return rv;
}

/* Keras's metrics: the spellings matched (md_norm), the name Keras gives
 * each, and the config keys each takes besides "name" and "dtype". */
static const struct metric_row {
    const char *norm, *name;
    enum hc_eval_metric_kind kind;
} metric_rows[] = {
    { "accuracy", "accuracy", HC_EM_ACCURACY },
    { "acc", "accuracy", HC_EM_ACCURACY },
    { "binaryaccuracy", "binary_accuracy", HC_EM_BINARY_ACCURACY },
    { "categoricalaccuracy", "categorical_accuracy",
      HC_EM_CATEGORICAL_ACCURACY },
    { "sparsecategoricalaccuracy", "sparse_categorical_accuracy",
      HC_EM_SPARSE_CATEGORICAL_ACCURACY },
    { "topkcategoricalaccuracy", "top_k_categorical_accuracy",
      HC_EM_TOP_K },
    { "sparsetopkcategoricalaccuracy", "sparse_top_k_categorical_accuracy",
      HC_EM_SPARSE_TOP_K },
    { "auc", "auc", HC_EM_AUC },
};

#define METRICS_SUPPORTED "accuracy, binary_accuracy (threshold), " \
    "categorical_accuracy, sparse_categorical_accuracy, " \
    "top_k_categorical_accuracy (k), sparse_top_k_categorical_accuracy (k), " \
    "AUC (curve \"ROC\", exact)"

static const struct metric_row *metric_row(const char *s)
{
    char n[48];
    size_t i;

    md_norm(s, n, sizeof n);
    for (i = 0; i < sizeof metric_rows / sizeof metric_rows[0]; i++)
        if (!strcmp(metric_rows[i].norm, n))
            return &metric_rows[i];
    return NULL;
}

/* AUC's config: what computes the exact ROC AUC of one flattened list is
 * accepted; num_thresholds only tunes Keras's approximation. */
static int auc_key(const cJSON *v, const char *where)
{
    char buf[64], n[48];
    const char *k = v->string;

    if (!strcmp(k, "num_thresholds"))
        return HC_OK;
    if (!strcmp(k, "curve")) {
        if (cJSON_IsString(v) && !strcmp(md_norm(v->valuestring, n, sizeof n),
                                         "roc"))
            return HC_OK;
        return md_fail(where, "curve %s is not supported; hetps computes "
                       "the ROC AUC (curve \"ROC\")", md_show(v, buf,
                                                             sizeof buf));
    }
    if (!strcmp(k, "summation_method")) {
        if (cJSON_IsString(v) && !strcmp(v->valuestring, "interpolation"))
            return HC_OK;
        return md_fail(where, "summation_method %s is not supported; hetps "
                       "computes the exact AUC (\"interpolation\")",
                       md_show(v, buf, sizeof buf));
    }
    if ((!strcmp(k, "multi_label") || !strcmp(k, "from_logits")) &&
        (cJSON_IsFalse(v) || cJSON_IsNull(v)))
        return HC_OK;
    if ((!strcmp(k, "num_labels") || !strcmp(k, "label_weights") ||
         !strcmp(k, "thresholds")) && cJSON_IsNull(v))
        return HC_OK;
    return md_fail(where, "%.40s %s is not supported; AUC takes num_thresholds,"
                   " curve \"ROC\", summation_method \"interpolation\", "
                   "multi_label false, from_logits false, num_labels, "
                   "label_weights and thresholds null", k,
                   md_show(v, buf, sizeof buf));
}

/* One config key of a metric object (not name or dtype). */
static int metric_key(struct hc_eval_metric *e, const cJSON *v,
                      const char *where)
{
    char buf[64];

    if (e->kind == HC_EM_AUC)
        return auc_key(v, where);
    if (e->kind == HC_EM_BINARY_ACCURACY && !strcmp(v->string, "threshold")) {
        if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1) {
            e->threshold = (float)v->valuedouble;
            return HC_OK;
        }
        return md_fail(where, "threshold %s must be a number in [0, 1]",
                       md_show(v, buf, sizeof buf));
    }
    if ((e->kind == HC_EM_TOP_K || e->kind == HC_EM_SPARSE_TOP_K) &&
        !strcmp(v->string, "k")) {
        if (cJSON_IsNumber(v) && v->valuedouble >= 1 &&
            v->valuedouble <= 1e6 && v->valuedouble == (int)v->valuedouble) {
            e->k = (int)v->valuedouble;
            return HC_OK;
        }
        return md_fail(where, "k %s must be a whole number >= 1",
                       md_show(v, buf, sizeof buf));
    }
    return md_fail(where, "%.40s %s is not supported; %s takes name, dtype%s",
                   v->string, md_show(v, buf, sizeof buf), e->name,
                   e->kind == HC_EM_BINARY_ACCURACY ? " and threshold"
                   : e->kind == HC_EM_TOP_K || e->kind == HC_EM_SPARSE_TOP_K
                   ? " and k" : "");
}

/* A metric object: Keras 3 {"module": "keras.metrics", "class_name": "AUC",
 * "config": {...}, "registered_name": null} or tf.keras 2's
 * {"class_name": "AUC", "config": {...}}. */
static int metric_object(const cJSON *it, const char *where,
                         struct hc_eval_metric *e)
{
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(it, "class_name");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(it, "config");
    const cJSON *mod = cJSON_GetObjectItemCaseSensitive(it, "module");
    const struct metric_row *r;
    char buf[96];
    int rv;

    if (cJSON_IsString(cls) && !metric_row(cls->valuestring))
        return md_fail(where, "unsupported metric class %s; supported: "
                       METRICS_SUPPORTED, md_show(cls, buf, sizeof buf));
    if (!cJSON_IsString(cls) || !(r = metric_row(cls->valuestring)) ||
        (mod && !cJSON_IsNull(mod) && (!cJSON_IsString(mod) ||
                                        strcmp(mod->valuestring,
                                               "keras.metrics"))))
        return md_fail(where, "unsupported metric %s; supported: "
                       METRICS_SUPPORTED, md_show(it, buf, sizeof buf));
    e->kind = r->kind;
    snprintf(e->name, sizeof e->name, "%s", r->name);
    if (cfg && !cJSON_IsNull(cfg) && !cJSON_IsObject(cfg))
        return md_fail(where, "%s: config must be an object, got %s",
                       r->name, md_show(cfg, buf, sizeof buf));
    for (const cJSON *v = cfg ? cfg->child : NULL; v; v = v->next) {
        if (!strcmp(v->string, "name") && cJSON_IsString(v) &&
            v->valuestring[0] && strlen(v->valuestring) < sizeof e->name) {
            snprintf(e->name, sizeof e->name, "%s", v->valuestring);
            continue;
        }
        if (!strcmp(v->string, "dtype"))
            continue;
        if ((rv = metric_key(e, v, where)) != HC_OK)
            return rv;
    }
    return HC_OK;
}

static int parse_metrics(const cJSON *root, struct hc_model *m)
{
    const cJSON *ms = md_get(root, "metrics");
    char where[WHERE_MAX], buf[96];
    const struct metric_row *r;
    int rv, i;

    snprintf(where, sizeof where, "%.500s: metrics", m->source);
    if (!ms)
        return HC_OK;
    if (!cJSON_IsArray(ms))
        return md_fail(where, "must be an array like [\"accuracy\"], got %s",
                       md_show(ms, buf, sizeof buf));
    for (const cJSON *it = ms->child; it; it = it->next) {
        struct hc_eval_metric e = { .threshold = 0.5f, .k = 5 };

        if (cJSON_IsString(it)) {
            if (!(r = metric_row(it->valuestring)))
                return md_fail(where, "unsupported metric %s; supported: "
                               METRICS_SUPPORTED, md_show(it, buf,
                                                          sizeof buf));
            e.kind = r->kind;
            snprintf(e.name, sizeof e.name, "%s", r->name);
        } else if (cJSON_IsObject(it)) {
            if ((rv = metric_object(it, where, &e)) != HC_OK)
                return rv;
        } else {
            return md_fail(where, "unsupported metric %s; supported: "
                           METRICS_SUPPORTED, md_show(it, buf, sizeof buf));
        }
        for (i = 0; i < m->n_metrics; i++)
            if (!strcmp(m->metrics[i].name, e.name))
                return md_fail(where, "metric %s is listed twice", e.name);
        if (m->n_metrics == HC_MODEL_MAX_METRICS)
            return md_fail(where, "more than %d metrics",
                           HC_MODEL_MAX_METRICS);
        m->metrics[m->n_metrics++] = e;
        if (e.kind == HC_EM_ACCURACY)
            m->metric_accuracy = 1;
    }
    return HC_OK;
}

/* ---- signature ---------------------------------------------------------- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static void sig_add(uint64_t *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void sig_add(uint64_t *h, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n && i < (int)sizeof buf - 1; i++) {
        *h ^= (unsigned char)buf[i];
        *h *= FNV_PRIME;
    }
}

static uint64_t signature(const struct hc_model *m)
{
    const struct hc_optim_conf *o = &m->optim;
    uint64_t h = FNV_OFFSET;
    int chain = hc_model_is_chain(m);
    char si[48], so[48];

    sig_add(&h, "hetps-model 1\ninput %s\n",
            md_fmt_shape(&m->input, si, sizeof si));
    for (int q = 0; !chain && q < m->n_inputs; q++)
        sig_add(&h, "graph input %s %s%s\n", m->inputs[q].name,
                md_fmt_shape(&m->inputs[q].shape, si, sizeof si),
                m->inputs[q].ids ? " int64" : "");
    for (int i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *l = &m->layers[i];
        sig_add(&h, "layer %s %s %s f%d k%d,%d s%d,%d p%d q%d,%d u%d "
                "r%.9g b%d %s->%s\n", hc_layer_type_name(l->type), l->name,
                hc_act_name(l->act), l->filters, l->kh, l->kw, l->sh, l->sw,
                l->same, l->ph, l->pw, l->units, (double)l->rate, l->use_bias,
                md_fmt_shape(&l->in, si, sizeof si),
                md_fmt_shape(&l->out, so, sizeof so));
        if (l->max_value || l->negative_slope || l->threshold)
            sig_add(&h, "relu %.9g,%.9g,%.9g\n", (double)l->max_value,
                    (double)l->negative_slope, (double)l->threshold);
        if (l->type == HC_LAYER_BATCHNORM)
            sig_add(&h, "bn %.9g,%.9g,%d,%d\n", (double)l->momentum,
                    (double)l->epsilon, l->center, l->scale);
        if (l->pad[0] || l->pad[1] || l->pad[2] || l->pad[3])
            sig_add(&h, "pad %d,%d,%d,%d\n", l->pad[0], l->pad[1],
                    l->pad[2], l->pad[3]);
        if (l->epsilon)
            sig_add(&h, "eps %.9g\n", (double)l->epsilon);
        if (chain)
            continue;
        /* A graph's edges; a chain has none of these lines, so its
         * signature is what it was before graphs. */
        sig_add(&h, "from");
        for (int k = 0; k < l->n_in; k++)
            sig_add(&h, " %s", hc_model_node_name(m, l->in_from[k]));
        sig_add(&h, " a%d\n", l->axis);
    }
    for (int v = 0; v < m->n_vars; v++) {
        const struct hc_var_def *d = &m->vars[v];
        sig_add(&h, "var %s", d->name);
        for (int k = 0; k < d->ndim; k++)
            sig_add(&h, " %d", d->shape[k]);
        sig_add(&h, " init%d fan%d,%d", (int)d->init, d->fan_in, d->fan_out);
        if (d->init > HC_INIT_ZEROS)    /* not in older stores' signatures */
            sig_add(&h, " par%.9g,%.9g,%d,%d", (double)d->init_par.a,
                    (double)d->init_par.b, (int)d->init_par.mode,
                    (int)d->init_par.dist);
        if (d->reg.l1 || d->reg.l2)     /* likewise */
            sig_add(&h, " reg%.9g,%.9g", (double)d->reg.l1,
                    (double)d->reg.l2);
        if (d->moving)              /* likewise */
            sig_add(&h, " moving%.9g,%d", (double)d->momentum, d->moments_of);
        if (d->table_rows)
            sig_add(&h, " rows%llu", (unsigned long long)d->table_rows);
        sig_add(&h, "\n");
    }
    sig_add(&h, "loss %d", (int)m->loss);
    if (m->loss > HC_LOSS_MSE || m->loss_par.from_logits) /* not in older
                                                           * signatures */
        sig_add(&h, " logits%d s%.9g d%.9g", m->loss_par.from_logits,
                (double)m->loss_par.label_smoothing,
                (double)m->loss_par.delta);
    sig_add(&h, "\noptim %d lr%.9g m%.9g n%d b%.9g,%.9g e%.9g\n",
            (int)o->type, (double)o->lr, (double)o->momentum,
            o->nesterov, (double)o->beta1, (double)o->beta2, (double)o->eps);
    /* Settings hetps added later: only where used, so that the models of
     * before keep their signature (and their stores). */
    if (o->type > HC_OPT_ADAM || o->amsgrad || o->weight_decay != 0.0f ||
        o->clipvalue != 0.0f || o->clipnorm != 0.0f ||
        o->global_clipnorm != 0.0f || o->wd_exclude[0] ||
        o->sched.kind != HC_LR_CONSTANT) {
        char d[HC_OPTIM_DESCRIBE_MAX];

        sig_add(&h, "optim2 %s\n", hc_optim_describe(o, d, sizeof d));
    }
    return h;
}

/* ---- the model ---------------------------------------------------------- */

static const char *const keys_model[] = {
    "name", "input_shape", "inputs", "layers", "output", "loss",
    "optimizer", "metrics", "batch_size", "epochs", "seed", "shuffle", NULL};

static int parse_root(const cJSON *root, struct hc_model *m)
{
    const cJSON *it;
    int have_input = 0, shuffle, rv;
    const char *s;
    char buf[64];

    if (!cJSON_IsObject(root))
        return md_fail(m->source, "a model must be a JSON object {\"layers\": "
                       "[…], …}, got %s", md_show(root, buf, sizeof buf));
    if ((rv = md_check_keys(root, keys_model, m->source)) ||
        (rv = md_get_str(root, "name", m->source, &s)))
        return rv;
    if (s && (strlen(s) >= HC_NAME_MAX || !md_name_ok(s)))
        return md_fail(m->source, "\"name\" must be 1 to %d letters, digits, "
                       "'_', '-' or '.' (not \".\" or \"..\"), got \"%.40s\"",
                       HC_NAME_MAX - 1, s);
    snprintf(m->name, sizeof m->name, "%s", s ? s : "sequential");
    if ((it = md_get(root, "input_shape")) != NULL) {
        if ((rv = md_parse_shape(it, m->source, &m->input)))
            return rv;
        have_input = 1;
    }
    if ((rv = md_read_layers(root, m, have_input)) ||
        (rv = md_read_loss(root, m)) || (rv = check_output(m)) ||
        (rv = parse_optim(root, m)) || (rv = parse_metrics(root, m)) ||
        (rv = md_get_int(root, "batch_size", m->source, 32, 1, 1 << 20,
                         &m->batch_size)) ||
        (rv = md_get_int(root, "epochs", m->source, 1, 1, 1000000,
                         &m->epochs)) ||
        (rv = md_get_bool(root, "shuffle", m->source, 1, &shuffle)))
        return rv;
    m->file_order = !shuffle;
    if ((it = md_get(root, "seed")) != NULL) {
        if (!md_is_int(it) || it->valuedouble < 0 ||
            it->valuedouble > SEED_MAX)
            return md_fail(m->source, "\"seed\" must be an integer from 0 to "
                           "2^53, got %s", md_show(it, buf, sizeof buf));
        m->seed = (uint64_t)it->valuedouble;
    }
    m->signature = signature(m);
    return HC_OK;
}

/* Line and column (1-based, counting characters) of byte offset off. */
static void line_col(const char *s, size_t off, int *line, int *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') {
            ++*line;
            *col = 1;
        } else if (((unsigned char)s[i] & 0xC0) != 0x80) {
            ++*col;
        }
    }
}

static int syntax_error(const char *json, size_t len, size_t off,
                        const char *source, const char *what)
{
    char near[24];
    size_t n = 0;
    int line, col;

    if (off > len)
        off = len;
    line_col(json, off, &line, &col);
    for (size_t i = off; i < len && n < 16 && json[i] != '\n'; i++)
        near[n++] = isprint((unsigned char)json[i]) ? json[i] : '?';
    near[n] = '\0';
    if (n == 0)
        return hc_err_set(HC_ERR_CONFIG, "%s: line %d, column %d: %s at the "
                          "end of the input", source, line, col, what);
    return hc_err_set(HC_ERR_CONFIG, "%s: line %d, column %d: %s near '%s'",
                      source, line, col, what, near);
}

/* A model's JSON text, with the command line's compile settings (c may be
 * NULL). */
static int parse_text(const char *json, size_t len, const char *source,
                      const struct hc_model_compile *c, struct hc_model *out)
{
    struct hc_model *m = NULL;
    cJSON *root = NULL;
    const char *end = NULL;
    size_t off;
    int rv;

    if (!json || !out)
        return hc_err_set(HC_ERR_INVAL, "hc_model_parse: NULL argument");
    if (!source)
        source = "model";
    if (len > MODEL_FILE_MAX)
        return hc_err_set(HC_ERR_CONFIG, "%s: %zu bytes is too large for a "
                          "model file (at most %u)", source, len,
                          MODEL_FILE_MAX);
    if (!(m = calloc(1, sizeof *m)))
        return hc_err_set(HC_ERR_NOMEM, "%s: out of memory", source);
    snprintf(m->source, sizeof m->source, "%s", source);
    root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    off = end ? (size_t)(end - json) : 0;
    if (!root) {
        rv = syntax_error(json, len, off, m->source, "JSON syntax error");
        goto out;
    }
    while (off < len && (json[off] == ' ' || json[off] == '\t' ||
                         json[off] == '\r' || json[off] == '\n'))
        off++;
    if (off < len && json[off] != '\0') {
        rv = syntax_error(json, len, off, m->source,
                          "unexpected text after the JSON value");
        goto out;
    }
    if (md_keras_is(root)) {
        cJSON *native = NULL;

        if ((rv = md_keras_translate(root, m->source, &native)) != HC_OK)
            goto out;
        cJSON_Delete(root);
        root = native;
    }
    if (c && (rv = md_apply_compile(root, c)) != HC_OK)
        goto out;
    if ((rv = parse_root(root, m)) == HC_OK)
        *out = *m;
out:
    cJSON_Delete(root);
    free(m);
    return rv;
}

int hc_model_parse(const char *json, size_t len, const char *source,
                   struct hc_model *out)
{
    return parse_text(json, len, source, NULL, out);
}

int hc_model_load(const char *path, struct hc_model *out)
{
    return hc_model_load_compiled(path, NULL, out);
}

int hc_model_load_compiled(const char *path, const struct hc_model_compile *c,
                           struct hc_model *out)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t n;
    int rv;

    if (!path || !out)
        return hc_err_set(HC_ERR_INVAL, "hc_model_load_compiled: NULL "
                          "argument");
    if (!(f = fopen(path, "rb"))) {
        rv = hc_err_set(errno == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                        "model file %s: cannot open: %s", path,
                        strerror(errno));
        goto out;
    }
    if (!(buf = malloc(MODEL_FILE_MAX + 1))) {
        rv = hc_err_set(HC_ERR_NOMEM, "model file %s: out of memory", path);
        goto out;
    }
    n = fread(buf, 1, MODEL_FILE_MAX + 1, f);
    if (ferror(f)) {
        rv = hc_err_set(HC_ERR_IO, "model file %s: read failed: %s", path,
                        strerror(errno));
        goto out;
    }
    if (n >= 8 && !memcmp(buf, "\211HDF\r\n\032\n", 8)) {
        rv = hc_err_set(HC_ERR_CONFIG, "model file %s is an HDF5 file: "
                        "weights (give it to --weights or --initial-weights) "
                        "or Keras 2's legacy .h5 model, which hetps does not "
                        "read; give the model as model.to_json()'s JSON or "
                        "a .keras file", path);
        goto out;
    }
    if (n >= 4 && !memcmp(buf, "PK\3\4", 4)) {     /* a .keras archive */
        char src[512];

        free(buf);
        buf = NULL;
        snprintf(src, sizeof src, "%.480s: config.json", path);
        if ((rv = hc_keras_archive_config(path, MODEL_FILE_MAX, &buf, &n)) ==
            HC_OK)
            rv = parse_text(buf, n, src, c, out);
        goto out;
    }
    rv = parse_text(buf, n, path, c, out);
out:
    free(buf);
    if (f)
        fclose(f);
    return rv;
}
/* ---- initial values ----------------------------------------------------- */

void hc_model_init_params(const struct hc_model *m, float *params)
{
    size_t off = 0;

    for (int v = 0; v < m->n_vars; v++) {
        const struct hc_var_def *d = &m->vars[v];

        md_init_values(d, m->seed, v, params + off);
        off += d->size;
    }
}

size_t hc_model_var_offset(const struct hc_model *m, int v)
{
    size_t off = 0;

    if (v < 0 || v > m->n_vars)
        return (size_t)-1;
    for (int i = 0; i < v; i++)
        off += m->vars[i].size;
    return off;
}
