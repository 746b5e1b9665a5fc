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
#include <sys/stat.h>

#include "err.h"
#include "gather.h"
#include "npy.h"
#include "store.h"

/* Create every directory on the way to `path`'s parent. */
static int mkdirs_for(const char *path)
{
    char buf[PATH_MAX];
    char *p;

    snprintf(buf, sizeof buf, "%s", path);
    for (p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return hc_err_set(HC_ERR_IO, "cannot create %s: %s", buf,
                              strerror(errno));
        *p = '/';
    }
    return HC_OK;
}

int ps_export(const struct hc_cluster *cl, const char *data_dir,
              const char *out_dir, FILE *log)
{
    struct ps_gathered g;
    int v, rv = ps_gather(cl, data_dir, 0, 0, &g, log);

    for (v = 0; rv == HC_OK && v < g.n_vars; v++) {
        char path[PATH_MAX];
        int i;

        snprintf(path, sizeof path, "%s/%s.npy", out_dir, g.vars[v].name);
        rv = mkdirs_for(path);
        if (rv == HC_OK)
            rv = hc_npy_write_f32(path, g.vars[v].shape, g.vars[v].ndim,
                                  g.vars[v].data);
        if (rv == HC_OK && log) {
            fprintf(log, "%s (", path);
            for (i = 0; i < g.vars[v].ndim; i++)
                fprintf(log, "%s%zu", i ? ", " : "", g.vars[v].shape[i]);
            fprintf(log, "%s) float32\n", g.vars[v].ndim == 1 ? "," : "");
        }
    }
    if (rv == HC_OK)
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
    json = malloc(PS_VARS_JSON_MAX);
    if (json && ps_store_meta_get(s, "vars", json, PS_VARS_JSON_MAX - 1, &len) == HC_OK) {
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
