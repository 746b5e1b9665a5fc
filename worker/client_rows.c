/*
 * client_rows.c — the worker's half of row-sparse tables (client.h,
 * pc_pull_rows and pc_push_rows): each table's ids de-duplicated and
 * grouped by shard (rowmap.h), one PullRows or PushRows to each shard that
 * holds some, carrying every table's share, all in flight at once through
 * client_call (re-sent with the same request id after a timeout or a
 * shard's restart, so a push is applied once), and the answers scattered
 * back to the caller's positions. The chief's initial rows (InitRows,
 * pc_init_rows) take the push's path: ids grouped by shard, their values
 * beside them, sent only to the shards still loading. A step's rows may
 * instead ride on its
 * pushes (client_step_rows_*: Push.rows_grad and rows_pull), one request
 * per shard for the rows pushed, the dense push-and-pull and the rows
 * pulled. A pull's maps and buffers ([0]) are not a push's ([1]): a step
 * holds both.
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

/* Each table's row map, and room for its unique rows in
 * c->rows_buf[k->push]. */
static int plan(struct pc_client *c, struct rows_call *k)
{
    struct hc_rowmap **maps = &c->rowmaps[k->push];
    size_t floats = 0;
    uint64_t rows = 0;
    float *p;
    int rv;

    if ((rv = client_need_layout(c, "a rows call")) != HC_OK)
        return rv;
    if (k->n == 0 || k->n > HC_WIRE_MAX_TABLES)
        return hc_err_set(HC_ERR_INVAL, "rows: %zu tables in one call; 1 to "
                          "%u", k->n, HC_WIRE_MAX_TABLES);
    if (!*maps && !(*maps = calloc(HC_WIRE_MAX_TABLES, sizeof **maps)))
        return hc_err_set(HC_ERR_NOMEM, "rows: out of memory");
    for (size_t i = 0; i < k->n; i++) {
        for (size_t j = 0; j < i; j++)
            if (k->t[j].var == k->t[i].var)
                return hc_err_set(HC_ERR_INVAL, "rows: variable %u given "
                                  "twice in one call", k->t[i].var);
        if ((rv = table_of(c, k->t[i].var, &k->dim[i], &rows)) != HC_OK ||
            (rv = hc_rowmap_build(&(*maps)[i], k->t[i].var, k->t[i].ids,
                                  k->t[i].n, (uint32_t)c->n, rows)) != HC_OK)
            return rv;
        k->off[i] = floats;
        floats += (*maps)[i].n_unique * k->dim[i];
    }
    if (floats > c->rows_cap[k->push]) {
        if (!(p = realloc(c->rows_buf[k->push], floats * sizeof *p)))
            return hc_err_set(HC_ERR_NOMEM, "rows: out of memory for %zu "
                              "floats", floats);
        c->rows_buf[k->push] = p;
        c->rows_cap[k->push] = floats;
    }
    return HC_OK;
}

/* Call k's tables with ids on shard s: their RowsRefs into refs (ptrs to
 * them), their tensors into t (ids, and a push's gradients). */
static size_t rows_of(const struct pc_client *c, const struct rows_call *k,
                      int s, Hetps__RowsRef *refs, Hetps__RowsRef **ptrs,
                      size_t *n_refs, struct hc_tensor_src *t)
{
    size_t nr = 0, nt = 0;

    for (size_t i = 0; i < k->n; i++) {
        const struct hc_rowmap *m = &c->rowmaps[k->push][i];
        size_t lo = m->start[s], n = m->start[s + 1] - lo;
        uint32_t var = k->t[i].var;

        if (n == 0)
            continue;
        hetps__rows_ref__init(&refs[nr]);
        refs[nr].key = var;
        refs[nr].n = (uint32_t)n;
        refs[nr].dim = k->dim[i];
        ptrs[nr] = &refs[nr];
        nr++;
        t[nt++] = (struct hc_tensor_src){
            var, 0, (uint32_t)(2 * n),
            (const float *)(const void *)(m->ids + lo)};
        if (k->push)
            t[nt++] = (struct hc_tensor_src){
                var, 0, (uint32_t)(n * k->dim[i]),
                c->rows_buf[1] + k->off[i] + lo * k->dim[i]};
    }
    *n_refs = nr;
    return nt;
}

/* The request `id` to shard s for its ids of every table into *out
 * (none: NULL): a PullRows, or a PushRows of its rows' summed gradients. */
static int rows_request(struct pc_client *c, const struct rows_call *k, int s,
                        uint64_t id, nng_msg **out)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__PullRows pull = HETPS__PULL_ROWS__INIT;
    Hetps__PushRows push = HETPS__PUSH_ROWS__INIT;
    Hetps__InitRows init = HETPS__INIT_ROWS__INIT;
    Hetps__RowsRef refs[HC_WIRE_MAX_TABLES], *ptrs[HC_WIRE_MAX_TABLES];
    struct hc_tensor_src t[2 * HC_WIRE_MAX_TABLES];
    size_t nr, nt = rows_of(c, k, s, refs, ptrs, &nr, t);
    struct hc_sender me;

    *out = NULL;
    if (nr == 0 || (k->init && !c->rows_loading[s]))
        return HC_OK;
    client_sender(c, &me);
    hc_wire_init_env(&env, &me, id);
    if (k->init) {
        init.n_tables = nr;
        init.tables = ptrs;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_INIT_ROWS;
        env.init_rows = &init;
    } else if (k->push) {
        push.samples = k->samples;
        /* Held for the dense push only where one comes: a shard with
         * no block of the model is sent none, and applies the rows at
         * once, as its step. */
        push.has_with_step = k->with_step && c->plan[s].n_blocks > 0;
        push.with_step = push.has_with_step;
        push.n_tables = nr;
        push.tables = ptrs;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS;
        env.push_rows = &push;
    } else {
        pull.n_tables = nr;
        pull.tables = ptrs;
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL_ROWS;
        env.pull_rows = &pull;
    }
    return hc_wire_encode(out, &env, t, nt);
}

/* Build every shard's request, send them at once, wait for the answers
 * (Acks) in c->dec; the messages' bytes counted (pc_rows_wire). */
static int rows_exchange(struct pc_client *c, const struct rows_call *k,
                         const char *what)
{
    uint64_t ids[64] = {0}, *idp = ids, sent = 0;
    int s, rv = HC_OK;

    if (c->n > 64 && !(idp = calloc((size_t)c->n, sizeof *idp)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (s = 0; s < c->n && rv == HC_OK; s++)
        if ((rv = rows_request(c, k, s, idp[s] = client_next_id(c),
                               &c->reqs[s])) == HC_OK && c->reqs[s])
            sent += nng_msg_len(c->reqs[s]);
    if (rv != HC_OK)
        client_free_reqs(c);
    else
        rv = client_call(c, idp, k->init ? HETPS__ENVELOPE__PAYLOAD_INIT_ROWS_REPLY
                                         : HETPS__ENVELOPE__PAYLOAD_ACK,
                         what, 0);
    if (rv == HC_OK && !k->init) {
        c->rows_wire[k->push][0] += sent;
        for (s = 0; s < c->n; s++)
            if (c->replies[s])
                c->rows_wire[k->push][1] += nng_msg_len(c->replies[s]);
    }
    if (idp != ids)
        free(idp);
    return rv;
}

/* Shard s's answer d to a pull, its tensors from `first` on: its rows of
 * each table into c->rows_buf[0]. */
static int take_rows(struct pc_client *c, const struct rows_call *k, int s,
                     const struct hc_wire_msg *d, size_t first)
{
    size_t nt = first;

    for (size_t i = 0; i < k->n; i++) {
        const struct hc_rowmap *m = &c->rowmaps[k->push][i];
        size_t lo = m->start[s], n = m->start[s + 1] - lo;

        if (n == 0)
            continue;
        if (nt >= d->n_tensors || d->env->tensors[nt]->key != k->t[i].var ||
            d->env->tensors[nt]->length != n * k->dim[i])
            return hc_err_set(HC_ERR_PROTO, "pull rows: %s answered %zu "
                              "tensors, not the %zu rows of %u of variable "
                              "%u asked for", c->names[s], d->n_tensors, n,
                              k->dim[i], k->t[i].var);
        /* hc_wire_take checks a lazily decoded answer's CRC as it copies. */
        if (hc_wire_take(d, nt, c->rows_buf[0] + k->off[i] +
                                    lo * k->dim[i]) != HC_OK)
            return hc_err_set(HC_ERR_CRC, "pull rows: %s: %s", c->names[s],
                              hc_err_msg());
        nt++;
    }
    if (nt != d->n_tensors)
        return hc_err_set(HC_ERR_PROTO, "pull rows: %s answered %zu tensors, "
                          "%zu more than the rows asked for", c->names[s],
                          d->n_tensors, d->n_tensors - nt);
    return HC_OK;
}

int pc_pull_rows(struct pc_client *c, struct pc_rows *t, size_t n_tables,
                 uint64_t *version)
{
    struct rows_call k = {.n = n_tables, .t = t};
    uint64_t vmin = UINT64_MAX;
    int s, rv;

    if ((rv = plan(c, &k)) != HC_OK ||
        (rv = rows_exchange(c, &k, "pull rows")) != HC_OK)
        return rv;
    for (s = 0; s < c->n && rv == HC_OK; s++) {
        if (!c->dec[s].env)
            continue;           /* asked nothing */
        rv = take_rows(c, &k, s, &c->dec[s], 0);
        if (c->dec[s].env->ack->version < vmin)
            vmin = c->dec[s].env->ack->version;
    }
    client_release(c);
    if (rv != HC_OK)
        return rv;
    for (size_t i = 0; i < n_tables; i++)
        hc_rowmap_gather(&c->rowmaps[0][i], c->rows_buf[0] + k.off[i],
                         k.dim[i], t[i].rows);
    if (version)
        *version = vmin == UINT64_MAX ? 0 : vmin;
    return HC_OK;
}

static int push_rows(struct pc_client *c, const struct pc_rows *t,
                     size_t n_tables, uint32_t samples, int with_step,
                     uint64_t *version)
{
    struct rows_call k = {.n = n_tables, .t = t, .push = 1, .samples = samples,
                     .with_step = with_step};
    uint64_t vmax = 0;
    int s, rv;

    if (samples == 0)
        return hc_err_set(HC_ERR_INVAL, "push rows: samples 0; a gradient "
                          "stands for at least one sample");
    if ((rv = plan(c, &k)) != HC_OK)
        return rv;
    for (size_t i = 0; i < n_tables; i++)
        hc_rowmap_sum(&c->rowmaps[1][i], t[i].grad, k.dim[i],
                      c->rows_buf[1] + k.off[i]);
    if ((rv = rows_exchange(c, &k, "push rows")) != HC_OK)
        return rv;
    for (s = 0; s < c->n; s++)
        if (c->dec[s].env && c->dec[s].env->ack->version > vmax)
            vmax = c->dec[s].env->ack->version;
    client_release(c);
    if (version)
        *version = vmax;
    return HC_OK;
}

void pc_rows_wire(const struct pc_client *c, int push, uint64_t *sent,
                  uint64_t *received)
{
    *sent = c->rows_wire[push != 0][0];
    *received = c->rows_wire[push != 0][1];
}

int pc_push_rows(struct pc_client *c, const struct pc_rows *t,
                 size_t n_tables, uint32_t samples, uint64_t *version)
{
    return push_rows(c, t, n_tables, samples, 0, version);
}

int pc_push_rows_step(struct pc_client *c, const struct pc_rows *t,
                      size_t n_tables, uint32_t samples)
{
    return push_rows(c, t, n_tables, samples, 1, NULL);
}

/* One InitRows to every shard still loading (all: the question), no
 * table; done: the last. How many were loading into *loading. */
static int init_rows_all(struct pc_client *c, int done, int ask_all,
                         int *loading)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__InitRows init = HETPS__INIT_ROWS__INIT;
    uint64_t ids[64] = {0}, *idp = ids;
    struct hc_sender me;
    int s, rv = HC_OK;

    if (c->n > 64 && !(idp = calloc((size_t)c->n, sizeof *idp)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    init.has_done = init.done = done;
    client_sender(c, &me);
    for (s = 0; s < c->n && rv == HC_OK; s++) {
        if (!ask_all && !c->rows_loading[s])
            continue;
        idp[s] = client_next_id(c);
        hc_wire_init_env(&env, &me, idp[s]);
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_INIT_ROWS;
        env.init_rows = &init;
        rv = hc_wire_encode(&c->reqs[s], &env, NULL, 0);
    }
    if (rv != HC_OK)
        client_free_reqs(c);
    else
        rv = client_call(c, idp, HETPS__ENVELOPE__PAYLOAD_INIT_ROWS_REPLY,
                         done ? "initial rows (done)" : "initial rows", 0);
    *loading = 0;
    for (s = 0; rv == HC_OK && s < c->n; s++)
        if (c->dec[s].env) {
            c->rows_loading[s] = c->dec[s].env->init_rows_reply->loading;
            *loading += c->rows_loading[s];
        }
    if (rv == HC_OK)
        client_release(c);
    if (idp != ids)
        free(idp);
    return rv;
}

int pc_init_rows_begin(struct pc_client *c, int *loading)
{
    int rv;

    if ((rv = client_need_layout(c, "pc_init_rows_begin")) != HC_OK)
        return rv;
    if (!c->rows_loading &&
        !(c->rows_loading = calloc((size_t)c->n, 1)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    return init_rows_all(c, 0, 1, loading);
}

int pc_init_rows(struct pc_client *c, const struct pc_rows *t,
                 size_t n_tables)
{
    struct rows_call k = {.n = n_tables, .t = t, .push = 1, .init = 1};
    int rv;

    if (!c->rows_loading)
        return hc_err_set(HC_ERR_INVAL, "pc_init_rows before "
                          "pc_init_rows_begin");
    if ((rv = plan(c, &k)) != HC_OK)
        return rv;
    for (size_t i = 0; i < n_tables; i++) {
        if (c->rowmaps[1][i].n_unique != t[i].n)
            return hc_err_set(HC_ERR_INVAL, "initial rows of variable %u: "
                              "%zu ids, %zu of them unique: each row once",
                              t[i].var, t[i].n, c->rowmaps[1][i].n_unique);
        hc_rowmap_sum(&c->rowmaps[1][i], t[i].grad, k.dim[i],
                      c->rows_buf[1] + k.off[i]);
    }
    if ((rv = rows_exchange(c, &k, "initial rows")) == HC_OK)
        client_release(c);
    return rv;
}

int pc_init_rows_done(struct pc_client *c)
{
    int loading;

    if (!c->rows_loading)
        return hc_err_set(HC_ERR_INVAL, "pc_init_rows_done before "
                          "pc_init_rows_begin");
    return init_rows_all(c, 1, 0, &loading);
}

/* ---- a step's rows, riding on its pushes -------------------------------- */

int client_step_rows_plan(struct pc_client *c, const struct pc_grad *g,
                          const struct pc_step *st)
{
    struct rows_call *push = &c->step_rows[1], *pull = &c->step_rows[0];
    int rv;

    *push = (struct rows_call){.n = g->n_rows, .t = g->rows, .push = 1,
                               .samples = g->samples};
    *pull = (struct rows_call){.n = st->n_pull_rows, .t = st->pull_rows};
    if (push->n && (rv = plan(c, push)) != HC_OK)
        goto fail;
    for (size_t i = 0; i < push->n; i++)
        hc_rowmap_sum(&c->rowmaps[1][i], push->t[i].grad, push->dim[i],
                      c->rows_buf[1] + push->off[i]);
    if (pull->n && (rv = plan(c, pull)) != HC_OK)
        goto fail;
    return HC_OK;
fail:
    push->n = pull->n = 0;
    return rv;
}

size_t client_step_rows_of(const struct pc_client *c, int s,
                           Hetps__RowsRef *refs, Hetps__RowsRef **grad,
                           size_t *n_grad, Hetps__RowsRef **pull,
                           size_t *n_pull, struct hc_tensor_src *t)
{
    size_t nt = rows_of(c, &c->step_rows[1], s, refs, grad, n_grad, t);

    return nt + rows_of(c, &c->step_rows[0], s, refs + *n_grad, pull, n_pull,
                        t + nt);
}

/* The header bytes a tensor's TensorRef takes in an Envelope (its tag
 * and length, and itself). */
static size_t ref_bytes(const Hetps__TensorRef *r)
{
    size_t n = protobuf_c_message_get_packed_size(&r->base);

    return 1 + (n < 128 ? 1 : 2) + n;
}

/* The same of a RowsRef in a Push. */
static size_t rowsref_bytes(const Hetps__RowsRef *r)
{
    size_t n = protobuf_c_message_get_packed_size(&r->base);

    return 1 + (n < 128 ? 1 : 2) + n;
}

/* Shard s's rows' share of its step request, bytes into sent[0] (pull)
 * and sent[1] (push): their RowsRefs, TensorRefs and data. */
static void step_rows_sent(const struct pc_client *c, int s, uint64_t sent[2])
{
    Hetps__RowsRef refs[2 * HC_WIRE_MAX_TABLES], *ptrs[2 * HC_WIRE_MAX_TABLES];
    struct hc_tensor_src t[3 * HC_WIRE_MAX_TABLES];
    Hetps__TensorRef tr = HETPS__TENSOR_REF__INIT;
    size_t nr, nt;

    for (int push = 0; push < 2; push++) {
        nt = rows_of(c, &c->step_rows[push], s, refs, ptrs, &nr, t);
        for (size_t i = 0; i < nr; i++)
            sent[push] += rowsref_bytes(&refs[i]);
        for (size_t i = 0; i < nt; i++) {
            tr.key = t[i].key;
            tr.offset = t[i].offset;
            tr.length = t[i].length;
            sent[push] += ref_bytes(&tr) + 4 * (uint64_t)t[i].length;
        }
    }
}

int client_step_rows_take(struct pc_client *c, int s,
                          const struct hc_wire_msg *d, size_t first)
{
    uint64_t sent[2] = {0, 0};
    int rv = HC_OK;

    if (c->step_rows[0].n)
        rv = take_rows(c, &c->step_rows[0], s, d, first);
    else if (d->n_tensors != first)
        rv = hc_err_set(HC_ERR_PROTO, "push-and-pull: %s answered %zu "
                        "tensors after the values, no rows were asked for",
                        c->names[s], d->n_tensors - first);
    if (rv != HC_OK)
        return rv;
    step_rows_sent(c, s, sent);
    c->rows_wire[0][0] += sent[0];
    c->rows_wire[1][0] += sent[1];
    for (size_t i = first; i < d->n_tensors; i++)
        c->rows_wire[0][1] += ref_bytes(d->env->tensors[i]) +
                              4 * (uint64_t)d->env->tensors[i]->length;
    return HC_OK;
}

void client_step_rows_end(struct pc_client *c, int ok)
{
    const struct rows_call *k = &c->step_rows[0];

    for (size_t i = 0; ok && i < k->n; i++)
        hc_rowmap_gather(&c->rowmaps[0][i], c->rows_buf[0] + k->off[i],
                         k->dim[i], k->t[i].rows);
    c->step_rows[0].n = c->step_rows[1].n = 0;
}

int client_step_rows_pull_request(struct pc_client *c, int s, uint64_t id,
                                  nng_msg **out)
{
    return rows_request(c, &c->step_rows[0], s, id, out);
}

size_t client_step_rows_pulled(const struct pc_client *c, int s)
{
    const struct rows_call *k = &c->step_rows[0];
    size_t n = 0;

    for (size_t i = 0; i < k->n; i++)
        n += c->rowmaps[0][i].start[s + 1] > c->rowmaps[0][i].start[s];
    return n;
}
