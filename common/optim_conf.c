/*
 * optim_conf.c — the optimizer's settings (see optim_conf.h): defaults,
 * the one validation, and the two encodings, the wire's OptimizerSettings
 * message and the store's fixed record. The model file's JSON form is read
 * by common/model.c, which ends in hc_optim_validate like everything else.
 */
#include "optim_conf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "crc32c.h"
#include "err.h"
#include "hetps.pb-c.h"

#define RECORD_MAGIC "HOPT"

void hc_optim_defaults(enum hc_optim type, struct hc_optim_conf *c)
{
    memset(c, 0, sizeof *c);
    c->type = type;
    if (type == HC_OPT_ADAM) {
        c->lr = 1e-3f;
        c->beta1 = 0.9f;
        c->beta2 = 0.999f;
        c->eps = 1e-7f;
    } else {
        c->lr = 0.01f;
    }
}

const char *hc_optim_name(enum hc_optim type)
{
    switch (type) {
    case HC_OPT_SGD: return "sgd";
    case HC_OPT_MOMENTUM: return "momentum";
    case HC_OPT_ADAM: return "adam";
    }
    return "?";
}

/* x in the interval lo..hi, each end open or closed; NaN never is. */
static int within(float x, float lo, int lo_open, float hi, int hi_open)
{
    return (lo_open ? x > lo : x >= lo) && (hi_open ? x < hi : x <= hi);
}

static int out_of_range(const char *src, const char *key, float x,
                        const char *range, const char *hint)
{
    return hc_err_set(HC_ERR_CONFIG, "%s: %s %g is out of range: it must be "
                      "in %s%s", src, key, (double)x, range, hint);
}

int hc_optim_validate(const struct hc_optim_conf *c, const char *source)
{
    const char *src = source ? source : "optimizer";

    if (c->type != HC_OPT_SGD && c->type != HC_OPT_MOMENTUM &&
        c->type != HC_OPT_ADAM)
        return hc_err_set(HC_ERR_CONFIG, "%s: optimizer type %d is unknown "
                          "(known: sgd, momentum, adam)", src, (int)c->type);
    if (!within(c->lr, 0.0f, 1, HC_OPTIM_LR_MAX, 0))
        return out_of_range(src, "learning_rate", c->lr, "(0, 10]", "");
    if (c->type == HC_OPT_MOMENTUM) {
        if (!within(c->momentum, 0.0f, 1, 1.0f, 1))
            return out_of_range(src, "momentum", c->momentum, "(0, 1)",
                                c->momentum == 0.0f
                                    ? " (use sgd for no momentum)" : "");
        if (c->nesterov != 0 && c->nesterov != 1)
            return hc_err_set(HC_ERR_CONFIG, "%s: nesterov is %d; it must be "
                              "true or false", src, c->nesterov);
    }
    if (c->type == HC_OPT_ADAM) {
        if (!within(c->beta1, 0.0f, 0, 1.0f, 1))
            return out_of_range(src, "beta_1", c->beta1, "[0, 1)", "");
        if (!within(c->beta2, 0.0f, 0, 1.0f, 1))
            return out_of_range(src, "beta_2", c->beta2, "[0, 1)", "");
        if (!within(c->eps, 0.0f, 1, 1.0f, 0))
            return out_of_range(src, "epsilon", c->eps, "(0, 1]", "");
    }
    return HC_OK;
}

int hc_optim_equal(const struct hc_optim_conf *a,
                   const struct hc_optim_conf *b)
{
    if (a->type != b->type || a->lr != b->lr)
        return 0;
    switch (a->type) {
    case HC_OPT_SGD:
        return 1;
    case HC_OPT_MOMENTUM:
        return a->momentum == b->momentum && !a->nesterov == !b->nesterov;
    case HC_OPT_ADAM:
        return a->beta1 == b->beta1 && a->beta2 == b->beta2 &&
               a->eps == b->eps;
    }
    return 0;
}

const char *hc_optim_describe(const struct hc_optim_conf *c, char *buf,
                              size_t cap)
{
    switch (c->type) {
    case HC_OPT_MOMENTUM:
        snprintf(buf, cap, "momentum (learning_rate %.9g, momentum %.9g, "
                 "nesterov %s)", (double)c->lr, (double)c->momentum,
                 c->nesterov ? "true" : "false");
        break;
    case HC_OPT_ADAM:
        snprintf(buf, cap, "adam (learning_rate %.9g, beta_1 %.9g, beta_2 "
                 "%.9g, epsilon %.9g)", (double)c->lr, (double)c->beta1,
                 (double)c->beta2, (double)c->eps);
        break;
    default:
        snprintf(buf, cap, "%s (learning_rate %.9g)", hc_optim_name(c->type),
                 (double)c->lr);
        break;
    }
    return buf;
}

/* ---- the wire ----------------------------------------------------------- */

void hc_optim_to_wire(const struct hc_optim_conf *c,
                      struct Hetps__OptimizerSettings *m)
{
    m->type = c->type == HC_OPT_ADAM       ? HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAM
              : c->type == HC_OPT_MOMENTUM ? HETPS__OPTIMIZER_TYPE__OPTIMIZER_MOMENTUM
                                           : HETPS__OPTIMIZER_TYPE__OPTIMIZER_SGD;
    m->learning_rate = c->lr;
    if (c->type == HC_OPT_MOMENTUM) {
        m->has_momentum = m->has_nesterov = 1;
        m->momentum = c->momentum;
        m->nesterov = c->nesterov != 0;
    } else if (c->type == HC_OPT_ADAM) {
        m->has_beta_1 = m->has_beta_2 = m->has_epsilon = 1;
        m->beta_1 = c->beta1;
        m->beta_2 = c->beta2;
        m->epsilon = c->eps;
    }
}

static int missing(const char *src, const char *type, const char *key)
{
    return hc_err_set(HC_ERR_CONFIG, "%s: the %s optimizer's settings lack "
                      "%s", src, type, key);
}

int hc_optim_from_wire(const struct Hetps__OptimizerSettings *m,
                       const char *source, struct hc_optim_conf *out)
{
    const char *src = source ? source : "optimizer";
    struct hc_optim_conf c;
    int rv;

    memset(&c, 0, sizeof c);
    c.lr = m->learning_rate;
    switch (m->type) {
    case HETPS__OPTIMIZER_TYPE__OPTIMIZER_SGD:
        c.type = HC_OPT_SGD;
        break;
    case HETPS__OPTIMIZER_TYPE__OPTIMIZER_MOMENTUM:
        c.type = HC_OPT_MOMENTUM;
        if (!m->has_momentum)
            return missing(src, "momentum", "momentum");
        c.momentum = m->momentum;
        c.nesterov = m->has_nesterov && m->nesterov;
        break;
    case HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAM:
        c.type = HC_OPT_ADAM;
        if (!m->has_beta_1 || !m->has_beta_2 || !m->has_epsilon)
            return missing(src, "adam", !m->has_beta_1   ? "beta_1"
                                        : !m->has_beta_2 ? "beta_2"
                                                         : "epsilon");
        c.beta1 = m->beta_1;
        c.beta2 = m->beta_2;
        c.eps = m->epsilon;
        break;
    default:
        return hc_err_set(HC_ERR_CONFIG, "%s: optimizer type %d is unknown "
                          "(known: sgd, momentum, adam)", src, (int)m->type);
    }
    if ((rv = hc_optim_validate(&c, src)) != HC_OK)
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

void hc_optim_to_record(const struct hc_optim_conf *c,
                        unsigned char rec[HC_OPTIM_RECORD_SIZE])
{
    memset(rec, 0, HC_OPTIM_RECORD_SIZE);
    memcpy(rec, RECORD_MAGIC, 4);
    put_u16(rec + 4, HC_OPTIM_RECORD_VERSION);
    rec[6] = (unsigned char)c->type;
    rec[7] = c->type == HC_OPT_MOMENTUM && c->nesterov ? 1 : 0;
    put_f32(rec + 8, c->lr);
    if (c->type == HC_OPT_MOMENTUM)
        put_f32(rec + 12, c->momentum);
    if (c->type == HC_OPT_ADAM) {
        put_f32(rec + 16, c->beta1);
        put_f32(rec + 20, c->beta2);
        put_f32(rec + 24, c->eps);
    }
    put_u32(rec + 28, hc_crc32c(rec, 28));
}

int hc_optim_from_record(const void *rec, size_t len, const char *source,
                         struct hc_optim_conf *out)
{
    const unsigned char *p = rec;
    const char *src = source ? source : "optimizer record";
    struct hc_optim_conf c;
    unsigned version;
    char why[512];

    if (len != HC_OPTIM_RECORD_SIZE || memcmp(p, RECORD_MAGIC, 4) != 0)
        return hc_err_set(HC_ERR_STORE, "%s: not an optimizer settings record "
                          "(%zu bytes%s, expected %d starting \"%s\"); the "
                          "store is damaged", src, len,
                          len >= 1 && p[0] == '{' ? ", JSON text" : "",
                          HC_OPTIM_RECORD_SIZE, RECORD_MAGIC);
    version = (unsigned)p[4] | (unsigned)p[5] << 8;
    if (version != HC_OPTIM_RECORD_VERSION)
        return hc_err_set(HC_ERR_VERSION, "%s: optimizer settings record "
                          "version %u, but this hetps reads version %d: use "
                          "the hetps version that wrote the store", src,
                          version, HC_OPTIM_RECORD_VERSION);
    if (get_u32(p + 28) != hc_crc32c(p, 28))
        return hc_err_set(HC_ERR_STORE, "%s: the optimizer settings record "
                          "fails its checksum; the store is damaged", src);
    memset(&c, 0, sizeof c);
    c.type = (enum hc_optim)p[6];
    c.nesterov = p[7] & 1;
    c.lr = get_f32(p + 8);
    c.momentum = get_f32(p + 12);
    c.beta1 = get_f32(p + 16);
    c.beta2 = get_f32(p + 20);
    c.eps = get_f32(p + 24);
    if (hc_optim_validate(&c, src) != HC_OK) {
        snprintf(why, sizeof why, "%s", hc_err_msg());
        return hc_err_set(HC_ERR_STORE, "%s; the store is damaged", why);
    }
    *out = c;
    return HC_OK;
}
