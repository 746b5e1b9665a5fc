/*
 * test_replica.c — a worker's devices (worker/device.h) and computing one
 * gradient over several of them (worker/replica.h).
 *
 *   - device lists: a table of good lists and one of bad ones, each error
 *     checked for its code and message; opening, finding, GPUs this
 *     machine lacks refused ("auto" and the refusals follow the number of
 *     CUDA devices, so these run on GPU machines too);
 *   - mirrored replicas on 2 and 3 CPU devices against one wk_net on the
 *     whole batch (reference CNN and the MLP with dropout, odd batch sizes,
 *     fixed uneven splits): gradients, loss, accuracy, predict;
 *   - mirrored replicas on GPUs (gpu:0 alone, gpu:0 with cpu, gpu:0,gpu:1)
 *     against one CPU net, within float rounding of another device's
 *     arithmetic (gradients, and every sample's output); each test prints
 *     "skipped: no CUDA device" (or says it needs two) where the machine
 *     has fewer GPUs than it uses;
 *   - the split rule (largest remainder) and balancing by measured speed
 *     with one device slowed down;
 *   - every sample's output (wk_replicas_outputs, `hetps predict`),
 *     mirrored and placed, against one wk_net's output rows;
 *   - explicit placement across devices against one device, with host
 *     backends (pointer hand-over) and with backends that say their memory
 *     is not host memory (copies through upload/download), and its errors.
 *
 * The MLP has dropout 0.2. Rather than turning it off (predict mode or
 * rate 0), the comparisons keep it on: replicas position each slice's
 * dropout masks at the slice's first sample (wk_net_set_dropout_pos), so a
 * split batch draws exactly the masks one net draws on the whole batch —
 * which is what training relies on and what these tests check.
 *
 * Models load from deploy/models (tests run from the repository root).
 * Each comparison prints its largest difference.
 */
#include "cu.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "model.h"
#include "worker/device.h"
#include "worker/nn.h"
#include "worker/replica.h"

#define CNN_PATH "deploy/models/fashion_cnn.json"
#define MLP_PATH "deploy/models/fashion_mlp.json"
#define MAX_B 128

/* ---- helpers ---- */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double urand(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static float *falloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof *p);

    CU_ASSERT_FATAL(p != NULL);
    return p;
}

static int msg_has(const char *want)
{
    if (strstr(hc_err_msg(), want))
        return 1;
    printf("\n    message \"%s\"\n    lacks   \"%s\"", hc_err_msg(), want);
    return 0;
}

/* A model, parameters and a batch of data for it. */
struct fx {
    struct hc_model m;
    float *params;      /* (n_params) */
    float *x;           /* (MAX_B, H, W, C) */
    int *labels;        /* (MAX_B) */
    float *g_ref, *g;   /* (n_params) */
    size_t in;
};

static void fx_open(struct fx *f, const char *path, uint64_t seed)
{
    size_t i;

    memset(f, 0, sizeof *f);
    CU_ASSERT_EQUAL_FATAL(hc_model_load(path, &f->m), HC_OK);
    f->in = (size_t)f->m.input.dims[0] * f->m.input.dims[1] *
            f->m.input.dims[2];
    f->params = falloc(f->m.n_params);
    f->g_ref = falloc(f->m.n_params);
    f->g = falloc(f->m.n_params);
    f->x = falloc(MAX_B * f->in);
    f->labels = calloc(MAX_B, sizeof *f->labels);
    CU_ASSERT_FATAL(f->labels != NULL);
    hc_model_init_params(&f->m, f->params);
    /* Non-zero biases too, so every parameter has a gradient of its own. */
    for (i = 0; i < f->m.n_params; i++)
        f->params[i] += (float)(0.1 * (urand(&seed) - 0.5));
    for (i = 0; i < MAX_B * f->in; i++)
        f->x[i] = (float)urand(&seed);
    for (i = 0; i < MAX_B; i++)
        f->labels[i] = (int)(rng_next(&seed) % 10);
}

static void fx_close(struct fx *f)
{
    free(f->params);
    free(f->g_ref);
    free(f->g);
    free(f->x);
    free(f->labels);
}

/*
 * Compare the gradient got with want, variable by variable: the relative
 * difference of element j of variable v is |got_j − want_j| / max|want| over
 * v. Elementwise |want_j| would not do as the scale: a gradient element
 * that is a sum of many terms cancelling to near 0 carries the rounding of
 * those terms, not of its own size — one net's float result already
 * differs from a double-precision sum by ~1e-7 of the variable's largest
 * gradient, which is 1e-4 of some small elements. A real mistake (a sample
 * lost or weighed wrongly) moves gradients by ~1/B. Prints the largest
 * relative and absolute differences; returns the relative one.
 */
static double cmp(const char *what, const struct hc_model *m,
                  const float *got, const float *want)
{
    double worst = 0.0, worst_abs = 0.0;
    size_t i, at = 0;
    int v;

    for (v = 0; v < m->n_vars; v++) {
        size_t off = hc_model_var_offset(m, v), n = m->vars[v].size;
        double big = 0.0;

        for (i = off; i < off + n; i++)
            if (fabs(want[i]) > big)
                big = fabs(want[i]);
        for (i = off; i < off + n; i++) {
            double d = fabs((double)got[i] - want[i]);
            double r = d / (big + 1e-30);

            if (r > worst || isnan(d)) {
                worst = isnan(d) ? INFINITY : r;
                at = i;
            }
            if (d > worst_abs)
                worst_abs = d;
        }
    }
    printf("\n    %-48s rel diff %.2e (abs %.2e at %zu)", what, worst,
           worst_abs, at);
    return worst;
}

/* ---- device lists ---- */

static void test_parse_good(void)
{
    static const struct {
        const char *list;
        const char *names;      /* wk_devices_str */
        const char *kinds;      /* c = CPU, g = GPU per device */
    } t[] = {
        {"cpu", "cpu:0", "c"},
        {"cpu:0", "cpu:0", "c"},
        {"cpu:0,cpu:1", "cpu:0,cpu:1", "cc"},
        {"cpu:0,cpu:1,cpu:2", "cpu:0,cpu:1,cpu:2", "ccc"},
        {" CPU:1 , cpu:0\t", "cpu:1,cpu:0", "cc"},
        {"auto", NULL, NULL},           /* NULL: every GPU, else cpu:0 */
        {"AUTO", NULL, NULL},
        {"gpu:0,gpu:1", "gpu:0,gpu:1", "gg"},
        {"cpu,gpu", "cpu:0,gpu:0", "cg"},
        {"cpu:999", "cpu:999", "c"},
        {"cpu:7,cpu:3", "cpu:7,cpu:3", "cc"},
    };
    char auto_names[WK_MAX_DEVICES * 8] = "cpu:0", auto_kinds[32] = "c";
    int n_gpu = wk_backend_cuda_available(), g;
    size_t k, at = 0;

    /* "auto": gpu:0 … gpu:n−1 (at most WK_MAX_DEVICES), else cpu:0. */
    for (g = 0; g < n_gpu && g < WK_MAX_DEVICES; g++) {
        at += (size_t)snprintf(auto_names + at, sizeof auto_names - at,
                               "%sgpu:%d", g ? "," : "", g);
        auto_kinds[g] = 'g';
        auto_kinds[g + 1] = '\0';
    }
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        const char *names = t[k].names ? t[k].names : auto_names;
        const char *kinds = t[k].kinds ? t[k].kinds : auto_kinds;
        struct wk_devices d;
        char buf[256];
        int i, rv = wk_devices_parse(t[k].list, &d);

        CU_ASSERT_EQUAL(rv, HC_OK);
        if (rv) {
            printf("\n    \"%s\": %s", t[k].list, hc_err_msg());
            continue;
        }
        CU_ASSERT_STRING_EQUAL(wk_devices_str(&d, buf, sizeof buf), names);
        CU_ASSERT_EQUAL((size_t)d.n, strlen(kinds));
        for (i = 0; i < d.n; i++) {
            CU_ASSERT_EQUAL(d.dev[i].kind, kinds[i] == 'c' ? WK_DEV_CPU
                                                           : WK_DEV_GPU);
            CU_ASSERT_PTR_NULL(d.dev[i].be);
            CU_ASSERT_EQUAL(d.dev[i].index,
                            atoi(strchr(d.dev[i].name, ':') + 1));
        }
    }
}

static void test_parse_bad(void)
{
    char many[256];
    static const struct {
        const char *list;       /* "MANY": 17 devices */
        int code;
        const char *msg;
    } t[] = {
        {NULL, HC_ERR_INVAL, "device list is missing"},
        {"", HC_ERR_INVAL, "device list \"\" is empty; give devices like"},
        {"  ", HC_ERR_INVAL, "is empty"},
        {"cpu,", HC_ERR_INVAL, "device list \"cpu,\": entry 2 is empty"},
        {",cpu", HC_ERR_INVAL, "entry 1 is empty"},
        {"cpu:0,,cpu:1", HC_ERR_INVAL, "entry 2 is empty"},
        {"cpu:", HC_ERR_INVAL, "\"cpu:\" has a bad index; use a number from "
                               "0 to 999"},
        {"cpu:x", HC_ERR_INVAL, "\"cpu:x\" has a bad index"},
        {"cpu:-1", HC_ERR_INVAL, "\"cpu:-1\" has a bad index"},
        {"cpu:1000", HC_ERR_INVAL, "\"cpu:1000\" has a bad index"},
        {"cpu:1a", HC_ERR_INVAL, "\"cpu:1a\" has a bad index"},
        {"cpu:0,cpu:0", HC_ERR_INVAL, "cpu:0 is given twice"},
        {"cpu,cpu:0", HC_ERR_INVAL, "cpu:0 is given twice"},
        {"cpu:1,CPU:1", HC_ERR_INVAL, "cpu:1 is given twice"},
        {"auto,cpu", HC_ERR_INVAL, "\"auto\" must be the only entry"},
        {"cpu,auto", HC_ERR_INVAL, "\"auto\" must be the only entry"},
        {"tpu:0", HC_ERR_INVAL, "unknown device \"tpu:0\"; use cpu, cpu:N, "
                                "gpu:N or auto"},
        {"cpu0", HC_ERR_INVAL, "unknown device \"cpu0\""},
        {"cpus", HC_ERR_INVAL, "unknown device \"cpus\""},
        {"cpu:0 cpu:1", HC_ERR_INVAL, "\"cpu:0 cpu:1\" has a bad index"},
        {"gpu:x", HC_ERR_INVAL, "\"gpu:x\" has a bad index"},
        {"MANY", HC_ERR_LIMIT, "more than 16 devices"},
    };
    size_t k;
    int i, len = 0;

    for (i = 0; i < 17; i++)
        len += snprintf(many + len, sizeof many - (size_t)len, "%scpu:%d",
                        i ? "," : "", i);
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        const char *list = t[k].list && strcmp(t[k].list, "MANY") == 0
                               ? many : t[k].list;
        struct wk_devices d;
        int rv = wk_devices_parse(list, &d);

        CU_ASSERT_EQUAL(rv, t[k].code);
        CU_ASSERT(msg_has(t[k].msg));
        /* Opening reports the same and leaves nothing open. */
        CU_ASSERT_EQUAL(wk_devices_open(list, 1, &d), t[k].code);
        CU_ASSERT_EQUAL(d.n, 0);
    }
}

static void test_open_find(void)
{
    static const struct {
        const char *name;
        int want;
    } t[] = {
        {"cpu:0", 0}, {"cpu:1", 1}, {"CPU:1", 1}, {"cpu", 0}, {"cpu:2", -1},
        {"gpu:0", -1}, {"gpu", -1}, {"bogus", -1}, {"", -1}, {NULL, -1},
    };
    struct wk_devices d;
    int n_gpu = wk_backend_cuda_available();
    char name[32], list[48], want[96];
    size_t k;

    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
    CU_ASSERT_EQUAL(d.n, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d.dev[0].be);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d.dev[1].be);
    CU_ASSERT(d.dev[0].be != d.dev[1].be);
    CU_ASSERT_EQUAL(d.dev[1].be->host_memory, 1);
    CU_ASSERT_STRING_EQUAL(d.dev[1].be->name, "cpu:1");
    for (k = 0; k < sizeof t / sizeof t[0]; k++)
        CU_ASSERT_EQUAL(wk_devices_find(&d, t[k].name), t[k].want);
    wk_devices_close(&d);
    CU_ASSERT_EQUAL(d.n, 0);
    wk_devices_close(&d);                       /* twice is fine */

    /* gpu:N, N the number of CUDA devices, is refused, saying why: alone
     * and after a CPU device (closed again). */
    snprintf(name, sizeof name, "gpu:%d", n_gpu);
    snprintf(list, sizeof list, "cpu:0,gpu:%d", n_gpu);
    if (n_gpu == 0)
        snprintf(want, sizeof want, "%s: this machine has no CUDA device — "
                 "use cpu", name);
    else
        snprintf(want, sizeof want, "%s: this machine has %d CUDA device%s "
                 "(gpu:0 to gpu:%d)", name, n_gpu, n_gpu == 1 ? "" : "s",
                 n_gpu - 1);
    CU_ASSERT_EQUAL(wk_devices_open(name, 1, &d), HC_ERR_UNSUPPORTED);
    CU_ASSERT(msg_has(want) || msg_has("this build has no CUDA backend (nvcc "
                                       "not found at build time) — use cpu"));
    CU_ASSERT_EQUAL(d.n, 0);
    CU_ASSERT_EQUAL(wk_devices_open(list, 1, &d), HC_ERR_UNSUPPORTED);
    CU_ASSERT(msg_has(want) || msg_has("this build has no CUDA backend"));
    CU_ASSERT_EQUAL(d.n, 0);
    CU_ASSERT_EQUAL(wk_devices_open("cpu", -1, &d), HC_ERR_INVAL);
    CU_ASSERT(msg_has("-1 BLAS threads"));
    CU_ASSERT_EQUAL(wk_devices_open("auto", 0, &d), HC_OK);
    CU_ASSERT_EQUAL(d.n, n_gpu ? (n_gpu < WK_MAX_DEVICES ? n_gpu
                                                         : WK_MAX_DEVICES)
                               : 1);
    CU_ASSERT_EQUAL(d.dev[0].kind, n_gpu ? WK_DEV_GPU : WK_DEV_CPU);
    wk_devices_close(&d);
}

/* ---- mirrored replicas against one net ---- */

/* Reference: one net on its own backend over the whole batch, `steps`
 * training steps with seed 11 (grads of the last), then predict. */
struct ref {
    float *grads;
    double loss, pred_loss;
    int correct, pred_correct;
};

static void ref_run(struct fx *f, int B, int steps, struct ref *out)
{
    struct wk_backend *be = NULL;
    struct wk_net *net = NULL;
    int s;

    CU_ASSERT_EQUAL_FATAL(wk_backend_cpu_new(1, &be), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_new(&f->m, be, B, &net), HC_OK);
    wk_net_set_seed(net, 11);
    for (s = 0; s < steps; s++)
        CU_ASSERT_EQUAL(wk_net_step(net, f->params, f->x, f->labels, NULL, B,
                                    out->grads, &out->loss, &out->correct),
                        HC_OK);
    CU_ASSERT_EQUAL(wk_net_predict(net, f->params, f->x, f->labels, NULL, B,
                                   &out->pred_loss, &out->pred_correct),
                    HC_OK);
    wk_net_free(net);
    wk_backend_free(be);
}

/* How close replicas must come to the reference. */
enum match {
    ROUNDED,    /* CPU devices, another order of sums: gradients 1e-5 of
                 * each variable's largest, losses 1e-6, hits equal */
    EXACT,      /* bit for bit */
    GPU,        /* a GPU's arithmetic (cuBLAS, its kernels' orders): a
                 * ulp-level change of the forward pass moves gradients by
                 * ~5e-7, a sample lost or weighed wrongly by ~1/B, so
                 * gradients 1e-4, losses 1e-5, hits within 1 (a near tie
                 * may flip) */
};

/* Run `steps` steps on r (seed 11) over B samples and compare the last
 * with the reference; returns the largest relative gradient difference. */
static double check_against_ref(const char *what, struct fx *f,
                                struct wk_replicas *r, int B, int steps,
                                enum match how)
{
    const double gtol = how == GPU ? 1e-4 : 1e-5;
    const double ltol = how == GPU ? 1e-5 : 1e-6;
    const int slack = how == GPU;
    struct ref ref = {.grads = f->g_ref};
    double loss = 0.0, ploss = 0.0, worst;
    char label[160];
    int s, correct = -1, pcorrect = -1;

    ref_run(f, B, steps, &ref);
    wk_replicas_set_seed(r, 11);
    for (s = 0; s < steps; s++)
        CU_ASSERT_EQUAL(wk_replicas_step(r, f->params, f->x, f->labels, NULL,
                                         B, f->g, &loss, &correct), HC_OK);
    CU_ASSERT_EQUAL(wk_replicas_predict(r, f->params, f->x, f->labels, NULL,
                                        B, &ploss, &pcorrect), HC_OK);
    snprintf(label, sizeof label, "%s B=%d", what, B);
    worst = cmp(label, &f->m, f->g, f->g_ref);
    CU_ASSERT(worst <= gtol);
    CU_ASSERT(fabs(loss - ref.loss) <= ltol * fabs(ref.loss));
    CU_ASSERT(fabs(ploss - ref.pred_loss) <= ltol * fabs(ref.pred_loss));
    CU_ASSERT(abs(correct - ref.correct) <= slack);
    CU_ASSERT(abs(pcorrect - ref.pred_correct) <= slack);
    if (how == EXACT) {
        CU_ASSERT(memcmp(f->g, f->g_ref, f->m.n_params * sizeof *f->g) == 0);
        CU_ASSERT_EQUAL(loss, ref.loss);
    }
    return worst;
}

static void mirrored_table(const char *path)
{
    static const struct {
        const char *devs;
        int B;
    } t[] = {
        {"cpu:0,cpu:1", 64}, {"cpu:0,cpu:1", 7}, {"cpu:0,cpu:1", 1},
        {"cpu:0,cpu:1", 63}, {"cpu:0,cpu:1", 128},
        {"cpu:0,cpu:1,cpu:2", 64}, {"cpu:0,cpu:1,cpu:2", 7},
        {"cpu:0,cpu:1,cpu:2", 2}, {"cpu:0,cpu:1,cpu:2", 1},
        {"cpu:0,cpu:1,cpu:2", 63},
    };
    struct fx f;
    double worst = 0.0;
    size_t k;

    fx_open(&f, path, 5);
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct wk_devices d;
        struct wk_replicas *r = NULL;
        char what[128];
        double w;

        CU_ASSERT_EQUAL_FATAL(wk_devices_open(t[k].devs, 1, &d), HC_OK);
        CU_ASSERT_EQUAL_FATAL(wk_replicas_new(&f.m, &d, t[k].B, &r), HC_OK);
        CU_ASSERT_EQUAL(wk_replicas_n(r), d.n);
        CU_ASSERT_EQUAL(wk_replicas_is_placed(r), 0);
        snprintf(what, sizeof what, "%s %d devices", f.m.name, d.n);
        /* Three steps: the dropout masks move on each step. */
        w = check_against_ref(what, &f, r, t[k].B, 3, ROUNDED);
        if (w > worst)
            worst = w;
        wk_replicas_free(r);
        wk_devices_close(&d);
    }
    printf("\n    %s: largest relative gradient difference %.2e", f.m.name,
           worst);
    fx_close(&f);
}

static void test_mirrored_cnn(void)
{
    mirrored_table(CNN_PATH);
}

static void test_mirrored_mlp(void)
{
    mirrored_table(MLP_PATH);
}

/* The mask offset the replicas rely on: seed_at(s, k) starts k elements
 * into the mask of s. */
static void test_dropout_seed_at(void)
{
    uint64_t st = 21;
    int t;

    for (t = 0; t < 1000; t++) {
        uint64_t s = rng_next(&st), k = rng_next(&st) >> (t % 64);
        uint64_t i = rng_next(&st) % 100000;

        CU_ASSERT_EQUAL(wk_dropout_hash(wk_dropout_seed_at(s, k), i),
                        wk_dropout_hash(s, k + i));
    }
    CU_ASSERT_EQUAL(wk_dropout_seed_at(5, 0), 5);
}

/* One device runs inline and is bit for bit one wk_net. */
static void test_one_device(void)
{
    struct wk_devices d;
    struct wk_replicas *r = NULL;
    struct fx f;
    double speed;

    fx_open(&f, MLP_PATH, 6);
    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu", 1, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_replicas_open(&f.m, &d, 50, &r), HC_OK);
    CU_ASSERT_EQUAL(wk_replicas_is_placed(r), 0);
    CU_ASSERT_EQUAL(wk_replicas_input_size(r), 784);
    CU_ASSERT_EQUAL(wk_replicas_output_size(r), 10);
    check_against_ref("mlp 1 device", &f, r, 50, 2, EXACT);
    wk_replicas_speeds(r, &speed);
    CU_ASSERT(speed > 0.0);
    wk_replicas_free(r);
    wk_devices_close(&d);
    fx_close(&f);
}

/* A fixed uneven split still equals one device. */
static void test_fixed_split(void)
{
    static const struct {
        int c[2];
        int B;
    } t[] = {{{50, 14}, 64}, {{64, 0}, 64}, {{0, 64}, 64}, {{1, 7}, 64},
             {{50, 14}, 7}};
    struct wk_devices d;
    struct wk_replicas *r = NULL;
    struct fx f;
    size_t k;

    fx_open(&f, CNN_PATH, 7);
    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_replicas_new(&f.m, &d, 64, &r), HC_OK);
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        int got[2];
        char what[128];

        CU_ASSERT_EQUAL(wk_replicas_set_split(r, t[k].c), HC_OK);
        snprintf(what, sizeof what, "cnn split %d/%d", t[k].c[0], t[k].c[1]);
        check_against_ref(what, &f, r, t[k].B, 1, ROUNDED);
        wk_replicas_last_split(r, got);
        if (t[k].B == t[k].c[0] + t[k].c[1]) {
            CU_ASSERT_EQUAL(got[0], t[k].c[0]);
            CU_ASSERT_EQUAL(got[1], t[k].c[1]);
        }
        CU_ASSERT_EQUAL(got[0] + got[1], t[k].B);
    }
    wk_replicas_free(r);
    wk_devices_close(&d);
    fx_close(&f);
}

/* The rounding rule, with fixed weights. */
static void test_split_rule(void)
{
    static const struct {
        int w[3];
        int B;
        int want[3];
    } t[] = {
        {{1, 1, 1}, 64, {22, 21, 21}},
        {{1, 1, 1}, 7, {3, 2, 2}},
        {{1, 1, 1}, 3, {1, 1, 1}},
        {{1, 1, 1}, 2, {1, 1, 0}},      /* B < devices: first ones */
        {{1, 1, 1}, 1, {1, 0, 0}},
        {{50, 14, 0}, 64, {50, 14, 0}}, /* exact when Σ w = B */
        {{50, 14, 0}, 32, {25, 7, 0}},
        {{1, 0, 1}, 5, {3, 0, 2}},      /* tie of remainders: lower index */
        {{100, 1, 1}, 3, {1, 1, 1}},    /* at least one each */
        {{100, 1, 1}, 4, {2, 1, 1}},
        {{100, 1, 1}, 1, {1, 0, 0}},
        {{3, 1, 0}, 1, {1, 0, 0}},
        {{1, 3, 0}, 2, {1, 1, 0}},
        {{2, 1, 1}, 10, {5, 3, 2}},     /* 5, 2.5, 2.5 */
    };
    static const struct {
        int w[3];
        const char *msg;
    } bad[] = {
        {{1, -1, 1}, "cpu:1 gets -1 samples; counts must be 0 or more"},
        {{0, 0, 0}, "every count is 0"},
    };
    struct wk_devices d;
    struct wk_replicas *r = NULL;
    struct fx f;
    size_t k;
    int got[3];

    fx_open(&f, MLP_PATH, 8);
    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1,cpu:2", 1, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_replicas_new(&f.m, &d, 8, &r), HC_OK);
    /* Unmeasured: equal. */
    CU_ASSERT_EQUAL(wk_replicas_split(r, 8, got), HC_OK);
    CU_ASSERT(got[0] == 3 && got[1] == 3 && got[2] == 2);
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        CU_ASSERT_EQUAL(wk_replicas_set_split(r, t[k].w), HC_OK);
        CU_ASSERT_EQUAL(wk_replicas_split(r, t[k].B, got), HC_OK);
        if (memcmp(got, t[k].want, sizeof got)) {
            printf("\n    weights %d,%d,%d B=%d: got %d,%d,%d want %d,%d,%d",
                   t[k].w[0], t[k].w[1], t[k].w[2], t[k].B, got[0], got[1],
                   got[2], t[k].want[0], t[k].want[1], t[k].want[2]);
            CU_FAIL("split");
        }
    }
    for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        CU_ASSERT_EQUAL(wk_replicas_set_split(r, bad[k].w), HC_ERR_INVAL);
        CU_ASSERT(msg_has(bad[k].msg));
    }
    CU_ASSERT_EQUAL(wk_replicas_split(r, 0, got), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_replicas_set_slowdown(r, 3, 2.0), HC_ERR_INVAL);
    CU_ASSERT(msg_has("device 3; there are 3"));
    CU_ASSERT_EQUAL(wk_replicas_set_slowdown(r, 0, 0.5), HC_ERR_INVAL);
    CU_ASSERT(msg_has("factor 0.5; use 1 to 1000"));
    CU_ASSERT_EQUAL(wk_replicas_set_split(r, NULL), HC_OK);
    wk_replicas_free(r);
    wk_devices_close(&d);
    fx_close(&f);
}

/* One device made 3× slower ends up with about a quarter of the batch (the
 * proportional split alone: whether together beats the faster alone is
 * test_share_slow's, and on a busy machine either may). */
static void test_balance(void)
{
    struct wk_devices d;
    struct wk_replicas *r = NULL;
    struct fx f;
    double sp[2], late = 0.0;
    int s, got[2];

    fx_open(&f, CNN_PATH, 9);
    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_replicas_new(&f.m, &d, 64, &r), HC_OK);
    CU_ASSERT_EQUAL(wk_replicas_set_slowdown(r, 1, 3.0), HC_OK);
    wk_replicas_set_share(r, 0);
    wk_replicas_speeds(r, sp);
    CU_ASSERT(sp[0] == 0.0 && sp[1] == 0.0);
    CU_ASSERT_EQUAL(wk_replicas_split(r, 64, got), HC_OK);
    CU_ASSERT(got[0] == 32 && got[1] == 32);
    printf("\n    split of 64 per step:");
    for (s = 0; s < 30; s++) {
        CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, f.labels, NULL, 64,
                                         f.g, NULL, NULL), HC_OK);
        wk_replicas_last_split(r, got);
        CU_ASSERT(got[0] + got[1] == 64 && got[1] >= 1);
        printf(" %d/%d", got[0], got[1]);
        if (s >= 20)
            late += got[1] / 10.0;
    }
    wk_replicas_speeds(r, sp);
    printf("\n    speeds %.0f and %.0f samples/s (ratio %.2f); cpu:1's "
           "share over the last 10 steps %.1f of 64", sp[0], sp[1],
           sp[0] / sp[1], late);
    /* 16 expected. The band is wide because the speeds are wall-clock
     * times on a machine that may be busy with other work (seen: 11 to
     * 21); an equal split would be 32. */
    CU_ASSERT(late >= 8.0 && late <= 24.0);
    wk_replicas_free(r);
    wk_devices_close(&d);
    fx_close(&f);
}

/* A device 20× slower than the other does not pay for its share: after the
 * first try (steps 10 to 12) the other takes the whole batch, and the
 * gradient is still the reference's; device 0 is the slow one, so the
 * gradient comes from device 1's buffer. The fixed split of
 * wk_replicas_set_split is never overruled. */
static void test_share_slow(void)
{
    struct wk_devices d;
    struct wk_replicas *r = NULL;
    struct fx f;
    int s, got[2], two[2] = {1, 1};

    fx_open(&f, CNN_PATH, 5);
    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_replicas_new(&f.m, &d, MAX_B, &r), HC_OK);
    CU_ASSERT_EQUAL(wk_replicas_set_slowdown(r, 0, 20.0), HC_OK);
    printf("\n    split of 64 per step:");
    for (s = 0; s < 16; s++) {
        CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, f.labels, NULL, 64,
                                         f.g, NULL, NULL), HC_OK);
        wk_replicas_last_split(r, got);
        printf(" %d/%d", got[0], got[1]);
    }
    CU_ASSERT(got[0] == 0 && got[1] == 64);
    check_against_ref("cnn cpu:0 20x slower, cpu:1 alone", &f, r, 64, 2,
                      ROUNDED);
    wk_replicas_last_split(r, got);
    CU_ASSERT(got[0] == 0 && got[1] == 64);
    CU_ASSERT_EQUAL(wk_replicas_set_split(r, two), HC_OK);
    CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, f.labels, NULL, 64,
                                     f.g, NULL, NULL), HC_OK);
    wk_replicas_last_split(r, got);
    CU_ASSERT(got[0] == 32 && got[1] == 32);
    wk_replicas_free(r);
    wk_devices_close(&d);
    fx_close(&f);
}

/* Step errors: arguments, labels, and a device's own error named. */
static void test_step_errors(void)
{
    struct wk_devices d;
    struct wk_replicas *r = NULL;
    struct fx f;
    double loss;
    int one[2] = {1, 1};

    fx_open(&f, MLP_PATH, 10);
    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_replicas_new(&f.m, &d, 8, &r), HC_OK);
    CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, f.labels, NULL, 9, f.g,
                                     &loss, NULL), HC_ERR_INVAL);
    CU_ASSERT(msg_has("wk_replicas_step: batch of 9 samples; these replicas "
                      "take 1 to 8"));
    CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, f.labels, NULL, 0, f.g,
                                     &loss, NULL), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_replicas_step(r, NULL, f.x, f.labels, NULL, 4, f.g,
                                     &loss, NULL), HC_ERR_INVAL);
    CU_ASSERT(msg_has("params or x is NULL"));
    CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, f.labels, NULL, 4,
                                     NULL, &loss, NULL), HC_ERR_INVAL);
    CU_ASSERT(msg_has("grads is NULL"));
    CU_ASSERT_EQUAL(wk_replicas_predict(r, f.params, f.x, f.labels, NULL, 9,
                                        &loss, NULL), HC_ERR_INVAL);
    CU_ASSERT(msg_has("wk_replicas_predict: batch of 9"));
    /* Labels are checked over the whole batch (sample 6 lands on cpu:1). */
    CU_ASSERT_EQUAL(wk_replicas_set_split(r, one), HC_OK);
    f.labels[6] = 10;
    CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, f.labels, NULL, 8, f.g,
                                     &loss, NULL), HC_ERR_DATA);
    CU_ASSERT(msg_has("label of sample 6 is 10; the model has 10 classes "
                      "(0 to 9)"));
    f.labels[6] = 0;
    f.labels[1] = -1;
    CU_ASSERT_EQUAL(wk_replicas_predict(r, f.params, f.x, f.labels, NULL, 8,
                                        &loss, NULL), HC_ERR_DATA);
    CU_ASSERT(msg_has("label of sample 1 is -1"));
    f.labels[1] = 0;
    /* A device's own error comes back from its thread, named. */
    CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, NULL, NULL, 8, f.g,
                                     &loss, NULL), HC_ERR_INVAL);
    CU_ASSERT(msg_has("cpu:0: wk_net_loss: sparse_categorical_crossentropy "
                      "needs labels"));
    {
        int only1[2] = {0, 1};

        CU_ASSERT_EQUAL(wk_replicas_set_split(r, only1), HC_OK);
        CU_ASSERT_EQUAL(wk_replicas_predict(r, f.params, f.x, NULL, NULL, 8,
                                            &loss, NULL), HC_ERR_INVAL);
        CU_ASSERT(msg_has("cpu:1: wk_net_loss: sparse_categorical_"
                          "crossentropy needs labels"));
        CU_ASSERT_EQUAL(wk_replicas_set_split(r, NULL), HC_OK);
    }
    /* And it works again afterwards. */
    CU_ASSERT_EQUAL(wk_replicas_step(r, f.params, f.x, f.labels, NULL, 8, f.g,
                                     &loss, NULL), HC_OK);
    wk_replicas_free(r);
    wk_devices_close(&d);
    fx_close(&f);
}

static void test_new_errors(void)
{
    struct wk_devices d, none;
    struct wk_replicas *r = (struct wk_replicas *)1;
    struct fx f;
    int i;

    fx_open(&f, CNN_PATH, 12);
    memset(&none, 0, sizeof none);
    CU_ASSERT_EQUAL(wk_replicas_new(&f.m, &none, 8, &r), HC_ERR_INVAL);
    CU_ASSERT_PTR_NULL(r);
    CU_ASSERT(msg_has("wk_replicas_new: 0 devices"));
    CU_ASSERT_EQUAL(wk_devices_parse("cpu:0,cpu:1", &none), HC_OK);
    CU_ASSERT_EQUAL(wk_replicas_new(&f.m, &none, 8, &r), HC_ERR_INVAL);
    CU_ASSERT(msg_has("device cpu:0 is not open"));
    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
    CU_ASSERT_EQUAL(wk_replicas_new(&f.m, &d, 0, &r), HC_ERR_INVAL);
    CU_ASSERT(msg_has("max_batch = 0"));
    CU_ASSERT_EQUAL(wk_replicas_new(NULL, &d, 8, &r), HC_ERR_INVAL);
    f.m.layers[3].units = 11;       /* the net's own check, device named */
    CU_ASSERT_EQUAL(wk_replicas_new(&f.m, &d, 8, &r), HC_ERR_MISMATCH);
    CU_ASSERT(msg_has("cpu:0: model fashion_cnn, layer 3 (dense)"));
    f.m.layers[3].units = 10;
    /* Threads start and stop cleanly, over and over. */
    for (i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL_FATAL(wk_replicas_new(&f.m, &d, 4, &r), HC_OK);
        wk_replicas_free(r);
    }
    wk_replicas_free(NULL);
    wk_devices_close(&d);
    fx_close(&f);
}

/* ---- explicit placement ---- */

static void set_place(struct hc_model *m, const char *const *place)
{
    int i;

    for (i = 0; i < m->n_layers; i++)
        snprintf(m->layers[i].device, sizeof m->layers[i].device, "%s",
                 place[i]);
}

static void test_placed(void)
{
    /* exact: bit for bit. Where conv2d and maxpool2d sit on different
     * devices they do not fuse (nn_build.c), and the conv's bias gradient
     * is then summed over all its outputs instead of the pooled ones: the
     * same value, rounded differently. */
    static const struct {
        const char *path;
        const char *place[4];
        int exact;
    } t[] = {
        /* conv and pool on cpu:0, flatten and dense on cpu:1 */
        {CNN_PATH, {"cpu:0", "cpu:0", "cpu:1", "cpu:1"}, 1},
        /* a crossing at every layer (and conv → pool unfused) */
        {CNN_PATH, {"", "cpu:1", "cpu:0", "cpu:1"}, 0},
        {CNN_PATH, {"cpu:1", "cpu:1", "cpu:1", "cpu:1"}, 1},
        {MLP_PATH, {"cpu:0", "cpu:1", "cpu:0", "cpu:1"}, 1},
        {MLP_PATH, {"cpu:1", "cpu:1", "cpu:1", "cpu:0"}, 1},
    };
    struct wk_devices d;
    size_t k;

    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct wk_replicas *r = NULL;
        struct fx f;
        char what[160];
        double sp[2];
        int got[2];

        fx_open(&f, t[k].path, 13);
        set_place(&f.m, t[k].place);
        CU_ASSERT_EQUAL_FATAL(wk_replicas_open(&f.m, &d, 37, &r), HC_OK);
        CU_ASSERT_EQUAL(wk_replicas_is_placed(r), 1);
        snprintf(what, sizeof what, "%s placed %s|%s|%s|%s", f.m.name,
                 t[k].place[0], t[k].place[1], t[k].place[2], t[k].place[3]);
        CU_ASSERT(check_against_ref(what, &f, r, 37, 2,
                                    t[k].exact ? EXACT : ROUNDED) <= 1e-6);
        wk_replicas_last_split(r, got);
        CU_ASSERT(got[0] == 37 && got[1] == 37);
        wk_replicas_speeds(r, sp);
        CU_ASSERT(sp[0] > 0.0 && sp[0] == sp[1]);
        wk_replicas_free(r);
        fx_close(&f);
    }
    wk_devices_close(&d);
}

/*
 * wk_replicas_outputs: every sample's output row, in sample order, as one
 * wk_net gives it for the whole batch — mirrored on 2 and 3 CPU devices
 * (measured and fixed uneven splits, a device with no share), placed, one
 * sample at a time; softmax rows sum to 1; dropout stays off. Prints the
 * largest difference.
 */
static void outputs_ref(struct fx *f, int B, float *ref /* (B, N) */)
{
    struct wk_devices d;
    struct wk_net *net = NULL;

    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu", 1, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_new(&f->m, d.dev[0].be, B, &net), HC_OK);
    CU_ASSERT_EQUAL(wk_net_forward(net, f->params, f->x, B, 0), HC_OK);
    CU_ASSERT_EQUAL(wk_net_output(net, ref), HC_OK);
    wk_net_free(net);
    wk_devices_close(&d);
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double worst = 0.0;
    size_t i;

    for (i = 0; i < n; i++)
        if (fabs((double)a[i] - b[i]) > worst)
            worst = fabs((double)a[i] - b[i]);
    return worst;
}

/* Largest difference of r's outputs for the first B samples of f from
 * one CPU net's. */
static double outputs_diff(struct fx *f, struct wk_replicas *r, int B)
{
    const size_t n = (size_t)B * (size_t)f->m.n_classes;
    float *ref = falloc(n), *got = falloc(n);
    double w;

    outputs_ref(f, B, ref);
    CU_ASSERT_EQUAL(wk_replicas_outputs(r, f->params, f->x, B, got), HC_OK);
    w = max_diff(got, ref, n);
    free(ref);
    free(got);
    return w;
}

static void test_outputs(void)
{
    static const struct {
        const char *path, *devs;
        int split[3];       /* all 0: measured (equal) */
        const char *place[4];
        int B;
    } t[] = {
        {CNN_PATH, "cpu:0,cpu:1", {0}, {NULL}, 77},
        {CNN_PATH, "cpu:0,cpu:1", {1, 3}, {NULL}, 77},
        {CNN_PATH, "cpu:0,cpu:1", {0}, {NULL}, 1},
        {CNN_PATH, "cpu:0,cpu:1,cpu:2", {2, 0, 1}, {NULL}, 64},
        {MLP_PATH, "cpu:0,cpu:1", {0}, {NULL}, 77},
        {CNN_PATH, "cpu:0,cpu:1", {0}, {"cpu:0", "cpu:0", "cpu:1", "cpu:1"}, 77},
        {MLP_PATH, "cpu:0,cpu:1", {0}, {"cpu:0", "cpu:1", "cpu:0", "cpu:1"}, 77},
    };
    double worst = 0.0;
    size_t k;

    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct wk_devices d;
        struct wk_replicas *r = NULL;
        struct fx f;
        const int B = t[k].B;
        float *ref, *got, *one;
        double w;
        size_t N;
        int i, j;

        fx_open(&f, t[k].path, 31 + k);
        if (t[k].place[0])
            set_place(&f.m, t[k].place);
        N = (size_t)f.m.n_classes;
        ref = falloc((size_t)B * N);
        got = falloc((size_t)B * N);
        one = falloc(N);
        outputs_ref(&f, B, ref);
        CU_ASSERT_EQUAL_FATAL(wk_devices_open(t[k].devs, 1, &d), HC_OK);
        CU_ASSERT_EQUAL_FATAL(wk_replicas_open(&f.m, &d, B, &r), HC_OK);
        CU_ASSERT_EQUAL(wk_replicas_is_placed(r), t[k].place[0] != NULL);
        if (t[k].split[0] || t[k].split[1])
            CU_ASSERT_EQUAL(wk_replicas_set_split(r, t[k].split), HC_OK);
        /* Twice: the second call on measured speeds may split otherwise. */
        for (j = 0; j < 2; j++) {
            memset(got, 0xff, (size_t)B * N * sizeof *got);   /* NaNs */
            CU_ASSERT_EQUAL(wk_replicas_outputs(r, f.params, f.x, B, got),
                            HC_OK);
            w = max_diff(got, ref, (size_t)B * N);
            CU_ASSERT(w <= 1e-6);
            if (w > worst)
                worst = w;
        }
        for (i = 0; i < B; i++) {
            double sum = 0.0;

            for (j = 0; j < (int)N; j++)
                sum += got[(size_t)i * N + j];
            CU_ASSERT(fabs(sum - 1.0) <= 1e-5);
        }
        /* Rows in order: the last and the middle sample alone give their
         * own row, and neighbouring rows differ. */
        for (i = B - 1; i >= 0; i = i ? i / 2 : -1) {
            CU_ASSERT_EQUAL(wk_replicas_outputs(r, f.params, f.x + (size_t)i *
                                                f.in, 1, one), HC_OK);
            CU_ASSERT(max_diff(one, got + (size_t)i * N, N) <= 1e-6);
            if (i > 0)
                CU_ASSERT(max_diff(got + (size_t)i * N,
                                   got + (size_t)(i - 1) * N, N) > 1e-6);
        }
        CU_ASSERT_EQUAL(wk_replicas_outputs(r, f.params, f.x, B, NULL),
                        HC_ERR_INVAL);
        CU_ASSERT_EQUAL(wk_replicas_outputs(r, f.params, f.x, B + 1, got),
                        HC_ERR_INVAL);
        CU_ASSERT_EQUAL(wk_replicas_outputs(r, f.params, f.x, 0, got),
                        HC_ERR_INVAL);
        wk_replicas_free(r);
        wk_devices_close(&d);
        free(ref);
        free(got);
        free(one);
        fx_close(&f);
    }
    printf("\n    outputs: largest difference from one net %.2e", worst);
}

static void test_placed_errors(void)
{
    static const struct {
        const char *place[4];
        const char *msg;
    } t[] = {
        {{"cpu:0", "", "", "cpu:2"},
         "model fashion_cnn, layer 3 (dense): device \"cpu:2\" is not one of "
         "this worker's devices (cpu:0,cpu:1); add it to the worker's devices "
         "or change the layer's \"device\""},
        {{"gpu:0", "", "", ""},
         "layer 0 (conv2d): device \"gpu:0\" is not one of this worker's "
         "devices (cpu:0,cpu:1)"},
        {{"", "", "cpu:9", ""}, "layer 2 (flatten): device \"cpu:9\""},
    };
    struct wk_devices d;
    struct fx f;
    size_t k;

    fx_open(&f, CNN_PATH, 14);
    CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct wk_replicas *r = (struct wk_replicas *)1;

        set_place(&f.m, t[k].place);
        CU_ASSERT_EQUAL(wk_replicas_open(&f.m, &d, 8, &r), HC_ERR_CONFIG);
        CU_ASSERT_PTR_NULL(r);
        CU_ASSERT(msg_has(t[k].msg));
        CU_ASSERT_EQUAL(wk_replicas_new_placed(&f.m, &d, 8, &r),
                        HC_ERR_CONFIG);
    }
    /* A NULL backend in wk_net_new_placed names the layer. */
    {
        struct wk_backend *be[4] = {d.dev[0].be, d.dev[1].be, NULL,
                                    d.dev[0].be};
        struct wk_net *net = NULL;

        CU_ASSERT_EQUAL(wk_net_new_placed(&f.m, be, 8, &net), HC_ERR_INVAL);
        CU_ASSERT(msg_has("layer 2 (flatten) has no backend"));
        CU_ASSERT_PTR_NULL(net);
    }
    wk_devices_close(&d);
    fx_close(&f);
}

/* ---- backends whose memory is not host memory ---- */

/*
 * The CPU ops behind a table that says host_memory = 0 and checks every
 * pointer: a compute op's pointers must lie in memory THAT backend
 * allocated, an upload must go from host memory into the backend's, a
 * download the other way — as two CUDA devices would need. A pointer of
 * the wrong backend, or a host pointer given to an op, counts in fk_bad.
 * Fresh allocations are NaN-filled so reading unwritten memory shows. The
 * table is shared by the replicas' threads, hence the mutex.
 */
#define FK_MAX 512
static const struct wk_backend_ops *fk_cpu;
static struct {
    const struct wk_backend *be;
    const char *p;
    size_t n;
} fk_mem[FK_MAX];
static int fk_n, fk_bad;
static pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;

/* The backend owning p, or NULL for host memory. */
static const struct wk_backend *fk_owner(const void *p)
{
    const struct wk_backend *be = NULL;
    int i;

    pthread_mutex_lock(&fk_mu);
    for (i = 0; i < fk_n; i++)
        if ((const char *)p >= fk_mem[i].p &&
            (const char *)p < fk_mem[i].p + fk_mem[i].n)
            be = fk_mem[i].be;
    pthread_mutex_unlock(&fk_mu);
    return be;
}

static void fk_bump(void)
{
    pthread_mutex_lock(&fk_mu);
    fk_bad++;
    pthread_mutex_unlock(&fk_mu);
}

static void fk_chk(const struct wk_backend *be, const void *p)
{
    if (p && fk_owner(p) != be)
        fk_bump();
}

static void fk_host(const void *p)
{
    if (fk_owner(p))
        fk_bump();
}

static int fk_alloc(struct wk_backend *be, size_t bytes, void **out)
{
    int rv = fk_cpu->alloc(be, bytes, out);

    if (rv)
        return rv;
    memset(*out, 0xff, bytes);
    pthread_mutex_lock(&fk_mu);
    if (fk_n == FK_MAX) {
        pthread_mutex_unlock(&fk_mu);
        fk_cpu->free(be, *out);
        return hc_err_set(HC_ERR_NOMEM, "fake backend: table full");
    }
    fk_mem[fk_n].be = be;
    fk_mem[fk_n].p = *out;
    fk_mem[fk_n++].n = bytes;
    pthread_mutex_unlock(&fk_mu);
    return HC_OK;
}

static void fk_free(struct wk_backend *be, void *p)
{
    int i;

    pthread_mutex_lock(&fk_mu);
    for (i = 0; i < fk_n; i++)
        if (fk_mem[i].p == p) {
            if (fk_mem[i].be != be)
                fk_bad++;
            fk_mem[i] = fk_mem[--fk_n];
            break;
        }
    pthread_mutex_unlock(&fk_mu);
    fk_cpu->free(be, p);
}

static int fk_upload(struct wk_backend *be, void *d, const void *s, size_t n)
{
    fk_chk(be, d);
    fk_host(s);
    return fk_cpu->upload(be, d, s, n);
}

static int fk_download(struct wk_backend *be, void *d, const void *s,
                       size_t n)
{
    fk_chk(be, s);
    fk_host(d);
    return fk_cpu->download(be, d, s, n);
}

static int fk_copy(struct wk_backend *be, void *d, const void *s, size_t n)
{
    fk_chk(be, d);
    fk_chk(be, s);
    return fk_cpu->copy(be, d, s, n);
}

static void fk_sgemm(struct wk_backend *be, int ta, int tb, int m, int n,
                     int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc)
{
    fk_chk(be, a);
    fk_chk(be, b);
    fk_chk(be, c);
    fk_cpu->sgemm(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

static void fk_im2col(struct wk_backend *be, const struct wk_geom *g,
                      const float *x, float *cols)
{
    fk_chk(be, x);
    fk_chk(be, cols);
    fk_cpu->im2col(be, g, x, cols);
}

static void fk_col2im(struct wk_backend *be, const struct wk_geom *g,
                      const float *cols, float *dx, int add)
{
    fk_chk(be, cols);
    fk_chk(be, dx);
    fk_cpu->col2im(be, g, cols, dx, add);
}

static void fk_act_forward(struct wk_backend *be, const float *x,
                           const float *bias, float *y, int rows, int n,
                           enum hc_act act)
{
    fk_chk(be, x);
    fk_chk(be, bias);
    fk_chk(be, y);
    fk_cpu->act_forward(be, x, bias, y, rows, n, act);
}

static void fk_act_backward(struct wk_backend *be, const float *y,
                            const float *dy, float *dx, int rows, int n,
                            enum hc_act act)
{
    fk_chk(be, y);
    fk_chk(be, dy);
    fk_chk(be, dx);
    fk_cpu->act_backward(be, y, dy, dx, rows, n, act);
}

static void fk_bias_grad(struct wk_backend *be, const float *dy, int rows,
                         int n, float *db)
{
    fk_chk(be, dy);
    fk_chk(be, db);
    fk_cpu->bias_grad(be, dy, rows, n, db);
}

static void fk_act_bias_backward(struct wk_backend *be, const float *y,
                                 float *dy, int rows, int n, enum hc_act act,
                                 float *db)
{
    fk_chk(be, y);
    fk_chk(be, dy);
    fk_chk(be, db);
    fk_cpu->act_bias_backward(be, y, dy, rows, n, act, db);
}

static void fk_xent_forward(struct wk_backend *be, const float *z,
                            const int *labels, int rows, int n, float *p,
                            float *loss, float *hit)
{
    fk_chk(be, z);
    fk_chk(be, labels);
    fk_chk(be, p);
    fk_chk(be, loss);
    fk_chk(be, hit);
    fk_cpu->xent_forward(be, z, labels, rows, n, p, loss, hit);
}

static void fk_xent_backward(struct wk_backend *be, const float *p,
                             const int *labels, int rows, int n, float scale,
                             float *dz)
{
    fk_chk(be, p);
    fk_chk(be, labels);
    fk_chk(be, dz);
    fk_cpu->xent_backward(be, p, labels, rows, n, scale, dz);
}

static void fk_maxpool_forward(struct wk_backend *be, const struct wk_geom *g,
                               const float *x, float *y, int32_t *idx)
{
    fk_chk(be, x);
    fk_chk(be, y);
    fk_chk(be, idx);
    fk_cpu->maxpool_forward(be, g, x, y, idx);
}

static void fk_maxpool_backward(struct wk_backend *be,
                                const struct wk_geom *g, const float *dy,
                                const int32_t *idx, float *dx)
{
    fk_chk(be, dy);
    fk_chk(be, idx);
    fk_chk(be, dx);
    fk_cpu->maxpool_backward(be, g, dy, idx, dx);
}

static void fk_dropout_forward(struct wk_backend *be, const float *x,
                               float *y, size_t n, float rate, uint64_t seed)
{
    fk_chk(be, x);
    fk_chk(be, y);
    fk_cpu->dropout_forward(be, x, y, n, rate, seed);
}

static void fk_dropout_backward(struct wk_backend *be, const float *dy,
                                float *dx, size_t n, float rate,
                                uint64_t seed)
{
    fk_chk(be, dy);
    fk_chk(be, dx);
    fk_cpu->dropout_backward(be, dy, dx, n, rate, seed);
}

static struct wk_backend_ops fk_ops;

/* Turn device i of d into a "not host memory" device; fk_restore undoes. */
static void fk_wrap(struct wk_devices *d, int i, struct wk_backend *fake,
                    struct wk_backend **saved)
{
    fk_cpu = d->dev[i].be->ops;
    fk_ops = *fk_cpu;
    fk_ops.alloc = fk_alloc;
    fk_ops.free = fk_free;
    fk_ops.upload = fk_upload;
    fk_ops.download = fk_download;
    fk_ops.copy = fk_copy;
    fk_ops.sgemm = fk_sgemm;
    fk_ops.im2col = fk_im2col;
    fk_ops.col2im = fk_col2im;
    fk_ops.act_forward = fk_act_forward;
    fk_ops.act_backward = fk_act_backward;
    fk_ops.bias_grad = fk_bias_grad;
    fk_ops.act_bias_backward = fk_act_bias_backward;
    fk_ops.xent_forward = fk_xent_forward;
    fk_ops.xent_backward = fk_xent_backward;
    fk_ops.maxpool_forward = fk_maxpool_forward;
    fk_ops.maxpool_backward = fk_maxpool_backward;
    fk_ops.dropout_forward = fk_dropout_forward;
    fk_ops.dropout_backward = fk_dropout_backward;
    *saved = d->dev[i].be;
    *fake = **saved;
    fake->ops = &fk_ops;
    fake->host_memory = 0;
    d->dev[i].be = fake;
}

static void test_not_host_memory(void)
{
    static const struct {
        const char *path;
        const char *fake;           /* which devices are fakes: "01", "0" */
        int placed, exact;          /* exact: as in test_placed */
        const char *place[4];
    } t[] = {
        /* both sides device memory: copies through the host stage */
        {CNN_PATH, "01", 1, 1, {"cpu:0", "cpu:0", "cpu:1", "cpu:1"}},
        {CNN_PATH, "01", 1, 0, {"cpu:0", "cpu:1", "cpu:0", "cpu:1"}},
        {MLP_PATH, "01", 1, 1, {"cpu:0", "cpu:1", "cpu:0", "cpu:1"}},
        /* device ↔ host: one upload or download per crossing */
        {CNN_PATH, "0", 1, 0, {"cpu:0", "cpu:1", "cpu:0", "cpu:1"}},
        {MLP_PATH, "1", 1, 1, {"cpu:0", "cpu:1", "cpu:1", "cpu:0"}},
        /* mirrored replicas on device memory */
        {CNN_PATH, "01", 0, 0, {"", "", "", ""}},
        {MLP_PATH, "0", 0, 0, {"", "", "", ""}},
    };
    size_t k;

    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        struct wk_backend fake[2], *saved[2] = {NULL, NULL};
        struct wk_replicas *r = NULL;
        struct wk_devices d;
        struct fx f;
        char what[160];
        int i;

        fx_open(&f, t[k].path, 15);
        set_place(&f.m, t[k].place);
        CU_ASSERT_EQUAL_FATAL(wk_devices_open("cpu:0,cpu:1", 1, &d), HC_OK);
        for (i = 0; t[k].fake[i]; i++)
            fk_wrap(&d, t[k].fake[i] - '0', &fake[t[k].fake[i] - '0'],
                    &saved[t[k].fake[i] - '0']);
        fk_bad = 0;
        CU_ASSERT_EQUAL_FATAL(t[k].placed
                                  ? wk_replicas_new_placed(&f.m, &d, 40, &r)
                                  : wk_replicas_new(&f.m, &d, 40, &r),
                              HC_OK);
        snprintf(what, sizeof what, "%s %s fakes %s", f.m.name,
                 t[k].placed ? "placed" : "mirrored", t[k].fake);
        check_against_ref(what, &f, r, 37, 2, t[k].exact ? EXACT : ROUNDED);
        printf(" bad pointers: %d", fk_bad);
        CU_ASSERT_EQUAL(fk_bad, 0);
        wk_replicas_free(r);
        CU_ASSERT_EQUAL(fk_n, 0);           /* everything freed */
        for (i = 0; i < 2; i++)
            if (saved[i])
                d.dev[i].be = saved[i];
        wk_devices_close(&d);
        fx_close(&f);
    }
}

/* ---- mirrored replicas on GPUs against one CPU net ---- */

/*
 * The rows of this table that need `need` GPUs, each with both models:
 * mirrored replicas (measured balancing, or an equal split) against one
 * net on the CPU, within GPU tolerance. Skipped, saying so, where the
 * machine has fewer than `need` CUDA devices. A CPU device beside a GPU
 * is allowed: each replica is a whole net on its own backend.
 */
static void gpu_mirrored(const char *test, int need)
{
    static const struct {
        int need;               /* GPUs the row uses */
        const char *devs;
        int B, equal;           /* equal: set_split all 1, else measured */
    } t[] = {
        {1, "gpu:0", 64, 0},
        {1, "gpu:0", 7, 0},
        {1, "gpu:0,cpu", 64, 0},
        {1, "gpu:0,cpu", 63, 1},
        {1, "cpu,gpu:0", 7, 1},
        {2, "gpu:0,gpu:1", 64, 0},
        {2, "gpu:0,gpu:1", 63, 1},
        {2, "gpu:0,gpu:1", 1, 0},
        {2, "gpu:1,cpu,gpu:0", 128, 1},
    };
    static const char *const paths[] = {CNN_PATH, MLP_PATH};
    int n_gpu = wk_backend_cuda_available(), ones[3] = {1, 1, 1};
    double worst = 0.0, worst_out = 0.0;
    size_t k, p;
    char why[64];

    if (n_gpu < need) {
        if (n_gpu == 0)
            snprintf(why, sizeof why, "no CUDA device");
        else
            snprintf(why, sizeof why, "%d CUDA device; this test needs %d",
                     n_gpu, need);
        hp_test_skip(test, why);
        return;
    }
    for (p = 0; p < sizeof paths / sizeof paths[0]; p++) {
        struct fx f;

        fx_open(&f, paths[p], 23);
        for (k = 0; k < sizeof t / sizeof t[0]; k++) {
            struct wk_devices d;
            struct wk_replicas *r = NULL;
            char what[128];
            double w;
            int rv;

            if (t[k].need != need)
                continue;
            if ((rv = wk_devices_open(t[k].devs, 1, &d)) == HC_OK &&
                (rv = wk_replicas_new(&f.m, &d, MAX_B, &r)) != HC_OK)
                wk_devices_close(&d);
            if (rv)
                printf("\n    %s: %s", t[k].devs, hc_err_msg());
            CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
            if (t[k].equal)
                CU_ASSERT_EQUAL(wk_replicas_set_split(r, ones), HC_OK);
            snprintf(what, sizeof what, "%s %s%s", f.m.name, t[k].devs,
                     t[k].equal ? " equal" : "");
            w = check_against_ref(what, &f, r, t[k].B, 3, GPU);
            if (w > worst)
                worst = w;
            w = outputs_diff(&f, r, t[k].B);
            CU_ASSERT(w <= 1e-5);
            if (w > worst_out)
                worst_out = w;
            wk_replicas_free(r);
            wk_devices_close(&d);
        }
        fx_close(&f);
    }
    printf("\n    gpu mirrored: largest relative gradient difference %.2e, "
           "output difference %.2e", worst, worst_out);
}

static void test_gpu_one(void)
{
    gpu_mirrored(__func__, 1);
}

static void test_gpu_two(void)
{
    gpu_mirrored(__func__, 2);
}

/* ---- speed (printed, not asserted) ---- */

/* Samples/s of the best of three runs of `steps` steps (the machine may
 * be shared). */
static double time_steps(struct wk_replicas *r, struct fx *f, int B,
                         int steps)
{
    struct timespec a, b;
    double best = 0.0, v;
    int s, run;

    for (s = 0; s < 3; s++)     /* warm up, and let balancing measure */
        wk_replicas_step(r, f->params, f->x, f->labels, NULL, B, f->g, NULL,
                         NULL);
    for (run = 0; run < 3; run++) {
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (s = 0; s < steps; s++)
            CU_ASSERT_EQUAL(wk_replicas_step(r, f->params, f->x, f->labels,
                                             NULL, B, f->g, NULL, NULL),
                            HC_OK);
        clock_gettime(CLOCK_MONOTONIC, &b);
        v = (double)steps * B /
            ((double)(b.tv_sec - a.tv_sec) +
             (double)(b.tv_nsec - a.tv_nsec) * 1e-9);
        if (v > best)
            best = v;
    }
    return best;
}

static void test_speed(void)
{
    static const char *lists[] = {"cpu", "cpu:0,cpu:1"};
    static const int batches[] = {64, 128};
    struct fx f;
    size_t li, bi;

    fx_open(&f, CNN_PATH, 16);
    for (bi = 0; bi < 2; bi++)
        for (li = 0; li < 2; li++) {
            struct wk_devices d;
            struct wk_replicas *r = NULL;

            CU_ASSERT_EQUAL_FATAL(wk_devices_open(lists[li], 1, &d), HC_OK);
            CU_ASSERT_EQUAL_FATAL(wk_replicas_new(&f.m, &d, MAX_B, &r),
                                  HC_OK);
            printf("\n    fashion_cnn batch %3d on %-12s %8.0f samples/s",
                   batches[bi], lists[li],
                   time_steps(r, &f, batches[bi], 15));
            wk_replicas_free(r);
            wk_devices_close(&d);
        }
    fx_close(&f);
}

void hp_test_register(void)
{
    static const struct {
        const char *name;
        CU_TestFunc fn;
    } devs[] = {
        {"device lists: good", test_parse_good},
        {"device lists: bad, with messages", test_parse_bad},
        {"open, find, missing GPUs refused", test_open_find},
    }, reps[] = {
        {"split rule (largest remainder) and setting errors", test_split_rule},
        {"dropout mask offset (wk_dropout_seed_at)", test_dropout_seed_at},
        {"one device: inline, bit for bit wk_net", test_one_device},
        {"mirrored fashion_cnn = one device", test_mirrored_cnn},
        {"mirrored fashion_mlp (dropout) = one device", test_mirrored_mlp},
        {"fixed uneven splits = one device", test_fixed_split},
        {"balancing with a 3x slower device", test_balance},
        {"a 20x slower device gets no share", test_share_slow},
        {"step errors", test_step_errors},
        {"creation errors, threads start/stop", test_new_errors},
        {"placement = one device", test_placed},
        {"placement errors", test_placed_errors},
        {"outputs (predict) = one device, rows in order", test_outputs},
        {"not host memory: placed crossings, mirrored", test_not_host_memory},
        {"mirrored gpu:0, gpu:0 with cpu = one CPU device", test_gpu_one},
        {"mirrored gpu:0,gpu:1 (and cpu) = one CPU device", test_gpu_two},
        {"speed 1 vs 2 CPU devices (printed)", test_speed},
    };
    CU_pSuite s = CU_add_suite("device", NULL, NULL);
    size_t i;

    for (i = 0; i < sizeof devs / sizeof devs[0]; i++)
        CU_add_test(s, devs[i].name, devs[i].fn);
    s = CU_add_suite("replica", NULL, NULL);
    for (i = 0; i < sizeof reps / sizeof reps[0]; i++)
        CU_add_test(s, reps[i].name, reps[i].fn);
}
