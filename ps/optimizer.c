/*
 * optimizer.c — SGD, momentum and Adam with Keras's semantics (see
 * optimizer.h for the formulas), and their JSON settings.
 *
 * The kernels walk the arrays four floats at a time (vec.h): no alignment
 * needed, and an output may be its own input. The tail runs the same formula one float at a time; the square
 * root is the only operation that needs a target intrinsic (SSE, NEON,
 * else per lane). Everything is IEEE float32 without contraction, so the
 * vector and scalar paths give the same bits.
 */
#include "optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "err.h"
#include "vec.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

static inline v4f sqrt4(v4f x)
{
#if defined(__SSE__)
    return (v4f)_mm_sqrt_ps((__m128)x);
#elif defined(__aarch64__)
    return (v4f)vsqrtq_f32((float32x4_t)x);
#else
    v4f r = {sqrtf(x[0]), sqrtf(x[1]), sqrtf(x[2]), sqrtf(x[3])};

    return r;
#endif
}

/* p ← p + (−(g·s)·lr) */
static void sgd(size_t n, float lr, const float *p_in, const float *g,
                float gs, float *p_out)
{
    size_t i = 0;
    v4f vlr = splat4(lr), vgs = splat4(gs);

    for (; i + 4 <= n; i += 4)
        st4(p_out + i, ld4(p_in + i) + -(ld4(g + i) * vgs * vlr));
    for (; i < n; i++)
        p_out[i] = p_in[i] + -(g[i] * gs * lr);
}

/* v ← (−(g·s)·lr) + v·μ;  p ← p + v  or  p ← p + ((−(g·s)·lr) + v·μ) */
static void momentum(size_t n, float lr, float mu, int nesterov,
                     const float *p_in, const float *g, float gs,
                     const float *v_in, float *p_out, float *v_out)
{
    size_t i = 0;
    v4f vlr = splat4(lr), vgs = splat4(gs), vmu = splat4(mu);

    for (; i + 4 <= n; i += 4) {
        v4f step = -(ld4(g + i) * vgs * vlr);
        v4f v = step + ld4(v_in + i) * vmu;
        v4f p = ld4(p_in + i);

        st4(v_out + i, v);
        st4(p_out + i, nesterov ? p + (step + v * vmu) : p + v);
    }
    for (; i < n; i++) {
        float step = -(g[i] * gs * lr);
        float v = step + v_in[i] * mu;
        float p = p_in[i];

        v_out[i] = v;
        p_out[i] = nesterov ? p + (step + v * mu) : p + v;
    }
}

/* m ← m + (g − m)(1 − β1);  v ← v + (g² − v)(1 − β2);
 * p ← p − (m·lr_t) / (sqrt(v) + ε) */
static void adam(size_t n, float lr_t, float c1, float c2, float eps,
                 const float *p_in, const float *g, float gs,
                 const float *m_in, const float *v_in, float *p_out,
                 float *m_out, float *v_out)
{
    size_t i = 0;
    v4f vlr = splat4(lr_t), vc1 = splat4(c1), vc2 = splat4(c2);
    v4f veps = splat4(eps), vgs = splat4(gs);

    for (; i + 4 <= n; i += 4) {
        v4f gi = ld4(g + i) * vgs;
        v4f m = ld4(m_in + i);
        v4f v = ld4(v_in + i);
        v4f p = ld4(p_in + i);

        m = m + (gi - m) * vc1;
        v = v + (gi * gi - v) * vc2;
        st4(m_out + i, m);
        st4(v_out + i, v);
        st4(p_out + i, p - (m * vlr) / (sqrt4(v) + veps));
    }
    for (; i < n; i++) {
        float gi = g[i] * gs;
        float m = m_in[i];
        float v = v_in[i];

        m = m + (gi - m) * c1;
        v = v + (gi * gi - v) * c2;
        m_out[i] = m;
        v_out[i] = v;
        p_out[i] = p_in[i] - (m * lr_t) / (sqrtf(v) + eps);
    }
}

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
 * 1 − β as Keras computes it: β is a Python float (a double holding the
 * decimal the user wrote), 1 − β is taken in double and rounded to
 * float32 when it meets the float32 tensor. The conf holds β as a float,
 * so the decimal is recovered as the shortest text that reads back as
 * that float: for β = 0.999 this gives 0.001f, where 1.0f − 0.999f would
 * be 0.000999987f (1.3e-5 off). Cached per thread: apply runs per block.
 */
static float one_minus_keras(float beta, int which)
{
    static _Thread_local struct { float beta, c; int valid; } cache[2];
    char buf[32];

    if (cache[which].valid && cache[which].beta == beta)
        return cache[which].c;
    fmt_float(buf, sizeof buf, beta);
    cache[which].c = (float)(1.0 - strtod(buf, NULL));
    cache[which].beta = beta;
    cache[which].valid = 1;
    return cache[which].c;
}

int ps_optim_slots(const struct hc_optim_conf *c)
{
    switch (c->type) {
    case HC_OPT_SGD: return 0;
    case HC_OPT_MOMENTUM: return 1;
    case HC_OPT_ADAM: return 2;
    }
    return 0;
}

const char *ps_optim_name(enum hc_optim type)
{
    switch (type) {
    case HC_OPT_SGD: return "sgd";
    case HC_OPT_MOMENTUM: return "momentum";
    case HC_OPT_ADAM: return "adam";
    }
    return "?";
}

void ps_optim_apply(const struct hc_optim_conf *c, uint64_t step, size_t n,
                    const float *p_in, const float *g, float gscale,
                    const float *s0_in, const float *s1_in,
                    float *p_out, float *s0_out, float *s1_out)
{
    switch (c->type) {
    case HC_OPT_SGD:
        sgd(n, c->lr, p_in, g, gscale, p_out);
        break;
    case HC_OPT_MOMENTUM:
        momentum(n, c->lr, c->momentum, c->nesterov, p_in, g, gscale,
                 s0_in, p_out, s0_out);
        break;
    case HC_OPT_ADAM: {
        double t = (double)step + 1.0;
        double b1t = pow((double)c->beta1, t);
        double b2t = pow((double)c->beta2, t);
        float lr_t = (float)((double)c->lr * sqrt(1.0 - b2t) / (1.0 - b1t));

        adam(n, lr_t, one_minus_keras(c->beta1, 0),
             one_minus_keras(c->beta2, 1), c->eps, p_in, g,
             gscale, s0_in, s1_in, p_out, s0_out, s1_out);
        break;
    }
    }
}

int ps_optim_validate(const struct hc_optim_conf *c, const char *source)
{
    const char *src = source ? source : "optimizer";

    if (c->type != HC_OPT_SGD && c->type != HC_OPT_MOMENTUM &&
        c->type != HC_OPT_ADAM)
        return hc_err_set(HC_ERR_CONFIG, "%s: optimizer type %d is unknown "
                          "(known: sgd, momentum, adam)", src, (int)c->type);
    if (!isfinite(c->lr) || c->lr < 0.0f)
        return hc_err_set(HC_ERR_CONFIG, "%s: learning_rate %g must be a "
                          "finite number >= 0", src, (double)c->lr);
    if (c->type == HC_OPT_MOMENTUM &&
        !(c->momentum > 0.0f && c->momentum <= 1.0f))
        return hc_err_set(HC_ERR_CONFIG, "%s: momentum %g must be in (0, 1] "
                          "(use sgd for no momentum)", src,
                          (double)c->momentum);
    if (c->type == HC_OPT_ADAM) {
        if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
            return hc_err_set(HC_ERR_CONFIG, "%s: beta_1 %g must be in "
                              "[0, 1)", src, (double)c->beta1);
        if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
            return hc_err_set(HC_ERR_CONFIG, "%s: beta_2 %g must be in "
                              "[0, 1)", src, (double)c->beta2);
        if (!isfinite(c->eps) || !(c->eps > 0.0f))
            return hc_err_set(HC_ERR_CONFIG, "%s: epsilon %g must be a "
                              "finite number > 0", src, (double)c->eps);
    }
    return HC_OK;
}

int ps_optim_equal(const struct hc_optim_conf *a, const struct hc_optim_conf *b)
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

int ps_optim_to_json(const struct hc_optim_conf *c, char *buf, size_t cap)
{
    char lr[32], a[32], b[32], e[32];
    int rv, n = 0;

    if ((rv = ps_optim_validate(c, "optimizer settings")) != HC_OK)
        return rv;
    fmt_float(lr, sizeof lr, c->lr);
    switch (c->type) {
    case HC_OPT_SGD:
        n = snprintf(buf, cap, "{\"type\":\"sgd\",\"learning_rate\":%s}", lr);
        break;
    case HC_OPT_MOMENTUM:
        fmt_float(a, sizeof a, c->momentum);
        n = snprintf(buf, cap, "{\"type\":\"sgd\",\"learning_rate\":%s,"
                     "\"momentum\":%s,\"nesterov\":%s}", lr, a,
                     c->nesterov ? "true" : "false");
        break;
    case HC_OPT_ADAM:
        fmt_float(a, sizeof a, c->beta1);
        fmt_float(b, sizeof b, c->beta2);
        fmt_float(e, sizeof e, c->eps);
        n = snprintf(buf, cap, "{\"type\":\"adam\",\"learning_rate\":%s,"
                     "\"beta_1\":%s,\"beta_2\":%s,\"epsilon\":%s}", lr, a, b, e);
        break;
    }
    if (n < 0 || (size_t)n >= cap)
        return hc_err_set(HC_ERR_LIMIT, "optimizer settings: the JSON text "
                          "needs %d bytes but the buffer holds %zu", n + 1, cap);
    return HC_OK;
}

/* Read number `key` of object `o` into *dst when present. */
static int json_float(const cJSON *o, const char *key, const char *src,
                      float *dst)
{
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);

    if (!it)
        return HC_OK;
    if (!cJSON_IsNumber(it))
        return hc_err_set(HC_ERR_CONFIG, "%s: optimizer key \"%s\" must be "
                          "a number", src, key);
    *dst = (float)it->valuedouble;
    if (isfinite(it->valuedouble) && !isfinite(*dst))
        return hc_err_set(HC_ERR_CONFIG, "%s: optimizer key \"%s\" = %g is "
                          "out of float range", src, key, it->valuedouble);
    return HC_OK;
}

int ps_optim_from_json(const char *json, size_t len, const char *source,
                       struct hc_optim_conf *out)
{
    static const char *const known[] = {
        "type", "name", "learning_rate", "momentum", "nesterov",
        "beta_1", "beta_2", "epsilon",
    };
    const char *src = source ? source : "optimizer";
    struct hc_optim_conf c = {.type = HC_OPT_SGD, .lr = 0.01f,
                              .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-7f};
    cJSON *root = NULL;
    const cJSON *it;
    const char *type, *at = NULL;
    int rv = HC_OK;

    if (!json || len == 0)
        return hc_err_set(HC_ERR_CONFIG, "%s: the optimizer settings are "
                          "empty; expected a JSON object such as "
                          "{\"type\":\"adam\"}", src);
    root = cJSON_ParseWithLengthOpts(json, len, &at, 0);
    if (!root) {
        size_t off = at && at >= json && at <= json + len ? (size_t)(at - json)
                                                          : len;
        rv = hc_err_set(HC_ERR_CONFIG, "%s: optimizer settings are not valid "
                        "JSON (error near byte %zu)", src, off);
        goto out;
    }
    for (; at && at < json + len; at++) {
        if (*at == '\0' && at + 1 == json + len)
            break;
        if (*at != ' ' && *at != '\t' && *at != '\n' && *at != '\r') {
            rv = hc_err_set(HC_ERR_CONFIG, "%s: unexpected text after the "
                            "optimizer settings (byte %zu)", src,
                            (size_t)(at - json));
            goto out;
        }
    }
    if (!cJSON_IsObject(root)) {
        rv = hc_err_set(HC_ERR_CONFIG, "%s: optimizer settings must be a JSON "
                        "object such as {\"type\":\"adam\"}", src);
        goto out;
    }
    cJSON_ArrayForEach(it, root) {
        size_t k;

        for (k = 0; k < sizeof known / sizeof known[0]; k++)
            if (it->string && strcmp(it->string, known[k]) == 0)
                break;
        if (k == sizeof known / sizeof known[0]) {
            rv = hc_err_set(HC_ERR_CONFIG, "%s: unknown optimizer key \"%s\" "
                            "(known: type, learning_rate, momentum, nesterov, "
                            "beta_1, beta_2, epsilon)", src,
                            it->string ? it->string : "");
            goto out;
        }
    }
    it = cJSON_GetObjectItemCaseSensitive(root, "type");
    if (!it) {
        rv = hc_err_set(HC_ERR_CONFIG, "%s: optimizer key \"type\" is missing "
                        "(\"sgd\", \"momentum\" or \"adam\")", src);
        goto out;
    }
    type = cJSON_GetStringValue(it);
    if (!type || (strcmp(type, "sgd") != 0 && strcmp(type, "momentum") != 0 &&
                  strcmp(type, "adam") != 0)) {
        rv = hc_err_set(HC_ERR_CONFIG, "%s: optimizer type %s%s%s is not "
                        "supported (use \"sgd\", \"momentum\" or \"adam\")",
                        src, type ? "\"" : "", type ? type : "(not a string)",
                        type ? "\"" : "");
        goto out;
    }
    if (strcmp(type, "adam") == 0) {
        c.type = HC_OPT_ADAM;
        c.lr = 0.001f;
    }
    if ((rv = json_float(root, "learning_rate", src, &c.lr)) != HC_OK ||
        (rv = json_float(root, "momentum", src, &c.momentum)) != HC_OK ||
        (rv = json_float(root, "beta_1", src, &c.beta1)) != HC_OK ||
        (rv = json_float(root, "beta_2", src, &c.beta2)) != HC_OK ||
        (rv = json_float(root, "epsilon", src, &c.eps)) != HC_OK)
        goto out;
    it = cJSON_GetObjectItemCaseSensitive(root, "nesterov");
    if (it) {
        if (!cJSON_IsBool(it)) {
            rv = hc_err_set(HC_ERR_CONFIG, "%s: optimizer key \"nesterov\" "
                            "must be true or false", src);
            goto out;
        }
        c.nesterov = cJSON_IsTrue(it);
    }
    it = cJSON_GetObjectItemCaseSensitive(root, "name");
    if (it && !cJSON_IsString(it)) {
        rv = hc_err_set(HC_ERR_CONFIG, "%s: optimizer key \"name\" must be "
                        "a string", src);
        goto out;
    }
    if (c.type != HC_OPT_ADAM) {
        if (!(c.momentum >= 0.0f && c.momentum <= 1.0f)) {
            rv = hc_err_set(HC_ERR_CONFIG, "%s: momentum %g must be in [0, 1]",
                            src, (double)c.momentum);
            goto out;
        }
        if (strcmp(type, "momentum") == 0 && c.momentum == 0.0f) {
            rv = hc_err_set(HC_ERR_CONFIG, "%s: optimizer \"momentum\" needs "
                            "\"momentum\" > 0 (use \"sgd\" for none)", src);
            goto out;
        }
        c.type = c.momentum > 0.0f ? HC_OPT_MOMENTUM : HC_OPT_SGD;
    }
    if ((rv = ps_optim_validate(&c, src)) != HC_OK)
        goto out;
    *out = c;
out:
    cJSON_Delete(root);
    return rv;
}
