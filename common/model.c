/*
 * model.c — read a model file (Keras-Sequential-like JSON, see model.h) into
 * an hc_model: check every key and value, infer each layer's output shape,
 * derive the variables in Keras's layout and names, and fingerprint it all.
 *
 * Spellings. Layer types, activations, losses and optimizers are matched
 * case-insensitively with underscores ignored, so both "maxpool2d" and
 * Keras's class names ("MaxPooling2D", "MaxPool2D") work. Keys are exact.
 * An unknown key is an error (a typo guard) naming the key and the layer
 * and, where one is close, the key that was probably meant.
 *
 * Output layer. With "sparse_categorical_crossentropy" the model must end in
 * a dense layer with activation "softmax" (probabilities, Keras's default
 * from_logits=False) or "linear" (logits, Keras's from_logits=True), or in
 * a standalone "softmax"/"linear" activation layer right after a linear
 * dense layer. Both give the same loss and gradients once the trainer fuses
 * softmax with the cross-entropy; n_classes is the output width (≥ 2). With
 * "mse" the output must be flat and n_classes is its width.
 *
 * Initial values (hc_model_init_params). Each variable v has its own stream
 * of the splitmix64 generator (Steele, Lea & Flood 2014) started from
 * state = hc_mix64(seed ^ hc_mix64(v + 0x9E3779B97F4A7C15)), mix64 being
 * splitmix64's output function; so a variable's values depend only on
 * (seed, v). A Glorot-uniform element is (2u − 1)·limit with u the top
 * 53 bits of the next output over 2^53 and limit = sqrt(6 / (fan_in +
 * fan_out)); biases are zero.
 *
 * Signature. FNV-1a 64 over a canonical text: one line per layer (type,
 * name, activation, every hyper-parameter, in and out shapes), one per
 * variable (name, shape, initialiser, fans), then the loss and the
 * optimizer with its settings. The model name, devices, batch size, epochs,
 * seed and metrics are not part of it: changing them does not change what a
 * store of trained variables means.
 */
#include "model.h"
#include "err.h"
#include "rng.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_FILE_MAX  (1u << 20)          /* bytes of a model file */
#define DIM_MAX         65536               /* any one dimension, filters, units */
#define ELEMS_MAX       2147483647ull       /* one activation or variable */
#define PARAMS_MAX      (1ull << 32)        /* whole model, in floats */
#define SEED_MAX        9007199254740992.0  /* 2^53: exact in a JSON number */
#define WHERE_MAX       640

/* ---- errors and JSON helpers ------------------------------------------ */

static int fail(const char *where, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fail(const char *where, const char *fmt, ...)
{
    char msg[768];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hc_err_set(HC_ERR_CONFIG, "%s: %s", where, msg);
}

/* A short rendering of a JSON value for messages: 0, "abc", an array … */
static const char *show(const cJSON *it, char *buf, size_t len)
{
    if (cJSON_IsNumber(it))
        snprintf(buf, len, "%.10g", it->valuedouble);
    else if (cJSON_IsString(it))
        snprintf(buf, len, "\"%.40s%s\"", it->valuestring,
                 strlen(it->valuestring) > 40 ? "…" : "");
    else if (cJSON_IsBool(it))
        snprintf(buf, len, "%s", cJSON_IsTrue(it) ? "true" : "false");
    else if (cJSON_IsNull(it))
        snprintf(buf, len, "null");
    else if (cJSON_IsArray(it))
        snprintf(buf, len, "an array");
    else if (cJSON_IsObject(it))
        snprintf(buf, len, "an object");
    else
        snprintf(buf, len, "an invalid value");
    return buf;
}

/* Lower-case s without underscores into buf, for matching enum spellings. */
static const char *norm(const char *s, char *buf, size_t len)
{
    size_t n = 0;

    for (; *s && n + 1 < len; s++)
        if (*s != '_')
            buf[n++] = (char)tolower((unsigned char)*s);
    buf[n] = '\0';
    return buf;
}

static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64], i, j;

    if (la > 63 || lb > 63)
        return 64;
    for (j = 0; j <= lb; j++)
        row[j] = j;
    for (i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (tolower((unsigned char)a[i - 1]) !=
                                 tolower((unsigned char)b[j - 1]));
            size_t best = sub < up + 1 ? sub : up + 1;
            row[j] = best < row[j - 1] + 1 ? best : row[j - 1] + 1;
            diag = up;
        }
    }
    return row[lb];
}

/* Names people bring from other APIs, which edit distance would miss. */
static const char *const key_aliases[][2] = {
    {"lr", "learning_rate"},     {"eps", "epsilon"},
    {"class_name", "type"},      {"kernel", "kernel_size"},
    {"pool", "pool_size"},       {"input_dim", "input_shape"},
    {"p", "rate"},               {"out_features", "units"},
    {"out_channels", "filters"}, {"bias", "use_bias"},
};

static const char *suggest(const char *key, const char *const *allowed)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1, i;

    for (i = 0; i < sizeof key_aliases / sizeof key_aliases[0]; i++)
        if (strcmp(key, key_aliases[i][0]) == 0)
            for (const char *const *a = allowed; *a; a++)
                if (strcmp(*a, key_aliases[i][1]) == 0)
                    return *a;
    for (const char *const *a = allowed; *a; a++) {
        size_t d = edit_distance(key, *a);
        if (d < best_d) {
            best_d = d;
            best = *a;
        }
    }
    if (best && (best_d <= 2 || best_d * 3 <= strlen(best)))
        return best;
    return NULL;
}

/* Every key of obj must be in allowed (NULL-terminated) and appear once. */
static int check_keys(const cJSON *obj, const char *const *allowed,
                      const char *where)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        const char *const *a;
        const char *hint;
        char list[256] = "";
        size_t n = 0;

        for (const cJSON *p = obj->child; p != it; p = p->next)
            if (strcmp(p->string, it->string) == 0)
                return fail(where, "key \"%s\" appears twice; keep one",
                            it->string);
        for (a = allowed; *a; a++)
            if (strcmp(*a, it->string) == 0)
                break;
        if (*a)
            continue;
        if ((hint = suggest(it->string, allowed)) != NULL)
            return fail(where, "unknown key \"%.60s\" (did you mean \"%s\"?)",
                        it->string, hint);
        for (a = allowed; *a && n + 1 < sizeof list; a++)
            n += (size_t)snprintf(list + n, sizeof list - n, "%s%s",
                                  a == allowed ? "" : ", ", *a);
        return fail(where, "unknown key \"%.60s\"; allowed here: %s",
                    it->string, list);
    }
    return HC_OK;
}

static const cJSON *get(const cJSON *obj, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static int missing(const char *where, const char *key, const char *example)
{
    return fail(where, "missing required key \"%s\" (e.g. %s)", key, example);
}

static int is_int(const cJSON *it)
{
    return cJSON_IsNumber(it) && isfinite(it->valuedouble) &&
           it->valuedouble == floor(it->valuedouble);
}

/* An integer value in [lo, hi]. */
static int int_value(const cJSON *it, const char *key, const char *where,
                     int lo, int hi, int *out)
{
    char buf[64];

    if (!is_int(it))
        return fail(where, "\"%s\" must be an integer, got %s", key,
                    show(it, buf, sizeof buf));
    if (it->valuedouble < lo || it->valuedouble > hi)
        return fail(where, "\"%s\" must be from %d to %d, got %s", key, lo,
                    hi, show(it, buf, sizeof buf));
    *out = (int)it->valuedouble;
    return HC_OK;
}

/* Optional integer key (def when absent). */
static int get_int(const cJSON *obj, const char *key, const char *where,
                   int def, int lo, int hi, int *out)
{
    const cJSON *it = get(obj, key);

    if (!it) {
        *out = def;
        return HC_OK;
    }
    return int_value(it, key, where, lo, hi, out);
}

/* An integer or a [height, width] pair, each in [lo, hi]. */
static int get_pair(const cJSON *obj, const char *key, const char *where,
                    int lo, int hi, int *a, int *b)
{
    const cJSON *it = get(obj, key);
    char buf[64];
    int rv;

    if (cJSON_IsArray(it)) {
        if (cJSON_GetArraySize(it) != 2)
            return fail(where, "\"%s\" must be an integer or [height, width], "
                        "got an array of %d", key, cJSON_GetArraySize(it));
        if ((rv = int_value(it->child, key, where, lo, hi, a)) != HC_OK)
            return rv;
        return int_value(it->child->next, key, where, lo, hi, b);
    }
    if (!is_int(it))
        return fail(where, "\"%s\" must be an integer or [height, width] of "
                    "integers, got %s", key, show(it, buf, sizeof buf));
    if ((rv = int_value(it, key, where, lo, hi, a)) == HC_OK)
        *b = *a;
    return rv;
}

/* A number range: [lo, hi], with either end open. */
struct range {
    double lo, hi;
    int lo_open, hi_open;
};

/* Optional float key (def when absent), checked against r. */
static int get_float(const cJSON *obj, const char *key, const char *where,
                     double def, struct range r, float *out)
{
    const cJSON *it = get(obj, key);
    char buf[64];
    double v;

    if (!it) {
        *out = (float)def;
        return HC_OK;
    }
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble))
        return fail(where, "\"%s\" must be a number, got %s", key,
                    show(it, buf, sizeof buf));
    v = it->valuedouble;
    if (fabs(v) < 1e30)
        v = (double)(float)v;       /* judge the value as it is stored */
    if ((r.lo_open ? v <= r.lo : v < r.lo) ||
        (r.hi_open ? v >= r.hi : v > r.hi))
        return fail(where, "\"%s\" must be in %c%g, %g%c, got %s", key,
                    r.lo_open ? '(' : '[', r.lo, r.hi, r.hi_open ? ')' : ']',
                    show(it, buf, sizeof buf));
    *out = (float)v;
    return HC_OK;
}

static int get_bool(const cJSON *obj, const char *key, const char *where,
                    int def, int *out)
{
    const cJSON *it = get(obj, key);
    char buf[64];

    if (!it) {
        *out = def;
        return HC_OK;
    }
    if (!cJSON_IsBool(it))
        return fail(where, "\"%s\" must be true or false, got %s", key,
                    show(it, buf, sizeof buf));
    *out = cJSON_IsTrue(it);
    return HC_OK;
}

/* Optional string key: *out is NULL when absent. */
static int get_str(const cJSON *obj, const char *key, const char *where,
                   const char **out)
{
    const cJSON *it = get(obj, key);
    char buf[64];

    *out = NULL;
    if (!it)
        return HC_OK;
    if (!cJSON_IsString(it))
        return fail(where, "\"%s\" must be a string, got %s", key,
                    show(it, buf, sizeof buf));
    *out = it->valuestring;
    return HC_OK;
}

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

    norm(s, buf, sizeof buf);
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
    const cJSON *it = get(obj, "activation");
    char buf[64], n[32];

    *out = def;
    if (!it || cJSON_IsNull(it))
        return HC_OK;
    if (cJSON_IsString(it)) {
        norm(it->valuestring, n, sizeof n);
        for (int a = 0; a < (int)(sizeof act_names / sizeof act_names[0]); a++)
            if (strcmp(n, act_names[a]) == 0) {
                *out = (enum hc_act)a;
                return HC_OK;
            }
    }
    return fail(where, "unsupported activation %s; use one of \"relu\", "
                "\"sigmoid\", \"tanh\", \"softmax\", \"linear\"",
                show(it, buf, sizeof buf));
}

static int get_padding(const cJSON *obj, const char *where, int *same)
{
    const char *s;
    char n[16];
    int rv;

    *same = 0;
    if ((rv = get_str(obj, "padding", where, &s)) != HC_OK || !s)
        return rv;
    norm(s, n, sizeof n);
    if (strcmp(n, "same") == 0 || strcmp(n, "valid") == 0) {
        *same = n[0] == 's';
        return HC_OK;
    }
    return fail(where, "\"padding\" must be \"valid\" or \"same\", got "
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
    if ((rv = get_str(obj, "device", where, &s)) != HC_OK || !s)
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
    return fail(where, "\"device\" must be like \"cpu\", \"cpu:1\" or "
                "\"gpu:0\", got \"%.40s\"", s);
}

static const char *fmt_shape(const struct hc_shape *s, char *buf, size_t len)
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

/* ---- shapes --------------------------------------------------------------- */

static int parse_shape(const cJSON *it, const char *where,
                       struct hc_shape *s)
{
    char buf[64];
    int n, rv, i = 0;

    if (!cJSON_IsArray(it))
        return fail(where, "\"input_shape\" must be an array [H, W, C] or "
                    "[N], got %s", show(it, buf, sizeof buf));
    n = cJSON_GetArraySize(it);
    if (n == 2)
        return fail(where, "\"input_shape\" has 2 dimensions; images need "
                    "a channel count: write [H, W, 1] for grayscale");
    if (n != 1 && n != 3)
        return fail(where, "\"input_shape\" must be [H, W, C] or [N], got "
                    "%d dimensions", n);
    s->rank = n;
    for (const cJSON *d = it->child; d; d = d->next, i++)
        if ((rv = int_value(d, "input_shape", where, 1, DIM_MAX,
                            &s->dims[i])) != HC_OK)
            return rv;
    if (shape_elems(s) > ELEMS_MAX)
        return fail(where, "\"input_shape\" has more than %llu elements",
                    ELEMS_MAX);
    return HC_OK;
}

/* One spatial output size: valid floor((n − k)/s) + 1, same ceil(n/s). */
static int out_dim(int n, int k, int s, int same)
{
    return same ? (n + s - 1) / s : (n - k) / s + 1;
}

/* ---- variables ----------------------------------------------------------- */

static int add_var(struct hc_model *m, const char *where,
                   const struct hc_layer_spec *l, const char *what, int ndim,
                   const int *shape, enum hc_init init, int fan_in,
                   int fan_out, int *idx)
{
    struct hc_var_def *v;
    uint64_t size = 1;

    if (m->n_vars >= HC_MODEL_MAX_VARS)
        return fail(where, "more than %d variables", HC_MODEL_MAX_VARS);
    for (int i = 0; i < ndim; i++)
        size *= (uint64_t)shape[i];     /* each ≤ 65536, ndim ≤ 4: no wrap */
    if (size > ELEMS_MAX)
        return fail(where, "variable \"%s/%s\" would have %llu elements, "
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
        return fail(where, "the model would have more than %llu parameters",
                    PARAMS_MAX);
    m->n_params += v->size;
    *idx = m->n_vars++;
    return HC_OK;
}

/* ---- layers ----------------------------------------------------------------- */

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

static int name_ok(const char *s)
{
    if (!*s)
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
        return fail(w0, "a layer must be an object like {\"type\": "
                    "\"dense\", \"units\": 10}");
    if ((rv = get_str(lj, "type", w0, &type)) != HC_OK)
        return rv;
    if (!type)
        return missing(w0, "type", "\"conv2d\" or \"dense\"");
    if (parse_type(type, &l->type) != 0)
        return fail(w0, "unknown layer type \"%.40s\"; supported: conv2d "
                    "(Conv2D), maxpool2d (MaxPooling2D), flatten, dense, "
                    "dropout, activation", type);
    if ((rv = get_str(lj, "name", w0, &name)) != HC_OK)
        return rv;
    if (name) {
        if (strlen(name) >= HC_NAME_MAX || !name_ok(name))
            return fail(w0, "\"name\" must be 1 to %d letters, digits, '_', "
                        "'-' or '.', got \"%.40s\"", HC_NAME_MAX - 1, name);
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
            return fail(where, "name \"%s\" is already used by layers[%d]; "
                        "layer names must be unique", l->name, j);
    return HC_OK;
}

/* Hyper-parameters of layer l (keys already checked). */
static int layer_params(const cJSON *lj, const char *where,
                        struct hc_layer_spec *l)
{
    static const struct range rate_r = {0, 1, 0, 1};
    const cJSON *st;
    int rv = HC_OK;

    l->sh = l->sw = 1;
    l->use_bias = 1;
    switch (l->type) {
    case HC_LAYER_CONV2D:
        if (!get(lj, "filters"))
            return missing(where, "filters", "32");
        if (!get(lj, "kernel_size"))
            return missing(where, "kernel_size", "[3, 3]");
        if ((rv = get_int(lj, "filters", where, 0, 1, DIM_MAX,
                          &l->filters)) ||
            (rv = get_pair(lj, "kernel_size", where, 1, DIM_MAX, &l->kh,
                           &l->kw)) ||
            (get(lj, "strides") &&
             (rv = get_pair(lj, "strides", where, 1, DIM_MAX, &l->sh,
                            &l->sw))) ||
            (rv = get_padding(lj, where, &l->same)) ||
            (rv = get_act(lj, where, HC_ACT_LINEAR, &l->act)) ||
            (rv = get_bool(lj, "use_bias", where, 1, &l->use_bias)))
            return rv;
        break;
    case HC_LAYER_MAXPOOL2D:
        l->ph = l->pw = 2;
        if ((get(lj, "pool_size") &&
             (rv = get_pair(lj, "pool_size", where, 1, DIM_MAX, &l->ph,
                            &l->pw))) ||
            (rv = get_padding(lj, where, &l->same)))
            return rv;
        l->sh = l->ph;
        l->sw = l->pw;
        st = get(lj, "strides");
        if (st && !cJSON_IsNull(st) &&
            (rv = get_pair(lj, "strides", where, 1, DIM_MAX, &l->sh,
                           &l->sw)))
            return rv;
        l->use_bias = 0;
        break;
    case HC_LAYER_DENSE:
        if (!get(lj, "units"))
            return missing(where, "units", "10");
        if ((rv = get_int(lj, "units", where, 0, 1, 1 << 24, &l->units)) ||
            (rv = get_act(lj, where, HC_ACT_LINEAR, &l->act)) ||
            (rv = get_bool(lj, "use_bias", where, 1, &l->use_bias)))
            return rv;
        break;
    case HC_LAYER_DROPOUT:
        if (!get(lj, "rate"))
            return missing(where, "rate", "0.2");
        l->use_bias = 0;
        return get_float(lj, "rate", where, 0, rate_r, &l->rate);
    case HC_LAYER_ACTIVATION:
        if (!get(lj, "activation"))
            return missing(where, "activation", "\"relu\"");
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
            return fail(where, "%s needs an image input (H, W, C) but its "
                        "input has shape %s", type_names[l->type],
                        fmt_shape(in, si, sizeof si));
        if (!l->same && (kh > in->dims[0] || kw > in->dims[1]))
            return fail(where, "%s (%d, %d) is larger than the input %s "
                        "with padding \"valid\"; use a smaller size or "
                        "padding \"same\"",
                        l->type == HC_LAYER_CONV2D ? "kernel_size"
                                                   : "pool_size",
                        kh, kw, fmt_shape(in, si, sizeof si));
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
            return fail(where, "dense needs a flat input (N) but its input "
                        "has shape %s; add {\"type\": \"flatten\"} before "
                        "it", fmt_shape(in, si, sizeof si));
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
        return fail(where, "output shape %s (from input %s) has more than "
                    "%llu elements", fmt_shape(out, so, sizeof so),
                    fmt_shape(in, si, sizeof si), ELEMS_MAX);
    if (l->act == HC_ACT_SOFTMAX && out->rank != 1)
        return fail(where, "activation \"softmax\" needs a flat output but "
                    "this layer's output has shape %s; flatten first",
                    fmt_shape(out, so, sizeof so));
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
        (rv = check_keys(lj, layer_keys[l->type], where)) ||
        (rv = get_device(lj, where, l->device, sizeof l->device)) ||
        (rv = layer_params(lj, where, l)))
        return rv;
    if ((is = get(lj, "input_shape")) != NULL) {
        if (i > 0)
            return fail(where, "\"input_shape\" belongs on the first layer "
                        "or the model, not on layers[%d]", i);
        if (*have_input)
            return fail(where, "\"input_shape\" is given both here and on "
                        "the model; keep one");
        if ((rv = parse_shape(is, where, &m->input)))
            return rv;
        *have_input = 1;
        *cur = m->input;
    }
    if (!*have_input)
        return missing(m->source, "input_shape", "[28, 28, 1]");
    l->in = *cur;
    if ((rv = layer_infer(m, where, l)))
        return rv;
    *cur = l->out;
    return HC_OK;
}

/* ---- loss, optimizer, metrics ------------------------------------------------ */

static int parse_loss(const cJSON *root, struct hc_model *m)
{
    const char *s;
    char n[48];
    int rv;

    if ((rv = get_str(root, "loss", m->source, &s)))
        return rv;
    if (!s)
        return missing(m->source, "loss",
                       "\"sparse_categorical_crossentropy\"");
    norm(s, n, sizeof n);
    if (strcmp(n, "sparsecategoricalcrossentropy") == 0)
        m->loss = HC_LOSS_SPARSE_CCE;
    else if (strcmp(n, "mse") == 0 || strcmp(n, "meansquarederror") == 0)
        m->loss = HC_LOSS_MSE;
    else
        return fail(m->source, "unsupported loss \"%.40s\"; use "
                    "\"sparse_categorical_crossentropy\" or \"mse\"", s);
    return HC_OK;
}

/* The output layer must suit the loss (see the top of this file). */
static int check_output(struct hc_model *m)
{
    const struct hc_layer_spec *last = &m->layers[m->n_layers - 1];
    const struct hc_layer_spec *prev =
        m->n_layers > 1 ? &m->layers[m->n_layers - 2] : NULL;
    int probs = last->act == HC_ACT_SOFTMAX || last->act == HC_ACT_LINEAR;
    char so[48];

    if (last->out.rank != 1)
        return fail(m->source, "the last layer (layers[%d] \"%s\") must have "
                    "a flat output for the loss, but its shape is %s",
                    m->n_layers - 1, last->name,
                    fmt_shape(&last->out, so, sizeof so));
    m->n_classes = last->out.dims[0];
    if (m->loss != HC_LOSS_SPARSE_CCE)
        return HC_OK;
    if (!(probs && (last->type == HC_LAYER_DENSE ||
                    (last->type == HC_LAYER_ACTIVATION && prev &&
                     prev->type == HC_LAYER_DENSE &&
                     prev->act == HC_ACT_LINEAR))))
        return fail(m->source, "loss \"sparse_categorical_crossentropy\" "
                    "needs the last layer to be dense with activation "
                    "\"softmax\" (or \"linear\" logits), but layers[%d] is "
                    "%s \"%s\" with activation \"%s\"", m->n_layers - 1,
                    type_names[last->type], last->name,
                    act_names[last->act]);
    if (m->n_classes < 2)
        return fail(m->source, "loss \"sparse_categorical_crossentropy\" "
                    "needs at least 2 classes, but the last layer has %d "
                    "unit", m->n_classes);
    return HC_OK;
}

static void optim_defaults(enum hc_optim type, struct hc_optim_conf *o)
{
    memset(o, 0, sizeof *o);
    o->type = type;
    if (type == HC_OPT_ADAM) {
        o->lr = 1e-3f;
        o->beta1 = 0.9f;
        o->beta2 = 0.999f;
        o->eps = 1e-7f;
    } else {
        o->lr = 0.01f;
    }
}

static int optim_type(const char *s, const char *where, enum hc_optim *t)
{
    char n[32];

    norm(s, n, sizeof n);
    if (strcmp(n, "adam") == 0)
        *t = HC_OPT_ADAM;
    else if (strcmp(n, "sgd") == 0)
        *t = HC_OPT_SGD;
    else
        return fail(where, "unsupported optimizer \"%.40s\"; use \"adam\" "
                    "or \"sgd\"", s);
    return HC_OK;
}

static int parse_optim(const cJSON *root, struct hc_model *m)
{
    static const char *const keys_adam[] = {
        "type", "learning_rate", "beta_1", "beta_2", "epsilon", NULL};
    static const char *const keys_sgd[] = {
        "type", "learning_rate", "momentum", "nesterov", NULL};
    static const struct range lr_r = {0, 10, 1, 0}, beta_r = {0, 1, 0, 1},
                              eps_r = {0, 1, 1, 1}, mom_r = {0, 1, 0, 1};
    const cJSON *o = get(root, "optimizer");
    struct hc_optim_conf *c = &m->optim;
    enum hc_optim t;
    const char *s;
    char where[WHERE_MAX], buf[64];
    int rv;

    snprintf(where, sizeof where, "%.500s: optimizer", m->source);
    if (!o)
        return missing(m->source, "optimizer", "\"adam\"");
    if (cJSON_IsString(o)) {
        if ((rv = optim_type(o->valuestring, where, &t)))
            return rv;
        optim_defaults(t, c);
        return HC_OK;
    }
    if (!cJSON_IsObject(o))
        return fail(where, "must be a name (\"adam\") or an object "
                    "{\"type\": \"adam\", \"learning_rate\": 0.001}, got %s",
                    show(o, buf, sizeof buf));
    if ((rv = get_str(o, "type", where, &s)))
        return rv;
    if (!s)
        return missing(where, "type", "\"adam\"");
    if ((rv = optim_type(s, where, &t)))
        return rv;
    optim_defaults(t, c);
    snprintf(where, sizeof where, "%.500s: optimizer (%s)", m->source,
             t == HC_OPT_ADAM ? "adam" : "sgd");
    if ((rv = check_keys(o, t == HC_OPT_ADAM ? keys_adam : keys_sgd, where)) ||
        (rv = get_float(o, "learning_rate", where, c->lr, lr_r, &c->lr)))
        return rv;
    if (t == HC_OPT_ADAM) {
        if ((rv = get_float(o, "beta_1", where, c->beta1, beta_r,
                            &c->beta1)) ||
            (rv = get_float(o, "beta_2", where, c->beta2, beta_r,
                            &c->beta2)))
            return rv;
        return get_float(o, "epsilon", where, c->eps, eps_r, &c->eps);
    }
    if ((rv = get_float(o, "momentum", where, 0, mom_r, &c->momentum)) ||
        (rv = get_bool(o, "nesterov", where, 0, &c->nesterov)))
        return rv;
    if (c->momentum > 0)
        c->type = HC_OPT_MOMENTUM;
    else if (c->nesterov)
        return fail(where, "\"nesterov\": true needs \"momentum\" > 0");
    return HC_OK;
}

static int parse_metrics(const cJSON *root, struct hc_model *m)
{
    const cJSON *ms = get(root, "metrics");
    char where[WHERE_MAX], buf[64], n[48];

    snprintf(where, sizeof where, "%.500s: metrics", m->source);
    if (!ms)
        return HC_OK;
    if (!cJSON_IsArray(ms))
        return fail(where, "must be an array like [\"accuracy\"], got %s",
                    show(ms, buf, sizeof buf));
    for (const cJSON *it = ms->child; it; it = it->next) {
        if (cJSON_IsString(it)) {
            norm(it->valuestring, n, sizeof n);
            if (strcmp(n, "accuracy") == 0 || strcmp(n, "acc") == 0 ||
                strcmp(n, "sparsecategoricalaccuracy") == 0) {
                m->metric_accuracy = 1;
                continue;
            }
        }
        return fail(where, "unsupported metric %s; the one supported is "
                    "\"accuracy\"", show(it, buf, sizeof buf));
    }
    return HC_OK;
}

/* ---- signature ------------------------------------------------------------------ */

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
    char si[48], so[48];

    sig_add(&h, "hetps-model 1\ninput %s\n",
            fmt_shape(&m->input, si, sizeof si));
    for (int i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *l = &m->layers[i];
        sig_add(&h, "layer %s %s %s f%d k%d,%d s%d,%d p%d q%d,%d u%d "
                "r%.9g b%d %s->%s\n", type_names[l->type], l->name,
                act_names[l->act], l->filters, l->kh, l->kw, l->sh, l->sw,
                l->same, l->ph, l->pw, l->units, (double)l->rate, l->use_bias,
                fmt_shape(&l->in, si, sizeof si),
                fmt_shape(&l->out, so, sizeof so));
    }
    for (int v = 0; v < m->n_vars; v++) {
        const struct hc_var_def *d = &m->vars[v];
        sig_add(&h, "var %s", d->name);
        for (int k = 0; k < d->ndim; k++)
            sig_add(&h, " %d", d->shape[k]);
        sig_add(&h, " init%d fan%d,%d\n", (int)d->init, d->fan_in,
                d->fan_out);
    }
    sig_add(&h, "loss %d\noptim %d lr%.9g m%.9g n%d b%.9g,%.9g e%.9g\n",
            (int)m->loss, (int)o->type, (double)o->lr, (double)o->momentum,
            o->nesterov, (double)o->beta1, (double)o->beta2, (double)o->eps);
    return h;
}

/* ---- the model -------------------------------------------------------------------- */

static const char *const keys_model[] = {
    "name", "input_shape", "layers", "loss", "optimizer", "metrics",
    "batch_size", "epochs", "seed", NULL};

static int parse_root(const cJSON *root, struct hc_model *m)
{
    const cJSON *layers, *it;
    struct hc_shape cur = {0, {0, 0, 0}};
    int counters[N_TYPES] = {0}, have_input = 0, rv, i = 0;
    const char *s;
    char buf[64];

    if (!cJSON_IsObject(root))
        return fail(m->source, "a model must be a JSON object {\"layers\": "
                    "[…], …}, got %s", show(root, buf, sizeof buf));
    if ((rv = check_keys(root, keys_model, m->source)) ||
        (rv = get_str(root, "name", m->source, &s)))
        return rv;
    if (s && (strlen(s) >= HC_NAME_MAX || !name_ok(s)))
        return fail(m->source, "\"name\" must be 1 to %d letters, digits, "
                    "'_', '-' or '.', got \"%.40s\"", HC_NAME_MAX - 1, s);
    snprintf(m->name, sizeof m->name, "%s", s ? s : "sequential");
    if ((it = get(root, "input_shape")) != NULL) {
        if ((rv = parse_shape(it, m->source, &m->input)))
            return rv;
        have_input = 1;
        cur = m->input;
    }
    layers = get(root, "layers");
    if (!layers)
        return missing(m->source, "layers", "[{\"type\": \"flatten\"}, "
                       "{\"type\": \"dense\", \"units\": 10}]");
    if (!cJSON_IsArray(layers) || cJSON_GetArraySize(layers) == 0)
        return fail(m->source, "\"layers\" must be a non-empty array of "
                    "layers, got %s", cJSON_IsArray(layers) ? "[]"
                    : show(layers, buf, sizeof buf));
    if (cJSON_GetArraySize(layers) > HC_MODEL_MAX_LAYERS)
        return fail(m->source, "\"layers\" has %d layers, more than the "
                    "%d supported", cJSON_GetArraySize(layers),
                    HC_MODEL_MAX_LAYERS);
    for (it = layers->child; it; it = it->next, i++)
        if ((rv = parse_layer(m, i, it, counters, &have_input, &cur)))
            return rv;
    m->n_layers = i;
    if ((rv = parse_loss(root, m)) || (rv = check_output(m)) ||
        (rv = parse_optim(root, m)) || (rv = parse_metrics(root, m)) ||
        (rv = get_int(root, "batch_size", m->source, 32, 1, 1 << 20,
                      &m->batch_size)) ||
        (rv = get_int(root, "epochs", m->source, 1, 1, 1000000, &m->epochs)))
        return rv;
    if ((it = get(root, "seed")) != NULL) {
        if (!is_int(it) || it->valuedouble < 0 || it->valuedouble > SEED_MAX)
            return fail(m->source, "\"seed\" must be an integer from 0 to "
                        "2^53, got %s", show(it, buf, sizeof buf));
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

int hc_model_parse(const char *json, size_t len, const char *source,
                   struct hc_model *out)
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
    if ((rv = parse_root(root, m)) == HC_OK)
        *out = *m;
out:
    cJSON_Delete(root);
    free(m);
    return rv;
}

int hc_model_load(const char *path, struct hc_model *out)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t n;
    int rv;

    if (!path || !out)
        return hc_err_set(HC_ERR_INVAL, "hc_model_load: NULL argument");
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
    rv = hc_model_parse(buf, n, path, out);
out:
    free(buf);
    if (f)
        fclose(f);
    return rv;
}

/* ---- initial values ----------------------------------------------------------------- */


void hc_model_init_params(const struct hc_model *m, float *params)
{
    size_t off = 0;

    for (int v = 0; v < m->n_vars; v++) {
        const struct hc_var_def *d = &m->vars[v];
        float *p = params + off;

        off += d->size;
        if (d->init == HC_INIT_ZEROS || d->fan_in + d->fan_out <= 0) {
            memset(p, 0, d->size * sizeof *p);
            continue;
        }
        double limit = sqrt(6.0 / ((double)d->fan_in + (double)d->fan_out));
        uint64_t state =
            hc_mix64(m->seed ^ hc_mix64((uint64_t)v + 0x9E3779B97F4A7C15ull));
        for (size_t i = 0; i < d->size; i++) {
            double u = (double)(hc_splitmix64(&state) >> 11) * 0x1.0p-53;
            p[i] = (float)((2.0 * u - 1.0) * limit);
        }
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
