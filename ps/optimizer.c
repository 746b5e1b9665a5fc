/*
 * optimizer.c — Keras's optimizers (see optimizer.h for the formulas):
 * one kernel per update rule, each a loop over the elements written in
 * Keras's order of operations.
 *
 * Every rule walks the arrays four floats at a time (vec.h): no alignment
 * needed, and an output may be its own input. The tail runs the same
 * formula one float at a time; the square root is the only operation that
 * needs a target intrinsic (SSE, NEON, else per lane); a maximum, a clip
 * and |x| are lane masks (max4, sel4, abs4), with the scalar ternary's
 * answer for NaN. Ftrl at a learning_rate_power other than −0.5 calls powf
 * per element. Everything is IEEE float32 without contraction, so the
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

/* m ? a : b per lane (m from a vector comparison: all ones or zeros). */
static inline v4f sel4(v4u m, v4f a, v4f b)
{
    return (v4f)(((v4u)a & m) | ((v4u)b & ~m));
}

/* a > b ? a : b per lane, as the scalar code writes it (a NaN a gives b). */
static inline v4f max4(v4f a, v4f b)
{
    return sel4((v4u)(a > b), a, b);
}

/* |x| per lane (the sign bit cleared, as fabsf). */
static inline v4f abs4(v4f x)
{
    const v4u m = {0x7fffffffu, 0x7fffffffu, 0x7fffffffu, 0x7fffffffu};

    return (v4f)((v4u)x & m);
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

static float one_minus_keras(float beta)
{
    return hc_optim_keras_const(beta, -1.0, 1.0);
}

/* v̂ ← max(v̂, v) after Adam's m, v; p ← p − (m·lr_t) / (sqrt(v̂) + ε) */
static void adam_amsgrad(size_t n, float lr_t, float c1, float c2, float eps,
                         const float *p_in, const float *g, float gs,
                         const float *const *s_in, float *p_out,
                         float *const *s_out)
{
    v4f vlr = splat4(lr_t), vc1 = splat4(c1), vc2 = splat4(c2);
    v4f veps = splat4(eps), vgs = splat4(gs);
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        v4f gi = ld4(g + i) * vgs;
        v4f m = ld4(s_in[0] + i), v = ld4(s_in[1] + i);
        v4f vh = ld4(s_in[2] + i);

        m = m + (gi - m) * vc1;
        v = v + (gi * gi - v) * vc2;
        vh = max4(vh, v);
        st4(s_out[0] + i, m);
        st4(s_out[1] + i, v);
        st4(s_out[2] + i, vh);
        st4(p_out + i, ld4(p_in + i) - (m * vlr) / (sqrt4(vh) + veps));
    }
    for (; i < n; i++) {
        float gi = g[i] * gs;
        float m = s_in[0][i], v = s_in[1][i], vh = s_in[2][i];

        m = m + (gi - m) * c1;
        v = v + (gi * gi - v) * c2;
        vh = vh > v ? vh : v;
        s_out[0][i] = m;
        s_out[1][i] = v;
        s_out[2][i] = vh;
        p_out[i] = p_in[i] - (m * lr_t) / (sqrtf(vh) + eps);
    }
}

/* The RMSprop slots: velocity, then momentum (μ > 0), then
 * average_gradient (centered). */
static int rms_mom(const struct hc_optim_conf *c)
{
    return c->momentum > 0.0f ? 1 : 0;
}

static int rms_avg(const struct hc_optim_conf *c)
{
    return c->centered ? 1 + rms_mom(c) : 0;
}

static void rmsprop(const struct hc_optim_conf *c, float lr, size_t n,
                    const float *p_in, const float *g, float gs,
                    const float *const *s_in, float *p_out,
                    float *const *s_out)
{
    float rho = c->rho, c1 = one_minus_keras(c->rho), mu = c->momentum;
    float eps = c->eps;
    int km = rms_mom(c), ka = rms_avg(c);
    size_t i = 0;

    v4f vrho = splat4(rho), vc1 = splat4(c1), veps = splat4(eps);
    v4f vlr = splat4(lr), vgs = splat4(gs), vmu = splat4(mu);

    if (!km && !ka) {           /* the usual form */
        for (; i + 4 <= n; i += 4) {
            v4f gi = ld4(g + i) * vgs;
            v4f s = vrho * ld4(s_in[0] + i) + vc1 * (gi * gi);

            st4(s_out[0] + i, s);
            st4(p_out + i, ld4(p_in + i) - (vlr * gi) / sqrt4(s + veps));
        }
    }
    for (; i + 4 <= n; i += 4) {     /* momentum, centered or both */
        v4f gi = ld4(g + i) * vgs;
        v4f s = vrho * ld4(s_in[0] + i) + vc1 * (gi * gi);
        v4f d, inc;

        st4(s_out[0] + i, s);
        if (ka) {
            v4f a = vrho * ld4(s_in[ka] + i) + vc1 * gi;

            st4(s_out[ka] + i, a);
            d = (s - a * a) + veps;
        } else {
            d = s + veps;
        }
        inc = (vlr * gi) / sqrt4(d);
        if (km) {
            v4f m = vmu * ld4(s_in[km] + i) + inc;

            st4(s_out[km] + i, m);
            st4(p_out + i, ld4(p_in + i) - m);
        } else {
            st4(p_out + i, ld4(p_in + i) - inc);
        }
    }
    for (; i < n; i++) {
        float gi = g[i] * gs;
        float s = rho * s_in[0][i] + c1 * (gi * gi);
        float d, inc;

        s_out[0][i] = s;
        if (ka) {
            float a = rho * s_in[ka][i] + c1 * gi;

            s_out[ka][i] = a;
            d = (s - a * a) + eps;
        } else {
            d = s + eps;
        }
        inc = (lr * gi) / sqrtf(d);
        if (km) {
            float m = mu * s_in[km][i] + inc;

            s_out[km][i] = m;
            p_out[i] = p_in[i] - m;
        } else {
            p_out[i] = p_in[i] - inc;
        }
    }
}

static void adagrad(float lr, float eps, size_t n, const float *p_in,
                    const float *g, float gs, const float *a_in,
                    float *p_out, float *a_out)
{
    v4f vlr = splat4(lr), veps = splat4(eps), vgs = splat4(gs);
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        v4f gi = ld4(g + i) * vgs;
        v4f a = ld4(a_in + i) + gi * gi;

        st4(a_out + i, a);
        st4(p_out + i, ld4(p_in + i) - (vlr * gi) / sqrt4(a + veps));
    }
    for (; i < n; i++) {
        float gi = g[i] * gs;
        float a = a_in[i] + gi * gi;

        a_out[i] = a;
        p_out[i] = p_in[i] - (lr * gi) / sqrtf(a + eps);
    }
}

/* Keras's _u_product after t updates: Π_{i=1..t} β1·(1 − 0.5·0.96^i) in
 * float32, one factor per step as Keras multiplies it in. Cached per
 * thread and extended forward; 0 stays 0. */
static float nadam_u_product(float beta1, uint64_t t)
{
    static _Thread_local struct { float beta1, u; uint64_t t; int valid; } c;
    uint64_t i = 1;
    float u = 1.0f;

    if (c.valid && c.beta1 == beta1 && c.t <= t) {
        i = c.t + 1;
        u = c.u;
    }
    for (; i <= t && u != 0.0f; i++)
        u = u * beta1 * (1.0f - 0.5f * powf(0.96f, (float)i));
    c.beta1 = beta1;
    c.u = u;
    c.t = t;
    c.valid = 1;
    return u;
}

float ps_optim_nadam_u_product(const struct hc_optim_conf *c, uint64_t step)
{
    return nadam_u_product(c->beta1, step);
}

static void nadam(const struct hc_optim_conf *c, float lr, uint64_t step,
                  size_t n, const float *p_in, const float *g, float gs,
                  const float *const *s_in, float *p_out, float *const *s_out)
{
    float t = (float)(step + 1), t1 = (float)(step + 2);
    float b1 = c->beta1, b2 = c->beta2, eps = c->eps;
    float u_t = b1 * (1.0f - 0.5f * powf(0.96f, t));
    float u_t1 = b1 * (1.0f - 0.5f * powf(0.96f, t1));
    float up_t = nadam_u_product(b1, step + 1);
    float up_t1 = up_t * u_t1;
    float b2p = powf(b2, t);
    float c1 = 1.0f - b1, c2 = 1.0f - b2;
    float d1 = 1.0f - up_t1, d0 = 1.0f - up_t, one_u = 1.0f - u_t;
    float dv = 1.0f - b2p;
    v4f vgs = splat4(gs), vc1 = splat4(c1), vc2 = splat4(c2);
    v4f vu1 = splat4(u_t1), vd1 = splat4(d1), vone = splat4(one_u);
    v4f vd0 = splat4(d0), vdv = splat4(dv), vlr = splat4(lr);
    v4f veps = splat4(eps);
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        v4f gi = ld4(g + i) * vgs;
        v4f m = ld4(s_in[0] + i), v = ld4(s_in[1] + i), mh, vh;

        m = m + (gi - m) * vc1;
        v = v + (gi * gi - v) * vc2;
        st4(s_out[0] + i, m);
        st4(s_out[1] + i, v);
        mh = (vu1 * m) / vd1 + (vone * gi) / vd0;
        vh = v / vdv;
        st4(p_out + i, ld4(p_in + i) - (mh * vlr) / (sqrt4(vh) + veps));
    }
    for (; i < n; i++) {
        float gi = g[i] * gs;
        float m = s_in[0][i], v = s_in[1][i], mh, vh;

        m = m + (gi - m) * c1;
        v = v + (gi * gi - v) * c2;
        s_out[0][i] = m;
        s_out[1][i] = v;
        mh = (u_t1 * m) / d1 + (one_u * gi) / d0;
        vh = v / dv;
        p_out[i] = p_in[i] - (mh * lr) / (sqrtf(vh) + eps);
    }
}

static void adamax(const struct hc_optim_conf *c, float lr, uint64_t step,
                   size_t n, const float *p_in, const float *g, float gs,
                   const float *const *s_in, float *p_out, float *const *s_out)
{
    float c1 = one_minus_keras(c->beta1), b2 = c->beta2, eps = c->eps;
    float d = 1.0f - powf(c->beta1, (float)(step + 1));
    v4f vc1 = splat4(c1), vb2 = splat4(b2), veps = splat4(eps);
    v4f vlr = splat4(lr), vd = splat4(d), vgs = splat4(gs);
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        v4f gi = ld4(g + i) * vgs;
        v4f m = ld4(s_in[0] + i), u = vb2 * ld4(s_in[1] + i);

        m = m + (gi - m) * vc1;
        u = max4(u, abs4(gi));
        st4(s_out[0] + i, m);
        st4(s_out[1] + i, u);
        st4(p_out + i, ld4(p_in + i) - (vlr * m) / (vd * (u + veps)));
    }
    for (; i < n; i++) {
        float gi = g[i] * gs;
        float m = s_in[0][i], u = b2 * s_in[1][i], ag = fabsf(gi);

        m = m + (gi - m) * c1;
        u = u > ag ? u : ag;
        s_out[0][i] = m;
        s_out[1][i] = u;
        p_out[i] = p_in[i] - (lr * m) / (d * (u + eps));
    }
}

/* x^e as Keras's ops.power; a square root when e is ½, its usual value. */
static inline float pow_e(float x, float e)
{
    return e == 0.5f ? sqrtf(x) : powf(x, e);
}

static void ftrl(const struct hc_optim_conf *c, float lr, size_t n,
                 const float *p_in, const float *g, float gs,
                 const float *const *s_in, float *p_out, float *const *s_out)
{
    float e = -c->lr_power;
    float l2r = c->l2 + c->beta / (2.0f * lr);
    float shrink2 = hc_optim_keras_const(c->l2_shrinkage, 2.0, 0.0);
    float l1 = c->l1, q2 = 2.0f * l2r;
    size_t i = 0;

    if (e == 0.5f) {            /* the usual power: square roots */
        v4f vgs = splat4(gs), vs2 = splat4(shrink2), vlr = splat4(lr);
        v4f vq2 = splat4(q2), vl1 = splat4(l1), vnl1 = splat4(-l1);

        for (; i + 4 <= n; i += 4) {
            v4f gi = ld4(g + i) * vgs, p = ld4(p_in + i);
            v4f a = ld4(s_in[0] + i), lin = ld4(s_in[1] + i);
            v4f gu = gi + vs2 * p;
            v4f na = a + gi * gi;
            v4f pa = sqrt4(na);
            v4f q, lc;

            lin = lin + (gu - ((pa - sqrt4(a)) / vlr) * p);
            q = pa / vlr + vq2;
            lc = sel4((v4u)(lin < vnl1), vnl1,
                      sel4((v4u)(lin > vl1), vl1, lin));
            st4(s_out[0] + i, na);
            st4(s_out[1] + i, lin);
            st4(p_out + i, (lc - lin) / q);
        }
    }
    for (; i < n; i++) {
        float gi = g[i] * gs, p = p_in[i];
        float a = s_in[0][i], lin = s_in[1][i];
        float gu = gi + shrink2 * p;
        float na = a + gi * gi;
        float pa = pow_e(na, e);
        float q, lc;

        lin = lin + (gu - ((pa - pow_e(a, e)) / lr) * p);
        q = pa / lr + q2;
        lc = lin < -l1 ? -l1 : lin > l1 ? l1 : lin;
        s_out[0][i] = na;
        s_out[1][i] = lin;
        p_out[i] = (lc - lin) / q;
    }
}

/* p ← p − p·wd·lr */
static void decay(size_t n, float wd, float lr, const float *p_in,
                  float *p_out)
{
    v4f vwd = splat4(wd), vlr = splat4(lr);
    size_t i = 0;

    for (; i + 4 <= n; i += 4) {
        v4f p = ld4(p_in + i);

        st4(p_out + i, p - p * vwd * vlr);
    }
    for (; i < n; i++)
        p_out[i] = p_in[i] - p_in[i] * wd * lr;
}

int ps_optim_slots(const struct hc_optim_conf *c)
{
    switch (c->type) {
    case HC_OPT_SGD: return 0;
    case HC_OPT_MOMENTUM: return 1;
    case HC_OPT_ADAM:
    case HC_OPT_ADAMW: return c->amsgrad ? 3 : 2;
    case HC_OPT_RMSPROP: return 1 + rms_mom(c) + (c->centered ? 1 : 0);
    case HC_OPT_ADAGRAD: return 1;
    case HC_OPT_NADAM:
    case HC_OPT_ADAMAX:
    case HC_OPT_FTRL: return 2;
    }
    return 0;
}

const char *ps_optim_slot_name(const struct hc_optim_conf *c, int k)
{
    static const char *const adam[] = {"momentum", "velocity", "velocity_hat"};
    static const char *const adamax[] = {"momentum", "norm"};
    static const char *const ftrl[] = {"accumulator", "linear"};

    if (k < 0 || k >= ps_optim_slots(c))
        return "?";
    switch (c->type) {
    case HC_OPT_MOMENTUM: return "momentum";
    case HC_OPT_ADAM:
    case HC_OPT_ADAMW:
    case HC_OPT_NADAM: return adam[k];
    case HC_OPT_ADAMAX: return adamax[k];
    case HC_OPT_FTRL: return ftrl[k];
    case HC_OPT_ADAGRAD: return "accumulator";
    case HC_OPT_RMSPROP:
        return k == 0 ? "velocity" : k == rms_avg(c) ? "average_gradient"
                                                     : "momentum";
    case HC_OPT_SGD: break;
    }
    return "?";
}

float ps_optim_slot_init(const struct hc_optim_conf *c, int k)
{
    if (k == 0 && (c->type == HC_OPT_ADAGRAD || c->type == HC_OPT_FTRL))
        return c->init_accum;
    return 0.0f;
}

static void apply_one(const struct hc_optim_conf *c,
                      const struct ps_optim_step *at, size_t n,
                      const float *p_in, const float *g, float gs,
                      const float *const *s_in, float *p_out,
                      float *const *s_out);

/* clipvalue: the update in pieces of CLIP_CHUNK elements, each piece's
 * gradient g·gscale clipped into a buffer on the stack and applied with
 * scale 1 (every rule is elementwise, so pieces give the same bits). */
#define CLIP_CHUNK 256

void ps_optim_apply(const struct hc_optim_conf *c,
                    const struct ps_optim_step *at, size_t n,
                    const float *p_in, const float *g,
                    const float *const *s_in, float *p_out,
                    float *const *s_out)
{
    float cv = c->clipvalue, buf[CLIP_CHUNK];
    const float *si[PS_OPTIM_MAX_SLOTS];
    float *so[PS_OPTIM_MAX_SLOTS];
    int ns = ps_optim_slots(c);

    if (!(cv > 0.0f)) {
        apply_one(c, at, n, p_in, g, at->gscale, s_in, p_out, s_out);
        return;
    }
    for (size_t at0 = 0; at0 < n; at0 += CLIP_CHUNK) {
        size_t m = n - at0 < CLIP_CHUNK ? n - at0 : CLIP_CHUNK;

        for (size_t i = 0; i < m; i++) {
            float x = g[at0 + i] * at->gscale;

            buf[i] = x < -cv ? -cv : x > cv ? cv : x;
        }
        for (int k = 0; k < ns; k++) {
            si[k] = s_in[k] + at0;
            so[k] = s_out[k] + at0;
        }
        apply_one(c, at, m, p_in + at0, buf, 1.0f, si, p_out + at0, so);
    }
}

static void apply_one(const struct hc_optim_conf *c,
                      const struct ps_optim_step *at, size_t n,
                      const float *p_in, const float *g, float gs,
                      const float *const *s_in, float *p_out,
                      float *const *s_out)
{
    float lr = hc_optim_lr(c, at->step);   /* a schedule's, at this step */

    if (at->decay && c->weight_decay > 0.0f) {
        decay(n, c->weight_decay, lr, p_in, p_out);
        p_in = p_out;
    }
    switch (c->type) {
    case HC_OPT_SGD:
        sgd(n, lr, p_in, g, gs, p_out);
        break;
    case HC_OPT_MOMENTUM:
        momentum(n, lr, c->momentum, c->nesterov, p_in, g, gs, s_in[0], p_out,
                 s_out[0]);
        break;
    case HC_OPT_ADAM:
    case HC_OPT_ADAMW: {
        double t = (double)at->step + 1.0;
        double b1t = pow((double)c->beta1, t);
        double b2t = pow((double)c->beta2, t);
        float lr_t = (float)((double)lr * sqrt(1.0 - b2t) / (1.0 - b1t));
        float c1 = one_minus_keras(c->beta1), c2 = one_minus_keras(c->beta2);

        if (c->amsgrad)
            adam_amsgrad(n, lr_t, c1, c2, c->eps, p_in, g, gs, s_in, p_out,
                         s_out);
        else
            adam(n, lr_t, c1, c2, c->eps, p_in, g, gs, s_in[0], s_in[1],
                 p_out, s_out[0], s_out[1]);
        break;
    }
    case HC_OPT_RMSPROP:
        rmsprop(c, lr, n, p_in, g, gs, s_in, p_out, s_out);
        break;
    case HC_OPT_ADAGRAD:
        adagrad(lr, c->eps, n, p_in, g, gs, s_in[0], p_out, s_out[0]);
        break;
    case HC_OPT_NADAM:
        nadam(c, lr, at->step, n, p_in, g, gs, s_in, p_out, s_out);
        break;
    case HC_OPT_ADAMAX:
        adamax(c, lr, at->step, n, p_in, g, gs, s_in, p_out, s_out);
        break;
    case HC_OPT_FTRL:
        ftrl(c, lr, n, p_in, g, gs, s_in, p_out, s_out);
        break;
    }
}
