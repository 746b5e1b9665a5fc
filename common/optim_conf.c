/*
 * optim_conf.c — the optimizer's settings (see optim_conf.h): defaults,
 * the one validation, and the two encodings, the wire's OptimizerSettings
 * message and the store's fixed record. One table names every setting:
 * its Keras name, where it sits in the struct, the message and the
 * record, its range and the types that take it; the functions below walk
 * it. The model file's JSON form is read by common/model.c, which ends in
 * hc_optim_validate like everything else.
 */
#include "optim_conf.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "err.h"
#include "hetps.pb-c.h"

#define RECORD_MAGIC "HOPT"
#define T(x) (1u << (x))
#define ADAMS (T(HC_OPT_ADAM) | T(HC_OPT_ADAMW) | T(HC_OPT_NADAM) | \
               T(HC_OPT_ADAMAX))
#define ALL (T(HC_OPT_COUNT) - 1)
#define BIG 1e6f

typedef Hetps__OptimizerSettings Msg;

/* A float setting. `rec` is its offset in the version 2 record. */
struct fset {
    const char *key;
    size_t off, has, val;       /* in hc_optim_conf; in Msg */
    int rec;
    float lo, hi;
    int lo_open, hi_open;
    unsigned types;
    int optional;               /* may be absent from a message: 0 */
};

#define F(k, field, wire, rec, lo, lo_o, hi, hi_o, types, opt)              \
    {k, offsetof(struct hc_optim_conf, field), offsetof(Msg, has_##wire),  \
     offsetof(Msg, wire), rec, lo, hi, lo_o, hi_o, types, opt}

static const struct fset fsets[] = {
    F("momentum", momentum, momentum, 12, 0, 1, 1, 1, T(HC_OPT_MOMENTUM), 0),
    F("momentum", momentum, momentum, 12, 0, 0, 1, 1, T(HC_OPT_RMSPROP), 0),
    F("rho", rho, rho, 28, 0, 0, 1, 1, T(HC_OPT_RMSPROP), 0),
    F("beta_1", beta1, beta_1, 16, 0, 0, 1, 1, ADAMS, 0),
    F("beta_2", beta2, beta_2, 20, 0, 0, 1, 1, ADAMS, 0),
    F("epsilon", eps, epsilon, 24, 0, 1, 1, 0,
      ADAMS | T(HC_OPT_RMSPROP) | T(HC_OPT_ADAGRAD), 0),
    F("initial_accumulator_value", init_accum, initial_accumulator_value, 32,
      0, 0, BIG, 0, T(HC_OPT_ADAGRAD) | T(HC_OPT_FTRL), 0),
    F("learning_rate_power", lr_power, learning_rate_power, 36, -10, 0, 0, 0,
      T(HC_OPT_FTRL), 0),
    F("l1_regularization_strength", l1, l1_regularization_strength, 40, 0, 0,
      BIG, 0, T(HC_OPT_FTRL), 0),
    F("l2_regularization_strength", l2, l2_regularization_strength, 44, 0, 0,
      BIG, 0, T(HC_OPT_FTRL), 0),
    F("l2_shrinkage_regularization_strength", l2_shrinkage,
      l2_shrinkage_regularization_strength, 48, 0, 0, BIG, 0, T(HC_OPT_FTRL),
      0),
    F("beta", beta, beta, 52, 0, 0, BIG, 0, T(HC_OPT_FTRL), 0),
    F("weight_decay", weight_decay, weight_decay, 56, 0, 0, 1, 0, ALL, 1),
    F("clipvalue", clipvalue, clipvalue, 60, 0, 0, BIG, 0, ALL, 1),
    F("clipnorm", clipnorm, clipnorm, 348, 0, 0, BIG, 0, ALL, 1),
    F("global_clipnorm", global_clipnorm, global_clipnorm, 352, 0, 0, BIG, 0,
      ALL, 1),
};
#define N_FSETS (sizeof fsets / sizeof fsets[0])

/* A true/false setting: its bit in the record's flags. */
struct bset {
    const char *key;
    size_t off, has, val;
    unsigned bit, types;
};

#define B(k, field, bit, types)                                             \
    {k, offsetof(struct hc_optim_conf, field), offsetof(Msg, has_##field), \
     offsetof(Msg, field), bit, types}

static const struct bset bsets[] = {
    B("nesterov", nesterov, 1, T(HC_OPT_MOMENTUM)),
    B("amsgrad", amsgrad, 2, T(HC_OPT_ADAM) | T(HC_OPT_ADAMW)),
    B("centered", centered, 4, T(HC_OPT_RMSPROP)),
};
#define N_BSETS (sizeof bsets / sizeof bsets[0])

static const char *const names[HC_OPT_COUNT] = {
    "sgd", "momentum", "adam", "rmsprop", "adagrad", "adamw", "nadam",
    "adamax", "ftrl"};

static const int wire_types[HC_OPT_COUNT] = {
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_SGD,
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_MOMENTUM,
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAM,
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_RMSPROP,
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAGRAD,
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAMW,
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_NADAM,
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAMAX,
    HETPS__OPTIMIZER_TYPE__OPTIMIZER_FTRL};

static int within(float x, float lo, int lo_open, float hi, int hi_open);

/* ---- the schedule's settings: a table as above ------------------------- */

typedef Hetps__LearningRateSchedule SMsg;
#define K(x) (1u << (x))
#define DECAYS (K(HC_LR_EXPONENTIAL) | K(HC_LR_INVERSE_TIME) | \
                K(HC_LR_POLYNOMIAL) | K(HC_LR_COSINE))

struct sset {
    const char *key;
    size_t off, has, val;       /* in hc_lr_schedule; in SMsg */
    int rec, is_bool;           /* record offset (bool: flag bit) */
    float lo, hi;
    int lo_open, hi_open;
    unsigned kinds;
};

#define S(k, field, wire, rec, lo, lo_o, hi, hi_o, kinds)                   \
    {k, offsetof(struct hc_lr_schedule, field), offsetof(SMsg, has_##wire), \
     offsetof(SMsg, wire), rec, 0, lo, hi, lo_o, hi_o, kinds}
#define SB(k, field, bit, kinds)                                            \
    {k, offsetof(struct hc_lr_schedule, field), offsetof(SMsg, has_##field),\
     offsetof(SMsg, field), bit, 1, 0, 1, 0, 0, kinds}

static const struct sset ssets[] = {
    S("decay_steps", decay_steps, decay_steps, 196, 0, 1, 1e12f, 0, DECAYS),
    S("decay_rate", decay_rate, decay_rate, 200, 0, 0, BIG, 0,
      K(HC_LR_EXPONENTIAL) | K(HC_LR_INVERSE_TIME)),
    SB("staircase", staircase, 1, K(HC_LR_EXPONENTIAL) | K(HC_LR_INVERSE_TIME)),
    S("end_learning_rate", end_lr, end_learning_rate, 204, 0, 0,
      HC_OPTIM_LR_MAX, 0, K(HC_LR_POLYNOMIAL)),
    S("power", power, power, 208, 0, 0, 1000, 0, K(HC_LR_POLYNOMIAL)),
    SB("cycle", cycle, 2, K(HC_LR_POLYNOMIAL)),
    S("alpha", alpha, alpha, 212, 0, 0, 1, 0, K(HC_LR_COSINE)),
    S("warmup_steps", warmup_steps, warmup_steps, 220, 0, 0, 1e12f, 0,
      K(HC_LR_COSINE)),
};
#define N_SSETS (sizeof ssets / sizeof ssets[0])

static const char *const lr_names[HC_LR_KINDS] = {
    "constant", "ExponentialDecay", "InverseTimeDecay", "PolynomialDecay",
    "CosineDecay", "PiecewiseConstantDecay"};

static int lr_known(enum hc_lr_kind k)
{
    return (unsigned)k < HC_LR_KINDS;
}

static int lr_uses(enum hc_lr_kind k, unsigned kinds)
{
    return lr_known(k) && (kinds & K(k)) != 0;
}

static float sget(const struct hc_lr_schedule *s, const struct sset *f)
{
    float x;
    int b;

    if (f->is_bool) {
        memcpy(&b, (const char *)s + f->off, sizeof b);
        return (float)b;
    }
    memcpy(&x, (const char *)s + f->off, sizeof x);
    return x;
}

static void sput(struct hc_lr_schedule *s, const struct sset *f, double x)
{
    float v = (float)x;
    int b = x != 0.0;

    if (f->is_bool)
        memcpy((char *)s + f->off, &b, sizeof b);
    else
        memcpy((char *)s + f->off, &v, sizeof v);
}

const char *hc_lr_kind_name(enum hc_lr_kind kind)
{
    return lr_known(kind) ? lr_names[kind] : "?";
}

int hc_lr_by_name(const char *name, enum hc_lr_kind *kind)
{
    for (int k = 1; k < HC_LR_KINDS; k++)
        if (!strcmp(name, lr_names[k])) {
            *kind = (enum hc_lr_kind)k;
            return HC_OK;
        }
    return HC_ERR_NOTFOUND;
}

int hc_lr_key(enum hc_lr_kind kind, const char *key)
{
    if (kind == HC_LR_PIECEWISE)
        return !strcmp(key, "boundaries") || !strcmp(key, "values")
                   ? HC_OPTIM_KEY_WORDS : HC_OPTIM_KEY_NONE;
    if (!lr_known(kind) || kind == HC_LR_CONSTANT)
        return HC_OPTIM_KEY_NONE;
    if (!strcmp(key, "initial_learning_rate") ||
        (kind == HC_LR_COSINE && !strcmp(key, "warmup_target")))
        return HC_OPTIM_KEY_FLOAT;
    for (size_t i = 0; i < N_SSETS; i++)
        if (lr_uses(kind, ssets[i].kinds) && !strcmp(key, ssets[i].key))
            return ssets[i].is_bool ? HC_OPTIM_KEY_BOOL : HC_OPTIM_KEY_FLOAT;
    return HC_OPTIM_KEY_NONE;
}

void hc_lr_keys(enum hc_lr_kind kind, const char **keys, size_t cap)
{
    size_t n = 0;

    if (cap == 0)
        return;
    if (kind == HC_LR_PIECEWISE && cap >= 3) {
        keys[n++] = "boundaries";
        keys[n++] = "values";
    } else if (kind != HC_LR_PIECEWISE && n + 1 < cap) {
        keys[n++] = "initial_learning_rate";
    }
    for (size_t i = 0; i < N_SSETS && n + 1 < cap; i++)
        if (lr_uses(kind, ssets[i].kinds))
            keys[n++] = ssets[i].key;
    if (kind == HC_LR_COSINE && n + 1 < cap)
        keys[n++] = "warmup_target";
    keys[n] = NULL;
}

void hc_lr_set(struct hc_optim_conf *c, const char *key, double x)
{
    if (!strcmp(key, "initial_learning_rate")) {
        c->lr = (float)x;
        return;
    }
    if (!strcmp(key, "warmup_target")) {
        c->sched.warmup = 1;
        c->sched.warmup_target = (float)x;
        return;
    }
    for (size_t i = 0; i < N_SSETS; i++)
        if (lr_uses(c->sched.kind, ssets[i].kinds) &&
            !strcmp(key, ssets[i].key))
            sput(&c->sched, &ssets[i], x);
}

/* A schedule's own limits (see optim_conf.h). */
static int sched_validate(const struct hc_lr_schedule *s, const char *src)
{
    const char *name = hc_lr_kind_name(s->kind);

    if (!lr_known(s->kind))
        return hc_err_set(HC_ERR_CONFIG, "%s: learning_rate schedule %d is "
                          "unknown", src, (int)s->kind);
    for (size_t i = 0; i < N_SSETS; i++) {
        const struct sset *f = &ssets[i];
        float x = sget(s, f);

        if (!lr_uses(s->kind, f->kinds))
            continue;
        if (f->is_bool ? (x != 0.0f && x != 1.0f)
                       : !within(x, f->lo, f->lo_open, f->hi, f->hi_open))
            return hc_err_set(HC_ERR_CONFIG, "%s: %s %s %g is out of range: "
                              "it must be in %s%g, %g%s", src, name, f->key,
                              (double)x, f->lo_open ? "(" : "[", (double)f->lo,
                              (double)f->hi, f->hi_open ? ")" : "]");
    }
    if (s->kind == HC_LR_COSINE && s->warmup &&
        !within(s->warmup_target, 0, 0, HC_OPTIM_LR_MAX, 0))
        return hc_err_set(HC_ERR_CONFIG, "%s: CosineDecay warmup_target %g is "
                          "out of range: it must be in [0, 10]", src,
                          (double)s->warmup_target);
    if (s->kind != HC_LR_PIECEWISE)
        return HC_OK;
    if (s->n_values < 2 || s->n_values > HC_LR_MAX_VALUES)
        return hc_err_set(HC_ERR_CONFIG, "%s: PiecewiseConstantDecay has %u "
                          "values; it takes 2 to %d, and one boundary fewer",
                          src, s->n_values, HC_LR_MAX_VALUES);
    for (uint32_t i = 0; i < s->n_values; i++)
        if (!within(s->values[i], 0, 0, HC_OPTIM_LR_MAX, 0))
            return hc_err_set(HC_ERR_CONFIG, "%s: PiecewiseConstantDecay "
                              "values[%u] %g is out of range: it must be in "
                              "[0, 10]", src, i, (double)s->values[i]);
    for (uint32_t i = 1; i + 1 < s->n_values; i++)
        if (s->boundaries[i] <= s->boundaries[i - 1])
            return hc_err_set(HC_ERR_CONFIG, "%s: PiecewiseConstantDecay "
                              "boundaries must increase: %u then %u", src,
                              s->boundaries[i - 1], s->boundaries[i]);
    return HC_OK;
}

static int sched_equal(const struct hc_lr_schedule *a,
                       const struct hc_lr_schedule *b)
{
    if (a->kind != b->kind)
        return 0;
    for (size_t i = 0; i < N_SSETS; i++)
        if (lr_uses(a->kind, ssets[i].kinds) &&
            sget(a, &ssets[i]) != sget(b, &ssets[i]))
            return 0;
    if (a->kind == HC_LR_COSINE &&
        (a->warmup != b->warmup || a->warmup_target != b->warmup_target))
        return 0;
    if (a->kind == HC_LR_PIECEWISE &&
        (a->n_values != b->n_values ||
         memcmp(a->values, b->values, sizeof a->values) ||
         memcmp(a->boundaries, b->boundaries, sizeof a->boundaries)))
        return 0;
    return 1;
}

/* ", learning_rate ExponentialDecay(initial_learning_rate 0.1, …)" */
static void sched_describe(const struct hc_optim_conf *c, char *buf,
                           size_t cap)
{
    const struct hc_lr_schedule *s = &c->sched;
    size_t n = strlen(buf);

    if (s->kind == HC_LR_PIECEWISE) {
        snprintf(buf + n, cap - n, "%s(boundaries", lr_names[s->kind]);
        for (uint32_t i = 0; i + 1 < s->n_values; i++) {
            n = strlen(buf);
            snprintf(buf + n, cap - n, " %u", s->boundaries[i]);
        }
        n = strlen(buf);
        snprintf(buf + n, cap - n, ", values");
        for (uint32_t i = 0; i < s->n_values; i++) {
            n = strlen(buf);
            snprintf(buf + n, cap - n, " %.9g", (double)s->values[i]);
        }
    } else {
        snprintf(buf + n, cap - n, "%s(initial_learning_rate %.9g",
                 hc_lr_kind_name(s->kind), (double)c->lr);
        for (size_t i = 0; i < N_SSETS; i++) {
            const struct sset *f = &ssets[i];

            if (!lr_uses(s->kind, f->kinds))
                continue;
            n = strlen(buf);
            if (f->is_bool)
                snprintf(buf + n, cap - n, ", %s %s", f->key,
                         sget(s, f) != 0.0f ? "true" : "false");
            else
                snprintf(buf + n, cap - n, ", %s %.9g", f->key,
                         (double)sget(s, f));
        }
        n = strlen(buf);
        if (s->kind == HC_LR_COSINE && s->warmup)
            snprintf(buf + n, cap - n, ", warmup_target %.9g",
                     (double)s->warmup_target);
    }
    n = strlen(buf);
    snprintf(buf + n, cap - n, ")");
}

static float *fptr(struct hc_optim_conf *c, const struct fset *f)
{
    return (float *)(void *)((char *)c + f->off);
}

static float fget(const struct hc_optim_conf *c, const struct fset *f)
{
    float x;

    memcpy(&x, (const char *)c + f->off, sizeof x);
    return x;
}

static int bget(const struct hc_optim_conf *c, const struct bset *b)
{
    int x;

    memcpy(&x, (const char *)c + b->off, sizeof x);
    return x;
}

static int known(enum hc_optim t)
{
    return (unsigned)t < HC_OPT_COUNT;
}

static int uses(enum hc_optim t, unsigned types)
{
    return known(t) && (types & T(t)) != 0;
}

void hc_optim_defaults(enum hc_optim type, struct hc_optim_conf *c)
{
    memset(c, 0, sizeof *c);
    c->type = type;
    c->lr = type == HC_OPT_SGD || type == HC_OPT_MOMENTUM ? 0.01f : 1e-3f;
    if (uses(type, ADAMS)) {
        c->beta1 = 0.9f;
        c->beta2 = 0.999f;
    }
    if (uses(type, ADAMS | T(HC_OPT_RMSPROP) | T(HC_OPT_ADAGRAD)))
        c->eps = 1e-7f;
    if (type == HC_OPT_RMSPROP)
        c->rho = 0.9f;
    if (type == HC_OPT_ADAGRAD || type == HC_OPT_FTRL)
        c->init_accum = 0.1f;
    if (type == HC_OPT_FTRL)
        c->lr_power = -0.5f;
    if (type == HC_OPT_ADAMW)
        c->weight_decay = 0.004f;
}

const char *hc_optim_name(enum hc_optim type)
{
    return known(type) ? names[type] : "?";
}

const char *hc_optim_names(void)
{
    return "sgd, rmsprop, adagrad, adam, adamw, nadam, adamax, ftrl";
}

int hc_optim_by_name(const char *name, enum hc_optim *type)
{
    char n[32];
    size_t k = 0;

    for (; *name && k + 1 < sizeof n; name++)
        if (*name != '_')
            n[k++] = (char)tolower((unsigned char)*name);
    n[k] = '\0';
    for (int t = 0; t < HC_OPT_COUNT; t++)
        if (t != HC_OPT_MOMENTUM && strcmp(n, names[t]) == 0) {
            *type = (enum hc_optim)t;
            return HC_OK;
        }
    return HC_ERR_NOTFOUND;
}

enum hc_optim_key hc_optim_key(enum hc_optim type, const char *key)
{
    if (!known(type))
        return HC_OPTIM_KEY_NONE;
    if (!strcmp(key, "learning_rate"))
        return HC_OPTIM_KEY_FLOAT;
    if (!strcmp(key, "exclude_from_weight_decay"))
        return HC_OPTIM_KEY_WORDS;
    for (size_t i = 0; i < N_FSETS; i++)
        if (uses(type, fsets[i].types) && !strcmp(key, fsets[i].key))
            return HC_OPTIM_KEY_FLOAT;
    for (size_t i = 0; i < N_BSETS; i++)
        if (uses(type, bsets[i].types) && !strcmp(key, bsets[i].key))
            return HC_OPTIM_KEY_BOOL;
    return HC_OPTIM_KEY_NONE;
}

void hc_optim_keys(enum hc_optim type, const char **keys, size_t cap)
{
    size_t n = 0;

    if (cap == 0)
        return;
    if (n + 1 < cap)
        keys[n++] = "learning_rate";
    for (size_t i = 0; i < N_FSETS && n + 1 < cap; i++)
        if (uses(type, fsets[i].types))
            keys[n++] = fsets[i].key;
    for (size_t i = 0; i < N_BSETS && n + 1 < cap; i++)
        if (uses(type, bsets[i].types))
            keys[n++] = bsets[i].key;
    if (n + 1 < cap)
        keys[n++] = "exclude_from_weight_decay";
    keys[n] = NULL;
}

void hc_optim_set(struct hc_optim_conf *c, const char *key, double x)
{
    if (!strcmp(key, "learning_rate")) {
        c->lr = (float)x;
        return;
    }
    for (size_t i = 0; i < N_FSETS; i++)
        if (uses(c->type, fsets[i].types) && !strcmp(key, fsets[i].key)) {
            *fptr(c, &fsets[i]) = (float)x;
            return;
        }
    for (size_t i = 0; i < N_BSETS; i++)
        if (uses(c->type, bsets[i].types) && !strcmp(key, bsets[i].key)) {
            int b = x != 0.0;

            memcpy((char *)c + bsets[i].off, &b, sizeof b);
            return;
        }
}

double hc_optim_get(const struct hc_optim_conf *c, const char *key)
{
    if (!strcmp(key, "learning_rate"))
        return c->lr;
    for (size_t i = 0; i < N_FSETS; i++)
        if (uses(c->type, fsets[i].types) && !strcmp(key, fsets[i].key))
            return fget(c, &fsets[i]);
    for (size_t i = 0; i < N_BSETS; i++)
        if (uses(c->type, bsets[i].types) && !strcmp(key, bsets[i].key))
            return bget(c, &bsets[i]);
    return 0;
}

const char *hc_optim_keras_class(enum hc_optim type)
{
    static const char *const cls[HC_OPT_COUNT] = {
        "SGD", "SGD", "Adam", "RMSprop", "Adagrad", "AdamW", "Nadam",
        "Adamax", "Ftrl"};

    return known(type) ? cls[type] : "?";
}

int hc_optim_exclude_add(struct hc_optim_conf *c, const char *word,
                         const char *source)
{
    size_t at = 0, n = strlen(word);

    while (at < sizeof c->wd_exclude && c->wd_exclude[at])
        at += strnlen(c->wd_exclude + at, sizeof c->wd_exclude - at) + 1;
    if (n == 0 || at + n + 2 > sizeof c->wd_exclude)
        return hc_err_set(HC_ERR_CONFIG, "%s: exclude_from_weight_decay: %s",
                          source ? source : "optimizer", n == 0
                          ? "a word is empty"
                          : "the words take more than 126 bytes");
    memcpy(c->wd_exclude + at, word, n + 1);
    c->wd_exclude[at + n + 1] = '\0';
    return HC_OK;
}

/* x in the interval lo..hi, each end open or closed; NaN never is. */
static int within(float x, float lo, int lo_open, float hi, int hi_open)
{
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
}

static int out_of_range(const char *src, const char *key, float x,
                        const struct fset *f, const char *hint)
{
    return hc_err_set(HC_ERR_CONFIG, "%s: %s %g is out of range: it must be "
                      "in %s%g, %g%s%s", src, key, (double)x,
                      f->lo_open ? "(" : "[", (double)f->lo, (double)f->hi,
                      f->hi_open ? ")" : "]", hint);
}

/* The words of wd_exclude: letters, digits, '_'; the list ended by an
 * empty word inside the buffer. */
static int check_exclude(const struct hc_optim_conf *c, const char *src)
{
    const char *w = c->wd_exclude;
    size_t left = sizeof c->wd_exclude;

    while (left > 0 && *w) {
        size_t n = strnlen(w, left);

        if (n + 1 >= left)
            break;
        for (size_t i = 0; i < n; i++)
            if (!isalnum((unsigned char)w[i]) && w[i] != '_')
                return hc_err_set(HC_ERR_CONFIG, "%s: "
                                  "exclude_from_weight_decay word \"%.40s\" "
                                  "has a character other than a "
                                  "letter, a digit or '_' (the words are "
                                  "matched as plain text, not as a pattern)",
                                  src, w);
        w += n + 1;
        left -= n + 1;
    }
    if (left == 0 || *w)
        return hc_err_set(HC_ERR_CONFIG, "%s: exclude_from_weight_decay: the "
                          "words take more than %d bytes", src,
                          HC_OPTIM_EXCLUDE_BYTES - 2);
    return HC_OK;
}

int hc_optim_validate(const struct hc_optim_conf *c, const char *source)
{
    /* a schedule may start at 0 (a warm-up from 0, as Keras's examples) */
    static const struct fset lr = {"learning_rate", 0, 0, 0, 0, 0,
                                   HC_OPTIM_LR_MAX, 1, 0, 0, 0};
    static const struct fset lr0 = {"initial_learning_rate", 0, 0, 0, 0, 0,
                                    HC_OPTIM_LR_MAX, 0, 0, 0, 0};
    int sched = c->sched.kind != HC_LR_CONSTANT;
    const char *src = source ? source : "optimizer";

    if (!known(c->type))
        return hc_err_set(HC_ERR_CONFIG, "%s: optimizer type %d is unknown "
                          "(known: %s)", src, (int)c->type, hc_optim_names());
    if (!within(c->lr, 0.0f, !sched, HC_OPTIM_LR_MAX, 0))
        return out_of_range(src, sched ? "initial_learning_rate"
                                       : "learning_rate", c->lr,
                            sched ? &lr0 : &lr, "");
    if (sched) {
        int rv = sched_validate(&c->sched, src);

        if (rv != HC_OK)
            return rv;
        if (c->sched.kind == HC_LR_PIECEWISE && c->lr != c->sched.values[0])
            return hc_err_set(HC_ERR_CONFIG, "%s: PiecewiseConstantDecay's "
                              "learning_rate %g is not its values[0] %g", src,
                              (double)c->lr, (double)c->sched.values[0]);
    }
    for (size_t i = 0; i < N_FSETS; i++) {
        const struct fset *f = &fsets[i];
        float x = fget(c, f);

        if (uses(c->type, f->types) &&
            !within(x, f->lo, f->lo_open, f->hi, f->hi_open))
            return out_of_range(src, f->key, x, f,
                                c->type == HC_OPT_MOMENTUM && x == 0.0f
                                    ? " (use sgd for no momentum)" : "");
    }
    /* Keras's Ftrl divides 0 by 0 where the accumulator is still 0: an
     * element whose gradient has been exactly 0 so far becomes NaN. */
    if (c->type == HC_OPT_FTRL && c->init_accum == 0.0f &&
        c->lr_power < 0.0f && c->l2 == 0.0f && c->beta == 0.0f)
        return hc_err_set(HC_ERR_CONFIG, "%s: ftrl initial_accumulator_value "
                          "0 with l2_regularization_strength 0 and beta 0 "
                          "divides 0 by 0 (Keras's formula gives NaN) for "
                          "every element whose gradient has been exactly 0 "
                          "so far, as a ReLU's often is: give "
                          "initial_accumulator_value > 0 (1e-8 keeps the "
                          "initial weights: ps/README.md, Ftrl)", src);
    for (size_t i = 0; i < N_BSETS; i++) {
        int x = bget(c, &bsets[i]);

        if (uses(c->type, bsets[i].types) && x != 0 && x != 1)
            return hc_err_set(HC_ERR_CONFIG, "%s: %s is %d; it must be true "
                              "or false", src, bsets[i].key, x);
    }
    if ((c->clipvalue != 0.0f) + (c->clipnorm != 0.0f) +
        (c->global_clipnorm != 0.0f) > 1)
        return hc_err_set(HC_ERR_CONFIG, "%s: clipvalue %g, clipnorm %g and "
                          "global_clipnorm %g: only one of them can be set, "
                          "as in Keras", src, (double)c->clipvalue,
                          (double)c->clipnorm, (double)c->global_clipnorm);
    return check_exclude(c, src);
}

int hc_optim_equal(const struct hc_optim_conf *a,
                   const struct hc_optim_conf *b)
{
    if (a->type != b->type || a->lr != b->lr || !known(a->type))
        return 0;
    for (size_t i = 0; i < N_FSETS; i++)
        if (uses(a->type, fsets[i].types) &&
            fget(a, &fsets[i]) != fget(b, &fsets[i]))
            return 0;
    for (size_t i = 0; i < N_BSETS; i++)
        if (uses(a->type, bsets[i].types) &&
            !bget(a, &bsets[i]) != !bget(b, &bsets[i]))
            return 0;
    return memcmp(a->wd_exclude, b->wd_exclude, sizeof a->wd_exclude) == 0 &&
           sched_equal(&a->sched, &b->sched);
}

const char *hc_optim_describe(const struct hc_optim_conf *c, char *buf,
                              size_t cap)
{
    size_t n;

    if (cap == 0)
        return buf;
    snprintf(buf, cap, "%s (learning_rate ", hc_optim_name(c->type));
    if (c->sched.kind == HC_LR_CONSTANT) {
        n = strlen(buf);
        snprintf(buf + n, cap - n, "%.9g", (double)c->lr);
    } else {
        sched_describe(c, buf, cap);
    }
    for (size_t i = 0; i < N_FSETS; i++) {
        const struct fset *f = &fsets[i];

        if (!uses(c->type, f->types) || (f->optional && fget(c, f) == 0.0f))
            continue;
        n = strlen(buf);
        snprintf(buf + n, cap - n, ", %s %.9g", f->key, (double)fget(c, f));
    }
    for (size_t i = 0; i < N_BSETS; i++) {
        if (!uses(c->type, bsets[i].types))
            continue;
        n = strlen(buf);
        snprintf(buf + n, cap - n, ", %s %s", bsets[i].key,
                 bget(c, &bsets[i]) ? "true" : "false");
    }
    for (const char *w = c->wd_exclude; *w && w < c->wd_exclude +
         sizeof c->wd_exclude; w += strlen(w) + 1) {
        n = strlen(buf);
        snprintf(buf + n, cap - n, "%s%s", w == c->wd_exclude
                 ? ", exclude_from_weight_decay " : " ", w);
    }
    n = strlen(buf);
    snprintf(buf + n, cap - n, ")");
    return buf;
}

int hc_optim_decays(const struct hc_optim_conf *c, const char *var)
{
    const char *slash = strrchr(var, '/');
    const char *leaf = slash ? slash + 1 : var;

    if (!(c->weight_decay > 0.0f))
        return 0;
    for (const char *w = c->wd_exclude; *w && w < c->wd_exclude +
         sizeof c->wd_exclude; w += strlen(w) + 1)
        if (strstr(leaf, w))
            return 0;
    return 1;
}

/* ---- the rate and Keras's constants --------------------------------- */

/* The shortest "%.Ng" text of x that reads back as the same float. */
static void fmt_float(char *buf, size_t cap, float x)
{
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, cap, "%.*g", prec, (double)x);
        if (strtof(buf, NULL) == x)
            return;
    }
}

/*
 * k·x + a as Keras computes a Python-float expression of a setting: the
 * setting is a Python float (a double holding the decimal the user wrote),
 * the expression is taken in double and rounded to float32 when it meets
 * a float32 tensor. The conf holds the setting as a float, so the decimal
 * is recovered as the shortest text that reads back as that float: for
 * β = 0.999, 1 − β gives 0.001f, where 1.0f − 0.999f would be 0.000999987f
 * (1.3e-5 off). Cached per thread: apply runs per block.
 */
float hc_optim_keras_const(float x, double k, double a)
{
    static _Thread_local struct { float x, c; double k, a; int valid; }
        cache[4];
    static _Thread_local unsigned next;
    char buf[32];

    for (int i = 0; i < 4; i++)
        if (cache[i].valid && cache[i].x == x && cache[i].k == k &&
            cache[i].a == a)
            return cache[i].c;
    fmt_float(buf, sizeof buf, x);
    next = (next + 1) & 3;
    cache[next].c = (float)(k * strtod(buf, NULL) + a);
    cache[next].x = x;
    cache[next].k = k;
    cache[next].a = a;
    cache[next].valid = 1;
    return cache[next].c;
}

/* CosineDecay's decay from `from` over decay_steps, at step x. */
static float cosine(const struct hc_lr_schedule *s, float x, float from)
{
    float frac = x / s->decay_steps;
    float pi = (float)M_PI;
    float cd = 0.5f * (1.0f + cosf(pi * frac));
    float decayed = hc_optim_keras_const(s->alpha, -1.0, 1.0) * cd + s->alpha;

    return from * decayed;
}

float hc_optim_lr(const struct hc_optim_conf *c, uint64_t step)
{
    const struct hc_lr_schedule *s = &c->sched;
    float x = (float)step, p;

    switch (s->kind) {
    case HC_LR_CONSTANT:
        break;
    case HC_LR_EXPONENTIAL:
        p = x / s->decay_steps;
        if (s->staircase)
            p = floorf(p);
        return c->lr * powf(s->decay_rate, p);
    case HC_LR_INVERSE_TIME:
        p = x / s->decay_steps;
        if (s->staircase)
            p = floorf(p);
        return c->lr / (1.0f + s->decay_rate * p);
    case HC_LR_POLYNOMIAL: {
        float ds = s->decay_steps;

        if (s->cycle)
            ds = ds * (x == 0.0f ? 1.0f : ceilf(x / s->decay_steps));
        else
            x = x < ds ? x : ds;
        p = x / ds;
        return (c->lr - s->end_lr) * powf(1.0f - p, s->power) + s->end_lr;
    }
    case HC_LR_COSINE:
        if (!s->warmup)
            return cosine(s, x < s->decay_steps ? x : s->decay_steps, c->lr);
        x = x < s->decay_steps + s->warmup_steps
                ? x : s->decay_steps + s->warmup_steps;
        if (x < s->warmup_steps)
            return (s->warmup_target - c->lr) * (x / s->warmup_steps) + c->lr;
        return cosine(s, x - s->warmup_steps, s->warmup_target);
    case HC_LR_PIECEWISE:
        for (uint32_t i = 0; i + 1 < s->n_values; i++)
            if (step <= s->boundaries[i])
                return s->values[i];
        return s->values[s->n_values - 1];
    }
    return c->lr;
}

/* ---- the wire ----------------------------------------------------------- */

static void sched_to_wire(const struct hc_lr_schedule *s, SMsg *m)
{
    hetps__learning_rate_schedule__init(m);
    m->kind = (Hetps__ScheduleKind)s->kind;
    for (size_t i = 0; i < N_SSETS; i++) {
        const struct sset *f = &ssets[i];

        if (!lr_uses(s->kind, f->kinds))
            continue;
        *(protobuf_c_boolean *)(void *)((char *)m + f->has) = 1;
        if (f->is_bool)
            *(protobuf_c_boolean *)(void *)((char *)m + f->val) =
                sget(s, f) != 0.0f;
        else
            memcpy((char *)m + f->val, (const char *)s + f->off,
                   sizeof(float));
    }
    if (s->kind == HC_LR_COSINE && s->warmup) {
        m->has_warmup_target = 1;
        m->warmup_target = s->warmup_target;
    }
    if (s->kind == HC_LR_PIECEWISE) {
        m->n_values = s->n_values;
        m->values = (float *)s->values;
        m->n_boundaries = s->n_values - 1;
        m->boundaries = (uint32_t *)s->boundaries;
    }
}

void hc_optim_to_wire(const struct hc_optim_conf *c, struct hc_optim_wire *w)
{
    Msg *m = &w->m;
    size_t n = 0;

    hetps__optimizer_settings__init(m);
    m->type = known(c->type) ? (Hetps__OptimizerType)wire_types[c->type]
                             : HETPS__OPTIMIZER_TYPE__OPTIMIZER_SGD;
    m->learning_rate = c->lr;
    for (size_t i = 0; i < N_FSETS; i++) {
        const struct fset *f = &fsets[i];

        if (!uses(c->type, f->types) || (f->optional && fget(c, f) == 0.0f))
            continue;
        *(protobuf_c_boolean *)(void *)((char *)m + f->has) = 1;
        memcpy((char *)m + f->val, (const char *)c + f->off, sizeof(float));
    }
    for (size_t i = 0; i < N_BSETS; i++) {
        if (!uses(c->type, bsets[i].types))
            continue;
        *(protobuf_c_boolean *)(void *)((char *)m + bsets[i].has) = 1;
        *(protobuf_c_boolean *)(void *)((char *)m + bsets[i].val) =
            bget(c, &bsets[i]) != 0;
    }
    for (const char *x = c->wd_exclude; *x && n < HC_OPTIM_EXCLUDE_MAX &&
         x < c->wd_exclude + sizeof c->wd_exclude; x += strlen(x) + 1)
        w->words[n++] = (char *)x;
    m->n_exclude_from_weight_decay = n;
    m->exclude_from_weight_decay = n ? w->words : NULL;
    if (c->sched.kind != HC_LR_CONSTANT) {
        sched_to_wire(&c->sched, &w->sched);
        m->schedule = &w->sched;
    }
}

/* The message's schedule into c->sched: the kind's own settings present. */
static int sched_from_wire(const SMsg *m, const char *src,
                           struct hc_optim_conf *c)
{
    struct hc_lr_schedule *s = &c->sched;
    const char *name;

    if (!lr_known((enum hc_lr_kind)m->kind) || m->kind == 0)
        return hc_err_set(HC_ERR_CONFIG, "%s: learning_rate schedule %d is "
                          "unknown", src, (int)m->kind);
    s->kind = (enum hc_lr_kind)m->kind;
    name = lr_names[s->kind];
    for (size_t i = 0; i < N_SSETS; i++) {
        const struct sset *f = &ssets[i];

        if (!lr_uses(s->kind, f->kinds))
            continue;
        if (!*(const protobuf_c_boolean *)(const void *)((const char *)m +
                                                         f->has))
            return hc_err_set(HC_ERR_CONFIG, "%s: the %s schedule lacks %s",
                              src, name, f->key);
        if (f->is_bool)
            sput(s, f, *(const protobuf_c_boolean *)(const void *)(
                           (const char *)m + f->val) != 0);
        else
            memcpy((char *)s + f->off, (const char *)m + f->val,
                   sizeof(float));
    }
    if (s->kind == HC_LR_COSINE && m->has_warmup_target) {
        s->warmup = 1;
        s->warmup_target = m->warmup_target;
    }
    if (s->kind == HC_LR_PIECEWISE) {
        if (m->n_values < 2 || m->n_values > HC_LR_MAX_VALUES ||
            m->n_boundaries + 1 != m->n_values)
            return hc_err_set(HC_ERR_CONFIG, "%s: PiecewiseConstantDecay with "
                              "%zu values and %zu boundaries (2 to %d values, "
                              "one boundary fewer)", src, m->n_values,
                              m->n_boundaries, HC_LR_MAX_VALUES);
        s->n_values = (uint32_t)m->n_values;
        memcpy(s->values, m->values, m->n_values * sizeof(float));
        memcpy(s->boundaries, m->boundaries, m->n_boundaries * 4);
    }
    return HC_OK;
}

static int missing(const char *src, const char *type, const char *key)
{
    return hc_err_set(HC_ERR_CONFIG, "%s: the %s optimizer's settings lack "
                      "%s", src, type, key);
}

/* The message's exclusion words into c->wd_exclude. */
static int exclude_from_wire(const Msg *m, const char *src,
                             struct hc_optim_conf *c)
{
    size_t at = 0;

    if (m->n_exclude_from_weight_decay > HC_OPTIM_EXCLUDE_MAX)
        return hc_err_set(HC_ERR_CONFIG, "%s: %zu exclude_from_weight_decay "
                          "words (at most %d)", src,
                          m->n_exclude_from_weight_decay, HC_OPTIM_EXCLUDE_MAX);
    for (size_t i = 0; i < m->n_exclude_from_weight_decay; i++) {
        const char *w = m->exclude_from_weight_decay[i];
        size_t n = w ? strlen(w) : 0;

        if (n == 0)
            return hc_err_set(HC_ERR_CONFIG, "%s: exclude_from_weight_decay "
                              "word %zu is empty", src, i);
        if (at + n + 2 > sizeof c->wd_exclude)
            return hc_err_set(HC_ERR_CONFIG, "%s: exclude_from_weight_decay: "
                              "the words take more than %d bytes", src,
                              HC_OPTIM_EXCLUDE_BYTES - 2);
        memcpy(c->wd_exclude + at, w, n + 1);
        at += n + 1;
    }
    return HC_OK;
}

int hc_optim_from_wire(const Msg *m, const char *source,
                       struct hc_optim_conf *out)
{
    const char *src = source ? source : "optimizer";
    struct hc_optim_conf c;
    int t, rv;

    for (t = 0; t < HC_OPT_COUNT && wire_types[t] != (int)m->type; t++)
        ;
    if (t == HC_OPT_COUNT)
        return hc_err_set(HC_ERR_CONFIG, "%s: optimizer type %d is unknown "
                          "(known: %s)", src, (int)m->type, hc_optim_names());
    memset(&c, 0, sizeof c);
    c.type = (enum hc_optim)t;
    c.lr = m->learning_rate;
    for (size_t i = 0; i < N_FSETS; i++) {
        const struct fset *f = &fsets[i];

        if (!uses(c.type, f->types))
            continue;
        if (*(const protobuf_c_boolean *)(const void *)((const char *)m +
                                                        f->has))
            memcpy(fptr(&c, f), (const char *)m + f->val, sizeof(float));
        else if (!f->optional)
            return missing(src, names[t], f->key);
    }
    for (size_t i = 0; i < N_BSETS; i++) {
        const struct bset *b = &bsets[i];
        int x;

        if (!uses(c.type, b->types))
            continue;
        if (!*(const protobuf_c_boolean *)(const void *)((const char *)m +
                                                         b->has))
            return missing(src, names[t], b->key);
        x = *(const protobuf_c_boolean *)(const void *)((const char *)m +
                                                        b->val) != 0;
        memcpy((char *)&c + b->off, &x, sizeof x);
    }
    if ((m->schedule && (rv = sched_from_wire(m->schedule, src, &c))) ||
        (rv = exclude_from_wire(m, src, &c)) != HC_OK ||
        (rv = hc_optim_validate(&c, src)) != HC_OK)
        return rv;
    *out = c;
    return HC_OK;
}

/* ---- the store's record ------------------------------------------------- */

static void put_u16(unsigned char *p, uint16_t x)
{
    p[0] = (unsigned char)x;
    p[1] = (unsigned char)(x >> 8);
}

static void put_u32(unsigned char *p, uint32_t x)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(x >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static void put_f32(unsigned char *p, float x)
{
    uint32_t u;

    memcpy(&u, &x, sizeof u);
    put_u32(p, u);
}

static float get_f32(const unsigned char *p)
{
    uint32_t u = get_u32(p);
    float x;

    memcpy(&x, &u, sizeof x);
    return x;
}

#define CRC_AT (HC_OPTIM_RECORD_SIZE - 4)


static void sched_to_record(const struct hc_lr_schedule *s,
                            unsigned char *rec)
{
    if (s->kind == HC_LR_CONSTANT || !lr_known(s->kind))
        return;
    rec[192] = (unsigned char)s->kind;
    for (size_t i = 0; i < N_SSETS; i++) {
        const struct sset *f = &ssets[i];

        if (!lr_uses(s->kind, f->kinds))
            continue;
        if (f->is_bool && sget(s, f) != 0.0f)
            rec[193] |= (unsigned char)f->rec;
        else if (!f->is_bool)
            put_f32(rec + f->rec, sget(s, f));
    }
    if (s->kind == HC_LR_COSINE && s->warmup) {
        rec[193] |= 4;
        put_f32(rec + 216, s->warmup_target);
    }
    if (s->kind == HC_LR_PIECEWISE) {
        rec[194] = (unsigned char)s->n_values;
        for (uint32_t i = 0; i < s->n_values && i < HC_LR_MAX_VALUES; i++) {
            if (i + 1 < HC_LR_MAX_VALUES)
                put_u32(rec + 224 + 4 * i, i + 1 < s->n_values
                                               ? s->boundaries[i] : 0);
            put_f32(rec + 284 + 4 * i, s->values[i]);
        }
    }
}

static void sched_from_record(const unsigned char *p, struct hc_lr_schedule *s)
{
    s->kind = (enum hc_lr_kind)p[192];
    for (size_t i = 0; i < N_SSETS; i++) {
        const struct sset *f = &ssets[i];

        if (!lr_uses(s->kind, f->kinds))
            continue;
        sput(s, f, f->is_bool ? (double)((p[193] & f->rec) != 0)
                              : (double)get_f32(p + f->rec));
    }
    if (s->kind == HC_LR_COSINE && (p[193] & 4)) {
        s->warmup = 1;
        s->warmup_target = get_f32(p + 216);
    }
    if (s->kind == HC_LR_PIECEWISE) {
        s->n_values = p[194];
        for (uint32_t i = 0; i < s->n_values && i < HC_LR_MAX_VALUES; i++) {
            if (i + 1 < s->n_values)
                s->boundaries[i] = get_u32(p + 224 + 4 * i);
            s->values[i] = get_f32(p + 284 + 4 * i);
        }
    }
}

void hc_optim_to_record(const struct hc_optim_conf *c,
                        unsigned char rec[HC_OPTIM_RECORD_SIZE])
{
    memset(rec, 0, HC_OPTIM_RECORD_SIZE);
    memcpy(rec, RECORD_MAGIC, 4);
    put_u16(rec + 4, HC_OPTIM_RECORD_VERSION);
    rec[6] = (unsigned char)c->type;
    for (size_t i = 0; i < N_BSETS; i++)
        if (uses(c->type, bsets[i].types) && bget(c, &bsets[i]))
            rec[7] |= (unsigned char)bsets[i].bit;
    put_f32(rec + 8, c->lr);
    for (size_t i = 0; i < N_FSETS; i++)
        if (uses(c->type, fsets[i].types))
            put_f32(rec + fsets[i].rec, fget(c, &fsets[i]));
    memcpy(rec + 64, c->wd_exclude, HC_OPTIM_EXCLUDE_BYTES);
    sched_to_record(&c->sched, rec);
    put_u32(rec + CRC_AT, hc_crc32c(rec, CRC_AT));
}

/* A version 1 record's settings (sgd, momentum or adam). */
static void from_v1(const unsigned char *p, struct hc_optim_conf *c)
{
    c->type = (enum hc_optim)p[6];
    c->nesterov = p[7] & 1;
    c->lr = get_f32(p + 8);
    c->momentum = get_f32(p + 12);
    c->beta1 = get_f32(p + 16);
    c->beta2 = get_f32(p + 20);
    c->eps = get_f32(p + 24);
}

static void from_v2(const unsigned char *p, struct hc_optim_conf *c)
{
    c->type = (enum hc_optim)p[6];
    c->lr = get_f32(p + 8);
    for (size_t i = 0; i < N_FSETS; i++)
        if (uses(c->type, fsets[i].types))
            *fptr(c, &fsets[i]) = get_f32(p + fsets[i].rec);
    for (size_t i = 0; i < N_BSETS; i++)
        if (uses(c->type, bsets[i].types)) {
            int x = (p[7] & bsets[i].bit) != 0;

            memcpy((char *)c + bsets[i].off, &x, sizeof x);
        }
    memcpy(c->wd_exclude, p + 64, HC_OPTIM_EXCLUDE_BYTES);
    sched_from_record(p, &c->sched);
}

int hc_optim_from_record(const void *rec, size_t len, const char *source,
                         struct hc_optim_conf *out)
{
    const unsigned char *p = rec;
    const char *src = source ? source : "optimizer record";
    struct hc_optim_conf c;
    unsigned version;
    size_t want, crc_at;
    char why[512];

    if (len < 8 || memcmp(p, RECORD_MAGIC, 4) != 0)
        return hc_err_set(HC_ERR_STORE, "%s: not an optimizer settings record "
                          "(%zu bytes%s, expected %d starting \"%s\"); the "
                          "store is damaged", src, len,
                          len >= 1 && p[0] == '{' ? ", JSON text" : "",
                          HC_OPTIM_RECORD_SIZE, RECORD_MAGIC);
    version = (unsigned)p[4] | (unsigned)p[5] << 8;
    if (version != 1 && version != HC_OPTIM_RECORD_VERSION)
        return hc_err_set(HC_ERR_VERSION, "%s: optimizer settings record "
                          "version %u, but this hetps reads versions 1 and %d: "
                          "use the hetps version that wrote the store", src,
                          version, HC_OPTIM_RECORD_VERSION);
    want = version == 1 ? HC_OPTIM_RECORD_V1_SIZE : HC_OPTIM_RECORD_SIZE;
    crc_at = want - 4;
    if (len != want)
        return hc_err_set(HC_ERR_STORE, "%s: optimizer settings record "
                          "version %u of %zu bytes, expected %zu; the store is "
                          "damaged", src, version, len, want);
    if (get_u32(p + crc_at) != hc_crc32c(p, crc_at))
        return hc_err_set(HC_ERR_STORE, "%s: the optimizer settings record "
                          "fails its checksum; the store is damaged", src);
    memset(&c, 0, sizeof c);
    if (version == 1) {
        from_v1(p, &c);
        if (c.type > HC_OPT_ADAM)
            return hc_err_set(HC_ERR_STORE, "%s: optimizer settings record "
                              "version 1 names type %d (version 1 has sgd, "
                              "momentum, adam); the store is damaged", src,
                              (int)c.type);
    } else {
        from_v2(p, &c);
    }
    if (hc_optim_validate(&c, src) != HC_OK) {
        snprintf(why, sizeof why, "%s", hc_err_msg());
        return hc_err_set(HC_ERR_STORE, "%s; the store is damaged", why);
    }
    *out = c;
    return HC_OK;
}
