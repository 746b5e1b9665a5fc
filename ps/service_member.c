/*
 * service_member.c — what a shard knows and says of its workers: the
 * member entries of join and status replies, workers silent too long (or
 * never joined) marked dead, and the cluster file re-read that adds and
 * removes workers while the job runs (elastic membership). See
 * service_impl.h for the other service files.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "log.h"
#include "service_impl.h"
#include "shard.h"
#include "store.h"
#include "mode.h"
#include "wire.h"

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
    struct ps_place at;
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
        pm->state = (char *)hc_member_state_name((enum hc_member_state)m->state);
        pm->has_last_seen_ms = 1;
        pm->last_seen_ms = (uint64_t)(now - m->last_seen_ms);
        pm->devices = m->devices;
        pm->has_requests = 1;
        pm->requests = m->requests;
        pm->has_duplicates = 1;
        pm->duplicates = m->duplicates;
        pm->has_clock = pm->has_samples_per_s = pm->has_share = pm->has_late = 1;
        ps_mode_worker(s->sync, i, &pm->clock, &pm->samples_per_s, &pm->share,
                       &pm->late, &pm->lag_ms);
        pm->has_lag_ms = ps_mode_in_steps(s->sync);
        ps_shard_place(s->shard, i, &at);
        pm->has_epoch = pm->has_batches = at.known;
        pm->epoch = at.epoch;
        pm->batches = at.batches;
        ml->list[ml->n++] = pm;
    }
}

static void free_members(struct member_list *ml)
{
    free(ml->list);
    free(ml->storage);
    free(ml->tasks);
}

/* Each row-sparse table's rows stored on this shard, into t (tp points
 * at each); returns how many. */
static size_t status_tables(struct ps_service *s, Hetps__TableRows *t,
                            Hetps__TableRows **tp)
{
    struct ps_store *store = s->shard ? ps_shard_store(s->shard) : NULL;
    const struct ps_table *def;
    uint32_t n = 0;
    size_t k = 0;

    def = store ? ps_store_tables(store, &n) : NULL;
    for (uint32_t i = 0; i < n && i < PS_STORE_MAX_TABLES; i++) {
        uint64_t rows;

        if (ps_store_table_rows(store, def[i].var, &rows) != HC_OK)
            continue;
        hetps__table_rows__init(&t[k]);
        t[k].variable = def[i].var;
        t[k].rows = rows;
        tp[k] = &t[k];
        k++;
    }
    return k;
}

nng_msg *service_status_reply(struct ps_service *s, uint64_t id, int full)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__StatusReply st = HETPS__STATUS_REPLY__INIT;
    Hetps__Task me = HETPS__TASK__INIT;
    struct member_list ml;
    nng_msg *m = NULL;
    char waiting_for[256];
    Hetps__TableRows t[PS_STORE_MAX_TABLES], *tp[PS_STORE_MAX_TABLES];
    size_t n_t;

    hc_wire_init_env(&env, &s->me, id);
    me.job = HETPS__JOB__JOB_PS;
    me.index = (uint32_t)s->conf.shard;
    st.shard = &me;
    st.incarnation = s->me.incarnation;
    st.version = s->shard ? ps_shard_version(s->shard) : 0;
    st.block_elems = ps_shard_block_elems(s->shard);
    st.has_block_elems = st.block_elems != 0;
    if (!full) {
        st.mode = (char *)hc_mode_name(s->cl->mode);
        env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY;
        env.status_reply = &st;
        if (hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
            return NULL;
        return m;
    }
    fill_members(s, &ml);
    if (ml.n >= 0) {
        st.n_members = (size_t)ml.n;
        st.members = ml.list;
    }
    st.has_requests = st.has_duplicates = st.has_rejected = 1;
    st.requests = s->requests;
    st.duplicates = s->duplicates;
    st.rejected = s->rejected;
    st.has_nonfinite = 1;
    st.nonfinite = s->nonfinite;
    st.has_uptime_ms = 1;
    st.uptime_ms = (uint64_t)(hc_now_ms() - s->start_ms);
    st.mode = (char *)hc_mode_name(s->cl->mode);
    {
        struct ps_mode_stats ss;

        ps_mode_stats(s->sync, &ss);
        st.has_late = st.has_max_ahead = st.has_stale = st.has_waiting = 1;
        st.late = ss.late;
        st.max_ahead = ss.max_ahead;
        st.stale = ss.stale;
        st.waiting = (uint32_t)s->n_pending;
    }
    {
        double since;
        uint64_t v = st.version;

        if (ps_mode_waiting_for(s->sync, v, waiting_for, sizeof waiting_for,
                                &since)) {
            st.waiting_for = waiting_for;
            st.has_waiting_s = 1;
            st.waiting_s = hc_now_s() - since;
        }
    }
    n_t = status_tables(s, t, tp);
    st.n_tables = n_t;
    st.tables = tp;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS_REPLY;
    env.status_reply = &st;
    if (ml.n < 0 || hc_wire_encode(&m, &env, NULL, 0) != HC_OK)
        m = NULL;
    free_members(&ml);
    return m;
}

nng_msg *service_join_reply(struct ps_service *s, int worker, uint64_t id)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__JoinReply jr = HETPS__JOIN_REPLY__INIT;
    struct member_list ml;
    struct ps_place at;
    nng_msg *m = NULL;

    hc_wire_init_env(&env, &s->me, id);
    jr.shard_incarnation = s->me.incarnation;
    jr.block_elems = ps_shard_block_elems(s->shard);
    jr.has_block_elems = jr.block_elems != 0;
    jr.shard_index = (uint32_t)s->conf.shard;
    jr.n_shards = (uint32_t)s->cl->n_ps;
    jr.has_version = 1;
    jr.version = s->shard ? ps_shard_version(s->shard) : 0;
    ps_shard_place(s->shard, worker, &at);
    jr.has_epoch = jr.has_batches = at.known;
    jr.epoch = at.epoch;
    jr.batches = at.batches;
    if (ps_mode_in_steps(s->sync) &&
        ps_mode_from(s->sync, worker) != UINT64_MAX) {
        jr.has_from_version = 1;
        jr.from_version = ps_mode_from(s->sync, worker);
    }
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

/*
 * sync: the deadline of a step. Once a step has started (a push arrived),
 * it waits at most step_timeout_ms for the other live workers: at half of
 * it the log names whom it waits for; at the deadline those workers are
 * marked dead (a worker that heartbeats but never pushes would otherwise
 * hold every step for ever) and the step goes on. A worker marked so joins
 * again with its next request. Called with s->mu held; 1 when it changed
 * the membership.
 */
static int sweep_step(struct ps_service *s, int64_t now)
{
    uint64_t version = ps_shard_version(s->shard);
    int missing[16], n, i, k;
    char names[16 * 12] = "";
    size_t len = 0;

    n = ps_mode_missing(s->sync, version, missing, 16);
    if (n == 0 || version != s->deadline_version) {
        s->deadline_version = version;
        s->deadline_since_ms = now;
        s->deadline_warned = 0;
        return 0;
    }
    for (i = 0; i < n && i < 16; i++)
        len += (size_t)snprintf(names + len, sizeof names - len, "%sworker:%d",
                                i ? ", " : "", missing[i]);
    if (now - s->deadline_since_ms < s->conf.step_timeout_ms) {
        if (!s->deadline_warned && now - s->deadline_since_ms >= s->conf.step_timeout_ms / 2) {
            s->deadline_warned = 1;
            hc_warn("sync step %llu has waited %lld ms for %s%s (it goes on "
                    "without them after %d ms)", (unsigned long long)version,
                    (long long)(now - s->deadline_since_ms), names,
                    n > 16 ? ", …" : "", s->conf.step_timeout_ms);
        }
        return 0;
    }
    hc_warn("sync step %llu waited %lld ms for %s%s: marked dead, the step "
            "goes on without them (--step-timeout)", (unsigned long long)version,
            (long long)(now - s->deadline_since_ms), names, n > 16 ? ", …" : "");
    for (i = 0; i < n && i < 16; i++) {
        k = missing[i];
        if (k < s->n_members && s->members[k].state == M_JOINED)
            s->members[k].state = M_DEAD;
        ps_mode_member(s->sync, k, 0);
    }
    s->deadline_since_ms = now;
    s->deadline_warned = 0;
    return 1;
}

/* Name the workers a synchronous step has waited for, for long. */
static void log_waiting(struct ps_service *s)
{
    uint64_t v = s->shard ? ps_shard_version(s->shard) : 0;
    char who[256];
    double since, waited;

    if (!ps_mode_waiting_for(s->sync, v, who, sizeof who, &since))
        return;
    waited = hc_now_s() - since;
    if (v != s->wait_version) {
        s->wait_version = v;
        s->wait_logged_s = 0;
    }
    if (waited < SERVICE_WAIT_LOG_S || waited < 2 * s->wait_logged_s)
        return;
    s->wait_logged_s = waited;
    hc_warn("sync step %llu: waiting for %s for %.1f s (the other workers "
            "have pushed)", (unsigned long long)v, who, waited);
}

void service_sweep_members(struct ps_service *s)
{
    int64_t now = hc_now_ms();
    int i, changed = 0;

    service_lock_step(s);
    for (i = 0; i < s->n_members; i++) {
        struct member *m = &s->members[i];

        if (m->state == M_JOINED &&
            now - m->last_seen_ms > s->conf.heartbeat_timeout_ms) {
            m->state = M_DEAD;
            hc_warn("worker:%d silent for %lld ms: marked dead", i,
                    (long long)(now - m->last_seen_ms));
            ps_mode_member(s->sync, i, 0);
            changed = 1;
        } else if (m->state == M_NONE && !m->removed &&
                   ps_mode_holds_pulls(s->sync) &&
                   now - m->expected_ms > s->conf.join_timeout_ms) {
            /* Expected from the start (sync, ssp); never came. */
            m->state = M_DEAD;
            hc_warn("worker:%d did not join within %d ms: steps go on "
                    "without it", i, s->conf.join_timeout_ms);
            m->expected_ms = INT64_MAX / 2;
            ps_mode_member(s->sync, i, 0);
            changed = 1;
        }
    }
    if (ps_mode_in_steps(s->sync))
        changed |= sweep_step(s, now);
    if (changed)
        service_advance(s);
    log_waiting(s);
    service_unlock(s);
}

int service_file_mtime(const char *path, struct timespec *t)
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
 * it are treated as having left and refused from then on. A change to
 * anything else the cluster id covers (the parameter servers, the chief,
 * the mode, "insecure") is not taken: moving blocks is `hetps reshard`,
 * the rest a new job.
 */
void service_reload_cluster(struct ps_service *s)
{
    struct hc_cluster nc;
    struct hc_diag diag;
    const char *what;
    int i, n_old, rv;

    rv = hc_cluster_load_file(s->conf.cluster_file, &nc, &diag);
    if (rv != HC_OK) {
        hc_warn("cluster file %s changed but cannot be used (%s); keeping "
                "the running cluster", s->conf.cluster_file,
                diag.n ? diag.msg[0] : hc_err_msg());
        return;
    }
    if ((what = hc_cluster_differs(s->cl, &nc))) {
        hc_warn("cluster file %s changed %s (cluster id 0x%016llx, running "
                "0x%016llx): only workers other than the chief can be added "
                "or removed while the job runs%s; keeping the running cluster",
                s->conf.cluster_file, what, (unsigned long long)nc.id,
                (unsigned long long)s->cl->id,
                strstr(what, "parameter servers")
                    ? " (moving blocks between servers is `hetps reshard`)"
                    : "");
        hc_cluster_free(&nc);
        return;
    }
    service_lock_step(s);
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
            ps_mode_member(s->sync, i, 0);
            hc_info("worker:%d removed by the cluster file", i);
        }
    }
    /* (read without the lock by admit_cert, at a handshake) */
    __atomic_store_n(&s->n_active, nc.n_worker, __ATOMIC_RELAXED);
    service_advance(s);
    service_unlock(s);
    if (n_old != nc.n_worker)
        hc_info("cluster file %s: %d worker(s), was %d", s->conf.cluster_file,
                nc.n_worker, n_old);
    hc_cluster_free(&nc);
}
