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
#include <stdlib.h>
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
    else if (s->rank == 2)
        snprintf(buf, len, "(%d, %d)", s->dims[0], s->dims[1]);
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
               struct hc_layer_spec *l, const char *what, int ndim,
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
    v->moving = 0;
    v->momentum = 0.0f;
    v->moments_of = -1;
    if ((uint64_t)m->n_params + size > PARAMS_MAX)
        return md_fail(where, "the model would have more than %llu parameters",
                       PARAMS_MAX);
    m->n_params += v->size;
    if (l->n_var == 0)
        l->var_first = m->n_vars;
    l->n_var++;
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
    return md_get_weights_args_as(lj, where, "kernel", l);
}

int md_get_weights_args_as(const cJSON *lj, const char *where,
                           const char *kernel, struct hc_layer_spec *l)
{
    char ki[48], kr[48];
    int rv;

    snprintf(ki, sizeof ki, "%s_initializer", kernel);
    snprintf(kr, sizeof kr, "%s_regularizer", kernel);
    if ((rv = md_get_init(lj, ki, where, HC_INIT_GLOROT_UNIFORM,
                          &l->kernel_init)) ||
        (rv = md_get_init(lj, "bias_initializer", where, HC_INIT_ZEROS,
                          &l->bias_init)) ||
        (rv = md_get_reg(lj, kr, where, &l->kernel_reg)))
        return rv;
    return md_get_reg(lj, "bias_regularizer", where, &l->bias_reg);
}

/* ---- layers ------------------------------------------------------------- */

/* The keys every layer takes, before its kind's. */
static const char *const keys_layer[] = {
    "type", "name", "device", "input_shape", "inputs", NULL};

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

/* The layers of a file as read, before they are put in graph order: the
 * specs in file order, each one's JSON and WHERE, and the nodes each reads
 * by file index (j ≥ 0 the file's layers[j], −1 − q the model's input
 * q). */
struct md_file_layers {
    int n;
    struct hc_layer_spec l[HC_MODEL_MAX_LAYERS];
    const cJSON *json[HC_MODEL_MAX_LAYERS];
    char where[HC_MODEL_MAX_LAYERS][WHERE_MAX];
    int order[HC_MODEL_MAX_LAYERS];     /* graph position → file index */
    int pos[HC_MODEL_MAX_LAYERS];       /* file index → graph position */
};

/* The file's node named s: its index into *j (as in_from), or -1. */
static int find_node(const struct hc_model *m, const struct md_file_layers *f,
                     const char *s, int *j)
{
    for (int q = 0; q < m->n_inputs; q++)
        if (strcmp(m->inputs[q].name, s) == 0) {
            *j = -1 - q;
            return 0;
        }
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->l[i].name, s) == 0) {
            *j = i;
            return 0;
        }
    return -1;
}

/* Type and name of layer i; where gets "SRC: layers[i] (type "name")". */
static int layer_ident(struct hc_model *m, struct md_file_layers *f, int i,
                       int *counters)
{
    const cJSON *lj = f->json[i];
    struct hc_layer_spec *l = &f->l[i];
    char *where = f->where[i];
    const struct hc_layer_kind *k;
    const char *type, *name;
    char w0[WHERE_MAX], w1[WHERE_MAX], norm[32], kinds[256];
    int rv, j;

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
    /* Through w1: where and l->name both lie in f. */
    snprintf(w1, sizeof w1, "%.520s (%s \"%s\")", w0, k->name, l->name);
    memcpy(where, w1, sizeof w1);
    f->n = i;           /* the names so far */
    if (find_node(m, f, l->name, &j) == 0)
        return md_fail(where, j < 0 ? "name \"%s\" is already the model's "
                       "input's; names must be unique"
                       : "name \"%s\" is already used by layers[%d]; layer "
                       "names must be unique", l->name, j);
    return HC_OK;
}

/* "input, conv2d, …": the names a layer may read, for messages. */
static const char *node_names(const struct hc_model *m,
                              const struct md_file_layers *f, char *buf,
                              size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int j = -m->n_inputs; j < f->n && n < len; j++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s",
                              j == -m->n_inputs ? "" : ", ",
                              j < 0 ? m->inputs[-1 - j].name : f->l[j].name);
    return buf;
}

/* The nodes layer i reads: its "inputs" (a name or a list of names), or
 * else the layer before it in the file (the model's one input for the
 * first). */
static int layer_inputs(const struct hc_model *m, struct md_file_layers *f,
                        int i)
{
    struct hc_layer_spec *l = &f->l[i];
    const struct hc_layer_kind *k = hc_layer_kind(l->type);
    const cJSON *in = md_get(f->json[i], "inputs"), *it;
    const char *where = f->where[i];
    int merge = (k->flags & HC_LAYER_MERGE) != 0;
    char buf[64], names[400];

    l->n_in = 0;
    if (!in) {
        if (merge)
            return md_fail(where, "a merge layer names the layers it reads: "
                           "\"inputs\": [\"a\", \"b\"]");
        if (i == 0 && m->n_inputs > 1)
            return md_fail(where, "the model has %d inputs; name the one "
                           "this layer reads in \"inputs\"", m->n_inputs);
        l->n_in = 1;
        l->in_from[0] = i - 1;
        return HC_OK;
    }
    if (!cJSON_IsString(in) &&
        !(cJSON_IsArray(in) && cJSON_GetArraySize(in) >= 1))
        return md_fail(where, "\"inputs\" must be a name or a list of names "
                       "[\"a\", \"b\"], got %s", md_show(in, buf, sizeof buf));
    for (it = cJSON_IsString(in) ? in : in->child; it;
         it = cJSON_IsString(in) ? NULL : it->next) {
        if (l->n_in == HC_LAYER_MAX_IN)
            return md_fail(where, "\"inputs\" names more than %d nodes",
                           HC_LAYER_MAX_IN);
        if (!cJSON_IsString(it))
            return md_fail(where, "\"inputs\" must hold names, got %s",
                           md_show(it, buf, sizeof buf));
        if (find_node(m, f, it->valuestring, &l->in_from[l->n_in]))
            return md_fail(where, "\"inputs\" names \"%.60s\", which is no "
                           "layer or input of the model (those are: %s)",
                           it->valuestring, node_names(m, f, names,
                                                       sizeof names));
        if (l->in_from[l->n_in] == i)
            return md_fail(where, "the layer reads itself; a model is a "
                           "graph without cycles");
        l->n_in++;
    }
    if (merge && l->n_in < 2)
        return md_fail(where, "%s merges 2 or more inputs, got %d",
                       k->name, l->n_in);
    if (!merge && l->n_in != 1)
        return md_fail(where, "%s reads one input, got %d; merge several "
                       "with add or concatenate first", k->name, l->n_in);
    return HC_OK;
}

/* f->order: the file's layers in topological order, each after the nodes
 * it reads, keeping the file's order where the graph allows (Kahn's
 * algorithm taking the first ready layer). A cycle fails naming its
 * layers; a layer no one reads, other than the output, fails too. */
static int graph_order(const struct hc_model *m, struct md_file_layers *f,
                       int output)
{
    int done[HC_MODEL_MAX_LAYERS] = {0}, read[HC_MODEL_MAX_LAYERS] = {0};
    char names[400];
    size_t n = 0;

    for (int i = 0; i < f->n; i++)
        for (int k = 0; k < f->l[i].n_in; k++)
            if (f->l[i].in_from[k] >= 0)
                read[f->l[i].in_from[k]] = 1;
    for (int p = 0; p < f->n; p++) {
        int i, k;

        for (i = 0; i < f->n; i++) {
            if (done[i])
                continue;
            for (k = 0; k < f->l[i].n_in; k++)
                if (f->l[i].in_from[k] >= 0 && !done[f->l[i].in_from[k]])
                    break;
            if (k == f->l[i].n_in)
                break;
        }
        if (i == f->n) {
            for (i = 0; i < f->n && n < sizeof names; i++)
                if (!done[i])
                    n += (size_t)snprintf(names + n, sizeof names - n,
                                          "%s\"%s\"", n ? ", " : "",
                                          f->l[i].name);
            return md_fail(m->source, "the layers %s read each other in a "
                           "cycle; a model is a graph without cycles", names);
        }
        done[i] = 1;
        f->order[p] = i;
        f->pos[i] = p;
    }
    for (int i = 0; i < f->n; i++)
        if (!read[i] && i != output)
            return md_fail(f->where[i], "no layer reads this layer's output; "
                           "a model has one output, \"%s\" (the last layer, "
                           "or the model's \"output\")", f->l[output].name);
    if (read[output])
        return md_fail(f->where[output], "the model's output is read by "
                       "another layer; the output is the last layer");
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

/* An input of ids is read by kinds that take ids (HC_LAYER_IDS), and
 * those read one. */
static int check_ids(const struct hc_model *m, const char *where,
                     const struct hc_layer_kind *k,
                     const struct hc_layer_spec *l)
{
    for (int j = 0; j < l->n_in; j++) {
        int q = -1 - l->in_from[j];
        int ids = q >= 0 && m->inputs[q].ids;

        if (ids && !(k->flags & HC_LAYER_IDS))
            return md_fail(where, "%s reads input \"%s\" of int64 ids; "
                           "only an embedding reads ids", k->name,
                           m->inputs[q].name);
        if (!ids && (k->flags & HC_LAYER_IDS))
            return md_fail(where, "%s reads \"%s\", which is no model "
                           "input of ids; it reads an input with \"dtype\": "
                           "\"int64\"", k->name,
                           hc_model_node_name(m, l->in_from[j]));
    }
    return HC_OK;
}

/* Output shape and variables of layer l, whose inputs are in_from. */
static int layer_infer(struct hc_model *m, const char *where,
                       const struct hc_layer_kind *k, struct hc_layer_spec *l)
{
    char si[48], so[48];
    int rv;

    l->var_kernel = l->var_bias = -1;
    l->var_first = -1;
    l->n_var = 0;
    l->in = *hc_model_node_shape(m, l->in_from[0]);
    l->out = l->in;
    if ((rv = check_ids(m, where, k, l)))
        return rv;
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

/* The layer at graph position p: its settings, its nodes in graph
 * positions, its shapes and variables. */
static int parse_layer(struct hc_model *m, struct md_file_layers *f, int p)
{
    int i = f->order[p];
    struct hc_layer_spec *l = &m->layers[p];
    const struct hc_layer_kind *k;
    const char *where = f->where[i];
    int rv;

    *l = f->l[i];
    k = hc_layer_kind(l->type);
    for (int j = 0; j < l->n_in; j++)
        if (l->in_from[j] >= 0)
            l->in_from[j] = f->pos[l->in_from[j]];
    /* Strides of 1 on every kind: the signature hashes them. */
    l->sh = l->sw = 1;
    if ((rv = check_keys(f->json[i], k, where)) ||
        (rv = get_device(f->json[i], where, l->device, sizeof l->device)) ||
        (k->parse && (rv = k->parse(f->json[i], where, l))))
        return rv;
    return layer_infer(m, where, k, l);
}

/* ---- the model's inputs and the layers array ---------------------------- */

/* An input's "dtype": "float32" (the default) or "int64" (ids, a flat
 * (N) of them). */
static int read_dtype(const cJSON *it, const char *where,
                      struct hc_model_input *in)
{
    const char *s;
    int rv;

    if ((rv = md_get_str(it, "dtype", where, &s)))
        return rv;
    in->ids = s && !strcmp(s, "int64");
    if (s && !in->ids && strcmp(s, "float32"))
        return md_fail(where, "\"dtype\" must be \"float32\" or \"int64\" "
                       "(row ids for an embedding), got \"%.40s\"", s);
    if (in->ids && (in->shape.rank != 1 ||
                    (uint64_t)in->shape.dims[0] * HC_ID_FLOATS >
                        MD_ELEMS_MAX))
        return md_fail(where, "an input of int64 ids has shape [N] (N ids a "
                       "sample)");
    return HC_OK;
}

/* "inputs": [{"name": "image", "shape": [28, 28, 1]}, …] into m. */
static int read_inputs(const cJSON *root, struct hc_model *m)
{
    static const char *const keys_in[] = {"name", "shape", "dtype", NULL};
    const cJSON *ins = md_get(root, "inputs"), *it;
    char where[WHERE_MAX], buf[64];
    const char *s;
    int q = 0, rv;

    if (!cJSON_IsArray(ins) || cJSON_GetArraySize(ins) < 1 ||
        cJSON_GetArraySize(ins) > HC_MODEL_MAX_INPUTS)
        return md_fail(m->source, "\"inputs\" must be a list of 1 to %d "
                       "inputs [{\"name\": \"image\", \"shape\": [28, 28, "
                       "1]}], got %s", HC_MODEL_MAX_INPUTS,
                       md_show(ins, buf, sizeof buf));
    if (md_get(root, "input_shape"))
        return md_fail(m->source, "\"inputs\" and \"input_shape\" are both "
                       "given; keep \"inputs\"");
    for (it = ins->child; it; it = it->next, q++) {
        struct hc_model_input *in = &m->inputs[q];

        snprintf(where, sizeof where, "%.500s: inputs[%d]", m->source, q);
        if (!cJSON_IsObject(it))
            return md_fail(where, "an input must be an object {\"name\": "
                           "\"image\", \"shape\": [28, 28, 1]}");
        if ((rv = md_check_keys(it, keys_in, where)) ||
            (rv = md_get_str(it, "name", where, &s)))
            return rv;
        if (!s)
            return md_missing(where, "name", "\"image\"");
        if (strlen(s) >= HC_NAME_MAX || !md_name_ok(s))
            return md_fail(where, "\"name\" must be 1 to %d letters, digits, "
                           "'_', '-' or '.', got \"%.40s\"", HC_NAME_MAX - 1,
                           s);
        for (int j = 0; j < q; j++)
            if (strcmp(m->inputs[j].name, s) == 0)
                return md_fail(where, "name \"%s\" is already inputs[%d]'s",
                               s, j);
        snprintf(in->name, sizeof in->name, "%s", s);
        if (!md_get(it, "shape"))
            return md_missing(where, "shape", "[28, 28, 1]");
        if ((rv = md_parse_shape(md_get(it, "shape"), where, &in->shape)) ||
            (rv = read_dtype(it, where, in)))
            return rv;
    }
    m->n_inputs = q;
    m->input = m->inputs[0].shape;
    return HC_OK;
}

/* The model's one input from "input_shape" (the model's, or else its
 * first layer's). */
static int read_input_shape(const cJSON *root, const cJSON *layers,
                            struct hc_model *m, int have_input)
{
    const cJSON *first = layers->child, *is = NULL;
    int rv;

    if (cJSON_IsObject(first))
        is = md_get(first, "input_shape");
    int i = 1;

    for (const cJSON *it = first ? first->next : NULL; it;
         it = it->next, i++)
        if (cJSON_IsObject(it) && md_get(it, "input_shape")) {
            char where[WHERE_MAX];

            snprintf(where, sizeof where, "%.500s: layers[%d]", m->source, i);
            return md_fail(where, "\"input_shape\" belongs on the first "
                           "layer or the model, not on layers[%d]", i);
        }
    m->n_inputs = 1;
    snprintf(m->inputs[0].name, sizeof m->inputs[0].name, "input");
    if (is) {
        char where[WHERE_MAX];

        snprintf(where, sizeof where, "%.500s: layers[0]", m->source);
        if (have_input || md_get(root, "inputs"))
            return md_fail(where, "\"input_shape\" is given both here and on "
                           "the model; keep one");
        if ((rv = md_parse_shape(is, where, &m->input)))
            return rv;
        have_input = 1;
    }
    if (!have_input)
        return md_missing(m->source, "input_shape", "[28, 28, 1]");
    m->inputs[0].shape = m->input;
    return HC_OK;
}

/* The file's output: its "output" (a layer's name), else its last layer. */
static int read_output(const cJSON *root, const struct hc_model *m,
                       const struct md_file_layers *f, int *out)
{
    const char *s;
    int rv, j;

    *out = f->n - 1;
    if ((rv = md_get_str(root, "output", m->source, &s)) || !s)
        return rv;
    if (find_node(m, f, s, &j) || j < 0)
        return md_fail(m->source, "\"output\" names \"%.60s\", which is no "
                       "layer of the model", s);
    *out = j;
    return HC_OK;
}

int md_read_layers(const cJSON *root, struct hc_model *m, int have_input)
{
    const cJSON *layers, *it;
    int counters[HC_LAYER_COUNT] = {0}, rv, i = 0, n, output;
    struct md_file_layers *f;
    char buf[64];

    layers = md_get(root, "layers");
    if (!layers)
        return md_missing(m->source, "layers", "[{\"type\": \"flatten\"}, "
                          "{\"type\": \"dense\", \"units\": 10}]");
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) == 0)
        return md_fail(m->source, "\"layers\" must be a non-empty array of "
                       "layers, got %s", cJSON_IsArray(layers) ? "[]"
                       : md_show(layers, buf, sizeof buf));
    n = cJSON_GetArraySize(layers);
    if (n > HC_MODEL_MAX_LAYERS)
        return md_fail(m->source, "\"layers\" has %d layers, more than the "
                       "%d supported", n, HC_MODEL_MAX_LAYERS);
    if ((rv = md_get(root, "inputs") ? read_inputs(root, m)
                                     : read_input_shape(root, layers, m,
                                                        have_input)))
        return rv;
    if (!(f = calloc(1, sizeof *f)))
        return hc_err_set(HC_ERR_NOMEM, "%s: out of memory", m->source);
    for (it = layers->child; it; it = it->next, i++) {
        f->json[i] = it;
        if ((rv = layer_ident(m, f, i, counters)))
            goto out;
    }
    f->n = n;
    for (i = 0; i < n; i++)
        if ((rv = layer_inputs(m, f, i)))
            goto out;
    if ((rv = read_output(root, m, f, &output)) ||
        (rv = graph_order(m, f, output)))
        goto out;
    m->n_layers = n;
    for (i = 0; i < n; i++)
        if ((rv = parse_layer(m, f, i)))
            goto out;
out:
    free(f);
    return rv;
}

/* ---- the graph ---------------------------------------------------------- */

int hc_model_is_chain(const struct hc_model *m)
{
    if (m->n_inputs != 1)
        return 0;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].n_in != 1 || m->layers[i].in_from[0] != i - 1)
            return 0;
    return 1;
}

const struct hc_shape *hc_model_node_shape(const struct hc_model *m, int j)
{
    if (j >= 0)
        return j < m->n_layers ? &m->layers[j].out : NULL;
    return -1 - j < m->n_inputs ? &m->inputs[-1 - j].shape : NULL;
}

const char *hc_model_node_name(const struct hc_model *m, int j)
{
    if (j >= 0)
        return j < m->n_layers ? m->layers[j].name : "?";
    return -1 - j < m->n_inputs ? m->inputs[-1 - j].name : "?";
}
