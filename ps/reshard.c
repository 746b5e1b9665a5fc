/*
 * reshard.c — move a job's stores to another number of shards, and fit a
 * data directory's stores to the cluster in place (see reshard.h): what
 * `hetps launch` does before it starts any task.
 *
 * ps_reshard gathers every variable and slot (gather.h), lays them out for
 * the new shards and writes fresh stores, then reads them back.
 *
 * DATA holds shard J's store in DATA/ps-J. When DATA/ps-0 is a store of m
 * shards and the cluster has n != m parameter servers:
 *
 *   1. ps_reshard writes the n new stores into DATA/resharding-m-to-n/ps-J,
 *      reading the old ones only; if that fails, the directory is removed
 *      and DATA is as it was.
 *   2. The new stores reach the disk (fsync), then the file `complete` in
 *      DATA/resharding-m-to-n does: from here on the move only goes forward.
 *   3. Every old store DATA/ps-J (J < max(m, n)) is renamed to
 *      DATA/before-reshard-m/ps-J: kept, never deleted.
 *   4. Every new store is renamed to DATA/ps-J.
 *   5. `complete` and the then empty DATA/resharding-m-to-n are removed.
 *
 * A crash anywhere (a power cut, kill -9) leaves DATA/resharding-m-to-n
 * behind: ps_reshard_in_place refuses to run while it is there, and
 * ps_reshard_recover (which `hetps reshard --in-place`, and so every
 * `hetps launch`, runs first) deals with it. Without
 * `complete`, the old stores were never touched: the incomplete new ones
 * are removed and the reshard starts over. With it, steps 3–5 are run
 * again: each rename is taken only while its source is still there (an
 * old store is moved while its new one waits in resharding-m-to-n, a new
 * one while it is still there), so they finish from whatever point the
 * crash left — say ps-0 already new, ps-1 still old, ps-2 waiting. Until
 * then no shard is started on a half-moved DATA.
 */
#include "reshard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "rowmap.h"
#include "gather.h"
#include "layout.h"
#include "optimizer.h"
#include "store.h"

#define COMPLETE "complete"

/* Each worker's place in its data, for the workers to resume from (a
 * record with no request: a worker's first request after the move comes
 * with a new incarnation). */
static int put_places(struct ps_store *st, const struct ps_gathered *g)
{
    struct ps_record *recs = calloc((size_t)g->n_workers + 1, sizeof *recs);
    size_t n = 0;
    int w, rv;

    if (!recs)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (w = 0; w < g->n_workers; w++)
        if (g->places[w].known) {
            ps_record_begin(&recs[n], (uint32_t)w, PS_REQ_NONE, 0, 0);
            ps_record_set_place(&recs[n++], 1, g->places[w].epoch,
                                g->places[w].batches);
        }
    rv = n ? ps_store_apply(st, &g->info0.optim, NULL, 0, recs, n, NULL)
           : HC_OK;
    free(recs);
    return rv;
}

/* Table var's rows that hc_row_shard gives shard j of n: into the new
 * store st whole (values, slots, counts), then read back bitwise. */
static int move_rows(struct ps_store *st, const struct ps_gathered_var *gv,
                     uint32_t var, int j, int n)
{
    size_t w = gv->width, k = 0, got = 0;
    uint64_t *ids = malloc((gv->n_rows + 1) * sizeof *ids), *ups, *bi = NULL,
             *bu = NULL;
    float *rows = malloc((gv->n_rows * w + 1) * sizeof *rows), *br = NULL;
    int rv = HC_OK;

    ups = malloc((gv->n_rows + 1) * sizeof *ups);
    if (!ids || !rows || !ups) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for the rows of %s",
                        gv->name);
        goto out;
    }
    for (size_t i = 0; i < gv->n_rows; i++)
        if (hc_row_shard(var, gv->ids[i], (uint32_t)n) == (uint32_t)j) {
            ids[k] = gv->ids[i];
            ups[k] = gv->updates[i];
            memcpy(rows + k * w, gv->data + i * w, w * sizeof *rows);
            k++;
        }
    if ((rv = ps_store_rows_put(st, var, ids, rows, ups, k)) != HC_OK ||
        (rv = ps_store_rows_list(st, var, &bi, &br, &bu, &got)) != HC_OK)
        goto out;
    if (got != k || (k && (memcmp(bi, ids, k * sizeof *ids) ||
                           memcmp(bu, ups, k * sizeof *ups) ||
                           memcmp(br, rows, k * w * sizeof *rows))))
        rv = hc_err_set(HC_ERR_STORE, "the rows of %s read back different "
                        "from the new store of shard %d", gv->name, j);
out:
    free(ids);
    free(rows);
    free(ups);
    free(bi);
    free(br);
    free(bu);
    return rv;
}

int ps_reshard(const struct hc_cluster *from, const char *from_dir,
               const struct hc_cluster *to, const char *to_dir, FILE *log)
{
    struct hc_layout lay = { 0 };
    struct ps_gathered g;
    size_t sizes[HC_MODEL_MAX_VARS] = { 0 };
    unsigned char with_prev[HC_MODEL_MAX_VARS] = { 0 };
    char dir[PATH_MAX];
    int j, v, k, rv, have_lay = 0;

    /* 1. Everything the old shards hold, checksums verified. */
    if ((rv = ps_gather(from, from_dir, PS_GATHER_MOVE, 1, &g, log)) != HC_OK)
        return rv;
    /* 2. The new layout and fresh stores. */
    for (v = 0; v < g.n_vars; v++) {     /* a table has no blocks */
        sizes[v] = g.vars[v].table_rows ? 0 : g.vars[v].size;
        with_prev[v] = (unsigned char)g.vars[v].moments_of_prev;
    }
    rv = hc_layout_build_with(sizes, with_prev, g.n_vars, to->n_ps,
                              g.block_elems, &lay);
    if (rv == HC_OK)
        have_lay = 1;
    for (j = 0; rv == HC_OK && j < to->n_ps; j++) {
        const float **init = calloc(lay.shard_blocks[j] + 1, sizeof *init);
        const float **sl[PS_STORE_MAX_SLOTS] = { 0 };
        struct ps_store *st = NULL;
        struct ps_store_info info;
        struct ps_store_def def;
        size_t b;
        int created = 0;

        for (k = 0; k < (int)g.n_slots; k++)
            sl[k] = calloc(lay.shard_blocks[j] + 1, sizeof *sl[k]);
        for (k = 0; k < (int)g.n_slots && sl[k]; k++)
            ;
        if (!init || k < (int)g.n_slots) {
            rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
            goto next;
        }
        for (b = 0; b < lay.n_blocks; b++) {
            const struct hc_block *bk = &lay.blocks[b];

            if (bk->shard != (uint32_t)j)
                continue;
            init[bk->local] = g.vars[bk->var].data + bk->offset;
            for (k = 0; k < (int)g.n_slots; k++)
                sl[k][bk->local] = g.slots[k][bk->var] + bk->offset;
        }
        snprintf(dir, sizeof dir, "%s/ps-%d", to_dir, j);
        if ((rv = ps_store_open(dir, NULL, &st)) != HC_OK)
            goto next;
        ps_store_info(st, &info);
        if (info.initialised) {
            rv = hc_err_set(HC_ERR_EXISTS, "store %s already holds variables: "
                            "give reshard an empty --out-dir", dir);
            goto next;
        }
        def = (struct ps_store_def){
            .signature = g.info0.signature, .layout = &lay,
            .shard = (uint32_t)j, .optim = &g.info0.optim, .init = init,
            .var_defs = g.json, .var_defs_len = g.json_len,
            .tables = g.n_tables ? g.tables : NULL, .n_tables = g.n_tables,
            .seed = g.seed,
        };
        if ((rv = ps_store_init(st, &def, &created)) == HC_OK &&
            (rv = ps_store_restore(st, (const float *const *const *)sl, g.step)) ==
                HC_OK)
            rv = put_places(st, &g);
        for (v = 0; rv == HC_OK && v < g.n_vars; v++)
            if (g.vars[v].table_rows)
                rv = move_rows(st, &g.vars[v], (uint32_t)v, j, to->n_ps);
        /* 3. Read back: every parameter bitwise as it was. */
        for (b = 0; rv == HC_OK && b < lay.n_blocks; b++) {
            const struct hc_block *bk = &lay.blocks[b];
            float *back;

            if (bk->shard != (uint32_t)j)
                continue;
            back = malloc((size_t)bk->length * sizeof *back);
            if (!back) {
                rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
                break;
            }
            rv = ps_store_read_block(st, bk->local, back, bk->length);
            if (rv == HC_OK && memcmp(back, g.vars[bk->var].data + bk->offset,
                                      (size_t)bk->length * sizeof *back) != 0)
                rv = hc_err_set(HC_ERR_STORE, "%s: block %u reads back "
                                "different values", dir, bk->local);
            free(back);
        }
        if (rv == HC_OK)
            rv = ps_store_verify(st);
        if (rv == HC_OK && log)
            fprintf(log, "%s: %u blocks, step %llu, checksums good\n", dir,
                    lay.shard_blocks[j], (unsigned long long)g.step);
next:
        ps_store_close(st);
        free(init);
        for (k = 0; k < PS_STORE_MAX_SLOTS; k++)
            free(sl[k]);
    }
    if (have_lay)
        hc_layout_free(&lay);
    ps_gathered_free(&g);
    return rv;
}


static int path_fmt(char *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* out (PATH_MAX bytes) = the formatted path; HC_ERR_LIMIT when too long. */
static int path_fmt(char *out, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX)
        return hc_err_set(HC_ERR_LIMIT, "path too long: %s…", out);
    return HC_OK;
}

static int exists(const char *path)
{
    struct stat sb;

    return lstat(path, &sb) == 0;
}

/* fsync a file, or a directory (to make the renames in it durable). */
static int sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), rv = HC_OK;

    if (fd < 0)
        return hc_err_set(HC_ERR_IO, "cannot open %s to sync it: %s", path,
                          strerror(errno));
    if (fsync(fd) != 0)
        rv = hc_err_set(HC_ERR_IO, "cannot sync %s: %s", path, strerror(errno));
    close(fd);
    return rv;
}

/* An interrupted reshard's directory in data_dir: *m, *n (0, 0 when none). */
static int find_interrupted(const char *data_dir, int *m, int *n)
{
    DIR *d = opendir(data_dir);
    struct dirent *e;
    int a, b, len, rv = HC_OK;

    *m = *n = 0;
    if (!d)
        return errno == ENOENT ? HC_OK
                               : hc_err_set(HC_ERR_IO, "cannot read %s: %s",
                                            data_dir, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        len = 0;
        if (sscanf(e->d_name, "resharding-%d-to-%d%n", &a, &b, &len) != 2 ||
            e->d_name[len] != '\0' || a < 1 || b < 1)
            continue;
        if (*m) {
            rv = hc_err_set(HC_ERR_EXISTS, "%s holds both resharding-%d-to-%d "
                            "and %s, but one reshard at a time leaves such a "
                            "directory: move the one not made by hetps out of "
                            "%s", data_dir, *m, *n, e->d_name, data_dir);
            break;
        }
        *m = a;
        *n = b;
    }
    closedir(d);
    return rv;
}

/* Remove what step 1 left in tmp: only the files a store is made of, so
 * that anything else in it (never ours) makes rmdir fail, and says so. */
static int remove_incomplete(const char *tmp, int n)
{
    char p[PATH_MAX];
    int j, rv = HC_OK;

    for (j = 0; j < n && rv == HC_OK; j++) {
        if ((rv = path_fmt(p, "%s/ps-%d/data.mdb", tmp, j)) == HC_OK)
            unlink(p);
        if (rv == HC_OK && (rv = path_fmt(p, "%s/ps-%d/lock.mdb", tmp, j)) == HC_OK)
            unlink(p);
        if (rv == HC_OK && (rv = path_fmt(p, "%s/ps-%d", tmp, j)) == HC_OK &&
            rmdir(p) != 0 && errno != ENOENT)
            rv = hc_err_set(HC_ERR_IO, "cannot remove %s: %s", p,
                            strerror(errno));
    }
    if (rv == HC_OK && rmdir(tmp) != 0 && errno != ENOENT)
        rv = hc_err_set(HC_ERR_IO, "cannot remove %s: %s", tmp, strerror(errno));
    if (rv != HC_OK)
        rv = hc_err_set(rv, "%s — %s is the incomplete output of a reshard "
                        "that did not finish (the stores in ps-J were not "
                        "touched): remove it, then try again", hc_err_msg(),
                        tmp);
    return rv;
}

/* Steps 1–2: the new stores in tmp (PATH_MAX bytes), durable, `complete`. */
static int write_new(const struct hc_cluster *to, const char *data_dir,
                     int m, const char *tmp, FILE *log)
{
    struct hc_cluster from = *to;   /* to's workers: their places move */
    char p[PATH_MAX];
    int j, fd, rv, made = 0;

    from.n_ps = m;
    from.ps = calloc((size_t)m, sizeof *from.ps);
    if (!from.ps)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    snprintf(from.source, sizeof from.source, "the stores in %s", data_dir);
    if (mkdir(tmp, 0755) != 0) {
        rv = hc_err_set(HC_ERR_IO, "cannot create %s: %s", tmp, strerror(errno));
    } else {
        made = 1;
        rv = ps_reshard(&from, data_dir, to, tmp, log);
    }
    free(from.ps);
    for (j = 0; rv == HC_OK && j < to->n_ps; j++) {
        if ((rv = path_fmt(p, "%s/ps-%d/data.mdb", tmp, j)) == HC_OK &&
            (rv = sync_path(p)) == HC_OK &&
            (rv = path_fmt(p, "%s/ps-%d", tmp, j)) == HC_OK)
            rv = sync_path(p);
    }
    if (rv == HC_OK && (rv = path_fmt(p, "%s/" COMPLETE, tmp)) == HC_OK) {
        static const char text[] = "every new store is written, read back "
                                   "and synced: the move goes forward\n";

        fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, text, sizeof text - 1) != (ssize_t)(sizeof text - 1) ||
            fsync(fd) != 0)
            rv = hc_err_set(HC_ERR_IO, "cannot write %s: %s", p, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    if (rv == HC_OK)
        rv = sync_path(tmp);
    if (rv != HC_OK) {
        rv = hc_err_set(rv, "cannot move the stores in %s from %d to %d "
                        "parameter servers: %s (%s is as it was)", data_dir,
                        m, to->n_ps, hc_err_msg(), data_dir);
        if (made && remove_incomplete(tmp, to->n_ps) != HC_OK)
            return HC_ERR_IO;   /* its message says what to remove */
    }
    return rv;
}

/* Steps 3–5, from wherever an earlier run stopped (see the top). */
static int move_into_place(const char *data_dir, int m, int n)
{
    char tmp[PATH_MAX], kept_dir[PATH_MAX], old[PATH_MAX], new[PATH_MAX];
    char kept[PATH_MAX];
    int j, top = m > n ? m : n, rv;

    if ((rv = path_fmt(tmp, "%s/resharding-%d-to-%d", data_dir, m, n)) != HC_OK ||
        (rv = path_fmt(kept_dir, "%s/before-reshard-%d", data_dir, m)) != HC_OK)
        return rv;
    if (mkdir(kept_dir, 0755) != 0 && errno != EEXIST)
        return hc_err_set(HC_ERR_IO, "cannot create %s: %s", kept_dir,
                          strerror(errno));
    for (j = 0; j < top; j++) {
        if ((rv = path_fmt(old, "%s/ps-%d", data_dir, j)) != HC_OK ||
            (rv = path_fmt(new, "%s/ps-%d", tmp, j)) != HC_OK ||
            (rv = path_fmt(kept, "%s/ps-%d", kept_dir, j)) != HC_OK)
            return rv;
        if (!exists(old) || (j < n && !exists(new)))
            continue;   /* kept already, or the new store is in place */
        if (exists(kept))
            return hc_err_set(HC_ERR_EXISTS, "both %s and %s exist: move the "
                              "one that is not a store of the job out of %s, "
                              "then try again", old, kept, data_dir);
        if (rename(old, kept) != 0)
            return hc_err_set(HC_ERR_IO, "cannot move %s to %s: %s", old, kept,
                              strerror(errno));
    }
    for (j = 0; j < n; j++) {
        if ((rv = path_fmt(old, "%s/ps-%d", data_dir, j)) != HC_OK ||
            (rv = path_fmt(new, "%s/ps-%d", tmp, j)) != HC_OK)
            return rv;
        if (!exists(new))
            continue;   /* in place already */
        if (exists(old))
            return hc_err_set(HC_ERR_EXISTS, "%s is in the way of the new "
                              "store %s: move it out of %s, then try again",
                              old, new, data_dir);
        if (rename(new, old) != 0)
            return hc_err_set(HC_ERR_IO, "cannot move %s to %s: %s", new, old,
                              strerror(errno));
    }
    if ((rv = sync_path(kept_dir)) != HC_OK || (rv = sync_path(data_dir)) != HC_OK ||
        (rv = path_fmt(new, "%s/" COMPLETE, tmp)) != HC_OK)
        return rv;
    if ((unlink(new) != 0 && errno != ENOENT) || rmdir(tmp) != 0)
        return hc_err_set(HC_ERR_IO, "cannot remove %s: %s", tmp,
                          strerror(errno));
    return sync_path(data_dir);
}

/* Steps 3–5 with what to do when they fail: run again, they go forward. */
static int finish(const char *data_dir, int m, int n)
{
    int rv = move_into_place(data_dir, m, n);

    if (rv == HC_OK)
        return HC_OK;
    return hc_err_set(rv, "moving the stores in %s from %d to %d parameter "
                      "servers stopped half-way: %s. The new stores not yet "
                      "in place are in %s/resharding-%d-to-%d, the old ones "
                      "moved so far in %s/before-reshard-%d; once that is "
                      "fixed, the next try finishes the move", data_dir, m,
                      n, hc_err_msg(), data_dir, m, n, data_dir, m);
}

/* The shard count of the store in dir/ps-0; 0 when there is none, or it
 * holds no variables yet. */
static int stored_shards(const char *data_dir, int *m)
{
    struct ps_store_opts o = { .read_only = 1 };
    struct ps_store *st = NULL;
    struct ps_store_info info;
    char dir[PATH_MAX], p[PATH_MAX];
    int rv;

    *m = 0;
    if ((rv = path_fmt(dir, "%s/ps-0", data_dir)) != HC_OK ||
        (rv = path_fmt(p, "%s/data.mdb", dir)) != HC_OK)
        return rv;
    if (!exists(p))
        return HC_OK;
    if ((rv = ps_store_open(dir, &o, &st)) != HC_OK)
        return rv;
    ps_store_info(st, &info);
    if (info.initialised)
        *m = (int)info.n_shards;
    ps_store_close(st);
    return HC_OK;
}

int ps_reshard_recover(const char *data_dir, struct ps_reshard_done *done)
{
    char tmp[PATH_MAX], p[PATH_MAX];
    int m, n, rv;

    memset(done, 0, sizeof *done);
    if ((rv = find_interrupted(data_dir, &m, &n)) != HC_OK || !m)
        return rv;
    if ((rv = path_fmt(tmp, "%s/resharding-%d-to-%d", data_dir, m, n)) != HC_OK ||
        (rv = path_fmt(p, "%s/" COMPLETE, tmp)) != HC_OK)
        return rv;
    if (!exists(p)) {
        if ((rv = remove_incomplete(tmp, n)) == HC_OK)
            done->cleared = 1;
        return rv;
    }
    if ((rv = finish(data_dir, m, n)) == HC_OK) {
        done->finished_from = m;
        done->finished_to = n;
    }
    return rv;
}

int ps_reshard_in_place(const struct hc_cluster *to, const char *data_dir,
                        int *from, FILE *log)
{
    char tmp[PATH_MAX], p[PATH_MAX], kept_dir[PATH_MAX];
    int m, left_to, n = to->n_ps, j, rv;

    *from = 0;
    if ((rv = find_interrupted(data_dir, &m, &left_to)) != HC_OK)
        return rv;
    if (m)
        return hc_err_set(HC_ERR_EXISTS, "%s/resharding-%d-to-%d is left by "
                          "an interrupted reshard: recover it first", data_dir,
                          m, left_to);
    if ((rv = stored_shards(data_dir, &m)) != HC_OK || m == 0 || m == n)
        return rv;
    /* Everything that would stop the move, before writing anything. */
    if ((rv = path_fmt(kept_dir, "%s/before-reshard-%d", data_dir, m)) != HC_OK)
        return rv;
    if (exists(kept_dir))
        return hc_err_set(HC_ERR_EXISTS, "%s already exists (the stores an "
                          "earlier reshard from %d parameter servers kept): "
                          "move it out of %s, or delete it if those stores "
                          "are not needed, then try again", kept_dir, m,
                          data_dir);
    for (j = 1; j < m; j++) {
        if ((rv = path_fmt(p, "%s/ps-%d", data_dir, j)) != HC_OK)
            return rv;
        if (!exists(p))
            return hc_err_set(HC_ERR_NOTFOUND, "%s is missing: %s/ps-0 is "
                              "shard 0 of %d, so moving the job to %d "
                              "parameter servers needs ps-0 to ps-%d; put it "
                              "back, or start the job with a cluster file of "
                              "%d parameter servers (nothing was changed)",
                              p, data_dir, m, n, m - 1, m);
    }
    if ((rv = path_fmt(tmp, "%s/resharding-%d-to-%d", data_dir, m, n)) != HC_OK ||
        (rv = write_new(to, data_dir, m, tmp, log)) != HC_OK ||
        (rv = finish(data_dir, m, n)) != HC_OK)
        return rv;
    *from = m;
    return HC_OK;
}
