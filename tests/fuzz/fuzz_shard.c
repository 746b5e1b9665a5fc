/*
 * fuzz_shard.c — libFuzzer target: a shard's request handler (ps/shard.c)
 * over a temporary LMDB store. At start the chief's CreateVariables for a
 * small model (Dense(3) over 4 inputs: kernel (4, 3), bias (3,), one shard;
 * and a row-sparse table of 2^40 rows of 4; rows requests are served by
 * ps/shard_rows.c, as the service does)
 * is served, so pulls and pushes find variables; each input is then one
 * message body, decoded as the service decodes it and served: a create,
 * pull or push, applied to the store, or refused with an error.
 *
 * HETPS_FUZZ_SEEDS=DIR fuzz_shard writes the seed messages (this create,
 * creates with the other optimizers' settings, schedules and clipping,
 * pulls, pushes, push-and-pull, join, status, a pull and a push of rows
 * of its row-sparse table, and a click-through step's push-and-pull with
 * rows riding on it: Push.rows_grad and rows_pull) as DIR/NAME.msg and
 * exits: tests/fuzz/corpus/{shard,wire} were made so. A push that asks
 * for values back is answered as the service answers it
 * (ps_shard_answer_pull: the ranges' values, then the rows).
 */
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "fuzz_util.inc"
#include "err.h"
#include "log.h"
#include "model.h"
#include "ps/shard.h"
#include "wire.h"

static struct ps_shard *shard;
static struct hc_sender me = { HETPS__JOB__JOB_PS, 0, 1, 0, 0 };

static const char model_json[] =
    "{\"name\": \"fz\", \"input_shape\": [4], \"layers\": [{\"type\": "
    "\"dense\", \"name\": \"dense\", \"units\": 3}], \"loss\": "
    "\"sparse_categorical_crossentropy\", \"optimizer\": {\"type\": \"adam\", "
    "\"learning_rate\": 0.01}}";

static int serve(const void *data, size_t size)
{
    struct hc_wire_msg in = { 0 };
    nng_msg *reply = NULL;
    void *body = malloc(size ? size : 1);
    int rv;

    if (!body)
        return HC_ERR_NOMEM;
    memcpy(body, data, size);
    rv = hc_wire_decode(body, size, 0, &in);
    if (rv == HC_OK) {
        uint64_t version;

        /* As the service dispatches them: rows to their own calls. */
        if (in.env->payload_case == HETPS__ENVELOPE__PAYLOAD_PULL_ROWS)
            rv = ps_shard_pull_rows(shard, &in, &me, &reply);
        else if (in.env->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS)
            rv = ps_shard_push_rows(shard, &in, 0, &version);
        else
            rv = ps_shard_serve(shard, &in, &me, NULL, &reply);
        if (rv == HC_OK &&
            in.env->payload_case == HETPS__ENVELOPE__PAYLOAD_PUSH &&
            hc_wire_push_pulls(in.env->push)) {
            if (reply)
                nng_msg_free(reply);
            reply = NULL;
            rv = ps_shard_answer_pull(shard, &in, &me, NULL, &reply);
        }
        if (reply)
            nng_msg_free(reply);
        hc_wire_msg_free(&in);
    }
    free(body);
    return rv;
}

static void seed(const char *dir, const char *name, Hetps__Envelope *env,
                 const struct hc_tensor_src *t, size_t n)
{
    char path[512];
    nng_msg *msg;
    FILE *f;

    snprintf(path, sizeof path, "%s/%s.msg", dir, name);
    if (hc_wire_encode(&msg, env, t, n) != HC_OK || !(f = fopen(path, "wb"))) {
        fprintf(stderr, "fuzz_shard: seed %s: %s\n", path, hc_err_msg());
        exit(1);
    }
    fwrite(nng_msg_body(msg), 1, nng_msg_len(msg), f);
    fclose(f);
    nng_msg_free(msg);
}

/* The chief's create for the model with optimizer oc, as pc_create sends
 * it: served (the set-up's, with the model's own optimizer), or only
 * written as seed `name` into seed_dir. */
static void create_variables(const struct hc_model *m,
                             const struct hc_optim_conf *oc,
                             const char *seed_dir, const char *name,
                             int serve_it)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__CreateVariables cv = HETPS__CREATE_VARIABLES__INIT;
    Hetps__VariableDef defs[3], *ptrs[3];
    Hetps__TableInit tinit = HETPS__TABLE_INIT__INIT;
    uint32_t shapes[3][4];
    struct hc_sender chief = { HETPS__JOB__JOB_WORKER, 0, 7, 0, 0 };
    struct hc_tensor_src t[2];
    float init[15];
    struct hc_optim_wire optim;
    nng_msg *msg;

    for (int v = 0; v < 2; v++) {
        hetps__variable_def__init(&defs[v]);
        defs[v].name = (char *)m->vars[v].name;
        for (int i = 0; i < m->vars[v].ndim; i++)
            shapes[v][i] = (uint32_t)m->vars[v].shape[i];
        defs[v].n_shape = (size_t)m->vars[v].ndim;
        defs[v].shape = shapes[v];
        ptrs[v] = &defs[v];
    }
    /* A row-sparse table beside them: 2^40 rows of 4 (variable 2). */
    hetps__variable_def__init(&defs[2]);
    defs[2].name = (char *)"embedding/embeddings";
    shapes[2][0] = 4;
    defs[2].n_shape = 1;
    defs[2].shape = shapes[2];
    defs[2].has_table_rows = 1;
    defs[2].table_rows = 1ull << 40;
    tinit.kind = HC_INIT_RANDOM_UNIFORM;
    tinit.has_a = tinit.has_b = 1;
    tinit.a = -0.05f;
    tinit.b = 0.05f;
    defs[2].table_init = &tinit;
    ptrs[2] = &defs[2];
    cv.has_seed = 1;
    cv.seed = 5;
    hc_model_init_params(m, init);
    hc_optim_to_wire(oc, &optim);
    hc_wire_init_env(&env, &chief, 1);
    cv.n_vars = 3;
    cv.vars = ptrs;
    cv.block_elems = 4096;
    cv.signature = m->signature;
    cv.optimizer = &optim.m;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_CREATE;
    env.create = &cv;
    t[0] = (struct hc_tensor_src){ 0, 0, 12, init };
    t[1] = (struct hc_tensor_src){ 1, 0, 3, init + 12 };
    if (hc_wire_encode(&msg, &env, t, 2) != HC_OK) {
        fprintf(stderr, "fuzz_shard: create: %s\n", hc_err_msg());
        abort();
    }
    if (seed_dir)
        seed(seed_dir, name, &env, t, 2);
    if (serve_it && serve(nng_msg_body(msg), nng_msg_len(msg)) != HC_OK) {
        fprintf(stderr, "fuzz_shard: create refused: %s\n", hc_err_msg());
        abort();
    }
    nng_msg_free(msg);
}

/* Creates with every field of the optimizer's settings somewhere: the
 * other types, a schedule of each kind, weight decay with exclusions,
 * clipvalue. */
static const char *const optim_seeds[][2] = {
    {"create_rmsprop", "{\"type\": \"rmsprop\", \"momentum\": 0.5, "
     "\"centered\": true, \"learning_rate\": {\"class_name\": "
     "\"ExponentialDecay\", \"config\": {\"initial_learning_rate\": 0.1, "
     "\"decay_steps\": 100, \"decay_rate\": 0.5, \"staircase\": true}}}"},
    {"create_adamw", "{\"type\": \"adamw\", \"amsgrad\": true, "
     "\"clipvalue\": 1.0, \"exclude_from_weight_decay\": [\"bias\", "
     "\"gamma\"], \"learning_rate\": {\"class_name\": \"CosineDecay\", "
     "\"config\": {\"initial_learning_rate\": 0.0, \"decay_steps\": 1000, "
     "\"alpha\": 0.1, \"warmup_target\": 0.01, \"warmup_steps\": 10}}}"},
    {"create_ftrl", "{\"type\": \"ftrl\", \"l1_regularization_strength\": "
     "0.01, \"l2_regularization_strength\": 0.02, "
     "\"l2_shrinkage_regularization_strength\": 0.03, \"beta\": 0.5, "
     "\"learning_rate\": {\"class_name\": \"PiecewiseConstantDecay\", "
     "\"config\": {\"boundaries\": [10, 20], \"values\": [0.1, 0.01, "
     "0.001]}}}"},
    {"create_adagrad", "{\"type\": \"adagrad\", "
     "\"initial_accumulator_value\": 0.5, \"weight_decay\": 0.01, "
     "\"learning_rate\": {\"class_name\": \"PolynomialDecay\", \"config\": "
     "{\"initial_learning_rate\": 0.1, \"decay_steps\": 10, \"cycle\": "
     "true}}}"},
    {"create_nadam", "{\"type\": \"nadam\", \"learning_rate\": "
     "{\"class_name\": \"InverseTimeDecay\", \"config\": "
     "{\"initial_learning_rate\": 0.1, \"decay_steps\": 10, "
     "\"decay_rate\": 0.5}}}"},
    {"create_adamax", "\"adamax\""},
    {"create_nesterov", "{\"type\": \"sgd\", \"momentum\": 0.9, "
     "\"nesterov\": true}"},
};

/* A pull of three rows of the table, a push of their gradients, the
 * chief's initial values of them and its last word (init_rows, done). */
static void write_rows_seeds(const char *dir)
{
    static const uint64_t ids[3] = { 2, 9, 1ull << 39 };
    static const float grad[12] = { 1, -2, 0.5f, 0, 3, 1, -1, 2, 0.25f, 4,
                                    -3, 1 };
    struct hc_sender w1 = { HETPS__JOB__JOB_WORKER, 1, 9, 0, 0 };
    struct hc_tensor_src t[2] = { { 2, 0, 6, (const float *)ids },
                                  { 2, 0, 12, grad } };
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__RowsRef ref = HETPS__ROWS_REF__INIT, *refs[1] = { &ref };
    Hetps__PullRows pull = HETPS__PULL_ROWS__INIT;
    Hetps__PushRows push = HETPS__PUSH_ROWS__INIT;
    Hetps__InitRows init = HETPS__INIT_ROWS__INIT;
    struct hc_sender chief = { HETPS__JOB__JOB_WORKER, 0, 9, 0, 0 };

    ref.key = 2;
    ref.n = 3;
    ref.dim = 4;
    hc_wire_init_env(&env, &w1, 7);
    pull.n_tables = 1;
    pull.tables = refs;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL_ROWS;
    env.pull_rows = &pull;
    seed(dir, "pull_rows", &env, t, 1);
    hc_wire_init_env(&env, &w1, 8);
    push.samples = 3;
    push.n_tables = 1;
    push.tables = refs;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH_ROWS;
    env.push_rows = &push;
    seed(dir, "push_rows", &env, t, 2);
    hc_wire_init_env(&env, &chief, 9);
    init.n_tables = 1;
    init.tables = refs;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_INIT_ROWS;
    env.init_rows = &init;
    seed(dir, "init_rows", &env, t, 2);
    hc_wire_init_env(&env, &chief, 10);
    init.n_tables = 0;
    init.has_done = init.done = 1;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_INIT_ROWS;
    env.init_rows = &init;
    seed(dir, "init_rows_done", &env, NULL, 0);
}

/* A click-through step's one request: the dense push-and-pull of both
 * variables with the rows' gradients of three rows and the rows of two
 * to pull (Push.rows_grad, rows_pull). */
static void write_step_rows_seed(const char *dir)
{
    static const uint64_t ids[3] = { 2, 9, 1ull << 39 }, next[2] = { 9, 77 };
    static const float grad[27] = { 0.5f, -1, 2, 0, 1e-3f, 3, -2, 1, 0.25f,
                                    -0.5f, 4, 1, 0.1f, -0.1f, 0, 1, -2, 0.5f,
                                    0, 3, 1, -1, 2, 0.25f, 4, -3, 1 };
    struct hc_sender w1 = { HETPS__JOB__JOB_WORKER, 1, 9, 0, 0 };
    struct hc_tensor_src t[5] = { { 0, 0, 12, grad }, { 1, 0, 3, grad + 12 },
                                  { 2, 0, 6, (const float *)ids },
                                  { 2, 0, 12, grad + 15 },
                                  { 2, 0, 4, (const float *)next } };
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Push push = HETPS__PUSH__INIT;
    Hetps__Range r[2] = { HETPS__RANGE__INIT, HETPS__RANGE__INIT };
    Hetps__Range *rp[2] = { &r[0], &r[1] };
    Hetps__RowsRef g = HETPS__ROWS_REF__INIT, p = HETPS__ROWS_REF__INIT;
    Hetps__RowsRef *gp[1] = { &g }, *pp[1] = { &p };

    r[0].key = 0; r[0].length = 12;
    r[1].key = 1; r[1].length = 3;
    g.key = p.key = 2;
    g.dim = p.dim = 4;
    g.n = 3;
    p.n = 2;
    hc_wire_init_env(&env, &w1, 10);
    push.samples = 32;
    push.n_ranges = 2;
    push.ranges = rp;
    push.n_rows_grad = 1;
    push.rows_grad = gp;
    push.n_rows_pull = 1;
    push.rows_pull = pp;
    push.has_epoch = push.has_batches = 1;
    push.batches = 4;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env.push = &push;
    seed(dir, "push_step_rows", &env, t, 5);
}

/* The seeds besides the create (see the header comment). */
static void write_seeds(const struct hc_model *m, const char *dir)
{
    static const float grad[15] = { 0.5f, -1, 2, 0, 1e-3f, 3, -2, 1, 0.25f,
                                    -0.5f, 4, 1, 0.1f, -0.1f, 0 };
    struct hc_sender w1 = { HETPS__JOB__JOB_WORKER, 1, 9, 0, 0 };
    struct hc_tensor_src t[2] = { { 0, 0, 12, grad }, { 1, 0, 3, grad + 12 } };
    Hetps__Envelope env;
    Hetps__Pull pull = HETPS__PULL__INIT;
    Hetps__Push push = HETPS__PUSH__INIT;
    Hetps__Join join = HETPS__JOIN__INIT;
    Hetps__Status status = HETPS__STATUS__INIT;
    Hetps__Range r[2] = { HETPS__RANGE__INIT, HETPS__RANGE__INIT };
    Hetps__Range *rp[2] = { &r[0], &r[1] };

    for (size_t i = 0; i < sizeof optim_seeds / sizeof optim_seeds[0]; i++) {
        struct hc_optim_conf oc;
        const char *json = optim_seeds[i][1];

        if (hc_model_optim_from_json(json, strlen(json), "seed", &oc) !=
            HC_OK) {
            fprintf(stderr, "fuzz_shard: %s\n", hc_err_msg());
            abort();
        }
        create_variables(m, &oc, dir, optim_seeds[i][0], 0);
    }
    r[0].key = 0; r[0].length = 12;
    r[1].key = 1; r[1].length = 3;
    hetps__envelope__init(&env);
    hc_wire_init_env(&env, &w1, 2);
    pull.n_ranges = 2;
    pull.ranges = rp;
    pull.has_min_version = 1;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL;
    env.pull = &pull;
    seed(dir, "pull", &env, NULL, 0);
    hc_wire_init_env(&env, &w1, 3);
    push.samples = 64;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env.push = &push;
    seed(dir, "push", &env, t, 2);
    hc_wire_init_env(&env, &w1, 4);
    push.n_ranges = 2;
    push.ranges = rp;
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env.push = &push;
    seed(dir, "push_pull", &env, t, 2);
    hc_wire_init_env(&env, &w1, 5);
    join.devices = (char *)"cpu";
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_JOIN;
    env.join = &join;
    seed(dir, "join", &env, NULL, 0);
    hc_wire_init_env(&env, &w1, 6);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_STATUS;
    env.status = &status;
    seed(dir, "status", &env, NULL, 0);
    write_rows_seeds(dir);
    write_step_rows_seed(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static struct hc_model m;
    char dir[512];

    (void)argc;
    (void)argv;
    hc_log_set_level(HC_LOG_ERROR);
    snprintf(dir, sizeof dir, "%s/store", fz_dir());
    if (hc_model_parse(model_json, sizeof model_json - 1, "fuzz", &m) != HC_OK ||
        m.n_vars != 2 || ps_shard_open(&shard, dir, 0, 1, 0, 0, 1) != HC_OK) {
        fprintf(stderr, "fuzz_shard: set-up: %s\n", hc_err_msg());
        abort();
    }
    create_variables(&m, &m.optim, getenv("HETPS_FUZZ_SEEDS"), "create", 1);
    if (getenv("HETPS_FUZZ_SEEDS")) {
        write_seeds(&m, getenv("HETPS_FUZZ_SEEDS"));
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    serve(data, size);
    return 0;
}
