/*
 * shard_rows.c — a shard's half of row-sparse tables (shard.h, *row-sparse
 * tables*): a PullRows answered with its rows read straight into the
 * reply, and a PushRows applied as one step with its record. The wire's
 * decoder has checked the shapes and the ids (ascending, unique, below
 * 2^62); here each table is found among the store's and its dim and
 * input_dim checked, so a bad request is refused with a sentence and the
 * shard serves on. A step's Push may carry rows too (Push.rows_grad,
 * rows_pull): ps_shard_step_rows turns its gradients into the step's row
 * updates (applied by ps_shard_push_group in the dense step's
 * transaction), ps_shard_read_rows reads its rows into the answer.
 */
#include "shard_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "record.h"

/* The store's table `key`, or an error naming it. */
static int find_table(struct ps_shard *sh, uint32_t key, uint32_t dim,
                      struct ps_store **store, const struct ps_table **out)
{
    const struct ps_table *t;
    uint32_t n;

    if (!(*store = shard_store(sh)))
        return hc_err_set(HC_ERR_NOTFOUND, "rows: the variables do not exist "
                          "yet: the chief (worker:0) creates them");
    t = ps_store_tables(*store, &n);
    for (uint32_t i = 0; i < n; i++)
        if (t[i].var == key) {
            if (t[i].dim != dim)
                return hc_err_set(HC_ERR_MISMATCH, "rows of variable %u have "
                                  "%u floats in the request but the table's "
                                  "rows have %u", key, dim, t[i].dim);
            *out = &t[i];
            return HC_OK;
        }
    return hc_err_set(HC_ERR_NOTFOUND, "rows: variable %u is not a row-sparse "
                      "table of this model (it has %u)", key, n);
}

/* A rows tensor's ids as an array (the wire's are only 4-byte aligned). */
static uint64_t *ids_of(const float *data, uint32_t n)
{
    uint64_t *ids = malloc((n ? n : 1) * sizeof *ids);

    if (ids)
        for (uint32_t j = 0; j < n; j++)
            ids[j] = hc_wire_row_id(data, j);
    return ids;
}

int ps_shard_pull_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                       const struct hc_sender *me, nng_msg **reply)
{
    const Hetps__PullRows *p = in->env->pull_rows;
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Ack ack = HETPS__ACK__INIT;
    struct hc_tensor_src t[HC_WIRE_MAX_TABLES];
    float *rows[HC_WIRE_MAX_TABLES] = {0};  /* each (n, dim) */
    struct ps_store *store = NULL;
    size_t k, nt = 0;
    int rv = HC_OK;

    *reply = NULL;
    ack.has_version = 1;
    ack.version = UINT64_MAX;
    for (k = 0; k < p->n_tables && rv == HC_OK; k++) {
        const Hetps__RowsRef *r = p->tables[k];
        const struct ps_table *tab;
        uint64_t *ids, step;

        if ((rv = find_table(sh, r->key, r->dim, &store, &tab)) != HC_OK ||
            r->n == 0)
            continue;
        ids = ids_of(in->data[nt], r->n);
        rows[nt] = malloc((size_t)r->n * r->dim * sizeof *rows[nt]);
        if (!ids || !rows[nt])
            rv = hc_err_set(HC_ERR_NOMEM, "rows: out of memory for %u rows "
                            "of %u", r->n, r->dim);
        else
            rv = ps_store_rows_read(store, r->key, ids, r->n, rows[nt],
                                    &step);
        free(ids);
        if (rv == HC_OK && step < ack.version)
            ack.version = step;
        t[nt] = (struct hc_tensor_src){r->key, 0, r->n * r->dim, rows[nt]};
        nt++;
    }
    if (rv == HC_OK) {
        /* The smallest step a table was read at (each from a snapshot). */
        if (ack.version == UINT64_MAX)
            ack.version = store ? ps_store_step(store) : 0;
        hc_wire_init_env(&env, me, in->env->request_id);
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_ACK;
        env.ack = &ack;
        rv = hc_wire_reserve(reply, &env, t, nt, NULL);
    }
    for (k = 0; k < nt; k++)
        free(rows[k]);
    return rv;
}

/* A PushRows's tables as row updates (gradients checked finite; the
 * ids malloc'd into ids[k], freed by the caller), its record begun. */
static int push_of(struct ps_shard *sh, const struct hc_wire_msg *in,
                   struct ps_rows *rows, uint64_t **ids,
                   struct ps_store **store, struct ps_record *rec)
{
    const Hetps__PushRows *p = in->env->push_rows;
    const Hetps__Envelope *e = in->env;
    int rv = HC_OK;

    for (size_t k = 0; k < p->n_tables && rv == HC_OK; k++) {
        const Hetps__RowsRef *r = p->tables[k];
        const struct ps_table *tab;
        const float *g = in->data[2 * k + 1];
        size_t nf = (size_t)r->n * r->dim;

        if ((rv = find_table(sh, r->key, r->dim, store, &tab)) != HC_OK)
            break;
        for (size_t i = 0; i < nf; i++)
            if (!isfinite(g[i])) {
                rv = hc_err_set(HC_ERR_DATA, "push_rows: the gradient of row "
                                "%llu of variable %u holds %g (element %zu): "
                                "refused, nothing applied",
                                (unsigned long long)hc_wire_row_id(
                                    in->data[2 * k], (uint32_t)(i / r->dim)),
                                r->key, (double)g[i], i % r->dim);
                break;
            }
        if (rv == HC_OK && !(ids[k] = ids_of(in->data[2 * k], r->n)))
            rv = hc_err_set(HC_ERR_NOMEM, "rows: out of memory for %u ids",
                            r->n);
        rows[k] = (struct ps_rows){r->key, r->n, ids[k], g,
                                   1.0f / (float)p->samples};
    }
    ps_record_begin(rec, e->sender->index, PS_REQ_PUSH, e->incarnation,
                    e->request_id);
    rec->lane = (uint16_t)(e->has_lane ? e->lane : 0);
    return rv;
}

int ps_shard_drop_held(struct ps_shard *sh, uint32_t worker)
{
    struct ps_store *store = shard_store(sh);

    return store ? ps_store_rows_drop(store, worker) : HC_OK;
}

int ps_shard_push_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                       int hold, uint64_t *version)
{
    const Hetps__PushRows *p = in->env->push_rows;
    struct ps_rows rows[HC_WIRE_MAX_TABLES];
    uint64_t *ids[HC_WIRE_MAX_TABLES] = {0};
    struct ps_record rec;
    struct ps_store *store = NULL;
    int rv;

    rv = push_of(sh, in, rows, ids, &store, &rec);
    if (rv == HC_OK && hold)
        rv = ps_store_rows_hold(store, rows, p->n_tables, p->samples, &rec,
                                version);
    else if (rv == HC_OK)
        rv = ps_store_apply_rows(store, &sh->optim, NULL, 0, rows,
                                 p->n_tables, &rec, 1, version);
    for (size_t k = 0; k < p->n_tables; k++)
        free(ids[k]);
    return rv;
}

int ps_shard_step_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                       struct ps_rows *rows, uint64_t **ids)
{
    const Hetps__Push *p = in->env->push;
    size_t dense = hc_wire_push_dense(p, in->n_tensors);
    struct ps_store *store = NULL;
    int rv = HC_OK;

    for (size_t k = 0; k < p->n_rows_grad && rv == HC_OK; k++) {
        const Hetps__RowsRef *r = p->rows_grad[k];
        const float *id_words = in->data[dense + 2 * k];
        const struct ps_table *tab;
        uint64_t last;

        if ((rv = find_table(sh, r->key, r->dim, &store, &tab)) != HC_OK)
            break;
        /* Ascending (the decoder checked): the last is the largest. A bad
         * id is refused here, not by the group's transaction, which would
         * fail the other workers' pushes with it. */
        last = hc_wire_row_id(id_words, r->n - 1);
        if (last >= tab->input_dim) {
            rv = hc_err_set(HC_ERR_INVAL, "push rows_grad: id %llu of "
                            "variable %u is not below the table's input_dim "
                            "%llu: refused, nothing applied",
                            (unsigned long long)last, r->key,
                            (unsigned long long)tab->input_dim);
            break;
        }
        if (!(ids[k] = ids_of(id_words, r->n))) {
            rv = hc_err_set(HC_ERR_NOMEM, "rows: out of memory for %u ids",
                            r->n);
            break;
        }
        rows[k] = (struct ps_rows){r->key, r->n, ids[k],
                                   in->data[dense + 2 * k + 1],
                                   1.0f / (float)p->samples};
    }
    return rv;
}

int ps_shard_read_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                       size_t k, float *out, uint64_t *step)
{
    const Hetps__Push *p = in->env->push;
    const Hetps__RowsRef *r = p->rows_pull[k];
    size_t at = hc_wire_push_dense(p, in->n_tensors) +
                2 * p->n_rows_grad + k;
    struct ps_store *store = NULL;
    const struct ps_table *tab;
    uint64_t *ids;
    int rv;

    if ((rv = find_table(sh, r->key, r->dim, &store, &tab)) != HC_OK)
        return rv;
    if (!(ids = ids_of(in->data[at], r->n)))
        return hc_err_set(HC_ERR_NOMEM, "rows: out of memory for %u ids",
                          r->n);
    rv = ps_store_rows_read(store, r->key, ids, r->n, out, step);
    free(ids);
    return rv;
}
