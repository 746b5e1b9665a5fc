/*
 * keras_archive.c — the `.keras` file of Keras 3 (keras.h): a zip, read
 * and written with Debian's libzip, holding config.json (the model as
 * Keras serialises it, with its compile_config), metadata.json (the Keras
 * version that wrote it) and model.weights.h5 (keras_h5.c). Reading takes
 * config.json for the model and model.weights.h5 for its weights, each
 * sized against its limit before it is read; writing makes config.json
 * from the model (what Keras 3 writes for the same Sequential) and the
 * archive beside its name, renamed when whole. Which weights file
 * hc_keras_read_weights reads — an archive or a bare .weights.h5 — is
 * decided here by the file's first bytes.
 */
#include "keras.h"
#include "keras_impl.h"

#include "err.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zip.h>

#define WEIGHTS_SLACK   (16u << 20)     /* HDF5's own bytes beyond the data */

int hc_keras_is_archive(const char *path)
{
    unsigned char b[4];
    FILE *f = fopen(path, "rb");
    int yes;

    if (!f)
        return 0;
    yes = fread(b, 1, 4, f) == 4 && b[0] == 'P' && b[1] == 'K' &&
          b[2] == 3 && b[3] == 4;
    fclose(f);
    return yes;
}

static int open_archive(const char *path, zip_t **z)
{
    zip_error_t ze;
    int code = 0;

    if (!(*z = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &code))) {
        int rv;

        zip_error_init_with_code(&ze, code);
        rv = hc_err_set(code == ZIP_ER_NOENT ? HC_ERR_NOTFOUND : HC_ERR_DATA,
                        "%s: not a readable .keras archive (zip: %s)", path,
                        zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return rv;
    }
    return HC_OK;
}

/* Member name of z, at most max bytes, into a new buffer (NUL added). */
static int read_member(zip_t *z, const char *path, const char *name,
                       size_t max, char **buf, size_t *len)
{
    zip_stat_t st;
    zip_file_t *zf;
    zip_int64_t got;
    size_t n = 0;

    *buf = NULL;
    zip_stat_init(&st);
    if (zip_stat(z, name, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return hc_err_set(HC_ERR_DATA, "%s: no %s in the archive (a .keras "
                          "file holds config.json, metadata.json and "
                          "model.weights.h5)", path, name);
    if (st.size > max)
        return hc_err_set(HC_ERR_LIMIT, "%s: %s has %llu bytes, more than "
                          "the %zu this model can need", path, name,
                          (unsigned long long)st.size, max);
    if (!(*buf = malloc((size_t)st.size + 1)))
        return hc_err_set(HC_ERR_NOMEM, "%s: out of memory for %s", path,
                          name);
    if (!(zf = zip_fopen(z, name, 0))) {
        free(*buf);
        *buf = NULL;
        return hc_err_set(HC_ERR_DATA, "%s: cannot open %s: %s", path, name,
                          zip_strerror(z));
    }
    while (n < st.size &&
           (got = zip_fread(zf, *buf + n, st.size - n)) > 0)
        n += (size_t)got;
    /* Reading to the end makes libzip check the member's CRC. */
    got = n == st.size ? zip_fread(zf, *buf + n, 1) : -1;
    if (n != st.size || got != 0) {
        int rv = hc_err_set(HC_ERR_DATA, "%s: %s is damaged (%s)", path, name,
                            zip_file_strerror(zf));

        zip_fclose(zf);
        free(*buf);
        *buf = NULL;
        return rv;
    }
    zip_fclose(zf);
    (*buf)[n] = '\0';
    *len = n;
    return HC_OK;
}

int hc_keras_archive_config(const char *path, size_t max, char **json,
                            size_t *len)
{
    zip_t *z;
    int rv;

    *json = NULL;
    if ((rv = open_archive(path, &z)) != HC_OK)
        return rv;
    rv = read_member(z, path, "config.json", max, json, len);
    zip_discard(z);
    return rv;
}

int hc_keras_read_weights(const char *path, const struct hc_model *m,
                          float *params)
{
    char *image = NULL;
    size_t len = 0;
    zip_t *z;
    int rv;

    if (!hc_keras_is_archive(path))
        return kx_read_weights_file(path, m, params);
    if ((rv = open_archive(path, &z)) != HC_OK)
        return rv;
    rv = read_member(z, path, "model.weights.h5",
                     m->n_params * sizeof(float) + WEIGHTS_SLACK, &image,
                     &len);
    zip_discard(z);
    if (rv == HC_OK)
        rv = kx_read_weights_image(path, image, len, m, params);
    free(image);
    return rv;
}

/* ---- config.json, as Keras 3 writes it ---------------------------------- */

/* {"module": MODULE, "class_name": CLS, "config": CONFIG,
 *  "registered_name": null}; takes config. */
static cJSON *object(const char *module, const char *cls, cJSON *config)
{
    cJSON *o = cJSON_CreateObject();

    if (!o) {
        cJSON_Delete(config);
        return NULL;
    }
    cJSON_AddStringToObject(o, "module", module);
    cJSON_AddStringToObject(o, "class_name", cls);
    cJSON_AddItemToObject(o, "config", config ? config : cJSON_CreateObject());
    cJSON_AddNullToObject(o, "registered_name");
    return o;
}

/* A layer's dtype: "float32", as Keras 3.0 to 3.3 write it and every
 * Keras 3 reads it (3.4 on write a DTypePolicy object, which older ones
 * may not take). */
static cJSON *dtype_policy(void)
{
    return cJSON_CreateString("float32");
}

/* f as the shortest decimal that reads back as f (0.2, not
 * 0.20000000298023224), as Python prints Keras's settings. */
static double tidy(float f)
{
    char b[32];

    for (int prec = 6; prec < 9; prec++) {
        snprintf(b, sizeof b, "%.*g", prec, (double)f);
        if ((float)strtod(b, NULL) == f)
            return strtod(b, NULL);
    }
    return (double)f;
}

/* [null, dims...] of a shape. */
static cJSON *batch_shape(const struct hc_shape *s)
{
    cJSON *a = cJSON_CreateArray();

    cJSON_AddItemToArray(a, cJSON_CreateNull());
    for (int i = 0; i < s->rank; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(s->dims[i]));
    return a;
}

static cJSON *pair(int a, int b)
{
    const int v[2] = {a, b};

    return cJSON_CreateIntArray(v, 2);
}

/* The arguments of a layer with weights: initializers, no regularizers. */
static void weights_args(cJSON *c, const struct hc_model *m, int use_bias)
{
    cJSON *seed = cJSON_CreateObject();

    cJSON_AddNumberToObject(seed, "seed", (double)m->seed);
    cJSON_AddBoolToObject(c, "use_bias", use_bias);
    cJSON_AddItemToObject(c, "kernel_initializer",
                          object("keras.initializers", "GlorotUniform", seed));
    cJSON_AddItemToObject(c, "bias_initializer",
                          object("keras.initializers", "Zeros", NULL));
    cJSON_AddNullToObject(c, "kernel_regularizer");
    cJSON_AddNullToObject(c, "bias_regularizer");
    cJSON_AddNullToObject(c, "activity_regularizer");
    cJSON_AddNullToObject(c, "kernel_constraint");
    cJSON_AddNullToObject(c, "bias_constraint");
}

static cJSON *layer_json(const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    cJSON *c = cJSON_CreateObject(), *o, *bc;

    cJSON_AddStringToObject(c, "name", l->name);
    cJSON_AddBoolToObject(c, "trainable", 1);
    cJSON_AddItemToObject(c, "dtype", dtype_policy());
    switch (l->type) {
    case HC_LAYER_CONV2D:
        cJSON_AddNumberToObject(c, "filters", l->filters);
        cJSON_AddItemToObject(c, "kernel_size", pair(l->kh, l->kw));
        cJSON_AddItemToObject(c, "strides", pair(l->sh, l->sw));
        cJSON_AddStringToObject(c, "padding", l->same ? "same" : "valid");
        cJSON_AddStringToObject(c, "data_format", "channels_last");
        cJSON_AddItemToObject(c, "dilation_rate", pair(1, 1));
        cJSON_AddNumberToObject(c, "groups", 1);
        cJSON_AddStringToObject(c, "activation", hc_act_name(l->act));
        weights_args(c, m, l->use_bias);
        break;
    case HC_LAYER_MAXPOOL2D:
        cJSON_AddItemToObject(c, "pool_size", pair(l->ph, l->pw));
        cJSON_AddStringToObject(c, "padding", l->same ? "same" : "valid");
        cJSON_AddItemToObject(c, "strides", pair(l->sh, l->sw));
        cJSON_AddStringToObject(c, "data_format", "channels_last");
        break;
    case HC_LAYER_FLATTEN:
        cJSON_AddStringToObject(c, "data_format", "channels_last");
        break;
    case HC_LAYER_DENSE:
        cJSON_AddNumberToObject(c, "units", l->units);
        cJSON_AddStringToObject(c, "activation", hc_act_name(l->act));
        weights_args(c, m, l->use_bias);
        break;
    case HC_LAYER_DROPOUT:
        cJSON_AddNumberToObject(c, "rate", tidy(l->rate));
        cJSON_AddNullToObject(c, "seed");
        cJSON_AddNullToObject(c, "noise_shape");
        break;
    case HC_LAYER_ACTIVATION:
        cJSON_AddStringToObject(c, "activation", hc_act_name(l->act));
        break;
    }
    if (!(o = object("keras.layers", hc_keras_class(l->type), c)))
        return NULL;
    bc = cJSON_AddObjectToObject(o, "build_config");
    cJSON_AddItemToObject(bc, "input_shape", batch_shape(&l->in));
    if (l->device[0])
        cJSON_AddStringToObject(o, "device", l->device);
    return o;
}

static cJSON *optimizer_json(const struct hc_optim_conf *o)
{
    cJSON *c = cJSON_CreateObject();
    int adam = o->type == HC_OPT_ADAM;

    cJSON_AddStringToObject(c, "name", adam ? "adam" : "SGD");
    cJSON_AddNumberToObject(c, "learning_rate", tidy(o->lr));
    cJSON_AddNullToObject(c, "weight_decay");
    cJSON_AddNullToObject(c, "clipnorm");
    cJSON_AddNullToObject(c, "global_clipnorm");
    cJSON_AddNullToObject(c, "clipvalue");
    cJSON_AddBoolToObject(c, "use_ema", 0);
    cJSON_AddNumberToObject(c, "ema_momentum", 0.99);
    cJSON_AddNullToObject(c, "ema_overwrite_frequency");
    /* Later Keras adds loss_scale_factor and gradient_accumulation_steps,
     * both off by default: left out, so that Keras 3.0 takes the file. */
    if (adam) {
        cJSON_AddNumberToObject(c, "beta_1", tidy(o->beta1));
        cJSON_AddNumberToObject(c, "beta_2", tidy(o->beta2));
        cJSON_AddNumberToObject(c, "epsilon", tidy(o->eps));
        cJSON_AddBoolToObject(c, "amsgrad", 0);
    } else {
        cJSON_AddNumberToObject(c, "momentum", tidy(o->momentum));
        cJSON_AddBoolToObject(c, "nesterov", o->nesterov);
    }
    return object("keras.optimizers", adam ? "Adam" : "SGD", c);
}

static cJSON *compile_json(const struct hc_model *m)
{
    cJSON *c = cJSON_CreateObject();

    cJSON_AddItemToObject(c, "optimizer", optimizer_json(&m->optim));
    cJSON_AddStringToObject(c, "loss", m->loss == HC_LOSS_MSE
                            ? "mean_squared_error"
                            : "sparse_categorical_crossentropy");
    cJSON_AddNullToObject(c, "loss_weights");
    if (m->metric_accuracy)
        cJSON_AddItemToObject(c, "metrics", cJSON_CreateStringArray(
                                  (const char *[]){"accuracy"}, 1));
    else
        cJSON_AddNullToObject(c, "metrics");
    cJSON_AddNullToObject(c, "weighted_metrics");
    cJSON_AddBoolToObject(c, "run_eagerly", 0);
    cJSON_AddNumberToObject(c, "steps_per_execution", 1);
    cJSON_AddBoolToObject(c, "jit_compile", 0);
    return c;
}

int hc_keras_config_json(const struct hc_model *m, char **json)
{
    cJSON *cfg = cJSON_CreateObject(), *layers, *in, *ic, *root, *bc;

    *json = NULL;
    if (!cfg)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    cJSON_AddStringToObject(cfg, "name", m->name);
    cJSON_AddBoolToObject(cfg, "trainable", 1);
    cJSON_AddItemToObject(cfg, "dtype", dtype_policy());
    layers = cJSON_AddArrayToObject(cfg, "layers");
    ic = cJSON_CreateObject();
    cJSON_AddItemToObject(ic, "batch_shape", batch_shape(&m->input));
    cJSON_AddStringToObject(ic, "dtype", "float32");
    cJSON_AddBoolToObject(ic, "sparse", 0);
    cJSON_AddStringToObject(ic, "name", "input_layer");
    in = object("keras.layers", "InputLayer", ic);
    cJSON_AddItemToArray(layers, in);
    for (int i = 0; i < m->n_layers; i++)
        cJSON_AddItemToArray(layers, layer_json(m, &m->layers[i]));
    cJSON_AddItemToObject(cfg, "build_input_shape", batch_shape(&m->input));
    root = object("keras", "Sequential", cfg);
    if (root) {
        bc = cJSON_AddObjectToObject(root, "build_config");
        cJSON_AddItemToObject(bc, "input_shape", batch_shape(&m->input));
        cJSON_AddItemToObject(root, "compile_config", compile_json(m));
        *json = cJSON_PrintUnformatted(root);
    }
    cJSON_Delete(root);
    if (!*json)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for config.json");
    return HC_OK;
}

/* ---- writing an archive ------------------------------------------------- */

/* Add a member from the memory at buf (kept alive until zip_close). */
static int add_buffer(zip_t *z, const char *name, const char *buf)
{
    zip_source_t *s = zip_source_buffer(z, buf, strlen(buf), 0);

    if (!s)
        return -1;
    if (zip_file_add(z, name, s, ZIP_FL_ENC_UTF_8) < 0) {
        zip_source_free(s);
        return -1;
    }
    return 0;
}

int hc_keras_write_archive(const char *path, const struct hc_model *m,
                           const float *params)
{
    char tmp[4096], h5[4096], meta[128], date[32];
    char *config = NULL;
    zip_source_t *s;
    zip_int64_t idx;
    zip_t *z = NULL;
    time_t now = time(NULL);
    int rv, code = 0;

    if (snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid()) >=
            (int)sizeof tmp ||
        snprintf(h5, sizeof h5, "%s.h5tmp%d", path, (int)getpid()) >=
            (int)sizeof h5)
        return hc_err_set(HC_ERR_INVAL, "%.64s…: path too long", path);
    strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", localtime(&now));
    snprintf(meta, sizeof meta, "{\"keras_version\": \"%s\", "
             "\"date_saved\": \"%s\"}", HC_KERAS_VERSION, date);
    if ((rv = hc_keras_config_json(m, &config)) != HC_OK ||
        (rv = kx_write_weights_file(h5, path, m, params)) != HC_OK)
        goto out;
    if (!(z = zip_open(tmp, ZIP_CREATE | ZIP_TRUNCATE, &code))) {
        rv = hc_err_set(HC_ERR_IO, "%s: cannot create the archive (zip "
                        "error %d)", path, code);
        goto out;
    }
    if (add_buffer(z, "metadata.json", meta) != 0 ||
        add_buffer(z, "config.json", config) != 0 ||
        !(s = zip_source_file(z, h5, 0, 0))) {
        rv = hc_err_set(HC_ERR_IO, "%s: %s", path, zip_strerror(z));
        goto out;
    }
    if ((idx = zip_file_add(z, "model.weights.h5", s, ZIP_FL_ENC_UTF_8)) < 0) {
        zip_source_free(s);
        rv = hc_err_set(HC_ERR_IO, "%s: %s", path, zip_strerror(z));
        goto out;
    }
    /* Keras stores its members uncompressed; so do we. */
    zip_set_file_compression(z, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
    if (zip_close(z) != 0) {
        rv = hc_err_set(HC_ERR_IO, "%s: cannot write the archive: %s", path,
                        zip_strerror(z));
        goto out;
    }
    z = NULL;
    if (rename(tmp, path) != 0)
        rv = hc_err_set(HC_ERR_IO, "%s: %s", path, strerror(errno));
out:
    if (z)
        zip_discard(z);
    if (rv != HC_OK)
        unlink(tmp);
    unlink(h5);
    free(config);
    return rv;
}
