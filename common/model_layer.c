/*
 * model_layer.c — the layers of a model file (see model.h), read in order
 * from its "layers" array: each layer's type (Keras's class names accepted:
 * "MaxPooling2D" is maxpool2d), name (Keras's defaults conv2d, conv2d_1 …;
 * unique), device, keys and hyper-parameters; then, from its input shape,
 * its output shape and its variables in Keras's layout and names
 * ("conv2d/kernel" (kh, kw, in, out), "conv2d/bias" (out), "dense/kernel"
 * (in, out), "dense/bias" (out)). A layer that does not fit its input
 * fails naming the layer and the shapes.
 */
#include "model_impl.h"

#include "err.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define DIM_MAX         65536               /* any one dimension, filters, units */
#define ELEMS_MAX       2147483647ull       /* one activation or variable */
#define PARAMS_MAX      (1ull << 32)        /* whole model, in floats */

/* ---- names of things ---------------------------------------------------- */

static const char *const act_names[] = {
    [HC_ACT_LINEAR] = "linear",   [HC_ACT_RELU] = "relu",
    [HC_ACT_SIGMOID] = "sigmoid", [HC_ACT_TANH] = "tanh",
    [HC_ACT_SOFTMAX] = "softmax",
};

static const char *const type_names[] = {
    [HC_LAYER_CONV2D] = "conv2d",   [HC_LAYER_MAXPOOL2D] = "maxpool2d",
    [HC_LAYER_FLATTEN] = "flatten", [HC_LAYER_DENSE] = "dense",
    [HC_LAYER_DROPOUT] = "dropout", [HC_LAYER_ACTIVATION] = "activation",
};

/* Keras's default name prefixes. */
static const char *const type_prefix[] = {
    [HC_LAYER_CONV2D] = "conv2d",   [HC_LAYER_MAXPOOL2D] = "max_pooling2d",
    [HC_LAYER_FLATTEN] = "flatten", [HC_LAYER_DENSE] = "dense",
    [HC_LAYER_DROPOUT] = "dropout", [HC_LAYER_ACTIVATION] = "activation",
};

#define N_TYPES ((int)(sizeof type_names / sizeof type_names[0]))

const char *hc_act_name(enum hc_act a)
{
    if ((unsigned)a >= sizeof act_names / sizeof act_names[0])
        return "unknown";
    return act_names[a];
}

const char *hc_layer_type_name(enum hc_layer_type t)
{
    if ((unsigned)t >= (unsigned)N_TYPES)
        return "unknown";
    return type_names[t];
}

static int parse_type(const char *s, enum hc_layer_type *t)
{
    static const struct { const char *norm; enum hc_layer_type t; } tab[] = {
        {"conv2d", HC_LAYER_CONV2D},       {"convolution2d", HC_LAYER_CONV2D},
        {"maxpool2d", HC_LAYER_MAXPOOL2D}, {"maxpooling2d", HC_LAYER_MAXPOOL2D},
        {"flatten", HC_LAYER_FLATTEN},     {"dense", HC_LAYER_DENSE},
        {"dropout", HC_LAYER_DROPOUT},     {"activation", HC_LAYER_ACTIVATION},
    };
    char buf[32];

    md_norm(s, buf, sizeof buf);
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strcmp(buf, tab[i].norm) == 0) {
            *t = tab[i].t;
            return 0;
        }
    return -1;
}

/* Optional "activation" key: a name, or null for linear. */
static int get_act(const cJSON *obj, const char *where, enum hc_act def,
                   enum hc_act *out)
{
    const cJSON *it = md_get(obj, "activation");
    char buf[64], n[32];

    *out = def;
    if (!it || cJSON_IsNull(it))
        return HC_OK;
    if (cJSON_IsString(it)) {
        md_norm(it->valuestring, n, sizeof n);
        for (int a = 0; a < (int)(sizeof act_names / sizeof act_names[0]); a++)
            if (strcmp(n, act_names[a]) == 0) {
                *out = (enum hc_act)a;
                return HC_OK;
            }
    }
    return md_fail(where, "unsupported activation %s; use one of \"relu\", "
                   "\"sigmoid\", \"tanh\", \"softmax\", \"linear\"",
                   md_show(it, buf, sizeof buf));
}

static int get_padding(const cJSON *obj, const char *where, int *same)
{
    const char *s;
    char n[16];
    int rv;

    *same = 0;
    if ((rv = md_get_str(obj, "padding", where, &s)) != HC_OK || !s)
        return rv;
    md_norm(s, n, sizeof n);
    if (strcmp(n, "same") == 0 || strcmp(n, "valid") == 0) {
        *same = n[0] == 's';
        return HC_OK;
    }
    return md_fail(where, "\"padding\" must be \"valid\" or \"same\", got "
                   "\"%.40s\"", s);
}

/* "cpu", "gpu", "cpu:N" or "gpu:N", any case; stored lower-case. */
static int get_device(const cJSON *obj, const char *where, char *dev,
                      size_t len)
{
    const char *s, *p;
    size_t n;
    int rv;

    dev[0] = '\0';
    if ((rv = md_get_str(obj, "device", where, &s)) != HC_OK || !s)
        return rv;
    n = strlen(s);
    if (n < len && n >= 3 &&
        (strncasecmp(s, "cpu", 3) == 0 || strncasecmp(s, "gpu", 3) == 0)) {
        p = s + 3;
        if (*p == ':' && isdigit((unsigned char)p[1]))
            for (p++; isdigit((unsigned char)*p); p++)
                ;
        if (*p == '\0') {
            for (size_t i = 0; i <= n; i++)
                dev[i] = (char)tolower((unsigned char)s[i]);
            return HC_OK;
        }
    }
    return md_fail(where, "\"device\" must be like \"cpu\", \"cpu:1\" or "
                   "\"gpu:0\", got \"%.40s\"", s);
}

const char *md_fmt_shape(const struct hc_shape *s, char *buf, size_t len)
{
    if (s->rank == 3)
        snprintf(buf, len, "(%d, %d, %d)", s->dims[0], s->dims[1],
                 s->dims[2]);
    else
        snprintf(buf, len, "(%d)", s->dims[0]);
    return buf;
}

static uint64_t shape_elems(const struct hc_shape *s)
{
    uint64_t n = 1;

    for (int i = 0; i < s->rank; i++)
        n *= (uint64_t)s->dims[i];
    return n;
}

/* ---- shapes ------------------------------------------------------------- */

int md_parse_shape(const cJSON *it, const char *where,
                   struct hc_shape *s)
{
    char buf[64];
    int n, rv, i = 0;

    if (!cJSON_IsArray(it))
        return md_fail(where, "\"input_shape\" must be an array [H, W, C] or "
                       "[N], got %s", md_show(it, buf, sizeof buf));
    n = cJSON_GetArraySize(it);
    if (n == 2)
        return md_fail(where, "\"input_shape\" has 2 dimensions; images need "
                       "a channel count: write [H, W, 1] for grayscale");
    if (n != 1 && n != 3)
        return md_fail(where, "\"input_shape\" must be [H, W, C] or [N], got "
                       "%d dimensions", n);
    s->rank = n;
    for (const cJSON *d = it->child; d; d = d->next, i++)
        if ((rv = md_int_value(d, "input_shape", where, 1, DIM_MAX,
                               &s->dims[i])) != HC_OK)
            return rv;
    if (shape_elems(s) > ELEMS_MAX)
        return md_fail(where, "\"input_shape\" has more than %llu elements",
                       ELEMS_MAX);
    return HC_OK;
}

/* One spatial output size: valid floor((n − k)/s) + 1, same ceil(n/s). */
static int out_dim(int n, int k, int s, int same)
{
    return same ? (n + s - 1) / s : (n - k) / s + 1;
}

/* ---- variables ---------------------------------------------------------- */

static int add_var(struct hc_model *m, const char *where,
                   const struct hc_layer_spec *l, const char *what, int ndim,
                   const int *shape, enum hc_init init, int fan_in,
                   int fan_out, int *idx)
{
    struct hc_var_def *v;
    uint64_t size = 1;

    if (m->n_vars >= HC_MODEL_MAX_VARS)
        return md_fail(where, "more than %d variables", HC_MODEL_MAX_VARS);
    for (int i = 0; i < ndim; i++)
        size *= (uint64_t)shape[i];     /* each ≤ 65536, ndim ≤ 4: no wrap */
    if (size > ELEMS_MAX)
        return md_fail(where, "variable \"%s/%s\" would have %llu elements, "
                       "more than %llu; make the layer smaller", l->name, what,
                       (unsigned long long)size, ELEMS_MAX);
    v = &m->vars[m->n_vars];
    snprintf(v->name, sizeof v->name, "%s/%s", l->name, what);
    v->ndim = ndim;
    memcpy(v->shape, shape, (size_t)ndim * sizeof *shape);
    v->size = (size_t)size;
    v->init = init;
    v->fan_in = fan_in;
    v->fan_out = fan_out;
    if ((uint64_t)m->n_params + size > PARAMS_MAX)
        return md_fail(where, "the model would have more than %llu parameters",
                       PARAMS_MAX);
    m->n_params += v->size;
    *idx = m->n_vars++;
    return HC_OK;
}

/* ---- layers ------------------------------------------------------------- */

static const char *const keys_conv[] = {
    "type", "name", "device", "input_shape", "filters", "kernel_size",
    "strides", "padding", "activation", "use_bias", NULL};
static const char *const keys_pool[] = {
    "type", "name", "device", "input_shape", "pool_size", "strides",
    "padding", NULL};
static const char *const keys_flatten[] = {
    "type", "name", "device", "input_shape", NULL};
static const char *const keys_dense[] = {
    "type", "name", "device", "input_shape", "units", "activation",
    "use_bias", NULL};
static const char *const keys_dropout[] = {
    "type", "name", "device", "input_shape", "rate", NULL};
static const char *const keys_act[] = {
    "type", "name", "device", "input_shape", "activation", NULL};

static const char *const *const layer_keys[] = {
    [HC_LAYER_CONV2D] = keys_conv,     [HC_LAYER_MAXPOOL2D] = keys_pool,
    [HC_LAYER_FLATTEN] = keys_flatten, [HC_LAYER_DENSE] = keys_dense,
    [HC_LAYER_DROPOUT] = keys_dropout, [HC_LAYER_ACTIVATION] = keys_act,
};

int md_name_ok(const char *s)
{
    /* Names become paths (NAME/kernel.npy): never "." or "..". */
    if (!*s || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' &&
            *s != '.')
            return 0;
    return 1;
}

/* Type and name of layer i; where gets "SRC: layers[i] (type "name")". */
static int layer_ident(struct hc_model *m, int i, const cJSON *lj,
                       int *counters, struct hc_layer_spec *l, char *where)
{
    const char *type, *name;
    char w0[WHERE_MAX];
    int rv;

    snprintf(w0, sizeof w0, "%.500s: layers[%d]", m->source, i);
    if (!cJSON_IsObject(lj))
        return md_fail(w0, "a layer must be an object like {\"type\": "
                       "\"dense\", \"units\": 10}");
    if ((rv = md_get_str(lj, "type", w0, &type)) != HC_OK)
        return rv;
    if (!type)
        return md_missing(w0, "type", "\"conv2d\" or \"dense\"");
    if (parse_type(type, &l->type) != 0)
        return md_fail(w0, "unknown layer type \"%.40s\"; supported: conv2d "
                       "(Conv2D), maxpool2d (MaxPooling2D), flatten, dense, "
                       "dropout, activation", type);
    if ((rv = md_get_str(lj, "name", w0, &name)) != HC_OK)
        return rv;
    if (name) {
        if (strlen(name) >= HC_NAME_MAX || !md_name_ok(name))
            return md_fail(w0, "\"name\" must be 1 to %d letters, digits, "
                           "'_', '-' or '.' (not \".\" or \"..\"), got "
                           "\"%.40s\"", HC_NAME_MAX - 1, name);
        snprintf(l->name, sizeof l->name, "%s", name);
    } else if (counters[l->type]++ == 0) {
        snprintf(l->name, sizeof l->name, "%s", type_prefix[l->type]);
    } else {
        snprintf(l->name, sizeof l->name, "%s_%d", type_prefix[l->type],
                 counters[l->type] - 1);
    }
    snprintf(where, WHERE_MAX, "%.520s (%s \"%s\")", w0, type_names[l->type],
             l->name);
    for (int j = 0; j < i; j++)
        if (strcmp(m->layers[j].name, l->name) == 0)
            return md_fail(where, "name \"%s\" is already used by layers[%d]; "
                           "layer names must be unique", l->name, j);
    return HC_OK;
}

/* Hyper-parameters of layer l (keys already checked). */
static int layer_params(const cJSON *lj, const char *where,
                        struct hc_layer_spec *l)
{
    static const struct md_range rate_r = {0, 1, 0, 1};
    const cJSON *st;
    int rv = HC_OK;

    l->sh = l->sw = 1;
    l->use_bias = 1;
    switch (l->type) {
    case HC_LAYER_CONV2D:
        if (!md_get(lj, "filters"))
            return md_missing(where, "filters", "32");
        if (!md_get(lj, "kernel_size"))
            return md_missing(where, "kernel_size", "[3, 3]");
        if ((rv = md_get_int(lj, "filters", where, 0, 1, DIM_MAX,
                             &l->filters)) ||
            (rv = md_get_pair(lj, "kernel_size", where, 1, DIM_MAX, &l->kh,
                              &l->kw)) ||
            (md_get(lj, "strides") &&
             (rv = md_get_pair(lj, "strides", where, 1, DIM_MAX, &l->sh,
                               &l->sw))) ||
            (rv = get_padding(lj, where, &l->same)) ||
            (rv = get_act(lj, where, HC_ACT_LINEAR, &l->act)) ||
            (rv = md_get_bool(lj, "use_bias", where, 1, &l->use_bias)))
            return rv;
        break;
    case HC_LAYER_MAXPOOL2D:
        l->ph = l->pw = 2;
        if ((md_get(lj, "pool_size") &&
             (rv = md_get_pair(lj, "pool_size", where, 1, DIM_MAX, &l->ph,
                               &l->pw))) ||
            (rv = get_padding(lj, where, &l->same)))
            return rv;
        l->sh = l->ph;
        l->sw = l->pw;
        st = md_get(lj, "strides");
        if (st && !cJSON_IsNull(st) &&
            (rv = md_get_pair(lj, "strides", where, 1, DIM_MAX, &l->sh,
                              &l->sw)))
            return rv;
        l->use_bias = 0;
        break;
    case HC_LAYER_DENSE:
        if (!md_get(lj, "units"))
            return md_missing(where, "units", "10");
        if ((rv = md_get_int(lj, "units", where, 0, 1, 1 << 24, &l->units)) ||
            (rv = get_act(lj, where, HC_ACT_LINEAR, &l->act)) ||
            (rv = md_get_bool(lj, "use_bias", where, 1, &l->use_bias)))
            return rv;
        break;
    case HC_LAYER_DROPOUT:
        if (!md_get(lj, "rate"))
            return md_missing(where, "rate", "0.2");
        l->use_bias = 0;
        return md_get_float(lj, "rate", where, 0, rate_r, &l->rate);
    case HC_LAYER_ACTIVATION:
        if (!md_get(lj, "activation"))
            return md_missing(where, "activation", "\"relu\"");
        l->use_bias = 0;
        return get_act(lj, where, HC_ACT_LINEAR, &l->act);
    case HC_LAYER_FLATTEN:
        l->use_bias = 0;
        break;
    }
    return rv;
}

/* Output shape and variables of layer l, whose input is l->in. */
static int layer_infer(struct hc_model *m, const char *where,
                       struct hc_layer_spec *l)
{
    struct hc_shape *in = &l->in, *out = &l->out;
    char si[48], so[48];
    int shape[4], rv, kh = l->kh, kw = l->kw;

    l->var_kernel = l->var_bias = -1;
    *out = *in;
    switch (l->type) {
    case HC_LAYER_MAXPOOL2D:
        kh = l->ph;
        kw = l->pw;
        /* fall through */
    case HC_LAYER_CONV2D:
        if (in->rank != 3)
            return md_fail(where, "%s needs an image input (H, W, C) but its "
                           "input has shape %s", type_names[l->type],
                           md_fmt_shape(in, si, sizeof si));
        if (!l->same && (kh > in->dims[0] || kw > in->dims[1]))
            return md_fail(where, "%s (%d, %d) is larger than the input %s "
                           "with padding \"valid\"; use a smaller size or "
                           "padding \"same\"",
                           l->type == HC_LAYER_CONV2D ? "kernel_size"
                                                   : "pool_size",
                           kh, kw, md_fmt_shape(in, si, sizeof si));
        out->dims[0] = out_dim(in->dims[0], kh, l->sh, l->same);
        out->dims[1] = out_dim(in->dims[1], kw, l->sw, l->same);
        if (l->type == HC_LAYER_MAXPOOL2D)
            break;
        out->dims[2] = l->filters;
        shape[0] = l->kh;
        shape[1] = l->kw;
        shape[2] = in->dims[2];
        shape[3] = l->filters;
        if (shape_elems(out) > ELEMS_MAX)
            break;      /* reported below, with both shapes */
        if ((rv = add_var(m, where, l, "kernel", 4, shape,
                          HC_INIT_GLOROT_UNIFORM,
                          l->kh * l->kw * in->dims[2],
                          l->kh * l->kw * l->filters, &l->var_kernel)))
            return rv;
        if (l->use_bias &&
            (rv = add_var(m, where, l, "bias", 1, &l->filters, HC_INIT_ZEROS,
                          0, 0, &l->var_bias)))
            return rv;
        break;
    case HC_LAYER_FLATTEN:
        out->rank = 1;
        out->dims[0] = (int)shape_elems(in);    /* in ≤ ELEMS_MAX */
        out->dims[1] = out->dims[2] = 0;
        break;
    case HC_LAYER_DENSE:
        if (in->rank != 1)
            return md_fail(where, "dense needs a flat input (N) but its input "
                           "has shape %s; add {\"type\": \"flatten\"} before "
                           "it", md_fmt_shape(in, si, sizeof si));
        out->dims[0] = l->units;
        shape[0] = in->dims[0];
        shape[1] = l->units;
        if ((rv = add_var(m, where, l, "kernel", 2, shape,
                          HC_INIT_GLOROT_UNIFORM, in->dims[0], l->units,
                          &l->var_kernel)))
            return rv;
        if (l->use_bias &&
            (rv = add_var(m, where, l, "bias", 1, &l->units, HC_INIT_ZEROS,
                          0, 0, &l->var_bias)))
            return rv;
        break;
    case HC_LAYER_DROPOUT:
    case HC_LAYER_ACTIVATION:
        break;
    }
    if (shape_elems(out) > ELEMS_MAX)
        return md_fail(where, "output shape %s (from input %s) has more than "
                       "%llu elements", md_fmt_shape(out, so, sizeof so),
                       md_fmt_shape(in, si, sizeof si), ELEMS_MAX);
    if (l->act == HC_ACT_SOFTMAX && out->rank != 1)
        return md_fail(where, "activation \"softmax\" needs a flat output but "
                       "this layer's output has shape %s; flatten first",
                       md_fmt_shape(out, so, sizeof so));
    return HC_OK;
}

static int parse_layer(struct hc_model *m, int i, const cJSON *lj,
                       int *counters, int *have_input, struct hc_shape *cur)
{
    struct hc_layer_spec *l = &m->layers[i];
    const cJSON *is;
    char where[WHERE_MAX];
    int rv;

    memset(l, 0, sizeof *l);
    if ((rv = layer_ident(m, i, lj, counters, l, where)) ||
        (rv = md_check_keys(lj, layer_keys[l->type], where)) ||
        (rv = get_device(lj, where, l->device, sizeof l->device)) ||
        (rv = layer_params(lj, where, l)))
        return rv;
    if ((is = md_get(lj, "input_shape")) != NULL) {
        if (i > 0)
            return md_fail(where, "\"input_shape\" belongs on the first layer "
                           "or the model, not on layers[%d]", i);
        if (*have_input)
            return md_fail(where, "\"input_shape\" is given both here and on "
                           "the model; keep one");
        if ((rv = md_parse_shape(is, where, &m->input)))
            return rv;
        *have_input = 1;
        *cur = m->input;
    }
    if (!*have_input)
        return md_missing(m->source, "input_shape", "[28, 28, 1]");
    l->in = *cur;
    if ((rv = layer_infer(m, where, l)))
        return rv;
    *cur = l->out;
    return HC_OK;
}

/* ---- the layers array --------------------------------------------------- */

int md_read_layers(const cJSON *root, struct hc_model *m, int have_input)
{
    const cJSON *layers, *it;
    struct hc_shape cur = {0, {0, 0, 0}};
    int counters[N_TYPES] = {0}, rv, i = 0;
    char buf[64];

    if (have_input)
        cur = m->input;
    layers = md_get(root, "layers");
    if (!layers)
        return md_missing(m->source, "layers", "[{\"type\": \"flatten\"}, "
                          "{\"type\": \"dense\", \"units\": 10}]");
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) == 0)
        return md_fail(m->source, "\"layers\" must be a non-empty array of "
                       "layers, got %s", cJSON_IsArray(layers) ? "[]"
                       : md_show(layers, buf, sizeof buf));
    if (cJSON_GetArraySize(layers) > HC_MODEL_MAX_LAYERS)
        return md_fail(m->source, "\"layers\" has %d layers, more than the "
                       "%d supported", cJSON_GetArraySize(layers),
                       HC_MODEL_MAX_LAYERS);
    for (it = layers->child; it; it = it->next, i++)
        if ((rv = parse_layer(m, i, it, counters, &have_input, &cur)))
            return rv;
    m->n_layers = i;
    return HC_OK;
}
