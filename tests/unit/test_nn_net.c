/*
 * test_nn_net.c — the backend and the network as a whole: creating
 * a backend, the generic defaults of optional ops, the reference model
 * (fashion_cnn) against the double reference, the gradient as a batch
 * mean, reuse with a smaller batch, inference, and wk_net_new's and
 * the calls' errors. A backend whose memory is not host memory is
 * test_nn_device.c.
 *
 * The reference and the shared checks are in nn_ref.c and nn_check.c;
 * each comparison prints its largest difference.
 */
#include "cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "nn_check.h"
#include "nn_ref.h"
#include "worker/backend.h"
#include "worker/nn.h"

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

/* The optional entries' generic defaults (wrappers with NULL entries). */
static void test_optional_defaults(void)
{
    struct wk_backend *be = nr_cpu(), bare;
    struct wk_backend_ops ops = *be->ops;
    enum { R = 70, N = 300 };     /* N > one stack chunk of columns */
    float *y = nr_falloc(R * N), *dy = nr_falloc(R * N);
    float *dy2 = nr_falloc(R * N);
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
        nr_fill_rand(y, R * N, &s, 0.01, 0.99);
        nr_fill_rand(dy, R * N, &s, -1, 1);
        y[5] = 0.0f;
        memcpy(dy2, dy, R * N * sizeof *dy);
        wk_be_act_bias_backward(be, y, dy, R, N, (enum hc_act)a, db);
        wk_be_act_bias_backward(&bare, y, dy2, R, N, (enum hc_act)a, db2);
        for (i = 0; i < R * N; i++)
            CU_ASSERT_FATAL(fabsf(dy[i] - dy2[i]) <= 1e-7f);
        for (i = 0; i < N; i++)
            CU_ASSERT(fabsf(db[i] - db2[i]) <= 1e-4f * (1 + fabsf(db[i])));
    }
    nr_fill_rand(s0, 50, &s, -1, 1);
    nr_fill_rand(s1, 50, &s, -1, 1);
    nr_fill_rand(s2, 50, &s, -1, 1);
    for (i = 0; i < 50; i++) {
        want[i] = 0.5 * s0[i] + 2.0 * s1[i] - 1.0 * s2[i];
        wantu[i] = (double)s0[i] + s1[i] + s2[i];
    }
    wk_be_reduce(be, out, src, w, 3, 50);
    CU_ASSERT(nr_cmp_report("reduce weighted", out, NULL, want, 50, 1e-6,
                            1e-6));
    wk_be_reduce(&bare, out2, src, w, 3, 50);
    CU_ASSERT(nr_cmp_report("reduce weighted (default)", out2, NULL, want, 50,
                            1e-6, 1e-6));
    wk_be_reduce(be, out, src, NULL, 3, 50);
    CU_ASSERT(nr_cmp_report("reduce", out, NULL, wantu, 50, 1e-6, 1e-6));
    memcpy(out2, s0, sizeof out2);
    src[0] = out2;     /* dst may equal src[0] */
    wk_be_reduce(&bare, out2, src, NULL, 3, 50);
    CU_ASSERT(nr_cmp_report("reduce in place (default)", out2, NULL, wantu, 50,
                            1e-6, 1e-6));
    CU_ASSERT_EQUAL(wk_be_check(&bare), HC_OK);
    free(y);
    free(dy);
    free(dy2);
    wk_backend_free(be);
}

/* ---- networks ---- */

static void test_grad_reference_model(void)
{
    nc_check_model(nc_model_reference, 4, 150, 600, 4);
}

/* A batch of two identical samples gives the gradient of one. */
static void test_batch_mean(void)
{
    struct nc_fixture f;
    float *g1;
    double l1, l2, *want;
    size_t n, in, i;
    int c1, c2;

    nc_open(&f, nc_model_two_convs, 2, 2, 21);
    n = f.m.n_params;
    in = nr_shp_size(&f.m.input);
    memcpy(f.x + in, f.x, in * sizeof *f.x);
    f.labels[1] = f.labels[0];
    g1 = nr_falloc(n);
    want = nr_dalloc(n);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 1,
                                      g1, &l1, &c1), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 2,
                                      f.grads, &l2, &c2), HC_OK);
    for (i = 0; i < n; i++)
        want[i] = g1[i];
    CU_ASSERT(nr_cmp_report("batch of 2 equal samples vs 1", f.grads, NULL,
                            want, n, 1e-7, 1e-5));
    CU_ASSERT(fabs(l1 - l2) <= 1e-6 * fabs(l1));
    CU_ASSERT_EQUAL(c2, 2 * c1);
    free(g1);
    free(want);
    nc_close(&f);
}

/* Reuse: a smaller batch after a larger one, and repeated steps, give the
 * same result as a fresh net; nothing leaks from one step to the next. */
static void test_reuse_and_smaller_batch(void)
{
    struct nc_fixture a, b;
    float *g;
    double la, lb, *want;
    size_t n, i;

    nc_open(&a, nc_model_pools, 5, 5, 31);
    nc_open(&b, nc_model_pools, 2, 2, 31);
    n = a.m.n_params;
    g = nr_falloc(n);
    want = nr_dalloc(n);
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
    CU_ASSERT(nr_cmp_report("smaller batch after larger", a.grads, NULL, want,
                            n, 0, 0));
    free(g);
    free(want);
    nc_close(&a);
    nc_close(&b);
}

/* What wk_net_on_grads reported during one backward: each `from` and a
 * copy of the gradient's [from, n) at that moment. */
struct grads_seen {
    const float *grads;         /* (n) the vector backward writes */
    size_t n, from[16];
    float *at[16];
    int calls;
};

static void grads_seen_fn(void *arg, size_t from)
{
    struct grads_seen *s = arg;

    if (s->calls < 16) {
        s->from[s->calls] = from;
        s->at[s->calls] = nr_falloc(s->n - from + 1);
        memcpy(s->at[s->calls], s->grads + from,
               (s->n - from) * sizeof *s->grads);
    }
    s->calls++;
}

/* wk_net_on_grads: backward reports each layer's gradient final as it
 * goes, last layers first, down to 0; what it reported final is what the
 * gradient is at the end, bit for bit. NULL stops the reports. */
static void test_on_grads(void)
{
    struct nc_fixture f;
    struct grads_seen s = { 0 };
    size_t n;
    int k;

    nc_open(&f, nc_model_two_convs, 3, 3, 41);
    n = f.m.n_params;
    s.grads = f.grads;
    s.n = n;
    CU_ASSERT_EQUAL_FATAL(wk_net_on_grads(f.net, grads_seen_fn, &s), 1);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 3,
                                      f.grads, NULL, NULL), HC_OK);
    CU_ASSERT(s.calls >= 3 && s.calls <= 16);
    for (k = 0; k < s.calls && k < 16; k++) {
        CU_ASSERT(s.from[k] < n);
        if (k > 0)
            CU_ASSERT(s.from[k] < s.from[k - 1]);
        CU_ASSERT(memcmp(s.at[k], f.grads + s.from[k],
                         (n - s.from[k]) * sizeof *f.grads) == 0);
        free(s.at[k]);
    }
    CU_ASSERT_EQUAL(s.from[s.calls - 1], 0u);
    k = s.calls;
    CU_ASSERT_EQUAL(wk_net_on_grads(f.net, NULL, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 3,
                                      f.grads, NULL, NULL), HC_OK);
    CU_ASSERT_EQUAL(s.calls, k);
    nc_close(&f);
}

/* Inference: dropout is off, the output equals the same model without
 * dropout layers, predict returns the loss SUM and the correct count. */
static void test_predict_inference(void)
{
    struct nc_fixture f, g;
    float *o1, *o2;
    double sum, mean, *want;
    int correct, c2;
    size_t i, no;

    nc_open(&f, nc_model_mlp_dropout, 6, 8, 41);
    nc_open(&g, nc_model_mlp_dropout, 6, 8, 41);
    /* g: the same model with rate 0 (no dropout at all) */
    wk_net_free(g.net);
    for (i = 0; i < (size_t)g.m.n_layers; i++)
        if (g.m.layers[i].type == HC_LAYER_DROPOUT)
            g.m.layers[i].rate = 0.0f;
    CU_ASSERT_EQUAL_FATAL(wk_net_new(&g.m, g.be, 8, &g.net), HC_OK);
    no = 6 * f.N;
    o1 = nr_falloc(no);
    o2 = nr_falloc(no);
    want = nr_dalloc(no);
    CU_ASSERT_EQUAL_FATAL(wk_net_predict(f.net, f.params, f.x, f.labels, NULL,
                                         6, &sum, &correct), HC_OK);
    CU_ASSERT_EQUAL(wk_net_output(f.net, o1), HC_OK);
    CU_ASSERT_EQUAL(wk_net_dropout_seed(f.net, 1), 0);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(g.net, f.params, f.x, f.labels, NULL, 6,
                                      g.grads, &mean, &c2), HC_OK);
    CU_ASSERT_EQUAL(wk_net_output(g.net, o2), HC_OK);
    for (i = 0; i < no; i++)
        want[i] = o2[i];
    CU_ASSERT(nr_cmp_report("inference output vs no-dropout model", o1, NULL,
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
    nc_close(&f);
    nc_close(&g);
}

/* ---- error paths ---- */

static void e_cce_linear(struct hc_model *m)
{
    nr_mb_begin(m, "bad", 1, 4, 0, 0, HC_LOSS_SPARSE_CCE);
    nr_mb_dense(m, 3, HC_ACT_LINEAR, 1);
}

static void e_cce_rank3(struct hc_model *m)
{
    nr_mb_begin(m, "bad", 3, 4, 4, 1, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 2, 3, 3, 1, 1, 0, HC_ACT_SOFTMAX, 1);
}

static void e_dense_rank3(struct hc_model *m)
{
    nr_mb_begin(m, "bad", 3, 4, 4, 1, HC_LOSS_MSE);
    nr_mb_layer(m, HC_LAYER_DENSE, HC_ACT_LINEAR)->units = 3;
}

static void e_kernel_size(struct hc_model *m)
{
    nc_model_conv_valid(m);
    m->vars[0].size -= 1;
    m->n_params -= 1;
}

static void e_in_shape(struct hc_model *m)
{
    nc_model_conv_valid(m);
    m->layers[2].in.dims[0] += 1;
}

static void e_out_shape(struct hc_model *m)
{
    nc_model_conv_valid(m);
    m->layers[0].out.dims[0] += 1;
}

static void e_dropout_rate(struct hc_model *m)
{
    nr_mb_begin(m, "bad", 1, 4, 0, 0, HC_LOSS_MSE);
    nr_mb_dropout(m, 1.0f);
    nr_mb_dense(m, 3, HC_ACT_LINEAR, 1);
}

static void e_unused_var(struct hc_model *m)
{
    nc_model_mse_softmax(m);
    nr_mb_var(m, "ghost", "kernel", 2, 2, 2, 0, 0);
}

static void e_big_kernel(struct hc_model *m)
{
    nr_mb_begin(m, "bad", 3, 2, 5, 1, HC_LOSS_MSE);
    nr_mb_conv(m, 2, 3, 3, 1, 1, 0, HC_ACT_LINEAR, 1);
}

static void e_n_params(struct hc_model *m)
{
    nc_model_mse_softmax(m);
    m->n_params += 1;
}

static void e_no_params(struct hc_model *m)
{
    nr_mb_begin(m, "bad", 3, 2, 2, 1, HC_LOSS_MSE);
    nr_mb_flatten(m);
}

static void e_shared_var(struct hc_model *m)
{
    nr_mb_begin(m, "bad", 1, 3, 0, 0, HC_LOSS_MSE);
    nr_mb_dense(m, 3, HC_ACT_LINEAR, 0);
    nr_mb_dense(m, 3, HC_ACT_LINEAR, 0);
    m->layers[1].var_kernel = 0;
    m->n_params -= m->vars[1].size;
    m->n_vars = 1;
}

static void e_bad_input(struct hc_model *m)
{
    nc_model_mse_softmax(m);
    m->input.rank = m->inputs[0].shape.rank = 2;
}

/* A layer reading a third input of a model of two. */
static void e_bad_node(struct hc_model *m)
{
    nc_model_two_inputs(m);
    m->layers[2].in_from[0] = -3;
}

static void test_new_errors(void)
{
    static const struct {
        nc_model_fn fn;
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
        {e_bad_input, HC_ERR_CONFIG, "input \"input\" of shape (4, 0); use (N)"},
        {e_bad_node, HC_ERR_MISMATCH, "layer 2 (dense): reads node -3; a "
                                      "layer reads an input (-1 to -2) or an "
                                      "earlier layer"},
    };
    struct wk_backend *be = nr_cpu();
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
    nc_model_conv_valid(m);
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
    struct nc_fixture f, g;
    double sum;

    nc_open(&f, nc_model_conv_valid, 3, 3, 61);
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
    nc_close(&f);

    nc_open(&g, nc_model_mse_softmax, 2, 2, 62);
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(g.net, g.params, g.x, 2, 0), HC_OK);
    CU_ASSERT_EQUAL(wk_net_loss(g.net, NULL, NULL, &sum, NULL),
                    HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(),
                                  "mse needs labels or targets"));
    nc_close(&g);
}

void hp_test_register(void)
{
    static const struct nc_test ops[] = {
        {"backend create", test_backend_new},
        {"optional entries' defaults", test_optional_defaults},
    }, nets[] = {
        {"grad reference model (fashion_cnn) batch 4", test_grad_reference_model},
        {"gradient is the batch mean", test_batch_mean},
        {"reuse and smaller batch", test_reuse_and_smaller_batch},
        {"gradients reported final layer by layer", test_on_grads},
        {"predict: inference without dropout", test_predict_inference},
        {"wk_net_new errors", test_new_errors},
        {"call-order and data errors", test_call_errors},
    };

    nc_add_suite("backend_cpu net", ops, sizeof ops / sizeof ops[0]);
    nc_add_suite("nn net", nets, sizeof nets / sizeof nets[0]);
}
