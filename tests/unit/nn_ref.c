/*
 * nn_ref.c — the double-precision reference the layer tests compare
 * against, and the helpers they share (see nn_ref.h for each contract).
 */
#include "nn_ref.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "err.h"

/* ---- random numbers, comparison, allocation ---- */

uint64_t nr_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi). */
double nr_urand(uint64_t *s, double lo, double hi)
{
    return lo + (hi - lo) * (double)(nr_rng_next(s) >> 11) * 0x1.0p-53;
}

void nr_fill_rand(float *x, size_t n, uint64_t *s, double lo, double hi)
{
    size_t i;

    for (i = 0; i < n; i++)
        x[i] = (float)nr_urand(s, lo, hi);
}

/* Compare got against want: every |got − want| ≤ atol + rtol·|want|.
 * Prints the largest difference; returns 1 when all are within. */
int nr_cmp_report(const char *what, const float *gotf, const double *gotd,
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

double *nr_dalloc(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);

    CU_ASSERT_FATAL(p != NULL);
    return p;
}

float *nr_falloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);

    CU_ASSERT_FATAL(p != NULL);
    return p;
}

struct wk_backend *nr_cpu(void)
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
    case HC_ACT_RELU6: return z < 0 ? 0 : z > 6 ? 6 : z;
    case HC_ACT_ELU: return z > 0 ? z : exp(z) - 1;
    case HC_ACT_GELU: return 0.5 * z * (1 + erf(z / sqrt(2.0)));
    case HC_ACT_SWISH: return z / (1.0 + exp(-z));
    case HC_ACT_SOFTPLUS: return log(1 + exp(z));
    case HC_ACT_HARD_SIGMOID:
        return z < -3 ? 0 : z > 3 ? 1 : (z + 3) / 6;
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
    case HC_ACT_RELU6: return z > 0 && z < 6 ? 1 : 0;
    case HC_ACT_ELU: return z > 0 ? 1 : exp(z);
    case HC_ACT_GELU:
        return 0.5 * (1 + erf(z / sqrt(2.0))) +
               z * exp(-z * z / 2) / sqrt(2 * M_PI);
    case HC_ACT_SWISH:
        s = 1.0 / (1.0 + exp(-z));
        return s + z * s * (1 - s);
    case HC_ACT_SOFTPLUS: return 1.0 / (1.0 + exp(-z));
    case HC_ACT_HARD_SIGMOID: return z > -3 && z < 3 ? 1.0 / 6 : 0;
    default: return 1;
    }
}

/* y = act(z) over rows of n (softmax per row). */
void nr_ref_act(enum hc_act a, const double *z, double *y, size_t rows,
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
void nr_ref_dact(enum hc_act a, const double *z, const double *y,
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

/* One sample's loss from the output yb (N): Keras's formula written out
 * plainly (model.h, enum hc_loss), the targets smoothed here; its
 * gradient over B samples' mean into dyb. */
static double ref_loss(const struct hc_model *m, const double *yb, int label,
                       const float *tf, int N, int B, double *dyb)
{
    const struct hc_loss_par *q = &m->loss_par;
    const double eps = 1e-7, s = q->label_smoothing;
    double t[256], loss = 0, mx, sum = 0;
    int i;

    CU_ASSERT_FATAL(N <= 256);
    for (i = 0; i < N; i++) {
        t[i] = m->loss == HC_LOSS_SPARSE_CCE ? (i == label) : tf[i];
        t[i] = t[i] * (1 - s) + s / (m->loss == HC_LOSS_BCE ? 2.0 : N);
    }
    switch (m->loss) {
    case HC_LOSS_SPARSE_CCE:
    case HC_LOSS_CCE:
        if (!q->from_logits) {          /* yb is the softmax */
            for (i = 0; i < N; i++) {
                loss -= t[i] * log(yb[i]);
                dyb[i] = -t[i] / (B * yb[i]);
            }
            return loss;
        }
        for (mx = yb[0], i = 1; i < N; i++)
            mx = yb[i] > mx ? yb[i] : mx;
        for (i = 0; i < N; i++)
            sum += exp(yb[i] - mx);
        for (i = 0; i < N; i++) {
            loss -= t[i] * (yb[i] - mx - log(sum));
            dyb[i] = (exp(yb[i] - mx) / sum - t[i]) / B;
        }
        return loss;
    case HC_LOSS_BCE:
        for (i = 0; i < N; i++) {
            double z = yb[i], p = 1 / (1 + exp(-z));

            if (!q->from_logits) {
                p = z < eps ? eps : z > 1 - eps ? 1 - eps : z;
                loss -= t[i] * log(p + eps) + (1 - t[i]) * log(1 - p + eps);
                dyb[i] = p != z ? 0
                                : ((1 - t[i]) / (1 - p + eps) -
                                   t[i] / (p + eps)) / ((double)N * B);
                continue;
            }
            loss -= t[i] * log(p) + (1 - t[i]) * log(1 - p);
            dyb[i] = (p - t[i]) / ((double)N * B);
        }
        return loss / N;
    default:                            /* MSE, MAE, Huber */
        for (i = 0; i < N; i++) {
            double e = yb[i] - t[i], a = fabs(e), d = q->delta;

            if (m->loss == HC_LOSS_MSE) {
                loss += e * e;
                dyb[i] = 2 * e / ((double)N * B);
            } else if (m->loss == HC_LOSS_MAE) {
                loss += a;
                dyb[i] = ((e > 0) - (e < 0)) / ((double)N * B);
            } else {
                loss += a <= d ? e * e / 2 : d * (a - d / 2);
                dyb[i] = (a <= d ? e : e > 0 ? d : -d) / ((double)N * B);
            }
        }
        return loss / N;
    }
}

/* The regularizers' penalty Σ over variables of l1·Σ|w| + l2·Σw², its
 * gradient added to G when not NULL. */
static double ref_penalty(const struct hc_model *m, const double *P,
                          double *G)
{
    double pen = 0;
    size_t off = 0, i;

    for (int v = 0; v < m->n_vars; v++) {
        const struct hc_var_def *d = &m->vars[v];

        for (i = off; i < off + d->size; i++) {
            pen += d->reg.l1 * fabs(P[i]) + d->reg.l2 * P[i] * P[i];
            if (G)
                G[i] += d->reg.l1 * ((P[i] > 0) - (P[i] < 0)) +
                        2 * d->reg.l2 * P[i];
        }
        off += d->size;
    }
    return pen;
}

double nr_ref_relu(const struct hc_layer_spec *s, double x, double *d)
{
    double t = s->threshold, mx = s->max_value, a = x > t ? x : 0;

    if (mx >= 0)                        /* Keras clips to [0, max_value] */
        a = a < 0 ? 0 : a > mx ? mx : a;
    if (d)
        *d = (x > t && (mx < 0 || (x > 0 && x < mx))) +
             (x < t ? s->negative_slope : 0);
    return a - s->negative_slope * (t - x > 0 ? t - x : 0);
}

/* Keras "same": pad_total = max((ceil(H/s) − 1)·s + k − H, 0). */
int nr_pad_before(int H, int k, int s, int same)
{
    int out = (H + s - 1) / s, total = (out - 1) * s + k - H;

    return same && total > 0 ? total / 2 : 0;
}

int nr_out_dim(int H, int k, int s, int same)
{
    return same ? (H + s - 1) / s : (H - k) / s + 1;
}

/* ---- the model builder ---- */

void nr_mb_begin(struct hc_model *m, const char *name, int rank, int d0,
                 int d1, int d2, enum hc_loss loss)
{
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->input.rank = rank;
    m->input.dims[0] = d0;
    m->input.dims[1] = d1;
    m->input.dims[2] = d2;
    m->n_inputs = 1;
    snprintf(m->inputs[0].name, sizeof m->inputs[0].name, "input");
    m->inputs[0].shape = m->input;
    m->loss = loss;
    m->loss_par.delta = 1;      /* Keras's huber default */
    m->seed = 7;
}

/* The node the next layer reads (nr_mb_read): INT_MIN the last one. */
static int mb_next = INT_MIN;

void nr_mb_read(int j)
{
    mb_next = j;
}

static int mb_src(const struct hc_model *m)
{
    return mb_next == INT_MIN ? m->n_layers - 1 : mb_next;
}

static struct hc_shape node_out(const struct hc_model *m, int j)
{
    return j >= 0 ? m->layers[j].out : m->inputs[-1 - j].shape;
}

static struct hc_shape mb_cur(const struct hc_model *m)
{
    return node_out(m, mb_src(m));
}

int nr_mb_var(struct hc_model *m, const char *layer, const char *what,
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

struct hc_layer_spec *nr_mb_layer(struct hc_model *m,
                                  enum hc_layer_type t, enum hc_act act)
{
    static const char *const names[HC_LAYER_COUNT] = {
        [HC_LAYER_CONV2D] = "conv2d", [HC_LAYER_MAXPOOL2D] = "max_pooling2d",
        [HC_LAYER_FLATTEN] = "flatten", [HC_LAYER_DENSE] = "dense",
        [HC_LAYER_DROPOUT] = "dropout", [HC_LAYER_ACTIVATION] = "activation",
        [HC_LAYER_ADD] = "add", [HC_LAYER_SUBTRACT] = "subtract",
        [HC_LAYER_AVERAGE] = "average", [HC_LAYER_MULTIPLY] = "multiply",
        [HC_LAYER_CONCATENATE] = "concatenate", [HC_LAYER_RELU] = "re_lu",
        [HC_LAYER_LEAKY_RELU] = "leaky_re_lu",
        [HC_LAYER_AVGPOOL2D] = "average_pooling2d",
        [HC_LAYER_GLOBALAVGPOOL2D] = "global_average_pooling2d",
        [HC_LAYER_GLOBALMAXPOOL2D] = "global_max_pooling2d",
        [HC_LAYER_ZEROPADDING2D] = "zero_padding2d",
        [HC_LAYER_RESHAPE] = "reshape",
        [HC_LAYER_DEPTHWISE_CONV2D] = "depthwise_conv2d",
        [HC_LAYER_SEPARABLE_CONV2D] = "separable_conv2d",
        [HC_LAYER_LAYER_NORMALIZATION] = "layer_normalization",
        [HC_LAYER_BATCHNORM] = "batch_normalization"};
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
    l->n_in = 1;
    l->in_from[0] = mb_src(m);          /* a chain but for nr_mb_read */
    mb_next = INT_MIN;
    m->n_layers++;
    return l;
}

static size_t var_off(const struct hc_model *m, int v);

void nr_mb_batchnorm(struct hc_model *m, int scale, int center, float eps)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_BATCHNORM,
                                          HC_ACT_LINEAR);
    int C = l->in.dims[l->in.rank - 1], mm;

    l->momentum = 0.99f;
    l->epsilon = eps;
    l->scale = scale;
    l->center = center;
    l->axis = -1;
    l->var_first = m->n_vars;
    if (scale)
        l->var_kernel = nr_mb_var(m, l->name, "gamma", 1, C, 0, 0, 0);
    if (center)
        l->var_bias = nr_mb_var(m, l->name, "beta", 1, C, 0, 0, 0);
    mm = nr_mb_var(m, l->name, "moving_mean", 1, C, 0, 0, 0);
    nr_mb_var(m, l->name, "moving_variance", 1, C, 0, 0, 0);
    m->vars[mm].moving = m->vars[mm + 1].moving = 1;
    m->vars[mm].momentum = m->vars[mm + 1].momentum = 0.99f;
    m->vars[mm].moments_of = -1;
    m->vars[mm + 1].moments_of = mm;
    l->n_var = m->n_vars - l->var_first;
}

/* Batch norm over the rows of X (R, C) by the batch's own moments: z, and
 * with G the moments for the push in the moving statistics' slots. */
static void ref_bn_forward(const struct hc_model *m,
                           const struct hc_layer_spec *s, const double *P,
                           const double *X, size_t R, double *z, double *G)
{
    int C = s->out.dims[s->out.rank - 1], mm = s->var_first + s->n_var - 2;
    const double *g = s->var_kernel >= 0 ? P + var_off(m, s->var_kernel)
                                         : NULL;
    const double *b = s->var_bias >= 0 ? P + var_off(m, s->var_bias) : NULL;

    for (int c = 0; c < C; c++) {
        double mean = 0, var = 0;

        for (size_t r = 0; r < R; r++)
            mean += X[r * C + c];
        mean /= R;
        for (size_t r = 0; r < R; r++)
            var += (X[r * C + c] - mean) * (X[r * C + c] - mean);
        var /= R;
        for (size_t r = 0; r < R; r++)
            z[r * C + c] = (g ? g[c] : 1) * (X[r * C + c] - mean) /
                           sqrt(var + s->epsilon) + (b ? b[c] : 0);
        if (G) {
            G[var_off(m, mm) + c] = mean;
            G[var_off(m, mm + 1) + c] = var + mean * mean;
        }
    }
}

/* Its backward, by the chain rule through the mean and the variance. */
static void ref_bn_backward(const struct hc_model *m,
                            const struct hc_layer_spec *s, const double *P,
                            const double *X, const double *dz, size_t R,
                            double *G, double *dx)
{
    int C = s->out.dims[s->out.rank - 1];
    const double *g = s->var_kernel >= 0 ? P + var_off(m, s->var_kernel)
                                         : NULL;
    double *dg = s->var_kernel >= 0 ? G + var_off(m, s->var_kernel) : NULL;
    double *db = s->var_bias >= 0 ? G + var_off(m, s->var_bias) : NULL;

    for (int c = 0; c < C; c++) {
        double mean = 0, var = 0, inv, dvar = 0, dmean = 0, gc = g ? g[c] : 1;

        for (size_t r = 0; r < R; r++)
            mean += X[r * C + c];
        mean /= R;
        for (size_t r = 0; r < R; r++)
            var += (X[r * C + c] - mean) * (X[r * C + c] - mean);
        var /= R;
        inv = 1 / sqrt(var + s->epsilon);
        for (size_t r = 0; r < R; r++) {
            double xh = (X[r * C + c] - mean) * inv, d = dz[r * C + c];

            if (dg)
                dg[c] += d * xh;
            if (db)
                db[c] += d;
            /* x̂ = (x − μ)·(σ² + ε)^(−½): ∂/∂σ², ∂/∂μ directly */
            dvar += d * gc * (X[r * C + c] - mean) * -0.5 * inv * inv * inv;
            dmean += -d * gc * inv;
        }
        /* σ² depends on μ too, but Σ(x − μ) = 0 cancels it */
        for (size_t r = 0; r < R; r++)
            dx[r * C + c] = dz[r * C + c] * gc * inv +
                            dvar * 2 * (X[r * C + c] - mean) / R + dmean / R;
    }
}

/* A window layer's settings and output's height and width (conv2d,
 * depthwise_conv2d). */
static void mb_window(struct hc_layer_spec *l, int kh, int kw, int sh,
                      int sw, int same, int use_bias)
{
    l->kh = kh;
    l->kw = kw;
    l->sh = sh;
    l->sw = sw;
    l->same = same;
    l->use_bias = use_bias;
    l->out.dims[0] = nr_out_dim(l->in.dims[0], kh, sh, same);
    l->out.dims[1] = nr_out_dim(l->in.dims[1], kw, sw, same);
}

void nr_mb_conv(struct hc_model *m, int F, int kh, int kw, int sh, int sw,
                int same, enum hc_act act, int use_bias)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_CONV2D, act);
    int C = l->in.dims[2];

    l->filters = F;
    mb_window(l, kh, kw, sh, sw, same, use_bias);
    l->out.dims[2] = F;
    l->var_kernel = nr_mb_var(m, l->name, "kernel", 4, kh, kw, C, F);
    if (use_bias)
        l->var_bias = nr_mb_var(m, l->name, "bias", 1, F, 0, 0, 0);
}

void nr_mb_dwconv(struct hc_model *m, int dm, int kh, int kw, int sh, int sw,
                  int same, enum hc_act act, int use_bias)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_DEPTHWISE_CONV2D, act);
    int C = l->in.dims[2];

    l->depth_multiplier = dm;
    mb_window(l, kh, kw, sh, sw, same, use_bias);
    l->out.dims[2] = C * dm;
    l->var_kernel = nr_mb_var(m, l->name, "depthwise_kernel", 4, kh, kw, C,
                              dm);
    if (use_bias)
        l->var_bias = nr_mb_var(m, l->name, "bias", 1, C * dm, 0, 0, 0);
}

void nr_mb_sepconv(struct hc_model *m, int F, int dm, int kh, int kw,
                   int sh, int sw, int same, enum hc_act act, int use_bias)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_SEPARABLE_CONV2D, act);
    int C = l->in.dims[2];

    l->filters = F;
    l->depth_multiplier = dm;
    mb_window(l, kh, kw, sh, sw, same, use_bias);
    l->out.dims[2] = F;
    l->var_first = l->var_kernel =
        nr_mb_var(m, l->name, "depthwise_kernel", 4, kh, kw, C, dm);
    nr_mb_var(m, l->name, "pointwise_kernel", 4, 1, 1, C * dm, F);
    if (use_bias)
        l->var_bias = nr_mb_var(m, l->name, "bias", 1, F, 0, 0, 0);
    l->n_var = 2 + use_bias;
}

void nr_mb_layernorm(struct hc_model *m, float epsilon, int scale,
                     int center)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_LAYER_NORMALIZATION,
                                          HC_ACT_LINEAR);
    int n = l->in.dims[l->in.rank - 1];

    l->axis = -1;
    l->epsilon = epsilon;
    l->scale = scale;
    l->center = center;
    l->use_bias = 0;
    if (scale)
        l->var_first = l->var_kernel = nr_mb_var(m, l->name, "gamma", 1, n,
                                                 0, 0, 0);
    if (center)
        l->var_bias = nr_mb_var(m, l->name, "beta", 1, n, 0, 0, 0);
    if (!scale && center)
        l->var_first = l->var_bias;
    l->n_var = scale + center;
}

int nr_mb_input(struct hc_model *m, const char *name, int rank, int d0,
                int d1, int d2)
{
    struct hc_model_input *in = &m->inputs[m->n_inputs];

    snprintf(in->name, sizeof in->name, "%s", name);
    in->shape.rank = rank;
    in->shape.dims[0] = d0;
    in->shape.dims[1] = d1;
    in->shape.dims[2] = d2;
    return -1 - m->n_inputs++;
}

/* A pool of type t (maxpool2d, avgpool2d) after the last layer. */
static void mb_pool(struct hc_model *m, enum hc_layer_type t, int ph, int pw,
                    int sh, int sw, int same)
{
    struct hc_layer_spec *l = nr_mb_layer(m, t, HC_ACT_LINEAR);

    l->ph = ph;
    l->pw = pw;
    l->sh = sh;
    l->sw = sw;
    l->same = same;
    l->out.dims[0] = nr_out_dim(l->in.dims[0], ph, sh, same);
    l->out.dims[1] = nr_out_dim(l->in.dims[1], pw, sw, same);
}

void nr_mb_pool(struct hc_model *m, int ph, int pw, int sh, int sw,
                int same)
{
    mb_pool(m, HC_LAYER_MAXPOOL2D, ph, pw, sh, sw, same);
}

void nr_mb_avgpool(struct hc_model *m, int ph, int pw, int sh, int sw,
                   int same)
{
    mb_pool(m, HC_LAYER_AVGPOOL2D, ph, pw, sh, sw, same);
}

void nr_mb_global(struct hc_model *m, enum hc_layer_type t)
{
    struct hc_layer_spec *l = nr_mb_layer(m, t, HC_ACT_LINEAR);

    l->out.rank = 1;
    l->out.dims[0] = l->in.dims[2];
    l->out.dims[1] = l->out.dims[2] = 0;
}

void nr_mb_zeropad(struct hc_model *m, int top, int bottom, int left,
                   int right)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_ZEROPADDING2D,
                                          HC_ACT_LINEAR);

    l->pad[0] = top;
    l->pad[1] = bottom;
    l->pad[2] = left;
    l->pad[3] = right;
    l->out.dims[0] += top + bottom;
    l->out.dims[1] += left + right;
}

void nr_mb_reshape(struct hc_model *m, int rank, int d0, int d1, int d2)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_RESHAPE, HC_ACT_LINEAR);

    l->out = (struct hc_shape){rank, {d0, d1, d2}};
    l->target = l->out;
}

void nr_mb_flatten(struct hc_model *m)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_FLATTEN, HC_ACT_LINEAR);

    l->out.rank = 1;
    l->out.dims[0] = l->in.dims[0] * l->in.dims[1] * l->in.dims[2];
    l->out.dims[1] = l->out.dims[2] = 0;
}

void nr_mb_dense(struct hc_model *m, int units, enum hc_act act,
                 int use_bias)
{
    struct hc_layer_spec *l = nr_mb_layer(m, HC_LAYER_DENSE, act);

    l->units = units;
    l->use_bias = use_bias;
    l->out.dims[0] = units;
    l->var_kernel = nr_mb_var(m, l->name, "kernel", 2, l->in.dims[0], units,
                              0, 0);
    if (use_bias)
        l->var_bias = nr_mb_var(m, l->name, "bias", 1, units, 0, 0, 0);
    if (act == HC_ACT_SOFTMAX)
        m->n_classes = units;
}

void nr_mb_dropout(struct hc_model *m, float rate)
{
    nr_mb_layer(m, HC_LAYER_DROPOUT, HC_ACT_LINEAR)->rate = rate;
}

void nr_mb_act(struct hc_model *m, enum hc_act act)
{
    nr_mb_layer(m, HC_LAYER_ACTIVATION, act);
}

void nr_mb_merge(struct hc_model *m, enum hc_layer_type t, int axis, int n,
                 const int *src)
{
    struct hc_layer_spec *l;
    int k, ax;

    nr_mb_read(src[0]);
    l = nr_mb_layer(m, t, HC_ACT_LINEAR);
    l->n_in = n;
    l->axis = axis;
    for (k = 0; k < n; k++)
        l->in_from[k] = src[k];
    if (t != HC_LAYER_CONCATENATE)
        return;
    ax = axis < 0 ? l->in.rank + axis : axis - 1;
    l->out.dims[ax] = 0;
    for (k = 0; k < n; k++)
        l->out.dims[ax] += node_out(m, src[k]).dims[ax];
}

void nr_mb_relu(struct hc_model *m, enum hc_layer_type t, float max_value,
                float slope, float threshold)
{
    struct hc_layer_spec *l = nr_mb_layer(m, t, HC_ACT_LINEAR);

    l->max_value = max_value;
    l->negative_slope = slope;
    l->threshold = threshold;
}

size_t nr_shp_size(const struct hc_shape *s)
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
void nr_rand_params(const struct hc_model *m, float *p, uint64_t *s)
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
        nr_fill_rand(p + var_off(m, v), d->size, s, -a, a);
    }
}

/* ---- the reference network in double ---- */

/*
 * Mean loss of the batch with parameters P; when G is not NULL also the
 * gradient (n_params). out (B, N) receives the network output if not NULL.
 * Every layer is computed by the plainest loops, from the definition.
 */
/* A merge, plainly: each input's weight (add, subtract, average), or for
 * concatenate the position of input k's element e (of a sample) in the
 * output's sample. */
static double merge_coef(const struct hc_layer_spec *s, int k)
{
    if (s->type == HC_LAYER_SUBTRACT)
        return k ? -1.0 : 1.0;
    if (s->type == HC_LAYER_AVERAGE)
        return 1.0 / s->n_in;
    return 1.0;
}

static size_t concat_at(const struct hc_model *m,
                        const struct hc_layer_spec *s, int k, size_t e)
{
    struct hc_shape in = node_out(m, s->in_from[k]);
    int ax = s->axis < 0 ? in.rank + s->axis : s->axis - 1, before = 0;
    size_t inner = 1, o, r;

    for (int d = ax + 1; d < in.rank; d++)
        inner *= (size_t)in.dims[d];
    for (int j = 0; j < k; j++)
        before += node_out(m, s->in_from[j]).dims[ax];
    o = e / (inner * (size_t)in.dims[ax]);          /* before the axis */
    r = e % (inner * (size_t)in.dims[ax]);          /* the axis and after */
    return o * inner * (size_t)s->out.dims[ax] + before * inner + r;
}

/* Node j's values: layer j's output y[j], or (j < 0) input −1 − j. */
static const double *ref_node(int j, double *const *y, double *const *xin)
{
    return j >= 0 ? y[j] : xin[-1 - j];
}

/* The product of the inputs of s but input `skip` (-1: all) at element
 * i of the batch. */
static double product(const struct hc_layer_spec *s, double *const *y,
                      double *const *xin, size_t i, int skip)
{
    double p = 1;

    for (int k = 0; k < s->n_in; k++)
        if (k != skip)
            p *= ref_node(s->in_from[k], y, xin)[i];
    return p;
}

static void merge_forward(const struct hc_model *m,
                          const struct hc_layer_spec *s, double *const *y,
                          double *const *xin, int B, double *z)
{
    size_t on = nr_shp_size(&s->out);

    if (s->type == HC_LAYER_MULTIPLY) {
        for (size_t i = 0; i < (size_t)B * on; i++)
            z[i] = product(s, y, xin, i, -1);
        return;
    }

    for (int k = 0; k < s->n_in; k++) {
        const double *X = ref_node(s->in_from[k], y, xin);
        struct hc_shape in = node_out(m, s->in_from[k]);
        size_t n = nr_shp_size(&in);

        for (int b = 0; b < B; b++)
            for (size_t e = 0; e < n; e++) {
                if (s->type == HC_LAYER_CONCATENATE)
                    z[b * on + concat_at(m, s, k, e)] = X[b * n + e];
                else
                    z[b * on + e] += merge_coef(s, k) * X[b * n + e];
            }
    }
}

static void merge_backward(const struct hc_model *m,
                           const struct hc_layer_spec *s, const double *dz,
                           int B, double *const *gy, double *const *y,
                           double *const *xin)
{
    size_t on = nr_shp_size(&s->out);

    for (int k = 0; k < s->n_in; k++) {
        struct hc_shape in = node_out(m, s->in_from[k]);
        size_t n = nr_shp_size(&in);

        if (s->in_from[k] < 0)
            continue;
        for (int b = 0; b < B; b++)
            for (size_t e = 0; e < n; e++)
                gy[s->in_from[k]][b * n + e] +=
                    s->type == HC_LAYER_CONCATENATE
                        ? dz[b * on + concat_at(m, s, k, e)]
                    : s->type == HC_LAYER_MULTIPLY
                        ? dz[b * on + e] * product(s, y, xin, b * on + e, k)
                        : merge_coef(s, k) * dz[b * on + e];
    }
}

/* A window layer's geometry in the reference: conv2d, the pools (a
 * global pool is one valid window of the whole image). 0 for others. */
struct ref_win {
    int kind;                   /* 0 none, 1 conv, 2 max, 3 average,
                                 * 4 depthwise conv (output f reads channel
                                 * f / dm, its kernel column is f) */
    int H, W, C, OH, OW, F, kh, kw, sh, sw, pt, pl;
};

static struct ref_win ref_win(const struct hc_layer_spec *s)
{
    struct ref_win w = {0};
    int global = s->type == HC_LAYER_GLOBALAVGPOOL2D ||
                 s->type == HC_LAYER_GLOBALMAXPOOL2D;

    w.kind = s->type == HC_LAYER_CONV2D ? 1
           : s->type == HC_LAYER_MAXPOOL2D ||
                     s->type == HC_LAYER_GLOBALMAXPOOL2D ? 2
           : s->type == HC_LAYER_AVGPOOL2D ||
                     s->type == HC_LAYER_GLOBALAVGPOOL2D ? 3
           : s->type == HC_LAYER_DEPTHWISE_CONV2D ? 4 : 0;
    if (!w.kind)
        return w;
    w.H = s->in.dims[0];
    w.W = s->in.dims[1];
    w.C = s->in.dims[2];
    w.OH = global ? 1 : s->out.dims[0];
    w.OW = global ? 1 : s->out.dims[1];
    w.F = global ? s->out.dims[0] : s->out.dims[2];
    w.kh = global ? w.H : w.kind == 1 || w.kind == 4 ? s->kh : s->ph;
    w.kw = global ? w.W : w.kind == 1 || w.kind == 4 ? s->kw : s->pw;
    w.sh = global ? 1 : s->sh;
    w.sw = global ? 1 : s->sw;
    w.pt = nr_pad_before(w.H, w.kh, w.sh, s->same);
    w.pl = nr_pad_before(w.W, w.kw, w.sw, s->same);
    return w;
}

/* Cells of window (oh, ow) inside the image: an average's divisor. */
static int ref_cells(const struct ref_win *w, int oh, int ow)
{
    int n = 0;

    for (int a = 0; a < w->kh * w->kw; a++) {
        int ih = oh * w->sh - w->pt + a / w->kw;
        int iw = ow * w->sw - w->pl + a % w->kw;

        n += ih >= 0 && ih < w->H && iw >= 0 && iw < w->W;
    }
    return n;
}

/* zeropadding2d: element o of the output (B, OH, OW, C) reads input
 * element *xi, or the padding (returns 0). */
static int ref_pad_at(const struct hc_layer_spec *s, size_t o, size_t *xi)
{
    int C = s->in.dims[2], H = s->in.dims[0], W = s->in.dims[1];
    int OH = s->out.dims[0], OW = s->out.dims[1];
    size_t t = o / C;
    int c = (int)(o % C), ow = (int)(t % OW), oh = (int)(t / OW % OH);
    int b = (int)(t / OW / OH), ih = oh - s->pad[0], iw = ow - s->pad[2];

    if (ih < 0 || ih >= H || iw < 0 || iw >= W)
        return 0;
    *xi = (((size_t)b * H + ih) * W + iw) * C + c;
    return 1;
}

/* separable_conv2d in the reference: the depthwise step into mid (B,
 * OH, OW, C·dm), then the pointwise step and the bias into z (B, OH, OW,
 * F). With dz given instead (backward): the gradients of the bias,
 * both kernels and the input (dx), from mid. */
static void ref_separable(const struct hc_layer_spec *s, int B,
                          const double *X, const double *DW,
                          const double *PW, const double *bias, double *mid,
                          double *z, const double *dz, double *dDW,
                          double *dPW, double *dB, double *dx)
{
    const int H = s->in.dims[0], Wd = s->in.dims[1], C = s->in.dims[2];
    const int OH = s->out.dims[0], OW = s->out.dims[1], F = s->out.dims[2];
    const int dm = s->depth_multiplier, K = C * dm;
    const int pt = nr_pad_before(H, s->kh, s->sh, s->same);
    const int pl = nr_pad_before(Wd, s->kw, s->sw, s->same);
    double *dmid = nr_dalloc(K);

    for (int b = 0; b < B; b++)
        for (int oh = 0; oh < OH; oh++)
            for (int ow = 0; ow < OW; ow++) {
                size_t pix = ((size_t)b * OH + oh) * OW + ow;
                double *mr = mid + pix * K;

                if (!dz) {
                    for (int k = 0; k < K; k++) {
                        double acc = 0;

                        for (int i = 0; i < s->kh; i++)
                            for (int j = 0; j < s->kw; j++) {
                                int ih = oh * s->sh - pt + i;
                                int iw = ow * s->sw - pl + j;

                                if (ih < 0 || ih >= H || iw < 0 || iw >= Wd)
                                    continue;
                                acc += X[(((size_t)b * H + ih) * Wd + iw) * C +
                                         k / dm] *
                                       DW[((size_t)i * s->kw + j) * K + k];
                            }
                        mr[k] = acc;
                    }
                    for (int f = 0; f < F; f++) {
                        double acc = bias ? bias[f] : 0;

                        for (int k = 0; k < K; k++)
                            acc += mr[k] * PW[(size_t)k * F + f];
                        z[pix * F + f] = acc;
                    }
                    continue;
                }
                for (int k = 0; k < K; k++) {
                    dmid[k] = 0;
                    for (int f = 0; f < F; f++) {
                        dmid[k] += dz[pix * F + f] * PW[(size_t)k * F + f];
                        dPW[(size_t)k * F + f] += mr[k] * dz[pix * F + f];
                    }
                }
                for (int f = 0; dB && f < F; f++)
                    dB[f] += dz[pix * F + f];
                for (int k = 0; k < K; k++)
                    for (int i = 0; i < s->kh; i++)
                        for (int j = 0; j < s->kw; j++) {
                            int ih = oh * s->sh - pt + i;
                            int iw = ow * s->sw - pl + j;
                            size_t xi, wi;

                            if (ih < 0 || ih >= H || iw < 0 || iw >= Wd)
                                continue;
                            xi = (((size_t)b * H + ih) * Wd + iw) * C + k / dm;
                            wi = ((size_t)i * s->kw + j) * K + k;
                            dDW[wi] += X[xi] * dmid[k];
                            dx[xi] += DW[wi] * dmid[k];
                        }
            }
    free(dmid);
}

/* layer_normalization in the reference, rows of n: z = x̂·γ + β with
 * x̂ = (x − μ)/sqrt(σ² + ε). Backward (dz given): γ's and β's gradients
 * and dx through the Jacobian ∂x̂_j/∂x_i = (δ_ij − 1/n − x̂_i·x̂_j/n) /
 * sqrt(σ² + ε), summed whole. */
static void ref_layernorm(const struct hc_layer_spec *s, size_t rows,
                          const double *X, const double *gamma,
                          const double *beta, double *z, const double *dz,
                          double *dG, double *dBeta, double *dx)
{
    const int n = s->in.dims[s->in.rank - 1];
    double *xh = nr_dalloc((size_t)n);

    for (size_t r = 0; r < rows; r++) {
        const double *xr = X + r * n;
        double mu = 0, var = 0, rs;

        for (int j = 0; j < n; j++)
            mu += xr[j] / n;
        for (int j = 0; j < n; j++)
            var += (xr[j] - mu) * (xr[j] - mu) / n;
        rs = 1 / sqrt(var + s->epsilon);
        for (int j = 0; j < n; j++)
            xh[j] = (xr[j] - mu) * rs;
        if (!dz) {
            for (int j = 0; j < n; j++)
                z[r * n + j] = xh[j] * (gamma ? gamma[j] : 1) +
                               (beta ? beta[j] : 0);
            continue;
        }
        for (int j = 0; j < n; j++) {
            if (dG)
                dG[j] += dz[r * n + j] * xh[j];
            if (dBeta)
                dBeta[j] += dz[r * n + j];
        }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                dx[r * n + i] += dz[r * n + j] * (gamma ? gamma[j] : 1) *
                                 ((i == j) - 1.0 / n - xh[i] * xh[j] / n) * rs;
    }
    free(xh);
}

double nr_ref_run(const struct hc_model *m, const double *P,
                  const struct nr_batch *rb, double *G, double *out)
{
    const int B = rb->B, L = m->n_layers;
    double *z[HC_MODEL_MAX_LAYERS], *y[HC_MODEL_MAX_LAYERS];
    double *gy[HC_MODEL_MAX_LAYERS] = {NULL};
    int *arg[HC_MODEL_MAX_LAYERS];
    double *xin[HC_MODEL_MAX_INPUTS] = {NULL}, *mid[HC_MODEL_MAX_LAYERS];
    size_t in_n = 0, N, i;
    double *dy, *dx, loss = 0;
    int l, b;

    /* Each input (B, its size) from the samples' rows (nn.h). */
    for (int q = 0; q < m->n_inputs; q++)
        in_n += nr_shp_size(&m->inputs[q].shape);
    for (int q = 0, off = 0; q < m->n_inputs; q++) {
        size_t n = nr_shp_size(&m->inputs[q].shape);

        xin[q] = nr_dalloc(B * n);
        for (b = 0; b < B; b++)
            for (i = 0; i < n; i++)
                xin[q][b * n + i] = rb->x[b * in_n + off + i];
        off += (int)n;
    }
    for (l = 0; l < L; l++) {
        const struct hc_layer_spec *s = &m->layers[l];
        const double *X = ref_node(s->in_from[0], y, xin);
        size_t on = nr_shp_size(&s->out), inn = nr_shp_size(&s->in);
        const double *W = s->var_kernel >= 0 ? P + var_off(m, s->var_kernel)
                                             : NULL;
        const double *bias = s->var_bias >= 0 ? P + var_off(m, s->var_bias)
                                              : NULL;

        z[l] = nr_dalloc(B * on);
        y[l] = nr_dalloc(B * on);
        mid[l] = NULL;
        arg[l] = calloc(B * on, sizeof(int));
        CU_ASSERT_FATAL(arg[l] != NULL);
        if (ref_win(s).kind) {
            struct ref_win w = ref_win(s);
            int H = w.H, Wd = w.W, C = w.C, OH = w.OH, OW = w.OW, F = w.F;
            int conv = w.kind == 1 || w.kind == 4, dwc = w.kind == 4;
            int kh = w.kh, kw = w.kw, pt = w.pt, pl = w.pl;
            int oh, ow, f, a, c, bb;

            for (bb = 0; bb < B; bb++)
                for (oh = 0; oh < OH; oh++)
                    for (ow = 0; ow < OW; ow++)
                        for (f = 0; f < F; f++) {
                            size_t o = (((size_t)bb * OH + oh) * OW + ow) * F + f;
                            double acc = conv && bias ? bias[f] : 0;
                            int best = -1;

                            for (a = 0; a < kh * kw; a++) {
                                int ih = oh * w.sh - pt + a / kw;
                                int iw = ow * w.sw - pl + a % kw;

                                if (ih < 0 || ih >= H || iw < 0 || iw >= Wd)
                                    continue;
                                for (c = 0; c < C; c++) {
                                    size_t xi = (((size_t)bb * H + ih) * Wd + iw) * C + c;

                                    if (dwc && c != f / (F / C))
                                        continue;
                                    if (dwc)
                                        acc += X[xi] * W[(size_t)a * F + f];
                                    else if (conv)
                                        acc += X[xi] * W[((size_t)a * C + c) * F + f];
                                    else if (c == f && w.kind == 3)
                                        acc += X[xi];
                                    else if (c == f &&
                                             (best < 0 || X[xi] > X[best]))
                                        best = (int)xi;
                                }
                            }
                            if (conv) {
                                z[l][o] = acc;
                            } else if (w.kind == 3) {
                                z[l][o] = acc / ref_cells(&w, oh, ow);
                            } else {
                                z[l][o] = X[best];
                                arg[l][o] = best;
                            }
                        }
        } else if (s->type == HC_LAYER_SEPARABLE_CONV2D) {
            mid[l] = nr_dalloc((size_t)B * s->out.dims[0] * s->out.dims[1] *
                               s->in.dims[2] * s->depth_multiplier);
            ref_separable(s, B, X, W, P + var_off(m, s->var_first + 1),
                          bias, mid[l], z[l], NULL, NULL, NULL, NULL, NULL);
        } else if (s->type == HC_LAYER_LAYER_NORMALIZATION) {
            ref_layernorm(s, B * on / s->out.dims[s->out.rank - 1], X, W,
                          bias, z[l], NULL, NULL, NULL, NULL);
        } else if (s->type == HC_LAYER_ZEROPADDING2D) {
            size_t xi;

            for (i = 0; i < B * on; i++)
                z[l][i] = ref_pad_at(s, i, &xi) ? X[xi] : 0;
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
        } else if (s->n_in > 1) {
            merge_forward(m, s, y, xin, B, z[l]);
        } else if (s->type == HC_LAYER_BATCHNORM) {
            ref_bn_forward(m, s, P, X,
                           B * on / s->out.dims[s->out.rank - 1], z[l], G);
        } else {
            memcpy(z[l], X, B * on * sizeof(double));
        }
        if (s->type == HC_LAYER_CONV2D || s->type == HC_LAYER_DENSE ||
            s->type == HC_LAYER_DEPTHWISE_CONV2D ||
            s->type == HC_LAYER_SEPARABLE_CONV2D ||
            s->type == HC_LAYER_ACTIVATION) {
            int n = s->out.rank == 3 ? s->out.dims[2] : s->out.dims[0];

            nr_ref_act(s->act, z[l], y[l], B * on / n, n);
        } else if (s->type == HC_LAYER_RELU ||
                   s->type == HC_LAYER_LEAKY_RELU) {
            for (i = 0; i < B * on; i++)
                y[l][i] = nr_ref_relu(s, z[l][i], NULL);
        } else {
            memcpy(y[l], z[l], B * on * sizeof(double));
        }
    }
    N = nr_shp_size(&m->layers[L - 1].out);
    dy = nr_dalloc(B * N);
    for (b = 0; b < B; b++)
        loss += ref_loss(m, y[L - 1] + b * N, rb->labels[b],
                         rb->targets + b * N, (int)N, B, dy + b * N);
    if (out)
        memcpy(out, y[L - 1], B * N * sizeof(double));
    for (l = 0; l < L; l++)
        gy[l] = l == L - 1 ? dy : nr_dalloc(B * nr_shp_size(&m->layers[l].out));
    for (l = L - 1; G && l >= 0; l--) {
        const struct hc_layer_spec *s = &m->layers[l];
        const double *X = ref_node(s->in_from[0], y, xin);
        size_t on = nr_shp_size(&s->out), inn = nr_shp_size(&s->in);
        const double *W = s->var_kernel >= 0 ? P + var_off(m, s->var_kernel)
                                             : NULL;
        double *dW = s->var_kernel >= 0 ? G + var_off(m, s->var_kernel) : NULL;
        double *dB = s->var_bias >= 0 ? G + var_off(m, s->var_bias) : NULL;
        double *dz = nr_dalloc(B * on);

        dy = gy[l];
        dx = nr_dalloc(B * inn);
        if (s->type == HC_LAYER_CONV2D || s->type == HC_LAYER_DENSE ||
            s->type == HC_LAYER_DEPTHWISE_CONV2D ||
            s->type == HC_LAYER_SEPARABLE_CONV2D ||
            s->type == HC_LAYER_ACTIVATION) {
            int n = s->out.rank == 3 ? s->out.dims[2] : s->out.dims[0];

            nr_ref_dact(s->act, z[l], y[l], dy, dz, B * on / n, n);
        } else {
            memcpy(dz, dy, B * on * sizeof(double));
        }
        if (ref_win(s).kind) {
            struct ref_win w = ref_win(s);
            int H = w.H, Wd = w.W, C = w.C, OH = w.OH, OW = w.OW, F = w.F;
            int conv = w.kind == 1 || w.kind == 4, dwc = w.kind == 4;
            int kh = w.kh, kw = w.kw, pt = w.pt, pl = w.pl;
            int oh, ow, f, a, c, bb;

            for (bb = 0; bb < B; bb++)
                for (oh = 0; oh < OH; oh++)
                    for (ow = 0; ow < OW; ow++)
                        for (f = 0; f < F; f++) {
                            size_t o = (((size_t)bb * OH + oh) * OW + ow) * F + f;

                            if (w.kind == 2) {
                                dx[arg[l][o]] += dz[o];
                                continue;
                            }
                            if (conv && dB)
                                dB[f] += dz[o];
                            for (a = 0; a < kh * kw; a++) {
                                int ih = oh * w.sh - pt + a / kw;
                                int iw = ow * w.sw - pl + a % kw;

                                if (ih < 0 || ih >= H || iw < 0 || iw >= Wd)
                                    continue;
                                for (c = 0; c < C; c++) {
                                    size_t xi = (((size_t)bb * H + ih) * Wd + iw) * C + c;
                                    size_t wi = dwc ? (size_t)a * F + f
                                                    : ((size_t)a * C + c) * F + f;

                                    if (dwc && c != f / (F / C))
                                        continue;
                                    if (!conv) {
                                        if (c == f)
                                            dx[xi] += dz[o] / ref_cells(&w, oh, ow);
                                        continue;
                                    }
                                    dW[wi] += dz[o] * X[xi];
                                    dx[xi] += dz[o] * W[wi];
                                }
                            }
                        }
        } else if (s->type == HC_LAYER_SEPARABLE_CONV2D) {
            size_t pv = var_off(m, s->var_first + 1);

            ref_separable(s, B, X, W, P + pv, NULL, mid[l], NULL, dz, dW,
                          G + pv, dB, dx);
        } else if (s->type == HC_LAYER_LAYER_NORMALIZATION) {
            ref_layernorm(s, B * on / s->out.dims[s->out.rank - 1], X, W,
                          NULL, NULL, dz, dW, dB, dx);
        } else if (s->type == HC_LAYER_ZEROPADDING2D) {
            size_t xi;

            for (i = 0; i < B * on; i++)
                if (ref_pad_at(s, i, &xi))
                    dx[xi] = dz[i];
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
        } else if (s->n_in > 1) {
            merge_backward(m, s, dz, B, gy, y, xin);
        } else if (s->type == HC_LAYER_BATCHNORM) {
            ref_bn_backward(m, s, P, X, dz,
                            B * on / s->out.dims[s->out.rank - 1], G, dx);
        } else if (s->type == HC_LAYER_RELU ||
                   s->type == HC_LAYER_LEAKY_RELU) {
            for (i = 0; i < B * on; i++) {
                double d;

                nr_ref_relu(s, X[i], &d);
                dx[i] = dz[i] * d;
            }
        } else {
            memcpy(dx, dz, B * on * sizeof(double));
        }
        /* The input's gradient adds to what its node's other readers
         * gave it. */
        if (s->n_in == 1 && s->in_from[0] >= 0)
            for (i = 0; i < B * inn; i++)
                gy[s->in_from[0]][i] += dx[i];
        free(dz);
        free(dx);
    }
    for (l = 0; l < L; l++) {
        free(gy[l]);
        free(z[l]);
        free(y[l]);
        free(arg[l]);
        free(mid[l]);
    }
    for (int q = 0; q < m->n_inputs; q++)
        free(xin[q]);
    return loss / B + ref_penalty(m, P, G);
}
