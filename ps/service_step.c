/*
 * service_step.c — pulls and pushes as the consistency mode judges them
 * (ps/mode.h): a pull is answered now, or its message and request are kept
 * until the mode allows it (sync: the next version; ssp: the slowest
 * worker within the bound) and answered by serve_pending; a push is
 * applied, added to the synchronous step, or counted as late, and a
 * push-and-pull's answer is the pull the mode allows after it. See
 * service_impl.h for the other service files.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "fault.h"
#include "log.h"
#include "rpc.h"
#include "service_impl.h"
#include "shard.h"
#include "mode.h"
#include "wire.h"

/* Answer a pull now: values, version and (sync, from any shard; workers
 * use ps:0's) the worker's slice of the step's global batch. */
nng_msg *service_answer_pull(struct ps_service *s,
                             const struct hc_wire_msg *in, int late,
                             struct answer_info *info)
{
    const Hetps__Envelope *e = in->env;
    int is_push = e->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH;
    int has_gb = is_push ? e->push->has_global_batch : e->pull->has_global_batch;
    uint32_t gb = is_push ? e->push->global_batch : e->pull->global_batch;
    uint32_t jb = is_push ? (e->push->has_job_batch ? e->push->job_batch : 0)
                          : (e->pull->has_job_batch ? e->pull->job_batch : 0);
    struct ps_pull_extra extra = { 0 };
    nng_msg *reply = NULL;
    int rv;

    extra.late = late;
    if (ps_mode_in_steps(s->sync) && has_gb &&
        e->sender->job == HETPS__JOB__JOB_WORKER) {
        extra.has_slice = 1;
        if (jb)
            extra.job_batch = ps_mode_job_batch(s->sync, jb);
        ps_mode_assign(s->sync, (int)e->sender->index, gb,
                       ps_shard_version(s->shard), &extra.offset,
                       &extra.count);
    }
    if (info) {
        info->valid = 1;
        info->version = ps_shard_version(s->shard);
        info->extra = extra;
    }
    rv = ps_shard_answer_pull(s->shard, in, &s->me, &extra, &reply);
    if (rv != HC_OK) {
        if (info)
            info->valid = 0;
        return service_error_reply(s, in->env->request_id,
                                   hc_wire_error_code(rv), hc_err_msg());
    }
    if (extra.has_slice)
        ps_mode_answered(s->sync, (int)e->sender->index, extra.count,
                         hc_now_s());
    return reply;
}

void service_record_answered(struct ps_record *r,
                             const struct answer_info *info)
{
    ps_record_answered(r, info->version);
    if (info->extra.late)
        r->flags |= PS_REC_LATE;
    if (info->extra.has_slice) {
        r->flags |= PS_REC_SLICE;
        r->slice_offset = info->extra.offset;
        r->slice_count = info->extra.count;
    }
    r->job_batch = info->extra.job_batch;
}

/* The push record of worker w if it still names in's request (the worker
 * may have joined again, or sent a newer one, meanwhile). With s->mu. */
static struct ps_record *push_record(struct ps_service *s,
                                     const struct hc_wire_msg *in)
{
    uint32_t w = in->env->sender->index;
    struct ps_record *r;

    if (w >= (uint32_t)s->n_members)
        return NULL;
    r = &s->members[w].rec[REC_PUSH + service_lane(in->env)];
    if (r->incarnation != in->env->incarnation ||
        r->request_id != in->env->request_id)
        return NULL;
    return r;
}

/* A push's request answered later (kept, or applied outside s->mu): its
 * record says so, if it still names it. With s->mu. */
static void record_later(struct ps_service *s, const struct hc_wire_msg *in,
                         const struct answer_info *info)
{
    struct ps_record *r = push_record(s, in);

    if (r && info->valid)
        service_record_answered(r, info);
}

nng_msg *service_answer_again(struct ps_service *s,
                              const struct hc_wire_msg *in,
                              const struct ps_record *r)
{
    const Hetps__Envelope *e = in->env;
    struct ps_pull_extra extra = { 0 };
    nng_msg *reply = NULL;
    int rv;

    if (r->kind != PS_REQ_PUSH ||
        e->payload_case != HETPS__ENVELOPE__PAYLOAD_PUSH ||
        !hc_wire_push_pulls(e->push))
        return service_ack_at(s, e->request_id, r->version,
                              r->flags & PS_REC_LATE);
    /* Moved on, or a slice to give that the record does not hold (one
     * read back after a restart): the values and the slice now. */
    if (ps_shard_version(s->shard) != r->version ||
        (!(r->flags & PS_REC_SLICE) && e->push->has_global_batch &&
         ps_mode_in_steps(s->sync)))
        return service_answer_pull(s, in, r->flags & PS_REC_LATE, NULL);
    extra.late = (r->flags & PS_REC_LATE) != 0;
    extra.has_slice = (r->flags & PS_REC_SLICE) != 0;
    extra.offset = r->slice_offset;
    extra.count = r->slice_count;
    extra.job_batch = r->job_batch;
    rv = ps_shard_answer_pull(s->shard, in, &s->me, &extra, &reply);
    if (rv != HC_OK)
        return service_error_reply(s, e->request_id, hc_wire_error_code(rv),
                                   hc_err_msg());
    return reply;
}

/* Whether the mode lets a pull — or the pull half of a push-and-pull,
 * which asks for the version after its push — be answered now. */
static void pull_wants(const struct ps_service *s, const struct hc_wire_msg *in,
                       uint64_t *min_version, uint64_t *clock)
{
    const Hetps__Envelope *e = in->env;

    if (e->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH) {
        const Hetps__Push *p = e->push;

        *min_version = ps_mode_in_steps(s->sync) && p->has_base_version
                           ? p->base_version + 1 : 0;
        *clock = (p->has_clock ? p->clock : 0) + 1;
    } else {
        *min_version = e->pull->has_min_version ? e->pull->min_version : 0;
        *clock = e->pull->has_clock ? e->pull->clock : 0;
    }
}

static int pull_ready(struct ps_service *s, const struct hc_wire_msg *in)
{
    uint64_t min_version, clock;

    pull_wants(s, in, &min_version, &clock);
    return ps_mode_pull_ready(s->sync, (int)in->env->sender->index,
                              min_version, clock, ps_shard_version(s->shard));
}

/* The open step's gradients lent from msg are copied into its sum (msg
 * is about to go). Only a mode that lends messages needs it: the others
 * need not wait for the writer. */
static void give_back(struct ps_service *s, nng_msg *msg)
{
    if (!ps_mode_lends_messages(s->sync))
        return;
    pthread_mutex_lock(&s->wmu);
    ps_shard_unlend(s->shard, nng_msg_body(msg), nng_msg_len(msg));
    pthread_mutex_unlock(&s->wmu);
}

/* Free a kept request's message; a sync step's gradients lent from it
 * (ps_shard_accumulate) are copied into the step's sum first. */
void service_free_kept(struct ps_service *s, nng_msg *msg)
{
    give_back(s, msg);
    nng_msg_free(msg);
}

/* Keep a request (pull or push-and-pull) to answer when the mode allows;
 * held: a part of a push whose other parts are still to come. A worker
 * has at most one pull kept and one push per lane: a newer one replaces
 * it. */
static int defer(struct ps_service *s, const struct hc_wire_msg *in,
                 nng_msg *msg_in, hc_rpc_req *req, int held)
{
    int w = (int)in->env->sender->index, i;
    int is_push = in->env->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH;
    uint32_t lane = service_lane(in->env);

    for (i = 0; i < s->n_pending; i++) {
        if (s->pending[i].worker == w && s->pending[i].is_push == is_push &&
            (!is_push || s->pending[i].lane == lane)) {
            hc_rpc_reply(s->pending[i].req, NULL);
            service_free_kept(s, s->pending[i].msg);
            s->pending[i] = s->pending[--s->n_pending];
            break;
        }
    }
    if (s->n_pending == s->cap_pending) {
        int cap = s->cap_pending ? 2 * s->cap_pending : 16;
        struct pending *p = realloc(s->pending, (size_t)cap * sizeof *p);

        if (!p)
            return hc_err_set(HC_ERR_NOMEM, "out of memory for waiting pulls");
        s->pending = p;
        s->cap_pending = cap;
    }
    s->pending[s->n_pending].req = req;
    s->pending[s->n_pending].msg = msg_in;
    s->pending[s->n_pending].worker = w;
    s->pending[s->n_pending].is_push = is_push;
    s->pending[s->n_pending].lane = lane;
    s->pending[s->n_pending].held = held;
    s->pending[s->n_pending].early = 0;
    s->pending[s->n_pending].request_id = in->env->request_id;
    s->pending[s->n_pending].t0 = hc_now_s();
    pull_wants(s, in, &s->pending[s->n_pending].min_version,
               &s->pending[s->n_pending].clock);
    s->n_pending++;
    return HC_OK;
}

/* A pull: answered now, or kept (the message and the request) until the
 * mode allows it. */
nng_msg *service_serve_pull(struct ps_service *s, const struct hc_wire_msg *in,
                            nng_msg *msg_in, hc_rpc_req *req, int *deferred,
                            int *outside)
{
    if (pull_ready(s, in)) {
        if (!ps_mode_in_steps(s->sync)) {
            /* A snapshot and no step's slice: no need to hold s->mu. */
            *outside = 1;
            return NULL;
        }
        return service_answer_pull(s, in, 0, NULL);
    }
    if (defer(s, in, msg_in, req, 0) != HC_OK)
        return service_error_reply(s, in->env->request_id,
                                   HETPS__ERROR_CODE__E_LIMIT, hc_err_msg());
    *deferred = 1;
    return NULL;
}

/* Answer every kept pull the mode now allows. */
static void serve_pending(struct ps_service *s)
{
    int i = 0;

    while (i < s->n_pending) {
        struct pending *p = &s->pending[i];
        struct hc_wire_msg in;
        nng_msg *reply;

        /* Decoded again only once it can be answered; its checksums were
         * checked when it arrived. */
        if (p->held ||
            !ps_mode_pull_ready(s->sync, p->worker, p->min_version, p->clock,
                                ps_shard_version(s->shard))) {
            i++;
            continue;
        }
        if (hc_wire_redecode(nng_msg_body(p->msg), nng_msg_len(p->msg),
                             s->cl->id, &in) != HC_OK) {
            hc_rpc_reply(p->req, NULL);
        } else {
            struct answer_info info;

            reply = service_answer_pull(s, &in, 0, &info);
            if (p->is_push)
                record_later(s, &in, &info);
            hc_wire_msg_free(&in);
            service_metrics_request(s, p->is_push
                                           ? HETPS__ENVELOPE__PAYLOAD_PUSH
                                           : HETPS__ENVELOPE__PAYLOAD_PULL,
                                    nng_msg_len(p->msg),
                                    reply ? nng_msg_len(reply) : 0,
                                    hc_now_s() - p->t0);
            hc_rpc_reply(p->req, reply);
        }
        service_free_kept(s, p->msg);
        *p = s->pending[--s->n_pending];
    }
}

static int grow_early(struct ps_service *s)
{
    int cap = s->cap_early ? 2 * s->cap_early : 16;
    struct pending *e = realloc(s->early, (size_t)cap * sizeof *e);

    if (!e)
        return HC_ERR_NOMEM;    /* answered after the commit instead */
    s->early = e;
    s->cap_early = cap;
    return HC_OK;
}

/* Answer the parts take_early took, from the open step (outside s->mu:
 * each waits for the store's step thread). The version is the one they
 * wait for, the open step's; a part whose values cannot be read at it (the
 * step failed) gets no answer: its worker sends it again and is answered
 * from its record after the commit. */
static void answer_early(struct ps_service *s, struct pending *e, int n)
{
    for (int i = 0; i < n; i++) {
        struct hc_wire_msg in;
        nng_msg *reply = NULL;

        if (hc_wire_redecode(nng_msg_body(e[i].msg), nng_msg_len(e[i].msg),
                             s->cl->id, &in) == HC_OK) {
            if (ps_shard_answer_early(s->shard, &in, &s->me, e[i].min_version,
                                      &reply) != HC_OK)
                hc_warn("shard ps:%d: a part of worker:%d's push answered "
                        "after the step instead: %s", s->conf.shard,
                        e[i].worker, hc_err_msg());
            hc_wire_msg_free(&in);
        }
        service_metrics_request(s, HETPS__ENVELOPE__PAYLOAD_PUSH,
                                nng_msg_len(e[i].msg),
                                reply ? nng_msg_len(reply) : 0,
                                hc_now_s() - e[i].t0);
        hc_rpc_reply(e[i].req, reply);
        if (reply) {
            atomic_fetch_add(&s->early_sent, 1);
            if (s->conf.metrics)
                hc_series_add(s->met.early, 1);
        }
    }
}

/* An early answer's message kept until its step is applied (its lent
 * gradient is read again if the step must be redone); with s->mu. */
static void keep_spent(struct ps_service *s, nng_msg *msg)
{
    if (s->n_spent == s->cap_spent) {
        int cap = s->cap_spent ? 2 * s->cap_spent : 16;
        nng_msg **a = realloc(s->spent, (size_t)cap * sizeof *a);

        if (!a) {
            service_free_kept(s, msg);  /* its gradient copied first */
            return;
        }
        s->spent = a;
        s->cap_spent = cap;
    }
    s->spent[s->n_spent++] = msg;
}

/* A complete synchronous step is marked due (service_unlock applies it);
 * the pulls the mode allows now are answered. */
void service_advance(struct ps_service *s)
{
    uint64_t total;

    if (ps_mode_in_steps(s->sync) && s->applying == STEP_NONE &&
        ps_mode_step_ready(s->sync, ps_shard_version(s->shard), &total)) {
        s->applying = STEP_DUE;
        s->apply_total = total;
    }
    serve_pending(s);
}

void service_lock_step(struct ps_service *s)
{
    pthread_mutex_lock(&s->mu);
    while (s->applying != STEP_NONE)
        pthread_cond_wait(&s->applied, &s->mu);
}

/* The records of the pushes in the step about to be applied, into
 * s->step_recs (none when it cannot be had: the step is applied all the
 * same, and a re-send after a restart is judged by the mode). With s->mu. */
static size_t step_records(struct ps_service *s)
{
    struct ps_record *r = realloc(s->step_recs, (size_t)s->n_members *
                                                    PS_RECORD_LANES * sizeof *r +
                                                1);
    size_t n = 0;
    int i;

    if (r)
        s->step_recs = r;
    for (i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];

        for (uint32_t l = 0; r && l < PS_RECORD_LANES; l++)
            if ((m->in_step >> l & 1u) && m->rec[REC_PUSH + l].request_id)
                r[n++] = m->rec[REC_PUSH + l];
        m->in_step = 0;
    }
    return n;
}

/* The step committed (ok) or failed: the records of the pushes answered
 * before it say so now (answered at its version: a re-send is answered
 * from the store from now on; before, it waited as one in flight). */
static void early_recorded(struct ps_service *s, int ok)
{
    for (int i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];

        for (uint32_t l = 0; ok && l < PS_RECORD_LANES; l++) {
            struct ps_record *r = &m->rec[REC_PUSH + l];

            if ((m->early >> l & 1u) && !(r->flags & PS_REC_ANSWERED))
                ps_record_answered(r, ps_shard_version(s->shard));
        }
        m->early = 0;
    }
}

void service_unlock(struct ps_service *s)
{
    while (s->applying == STEP_DUE) {
        uint64_t total = s->apply_total;
        void (*hook)(void *) = s->apply_hook;
        void *hook_arg = s->apply_hook_arg;
        double t0 = hc_now_s();
        size_t n_recs = step_records(s);
        int rv;

        s->applying = STEP_APPLYING;
        pthread_mutex_unlock(&s->mu);
        pthread_mutex_lock(&s->wmu);
        if (hook)
            hook(hook_arg);
        if (atomic_exchange(&s->early_sent, 0) > 0)
            ps_fault_point("step:before_commit");
        rv = ps_shard_apply_step(s->shard, total, s->step_recs, n_recs);
        pthread_mutex_unlock(&s->wmu);
        hc_series_observe(s->met.apply, hc_now_s() - t0);
        if (rv != HC_OK)
            hc_error("cannot apply step %llu: %s",
                     (unsigned long long)ps_shard_version(s->shard),
                     hc_err_msg());
        pthread_mutex_lock(&s->mu);
        early_recorded(s, rv == HC_OK);
        while (s->n_spent > 0)
            nng_msg_free(s->spent[--s->n_spent]);
        ps_mode_step_done(s->sync);
        s->applying = STEP_NONE;
        pthread_cond_broadcast(&s->applied);
        service_advance(s);     /* the pulls it frees; the next step */
    }
    if (s->n_early) {
        /* Taken out whole (another request may take more meanwhile);
         * the array comes back for reuse unless one grew in its place. */
        struct pending *e = s->early;
        int n = s->n_early, cap = s->cap_early;

        s->early = NULL;
        s->n_early = s->cap_early = 0;
        pthread_mutex_unlock(&s->mu);
        answer_early(s, e, n);
        pthread_mutex_lock(&s->mu);
        for (int i = 0; i < n; i++)
            keep_spent(s, e[i].msg);
        if (!s->early) {
            s->early = e;
            s->cap_early = cap;
        } else {
            free(e);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

/* The first tensor element of a push that is NaN or ±Inf, as its tensor
 * index and element; 0 when every one is finite. on_request decodes every
 * message whole, and hc_wire_decode finds it in a push's CRC32C pass. */
static int find_nonfinite(const struct hc_wire_msg *in, size_t *t, uint32_t *e)
{
    *t = in->nonfinite_t;
    *e = in->nonfinite_e;
    return in->finite_checked && in->nonfinite_t < in->n_tensors;
}

/* ---- a synchronous step's push in parts ------------------------------ */

/* A part of a push to a synchronous step (Push.parts > 1): held until
 * the worker's other parts are in, so the step counts the push once, whole
 * — the mode judges it then, and every part is added to the step's sum or
 * answered as late together. */
static int held_part(const struct ps_service *s, const struct hc_wire_msg *in)
{
    const Hetps__Push *p = in->env->push;

    return ps_mode_in_steps(s->sync) && p->has_parts && p->parts > 1;
}

/* Let go of worker w's held parts without an answer (a part of another
 * step or process came: these can never be whole; their sender re-sends
 * what it still wants). */
static void drop_held(struct ps_service *s, int w)
{
    int i = 0;

    while (i < s->n_pending) {
        struct pending *p = &s->pending[i];

        if (p->worker != w || !p->held) {
            i++;
            continue;
        }
        hc_rpc_reply(p->req, NULL);
        service_free_kept(s, p->msg);
        *p = s->pending[--s->n_pending];
    }
}

/* Whether in's part may go into the open step as it arrives, before the
 * worker's other parts: the step waits for every worker (no backups) and
 * this part is for it — so the whole push will count, and a block every
 * worker gave is final (ps_shard_apply_ready). Else the part is held. */
static int part_now(const struct ps_service *s, const struct hc_wire_msg *in)
{
    const Hetps__Push *p = in->env->push;
    uint64_t v = ps_shard_version(s->shard);

    struct ps_store *st = ps_shard_store(s->shard);
    uint32_t tables = 0;

    /* A model with tables holds rows pushes in the store meanwhile
     * (ps_store_rows_hold): no step may hold its writer open. */
    if (st)
        ps_store_tables(st, &tables);
    return p->has_base_version && p->base_version == v &&
           ps_mode_expected(s->sync, v) > 0 && tables == 0;
}

/* Add in's part to the open step now, and send to the store every block
 * that all the step's workers have given. With s->mu. */
static int add_part(struct ps_service *s, const struct hc_wire_msg *in)
{
    uint64_t v = ps_shard_version(s->shard);
    int rv;

    pthread_mutex_lock(&s->wmu);
    rv = ps_shard_accumulate(s->shard, in, 1);
    if (rv == HC_OK)
        ps_shard_apply_ready(s->shard,
                             (uint32_t)ps_mode_expected(s->sync, v));
    pthread_mutex_unlock(&s->wmu);
    if (rv == HC_OK)
        s->members[in->env->sender->index].in_step |=
            1u << service_lane(in->env);
    return rv;
}

/* Take from s->pending every early part whose blocks the open step has
 * applied: service_unlock answers them outside s->mu, before the step
 * commits. With s->mu. */
static void take_early(struct ps_service *s)
{
    int i = 0;

    pthread_mutex_lock(&s->wmu);
    while (i < s->n_pending) {
        struct pending *p = &s->pending[i];
        struct hc_wire_msg in;
        int ready = 0;

        if (p->early && !p->held &&
            hc_wire_redecode(nng_msg_body(p->msg), nng_msg_len(p->msg),
                             s->cl->id, &in) == HC_OK) {
            ready = ps_shard_applied(s->shard, &in);
            hc_wire_msg_free(&in);
        }
        if (!ready || (s->n_early == s->cap_early && grow_early(s) != HC_OK)) {
            i++;
            continue;
        }
        s->members[p->worker].early |= 1u << p->lane;
        s->early[s->n_early++] = *p;
        *p = s->pending[--s->n_pending];
    }
    pthread_mutex_unlock(&s->wmu);
}

/* Count in's part; 1 when it is the worker's last of its push. */
static int last_part(struct ps_service *s, const struct hc_wire_msg *in)
{
    const Hetps__Push *p = in->env->push;
    int w = (int)in->env->sender->index;
    struct member *m = &s->members[w];
    uint64_t base = p->has_base_version ? p->base_version : 0;

    if (m->parts_base != base || m->parts_want != p->parts ||
        m->parts_incarnation != in->env->incarnation) {
        drop_held(s, w);
        m->parts_base = base;
        m->parts_want = p->parts;
        m->parts_incarnation = in->env->incarnation;
        m->parts_in = 0;
    }
    if (++m->parts_in < m->parts_want)
        return 0;
    m->parts_in = 0;
    return 1;
}

/* The push of worker w is whole and judged v (why: a refusal's reason):
 * its held parts join the step's sum (lent, as a push-and-pull's), or are
 * answered as late, or refused. Returns HC_OK, or the first failure of an
 * addition to the sum. */
static int release_held(struct ps_service *s, int w, enum ps_push_verdict v,
                        const char *why)
{
    int i = 0, rv = HC_OK;

    while (i < s->n_pending) {
        struct pending *p = &s->pending[i];
        struct hc_wire_msg in;
        struct answer_info info;
        nng_msg *reply = NULL;

        if (p->worker != w || !p->held) {
            i++;
            continue;
        }
        if (hc_wire_redecode(nng_msg_body(p->msg), nng_msg_len(p->msg),
                             s->cl->id, &in) != HC_OK) {
            hc_rpc_reply(p->req, NULL);
            service_free_kept(s, p->msg);
            *p = s->pending[--s->n_pending];
            continue;
        }
        if (v == PS_PUSH_ACCUMULATE) {
            int r;

            pthread_mutex_lock(&s->wmu);
            r = ps_shard_accumulate(s->shard, &in, 1);
            pthread_mutex_unlock(&s->wmu);
            if (r == HC_OK) {
                s->members[w].in_step |= 1u << p->lane;
                p->held = 0;    /* now a push-and-pull waiting for the step */
                hc_wire_msg_free(&in);
                i++;
                continue;
            }
            if (rv == HC_OK)
                rv = r;
            reply = service_error_reply(s, in.env->request_id,
                                        hc_wire_error_code(r), hc_err_msg());
        } else if (v == PS_PUSH_LATE) {
            reply = service_answer_pull(s, &in, 1, &info);
            record_later(s, &in, &info);
        } else {
            reply = service_error_reply(s, in.env->request_id,
                                        HETPS__ERROR_CODE__E_STALE, why);
        }
        hc_wire_msg_free(&in);
        hc_rpc_reply(p->req, reply);
        service_free_kept(s, p->msg);
        *p = s->pending[--s->n_pending];
    }
    return rv;
}

/* A push: judged by the mode, then applied, added to the step, or counted
 * as late. */
/* One NaN applied poisons the store for good: a push holding one is
 * refused before it counts for anything (the sync step, the record). */
static int refuse_nonfinite(struct ps_service *s, const struct hc_wire_msg *in)
{
    const Hetps__TensorRef *t;
    size_t bad_t;
    uint32_t bad_e;

    if (s->conf.allow_nonfinite || !find_nonfinite(in, &bad_t, &bad_e))
        return HC_OK;
    t = in->env->tensors[bad_t];
    if (s->nonfinite++ < 10 || s->nonfinite % 1000 == 0)
        hc_warn("refused a push from worker:%u (request %llu): variable "
                "key %u element %llu is %s (%llu refused so far; "
                "--allow-nonfinite keeps them)", in->env->sender->index,
                (unsigned long long)in->env->request_id, t->key,
                (unsigned long long)(t->offset + bad_e),
                isnan(in->data[bad_t][bad_e]) ? "NaN" : "infinite",
                (unsigned long long)s->nonfinite);
    return hc_err_set(HC_ERR_INVAL, "push refused: variable key %u element "
                      "%llu of the gradient is %s; the store is unchanged "
                      "(the worker's training diverged: lower the learning "
                      "rate)", t->key, (unsigned long long)(t->offset + bad_e),
                      isnan(in->data[bad_t][bad_e]) ? "NaN" : "infinite");
}

/*
 * Async, ssp: a push this shard applied before the worker's process
 * restarted. The new process resumes from the least place of its shards
 * (pc_place), so a shard its old one's last push reached gets that step
 * again. A push's parts each record its place on their lane, and one
 * process's places grow push by push (a repeat with the same id is
 * answered from its record before this): a place on the lane's record at
 * or past the push's means this part was applied.
 */
static int applied_before(struct ps_service *s, const struct hc_wire_msg *in)
{
    const Hetps__Push *p = in->env->push;
    struct ps_record rec;

    if (ps_mode_in_steps(s->sync) || !p->has_epoch || !p->has_batches)
        return 0;
    if (ps_shard_record(s->shard, (int)in->env->sender->index,
                        service_lane(in->env), &rec) != HC_OK) {
        hc_err_clear();         /* none yet: its first push */
        return 0;
    }
    return (rec.flags & PS_REC_PLACE) &&
           (p->epoch < rec.epoch ||
            (p->epoch == rec.epoch && p->batches <= rec.batches));
}

int service_serve_push(struct ps_service *s, const struct hc_wire_msg *in,
                       nng_msg *msg_in, hc_rpc_req *req, int *deferred,
                       int *outside, nng_msg **reply,
                       struct answer_info *info)
{
    const Hetps__Push *p = in->env->push;
    int w = (int)in->env->sender->index, rv, late = 0, lent = 0, held = 0;
    int and_pull = hc_wire_push_pulls(p), added = 0;
    char why[512];
    enum ps_push_verdict v;

    if ((rv = refuse_nonfinite(s, in)) != HC_OK)
        return rv;
    if (ps_mode_in_steps(s->sync) && (p->n_rows_grad || p->n_rows_pull))
        /* Its rows are held by their own PushRows, and the next slice's
         * ids are not known before the step's answer. */
        return hc_err_set(HC_ERR_UNSUPPORTED, "a push to a synchronous "
                          "step carries rows (rows_grad, rows_pull): sync "
                          "sends them as PushRows before the step and "
                          "PullRows after it");
    if (applied_before(s, in)) {
        /* Answered at the version now, not applied again; the rows it
         * held for this step (applied with it before) are dropped. */
        hc_info("worker:%d's push of epoch %u batch %u was applied here "
                "before its process restarted: answered, not applied "
                "again", w, p->epoch + 1, p->batches);
        if (!(p->has_part && p->part > 0)) {    /* the rows join part 0 */
            pthread_mutex_lock(&s->wmu);
            rv = ps_shard_drop_held(s->shard, (uint32_t)w);
            pthread_mutex_unlock(&s->wmu);
            if (rv != HC_OK)
                return rv;
        }
        info->version = ps_shard_version(s->shard);
        goto answer;
    }
    {                   /* the step reaches this worker's other shards only */
        char point[32];

        snprintf(point, sizeof point, "push:worker%d", w);
        ps_fault_point(point);
    }
    if (held_part(s, in)) {
        if (!and_pull)
            return hc_err_set(HC_ERR_PROTO, "a push in parts to a "
                              "synchronous step must ask for its values back "
                              "(push-and-pull)");
        int last = last_part(s, in);

        if (part_now(s, in)) {
            /* Into the step at once; the push judged at its last part. */
            if ((rv = add_part(s, in)) != HC_OK)
                return rv;
            added = lent = 1;
            if (!last) {
                if ((rv = defer(s, in, msg_in, req, 0)) != HC_OK) {
                    give_back(s, msg_in);
                    return rv;
                }
                s->pending[s->n_pending - 1].early = 1;
                take_early(s);
                *deferred = 1;
                return HC_OK;
            }
            take_early(s);      /* its blocks may complete others' parts */
        } else if (!last) {
            if ((rv = defer(s, in, msg_in, req, 1)) != HC_OK)
                return rv;
            *deferred = 1;
            return HC_OK;
        } else {
            held = 1;           /* the last: the whole push judged now */
        }
    }
    /* Async: a push counts once, by its first part. */
    if (p->has_part && p->part > 0 && !ps_mode_holds_pulls(s->sync))
        v = PS_PUSH_APPLY;
    else
        v = ps_mode_push(s->sync, w, p->has_base_version ? p->base_version : 0,
                         ps_shard_version(s->shard), p->samples,
                         p->has_samples_per_s ? p->samples_per_s : 0,
                         hc_now_s());
    snprintf(why, sizeof why, "%s", hc_err_msg());
    if ((v == PS_PUSH_APPLY || v == PS_PUSH_ACCUMULATE) &&
        p->has_base_version && p->base_version <= ps_shard_version(s->shard))
        hc_series_observe(s->met.staleness,
                          (double)(ps_shard_version(s->shard) -
                                   p->base_version));
    /* A push alone is answered with an Ack at the shard's version now
     * (ssp: the one after it). */
    info->valid = 0;
    info->version = ps_shard_version(s->shard);
    memset(&info->extra, 0, sizeof info->extra);
    switch (v) {
    case PS_PUSH_APPLY: {
        double t0 = hc_now_s();

        /* async: no bound ties a pull to this push; apply it outside s->mu.
         * ssp: the clock just counted must not be seen before the values,
         * so the apply stays under s->mu. */
        if (!ps_mode_holds_pulls(s->sync)) {
            *outside = 1;
            return HC_OK;
        }
        pthread_mutex_lock(&s->wmu);
        rv = ps_shard_push(s->shard, in, &info->version);
        pthread_mutex_unlock(&s->wmu);
        hc_series_observe(s->met.apply, hc_now_s() - t0);
        if (rv == HC_OK)
            serve_pending(s);
        break;
    }
    case PS_PUSH_ACCUMULATE:
        /* A push-and-pull's message is kept until its answer, after the
         * step: its gradient is lent to the step rather than copied. */
        rv = HC_OK;
        if (!added) {
            pthread_mutex_lock(&s->wmu);
            rv = ps_shard_accumulate(s->shard, in, and_pull);
            pthread_mutex_unlock(&s->wmu);
            lent = rv == HC_OK && and_pull;
        }
        if (rv == HC_OK)
            s->members[w].in_step |= 1u << service_lane(in->env);
        if (held) {
            int r = release_held(s, w, rv == HC_OK ? v : PS_PUSH_REFUSE,
                                 rv == HC_OK ? "" : hc_err_msg());

            if (rv == HC_OK && r != HC_OK)
                hc_warn("worker:%d: a part of its push to step %llu could "
                        "not be added to the step: %s", w,
                        (unsigned long long)ps_shard_version(s->shard),
                        hc_err_msg());
        }
        service_advance(s);
        break;
    case PS_PUSH_LATE:
        if (held)
            release_held(s, w, v, why);
        late = 1;
        info->extra.late = 1;
        rv = HC_OK;
        break;
    default:
        if (held)
            release_held(s, w, PS_PUSH_REFUSE, why);
        hc_err_set(HC_ERR_STALE, "%s", why);
        return HC_ERR_STALE;
    }
    if (rv != HC_OK)
        return rv;
answer:
    if (!and_pull) {
        info->valid = 1;
        *reply = service_ack_at(s, in->env->request_id, info->version, late);
        return HC_OK;
    }
    /* Push-and-pull: the values the mode allows next, now or later. */
    if (late || pull_ready(s, in)) {
        *reply = service_answer_pull(s, in, late, info);
        rv = HC_OK;
    } else if ((rv = defer(s, in, msg_in, req, 0)) == HC_OK) {
        *deferred = 1;
        if (added && s->unconfirmed) {  /* a test's broken shard */
            s->pending[s->n_pending - 1].early = 1;
            take_early(s);
        }
        return HC_OK;
    }
    if (lent)               /* not kept after all: the step copies it now */
        give_back(s, msg_in);
    return rv;
}

/* Most pushes applied in one transaction. */
#define GROUP_MAX 16

/* A push waiting in the group-commit queue. */
struct group_wait {
    struct ps_push_item item;
    int done;
    struct group_wait *next;
};

/*
 * Apply an async push by group commit: queue it; the first waiter to find
 * no commit running takes up to GROUP_MAX queued pushes, applies them in
 * one store transaction under s->wmu, hands each its result and wakes the
 * rest. Every push is committed before its answer leaves. *version: the
 * version after it.
 */
static int group_apply(struct ps_service *s, const struct hc_wire_msg *in,
                       uint64_t *version)
{
    struct group_wait me = { .item = { .in = in } };

    pthread_mutex_lock(&s->qmu);
    *s->qtail = &me;
    s->qtail = &me.next;
    while (!me.done) {
        struct ps_push_item items[GROUP_MAX];
        struct group_wait *w[GROUP_MAX];
        int n = 0, i;

        if (s->committing) {
            pthread_cond_wait(&s->qcv, &s->qmu);
            continue;
        }
        s->committing = 1;
        while (s->qhead && n < GROUP_MAX) {
            w[n] = s->qhead;
            s->qhead = w[n]->next;
            items[n].in = w[n]->item.in;
            n++;
        }
        if (!s->qhead)
            s->qtail = &s->qhead;
        pthread_mutex_unlock(&s->qmu);
        pthread_mutex_lock(&s->wmu);
        ps_shard_push_group(s->shard, items, (size_t)n);
        pthread_mutex_unlock(&s->wmu);
        pthread_mutex_lock(&s->qmu);
        for (i = 0; i < n; i++) {
            w[i]->item = items[i];
            w[i]->done = 1;
        }
        s->committing = 0;
        pthread_cond_broadcast(&s->qcv);
    }
    pthread_mutex_unlock(&s->qmu);
    if (me.item.rv != HC_OK)
        return hc_err_set(me.item.rv, "%s", me.item.err);
    *version = me.item.version;
    return HC_OK;
}

nng_msg *service_apply_outside(struct ps_service *s,
                               const struct hc_wire_msg *in,
                               const struct ps_record *prev)
{
    int and_pull = hc_wire_push_pulls(in->env->push), rv;
    uint32_t w = in->env->sender->index;
    struct ps_record *rec;
    struct answer_info info = { 0 };
    nng_msg *reply = NULL;
    uint64_t version = 0;
    double t0 = hc_now_s();

    rv = group_apply(s, in, &version);
    hc_series_observe(s->met.apply, hc_now_s() - t0);
    if (rv != HC_OK) {
        nng_msg *err = service_error_reply(s, in->env->request_id,
                                           hc_wire_error_code(rv),
                                           hc_err_msg());

        /* Nothing applied: the record says what it said before. */
        pthread_mutex_lock(&s->mu);
        if ((rec = push_record(s, in)) != NULL) {
            *rec = *prev;
            s->members[w].requests--;
        }
        pthread_mutex_unlock(&s->mu);
        return err;
    }
    /* Async answers every pull at once: the values after this push. */
    if (and_pull)
        reply = service_answer_pull(s, in, 0, &info);
    else
        reply = service_ack_at(s, in->env->request_id, version, 0);
    if (!info.valid) {
        /* An Ack, or values that could not be read: the push is applied
         * all the same, and a repeat is answered from version on. */
        memset(&info, 0, sizeof info);
        info.valid = 1;
        info.version = version;
    }
    pthread_mutex_lock(&s->mu);
    record_later(s, in, &info);
    serve_pending(s);
    pthread_mutex_unlock(&s->mu);
    return reply;
}

nng_msg *service_push_rows(struct ps_service *s, const struct hc_wire_msg *in,
                           struct answer_info *info)
{
    /* Held for the step: sync's open step, or (async, ssp) the worker's
     * own push that follows. */
    int hold = ps_mode_in_steps(s->sync) ||
               (in->env->push_rows->has_with_step &&
                in->env->push_rows->with_step);
    uint64_t version = 0;
    int rv;

    memset(info, 0, sizeof *info);
    pthread_mutex_lock(&s->wmu);
    rv = ps_shard_push_rows(s->shard, in, hold, &version);
    pthread_mutex_unlock(&s->wmu);
    if (rv != HC_OK)
        return service_error_reply(s, in->env->request_id,
                                   hc_wire_error_code(rv), hc_err_msg());
    info->valid = 1;
    info->version = version;
    return service_ack_at(s, in->env->request_id, version, 0);
}
