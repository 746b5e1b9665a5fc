/*
 * export.c — `hetps export` and `hetps inspect` (see export.h).
 *
 * Each variable becomes a float32 .npy file (common/npy.h) in C order —
 * which is the order the shards keep (Keras's layout). With a model file,
 * all of them become Keras's weights file or .keras archive
 * (common/keras.h), after the stores are checked to hold that model.
 */
#include "export.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "gather.h"
#include "keras.h"
#include "name.h"
#include "npy.h"
#include "optimizer.h"
#include "store.h"

/* Make the output directory the user named, and its parents (their path is
 * the user's own: symlinks in it are followed, as the shell would). */
static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];

    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return hc_err_set(HC_ERR_INVAL, "output directory %.64s…: path too "
                          "long", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;

        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return hc_err_set(HC_ERR_IO, "cannot create %s: %s", buf,
                              strerror(errno));
        *p = c;
        if (!c)
            return HC_OK;
    }
}

/* The directory that will hold variable `name` ("conv2d/kernel") under the
 * open directory out: each part but the last made (mkdirat) and entered
 * with O_NOFOLLOW, so a symlink inside the output directory is never
 * followed. Gives its fd in *dir_fd and the file name ("kernel.npy";
 * with suffix ".ids", "kernel.ids.npy") in leaf. The name was checked
 * (name.h) before. */
static int open_parent(int out, const char *out_dir, const char *name,
                       const char *suffix, char *leaf, size_t cap,
                       int *dir_fd)
{
    char part[HC_NAME_MAX_BYTES + 1];
    const char *p = name, *slash;
    int fd = dup(out), next, rv;

    if (fd < 0)
        return hc_err_set(HC_ERR_IO, "%s: %s", out_dir, strerror(errno));
    while ((slash = strchr(p, '/')) != NULL) {
        snprintf(part, sizeof part, "%.*s", (int)(slash - p), p);
        if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) {
            rv = hc_err_set(HC_ERR_IO, "cannot create %s/%.*s: %s", out_dir,
                            (int)(slash - name), name, strerror(errno));
            close(fd);
            return rv;
        }
        next = openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            rv = hc_err_set(HC_ERR_IO, "cannot enter %s/%.*s: %s%s", out_dir,
                            (int)(slash - name), name, strerror(errno),
                            errno == ELOOP || errno == ENOTDIR
                                ? " (a symlink or file is in the way; export "
                                  "does not follow links)" : "");
            close(fd);
            return rv;
        }
        close(fd);
        fd = next;
        p = slash + 1;
    }
    snprintf(leaf, cap, "%s%s.npy", p, suffix);
    *dir_fd = fd;
    return HC_OK;
}


/* Array k of a table's gathered rows packed (n_rows, dim) into buf: 0 the
 * values, 1 + j slot j (the rows are gathered whole: width floats a row). */
static void table_column(const struct ps_gathered_var *gv, int k, float *buf)
{
    for (size_t i = 0; i < gv->n_rows; i++)
        memcpy(buf + i * gv->dim, gv->data + i * gv->width + (size_t)k * gv->dim,
               gv->dim * sizeof *buf);
}

/* One array of a table beside its ids: OUT/NAME<suffix>.npy, u64 (n,) or
 * f32 (n, dim). */
static int write_table_array(int out, const char *out_dir,
                             const struct ps_gathered_var *gv,
                             const char *suffix, const uint64_t *u64,
                             const float *f32, FILE *log, const char *what)
{
    char path[PATH_MAX], leaf[HC_NAME_MAX_BYTES + 32];
    size_t shape[2] = {gv->n_rows, gv->dim};
    int dir = -1, rv;

    snprintf(path, sizeof path, "%s/%s%s.npy", out_dir, gv->name, suffix);
    if ((rv = open_parent(out, out_dir, gv->name, suffix, leaf, sizeof leaf,
                          &dir)) != HC_OK)
        return rv;
    rv = u64 ? hc_npy_write_u64_at(dir, leaf, path, shape, 1, u64)
             : hc_npy_write_f32_at(dir, leaf, path, shape, 2, f32);
    close(dir);
    if (rv == HC_OK && log && u64)
        fprintf(log, "%s (%zu,) uint64: %s\n", path, gv->n_rows, what);
    else if (rv == HC_OK && log)
        fprintf(log, "%s (%zu, %u) float32%s%s\n", path, gv->n_rows, gv->dim,
                *what ? ": " : "", what);
    return rv;
}

/* A row-sparse table as arrays aligned by row: NAME.ids.npy (n,) uint64,
 * ascending; NAME.rows.npy (n, dim) float32, its stored rows (rows never
 * written hold their initial values: hc_init_row); per optimizer slot
 * NAME.<slot>.npy (n, dim) by Keras's name of the slot (accumulator,
 * momentum, velocity, …); NAME.updates.npy (n,) uint64, each row's
 * update count (lazy Adam's per-row step). */
static int write_table(int out, const char *out_dir,
                       const struct ps_gathered *g,
                       const struct ps_gathered_var *gv, FILE *log)
{
    float *buf = malloc((gv->n_rows * gv->dim + 1) * sizeof *buf);
    char what[160], suffix[48];
    int rv;

    if (!buf)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for the rows of %s",
                          gv->name);
    snprintf(what, sizeof what, "the stored rows' ids of a table of %llu rows",
             (unsigned long long)gv->table_rows);
    rv = write_table_array(out, out_dir, gv, ".ids", gv->ids, NULL, log, what);
    table_column(gv, 0, buf);
    if (rv == HC_OK)
        rv = write_table_array(out, out_dir, gv, ".rows", NULL, buf, log, "");
    for (uint32_t k = 0; rv == HC_OK && gv->width > gv->dim && k < g->n_slots;
         k++) {
        const char *name = ps_optim_slot_name(&g->info0.optim, (int)k);

        snprintf(suffix, sizeof suffix, ".%s", name);
        snprintf(what, sizeof what, "the rows' %s (a row never stored: %g)",
                 name, (double)ps_optim_slot_init(&g->info0.optim, (int)k));
        table_column(gv, 1 + (int)k, buf);
        rv = write_table_array(out, out_dir, gv, suffix, NULL, buf, log, what);
    }
    if (rv == HC_OK && gv->updates)
        rv = write_table_array(out, out_dir, gv, ".updates", gv->updates, NULL,
                               log, "the updates each row had (lazy Adam's "
                               "per-row step count)");
    free(buf);
    return rv;
}

int ps_export(const struct hc_cluster *cl, const char *data_dir,
              const char *out_dir, FILE *log)
{
    struct ps_gathered g;
    int v, out = -1, rv = ps_gather(cl, data_dir, PS_GATHER_ROWS, 0, &g, log);
    const int gathered = rv == HC_OK;

    if (rv == HC_OK)
        rv = mkdir_p(out_dir);
    if (rv == HC_OK &&
        (out = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rv = hc_err_set(HC_ERR_IO, "output directory %s: %s", out_dir,
                        strerror(errno));
    for (v = 0; rv == HC_OK && v < g.n_vars; v++) {
        const struct ps_gathered_var *gv = &g.vars[v];
        char path[PATH_MAX], leaf[HC_NAME_MAX_BYTES + 16];
        int i, dir = -1;

        if (gv->table_rows) {
            rv = write_table(out, out_dir, &g, gv, log);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s.npy", out_dir, gv->name);
        if ((rv = open_parent(out, out_dir, gv->name, "", leaf, sizeof leaf,
                              &dir)) != HC_OK)
            break;
        rv = hc_npy_write_f32_at(dir, leaf, path, gv->shape, gv->ndim,
                                 gv->data);
        close(dir);
        if (rv == HC_OK && log) {
            fprintf(log, "%s (", path);
            for (i = 0; i < gv->ndim; i++)
                fprintf(log, "%s%zu", i ? ", " : "", gv->shape[i]);
            fprintf(log, "%s) float32\n", gv->ndim == 1 ? "," : "");
        }
    }
    if (out >= 0)
        close(out);
    if (gathered)
        ps_gathered_free(&g);
    return rv;
}

/* The gathered variables are m's, in m's order and shapes, and the stores
 * were made for m (its signature). */
static int check_model(const struct ps_gathered *g, const struct hc_model *m)
{
    if (g->info0.signature != m->signature)
        return hc_err_set(HC_ERR_MISMATCH, "the stores hold a model of "
                          "signature %016llx; the model file %s has %016llx "
                          "(give the job's own model file)",
                          (unsigned long long)g->info0.signature, m->source,
                          (unsigned long long)m->signature);
    if (g->n_vars != m->n_vars)
        return hc_err_set(HC_ERR_MISMATCH, "the stores hold %d variables; "
                          "the model file %s has %d", g->n_vars, m->source,
                          m->n_vars);
    for (int v = 0; v < m->n_vars; v++) {
        const struct hc_var_def *d = &m->vars[v];
        int same = g->vars[v].ndim == d->ndim &&
                   !strcmp(g->vars[v].name, d->name);

        /* A table's gathered shape and size are its stored rows': its
         * input_dim and dim are what must agree. */
        if (d->table_rows || g->vars[v].table_rows)
            same = same && g->vars[v].table_rows == d->table_rows &&
                   g->vars[v].dim == (uint32_t)d->shape[1];
        else
            same = same && g->vars[v].size == d->size;
        for (int k = 0; same && !d->table_rows && k < d->ndim; k++)
            same = g->vars[v].shape[k] == (size_t)d->shape[k];
        if (!same)
            return hc_err_set(HC_ERR_MISMATCH, "the stores' variable %d is "
                              "%s; the model file %s has %s of another shape "
                              "or name", v, g->vars[v].name, m->source,
                              d->name);
    }
    return HC_OK;
}

/* Slot k of table v as Keras's dense (input_dim, dim) optimizer variable
 * at p: the slot's initial value, the stored rows' over it. */
static void dense_table_slot(const struct ps_gathered *g, int v, int k,
                             float *p)
{
    const struct ps_gathered_var *gv = &g->vars[v];
    const float init = ps_optim_slot_init(&g->info0.optim, k);

    for (size_t e = 0; e < gv->table_rows * gv->dim; e++)
        p[e] = init;
    for (size_t i = 0; i < gv->n_rows; i++)
        memcpy(p + gv->ids[i] * gv->dim,
               gv->data + i * gv->width + (size_t)(1 + k) * gv->dim,
               gv->dim * sizeof *p);
}

/* The optimizer's state as Keras keeps it (keras.h), from what the stores
 * hold: the slots laid out as md's parameters (m's, its tables dense;
 * o->slots[0] owns the memory), the largest shard's step as the iteration
 * count (in sync every shard's), Nadam's u_product at that step. */
static int optim_state(const struct ps_gathered *g, const struct hc_model *m,
                       const struct hc_model *md, struct hc_keras_optim *o)
{
    float *all;

    memset(o, 0, sizeof *o);
    o->iterations = g->step;
    o->n_slots = (int)g->n_slots;
    if (m->optim.type == HC_OPT_NADAM)
        o->u_product = ps_optim_nadam_u_product(&m->optim, g->step);
    if (!o->n_slots)
        return HC_OK;
    if (!(all = malloc((size_t)o->n_slots * md->n_params * sizeof *all)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory for %d optimizer "
                          "slots of %zu parameters", o->n_slots, md->n_params);
    for (int k = 0; k < o->n_slots; k++) {
        o->slots[k] = all + (size_t)k * md->n_params;
        for (int v = 0; v < m->n_vars; v++)
            if (m->vars[v].table_rows)
                dense_table_slot(g, v, k,
                                 o->slots[k] + hc_model_var_offset(md, v));
            else
                memcpy(o->slots[k] + hc_model_var_offset(md, v),
                       g->slots[k][v], g->vars[v].size * sizeof *all);
    }
    return HC_OK;
}

/* Whether the optimizer's step enters its update (bias correction): a
 * table's rows then moved each at its own count (lazily), which Keras's
 * one iteration count does not hold. */
static int step_counts(enum hc_optim t)
{
    return t == HC_OPT_ADAM || t == HC_OPT_ADAMW || t == HC_OPT_NADAM ||
           t == HC_OPT_ADAMAX;
}

/* Table variable v of the gathered stores as Keras's dense array
 * (input_dim, dim) at p: every row its initial value (hc_init_row, as a
 * pull of a row never written yields), then the stored rows over it. */
static int dense_table(const struct ps_gathered *g, int v, float *p)
{
    const struct ps_gathered_var *gv = &g->vars[v];
    const struct ps_table *t = NULL;

    for (uint32_t k = 0; k < g->n_tables; k++)
        if (g->tables[k].var == (uint32_t)v)
            t = &g->tables[k];
    if (!t || t->dim != gv->dim || t->input_dim != gv->table_rows)
        return hc_err_set(HC_ERR_MISMATCH, "the stores hold variable %s as "
                          "a table but no table definition of its shape",
                          gv->name);
    for (uint64_t r = 0; r < t->input_dim; r++)
        hc_init_row(&t->init, t->input_dim, t->dim, g->seed, t->var, r,
                    p + r * t->dim);
    for (size_t i = 0; i < gv->n_rows; i++)
        memcpy(p + gv->ids[i] * t->dim, gv->data + i * gv->width,
               t->dim * sizeof *p);
    return HC_OK;
}

int ps_export_keras(const struct hc_cluster *cl, const char *data_dir,
                    const struct hc_model *m, const char *out, FILE *log)
{
    struct ps_gathered g;
    struct hc_keras_optim o = {0};
    struct hc_model *md = NULL;     /* m, its tables dense (keras.h) */
    float *params = NULL;
    size_t n = strlen(out);
    int tables = 0, rv;

    for (int v = 0; v < m->n_vars; v++)
        tables += m->vars[v].table_rows != 0;
    /* A table's slots are Keras's dense optimizer variables of its shape
     * (rows never stored: the slot's initial value); lazy Adam's per-row
     * step counts have no form there (the .npy export writes them). */
    rv = ps_gather(cl, data_dir, PS_GATHER_SLOTS, 0, &g, log);
    if (rv != HC_OK)
        return rv;
    if ((rv = check_model(&g, m)) != HC_OK)
        goto out;
    /* The slots are the stores' optimizer's: the archive's compile_config
     * must name that one. */
    if (!hc_optim_equal(&g.info0.optim, &m->optim)) {
        char made[HC_OPTIM_DESCRIBE_MAX], asked[HC_OPTIM_DESCRIBE_MAX];

        rv = hc_err_set(HC_ERR_MISMATCH, "the stores were trained with "
                        "optimizer %s; the model file %s (and --optimizer) "
                        "says %s: give the job's --optimizer",
                        hc_optim_describe(&g.info0.optim, made, sizeof made),
                        m->source,
                        hc_optim_describe(&m->optim, asked, sizeof asked));
        goto out;
    }
    if (!(md = malloc(sizeof *md))) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
        goto out;
    }
    if ((rv = hc_keras_dense_tables(m, md)) != HC_OK)
        goto out;
    if (!(params = malloc(md->n_params * sizeof *params))) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for %zu parameters",
                        md->n_params);
        goto out;
    }
    for (int v = 0; rv == HC_OK && v < m->n_vars; v++)
        if (m->vars[v].table_rows)
            rv = dense_table(&g, v, params + hc_model_var_offset(md, v));
        else
            memcpy(params + hc_model_var_offset(md, v), g.vars[v].data,
                   g.vars[v].size * sizeof *params);
    if (rv != HC_OK || (rv = optim_state(&g, m, md, &o)) != HC_OK)
        goto out;
    rv = n > 6 && !strcmp(out + n - 6, ".keras")
             ? hc_keras_write_archive(out, md, params, &o)
             : hc_keras_write_weights(out, md, params, &o);
    for (int v = 0; rv == HC_OK && log && v < md->n_vars; v++) {
        char path[HC_NAME_MAX + 32];

        hc_keras_var_path(md, v, path, sizeof path);
        fprintf(log, "%s: %s (%s) float32", out, path, md->vars[v].name);
        if (m->vars[v].table_rows)
            fprintf(log, " (%d, %d): a table's %zu stored rows, the others "
                    "their initial values", md->vars[v].shape[0],
                    md->vars[v].shape[1], g.vars[v].n_rows);
        fputc('\n', log);
    }
    if (rv == HC_OK && log)
        fprintf(log, "%s: optimizer/vars: %s's %d variables (iteration %llu, "
                "%d slot(s) a variable%s)\n", out, hc_optim_name(m->optim.type),
                hc_keras_optim_count(md, o.n_slots),
                (unsigned long long)o.iterations, o.n_slots,
                tables && o.n_slots ? "; a table's dense, its rows never "
                "stored at the slot's initial value" : "");
    if (rv == HC_OK && log && tables && step_counts(m->optim.type))
        fprintf(log, "%s: a table's rows were updated lazily, each at its "
                "own step count; Keras's %s corrects every row's bias by the "
                "one iteration count (%llu, the shards' step): the per-row "
                "counts are not in this file (`hetps export` without "
                "--format keras writes them as NAME.updates.npy)\n", out,
                hc_optim_name(m->optim.type), (unsigned long long)o.iterations);
out:
    free(o.slots[0]);
    free(params);
    free(md);
    ps_gathered_free(&g);
    return rv;
}


/* One line of `inspect` per worker the store has a record of. */
static int print_record(void *arg, uint32_t worker, uint64_t incarnation,
                        uint64_t request_id, const struct ps_place *at)
{
    FILE *out = arg;

    fprintf(out, "  worker:%u last request %llu (incarnation %016llx)", worker,
            (unsigned long long)request_id, (unsigned long long)incarnation);
    if (at->known)
        fprintf(out, ", at epoch %u batch %u of its data", at->epoch + 1,
                at->batches);
    fputc('\n', out);
    return 0;
}

/* "  table 2: 1099511627776 rows of 4, 1234 stored here" per row-sparse
 * table. */
static void print_tables(struct ps_store *s, FILE *out)
{
    uint32_t n;
    const struct ps_table *t = ps_store_tables(s, &n);

    for (uint32_t i = 0; i < n; i++) {
        uint64_t rows = 0;
        int rv = ps_store_table_rows(s, t[i].var, &rows);

        if (rv == HC_OK)
            fprintf(out, "  table %u: %llu rows of %u, %llu stored here\n",
                    t[i].var, (unsigned long long)t[i].input_dim, t[i].dim,
                    (unsigned long long)rows);
        else
            fprintf(out, "  table %u: %s\n", t[i].var, hc_err_msg());
    }
}

int ps_inspect(const char *dir, FILE *out)
{
    struct ps_store_opts o = { .read_only = 1 };
    struct ps_store *s = NULL;
    struct ps_store_info info;
    char *json, optim[HC_OPTIM_DESCRIBE_MAX];
    unsigned char loading = 0;
    size_t len = 0;
    int rv;

    rv = ps_store_open(dir, &o, &s);
    if (rv != HC_OK)
        return rv;
    ps_store_info(s, &info);
    fprintf(out, "store %s\n  opened %llu time(s)\n", dir,
            (unsigned long long)info.incarnation);
    if (!info.initialised) {
        fprintf(out, "  no variables yet\n");
        ps_store_close(s);
        return HC_OK;
    }
    fprintf(out, "  shard %u of %u, %u blocks of up to %u elements, %u slot(s)\n"
            "  step %llu\n  model signature %016llx, layout %016llx\n"
            "  optimizer %s\n  map %llu MiB\n",
            info.shard, info.n_shards, info.n_blocks, info.block_elems,
            info.n_slots, (unsigned long long)info.step,
            (unsigned long long)info.signature,
            (unsigned long long)info.layout_hash,
            hc_optim_describe(&info.optim, optim, sizeof optim),
            (unsigned long long)(info.map_size >> 20));
    json = malloc(PS_VARS_JSON_MAX);
    if (json && ps_store_meta_get(s, "vars", json, PS_VARS_JSON_MAX - 1, &len) == HC_OK) {
        json[len] = '\0';
        fprintf(out, "  variables %s\n", json);
    }
    free(json);
    print_tables(s, out);
    if (ps_store_meta_get(s, "rows_loading", &loading, 1, &len) == HC_OK &&
        len == 1 && loading == 1)
        fprintf(out, "  tables' initial rows: loading (the chief's "
                "--initial-weights; not served until they are in)\n");
    rv = ps_store_records(s, print_record, out);
    if (rv == HC_OK)
        rv = ps_store_verify(s);
    fprintf(out, "  checksums: %s\n", rv == HC_OK ? "all good" : hc_err_msg());
    ps_store_close(s);
    return rv;
}
