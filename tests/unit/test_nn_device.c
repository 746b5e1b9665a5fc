/*
 * test_nn_device.c — the net on a backend whose memory is not host
 * memory: the CPU ops behind a table that says host_memory = 0 and
 * counts every host pointer handed to an op, trained and run side by
 * side with the plain CPU backend on the models of nn_check.c, graphs
 * included; and each model placed across both, layer by layer, so that
 * activations and gradients cross on the graph's edges (summed where a
 * node's readers sit on other backends).
 */
#include "cu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "nn_check.h"
#include "nn_ref.h"
#include "worker/backend.h"
#include "worker/nn.h"

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
                       const float *cols, float *dx, int add)
{
    dev_chk(cols);
    dev_chk(dx);
    dev_cpu->col2im(be, g, cols, dx, add);
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

static void dev_copy2d(struct wk_backend *be, int rows, int cols, float a,
                       const float *src, int lds, float *dst, int ldd,
                       int accumulate)
{
    dev_chk(src);
    dev_chk(dst);
    dev_cpu->copy2d(be, rows, cols, a, src, lds, dst, ldd, accumulate);
}

static void dev_mul(struct wk_backend *be, size_t n, const float *x,
                    const float *y, float *z, int accumulate)
{
    dev_chk(x);
    dev_chk(y);
    dev_chk(z);
    dev_cpu->mul(be, n, x, y, z, accumulate);
}

/* The same step, loss, output and prediction from f's net and dnet; the
 * gradients bit for bit when exact. */
static void same_as_cpu(struct nc_fixture *f, struct wk_net *dnet,
                        const char *how, int exact)
{
    float *g2 = nr_falloc(f->m.n_params), *o1 = nr_falloc(3 * f->N),
          *o2 = nr_falloc(3 * f->N);
    double l1, l2, s1, s2;
    int c1, c2;

    wk_net_set_seed(f->net, 3);
    wk_net_set_seed(dnet, 3);
    CU_ASSERT_EQUAL(wk_net_step(f->net, f->params, f->x, f->labels,
                                f->targets, 3, f->grads, &l1, &c1), HC_OK);
    CU_ASSERT_EQUAL(wk_net_output(f->net, o1), HC_OK);
    CU_ASSERT_EQUAL(wk_net_step(dnet, f->params, f->x, f->labels, f->targets,
                                3, g2, &l2, &c2), HC_OK);
    CU_ASSERT_EQUAL(wk_net_output(dnet, o2), HC_OK);
    if (exact) {
        CU_ASSERT(memcmp(f->grads, g2, f->m.n_params * sizeof *g2) == 0);
    } else {
        /* Placed, a conv and the pool after it on two backends do not
         * fuse (nn_build.c): the conv's bias gradient sums in another
         * order. */
        double *want = nr_dalloc(f->m.n_params);

        for (size_t i = 0; i < f->m.n_params; i++)
            want[i] = f->grads[i];
        CU_ASSERT(nr_cmp_report("      placed gradients", g2, NULL, want,
                                f->m.n_params, 1e-6, 1e-5));
        free(want);
    }
    CU_ASSERT(memcmp(o1, o2, 3 * f->N * sizeof *o1) == 0);
    CU_ASSERT_EQUAL(l1, l2);
    CU_ASSERT_EQUAL(c1, c2);
    CU_ASSERT_EQUAL(wk_net_predict(f->net, f->params, f->x, f->labels,
                                   f->targets, 2, &s1, &c1), HC_OK);
    CU_ASSERT_EQUAL(wk_net_predict(dnet, f->params, f->x, f->labels,
                                   f->targets, 2, &s2, &c2), HC_OK);
    CU_ASSERT_EQUAL(s1, s2);
    CU_ASSERT_EQUAL(c1, c2);
    printf("\n    %-30s %-8s host pointers given to ops: %d", f->m.name,
           how, dev_bad);
    CU_ASSERT_EQUAL(dev_bad, 0);
    free(g2);
    free(o1);
    free(o2);
}

static void test_device_memory_path(void)
{
    static const nc_model_fn models[] = {
        nc_model_reference, nc_model_conv_1x1, nc_model_mlp_dropout,
        nc_model_activation_layers, nc_model_pool_leftover,
        nc_model_conv_softmax_channels, nc_model_graph_residual,
        nc_model_graph_concat, nc_model_graph_merges,
    };
    struct wk_backend_ops ops;
    struct wk_backend dev;
    size_t mi;

    for (mi = 0; mi < sizeof models / sizeof models[0]; mi++) {
        struct wk_backend *layer_be[HC_MODEL_MAX_LAYERS];
        struct nc_fixture f;
        struct wk_net *dnet = NULL;
        int rv;

        nc_open(&f, models[mi], 3, 4, 71);
        dev_cpu = f.be->ops;
        ops = *f.be->ops;
        ops.copy2d = dev_copy2d;
        ops.mul = dev_mul;
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
        same_as_cpu(&f, dnet, "device", 1);
        wk_net_free(dnet);
        CU_ASSERT_EQUAL(dev_n, 0);      /* everything freed */
        /* Placed: every other layer on the device. */
        for (int i = 0; i < f.m.n_layers; i++)
            layer_be[i] = i % 2 ? &dev : f.be;
        rv = wk_net_new_placed(&f.m, layer_be, 4, &dnet);
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        same_as_cpu(&f, dnet, "placed", 0);
        wk_net_free(dnet);
        CU_ASSERT_EQUAL(dev_n, 0);
        nc_close(&f);
    }
}

void hp_test_register(void)
{
    static const struct nc_test nets[] = {
        {"device-memory path (host_memory = 0)", test_device_memory_path},
    };

    nc_add_suite("nn device", nets, sizeof nets / sizeof nets[0]);
}
