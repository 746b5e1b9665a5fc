/*
 * client_rows.c — the worker's half of row-sparse tables (client.h,
 * pc_pull_rows and pc_push_rows): a call's ids de-duplicated and grouped
 * by shard (rowmap.h), one PullRows or PushRows to each shard that holds
 * some, all in flight at once through client_call (re-sent with the same
 * request id after a timeout or a shard's restart, so a push is applied
 * once), and the answers scattered back to the caller's positions.
 */
#include "client_impl.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

/* Table `var` of the model: its dim and input_dim. */
static int table_of(const struct pc_client *c, uint32_t var, uint32_t *dim,
                    uint64_t *rows)
{
    const struct hc_var_def *d;
    int rv;

    if ((rv = client_need_layout(c, "a rows call")) != HC_OK)
        return rv;
    if (var >= (uint32_t)c->model->n_vars ||
        c->model->vars[var].table_rows == 0)
        return hc_err_set(HC_ERR_INVAL, "rows: variable %u is not a "
                          "row-sparse table of model %s", var,
                          c->model->name);
    d = &c->model->vars[var];
    *dim = (uint32_t)d->shape[d->ndim - 1];
    *rows = d->table_rows;
    return HC_OK;
}

/* Room for the call's unique rows. */
static int rows_room(struct pc_client *c, size_t floats)
{
    float *p;

    if (floats <= c->rows_cap)
        return HC_OK;
    if (!(p = realloc(c->rows_buf, floats * sizeof *p)))
        return hc_err_set(HC_ERR_NOMEM, "rows: out of memory for %zu floats",
                          floats);
    c->rows_buf = p;
    c->rows_cap = floats;
    return HC_OK;
}

/* The request to shard i for its ids (none: no request): a PullRows, or
 * with grad a PushRows of its rows' summed gradients. */
static int rows_request(struct pc_client *c, int i, uint32_t var,
                        uint32_t dim, const float *grad, uint32_t samples,
                        uint64_t *id)
{
    const struct hc_rowmap *m = &c->rowmap;
    size_t lo = m->start[i], n = m->start[i + 1] - lo;
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__PullRows pull = HETPS__PULL_ROWS__INIT;
    Hetps__PushRows push = HETPS__PUSH_ROWS__INIT;
    Hetps__RowsRef ref = HETPS__ROWS_REF__INIT, *refs[1] = {&ref};
    struct hc_tensor_src t[2] = {
        {var, 0, (uint32_t)(2 * n), (const float *)(const void *)(m->ids + lo)},
        {var, 0, (uint32_t)(n * dim), grad ? grad + lo * dim : NULL}};
    struct hc_sender me;

    if (n == 0)
        return HC_OK;
    ref.key = var;
    ref.n = (uint32_t)n;
    ref.dim = dim;
    client_sender(c, &me);
    *id = client_next_id(c);
    hc_wire_init_env(&env, &me, *id);
    if (grad) {
        push.samples = samples;
        push.n_tables = 1;
        push.tables = refs;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS;
        env.push_rows = &push;
    } else {
        pull.rows = &ref;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL_ROWS;
        env.pull_rows = &pull;
    }
    return hc_wire_encode(&c->reqs[i], &env, t, grad ? 2 : 1);
}

/* Build every shard's request, send them at once, wait for the answers
 * (Acks) in c->dec. */
static int rows_exchange(struct pc_client *c, uint32_t var, uint32_t dim,
                         const float *grad, uint32_t samples,
                         const char *what)
{
    uint64_t ids[64], *idp = ids;
    int i, rv = HC_OK;

    if (c->n > 64 && !(idp = calloc((size_t)c->n, sizeof *idp)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (i = 0; i < c->n && rv == HC_OK; i++)
        rv = rows_request(c, i, var, dim, grad, samples, &idp[i]);
    if (rv != HC_OK)
        client_free_reqs(c);
    else
        rv = client_call(c, idp, HETPS__ENVELOPE__PAYLOAD_ACK, what, 0);
    if (idp != ids)
        free(idp);
    return rv;
}

int pc_pull_rows(struct pc_client *c, uint32_t var, const uint64_t *ids,
                 size_t n, float *out, uint64_t *version)
{
    struct hc_rowmap *m = &c->rowmap;
    uint64_t rows, vmin = UINT64_MAX;
    uint32_t dim;
    int i, rv;

    if ((rv = table_of(c, var, &dim, &rows)) != HC_OK ||
        (rv = hc_rowmap_build(m, var, ids, n, (uint32_t)c->n, rows)) != HC_OK ||
        (rv = rows_room(c, m->n_unique * dim)) != HC_OK ||
        (rv = rows_exchange(c, var, dim, NULL, 0, "pull rows")) != HC_OK)
        return rv;
    for (i = 0; i < c->n && rv == HC_OK; i++) {
        const struct hc_wire_msg *d = &c->dec[i];
        size_t lo = m->start[i], k = m->start[i + 1] - lo;

        if (k == 0)
            continue;
        if (d->n_tensors != 1 || d->env->tensors[0]->key != var ||
            d->env->tensors[0]->length != k * dim)
            rv = hc_err_set(HC_ERR_PROTO, "pull rows: %s answered %zu "
                            "tensors, not the %zu rows of %u asked for",
                            c->names[i], d->n_tensors, k, dim);
        else if (hc_wire_take(d, 0, c->rows_buf + lo * dim) != HC_OK)
            rv = hc_err_set(HC_ERR_CRC, "pull rows: %s: %s", c->names[i],
                            hc_err_msg());   /* checked as it is copied */
        if (d->env->ack->version < vmin)
            vmin = d->env->ack->version;
    }
    client_release(c);
    if (rv != HC_OK)
        return rv;
    hc_rowmap_gather(m, c->rows_buf, dim, out);
    if (version)
        *version = vmin == UINT64_MAX ? 0 : vmin;
    return HC_OK;
}

int pc_push_rows(struct pc_client *c, uint32_t var, const uint64_t *ids,
                 size_t n, const float *grad, uint32_t samples,
                 uint64_t *version)
{
    struct hc_rowmap *m = &c->rowmap;
    uint64_t rows, vmax = 0;
    uint32_t dim;
    int i, rv;

    if (samples == 0)
        return hc_err_set(HC_ERR_INVAL, "push rows: samples 0; a gradient "
                          "stands for at least one sample");
    if ((rv = table_of(c, var, &dim, &rows)) != HC_OK ||
        (rv = hc_rowmap_build(m, var, ids, n, (uint32_t)c->n, rows)) != HC_OK ||
        (rv = rows_room(c, m->n_unique * dim)) != HC_OK)
        return rv;
    hc_rowmap_sum(m, grad, dim, c->rows_buf);
    if ((rv = rows_exchange(c, var, dim, c->rows_buf, samples,
                            "push rows")) != HC_OK)
        return rv;
    for (i = 0; i < c->n; i++)
        if (m->start[i + 1] > m->start[i] &&
            c->dec[i].env->ack->version > vmax)
            vmax = c->dec[i].env->ack->version;
    client_release(c);
    if (version)
        *version = vmax;
    return HC_OK;
}
