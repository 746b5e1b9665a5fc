/*
 * service.c — a parameter-server shard on the network: decode, check the
 * sender, de-duplicate, act, reply.
 *
 * Every request arrives on an nng thread (common/rpc). The envelope is
 * validated by hc_wire_decode before anything reads it; a bad one is
 * answered with an Error naming the problem and counted as rejected, and
 * the shard goes on serving everyone else. Requests with an effect go
 * through the sender's record: a repeat of the last applied request id is
 * answered with the same reply bytes as the first time (counted as a
 * duplicate) and never applied again; an older id is refused as stale.
 */
#include "service.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "clock.h"
#include "log.h"
#include "rpc.h"
#include "shard.h"
#include "sync.h"
#include "wire.h"

/* Largest recorded reply kept in the store (an Ack). */
#define PS_RECORD_MAX 4096

enum member_state { M_NONE, M_JOINED, M_LEFT, M_DEAD };

static const char *const state_names[] = { "unknown", "joined", "left", "dead" };

/* What the shard knows of one worker. */
struct member {
    enum member_state state;
    uint64_t incarnation;       /* of the worker process last joined */
    /* The last applied request and its reply, kept apart for pushes (which
     * carry the optimizer's ordering) and for the rest (join, leave,
     * create), so a re-join does not make a re-sent push look old. */
    struct record {
        uint64_t last_req;      /* last applied request id */
        unsigned char *reply;   /* (reply_len) bytes answered to last_req;
                                   0 bytes: still being answered */
        size_t reply_len, reply_cap;
    } rec[2];
    int64_t last_seen_ms;
    char devices[128];
    uint64_t requests, duplicates;
    int removed;                /* no longer in the cluster file */
    int64_t expected_ms;        /* sync/ssp: expected to join since then */
};

/* A pull that must wait (sync: for the next version; ssp: for the slowest
 * worker). The request message is kept and served again when ready. */
struct pending {
    hc_rpc_req *req;
    nng_msg *msg;
    int worker;
    int is_push;                /* push-and-pull: record the answer */
    uint64_t request_id;
    uint64_t min_version, clock; /* what it waits for (see pull_wants) */
};

struct ps_service {
    struct ps_service_conf conf;
    const struct hc_cluster *cl;
    struct hc_sender me;
    hc_rpc_server *rpc;
    struct ps_shard *shard;
    struct ps_sync *sync;
    struct pending *pending;    /* (n_pending) */
    int n_pending, cap_pending;

    pthread_mutex_t mu;         /* guards everything below */
    struct member *members;     /* (n_members) indexed by worker index */
    int n_members;
    uint64_t requests, duplicates, rejected;
    int64_t start_ms;

    int stop_pipe[2];           /* written by request_stop, read by wait */
    atomic_int stopping;
    atomic_int reload;          /* SIGHUP: re-read the cluster file */
    struct timespec file_mtime; /* of the cluster file when last read */
    int n_active;               /* workers in the cluster file now */
};

static void init_env(struct ps_service *s, Hetps__Envelope *env, uint64_t id)
{
    hc_wire_init_env(env, &s->me, id);
}

static nng_msg *error_reply(struct ps_service *s, uint64_t id,
                            Hetps__ErrorCode code, const char *text)
{
    nng_msg *m = NULL;

    if (hc_wire_error_reply(&m, &s->me, id, code, text) != HC_OK)
        return NULL;
    return m;
}

static nng_msg *ack_reply(struct ps_service *s, uint64_t id, int duplicate)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Ack ack = HETPS__ACK__INIT;
    nng_msg *m = NULL;

    init_env(s, &env, id);
    ack.has_version = 1;
    ack.version = s->shard ? ps_shard_version(s->shard) : 0;
    ack.has_duplicate = duplicate != 0;
    ack.duplicate = duplicate != 0;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_ACK;
    env.ack = &ack;
    if (hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        return NULL;
    return m;
}

/* The members' entries of a join or status reply (arrays owned here). */
struct member_list {
    Hetps__Member **list;       /* (n) pointers into storage */
    Hetps__Member *storage;
    Hetps__Task *tasks;
    int n;                      /* -1: out of memory */
};

static void fill_members(struct ps_service *s, struct member_list *ml)
{
    int64_t now = hc_now_ms();
    int i;

    ml->n = 0;
    ml->list = calloc((size_t)s->n_members + 1, sizeof *ml->list);
    ml->storage = calloc((size_t)s->n_members + 1, sizeof *ml->storage);
    ml->tasks = calloc((size_t)s->n_members + 1, sizeof *ml->tasks);
    if (!ml->list || !ml->storage || !ml->tasks) {
        ml->n = -1;
        return;
    }
    for (i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];
        Hetps__Member *pm = &ml->storage[ml->n];
        Hetps__Task *t = &ml->tasks[ml->n];

        if (m->state == M_NONE)
            continue;
        hetps__member__init(pm);
        hetps__task__init(t);
        t->job = HETPS__JOB__JOB_WORKER;
        t->index = (uint32_t)i;
        pm->task = t;
        pm->incarnation = m->incarnation;
        pm->state = (char *)state_names[m->state];
        pm->has_last_seen_ms = 1;
        pm->last_seen_ms = (uint64_t)(now - m->last_seen_ms);
        pm->devices = m->devices;
        pm->has_requests = 1;
        pm->requests = m->requests;
        pm->has_duplicates = 1;
        pm->duplicates = m->duplicates;
        pm->has_clock = pm->has_samples_per_s = pm->has_share = pm->has_late = 1;
        ps_sync_worker(s->sync, i, &pm->clock, &pm->samples_per_s, &pm->share,
                       &pm->late);
        ml->list[ml->n++] = pm;
    }
}

static void free_members(struct member_list *ml)
{
    free(ml->list);
    free(ml->storage);
    free(ml->tasks);
}

static nng_msg *status_reply(struct ps_service *s, uint64_t id)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__StatusReply st = HETPS__STATUS_REPLY__INIT;
    Hetps__Task me = HETPS__TASK__INIT;
    struct member_list ml;
    nng_msg *m = NULL;

    init_env(s, &env, id);
    me.job = HETPS__JOB__JOB_PS;
    me.index = (uint32_t)s->conf.shard;
    st.shard = &me;
    st.incarnation = s->me.incarnation;
    st.version = s->shard ? ps_shard_version(s->shard) : 0;
    fill_members(s, &ml);
    if (ml.n >= 0) {
        st.n_members = (size_t)ml.n;
        st.members = ml.list;
    }
    st.has_requests = st.has_duplicates = st.has_rejected = 1;
    st.requests = s->requests;
    st.duplicates = s->duplicates;
    st.rejected = s->rejected;
    st.has_uptime_ms = 1;
    st.uptime_ms = (uint64_t)(hc_now_ms() - s->start_ms);
    st.mode = (char *)hc_mode_name(s->cl->mode);
    {
        struct ps_sync_stats ss;

        ps_sync_stats(s->sync, &ss);
        st.has_late = st.has_max_ahead = st.has_stale = st.has_waiting = 1;
        st.late = ss.late;
        st.max_ahead = ss.max_ahead;
        st.stale = ss.stale;
        st.waiting = (uint32_t)s->n_pending;
    }
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY;
    env.status_reply = &st;
    if (ml.n < 0 || hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        m = NULL;
    free_members(&ml);
    return m;
}

static nng_msg *join_reply(struct ps_service *s, uint64_t id)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__JoinReply jr = HETPS__JOIN_REPLY__INIT;
    struct member_list ml;
    nng_msg *m = NULL;

    init_env(s, &env, id);
    jr.shard_incarnation = s->me.incarnation;
    jr.shard_index = (uint32_t)s->conf.shard;
    jr.n_shards = (uint32_t)s->cl->n_ps;
    jr.has_version = 1;
    jr.version = s->shard ? ps_shard_version(s->shard) : 0;
    fill_members(s, &ml);
    if (ml.n >= 0) {
        jr.n_members = (size_t)ml.n;
        jr.members = ml.list;
    }
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY;
    env.join_reply = &jr;
    if (ml.n < 0 || hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        m = NULL;
    free_members(&ml);
    return m;
}

/* Which record a request kind goes to. */
static struct record *record_of(struct member *m, Hetps__Envelope__PayloadCase c)
{
    return &m->rec[c == HETPS__ENVELOPE__PAYLOAD_PUSH ? 0 : 1];
}

/* Remember the reply to the last applied request of a member. */
static void record_reply(struct member *m, struct record *r, uint64_t id,
                         nng_msg *reply)
{
    size_t len = reply ? nng_msg_len(reply) : 0;

    if (r->last_req != id)
        m->requests++;
    r->last_req = id;
    if (len > r->reply_cap) {
        unsigned char *p = realloc(r->reply, len);

        if (!p) {
            r->reply_len = 0;
            return;
        }
        r->reply = p;
        r->reply_cap = len;
    }
    if (len)
        memcpy(r->reply, nng_msg_body(reply), len);
    r->reply_len = len;
}

/* A copy of the recorded reply. */
static nng_msg *replay_reply(const struct record *r)
{
    nng_msg *msg;

    if (!r->reply_len || nng_msg_alloc(&msg, r->reply_len) != 0)
        return NULL;
    memcpy(nng_msg_body(msg), r->reply, r->reply_len);
    return msg;
}

static int is_effect(Hetps__Envelope__PayloadCase c)
{
    switch (c) {
    case HETPS__ENVELOPE__PAYLOAD_JOIN:
    case HETPS__ENVELOPE__PAYLOAD_LEAVE:
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        return 1;
    default:
        return 0;
    }
}

/* Answer a pull now: values, version and (sync, from any shard; workers
 * use ps:0's) the worker's slice of the step's global batch. */
static nng_msg *answer_pull(struct ps_service *s, const struct hc_wire_msg *in,
                            int late)
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
    if (s->cl->mode == HC_MODE_SYNC && has_gb &&
        e->sender->job == HETPS__JOB__JOB_WORKER) {
        extra.has_slice = 1;
        if (jb)
            extra.job_batch = ps_sync_job_batch(s->sync, jb);
        ps_sync_assign(s->sync, (int)e->sender->index, gb,
                       ps_shard_version(s->shard), &extra.offset,
                       &extra.count);
    }
    rv = ps_shard_answer_pull(s->shard, in, &s->me, &extra, &reply);
    if (rv != HC_OK)
        return error_reply(s, in->env->request_id, hc_wire_error_code(rv),
                           hc_err_msg());
    if (extra.has_slice)
        ps_sync_answered(s->sync, (int)e->sender->index, extra.count,
                         hc_now_s());
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

        *min_version = s->cl->mode == HC_MODE_SYNC && p->has_base_version
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
    return ps_sync_pull_ready(s->sync, (int)in->env->sender->index,
                              min_version, clock, ps_shard_version(s->shard));
}

/* Keep a request (pull or push-and-pull) to answer when the mode allows;
 * a worker has at most one kept: a newer one replaces it. */
static int defer(struct ps_service *s, const struct hc_wire_msg *in,
                 nng_msg *msg_in, hc_rpc_req *req)
{
    int w = (int)in->env->sender->index, i;

    for (i = 0; i < s->n_pending; i++) {
        if (s->pending[i].worker == w) {
            hc_rpc_reply(s->pending[i].req, NULL);
            nng_msg_free(s->pending[i].msg);
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
    s->pending[s->n_pending].is_push =
        in->env->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH;
    s->pending[s->n_pending].request_id = in->env->request_id;
    pull_wants(s, in, &s->pending[s->n_pending].min_version,
               &s->pending[s->n_pending].clock);
    s->n_pending++;
    return HC_OK;
}

/* A pull: answered now, or kept (the message and the request) until the
 * mode allows it. */
static nng_msg *serve_pull(struct ps_service *s, const struct hc_wire_msg *in,
                           nng_msg *msg_in, hc_rpc_req *req, int *deferred)
{
    if (pull_ready(s, in))
        return answer_pull(s, in, 0);
    if (defer(s, in, msg_in, req) != HC_OK)
        return error_reply(s, in->env->request_id, HETPS__ERROR_CODE__E_LIMIT,
                           hc_err_msg());
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

        /* Decoded (checksums and all) only once it can be answered. */
        if (!ps_sync_pull_ready(s->sync, p->worker, p->min_version, p->clock,
                                ps_shard_version(s->shard))) {
            i++;
            continue;
        }
        if (hc_wire_decode(nng_msg_body(p->msg), nng_msg_len(p->msg),
                           s->cl->id, &in) != HC_OK) {
            hc_rpc_reply(p->req, NULL);
        } else {
            reply = answer_pull(s, &in, 0);
            if (p->is_push && reply && p->worker < s->n_members)
                record_reply(&s->members[p->worker],
                             &s->members[p->worker].rec[0], p->request_id,
                             reply);
            hc_wire_msg_free(&in);
            hc_rpc_reply(p->req, reply);
        }
        nng_msg_free(p->msg);
        *p = s->pending[--s->n_pending];
    }
}

/* Apply a complete synchronous step, then answer the pulls it frees. */
static void advance(struct ps_service *s)
{
    uint64_t total;

    if (s->cl->mode == HC_MODE_SYNC &&
        ps_sync_step_ready(s->sync, ps_shard_version(s->shard), &total)) {
        int rv = ps_shard_apply_step(s->shard, total);

        if (rv != HC_OK)
            hc_error("cannot apply step %llu: %s",
                     (unsigned long long)ps_shard_version(s->shard),
                     hc_err_msg());
        ps_sync_step_done(s->sync);
    }
    serve_pending(s);
}

/* A push: judged by the mode, then applied, added to the step, or counted
 * as late. */
static int serve_push(struct ps_service *s, const struct hc_wire_msg *in,
                      nng_msg *msg_in, hc_rpc_req *req, int *deferred,
                      nng_msg **reply)
{
    const Hetps__Push *p = in->env->push;
    int w = (int)in->env->sender->index, rv, late = 0;
    int and_pull = p->n_ranges > 0;
    enum ps_push_verdict v;

    v = ps_sync_push(s->sync, w, p->has_base_version ? p->base_version : 0,
                     ps_shard_version(s->shard), p->samples,
                     p->has_samples_per_s ? p->samples_per_s : 0, hc_now_s());
    switch (v) {
    case PS_PUSH_APPLY:
        rv = ps_shard_serve(s->shard, in, &s->me, NULL, reply);
        if (rv == HC_OK)
            serve_pending(s);
        break;
    case PS_PUSH_ACCUMULATE:
        rv = ps_shard_accumulate(s->shard, in);
        if (rv == HC_OK && !and_pull)
            rv = ps_shard_ack(s->shard, in, &s->me, 0, reply);
        advance(s);
        break;
    case PS_PUSH_LATE:
        late = 1;
        rv = and_pull ? HC_OK : ps_shard_ack(s->shard, in, &s->me, 1, reply);
        break;
    default:
        return HC_ERR_STALE;
    }
    if (rv != HC_OK || !and_pull)
        return rv;
    /* Push-and-pull: the values the mode allows next, now or later. */
    if (*reply) {
        nng_msg_free(*reply);
        *reply = NULL;
    }
    if (late || pull_ready(s, in)) {
        *reply = answer_pull(s, in, late);
        return HC_OK;
    }
    if ((rv = defer(s, in, msg_in, req)) != HC_OK)
        return rv;
    *deferred = 1;
    return HC_OK;
}

/*
 * Requests from workers: check the sender, answer repeats from the record,
 * apply the rest. Called with s->mu held; returns the reply.
 */
static nng_msg *serve_worker(struct ps_service *s, const struct hc_wire_msg *in,
                             nng_msg *msg_in, hc_rpc_req *req, int *deferred)
{
    const Hetps__Envelope *e = in->env;
    Hetps__Envelope__PayloadCase pc = e->payload_case;
    uint32_t w = e->sender->index;
    struct member *m;
    struct record *rec;
    nng_msg *reply = NULL;
    char text[512];
    int rv;

    if (w >= (uint32_t)s->n_members || s->members[w].removed) {
        snprintf(text, sizeof text,
                 "sender worker:%u is not in the cluster definition (%d workers)",
                 w, s->n_active);
        return error_reply(s, e->request_id,
                           HETPS__ERROR_CODE__E_UNKNOWN_TASK, text);
    }
    m = &s->members[w];
    m->last_seen_ms = hc_now_ms();
    if (pc != HETPS__ENVELOPE__PAYLOAD_JOIN &&
        (m->state != M_JOINED || m->incarnation != e->incarnation)) {
        snprintf(text, sizeof text,
                 "worker:%u (incarnation %016llx) has not joined shard ps:%d: "
                 "send join first", w, (unsigned long long)e->incarnation,
                 s->conf.shard);
        return error_reply(s, e->request_id, HETPS__ERROR_CODE__E_NOT_JOINED,
                           text);
    }
    rec = record_of(m, pc);
    if (is_effect(pc) && m->incarnation == e->incarnation && rec->last_req) {
        if (e->request_id == rec->last_req && rec->reply_len == 0) {
            int i;

            /* Still waiting (a kept push-and-pull): the re-send replaces
             * the request its answer will go to. */
            for (i = 0; i < s->n_pending; i++) {
                struct pending *p = &s->pending[i];

                if (p->worker == (int)w && p->is_push &&
                    p->request_id == e->request_id) {
                    hc_rpc_reply(p->req, NULL);
                    nng_msg_free(p->msg);
                    p->req = req;
                    p->msg = msg_in;
                    *deferred = 1;
                    m->duplicates++;
                    s->duplicates++;
                    return NULL;
                }
            }
        }
        if (e->request_id == rec->last_req) {
            m->duplicates++;
            s->duplicates++;
            hc_debug("worker:%u request %llu (%s) repeated: answered from the record",
                     w, (unsigned long long)e->request_id,
                     hc_wire_payload_name(pc));
            return replay_reply(rec);
        }
        if (e->request_id < rec->last_req) {
            snprintf(text, sizeof text,
                     "worker:%u request %llu is older than its last applied "
                     "request %llu", w, (unsigned long long)e->request_id,
                     (unsigned long long)rec->last_req);
            return error_reply(s, e->request_id, HETPS__ERROR_CODE__E_STALE,
                               text);
        }
    }

    switch (pc) {
    case HETPS__ENVELOPE__PAYLOAD_JOIN:
        if (m->incarnation != e->incarnation) {
            if (m->state == M_JOINED)
                hc_info("worker:%u restarted (incarnation %016llx → %016llx)", w,
                        (unsigned long long)m->incarnation,
                        (unsigned long long)e->incarnation);
            m->incarnation = e->incarnation;
            m->rec[0].last_req = m->rec[1].last_req = 0;
        }
        if (m->state != M_JOINED)
            hc_info("worker:%u joined (devices %s)", w,
                    e->join->devices ? e->join->devices : "?");
        m->state = M_JOINED;
        ps_sync_join(s->sync, (int)w, ps_shard_version(s->shard));
        snprintf(m->devices, sizeof m->devices, "%s",
                 e->join->devices ? e->join->devices : "");
        reply = join_reply(s, e->request_id);
        break;
    case HETPS__ENVELOPE__PAYLOAD_HEARTBEAT:
        return ack_reply(s, e->request_id, 0);
    case HETPS__ENVELOPE__PAYLOAD_LEAVE:
        m->state = M_LEFT;
        hc_info("worker:%u left", w);
        ps_sync_member(s->sync, (int)w, 0);
        advance(s);
        reply = ack_reply(s, e->request_id, 0);
        break;
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
        rv = ps_shard_serve(s->shard, in, &s->me, NULL, &reply);
        if (rv != HC_OK)
            return error_reply(s, e->request_id, hc_wire_error_code(rv),
                               hc_err_msg());
        break;
    case HETPS__ENVELOPE__PAYLOAD_PULL:
        return serve_pull(s, in, msg_in, req, deferred);
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        rv = serve_push(s, in, msg_in, req, deferred, &reply);
        if (rv != HC_OK)
            return error_reply(s, e->request_id, hc_wire_error_code(rv),
                               hc_err_msg());
        break;
    default:
        snprintf(text, sizeof text, "a %s is a reply, not a request",
                 hc_wire_payload_name(pc));
        return error_reply(s, e->request_id, HETPS__ERROR_CODE__E_MALFORMED,
                           text);
    }
    if ((reply || *deferred) && is_effect(pc))
        record_reply(m, rec, e->request_id, reply);
    return reply;
}

static void on_request(void *arg, hc_rpc_req *req, nng_msg *msg)
{
    struct ps_service *s = arg;
    struct hc_wire_msg in;
    nng_msg *reply = NULL;
    uint64_t rejected;
    int rv, deferred = 0;

    rv = hc_wire_decode(nng_msg_body(msg), nng_msg_len(msg), s->cl->id, &in);
    if (rv != HC_OK) {
        pthread_mutex_lock(&s->mu);
        rejected = ++s->rejected;
        pthread_mutex_unlock(&s->mu);
        if (rejected <= 10 || rejected % 1000 == 0)
            hc_warn("rejected a message (%llu so far): %s",
                    (unsigned long long)rejected, hc_err_msg());
        nng_msg_free(msg);
        hc_rpc_reply(req, error_reply(s, 0, hc_wire_error_code(rv),
                                      hc_err_msg()));
        return;
    }

    pthread_mutex_lock(&s->mu);
    s->requests++;
    switch (in.env->payload_case) {
    case HETPS__ENVELOPE__PAYLOAD_STATUS:
        reply = status_reply(s, in.env->request_id);
        break;
    case HETPS__ENVELOPE__PAYLOAD_SHUTDOWN:
        hc_info("shutdown requested by %s:%u",
                in.env->sender->job == HETPS__JOB__JOB_WORKER ? "worker"
                : in.env->sender->job == HETPS__JOB__JOB_PS   ? "ps"
                                                              : "client",
                in.env->sender->index);
        reply = ack_reply(s, in.env->request_id, 0);
        ps_service_request_stop(s);
        break;
    default:
        if (in.env->sender->job == HETPS__JOB__JOB_WORKER) {
            reply = serve_worker(s, &in, msg, req, &deferred);
        } else if (in.env->payload_case == HETPS__ENVELOPE__PAYLOAD_PULL) {
            /* Reading needs no membership: `hetps eval` of live weights. */
            rv = ps_shard_serve(s->shard, &in, &s->me, NULL, &reply);
            if (rv != HC_OK)
                reply = error_reply(s, in.env->request_id,
                                    hc_wire_error_code(rv), hc_err_msg());
        } else {
            reply = error_reply(s, in.env->request_id,
                                HETPS__ERROR_CODE__E_UNKNOWN_TASK,
                                "only workers may send this request");
        }
        break;
    }
    pthread_mutex_unlock(&s->mu);
    hc_wire_msg_free(&in);
    if (deferred)
        return;         /* kept with its message: answered by serve_pending */
    nng_msg_free(msg);
    hc_rpc_reply(req, reply);
}

/* Mark workers silent for longer than the heartbeat timeout as dead. */
static void sweep_members(struct ps_service *s)
{
    int64_t now = hc_now_ms();
    int i, changed = 0;

    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];

        if (m->state == M_JOINED &&
            now - m->last_seen_ms > s->conf.heartbeat_timeout_ms) {
            m->state = M_DEAD;
            hc_warn("worker:%d silent for %lld ms: marked dead", i,
                    (long long)(now - m->last_seen_ms));
            ps_sync_member(s->sync, i, 0);
            changed = 1;
        } else if (m->state == M_NONE && !m->removed &&
                   s->cl->mode != HC_MODE_ASYNC &&
                   now - m->expected_ms > s->conf.join_timeout_ms) {
            /* Expected from the start (sync, ssp); never came. */
            m->state = M_DEAD;
            hc_warn("worker:%d did not join within %d ms: steps go on "
                    "without it", i, s->conf.join_timeout_ms);
            m->expected_ms = INT64_MAX / 2;
            ps_sync_member(s->sync, i, 0);
            changed = 1;
        }
    }
    if (changed)
        advance(s);
    pthread_mutex_unlock(&s->mu);
}

static int file_mtime(const char *path, struct timespec *t)
{
    struct stat st;

    if (!path || stat(path, &st) != 0)
        return -1;
    *t = st.st_mtim;
    return 0;
}

/*
 * Elastic membership: re-read the cluster file. Workers added to it are
 * accepted; one takes part from the step boundary after it joins (sync:
 * with a share of the job's unchanged global batch). Workers removed from
 * it are treated as having left and refused from then on. A changed list
 * of parameter servers is refused: moving blocks is `hetps reshard`.
 */
static void reload_cluster(struct ps_service *s)
{
    struct hc_cluster nc;
    struct hc_diag diag;
    int i, n_old, rv;

    rv = hc_cluster_load_file(s->conf.cluster_file, &nc, &diag);
    if (rv != HC_OK) {
        hc_warn("cluster file %s changed but cannot be used (%s); keeping "
                "the running cluster", s->conf.cluster_file,
                diag.n ? diag.msg[0] : hc_err_msg());
        return;
    }
    if (nc.id != s->cl->id) {
        hc_warn("cluster file %s now lists other parameter servers: moving "
                "blocks between servers needs `hetps reshard`; keeping the "
                "running cluster", s->conf.cluster_file);
        hc_cluster_free(&nc);
        return;
    }
    pthread_mutex_lock(&s->mu);
    n_old = s->n_active;
    if (nc.n_worker > s->n_members) {
        struct member *m = realloc(s->members,
                                   (size_t)nc.n_worker * sizeof *m);

        if (!m) {
            pthread_mutex_unlock(&s->mu);
            hc_cluster_free(&nc);
            hc_warn("out of memory growing the membership");
            return;
        }
        memset(m + s->n_members, 0,
               (size_t)(nc.n_worker - s->n_members) * sizeof *m);
        s->members = m;
        s->n_members = nc.n_worker;
    }
    for (i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];

        if (i < nc.n_worker && (m->removed || i >= n_old)) {
            m->removed = 0;
            m->expected_ms = INT64_MAX / 2;  /* not waited for until it joins */
            hc_info("worker:%d added by the cluster file", i);
        } else if (i >= nc.n_worker && !m->removed) {
            m->removed = 1;
            if (m->state == M_JOINED)
                m->state = M_LEFT;
            ps_sync_member(s->sync, i, 0);
            hc_info("worker:%d removed by the cluster file", i);
        }
    }
    s->n_active = nc.n_worker;
    advance(s);
    pthread_mutex_unlock(&s->mu);
    if (n_old != nc.n_worker)
        hc_info("cluster file %s: %d worker(s), was %d", s->conf.cluster_file,
                nc.n_worker, n_old);
    hc_cluster_free(&nc);
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
    int rv;

    *out = NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return hc_err_set(HC_ERR_NOMEM, "out of memory starting the service");
    s->conf = *c;
    s->cl = c->cluster;
    if (s->conf.heartbeat_timeout_ms <= 0)
        s->conf.heartbeat_timeout_ms = 10000;
    s->me.job = HETPS__JOB__JOB_PS;
    s->me.index = (uint32_t)c->shard;
    s->me.incarnation = hc_wire_new_incarnation();
    s->me.cluster_id = s->cl->id;
    s->start_ms = hc_now_ms();
    s->n_members = s->n_active = s->cl->n_worker;
    if (c->cluster_file)
        file_mtime(c->cluster_file, &s->file_mtime);
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
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
    {
        struct ps_sync_conf sc = { 0 };
        int i;

        sc.mode = s->cl->mode;
        sc.staleness = s->cl->staleness;
        sc.backup = s->cl->backup_workers;
        sc.balance = c->balance;
        sc.max_staleness = c->max_staleness;
        sc.n_workers = s->cl->n_worker;
        rv = ps_sync_new(&s->sync, &sc);
        if (rv != HC_OK)
            goto fail;
        /* sync and ssp wait for every worker of the cluster from the start. */
        for (i = 0; i < s->n_members; i++) {
            s->members[i].expected_ms = s->start_ms;
            if (s->cl->mode != HC_MODE_ASYNC)
                ps_sync_member(s->sync, i, 1);
        }
    }
    rv = ps_shard_open(&s->shard, c->data_dir, c->shard, s->cl->n_ps,
                       c->durability, c->sync_ms);
    if (rv != HC_OK)
        goto fail;
    {
        /* The requests applied before a restart: a repeat of one is still
         * answered from the record, never applied twice. */
        unsigned char *buf = malloc(PS_RECORD_MAX);
        int i, n = 0;

        for (i = 0; buf && i < s->n_members; i++) {
            struct member *m = &s->members[i];
            size_t len = 0;

            if (ps_shard_record(s->shard, i, &m->incarnation,
                                &m->rec[0].last_req, buf, PS_RECORD_MAX,
                                &len) != HC_OK)
                continue;
            if (len && (m->rec[0].reply = malloc(len))) {
                memcpy(m->rec[0].reply, buf, len);
                m->rec[0].reply_len = m->rec[0].reply_cap = len;
            }
            n++;
        }
        free(buf);
        hc_err_clear();
        if (n)
            hc_info("recovered the last applied request of %d worker(s)", n);
    }
    url = c->listen_url ? c->listen_url : s->cl->ps[c->shard].url;
    ro.n_ctx = c->n_ctx > 0 ? c->n_ctx : 64 + 4 * s->n_members;
    ro.recv_max = c->max_message;
    rv = hc_rpc_server_start(&s->rpc, url, &ro, on_request, s);
    if (rv != HC_OK)
        goto fail;
    hc_info("serving shard %d of %d on %s (incarnation %016llx, data %s)",
            c->shard, s->cl->n_ps, url, (unsigned long long)s->me.incarnation,
            c->data_dir);
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
        sweep_members(s);
        if (s->conf.cluster_file &&
            (atomic_exchange(&s->reload, 0) ||
             (file_mtime(s->conf.cluster_file, &t) == 0 &&
              (t.tv_sec != s->file_mtime.tv_sec ||
               t.tv_nsec != s->file_mtime.tv_nsec)))) {
            file_mtime(s->conf.cluster_file, &s->file_mtime);
            reload_cluster(s);
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
    if (s->rpc)
        hc_rpc_server_stop(s->rpc);
    for (i = 0; i < s->n_pending; i++)
        nng_msg_free(s->pending[i].msg);
    free(s->pending);
    if (s->shard)
        ps_shard_close(s->shard);
    ps_sync_free(s->sync);
    for (i = 0; s->members && i < s->n_members; i++) {
        free(s->members[i].rec[0].reply);
        free(s->members[i].rec[1].reply);
    }
    free(s->members);
    if (s->stop_pipe[0] >= 0)
        close(s->stop_pipe[0]);
    if (s->stop_pipe[1] >= 0)
        close(s->stop_pipe[1]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
