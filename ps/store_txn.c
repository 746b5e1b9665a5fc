/*
 * store_txn.c — the store's transactions on its LMDB environment, and the
 * "meta" database they read and write (see store.h for the contract and
 * the on-disk layout, store_impl.h for the other store files).
 *
 * Transactions. Every write goes through store_write_txn(), which begins
 * a write transaction, runs a body, commits, and on MDB_MAP_FULL aborts,
 * doubles the map (up to map_max) and runs the body again; a failed
 * transaction is always aborted, never reused. Reads use read-only
 * transactions kept in a small pool (reset, then renewed), so a pull
 * allocates nothing and keeps its reader slot. Every transaction holds
 * `maplock` shared; changing the map size (growth here, or adopting a size
 * another process set: MDB_MAP_RESIZED) takes it exclusively, because
 * LMDB allows mdb_env_set_mapsize only while no transaction is active.
 * After an open and each growth, the pages of the store the page cache
 * holds are mapped into the process ahead of use (store_map_ahead).
 *
 * Meta: the store's own keys (magic, format, incarnation, the layout and
 * the step), and the application's keys beside them under "app.".
 */
#include "store_impl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "log.h"

/* ---- small helpers ----------------------------------------------------- */

void store_be32(unsigned char *b, uint32_t x)
{
    b[0] = (unsigned char)(x >> 24);
    b[1] = (unsigned char)(x >> 16);
    b[2] = (unsigned char)(x >> 8);
    b[3] = (unsigned char)x;
}

/* "64 KiB", "1024 MiB" */
const char *store_fmt_bytes(char *buf, size_t cap, uint64_t b)
{
    if (b < (1u << 20))
        snprintf(buf, cap, "%llu KiB", (unsigned long long)(b >> 10));
    else
        snprintf(buf, cap, "%llu MiB", (unsigned long long)(b >> 20));
    return buf;
}

/* Translate an LMDB code into an hc code with a message. */
int store_lmdb_err(const struct ps_store *s, int rc, const char *what)
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

/* ---- the map ahead of use ---------------------------------------------- */

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22   /* Linux 5.14 */
#endif

/* A remap (a growing map, an open) leaves every page of the store
 * unmapped, and a read of one takes a page fault even when the page is in
 * the page cache: at 50 M rows a random row's descent faults on most of
 * its branch and leaf pages. mincore says which pages the page cache
 * holds (for a file the process may write); only those runs are
 * populated, so a store larger than memory is not read from disk. */
/* The mapping holding address p (/proc/self/maps; LMDB's me_mapaddr is
 * set only with MDB_FIXEDMAP): its start and length, or NULL. */
static char *mapping_of(const void *p, size_t *len)
{
    char line[512];
    unsigned long lo, hi, at = (unsigned long)(uintptr_t)p;
    char *start = NULL;
    FILE *f = fopen("/proc/self/maps", "r");

    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= at && at < hi) {
            start = (char *)(uintptr_t)lo;
            *len = hi - lo;
            break;
        }
    if (f)
        fclose(f);
    return start;
}

void store_map_ahead(struct ps_store *s)
{
    unsigned char vec[16384];   /* one chunk's pages */
    long pg = sysconf(_SC_PAGESIZE);
    uint64_t used, done = 0, budget = s->map_ahead_max, chunk;
    MDB_envinfo info;
    MDB_txn *txn = NULL;
    MDB_val k = {5, "magic"}, v;
    size_t maplen = 0;
    char *base = NULL;

    if (budget == 0 || pg <= 0)
        return;
    chunk = sizeof vec * (uint64_t)pg;
    pthread_rwlock_rdlock(&s->maplock);
    /* A value in the map (meta's magic, in every store) finds the map. */
    if (mdb_env_info(s->env, &info) != 0 ||
        mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0)
        goto out;
    if (mdb_get(txn, s->dbi_meta, &k, &v) == 0)
        base = mapping_of(v.mv_data, &maplen);
    used = (uint64_t)(info.me_last_pgno + 1) * s->psize;
    if (!base || used > maplen)
        goto out;
    for (uint64_t at = 0; at < used && done < budget; at += chunk) {
        size_t len = (size_t)(used - at < chunk ? used - at : chunk);
        size_t np = (len + (size_t)pg - 1) / (size_t)pg, i = 0, j;

        if (mincore(base + at, len, vec) != 0)
            break;
        while (i < np && done < budget) {
            if (!(vec[i] & 1)) {
                i++;
                continue;
            }
            for (j = i; j < np && (vec[j] & 1) &&
                        done + (j - i + 1) * (uint64_t)pg <= budget; j++)
                ;
            if (j == i)
                break;          /* the budget is spent */
            if (madvise(base + at + i * (size_t)pg, (j - i) * (size_t)pg,
                        MADV_POPULATE_READ) != 0) {
                if (errno == EINVAL)
                    s->map_ahead_max = 0;       /* no kernel support */
                goto out;
            }
            done += (j - i) * (uint64_t)pg;
            i = j;
        }
    }
out:
    if (txn)
        mdb_txn_abort(txn);
    pthread_rwlock_unlock(&s->maplock);
    atomic_store(&s->mapped_ahead, done);
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
        return store_lmdb_err(s, rc, "resizing the map");
    if (s->map_size > s->map_max)
        s->map_max = s->map_size;
    store_map_ahead(s);
    return HC_OK;
}

/* Double the map after MDB_MAP_FULL, or explain why not. */
static int map_grow(struct ps_store *s, const char *what)
{
    char a[32], b[32], c[32];
    uint64_t old = s->map_size, want = old * 2;
    double t0 = hc_now_s();
    int rv;

    if (want > s->map_max)
        want = s->map_max;
    if (want <= old)
        return hc_err_set(HC_ERR_MAPFULL, "store %s: %s: the LMDB map is full "
                          "at %s and may not grow (the limit, map_max, is %s): "
                          "raise it with --map-max or free space in the store; "
                          "this change was not applied and the store is "
                          "unchanged", s->dir, what,
                          store_fmt_bytes(a, sizeof a, old),
                          store_fmt_bytes(b, sizeof b, s->map_max));
    if ((rv = map_resize(s, want)) != HC_OK)
        return rv;
    hc_info("store %s: LMDB map grown from %s to %s (%s of it mapped ahead; "
            "%.0f ms)", s->dir, store_fmt_bytes(a, sizeof a, old),
            store_fmt_bytes(b, sizeof b, s->map_size),
            store_fmt_bytes(c, sizeof c, atomic_load(&s->mapped_ahead)),
            (hc_now_s() - t0) * 1e3);
    return HC_OK;
}

/* Begin a transaction with maplock held shared; on MDB_MAP_RESIZED (another
 * process grew the map) adopt the new size and try again. */
int store_txn_begin(struct ps_store *s, unsigned flags, MDB_txn **txn)
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
    return store_lmdb_err(s, rc, "starting a transaction");
}

/* End a read transaction from store_txn_begin: keep it for reuse. */
void store_rtxn_end(struct ps_store *s, MDB_txn *t)
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

#define DISK_MIN_AHEAD ((uint64_t)64 << 20)

/*
 * A full disk must be an error, not a crash. The store writes through its
 * memory map (MDB_WRITEMAP) into a sparse file: a page stored into a hole
 * when the disk is full would be SIGBUS. So before each write transaction
 * the data file is allocated (posix_fallocate) ahead of LMDB's last used
 * page by as much again as is in use (at least 64 MiB, at most up to the
 * map size) — room for a transaction that rewrites every page — and by
 * what a transaction that adds data says it adds (s->write_extra, set by
 * ps_store_init: a create of a large model writes far more than is in use). A full
 * disk then fails here with ENOSPC, before anything is written: the
 * update is refused with an error reply and a log line, the store as it
 * was. File systems without fallocate are used as they are (no guard).
 * The caller holds wmu.
 */
int store_reserve_disk(struct ps_store *s, const char *what)
{
    MDB_envinfo info;
    uint64_t used, want;
    char a[32];
    int fd, rc;

    if (s->disk_reserved == UINT64_MAX || mdb_env_info(s->env, &info) != 0 ||
        mdb_env_get_fd(s->env, &fd) != 0)
        return HC_OK;
    used = ((uint64_t)info.me_last_pgno + 1) * s->psize;
    want = used + (used > DISK_MIN_AHEAD ? used : DISK_MIN_AHEAD);
    if (used + s->write_extra + DISK_MIN_AHEAD > want)
        want = used + s->write_extra + DISK_MIN_AHEAD;
    if (want > s->map_size)
        want = s->map_size;
    if (want <= s->disk_reserved)
        return HC_OK;
    rc = posix_fallocate(fd, 0, (off_t)want);
    if (rc == EOPNOTSUPP || rc == ENOSYS || rc == EINVAL) {
        hc_warn("store %s: the file system cannot preallocate (%s): a full "
                "disk would stop this server", s->dir, strerror(rc));
        s->disk_reserved = UINT64_MAX;
        return HC_OK;
    }
    if (rc != 0)
        return hc_err_set(HC_ERR_IO, "store %s: %s: cannot reserve %s of "
                          "disk for the store: %s; nothing was written and "
                          "the store is as it was — free some space and go on",
                          s->dir, what, store_fmt_bytes(a, sizeof a, want),
                          strerror(rc));
    s->disk_reserved = want;
    return HC_OK;
}

/* Run `fn` in a write transaction and commit; grow the map and run it
 * again on MDB_MAP_FULL. The caller holds wmu. */
int store_write_txn(struct ps_store *s, store_write_fn fn, void *arg,
                    const char *what)
{
    for (;;) {
        MDB_txn *txn = NULL;
        int rv, rc;

        if ((rv = store_reserve_disk(s, what)) != HC_OK)
            return rv;
        if ((rv = store_txn_begin(s, 0, &txn)) != HC_OK)
            return rv;
        rv = fn(s, txn, arg);
        if (rv == HC_OK) {
            rc = mdb_txn_commit(txn);
            if (rc != 0)
                rv = store_lmdb_err(s, rc, what);
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

int store_meta_get(struct ps_store *s, MDB_txn *txn, const char *key,
                   MDB_val *v)
{
    MDB_val k = {strlen(key), (void *)key};
    int rc = mdb_get(txn, s->dbi_meta, &k, v);

    if (rc == MDB_NOTFOUND)
        return HC_ERR_NOTFOUND;
    if (rc != 0)
        return store_lmdb_err(s, rc, "reading meta");
    return HC_OK;
}

int store_meta_put(struct ps_store *s, MDB_txn *txn, const char *key,
                   const void *data, size_t len)
{
    MDB_val k = {strlen(key), (void *)key}, v = {len, (void *)data};
    int rc = mdb_put(txn, s->dbi_meta, &k, &v, 0);

    return rc ? store_lmdb_err(s, rc, "writing meta") : HC_OK;
}

int store_meta_put_u32(struct ps_store *s, MDB_txn *txn, const char *key,
                       uint32_t x)
{
    return store_meta_put(s, txn, key, &x, sizeof x);
}

int store_meta_put_u64(struct ps_store *s, MDB_txn *txn, const char *key,
                       uint64_t x)
{
    return store_meta_put(s, txn, key, &x, sizeof x);
}

/* Read a fixed-size meta value; a missing key or a wrong size is damage. */
int store_meta_fixed(struct ps_store *s, MDB_txn *txn, const char *key,
                     void *dst, size_t len)
{
    MDB_val v;
    int rv = store_meta_get(s, txn, key, &v);

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

/* ---- application meta -------------------------------------------------- */

struct app_meta_arg {
    char key[80];
    const void *data;
    size_t len;
};

static int app_meta_key(char *out, size_t cap, const char *key)
{
    if (!key || !*key || strlen(key) > 64)
        return hc_err_set(HC_ERR_INVAL, "meta key must be 1..64 bytes");
    snprintf(out, cap, "app.%s", key);
    return HC_OK;
}

int store_app_meta_put(struct ps_store *s, MDB_txn *txn, const char *key,
                       const void *data, size_t len)
{
    char k[80];
    int rv;

    if ((rv = app_meta_key(k, sizeof k, key)) != HC_OK)
        return rv;
    return store_meta_put(s, txn, k, data, len);
}

static int app_meta_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    const struct app_meta_arg *a = arg;

    return store_meta_put(s, txn, a->key, a->data, a->len);
}

int ps_store_meta_put(struct ps_store *s, const char *key, const void *data,
                      size_t len)
{
    struct app_meta_arg a = { .data = data, .len = len };
    int rv;

    if ((rv = app_meta_key(a.key, sizeof a.key, key)) != HC_OK)
        return rv;
    pthread_mutex_lock(&s->wmu);
    rv = store_write_txn(s, app_meta_body, &a, "writing meta");
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
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rv = store_meta_get(s, txn, k, &v);
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
    store_rtxn_end(s, txn);
    return rv;
}

/* Flush after a commit when group commit says it is time. */
int store_maybe_sync(struct ps_store *s)
{
    uint64_t t;
    int rc;

    if (s->durability != PS_DURABLE_MACHINE || s->sync_ms == 0)
        return HC_OK;
    t = (uint64_t)hc_now_ms();
    s->unsynced = 1;        /* ps_store_maintain syncs it if no commit comes */
    if (t - s->last_sync_ms < s->sync_ms)
        return HC_OK;
    s->last_sync_ms = t;
    s->unsynced = 0;
    if ((rc = mdb_env_sync(s->env, 1)) != 0)
        return hc_err_set(HC_ERR_IO, "store %s: sync failed: %s; the update "
                          "is committed but may not be on disk", s->dir,
                          mdb_strerror(rc));
    return HC_OK;
}
