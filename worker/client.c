/*
 * client.c — the worker's view of the parameter servers (see client.h):
 * open and close, join, heartbeats, leave and shutdown, and the layout of
 * the model's variables over the shards (pc_set_model, pc_create).
 *
 * Every operation builds one request per shard, sends them all at once
 * through common/rpc, and checks each reply before using it: it must be
 * from the right cluster, answer this request id, and be the expected kind
 * or an Error, whose text is passed on naming the shard. The exchange
 * itself is client_call.c; pull, push and status are client_step.c
 * (see client_impl.h).
 */
#include "client.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client_impl.h"
#include "clock.h"
#include "err.h"
#include "log.h"
#include "rpc.h"
#include "wire.h"

_Static_assert(PC_MAX_LANES == HC_MAX_LANES, "a client's lanes: the wire's");

/* How long a join refused because the task is in use is asked again. */
#define TASK_IN_USE_GRACE_MS 3000

/* (Re)open the rpc client with `lanes` peers per shard (client_impl.h:
 * peer i is shard i's lane 0, then the other lanes shard by shard). */
static int open_links(struct pc_client *c, int lanes)
{
    struct hc_rpc_client_opts ro = { 0 };
    int n = c->n * lanes, i, l, rv;
    const char **urls = calloc((size_t)n + 1, sizeof *urls);
    const char **names = calloc((size_t)n + 1, sizeof *names);

    if (!urls || !names) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory opening the client");
        goto out;
    }
    for (i = 0; i < c->n; i++) {
        urls[i] = c->urls[i];
        names[i] = c->names[i];
        for (l = 1; l < lanes; l++) {
            urls[c->n + i * (lanes - 1) + l - 1] = c->urls[i];
            names[c->n + i * (lanes - 1) + l - 1] = c->names[i];
        }
    }
    ro.timeout_ms = c->o.timeout_ms;
    ro.retry_ms = c->o.retry_ms;
    ro.tls = c->tls.rpc;
    hc_rpc_client_close(c->rpc);
    c->rpc = NULL;
    if ((rv = hc_rpc_client_open(&c->rpc, n, urls, names, &ro)) == HC_OK)
        c->lanes_open = lanes;
out:
    free(urls);
    free(names);
    return rv;
}

int pc_open(struct pc_client **out, const struct hc_cluster *cl, int job,
            int index, const struct pc_opts *o)
{
    struct pc_client *c;
    char who[32];
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
    atomic_init(&c->model_sig, 0);
    if (o)
        c->o = *o;
    if (c->o.timeout_ms <= 0)
        c->o.timeout_ms = 5000;
    if (c->o.retry_ms <= 0)
        c->o.retry_ms = 30000;
    if (c->o.wait_ms <= 0)
        c->o.wait_ms = 120000;
    c->lanes = c->o.lanes > 0 ? c->o.lanes : 4;
    if (c->lanes > (int)HC_MAX_LANES)
        c->lanes = (int)HC_MAX_LANES;
    c->part_bytes = c->o.part_bytes ? c->o.part_bytes : (uint64_t)4 << 20;
    c->lanes_open = 1;
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
    c->piece_rv = calloc((size_t)c->n, sizeof *c->piece_rv);
    c->piece_why = calloc((size_t)c->n, sizeof *c->piece_why);
    if (!c->urls || !c->names || !c->name_buf || !c->view || !c->peers ||
        !c->reqs || !c->replies || !c->errs || !c->dec || !c->plan ||
        !c->copies || !c->copy_ok || !c->piece_rv ||
        !c->piece_why) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory opening the client");
        goto fail;
    }
    for (i = 0; i < c->n; i++) {
        snprintf(c->name_buf[i], sizeof c->name_buf[i], "ps:%d", i);
        c->names[i] = c->name_buf[i];
        c->urls[i] = cl->ps[i].url;
        c->peers[i] = i;
    }
    if (job == HC_JOB_WORKER)
        snprintf(who, sizeof who, "worker:%d", index);
    else
        snprintf(who, sizeof who, "admin");
    if ((rv = hc_tls_resolve(cl, who, &c->tls)) != HC_OK)
        goto fail;
    c->fan = hc_fanout_open(c->n);      /* NULL: everything on this thread */
    if ((rv = open_links(c, 1)) != HC_OK)
        goto fail;
    *out = c;
    return HC_OK;
fail:
    pc_close(c);
    return rv;
}

int pc_join(struct pc_client *c, const char *devices)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    uint64_t *ids = calloc((size_t)c->n, sizeof *ids);
    char host[256] = "";
    struct hc_sender me;
    int64_t until;
    int i, rv;

    if (!ids)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    gethostname(host, sizeof host - 1);
    snprintf(c->devices, sizeof c->devices, "%s", devices ? devices : "");
    client_sender(c, &me);
    hc_wire_init_env(&env, &me, 0);
    join.devices = c->devices;
    join.host = host;
    join.has_pid = 1;
    join.pid = (uint32_t)getpid();
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN;
    env.join = &join;
    /* A shard refuses the join while another process of this task is
     * connected (E_TASK_IN_USE, read as HC_ERR_EXISTS). After a crash
     * the shard notices the old connection is gone within moments, so a
     * restarted worker asks again for a short while before giving up. */
    until = hc_now_ms() + TASK_IN_USE_GRACE_MS;
    for (;;) {
        rv = client_simple_reqs(c, &env, ids);
        if (rv == HC_OK)
            rv = client_call(c, ids, HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY,
                                 "join", 0);
        if (rv != HC_ERR_EXISTS || hc_now_ms() >= until)
            break;
        hc_sleep_s(0.1);
    }
    if (rv == HC_OK && c->n > 1) {
        /* sync: shards count a newcomer in from the step after the one
         * each was at when its join arrived — steps apart when the job
         * moved on between them, and the newcomer's first pull would then
         * wait on one shard for a step that waits for its push on the
         * other. Join again with the latest, so all agree. */
        uint64_t lo = UINT64_MAX, hi = 0;

        for (i = 0; i < c->n; i++) {
            const Hetps__JoinReply *jr = c->dec[i].env->join_reply;

            if (!jr->has_from_version)
                continue;
            lo = jr->from_version < lo ? jr->from_version : lo;
            hi = jr->from_version > hi ? jr->from_version : hi;
        }
        if (lo != UINT64_MAX && lo != hi) {
            client_release(c);
            join.has_start_version = 1;
            join.start_version = hi;
            rv = client_simple_reqs(c, &env, ids);
            if (rv == HC_OK)
                rv = client_call(c, ids,
                                     HETPS__ENVELOPE__PAYLOAD_JOIN_REPLY,
                                     "join", 0);
        }
    }
    if (rv == HC_OK) {
        for (i = 0; i < c->n; i++) {
            const Hetps__JoinReply *jr = c->dec[i].env->join_reply;
            struct shard_view *v = &c->view[i];
            uint32_t be = jr->has_block_elems ? jr->block_elems : 0;
            size_t k, len = 0;

            if (be && !c->store_block)
                c->store_block = be;
            else if (be && be != c->store_block && rv == HC_OK)
                rv = hc_err_set(HC_ERR_MISMATCH, "the shards' stores hold "
                                "blocks of different sizes (ps:%d: %u "
                                "elements, another: %u): they were not made "
                                "by one job — start from a fresh --data-dir "
                                "or restore the job's own stores", i, be,
                                c->store_block);
            v->joined = 1;
            v->incarnation = jr->shard_incarnation;
            v->version = jr->has_version ? jr->version : 0;
            v->has_place = jr->has_epoch && jr->has_batches;
            v->epoch = jr->epoch;
            v->batches = jr->batches;
            v->members[0] = '\0';
            for (k = 0; k < jr->n_members && len < sizeof v->members; k++)
                len += (size_t)snprintf(v->members + len,
                                        sizeof v->members - len, "%sworker:%u %s",
                                        k ? ", " : "", jr->members[k]->task->index,
                                        jr->members[k]->state);
        }
        client_release(c);
    }
    free(ids);
    return rv;
}

/* Whether this worker's steps reach shard i: it holds a block of the
 * model, or rows of its tables (every shard does). Unknown before the
 * model is set: yes. */
static int pushed_to(const struct pc_client *c, int i)
{
    if (!c->have_layout || c->plan[i].n_blocks > 0)
        return 1;
    for (int v = 0; v < c->model->n_vars; v++)
        if (c->model->vars[v].table_rows)
            return 1;
    return 0;
}

int pc_place(const struct pc_client *c, uint32_t *epoch, uint32_t *batches)
{
    int any = 0, i;

    *epoch = *batches = 0;
    for (i = 0; i < c->n; i++)
        any |= c->view[i].has_place;
    if (!any)
        return 0;
    *epoch = *batches = UINT32_MAX;
    for (i = 0; i < c->n; i++) {
        const struct shard_view *v = &c->view[i];
        /* A shard this worker's steps reach that holds no place never
         * applied one: its first step reached the others alone. */
        uint32_t e = v->has_place ? v->epoch : 0;
        uint32_t b = v->has_place ? v->batches : 0;

        if (!v->has_place && !pushed_to(c, i))
            continue;
        if (e < *epoch || (e == *epoch && b < *batches)) {
            *epoch = e;
            *batches = b;
        }
    }
    return 1;
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
        env.request_id = client_next_id(c);
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
        if (d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR &&
            pc == HETPS__ENVELOPE__PAYLOAD_LEAVE &&
            d.env->error->code == HETPS__ERROR_CODE__E_NOT_JOINED) {
            /* A shard restarted since this worker's last call: it holds
             * nothing of the worker to leave. */
            hc_info("leave: ps:%d no longer knows this worker (it "
                    "restarted): nothing to leave there", i);
        } else if (d.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ERROR) {
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
    ro.tls = c->tls.rpc;
    rv = hc_rpc_client_open(&rpc, c->n, c->urls, c->names, &ro);
    if (rv != HC_OK) {
        hc_warn("heartbeats disabled: %s", hc_err_msg());
        return NULL;
    }
    pthread_mutex_lock(&c->hb_mu);
    while (!c->hb_stop) {
        until = hc_time_in(CLOCK_REALTIME, c->hb_interval_ms);
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

static void free_parts(struct pc_client *c)
{
    free(c->pcalls);
    free(c->p_peers);
    free(c->p_reqs);
    free(c->p_replies);
    free(c->p_errs);
    free(c->p_rv);
    free(c->p_dec);
    free(c->p_why);
    free(c->p_taken);
    c->pcalls = NULL;
    c->p_replies = NULL;
    c->n_pcalls = 0;
}

/* The step's parts (client_parts.c), their calls, and a lane per part. */
static int set_parts(struct pc_client *c)
{
    int n = (int)client_parts_plan(c), i, j = 0;
    uint32_t k;

    free_parts(c);
    c->pcalls = calloc((size_t)n + 1, sizeof *c->pcalls);
    c->p_peers = calloc((size_t)n + 1, sizeof *c->p_peers);
    c->p_reqs = calloc((size_t)n + 1, sizeof *c->p_reqs);
    c->p_replies = calloc((size_t)n + 1, sizeof *c->p_replies);
    c->p_errs = calloc((size_t)n + 1, sizeof *c->p_errs);
    c->p_rv = calloc((size_t)n + 1, sizeof *c->p_rv);
    c->p_dec = calloc((size_t)n + 1, sizeof *c->p_dec);
    c->p_why = calloc((size_t)n + 1, sizeof *c->p_why);
    c->p_taken = calloc((size_t)n + 1, 1);
    if (!c->pcalls || !c->p_peers || !c->p_reqs || !c->p_replies ||
        !c->p_errs || !c->p_rv || !c->p_dec || !c->p_why || !c->p_taken)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for the parts");
    c->n_pcalls = n;
    if (!client_parts_used(c))
        return HC_OK;
    if (c->lanes_open < c->lanes) {
        int rv = open_links(c, c->lanes);

        if (rv != HC_OK)
            return rv;
    }
    for (i = 0; i < c->n; i++) {
        for (k = 0; k < c->plan[i].n_parts; k++, j++) {
            c->pcalls[j].shard = i;
            c->pcalls[j].part = k;
            c->p_peers[j] = k == 0 ? i
                                   : c->n + i * (c->lanes_open - 1) +
                                         (int)k - 1;
        }
    }
    client_parts_order(c);
    hc_info("each step moves in %d parts of about %.1f MiB over %d lanes "
            "per shard", n, (double)c->part_bytes / (1 << 20), c->lanes);
    return HC_OK;
}

int pc_set_model(struct pc_client *c, const struct hc_model *m,
                 uint32_t block_elems)
{
    size_t sizes[HC_MODEL_MAX_VARS];
    unsigned char with_prev[HC_MODEL_MAX_VARS];
    size_t b;
    int i, v, rv;

    for (v = 0; v < m->n_vars; v++) {
        sizes[v] = m->vars[v].size;
        with_prev[v] = m->vars[v].moving && m->vars[v].moments_of >= 0;
    }
    if (!block_elems)
        block_elems = c->store_block ? c->store_block : HC_LAYOUT_DEFAULT_BLOCK;
    rv = hc_layout_build_with(sizes, with_prev, m->n_vars, c->n, block_elems,
                              &c->layout);
    if (rv != HC_OK)
        return rv;
    for (b = 0; b < c->layout.n_blocks; b++) {
        const struct hc_block *bk = &c->layout.blocks[b];

        if (with_prev[bk->var] && !bk->joined) {
            rv = hc_err_set(HC_ERR_CONFIG, "%s: %zu channels are more than "
                            "a block of %u elements; a batch norm's moving "
                            "statistics must each fit one block (a "
                            "narrower layer)", m->vars[bk->var].name,
                            m->vars[bk->var].size, block_elems);
            hc_layout_free(&c->layout);
            return rv;
        }
    }
    c->have_layout = 1;
    c->model = m;
    atomic_store(&c->model_sig, m->signature);
    for (i = 0; i < c->n; i++) {
        struct shard_plan *p = &c->plan[i];
        uint32_t n = c->layout.shard_blocks[i];

        p->n_blocks = 0;
        p->blocks = calloc(n + 1, sizeof *p->blocks);
        p->ranges = calloc(n + 1, sizeof *p->ranges);
        p->range_ptrs = calloc(n + 1, sizeof *p->range_ptrs);
        /* Room for a step's rows after the blocks (client_step.c). */
        p->src = calloc(n + 1 + 3 * HC_WIRE_MAX_TABLES, sizeof *p->src);
        p->part_at = calloc((size_t)c->lanes + 1, sizeof *p->part_at);
        if (!p->blocks || !p->ranges || !p->range_ptrs || !p->src ||
            !p->part_at)
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
    return set_parts(c);
}

int client_need_layout(const struct pc_client *c, const char *what)
{
    if (!c->have_layout)
        return hc_err_set(HC_ERR_INVAL, "%s before pc_set_model", what);
    return HC_OK;
}

/* A row-sparse table's definition on the wire: its row's shape alone
 * ([output_dim]), its rows and its initialiser. */
static void table_def(const struct hc_var_def *d, Hetps__VariableDef *def,
                      Hetps__TableInit *ti, uint32_t *shape)
{
    hetps__table_init__init(ti);
    shape[0] = (uint32_t)d->shape[d->ndim - 1];
    def->n_shape = 1;
    def->has_table_rows = 1;
    def->table_rows = d->table_rows;
    ti->kind = (uint32_t)d->init;
    ti->has_a = ti->has_b = ti->has_mode = ti->has_dist = 1;
    ti->a = d->init_par.a;
    ti->b = d->init_par.b;
    ti->mode = (uint32_t)d->init_par.mode;
    ti->dist = (uint32_t)d->init_par.dist;
    def->table_init = ti;
}

static int create(struct pc_client *c, const float *init, int rows_follow)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__CreateVariables cv = HETPS__CREATE_VARIABLES__INIT;
    Hetps__VariableDef defs[HC_MODEL_MAX_VARS], *def_ptrs[HC_MODEL_MAX_VARS];
    Hetps__TableInit tinit[HC_MODEL_MAX_VARS];
    uint32_t shapes[HC_MODEL_MAX_VARS][4];
    uint64_t *ids = NULL;
    struct hc_optim_wire optim;
    const struct hc_model *m = c->model;
    int i, v, rv;
    uint32_t k;

    if ((rv = client_need_layout(c, "pc_create")) != HC_OK)
        return rv;
    for (v = 0; v < m->n_vars; v++) {
        hetps__variable_def__init(&defs[v]);
        defs[v].name = (char *)m->vars[v].name;
        for (i = 0; i < m->vars[v].ndim; i++)
            shapes[v][i] = (uint32_t)m->vars[v].shape[i];
        defs[v].n_shape = (size_t)m->vars[v].ndim;
        defs[v].shape = shapes[v];
        if (m->vars[v].moving) {
            defs[v].has_moving_momentum = 1;
            defs[v].moving_momentum = m->vars[v].momentum;
            defs[v].has_moments_of_prev = m->vars[v].moments_of >= 0;
            defs[v].moments_of_prev = m->vars[v].moments_of >= 0;
        }
        def_ptrs[v] = &defs[v];
        if (m->vars[v].table_rows)
            table_def(&m->vars[v], &defs[v], &tinit[v], shapes[v]);
    }
    cv.has_seed = 1;
    cv.seed = m->seed;
    cv.has_rows_follow = cv.rows_follow = rows_follow != 0;
    hc_wire_init_env(&env, &c->me, 0);
    cv.n_vars = (size_t)m->n_vars;
    cv.vars = def_ptrs;
    cv.block_elems = c->layout.block_elems;
    cv.signature = m->signature;
    hc_optim_to_wire(&m->optim, &optim);
    cv.optimizer = &optim.m;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_CREATE;
    env.create = &cv;
    ids = calloc((size_t)c->n, sizeof *ids);
    if (!ids)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (i = 0; i < c->n; i++) {
        struct shard_plan *p = &c->plan[i];

        for (k = 0; k < p->n_blocks; k++)
            p->src[k].data = init + c->layout.blocks[p->blocks[k]].flat;
        ids[i] = env.request_id = client_next_id(c);
        rv = hc_wire_encode(&c->reqs[i], &env, p->src, p->n_blocks);
        if (rv != HC_OK) {
            client_free_reqs(c);
            goto out;
        }
    }
    rv = client_call(c, ids, HETPS__ENVELOPE__PAYLOAD_ACK,
                         "create variables", 0);
    if (rv == HC_OK)
        client_release(c);
out:
    free(ids);
    return rv;
}

int pc_create(struct pc_client *c, const float *init)
{
    return create(c, init, 0);
}

int pc_create_loading(struct pc_client *c, const float *init)
{
    return create(c, init, 1);
}

void pc_close(struct pc_client *c)
{
    int i;

    if (!c)
        return;
    heartbeat_stop(c);
    if (c->rpc)
        hc_rpc_client_close(c->rpc);
    for (int k = 0; k < 2; k++) {
        for (i = 0; c->rowmaps[k] && i < (int)HC_WIRE_MAX_TABLES; i++)
            hc_rowmap_free(&c->rowmaps[k][i]);
        free(c->rowmaps[k]);
        free(c->rows_buf[k]);
    }
    free(c->rows_loading);
    hc_fanout_close(c->fan);
    free(c->piece_rv);
    free(c->piece_why);
    for (i = 0; c->plan && i < c->n; i++) {
        free(c->plan[i].blocks);
        free(c->plan[i].ranges);
        free(c->plan[i].range_ptrs);
        free(c->plan[i].src);
        free(c->plan[i].part_at);
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
    for (i = 0; c->p_replies && i < c->n_pcalls; i++)
        if (c->p_replies[i])
            nng_msg_free(c->p_replies[i]);
    free_parts(c);
    pthread_mutex_destroy(&c->hb_mu);
    pthread_cond_destroy(&c->hb_cv);
    free(c);
}
