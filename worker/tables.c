/*
 * tables.c — the trainer's sparse path (tables.h): a batch's ids out of
 * the input rows, their unique rows pulled and set in the net, the rows'
 * gradients pushed.
 */
#include "tables.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rowmap.h"

#define MAX_TABLES 8

/* One table: the model's description and this step's buffers. */
struct table {
    struct wk_net_table d;
    uint64_t input_dim;
    size_t off;             /* where its input starts in a sample's row */
    uint64_t *ids;          /* (max_B·N) the batch's */
    int32_t *inv;           /* (max_B·N) each position's unique row */
    float *rows;            /* (max_B·N, dim) the unique rows */
    float *grad;            /* (max_B·N, dim) their gradients */
    struct hc_rowmap map;
    const float *dense;     /* (input_dim, dim) wk_tables_open_dense's;
                             * NULL: the rows are pulled */
};

struct wk_tables {
    struct pc_client *pc;
    size_t in_size;         /* floats a sample's row */
    int n, max_batch;
    struct table t[MAX_TABLES];
    struct wk_net *net;     /* the last hook's, NULL once pushed */
    int pulled;             /* the last hook pulled rows not yet pushed */
    uint64_t pull_bytes;    /* the last hook's */
    struct wk_tables_stats st;
};

/* Floats of input q in a sample's row. */
static size_t input_floats(const struct hc_model *m, int q)
{
    size_t n = (size_t)m->inputs[q].shape.dims[0];

    if (m->inputs[q].shape.rank == 3)
        n *= (size_t)m->inputs[q].shape.dims[1] *
             (size_t)m->inputs[q].shape.dims[2];
    return m->inputs[q].ids ? n * HC_ID_FLOATS : n;
}

/* Table k's description from m's k-th embedding (in layer order, as the
 * net lists them), its buffers for max_batch samples. */
static int table_init(const struct hc_model *m, const struct hc_layer_spec *l,
                      int li, int max_batch, struct table *t)
{
    const int q = -1 - l->in_from[0];
    const size_t n = (size_t)max_batch * (size_t)m->inputs[q].shape.dims[0];

    t->d = (struct wk_net_table){li, l->var_kernel, q,
                                 m->inputs[q].shape.dims[0], l->units};
    t->input_dim = l->input_dim;
    for (int j = 0; j < q; j++)
        t->off += input_floats(m, j);
    t->ids = malloc(n * sizeof *t->ids);
    t->inv = malloc(n * sizeof *t->inv);
    t->rows = malloc(n * (size_t)l->units * sizeof *t->rows);
    t->grad = malloc(n * (size_t)l->units * sizeof *t->grad);
    if (!t->ids || !t->inv || !t->rows || !t->grad)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for the rows of "
                          "table %s at batch %d", m->vars[l->var_kernel].name,
                          max_batch);
    return HC_OK;
}

int wk_tables_open(const struct hc_model *m, struct pc_client *pc,
                   int max_batch, struct wk_tables **out)
{
    struct wk_tables *t;
    int n = 0, rv = HC_OK;

    *out = NULL;
    for (int i = 0; i < m->n_layers; i++)
        n += m->layers[i].type == HC_LAYER_EMBEDDING;
    if (n == 0)
        return HC_OK;
    if (n > MAX_TABLES)
        return hc_err_set(HC_ERR_CONFIG, "model %s: %d embeddings; a worker "
                          "trains at most %d", m->name, n, MAX_TABLES);
    if (!(t = calloc(1, sizeof *t)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    t->pc = pc;
    t->max_batch = max_batch;
    for (int q = 0; q < m->n_inputs; q++)
        t->in_size += input_floats(m, q);
    for (int i = 0; i < m->n_layers && rv == HC_OK; i++)
        if (m->layers[i].type == HC_LAYER_EMBEDDING)
            rv = table_init(m, &m->layers[i], i, max_batch, &t->t[t->n++]);
    if (rv != HC_OK) {
        wk_tables_close(t);
        return rv;
    }
    *out = t;
    return HC_OK;
}

int wk_tables_open_dense(const struct hc_model *m, const float *const *dense,
                         int max_batch, struct wk_tables **out)
{
    int rv = wk_tables_open(m, NULL, max_batch, out);

    for (int k = 0; rv == HC_OK && *out && k < (*out)->n; k++)
        (*out)->t[k].dense = dense[k];
    return rv;
}

void wk_tables_close(struct wk_tables *t)
{
    if (!t)
        return;
    for (int k = 0; k < t->n; k++) {
        free(t->t[k].ids);
        free(t->t[k].inv);
        free(t->t[k].rows);
        free(t->t[k].grad);
        hc_rowmap_free(&t->t[k].map);
    }
    free(t);
}

/* Table k's ids of the B samples x, de-duplicated. */
static int batch_ids(struct wk_tables *t, struct table *tb, const float *x,
                     int B)
{
    const size_t N = (size_t)tb->d.n_ids, n = (size_t)B * N;
    int rv;

    for (int b = 0; b < B; b++)
        memcpy(tb->ids + (size_t)b * N, x + (size_t)b * t->in_size + tb->off,
               N * sizeof *tb->ids);
    for (size_t i = 0; i < n; i++)
        if ((int64_t)tb->ids[i] < 0 || tb->ids[i] >= tb->input_dim)
            return hc_err_set(HC_ERR_INVAL, "sample %zu of the batch: id "
                              "%lld (position %zu of input %d) is outside "
                              "[0, %llu), the table's input_dim", i / N,
                              (long long)tb->ids[i], i % N, tb->d.input,
                              (unsigned long long)tb->input_dim);
    if ((rv = hc_rowmap_build(&tb->map, (uint32_t)tb->d.var, tb->ids, n, 1,
                              tb->input_dim)))
        return rv;
    for (size_t i = 0; i < n; i++)
        tb->inv[i] = (int32_t)tb->map.inv[i];
    return HC_OK;
}

int wk_tables_before(void *arg, struct wk_net *net, const float *x, int B)
{
    struct wk_tables *t = arg;
    struct pc_rows req[MAX_TABLES];
    int k, rv;

    if (B < 1 || B > t->max_batch)
        return hc_err_set(HC_ERR_INVAL, "tables: batch %d outside [1, %d]", B,
                          t->max_batch);
    for (k = 0; k < t->n; k++) {
        struct table *tb = &t->t[k];

        if ((rv = batch_ids(t, tb, x, B)))
            return rv;
        req[k] = (struct pc_rows){(uint32_t)tb->d.var, tb->map.ids,
                                  tb->map.n_unique, tb->rows, NULL};
    }
    for (k = 0; k < t->n && !t->pc; k++)
        for (size_t i = 0; i < t->t[k].map.n_unique; i++)
            memcpy(t->t[k].rows + i * (size_t)t->t[k].d.dim,
                   t->t[k].dense + t->t[k].map.ids[i] * (size_t)t->t[k].d.dim,
                   (size_t)t->t[k].d.dim * sizeof *t->t[k].rows);
    if (t->pc && (rv = pc_pull_rows(t->pc, req, (size_t)t->n, NULL)))
        return rv;
    for (k = 0; k < t->n; k++)
        if ((rv = wk_net_set_rows(net, k, t->t[k].rows, t->t[k].map.n_unique,
                                  t->t[k].inv, B)))
            return rv;
    t->net = net;
    t->pulled = 1;
    t->st.pulls++;
    t->pull_bytes = 0;
    for (k = 0; k < t->n; k++) {
        size_t u = t->t[k].map.n_unique;

        t->st.rows_pulled += u;
        t->pull_bytes += u * (8 + 4 * (size_t)t->t[k].d.dim);
    }
    t->st.bytes_pulled += t->pull_bytes;
    return HC_OK;
}

int wk_tables_push(struct wk_tables *t, uint32_t samples)
{
    struct pc_rows req[MAX_TABLES];
    int k, rv;

    if (!t->pulled || !t->pc)
        return hc_err_set(HC_ERR_INVAL, "tables: a push without rows "
                          "pulled from the shards for a step");
    t->st.step_rows = t->st.step_bytes_pushed = 0;
    for (k = 0; k < t->n; k++) {
        struct table *tb = &t->t[k];

        if ((rv = wk_net_rows_grad(t->net, k, tb->grad)))
            return rv;
        for (size_t i = 0; i < tb->map.n_unique * (size_t)tb->d.dim; i++)
            tb->grad[i] *= (float)samples;
        req[k] = (struct pc_rows){(uint32_t)tb->d.var, tb->map.ids,
                                  tb->map.n_unique, NULL, tb->grad};
        t->st.step_rows += tb->map.n_unique;
        t->st.step_bytes_pushed += tb->map.n_unique *
                                   (8 + 4 * (size_t)tb->d.dim);
    }
    t->st.rows_pushed += t->st.step_rows;
    t->st.bytes_pushed += t->st.step_bytes_pushed;
    t->st.step_bytes_pulled = t->pull_bytes;
    t->st.pushes++;
    t->pulled = 0;
    return pc_push_rows_step(t->pc, req, (size_t)t->n, samples);
}

void wk_tables_stats(const struct wk_tables *t, struct wk_tables_stats *out)
{
    uint64_t a, b;

    *out = t->st;
    pc_rows_wire(t->pc, 0, &a, &b);
    out->wire_pulls = a + b;
    pc_rows_wire(t->pc, 1, &a, &b);
    out->wire_pushes = a + b;
}
