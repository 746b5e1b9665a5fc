/*
 * model_layer.c — the layers of a model file (see model.h), read in order
 * from its "layers" array: what every layer has, whatever its kind — its
 * type (Keras's class names accepted: "MaxPooling2D" is maxpool2d), name
 * (Keras's defaults conv2d, conv2d_1 …; unique), device, the key check
 * and the input shape — with its kind's row of the layer table (layer.h)
 * reading the rest: its settings, its output shape and its variables. A
 * layer that does not fit its input fails naming the layer and the
 * shapes. Also the helpers the rows share (model_impl.h): activation,
 * padding, a sliding window's output, adding a variable.
 */
#include "model_impl.h"

#include "err.h"
#include "layer.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define PARAMS_MAX      (1ull << 32)        /* whole model, in floats */

/* ---- names of things ---------------------------------------------------- */

static const char *const act_names[HC_ACT_COUNT] = {
    [HC_ACT_LINEAR] = "linear",   [HC_ACT_RELU] = "relu",
    [HC_ACT_SIGMOID] = "sigmoid", [HC_ACT_TANH] = "tanh",
    [HC_ACT_SOFTMAX] = "softmax", [HC_ACT_RELU6] = "relu6",
    [HC_ACT_ELU] = "elu",         [HC_ACT_GELU] = "gelu",
    [HC_ACT_SWISH] = "swish",     [HC_ACT_SOFTPLUS] = "softplus",
    [HC_ACT_HARD_SIGMOID] = "hard_sigmoid",
};

const char *hc_act_name(enum hc_act a)
{
    if ((unsigned)a >= HC_ACT_COUNT)
        return "unknown";
    return act_names[a];
}

int hc_act_named(const char *s, enum hc_act *a)
{
    char n[32], t[32];

    md_norm(s, n, sizeof n);
    if (strcmp(n, "silu") == 0) {
        *a = HC_ACT_SWISH;
        return 0;
    }
    for (int i = 0; i < HC_ACT_COUNT; i++)
        if (strcmp(n, md_norm(act_names[i], t, sizeof t)) == 0) {
            *a = (enum hc_act)i;
            return 0;
        }
    return -1;
}

const char *hc_act_list(void)
{
    return "linear, relu, sigmoid, tanh, softmax, relu6, elu, gelu, swish "
           "(silu), softplus, hard_sigmoid";
}

int md_get_act(const cJSON *obj, const char *where, enum hc_act def,
               enum hc_act *out)
{
    const cJSON *it = md_get(obj, "activation");
    char buf[64];

    *out = def;
    if (!it || cJSON_IsNull(it))
        return HC_OK;
    if (cJSON_IsString(it) && hc_act_named(it->valuestring, out) == 0)
        return HC_OK;
    return md_fail(where, "unsupported activation %s; use one of %s",
                   md_show(it, buf, sizeof buf), hc_act_list());
}

int md_get_padding(const cJSON *obj, const char *where, int *same)
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

uint64_t md_shape_elems(const struct hc_shape *s)
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
        if ((rv = md_int_value(d, "input_shape", where, 1, MD_DIM_MAX,
                               &s->dims[i])) != HC_OK)
            return rv;
    if (md_shape_elems(s) > MD_ELEMS_MAX)
        return md_fail(where, "\"input_shape\" has more than %llu elements",
                       MD_ELEMS_MAX);
    return HC_OK;
}

/* One spatial output size: valid floor((n − k)/s) + 1, same ceil(n/s). */
static int out_dim(int n, int k, int s, int same)
{
    return same ? (n + s - 1) / s : (n - k) / s + 1;
}

int md_window_out(const char *where, struct hc_layer_spec *l,
                  const char *size_key, int kh, int kw)
{
    const struct hc_shape *in = &l->in;
    char si[48];

    if (in->rank != 3)
        return md_fail(where, "%s needs an image input (H, W, C) but its "
                       "input has shape %s", hc_layer_type_name(l->type),
                       md_fmt_shape(in, si, sizeof si));
    if (!l->same && (kh > in->dims[0] || kw > in->dims[1]))
        return md_fail(where, "%s (%d, %d) is larger than the input %s "
                       "with padding \"valid\"; use a smaller size or "
                       "padding \"same\"", size_key, kh, kw,
                       md_fmt_shape(in, si, sizeof si));
    l->out.dims[0] = out_dim(in->dims[0], kh, l->sh, l->same);
    l->out.dims[1] = out_dim(in->dims[1], kw, l->sw, l->same);
    return HC_OK;
}

/* ---- variables ---------------------------------------------------------- */

int md_add_var(struct hc_model *m, const char *where,
               const struct hc_layer_spec *l, const char *what, int ndim,
               const int *shape, enum hc_init init, int fan_in, int fan_out,
               int *idx)
{
    struct hc_var_def *v;
    uint64_t size = 1;

    if (m->n_vars >= HC_MODEL_MAX_VARS)
        return md_fail(where, "more than %d variables", HC_MODEL_MAX_VARS);
    for (int i = 0; i < ndim; i++)
        size *= (uint64_t)shape[i];     /* each ≤ 65536, ndim ≤ 4: no wrap */
    if (size > MD_ELEMS_MAX)
        return md_fail(where, "variable \"%s/%s\" would have %llu elements, "
                       "more than %llu; make the layer smaller", l->name, what,
                       (unsigned long long)size, MD_ELEMS_MAX);
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

int md_add_weights(struct hc_model *m, const char *where,
                   struct hc_layer_spec *l, int ndim, const int *shape,
                   int fan_in, int fan_out)
{
    int rv;

    if ((rv = md_add_var(m, where, l, "kernel", ndim, shape,
                         l->kernel_init.kind, fan_in, fan_out,
                         &l->var_kernel)))
        return rv;
    m->vars[l->var_kernel].init_par = l->kernel_init.par;
    m->vars[l->var_kernel].reg = l->kernel_reg;
    if (l->use_bias) {
        if ((rv = md_add_var(m, where, l, "bias", 1, &shape[ndim - 1],
                             l->bias_init.kind, 0, 0, &l->var_bias)))
            return rv;
        m->vars[l->var_bias].init_par = l->bias_init.par;
        m->vars[l->var_bias].reg = l->bias_reg;
    }
    return HC_OK;
}

int md_get_weights_args(const cJSON *lj, const char *where,
                        struct hc_layer_spec *l)
{
    int rv;

    if ((rv = md_get_init(lj, "kernel_initializer", where,
                          HC_INIT_GLOROT_UNIFORM, &l->kernel_init)) ||
        (rv = md_get_init(lj, "bias_initializer", where, HC_INIT_ZEROS,
                          &l->bias_init)) ||
        (rv = md_get_reg(lj, "kernel_regularizer", where, &l->kernel_reg)))
        return rv;
    return md_get_reg(lj, "bias_regularizer", where, &l->bias_reg);
}

/* ---- layers ------------------------------------------------------------- */

/* The keys every layer takes, before its kind's. */
static const char *const keys_layer[] = {
    "type", "name", "device", "input_shape", NULL};

#define KEYS_MAX 32     /* a layer's keys, NULL included */

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

/* "conv2d (Conv2D), maxpool2d (MaxPooling2D), flatten, …": every kind,
 * with its Keras class where that is not its name capitalised. */
static const char *kinds_list(char *buf, size_t len)
{
    const struct hc_layer_kind *k;
    size_t n = 0;

    buf[0] = '\0';
    for (int t = 0; (k = hc_layer_kind((enum hc_layer_type)t)) && n < len;
         t++) {
        int same = toupper((unsigned char)k->name[0]) == k->keras_class[0] &&
                   strcmp(k->name + 1, k->keras_class + 1) == 0;

        n += (size_t)snprintf(buf + n, len - n, same ? "%s%s" : "%s%s (%s)",
                              t ? ", " : "", k->name, k->keras_class);
    }
    return buf;
}

/* Type and name of layer i; where gets "SRC: layers[i] (type "name")". */
static int layer_ident(struct hc_model *m, int i, const cJSON *lj,
                       int *counters, struct hc_layer_spec *l, char *where)
{
    const struct hc_layer_kind *k;
    const char *type, *name;
    char w0[WHERE_MAX], norm[32], kinds[256];
    int rv;

    snprintf(w0, sizeof w0, "%.500s: layers[%d]", m->source, i);
    if (!cJSON_IsObject(lj))
        return md_fail(w0, "a layer must be an object like {\"type\": "
                       "\"dense\", \"units\": 10}");
    if ((rv = md_get_str(lj, "type", w0, &type)) != HC_OK)
        return rv;
    if (!type)
        return md_missing(w0, "type", "\"conv2d\" or \"dense\"");
    if (hc_layer_kind_named(md_norm(type, norm, sizeof norm), &l->type) != 0)
        return md_fail(w0, "unknown layer type \"%.40s\"; supported: %s",
                       type, kinds_list(kinds, sizeof kinds));
    k = hc_layer_kind(l->type);
    if ((rv = md_get_str(lj, "name", w0, &name)) != HC_OK)
        return rv;
    if (name) {
        if (strlen(name) >= HC_NAME_MAX || !md_name_ok(name))
            return md_fail(w0, "\"name\" must be 1 to %d letters, digits, "
                           "'_', '-' or '.' (not \".\" or \"..\"), got "
                           "\"%.40s\"", HC_NAME_MAX - 1, name);
        snprintf(l->name, sizeof l->name, "%s", name);
    } else if (counters[l->type]++ == 0) {
        snprintf(l->name, sizeof l->name, "%s", k->snake);
    } else {
        snprintf(l->name, sizeof l->name, "%s_%d", k->snake,
                 counters[l->type] - 1);
    }
    snprintf(where, WHERE_MAX, "%.520s (%s \"%s\")", w0, k->name, l->name);
    for (int j = 0; j < i; j++)
        if (strcmp(m->layers[j].name, l->name) == 0)
            return md_fail(where, "name \"%s\" is already used by layers[%d]; "
                           "layer names must be unique", l->name, j);
    return HC_OK;
}

/* Every key of lj is one every layer takes or one of kind k's. */
static int check_keys(const cJSON *lj, const struct hc_layer_kind *k,
                      const char *where)
{
    const char *keys[KEYS_MAX];
    int n = 0;

    for (int j = 0; keys_layer[j]; j++)
        keys[n++] = keys_layer[j];
    for (int j = 0; k->keys && k->keys[j] && n < KEYS_MAX - 1; j++)
        keys[n++] = k->keys[j];
    keys[n] = NULL;
    return md_check_keys(lj, keys, where);
}

/* Output shape and variables of layer l, whose input is l->in. */
static int layer_infer(struct hc_model *m, const char *where,
                       const struct hc_layer_kind *k, struct hc_layer_spec *l)
{
    char si[48], so[48];
    int rv;

    l->var_kernel = l->var_bias = -1;
    l->out = l->in;
    if (k->infer && (rv = k->infer(m, where, l)))
        return rv;
    if (md_shape_elems(&l->out) > MD_ELEMS_MAX)
        return md_fail(where, "output shape %s (from input %s) has more than "
                       "%llu elements", md_fmt_shape(&l->out, so, sizeof so),
                       md_fmt_shape(&l->in, si, sizeof si), MD_ELEMS_MAX);
    if (l->act == HC_ACT_SOFTMAX && l->out.rank != 1)
        return md_fail(where, "activation \"softmax\" needs a flat output but "
                       "this layer's output has shape %s; flatten first",
                       md_fmt_shape(&l->out, so, sizeof so));
    return HC_OK;
}

static int parse_layer(struct hc_model *m, int i, const cJSON *lj,
                       int *counters, int *have_input, struct hc_shape *cur)
{
    struct hc_layer_spec *l = &m->layers[i];
    const struct hc_layer_kind *k;
    const cJSON *is;
    char where[WHERE_MAX];
    int rv;

    memset(l, 0, sizeof *l);
    if ((rv = layer_ident(m, i, lj, counters, l, where)))
        return rv;
    k = hc_layer_kind(l->type);
    /* Strides of 1 on every kind: the signature hashes them. */
    l->sh = l->sw = 1;
    if ((rv = check_keys(lj, k, where)) ||
        (rv = get_device(lj, where, l->device, sizeof l->device)) ||
        (k->parse && (rv = k->parse(lj, where, l))))
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
    if ((rv = layer_infer(m, where, k, l)))
        return rv;
    *cur = l->out;
    return HC_OK;
}

/* ---- the layers array --------------------------------------------------- */

int md_read_layers(const cJSON *root, struct hc_model *m, int have_input)
{
    const cJSON *layers, *it;
    struct hc_shape cur = {0, {0, 0, 0}};
    int counters[HC_LAYER_COUNT] = {0}, rv, i = 0;
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
