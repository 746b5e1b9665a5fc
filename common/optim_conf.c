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
                return hc_err_set(HC_ERR_CONFIG, "%s: exclude_from_weight_decay "
                                  "word \"%.40s\" has a character other than a "
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
    static const struct fset lr = {"learning_rate", 0, 0, 0, 0, 0,
                                   HC_OPTIM_LR_MAX, 1, 0, 0, 0};
    const char *src = source ? source : "optimizer";

    if (!known(c->type))
        return hc_err_set(HC_ERR_CONFIG, "%s: optimizer type %d is unknown "
                          "(known: %s)", src, (int)c->type, hc_optim_names());
    if (!within(c->lr, 0.0f, 1, HC_OPTIM_LR_MAX, 0))
        return out_of_range(src, "learning_rate", c->lr, &lr, "");
    for (size_t i = 0; i < N_FSETS; i++) {
        const struct fset *f = &fsets[i];
        float x = fget(c, f);

        if (uses(c->type, f->types) &&
            !within(x, f->lo, f->lo_open, f->hi, f->hi_open))
            return out_of_range(src, f->key, x, f,
                                c->type == HC_OPT_MOMENTUM && x == 0.0f
                                    ? " (use sgd for no momentum)" : "");
    }
    for (size_t i = 0; i < N_BSETS; i++) {
        int x = bget(c, &bsets[i]);

        if (uses(c->type, bsets[i].types) && x != 0 && x != 1)
            return hc_err_set(HC_ERR_CONFIG, "%s: %s is %d; it must be true "
                              "or false", src, bsets[i].key, x);
    }
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
    return memcmp(a->wd_exclude, b->wd_exclude, sizeof a->wd_exclude) == 0;
}

const char *hc_optim_describe(const struct hc_optim_conf *c, char *buf,
                              size_t cap)
{
    size_t n;

    if (cap == 0)
        return buf;
    snprintf(buf, cap, "%s (learning_rate %.9g", hc_optim_name(c->type),
             (double)c->lr);
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

/* ---- the wire ----------------------------------------------------------- */

void hc_optim_to_wire(const struct hc_optim_conf *c, Msg *m, char **words)
{
    size_t n = 0;

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
    for (const char *w = c->wd_exclude; *w && n < HC_OPTIM_EXCLUDE_MAX &&
         w < c->wd_exclude + sizeof c->wd_exclude; w += strlen(w) + 1)
        words[n++] = (char *)w;
    m->n_exclude_from_weight_decay = n;
    m->exclude_from_weight_decay = n ? words : NULL;
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
    if ((rv = exclude_from_wire(m, src, &c)) != HC_OK ||
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
