/*
 * optimizer.c — SGD, momentum and Adam with Keras's semantics (see
 * optimizer.h for the formulas).
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
