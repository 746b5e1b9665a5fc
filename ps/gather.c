/*
 * gather.c — assemble every variable from the stores of all shards (see
 * gather.h): definitions from shard 0, blocks and slots from each shard,
 * every element from exactly one block.
 */
#include "gather.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "err.h"
#include "name.h"

static int parse_vars(const char *json, size_t len, const char *dir,
                      struct ps_gathered_var **out, int *n_out)
{
    cJSON *root = cJSON_ParseWithLength(json, len), *it;
    struct ps_gathered_var *vars = NULL;
    char what[PATH_MAX + 32];
    int n = 0, rv = HC_OK;

    if (!cJSON_IsArray(root) || cJSON_GetArraySize(root) < 1) {
        rv = hc_err_set(HC_ERR_STORE, "store %s: variable definitions are "
                        "damaged", dir);
        goto out;
    }
    vars = calloc((size_t)cJSON_GetArraySize(root), sizeof *vars);
    if (!vars) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
        goto out;
    }
    cJSON_ArrayForEach(it, root) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(it, "shape"), *d;
        struct ps_gathered_var *v = &vars[n];

        if (!cJSON_IsString(name) || !cJSON_IsArray(shape) ||
            cJSON_GetArraySize(shape) > HC_NPY_MAX_DIMS ||
            strlen(name->valuestring) >= sizeof v->name) {
            rv = hc_err_set(HC_ERR_STORE, "store %s: variable definition %d "
                            "is damaged", dir, n);
            goto out;
        }
        snprintf(what, sizeof what, "store %s: variable %d", dir, n);
        if ((rv = hc_name_check(name->valuestring, HC_NAME_VARIABLE,
                                what)) != HC_OK) {
            rv = hc_err_set(HC_ERR_STORE, "%s; refusing to use it as a file "
                            "name", hc_err_msg());
            goto out;
        }
        if ((d = cJSON_GetObjectItemCaseSensitive(it, "table_rows"))) {
            /* A row-sparse table: its rows are gathered as (ids, rows). */
            const cJSON *last = cJSON_GetArrayItem(shape,
                                                   cJSON_GetArraySize(shape) - 1);

            if (!cJSON_IsNumber(d) || d->valuedouble < 1 || !last ||
                !cJSON_IsNumber(last) || last->valuedouble < 1 ||
                last->valuedouble > PS_TABLE_MAX_DIM) {
                rv = hc_err_set(HC_ERR_STORE, "store %s: table %s is "
                                "damaged", dir, name->valuestring);
                goto out;
            }
            snprintf(v->name, sizeof v->name, "%s", name->valuestring);
            v->table_rows = (uint64_t)d->valuedouble;
            v->dim = (uint32_t)last->valuedouble;
            v->ndim = 2;
            v->shape[1] = v->dim;
            n++;
            continue;
        }
        snprintf(v->name, sizeof v->name, "%s", name->valuestring);
        v->moments_of_prev = cJSON_IsTrue(
            cJSON_GetObjectItemCaseSensitive(it, "moments_of_prev"));
        v->size = 1;
        cJSON_ArrayForEach(d, shape) {
            if (!cJSON_IsNumber(d) || d->valuedouble < 1 ||
                d->valuedouble > (double)UINT32_MAX) {
                rv = hc_err_set(HC_ERR_STORE, "store %s: shape of %s is "
                                "damaged", dir, v->name);
                goto out;
            }
            v->shape[v->ndim++] = (size_t)d->valuedouble;
            v->size *= (uint32_t)d->valuedouble;
        }
        n++;
    }
out:
    cJSON_Delete(root);
    if (rv != HC_OK) {
        free(vars);
        return rv;
    }
    *out = vars;
    *n_out = n;
    return HC_OK;
}


void ps_gathered_free(struct ps_gathered *g)
{
    int v, k;

    for (v = 0; g->vars && v < g->n_vars; v++) {
        free(g->vars[v].data);
        free(g->vars[v].seen);
        free(g->vars[v].ids);
        free(g->vars[v].updates);
        for (k = 0; k < PS_STORE_MAX_SLOTS; k++)
            free(g->slots[k][v]);
    }
    free(g->vars);
    free(g->json);
    free(g->places);
    memset(g, 0, sizeof *g);
}

/* Shard 0's definitions: parse them and allocate every variable's arrays. */
static int gather_defs(struct ps_gathered *g, struct ps_store *st,
                       const char *dir, int with_slots)
{
    int v, k, rv;

    g->n_slots = g->info0.n_slots;
    g->block_elems = g->info0.block_elems;
    g->json = malloc(PS_VARS_JSON_MAX);
    if (!g->json)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    rv = ps_store_meta_get(st, "vars", g->json, PS_VARS_JSON_MAX, &g->json_len);
    if (rv == HC_OK)
        rv = parse_vars(g->json, g->json_len, dir, &g->vars, &g->n_vars);
    for (v = 0; rv == HC_OK && v < g->n_vars; v++) {
        if (g->vars[v].table_rows)
            continue;       /* rows appended per shard (gather_rows) */
        g->vars[v].data = calloc(g->vars[v].size, sizeof(float));
        g->vars[v].seen = calloc(g->vars[v].size, 1);
        if (!g->vars[v].data || !g->vars[v].seen)
            rv = hc_err_set(HC_ERR_NOMEM, "out of memory for %s",
                            g->vars[v].name);
        for (k = 0; rv == HC_OK && with_slots && k < (int)g->n_slots; k++)
            if (!(g->slots[k][v] = calloc(g->vars[v].size, sizeof(float))))
                rv = hc_err_set(HC_ERR_NOMEM, "out of memory for %s",
                                g->vars[v].name);
    }
    return rv;
}

/* Keep in *at the furthest of it and the place st recorded for worker w. */
static int gather_place(struct ps_store *st, uint32_t w, struct ps_place *at)
{
    struct ps_place p;
    int rv = ps_store_place(st, w, &p);

    if (rv == HC_OK && p.known &&
        (!at->known || p.epoch > at->epoch ||
         (p.epoch == at->epoch && p.batches > at->batches)))
        *at = p;
    return rv;
}

/* Append store st's rows of each table to its gathered (ids, rows), whole
 * (slots and counts) when `whole`. */
static int gather_rows(struct ps_gathered *g, struct ps_store *st, int whole)
{
    for (int v = 0; v < g->n_vars; v++) {
        struct ps_gathered_var *var = &g->vars[v];
        uint64_t *ids, *ups = NULL, *i2, *u2 = NULL;
        float *rows, *r2;
        size_t n, at = var->n_rows, w;
        int rv;

        if (!var->table_rows)
            continue;
        if ((rv = ps_store_rows_list(st, (uint32_t)v, &ids, &rows,
                                     whole ? &ups : NULL, &n)) != HC_OK)
            return rv;
        w = var->width = whole ? (1 + (size_t)g->n_slots) * var->dim
                               : var->dim;
        i2 = realloc(var->ids, (at + n + 1) * sizeof *i2);
        if (i2)
            var->ids = i2;
        r2 = i2 ? realloc(var->data, ((at + n) * w + 1) * sizeof *r2) : NULL;
        if (r2)
            var->data = r2;
        if (r2 && whole && (u2 = realloc(var->updates,
                                         (at + n + 1) * sizeof *u2)))
            var->updates = u2;
        if (i2 && r2 && (!whole || u2) && n) {
            memcpy(var->ids + at, ids, n * sizeof *ids);
            memcpy(var->data + at * w, rows, n * w * sizeof *rows);
            if (whole)
                memcpy(var->updates + at, ups, n * sizeof *ups);
        }
        free(ids);
        free(rows);
        free(ups);
        if (!i2 || !r2 || (whole && !u2))
            return hc_err_set(HC_ERR_NOMEM, "out of memory for the rows of "
                              "%s", var->name);
        var->n_rows += n;
    }
    return HC_OK;
}

struct by_id { uint64_t id; size_t at; };

static int by_id_cmp(const void *a, const void *b)
{
    const struct by_id *x = a, *y = b;

    return x->id < y->id ? -1 : x->id > y->id;
}

/* Each table's rows in id order (every shard's are; together they are
 * not), a row held by two shards refused. */
static int sort_rows(struct ps_gathered *g)
{
    for (int v = 0; v < g->n_vars; v++) {
        struct ps_gathered_var *var = &g->vars[v];
        struct by_id *o;
        uint64_t *ids, *ups = NULL;
        float *rows;
        size_t n = var->n_rows, w = var->width;

        if (!var->table_rows)
            continue;
        var->shape[0] = n;
        var->size = n * var->dim;
        if (n < 2)
            continue;
        o = malloc(n * sizeof *o);
        ids = malloc(n * sizeof *ids);
        rows = malloc(n * w * sizeof *rows);
        if (var->updates)
            ups = malloc(n * sizeof *ups);
        if (!o || !ids || !rows || (var->updates && !ups)) {
            free(o);
            free(ids);
            free(rows);
            free(ups);
            return hc_err_set(HC_ERR_NOMEM, "out of memory sorting the rows "
                              "of %s", var->name);
        }
        for (size_t i = 0; i < n; i++)
            o[i] = (struct by_id){var->ids[i], i};
        qsort(o, n, sizeof *o, by_id_cmp);
        for (size_t i = 0; i < n; i++) {
            ids[i] = o[i].id;
            memcpy(rows + i * w, var->data + o[i].at * w, w * sizeof *rows);
            if (ups)
                ups[i] = var->updates[o[i].at];
        }
        free(o);
        free(var->ids);
        free(var->data);
        free(var->updates);
        var->ids = ids;
        var->data = rows;
        var->updates = ups;
        for (size_t i = 1; i < n; i++)
            if (ids[i] == ids[i - 1])
                return hc_err_set(HC_ERR_STORE, "row %llu of %s is held by "
                                  "two stores: were they resharded by "
                                  "another function?",
                                  (unsigned long long)ids[i], var->name);
    }
    return HC_OK;
}

int ps_gather(const struct hc_cluster *cl, const char *data_dir, int what,
              int verify, struct ps_gathered *g, FILE *log)
{
    /* Moving stores (reshard) needs them idle: a shard still writing
     * would change them under the copy. A live export is fine. */
    const int move = (what & PS_GATHER_MOVE) != 0;
    const int with_slots = move || (what & PS_GATHER_SLOTS);
    struct ps_store_opts o = { .read_only = 1, .require_idle = move };
    char dir[PATH_MAX];
    int j, v, k, w, rv = HC_OK;

    memset(g, 0, sizeof *g);
    if (move && cl->n_worker > 0) {
        g->places = calloc((size_t)cl->n_worker, sizeof *g->places);
        if (!g->places)
            return hc_err_set(HC_ERR_NOMEM, "out of memory");
        g->n_workers = cl->n_worker;
    }
    for (j = 0; j < cl->n_ps && rv == HC_OK; j++) {
        struct ps_store *st = NULL;
        struct ps_store_info info;
        const struct ps_block *blocks;
        uint32_t nb = 0, b;

        snprintf(dir, sizeof dir, "%s/ps-%d", data_dir, j);
        if ((rv = ps_store_open(dir, &o, &st)) != HC_OK)
            break;
        ps_store_info(st, &info);
        if (!info.initialised)
            rv = hc_err_set(HC_ERR_NOTFOUND, "store %s holds no variables "
                            "(was the job started with this --data-dir?)", dir);
        else if (info.n_shards != (uint32_t)cl->n_ps || info.shard != (uint32_t)j)
            rv = hc_err_set(HC_ERR_MISMATCH, "store %s is shard %u of %u, the "
                            "cluster has %d parameter servers", dir, info.shard,
                            info.n_shards, cl->n_ps);
        else if (j > 0 && info.signature != g->info0.signature)
            rv = hc_err_set(HC_ERR_MISMATCH, "store %s is of another model than "
                            "%s/ps-0", dir, data_dir);
        if (rv == HC_OK) {
            unsigned char loading = 0;
            size_t len = 0;

            if (ps_store_meta_get(st, "rows_loading", &loading, 1, &len) ==
                    HC_OK && len == 1 && loading == 1)
                rv = hc_err_set(HC_ERR_STALE, "store %s is still loading its "
                                "tables' initial rows (the chief's "
                                "--initial-weights): start the job again to "
                                "finish the loading, then read it", dir);
        }
        if (rv == HC_OK && verify && (rv = ps_store_verify(st)) != HC_OK)
            rv = hc_err_set(rv, "%s: not moving a damaged store", hc_err_msg());
        if (rv == HC_OK && j == 0) {
            g->info0 = info;
            rv = gather_defs(g, st, dir, with_slots);
        }
        if (rv == HC_OK && j == 0) {
            const struct ps_table *t = ps_store_tables(st, &g->n_tables);

            if (g->n_tables)
                memcpy(g->tables, t, g->n_tables * sizeof *t);
            g->seed = ps_store_rows_seed(st);
        }
        if (rv == HC_OK && move) {
            size_t held = 0;

            if ((rv = ps_store_rows_held(st, &held)) == HC_OK && held)
                rv = hc_err_set(HC_ERR_STALE, "store %s holds %zu rows "
                                "pushes of a step that never committed (a "
                                "sync step, or an async worker's whose "
                                "dense push never came): start the job "
                                "again to finish the step, stop it, then "
                                "move the stores", dir, held);
        }
        if (rv == HC_OK)
            rv = gather_rows(g, st, with_slots || (what & PS_GATHER_ROWS));
        if (rv == HC_OK && info.step != g->info0.step && log)
            fprintf(log, "note: %s is at step %llu, ps-0 at %llu (asynchronous "
                    "training: shards apply pushes independently)\n", dir,
                    (unsigned long long)info.step,
                    (unsigned long long)g->info0.step);
        if (rv == HC_OK && info.step > g->step)
            g->step = info.step;
        for (w = 0; rv == HC_OK && w < g->n_workers; w++)
            rv = gather_place(st, (uint32_t)w, &g->places[w]);
        blocks = rv == HC_OK ? ps_store_blocks(st, &nb) : NULL;
        /* Every block of this store from one read transaction: a live
         * export is one consistent step of the shard, not a mix. */
        for (b = 0; rv == HC_OK && b < nb; b++)
            if (blocks[b].var >= (uint32_t)g->n_vars ||
                blocks[b].offset + blocks[b].length > g->vars[blocks[b].var].size)
                rv = hc_err_set(HC_ERR_STORE, "store %s: block %u lies outside "
                                "the variables", dir, b);
        if (rv == HC_OK && nb > 0) {
            struct ps_read *r = calloc(nb, sizeof *r);
            uint64_t step = 0;

            if (!r)
                rv = hc_err_set(HC_ERR_NOMEM, "out of memory");
            for (b = 0; r && b < nb; b++) {
                r[b].local = b;
                r[b].count = blocks[b].length;
                r[b].dst = g->vars[blocks[b].var].data + blocks[b].offset;
            }
            if (r)
                rv = ps_store_read(st, r, nb, &step);
            free(r);
            if (rv == HC_OK && step != info.step && log)
                fprintf(log, "note: %s moved on from step %llu to %llu while "
                        "exporting; its values are of step %llu\n", dir,
                        (unsigned long long)info.step,
                        (unsigned long long)step, (unsigned long long)step);
        }
        for (b = 0; rv == HC_OK && b < nb; b++) {
            const struct ps_block *bk = &blocks[b];
            struct ps_gathered_var *var = &g->vars[bk->var];
            uint32_t e;

            for (e = 0; rv == HC_OK && e < bk->length; e++)
                if (var->seen[bk->offset + e]++)
                    rv = hc_err_set(HC_ERR_STORE, "store %s: element %llu of "
                                    "%s is held twice", dir,
                                    (unsigned long long)(bk->offset + e),
                                    var->name);
            for (k = 0; rv == HC_OK && with_slots && k < (int)g->n_slots; k++)
                rv = ps_store_read_slot(st, (uint32_t)k, b,
                                        g->slots[k][bk->var] + bk->offset,
                                        bk->length);
        }
        ps_store_close(st);
    }
    if (rv == HC_OK)
        rv = sort_rows(g);
    for (v = 0; rv == HC_OK && v < g->n_vars; v++) {
        size_t e;

        if (g->vars[v].table_rows)
            continue;
        for (e = 0; e < g->vars[v].size; e++)
            if (!g->vars[v].seen[e])
                break;
        if (e < g->vars[v].size)
            rv = hc_err_set(HC_ERR_STORE, "element %zu of %s is in no store: "
                            "is a shard's --data-dir missing?", e,
                            g->vars[v].name);
    }
    if (rv != HC_OK)
        ps_gathered_free(g);
    return rv;
}

