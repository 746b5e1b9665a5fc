/*
 * test_client.c — the worker's client (worker/client.h) against a real
 * shard service started in this process (ps/service.h) on a loopback port
 * with a temporary store: open, join, create, pull, the three modes' step
 * calls, status, leave; a table's initial rows (pc_init_rows); and the errors a worker meets — a shard nobody
 * answers at, a shard answering bytes that are no hetps message, a model
 * not set before a pull.
 */
#include "cu.h"
#include "ps/service.h"
#include "worker/client.h"
#include "worker/client_hook.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <nng/nng.h>
#include <nng/protocol/reqrep0/rep.h>

#include "cluster.h"
#include "err.h"
#include "layout.h"
#include "model.h"

/* A dense layer of 3 inputs and 2 units: 8 parameters, plain SGD. */
static const char model_json[] =
    "{\"name\":\"client-test\",\"input_shape\":[3],\"layers\":"
    "[{\"type\":\"dense\",\"units\":2}],\"loss\":\"mse\","
    "\"optimizer\":{\"type\":\"sgd\",\"learning_rate\":0.5},"
    "\"batch_size\":4}";

/* A TCP port on 127.0.0.1 free a moment ago (the kernel's pick). */
static int free_port(void)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* A cluster of one shard at ps_port and one worker, async. */
static void make_cluster(int ps_port, struct hc_cluster *cl)
{
    char json[256];
    struct hc_diag diag = { 0 };

    snprintf(json, sizeof json,
             "{\"cluster\":{\"ps\":[\"127.0.0.1:%d\"],\"worker\":"
             "[\"127.0.0.1:%d\"]},\"hetps\":{\"mode\":\"async\"}}",
             ps_port, free_port());
    CU_ASSERT_EQUAL_FATAL(hc_cluster_parse(json, strlen(json), "test cluster",
                                           cl, &diag), HC_OK);
    cl->insecure = 1;           /* plain TCP on loopback: no certificates */
}

static void make_model(struct hc_model *m)
{
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(model_json, strlen(model_json),
                                         "test model", m), HC_OK);
    CU_ASSERT_EQUAL_FATAL(m->n_params, 8);
}

/* Quick to give up: the error paths must not take the default 30 s. */
static const struct pc_opts quick = { .timeout_ms = 300, .retry_ms = 1000,
                                      .wait_ms = 2000 };
/* The same, a step in one message per shard (no parts). */
static const struct pc_opts quick1 = { .timeout_ms = 300, .retry_ms = 1000,
                                       .wait_ms = 2000, .lanes = 1 };

/* One shard in this process over a fresh store. */
struct server {
    char dir[256];
    struct hc_cluster cl;
    struct ps_service *svc;
};

static int server_start(struct server *s)
{
    struct ps_service_conf c = { 0 };

    memset(s, 0, sizeof *s);
    hp_tmpdir(s->dir, sizeof s->dir);
    make_cluster(free_port(), &s->cl);
    c.cluster = &s->cl;
    c.shard = 0;
    c.data_dir = s->dir;
    c.heartbeat_timeout_ms = 60000;
    return ps_service_start(&s->svc, &c);
}

static void server_stop(struct server *s)
{
    if (s->svc)
        ps_service_stop(s->svc);
    hc_cluster_free(&s->cl);
    hp_rmtree(s->dir);
}

/* Shard 0's status, asked by the front door; free with pc_status_free. */
static void door_status(const struct hc_cluster *cl, struct pc_shard_status *st)
{
    struct pc_client *door = NULL;

    memset(st, 0, sizeof *st);
    CU_ASSERT_EQUAL_FATAL(pc_open(&door, cl, -1, 0, &quick), HC_OK);
    CU_ASSERT_EQUAL(pc_status(door, st), HC_OK);
    CU_ASSERT_TRUE(st->up);
    pc_close(door);
}

/* The state of worker 0 as shard 0 reports it. */
static enum pc_member_state state_of_worker0(const struct hc_cluster *cl,
                                             uint64_t *version)
{
    struct pc_shard_status st;
    enum pc_member_state state = PC_MEMBER_UNKNOWN;
    int k;

    door_status(cl, &st);
    CU_ASSERT_STRING_EQUAL(st.mode, "async");
    *version = st.version;
    for (k = 0; k < st.n_members; k++)
        if (st.members[k].worker == 0)
            state = st.members[k].state;
    pc_status_free(&st, 1);
    return state;
}

static void test_round_trip(void)
{
    struct server s;
    struct hc_model m;
    struct pc_client *pc = NULL;
    float init[8], params[8], grads[8];
    struct pc_grad g = { .data = grads, .samples = 4, .samples_per_s = 100 };
    struct pc_step st = { 0 };
    uint64_t version = 99;
    int i, bad = 0;

    make_model(&m);
    CU_ASSERT_EQUAL_FATAL(server_start(&s), HC_OK);
    for (i = 0; i < 8; i++) {
        init[i] = (float)i;
        grads[i] = 0.25f * (float)(i + 1);
    }
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, HC_JOB_WORKER, 0, &quick),
                          HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL(pc_place(pc, &st.epoch, &st.batches), 0);
    CU_ASSERT_EQUAL(pc_set_model(pc, &m, 0), HC_OK);
    CU_ASSERT_EQUAL(pc_create(pc, init), HC_OK);
    CU_ASSERT_EQUAL(pc_create(pc, init), HC_OK);    /* idempotent */
    CU_ASSERT_EQUAL(pc_pull(pc, params, &version), HC_OK);
    CU_ASSERT_EQUAL(version, 0);
    CU_ASSERT_EQUAL(memcmp(params, init, sizeof params), 0);
    CU_ASSERT_EQUAL(state_of_worker0(&s.cl, &version), PC_MEMBER_JOINED);

    /* async: applied at once, SGD p - 0.5 g (exact in binary). */
    st.has_place = 1;
    st.epoch = 0;
    st.batches = 1;
    CU_ASSERT_EQUAL(pc_async_step(pc, &g, params, &st), HC_OK);
    CU_ASSERT_EQUAL(st.version, 1);
    CU_ASSERT_FALSE(st.has_slice);
    CU_ASSERT_FALSE(st.late);
    for (i = 0; i < 8; i++)
        bad += params[i] != init[i] - 0.5f * grads[i];
    CU_ASSERT_EQUAL(bad, 0);
    /* ssp in an async job: the shard answers as async, one more update. */
    g.base_version = st.version;
    st.clock = 1;
    st.batches = 2;
    CU_ASSERT_EQUAL(pc_ssp_step(pc, &g, params, &st), HC_OK);
    CU_ASSERT_EQUAL(st.version, 2);
    for (i = 0, bad = 0; i < 8; i++)
        bad += params[i] != init[i] - grads[i];
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(state_of_worker0(&s.cl, &version), PC_MEMBER_JOINED);
    CU_ASSERT_EQUAL(version, 2);

    CU_ASSERT_EQUAL(pc_leave(pc), HC_OK);
    CU_ASSERT_EQUAL(state_of_worker0(&s.cl, &version), PC_MEMBER_LEFT);
    pc_close(pc);

    /* A worker that comes back finds the place its pushes recorded. */
    pc = NULL;
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, HC_JOB_WORKER, 0, &quick),
                          HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    st.epoch = st.batches = 99;
    CU_ASSERT_EQUAL(pc_place(pc, &st.epoch, &st.batches), 1);
    CU_ASSERT_EQUAL(st.epoch, 0);
    CU_ASSERT_EQUAL(st.batches, 2);
    pc_close(pc);
    server_stop(&s);
}

static void test_pull_without_model(void)
{
    struct server s;
    struct pc_client *pc = NULL;
    float params[8];

    CU_ASSERT_EQUAL_FATAL(server_start(&s), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, HC_JOB_WORKER, 0, &quick),
                          HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_NOT_EQUAL(pc_pull(pc, params, NULL), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "pc_pull"));
    pc_close(pc);
    server_stop(&s);
}

static void test_unreachable(void)
{
    struct hc_cluster cl;
    struct pc_client *pc = NULL;
    struct pc_shard_status st;

    make_cluster(free_port(), &cl);     /* nobody listens there */
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &cl, HC_JOB_WORKER, 0, &quick), HC_OK);
    CU_ASSERT_NOT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    if (!strstr(hc_err_msg(), "ps:0"))
        printf("\n  join: %s\n", hc_err_msg());
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "ps:0"));
    pc_close(pc);

    /* Status says the shard is down rather than failing. */
    pc = NULL;
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &cl, -1, 0, &quick), HC_OK);
    CU_ASSERT_EQUAL(pc_status(pc, &st), HC_OK);
    CU_ASSERT_FALSE(st.up);
    CU_ASSERT_NOT_EQUAL(st.error[0], '\0');
    pc_status_free(&st, 1);
    pc_close(pc);
    hc_cluster_free(&cl);
}

/* A batch norm whose moving statistics do not fit one block each is
 * refused when the layout is made (its variance could not be moved with
 * its mean), naming the variable; one that fits keeps them together. */
static void test_batchnorm_layout(void)
{
    static const char *const json[2] = {
        "{\"input_shape\": [8], \"loss\": \"mse\", \"optimizer\": "
        "\"sgd\", \"layers\": [{\"type\": \"dense\", \"units\": 5000},"
        " {\"type\": \"batchnorm\", \"name\": \"bn\"}]}",
        "{\"input_shape\": [8], \"loss\": \"mse\", \"optimizer\": "
        "\"sgd\", \"layers\": [{\"type\": \"dense\", \"units\": 50},"
        " {\"type\": \"batchnorm\", \"name\": \"bn\"}]}"};
    struct hc_cluster cl;
    struct hc_model *m = calloc(1, sizeof *m);
    struct pc_client *pc = NULL;

    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    make_cluster(free_port(), &cl);
    for (int k = 0; k < 2; k++) {
        CU_ASSERT_EQUAL_FATAL(hc_model_parse(json[k], strlen(json[k]), "bn",
                                             m), HC_OK);
        CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &cl, HC_JOB_WORKER, 0, &quick),
                              HC_OK);
        if (k == 0) {
            CU_ASSERT_EQUAL(pc_set_model(pc, m, 0), HC_ERR_CONFIG);
            CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "bn/moving_variance: "
                                          "5000 channels are more than a "
                                          "block of 4086 elements"));
        } else {
            CU_ASSERT_EQUAL(pc_set_model(pc, m, 0), HC_OK);
        }
        pc_close(pc);
        pc = NULL;
    }
    hc_cluster_free(&cl);
    free(m);
}

/* A "shard" that answers every request with bytes no decoder accepts. */
struct liar {
    nng_socket sock;
    int answered;
};

static void *liar_run(void *arg)
{
    struct liar *l = arg;
    nng_msg *msg;

    while (nng_recvmsg(l->sock, &msg, 0) == 0) {
        nng_msg_clear(msg);
        nng_msg_append(msg, "\x03\x00\x00\x00garbage", 11);
        if (nng_sendmsg(l->sock, msg, 0) != 0)
            nng_msg_free(msg);
        else
            l->answered++;
    }
    return NULL;
}

static void test_bad_reply(void)
{
    struct hc_cluster cl;
    struct pc_client *pc = NULL;
    struct liar l = { .answered = 0 };
    pthread_t t;
    char url[64];
    int port = free_port(), rv;

    make_cluster(port, &cl);
    snprintf(url, sizeof url, "tcp://127.0.0.1:%d", port);
    CU_ASSERT_EQUAL_FATAL(nng_rep0_open(&l.sock), 0);
    CU_ASSERT_EQUAL_FATAL(nng_listen(l.sock, url, NULL, 0), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, liar_run, &l), 0);
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &cl, HC_JOB_WORKER, 0, &quick), HC_OK);
    rv = pc_join(pc, "cpu");
    CU_ASSERT_NOT_EQUAL(rv, HC_OK);
    if (!strstr(hc_err_msg(), "ps:0"))
        printf("\n  join: %s\n", hc_err_msg());
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "ps:0"));
    pc_close(pc);
    nng_close(l.sock);          /* ends liar_run's receive */
    pthread_join(t, NULL);
    /* Read only after the join: the client can hold the garbage before
     * liar_run has counted it, so an earlier look races the count. */
    CU_ASSERT_TRUE(l.answered > 0);
    hc_cluster_free(&cl);
}

/* Start shards 0 .. n-1 of cl in this process, each over a fresh store
 * in dir[k]. */
static void shards_start(const struct hc_cluster *cl, int n,
                         struct ps_service **svc, char (*dir)[256])
{
    for (int k = 0; k < n; k++) {
        struct ps_service_conf c = { 0 };

        hp_tmpdir(dir[k], sizeof dir[k]);
        c.cluster = cl;
        c.shard = k;
        c.data_dir = dir[k];
        c.heartbeat_timeout_ms = 60000;
        CU_ASSERT_EQUAL_FATAL(ps_service_start(&svc[k], &c), HC_OK);
    }
}

/* A model of 4.5 MB (over client_big's 4 MiB) on two shards: each shard's
 * push is encoded and copied on a core of its own, each answer decoded and
 * its values copied out likewise (worker/fanout.h); the values must be
 * exactly the serial path's. Then both shards stop and a push fails
 * cleanly, its copies freed (the sanitizer build would see a leak). */
static const char big_json[] =
    "{\"name\":\"client-big\",\"input_shape\":[1024],\"layers\":"
    "[{\"type\":\"dense\",\"units\":1100}],\"loss\":\"mse\","
    "\"optimizer\":{\"type\":\"sgd\",\"learning_rate\":0.5},"
    "\"batch_size\":4}";

static void test_big_two_shards(void)
{
    struct hc_cluster cl;
    struct hc_diag diag = { 0 };
    struct ps_service *svc[2] = { NULL, NULL };
    char dir[2][256], json[320];
    struct hc_model m;
    struct pc_client *pc = NULL;
    struct pc_grad g = { .samples = 4, .samples_per_s = 100 };
    struct pc_step st = { .has_place = 1, .batches = 1 };
    float *init, *params, *grads;
    size_t n, i, bad = 0;
    int k;

    snprintf(json, sizeof json,
             "{\"cluster\":{\"ps\":[\"127.0.0.1:%d\",\"127.0.0.1:%d\"],"
             "\"worker\":[\"127.0.0.1:%d\"]},\"hetps\":{\"mode\":\"async\"}}",
             free_port(), free_port(), free_port());
    CU_ASSERT_EQUAL_FATAL(hc_cluster_parse(json, strlen(json), "big cluster",
                                           &cl, &diag), HC_OK);
    cl.insecure = 1;
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(big_json, strlen(big_json),
                                         "big model", &m), HC_OK);
    n = m.n_params;
    CU_ASSERT_FATAL(n * sizeof(float) >= (size_t)4 << 20);
    init = malloc(n * sizeof *init);
    params = malloc(n * sizeof *params);
    grads = malloc(n * sizeof *grads);
    CU_ASSERT_FATAL(init && params && grads);
    for (i = 0; i < n; i++) {
        init[i] = (float)(i % 1000);
        grads[i] = 0.25f * (float)(i % 7 + 1);  /* 0.5 g is exact */
    }
    g.data = grads;
    shards_start(&cl, 2, svc, dir);
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &cl, HC_JOB_WORKER, 0, &quick), HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL(pc_set_model(pc, &m, 0), HC_OK);
    CU_ASSERT_EQUAL(pc_create(pc, init), HC_OK);
    memset(params, 0, n * sizeof *params);
    CU_ASSERT_EQUAL(pc_pull(pc, params, NULL), HC_OK);
    CU_ASSERT_EQUAL(memcmp(params, init, n * sizeof *params), 0);
    CU_ASSERT_EQUAL(pc_async_step(pc, &g, params, &st), HC_OK);
    CU_ASSERT_EQUAL(st.version, 1);
    for (i = 0; i < n; i++)
        bad += params[i] != init[i] - 0.5f * grads[i];
    CU_ASSERT_EQUAL(bad, 0);

    for (k = 0; k < 2; k++)
        ps_service_stop(svc[k]);
    st.batches = 2;
    CU_ASSERT_NOT_EQUAL(pc_async_step(pc, &g, params, &st), HC_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "ps:"));
    pc_close(pc);
    for (k = 0; k < 2; k++)
        hp_rmtree(dir[k]);
    hc_cluster_free(&cl);
    free(init);
    free(params);
    free(grads);
}

/*
 * Four shards and a model of two blocks: shards 2 and 3 hold none, and a
 * pull, a push or a push-and-pull asks them nothing (a push of no tensors
 * was refused, and in sync a shard that never steps held the version the
 * worker saw at 0). Both modes, two steps each.
 */
static void more_shards_case(const char *mode)
{
    enum { SHARDS = 4 };
    int sync = strcmp(mode, "sync") == 0;
    struct hc_cluster cl;
    struct hc_diag diag = { 0 };
    struct ps_service *svc[SHARDS] = { NULL };
    char dir[SHARDS][256], json[512];
    struct hc_model m;
    struct pc_client *pc = NULL;
    float init[8], params[8], grads[8];
    struct pc_grad g = { .data = grads, .samples = 4, .samples_per_s = 100 };
    struct pc_step st = { 0 };
    int i, k, bad = 0, late = 1;

    snprintf(json, sizeof json,
             "{\"cluster\":{\"ps\":[\"127.0.0.1:%d\",\"127.0.0.1:%d\","
             "\"127.0.0.1:%d\",\"127.0.0.1:%d\"],\"worker\":"
             "[\"127.0.0.1:%d\"]},\"hetps\":{\"mode\":\"%s\"}}",
             free_port(), free_port(), free_port(), free_port(), free_port(),
             mode);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_parse(json, strlen(json), "4 shards",
                                           &cl, &diag), HC_OK);
    cl.insecure = 1;
    make_model(&m);
    for (i = 0; i < 8; i++) {
        init[i] = (float)i;
        grads[i] = 0.25f * (float)(i + 1);
    }
    shards_start(&cl, SHARDS, svc, dir);
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &cl, HC_JOB_WORKER, 0, &quick), HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL(pc_set_model(pc, &m, 0), HC_OK);
    CU_ASSERT_EQUAL(pc_create(pc, init), HC_OK);
    CU_ASSERT_EQUAL(pc_pull(pc, params, &st.version), HC_OK);
    CU_ASSERT_EQUAL(memcmp(params, init, sizeof params), 0);
    for (k = 1; k <= 2; k++) {
        g.base_version = st.version;
        CU_ASSERT_EQUAL(sync ? pc_sync_step(pc, &g, params, &st)
                             : pc_async_step(pc, &g, params, &st), HC_OK);
        CU_ASSERT_EQUAL(st.version, (uint64_t)k);
    }
    for (i = 0; i < 8; i++)
        bad += params[i] != init[i] - grads[i];     /* 2 × 0.5 g */
    CU_ASSERT_EQUAL(bad, 0);
    if (!sync) {                /* a push alone */
        CU_ASSERT_EQUAL(pc_push_step(pc, grads, 4, st.version, 0, 3, &late),
                        HC_OK);
        CU_ASSERT_EQUAL(late, 0);
    }
    pc_close(pc);
    for (k = 0; k < SHARDS; k++) {
        ps_service_stop(svc[k]);
        hp_rmtree(dir[k]);
    }
    hc_cluster_free(&cl);
}

static void test_more_shards_than_blocks(void)
{
    more_shards_case("async");
    more_shards_case("sync");
}

/* A dense layer of 1000 inputs and 9 units: a 9000-element kernel, which
 * blocks of 4096 and of the default 4086 cut differently. */
static const char wide_json[] =
    "{\"name\":\"wide-test\",\"input_shape\":[1000],\"layers\":"
    "[{\"type\":\"dense\",\"units\":9}],\"loss\":\"mse\","
    "\"optimizer\":{\"type\":\"sgd\",\"learning_rate\":0.5},"
    "\"batch_size\":4}";

/* The block size the shard's status reports (0: no variables yet). */
static uint32_t store_block_of(const struct hc_cluster *cl)
{
    struct pc_shard_status st;
    uint32_t be;

    door_status(cl, &st);
    be = st.block_elems;
    pc_status_free(&st, 1);
    return be;
}

/*
 * A store made with blocks of 4096 elements (an older default) is used as
 * it is: a worker joining it, and a reader that asks the status first,
 * lay the model out in its blocks and read the values whole; a reader
 * that lays it out with the default is refused, not answered with values
 * out of place. A fresh store takes the default.
 */
static void test_store_block_size(void)
{
    struct server s;
    struct hc_model m;
    struct pc_client *pc = NULL;
    struct pc_shard_status st;
    float init[9009], params[9009];
    int i;

    CU_ASSERT_EQUAL_FATAL(hc_model_parse(wide_json, strlen(wide_json),
                                         "wide model", &m), HC_OK);
    CU_ASSERT_EQUAL_FATAL(m.n_params, 9009);
    for (i = 0; i < 9009; i++)
        init[i] = (float)i;

    /* A fresh store: the default. */
    CU_ASSERT_EQUAL_FATAL(server_start(&s), HC_OK);
    CU_ASSERT_EQUAL(store_block_of(&s.cl), 0);
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, HC_JOB_WORKER, 0, &quick),
                          HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL(pc_set_model(pc, &m, 0), HC_OK);
    CU_ASSERT_EQUAL(pc_create(pc, init), HC_OK);
    CU_ASSERT_EQUAL(store_block_of(&s.cl), HC_LAYOUT_DEFAULT_BLOCK);
    pc_close(pc);
    server_stop(&s);

    /* A store of 4096-element blocks. */
    CU_ASSERT_EQUAL_FATAL(server_start(&s), HC_OK);
    pc = NULL;
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, HC_JOB_WORKER, 0, &quick),
                          HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL(pc_set_model(pc, &m, 4096), HC_OK);
    CU_ASSERT_EQUAL(pc_create(pc, init), HC_OK);
    CU_ASSERT_EQUAL(pc_leave(pc), HC_OK);
    pc_close(pc);
    CU_ASSERT_EQUAL(store_block_of(&s.cl), 4096);

    /* The worker again, with the default: the join says 4096. */
    pc = NULL;
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, HC_JOB_WORKER, 0, &quick),
                          HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL(pc_set_model(pc, &m, 0), HC_OK);
    CU_ASSERT_EQUAL(pc_create(pc, init), HC_OK);    /* idempotent */
    memset(params, 0, sizeof params);
    CU_ASSERT_EQUAL(pc_pull(pc, params, NULL), HC_OK);
    CU_ASSERT_EQUAL(memcmp(params, init, sizeof params), 0);
    CU_ASSERT_EQUAL(pc_leave(pc), HC_OK);
    pc_close(pc);

    /* A reader that asks the status first. */
    pc = NULL;
    memset(&st, 0, sizeof st);
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, -1, 0, &quick), HC_OK);
    CU_ASSERT_EQUAL(pc_status(pc, &st), HC_OK);
    CU_ASSERT_EQUAL(st.block_elems, 4096);
    pc_status_free(&st, 1);
    CU_ASSERT_EQUAL(pc_set_model(pc, &m, 0), HC_OK);
    memset(params, 0, sizeof params);
    CU_ASSERT_EQUAL(pc_pull(pc, params, NULL), HC_OK);
    CU_ASSERT_EQUAL(memcmp(params, init, sizeof params), 0);
    pc_close(pc);

    /* A reader that does not: its blocks are not the store's. */
    pc = NULL;
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, -1, 0, &quick), HC_OK);
    CU_ASSERT_EQUAL(pc_set_model(pc, &m, 0), HC_OK);
    CU_ASSERT_NOT_EQUAL(pc_pull(pc, params, NULL), HC_OK);
    pc_close(pc);
    server_stop(&s);
}

/* The apply hook of test_apply_unlocked: says it is in, then holds the
 * step until released (at most 10 s: a test that fails ends). */
struct held_apply {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int in, release;
};

static void hold_apply(void *arg)
{
    struct held_apply *h = arg;
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&h->mu);
    h->in = 1;
    pthread_cond_broadcast(&h->cv);
    while (!h->release &&
           pthread_cond_timedwait(&h->cv, &h->mu, &until) == 0)
        ;
    pthread_mutex_unlock(&h->mu);
}

struct sync_worker {
    struct pc_client *pc;
    float params[8], grads[8];
    struct pc_step st;
    int rv;
};

static void *sync_step_thread(void *arg)
{
    struct sync_worker *w = arg;
    struct pc_grad g = { .data = w->grads, .samples = 4,
                         .samples_per_s = 100 };

    w->rv = pc_sync_step(w->pc, &g, w->params, &w->st);
    return NULL;
}

/*
 * While a sync step is being applied (held there by the apply hook), the
 * shard still answers a status request and a reader's pull — from the
 * values before the step — instead of waiting for the step; then the step
 * completes as usual.
 */
static void test_apply_unlocked(void)
{
    struct server s;
    struct hc_model m;
    struct ps_service_conf c = { 0 };
    struct hc_diag diag = { 0 };
    struct held_apply h = { .mu = PTHREAD_MUTEX_INITIALIZER,
                            .cv = PTHREAD_COND_INITIALIZER };
    struct sync_worker w = { .st = { .min_version = 1 } };
    struct pc_shard_status st;
    struct pc_client *reader = NULL;
    char json[256];
    float init[8], got[8];
    uint64_t version = 99;
    pthread_t th;
    int i, in;

    make_model(&m);
    memset(&s, 0, sizeof s);
    hp_tmpdir(s.dir, sizeof s.dir);
    snprintf(json, sizeof json,
             "{\"cluster\":{\"ps\":[\"127.0.0.1:%d\"],\"worker\":"
             "[\"127.0.0.1:%d\"]},\"hetps\":{\"mode\":\"sync\"}}",
             free_port(), free_port());
    CU_ASSERT_EQUAL_FATAL(hc_cluster_parse(json, strlen(json), "sync cluster",
                                           &s.cl, &diag), HC_OK);
    s.cl.insecure = 1;
    c.cluster = &s.cl;
    c.data_dir = s.dir;
    c.heartbeat_timeout_ms = 60000;
    CU_ASSERT_EQUAL_FATAL(ps_service_start(&s.svc, &c), HC_OK);
    ps_service_set_apply_hook(s.svc, hold_apply, &h);
    for (i = 0; i < 8; i++) {
        init[i] = (float)i;
        w.grads[i] = 0.25f * (float)(i + 1);
    }
    CU_ASSERT_EQUAL_FATAL(pc_open(&w.pc, &s.cl, HC_JOB_WORKER, 0, &quick),
                          HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_join(w.pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_set_model(w.pc, &m, 0), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_create(w.pc, init), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, sync_step_thread, &w), 0);

    pthread_mutex_lock(&h.mu);      /* the step is in its apply */
    for (i = 0; i < 100 && !h.in; i++) {
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&h.cv, &h.mu, &until);
    }
    in = h.in;
    pthread_mutex_unlock(&h.mu);
    CU_ASSERT_TRUE(in);

    door_status(&s.cl, &st);        /* answered meanwhile */
    CU_ASSERT_EQUAL(st.version, 0);
    CU_ASSERT_STRING_EQUAL(st.mode, "sync");
    pc_status_free(&st, 1);
    CU_ASSERT_EQUAL_FATAL(pc_open(&reader, &s.cl, -1, 0, &quick), HC_OK);
    CU_ASSERT_EQUAL(pc_set_model(reader, &m, 0), HC_OK);
    CU_ASSERT_EQUAL(pc_pull(reader, got, &version), HC_OK);
    CU_ASSERT_EQUAL(version, 0);
    CU_ASSERT_EQUAL(memcmp(got, init, sizeof got), 0);
    pc_close(reader);

    pthread_mutex_lock(&h.mu);
    h.release = 1;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    pthread_join(th, NULL);
    CU_ASSERT_EQUAL(w.rv, HC_OK);
    CU_ASSERT_EQUAL(w.st.version, 1);
    for (i = 0; i < 8; i++)         /* SGD: p - 0.5 g, exact */
        CU_ASSERT_EQUAL(w.params[i], init[i] - 0.5f * w.grads[i]);
    pc_close(w.pc);
    server_stop(&s);
}

/* The reply hook of test_answered_again: once armed, it has worker:1 push
 * first (when there is one), then re-sends worker:0's request as if its
 * reply were lost. */
struct again_hook {
    int armed, sent, same;
    struct pc_client *other;    /* worker:1, or NULL */
    const struct pc_grad *other_g;
    float *other_params;
    int other_rv;
};

static int again_resend(struct pc_client *c, int n_shards, void *arg)
{
    struct again_hook *h = arg;
    struct pc_step st = { .has_place = 1, .batches = 1 };

    (void)n_shards;
    if (!h->armed)
        return HC_OK;
    h->armed = 0;
    if (h->other)
        h->other_rv = pc_async_step(h->other, h->other_g, h->other_params,
                                    &st);
    return pc_hook_resend(c, 0, &h->sent, &h->same);
}

/*
 * A large push-and-pull's answer is recorded as answered, not copied: a
 * repeat is answered again from the store — the same bytes while the
 * shard is where it answered (sync), the values now once it has moved on
 * (async, another worker's push in between) — and never applied twice.
 */
static void answered_again_case(const char *mode)
{
    int async = strcmp(mode, "async") == 0;
    struct server s;
    struct hc_model m;
    struct ps_service_conf c = { 0 };
    struct hc_diag diag = { 0 };
    struct pc_client *pc = NULL, *other = NULL;
    struct pc_grad g = { .samples = 4, .samples_per_s = 100 };
    struct pc_grad g1 = { .samples = 4, .samples_per_s = 100 };
    struct pc_step st = { .has_place = 1, .batches = 1 };
    struct again_hook h = { 0 };
    struct pc_shard_status ss;
    float *init, *params, *grads, *grads1, *params1;
    char json[320];
    size_t n, i, bad = 0;

    memset(&s, 0, sizeof s);
    hp_tmpdir(s.dir, sizeof s.dir);
    snprintf(json, sizeof json,
             "{\"cluster\":{\"ps\":[\"127.0.0.1:%d\"],\"worker\":"
             "[\"127.0.0.1:%d\"%s]},\"hetps\":{\"mode\":\"%s\"}}",
             free_port(), free_port(), async ? ",\"127.0.0.1:1\"" : "", mode);
    CU_ASSERT_EQUAL_FATAL(hc_cluster_parse(json, strlen(json), "again cluster",
                                           &s.cl, &diag), HC_OK);
    s.cl.insecure = 1;
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(big_json, strlen(big_json),
                                         "big model", &m), HC_OK);
    n = m.n_params;
    init = malloc(n * sizeof *init);
    params = malloc(n * sizeof *params);
    params1 = malloc(n * sizeof *params1);
    grads = malloc(n * sizeof *grads);
    grads1 = malloc(n * sizeof *grads1);
    CU_ASSERT_FATAL(init && params && params1 && grads && grads1);
    for (i = 0; i < n; i++) {
        init[i] = (float)(i % 1000);
        grads[i] = 0.25f * (float)(i % 7 + 1);  /* 0.5 g is exact */
        grads1[i] = 0.5f * (float)(i % 5 + 1);
    }
    g.data = grads;
    g1.data = grads1;
    c.cluster = &s.cl;
    c.data_dir = s.dir;
    c.heartbeat_timeout_ms = 60000;
    CU_ASSERT_EQUAL_FATAL(ps_service_start(&s.svc, &c), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, HC_JOB_WORKER, 0, &quick1),
                          HC_OK);
    pc_set_reply_hook(pc, again_resend, &h);
    CU_ASSERT_EQUAL_FATAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_set_model(pc, &m, 0), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_create(pc, init), HC_OK);
    if (async) {
        CU_ASSERT_EQUAL_FATAL(pc_open(&other, &s.cl, HC_JOB_WORKER, 1,
                                      &quick1), HC_OK);
        CU_ASSERT_EQUAL_FATAL(pc_join(other, "cpu"), HC_OK);
        CU_ASSERT_EQUAL_FATAL(pc_set_model(other, &m, 0), HC_OK);
        h.other = other;
        h.other_g = &g1;
        h.other_params = params1;
    }
    h.armed = 1;
    CU_ASSERT_EQUAL(async ? pc_async_step(pc, &g, params, &st)
                          : pc_sync_step(pc, &g, params, &st), HC_OK);
    CU_ASSERT_EQUAL(h.sent, 1);
    CU_ASSERT_EQUAL(h.other_rv, HC_OK);
    /* sync: the same bytes; async: made again after worker:1's push. */
    CU_ASSERT_EQUAL(h.same, !async);
    CU_ASSERT_EQUAL(st.version, async ? 2u : 1u);
    for (i = 0; i < n; i++)
        bad += params[i] != init[i] - 0.5f * grads[i] -
                                (async ? 0.5f * grads1[i] : 0.0f);
    CU_ASSERT_EQUAL(bad, 0);
    door_status(&s.cl, &ss);        /* each push applied once */
    CU_ASSERT_EQUAL(ss.version, async ? 2u : 1u);
    CU_ASSERT(ss.duplicates >= 1);
    pc_status_free(&ss, 1);
    pc_close(other);
    pc_close(pc);
    server_stop(&s);
    free(init);
    free(params);
    free(params1);
    free(grads);
    free(grads1);
}

static void test_answered_again(void)
{
    answered_again_case("sync");
    answered_again_case("async");
}

/* The reply hook of test_restart_resend: before the push-and-pull's
 * answer is read, the shard is stopped and started again on its store,
 * and the same request sent again — to a shard that has forgotten the
 * worker (the client joins it again and re-sends). */
struct restart_hook {
    struct server *s;
    int armed, sent, same, rv;
};

static int restart_resend(struct pc_client *c, int n_shards, void *arg)
{
    struct restart_hook *h = arg;
    struct ps_service_conf conf = { 0 };

    (void)n_shards;
    if (!h->armed)
        return HC_OK;
    h->armed = 0;
    ps_service_stop(h->s->svc);
    conf.cluster = &h->s->cl;
    conf.data_dir = h->s->dir;
    conf.heartbeat_timeout_ms = 60000;
    if ((h->rv = ps_service_start(&h->s->svc, &conf)) != HC_OK) {
        h->s->svc = NULL;
        return h->rv;
    }
    return pc_hook_resend(c, 0, &h->sent, &h->same);
}

/*
 * A push-and-pull applied, its answer lost, the shard restarted: the
 * re-send is answered from the record the store kept with the push —
 * the values, at the version after it — and the push is not applied
 * again. (A shard answering it with a bare Ack fails the step: the
 * client takes values only.)
 */
static void test_restart_resend(void)
{
    static const struct pc_opts patient = { .timeout_ms = 500,
                                            .retry_ms = 20000,
                                            .wait_ms = 2000 };
    struct server s;
    struct hc_model m;
    struct pc_client *pc = NULL;
    struct restart_hook h = { .s = &s };
    float init[8], params[8], grads[8];
    struct pc_grad g = { .data = grads, .samples = 4, .samples_per_s = 100 };
    struct pc_step st = { .has_place = 1, .epoch = 2, .batches = 7 };
    struct pc_shard_status ss;
    int i, bad = 0;

    make_model(&m);
    CU_ASSERT_EQUAL_FATAL(server_start(&s), HC_OK);
    for (i = 0; i < 8; i++) {
        init[i] = (float)i;
        grads[i] = 0.25f * (float)(i + 1);
    }
    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s.cl, HC_JOB_WORKER, 0, &patient),
                          HC_OK);
    pc_set_reply_hook(pc, restart_resend, &h);
    CU_ASSERT_EQUAL_FATAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_set_model(pc, &m, 0), HC_OK);
    CU_ASSERT_EQUAL_FATAL(pc_create(pc, init), HC_OK);
    h.armed = 1;
    CU_ASSERT_EQUAL(pc_async_step(pc, &g, params, &st), HC_OK);
    CU_ASSERT_EQUAL(h.rv, HC_OK);
    CU_ASSERT_EQUAL(h.sent, 1);
    CU_ASSERT_EQUAL(h.same, 0);         /* the restarted shard: join first */
    CU_ASSERT_EQUAL(st.version, 1);
    for (i = 0; i < 8; i++)
        bad += params[i] != init[i] - 0.5f * grads[i];
    CU_ASSERT_EQUAL(bad, 0);
    door_status(&s.cl, &ss);            /* applied once */
    CU_ASSERT_EQUAL(ss.version, 1);
    CU_ASSERT(ss.duplicates >= 1);
    CU_ASSERT_EQUAL_FATAL(ss.n_members, 1);  /* the place kept with it */
    CU_ASSERT(ss.members[0].has_place && ss.members[0].epoch == 2 &&
              ss.members[0].batches == 7);
    pc_status_free(&ss, 1);
    pc_close(pc);
    server_stop(&s);
}

/* One worker of parts_case: its client and its step, on a thread of its
 * own in sync (the step waits for both). */
struct parts_worker {
    struct pc_client *pc;
    struct pc_grad g;
    struct pc_step st;
    float *params;
    int rv;
    int sync;
    /* early: the gradient is written into g.data (NaN before) from its
     * end, an eighth at a time, while the step runs (as a backward pass
     * does), each eighth marked final in `ready` when written */
    int early;
    float *truth;               /* (n) the gradient */
    size_t n;
    struct pc_ready ready;
};

static void *parts_fill_main(void *arg)
{
    struct parts_worker *w = arg;
    float *dst = (float *)w->g.data;
    int c;

    for (c = 7; c >= 0; c--) {
        size_t lo = w->n * (size_t)c / 8, hi = w->n * (size_t)(c + 1) / 8;

        usleep(3000);
        memcpy(dst + lo, w->truth + lo, (hi - lo) * sizeof *dst);
        pc_ready_mark(&w->ready, lo);
    }
    return NULL;
}

static void *parts_step_main(void *arg)
{
    struct parts_worker *w = arg;

    w->rv = w->sync ? pc_sync_step(w->pc, &w->g, w->params, &w->st)
                    : pc_async_step(w->pc, &w->g, w->params, &w->st);
    return NULL;
}

/*
 * A step in parts: the 4.5 MB model on two shards, parts of 256 KiB over
 * 4 lanes (so 4 parts a shard, each on its own connection). Sync, two
 * workers: each part goes into the step as it comes, a block to the
 * store's open step once both workers gave it, the push counted once at
 * its last part, and the step is the sample-weighted mean of both,
 * exactly; sync with a backup worker (one worker): its parts held until
 * the last, then judged as one push; async, one worker: every part
 * applied as it comes, the version counted once per push (by its first
 * part). Two steps each; the shards' versions and request counts say each
 * part was applied once. "sync-early" and "async-early": the same while
 * the gradients are still being written (pc_ready): a part sent before its
 * elements were final would carry NaN and the values would differ.
 * "sync-unconfirmed": shards that answer every part before the step's
 * commit (ps_service_set_unconfirmed): the workers send each step's parts
 * again until an answer confirms it (the shards count them as duplicates).
 */
static void parts_case(const char *mode)
{
    int unconfirmed = strcmp(mode, "sync-unconfirmed") == 0;
    int backup = strcmp(mode, "sync-backup") == 0;
    int early = strstr(mode, "-early") != NULL;
    int sync = backup || strncmp(mode, "sync", 4) == 0;
    int nw = sync && !backup ? 2 : 1;
    static const struct pc_opts parts = { .timeout_ms = 2000,
                                          .retry_ms = 10000, .wait_ms = 5000,
                                          .lanes = 4,
                                          .part_bytes = 256u << 10 };
    struct hc_cluster cl;
    struct hc_diag diag = { 0 };
    struct ps_service *svc[2] = { NULL, NULL };
    char dir[2][256], json[320];
    struct hc_model m;
    struct parts_worker w[2];
    struct pc_shard_status ss[2];
    float *init, *expect;
    size_t n, i, bad = 0;
    int k, step;

    memset(w, 0, sizeof w);
    snprintf(json, sizeof json,
             "{\"cluster\":{\"ps\":[\"127.0.0.1:%d\",\"127.0.0.1:%d\"],"
             "\"worker\":[\"127.0.0.1:%d\",\"127.0.0.1:%d\"]},"
             "\"hetps\":{\"mode\":\"%s\"%s}}",
             free_port(), free_port(), free_port(), free_port(),
             sync ? "sync" : "async", backup ? ",\"backup_workers\":1" : "");
    CU_ASSERT_EQUAL_FATAL(hc_cluster_parse(json, strlen(json), "parts cluster",
                                           &cl, &diag), HC_OK);
    cl.insecure = 1;
    if (nw == 1)
        cl.n_worker = 1;        /* one worker alone */
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(big_json, strlen(big_json),
                                         "big model", &m), HC_OK);
    n = m.n_params;
    init = malloc(n * sizeof *init);
    expect = malloc(n * sizeof *expect);
    CU_ASSERT_FATAL(init && expect);
    for (k = 0; k < nw; k++) {
        w[k].params = malloc(n * sizeof(float));
        w[k].g.data = malloc(n * sizeof(float));
        CU_ASSERT_FATAL(w[k].params && w[k].g.data);
        w[k].g.samples = 4;
        w[k].g.samples_per_s = 100;
        w[k].sync = sync;
        w[k].early = early;
        w[k].n = n;
        w[k].truth = malloc(n * sizeof(float));
        CU_ASSERT_FATAL(w[k].truth != NULL);
        pc_ready_init(&w[k].ready);
        if (early)
            w[k].g.ready = &w[k].ready;
    }
    for (i = 0; i < n; i++) {
        init[i] = expect[i] = (float)(i % 1000);
        ((float *)w[0].g.data)[i] = 0.25f * (float)(i % 7 + 1);
        if (nw == 2)
            ((float *)w[1].g.data)[i] = 0.5f * (float)(i % 5 + 1);
    }
    shards_start(&cl, 2, svc, dir);
    for (k = 0; unconfirmed && k < 2; k++)
        ps_service_set_unconfirmed(svc[k], 1);
    for (k = 0; k < nw; k++) {
        CU_ASSERT_EQUAL_FATAL(pc_open(&w[k].pc, &cl, HC_JOB_WORKER, k, &parts),
                              HC_OK);
        CU_ASSERT_EQUAL_FATAL(pc_join(w[k].pc, "cpu"), HC_OK);
        CU_ASSERT_EQUAL_FATAL(pc_set_model(w[k].pc, &m, 0), HC_OK);
    }
    CU_ASSERT_EQUAL_FATAL(pc_create(w[0].pc, init), HC_OK);
    for (k = 0; k < nw; k++)
        memcpy(w[k].truth, w[k].g.data, n * sizeof(float));
    for (step = 1; step <= 2; step++) {
        pthread_t t, fill[2];

        for (k = 0; k < nw; k++) {
            w[k].g.base_version = (uint64_t)step - 1;
            if (!early)
                continue;
            for (i = 0; i < n; i++)
                ((float *)w[k].g.data)[i] = NAN;
            pc_ready_reset(&w[k].ready, n);
            CU_ASSERT_EQUAL_FATAL(pthread_create(&fill[k], NULL,
                                                 parts_fill_main, &w[k]), 0);
        }
        if (nw == 2)
            CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, parts_step_main,
                                                 &w[1]), 0);
        parts_step_main(&w[0]);
        if (nw == 2)
            pthread_join(t, NULL);
        for (k = 0; early && k < nw; k++)
            pthread_join(fill[k], NULL);
        /* sgd 0.5: the mean of the workers' gradients, half of it. */
        for (i = 0; i < n; i++)
            expect[i] -= nw == 2 ? 0.25f * (((float *)w[0].g.data)[i] +
                                            ((float *)w[1].g.data)[i])
                                 : 0.5f * ((float *)w[0].g.data)[i];
        for (k = 0; k < nw; k++) {
            CU_ASSERT_EQUAL(w[k].rv, HC_OK);
            CU_ASSERT_EQUAL(w[k].st.version, (uint64_t)step);
            for (i = 0; i < n; i++)
                bad += w[k].params[i] != expect[i];
        }
    }
    CU_ASSERT_EQUAL(bad, 0);
    {
        struct pc_client *door = NULL;

        CU_ASSERT_EQUAL_FATAL(pc_open(&door, &cl, -1, 0, &quick), HC_OK);
        CU_ASSERT_EQUAL(pc_status(door, ss), HC_OK);
        for (k = 0; k < 2; k++) {
            CU_ASSERT_EQUAL(ss[k].version, 2u);
            /* unconfirmed: every step's parts sent again (each answered
             * from its record), the step never taken on early answers */
            CU_ASSERT(unconfirmed
                          ? ss[k].duplicates >= 2u * 4u * (unsigned)nw
                          : ss[k].duplicates == 0u);
        }
        pc_status_free(ss, 2);
        pc_close(door);
    }
    for (k = 0; k < nw; k++) {
        pc_close(w[k].pc);
        free(w[k].params);
        free((float *)w[k].g.data);
        free(w[k].truth);
        pc_ready_destroy(&w[k].ready);
    }
    for (k = 0; k < 2; k++) {
        ps_service_stop(svc[k]);
        hp_rmtree(dir[k]);
    }
    hc_cluster_free(&cl);
    free(init);
    free(expect);
}

static void test_parts(void)
{
    parts_case("sync");
    parts_case("sync-backup");
    parts_case("async");
    parts_case("sync-early");
    parts_case("async-early");
    parts_case("sync-unconfirmed");
}

/* The rows of table 2 (ids[0 .. n), dim 4) as the shard serves them into
 * out (n, 4); the table's rows stored there into *stored. */
static int rows_now(struct pc_client *pc, const struct hc_cluster *cl,
                    const uint64_t *ids, size_t n, float *out,
                    uint64_t *stored)
{
    struct pc_rows t = {2, ids, n, out, NULL};
    struct pc_shard_status st;
    int rv = pc_pull_rows(pc, &t, 1, NULL);

    door_status(cl, &st);
    *stored = st.n_tables == 1 ? st.tables[0].rows : UINT64_MAX;
    pc_status_free(&st, 1);
    return rv;
}

/* A chief of m on s's shard, joined, its model set. */
static struct pc_client *chief_of(struct server *s, const struct hc_model *m)
{
    struct pc_client *pc = NULL;

    CU_ASSERT_EQUAL_FATAL(pc_open(&pc, &s->cl, HC_JOB_WORKER, 0, &quick),
                          HC_OK);
    CU_ASSERT_EQUAL(pc_join(pc, "cpu"), HC_OK);
    CU_ASSERT_EQUAL(pc_set_model(pc, m, 0), HC_OK);
    return pc;
}

/*
 * --initial-weights of a table (pc_create_loading, pc_init_rows): a store
 * created for the rows serves nothing until they are in; a chief started
 * again while loading finds it loading and sends the rows again (replaced,
 * not counted twice); once done the shard serves them, and a chief started
 * again after that finds nothing loading: rows sent then are not taken.
 */
static void test_initial_rows(void)
{
    struct server s;
    struct hc_model m;
    struct pc_client *pc = NULL, *stale = NULL;
    float init[8] = {0}, params[8], got[3 * 4], rows[3 * 4], other[3 * 4];
    const uint64_t ids[3] = {900, 2, 5}, twice[2] = {7, 7}, big[1] = {1000};
    struct pc_rows t = {2, ids, 3, NULL, rows};
    uint64_t stored = 0;
    int loading = -1, i;

    make_model(&m);
    m.vars[2] = m.vars[0];      /* a table of 1000 rows of 4 beside it */
    snprintf(m.vars[2].name, sizeof m.vars[2].name, "embedding/embeddings");
    m.vars[2].shape[0] = 1000;
    m.vars[2].shape[1] = 4;
    m.vars[2].size = 0;
    m.vars[2].table_rows = 1000;
    m.vars[2].init = HC_INIT_ZEROS;
    m.n_vars = 3;
    for (i = 0; i < 12; i++) {
        rows[i] = 0.5f + (float)i;
        other[i] = -1.0f;
    }
    CU_ASSERT_EQUAL_FATAL(server_start(&s), HC_OK);
    /* Round 0 stops before its end (a chief killed while loading); round
     * 1, a new chief, finds the store still loading. */
    for (int round = 0; round < 2; round++) {
        pc = chief_of(&s, &m);
        CU_ASSERT_EQUAL(pc_init_rows(pc, &t, 1), HC_ERR_INVAL); /* no begin */
        CU_ASSERT_EQUAL(pc_create_loading(pc, init), HC_OK);
        CU_ASSERT_EQUAL(pc_pull(pc, params, NULL), HC_ERR_NOTFOUND);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "is loading the tables' "
                                      "initial rows"));
        CU_ASSERT_EQUAL(rows_now(pc, &s.cl, ids, 3, got, &stored),
                        HC_ERR_NOTFOUND);
        CU_ASSERT_EQUAL(pc_init_rows_begin(pc, &loading), HC_OK);
        CU_ASSERT_EQUAL(loading, 1);
        CU_ASSERT_EQUAL(pc_init_rows(pc, &t, 1), HC_OK);
        CU_ASSERT_EQUAL(pc_init_rows(pc, &t, 1), HC_OK);        /* a repeat */
        CU_ASSERT_EQUAL(pc_pull(pc, params, NULL), HC_ERR_NOTFOUND);
        if (round == 1)
            CU_ASSERT_EQUAL(pc_init_rows_done(pc), HC_OK);
        CU_ASSERT_EQUAL(pc_leave(pc), HC_OK);   /* the task free again */
        if (round == 1)
            pc_close(pc);
        else
            stale = pc;
    }
    /* The killed chief's rows, replayed late: not taken (its client still
     * holds the shard loading). */
    t.grad = other;
    CU_ASSERT_EQUAL(pc_init_rows(stale, &t, 1), HC_OK);    /* joins again */
    CU_ASSERT_EQUAL(pc_leave(stale), HC_OK);
    pc_close(stale);
    pc = chief_of(&s, &m);
    CU_ASSERT_EQUAL(pc_create_loading(pc, init), HC_OK);
    CU_ASSERT_EQUAL(pc_pull(pc, params, NULL), HC_OK);
    CU_ASSERT_EQUAL(rows_now(pc, &s.cl, ids, 3, got, &stored), HC_OK);
    CU_ASSERT_EQUAL(memcmp(got, rows, sizeof rows), 0);
    CU_ASSERT_EQUAL(stored, 3);
    /* Loaded: a chief started again sends nothing, and what it would
     * send is not taken. */
    CU_ASSERT_EQUAL(pc_init_rows_begin(pc, &loading), HC_OK);
    CU_ASSERT_EQUAL(loading, 0);
    t.grad = other;
    CU_ASSERT_EQUAL(pc_init_rows(pc, &t, 1), HC_OK);
    CU_ASSERT_EQUAL(pc_init_rows_done(pc), HC_OK);
    CU_ASSERT_EQUAL(rows_now(pc, &s.cl, ids, 3, got, &stored), HC_OK);
    CU_ASSERT_EQUAL(memcmp(got, rows, sizeof rows), 0);
    CU_ASSERT_EQUAL(stored, 3);
    /* Each id once, below input_dim. */
    t.ids = twice;
    t.n = 2;
    CU_ASSERT_EQUAL(pc_init_rows(pc, &t, 1), HC_ERR_INVAL);
    t.ids = big;
    t.n = 1;
    CU_ASSERT_EQUAL(pc_init_rows(pc, &t, 1), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(pc_leave(pc), HC_OK);
    pc_close(pc);
    server_stop(&s);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("client", NULL, NULL);

    CU_add_test(s, "open, join, create, pull, steps, status, leave",
                test_round_trip);
    CU_add_test(s, "pull before the model is set", test_pull_without_model);
    CU_add_test(s, "a shard nobody answers at", test_unreachable);
    CU_add_test(s, "batch norm's statistics over a block: refused",
                test_batchnorm_layout);
    CU_add_test(s, "a shard answering garbage", test_bad_reply);
    CU_add_test(s, "a 4.5 MB model on two shards, a shard per core",
                test_big_two_shards);
    CU_add_test(s, "a store of another block size is used as it is",
                test_store_block_size);
    CU_add_test(s, "a large push-and-pull repeated: answered again, not "
                   "applied twice", test_answered_again);
    CU_add_test(s, "status and reads answered while a sync step applies",
                test_apply_unlocked);
    CU_add_test(s, "a push-and-pull re-sent to a restarted shard: answered "
                   "from its record", test_restart_resend);
    CU_add_test(s, "a step in parts over four lanes: sync adds each to the "
                "step as it comes (held with backups), async counts a push "
                "once; each sent once its gradient is final", test_parts);
    CU_add_test(s, "initial rows of a table: served once loaded, a chief "
                "started again sends them again while loading, none after",
                test_initial_rows);
    CU_add_test(s, "more shards than blocks: the empty ones are not asked",
                test_more_shards_than_blocks);
}
