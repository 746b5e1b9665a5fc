/*
 * keras_h5.c — the weights file of Keras 3 (`.weights.h5`, keras.h has
 * its layout) read and written through Debian's HDF5 library: the paths
 * of a model's variables, each dataset checked against the model (type a
 * float, rank and every dimension) before a value is read, and a file
 * written beside its name and renamed, so it is whole or absent. A
 * `.keras` archive's weights are read from memory (HDF5's core driver
 * given the file image keras_archive.c extracts).
 */
#include "keras.h"
#include "keras_impl.h"

#include "err.h"
#include "layer.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *hc_keras_class(enum hc_layer_type t)
{
    const struct hc_layer_kind *k = hc_layer_kind(t);

    return k ? k->keras_class : "Unknown";
}

/* "layers/SNAKE" of layer i into buf (SNAKE its kind's snake case):
 * SNAKE_N for the N-th (from 1) layer of the same class before it. */
static void layer_path(const struct hc_model *m, int i, char *buf,
                       size_t len)
{
    const char *snake = hc_layer_kind(m->layers[i].type)->snake;
    int same = 0;

    for (int j = 0; j < i; j++)
        same += m->layers[j].type == m->layers[i].type;
    if (same)
        snprintf(buf, len, "layers/%s_%d", snake, same);
    else
        snprintf(buf, len, "layers/%s", snake);
}

int hc_keras_dense_tables(const struct hc_model *m, struct hc_model *dense)
{
    *dense = *m;
    for (int v = 0; v < m->n_vars; v++) {
        struct hc_var_def *d = &dense->vars[v];
        const uint64_t dim = (uint64_t)d->shape[1];

        if (!d->table_rows)
            continue;
        if (d->table_rows > HC_KERAS_TABLE_MAX_BYTES / 4 / dim)
            return hc_err_set(HC_ERR_UNSUPPORTED, "table %s has input_dim "
                              "%llu: as one dense (%llu, %llu) float32 "
                              "array it is over Keras's files' limit of "
                              "%llu bytes a table (`hetps export` without "
                              "a model file writes its stored rows as "
                              "%s.ids.npy and %s.rows.npy)", d->name,
                              (unsigned long long)d->table_rows,
                              (unsigned long long)d->table_rows,
                              (unsigned long long)dim,
                              (unsigned long long)HC_KERAS_TABLE_MAX_BYTES,
                              d->name, d->name);
        d->shape[0] = (int)d->table_rows;
        d->size = (size_t)d->table_rows * (size_t)dim;
        d->table_rows = 0;
        dense->n_params += d->size;
    }
    return HC_OK;
}

int hc_keras_var_path(const struct hc_model *m, int v, char *buf,
                      size_t len)
{
    char lp[HC_NAME_MAX + 16];

    for (int i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *l = &m->layers[i];

        if (l->n_var == 0 || v < l->var_first ||
            v >= l->var_first + l->n_var)
            continue;
        layer_path(m, i, lp, sizeof lp);
        snprintf(buf, len, "%s/vars/%d", lp, v - l->var_first);
        return HC_OK;
    }
    return hc_err_set(HC_ERR_INVAL, "variable %d is not one of the model's",
                      v);
}

/* Offset (in floats) of variable v in the flat parameters: the sum of the
 * sizes before it, as hc_model_var_offset counts (computed here so that
 * Keras's files need nothing of model.c, which reads .keras archives). */
static size_t var_at(const struct hc_model *m, int v)
{
    size_t off = 0;

    for (int i = 0; i < v; i++)
        off += m->vars[i].size;
    return off;
}

/* ---- the optimizer's variables (keras.h: their order) ------------------ */

/* The scalars before the slots: iteration, learning_rate when constant,
 * Nadam's u_product. */
static int optim_scalars(const struct hc_model *m)
{
    return 1 + (m->optim.sched.kind == HC_LR_CONSTANT) +
           (m->optim.type == HC_OPT_NADAM);
}

int hc_keras_optim_count(const struct hc_model *m, int n_slots)
{
    return optim_scalars(m) + n_slots * m->n_vars;
}

/* Slot entry e (0 = the first after the scalars) as (kind, variable). */
static void optim_slot_at(const struct hc_model *m, int n_slots, int e,
                          int *kind, int *var)
{
    enum hc_optim t = m->optim.type;
    int lead = t == HC_OPT_ADAM || t == HC_OPT_ADAMW || t == HC_OPT_NADAM ||
               t == HC_OPT_ADAMAX || t == HC_OPT_FTRL ? 2 : 1;

    if (lead > n_slots)
        lead = n_slots;
    if (e < lead * m->n_vars) {
        *var = e / lead;
        *kind = e % lead;
    } else {
        e -= lead * m->n_vars;
        *kind = lead + e / m->n_vars;
        *var = e % m->n_vars;
    }
}

/* ---- reading ------------------------------------------------------------ */

/* 1 when every group on the way to path and path itself exist. */
static int exists(hid_t f, const char *path)
{
    char part[256];

    for (const char *p = path; (p = strchr(p, '/')) != NULL; p++) {
        snprintf(part, sizeof part, "%.*s", (int)(p - path), path);
        if (H5Lexists(f, part, H5P_DEFAULT) <= 0)
            return 0;
    }
    return H5Lexists(f, path, H5P_DEFAULT) > 0;
}

/* Variable v of m from dataset path of f into dst, after its checks. */
static int read_var(hid_t f, const char *file, const char *path,
                    const struct hc_var_def *d, float *dst)
{
    hsize_t dims[8];
    hid_t ds = -1, type = -1, space = -1;
    int rank, rv = HC_OK;
    char got[96], want[96];
    size_t n = 0;

    if (!exists(f, path))
        return hc_err_set(HC_ERR_MISMATCH, "%s: no dataset %s (the model's "
                          "%s); is this the weights file of this model?",
                          file, path, d->name);
    if ((ds = H5Dopen2(f, path, H5P_DEFAULT)) < 0) {
        rv = hc_err_set(HC_ERR_DATA, "%s: %s is not a dataset", file, path);
        goto out;
    }
    type = H5Dget_type(ds);
    space = H5Dget_space(ds);
    if (type < 0 || space < 0 || H5Tget_class(type) != H5T_FLOAT) {
        rv = hc_err_set(HC_ERR_DATA, "%s: %s is not floating point (Keras "
                        "writes float32)", file, path);
        goto out;
    }
    rank = H5Sget_simple_extent_ndims(space);
    if (rank < 0 || rank > 8 ||
        H5Sget_simple_extent_dims(space, dims, NULL) != rank) {
        rv = hc_err_set(HC_ERR_DATA, "%s: %s: unreadable shape", file, path);
        goto out;
    }
    int same = rank == d->ndim;
    for (int k = 0; k < rank && k < d->ndim; k++)
        same = same && dims[k] == (hsize_t)d->shape[k];
    if (!same) {
        got[0] = want[0] = '\0';
        for (int k = 0; k < rank; k++)
            n += (size_t)snprintf(got + n, n < sizeof got ? sizeof got - n
                                  : 0, "%s%llu", k ? ", " : "",
                                  (unsigned long long)dims[k]);
        n = 0;
        for (int k = 0; k < d->ndim; k++)
            n += (size_t)snprintf(want + n, sizeof want - n, "%s%d",
                                  k ? ", " : "", d->shape[k]);
        rv = hc_err_set(HC_ERR_MISMATCH, "%s: %s has shape (%s); the "
                        "model's %s is (%s)", file, path, got, d->name, want);
        goto out;
    }
    if (H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0)
        rv = hc_err_set(HC_ERR_DATA, "%s: %s: cannot read its values "
                        "(truncated or damaged file?)", file, path);
out:
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    if (ds >= 0)
        H5Dclose(ds);
    return rv;
}

/* Every layer's vars group holds exactly its variables (as Keras checks). */
static int count_vars(hid_t f, const char *file, const struct hc_model *m)
{
    for (int i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *l = &m->layers[i];
        int want = l->n_var;
        char path[HC_NAME_MAX + 32];
        H5G_info_t info;

        layer_path(m, i, path, sizeof path);
        strcat(path, "/vars");
        if (!exists(f, path)) {
            if (want == 0)
                continue;
            return hc_err_set(HC_ERR_MISMATCH, "%s: no group %s (layer "
                              "\"%s\", %s); is this the weights file of this "
                              "model?", file, path, l->name,
                              hc_keras_class(l->type));
        }
        if (H5Gget_info_by_name(f, path, &info, H5P_DEFAULT) < 0)
            return hc_err_set(HC_ERR_DATA, "%s: %s is not a group", file,
                              path);
        if (info.nlinks != (hsize_t)want)
            return hc_err_set(HC_ERR_MISMATCH, "%s: %s holds %llu "
                              "variables; layer \"%s\" (%s) has %d", file,
                              path, (unsigned long long)info.nlinks, l->name,
                              hc_keras_class(l->type), want);
    }
    return HC_OK;
}

static int read_all(hid_t f, const char *file, const struct hc_model *m,
                    float *params)
{
    char path[HC_NAME_MAX + 32];
    int rv;

    if ((rv = count_vars(f, file, m)) != HC_OK)
        return rv;
    for (int v = 0; v < m->n_vars; v++) {
        if ((rv = hc_keras_var_path(m, v, path, sizeof path)) != HC_OK ||
            (rv = read_var(f, file, path, &m->vars[v],
                           params + var_at(m, v))) != HC_OK)
            return rv;
    }
    return HC_OK;
}

/* A scalar dataset of f at path into *dst as `mem` (H5T_NATIVE_*),
 * after checking it is one value of class `cls`. */
static int read_scalar(hid_t f, const char *file, const char *path,
                       const char *what, H5T_class_t cls, hid_t mem,
                       void *dst)
{
    hid_t ds = -1, type = -1, space = -1;
    int rv = HC_OK;

    if ((ds = H5Dopen2(f, path, H5P_DEFAULT)) < 0)
        return hc_err_set(HC_ERR_MISMATCH, "%s: no dataset %s (the "
                          "optimizer's %s)", file, path, what);
    type = H5Dget_type(ds);
    space = H5Dget_space(ds);
    if (type < 0 || space < 0 || H5Tget_class(type) != cls ||
        H5Sget_simple_extent_npoints(space) != 1)
        rv = hc_err_set(HC_ERR_MISMATCH, "%s: %s is not one %s (the "
                        "optimizer's %s)", file, path,
                        cls == H5T_INTEGER ? "integer" : "float", what);
    else if (H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0)
        rv = hc_err_set(HC_ERR_DATA, "%s: %s: cannot read its value", file,
                        path);
    if (space >= 0)
        H5Sclose(space);
    if (type >= 0)
        H5Tclose(type);
    H5Dclose(ds);
    return rv;
}

static int read_optim(hid_t f, const char *file, const struct hc_model *m,
                      struct hc_keras_optim *o)
{
    int n = hc_keras_optim_count(m, o->n_slots), s = optim_scalars(m), rv;
    char path[64];
    H5G_info_t info;
    int64_t it = 0;
    float lr;

    if (o->n_slots < 0 || o->n_slots > HC_KERAS_MAX_SLOTS)
        return hc_err_set(HC_ERR_INVAL, "%d optimizer slots: 0 to %d",
                          o->n_slots, HC_KERAS_MAX_SLOTS);
    if (!exists(f, "optimizer/vars"))
        return hc_err_set(HC_ERR_NOTFOUND, "%s: no optimizer/vars (saved "
                          "without the optimizer's state)", file);
    if (H5Gget_info_by_name(f, "optimizer/vars", &info, H5P_DEFAULT) < 0 ||
        info.nlinks != (hsize_t)n)
        return hc_err_set(HC_ERR_MISMATCH, "%s: optimizer/vars holds %llu "
                          "variables; %s of this model keeps %d (iteration%s"
                          "%s and %d slot(s) for each of %d variables)",
                          file, (unsigned long long)info.nlinks,
                          hc_optim_name(m->optim.type), n,
                          m->optim.sched.kind == HC_LR_CONSTANT
                              ? ", learning_rate" : "",
                          m->optim.type == HC_OPT_NADAM ? ", u_product" : "",
                          o->n_slots, m->n_vars);
    if ((rv = read_scalar(f, file, "optimizer/vars/0", "iteration",
                          H5T_INTEGER, H5T_NATIVE_INT64, &it)) != HC_OK)
        return rv;
    if (it < 0)
        return hc_err_set(HC_ERR_MISMATCH, "%s: optimizer/vars/0: iteration "
                          "%lld", file, (long long)it);
    o->iterations = (uint64_t)it;
    if (m->optim.sched.kind == HC_LR_CONSTANT &&
        (rv = read_scalar(f, file, "optimizer/vars/1", "learning_rate",
                          H5T_FLOAT, H5T_NATIVE_FLOAT, &lr)) != HC_OK)
        return rv;
    if (m->optim.type == HC_OPT_NADAM) {
        snprintf(path, sizeof path, "optimizer/vars/%d", s - 1);
        if ((rv = read_scalar(f, file, path, "u_product", H5T_FLOAT,
                              H5T_NATIVE_FLOAT, &o->u_product)) != HC_OK)
            return rv;
    }
    for (int e = 0; e < n - s; e++) {
        int k, v;

        optim_slot_at(m, o->n_slots, e, &k, &v);
        snprintf(path, sizeof path, "optimizer/vars/%d", s + e);
        if ((rv = read_var(f, file, path, &m->vars[v],
                           o->slots[k] + var_at(m, v))) != HC_OK)
            return rv;
    }
    return HC_OK;
}

/* What the caller asked for from the open file f. */
static int read_what(hid_t f, const char *file, const struct hc_model *m,
                     float *params, struct hc_keras_optim *o)
{
    int rv = params ? read_all(f, file, m, params) : HC_OK;

    return rv == HC_OK && o ? read_optim(f, file, m, o) : rv;
}

int kx_read_weights_image(const char *file, void *image, size_t len,
                          const struct hc_model *m, float *params,
                          struct hc_keras_optim *o)
{
    hid_t fapl, f;
    int rv;

    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if ((fapl = H5Pcreate(H5P_FILE_ACCESS)) < 0)
        return hc_err_set(HC_ERR_NOMEM, "%s: HDF5: out of memory", file);
    if (H5Pset_fapl_core(fapl, 1 << 20, 0) < 0 ||
        H5Pset_file_image(fapl, image, len) < 0) {
        H5Pclose(fapl);
        return hc_err_set(HC_ERR_NOMEM, "%s: HDF5: cannot take the file "
                          "image", file);
    }
    f = H5Fopen("model.weights.h5", H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0)
        return hc_err_set(HC_ERR_DATA, "%s: model.weights.h5 is not a "
                          "readable HDF5 file (truncated or damaged?)", file);
    rv = read_what(f, file, m, params, o);
    H5Fclose(f);
    return rv;
}

int kx_read_weights_file(const char *path, const struct hc_model *m,
                         float *params, struct hc_keras_optim *o)
{
    hid_t f;
    int rv;

    if (access(path, R_OK) != 0)
        return hc_err_set(errno == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                          "%s: cannot open: %s", path, strerror(errno));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (H5Fis_hdf5(path) <= 0 ||
        (f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0)
        return hc_err_set(HC_ERR_DATA, "%s: not a readable HDF5 file "
                          "(truncated or damaged?); give a .weights.h5 "
                          "file or a .keras archive", path);
    rv = read_what(f, path, m, params, o);
    H5Fclose(f);
    return rv;
}

/* ---- writing ------------------------------------------------------------ */

static int write_var(hid_t g, const char *name, const struct hc_var_def *d,
                     const float *src)
{
    hsize_t dims[4];
    hid_t space, ds;
    int ok;

    for (int k = 0; k < d->ndim; k++)
        dims[k] = (hsize_t)d->shape[k];
    if ((space = H5Screate_simple(d->ndim, dims, NULL)) < 0)
        return -1;
    ds = H5Dcreate2(g, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                    H5P_DEFAULT);
    ok = ds >= 0 && H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL,
                             H5P_DEFAULT, src) >= 0;
    if (ds >= 0)
        ok = H5Dclose(ds) >= 0 && ok;
    H5Sclose(space);
    return ok ? 0 : -1;
}

/* A scalar dataset `name` of g: one value at src, stored as `file`
 * (H5T_STD_I64LE, H5T_IEEE_F32LE) from `mem`. */
static int write_scalar(hid_t g, const char *name, hid_t file, hid_t mem,
                        const void *src)
{
    hid_t space = H5Screate(H5S_SCALAR), ds;
    int ok;

    if (space < 0)
        return -1;
    ds = H5Dcreate2(g, name, file, space, H5P_DEFAULT, H5P_DEFAULT,
                    H5P_DEFAULT);
    ok = ds >= 0 && H5Dwrite(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                             src) >= 0;
    if (ds >= 0)
        ok = H5Dclose(ds) >= 0 && ok;
    H5Sclose(space);
    return ok ? 0 : -1;
}

/* "optimizer/vars" of o, in Keras's order (keras.h). */
static int write_optim(hid_t f, const struct hc_model *m,
                       const struct hc_keras_optim *o)
{
    int n = hc_keras_optim_count(m, o->n_slots), s, bad;
    int64_t it = (int64_t)o->iterations;
    hid_t g, vg;
    char key[16];

    if ((g = H5Gcreate2(f, "optimizer", H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT)) < 0)
        return -1;
    vg = H5Gcreate2(g, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    bad = vg < 0 || write_scalar(vg, "0", H5T_STD_I64LE, H5T_NATIVE_INT64,
                                 &it);
    s = 1;
    if (!bad && m->optim.sched.kind == HC_LR_CONSTANT)
        bad = write_scalar(vg, "1", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                           &m->optim.lr);
    s = optim_scalars(m);
    if (!bad && m->optim.type == HC_OPT_NADAM) {
        snprintf(key, sizeof key, "%d", s - 1);
        bad = write_scalar(vg, key, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                           &o->u_product);
    }
    for (int e = 0; !bad && e < n - s; e++) {
        int k, v;

        optim_slot_at(m, o->n_slots, e, &k, &v);
        snprintf(key, sizeof key, "%d", s + e);
        bad = write_var(vg, key, &m->vars[v], o->slots[k] + var_at(m, v));
    }
    if (vg >= 0)
        bad |= H5Gclose(vg) < 0;
    bad |= H5Gclose(g) < 0;
    return bad ? -1 : 0;
}

/* The groups and datasets of m into the new file f. */
static int write_all(hid_t f, const struct hc_model *m, const float *params)
{
    hid_t g;
    char path[HC_NAME_MAX + 32];

    if ((g = H5Gcreate2(f, "vars", H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT)) < 0 || H5Gclose(g) < 0 ||
        (g = H5Gcreate2(f, "layers", H5P_DEFAULT, H5P_DEFAULT,
                        H5P_DEFAULT)) < 0 || H5Gclose(g) < 0)
        return -1;
    /* A graph is written as a Functional model, whose layers (Keras 3's
     * Functional.layers) begin with its InputLayers, each an empty group
     * (a Sequential's list leaves its InputLayer out). */
    for (int q = 0; !hc_model_is_chain(m) && q < m->n_inputs; q++) {
        if (q)
            snprintf(path, sizeof path, "layers/input_layer_%d", q);
        else
            snprintf(path, sizeof path, "layers/input_layer");
        if ((g = H5Gcreate2(f, path, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT)) < 0 || H5Gclose(g) < 0)
            return -1;
        strcat(path, "/vars");
        if ((g = H5Gcreate2(f, path, H5P_DEFAULT, H5P_DEFAULT,
                            H5P_DEFAULT)) < 0 || H5Gclose(g) < 0)
            return -1;
    }
    for (int i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *l = &m->layers[i];
        hid_t lg, vg;
        int bad = 0;

        layer_path(m, i, path, sizeof path);
        if ((lg = H5Gcreate2(f, path, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT)) < 0)
            return -1;
        vg = H5Gcreate2(lg, "vars", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        bad = vg < 0;
        for (int k = 0; !bad && k < l->n_var; k++) {
            char key[16];
            int v = l->var_first + k;

            snprintf(key, sizeof key, "%d", k);
            bad = write_var(vg, key, &m->vars[v], params + var_at(m, v));
        }
        if (vg >= 0)
            bad |= H5Gclose(vg) < 0;
        bad |= H5Gclose(lg) < 0;
        if (bad)
            return -1;
    }
    return 0;
}

int kx_no_tables(const struct hc_model *m, const char *path)
{
    for (int v = 0; v < m->n_vars; v++)
        if (m->vars[v].table_rows)
            return hc_err_set(HC_ERR_UNSUPPORTED, "%s: variable %s of "
                              "model %s is an embedding table, which "
                              "Keras's files hold as one dense array: "
                              "read or written only through the model of "
                              "hc_keras_dense_tables", path,
                              m->vars[v].name, m->name);
    return HC_OK;
}

int kx_write_weights_file(const char *path, const char *name,
                          const struct hc_model *m, const float *params,
                          const struct hc_keras_optim *o)
{
    hid_t f;
    int bad;

    if ((bad = kx_no_tables(m, name)) != HC_OK)
        return bad;

    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if ((f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        return hc_err_set(HC_ERR_IO, "%s: HDF5 cannot create it", name);
    bad = write_all(f, m, params);
    if (!bad && o)
        bad = write_optim(f, m, o);
    bad |= H5Fclose(f) < 0;
    if (bad) {
        unlink(path);
        return hc_err_set(HC_ERR_IO, "%s: HDF5 could not write it (disk "
                          "full?)", name);
    }
    return HC_OK;
}

int hc_keras_write_weights(const char *path, const struct hc_model *m,
                           const float *params,
                           const struct hc_keras_optim *o)
{
    char tmp[4096];
    int rv;

    if (snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid()) >=
        (int)sizeof tmp)
        return hc_err_set(HC_ERR_INVAL, "%.64s…: path too long", path);
    if ((rv = kx_write_weights_file(tmp, path, m, params, o)) != HC_OK)
        return rv;
    if (rename(tmp, path) != 0) {
        rv = hc_err_set(HC_ERR_IO, "%s: %s", path, strerror(errno));
        unlink(tmp);
    }
    return rv;
}
