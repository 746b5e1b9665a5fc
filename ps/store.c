/*
 * store.c — a shard's state in LMDB (see store.h for the contract and the
 * on-disk layout).
 *
 * Transactions. Every write goes through write_txn(), which begins a
 * write transaction, runs a body, commits, and on MDB_MAP_FULL aborts,
 * doubles the map (up to map_max) and runs the body again; a failed
 * transaction is always aborted, never reused. Reads use read-only
 * transactions kept in a small pool (reset, then renewed), so a pull
 * allocates nothing and keeps its reader slot. Every transaction holds
 * `maplock` shared; changing the map size (growth here, or adopting a size
 * another process set: MDB_MAP_RESIZED) takes it exclusively, because
 * LMDB allows mdb_env_set_mapsize only while no transaction is active.
 *
 * Apply. For each block the old parameters and slots are read (mdb_get),
 * then the new values are reserved (mdb_put with MDB_RESERVE, same size)
 * and the optimizer writes straight into them. With a same-size value
 * LMDB either returns the old location (the page is already dirty in this
 * transaction: the update runs in place) or fresh space (a copied leaf or
 * new overflow pages) while the old copy stays readable until commit —
 * ps_optim_apply handles both. One hazard remains: when a transaction has
 * dirtied about 128K pages, LMDB spills dirty pages to disk at the next
 * put and frees their buffers, which would move reservations made earlier.
 * Applies estimated to dirty more than direct_max_pages therefore compute
 * into the store's scratch first and copy each value in right after its
 * own reservation. Values not 4-byte aligned (small values sit in leaf
 * pages, which LMDB aligns to 2 bytes only) go through the scratch too.
 *
 * CRC32C: hc_crc32c (common/crc32c.h), the wire's checksum, so a block's
 * stored CRC is the one a pull of the whole block sends.
 */
#include "store.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <lmdb.h>

#include "crc32c.h"
#include "err.h"
#include "log.h"
#include "optimizer.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the hetps store keeps little-endian float32; big-endian hosts are not supported"
#endif

#define HDR_SIZE sizeof(struct ps_block_hdr)
#define POOL_MAX 8
#define DEFAULT_MAP_SIZE (1ull << 30)
#define DEFAULT_MAP_MAX (64ull << 30)
#define DEFAULT_DIRECT_PAGES 65536u

_Static_assert(sizeof(struct ps_block_hdr) == 24, "block header is 24 bytes");

/* Value of a "records" entry, followed by reply_len bytes. */
struct record_hdr {
    uint64_t incarnation;
    uint64_t request_id;
    uint64_t step;              /* step after the apply that wrote it */
    uint32_t reply_len;
    uint32_t pad;
};

struct ps_store {
    char *dir;
    MDB_env *env;
    int env_open;               /* mdb_env_open succeeded */
    MDB_dbi dbi_meta, dbi_vars, dbi_slots, dbi_recs;
    int read_only;
    enum ps_durability durability;
    unsigned sync_ms;
    uint64_t direct_max_pages;
    _Atomic uint64_t map_size;  /* written under maplock, read anywhere */
    _Atomic uint64_t map_max;
    unsigned psize;

    pthread_mutex_t wmu;        /* one writer at a time (scratch, seen) */
    pthread_rwlock_t maplock;   /* shared: in a txn; exclusive: resizing */
    pthread_mutex_t poolmu;
    MDB_txn *pool[POOL_MAX];    /* reset read transactions */
    int n_pool;

    _Atomic uint64_t step;
    _Atomic int initialised;
    uint64_t incarnation;
    uint64_t signature, layout_hash;
    uint32_t block_elems, n_shards, shard, n_blocks, n_slots;
    struct hc_optim_conf optim;
    char optim_json[PS_OPTIM_JSON_MAX];

    struct ps_block *blocks;    /* (n_blocks) */
    uint32_t max_len;           /* longest block */
    float *scratch;             /* (2 * 3, max_len): in 0..2, out 3..5 */
    uint32_t *seen;             /* (n_blocks) apply generation stamps */
    uint32_t seen_gen;
    uint64_t last_sync_ms;
};

/* ---- small helpers ----------------------------------------------------- */

static void be32(unsigned char *b, uint32_t x)
{
    b[0] = (unsigned char)(x >> 24);
    b[1] = (unsigned char)(x >> 16);
    b[2] = (unsigned char)(x >> 8);
    b[3] = (unsigned char)x;
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* "64 KiB", "1024 MiB" */
static const char *fmt_bytes(char *buf, size_t cap, uint64_t b)
{
    if (b < (1u << 20))
        snprintf(buf, cap, "%llu KiB", (unsigned long long)(b >> 10));
    else
        snprintf(buf, cap, "%llu MiB", (unsigned long long)(b >> 20));
    return buf;
}

static int is_aligned4(const void *p)
{
    return ((uintptr_t)p & 3u) == 0;
}

/* Translate an LMDB code into an hc code with a message. */
static int lmdb_err(const struct ps_store *s, int rc, const char *what)
{
    switch (rc) {
    case MDB_MAP_FULL:
        return hc_err_set(HC_ERR_MAPFULL, "store %s: %s: the LMDB map is full",
                          s->dir, what);
    case MDB_READERS_FULL:
        return hc_err_set(HC_ERR_LIMIT, "store %s: %s: every LMDB reader slot "
                          "is in use; raise max_readers", s->dir, what);
    case ENOMEM:
        return hc_err_set(HC_ERR_NOMEM, "store %s: %s: out of memory",
                          s->dir, what);
    case EIO:
    case ENOSPC:
    case EACCES:
    case EROFS:
        return hc_err_set(HC_ERR_IO, "store %s: %s: %s", s->dir, what,
                          mdb_strerror(rc));
    case MDB_CORRUPTED:
    case MDB_PAGE_NOTFOUND:
        return hc_err_set(HC_ERR_STORE, "store %s: %s: %s; the store is "
                          "damaged: restore it from a checkpoint or re-create "
                          "it", s->dir, what, mdb_strerror(rc));
    default:
        return hc_err_set(HC_ERR_STORE, "store %s: %s: %s", s->dir, what,
                          mdb_strerror(rc));
    }
}

static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    size_t len = strlen(dir);

    if (len == 0 || len >= sizeof path)
        return hc_err_set(HC_ERR_INVAL, "store directory \"%s\": empty or "
                          "longer than %zu bytes", dir, sizeof path - 1);
    memcpy(path, dir, len + 1);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return hc_err_set(HC_ERR_IO, "store directory %s: cannot create "
                              "%s: %s", dir, path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return hc_err_set(HC_ERR_IO, "store directory %s: cannot create it: "
                          "%s", dir, strerror(errno));
    return HC_OK;
}

/* ---- map size and transactions ----------------------------------------- */

/* Set the map size (0: adopt the size in the file) with no transaction
 * active in this process. Called without maplock held. */
static int map_resize(struct ps_store *s, uint64_t size)
{
    MDB_envinfo info;
    int rc;

    pthread_rwlock_wrlock(&s->maplock);
    rc = mdb_env_set_mapsize(s->env, (size_t)size);
    if (rc == 0 && mdb_env_info(s->env, &info) == 0)
        s->map_size = info.me_mapsize;
    pthread_rwlock_unlock(&s->maplock);
    if (rc != 0)
        return lmdb_err(s, rc, "resizing the map");
    if (s->map_size > s->map_max)
        s->map_max = s->map_size;
    return HC_OK;
}

/* Double the map after MDB_MAP_FULL, or explain why not. */
static int map_grow(struct ps_store *s, const char *what)
{
    char a[32], b[32];
    uint64_t old = s->map_size, want = old * 2;
    int rv;

    if (want > s->map_max)
        want = s->map_max;
    if (want <= old)
        return hc_err_set(HC_ERR_MAPFULL, "store %s: %s: the LMDB map is full "
                          "at %s and may not grow (the limit, map_max, is %s): "
                          "raise it with --map-max or free space in the store; "
                          "this change was not applied and the store is "
                          "unchanged", s->dir, what,
                          fmt_bytes(a, sizeof a, old),
                          fmt_bytes(b, sizeof b, s->map_max));
    if ((rv = map_resize(s, want)) != HC_OK)
        return rv;
    hc_info("store %s: LMDB map grown from %s to %s", s->dir,
            fmt_bytes(a, sizeof a, old), fmt_bytes(b, sizeof b, s->map_size));
    return HC_OK;
}

/* Begin a transaction with maplock held shared; on MDB_MAP_RESIZED (another
 * process grew the map) adopt the new size and try again. */
static int txn_begin(struct ps_store *s, unsigned flags, MDB_txn **txn)
{
    int rc = 0;

    for (int tries = 0; tries < 4; tries++) {
        MDB_txn *t = NULL;

        if (flags & MDB_RDONLY) {
            pthread_mutex_lock(&s->poolmu);
            if (s->n_pool > 0)
                t = s->pool[--s->n_pool];
            pthread_mutex_unlock(&s->poolmu);
        }
        pthread_rwlock_rdlock(&s->maplock);
        if (t) {
            rc = mdb_txn_renew(t);
            if (rc != 0)
                mdb_txn_abort(t);
        } else {
            rc = mdb_txn_begin(s->env, NULL, flags, &t);
        }
        if (rc == 0) {
            *txn = t;
            return HC_OK;
        }
        pthread_rwlock_unlock(&s->maplock);
        if (rc != MDB_MAP_RESIZED)
            break;
        if (map_resize(s, 0) != HC_OK)
            return HC_ERR_STORE;
    }
    return lmdb_err(s, rc, "starting a transaction");
}

/* End a read transaction from txn_begin: keep it for reuse. */
static void rtxn_end(struct ps_store *s, MDB_txn *t)
{
    mdb_txn_reset(t);
    pthread_rwlock_unlock(&s->maplock);
    pthread_mutex_lock(&s->poolmu);
    if (s->n_pool < POOL_MAX) {
        s->pool[s->n_pool++] = t;
        t = NULL;
    }
    pthread_mutex_unlock(&s->poolmu);
    if (t)
        mdb_txn_abort(t);
}

typedef int (*write_fn)(struct ps_store *s, MDB_txn *txn, void *arg);

/* Run `fn` in a write transaction and commit; grow the map and run it
 * again on MDB_MAP_FULL. The caller holds wmu. */
static int write_txn(struct ps_store *s, write_fn fn, void *arg,
                     const char *what)
{
    for (;;) {
        MDB_txn *txn = NULL;
        int rv, rc;

        if ((rv = txn_begin(s, 0, &txn)) != HC_OK)
            return rv;
        rv = fn(s, txn, arg);
        if (rv == HC_OK) {
            rc = mdb_txn_commit(txn);
            if (rc != 0)
                rv = lmdb_err(s, rc, what);
        } else {
            mdb_txn_abort(txn);
        }
        pthread_rwlock_unlock(&s->maplock);
        if (rv != HC_ERR_MAPFULL)
            return rv;
        if ((rv = map_grow(s, what)) != HC_OK)
            return rv;
    }
}

/* ---- meta -------------------------------------------------------------- */

static int meta_get(struct ps_store *s, MDB_txn *txn, const char *key,
                    MDB_val *v)
{
    MDB_val k = {strlen(key), (void *)key};
    int rc = mdb_get(txn, s->dbi_meta, &k, v);

    if (rc == MDB_NOTFOUND)
        return HC_ERR_NOTFOUND;
    if (rc != 0)
        return lmdb_err(s, rc, "reading meta");
    return HC_OK;
}

static int meta_put(struct ps_store *s, MDB_txn *txn, const char *key,
                    const void *data, size_t len)
{
    MDB_val k = {strlen(key), (void *)key}, v = {len, (void *)data};
    int rc = mdb_put(txn, s->dbi_meta, &k, &v, 0);

    return rc ? lmdb_err(s, rc, "writing meta") : HC_OK;
}

static int meta_put_u32(struct ps_store *s, MDB_txn *txn, const char *key,
                        uint32_t x)
{
    return meta_put(s, txn, key, &x, sizeof x);
}

static int meta_put_u64(struct ps_store *s, MDB_txn *txn, const char *key,
                        uint64_t x)
{
    return meta_put(s, txn, key, &x, sizeof x);
}

/* Read a fixed-size meta value; a missing key or a wrong size is damage. */
static int meta_fixed(struct ps_store *s, MDB_txn *txn, const char *key,
                      void *dst, size_t len)
{
    MDB_val v;
    int rv = meta_get(s, txn, key, &v);

    if (rv == HC_ERR_NOTFOUND)
        return hc_err_set(HC_ERR_STORE, "store %s: meta key \"%s\" is missing; "
                          "the store is damaged: restore it from a checkpoint "
                          "or re-create it", s->dir, key);
    if (rv != HC_OK)
        return rv;
    if (v.mv_size != len)
        return hc_err_set(HC_ERR_STORE, "store %s: meta key \"%s\" has %zu "
                          "bytes, expected %zu; the store is damaged", s->dir,
                          key, v.mv_size, len);
    memcpy(dst, v.mv_data, len);
    return HC_OK;
}

/* Check the magic and the format of an existing store. */
static int check_magic(struct ps_store *s, MDB_txn *txn)
{
    MDB_val v;
    uint32_t format;
    int rv = meta_get(s, txn, "magic", &v);

    if (rv != HC_OK && rv != HC_ERR_NOTFOUND)
        return rv;
    if (rv == HC_ERR_NOTFOUND || v.mv_size != strlen(PS_STORE_MAGIC) ||
        memcmp(v.mv_data, PS_STORE_MAGIC, v.mv_size) != 0) {
        char shown[17] = "";

        if (rv == HC_OK)
            for (size_t i = 0; i < v.mv_size && i < sizeof shown - 1; i++) {
                char ch = ((const char *)v.mv_data)[i];

                shown[i] = ch >= 32 && ch < 127 ? ch : '?';
                shown[i + 1] = '\0';
            }
        return hc_err_set(HC_ERR_VERSION, "store %s: not a hetps store (meta "
                          "magic is \"%s\", expected \"%s\"): point --data-dir "
                          "at a hetps store or at an empty directory", s->dir,
                          shown, PS_STORE_MAGIC);
    }
    if ((rv = meta_fixed(s, txn, "format", &format, sizeof format)) != HC_OK)
        return rv;
    if (format != PS_STORE_FORMAT)
        return hc_err_set(HC_ERR_VERSION, "store %s: store format %u, but this "
                          "hetps reads format %u: use the hetps version that "
                          "wrote it (export the weights with it) or start from "
                          "a fresh --data-dir", s->dir, format,
                          PS_STORE_FORMAT);
    return HC_OK;
}

/* Size a float scratch and the seen stamps for the block table. */
static int alloc_work(struct ps_store *s)
{
    free(s->scratch);
    free(s->seen);
    s->scratch = calloc((size_t)6 * (s->max_len ? s->max_len : 1),
                        sizeof(float));
    s->seen = calloc(s->n_blocks ? s->n_blocks : 1, sizeof(uint32_t));
    s->seen_gen = 0;
    if (!s->scratch || !s->seen)
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for %u "
                          "blocks", s->dir, s->n_blocks);
    return HC_OK;
}

/* Load the block table from "vars": keys 0..n_blocks-1, headers valid. */
static int load_blocks(struct ps_store *s, MDB_txn *txn)
{
    MDB_cursor *cur = NULL;
    MDB_val k, v;
    uint32_t i = 0;
    int rc, rv = HC_OK;

    free(s->blocks);
    s->blocks = calloc(s->n_blocks ? s->n_blocks : 1, sizeof *s->blocks);
    s->max_len = 0;
    if (!s->blocks)
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for %u "
                          "blocks", s->dir, s->n_blocks);
    if ((rc = mdb_cursor_open(txn, s->dbi_vars, &cur)) != 0)
        return lmdb_err(s, rc, "reading the blocks");
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), i++) {
        unsigned char want[4];
        struct ps_block_hdr h;

        be32(want, i);
        if (i >= s->n_blocks || k.mv_size != 4 || memcmp(k.mv_data, want, 4)) {
            rv = hc_err_set(HC_ERR_STORE, "store %s: the blocks are not "
                            "numbered 0..%u (entry %u); the store is damaged",
                            s->dir, s->n_blocks - 1, i);
            goto out;
        }
        if (v.mv_size < HDR_SIZE)
            goto bad;
        memcpy(&h, v.mv_data, HDR_SIZE);
        if (h.kind != 0 || h.length == 0 || h.length > s->block_elems ||
            v.mv_size != HDR_SIZE + (size_t)h.length * 4)
            goto bad;
        s->blocks[i] = (struct ps_block){h.var, h.length, h.offset};
        if (h.length > s->max_len)
            s->max_len = h.length;
    }
    if (rc != MDB_NOTFOUND) {
        rv = lmdb_err(s, rc, "reading the blocks");
        goto out;
    }
    if (i != s->n_blocks) {
        rv = hc_err_set(HC_ERR_STORE, "store %s: %u blocks stored but meta "
                        "says %u; the store is damaged", s->dir, i,
                        s->n_blocks);
        goto out;
    }
    rv = alloc_work(s);
    goto out;
bad:
    rv = hc_err_set(HC_ERR_STORE, "store %s: block %u has a bad header or "
                    "size (%zu bytes); the store is damaged", s->dir, i,
                    v.mv_size);
out:
    mdb_cursor_close(cur);
    return rv;
}

/* Read what meta says into the store (magic already checked). */
static int load_meta(struct ps_store *s, MDB_txn *txn)
{
    MDB_val v;
    uint64_t step;
    char src[PATH_MAX + 32];
    int rv = meta_get(s, txn, "incarnation", &v);

    if (rv == HC_OK && v.mv_size == sizeof s->incarnation)
        memcpy(&s->incarnation, v.mv_data, sizeof s->incarnation);
    else if (rv != HC_ERR_NOTFOUND && rv != HC_OK)
        return rv;
    rv = meta_get(s, txn, "signature", &v);
    if (rv == HC_ERR_NOTFOUND) {
        atomic_store(&s->initialised, 0);
        return HC_OK;
    }
    if (rv != HC_OK)
        return rv;
    if ((rv = meta_fixed(s, txn, "signature", &s->signature, 8)) ||
        (rv = meta_fixed(s, txn, "layout_hash", &s->layout_hash, 8)) ||
        (rv = meta_fixed(s, txn, "block_elems", &s->block_elems, 4)) ||
        (rv = meta_fixed(s, txn, "n_shards", &s->n_shards, 4)) ||
        (rv = meta_fixed(s, txn, "shard", &s->shard, 4)) ||
        (rv = meta_fixed(s, txn, "n_blocks", &s->n_blocks, 4)) ||
        (rv = meta_fixed(s, txn, "n_slots", &s->n_slots, 4)) ||
        (rv = meta_fixed(s, txn, "step", &step, 8)))
        return rv;
    if ((rv = meta_get(s, txn, "optimizer", &v)) != HC_OK)
        return rv == HC_ERR_NOTFOUND ? meta_fixed(s, txn, "optimizer", NULL, 0)
                                     : rv;
    snprintf(src, sizeof src, "store %s meta", s->dir);
    if (ps_optim_from_json(v.mv_data, v.mv_size, src, &s->optim) != HC_OK) {
        char why[512];

        snprintf(why, sizeof why, "%s", hc_err_msg());
        return hc_err_set(HC_ERR_STORE, "%s; the store is damaged", why);
    }
    if (v.mv_size >= sizeof s->optim_json)
        return hc_err_set(HC_ERR_STORE, "store %s: meta optimizer text is too "
                          "long; the store is damaged", s->dir);
    memcpy(s->optim_json, v.mv_data, v.mv_size);
    s->optim_json[v.mv_size] = '\0';
    if (s->n_slots > PS_STORE_MAX_SLOTS ||
        (int)s->n_slots != ps_optim_slots(&s->optim) || s->block_elems == 0)
        return hc_err_set(HC_ERR_STORE, "store %s: meta disagrees with itself "
                          "(n_slots %u, block_elems %u); the store is damaged",
                          s->dir, s->n_slots, s->block_elems);
    if ((rv = load_blocks(s, txn)) != HC_OK)
        return rv;
    atomic_store(&s->step, step);
    atomic_store(&s->initialised, 1);
    return HC_OK;
}

/* Open the named databases of an existing or fresh store. */
static int open_dbs(struct ps_store *s, MDB_txn *txn, unsigned flags)
{
    static const char *const names[] = {"vars", "slots", "records"};
    MDB_dbi *dst[] = {&s->dbi_vars, &s->dbi_slots, &s->dbi_recs};
    int rc;

    for (int i = 0; i < 3; i++)
        if ((rc = mdb_dbi_open(txn, names[i], flags, dst[i])) != 0)
            return rc == MDB_NOTFOUND
                       ? hc_err_set(HC_ERR_STORE, "store %s: database \"%s\" "
                                    "is missing; the store is damaged",
                                    s->dir, names[i])
                       : lmdb_err(s, rc, "opening the databases");
    return HC_OK;
}

/* First transaction of an open: find or create meta, check it, count the
 * incarnation, load. */
static int open_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    unsigned wflags = s->read_only ? 0 : MDB_CREATE;
    int rc, rv, fresh = 0;

    (void)arg;
    rc = mdb_dbi_open(txn, "meta", 0, &s->dbi_meta);
    if (rc == MDB_NOTFOUND) {
        MDB_dbi main_dbi;
        MDB_stat st;

        if ((rc = mdb_dbi_open(txn, NULL, 0, &main_dbi)) != 0 ||
            (rc = mdb_stat(txn, main_dbi, &st)) != 0)
            return lmdb_err(s, rc, "opening the store");
        if (st.ms_entries > 0)
            return hc_err_set(HC_ERR_VERSION, "store %s: holds an LMDB database "
                              "that is not a hetps store (no \"meta\"): point "
                              "--data-dir at a hetps store or at an empty "
                              "directory", s->dir);
        if (s->read_only)
            return hc_err_set(HC_ERR_NOTFOUND, "store %s: empty: no hetps "
                              "store has been written there yet", s->dir);
        if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->dbi_meta)) != 0)
            return lmdb_err(s, rc, "creating the store");
        fresh = 1;
    } else if (rc != 0) {
        return rc == MDB_INCOMPATIBLE
                   ? hc_err_set(HC_ERR_VERSION, "store %s: holds an LMDB "
                                "database that is not a hetps store: point "
                                "--data-dir at a hetps store or at an empty "
                                "directory", s->dir)
                   : lmdb_err(s, rc, "opening the store");
    }
    if ((rv = open_dbs(s, txn, wflags)) != HC_OK)
        return rv;
    if (fresh) {
        if ((rv = meta_put(s, txn, "magic", PS_STORE_MAGIC,
                           strlen(PS_STORE_MAGIC))) != HC_OK ||
            (rv = meta_put_u32(s, txn, "format", PS_STORE_FORMAT)) != HC_OK)
            return rv;
    } else if ((rv = check_magic(s, txn)) != HC_OK) {
        return rv;
    }
    if ((rv = load_meta(s, txn)) != HC_OK)
        return rv;
    if (!s->read_only) {
        s->incarnation++;
        if ((rv = meta_put_u64(s, txn, "incarnation", s->incarnation)) != HC_OK)
            return rv;
    }
    return HC_OK;
}

int ps_store_open(const char *dir, const struct ps_store_opts *o,
                  struct ps_store **out)
{
    static const struct ps_store_opts defaults;
    struct ps_store *s = NULL;
    MDB_envinfo info;
    MDB_stat st;
    unsigned flags = MDB_NOTLS;
    int rc, rv = HC_OK, dead = 0;
    char a[32];

    *out = NULL;
    if (!o)
        o = &defaults;
    if (!dir || !*dir)
        return hc_err_set(HC_ERR_INVAL, "store: no directory given "
                          "(--data-dir)");
    if (o->durability != PS_DURABLE_NONE && o->durability != PS_DURABLE_MACHINE)
        return hc_err_set(HC_ERR_INVAL, "store %s: unknown durability %d",
                          dir, (int)o->durability);
    s = calloc(1, sizeof *s);
    if (!s || !(s->dir = strdup(dir))) {
        free(s);
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory", dir);
    }
    pthread_mutex_init(&s->wmu, NULL);
    pthread_mutex_init(&s->poolmu, NULL);
    {
        pthread_rwlockattr_t ra;

        pthread_rwlockattr_init(&ra);
        pthread_rwlockattr_setkind_np(&ra,
            PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
        pthread_rwlock_init(&s->maplock, &ra);
        pthread_rwlockattr_destroy(&ra);
    }
    s->read_only = o->read_only;
    s->durability = o->durability;
    s->sync_ms = o->sync_ms;
    s->direct_max_pages = o->direct_max_pages ? o->direct_max_pages
                                              : DEFAULT_DIRECT_PAGES;
    s->map_size = o->map_size ? o->map_size : DEFAULT_MAP_SIZE;
    s->map_max = o->map_max ? o->map_max : DEFAULT_MAP_MAX;
    if (s->map_max < s->map_size)
        s->map_max = s->map_size;
    s->last_sync_ms = now_ms();

    if (s->read_only) {
        struct stat sb;

        if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            rv = hc_err_set(HC_ERR_NOTFOUND, "store %s: no such directory",
                            dir);
            goto fail;
        }
        flags |= MDB_RDONLY;
    } else if ((rv = mkdir_p(dir)) != HC_OK) {
        goto fail;
    }
    /* Writes go straight into the map: no dirty-page copies malloc'd per
     * transaction and no write(2) of them at commit (measured: most of a
     * push's cost without it). The file is sparse up to the map size. */
    if (!o->read_only)
        flags |= MDB_WRITEMAP;
    if (s->durability == PS_DURABLE_NONE)
        flags |= MDB_NOSYNC | MDB_NOMETASYNC;
    else if (s->sync_ms > 0)
        flags |= MDB_NOSYNC;

    if ((rc = mdb_env_create(&s->env)) != 0 ||
        (rc = mdb_env_set_maxdbs(s->env, 8)) != 0 ||
        (rc = mdb_env_set_maxreaders(s->env, o->max_readers ? o->max_readers
                                                            : 126)) != 0 ||
        (rc = mdb_env_set_mapsize(s->env, (size_t)s->map_size)) != 0) {
        rv = lmdb_err(s, rc, "creating the environment");
        goto fail;
    }
    rc = mdb_env_open(s->env, dir, flags, 0644);
    if (rc != 0) {
        if (rc == MDB_INVALID)
            rv = hc_err_set(HC_ERR_VERSION, "store %s: %s/data.mdb is not an "
                            "LMDB database or is damaged: point --data-dir at "
                            "a hetps store or at an empty directory", dir, dir);
        else if (rc == MDB_VERSION_MISMATCH)
            rv = hc_err_set(HC_ERR_VERSION, "store %s: written by an LMDB "
                            "version this build cannot read (%s): use the "
                            "hetps build that wrote it", dir,
                            mdb_version(NULL, NULL, NULL));
        else if (rc == ENOENT || rc == EACCES || rc == EROFS || rc == ENOTDIR)
            rv = hc_err_set(HC_ERR_IO, "store %s: cannot open: %s", dir,
                            mdb_strerror(rc));
        else
            rv = lmdb_err(s, rc, "opening the environment");
        goto fail;
    }
    s->env_open = 1;
    if ((rc = mdb_env_info(s->env, &info)) != 0 ||
        (rc = mdb_env_stat(s->env, &st)) != 0) {
        rv = lmdb_err(s, rc, "reading the environment");
        goto fail;
    }
    s->map_size = info.me_mapsize;
    if (s->map_max < s->map_size)
        s->map_max = s->map_size;
    s->psize = st.ms_psize;
    if ((rc = mdb_reader_check(s->env, &dead)) != 0) {
        rv = lmdb_err(s, rc, "clearing stale readers");
        goto fail;
    }
    if (dead > 0)
        hc_info("store %s: cleared %d stale reader slot%s left by crashed "
                "processes", dir, dead, dead == 1 ? "" : "s");

    if (s->read_only) {
        MDB_txn *txn = NULL;

        if ((rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn)) != 0) {
            rv = lmdb_err(s, rc, "opening the store");
            goto fail;
        }
        rv = open_body(s, txn, NULL);
        if (rv == HC_OK && (rc = mdb_txn_commit(txn)) != 0)
            rv = lmdb_err(s, rc, "opening the store");
        else if (rv != HC_OK)
            mdb_txn_abort(txn);
    } else {
        pthread_mutex_lock(&s->wmu);
        rv = write_txn(s, open_body, NULL, "opening the store");
        pthread_mutex_unlock(&s->wmu);
    }
    if (rv != HC_OK)
        goto fail;
    hc_info("store %s: opened (incarnation %llu, %s, step %llu, map %s)", dir,
            (unsigned long long)s->incarnation,
            atomic_load(&s->initialised) ? "initialised" : "empty",
            (unsigned long long)atomic_load(&s->step),
            fmt_bytes(a, sizeof a, s->map_size));
    *out = s;
    return HC_OK;
fail:
    ps_store_close(s);
    return rv;
}

void ps_store_close(struct ps_store *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n_pool; i++)
        mdb_txn_abort(s->pool[i]);
    s->n_pool = 0;
    if (s->env) {
        if (s->env_open && !s->read_only) {
            int rc = mdb_env_sync(s->env, 1);

            if (rc != 0)
                hc_warn("store %s: sync at close failed: %s", s->dir,
                        mdb_strerror(rc));
        }
        mdb_env_close(s->env);
    }
    pthread_rwlock_destroy(&s->maplock);
    pthread_mutex_destroy(&s->poolmu);
    pthread_mutex_destroy(&s->wmu);
    free(s->blocks);
    free(s->scratch);
    free(s->seen);
    free(s->dir);
    free(s);
}

/* ---- init -------------------------------------------------------------- */

struct init_arg {
    uint64_t signature, layout_hash;
    uint32_t block_elems, n_shards, shard, n_blocks, n_slots;
    const char *optim_json;
    const struct ps_block *blocks;  /* (n_blocks) in local order */
    const float *const *init;
};

/* Put a block value (header + data, or zeros when data is NULL). */
static int put_block(struct ps_store *s, MDB_txn *txn, MDB_dbi dbi,
                     const void *key, size_t klen, const struct ps_block *b,
                     uint32_t kind, const float *data)
{
    MDB_val k = {klen, (void *)key};
    MDB_val v = {HDR_SIZE + (size_t)b->length * 4, NULL};
    struct ps_block_hdr h = {b->var, b->length, b->offset, 0, kind};
    unsigned char *dst;
    int rc = mdb_put(txn, dbi, &k, &v, MDB_RESERVE);

    if (rc != 0)
        return lmdb_err(s, rc, "writing a block");
    dst = v.mv_data;
    if (data)
        memcpy(dst + HDR_SIZE, data, (size_t)b->length * 4);
    else
        memset(dst + HDR_SIZE, 0, (size_t)b->length * 4);
    h.crc = hc_crc32c(dst + HDR_SIZE, (size_t)b->length * 4);
    memcpy(dst, &h, HDR_SIZE);
    return HC_OK;
}

static int init_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    const struct init_arg *a = arg;
    int rv;

    if ((rv = meta_put_u64(s, txn, "signature", a->signature)) ||
        (rv = meta_put_u64(s, txn, "layout_hash", a->layout_hash)) ||
        (rv = meta_put_u32(s, txn, "block_elems", a->block_elems)) ||
        (rv = meta_put_u32(s, txn, "n_shards", a->n_shards)) ||
        (rv = meta_put_u32(s, txn, "shard", a->shard)) ||
        (rv = meta_put_u32(s, txn, "n_blocks", a->n_blocks)) ||
        (rv = meta_put_u32(s, txn, "n_slots", a->n_slots)) ||
        (rv = meta_put(s, txn, "optimizer", a->optim_json,
                       strlen(a->optim_json))) ||
        (rv = meta_put_u64(s, txn, "step", 0)))
        return rv;
    for (uint32_t i = 0; i < a->n_blocks; i++) {
        unsigned char key[8];

        be32(key, i);
        if ((rv = put_block(s, txn, s->dbi_vars, key, 4, &a->blocks[i], 0,
                            a->init ? a->init[i] : NULL)) != HC_OK)
            return rv;
        for (uint32_t k = 0; k < a->n_slots; k++) {
            be32(key, k);
            be32(key + 4, i);
            if ((rv = put_block(s, txn, s->dbi_slots, key, 8, &a->blocks[i],
                                1 + k, NULL)) != HC_OK)
                return rv;
        }
    }
    return HC_OK;
}

/* Say how an initialised store differs from what init asks for. */
static int init_mismatch(const struct ps_store *s, const struct init_arg *a,
                         const struct hc_optim_conf *oc)
{
    if (s->signature != a->signature)
        return hc_err_set(HC_ERR_MISMATCH, "store %s: holds a different model "
                          "(model signature %016llx, this model %016llx): the "
                          "model definition changed; train it in a fresh "
                          "--data-dir (or remove %s), or run the model the "
                          "store was made for", s->dir,
                          (unsigned long long)s->signature,
                          (unsigned long long)a->signature, s->dir);
    if (s->n_shards != a->n_shards || s->block_elems != a->block_elems ||
        s->layout_hash != a->layout_hash)
        return hc_err_set(HC_ERR_MISMATCH, "store %s: laid out for %u shard%s "
                          "with blocks of %u elements (layout %016llx), but the "
                          "cluster now has %u shard%s with blocks of %u "
                          "(layout %016llx): run `hetps reshard` to re-lay the "
                          "stores out for the new cluster, or use a fresh "
                          "--data-dir", s->dir, s->n_shards,
                          s->n_shards == 1 ? "" : "s", s->block_elems,
                          (unsigned long long)s->layout_hash, a->n_shards,
                          a->n_shards == 1 ? "" : "s", a->block_elems,
                          (unsigned long long)a->layout_hash);
    if (s->shard != a->shard)
        return hc_err_set(HC_ERR_MISMATCH, "store %s: holds shard %u but this "
                          "server is shard %u: check --data-dir and --task",
                          s->dir, s->shard, a->shard);
    if (!ps_optim_equal(&s->optim, oc))
        return hc_err_set(HC_ERR_MISMATCH, "store %s: made with optimizer %s "
                          "but asked for %s: use the store's optimizer "
                          "settings, or a fresh --data-dir", s->dir,
                          s->optim_json, a->optim_json);
    return HC_OK;
}

int ps_store_init(struct ps_store *s, uint64_t signature,
                  const struct hc_layout *layout, uint32_t shard,
                  const char *optim_json, const float *const *init,
                  int *created)
{
    struct init_arg a = {0};
    struct hc_optim_conf oc;
    struct ps_block *tab = NULL;
    char json[PS_OPTIM_JSON_MAX], src[PATH_MAX + 32];
    uint32_t n = 0, max_len = 0;
    int rv;

    if (created)
        *created = 0;
    if (s->read_only)
        return hc_err_set(HC_ERR_INVAL, "store %s: opened read-only; cannot "
                          "initialise", s->dir);
    if (!layout || !layout->blocks || layout->n_shards <= 0 ||
        layout->block_elems == 0)
        return hc_err_set(HC_ERR_INVAL, "store %s: no layout or an empty one",
                          s->dir);
    if (shard >= (uint32_t)layout->n_shards)
        return hc_err_set(HC_ERR_INVAL, "store %s: shard %u is out of range: "
                          "the layout has %d shards", s->dir, shard,
                          layout->n_shards);
    snprintf(src, sizeof src, "store %s: optimizer", s->dir);
    if ((rv = ps_optim_from_json(optim_json, optim_json ? strlen(optim_json)
                                                        : 0, src, &oc)) ||
        (rv = ps_optim_to_json(&oc, json, sizeof json)))
        return rv;
    for (size_t i = 0; i < layout->n_blocks; i++)
        n += layout->blocks[i].shard == shard;
    tab = calloc(n ? n : 1, sizeof *tab);
    if (!tab)
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory", s->dir);
    for (size_t i = 0; i < layout->n_blocks; i++) {
        const struct hc_block *b = &layout->blocks[i];

        if (b->shard != shard)
            continue;
        if (b->local >= n || tab[b->local].length != 0 || b->length == 0 ||
            b->length > layout->block_elems) {
            rv = hc_err_set(HC_ERR_INVAL, "store %s: layout block %zu (var %u, "
                            "offset %llu, %u elements, local %u) is invalid for "
                            "shard %u of %u blocks", s->dir, i, b->var,
                            (unsigned long long)b->offset, b->length, b->local,
                            shard, n);
            goto out;
        }
        tab[b->local] = (struct ps_block){b->var, b->length, b->offset};
        if (b->length > max_len)
            max_len = b->length;
    }
    if (init)
        for (uint32_t i = 0; i < n; i++)
            if (!init[i]) {
                rv = hc_err_set(HC_ERR_INVAL, "store %s: no initial values "
                                "for local block %u", s->dir, i);
                goto out;
            }
    a = (struct init_arg){
        .signature = signature, .layout_hash = hc_layout_hash(layout),
        .block_elems = layout->block_elems,
        .n_shards = (uint32_t)layout->n_shards, .shard = shard,
        .n_blocks = n, .n_slots = (uint32_t)ps_optim_slots(&oc),
        .optim_json = json, .blocks = tab, .init = init,
    };

    pthread_mutex_lock(&s->wmu);
    if (atomic_load(&s->initialised)) {
        rv = init_mismatch(s, &a, &oc);
        pthread_mutex_unlock(&s->wmu);
        goto out;
    }
    rv = write_txn(s, init_body, &a, "initialising the store");
    if (rv == HC_OK) {
        free(s->blocks);
        s->blocks = tab;
        tab = NULL;
        s->signature = a.signature;
        s->layout_hash = a.layout_hash;
        s->block_elems = a.block_elems;
        s->n_shards = a.n_shards;
        s->shard = a.shard;
        s->n_blocks = a.n_blocks;
        s->n_slots = a.n_slots;
        s->max_len = max_len;
        s->optim = oc;
        memcpy(s->optim_json, json, sizeof json);
        rv = alloc_work(s);
        if (rv == HC_OK) {
            atomic_store(&s->step, 0);
            atomic_store(&s->initialised, 1);
            if (created)
                *created = 1;
            hc_info("store %s: initialised shard %u of %u: %u blocks, "
                    "optimizer %s", s->dir, shard, a.n_shards, n, json);
        }
    }
    pthread_mutex_unlock(&s->wmu);
out:
    free(tab);
    return rv;
}

/* ---- reads ------------------------------------------------------------- */

uint64_t ps_store_step(const struct ps_store *s)
{
    return atomic_load(&((struct ps_store *)s)->step);
}

void ps_store_info(const struct ps_store *s, struct ps_store_info *info)
{
    struct ps_store *m = (struct ps_store *)s;

    memset(info, 0, sizeof *info);
    info->dir = s->dir;
    info->incarnation = s->incarnation;
    info->map_size = s->map_size;
    info->map_max = s->map_max;
    info->page_size = s->psize;
    info->initialised = atomic_load(&m->initialised);
    if (!info->initialised)
        return;
    info->step = atomic_load(&m->step);
    info->signature = s->signature;
    info->layout_hash = s->layout_hash;
    info->block_elems = s->block_elems;
    info->n_shards = s->n_shards;
    info->shard = s->shard;
    info->n_blocks = s->n_blocks;
    info->n_slots = s->n_slots;
    info->optim = s->optim;
}

const struct ps_block *ps_store_blocks(const struct ps_store *s, uint32_t *n)
{
    int init = atomic_load(&((struct ps_store *)s)->initialised);

    *n = init ? s->n_blocks : 0;
    return init ? s->blocks : NULL;
}

/* Fetch a block value and check its header's size. */
static int get_block(struct ps_store *s, MDB_txn *txn, MDB_dbi dbi,
                     const void *key, size_t klen, uint32_t local,
                     const char *kind, MDB_val *v, struct ps_block_hdr *h)
{
    MDB_val k = {klen, (void *)key};
    int rc = mdb_get(txn, dbi, &k, v);

    if (rc == MDB_NOTFOUND)
        return hc_err_set(local < s->n_blocks ? HC_ERR_STORE : HC_ERR_NOTFOUND,
                          "store %s: no %s for block %u (this shard has %u "
                          "blocks)%s", s->dir, kind, local, s->n_blocks,
                          local < s->n_blocks ? "; the store is damaged" : "");
    if (rc != 0)
        return lmdb_err(s, rc, "reading a block");
    if (v->mv_size >= HDR_SIZE)
        memcpy(h, v->mv_data, HDR_SIZE);
    if (v->mv_size < HDR_SIZE || v->mv_size != HDR_SIZE + (size_t)h->length * 4)
        return hc_err_set(HC_ERR_STORE, "store %s: %s of block %u has %zu "
                          "bytes, which does not match its header; the store "
                          "is damaged", s->dir, kind, local, v->mv_size);
    return HC_OK;
}

int ps_store_read(struct ps_store *s, struct ps_read *r, size_t n,
                  uint64_t *step)
{
    MDB_txn *txn = NULL;
    int rv;

    if (!atomic_load(&s->initialised))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: not initialised yet "
                          "(the chief creates the variables first)", s->dir);
    if ((rv = txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    for (size_t i = 0; i < n; i++) {
        unsigned char key[4];
        struct ps_block_hdr h;
        MDB_val v;

        be32(key, r[i].local);
        if ((rv = get_block(s, txn, s->dbi_vars, key, 4, r[i].local,
                            "parameters", &v, &h)) != HC_OK)
            goto out;
        if (r[i].first > h.length || r[i].count > h.length - r[i].first) {
            rv = hc_err_set(HC_ERR_INVAL, "store %s: elements %u..%llu are "
                            "outside block %u (%u elements)", s->dir,
                            r[i].first,
                            (unsigned long long)r[i].first + r[i].count,
                            r[i].local, h.length);
            goto out;
        }
        if (r[i].count)
            memcpy(r[i].dst, (const unsigned char *)v.mv_data + HDR_SIZE +
                                 (size_t)r[i].first * 4,
                   (size_t)r[i].count * 4);
        r[i].crc = h.crc;
    }
    if (step)
        rv = meta_fixed(s, txn, "step", step, sizeof *step);
out:
    rtxn_end(s, txn);
    return rv;
}

int ps_store_read_block(struct ps_store *s, uint32_t local, float *dst,
                        uint32_t len)
{
    struct ps_read r = {local, 0, len, dst, 0};

    if (atomic_load(&s->initialised) && local < s->n_blocks &&
        s->blocks[local].length != len)
        return hc_err_set(HC_ERR_MISMATCH, "store %s: block %u has %u "
                          "elements, not %u", s->dir, local,
                          s->blocks[local].length, len);
    return ps_store_read(s, &r, 1, NULL);
}

int ps_store_record_get(struct ps_store *s, uint32_t worker,
                        uint64_t *incarnation, uint64_t *request_id,
                        void *reply, size_t cap, size_t *reply_len)
{
    MDB_txn *txn = NULL;
    unsigned char key[4];
    MDB_val k = {4, key}, v;
    struct record_hdr h;
    int rc, rv;

    be32(key, worker);
    if ((rv = txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rc = mdb_get(txn, s->dbi_recs, &k, &v);
    if (rc == MDB_NOTFOUND) {
        rv = hc_err_set(HC_ERR_NOTFOUND, "store %s: no request recorded for "
                        "worker %u", s->dir, worker);
        goto out;
    }
    if (rc != 0) {
        rv = lmdb_err(s, rc, "reading a record");
        goto out;
    }
    if (v.mv_size >= sizeof h)
        memcpy(&h, v.mv_data, sizeof h);
    if (v.mv_size < sizeof h || v.mv_size != sizeof h + h.reply_len) {
        rv = hc_err_set(HC_ERR_STORE, "store %s: the record of worker %u has "
                        "a bad size (%zu bytes); the store is damaged",
                        s->dir, worker, v.mv_size);
        goto out;
    }
    if (incarnation)
        *incarnation = h.incarnation;
    if (request_id)
        *request_id = h.request_id;
    if (reply_len)
        *reply_len = h.reply_len;
    if (h.reply_len > cap) {
        rv = hc_err_set(HC_ERR_LIMIT, "store %s: the reply recorded for worker "
                        "%u has %u bytes but the buffer holds %zu", s->dir,
                        worker, h.reply_len, cap);
        goto out;
    }
    if (h.reply_len)
        memcpy(reply, (const unsigned char *)v.mv_data + sizeof h, h.reply_len);
out:
    rtxn_end(s, txn);
    return rv;
}

/* ---- moving state (hetps reshard) ------------------------------------ */

int ps_store_read_slot(struct ps_store *s, uint32_t slot, uint32_t local,
                       float *dst, uint32_t len)
{
    unsigned char key[8];
    struct ps_block_hdr h;
    MDB_txn *txn = NULL;
    MDB_val v;
    int rv;

    if (slot >= s->n_slots || local >= s->n_blocks ||
        len != s->blocks[local].length)
        return hc_err_set(HC_ERR_INVAL, "store %s: no slot %u of block %u "
                          "with %u elements", s->dir, slot, local, len);
    be32(key, slot);
    be32(key + 4, local);
    if ((rv = txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rv = get_block(s, txn, s->dbi_slots, key, 8, local, "slot", &v, &h);
    if (rv == HC_OK) {
        memcpy(dst, (const unsigned char *)v.mv_data + HDR_SIZE,
               (size_t)len * 4);
        if (hc_crc32c(dst, (size_t)len * 4) != h.crc)
            rv = hc_err_set(HC_ERR_CRC, "store %s: slot %u of block %u fails "
                            "its checksum; the store is damaged", s->dir, slot,
                            local);
    }
    rtxn_end(s, txn);
    return rv;
}

struct restore_arg {
    const float *const *const *slots;
    uint64_t step;
};

static int restore_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    const struct restore_arg *a = arg;
    int rv;

    for (uint32_t i = 0; i < s->n_blocks; i++) {
        for (uint32_t k = 0; k < s->n_slots; k++) {
            unsigned char key[8];

            be32(key, k);
            be32(key + 4, i);
            if ((rv = put_block(s, txn, s->dbi_slots, key, 8, &s->blocks[i],
                                1 + k, a->slots ? a->slots[k][i] : NULL)))
                return rv;
        }
    }
    return meta_put_u64(s, txn, "step", a->step);
}

int ps_store_restore(struct ps_store *s, const float *const *const *slots,
                     uint64_t step)
{
    struct restore_arg a = { slots, step };
    int rv;

    if (!s->n_blocks)
        return hc_err_set(HC_ERR_NOTFOUND, "store %s holds no variables", s->dir);
    pthread_mutex_lock(&s->wmu);
    rv = write_txn(s, restore_body, &a, "restoring the optimizer state");
    pthread_mutex_unlock(&s->wmu);
    if (rv == HC_OK)
        atomic_store(&s->step, step);
    return rv;
}

/* ---- application meta ------------------------------------------------- */

struct app_meta_arg {
    char key[80];
    const void *data;
    size_t len;
};

static int app_meta_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    const struct app_meta_arg *a = arg;

    return meta_put(s, txn, a->key, a->data, a->len);
}

static int app_meta_key(char *out, size_t cap, const char *key)
{
    if (!key || !*key || strlen(key) > 64)
        return hc_err_set(HC_ERR_INVAL, "meta key must be 1..64 bytes");
    snprintf(out, cap, "app.%s", key);
    return HC_OK;
}

int ps_store_meta_put(struct ps_store *s, const char *key, const void *data,
                      size_t len)
{
    struct app_meta_arg a = { .data = data, .len = len };
    int rv;

    if ((rv = app_meta_key(a.key, sizeof a.key, key)) != HC_OK)
        return rv;
    pthread_mutex_lock(&s->wmu);
    rv = write_txn(s, app_meta_body, &a, "writing meta");
    pthread_mutex_unlock(&s->wmu);
    return rv;
}

int ps_store_meta_get(struct ps_store *s, const char *key, void *buf,
                      size_t cap, size_t *len)
{
    char k[80];
    MDB_txn *txn = NULL;
    MDB_val v;
    int rv;

    if ((rv = app_meta_key(k, sizeof k, key)) != HC_OK)
        return rv;
    if ((rv = txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rv = meta_get(s, txn, k, &v);
    if (rv == HC_ERR_NOTFOUND)
        rv = hc_err_set(HC_ERR_NOTFOUND, "store %s holds no \"%s\"", s->dir,
                        key);
    if (rv == HC_OK) {
        if (len)
            *len = v.mv_size;
        if (v.mv_size > cap)
            rv = hc_err_set(HC_ERR_LIMIT, "store %s: \"%s\" has %zu bytes, "
                            "the buffer %zu", s->dir, key, v.mv_size, cap);
        else if (v.mv_size)
            memcpy(buf, v.mv_data, v.mv_size);
    }
    rtxn_end(s, txn);
    return rv;
}

/* ---- apply ------------------------------------------------------------- */

struct apply_arg {
    const struct hc_optim_conf *c;
    const struct ps_update *u;
    size_t n;
    const struct ps_record *recs;
    size_t n_recs;
    int direct;
    uint64_t new_step;
};

/* Key of array k (0 = parameters, 1 + slot) of block `local`. */
static size_t block_key(unsigned char *key, int k, uint32_t local)
{
    if (k == 0) {
        be32(key, local);
        return 4;
    }
    be32(key, (uint32_t)(k - 1));
    be32(key + 4, local);
    return 8;
}

/* Update one block: see the file comment for why both paths are safe. */
static int apply_block(struct ps_store *s, MDB_txn *txn,
                       const struct hc_optim_conf *c, uint64_t step,
                       const struct ps_update *u, int direct)
{
    static const char *const kinds[] = {"parameters", "slot 0", "slot 1"};
    const struct ps_block *b = &s->blocks[u->local];
    size_t bytes = (size_t)b->length * 4, ml = s->max_len;
    int na = 1 + ps_optim_slots(c);
    unsigned char keys[3][8];
    MDB_val key[3], old[3], neu[3];
    const float *in[3] = {NULL, NULL, NULL};
    float *out[3] = {NULL, NULL, NULL};
    int rc, rv;

    for (int k = 0; k < na; k++) {
        struct ps_block_hdr h;
        const unsigned char *data;

        key[k].mv_size = block_key(keys[k], k, u->local);
        key[k].mv_data = keys[k];
        if ((rv = get_block(s, txn, k ? s->dbi_slots : s->dbi_vars, keys[k],
                            key[k].mv_size, u->local, kinds[k], &old[k],
                            &h)) != HC_OK)
            return rv;
        if (h.var != b->var || h.offset != b->offset ||
            h.length != b->length || h.kind != (uint32_t)k)
            return hc_err_set(HC_ERR_STORE, "store %s: %s of block %u: header "
                              "(var %u, offset %llu, %u elements) disagrees "
                              "with the block table; the store is damaged",
                              s->dir, kinds[k], u->local, h.var,
                              (unsigned long long)h.offset, h.length);
        data = (const unsigned char *)old[k].mv_data + HDR_SIZE;
        if (is_aligned4(data)) {
            in[k] = (const float *)(const void *)data;
        } else {
            memcpy(s->scratch + k * ml, data, bytes);
            in[k] = s->scratch + k * ml;
        }
    }
    for (int k = 0; k < na; k++) {
        out[k] = s->scratch + (3 + k) * ml;
        if (!direct)
            continue;
        neu[k].mv_size = HDR_SIZE + bytes;
        rc = mdb_put(txn, k ? s->dbi_slots : s->dbi_vars, &key[k], &neu[k],
                     MDB_RESERVE);
        if (rc != 0)
            return lmdb_err(s, rc, "writing a block");
        if (is_aligned4((unsigned char *)neu[k].mv_data + HDR_SIZE))
            out[k] = (float *)(void *)((unsigned char *)neu[k].mv_data +
                                       HDR_SIZE);
    }
    ps_optim_apply(c, step, b->length, in[0], u->grad, u->scale, in[1], in[2],
                   out[0], out[1], out[2]);
    for (int k = 0; k < na; k++) {
        struct ps_block_hdr h = {b->var, b->length, b->offset, 0, (uint32_t)k};
        unsigned char *dst;

        if (!direct) {
            neu[k].mv_size = HDR_SIZE + bytes;
            rc = mdb_put(txn, k ? s->dbi_slots : s->dbi_vars, &key[k],
                         &neu[k], MDB_RESERVE);
            if (rc != 0)
                return lmdb_err(s, rc, "writing a block");
        }
        dst = neu[k].mv_data;
        if ((unsigned char *)out[k] != dst + HDR_SIZE)
            memcpy(dst + HDR_SIZE, out[k], bytes);
        h.crc = hc_crc32c(out[k], bytes);
        memcpy(dst, &h, HDR_SIZE);
    }
    return HC_OK;
}

static int apply_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    struct apply_arg *a = arg;
    uint64_t step;
    int rv;

    if ((rv = meta_fixed(s, txn, "step", &step, sizeof step)) != HC_OK)
        return rv;
    for (size_t i = 0; i < a->n; i++)
        if ((rv = apply_block(s, txn, a->c, step, &a->u[i], a->direct)))
            return rv;
    if (a->n > 0) {
        step++;
        if ((rv = meta_put_u64(s, txn, "step", step)) != HC_OK)
            return rv;
    }
    for (size_t i = 0; i < a->n_recs; i++) {
        const struct ps_record *r = &a->recs[i];
        struct record_hdr h = {r->incarnation, r->request_id, step,
                               r->reply_len, 0};
        unsigned char key[4];
        MDB_val k = {4, key}, v = {sizeof h + r->reply_len, NULL};
        int rc;

        be32(key, r->worker);
        if ((rc = mdb_put(txn, s->dbi_recs, &k, &v, MDB_RESERVE)) != 0)
            return lmdb_err(s, rc, "writing a record");
        memcpy(v.mv_data, &h, sizeof h);
        if (r->reply_len)
            memcpy((unsigned char *)v.mv_data + sizeof h, r->reply,
                   r->reply_len);
    }
    a->new_step = step;
    return HC_OK;
}

/* Check an apply's arguments before any transaction starts. */
static int apply_check(struct ps_store *s, const struct hc_optim_conf *c,
                       const struct ps_update *u, size_t n,
                       const struct ps_record *recs, size_t n_recs)
{
    int rv;

    if (s->read_only)
        return hc_err_set(HC_ERR_INVAL, "store %s: opened read-only; cannot "
                          "apply", s->dir);
    if (!c)
        return hc_err_set(HC_ERR_INVAL, "store %s: apply without optimizer "
                          "settings", s->dir);
    if ((rv = ps_optim_validate(c, s->dir)) != HC_OK)
        return rv;
    if ((uint32_t)ps_optim_slots(c) > s->n_slots)
        return hc_err_set(HC_ERR_MISMATCH, "store %s: optimizer %s needs %d "
                          "slot arrays but the store was made with %s (%u)",
                          s->dir, ps_optim_name(c->type), ps_optim_slots(c),
                          s->optim_json, s->n_slots);
    if (++s->seen_gen == 0) {
        memset(s->seen, 0, (size_t)s->n_blocks * sizeof *s->seen);
        s->seen_gen = 1;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t l = u[i].local;

        if (l >= s->n_blocks)
            return hc_err_set(HC_ERR_INVAL, "store %s: update %zu names block "
                              "%u but this shard has %u blocks", s->dir, i, l,
                              s->n_blocks);
        if (u[i].length != s->blocks[l].length)
            return hc_err_set(HC_ERR_INVAL, "store %s: update %zu for block %u "
                              "has %u elements, the block %u", s->dir, i, l,
                              u[i].length, s->blocks[l].length);
        if (!u[i].grad || !isfinite(u[i].scale))
            return hc_err_set(HC_ERR_INVAL, "store %s: update %zu for block %u "
                              "has no gradient or a non-finite scale", s->dir,
                              i, l);
        if (s->seen[l] == s->seen_gen)
            return hc_err_set(HC_ERR_INVAL, "store %s: block %u appears twice "
                              "in one apply", s->dir, l);
        s->seen[l] = s->seen_gen;
    }
    for (size_t i = 0; i < n_recs; i++) {
        if (recs[i].reply_len > PS_STORE_MAX_REPLY)
            return hc_err_set(HC_ERR_LIMIT, "store %s: the reply recorded for "
                              "worker %u has %u bytes; at most %u are kept",
                              s->dir, recs[i].worker, recs[i].reply_len,
                              PS_STORE_MAX_REPLY);
        if (recs[i].reply_len && !recs[i].reply)
            return hc_err_set(HC_ERR_INVAL, "store %s: record for worker %u "
                              "has a length but no reply", s->dir,
                              recs[i].worker);
    }
    return HC_OK;
}

/* Flush after a commit when group commit says it is time. */
static int maybe_sync(struct ps_store *s)
{
    uint64_t t;
    int rc;

    if (s->durability != PS_DURABLE_MACHINE || s->sync_ms == 0)
        return HC_OK;
    t = now_ms();
    if (t - s->last_sync_ms < s->sync_ms)
        return HC_OK;
    s->last_sync_ms = t;
    if ((rc = mdb_env_sync(s->env, 1)) != 0)
        return hc_err_set(HC_ERR_IO, "store %s: sync failed: %s; the update "
                          "is committed but may not be on disk", s->dir,
                          mdb_strerror(rc));
    return HC_OK;
}

int ps_store_apply(struct ps_store *s, const struct hc_optim_conf *c,
                   const struct ps_update *u, size_t n,
                   const struct ps_record *recs, size_t n_recs,
                   uint64_t *new_step)
{
    struct apply_arg a = {c, u, n, recs, n_recs, 0, 0};
    uint64_t pages = 16;
    int rv;

    if (!atomic_load(&s->initialised))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: not initialised yet "
                          "(the chief creates the variables first)", s->dir);
    pthread_mutex_lock(&s->wmu);
    if ((rv = apply_check(s, c, u, n, recs, n_recs)) != HC_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        uint64_t bytes = HDR_SIZE + (uint64_t)u[i].length * 4 + 16;

        pages += (uint64_t)(1 + ps_optim_slots(c)) *
                 ((bytes + s->psize - 1) / s->psize + 8);
    }
    pages += (uint64_t)n_recs * 10;
    a.direct = pages <= s->direct_max_pages;
    if ((rv = write_txn(s, apply_body, &a, "applying an update")) != HC_OK)
        goto out;
    atomic_store(&s->step, a.new_step);
    if (new_step)
        *new_step = a.new_step;
    rv = maybe_sync(s);
out:
    pthread_mutex_unlock(&s->wmu);
    return rv;
}

/* ---- verify, sync ------------------------------------------------------ */

int ps_store_verify(struct ps_store *s)
{
    static const char *const kinds[] = {"parameters", "slot 0", "slot 1"};
    MDB_txn *txn = NULL;
    MDB_stat st;
    int rc, rv = HC_OK;

    if (!atomic_load(&s->initialised))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: not initialised; "
                          "nothing to verify", s->dir);
    if ((rv = txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    for (uint32_t i = 0; i < s->n_blocks && rv == HC_OK; i++) {
        const struct ps_block *b = &s->blocks[i];

        for (uint32_t k = 0; k <= s->n_slots; k++) {
            unsigned char key[8];
            size_t klen = block_key(key, (int)k, i);
            struct ps_block_hdr h;
            MDB_val v;
            uint32_t crc;

            if ((rv = get_block(s, txn, k ? s->dbi_slots : s->dbi_vars, key,
                                klen, i, kinds[k], &v, &h)) != HC_OK)
                break;
            if (h.var != b->var || h.offset != b->offset ||
                h.length != b->length || h.kind != k) {
                rv = hc_err_set(HC_ERR_STORE, "store %s: %s of block %u: "
                                "header (var %u, offset %llu, %u elements, "
                                "kind %u) disagrees with the block table; the "
                                "store is damaged", s->dir, kinds[k], i, h.var,
                                (unsigned long long)h.offset, h.length, h.kind);
                break;
            }
            crc = hc_crc32c((const unsigned char *)v.mv_data + HDR_SIZE,
                         (size_t)h.length * 4);
            if (crc != h.crc) {
                rv = hc_err_set(HC_ERR_CRC, "store %s: %s of block %u "
                                "(variable %u, offset %llu, %u elements): "
                                "stored CRC32C %08x but the data has %08x; the "
                                "store is damaged: restore it from a checkpoint "
                                "or re-create it", s->dir, kinds[k], i, b->var,
                                (unsigned long long)b->offset, b->length,
                                h.crc, crc);
                break;
            }
        }
    }
    if (rv == HC_OK) {
        if ((rc = mdb_stat(txn, s->dbi_slots, &st)) != 0)
            rv = lmdb_err(s, rc, "verifying");
        else if (st.ms_entries != (size_t)s->n_blocks * s->n_slots)
            rv = hc_err_set(HC_ERR_STORE, "store %s: %zu slot values stored, "
                            "expected %u; the store is damaged", s->dir,
                            (size_t)st.ms_entries, s->n_blocks * s->n_slots);
        else if ((rc = mdb_stat(txn, s->dbi_vars, &st)) != 0)
            rv = lmdb_err(s, rc, "verifying");
        else if (st.ms_entries != s->n_blocks)
            rv = hc_err_set(HC_ERR_STORE, "store %s: %zu blocks stored, "
                            "expected %u; the store is damaged", s->dir,
                            (size_t)st.ms_entries, s->n_blocks);
    }
    rtxn_end(s, txn);
    return rv;
}

int ps_store_sync(struct ps_store *s)
{
    int rc;

    if (s->read_only)
        return HC_OK;
    pthread_mutex_lock(&s->wmu);
    rc = mdb_env_sync(s->env, 1);
    s->last_sync_ms = now_ms();
    pthread_mutex_unlock(&s->wmu);
    if (rc != 0)
        return hc_err_set(HC_ERR_IO, "store %s: sync failed: %s", s->dir,
                          mdb_strerror(rc));
    return HC_OK;
}
