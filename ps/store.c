/*
 * store.c — a shard's store as a whole: opening it (creating the
 * directory and the environment, checking the magic and the format,
 * converting a format-1 store, loading meta and the block table, counting
 * the incarnation),
 * initialising it for a layout, closing and syncing it, and what its meta
 * says (step, info, blocks). The meta keys init writes are the ones open
 * loads. See store.h for the contract and the on-disk layout,
 * store_impl.h for the other store files.
 */
#include "store_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "fault.h"
#include "log.h"
#include "model.h"         /* hc_model_optim_from_json: format 1 */

#define DEFAULT_MAP_SIZE (1ull << 30)
#define DEFAULT_MAP_MAX (64ull << 30)
#define DEFAULT_DIRECT_PAGES 65536u
#define DEFAULT_SPLIT_MIN 262144u  /* elements: a step this big is split */
#define DEFAULT_MAP_AHEAD (64ull << 30) /* bytes mapped ahead: 128 MiB of
                                           page tables at most */

/* ---- open, close ------------------------------------------------------- */

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

/* Check the magic and the format of an existing store (*out: this
 * one's, or the older one an open converts). */
static int check_magic(struct ps_store *s, MDB_txn *txn, uint32_t *out)
{
    MDB_val v;
    uint32_t format;
    int rv = store_meta_get(s, txn, "magic", &v);

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
    if ((rv = store_meta_fixed(s, txn, "format", &format,
                               sizeof format)) != HC_OK)
        return rv;
    *out = format;
    if (format != PS_STORE_FORMAT && format != PS_STORE_FORMAT_JSON_OPTIM)
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
    s->scratch = calloc((size_t)2 * SCRATCH_ARRAYS *
                            (s->max_len ? s->max_len : 1),
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
    free(s->decay);
    s->decay = NULL;
    free(s->moving);
    s->moving = NULL;
    s->blocks = calloc(s->n_blocks ? s->n_blocks : 1, sizeof *s->blocks);
    s->max_len = 0;
    if (!s->blocks)
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory for %u "
                          "blocks", s->dir, s->n_blocks);
    if ((rc = mdb_cursor_open(txn, s->dbi_vars, &cur)) != 0)
        return store_lmdb_err(s, rc, "reading the blocks");
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), i++) {
        unsigned char want[4];
        struct ps_block_hdr h;

        store_be32(want, i);
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
        rv = store_lmdb_err(s, rc, "reading the blocks");
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

/* Read what meta says into the store (magic already checked; `format`
 * the store's). */
static int load_meta(struct ps_store *s, MDB_txn *txn, uint32_t format)
{
    MDB_val v;
    uint64_t step;
    char src[PATH_MAX + 32];
    int rv = store_meta_get(s, txn, "incarnation", &v);

    if (rv == HC_OK && v.mv_size == sizeof s->incarnation)
        memcpy(&s->incarnation, v.mv_data, sizeof s->incarnation);
    else if (rv != HC_ERR_NOTFOUND && rv != HC_OK)
        return rv;
    rv = store_meta_get(s, txn, "signature", &v);
    if (rv == HC_ERR_NOTFOUND) {
        atomic_store(&s->initialised, 0);
        return HC_OK;
    }
    if (rv != HC_OK)
        return rv;
    if ((rv = store_meta_fixed(s, txn, "signature", &s->signature, 8)) ||
        (rv = store_meta_fixed(s, txn, "layout_hash", &s->layout_hash, 8)) ||
        (rv = store_meta_fixed(s, txn, "block_elems", &s->block_elems, 4)) ||
        (rv = store_meta_fixed(s, txn, "n_shards", &s->n_shards, 4)) ||
        (rv = store_meta_fixed(s, txn, "shard", &s->shard, 4)) ||
        (rv = store_meta_fixed(s, txn, "n_blocks", &s->n_blocks, 4)) ||
        (rv = store_meta_fixed(s, txn, "n_slots", &s->n_slots, 4)) ||
        (rv = store_meta_fixed(s, txn, "step", &step, 8)))
        return rv;
    if ((rv = store_meta_get(s, txn, "optimizer", &v)) != HC_OK)
        return rv == HC_ERR_NOTFOUND
                   ? store_meta_fixed(s, txn, "optimizer", NULL, 0)
                   : rv;
    snprintf(src, sizeof src, "store %s: meta \"optimizer\"", s->dir);
    if (format == PS_STORE_FORMAT)
        rv = hc_optim_from_record(v.mv_data, v.mv_size, src, &s->optim);
    else if (hc_model_optim_from_json(v.mv_data, v.mv_size, src,
                                      &s->optim) != HC_OK) {
        char why[512];

        snprintf(why, sizeof why, "%s", hc_err_msg());
        rv = hc_err_set(HC_ERR_STORE, "%s (JSON text of store format %u); "
                        "this hetps cannot convert it: export the weights "
                        "with the hetps that wrote the store", why, format);
    }
    if (rv != HC_OK)
        return rv;
    if (s->n_slots > PS_STORE_MAX_SLOTS ||
        (int)s->n_slots != ps_optim_slots(&s->optim) || s->block_elems == 0)
        return hc_err_set(HC_ERR_STORE, "store %s: meta disagrees with itself "
                          "(n_slots %u, block_elems %u); the store is damaged",
                          s->dir, s->n_slots, s->block_elems);
    if ((rv = load_blocks(s, txn)) != HC_OK ||
        (rv = store_rows_load(s, txn)) != HC_OK)
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
                       : store_lmdb_err(s, rc, "opening the databases");
    return HC_OK;
}

/* An older store brought to this format in the open's transaction: the
 * optimizer settings, read from format 1's JSON text (load_meta), become
 * the typed record. */
static int convert_format(struct ps_store *s, MDB_txn *txn, uint32_t from)
{
    unsigned char rec[HC_OPTIM_RECORD_SIZE];
    int rv;

    if (atomic_load(&s->initialised)) {
        hc_optim_to_record(&s->optim, rec);
        if ((rv = store_meta_put(s, txn, "optimizer", rec, sizeof rec)))
            return rv;
    }
    if ((rv = store_meta_put_u32(s, txn, "format", PS_STORE_FORMAT)))
        return rv;
    hc_info("store %s: converted from format %u (optimizer settings as JSON "
            "text) to format %u (a typed record)", s->dir, from,
            PS_STORE_FORMAT);
    return HC_OK;
}

/* First transaction of an open: find or create meta, check it, count the
 * incarnation, load. */
static int open_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    unsigned wflags = s->read_only ? 0 : MDB_CREATE;
    uint32_t format = PS_STORE_FORMAT;
    int rc, rv, fresh = 0;

    (void)arg;
    rc = mdb_dbi_open(txn, "meta", 0, &s->dbi_meta);
    if (rc == MDB_NOTFOUND) {
        MDB_dbi main_dbi;
        MDB_stat st;

        if ((rc = mdb_dbi_open(txn, NULL, 0, &main_dbi)) != 0 ||
            (rc = mdb_stat(txn, main_dbi, &st)) != 0)
            return store_lmdb_err(s, rc, "opening the store");
        if (st.ms_entries > 0)
            return hc_err_set(HC_ERR_VERSION, "store %s: holds an LMDB database "
                              "that is not a hetps store (no \"meta\"): point "
                              "--data-dir at a hetps store or at an empty "
                              "directory", s->dir);
        if (s->read_only)
            return hc_err_set(HC_ERR_NOTFOUND, "store %s: empty: no hetps "
                              "store has been written there yet", s->dir);
        if ((rc = mdb_dbi_open(txn, "meta", MDB_CREATE, &s->dbi_meta)) != 0)
            return store_lmdb_err(s, rc, "creating the store");
        fresh = 1;
    } else if (rc != 0) {
        return rc == MDB_INCOMPATIBLE
                   ? hc_err_set(HC_ERR_VERSION, "store %s: holds an LMDB "
                                "database that is not a hetps store: point "
                                "--data-dir at a hetps store or at an empty "
                                "directory", s->dir)
                   : store_lmdb_err(s, rc, "opening the store");
    }
    if ((rv = open_dbs(s, txn, wflags)) != HC_OK ||
        (rv = store_rows_open(s, txn)) != HC_OK)
        return rv;
    if (fresh) {
        if ((rv = store_meta_put(s, txn, "magic", PS_STORE_MAGIC,
                                 strlen(PS_STORE_MAGIC))) != HC_OK ||
            (rv = store_meta_put_u32(s, txn, "format",
                                     PS_STORE_FORMAT)) != HC_OK)
            return rv;
    } else if ((rv = check_magic(s, txn, &format)) != HC_OK) {
        return rv;
    }
    if ((rv = load_meta(s, txn, format)) != HC_OK)
        return rv;
    if (format != PS_STORE_FORMAT && !s->read_only &&
        (rv = convert_format(s, txn, format)) != HC_OK)
        return rv;
    if (!s->read_only) {
        s->incarnation++;
        if ((rv = store_meta_put_u64(s, txn, "incarnation",
                                     s->incarnation)) != HC_OK)
            return rv;
    }
    return HC_OK;
}

/* Take the data-directory lock (see ps_store_opts.require_idle). */
static int lock_dir(struct ps_store *s, int exclusive)
{
    char path[PATH_MAX];

    snprintf(path, sizeof path, "%s/hetps.lock", s->dir);
    s->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (s->lock_fd < 0)
        s->lock_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (s->lock_fd < 0)
        return hc_err_set(HC_ERR_IO, "store %s: cannot open its lock file "
                          "%s: %s", s->dir, path, strerror(errno));
    if (flock(s->lock_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
        int e = errno;

        close(s->lock_fd);
        s->lock_fd = -1;
        if (e == EWOULDBLOCK)
            return hc_err_set(HC_ERR_EXISTS, "store %s is in use by another "
                              "process (a running hetps-ps, or a reshard "
                              "writing it): stop it first", s->dir);
        return hc_err_set(HC_ERR_IO, "store %s: cannot lock %s: %s", s->dir,
                          path, strerror(e));
    }
    return HC_OK;
}

/* A store for `dir` with the options applied, nothing opened yet. */
static int store_new(const char *dir, const struct ps_store_opts *o,
                     struct ps_store **out)
{
    struct ps_store *s;
    pthread_rwlockattr_t ra;

    if (!dir || !*dir)
        return hc_err_set(HC_ERR_INVAL, "store: no directory given "
                          "(--data-dir)");
    if (o->apply_threads < 0)
        return hc_err_set(HC_ERR_INVAL, "store %s: %d apply threads; use 1 "
                          "or more (0: the machine's cores)", dir,
                          o->apply_threads);
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
    pthread_rwlockattr_init(&ra);
    pthread_rwlockattr_setkind_np(&ra,
        PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&s->maplock, &ra);
    pthread_rwlockattr_destroy(&ra);
    s->read_only = o->read_only;
    s->lock_fd = -1;
    s->durability = o->durability;
    s->sync_ms = o->sync_ms;
    /* With MDB_WRITEMAP (every writable store, below) LMDB keeps no dirty
     * list and never spills: a reservation stays where it is until commit,
     * so every apply may compute straight into it. */
    s->direct_max_pages = o->direct_max_pages ? o->direct_max_pages
                          : o->read_only      ? DEFAULT_DIRECT_PAGES
                                              : UINT64_MAX;
    s->split_min = o->split_min ? o->split_min : DEFAULT_SPLIT_MIN;
    s->map_ahead_max = o->map_ahead_max == PS_STORE_MAP_AHEAD_OFF ||
                               o->read_only ? 0
                       : o->map_ahead_max ? o->map_ahead_max
                                          : DEFAULT_MAP_AHEAD;
    if (!o->read_only && o->apply_threads != 1)
        s->fan = hc_fanout_open(o->apply_threads > 0 ? o->apply_threads : 8);
    s->map_size = o->map_size ? o->map_size : DEFAULT_MAP_SIZE;
    s->map_max = o->map_max ? o->map_max : DEFAULT_MAP_MAX;
    if (s->map_max < s->map_size)
        s->map_max = s->map_size;
    s->last_sync_ms = (uint64_t)hc_now_ms();
    *out = s;
    return HC_OK;
}

/* The directory: made and locked for a writer; present (and locked
 * shared with require_idle) for a reader. */
static int open_dir(struct ps_store *s, const struct ps_store_opts *o)
{
    struct stat sb;
    int rv;

    if (!s->read_only) {
        if ((rv = mkdir_p(s->dir)) != HC_OK)
            return rv;
        return lock_dir(s, 1);
    }
    if (stat(s->dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return hc_err_set(HC_ERR_NOTFOUND, "store %s: no such directory",
                          s->dir);
    return o->require_idle ? lock_dir(s, 0) : HC_OK;
}

/* LMDB's environment: made with the store's flags, opened (its failures
 * said in words), its map size and page size read, stale readers
 * cleared. */
static int open_env(struct ps_store *s, const struct ps_store_opts *o)
{
    const char *dir = s->dir;
    unsigned flags = MDB_NOTLS;
    MDB_envinfo info;
    MDB_stat st;
    int rc, dead = 0;

    /* Writes go straight into the map: no dirty-page copies malloc'd per
     * transaction and no write(2) of them at commit (measured: most of a
     * push's cost without it). The file is sparse up to the map size.
     * And no readahead on the map (MDB_NORDAHEAD: madvise MADV_RANDOM):
     * readahead fills the page cache with large folios (Linux 6.x), and a
     * write to one 4 KiB page of a folio dirties the whole folio, so
     * pushes of random rows to a table far larger than the pages they
     * touch had the kernel write back many times the bytes changed and
     * held the shard in its dirty-page throttle (tests/bench/rows_scale.sh,
     * 50 M ids: 2,253 rows/s with readahead, 23,715 without). A cold
     * store is then read a page a fault. */
    flags |= s->read_only ? MDB_RDONLY : MDB_WRITEMAP | MDB_NORDAHEAD;
    if (s->durability == PS_DURABLE_NONE)
        flags |= MDB_NOSYNC | MDB_NOMETASYNC;
    else if (s->sync_ms > 0)
        flags |= MDB_NOSYNC;
    if ((rc = mdb_env_create(&s->env)) != 0 ||
        (rc = mdb_env_set_maxdbs(s->env, 8)) != 0 ||
        (rc = mdb_env_set_maxreaders(s->env, o->max_readers ? o->max_readers
                                                            : 126)) != 0 ||
        (rc = mdb_env_set_mapsize(s->env, (size_t)s->map_size)) != 0)
        return store_lmdb_err(s, rc, "creating the environment");
    rc = mdb_env_open(s->env, dir, flags, 0644);
    if (rc == MDB_INVALID)
        return hc_err_set(HC_ERR_VERSION, "store %s: %s/data.mdb is not an "
                          "LMDB database or is damaged: point --data-dir at a "
                          "hetps store or at an empty directory", dir, dir);
    if (rc == MDB_VERSION_MISMATCH)
        return hc_err_set(HC_ERR_VERSION, "store %s: written by an LMDB "
                          "version this build cannot read (%s): use the hetps "
                          "build that wrote it", dir,
                          mdb_version(NULL, NULL, NULL));
    if (rc == ENOENT || rc == EACCES || rc == EROFS || rc == ENOTDIR)
        return hc_err_set(HC_ERR_IO, "store %s: cannot open: %s", dir,
                          mdb_strerror(rc));
    if (rc != 0)
        return store_lmdb_err(s, rc, "opening the environment");
    s->env_open = 1;
    if ((rc = mdb_env_info(s->env, &info)) != 0 ||
        (rc = mdb_env_stat(s->env, &st)) != 0)
        return store_lmdb_err(s, rc, "reading the environment");
    s->map_size = info.me_mapsize;
    if (s->map_max < s->map_size)
        s->map_max = s->map_size;
    s->psize = st.ms_psize;
    if ((rc = mdb_reader_check(s->env, &dead)) != 0)
        return store_lmdb_err(s, rc, "clearing stale readers");
    if (dead > 0)
        hc_info("store %s: cleared %d stale reader slot%s left by crashed "
                "processes", dir, dead, dead == 1 ? "" : "s");
    return HC_OK;
}

/* The open's first transaction (open_body): a read transaction for a
 * reader, a write transaction for a writer. */
static int first_txn(struct ps_store *s)
{
    MDB_txn *txn = NULL;
    int rc, rv;

    if (!s->read_only) {
        pthread_mutex_lock(&s->wmu);
        rv = store_write_txn(s, open_body, NULL, "opening the store");
        pthread_mutex_unlock(&s->wmu);
        return rv;
    }
    if ((rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn)) != 0)
        return store_lmdb_err(s, rc, "opening the store");
    if ((rv = open_body(s, txn, NULL)) != HC_OK) {
        mdb_txn_abort(txn);
        return rv;
    }
    if ((rc = mdb_txn_commit(txn)) != 0)
        return store_lmdb_err(s, rc, "opening the store");
    return HC_OK;
}

int ps_store_open(const char *dir, const struct ps_store_opts *o,
                  struct ps_store **out)
{
    static const struct ps_store_opts defaults;
    struct ps_store *s = NULL;
    char a[32], b[32];
    int rv;

    *out = NULL;
    if ((rv = store_new(dir, o ? o : &defaults, &s)) != HC_OK)
        return rv;
    if ((rv = open_dir(s, o ? o : &defaults)) != HC_OK ||
        (rv = open_env(s, o ? o : &defaults)) != HC_OK ||
        (rv = first_txn(s)) != HC_OK) {
        ps_store_close(s);
        return rv;
    }
    store_map_ahead(s);
    hc_info("store %s: opened (incarnation %llu, %s, step %llu, map %s, %s "
            "of it mapped ahead)", dir, (unsigned long long)s->incarnation,
            atomic_load(&s->initialised) ? "initialised" : "empty",
            (unsigned long long)atomic_load(&s->step),
            store_fmt_bytes(a, sizeof a, s->map_size),
            store_fmt_bytes(b, sizeof b, atomic_load(&s->mapped_ahead)));
    *out = s;
    return HC_OK;
}

uint64_t ps_store_mapped_ahead(const struct ps_store *s)
{
    return atomic_load(&s->mapped_ahead);
}

void ps_store_close(struct ps_store *s)
{
    if (!s)
        return;
    store_step_stop(s);     /* a step left open is not applied */
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
    if (s->lock_fd >= 0)
        close(s->lock_fd);      /* releases the flock */
    pthread_rwlock_destroy(&s->maplock);
    pthread_mutex_destroy(&s->poolmu);
    pthread_mutex_destroy(&s->wmu);
    hc_fanout_close(s->fan);
    free(s->jobs);
    free(s->blocks);
    free(s->decay);
    free(s->moving);
    free(s->scratch);
    free(s->seen);
    store_rows_free(s);
    free(s->dir);
    free(s);
}

/* ---- init -------------------------------------------------------------- */

struct init_arg {
    uint64_t signature, layout_hash;
    uint32_t block_elems, n_shards, shard, n_blocks, n_slots;
    struct hc_optim_conf optim;
    unsigned char optim_rec[HC_OPTIM_RECORD_SIZE];
    const struct ps_block *blocks;  /* (n_blocks) in local order */
    const float *const *init;
    const char *var_defs;           /* (var_defs_len) or NULL */
    size_t var_defs_len;
    const struct ps_table *tables;  /* (n_tables) */
    uint32_t n_tables;
    uint64_t seed;
    int rows_loading;
};

static int init_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    const struct init_arg *a = arg;
    int rv;

    if ((rv = store_meta_put_u64(s, txn, "signature", a->signature)) ||
        (rv = store_meta_put_u64(s, txn, "layout_hash", a->layout_hash)) ||
        (rv = store_meta_put_u32(s, txn, "block_elems", a->block_elems)) ||
        (rv = store_meta_put_u32(s, txn, "n_shards", a->n_shards)) ||
        (rv = store_meta_put_u32(s, txn, "shard", a->shard)) ||
        (rv = store_meta_put_u32(s, txn, "n_blocks", a->n_blocks)) ||
        (rv = store_meta_put_u32(s, txn, "n_slots", a->n_slots)) ||
        (rv = store_meta_put(s, txn, "optimizer", a->optim_rec,
                             sizeof a->optim_rec)) ||
        (rv = store_meta_put_u64(s, txn, "step", 0)))
        return rv;
    if (a->var_defs && (rv = store_app_meta_put(s, txn, "vars", a->var_defs,
                                                a->var_defs_len)) != HC_OK)
        return rv;
    if ((rv = store_rows_init(s, txn, a->tables, a->n_tables,
                              a->seed)) != HC_OK)
        return rv;
    if (a->rows_loading &&
        (rv = store_app_meta_put(s, txn, "rows_loading", "\1", 1)) != HC_OK)
        return rv;
    for (uint32_t i = 0; i < a->n_blocks; i++) {
        unsigned char key[8];

        store_be32(key, i);
        if ((rv = store_put_block(s, txn, s->dbi_vars, key, 4, &a->blocks[i],
                                  0, a->init ? a->init[i] : NULL, 0.0f)))
            return rv;
        for (uint32_t k = 0; k < a->n_slots; k++) {
            store_be32(key, k);
            store_be32(key + 4, i);
            if ((rv = store_put_block(s, txn, s->dbi_slots, key, 8,
                                      &a->blocks[i], 1 + k, NULL,
                                      ps_optim_slot_init(&a->optim, (int)k))))
                return rv;
        }
    }
    ps_fault_point("create:inside_init");   /* all written, not committed */
    return HC_OK;
}

/* Say how an initialised store differs from what init asks for. */
static int init_mismatch(const struct ps_store *s, const struct init_arg *a)
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
    if (store_rows_mismatch(s, a->tables, a->n_tables, a->seed) != HC_OK)
        return HC_ERR_MISMATCH;
    if (!hc_optim_equal(&s->optim, &a->optim)) {
        char made[HC_OPTIM_DESCRIBE_MAX], asked[HC_OPTIM_DESCRIBE_MAX];

        return hc_err_set(HC_ERR_MISMATCH, "store %s: made with optimizer %s "
                          "but asked for %s: use the store's optimizer "
                          "settings, or a fresh --data-dir", s->dir,
                          hc_optim_describe(&s->optim, made, sizeof made),
                          hc_optim_describe(&a->optim, asked, sizeof asked));
    }
    return HC_OK;
}

/* The local block table of shard `shard` of `layout` into *tab (n
 * entries, freed by the caller), and its longest block into *max_len. */
static int init_table(const struct ps_store *s, const struct hc_layout *layout,
                      uint32_t shard, struct ps_block **tab, uint32_t *n,
                      uint32_t *max_len)
{
    struct ps_block *t;

    *n = *max_len = 0;
    for (size_t i = 0; i < layout->n_blocks; i++)
        *n += layout->blocks[i].shard == shard;
    *tab = t = calloc(*n ? *n : 1, sizeof *t);
    if (!t)
        return hc_err_set(HC_ERR_NOMEM, "store %s: out of memory", s->dir);
    for (size_t i = 0; i < layout->n_blocks; i++) {
        const struct hc_block *b = &layout->blocks[i];

        if (b->shard != shard)
            continue;
        if (b->local >= *n || t[b->local].length != 0 || b->length == 0 ||
            b->length > layout->block_elems)
            return hc_err_set(HC_ERR_INVAL, "store %s: layout block %zu (var "
                              "%u, offset %llu, %u elements, local %u) is "
                              "invalid for shard %u of %u blocks", s->dir, i,
                              b->var, (unsigned long long)b->offset, b->length,
                              b->local, shard, *n);
        t[b->local] = (struct ps_block){b->var, b->length, b->offset};
        if (b->length > *max_len)
            *max_len = b->length;
    }
    return HC_OK;
}

static int vars_body(struct ps_store *s, MDB_txn *txn, void *arg)
{
    const struct init_arg *a = arg;

    return store_app_meta_put(s, txn, "vars", a->var_defs, a->var_defs_len);
}

/* Already initialised (s->wmu held): the same store, or say how it
 * differs. A store an older hetps created without its variable
 * definitions (killed between its two transactions) gets them now. */
static int init_again(struct ps_store *s, const struct init_arg *a)
{
    MDB_txn *txn = NULL;
    MDB_val v;
    int rv;

    if ((rv = init_mismatch(s, a)) != HC_OK || !a->var_defs)
        return rv;
    if ((rv = store_txn_begin(s, MDB_RDONLY, &txn)) != HC_OK)
        return rv;
    rv = store_meta_get(s, txn, "app.vars", &v);
    store_rtxn_end(s, txn);
    if (rv != HC_ERR_NOTFOUND)
        return rv;
    hc_warn("store %s: initialised but without its variable definitions (a "
            "create cut short by an older hetps): writing them now", s->dir);
    return store_write_txn(s, vars_body, (void *)a,
                           "writing the variable definitions");
}

/* The store now holds what `a` wrote (s->wmu held): take over its table. */
static int init_done(struct ps_store *s, const struct init_arg *a,
                     struct ps_block **tab, uint32_t max_len)
{
    int rv;

    free(s->blocks);
    free(s->decay);
    s->decay = NULL;
    free(s->moving);
    s->moving = NULL;
    s->blocks = *tab;
    *tab = NULL;
    s->signature = a->signature;
    s->layout_hash = a->layout_hash;
    s->block_elems = a->block_elems;
    s->n_shards = a->n_shards;
    s->shard = a->shard;
    s->n_blocks = a->n_blocks;
    s->n_slots = a->n_slots;
    s->max_len = max_len;
    s->optim = a->optim;
    if ((rv = store_rows_adopt(s, a->tables, a->n_tables, a->seed)) != HC_OK)
        return rv;
    return alloc_work(s);
}

int ps_store_init(struct ps_store *s, const struct ps_store_def *d,
                  int *created)
{
    const struct hc_layout *layout = d->layout;
    struct init_arg a = {0};
    struct ps_block *tab = NULL;
    char src[PATH_MAX + 32], desc[HC_OPTIM_DESCRIBE_MAX];
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
    if (d->shard >= (uint32_t)layout->n_shards)
        return hc_err_set(HC_ERR_INVAL, "store %s: shard %u is out of range: "
                          "the layout has %d shards", s->dir, d->shard,
                          layout->n_shards);
    snprintf(src, sizeof src, "store %s: optimizer", s->dir);
    if (!d->optim)
        return hc_err_set(HC_ERR_CONFIG, "%s: no settings given", src);
    if ((rv = hc_optim_validate(d->optim, src)) != HC_OK)
        return rv;
    if ((rv = store_rows_check(s, d->tables, d->n_tables)) != HC_OK)
        return rv;
    if ((rv = init_table(s, layout, d->shard, &tab, &n, &max_len)) != HC_OK)
        goto out;
    for (uint32_t i = 0; d->init && i < n; i++)
        if (!d->init[i]) {
            rv = hc_err_set(HC_ERR_INVAL, "store %s: no initial values for "
                            "local block %u", s->dir, i);
            goto out;
        }
    a = (struct init_arg){
        .signature = d->signature, .layout_hash = hc_layout_hash(layout),
        .block_elems = layout->block_elems,
        .n_shards = (uint32_t)layout->n_shards, .shard = d->shard,
        .n_blocks = n, .n_slots = (uint32_t)ps_optim_slots(d->optim),
        .optim = *d->optim, .blocks = tab, .init = d->init,
        .var_defs = d->var_defs, .var_defs_len = d->var_defs_len,
        .tables = d->tables, .n_tables = d->n_tables, .seed = d->seed,
        .rows_loading = d->rows_loading,
    };

    hc_optim_to_record(&a.optim, a.optim_rec);
    pthread_mutex_lock(&s->wmu);
    if (atomic_load(&s->initialised)) {
        rv = init_again(s, &a);
        pthread_mutex_unlock(&s->wmu);
        goto out;
    }
    /* What the create writes: each block's record (values and CRC) and its
     * optimizer slots, at most 5/4 of it in LMDB's pages, and as much again
     * for copy-on-write of the B-tree — reserved on disk beforehand. */
    s->write_extra = a.var_defs_len * 2;
    for (uint32_t i = 0; i < n; i++)
        s->write_extra += ((uint64_t)tab[i].length * 4 + 64) *
                          (1 + a.n_slots) * 5 / 2;
    if (s->write_extra > s->map_size)
        s->write_extra = s->map_size;
    rv = store_write_txn(s, init_body, &a, "initialising the store");
    s->write_extra = 0;
    if (rv == HC_OK && (rv = init_done(s, &a, &tab, max_len)) == HC_OK) {
        atomic_store(&s->step, 0);
        atomic_store(&s->initialised, 1);
        if (created)
            *created = 1;
        hc_info("store %s: initialised shard %u of %u: %u blocks, optimizer "
                "%s", s->dir, d->shard, a.n_shards, n,
                hc_optim_describe(&a.optim, desc, sizeof desc));
    }
    pthread_mutex_unlock(&s->wmu);
out:
    free(tab);
    return rv;
}

/* ---- what meta says ---------------------------------------------------- */

uint64_t ps_store_step(const struct ps_store *s)
{
    return atomic_load(&((struct ps_store *)s)->step);
}

uint64_t ps_store_signature(const struct ps_store *s)
{
    return atomic_load(&((struct ps_store *)s)->initialised) ? s->signature
                                                             : 0;
}

uint32_t ps_store_block_elems(const struct ps_store *s)
{
    return atomic_load(&((struct ps_store *)s)->initialised) ? s->block_elems
                                                             : 0;
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
    info->steps_split = atomic_load(&m->steps_split);
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

/* ---- sync -------------------------------------------------------------- */

#define READER_CHECK_MS 10000

int ps_store_maintain(struct ps_store *s)
{
    uint64_t now = (uint64_t)hc_now_ms();
    int rc = 0, dead = 0;

    if (s->read_only)
        return HC_OK;
    /* Busy (a write, or a step open until its last part: ps_store_step_open)
     * — the timed sync waits for the next call. */
    if (pthread_mutex_trylock(&s->wmu) == 0) {
        if (s->unsynced && now - s->last_sync_ms >= s->sync_ms) {
            rc = mdb_env_sync(s->env, 1);
            s->last_sync_ms = now;
            s->unsynced = 0;
        }
        pthread_mutex_unlock(&s->wmu);
    }
    if (rc != 0)
        return hc_err_set(HC_ERR_IO, "store %s: timed sync failed: %s; the "
                          "last commits may not be on disk", s->dir,
                          mdb_strerror(rc));
    if (now - s->last_reader_check_ms >= READER_CHECK_MS) {
        s->last_reader_check_ms = now;
        if (mdb_reader_check(s->env, &dead) == 0 && dead > 0)
            hc_info("store %s: cleared %d stale reader slot%s left by crashed "
                    "processes", s->dir, dead, dead == 1 ? "" : "s");
    }
    return HC_OK;
}

int ps_store_sync(struct ps_store *s)
{
    int rc;

    if (s->read_only)
        return HC_OK;
    pthread_mutex_lock(&s->wmu);
    rc = mdb_env_sync(s->env, 1);
    s->last_sync_ms = (uint64_t)hc_now_ms();
    pthread_mutex_unlock(&s->wmu);
    if (rc != 0)
        return hc_err_set(HC_ERR_IO, "store %s: sync failed: %s", s->dir,
                          mdb_strerror(rc));
    return HC_OK;
}
