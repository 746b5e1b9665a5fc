/*
 * model_init.c — what a layer says of its variables: initialisers (model.h,
 * enum hc_init), its "kernel_initializer" and "bias_initializer", with
 * the initial values of one variable drawn from them; and regularizers
 * (struct hc_regularizer), its "kernel_regularizer" and
 * "bias_regularizer", Keras's L1, L2 and L1L2 with their defaults.
 *
 * Each initialiser is Keras's class of the same name with Keras's
 * formulas and defaults; hetps draws from its own generator (each
 * variable its own splitmix64 stream from the model's seed, as model.c
 * says), so the values follow Keras's distribution without being
 * TensorFlow's numbers. An initialiser's own "seed" is read and left to
 * the model's: the Keras reader makes the first one it meets the model's
 * seed.
 */
#include "model_impl.h"

#include "err.h"
#include "rng.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The stddev of a unit normal truncated to ±2: Keras divides by it so
 * that a truncated normal has the variance asked for. */
#define TRUNC_STDDEV 0.87962566103423978

/* ---- the classes -------------------------------------------------------- */

static const char *const keys_seed[] = {"type", "seed", NULL};
static const char *const keys_none[] = {"type", NULL};
static const char *const keys_normal[] = {"type", "mean", "stddev", "seed",
                                          NULL};
static const char *const keys_uniform[] = {"type", "minval", "maxval",
                                           "seed", NULL};
static const char *const keys_vs[] = {"type", "scale", "mode",
                                      "distribution", "seed", NULL};
static const char *const keys_const[] = {"type", "value", NULL};

static const struct init_class {
    const char *name;           /* Keras's class */
    struct hc_initializer init; /* with Keras's defaults */
    const char *const *keys;    /* in hetps's object form */
} classes[] = {
    {"GlorotUniform", {HC_INIT_GLOROT_UNIFORM, {0, 0, 0, 0}}, keys_seed},
    {"GlorotNormal",
     {HC_INIT_VARIANCE_SCALING, {1, 0, HC_FAN_AVG, HC_DIST_TRUNCATED}},
     keys_seed},
    {"HeNormal",
     {HC_INIT_VARIANCE_SCALING, {2, 0, HC_FAN_IN, HC_DIST_TRUNCATED}},
     keys_seed},
    {"HeUniform",
     {HC_INIT_VARIANCE_SCALING, {2, 0, HC_FAN_IN, HC_DIST_UNIFORM}},
     keys_seed},
    {"LecunNormal",
     {HC_INIT_VARIANCE_SCALING, {1, 0, HC_FAN_IN, HC_DIST_TRUNCATED}},
     keys_seed},
    {"LecunUniform",
     {HC_INIT_VARIANCE_SCALING, {1, 0, HC_FAN_IN, HC_DIST_UNIFORM}},
     keys_seed},
    {"RandomNormal", {HC_INIT_RANDOM_NORMAL, {0, 0.05f, 0, 0}}, keys_normal},
    {"RandomUniform", {HC_INIT_RANDOM_UNIFORM, {-0.05f, 0.05f, 0, 0}},
     keys_uniform},
    {"TruncatedNormal", {HC_INIT_TRUNCATED_NORMAL, {0, 0.05f, 0, 0}},
     keys_normal},
    {"VarianceScaling",
     {HC_INIT_VARIANCE_SCALING, {1, 0, HC_FAN_IN, HC_DIST_TRUNCATED}},
     keys_vs},
    {"Zeros", {HC_INIT_ZEROS, {0, 0, 0, 0}}, keys_none},
    {"Ones", {HC_INIT_CONSTANT, {1, 0, 0, 0}}, keys_none},
    {"Constant", {HC_INIT_CONSTANT, {0, 0, 0, 0}}, keys_const},
};

#define N_CLASSES (sizeof classes / sizeof classes[0])

static const char *const fan_names[] = {"fan_in", "fan_out", "fan_avg"};

const char *md_init_list(void)
{
    return "GlorotUniform, GlorotNormal, HeNormal, HeUniform, LecunNormal, "
           "LecunUniform, RandomNormal, RandomUniform, TruncatedNormal, "
           "VarianceScaling, Zeros, Ones, Constant";
}

static const struct init_class *class_named(const char *s)
{
    char n[40], t[40];

    md_norm(s, n, sizeof n);
    for (size_t i = 0; i < N_CLASSES; i++)
        if (strcmp(n, md_norm(classes[i].name, t, sizeof t)) == 0)
            return &classes[i];
    return NULL;
}

int md_init_known(const char *s)
{
    return class_named(s) != NULL;
}

/* VarianceScaling's "mode" and "distribution". */
static int read_vs(const cJSON *o, const char *where, struct hc_init_par *p)
{
    static const struct md_range positive = {0, HUGE_VAL, 1, 0};
    const char *s;
    char n[32];
    int rv;

    if ((rv = md_get_float(o, "scale", where, p->a, positive, &p->a)) ||
        (rv = md_get_str(o, "mode", where, &s)))
        return rv;
    if (s) {
        md_norm(s, n, sizeof n);
        if (!strcmp(n, "fanin"))
            p->mode = HC_FAN_IN;
        else if (!strcmp(n, "fanout"))
            p->mode = HC_FAN_OUT;
        else if (!strcmp(n, "fanavg"))
            p->mode = HC_FAN_AVG;
        else
            return md_fail(where, "\"mode\" \"%.40s\" is not supported; use "
                           "\"fan_in\", \"fan_out\" or \"fan_avg\"", s);
    }
    if ((rv = md_get_str(o, "distribution", where, &s)) || !s)
        return rv;
    md_norm(s, n, sizeof n);
    if (!strcmp(n, "truncatednormal") || !strcmp(n, "normal"))
        p->dist = HC_DIST_TRUNCATED;
    else if (!strcmp(n, "untruncatednormal"))
        p->dist = HC_DIST_NORMAL;
    else if (!strcmp(n, "uniform"))
        p->dist = HC_DIST_UNIFORM;
    else
        return md_fail(where, "\"distribution\" \"%.40s\" is not supported; "
                       "use \"truncated_normal\", \"untruncated_normal\" or "
                       "\"uniform\"", s);
    return HC_OK;
}

/* The parameters of an object form {"type": cls, …} over cls's defaults. */
static int read_params(const cJSON *o, const char *where,
                       const struct init_class *c, struct hc_initializer *out)
{
    static const struct md_range any = {-HUGE_VAL, HUGE_VAL, 0, 0};
    static const struct md_range positive = {0, HUGE_VAL, 1, 0};
    struct hc_init_par *p = &out->par;
    const cJSON *seed = md_get(o, "seed");
    char buf[64];
    int rv;

    if ((rv = md_check_keys(o, c->keys, where)))
        return rv;
    if (seed && !cJSON_IsNull(seed) && !md_is_int(seed))
        return md_fail(where, "\"seed\" must be an integer or null, got %s",
                       md_show(seed, buf, sizeof buf));
    switch (out->kind) {
    case HC_INIT_CONSTANT:
        return md_get_float(o, "value", where, p->a, any, &p->a);
    case HC_INIT_RANDOM_NORMAL:
    case HC_INIT_TRUNCATED_NORMAL:
        if ((rv = md_get_float(o, "mean", where, p->a, any, &p->a)))
            return rv;
        return md_get_float(o, "stddev", where, p->b, positive, &p->b);
    case HC_INIT_RANDOM_UNIFORM:
        if ((rv = md_get_float(o, "minval", where, p->a, any, &p->a)) ||
            (rv = md_get_float(o, "maxval", where, p->b, any, &p->b)))
            return rv;
        if (!(p->a < p->b))
            return md_fail(where, "\"minval\" %g must be below \"maxval\" "
                           "%g", (double)p->a, (double)p->b);
        return HC_OK;
    case HC_INIT_VARIANCE_SCALING:
        return read_vs(o, where, p);
    default:
        return HC_OK;
    }
}

int md_get_init(const cJSON *obj, const char *key, const char *where,
                enum hc_init def, struct hc_initializer *out)
{
    const cJSON *it = md_get(obj, key), *t = NULL;
    const struct init_class *c = NULL;
    char w[WHERE_MAX], buf[64];

    memset(out, 0, sizeof *out);
    out->kind = def;
    if (!it || cJSON_IsNull(it))
        return HC_OK;
    if (cJSON_IsString(it))
        t = it;
    else if (cJSON_IsObject(it))
        t = md_get(it, "type");
    if (!t && cJSON_IsObject(it))
        return md_missing(where, "type", "\"HeNormal\"");
    if (cJSON_IsString(t))
        c = class_named(t->valuestring);
    if (!c)
        return md_fail(where, "\"%s\" %s is not supported; use one of %s",
                       key, md_show(t ? t : it, buf, sizeof buf),
                       md_init_list());
    *out = c->init;
    if (!cJSON_IsObject(it))
        return HC_OK;
    snprintf(w, sizeof w, "%.500s: %s (%s)", where, key, c->name);
    return read_params(it, w, c, out);
}

/* ---- regularizers ------------------------------------------------------- */

static const char *const keys_l1[] = {"type", "l1", NULL};
static const char *const keys_l2[] = {"type", "l2", NULL};
static const char *const keys_l1l2[] = {"type", "l1", "l2", NULL};

static const struct reg_class {
    const char *name;           /* Keras's class */
    const char *snake;          /* Keras's string for it */
    struct hc_regularizer def;  /* Keras 3's defaults */
    const char *const *keys;
} regs[] = {
    {"L1", "l1", {0.01f, 0}, keys_l1},
    {"L2", "l2", {0, 0.01f}, keys_l2},
    {"L1L2", "l1_l2", {0, 0}, keys_l1l2},
};

const char *md_reg_list(void)
{
    return "L1, L2, L1L2";
}

static const struct reg_class *reg_named(const char *s)
{
    char n[32], t[32];

    md_norm(s, n, sizeof n);
    for (size_t i = 0; i < sizeof regs / sizeof regs[0]; i++)
        if (!strcmp(n, md_norm(regs[i].name, t, sizeof t)) ||
            !strcmp(n, md_norm(regs[i].snake, t, sizeof t)))
            return &regs[i];
    return NULL;
}

int md_reg_known(const char *s)
{
    return reg_named(s) != NULL;
}

int md_get_reg(const cJSON *obj, const char *key, const char *where,
               struct hc_regularizer *out)
{
    static const struct md_range nonneg = {0, HUGE_VAL, 0, 0};
    const cJSON *it = md_get(obj, key), *t = it;
    const struct reg_class *c = NULL;
    char w[WHERE_MAX], buf[64];
    int rv;

    out->l1 = out->l2 = 0;
    if (!it || cJSON_IsNull(it))
        return HC_OK;
    if (cJSON_IsObject(it) && !(t = md_get(it, "type")))
        return md_missing(where, "type", "\"L2\"");
    if (cJSON_IsString(t))
        c = reg_named(t->valuestring);
    if (!c)
        return md_fail(where, "\"%s\" %s is not supported; use one of %s",
                       key, md_show(t, buf, sizeof buf), md_reg_list());
    *out = c->def;
    if (!cJSON_IsObject(it))
        return HC_OK;
    snprintf(w, sizeof w, "%.500s: %s (%s)", where, key, c->name);
    if ((rv = md_check_keys(it, c->keys, w)) ||
        (rv = md_get_float(it, "l1", w, out->l1, nonneg, &out->l1)))
        return rv;
    return md_get_float(it, "l2", w, out->l2, nonneg, &out->l2);
}

const char *md_reg_keras(const struct hc_regularizer *r, cJSON *cfg)
{
    const char *cls = r->l1 && r->l2 ? "L1L2" : r->l1 ? "L1" : "L2";

    if (r->l1)
        cJSON_AddNumberToObject(cfg, "l1", r->l1);
    if (r->l2 || !r->l1)
        cJSON_AddNumberToObject(cfg, "l2", r->l2);
    return cls;
}

/* ---- values ------------------------------------------------------------- */

/* A uniform double in [0, 1): the top 53 bits of the next output. */
static double uniform(uint64_t *state)
{
    return (double)(hc_splitmix64(state) >> 11) * 0x1.0p-53;
}

/* A unit normal (Box–Muller, the cosine branch: one per two uniforms). */
static double normal(uint64_t *state)
{
    double u = uniform(state), v = uniform(state);

    return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

/* A unit normal redrawn until within ±2. */
static double truncated(uint64_t *state)
{
    double z;

    do
        z = normal(state);
    while (fabs(z) > 2.0);
    return z;
}

/* Keras's fans of a variable of this shape: a vector's length for both;
 * a matrix's rows and columns; for a convolution kernel (…, in, out) the
 * last two times the window's size. */
static void keras_fans(const struct hc_var_def *d, double *in, double *out)
{
    double rf = 1;

    if (d->ndim < 2) {
        *in = *out = d->ndim ? d->shape[0] : 1;
        return;
    }
    for (int k = 0; k < d->ndim - 2; k++)
        rf *= d->shape[k];
    *in = d->shape[d->ndim - 2] * rf;
    *out = d->shape[d->ndim - 1] * rf;
}

/* n values of initialiser `in` for a variable of fans (fin, fout), drawn
 * from the splitmix64 stream at *state. */
static void init_fill(const struct hc_initializer *in, double fin,
                      double fout, uint64_t *state, size_t n, float *p)
{
    const struct hc_init_par *q = &in->par;
    double fan, s, limit;
    size_t i;

    switch (in->kind) {
    case HC_INIT_GLOROT_UNIFORM:
        limit = sqrt(6.0 / (fin + fout));
        for (i = 0; i < n; i++)
            p[i] = (float)((2.0 * uniform(state) - 1.0) * limit);
        return;
    case HC_INIT_CONSTANT:
        for (i = 0; i < n; i++)
            p[i] = q->a;
        return;
    case HC_INIT_RANDOM_NORMAL:
        for (i = 0; i < n; i++)
            p[i] = (float)(q->a + q->b * normal(state));
        return;
    case HC_INIT_RANDOM_UNIFORM:
        for (i = 0; i < n; i++)
            p[i] = (float)(q->a + (q->b - q->a) * uniform(state));
        return;
    case HC_INIT_TRUNCATED_NORMAL:
        for (i = 0; i < n; i++)
            p[i] = (float)(q->a + q->b * truncated(state));
        return;
    case HC_INIT_VARIANCE_SCALING:
        fan = q->mode == HC_FAN_IN ? fin : q->mode == HC_FAN_OUT
                                               ? fout : (fin + fout) / 2;
        s = q->a / (fan > 1 ? fan : 1);
        for (i = 0; i < n; i++) {
            if (q->dist == HC_DIST_UNIFORM)
                p[i] = (float)((2.0 * uniform(state) - 1.0) * sqrt(3 * s));
            else if (q->dist == HC_DIST_NORMAL)
                p[i] = (float)(sqrt(s) * normal(state));
            else
                p[i] = (float)(sqrt(s) / TRUNC_STDDEV * truncated(state));
        }
        return;
    case HC_INIT_ZEROS:
        break;
    }
    memset(p, 0, n * sizeof *p);
}

void md_init_values(const struct hc_var_def *d, uint64_t seed, int v,
                    float *p)
{
    struct hc_initializer in = {d->init, d->init_par};
    uint64_t state = hc_mix64(seed ^ hc_mix64((uint64_t)v + HC_GOLDEN_GAMMA));
    double fin, fout;

    keras_fans(d, &fin, &fout);
    if (d->init == HC_INIT_GLOROT_UNIFORM && d->fan_in + d->fan_out > 0) {
        fin = d->fan_in;        /* the fans the layer gave, as always; */
        fout = d->fan_out;      /* else Keras's (a bias) */
    }
    init_fill(&in, fin, fout, &state, d->size, p);
}

void hc_init_row(const struct hc_initializer *in, uint64_t input_dim,
                 uint32_t dim, uint64_t seed, uint32_t var, uint64_t row,
                 float *p)
{
    uint64_t state = hc_mix64(hc_mix64(seed ^ hc_mix64((uint64_t)var +
                                                       HC_GOLDEN_GAMMA)) ^
                              hc_mix64(row));

    init_fill(in, (double)input_dim, (double)dim, &state, dim, p);
}

/* ---- written out -------------------------------------------------------- */

/* 1 when list (NULL-terminated) holds key. */
static int has_key(const char *const *list, const char *key)
{
    for (; *list; list++)
        if (!strcmp(*list, key))
            return 1;
    return 0;
}

const char *md_init_keras(const struct hc_initializer *in, double seed,
                          cJSON *cfg)
{
    static const char *const dists[] = {"truncated_normal",
                                        "untruncated_normal", "uniform"};
    static const char *const generic[] = {
        [HC_INIT_GLOROT_UNIFORM] = "GlorotUniform", [HC_INIT_ZEROS] = "Zeros",
        [HC_INIT_CONSTANT] = "Constant",
        [HC_INIT_RANDOM_NORMAL] = "RandomNormal",
        [HC_INIT_RANDOM_UNIFORM] = "RandomUniform",
        [HC_INIT_TRUNCATED_NORMAL] = "TruncatedNormal",
        [HC_INIT_VARIANCE_SCALING] = "VarianceScaling"};
    const struct hc_init_par *p = &in->par;
    const struct init_class *c = NULL;

    for (size_t i = 0; i < N_CLASSES && !c; i++)
        if (classes[i].init.kind == in->kind &&
            !memcmp(&classes[i].init.par, p, sizeof *p))
            c = &classes[i];
    if (!c)
        c = class_named(generic[in->kind]);
    if (has_key(c->keys, "seed"))
        cJSON_AddNumberToObject(cfg, "seed", seed);
    if (has_key(c->keys, "value"))
        cJSON_AddNumberToObject(cfg, "value", p->a);
    if (has_key(c->keys, "mean")) {
        cJSON_AddNumberToObject(cfg, "mean", p->a);
        cJSON_AddNumberToObject(cfg, "stddev", p->b);
    }
    if (has_key(c->keys, "minval")) {
        cJSON_AddNumberToObject(cfg, "minval", p->a);
        cJSON_AddNumberToObject(cfg, "maxval", p->b);
    }
    if (has_key(c->keys, "scale")) {
        cJSON_AddNumberToObject(cfg, "scale", p->a);
        cJSON_AddStringToObject(cfg, "mode", fan_names[p->mode]);
        cJSON_AddStringToObject(cfg, "distribution", dists[p->dist]);
    }
    return c->name;
}
