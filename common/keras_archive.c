/*
 * keras_archive.c — the `.keras` file of Keras 3 (keras.h): a zip, read
 * and written with Debian's libzip, holding config.json (the model as
 * Keras serialises it, with its compile_config), metadata.json (the Keras
 * version that wrote it) and model.weights.h5 (keras_h5.c). Reading takes
 * config.json for the model and model.weights.h5 for its weights, each
 * sized against its limit before it is read; writing puts config.json
 * (keras_config.c) and the weights file (keras_h5.c) in an archive made
 * beside its name, renamed when whole. Which weights file
 * hc_keras_read_weights reads — an archive or a bare .weights.h5 — is
 * decided here by the file's first bytes.
 */
#include "keras.h"
#include "keras_impl.h"

#include "err.h"

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

/* The weights (params not NULL) and the optimizer's state (o not NULL)
 * of a weights file or an archive's model.weights.h5. */
static int read_h5(const char *path, const struct hc_model *m, float *params,
                   struct hc_keras_optim *o)
{
    char *image = NULL;
    size_t len = 0;
    zip_t *z;
    int rv;

    if ((rv = kx_no_tables(m, path)) != HC_OK)
        return rv;
    if (!hc_keras_is_archive(path))
        return kx_read_weights_file(path, m, params, o);
    if ((rv = open_archive(path, &z)) != HC_OK)
        return rv;
    /* the parameters and, with the optimizer, up to as many again a slot */
    rv = read_member(z, path, "model.weights.h5",
                     (1 + HC_KERAS_MAX_SLOTS) * m->n_params * sizeof(float) +
                         WEIGHTS_SLACK, &image, &len);
    zip_discard(z);
    if (rv == HC_OK)
        rv = kx_read_weights_image(path, image, len, m, params, o);
    free(image);
    return rv;
}

int hc_keras_read_weights(const char *path, const struct hc_model *m,
                          float *params)
{
    return read_h5(path, m, params, NULL);
}

int hc_keras_read_optim(const char *path, const struct hc_model *m,
                        struct hc_keras_optim *o)
{
    return read_h5(path, m, NULL, o);
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
                           const float *params,
                           const struct hc_keras_optim *o)
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
        (rv = kx_write_weights_file(h5, path, m, params, o)) != HC_OK)
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
