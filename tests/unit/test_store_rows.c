/*
 * test_store_rows.c — row-sparse tables in ps/store (store_rows.c) on real
 * LMDB environments: a row never written reads as its initial value,
 * computed here from hc_init_row's documented formula and the same on
 * every shard and after a reopen; SGD, Adagrad and Ftrl applies against
 * ps_optim_apply run in memory, the untouched rows unmoved; lazy Adam's
 * per-row update count (a row touched once at step 3 moves as Adam's first
 * step); ids up to 2^40 − 1; an apply cut short inside its transaction
 * (a full map) leaves no row, count or step; records and row counts
 * beside the rows; the refusals and a create that disagrees; a row's
 * bytes changed through raw LMDB, found by the read and by verify; rows
 * over many leaf pages, pushed new and stored mixed and read in dense and
 * sparse batches, equal to each row read alone and to memory; the rows'
 * key comparator ordering exactly as memcmp.
 */
#include "cu.h"

#include <lmdb.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "model.h"
#include "ps/optimizer.h"
#include "ps/record.h"
#include "ps/store.h"
#include "rng.h"

#define SIG 0x7777000055550000ull
#define SEED 1234ull
#define DIM 8
#define VAR 1                       /* variable 0 is a dense bias */
#define BIG (1ull << 40)

static struct hc_layout layout;     /* one block of variable 0, 4 floats,
                                       on shard 0; shard 1 holds none */
static struct hc_block block0 = {0, 0, 4, 0, 0, 0, 0};
static uint64_t shard_elems[2] = {4, 0};
static uint32_t shard_blocks[2] = {1, 0};

static const struct ps_table TABLE = {
    VAR, DIM, BIG, {HC_INIT_RANDOM_UNIFORM, {-0.05f, 0.05f, 0, 0}}};

static void make_layout(int n_shards)
{
    layout = (struct hc_layout){n_shards, 4086, 1, &block0, 4, shard_elems,
                                shard_blocks};
}

static struct ps_store *open_table(const char *dir, uint32_t shard,
                                   int n_shards,
                                   const struct hc_optim_conf *c,
                                   const struct ps_store_opts *o)
{
    struct ps_store *s = NULL;
    struct ps_store_def d;

    make_layout(n_shards);
    d = (struct ps_store_def){.signature = SIG, .layout = &layout,
                              .shard = shard, .optim = c, .tables = &TABLE,
                              .n_tables = 1, .seed = SEED};
    if (ps_store_open(dir, o, &s) != HC_OK) {
        printf("\n  open: %s\n", hc_err_msg());
        return NULL;
    }
    if (ps_store_init(s, &d, NULL) != HC_OK) {
        printf("\n  init: %s\n", hc_err_msg());
        ps_store_close(s);
        return NULL;
    }
    return s;
}

/* hc_init_row's RandomUniform, from its documented formula. */
static void want_row(uint64_t row, float *p)
{
    uint64_t st = hc_mix64(hc_mix64(SEED ^ hc_mix64(VAR + HC_GOLDEN_GAMMA)) ^
                           hc_mix64(row));

    for (int j = 0; j < DIM; j++) {
        double u = (double)(hc_splitmix64(&st) >> 11) * 0x1.0p-53;

        p[j] = (float)((double)-0.05f + ((double)0.05f - (double)-0.05f) * u);
    }
}

static struct hc_optim_conf optim(enum hc_optim type)
{
    struct hc_optim_conf c;

    hc_optim_defaults(type, &c);
    c.lr = type == HC_OPT_SGD ? 0.5f : 0.01f;
    return c;
}

static void test_initial(void)
{
    char d0[256], d1[256];
    struct hc_optim_conf c = optim(HC_OPT_SGD);
    struct ps_store *a, *b;
    uint64_t ids[] = {0, 7, 5, 7, BIG - 1}, n_rows = 99, step = 9;
    float got[5 * DIM], one[DIM], want[DIM];
    int bad = 0;

    hp_tmpdir(d0, sizeof d0);
    hp_tmpdir(d1, sizeof d1);
    a = open_table(d0, 0, 2, &c, NULL);
    b = open_table(d1, 1, 2, &c, NULL);
    CU_ASSERT_FATAL(a && b);
    CU_ASSERT_EQUAL(ps_store_rows_read(a, VAR, ids, 5, got, &step), HC_OK);
    CU_ASSERT_EQUAL(step, 0);
    for (int i = 0; i < 5; i++) {
        want_row(ids[i], want);
        for (int j = 0; j < DIM; j++)
            bad += got[i * DIM + j] != want[j] || fabsf(want[j]) > 0.05f;
    }
    /* The same on the other shard, a row alone, after a reopen. */
    CU_ASSERT_EQUAL(ps_store_rows_read(b, VAR, &ids[1], 1, one, NULL), HC_OK);
    bad += memcmp(one, got + DIM, sizeof one) != 0;
    ps_store_close(a);
    a = open_table(d0, 0, 2, &c, NULL);
    CU_ASSERT_FATAL(a != NULL);
    CU_ASSERT_EQUAL(ps_store_rows_read(a, VAR, &ids[4], 1, one, NULL), HC_OK);
    bad += memcmp(one, got + 4 * DIM, sizeof one) != 0;
    CU_ASSERT_EQUAL(bad, 0);
    /* Rows differ from one another; nothing was stored by reading. */
    CU_ASSERT(memcmp(got, got + DIM, DIM * sizeof *got) != 0);
    CU_ASSERT_EQUAL(ps_store_table_rows(a, VAR, &n_rows), HC_OK);
    CU_ASSERT_EQUAL(n_rows, 0);
    ps_store_close(a);
    ps_store_close(b);
    hp_rmtree(d0);
    hp_rmtree(d1);
}

/* ps_store_rows_init_put: the values as given, each slot at the
 * optimizer's initial value (Adagrad's 0.1), the update count 0; the same
 * rows again replace themselves, counted once; an id out of order or not
 * below input_dim refused, nothing written. */
static void test_init_put(void)
{
    char d[256];
    struct hc_optim_conf c = optim(HC_OPT_ADAGRAD);
    struct ps_store *s;
    uint64_t ids[3] = {3, 9, BIG - 1}, bad_ids[2] = {9, 3}, big = BIG;
    uint64_t *got_ids = NULL, *ups = NULL, n_rows = 0;
    float vals[3 * DIM], *whole = NULL;
    size_t n = 0;
    int bad = 0;

    for (int i = 0; i < 3 * DIM; i++)
        vals[i] = 0.25f * (float)i - 1.0f;
    hp_tmpdir(d, sizeof d);
    s = open_table(d, 0, 1, &c, NULL);
    CU_ASSERT_FATAL(s != NULL);
    CU_ASSERT_EQUAL(ps_store_rows_init_put(s, VAR, ids, vals, 3), HC_OK);
    CU_ASSERT_EQUAL(ps_store_rows_init_put(s, VAR, ids, vals, 3), HC_OK);
    CU_ASSERT_EQUAL(ps_store_rows_init_put(s, VAR, bad_ids, vals, 2),
                    HC_ERR_INVAL);
    CU_ASSERT_EQUAL(ps_store_rows_init_put(s, VAR, &big, vals, 1),
                    HC_ERR_INVAL);
    CU_ASSERT_EQUAL(ps_store_rows_init_put(s, VAR + 1, ids, vals, 3),
                    HC_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(ps_store_table_rows(s, VAR, &n_rows), HC_OK);
    CU_ASSERT_EQUAL(n_rows, 3);
    CU_ASSERT_EQUAL_FATAL(ps_store_rows_list(s, VAR, &got_ids, &whole, &ups,
                                             &n), HC_OK);
    CU_ASSERT_EQUAL_FATAL(n, 3);
    for (size_t i = 0; i < n; i++) {
        bad += got_ids[i] != ids[i] || ups[i] != 0;
        bad += memcmp(whole + i * 2 * DIM, vals + i * DIM,
                      DIM * sizeof *vals) != 0;
        for (int j = 0; j < DIM; j++)
            bad += whole[i * 2 * DIM + DIM + j] != 0.1f;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    free(got_ids);
    free(whole);
    free(ups);
    ps_store_close(s);
    hp_rmtree(d);
}

/* Apply `steps` pushes of rows to a fresh store with optimizer c and
 * compare every touched and untouched row, with its slots and update
 * count, against ps_optim_apply run here on the initial values. Push k
 * touches ids[k][0 .. n[k]). */
static int run_against_memory(const struct hc_optim_conf *c)
{
    static const uint64_t p0[] = {3, 1000, BIG - 5};
    static const uint64_t p1[] = {3, BIG - 5};
    static const uint64_t p2[] = {2, 3, 77};
    const uint64_t *ids[] = {p0, p1, p2};
    const size_t n[] = {3, 2, 3};
    static const uint64_t all[] = {2, 3, 77, 1000, 5000, BIG - 5};
    int ns = ps_optim_slots(c), bad = 0;
    float mem[6][4 * DIM], got[4 * DIM];
    uint64_t upd[6] = {0}, stepc = 0, n_rows = 0;
    struct ps_store *s;
    char dir[256];

    hp_tmpdir(dir, sizeof dir);
    if (!(s = open_table(dir, 0, 1, c, NULL)))
        return 1;
    for (int r = 0; r < 6; r++) {
        want_row(all[r], mem[r]);
        for (int k = 0; k < ns; k++)
            for (int j = 0; j < DIM; j++)
                mem[r][(1 + k) * DIM + j] = ps_optim_slot_init(c, k);
    }
    for (int k = 0; k < 3; k++) {
        float g[3 * DIM];
        struct ps_rows ru = {VAR, n[k], ids[k], g, 0.5f};
        struct ps_record rec;

        for (size_t i = 0; i < n[k] * DIM; i++)
            g[i] = 0.1f * (float)((i * 7 + (size_t)k) % 11) - 0.4f;
        ps_record_begin(&rec, 2, PS_REQ_PUSH, 0xABC, 10 + (uint64_t)k);
        bad += ps_store_apply_rows(s, c, NULL, 0, &ru, 1, &rec, 1,
                                   &stepc) != HC_OK;
        bad += stepc != (uint64_t)k + 1;
        for (size_t i = 0; i < n[k]; i++) {
            int r = 0;
            float *sl[PS_OPTIM_MAX_SLOTS] = {0};
            struct ps_optim_step at;

            while (all[r] != ids[k][i])
                r++;
            for (int q = 0; q < ns; q++)
                sl[q] = mem[r] + (1 + q) * DIM;
            at = (struct ps_optim_step){upd[r]++, 0.5f, 0};
            ps_optim_apply(c, &at, DIM, mem[r], g + i * DIM,
                           (const float *const *)sl, mem[r], sl);
        }
    }
    for (int r = 0; r < 6; r++) {
        uint64_t u = 99;
        int stored = -1;

        bad += ps_store_row_get(s, VAR, all[r], got, &u, &stored) != HC_OK;
        bad += u != upd[r] || stored != (upd[r] > 0);
        for (int j = 0; j < (1 + ns) * DIM; j++)
            if (got[j] != mem[r][j]) {
                printf("\n  row %llu element %d: %.9g, memory %.9g",
                       (unsigned long long)all[r], j, (double)got[j],
                       (double)mem[r][j]);
                bad++;
                break;
            }
    }
    bad += ps_store_table_rows(s, VAR, &n_rows) != HC_OK || n_rows != 5;
    bad += ps_store_step(s) != 3;
    bad += ps_store_verify(s) != HC_OK;
    {
        struct ps_record rec;

        bad += ps_store_record_get(s, 2, 0, &rec) != HC_OK ||
               rec.request_id != 12 || rec.version != 3;
    }
    ps_store_close(s);
    hp_rmtree(dir);
    return bad;
}

static void test_sgd(void)
{
    struct hc_optim_conf c = optim(HC_OPT_SGD);

    CU_ASSERT_EQUAL(run_against_memory(&c), 0);
}

static void test_adagrad(void)
{
    struct hc_optim_conf c = optim(HC_OPT_ADAGRAD);

    CU_ASSERT(c.init_accum > 0.09f);   /* Keras's 0.1 */
    CU_ASSERT_EQUAL(run_against_memory(&c), 0);
}

static void test_ftrl(void)
{
    struct hc_optim_conf c = optim(HC_OPT_FTRL);

    c.l1 = 0.001f;
    CU_ASSERT_EQUAL(run_against_memory(&c), 0);
}

static void test_lazy_adam(void)
{
    struct hc_optim_conf c = optim(HC_OPT_ADAM);
    char dir[256];
    struct ps_store *s;
    uint64_t hot = 9, cold = BIG - 1, u = 0;
    float g[DIM], got[4 * DIM], want[4 * DIM];
    float *sl[PS_OPTIM_MAX_SLOTS] = {want + DIM, want + 2 * DIM};
    int stored = 0, bad = 0;

    CU_ASSERT_EQUAL(run_against_memory(&c), 0);
    hp_tmpdir(dir, sizeof dir);
    s = open_table(dir, 0, 1, &c, NULL);
    CU_ASSERT_FATAL(s != NULL);
    for (int j = 0; j < DIM; j++)
        g[j] = 0.3f - 0.1f * (float)j;
    for (int k = 0; k < 3; k++) {
        struct ps_rows r[1] = {{VAR, 1, &hot, g, 1.0f}};

        CU_ASSERT_EQUAL(ps_store_apply_rows(s, &c, NULL, 0, r, 1, NULL, 0,
                                            NULL), HC_OK);
    }
    {
        uint64_t both[] = {hot, cold};
        float g2[2 * DIM];
        struct ps_rows r[1] = {{VAR, 2, both, g2, 1.0f}};

        memcpy(g2, g, sizeof g);
        memcpy(g2 + DIM, g, sizeof g);
        CU_ASSERT_EQUAL(ps_store_apply_rows(s, &c, NULL, 0, r, 1, NULL, 0,
                                            NULL), HC_OK);
    }
    CU_ASSERT_EQUAL(ps_store_step(s), 4);
    /* The cold row: Adam's first step (t = 1) although the store is at 4. */
    CU_ASSERT_EQUAL(ps_store_row_get(s, VAR, cold, got, &u, &stored), HC_OK);
    CU_ASSERT_EQUAL(u, 1);
    want_row(cold, want);
    memset(want + DIM, 0, 2 * DIM * sizeof *want);
    ps_optim_apply(&c, &(struct ps_optim_step){0, 1.0f, 0}, DIM, want, g,
                   (const float *const *)sl, want, sl);
    bad += memcmp(got, want, 3 * DIM * sizeof *got) != 0;
    /* ... and differs from Adam at t = 4 (dense Adam's bias correction). */
    want_row(cold, want);
    memset(want + DIM, 0, 2 * DIM * sizeof *want);
    ps_optim_apply(&c, &(struct ps_optim_step){3, 1.0f, 0}, DIM, want, g,
                   (const float *const *)sl, want, sl);
    bad += memcmp(got, want, DIM * sizeof *got) == 0;
    CU_ASSERT_EQUAL(ps_store_row_get(s, VAR, hot, got, &u, &stored), HC_OK);
    CU_ASSERT_EQUAL(u, 4);
    CU_ASSERT_EQUAL(bad, 0);
    ps_store_close(s);
    hp_rmtree(dir);
}

/* A full map inside the transaction: no row, count, record or step. */
static void test_abort(void)
{
    enum { N = 40000 };
    struct hc_optim_conf c = optim(HC_OPT_ADAM);
    struct ps_store_opts o = {.map_size = 2u << 20, .map_max = 2u << 20};
    uint64_t *ids = malloc(N * sizeof *ids), n_rows = 9, u = 9;
    float *g = calloc((size_t)N * DIM, sizeof *g), row[3 * DIM], init[DIM];
    struct ps_record rec;
    struct ps_store *s;
    char dir[256];
    int stored = 1;

    hp_tmpdir(dir, sizeof dir);
    s = open_table(dir, 0, 1, &c, &o);
    CU_ASSERT_FATAL(s != NULL);
    for (size_t i = 0; i < N; i++) {
        ids[i] = i * (BIG / N);
        g[i * DIM] = 1.0f;
    }
    ps_record_begin(&rec, 1, PS_REQ_PUSH, 0x1, 5);
    {
        struct ps_rows r = {VAR, N, ids, g, 1.0f};

        CU_ASSERT_EQUAL(ps_store_apply_rows(s, &c, NULL, 0, &r, 1, &rec, 1,
                                            NULL), HC_ERR_MAPFULL);
    }
    CU_ASSERT_EQUAL(ps_store_step(s), 0);
    CU_ASSERT_EQUAL(ps_store_table_rows(s, VAR, &n_rows), HC_OK);
    CU_ASSERT_EQUAL(n_rows, 0);
    CU_ASSERT_EQUAL(ps_store_record_get(s, 1, 0, &rec), HC_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(ps_store_row_get(s, VAR, ids[0], row, &u, &stored),
                    HC_OK);
    want_row(ids[0], init);
    CU_ASSERT_EQUAL(stored, 0);
    CU_ASSERT_EQUAL(u, 0);
    CU_ASSERT_EQUAL(memcmp(row, init, sizeof init), 0);
    ps_store_close(s);
    /* With room to grow, the same apply goes in whole. */
    o.map_max = 256u << 20;
    s = open_table(dir, 0, 1, &c, &o);
    CU_ASSERT_FATAL(s != NULL);
    {
        struct ps_rows r = {VAR, N, ids, g, 1.0f};

        CU_ASSERT_EQUAL(ps_store_apply_rows(s, &c, NULL, 0, &r, 1, NULL, 0,
                                            NULL), HC_OK);
    }
    CU_ASSERT_EQUAL(ps_store_table_rows(s, VAR, &n_rows), HC_OK);
    CU_ASSERT_EQUAL(n_rows, N);
    ps_store_close(s);
    hp_rmtree(dir);
    free(ids);
    free(g);
}

static void test_refusals(void)
{
    struct hc_optim_conf c = optim(HC_OPT_SGD);
    uint64_t unsorted[] = {5, 3}, big[] = {1, BIG}, ok[] = {1, 2};
    float g[2 * DIM] = {0}, out[2 * DIM];
    struct ps_store *s, *t;
    char dir[256];

    hp_tmpdir(dir, sizeof dir);
    s = open_table(dir, 0, 1, &c, NULL);
    CU_ASSERT_FATAL(s != NULL);
    {
        struct ps_rows r[] = {{VAR, 2, unsorted, g, 1}};

        CU_ASSERT_EQUAL(ps_store_apply_rows(s, &c, NULL, 0, r, 1, NULL, 0,
                                            NULL), HC_ERR_INVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "not ascending"));
    }
    {
        struct ps_rows r[] = {{VAR, 2, big, g, 1}};

        CU_ASSERT_EQUAL(ps_store_apply_rows(s, &c, NULL, 0, r, 1, NULL, 0,
                                            NULL), HC_ERR_INVAL);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "1099511627776"));
        CU_ASSERT_EQUAL(ps_store_rows_read(s, VAR, big, 2, out, NULL),
                        HC_ERR_INVAL);
    }
    {
        struct ps_rows r[] = {{0, 2, ok, g, 1}};

        CU_ASSERT_EQUAL(ps_store_apply_rows(s, &c, NULL, 0, r, 1, NULL, 0,
                                            NULL), HC_ERR_NOTFOUND);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "not a row-sparse"));
        CU_ASSERT_EQUAL(ps_store_rows_read(s, 0, ok, 2, out, NULL),
                        HC_ERR_NOTFOUND);
    }
    CU_ASSERT_EQUAL(ps_store_step(s), 0);
    ps_store_close(s);
    /* A create of other tables on this store is refused. */
    CU_ASSERT_EQUAL_FATAL(ps_store_open(dir, NULL, &t), HC_OK);
    {
        struct ps_table other = TABLE;
        struct ps_store_def d;

        other.dim = DIM + 1;
        make_layout(1);
        d = (struct ps_store_def){.signature = SIG, .layout = &layout,
                                  .optim = &c, .tables = &other,
                                  .n_tables = 1, .seed = SEED};
        CU_ASSERT_EQUAL(ps_store_init(t, &d, NULL), HC_ERR_MISMATCH);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "fresh --data-dir"));
        other = TABLE;
        other.input_dim = 0;
        CU_ASSERT_EQUAL(ps_store_init(t, &d, NULL), HC_ERR_INVAL);
    }
    ps_store_close(t);
    hp_rmtree(dir);
}

/* A row's bytes changed through raw LMDB: the read and verify say so. */
static void test_damage(void)
{
    struct hc_optim_conf c = optim(HC_OPT_SGD);
    uint64_t id = 77, n_rows = 0;
    float g[DIM] = {1, 2, 3, 4}, out[DIM];
    struct ps_rows r = {VAR, 1, &id, g, 1.0f};
    struct ps_store *s;
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_cursor *cur = NULL;
    MDB_dbi dbi;
    MDB_val k, v;
    char dir[256];
    unsigned char buf[256];

    hp_tmpdir(dir, sizeof dir);
    s = open_table(dir, 0, 1, &c, NULL);
    CU_ASSERT_FATAL(s != NULL);
    CU_ASSERT_EQUAL(ps_store_apply_rows(s, &c, NULL, 0, &r, 1, NULL, 0,
                                        NULL), HC_OK);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);
    CU_ASSERT_FATAL(mdb_env_create(&env) == 0 &&
                    mdb_env_set_maxdbs(env, 8) == 0 &&
                    mdb_env_open(env, dir, 0, 0644) == 0 &&
                    mdb_txn_begin(env, NULL, 0, &txn) == 0 &&
                    mdb_dbi_open(txn, "rows", 0, &dbi) == 0 &&
                    mdb_cursor_open(txn, dbi, &cur) == 0 &&
                    mdb_cursor_get(cur, &k, &v, MDB_FIRST) == 0 &&
                    v.mv_size <= sizeof buf);
    memcpy(buf, v.mv_data, v.mv_size);
    buf[sizeof(struct ps_row_hdr) + 1] ^= 0x40;     /* a parameter's bits */
    v.mv_data = buf;
    CU_ASSERT_EQUAL(mdb_cursor_put(cur, &k, &v, MDB_CURRENT), 0);
    mdb_cursor_close(cur);
    CU_ASSERT_EQUAL(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    s = open_table(dir, 0, 1, &c, NULL);
    CU_ASSERT_FATAL(s != NULL);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_ERR_CRC);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "checksum"));
    CU_ASSERT_EQUAL(ps_store_rows_read(s, VAR, &id, 1, out, NULL), HC_ERR_CRC);
    CU_ASSERT_EQUAL(ps_store_table_rows(s, VAR, &n_rows), HC_OK);
    CU_ASSERT_EQUAL(n_rows, 1);
    ps_store_close(s);
    hp_rmtree(dir);
}

/* Rows ids[0 .. n) of s1 and s2: the same bits, each updated once and
 * stored in s1; the number that are not. */
static int once_alike(struct ps_store *s1, struct ps_store *s2,
                      const uint64_t *ids, int n)
{
    float x[3 * DIM], y[3 * DIM];
    int bad = 0;

    for (int i = 0; i < n; i++) {
        uint64_t u1 = 0, u2 = 0;
        int st1 = 0, st2 = 0;

        bad += ps_store_row_get(s1, VAR, ids[i], x, &u1, &st1) != HC_OK;
        bad += ps_store_row_get(s2, VAR, ids[i], y, &u2, &st2) != HC_OK;
        bad += memcmp(x, y, sizeof x) != 0 || u1 != 1 || u2 != 1 || !st1;
    }
    return bad;
}

/* A synchronous step's pushes of one table in one apply: summed by row
 * (Σ grad·scale, in push order) before one optimizer step per row — the
 * same bits as one push of the sums, each row counted once. */
static void test_summed(void)
{
    struct hc_optim_conf c = optim(HC_OPT_ADAM);
    static const uint64_t a_ids[] = {1, 5, 9}, b_ids[] = {5, 9, 12};
    static const uint64_t all[] = {1, 5, 9, 12};
    float ga[3 * DIM], gb[3 * DIM], sum[4 * DIM] = {0};
    struct ps_store *s1, *s2;
    char d1[256], d2[256];
    int bad = 0;

    for (int i = 0; i < 3 * DIM; i++) {
        ga[i] = 0.1f * (float)(i % 7) - 0.2f;
        gb[i] = 0.3f - 0.05f * (float)(i % 5);
    }
    /* The sums as the store makes them: 0 + a·s, then + b·s. */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < DIM; j++) {
            sum[i * DIM + j] += ga[i * DIM + j] * 0.25f;
            sum[(i + 1) * DIM + j] += gb[i * DIM + j] * 0.25f;
        }
    hp_tmpdir(d1, sizeof d1);
    hp_tmpdir(d2, sizeof d2);
    s1 = open_table(d1, 0, 1, &c, NULL);
    s2 = open_table(d2, 0, 1, &c, NULL);
    CU_ASSERT_FATAL(s1 && s2);
    {
        struct ps_rows two[] = {{VAR, 3, a_ids, ga, 0.25f},
                                {VAR, 3, b_ids, gb, 0.25f}};
        struct ps_rows one = {VAR, 4, all, sum, 1.0f};

        CU_ASSERT_EQUAL(ps_store_apply_rows(s1, &c, NULL, 0, two, 2, NULL, 0,
                                            NULL), HC_OK);
        CU_ASSERT_EQUAL(ps_store_apply_rows(s2, &c, NULL, 0, &one, 1, NULL,
                                            0, NULL), HC_OK);
    }
    bad += once_alike(s1, s2, all, 4);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ps_store_step(s1), 1);
    CU_ASSERT_EQUAL(ps_store_verify(s1), HC_OK);
    ps_store_close(s1);
    ps_store_close(s2);
    hp_rmtree(d1);
    hp_rmtree(d2);
}

/* Sync's held pushes (ps_store_rows_hold): two workers' rows held with
 * their records, surviving a reopen, then applied by the next counted
 * step summed by row and scaled by 1 / (2 + 2 samples) — the bits of the
 * same two updates at scale 1/4 in one apply; gone after it (the next
 * step does not apply them again). ps_store_rows_list gives the stored
 * rows in id order, as ps_store_row_get reads them. */
static void test_held(void)
{
    struct hc_optim_conf c = optim(HC_OPT_ADAM);
    static const uint64_t a_ids[] = {1, 5, 9}, b_ids[] = {5, 9, 12};
    static const uint64_t all[] = {1, 5, 9, 12};
    float ga[3 * DIM], gb[3 * DIM], x[3 * DIM], *rows = NULL;
    struct ps_rows a = {VAR, 3, a_ids, ga, 7.0f}, b = {VAR, 3, b_ids, gb, 7.0f};
    struct ps_record r0, r1, got;
    struct ps_store *s1, *s2;
    uint64_t step = 9, *ids = NULL;
    size_t n = 0;
    char d1[256], d2[256];
    int bad = 0;

    for (int i = 0; i < 3 * DIM; i++) {
        ga[i] = 0.1f * (float)(i % 7) - 0.2f;
        gb[i] = 0.3f - 0.05f * (float)(i % 5);
    }
    ps_record_begin(&r0, 0, PS_REQ_PUSH, 11, 100);
    ps_record_begin(&r1, 1, PS_REQ_PUSH, 12, 200);
    hp_tmpdir(d1, sizeof d1);
    hp_tmpdir(d2, sizeof d2);
    s1 = open_table(d1, 0, 1, &c, NULL);
    s2 = open_table(d2, 0, 1, &c, NULL);
    CU_ASSERT_FATAL(s1 && s2);
    /* Held in the order worker 1, worker 0: applied by worker. */
    CU_ASSERT_EQUAL(ps_store_rows_hold(s1, &b, 1, 2, &r1, &step), HC_OK);
    CU_ASSERT_EQUAL(step, 0);
    CU_ASSERT_EQUAL(ps_store_rows_hold(s1, &a, 1, 2, &r0, NULL), HC_OK);
    CU_ASSERT_EQUAL(ps_store_rows_hold(s1, &a, 1, 0, &r0, NULL), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(ps_store_step(s1), 0);
    CU_ASSERT_EQUAL(ps_store_record_get(s1, 1, 0, &got), HC_OK);
    CU_ASSERT_EQUAL(got.request_id, 200);
    ps_store_close(s1);
    s1 = open_table(d1, 0, 1, &c, NULL);    /* held across a restart */
    CU_ASSERT_FATAL(s1 != NULL);
    CU_ASSERT_EQUAL(ps_store_rows_held(s1, &n), HC_OK);
    CU_ASSERT_EQUAL(n, 2);
    CU_ASSERT_EQUAL(ps_store_apply(s1, &c, NULL, 0, NULL, 0, NULL), HC_OK);
    CU_ASSERT_EQUAL(ps_store_step(s1), 1);
    CU_ASSERT_EQUAL(ps_store_rows_held(s1, &n), HC_OK);
    CU_ASSERT_EQUAL(n, 0);
    {
        struct ps_rows two[] = {{VAR, 3, a_ids, ga, 0.25f},
                                {VAR, 3, b_ids, gb, 0.25f}};

        CU_ASSERT_EQUAL(ps_store_apply_rows(s2, &c, NULL, 0, two, 2, NULL, 0,
                                            NULL), HC_OK);
    }
    CU_ASSERT_EQUAL(ps_store_apply(s1, &c, NULL, 0, NULL, 0, NULL), HC_OK);
    CU_ASSERT_EQUAL(ps_store_step(s1), 1);  /* nothing held: no step */
    bad += once_alike(s1, s2, all, 4);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ps_store_rows_list(s1, VAR, &ids, &rows, NULL, &n), HC_OK);
    CU_ASSERT_EQUAL_FATAL(n, 4);
    for (size_t i = 0; i < n; i++) {
        uint64_t u;
        int st;

        bad += ids[i] != all[i];
        bad += ps_store_row_get(s1, VAR, all[i], x, &u, &st) != HC_OK;
        bad += memcmp(rows + i * DIM, x, DIM * sizeof *x) != 0;
    }
    CU_ASSERT_EQUAL(bad, 0);
    free(ids);
    free(rows);
    CU_ASSERT_EQUAL(ps_store_rows_list(s1, 7, &ids, &rows, NULL, &n),
                    HC_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(ps_store_verify(s1), HC_OK);
    ps_store_close(s1);
    ps_store_close(s2);
    hp_rmtree(d1);
    hp_rmtree(d2);
}

/* Rows over many leaf pages: LEAVES_N rows stored (every third id), then a
 * push mixing them with new rows (every second id: a third stored, two
 * thirds new), each row against the optimizer run here; then reads of
 * ascending ids — a dense run (neighbours on one leaf), a sparse run (a
 * leaf each), both mixed with rows never stored, and their alternation —
 * each batch equal, row by row, to the rows read alone and to memory. */
#define LEAVES_N 3000
#define LEAVES_MAX (3 * LEAVES_N)

static int leaves_push(struct ps_store *s, const struct hc_optim_conf *c,
                       const uint64_t *ids, size_t n, int k, float *mem,
                       uint64_t *upd)
{
    int ns = ps_optim_slots(c), w = (1 + ns) * DIM, bad = 0;
    float *g = malloc(n * DIM * sizeof *g);
    struct ps_rows ru = {VAR, n, ids, g, 0.5f};

    if (!g)
        return 1;
    for (size_t i = 0; i < n * DIM; i++)
        g[i] = 0.05f * (float)((i * 13 + (size_t)k) % 17) - 0.4f;
    bad += ps_store_apply_rows(s, c, NULL, 0, &ru, 1, NULL, 0, NULL) != HC_OK;
    for (size_t i = 0; i < n; i++) {
        float *row = mem + ids[i] * (size_t)w, *sl[PS_OPTIM_MAX_SLOTS] = {0};
        struct ps_optim_step at = {upd[ids[i]]++, 0.5f, 0};

        for (int q = 0; q < ns; q++)
            sl[q] = row + (1 + q) * DIM;
        ps_optim_apply(c, &at, DIM, row, g + i * DIM,
                       (const float *const *)sl, row, sl);
    }
    free(g);
    return bad;
}

/* Read ids[0 .. n) as one batch; compare with each row read alone and
 * with memory (rows never stored: their initial value). */
static int leaves_read(struct ps_store *s, const struct hc_optim_conf *c,
                       const uint64_t *ids, size_t n, const float *mem,
                       const uint64_t *upd)
{
    int ns = ps_optim_slots(c), w = (1 + ns) * DIM, bad = 0;
    float *got = malloc(n * DIM * sizeof *got), one[4 * DIM], want[DIM];

    if (!got)
        return 1;
    bad += ps_store_rows_read(s, VAR, ids, n, got, NULL) != HC_OK;
    for (size_t i = 0; i < n && bad == 0; i++) {
        uint64_t u = 99;
        int stored = -1;
        const float *m = ids[i] < LEAVES_MAX && upd[ids[i]]
                             ? mem + ids[i] * (size_t)w : want;

        want_row(ids[i], want);
        bad += ps_store_row_get(s, VAR, ids[i], one, &u, &stored) != HC_OK;
        bad += stored != (m != want) ||
               u != (ids[i] < LEAVES_MAX ? upd[ids[i]] : 0);
        if (memcmp(got + i * DIM, one, DIM * sizeof *one) ||
            memcmp(one, m, DIM * sizeof *one)) {
            printf("\n  row %llu (position %zu): batch %.9g, alone %.9g, "
                   "memory %.9g", (unsigned long long)ids[i], i,
                   (double)got[i * DIM], (double)one[0], (double)m[0]);
            bad++;
        }
    }
    free(got);
    return bad;
}

static void test_many_leaves(void)
{
    struct hc_optim_conf c = optim(HC_OPT_ADAGRAD);
    int ns = ps_optim_slots(&c), w = (1 + ns) * DIM, bad = 0;
    float *mem = malloc((size_t)LEAVES_MAX * w * sizeof *mem);
    uint64_t *upd = calloc(LEAVES_MAX, sizeof *upd);
    uint64_t *ids = malloc(LEAVES_MAX * sizeof *ids), n_rows = 0;
    struct ps_store *s;
    size_t n = 0;
    char dir[256];

    CU_ASSERT_FATAL(mem && upd && ids);
    hp_tmpdir(dir, sizeof dir);
    s = open_table(dir, 0, 1, &c, NULL);
    CU_ASSERT_FATAL(s != NULL);
    for (uint64_t r = 0; r < LEAVES_MAX; r++) {
        want_row(r, mem + r * w);
        for (int k = 0; k < ns; k++)
            for (int j = 0; j < DIM; j++)
                mem[r * w + (1 + k) * DIM + j] = ps_optim_slot_init(&c, k);
    }
    for (uint64_t r = 0; r < LEAVES_MAX; r += 3)
        ids[n++] = r;
    bad += leaves_push(s, &c, ids, n, 0, mem, upd);
    n = 0;
    for (uint64_t r = 0; r < LEAVES_MAX; r += 2)
        ids[n++] = r;
    bad += leaves_push(s, &c, ids, n, 1, mem, upd);
    CU_ASSERT_EQUAL(bad, 0);
    /* Stored: every third id and every second: 3,000 + 4,500 − 1,500. */
    CU_ASSERT_EQUAL(ps_store_table_rows(s, VAR, &n_rows), HC_OK);
    CU_ASSERT_EQUAL(n_rows, LEAVES_N + LEAVES_MAX / 2 - LEAVES_MAX / 6);
    /* A dense run: every id of [100, 700). */
    n = 0;
    for (uint64_t r = 100; r < 700; r++)
        ids[n++] = r;
    bad += leaves_read(s, &c, ids, n, mem, upd);
    /* A sparse run: every 97th id, then ids far beyond the stored ones. */
    n = 0;
    for (uint64_t r = 1; r < LEAVES_MAX; r += 97)
        ids[n++] = r + (r & 1);
    ids[n++] = 1ull << 30;
    ids[n++] = BIG - 1;
    bad += leaves_read(s, &c, ids, n, mem, upd);
    /* Alternating: runs of 5 neighbours 211 apart. */
    n = 0;
    for (uint64_t r = 0; r + 5 < LEAVES_MAX; r += 211)
        for (uint64_t q = 0; q < 5; q++)
            ids[n++] = r + q;
    bad += leaves_read(s, &c, ids, n, mem, upd);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);
    hp_rmtree(dir);
    free(mem);
    free(upd);
    free(ids);
}

/* LMDB's order for a database without a comparator (mdb_cmp_memn). */
static int memn_sign(const unsigned char *a, size_t na,
                     const unsigned char *b, size_t nb)
{
    int d = memcmp(a, b, na < nb ? na : nb);

    if (d)
        return d < 0 ? -1 : 1;
    return na < nb ? -1 : na > nb;
}

/* A 12-byte key near b's: the same bytes with one run changed to a value
 * that exercises the byte swaps (0x00, 0x7f, 0x80, 0xff or random). */
static void key_near(uint64_t *st, const unsigned char *b, unsigned char *k)
{
    static const unsigned char edge[] = {0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff};
    uint64_t r = hc_splitmix64(st);
    unsigned at = (unsigned)(r % 12), len = 1 + (unsigned)(r >> 8) % 3;

    memcpy(k, b, 12);
    for (unsigned i = at; i < 12 && i < at + len; i++)
        k[i] = (r >> 16) & 1 ? edge[(r >> (20 + 3 * i)) % sizeof edge]
                             : (unsigned char)hc_splitmix64(st);
}

static void test_key_order(void)
{
    static const size_t sizes[] = {0, 4, 8, 11, 12, 13};
    uint64_t st = 42;
    long bad = 0, checked = 0;
    unsigned char a[16], b[16];

    for (int i = 0; i < 200000; i++) {
        uint64_t r = hc_splitmix64(&st);
        size_t na = 12, nb = 12;

        for (int j = 0; j < 16; j++)
            a[j] = (unsigned char)hc_splitmix64(&st);
        if (r % 4 == 0)         /* a table's boundary: var v's last row */
            memset(a + 4, 0xff, 8);
        key_near(&st, a, b);
        if (r % 8 == 1)         /* the same key */
            memcpy(b, a, 12);
        if (r % 16 == 2) {      /* LMDB's sizes other than ours */
            na = sizes[(r >> 8) % 6];
            nb = sizes[(r >> 12) % 6];
        }
        bad += ps_store_row_key_cmp(a, na, b, nb) != memn_sign(a, na, b, nb);
        bad += ps_store_row_key_cmp(b, nb, a, na) != memn_sign(b, nb, a, na);
        checked += 2;
    }
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(checked, 400000);
    /* Variable boundaries, by hand: (1, 2^64 - 1) < (2, 0); row 2^32 >
     * row 2^32 - 1 (the low word's swap alone would say otherwise). */
    {
        unsigned char x[12] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff,
                               0xff, 0xff, 0xff, 0xff},
                      y[12] = {0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0},
                      p[12] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0},
                      q[12] = {0, 0, 0, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};

        CU_ASSERT_EQUAL(ps_store_row_key_cmp(x, 12, y, 12), -1);
        CU_ASSERT_EQUAL(ps_store_row_key_cmp(y, 12, x, 12), 1);
        CU_ASSERT_EQUAL(ps_store_row_key_cmp(p, 12, q, 12), 1);
        CU_ASSERT_EQUAL(ps_store_row_key_cmp(q, 12, q, 12), 0);
    }
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("store rows", NULL, NULL);

    hc_log_set_level(HC_LOG_WARN);
    CU_add_test(s, "a row never written reads as its initial value, the "
                   "same on every shard and after a reopen", test_initial);
    CU_add_test(s, "initial rows stored: values, slots at their initial "
                "value, count 0; again replaced", test_init_put);
    CU_add_test(s, "SGD rows = the optimizer in memory", test_sgd);
    CU_add_test(s, "Adagrad rows, accumulator from 0.1", test_adagrad);
    CU_add_test(s, "Ftrl rows", test_ftrl);
    CU_add_test(s, "lazy Adam: each row's own step count", test_lazy_adam);
    CU_add_test(s, "an apply cut short leaves nothing", test_abort);
    CU_add_test(s, "a step's updates of one table summed by row = one "
                   "update of the sums", test_summed);
    CU_add_test(s, "sync: held pushes applied once by the next step, "
                "summed by row; the rows listed by id", test_held);
    CU_add_test(s, "refusals", test_refusals);
    CU_add_test(s, "a damaged row: read and verify refuse it", test_damage);
    CU_add_test(s, "rows over many leaves: pushes mixing new and stored "
                   "rows, dense and sparse reads = rows alone = memory",
                test_many_leaves);
    CU_add_test(s, "the rows' key order is memcmp's (random keys, table "
                   "boundaries, other sizes)", test_key_order);
}
