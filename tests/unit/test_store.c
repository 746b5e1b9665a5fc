/*
 * test_store.c — ps/store on real LMDB environments in temporary
 * directories: open/init/reopen, idempotent init and every mismatch, a
 * create that is whole or nothing (a child killed inside it by the fault
 * point) with its variable definitions, a format-1 store (optimizer
 * settings as JSON) read and converted,
 * applies checked against values computed here and against the optimizer
 * run in memory (both the direct-reserve and the scratch path), records
 * for duplicate detection, MDB_MAP_FULL with and without growth, refusal
 * of foreign or damaged files, CRC damage found by ps_store_verify (bytes
 * changed through raw LMDB), read-only opens, durability modes, and
 * readers running alongside 200 applies that must always see whole
 * updates, and the open mapping the store's cached pages ahead (within
 * its budget, none when off, nothing read back from disk).
 *
 * Layouts are built by hand here (the store uses only struct hc_layout's
 * fields), blocks dealt round-robin to the shards.
 */
#include "cu.h"

#include <lmdb.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <ctype.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "crc32c.h"
#include "err.h"
#include "log.h"
#include "ps/optimizer.h"
#include "ps/store.h"
#include "record_check.h"

#define SIG 0x5151000012345678ull

static const struct hc_optim_conf SGD_OPT = {.type = HC_OPT_SGD, .lr = 0.5f};
static const struct hc_optim_conf ADAM_OPT = {.type = HC_OPT_ADAM, .lr = 1e-3f,
                                              .beta1 = 0.9f, .beta2 = 0.999f,
                                              .eps = 1e-7f};
#define SGD_OPTS (&SGD_OPT)
#define ADAM_OPTS (&ADAM_OPT)

#define CHECK_MSG(substr)                                                    \
    do {                                                                     \
        const char *m_ = hc_err_msg();                                       \
        if (!strstr(m_, (substr)))                                           \
            printf("\n  %s:%d: message \"%s\" lacks \"%s\"\n", __FILE__,      \
                   __LINE__, m_, (substr));                                  \
        CU_ASSERT_PTR_NOT_NULL(strstr(m_, (substr)));                        \
    } while (0)

/* ---- helpers ----------------------------------------------------------- */

/* ps_store_init without variable definitions. */
static int init_as(struct ps_store *s, uint64_t sig, const struct hc_layout *l,
                   uint32_t shard, const struct hc_optim_conf *optim,
                   const float *const *init,
                   int *created)
{
    struct ps_store_def d = {.signature = sig, .layout = l, .shard = shard,
                             .optim = optim, .init = init};

    return ps_store_init(s, &d, created);
}

/* Cut variables into blocks of `be`, dealt round-robin to the shards. */
static void tl_build(struct hc_layout *l, const size_t *sizes, int nv,
                     int n_shards, uint32_t be)
{
    size_t nb = 0, k = 0;

    memset(l, 0, sizeof *l);
    for (int v = 0; v < nv; v++)
        nb += (sizes[v] + be - 1) / be;
    l->n_shards = n_shards;
    l->block_elems = be;
    l->n_blocks = nb;
    l->blocks = calloc(nb, sizeof *l->blocks);
    l->shard_elems = calloc((size_t)n_shards, sizeof *l->shard_elems);
    l->shard_blocks = calloc((size_t)n_shards, sizeof *l->shard_blocks);
    for (int v = 0; v < nv; v++) {
        for (size_t off = 0; off < sizes[v]; off += be, k++) {
            struct hc_block *b = &l->blocks[k];
            uint32_t sh = (uint32_t)(k % (size_t)n_shards);

            b->var = (uint32_t)v;
            b->offset = off;
            b->length = (uint32_t)(sizes[v] - off < be ? sizes[v] - off : be);
            b->shard = sh;
            b->flat = l->total;
            b->local = l->shard_blocks[sh]++;
            l->shard_elems[sh] += b->length;
            l->total += b->length;
        }
    }
}

static void tl_free(struct hc_layout *l)
{
    free(l->blocks);
    free(l->shard_elems);
    free(l->shard_blocks);
    memset(l, 0, sizeof *l);
}

/* Initial values of a shard's blocks: var·1000 + element/4 (exact). */
struct vals {
    uint32_t n;
    float **b;          /* (n) each (length) */
    uint32_t *len;      /* (n) */
};

static void vals_make(struct vals *v, const struct hc_layout *l, uint32_t sh)
{
    v->n = l->shard_blocks[sh];
    v->b = calloc(v->n, sizeof *v->b);
    v->len = calloc(v->n, sizeof *v->len);
    for (size_t i = 0; i < l->n_blocks; i++) {
        const struct hc_block *b = &l->blocks[i];

        if (b->shard != sh)
            continue;
        v->len[b->local] = b->length;
        v->b[b->local] = malloc(b->length * sizeof(float));
        for (uint32_t e = 0; e < b->length; e++)
            v->b[b->local][e] = (float)b->var * 1000.0f +
                                (float)(b->offset + e) / 4.0f;
    }
}

static void vals_free(struct vals *v)
{
    for (uint32_t i = 0; i < v->n; i++)
        free(v->b[i]);
    free(v->b);
    free(v->len);
}

static uint32_t ref_crc32c(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint32_t c = 0xFFFFFFFFu;

    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

/* Every block of the store equals v (and its CRC the reference CRC). */
static int store_equals(struct ps_store *s, const struct vals *v)
{
    int ok = 1;

    for (uint32_t i = 0; i < v->n; i++) {
        float *got = malloc(v->len[i] * sizeof(float));
        struct ps_read r = {i, 0, v->len[i], got, 0};

        if (ps_store_read(s, &r, 1, NULL) != HC_OK ||
            memcmp(got, v->b[i], v->len[i] * sizeof(float)) != 0 ||
            r.crc != ref_crc32c(v->b[i], v->len[i] * sizeof(float)))
            ok = 0;
        free(got);
    }
    return ok;
}

static struct ps_store *open_ok(const char *dir, const struct ps_store_opts *o)
{
    struct ps_store *s = NULL;
    int rv = ps_store_open(dir, o, &s);

    if (rv != HC_OK)
        printf("\n  open %s: %s\n", dir, hc_err_msg());
    CU_ASSERT_EQUAL(rv, HC_OK);
    return s;
}

/* Change raw bytes of a stored value through LMDB (the store closed). */
static int raw_edit(const char *dir, const char *db, const void *key,
                    size_t klen, size_t at, const void *bytes, size_t n)
{
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    MDB_val k = {klen, (void *)key}, v, nv;
    unsigned char *copy = NULL;
    int rc;

    if ((rc = mdb_env_create(&env)) || (rc = mdb_env_set_maxdbs(env, 8)) ||
        (rc = mdb_env_open(env, dir, 0, 0644)) ||
        (rc = mdb_txn_begin(env, NULL, 0, &txn)) ||
        (rc = mdb_dbi_open(txn, db, 0, &dbi)))
        goto out;
    rc = mdb_get(txn, dbi, &k, &v);
    if (rc == MDB_NOTFOUND) {
        v.mv_size = 0;
        v.mv_data = NULL;
    } else if (rc) {
        goto out;
    }
    nv.mv_size = v.mv_size > at + n ? v.mv_size : at + n;
    copy = calloc(1, nv.mv_size);
    if (v.mv_size)
        memcpy(copy, v.mv_data, v.mv_size);
    memcpy(copy + at, bytes, n);
    nv.mv_data = copy;
    if ((rc = mdb_put(txn, dbi, &k, &nv, 0)))
        goto out;
    rc = mdb_txn_commit(txn);
    txn = NULL;
out:
    if (txn)
        mdb_txn_abort(txn);
    if (env)
        mdb_env_close(env);
    free(copy);
    return rc;
}

/* Replace a whole value (exact bytes). */
static int raw_put(const char *dir, const char *db, const char *key,
                   const void *val, size_t n)
{
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    MDB_val k = {strlen(key), (void *)key}, v = {n, (void *)val};
    int rc;

    if ((rc = mdb_env_create(&env)) || (rc = mdb_env_set_maxdbs(env, 8)) ||
        (rc = mdb_env_open(env, dir, 0, 0644)) ||
        (rc = mdb_txn_begin(env, NULL, 0, &txn)) ||
        (rc = mdb_dbi_open(txn, db, 0, &dbi)) ||
        (rc = mdb_put(txn, dbi, &k, &v, 0)))
        goto out;
    rc = mdb_txn_commit(txn);
    txn = NULL;
out:
    if (txn)
        mdb_txn_abort(txn);
    if (env)
        mdb_env_close(env);
    return rc;
}

static void sub(char *buf, size_t cap, const char *dir, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

/* ---- tests ------------------------------------------------------------- */

static void test_open_fresh(void)
{
    char tmp[256], dir[300];
    struct ps_store *s;
    struct ps_store_info info;
    float x[4];
    struct ps_update u = {0, 4, x, 1.0f};
    struct hc_optim_conf sgd = {.type = HC_OPT_SGD, .lr = 0.1f};

    hp_tmpdir(tmp, sizeof tmp);
    sub(dir, sizeof dir, tmp, "a/b/ps0");      /* parents are created */
    s = open_ok(dir, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT_EQUAL(info.initialised, 0);
    CU_ASSERT_EQUAL(info.incarnation, 1);
    CU_ASSERT_EQUAL(info.map_size, 1ull << 30);
    CU_ASSERT_EQUAL(ps_store_step(s), 0);
    CU_ASSERT_EQUAL(ps_store_read_block(s, 0, x, 4), HC_ERR_NOTFOUND);
    CHECK_MSG("not initialised");
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, &u, 1, NULL, 0, NULL),
                    HC_ERR_NOTFOUND);
    CHECK_MSG(dir);
    ps_store_close(s);
    s = open_ok(dir, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT_EQUAL(info.incarnation, 2);
    ps_store_close(s);
    /* a path that cannot be a directory */
    sub(dir, sizeof dir, tmp, "a/b/ps0/data.mdb/x");
    CU_ASSERT_EQUAL(ps_store_open(dir, NULL, &s), HC_ERR_IO);
    CHECK_MSG("cannot create");
    CU_ASSERT_PTR_NULL(s);
    CU_ASSERT_EQUAL(ps_store_open("", NULL, &s), HC_ERR_INVAL);
    CHECK_MSG("--data-dir");
    hp_rmtree(tmp);
}

static void test_init_reopen(void)
{
    const size_t sizes[] = {600, 10, 300};
    char tmp[256];
    struct hc_layout l;
    struct vals v;
    struct ps_store *s;
    struct ps_store_info info;
    const struct ps_block *tab;
    uint32_t n;
    int created = -1;

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 3, 2, 256);
    vals_make(&v, &l, 1);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(init_as(s, SIG, &l, 1, ADAM_OPTS,
                                  (const float *const *)v.b, &created), HC_OK);
    CU_ASSERT_EQUAL(created, 1);
    CU_ASSERT(store_equals(s, &v));
    tab = ps_store_blocks(s, &n);
    CU_ASSERT_EQUAL_FATAL(n, l.shard_blocks[1]);
    for (size_t i = 0; i < l.n_blocks; i++) {
        const struct hc_block *b = &l.blocks[i];

        if (b->shard != 1)
            continue;
        CU_ASSERT(tab[b->local].var == b->var &&
                  tab[b->local].offset == b->offset &&
                  tab[b->local].length == b->length);
    }
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);

    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT_EQUAL(info.initialised, 1);
    CU_ASSERT_EQUAL(info.incarnation, 2);
    CU_ASSERT_EQUAL(info.signature, SIG);
    CU_ASSERT_EQUAL(info.shard, 1);
    CU_ASSERT_EQUAL(info.n_shards, 2);
    CU_ASSERT_EQUAL(info.block_elems, 256);
    CU_ASSERT_EQUAL(info.n_blocks, l.shard_blocks[1]);
    CU_ASSERT_EQUAL(info.n_slots, 2);
    CU_ASSERT_EQUAL(info.optim.type, HC_OPT_ADAM);
    CU_ASSERT(info.optim.lr == 0.001f);
    CU_ASSERT_EQUAL(info.step, 0);
    CU_ASSERT(store_equals(s, &v));
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    /* idempotent: same init again changes nothing */
    CU_ASSERT_EQUAL(init_as(s, SIG, &l, 1, ADAM_OPTS, NULL, &created),
                    HC_OK);
    CU_ASSERT_EQUAL(created, 0);
    CU_ASSERT(store_equals(s, &v));
    ps_store_close(s);
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

/* ps_store_init with the variable definitions `defs`. */
static int init_defs(struct ps_store *s, const struct hc_layout *l,
                     const char *defs, int *created)
{
    struct ps_store_def d = {.signature = SIG, .layout = l, .shard = 0,
                             .optim = SGD_OPTS, .var_defs = defs,
                             .var_defs_len = defs ? strlen(defs) : 0};

    return ps_store_init(s, &d, created);
}

/* What meta "vars" holds, NUL-terminated, into buf; the get's code. */
static int vars_of(struct ps_store *s, char *buf, size_t cap)
{
    size_t len = 0;
    int rv = ps_store_meta_get(s, "vars", buf, cap - 1, &len);

    buf[rv == HC_OK ? len : 0] = '\0';
    return rv;
}

/*
 * Create is one transaction: the variable definitions are written with
 * the meta and the blocks; a process killed inside it (the fault point,
 * in a child) leaves an empty store that a second create makes whole; a
 * store an older hetps initialised without definitions gets them from
 * the next create, and they are never rewritten after.
 */
static void test_init_whole(void)
{
    static const char defs[] = "[{\"name\":\"w\",\"shape\":[30,20]}]";
    const size_t sizes[] = {600};
    char tmp[256], buf[256];
    struct hc_layout l;
    struct ps_store *s;
    struct ps_store_info info;
    int created = -1, status = 0;
    pid_t pid;

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 1, 1, 256);
    pid = fork();
    CU_ASSERT_FATAL(pid >= 0);
    if (pid == 0) {
        struct ps_store *c = NULL;

        setenv("HETPS_FAULT", "create:inside_init", 1);
        if (ps_store_open(tmp, NULL, &c) == HC_OK)
            init_defs(c, &l, defs, NULL);
        _exit(3);               /* not reached when the point fired */
    }
    CU_ASSERT_EQUAL_FATAL(waitpid(pid, &status, 0), pid);
    CU_ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT_EQUAL(info.initialised, 0);
    CU_ASSERT_EQUAL(vars_of(s, buf, sizeof buf), HC_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(init_defs(s, &l, defs, &created), HC_OK);
    CU_ASSERT_EQUAL(created, 1);
    CU_ASSERT_EQUAL(vars_of(s, buf, sizeof buf), HC_OK);
    CU_ASSERT_STRING_EQUAL(buf, defs);
    /* a repeat keeps them as they are */
    CU_ASSERT_EQUAL(init_defs(s, &l, "[]", &created), HC_OK);
    CU_ASSERT_EQUAL(created, 0);
    CU_ASSERT_EQUAL(vars_of(s, buf, sizeof buf), HC_OK);
    CU_ASSERT_STRING_EQUAL(buf, defs);
    ps_store_close(s);
    hp_rmtree(tmp);

    /* initialised without definitions (an older hetps's two transactions,
     * killed between them): the next create writes them */
    hp_tmpdir(tmp, sizeof tmp);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(init_defs(s, &l, NULL, &created), HC_OK);
    CU_ASSERT_EQUAL(vars_of(s, buf, sizeof buf), HC_ERR_NOTFOUND);
    ps_store_close(s);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(init_defs(s, &l, defs, &created), HC_OK);
    CU_ASSERT_EQUAL(created, 0);
    CU_ASSERT_EQUAL(vars_of(s, buf, sizeof buf), HC_OK);
    CU_ASSERT_STRING_EQUAL(buf, defs);
    ps_store_close(s);
    tl_free(&l);
    hp_rmtree(tmp);
}

/* Meta value `key` of the store in dir into buf (cap bytes); its size, or
 * -1 when it cannot be read. */
static long raw_meta(const char *dir, const char *key, void *buf, size_t cap)
{
    MDB_env *env = NULL;
    MDB_txn *txn = NULL;
    MDB_dbi dbi;
    MDB_val k = {strlen(key), (void *)key}, v;
    long n = -1;

    if (!mdb_env_create(&env) && !mdb_env_set_maxdbs(env, 8) &&
        !mdb_env_open(env, dir, MDB_RDONLY, 0644) &&
        !mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) &&
        !mdb_dbi_open(txn, "meta", 0, &dbi) && !mdb_get(txn, dbi, &k, &v) &&
        v.mv_size <= cap) {
        memcpy(buf, v.mv_data, v.mv_size);
        n = (long)v.mv_size;
    }
    if (txn)
        mdb_txn_abort(txn);
    if (env)
        mdb_env_close(env);
    return n;
}

/*
 * A store of format 1 kept its optimizer settings as JSON text: a
 * read-only open reads them as they are, a writable one converts the store
 * to format 2 (the typed record) in its first transaction; text this hetps
 * refuses (a value out of today's limits) is named, with what to do; a
 * damaged record of format 2 is named too.
 */
static void test_format1_converted(void)
{
    static const char old_json[] = "{\"type\":\"sgd\",\"learning_rate\":0.25,"
                                   "\"momentum\":0.5,\"nesterov\":true}";
    const struct hc_optim_conf want = {.type = HC_OPT_MOMENTUM, .lr = 0.25f,
                                       .momentum = 0.5f, .nesterov = 1};
    const uint32_t one = 1;
    const size_t sizes[] = {600, 10};
    struct ps_store_opts ro = {.read_only = 1};
    char tmp[256], dir[300];
    unsigned char rec[HC_OPTIM_RECORD_SIZE];
    struct hc_layout l;
    struct vals v;
    struct ps_store *s;
    struct ps_store_info info;
    uint32_t format = 0;

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 2, 1, 256);
    vals_make(&v, &l, 0);
    sub(dir, sizeof dir, tmp, "old");
    s = open_ok(dir, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, &want,
                                  (const float *const *)v.b, NULL), HC_OK);
    ps_store_close(s);
    /* what an older hetps wrote */
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "format", &one, 4), 0);
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "optimizer", old_json,
                                  strlen(old_json)), 0);
    s = open_ok(dir, &ro);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT(hc_optim_equal(&info.optim, &want));
    ps_store_close(s);
    CU_ASSERT_EQUAL(raw_meta(dir, "format", &format, sizeof format), 4);
    CU_ASSERT_EQUAL(format, 1);         /* read-only: left as it was */
    s = open_ok(dir, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT(memcmp(&info.optim, &want, sizeof want) == 0);
    CU_ASSERT(store_equals(s, &v));
    ps_store_close(s);
    CU_ASSERT_EQUAL(raw_meta(dir, "format", &format, sizeof format), 4);
    CU_ASSERT_EQUAL(format, PS_STORE_FORMAT);
    CU_ASSERT_EQUAL(raw_meta(dir, "optimizer", rec, sizeof rec),
                    HC_OPTIM_RECORD_SIZE);
    CU_ASSERT(memcmp(rec, "HOPT", 4) == 0);
    s = open_ok(dir, &ro);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT(memcmp(&info.optim, &want, sizeof want) == 0);
    ps_store_close(s);

    /* format 1 text out of today's limits: named, with what to do */
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "format", &one, 4), 0);
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "optimizer",
                                  "{\"type\":\"sgd\",\"learning_rate\":0}", 32),
                          0);
    CU_ASSERT_EQUAL(ps_store_open(dir, NULL, &s), HC_ERR_STORE);
    CU_ASSERT_PTR_NULL(s);
    CHECK_MSG("learning_rate 0 is out of range");
    CHECK_MSG("cannot convert it");
    CHECK_MSG(dir);
    /* format 2 with a damaged record */
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "format", &format, 4), 0);
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "optimizer", old_json,
                                  strlen(old_json)), 0);
    CU_ASSERT_EQUAL(ps_store_open(dir, NULL, &s), HC_ERR_STORE);
    CHECK_MSG("not an optimizer settings record");
    CHECK_MSG("JSON text");
    CHECK_MSG("the store is damaged");
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

/*
 * A store written before the optimizers of issue #39 keeps its settings as
 * a version 1 record (32 bytes): written here byte for byte as that hetps
 * wrote it (Adam, lr 0.001), the store opens, trains on with the same
 * numbers as in memory, keeps its record as it was, and refuses a model
 * with another optimizer naming both. A new store writes version 2 and
 * starts Adagrad's accumulator at its initial value.
 */
static void test_optim_record_v1(void)
{
    static const unsigned char v1[28] = {
        'H', 'O', 'P', 'T', 1, 0, 2, 0,
        0x6f, 0x12, 0x83, 0x3a,     /* learning_rate 0.001f */
        0, 0, 0, 0,                 /* momentum */
        0x66, 0x66, 0x66, 0x3f,     /* beta_1 0.9f */
        0x77, 0xbe, 0x7f, 0x3f,     /* beta_2 0.999f */
        0x95, 0xbf, 0xd6, 0x33,     /* epsilon 1e-7f */
    };
    const size_t sizes[] = {100, 10};
    unsigned char rec[HC_OPTIM_RECORD_SIZE];
    struct hc_optim_conf rms, ada;
    char tmp[256], dir[300];
    struct hc_layout l;
    struct vals v;
    struct ps_store *s;
    struct ps_store_info info;
    float g[64], m[2][64] = {{0}}, vv[2][64] = {{0}}, got[64];
    struct ps_update u[2];
    uint32_t crc;

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 2, 2, 64);          /* shard 0: blocks of 64, 10 */
    vals_make(&v, &l, 0);
    sub(dir, sizeof dir, tmp, "v1");
    s = open_ok(dir, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, ADAM_OPTS,
                                  (const float *const *)v.b, NULL), HC_OK);
    ps_store_close(s);
    memcpy(rec, v1, 28);
    crc = hc_crc32c(rec, 28);
    for (int i = 0; i < 4; i++)
        rec[28 + i] = (unsigned char)(crc >> (8 * i));
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "optimizer", rec, 32), 0);
    s = open_ok(dir, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT(memcmp(&info.optim, &ADAM_OPT, sizeof ADAM_OPT) == 0);
    for (int t = 0; t < 3; t++) {
        for (int i = 0; i < 64; i++)
            g[i] = (float)((i * 5 + t * 3) % 11) / 4.0f - 1.0f;
        for (uint32_t b = 0; b < v.n; b++) {
            const float *in[PS_OPTIM_MAX_SLOTS] = {m[b], vv[b], NULL};
            float *out[PS_OPTIM_MAX_SLOTS] = {m[b], vv[b], NULL};
            struct ps_optim_step at = {(uint64_t)t, 1.0f, 0};

            u[b] = (struct ps_update){b, v.len[b], g, 1.0f};
            ps_optim_apply(&ADAM_OPT, &at, v.len[b], v.b[b], g, in, v.b[b],
                           out);
        }
        CU_ASSERT_EQUAL(ps_store_apply(s, &ADAM_OPT, u, v.n, NULL, 0, NULL),
                        HC_OK);
    }
    CU_ASSERT(store_equals(s, &v));
    CU_ASSERT_EQUAL(ps_store_read_slot(s, 1, 0, got, v.len[0]), HC_OK);
    CU_ASSERT(memcmp(got, vv[0], v.len[0] * sizeof(float)) == 0);
    /* another optimizer: refused, both named */
    hc_optim_defaults(HC_OPT_RMSPROP, &rms);
    CU_ASSERT_EQUAL(init_as(s, SIG, &l, 0, &rms, NULL, NULL),
                    HC_ERR_MISMATCH);
    CHECK_MSG("made with optimizer adam (learning_rate 0.00100000005");
    CHECK_MSG("but asked for rmsprop (learning_rate 0.00100000005, momentum 0,"
              " rho 0.899999976");
    ps_store_close(s);
    CU_ASSERT_EQUAL(raw_meta(dir, "optimizer", rec, sizeof rec), 32);
    CU_ASSERT(memcmp(rec, v1, 28) == 0);        /* left as it was */

    /* a new store: version 2; Adagrad's accumulator starts at 0.25 */
    hc_optim_defaults(HC_OPT_ADAGRAD, &ada);
    ada.init_accum = 0.25f;
    sub(dir, sizeof dir, tmp, "v2");
    s = open_ok(dir, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, &ada, NULL, NULL), HC_OK);
    CU_ASSERT_EQUAL(ps_store_read_slot(s, 0, 1, got, v.len[1]), HC_OK);
    CU_ASSERT(got[0] == 0.25f && got[v.len[1] - 1] == 0.25f);
    ps_store_close(s);
    CU_ASSERT_EQUAL(raw_meta(dir, "optimizer", rec, sizeof rec),
                    HC_OPTIM_RECORD_SIZE);
    CU_ASSERT(memcmp(rec, "HOPT\2\0\4", 7) == 0);
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

static void test_init_mismatch(void)
{
    const size_t sizes[] = {600, 10, 300};
    char tmp[256];
    struct hc_layout l, l3, lb;
    struct ps_store *s;
    int created = -1;

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 3, 2, 256);
    tl_build(&l3, sizes, 3, 3, 256);
    tl_build(&lb, sizes, 3, 2, 128);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    /* bad arguments before anything is written */
    CU_ASSERT_EQUAL(init_as(s, SIG, &l, 2, SGD_OPTS, NULL, NULL),
                    HC_ERR_INVAL);
    CHECK_MSG("shard 2 is out of range");
    {
        struct hc_optim_conf bad = ADAM_OPT;

        bad.beta1 = 1.5f;
        CU_ASSERT_EQUAL(init_as(s, SIG, &l, 0, &bad, NULL, NULL),
                        HC_ERR_CONFIG);
        CHECK_MSG("beta_1 1.5 is out of range");
        CU_ASSERT_EQUAL(init_as(s, SIG, &l, 0, NULL, NULL, NULL),
                        HC_ERR_CONFIG);
        CHECK_MSG("no settings given");
    }
    CU_ASSERT_EQUAL(init_as(s, SIG, NULL, 0, SGD_OPTS, NULL, NULL),
                    HC_ERR_INVAL);
    CU_ASSERT_EQUAL(init_as(s, SIG, &l, 0, SGD_OPTS, NULL, &created),
                    HC_OK);
    CU_ASSERT_EQUAL(created, 1);

    CU_ASSERT_EQUAL(init_as(s, SIG + 1, &l, 0, SGD_OPTS, NULL,
                                  &created), HC_ERR_MISMATCH);
    CU_ASSERT_EQUAL(created, 0);
    CHECK_MSG("model signature");
    CHECK_MSG(tmp);
    CHECK_MSG("fresh --data-dir");
    CU_ASSERT_EQUAL(init_as(s, SIG, &l3, 0, SGD_OPTS, NULL, NULL),
                    HC_ERR_MISMATCH);
    CHECK_MSG("laid out for 2 shards");
    CHECK_MSG("now has 3 shards");
    CHECK_MSG("hetps reshard");
    CU_ASSERT_EQUAL(init_as(s, SIG, &lb, 0, SGD_OPTS, NULL, NULL),
                    HC_ERR_MISMATCH);
    CHECK_MSG("blocks of 128");
    CHECK_MSG("hetps reshard");
    CU_ASSERT_EQUAL(init_as(s, SIG, &l, 1, SGD_OPTS, NULL, NULL),
                    HC_ERR_MISMATCH);
    CHECK_MSG("holds shard 0 but this server is shard 1");
    CU_ASSERT_EQUAL(init_as(s, SIG, &l, 0, ADAM_OPTS, NULL, NULL),
                    HC_ERR_MISMATCH);
    CHECK_MSG("made with optimizer sgd (learning_rate 0.5) but asked for "
              "adam (learning_rate 0.00100000005");
    /* settings the type does not use do not count */
    {
        struct hc_optim_conf same = SGD_OPT;

        same.beta2 = 0.25f;
        CU_ASSERT_EQUAL(init_as(s, SIG, &l, 0, &same, NULL, &created),
                        HC_OK);
    }
    CU_ASSERT_EQUAL(created, 0);
    ps_store_close(s);
    tl_free(&l);
    tl_free(&l3);
    tl_free(&lb);
    hp_rmtree(tmp);
}

/* SGD lr 0.5, scale 0.5 on exact binary values: p − 0.25·g. */
static void test_apply_sgd(void)
{
    const size_t sizes[] = {20, 7};
    char tmp[256];
    struct hc_layout l;
    struct vals v;
    struct ps_store *s;
    struct hc_optim_conf c = {.type = HC_OPT_SGD, .lr = 0.5f};
    float g0[8], g1[7], got[8];
    struct ps_update u[2];
    struct ps_read r[2];
    uint64_t step = 99;

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 2, 1, 8);  /* blocks: 8, 8, 4 | 7 */
    vals_make(&v, &l, 0);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, SGD_OPTS,
                                        (const float *const *)v.b, NULL),
                          HC_OK);
    for (int i = 0; i < 8; i++)
        g0[i] = (float)(i - 3);
    for (int i = 0; i < 7; i++)
        g1[i] = (float)(2 * i) + 0.5f;
    u[0] = (struct ps_update){1, 8, g0, 0.5f};
    u[1] = (struct ps_update){3, 7, g1, 0.5f};
    CU_ASSERT_EQUAL(ps_store_apply(s, &c, u, 2, NULL, 0, &step), HC_OK);
    CU_ASSERT_EQUAL(step, 1);
    CU_ASSERT_EQUAL(ps_store_step(s), 1);
    /* expected: block 1 is var 0, elements 8..15: e/4 − 0.25·(i − 3) */
    for (int i = 0; i < 8; i++)
        v.b[1][i] = (float)(8 + i) / 4.0f - 0.25f * (float)(i - 3);
    /* block 3 is var 1, elements 0..6: 1000 + e/4 − 0.25·(2i + 0.5) */
    for (int i = 0; i < 7; i++)
        v.b[3][i] = 1000.0f + (float)i / 4.0f - 0.25f * ((float)(2 * i) + 0.5f);
    CU_ASSERT_EQUAL(v.b[1][0], 2.75f);          /* 2 + 0.75, by hand */
    CU_ASSERT_EQUAL(v.b[3][6], 1000.0f + 1.5f - 3.125f);
    CU_ASSERT(store_equals(s, &v));
    /* a range read and the snapshot's step */
    r[0] = (struct ps_read){1, 2, 3, got, 0};
    r[1] = (struct ps_read){3, 6, 1, got + 3, 0};
    CU_ASSERT_EQUAL(ps_store_read(s, r, 2, &step), HC_OK);
    CU_ASSERT_EQUAL(step, 1);
    CU_ASSERT(got[0] == v.b[1][2] && got[2] == v.b[1][4] &&
              got[3] == v.b[3][6]);
    CU_ASSERT_EQUAL(r[0].crc, ref_crc32c(v.b[1], 8 * sizeof(float)));
    /* read errors */
    r[0] = (struct ps_read){1, 6, 3, got, 0};
    CU_ASSERT_EQUAL(ps_store_read(s, r, 1, NULL), HC_ERR_INVAL);
    CHECK_MSG("outside block 1");
    r[0] = (struct ps_read){9, 0, 1, got, 0};
    CU_ASSERT_EQUAL(ps_store_read(s, r, 1, NULL), HC_ERR_NOTFOUND);
    CHECK_MSG("no parameters for block 9");
    CU_ASSERT_EQUAL(ps_store_read_block(s, 0, got, 7), HC_ERR_MISMATCH);
    CHECK_MSG("block 0 has 8 elements, not 7");
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

/* Adam through the store equals Adam in memory, bit for bit, over steps
 * and a reopen (so slots and the step persist), on the direct path and on
 * the scratch path (direct_max_pages = 1). Block lengths make both leaf
 * values (may be 2-byte aligned) and overflow values. With `group`, steps
 * go two at a time through ps_store_apply_group (group commit): a block
 * in both steps of a transaction is read back from its dirty page. With
 * `split`, every step is split over threads (split_min 1): the overflow
 * blocks computed on the threads, the others by the writer, in one step;
 * on the scratch path nothing is split. */
static void run_adam_equivalence(uint64_t direct_max_pages, int group,
                                 int split)
{
    const size_t sizes[] = {3000, 5, 1201};
    char tmp[256];
    struct hc_layout l;
    struct vals v;
    struct ps_store_opts o = {.direct_max_pages = direct_max_pages,
                              .apply_threads = split ? 4 : 1,
                              .split_min = split ? 1 : 0};
    struct ps_store_info info;
    struct ps_store *s;
    struct hc_optim_conf c;
    float *m[8], *vv[8], *g[2][8], *got;
    struct ps_update u[2][8];
    struct ps_apply a[2];
    uint32_t nb;

    c = ADAM_OPT;
    c.lr = 0.01f;   /* a schedule may change lr: allowed */
    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 3, 1, 1024);
    vals_make(&v, &l, 0);
    nb = v.n;
    CU_ASSERT_FATAL(nb <= 8);
    got = malloc(1024 * sizeof(float));
    for (uint32_t i = 0; i < nb; i++) {
        m[i] = calloc(v.len[i], sizeof(float));
        vv[i] = calloc(v.len[i], sizeof(float));
        g[0][i] = malloc(v.len[i] * sizeof(float));
        g[1][i] = malloc(v.len[i] * sizeof(float));
    }
    s = open_ok(tmp, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, ADAM_OPTS,
                                        (const float *const *)v.b, NULL),
                          HC_OK);
    for (uint64_t t = 0; t < 4; t++) {
        uint32_t nu = 0;
        uint64_t step = 0;
        int h = (int)(t % 2);

        if (t == 2) {           /* restart in the middle */
            ps_store_close(s);
            s = open_ok(tmp, &o);
            CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        }
        for (uint32_t i = 0; i < nb; i++) {
            if (t == 1 && i == 1)
                continue;       /* not every block in every step */
            for (uint32_t e = 0; e < v.len[i]; e++)
                g[h][i][e] = (float)((e * 7 + i * 3 + t * 5) % 13) / 8.0f -
                             0.75f;
            u[h][nu++] = (struct ps_update){i, v.len[i], g[h][i], 0.5f};
            {
                const float *in[PS_OPTIM_MAX_SLOTS] = {m[i], vv[i], NULL};
                float *out[PS_OPTIM_MAX_SLOTS] = {m[i], vv[i], NULL};
                struct ps_optim_step at = {t, 0.5f, 0};

                ps_optim_apply(&c, &at, v.len[i], v.b[i], g[h][i], in, v.b[i],
                               out);
            }
        }
        a[h] = (struct ps_apply){.u = u[h], .n = nu};
        if (group == 2) {
            /* A step in parts: the first blocks into the open step, one
             * at a time, the rest with the commit. */
            for (uint32_t k = 0; k + 1 < nu; k++)
                CU_ASSERT_EQUAL(ps_store_step_add(s, &c, &u[h][k], 1),
                                HC_OK);
            /* Before the commit: the added blocks' new values, read from
             * the open step (an early answer), are the step's; nothing
             * committed yet. */
            for (uint32_t k = 0; k + 1 < nu; k++) {
                uint32_t b = u[h][k].local;
                struct ps_read r = {b, 0, v.len[b], got, 0};
                uint64_t at = 0;

                CU_ASSERT_EQUAL(ps_store_step_read(s, &r, 1, &at), HC_OK);
                CU_ASSERT_EQUAL(at, t + 1);
                CU_ASSERT(memcmp(got, v.b[b], v.len[b] * 4) == 0);
            }
            CU_ASSERT_EQUAL(ps_store_step(s), t);
            CU_ASSERT_EQUAL(ps_store_step_commit(s, &c, &u[h][nu - 1], 1,
                                                 NULL, 0, &step), HC_OK);
            CU_ASSERT_EQUAL(step, t + 1);
            CU_ASSERT_EQUAL(ps_store_step(s), t + 1);
            {   /* no step open: the committed values and their step */
                uint32_t b = u[h][nu - 1].local;
                struct ps_read r = {b, 0, v.len[b], got, 0};
                uint64_t at = 0;

                CU_ASSERT_EQUAL(ps_store_step_read(s, &r, 1, &at), HC_OK);
                CU_ASSERT_EQUAL(at, t + 1);
                CU_ASSERT(memcmp(got, v.b[b], v.len[b] * 4) == 0);
            }
        } else if (!group) {
            CU_ASSERT_EQUAL(ps_store_apply(s, &c, u[h], nu, NULL, 0, &step),
                            HC_OK);
            CU_ASSERT_EQUAL(step, t + 1);
        } else if (h == 1) {
            CU_ASSERT_EQUAL(ps_store_apply_group(s, &c, a, 2, &step), HC_OK);
            CU_ASSERT_EQUAL(step, t + 1);
            CU_ASSERT_EQUAL(ps_store_step(s), t + 1);
        }
    }
    CU_ASSERT(store_equals(s, &v));
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_info(s, &info);
    if (!split || direct_max_pages == 1) {
        CU_ASSERT_EQUAL(info.steps_split, 0);
    } else if (sysconf(_SC_NPROCESSORS_ONLN) > 1) { /* since the reopen */
        /* in parts: each part's apply split on its own */
        if (group == 2) {
            CU_ASSERT(info.steps_split >= 2);
        } else {
            CU_ASSERT_EQUAL(info.steps_split, 2);
        }
    }
    ps_store_close(s);
    for (uint32_t i = 0; i < nb; i++) {
        free(m[i]);
        free(vv[i]);
        free(g[0][i]);
        free(g[1][i]);
    }
    free(got);
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

/* A step applied in parts (ps_store_step_add, then the commit) gives the
 * same bits as one apply, through the scratch path and split over threads
 * too; a step left open when the store closes (a crash before the commit)
 * is not applied at all. */
static void test_apply_step_parts(void)
{
    const size_t sizes[] = {3000, 5, 1201};
    char tmp[256];
    struct hc_layout l;
    struct vals v;
    struct ps_store *s;
    struct ps_update u[8];
    float *g[8];
    uint32_t nb;

    run_adam_equivalence(0, 2, 0);
    run_adam_equivalence(1, 2, 0);
    run_adam_equivalence(0, 2, 1);
    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 3, 1, 1024);
    vals_make(&v, &l, 0);
    nb = v.n;
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, ADAM_OPTS,
                                  (const float *const *)v.b, NULL), HC_OK);
    for (uint32_t i = 0; i < nb; i++) {
        g[i] = malloc(v.len[i] * sizeof(float));
        for (uint32_t e = 0; e < v.len[i]; e++)
            g[i][e] = 1.0f;
        u[i] = (struct ps_update){i, v.len[i], g[i], 1.0f};
    }
    CU_ASSERT_EQUAL(ps_store_step_add(s, &ADAM_OPT, u, nb - 1), HC_OK);
    ps_store_step_drain(s);
    ps_store_close(s);          /* no commit: nothing of it applied */
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ps_store_step(s), 0u);
    CU_ASSERT(store_equals(s, &v));
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);
    for (uint32_t i = 0; i < nb; i++)
        free(g[i]);
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

static void test_apply_adam_direct(void)
{
    run_adam_equivalence(0, 0, 0);
}

static void test_apply_adam_scratch(void)
{
    run_adam_equivalence(1, 0, 0);
}

static void test_apply_group(void)
{
    run_adam_equivalence(0, 1, 0);
    run_adam_equivalence(1, 1, 0);
}

/* A large step computed on several threads: the same bits as on one. */
static void test_apply_split(void)
{
    run_adam_equivalence(0, 0, 1);
    run_adam_equivalence(0, 1, 1);
    run_adam_equivalence(1, 0, 1);
    {
        char tmp[256];
        struct ps_store_opts o = {.apply_threads = -1};
        struct ps_store *s = NULL;

        hp_tmpdir(tmp, sizeof tmp);
        CU_ASSERT_EQUAL(ps_store_open(tmp, &o, &s), HC_ERR_INVAL);
        CU_ASSERT_PTR_NULL(s);
        CHECK_MSG("-1 apply threads");
        hp_rmtree(tmp);
    }
}

static void test_apply_errors(void)
{
    const size_t sizes[] = {20};
    char tmp[256];
    struct hc_layout l;
    struct ps_store *s;
    struct hc_optim_conf sgd = {.type = HC_OPT_SGD, .lr = 0.5f};
    struct hc_optim_conf adam = {.type = HC_OPT_ADAM, .lr = 1e-3f,
                                 .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-7f};
    struct hc_optim_conf bad = {.type = HC_OPT_SGD, .lr = -2};
    float g[8] = {1, 1, 1, 1, 1, 1, 1, 1}, x[8];
    struct ps_update u[2];
    struct ps_record rec = {.worker = 3, .request_id = 9};  /* no magic */

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 1, 1, 8);   /* blocks 8, 8, 4 */
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, SGD_OPTS, NULL, NULL),
                          HC_OK);
    u[0] = (struct ps_update){5, 8, g, 1};
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, u, 1, NULL, 0, NULL),
                    HC_ERR_INVAL);
    CHECK_MSG("names block 5 but this shard has 3 blocks");
    u[0] = (struct ps_update){2, 8, g, 1};
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, u, 1, NULL, 0, NULL),
                    HC_ERR_INVAL);
    CHECK_MSG("has 8 elements, the block 4");
    u[0] = (struct ps_update){0, 8, g, 1};
    u[1] = (struct ps_update){0, 8, g, 1};
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, u, 2, NULL, 0, NULL),
                    HC_ERR_INVAL);
    CHECK_MSG("block 0 appears twice");
    u[1] = (struct ps_update){1, 8, NULL, 1};
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, u, 2, NULL, 0, NULL),
                    HC_ERR_INVAL);
    CHECK_MSG("no gradient");
    CU_ASSERT_EQUAL(ps_store_apply(s, &adam, u, 1, NULL, 0, NULL),
                    HC_ERR_MISMATCH);
    CHECK_MSG("needs 2 slot arrays");
    CU_ASSERT_EQUAL(ps_store_apply(s, &bad, u, 1, NULL, 0, NULL),
                    HC_ERR_CONFIG);
    CHECK_MSG("learning_rate -2");
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, u, 1, &rec, 1, NULL),
                    HC_ERR_INVAL);
    CHECK_MSG("not made by ps_record_begin");
    /* nothing was applied */
    CU_ASSERT_EQUAL(ps_store_step(s), 0);
    CU_ASSERT_EQUAL(ps_store_read_block(s, 0, x, 8), HC_OK);
    CU_ASSERT(x[0] == 0 && x[7] == 0);
    CU_ASSERT_EQUAL(ps_store_record_get(s, 3, 0, &rec), HC_ERR_NOTFOUND);
    /* and the store still works */
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, u, 1, NULL, 0, NULL), HC_OK);
    CU_ASSERT_EQUAL(ps_store_read_block(s, 0, x, 8), HC_OK);
    CU_ASSERT(x[0] == -0.5f && x[7] == -0.5f);
    ps_store_close(s);
    tl_free(&l);
    hp_rmtree(tmp);
}

/* ps_store_records' callback: note each record; stop after `stop_after`. */
struct seen_recs {
    int n, stop_after;
    uint32_t worker[8];
    uint64_t request[8];
    struct ps_place at[8];
};

static int note_record(void *arg, uint32_t worker, uint64_t incarnation,
                       uint64_t request_id, const struct ps_place *at)
{
    struct seen_recs *r = arg;

    (void)incarnation;
    if (r->n < 8) {
        r->worker[r->n] = worker;
        r->request[r->n] = request_id;
        r->at[r->n] = *at;
    }
    return ++r->n == r->stop_after;
}

static void test_records(void)
{
    const size_t sizes[] = {16};
    char tmp[256];
    struct hc_layout l;
    struct ps_store *s;
    struct hc_optim_conf sgd = {.type = HC_OPT_SGD, .lr = 0.5f};
    float g[16] = {0};
    struct ps_update u = {0, 16, g, 1};
    struct ps_record recs[2], r;
    struct ps_place at = {1, 9, 9};
    unsigned char v1[64], key5[4] = {0, 0, 0, 5}, key6[4] = {0, 0, 0, 6};
    uint64_t step = 0;
    size_t n;

    ps_record_begin(&recs[0], 0, PS_REQ_PUSH, 0xAAAA, 41);
    ps_record_begin(&recs[1], 7, PS_REQ_PUSH, 0xBBBB, 5);
    ps_record_set_place(&recs[1], 1, 3, 17);
    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 1, 1, 16);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, SGD_OPTS, NULL, NULL),
                          HC_OK);
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, &u, 1, recs, 2, &step), HC_OK);
    CU_ASSERT_EQUAL(step, 1);
    /* answered at the step after the apply */
    CU_ASSERT_EQUAL(ps_store_record_get(s, 7, 0, &r), HC_OK);
    CU_ASSERT(r.incarnation == 0xBBBB && r.request_id == 5 &&
              r.version == 1 && r.worker == 7 && r.kind == PS_REQ_PUSH &&
              (r.flags & PS_REC_ANSWERED));
    CU_ASSERT_EQUAL(ps_store_place(s, 7, &at), HC_OK);
    CU_ASSERT(at.known && at.epoch == 3 && at.batches == 17);
    /* a record without a place */
    CU_ASSERT_EQUAL(ps_store_record_get(s, 0, 0, &r), HC_OK);
    CU_ASSERT_EQUAL(ps_store_place(s, 0, &at), HC_OK);
    CU_ASSERT(!at.known && r.request_id == 41);
    /* no record at all: no place */
    CU_ASSERT_EQUAL(ps_store_place(s, 3, &at), HC_OK);
    CU_ASSERT(!at.known);
    CU_ASSERT_EQUAL(ps_store_record_get(s, 3, 0, &r), HC_ERR_NOTFOUND);
    CHECK_MSG("no request recorded for worker 3");
    /* a record-only apply (a place moved by reshard) leaves the step */
    recs[0].request_id = 42;
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, NULL, 0, recs, 1, &step), HC_OK);
    CU_ASSERT_EQUAL(step, 1);
    /* a later request of worker 7 without a place (a rows push held for
     * its step) keeps the place its record had */
    ps_record_begin(&r, 7, PS_REQ_PUSH, 0xBBBB, 6);
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, NULL, 0, &r, 1, &step), HC_OK);
    CU_ASSERT_EQUAL(ps_store_record_get(s, 7, 0, &r), HC_OK);
    CU_ASSERT_EQUAL(r.request_id, 6);
    CU_ASSERT_EQUAL(ps_store_place(s, 7, &at), HC_OK);
    CU_ASSERT(at.known && at.epoch == 3 && at.batches == 17);
    ps_record_begin(&r, 7, PS_REQ_PUSH, 0xBBBB, 5);  /* as it was */
    ps_record_set_place(&r, 1, 3, 17);
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, NULL, 0, &r, 1, &step), HC_OK);
    ps_store_close(s);

    /* Records the old code wrote (format 1), one damaged. */
    n = hp_record_v1(v1, 0xCCCC, 77, 1, 1, "an-ack");
    CU_ASSERT_EQUAL(raw_edit(tmp, "records", key5, 4, 0, v1, n), 0);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ps_store_step(s), 1);
    CU_ASSERT_EQUAL(ps_store_record_get(s, 0, 0, &r), HC_OK);
    CU_ASSERT(r.incarnation == 0xAAAA && r.request_id == 42);
    CU_ASSERT_EQUAL(ps_store_record_get(s, 7, 0, &r), HC_OK);
    CU_ASSERT(r.incarnation == 0xBBBB && r.request_id == 5 && r.version == 1);
    CU_ASSERT_EQUAL(ps_store_record_get(s, 5, 0, &r), HC_OK);
    CU_ASSERT(r.incarnation == 0xCCCC && r.request_id == 77 &&
              r.version == 1 && (r.flags & PS_REC_ANSWERED));
    CU_ASSERT_EQUAL(ps_store_place(s, 5, &at), HC_OK);
    CU_ASSERT(at.known && at.epoch == 4 && at.batches == 250);
    CU_ASSERT_EQUAL(ps_store_place(s, 7, &at), HC_OK);
    CU_ASSERT(at.known && at.epoch == 3 && at.batches == 17);
    {
        struct seen_recs sr = {0};

        /* every record, in worker order; then stopped after the first */
        CU_ASSERT_EQUAL(ps_store_records(s, note_record, &sr), HC_OK);
        CU_ASSERT_EQUAL_FATAL(sr.n, 3);
        CU_ASSERT(sr.worker[0] == 0 && sr.request[0] == 42 &&
                  !sr.at[0].known);
        CU_ASSERT(sr.worker[1] == 5 && sr.request[1] == 77);
        CU_ASSERT(sr.worker[2] == 7 && sr.request[2] == 5 &&
                  sr.at[2].known && sr.at[2].epoch == 3 &&
                  sr.at[2].batches == 17);
        memset(&sr, 0, sizeof sr);
        sr.stop_after = 1;
        CU_ASSERT_EQUAL(ps_store_records(s, note_record, &sr), HC_OK);
        CU_ASSERT_EQUAL(sr.n, 1);
    }
    ps_store_close(s);
    CU_ASSERT_EQUAL(raw_edit(tmp, "records", key6, 4, 0, v1, n - 1), 0);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ps_store_record_get(s, 6, 0, &r), HC_ERR_STORE);
    CHECK_MSG("the record of worker 6");
    CHECK_MSG("damaged");
    ps_store_close(s);
    tl_free(&l);
    hp_rmtree(tmp);
}

/* A 64 KiB map that may not grow fills up; the failing apply is rolled
 * back whole, everything before it is intact, and with a higher limit the
 * same apply goes through. */
static void test_map_full(void)
{
    const size_t sizes[] = {16};
    char tmp[256];
    struct hc_layout l;
    struct ps_store_opts o = {.map_size = 64 << 10, .map_max = 64 << 10};
    struct ps_store *s;
    struct ps_store_info info;
    struct hc_optim_conf sgd = {.type = HC_OPT_SGD, .lr = 1.0f};
    float g[16], x[16];
    struct ps_update u = {0, 16, g, 1};
    struct ps_record rec;
    uint32_t w, ok = 0;
    int rv = HC_OK;

    for (int i = 0; i < 16; i++)
        g[i] = -1;
    ps_record_begin(&rec, 0, PS_REQ_PUSH, 1, 0);
    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 1, 1, 16);
    s = open_ok(tmp, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, SGD_OPTS, NULL, NULL),
                          HC_OK);
    for (w = 0; w < 65536; w++) {
        rec.worker = w;
        rec.request_id = 100 + w;
        rv = ps_store_apply(s, &sgd, &u, 1, &rec, 1, NULL);
        if (rv != HC_OK)
            break;
        ok++;
    }
    CU_ASSERT(ok >= 1);
    CU_ASSERT_EQUAL_FATAL(rv, HC_ERR_MAPFULL);
    CHECK_MSG(tmp);
    CHECK_MSG("map is full at 64 KiB");
    CHECK_MSG("--map-max");
    CHECK_MSG("not applied");
    /* rolled back; earlier data intact; still readable */
    CU_ASSERT_EQUAL(ps_store_step(s), ok);
    CU_ASSERT_EQUAL(ps_store_read_block(s, 0, x, 16), HC_OK);
    CU_ASSERT_EQUAL(x[0], (float)ok);
    CU_ASSERT_EQUAL(x[15], (float)ok);
    CU_ASSERT_EQUAL(ps_store_record_get(s, ok - 1, 0, &rec), HC_OK);
    CU_ASSERT_EQUAL(rec.request_id, 100 + ok - 1);
    CU_ASSERT_EQUAL(ps_store_record_get(s, ok, 0, &rec), HC_ERR_NOTFOUND);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);

    /* allowed to grow: the same apply succeeds and the map doubled */
    o.map_max = 1 << 20;
    s = open_ok(tmp, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ps_store_step(s), ok);
    ps_record_begin(&rec, ok, PS_REQ_PUSH, 1, 100 + ok);
    for (w = 0; w < 3; w++, rec.worker++)
        CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, &u, 1, &rec, 1, NULL), HC_OK);
    ps_store_info(s, &info);
    CU_ASSERT(info.map_size > (64u << 10));
    CU_ASSERT_EQUAL(ps_store_read_block(s, 0, x, 16), HC_OK);
    CU_ASSERT_EQUAL(x[3], (float)(ok + 3));
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);
    tl_free(&l);
    hp_rmtree(tmp);
}

/* An init bigger than the initial map grows it on its own. */
/* A fresh store in a new temporary directory (its path into tmp) holding
 * one variable of sizes[0] floats in blocks of be, initialised from v
 * (made here) with optimizer opt; NULL when the open or init failed. */
static struct ps_store *one_var_store(char *tmp, size_t cap,
                                      struct hc_layout *l, struct vals *v,
                                      const size_t *sizes, uint32_t be,
                                      const struct ps_store_opts *o,
                                      const struct hc_optim_conf *opt)
{
    struct ps_store *s;

    hp_tmpdir(tmp, cap);
    tl_build(l, sizes, 1, 1, be);
    vals_make(v, l, 0);
    if (!(s = open_ok(tmp, o)))
        return NULL;
    if (init_as(s, SIG, l, 0, opt, (const float *const *)v->b, NULL) != HC_OK) {
        ps_store_close(s);
        return NULL;
    }
    return s;
}

static void test_map_growth_init(void)
{
    const size_t sizes[] = {40 * 256};
    char tmp[256];
    struct hc_layout l;
    struct ps_store_opts o = {.map_size = 64 << 10, .map_max = 8 << 20};
    struct ps_store *s;
    struct ps_store_info info;
    struct vals v;

    s = one_var_store(tmp, sizeof tmp, &l, &v, sizes, 256, &o, ADAM_OPTS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_info(s, &info);
    CU_ASSERT(info.map_size >= (128u << 10));
    CU_ASSERT(info.map_size <= (8u << 20));
    CU_ASSERT(store_equals(s, &v));
    ps_store_close(s);
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

static void test_refuse_foreign(void)
{
    char tmp[256], dir[300], file[320];
    struct ps_store *s = NULL;
    uint32_t fmt = 99;
    FILE *f;

    hp_tmpdir(tmp, sizeof tmp);
    /* a hetps store whose magic was overwritten */
    sub(dir, sizeof dir, tmp, "magic");
    s = open_ok(dir, NULL);
    ps_store_close(s);
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "magic", "NOTHETPS", 8), 0);
    CU_ASSERT_EQUAL(ps_store_open(dir, NULL, &s), HC_ERR_VERSION);
    CU_ASSERT_PTR_NULL(s);
    CHECK_MSG(dir);
    CHECK_MSG("not a hetps store (meta magic is \"NOTHETPS\"");
    CHECK_MSG("--data-dir");
    /* a newer format */
    sub(dir, sizeof dir, tmp, "format");
    s = open_ok(dir, NULL);
    ps_store_close(s);
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, "meta", "format", &fmt, 4), 0);
    CU_ASSERT_EQUAL(ps_store_open(dir, NULL, &s), HC_ERR_VERSION);
    CHECK_MSG("store format 99, but this hetps reads format 2");
    CHECK_MSG(dir);
    /* some other program's LMDB database */
    sub(dir, sizeof dir, tmp, "foreign");
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
    CU_ASSERT_EQUAL_FATAL(raw_put(dir, NULL, "foo", "bar", 3), 0);
    CU_ASSERT_EQUAL(ps_store_open(dir, NULL, &s), HC_ERR_VERSION);
    CHECK_MSG("not a hetps store (no \"meta\")");
    /* not an LMDB file at all */
    sub(dir, sizeof dir, tmp, "garbage");
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
    snprintf(file, sizeof file, "%s/data.mdb", dir);
    f = fopen(file, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 4096; i++)
        fputc("garbage!"[i % 8], f);
    fclose(f);
    CU_ASSERT_EQUAL(ps_store_open(dir, NULL, &s), HC_ERR_VERSION);
    CHECK_MSG(file);
    CHECK_MSG("is not an LMDB database");
    hp_rmtree(tmp);
}

static void test_verify_corruption(void)
{
    const size_t sizes[] = {40};
    char tmp[256];
    struct hc_layout l;
    struct vals v;
    struct ps_store *s;
    unsigned char key[8] = {0, 0, 0, 1, 0, 0, 0, 0};
    float bad = 12345.0f;

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 1, 1, 16);      /* blocks 16, 16, 8 */
    vals_make(&v, &l, 0);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, ADAM_OPTS,
                                        (const float *const *)v.b, NULL),
                          HC_OK);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);

    /* element 3 of block 1's parameters, header (and its CRC) untouched */
    CU_ASSERT_EQUAL_FATAL(raw_edit(tmp, "vars", key, 4,
                                   sizeof(struct ps_block_hdr) + 3 * 4, &bad,
                                   4), 0);
    s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_ERR_CRC);
    CHECK_MSG("parameters of block 1 (variable 0, offset 16, 16 elements)");
    CHECK_MSG("stored CRC32C");
    CHECK_MSG(tmp);
    ps_store_close(s);
    /* put it back: clean again; then damage slot 1 of block 2 */
    CU_ASSERT_EQUAL_FATAL(raw_edit(tmp, "vars", key, 4,
                                   sizeof(struct ps_block_hdr) + 3 * 4,
                                   &v.b[1][3], 4), 0);
    s = open_ok(tmp, NULL);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_OK);
    ps_store_close(s);
    {
        unsigned char skey[8] = {0, 0, 0, 1, 0, 0, 0, 2};

        CU_ASSERT_EQUAL_FATAL(raw_edit(tmp, "slots", skey, 8,
                                       sizeof(struct ps_block_hdr), &bad, 4),
                              0);
    }
    s = open_ok(tmp, NULL);
    CU_ASSERT_EQUAL(ps_store_verify(s), HC_ERR_CRC);
    CHECK_MSG("slot 1 of block 2 (variable 0, offset 32, 8 elements)");
    ps_store_close(s);
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

static void test_read_only_and_durability(void)
{
    const size_t sizes[] = {8};
    char tmp[256], dir[300];
    struct hc_layout l;
    struct ps_store_opts w = {.durability = PS_DURABLE_MACHINE, .sync_ms = 0};
    struct ps_store_opts ro = {.read_only = 1};
    struct ps_store *s, *r;
    struct ps_store_info info;
    struct hc_optim_conf sgd = {.type = HC_OPT_SGD, .lr = 1.0f};
    float g[8] = {-1, -1, -1, -1, -1, -1, -1, -1}, x[8];
    struct ps_update u = {0, 8, g, 1};

    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 1, 1, 8);
    s = open_ok(tmp, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL_FATAL(init_as(s, SIG, &l, 0, SGD_OPTS, NULL, NULL),
                          HC_OK);
    CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, &u, 1, NULL, 0, NULL), HC_OK);
    CU_ASSERT_EQUAL(ps_store_sync(s), HC_OK);
    ps_store_close(s);
    /* group commit */
    w.sync_ms = 5;
    s = open_ok(tmp, &w);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (int i = 0; i < 3; i++)
        CU_ASSERT_EQUAL(ps_store_apply(s, &sgd, &u, 1, NULL, 0, NULL), HC_OK);
    /* a read-only view (hetps inspect) beside the running writer */
    r = open_ok(tmp, &ro);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    ps_store_info(r, &info);
    CU_ASSERT_EQUAL(info.incarnation, 2);       /* not counted */
    CU_ASSERT_EQUAL(info.step, 4);
    CU_ASSERT_EQUAL(ps_store_read_block(r, 0, x, 8), HC_OK);
    CU_ASSERT_EQUAL(x[0], 4.0f);
    CU_ASSERT_EQUAL(ps_store_apply(r, &sgd, &u, 1, NULL, 0, NULL),
                    HC_ERR_INVAL);
    CHECK_MSG("read-only");
    CU_ASSERT_EQUAL(ps_store_verify(r), HC_OK);
    ps_store_close(r);
    ps_store_close(s);
    sub(dir, sizeof dir, tmp, "missing");
    CU_ASSERT_EQUAL(ps_store_open(dir, &ro, &r), HC_ERR_NOTFOUND);
    CHECK_MSG("no such directory");
    tl_free(&l);
    hp_rmtree(tmp);
}

/* ---- concurrent readers ------------------------------------------------ */

enum { CB = 4, CLEN = 1000, CSTEPS = 200 };

struct conc {
    struct ps_store *s;
    atomic_int done;
    atomic_int bad;
    atomic_uint reads;
};

/* Every element of every block of a snapshot equals the snapshot's step:
 * each apply adds exactly 1 to every element. */
static void *reader(void *arg)
{
    struct conc *c = arg;
    static _Thread_local float buf[CB][CLEN];
    uint64_t last = 0;

    while (!atomic_load(&c->done)) {
        struct ps_read r[CB];
        uint64_t step = 0;

        for (uint32_t b = 0; b < CB; b++)
            r[b] = (struct ps_read){b, 0, CLEN, buf[b], 0};
        if (ps_store_read(c->s, r, CB, &step) != HC_OK) {
            atomic_fetch_add(&c->bad, 1);
            break;
        }
        if (step < last)
            atomic_fetch_add(&c->bad, 1);
        last = step;
        for (uint32_t b = 0; b < CB; b++)
            for (uint32_t e = 0; e < CLEN; e++)
                if (buf[b][e] != (float)step) {
                    atomic_fetch_add(&c->bad, 1);
                    e = CLEN;
                    b = CB;
                }
        atomic_fetch_add(&c->reads, 1);
    }
    return NULL;
}

/* KiB of the map of DIR/data.mdb resident in this process (smaps' Rss). */
static long map_rss_kib(const char *dir)
{
    char line[512], want[300];
    long kib = -1;
    int in = 0;
    FILE *f = fopen("/proc/self/smaps", "r");

    snprintf(want, sizeof want, "%s/data.mdb", dir);
    while (f && fgets(line, sizeof line, f)) {
        char *dash = strchr(line, '-'), *sp = strchr(line, ' ');

        if (isxdigit((unsigned char)line[0]) && dash && sp && dash < sp)
            in = strstr(line, want) != NULL;        /* a mapping's line */
        else if (in && sscanf(line, "Rss: %ld kB", &kib) == 1)
            break;
    }
    if (f)
        fclose(f);
    return kib;
}

/* Pages of DIR/data.mdb the page cache holds, after dropping them when
 * drop is set. */
static size_t cached_pages(const char *dir, int drop)
{
    char path[300];
    struct stat st;
    size_t n = 0;
    int fd;

    snprintf(path, sizeof path, "%s/data.mdb", dir);
    if ((fd = open(path, O_RDONLY)) < 0 || fstat(fd, &st) != 0)
        return (size_t)-1;
    if (drop) {
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    if (st.st_size > 0) {
        long pg = sysconf(_SC_PAGESIZE);
        size_t np = ((size_t)st.st_size + (size_t)pg - 1) / (size_t)pg;
        unsigned char *vec = malloc(np);
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);

        if (vec && m != MAP_FAILED && mincore(m, (size_t)st.st_size, vec) == 0)
            for (size_t i = 0; i < np; i++)
                n += vec[i] & 1;
        if (m != MAP_FAILED)
            munmap(m, (size_t)st.st_size);
        free(vec);
    }
    close(fd);
    return n;
}

/* The open maps the used pages that the page cache holds, within its
 * budget, and never reads the rest from disk. */
static void test_map_ahead(void)
{
    const size_t sizes[] = {2u << 20};      /* 8 MiB of floats */
    char tmp[256];
    struct hc_layout l;
    struct ps_store_opts o = {.map_size = 64 << 20};
    struct ps_store *s;
    struct vals v;
    uint64_t ahead;
    long rss, off;

    s = one_var_store(tmp, sizeof tmp, &l, &v, sizes, 65536, &o, SGD_OPTS);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ps_store_close(s);

    /* Off: none; the open's own reads (with the kernel's fault-around)
     * are the map's resident size without it. */
    o.map_ahead_max = PS_STORE_MAP_AHEAD_OFF;
    s = open_ok(tmp, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT_EQUAL(ps_store_mapped_ahead(s), 0);
    off = map_rss_kib(tmp);
    CU_ASSERT(off >= 0 && off < 4 << 10);
    ps_store_close(s);

    /* A budget of 1 MiB: that much, no more. */
    o.map_ahead_max = 1 << 20;
    s = open_ok(tmp, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ahead = ps_store_mapped_ahead(s);
    rss = map_rss_kib(tmp);
    printf("\n  off: Rss %ld KiB; budget 1 MiB: %llu KiB mapped ahead, Rss "
           "%ld KiB; ", off, (unsigned long long)(ahead >> 10), rss);
    CU_ASSERT(ahead > 0 && ahead <= (1u << 20));
    CU_ASSERT(rss <= off + (1 << 10));
    ps_store_close(s);

    /* In the page cache (just written): all of it, mapped. */
    o.map_ahead_max = 0;
    s = open_ok(tmp, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ahead = ps_store_mapped_ahead(s);
    rss = map_rss_kib(tmp);
    printf("whole: %llu KiB, Rss %ld KiB; ", (unsigned long long)(ahead >> 10),
           rss);
    CU_ASSERT(ahead >= (8u << 20));
    CU_ASSERT(ahead <= (9u << 20));
    CU_ASSERT(rss >= 8 << 10);
    CU_ASSERT(store_equals(s, &v));
    ps_store_close(s);

    /* Out of the page cache: not read back (the open reads a few pages). */
    CU_ASSERT(cached_pages(tmp, 1) < 64);
    s = open_ok(tmp, &o);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    ahead = ps_store_mapped_ahead(s);
    printf("cold: %llu KiB, %zu pages cached ", (unsigned long long)(ahead >> 10),
           cached_pages(tmp, 0));
    CU_ASSERT(ahead < (256u << 10));
    CU_ASSERT(cached_pages(tmp, 0) < 128);
    ps_store_close(s);
    vals_free(&v);
    tl_free(&l);
    hp_rmtree(tmp);
}

static void test_concurrent_readers(void)
{
    const size_t sizes[] = {CB * CLEN};
    char tmp[256];
    struct hc_layout l;
    struct hc_optim_conf sgd = {.type = HC_OPT_SGD, .lr = 1.0f};
    static float g[CLEN];
    struct ps_update u[CB];
    struct conc c = {0};
    pthread_t th[2];
    int rv = HC_OK;

    for (int i = 0; i < CLEN; i++)
        g[i] = -1;
    for (uint32_t b = 0; b < CB; b++)
        u[b] = (struct ps_update){b, CLEN, g, 1};
    hp_tmpdir(tmp, sizeof tmp);
    tl_build(&l, sizes, 1, 1, CLEN);
    c.s = open_ok(tmp, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c.s);
    CU_ASSERT_EQUAL_FATAL(init_as(c.s, SIG, &l, 0, SGD_OPTS, NULL, NULL),
                          HC_OK);
    for (int i = 0; i < 2; i++)
        CU_ASSERT_EQUAL_FATAL(pthread_create(&th[i], NULL, reader, &c), 0);
    for (int t = 0; t < CSTEPS && rv == HC_OK; t++) {
        rv = ps_store_apply(c.s, &sgd, u, CB, NULL, 0, NULL);
        if (t % 50 == 0)    /* let the readers in on a 2-core machine */
            while (atomic_load(&c.reads) < (unsigned)(t / 50 + 1) &&
                   atomic_load(&c.bad) == 0)
                sched_yield();
    }
    atomic_store(&c.done, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CU_ASSERT_EQUAL(rv, HC_OK);
    CU_ASSERT_EQUAL(ps_store_step(c.s), CSTEPS);
    CU_ASSERT_EQUAL(atomic_load(&c.bad), 0);
    CU_ASSERT(atomic_load(&c.reads) >= 4);
    ps_store_close(c.s);
    tl_free(&l);
    hp_rmtree(tmp);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("store", NULL, NULL);

    hc_log_set_level(HC_LOG_WARN);      /* opens and growth log at info */

    CU_add_test(s, "open fresh, incarnations", test_open_fresh);
    CU_add_test(s, "init, reopen, idempotent init", test_init_reopen);
    CU_add_test(s, "init mismatches", test_init_mismatch);
    CU_add_test(s, "optimizer record version 1 opens and trains on",
                test_optim_record_v1);
    CU_add_test(s, "format 1 (JSON optimizer) read, converted on open",
                test_format1_converted);
    CU_add_test(s, "init is whole or nothing, with the definitions",
                test_init_whole);
    CU_add_test(s, "apply sgd, read ranges", test_apply_sgd);
    CU_add_test(s, "apply adam = optimizer (direct)", test_apply_adam_direct);
    CU_add_test(s, "apply adam = optimizer (scratch)",
                test_apply_adam_scratch);
    CU_add_test(s, "group commit = steps one by one (direct, scratch)",
                test_apply_group);
    CU_add_test(s, "a large step split over threads = one thread",
                test_apply_split);
    CU_add_test(s, "a step in parts = one apply, read before its commit; "
                   "left open = not applied", test_apply_step_parts);
    CU_add_test(s, "apply errors roll back", test_apply_errors);
    CU_add_test(s, "records survive reopen; format 1 read", test_records);
    CU_add_test(s, "map full, then growth", test_map_full);
    CU_add_test(s, "map grows during init", test_map_growth_init);
    CU_add_test(s, "foreign and damaged files refused", test_refuse_foreign);
    CU_add_test(s, "verify finds CRC damage", test_verify_corruption);
    CU_add_test(s, "read-only open, durability", test_read_only_and_durability);
    CU_add_test(s, "readers during 200 applies", test_concurrent_readers);
    CU_add_test(s, "the open maps the cached pages ahead, within its budget, "
                   "reading nothing from disk", test_map_ahead);
}
