/*
 * ctr_inputs.c — a click-through file (data_ctr.h) read whole into a data
 * set of the model's inputs (ctr_inputs.h): which input each column group
 * feeds, then the lines in chunks, packed a sample's row at a time.
 */
#include "ctr_inputs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_ctr.h"
#include "err.h"

#define CHUNK 65536     /* lines read at once */

/* What feeds what: the model's inputs q_cat (ids) and q_num (−1: none). */
struct plan {
    int q_cat, q_num;
    uint64_t input_dim;     /* of the embedding reading q_cat */
};

int wk_ctr_inputs_spec(const char *spec)
{
    return spec && (!strncmp(spec, "criteo:", 7) || !strncmp(spec, "libsvm:", 7));
}

/* The input_dim of the embeddings reading input q (they must agree). */
static int table_dim(const struct hc_model *m, int q, uint64_t *dim)
{
    *dim = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *l = &m->layers[i];

        if (l->type != HC_LAYER_EMBEDDING || l->in_from[0] != -1 - q)
            continue;
        if (*dim && *dim != l->input_dim)
            return hc_err_set(HC_ERR_CONFIG, "model %s: embeddings of "
                              "input_dim %llu and %llu read input \"%s\"; "
                              "click-through ids are made for one input_dim",
                              m->name, (unsigned long long)*dim,
                              (unsigned long long)l->input_dim,
                              m->inputs[q].name);
        *dim = l->input_dim;
    }
    return HC_OK;
}

/* The input named name, else the one of ids (or floats) n wide; −1
 * none, −2 several. */
static int find_input(const struct hc_model *m, const char *name, int ids,
                      int n)
{
    int found = -1;

    for (int q = 0; q < m->n_inputs; q++)
        if (!strcmp(m->inputs[q].name, name))
            return q;
    for (int q = 0; q < m->n_inputs; q++)
        if (m->inputs[q].ids == ids && m->inputs[q].shape.rank == 1 &&
            m->inputs[q].shape.dims[0] == n)
            found = found == -1 ? q : -2;
    return found;
}

static int make_plan(const struct hc_model *m, const char *path, int n_cat,
                     int n_num, struct plan *p)
{
    const struct hc_model_input *c;
    int rv;

    p->q_cat = find_input(m, "categorical", 1, n_cat);
    p->q_num = find_input(m, "numeric", 0, n_num);
    if (p->q_cat < 0)
        return hc_err_set(HC_ERR_CONFIG, "%s holds %d categorical ids a "
                          "line; model %s has %s input of %d int64 ids to "
                          "take them (name it \"categorical\")", path, n_cat,
                          m->name, p->q_cat == -2 ? "more than one" : "no",
                          n_cat);
    c = &m->inputs[p->q_cat];
    if (!c->ids || c->shape.rank != 1 || c->shape.dims[0] != n_cat)
        return hc_err_set(HC_ERR_CONFIG, "%s holds %d categorical ids a "
                          "line, but model %s's input \"%s\" is not %d int64 "
                          "ids (\"shape\": [%d], \"dtype\": \"int64\")", path,
                          n_cat, m->name, c->name, n_cat, n_cat);
    if (p->q_num == -2)
        return hc_err_set(HC_ERR_CONFIG, "model %s has several float inputs "
                          "of %d values; name the one for %s's numeric "
                          "fields \"numeric\"", m->name, n_num, path);
    if (p->q_num >= 0 && (m->inputs[p->q_num].ids ||
                          m->inputs[p->q_num].shape.rank != 1 ||
                          m->inputs[p->q_num].shape.dims[0] != n_num))
        return hc_err_set(HC_ERR_CONFIG, "%s holds %d numeric values a line, "
                          "but model %s's input \"%s\" is not %d floats",
                          path, n_num, m->name, m->inputs[p->q_num].name,
                          n_num);
    if (m->n_inputs != 1 + (p->q_num >= 0))
        return hc_err_set(HC_ERR_CONFIG, "model %s has %d inputs; %s feeds "
                          "two: \"categorical\" (%d int64 ids) and "
                          "\"numeric\" (%d floats)", m->name, m->n_inputs,
                          path, n_cat, n_num);
    if ((rv = table_dim(m, p->q_cat, &p->input_dim)))
        return rv;
    if (!p->input_dim)
        return hc_err_set(HC_ERR_CONFIG, "model %s: no embedding reads input "
                          "\"%s\"", m->name, c->name);
    return HC_OK;
}

/* The data set's description of its inputs: widths in floats. */
static void describe(const struct hc_model *m, const struct plan *p,
                     const char *path, struct wk_dataset *d)
{
    size_t off = 0;

    d->n_inputs = m->n_inputs;
    for (int q = 0; q < m->n_inputs; q++) {
        struct wk_data_input *in = &d->inputs[q];

        snprintf(in->name, sizeof in->name, "%s", m->inputs[q].name);
        snprintf(in->path, sizeof in->path, "%s", path);
        in->h = in->w = 1;
        in->c = m->inputs[q].shape.dims[0] *
                (q == p->q_cat ? HC_ID_FLOATS : 1);
        in->off = off;
        off += (size_t)in->c;
    }
    d->h = d->w = 1;
    d->c = (int)off;
    snprintf(d->images_path, sizeof d->images_path, "%s", path);
    snprintf(d->labels_path, sizeof d->labels_path, "%s", path);
    d->n_classes = 2;
}

/* Lines [at, at + n) read into label, num, cat, packed into d's rows. */
static void pack(struct wk_dataset *d, const struct plan *p, long long at,
                 int n, const float *label, const float *num,
                 const int64_t *cat, int n_num, int n_cat)
{
    for (int i = 0; i < n; i++) {
        float *row = d->x + (size_t)(at + i) * (size_t)d->c;

        memcpy(row + d->inputs[p->q_cat].off, cat + (size_t)i * n_cat,
               (size_t)n_cat * sizeof *cat);
        if (p->q_num >= 0)
            memcpy(row + d->inputs[p->q_num].off, num + (size_t)i * n_num,
                   (size_t)n_num * sizeof *num);
        d->y[at + i] = label[i] > 0.5f;
    }
}

int wk_ctr_inputs_load(const char *spec, const char *flag,
                       const struct hc_model *m, struct wk_dataset *out)
{
    struct wk_ctr_opts o = {0};
    struct wk_ctr *c = NULL;
    struct plan p = {0};
    float *label = NULL, *num = NULL;
    int64_t *cat = NULL;
    const char *path = spec + 7;
    long long n_lines, at;
    int n_num, n_cat, rv;

    memset(out, 0, sizeof *out);
    if (!wk_ctr_inputs_spec(spec))
        return hc_err_set(HC_ERR_CONFIG, "%s %s: a click-through file is "
                          "criteo:PATH or libsvm:PATH", flag, spec);
    o.format = strncmp(spec, "criteo:", 7) ? WK_CTR_LIBSVM : WK_CTR_CRITEO;
    /* The ids' rule needs input_dim: the plan for Criteo's widths first
     * (libsvm's are known once it is open, then checked again). */
    o.input_dim = 1;
    for (int q = 0; q < m->n_inputs; q++) {
        uint64_t dim;

        if (m->inputs[q].ids && table_dim(m, q, &dim) == HC_OK && dim)
            o.input_dim = dim;
    }
    if ((rv = wk_ctr_open(path, &o, &c)))
        goto out;
    n_num = wk_ctr_n_num(c);
    n_cat = wk_ctr_n_cat(c);
    n_lines = wk_ctr_lines(c);
    if ((rv = make_plan(m, path, n_cat, n_num, &p)))
        goto out;
    if (p.input_dim != o.input_dim) {
        rv = hc_err_set(HC_ERR_CONFIG, "model %s: its ids inputs' tables "
                        "differ in input_dim; %s feeds one", m->name, path);
        goto out;
    }
    if (n_lines > (long long)INT32_MAX) {
        rv = hc_err_set(HC_ERR_LIMIT, "%s: %lld lines; at most 2^31 − 1 are "
                        "read into memory", path, n_lines);
        goto out;
    }
    describe(m, &p, path, out);
    out->n = (int)n_lines;
    label = malloc(CHUNK * sizeof *label);
    num = malloc((size_t)CHUNK * (size_t)n_num * sizeof *num);
    cat = malloc((size_t)CHUNK * (size_t)n_cat * sizeof *cat);
    out->x = malloc((size_t)n_lines * (size_t)out->c * sizeof *out->x);
    out->y = malloc((size_t)n_lines * sizeof *out->y);
    if (!label || !num || !cat || !out->x || !out->y) {
        rv = hc_err_set(HC_ERR_NOMEM, "%s: out of memory for %lld lines of "
                        "%d floats", path, n_lines, out->c);
        goto out;
    }
    for (at = 0; at < n_lines;) {
        int want = n_lines - at < CHUNK ? (int)(n_lines - at) : CHUNK, got;

        if ((rv = wk_ctr_read(c, at, want, label, num, cat, &got)))
            goto out;
        if (got != want) {
            rv = hc_err_set(HC_ERR_DATA, "%s: %d lines read at line %lld, "
                            "%d expected", path, got, at + 1, want);
            goto out;
        }
        pack(out, &p, at, got, label, num, cat, n_num, n_cat);
        at += got;
    }
out:
    free(label);
    free(num);
    free(cat);
    wk_ctr_close(c);
    if (rv != HC_OK)
        wk_data_free(out);
    return rv;
}
