/*
 * service.c — a parameter-server shard on the network: decode, check the
 * sender, de-duplicate, act, reply; and the service's start, tick loop and
 * stop.
 *
 * Every request arrives on an nng thread (common/rpc). The envelope is
 * validated by hc_wire_decode before anything reads it; a bad one is
 * answered with an Error naming the problem and counted as rejected, and
 * the shard goes on serving everyone else. Requests with an effect go
 * through the sender's record ("request R answered at version V",
 * ps/record.h): a repeat of it is answered again from the record (counted
 * as a duplicate) and never applied again; an older id is refused as
 * stale (error and ack replies: service_reply.c). What the shard says of its members and the cluster
 * file re-read are in service_member.c; pulls and pushes as the mode
 * judges them in service_step.c (see service_impl.h, also for which lock
 * each path holds).
 */
#include "service.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "clock.h"
#include "log.h"
#include "rpc.h"
#include "service_impl.h"
#include "shard.h"
#include "mode.h"
#include "wire.h"

/* What serve_worker leaves to do once s->mu is let go. */
struct outside {
    int pull;                   /* answer a pull the mode allows */
    int push;                   /* apply an async push */
    struct ps_record prev;      /* its record before it (to put back) */
};

/* The kind of record a request goes to; PS_REQ_NONE: it has no effect. */
static enum ps_record_kind record_kind(Hetps__Envelope__PayloadCase c)
{
    switch (c) {
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
    case HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS:
        return PS_REQ_PUSH;
    case HETPS__ENVELOPE__PAYLOAD_JOIN:
        return PS_REQ_JOIN;
    case HETPS__ENVELOPE__PAYLOAD_LEAVE:
        return PS_REQ_LEAVE;
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
        return PS_REQ_CREATE;
    default:
        return PS_REQ_NONE;
    }
}

_Static_assert(PS_RECORD_LANES == HC_MAX_LANES,
               "a worker's lanes: one record each");

/* Which of a member's records a request goes to (service_impl.h). */
static struct ps_record *record_of(struct member *m,
                                   const Hetps__Envelope *e,
                                   enum ps_record_kind k)
{
    return &m->rec[k == PS_REQ_PUSH ? REC_PUSH + service_lane(e) :
                   k == PS_REQ_JOIN ? REC_JOIN : REC_OTHER];
}

/* Start rec as the record of e's request (kind k), on e's lane; 1 when
 * it names another request than rec did. */
static int record_begin(struct ps_record *rec, const Hetps__Envelope *e,
                        enum ps_record_kind k)
{
    int other = ps_record_begin(rec, e->sender->index, k, e->incarnation,
                                e->request_id);

    rec->lane = (uint16_t)(k == PS_REQ_PUSH ? service_lane(e) : 0);
    return other;
}

/* Note a connection the member's process uses (the oldest forgotten when
 * all slots hold live ones). */
static void member_pipe_add(struct member *m, uint32_t pipe)
{
    int k, free_k = -1;

    if (!pipe)
        return;
    for (k = 0; k < MEMBER_PIPES; k++) {
        if (m->pipes[k] == pipe)
            return;
        if (!m->pipes[k] && free_k < 0)
            free_k = k;
    }
    if (free_k < 0) {
        memmove(m->pipes, m->pipes + 1, sizeof m->pipes - sizeof m->pipes[0]);
        free_k = MEMBER_PIPES - 1;
    }
    m->pipes[free_k] = pipe;
}

/* The member's process still has a connection open other than `pipe`. */
static int member_live_elsewhere(const struct member *m, uint32_t pipe)
{
    int k;

    for (k = 0; k < MEMBER_PIPES; k++)
        if (m->pipes[k] && m->pipes[k] != pipe)
            return 1;
    return 0;
}

/*
 * A refused request said in the log: once per connection (the last 16
 * remembered), the first 20 then at most one a second, with the peer's
 * address and the count; always counted in `rejected`. Under s->mu.
 */
static void refusal_said(struct ps_service *s, hc_rpc_req *req,
                         nng_msg *msg, const char *fmt, ...)
{
    uint32_t conn = hc_rpc_msg_pipe(msg);
    int64_t now = hc_now_ms();
    char text[512], peer[80];
    unsigned k;
    va_list ap;

    s->rejected++;
    s->refusals++;
    for (k = 0; conn && k < 16; k++)
        if (s->said_conns[k] == conn)
            return;
    if (s->refusals > 20 && now - s->refusal_said_ms < 1000)
        return;
    s->refusal_said_ms = now;
    s->said_conns[s->said_next++ % 16] = conn;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    hc_rpc_req_peer(req, peer, sizeof peer);
    hc_warn("refused a request from %s (%llu refusals so far): %s", peer,
            (unsigned long long)s->refusals, text);
}

/*
 * Admission of a worker's request: the sender is in the cluster, only the
 * chief creates, it has joined (but for a join) and its model is the one
 * the variables were made with. Returns the refusal, or NULL with *mp the
 * sender's member, seen now (its connection noted).
 */
static nng_msg *admit(struct ps_service *s, const struct hc_wire_msg *in,
                      nng_msg *msg_in, hc_rpc_req *req, struct member **mp)
{
    const Hetps__Envelope *e = in->env;
    Hetps__Envelope__PayloadCase pc = e->payload_case;
    uint32_t w = e->sender->index;
    struct member *m;
    char text[512];

    if (w >= (uint32_t)s->n_members || s->members[w].removed) {
        snprintf(text, sizeof text,
                 "sender worker:%u is not in the cluster definition (%d workers)",
                 w, s->n_active);
        refusal_said(s, req, msg_in, "a %s: %s", hc_wire_payload_name(pc),
                     text);
        return service_error_reply(s, e->request_id,
                                   HETPS__ERROR_CODE__E_UNKNOWN_TASK, text);
    }
    m = &s->members[w];
    if ((pc == HETPS__ENVELOPE__PAYLOAD_CREATE ||
         pc == HETPS__ENVELOPE__PAYLOAD_INIT_ROWS) && w != 0) {
        /* The role first: whether it has joined does not matter. */
        refusal_said(s, req, msg_in, "%s from worker:%u: only the chief "
                     "(worker:0) creates the variables",
                     hc_wire_payload_name(pc), w);
        return service_error_reply(s, e->request_id,
                                   HETPS__ERROR_CODE__E_FORBIDDEN,
                                   "only the chief (worker:0) may create "
                                   "the variables");
    }
    if (pc != HETPS__ENVELOPE__PAYLOAD_JOIN &&
        (m->state != M_JOINED || m->incarnation != e->incarnation)) {
        snprintf(text, sizeof text,
                 "worker:%u (incarnation %016llx) has not joined shard ps:%d: "
                 "send join first", w, (unsigned long long)e->incarnation,
                 s->conf.shard);
        return service_error_reply(s, e->request_id,
                                   HETPS__ERROR_CODE__E_NOT_JOINED, text);
    }
    if (e->has_model_signature && e->model_signature &&
        (pc == HETPS__ENVELOPE__PAYLOAD_JOIN ||
         pc == HETPS__ENVELOPE__PAYLOAD_PULL ||
         pc == HETPS__ENVELOPE__PAYLOAD_PUSH ||
         pc == HETPS__ENVELOPE__PAYLOAD_PULL_ROWS ||
         pc == HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS)) {
        uint64_t mine = ps_shard_signature(s->shard);

        if (mine && mine != e->model_signature) {
            snprintf(text, sizeof text,
                     "worker:%u's model (signature %016llx) is not the one "
                     "ps:%d's variables were created with (%016llx): give "
                     "every worker the same model file", w,
                     (unsigned long long)e->model_signature, s->conf.shard,
                     (unsigned long long)mine);
            refusal_said(s, req, msg_in, "a %s: %s",
                         hc_wire_payload_name(pc), text);
            return service_error_reply(s, e->request_id,
                                       HETPS__ERROR_CODE__E_MISMATCH, text);
        }
    }
    /* Only now: a message under the worker's name from anyone else (another
     * incarnation, not joined) must not keep a dead worker alive. */
    m->last_seen_ms = hc_now_ms();
    if (pc != HETPS__ENVELOPE__PAYLOAD_JOIN)
        member_pipe_add(m, hc_rpc_msg_pipe(msg_in));
    *mp = m;
    return NULL;
}

/*
 * De-duplication: judge a request with an effect against the sender's
 * record of its kind. Returns 0 for a new request (to act on); 1 when it
 * is answered here: *reply from the record (a repeat), an error (stale,
 * or an id of another kind), none (being answered: sent again later), or
 * kept in place of its first copy (*deferred).
 */
static int deduplicate(struct ps_service *s, const struct hc_wire_msg *in,
                       struct member *m, const struct ps_record *rec,
                       nng_msg *msg_in, hc_rpc_req *req, int *deferred,
                       nng_msg **reply)
{
    const Hetps__Envelope *e = in->env;
    Hetps__Envelope__PayloadCase pc = e->payload_case;
    enum ps_record_kind kind = record_kind(pc);
    uint32_t w = e->sender->index;
    char text[512];

    *reply = NULL;
    if (kind == PS_REQ_NONE || m->incarnation != e->incarnation)
        return 0;
    /* A join older than the last create or leave is a late copy: it must
     * not undo a leave. */
    if (kind == PS_REQ_JOIN && m->rec[REC_OTHER].request_id &&
        m->rec[REC_OTHER].incarnation == e->incarnation &&
        e->request_id < m->rec[REC_OTHER].request_id)
        rec = &m->rec[REC_OTHER];
    switch (ps_record_judge(rec, e->incarnation, e->request_id, kind)) {
    case PS_JUDGE_NEW:
        return 0;
    case PS_JUDGE_IN_FLIGHT: {
        int i;

        m->duplicates++;
        s->duplicates++;
        /* Still waiting (a kept push-and-pull): the re-send replaces
         * the request its answer will go to. Otherwise (being applied)
         * no answer now: the worker sends it again. */
        for (i = 0; i < s->n_pending; i++) {
            struct pending *p = &s->pending[i];

            if (p->worker == (int)w && p->is_push &&
                p->request_id == e->request_id) {
                hc_rpc_reply(p->req, NULL);
                service_free_kept(s, p->msg);
                p->req = req;
                p->msg = msg_in;
                *deferred = 1;
                return 1;
            }
        }
        return 1;
    }
    case PS_JUDGE_REPEAT:
        m->duplicates++;
        s->duplicates++;
        hc_debug("worker:%u request %llu (%s) repeated: answered from the record",
                 w, (unsigned long long)e->request_id,
                 hc_wire_payload_name(pc));
        /* A join's reply says how the shard is now; the rest are made
         * again from what the record holds. */
        *reply = rec->kind == PS_REQ_JOIN
                     ? service_join_reply(s, (int)w, e->request_id)
                     : service_answer_again(s, in, rec);
        return 1;
    case PS_JUDGE_STALE:
        snprintf(text, sizeof text,
                 "worker:%u request %llu is older than its last applied "
                 "request %llu", w, (unsigned long long)e->request_id,
                 (unsigned long long)rec->request_id);
        *reply = service_error_reply(s, e->request_id,
                                     HETPS__ERROR_CODE__E_STALE, text);
        return 1;
    case PS_JUDGE_OTHER_KIND:
        snprintf(text, sizeof text,
                 "worker:%u request %llu is a %s, but that id was its "
                 "request of another kind: a request id names one "
                 "request", w, (unsigned long long)e->request_id,
                 hc_wire_payload_name(pc));
        *reply = service_error_reply(s, e->request_id,
                                     HETPS__ERROR_CODE__E_MALFORMED, text);
        return 1;
    }
    return 0;
}

/* A join: a second live process under the worker's name is refused; a
 * new incarnation (a restart) leaves the steps its old one was in; the
 * worker takes part from the step the mode says. Returns the refusal, or
 * NULL with *joined the join's reply. */
static nng_msg *serve_join(struct ps_service *s, const struct hc_wire_msg *in,
                           struct member *m, nng_msg *msg_in,
                           nng_msg **joined)
{
    const Hetps__Envelope *e = in->env;
    uint32_t w = e->sender->index;
    char text[512];

    if (m->incarnation != e->incarnation && m->state == M_JOINED &&
        member_live_elsewhere(m, hc_rpc_msg_pipe(msg_in))) {
        /* Its connection is still up: a second live process, not a
         * restart. Its record (de-duplication) stays the first one's. */
        hc_warn("refused worker:%u (incarnation %016llx, host %s, pid %u): "
                "worker:%u is already joined by a live process "
                "(incarnation %016llx)", w,
                (unsigned long long)e->incarnation,
                e->join->host ? e->join->host : "?",
                e->join->has_pid ? e->join->pid : 0, w,
                (unsigned long long)m->incarnation);
        snprintf(text, sizeof text,
                 "worker:%u is already joined to ps:%d by a live process "
                 "(incarnation %016llx): a second process with the same "
                 "task is refused; stop it or give it another --task",
                 w, s->conf.shard, (unsigned long long)m->incarnation);
        return service_error_reply(s, e->request_id,
                                   HETPS__ERROR_CODE__E_TASK_IN_USE, text);
    }
    if (m->incarnation != e->incarnation)
        memset(m->pipes, 0, sizeof m->pipes);
    member_pipe_add(m, hc_rpc_msg_pipe(msg_in));
    if (m->incarnation != e->incarnation) {
        if (m->state == M_JOINED) {
            hc_info("worker:%u restarted (incarnation %016llx → %016llx)", w,
                    (unsigned long long)m->incarnation,
                    (unsigned long long)e->incarnation);
            /* The old process is gone (its connections are): it leaves
             * the steps as if its heartbeat had timed out, so the new
             * one joins them as any newcomer — the same way on every
             * shard, whether or not a shard's heartbeat check had
             * already marked the old one dead. (A shard that kept the
             * old one in the open step while another had moved on
             * made the newcomer's pull wait there for ever.) */
            if (ps_mode_takes_over(s->sync, (int)w,
                                   ps_shard_version(s->shard))) {
                /* ...unless the old one died holding a share of the open
                 * step it had not pushed here: the new one computes that
                 * slice again, or the step would lose its samples. */
                hc_info("worker:%u's new process takes over its slice of "
                        "step %llu", w,
                        (unsigned long long)ps_shard_version(s->shard));
            } else {
                ps_mode_member(s->sync, (int)w, 0);
                service_advance(s);
            }
        }
        m->incarnation = e->incarnation;
        for (int k = 0; k < N_REC; k++)
            m->rec[k].request_id = 0;
    }
    if (m->state != M_JOINED)
        hc_info("worker:%u joined (devices %s)", w,
                e->join->devices ? e->join->devices : "?");
    m->state = M_JOINED;
    {
        uint64_t v = ps_shard_version(s->shard),
                 from = ps_mode_join(s->sync, (int)w, v);

        if (ps_mode_in_steps(s->sync) && e->join->has_start_version &&
            e->join->start_version > from) {
            /* The step the worker's shards agreed on (Join): not
             * counted in before it, as on the shard that saw it last. */
            ps_mode_start_at(s->sync, (int)w, e->join->start_version);
            from = e->join->start_version;
            service_advance(s);
        }
        if (ps_mode_in_steps(s->sync))
            hc_info("worker:%u takes part in sync steps from step %llu "
                    "(this shard is at %llu)", w, (unsigned long long)from,
                    (unsigned long long)v);
    }
    snprintf(m->devices, sizeof m->devices, "%s",
             e->join->devices ? e->join->devices : "");
    *joined = service_join_reply(s, (int)w, e->request_id);
    return NULL;
}

/* A request with an effect answered (info) or kept to answer later
 * (*deferred): the sender's record of its kind says so. */
static void record_outcome(struct ps_service *s, const struct hc_wire_msg *in,
                           struct member *m, struct ps_record *rec,
                           int deferred, struct answer_info *info)
{
    const Hetps__Envelope *e = in->env;

    if (record_begin(rec, e, record_kind(e->payload_case)))
        m->requests++;
    if (deferred)
        return;
    if (!info->valid) {
        info->valid = 1;
        info->version = ps_shard_version(s->shard);
    }
    service_record_answered(rec, info);
}

/* With s->mu held (or before serving): a model with batch norm is cut
 * into equal sync slices, never by speed — each worker normalises by its
 * own slice's moments, so the slices are part of what is computed (N
 * workers × B then equal one worker with N mirrored devices × B). */
static void equal_slices_for_bn(struct ps_service *s)
{
    if (!s->conf.balance || !ps_shard_has_moving(s->shard))
        return;
    s->conf.balance = 0;
    ps_mode_set_balance(s->sync, 0);
    hc_info("batch norm: sync batches are split equally among the workers "
            "(as --balance off)");
}

/*
 * Requests from workers: admit the sender, answer repeats from the record,
 * apply the rest. Called with s->mu held; returns the reply, or NULL with
 * *deferred (kept) or with work in *out to do without s->mu.
 */
static nng_msg *serve_worker(struct ps_service *s, const struct hc_wire_msg *in,
                             nng_msg *msg_in, hc_rpc_req *req, int *deferred,
                             struct outside *out)
{
    const Hetps__Envelope *e = in->env;
    Hetps__Envelope__PayloadCase pc = e->payload_case;
    enum ps_record_kind kind = record_kind(pc);
    uint32_t w = e->sender->index;
    struct member *m = NULL;
    struct ps_record *rec, prev;
    struct answer_info info = { 0 };
    nng_msg *reply;
    char text[512];
    int rv;

    if ((reply = admit(s, in, msg_in, req, &m)) != NULL)
        return reply;
    rec = record_of(m, e, kind);
    if (deduplicate(s, in, m, rec, msg_in, req, deferred, &reply))
        return reply;
    prev = *rec;
    switch (pc) {
    case HETPS__ENVELOPE__PAYLOAD_JOIN: {
        nng_msg *refused = serve_join(s, in, m, msg_in, &reply);

        if (refused)
            return refused;
        break;
    }
    case HETPS__ENVELOPE__PAYLOAD_HEARTBEAT:
        return service_ack_reply(s, e->request_id);
    case HETPS__ENVELOPE__PAYLOAD_LEAVE:
        m->state = M_LEFT;
        hc_info("worker:%u left", w);
        ps_mode_member(s->sync, (int)w, 0);
        service_advance(s);
        reply = service_ack_reply(s, e->request_id);
        break;
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
    case HETPS__ENVELOPE__PAYLOAD_INIT_ROWS:
        pthread_mutex_lock(&s->wmu);
        rv = ps_shard_serve(s->shard, in, &s->me, NULL, &reply);
        pthread_mutex_unlock(&s->wmu);
        if (rv != HC_OK)
            return service_error_reply(s, e->request_id,
                                       hc_wire_error_code(rv), hc_err_msg());
        equal_slices_for_bn(s);
        break;
    case HETPS__ENVELOPE__PAYLOAD_PULL:
        /* sync: a pull past the open step from a worker that did not push
         * to it (given no share): the step no longer waits for it. */
        if (e->pull->has_min_version &&
            ps_mode_sits_out(s->sync, (int)w, e->pull->min_version,
                             ps_shard_version(s->shard), hc_now_s()))
            service_advance(s);
        return service_serve_pull(s, in, msg_in, req, deferred, &out->pull);
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        rv = service_serve_push(s, in, msg_in, req, deferred, &out->push,
                                &reply, &info);
        if (rv != HC_OK)
            return service_error_reply(s, e->request_id,
                                       hc_wire_error_code(rv), hc_err_msg());
        service_metrics_rows(s, in);
        if (out->push) {
            /* Applied outside s->mu: the record says it is being answered
             * (a repeat meanwhile is not applied again). */
            out->prev = prev;
            if (record_begin(rec, e, kind))
                m->requests++;
            return NULL;
        }
        break;
    case HETPS__ENVELOPE__PAYLOAD_PULL_ROWS:
        if ((rv = ps_shard_pull_rows(s->shard, in, &s->me, &reply)) != HC_OK)
            return service_error_reply(s, e->request_id,
                                       hc_wire_error_code(rv), hc_err_msg());
        service_metrics_rows(s, in);
        return reply;
    case HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS:
        if ((reply = service_push_rows(s, in, &info)) == NULL ||
            !info.valid)
            return reply;
        service_metrics_rows(s, in);
        break;
    default:
        snprintf(text, sizeof text, "a %s is a reply, not a request",
                 hc_wire_payload_name(pc));
        return service_error_reply(s, e->request_id,
                                   HETPS__ERROR_CODE__E_MALFORMED, text);
    }
    if (kind != PS_REQ_NONE && (reply || *deferred))
        record_outcome(s, in, m, rec, *deferred, &info);
    return reply;
}

static const char *sender_job(const Hetps__Task *t)
{
    return t->job == HETPS__JOB__JOB_WORKER ? "worker"
           : t->job == HETPS__JOB__JOB_PS   ? "ps"
                                            : "client";
}

/* The roles that may shut down and read the full status: the chief and
 * the front door. */
static int is_admin(const Hetps__Task *t)
{
    return t->job == HETPS__JOB__JOB_CLIENT ||
           (t->job == HETPS__JOB__JOB_WORKER && t->index == 0);
}

/*
 * With TLS, the task a request claims must be the one whose certificate its
 * connection proved: "worker:I" for worker I, "admin" for the front door.
 * 0, with the refusal in hc_err and the log naming the peer, when not.
 */
static int claim_matches(struct ps_service *s, hc_rpc_req *req,
                         const Hetps__Envelope *e)
{
    const char *cert = hc_rpc_req_identity(req);
    char claim[32], peer[80];
    uint64_t n;

    if (!s->tls.rpc)
        return 1;
    if (e->sender->job == HETPS__JOB__JOB_CLIENT)
        snprintf(claim, sizeof claim, "admin");
    else
        snprintf(claim, sizeof claim, "%s:%u", sender_job(e->sender),
                 e->sender->index);
    if (cert && strcmp(cert, claim) == 0)
        return 1;
    pthread_mutex_lock(&s->mu);
    s->rejected++;
    n = ++s->claims_refused;
    pthread_mutex_unlock(&s->mu);
    hc_rpc_req_peer(req, peer, sizeof peer);
    if (n <= 10 || n % 1000 == 0)
        hc_warn("refused a %s from %s (%llu so far): it claims %s "
                "but its certificate is %s",
                hc_wire_payload_name(e->payload_case), peer,
                (unsigned long long)n, claim, cert ? cert : "unknown");
    hc_err_set(HC_ERR_CONFIG, "this request claims %s but the connection's "
               "certificate is %s's: a task may act only as itself", claim,
               cert ? cert : "nobody");
    return 0;
}

/* "job:N" with N in canonical decimal below n: 1. */
static int task_below(const char *who, const char *job, int n)
{
    size_t k = strlen(job);
    char *end;
    unsigned long i;

    if (strncmp(who, job, k) || who[k] != ':' || who[k + 1] < '0' ||
        who[k + 1] > '9' || (who[k + 1] == '0' && who[k + 2]))
        return 0;
    i = strtoul(who + k + 1, &end, 10);
    return !*end && i < (unsigned long)n;
}

/*
 * At a TLS handshake (rpc.h's admit, on a relay thread): a certificate of
 * the cluster's CA is let in only if it names a task of the cluster as it
 * is now (workers come and go with the cluster file) or the front door.
 * A CA-signed certificate of a task since removed, or of a bigger
 * cluster's, gets no further than this.
 */
static int admit_cert(void *arg, const char *who, char *why, size_t n)
{
    struct ps_service *s = arg;
    int workers = __atomic_load_n(&s->n_active, __ATOMIC_RELAXED);

    if (!strcmp(who, "admin") || task_below(who, "ps", s->cl->n_ps) ||
        task_below(who, "worker", workers))
        return 0;
    snprintf(why, n, "no task of %s (%d parameter servers, %d workers), nor "
             "the front door (admin)",
             s->conf.cluster_file ? s->conf.cluster_file
                                  : "the cluster definition (TF_CONFIG)",
             s->cl->n_ps, workers);
    return -1;
}

/* A client's connection is gone: a worker that joined on it may now be
 * replaced by a new process at once (a restart after a crash). */
static void on_pipe_closed(void *arg, uint32_t pipe)
{
    struct ps_service *s = arg;
    int i;

    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];
        int k;

        for (k = 0; k < MEMBER_PIPES; k++)
            if (m->pipes[k] == pipe)
                m->pipes[k] = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

static void on_request(void *arg, hc_rpc_req *req, nng_msg *msg)
{
    struct ps_service *s = arg;
    struct hc_wire_msg in;
    struct outside out = { 0 };
    nng_msg *reply = NULL;
    uint64_t rejected;
    int rv, deferred = 0, pc = 0, admin;
    double t0 = hc_now_s();
    size_t in_len = nng_msg_len(msg);

    rv = hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg), s->cl->id, &in);
    if (rv != HC_OK) {
        pthread_mutex_lock(&s->mu);
        rejected = ++s->rejected;
        pthread_mutex_unlock(&s->mu);
        if (rejected <= 10 || rejected % 1000 == 0) {
            char peer[80];

            hc_rpc_req_peer(req, peer, sizeof peer);
            hc_warn("rejected a message from %s (%llu so far): %s", peer,
                    (unsigned long long)rejected, hc_err_msg());
        }
        nng_msg_free(msg);
        hc_rpc_reply(req, service_error_reply(s, 0, hc_wire_error_code(rv),
                                              hc_err_msg()));
        return;
    }

    if (!claim_matches(s, req, in.env)) {
        reply = service_error_reply(s, in.env->request_id,
                                    HETPS__ERROR_CODE__E_FORBIDDEN,
                                    hc_err_msg());
        hc_wire_msg_free(&in);
        nng_msg_free(msg);
        hc_rpc_reply(req, reply);
        return;
    }
    pc = in.env->payload_case;
    /* A worker's request may change the sync step (its heartbeats do not):
     * it waits while one is being applied. Status, heartbeats and a
     * client's pulls (from a snapshot) are served meanwhile. */
    if (in.env->sender->job == HETPS__JOB__JOB_WORKER &&
        pc != HETPS__ENVELOPE__PAYLOAD_HEARTBEAT)
        service_lock_step(s);
    else
        pthread_mutex_lock(&s->mu);
    s->requests++;
    admin = is_admin(in.env->sender);
    switch (in.env->payload_case) {
    case HETPS__ENVELOPE__PAYLOAD_STATUS:
        reply = service_status_reply(s, in.env->request_id, admin);
        break;
    case HETPS__ENVELOPE__PAYLOAD_SHUTDOWN:
        if (!admin) {
            refusal_said(s, req, msg, "a shutdown from %s:%u: only the "
                         "chief and the front door (admin) may shut the "
                         "cluster down", sender_job(in.env->sender),
                         in.env->sender->index);
            reply = service_error_reply(s, in.env->request_id,
                                        HETPS__ERROR_CODE__E_FORBIDDEN,
                                        "only the chief (worker:0) and the "
                                        "front door may shut down");
            break;
        }
        hc_info("shutdown requested by %s:%u", sender_job(in.env->sender),
                in.env->sender->index);
        reply = service_ack_reply(s, in.env->request_id);
        ps_service_request_stop(s);
        break;
    default:
        if (in.env->sender->job == HETPS__JOB__JOB_WORKER) {
            reply = serve_worker(s, &in, msg, req, &deferred, &out);
        } else if (in.env->payload_case == HETPS__ENVELOPE__PAYLOAD_PULL) {
            /* Reading needs no membership: `hetps eval` of live weights,
             * from a snapshot, below. */
            out.pull = 1;
        } else if (in.env->payload_case ==
                   HETPS__ENVELOPE__PAYLOAD_PULL_ROWS) {
            /* Nor does reading rows: `hetps eval` of a model with
             * embedding tables looks its batches' rows up. */
            int prv = ps_shard_pull_rows(s->shard, &in, &s->me, &reply);

            if (prv != HC_OK)
                reply = service_error_reply(s, in.env->request_id,
                                            hc_wire_error_code(prv),
                                            hc_err_msg());
        } else {
            refusal_said(s, req, msg, "a %s from %s:%u: only workers may "
                         "send it", hc_wire_payload_name(pc),
                         sender_job(in.env->sender), in.env->sender->index);
            reply = service_error_reply(s, in.env->request_id,
                                        HETPS__ERROR_CODE__E_UNKNOWN_TASK,
                                        "only workers may send this request");
        }
        break;
    }
    service_unlock(s);      /* and applies a sync step found ready */
    if (out.pull)
        reply = service_answer_pull(s, &in, 0, NULL);
    else if (out.push)
        reply = service_apply_outside(s, &in, &out.prev);
    hc_wire_msg_free(&in);
    if (deferred)
        return;         /* kept with its message: answered by serve_pending */
    nng_msg_free(msg);
    service_metrics_request(s, pc, in_len, reply ? nng_msg_len(reply) : 0,
                            hc_now_s() - t0);
    hc_rpc_reply(req, reply);
}

void ps_service_request_reload(struct ps_service *s)
{
    atomic_store(&s->reload, 1);
}

int ps_service_start(struct ps_service **out, const struct ps_service_conf *c)
{
    struct hc_rpc_server_opts ro = { 0 };
    struct ps_service *s;
    const char *url;
    char who[32];
    int rv;

    *out = NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return hc_err_set(HC_ERR_NOMEM, "out of memory starting the service");
    s->conf = *c;
    s->cl = c->cluster;
    /* No step's deadline runs yet: the first sweep starts one. (At 0, the
     * store's first step looked as if it had waited since the clock's
     * origin: a worker slow to push step 0 was marked dead at once, and
     * sync.sh's 2 × 32 then differed from 1 × 64.) */
    s->deadline_version = UINT64_MAX;
    if (s->conf.heartbeat_timeout_ms <= 0)
        s->conf.heartbeat_timeout_ms = 10000;
    s->me.job = HETPS__JOB__JOB_PS;
    s->me.index = (uint32_t)c->shard;
    s->me.incarnation = hc_wire_new_incarnation();
    s->me.cluster_id = s->cl->id;
    s->start_ms = hc_now_ms();
    s->n_members = s->n_active = s->cl->n_worker;
    if (c->cluster_file)
        service_file_mtime(c->cluster_file, &s->file_mtime);
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->wmu, NULL);
    pthread_mutex_init(&s->qmu, NULL);
    pthread_cond_init(&s->qcv, NULL);
    pthread_cond_init(&s->applied, NULL);
    s->qtail = &s->qhead;
    s->members = calloc((size_t)s->n_members, sizeof *s->members);
    if (!s->members) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for %d members",
                        s->n_members);
        goto fail;
    }
    if (pipe(s->stop_pipe) != 0) {
        rv = hc_err_set(HC_ERR_IO, "pipe: %s", strerror(errno));
        goto fail;
    }
    if (s->conf.join_timeout_ms <= 0)
        s->conf.join_timeout_ms = 60000;
    if (s->conf.step_timeout_ms <= 0)
        s->conf.step_timeout_ms = 120000;
    {
        struct ps_mode_conf sc = { 0 };
        int i;

        sc.mode = s->cl->mode;
        sc.staleness = s->cl->staleness;
        sc.backup = s->cl->backup_workers;
        sc.balance = c->balance;
        sc.max_staleness = c->max_staleness;
        sc.n_workers = s->cl->n_worker;
        rv = ps_mode_new(&s->sync, &sc);
        if (rv != HC_OK)
            goto fail;
        /* sync and ssp wait for every worker of the cluster from the start. */
        for (i = 0; i < s->n_members; i++) {
            s->members[i].expected_ms = s->start_ms;
            if (ps_mode_holds_pulls(s->sync))
                ps_mode_member(s->sync, i, 1);
        }
    }
    rv = ps_shard_open(&s->shard, c->data_dir, c->shard, s->cl->n_ps,
                       c->durability, c->sync_ms, c->apply_threads);
    if (rv != HC_OK)
        goto fail;
    equal_slices_for_bn(s);
    {
        /* The pushes applied before a restart: a repeat of one is still
         * answered from its record, never applied twice. */
        int i, n = 0;

        for (i = 0; i < s->n_members; i++) {
            struct member *m = &s->members[i];
            struct ps_record r;
            uint32_t lane;
            int any = 0;

            for (lane = 0; lane < PS_RECORD_LANES; lane++) {
                if (ps_shard_record(s->shard, i, lane, &r) != HC_OK ||
                    !r.request_id ||
                    (any && r.incarnation != m->incarnation))
                    continue;
                m->incarnation = r.incarnation;
                m->rec[REC_PUSH + lane] = r;
                any = 1;
            }
            n += any;
        }
        hc_err_clear();
        if (n)
            hc_info("recovered the last applied request of %d worker(s)", n);
    }
    service_metrics_init(s);
    url = c->listen_url ? c->listen_url : s->cl->ps[c->shard].url;
    ro.n_ctx = c->n_ctx > 0 ? c->n_ctx : 64 + 4 * s->n_members;
    ro.recv_max = c->max_message;
    snprintf(who, sizeof who, "ps:%d", c->shard);
    if ((rv = hc_tls_resolve(s->cl, who, &s->tls)) != HC_OK)
        goto fail;
    ro.tls = s->tls.rpc;
    ro.on_close = on_pipe_closed;
    ro.admit = admit_cert;
    ro.recv_deadline_ms = c->recv_deadline_ms;
    rv = hc_rpc_server_start(&s->rpc, url, &ro, on_request, s);
    if (rv != HC_OK)
        goto fail;
    hc_info("serving shard %d of %d on %s (incarnation %016llx, data %s, %s)",
            c->shard, s->cl->n_ps, url, (unsigned long long)s->me.incarnation,
            c->data_dir, s->tls.rpc ? "mutual TLS (OpenSSL)" : "INSECURE plain TCP");
    *out = s;
    return HC_OK;
fail:
    ps_service_stop(s);
    return rv;
}

void ps_service_request_stop(struct ps_service *s)
{
    char b = 1;

    atomic_store(&s->stopping, 1);
    if (write(s->stop_pipe[1], &b, 1) < 0)
        return;
}

void ps_service_wait(struct ps_service *s)
{
    struct pollfd p = { .fd = s->stop_pipe[0], .events = POLLIN };

    while (!atomic_load(&s->stopping)) {
        struct timespec t;
        int n = poll(&p, 1, 500);

        if (n < 0 && errno != EINTR)
            break;
        service_sweep_members(s);
        if (ps_shard_maintain(s->shard) != HC_OK)
            hc_warn("%s", hc_err_msg());
        if (s->conf.cluster_file &&
            (atomic_exchange(&s->reload, 0) ||
             (service_file_mtime(s->conf.cluster_file, &t) == 0 &&
              (t.tv_sec != s->file_mtime.tv_sec ||
               t.tv_nsec != s->file_mtime.tv_nsec)))) {
            service_file_mtime(s->conf.cluster_file, &s->file_mtime);
            service_reload_cluster(s);
        }
    }
    /* Let the reply to a Shutdown request leave before the socket closes. */
    hc_sleep_s(0.2);
}

void ps_service_stop(struct ps_service *s)
{
    int i;

    if (!s)
        return;
    if (s->conf.metrics)
        hc_metrics_on_render(s->conf.metrics, NULL, NULL);
    if (s->rpc)
        hc_rpc_server_stop(s->rpc);
    for (i = 0; i < s->n_pending; i++)
        nng_msg_free(s->pending[i].msg);   /* no step is applied after */
    free(s->pending);
    free(s->early);             /* empty: each request answers its own */
    for (i = 0; i < s->n_spent; i++)
        nng_msg_free(s->spent[i]);
    free(s->spent);
    free(s->step_recs);
    if (s->shard)
        ps_shard_close(s->shard);
    ps_mode_free(s->sync);
    free(s->members);
    if (s->stop_pipe[0] >= 0)
        close(s->stop_pipe[0]);
    if (s->stop_pipe[1] >= 0)
        close(s->stop_pipe[1]);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->wmu);
    pthread_mutex_destroy(&s->qmu);
    pthread_cond_destroy(&s->qcv);
    pthread_cond_destroy(&s->applied);
    free(s);
}

void ps_service_set_unconfirmed(struct ps_service *s, int on)
{
    pthread_mutex_lock(&s->mu);
    s->unconfirmed = on;
    pthread_mutex_unlock(&s->mu);
}

void ps_service_set_apply_hook(struct ps_service *s, void (*fn)(void *),
                               void *arg)
{
    pthread_mutex_lock(&s->mu);
    s->apply_hook = fn;
    s->apply_hook_arg = arg;
    pthread_mutex_unlock(&s->mu);
}
