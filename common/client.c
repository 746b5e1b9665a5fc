/*
 * client.c — the worker's view of the parameter servers (see client.h).
 *
 * Every operation builds one request per shard, sends them all at once
 * through common/rpc, and checks each reply before using it: it must be
 * from the right cluster, answer this request id, and be the expected kind
 * or an Error, whose text is passed on naming the shard.
 */
#include "client.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "rpc.h"
#include "wire.h"

struct shard_view {
    int joined;
    uint64_t incarnation;
    uint64_t version;
    char members[512];          /* "worker:0 joined, worker:1 joined" */
};

/* What the client prepared for one shard's pulls and pushes. */
struct shard_plan {
    uint32_t n_blocks;
    uint32_t *blocks;           /* (n_blocks) indices into layout.blocks */
    Hetps__Range *ranges;       /* (n_blocks) for pulls */
    Hetps__Range **range_ptrs;  /* (n_blocks) */
    struct hc_tensor_src *src;  /* (n_blocks) for pushes and creates */
};

struct pc_client {
    const struct hc_cluster *cl;
    struct hc_sender me;
    atomic_uint_fast64_t next_id;
    struct pc_opts o;
    int n;                      /* shards */
    const char **urls, **names;
    char (*name_buf)[32];
    hc_rpc_client *rpc;
    struct shard_view *view;    /* (n) */

    /* Scratch reused by every call: one entry per shard. */
    int *peers;
    nng_msg **reqs, **replies;
    nng_msg **copies;           /* of reqs, to re-send after a re-join */
    unsigned char *copy_ok;     /* copies[i] holds this call's request */
    char devices[128];          /* as joined, for re-joins */
    int *errs;
    struct hc_wire_msg *dec;

    const struct hc_model *model;
    struct hc_layout layout;
    int have_layout;
    struct shard_plan *plan;    /* (n) */

    pthread_t hb_thread;
    int hb_running;
    int hb_interval_ms;
    pthread_mutex_t hb_mu;
    pthread_cond_t hb_cv;
    int hb_stop;
};

static uint64_t next_id(struct pc_client *c)
{
    return atomic_fetch_add(&c->next_id, 1);
}

int pc_open(struct pc_client **out, const struct hc_cluster *cl, int job,
            int index, const struct pc_opts *o)
{
    struct hc_rpc_client_opts ro = { 0 };
    struct pc_client *c;
    int i, rv;

    *out = NULL;
    c = calloc(1, sizeof *c);
    if (!c)
        return hc_err_set(HC_ERR_NOMEM, "out of memory opening the client");
    c->cl = cl;
    c->n = cl->n_ps;
    c->me.job = job == HC_JOB_WORKER ? HETPS__JOB__JOB_WORKER
                                     : HETPS__JOB__JOB_CLIENT;
    c->me.index = (uint32_t)index;
    c->me.incarnation = hc_wire_new_incarnation();
    c->me.cluster_id = cl->id;
    atomic_init(&c->next_id, 1);
    if (o)
        c->o = *o;
    if (c->o.timeout_ms <= 0)
        c->o.timeout_ms = 5000;
    if (c->o.retry_ms <= 0)
        c->o.retry_ms = 30000;
    pthread_mutex_init(&c->hb_mu, NULL);
    pthread_cond_init(&c->hb_cv, NULL);

    c->urls = calloc((size_t)c->n, sizeof *c->urls);
    c->names = calloc((size_t)c->n, sizeof *c->names);
    c->name_buf = calloc((size_t)c->n, sizeof *c->name_buf);
    c->view = calloc((size_t)c->n, sizeof *c->view);
    c->peers = calloc((size_t)c->n, sizeof *c->peers);
    c->reqs = calloc((size_t)c->n, sizeof *c->reqs);
    c->replies = calloc((size_t)c->n, sizeof *c->replies);
    c->copies = calloc((size_t)c->n, sizeof *c->copies);
    c->copy_ok = calloc((size_t)c->n, 1);
    c->errs = calloc((size_t)c->n, sizeof *c->errs);
    c->dec = calloc((size_t)c->n, sizeof *c->dec);
    c->plan = calloc((size_t)c->n, sizeof *c->plan);
    if (!c->urls || !c->names || !c->name_buf || !c->view || !c->peers ||
        !c->reqs || !c->replies || !c->errs || !c->dec || !c->plan ||
        !c->copies || !c->copy_ok) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory opening the client");
        goto fail;
    }
    for (i = 0; i < c->n; i++) {
        snprintf(c->name_buf[i], sizeof c->name_buf[i], "ps:%d", i);
        c->names[i] = c->name_buf[i];
        c->urls[i] = cl->ps[i].url;
        c->peers[i] = i;
    }
    ro.timeout_ms = c->o.timeout_ms;
    ro.retry_ms = c->o.retry_ms;
    rv = hc_rpc_client_open(&c->rpc, c->n, c->urls, c->names, &ro);
    if (rv != HC_OK)
        goto fail;
    *out = c;
    return HC_OK;
fail:
    pc_close(c);
    return rv;
}

/* Join shard i alone (after it restarted). */
static int join_one(struct pc_client *c, int i)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    nng_msg *req = NULL, *reply = NULL;
    struct hc_wire_msg d;
    int rv;

    hc_wire_init_env(&env, &c->me, atomic_fetch_add(&c->next_id, 1));
    join.devices = c->devices;
    join.has_pid = 1;
    join.pid = (uint32_t)getpid();
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN;
    env.join = &join;
    if ((rv = hc_wire_encode(&req, &env, NULL, 0)) != HC_OK)
        return rv;
    if ((rv = hc_rpc_call(c->rpc, i, req, &reply, 0)) != HC_OK)
        return rv;
    rv = hc_wire_decode(nng_msg_body(reply), nng_msg_len(reply), c->cl->id, &d);
    if (rv == HC_OK) {
        if (d.env->payload_case != HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY)
            rv = hc_err_set(HC_ERR_REMOTE, "ps:%d refused the re-join%s%s", i,
                            d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR
                                ? ": " : "",
                            d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR
                                ? d.env->error->message : "");
        else
            c->view[i].incarnation = d.env->join_reply->shard_incarnation;
        hc_wire_msg_free(&d);
    }
    nng_msg_free(reply);
    return rv;
}

/*
 * Send c->reqs[0..n) to every shard at once; decode each reply into
 * c->dec[i] and check it answers request `id` with payload `want`.
 * On failure every decoded reply is released.
 */
static int exchange(struct pc_client *c, const uint64_t *ids,
                    Hetps__Envelope__PayloadCase want, const char *what,
                    int timeout_ms)
{
    int i, rv, first = HC_OK, round;
    char msg[1024] = "";

    /* Keep each request's bytes for a re-send after a re-join, in buffers
     * kept from call to call (no allocation once they are large enough). */
    for (i = 0; i < c->n; i++) {
        size_t len = c->reqs[i] ? nng_msg_len(c->reqs[i]) : 0;

        c->copy_ok[i] = 0;
        if (!c->reqs[i] ||
            (!c->copies[i] && nng_msg_alloc(&c->copies[i], len) != 0) ||
            nng_msg_realloc(c->copies[i], len) != 0)
            continue;
        memcpy(nng_msg_body(c->copies[i]), nng_msg_body(c->reqs[i]), len);
        c->copy_ok[i] = 1;
    }
    rv = hc_rpc_call_all(c->rpc, c->n, c->peers, c->reqs, c->replies, c->errs,
                         timeout_ms);
    for (i = 0; i < c->n; i++)
        c->reqs[i] = NULL;
    /* A shard that restarted (a new incarnation) no longer knows this
     * worker: join it again and re-send the same request — the same id, so
     * a request it had applied before the restart is answered from its
     * record, not applied twice. */
    for (round = 0; rv == HC_OK && round < 3; round++) {
        int again = 0;

        for (i = 0; i < c->n; i++) {
            nng_msg *dup = NULL;
            const Hetps__Envelope *e;

            /* Decoded once here; the checks below use the same result. */
            if (!c->replies[i] || !c->copy_ok[i] ||
                (!c->dec[i].env &&
                 hc_wire_decode(nng_msg_body(c->replies[i]),
                                nng_msg_len(c->replies[i]), c->cl->id,
                                &c->dec[i]) != HC_OK))
                continue;
            e = c->dec[i].env;
            if (e->payload_case != HETPS__ENVELOPE__PAYLOAD_ERROR ||
                e->error->code != HETPS__ERROR_CODE__E_NOT_JOINED)
                continue;
            hc_wire_msg_free(&c->dec[i]);
            again = 1;
            hc_warn("ps:%d (%s) does not know this worker (it restarted?): "
                    "joining it again and re-sending %s", i, c->urls[i], what);
            if ((rv = join_one(c, i)) != HC_OK)
                break;
            nng_msg_free(c->replies[i]);
            c->replies[i] = NULL;
            if (nng_msg_dup(&dup, c->copies[i]) != 0) {
                rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
                break;
            }
            if ((rv = hc_rpc_call(c->rpc, i, dup, &c->replies[i],
                                  timeout_ms)) != HC_OK)
                break;
        }
        if (!again)
            break;
    }
    if (rv != HC_OK) {
        first = rv;
        snprintf(msg, sizeof msg, "%s: %s", what, hc_err_msg());
    }
    for (i = 0; i < c->n; i++) {
        const Hetps__Envelope *e;

        if (!c->replies[i])
            continue;
        rv = c->dec[i].env ? HC_OK
                           : hc_wire_decode(nng_msg_body(c->replies[i]),
                                            nng_msg_len(c->replies[i]),
                                            c->cl->id, &c->dec[i]);
        if (rv != HC_OK) {
            if (first == HC_OK) {
                first = rv;
                snprintf(msg, sizeof msg, "%s: bad reply from ps:%d (%s): %s",
                         what, i, c->urls[i], hc_err_msg());
            }
            continue;
        }
        e = c->dec[i].env;
        if (e->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR) {
            if (first == HC_OK) {
                first = hc_wire_error_from_code(e->error->code);
                if (first == HC_OK)
                    first = HC_ERR_REMOTE;
                snprintf(msg, sizeof msg, "%s: ps:%d (%s) refused: %s", what,
                         i, c->urls[i], e->error->message);
            }
        } else if (e->request_id != ids[i] || e->payload_case != want) {
            if (first == HC_OK) {
                first = HC_ERR_PROTO;
                snprintf(msg, sizeof msg,
                         "%s: ps:%d answered request %llu with a %s to %llu",
                         what, i, (unsigned long long)ids[i],
                         hc_wire_payload_name(e->payload_case),
                         (unsigned long long)e->request_id);
            }
        }
    }
    if (first != HC_OK) {
        for (i = 0; i < c->n; i++) {
            hc_wire_msg_free(&c->dec[i]);
            if (c->replies[i])
                nng_msg_free(c->replies[i]);
            c->replies[i] = NULL;
        }
        return hc_err_set(first, "%s", msg);
    }
    return HC_OK;
}

static void release(struct pc_client *c)
{
    int i;

    for (i = 0; i < c->n; i++) {
        hc_wire_msg_free(&c->dec[i]);
        if (c->replies[i])
            nng_msg_free(c->replies[i]);
        c->replies[i] = NULL;
    }
}

static void free_reqs(struct pc_client *c)
{
    int i;

    for (i = 0; i < c->n; i++) {
        if (c->reqs[i])
            nng_msg_free(c->reqs[i]);
        c->reqs[i] = NULL;
    }
}

/* Build the same payload-only request (no tensors) for every shard. */
static int simple_reqs(struct pc_client *c, Hetps__Envelope *env,
                       uint64_t *ids)
{
    int i, rv;

    for (i = 0; i < c->n; i++) {
        ids[i] = next_id(c);
        env->request_id = ids[i];
        rv = hc_wire_encode(&c->reqs[i], env, NULL, 0);
        if (rv != HC_OK) {
            free_reqs(c);
            return rv;
        }
    }
    return HC_OK;
}

int pc_join(struct pc_client *c, const char *devices)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    uint64_t *ids = calloc((size_t)c->n, sizeof *ids);
    char host[256] = "";
    int i, rv;

    if (!ids)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    gethostname(host, sizeof host - 1);
    snprintf(c->devices, sizeof c->devices, "%s", devices ? devices : "");
    hc_wire_init_env(&env, &c->me, 0);
    join.devices = c->devices;
    join.host = host;
    join.has_pid = 1;
    join.pid = (uint32_t)getpid();
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN;
    env.join = &join;
    rv = simple_reqs(c, &env, ids);
    if (rv == HC_OK)
        rv = exchange(c, ids, HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY, "join", 0);
    if (rv == HC_OK) {
        for (i = 0; i < c->n; i++) {
            const Hetps__JoinReply *jr = c->dec[i].env->join_reply;
            struct shard_view *v = &c->view[i];
            size_t k, len = 0;

            v->joined = 1;
            v->incarnation = jr->shard_incarnation;
            v->version = jr->has_version ? jr->version : 0;
            v->members[0] = '\0';
            for (k = 0; k < jr->n_members && len < sizeof v->members; k++)
                len += (size_t)snprintf(v->members + len,
                                        sizeof v->members - len, "%sworker:%u %s",
                                        k ? ", " : "", jr->members[k]->task->index,
                                        jr->members[k]->state);
        }
        release(c);
    }
    free(ids);
    return rv;
}

void pc_print_view(const struct pc_client *c, FILE *f)
{
    int i;

    fprintf(f, "cluster %016llx: %d parameter server(s), %d worker(s); this is %s:%u\n",
            (unsigned long long)c->cl->id, c->n, c->cl->n_worker,
            c->me.job == HETPS__JOB__JOB_WORKER ? "worker" : "client",
            c->me.index);
    for (i = 0; i < c->n; i++) {
        const struct shard_view *v = &c->view[i];

        fprintf(f, "  ps:%d %-24s %s incarnation %016llx version %llu; members: %s\n",
                i, c->cl->ps[i].addr, v->joined ? "joined" : "not joined",
                (unsigned long long)v->incarnation,
                (unsigned long long)v->version,
                v->members[0] ? v->members : "-");
    }
    fflush(f);
}

static int send_all_simple(struct pc_client *c, hc_rpc_client *rpc,
                           Hetps__Envelope__PayloadCase pc, const char *what)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Heartbeat hb = HETPS__HEARTBEAT__INIT;
    Hetps__Leave lv = HETPS__LEAVE__INIT;
    Hetps__Shutdown sd = HETPS__SHUTDOWN__INIT;
    nng_msg **reqs = calloc((size_t)c->n, sizeof *reqs);
    nng_msg **reps = calloc((size_t)c->n, sizeof *reps);
    int *errs = calloc((size_t)c->n, sizeof *errs);
    int i, rv = HC_OK, bad = 0;

    if (!reqs || !reps || !errs) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
        goto out;
    }
    hc_wire_init_env(&env, &c->me, 0);
    env.payload_case = pc;
    if (pc == HETPS__ENVELOPE__PAYLOAD_HEARTBEAT)
        env.heartbeat = &hb;
    else if (pc == HETPS__ENVELOPE__PAYLOAD_LEAVE)
        env.leave = &lv;
    else
        env.shutdown = &sd;
    for (i = 0; i < c->n; i++) {
        env.request_id = next_id(c);
        rv = hc_wire_encode(&reqs[i], &env, NULL, 0);
        if (rv != HC_OK)
            goto out;
    }
    rv = hc_rpc_call_all(rpc, c->n, c->peers, reqs, reps, errs, 0);
    for (i = 0; i < c->n; i++)
        reqs[i] = NULL;
    for (i = 0; i < c->n && rv == HC_OK; i++) {
        struct hc_wire_msg d;

        if (hc_wire_decode(nng_msg_body(reps[i]), nng_msg_len(reps[i]),
                           c->cl->id, &d) != HC_OK) {
            rv = hc_err_set(HC_ERR_PROTO, "%s: bad reply from ps:%d: %s", what,
                            i, hc_err_msg());
            break;
        }
        if (d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR) {
            rv = hc_err_set(HC_ERR_REMOTE, "%s: ps:%d refused: %s", what, i,
                            d.env->error->message);
            bad = 1;
        }
        hc_wire_msg_free(&d);
        if (bad)
            break;
    }
out:
    for (i = 0; reqs && i < c->n; i++)
        if (reqs[i])
            nng_msg_free(reqs[i]);
    for (i = 0; reps && i < c->n; i++)
        if (reps[i])
            nng_msg_free(reps[i]);
    free(reqs);
    free(reps);
    free(errs);
    return rv;
}

static void *heartbeat_main(void *arg)
{
    struct pc_client *c = arg;
    struct hc_rpc_client_opts ro = { 0 };
    hc_rpc_client *rpc = NULL;
    struct timespec until;
    int rv;

    ro.timeout_ms = c->hb_interval_ms > 500 ? c->hb_interval_ms : 500;
    ro.retry_ms = ro.timeout_ms;
    rv = hc_rpc_client_open(&rpc, c->n, c->urls, c->names, &ro);
    if (rv != HC_OK) {
        hc_warn("heartbeats disabled: %s", hc_err_msg());
        return NULL;
    }
    pthread_mutex_lock(&c->hb_mu);
    while (!c->hb_stop) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += c->hb_interval_ms / 1000;
        until.tv_nsec += (long)(c->hb_interval_ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&c->hb_cv, &c->hb_mu, &until);
        if (c->hb_stop)
            break;
        pthread_mutex_unlock(&c->hb_mu);
        if (send_all_simple(c, rpc, HETPS__ENVELOPE__PAYLOAD_HEARTBEAT,
                            "heartbeat") != HC_OK)
            hc_warn("%s", hc_err_msg());
        pthread_mutex_lock(&c->hb_mu);
    }
    pthread_mutex_unlock(&c->hb_mu);
    hc_rpc_client_close(rpc);
    return NULL;
}

int pc_heartbeat_start(struct pc_client *c, int interval_ms)
{
    if (c->hb_running)
        return HC_OK;
    c->hb_interval_ms = interval_ms > 0 ? interval_ms : 1000;
    c->hb_stop = 0;
    if (pthread_create(&c->hb_thread, NULL, heartbeat_main, c) != 0)
        return hc_err_set(HC_ERR_IO, "cannot start the heartbeat thread");
    c->hb_running = 1;
    return HC_OK;
}

static void heartbeat_stop(struct pc_client *c)
{
    if (!c->hb_running)
        return;
    pthread_mutex_lock(&c->hb_mu);
    c->hb_stop = 1;
    pthread_cond_signal(&c->hb_cv);
    pthread_mutex_unlock(&c->hb_mu);
    pthread_join(c->hb_thread, NULL);
    c->hb_running = 0;
}

int pc_leave(struct pc_client *c)
{
    heartbeat_stop(c);
    return send_all_simple(c, c->rpc, HETPS__ENVELOPE__PAYLOAD_LEAVE, "leave");
}

int pc_shutdown(struct pc_client *c)
{
    return send_all_simple(c, c->rpc, HETPS__ENVELOPE__PAYLOAD_SHUTDOWN,
                           "shutdown");
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
    rv = simple_reqs(c, &env, ids);
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
        o->max_ahead = r->max_ahead;
        o->waiting = r->waiting;
        snprintf(o->mode, sizeof o->mode, "%s", r->mode ? r->mode : "");
        o->members = calloc(r->n_members + 1, sizeof *o->members);
        if (!o->members)
            continue;
        for (k = 0; k < r->n_members; k++) {
            const Hetps__Member *m = r->members[k];
            struct pc_member *pm = &o->members[k];

            pm->worker = (int)m->task->index;
            snprintf(pm->state, sizeof pm->state, "%s", m->state);
            pm->incarnation = m->incarnation;
            pm->last_seen_ms = m->last_seen_ms;
            pm->requests = m->requests;
            pm->duplicates = m->duplicates;
            pm->clock = m->clock;
            pm->late = m->late;
            pm->samples_per_s = m->samples_per_s;
            pm->share = m->share;
            snprintf(pm->devices, sizeof pm->devices, "%s",
                     m->devices ? m->devices : "");
        }
        o->n_members = (int)r->n_members;
    }
    release(c);
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

int pc_set_model(struct pc_client *c, const struct hc_model *m,
                 uint32_t block_elems)
{
    size_t sizes[HC_MODEL_MAX_VARS];
    size_t b;
    int i, v, rv;

    for (v = 0; v < m->n_vars; v++)
        sizes[v] = m->vars[v].size;
    rv = hc_layout_build(sizes, m->n_vars, c->n,
                         block_elems ? block_elems : HC_LAYOUT_DEFAULT_BLOCK,
                         &c->layout);
    if (rv != HC_OK)
        return rv;
    c->have_layout = 1;
    c->model = m;
    for (i = 0; i < c->n; i++) {
        struct shard_plan *p = &c->plan[i];
        uint32_t n = c->layout.shard_blocks[i];

        p->n_blocks = 0;
        p->blocks = calloc(n + 1, sizeof *p->blocks);
        p->ranges = calloc(n + 1, sizeof *p->ranges);
        p->range_ptrs = calloc(n + 1, sizeof *p->range_ptrs);
        p->src = calloc(n + 1, sizeof *p->src);
        if (!p->blocks || !p->ranges || !p->range_ptrs || !p->src)
            return hc_err_set(HC_ERR_NOMEM, "out of memory for the layout");
    }
    for (b = 0; b < c->layout.n_blocks; b++) {
        const struct hc_block *blk = &c->layout.blocks[b];
        struct shard_plan *p = &c->plan[blk->shard];
        Hetps__Range *r = &p->ranges[p->n_blocks];

        hetps__range__init(r);
        r->key = blk->var;
        r->offset = blk->offset;
        r->length = blk->length;
        p->range_ptrs[p->n_blocks] = r;
        p->src[p->n_blocks].key = blk->var;
        p->src[p->n_blocks].offset = blk->offset;
        p->src[p->n_blocks].length = blk->length;
        p->blocks[p->n_blocks++] = (uint32_t)b;
    }
    return HC_OK;
}

static int need_layout(const struct pc_client *c, const char *what)
{
    if (!c->have_layout)
        return hc_err_set(HC_ERR_INVAL, "%s before pc_set_model", what);
    return HC_OK;
}

int pc_create(struct pc_client *c, const float *init)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__CreateVariables cv = HETPS__CREATE_VARIABLES__INIT;
    Hetps__VariableDef defs[HC_MODEL_MAX_VARS], *def_ptrs[HC_MODEL_MAX_VARS];
    uint32_t shapes[HC_MODEL_MAX_VARS][4];
    uint64_t *ids = NULL;
    char optim[512];
    const struct hc_model *m = c->model;
    int i, v, rv;
    uint32_t k;

    if ((rv = need_layout(c, "pc_create")) != HC_OK)
        return rv;
    for (v = 0; v < m->n_vars; v++) {
        hetps__variable_def__init(&defs[v]);
        defs[v].name = (char *)m->vars[v].name;
        for (i = 0; i < m->vars[v].ndim; i++)
            shapes[v][i] = (uint32_t)m->vars[v].shape[i];
        defs[v].n_shape = (size_t)m->vars[v].ndim;
        defs[v].shape = shapes[v];
        def_ptrs[v] = &defs[v];
    }
    hc_optim_to_json(&m->optim, optim, sizeof optim);
    hc_wire_init_env(&env, &c->me, 0);
    cv.n_vars = (size_t)m->n_vars;
    cv.vars = def_ptrs;
    cv.block_elems = c->layout.block_elems;
    cv.signature = m->signature;
    cv.has_optimizer = 1;
    cv.optimizer.data = (uint8_t *)optim;
    cv.optimizer.len = strlen(optim);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_CREATE;
    env.create = &cv;
    ids = calloc((size_t)c->n, sizeof *ids);
    if (!ids)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (i = 0; i < c->n; i++) {
        struct shard_plan *p = &c->plan[i];

        for (k = 0; k < p->n_blocks; k++)
            p->src[k].data = init + c->layout.blocks[p->blocks[k]].flat;
        ids[i] = env.request_id = next_id(c);
        rv = hc_wire_encode(&c->reqs[i], &env, p->src, p->n_blocks);
        if (rv != HC_OK) {
            free_reqs(c);
            goto out;
        }
    }
    rv = exchange(c, ids, HETPS__ENVELOPE__PAYLOAD_ACK, "create variables", 0);
    if (rv == HC_OK)
        release(c);
out:
    free(ids);
    return rv;
}

static int take_values(struct pc_client *c, float *params, struct pc_step *st,
                       int *late);

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
    uint64_t ids[64], *idp = ids;
    int i, rv;

    if ((rv = need_layout(c, "pc_pull")) != HC_OK)
        return rv;
    if (c->n > 64 && !(idp = calloc((size_t)c->n, sizeof *idp)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    st->has_slice = 0;
    hc_wire_init_env(&env, &c->me, 0);
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
        pull.n_ranges = c->plan[i].n_blocks;
        pull.ranges = c->plan[i].range_ptrs;
        idp[i] = env.request_id = next_id(c);
        rv = hc_wire_encode(&c->reqs[i], &env, NULL, 0);
        if (rv != HC_OK) {
            free_reqs(c);
            goto out;
        }
    }
    rv = exchange(c, idp, HETPS__ENVELOPE__PAYLOAD_ACK, "pull", wait_ms);
    if (rv != HC_OK)
        goto out;
    rv = take_values(c, params, st, NULL);
out:
    if (idp != ids)
        free(idp);
    return rv;
}

/* Copy the values of every shard's answer (in c->dec) into params, check
 * them against the plan, and read the version, the slice (ps:0's) and the
 * late flags; releases the answers. */
static int take_values(struct pc_client *c, float *params, struct pc_step *st,
                       int *late)
{
    uint64_t vmin = UINT64_MAX;
    int i, rv = HC_OK, missing = 0;
    size_t k;

    st->has_slice = 0;
    if (late)
        *late = 0;
    if (c->dec[0].env->ack->has_batch_count) {
        st->has_slice = 1;
        st->offset = c->dec[0].env->ack->batch_offset;
        st->count = c->dec[0].env->ack->batch_count;
    }
    if (c->dec[0].env->ack->has_job_batch)
        st->job_batch = c->dec[0].env->ack->job_batch;
    for (i = 0; i < c->n && rv == HC_OK; i++) {
        const struct shard_plan *p = &c->plan[i];
        const struct hc_wire_msg *d = &c->dec[i];

        if (d->n_tensors == 0 && p->n_blocks > 0 && d->env->ack->has_version &&
            d->env->payload_case == HETPS__ENVELOPE__PAYLOAD_ACK &&
            (d->env->ack->has_duplicate || !d->env->ack->has_batch_count)) {
            /* A push answered from a restarted shard's record: the push was
             * applied; the values come with a plain pull below. */
            missing = 1;
            continue;
        }
        if (d->n_tensors != p->n_blocks) {
            rv = hc_err_set(HC_ERR_PROTO, "pull: ps:%d sent %zu blocks, "
                            "asked for %u", i, d->n_tensors, p->n_blocks);
            break;
        }
        for (k = 0; k < d->n_tensors; k++) {
            const struct hc_block *b = &c->layout.blocks[p->blocks[k]];
            const Hetps__TensorRef *t = d->env->tensors[k];

            if (t->key != b->var || t->offset != b->offset ||
                t->length != b->length) {
                rv = hc_err_set(HC_ERR_PROTO, "pull: ps:%d sent block "
                                "(%u, %llu, %u), asked for (%u, %llu, %u)", i,
                                t->key, (unsigned long long)t->offset,
                                t->length, b->var,
                                (unsigned long long)b->offset, b->length);
                break;
            }
            memcpy(params + b->flat, d->data[k], (size_t)b->length * sizeof(float));
        }
        if (d->env->ack->has_version && d->env->ack->version < vmin)
            vmin = d->env->ack->version;
        if (late && d->env->ack->has_late && d->env->ack->late)
            *late = 1;
    }
    release(c);
    st->version = vmin == UINT64_MAX ? 0 : vmin;
    if (rv == HC_OK && missing) {
        struct pc_step again = *st;

        again.min_version = 0;
        rv = pc_pull_step(c, params, &again, 0);
        st->version = again.version;
        if (again.has_slice) {
            st->has_slice = 1;
            st->offset = again.offset;
            st->count = again.count;
        }
    }
    return rv;
}

/*
 * Send one push per shard (its blocks of grads) and wait for the answers,
 * left decoded in c->dec. With `and_pull` each push carries the shard's
 * ranges and the answer carries their values (push-and-pull).
 */
static int send_push(struct pc_client *c, const float *grads, uint32_t samples,
                     uint64_t base_version, float samples_per_s,
                     uint64_t clock, uint32_t global_batch, uint32_t job_batch,
                     int and_pull, int wait_ms)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Push push = HETPS__PUSH__INIT;
    uint64_t ids[64], *idp = ids;
    int i, rv;
    uint32_t k;

    if ((rv = need_layout(c, "push")) != HC_OK)
        return rv;
    if (c->n > 64 && !(idp = calloc((size_t)c->n, sizeof *idp)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    hc_wire_init_env(&env, &c->me, 0);
    push.samples = samples;
    push.has_base_version = 1;
    push.base_version = base_version;
    push.has_samples_per_s = samples_per_s > 0;
    push.samples_per_s = samples_per_s;
    push.has_clock = 1;
    push.clock = clock;
    push.has_global_batch = global_batch > 0;
    push.global_batch = global_batch;
    push.has_job_batch = job_batch > 0;
    push.job_batch = job_batch;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env.push = &push;
    for (i = 0; i < c->n; i++) {
        struct shard_plan *p = &c->plan[i];

        for (k = 0; k < p->n_blocks; k++)
            p->src[k].data = grads + c->layout.blocks[p->blocks[k]].flat;
        push.n_ranges = and_pull ? p->n_blocks : 0;
        push.ranges = and_pull ? p->range_ptrs : NULL;
        idp[i] = env.request_id = next_id(c);
        rv = hc_wire_encode(&c->reqs[i], &env, p->src, p->n_blocks);
        if (rv != HC_OK) {
            free_reqs(c);
            goto out;
        }
    }
    rv = exchange(c, idp, HETPS__ENVELOPE__PAYLOAD_ACK,
                  and_pull ? "push-and-pull" : "push", wait_ms);
out:
    if (idp != ids)
        free(idp);
    return rv;
}

int pc_push_step(struct pc_client *c, const float *grads, uint32_t samples,
                 uint64_t base_version, float samples_per_s, uint64_t clock,
                 int *late)
{
    int i, rv = send_push(c, grads, samples, base_version, samples_per_s,
                          clock, 0, 0, 0, 0);

    if (late)
        *late = 0;
    if (rv != HC_OK)
        return rv;
    for (i = 0; late && i < c->n; i++)
        if (c->dec[i].env->ack->has_late && c->dec[i].env->ack->late)
            *late = 1;
    release(c);
    return HC_OK;
}

int pc_push_pull(struct pc_client *c, const float *grads, uint32_t samples,
                 uint64_t base_version, float samples_per_s, float *params,
                 struct pc_step *st, int *late, int wait_ms)
{
    int rv = send_push(c, grads, samples, base_version, samples_per_s,
                       st->clock, st->global_batch, st->job_batch, 1, wait_ms);

    return rv == HC_OK ? take_values(c, params, st, late) : rv;
}

void pc_close(struct pc_client *c)
{
    int i;

    if (!c)
        return;
    heartbeat_stop(c);
    if (c->rpc)
        hc_rpc_client_close(c->rpc);
    for (i = 0; c->plan && i < c->n; i++) {
        free(c->plan[i].blocks);
        free(c->plan[i].ranges);
        free(c->plan[i].range_ptrs);
        free(c->plan[i].src);
    }
    if (c->have_layout)
        hc_layout_free(&c->layout);
    free(c->plan);
    free(c->urls);
    free(c->names);
    free(c->name_buf);
    free(c->view);
    free(c->peers);
    free(c->reqs);
    free(c->replies);
    for (i = 0; c->copies && i < c->n; i++)
        if (c->copies[i])
            nng_msg_free(c->copies[i]);
    free(c->copies);
    free(c->copy_ok);
    free(c->errs);
    free(c->dec);
    pthread_mutex_destroy(&c->hb_mu);
    pthread_cond_destroy(&c->hb_cv);
    free(c);
}
