/*
 * nn_embedding.c — the worker's half of embedding (the row in
 * common/layer_embedding.c) and the net's face to row-sparse tables
 * (nn.h: wk_net_tables, wk_net_set_rows, wk_net_rows_grad). The table
 * is not among the net's parameters: each step the trainer sets the
 * batch's unique rows and each position's row among them; forward
 * gathers them (B, N) → (B, N, dim), backward sums the positions'
 * gradients by row (wk_be_embed_scatter), the one place repeated ids'
 * gradients meet, for the trainer to push.
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    const struct hc_var_def *v;
    size_t off, n;
    int rv;

    if (in->rank != 1 || s->units < 1)
        return hc_err_set(HC_ERR_CONFIG, "%s: embedding reads a flat input "
                          "of ids (N) and has output_dim ≥ 1", c->where);
    if ((rv = nn_check_var(c, s->var_kernel, "embeddings", 0, &off, &n)))
        return rv;
    v = &c->m->vars[s->var_kernel];
    if (!v->table_rows || v->shape[v->ndim - 1] != s->units)
        return hc_err_set(HC_ERR_MISMATCH, "%s: variable %s is no table of "
                          "rows of %d floats", c->where, v->name, s->units);
    l->table = s->var_kernel;
    l->n_ids = in->dims[0];
    l->aux_size = (size_t)in->dims[0] * (size_t)s->units;
    out->rank = 2;
    out->dims[0] = in->dims[0];
    out->dims[1] = s->units;
    out->dims[2] = 0;
    return HC_OK;
}

static int alloc(struct nn_layer *l, size_t B)
{
    size_t n = B * (size_t)l->n_ids;
    int rv;

    if ((rv = nn_alloc_f(l->be, &l->out, B * l->out_size)) ||
        (rv = nn_alloc_f(l->be, &l->aux, B * l->aux_size)) ||
        (rv = nn_alloc_f(l->be, &l->rgrad, B * l->aux_size)))
        return rv;
    return wk_be_alloc(l->be, n * sizeof *l->idx, (void **)&l->idx);
}

/* The step's rows by position: its ids, x, were turned into the rows and
 * positions wk_net_set_rows holds. */
static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    (void)net;
    (void)x;
    (void)params;
    (void)training;
    wk_be_embed_gather(l->be, l->aux, l->idx, (size_t)B * (size_t)l->n_ids,
                       l->out_c, l->out);
}

static void backward_params(struct nn_layer *l, float *grads, float *dy,
                            int B)
{
    (void)grads;
    wk_be_embed_scatter(l->be, dy, l->idx, (size_t)B * (size_t)l->n_ids,
                        l->out_c, l->n_rows, l->rgrad);
}

const struct nn_kind nn_embedding = {
    .flags = NN_TABLE,
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
};

/* ---- the net's tables ---------------------------------------------------- */

/* The k-th embedding layer of net, or NULL. */
static struct nn_layer *table_layer(const struct wk_net *net, int k)
{
    for (int i = 0; i < net->n_layers; i++)
        if ((net->layers[i].kind->flags & NN_TABLE) && k-- == 0)
            return (struct nn_layer *)&net->layers[i];
    return NULL;
}

int wk_net_tables(const struct wk_net *net, struct wk_net_table *t, int max)
{
    int n = 0;

    for (int i = 0; i < net->n_layers; i++) {
        const struct nn_layer *l = &net->layers[i];

        if (!(l->kind->flags & NN_TABLE))
            continue;
        if (n < max)
            t[n] = (struct wk_net_table){i, l->table, -1 - l->src[0],
                                         l->n_ids, l->out_c};
        n++;
    }
    return n;
}

int wk_net_set_rows(struct wk_net *net, int k, const float *rows,
                    size_t n_rows, const int32_t *inv, int B)
{
    struct nn_layer *l = table_layer(net, k);
    size_t n;
    int rv;

    if (!l || !rows || !inv || B < 1 || B > net->max_batch)
        return hc_err_set(HC_ERR_INVAL, "wk_net_set_rows: no table %d, a "
                          "NULL array or batch %d outside [1, %d]", k, B,
                          net->max_batch);
    n = (size_t)B * (size_t)l->n_ids;
    if (n_rows < 1 || n_rows > n)
        return hc_err_set(HC_ERR_INVAL, "wk_net_set_rows: %s: %zu rows for "
                          "%zu ids", l->name, n_rows, n);
    for (size_t i = 0; i < n; i++)
        if (inv[i] < 0 || (size_t)inv[i] >= n_rows)
            return hc_err_set(HC_ERR_INVAL, "wk_net_set_rows: %s: position "
                              "%zu names row %d of %zu", l->name, i,
                              (int)inv[i], n_rows);
    if ((rv = wk_be_upload(l->be, l->aux, rows,
                           n_rows * (size_t)l->out_c * sizeof *rows)) ||
        (rv = wk_be_upload(l->be, l->idx, inv, n * sizeof *inv)))
        return rv;
    l->n_rows = n_rows;
    l->rows_B = B;
    return HC_OK;
}

int wk_net_rows_grad(struct wk_net *net, int k, float *grad)
{
    struct nn_layer *l = table_layer(net, k);

    if (!l || !grad || !l->rows_B || net->stage != 2)
        return hc_err_set(HC_ERR_INVAL, "wk_net_rows_grad: no table %d, or "
                          "no rows set and backward run", k);
    return wk_be_download(l->be, grad, l->rgrad,
                          l->n_rows * (size_t)l->out_c * sizeof *grad);
}
