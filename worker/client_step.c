/*
 * client_step.c — a worker's step calls: pull (optionally waiting for the
 * step's conditions), push, and push-and-pull (one round trip per step);
 * and the front door's status. Pulled blocks are checked against each
 * shard's plan and copied straight into the caller's buffer; ps:0's
 * answer gives the worker's slice of a synchronous step's global batch.
 * See client_impl.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"
#include "err.h"
#include "rpc.h"
#include "wire.h"

static int take_values(struct pc_client *c, float *params, struct pc_step *st);

int pc_pull(struct pc_client *c, float *params, uint64_t *version)
{
    struct pc_step st = { 0 };
    int rv = pc_pull_step(c, params, &st, 0);

    if (version)
        *version = st.version;
    return rv;
}

int pc_pull_step(struct pc_client *c, float *params, struct pc_step *st,
                 int wait_ms)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Pull pull = HETPS__PULL__INIT;
    struct hc_sender me;
    uint64_t ids[64], *idp = ids;
    int i, rv;

    if ((rv = client_need_layout(c, "pc_pull")) != HC_OK)
        return rv;
    if (c->n > 64 && !(idp = calloc((size_t)c->n, sizeof *idp)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    st->has_slice = 0;
    client_sender(c, &me);
    hc_wire_init_env(&env, &me, 0);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL;
    env.pull = &pull;
    pull.has_min_version = st->min_version > 0;
    pull.min_version = st->min_version;
    pull.has_clock = 1;
    pull.clock = st->clock;
    pull.has_global_batch = st->global_batch > 0;
    pull.global_batch = st->global_batch;
    pull.has_job_batch = st->job_batch > 0;
    pull.job_batch = st->job_batch;
    for (i = 0; i < c->n; i++) {
        if (!c->plan[i].n_blocks)
            continue;           /* a shard with no block of the model */
        pull.n_ranges = c->plan[i].n_blocks;
        pull.ranges = c->plan[i].range_ptrs;
        idp[i] = env.request_id = client_next_id(c);
        rv = hc_wire_encode(&c->reqs[i], &env, NULL, 0);
        if (rv != HC_OK) {
            client_free_reqs(c);
            goto out;
        }
    }
    rv = client_call(c, idp, HETPS__ENVELOPE__PAYLOAD_ACK, "pull",
                         wait_ms);
    if (rv != HC_OK)
        goto out;
    rv = take_values(c, params, st);
out:
    if (idp != ids)
        free(idp);
    return rv;
}

/* One shard's values into params, on a core of the fan-out: checked
 * against the plan first. */
struct values_job {
    struct pc_client *c;
    float *params;
    int *rv;                    /* (n) */
    char (*why)[256];           /* (n) */
};

static void values_one(void *arg, int i)
{
    const struct values_job *j = arg;
    const struct pc_client *c = j->c;

    j->rv[i] = HC_OK;
    if (c->plan[i].n_blocks)    /* else no values asked: it holds no block */
        j->rv[i] = client_take_blocks(c, i, 0, c->plan[i].n_blocks,
                                      client_step_rows_pulled(c, i),
                                      &c->dec[i], j->params, "pull",
                                      j->why[i], sizeof j->why[i]);
}

/* Copy the values of every shard's answer (in c->dec) into params, check
 * them against the plan, and read the version, the slice (ps:0's) and the
 * late flags; releases the answers. */
static int take_values(struct pc_client *c, float *params, struct pc_step *st)
{
    uint64_t vmin = UINT64_MAX;
    int i, rv = HC_OK;
    int *rvp = c->piece_rv;
    struct values_job job = {.c = c, .params = params, .rv = c->piece_rv,
                             .why = c->piece_why};

    /* A large model's values are copied a shard per core. */
    hc_fanout_run(client_big(c) ? c->fan : NULL, c->n, values_one, &job);

    st->has_slice = 0;
    st->late = 0;
    /* ps:0's slice: it holds the model's first block (the layout gives
     * the largest first to the least loaded, ps:0 first on a tie). */
    if (c->dec[0].env && c->dec[0].env->ack->has_batch_count) {
        st->has_slice = 1;
        st->offset = c->dec[0].env->ack->batch_offset;
        st->count = c->dec[0].env->ack->batch_count;
    }
    if (c->dec[0].env && c->dec[0].env->ack->has_job_batch)
        st->job_batch = c->dec[0].env->ack->job_batch;
    for (i = 0; i < c->n && rv == HC_OK; i++) {
        const struct hc_wire_msg *d = &c->dec[i];

        if (!c->plan[i].n_blocks)
            continue;
        if (rvp[i] != HC_OK) {
            rv = hc_err_set(rvp[i], "%s", c->piece_why[i]);
            break;
        }
        if (d->env->ack->has_version && d->env->ack->version < vmin)
            vmin = d->env->ack->version;
        if (d->env->ack->has_late && d->env->ack->late)
            st->late = 1;
    }
    /* The step's rows, after each answer's values (a shard of rows alone:
     * from its first tensor). */
    for (i = 0; i < c->n && rv == HC_OK; i++)
        if (c->dec[i].env && (c->step_rows[0].n || c->step_rows[1].n))
            rv = client_step_rows_take(c, i, &c->dec[i],
                                       c->plan[i].n_blocks);
    client_release(c);
    st->version = vmin == UINT64_MAX ? 0 : vmin;
    return rv;
}

/* One shard's push, encoded on a core of the fan-out: the envelope's
 * per-shard fields in a copy of its own. */
struct encode_job {
    struct pc_client *c;
    const Hetps__Envelope *env;
    const float *grads;
    const uint64_t *ids;
    int and_pull;
    int rows;                   /* the step's rows ride along (step_rows) */
    int *rv;                    /* (n) */
    char (*why)[256];           /* (n): the message of a failure */
};

/* Shard i's push into *out — its blocks, then its share of the step's
 * rows (client_rows.c) — or, holding no block of the model, its rows
 * alone: a push of rows, or a PullRows when it has only rows to pull
 * (*out NULL: nothing for it). Shard i's plan is touched by one thread
 * at a time: the fan-out's piece i, or a re-send of it (remake_push). */
static int encode_push(const struct encode_job *j, int i, nng_msg **out)
{
    struct pc_client *c = j->c;
    struct shard_plan *p = &c->plan[i];
    Hetps__Envelope env = *j->env;
    Hetps__Push push = *j->env->push;
    Hetps__RowsRef refs[2 * HC_WIRE_MAX_TABLES];
    Hetps__RowsRef *grad[HC_WIRE_MAX_TABLES], *pull[HC_WIRE_MAX_TABLES];
    size_t n_grad = 0, n_pull = 0, nt = 0;
    uint32_t k;

    *out = NULL;
    for (k = 0; k < p->n_blocks; k++)
        p->src[k].data = j->grads + c->layout.blocks[p->blocks[k]].flat;
    if (j->rows)        /* p->src has room for them after the blocks */
        nt = client_step_rows_of(c, i, refs, grad, &n_grad, pull, &n_pull,
                                 p->src + p->n_blocks);
    if (p->n_blocks == 0 && n_grad == 0)
        return client_step_rows_pull_request(c, i, j->ids[i], out);
    push.n_ranges = j->and_pull ? p->n_blocks : 0;
    push.ranges = j->and_pull ? p->range_ptrs : NULL;
    push.n_rows_grad = n_grad;
    push.rows_grad = grad;
    push.n_rows_pull = n_pull;
    push.rows_pull = pull;
    env.push = &push;
    env.request_id = j->ids[i];
    return hc_wire_encode(out, &env, p->src, p->n_blocks + nt);
}

static void encode_one(void *arg, int i)
{
    const struct encode_job *j = arg;

    j->rv[i] = HC_OK;
    if (!j->c->plan[i].n_blocks && !j->rows)
        return;                 /* no block of the model there: no push */
    j->rv[i] = encode_push(j, i, &j->c->reqs[i]);
    if (j->rv[i] != HC_OK)
        snprintf(j->why[i], sizeof j->why[i], "%s", hc_err_msg());
}

/* A large push is not kept for a re-send (hc_rpc_call_all_remade): it is
 * encoded again from the gradients, which stay the caller's through the
 * call — the same bytes, the same request id. */
static int remake_push(void *arg, int i, nng_msg **out)
{
    *out = NULL;
    return encode_push(arg, i, out);
}

/* A push's envelope, the same for every shard: who, the gradient's
 * samples, version and speed, and the step's conditions in *st. */
static void push_env(struct pc_client *c, Hetps__Envelope *env,
                     Hetps__Push *pp, uint32_t samples, uint64_t base_version,
                     float samples_per_s, const struct pc_step *st)
{
    Hetps__Push push = HETPS__PUSH__INIT;
    struct hc_sender me;

    client_sender(c, &me);
    hc_wire_init_env(env, &me, 0);
    push.samples = samples;
    push.has_base_version = 1;
    push.base_version = base_version;
    push.has_samples_per_s = samples_per_s > 0;
    push.samples_per_s = samples_per_s;
    push.has_clock = 1;
    push.clock = st->clock;
    push.has_global_batch = st->global_batch > 0;
    push.global_batch = st->global_batch;
    push.has_job_batch = st->job_batch > 0;
    push.job_batch = st->job_batch;
    push.has_epoch = push.has_batches = st->has_place != 0;
    push.epoch = st->epoch;
    push.batches = st->batches;
    *pp = push;
    env->payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env->push = pp;
}

/*
 * Send one push per shard (its blocks of grads) and wait for the answers,
 * left decoded in c->dec. With `and_pull` each push carries the shard's
 * ranges and the answer carries their values (push-and-pull).
 */
static int send_push(struct pc_client *c, const float *grads, uint32_t samples,
                     uint64_t base_version, float samples_per_s,
                     const struct pc_step *st, int and_pull, int wait_ms)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Push push;
    uint64_t ids[64], *idp = ids;
    struct encode_job job;
    int i, rv;

    if ((rv = client_need_layout(c, "push")) != HC_OK)
        return rv;
    if (c->n > 64 && !(idp = calloc((size_t)c->n, sizeof *idp)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    push_env(c, &env, &push, samples, base_version, samples_per_s, st);
    for (i = 0; i < c->n; i++)
        idp[i] = client_next_id(c);
    job = (struct encode_job){.c = c, .env = &env, .grads = grads,
                              .ids = idp, .and_pull = and_pull,
                              .rows = c->step_rows[0].n ||
                                      c->step_rows[1].n,
                              .rv = c->piece_rv, .why = c->piece_why};
    /* A large model's pushes are encoded a shard per core. */
    hc_fanout_run(client_big(c) ? c->fan : NULL, c->n, encode_one, &job);
    for (i = 0; i < c->n; i++) {
        if (c->piece_rv[i] != HC_OK) {
            rv = hc_err_set(c->piece_rv[i], "%s", c->piece_why[i]);
            client_free_reqs(c);
            goto out;
        }
    }
    c->remake = remake_push;
    c->remake_arg = &job;
    rv = client_call(c, idp, HETPS__ENVELOPE__PAYLOAD_ACK,
                         and_pull ? "push-and-pull" : "push", wait_ms);
    c->remake = NULL;
    c->remake_arg = NULL;
out:
    if (idp != ids)
        free(idp);
    return rv;
}

int pc_push_step(struct pc_client *c, const float *grads, uint32_t samples,
                 uint64_t base_version, float samples_per_s, uint64_t clock,
                 int *late)
{
    struct pc_step st = { .clock = clock };
    int i, rv = send_push(c, grads, samples, base_version, samples_per_s, &st,
                          0, 0);

    if (late)
        *late = 0;
    if (rv != HC_OK)
        return rv;
    for (i = 0; late && i < c->n; i++)
        if (c->dec[i].env && c->dec[i].env->ack->has_late &&
            c->dec[i].env->ack->late)
            *late = 1;
    client_release(c);
    return HC_OK;
}

/* A step in parts with rows (client.h): the rows pushed before it, held
 * by the shards for it, and pulled after it (a failed pull is no failed
 * step: st->rows_pulled stays 0). */
static int parts_with_rows(struct pc_client *c, const Hetps__Envelope *env,
                           const struct pc_grad *g, float *params,
                           struct pc_step *st, int wait_ms)
{
    int rv;

    if (g->n_rows && (rv = pc_push_rows_step(c, g->rows, g->n_rows,
                                             g->samples)) != HC_OK)
        return rv;
    if ((rv = client_parts_step(c, env, g, params, st, wait_ms)) != HC_OK)
        return rv;
    if (st->n_pull_rows) {
        st->rows_pulled = pc_pull_rows(c, st->pull_rows, st->n_pull_rows,
                                       NULL) == HC_OK;
        if (!st->rows_pulled)
            hc_err_clear();
    }
    return HC_OK;
}

/* Push g with the pull's conditions in *st, wait up to wait_ms per
 * attempt, and take the values — with the step's rows, pushed and pulled
 * in the same requests; in parts when the model has them and `parts`
 * (sync and async). */
static int push_pull(struct pc_client *c, const struct pc_grad *g,
                     float *params, struct pc_step *st, int wait_ms,
                     int parts)
{
    int rv;

    st->rows_pulled = 0;
    if (parts && c->have_layout && client_parts_used(c)) {
        Hetps__Envelope env = HETPS__ENVELOPE__INIT;
        Hetps__Push push;

        push_env(c, &env, &push, g->samples, g->base_version,
                 g->samples_per_s, st);
        return parts_with_rows(c, &env, g, params, st, wait_ms);
    }
    if ((g->n_rows || st->n_pull_rows) &&
        (rv = client_step_rows_plan(c, g, st)) != HC_OK)
        return rv;
    if ((rv = client_ready_wait(g->ready, 0)) != HC_OK) {
        client_step_rows_end(c, 0);
        return hc_err_set(rv, "push-and-pull: %s", hc_err_msg());
    }
    rv = send_push(c, g->data, g->samples, g->base_version,
                   g->samples_per_s, st, 1, wait_ms);
    if (rv == HC_OK)
        rv = take_values(c, params, st);
    client_step_rows_end(c, rv == HC_OK);
    st->rows_pulled = rv == HC_OK && st->n_pull_rows > 0;
    return rv;
}

int pc_sync_step(struct pc_client *c, const struct pc_grad *g, float *params,
                 struct pc_step *st)
{
    st->has_place = 0;          /* a sync job's place is its version */
    if (g->n_rows || st->n_pull_rows)
        return hc_err_set(HC_ERR_INVAL, "pc_sync_step: a synchronous step "
                          "carries no rows (pc_push_rows before it, "
                          "pc_pull_rows after it)");
    return push_pull(c, g, params, st, c->o.wait_ms, 1);
}

int pc_ssp_step(struct pc_client *c, const struct pc_grad *g, float *params,
                struct pc_step *st)
{
    st->global_batch = 0;       /* no slices outside sync */
    /* ssp counts a worker's pushes as its clock: one message per shard. */
    return push_pull(c, g, params, st, c->o.wait_ms, 0);
}

int pc_async_step(struct pc_client *c, const struct pc_grad *g, float *params,
                  struct pc_step *st)
{
    st->global_batch = 0;
    return push_pull(c, g, params, st, 0, 1);
}

/* The client's states are the wire's, in the same order. */
_Static_assert(PC_MEMBER_UNKNOWN == (int)HC_MEMBER_UNKNOWN &&
               PC_MEMBER_JOINED == (int)HC_MEMBER_JOINED &&
               PC_MEMBER_LEFT == (int)HC_MEMBER_LEFT &&
               PC_MEMBER_DEAD == (int)HC_MEMBER_DEAD,
               "enum pc_member_state must follow enum hc_member_state");

const char *pc_member_state_name(enum pc_member_state s)
{
    return hc_member_state_name((enum hc_member_state)s);
}

int pc_status(struct pc_client *c, struct pc_shard_status *out)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Status st = HETPS__STATUS__INIT;
    uint64_t *ids = calloc((size_t)c->n, sizeof *ids);
    int i, rv;

    memset(out, 0, sizeof *out * (size_t)c->n);
    if (!ids)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    hc_wire_init_env(&env, &c->me, 0);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS;
    env.status = &st;
    rv = client_simple_reqs(c, &env, ids);
    if (rv != HC_OK)
        goto out;
    hc_rpc_call_all(c->rpc, c->n, c->peers, c->reqs, c->replies, c->errs, 0);
    for (i = 0; i < c->n; i++) {
        struct pc_shard_status *o = &out[i];
        const Hetps__StatusReply *r;
        size_t k;

        c->reqs[i] = NULL;
        if (!c->replies[i]) {
            snprintf(o->error, sizeof o->error, "%s", hc_strerror(c->errs[i]));
            continue;
        }
        if (hc_wire_decode(nng_msg_body(c->replies[i]),
                           nng_msg_len(c->replies[i]), c->cl->id,
                           &c->dec[i]) != HC_OK) {
            snprintf(o->error, sizeof o->error, "bad reply: %s", hc_err_msg());
            continue;
        }
        if (c->dec[i].env->payload_case != HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY) {
            snprintf(o->error, sizeof o->error, "answered with a %s",
                     hc_wire_payload_name(c->dec[i].env->payload_case));
            continue;
        }
        r = c->dec[i].env->status_reply;
        o->up = 1;
        o->incarnation = r->incarnation;
        o->version = r->version;
        o->requests = r->requests;
        o->duplicates = r->duplicates;
        o->rejected = r->rejected;
        o->uptime_ms = r->uptime_ms;
        o->late = r->late;
        o->stale = r->stale;
        o->nonfinite = r->nonfinite;
        o->max_ahead = r->max_ahead;
        o->waiting = r->waiting;
        snprintf(o->waiting_for, sizeof o->waiting_for, "%s",
                 r->waiting_for ? r->waiting_for : "");
        o->waiting_s = r->waiting_s;
        snprintf(o->mode, sizeof o->mode, "%s", r->mode ? r->mode : "");
        o->block_elems = r->has_block_elems ? r->block_elems : 0;
        for (k = 0; k < r->n_tables && k < PC_MAX_TABLES; k++) {
            o->tables[k].var = r->tables[k]->variable;
            o->tables[k].rows = r->tables[k]->rows;
        }
        o->n_tables = (int)k;
        if (o->block_elems && !c->store_block)
            c->store_block = o->block_elems;
        o->members = calloc(r->n_members + 1, sizeof *o->members);
        if (!o->members)
            continue;
        for (k = 0; k < r->n_members; k++) {
            const Hetps__Member *m = r->members[k];
            struct pc_member *pm = &o->members[k];

            pm->worker = (int)m->task->index;
            pm->state = (enum pc_member_state)hc_member_state_parse(m->state);
            pm->incarnation = m->incarnation;
            pm->last_seen_ms = m->last_seen_ms;
            pm->requests = m->requests;
            pm->duplicates = m->duplicates;
            pm->clock = m->clock;
            pm->late = m->late;
            pm->samples_per_s = m->samples_per_s;
            pm->share = m->share;
            pm->lag_ms = m->has_lag_ms ? m->lag_ms : -1.0f;
            pm->has_place = m->has_epoch && m->has_batches;
            pm->epoch = m->epoch;
            pm->batches = m->batches;
            snprintf(pm->devices, sizeof pm->devices, "%s",
                     m->devices ? m->devices : "");
        }
        o->n_members = (int)r->n_members;
    }
    client_release(c);
out:
    free(ids);
    return rv;
}

void pc_status_free(struct pc_shard_status *st, int n)
{
    int i;

    for (i = 0; i < n; i++) {
        free(st[i].members);
        st[i].members = NULL;
    }
}
