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
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "rpc.h"
#include "shard.h"
#include "wire.h"

enum member_state { M_NONE, M_JOINED, M_LEFT, M_DEAD };

static const char *const state_names[] = { "unknown", "joined", "left", "dead" };

/* What the shard knows of one worker. */
struct member {
    enum member_state state;
    uint64_t incarnation;       /* of the worker process last joined */
    uint64_t last_req;          /* last applied request id */
    unsigned char *reply;       /* (reply_len) bytes answered to last_req */
    size_t reply_len, reply_cap;
    int64_t last_seen_ms;
    char devices[128];
    uint64_t requests, duplicates;
};

struct ps_service {
    struct ps_service_conf conf;
    const struct hc_cluster *cl;
    struct hc_sender me;
    hc_rpc_server *rpc;
    struct ps_shard *shard;

    pthread_mutex_t mu;         /* guards everything below */
    struct member *members;     /* (n_members) indexed by worker index */
    int n_members;
    uint64_t requests, duplicates, rejected;
    int64_t start_ms;

    int stop_pipe[2];           /* written by request_stop, read by wait */
    atomic_int stopping;
};

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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

/* Fill members[] (caller frees the arrays) for join and status replies. */
static int fill_members(struct ps_service *s, Hetps__Member ***out,
                        Hetps__Member **storage, Hetps__Task **tasks)
{
    int64_t now = now_ms();
    int i, n = 0;

    *out = calloc((size_t)s->n_members + 1, sizeof **out);
    *storage = calloc((size_t)s->n_members + 1, sizeof **storage);
    *tasks = calloc((size_t)s->n_members + 1, sizeof **tasks);
    if (!*out || !*storage || !*tasks)
        return -1;
    for (i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];
        Hetps__Member *pm = &(*storage)[n];
        Hetps__Task *t = &(*tasks)[n];

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
        (*out)[n++] = pm;
    }
    return n;
}

static nng_msg *status_reply(struct ps_service *s, uint64_t id)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__StatusReply st = HETPS__STATUS_REPLY__INIT;
    Hetps__Task me = HETPS__TASK__INIT;
    Hetps__Member **list = NULL, *storage = NULL;
    Hetps__Task *tasks = NULL;
    nng_msg *m = NULL;
    int n;

    init_env(s, &env, id);
    me.job = HETPS__JOB__JOB_PS;
    me.index = (uint32_t)s->conf.shard;
    st.shard = &me;
    st.incarnation = s->me.incarnation;
    st.version = s->shard ? ps_shard_version(s->shard) : 0;
    n = fill_members(s, &list, &storage, &tasks);
    if (n >= 0) {
        st.n_members = (size_t)n;
        st.members = list;
    }
    st.has_requests = st.has_duplicates = st.has_rejected = 1;
    st.requests = s->requests;
    st.duplicates = s->duplicates;
    st.rejected = s->rejected;
    st.has_uptime_ms = 1;
    st.uptime_ms = (uint64_t)(now_ms() - s->start_ms);
    st.mode = (char *)hc_mode_name(s->cl->mode);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY;
    env.status_reply = &st;
    if (n < 0 || hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        m = NULL;
    free(list);
    free(storage);
    free(tasks);
    return m;
}

static nng_msg *join_reply(struct ps_service *s, uint64_t id)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__JoinReply jr = HETPS__JOIN_REPLY__INIT;
    Hetps__Member **list = NULL, *storage = NULL;
    Hetps__Task *tasks = NULL;
    nng_msg *m = NULL;
    int n;

    init_env(s, &env, id);
    jr.shard_incarnation = s->me.incarnation;
    jr.shard_index = (uint32_t)s->conf.shard;
    jr.n_shards = (uint32_t)s->cl->n_ps;
    jr.has_version = 1;
    jr.version = s->shard ? ps_shard_version(s->shard) : 0;
    n = fill_members(s, &list, &storage, &tasks);
    if (n >= 0) {
        jr.n_members = (size_t)n;
        jr.members = list;
    }
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY;
    env.join_reply = &jr;
    if (n < 0 || hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        m = NULL;
    free(list);
    free(storage);
    free(tasks);
    return m;
}

/* Remember the reply to the last applied request of a member. */
static void record_reply(struct member *m, uint64_t id, nng_msg *reply)
{
    size_t len = reply ? nng_msg_len(reply) : 0;

    m->last_req = id;
    m->requests++;
    if (len > m->reply_cap) {
        unsigned char *p = realloc(m->reply, len);

        if (!p) {
            m->reply_len = 0;
            return;
        }
        m->reply = p;
        m->reply_cap = len;
    }
    if (len)
        memcpy(m->reply, nng_msg_body(reply), len);
    m->reply_len = len;
}

/* A copy of the recorded reply, marked as a duplicate where it is an Ack. */
static nng_msg *replay_reply(struct member *m)
{
    nng_msg *r;

    if (!m->reply_len || nng_msg_alloc(&r, m->reply_len) != 0)
        return NULL;
    memcpy(nng_msg_body(r), m->reply, m->reply_len);
    return r;
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

/*
 * Requests from workers: check the sender, answer repeats from the record,
 * apply the rest. Called with s->mu held; returns the reply.
 */
static nng_msg *serve_worker(struct ps_service *s, const struct hc_wire_msg *in)
{
    const Hetps__Envelope *e = in->env;
    Hetps__Envelope__PayloadCase pc = e->payload_case;
    uint32_t w = e->sender->index;
    struct member *m;
    nng_msg *reply = NULL;
    char text[512];
    int rv;

    if (w >= (uint32_t)s->n_members) {
        snprintf(text, sizeof text,
                 "sender worker:%u is not in the cluster definition (%d workers)",
                 w, s->n_members);
        return error_reply(s, e->request_id,
                           HETPS__ERROR_CODE__E_UNKNOWN_TASK, text);
    }
    m = &s->members[w];
    m->last_seen_ms = now_ms();
    if (pc != HETPS__ENVELOPE__PAYLOAD_JOIN &&
        (m->state != M_JOINED || m->incarnation != e->incarnation)) {
        snprintf(text, sizeof text,
                 "worker:%u (incarnation %016llx) has not joined shard ps:%d: "
                 "send join first", w, (unsigned long long)e->incarnation,
                 s->conf.shard);
        return error_reply(s, e->request_id, HETPS__ERROR_CODE__E_NOT_JOINED,
                           text);
    }
    if (is_effect(pc) && m->incarnation == e->incarnation && m->last_req) {
        if (e->request_id == m->last_req) {
            m->duplicates++;
            s->duplicates++;
            hc_debug("worker:%u request %llu (%s) repeated: answered from the record",
                     w, (unsigned long long)e->request_id,
                     hc_wire_payload_name(pc));
            return replay_reply(m);
        }
        if (e->request_id < m->last_req) {
            snprintf(text, sizeof text,
                     "worker:%u request %llu is older than its last applied "
                     "request %llu", w, (unsigned long long)e->request_id,
                     (unsigned long long)m->last_req);
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
            m->last_req = 0;
        }
        if (m->state != M_JOINED)
            hc_info("worker:%u joined (devices %s)", w,
                    e->join->devices ? e->join->devices : "?");
        m->state = M_JOINED;
        snprintf(m->devices, sizeof m->devices, "%s",
                 e->join->devices ? e->join->devices : "");
        reply = join_reply(s, e->request_id);
        break;
    case HETPS__ENVELOPE__PAYLOAD_HEARTBEAT:
        return ack_reply(s, e->request_id, 0);
    case HETPS__ENVELOPE__PAYLOAD_LEAVE:
        m->state = M_LEFT;
        hc_info("worker:%u left", w);
        reply = ack_reply(s, e->request_id, 0);
        break;
    case HETPS__ENVELOPE__PAYLOAD_CREATE:
    case HETPS__ENVELOPE__PAYLOAD_PULL:
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        rv = ps_shard_serve(s->shard, in, &s->me, &reply);
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
    if (reply && is_effect(pc))
        record_reply(m, e->request_id, reply);
    return reply;
}

static void on_request(void *arg, hc_rpc_req *req, nng_msg *msg)
{
    struct ps_service *s = arg;
    struct hc_wire_msg in;
    nng_msg *reply = NULL;
    uint64_t rejected;
    int rv;

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
            reply = serve_worker(s, &in);
        } else if (in.env->payload_case == HETPS__ENVELOPE__PAYLOAD_PULL) {
            /* Reading needs no membership: `hetps eval` of live weights. */
            rv = ps_shard_serve(s->shard, &in, &s->me, &reply);
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
    nng_msg_free(msg);
    hc_rpc_reply(req, reply);
}

/* Mark workers silent for longer than the heartbeat timeout as dead. */
static void sweep_members(struct ps_service *s)
{
    int64_t now = now_ms();
    int i;

    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];

        if (m->state == M_JOINED &&
            now - m->last_seen_ms > s->conf.heartbeat_timeout_ms) {
            m->state = M_DEAD;
            hc_warn("worker:%d silent for %lld ms: marked dead", i,
                    (long long)(now - m->last_seen_ms));
        }
    }
    pthread_mutex_unlock(&s->mu);
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
    s->start_ms = now_ms();
    s->n_members = s->cl->n_worker;
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
    rv = ps_shard_open(&s->shard, c->data_dir, c->shard, s->cl->n_ps);
    if (rv != HC_OK)
        goto fail;
    url = c->listen_url ? c->listen_url : s->cl->ps[c->shard].url;
    ro.n_ctx = c->n_ctx;
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
        int n = poll(&p, 1, 500);

        if (n < 0 && errno != EINTR)
            break;
        sweep_members(s);
    }
    /* Let the reply to a Shutdown request leave before the socket closes. */
    nanosleep(&(struct timespec){ .tv_nsec = 200 * 1000000L }, NULL);
}

void ps_service_stop(struct ps_service *s)
{
    int i;

    if (!s)
        return;
    if (s->rpc)
        hc_rpc_server_stop(s->rpc);
    if (s->shard)
        ps_shard_close(s->shard);
    for (i = 0; s->members && i < s->n_members; i++)
        free(s->members[i].reply);
    free(s->members);
    if (s->stop_pipe[0] >= 0)
        close(s->stop_pipe[0]);
    if (s->stop_pipe[1] >= 0)
        close(s->stop_pipe[1]);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
