/*
 * service_metrics.c — what a shard tells Prometheus (common/metrics.h):
 * requests and their latency by kind, bytes in and out, the time to apply
 * and commit an update, the staleness of applied gradients, refusals by
 * reason, row-sparse rows and bytes pulled and pushed, and, read at each
 * scrape, its version, its members by state, each worker's speed, batch
 * share and steps, the store's size and its tables' rows.
 * Every series carries shard="j".
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "rpc.h"
#include "err.h"
#include "service_impl.h"

static const char *const kinds[SVC_KINDS] = { "push", "pull", "heartbeat",
                                              "pull_rows", "push_rows",
                                              "other" };

static int kind_of(int pc)
{
    switch (pc) {
    case HETPS__ENVELOPE__PAYLOAD_PUSH: return 0;
    case HETPS__ENVELOPE__PAYLOAD_PULL: return 1;
    case HETPS__ENVELOPE__PAYLOAD_HEARTBEAT: return 2;
    case HETPS__ENVELOPE__PAYLOAD_PULL_ROWS: return 3;
    case HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS: return 4;
    default: return 5;
    }
}

/* Each row-sparse table's rows stored on this shard (one read of the
 * store's meta), labelled by its variable. */
static void table_rows(struct ps_service *s, struct hc_metrics *m,
                       const char *l)
{
    struct ps_store *store = s->shard ? ps_shard_store(s->shard) : NULL;
    const struct ps_table *t;
    uint32_t n = 0;
    char tl[128];

    t = store ? ps_store_tables(store, &n) : NULL;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t rows;

        if (ps_store_table_rows(store, t[i].var, &rows) != HC_OK)
            continue;
        snprintf(tl, sizeof tl, "%s,variable=\"%u\"", l, t[i].var);
        hc_series_set(hc_metric(m, HC_GAUGE, "hetps_table_rows", "Rows of "
                                "each row-sparse table stored on the shard "
                                "(rows never written are not stored)", tl,
                                NULL, 0), (double)rows);
    }
}

/* At each scrape: what the shard holds now, under its mutex. */
static void on_render(void *arg, struct hc_metrics *m)
{
    static const char *const states[] = { "none", "joined", "left", "dead" };
    struct ps_service *s = arg;
    int n[4] = { 0 }, i;
    char l[96], path[1200];
    struct stat st;

    pthread_mutex_lock(&s->mu);
    snprintf(l, sizeof l, "shard=\"%d\"", s->conf.shard);
    hc_series_set(hc_metric(m, HC_GAUGE, "hetps_shard_version", "Updates "
                            "applied by the shard (the step)", l, NULL, 0),
                  s->shard ? (double)ps_shard_version(s->shard) : 0);
    for (i = 0; i < s->n_members; i++) {
        uint64_t clock, late;
        float speed, lag;
        uint32_t share;
        char wl[128];

        n[s->members[i].state]++;
        if (s->members[i].state == M_NONE)
            continue;
        ps_mode_worker(s->sync, i, &clock, &speed, &share, &late, &lag);
        snprintf(wl, sizeof wl, "%s,worker=\"%d\"", l, i);
        hc_series_set(hc_metric(m, HC_GAUGE, "hetps_worker_samples_per_second",
                                "Training speed each worker reports",
                                wl, NULL, 0), speed);
        hc_series_set(hc_metric(m, HC_GAUGE, "hetps_worker_batch_share_samples",
                                "sync: samples of the current step given "
                                "to each worker", wl, NULL, 0), share);
        hc_series_set(hc_metric(m, HC_GAUGE, "hetps_worker_pushes",
                                "Gradients of each worker accepted", wl,
                                NULL, 0), (double)clock);
    }
    for (i = 0; i < 4; i++) {
        char sl[128];

        snprintf(sl, sizeof sl, "%s,state=\"%s\"", l, states[i]);
        hc_series_set(hc_metric(m, HC_GAUGE, "hetps_members", "Workers of "
                                "the cluster by membership state", sl, NULL,
                                0), n[i]);
    }
    pthread_mutex_unlock(&s->mu);
    hc_series_set(hc_metric(m, HC_COUNTER, "hetps_listener_restarts_total",
                            "Times the shard found nng no longer taking "
                            "connections and listened again", l, NULL, 0),
                  (double)hc_rpc_server_relistens(s->rpc));
    hc_series_set(hc_metric(m, HC_COUNTER, "hetps_connections_timed_out_total",
                            "Connections closed by the receive deadline "
                            "(idle, or a message that never ends)", l, NULL,
                            0),
                  (double)hc_rpc_server_deadline_closed(s->rpc));
    table_rows(s, m, l);
    snprintf(path, sizeof path, "%s/data.mdb", s->conf.data_dir);
    if (stat(path, &st) == 0)
        hc_series_set(hc_metric(m, HC_GAUGE, "hetps_store_bytes", "Disk "
                                "space of the shard's LMDB store", l, NULL, 0),
                      (double)st.st_blocks * 512.0);
}

void service_metrics_init(struct ps_service *s)
{
    static const double staleness_bounds[] = { 0, 1, 2, 4, 8, 16, 32, 64 };
    struct hc_metrics *m = s->conf.metrics;
    char l[96];
    int k;

    if (!m)
        return;
    for (k = 0; k < SVC_KINDS; k++) {
        snprintf(l, sizeof l, "shard=\"%d\",type=\"%s\"", s->conf.shard,
                 kinds[k]);
        s->met.requests[k] = hc_metric(m, HC_COUNTER, "hetps_requests_total",
                                       "Requests served by kind", l, NULL, 0);
        s->met.seconds[k] = hc_metric(m, HC_HISTOGRAM,
                                      "hetps_request_seconds", "Time to "
                                      "answer a request, by kind (a pull "
                                      "kept for its step: until kept)", l,
                                      hc_latency_bounds, 16);
    }
    snprintf(l, sizeof l, "shard=\"%d\"", s->conf.shard);
    s->met.bytes_in = hc_metric(m, HC_COUNTER, "hetps_received_bytes_total",
                                "Request bytes received", l, NULL, 0);
    s->met.bytes_out = hc_metric(m, HC_COUNTER, "hetps_sent_bytes_total",
                                 "Reply bytes sent", l, NULL, 0);
    s->met.apply = hc_metric(m, HC_HISTOGRAM, "hetps_commit_seconds",
                             "Time to apply an update with the optimizer "
                             "and commit it to the store", l,
                             hc_latency_bounds, 16);
    s->met.staleness = hc_metric(m, HC_HISTOGRAM, "hetps_push_staleness",
                                 "Versions between the values a gradient "
                                 "was computed on and the shard's", l,
                                 staleness_bounds, 8);
    s->met.early = hc_metric(m, HC_COUNTER, "hetps_early_answers_total",
                             "Parts of a synchronous step answered as soon "
                             "as their blocks were applied, before the "
                             "step's commit", l, NULL, 0);
    for (k = 0; k < 2; k++) {
        static const double row_bounds[] = {1, 16, 256, 1024, 4096, 16384,
                                            65536, 262144, 1048576};
        static const double byte_bounds[] = {1024, 16384, 65536, 262144,
                                             1048576, 4194304, 16777216,
                                             67108864};

        snprintf(l, sizeof l, "shard=\"%d\",direction=\"%s\"",
                 s->conf.shard, k ? "push" : "pull");
        s->met.rows[k] = hc_metric(m, HC_COUNTER, "hetps_sparse_rows_total",
                                   "Unique rows of row-sparse tables pulled "
                                   "or pushed (each worker's batch "
                                   "de-duplicated)", l, NULL, 0);
        s->met.rows_per[k] = hc_metric(m, HC_HISTOGRAM,
                                       "hetps_sparse_rows_per_step",
                                       "Unique rows a worker's step pulled "
                                       "or pushed on the shard (one "
                                       "PullRows or PushRows)", l,
                                       row_bounds, 9);
        s->met.sbytes[k] = hc_metric(m, HC_COUNTER,
                                     "hetps_sparse_bytes_total", "Sparse "
                                     "bytes (8 an id, 4 a float of a row) "
                                     "pulled or pushed", l, NULL, 0);
        s->met.sbytes_per[k] = hc_metric(m, HC_HISTOGRAM,
                                         "hetps_sparse_bytes_per_step",
                                         "Sparse bytes of a worker's step "
                                         "pulled or pushed on the shard", l,
                                         byte_bounds, 8);
    }
    hc_metrics_on_render(m, on_render, s);
}

/* Rows of tables t[0 .. n_t) pulled (push 0) or pushed (push 1). */
static void rows_add(struct ps_service *s, int push,
                     Hetps__RowsRef *const *t, size_t n_t)
{
    double rows = 0, bytes = 0;

    if (n_t == 0)
        return;
    for (size_t k = 0; k < n_t; k++) {
        rows += t[k]->n;
        bytes += 8.0 * t[k]->n + 4.0 * t[k]->n * t[k]->dim;
    }
    hc_series_add(s->met.rows[push], rows);
    hc_series_observe(s->met.rows_per[push], rows);
    hc_series_add(s->met.sbytes[push], bytes);
    hc_series_observe(s->met.sbytes_per[push], bytes);
}

void service_metrics_rows(struct ps_service *s, const struct hc_wire_msg *in)
{
    const Hetps__Envelope *e = in->env;

    if (!s->conf.metrics)
        return;
    switch (e->payload_case) {
    case HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS:
        rows_add(s, 1, e->push_rows->tables, e->push_rows->n_tables);
        break;
    case HETPS__ENVELOPE__PAYLOAD_PULL_ROWS:
        rows_add(s, 0, e->pull_rows->tables, e->pull_rows->n_tables);
        break;
    case HETPS__ENVELOPE__PAYLOAD_PUSH:
        rows_add(s, 1, e->push->rows_grad, e->push->n_rows_grad);
        rows_add(s, 0, e->push->rows_pull, e->push->n_rows_pull);
        break;
    default:
        break;
    }
}

void service_metrics_request(struct ps_service *s, int payload_case,
                             size_t in, size_t out, double seconds)
{
    int k = kind_of(payload_case);

    if (!s->conf.metrics)
        return;
    hc_series_add(s->met.requests[k], 1);
    hc_series_observe(s->met.seconds[k], seconds);
    hc_series_add(s->met.bytes_in, (double)in);
    hc_series_add(s->met.bytes_out, (double)out);
}

void service_metrics_refusal(struct ps_service *s, int code)
{
    const ProtobufCEnumValue *v;
    char l[128];

    if (!s->conf.metrics)
        return;
    v = protobuf_c_enum_descriptor_get_value(&hetps__error_code__descriptor,
                                             code);
    snprintf(l, sizeof l, "shard=\"%d\",reason=\"", s->conf.shard);
    {
        const char *r = v ? v->name : "E_UNKNOWN";
        size_t at = strlen(l);

        r += strncmp(r, "E_", 2) ? 0 : 2;
        for (; *r && at + 2 < sizeof l; r++)
            l[at++] = (char)tolower((unsigned char)*r);
        l[at++] = '"';
        l[at] = '\0';
    }
    hc_series_add(hc_metric(s->conf.metrics, HC_COUNTER,
                            "hetps_refusals_total", "Requests refused, by "
                            "reason", l, NULL, 0), 1);
}
