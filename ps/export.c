/*
 * export.c — `hetps export` and `hetps inspect` (see export.h).
 *
 * Each variable becomes a float32 .npy file (common/npy.h) in C order —
 * which is the order the shards keep (Keras's layout).
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

#include <cJSON.h>

#include "err.h"
#include "model.h"
#include "layout.h"
#include "name.h"
#include "npy.h"
#include "optimizer.h"
#include "store.h"

#define VARS_JSON_MAX (1u << 20)

struct var {
    char name[HC_NAME_MAX * 2];
    int ndim;
    size_t shape[HC_NPY_MAX_DIMS];
    size_t size;
    float *data;            /* (size) */
    unsigned char *seen;    /* (size) elements filled */
};

static int parse_vars(const char *json, size_t len, const char *dir,
                      struct var **out, int *n_out)
{
    cJSON *root = cJSON_ParseWithLength(json, len), *it;
    struct var *vars = NULL;
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
        struct var *v = &vars[n];

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
        snprintf(v->name, sizeof v->name, "%s", name->valuestring);
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
 * followed. Gives its fd in *dir_fd and the file name ("kernel.npy") in
 * leaf. The name was checked (name.h) before. */
static int open_parent(int out, const char *out_dir, const char *name,
                       char *leaf, size_t cap, int *dir_fd)
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
    snprintf(leaf, cap, "%s.npy", p);
    *dir_fd = fd;
    return HC_OK;
}

/* Everything the shards of one cluster hold, assembled per variable. */
struct gathered {
    struct var *vars;           /* (n_vars) values, element coverage */
    int n_vars;
    float *slots[PS_STORE_MAX_SLOTS][HC_MODEL_MAX_VARS]; /* optimizer slots */
    uint32_t n_slots, block_elems;
    uint64_t step;              /* the largest shard step */
    struct ps_store_info info0; /* of shard 0 */
    char *json;                 /* (json_len) shard 0's variable definitions */
    size_t json_len;
    struct ps_place *places;    /* (n_workers) with_slots: each worker's
                                   furthest recorded place in its data */
    int n_workers;
};

static void gathered_free(struct gathered *g)
{
    int v, k;

    for (v = 0; g->vars && v < g->n_vars; v++) {
        free(g->vars[v].data);
        free(g->vars[v].seen);
        for (k = 0; k < PS_STORE_MAX_SLOTS; k++)
            free(g->slots[k][v]);
    }
    free(g->vars);
    free(g->json);
    free(g->places);
    memset(g, 0, sizeof *g);
}

/* Shard 0's definitions: parse them and allocate every variable's arrays. */
static int gather_defs(struct gathered *g, struct ps_store *st,
                       const char *dir, int with_slots)
{
    int v, k, rv;

    g->n_slots = g->info0.n_slots;
    g->block_elems = g->info0.block_elems;
    g->json = malloc(VARS_JSON_MAX);
    if (!g->json)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    rv = ps_store_meta_get(st, "vars", g->json, VARS_JSON_MAX, &g->json_len);
    if (rv == HC_OK)
        rv = parse_vars(g->json, g->json_len, dir, &g->vars, &g->n_vars);
    for (v = 0; rv == HC_OK && v < g->n_vars; v++) {
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

/*
 * Read every block (and, with_slots, every optimizer slot) of the stores
 * of `cl` — shard J in DATA_DIR/ps-J, opened read-only — into *g, and
 * with_slots each worker's furthest place recorded by any shard. Every
 * element must come from exactly one block; `verify` checks every checksum
 * first. Frees *g on failure.
 */
static int gather(const struct hc_cluster *cl, const char *data_dir,
                  int with_slots, int verify, struct gathered *g, FILE *log)
{
    /* Moving stores (with_slots: reshard) needs them idle: a shard still
     * writing would change them under the copy. A live export is fine. */
    struct ps_store_opts o = { .read_only = 1, .require_idle = with_slots };
    char dir[PATH_MAX];
    int j, v, k, w, rv = HC_OK;

    memset(g, 0, sizeof *g);
    if (with_slots && cl->n_worker > 0) {
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
        if (rv == HC_OK && verify && (rv = ps_store_verify(st)) != HC_OK)
            rv = hc_err_set(rv, "%s: not moving a damaged store", hc_err_msg());
        if (rv == HC_OK && j == 0) {
            g->info0 = info;
            rv = gather_defs(g, st, dir, with_slots);
        }
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
            struct var *var = &g->vars[bk->var];
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
    for (v = 0; rv == HC_OK && v < g->n_vars; v++) {
        size_t e;

        for (e = 0; e < g->vars[v].size; e++)
            if (!g->vars[v].seen[e])
                break;
        if (e < g->vars[v].size)
            rv = hc_err_set(HC_ERR_STORE, "element %zu of %s is in no store: "
                            "is a shard's --data-dir missing?", e,
                            g->vars[v].name);
    }
    if (rv != HC_OK)
        gathered_free(g);
    return rv;
}

int ps_export(const struct hc_cluster *cl, const char *data_dir,
              const char *out_dir, FILE *log)
{
    struct gathered g;
    int v, out = -1, rv = gather(cl, data_dir, 0, 0, &g, log);
    const int gathered = rv == HC_OK;

    if (rv == HC_OK)
        rv = mkdir_p(out_dir);
    if (rv == HC_OK &&
        (out = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        rv = hc_err_set(HC_ERR_IO, "output directory %s: %s", out_dir,
                        strerror(errno));
    for (v = 0; rv == HC_OK && v < g.n_vars; v++) {
        char path[PATH_MAX], leaf[HC_NAME_MAX_BYTES + 8];
        int i, dir = -1;

        snprintf(path, sizeof path, "%s/%s.npy", out_dir, g.vars[v].name);
        if ((rv = open_parent(out, out_dir, g.vars[v].name, leaf,
                              sizeof leaf, &dir)) != HC_OK)
            break;
        rv = hc_npy_write_f32_at(dir, leaf, path, g.vars[v].shape,
                                 g.vars[v].ndim, g.vars[v].data);
        close(dir);
        if (rv == HC_OK && log) {
            fprintf(log, "%s (", path);
            for (i = 0; i < g.vars[v].ndim; i++)
                fprintf(log, "%s%zu", i ? ", " : "", g.vars[v].shape[i]);
            fprintf(log, "%s) float32\n", g.vars[v].ndim == 1 ? "," : "");
        }
    }
    if (out >= 0)
        close(out);
    if (gathered)
        gathered_free(&g);
    return rv;
}

/* Each worker's place in its data, for the workers to resume from (a
 * record with no request: a worker's first request after the move comes
 * with a new incarnation). */
static int put_places(struct ps_store *st, const struct gathered *g)
{
    struct ps_record *recs = calloc((size_t)g->n_workers + 1, sizeof *recs);
    size_t n = 0;
    int w, rv;

    if (!recs)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    for (w = 0; w < g->n_workers; w++)
        if (g->places[w].known) {
            recs[n].worker = (uint32_t)w;
            recs[n++].place = g->places[w];
        }
    rv = n ? ps_store_apply(st, &g->info0.optim, NULL, 0, recs, n, NULL)
           : HC_OK;
    free(recs);
    return rv;
}

int ps_reshard(const struct hc_cluster *from, const char *from_dir,
               const struct hc_cluster *to, const char *to_dir, FILE *log)
{
    struct hc_layout lay = { 0 };
    struct gathered g;
    size_t sizes[HC_MODEL_MAX_VARS] = { 0 };
    char dir[PATH_MAX], optim[PS_OPTIM_JSON_MAX];
    int j, v, k, rv, have_lay = 0;

    /* 1. Everything the old shards hold, checksums verified. */
    if ((rv = gather(from, from_dir, 1, 1, &g, log)) != HC_OK)
        return rv;
    /* 2. The new layout and fresh stores. */
    for (v = 0; v < g.n_vars; v++)
        sizes[v] = g.vars[v].size;
    rv = hc_layout_build(sizes, g.n_vars, to->n_ps, g.block_elems, &lay);
    if (rv == HC_OK)
        have_lay = 1;
    if (rv == HC_OK)
        rv = ps_optim_to_json(&g.info0.optim, optim, sizeof optim);
    for (j = 0; rv == HC_OK && j < to->n_ps; j++) {
        const float **init = calloc(lay.shard_blocks[j] + 1, sizeof *init);
        const float **sl[PS_STORE_MAX_SLOTS] = { 0 };
        struct ps_store *st = NULL;
        struct ps_store_info info;
        size_t b;
        int created = 0;

        for (k = 0; k < (int)g.n_slots; k++)
            sl[k] = calloc(lay.shard_blocks[j] + 1, sizeof *sl[k]);
        if (!init || (g.n_slots > 0 && !sl[0]) || (g.n_slots > 1 && !sl[1])) {
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
        if ((rv = ps_store_init(st, g.info0.signature, &lay, (uint32_t)j, optim,
                                init, &created)) == HC_OK &&
            (rv = ps_store_restore(st, (const float *const *const *)sl, g.step)) ==
                HC_OK &&
            (rv = ps_store_meta_put(st, "vars", g.json, g.json_len)) == HC_OK)
            rv = put_places(st, &g);
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
    gathered_free(&g);
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

int ps_inspect(const char *dir, FILE *out)
{
    struct ps_store_opts o = { .read_only = 1 };
    struct ps_store *s = NULL;
    struct ps_store_info info;
    char *json;
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
            "  optimizer %s lr %g\n  map %llu MiB\n",
            info.shard, info.n_shards, info.n_blocks, info.block_elems,
            info.n_slots, (unsigned long long)info.step,
            (unsigned long long)info.signature,
            (unsigned long long)info.layout_hash,
            info.optim.type == HC_OPT_ADAM ? "adam"
            : info.optim.type == HC_OPT_MOMENTUM ? "momentum" : "sgd",
            (double)info.optim.lr, (unsigned long long)(info.map_size >> 20));
    json = malloc(VARS_JSON_MAX);
    if (json && ps_store_meta_get(s, "vars", json, VARS_JSON_MAX - 1, &len) == HC_OK) {
        json[len] = '\0';
        fprintf(out, "  variables %s\n", json);
    }
    free(json);
    rv = ps_store_records(s, print_record, out);
    if (rv == HC_OK)
        rv = ps_store_verify(s);
    fprintf(out, "  checksums: %s\n", rv == HC_OK ? "all good" : hc_err_msg());
    ps_store_close(s);
    return rv;
}
