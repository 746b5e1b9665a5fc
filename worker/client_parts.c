/*
 * client_parts.c — a step's push-and-pull in parts (BytePS's partitions):
 * each shard's blocks of the step are cut into parts of about part_bytes,
 * in layout order, and part k travels on lane k — a connection of its
 * own to the shard — so a shard receives, applies and answers one part
 * while the next is on the wire, and several cores copy at once. At most
 * one part per lane: a synchronous shard holds a worker's parts until the
 * last is in, so every part must be in flight together. A joined block
 * (layout.h: a batch norm's moving_variance) is never cut from the block
 * before it.
 *
 * Parts leave in the order a backward pass finishes them, the model's
 * last elements first (BytePS's and P3's priority): with a gradient still
 * being computed (pc_ready), each is made and sent as soon as its
 * elements are final, while backward goes on with the first layers.
 *
 * Each part is its own request (its own id on its lane), made when its
 * lane takes it (encoded from the gradients again for a re-send), checked
 * against the plan, and its values copied into the caller's buffer a part
 * per core. A shard that restarted is joined again and sent every part it
 * did not know, together. See client_impl.h.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_impl.h"
#include "err.h"
#include "log.h"
#include "rpc.h"
#include "wire.h"

size_t client_parts_plan(struct pc_client *c)
{
    size_t total = 0;
    int i;

    for (i = 0; i < c->n; i++) {
        struct shard_plan *p = &c->plan[i];
        uint64_t bytes = 0, each, at = 0;
        uint32_t k, n;

        for (k = 0; k < p->n_blocks; k++)
            bytes += (uint64_t)c->layout.blocks[p->blocks[k]].length * 4;
        n = (uint32_t)((bytes + c->part_bytes - 1) / c->part_bytes);
        if (n > (uint32_t)c->lanes)
            n = (uint32_t)c->lanes;     /* larger parts, one per lane */
        if (n > p->n_blocks)
            n = p->n_blocks;
        if (n == 0 && p->n_blocks)
            n = 1;
        p->n_parts = n;
        /* Cut at block boundaries, each part about an equal share and
         * none empty: a cut leaves a block at least for each part after
         * it (a large last block makes fewer parts). */
        each = n ? (bytes + n - 1) / n : 0;
        p->part_at[0] = 0;
        for (k = 0, n = 0; k + 1 < p->n_blocks && n + 1 < p->n_parts; k++) {
            at += (uint64_t)c->layout.blocks[p->blocks[k]].length * 4;
            if (c->layout.blocks[p->blocks[k + 1]].joined)
                continue;       /* travels with block k */
            if (at >= each * (n + 1) &&
                p->n_blocks - (k + 1) >= p->n_parts - (n + 1))
                p->part_at[++n] = k + 1;
        }
        if (p->n_parts)
            p->n_parts = n + 1;
        p->part_at[p->n_parts] = p->n_blocks;
        total += p->n_parts;
    }
    return total;
}

/* The first element of call j's part: all of the part lies at or after
 * it (a shard's blocks are in layout order). */
static size_t part_low(const struct pc_client *c, int j)
{
    const struct part_call *pcl = &c->pcalls[j];
    const struct shard_plan *p = &c->plan[pcl->shard];

    return c->layout.blocks[p->blocks[p->part_at[pcl->part]]].flat;
}

void client_parts_order(struct pc_client *c)
{
    int j, k;

    for (j = 1; j < c->n_pcalls; j++) {        /* insertion: a few hundred */
        struct part_call pc = c->pcalls[j];
        int peer = c->p_peers[j];
        size_t low = part_low(c, j);

        for (k = j; k > 0 && part_low(c, k - 1) < low; k--) {
            c->pcalls[k] = c->pcalls[k - 1];
            c->p_peers[k] = c->p_peers[k - 1];
        }
        c->pcalls[k] = pc;
        c->p_peers[k] = peer;
    }
}

void pc_ready_init(struct pc_ready *r)
{
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    r->from = 0;
    r->failed = 0;
}

void pc_ready_destroy(struct pc_ready *r)
{
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
}

void pc_ready_reset(struct pc_ready *r, size_t n_params)
{
    pthread_mutex_lock(&r->mu);
    r->from = n_params;
    r->failed = 0;
    pthread_mutex_unlock(&r->mu);
}

void pc_ready_mark(struct pc_ready *r, size_t from)
{
    pthread_mutex_lock(&r->mu);
    if (from < r->from) {
        r->from = from;
        pthread_cond_broadcast(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

void pc_ready_fail(struct pc_ready *r)
{
    pthread_mutex_lock(&r->mu);
    r->failed = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

int client_ready_wait(struct pc_ready *r, size_t at)
{
    int failed;

    if (!r)
        return HC_OK;
    pthread_mutex_lock(&r->mu);
    while (r->from > at && !r->failed)
        pthread_cond_wait(&r->cv, &r->mu);
    failed = r->failed;
    pthread_mutex_unlock(&r->mu);
    return failed ? hc_err_set(HC_ERR_CLOSED, "the gradient to push was "
                               "not computed")
                  : HC_OK;
}

int pc_in_parts(const struct pc_client *c)
{
    return c->have_layout && client_parts_used(c);
}

int client_parts_used(const struct pc_client *c)
{
    for (int i = 0; i < c->n; i++)
        if (c->plan[i].n_parts > 1)
            return 1;
    return 0;
}

int client_take_blocks(const struct pc_client *c, int shard, uint32_t lo,
                       uint32_t hi, size_t extra,
                       const struct hc_wire_msg *d, float *params,
                       const char *what, char *why, size_t why_n)
{
    const struct shard_plan *p = &c->plan[shard];
    uint32_t k;
    int rv;

    if (d->n_tensors != hi - lo + extra) {
        snprintf(why, why_n, "%s: ps:%d sent %zu tensors, asked for %u "
                 "blocks%s", what, shard, d->n_tensors, hi - lo,
                 extra ? " and the step's rows" : "");
        return HC_ERR_PROTO;
    }
    for (k = lo; k < hi; k++) {
        const struct hc_block *b = &c->layout.blocks[p->blocks[k]];
        const Hetps__TensorRef *t = d->env->tensors[k - lo];

        if (t->key != b->var || t->offset != b->offset ||
            t->length != b->length) {
            snprintf(why, why_n, "%s: ps:%d sent block (%u, %llu, %u), asked "
                     "for (%u, %llu, %u)", what, shard, t->key,
                     (unsigned long long)t->offset, t->length, b->var,
                     (unsigned long long)b->offset, b->length);
            return HC_ERR_PROTO;
        }
        if ((rv = hc_wire_take(d, k - lo, params + b->flat)) != HC_OK) {
            snprintf(why, why_n, "%s: ps:%d: %s", what, shard, hc_err_msg());
            return rv;
        }
    }
    return HC_OK;
}

/* One step's parts: call j is part pc->part[j] of shard pc->shard[j]. */
struct parts_job {
    struct pc_client *c;
    const Hetps__Envelope *env;
    const float *grads;
    struct pc_ready *ready;     /* NULL: grads final */
    float *params;
};

/* Part j's request into *out: the part's blocks of the gradients, its
 * ranges to answer with, on its lane (called when its lane takes it, and
 * again for a re-send: the same bytes). */
static int part_request(struct parts_job *jb, int j, nng_msg **out)
{
    struct pc_client *c = jb->c;
    const struct part_call *pcl = &c->pcalls[j];
    struct shard_plan *p = &c->plan[pcl->shard];
    uint32_t lo = p->part_at[pcl->part], hi = p->part_at[pcl->part + 1], k;
    Hetps__Envelope env = *jb->env;
    Hetps__Push push = *jb->env->push;
    int rv;

    *out = NULL;
    if ((rv = client_ready_wait(jb->ready, part_low(c, j))) != HC_OK)
        return rv;
    for (k = lo; k < hi; k++)
        p->src[k].data = jb->grads + c->layout.blocks[p->blocks[k]].flat;
    push.n_ranges = hi - lo;
    push.ranges = p->range_ptrs + lo;
    push.has_part = push.has_parts = 1;
    push.part = pcl->part;
    push.parts = p->n_parts;
    env.push = &push;
    env.request_id = pcl->id;
    env.has_lane = 1;
    env.lane = pcl->part;
    return hc_wire_encode(out, &env, p->src + lo, hi - lo);
}

static int remake_part(void *arg, int j, nng_msg **out)
{
    return part_request(arg, j, out);
}

/* Free every reply and decoded form of the parts' exchange. */
static void release_parts(struct pc_client *c)
{
    for (int j = 0; j < c->n_pcalls; j++) {
        hc_wire_msg_free(&c->p_dec[j]);
        if (c->p_replies[j])
            nng_msg_free(c->p_replies[j]);
        c->p_replies[j] = NULL;
    }
}

/* Send every call at once (each on its own lane; idx NULL), or the calls
 * idx[0 .. n) again, and wait; replies into c->p_replies. */
static int send_calls(struct pc_client *c, struct parts_job *jb,
                      const int *idx, int n, int timeout_ms)
{
    int k, rv;

    if (!idx) {
        release_parts(c);
        for (k = 0; k < n; k++)
            c->p_reqs[k] = NULL;        /* each made when its lane takes it */
        return hc_rpc_call_all_remade(c->rpc, n, c->p_peers, c->p_reqs,
                                      remake_part, jb, c->p_replies,
                                      c->p_errs, timeout_ms);
    }
    /* A re-send to some: their own arrays, mapped back. */
    {
        int peers[64 * HC_MAX_LANES] = {0}, errs[64 * HC_MAX_LANES];
        nng_msg *reqs[64 * HC_MAX_LANES] = {NULL}, *replies[64 * HC_MAX_LANES];

        if (n > 64 * (int)HC_MAX_LANES)
            return hc_err_set(HC_ERR_LIMIT, "push-and-pull: %d parts to "
                              "send again at once", n);
        for (k = 0; k < n; k++) {
            peers[k] = c->p_peers[idx[k]];
            if ((rv = part_request(jb, idx[k], &reqs[k])) != HC_OK) {
                while (k-- > 0)
                    nng_msg_free(reqs[k]);
                return rv;
            }
        }
        rv = hc_rpc_call_all_kept(c->rpc, n, peers, reqs, replies, errs,
                                  timeout_ms);
        for (k = 0; k < n; k++) {
            nng_msg_free(reqs[k]);
            if (c->p_replies[idx[k]])
                nng_msg_free(c->p_replies[idx[k]]);
            c->p_replies[idx[k]] = replies[k];
            c->p_errs[idx[k]] = errs[k];
        }
        return rv;
    }
}

/* Whether call j's reply says its shard does not know this worker (it
 * restarted). Decodes it into c->p_dec[j] (lazily: values are checked as
 * they are taken). */
static int not_joined(struct pc_client *c, int j)
{
    const Hetps__Envelope *e;

    if (!c->p_replies[j])
        return 0;
    if (!c->p_dec[j].env &&
        hc_wire_decode_lazy(nng_msg_body(c->p_replies[j]),
                            nng_msg_len(c->p_replies[j]), c->cl->id,
                            &c->p_dec[j]) != HC_OK)
        return 0;
    e = c->p_dec[j].env;
    return e->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR &&
           e->error->code == HETPS__ERROR_CODE__E_NOT_JOINED;
}

/* Whether shard i's answers this step came from two processes of it: a
 * part answered early (before the step's commit) by one that died before
 * committing, the rest by its restart — every part goes again. */
static int mixed_answers(struct pc_client *c, int i)
{
    uint64_t first = 0;
    int seen = 0;

    for (int j = 0; j < c->n_pcalls; j++) {
        if (c->pcalls[j].shard != i || !c->p_replies[j])
            continue;
        (void)not_joined(c, j);         /* decodes it */
        if (!c->p_dec[j].env)
            continue;
        if (seen++ && c->p_dec[j].env->incarnation != first)
            return 1;
        first = c->p_dec[j].env->incarnation;
    }
    return 0;
}

/* Whether every answer shard i gave this step says it came before the
 * step's commit: the shard never confirmed that the step is stored (its
 * last part of a worker's push always waits for the commit), so the step
 * goes to it again. */
static int none_committed(struct pc_client *c, int i)
{
    int any = 0;

    for (int j = 0; j < c->n_pcalls; j++) {
        const Hetps__Envelope *e;

        if (c->pcalls[j].shard != i || !c->p_replies[j])
            continue;
        (void)not_joined(c, j);         /* decodes it */
        if (!(e = c->p_dec[j].env) ||
            e->payload_case != HETPS__ENVELOPE__PAYLOAD_ACK)
            return 0;
        if (!e->ack->has_uncommitted || !e->ack->uncommitted)
            return 0;
        any = 1;
    }
    return any;
}

/* Join again every shard that forgot this worker and send it all its
 * parts once more (the same ids: one it had applied is answered from its
 * record); the same, without the join, to a shard whose answers came from
 * two of its processes. A few rounds at most. */
static int rejoin_resend(struct pc_client *c, struct parts_job *jb,
                         int timeout_ms)
{
    int idx[64 * HC_MAX_LANES];
    int round, j, i, rv = HC_OK;

    for (round = 0; round < 3; round++) {
        int n = 0;

        for (i = 0; i < c->n && rv == HC_OK; i++) {
            const char *what;
            int forgot = 0;

            for (j = 0; j < c->n_pcalls; j++)
                if (c->pcalls[j].shard == i && not_joined(c, j))
                    forgot = 1;
            if (forgot)
                what = "does not know this worker (it restarted?): joining "
                       "it again and";
            else if (mixed_answers(c, i))
                what = "answered from two of its processes (it restarted "
                       "mid-step):";
            else if (none_committed(c, i))
                what = "answered every part before committing the step:";
            else
                continue;
            hc_warn("ps:%d (%s) %s re-sending the step's parts", i,
                    c->urls[i], what);
            if (forgot && (rv = client_join_one(c, i)) != HC_OK)
                break;
            for (j = 0; j < c->n_pcalls; j++) {
                if (c->pcalls[j].shard != i)
                    continue;
                hc_wire_msg_free(&c->p_dec[j]);
                c->p_taken[j] = 0;      /* its answer comes again */
                if (n < 64 * (int)HC_MAX_LANES)
                    idx[n++] = j;
            }
        }
        if (rv != HC_OK || n == 0)
            return rv;
        if ((rv = send_calls(c, jb, idx, n, timeout_ms)) != HC_OK)
            return rv;
    }
    return HC_OK;
}

/* Call j's reply checked (an Ack answering its id, or an Error whose text
 * is passed on naming the shard) and its values copied into params. */
static int take_part(struct pc_client *c, struct parts_job *jb, int j,
                     char *why, size_t why_n)
{
    const struct part_call *pcl = &c->pcalls[j];
    const struct shard_plan *p = &c->plan[pcl->shard];
    uint32_t lo = p->part_at[pcl->part], hi = p->part_at[pcl->part + 1];
    const struct hc_wire_msg *d = &c->p_dec[j];
    const Hetps__Envelope *e;
    int rv;

    /* Values only once the whole gradient is: until then its computing
     * may still read the parameters. */
    if ((rv = client_ready_wait(jb->ready, 0)) != HC_OK) {
        snprintf(why, why_n, "push-and-pull: %s", hc_err_msg());
        return rv;
    }
    if (!d->env &&
        (rv = hc_wire_decode_lazy(nng_msg_body(c->p_replies[j]),
                                  nng_msg_len(c->p_replies[j]), c->cl->id,
                                  &c->p_dec[j])) != HC_OK) {
        snprintf(why, why_n, "push-and-pull: bad reply from ps:%d (%s): %s",
                 pcl->shard, c->urls[pcl->shard], hc_err_msg());
        return rv;
    }
    e = d->env;
    if (e->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR) {
        rv = hc_wire_error_from_code(e->error->code);
        snprintf(why, why_n, "push-and-pull: ps:%d (%s) refused: %s",
                 pcl->shard, c->urls[pcl->shard], e->error->message);
        return rv == HC_OK ? HC_ERR_REMOTE : rv;
    }
    if (e->request_id != pcl->id ||
        e->payload_case != HETPS__ENVELOPE__PAYLOAD_ACK) {
        snprintf(why, why_n, "push-and-pull: ps:%d answered request %llu "
                 "with a %s to %llu", pcl->shard,
                 (unsigned long long)pcl->id,
                 hc_wire_payload_name(e->payload_case),
                 (unsigned long long)e->request_id);
        return HC_ERR_PROTO;
    }
    return client_take_blocks(c, pcl->shard, lo, hi, 0, d, jb->params,
                              "push-and-pull", why, why_n);
}

static void take_one(void *arg, int j)
{
    struct parts_job *jb = arg;
    struct pc_client *c = jb->c;

    if (!c->p_taken[j])
        c->p_rv[j] = take_part(c, jb, j, c->p_why[j], sizeof c->p_why[j]);
    c->p_taken[j] = 1;
}

/* Whether the whole gradient is final, without waiting. */
static int ready_whole(struct pc_ready *r)
{
    size_t from;

    if (!r)
        return 1;
    pthread_mutex_lock(&r->mu);
    from = r->failed ? 1 : r->from;
    pthread_mutex_unlock(&r->mu);
    return from == 0;
}

/* A part's answer landed while others are on the wire: its values out now
 * — once the whole gradient is computed (a shard answers a part as soon as
 * it is applied, maybe while backward still reads the parameters: then
 * after the call); an answer saying the shard restarted is left for
 * rejoin_resend. */
static void part_landed(void *arg, int j, nng_msg *reply)
{
    struct parts_job *jb = arg;
    struct pc_client *c = jb->c;

    (void)reply;
    if (!not_joined(c, j) && ready_whole(jb->ready))
        take_one(jb, j);
}

int client_parts_step(struct pc_client *c, const Hetps__Envelope *env,
                      const struct pc_grad *g, float *params,
                      struct pc_step *st, int timeout_ms)
{
    struct parts_job jb = {c, env, g->data, g->ready, params};
    uint64_t vmin = UINT64_MAX;
    int i, j, rv, first = -1;

    /* The ids in lane order within each shard: part k's lane carries only
     * it this step, so any increasing order keeps each lane's. */
    for (j = 0; j < c->n_pcalls; j++) {
        c->pcalls[j].id = client_next_id(c);
        c->p_taken[j] = 0;
    }
    /* Each answer's values are taken as it lands, while the others are
     * still being answered. */
    hc_rpc_on_reply(c->rpc, part_landed, &jb);
    rv = send_calls(c, &jb, NULL, c->n_pcalls, timeout_ms);
    hc_rpc_on_reply(c->rpc, NULL, NULL);
    if (rv == HC_OK)
        rv = rejoin_resend(c, &jb, timeout_ms);
    if (rv != HC_OK) {
        release_parts(c);
        return hc_err_set(rv, "push-and-pull: %s", hc_err_msg());
    }
    /* Every part's values out, a part per core. */
    hc_fanout_run(client_big(c) ? c->fan : NULL, c->n_pcalls, take_one, &jb);
    st->has_slice = 0;
    st->late = 0;
    for (j = 0; j < c->n_pcalls; j++)
        if (c->p_rv[j] != HC_OK && first < 0)
            first = j;
    /* A shard's version: its newest part's (async: a later part may be
     * answered before the one that counted the push); the step's, the
     * smallest shard's. */
    for (i = 0; first < 0 && i < c->n; i++) {
        uint64_t shard_v = 0;
        int any = 0;

        for (j = 0; j < c->n_pcalls; j++) {
            const Hetps__Ack *a = c->p_dec[j].env->ack;

            if (c->pcalls[j].shard != i)
                continue;
            any = 1;
            if (a->has_version && a->version > shard_v)
                shard_v = a->version;
        }
        if (any && shard_v < vmin)
            vmin = shard_v;
    }
    for (j = 0; first < 0 && j < c->n_pcalls; j++) {
        const Hetps__Ack *a = c->p_dec[j].env->ack;

        if (a->has_late && a->late)
            st->late = 1;
        /* ps:0's slice (it holds the model's first block): any of its
         * parts' answers carries it. */
        if (c->pcalls[j].shard == 0 && a->has_batch_count) {
            st->has_slice = 1;
            st->offset = a->batch_offset;
            st->count = a->batch_count;
        }
        if (c->pcalls[j].shard == 0 && a->has_job_batch)
            st->job_batch = a->job_batch;
    }
    if (first >= 0)
        rv = hc_err_set(c->p_rv[first], "%s", c->p_why[first]);
    release_parts(c);
    st->version = vmin == UINT64_MAX ? 0 : vmin;
    return rv;
}
