/*
 * test_nn.c — the CPU backend's ops and the network's forward/backward.
 *
 * Three layers of checking:
 *   1. every backend op against a plain double-precision loop written here;
 *   2. a naive double-precision reference network (ref_run below: conv2d,
 *      maxpool2d, flatten, dense, dropout, activation, sparse CCE, MSE),
 *      itself checked against central finite differences in double;
 *   3. the float network (worker/nn.c) against that reference (tight) and
 *      against central finite differences of its own float forward (loose).
 * Models are built by hand (mb_* below) so this file needs no JSON parser.
 * Each check prints the largest difference it saw.
 */
#include "cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/backend.h"
#include "err.h"
#include "worker/nn.h"

/* ---- helpers: random numbers, comparison ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
static double urand(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static void fill_rand(float *x, size_t n, uint64_t *s, double lo, double hi)
{
    size_t i;

    for (i = 0; i < n; i++)
        x[i] = (float)urand(s, lo, hi);
}

/* Compare got against want: every |got − want| ≤ atol + rtol·|want|.
 * Prints the largest difference; returns 1 when all are within. */
static int cmp_report(const char *what, const float *gotf, const double *gotd,
                      const double *want, size_t n, double atol, double rtol)
{
    double worst = 0.0, worst_ratio = 0.0;
    size_t i, at = 0, bad_at = 0;
    int ok = 1;

    for (i = 0; i < n; i++) {
        double g = gotf ? (double)gotf[i] : gotd[i];
        double d = fabs(g - want[i]);
        double ratio = d / (atol + rtol * fabs(want[i]));

        if (!(d <= atol + rtol * fabs(want[i]))) {
            if (ok || ratio > worst_ratio)
                bad_at = i;
            ok = 0;
        }
        if (d > worst || isnan(d)) {
            worst = d;
            at = i;
        }
        if (ratio > worst_ratio)
            worst_ratio = ratio;
    }
    if (n == 0)
        return 1;
    printf("\n    %-44s max |diff| %.3g (at %zu: %.6g vs %.6g)%s", what, worst,
           at, gotf ? (double)gotf[at] : gotd[at], want[at],
           ok ? "" : "  FAIL");
    if (!ok)
        printf("\n      worst relative to tolerance at %zu: %.9g vs %.9g",
               bad_at, gotf ? (double)gotf[bad_at] : gotd[bad_at],
               want[bad_at]);
    return ok;
}

static double *dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);

    CU_ASSERT_FATAL(p != NULL);
    return p;
}

static float *falloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);

    CU_ASSERT_FATAL(p != NULL);
    return p;
}

static struct wk_backend *cpu(void)
{
    struct wk_backend *be = NULL;

    CU_ASSERT_FATAL(wk_backend_cpu_new(1, &be) == HC_OK);
    return be;
}

/* ---- naive double-precision ops ---- */

static double ref_act1(enum hc_act a, double z)
{
    switch (a) {
    case HC_ACT_RELU: return z > 0 ? z : 0;
    case HC_ACT_SIGMOID: return 1.0 / (1.0 + exp(-z));
    case HC_ACT_TANH: return tanh(z);
    default: return z;
    }
}

/* Derivative from the pre-activation z. */
static double ref_dact1(enum hc_act a, double z)
{
    double s;

    switch (a) {
    case HC_ACT_RELU: return z > 0 ? 1 : 0;
    case HC_ACT_SIGMOID: s = 1.0 / (1.0 + exp(-z)); return s * (1 - s);
    case HC_ACT_TANH: s = tanh(z); return 1 - s * s;
    default: return 1;
    }
}

/* y = act(z) over rows of n (softmax per row). */
static void ref_act(enum hc_act a, const double *z, double *y, size_t rows,
                    int n)
{
    size_t r;
    int j;

    for (r = 0; r < rows; r++) {
        const double *zr = z + r * n;
        double *yr = y + r * n;

        if (a == HC_ACT_SOFTMAX) {
            double mx = zr[0], s = 0;

            for (j = 1; j < n; j++)
                mx = zr[j] > mx ? zr[j] : mx;
            for (j = 0; j < n; j++)
                s += exp(zr[j] - mx);
            for (j = 0; j < n; j++)
                yr[j] = exp(zr[j] - mx) / s;
        } else {
            for (j = 0; j < n; j++)
                yr[j] = ref_act1(a, zr[j]);
        }
    }
}

/* dz from dy through act at z (y = act(z)). */
static void ref_dact(enum hc_act a, const double *z, const double *y,
                     const double *dy, double *dz, size_t rows, int n)
{
    size_t r;
    int j, k;

    for (r = 0; r < rows; r++) {
        const double *zr = z + r * n, *yr = y + r * n, *dyr = dy + r * n;
        double *dzr = dz + r * n;

        for (j = 0; j < n; j++) {
            if (a != HC_ACT_SOFTMAX) {
                dzr[j] = dyr[j] * ref_dact1(a, zr[j]);
                continue;
            }
            /* full Jacobian: dy_k/dz_j = y_k (δ_kj − y_j) */
            dzr[j] = 0;
            for (k = 0; k < n; k++)
                dzr[j] += dyr[k] * yr[k] * ((k == j) - yr[j]);
        }
    }
}

/* Keras "same": pad_total = max((ceil(H/s) − 1)·s + k − H, 0). */
static int ref_pad_before(int H, int k, int s, int same)
{
    int out = (H + s - 1) / s, total = (out - 1) * s + k - H;

    return same && total > 0 ? total / 2 : 0;
}

static int ref_out_dim(int H, int k, int s, int same)
{
    return same ? (H + s - 1) / s : (H - k) / s + 1;
}

/* ---- the model builder ---- */

static void mb_begin(struct hc_model *m, const char *name, int rank, int d0,
                     int d1, int d2, enum hc_loss loss)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->input.rank = rank;
    m->input.dims[0] = d0;
    m->input.dims[1] = d1;
    m->input.dims[2] = d2;
    m->loss = loss;
    m->seed = 7;
}

static struct hc_shape mb_cur(const struct hc_model *m)
{
    return m->n_layers ? m->layers[m->n_layers - 1].out : m->input;
}

static int mb_var(struct hc_model *m, const char *layer, const char *what,
                  int ndim, int s0, int s1, int s2, int s3)
{
    struct hc_var_def *v = &m->vars[m->n_vars];
    int sh[4] = {s0, s1, s2, s3}, i;

    snprintf(v->name, sizeof v->name, "%s/%s", layer, what);
    v->ndim = ndim;
    v->size = 1;
    for (i = 0; i < ndim; i++) {
        v->shape[i] = sh[i];
        v->size *= (size_t)sh[i];
    }
    v->init = ndim > 1 ? HC_INIT_GLOROT_UNIFORM : HC_INIT_ZEROS;
    m->n_params += v->size;
    return m->n_vars++;
}

static struct hc_layer_spec *mb_layer(struct hc_model *m,
                                      enum hc_layer_type t, enum hc_act act)
{
    static const char *const names[] = {"conv2d", "max_pooling2d", "flatten",
                                        "dense", "dropout", "activation"};
    struct hc_layer_spec *l = &m->layers[m->n_layers];
    int i, same = 0;

    memset(l, 0, sizeof *l);
    for (i = 0; i < m->n_layers; i++)
        same += m->layers[i].type == t;
    if (same)
        snprintf(l->name, sizeof l->name, "%s_%d", names[t], same);
    else
        snprintf(l->name, sizeof l->name, "%s", names[t]);
    l->type = t;
    l->act = act;
    l->in = mb_cur(m);
    l->out = l->in;
    l->var_kernel = l->var_bias = -1;
    l->use_bias = 1;
    m->n_layers++;
    return l;
}

static void mb_conv(struct hc_model *m, int F, int kh, int kw, int sh, int sw,
                    int same, enum hc_act act, int use_bias)
{
    struct hc_layer_spec *l = mb_layer(m, HC_LAYER_CONV2D, act);
    int C = l->in.dims[2];

    l->filters = F;
    l->kh = kh;
    l->kw = kw;
    l->sh = sh;
    l->sw = sw;
    l->same = same;
    l->use_bias = use_bias;
    l->out.dims[0] = ref_out_dim(l->in.dims[0], kh, sh, same);
    l->out.dims[1] = ref_out_dim(l->in.dims[1], kw, sw, same);
    l->out.dims[2] = F;
    l->var_kernel = mb_var(m, l->name, "kernel", 4, kh, kw, C, F);
    if (use_bias)
        l->var_bias = mb_var(m, l->name, "bias", 1, F, 0, 0, 0);
}

static void mb_pool(struct hc_model *m, int ph, int pw, int sh, int sw,
                    int same)
{
    struct hc_layer_spec *l = mb_layer(m, HC_LAYER_MAXPOOL2D, HC_ACT_LINEAR);

    l->ph = ph;
    l->pw = pw;
    l->sh = sh;
    l->sw = sw;
    l->same = same;
    l->out.dims[0] = ref_out_dim(l->in.dims[0], ph, sh, same);
    l->out.dims[1] = ref_out_dim(l->in.dims[1], pw, sw, same);
}

static void mb_flatten(struct hc_model *m)
{
    struct hc_layer_spec *l = mb_layer(m, HC_LAYER_FLATTEN, HC_ACT_LINEAR);

    l->out.rank = 1;
    l->out.dims[0] = l->in.dims[0] * l->in.dims[1] * l->in.dims[2];
    l->out.dims[1] = l->out.dims[2] = 0;
}

static void mb_dense(struct hc_model *m, int units, enum hc_act act,
                     int use_bias)
{
    struct hc_layer_spec *l = mb_layer(m, HC_LAYER_DENSE, act);

    l->units = units;
    l->use_bias = use_bias;
    l->out.dims[0] = units;
    l->var_kernel = mb_var(m, l->name, "kernel", 2, l->in.dims[0], units, 0, 0);
    if (use_bias)
        l->var_bias = mb_var(m, l->name, "bias", 1, units, 0, 0, 0);
    if (act == HC_ACT_SOFTMAX)
        m->n_classes = units;
}

static void mb_dropout(struct hc_model *m, float rate)
{
    mb_layer(m, HC_LAYER_DROPOUT, HC_ACT_LINEAR)->rate = rate;
}

static void mb_act(struct hc_model *m, enum hc_act act)
{
    mb_layer(m, HC_LAYER_ACTIVATION, act);
}

static size_t shp_size(const struct hc_shape *s)
{
    return s->rank == 3 ? (size_t)s->dims[0] * s->dims[1] * s->dims[2]
                        : (size_t)s->dims[0];
}

static size_t var_off(const struct hc_model *m, int v)
{
    size_t off = 0;
    int i;

    for (i = 0; i < v; i++)
        off += m->vars[i].size;
    return off;
}

/* Glorot-like random kernels and small random (nonzero) biases. */
static void rand_params(const struct hc_model *m, float *p, uint64_t *s)
{
    int v;

    for (v = 0; v < m->n_vars; v++) {
        const struct hc_var_def *d = &m->vars[v];
        double a = 0.1;

        if (d->ndim > 1) {
            size_t fan_out = (size_t)d->shape[d->ndim - 1];
            size_t fan_in = d->size / fan_out;

            a = sqrt(6.0 / (double)(fan_in + fan_out));
        }
        fill_rand(p + var_off(m, v), d->size, s, -a, a);
    }
}

/* ---- the reference network in double ---- */

struct ref_batch {
    int B;
    const float *x;             /* (B, input) */
    const int *labels;          /* (B) sparse CCE */
    const float *targets;       /* (B, N) MSE */
    double *const *masks;       /* per layer: dropout scale (B, size) */
};

/*
 * Mean loss of the batch with parameters P; when G is not NULL also the
 * gradient (n_params). out (B, N) receives the network output if not NULL.
 * Every layer is computed by the plainest loops, from the definition.
 */
static double ref_run(const struct hc_model *m, const double *P,
                      const struct ref_batch *rb, double *G, double *out)
{
    const int B = rb->B, L = m->n_layers;
    double *z[HC_MODEL_MAX_LAYERS], *y[HC_MODEL_MAX_LAYERS];
    int *arg[HC_MODEL_MAX_LAYERS];
    size_t in_n = shp_size(&m->input), N, i;
    double *x0 = dalloc(B * in_n), *dy, *dx, loss = 0;
    int l, b;

    for (i = 0; i < B * in_n; i++)
        x0[i] = rb->x[i];
    for (l = 0; l < L; l++) {
        const struct hc_layer_spec *s = &m->layers[l];
        const double *X = l ? y[l - 1] : x0;
        size_t on = shp_size(&s->out), inn = shp_size(&s->in);
        const double *W = s->var_kernel >= 0 ? P + var_off(m, s->var_kernel)
                                             : NULL;
        const double *bias = s->var_bias >= 0 ? P + var_off(m, s->var_bias)
                                              : NULL;

        z[l] = dalloc(B * on);
        y[l] = dalloc(B * on);
        arg[l] = calloc(B * on, sizeof(int));
        CU_ASSERT_FATAL(arg[l] != NULL);
        if (s->type == HC_LAYER_CONV2D || s->type == HC_LAYER_MAXPOOL2D) {
            int H = s->in.dims[0], Wd = s->in.dims[1], C = s->in.dims[2];
            int OH = s->out.dims[0], OW = s->out.dims[1], F = s->out.dims[2];
            int conv = s->type == HC_LAYER_CONV2D;
            int kh = conv ? s->kh : s->ph, kw = conv ? s->kw : s->pw;
            int pt = ref_pad_before(H, kh, s->sh, s->same);
            int pl = ref_pad_before(Wd, kw, s->sw, s->same);
            int oh, ow, f, a, c, bb;

            for (bb = 0; bb < B; bb++)
                for (oh = 0; oh < OH; oh++)
                    for (ow = 0; ow < OW; ow++)
                        for (f = 0; f < F; f++) {
                            size_t o = (((size_t)bb * OH + oh) * OW + ow) * F + f;
                            double acc = conv && bias ? bias[f] : 0;
                            int best = -1;

                            for (a = 0; a < kh * kw; a++) {
                                int ih = oh * s->sh - pt + a / kw;
                                int iw = ow * s->sw - pl + a % kw;

                                if (ih < 0 || ih >= H || iw < 0 || iw >= Wd)
                                    continue;
                                for (c = 0; c < C; c++) {
                                    size_t xi = (((size_t)bb * H + ih) * Wd + iw) * C + c;

                                    if (conv)
                                        acc += X[xi] * W[((size_t)a * C + c) * F + f];
                                    else if (c == f &&
                                             (best < 0 || X[xi] > X[best]))
                                        best = (int)xi;
                                }
                            }
                            if (conv) {
                                z[l][o] = acc;
                            } else {
                                z[l][o] = X[best];
                                arg[l][o] = best;
                            }
                        }
        } else if (s->type == HC_LAYER_DENSE) {
            int U = s->units, u;

            for (b = 0; b < B; b++)
                for (u = 0; u < U; u++) {
                    double acc = bias ? bias[u] : 0;

                    for (i = 0; i < inn; i++)
                        acc += X[b * inn + i] * W[i * U + u];
                    z[l][b * U + u] = acc;
                }
        } else if (s->type == HC_LAYER_DROPOUT && rb->masks && rb->masks[l]) {
            for (i = 0; i < B * on; i++)
                z[l][i] = X[i] * rb->masks[l][i];
        } else {
            memcpy(z[l], X, B * on * sizeof(double));
        }
        if (s->type == HC_LAYER_CONV2D || s->type == HC_LAYER_DENSE ||
            s->type == HC_LAYER_ACTIVATION) {
            int n = s->out.rank == 3 ? s->out.dims[2] : s->out.dims[0];

            ref_act(s->act, z[l], y[l], B * on / n, n);
        } else {
            memcpy(y[l], z[l], B * on * sizeof(double));
        }
    }
    N = shp_size(&m->layers[L - 1].out);
    dy = dalloc(B * N);
    for (b = 0; b < B; b++) {
        const double *yb = y[L - 1] + b * N;

        if (m->loss == HC_LOSS_SPARSE_CCE) {
            loss -= log(yb[rb->labels[b]]);
            dy[b * N + rb->labels[b]] = -1.0 / (B * yb[rb->labels[b]]);
        } else {
            for (i = 0; i < N; i++) {
                double d = yb[i] - rb->targets[b * N + i];

                loss += d * d / N;
                dy[b * N + i] = 2 * d / ((double)N * B);
            }
        }
    }
    if (out)
        memcpy(out, y[L - 1], B * N * sizeof(double));
    for (l = L - 1; G && l >= 0; l--) {
        const struct hc_layer_spec *s = &m->layers[l];
        const double *X = l ? y[l - 1] : x0;
        size_t on = shp_size(&s->out), inn = shp_size(&s->in);
        const double *W = s->var_kernel >= 0 ? P + var_off(m, s->var_kernel)
                                             : NULL;
        double *dW = s->var_kernel >= 0 ? G + var_off(m, s->var_kernel) : NULL;
        double *dB = s->var_bias >= 0 ? G + var_off(m, s->var_bias) : NULL;
        double *dz = dalloc(B * on);

        dx = dalloc(B * inn);
        if (s->type == HC_LAYER_CONV2D || s->type == HC_LAYER_DENSE ||
            s->type == HC_LAYER_ACTIVATION) {
            int n = s->out.rank == 3 ? s->out.dims[2] : s->out.dims[0];

            ref_dact(s->act, z[l], y[l], dy, dz, B * on / n, n);
        } else {
            memcpy(dz, dy, B * on * sizeof(double));
        }
        if (s->type == HC_LAYER_CONV2D || s->type == HC_LAYER_MAXPOOL2D) {
            int H = s->in.dims[0], Wd = s->in.dims[1], C = s->in.dims[2];
            int OH = s->out.dims[0], OW = s->out.dims[1], F = s->out.dims[2];
            int conv = s->type == HC_LAYER_CONV2D;
            int kh = conv ? s->kh : s->ph, kw = conv ? s->kw : s->pw;
            int pt = ref_pad_before(H, kh, s->sh, s->same);
            int pl = ref_pad_before(Wd, kw, s->sw, s->same);
            int oh, ow, f, a, c, bb;

            for (bb = 0; bb < B; bb++)
                for (oh = 0; oh < OH; oh++)
                    for (ow = 0; ow < OW; ow++)
                        for (f = 0; f < F; f++) {
                            size_t o = (((size_t)bb * OH + oh) * OW + ow) * F + f;

                            if (!conv) {
                                dx[arg[l][o]] += dz[o];
                                continue;
                            }
                            if (dB)
                                dB[f] += dz[o];
                            for (a = 0; a < kh * kw; a++) {
                                int ih = oh * s->sh - pt + a / kw;
                                int iw = ow * s->sw - pl + a % kw;

                                if (ih < 0 || ih >= H || iw < 0 || iw >= Wd)
                                    continue;
                                for (c = 0; c < C; c++) {
                                    size_t xi = (((size_t)bb * H + ih) * Wd + iw) * C + c;
                                    size_t wi = ((size_t)a * C + c) * F + f;

                                    dW[wi] += dz[o] * X[xi];
                                    dx[xi] += dz[o] * W[wi];
                                }
                            }
                        }
        } else if (s->type == HC_LAYER_DENSE) {
            int U = s->units, u;

            for (b = 0; b < B; b++)
                for (u = 0; u < U; u++) {
                    double g = dz[b * U + u];

                    if (dB)
                        dB[u] += g;
                    for (i = 0; i < inn; i++) {
                        dW[i * U + u] += g * X[b * inn + i];
                        dx[b * inn + i] += g * W[i * U + u];
                    }
                }
        } else if (s->type == HC_LAYER_DROPOUT && rb->masks && rb->masks[l]) {
            for (i = 0; i < B * on; i++)
                dx[i] = dz[i] * rb->masks[l][i];
        } else {
            memcpy(dx, dz, B * on * sizeof(double));
        }
        free(dz);
        free(dy);
        dy = dx;
    }
    free(dy);
    for (l = 0; l < L; l++) {
        free(z[l]);
        free(y[l]);
        free(arg[l]);
    }
    free(x0);
    return loss / B;
}

/* ---- the op tests ---- */

static void test_geom(void)
{
    static const struct {
        int H, k, s, same, OH, pt;
    } t[] = {
        {28, 3, 1, 0, 26, 0}, {28, 3, 1, 1, 28, 1}, {7, 3, 2, 1, 4, 1},
        {5, 2, 2, 1, 3, 0},   {6, 2, 2, 1, 3, 0},   {5, 2, 2, 0, 2, 0},
        {8, 4, 3, 1, 3, 1},   {1, 3, 1, 1, 1, 1},   {7, 7, 1, 0, 1, 0},
    };
    struct wk_geom g;
    size_t i;

    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(wk_geom_init(&g, 2, t[i].H, t[i].H + 1, 3, t[i].k,
                                           t[i].k, t[i].s, t[i].s, t[i].same),
                              HC_OK);
        CU_ASSERT_EQUAL(g.OH, t[i].OH);
        CU_ASSERT_EQUAL(g.pt, t[i].pt);
        CU_ASSERT_EQUAL(g.OH, ref_out_dim(t[i].H, t[i].k, t[i].s, t[i].same));
        CU_ASSERT_EQUAL(g.OW, ref_out_dim(t[i].H + 1, t[i].k, t[i].s,
                                          t[i].same));
        CU_ASSERT_EQUAL(g.pl, ref_pad_before(t[i].H + 1, t[i].k, t[i].s,
                                             t[i].same));
    }
    CU_ASSERT_EQUAL(wk_geom_init(&g, 1, 2, 5, 1, 3, 3, 1, 1, 0), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_geom_init(&g, 1, 5, 5, 1, 3, 3, 0, 1, 0), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_geom_init(&g, 0, 5, 5, 1, 3, 3, 1, 1, 0), HC_ERR_INVAL);
}

static void test_backend_new(void)
{
    struct wk_backend *be = (struct wk_backend *)1;

    CU_ASSERT_EQUAL(wk_backend_cpu_new(-2, &be), HC_ERR_INVAL);
    CU_ASSERT_PTR_NULL(be);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "-2 threads"));
    CU_ASSERT_EQUAL_FATAL(wk_backend_cpu_new(0, &be), HC_OK);
    CU_ASSERT(be->host_memory == 1);
    CU_ASSERT_STRING_EQUAL(be->name, "cpu");
    CU_ASSERT_EQUAL(wk_be_check(be), HC_OK);
    wk_backend_free(be);
    wk_backend_free(NULL);
}

static void test_sgemm(void)
{
    struct wk_backend *be = cpu();
    const int m = 7, n = 5, k = 6, pad = 3;
    uint64_t s = 1;
    float *a = falloc((size_t)k * (m + pad) + m * (k + pad));
    float *b = falloc((size_t)k * (n + pad) + n * (k + pad));
    float *c = falloc((size_t)m * (n + pad));
    double *want = dalloc((size_t)m * n), *c0 = dalloc((size_t)m * n);
    float got[7 * 5];
    int ta, tb, bi, i, j, p;

    fill_rand(a, (size_t)k * (m + pad) + m * (k + pad), &s, -1, 1);
    fill_rand(b, (size_t)k * (n + pad) + n * (k + pad), &s, -1, 1);
    for (ta = 0; ta < 2; ta++)
        for (tb = 0; tb < 2; tb++)
            for (bi = 0; bi < 2; bi++) {
                float beta = bi ? 1.3f : 0.0f;
                int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad;
                char what[64];

                for (i = 0; i < m; i++)
                    for (j = 0; j < n + pad; j++) {
                        c[i * (n + pad) + j] = bi ? (float)urand(&s, -1, 1)
                                                  : NAN;
                        if (j < n)
                            c0[i * n + j] = c[i * (n + pad) + j];
                    }
                for (i = 0; i < m; i++)
                    for (j = 0; j < n; j++) {
                        double acc = 0;

                        for (p = 0; p < k; p++)
                            acc += (double)(ta ? a[p * lda + i]
                                               : a[i * lda + p]) *
                                   (tb ? b[j * ldb + p] : b[p * ldb + j]);
                        want[i * n + j] = 0.7 * acc + (bi ? beta * c0[i * n + j]
                                                          : 0.0);
                    }
                wk_be_sgemm(be, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, beta, c,
                            n + pad);
                for (i = 0; i < m; i++)
                    for (j = 0; j < n; j++)
                        got[i * n + j] = c[i * (n + pad) + j];
                snprintf(what, sizeof what, "sgemm ta=%d tb=%d beta=%g", ta,
                         tb, (double)beta);
                CU_ASSERT(cmp_report(what, got, NULL, want, (size_t)m * n,
                                     1e-6, 1e-5));
            }
    /* k = 0: C = beta·C */
    c[0] = 2.0f;
    wk_be_sgemm(be, 0, 0, 1, 1, 0, 1.0f, a, 1, b, 1, 0.5f, c, 1);
    CU_ASSERT_EQUAL(c[0], 1.0f);
    free(a);
    free(b);
    free(c);
    free(want);
    free(c0);
    wk_backend_free(be);
}

static const struct {
    int B, H, W, C, kh, kw, sh, sw, same;
} geoms[] = {
    {2, 5, 6, 2, 3, 3, 1, 1, 0}, {2, 5, 6, 2, 3, 3, 1, 1, 1},
    {1, 7, 6, 3, 3, 2, 2, 2, 1}, {2, 7, 7, 1, 3, 3, 2, 2, 0},
    {1, 4, 4, 3, 1, 1, 1, 1, 0}, {3, 6, 5, 2, 2, 3, 2, 1, 1},
    {1, 3, 3, 2, 5, 5, 1, 1, 1}, {2, 8, 8, 1, 4, 4, 3, 3, 1},
};

static void test_im2col_col2im(void)
{
    struct wk_backend *be = cpu();
    size_t gi;
    uint64_t s = 2;

    for (gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        struct wk_geom g;
        size_t nx, nc, i;
        float *x, *cols, *dc, *dx;
        double *wc, *wx, dot1 = 0, dot2 = 0;
        int b, oh, ow, a, c;
        char what[64];

        CU_ASSERT_FATAL(wk_geom_init(&g, geoms[gi].B, geoms[gi].H, geoms[gi].W,
                                     geoms[gi].C, geoms[gi].kh, geoms[gi].kw,
                                     geoms[gi].sh, geoms[gi].sw,
                                     geoms[gi].same) == HC_OK);
        nx = (size_t)g.B * g.H * g.W * g.C;
        nc = (size_t)g.B * g.OH * g.OW * g.kh * g.kw * g.C;
        x = falloc(nx);
        cols = falloc(nc);
        dc = falloc(nc);
        dx = falloc(nx);
        wc = dalloc(nc);
        wx = dalloc(nx);
        fill_rand(x, nx, &s, -1, 1);
        fill_rand(dc, nc, &s, -1, 1);
        for (i = 0; i < nx; i++)
            dx[i] = NAN;    /* col2im must overwrite */
        i = 0;
        for (b = 0; b < g.B; b++)
            for (oh = 0; oh < g.OH; oh++)
                for (ow = 0; ow < g.OW; ow++)
                    for (a = 0; a < g.kh * g.kw; a++)
                        for (c = 0; c < g.C; c++, i++) {
                            int ih = oh * g.sh - g.pt + a / g.kw;
                            int iw = ow * g.sw - g.pl + a % g.kw;
                            size_t xi = (((size_t)b * g.H + ih) * g.W + iw) * g.C + c;

                            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W)
                                continue;
                            wc[i] = x[xi];
                            wx[xi] += dc[i];
                        }
        wk_be_im2col(be, &g, x, cols);
        wk_be_col2im(be, &g, dc, dx);
        snprintf(what, sizeof what, "im2col geometry %zu", gi);
        CU_ASSERT(cmp_report(what, cols, NULL, wc, nc, 0, 0));
        snprintf(what, sizeof what, "col2im geometry %zu", gi);
        CU_ASSERT(cmp_report(what, dx, NULL, wx, nx, 1e-6, 1e-6));
        /* adjoint: <im2col(x), dc> = <x, col2im(dc)> */
        for (i = 0; i < nc; i++)
            dot1 += (double)cols[i] * dc[i];
        for (i = 0; i < nx; i++)
            dot2 += (double)x[i] * dx[i];
        CU_ASSERT(fabs(dot1 - dot2) <= 1e-5 * (1 + fabs(dot1)));
        free(x);
        free(cols);
        free(dc);
        free(dx);
        free(wc);
        free(wx);
    }
    wk_backend_free(be);
}

static void test_activations(void)
{
    static const enum hc_act acts[] = {HC_ACT_LINEAR, HC_ACT_RELU,
                                       HC_ACT_SIGMOID, HC_ACT_TANH,
                                       HC_ACT_SOFTMAX};
    struct wk_backend *be = cpu();
    enum { R = 9, N = 7 };
    float x[R * N], bias[N], y[R * N], dy[R * N], dx[R * N], db[N];
    float fused[R * N], db2[N];
    double z[R * N], wy[R * N], wdz[R * N], wdb[N], dyd[R * N];
    uint64_t s = 3;
    size_t ai;
    int r, j, wb;

    for (ai = 0; ai < sizeof acts / sizeof acts[0]; ai++) {
        enum hc_act a = acts[ai];

        for (wb = 0; wb < 2; wb++) {
            char what[64];

            fill_rand(x, R * N, &s, -3, 3);
            fill_rand(bias, N, &s, -1, 1);
            fill_rand(dy, R * N, &s, -1, 1);
            x[0] = 0.0f;
            for (r = 0; r < R; r++)
                for (j = 0; j < N; j++)
                    z[r * N + j] = (double)x[r * N + j] + (wb ? bias[j] : 0.0f);
            ref_act(a, z, wy, R, N);
            wk_be_act_forward(be, x, wb ? bias : NULL, y, R, N, a);
            snprintf(what, sizeof what, "act_forward %d bias %d", (int)a, wb);
            CU_ASSERT(cmp_report(what, y, NULL, wy, R * N, 1e-6, 1e-5));
            /* backward from the float outputs, against double */
            for (r = 0; r < R * N; r++)
                dyd[r] = dy[r];
            ref_dact(a, z, wy, dyd, wdz, R, N);
            wk_be_act_backward(be, y, dy, dx, R, N, a);
            snprintf(what, sizeof what, "act_backward %d bias %d", (int)a, wb);
            CU_ASSERT(cmp_report(what, dx, NULL, wdz, R * N, 1e-6, 1e-4));
            /* fused act + bias gradient: same as the two ops */
            memcpy(fused, dy, sizeof fused);
            wk_be_act_bias_backward(be, y, fused, R, N, a, db);
            for (j = 0; j < N; j++) {
                wdb[j] = 0;
                for (r = 0; r < R; r++)
                    wdb[j] += wdz[r * N + j];
            }
            snprintf(what, sizeof what, "act_bias_backward dy %d", (int)a);
            CU_ASSERT(cmp_report(what, fused, NULL, wdz, R * N, 1e-6, 1e-4));
            snprintf(what, sizeof what, "act_bias_backward db %d", (int)a);
            CU_ASSERT(cmp_report(what, db, NULL, wdb, N, 1e-6, 1e-4));
            wk_be_bias_grad(be, dx, R, N, db2);
            CU_ASSERT(cmp_report("bias_grad", db2, NULL, wdb, N, 1e-6, 1e-4));
            /* in place, db NULL */
            memcpy(fused, dy, sizeof fused);
            wk_be_act_bias_backward(be, y, fused, R, N, a, NULL);
            CU_ASSERT(cmp_report("act_bias_backward db=NULL", fused, NULL, wdz,
                                 R * N, 1e-6, 1e-4));
            wk_be_act_forward(be, x, wb ? bias : NULL, x, R, N, a);
            CU_ASSERT(memcmp(x, y, sizeof x) == 0);     /* in place */
        }
    }
    wk_backend_free(be);
}

/* The optional entries' generic defaults (wrappers with NULL entries). */
static void test_optional_defaults(void)
{
    struct wk_backend *be = cpu(), bare;
    struct wk_backend_ops ops = *be->ops;
    enum { R = 70, N = 300 };     /* N > one stack chunk of columns */
    float *y = falloc(R * N), *dy = falloc(R * N), *dy2 = falloc(R * N);
    float db[N], db2[N], s0[50], s1[50], s2[50], out[50], out2[50];
    const float *src[3] = {s0, s1, s2};
    const float w[3] = {0.5f, 2.0f, -1.0f};
    double want[50], wantu[50];
    uint64_t s = 4;
    int i, a;

    ops.reduce = NULL;
    ops.act_bias_backward = NULL;
    ops.check = NULL;
    bare = *be;
    bare.ops = &ops;
    for (a = HC_ACT_LINEAR; a <= HC_ACT_SOFTMAX; a++) {
        fill_rand(y, R * N, &s, 0.01, 0.99);
        fill_rand(dy, R * N, &s, -1, 1);
        y[5] = 0.0f;
        memcpy(dy2, dy, R * N * sizeof *dy);
        wk_be_act_bias_backward(be, y, dy, R, N, (enum hc_act)a, db);
        wk_be_act_bias_backward(&bare, y, dy2, R, N, (enum hc_act)a, db2);
        for (i = 0; i < R * N; i++)
            CU_ASSERT_FATAL(fabsf(dy[i] - dy2[i]) <= 1e-7f);
        for (i = 0; i < N; i++)
            CU_ASSERT(fabsf(db[i] - db2[i]) <= 1e-4f * (1 + fabsf(db[i])));
    }
    fill_rand(s0, 50, &s, -1, 1);
    fill_rand(s1, 50, &s, -1, 1);
    fill_rand(s2, 50, &s, -1, 1);
    for (i = 0; i < 50; i++) {
        want[i] = 0.5 * s0[i] + 2.0 * s1[i] - 1.0 * s2[i];
        wantu[i] = (double)s0[i] + s1[i] + s2[i];
    }
    wk_be_reduce(be, out, src, w, 3, 50);
    CU_ASSERT(cmp_report("reduce weighted", out, NULL, want, 50, 1e-6, 1e-6));
    wk_be_reduce(&bare, out2, src, w, 3, 50);
    CU_ASSERT(cmp_report("reduce weighted (default)", out2, NULL, want, 50,
                         1e-6, 1e-6));
    wk_be_reduce(be, out, src, NULL, 3, 50);
    CU_ASSERT(cmp_report("reduce", out, NULL, wantu, 50, 1e-6, 1e-6));
    memcpy(out2, s0, sizeof out2);
    src[0] = out2;     /* dst may equal src[0] */
    wk_be_reduce(&bare, out2, src, NULL, 3, 50);
    CU_ASSERT(cmp_report("reduce in place (default)", out2, NULL, wantu, 50,
                         1e-6, 1e-6));
    CU_ASSERT_EQUAL(wk_be_check(&bare), HC_OK);
    free(y);
    free(dy);
    free(dy2);
    wk_backend_free(be);
}

static void test_blas1_and_memory(void)
{
    struct wk_backend *be = cpu();
    float *d = NULL, h[10], back[10];
    int i;

    CU_ASSERT_EQUAL_FATAL(wk_be_alloc(be, sizeof h, (void **)&d), HC_OK);
    CU_ASSERT_EQUAL((uintptr_t)d % 64, 0);
    for (i = 0; i < 10; i++)
        h[i] = (float)i;
    CU_ASSERT_EQUAL(wk_be_upload(be, d, h, sizeof h), HC_OK);
    wk_be_scale(be, d, 10, 2.0f);
    wk_be_axpy(be, 10, 0.5f, h, d);          /* 2i + i/2 */
    CU_ASSERT_EQUAL(wk_be_download(be, back, d, sizeof back), HC_OK);
    for (i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(back[i], 2.5f * (float)i);
    wk_be_fill(be, d, 10, 3.0f);
    CU_ASSERT_EQUAL(wk_be_copy(be, back, d, sizeof back), HC_OK);
    for (i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(back[i], 3.0f);
    wk_be_fill(be, d, 10, 0.0f);
    CU_ASSERT_EQUAL(d[9], 0.0f);
    wk_be_free(be, d);
    wk_be_free(be, NULL);
#ifndef __SANITIZE_ADDRESS__   /* ASan aborts on absurd sizes */
    d = (float *)1;
    CU_ASSERT_EQUAL(wk_be_alloc(be, (size_t)1 << 62, (void **)&d), HC_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "cpu: cannot allocate"));
#endif
    wk_backend_free(be);
}

static void test_xent(void)
{
    struct wk_backend *be = cpu();
    enum { R = 6, N = 5 };
    float z[R * N], p[R * N], loss[R], hit[R], dz[R * N];
    double wp[R * N], wl[R], wh[R], wdz[R * N], zd[R * N];
    int labels[R] = {0, 4, 2, 2, 1, 3}, r, j;
    uint64_t s = 5;

    fill_rand(z, R * N, &s, -4, 4);
    z[5 * N + 3] = 900.0f;     /* huge logits: still finite */
    z[5 * N + 1] = -900.0f;
    z[4 * N + 0] = 700.0f;     /* the label's logit far below the max */
    z[3 * N + 2] = z[3 * N + 4] = 3.5f;  /* tie: first maximum wins */
    z[3 * N + 0] = z[3 * N + 1] = z[3 * N + 3] = 0.0f;
    for (r = 0; r < R * N; r++)
        zd[r] = z[r];
    ref_act(HC_ACT_SOFTMAX, zd, wp, R, N);
    for (r = 0; r < R; r++) {
        double mx = zd[r * N], se = 0;
        int arg = 0;

        for (j = 1; j < N; j++)
            if (zd[r * N + j] > mx) {
                mx = zd[r * N + j];
                arg = j;
            }
        for (j = 0; j < N; j++)
            se += exp(zd[r * N + j] - mx);
        wl[r] = log(se) + mx - zd[r * N + labels[r]];
        wh[r] = arg == labels[r];
        for (j = 0; j < N; j++)
            wdz[r * N + j] = 0.25 * (wp[r * N + j] - (j == labels[r]));
    }
    wk_be_xent_forward(be, z, labels, R, N, p, loss, hit);
    CU_ASSERT(cmp_report("xent_forward p", p, NULL, wp, R * N, 1e-7, 1e-5));
    CU_ASSERT(cmp_report("xent_forward loss", loss, NULL, wl, R, 1e-6, 1e-5));
    CU_ASSERT(cmp_report("xent_forward hit", hit, NULL, wh, R, 0, 0));
    CU_ASSERT(isfinite(loss[4]) && loss[4] > 690.0f);
    wk_be_xent_backward(be, p, labels, R, N, 0.25f, dz);
    CU_ASSERT(cmp_report("xent_backward", dz, NULL, wdz, R * N, 1e-7, 1e-5));
    wk_be_xent_backward(be, p, labels, R, N, 0.25f, p);    /* in place */
    CU_ASSERT(memcmp(p, dz, sizeof dz) == 0);
    /* no labels: probabilities only, loss and hit untouched */
    loss[0] = -1.0f;
    wk_be_xent_forward(be, z, NULL, R, N, p, NULL, NULL);
    CU_ASSERT(cmp_report("xent_forward p (no labels)", p, NULL, wp, R * N,
                         1e-7, 1e-5));
    CU_ASSERT_EQUAL(loss[0], -1.0f);
    wk_backend_free(be);
}

static void test_mse(void)
{
    struct wk_backend *be = cpu();
    enum { R = 5, N = 3 };
    float y[R * N], t[R * N], loss[R], hit[R], dy[R * N];
    float y1[4] = {0.2f, 0.7f, 0.6f, 0.4f}, t1[4] = {0.0f, 1.0f, 0.0f, 0.0f};
    double wl[R], wh[R], wd[R * N], wl1[4], wh1[4] = {1, 1, 0, 1};
    uint64_t s = 6;
    int r, j;

    fill_rand(y, R * N, &s, -1, 1);
    fill_rand(t, R * N, &s, -1, 1);
    for (r = 0; r < R; r++) {
        int ay = 0, at = 0;

        wl[r] = 0;
        for (j = 0; j < N; j++) {
            double d = (double)y[r * N + j] - t[r * N + j];

            wl[r] += d * d / N;
            wd[r * N + j] = 0.3 * d;
            if (y[r * N + j] > y[r * N + ay])
                ay = j;
            if (t[r * N + j] > t[r * N + at])
                at = j;
        }
        wh[r] = ay == at;
    }
    wk_be_mse_forward(be, y, t, R, N, loss, hit);
    CU_ASSERT(cmp_report("mse_forward loss", loss, NULL, wl, R, 1e-7, 1e-6));
    CU_ASSERT(cmp_report("mse_forward hit (argmax)", hit, NULL, wh, R, 0, 0));
    wk_be_mse_backward(be, y, t, R * N, 0.3f, dy);
    CU_ASSERT(cmp_report("mse_backward", dy, NULL, wd, R * N, 1e-7, 1e-6));
    for (r = 0; r < 4; r++)
        wl1[r] = ((double)y1[r] - t1[r]) * ((double)y1[r] - t1[r]);
    wk_be_mse_forward(be, y1, t1, 4, 1, loss, hit);
    CU_ASSERT(cmp_report("mse_forward loss n=1", loss, NULL, wl1, 4, 1e-7,
                         1e-6));
    CU_ASSERT(cmp_report("mse_forward hit n=1 (threshold)", hit, NULL, wh1, 4,
                         0, 0));
    wk_backend_free(be);
}

static void test_maxpool(void)
{
    static const struct {
        int B, H, W, C, p, s, same;
    } t[] = {
        {2, 4, 4, 3, 2, 2, 0}, {2, 5, 5, 2, 2, 2, 0}, {1, 7, 6, 2, 3, 2, 0},
        {2, 5, 5, 2, 2, 2, 1}, {1, 6, 5, 3, 3, 1, 1}, {3, 26, 26, 4, 2, 2, 0},
        {1, 1, 1, 2, 2, 2, 1},
    };
    struct wk_backend *be = cpu();
    uint64_t s = 7;
    size_t ti;

    for (ti = 0; ti < sizeof t / sizeof t[0]; ti++) {
        struct wk_geom g;
        size_t nx, ny, i;
        float *x, *y, *dy, *dx;
        int32_t *idx;
        double *wy, *widx, *wdx, *gi;
        int b, oh, ow, c, a;
        char what[64];

        CU_ASSERT_FATAL(wk_geom_init(&g, t[ti].B, t[ti].H, t[ti].W, t[ti].C,
                                     t[ti].p, t[ti].p, t[ti].s, t[ti].s,
                                     t[ti].same) == HC_OK);
        nx = (size_t)g.B * g.H * g.W * g.C;
        ny = (size_t)g.B * g.OH * g.OW * g.C;
        x = falloc(nx);
        dx = falloc(nx);
        y = falloc(ny);
        dy = falloc(ny);
        idx = calloc(ny, sizeof *idx);
        CU_ASSERT_FATAL(idx != NULL);
        wy = dalloc(ny);
        widx = dalloc(ny);
        gi = dalloc(ny);
        wdx = dalloc(nx);
        fill_rand(x, nx, &s, -1, 1);
        fill_rand(dy, ny, &s, -1, 1);
        for (i = 0; i < nx; i++)
            dx[i] = NAN;
        for (b = 0, i = 0; b < g.B; b++)
            for (oh = 0; oh < g.OH; oh++)
                for (ow = 0; ow < g.OW; ow++)
                    for (c = 0; c < g.C; c++, i++) {
                        long best = -1;

                        for (a = 0; a < g.kh * g.kw; a++) {
                            int ih = oh * g.sh - g.pt + a / g.kw;
                            int iw = ow * g.sw - g.pl + a % g.kw;
                            long xi = (((long)b * g.H + ih) * g.W + iw) * g.C + c;

                            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W)
                                continue;
                            if (best < 0 || x[xi] > x[best])
                                best = xi;
                        }
                        wy[i] = x[best];
                        widx[i] = (double)best;
                        wdx[best] += dy[i];
                    }
        wk_be_maxpool_forward(be, &g, x, y, idx);
        wk_be_maxpool_backward(be, &g, dy, idx, dx);
        for (i = 0; i < ny; i++)
            gi[i] = idx[i];
        snprintf(what, sizeof what, "maxpool_forward case %zu", ti);
        CU_ASSERT(cmp_report(what, y, NULL, wy, ny, 0, 0));
        snprintf(what, sizeof what, "maxpool argmax case %zu", ti);
        CU_ASSERT(cmp_report(what, NULL, gi, widx, ny, 0, 0));
        snprintf(what, sizeof what, "maxpool_backward case %zu", ti);
        CU_ASSERT(cmp_report(what, dx, NULL, wdx, nx, 1e-7, 1e-6));
        free(x);
        free(dx);
        free(y);
        free(dy);
        free(idx);
        free(wy);
        free(widx);
        free(gi);
        free(wdx);
    }
    wk_backend_free(be);
}

static void test_dropout_op(void)
{
    struct wk_backend *be = cpu();
    enum { N = 20000 };
    float *x = falloc(N), *y = falloc(N), *y2 = falloc(N), *dx = falloc(N);
    const float rate = 0.3f, keep = 1.0f / (1.0f - rate);
    uint64_t s = 8;
    size_t i, dropped = 0, differ = 0;
    int mismatch = 0;

    fill_rand(x, N, &s, 0.5, 1.5);   /* never 0, so zeros mean dropped */
    wk_be_dropout_forward(be, x, y, N, rate, 1234);
    for (i = 0; i < N; i++) {
        /* the documented formula, recomputed here */
        uint64_t z = 1234 + (i + 1) * 0x9E3779B97F4A7C15ull;
        int kept;

        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        kept = (z >> 40) >= (uint64_t)(rate * 16777216.0f);
        if (kept != (y[i] != 0.0f) || (kept && y[i] != x[i] * keep))
            mismatch++;
        dropped += y[i] == 0.0f;
    }
    CU_ASSERT_EQUAL(mismatch, 0);
    printf("\n    dropout rate 0.3: dropped %zu of %d", dropped, N);
    /* 3 standard deviations of a binomial(20000, 0.3) are about 195 */
    CU_ASSERT(dropped > 6000 - 200 && dropped < 6000 + 200);
    /* backward uses the same mask and scale, in place too */
    wk_be_dropout_backward(be, x, dx, N, rate, 1234);
    CU_ASSERT(memcmp(dx, y, N * sizeof *y) == 0);
    memcpy(dx, x, N * sizeof *x);
    wk_be_dropout_backward(be, dx, dx, N, rate, 1234);
    CU_ASSERT(memcmp(dx, y, N * sizeof *y) == 0);
    /* same seed same mask; another seed another mask */
    wk_be_dropout_forward(be, x, y2, N, rate, 1234);
    CU_ASSERT(memcmp(y2, y, N * sizeof *y) == 0);
    wk_be_dropout_forward(be, x, y2, N, rate, 1235);
    for (i = 0; i < N; i++)
        differ += (y2[i] == 0.0f) != (y[i] == 0.0f);
    CU_ASSERT(differ > 1000);
    /* rate 0: identity */
    wk_be_dropout_forward(be, x, y2, N, 0.0f, 99);
    CU_ASSERT(memcmp(y2, x, N * sizeof *x) == 0);
    free(x);
    free(y);
    free(y2);
    free(dx);
    wk_backend_free(be);
}

/* ---- the network tests ---- */

/* A model from the table below, with B and the labels/targets it uses. */
typedef void (*model_fn)(struct hc_model *m);

static void m_conv_valid(struct hc_model *m)
{
    mb_begin(m, "conv_valid_s1_relu", 3, 6, 5, 2, HC_LOSS_SPARSE_CCE);
    mb_conv(m, 3, 3, 3, 1, 1, 0, HC_ACT_RELU, 1);
    mb_flatten(m);
    mb_dense(m, 4, HC_ACT_SOFTMAX, 1);
}

static void m_conv_same_s2(struct hc_model *m)
{
    mb_begin(m, "conv_same_s2_tanh_mse", 3, 7, 6, 3, HC_LOSS_MSE);
    mb_conv(m, 4, 3, 3, 2, 2, 1, HC_ACT_TANH, 1);
    mb_flatten(m);
    mb_dense(m, 3, HC_ACT_SIGMOID, 1);
}

static void m_two_convs(struct hc_model *m)
{
    mb_begin(m, "conv_same_then_valid_s2_pool", 3, 9, 8, 2,
             HC_LOSS_SPARSE_CCE);
    mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_SIGMOID, 1);
    mb_conv(m, 4, 2, 3, 2, 1, 0, HC_ACT_TANH, 1);
    mb_pool(m, 2, 2, 2, 2, 0);
    mb_flatten(m);
    mb_dense(m, 5, HC_ACT_SOFTMAX, 1);
}

static void m_conv_1x1(struct hc_model *m)
{
    mb_begin(m, "conv_1x1_no_bias", 3, 5, 5, 3, HC_LOSS_SPARSE_CCE);
    mb_conv(m, 4, 1, 1, 1, 1, 0, HC_ACT_RELU, 0);
    mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_TANH, 1);
    mb_conv(m, 2, 1, 1, 1, 1, 0, HC_ACT_LINEAR, 1);
    mb_flatten(m);
    mb_dense(m, 3, HC_ACT_SOFTMAX, 0);
}

static void m_pools(struct hc_model *m)
{
    mb_begin(m, "pools_odd_overlap_same", 3, 8, 8, 2, HC_LOSS_SPARSE_CCE);
    mb_conv(m, 3, 2, 2, 1, 1, 0, HC_ACT_RELU, 1);      /* 7×7 */
    mb_pool(m, 3, 3, 2, 2, 0);                          /* 3×3, overlapping */
    mb_pool(m, 2, 2, 2, 2, 1);                          /* 2×2, same */
    mb_flatten(m);
    mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

static void m_pool_leftover(struct hc_model *m)
{
    mb_begin(m, "pool_leftover_rows", 3, 6, 6, 1, HC_LOSS_MSE);
    mb_conv(m, 2, 2, 2, 1, 1, 0, HC_ACT_LINEAR, 1);    /* 5×5 */
    mb_pool(m, 2, 2, 2, 2, 0);                          /* 2×2, row 4 left */
    mb_conv(m, 2, 2, 2, 1, 1, 1, HC_ACT_RELU, 1);
    mb_flatten(m);
    mb_dense(m, 2, HC_ACT_LINEAR, 1);
}

static void m_mlp_dropout(struct hc_model *m)
{
    mb_begin(m, "mlp_dropout", 1, 6, 0, 0, HC_LOSS_SPARSE_CCE);
    mb_dense(m, 8, HC_ACT_RELU, 1);
    mb_dropout(m, 0.4f);
    mb_dense(m, 5, HC_ACT_TANH, 1);
    mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

static void m_activation_layers(struct hc_model *m)
{
    mb_begin(m, "activation_layers", 1, 5, 0, 0, HC_LOSS_SPARSE_CCE);
    mb_dense(m, 6, HC_ACT_LINEAR, 1);
    mb_act(m, HC_ACT_RELU);
    mb_dense(m, 4, HC_ACT_LINEAR, 1);
    mb_act(m, HC_ACT_SIGMOID);
    mb_act(m, HC_ACT_TANH);
    mb_dense(m, 3, HC_ACT_LINEAR, 1);
    mb_act(m, HC_ACT_SOFTMAX);
}

static void m_mse_softmax(struct hc_model *m)
{
    mb_begin(m, "mse_softmax_output", 1, 4, 0, 0, HC_LOSS_MSE);
    mb_dense(m, 5, HC_ACT_TANH, 1);
    mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

static void m_mse_relu_sigmoid1(struct hc_model *m)
{
    mb_begin(m, "mse_relu_sigmoid_n1", 1, 4, 0, 0, HC_LOSS_MSE);
    mb_dense(m, 6, HC_ACT_RELU, 1);
    mb_dense(m, 1, HC_ACT_SIGMOID, 1);
}

static void m_conv_softmax_channels(struct hc_model *m)
{
    mb_begin(m, "conv_softmax_channels_dropout", 3, 4, 5, 2, HC_LOSS_MSE);
    mb_dropout(m, 0.25f);
    mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_SOFTMAX, 1);
    mb_dropout(m, 0.5f);
    mb_flatten(m);
    mb_dense(m, 2, HC_ACT_LINEAR, 1);
}

static void m_reference(struct hc_model *m)
{
    mb_begin(m, "fashion_cnn", 3, 28, 28, 1, HC_LOSS_SPARSE_CCE);
    mb_conv(m, 32, 3, 3, 1, 1, 0, HC_ACT_RELU, 1);
    mb_pool(m, 2, 2, 2, 2, 0);
    mb_flatten(m);
    mb_dense(m, 10, HC_ACT_SOFTMAX, 1);
}

struct fixture {
    struct hc_model m;
    struct wk_backend *be;
    struct wk_net *net;
    int B;
    size_t N;
    float *params, *x, *targets, *grads;
    int *labels;
};

static void fx_open(struct fixture *f, model_fn fn, int B, int max_batch,
                    uint64_t seed)
{
    uint64_t s = seed;
    int i, rv;

    memset(f, 0, sizeof *f);
    fn(&f->m);
    f->be = cpu();
    rv = wk_net_new(&f->m, f->be, max_batch, &f->net);
    if (rv)
        printf("\n    wk_net_new: %s", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
    f->B = B;
    f->N = wk_net_output_size(f->net);
    CU_ASSERT_EQUAL(wk_net_input_size(f->net), shp_size(&f->m.input));
    f->params = falloc(f->m.n_params);
    f->grads = falloc(f->m.n_params);
    f->x = falloc((size_t)max_batch * shp_size(&f->m.input));
    f->targets = falloc((size_t)max_batch * f->N);
    f->labels = calloc((size_t)max_batch, sizeof *f->labels);
    CU_ASSERT_FATAL(f->labels != NULL);
    rand_params(&f->m, f->params, &s);
    fill_rand(f->x, (size_t)max_batch * shp_size(&f->m.input), &s, -1, 1);
    fill_rand(f->targets, (size_t)max_batch * f->N, &s, 0, 1);
    for (i = 0; i < max_batch; i++)
        f->labels[i] = (int)(rng_next(&s) % f->N);
}

static void fx_close(struct fixture *f)
{
    wk_net_free(f->net);
    wk_backend_free(f->be);
    free(f->params);
    free(f->grads);
    free(f->x);
    free(f->targets);
    free(f->labels);
}

/* Mean loss of the net (training forward with the dropout seed reset so
 * every call draws the same masks). */
static double net_loss(struct fixture *f, const float *params)
{
    double sum = 0;

    wk_net_set_seed(f->net, 77);
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(f->net, params, f->x, f->B, 1), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_loss(f->net, f->labels, f->targets, &sum,
                                      NULL), HC_OK);
    return sum / f->B;
}

/* After a training forward: the dropout masks as doubles for ref_run. */
static void net_masks(struct fixture *f, double **masks)
{
    int l;

    for (l = 0; l < f->m.n_layers; l++) {
        size_t n = (size_t)f->B * shp_size(&f->m.layers[l].out), i;
        uint64_t seed = wk_net_dropout_seed(f->net, l);
        float *ones, *mk;

        masks[l] = NULL;
        if (f->m.layers[l].type != HC_LAYER_DROPOUT || !seed)
            continue;
        ones = falloc(n);
        mk = falloc(n);
        for (i = 0; i < n; i++)
            ones[i] = 1.0f;
        wk_be_dropout_forward(f->be, ones, mk, n, f->m.layers[l].rate, seed);
        masks[l] = dalloc(n);
        for (i = 0; i < n; i++)
            masks[l][i] = mk[i];
        free(ones);
        free(mk);
    }
}

/* Central difference of the net's mean loss in parameter i, step h. */
static double fd_float(struct fixture *f, float *pp, size_t i, float h)
{
    float keep = pp[i], hp, hm;
    double lp, lm;

    pp[i] = keep + h;
    hp = pp[i];
    lp = net_loss(f, pp);
    pp[i] = keep - h;
    hm = pp[i];
    lm = net_loss(f, pp);
    pp[i] = keep;
    return (lp - lm) / ((double)hp - hm);
}

/*
 * The full check of one model:
 *   net output, loss and gradients vs the double reference (tight);
 *   the reference's gradients vs double central differences (n_fd_ref
 *   parameters, evenly spread; all if 0);
 *   the net's gradients vs float central differences (n_fd parameters,
 *   all if 0) and along n_dir random directions over all parameters.
 */
static void check_model(model_fn fn, int B, size_t n_fd_ref, size_t n_fd,
                        int n_dir)
{
    struct fixture f;
    double *masks[HC_MODEL_MAX_LAYERS], *P, *G, *out, *fd, *gsel, ref_loss,
        loss_mean, worst = 0;
    struct ref_batch rb;
    float *netout, *pp;
    size_t n, i, k, step, cnt, outliers = 0, worst_at = 0;
    uint64_t s = 99;
    char what[96];
    int correct, d, l, kinks = 0;

    fx_open(&f, fn, B, B, 11);
    n = f.m.n_params;
    printf("\n  model %s, %zu parameters, batch %d", f.m.name, n, B);
    wk_net_set_seed(f.net, 77);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels,
                                      f.targets, B, f.grads, &loss_mean,
                                      &correct), HC_OK);
    net_masks(&f, masks);
    rb.B = B;
    rb.x = f.x;
    rb.labels = f.labels;
    rb.targets = f.targets;
    rb.masks = masks;
    P = dalloc(n);
    G = dalloc(n);
    out = dalloc((size_t)B * f.N);
    netout = falloc((size_t)B * f.N);
    for (i = 0; i < n; i++)
        P[i] = f.params[i];
    ref_loss = ref_run(&f.m, P, &rb, G, out);
    CU_ASSERT(cmp_report("loss vs reference", NULL, &loss_mean, &ref_loss, 1,
                         1e-6, 1e-5));
    CU_ASSERT_EQUAL(wk_net_output(f.net, netout), HC_OK);
    CU_ASSERT(cmp_report("output vs reference", netout, NULL, out,
                         (size_t)B * f.N, 1e-6, 1e-4));
    CU_ASSERT(cmp_report("gradients vs reference", f.grads, NULL, G, n, 1e-6,
                         1e-3));
    if (f.m.loss == HC_LOSS_SPARSE_CCE) {
        int want = 0, b;

        for (b = 0; b < B; b++) {
            size_t j, arg = 0;

            for (j = 1; j < f.N; j++)
                if (out[b * f.N + j] > out[b * f.N + arg])
                    arg = j;
            want += (int)arg == f.labels[b];
        }
        CU_ASSERT_EQUAL(correct, want);
    }

    /* the reference itself against double central differences */
    step = n_fd_ref && n_fd_ref < n ? n / n_fd_ref : 1;
    cnt = (n + step - 1) / step;
    fd = dalloc(cnt);
    gsel = dalloc(cnt);
    for (i = 0, k = 0; i < n; i += step, k++) {
        double keep = P[i], lp, lm;

        P[i] = keep + 1e-6;
        lp = ref_run(&f.m, P, &rb, NULL, NULL);
        P[i] = keep - 1e-6;
        lm = ref_run(&f.m, P, &rb, NULL, NULL);
        P[i] = keep;
        fd[k] = (lp - lm) / 2e-6;
        gsel[k] = G[i];
    }
    snprintf(what, sizeof what, "reference vs double FD (%zu params)", cnt);
    CU_ASSERT(cmp_report(what, NULL, gsel, fd, cnt, 1e-7, 1e-5));
    free(fd);
    free(gsel);

    /*
     * The net against float central differences of its own forward, step
     * 1e-3, retried at 2.5e-4 when they disagree. With relu or max-pool a
     * kink closer to the point than the step makes the difference the mean
     * of the two one-sided slopes while the gradient is one of them; such
     * outliers are counted and allowed for 2% of the parameters (the tight
     * checks against the reference above leave no room for a real error).
     */
    for (l = 0; l < f.m.n_layers; l++)
        kinks |= f.m.layers[l].act == HC_ACT_RELU ||
                 f.m.layers[l].type == HC_LAYER_MAXPOOL2D;
    step = n_fd && n_fd < n ? n / n_fd : 1;
    cnt = (n + step - 1) / step;
    pp = falloc(n);
    memcpy(pp, f.params, n * sizeof *pp);
    for (i = 0; i < n; i += step) {
        double g = f.grads[i], e = fd_float(&f, pp, i, 1e-3f), diff;

        if (fabs(g - e) > 2e-4 + 2e-2 * fabs(e))
            e = fd_float(&f, pp, i, 2.5e-4f);
        diff = fabs(g - e);
        if (diff > 2e-4 + 2e-2 * fabs(e)) {
            outliers++;
            printf("\n      outlier: parameter %zu gradient %.6g, FD %.6g", i,
                   g, e);
            continue;
        }
        if (diff > worst) {
            worst = diff;
            worst_at = i;
        }
    }
    printf("\n    %-44s max |diff| %.3g (at %zu), %zu outliers (%zu allowed)",
           "net vs float FD", worst, worst_at, outliers,
           kinks ? cnt / 50 : 0);
    CU_ASSERT(outliers <= (kinks ? cnt / 50 : 0));

    /* directional derivatives: every parameter at once */
    for (d = 0; d < n_dir; d++) {
        float *vp = falloc(n), *vm = falloc(n);
        double dot = 0, lp, lm, fdd, dn = 0;

        for (i = 0; i < n; i++) {
            double v = urand(&s, -1, 1);

            vp[i] = (float)(f.params[i] + 1e-3 * v);
            vm[i] = (float)(f.params[i] - 1e-3 * v);
            dot += (double)f.grads[i] * ((double)vp[i] - vm[i]);
            dn += ((double)vp[i] - vm[i]) * ((double)vp[i] - vm[i]);
        }
        lp = net_loss(&f, vp);
        lm = net_loss(&f, vm);
        fdd = lp - lm;
        snprintf(what, sizeof what, "directional FD %d (|step| %.2g)", d,
                 sqrt(dn));
        CU_ASSERT(cmp_report(what, NULL, &dot, &fdd, 1, 2e-6, 2e-2));
        free(vp);
        free(vm);
    }
    for (l = 0; l < f.m.n_layers; l++)
        free(masks[l]);
    free(pp);
    free(P);
    free(G);
    free(out);
    free(netout);
    fx_close(&f);
}

static void test_grad_conv_valid(void) { check_model(m_conv_valid, 3, 0, 0, 2); }
static void test_grad_conv_same_s2(void) { check_model(m_conv_same_s2, 3, 0, 0, 2); }
static void test_grad_two_convs(void) { check_model(m_two_convs, 2, 0, 0, 2); }
static void test_grad_conv_1x1(void) { check_model(m_conv_1x1, 2, 0, 0, 2); }
static void test_grad_pools(void) { check_model(m_pools, 3, 0, 0, 2); }
static void test_grad_pool_leftover(void) { check_model(m_pool_leftover, 2, 0, 0, 2); }
static void test_grad_mlp_dropout(void) { check_model(m_mlp_dropout, 4, 0, 0, 2); }
static void test_grad_activation_layers(void) { check_model(m_activation_layers, 4, 0, 0, 2); }
static void test_grad_mse_softmax(void) { check_model(m_mse_softmax, 3, 0, 0, 2); }
static void test_grad_mse_relu_sigmoid1(void) { check_model(m_mse_relu_sigmoid1, 5, 0, 0, 2); }
static void test_grad_conv_softmax_channels(void) { check_model(m_conv_softmax_channels, 2, 0, 0, 2); }
static void test_grad_reference_model(void) { check_model(m_reference, 4, 150, 600, 4); }

/* A batch of two identical samples gives the gradient of one. */
static void test_batch_mean(void)
{
    struct fixture f;
    float *g1;
    double l1, l2, *want;
    size_t n, in, i;
    int c1, c2;

    fx_open(&f, m_two_convs, 2, 2, 21);
    n = f.m.n_params;
    in = shp_size(&f.m.input);
    memcpy(f.x + in, f.x, in * sizeof *f.x);
    f.labels[1] = f.labels[0];
    g1 = falloc(n);
    want = dalloc(n);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 1,
                                      g1, &l1, &c1), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 2,
                                      f.grads, &l2, &c2), HC_OK);
    for (i = 0; i < n; i++)
        want[i] = g1[i];
    CU_ASSERT(cmp_report("batch of 2 equal samples vs 1", f.grads, NULL, want,
                         n, 1e-7, 1e-5));
    CU_ASSERT(fabs(l1 - l2) <= 1e-6 * fabs(l1));
    CU_ASSERT_EQUAL(c2, 2 * c1);
    free(g1);
    free(want);
    fx_close(&f);
}

/* Reuse: a smaller batch after a larger one, and repeated steps, give the
 * same result as a fresh net; nothing leaks from one step to the next. */
static void test_reuse_and_smaller_batch(void)
{
    struct fixture a, b;
    float *g;
    double la, lb, *want;
    size_t n, i;

    fx_open(&a, m_pools, 5, 5, 31);
    fx_open(&b, m_pools, 2, 2, 31);
    n = a.m.n_params;
    g = falloc(n);
    want = dalloc(n);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(a.net, a.params, a.x, a.labels, NULL, 5,
                                      a.grads, &la, NULL), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(a.net, a.params, a.x, a.labels, NULL, 2,
                                      a.grads, &la, NULL), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(b.net, a.params, a.x, a.labels, NULL, 2,
                                      b.grads, &lb, NULL), HC_OK);
    CU_ASSERT(memcmp(a.grads, b.grads, n * sizeof *g) == 0);
    CU_ASSERT_EQUAL(la, lb);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(b.net, a.params, a.x, a.labels, NULL, 2,
                                      g, &lb, NULL), HC_OK);
    CU_ASSERT(memcmp(g, b.grads, n * sizeof *g) == 0);
    for (i = 0; i < n; i++)
        want[i] = b.grads[i];
    CU_ASSERT(cmp_report("smaller batch after larger", a.grads, NULL, want, n,
                         0, 0));
    free(g);
    free(want);
    fx_close(&a);
    fx_close(&b);
}

/* Inference: dropout is off, the output equals the same model without
 * dropout layers, predict returns the loss SUM and the correct count. */
static void test_predict_inference(void)
{
    struct fixture f, g;
    float *o1, *o2;
    double sum, mean, *want;
    int correct, c2;
    size_t i, no;

    fx_open(&f, m_mlp_dropout, 6, 8, 41);
    fx_open(&g, m_mlp_dropout, 6, 8, 41);
    /* g: the same model with rate 0 (no dropout at all) */
    wk_net_free(g.net);
    for (i = 0; i < (size_t)g.m.n_layers; i++)
        if (g.m.layers[i].type == HC_LAYER_DROPOUT)
            g.m.layers[i].rate = 0.0f;
    CU_ASSERT_EQUAL_FATAL(wk_net_new(&g.m, g.be, 8, &g.net), HC_OK);
    no = 6 * f.N;
    o1 = falloc(no);
    o2 = falloc(no);
    want = dalloc(no);
    CU_ASSERT_EQUAL_FATAL(wk_net_predict(f.net, f.params, f.x, f.labels, NULL,
                                         6, &sum, &correct), HC_OK);
    CU_ASSERT_EQUAL(wk_net_output(f.net, o1), HC_OK);
    CU_ASSERT_EQUAL(wk_net_dropout_seed(f.net, 1), 0);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(g.net, f.params, f.x, f.labels, NULL, 6,
                                      g.grads, &mean, &c2), HC_OK);
    CU_ASSERT_EQUAL(wk_net_output(g.net, o2), HC_OK);
    for (i = 0; i < no; i++)
        want[i] = o2[i];
    CU_ASSERT(cmp_report("inference output vs no-dropout model", o1, NULL,
                         want, no, 0, 0));
    CU_ASSERT(fabs(sum - 6 * mean) <= 1e-9 * fabs(sum));
    CU_ASSERT_EQUAL(correct, c2);
    /* a training forward does drop, and differs */
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(f.net, f.params, f.x, 6, 1), HC_OK);
    CU_ASSERT(wk_net_dropout_seed(f.net, 1) != 0);
    CU_ASSERT_EQUAL(wk_net_output(f.net, o2), HC_OK);
    CU_ASSERT(memcmp(o1, o2, no * sizeof *o1) != 0);
    free(o1);
    free(o2);
    free(want);
    fx_close(&f);
    fx_close(&g);
}

/* Dropout masks: reproducible from the seed, new at every training step. */
static void test_dropout_seeds(void)
{
    struct fixture f;
    float *g1, *g2;
    uint64_t s1, s2;
    size_t n;

    fx_open(&f, m_mlp_dropout, 8, 8, 51);
    n = f.m.n_params;
    g1 = falloc(n);
    g2 = falloc(n);
    wk_net_set_seed(f.net, 5);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 8,
                                      g1, NULL, NULL), HC_OK);
    s1 = wk_net_dropout_seed(f.net, 1);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 8,
                                      g2, NULL, NULL), HC_OK);
    s2 = wk_net_dropout_seed(f.net, 1);
    CU_ASSERT(s1 != s2);
    CU_ASSERT(memcmp(g1, g2, n * sizeof *g1) != 0);
    wk_net_set_seed(f.net, 5);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 8,
                                      g2, NULL, NULL), HC_OK);
    CU_ASSERT_EQUAL(wk_net_dropout_seed(f.net, 1), s1);
    CU_ASSERT(memcmp(g1, g2, n * sizeof *g1) == 0);
    CU_ASSERT_EQUAL(wk_net_dropout_seed(f.net, 0), 0);     /* not dropout */
    CU_ASSERT_EQUAL(wk_net_dropout_seed(f.net, 99), 0);
    free(g1);
    free(g2);
    fx_close(&f);
}

/* ---- error paths ---- */

static void e_cce_linear(struct hc_model *m)
{
    mb_begin(m, "bad", 1, 4, 0, 0, HC_LOSS_SPARSE_CCE);
    mb_dense(m, 3, HC_ACT_LINEAR, 1);
}

static void e_cce_rank3(struct hc_model *m)
{
    mb_begin(m, "bad", 3, 4, 4, 1, HC_LOSS_SPARSE_CCE);
    mb_conv(m, 2, 3, 3, 1, 1, 0, HC_ACT_SOFTMAX, 1);
}

static void e_dense_rank3(struct hc_model *m)
{
    mb_begin(m, "bad", 3, 4, 4, 1, HC_LOSS_MSE);
    mb_layer(m, HC_LAYER_DENSE, HC_ACT_LINEAR)->units = 3;
}

static void e_kernel_size(struct hc_model *m)
{
    m_conv_valid(m);
    m->vars[0].size -= 1;
    m->n_params -= 1;
}

static void e_in_shape(struct hc_model *m)
{
    m_conv_valid(m);
    m->layers[2].in.dims[0] += 1;
}

static void e_out_shape(struct hc_model *m)
{
    m_conv_valid(m);
    m->layers[0].out.dims[0] += 1;
}

static void e_dropout_rate(struct hc_model *m)
{
    mb_begin(m, "bad", 1, 4, 0, 0, HC_LOSS_MSE);
    mb_dropout(m, 1.0f);
    mb_dense(m, 3, HC_ACT_LINEAR, 1);
}

static void e_unused_var(struct hc_model *m)
{
    m_mse_softmax(m);
    mb_var(m, "ghost", "kernel", 2, 2, 2, 0, 0);
}

static void e_big_kernel(struct hc_model *m)
{
    mb_begin(m, "bad", 3, 2, 5, 1, HC_LOSS_MSE);
    mb_conv(m, 2, 3, 3, 1, 1, 0, HC_ACT_LINEAR, 1);
}

static void e_n_params(struct hc_model *m)
{
    m_mse_softmax(m);
    m->n_params += 1;
}

static void e_no_params(struct hc_model *m)
{
    mb_begin(m, "bad", 3, 2, 2, 1, HC_LOSS_MSE);
    mb_flatten(m);
}

static void e_shared_var(struct hc_model *m)
{
    mb_begin(m, "bad", 1, 3, 0, 0, HC_LOSS_MSE);
    mb_dense(m, 3, HC_ACT_LINEAR, 0);
    mb_dense(m, 3, HC_ACT_LINEAR, 0);
    m->layers[1].var_kernel = 0;
    m->n_params -= m->vars[1].size;
    m->n_vars = 1;
}

static void e_bad_input(struct hc_model *m)
{
    m_mse_softmax(m);
    m->input.rank = 2;
}

static void test_new_errors(void)
{
    static const struct {
        model_fn fn;
        int code;
        const char *msg;
    } t[] = {
        {e_cce_linear, HC_ERR_CONFIG, "needs a softmax output, but layer 0 "
                                      "(dense), the last layer, has "
                                      "activation \"linear\""},
        {e_cce_rank3, HC_ERR_CONFIG, "needs a flat output (N)"},
        {e_dense_rank3, HC_ERR_CONFIG, "dense needs a flat input, got "
                                       "(4, 4, 1); add a flatten layer"},
        {e_kernel_size, HC_ERR_MISMATCH, "kernel variable conv2d/kernel has "
                                         "53 values; the layer needs 54"},
        {e_in_shape, HC_ERR_MISMATCH, "layer 2 (dense): input shape (37) "
                                      "does not match the previous output "
                                      "(36)"},
        {e_out_shape, HC_ERR_MISMATCH, "output shape (5, 3, 3) disagrees with "
                                       "the layer's settings, which give "
                                       "(4, 3, 3)"},
        {e_dropout_rate, HC_ERR_CONFIG, "rate = 1; must be in [0, 1)"},
        {e_unused_var, HC_ERR_MISMATCH, "variable ghost/kernel belongs to no "
                                        "layer"},
        {e_big_kernel, HC_ERR_CONFIG, "window 3×3, strides 1×1 and padding "
                                      "\"valid\" do not fit the input "
                                      "(2, 5, 1)"},
        {e_n_params, HC_ERR_MISMATCH, "n_params = 44 but its variables hold "
                                      "43 values"},
        {e_no_params, HC_ERR_CONFIG, "has no layer with parameters"},
        {e_shared_var, HC_ERR_MISMATCH, "variable dense/kernel is already used "
                                        "by layer 0"},
        {e_bad_input, HC_ERR_CONFIG, "input shape (rank 2)"},
    };
    struct wk_backend *be = cpu();
    struct hc_model *m = malloc(sizeof *m);
    struct wk_net *net;
    size_t i;

    CU_ASSERT_FATAL(m != NULL);
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        int rv;

        t[i].fn(m);
        net = (struct wk_net *)1;
        rv = wk_net_new(m, be, 4, &net);
        printf("\n    case %zu: %s", i, hc_err_msg());
        CU_ASSERT_EQUAL(rv, t[i].code);
        CU_ASSERT_PTR_NULL(net);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), t[i].msg));
    }
    m_conv_valid(m);
    CU_ASSERT_EQUAL(wk_net_new(m, be, 0, &net), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "max_batch = 0"));
    CU_ASSERT_EQUAL(wk_net_new(NULL, be, 4, &net), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_net_new(m, be, INT32_MAX / 8, &net), HC_ERR_LIMIT);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "exceeds 2^31"));
    wk_net_free(NULL);
    free(m);
    wk_backend_free(be);
}

static void test_call_errors(void)
{
    struct fixture f, g;
    double sum;

    fx_open(&f, m_conv_valid, 3, 3, 61);
    CU_ASSERT_EQUAL(wk_net_loss(f.net, f.labels, NULL, &sum, NULL),
                    HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "call wk_net_forward first"));
    CU_ASSERT_EQUAL(wk_net_output(f.net, f.grads), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_net_forward(f.net, f.params, f.x, 4, 1), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "batch of 4 samples; this net "
                                                "takes 1 to 3"));
    CU_ASSERT_EQUAL(wk_net_forward(f.net, f.params, f.x, 0, 1), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_net_forward(f.net, NULL, f.x, 2, 1), HC_ERR_INVAL);
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(f.net, f.params, f.x, 3, 1), HC_OK);
    CU_ASSERT_EQUAL(wk_net_backward(f.net, f.params, f.grads), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "call wk_net_forward and then "
                                                "wk_net_loss first"));
    CU_ASSERT_EQUAL(wk_net_loss(f.net, NULL, f.targets, &sum, NULL),
                    HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "needs labels"));
    f.labels[1] = 4;
    CU_ASSERT_EQUAL(wk_net_loss(f.net, f.labels, NULL, &sum, NULL),
                    HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "label of sample 1 is 4; the "
                                                "model has 4 classes (0 to 3)"));
    f.labels[1] = -1;
    CU_ASSERT_EQUAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 3,
                                f.grads, &sum, NULL), HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "label of sample 1 is -1"));
    CU_ASSERT_EQUAL(wk_net_backward(f.net, f.params, f.grads), HC_ERR_INVAL);
    f.labels[1] = 0;
    CU_ASSERT_EQUAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 3,
                                NULL, &sum, NULL), HC_ERR_INVAL);
    fx_close(&f);

    fx_open(&g, m_mse_softmax, 2, 2, 62);
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(g.net, g.params, g.x, 2, 0), HC_OK);
    CU_ASSERT_EQUAL(wk_net_loss(g.net, g.labels, NULL, &sum, NULL),
                    HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "mse needs targets"));
    fx_close(&g);
}

/* ---- a device that is not host memory ---- */

/*
 * The CPU ops behind a table that says host_memory = 0 and checks that
 * every pointer given to an op lies in memory the backend allocated: the
 * net must then upload inputs and parameters, download results, and never
 * hand a host pointer to an op — as a CUDA backend needs. Fresh
 * allocations are filled with NaN so a read of unwritten memory shows.
 */
static const struct wk_backend_ops *dev_cpu;
static struct {
    const char *p;
    size_t n;
} dev_mem[128];
static int dev_n, dev_bad;

static void dev_chk(const void *p)
{
    int i;

    if (!p)
        return;
    for (i = 0; i < dev_n; i++)
        if ((const char *)p >= dev_mem[i].p &&
            (const char *)p < dev_mem[i].p + dev_mem[i].n)
            return;
    dev_bad++;
}

static int dev_alloc(struct wk_backend *be, size_t bytes, void **out)
{
    int rv = dev_cpu->alloc(be, bytes, out);

    if (rv)
        return rv;
    CU_ASSERT_FATAL(dev_n < 128);
    memset(*out, 0xff, bytes);
    dev_mem[dev_n].p = *out;
    dev_mem[dev_n++].n = bytes;
    return HC_OK;
}

static void dev_free(struct wk_backend *be, void *p)
{
    int i;

    for (i = 0; i < dev_n; i++)
        if (dev_mem[i].p == p)
            dev_mem[i] = dev_mem[--dev_n];
    dev_cpu->free(be, p);
}

static int dev_upload(struct wk_backend *be, void *d, const void *s, size_t n)
{
    dev_chk(d);
    return dev_cpu->upload(be, d, s, n);
}

static int dev_download(struct wk_backend *be, void *d, const void *s,
                        size_t n)
{
    dev_chk(s);
    return dev_cpu->download(be, d, s, n);
}

static int dev_copy(struct wk_backend *be, void *d, const void *s, size_t n)
{
    dev_chk(d);
    dev_chk(s);
    return dev_cpu->copy(be, d, s, n);
}

static void dev_sgemm(struct wk_backend *be, int ta, int tb, int m, int n,
                      int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc)
{
    dev_chk(a);
    dev_chk(b);
    dev_chk(c);
    dev_cpu->sgemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void dev_im2col(struct wk_backend *be, const struct wk_geom *g,
                       const float *x, float *cols)
{
    dev_chk(x);
    dev_chk(cols);
    dev_cpu->im2col(be, g, x, cols);
}

static void dev_col2im(struct wk_backend *be, const struct wk_geom *g,
                       const float *cols, float *dx)
{
    dev_chk(cols);
    dev_chk(dx);
    dev_cpu->col2im(be, g, cols, dx);
}

static void dev_act_forward(struct wk_backend *be, const float *x,
                            const float *bias, float *y, int rows, int n,
                            enum hc_act act)
{
    dev_chk(x);
    dev_chk(bias);
    dev_chk(y);
    dev_cpu->act_forward(be, x, bias, y, rows, n, act);
}

static void dev_act_backward(struct wk_backend *be, const float *y,
                             const float *dy, float *dx, int rows, int n,
                             enum hc_act act)
{
    dev_chk(y);
    dev_chk(dy);
    dev_chk(dx);
    dev_cpu->act_backward(be, y, dy, dx, rows, n, act);
}

static void dev_act_bias_backward(struct wk_backend *be, const float *y,
                                  float *dy, int rows, int n, enum hc_act act,
                                  float *db)
{
    dev_chk(y);
    dev_chk(dy);
    dev_chk(db);
    dev_cpu->act_bias_backward(be, y, dy, rows, n, act, db);
}

static void dev_xent_forward(struct wk_backend *be, const float *z,
                             const int *labels, int rows, int n, float *p,
                             float *loss, float *hit)
{
    dev_chk(z);
    dev_chk(labels);
    dev_chk(p);
    dev_chk(loss);
    dev_chk(hit);
    dev_cpu->xent_forward(be, z, labels, rows, n, p, loss, hit);
}

static void dev_xent_backward(struct wk_backend *be, const float *p,
                              const int *labels, int rows, int n, float scale,
                              float *dz)
{
    dev_chk(p);
    dev_chk(labels);
    dev_chk(dz);
    dev_cpu->xent_backward(be, p, labels, rows, n, scale, dz);
}

static void dev_mse_forward(struct wk_backend *be, const float *y,
                            const float *t, int rows, int n, float *loss,
                            float *hit)
{
    dev_chk(y);
    dev_chk(t);
    dev_chk(loss);
    dev_chk(hit);
    dev_cpu->mse_forward(be, y, t, rows, n, loss, hit);
}

static void dev_mse_backward(struct wk_backend *be, const float *y,
                             const float *t, size_t count, float scale,
                             float *dy)
{
    dev_chk(y);
    dev_chk(t);
    dev_chk(dy);
    dev_cpu->mse_backward(be, y, t, count, scale, dy);
}

static void dev_maxpool_forward(struct wk_backend *be, const struct wk_geom *g,
                                const float *x, float *y, int32_t *idx)
{
    dev_chk(x);
    dev_chk(y);
    dev_chk(idx);
    dev_cpu->maxpool_forward(be, g, x, y, idx);
}

static void dev_maxpool_backward(struct wk_backend *be,
                                 const struct wk_geom *g, const float *dy,
                                 const int32_t *idx, float *dx)
{
    dev_chk(dy);
    dev_chk(idx);
    dev_chk(dx);
    dev_cpu->maxpool_backward(be, g, dy, idx, dx);
}

static void dev_dropout_forward(struct wk_backend *be, const float *x,
                                float *y, size_t n, float rate, uint64_t seed)
{
    dev_chk(x);
    dev_chk(y);
    dev_cpu->dropout_forward(be, x, y, n, rate, seed);
}

static void dev_dropout_backward(struct wk_backend *be, const float *dy,
                                 float *dx, size_t n, float rate,
                                 uint64_t seed)
{
    dev_chk(dy);
    dev_chk(dx);
    dev_cpu->dropout_backward(be, dy, dx, n, rate, seed);
}

static void test_device_memory_path(void)
{
    static const model_fn models[] = {m_reference, m_conv_1x1, m_mlp_dropout,
                                      m_activation_layers, m_pool_leftover,
                                      m_conv_softmax_channels};
    struct wk_backend_ops ops;
    struct wk_backend dev;
    size_t mi;

    for (mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        struct fixture f;
        struct wk_net *dnet = NULL;
        float *g2, *o1, *o2;
        double l1, l2, s1, s2;
        int c1, c2, rv;

        fx_open(&f, models[mi], 3, 4, 71);
        dev_cpu = f.be->ops;
        ops = *f.be->ops;
        ops.alloc = dev_alloc;
        ops.free = dev_free;
        ops.upload = dev_upload;
        ops.download = dev_download;
        ops.copy = dev_copy;
        ops.sgemm = dev_sgemm;
        ops.im2col = dev_im2col;
        ops.col2im = dev_col2im;
        ops.act_forward = dev_act_forward;
        ops.act_backward = dev_act_backward;
        ops.act_bias_backward = dev_act_bias_backward;
        ops.xent_forward = dev_xent_forward;
        ops.xent_backward = dev_xent_backward;
        ops.mse_forward = dev_mse_forward;
        ops.mse_backward = dev_mse_backward;
        ops.maxpool_forward = dev_maxpool_forward;
        ops.maxpool_backward = dev_maxpool_backward;
        ops.dropout_forward = dev_dropout_forward;
        ops.dropout_backward = dev_dropout_backward;
        dev = *f.be;
        dev.ops = &ops;
        dev.host_memory = 0;
        dev_bad = 0;
        rv = wk_net_new(&f.m, &dev, 4, &dnet);
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        g2 = falloc(f.m.n_params);
        o1 = falloc(3 * f.N);
        o2 = falloc(3 * f.N);
        wk_net_set_seed(f.net, 3);
        wk_net_set_seed(dnet, 3);
        CU_ASSERT_EQUAL(wk_net_step(f.net, f.params, f.x, f.labels, f.targets,
                                    3, f.grads, &l1, &c1), HC_OK);
        CU_ASSERT_EQUAL(wk_net_output(f.net, o1), HC_OK);
        CU_ASSERT_EQUAL(wk_net_step(dnet, f.params, f.x, f.labels, f.targets,
                                    3, g2, &l2, &c2), HC_OK);
        CU_ASSERT_EQUAL(wk_net_output(dnet, o2), HC_OK);
        CU_ASSERT(memcmp(f.grads, g2, f.m.n_params * sizeof *g2) == 0);
        CU_ASSERT(memcmp(o1, o2, 3 * f.N * sizeof *o1) == 0);
        CU_ASSERT_EQUAL(l1, l2);
        CU_ASSERT_EQUAL(c1, c2);
        CU_ASSERT_EQUAL(wk_net_predict(f.net, f.params, f.x, f.labels,
                                       f.targets, 2, &s1, &c1), HC_OK);
        CU_ASSERT_EQUAL(wk_net_predict(dnet, f.params, f.x, f.labels,
                                       f.targets, 2, &s2, &c2), HC_OK);
        CU_ASSERT_EQUAL(s1, s2);
        CU_ASSERT_EQUAL(c1, c2);
        printf("\n    %-30s host pointers given to ops: %d", f.m.name,
               dev_bad);
        CU_ASSERT_EQUAL(dev_bad, 0);
        wk_net_free(dnet);
        CU_ASSERT_EQUAL(dev_n, 0);      /* everything freed */
        free(g2);
        free(o1);
        free(o2);
        fx_close(&f);
    }
}

void hp_test_register(void)
{
    static const struct {
        const char *name;
        CU_TestFunc fn;
    } ops[] = {
        {"geometry (Keras same/valid)", test_geom},
        {"backend create", test_backend_new},
        {"sgemm (transposes, alpha, beta, ld)", test_sgemm},
        {"im2col / col2im vs naive and adjoint", test_im2col_col2im},
        {"activations forward/backward, fused bias grad", test_activations},
        {"optional entries' defaults", test_optional_defaults},
        {"alloc, copies, fill, scale, axpy", test_blas1_and_memory},
        {"softmax + sparse CCE", test_xent},
        {"mse", test_mse},
        {"maxpool forward/backward", test_maxpool},
        {"dropout mask, scale, seeds", test_dropout_op},
    }, nets[] = {
        {"grad conv valid s1 relu + dense softmax", test_grad_conv_valid},
        {"grad conv same s2 tanh + sigmoid mse", test_grad_conv_same_s2},
        {"grad two convs (col2im) + pool", test_grad_two_convs},
        {"grad 1x1 convs, no bias", test_grad_conv_1x1},
        {"grad overlapping and same pools", test_grad_pools},
        {"grad pool with leftover rows", test_grad_pool_leftover},
        {"grad mlp with dropout", test_grad_mlp_dropout},
        {"grad activation layers, fused softmax", test_grad_activation_layers},
        {"grad mse on softmax output", test_grad_mse_softmax},
        {"grad mse relu + sigmoid n=1", test_grad_mse_relu_sigmoid1},
        {"grad conv softmax channels + dropouts", test_grad_conv_softmax_channels},
        {"grad reference model (fashion_cnn) batch 4", test_grad_reference_model},
        {"gradient is the batch mean", test_batch_mean},
        {"reuse and smaller batch", test_reuse_and_smaller_batch},
        {"predict: inference without dropout", test_predict_inference},
        {"dropout seeds per step", test_dropout_seeds},
        {"wk_net_new errors", test_new_errors},
        {"call-order and data errors", test_call_errors},
        {"device-memory path (host_memory = 0)", test_device_memory_path},
    };
    CU_pSuite s = CU_add_suite("backend_cpu", NULL, NULL);
    size_t i;

    for (i = 0; i < sizeof ops / sizeof ops[0]; i++)
        CU_add_test(s, ops[i].name, ops[i].fn);
    s = CU_add_suite("nn", NULL, NULL);
    for (i = 0; i < sizeof nets / sizeof nets[0]; i++)
        CU_add_test(s, nets[i].name, nets[i].fn);
}
