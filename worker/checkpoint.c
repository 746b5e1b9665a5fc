/*
 * checkpoint.c — per-epoch .npy weights, written whole or not at all (see
 * checkpoint.h).
 */
#include "checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "npy.h"
#include "tfevents.h"

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Every variable of m into dir (created). */
static int write_all(const char *dir, const struct hc_model *m,
                     const float *params, int epoch, double val_acc)
{
    const float *p = params;
    char path[PATH_MAX];
    FILE *f;
    int v, rv;

    for (v = 0; v < m->n_vars; v++) {
        const struct hc_var_def *d = &m->vars[v];
        size_t shape[4];
        char *slash;
        int i;

        for (i = 0; i < d->ndim; i++)
            shape[i] = (size_t)d->shape[i];
        if (snprintf(path, sizeof path, "%s/%s.npy", dir, d->name) >=
            (int)sizeof path)
            return hc_err_set(HC_ERR_INVAL, "%s: path too long", dir);
        if ((slash = strrchr(path, '/'))) {
            *slash = '\0';
            rv = hc_mkdirs(path);
            *slash = '/';
            if (rv != HC_OK)
                return rv;
        }
        if ((rv = hc_npy_write_f32(path, shape, d->ndim, p)) != HC_OK)
            return rv;
        p += d->size;
    }
    if (snprintf(path, sizeof path, "%s/epoch.txt", dir) >= (int)sizeof path)
        return hc_err_set(HC_ERR_INVAL, "%s: path too long", dir);
    if (!(f = fopen(path, "w")) ||
        fprintf(f, "epoch %d val_accuracy %.4f\n", epoch + 1, val_acc) < 0 ||
        fclose(f) != 0)
        return hc_err_set(HC_ERR_IO, "cannot write %s: %s", path,
                          strerror(errno));
    return HC_OK;
}

int wk_checkpoint_epoch(struct wk_checkpoint *c, const struct hc_model *m,
                        const float *params, int epoch, double val_acc,
                        int *wrote)
{
    char tmp[PATH_MAX], final[PATH_MAX];
    int rv;

    *wrote = 0;
    if (!c->dir || (c->best_only && val_acc <= c->best))
        return HC_OK;
    if ((rv = hc_mkdirs(c->dir)) != HC_OK)
        return rv;
    if (strlen(c->dir) > PATH_MAX - 64)
        return hc_err_set(HC_ERR_INVAL, "--export-every-epoch %s: path too "
                          "long", c->dir);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%d-%d", c->dir, epoch + 1,
             (int)getpid());
    rm_tree(tmp);
    if (c->best_only)
        snprintf(final, sizeof final, "%s/best", c->dir);
    else
        snprintf(final, sizeof final, "%s/epoch-%03d", c->dir, epoch + 1);
    if ((rv = write_all(tmp, m, params, epoch, val_acc)) != HC_OK) {
        rm_tree(tmp);
        return rv;
    }
    /* In place at once: a new name, or the old one swapped out whole. */
    if (rename(tmp, final) != 0) {
        if ((errno != ENOTEMPTY && errno != EEXIST) ||
            renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) != 0) {
            rv = hc_err_set(HC_ERR_IO, "cannot rename %s to %s: %s", tmp,
                            final, strerror(errno));
            rm_tree(tmp);
            return rv;
        }
        rm_tree(tmp);           /* now the previous one */
    }
    if (c->best_only)
        c->best = val_acc;
    snprintf(c->last, sizeof c->last, "%s", final);
    *wrote = 1;
    return HC_OK;
}
