/*
 * test_shard.c — one shard's variables (ps/shard.h) over a temporary
 * store, without a network: the chief's create (and its repeat), pulls,
 * an async push through the optimizer, a push with a table's rows riding
 * on it, a synchronous step's
 * sample-weighted sum, the values and version kept across a reopen, and
 * the requests refused (before create, a range outside the variables, a
 * gradient of the wrong length, a row id past its table).
 */
#include "cu.h"
#include "ps/shard.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/nng.h>

#include "err.h"
#include "layout.h"
#include "model.h"
#include "wire.h"

#define CLUSTER 0x5eedf00dull
#define N 10                    /* elements of the one variable "w" */
#define BLOCK 4                 /* elements per block: 3 blocks */
#define LR 0.5f                 /* SGD, exact in binary for these values */

static const struct hc_sender worker0 = {
    .job = HETPS__JOB__JOB_WORKER, .index = 0,
    .incarnation = 0x1234567812345678ull, .cluster_id = CLUSTER };
static const struct hc_sender shard0 = {
    .job = HETPS__JOB__JOB_PS, .index = 0,
    .incarnation = 0x8765432187654321ull, .cluster_id = CLUSTER };

/* What every test needs: the shard, its directory, the one-shard layout. */
struct fx {
    char dir[256];
    struct ps_shard *sh;
    struct hc_layout lay;
    struct hc_tensor_src src[N];        /* (lay.n_blocks) */
    Hetps__Range ranges[N], *range_ptrs[N];
    uint64_t next_id;
};

static void fx_open(struct fx *f)
{
    size_t size = N, b;

    memset(f, 0, sizeof *f);
    hp_tmpdir(f->dir, sizeof f->dir);
    CU_ASSERT_EQUAL_FATAL(hc_layout_build(&size, 1, 1, BLOCK, &f->lay), HC_OK);
    CU_ASSERT_EQUAL_FATAL(f->lay.n_blocks, 3);
    for (b = 0; b < f->lay.n_blocks; b++) {
        const struct hc_block *bk = &f->lay.blocks[b];

        f->src[b] = (struct hc_tensor_src){ bk->var, bk->offset, bk->length,
                                            NULL };
        hetps__range__init(&f->ranges[b]);
        f->ranges[b].key = bk->var;
        f->ranges[b].offset = bk->offset;
        f->ranges[b].length = bk->length;
        f->range_ptrs[b] = &f->ranges[b];
    }
    f->next_id = 1;
    CU_ASSERT_EQUAL_FATAL(ps_shard_open(&f->sh, f->dir, 0, 1, 0, 0, 0), HC_OK);
}

static void fx_close(struct fx *f)
{
    ps_shard_close(f->sh);
    hc_layout_free(&f->lay);
    hp_rmtree(f->dir);
}

/* Encode env with the blocks of `values` (NULL: no tensors) into *req and
 * decode it into *in, as the service receives it. */
static void request(struct fx *f, Hetps__Envelope *env, const float *values,
                    struct hc_wire_msg *in, nng_msg **req)
{
    size_t b, n = values ? f->lay.n_blocks : 0;

    memset(in, 0, sizeof *in);
    *req = NULL;
    for (b = 0; b < n; b++)
        f->src[b].data = values + f->lay.blocks[b].flat;
    CU_ASSERT_EQUAL_FATAL(hc_wire_encode(req, env, f->src, n), HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(*req),
                                         nng_msg_len(*req), CLUSTER, in),
                          HC_OK);
}

/* Serve env (tensors: the blocks of `values`); the reply (when HC_OK) is
 * decoded into *out, which keeps *keep alive. Returns ps_shard_serve's
 * code. */
static int serve(struct fx *f, Hetps__Envelope *env, const float *values,
                 struct hc_wire_msg *out, nng_msg **keep)
{
    struct hc_wire_msg in;
    nng_msg *req;
    int rv;

    *keep = NULL;
    memset(out, 0, sizeof *out);
    request(f, env, values, &in, &req);
    rv = ps_shard_serve(f->sh, &in, &shard0, NULL, keep);
    if (rv == HC_OK)
        CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(*keep),
                                             nng_msg_len(*keep), CLUSTER, out),
                              HC_OK);
    hc_wire_msg_free(&in);
    nng_msg_free(req);
    return rv;
}

static void done(struct hc_wire_msg *out, nng_msg *keep)
{
    hc_wire_msg_free(out);
    if (keep)
        nng_msg_free(keep);
}

/* The chief's create of "dense/w" (N) with SGD at LR, or with `optim`
 * (NULL: none) when `own` is set; and `table` (NULL: none), variable 1. */
static int create_with(struct fx *f, const float *init, int own,
                       Hetps__OptimizerSettings *optim_in,
                       Hetps__VariableDef *table)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__CreateVariables cv = HETPS__CREATE_VARIABLES__INIT;
    Hetps__VariableDef def = HETPS__VARIABLE_DEF__INIT;
    Hetps__VariableDef *defs[2] = { &def, table };
    uint32_t shape[1] = { N };
    Hetps__OptimizerSettings optim = HETPS__OPTIMIZER_SETTINGS__INIT;
    struct hc_wire_msg out;
    nng_msg *keep;
    int rv;

    def.name = "dense/w";
    def.n_shape = 1;
    def.shape = shape;
    cv.n_vars = table ? 2 : 1;
    cv.vars = defs;
    cv.block_elems = BLOCK;
    cv.signature = 0xabcdefull;
    cv.has_seed = table != NULL;
    cv.seed = 7;
    optim.type = HETPS__OPTIMIZER_TYPE__OPTIMIZER_SGD;
    optim.learning_rate = LR;
    cv.optimizer = own ? optim_in : &optim;
    hc_wire_init_env(&env, &worker0, f->next_id++);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_CREATE;
    env.create = &cv;
    rv = serve(f, &env, init, &out, &keep);
    if (rv == HC_OK)
        CU_ASSERT_EQUAL(out.env->payload_case, HETPS__ENVELOPE__PAYLOAD_ACK);
    done(&out, keep);
    return rv;
}

static int create(struct fx *f, const float *init)
{
    return create_with(f, init, 0, NULL, NULL);
}

/* Pull every block into values[N]; *version the shard's. */
static int pull(struct fx *f, float *values, uint64_t *version)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Pull p = HETPS__PULL__INIT;
    struct hc_wire_msg out;
    nng_msg *keep;
    size_t k;
    int rv;

    p.n_ranges = f->lay.n_blocks;
    p.ranges = f->range_ptrs;
    hc_wire_init_env(&env, &worker0, f->next_id++);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL;
    env.pull = &p;
    rv = serve(f, &env, NULL, &out, &keep);
    if (rv == HC_OK) {
        CU_ASSERT_EQUAL_FATAL(out.n_tensors, f->lay.n_blocks);
        for (k = 0; k < out.n_tensors; k++) {
            const Hetps__TensorRef *t = out.env->tensors[k];

            CU_ASSERT_FATAL(t->key == 0 && t->offset + t->length <= N);
            memcpy(values + t->offset, out.data[k], t->length * sizeof(float));
        }
        *version = out.env->ack->version;
    }
    done(&out, keep);
    return rv;
}

/* A push envelope of `samples` samples (tensors: the gradient's blocks). */
static void push_env(struct fx *f, Hetps__Envelope *env, Hetps__Push *p,
                     uint32_t samples, uint64_t base)
{
    hetps__envelope__init(env);
    hetps__push__init(p);
    p->samples = samples;
    p->has_base_version = 1;
    p->base_version = base;
    hc_wire_init_env(env, &worker0, f->next_id++);
    env->payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env->push = p;
}

static void test_create_pull_push(void)
{
    struct fx f;
    float init[N], grad[N], got[N];
    Hetps__Envelope env;
    Hetps__Push p;
    struct hc_wire_msg out;
    struct ps_record rec;
    nng_msg *keep;
    uint64_t version = 99;
    int i, bad = 0;

    for (i = 0; i < N; i++) {
        init[i] = (float)(i - 3);
        grad[i] = 0.25f * (float)(i + 1);
    }
    fx_open(&f);
    CU_ASSERT_EQUAL(create(&f, init), HC_OK);
    CU_ASSERT_EQUAL(create(&f, init), HC_OK);       /* the repeat: kept */
    CU_ASSERT_EQUAL(pull(&f, got, &version), HC_OK);
    CU_ASSERT_EQUAL(version, 0);
    CU_ASSERT_EQUAL(memcmp(got, init, sizeof got), 0);
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 0);

    /* async: applied at once through SGD, recorded with its update and
     * answered with an Ack at the version after it. */
    CU_ASSERT_EQUAL(ps_shard_record(f.sh, 0, 0, &rec), HC_ERR_NOTFOUND);
    push_env(&f, &env, &p, 8, 0);
    p.has_epoch = p.has_batches = 1;
    p.epoch = 1;
    p.batches = 5;
    CU_ASSERT_EQUAL(serve(&f, &env, grad, &out, &keep), HC_OK);
    CU_ASSERT(out.env && out.env->payload_case == HETPS__ENVELOPE__PAYLOAD_ACK &&
              out.env->ack->version == 1 && out.n_tensors == 0);
    done(&out, keep);
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 1);
    CU_ASSERT_EQUAL(ps_shard_record(f.sh, 0, 0, &rec), HC_OK);
    CU_ASSERT(rec.worker == 0 && rec.kind == PS_REQ_PUSH &&
              rec.incarnation == worker0.incarnation &&
              rec.request_id == env.request_id && rec.version == 1 &&
              (rec.flags & PS_REC_ANSWERED) && (rec.flags & PS_REC_PLACE) &&
              rec.epoch == 1 && rec.batches == 5);
    CU_ASSERT_EQUAL(pull(&f, got, &version), HC_OK);
    CU_ASSERT_EQUAL(version, 1);
    for (i = 0; i < N; i++)
        bad += got[i] != init[i] - LR * grad[i];
    CU_ASSERT_EQUAL(bad, 0);
    fx_close(&f);
}

/* ---- a step's rows riding on its push (Push.rows_grad, rows_pull) ---- */

#define TABLE_ROWS 1000u        /* variable 1: a table of rows of 2 */

/* The chief's create of "dense/w" (N, SGD at LR) and the table "emb/t",
 * variable 1 (TABLE_ROWS rows of 2, every row 1.0 until written). */
static int create_table(struct fx *f, const float *init)
{
    Hetps__VariableDef t = HETPS__VARIABLE_DEF__INIT;
    Hetps__TableInit ti = HETPS__TABLE_INIT__INIT;
    uint32_t shape[1] = { 2 };

    t.name = "emb/t";
    t.n_shape = 1;
    t.shape = shape;
    t.has_table_rows = 1;
    t.table_rows = TABLE_ROWS;
    ti.kind = HC_INIT_CONSTANT;
    ti.has_a = 1;
    ti.a = 1.0f;
    t.table_init = &ti;
    return create_with(f, init, 0, NULL, &t);
}

/* A push of the dense blocks of `grad` (NULL: none) with the rows'
 * gradients g of ids gi[0 .. ng) and the rows of pi[0 .. np) to pull,
 * samples 2, decoded into *in (its message *req); the ranges asked back
 * with the dense blocks. */
static void rows_push(struct fx *f, const float *grad, const uint64_t *gi,
                      uint32_t ng, const float *g, const uint64_t *pi,
                      uint32_t np, struct hc_wire_msg *in, nng_msg **req)
{
    Hetps__Envelope env;
    Hetps__Push p;
    Hetps__RowsRef gr = HETPS__ROWS_REF__INIT, pr = HETPS__ROWS_REF__INIT;
    Hetps__RowsRef *grp[1] = { &gr }, *prp[1] = { &pr };
    struct hc_tensor_src t[N + 3];
    size_t b, nt = 0;

    push_env(f, &env, &p, 2, 0);
    for (b = 0; grad && b < f->lay.n_blocks; b++) {
        t[nt] = f->src[b];
        t[nt++].data = grad + f->lay.blocks[b].flat;
    }
    p.n_ranges = grad ? f->lay.n_blocks : 0;
    p.ranges = f->range_ptrs;
    gr.key = pr.key = 1;
    gr.dim = pr.dim = 2;
    gr.n = ng;
    pr.n = np;
    p.n_rows_grad = 1;
    p.rows_grad = grp;
    p.n_rows_pull = np ? 1 : 0;
    p.rows_pull = prp;
    t[nt++] = (struct hc_tensor_src){ 1, 0, 2 * ng, (const float *)gi };
    t[nt++] = (struct hc_tensor_src){ 1, 0, 2 * ng, g };
    if (np)
        t[nt++] = (struct hc_tensor_src){ 1, 0, 2 * np, (const float *)pi };
    CU_ASSERT_EQUAL_FATAL(hc_wire_encode(req, &env, t, nt), HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(*req),
                                         nng_msg_len(*req), CLUSTER, in),
                          HC_OK);
}

static void test_step_rows(void)
{
    static const uint64_t gi[2] = { 3, 700 }, pi[2] = { 3, 5 };
    static const uint64_t bad_ids[2] = { 3, TABLE_ROWS };
    static const float g[4] = { 1, -2, 0.5f, 4 };
    /* SGD at LR 0.5 over samples 2 from rows of 1.0: 1 − g / 4. */
    static const float want3[2] = { 0.75f, 1.5f }, want5[2] = { 1, 1 };
    float init[N], grad[N];
    struct hc_wire_msg in, out;
    nng_msg *req, *reply;
    struct fx f;
    int i, bad = 0;

    for (i = 0; i < N; i++) {
        init[i] = (float)i;
        grad[i] = 2.0f;
    }
    fx_open(&f);
    CU_ASSERT_EQUAL_FATAL(create_table(&f, init), HC_OK);

    /* One step: the dense blocks and the rows applied together (the
     * version moves once), then the answer: the values, then the rows
     * pulled, read after the apply. */
    rows_push(&f, grad, gi, 2, g, pi, 2, &in, &req);
    CU_ASSERT_EQUAL(hc_wire_push_dense(in.env->push, in.n_tensors), 3);
    CU_ASSERT_EQUAL(ps_shard_serve(f.sh, &in, &shard0, NULL, &reply),
                    HC_OK);
    nng_msg_free(reply);
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 1);
    CU_ASSERT_EQUAL_FATAL(ps_shard_answer_pull(f.sh, &in, &shard0, NULL,
                                               &reply), HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(reply),
                                         nng_msg_len(reply), CLUSTER, &out),
                          HC_OK);
    CU_ASSERT_EQUAL_FATAL(out.n_tensors, 4);
    for (i = 0; i < 3; i++) {
        const Hetps__TensorRef *t = out.env->tensors[i];

        for (uint32_t e = 0; e < t->length; e++)
            bad += out.data[i][e] != init[t->offset + e] - LR * 2.0f;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(out.env->tensors[3]->key == 1 &&
              out.env->tensors[3]->length == 4);
    CU_ASSERT_EQUAL(memcmp(out.data[3], want3, sizeof want3), 0);
    CU_ASSERT_EQUAL(memcmp(out.data[3] + 2, want5, sizeof want5), 0);
    hc_wire_msg_free(&out);
    nng_msg_free(reply);
    hc_wire_msg_free(&in);
    nng_msg_free(req);

    /* An id past the table: refused by name, nothing applied. */
    rows_push(&f, grad, bad_ids, 2, g, NULL, 0, &in, &req);
    CU_ASSERT_EQUAL(ps_shard_serve(f.sh, &in, &shard0, NULL, &reply),
                    HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "id 1000 of variable 1 is "
                                  "not below the table's input_dim 1000"));
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 1);
    /* A synchronous step's push does not carry rows. */
    CU_ASSERT_EQUAL(ps_shard_accumulate(f.sh, &in, 0), HC_ERR_UNSUPPORTED);
    hc_wire_msg_free(&in);
    nng_msg_free(req);

    /* Rows alone (a shard holding no block of the step): a step too. */
    rows_push(&f, NULL, gi, 2, g, NULL, 0, &in, &req);
    CU_ASSERT_EQUAL(hc_wire_push_dense(in.env->push, in.n_tensors), 0);
    CU_ASSERT_EQUAL(ps_shard_serve(f.sh, &in, &shard0, NULL, &reply),
                    HC_OK);
    nng_msg_free(reply);
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 2);
    hc_wire_msg_free(&in);
    nng_msg_free(req);
    fx_close(&f);
}

static void test_sync_sum(void)
{
    struct fx f;
    float init[N], g1[N], g3[N], got[N];
    Hetps__Envelope env;
    Hetps__Push p;
    struct hc_wire_msg in;
    struct ps_record recs[2], r;
    nng_msg *req;
    uint64_t version;
    int i, bad = 0;

    for (i = 0; i < N; i++) {
        init[i] = 1.0f;
        g1[i] = (float)i;               /* one sample's mean gradient */
        g3[i] = 2.0f;                   /* three samples' */
    }
    fx_open(&f);
    CU_ASSERT_EQUAL_FATAL(create(&f, init), HC_OK);
    for (int w = 0; w < 2; w++) {
        const float *g = w ? g3 : g1;

        push_env(&f, &env, &p, w ? 3 : 1, 0);
        request(&f, &env, g, &in, &req);
        CU_ASSERT_EQUAL(ps_shard_accumulate(f.sh, &in, 0), HC_OK);
        hc_wire_msg_free(&in);
        nng_msg_free(req);
    }
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 0);     /* summed, not applied */
    /* The step's pushes recorded with it, answered at the version after. */
    ps_record_begin(&recs[0], 0, PS_REQ_PUSH, 0x66, 8);
    ps_record_begin(&recs[1], 1, PS_REQ_PUSH, 0x77, 9);
    CU_ASSERT_EQUAL(ps_shard_apply_step(f.sh, 4, recs, 2), HC_OK);
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 1);
    CU_ASSERT_EQUAL(ps_shard_record(f.sh, 1, 0, &r), HC_OK);
    CU_ASSERT(r.incarnation == 0x77 && r.request_id == 9 && r.version == 1 &&
              (r.flags & PS_REC_ANSWERED));
    CU_ASSERT_EQUAL(pull(&f, got, &version), HC_OK);
    for (i = 0; i < N; i++) {
        float mean = (1.0f * g1[i] + 3.0f * g3[i]) / 4.0f;

        bad += got[i] != init[i] - LR * mean;
    }
    if (bad)
        printf("\n  %d values off, got[1] %g want %g\n", bad, (double)got[1],
               (double)(init[1] - LR * (g1[1] + 3.0f * g3[1]) / 4.0f));
    CU_ASSERT_EQUAL(bad, 0);

    /* Closed and opened again: the values and the step are kept. */
    ps_shard_close(f.sh);
    f.sh = NULL;
    CU_ASSERT_EQUAL_FATAL(ps_shard_open(&f.sh, f.dir, 0, 1, 0, 0, 0), HC_OK);
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 1);
    memset(got, 0, sizeof got);
    CU_ASSERT_EQUAL(pull(&f, got, &version), HC_OK);
    CU_ASSERT_EQUAL(version, 1);
    CU_ASSERT_EQUAL(got[9], init[9] - LR * (9.0f + 6.0f) / 4.0f);
    fx_close(&f);
}

/* A sync step's gradient lent from the kept message (ps_shard_accumulate's
 * lend) gives the values the summed one gives; a message handed to
 * ps_shard_unlend may then be scribbled over or freed. */
static void sync_lent_case(int scenario)
{
    struct fx f;
    float init[N], g1[N], g3[N], got[N];
    Hetps__Envelope env;
    Hetps__Push p;
    struct hc_wire_msg in[2];
    nng_msg *req[2] = { NULL, NULL };
    uint64_t version;
    int i, bad = 0, n = scenario == 0 ? 1 : 2;

    for (i = 0; i < N; i++) {
        init[i] = 1.0f;
        g1[i] = (float)i;
        g3[i] = 2.0f;
    }
    fx_open(&f);
    CU_ASSERT_EQUAL_FATAL(create(&f, init), HC_OK);
    for (int w = 0; w < n; w++) {
        push_env(&f, &env, &p, n == 1 ? 4 : (w ? 3 : 1), 0);
        request(&f, &env, w ? g3 : g1, &in[w], &req[w]);
        CU_ASSERT_EQUAL(ps_shard_accumulate(f.sh, &in[w], 1), HC_OK);
        hc_wire_msg_free(&in[w]);
        if (scenario == 2 && w == 0) {
            /* Given back before the step: copied, then the bytes go. */
            ps_shard_unlend(f.sh, nng_msg_body(req[0]), nng_msg_len(req[0]));
            memset(nng_msg_body(req[0]), 0xff, nng_msg_len(req[0]));
        }
    }
    CU_ASSERT_EQUAL(ps_shard_apply_step(f.sh, 4, NULL, 0), HC_OK);
    CU_ASSERT_EQUAL(pull(&f, got, &version), HC_OK);
    CU_ASSERT_EQUAL(version, 1);
    for (i = 0; i < N; i++) {
        float want = n == 1 ? init[i] - LR * g1[i]
                            : init[i] - LR * ((1.0f * g1[i] + 3.0f * g3[i]) /
                                              4.0f);

        bad += got[i] != want;
    }
    if (bad)
        printf("\n  scenario %d: %d values off, got[1] %g\n", scenario, bad,
               (double)got[1]);
    CU_ASSERT_EQUAL(bad, 0);
    for (int w = 0; w < n; w++)
        nng_msg_free(req[w]);
    fx_close(&f);
}

static void test_sync_lent(void)
{
    sync_lent_case(0);      /* one push: its bytes are the step's gradient */
    sync_lent_case(1);      /* a second push: the first is copied and added */
    sync_lent_case(2);      /* given back early, then overwritten */
}

static void test_refused(void)
{
    struct fx f;
    float init[N] = { 0 }, got[N];
    Hetps__Envelope env;
    Hetps__Push p;
    struct hc_wire_msg out;
    nng_msg *keep;
    uint64_t version;

    fx_open(&f);
    /* Before the chief's create: nothing to pull or push. */
    CU_ASSERT_NOT_EQUAL(pull(&f, got, &version), HC_OK);
    push_env(&f, &env, &p, 1, 0);
    CU_ASSERT_NOT_EQUAL(serve(&f, &env, init, &out, &keep), HC_OK);
    done(&out, keep);
    /* Settings a hostile or broken chief may send: refused, named. */
    {
        Hetps__OptimizerSettings o = HETPS__OPTIMIZER_SETTINGS__INIT;

        CU_ASSERT_EQUAL(create_with(&f, init, 1, NULL, NULL), HC_ERR_PROTO);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "no optimizer settings"));
        o.type = HETPS__OPTIMIZER_TYPE__OPTIMIZER_SGD;
        o.learning_rate = 1e9f;
        CU_ASSERT_EQUAL(create_with(&f, init, 1, &o, NULL), HC_ERR_PROTO);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "create: optimizer: "
                                      "learning_rate 1e+09 is out of range"));
        o.type = HETPS__OPTIMIZER_TYPE__OPTIMIZER_ADAM;
        o.learning_rate = 0.1f;
        CU_ASSERT_EQUAL(create_with(&f, init, 1, &o, NULL), HC_ERR_PROTO);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "lack beta_1"));
        CU_ASSERT_EQUAL(ps_shard_block_elems(f.sh), 0);  /* nothing made */
    }
    CU_ASSERT_EQUAL_FATAL(create(&f, init), HC_OK);

    /* A range past the variable's end. */
    f.ranges[2].length = 5;
    CU_ASSERT_NOT_EQUAL(pull(&f, got, &version), HC_OK);
    CU_ASSERT_NOT_EQUAL(hc_err_msg()[0], '\0');
    f.ranges[2].length = 2;
    /* A gradient with a block of the wrong length. */
    f.lay.blocks[2].length = 1;
    f.src[2].length = 1;
    push_env(&f, &env, &p, 1, 0);
    {
        nng_msg *req;
        struct hc_wire_msg in;

        request(&f, &env, init, &in, &req);
        keep = NULL;
        CU_ASSERT_NOT_EQUAL(ps_shard_serve(f.sh, &in, &shard0, NULL, &keep),
                            HC_OK);
        CU_ASSERT_NOT_EQUAL(ps_shard_accumulate(f.sh, &in, 0), HC_OK);
        if (keep)
            nng_msg_free(keep);
        hc_wire_msg_free(&in);
        nng_msg_free(req);
    }
    f.lay.blocks[2].length = 2;
    CU_ASSERT_EQUAL(ps_shard_version(f.sh), 0);     /* nothing applied */
    CU_ASSERT_EQUAL(pull(&f, got, &version), HC_OK);
    CU_ASSERT_EQUAL(version, 0);
    fx_close(&f);
}

/* ---- batch norm: moving statistics outside the optimizer ---- */

#define BN_C 5                  /* channels */
#define BN_B 64                 /* samples of the step, two pushes of 32 */
#define BN_HW 3                 /* positions per sample (an image's H·W) */
#define BN_MOM 0.99f

/* gamma, moving_mean, moving_variance of BN_C each, one shard, blocks of
 * 8: one block each, moving_variance joined to moving_mean. */
struct bn_fx {
    char dir[256];
    struct ps_shard *sh;
    struct hc_layout lay;
    struct hc_tensor_src src[3];
    uint64_t next_id;
};

static void bn_open(struct bn_fx *f, const float *init)
{
    static const size_t sizes[3] = {BN_C, BN_C, BN_C};
    static const unsigned char with_prev[3] = {0, 0, 1};
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__CreateVariables cv = HETPS__CREATE_VARIABLES__INIT;
    Hetps__VariableDef def[3], *defs[3];
    static const char *const names[3] = {"bn/gamma", "bn/moving_mean",
                                         "bn/moving_variance"};
    uint32_t shape[1] = {BN_C};
    Hetps__OptimizerSettings optim = HETPS__OPTIMIZER_SETTINGS__INIT;
    struct hc_wire_msg in;
    nng_msg *req, *reply = NULL;

    memset(f, 0, sizeof *f);
    hp_tmpdir(f->dir, sizeof f->dir);
    CU_ASSERT_EQUAL_FATAL(hc_layout_build_with(sizes, with_prev, 3, 1, 8,
                                               &f->lay), HC_OK);
    CU_ASSERT_FATAL(f->lay.n_blocks == 3 && f->lay.blocks[2].joined &&
                    !f->lay.blocks[1].joined);
    for (int v = 0; v < 3; v++) {
        hetps__variable_def__init(&def[v]);
        def[v].name = (char *)names[v];
        def[v].n_shape = 1;
        def[v].shape = shape;
        def[v].has_moving_momentum = v > 0;
        def[v].moving_momentum = BN_MOM;
        def[v].has_moments_of_prev = v == 2;
        def[v].moments_of_prev = v == 2;
        defs[v] = &def[v];
        f->src[v] = (struct hc_tensor_src){(uint32_t)v, 0, BN_C, NULL};
    }
    cv.n_vars = 3;
    cv.vars = defs;
    cv.block_elems = 8;
    cv.signature = 0xb2ull;
    optim.type = HETPS__OPTIMIZER_TYPE__OPTIMIZER_SGD;
    optim.learning_rate = LR;
    cv.optimizer = &optim;
    f->next_id = 1;
    CU_ASSERT_EQUAL_FATAL(ps_shard_open(&f->sh, f->dir, 0, 1, 0, 0, 0), HC_OK);
    hc_wire_init_env(&env, &worker0, f->next_id++);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_CREATE;
    env.create = &cv;
    for (int v = 0; v < 3; v++)
        f->src[v].data = init + v * BN_C;
    CU_ASSERT_EQUAL_FATAL(hc_wire_encode(&req, &env, f->src, 3), HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(req), nng_msg_len(req),
                                         CLUSTER, &in), HC_OK);
    CU_ASSERT_EQUAL_FATAL(ps_shard_serve(f->sh, &in, &shard0, NULL, &reply),
                          HC_OK);
    hc_wire_msg_free(&in);
    nng_msg_free(req);
    nng_msg_free(reply);
}

/* A push of `samples` samples with values v (3, BN_C): gamma's gradient,
 * then the batch's mean and mean of squares, as the worker's batch norm
 * leaves them. sync: accumulated; else applied. */
static void bn_push(struct bn_fx *f, const float *v, uint32_t samples,
                    int sync)
{
    Hetps__Envelope env;
    Hetps__Push p;
    struct hc_wire_msg in;
    nng_msg *req, *reply = NULL;

    hetps__envelope__init(&env);
    hetps__push__init(&p);
    p.samples = samples;
    p.has_base_version = 1;
    p.base_version = ps_shard_version(f->sh);
    hc_wire_init_env(&env, &worker0, f->next_id++);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PUSH;
    env.push = &p;
    for (int k = 0; k < 3; k++)
        f->src[k].data = v + k * BN_C;
    CU_ASSERT_EQUAL_FATAL(hc_wire_encode(&req, &env, f->src, 3), HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(req), nng_msg_len(req),
                                         CLUSTER, &in), HC_OK);
    if (sync) {
        CU_ASSERT_EQUAL(ps_shard_accumulate(f->sh, &in, 0), HC_OK);
    } else {
        CU_ASSERT_EQUAL(ps_shard_serve(f->sh, &in, &shard0, NULL, &reply),
                        HC_OK);
    }
    hc_wire_msg_free(&in);
    nng_msg_free(req);
    if (reply)
        nng_msg_free(reply);
}

/* Every value (3, BN_C) as the shard holds it. */
static void bn_pull(struct bn_fx *f, float *got)
{
    Hetps__Envelope env = HETPS__ENVELOPE__INIT;
    Hetps__Pull p = HETPS__PULL__INIT;
    Hetps__Range r[3], *rp[3];
    struct hc_wire_msg in, out;
    nng_msg *req, *reply = NULL;

    for (int v = 0; v < 3; v++) {
        hetps__range__init(&r[v]);
        r[v].key = (uint32_t)v;
        r[v].length = BN_C;
        rp[v] = &r[v];
    }
    p.n_ranges = 3;
    p.ranges = rp;
    hc_wire_init_env(&env, &worker0, f->next_id++);
    env.payload_case = HETPS__ENVELOPE__PAYLOAD_PULL;
    env.pull = &p;
    CU_ASSERT_EQUAL_FATAL(hc_wire_encode(&req, &env, NULL, 0), HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(req), nng_msg_len(req),
                                         CLUSTER, &in), HC_OK);
    CU_ASSERT_EQUAL_FATAL(ps_shard_serve(f->sh, &in, &shard0, NULL, &reply),
                          HC_OK);
    CU_ASSERT_EQUAL_FATAL(hc_wire_decode(nng_msg_body(reply),
                                         nng_msg_len(reply), CLUSTER, &out),
                          HC_OK);
    CU_ASSERT_EQUAL_FATAL(out.n_tensors, 3);
    for (size_t k = 0; k < out.n_tensors; k++)
        memcpy(got + out.env->tensors[k]->key * BN_C, out.data[k],
               BN_C * sizeof(float));
    hc_wire_msg_free(&out);
    hc_wire_msg_free(&in);
    nng_msg_free(req);
    nng_msg_free(reply);
}

/* The moments of samples [lo, hi) of x (BN_B, BN_HW, BN_C) per channel, in
 * double, as the worker's bn_stats: mean, biased variance. */
static void bn_moments(const float *x, int lo, int hi, double *mean,
                       double *var)
{
    for (int c = 0; c < BN_C; c++) {
        double s = 0, q = 0;
        int n = (hi - lo) * BN_HW;

        for (int i = lo * BN_HW; i < hi * BN_HW; i++)
            s += x[i * BN_C + c];
        mean[c] = s / n;
        for (int i = lo * BN_HW; i < hi * BN_HW; i++)
            q += (x[i * BN_C + c] - mean[c]) * (x[i * BN_C + c] - mean[c]);
        var[c] = q / n;
    }
}

/* One sync step of two workers × 32: the moving statistics move once, by
 * the mean and biased variance of all 64 samples (computed here from the
 * data), outside the optimizer; gamma by SGD on the mean gradient. Then
 * an async push moves them by its own batch's. */
static void test_batchnorm_moments(void)
{
    struct bn_fx f;
    float init[3 * BN_C], push[2][3 * BN_C], got[3 * BN_C];
    float *x = malloc(sizeof(float) * BN_B * BN_HW * BN_C);
    double mean[BN_C], var[BN_C], m1[BN_C], v1[BN_C];
    uint64_t seed = 7;
    int bad = 0;

    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    for (int i = 0; i < BN_B * BN_HW * BN_C; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        /* channel c: mean about c, spread growing with the sample */
        x[i] = (float)(i % BN_C) +
               (float)((seed >> 40) % 1000) / 250.0f * (1 + i / 500);
    }
    for (int c = 0; c < BN_C; c++) {
        init[c] = 1.0f;                     /* gamma */
        init[BN_C + c] = 0.5f * c;          /* moving_mean */
        init[2 * BN_C + c] = 1.0f + c;      /* moving_variance */
    }
    bn_open(&f, init);
    for (int w = 0; w < 2; w++) {
        bn_moments(x, 32 * w, 32 * w + 32, m1, v1);
        for (int c = 0; c < BN_C; c++) {
            push[w][c] = 0.25f * (float)(w + c);
            push[w][BN_C + c] = (float)m1[c];
            push[w][2 * BN_C + c] = (float)(v1[c] + m1[c] * m1[c]);
        }
        bn_push(&f, push[w], 32, 1);
    }
    CU_ASSERT_EQUAL(ps_shard_apply_step(f.sh, BN_B, NULL, 0), HC_OK);
    bn_pull(&f, got);
    bn_moments(x, 0, BN_B, mean, var);
    for (int c = 0; c < BN_C; c++) {
        double g = (push[0][c] + push[1][c]) / 2.0;
        double want_m = BN_MOM * init[BN_C + c] + (1 - BN_MOM) * mean[c];
        double want_v = BN_MOM * init[2 * BN_C + c] + (1 - BN_MOM) * var[c];

        bad += fabs(got[c] - (init[c] - LR * g)) > 1e-6;
        bad += fabs(got[BN_C + c] - want_m) > 1e-6 * fabs(want_m) + 1e-7;
        bad += fabs(got[2 * BN_C + c] - want_v) > 1e-5 * fabs(want_v);
        printf("\n    channel %d: moving_mean %.7g (64 samples' %.7g), "
               "moving_variance %.7g (%.7g)", c,
               (double)got[BN_C + c], want_m, (double)got[2 * BN_C + c],
               want_v);
    }
    CU_ASSERT_EQUAL(bad, 0);

    /* async: a push moves them by its own batch's moments at once */
    memcpy(init, got, sizeof got);
    bn_moments(x, 10, 30, m1, v1);
    for (int c = 0; c < BN_C; c++) {
        push[0][BN_C + c] = (float)m1[c];
        push[0][2 * BN_C + c] = (float)(v1[c] + m1[c] * m1[c]);
    }
    bn_push(&f, push[0], 20, 0);
    bn_pull(&f, got);
    for (int c = 0; c < BN_C; c++) {
        double want_v = BN_MOM * init[2 * BN_C + c] + (1 - BN_MOM) * v1[c];

        bad += fabs(got[BN_C + c] - (BN_MOM * init[BN_C + c] +
                                     (1 - BN_MOM) * m1[c])) > 1e-5;
        bad += fabs(got[2 * BN_C + c] - want_v) > 1e-5 * fabs(want_v);
    }
    CU_ASSERT_EQUAL(bad, 0);
    ps_shard_close(f.sh);
    hc_layout_free(&f.lay);
    hp_rmtree(f.dir);
    free(x);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("shard", NULL, NULL);

    CU_add_test(s, "create, repeat, pull, async push", test_create_pull_push);
    CU_add_test(s, "a push with rows: one step, rows answered after the "
                   "values; an id past the table refused; rows alone",
                test_step_rows);
    CU_add_test(s, "sync step: sample-weighted sum, kept on reopen",
                test_sync_sum);
    CU_add_test(s, "sync step: a gradient lent from its message = summed",
                test_sync_lent);
    CU_add_test(s, "refused: before create, bad range, bad length",
                test_refused);
    CU_add_test(s, "batch norm: a sync step's moving statistics = the 64 "
                "samples' moments, async a push's own", test_batchnorm_moments);
}
