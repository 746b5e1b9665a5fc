/*
 * eval.c — evaluating weights, and reading them back from .npy files
 * (see eval.h). A .npy file (NumPy format 1.0 or 2.0): "\x93NUMPY", major
 * and minor version, header length (u16 LE, or u32 LE for 2.0), a Python
 * dict literal with 'descr', 'fortran_order' and 'shape', then the data.
 * Keras's own weights files are read by common/keras.h.
 */
#include "eval.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "keras.h"
#include "npy.h"

#include <sys/stat.h>

/* wk_predict_all, and each sample's label into y_all (d->n) unless it is
 * NULL. */
static int predict_rows(struct wk_replicas *r, const float *params,
                        const struct wk_dataset *d, int batch, float *x,
                        float *out, int32_t *y_all)
{
    const size_t n_out = wk_replicas_output_size(r);
    long long start;
    int n, rv;

    for (start = 0; start < d->n; start += n) {
        n = wk_data_batch(d, start, batch, x, y_all ? y_all + start : NULL);
        if (n < 0)
            return -n;
        if (n == 0)
            break;
        rv = wk_replicas_outputs(r, params, x, n, out + (size_t)start * n_out);
        if (rv != HC_OK)
            return rv;
    }
    return HC_OK;
}

int wk_evaluate(struct wk_replicas *r, const float *params,
                const struct wk_dataset *d, int batch, float *x, int32_t *y,
                double *loss, double *acc)
{
    double sum = 0, s;
    long long correct = 0, start;
    int n, k, rv;

    for (start = 0; start < d->n; start += n) {
        n = wk_data_batch(d, start, batch, x, y);
        if (n < 0)
            return -n;
        if (n == 0)
            break;
        rv = wk_replicas_predict(r, params, x, y, NULL, n, &s, &k);
        if (rv != HC_OK)
            return rv;
        sum += s;
        correct += k;
    }
    *loss = sum / (double)d->n;
    *acc = (double)correct / (double)d->n;
    return HC_OK;
}

int wk_eval_held_fits(const struct wk_dataset *d, const char *what)
{
    if (d->n <= WK_EVAL_HELD_MAX)
        return HC_OK;
    return hc_err_set(HC_ERR_LIMIT, "%s: %lld samples; %s holds every "
                      "sample's outputs at once, at most %lld samples "
                      "(2^28): give a shorter file (the first lines, e.g. "
                      "head -n %lld)", d->images_path, d->n, what,
                      WK_EVAL_HELD_MAX, WK_EVAL_HELD_MAX);
}

int wk_evaluate_metrics_fit(const struct hc_model *m,
                            const struct wk_dataset *d)
{
    for (int i = 0; i < m->n_metrics; i++)
        if (m->metrics[i].kind != HC_EM_ACCURACY)
            return wk_eval_held_fits(d, "the metrics other than accuracy");
    return HC_OK;
}

int wk_evaluate_metrics(struct wk_replicas *r, const struct hc_model *m,
                        const float *params, const struct wk_dataset *d,
                        int batch, float *x, double *vals)
{
    const int c = (int)wk_replicas_output_size(r);
    const int bce = m->loss == HC_LOSS_BCE;
    float *out;
    int32_t *y = NULL;          /* (d->n) a streamed set's labels */
    int i, rv, any = 0;

    for (i = 0; i < m->n_metrics; i++)
        any |= m->metrics[i].kind != HC_EM_ACCURACY;
    if (!any || d->n < 1)
        return HC_OK;
    if ((rv = wk_evaluate_metrics_fit(m, d)) != HC_OK)
        return rv;
    if (!d->y && !d->src.read)
        return hc_err_set(HC_ERR_DATA, "metrics need the labels of %s",
                          d->images_path);
    /* a streamed set's labels are gathered as it is read */
    if (d->src.read && !(y = malloc((size_t)d->n * sizeof *y)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory for the labels of "
                          "%lld samples (metrics)", d->n);
    if (!(out = malloc((size_t)d->n * (size_t)c * sizeof *out))) {
        free(y);
        return hc_err_set(HC_ERR_NOMEM, "out of memory for the outputs of "
                          "%lld samples (metrics)", d->n);
    }
    rv = predict_rows(r, params, d, batch, x, out, y);
    for (i = 0; rv == HC_OK && i < m->n_metrics; i++)
        if (m->metrics[i].kind != HC_EM_ACCURACY)
            rv = hc_eval_metric_value(&m->metrics[i], bce,
                                      m->loss_par.from_logits, out,
                                      y ? y : d->y, (int)d->n, c,
                                      &vals[i]);
    free(out);
    free(y);
    return rv;
}

/* 1 when arrays of shape (h, w, c) per sample feed input shape s. */
static int fits(const struct hc_shape *s, int h, int w, int c, char *shape,
                size_t len)
{
    const int *in = s->dims;

    if (s->rank == 3) {
        snprintf(shape, len, "(%d, %d, %d)", in[0], in[1], in[2]);
        return h == in[0] && w == in[1] && c == in[2];
    }
    snprintf(shape, len, "(%d,)", in[0]);
    return (long)h * w * c == in[0];
}

/* wk_check_input for a data set of named arrays. */
static int check_inputs(const struct hc_model *m, const struct wk_dataset *d)
{
    char shape[64];

    if (d->n_inputs != m->n_inputs)
        return hc_err_set(HC_ERR_MISMATCH, "%s holds %d array(s), but model "
                          "%s (%s) has %d inputs", d->images_path,
                          d->n_inputs ? d->n_inputs : 1, m->name, m->source,
                          m->n_inputs);
    for (int q = 0; q < m->n_inputs; q++) {
        const struct wk_data_input *in = &d->inputs[q];

        if (strcmp(in->name, m->inputs[q].name))
            return hc_err_set(HC_ERR_MISMATCH, "array %d of %s feeds input "
                              "%s, but the model's input %d is %s", q,
                              d->images_path, in->name, q,
                              m->inputs[q].name);
        struct hc_shape want = m->inputs[q].shape;

        if (m->inputs[q].ids)           /* each id's bytes: HC_ID_FLOATS */
            want.dims[0] *= HC_ID_FLOATS;
        if (!fits(&want, in->h, in->w, in->c, shape, sizeof shape))
            return hc_err_set(HC_ERR_MISMATCH, "input %s: %s holds samples "
                              "of shape (%d, %d, %d), but model %s (%s) "
                              "takes input %s of shape %s", in->name,
                              in->path, in->h, in->w, in->c, m->name,
                              m->source, in->name, shape);
    }
    return HC_OK;
}

int wk_check_input(const struct hc_model *m, const struct wk_dataset *d)
{
    const int *in = m->input.dims;
    char shape[64];

    if (m->n_inputs > 1 || d->n_inputs > 0)
        return check_inputs(m, d);
    if (m->input.rank == 3) {
        if (d->h == in[0] && d->w == in[1] && d->c == in[2])
            return HC_OK;
        snprintf(shape, sizeof shape, "(%d, %d, %d)", in[0], in[1], in[2]);
    } else {
        if ((long)d->h * d->w * d->c == in[0])
            return HC_OK;
        snprintf(shape, sizeof shape, "(%d,)", in[0]);
    }
    return hc_err_set(HC_ERR_MISMATCH, "images file %s holds images of shape "
                      "(%d, %d, %d), but model %s (%s) takes input of shape "
                      "%s", d->images_path, d->h, d->w, d->c, m->name,
                      m->source, shape);
}

int wk_predict_all(struct wk_replicas *r, const float *params,
                   const struct wk_dataset *d, int batch, float *x,
                   float *out)
{
    return predict_rows(r, params, d, batch, x, out, NULL);
}

static int load_one(const struct hc_var_def *v, const char *path, float *dst)
{
    struct hc_npy_info h;
    uint64_t want[HC_NPY_MAX_DIMS];
    char want_s[64], got_s[64];
    size_t got_n;
    int i, rv, same;
    FILE *f = fopen(path, "rb");

    if (!f)
        return hc_err_set(errno == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                          "%s: %s (variable %s)", path, strerror(errno), v->name);
    if ((rv = hc_npy_read_header(f, path, &h)) != HC_OK)
        goto out;
    if (strcmp(h.descr, "<f4") != 0) {
        rv = hc_err_set(HC_ERR_DATA, "%s: not little-endian float32 "
                        "(save with dtype=numpy.float32)", path);
        goto out;
    }
    if (h.fortran_order) {
        rv = hc_err_set(HC_ERR_DATA, "%s: Fortran order; save a C-ordered "
                        "array (numpy.ascontiguousarray)", path);
        goto out;
    }
    same = h.ndim == v->ndim;
    for (i = 0; i < v->ndim; i++) {
        want[i] = (uint64_t)v->shape[i];
        same = same && h.shape[i] == want[i];
    }
    if (!same) {
        rv = hc_err_set(HC_ERR_MISMATCH, "%s has shape %s; the model's %s is "
                        "%s", path, hc_npy_shape_str(h.shape, h.ndim, got_s,
                                                     sizeof got_s),
                        v->name, hc_npy_shape_str(want, v->ndim, want_s,
                                                  sizeof want_s));
        goto out;
    }
    got_n = fread(dst, sizeof(float), v->size, f);
    if (got_n != v->size) {
        rv = hc_err_set(HC_ERR_DATA, "%s: truncated: %zu of %zu values", path,
                        got_n, v->size);
        goto out;
    }
    if (fgetc(f) != EOF)
        rv = hc_err_set(HC_ERR_DATA, "%s: bytes after the data", path);
out:
    fclose(f);
    return rv;
}

int wk_load_npy(const struct hc_model *m, const char *dir, float *params)
{
    int v, rv;

    for (v = 0; v < m->n_vars; v++) {
        char path[PATH_MAX];

        if (m->vars[v].table_rows)
            continue;           /* rows, not params: init_tables.h */
        snprintf(path, sizeof path, "%s/%s.npy", dir, m->vars[v].name);
        rv = load_one(&m->vars[v], path, params + hc_model_var_offset(m, v));
        if (rv != HC_OK)
            return rv;
    }
    return HC_OK;
}

int wk_load_weights(const struct hc_model *m, const char *path,
                    float *params)
{
    struct stat st;

    if (stat(path, &st) != 0)
        return hc_err_set(errno == ENOENT ? HC_ERR_NOTFOUND : HC_ERR_IO,
                          "weights %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return wk_load_npy(m, path, params);
    return hc_keras_read_weights(path, m, params);
}
