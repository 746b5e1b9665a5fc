/*
 * init_tables.c — a model's tables from --initial-weights (see
 * init_tables.h): Keras's dense arrays read whole (they are small enough
 * by keras.h's limit), a .npy directory's NAME.ids.npy and NAME.rows.npy
 * checked in one pass over the ids and sent in a second, a chunk of rows
 * at a time.
 */
#include "init_tables.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"
#include "eval.h"
#include "keras.h"
#include "log.h"
#include "npy.h"

/* Rows a chunk holds at most, and its bytes of values at most. */
#define CHUNK_ROWS 65536u
#define CHUNK_BYTES (4u << 20)

struct wk_init_tables {
    const struct hc_model *m;
    char dir[PATH_MAX];         /* the .npy directory; "" for Keras's file */
    char path[PATH_MAX];        /* what the user named */
    struct hc_model *md;        /* Keras: m with its tables dense */
    float *dense;               /* Keras: (md->n_params) */
    uint64_t n[HC_MODEL_MAX_VARS];  /* .npy: each table's rows in its files */
};

/* A table's two files, open at their first data byte. */
struct table_files {
    FILE *ids, *rows;
    char ids_path[PATH_MAX], rows_path[PATH_MAX];
    uint64_t n;
};

int wk_model_has_tables(const struct hc_model *m)
{
    for (int v = 0; v < m->n_vars; v++)
        if (m->vars[v].table_rows)
            return 1;
    return 0;
}

static uint32_t dim_of(const struct hc_var_def *d)
{
    return (uint32_t)d->shape[d->ndim - 1];
}

static void files_close(struct table_files *f)
{
    if (f->ids)
        fclose(f->ids);
    if (f->rows)
        fclose(f->rows);
    f->ids = f->rows = NULL;
}

/* Open one of a table's arrays and check its header: dtype `descr` (what
 * it is, for the message: what), C order, ndim 1 (ids) or 2 (rows of
 * dim), and that the file holds all of its data. */
static int open_array(const char *path, const char *descr, const char *what,
                      int ndim, uint32_t dim, const struct hc_var_def *d,
                      FILE **out, uint64_t *n)
{
    struct hc_npy_info h;
    struct stat st;
    char got[64];
    long at;
    int rv;
    FILE *f = fopen(path, "rb");

    *out = NULL;
    if (!f)
        return hc_err_set(errno == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                          "%s: %s (the %s of table %s: `hetps export` writes "
                          "NAME.ids.npy and NAME.rows.npy)", path,
                          strerror(errno), what, d->name);
    if ((rv = hc_npy_read_header(f, path, &h)) != HC_OK)
        goto fail;
    if (strcmp(h.descr, descr) != 0 || h.fortran_order) {
        rv = hc_err_set(HC_ERR_DATA, "%s: array of dtype %s%s; the %s of "
                        "table %s are %s, C order", path, h.descr,
                        h.fortran_order ? " in Fortran order" : "", what,
                        d->name, !strcmp(descr, "<u8") ? "uint64 ('<u8')"
                                                       : "float32 ('<f4')");
        goto fail;
    }
    if (h.ndim != ndim || (ndim == 2 && h.shape[1] != dim)) {
        char want[32] = "(n,)";

        if (ndim == 2)
            snprintf(want, sizeof want, "(n, %u)", dim);
        rv = hc_err_set(HC_ERR_MISMATCH, "%s has shape %s; the %s of table "
                        "%s are %s", path,
                        hc_npy_shape_str(h.shape, h.ndim, got, sizeof got),
                        what, d->name, want);
        goto fail;
    }
    if ((at = ftell(f)) < 0 || fstat(fileno(f), &st) != 0 ||
        (uint64_t)st.st_size - (uint64_t)at !=
            h.count * (ndim == 1 ? 8 : 4)) {
        rv = hc_err_set(HC_ERR_DATA, "%s: %llu bytes of data for %llu "
                        "values of %d bytes (truncated, or bytes after "
                        "them)", path,
                        (unsigned long long)((uint64_t)st.st_size - (uint64_t)at),
                        (unsigned long long)h.count, ndim == 1 ? 8 : 4);
        goto fail;
    }
    *n = h.shape[0];
    *out = f;
    return HC_OK;
fail:
    fclose(f);
    return rv;
}

static int files_open(const struct wk_init_tables *t, int v,
                      struct table_files *f)
{
    const struct hc_var_def *d = &t->m->vars[v];
    uint64_t nr = 0;
    int rv;

    memset(f, 0, sizeof *f);
    if (snprintf(f->ids_path, sizeof f->ids_path, "%s/%s.ids.npy", t->dir,
                 d->name) >= (int)sizeof f->ids_path ||
        snprintf(f->rows_path, sizeof f->rows_path, "%s/%s.rows.npy", t->dir,
                 d->name) >= (int)sizeof f->rows_path)
        return hc_err_set(HC_ERR_INVAL, "%s: path too long", t->dir);
    if ((rv = open_array(f->ids_path, "<u8", "ids", 1, 0, d, &f->ids,
                         &f->n)) != HC_OK ||
        (rv = open_array(f->rows_path, "<f4", "rows", 2, dim_of(d), d,
                         &f->rows, &nr)) != HC_OK) {
        files_close(f);
        return rv;
    }
    if (nr != f->n) {
        files_close(f);
        return hc_err_set(HC_ERR_MISMATCH, "%s holds %llu rows but %s %llu "
                          "ids: one row per id", f->rows_path,
                          (unsigned long long)nr, f->ids_path,
                          (unsigned long long)f->n);
    }
    return HC_OK;
}

/* The next k ids (ids[0 .. k), k ≤ CHUNK_ROWS) of f, the ones at
 * positions from `at`, checked: each below input_dim and above the one
 * before (*prev, updated; at 0 there is none). */
static int read_ids(struct table_files *f, const struct hc_var_def *d,
                    uint64_t at, size_t k, uint64_t *ids, uint64_t *prev)
{
    if (fread(ids, sizeof *ids, k, f->ids) != k)
        return hc_err_set(HC_ERR_DATA, "%s: truncated at id %llu",
                          f->ids_path, (unsigned long long)at);
    for (size_t i = 0; i < k; i++, at++) {
        if (ids[i] >= d->table_rows)
            return hc_err_set(HC_ERR_DATA, "%s: id %llu at position %llu is "
                              "not below table %s's input_dim %llu",
                              f->ids_path, (unsigned long long)ids[i],
                              (unsigned long long)at, d->name,
                              (unsigned long long)d->table_rows);
        if (at > 0 && ids[i] <= *prev)
            return hc_err_set(HC_ERR_DATA, "%s: id %llu at position %llu %s "
                              "(ids ascending, each once, as `hetps export` "
                              "writes them)", f->ids_path,
                              (unsigned long long)ids[i],
                              (unsigned long long)at,
                              ids[i] == *prev ? "is repeated"
                                              : "is below the one before");
        *prev = ids[i];
    }
    return HC_OK;
}

static size_t chunk_rows(uint32_t dim)
{
    size_t k = CHUNK_BYTES / (4u * dim);

    return k < 1 ? 1 : k > CHUNK_ROWS ? CHUNK_ROWS : k;
}

/* One pass over table v's files: the headers and every id checked. */
static int check_table(struct wk_init_tables *t, int v)
{
    const struct hc_var_def *d = &t->m->vars[v];
    struct table_files f;
    uint64_t *ids = malloc(CHUNK_ROWS * sizeof *ids), prev = 0;
    int rv = ids ? files_open(t, v, &f)
                 : hc_err_set(HC_ERR_NOMEM, "out of memory");

    if (!ids || rv != HC_OK) {
        free(ids);
        return rv;
    }
    for (uint64_t at = 0; rv == HC_OK && at < f.n; at += CHUNK_ROWS) {
        size_t k = f.n - at < CHUNK_ROWS ? (size_t)(f.n - at) : CHUNK_ROWS;

        rv = read_ids(&f, d, at, k, ids, &prev);
    }
    t->n[v] = f.n;
    files_close(&f);
    free(ids);
    return rv;
}

static int open_keras(struct wk_init_tables *t, float *params)
{
    const struct hc_model *m = t->m;
    int rv;

    if (!(t->md = malloc(sizeof *t->md)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    if ((rv = hc_keras_dense_tables(m, t->md)) != HC_OK)
        return rv;
    if (!(t->dense = malloc(t->md->n_params * sizeof *t->dense)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory for %zu parameters "
                          "(the tables dense)", t->md->n_params);
    if ((rv = hc_keras_read_weights(t->path, t->md, t->dense)) != HC_OK)
        return rv;
    for (int v = 0; v < m->n_vars; v++)
        if (!m->vars[v].table_rows)
            memcpy(params + hc_model_var_offset(m, v),
                   t->dense + hc_model_var_offset(t->md, v),
                   m->vars[v].size * sizeof *params);
    return HC_OK;
}

int wk_init_tables_open(const struct hc_model *m, const char *path,
                        float *params, struct wk_init_tables **out)
{
    struct wk_init_tables *t;
    struct stat st;
    int rv;

    *out = NULL;
    if (stat(path, &st) != 0)
        return hc_err_set(errno == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                          "--initial-weights %s: %s", path, strerror(errno));
    if (!(t = calloc(1, sizeof *t)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    t->m = m;
    snprintf(t->path, sizeof t->path, "%s", path);
    if (S_ISDIR(st.st_mode)) {
        snprintf(t->dir, sizeof t->dir, "%s", path);
        rv = wk_load_npy(m, path, params);
        for (int v = 0; rv == HC_OK && v < m->n_vars; v++)
            if (m->vars[v].table_rows)
                rv = check_table(t, v);
    } else {
        rv = open_keras(t, params);
    }
    if (rv != HC_OK) {
        wk_init_tables_close(t);
        return rv;
    }
    *out = t;
    return HC_OK;
}

/* Table v's rows from the Keras file's dense array, chunk by chunk. */
static int send_dense(struct wk_init_tables *t, struct pc_client *pc, int v,
                      uint64_t *ids, uint64_t *sent)
{
    const struct hc_var_def *d = &t->m->vars[v];
    const uint32_t dim = dim_of(d);
    const float *rows = t->dense + hc_model_var_offset(t->md, v);
    const size_t per = chunk_rows(dim);
    int rv = HC_OK;

    for (uint64_t at = 0; rv == HC_OK && at < d->table_rows; at += per) {
        size_t k = d->table_rows - at < per ? (size_t)(d->table_rows - at)
                                            : per;
        struct pc_rows r = {.var = (uint32_t)v, .ids = ids, .n = k,
                            .grad = rows + at * dim};

        for (size_t i = 0; i < k; i++)
            ids[i] = at + i;
        rv = pc_init_rows(pc, &r, 1);
    }
    *sent = d->table_rows;
    return rv;
}

/* Table v's rows from its .npy files, chunk by chunk (checked again: the
 * files may have changed since the first pass). */
static int send_npy(struct wk_init_tables *t, struct pc_client *pc, int v,
                    uint64_t *ids, uint64_t *sent)
{
    const struct hc_var_def *d = &t->m->vars[v];
    const uint32_t dim = dim_of(d);
    const size_t per = chunk_rows(dim);
    struct table_files f;
    float *rows = malloc(per * dim * sizeof *rows);
    uint64_t prev = 0;
    int rv = rows ? files_open(t, v, &f)
                  : hc_err_set(HC_ERR_NOMEM, "out of memory");

    if (!rows || rv != HC_OK) {
        free(rows);
        return rv;
    }
    if (f.n != t->n[v])
        rv = hc_err_set(HC_ERR_DATA, "%s changed while read: %llu ids, "
                        "%llu before", f.ids_path, (unsigned long long)f.n,
                        (unsigned long long)t->n[v]);
    for (uint64_t at = 0; rv == HC_OK && at < f.n; at += per) {
        size_t k = f.n - at < per ? (size_t)(f.n - at) : per;
        struct pc_rows r = {.var = (uint32_t)v, .ids = ids, .n = k,
                            .grad = rows};

        if ((rv = read_ids(&f, d, at, k, ids, &prev)) != HC_OK)
            break;
        if (fread(rows, sizeof *rows * dim, k, f.rows) != k) {
            rv = hc_err_set(HC_ERR_DATA, "%s: truncated at row %llu",
                            f.rows_path, (unsigned long long)at);
            break;
        }
        rv = pc_init_rows(pc, &r, 1);
    }
    *sent = f.n;
    files_close(&f);
    free(rows);
    return rv;
}

int wk_init_tables_send(struct wk_init_tables *t, struct pc_client *pc)
{
    const struct hc_model *m = t->m;
    uint64_t *ids = malloc(CHUNK_ROWS * sizeof *ids);
    int loading = 0, rv;

    if (!ids)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    if ((rv = pc_init_rows_begin(pc, &loading)) != HC_OK || !loading) {
        if (rv == HC_OK)
            hc_info("--initial-weights %s: the job already has its tables' "
                    "rows (loaded before, or trained): kept, none sent",
                    t->path);
        free(ids);
        return rv;
    }
    for (int v = 0; rv == HC_OK && v < m->n_vars; v++) {
        uint64_t sent = 0;

        if (!m->vars[v].table_rows)
            continue;
        rv = t->dir[0] ? send_npy(t, pc, v, ids, &sent)
                       : send_dense(t, pc, v, ids, &sent);
        if (rv == HC_OK)
            hc_info("--initial-weights %s: table %s: %llu stored rows sent "
                    "to %d shard(s) loading (%s)", t->path, m->vars[v].name,
                    (unsigned long long)sent, loading,
                    t->dir[0] ? "its .ids.npy and .rows.npy; the other rows "
                    "start from the initializer" : "every row of its dense "
                    "array");
    }
    if (rv == HC_OK)
        rv = pc_init_rows_done(pc);
    free(ids);
    return rv;
}

void wk_init_tables_close(struct wk_init_tables *t)
{
    if (!t)
        return;
    free(t->dense);
    free(t->md);
    free(t);
}
